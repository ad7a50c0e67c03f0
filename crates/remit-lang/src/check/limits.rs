//! The limits of a decision module, checked on the lowered program so that `remit check` reports, with a code,
//! everything `remit build` would refuse (docs/language.md, "Limits"). Codegen checks the same limits again and
//! refuses rather than emit a module that would drop entries.

use std::collections::BTreeSet;

use super::err;
use crate::diag::Diagnostic;
use crate::ir::{Program, RuleKind};

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
    let all = program.mandates.iter().flat_map(|m| m.rules.iter());
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
        let room = MAX_RULES_PER_TOOL.saturating_sub(4 * chain.len());
        let mut count = vec![0usize; program.tools.len()];
        let mut reported = vec![false; program.tools.len()];
        for rule in chain.iter().flat_map(|&m| program.mandates[m].rules.iter()) {
            for &tool in &rule.tools {
                count[tool] += 1;
                if count[tool] > room && !reported[tool] {
                    reported[tool] = true;
                    let mandate = &program.mandates[index];
                    out.push(err::too_many_rules(&mandate.name, &program.tools[tool].name, room, rule.span));
                }
            }
        }
    }
    out
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
}
