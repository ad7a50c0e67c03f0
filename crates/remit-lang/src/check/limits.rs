//! The limits of a decision module, checked on the lowered program so that `remit check` reports, with a code,
//! everything `remit build` would refuse (docs/language.md, "Limits"). Codegen checks the same limits again and
//! refuses rather than emit a module that would drop entries.

use std::collections::BTreeSet;

use super::err;
use crate::diag::Diagnostic;
use crate::ir::{Parent, Program, Rule, RuleKind};

/// A decision collects the rules of the called tool along the mandate chain, plus four entries per mandate of the
/// chain (validity, stop, level, `otherwise`), into arrays of this many entries (`remit_rt::image::MAX_DECIDING`).
pub const MAX_RULES_PER_TOOL: usize = 4096;

/// Rules in one policy: each rule with a condition is two functions of the module (a wasm module has at most
/// 1,000,000) and an entry of two dispatch tables; this leaves a wide margin for the rest.
pub const MAX_RULES: usize = 250_000;

/// Distinct `budget` counters, and the length of a counter's name: the module packs both in 16 bits.
pub const MAX_BUDGET_COUNTERS: usize = 65_535;

pub fn check(program: &Program) -> Vec<Diagnostic> {
    check_against(program, MAX_RULES, MAX_BUDGET_COUNTERS)
}

/// [`check`] with the policy-wide limits as parameters (so tests can reach them with small policies).
fn check_against(program: &Program, max_rules: usize, max_counters: usize) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // A template's rules are a mandate record of the module too (its instances decide as that record).
    let all = program
        .mandates
        .iter()
        .flat_map(|m| m.rules.iter())
        .chain(program.templates.iter().flat_map(|t| t.rules.iter()));
    if let Some(rule) = all.clone().nth(max_rules) {
        out.push(err::policy_too_large(&format!("more than {max_rules} rules"), rule.span));
    }
    let mut counters = BTreeSet::new();
    for rule in all {
        if let RuleKind::Budget { name, .. } = &rule.kind {
            if name.len() > max_counters {
                out.push(err::policy_too_large(&format!("a budget name longer than {max_counters} bytes"), rule.span));
            } else if counters.insert(name) && counters.len() == max_counters + 1 {
                out.push(err::policy_too_large(&format!("more than {max_counters} budget counters"), rule.span));
            }
        }
    }
    for index in 0..program.mandates.len() {
        let chain = program.chain(index);
        let rules: Vec<&Rule> = chain.iter().flat_map(|&m| program.mandates[m].rules.iter()).collect();
        per_tool(program, &program.mandates[index].name, chain.len(), &rules, &mut out);
    }
    // An instance decides as its template's record under the parent's chain: the template, the templates above it,
    // then the mandates, each one more mandate of the chain.
    for template in &program.templates {
        let mut templates = vec![template];
        let mut above = template.parent;
        let mandate = loop {
            match above {
                Parent::Mandate(m) => break Some(m),
                // Cycles are reported when lowering; the walk stops at one.
                Parent::Template(_) if templates.len() > program.templates.len() => break None,
                Parent::Template(t) => {
                    templates.push(&program.templates[t]);
                    above = program.templates[t].parent;
                }
            }
        };
        // From the root down, as a decision collects them: the mandates, then the templates.
        let chain = mandate.map(|m| program.chain(m)).unwrap_or_default();
        let mut rules: Vec<&Rule> = chain.iter().flat_map(|&m| program.mandates[m].rules.iter()).collect();
        rules.extend(templates.iter().rev().flat_map(|t| t.rules.iter()));
        per_tool(program, &template.name, templates.len() + chain.len(), &rules, &mut out);
    }
    out
}

/// `remit::too-many-rules` for `name`, whose chain of `length` mandates holds `rules`: at the first rule past the
/// room of each tool.
fn per_tool(program: &Program, name: &str, length: usize, rules: &[&Rule], out: &mut Vec<Diagnostic>) {
    let room = MAX_RULES_PER_TOOL.saturating_sub(4 * length);
    let mut count = vec![0usize; program.tools.len()];
    let mut reported = vec![false; program.tools.len()];
    for rule in rules {
        for &tool in &rule.tools {
            count[tool] += 1;
            if count[tool] > room && !reported[tool] {
                reported[tool] = true;
                out.push(err::too_many_rules(name, &program.tools[tool].name, room, rule.span));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(text: &str) -> Program {
        let mut sources = crate::stdlib::sources();
        sources.add("limits.remit", text);
        crate::check::check(sources).program.expect("a valid policy")
    }

    fn codes(diagnostics: &[Diagnostic]) -> Vec<(&str, &str)> {
        diagnostics.iter().map(|d| (d.code, d.message.as_str())).collect()
    }

    const POLICY: &str = "tool t(a: string)\nmandate m for \"o\" {\n  holder \"a\"\n  purpose \"p\"\n  allow t\n  \
        budget a: at most 1 call to t in total\n  budget b: at most 1 call to t in total\n  \
        budget c: at most 1 call to t per day\n  budget ddd: at most 1 call to t per hour\n}\n";

    #[test]
    fn policy_wide_limits() {
        let program = program(POLICY);
        assert_eq!(codes(&check_against(&program, 5, 4)), []);
        assert_eq!(
            codes(&check_against(&program, 4, 2)),
            [
                ("remit::policy-too-large", "the policy has more than 4 rules: a module cannot hold it"),
                ("remit::policy-too-large", "the policy has more than 2 budget counters: a module cannot hold it"),
                (
                    "remit::policy-too-large",
                    "the policy has a budget name longer than 2 bytes: a module cannot hold it"
                ),
            ]
        );
    }

    /// A template's rules are rules of the module too: they count towards the policy's rules and counters.
    #[test]
    fn templates_rules_count_policy_wide() {
        let text = format!(
            "{POLICY}template tm() under m {{\n  holder \"a\"\n  allow t\n  budget e: at most 1 call to t in total\n}}\n"
        );
        // Without the proof, which would want the parent's budgets restated: the limits are what is tested.
        let mut sources = crate::stdlib::sources();
        sources.add("limits.remit", text);
        let options = crate::check::Options { narrowing: false };
        let program = crate::check::check_with(sources, options).program.expect("a valid policy");
        assert_eq!(codes(&check_against(&program, 7, 5)), []);
        assert_eq!(
            codes(&check_against(&program, 6, 4)),
            [
                ("remit::policy-too-large", "the policy has more than 6 rules: a module cannot hold it"),
                ("remit::policy-too-large", "the policy has more than 4 budget counters: a module cannot hold it"),
            ]
        );
    }
}
