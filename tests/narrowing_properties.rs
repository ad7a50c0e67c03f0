//! Soundness and completeness of the narrowing check, measured on random parent/child pairs.
//!
//! Each pair is a random parent mandate (sometimes under a random root) and a child that is either a mutation of
//! the parent (rules dropped, added, narrowed with `and`, widened with `or`, windows, levels, budgets moved) or
//! entirely random, over a small catalog with money, string, enum, int and set parameters, a context attribute,
//! the resource, `now`, `attempt`, the credential's scopes and the tool's level (plus bool, decimal and duration
//! parameters on one tool). Then random requests are
//! decided by the reference interpreter for the child standing alone and for its parent.
//! - Soundness: when the check says "narrows", no request is allowed by the child and refused by the parent.
//! - Every counterexample the check reports is confirmed by the interpreter (the check itself confirms; an
//!   unconfirmed one is an internal error and fails this test), and the check never gives up (undecided).
//! - Incompleteness, reported: how often the check says "widens" where the random requests found no witness
//!   (the check's own witness is always confirmed, so this measures the random search, not the check).
//!
//! - The world (docs/narrowing.md): a third of the pairs also draw world atoms — subject and resource attributes of
//!   several types, comparisons of two attributes and of an attribute with the principal, membership in a set
//!   attribute, relation atoms over attributes and constants, four calendars (two inside a third, one of them in
//!   another zone, and one across its end) and a duration — and their requests fill `subject.properties`,
//!   `resource.properties` and `context.relations` from small pools, so that equalities happen. Some children restate
//!   a parent's comparison through an intermediate term (`a == z and z == c` for `a == c`, `a < z and z <= c` for
//!   `a < c`, `a <= z and z <= 10` for `a <= 10`) or swap its calendar for another, which only the theory decides.
//!   What the proof still treats as opaque (durations, memberships, calendars in two zones over an unbounded window)
//!   may leave a pair undecided or unconfirmed there: counted and reported as the world's incompleteness, never as
//!   "narrows".
//!
//! Size: `NARROWING_PAIRS` pairs (default 10,000, split over four tests that run in parallel) × `NARROWING_REQUESTS`
//! requests (default 100).

mod support;

use remit_lang::check::narrowing::for_parent;
use remit_lang::check::narrowing::{analyse, Kind};
use remit_lang::check::{check_with, Options};
use remit_lang::eval::{argument_digest, decide, Outcome};
use remit_lang::ir::{Atom, Attr, Cond, Mandate, Program, Rule, RuleKind, Target, Term, Test, Type, Value};
use remit_lang::source::Span;
use remit_lang::syntax::ast::{CompareOp, FactVersion, Outcome as Otherwise, Window};
use remit_lang::value::{format_instant, parse_timestamp, Decimal, Money, NANOS_PER_SECOND as NS};
use serde_json::Value as Json;
use support::rng::SplitMix as Rng;

const CATALOG: &str = r#"
enum tier { basic, pro, max }
context region: string
effect spend(amount: money) "moves money"
effect look "reads"

tool pay(amount: money, merchant: string, tier: tier, n: int, tags: set<string>, manifest: string) {
  effects spend
  level local_change
  side effects
}

tool give_back(amount: money, merchant: string, urgent: bool, rate: decimal, wait: duration) {
  effects spend
  level draft
  side effects
}

tool lookup(merchant: string, n: int) {
  effects look
  level research
}

tool announce(manifest: string, tier: tier) {
  effects look
  level publish
  side effects
  requires scope "pub"
}

subject agent {
  team: string
  accounts: set<string>
  limit: money
  clearance: int
}

resource order {
  owner: string
  team: string
  total: money
  due: timestamp
}

relation owns(string, string)
relation member_of(string, string)

calendar business_hours in "Europe/Berlin" {
  mon..fri 09:00-17:00
}

calendar mornings in "Europe/Berlin" {
  mon..fri 09:00-12:00
  closed on 2026-12-24
}

calendar late in "Europe/Berlin" {
  mon..fri 16:00-19:00
  2026-12-24 09:00-12:00
}

calendar london in "Europe/London" {
  mon..fri 09:00-12:00
}

tool transfer(amount: money, payee: string, account: string, n: int, start: timestamp, end: timestamp) {
  effects spend
  level draft
  side effects
}
"#;

/// The principal of every generated mandate: `principal` in a condition is this literal.
const PRINCIPAL: &str = "owner:p";
/// The values of every textual world term (attributes, relation terms), few so that equalities happen.
const IDS: [&str; 4] = [PRINCIPAL, "user:bob", "team:x", "team:y"];
/// The calendars of the catalog: `mornings` inside `business_hours`, `late` across its end, `london` inside it in
/// another zone (London is an hour behind Berlin all year).
const CALENDARS: [&str; 4] = ["business_hours", "mornings", "late", "london"];
/// Seconds a duration condition compares with: an hour, and about a month (the pool's times are months apart).
const SPANS: [i64; 4] = [0, 3600, 2_592_000, 2_678_400];

const MERCHANTS: [&str; 5] = ["acme", "globex", "initech", "casino", "acme-x"];
const TIERS: [&str; 3] = ["basic", "pro", "max"];
const TAGS: [&str; 3] = ["a", "b", "c"];
/// `site/../docs/x` starts with `site/` but is under nothing: `under` refuses a path with a `..` segment.
const RESOURCES: [&str; 6] = ["site/a/1", "site/b/2", "site/", "docs/x", "other", "site/../docs/x"];
const PREFIXES: [&str; 5] = ["site/", "site/a/", "docs/", "acme", "s"];
const REGIONS: [&str; 3] = ["eu", "us", "uk"];
const AMOUNTS: [&str; 8] = ["0", "10", "50", "50.01", "100", "100.5", "200", "500"];
const INTS: [i64; 6] = [-1, 0, 1, 3, 5, 10];
const RATES: [&str; 5] = ["0", "0.5", "0.55", "1", "2.25"];
const WAITS: [i64; 4] = [0, 60, 900, 3600];
const TIMES: [&str; 5] = [
    "2026-10-01T00:00:00Z",
    "2026-11-01T00:00:00Z",
    "2026-12-01T00:00:00Z",
    "2027-01-01T00:00:00Z",
    "2027-02-01T00:00:00Z",
];
const SCOPES: [&str; 3] = ["pub", "x", "y"];
const FACTS: [&str; 2] = ["sheet", "terms"];
const COUNTERS: [&str; 2] = ["calls", "spent"];

fn time(text: &str) -> i64 {
    parse_timestamp(text).expect("pool timestamps parse")
}

fn money(amount: &str, currency: &str) -> Value {
    Value::Money(Money { amount: Decimal::parse(amount).expect("pool amounts parse"), currency: currency.into() })
}

fn string(s: &str) -> Value {
    Value::String(s.to_string())
}

fn int(n: i64) -> Value {
    Value::Number(Decimal::from_int(n))
}

struct World {
    base: Program,
    tier: Type,
    approvals: Vec<usize>,
    /// Whether the pair being generated draws world atoms.
    world: std::cell::Cell<bool>,
}

impl World {
    fn new() -> World {
        let mut sources = remit_lang::stdlib::sources();
        sources.add("catalog.remit", CATALOG);
        let checked = check_with(sources, Options { narrowing: false });
        let mut base = checked.program.unwrap_or_else(|| panic!("catalog: {:#?}", checked.diagnostics));
        // The generated rules gate any tool with any kind, `binds manifest` included, which the checker only allows
        // on tools with a `manifest` parameter: open arguments keep such calls possible, as the symbolic model
        // (which does not model closed tools) assumes.
        for tool in &mut base.tools {
            tool.open_arguments = true;
        }
        let tier = Type::Enum("tier".into(), TIERS.iter().map(|t| t.to_string()).collect());
        let approvals = ["operator", "human_publication", "legal"]
            .iter()
            .map(|k| base.approvals.iter().position(|a| a.name == *k).expect("stdlib approval kind"))
            .collect();
        World { base, tier, approvals, world: std::cell::Cell::new(false) }
    }

    fn tool(&self, name: &str) -> usize {
        self.base.tool(name).expect("catalog tool")
    }

    fn effect(&self, name: &str) -> usize {
        self.base.effects.iter().position(|e| e.name == name).expect("catalog effect")
    }

    fn target(&self, rng: &mut Rng) -> Target {
        if self.world.get() && rng.chance(25) {
            return Target::Tool(self.tool("transfer"));
        }
        match rng.below(20) {
            0..=3 => Target::Tool(self.tool("pay")),
            4..=6 => Target::Tool(self.tool("give_back")),
            7..=9 => Target::Tool(self.tool("lookup")),
            10..=11 => Target::Tool(self.tool("announce")),
            12..=14 => Target::Effect(self.effect("spend")),
            15..=16 => Target::Effect(self.effect("look")),
            17..=18 => Target::SideEffects,
            _ => Target::AnyTool,
        }
    }

    /// The attributes a condition on `target` may read, with their types.
    fn attributes(&self, target: &Target) -> Vec<(Attr, Type)> {
        let mut out = vec![
            (Attr::ResourceId, Type::String),
            (Attr::Context("region".into()), Type::String),
            (Attr::Now, Type::Timestamp),
            (Attr::Attempt, Type::Int),
            (Attr::SubjectScopes, Type::Set(Box::new(Type::String))),
            (Attr::Level, Type::Level),
        ];
        let params: Vec<(String, Type)> = match target {
            Target::Tool(t) => self.base.tools[*t].params.clone(),
            Target::Effect(e) => self.base.effects[*e].params.clone(),
            _ => Vec::new(),
        };
        for (name, ty) in params {
            out.push((Attr::Arg(name), ty));
        }
        out
    }

    /// The world's terms a condition on `target` may compare, by type: declared attributes, `now`, and the
    /// target's arguments of that type.
    fn world_terms(&self, target: &Target, ty: &Type) -> Vec<Attr> {
        let mut out: Vec<Attr> = match ty {
            Type::String => vec![
                Attr::Subject("team".into()),
                Attr::Resource("owner".into()),
                Attr::Resource("team".into()),
                Attr::SubjectId,
            ],
            Type::Money => vec![Attr::Subject("limit".into()), Attr::Resource("total".into())],
            Type::Int => vec![Attr::Subject("clearance".into()), Attr::Attempt],
            Type::Timestamp => vec![Attr::Resource("due".into()), Attr::Now],
            _ => Vec::new(),
        };
        let params: Vec<(String, Type)> = match target {
            Target::Tool(t) => self.base.tools[*t].params.clone(),
            Target::Effect(e) => self.base.effects[*e].params.clone(),
            _ => Vec::new(),
        };
        out.extend(params.into_iter().filter(|(_, t)| t == ty).map(|(name, _)| Attr::Arg(name)));
        out
    }

    /// A world atom: a test of a declared attribute, a comparison of two terms (or of a term with the principal), a
    /// membership, a relation, a calendar or a duration.
    fn world_atom(&self, rng: &mut Rng, target: &Target, currency: &str) -> Cond {
        let holds = !rng.chance(25);
        let derived = |attr: Attr| {
            Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(holds)) })
        };
        let textual = self.world_terms(target, &Type::String);
        let term = |rng: &mut Rng| -> Term {
            if rng.chance(30) {
                Term::Value(rng.word(&IDS).to_string())
            } else {
                Term::Attr(rng.pick(&textual).clone())
            }
        };
        match rng.below(12) {
            0..=1 => {
                // A declared attribute against a literal (the principal among them).
                let ty = rng.pick(&[Type::String, Type::String, Type::Money, Type::Int, Type::Timestamp]).clone();
                let terms = self.world_terms(target, &ty);
                let attr = rng.pick(&terms).clone();
                let ops = [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];
                let test = match &ty {
                    Type::String => match rng.below(3) {
                        0 => Test::Compare(CompareOp::Eq, string(rng.word(&IDS))),
                        1 => Test::Compare(CompareOp::Ne, string(rng.word(&IDS))),
                        _ => Test::In(vec![string(rng.word(&IDS)), string(rng.word(&IDS))]),
                    },
                    Type::Money => Test::Compare(*rng.pick(&ops), money(rng.word(&AMOUNTS), currency)),
                    Type::Int => Test::Compare(*rng.pick(&ops), int(*rng.pick(&INTS))),
                    _ => Test::Compare(*rng.pick(&ops), Value::Timestamp(i128::from(time(rng.word(&TIMES))) * NS)),
                };
                Cond::Atom(Atom { attr, ty, test })
            }
            2..=5 => {
                // Two terms of one type compared: equalities most often, order on the ordered types.
                let ty = rng
                    .pick(&[Type::String, Type::String, Type::String, Type::Money, Type::Int, Type::Timestamp])
                    .clone();
                let terms = self.world_terms(target, &ty);
                let left = rng.pick(&terms).clone();
                let others: Vec<Attr> = terms.iter().filter(|t| **t != left).cloned().collect();
                let right = rng.pick(&others).clone();
                let op = if ty == Type::String || rng.chance(50) {
                    *rng.pick(&[CompareOp::Eq, CompareOp::Ne])
                } else {
                    *rng.pick(&[CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge])
                };
                derived(Attr::Compare(Box::new(left), op, Box::new(right), ty))
            }
            6 => {
                let item = rng.pick(&textual).clone();
                derived(Attr::Member(Box::new(item), Box::new(Attr::Subject("accounts".into())), Type::String))
            }
            7..=9 => {
                let name = rng.word(&["owns", "member_of"]).to_string();
                derived(Attr::Relation(name, vec![term(rng), term(rng)]))
            }
            10 => {
                let instants = self.world_terms(target, &Type::Timestamp);
                derived(Attr::InCalendar(rng.word(&CALENDARS).into(), Box::new(rng.pick(&instants).clone())))
            }
            _ => {
                let instants = self.world_terms(target, &Type::Timestamp);
                let later = rng.pick(&instants).clone();
                let others: Vec<Attr> = instants.iter().filter(|t| **t != later).cloned().collect();
                let earlier = rng.pick(&others).clone();
                let ops = [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];
                derived(Attr::Elapsed(Box::new(later), Box::new(earlier), *rng.pick(&ops), *rng.pick(&SPANS)))
            }
        }
    }

    fn atom(&self, rng: &mut Rng, target: &Target, currency: &str) -> Cond {
        if self.world.get() && rng.chance(45) {
            return self.world_atom(rng, target, currency);
        }
        let attrs = self.attributes(target);
        // Arguments more often than the rest: they are where mandates differ most.
        let args: Vec<&(Attr, Type)> = attrs.iter().filter(|(a, _)| matches!(a, Attr::Arg(_))).collect();
        let (attr, ty) =
            if !args.is_empty() && rng.chance(60) { (*rng.pick(&args)).clone() } else { rng.pick(&attrs).clone() };
        let ops = [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];
        let test = match &ty {
            Type::Money => {
                let values = |rng: &mut Rng| money(rng.word(&AMOUNTS), currency);
                match rng.below(5) {
                    0 => Test::In(vec![values(rng), values(rng)]),
                    1 => Test::NotIn(vec![values(rng)]),
                    _ => Test::Compare(*rng.pick(&ops), values(rng)),
                }
            }
            Type::Int => match rng.below(5) {
                0 => Test::In(vec![int(*rng.pick(&INTS)), int(*rng.pick(&INTS))]),
                _ => Test::Compare(*rng.pick(&ops), int(*rng.pick(&INTS))),
            },
            Type::Decimal => {
                let rate = Value::Number(Decimal::parse(rng.word(&RATES)).expect("pool rates parse"));
                Test::Compare(*rng.pick(&ops), rate)
            }
            Type::Duration => Test::Compare(*rng.pick(&ops), Value::Duration(*rng.pick(&WAITS))),
            Type::Bool => Test::Compare(CompareOp::Eq, Value::Bool(rng.chance(50))),
            Type::Timestamp => {
                Test::Compare(*rng.pick(&ops), Value::Timestamp(i128::from(time(rng.word(&TIMES))) * NS))
            }
            Type::Level => Test::Compare(*rng.pick(&ops), Value::Level(rng.below(self.base.levels.len()))),
            Type::Enum(..) => match rng.below(4) {
                0 => Test::Compare(CompareOp::Eq, string(rng.word(&TIERS))),
                1 => Test::Compare(CompareOp::Ne, string(rng.word(&TIERS))),
                2 => Test::In(vec![string(rng.word(&TIERS)), string(rng.word(&TIERS))]),
                _ => Test::NotIn(vec![string(rng.word(&TIERS))]),
            },
            Type::Set(_) => {
                let pool: &[&str] = if attr == Attr::SubjectScopes { &SCOPES } else { &TAGS };
                match rng.below(4) {
                    0 => Test::Contains(string(rng.word(pool))),
                    1 => Test::NotContains(string(rng.word(pool))),
                    2 => Test::Within(vec![string(rng.word(pool)), string(rng.word(pool))]),
                    _ => Test::NotWithin(vec![string(rng.word(pool))]),
                }
            }
            _ => {
                let pool: &[&str] = match &attr {
                    Attr::ResourceId => &RESOURCES,
                    Attr::Context(_) => &REGIONS,
                    _ => &MERCHANTS,
                };
                match rng.below(6) {
                    0 => Test::Compare(CompareOp::Eq, string(rng.word(pool))),
                    1 => Test::Compare(CompareOp::Ne, string(rng.word(pool))),
                    2 => Test::In(vec![string(rng.word(pool)), string(rng.word(pool))]),
                    3 => Test::NotIn(vec![string(rng.word(pool))]),
                    4 => Test::Under(rng.word(&PREFIXES).to_string()),
                    _ => Test::NotUnder(rng.word(&PREFIXES).to_string()),
                }
            }
        };
        let ty = if let Type::Enum(..) = ty { self.tier.clone() } else { ty };
        Cond::Atom(Atom { attr, ty, test })
    }

    fn condition(&self, rng: &mut Rng, target: &Target, depth: usize) -> Cond {
        let currency = if rng.chance(15) { "EUR" } else { "USD" };
        self.condition_in(rng, target, depth, currency)
    }

    fn condition_in(&self, rng: &mut Rng, target: &Target, depth: usize, currency: &str) -> Cond {
        match rng.below(if depth == 0 { 2 } else { 5 }) {
            0 => self.atom(rng, target, currency),
            1 if depth == 0 => self.atom(rng, target, currency),
            1 => Cond::True,
            2 => self.atom(rng, target, currency),
            3 => Cond::And((0..2).map(|_| self.condition_in(rng, target, depth - 1, currency)).collect()),
            _ => Cond::Or((0..2).map(|_| self.condition_in(rng, target, depth - 1, currency)).collect()),
        }
    }

    fn rule(&self, rng: &mut Rng, kind: RuleKind) -> Rule {
        let target = self.target(rng);
        let condition = match kind {
            RuleKind::RequireOperationId | RuleKind::Budget { .. } | RuleKind::Fact { .. } => Cond::True,
            RuleKind::Allow | RuleKind::Forbid | RuleKind::Gate { .. } if rng.chance(35) => Cond::True,
            _ => self.condition(rng, &target, 2),
        };
        self.make(kind, target, condition)
    }

    fn make(&self, kind: RuleKind, target: Target, condition: Cond) -> Rule {
        let tools = (0..self.base.tools.len()).filter(|&t| self.base.covers(&target, t)).collect();
        Rule { kind, target, tools, condition, label: "generated".into(), span: Span::default() }
    }

    fn random_kind(&self, rng: &mut Rng) -> RuleKind {
        match rng.below(12) {
            0..=3 => RuleKind::Allow,
            4..=5 => RuleKind::Forbid,
            6 => RuleKind::Limit,
            7 => RuleKind::Scope,
            8 => RuleKind::Gate {
                approval: *rng.pick(&self.approvals),
                on_missing: if rng.chance(30) { Otherwise::Deny } else { Otherwise::Escalate },
            },
            9 => RuleKind::RequireOperationId,
            10 => RuleKind::Fact {
                name: rng.word(&FACTS).to_string(),
                // Version 2 is written as a string: the proof's string facts against the interpreter's.
                version: match rng.below(3) {
                    2 => FactVersion::Text("v2".into()),
                    n => FactVersion::Number(n as u64),
                },
                on_stale: Otherwise::Deny,
            },
            _ => RuleKind::Budget {
                name: rng.word(&COUNTERS).to_string(),
                max: rng.below(4) as u64,
                window: Window::InTotal,
            },
        }
    }

    fn mandate(&self, rng: &mut Rng, name: &str, holder: &str) -> Mandate {
        let mut rules: Vec<Rule> = (0..1 + rng.below(3)).map(|_| self.rule(rng, RuleKind::Allow)).collect();
        for _ in 0..rng.below(5) {
            let kind = self.random_kind(rng);
            rules.push(self.rule(rng, kind));
        }
        let (from, until) = self.window(rng);
        Mandate {
            name: name.into(),
            principal: "owner:p".into(),
            parent: None,
            holders: vec![holder.into()],
            holder_prefixes: Vec::new(),
            purpose: None,
            valid_from: from,
            valid_until: until,
            max_level: rng.chance(30).then(|| rng.below(self.base.levels.len())),
            otherwise: if rng.chance(20) { Otherwise::Escalate } else { Otherwise::Deny },
            delegation_depth: None,
            rules,
            span: Span::default(),
            valid_span: Span::default(),
            max_level_span: Span::default(),
            otherwise_span: Span::default(),
            depth_span: Span::default(),
        }
    }

    fn window(&self, rng: &mut Rng) -> (Option<i64>, Option<i64>) {
        let from = rng.chance(40).then(|| time(TIMES[rng.below(2)]));
        let until = rng.chance(40).then(|| time(TIMES[2 + rng.below(3)]));
        (from, until)
    }

    /// A child derived from the parent: mostly its rules, some narrowed, some widened, some dropped or added.
    fn mutate(&self, rng: &mut Rng, parent: &Mandate, holder: &str) -> Mandate {
        let mut child = parent.clone();
        child.name = "child".into();
        child.holders = vec![holder.into()];
        let mutations = rng.below(4);
        for _ in 0..mutations {
            match rng.below(if self.world.get() { 11 } else { 9 }) {
                0 if !child.rules.is_empty() => {
                    let i = rng.below(child.rules.len());
                    child.rules.remove(i);
                }
                1 | 2 if !child.rules.is_empty() => {
                    // Narrow (grants, limits, scopes) or widen (prohibitions, gates) a condition with `and`.
                    let i = rng.below(child.rules.len());
                    let extra = self.condition(rng, &child.rules[i].target.clone(), 1);
                    let rule = &mut child.rules[i];
                    rule.condition = Cond::And(vec![rule.condition.clone(), extra]);
                }
                3 if !child.rules.is_empty() => {
                    let i = rng.below(child.rules.len());
                    let extra = self.condition(rng, &child.rules[i].target.clone(), 1);
                    let rule = &mut child.rules[i];
                    rule.condition = Cond::Or(vec![rule.condition.clone(), extra]);
                }
                4 => {
                    let kind = self.random_kind(rng);
                    child.rules.push(self.rule(rng, kind));
                }
                5 => {
                    let (from, until) = self.window(rng);
                    child.valid_from = from;
                    child.valid_until = until;
                }
                6 => child.max_level = rng.chance(50).then(|| rng.below(self.base.levels.len())),
                7 if !child.rules.is_empty() => {
                    // Retarget a rule: a tool for its class or the other way round.
                    let i = rng.below(child.rules.len());
                    let target = self.target(rng);
                    let rule = &child.rules[i];
                    let condition = if matches!(rule.target, Target::Tool(_)) == matches!(target, Target::Tool(_))
                        && rule.target == target
                    {
                        rule.condition.clone()
                    } else {
                        Cond::True
                    };
                    child.rules[i] = self.make(rule.kind.clone(), target, condition);
                }
                8..=10 if self.world.get() && !child.rules.is_empty() => {
                    // Restate an equality through an intermediate term: only the theory of equality sees that it
                    // says the same (or, with `or` around it, something wider).
                    let i = rng.below(child.rules.len());
                    let target = child.rules[i].target.clone();
                    if let Some(detour) = self.detour(rng, &child.rules[i].condition, &target) {
                        child.rules[i].condition = detour;
                    }
                }
                _ => {
                    for rule in child.rules.iter_mut() {
                        if let RuleKind::Budget { max, .. } = &mut rule.kind {
                            *max = rng.below(4) as u64;
                        }
                    }
                }
            }
        }
        child
    }

    /// `cond` with its first equality restated through another term of the same type: `a == v` becomes
    /// `a == z and z == v`, `a == b` becomes `a == z and z == b`, and `r(a, …)` becomes `r(z, …) and a == z`;
    /// likewise its first order (`a < b` becomes `a < z and z <= b`, `a <= v` becomes `a <= z and z <= v`, and
    /// now and then a chain that only `<=` links, which is wider than `<`), and a calendar is replaced by another
    /// (contained in it or not).
    fn detour(&self, rng: &mut Rng, cond: &Cond, target: &Target) -> Option<Cond> {
        let yes = |attr: Attr| {
            Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(true)) })
        };
        let equal = |a: &Attr, b: &Attr, ty: &Type| {
            yes(Attr::Compare(Box::new(a.clone()), CompareOp::Eq, Box::new(b.clone()), ty.clone()))
        };
        let other = |rng: &mut Rng, ty: &Type, not: &[&Attr]| -> Option<Attr> {
            let terms: Vec<Attr> = self.world_terms(target, ty).into_iter().filter(|t| !not.contains(&t)).collect();
            (!terms.is_empty()).then(|| rng.pick(&terms).clone())
        };
        match cond {
            Cond::And(items) | Cond::Or(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(changed) = self.detour(rng, item, target) {
                        let mut items = items.clone();
                        items[i] = changed;
                        return Some(if matches!(cond, Cond::And(_)) { Cond::And(items) } else { Cond::Or(items) });
                    }
                }
                None
            }
            Cond::Atom(atom) => match (&atom.attr, &atom.test) {
                (Attr::Compare(l, op, r, ty), Test::Compare(CompareOp::Eq, Value::Bool(true)))
                    if *op != CompareOp::Eq && *op != CompareOp::Ne =>
                {
                    let z = other(rng, ty, &[l.as_ref(), r.as_ref()])?;
                    let (first, second) = chain(rng, *op);
                    let compare = |a: &Attr, op, b: &Attr| {
                        yes(Attr::Compare(Box::new(a.clone()), op, Box::new(b.clone()), ty.clone()))
                    };
                    Some(Cond::And(vec![compare(l.as_ref(), first, &z), compare(&z, second, r.as_ref())]))
                }
                (Attr::InCalendar(_, instant), _) => {
                    let attr = Attr::InCalendar(rng.word(&CALENDARS).into(), instant.clone());
                    Some(Cond::Atom(Atom { attr, ty: Type::Bool, test: atom.test.clone() }))
                }
                (a, Test::Compare(op, v))
                    if *op != CompareOp::Eq
                        && *op != CompareOp::Ne
                        && matches!(atom.ty, Type::Money | Type::Int | Type::Timestamp)
                        && !a.is_derived() =>
                {
                    let z = other(rng, &atom.ty, &[a])?;
                    let (first, second) = chain(rng, *op);
                    let compare = yes(Attr::Compare(Box::new(a.clone()), first, Box::new(z.clone()), atom.ty.clone()));
                    let moved =
                        Cond::Atom(Atom { attr: z, ty: atom.ty.clone(), test: Test::Compare(second, v.clone()) });
                    Some(Cond::And(vec![compare, moved]))
                }
                (Attr::Compare(l, CompareOp::Eq, r, ty), Test::Compare(CompareOp::Eq, Value::Bool(true))) => {
                    let z = other(rng, ty, &[l.as_ref(), r.as_ref()])?;
                    Some(Cond::And(vec![equal(l.as_ref(), &z, ty), equal(&z, r.as_ref(), ty)]))
                }
                (Attr::Relation(name, terms), _) => {
                    let at = terms.iter().position(|t| matches!(t, Term::Attr(_)))?;
                    let Term::Attr(a) = &terms[at] else { return None };
                    let z = other(rng, &Type::String, &[a])?;
                    let mut moved = terms.clone();
                    moved[at] = Term::Attr(z.clone());
                    let relation = Cond::Atom(Atom {
                        attr: Attr::Relation(name.clone(), moved),
                        ty: Type::Bool,
                        test: atom.test.clone(),
                    });
                    Some(Cond::And(vec![relation, equal(a, &z, &Type::String)]))
                }
                (a, Test::Compare(CompareOp::Eq, _) | Test::In(_))
                    if matches!(atom.ty, Type::String | Type::Money | Type::Int | Type::Timestamp)
                        && !a.is_derived() =>
                {
                    let z = other(rng, &atom.ty, &[a])?;
                    let moved = Cond::Atom(Atom { attr: z.clone(), ty: atom.ty.clone(), test: atom.test.clone() });
                    Some(Cond::And(vec![equal(a, &z, &atom.ty), moved]))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// A program with a parent (under a root, sometimes) and a child; the child is the last mandate.
    fn pair(&self, rng: &mut Rng) -> Program {
        let mut program = self.base.clone();
        let mut mandates = Vec::new();
        let with_root = rng.chance(25);
        if with_root {
            mandates.push(self.mandate(rng, "root", "agent:root"));
        }
        let mut parent = self.mandate(rng, "parent", "agent:parent");
        if with_root {
            parent.parent = Some(0);
        }
        let mut child = if rng.chance(75) {
            self.mutate(rng, &parent, "agent:child")
        } else {
            self.mandate(rng, "child", "agent:child")
        };
        child.parent = Some(mandates.len());
        mandates.push(parent);
        mandates.push(child);
        program.mandate_index = mandates.iter().enumerate().map(|(i, m)| (m.name.clone(), i)).collect();
        program.mandates = mandates;
        program
    }

    /// A random request to the child, biased towards the tools it grants and the values rules mention, written
    /// as JSON text (building a `serde_json` tree per request would dominate the run time). `@LEAF@` stands for
    /// the mandate the request is addressed to: the child, or the parent when the parent is asked.
    fn request(&self, rng: &mut Rng, program: &Program, relations: &[(&str, &[Term])]) -> String {
        let world = self.world.get();
        // The textual values of the request, for the relation tuples it answers.
        let mut texts: Vec<(Attr, String)> = vec![(Attr::SubjectId, "agent:child".into())];
        let child = program.mandates.last().expect("a child");
        let granted: Vec<usize> =
            child.rules.iter().filter(|r| r.kind == RuleKind::Allow).flat_map(|r| r.tools.iter().copied()).collect();
        let tool = if !granted.is_empty() && rng.chance(90) {
            *rng.pick(&granted)
        } else {
            self.tool(rng.word(&["pay", "give_back", "lookup", "announce"]))
        };
        let tool = &self.base.tools[tool];
        let currency = if rng.chance(15) { "EUR" } else { "USD" };
        let mut arguments: Vec<String> = Vec::new();
        let mut manifest = None;
        let mut start = 0i128;
        for (name, ty) in &tool.params {
            if rng.chance(8) {
                continue;
            }
            let value = match ty {
                Type::Money => format!("\"{} {currency}\"", rng.word(&AMOUNTS)),
                Type::Int => rng.pick(&INTS).to_string(),
                Type::Decimal => {
                    let rate = rng.word(&RATES);
                    if rng.chance(50) {
                        rate.to_string()
                    } else {
                        format!("\"{rate}\"")
                    }
                }
                Type::Duration => {
                    let wait = rng.pick(&WAITS) + rng.below(2) as i64;
                    if rng.chance(50) {
                        wait.to_string()
                    } else {
                        format!("\"{wait}s\"")
                    }
                }
                Type::Bool => rng.chance(50).to_string(),
                Type::Enum(..) => format!("\"{}\"", rng.word(&TIERS)),
                Type::Set(_) => {
                    let tags: Vec<String> =
                        TAGS.iter().filter(|_| rng.chance(50)).map(|t| format!("\"{t}\"")).collect();
                    format!("[{}]", tags.join(","))
                }
                Type::Timestamp => {
                    // `end` a little before, at or after a span from `start`; `start` one of the pool's times.
                    let at = if name == "start" {
                        start = i128::from(time(rng.word(&TIMES))) * NS + [-NS, 0, NS][rng.below(3)];
                        start
                    } else if rng.chance(70) {
                        start + i128::from(*rng.pick(&SPANS)) * NS + [-NS, 0, NS][rng.below(3)]
                    } else {
                        i128::from(time(rng.word(&TIMES))) * NS
                    };
                    format!("\"{}\"", format_instant(at))
                }
                _ if name == "manifest" => {
                    let m = format!("\"m{}\"", rng.below(2));
                    manifest = Some(m.clone());
                    m
                }
                _ if name == "payee" || name == "account" => {
                    let id = rng.word(&IDS);
                    texts.push((Attr::Arg(name.clone()), id.to_string()));
                    format!("\"{id}\"")
                }
                _ => {
                    let merchant = rng.word(&MERCHANTS);
                    texts.push((Attr::Arg(name.clone()), merchant.to_string()));
                    format!("\"{merchant}\"")
                }
            };
            arguments.push(format!("\"{name}\":{value}"));
        }
        let arguments = format!("{{{}}}", arguments.join(","));
        // Whole seconds either side of the pool's times, and fractions (a request may carry them, requests.md): half
        // a second past, a nanosecond before.
        let now = i128::from(time(rng.word(&TIMES))) * NS + [-NS, 0, NS, 3600 * NS, NS / 2, -1][rng.below(6)];
        let resource = rng.chance(85).then(|| rng.word(&RESOURCES));
        let mut context = vec![format!("\"mandate\":\"@LEAF@\""), format!("\"now\":\"{}\"", format_instant(now))];
        if rng.chance(60) {
            context.push(format!("\"operation_id\":\"{}\"", if rng.chance(90) { "op-1" } else { "" }));
        }
        if rng.chance(70) {
            context.push(format!("\"attempt\":{}", rng.pick(&INTS)));
        }
        if rng.chance(80) {
            context.push(format!("\"attributes\":{{\"region\":\"{}\"}}", rng.word(&REGIONS)));
        }
        let mut facts: Vec<String> = Vec::new();
        for f in FACTS {
            if rng.chance(70) {
                let version = match rng.below(3) {
                    2 => "\"v2\"".to_string(),
                    n => n.to_string(),
                };
                facts.push(format!("\"{f}\":{version}"));
            }
        }
        context.push(format!("\"facts\":{{{}}}", facts.join(",")));
        let mut counters: Vec<String> = Vec::new();
        for c in COUNTERS {
            if rng.chance(70) {
                counters.push(format!("\"{c}\":{}", rng.below(5) as i64 - (rng.chance(5) as i64) * 3));
            }
        }
        context.push(format!("\"counters\":{{{}}}", counters.join(",")));
        let mut approvals = Vec::new();
        for &kind in &self.approvals {
            if !rng.chance(40) {
                continue;
            }
            let age = [0i128, 100, 899, 900, 3600, 90_000][rng.below(6)] * NS;
            let name = &self.base.approvals[kind].name;
            // Only the operator kind binds the argument digest: compute it only then.
            let digest = if name == "operator" && rng.chance(90) {
                let parsed: Json = serde_json::from_str(&arguments).expect("generated arguments are JSON");
                argument_digest(&tool.name, &parsed)
            } else {
                "sha256:0".into()
            };
            let mandate = if rng.chance(85) { "@LEAF@" } else { "parent" };
            let manifest = if rng.chance(90) { manifest.clone().unwrap_or("\"m0\"".into()) } else { "\"m9\"".into() };
            let tool_name = if rng.chance(90) { tool.name.as_str() } else { "other" };
            let target = resource.filter(|_| rng.chance(90)).unwrap_or("elsewhere");
            let expires = now + if rng.chance(90) { 60 * NS } else { 0 };
            approvals.push(format!(
                "{{\"id\":\"a{kind}\",\"kind\":\"{name}\",\"mandate\":\"{mandate}\",\"issued_at\":\"{}\",\"expires_at\":\"{}\",\
                 \"tool\":\"{tool_name}\",\"target\":\"{target}\",\"digest\":\"{digest}\",\"manifest\":{manifest},\"consumed\":{}}}",
                format_instant(now - age),
                format_instant(expires),
                rng.chance(5)
            ));
        }
        context.push(format!("\"approvals\":[{}]", approvals.join(",")));
        // The world: declared attributes from small pools, and an answer for most relation tuples the rules ask.
        let mut subject_properties = String::new();
        let mut resource_properties = String::new();
        if world {
            let amount = |rng: &mut Rng| {
                let currency = if rng.chance(15) { "EUR" } else { "USD" };
                format!("\"{} {currency}\"", rng.word(&AMOUNTS))
            };
            let mut id = |rng: &mut Rng, attr: Attr| {
                let id = rng.word(&IDS);
                texts.push((attr, id.to_string()));
                format!("\"{id}\"")
            };
            let mut fields: Vec<String> = Vec::new();
            if rng.chance(90) {
                fields.push(format!("\"team\":{}", id(rng, Attr::Subject("team".into()))));
            }
            if rng.chance(90) {
                let accounts: Vec<String> = IDS.iter().filter(|_| rng.chance(40)).map(|a| format!("\"{a}\"")).collect();
                fields.push(format!("\"accounts\":[{}]", accounts.join(",")));
            }
            if rng.chance(85) {
                fields.push(format!("\"limit\":{}", amount(rng)));
            }
            if rng.chance(85) {
                fields.push(format!("\"clearance\":{}", rng.pick(&INTS)));
            }
            subject_properties = format!(",\"properties\":{{{}}}", fields.join(","));
            let mut fields: Vec<String> = Vec::new();
            if rng.chance(90) {
                fields.push(format!("\"owner\":{}", id(rng, Attr::Resource("owner".into()))));
            }
            if rng.chance(85) {
                fields.push(format!("\"team\":{}", id(rng, Attr::Resource("team".into()))));
            }
            if rng.chance(85) {
                fields.push(format!("\"total\":{}", amount(rng)));
            }
            if rng.chance(85) {
                let due = i128::from(time(rng.word(&TIMES))) * NS + [-NS, 0, NS, 3600 * NS][rng.below(4)];
                fields.push(format!("\"due\":\"{}\"", format_instant(due)));
            }
            resource_properties = format!("\"properties\":{{{}}}", fields.join(","));
            if let Some(r) = resource {
                texts.push((Attr::ResourceId, r.to_string()));
            }
            let mut answers: std::collections::BTreeMap<(&str, Vec<&str>), bool> = Default::default();
            for (name, terms) in relations {
                let values: Option<Vec<&str>> = terms
                    .iter()
                    .map(|t| match t {
                        Term::Value(v) => Some(v.as_str()),
                        Term::Attr(a) => texts.iter().find(|(b, _)| b == a).map(|(_, v)| v.as_str()),
                    })
                    .collect();
                if let Some(values) = values.filter(|_| rng.chance(90)) {
                    let holds = rng.chance(50);
                    answers.entry((*name, values)).or_insert(holds);
                }
            }
            let mut listed: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
            for ((name, values), holds) in answers {
                let args: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
                listed.entry(name).or_default().push(format!("{{\"args\":[{}],\"holds\":{holds}}}", args.join(",")));
            }
            let listed: Vec<String> =
                listed.into_iter().map(|(name, items)| format!("\"{name}\":[{}]", items.join(","))).collect();
            context.push(format!("\"relations\":{{{}}}", listed.join(",")));
        }
        let credential = if rng.chance(80) {
            let scopes: Vec<String> = SCOPES.iter().filter(|_| rng.chance(50)).map(|s| format!("\"{s}\"")).collect();
            format!(",\"credential\":{{\"id\":\"c\",\"scopes\":[{}]}}", scopes.join(","))
        } else {
            String::new()
        };
        let resource = match (resource, world) {
            (Some(r), false) => format!(",\"resource\":{{\"id\":\"{r}\"}}"),
            (Some(r), true) => format!(",\"resource\":{{\"id\":\"{r}\",{resource_properties}}}"),
            (None, true) => format!(",\"resource\":{{{resource_properties}}}"),
            (None, false) => String::new(),
        };
        format!(
            "{{\"subject\":{{\"id\":\"agent:child\"{credential}{subject_properties}}},\"action\":{{\"name\":\"{}\",\"arguments\":{arguments}}}{resource},\"context\":{{{}}}}}",
            tool.name,
            context.join(",")
        )
    }
}

#[derive(Default, Debug)]
struct Tally {
    pairs: usize,
    narrows: usize,
    widens: usize,
    widens_without_random_witness: usize,
    random_witnesses: usize,
    /// The pairs with world atoms (counted in the fields above too, except the last two here).
    world: WorldTally,
}

#[derive(Default, Debug)]
struct WorldTally {
    pairs: usize,
    narrows: usize,
    widens: usize,
    /// The check gave up (no confirmed witness, no proof): its incompleteness on the world.
    undecided: usize,
    unconfirmed: usize,
    /// Of those, the pairs where a random request proves the child wider (the answer "widens" was right).
    incomplete_but_wider: usize,
    /// Pairs with an equality restated through another term (the mutation only the theory decides), and the
    /// verdicts on them.
    detours: usize,
    detours_narrow: usize,
}

/// The relation atoms a program's rules ask, for the requests to answer.
fn relation_atoms(program: &Program) -> Vec<(&str, &[Term])> {
    fn walk<'p>(cond: &'p Cond, out: &mut Vec<(&'p str, &'p [Term])>) {
        match cond {
            Cond::Atom(atom) => {
                if let Attr::Relation(name, terms) = &atom.attr {
                    out.push((name, terms));
                }
            }
            Cond::And(items) | Cond::Or(items) => items.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for mandate in &program.mandates {
        for rule in &mandate.rules {
            walk(&rule.condition, &mut out);
        }
    }
    out
}

/// Two comparisons whose chain `a first z second b` says `a op b` (most of the time: now and then the chain has no
/// strict link where `op` is strict, which is wider).
fn chain(rng: &mut Rng, op: CompareOp) -> (CompareOp, CompareOp) {
    let (strict, loose) = match op {
        CompareOp::Lt | CompareOp::Le => (CompareOp::Lt, CompareOp::Le),
        _ => (CompareOp::Gt, CompareOp::Ge),
    };
    let is_strict = matches!(op, CompareOp::Lt | CompareOp::Gt);
    match rng.below(4) {
        0 => (loose, loose),
        1 if is_strict => (strict, loose),
        1 => (loose, loose),
        2 if is_strict => (loose, strict),
        _ => (strict, strict),
    }
}

/// Whether a condition restates a comparison through an intermediate term (`detour`'s shape).
fn has_detour(cond: &Cond) -> bool {
    match cond {
        Cond::And(items) => {
            (items.len() == 2 && items.iter().any(|c| matches!(c, Cond::Atom(Atom { attr: Attr::Compare(..), .. }))))
                || items.iter().any(has_detour)
        }
        Cond::Or(items) => items.iter().any(has_detour),
        _ => false,
    }
}

fn size(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run(shard: u64, shards: u64) {
    let world = World::new();
    let pairs = size("NARROWING_PAIRS", 10_000) / shards as usize;
    let requests = size("NARROWING_REQUESTS", 100);
    let mut tally = Tally::default();
    let started = std::time::Instant::now();
    for index in 0..pairs as u64 {
        let seed = index * shards + shard;
        let mut rng = Rng(seed);
        // A third of the pairs draw world atoms (a separate stream decides, so the others are the pairs they were).
        let with_world = Rng(seed ^ 0x05ee_d0f3_011d).chance(33);
        world.world.set(with_world);
        let program = world.pair(&mut rng);
        let child = program.mandates.len() - 1;
        let parent = child - 1;
        let findings: Vec<_> = analyse(&program).into_iter().filter(|f| f.child == child).collect();
        let mut standalone = program.clone();
        standalone.mandates[child].parent = None;
        let mut as_parent = program.clone();
        as_parent.mandates[parent].holders.push("agent:child".into());
        let mut widens = false;
        let mut gave_up = false;
        for finding in &findings {
            match &finding.kind {
                Kind::Widens(widening) => {
                    widens = true;
                    // Confirmed again, independently of the check: the child alone allows it, the parent refuses.
                    let request = &widening.witness;
                    let alone = decide(&standalone, request.to_string().as_bytes());
                    let asked = for_parent(request, "child", "parent");
                    let refused = decide(&as_parent, asked.to_string().as_bytes());
                    assert!(
                        alone.outcome == Outcome::Allow && refused.outcome != Outcome::Allow,
                        "seed {seed}: a witness the interpreter does not confirm: {request}\n{:?}\n{:?}",
                        alone.to_json(),
                        refused.to_json()
                    );
                }
                Kind::Depth => {}
                Kind::Undecided { .. } | Kind::Unconfirmed { .. } if with_world => {
                    gave_up = true;
                    if matches!(finding.kind, Kind::Undecided { .. }) {
                        tally.world.undecided += 1;
                    } else {
                        tally.world.unconfirmed += 1;
                    }
                }
                Kind::Undecided { tool } => panic!("seed {seed}: undecided for `{tool}`"),
                Kind::Unconfirmed { tool, request } => {
                    panic!("seed {seed}: internal error, unconfirmed witness for `{tool}`: {request}\n{program:#?}")
                }
            }
        }
        let relations = relation_atoms(&program);
        let mut found = None;
        for _ in 0..requests {
            let request = world.request(&mut rng, &program, &relations);
            let to_child = request.replace("@LEAF@", "child");
            if decide(&standalone, to_child.as_bytes()).outcome != Outcome::Allow {
                continue;
            }
            // What `for_parent` does to the witnesses of the check (the fixtures test it on those).
            let to_parent = request.replace("@LEAF@", "parent");
            if decide(&as_parent, to_parent.as_bytes()).outcome != Outcome::Allow {
                found = Some(to_child);
                break;
            }
        }
        tally.pairs += 1;
        if with_world {
            tally.world.pairs += 1;
            let detour = program.mandates[child].rules.iter().any(|r| has_detour(&r.condition));
            tally.world.detours += usize::from(detour);
            if gave_up {
                tally.world.incomplete_but_wider += usize::from(found.is_some());
            } else if widens {
                tally.world.widens += 1;
            } else {
                tally.world.narrows += 1;
                tally.world.detours_narrow += usize::from(detour);
            }
        }
        if gave_up {
            // Neither verdict: nothing to check but that it was counted.
        } else if widens {
            tally.widens += 1;
            if found.is_none() {
                tally.widens_without_random_witness += 1;
            }
        } else {
            tally.narrows += 1;
            if let Some(request) = found {
                panic!(
                    "seed {seed}: the check says `child` narrows `parent`, but this request is allowed by the child \
                     alone and refused by the parent:\n{request}\n{:#?}",
                    program.mandates
                );
            }
        }
        if found.is_some() {
            tally.random_witnesses += 1;
        }
    }
    let w = &tally.world;
    eprintln!(
        "narrowing properties (shard {shard}/{shards}): {tally:?}, {requests} requests per pair, {:.1}s\n  world: \
         {} pairs, {} narrow, {} widen, {} undecided + {} unconfirmed answers ({:.1} % of the pairs gave up; {} of \
         those have a random witness), {} with a comparison restated through another term ({} of them proven to narrow)",
        started.elapsed().as_secs_f64(),
        w.pairs,
        w.narrows,
        w.widens,
        w.undecided,
        w.unconfirmed,
        100.0 * (w.pairs - w.narrows - w.widens) as f64 / w.pairs.max(1) as f64,
        w.incomplete_but_wider,
        w.detours,
        w.detours_narrow,
    );
    assert!(tally.narrows > 0 && tally.widens > 0, "the generator must produce both verdicts: {tally:?}");
    assert!(w.narrows > 0 && w.widens > 0 && w.detours_narrow > 0, "the world pairs must reach both verdicts: {w:?}");
}

#[test]
fn soundness_shard_0() {
    run(0, 4);
}

#[test]
fn soundness_shard_1() {
    run(1, 4);
}

#[test]
fn soundness_shard_2() {
    run(2, 4);
}

#[test]
fn soundness_shard_3() {
    run(3, 4);
}

// ---- Templates (parametric narrowing, docs/narrowing.md "Templates") ----
//
// Random templates with random bounds under random parents, as source text. For every template the proof accepts,
// random instances within the bounds (the parameters' values drawn from pools around the parents' literals, kept
// when every bound holds) and random requests: the interpreter decides each request for the instance standing
// alone and for the parent, and an instance allowing what its parent refuses is a soundness violation. Every
// `remit::template-widens` is confirmed again here on the instance its witness names. Undecided templates (the
// warning) are counted and reported.

const TEMPLATE_CATALOG: &str = r#"
resource order {
  total: money
}

tool tpay(amount: money, merchant: string, n: int) {
  level local_change
  side effects
  resource order
}

tool tlook(merchant: string) {
  level research
}
"#;

const SHOPS: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];

fn list(rng: &mut Rng) -> Vec<&'static str> {
    let mut out: Vec<&str> = SHOPS.iter().copied().filter(|_| rng.chance(60)).collect();
    if out.is_empty() {
        out.push(*rng.pick(&SHOPS));
    }
    out
}

fn quoted(items: &[&str]) -> String {
    items.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ")
}

/// A random parent, a random template under it, as one policy.
fn template_policy(rng: &mut Rng) -> String {
    let amount = *rng.pick(&[100, 300, 500]);
    let (lo, hi) = (rng.below(3), 5 + rng.below(6));
    let merchants = list(rng);
    let (listed, ranged, totalled) = (rng.chance(60), rng.chance(50), rng.chance(25));
    let mut parent = vec![format!("args.amount <= {amount} USD")];
    if listed {
        parent.push(format!("args.merchant in [{}]", quoted(&merchants)));
    }
    if ranged {
        parent.push(format!("args.n >= {lo} and args.n <= {hi}"));
    }
    if totalled {
        parent.push("args.amount <= resource.total".into());
    }
    let window = rng.chance(40);
    let mut out = format!("{TEMPLATE_CATALOG}\nmandate ceiling for \"org:acme\" {{\n  holder under \"agent:\"\n");
    if window {
        out.push_str("  valid from 2026-01-01T00:00:00Z until 2030-01-01T00:00:00Z\n");
    }
    out.push_str(&format!("  allow tpay where {}\n", parent.join(" and ")));
    let look = rng.chance(50);
    if look {
        out.push_str(&format!("  allow tlook where args.merchant in [{}]\n", quoted(&merchants)));
    }
    let forbid = rng.chance(30);
    if forbid {
        out.push_str(&format!("  forbid tpay where args.amount > {} USD\n", amount / 2));
    }
    out.push_str("}\n\n");

    // Half the templates mean to stay within the parent (each choice then mostly follows it, now and then not); the
    // others choose each part at random.
    let faithful = rng.chance(50);
    let follow = |rng: &mut Rng| faithful && rng.chance(92);

    let cap_bound =
        if follow(rng) { *rng.pick(&[amount, amount / 2]) } else { *rng.pick(&[amount, amount + 100, amount / 2]) };
    let cap = match rng.below(5) {
        0 if !follow(rng) => "cap: money".to_string(),
        1 => format!("cap: money where cap <= {cap_bound} USD"),
        2 | 0 => format!("cap: money where cap > 0 USD and cap <= {cap_bound} USD"),
        4 => format!("cap: money where cap >= 1 USD and cap <= {cap_bound} USD"),
        _ => format!("cap: money where cap < {cap_bound} USD"),
    };
    let within = if !listed || follow(rng) || rng.chance(50) { merchants.clone() } else { list(rng) };
    let shops = if follow(rng) || rng.chance(60) {
        format!("shops: set<string> where shops within [{}]", quoted(&within))
    } else {
        "shops: set<string>".to_string()
    };
    let k = if follow(rng) {
        match rng.below(2) {
            0 => format!("k: int where k <= {hi}"),
            _ => format!("k: int where k >= {lo} and k <= {hi}"),
        }
    } else {
        match rng.below(4) {
            0 => "k: int".to_string(),
            1 => format!("k: int where k <= {hi}"),
            2 => format!("k: int where k <= {}", hi + 1),
            _ => format!("k: int where k >= {lo} and k <= {hi}"),
        }
    };
    // Durations place `until` through `granted` (difference constraints): by 2029-12-01 and 30 days, or by
    // 2029-12-12 and 20 days, end by the ceiling's end; by 2029-12-15 or a second after 2029-12-12 they may not.
    let until = match rng.below(8) {
        0 if !follow(rng) => "until: timestamp".to_string(),
        0 | 1 => "until: timestamp where until <= 2030-01-01T00:00:00Z".to_string(),
        2 => "until: timestamp where until - granted <= 30d".to_string(),
        3 => "until: timestamp where until <= 2029-06-01T00:00:00Z and until - granted <= 30d".to_string(),
        4 => "until: timestamp where until - granted <= 30d and granted <= 2029-12-01T00:00:00Z".to_string(),
        5 if !follow(rng) => "until: timestamp where until - granted <= 30d and granted <= 2029-12-15T00:00:00Z".into(),
        5 | 6 => "until: timestamp where until - granted <= 20d and granted <= 2029-12-12T00:00:00Z".to_string(),
        _ => "until: timestamp where granted <= 2029-12-12T00:00:01Z and until - granted <= 20d".to_string(),
    };
    out.push_str(&format!("template shop({cap}, {shops}, {k}, {until}) under ceiling {{\n  holder under \"agent:\"\n"));
    if rng.chance(50) {
        out.push_str("  for under \"user:\"\n");
    }
    if window && follow(rng) {
        out.push_str(if rng.chance(50) {
            "  valid from 2026-01-01T00:00:00Z until until\n"
        } else {
            "  valid from 2026-01-01T00:00:00Z until 2029-01-01T00:00:00Z\n"
        });
    } else {
        match rng.below(3) {
            0 => {}
            1 => out.push_str("  valid from 2026-01-01T00:00:00Z until until\n"),
            _ => out.push_str("  valid from 2026-01-01T00:00:00Z until 2029-01-01T00:00:00Z\n"),
        }
    }
    let mut terms: Vec<String> = Vec::new();
    match rng.below(4) {
        0 => terms.push("args.amount <= cap".into()),
        1 => terms.push("args.amount < cap".into()),
        2 if !follow(rng) => terms.push(format!("args.amount <= {} USD", *rng.pick(&[amount, amount + 50]))),
        _ => terms.push("args.amount <= cap and args.amount <= resource.total".into()),
    }
    if (listed && follow(rng)) || rng.chance(60) {
        terms.push(if follow(rng) || rng.chance(80) {
            "args.merchant in shops".into()
        } else {
            format!("args.merchant in [{}]", quoted(&list(rng)))
        });
    }
    if (ranged && follow(rng)) || rng.chance(50) {
        terms.push(match rng.below(3) {
            0 if !follow(rng) => "args.n <= k".into(),
            0 | 1 => format!("args.n >= {lo} and args.n <= k"),
            _ => format!("args.n >= {lo} and args.n <= {hi}"),
        });
    }
    if totalled && follow(rng) && !terms[0].contains("resource.total") {
        terms.push("args.amount <= resource.total".into());
    }
    if rng.chance(15) {
        terms = vec![format!("({}) or args.amount <= 1 USD", terms.join(" and "))];
    }
    out.push_str(&format!("  allow tpay where {}\n", terms.join(" and ")));
    let restated = look && (follow(rng) || rng.chance(40));
    if restated || rng.chance(20) {
        out.push_str("  allow tlook where args.merchant in shops\n");
    }
    if (forbid && follow(rng)) || rng.chance(if forbid { 50 } else { 20 }) {
        out.push_str(&format!("  forbid tpay where args.amount > {} USD\n", amount / 2));
    }
    out.push_str("}\n");
    out
}

/// Random values for a template's parameters (request encodings), drawn around the policies' literals.
fn template_params(rng: &mut Rng) -> serde_json::Map<String, Json> {
    let mut out = serde_json::Map::new();
    let currency = if rng.chance(85) { "USD" } else { "EUR" };
    out.insert(
        "cap".into(),
        Json::from(format!("{}.00 {currency}", *rng.pick(&[0, 1, 50, 99, 100, 150, 250, 300, 499, 500, 550, 600]))),
    );
    let shops: Vec<Json> =
        ["m1", "m2", "m3", "m4", "m5", "m9"].iter().filter(|_| rng.chance(40)).map(|m| Json::from(*m)).collect();
    out.insert("shops".into(), Json::Array(shops));
    out.insert("k".into(), Json::from(rng.below(13) as i64 - 1));
    let instants = [
        "2025-06-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        "2028-01-01T00:00:00Z",
        "2029-05-20T00:00:00Z",
        "2029-12-31T00:00:00Z",
        "2029-12-31T23:59:59Z",
        "2030-01-01T00:00:00Z",
        "2030-01-01T00:00:01Z",
        "2030-01-10T00:00:00Z",
        "2030-01-15T00:00:00Z",
        "2031-01-01T00:00:00Z",
    ];
    // Now and then at the ceiling's end, where the durations' bounds decide.
    let until = if rng.chance(35) { *rng.pick(&[5, 6, 7, 8]) } else { rng.below(instants.len()) };
    out.insert("until".into(), Json::from(instants[until]));
    // `granted` within 40 days before `until` mostly, or at the edges the durations' bounds draw.
    let edges = ["2029-12-01T00:00:00Z", "2029-12-12T00:00:00Z", "2029-12-12T00:00:01Z", "2029-12-14T00:00:00Z"];
    let granted = if rng.chance(80) && until > 0 { instants[until - 1] } else { *rng.pick(&instants) };
    let granted = match rng.below(10) {
        0..=3 => format_instant(parse_timestamp(instants[until]).map(i128::from).unwrap_or(0) * NS - 20 * 86_400 * NS),
        4..=6 => rng.pick(&edges).to_string(),
        _ => granted.to_string(),
    };
    out.insert("granted".into(), Json::from(granted));
    out.insert("principal".into(), Json::from(*rng.pick(&["user:alice", "org:acme", "user:bob"])));
    out.insert("holder".into(), Json::from(*rng.pick(&["agent:a", "agent:b/c", "bot:x"])));
    out
}

fn template_request(rng: &mut Rng, holder: &str) -> Json {
    let tool = if rng.chance(70) { "tpay" } else { "tlook" };
    let currency = if rng.chance(85) { "USD" } else { "EUR" };
    let amount = format!(
        "{}.00 {currency}",
        *rng.pick(&[0, 1, 2, 49, 50, 99, 100, 101, 149, 150, 151, 250, 299, 300, 301, 499, 500, 501, 599, 600])
    );
    let merchant = *rng.pick(&["m1", "m2", "m3", "m4", "m5", "m9"]);
    let mut arguments = serde_json::Map::new();
    if tool == "tpay" {
        if rng.chance(95) {
            arguments.insert("amount".into(), Json::from(amount));
        }
        arguments.insert("n".into(), Json::from(rng.below(14) as i64 - 1));
    }
    if rng.chance(95) {
        arguments.insert("merchant".into(), Json::from(merchant));
    }
    let edge = ["2029-12-31T23:59:59Z", "2030-01-01T00:00:00Z", "2030-01-01T00:00:00.5Z", "2030-01-05T00:00:00Z"];
    let now = if rng.chance(25) {
        *rng.pick(&edge)
    } else {
        *rng.pick(&[
            "2025-12-01T00:00:00Z",
            "2026-06-01T00:00:00Z",
            "2029-05-25T00:00:00Z",
            "2029-12-31T12:00:00Z",
            "2029-12-31T23:59:59Z",
            "2030-01-01T00:00:00Z",
            "2030-01-01T00:00:00.5Z",
            "2030-01-10T00:00:00Z",
            "2031-06-01T00:00:00Z",
        ])
    };
    let mut request = serde_json::json!({
        "subject": {"id": holder},
        "action": {"name": tool, "arguments": arguments},
        "context": {"mandate": "shop", "now": now},
    });
    if rng.chance(80) {
        let total = format!("{}.00 {}", *rng.pick(&[50, 100, 300, 600]), if rng.chance(90) { "USD" } else { "EUR" });
        request["resource"] = serde_json::json!({"id": "order-1", "properties": {"total": total}});
    }
    request
}

fn template_run(seed: u64, count: usize) {
    use remit_lang::check::narrowing::parametric::{analyse as analyse_templates, instance, TemplateKind};
    let requests = size("NARROWING_REQUESTS", 100);
    let started = std::time::Instant::now();
    let mut rng = Rng(seed);
    let (mut proved, mut widened, mut undecided, mut instances, mut decided, mut violations) = (0, 0, 0, 0, 0, 0);
    let mut check_time = std::time::Duration::ZERO;
    for index in 0..count {
        let text = template_policy(&mut rng);
        let mut sources = remit_lang::stdlib::sources();
        sources.add("t.remit", text.clone());
        let checked = check_with(sources, Options { narrowing: false });
        let program = checked
            .program
            .unwrap_or_else(|| panic!("template {index} does not check:\n{text}\n{:#?}", checked.diagnostics));
        let timer = std::time::Instant::now();
        let findings = analyse_templates(&program);
        check_time += timer.elapsed();
        let mut is_proved = true;
        for f in &findings {
            match &f.kind {
                TemplateKind::Widens { widening, params } => {
                    is_proved = false;
                    // Confirmed again here, on the instance the witness names.
                    let label = format!("template {index}");
                    confirm_widening(
                        &program,
                        f.template,
                        &widening.witness,
                        params,
                        ("shop", "ceiling"),
                        &label,
                        &text,
                    );
                }
                TemplateKind::Depth => is_proved = false,
                TemplateKind::Undecided { .. } | TemplateKind::Unconfirmed { .. } => {
                    if std::env::var_os("TEMPLATE_SHOW_UNDECIDED").is_some() {
                        eprintln!("undecided template {index}:\n{text}\n{:?}", f.kind);
                    }
                    is_proved = false;
                }
            }
        }
        let widens = findings.iter().any(|f| matches!(f.kind, TemplateKind::Widens { .. }));
        if widens {
            widened += 1;
        } else if !is_proved {
            undecided += 1;
        } else {
            proved += 1;
            // Random instances within the bounds, random requests: the instance never allows what its parent refuses.
            let mut kept = 0;
            for _ in 0..200 {
                if kept == 10 {
                    break;
                }
                let params = template_params(&mut rng);
                let Ok((concrete, child)) = instance(&program, 0, &params) else { continue };
                kept += 1;
                instances += 1;
                let parent = concrete.mandates[child].parent.unwrap();
                let holder = params["holder"].as_str().unwrap().to_string();
                let mut alone = concrete.clone();
                alone.mandates[child].parent = None;
                let mut as_parent = concrete.clone();
                as_parent.mandates[parent].holders.push(holder.clone());
                for _ in 0..requests / 10 {
                    let request = template_request(&mut rng, &holder);
                    decided += 1;
                    if decide(&alone, request.to_string().as_bytes()).outcome != Outcome::Allow {
                        continue;
                    }
                    let to_parent = for_parent(&request, "shop", "ceiling");
                    if decide(&as_parent, to_parent.to_string().as_bytes()).outcome != Outcome::Allow {
                        violations += 1;
                        eprintln!("UNSOUND template {index}:\n{text}\nparams {params:?}\nrequest {request}");
                    }
                }
            }
        }
    }
    eprintln!(
        "templates (seed {seed}): {count} templates: {proved} proved, {widened} widen (witnesses confirmed), {undecided} \
         undecided ({:.1} %); {instances} instances within bounds, {decided} requests, {violations} unsound; \
         proof {:.2?} ({:.2} ms a template), whole run {:.2?}",
        undecided as f64 * 100.0 / count as f64,
        check_time,
        check_time.as_secs_f64() * 1000.0 / count as f64,
        started.elapsed(),
    );
    assert_eq!(violations, 0, "an instance of a proved template allowed what its parent refuses");
    assert!(
        proved > count / 20 && widened > count / 20,
        "the generator must give both answers: {proved} proved, {widened} widen"
    );
}

#[test]
fn templates_soundness() {
    template_run(0x7E3A_11C5, size("TEMPLATE_CASES", 1_000));
}

/// A random template `errand` under a random template `shop` (itself under a random ceiling): its bounds read
/// `parent.cap`, `parent.until`, `parent.k` or literals, its rules `parent.shops` and `parent.cap` or its own
/// parameters, its window its own `end` or none.
fn subdelegation_policy(rng: &mut Rng) -> String {
    // Three times in four a parent proved to narrow the ceiling (an errand can narrow the chain then), else any.
    let mut out = template_policy(rng);
    if rng.chance(75) {
        for _ in 0..40 {
            let mut sources = remit_lang::stdlib::sources();
            sources.add("t.remit", out.clone());
            let program = check_with(sources, Options { narrowing: false }).program.expect("a parent checks");
            if remit_lang::check::narrowing::parametric::analyse(&program).is_empty() {
                break;
            }
            out = template_policy(rng);
        }
    }
    let faithful = rng.chance(60);
    let follow = |rng: &mut Rng| faithful && rng.chance(93);
    let amount = *rng.pick(&[50, 100, 300, 500]);
    let small = match rng.below(6) {
        0 if !follow(rng) => "small: money".to_string(),
        0 | 1 => "small: money where small <= parent.cap".to_string(),
        2 => "small: money where small > 0 USD and small <= parent.cap".to_string(),
        3 if !follow(rng) => format!("small: money where small <= {amount} USD"),
        3 | 4 => "small: money where small < parent.cap".to_string(),
        _ => format!("small: money where small <= parent.cap and small <= {amount} USD"),
    };
    let end = match rng.below(3) {
        _ if !follow(rng) && rng.chance(60) => {
            if rng.chance(50) { "end: timestamp" } else { "end: timestamp where end <= 2030-01-01T00:00:00Z" }
                .to_string()
        }
        0 => "end: timestamp where end <= parent.until".to_string(),
        1 => "end: timestamp where end <= parent.until and end - granted <= 10d".to_string(),
        _ => "end: timestamp where end < parent.until".to_string(),
    };
    let j = match rng.below(3) {
        0 if !follow(rng) => "j: int".to_string(),
        0 | 1 => "j: int where j <= parent.k".to_string(),
        _ => format!("j: int where j <= {}", 5 + rng.below(6)),
    };
    out.push_str(&format!("\ntemplate errand({small}, {end}, {j}) under shop {{\n  holder under \"agent:\"\n"));
    if follow(rng) {
        out.push_str("  valid from 2026-01-01T00:00:00Z until end\n");
    } else {
        match rng.below(4) {
            0 => {}
            1 => out.push_str("  valid from 2026-01-01T00:00:00Z until end\n"),
            2 => out.push_str("  valid until end\n"),
            _ => out.push_str("  valid from 2026-01-01T00:00:00Z until 2029-01-01T00:00:00Z\n"),
        }
    }
    let mut terms: Vec<String> = vec![match rng.below(4) {
        0 => "args.amount <= small".into(),
        1 if !follow(rng) => "args.amount <= parent.cap".into(),
        1 => "args.amount <= small and args.amount <= parent.cap".into(),
        2 if !follow(rng) => format!("args.amount <= {amount} USD"),
        _ => "args.amount < small".into(),
    }];
    if follow(rng) || rng.chance(50) {
        terms.push("args.amount <= resource.total".into());
    }
    if follow(rng) || rng.chance(60) {
        terms.push(if follow(rng) || rng.chance(70) {
            "args.merchant in parent.shops".into()
        } else {
            format!("args.merchant in [{}]", quoted(&list(rng)))
        });
    }
    if follow(rng) || rng.chance(50) {
        terms.push(match rng.below(3) {
            0 if !follow(rng) => "args.n <= j".into(),
            0 => "args.n <= j and args.n <= parent.k and args.n >= 2".into(),
            1 => "args.n >= 2 and args.n <= parent.k".into(),
            _ => format!("args.n >= {} and args.n <= {}", rng.below(3), 5 + rng.below(6)),
        });
    }
    out.push_str(&format!("  allow tpay where {}\n", terms.join(" and ")));
    // `shop` grants `tlook` within its shops, or not at all.
    let looks = out.contains("allow tlook where args.merchant in shops");
    if (looks && follow(rng)) || rng.chance(20) {
        out.push_str("  allow tlook where args.merchant in parent.shops\n");
    }
    if follow(rng) || rng.chance(30) {
        out.push_str(&format!("  forbid tpay where args.amount > {} USD\n", *rng.pick(&[50, 150, 250])));
    }
    out.push_str("}\n");
    out
}

/// Random values for an errand and its parent instance (`parent.…`), one principal.
fn subdelegation_params(rng: &mut Rng, parent: &serde_json::Map<String, Json>) -> serde_json::Map<String, Json> {
    let mut out = serde_json::Map::new();
    for (key, value) in parent {
        if key != "principal" {
            out.insert(format!("parent.{key}"), value.clone());
        }
    }
    out.insert("principal".into(), parent["principal"].clone());
    // Mostly at or around the parent's cap, in its currency.
    let cap = parent["cap"].as_str().unwrap_or("0.00 USD").to_string();
    let (whole, currency) = cap.split_once(".00 ").unwrap_or(("0", "USD"));
    let whole: i64 = whole.parse().unwrap_or(0);
    let currency = if rng.chance(95) { currency } else { "EUR" };
    let small = match rng.below(4) {
        0 => whole,
        1 => whole - 1,
        2 => whole + 1,
        _ => *rng.pick(&[0, 1, 20, 49, 50, 99, 100, 149, 150, 250, 300, 499, 500, 600]),
    };
    out.insert("small".into(), Json::from(format!("{small}.00 {currency}")));
    // Mostly at or just around the parent's `until`.
    let until = parent["until"].as_str().and_then(parse_timestamp).unwrap_or(0);
    let end = match rng.below(4) {
        0 => until,
        1 => until - 1,
        2 => until + *rng.pick(&[1, 86_400]),
        _ => until - *rng.pick(&[3600, 5 * 86_400, 40 * 86_400]),
    };
    out.insert("end".into(), Json::from(format_instant(i128::from(end) * NS)));
    let granted = end - *rng.pick(&[86_400, 9 * 86_400, 10 * 86_400, 11 * 86_400]);
    out.insert("granted".into(), Json::from(format_instant(i128::from(granted) * NS)));
    let k = parent["k"].as_i64().unwrap_or(0);
    let j = if rng.chance(60) { k + [-1, 0, 0, 1][rng.below(4)] } else { rng.below(13) as i64 - 1 };
    out.insert("j".into(), Json::from(j));
    out.insert("holder".into(), Json::from(*rng.pick(&["agent:a", "agent:b/c", "bot:x"])));
    out
}

/// The proof of a template under a template, by random sampling: for every `errand` proved, random instances of it
/// within its bounds under random valid instances of `shop` never allow a request the chain above refuses; for every
/// widening, the witness is confirmed again on the two instances it names.
fn subdelegation_run(seed: u64, count: usize) {
    use remit_lang::check::narrowing::parametric::{analyse as analyse_templates, instance, TemplateKind};
    let requests = size("NARROWING_REQUESTS", 100);
    let started = std::time::Instant::now();
    let mut rng = Rng(seed);
    let (mut proved, mut widened, mut undecided, mut instances, mut decided, mut violations) = (0, 0, 0, 0, 0, 0);
    let mut check_time = std::time::Duration::ZERO;
    for index in 0..count {
        let text = subdelegation_policy(&mut rng);
        let mut sources = remit_lang::stdlib::sources();
        sources.add("t.remit", text.clone());
        let checked = check_with(sources, Options { narrowing: false });
        let program = checked
            .program
            .unwrap_or_else(|| panic!("policy {index} does not check:\n{text}\n{:#?}", checked.diagnostics));
        let errand = program.template_index["errand"];
        let timer = std::time::Instant::now();
        let findings: Vec<_> = analyse_templates(&program).into_iter().filter(|f| f.template == errand).collect();
        check_time += timer.elapsed();
        let mut is_proved = true;
        for f in &findings {
            match &f.kind {
                TemplateKind::Widens { widening, params } => {
                    is_proved = false;
                    let label = format!("policy {index} (errand)");
                    confirm_widening(&program, errand, &widening.witness, params, ("errand", "shop"), &label, &text);
                }
                TemplateKind::Depth => is_proved = false,
                TemplateKind::Undecided { .. } | TemplateKind::Unconfirmed { .. } => {
                    if std::env::var_os("TEMPLATE_SHOW_UNDECIDED").is_some() {
                        eprintln!("undecided errand {index}:\n{text}\n{:?}", f.kind);
                    }
                    is_proved = false;
                }
            }
        }
        let widens = findings.iter().any(|f| matches!(f.kind, TemplateKind::Widens { .. }));
        if widens {
            widened += 1;
        } else if !is_proved {
            undecided += 1;
        } else {
            proved += 1;
            let mut kept = 0;
            let shop = program.template_index["shop"];
            for _ in 0..300 {
                if kept == 10 {
                    break;
                }
                // A valid parent instance, then errands under it until one is within its bounds (`instance` checks
                // the parent's too).
                let parent = template_params(&mut rng);
                if instance(&program, shop, &parent).is_err() {
                    continue;
                }
                let Some((params, (concrete, child))) = (0..30).find_map(|_| {
                    let params = subdelegation_params(&mut rng, &parent);
                    instance(&program, errand, &params).ok().map(|built| (params, built))
                }) else {
                    continue;
                };
                kept += 1;
                instances += 1;
                let parent = concrete.mandates[child].parent.unwrap();
                let holder = params["holder"].as_str().unwrap().to_string();
                let mut alone = concrete.clone();
                alone.mandates[child].parent = None;
                let mut as_parent = concrete.clone();
                as_parent.mandates[parent].holders.push(holder.clone());
                for _ in 0..requests / 10 {
                    let mut request = template_request(&mut rng, &holder);
                    request["context"]["mandate"] = Json::from("errand");
                    // Now and then at the edges of the two instances' windows.
                    if rng.chance(30) {
                        let edge = |key: &str| params[key].as_str().and_then(parse_timestamp).unwrap_or(0);
                        let at = match rng.below(4) {
                            0 => i128::from(edge("parent.until")) * NS,
                            1 => i128::from(edge("parent.until")) * NS + NS / 2,
                            2 => i128::from(edge("end")) * NS - NS,
                            _ => i128::from(edge("parent.until")) * NS - NS,
                        };
                        request["context"]["now"] = Json::from(format_instant(at));
                    }
                    decided += 1;
                    if decide(&alone, request.to_string().as_bytes()).outcome != Outcome::Allow {
                        continue;
                    }
                    let to_parent = for_parent(&request, "errand", "shop");
                    if decide(&as_parent, to_parent.to_string().as_bytes()).outcome != Outcome::Allow {
                        violations += 1;
                        eprintln!("UNSOUND errand {index}:\n{text}\nparams {params:?}\nrequest {request}");
                    }
                }
            }
        }
    }
    eprintln!(
        "templates under templates (seed {seed}): {count} errands: {proved} proved, {widened} widen (witnesses \
         confirmed), {undecided} undecided ({:.1} %); {instances} instance pairs within bounds, {decided} requests, \
         {violations} unsound; proof {:.2?} ({:.2} ms a policy), whole run {:.2?}",
        undecided as f64 * 100.0 / count as f64,
        check_time,
        check_time.as_secs_f64() * 1000.0 / count as f64,
        started.elapsed(),
    );
    assert_eq!(violations, 0, "an instance of a proved template under a template allowed what its chain refuses");
    assert!(
        proved > count / 20 && widened > count / 20,
        "the generator must give both answers: {proved} proved, {widened} widen"
    );
}

#[test]
fn subdelegation_soundness() {
    subdelegation_run(0x5B0D_E1E6, size("SUBDELEGATION_CASES", 400));
}

/// A template's witness confirmed again on the concrete instance (or chain of instances) its `params` name: the
/// instance standing alone allows `witness`, and its parent, made to hold the witness's subject, refuses it (the
/// request renamed from `names.0` to `names.1`, `for_parent`). `label` and `text` say which policy failed.
fn confirm_widening(
    program: &Program,
    template: usize,
    witness: &Json,
    params: &serde_json::Map<String, Json>,
    names: (&str, &str),
    label: &str,
    text: &str,
) {
    use remit_lang::check::narrowing::parametric::instance;
    let (concrete, child) = instance(program, template, params)
        .unwrap_or_else(|e| panic!("{label}: witness instance refused ({e}):\n{text}\n{params:?}"));
    let mut alone = concrete.clone();
    alone.mandates[child].parent = None;
    let d = decide(&alone, witness.to_string().as_bytes());
    assert_eq!(
        d.outcome,
        Outcome::Allow,
        "{label}: the instance does not allow its witness:\n{text}\n{params:?}\n{witness}"
    );
    let parent = concrete.mandates[child].parent.unwrap();
    let mut as_parent = concrete.clone();
    let subject = witness.pointer("/subject/id").and_then(Json::as_str).unwrap().to_string();
    as_parent.mandates[parent].holders.push(subject);
    let request = for_parent(witness, names.0, names.1);
    let d = decide(&as_parent, request.to_string().as_bytes());
    assert_ne!(
        d.outcome,
        Outcome::Allow,
        "{label}: the parent's chain allows the witness:\n{text}\n{params:?}\n{witness}"
    );
}
