//! `remit diff OLD NEW`: how the authority of each mandate changed between two versions of a policy set (files
//! or folders, e.g. the policy on main and in a pull request). The comparison itself is
//! `remit_lang::check::narrowing::diff`; this file loads both versions and prints the report. Exit status 1 when any
//! mandate widened, was added or could not be decided, so CI can require a human review; 2 when a version does
//! not check.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit_lang::check::narrowing::diff::{diff, Example, MandateDiff, Status};
use remit_lang::check::{check_with, Options};
use remit_lang::diag::Diagnostic;
use remit_lang::ir::Program;
use serde_json::json;

use super::{load, render, write_output, Format};

/// The formats of `remit diff`: the diagnostic formats, plus the pictures (remit_lang::picture).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffFormat {
    Human,
    Json,
    Github,
    /// A self-contained page: the coloured delegation tree and every change with its witness request
    Html,
    /// The coloured delegation tree alone
    Svg,
}

pub fn run(old: &Path, new: &Path, format: DiffFormat, output: Option<&Path>) -> Result<ExitCode, String> {
    let diagnostics = match format {
        DiffFormat::Json => Format::Json,
        DiffFormat::Github => Format::Github,
        DiffFormat::Human | DiffFormat::Html | DiffFormat::Svg => Format::Human,
    };
    let old_program = compile(old, diagnostics)?;
    let new_program = compile(new, diagnostics)?;
    let report = diff(&old_program, &new_program);
    match format {
        DiffFormat::Human => human(&report),
        DiffFormat::Json => println!("{}", as_json(&report)),
        DiffFormat::Github => github(&report, &old_program, &new_program),
        DiffFormat::Html => {
            write_output(output, &remit_lang::picture::diff_html(&old_program, &new_program, &report))?;
            eprintln!("{}", summary(&report));
        }
        DiffFormat::Svg => {
            write_output(output, &remit_lang::picture::diff_svg(&old_program, &new_program, &report))?;
            eprintln!("{}", summary(&report));
        }
    }
    if let Some(note) = templates_note(&old_program, &new_program) {
        eprintln!("{note}");
    }
    let widened = report.iter().any(|m| m.status.widens());
    Ok(if widened { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Loads and checks one version; the narrowing proof is not needed to compare authority.
fn compile(path: &Path, format: Format) -> Result<Program, String> {
    let (sources, mut diagnostics) = load::load(&[PathBuf::from(path)])?;
    let checked = check_with(sources.clone(), Options { narrowing: false });
    diagnostics.extend(checked.diagnostics);
    let errors: Vec<Diagnostic> = diagnostics.into_iter().filter(Diagnostic::is_error).collect();
    match checked.program {
        Some(program) if errors.is_empty() => Ok(program),
        _ => {
            render::print(&sources, &errors, format);
            Err(format!("`{}` does not check; fix it before comparing", path.display()))
        }
    }
}

/// Templates are not compared yet (their instances decide nothing before run-time grants, and the proof for them is
/// issue 31's next step): said on stderr, naming each, rather than left out in silence.
fn templates_note(old: &Program, new: &Program) -> Option<String> {
    let names = |p: &Program| p.templates.iter().map(|t| t.name.clone()).collect::<std::collections::BTreeSet<_>>();
    let (old, new) = (names(old), names(new));
    let all: Vec<String> = old
        .union(&new)
        .map(|name| match (old.contains(name), new.contains(name)) {
            (true, true) => format!("`{name}`"),
            (false, _) => format!("`{name}` (added)"),
            (_, false) => format!("`{name}` (removed)"),
        })
        .collect();
    (!all.is_empty())
        .then(|| format!("note: templates are not compared yet (docs/grants-design.md): {}", all.join(", ")))
}

fn count(report: &[MandateDiff], status: Status) -> usize {
    report.iter().filter(|m| m.status == status).count()
}

fn summary(report: &[MandateDiff]) -> String {
    let mut parts = vec![format!("{} mandate(s)", report.len())];
    for status in [Status::Widened, Status::Narrowed, Status::Both, Status::Unchanged, Status::Added, Status::Removed] {
        parts.push(format!("{} {}", count(report, status), status.as_str()));
    }
    let undecided = count(report, Status::Undecided);
    if undecided > 0 {
        parts.push(format!("{undecided} undecided"));
    }
    parts.join(", ")
}

fn human(report: &[MandateDiff]) {
    for m in report {
        println!("{:<10} {}", m.status.as_str(), m.name);
        for e in &m.widened {
            println!("  now allowed; before, {}:", e.refused_by);
            println!("    {}", e.request);
        }
        for e in &m.narrowed {
            println!("  allowed before; now {}:", e.refused_by);
            println!("    {}", e.request);
        }
        if m.status == Status::Undecided {
            println!("  the comparison did not finish; review this mandate by hand");
        }
    }
    println!("{}", summary(report));
}

/// Every example of one direction, one per clause.
fn examples(examples: &[Example]) -> serde_json::Value {
    let each = |e: &Example| {
        json!({
            "tool": e.tool,
            "reason": e.refused_by,
            "old": e.old.outcome.as_str(),
            "new": e.new.outcome.as_str(),
            "witness": e.request,
        })
    };
    serde_json::Value::Array(examples.iter().map(each).collect())
}

fn as_json(report: &[MandateDiff]) -> serde_json::Value {
    let mandates: Vec<_> = report
        .iter()
        .map(|m| {
            json!({
                "mandate": m.name,
                "status": m.status.as_str(),
                "widened": examples(&m.widened),
                "narrowed": examples(&m.narrowed),
            })
        })
        .collect();
    json!({
        "mandates": mandates,
        "widened": report.iter().any(|m| m.status.widens()),
        "summary": summary(report),
    })
}

/// Workflow annotations at the mandate's declaration: errors for widening, notices for narrowing.
fn github(report: &[MandateDiff], old: &Program, new: &Program) {
    let escape = |s: &str| s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    let escape_prop = |s: &str| escape(s).replace(':', "%3A").replace(',', "%2C");
    for m in report.iter().filter(|m| m.status != Status::Unchanged) {
        let level = if m.status.widens() { "error" } else { "notice" };
        // Removed mandates are located in the old version; everything else in the new one.
        let (program, id) = match (new.mandate(&m.name), old.mandate(&m.name)) {
            (Some(id), _) => (new, id),
            (None, Some(id)) => (old, id),
            (None, None) => continue,
        };
        let span = program.mandates[id].span;
        let (line, col) = program.sources.line_col(span);
        let file = &program.sources.file(span.file).name;
        let mut message = format!("mandate `{}` {}", m.name, m.status.as_str());
        for e in &m.widened {
            message.push_str(&format!("\nnow allowed; before, {}:\n{}", e.refused_by, e.request));
        }
        for e in &m.narrowed {
            message.push_str(&format!("\nallowed before; now {}:\n{}", e.refused_by, e.request));
        }
        println!(
            "::{level} file={},line={line},col={col},title={}::{}",
            escape_prop(file),
            escape_prop("remit diff"),
            escape(&message)
        );
    }
    println!("{}", summary(report));
}
