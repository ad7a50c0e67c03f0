//! `remit fmt [--check] PATHS…`: puts `.remit` files in the canonical layout (`remit_lang::syntax::format`).
//!
//! Nothing is written unless it is proven to mean the same: every file must parse; the formatter checks that its
//! output holds the same tokens and is a fixed point; and the whole policy set is checked before and after and
//! the two checked programs compared (every declaration, rule, condition and label). `--check` writes nothing
//! and exits 1 when a file is not formatted (what CI runs).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit_lang::check::{check_with, Options};
use remit_lang::diag::Diagnostic;
use remit_lang::ir::Program;
use remit_lang::source::SourceMap;
use remit_lang::syntax::format::format;
use remit_lang::syntax::parse_file;

use super::{load, render, Format};

pub fn run(paths: &[PathBuf], check_only: bool) -> Result<ExitCode, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            load::collect(path, &mut files).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(format!("`{}` does not exist", path.display()));
        }
    }
    files.sort();
    files.dedup();

    // Each file on its own: it must parse, and the formatter must vouch for its output.
    let mut changed: Vec<(PathBuf, String, String)> = Vec::new();
    let mut failed = false;
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        let mut one = SourceMap::new();
        let id = one.add(file.display().to_string(), text.clone());
        if let Err(diagnostics) = parse_file(id, &text) {
            render::print(&one, &diagnostics, Format::Human);
            failed = true;
            continue;
        }
        match format(&text) {
            Ok(formatted) if formatted != text => changed.push((file.clone(), text, formatted)),
            Ok(_) => {}
            Err(error) => {
                return Err(format!("the formatter failed on `{}` ({error:?}); nothing was written", file.display()))
            }
        }
    }
    if failed {
        eprintln!("files with syntax errors are not formatted");
        return Ok(ExitCode::from(1));
    }

    // The whole set, before and after: the same checked program.
    same_meaning(paths)?;

    if check_only {
        for (file, old, new) in &changed {
            println!("{}", first_difference(file, old, new));
        }
        eprintln!("{} of {} file(s) not formatted", changed.len(), files.len());
        return Ok(if changed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    for (file, _, new) in &changed {
        std::fs::write(file, new).map_err(|e| format!("cannot write `{}`: {e}", file.display()))?;
        println!("formatted {}", file.display());
    }
    eprintln!("{} of {} file(s) reformatted", changed.len(), files.len());
    Ok(ExitCode::SUCCESS)
}

/// `path:line: the first line that changes`, so `--check` says where to look.
fn first_difference(file: &Path, old: &str, new: &str) -> String {
    let line =
        old.lines().zip(new.lines()).position(|(a, b)| a != b).unwrap_or(old.lines().count().min(new.lines().count()));
    let shown = new.lines().nth(line).unwrap_or("");
    format!("{}:{}: not formatted; expected `{}`", file.display(), line + 1, shown.trim())
}

/// Checks the policy set as loaded and as formatted, and compares the two programs. A set that does not check is
/// only token-checked (its errors are `remit check`'s business).
fn same_meaning(paths: &[PathBuf]) -> Result<(), String> {
    let (sources, mut diagnostics) = load::load(paths)?;
    let before = check_with(sources.clone(), Options { narrowing: false });
    diagnostics.extend(before.diagnostics);
    let Some(before) = before.program.filter(|_| !diagnostics.iter().any(Diagnostic::is_error)) else {
        return Ok(());
    };
    let mut formatted = SourceMap::new();
    for (_, file) in sources.files() {
        let text =
            if file.name.starts_with("std/") { file.text.clone() } else { format(&file.text).unwrap_or_default() };
        formatted.add(file.name.clone(), text);
    }
    let after = check_with(formatted, Options { narrowing: false });
    match after.program {
        Some(after) if meaning(&after) == meaning(&before) => Ok(()),
        _ => Err("formatting would change the checked program; nothing was written (a bug: please report it)".into()),
    }
}

/// Everything a checked program decides with, without source positions (rule labels without their spacing).
fn meaning(p: &Program) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "levels {:?}", p.levels);
    for e in &p.effects {
        let _ = writeln!(out, "effect {} {:?} {:?}", e.name, e.params, e.description);
    }
    for t in &p.tools {
        let _ = writeln!(
            out,
            "tool {} {:?} {:?} {} {} {:?} {}",
            t.name, t.params, t.effects, t.level, t.side_effects, t.scopes, t.administers_mandates
        );
    }
    for a in &p.approvals {
        let _ = writeln!(out, "approval {} {:?} {} {}", a.name, a.binds, a.ttl, a.single_use);
    }
    let _ = writeln!(out, "contexts {:?}", p.contexts);
    for m in &p.mandates {
        let _ = writeln!(
            out,
            "mandate {} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            m.name,
            m.principal,
            m.parent,
            (&m.holders, &m.holder_prefixes),
            m.purpose,
            m.valid_from,
            m.valid_until,
            m.max_level,
            m.otherwise,
            m.delegation_depth
        );
        for r in &m.rules {
            // Labels are the clause as written: only their spacing may change.
            let label: String = r.label.split_whitespace().collect();
            let _ = writeln!(out, "  {:?} {:?} {:?} {:?} {label}", r.kind, r.target, r.tools, r.condition);
        }
    }
    out
}
