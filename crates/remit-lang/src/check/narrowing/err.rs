//! Wording of the narrowing diagnostics, in one place. Style: lowercase, no final period, user input in
//! backticks. A widening names the dimension in words, points at the sub-mandate's clause (primary) and at the
//! ancestor's clause it exceeds, and carries the confirmed witness request.

use super::{Culprit, Finding, Kind, Origin, Widening};
use crate::diag::Diagnostic;
use crate::ir::{Cond, Mandate, MandateId, Program, RuleKind, Test};
use crate::source::Span;
use crate::value::format_timestamp;

pub const WIDENS_PARENT: &str = "remit::widens-parent";
pub const UNDECIDED: &str = "remit::narrowing-undecided";
pub const INTERNAL: &str = "remit::narrowing-internal";

pub fn finding(program: &Program, f: &Finding) -> Diagnostic {
    let child = &program.mandates[f.child];
    let parent = &program.mandates[f.parent];
    match &f.kind {
        Kind::Widens(w) => widens(program, child, parent, w),
        Kind::Depth => depth(child, parent),
        Kind::Undecided { tool } => Diagnostic::error(
            UNDECIDED,
            format!("cannot decide whether `{}` narrows `{}` for `{tool}`", child.name, parent.name),
        )
        .label(child.span, "compared with its parent here")
        .help(format!(
            "the conditions on `{tool}` are too large to compare exhaustively; split them into simpler rules"
        )),
        Kind::Unconfirmed { tool, .. } => Diagnostic::error(
            INTERNAL,
            format!(
                "internal error: the narrowing check of `{}` for `{tool}` disagrees with the interpreter",
                child.name
            ),
        )
        .label(child.span, "compared with its parent here")
        .help("this is a bug in remit, not in the policy; please report it together with the policy"),
    }
}

/// A clause's text on one line.
fn text(program: &Program, span: Span) -> String {
    program.sources.snippet(span).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn window(mandate: &Mandate) -> String {
    let mut out = String::from("valid");
    if let Some(from) = mandate.valid_from {
        out.push_str(&format!(" from {}", format_timestamp(from)));
    }
    if let Some(until) = mandate.valid_until {
        out.push_str(&format!(" until {}", format_timestamp(until)));
    }
    out
}

fn widens(program: &Program, child: &Mandate, parent: &Mandate, w: &Widening) -> Diagnostic {
    let c = child.name.as_str();
    let tool = w.tool.as_str();
    let restate = |span: Span| format!("restate it in `{c}`: `{}`", text(program, span));
    // (message, the ancestor's span, its label, help)
    let (message, at, label, help) = match w.exceeded {
        Origin::Grants(m) => {
            let anc = &program.mandates[m];
            let grants: Vec<_> = anc
                .rules
                .iter()
                .filter(|r| r.kind == RuleKind::Allow && program.tool(tool).is_some_and(|t| r.tools.contains(&t)))
                .collect();
            match grants.first() {
                None => (
                    format!("`{c}` allows `{tool}`, which `{}` does not grant", anc.name),
                    anc.span,
                    format!("`{}` grants nothing that covers `{tool}`", anc.name),
                    format!(
                        "a sub-mandate allows only what its parent allows: drop `{tool}` from `{c}`, or grant it in `{}` first",
                        anc.name
                    ),
                ),
                Some(first) => {
                    let differ = match w.attributes.as_slice() {
                        [] => String::new(),
                        attrs => format!(
                            " (they differ in {})",
                            attrs.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
                        ),
                    };
                    (
                        format!("`{c}` allows `{tool}` calls that `{}` does not grant{differ}", anc.name),
                        first.span,
                        format!("grants `{tool}` only when this holds"),
                        format!(
                            "the sub-mandate's grant must imply its parent's: narrow its condition to within `{}`",
                            text(program, first.span)
                        ),
                    )
                }
            }
        }
        Origin::Rule(m, index) => {
            let anc = &program.mandates[m];
            let rule = &anc.rules[index];
            let a = anc.name.as_str();
            let (message, label) = match &rule.kind {
                RuleKind::Forbid if rule.condition == Cond::True => {
                    (format!("`{c}` allows `{tool}`, which `{a}` forbids"), "forbidden here".to_string())
                }
                RuleKind::Forbid => {
                    (format!("`{c}` allows `{tool}` calls that `{a}` forbids"), "forbidden here".into())
                }
                // A parent instance's window whose bound is a parameter (`valid until parent.until`, a template
                // under a template): read as a limit on every tool by the proof.
                RuleKind::Limit if rule.label.starts_with("valid until ") => {
                    (format!("`{c}` allows `{tool}` calls after an instance of `{a}` expires"), "its window".into())
                }
                RuleKind::Limit if rule.label.starts_with("valid from ") => (
                    format!("`{c}` allows `{tool}` calls before an instance of `{a}` becomes valid"),
                    "its window".into(),
                ),
                RuleKind::Limit => {
                    (format!("`{c}` allows `{tool}` calls beyond the per-call limit of `{a}`"), "the limit".into())
                }
                RuleKind::Scope => {
                    (format!("`{c}` allows `{tool}` calls outside the data scope of `{a}`"), "the data scope".into())
                }
                RuleKind::Gate { approval, .. } => {
                    let kind = &program.approvals[*approval].name;
                    (
                        format!("`{c}` allows `{tool}` without the `{kind}` approval that `{a}` requires"),
                        format!("requires an approval of kind `{kind}`"),
                    )
                }
                RuleKind::RequireOperationId => (
                    format!("`{c}` allows `{tool}` without the operation id that `{a}` requires"),
                    "requires an operation id".into(),
                ),
                RuleKind::Fact { name, version, .. } => (
                    format!("`{c}` allows `{tool}` without version {version} of fact `{name}`, which `{a}` requires"),
                    format!("requires fact `{name}` at version {version}"),
                ),
                RuleKind::Budget { name, max, .. } => (
                    format!("`{c}` allows `{tool}` beyond budget `{name}` of `{a}`"),
                    format!("at most {max} under budget `{name}`"),
                ),
                RuleKind::Allow => (format!("`{c}` allows `{tool}` calls that `{a}` refuses"), "refuses here".into()),
            };
            let window = rule.kind == RuleKind::Limit && rule.label.starts_with("valid ");
            let mut help = if window {
                let param = rule.label.split(' ').nth(2).unwrap_or_default();
                let example = if rule.label.starts_with("valid until ") {
                    format!("`until <= {param}`, with `valid until until`")
                } else {
                    format!("`from >= {param}`, with `valid from from`")
                };
                format!(
                    "an instance must stay within its parent instance's window (`{}`): bound `{c}`'s window by \
                     `{param}` ({example})",
                    rule.label
                )
            } else {
                format!("a sub-mandate must state everything it allows within its parent: {}", restate(rule.span))
            };
            if matches!(rule.kind, RuleKind::Gate { .. }) {
                help.push_str(" (an approval of another kind does not count)");
            }
            (message, rule.span, label, help)
        }
        Origin::ValidFrom(m) => {
            let anc = &program.mandates[m];
            (
                format!("`{c}` allows calls before `{}` becomes valid", anc.name),
                anc.valid_span,
                format!("`{}` starts here", anc.name),
                format!("give `{c}` a validity window within its parent's: `{}`", window(anc)),
            )
        }
        Origin::ValidUntil(m) => {
            let anc = &program.mandates[m];
            (
                format!("`{c}` allows calls after `{}` expires", anc.name),
                anc.valid_span,
                format!("`{}` ends here", anc.name),
                format!("give `{c}` a validity window within its parent's: `{}`", window(anc)),
            )
        }
        Origin::MaxLevel(m) => {
            let anc = &program.mandates[m];
            let name = |l: usize| program.levels.get(l).cloned().unwrap_or_default();
            let level = program.tool(tool).map_or(String::new(), |t| name(program.tools[t].level));
            let max = anc.max_level.map_or(String::new(), name);
            (
                format!("`{c}` allows `{tool}` at level `{level}`, above the maximum level `{max}` of `{}`", anc.name),
                anc.max_level_span,
                format!("the maximum is `{max}`"),
                format!("restate the maximum in `{c}`: `max level {max}` (or a lower level)"),
            )
        }
        Origin::Undeclared | Origin::SelfModification | Origin::Scopes | Origin::Holder => (
            format!("`{c}` allows `{tool}` calls that `{}` refuses", parent.name),
            parent.span,
            "refuses them".to_string(),
            "a sub-mandate allows only what its parent allows".to_string(),
        ),
    };
    let (span, primary) = match w.culprit {
        Culprit::Rule(i) if child.rules[i].kind == RuleKind::Allow => {
            (child.rules[i].span, "allows the witness".to_string())
        }
        Culprit::Rule(i) => (child.rules[i].span, "restated here, but it lets the witness through".to_string()),
        Culprit::Valid => (child.valid_span, "this window reaches outside the parent's".to_string()),
        Culprit::MaxLevel => (child.max_level_span, "this maximum is above the parent's".to_string()),
        Culprit::Mandate => {
            let what = match w.exceeded {
                Origin::ValidFrom(_) | Origin::ValidUntil(_) => "no validity window",
                _ => "this sub-mandate",
            };
            (child.span, what.to_string())
        }
    };
    let mut help = format!(
        "{help}\nthe witness below is allowed by `{c}` on its own and refused by `{}`; at run time the whole chain decides",
        parent.name
    );
    let parent_tests_under = child.parent.is_some_and(|p| tests_under(program, p));
    if let Some(unsafe_path) = unsafe_string(&w.witness).filter(|_| parent_tests_under) {
        help.push_str(&format!(
            "\n`{unsafe_path}` is under no prefix: `under` refuses a path with `.` or `..` segments, `//`, a backslash, NUL or an encoded separator, dot or `%`"
        ));
    }
    Diagnostic::error(WIDENS_PARENT, message)
        .label(span, primary)
        .label(at, label)
        .help(help)
        .witness(serde_json::to_string(&w.witness).unwrap_or_default())
}

/// Whether `mandate` or one of its ancestors tests `under` (a condition, or a holder pattern): then a path `under`
/// refuses is worth explaining, since the refusal is the interpreter's, not a rule the author can see.
fn tests_under(program: &Program, mandate: MandateId) -> bool {
    fn in_cond(cond: &Cond) -> bool {
        match cond {
            Cond::Atom(atom) => matches!(atom.test, Test::Under(_) | Test::NotUnder(_)),
            Cond::And(items) | Cond::Or(items) => items.iter().any(in_cond),
            Cond::True | Cond::False => false,
        }
    }
    program
        .chain(mandate)
        .into_iter()
        .map(|m| &program.mandates[m])
        .any(|m| !m.holder_prefixes.is_empty() || m.rules.iter().any(|rule| in_cond(&rule.condition)))
}

/// The first string of a witness that `under` cannot test, when one of its values is such a path.
fn unsafe_string(witness: &serde_json::Value) -> Option<&str> {
    match witness {
        serde_json::Value::String(s) if !crate::check::sat::testable_path(s) => Some(s),
        serde_json::Value::Array(items) => items.iter().find_map(unsafe_string),
        serde_json::Value::Object(fields) => fields.values().find_map(unsafe_string),
        _ => None,
    }
}

fn depth(child: &Mandate, parent: &Mandate) -> Diagnostic {
    let limit = parent.delegation_depth.unwrap_or(0);
    let below = limit.saturating_sub(1);
    let levels = |n: u32| if n == 1 { "one level".to_string() } else { format!("{n} levels") };
    let (message, span, label) = match child.delegation_depth {
        Some(own) => (
            format!(
                "`{}` allows {} of delegation below it, as many as `{}` allows below itself",
                child.name,
                levels(own),
                parent.name
            ),
            child.depth_span,
            format!("allows {} below `{}`", levels(own), child.name),
        ),
        None => (
            format!("`{}` does not bound its delegation depth, but `{}` does", child.name, parent.name),
            child.span,
            "no `delegation depth`".to_string(),
        ),
    };
    Diagnostic::error(WIDENS_PARENT, message)
        .label(span, label)
        .label(parent.depth_span, format!("allows {} below `{}`", levels(limit), parent.name))
        .help(format!(
            "a sub-mandate is one level below its parent, so it may allow at most {} below itself: add `delegation depth {below}`",
            levels(below)
        ))
}

/// Why `program` refuses a request, in words, from the clause a conjunct stands for (for `remit diff`):
/// "refused by `forbid pay` of `wallet` (policy.remit:12:3)".
pub fn clause(program: &Program, origin: Origin, tool: &str) -> String {
    let at = |span: Span| program.sources.location(span);
    match origin {
        Origin::Undeclared => format!("`{tool}` is not declared"),
        Origin::SelfModification => format!("`{tool}` administers mandates"),
        Origin::Scopes => format!("refused for lack of the credential scopes `{tool}` requires"),
        Origin::Holder => "the subject is not a holder".to_string(),
        Origin::ValidFrom(m) | Origin::ValidUntil(m) => {
            let mandate = &program.mandates[m];
            format!("refused by `{}` of `{}` ({})", window(mandate), mandate.name, at(mandate.valid_span))
        }
        Origin::MaxLevel(m) => {
            let mandate = &program.mandates[m];
            let clause = text(program, mandate.max_level_span);
            format!("refused by `{clause}` of `{}` ({})", mandate.name, at(mandate.max_level_span))
        }
        Origin::Grants(m) => {
            let mandate = &program.mandates[m];
            format!("not granted by `{}` for `{tool}` ({})", mandate.name, at(mandate.span))
        }
        Origin::Rule(m, index) => {
            let mandate = &program.mandates[m];
            let rule = &mandate.rules[index];
            format!("refused by `{}` of `{}` ({})", text(program, rule.span), mandate.name, at(rule.span))
        }
    }
}

/// Why a version without the mandate refuses everything (for `remit diff`).
pub fn no_mandate(name: &str, before: bool) -> String {
    if before {
        format!("mandate `{name}` did not exist")
    } else {
        format!("mandate `{name}` does not exist")
    }
}
