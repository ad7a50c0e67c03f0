//! The decision semantics, pinned down by data: `tests/semantics/<rule>/` holds a focused policy and its policy
//! tests for each rule of docs/requests.md (see tests/semantics/README.md). Adding a case means editing a file.

use std::path::PathBuf;
use std::process::Command;

/// Folders whose cases only the interpreter decides yet (the module's runtime does not read what they test), with
/// why (tests/support's `INTERPRETER_ONLY` leaves the same out of the differential corpus). Every other folder runs
/// on every engine.
/// (None today: `grants/`, instances of templates in `context.grants`, runs on every engine since the runtime reads
/// them.)
const INTERPRETER_ONLY: &[(&str, &str)] = &[];

/// Folders whose policy `remit check` refuses on purpose, with the errors it reports (each as its code and the first
/// name its message gives: the sub-mandate or template that widens) and why. They pin down what a decision does with
/// a delegation the narrowing proof refuses: every mandate of the chain, every instance of a chain of instances,
/// still decides, so nothing is allowed that a parent refuses. `remit test` checks without the proof (docs/cli.md
/// "`remit test`"), so their cases run; `check_errors_are_the_expected_ones` holds `remit check` on every folder to
/// exactly these errors (none for a folder not listed), so a new one, or one that goes away, is seen.
const EXPECTED_CHECK_ERRORS: &[(&str, &[CheckError], &str)] = &[
    (
        "approvals",
        &[("remit::widens-parent", "shop_child")],
        "a sub-mandate without its parent's gate: the parent's gate still asks for its approval",
    ),
    ("data-scope", &[("remit::widens-parent", "docs_free")], "a sub-mandate without a scope: the parent's applies"),
    (
        "default-deny",
        &[("remit::widens-parent", "queued_child")],
        "a sub-mandate that grants what its parent does not: the parent's `otherwise` decides",
    ),
    (
        "delegation",
        &[
            ("remit::widens-parent", "hub_child"),
            ("remit::widens-parent", "hub_child_queue"),
            ("remit::widens-parent", "site_child"),
            ("remit::widens-parent", "site_grandchild"),
        ],
        "sub-mandates that grant more than their parents, or lift their prohibitions and depth: each parent still decides",
    ),
    (
        "grants",
        &[
            ("remit::template-widens", "gr_chore"),
            ("remit::template-widens", "gr_courier"),
            ("remit::template-widens", "gr_errand"),
            ("remit::template-widens", "gr_shopping"),
        ],
        "templates whose instances would widen their parents (windows, prohibitions, gates): the decisions of such \
         instances stay within the ceiling and every instance above",
    ),
    ("max-level", &[("remit::widens-parent", "drafts_child")], "a sub-mandate without a `max level`: the parent's applies"),
    (
        "prohibitions",
        &[("remit::widens-parent", "outreach_child")],
        "a sub-mandate that grants what its parent forbids: the parent's prohibition still denies",
    ),
    ("stops", &[("remit::widens-parent", "ops_child")], "a sub-mandate without its parent's gate, under stops"),
    (
        "validity",
        &[("remit::widens-parent", "season_child"), ("remit::widens-parent", "season_short")],
        "sub-mandates without a window or with one that starts before the parent's: the parent's window applies",
    ),
];

/// An error `remit check` reports: its code and the first name its message gives.
type CheckError = (&'static str, &'static str);

fn run(engine: &str, paths: &[PathBuf]) -> (usize, String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["test", "--engine", engine])
        .args(paths)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .output()
        .expect("run remit test");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let last = stdout.lines().last().unwrap_or_default();
    let (passed, failed) = last.split_once(" passed, ").expect("a tally line");
    assert_eq!(failed, "0 failed", "{stdout}");
    (passed.parse().unwrap(), stdout, out.status.success())
}

#[test]
fn decision_semantics() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/semantics");
    let mut all = Vec::new();
    let mut interpreter = Vec::new();
    for entry in std::fs::read_dir(&root).expect("tests/semantics") {
        let path = entry.expect("an entry").path();
        if !path.is_dir() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if INTERPRETER_ONLY.iter().any(|(folder, _)| *folder == name) {
            interpreter.push(path);
        } else {
            all.push(path);
        }
    }
    all.sort();
    // Every engine: the interpreter, the module's runtime natively, the built module and module v2 in wasmtime.
    let (passed, stdout, ok) = run("all", &all);
    assert!(passed >= 200, "{stdout}");
    assert!(ok);
    if !interpreter.is_empty() {
        let (_, stdout, ok) = run("interpreter", &interpreter);
        assert!(ok, "{stdout}");
    }
}

/// `remit check` (with the narrowing proof) on every folder reports exactly the errors [`EXPECTED_CHECK_ERRORS`] lists
/// for it, and none on the other folders. Checked on a fixed date (`SOURCE_DATE_EPOCH`, as tests/ui.rs), so that no
/// lint of an expiring window depends on today's.
#[test]
fn check_errors_are_the_expected_ones() {
    use std::collections::BTreeSet;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/semantics");
    let mut folders: Vec<PathBuf> =
        std::fs::read_dir(&root).expect("tests/semantics").map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    folders.sort();
    for (folder, _, why) in EXPECTED_CHECK_ERRORS {
        assert!(root.join(folder).is_dir(), "EXPECTED_CHECK_ERRORS names `{folder}`, no folder of tests/semantics");
        assert!(!why.is_empty());
    }
    for path in folders {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_remit"))
            .args(["check", "--format", "json"])
            .arg(&path)
            .env("SOURCE_DATE_EPOCH", "1793491200")
            .output()
            .expect("run remit check");
        let mut got = BTreeSet::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let d: serde_json::Value = serde_json::from_str(line).expect("a JSON diagnostic per line");
            if d["severity"] != "error" {
                continue;
            }
            let message = d["message"].as_str().unwrap_or_default();
            let first = message.split('`').nth(1).unwrap_or_default();
            got.insert((d["code"].as_str().unwrap_or_default().to_string(), first.to_string()));
        }
        let expected: BTreeSet<(String, String)> = EXPECTED_CHECK_ERRORS
            .iter()
            .filter(|(folder, _, _)| *folder == name)
            .flat_map(|(_, errors, _)| errors.iter().map(|(c, n)| (c.to_string(), n.to_string())))
            .collect();
        assert_eq!(
            got, expected,
            "`remit check tests/semantics/{name}`: errors other than EXPECTED_CHECK_ERRORS lists"
        );
        assert_eq!(out.status.success(), expected.is_empty(), "`remit check tests/semantics/{name}`'s exit status");
    }
}
