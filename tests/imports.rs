//! Import confinement (issue 7, item 3): imports stay inside the policy root — the folders given on the command
//! line and the folders of the files given. Absolute paths, `..` above the root and symlinks out of it are refused
//! with `remit::import-outside-root`, the same diagnostic whether or not the target exists, and no diagnostic ever
//! shows the content of a file outside the root.

use std::path::{Path, PathBuf};
use std::process::Command;

const SECRET: &str = "SECRET_TOKEN=do-not-print-me";

/// A fresh folder holding `outside/` (a secret file) and `root/` (the policy root).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-imports-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("outside")).unwrap();
    std::fs::create_dir_all(dir.join("root/sub")).unwrap();
    std::fs::write(dir.join("outside/secret.remit"), format!("{SECRET}\n")).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// `remit check --format json ARGS`: (exit code, stdout, stderr).
fn check(args: &[&Path]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_remit")).args(["check", "--format", "json"]).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn messages(json: &str) -> Vec<(String, String)> {
    json.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|d| (d["code"].as_str().unwrap().to_string(), d["message"].as_str().unwrap().to_string()))
        .collect()
}

const MANDATE: &str = "mandate m for \"org:acme\" {\n  holder \"agent:a\"\n  purpose \"p\"\n  allow read_file\n}\n";

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_root_are_refused_alike_whether_or_not_the_target_exists() {
    let dir = scratch("symlink");
    let root = dir.join("root");
    std::os::unix::fs::symlink(dir.join("outside/secret.remit"), root.join("leak.remit.link")).unwrap();
    std::os::unix::fs::symlink(dir.join("outside/missing.remit"), root.join("gone.remit.link")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("out")).unwrap();
    let imports = ["leak.remit.link", "gone.remit.link", "out/secret.remit", "out/missing.remit"];
    let text: String = imports.iter().map(|i| format!("import \"{i}\"\n")).collect();
    write(&root.join("policy.remit"), &format!("{text}{MANDATE}"));
    let (code, stdout, stderr) = check(&[&root.join("policy.remit")]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(!stdout.contains("SECRET") && !stderr.contains("SECRET"), "{stdout}{stderr}");
    let expected: Vec<_> = imports
        .iter()
        .map(|i| ("remit::import-outside-root".to_string(), format!("import `{i}` leaves the policy root")))
        .collect();
    assert_eq!(messages(&stdout), expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_symlink_out_of_a_folder_given_is_not_read() {
    let dir = scratch("folder");
    let root = dir.join("root");
    std::os::unix::fs::symlink(dir.join("outside/secret.remit"), root.join("sub/leak.remit")).unwrap();
    write(&root.join("policy.remit"), MANDATE);
    let (code, stdout, stderr) = check(&[&root]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("leads outside the policy root"), "{stderr}");
    assert!(!stdout.contains("SECRET") && !stderr.contains("SECRET"), "{stdout}{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn imports_inside_the_root_still_work_with_dotdot_and_symlinks() {
    let dir = scratch("inside");
    let root = dir.join("root");
    write(&root.join("catalog.remit"), "tool open_ticket(subject: string)\n");
    write(&root.join("sub/policy.remit"), &format!("import \"../sub/../catalog.remit\"\n{MANDATE}"));
    std::os::unix::fs::symlink("../catalog.remit", root.join("sub/cat.link")).unwrap();
    write(&root.join("sub/other.remit"), "import \"cat.link\"\n");
    let (code, stdout, stderr) = check(&[&root]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    // A file given by itself has its own folder as root: `..` above it is refused.
    let (code, stdout, _) = check(&[&root.join("sub/policy.remit")]);
    assert_eq!(code, 1);
    assert_eq!(messages(&stdout)[0].0, "remit::import-outside-root");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A policy test file names its policy files like imports: `remit test` does not read one outside the folders it
/// was given.
#[test]
fn remit_test_does_not_read_a_policy_outside_the_folder_given() {
    let dir = scratch("tests-toml");
    let root = dir.join("root");
    for policy in ["../outside/secret.remit", "/etc/passwd", "sub/../../outside/secret.remit"] {
        let case = "[[case]]\nname = \"x\"\nrequest = {}\nexpect = \"deny\"\n";
        write(&root.join("sub/a.tests.toml"), &format!("policy = [{policy:?}]\n{case}"));
        let out = Command::new(env!("CARGO_BIN_EXE_remit")).arg("test").arg(root.join("sub")).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(stdout.contains(&format!("policy `{policy}` leaves the folders given")), "{stdout}");
        assert!(
            !stdout.contains("SECRET") && !stderr.contains("SECRET") && !stderr.contains("root:"),
            "{stdout}{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Only policy files are read: an import of another file inside the root — named directly or through a symlink
/// whose own name ends in `.remit` — is refused before anything is read, so none of its text is printed.
#[cfg(unix)]
#[test]
fn imports_of_files_that_are_not_policies_are_refused() {
    let dir = scratch("not-remit");
    let root = dir.join("root");
    write(&root.join("notes.txt"), "SECRET token\n");
    std::os::unix::fs::symlink("notes.txt", root.join("disguised.remit")).unwrap();
    write(&root.join("policy.remit"), &format!("import \"notes.txt\"\nimport \"disguised.remit\"\n{MANDATE}"));
    let (code, stdout, stderr) = check(&[&root.join("policy.remit")]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(!stdout.contains("SECRET") && !stderr.contains("SECRET"), "{stdout}{stderr}");
    let expected: Vec<_> = ["notes.txt", "disguised.remit"]
        .iter()
        .map(|i| ("remit::import-not-remit".to_string(), format!("import `{i}` is not a `.remit` file")))
        .collect();
    assert_eq!(messages(&stdout), expected);
    std::fs::remove_dir_all(&dir).unwrap();
}
