//! The shipped examples (and any policy folder): their `.remit` files as (file, text) pairs, their requests and
//! subjects, compiling them without the disk loader, and decisions without what legitimately depends on layout.
//! The one loader of the tests (tests/wasm_decide.rs still carries its own).

use std::path::{Path, PathBuf};

use remit_lang::check::check;
use remit_lang::eval::Decision;
use remit_lang::ir::Program;
use remit_lang::source::SourceMap;
use serde_json::Value;

pub const EXAMPLES: [&str; 4] = ["web-publication", "wallet", "club", "bank-disputes"];

/// A refund desk's rules with literals, and the same rules read from the world (attributes of the resource and the
/// subject, a relation): issue 30's first benchmark compares the two (tests/rt_decide.rs `world_speed`, in the
/// module; tests/gateway_data.rs, in the gateway).
pub const REFUNDS_LITERAL: &str = r#"
tool refund(order: string, amount: money)
mandate desk for "user:alice" {
  holder "agent:desk"
  allow refund where args.order == "order-1" and args.amount <= 120 EUR and args.order in ["order-1", "order-2"]
  forbid refund where args.order == "order-9"
}
"#;

pub const REFUNDS_WORLD: &str = r#"
resource order {
  owner: string
  total: money
}
subject agent {
  teams: set<string>
}
relation member_of(string, string)
tool refund(order: string, amount: money)
mandate desk for "user:alice" {
  holder "agent:desk"
  allow refund where resource.owner == principal and args.amount <= resource.total and subject.teams contains "refunds"
  forbid refund where member_of(subject, "team:suspended")
}
"#;

/// The folder of a shipped example.
pub fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)
}

/// The wallet as it was before it became a ceiling and a template (tests/fixtures/wallet-static: Alice's own static
/// mandate `wallet`): the gateway's tests use it for what they test of the gateway (approvals, stops, replays,
/// explanations) without granting an instance first; the shipped example is tested as it is elsewhere.
pub fn static_wallet() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wallet-static")
}

/// [`static_wallet`] checked.
pub fn static_wallet_program() -> Program {
    compile(&remit_files(&static_wallet()))
}

/// A folder's files, sorted; none when it does not exist.
pub fn sorted(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

/// A folder's `.remit` files, sorted, named relative to the folder as `remit build FOLDER` names them.
pub fn remit_files(dir: &Path) -> Vec<(String, String)> {
    sorted(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "remit"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(p).unwrap()))
        .collect()
}

/// The requests of a folder's policy tests (`*.tests.toml`, sorted), in order.
pub fn test_requests(dir: &Path) -> Vec<Value> {
    let mut requests = Vec::new();
    for path in sorted(dir).iter().filter(|p| p.to_string_lossy().ends_with(".tests.toml")) {
        let file = remit_lang::testing::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        requests.extend(file.cases.into_iter().map(|case| case.request));
    }
    requests
}

/// Every request of a folder as bytes: its `requests/` folder, then every test case's request (as `remit test`
/// sends it).
pub fn requests(dir: &Path) -> Vec<Vec<u8>> {
    let mut requests: Vec<Vec<u8>> = sorted(&dir.join("requests")).iter().map(|p| std::fs::read(p).unwrap()).collect();
    requests.extend(test_requests(dir).iter().map(|request| request.to_string().into_bytes()));
    requests
}

/// Subjects for tool listings: the folder's `subjects/` folder, when it has one.
pub fn subjects(dir: &Path) -> Vec<Vec<u8>> {
    sorted(&dir.join("subjects")).iter().map(|p| std::fs::read(p).unwrap()).collect()
}

pub struct Example {
    pub files: Vec<(String, String)>,
    pub requests: Vec<Value>,
}

/// An example's `.remit` files and the requests of its policy tests.
pub fn example(name: &str) -> Example {
    let dir = dir(name);
    let requests = test_requests(&dir);
    assert!(!requests.is_empty(), "{name} has policy tests");
    Example { files: remit_files(&dir), requests }
}

/// An example's program, checked as `remit build examples/NAME` checks it.
pub fn program(name: &str) -> Program {
    compile(&remit_files(&dir(name)))
}

/// Checks the files with the standard library; panics with the diagnostics when they do not check.
pub fn compile(files: &[(String, String)]) -> Program {
    let mut sources: SourceMap = remit_lang::stdlib::sources();
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
        // The closest grant an `otherwise` names has its own position.
        if let Some(closest) = rule.closest.as_mut() {
            closest.at.clear();
        }
    }
    d.to_json()
}
