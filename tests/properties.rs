//! Property tests over the shipped examples:
//! - reordering declarations, mandate clauses and files never changes a decision or a listing's explanations;
//! - an evaluation error never yields allow (fail closed), on mutated requests (of the examples, and of the semantics
//!   folders that read subjects' and resources' attributes and relations);
//! - arbitrary bytes never crash the interpreter and always deny.

mod support;

use proptest::prelude::*;
use remit_lang::check::program_hash;
use remit_lang::eval::{decide, trace, visible_tools, Outcome};
use remit_lang::ir::Program;
use remit_lang::syntax::ast::Decl;
use remit_lang::syntax::parse_file;
use serde_json::Value;
use support::examples::{compile, example, semantic, EXAMPLES};
use support::rng::Lcg as Rng;

/// A listing without source positions (`at`), which legitimately depend on the text's layout.
fn listing(program: &Program, request: &[u8]) -> String {
    let mut visibility = visible_tools(program, request);
    for hidden in &mut visibility.hidden {
        if let Some(rule) = hidden.rule.as_mut() {
            rule.at.clear();
        }
    }
    visibility.to_json()
}

/// The file with its declarations, and each mandate's clauses, in another order.
#[test]
fn the_program_hash_changes_with_what_the_policy_says_and_not_with_its_layout() {
    let example = example("wallet");
    let original = program_hash(&compile(&example.files));
    let edit = |from: &str, to: &str| {
        let files: Vec<(String, String)> =
            example.files.iter().map(|(name, text)| (name.clone(), text.replace(from, to))).collect();
        program_hash(&compile(&files))
    };
    // Comments, blank lines and indentation are layout.
    assert_eq!(edit("\n  allow read_only", "\n\n      // reading\n      allow   read_only"), original);
    // A bound, a merchant, an approval kind's approver or a gate's outcome are meaning.
    for (from, to) in
        [("<= 100 USD", "<= 101 USD"), ("\"acme-grocer\"", "\"acme-grocers\""), ("60 USD\n", "60 USD else deny\n")]
    {
        assert_ne!(edit(from, to), original, "`{from}` → `{to}`");
    }
}

fn shuffle_file(text: &str, rng: &mut Rng) -> String {
    let file = parse_file(0, text).expect("example parses");
    let mut out = String::new();
    for index in rng.permutation(file.decls.len()) {
        let span = file.spans[index];
        let decl_text = &text[span.start as usize..span.end as usize];
        match &file.decls[index] {
            Decl::Mandate(m) if !m.clauses.is_empty() => {
                let first = m.clauses[0].span.start as usize;
                out.push_str(&text[span.start as usize..first]);
                for c in rng.permutation(m.clauses.len()) {
                    let clause = m.clauses[c].span;
                    out.push_str("\n  ");
                    out.push_str(&text[clause.start as usize..clause.end as usize]);
                }
                out.push_str("\n}\n\n");
            }
            _ => {
                out.push_str(decl_text);
                out.push_str("\n\n");
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn reordering_rules_and_files_never_changes_a_decision(which in 0..EXAMPLES.len(), seed in any::<u64>()) {
        let example = example(EXAMPLES[which]);
        let original = compile(&example.files);
        let mut rng = Rng(seed);
        let mut shuffled: Vec<(String, String)> =
            example.files.iter().map(|(name, text)| (name.clone(), shuffle_file(text, &mut rng))).collect();
        let order = rng.permutation(shuffled.len());
        shuffled = order.into_iter().map(|i| shuffled[i].clone()).collect();
        let reordered = compile(&shuffled);
        // What the policy says is the same program: the program hash stays (the source hash does not).
        prop_assert_eq!(program_hash(&original), program_hash(&reordered));
        for request in &example.requests {
            let bytes = request.to_string();
            // The whole decision but positions and hash, `rules` order included; and the listing's explanations.
            prop_assert_eq!(
                semantic(&decide(&original, bytes.as_bytes())),
                semantic(&decide(&reordered, bytes.as_bytes())),
                "request {}", bytes
            );
            prop_assert_eq!(listing(&original, bytes.as_bytes()), listing(&reordered, bytes.as_bytes()), "listing for {}", bytes);
        }
    }
}

/// Paths of every value inside a JSON document (JSON pointers).
fn paths(value: &Value, prefix: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{prefix}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                paths(v, p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{prefix}/{i}");
                out.push(p.clone());
                paths(v, p, out);
            }
        }
        _ => {}
    }
}

fn replacement(kind: u8) -> Value {
    match kind % 10 {
        0 => Value::Null,
        1 => Value::from(-7),
        2 => Value::from("garbage"),
        3 => Value::Bool(true),
        4 => serde_json::json!([1, "x"]),
        5 => serde_json::json!({"nested": {}}),
        6 => Value::from("100000 USD"),
        // A valid RFC 3339 spelling (a fraction and an offset) and a leap second, which is refused.
        7 => Value::from("2026-12-03T16:20:00.5+01:00"),
        8 => Value::from("2026-12-03T15:20:60Z"),
        _ => Value::from("2026-13-45T99:99:99Z"),
    }
}

fn mutate(request: &Value, pick: usize, kind: u8, delete: bool) -> Value {
    let mut out = request.clone();
    let mut all = Vec::new();
    paths(&out, String::new(), &mut all);
    if all.is_empty() {
        return out;
    }
    let path = &all[pick % all.len()];
    let (parent, last) = path.rsplit_once('/').unwrap();
    let last = last.replace("~1", "/").replace("~0", "~");
    match out.pointer_mut(parent) {
        Some(Value::Object(map)) if delete => {
            map.remove(&last);
        }
        Some(Value::Array(items)) if delete => {
            if let Ok(i) = last.parse::<usize>() {
                items.remove(i);
            }
        }
        Some(_) => {
            if let Some(slot) = out.pointer_mut(path) {
                *slot = replacement(kind);
            }
        }
        None => {}
    }
    out
}

/// The semantics folders whose policies read the world (issue 30).
const WORLD: [&str; 3] = ["attributes", "attribute-comparisons", "relations"];

fn world_programs() -> Vec<(Program, Vec<Value>)> {
    WORLD
        .iter()
        .map(|name| {
            let dir = support::root().join("tests/semantics").join(name);
            (compile(&support::examples::remit_files(&dir)), support::examples::test_requests(&dir))
        })
        .collect()
}

/// When `request` is allowed: no prohibition, limit or scope failed to evaluate or matched, and every mandate of
/// the chain has a grant that evaluated to true.
fn fail_closed(program: &Program, request: &Value) -> Result<(), TestCaseError> {
    let bytes = request.to_string();
    let decision = decide(program, bytes.as_bytes());
    if decision.outcome == Outcome::Allow {
        for rule in trace(program, bytes.as_bytes()) {
            // Restrictions that cannot be evaluated count as violated; gates as applying.
            let failed = rule.result.is_none();
            prop_assert!(
                !(failed && matches!(rule.kind, "forbid" | "limit" | "scope")),
                "allowed although `{}` of `{}` could not be evaluated: {}",
                rule.rule,
                rule.mandate,
                bytes
            );
            prop_assert!(
                !(rule.kind == "forbid" && rule.result == Some(true)),
                "allowed although `{}` forbids it: {}",
                rule.rule,
                bytes
            );
        }
        // Every granting rule listed evaluated to true, and every mandate of the chain granted.
        let traced = trace(program, bytes.as_bytes());
        for mandate in &decision.mandate_chain {
            prop_assert!(
                traced.iter().any(|r| &r.mandate == mandate && r.kind == "allow" && r.result == Some(true)),
                "allowed without a grant of `{}` that evaluated to true: {}",
                mandate,
                bytes
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn an_evaluation_error_never_allows(which in 0..EXAMPLES.len(), case in any::<usize>(), pick in any::<usize>(),
                                         kind in any::<u8>(), delete in any::<bool>(), twice in any::<bool>()) {
        thread_local! {
            static PROGRAMS: Vec<(Program, Vec<Value>)> =
                EXAMPLES.iter().map(|n| { let e = example(n); (compile(&e.files), e.requests) }).collect();
        }
        PROGRAMS.with(|programs| {
            let (program, requests) = &programs[which];
            let mut request = mutate(&requests[case % requests.len()], pick, kind, delete);
            if twice {
                request = mutate(&request, pick / 7, kind.wrapping_add(3), !delete);
            }
            fail_closed(program, &request)
        })?;
    }

    /// The same on the semantics folders about the world (subjects' and resources' attributes, comparisons of two
    /// attributes, relations): their requests mutated, properties and relation answers included.
    #[test]
    fn an_evaluation_error_on_the_world_never_allows(which in 0..WORLD.len(), case in any::<usize>(),
                                                      pick in any::<usize>(), kind in any::<u8>(),
                                                      delete in any::<bool>(), twice in any::<bool>()) {
        thread_local! {
            static PROGRAMS: Vec<(Program, Vec<Value>)> = world_programs();
        }
        PROGRAMS.with(|programs| {
            let (program, requests) = &programs[which];
            let mut request = mutate(&requests[case % requests.len()], pick, kind, delete);
            if twice {
                request = mutate(&request, pick / 7, kind.wrapping_add(3), !delete);
            }
            fail_closed(program, &request)
        })?;
    }

    #[test]
    fn arbitrary_bytes_never_crash_and_always_deny(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        thread_local! { static PROGRAM: Program = compile(&example("wallet").files); }
        PROGRAM.with(|program| {
            let decision = decide(program, &bytes);
            prop_assert_eq!(decision.outcome, Outcome::Deny);
            Ok(())
        })?;
    }
}

#[test]
fn mutations_reach_allow_and_errors() {
    // The fail-closed property is only meaningful if mutated requests still reach allows and evaluation errors.
    let e = example("wallet");
    let program = compile(&e.files);
    let (mut allows, mut errors) = (0, 0);
    for (i, request) in e.requests.iter().enumerate() {
        for pick in 0..40 {
            let bytes = mutate(request, pick * 3 + i, pick as u8, pick % 2 == 0).to_string();
            if decide(&program, bytes.as_bytes()).outcome == Outcome::Allow {
                allows += 1;
            }
            if trace(&program, bytes.as_bytes()).iter().any(|r| r.result.is_none()) {
                errors += 1;
            }
        }
    }
    assert!(allows > 20, "only {allows} mutated requests were allowed");
    assert!(errors > 20, "only {errors} mutated requests hit an evaluation error");
}

#[test]
fn mutations_of_the_world_reach_allow_and_errors() {
    // As above, for the folders about the world: mutating a property or a relation answer still allows now and then,
    // and hits evaluation errors.
    let (mut allows, mut errors) = (0, 0);
    for (program, requests) in world_programs() {
        for (i, request) in requests.iter().enumerate() {
            for pick in 0..20 {
                let bytes = mutate(request, pick * 3 + i, pick as u8, pick % 2 == 0).to_string();
                if decide(&program, bytes.as_bytes()).outcome == Outcome::Allow {
                    allows += 1;
                }
                if trace(&program, bytes.as_bytes()).iter().any(|r| r.result.is_none()) {
                    errors += 1;
                }
            }
        }
    }
    eprintln!("world mutations: {allows} allowed, {errors} with an evaluation error");
    assert!(allows > 20 && errors > 20, "allows {allows}, evaluation errors {errors}");
}

#[test]
fn shuffling_really_reorders() {
    let e = example("web-publication");
    let (_, text) = e.files.iter().find(|(n, _)| n == "policy.remit").unwrap();
    let shuffled = shuffle_file(text, &mut Rng(7));
    assert_ne!(shuffled.replace(char::is_whitespace, ""), text.replace(char::is_whitespace, ""));
    let position = |t: &str, needle: &str| t.find(needle).unwrap();
    let moved =
        ["mandate web_research", "mandate web_release", "forbid social_post", "allow edit_code"].windows(2).any(|w| {
            (position(text, w[0]) < position(text, w[1])) != (position(&shuffled, w[0]) < position(&shuffled, w[1]))
        });
    assert!(moved, "seed 7 leaves the declarations in order:\n{shuffled}");
}
