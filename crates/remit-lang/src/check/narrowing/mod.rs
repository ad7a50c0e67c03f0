//! The narrowing check: a sub-mandate's own terms allow nothing its parent does not allow.
//!
//! For each sub-mandate and each tool its grants cover, both sides become formulas over the request (see
//! `authority`): the sub-mandate standing alone (its own clauses, as if it had no parent, same principal) and
//! the parent through its whole chain. The sub-mandate narrows when, for every clause of the parent's chain,
//! "the child allows ∧ this clause refuses" is unsatisfiable; a satisfiable one is a counterexample, written as a
//! request and confirmed by the reference interpreter before it is reported (docs/narrowing.md).
//!
//! Why compare the child's own text rather than the chain the interpreter evaluates: the chain always narrows (it
//! is the child ∧ its ancestors), so it proves nothing; the question the author needs answered is whether the
//! sub-mandate, read on its own, is a complete statement of what it allows within its parent.

mod authority;
mod calendars;
pub mod diff;
mod difference;
mod err;
mod formula;
pub mod parametric;
mod solve;
pub mod template_diff;
mod theory;
mod witness;

use std::collections::BTreeSet;

use serde_json::Value as Json;

pub use authority::Origin;
pub use witness::{confirm, for_parent, Confirmation};

use crate::diag::Diagnostic;
use crate::ir::{Attr, MandateId, Program, RuleKind, Test, ToolId, Type, Value};
use crate::syntax::ast::CompareOp;
use crate::value::Decimal;
use authority::{atom_true, conjuncts, truth_in, Conjunct, Side};
use formula::{is, lit, literals, negate, Model, Var, Vars, F};
use solve::{Answer, Lemmas, Solver};
use witness::{Currencies, Scratch, Shape};

/// Why a sub-mandate is not proven to narrow its parent.
#[derive(Debug, Clone)]
pub struct Finding {
    pub child: MandateId,
    pub parent: MandateId,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    /// A confirmed counterexample.
    Widens(Widening),
    /// The sub-mandate may delegate as deep as its parent (or has no depth where its parent has one).
    Depth,
    /// The search ran out of steps for this tool.
    Undecided { tool: String },
    /// The symbolic model and the interpreter disagree: an internal error, never shown as a witness.
    Unconfirmed { tool: String, request: Json },
}

#[derive(Debug, Clone)]
pub struct Widening {
    pub tool: String,
    /// The clause of the parent's chain that refuses the witness.
    pub exceeded: Origin,
    /// The sub-mandate's clause that lets it through.
    pub culprit: Culprit,
    /// For an exceeded grant: the attributes the ancestor's grants for this tool refuse the witness on.
    pub attributes: Vec<String>,
    /// A request the sub-mandate standing alone allows and the parent does not.
    pub witness: Json,
}

/// A clause of the sub-mandate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Culprit {
    /// A rule, by index in `Mandate::rules`: the grant that allows the witness, or a weaker restatement.
    Rule(usize),
    /// The validity window (or its absence).
    Valid,
    MaxLevel,
    /// The mandate as a whole (no clause to point at).
    Mandate,
}

/// The narrowing diagnostics of a checked program.
pub fn check(program: &Program) -> Vec<Diagnostic> {
    analyse(program).iter().map(|f| err::finding(program, f)).collect()
}

/// Every finding, sub-mandate by sub-mandate.
pub fn analyse(program: &Program) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut scratch: Option<Scratch> = None;
    for (child, mandate) in program.mandates.iter().enumerate() {
        let Some(parent) = mandate.parent else { continue };
        if deeper_or_equal(program, child, parent) {
            out.push(Finding { child, parent, kind: Kind::Depth });
        }
        compare(program, child, parent, &mut scratch, &mut out);
    }
    out
}

/// The child's own delegation depth is not below its parent's. A parent with depth 0 is the existing
/// `delegation-too-deep` error, not reported twice.
fn deeper_or_equal(program: &Program, child: MandateId, parent: MandateId) -> bool {
    let Some(limit) = program.mandates[parent].delegation_depth.filter(|&d| d > 0) else { return false };
    program.mandates[child].delegation_depth.is_none_or(|own| own >= limit)
}

/// The two sides of the narrowing question for one sub-mandate.
fn sides(program: &Program, child: MandateId, parent: MandateId) -> (Side<'_>, Side<'_>) {
    let mandate = &program.mandates[child];
    let chain = program.chain(parent);
    let mut names = vec![mandate.name.clone()];
    names.extend(chain.iter().map(|&m| program.mandates[m].name.clone()));
    let own = Side {
        program,
        chain: vec![child],
        holders: Some(mandate),
        approval_names: vec![mandate.name.clone()],
        instance_principal: None,
        leaf: None,
    };
    let parents = Side { program, chain, holders: None, approval_names: names, instance_principal: None, leaf: None };
    (own, parents)
}

/// The tools some grant of the mandate covers, in catalog order.
fn granted_tools(program: &Program, mandate: MandateId) -> Vec<ToolId> {
    let tools: BTreeSet<ToolId> = program.mandates[mandate]
        .rules
        .iter()
        .filter(|r| r.kind == RuleKind::Allow)
        .flat_map(|r| r.tools.iter().copied())
        .collect();
    tools.into_iter().collect()
}

fn compare(
    program: &Program,
    child: MandateId,
    parent: MandateId,
    scratch: &mut Option<Scratch>,
    out: &mut Vec<Finding>,
) {
    let (own, parents) = sides(program, child, parent);
    let mut reported: BTreeSet<Origin> = BTreeSet::new();
    let mut undecided = false;
    for tool in granted_tools(program, child) {
        let name = program.tools[tool].name.as_str();
        let mut vars = Vars::default();
        let a = conjuncts(&own, name, &mut vars);
        if a.iter().any(|c| c.formula == F::False) {
            continue; // the child never allows this tool
        }
        let questions = questions(&a, &conjuncts(&parents, name, &mut vars), &reported);
        if questions.is_empty() {
            continue;
        }
        let all_goals: Vec<&F> = a.iter().map(|c| &c.formula).chain(questions.iter().map(|(_, f)| f)).collect();
        let readable = Readable::new(program, tool, &vars, &all_goals);
        let lemmas = Lemmas::default();
        let mut solver = Solver::new(&vars, program.levels.len(), &lemmas).with_calendars(&program.calendars);
        for (origin, refused) in &questions {
            let mut goals: Vec<&F> = a.iter().map(|c| &c.formula).collect();
            goals.push(refused);
            match readable.solve(&mut solver, &goals) {
                Answer::Unsat => {}
                Answer::Unknown => {
                    if !undecided {
                        undecided = true;
                        out.push(Finding { child, parent, kind: Kind::Undecided { tool: name.to_string() } });
                    }
                }
                Answer::Sat(model) => {
                    reported.insert(*origin);
                    let shape = Shape { program, tool: name, mandate: &program.mandates[child].name };
                    let currencies = currencies(&goals, &vars);
                    let scratch = scratch.get_or_insert_with(|| Scratch::new(program));
                    // The arguments no rule reads are filled in too, unless that changes the outcome (it cannot
                    // today; the minimal request is the fallback all the same).
                    let filled = witness::request(&model, &vars, shape, &currencies, true);
                    let (request, confirmed) = if scratch.confirm(child, &filled).is_some_and(|c| c.confirms()) {
                        (filled, true)
                    } else {
                        let minimal = witness::request(&model, &vars, shape, &currencies, false);
                        let confirmed = scratch.confirm(child, &minimal).is_some_and(|c| c.confirms());
                        (minimal, confirmed)
                    };
                    let kind = if confirmed {
                        Kind::Widens(Widening {
                            tool: name.to_string(),
                            exceeded: *origin,
                            culprit: culprit(program, child, tool, *origin, &vars, &model),
                            attributes: refusing_attributes(program, *origin, tool, &vars, &model),
                            witness: request,
                        })
                    } else {
                        Kind::Unconfirmed { tool: name.to_string(), request }
                    };
                    out.push(Finding { child, parent, kind });
                }
            }
        }
    }
}

/// What makes a witness read like a real call, as extra goals the solver is asked to meet first: every argument
/// the tool declares present, and its amounts well typed (not below zero unless `signed`) and in the currency the
/// policy names. A call with arguments missing is only shown when no complete one is a counterexample.
struct Readable {
    every_argument: Vec<F>,
    /// `every_argument`, plus currencies and non-negative amounts.
    everything: Vec<F>,
}

impl Readable {
    fn new(program: &Program, tool: ToolId, vars: &Vars, goals: &[&F]) -> Readable {
        let t = &program.tools[tool];
        let every_argument: Vec<F> = t
            .params
            .iter()
            .filter_map(|(param, _)| vars.find(&Var::Present(Attr::Arg(param.clone()))))
            // The world a condition reads too: a witness that carries the resource's owner ("a resource owned by
            // someone else") says more than one without it.
            .chain(vars.iter().filter_map(|(id, var)| match var {
                Var::Present(Attr::Subject(_) | Attr::Resource(_) | Attr::Principal(_) | Attr::ResourceId) => Some(id),
                Var::Present(attr) if attr.is_derived() => Some(id),
                _ => None,
            }))
            .map(|id| is(id, true))
            .collect();
        let named_currency = currencies(goals, vars)
            .into_iter()
            .filter(|(_, codes)| codes.len() == 1)
            .filter_map(|(id, codes)| codes.into_iter().next().map(|code| (id, code)))
            .map(|(id, code)| lit(id, Test::Compare(CompareOp::Eq, Value::String(code))));
        let non_negative = vars
            .iter()
            .filter(|(_, var)| match var {
                Var::Value(Attr::Arg(name), Type::Money) => !t.is_signed(name),
                Var::Value(Attr::Context(name), Type::Money) => !program.signed_contexts.contains(name),
                Var::Value(Attr::Subject(name), Type::Money) => !program.subject_attributes[name].signed,
                Var::Value(Attr::Resource(name), Type::Money) => !program.resource_attributes[name].signed,
                Var::Value(Attr::Principal(name), Type::Money) => !program.principal_attributes[name].signed,
                _ => false,
            })
            .map(|(id, _)| lit(id, Test::Compare(CompareOp::Ge, Value::Number(Decimal(0)))));
        let everything = every_argument.iter().cloned().chain(named_currency).chain(non_negative).collect();
        Readable { every_argument, everything }
    }

    /// The first answer to `goals` with everything preferred, then with every argument, then with nothing more.
    fn solve<'f>(&'f self, solver: &mut Solver<'f>, goals: &[&'f F]) -> Answer {
        for preferred in [&self.everything, &self.every_argument] {
            if preferred.is_empty() {
                continue;
            }
            let with: Vec<&F> = goals.iter().copied().chain(preferred.iter()).collect();
            if let Answer::Sat(model) = solver.solve(&with) {
                return Answer::Sat(model);
            }
        }
        solver.solve(goals)
    }
}

/// The literals each currency variable is compared with.
/// What a proof asks of one tool: for each conjunct of the refusing side `b` that the allowing side `a` does not
/// have as is (nor whose origin was reported already), its negation — satisfiable together with `a` exactly when
/// `a` allows a call `b` refuses for that reason.
fn questions(a: &[Conjunct], b: &[Conjunct], reported: &BTreeSet<Origin>) -> Vec<(Origin, F)> {
    b.iter()
        .filter(|c| !reported.contains(&c.origin) && !a.iter().any(|x| x.formula == c.formula))
        .map(|c| (c.origin, negate(&c.formula)))
        .collect()
}

fn currencies(goals: &[&F], vars: &Vars) -> Currencies {
    let mut out = Currencies::new();
    for goal in goals {
        literals(goal, &mut |var, test| {
            if let (Var::Currency(_), crate::ir::Test::Compare(_, crate::ir::Value::String(code))) =
                (vars.get(var), test)
            {
                out.entry(var).or_default().insert(code.clone());
            }
        });
    }
    out
}

/// The child's clause that lets the witness through: a weaker restatement of the exceeded clause when there is
/// one, else the dimension's own clause, else the grant that allows the witness.
fn culprit(program: &Program, child: MandateId, tool: ToolId, exceeded: Origin, vars: &Vars, model: &Model) -> Culprit {
    culprit_of(program, &program.mandates[child], tool, exceeded, vars, model)
}

/// [`culprit`] of a mandate that need not be in the program (a template's symbolic instance).
fn culprit_of(
    program: &Program,
    mandate: &crate::ir::Mandate,
    tool: ToolId,
    exceeded: Origin,
    vars: &Vars,
    model: &Model,
) -> Culprit {
    let level = program.tools[tool].level;
    let covering = |i: &usize| mandate.rules[*i].tools.binary_search(&tool).is_ok();
    let granting = (0..mandate.rules.len()).filter(covering).find(|&i| {
        mandate.rules[i].kind == RuleKind::Allow && truth_in(&mandate.rules[i].condition, level, vars, model)
    });
    let grant = || granting.map_or(Culprit::Mandate, Culprit::Rule);
    match exceeded {
        Origin::ValidFrom(_) | Origin::ValidUntil(_) => {
            if mandate.valid_from.is_some() || mandate.valid_until.is_some() {
                Culprit::Valid
            } else {
                Culprit::Mandate
            }
        }
        Origin::MaxLevel(_) if mandate.max_level.is_some() => Culprit::MaxLevel,
        Origin::Rule(m, index) => {
            let theirs = &program.mandates[m].rules[index].kind;
            let same = (0..mandate.rules.len()).filter(covering).find(|&i| match (&mandate.rules[i].kind, theirs) {
                (RuleKind::Gate { approval: a, .. }, RuleKind::Gate { approval: b, .. }) => a == b,
                (RuleKind::Fact { name: a, .. }, RuleKind::Fact { name: b, .. }) => a == b,
                (RuleKind::Budget { name: a, .. }, RuleKind::Budget { name: b, .. }) => a == b,
                (mine, theirs) => mine == theirs && !matches!(mine, RuleKind::Allow),
            });
            same.map_or_else(grant, Culprit::Rule)
        }
        _ => grant(),
    }
}

/// For an exceeded grant: the attributes of the ancestor's grant conditions that are false (or missing) in the
/// witness, in the order they are written.
fn refusing_attributes(program: &Program, exceeded: Origin, tool: ToolId, vars: &Vars, model: &Model) -> Vec<String> {
    let Origin::Grants(m) = exceeded else { return Vec::new() };
    let level = program.tools[tool].level;
    let mut out: Vec<String> = Vec::new();
    for rule in &program.mandates[m].rules {
        if rule.kind != RuleKind::Allow || rule.tools.binary_search(&tool).is_err() {
            continue;
        }
        let mut atoms = Vec::new();
        let specialized = crate::check::sat::for_level(&rule.condition, level);
        collect_atoms(&specialized, &mut atoms);
        for atom in atoms {
            let name = atom.attr.display();
            if !atom_true(atom, vars, model) && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

fn collect_atoms<'c>(cond: &'c crate::ir::Cond, out: &mut Vec<&'c crate::ir::Atom>) {
    match cond {
        crate::ir::Cond::Atom(a) => out.push(a),
        crate::ir::Cond::And(items) | crate::ir::Cond::Or(items) => items.iter().for_each(|c| collect_atoms(c, out)),
        _ => {}
    }
}
