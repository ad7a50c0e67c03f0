//! Wording of syntax errors.

use crate::diag::Diagnostic;
use crate::source::Span;

pub fn syntax(span: Span, expected: &str) -> Diagnostic {
    Diagnostic::error("remit::syntax", format!("unexpected input, expected {expected}"))
        .label(span, "not valid here")
        .help("see docs/language.md for the grammar of declarations and clauses")
}

pub fn unexpected_end(span: Span, expected: &str) -> Diagnostic {
    Diagnostic::error("remit::syntax", format!("unexpected end of file, expected {expected}"))
        .label(span, "the file ends after this")
        .help("a declaration is probably not closed: check that every `{` has its `}`")
}

pub fn bad_literal(span: Span, what: &str, text: &str) -> Diagnostic {
    Diagnostic::error("remit::invalid-literal", format!("`{text}` is not a valid {what}"))
        .label(span, format!("invalid {what}"))
        .help(match what {
            "timestamp" => "timestamps are UTC: `2026-11-30T12:00:00Z`",
            "duration" => "durations are a whole number with a unit: `900s`, `15m`, `24h`, `7d`",
            "count" => "counts, depths and versions are whole numbers, at most 18446744073709551615",
            "money amount" => "money is an exact decimal with at most 9 fractional digits and a currency: `12.50 USD`",
            _ => "numbers are exact decimals with at most 9 fractional digits",
        })
}

pub fn nesting_too_deep(span: Span, max: usize) -> Diagnostic {
    Diagnostic::error("remit::nesting-too-deep", format!("parentheses, `not`s and `set<…>` nest more than {max} deep"))
        .label(span, format!("level {} starts here", max + 1))
        .help("split the condition into several clauses (a mandate's `forbid`s and `limit`s all apply), or drop double negations")
}

pub fn invisible_character(span: Span, c: char, name: &str, place: &str) -> Diagnostic {
    let code = format!("U+{:04X}", c as u32);
    Diagnostic::error("remit::invisible-character", format!("{place} contains the invisible character {code} ({name})"))
        .label(span, format!("{code} here"))
        .help(
            "invisible and text-direction characters make a policy read differently from what it does (trojan \
             source): remove it; in a string, write what it should match as visible text",
        )
}

pub fn difference_without_comparison(span: Span) -> Diagnostic {
    Diagnostic::error("remit::difference-without-comparison", "the time between two timestamps must be compared")
        .label(span, "a difference alone is not a condition")
        .help("compare it with a duration: `args.end - args.start <= 8h`")
}
