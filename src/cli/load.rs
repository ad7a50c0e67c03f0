//! Reads policy files from disk: folders are searched for `.remit` files, imports are followed, and the
//! standard library comes first. File names are recorded relative to the folder given (or the file's folder),
//! so decisions do not depend on where the policy is checked out.
//!
//! Imports are confined to the policy root: the folders given on the command line, and the folder of each file
//! given. Policies are compiled in CI from contributed changes, so an import must not reach a file outside
//! the root (its content would be shown in a syntax diagnostic). An import is resolved component by component,
//! following symlinks, without ever looking at a path outside the root: whether an outside file exists cannot
//! change the diagnostic.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use remit_lang::diag::Diagnostic;
use remit_lang::source::{SourceMap, Span};
use remit_lang::syntax::ast::Decl;
use remit_lang::syntax::parse_file;

pub fn load(paths: &[PathBuf]) -> Result<(SourceMap, Vec<Diagnostic>), String> {
    let mut sources = remit_lang::stdlib::sources();
    let mut diagnostics = Vec::new();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut queue: Vec<(PathBuf, PathBuf)> = Vec::new(); // (file, root)
    let mut roots: Vec<PathBuf> = Vec::new(); // canonical
    for path in paths {
        if path.is_dir() {
            let mut files = Vec::new();
            collect(path, &mut files).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            files.sort();
            let root = canonical(path)?;
            // A file found in the folder that is a symlink out of it is not read (its content could be shown).
            if let Some(outside) = files.iter().find(|f| !f.canonicalize().is_ok_and(|c| c.starts_with(&root))) {
                return Err(format!(
                    "`{}` leads outside the policy root `{}`: not read",
                    outside.display(),
                    path.display()
                ));
            }
            queue.extend(files.into_iter().map(|f| (f, path.clone())));
            roots.push(root);
        } else if path.is_file() {
            let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
            roots.push(canonical(if root.as_os_str().is_empty() { Path::new(".") } else { &root })?);
            queue.push((path.clone(), root));
        } else {
            return Err(format!("`{}` does not exist", path.display()));
        }
    }
    let mut next = 0;
    while next < queue.len() {
        let (file, root) = queue[next].clone();
        next += 1;
        let canonical_file = file.canonicalize().unwrap_or_else(|_| file.clone());
        if !seen.insert(canonical_file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        let id = sources.add(display_name(&file, &root), text);
        // Syntax errors are reported by the checker; here only the imports matter.
        let Ok(parsed) = parse_file(id, &sources.file(id).text) else { continue };
        for decl in parsed.decls {
            if let Decl::Import(import) = decl {
                // Relative to the importing file as named (its folder is inside a root).
                let folder = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                match confine(&canonical(folder)?, &import.path, &roots) {
                    None => diagnostics.push(import_outside_root(&import.path, import.span)),
                    // Nothing but policy files is read: any other file would have its first line printed in a
                    // syntax error.
                    Some(resolved) if resolved.extension().is_none_or(|e| e != "remit") => {
                        diagnostics.push(import_not_remit(&import.path, import.span))
                    }
                    Some(resolved) if resolved.is_file() => {
                        queue.push((file.parent().unwrap_or(Path::new(".")).join(&import.path), root.clone()))
                    }
                    Some(_) => diagnostics.push(import_not_found(&import.path, import.span)),
                }
            }
        }
    }
    Ok((sources, diagnostics))
}

/// Every `.remit` file under `dir`, recursively (`remit check`, `remit fmt` and `remit lsp` read folders alike).
pub(super) fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
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

pub fn canonical(path: &Path) -> Result<PathBuf, String> {
    path.canonicalize().map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

/// How many symlinks one import may pass through (as Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Where `import` (written in a file of the folder `from`, canonical) leads, with every symlink followed, or
/// `None` when it leaves every root: an absolute path, a `..` above the root, a symlink out of it, or too many
/// symlinks. Nothing outside the roots is ever looked at, so the answer does not depend on what exists there.
pub fn confine(from: &Path, import: &str, roots: &[PathBuf]) -> Option<PathBuf> {
    let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    let relative = Path::new(import);
    if import.contains(['\\', '\0']) || relative.has_root() || relative.is_absolute() {
        return None;
    }
    let mut current = from.to_path_buf();
    let mut pending: Vec<std::ffi::OsString> =
        relative.components().rev().map(|c| c.as_os_str().to_os_string()).collect();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match Path::new(&part).components().next() {
            Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                current.pop();
            }
            Some(Component::Normal(name)) => current.push(name),
            Some(Component::RootDir | Component::Prefix(_)) => return None,
        }
        if !inside(&current) {
            return None;
        }
        if let Ok(target) = std::fs::read_link(&current) {
            links += 1;
            if links > MAX_SYMLINKS {
                return None;
            }
            current.pop();
            let rest = if target.has_root() {
                // An absolute link stays inside only if it names a root (roots are canonical) or a path in one.
                let root = roots.iter().find(|r| target.starts_with(r))?;
                current = root.clone();
                target.strip_prefix(root).ok()?.to_path_buf()
            } else {
                target
            };
            pending.extend(rest.components().rev().map(|c| c.as_os_str().to_os_string()));
        }
    }
    Some(current)
}

fn import_outside_root(path: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::import-outside-root", format!("import `{path}` leaves the policy root"))
        .label(span, "outside the policy root")
        .help(
            "an import is relative to the importing file and must stay inside the folders (and the folders of the \
             files) given on the command line: absolute paths, `..` above them and symlinks out of them are refused",
        )
}

fn import_not_remit(path: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::import-not-remit", format!("import `{path}` is not a `.remit` file"))
        .label(span, "not a policy file")
        .help(
            "imports name policy files, whose names end in `.remit` (once symlinks are followed); nothing else is read",
        )
}

fn import_not_found(path: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::import-not-found", format!("cannot find imported file `{path}`"))
        .label(span, "no such file")
        .help("import paths are relative to the importing file")
}
