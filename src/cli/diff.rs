//! `remit diff OLD NEW`: how the authority of each mandate changed between two versions of a policy set (files
//! or folders, e.g. the policy on main and in a pull request). The comparison itself is
//! `remit_lang::check::narrowing::diff`; this file loads both versions and prints the report. Exit status 1 when any
//! mandate widened, was added or could not be decided, so CI can require a human review; 2 when a version does
//! not check.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit_lang::check::narrowing::diff::{diff, Example, MandateDiff, Status};
use remit_lang::check::narrowing::template_diff::{diff_templates, TemplateDiff};
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
    let templates = diff_templates(&old_program, &new_program);
    match format {
        DiffFormat::Human => {
            human(&report);
            human_templates(&templates);
        }
        DiffFormat::Json => println!("{}", as_json(&report, &templates)),
        DiffFormat::Github => {
            github(&report, &old_program, &new_program);
            github_templates(&templates, &old_program, &new_program);
        }
        DiffFormat::Html => {
            write_output(output, &remit_lang::picture::diff_html(&old_program, &new_program, &report))?;
            eprintln!("{}", summary(&report));
        }
        DiffFormat::Svg => {
            write_output(output, &remit_lang::picture::diff_svg(&old_program, &new_program, &report))?;
            eprintln!("{}", summary(&report));
        }
    }
    // The pictures draw mandates: the templates' report goes to stderr.
    if matches!(format, DiffFormat::Html | DiffFormat::Svg) && !templates.is_empty() {
        eprintln!("{}", templates_text(&templates));
    }
    let widened = report.iter().any(|m| m.status.widens()) || templates.iter().any(|t| t.status.widens());
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

fn params_text(params: &serde_json::Map<String, serde_json::Value>) -> String {
    params.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ")
}

/// The templates' report as text: one line per template, its changed clauses, and the examples.
fn templates_text(report: &[TemplateDiff]) -> String {
    let mut out = String::new();
    for t in report {
        out.push_str(&format!("{:<10} template {}\n", t.status.as_str(), t.name));
        for change in &t.changes {
            out.push_str(&format!("  {change}\n"));
        }
        for e in &t.instances_widened {
            out.push_str(&format!(
                "  instance admitted now; before, {}:\n    {}\n",
                e.refused_by,
                params_text(&e.params)
            ));
        }
        for e in &t.instances_narrowed {
            out.push_str(&format!(
                "  instance admitted before; now {}:\n    {}\n",
                e.refused_by,
                params_text(&e.params)
            ));
        }
        for e in &t.widened {
            out.push_str(&format!(
                "  now allowed; before, {}:\n    with {}\n    {}\n",
                e.refused_by,
                params_text(&e.params),
                e.request
            ));
        }
        for e in &t.narrowed {
            out.push_str(&format!(
                "  allowed before; now {}:\n    with {}\n    {}\n",
                e.refused_by,
                params_text(&e.params),
                e.request
            ));
        }
        if t.status == Status::Undecided && !t.changes.iter().any(|c| c.starts_with("not compared")) {
            out.push_str("  the comparison did not finish; review this template by hand\n");
        }
    }
    let count = |s: Status| report.iter().filter(|t| t.status == s).count();
    let mut parts = vec![format!("{} template(s)", report.len())];
    for status in [Status::Widened, Status::Narrowed, Status::Both, Status::Unchanged, Status::Added, Status::Removed] {
        parts.push(format!("{} {}", count(status), status.as_str()));
    }
    if count(Status::Undecided) > 0 {
        parts.push(format!("{} undecided", count(Status::Undecided)));
    }
    out.push_str(&parts.join(", "));
    out
}

fn human_templates(report: &[TemplateDiff]) {
    if !report.is_empty() {
        println!("{}", templates_text(report));
    }
}

fn templates_json(report: &[TemplateDiff]) -> serde_json::Value {
    let instances = |list: &[remit_lang::check::narrowing::template_diff::InstanceExample]| {
        list.iter().map(|e| json!({"params": e.params, "reason": e.refused_by})).collect::<Vec<_>>()
    };
    let rules = |list: &[remit_lang::check::narrowing::template_diff::RuleExample]| {
        list.iter()
            .map(|e| json!({"tool": e.tool, "params": e.params, "reason": e.refused_by, "witness": e.request}))
            .collect::<Vec<_>>()
    };
    serde_json::Value::Array(
        report
            .iter()
            .map(|t| {
                json!({
                    "template": t.name,
                    "status": t.status.as_str(),
                    "changes": t.changes,
                    "instances_widened": instances(&t.instances_widened),
                    "instances_narrowed": instances(&t.instances_narrowed),
                    "widened": rules(&t.widened),
                    "narrowed": rules(&t.narrowed),
                })
            })
            .collect(),
    )
}

/// Workflow annotations at the template's declaration, as for mandates.
fn github_templates(report: &[TemplateDiff], old: &Program, new: &Program) {
    let escape = |s: &str| s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    let escape_prop = |s: &str| escape(s).replace(':', "%3A").replace(',', "%2C");
    for t in report.iter().filter(|t| t.status != Status::Unchanged) {
        let level = if t.status.widens() { "error" } else { "notice" };
        let find = |p: &Program| p.templates.iter().find(|x| x.name == t.name).map(|x| x.span);
        let (program, span) = match (find(new), find(old)) {
            (Some(span), _) => (new, span),
            (None, Some(span)) => (old, span),
            (None, None) => continue,
        };
        let (line, col) = program.sources.line_col(span);
        let file = &program.sources.file(span.file).name;
        let message = templates_text(std::slice::from_ref(t));
        println!(
            "::{level} file={},line={line},col={col},title={}::{}",
            escape_prop(file),
            escape_prop("remit diff"),
            escape(&message)
        );
    }
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

fn as_json(report: &[MandateDiff], templates: &[TemplateDiff]) -> serde_json::Value {
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
        "templates": templates_json(templates),
        "widened": report.iter().any(|m| m.status.widens()) || templates.iter().any(|t| t.status.widens()),
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
