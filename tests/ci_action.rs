//! The CI action (action.yml → scripts/ci-policy.sh) on a sample repository built here from the examples: a commit
//! that narrows a mandate passes, one that widens it, one that adds a mandate and one that breaks a policy fail, each
//! with GitHub annotations naming the file in the repository.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use support::{remit_bin, root, run, temp_dir};

fn git(repo: &Path, args: &[&str]) -> String {
    let out = run(
        Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("GIT_AUTHOR_NAME", "remit tests")
            .env("GIT_AUTHOR_EMAIL", "tests@remit.invalid")
            .env("GIT_COMMITTER_NAME", "remit tests")
            .env("GIT_COMMITTER_EMAIL", "tests@remit.invalid")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null"),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// A repository with `policies/wallet` (the wallet as it was, Alice's static mandate: tests/fixtures/wallet-static)
/// and `policies/club` (the example) committed; returns it and the base commit.
fn sample_repo(name: &str) -> (PathBuf, String) {
    let repo = temp_dir(&format!("ci-{name}"));
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    copy_dir(&root().join("tests/fixtures/wallet-static"), &repo.join("policies/wallet"));
    copy_dir(&root().join("examples/club"), &repo.join("policies/club"));
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "the policies on main"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    (repo, base)
}

fn edit(repo: &Path, file: &str, from: &str, to: &str) {
    let path = repo.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "`{from}` not in {file}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

fn commit(repo: &Path, message: &str) {
    git(repo, &["add", "."]);
    git(repo, &["commit", "--quiet", "-m", message]);
}

fn ci(repo: &Path, base: &str) -> (Output, String) {
    let out = run(
        Command::new(root().join("scripts/ci-policy.sh"))
            .args(["--base", base, "policies/wallet", "./policies/club/"])
            .current_dir(repo)
            .env("REMIT", remit_bin())
            .env("NO_COLOR", "1")
            // `remit check` on 2026-11-01T00:00:00Z: no `remit::mandate-expiring` annotation depends on the date.
            .env("SOURCE_DATE_EPOCH", "1793491200")
            .env_remove("GITHUB_ACTIONS"),
        Duration::from_secs(300),
    );
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out, text)
}

fn fmt_available() -> bool {
    Command::new(remit_bin()).args(["fmt", "--help"]).output().is_ok_and(|o| o.status.success())
}

fn assert_fmt_step(text: &str) {
    if fmt_available() {
        assert!(text.contains("  fmt: passed"), "{text}");
    } else {
        assert!(text.contains("skipped: this remit has no `remit fmt` command"), "{text}");
        assert!(text.contains("  fmt: skipped"), "{text}");
    }
}

#[test]
fn a_commit_that_narrows_a_mandate_passes() {
    let (repo, base) = sample_repo("narrow");
    edit(&repo, "policies/wallet/policy.remit", "until 2027-01-01T00:00:00Z", "until 2026-12-31T00:00:00Z");
    commit(&repo, "the wallet mandate ends a day earlier");
    let (out, text) = ci(&repo, &base);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for line in ["  check: passed", "  test: passed", "  diff: passed", "ci-policy: passed"] {
        assert!(text.contains(line), "`{line}` missing:\n{text}");
    }
    assert!(
        text.contains(
            "::notice file=policies/wallet/policy.remit,line=6,col=9,title=remit diff::mandate `wallet` narrowed"
        ),
        "{text}"
    );
    assert_fmt_step(&text);
    std::fs::remove_dir_all(repo).ok();
}

#[test]
fn a_commit_that_widens_a_mandate_fails_in_the_diff_with_its_witness() {
    let (repo, base) = sample_repo("widen");
    edit(&repo, "policies/wallet/policy.remit", "args.amount <= 100 USD", "args.amount <= 110 USD");
    commit(&repo, "a higher cap per payment");
    let (out, text) = ci(&repo, &base);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for line in
        ["  check: passed", "  test: passed", "  diff: failed (authority widened against ", "ci-policy: failed: diff"]
    {
        assert!(text.contains(line), "`{line}` missing:\n{text}");
    }
    assert!(
        text.contains(
            "::error file=policies/wallet/policy.remit,line=6,col=9,title=remit diff::mandate `wallet` widened"
        ),
        "{text}"
    );
    assert!(text.contains(r#""amount":"110 USD""#), "the witness request: {text}");
    assert_fmt_step(&text);
    std::fs::remove_dir_all(repo).ok();
}

#[test]
fn a_new_mandate_and_a_broken_policy_fail() {
    let (repo, base) = sample_repo("break");
    std::fs::write(
        repo.join("policies/club/extra.remit"),
        "mandate side_door for \"user:club\" {\n  holder \"agent:helper\"\n  allow no_such_tool\n}\n",
    )
    .unwrap();
    commit(&repo, "a mandate with a typo");
    let (out, text) = ci(&repo, &base);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("::error file=policies/club/extra.remit,line=3,col=9,"), "{text}");
    assert!(text.contains("  check: failed"), "{text}");

    // Fixed: it checks, and the diff still fails because the new mandate is new authority.
    edit(&repo, "policies/club/extra.remit", "allow no_such_tool", "allow read_only");
    commit(&repo, "a new mandate");
    let (out, text) = ci(&repo, &base);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("  check: passed") && text.contains("  diff: failed"), "{text}");
    assert!(text.contains("mandate `side_door` added"), "{text}");
    std::fs::remove_dir_all(repo).ok();
}

#[test]
fn the_script_refuses_an_unknown_base_and_the_action_runs_the_script() {
    let (repo, _) = sample_repo("base");
    let (out, text) = ci(&repo, "no-such-ref");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("the base `no-such-ref` is not a commit"), "{text}");
    std::fs::remove_dir_all(repo).ok();

    let action = std::fs::read_to_string(root().join("action.yml")).unwrap();
    assert!(action.contains("using: composite"));
    assert!(action.contains(r#""$GITHUB_ACTION_PATH/scripts/ci-policy.sh" ${BASE:+--base "$BASE"} $POLICY_PATHS"#));
}
