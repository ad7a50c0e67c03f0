//! The workspace's structure, checked from its sources and manifests: no import circles between modules, and each
//! crate depends only on the layers below it (ARCHITECTURE.md).
//!
//! # Module graphs
//!
//! Every workspace crate's module tree is read from its roots (`src/lib.rs`, `src/main.rs`) by following `mod NAME;`
//! (to `NAME.rs` or `NAME/mod.rs`, as rustc does) and `mod NAME { … }`. A module under `#[cfg(test)]` is left out,
//! and so is any other item under exactly `#[cfg(test)]` (unit tests may use anything); comments, doc comments,
//! string, byte and char literals are skipped before anything is read.
//!
//! A module *names* another when its code holds a path that resolves to it or to an item in it:
//! - a path starting with `crate::`, `$crate::`, `self::` or `super::` (`super` is resolved to the real parent);
//! - every path of a `use` tree (`use a::{b, c::d}` names `a::b` and `a::c::d`; a glob names the module globbed);
//! - a path through a name that a `use` bound: `use super::cond;` then `cond::eval` is `super::cond::eval`, and
//!   `crate::Gateway` resolves through the root's `pub use self::core::Gateway` to `core`.
//!
//! A path is followed through modules as far as its segments are modules; the module it ends in is the one named
//! (`crate::eval::cond::Env` names `eval::cond`, `crate::copy` names the root). Paths into other crates are not
//! edges here (the crates' layering is checked below).
//!
//! For every module `F` that has submodules (the crate root included) there is one graph, over `F`'s children:
//! `A → B` when code anywhere inside `A` (its file and its descendants) names `B` or anything inside `B`. So the
//! crate root's graph is the graph of the crate's top-level modules, and `eval`'s graph relates `eval::cond`,
//! `eval::request`, … Code of `F` itself is in none of `F`'s children, and `F`'s own items are in none of them
//! either: a child using its parent's items, and a parent using its children, is the module tree, not a circle.
//! The test fails when any graph has a cycle, printing the shortest cycle through each module on one, as a path,
//! with where each arrow comes from (`print_module_graphs`, ignored, prints every arrow).
//!
//! A name a parent re-exports from a child (`pub use self::b::Thing`) counts as naming that child: a re-export is
//! no way around the rule. What no path shows is not seen: a method called on a value (`self.fill(…)`, defined in
//! a sibling module's `impl`) is no arrow here, so an `impl` split across sibling modules keeps its own order by
//! hand (remit-gateway's `core/mod.rs` states its modules' order).
//!
//! # Crate layering
//!
//! From `cargo metadata`: each crate's normal `[dependencies]` among the workspace crates must be within the layers
//! below it, and some external crates must not be in a crate's normal dependency closure (what an embedder of the
//! wasmtime host, or of the language, would otherwise inherit).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------------------------
// Tokens: what the graph is read from, with comments and literals gone.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A string, byte string, char or byte literal: kept as one token so that `#[path = "…"]` stays an attribute.
    Literal,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

/// Splits Rust source into tokens, leaving out comments (nested block comments too) and literal contents.
fn tokenize(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let is_ident_start = |c: char| c.is_alphabetic() || c == '_';
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br#"…"#: ends at the quote followed by as many `#` as opened it.
            let hashes = len - if c == 'r' { 2 } else { 3 };
            let start_line = line;
            i += len;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            out.push(Token { tok: Tok::Literal, line: start_line });
        } else if c == '"' || ((c == 'b' || c == 'c') && at(i + 1) == '"') {
            let start_line = line;
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Token { tok: Tok::Literal, line: start_line });
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            let q = if c == '\'' { i } else { i + 1 };
            if at(q + 1) == '\\' {
                // '\n', '\'', '\u{…}': up to the closing quote after the escaped character.
                let mut j = q + 3;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push(Token { tok: Tok::Literal, line });
            } else if at(q + 2) == '\'' {
                i = q + 3;
                out.push(Token { tok: Tok::Literal, line });
            } else {
                // A lifetime or a label: `'a`, `'static`.
                i = q + 1;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
            }
        } else if c == 'r' && at(i + 1) == '#' && is_ident_start(at(i + 2)) {
            let mut j = i + 2;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            out.push(Token { tok: Tok::Ident(chars[i + 2..j].iter().collect()), line });
            i = j;
        } else if is_ident_start(c) || c.is_ascii_digit() {
            let mut j = i;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            out.push(Token { tok: Tok::Ident(chars[i..j].iter().collect()), line });
            i = j;
        } else if c == '$' && chars[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e']) {
            // `$crate` in a macro is the defining crate's root.
            out.push(Token { tok: Tok::Ident("crate".into()), line });
            i += 6;
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Token { tok: Tok::PathSep, line });
            i += 2;
        } else {
            out.push(Token { tok: Tok::Punct(c), line });
            i += 1;
        }
    }
    out
}

/// The length of the opening of a raw (byte) string at `i` (`r"`, `r#"`, `br##"`, …), if one starts there.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    // Not the end of an identifier such as `bar` or `for`.
    if i > 0 && chars.get(i - 1).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
        return None;
    }
    j += 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(j + 1 - i)
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token { tok: Tok::Ident(s), .. }) => Some(s),
        _ => None,
    }
}

fn punct(t: Option<&Token>, c: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(p), .. }) if *p == c)
}

/// The index just past the group opened at `open` (`{`, `[` or `(`), or the end.
fn close_of(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct('{' | '[' | '(') => depth += 1,
            Tok::Punct('}' | ']' | ')') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index just past the item starting at `i`: its `;` or its body's closing brace, whichever comes first outside
/// brackets and parentheses.
fn item_end(tokens: &[Token], mut i: usize) -> usize {
    while i < tokens.len() {
        match tokens[i].tok {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('{') => return close_of(tokens, i),
            Tok::Punct('[' | '(') => i = close_of(tokens, i),
            _ => i += 1,
        }
    }
    i
}

/// The index just past the `;` that ends the statement starting at `i` (a `use`, whose braces do not end it).
fn statement_end(tokens: &[Token], mut i: usize) -> usize {
    while i < tokens.len() {
        match tokens[i].tok {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('{' | '[' | '(') => i = close_of(tokens, i),
            _ => i += 1,
        }
    }
    i
}

/// Whether the attribute at `i` (`#` `[` … `]`) is exactly `#[cfg(test)]`, and the index past it.
fn attribute(tokens: &[Token], i: usize) -> Option<(bool, usize)> {
    if !punct(tokens.get(i), '#') {
        return None;
    }
    let open = if punct(tokens.get(i + 1), '!') { i + 2 } else { i + 1 };
    if !punct(tokens.get(open), '[') {
        return None;
    }
    let end = close_of(tokens, open);
    let inner: Vec<&Tok> = tokens[open + 1..end - 1].iter().map(|t| &t.tok).collect();
    let cfg_test = inner == [&Tok::Ident("cfg".into()), &Tok::Punct('('), &Tok::Ident("test".into()), &Tok::Punct(')')];
    Some((cfg_test, end))
}

// ---------------------------------------------------------------------------------------------------------------
// Module trees.

#[derive(Debug)]
struct Module {
    /// Path from the crate root (empty for the root).
    path: Vec<String>,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// Names bound by `use` in this module: name → the path as written (resolved from this module).
    imports: BTreeMap<String, Vec<String>>,
    /// Paths this module's code holds: (path as written, file, line).
    refs: Vec<(Vec<String>, PathBuf, usize)>,
}

#[derive(Debug)]
struct Crate {
    name: String,
    modules: Vec<Module>,
}

impl Crate {
    fn add(&mut self, parent: Option<usize>, name: Option<&str>) -> usize {
        let mut path = parent.map(|p| self.modules[p].path.clone()).unwrap_or_default();
        path.extend(name.map(String::from));
        let id = self.modules.len();
        self.modules.push(Module {
            path,
            parent,
            children: BTreeMap::new(),
            imports: BTreeMap::new(),
            refs: Vec::new(),
        });
        if let (Some(p), Some(n)) = (parent, name) {
            self.modules[p].children.insert(n.to_string(), id);
        }
        id
    }

    /// Reads the module `id` from `tokens` (its file, or the body of an inline `mod`); `dir` is where its
    /// submodules' files are.
    fn read(&mut self, id: usize, tokens: &[Token], file: &Path, dir: &Path) {
        let mut i = 0;
        while i < tokens.len() {
            if let Some((cfg_test, end)) = attribute(tokens, i) {
                if cfg_test {
                    // The attribute is on the next item (after any other attributes), or, as `#![cfg(test)]`, on
                    // the whole module.
                    if punct(tokens.get(i + 1), '!') {
                        return;
                    }
                    let mut j = end;
                    while let Some((_, next)) = attribute(tokens, j) {
                        j = next;
                    }
                    i = item_end(tokens, j);
                } else {
                    i = end;
                }
                continue;
            }
            match ident(tokens.get(i)) {
                Some("mod") if ident(tokens.get(i + 1)).is_some() => {
                    let name = ident(tokens.get(i + 1)).unwrap().to_string();
                    let child = self.add(Some(id), Some(&name));
                    let child_dir = dir.join(&name);
                    if punct(tokens.get(i + 2), '{') {
                        let end = close_of(tokens, i + 2);
                        self.read(child, &tokens[i + 3..end - 1], file, &child_dir);
                        i = end;
                    } else {
                        let flat = dir.join(format!("{name}.rs"));
                        let (child_file, grandchildren) =
                            if flat.exists() { (flat, child_dir) } else { (child_dir.join("mod.rs"), child_dir) };
                        self.read_file(child, &child_file, &grandchildren);
                        i += 2;
                    }
                }
                Some("use") => {
                    let end = statement_end(tokens, i);
                    let mut leaves = Vec::new();
                    use_tree(&tokens[i + 1..end - 1], &mut Vec::new(), &mut leaves);
                    for (path, bound) in leaves {
                        if let Some(name) = bound {
                            self.modules[id].imports.insert(name, path.clone());
                        }
                        self.modules[id].refs.push((path, file.to_path_buf(), tokens[i].line));
                    }
                    i = end;
                }
                Some(first @ ("crate" | "self" | "super"))
                    if tokens.get(i + 1).map(|t| &t.tok) == Some(&Tok::PathSep)
                        && tokens.get(i.wrapping_sub(1)).map(|t| &t.tok) != Some(&Tok::PathSep) =>
                {
                    let mut path = vec![first.to_string()];
                    let mut j = i + 1;
                    while tokens.get(j).map(|t| &t.tok) == Some(&Tok::PathSep) {
                        match ident(tokens.get(j + 1)) {
                            Some(seg) => path.push(seg.to_string()),
                            None => break,
                        }
                        j += 2;
                    }
                    self.modules[id].refs.push((path, file.to_path_buf(), tokens[i].line));
                    i = j;
                }
                _ => i += 1,
            }
        }
    }

    fn read_file(&mut self, id: usize, file: &Path, dir: &Path) {
        let src = fs::read_to_string(file).unwrap_or_else(|e| panic!("reading `{}`: {e}", file.display()));
        self.read(id, &tokenize(&src), file, dir);
    }

    /// The module a path written in module `from` ends in, and whether every segment of it was a module.
    fn resolve(&self, from: usize, path: &[String], depth: usize) -> Option<(usize, bool)> {
        if depth > 16 {
            return None;
        }
        let (mut cur, mut rest) = match path.first().map(String::as_str) {
            Some("crate") => (0, &path[1..]),
            Some("self") => (from, &path[1..]),
            Some("super") => (from, path),
            Some(name) if self.modules[from].children.contains_key(name) => (from, path),
            Some(name) => {
                // A name a `use` of this module bound, else another crate or a prelude name.
                let bound = self.modules[from].imports.get(name)?;
                if bound.first().map(String::as_str) == Some(name) && bound.len() == 1 {
                    return None;
                }
                match self.resolve(from, bound, depth + 1)? {
                    (m, true) => (m, &path[1..]),
                    (m, false) => return Some((m, false)),
                }
            }
            None => return None,
        };
        while let Some(seg) = rest.first() {
            if seg == "super" {
                cur = self.modules[cur].parent?;
            } else if let Some(&child) = self.modules[cur].children.get(seg) {
                cur = child;
            } else if let Some(bound) = self.modules[cur].imports.get(seg) {
                match self.resolve(cur, bound, depth + 1) {
                    Some((m, true)) => cur = m,
                    Some((m, false)) => return Some((m, false)),
                    None => return Some((cur, false)),
                }
            } else {
                return Some((cur, false));
            }
            rest = &rest[1..];
        }
        Some((cur, true))
    }

    /// `ancestor`'s child that `m` is in (or is), if `m` is strictly inside `ancestor`.
    fn child_toward(&self, ancestor: usize, mut m: usize) -> Option<usize> {
        while let Some(p) = self.modules[m].parent {
            if p == ancestor {
                return Some(m);
            }
            m = p;
        }
        None
    }

    fn name(&self, m: usize) -> String {
        let path = &self.modules[m].path;
        if path.is_empty() {
            "crate".into()
        } else {
            path.join("::")
        }
    }
}

/// The leaves of a `use` tree: each full path, with the name it binds (none for a glob or `_`).
fn use_tree(tokens: &[Token], prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut i = 0;
    if tokens.first().map(|t| &t.tok) == Some(&Tok::PathSep) {
        i = 1; // `use ::std::…`: another crate.
    }
    let depth = prefix.len();
    while i < tokens.len() {
        match &tokens[i].tok {
            Tok::Ident(seg) if seg == "self" && depth > 0 && prefix.len() == depth => {
                let name = prefix.last().cloned();
                let (path, bound) = (prefix.clone(), name);
                i += 1;
                let bound = if ident(tokens.get(i)) == Some("as") {
                    i += 2;
                    ident(tokens.get(i - 1)).filter(|n| *n != "_").map(String::from)
                } else {
                    bound
                };
                out.push((path, bound));
            }
            Tok::Ident(seg) => {
                prefix.push(seg.clone());
                if tokens.get(i + 1).map(|t| &t.tok) == Some(&Tok::PathSep) {
                    i += 2;
                    continue;
                }
                i += 1;
                let bound = if ident(tokens.get(i)) == Some("as") {
                    i += 2;
                    ident(tokens.get(i - 1)).filter(|n| *n != "_").map(String::from)
                } else {
                    Some(seg.clone())
                };
                out.push((prefix.clone(), bound));
            }
            Tok::Punct('*') => {
                out.push((prefix.clone(), None));
                i += 1;
            }
            Tok::Punct('{') => {
                let end = close_of(tokens, i);
                // Each comma-separated tree inside, with the prefix so far.
                let inner = &tokens[i + 1..end - 1];
                let mut start = 0;
                let mut k = 0;
                let mut nest = 0;
                while k <= inner.len() {
                    let at_end = k == inner.len();
                    match inner.get(k).map(|t| &t.tok) {
                        Some(Tok::Punct('{')) => nest += 1,
                        Some(Tok::Punct('}')) => nest -= 1,
                        _ => {}
                    }
                    if at_end || (nest == 0 && punct(inner.get(k), ',')) {
                        if k > start {
                            let mut p = prefix.clone();
                            use_tree(&inner[start..k], &mut p, out);
                        }
                        start = k + 1;
                    }
                    k += 1;
                }
                i = end;
            }
            _ => i += 1,
        }
        // A tree is one path: after its leaf, reset to the prefix it started with.
        prefix.truncate(depth);
    }
}

/// Every workspace crate's root files (`src/lib.rs`, `src/main.rs`): the root package's and each `crates/*`'s.
fn crate_roots() -> Vec<(String, PathBuf)> {
    let root = workspace_root();
    let mut dirs = vec![root.clone()];
    let mut members: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("reading crates/")
        .map(|e| e.expect("reading crates/").path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    members.sort();
    dirs.extend(members);
    let mut out = Vec::new();
    for dir in dirs {
        let name = if dir == root { "remit".to_string() } else { dir.file_name().unwrap().to_string_lossy().into() };
        for target in ["lib", "main"] {
            let file = dir.join("src").join(format!("{target}.rs"));
            if file.exists() {
                out.push((format!("{name} ({target}.rs)"), file));
            }
        }
    }
    out
}

fn read_crate(name: &str, root_file: &Path) -> Crate {
    let mut krate = Crate { name: name.to_string(), modules: Vec::new() };
    let root = krate.add(None, None);
    krate.read_file(root, root_file, root_file.parent().unwrap());
    krate
}

/// One arrow of a graph, with the first place that gives it.
type Edges = BTreeMap<(usize, usize), (PathBuf, usize, String)>;

/// The graphs of a crate: for each module with submodules, the arrows among its children.
fn graphs(krate: &Crate) -> BTreeMap<usize, Edges> {
    let mut graphs: BTreeMap<usize, Edges> = BTreeMap::new();
    for (from, module) in krate.modules.iter().enumerate() {
        for (path, file, line) in &module.refs {
            let Some((to, _)) = krate.resolve(from, path, 0) else { continue };
            // Every ancestor `F` of both ends under which they are in different children.
            let mut f = Some(0);
            while let Some(ancestor) = f {
                let (a, b) = (krate.child_toward(ancestor, from), krate.child_toward(ancestor, to));
                match (a, b) {
                    (Some(a), Some(b)) if a == b => f = Some(a),
                    (Some(a), Some(b)) => {
                        graphs
                            .entry(ancestor)
                            .or_default()
                            .entry((a, b))
                            .or_insert_with(|| (file.clone(), *line, path.join("::")));
                        f = None;
                    }
                    _ => f = None,
                }
            }
        }
    }
    graphs
}

/// The shortest cycle through each node that is on one, each listed once (as the rotation starting at its
/// smallest node).
fn cycles(edges: &Edges) -> Vec<Vec<usize>> {
    let mut next: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut found = BTreeSet::new();
    for &start in next.keys() {
        // Breadth-first from `start` back to it.
        let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut cycle = None;
        while let Some(n) = queue.pop_front() {
            for &m in next.get(&n).into_iter().flatten() {
                if m == start {
                    let mut path = vec![n];
                    let mut k = n;
                    while k != start {
                        k = came_from[&k];
                        path.push(k);
                    }
                    path.reverse();
                    cycle = Some(path);
                    break;
                }
                if let std::collections::btree_map::Entry::Vacant(entry) = came_from.entry(m) {
                    entry.insert(n);
                    queue.push_back(m);
                }
            }
            if cycle.is_some() {
                break;
            }
        }
        if let Some(path) = cycle {
            let low = (0..path.len()).min_by_key(|&k| path[k]).unwrap();
            let mut rotated = path[low..].to_vec();
            rotated.extend_from_slice(&path[..low]);
            found.insert(rotated);
        }
    }
    found.into_iter().collect()
}

fn describe(krate: &Crate, edges: &Edges, cycle: &[usize]) -> String {
    let root = workspace_root();
    let mut text = cycle.iter().chain(&cycle[..1]).map(|&m| krate.name(m)).collect::<Vec<_>>().join(" → ");
    for k in 0..cycle.len() {
        let (a, b) = (cycle[k], cycle[(k + 1) % cycle.len()]);
        let (file, line, path) = &edges[&(a, b)];
        let file = file.strip_prefix(&root).unwrap_or(file);
        text += &format!("\n      {} → {}: {}:{line} `{path}`", krate.name(a), krate.name(b), file.display());
    }
    text
}

fn all_cycles() -> Vec<String> {
    let mut report = Vec::new();
    for (name, root) in crate_roots() {
        let krate = read_crate(&name, &root);
        for edges in graphs(&krate).values() {
            for cycle in cycles(edges) {
                report.push(format!("{}: {}", krate.name, describe(&krate, edges, &cycle)));
            }
        }
    }
    report
}

#[test]
fn no_module_imports_another_that_imports_it_back() {
    let report = all_cycles();
    assert!(report.is_empty(), "import circles between modules:\n  {}", report.join("\n  "));
}

/// Prints every graph's arrows with where each comes from (`cargo test --test layers -- --ignored --nocapture`).
#[test]
#[ignore = "prints the graphs"]
fn print_module_graphs() {
    let root = workspace_root();
    for (name, file) in crate_roots() {
        let krate = read_crate(&name, &file);
        for (parent, edges) in graphs(&krate) {
            println!("{name}: among the children of {}", krate.name(parent));
            for (&(a, b), (file, line, path)) in &edges {
                let file = file.strip_prefix(&root).unwrap_or(file);
                println!("  {} → {}  ({}:{line} `{path}`)", krate.name(a), krate.name(b), file.display());
            }
        }
    }
}

/// The reader itself, on a crate written for it: what counts as an arrow, and what does not.
#[test]
fn the_module_graph_sees_what_the_rules_say() {
    let dir = std::env::temp_dir().join(format!("remit-layers-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("f")).unwrap();
    let write = |p: &str, s: &str| fs::write(dir.join(p), s).unwrap();
    write(
        "lib.rs",
        "mod a; mod b; mod c; mod f; mod d { pub fn x() { crate::c::y() } }\n\
         pub use self::b::Thing;\n\
         pub fn root_item() {}\n\
         #[cfg(test)] mod tests { use crate::a::x; }\n",
    );
    // a → b through the root's re-export; a naming the root's own item is the tree.
    write("a.rs", "use crate::Thing; pub fn x() { crate::root_item(); }");
    // b → c through a `use` tree with `self`; comments and strings are not code.
    write("b.rs", "use super::{c::{self}}; pub struct Thing; // crate::d::x\n const S: &str = \"crate::a::x\";");
    // c → a inside a function body, and a `#[cfg(test)]` item that would name d.
    write("c.rs", "pub fn y() { let _ = 'q'; super::a::x() }\n#[cfg(test)]\nfn t() { crate::d::x() }");
    // f's children: g → h, h → g, but the parent f naming its children (and they it) is the tree.
    write("f/mod.rs", "mod g; mod h; pub fn p() { g::x(); h::x(); }");
    write("f/g.rs", "pub fn x() { super::p(); super::h::x() }");
    write("f/h.rs", "use super::g; pub fn x() { g::x() }");
    let krate = read_crate("probe", &dir.join("lib.rs"));
    let g = graphs(&krate);
    let names = |edges: &Edges| -> BTreeSet<(String, String)> {
        edges.keys().map(|&(a, b)| (krate.name(a), krate.name(b))).collect()
    };
    let top: BTreeSet<(String, String)> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("d", "c")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(names(&g[&0]), top);
    let f = krate.modules[0].children["f"];
    let inner: BTreeSet<(String, String)> =
        [("f::g", "f::h"), ("f::h", "f::g")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(names(&g[&f]), inner);
    let found: Vec<String> = g.values().flat_map(|e| cycles(e).into_iter().map(|c| describe(&krate, e, &c))).collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("a → b → c → a"), "{found:#?}");
    assert!(found[1].starts_with("f::g → f::h → f::g"), "{found:#?}");
    fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------------------------
// Crate layering.

/// The workspace crates each crate may depend on (normal dependencies): the layers below it.
const LAYERS: &[(&str, &[&str])] = &[
    // Built by scripts/build-runtime.sh with rustc alone (no cargo): it can have no dependency at all.
    ("remit-rt", &[]),
    ("remit-module", &["remit-rt"]),
    ("remit-lang", &["remit-rt", "remit-module"]),
    // What a Rust gateway embeds to run a compiled policy: not the compiler.
    ("remit-host", &["remit-rt", "remit-module"]),
    ("remit-gateway", &["remit-rt", "remit-module", "remit-lang", "remit-host"]),
    ("remit-mcp", &["remit-rt", "remit-module", "remit-lang", "remit-host", "remit-gateway"]),
    ("remit", &["remit-rt", "remit-module", "remit-lang", "remit-host", "remit-gateway", "remit-mcp"]),
];

/// External crates that must not be in a crate's normal dependency closure.
const FORBIDDEN: &[(&str, &[&str])] = &[
    // The host runs a compiled module: no parser, no diagnostics renderer, no server, no database.
    ("remit-host", &["pest", "miette", "tokio", "axum", "rusqlite", "tokio-postgres", "deadpool-postgres"]),
    // The language compiles and interprets: no server, no database, no wasm engine.
    ("remit-lang", &["tokio", "axum", "rusqlite", "tokio-postgres", "deadpool-postgres", "wasmtime"]),
];

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(workspace_root().join("Cargo.toml"))
        .output()
        .expect("running `cargo metadata`");
    assert!(out.status.success(), "`cargo metadata` failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("`cargo metadata`'s JSON")
}

/// Package id → (name, the ids of its normal dependencies), from `resolve`.
fn normal_graph(meta: &serde_json::Value) -> BTreeMap<String, (String, Vec<String>)> {
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let id = node["id"].as_str().unwrap();
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
                .map(|d| d["pkg"].as_str().unwrap().to_string())
                .collect();
            (id.to_string(), (names[id].to_string(), deps))
        })
        .collect()
}

/// The workspace members: name → id.
fn members(meta: &serde_json::Value) -> BTreeMap<String, String> {
    let ids: BTreeSet<&str> =
        meta["workspace_members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| ids.contains(p["id"].as_str().unwrap()))
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["id"].as_str().unwrap().to_string()))
        .collect()
}

/// What is wrong with the workspace's layering: a workspace dependency on a crate not below, a member with no
/// layer, a forbidden crate in a closure.
fn layering_faults(meta: &serde_json::Value) -> Vec<String> {
    let graph = normal_graph(meta);
    let members = members(meta);
    let mut faults = Vec::new();
    for (name, id) in &members {
        let Some((_, below)) = LAYERS.iter().find(|(n, _)| n == name) else {
            faults.push(format!("`{name}` is a workspace crate with no layer in tests/layers.rs's LAYERS"));
            continue;
        };
        for dep in &graph[id].1 {
            let dep_name = &graph[dep].0;
            if members.contains_key(dep_name) && !below.contains(&dep_name.as_str()) {
                faults.push(format!("`{name}` depends on `{dep_name}`, which is not a layer below it"));
            }
            if *name == "remit-rt" {
                faults.push(format!("`remit-rt` depends on `{dep_name}` (it is built by rustc alone)"));
            }
        }
    }
    for (name, forbidden) in FORBIDDEN {
        let id = &members[*name];
        // Breadth-first over normal dependencies, remembering the way in to name it.
        let mut via: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([id.as_str()]);
        while let Some(n) = queue.pop_front() {
            for d in &graph[n].1 {
                if d != id && !via.contains_key(d.as_str()) {
                    via.insert(d, n);
                    queue.push_back(d);
                }
            }
        }
        for (&d, _) in via.iter().filter(|(d, _)| forbidden.contains(&graph[**d].0.as_str())) {
            let mut chain = vec![graph[d].0.clone()];
            let mut k = d;
            while let Some(&from) = via.get(k) {
                chain.push(graph[from].0.clone());
                k = from;
            }
            chain.reverse();
            faults.push(format!("`{name}` has `{}` in its dependencies: {}", graph[d].0, chain.join(" → ")));
        }
    }
    faults
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let faults = layering_faults(&metadata());
    assert!(faults.is_empty(), "layering:\n  {}", faults.join("\n  "));
}
