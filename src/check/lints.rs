//! Checks over the lowered program: contradictions, dead grants, unsatisfiable gates, ungrantable mandate
//! changes, delegation depth and conflicting fact versions.

use std::collections::HashMap;

use super::err;
use super::sat::{implies, satisfiable};
use crate::diag::Diagnostic;
use crate::ir::{Binding, Cond, Program, Rule, RuleKind, Type};
use crate::source::Span;

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
            if satisfiable(&rule.condition, levels) == Some(false) {
                out.push(err::unsatisfiable(kind_word(&rule.kind), rule.span));
                continue;
            }
            match &rule.kind {
                RuleKind::Allow => {
                    if let Some(d) = ungrantable(program, rule, &forbids) {
                        out.push(d);
                    } else if let Some(forbid) = cancelling_forbid(program, rule, &forbids) {
                        out.push(err::dead_grant(&program.target_name(&rule.target), rule.span, forbid));
                    }
                }
                RuleKind::Gate { approval } => {
                    let kind = &program.approvals[*approval];
                    if kind.binds.contains(&Binding::Manifest) {
                        for &tool in &rule.tools {
                            if program.tools[tool].param("manifest") != Some(&Type::String) {
                                out.push(err::gate_without_manifest(
                                    &kind.name,
                                    &program.tools[tool].name,
                                    rule.span,
                                    kind.span,
                                ));
                                break;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        // Delegation depth: every ancestor bounds how far below it this mandate may sit.
        for (distance, &ancestor) in chain.iter().rev().enumerate().skip(1) {
            let a = &program.mandates[ancestor];
            if let Some(depth) = a.delegation_depth {
                if distance as u32 > depth {
                    out.push(err::delegation_too_deep(&mandate.name, &a.name, depth, mandate.span, a.span));
                }
            }
        }
    }
    for (index, kind) in program.approvals.iter().enumerate() {
        if kind.ttl == 0 {
            let gates: Vec<Span> = program
                .mandates
                .iter()
                .flat_map(|m| m.rules.iter())
                .filter(|r| r.kind == RuleKind::Gate { approval: index })
                .map(|r| r.span)
                .collect();
            if !gates.is_empty() {
                out.push(err::zero_ttl(&kind.name, kind.span, gates));
            }
        }
    }
    let mut facts: HashMap<&str, (u64, Span)> = HashMap::new();
    for rule in program.mandates.iter().flat_map(|m| m.rules.iter()) {
        if let RuleKind::Fact { name, version, .. } = &rule.kind {
            match facts.get(name.as_str()) {
                Some((v, first)) if v != version => out.push(err::conflicting_fact(name, rule.span, *first)),
                Some(_) => {}
                None => {
                    facts.insert(name, (*version, rule.span));
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

/// A grant that reaches a tool administering mandates, unless a prohibition without condition removes it.
fn ungrantable(program: &Program, rule: &Rule, forbids: &[&Rule]) -> Option<Diagnostic> {
    rule.tools.iter().find_map(|&tool| {
        let t = &program.tools[tool];
        let removed = forbids.iter().any(|f| f.condition == Cond::True && f.tools.binary_search(&tool).is_ok());
        (t.administers_mandates && !removed).then(|| err::ungrantable(&t.name, rule.span, t.span))
    })
}

/// The prohibition that cancels every call a grant allows, if one does (alone or with others).
fn cancelling_forbid(program: &Program, rule: &Rule, forbids: &[&Rule]) -> Option<Span> {
    let levels = program.levels.len();
    let mut first = None;
    for &tool in &rule.tools {
        let applicable: Vec<&&Rule> = forbids.iter().filter(|f| f.tools.binary_search(&tool).is_ok()).collect();
        if applicable.is_empty() {
            return None;
        }
        let any = Cond::Or(applicable.iter().map(|f| f.condition.clone()).collect());
        if implies(&rule.condition, &any, levels) != Some(true) {
            return None;
        }
        first = first.or(applicable.first().map(|f| f.span));
    }
    first
}
