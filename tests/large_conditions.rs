//! Large conditions build (issue 7, item 4): a 50,000-term `or` used to fail `remit build` with "function body size
//! exceeds limit" after passing `remit check` (when conditions were wasm code). Conditions are data in the policy
//! image now, evaluated without recursion; a policy of such conditions builds and decides exactly as the interpreter
//! does, errors included.

use std::sync::Arc;

fn program(text: &str) -> remit_lang::ir::Program {
    let mut sources = remit_lang::stdlib::sources();
    sources.add("large.remit", text.to_string());
    let checked = remit_lang::check::check_with(sources, remit_lang::check::Options { narrowing: false });
    checked.program.unwrap_or_else(|| panic!("{:?}", &checked.diagnostics[..checked.diagnostics.len().min(3)]))
}

fn terms(n: usize, term: impl Fn(usize) -> String, connective: &str) -> String {
    (0..n).map(term).collect::<Vec<_>>().join(connective)
}

fn policy(rules: &str) -> String {
    format!(
        "context tier: int\ntool t(a: string, n: int)\nmandate m for \"org:x\" {{\n  holder \"agent:b\"\n  \
         purpose \"p\"\n{rules}}}\n"
    )
}

#[test]
fn a_fifty_thousand_term_or_builds() {
    let rules = format!("  allow t\n  forbid t where {}\n", terms(50_000, |i| format!("args.a == \"v{i}\""), " or "));
    let wasm = remit_lang::wasm::compile(&program(&policy(&rules))).expect("the module builds");
    assert!(wasm.len() > 1_000_000);
}

fn request(a: Option<&str>, n: Option<&str>, tier: &str) -> String {
    let mut args = Vec::new();
    if let Some(a) = a {
        args.push(format!("\"a\":{a}"));
    }
    if let Some(n) = n {
        args.push(format!("\"n\":{n}"));
    }
    format!(
        r#"{{"subject":{{"id":"agent:b"}},"action":{{"name":"t","arguments":{{{}}}}},"resource":{{"id":"r"}},"context":{{"mandate":"m","now":"2026-12-03T15:30:00Z","attributes":{{"tier":{tier}}}}}}}"#,
        args.join(",")
    )
}

/// Split `and`s and `or`s (flat, nested, with errors from missing or mistyped arguments) in every kind of rule:
/// the module's decisions and tool listings (the "possible outcomes" evaluation) are the interpreter's bytes.
#[test]
fn split_conditions_decide_as_the_interpreter() {
    let or = terms(5_000, |i| format!("args.a == \"v{i}\""), " or ");
    let and = terms(3_000, |i| format!("args.a != \"w{i}\""), " and ");
    let nested = terms(1_500, |i| format!("(args.a == \"v{i}\" and args.n != {i} or context.tier == {i})"), " or ");
    let rules = [
        format!("  allow t where {or} or args.n > 100\n  forbid t where {nested}\n  limit t: {and}\n"),
        format!("  allow t where {and}\n  forbid t where ({or}) and args.n < 5\n"),
        format!("  allow t where not ({nested})\n  scope t: not ({or})\n"),
    ];
    let runtime = remit_host::Runtime::new().unwrap();
    let mut requests = Vec::new();
    for a in [Some("\"v0\""), Some("\"v4999\""), Some("\"v2500\""), Some("\"w7\""), Some("\"zz\""), Some("3"), None] {
        for n in [Some("3"), Some("500"), Some("\"x\""), None] {
            for tier in ["7", "\"high\""] {
                requests.push(request(a, n, tier));
            }
        }
    }
    let mut outcomes = std::collections::BTreeSet::new();
    for rules in &rules {
        let program = program(&policy(rules));
        let wasm = remit_lang::wasm::compile(&program).unwrap();
        let mut evaluator = Arc::new(runtime.load(&wasm).unwrap()).evaluator().unwrap();
        for request in &requests {
            let expected = remit_lang::eval::decide(&program, request.as_bytes()).to_json();
            assert_eq!(String::from_utf8_lossy(&evaluator.decide(request.as_bytes())), expected, "{request}");
            let listing = remit_lang::eval::visible_tools(&program, request.as_bytes()).to_json();
            assert_eq!(String::from_utf8_lossy(&evaluator.visible_tools(request.as_bytes())), listing, "{request}");
            outcomes.insert(expected.split(',').take(2).collect::<Vec<_>>().join(","));
        }
    }
    // The requests reach allow, deny and the different reasons, so the comparison is not between trivial answers.
    eprintln!("{outcomes:?}");
    assert!(outcomes.len() >= 4, "{outcomes:?}");
}
