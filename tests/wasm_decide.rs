//! The wasm backend agrees with the reference interpreter, byte for byte: every example's policy is compiled to
//! a module, and every request of its policy tests (and its `requests/` folder), plus mutated and malformed
//! variants, is decided by both.

mod support;

use std::path::Path;

use remit_lang::check::{check_with, Options};
use remit_lang::ir::Program;
use support::mutate::{damage, mutate, Rng};
use support::wasm::Wasm;
use wasmtime::Engine;

fn example(name: &str) -> (Program, Vec<Vec<u8>>) {
    policy_folder(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name))
}

/// A folder's policy (with the standard library) and the requests of its policy tests.
fn policy_folder(dir: &Path) -> (Program, Vec<Vec<u8>>) {
    let name = dir.display();
    let mut sources = remit_lang::stdlib::sources();
    let mut requests = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file.ends_with(".remit") {
            sources.add(file, std::fs::read_to_string(&path).unwrap());
        } else if file.ends_with(".tests.toml") {
            let parsed = remit_lang::testing::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
            requests.extend(parsed.cases.into_iter().map(|c| c.request.to_string().into_bytes()));
        }
    }
    // Decisions never depend on the narrowing proof (some semantic folders widen on purpose, as `remit test` allows).
    let checked = check_with(sources, Options { narrowing: false });
    let diagnostics: Vec<String> = checked.diagnostics.iter().map(|d| format!("{}: {}", d.code, d.message)).collect();
    let program = checked.program.unwrap_or_else(|| panic!("{name} does not check: {diagnostics:#?}"));
    (program, requests)
}

#[test]
fn examples_decide_identically_in_wasm() {
    let engine = Engine::default();
    for name in ["wallet", "club", "bank-disputes", "web-publication"] {
        let (program, requests) = example(name);
        let bytes = remit_lang::wasm::compile(&program).expect("compiles to wasm");
        let mut wasm = Wasm::new(&engine, &bytes);
        let mut mismatches = Vec::new();
        for request in &requests {
            let expected = remit_lang::eval::decide(&program, request).to_json();
            let actual = wasm.decide(request);
            let listing = (remit_lang::eval::visible_tools(&program, request).to_json(), wasm.visible(request));
            if listing.0 != listing.1 {
                mismatches.push(format!(
                    "listing for {}\nexpected: {}\nactual:   {}",
                    String::from_utf8_lossy(request),
                    listing.0,
                    listing.1
                ));
            }
            if expected != actual {
                mismatches.push(format!(
                    "request:  {}\nexpected: {expected}\nactual:   {actual}",
                    String::from_utf8_lossy(request)
                ));
            }
        }
        assert!(
            mismatches.is_empty(),
            "{name}: {} of {} differ:\n{}",
            mismatches.len(),
            requests.len(),
            mismatches[..mismatches.len().min(40)].join("\n\n")
        );
    }
}

/// Every case of the semantic suite (tests/semantics, one folder per rule) decides alike in the module.
#[test]
fn semantic_suite_decides_identically_in_wasm() {
    let engine = Engine::default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/semantics");
    // Not the folders only the interpreter decides yet (support::INTERPRETER_ONLY).
    let only =
        |p: &std::path::PathBuf| support::INTERPRETER_ONLY.iter().any(|n| p.file_name().is_some_and(|f| f == *n));
    let mut folders: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir() && !only(p)).collect();
    folders.sort();
    let mut total = 0;
    for dir in folders {
        let (program, requests) = policy_folder(&dir);
        let bytes = remit_lang::wasm::compile(&program).expect("compiles to wasm");
        let mut wasm = Wasm::new(&engine, &bytes);
        for request in &requests {
            let expected = remit_lang::eval::decide(&program, request).to_json();
            assert_eq!(wasm.decide(request), expected, "{}: {}", dir.display(), String::from_utf8_lossy(request));
            let listing = remit_lang::eval::visible_tools(&program, request).to_json();
            assert_eq!(
                wasm.visible(request),
                listing,
                "{}: listing {}",
                dir.display(),
                String::from_utf8_lossy(request)
            );
            total += 1;
        }
    }
    assert!(total >= 200, "only {total} semantic cases");
}

#[test]
fn mutated_and_malformed_requests_decide_identically() {
    let engine = Engine::default();
    let rounds: usize = std::env::var("REMIT_DIFF_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(25_000);
    let mut total = 0;
    for (index, name) in ["wallet", "club", "bank-disputes", "web-publication"].iter().enumerate() {
        let (program, requests) = example(name);
        let bytes = remit_lang::wasm::compile(&program).expect("compiles to wasm");
        let mut wasm = Wasm::new(&engine, &bytes);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ index as u64);
        for round in 0..rounds {
            let base = &requests[round % requests.len()];
            let mut value: serde_json::Value = serde_json::from_slice(base).unwrap();
            for _ in 0..=rng.below(3) {
                mutate(&mut rng, &mut value, 0);
            }
            let text = value.to_string();
            let request = if rng.below(4) == 0 { damage(&mut rng, &text) } else { text.into_bytes() };
            let expected = remit_lang::eval::decide(&program, &request).to_json();
            let actual = wasm.decide(&request);
            assert_eq!(actual, expected, "{name}: request {}", String::from_utf8_lossy(&request));
            let listing = remit_lang::eval::visible_tools(&program, &request).to_json();
            assert_eq!(wasm.visible(&request), listing, "{name}: listing for {}", String::from_utf8_lossy(&request));
            total += 1;
        }
    }
    assert!(total >= 4 * rounds);
}

/// A policy with `kinds` approval kinds that each bind the target and the manifest, all gating one tool.
fn gated_policy(kinds: usize) -> Program {
    let mut text = String::from("tool put(manifest: string) {\n  side effects\n}\n");
    for k in 0..kinds {
        text.push_str(&format!("approval k{k} {{\n  binds target, manifest\n  ttl 1h\n}}\n"));
    }
    text.push_str("mandate m for \"user:p\" {\n  holder \"agent:a\"\n  allow put\n");
    for k in 0..kinds {
        text.push_str(&format!("  require approval k{k} for put\n"));
    }
    text.push_str("}\n");
    let mut sources = remit_lang::stdlib::sources();
    sources.add("gates.remit", text);
    let checked = check_with(sources, Options { narrowing: false });
    checked.program.unwrap_or_else(|| panic!("{:#?}", checked.diagnostics))
}

/// A request whose resource id and manifest are each `len` characters.
fn large_request(len: usize) -> Vec<u8> {
    let long = "x".repeat(len);
    serde_json::json!({
        "subject": {"id": "agent:a"},
        "action": {"name": "put", "arguments": {"manifest": long}},
        "resource": {"id": long},
        "context": {"mandate": "m", "now": "2026-11-30T12:00:00Z"}
    })
    .to_string()
    .into_bytes()
}

/// Issue 7, item 1: an escalation that repeats the request's strings once per missing approval (six kinds, 240 KB
/// of strings: 1.44 MB of decision) used to overflow the module's 1 MiB output area and come out as truncated JSON.
/// The output area is now sized by `eval::output_limit`, so the module writes the interpreter's bytes.
#[test]
fn a_large_escalation_fits_the_output_area() {
    let program = gated_policy(6);
    let request = large_request(120_000);
    assert!(request.len() <= 256 * 1024);
    let expected = remit_lang::eval::decide(&program, &request).to_json();
    assert!(expected.starts_with(r#"{"decision":"escalate""#), "{}", &expected[..200]);
    assert!(expected.len() > 1 << 20, "the decision is larger than the old output area: {}", expected.len());
    let bytes = remit_lang::wasm::compile(&program).expect("compiles");
    let mut wasm = Wasm::new(&Engine::default(), &bytes);
    let actual = wasm.decide(&request);
    assert_eq!(actual.len(), expected.len());
    assert!(actual == expected, "the module's decision differs from the interpreter's");
}

/// Past `MAX_OUTPUT` (80 kinds × 240 KB > 16 MiB) no area is large enough: both answer a well-formed deny with
/// its own reason, never truncated JSON; the same policy with short strings still escalates in full.
#[test]
fn a_decision_past_the_largest_output_area_is_an_oversize_deny() {
    let program = gated_policy(80);
    let bytes = remit_lang::wasm::compile(&program).expect("compiles");
    let mut wasm = Wasm::new(&Engine::default(), &bytes);
    for (len, oversize) in [(120_000, true), (1_000, false), (110_000, true), (60_000, false)] {
        let request = large_request(len);
        let expected = remit_lang::eval::decide(&program, &request).to_json();
        let parsed: serde_json::Value = serde_json::from_str(&expected).expect("valid JSON");
        let reasons = parsed["reasons"].to_string();
        assert_eq!(reasons == r#"["decision.oversize"]"#, oversize, "len {len}: {reasons}");
        if oversize {
            assert_eq!(parsed["decision"], "deny");
            assert_eq!(parsed["mandate_chain"], serde_json::json!(["m"]));
        }
        let actual = wasm.decide(&request);
        assert!(actual == expected, "len {len}: the module differs ({} vs {} bytes)", actual.len(), expected.len());
    }
}

/// Requests at the input limit: the largest accepted request and one byte more.
#[test]
fn requests_at_the_input_limit_decide_identically() {
    let program = gated_policy(2);
    let bytes = remit_lang::wasm::compile(&program).expect("compiles");
    let mut wasm = Wasm::new(&Engine::default(), &bytes);
    let fill = 256 * 1024 - large_request(0).len();
    let (fits, over) = (large_request(fill / 2), large_request(fill / 2 + 1));
    assert!(fits.len() <= 256 * 1024 && over.len() > 256 * 1024);
    for request in [fits, over] {
        let expected = remit_lang::eval::decide(&program, &request).to_json();
        assert_eq!(wasm.decide(&request), expected, "request of {} bytes", request.len());
    }
}

/// The `decide` fuzz target's inputs outside the fuzzer: every input it ever found a disagreement with
/// (fuzz/regressions/decide-*.json) and its seeds (fuzz/seeds/decide/*.json, requests for fuzz/world/policy.remit),
/// each decided and listed under both of its policies (the wallet example and fuzz/world/policy.remit) by the
/// module, the runtime natively and the interpreter, as fuzz/fuzz_targets/decide.rs does: adding a regression or a
/// seed means adding a file.
#[test]
fn fuzz_regressions_decide_identically() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (wallet, _) = example("wallet");
    let (world, _) = policy_folder(&root.join("fuzz/world"));
    let files = |dir: &str, prefix: &str| {
        let mut inputs: Vec<_> = std::fs::read_dir(root.join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        inputs.retain(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(prefix) && name.ends_with(".json")
        });
        inputs.sort();
        assert!(!inputs.is_empty(), "no inputs in {dir}");
        inputs
    };
    let inputs = [files("fuzz/regressions", "decide-"), files("fuzz/seeds/decide", "")].concat();
    let mut outcomes = std::collections::BTreeMap::new();
    for (policy, program) in [("wallet", &wallet), ("world", &world)] {
        let mut wasm = Wasm::new(&Engine::default(), &remit_lang::wasm::compile(program).expect("compiles to wasm"));
        let mut native = remit_lang::native::Native::new(program).unwrap();
        for path in &inputs {
            let request = std::fs::read(path).unwrap();
            let name = format!("{policy}: {}", path.display());
            let decision = remit_lang::eval::decide(program, &request);
            *outcomes.entry((policy, decision.outcome.as_str())).or_insert(0) += 1;
            let decision = decision.to_json();
            assert_eq!(wasm.decide(&request), decision, "{name}: decision (module)");
            assert_eq!(String::from_utf8_lossy(&native.decide(&request)), decision, "{name}: decision (native)");
            let listing = remit_lang::eval::visible_tools(program, &request).to_json();
            assert_eq!(wasm.visible(&request), listing, "{name}: listing (module)");
            assert_eq!(String::from_utf8_lossy(&native.visible_tools(&request)), listing, "{name}: listing (native)");
        }
    }
    // The seeds reach every outcome of the world's policy, not only its early denies.
    for outcome in ["allow", "deny", "escalate"] {
        assert!(outcomes.contains_key(&("world", outcome)), "no seed is a world {outcome}: {outcomes:?}");
    }
}
