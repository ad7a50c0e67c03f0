//! Checks over the lowered program: contradictions, dead grants, unsatisfiable gates, ungrantable mandate
//! changes, delegation depth and conflicting fact versions.

use std::collections::{BTreeSet, HashMap};

use super::err;
use super::sat::{for_level, implies, satisfiable};
use crate::diag::Diagnostic;
use crate::ir::{Binding, Cond, Parent, Program, Rule, RuleKind, Target, Type};
use crate::source::{SourceMap, Span};
use crate::syntax::ast::Decl;
use crate::syntax::ast::FactVersion;

/// A class grant that reaches standard-library tools the policy never names: `allow read_only` grants the
/// library's `web_search` and `read_file` too, which an author writing a shopping policy may never have seen.
/// Naming a tool anywhere — a rule on it, or `classify TOOL as CLASS` to acknowledge the membership — silences
/// the warning for that tool. A warning, not an error: decisions do not change.
pub fn unnamed_library_tools(program: &Program, sources: &SourceMap, decls: &[Decl]) -> Vec<Diagnostic> {
    let in_library = |span: Span| sources.file(span.file).name.starts_with("std/");
    let mut named: BTreeSet<usize> = BTreeSet::new();
    for mandate in &program.mandates {
        for rule in &mandate.rules {
            if let Target::Tool(tool) = rule.target {
                named.insert(tool);
            }
        }
    }
    for decl in decls {
        if let Decl::Classify(c) = decl {
            named.extend(c.tools.iter().filter_map(|t| program.tool(&t.text)));
        }
    }
    let mut out = Vec::new();
    for mandate in &program.mandates {
        for rule in mandate.rules.iter().filter(|r| r.kind == RuleKind::Allow) {
            let Target::Effect(class) = rule.target else { continue };
            let mut unnamed: Vec<&str> = rule
                .tools
                .iter()
                .filter(|&&t| in_library(program.tools[t].span) && !named.contains(&t))
                .map(|&t| program.tools[t].name.as_str())
                .collect();
            unnamed.sort();
            if !unnamed.is_empty() {
                out.push(err::unnamed_library_tools(&program.effects[class].name, &unnamed, rule.span));
            }
        }
    }
    out
}

/// `remit::mandate-expiring`: every mandate whose own `valid … until` has passed at `now`, or passes within `horizon`
/// seconds of it, unless an ancestor ends as soon (its warning covers the sub-mandate). `now` is an input (the CLI's
/// `--now`, `SOURCE_DATE_EPOCH` or its clock): the checker reads no clock.
pub fn expiring(program: &Program, now: i64, horizon: u64) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for mandate in &program.mandates {
        let Some(until) = mandate.valid_until else { continue };
        if mandate.valid_from.is_some_and(|from| from >= until) {
            continue; // `remit::empty-validity-window` already says what is wrong
        }
        if mandate.parent.and_then(|parent| program.expires_at(parent)).is_some_and(|end| end <= until) {
            continue; // it ends with (or is cut short by) an ancestor, whose warning covers it
        }
        let left = until.saturating_sub(now);
        if left <= 0 {
            out.push(err::mandate_expired(&mandate.name, until, now, mandate.valid_span));
        } else if left.unsigned_abs() <= horizon {
            out.push(err::mandate_expiring(&mandate.name, until, now, horizon, mandate.valid_span));
        }
    }
    out
}

pub fn lint(program: &Program) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let levels = program.levels.len();
    for (index, mandate) in program.mandates.iter().enumerate() {
        let chain = program.chain(index);
        let forbids: Vec<&Rule> = chain
            .iter()
            .flat_map(|&m| program.mandates[m].rules.iter())
            .filter(|r| r.kind == RuleKind::Forbid)
            .collect();
        for rule in &mandate.rules {
            if !may_hold(rule, levels, &mut out) {
                continue;
            }
            match &rule.kind {
                RuleKind::Allow => {
                    if let Some(d) = ungrantable(program, rule, &chain, &forbids) {
                        out.push(d);
                    } else {
                        dead_grant(program, rule, &forbids, &mut out);
                    }
                }
                RuleKind::Gate { approval, .. } => {
                    let kind = &program.approvals[*approval];
                    if kind.binds.contains(&Binding::Manifest) {
                        for &tool in &rule.tools {
                            if program.tools[tool].param("manifest") != Some(&Type::String) {
                                out.push(err::gate_without_manifest(
                                    &kind.name,
                                    &program.tools[tool].name,
                                    rule.span,
                                    kind.binds_span,
                                ));
                                break;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        // A parent held by patterns is a namespace of agents: a sub-mandate's holders stay inside its holders (an id
        // it holds, or a prefix extending one of its prefixes), so no pattern widens who acts under the chain. A
        // parent held by ids alone hands sub-mandates to other agents (`web_root` → `agent:content`): unbounded.
        if let Some(parent) = mandate.parent.map(|p| &program.mandates[p]) {
            if !parent.holder_prefixes.is_empty() {
                let outside_ids = mandate.holders.iter().filter(|id| !crate::eval::is_holder(parent, id));
                let outside_prefixes = mandate
                    .holder_prefixes
                    .iter()
                    .filter(|p| !parent.holder_prefixes.iter().any(|q| p.starts_with(q.as_str())))
                    .map(|p| format!("under \"{p}\""));
                let outside: Vec<String> = outside_ids.map(|id| format!("\"{id}\"")).chain(outside_prefixes).collect();
                if !outside.is_empty() {
                    out.push(err::holder_outside_parent(
                        &mandate.name,
                        &parent.name,
                        &outside,
                        mandate.span,
                        parent.span,
                    ));
                }
            }
        }
        // Delegation depth: every ancestor bounds how far below it this mandate may sit.
        for (distance, &ancestor) in chain.iter().rev().enumerate().skip(1) {
            let a = &program.mandates[ancestor];
            if let Some(depth) = a.delegation_depth {
                if distance as u32 > depth {
                    out.push(err::delegation_too_deep(&mandate.name, &a.name, depth, mandate.span, a.depth_span));
                }
            }
        }
    }
    out.extend(template_rules(program));
    for (index, kind) in program.approvals.iter().enumerate() {
        if kind.ttl == 0 && kind.ttl_span != kind.span {
            let gates: Vec<Span> = program
                .mandates
                .iter()
                .flat_map(|m| m.rules.iter())
                .filter(|r| matches!(r.kind, RuleKind::Gate { approval, .. } if approval == index))
                .map(|r| r.span)
                .collect();
            out.push(err::zero_ttl(&kind.name, kind.ttl_span, gates));
        }
    }
    // Within one chain a request carries one version of each fact; unrelated mandates may differ.
    for (index, mandate) in program.mandates.iter().enumerate() {
        let mut facts: HashMap<&str, (&FactVersion, Span)> = HashMap::new();
        for &m in program.chain(index).iter().filter(|&&m| m != index) {
            for rule in &program.mandates[m].rules {
                if let RuleKind::Fact { name, version, .. } = &rule.kind {
                    facts.entry(name).or_insert((version, rule.span));
                }
            }
        }
        for rule in &mandate.rules {
            if let RuleKind::Fact { name, version, .. } = &rule.kind {
                match facts.get(name.as_str()) {
                    Some((v, first)) if *v != version => out.push(err::conflicting_fact(name, rule.span, *first)),
                    Some(_) => {}
                    None => {
                        facts.insert(name, (version, rule.span));
                    }
                }
            }
        }
    }
    out
}

fn kind_word(kind: &RuleKind) -> &'static str {
    match kind {
        RuleKind::Allow => "grant",
        RuleKind::Forbid => "prohibition",
        RuleKind::Limit => "limit",
        RuleKind::Scope => "scope",
        RuleKind::Gate { .. } => "gate",
        _ => "rule",
    }
}

/// A grant that reaches tools administering mandates (every one is named), except a tool above a maximum level
/// of the chain, one the grant's condition excludes, or one a prohibition without condition removes.
fn ungrantable(program: &Program, rule: &Rule, chain: &[usize], forbids: &[&Rule]) -> Option<Diagnostic> {
    let mut reached: Vec<&crate::ir::Tool> = rule
        .tools
        .iter()
        .filter(|&&tool| {
            let t = &program.tools[tool];
            let above_max = chain.iter().any(|&m| program.mandates[m].max_level.is_some_and(|max| t.level > max));
            let excluded = satisfiable(&for_level(&rule.condition, t.level), program.levels.len()) == Some(false);
            let removed = forbids.iter().any(|f| f.condition == Cond::True && f.tools.binary_search(&tool).is_ok());
            t.administers_mandates && !above_max && !excluded && !removed
        })
        .map(|&tool| &program.tools[tool])
        .collect();
    // By name, not by declaration order: moving a tool elsewhere does not change the diagnostic.
    reached.sort_by(|a, b| a.name.cmp(&b.name));
    let first = reached.first()?;
    let names: Vec<&str> = reached.iter().map(|t| t.name.as_str()).collect();
    Some(err::ungrantable(&names, rule.span, first.span))
}

/// A lint question too large for the budget of `sat` (too many alternatives).
struct Undecided;

/// The prohibition that cancels every call a grant allows, if one does (alone or with others).
/// Templates' rules get two of the mandates' lints — a condition that can never hold, and a grant that a prohibition
/// of the chain cancels — with each parameter a free variable of the conditions: a lint that fires holds for every
/// instance. Prohibitions are the template's own, its template ancestors' and those of the mandate chain above them.
fn template_rules(program: &Program) -> Vec<Diagnostic> {
    let levels = program.levels.len();
    let mut out = Vec::new();
    for template in &program.templates {
        let mut rules: Vec<&Rule> = template.rules.iter().collect();
        let mut above = template.parent;
        let mandate = loop {
            match above {
                Parent::Mandate(m) => break m,
                Parent::Template(t) => {
                    rules.extend(program.templates[t].rules.iter());
                    above = program.templates[t].parent;
                }
            }
        };
        rules.extend(program.chain(mandate).iter().flat_map(|&m| program.mandates[m].rules.iter()));
        let forbids: Vec<&Rule> = rules.into_iter().filter(|r| r.kind == RuleKind::Forbid).collect();
        for rule in &template.rules {
            if may_hold(rule, levels, &mut out) && rule.kind == RuleKind::Allow {
                dead_grant(program, rule, &forbids, &mut out);
            }
        }
    }
    out
}

/// `remit::unsatisfiable-condition` when `rule`'s condition can never hold (then `false`: no other lint of the rule
/// is worth running); a note when the satisfiability budget cut the question off.
fn may_hold(rule: &Rule, levels: usize, out: &mut Vec<Diagnostic>) -> bool {
    match satisfiable(&rule.condition, levels) {
        Some(false) => {
            let denies = matches!(rule.kind, RuleKind::Limit | RuleKind::Scope);
            out.push(err::unsatisfiable(kind_word(&rule.kind), denies, rule.span));
            false
        }
        // Cut off by the budget: say so rather than pass silently.
        None => {
            out.push(err::lint_incomplete(kind_word(&rule.kind), "whether it can ever be true", rule.span));
            true
        }
        Some(true) => true,
    }
}

/// `remit::dead-grant` when one of `forbids` cancels every call the grant `rule` allows.
fn dead_grant(program: &Program, rule: &Rule, forbids: &[&Rule], out: &mut Vec<Diagnostic>) {
    match cancelling_forbid(program, rule, forbids) {
        Ok(Some(forbid)) => out.push(err::dead_grant(&program.target_name(&rule.target), rule.span, forbid)),
        Ok(None) => {}
        Err(Undecided) => out.push(err::lint_incomplete("grant", "whether prohibitions cancel it", rule.span)),
    }
}

fn cancelling_forbid(program: &Program, rule: &Rule, forbids: &[&Rule]) -> Result<Option<Span>, Undecided> {
    let levels = program.levels.len();
    let (mut first, mut undecided) = (None, false);
    for &tool in &rule.tools {
        let applicable: Vec<&&Rule> = forbids.iter().filter(|f| f.tools.binary_search(&tool).is_ok()).collect();
        if applicable.is_empty() {
            return Ok(None);
        }
        let level = program.tools[tool].level;
        let any = Cond::Or(applicable.iter().map(|f| for_level(&f.condition, level)).collect());
        match implies(&for_level(&rule.condition, level), &any, levels) {
            Some(true) => {}
            Some(false) => return Ok(None),
            None => undecided = true,
        }
        first = first.or(applicable.first().map(|f| f.span));
    }
    if undecided {
        Err(Undecided)
    } else {
        Ok(first)
    }
}
