//! Parametric narrowing: every instance of a template whose parameters satisfy the bounds narrows the template's
//! parent (docs/narrowing.md, "Templates").
//!
//! The template is read as a *symbolic instance*: a mandate whose rules read its parameters as attributes
//! ([`Attr::Param`], one variable each, constant per instance). The hypothesis conjoins what every instance has:
//! each parameter present, of its type (money not below zero unless `signed`), within its bounds; `principal`
//! admitted by `for`, `holder` by `holder`, the request's subject equal to `holder`; the window, whose bounds may
//! be parameters (`now < until`). The questions are the sub-mandate check's, one per clause of the parent's chain,
//! and the same theories decide the atoms parameters make (order between terms, money in one currency, equality,
//! membership congruence, and `x in P ∧ P within L ⇒ x in L`). A model names the parameters' values and a request;
//! it is confirmed on the concrete instance it describes ([`instance`]: the template with those values folded in,
//! as an ordinary sub-mandate) by the reference interpreter, as every witness is. A model the interpreter does not
//! confirm, or a search that runs out of steps, leaves the template unproved (a warning), never proved.
//!
//! A template under a template (sub-delegation from an instance) is compared with its parent's chain read the same
//! way: each template above it is a symbolic instance of its own ([`symbolic_chain`]), whose parameters are
//! variables of their own (`parent.cap` for the parent's, `parent.parent.cap` for the grandparent's:
//! [`Attr::ParentParam`]), `principal` shared, and whose bounds, `for` and `holder` join the hypothesis (the parent
//! instance is valid); their windows, which may be parameters, are clauses of the parent's side. A model names every
//! instance's values and is confirmed on the concrete chain of instances ([`instance`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value as Json};

use super::authority::{conjuncts, pattern, Conjunct, Encoder, Origin, Side};
use super::formula::{is, lit, or, Var, Vars, F};
use super::solve::{Answer, Lemmas, Solver};
use super::witness::{self, Scratch, Shape};
use super::{culprit_of, currencies, questions, refusing_attributes, Readable, Widening};
use crate::diag::Diagnostic;
use crate::ir::{
    Atom, Attr, Cond, Mandate, MandateId, Parent, Program, Template, TemplateId, Term, Test, TimeBound, Type, Value,
    IMPLICIT_PARAMS,
};
use crate::syntax::ast::CompareOp;
use crate::value::{Decimal, NANOS_PER_SECOND};

/// Why a template is not proved to narrow its parent.
#[derive(Debug, Clone)]
pub struct TemplateFinding {
    pub template: TemplateId,
    pub kind: TemplateKind,
}

#[derive(Debug, Clone)]
pub enum TemplateKind {
    /// A confirmed counterexample: an instance (its parameters' values) and a request it allows that the parent's
    /// chain refuses.
    Widens { widening: Widening, params: Map<String, Json> },
    /// The template may delegate as deep as its parent.
    Depth,
    /// The search ran out of steps for this tool.
    Undecided { tool: String },
    /// A model the interpreter did not confirm on the instance it describes: a law the theories do not decide.
    Unconfirmed { tool: String, params: Map<String, Json>, request: Json },
}

/// Every finding, template by template (a template without one is proved).
pub fn analyse(program: &Program) -> Vec<TemplateFinding> {
    let mut out = Vec::new();
    for (id, t) in program.templates.iter().enumerate() {
        let limit = parent_depth(program, t).0.filter(|&d| d > 0);
        if limit.is_some_and(|limit| t.delegation_depth.is_none_or(|own| own >= limit)) {
            out.push(TemplateFinding { template: id, kind: TemplateKind::Depth });
        }
        compare(program, id, &mut out);
    }
    out
}

/// The parent's `delegation depth` and where it is written.
fn parent_depth(program: &Program, t: &Template) -> (Option<u32>, crate::source::Span) {
    match t.parent {
        Parent::Mandate(id) => (program.mandates[id].delegation_depth, program.mandates[id].depth_span),
        Parent::Template(id) => (program.templates[id].delegation_depth, program.templates[id].depth_span),
    }
}

/// The diagnostics of the templates: `remit::template-widens` (an error, with its witness) and
/// `remit::template-narrowing-unproved` (a warning: not decided, never read as proved).
pub fn check(program: &Program) -> Vec<Diagnostic> {
    check_findings(program, &analyse(program))
}

/// [`check`] of findings already made.
pub fn check_findings(program: &Program, findings: &[TemplateFinding]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut unproved: BTreeSet<TemplateId> = BTreeSet::new();
    for f in findings {
        let t = &program.templates[f.template];
        let parent = match t.parent {
            Parent::Mandate(id) => program.mandates[id].name.as_str(),
            Parent::Template(id) => program.templates[id].name.as_str(),
        };
        match &f.kind {
            TemplateKind::Widens { widening, params } => {
                let (symbolic, id, p) = symbolic_chain(program, f.template);
                let d = super::err::finding(
                    &symbolic,
                    &super::Finding { child: id, parent: p, kind: super::Kind::Widens(widening.clone()) },
                );
                out.push(crate::check::err::template_widens(d, &t.name, parent, &instance_text(params)));
            }
            TemplateKind::Depth => {
                let (depth, depth_span) = parent_depth(program, t);
                out.push(crate::check::err::template_depth(&t.name, parent, depth, t.span, depth_span));
            }
            TemplateKind::Undecided { tool } | TemplateKind::Unconfirmed { tool, .. } => {
                if unproved.insert(f.template) {
                    let why = if matches!(f.kind, TemplateKind::Undecided { .. }) {
                        format!("the search for `{tool}` ran out of steps")
                    } else {
                        format!("a law the proof does not decide (for `{tool}`)")
                    };
                    out.push(crate::check::err::template_narrowing_unproved(&t.name, parent, &why, t.span));
                }
            }
        }
    }
    out
}

/// Whether each template is proved to narrow its parent (no finding), by template id.
pub fn proved(program: &Program, findings: &[TemplateFinding]) -> Vec<bool> {
    (0..program.templates.len()).map(|id| !findings.iter().any(|f| f.template == id)).collect()
}

/// `cap = "600.00 USD", principal = "user:a"`: an instance's parameters as a message shows them.
fn instance_text(params: &Map<String, Json>) -> String {
    params.iter().map(|(name, value)| format!("`{name}` = `{value}`")).collect::<Vec<_>>().join(", ")
}

/// Every parameter of a template with its type: the declared ones, then `principal`, `holder` and `granted`.
pub fn parameters(t: &Template) -> BTreeMap<String, Type> {
    let mut out: BTreeMap<String, Type> = t.params.iter().map(|p| (p.name.clone(), p.ty.clone())).collect();
    for (name, ty) in IMPLICIT_PARAMS {
        out.insert(name.to_string(), ty);
    }
    out
}

/// The principal of the symbolic instances of a chain of templates (defined beside [`witness::request_with`], which
/// reads it back).
pub use super::witness::INSTANCE_PRINCIPAL;

/// The templates above a template, nearest first (its parent, its parent's parent, …), and the mandate the
/// topmost one hangs under.
pub fn ancestors(program: &Program, template: TemplateId) -> (Vec<TemplateId>, MandateId) {
    let mut out = Vec::new();
    let mut current = program.templates[template].parent;
    loop {
        match current {
            Parent::Mandate(m) => return (out, m),
            Parent::Template(id) => {
                // Cycles are refused by the checker; never loop here.
                if out.contains(&id) || id == template {
                    return (out, 0);
                }
                out.push(id);
                current = program.templates[id].parent;
            }
        }
    }
}

/// The attribute that stands for the parameter `name` of the template `level` steps above the one proved (0: its
/// own, `cap`; 1: its parent instance's, `parent.cap`; 2: `parent.parent.cap`, …). Every instance of a chain has
/// the same principal: `principal` is one variable at every level.
pub fn at_level(name: &str, level: usize) -> Attr {
    if level == 0 || name == "principal" {
        Attr::Param(name.to_string())
    } else {
        Attr::ParentParam(format!("{}{name}", "parent.".repeat(level - 1)))
    }
}

/// An attribute of a template `level` steps above the one proved, as the proof reads it: its parameters at its
/// level, its `parent.NAME` one level higher.
fn lift(attr: &Attr, level: usize) -> Attr {
    let boxed = |a: &Attr| Box::new(lift(a, level));
    match attr {
        Attr::Param(name) => at_level(name, level),
        Attr::ParentParam(name) => at_level(name, level + 1),
        Attr::Compare(left, op, right, ty) => Attr::Compare(boxed(left), *op, boxed(right), ty.clone()),
        Attr::Member(item, set, ty) => Attr::Member(boxed(item), boxed(set), ty.clone()),
        Attr::Elapsed(later, earlier, op, seconds) => Attr::Elapsed(boxed(later), boxed(earlier), *op, *seconds),
        Attr::InCalendar(name, instant) => Attr::InCalendar(name.clone(), boxed(instant)),
        Attr::Relation(name, terms) => Attr::Relation(
            name.clone(),
            terms
                .iter()
                .map(|t| match t {
                    Term::Attr(a) => Term::Attr(lift(a, level)),
                    Term::Value(_) => t.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A condition of a template `level` steps above the one proved, read at its level ([`lift`]).
fn lift_cond(cond: &Cond, level: usize) -> Cond {
    if level == 0 {
        return cond.clone();
    }
    match cond {
        Cond::True | Cond::False => cond.clone(),
        Cond::And(items) => Cond::And(items.iter().map(|c| lift_cond(c, level)).collect()),
        Cond::Or(items) => Cond::Or(items.iter().map(|c| lift_cond(c, level)).collect()),
        Cond::Atom(atom) => {
            Cond::Atom(Atom { attr: lift(&atom.attr, level), ty: atom.ty.clone(), test: atom.test.clone() })
        }
    }
}

/// Every parameter of the template proved and of the templates above it, by the key a witness names it with
/// (`cap`, `parent.cap`, …; `principal` once), with its type.
pub fn chain_parameters(program: &Program, template: TemplateId) -> BTreeMap<String, Type> {
    let mut out = parameters(&program.templates[template]);
    for (index, &a) in ancestors(program, template).0.iter().enumerate() {
        for (name, ty) in parameters(&program.templates[a]) {
            out.insert(at_level(&name, index + 1).display(), ty);
        }
    }
    out
}

/// The program with the template added as a mandate of its own name (no parent) and, for a template under a
/// template, each template above it as a symbolic mandate at its level ([`lift`]: its window a limit on every tool
/// when a bound is a parameter), chained under the topmost one's mandate: the template's id and its parent's (the
/// nearest ancestor's) in it. What the proof compares and the reports name.
pub fn symbolic_chain(program: &Program, template: TemplateId) -> (Program, MandateId, MandateId) {
    let (above, top) = ancestors(program, template);
    let mut out = program.clone();
    let mut parent = top;
    for (index, &a) in above.iter().enumerate().rev() {
        let mut m = lifted_mandate(program, &program.templates[a], index + 1);
        m.parent = Some(parent);
        parent = out.mandates.len();
        out.mandate_index.insert(m.name.clone(), parent);
        out.mandates.push(m);
    }
    let id = out.mandates.len();
    out.mandates.push(symbolic_mandate(&program.templates[template]));
    out.mandate_index.insert(program.templates[template].name.clone(), id);
    (out, id, parent)
}

/// A template above the one proved, as a mandate of the parent's side: its rules read at its level, its window's
/// parameters limits on every tool (`now < parent.until`), so that a request past the parent instance's end is
/// refused by it.
fn lifted_mandate(program: &Program, t: &Template, level: usize) -> Mandate {
    let mut m = symbolic_mandate(t);
    m.principal = INSTANCE_PRINCIPAL.to_string();
    for rule in &mut m.rules {
        rule.condition = lift_cond(&rule.condition, level);
    }
    let every_tool: Vec<usize> = (0..program.tools.len()).collect();
    for (bound, op, word) in [(&t.valid_from, CompareOp::Ge, "from"), (&t.valid_until, CompareOp::Lt, "until")] {
        if let Some(TimeBound::Param(name)) = bound {
            let param = at_level(name, level);
            m.rules.push(crate::ir::Rule {
                kind: crate::ir::RuleKind::Limit,
                target: crate::ir::Target::AnyTool,
                tools: every_tool.clone(),
                label: format!("valid {word} {}", param.display()),
                condition: compared(Attr::Now, op, param, Type::Timestamp),
                span: t.valid_span,
            });
        }
    }
    m
}

/// The program with the template added as a mandate of its own name (for the reports, which name its clauses).
pub(super) fn symbolic(program: &Program, t: &Template) -> (Program, MandateId) {
    let mut out = program.clone();
    let id = out.mandates.len();
    out.mandates.push(symbolic_mandate(t));
    out.mandate_index.insert(t.name.clone(), id);
    (out, id)
}

/// The template as a mandate of its own name whose rules read the parameters (no parent, no holder, its window's
/// instants only): what the encoder reads as the symbolic instance.
pub(super) fn symbolic_mandate(t: &Template) -> Mandate {
    let at = |bound: &Option<TimeBound>| match bound {
        Some(TimeBound::At(s)) => Some(*s),
        _ => None,
    };
    Mandate {
        name: t.name.clone(),
        principal: String::new(),
        parent: None,
        holders: Vec::new(),
        holder_prefixes: Vec::new(),
        purpose: t.purpose.clone(),
        valid_from: at(&t.valid_from),
        valid_until: at(&t.valid_until),
        max_level: t.max_level,
        otherwise: t.otherwise,
        delegation_depth: t.delegation_depth,
        rules: t.rules.clone(),
        span: t.span,
        valid_span: t.valid_span,
        max_level_span: t.max_level_span,
        otherwise_span: t.otherwise_span,
        depth_span: t.depth_span,
    }
}

/// A condition that holds: `attr OP other` of two attributes.
fn compared(left: Attr, op: CompareOp, right: Attr, ty: Type) -> Cond {
    let attr = Attr::Compare(Box::new(left), op, Box::new(right), ty);
    Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(true)) })
}

/// What every instance of the template has, for a call to `tool`: see the module's documentation.
pub(super) fn hypothesis(program: &Program, t: &Template, tool: usize, vars: &mut Vars) -> Vec<F> {
    let mut enc = Encoder::for_tool(program, tool, vars);
    let mut out = Vec::new();
    for (name, ty) in parameters(t) {
        let attr = Attr::Param(name.clone());
        out.push(is(enc.vars.id(Var::Present(attr.clone())), true));
        let signed = t.param(&name).is_some_and(|p| p.signed);
        if ty == Type::Money && !signed {
            let value = enc.vars.id(Var::Value(attr, Type::Money));
            out.push(lit(value, Test::Compare(CompareOp::Ge, Value::Number(Decimal(0)))));
        }
    }
    for p in &t.params {
        out.push(enc.truth(&p.bound));
    }
    let identity = |enc: &mut Encoder<'_>, name: &str, ids: &[String], prefixes: &[String]| -> F {
        let var = enc.vars.id(Var::Value(Attr::Param(name.into()), Type::String));
        let listed: Vec<Value> = ids.iter().map(|id| Value::String(id.clone())).collect();
        let exact = (!listed.is_empty()).then(|| lit(var, Test::In(listed)));
        or(exact.into_iter().chain(prefixes.iter().map(|p| pattern(var, p))))
    };
    if !t.principals.is_empty() || !t.principal_prefixes.is_empty() {
        out.push(identity(&mut enc, "principal", &t.principals, &t.principal_prefixes));
    }
    out.push(identity(&mut enc, "holder", &t.holders, &t.holder_prefixes));
    out.push(enc.truth(&compared(Attr::SubjectId, CompareOp::Eq, Attr::Param("holder".into()), Type::String)));
    if let Some(TimeBound::Param(from)) = &t.valid_from {
        out.push(enc.truth(&compared(Attr::Now, CompareOp::Ge, Attr::Param(from.clone()), Type::Timestamp)));
    }
    if let Some(TimeBound::Param(until)) = &t.valid_until {
        out.push(enc.truth(&compared(Attr::Now, CompareOp::Lt, Attr::Param(until.clone()), Type::Timestamp)));
    }
    out
}

/// What every valid instance of each template above the one proved has (a child instance's parent is valid,
/// recursively): its parameters present and of their types, its bounds, its principal (the child's) within its
/// `for` and its holder within its `holder`, each at its level ([`at_level`]). Its window is not assumed: it is a
/// clause of the parent's side (a request after the parent instance's end is refused by it).
pub(super) fn ancestors_hypothesis(program: &Program, template: TemplateId, tool: usize, vars: &mut Vars) -> Vec<F> {
    let mut enc = Encoder::for_tool(program, tool, vars);
    let mut out = Vec::new();
    for (index, &a) in ancestors(program, template).0.iter().enumerate() {
        let (t, level) = (&program.templates[a], index + 1);
        for (name, ty) in parameters(t) {
            let attr = at_level(&name, level);
            out.push(is(enc.vars.id(Var::Present(attr.clone())), true));
            let signed = t.param(&name).is_some_and(|p| p.signed);
            if ty == Type::Money && !signed {
                let value = enc.vars.id(Var::Value(attr, Type::Money));
                out.push(lit(value, Test::Compare(CompareOp::Ge, Value::Number(Decimal(0)))));
            }
        }
        for p in &t.params {
            out.push(enc.truth(&lift_cond(&p.bound, level)));
        }
        let mut identity = |name: &str, ids: &[String], prefixes: &[String]| -> F {
            let var = enc.vars.id(Var::Value(at_level(name, level), Type::String));
            let listed: Vec<Value> = ids.iter().map(|id| Value::String(id.clone())).collect();
            let exact = (!listed.is_empty()).then(|| lit(var, Test::In(listed)));
            or(exact.into_iter().chain(prefixes.iter().map(|p| pattern(var, p))))
        };
        if !t.principals.is_empty() || !t.principal_prefixes.is_empty() {
            out.push(identity("principal", &t.principals, &t.principal_prefixes));
        }
        out.push(identity("holder", &t.holders, &t.holder_prefixes));
    }
    out
}

fn compare(original: &Program, template: TemplateId, out: &mut Vec<TemplateFinding>) {
    let t = &original.templates[template];
    let mut leaf = symbolic_mandate(t);
    // Under a template, a gate `approved by principal` reads the chain's one principal on both sides.
    let under_template = matches!(t.parent, Parent::Template(_));
    if under_template {
        leaf.principal = INSTANCE_PRINCIPAL.to_string();
    }
    // Under a mandate, the program itself; under a template, the program with the templates above as symbolic
    // mandates at their levels.
    let (program, parent) = match t.parent {
        Parent::Mandate(parent) => (std::borrow::Cow::Borrowed(original), parent),
        Parent::Template(_) => {
            let (symbolic, _, parent) = symbolic_chain(original, template);
            (std::borrow::Cow::Owned(symbolic), parent)
        }
    };
    let program: &Program = &program;
    let chain = program.chain(parent);
    let mut names = vec![t.name.clone()];
    names.extend(chain.iter().map(|&m| program.mandates[m].name.clone()));
    let own = Side {
        program,
        chain: Vec::new(),
        holders: None,
        approval_names: vec![t.name.clone()],
        instance_principal: (!under_template).then_some((&t.principals[..], &t.principal_prefixes[..])),
        leaf: Some(&leaf),
    };
    let parents = Side { program, chain, holders: None, approval_names: names, instance_principal: None, leaf: None };
    let types = chain_parameters(original, template);
    let mut reported: BTreeSet<Origin> = BTreeSet::new();
    let mut undecided = false;
    let granted: BTreeSet<usize> = leaf
        .rules
        .iter()
        .filter(|r| r.kind == crate::ir::RuleKind::Allow)
        .flat_map(|r| r.tools.iter().copied())
        .collect();
    for tool in granted {
        let name = program.tools[tool].name.as_str();
        let mut vars = Vars::default();
        let mut a = conjuncts(&own, name, &mut vars);
        if a.iter().any(|c| c.formula == F::False) {
            continue;
        }
        let mut assumed = hypothesis(program, t, tool, &mut vars);
        assumed.extend(ancestors_hypothesis(original, template, tool, &mut vars));
        for formula in assumed {
            if formula != F::True {
                a.push(Conjunct { formula, origin: Origin::Holder });
            }
        }
        let questions = questions(&a, &conjuncts(&parents, name, &mut vars), &reported);
        if questions.is_empty() {
            continue;
        }
        let all_goals: Vec<&F> = a.iter().map(|c| &c.formula).chain(questions.iter().map(|(_, f)| f)).collect();
        let readable = Readable::new(program, tool, &vars, &all_goals);
        let decide_all: Vec<F> = vars
            .iter()
            .filter(|(_, var)| matches!(var, Var::Value(Attr::Compare(..) | Attr::Member(..), Type::Bool)))
            .map(|(id, _)| or([is(id, true), is(id, false)]))
            .collect();
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
                        out.push(TemplateFinding { template, kind: TemplateKind::Undecided { tool: name.into() } });
                    }
                }
                Answer::Sat(model) => {
                    reported.insert(*origin);
                    let shape = Shape { program, tool: name, mandate: &t.name };
                    let currencies = currencies(&goals, &vars);
                    let attempt = |model: &super::formula::Model| {
                        let mut last = None;
                        for fill in [true, false] {
                            let (request, params) =
                                witness::request_with(model, &vars, shape, &currencies, fill, &types);
                            let ok = confirm(original, template, &params, &request);
                            last = Some((request, params, ok));
                            if ok {
                                break;
                            }
                        }
                        last.expect("tried")
                    };
                    let (mut request, mut params, mut ok) = attempt(&model);
                    let mut model = model;
                    // A comparison the model leaves open is written as the witness's values fall, which may break
                    // another one: ask again with every comparison and membership decided, so that the theory
                    // orders all of them.
                    if !ok {
                        let mut with = goals.clone();
                        with.extend(decide_all.iter());
                        if let Answer::Sat(again) = readable.solve(&mut solver, &with) {
                            (request, params, ok) = attempt(&again);
                            model = again;
                        }
                    }
                    let kind = if ok {
                        TemplateKind::Widens {
                            widening: Widening {
                                tool: name.to_string(),
                                exceeded: *origin,
                                culprit: culprit_of(program, &leaf, tool, *origin, &vars, &model),
                                attributes: refusing_attributes(program, *origin, tool, &vars, &model),
                                witness: request,
                            },
                            params,
                        }
                    } else {
                        TemplateKind::Unconfirmed { tool: name.to_string(), params, request }
                    };
                    out.push(TemplateFinding { template, kind });
                }
            }
        }
    }
}

/// Whether the interpreter confirms a counterexample on the concrete instance: the instance standing alone allows
/// the request, its parent's chain (for the instance's holder) does not.
pub fn confirm(program: &Program, template: TemplateId, params: &Map<String, Json>, request: &Json) -> bool {
    let Ok((concrete, id)) = instance(program, template, params) else { return false };
    Scratch::from_program(concrete).confirm(id, request).is_some_and(|c| c.confirms())
}

/// The concrete instance of a template with these parameters' values (request encodings, docs/requests.md): the
/// program with a sub-mandate of the template's name under its parent, whose principal, holder, window and rules
/// are the template's with the values folded in. Refused (with why) when a value is not of its type, a bound does
/// not hold, the principal or holder is not admitted, or the template is under a template.
pub fn instance(
    program: &Program,
    template: TemplateId,
    params: &Map<String, Json>,
) -> Result<(Program, MandateId), String> {
    instance_with(program, template, params, true)
}

/// What the concrete instance of a template with these values does next to its parent, bounds or not: for a grant
/// refused, whether the instance would have widened (docs/gateway.md, "Grants").
#[derive(Debug, Clone, PartialEq)]
pub enum Concrete {
    /// A request the instance standing alone allows and its parent's chain refuses (confirmed).
    Widens(Json),
    /// The instance narrows its parent: refused by its bounds only.
    Narrows,
    /// No instance can be built from the values (a type, the principal, the holder, a fold), or the proof did not
    /// decide.
    Unknown,
}

/// The narrowing proof on the concrete instance (the values folded in without checking the bounds) as a sub-mandate
/// of the template's parent.
pub fn concrete(program: &Program, template: TemplateId, params: &Map<String, Json>) -> Concrete {
    let Ok((program, child)) = instance_with(program, template, params, false) else { return Concrete::Unknown };
    let Some(parent) = program.mandates[child].parent else { return Concrete::Unknown };
    let mut findings = Vec::new();
    super::compare(&program, child, parent, &mut None, &mut findings);
    let mut unknown = false;
    for f in findings {
        match f.kind {
            super::Kind::Widens(w) => return Concrete::Widens(w.witness),
            super::Kind::Depth => {}
            super::Kind::Undecided { .. } | super::Kind::Unconfirmed { .. } => unknown = true,
        }
    }
    if unknown {
        Concrete::Unknown
    } else {
        Concrete::Narrows
    }
}

fn instance_with(
    program: &Program,
    template: TemplateId,
    params: &Map<String, Json>,
    bounds: bool,
) -> Result<(Program, MandateId), String> {
    build(program, template, params, bounds).map(|(program, id, _)| (program, id))
}

/// [`instance_with`], and the values the instance's conditions read, by key (`cap`, `parent.cap`, …). A template
/// under a template is built on the concrete instance of its parent, whose values are the ones named `parent.NAME`
/// (and the same principal), built the same way (its bounds checked too when `bounds` is set).
fn build(
    program: &Program,
    template: TemplateId,
    params: &Map<String, Json>,
    bounds: bool,
) -> Result<(Program, MandateId, BTreeMap<String, Value>), String> {
    let t = &program.templates[template];
    let mut values: BTreeMap<String, Value> = BTreeMap::new();
    let (mut out, parent) = match t.parent {
        Parent::Mandate(parent) => (program.clone(), parent),
        Parent::Template(above) => {
            let mut theirs: Map<String, Json> = params
                .iter()
                .filter_map(|(key, value)| Some((key.strip_prefix("parent.")?.to_string(), value.clone())))
                .collect();
            if let Some(principal) = params.get("principal") {
                theirs.insert("principal".into(), principal.clone());
            }
            let (out, parent, parent_values) =
                build(program, above, &theirs, bounds).map_err(|why| format!("the parent instance: {why}"))?;
            for (key, value) in parent_values {
                if key != "principal" {
                    values.insert(format!("parent.{key}"), value);
                }
            }
            (out, parent)
        }
    };
    for (name, ty) in parameters(t) {
        let json = params.get(&name).ok_or_else(|| format!("`{name}` is missing"))?;
        let value =
            crate::eval::cond::decode(json, &ty, program).map_err(|_| format!("`{name}` is not a {}", ty.display()))?;
        let signed = t.param(&name).is_some_and(|p| p.signed);
        if !signed && matches!(&value, Value::Money(m) if m.amount.0 < 0) {
            return Err(format!("`{name}` is below zero"));
        }
        values.insert(name, value);
    }
    for p in t.params.iter().filter(|_| bounds) {
        if fold(&p.bound, &values)? != Cond::True {
            return Err(format!("`{}` is outside its bound", p.name));
        }
    }
    let text = |name: &str| match &values[name] {
        Value::String(s) => s.clone(),
        _ => String::new(),
    };
    let (principal, holder) = (text("principal"), text("holder"));
    if (!t.principals.is_empty() || !t.principal_prefixes.is_empty())
        && !crate::eval::holds(&t.principals, &t.principal_prefixes, &principal)
    {
        return Err("the principal is not admitted by `for`".into());
    }
    if !crate::eval::holds(&t.holders, &t.holder_prefixes, &holder) {
        return Err("the holder is not admitted by `holder`".into());
    }
    let mut rules = Vec::with_capacity(t.rules.len());
    for rule in &t.rules {
        let mut rule = rule.clone();
        rule.condition = fold(&rule.condition, &values)?;
        rules.push(rule);
    }
    // A window's bound in whole seconds, as a mandate's; an instant with a fraction (an instance may have one) is a
    // limit on every tool instead (`now < until`), which allows exactly the same requests.
    let mut seconds = |bound: &Option<TimeBound>, op: CompareOp| -> Result<Option<i64>, String> {
        match bound {
            None => Ok(None),
            Some(TimeBound::At(s)) => Ok(Some(*s)),
            Some(TimeBound::Param(p)) => match values.get(p) {
                Some(Value::Timestamp(nanos)) if nanos.rem_euclid(NANOS_PER_SECOND) == 0 => {
                    i64::try_from(nanos / NANOS_PER_SECOND).map(Some).map_err(|_| "out of range".into())
                }
                Some(Value::Timestamp(nanos)) => {
                    let test = Test::Compare(op, Value::Timestamp(*nanos));
                    rules.push(crate::ir::Rule {
                        kind: crate::ir::RuleKind::Limit,
                        target: crate::ir::Target::AnyTool,
                        tools: (0..out.tools.len()).collect(),
                        condition: Cond::Atom(Atom { attr: Attr::Now, ty: Type::Timestamp, test }),
                        label: format!("valid {} {p}", if op == CompareOp::Ge { "from" } else { "until" }),
                        span: t.valid_span,
                    });
                    Ok(None)
                }
                _ => Err(format!("`{p}` is not a timestamp")),
            },
        }
    };
    let valid_from = seconds(&t.valid_from, CompareOp::Ge)?;
    let valid_until = seconds(&t.valid_until, CompareOp::Lt)?;
    let id = out.mandates.len();
    out.mandates.push(Mandate {
        name: t.name.clone(),
        principal,
        parent: Some(parent),
        holders: vec![holder],
        holder_prefixes: Vec::new(),
        purpose: t.purpose.clone(),
        valid_from,
        valid_until,
        max_level: t.max_level,
        otherwise: t.otherwise,
        delegation_depth: t.delegation_depth,
        rules,
        span: t.span,
        valid_span: t.valid_span,
        max_level_span: t.max_level_span,
        otherwise_span: t.otherwise_span,
        depth_span: t.depth_span,
    });
    out.mandate_index.insert(t.name.clone(), id);
    Ok((out, id, values))
}

/// A condition with the parameters' values (by key: `cap`, `parent.cap`) folded in: an atom of parameters only becomes true or false, a
/// comparison or membership with one parameter a literal test on the other side, a relation's parameter a
/// constant. An atom the fold cannot express (a calendar or a duration of a parameter and an attribute), or one
/// that is an error on the values (money in two currencies), refuses the instance.
pub fn fold(cond: &Cond, values: &BTreeMap<String, Value>) -> Result<Cond, String> {
    Ok(match cond {
        Cond::True | Cond::False => cond.clone(),
        Cond::And(items) => {
            let mut out = Vec::new();
            for item in items {
                match fold(item, values)? {
                    Cond::True => {}
                    Cond::False => return Ok(Cond::False),
                    other => out.push(other),
                }
            }
            if out.is_empty() {
                Cond::True
            } else {
                Cond::And(out)
            }
        }
        Cond::Or(items) => {
            let mut out = Vec::new();
            for item in items {
                match fold(item, values)? {
                    Cond::False => {}
                    Cond::True => return Ok(Cond::True),
                    other => out.push(other),
                }
            }
            if out.is_empty() {
                Cond::False
            } else {
                Cond::Or(out)
            }
        }
        Cond::Atom(atom) => fold_atom(atom, values)?,
    })
}

fn fold_atom(atom: &Atom, values: &BTreeMap<String, Value>) -> Result<Cond, String> {
    let param = |attr: &Attr| -> Result<Option<Value>, String> {
        match attr {
            Attr::Param(name) => values.get(name).cloned().map(Some).ok_or_else(|| format!("`{name}` has no value")),
            Attr::ParentParam(_) => {
                let key = attr.display();
                values.get(&key).cloned().map(Some).ok_or_else(|| format!("`{key}` has no value"))
            }
            _ => Ok(None),
        }
    };
    let constant = |b: Option<bool>| match b {
        Some(true) => Ok(Cond::True),
        Some(false) => Ok(Cond::False),
        None => Err(format!("`{}` is an error for these values", atom.attr.display())),
    };
    // Whether the atom asks for its bool attribute to hold (`a <= b`) or to fail (`not a <= b`).
    let positive = || crate::eval::cond::constant_test(&Value::Bool(true), &atom.test).unwrap_or(false);
    let truth = |b: bool| constant(crate::eval::cond::constant_test(&Value::Bool(b), &atom.test));
    let test_on = |attr: &Attr, ty: Type, test: Test| Cond::Atom(Atom { attr: attr.clone(), ty, test });
    match &atom.attr {
        Attr::Param(_) | Attr::ParentParam(_) => {
            let value = param(&atom.attr)?.expect("a parameter");
            constant(crate::eval::cond::constant_test(&value, &atom.test))
        }
        Attr::Compare(left, op, right, ty) => match (param(left)?, param(right)?) {
            (Some(l), Some(r)) => match crate::eval::cond::constant_compare(*op, &l, &r) {
                Some(b) => truth(b),
                None => constant(None),
            },
            (None, Some(r)) => {
                let op = if positive() { *op } else { op.negated() };
                Ok(test_on(left, ty.clone(), Test::Compare(op, r)))
            }
            (Some(l), None) => {
                let op = if positive() { op.swapped() } else { op.swapped().negated() };
                Ok(test_on(right, ty.clone(), Test::Compare(op, l)))
            }
            (None, None) => Ok(Cond::Atom(atom.clone())),
        },
        Attr::Member(item, set, ty) => match (param(item)?, param(set)?) {
            (Some(x), Some(Value::Set(items))) => {
                let found = crate::eval::cond::constant_test(&x, &Test::In(items));
                match found {
                    Some(b) => truth(b),
                    None => constant(None),
                }
            }
            (None, Some(Value::Set(items))) => {
                let test = if positive() { Test::In(items) } else { Test::NotIn(items) };
                Ok(test_on(item, ty.clone(), test))
            }
            (Some(x), None) => {
                let test = if positive() { Test::Contains(x) } else { Test::NotContains(x) };
                Ok(test_on(set, Type::Set(Box::new(ty.clone())), test))
            }
            (None, None) => Ok(Cond::Atom(atom.clone())),
            _ => constant(None),
        },
        Attr::Relation(name, terms) => {
            let mut folded = Vec::with_capacity(terms.len());
            for term in terms {
                folded.push(match term {
                    Term::Attr(attr) => match param(attr)? {
                        Some(Value::String(s)) => Term::Value(s),
                        Some(_) => return constant(None),
                        None => term.clone(),
                    },
                    Term::Value(_) => term.clone(),
                });
            }
            Ok(Cond::Atom(Atom {
                attr: Attr::Relation(name.clone(), folded),
                ty: atom.ty.clone(),
                test: atom.test.clone(),
            }))
        }
        Attr::Elapsed(later, earlier, op, seconds) => match (param(later)?, param(earlier)?) {
            (Some(Value::Timestamp(l)), Some(Value::Timestamp(e))) => {
                let Some(between) = crate::time::nanos_between(e, l) else { return constant(None) };
                let order = crate::time::compare_nanos_to_seconds(between, *seconds);
                let holds = match op {
                    CompareOp::Eq => order.is_eq(),
                    CompareOp::Ne => order.is_ne(),
                    CompareOp::Lt => order.is_lt(),
                    CompareOp::Le => order.is_le(),
                    CompareOp::Gt => order.is_gt(),
                    CompareOp::Ge => order.is_ge(),
                };
                truth(holds)
            }
            (None, None) => Ok(Cond::Atom(atom.clone())),
            _ => Err(format!("`{}` mixes a parameter and an attribute", atom.attr.display())),
        },
        Attr::InCalendar(_, instant) => match param(instant)? {
            None => Ok(Cond::Atom(atom.clone())),
            Some(_) => Err(format!("`{}` asks a calendar about a parameter", atom.attr.display())),
        },
        _ => Ok(Cond::Atom(atom.clone())),
    }
}

#[cfg(test)]
mod tests {
    use crate::check::check;

    const CEILING: &str = r#"
mandate ceiling for "org:acme" {
  holder under "agent:"
  valid from 2026-01-01T00:00:00Z until 2030-01-01T00:00:00Z
  allow make_payment where args.amount <= 500 USD and args.merchant in ["acme", "globex", "initech"]
}
"#;

    fn codes(text: &str) -> Vec<&'static str> {
        let mut sources = crate::stdlib::sources();
        sources.add("policy.remit", format!("{CEILING}{text}"));
        check(sources).diagnostics.iter().map(|d| d.code).collect()
    }

    #[test]
    fn a_cap_within_the_parents_and_a_set_within_its_list_narrow() {
        let codes = codes(
            r#"
template shopping(
  merchants: set<string> where merchants within ["acme", "globex"],
  cap: money where cap > 0 USD and cap <= 500 USD,
  until: timestamp where until <= 2030-01-01T00:00:00Z,
) under ceiling {
  for under "user:"
  holder under "agent:"
  valid from 2026-01-01T00:00:00Z until until
  allow make_payment where args.merchant in merchants and args.amount <= cap
}
"#,
        );
        assert_eq!(codes, Vec::<&str>::new());
    }

    #[test]
    fn a_cap_above_the_parents_widens() {
        let codes = codes(
            r#"
template shopping(merchants: set<string> where merchants within ["acme"], cap: money where cap <= 600 USD)
under ceiling {
  holder under "agent:"
  valid from 2026-01-01T00:00:00Z until 2029-01-01T00:00:00Z
  allow make_payment where args.merchant in merchants and args.amount <= cap
}
"#,
        );
        assert_eq!(codes, ["remit::template-widens"]);
    }
}
