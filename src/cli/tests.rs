//! `remit test`: finds `*.tests.toml` files, checks each one's policy, runs its cases, prints the tally.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit_lang::check::{check_with, Options};
use remit_lang::diag::Diagnostic;
use remit_lang::ir::Program;
use remit_lang::testing;

use super::{load, render, Format};

/// What `remit test` was asked besides the paths.
pub struct TestOptions {
    pub engine: testing::Engine,
    /// Run only the cases whose name, or whose file's path, contains this text (as `cargo test NAME`).
    pub filter: Option<String>,
    /// Also write the results as JUnit XML to this file (for CI).
    pub junit: Option<PathBuf>,
}

/// One test file's results, for the JUnit report: each case's name and its failures (none: it passed).
struct Suite {
    file: String,
    cases: Vec<(String, Vec<String>)>,
}

impl Suite {
    /// Every case of the file failed with `why` (the policy does not check, …); one entry when there is no case.
    fn all_failed(file: &Path, cases: &[testing::Case], why: &str) -> Suite {
        let mut names: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
        if names.is_empty() {
            names.push("(test file)".into());
        }
        Suite {
            file: file.display().to_string(),
            cases: names.into_iter().map(|n| (n, vec![why.to_string()])).collect(),
        }
    }
}

pub fn run(paths: &[PathBuf], options: &TestOptions) -> Result<ExitCode, String> {
    let engine = options.engine;
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
    let (mut passed, mut failed, mut filtered_out) = (0usize, 0usize, 0usize);
    let mut suites: Vec<Suite> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        let file_matches = options.filter.as_ref().is_none_or(|f| file.to_string_lossy().contains(f.as_str()));
        let mut parsed = match testing::parse(&text) {
            Ok(parsed) => parsed,
            Err(e) if file_matches => {
                println!("FAIL {}: invalid test file: {e}", file.display());
                suites.push(Suite::all_failed(file, &[], &format!("invalid test file: {e}")));
                failed += 1;
                continue;
            }
            // Filtered out: which cases it has is unknown, so it counts as one.
            Err(_) => {
                filtered_out += 1;
                continue;
            }
        };
        if let Some(filter) = options.filter.as_ref().filter(|_| !file_matches) {
            let before = parsed.cases.len();
            parsed.cases.retain(|c| c.name.contains(filter.as_str()));
            filtered_out += before - parsed.cases.len();
            if parsed.cases.is_empty() {
                continue;
            }
        }
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let policy: Vec<PathBuf> = if parsed.policy.is_empty() {
            vec![dir.clone()]
        } else {
            parsed.policy.iter().map(|p| dir.join(p)).collect()
        };
        let from = load::canonical(if dir.as_os_str().is_empty() { Path::new(".") } else { &dir })?;
        if let Some(outside) = parsed.policy.iter().find(|p| load::confine(&from, p, &confined).is_none()) {
            let why = format!("policy `{outside}` leaves the folders given to `remit test`: not read");
            println!("FAIL {}: {why}", file.display());
            suites.push(Suite::all_failed(file, &parsed.cases, &why));
            failed += parsed.cases.len().max(1);
            continue;
        }
        let Some(program) = compile(&policy)? else {
            println!("FAIL {}: the policy does not check ({} case(s) not run)", file.display(), parsed.cases.len());
            suites.push(Suite::all_failed(file, &parsed.cases, "the policy does not check"));
            failed += parsed.cases.len().max(1);
            continue;
        };
        let outcomes = match testing::run_with(&program, &parsed, engine, Some(&wasmtime_host)) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                println!("FAIL {}: {e} ({} case(s) not run)", file.display(), parsed.cases.len());
                suites.push(Suite::all_failed(file, &parsed.cases, &e));
                failed += parsed.cases.len().max(1);
                continue;
            }
        };
        let mut suite = Suite { file: file.display().to_string(), cases: Vec::new() };
        for outcome in outcomes {
            if outcome.failures.is_empty() {
                passed += 1;
            } else {
                failed += 1;
                println!("FAIL {} :: {}", file.display(), outcome.name);
                for failure in &outcome.failures {
                    println!("     {failure}");
                }
                if let Some(decision) = &outcome.decision {
                    println!("     decision: {}", decision.to_json());
                }
            }
            let mut failures = outcome.failures;
            if let Some(decision) = outcome.decision.filter(|_| !failures.is_empty()) {
                failures.push(format!("decision: {}", decision.to_json()));
            }
            suite.cases.push((outcome.name, failures));
        }
        suites.push(suite);
    }
    if let Some(path) = &options.junit {
        std::fs::write(path, junit(&suites)).map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    }
    if options.filter.is_some() {
        println!("{passed} passed, {failed} failed, {filtered_out} filtered out");
    } else {
        println!("{passed} passed, {failed} failed");
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The results as JUnit XML: one `testsuite` per test file, one `testcase` per case, a `failure` with what
/// differed (the first line as its message, everything in its text) for each failing case.
fn junit(suites: &[Suite]) -> String {
    let count = |s: &Suite| (s.cases.len(), s.cases.iter().filter(|(_, f)| !f.is_empty()).count());
    let (tests, failures) = suites.iter().map(count).fold((0, 0), |(t, f), (a, b)| (t + a, f + b));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!("<testsuites name=\"remit test\" tests=\"{tests}\" failures=\"{failures}\">\n"));
    for suite in suites {
        let (tests, failures) = count(suite);
        let name = attr(&suite.file);
        out.push_str(&format!("  <testsuite name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\">\n"));
        for (case, failures) in &suite.cases {
            let case = attr(case);
            match failures.first() {
                None => out.push_str(&format!("    <testcase classname=\"{name}\" name=\"{case}\"/>\n")),
                Some(first) => {
                    out.push_str(&format!("    <testcase classname=\"{name}\" name=\"{case}\">\n"));
                    out.push_str(&format!(
                        "      <failure message=\"{}\">{}</failure>\n",
                        attr(first),
                        xml(&failures.join("\n"))
                    ));
                    out.push_str("    </testcase>\n");
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// [`xml`] for an attribute value, whose line breaks and tabs a parser would turn into spaces.
fn attr(text: &str) -> String {
    xml(text).replace('\n', "&#10;").replace('\t', "&#9;")
}

/// Text as XML character data or an attribute value: the five markup characters escaped, and the characters XML
/// 1.0 cannot carry at all (controls other than tab and line breaks) written as `\u{…}`.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' => out.push(c),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
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

/// The module engine of `remit test --engine module`: the decision module in wasmtime (`remit-host`), as a gateway
/// runs it.
fn wasmtime_host(wasm: &[u8]) -> Result<testing::LoadedModule, String> {
    let runtime = remit_host::Runtime::new()?;
    let mut evaluator = std::sync::Arc::new(runtime.load(wasm)?).evaluator()?;
    Ok(Box::new(move |request: &[u8]| evaluator.decide(request)))
}
