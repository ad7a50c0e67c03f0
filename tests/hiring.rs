//! What a new user tripped on while writing a hiring-assistant policy from the docs (issue 28, item 4), each
//! run through the `remit` binary: `remit explain` on a deny with an unmet gate, `remit diff` of a version that
//! changes two clauses, a policy written against the previous standard library, and `remit test` / `remit check`
//! in CI (`--filter`, `--junit`, every failing case, unknown keys, `--deny-warnings`). The policies are in
//! tests/hiring/: `v1` and `v2` (a requisition added and the salary cap raised), `previous_library`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};
use support::{examples, remit_bin, root, run, temp_dir};

fn remit(args: &[&str]) -> Output {
    run(Command::new(remit_bin()).args(args).current_dir(root()).env("NO_COLOR", "1"), Duration::from_secs(120))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn hiring(version: &str) -> String {
    format!("tests/hiring/{version}")
}

/// An offer on `REQ-1` at `salary`, with the approvals given.
fn offer(salary: &str, approvals: Value) -> Value {
    json!({
        "subject": { "id": "agent:recruiter" },
        "action": { "name": "make_offer", "arguments": { "candidate": "ada", "requisition": "REQ-1", "salary": salary } },
        "context": { "mandate": "hiring", "now": "2026-12-10T09:00:00Z", "approvals": approvals }
    })
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The explanation's line for the gate and the line under it (what the gate did).
fn gate_lines(explanation: &str) -> (String, String) {
    let lines: Vec<&str> = explanation.lines().collect();
    let at = lines.iter().position(|l| l.contains("require approval offer_signoff")).expect(explanation);
    (lines[at].to_string(), lines[at + 1].to_string())
}

#[test]
fn explain_does_not_call_an_unmet_gate_satisfied_on_a_deny() {
    let dir = temp_dir("hiring-explain");
    // Above the band: the limit denies, and the gate (above 60000 EUR) has no approval.
    let request = write(&dir, "above.json", &offer("120000 EUR", json!([])).to_string());
    let out = remit(&["explain", &hiring("v1"), "--request", request.to_str().unwrap()]);
    let explanation = text(&out);
    assert!(explanation.starts_with("decision DENY"), "{explanation}");
    let (gate, effect) = gate_lines(&explanation);
    assert!(gate.trim_start().starts_with("? "), "an unmet gate is not marked passed: {gate}\n{explanation}");
    assert!(
        effect.contains("applies; no presented approval satisfies it (no `offer_signoff` approval was presented)")
            && effect.contains("the call is denied anyway, so no approval is asked for")
            && !effect.contains("satisfied ("),
        "{effect}"
    );
    let html = text(&remit(&["explain", &hiring("v1"), "--request", request.to_str().unwrap(), "--format", "html"]));
    assert!(html.contains("step escalated") && html.contains("the call is denied anyway"), "{html}");

    // With the hiring lead's approval of exactly this offer, the gate is satisfied though the limit still denies.
    let arguments = offer("120000 EUR", json!([]))["action"]["arguments"].clone();
    let digest = remit_lang::eval::argument_digest("make_offer", &arguments);
    let approval = json!([{
        "id": "apr-1", "kind": "offer_signoff", "mandate": "hiring", "digest": digest,
        "issued_at": "2026-12-10T08:00:00Z", "expires_at": "2026-12-10T18:00:00Z", "approved_by": "user:hiring-lead"
    }]);
    let request = write(&dir, "approved.json", &offer("120000 EUR", approval).to_string());
    let explanation = text(&remit(&["explain", &hiring("v1"), "--request", request.to_str().unwrap()]));
    assert!(explanation.starts_with("decision DENY"), "{explanation}");
    let (gate, effect) = gate_lines(&explanation);
    assert!(gate.trim_start().starts_with("✓ "), "{gate}");
    assert!(effect.contains("applies; satisfied (presented `offer_signoff` approvals: apr-1)"), "{effect}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn diff_shows_every_changed_clause_with_its_witness() {
    // v2 adds the requisition REQ-3 and raises the cap from 95000 to 100000 EUR: two clauses, two witnesses.
    let out = remit(&["diff", &hiring("v1"), &hiring("v2"), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mandate = &report["mandates"][0];
    assert_eq!(mandate["status"], "widened", "{report:#}");
    let widened = mandate["widened"].as_array().unwrap();
    let reasons: Vec<&str> = widened.iter().map(|e| e["reason"].as_str().unwrap()).collect();
    assert_eq!(widened.len(), 2, "{reasons:?}");
    assert!(reasons[0].starts_with("not granted by `hiring` for `make_offer`"), "{reasons:?}");
    assert!(
        reasons[1].starts_with("refused by `limit make_offer: args.salary <= 95000 EUR` of `hiring`"),
        "{reasons:?}"
    );
    // Each witness differs from what v1 allows in its clause only.
    let args = |e: &Value| e["witness"]["action"]["arguments"].clone();
    assert_eq!(args(&widened[0])["requisition"], "REQ-3", "{:#}", widened[0]);
    let salary = |e: &Value| args(e)["salary"].as_str().unwrap().trim_end_matches(" EUR").parse::<f64>().unwrap();
    assert!(salary(&widened[0]) <= 95000.0, "{:#}", widened[0]);
    assert!(["REQ-1", "REQ-2"].contains(&args(&widened[1])["requisition"].as_str().unwrap()), "{:#}", widened[1]);
    assert!(salary(&widened[1]) > 95000.0 && salary(&widened[1]) <= 100000.0, "{:#}", widened[1]);
    for example in widened {
        let bytes = example["witness"].to_string();
        let decide = |version: &str| {
            let program = examples::compile(&examples::remit_files(&root().join(hiring(version))));
            remit_lang::eval::decide(&program, bytes.as_bytes()).outcome.as_str()
        };
        assert_ne!(decide("v1"), "allow", "{bytes}");
        assert_eq!(decide("v2"), "allow", "{bytes}");
    }

    // The text and the HTML show both, and the other direction narrows on both clauses.
    let human = text(&remit(&["diff", &hiring("v1"), &hiring("v2")]));
    assert_eq!(human.matches("now allowed; before,").count(), 2, "{human}");
    let html = text(&remit(&["diff", &hiring("v1"), &hiring("v2"), "--format", "html"]));
    assert!(html.contains("not granted by `hiring`") && html.contains("args.salary &lt;= 95000 EUR"), "{html}");
    let back = remit(&["diff", &hiring("v2"), &hiring("v1"), "--format", "json"]);
    let back: Value = serde_json::from_slice(&back.stdout).unwrap();
    assert_eq!(back["mandates"][0]["status"], "narrowed");
    assert_eq!(back["mandates"][0]["narrowed"].as_array().unwrap().len(), 2, "{back:#}");
}

#[test]
fn a_policy_written_against_the_previous_library_keeps_checking_and_deciding() {
    // It defines `external_notification` itself, which the standard library has added since.
    let policy = hiring("previous_library");
    let out = remit(&["check", &policy]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("remit::shadows-library") && shown.contains("0 error(s), 1 warning(s)"), "{shown}");
    assert!(
        shown.contains("effect class `external_notification` shadows the standard library's `external_notification`"),
        "{shown}"
    );
    // Its tests are the decisions it made with that library: `social_post` is not in its own class.
    let out = remit(&["test", &policy]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("2 passed, 0 failed"), "{}", text(&out));
    // CI that wants no warnings at all says so.
    let out = remit(&["check", "--deny-warnings", &policy]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(remit(&["check", "--deny-warnings", &hiring("v1")]).status.code(), Some(0));
}

const CASES: &str = r#"
policy = ["hiring.remit"]

[defaults.request]
subject = { id = "agent:recruiter" }
action = { name = "make_offer", arguments = { candidate = "ada", requisition = "REQ-1", salary = "50000 EUR" } }
context = { mandate = "hiring", now = "2026-12-10T09:00:00Z" }

[[case]]
name = "an offer in the band is allowed"
expect = "allow"
obligations = []

[[case]]
name = "above the band <is> denied & \"escalated\""
expect = "escalate"
[case.request.action.arguments]
salary = "120000 EUR"

[[case]]
name = "a misspelt key is refused by name"
expect = "allow"
reason = ["rule.allowed"]

[[case]]
name = "a case without expect"
reasons = ["rule.allowed"]

[[case]]
name = "an unknown requisition escalates"
expect = "deny"
[case.request.action.arguments]
requisition = "REQ-9"
"#;

/// A folder with the v1 policy and the cases above; `name` keeps the tests that run at once apart.
fn suite(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    std::fs::copy(root().join("tests/hiring/v1/hiring.remit"), dir.join("hiring.remit")).unwrap();
    write(&dir, "offers.tests.toml", CASES);
    dir
}

#[test]
fn remit_test_reports_every_failing_case_and_refuses_unknown_keys() {
    let dir = suite("hiring-failing");
    let out = remit(&["test", dir.to_str().unwrap()]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    // One bad case does not stop its file: the four failing cases are all reported, the good one passes.
    assert!(shown.contains("1 passed, 4 failed"), "{shown}");
    assert!(
        shown.contains(":: above the band <is> denied & \"escalated\"\n     expected `escalate`, got `deny`"),
        "{shown}"
    );
    assert!(
        shown.contains(":: a misspelt key is refused by name\n     invalid case: unknown key `reason` in a case; did you mean `reasons`?"),
        "{shown}"
    );
    assert!(shown.contains(":: a case without expect\n     invalid case: missing `expect`"), "{shown}");
    assert!(shown.contains(":: an unknown requisition escalates\n     expected `deny`, got `escalate`"), "{shown}");
    // An unknown key of the file itself makes the file invalid, by name.
    write(&dir, "offers.tests.toml", &CASES.replace("[defaults.request]", "[default.request]"));
    let shown = text(&remit(&["test", dir.to_str().unwrap()]));
    assert!(
        shown.contains("invalid test file: unknown key `default` in the test file; did you mean `defaults`?"),
        "{shown}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn remit_test_filters_cases_by_name_or_file() {
    let dir = suite("hiring-filter");
    let out = remit(&["test", dir.to_str().unwrap(), "--filter", "in the band"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("1 passed, 0 failed, 4 filtered out"), "{}", text(&out));
    let out = remit(&["test", dir.to_str().unwrap(), "--filter", "requisition"]);
    assert!(text(&out).contains("0 passed, 1 failed, 4 filtered out"), "{}", text(&out));
    // A pattern in the file's path selects all its cases.
    let out = remit(&["test", dir.to_str().unwrap(), "--filter", "offers.tests"]);
    assert!(text(&out).contains("1 passed, 4 failed, 0 filtered out"), "{}", text(&out));
    let out = remit(&["test", dir.to_str().unwrap(), "--filter", "nothing matches this"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("0 passed, 0 failed, 5 filtered out"), "{}", text(&out));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn remit_test_writes_junit_xml_that_parses() {
    let dir = suite("hiring-junit");
    let xml = dir.join("junit.xml");
    let out = remit(&["test", dir.to_str().unwrap(), "--junit", xml.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // Read back by a real XML parser (Python's), as CI would.
    let script = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
print(json.dumps({
  "root": [root.tag, root.get("tests"), root.get("failures")],
  "suites": [[s.get("name").rsplit("/", 1)[-1], s.get("tests"), s.get("failures"),
              [[c.get("name"), [f.get("message") for f in c.findall("failure")],
                [f.text for f in c.findall("failure")]] for c in s.findall("testcase")]] for s in root.findall("testsuite")],
}))
"#;
    let parsed = run(Command::new("python3").args(["-c", script, xml.to_str().unwrap()]), Duration::from_secs(60));
    assert!(parsed.status.success(), "{}", text(&parsed));
    let parsed: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(parsed["root"], json!(["testsuites", "5", "4"]));
    let suite = &parsed["suites"][0];
    assert_eq!((&suite[0], &suite[1], &suite[2]), (&json!("offers.tests.toml"), &json!("5"), &json!("4")));
    let cases = suite[3].as_array().unwrap();
    assert_eq!(cases[0], json!(["an offer in the band is allowed", [], []]));
    assert_eq!(cases[1][0], "above the band <is> denied & \"escalated\"");
    assert_eq!(cases[1][1], json!(["expected `escalate`, got `deny`"]));
    assert!(cases[1][2][0].as_str().unwrap().contains("decision: {\"decision\":\"deny\""), "{:#}", cases[1]);
    assert_eq!(cases[2][1][0], "invalid case: unknown key `reason` in a case; did you mean `reasons`?");
    std::fs::remove_dir_all(dir).ok();
}
