//! Reads policy files from disk: folders are searched for `.remit` files, imports are followed, and the
//! standard library comes first. File names are recorded relative to the folder given (or the file's folder),
//! so decisions do not depend on where the policy is checked out.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use remit::diag::Diagnostic;
use remit::source::{SourceMap, Span};
use remit::syntax::ast::Decl;
use remit::syntax::parse_file;

pub fn load(paths: &[PathBuf]) -> Result<(SourceMap, Vec<Diagnostic>), String> {
    let mut sources = remit::stdlib::sources();
    let mut diagnostics = Vec::new();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut queue: Vec<(PathBuf, PathBuf)> = Vec::new(); // (file, root)
    for path in paths {
        if path.is_dir() {
            let mut files = Vec::new();
            collect(path, &mut files).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            files.sort();
            queue.extend(files.into_iter().map(|f| (f, path.clone())));
        } else if path.is_file() {
            let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
            queue.push((path.clone(), root));
        } else {
            return Err(format!("`{}` does not exist", path.display()));
        }
    }
    let mut next = 0;
    while next < queue.len() {
        let (file, root) = queue[next].clone();
        next += 1;
        let canonical = file.canonicalize().unwrap_or_else(|_| file.clone());
        if !seen.insert(canonical) {
            continue;
        }
        let text = std::fs::read_to_string(&file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        let id = sources.add(display_name(&file, &root), text);
        // Syntax errors are reported by the checker; here only the imports matter.
        let Ok(parsed) = parse_file(id, &sources.file(id).text) else { continue };
        for decl in parsed.decls {
            if let Decl::Import(import) = decl {
                let target = file.parent().unwrap_or(Path::new(".")).join(&import.path);
                if target.is_file() {
                    queue.push((target, root.clone()));
                } else {
                    diagnostics.push(import_not_found(&import.path, import.span));
                }
            }
        }
    }
    Ok((sources, diagnostics))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "remit") {
            out.push(path);
        }
    }
    Ok(())
}

/// `file` relative to `root`, with `/` separators and `..` resolved lexically.
fn display_name(file: &Path, root: &Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file);
    let mut parts: Vec<String> = Vec::new();
    for component in relative.components() {
        match component {
            Component::ParentDir if parts.last().is_some_and(|p| p != "..") => {
                parts.pop();
            }
            Component::CurDir => {}
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

fn import_not_found(path: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::import-not-found", format!("cannot find imported file `{path}`"))
        .label(span, "no such file")
        .help("import paths are relative to the importing file")
}
