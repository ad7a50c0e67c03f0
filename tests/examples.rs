//! The shipped examples: every one checks clean, their policy tests pass (at least 40 cases), `remit tools`
//! lists exactly each club lane's tools, `remit eval` prints decisions for the shipped requests, and the decisions
//! docs/requests.md shows are the ones it prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn remit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        // `remit check` warns of mandates that expire at the system clock unless told when it checks: here on
        // 2026-11-01T00:00:00Z, when every example's mandates are valid for more than 30 days.
        .env("SOURCE_DATE_EPOCH", "1793491200")
        .output()
        .expect("run remit")
}

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    out.sort();
    out
}

#[test]
fn every_example_checks_clean() {
    let examples = examples();
    assert_eq!(examples.len(), 5, "the four scenarios of the language issue and retail-support (the world)");
    for example in examples {
        let out = remit(&["check", example.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}:\n{stderr}", example.display());
        assert!(stderr.contains("0 error(s), 0 warning(s)"), "{}:\n{stderr}", example.display());
    }
}

#[test]
fn example_policy_tests_pass() {
    // Every engine: the interpreter, the module's runtime natively, the built module and module v2 in wasmtime.
    let out = remit(&["test", "--engine", "all", "examples"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let (passed, failed) = last.split_once(" passed, ").expect("a tally line");
    let passed: usize = passed.parse().unwrap();
    assert_eq!(failed, "0 failed", "{stdout}");
    assert!(passed >= 40, "{stdout}");
    assert!(out.status.success());
}

#[test]
fn club_lanes_list_exactly_their_tools() {
    let expected = std::fs::read_to_string("examples/club/lanes.expected")
        .or_else(|_| {
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/club/lanes.expected"))
        })
        .unwrap();
    let mut lanes = 0;
    for line in expected.lines().filter(|l| !l.trim().is_empty()) {
        let (lane, tools) = line.split_once(':').unwrap();
        let subject = format!("examples/club/subjects/{lane}.json");
        let out = remit(&["tools", "examples/club", "--subject", &subject]);
        assert!(out.status.success());
        let listed: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
        let wanted: Vec<String> = tools.split(',').map(|t| t.trim().to_string()).collect();
        assert_eq!(listed, wanted, "lane `{lane}`");
        lanes += 1;
    }
    assert_eq!(lanes, 3);
}

#[test]
fn tools_explain_names_what_hides_each_tool() {
    let out = remit(&["tools", "examples/club", "--subject", "examples/club/subjects/member.json", "--explain"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let hidden = stdout.lines().find(|l| l.starts_with("hidden export_roster:")).expect("the 15th tool is hidden");
    assert!(hidden.contains("rule.forbidden") || hidden.contains("credential.scope-missing"), "{hidden}");
}

/// docs/requests.md shows decisions of the examples: each block after a line `<!-- remit eval ARGS -->` is what
/// `remit eval ARGS` prints (pretty-printed), or with `(one of its rules)` after ARGS one of its `rules`. In the
/// shown JSON a string may elide text with `…` (`"sha256:…"`); every other key and value is the output's.
#[test]
fn the_decisions_requests_md_shows_are_what_remit_eval_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/requests.md")).unwrap();
    let mut lines = page.lines();
    let mut shown = 0;
    while let Some(line) = lines.next() {
        let Some(command) = line.strip_prefix("<!-- remit eval ").and_then(|l| l.strip_suffix(" -->")) else {
            continue;
        };
        let (args, one_rule) = match command.strip_suffix(" (one of its rules)") {
            Some(args) => (args, true),
            None => (command, false),
        };
        assert_eq!(lines.next(), Some("```json"), "a JSON block right after `{line}`");
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let expected: serde_json::Value =
            serde_json::from_str(&block.join("\n")).unwrap_or_else(|e| panic!("the block after `{line}`: {e}"));
        let mut argv = vec!["eval"];
        argv.extend(args.split_whitespace());
        let out = remit(&argv);
        assert!(out.status.success(), "remit {argv:?}: {}", String::from_utf8_lossy(&out.stderr));
        let decision: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a decision");
        let candidates: Vec<&serde_json::Value> =
            if one_rule { decision["rules"].as_array().expect("rules").iter().collect() } else { vec![&decision] };
        assert!(
            candidates.iter().any(|actual| shows(&expected, actual)),
            "docs/requests.md shows after `{line}`:\n{expected:#}\nbut `remit {}` prints:\n{decision:#}",
            argv.join(" ")
        );
        shown += 1;
    }
    assert!(shown >= 2, "docs/requests.md shows {shown} decisions checked here");
}

/// Whether the JSON a page shows is `actual`, but for text elided with `…` inside strings.
fn shows(shown: &serde_json::Value, actual: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (shown, actual) {
        (Value::String(pattern), Value::String(text)) => {
            let parts: Vec<&str> = pattern.split('…').collect();
            let (first, last) = (parts[0], parts[parts.len() - 1]);
            if parts.len() == 1 {
                return pattern == text;
            }
            if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
                return false;
            }
            let mut rest = &text[first.len()..text.len() - last.len()];
            for part in &parts[1..parts.len() - 1] {
                match rest.find(part) {
                    Some(at) => rest = &rest[at + part.len()..],
                    None => return false,
                }
            }
            true
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| shows(x, y)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| shows(v, w)))
        }
        _ => shown == actual,
    }
}
