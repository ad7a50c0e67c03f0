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
