//! `remit tools` on a compiled module (issue 7, "Also"): `remit tools policy.wasm` runs the module's
//! `remit_visible_tools` through wasmtime and prints what `remit tools` prints from the sources, for every example
//! request (with `--json` byte for byte; the human listing too, except that only the sources know which scopes a
//! hidden tool needs).

use std::path::{Path, PathBuf};
use std::process::Command;

fn remit(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).output().unwrap();
    assert!(out.status.success(), "remit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Drops the detail only the sources have: ` (needs one of the scopes …)`.
fn without_scopes(listing: &str) -> String {
    listing.lines().map(|l| l.split(" (needs one of the scopes").next().unwrap_or(l)).collect::<Vec<_>>().join("\n")
}

#[test]
fn tools_on_a_module_lists_what_the_sources_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("remit-tools-listing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut compared = 0;
    for example in ["wallet", "web-publication", "bank-disputes", "club"] {
        let policy = root.join("examples").join(example);
        let wasm = dir.join(format!("{example}.wasm"));
        remit(&["build", policy.to_str().unwrap(), "-o", wasm.to_str().unwrap()]);
        let mut requests: Vec<PathBuf> =
            std::fs::read_dir(policy.join("requests")).unwrap().map(|e| e.unwrap().path()).collect();
        requests.sort();
        for request in requests {
            let subject = request.to_str().unwrap();
            for flags in [&["--json"][..], &[][..], &["--explain"][..]] {
                let run = |policy: &Path| {
                    let mut args = vec!["tools", policy.to_str().unwrap(), "--subject", subject];
                    args.extend(flags);
                    remit(&args)
                };
                let (from_sources, from_module) = (run(&policy), run(&wasm));
                assert!(!from_module.is_empty(), "{example} {subject} {flags:?}");
                if flags.contains(&"--explain") {
                    assert_eq!(without_scopes(&from_module), without_scopes(&from_sources), "{subject}");
                } else {
                    assert_eq!(from_module, from_sources, "{subject} {flags:?}");
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 30, "compared only {compared} listings");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Which rule explains a hidden tool does not depend on where clauses are written (issue 8, item 3): with two
/// prohibitions hiding `t`, either order of the lines names the same one (the first by mandate, then rule text),
/// from the sources and from the module alike.
#[test]
fn the_rule_that_explains_a_hidden_tool_does_not_depend_on_clause_order() {
    let dir = std::env::temp_dir().join(format!("remit-tools-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let subject = dir.join("subject.json");
    std::fs::write(&subject, r#"{"subject":{"id":"agent:a"},"context":{"mandate":"m","now":"2026-12-01T00:00:00Z"}}"#)
        .unwrap();
    let mut listings = Vec::new();
    for (name, forbids) in [("a", "  forbid t\n  forbid side effects\n"), ("b", "  forbid side effects\n  forbid t\n")]
    {
        let policy = dir.join(format!("{name}.remit"));
        let text = format!(
            "tool t(q: string) {{\n  side effects\n}}\n\nmandate m for \"org:a\" {{\n  holder \"agent:a\"\n  allow t\n{forbids}}}\n"
        );
        std::fs::write(&policy, text).unwrap();
        let wasm = dir.join(format!("{name}.wasm"));
        remit(&["build", policy.to_str().unwrap(), "-o", wasm.to_str().unwrap()]);
        for source in [&policy, &wasm] {
            let json = remit(&["tools", source.to_str().unwrap(), "--subject", subject.to_str().unwrap(), "--json"]);
            let listing: serde_json::Value = serde_json::from_str(&json).unwrap();
            let hidden = listing["hidden"].as_array().unwrap().iter().find(|h| h["tool"] == "t").cloned().unwrap();
            listings.push(hidden["rule"]["rule"].clone());
        }
    }
    assert_eq!(listings, vec![serde_json::json!("forbid side effects"); 4]);
    std::fs::remove_dir_all(&dir).unwrap();
}
