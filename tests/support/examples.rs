//! The shipped examples as (file, text) pairs with their test-case requests, compiling them without the disk
//! loader, and decisions without what legitimately depends on layout.

use std::path::Path;

use remit::check::check;
use remit::eval::Decision;
use remit::ir::Program;
use remit::source::SourceMap;
use serde_json::Value;

pub const EXAMPLES: [&str; 4] = ["web-publication", "wallet", "club", "bank-disputes"];

pub struct Example {
    pub files: Vec<(String, String)>,
    pub requests: Vec<Value>,
}

/// An example's `.remit` files and the requests of its policy tests.
pub fn example(name: &str) -> Example {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name);
    let mut files = Vec::new();
    let mut requests = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".remit") {
            files.push((name, std::fs::read_to_string(&path).unwrap()));
        } else if name.ends_with(".tests.toml") {
            let parsed = remit::testing::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
            requests.extend(parsed.cases.into_iter().map(|c| c.request));
        }
    }
    assert!(!requests.is_empty(), "{name} has policy tests");
    Example { files, requests }
}

/// Checks the files with the standard library; panics with the diagnostics when they do not check.
pub fn compile(files: &[(String, String)]) -> Program {
    let mut sources: SourceMap = remit::stdlib::sources();
    for (name, text) in files {
        sources.add(name.clone(), text.clone());
    }
    let checked = check(sources);
    checked.program.unwrap_or_else(|| panic!("does not check: {:#?}", checked.diagnostics))
}

/// A decision without source positions and the policy hash (both depend on the text's layout).
pub fn semantic(decision: &Decision) -> String {
    let mut d = decision.clone();
    d.policy.clear();
    for rule in &mut d.rules {
        rule.at.clear();
    }
    d.to_json()
}
