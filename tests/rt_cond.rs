//! Conditions in the runtime crate (crates/remit-rt/src/cond.rs, over the policy image and the request's tape)
//! against the interpreter (crates/remit-lang/src/eval/cond.rs), rule by rule: `remit_lang::eval::trace` gives the value of every rule of the
//! chain that covers the called tool, and the runtime evaluates the same rules, found as a decision finds them (the
//! tool's rule lists per mandate of the chain). On the corpus's requests, on mutated requests
//! (`tests/support/mutate.rs`), and on requests whose arguments and context attributes are set to values made from
//! the policy's own constants (equal, just above and below, in other encodings, escaped, of other types), so that
//! every test meets matches, mismatches and errors (`REMIT_DIFF_ROUNDS` scales the random part, default 3,000).
//!
//! The listing's `possible` (the interpreter's is crate-private) is tested by the property it must have: the
//! outcomes it allows for a listing request include the outcome of every call with that subject and context, and are
//! exactly that outcome when the condition reads no per-call value. And the value parsers against
//! `remit_lang::value`'s on generated strings (proptest).

mod support;

use proptest::prelude::*;
use remit_lang::check::{check_with, Options};
use remit_lang::ir::{Atom, Attr, Cond, Program, RuleKind, Target, Test, Type, Value};
use remit_lang::syntax::ast::CompareOp;
use remit_lang::value::{format_instant, Decimal, Money, NANOS_PER_SECOND};
use remit_rt::cond::{self, Env, Possible, Truth};
use remit_rt::image::{self, Image, Rule, RuleList};
use remit_rt::json::Doc;
use remit_rt::request::{self, Need, Request};
use serde_json::Value as Json;
use support::mutate::{damage, mutate, Rng};

fn rounds() -> usize {
    std::env::var("REMIT_DIFF_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000)
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        image::RULE_ALLOW => "allow",
        image::RULE_FORBID => "forbid",
        image::RULE_LIMIT => "limit",
        image::RULE_SCOPE => "scope",
        image::RULE_GATE => "gate",
        image::RULE_OPERATION_ID => "operation-id",
        image::RULE_FACT => "fact",
        image::RULE_BUDGET => "budget",
        _ => "?",
    }
}

fn find_tool(image: &Image<'_>, doc: &Doc<'_>, name: u32) -> Option<u32> {
    let h = image.header;
    image.find(h.tool_slots_off, h.tool_slots_len, || doc.text(name), |j| image.tool_name(j))
}

fn find_mandate(image: &Image<'_>, doc: &Doc<'_>, name: u32) -> Option<u32> {
    let h = image.header;
    image.find(h.mandate_slots_off, h.mandate_slots_len, || doc.text(name), |j| image.mandate_name(j))
}

/// The mandate a request is decided under (its record's index) and, for an instance of a template, the instances of
/// its chain once checked (sub-delegation: the instances it hangs under first): `None` when it names no mandate of
/// the policy, or an instance that fails (as `eval::trace` stops).
fn resolve(
    image: &Image<'_>,
    doc: &Doc<'_>,
    req: &Request,
    tool: u32,
    listing: bool,
) -> Option<(u32, remit_rt::grants::Instances)> {
    use remit_rt::grants::{self, Instances, Under};
    let named = req.mandate.and_then(|m| find_mandate(image, doc, m));
    match grants::resolve(image, doc, req, named).ok()? {
        Under::Mandate(m) => Some((m, Instances::NONE)),
        Under::Instance(t, grant) => {
            if !doc.text_eq(grant.holder, req.subject_id) {
                return None;
            }
            let leaf = image.template(t).mandate;
            let env = Env::new(image, doc, req, tool, listing, &image.mandate(leaf));
            let (mut instances, broken) = grants::lineage(image, doc, req, t, grant);
            grants::check(image, &env, &mut instances, broken).ok()?;
            Some((leaf, instances))
        }
    }
}

/// The rules of tool `tool` along the chain of mandate `leaf`, root first, each mandate's in its order: as a
/// decision finds them (the tool's rule lists, sorted by mandate), each with its mandate's index.
fn chain_rules(image: &Image<'_>, tool: u32, leaf: u32) -> Vec<(u32, Rule)> {
    let t = image.tool(tool);
    let m = image.mandate(leaf);
    let mut out = Vec::new();
    for k in 0..m.chain_count {
        let mandate = image.word(m.chain_off + 4 * k);
        for l in 0..t.lists_count {
            let list = RuleList::decode(image.bytes, Image::at(t.lists_off, RuleList::SIZE, l));
            if list.mandate == mandate {
                for j in 0..list.rules_count {
                    out.push((mandate, Rule::decode(image.bytes, image.word(list.rules_off + 4 * j))));
                }
            }
        }
    }
    out
}

/// What the runtime reads of a call request: `(kind, value)` of every rule of the chain covering the called tool
/// (empty when the request is refused, or names no tool or mandate of the policy, as `eval::trace`).
fn rt_trace(image: &Image<'_>, bytes: &[u8]) -> Vec<(&'static str, Option<bool>)> {
    support::rt_parse(bytes, |parsed| {
        let Ok((doc, _)) = parsed else { return Vec::new() };
        let Ok(req) = request::parse(&doc, Need::Call) else { return Vec::new() };
        let Some(call) = req.call else { return Vec::new() };
        let Some(tool) = find_tool(image, &doc, call.name) else { return Vec::new() };
        let Some((leaf, instances)) = resolve(image, &doc, &req, tool, false) else { return Vec::new() };
        let base = Env::new(image, &doc, &req, tool, false, &image.mandate(leaf));
        chain_rules(image, tool, leaf)
            .iter()
            .map(|(m, r)| {
                // Each mandate's rules read its own instance's values (and its parent instance's).
                let env = Env {
                    instance: instances.of_mandate(*m).copied(),
                    parent: instances.parent_of(*m).copied(),
                    ..base
                };
                (kind_name(r.kind), cond::eval(image, r.cond_off, r.cond_count, &env).ok())
            })
            .collect()
    })
}

#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    requests: usize,
    rules: usize,
    outcomes: [usize; 3],
}

impl Tally {
    fn add(&mut self, results: &[(&'static str, Option<bool>)]) {
        self.requests += 1;
        self.rules += results.len();
        for (_, r) in results {
            self.outcomes[match r {
                Some(true) => 0,
                Some(false) => 1,
                None => 2,
            }] += 1;
        }
    }
}

/// Compares the runtime with the interpreter on one request.
fn same(unit: &str, program: &Program, image: &Image<'_>, bytes: &[u8], tally: &mut Tally) {
    let expected: Vec<(&'static str, Option<bool>)> =
        remit_lang::eval::trace(program, bytes).iter().map(|t| (t.kind, t.result)).collect();
    let got = rt_trace(image, bytes);
    assert_eq!(got, expected, "{unit}: {}", String::from_utf8_lossy(bytes));
    tally.add(&got);
}

// -------------------------------------------------------------------------------------------------------------------
// The units: the corpus, the policies of tests/rt_cond/, and conditions the language cannot write.

/// The corpus (`support::corpus`), then for every policy of tests/rt_cond/ (checked as the semantics folders are,
/// without the narrowing proof) the policy and the same policy with [`synthetic`] rules added, each with a request
/// for every tool and mandate ([`base_requests`]).
fn units() -> Vec<support::Unit> {
    let mut units = support::corpus();
    let dir = support::root().join("tests/rt_cond");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "remit")) {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut sources = remit_lang::stdlib::sources();
        sources.add(file.clone(), std::fs::read_to_string(path).unwrap());
        let checked = check_with(sources, Options { narrowing: false });
        let program = checked.program.unwrap_or_else(|| panic!("{file} does not check: {:#?}", checked.diagnostics));
        let requests = base_requests(&program);
        let name = format!("tests/rt_cond/{file}");
        let more = if program.tool("rc_world").is_some() {
            synthetic_world(program.clone())
        } else if program.tool("rc_time").is_some() {
            synthetic_time(program.clone())
        } else {
            synthetic(program.clone())
        };
        units.push(support::Unit {
            name: name.clone(),
            dir: dir.clone(),
            program,
            requests: requests.clone(),
            subjects: Vec::new(),
        });
        units.push(support::Unit {
            name: format!("{name} (synthetic rules)"),
            dir: dir.clone(),
            program: more,
            requests,
            subjects: Vec::new(),
        });
    }
    units
}

/// A valid request value of type `ty`.
fn default_json(ty: &Type, program: &Program) -> Json {
    use serde_json::json;
    match ty {
        Type::String => json!("x"),
        Type::Kind(_) => json!("acct/1"),
        Type::Int => json!(3),
        Type::Decimal => serde_json::from_str("1.5").unwrap(),
        Type::Money => json!("10 USD"),
        Type::Bool => json!(true),
        Type::Timestamp => json!("2026-11-30T12:00:00Z"),
        Type::Duration => json!("15m"),
        Type::Enum(_, variants) => json!(variants[0]),
        Type::Level => json!(program.levels[0]),
        Type::Set(element) => json!([default_json(element, program)]),
    }
}

/// A call of every tool the policy itself declares (not the standard library's) under every mandate, every
/// parameter and context attribute given a valid value.
fn base_requests(program: &Program) -> Vec<Vec<u8>> {
    let attributes: serde_json::Map<String, Json> =
        program.contexts.iter().map(|(name, ty)| (name.clone(), default_json(ty, program))).collect();
    let properties = |declared: &std::collections::BTreeMap<String, remit_lang::ir::EntityAttribute>| {
        declared.iter().map(|(name, a)| (name.clone(), default_json(&a.ty, program))).collect::<serde_json::Map<_, _>>()
    };
    let (subject_properties, resource_properties) =
        (properties(&program.subject_attributes), properties(&program.resource_attributes));
    // Every mandate's principal's attributes, so that each request carries its own principal's and others'.
    let principals: serde_json::Map<String, Json> = program
        .mandates
        .iter()
        .filter(|_| !program.principal_attributes.is_empty())
        .map(|m| (m.principal.clone(), Json::Object(properties(&program.principal_attributes))))
        .collect();
    // Every relation answered for the tuples over a few strings (the request's own values among them), every other
    // one holding.
    let relations: serde_json::Map<String, Json> = program
        .relations
        .values()
        .map(|r| (r.name.clone(), relation_list(r.params.len(), &RELATION_WORDS, |i| i.is_multiple_of(2))))
        .collect();
    let mut out = Vec::new();
    for tool in program.tools.iter().filter(|t| t.name.starts_with("rc_")) {
        let arguments: serde_json::Map<String, Json> =
            tool.params.iter().map(|(name, ty)| (name.clone(), default_json(ty, program))).collect();
        for mandate in &program.mandates {
            let mut request = serde_json::json!({
                "subject": {"id": "agent:a", "credential": {"scopes": ["s1", "s2"]}},
                "action": {"name": tool.name, "arguments": arguments},
                "resource": {"id": "orders/7"},
                "context": {"mandate": mandate.name, "now": "2026-11-30T12:00:00Z", "attempt": 1,
                            "attributes": attributes},
            });
            if !program.relations.is_empty() || !subject_properties.is_empty() || !resource_properties.is_empty() {
                request["subject"]["properties"] = Json::Object(subject_properties.clone());
                request["resource"]["properties"] = Json::Object(resource_properties.clone());
                request["context"]["relations"] = Json::Object(relations.clone());
            }
            if !principals.is_empty() {
                request["context"]["principals"] = Json::Object(principals.clone());
            }
            // The holidays of every other calendar closed on them (the rest are missing until a test sets them).
            if !program.calendars.is_empty() {
                let holidays: serde_json::Map<String, Json> = program
                    .calendars
                    .values()
                    .filter(|c| c.calendar.closed_on_holidays())
                    .step_by(2)
                    .map(|c| (c.name.clone(), serde_json::json!(["2026-12-24", "2026-11-30"])))
                    .collect();
                request["context"]["holidays"] = Json::Object(holidays);
            }
            out.push(request.to_string().into_bytes());
        }
    }
    out
}

/// `program` with rules whose conditions the language cannot write but the image and both evaluators must handle
/// alike: sets compared whole and listed in `in`, money lists in two currencies, comparisons of values of different
/// kinds, `level`-typed arguments and attributes, empty `and`/`or`, and-or nesting near [`image::MAX_COND_DEPTH`],
/// and an `or` of thousands of atoms. Each is a copy of the first `allow` of the policy's first mandate for the
/// tool, with the condition replaced.
fn synthetic(mut program: Program) -> Program {
    let root = 0;
    let atom = |attr: Attr, ty: Type, test: Test| Cond::Atom(Atom { attr, ty, test });
    let arg = |name: &str| Attr::Arg(name.into());
    let s = |x: &str| Value::String(x.into());
    let money = |x: &str| Value::Money(Money::parse(x).unwrap());
    let int = |n: i64| Value::Number(Decimal::from_int(n));
    let strings = || Type::Set(Box::new(Type::String));
    let monies = || Type::Set(Box::new(Type::Money));
    let eq = |v: Value| Test::Compare(CompareOp::Eq, v);
    let mut deep = atom(arg("n"), Type::Int, eq(int(3)));
    for level in 0..(image::MAX_COND_DEPTH - 2) {
        let other =
            if level % 3 == 0 { Cond::True } else { atom(arg("b"), Type::Bool, eq(Value::Bool(level % 2 == 0))) };
        deep = if level % 2 == 0 { Cond::And(vec![deep, other]) } else { Cond::Or(vec![other, deep]) };
    }
    let wide = Cond::Or((0..3_000).map(|k| atom(arg("n"), Type::Int, eq(int(k * 7 - 100)))).collect());
    let conds: Vec<(&str, Cond)> = vec![
        ("rc_sets", atom(arg("tags"), strings(), eq(Value::Set(vec![s("a"), s("b")])))),
        ("rc_sets", atom(arg("tags"), strings(), Test::Compare(CompareOp::Ne, Value::Set(vec![s("c")])))),
        ("rc_sets", atom(arg("tags"), strings(), Test::In(vec![Value::Set(vec![s("a")]), s("a"), Value::Set(vec![])]))),
        ("rc_sets", atom(arg("tags"), strings(), Test::NotIn(vec![Value::Set(vec![s("a"), s("b")])]))),
        ("rc_sets", atom(arg("amounts"), monies(), eq(Value::Set(vec![money("1 USD"), money("2 EUR")])))),
        ("rc_sets", atom(Attr::SubjectScopes, strings(), eq(Value::Set(vec![s("s1"), s("s2")])))),
        ("rc_sets", atom(arg("tags"), strings(), Test::Contains(Value::Set(vec![s("a")])))),
        ("rc_sets", atom(arg("amounts"), monies(), Test::Within(vec![money("1 USD"), money("1 EUR")]))),
        ("rc_sets", atom(arg("amounts"), monies(), Test::NotContains(money("2 EUR")))),
        ("rc_scalars", atom(arg("m"), Type::Money, Test::In(vec![money("10 USD"), money("10 EUR"), money("5 USD")]))),
        ("rc_scalars", atom(arg("m"), Type::Money, Test::NotIn(vec![money("7 EUR"), money("5 USD")]))),
        ("rc_scalars", atom(arg("m"), Type::Money, Test::Compare(CompareOp::Lt, money("20 EUR")))),
        ("rc_scalars", atom(arg("s"), Type::Level, Test::Compare(CompareOp::Le, Value::Level(1)))),
        (
            "rc_read",
            atom(Attr::Context("rc_region".into()), Type::Level, Test::In(vec![Value::Level(0), Value::Level(3)])),
        ),
        ("rc_scalars", atom(arg("m"), Type::Money, Test::Under("1".into()))),
        ("rc_scalars", atom(arg("s"), Type::String, Test::Compare(CompareOp::Lt, s("x")))),
        ("rc_scalars", atom(arg("n"), Type::Int, eq(s("3")))),
        ("rc_scalars", atom(arg("s"), Type::String, Test::Contains(s("x")))),
        ("rc_scalars", atom(arg("s"), Type::String, Test::Within(vec![s("x")]))),
        ("rc_scalars", atom(Attr::Level, Type::Level, Test::In(vec![Value::Level(1), s("draft")]))),
        ("rc_scalars", Cond::And(vec![Cond::Or(vec![]), Cond::And(vec![])])),
        ("rc_scalars", Cond::Or(vec![Cond::And(vec![]), atom(arg("n"), Type::Int, eq(int(3)))])),
        ("rc_scalars", Cond::Or(vec![])),
        ("rc_scalars", deep),
        ("rc_scalars", wide),
    ];
    for (i, (tool, cond)) in conds.into_iter().enumerate() {
        let t = program.tool(tool).unwrap();
        let mut rule = program.mandates[root]
            .rules
            .iter()
            .find(|r| r.target == Target::Tool(t) && r.kind == RuleKind::Allow)
            .unwrap_or_else(|| panic!("no allow of {tool} to copy"))
            .clone();
        rule.condition = cond;
        rule.label = format!("synthetic {i}");
        program.mandates[root].rules.push(rule);
    }
    program
}

/// The strings relation answers are made of: the base requests' own values (`default_json`, the subject, the
/// resource, the principal) and the constants of tests/rt_cond/world.remit.
const RELATION_WORDS: [&str; 6] = ["agent:a", "x", "orders/7", "acct/1", "user:rc", "team:x"];

/// A relation's answers: every tuple of `arity` over `words` (at most 40 of them), tuple `i` holding when `holds(i)`.
fn relation_list(arity: usize, words: &[&str], holds: impl Fn(usize) -> bool) -> Json {
    let mut items = Vec::new();
    let total = words.len().pow(arity.min(4) as u32);
    for i in 0..total.min(40) {
        let mut k = i;
        let args: Vec<&str> = (0..arity)
            .map(|_| {
                let w = words[k % words.len()];
                k /= words.len();
                w
            })
            .collect();
        items.push(serde_json::json!({ "args": args, "holds": holds(i) }));
    }
    Json::Array(items)
}

/// tests/rt_cond/world.remit with derived attributes the language cannot write but both evaluators must handle
/// alike: two sets compared whole, strings ordered, relation terms that are no strings (`level`, `now`), a
/// comparison of levels.
fn synthetic_world(mut program: Program) -> Program {
    use remit_lang::ir::Term;
    let atom =
        |attr: Attr| Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(true)) });
    let compare = |l: Attr, op: CompareOp, r: Attr, ty: Type| Attr::Compare(Box::new(l), op, Box::new(r), ty);
    let strings = || Type::Set(Box::new(Type::String));
    let monies = || Type::Set(Box::new(Type::Money));
    let (subject, resource) = (|n: &str| Attr::Subject(n.into()), |n: &str| Attr::Resource(n.into()));
    let conds = vec![
        atom(compare(subject("accounts"), CompareOp::Eq, resource("tags"), strings())),
        atom(compare(subject("accounts"), CompareOp::Ne, Attr::SubjectScopes, strings())),
        atom(compare(subject("fees"), CompareOp::Eq, subject("fees"), monies())),
        atom(compare(subject("team"), CompareOp::Lt, resource("owner"), Type::String)),
        atom(compare(Attr::Level, CompareOp::Le, Attr::Level, Type::Level)),
        atom(compare(Attr::Now, CompareOp::Ge, subject("since"), Type::Timestamp)),
        atom(Attr::Relation("rw_flag".into(), vec![Term::Attr(Attr::Level)])),
        atom(Attr::Relation("rw_member".into(), vec![Term::Attr(Attr::Now), Term::Value("x".into())])),
        atom(Attr::Member(Box::new(Attr::Arg("m".into())), Box::new(subject("fees")), Type::Money)),
        atom(compare(Attr::Principal("accounts".into()), CompareOp::Eq, subject("accounts"), strings())),
        atom(Attr::Relation("rw_flag".into(), vec![Term::Attr(Attr::Principal("region".into()))])),
    ];
    let root = 0;
    let t = program.tool("rc_world").unwrap();
    for (i, cond) in conds.into_iter().enumerate() {
        let mut rule = program.mandates[root]
            .rules
            .iter()
            .find(|r| r.target == Target::Tool(t) && r.kind == RuleKind::Allow)
            .unwrap()
            .clone();
        rule.condition = cond;
        rule.label = format!("synthetic world {i}");
        program.mandates[root].rules.push(rule);
    }
    program
}

/// tests/rt_cond/time.remit with calendar and duration atoms the language cannot write but both evaluators must
/// handle alike: their negations as tests (`== false`, `!= true`), `now` on both sides of a difference, and the
/// calendars of subjects' and resources' timestamps.
fn synthetic_time(mut program: Program) -> Program {
    let atom = |attr: Attr, op: CompareOp, b: bool| {
        Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(op, Value::Bool(b)) })
    };
    let in_calendar = |name: &str, instant: Attr| Attr::InCalendar(name.into(), Box::new(instant));
    let elapsed = |later: Attr, earlier: Attr, op: CompareOp, seconds: i64| {
        Attr::Elapsed(Box::new(later), Box::new(earlier), op, seconds)
    };
    let (arg, resource) = (|n: &str| Attr::Arg(n.into()), |n: &str| Attr::Resource(n.into()));
    let conds = vec![
        atom(in_calendar("rt_office", Attr::Now), CompareOp::Eq, false),
        atom(in_calendar("rt_ny", resource("due")), CompareOp::Ne, true),
        atom(in_calendar("rt_kathmandu", Attr::Subject("since".into())), CompareOp::Eq, true),
        atom(in_calendar("rt_dated", resource("due")), CompareOp::Eq, true),
        atom(elapsed(Attr::Now, Attr::Now, CompareOp::Eq, 0), CompareOp::Eq, true),
        atom(elapsed(arg("t"), resource("due"), CompareOp::Gt, -3600), CompareOp::Ne, false),
        atom(elapsed(arg("u"), arg("t"), CompareOp::Lt, i64::MAX), CompareOp::Eq, true),
        atom(elapsed(arg("u"), arg("t"), CompareOp::Ge, i64::MIN), CompareOp::Eq, false),
    ];
    let root = 0;
    let t = program.tool("rc_time").unwrap();
    for (i, cond) in conds.into_iter().enumerate() {
        let mut rule = program.mandates[root]
            .rules
            .iter()
            .find(|r| r.target == Target::Tool(t) && r.kind == RuleKind::Allow)
            .unwrap()
            .clone();
        rule.condition = cond;
        rule.label = format!("synthetic time {i}");
        program.mandates[root].rules.push(rule);
    }
    program
}

/// Instants where calendars change their answer: Berlin's and New York's daylight-saving transitions of 2026, local
/// midnights of Berlin and New York around the holidays the tests list, the window of `rc_time_2026`'s table, the
/// base requests' instant (2026-11-30T12:00:00Z, a Monday), and the edges of `rt_dated`'s dated hours and closures, each a nanosecond, a second, half an hour and an hour
/// either side; some written with an offset.
fn near_transitions() -> Vec<String> {
    let at = |text: &str| remit_lang::value::parse_instant(text).unwrap();
    let mut out = Vec::new();
    let second = NANOS_PER_SECOND;
    for base in [
        "2026-03-29T01:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T00:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-11-01T06:00:00Z",
        "2026-11-01T05:30:00Z",
        "2026-12-23T23:00:00Z",
        "2026-12-24T05:00:00Z",
        "2026-11-29T23:00:00Z",
        "2026-11-30T05:00:00Z",
        "2026-11-30T14:00:00Z",
        "2026-11-30T06:15:00Z",
        "2026-01-01T00:00:00Z",
        "2027-06-01T00:00:00Z",
        "2026-11-30T12:00:00Z",
        "2026-12-04T21:00:00Z",
        "2026-11-29T09:00:00Z",
        "2026-11-29T13:00:00Z",
        "2026-12-01T08:00:00Z",
        "2026-12-01T21:00:00Z",
        "2026-12-01T23:00:00Z",
        "2026-12-05T23:00:00Z",
    ] {
        let t = at(base);
        for d in [0, 1, -1, second, -second, second / 2, 1800 * second, -1800 * second, 3600 * second] {
            out.push(json_string(&format_instant(t + d)));
        }
    }
    for text in [
        "2026-03-29T03:00:00+02:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T02:30:00+02:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-30T17:44:59.999999999+05:45",
        "1969-12-31T23:59:59Z",
        "2100-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999999Z",
    ] {
        out.push(json_string(text));
    }
    out
}

/// `context.holidays.NAME` lists: the holidays near the instants above, none, repeated and unsorted, and malformed
/// (an item that is not a date, a date that does not exist, not a list).
const HOLIDAY_LISTS: &[&str] = &[
    r#"["2026-11-30"]"#,
    "[]",
    r#"["2026-12-24","2026-12-25","2026-12-24"]"#,
    r#"["2026-11-01","2026-10-25","2026-03-29","2026-03-08"]"#,
    r#"["2026-12-04","2026-12-05"]"#,
    r#"["2026-11-30"]"#,
    r#"["2026-11-30","x"]"#,
    r#"["2026-02-29"]"#,
    r#"["2026-11-30T00:00:00Z"]"#,
    "[20261130]",
    r#""2026-11-30""#,
    "{}",
    "null",
];

/// Where in a request a timestamp operand is read from, `now` included.
fn instant_path(attr: &Attr) -> Option<Vec<String>> {
    match attr {
        Attr::Now => Some(vec!["context".into(), "now".into()]),
        other => path_of(other),
    }
}

// -------------------------------------------------------------------------------------------------------------------
// Values made from the policy's constants.

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// The JSON string `text` with its first ASCII letter or digit written as a `\u` escape.
fn escaped(text: &str) -> String {
    let mut out = String::new();
    let mut done = false;
    for (i, c) in text.char_indices() {
        if !done && i > 0 && c.is_ascii_alphanumeric() {
            out.push_str(&format!("\\u{:04x}", c as u32));
            done = true;
        } else {
            out.push(c);
        }
    }
    out
}

fn decimal(n: i128) -> String {
    Decimal(n).to_string()
}

/// JSON texts near `value` (of type `ty`): the value itself in each encoding the type reads, its neighbours, and
/// the same in the wrong encoding.
fn near(value: &Value, ty: &Type, program: &Program, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            for t in [s.clone(), format!("{s}x"), format!("{s}a/b"), format!("{s}../x"), format!("{s}/./x")] {
                out.push(json_string(&t));
            }
            out.push(escaped(&json_string(s)));
            if let Some(shorter) = s.get(..s.len().saturating_sub(1)) {
                out.push(json_string(shorter));
            }
        }
        Value::Number(d) => {
            let one = 1_000_000_000;
            for n in [d.0, d.0 + 1, d.0 - 1, d.0 + one, d.0 - one, -d.0] {
                out.push(decimal(n));
                out.push(json_string(&decimal(n)));
            }
            out.push(escaped(&json_string(&decimal(d.0))));
            out.push(format!("{}.000", decimal(d.0)));
            out.push(format!("{}e0", decimal(d.0)));
        }
        Value::Money(m) => {
            for n in [m.amount.0, m.amount.0 + 10_000_000, m.amount.0 - 10_000_000, -m.amount.0 - 1] {
                out.push(json_string(&format!("{} {}", decimal(n), m.currency)));
            }
            out.push(json_string(&format!("{} EUR", decimal(m.amount.0))));
            out.push(json_string(&format!("{}.00 {}", decimal(m.amount.0), m.currency)));
            out.push(escaped(&json_string(&format!("{} {}", decimal(m.amount.0), m.currency))));
            out.push(decimal(m.amount.0));
        }
        Value::Bool(b) => out.extend([b.to_string(), (!b).to_string(), json_string(&b.to_string())]),
        Value::Timestamp(t) => {
            // A second and a nanosecond either side, and half a second past.
            let second = NANOS_PER_SECOND;
            for n in [*t, t + second, t - second, t + 1, t - 1, t + second / 2] {
                out.push(json_string(&format_instant(n)));
            }
            out.push(escaped(&json_string(&format_instant(*t))));
            out.push(t.to_string());
            // The same instant in other RFC 3339 spellings (an offset, milliseconds, lowercase), and near misses.
            let utc = format_instant(*t);
            if let Some(whole) = utc.strip_suffix('Z').filter(|w| w.len() == 19) {
                let hour: u32 = whole[11..13].parse().unwrap_or(0);
                if hour < 22 {
                    let later = format!("{}{:02}{}", &whole[..11], hour + 2, &whole[13..]);
                    out.push(json_string(&format!("{later}+02:00")));
                    out.push(json_string(&format!("{later}.000000001+02:00")));
                    out.push(json_string(&format!("{later}+0200")));
                }
                out.push(json_string(&format!("{whole}.000Z")));
                out.push(json_string(&format!("{}z", whole.replace('T', "t"))));
                out.push(json_string(&format!("{whole}.5-00:00")));
                out.push(json_string(&format!("{whole}.0000000001Z")));
                out.push(json_string(&format!("{}60Z", &whole[..17])));
            }
        }
        Value::Duration(d) => {
            for n in [*d, d + 1, d - 1] {
                out.push(n.to_string());
                out.push(json_string(&format!("{n}s")));
            }
            if d % 60 == 0 {
                out.push(json_string(&format!("{}m", d / 60)));
                out.push(json_string(&format!("+0{}m", d / 60)));
            }
            out.push(escaped(&json_string(&format!("{d}s"))));
            out.push(format!("{d}.0"));
            // Past `i64` (a `u64` still): not a duration.
            for big in
                ["9223372036854775807", "9223372036854775808", "\"9223372036854775808s\"", "\"153722867280912931m\""]
            {
                out.push(big.to_string());
            }
        }
        Value::Level(l) => {
            for name in &program.levels {
                out.push(json_string(name));
                out.push(escaped(&json_string(name)));
            }
            out.push(l.to_string());
        }
        Value::Set(items) => {
            let element = match ty {
                Type::Set(e) => e.as_ref().clone(),
                other => other.clone(),
            };
            let mut singles = Vec::new();
            for item in items {
                near(item, &element, program, &mut singles);
            }
            let whole: Vec<String> = items.iter().map(render).collect();
            out.push(format!("[{}]", whole.join(",")));
            out.push(format!("[{}]", whole.iter().rev().cloned().collect::<Vec<_>>().join(",")));
            if let Some((first, _)) = whole.split_first() {
                out.push(format!("[{first}]"));
                out.push(format!("[{first},{first}]"));
            }
            for s in singles.iter().take(6) {
                out.push(format!("[{s}]"));
                out.push(s.clone());
            }
            out.push("[]".into());
        }
    }
}

/// A constant written as the request encodes it.
fn render(value: &Value) -> String {
    match value {
        Value::String(s) => json_string(s),
        Value::Number(d) => d.to_string(),
        Value::Money(m) => json_string(&m.to_string()),
        Value::Bool(b) => b.to_string(),
        Value::Timestamp(t) => json_string(&format_instant(*t)),
        Value::Duration(d) => d.to_string(),
        Value::Level(l) => l.to_string(),
        Value::Set(items) => format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(",")),
    }
}

/// Values of no particular policy: the other types, and the encodings requests trip on.
const ODD: &[&str] = &[
    "null",
    "true",
    "{}",
    "[]",
    "[1,\"a\"]",
    "0",
    "-0",
    "7",
    "-7",
    "1.5",
    "1e3",
    "0.1234567891",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775808",
    "\"\"",
    "\" \"",
    "\"x\"",
    "\"1.5\"",
    "\"-0\"",
    "\"25.00 USD\"",
    "\"-5.00 USD\"",
    "\"-0.00 USD\"",
    "\"25 usd\"",
    "\"15m\"",
    "\"+15m\"",
    "\"1\\u00e9\"",
    "\"2026-11-30T12:00:00Z\"",
    "\"2026-02-30T00:00:00Z\"",
    "\"a//b\"",
    "\"a/./b\"",
    "\"%2e%2E\"",
    "\"a\\\\b\"",
    "\"a\\u0000b\"",
    "[\"-1.00 USD\",\"1.00 USD\"]",
];

/// The atoms of each rule of the program (rules without atoms left out): a test picks a rule, then one of its
/// atoms, so that an `or` of thousands of atoms does not drown the other rules.
fn atoms(program: &Program) -> Vec<Vec<remit_lang::ir::Atom>> {
    fn walk(cond: &Cond, out: &mut Vec<remit_lang::ir::Atom>) {
        match cond {
            Cond::Atom(a) => out.push(a.clone()),
            Cond::And(items) | Cond::Or(items) => items.iter().for_each(|c| walk(c, out)),
            Cond::True | Cond::False => {}
        }
    }
    let mut out = Vec::new();
    for m in &program.mandates {
        for r in &m.rules {
            let mut atoms = Vec::new();
            walk(&r.condition, &mut atoms);
            if !atoms.is_empty() {
                out.push(atoms);
            }
        }
    }
    out
}

/// JSON texts for an atom's attribute.
fn candidates(atom: &remit_lang::ir::Atom, program: &Program) -> Vec<String> {
    let mut out = Vec::new();
    let operands: Vec<&Value> = match &atom.test {
        Test::Compare(_, v) | Test::Contains(v) | Test::NotContains(v) => vec![v],
        Test::In(vs) | Test::NotIn(vs) | Test::Within(vs) | Test::NotWithin(vs) => vs.iter().collect(),
        Test::Under(_) | Test::NotUnder(_) => Vec::new(),
    };
    let scalar = match &atom.ty {
        Type::Set(e) => e.as_ref().clone(),
        t => t.clone(),
    };
    for v in &operands {
        near(v, &atom.ty, program, &mut out);
    }
    if let Test::Under(p) | Test::NotUnder(p) = &atom.test {
        near(&Value::String(p.clone()), &atom.ty, program, &mut out);
    }
    if let Type::Enum(_, variants) = &scalar {
        out.extend(variants.iter().map(|v| json_string(v)));
        out.extend(variants.iter().map(|v| escaped(&json_string(v))));
    }
    if scalar == Type::Level {
        out.extend(program.levels.iter().map(|l| json_string(l)));
    }
    // Sets of the singles: a set attribute meets its elements' values.
    if matches!(atom.ty, Type::Set(_)) {
        let singles: Vec<String> = out.iter().filter(|s| !s.starts_with('[')).cloned().collect();
        for pair in singles.chunks(2) {
            out.push(format!("[{}]", pair.join(",")));
        }
    }
    out
}

/// The principal whose attributes the world's requests vary.
const PRINCIPAL: &str = "user:rc";

/// Where in a request an attribute is read from (`None` for those a request does not carry: `now`, `level`).
fn path_of(attr: &Attr) -> Option<Vec<String>> {
    let path = |parts: &[&str]| Some(parts.iter().map(|p| p.to_string()).collect());
    match attr {
        Attr::Arg(name) => path(&["action", "arguments", name]),
        Attr::Context(name) => path(&["context", "attributes", name]),
        Attr::Subject(name) => path(&["subject", "properties", name]),
        Attr::Resource(name) => path(&["resource", "properties", name]),
        // tests/rt_cond/world.remit's first principal (its other mandate's keeps the base requests' values).
        Attr::Principal(name) => path(&["context", "principals", PRINCIPAL, name]),
        Attr::ResourceId => path(&["resource", "id"]),
        Attr::SubjectScopes => path(&["subject", "credential", "scopes"]),
        Attr::Attempt => path(&["context", "attempt"]),
        _ => None,
    }
}

/// A value of type `ty` the base requests hold (`default_json`), as a constant.
fn default_value(ty: &Type, program: &Program) -> Option<Value> {
    let json = default_json(ty, program);
    Some(match ty {
        Type::String | Type::Kind(_) | Type::Enum(..) => Value::String(json.as_str()?.to_string()),
        Type::Int | Type::Decimal => Value::Number(Decimal::parse(&json.to_string())?),
        Type::Money => Value::Money(Money::parse(json.as_str()?)?),
        Type::Bool => Value::Bool(json.as_bool()?),
        Type::Timestamp => Value::Timestamp(remit_lang::value::parse_instant(json.as_str()?)?),
        Type::Duration => Value::Duration(900),
        Type::Level => Value::Level(0),
        Type::Set(element) => Value::Set(vec![default_value(element, program)?]),
    })
}

/// For an atom on a subject's or resource's attribute or derived from others: the path of the request to set, and
/// values for it. An operand of a comparison or membership gets values near the other operand's (the base requests
/// give both the same value); a relation either a term's value or the relation's whole answer list (tuples over the
/// request's values and the atom's constants, holding or not, answered both ways, malformed).
fn world_target(atom: &remit_lang::ir::Atom, program: &Program, rng: &mut Rng) -> Option<(Vec<String>, Vec<String>)> {
    use remit_lang::ir::Term;
    let near_default = |ty: &Type| {
        let mut out = Vec::new();
        if let Some(v) = default_value(ty, program) {
            near(&v, ty, program, &mut out);
        }
        out
    };
    match &atom.attr {
        Attr::Subject(_) | Attr::Resource(_) | Attr::Principal(_) => {
            Some((path_of(&atom.attr)?, candidates(atom, program)))
        }
        Attr::Compare(left, _, right, ty) => {
            let side = if rng.below(2) == 0 { left } else { right };
            Some((path_of(side)?, near_default(ty)))
        }
        Attr::Member(item, set, ty) => {
            if rng.below(2) == 0 {
                Some((path_of(item)?, near_default(ty)))
            } else {
                Some((path_of(set)?, near_default(&Type::Set(Box::new(ty.clone())))))
            }
        }
        Attr::InCalendar(name, instant) => {
            if rng.below(3) == 0 {
                let lists = HOLIDAY_LISTS.iter().map(|l| l.to_string()).collect();
                return Some((vec!["context".into(), "holidays".into(), name.clone()], lists));
            }
            Some((instant_path(instant)?, near_transitions()))
        }
        Attr::Elapsed(later, earlier, _, seconds) => {
            // One side moved from the base requests' common instant by the duration, give or take a nanosecond or
            // a second, either way; or to an instant near a transition.
            let (side, sign) = if rng.below(2) == 0 { (later, 1) } else { (earlier, -1) };
            let base = remit_lang::value::parse_instant("2026-11-30T12:00:00Z").unwrap();
            let mut values = Vec::new();
            // The synthetic atoms compare with up to `i64::MAX` seconds: clamped to what a timestamp can span.
            let span = i128::from(*seconds).clamp(-400_000_000_000, 400_000_000_000) * NANOS_PER_SECOND;
            for d in [0, 1, -1, NANOS_PER_SECOND, -NANOS_PER_SECOND, NANOS_PER_SECOND / 2] {
                for whole in [span, -span, 0] {
                    // Within the years a timestamp can be written in (0000 to 9999).
                    let t = base + sign * (whole + d);
                    if (-62_167_219_200 * NANOS_PER_SECOND..253_402_300_800 * NANOS_PER_SECOND).contains(&t) {
                        values.push(json_string(&format_instant(t)));
                    }
                }
            }
            if rng.below(4) == 0 {
                values = near_transitions();
            }
            Some((instant_path(side)?, values))
        }
        Attr::Relation(name, terms) => {
            let attrs: Vec<&Attr> =
                terms.iter().filter_map(|t| if let Term::Attr(a) = t { Some(a) } else { None }).collect();
            if !attrs.is_empty() && rng.below(3) == 0 {
                let attr = attrs[rng.below(attrs.len())];
                let mut values = near_default(&Type::String);
                values.extend(RELATION_WORDS.iter().map(|w| json_string(w)));
                return Some((path_of(attr)?, values));
            }
            let mut words: Vec<&str> = RELATION_WORDS.to_vec();
            words.extend(terms.iter().filter_map(|t| if let Term::Value(v) = t { Some(v.as_str()) } else { None }));
            let arity = terms.len();
            let seed = rng.below(1000);
            let mut lists = vec![
                relation_list(arity, &words, |i| !(i + seed).is_multiple_of(3)),
                relation_list(arity, &words, |_| false),
                relation_list(arity, &words[..2], |_| true),
                relation_list(arity + 1, &words, |_| true),
                serde_json::json!([]),
                serde_json::json!({"args": [], "holds": true}),
            ];
            // Answered both ways, and spoiled by one bad item.
            let mut both = relation_list(arity, &words, |i| i.is_multiple_of(2));
            let mut spoiled = both.clone();
            if let Some(items) = both.as_array_mut() {
                let flipped: Vec<Json> = items
                    .iter()
                    .map(|item| {
                        let mut item = item.clone();
                        item["holds"] = Json::Bool(item["holds"] != Json::Bool(true));
                        item
                    })
                    .collect();
                items.extend(flipped);
            }
            if let Some(items) = spoiled.as_array_mut() {
                let bad = [
                    serde_json::json!({"args": [1], "holds": true}),
                    serde_json::json!({"args": ["x"]}),
                    serde_json::json!("x"),
                    serde_json::json!({"args": "x", "holds": true}),
                    serde_json::json!({"args": ["x"], "holds": "true"}),
                ];
                items.push(bad[rng.below(bad.len())].clone());
            }
            lists.push(both);
            lists.push(spoiled);
            Some((
                vec!["context".into(), "relations".into(), name.clone()],
                lists.iter().map(Json::to_string).collect(),
            ))
        }
        _ => None,
    }
}

/// A request with `value` (JSON text) at `path` (an object path; objects made on the way); the last key written with
/// an escape when `escape_key`.
fn with_value(base: &Json, path: &[&str], value: &str, escape_key: bool) -> Vec<u8> {
    const MARK: &str = "\u{1}remit-rt-cond-value";
    let mut json = base.clone();
    let mut at = &mut json;
    for key in &path[..path.len() - 1] {
        if !at.get(*key).is_some_and(Json::is_object) {
            at[*key] = serde_json::json!({});
        }
        at = at.get_mut(*key).unwrap();
    }
    let last = path[path.len() - 1];
    at[last] = Json::String(MARK.into());
    let text = json.to_string();
    if escape_key {
        let entry = format!("{}:{}", json_string(last), json_string(MARK));
        return text.replace(&entry, &format!("{}:{value}", escaped(&json_string(last)))).into_bytes();
    }
    text.replace(&json_string(MARK), value).into_bytes()
}

// -------------------------------------------------------------------------------------------------------------------
// The differential tests.

#[test]
fn the_corpus_requests_evaluate_as_in_the_interpreter() {
    let mut tally = Tally::default();
    for unit in units() {
        let bytes = remit_lang::wasm::image::write(&unit.program).unwrap();
        let image = Image::new(&bytes).unwrap();
        for request in &unit.requests {
            same(&unit.name, &unit.program, &image, request, &mut tally);
        }
    }
    eprintln!("corpus: {tally:?}");
    assert!(tally.rules > 500 && tally.outcomes.iter().all(|&n| n > 20), "{tally:?}");
}

#[test]
fn mutated_requests_evaluate_as_in_the_interpreter() {
    let corpus = units();
    let images: Vec<Vec<u8>> = corpus.iter().map(|u| remit_lang::wasm::image::write(&u.program).unwrap()).collect();
    let mut rng = Rng(0x00c0_7d17_1095_0001);
    let mut tally = Tally::default();
    for round in 0..rounds() {
        let k = round % corpus.len();
        let unit = &corpus[k];
        let image = Image::new(&images[k]).unwrap();
        let Some(base) = unit.requests.get(rng.below(unit.requests.len())) else { continue };
        let mut value: Json = serde_json::from_slice(base).unwrap();
        for _ in 0..=rng.below(3) {
            mutate(&mut rng, &mut value, 0);
        }
        let text = value.to_string();
        let request = if rng.below(8) == 0 { damage(&mut rng, &text) } else { text.into_bytes() };
        same(&unit.name, &unit.program, &image, &request, &mut tally);
    }
    eprintln!("mutated: {tally:?}");
    assert!(tally.rules > rounds() / 10, "{tally:?}");
}

/// Arguments and context attributes set to values made from the constants the policy tests them against: every
/// type's decoding, equal and neighbouring values, other encodings and types, escapes, negative money.
#[test]
fn attribute_values_near_the_policy_constants_evaluate_as_in_the_interpreter() {
    let corpus = units();
    let mut rng = Rng(0x00c0_7d17_1095_0002);
    let mut tally = Tally::default();
    let mut listed = Listed::default();
    let per_unit = (rounds() * 4 / corpus.len()).max(40);
    // The same, for the units about the world (tests/rt_cond/world.remit, with and without its synthetic rules).
    let mut world = Tally::default();
    // And for tests/rt_cond/time.remit (calendars and durations).
    let mut time = Tally::default();
    for unit in &corpus {
        let bytes = remit_lang::wasm::image::write(&unit.program).unwrap();
        let image = Image::new(&bytes).unwrap();
        let program = &unit.program;
        let atoms = atoms(program);
        let before = tally;
        let bases: Vec<Json> = unit
            .requests
            .iter()
            .filter_map(|r| serde_json::from_slice::<Json>(r).ok())
            .filter(|j| j.get("action").and_then(|a| a.get("name")).is_some_and(Json::is_string))
            .collect();
        if atoms.is_empty() || bases.is_empty() {
            continue;
        }
        let mut extra: Vec<(&[&str], &str)> = Vec::new();
        let (res, att): (&[&str], &[&str]) = (&["resource", "id"], &["context", "attempt"]);
        for v in ["\"orders/7\"", "\"a/../b\"", "\" \"", "7"] {
            extra.push((res, v));
        }
        for v in ["1", "2", "0", "-1", "3"] {
            extra.push((att, v));
        }
        for _ in 0..per_unit {
            let mut base = bases[rng.below(bases.len())].clone();
            // One to three attributes set; the rest of the request as it was.
            for _ in 0..=rng.below(3) {
                let rule = &atoms[rng.below(atoms.len())];
                let atom = &rule[rng.below(rule.len())];
                let escape_key = rng.below(4) == 0;
                if let Some((path, mut values)) = world_target(atom, program, &mut rng) {
                    values.extend(ODD.iter().map(|s| s.to_string()));
                    let value = values[rng.below(values.len())].clone();
                    let path: Vec<&str> = path.iter().map(String::as_str).collect();
                    let text = with_value(&base, &path, &value, escape_key);
                    same(&unit.name, program, &image, &text, &mut tally);
                    let Ok(next) = serde_json::from_slice::<Json>(&text) else { break };
                    let listing = listing_of(&next, rng.below(2) == 0);
                    possible_covers(&unit.name, program, &image, &listing, &text, &mut listed);
                    base = next;
                    continue;
                }
                let mut values = candidates(atom, program);
                values.extend(ODD.iter().map(|s| s.to_string()));
                let value = values[rng.below(values.len())].clone();
                let text = match &atom.attr {
                    Attr::Arg(name) => with_value(&base, &["action", "arguments", name], &value, escape_key),
                    Attr::Context(name) => with_value(&base, &["context", "attributes", name], &value, escape_key),
                    Attr::SubjectScopes => with_value(&base, &["subject", "credential", "scopes"], &value, escape_key),
                    Attr::ResourceId => with_value(&base, &["resource", "id"], &value, escape_key),
                    Attr::Attempt => with_value(&base, &["context", "attempt"], &value, escape_key),
                    _ => {
                        let (path, v) = extra[rng.below(extra.len())];
                        with_value(&base, path, v, escape_key)
                    }
                };
                same(&unit.name, program, &image, &text, &mut tally);
                // The listing of the same subject and context allows this call's outcomes.
                let Ok(next) = serde_json::from_slice::<Json>(&text) else { break };
                let listing = listing_of(&next, rng.below(2) == 0);
                possible_covers(&unit.name, program, &image, &listing, &text, &mut listed);
                base = next;
            }
        }
        for (name, part) in [("world", &mut world), ("rt_cond/time", &mut time)] {
            if unit.name.contains(name) {
                part.requests += tally.requests - before.requests;
                part.rules += tally.rules - before.rules;
                for (w, (now, then)) in part.outcomes.iter_mut().zip(tally.outcomes.iter().zip(before.outcomes)) {
                    *w += now - then;
                }
            }
        }
    }
    eprintln!("near constants: {tally:?}; possible: {listed:?}; on the world: {world:?}; on time: {time:?}");
    assert!(tally.outcomes.iter().all(|&n| n > 200), "{tally:?}");
    assert!(world.outcomes.iter().all(|&n| n > 200), "{world:?}");
    assert!(time.outcomes.iter().all(|&n| n > 200), "{time:?}");
}

/// Escapes survive `serde_json::Value::to_string` only as what they stand for; the test above writes each value's
/// text into the request as written, so escaped text reaches both readers. This checks that it does.
#[test]
fn escaped_values_reach_the_readers() {
    let base: Json = serde_json::json!({"action": {"name": "t"}});
    let text = with_value(&base, &["action", "arguments", "a"], &escaped("\"25 USD\""), true);
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains(r#""\u0061":"\u0032"#), "{text}");
}

/// A relation's listed tuples read key by key (`cond::tuple_fields`) and its terms compared as bytes or unescaped:
/// tuples whose `args` and `holds` keys, arguments, or the subject's id (a term) are written with escapes, keys in
/// either order, extra keys, and malformed items, for a relation of two terms (kept in locals) and one of three
/// (kept in an array), against the interpreter.
#[test]
fn relation_lists_with_escapes_evaluate_as_in_the_interpreter() {
    let text = r#"
subject rl_agent {
  team: string from properties
}
relation rl_member(string, string) from properties
relation rl_can(string, string, string) from properties
tool rl_t(x: string) {
  level draft
}
mandate rl for "user:rl" {
  holder under "agent:"
  allow rl_t where rl_member(subject, "team:a")
  allow rl_t where rl_can(subject, args.x, subject.team)
  forbid rl_t where rl_member(subject, args.x)
}
"#;
    let mut sources = remit_lang::stdlib::sources();
    sources.add("rl.remit".to_string(), text.to_string());
    let program = check_with(sources, Options { narrowing: false }).program.expect("the policy checks");
    let bytes = remit_lang::wasm::image::write(&program).unwrap();
    let image = Image::new(&bytes).unwrap();
    let subjects = [r#""agent:a""#, r#""agent:\u0061""#, r#""\u0061gent:a""#, r#""agent:b""#];
    let members = [
        r#"[{"args":["agent:a","team:a"],"holds":true}]"#,
        r#"[{"\u0061rgs":["agent:a","team:a"],"holds":true}]"#,
        r#"[{"args":["agent:a","team:a"],"hold\u0073":true}]"#,
        r#"[{"holds":false,"args":["agent:a","t\u0065am:a"]}]"#,
        r#"[{"holds":true,"note":1,"args":["agent:\u0061","team:a"]}]"#,
        r#"[{"args":["agent:a","team:a"],"holds":true},{"args":["agent:a","x"],"holds":false}]"#,
        r#"[{"args":["agent:a","team:a"],"holds":true},{"args":["agent:a","team:a"],"holds":false}]"#,
        r#"[{"args":["agent:a","team:a"],"holds":true},{"args":["agent:a"],"holdsx":true}]"#,
        r#"[{"args":["agent:a","team:a"],"holds":true},{"arg":["agent:a"],"holds":true}]"#,
        r#"[{"args":["agent:a","team:a"],"holds":"true"}]"#,
        r#"[{"args":["agent:a","team:a",1],"holds":true}]"#,
        r#"[{"args":["agent:a"],"holds":true},{"args":["agent:a","team:a","x"],"holds":true}]"#,
        r#"[{"args":{"0":"agent:a"},"holds":true}]"#,
        r#"[["agent:a","team:a"]]"#,
        r#"[]"#,
    ];
    let cans = [
        r#"[{"args":["agent:a","x","ops"],"holds":true}]"#,
        r#"[{"\u0061rgs":["\u0061gent:a","x","o\u0070s"],"hold\u0073":true}]"#,
        r#"[{"args":["agent:a","x","ops"],"holds":false},{"args":["agent:a","y","ops"],"holds":true}]"#,
        r#"[{"args":["agent:a","x"],"holds":true}]"#,
    ];
    let mut tally = Tally::default();
    for subject in subjects {
        for member in members {
            for can in cans {
                for x in [r#""x""#, r#""te\u0061m:a""#, r#""team:a""#] {
                    let request = format!(
                        r#"{{"subject":{{"id":{subject},"properties":{{"team":"o\u0070s"}}}},"action":{{"name":"rl_t","arguments":{{"x":{x}}}}},"context":{{"mandate":"rl","now":"2026-12-07T10:00:00Z","relations":{{"rl_member":{member},"rl_can":{can}}}}}}}"#
                    );
                    same("relation lists", &program, &image, request.as_bytes(), &mut tally);
                }
            }
        }
    }
    eprintln!("relation lists: {tally:?}");
    assert!(tally.outcomes.iter().all(|&n| n > 20), "{tally:?}");
}

// -------------------------------------------------------------------------------------------------------------------
// The listing's `possible`.

/// The outcome sets the runtime gives, for a listing request, the rules of `tool` along its chain; with whether
/// each condition reads a value that the listing does not know.
fn rt_possible(image: &Image<'_>, listing: &[u8], tool: &str) -> Option<Vec<(Possible, bool)>> {
    support::rt_parse(listing, |parsed| {
        let (doc, _) = parsed.ok()?;
        let req: Request = request::parse(&doc, Need::Listing).ok()?;
        let h = image.header;
        let tool = image.find(h.tool_slots_off, h.tool_slots_len, || tool.bytes(), |j| image.tool_name(j))?;
        let (leaf, instances) = resolve(image, &doc, &req, tool, true)?;
        let base = Env::new(image, &doc, &req, tool, true, &image.mandate(leaf));
        Some(
            chain_rules(image, tool, leaf)
                .iter()
                .map(|(m, r)| {
                    let env = Env {
                        instance: instances.of_mandate(*m).copied(),
                        parent: instances.parent_of(*m).copied(),
                        ..base
                    };
                    // A per-call value: an argument, the resource's id, attribute or the attempt the listing does
                    // not carry, and a relation's tuple (a listing may not answer it); also as an operand.
                    let per_call = |a: &image::Atom| {
                        let name = image.str(a.name_off, a.name_len);
                        a.attr == image::ATTR_ARG
                            || a.attr == image::ATTR_RESOURCE_ID && req.resource_id.is_none()
                            || a.attr == image::ATTR_ATTEMPT && req.attempt.is_none()
                            || a.attr == image::ATTR_RESOURCE
                                && req.resource_properties.and_then(|o| doc.get(o, name)).is_none()
                            || a.attr == image::ATTR_RELATION
                            // A calendar's holidays may be absent from the listing: unknown there, missing in the call.
                            || a.attr == image::ATTR_IN_CALENDAR
                    };
                    let unknown = (0..r.cond_count).any(|i| {
                        let n = image::Node::decode(image.bytes, Image::at(r.cond_off, image::Node::SIZE, i));
                        n.op == image::NODE_ATOM && {
                            let a = image::Atom::decode(image.bytes, n.arg);
                            per_call(&a)
                                || (0..a.operands_count).any(|k| {
                                    let at = image.word(a.operands_off.wrapping_add(4 * k));
                                    per_call(&image::Atom::decode(image.bytes, at))
                                })
                        }
                    });
                    (cond::possible(image, r.cond_off, r.cond_count, &env), unknown)
                })
                .collect(),
        )
    })
}

fn truth(r: Option<bool>) -> Truth {
    match r {
        Some(b) => Truth::of(b),
        None => Truth::Error,
    }
}

#[derive(Default, Debug)]
struct Listed {
    rules: usize,
    exact: usize,
    widened: usize,
}

/// `possible` on the listing `listing` includes the interpreter's value of every rule for the call `call` (the
/// same subject and context); exactly that value when the condition reads nothing per call.
fn possible_covers(unit: &str, program: &Program, image: &Image<'_>, listing: &[u8], call: &[u8], n: &mut Listed) {
    let trace = remit_lang::eval::trace(program, call);
    if trace.is_empty() {
        return;
    }
    let call_json: Json = serde_json::from_slice(call).unwrap();
    let tool = call_json["action"]["name"].as_str().unwrap();
    let possible = rt_possible(image, listing, tool)
        .unwrap_or_else(|| panic!("{unit}: the listing is refused: {}", String::from_utf8_lossy(listing)));
    assert_eq!(possible.len(), trace.len(), "{unit}");
    for ((p, unknown), t) in possible.iter().zip(&trace) {
        let value = truth(t.result);
        let shown = || format!("{unit}: {} {}: {p:?} {value:?}\n{}", t.mandate, t.rule, String::from_utf8_lossy(call));
        assert!(p.contains(value), "{}", shown());
        if !unknown {
            assert_eq!(*p, Possible::of(value), "{}", shown());
            n.exact += 1;
        } else if *p != Possible::of(value) {
            n.widened += 1;
        }
        n.rules += 1;
    }
}

/// The listing request of a call: without its `action` (and, when `unknown_resource`, without its resource and
/// attempt too).
fn listing_of(call: &Json, unknown_resource: bool) -> Vec<u8> {
    let mut listing = call.clone();
    let map = listing.as_object_mut().unwrap();
    map.remove("action");
    if unknown_resource {
        map.remove("resource");
        if let Some(ctx) = map.get_mut("context").and_then(Json::as_object_mut) {
            ctx.remove("attempt");
        }
    }
    listing.to_string().into_bytes()
}

#[test]
fn possible_outcomes_include_every_call_with_that_subject_and_context() {
    let corpus = units();
    let mut rng = Rng(0x00c0_7d17_1095_0003);
    let mut n = Listed::default();
    for unit in &corpus {
        let bytes = remit_lang::wasm::image::write(&unit.program).unwrap();
        let image = Image::new(&bytes).unwrap();
        let mut calls: Vec<Vec<u8>> = unit.requests.clone();
        // Mutated calls too (their arguments and context above all), a few per unit.
        for _ in 0..(rounds() / corpus.len()).max(10) {
            let Some(base) = unit.requests.get(rng.below(unit.requests.len())) else { break };
            let mut value: Json = serde_json::from_slice(base).unwrap();
            mutate(&mut rng, &mut value, 0);
            calls.push(value.to_string().into_bytes());
        }
        for call in &calls {
            let Ok(json) = serde_json::from_slice::<Json>(call) else { continue };
            if remit_lang::eval::trace(&unit.program, call).is_empty() {
                continue;
            }
            for unknown_resource in [false, true] {
                let listing = listing_of(&json, unknown_resource);
                possible_covers(&unit.name, &unit.program, &image, &listing, call, &mut n);
            }
        }
        // The unit's listing subjects, with each call's action and resource.
        for subject in &unit.subjects {
            let Ok(listing) = serde_json::from_slice::<Json>(subject) else { continue };
            for call in &unit.requests {
                let Ok(json) = serde_json::from_slice::<Json>(call) else { continue };
                let mut grafted = listing.clone();
                for key in ["action", "resource"] {
                    if let Some(v) = json.get(key) {
                        grafted[key] = v.clone();
                    }
                }
                let grafted = grafted.to_string().into_bytes();
                if request_refused(subject) {
                    continue;
                }
                possible_covers(&unit.name, &unit.program, &image, subject, &grafted, &mut n);
            }
        }
    }
    eprintln!("possible: {n:?}");
    assert!(n.rules > 500 && n.exact > 100 && n.widened > 10, "{n:?}");
}

fn request_refused(listing: &[u8]) -> bool {
    support::rt_parse(listing, |parsed| match parsed {
        Ok((doc, _)) => request::parse(&doc, Need::Listing).is_err(),
        Err(_) => true,
    })
}

// -------------------------------------------------------------------------------------------------------------------
// The value parsers against `remit_lang::value`'s.

/// Text of the characters decimals, money and durations are made of, and a few others.
fn texty() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[-+0-9. A-Za-z_é\u{0}]{0,30}").unwrap()
}

fn numberish() -> impl Strategy<Value = String> {
    proptest::string::string_regex("-?[0-9]{0,26}(\\.[0-9]{0,11})?( [A-Z]{2,4}| [a-z]{3})?").unwrap()
}

/// RFC 3339 `date-time`s and near misses: lowercase separators, fractions of 0 to 11 digits, offsets with and
/// without their colon, out-of-range fields.
fn timestampish() -> impl Strategy<Value = String> {
    proptest::string::string_regex(
        "[0-9]{4}-(0[0-9]|1[0-3])-[0-3][0-9][Tt ]([01][0-9]|2[0-5]):[0-6][0-9]:[0-6][0-9](\\.[0-9]{0,11})?([Zz]|[-+]([01][0-9]|2[0-5]):?[0-6][0-9])?",
    )
    .unwrap()
}

fn durationish() -> impl Strategy<Value = String> {
    proptest::string::string_regex("\\+?-?[0-9]{0,22}[smhdxé]?").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn decimals_parse_as_in_the_interpreter(text in prop_oneof![texty(), numberish()]) {
        prop_assert_eq!(remit_rt::value::parse_decimal(text.as_bytes()), Decimal::parse(&text).map(|d| d.0));
    }

    #[test]
    fn money_parses_as_in_the_interpreter(text in prop_oneof![texty(), numberish()]) {
        let expected = Money::parse(&text).map(|m| (m.amount.0, m.currency.into_bytes()));
        let got = remit_rt::value::parse_money(text.as_bytes()).map(|(a, c)| (a, c.to_vec()));
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn timestamps_parse_as_in_the_interpreter(text in prop_oneof![texty(), timestampish()]) {
        prop_assert_eq!(remit_rt::value::parse_timestamp(text.as_bytes()), remit_lang::value::parse_instant(&text));
    }

    #[test]
    fn durations_parse_as_in_the_interpreter(text in prop_oneof![texty(), durationish()]) {
        prop_assert_eq!(remit_rt::value::parse_duration(text.as_bytes()), remit_lang::value::parse_duration(&text));
    }

    #[test]
    fn unsafe_paths_are_the_interpreters(text in proptest::string::string_regex("[./%25cfeE0a\\\\\u{0}]{0,12}").unwrap()) {
        prop_assert_eq!(cond::unsafe_path(text.bytes()), unsafe_path(&text));
        prop_assert_eq!(cond::unsafe_raw_path(text.as_bytes()), unsafe_path(&text));
    }

    #[test]
    fn long_paths_are_the_interpreters(text in proptest::string::string_regex("([a-z/]{0,9}[./%25cfeE0a\\\\\u{0}]?){0,5}").unwrap()) {
        prop_assert_eq!(cond::unsafe_raw_path(text.as_bytes()), unsafe_path(&text));
    }
}

/// `crates/remit-lang/src/eval/cond.rs`'s `unsafe_path` (crate-private there), word for word: the oracle of the runtime's byte-wise
/// reading.
fn unsafe_path(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    text.contains(['\\', '\0'])
        || text.contains("//")
        || ["%2f", "%5c", "%2e", "%00", "%25"].iter().any(|e| lower.contains(e))
        || text.split('/').any(|segment| segment == "." || segment == "..")
}
