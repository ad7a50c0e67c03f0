//! UI tests: every `tests/ui/*.remit` file is checked by the `remit` binary; its first line says which
//! diagnostic code it must produce (`// expect: remit::CODE`), and a snapshot stores the source together with
//! the rendered report and the JSON diagnostics (message, help, exact underlined text).
//! Adding a test means adding a file; `cargo insta review` accepts new snapshots.

use std::path::Path;
use std::process::Command;

// `remit check` warns of mandates that expire (`remit::mandate-expiring`) at the system clock unless told when it
// checks: every check here runs on 2026-11-01T00:00:00Z (`SOURCE_DATE_EPOCH`), so no output depends on the date.
const CHECK_EPOCH: &str = "1793491200";

fn check(path: &Path) -> (String, String, bool) {
    let human = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["check", "--format", "human"])
        .arg(path)
        .env("NO_COLOR", "1")
        .env("SOURCE_DATE_EPOCH", CHECK_EPOCH)
        .output()
        .expect("run remit check");
    let json = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["check", "--format", "json"])
        .arg(path)
        .env("SOURCE_DATE_EPOCH", CHECK_EPOCH)
        .output()
        .expect("run remit check --format json");
    let rendered = String::from_utf8_lossy(&human.stderr).into_owned();
    (rendered, String::from_utf8_lossy(&json.stdout).into_owned(), human.status.success())
}

/// The JSON diagnostics, reduced to what a reader checks: code, message, each label with the text it underlines.
fn summarize(json: &str) -> String {
    let mut out = String::new();
    for line in json.lines() {
        let d: serde_json::Value = serde_json::from_str(line).expect("each line is a JSON diagnostic");
        out.push_str(&format!(
            "{} [{}] {}\n",
            d["severity"].as_str().unwrap(),
            d["code"].as_str().unwrap(),
            d["message"].as_str().unwrap()
        ));
        for label in d["labels"].as_array().unwrap() {
            out.push_str(&format!(
                "  {}:{}:{} `{}`: {}\n",
                label["file"].as_str().unwrap(),
                label["line"],
                label["column"],
                label["text"].as_str().unwrap(),
                label["message"].as_str().unwrap()
            ));
        }
        if let Some(help) = d["help"].as_str() {
            out.push_str(&format!("  help: {help}\n"));
        }
    }
    out
}

#[test]
fn ui_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "remit"))
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 25, "expected at least 25 UI fixtures, found {}", fixtures.len());
    let mut codes = std::collections::BTreeSet::new();
    for path in fixtures {
        let source = std::fs::read_to_string(&path).unwrap();
        let expected = source
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// expect: "))
            .unwrap_or_else(|| panic!("{} must start with `// expect: remit::CODE`", path.display()))
            .trim()
            .to_string();
        let (rendered, json, success) = check(&path);
        let summary = summarize(&json);
        assert!(
            summary.contains(&format!("[{expected}]")),
            "{}: expected diagnostic {expected}, got:\n{summary}",
            path.display()
        );
        let is_warning = summary.lines().all(|l| !l.starts_with("error"));
        assert_eq!(success, is_warning, "{}: exit status must be 1 exactly when there is an error", path.display());
        codes.insert(expected);
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        insta::with_settings!({ snapshot_path => "ui/snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(name, format!("{source}\n----- remit check -----\n{rendered}\n----- diagnostics -----\n{summary}"));
        });
    }
    assert!(codes.len() >= 25, "expected at least 25 distinct diagnostic codes, found {}: {codes:?}", codes.len());
}

/// Codes that no UI fixture produces, each with where it is tested instead (or why it cannot be).
const CODES_TESTED_ELSEWHERE: &[(&str, &str)] = &[
    ("remit::widens-parent", "tests/narrowing: each widen/ fixture is a widening with its witness"),
    ("remit::policy-too-large", "check/limits.rs unit tests: a module's hard limits, too large to write as a fixture"),
    (
        "remit::narrowing-internal",
        "a bug detector: the proof's witness refused by the interpreter, not reachable by a policy",
    ),
    (
        "remit::narrowing-undecided",
        "the proof's step budget running out: no policy known to reach it is small enough for a fixture",
    ),
];

/// Every diagnostic code the checker can emit has a UI fixture (or is listed above with where it is tested), so a
/// new diagnostic cannot land without its source + rendering snapshot.
#[test]
fn every_diagnostic_code_has_a_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut emitted = std::collections::BTreeSet::new();
    let mut stack = vec![root.join("crates/remit-lang/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for piece in text.split("\"remit::").skip(1) {
                    let code: String = piece.chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
                    if piece[code.len()..].starts_with('"') && !code.is_empty() {
                        emitted.insert(format!("remit::{code}"));
                    }
                }
            }
        }
    }
    assert!(emitted.len() >= 80, "expected the checker's codes, found {}: {emitted:?}", emitted.len());
    let mut fixtures = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(root.join("tests/ui")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "remit") {
            let text = std::fs::read_to_string(&path).unwrap();
            if let Some(code) = text.lines().next().and_then(|l| l.strip_prefix("// expect: ")) {
                fixtures.insert(code.trim().to_string());
            }
        }
    }
    let elsewhere: std::collections::BTreeSet<String> =
        CODES_TESTED_ELSEWHERE.iter().map(|(code, _)| code.to_string()).collect();
    let missing: Vec<&String> = emitted.iter().filter(|c| !fixtures.contains(*c) && !elsewhere.contains(*c)).collect();
    assert!(missing.is_empty(), "diagnostic codes without a UI fixture in tests/ui: {missing:?}");
    let stale: Vec<&String> = elsewhere.iter().filter(|c| !emitted.contains(*c) || fixtures.contains(*c)).collect();
    assert!(stale.is_empty(), "CODES_TESTED_ELSEWHERE lists codes that are gone or now have a fixture: {stale:?}");
}
