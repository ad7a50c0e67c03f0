//! `remit diff` of templates: for each template name, what changed between two versions of a policy set — the
//! clauses that are data (parameters, parent, `for`, `holder`, `granted by`, window, …) compared as written, and
//! two questions the proof answers, each with a confirmed example:
//! - **instances**: is every instance the new version admits (types, bounds, `for`, `holder`) admitted by the old
//!   one, and vice versa? An example is an instance's parameter values, confirmed by `parametric::instance` in
//!   both versions (admitted by one, refused by the other, with why);
//! - **rules**: for an instance both versions admit, does the new template allow a request the old one refuses,
//!   and vice versa? The symbolic instances of both (the parameters shared as variables, both hypotheses) are
//!   compared as `diff` compares mandates, each example confirmed by the interpreter on both concrete instances
//!   standing alone.
//!
//! The questions are asked only when both versions declare the same parameters with the same types and the same
//! parent, and, for a template under a template, when the templates above declare the same parameters in both
//! versions (their values are shared variables, `parent.cap`, and both versions' bounds of them are assumed: an
//! example names the values of the whole chain of instances); otherwise the template is `undecided` and the
//! changes say why.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value as Json};

use super::authority::{conjuncts, Conjunct, Origin, Side};
use super::diff::Status;
use super::formula::{negate, Vars, F};
use super::parametric::{
    ancestors_hypothesis, chain_parameters, hypothesis, instance, parameters, symbolic, symbolic_mandate,
    INSTANCE_PRINCIPAL,
};
use super::solve::{Answer, Lemmas, Solver};
use super::witness::{self, Shape};
use super::{currencies, questions, Readable};
use crate::eval::{decide, Outcome};
use crate::ir::{Approvers, Parent, Program, RuleKind, Template, TemplateId, TimeBound};
use crate::value::format_timestamp;

/// An instance one version admits and the other refuses.
#[derive(Debug, Clone)]
pub struct InstanceExample {
    pub params: Map<String, Json>,
    /// Why the refusing version refuses it (`parametric::instance`'s reason).
    pub refused_by: String,
}

/// A request the instance with these values allows in one version and refuses in the other.
#[derive(Debug, Clone)]
pub struct RuleExample {
    pub tool: String,
    pub params: Map<String, Json>,
    pub request: Json,
    /// The clause of the refusing version that refuses it.
    pub refused_by: String,
}

#[derive(Debug, Clone)]
pub struct TemplateDiff {
    pub name: String,
    pub status: Status,
    /// The clauses that changed, as written (`parameter `k` added: int`, `parent: `a` → `b``).
    pub changes: Vec<String>,
    /// Instances the new version admits and the old one refuses, and the converse.
    pub instances_widened: Vec<InstanceExample>,
    pub instances_narrowed: Vec<InstanceExample>,
    /// Requests an instance of both allows in the new version and not in the old, and the converse.
    pub widened: Vec<RuleExample>,
    pub narrowed: Vec<RuleExample>,
}

/// Compares every template of the two versions, by name, sorted by name.
pub fn diff_templates(old: &Program, new: &Program) -> Vec<TemplateDiff> {
    let index = |p: &Program| -> BTreeMap<String, TemplateId> {
        p.templates.iter().enumerate().map(|(id, t)| (t.name.clone(), id)).collect()
    };
    let (olds, news) = (index(old), index(new));
    let names: BTreeSet<&String> = olds.keys().chain(news.keys()).collect();
    names
        .into_iter()
        .map(|name| {
            let empty = |status| TemplateDiff {
                name: name.clone(),
                status,
                changes: Vec::new(),
                instances_widened: Vec::new(),
                instances_narrowed: Vec::new(),
                widened: Vec::new(),
                narrowed: Vec::new(),
            };
            match (olds.get(name), news.get(name)) {
                (Some(&o), Some(&n)) => compare(old, o, new, n),
                (None, _) => empty(Status::Added),
                (_, None) => empty(Status::Removed),
            }
        })
        .collect()
}

fn parent_name(program: &Program, t: &Template) -> String {
    match t.parent {
        Parent::Mandate(m) => program.mandates[m].name.clone(),
        Parent::Template(id) => format!("template {}", program.templates[id].name),
    }
}

fn patterns(ids: &[String], prefixes: &[String]) -> String {
    let items: Vec<String> =
        ids.iter().map(|id| format!("{id:?}")).chain(prefixes.iter().map(|p| format!("under {p:?}"))).collect();
    if items.is_empty() {
        "anyone".into()
    } else {
        items.join(", ")
    }
}

fn approvers(a: &Approvers) -> String {
    let mut items: Vec<String> = Vec::new();
    if a.principal {
        items.push("principal".into());
    }
    items.push(patterns(&a.ids, &a.prefixes));
    items.retain(|i| i != "anyone");
    if items.is_empty() {
        "nobody".into()
    } else {
        items.join(", ")
    }
}

fn bound(b: &Option<TimeBound>) -> String {
    match b {
        None => "-".into(),
        Some(TimeBound::At(at)) => format_timestamp(*at),
        Some(TimeBound::Param(name)) => name.clone(),
    }
}

/// The clauses that differ as written.
fn changes(old: &Program, o: &Template, new: &Program, n: &Template) -> Vec<String> {
    let mut out = Vec::new();
    let mut changed = |what: &str, before: String, after: String| {
        if before != after {
            out.push(format!("{what}: `{before}` → `{after}`"));
        }
    };
    changed("parent", parent_name(old, o), parent_name(new, n));
    changed("for", patterns(&o.principals, &o.principal_prefixes), patterns(&n.principals, &n.principal_prefixes));
    changed("holder", patterns(&o.holders, &o.holder_prefixes), patterns(&n.holders, &n.holder_prefixes));
    changed("granted by", approvers(&o.granted_by), approvers(&n.granted_by));
    changed(
        "valid",
        format!("from {} until {}", bound(&o.valid_from), bound(&o.valid_until)),
        format!("from {} until {}", bound(&n.valid_from), bound(&n.valid_until)),
    );
    changed("otherwise", format!("{:?}", o.otherwise).to_lowercase(), format!("{:?}", n.otherwise).to_lowercase());
    changed("delegation depth", format!("{:?}", o.delegation_depth), format!("{:?}", n.delegation_depth));
    for p in &o.params {
        match n.param(&p.name) {
            None => out.push(format!("parameter `{}` removed", p.name)),
            Some(q) if q.ty != p.ty || q.signed != p.signed => {
                let ty = |s: bool, t: &crate::ir::Type| format!("{}{}", if s { "signed " } else { "" }, t.display());
                out.push(format!(
                    "parameter `{}` retyped: `{}` → `{}`",
                    p.name,
                    ty(p.signed, &p.ty),
                    ty(q.signed, &q.ty)
                ))
            }
            Some(q) if q.bound_text != p.bound_text => {
                let text = |b: &Option<String>| b.clone().unwrap_or_else(|| "true".into());
                out.push(format!("bound of `{}`: `{}` → `{}`", p.name, text(&p.bound_text), text(&q.bound_text)))
            }
            Some(_) => {}
        }
    }
    for q in n.params.iter().filter(|q| o.param(&q.name).is_none()) {
        out.push(format!("parameter `{}` added: `{}`", q.name, q.ty.display()));
    }
    out
}

fn compare(old: &Program, o: TemplateId, new: &Program, n: TemplateId) -> TemplateDiff {
    let (to, tn) = (&old.templates[o], &new.templates[n]);
    let changes = changes(old, to, new, tn);
    let mut out = TemplateDiff {
        name: tn.name.clone(),
        status: Status::Unchanged,
        changes,
        instances_widened: Vec::new(),
        instances_narrowed: Vec::new(),
        widened: Vec::new(),
        narrowed: Vec::new(),
    };
    let same_params = parameters(to) == parameters(tn)
        && to.params.iter().all(|p| tn.param(&p.name).is_some_and(|q| q.signed == p.signed));
    let same_parent = parent_name(old, to) == parent_name(new, tn);
    // Under templates, the chains above declare the same parameters (so that `parent.…` are the same variables).
    let same_chain = match (to.parent, tn.parent) {
        (Parent::Mandate(_), Parent::Mandate(_)) => true,
        (Parent::Template(_), Parent::Template(_)) => {
            chain_parameters(old, o) == chain_parameters(new, n)
                && super::parametric::ancestors(old, o).0.len() == super::parametric::ancestors(new, n).0.len()
        }
        _ => false,
    };
    let comparable = same_params && same_parent && same_chain;
    if !comparable {
        out.status = Status::Undecided;
        out.changes.push(
            "not compared by the proof: the parameters or the parent changed; review this template by hand".into(),
        );
        return out;
    }
    let mut undecided = false;
    out.instances_widened = instances(new, n, old, o, &mut undecided);
    out.instances_narrowed = instances(old, o, new, n, &mut undecided);
    out.widened = rules(new, n, old, o, &mut undecided);
    out.narrowed = rules(old, o, new, n, &mut undecided);
    let wider = !out.instances_widened.is_empty() || !out.widened.is_empty();
    let narrower = !out.instances_narrowed.is_empty() || !out.narrowed.is_empty();
    out.status = match (wider, narrower) {
        (true, true) => Status::Both,
        (true, false) => Status::Widened,
        (false, true) => Status::Narrowed,
        (false, false) if undecided => Status::Undecided,
        (false, false) => Status::Unchanged,
    };
    out
}

/// The hypothesis of a template (what every instance has, and every instance above it) for the first tool, as
/// conjuncts.
fn admitted(program: &Program, t: TemplateId, vars: &mut Vars) -> Vec<F> {
    let mut out = hypothesis(program, &program.templates[t], 0, vars);
    out.extend(ancestors_hypothesis(program, t, 0, vars));
    out.into_iter().filter(|f| *f != F::True).collect()
}

/// An instance `wide`'s template admits and `narrow`'s refuses, if the proof finds one the versions confirm.
fn instances(
    wide: &Program,
    w: TemplateId,
    narrow: &Program,
    n: TemplateId,
    undecided: &mut bool,
) -> Vec<InstanceExample> {
    if wide.tools.is_empty() || narrow.tools.is_empty() {
        return Vec::new();
    }
    let tw = &wide.templates[w];
    let mut vars = Vars::default();
    let a = admitted(wide, w, &mut vars);
    let b = admitted(narrow, n, &mut vars);
    let refused = negate(&super::formula::and(b.clone()));
    let goals: Vec<&F> = a.iter().chain([&refused]).collect();
    let readable = Readable::new(wide, 0, &vars, &goals);
    let lemmas = Lemmas::default();
    let mut solver = Solver::new(&vars, wide.levels.len().max(narrow.levels.len()), &lemmas);
    match readable.solve(&mut solver, &goals) {
        Answer::Unsat => Vec::new(),
        Answer::Unknown => {
            *undecided = true;
            Vec::new()
        }
        Answer::Sat(model) => {
            let shape = Shape { program: wide, tool: &wide.tools[0].name, mandate: &tw.name };
            let types = chain_parameters(wide, w);
            let (_, params) = witness::request_with(&model, &vars, shape, &currencies(&goals, &vars), false, &types);
            match (instance(wide, w, &params), instance(narrow, n, &params)) {
                (Ok(_), Err(refused_by)) => vec![InstanceExample { params, refused_by }],
                _ => {
                    *undecided = true;
                    Vec::new()
                }
            }
        }
    }
}

/// The symbolic instance of a template standing alone (under a template, a gate `approved by principal` reads the
/// chain's one principal, as in the proof).
fn side<'p>(program: &'p Program, leaf: &'p crate::ir::Mandate, t: &'p Template) -> Side<'p> {
    let under_template = matches!(t.parent, Parent::Template(_));
    Side {
        program,
        chain: Vec::new(),
        holders: None,
        approval_names: vec![t.name.clone()],
        instance_principal: (!under_template).then_some((&t.principals[..], &t.principal_prefixes[..])),
        leaf: Some(leaf),
    }
}

/// The symbolic instance of a template as [`side`] reads it.
fn leaf_of(t: &Template) -> crate::ir::Mandate {
    let mut leaf = symbolic_mandate(t);
    if matches!(t.parent, Parent::Template(_)) {
        leaf.principal = INSTANCE_PRINCIPAL.to_string();
    }
    leaf
}

/// The concrete instance standing alone decides `request`: whether it allows it.
fn allows(program: &Program, t: TemplateId, params: &Map<String, Json>, request: &Json) -> Option<bool> {
    let (mut concrete, id) = instance(program, t, params).ok()?;
    concrete.mandates[id].parent = None;
    Some(decide(&concrete, request.to_string().as_bytes()).outcome == Outcome::Allow)
}

/// Requests an instance admitted by both versions allows in `wide` and refuses in `narrow`: one per clause of
/// `narrow` that refuses some.
fn rules(wide: &Program, w: TemplateId, narrow: &Program, n: TemplateId, undecided: &mut bool) -> Vec<RuleExample> {
    let (tw, tn) = (&wide.templates[w], &narrow.templates[n]);
    let (leaf_w, leaf_n) = (leaf_of(tw), leaf_of(tn));
    let (allowing, refusing) = (side(wide, &leaf_w, tw), side(narrow, &leaf_n, tn));
    let (symbolic_narrow, id) = symbolic(narrow, tn);
    let mut found: Vec<RuleExample> = Vec::new();
    let granted: BTreeSet<usize> =
        tw.rules.iter().filter(|r| r.kind == RuleKind::Allow).flat_map(|r| r.tools.iter().copied()).collect();
    let types = chain_parameters(wide, w);
    for tool in granted {
        let name = wide.tools[tool].name.as_str();
        let mut vars = Vars::default();
        let mut a = conjuncts(&allowing, name, &mut vars);
        if a.iter().any(|c| c.formula == F::False) {
            continue;
        }
        let mut assumed = hypothesis(wide, tw, tool, &mut vars);
        assumed.extend(ancestors_hypothesis(wide, w, tool, &mut vars));
        if let Some(t) = narrow.tool(name) {
            assumed.extend(hypothesis(narrow, tn, t, &mut vars));
            assumed.extend(ancestors_hypothesis(narrow, n, t, &mut vars));
        }
        for formula in assumed {
            a.push(Conjunct { formula, origin: Origin::Holder });
        }
        let questions = questions(&a, &conjuncts(&refusing, name, &mut vars), &BTreeSet::new());
        let all: Vec<&F> = a.iter().map(|c| &c.formula).chain(questions.iter().map(|(_, f)| f)).collect();
        let readable = Readable::new(wide, tool, &vars, &all);
        let lemmas = Lemmas::default();
        let mut solver = Solver::new(&vars, wide.levels.len().max(narrow.levels.len()), &lemmas);
        for (origin, refused) in &questions {
            let origin = match *origin {
                Origin::Rule(usize::MAX, i) => Origin::Rule(id, i),
                Origin::Grants(usize::MAX) => Origin::Grants(id),
                Origin::ValidFrom(usize::MAX) => Origin::ValidFrom(id),
                Origin::ValidUntil(usize::MAX) => Origin::ValidUntil(id),
                Origin::MaxLevel(usize::MAX) => Origin::MaxLevel(id),
                other => other,
            };
            let refused_by = super::err::clause(&symbolic_narrow, origin, name);
            if found.iter().any(|e| e.refused_by == refused_by) {
                continue;
            }
            let mut goals: Vec<&F> = a.iter().map(|c| &c.formula).collect();
            goals.push(refused);
            match readable.solve(&mut solver, &goals) {
                Answer::Unsat => {}
                Answer::Unknown => *undecided = true,
                Answer::Sat(model) => {
                    let shape = Shape { program: wide, tool: name, mandate: &tw.name };
                    let currencies = currencies(&goals, &vars);
                    let confirmed = [true, false].into_iter().find_map(|fill| {
                        let (request, params) = witness::request_with(&model, &vars, shape, &currencies, fill, &types);
                        let ok = allows(wide, w, &params, &request) == Some(true)
                            && allows(narrow, n, &params, &request) == Some(false);
                        ok.then_some((request, params))
                    });
                    match confirmed {
                        Some((request, params)) => {
                            found.push(RuleExample { tool: name.to_string(), params, request, refused_by })
                        }
                        None => *undecided = true,
                    }
                }
            }
        }
    }
    found
}
