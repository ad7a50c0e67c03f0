//! The VS Code package (editors/vscode): its TextMate grammar tokenized by a real TextMate engine (vscode-textmate on
//! vscode-oniguruma, pinned in editors/vscode/package-lock.json) on every example and stdlib file, against the
//! committed token snapshots (`REMIT_BLESS=1` rewrites them), and the extension's LSP client wiring compiled against
//! the pinned VS Code API. Dependencies: `scripts/test-deps-hosts.sh`.

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::{installed, root, run, temp_dir};

const SNAPSHOTS: &str = "editors/vscode/test/snapshots";

fn remit_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["examples", "stdlib"] {
        let mut stack = vec![root().join(dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "remit") {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    files
}

fn tokenize(out: &std::path::Path, files: &[PathBuf]) -> std::process::Output {
    installed("editors/vscode/node_modules/vscode-textmate");
    let mut command = Command::new("node");
    command.arg(root().join("editors/vscode/test/tokenize.mjs")).arg(out).args(files);
    run(&mut command, Duration::from_secs(120))
}

#[test]
fn the_grammar_tokenizes_every_example_as_the_committed_snapshots() {
    let out = temp_dir("editor-tokens");
    let files = remit_files();
    assert!(files.len() >= 12, "{files:?}");
    let result = tokenize(&out, &files);
    assert!(result.status.success(), "the grammar leaves problems:\n{}", String::from_utf8_lossy(&result.stderr));
    let committed = root().join(SNAPSHOTS);
    let bless = std::env::var_os("REMIT_BLESS").is_some();
    let mut produced = BTreeSet::new();
    let mut differ = Vec::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let new = std::fs::read_to_string(&path).unwrap();
        let snapshot = committed.join(&name);
        if bless {
            std::fs::create_dir_all(&committed).unwrap();
            std::fs::write(&snapshot, &new).unwrap();
        } else if std::fs::read_to_string(&snapshot).ok().as_deref() != Some(new.as_str()) {
            differ.push(name.clone());
        }
        produced.insert(name);
    }
    assert_eq!(produced.len(), files.len());
    let stale: Vec<String> = std::fs::read_dir(&committed)
        .map(|entries| entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let stale: Vec<&String> = stale.iter().filter(|name| !produced.contains(*name)).collect();
    if bless {
        for name in &stale {
            std::fs::remove_file(committed.join(name)).unwrap();
        }
    } else {
        assert!(stale.is_empty(), "snapshots of files that are gone: {stale:?} (REMIT_BLESS=1 removes them)");
    }
    assert!(
        differ.is_empty(),
        "token snapshots differ for {differ:?}: compare {} with {SNAPSHOTS}; REMIT_BLESS=1 rewrites them",
        out.display()
    );
    std::fs::remove_dir_all(out).ok();
}

#[test]
fn the_tokenizer_check_catches_what_the_grammar_gets_wrong_and_passes_the_semantics_policies() {
    // A string with an invalid escape must come out scoped `invalid.*`, and the check must refuse it.
    let dir = temp_dir("editor-bad");
    let bad = dir.join("bad.remit");
    std::fs::write(&bad, "mandate m for \"p\\q\" {\n  holder \"a\"\n}\n").unwrap();
    let result = tokenize(&dir.join("out"), std::slice::from_ref(&bad));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("bad.remit:1:17: \"\\\\q\" is scoped invalid"), "{stderr}");

    // And it passes the policies of tests/semantics (no snapshots: they are test data, not examples).
    let mut semantics: Vec<PathBuf> = std::fs::read_dir(root().join("tests/semantics"))
        .unwrap()
        .filter_map(|e| {
            let dir = e.unwrap().path();
            dir.is_dir().then_some(dir)
        })
        .flat_map(|dir| std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "remit"))
        .collect();
    semantics.sort();
    assert!(semantics.len() >= 16);
    let result = tokenize(&dir.join("semantics"), &semantics);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_extension_compiles_against_the_vscode_api_and_runs_remit_lsp_over_stdio() {
    let vscode = root().join("editors/vscode");
    let tsc = installed("editors/vscode/node_modules/typescript/bin/tsc");
    let out = run(Command::new("node").arg(tsc).arg("-p").arg(&vscode), Duration::from_secs(120));
    assert!(out.status.success(), "tsc: {}", String::from_utf8_lossy(&out.stdout));
    // The client spawns exactly `remit lsp` (or the configured binary) on stdio.
    let script = r#"const { serverCommand } = require("./out/server.js");
        console.log(JSON.stringify([serverCommand({}), serverCommand({ path: " /opt/remit ", extraArgs: ["-v"] })]));"#;
    let out = run(Command::new("node").args(["-e", script]).current_dir(&vscode), Duration::from_secs(30));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"[{"command":"remit","args":["lsp"]},{"command":"/opt/remit","args":["lsp","-v"]}]"#
    );
    let extension = std::fs::read_to_string(vscode.join("out/extension.js")).unwrap();
    assert!(extension.contains("TransportKind.stdio"), "the client talks to the server over stdio");

    // package.json points at files that exist and parse.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(vscode.join("package.json")).unwrap()).unwrap();
    assert!(vscode.join(manifest["main"].as_str().unwrap()).exists());
    let language = &manifest["contributes"]["languages"][0];
    assert_eq!(language["extensions"], serde_json::json!([".remit"]));
    let configuration: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(vscode.join(language["configuration"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    assert_eq!(configuration["comments"]["lineComment"], "//");
    let grammar = &manifest["contributes"]["grammars"][0];
    let tm: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(vscode.join(grammar["path"].as_str().unwrap())).unwrap())
            .unwrap();
    assert_eq!(tm["scopeName"], grammar["scopeName"]);
}
