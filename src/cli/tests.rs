//! `remit test`: finds `*.tests.toml` files, checks each one's policy, runs its cases, prints the tally.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit::check::{check_with, Options};
use remit::diag::Diagnostic;
use remit::ir::Program;
use remit::testing;

use super::{load, render, Format};

pub fn run(paths: &[PathBuf], engine: testing::Engine) -> Result<ExitCode, String> {
    let roots = if paths.is_empty() { vec![PathBuf::from(".")] } else { paths.to_vec() };
    let mut files = Vec::new();
    for root in &roots {
        if root.is_file() {
            files.push(root.clone());
        } else {
            collect(root, &mut files).map_err(|e| format!("cannot read `{}`: {e}", root.display()))?;
        }
    }
    files.sort();
    // A test file names its policy files like an import: inside the folders given (or a file's folder) only.
    let confined: Vec<PathBuf> = roots
        .iter()
        .map(|r| {
            let folder = if r.is_file() { r.parent() } else { Some(r.as_path()) };
            load::canonical(folder.filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
        })
        .collect::<Result<_, _>>()?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        let parsed = match testing::parse(&text) {
            Ok(parsed) => parsed,
            Err(e) => {
                println!("FAIL {}: invalid test file: {e}", file.display());
                failed += 1;
                continue;
            }
        };
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let policy: Vec<PathBuf> = if parsed.policy.is_empty() {
            vec![dir.clone()]
        } else {
            parsed.policy.iter().map(|p| dir.join(p)).collect()
        };
        let from = load::canonical(if dir.as_os_str().is_empty() { Path::new(".") } else { &dir })?;
        if let Some(outside) = parsed.policy.iter().find(|p| load::confine(&from, p, &confined).is_none()) {
            println!("FAIL {}: policy `{outside}` leaves the folders given to `remit test`: not read", file.display());
            failed += parsed.cases.len().max(1);
            continue;
        }
        let Some(program) = compile(&policy)? else {
            println!("FAIL {}: the policy does not check ({} case(s) not run)", file.display(), parsed.cases.len());
            failed += parsed.cases.len().max(1);
            continue;
        };
        let outcomes = match testing::run_with(&program, &parsed, engine) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                println!("FAIL {}: {e} ({} case(s) not run)", file.display(), parsed.cases.len());
                failed += parsed.cases.len().max(1);
                continue;
            }
        };
        for outcome in outcomes {
            if outcome.failures.is_empty() {
                passed += 1;
            } else {
                failed += 1;
                println!("FAIL {} :: {}", file.display(), outcome.name);
                for failure in &outcome.failures {
                    println!("     {failure}");
                }
                println!("     decision: {}", outcome.decision.to_json());
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target" || n.to_string_lossy().starts_with('.')) {
                continue;
            }
            collect(&path, out)?;
        } else if path.to_string_lossy().ends_with(".tests.toml") {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads and checks a test file's policy. Decisions never depend on the narrowing proof (run time evaluates the
/// whole delegation chain), so the policy tests of a policy whose sub-mandates are wider than their parents
/// still run: that is how the defensive chain semantics itself is tested. `remit check` enforces the proof.
fn compile(policy: &[PathBuf]) -> Result<Option<Program>, String> {
    let (sources, mut diagnostics) = load::load(policy)?;
    let checked = check_with(sources.clone(), Options { narrowing: false });
    diagnostics.extend(checked.diagnostics);
    render::print(&sources, &diagnostics, Format::Human);
    Ok(if diagnostics.iter().any(Diagnostic::is_error) { None } else { checked.program })
}
