//! The decision semantics, pinned down by data: `tests/semantics/<rule>/` holds a focused policy and its policy
//! tests for each rule of docs/requests.md (see tests/semantics/README.md). Adding a case means editing a file.

use std::process::Command;

#[test]
fn decision_semantics() {
    let out = Command::new(env!("CARGO_BIN_EXE_remit"))
        // Every engine: the interpreter, the module's runtime natively, the built module and module v2 in wasmtime.
        .args(["test", "--engine", "all", "tests/semantics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .output()
        .expect("run remit test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let (passed, failed) = last.split_once(" passed, ").expect("a tally line");
    assert_eq!(failed, "0 failed", "{stdout}");
    assert!(passed.parse::<usize>().unwrap() >= 200, "{stdout}");
    assert!(out.status.success());
}
