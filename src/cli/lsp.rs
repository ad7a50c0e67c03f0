//! `remit lsp`: a language server over stdio (JSON-RPC with `Content-Length` framing, LSP 3.17). Small handlers
//! over [`remit_lang::analysis`] and [`remit_lang::check`]; this file only speaks the protocol and reads the disk.
//!
//! - Diagnostics as you type: on every open, change or save, the document's policy set is re-checked (its
//!   folder's `.remit` files, recursively, with the editor's unsaved texts in place of the disk's) and every file
//!   of the set gets the diagnostics `remit check` would print — same codes, messages and help.
//! - Hover, go to definition, find references, completion (names, keywords, and `args.` with the parameters of
//!   the clause's tool or class), document symbols.
//! - Positions are UTF-16 code units unless the client offers UTF-8 (LSP 3.17 `positionEncodings`).
//! - Standard-library declarations are written once to a folder under the system's temporary directory so that
//!   "go to definition" on `make_payment` opens a real file.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit_lang::analysis::{CompletionKind, Index, SymbolKind};
use remit_lang::check::{check_with, Options};
use remit_lang::diag::{Diagnostic, Severity};
use remit_lang::source::{SourceMap, Span};
use serde_json::{json, Value};

pub fn run() -> Result<ExitCode, String> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stdout().lock();
    let mut server = Server::default();
    while let Some(message) = read_message(&mut input).map_err(|e| format!("cannot read from the client: {e}"))? {
        for reply in server.handle(&message) {
            write_message(&mut output, &reply).map_err(|e| format!("cannot write to the client: {e}"))?;
        }
        if server.exit {
            return Ok(if server.shut_down { ExitCode::SUCCESS } else { ExitCode::from(1) });
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn read_message(input: &mut impl BufRead) -> std::io::Result<Option<Value>> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let Some(length) = length else { return Ok(Some(Value::Null)) };
    let mut body = vec![0; length];
    input.read_exact(&mut body)?;
    Ok(Some(serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

fn write_message(output: &mut impl Write, message: &Value) -> std::io::Result<()> {
    let body = message.to_string();
    write!(output, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    output.flush()
}

#[derive(Default)]
struct Server {
    /// Unsaved texts of open documents, by path.
    open: BTreeMap<PathBuf, String>,
    /// Files that were last sent diagnostics, so fixed files get an empty list.
    published: BTreeSet<PathBuf>,
    utf8: bool,
    shut_down: bool,
    exit: bool,
}

/// A loaded policy set: its sources and, for each file id, where it is on disk.
struct Workspace {
    sources: SourceMap,
    paths: Vec<PathBuf>,
}

impl Workspace {
    fn file_of(&self, path: &Path) -> Option<u32> {
        self.paths.iter().position(|p| p == path).map(|i| i as u32)
    }
}

impl Server {
    fn handle(&mut self, message: &Value) -> Vec<Value> {
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let result = match (method, &id) {
            ("initialize", Some(_)) => Ok(self.initialize(&params)),
            ("shutdown", Some(_)) => {
                self.shut_down = true;
                Ok(Value::Null)
            }
            ("exit", None) => {
                self.exit = true;
                return Vec::new();
            }
            ("textDocument/didOpen", None) => {
                let doc = &params["textDocument"];
                return self.update(doc["uri"].as_str(), doc["text"].as_str().map(str::to_string));
            }
            ("textDocument/didChange", None) => {
                let text = params["contentChanges"].as_array().and_then(|c| c.last()).and_then(|c| c["text"].as_str());
                return self.update(params["textDocument"]["uri"].as_str(), text.map(str::to_string));
            }
            ("textDocument/didSave", None) => return self.update(params["textDocument"]["uri"].as_str(), None),
            ("textDocument/didClose", None) => {
                if let Some(path) = params["textDocument"]["uri"].as_str().and_then(uri_to_path) {
                    self.open.remove(&path);
                }
                return Vec::new();
            }
            ("textDocument/hover", Some(_)) => Ok(self.hover(&params)),
            ("textDocument/definition", Some(_)) => Ok(self.definition(&params)),
            ("textDocument/references", Some(_)) => Ok(self.references(&params)),
            ("textDocument/completion", Some(_)) => Ok(self.completion(&params)),
            ("textDocument/documentSymbol", Some(_)) => Ok(self.symbols(&params)),
            (_, None) => return Vec::new(), // other notifications need no answer
            (_, Some(_)) => Err(json!({ "code": -32601, "message": format!("`{method}` is not supported") })),
        };
        let Some(id) = id else { return Vec::new() };
        vec![match result {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        }]
    }

    fn initialize(&mut self, params: &Value) -> Value {
        let offered = params["capabilities"]["general"]["positionEncodings"].as_array();
        self.utf8 = offered.is_some_and(|e| e.iter().any(|x| x == "utf-8"));
        json!({
            "capabilities": {
                "positionEncoding": if self.utf8 { "utf-8" } else { "utf-16" },
                "textDocumentSync": { "openClose": true, "change": 1, "save": { "includeText": false } },
                "hoverProvider": true,
                "definitionProvider": true,
                "referencesProvider": true,
                "completionProvider": { "triggerCharacters": ["."] },
                "documentSymbolProvider": true,
            },
            "serverInfo": { "name": "remit", "version": env!("CARGO_PKG_VERSION") },
        })
    }

    /// Records an opened or changed text and publishes the diagnostics of its policy set.
    fn update(&mut self, uri: Option<&str>, text: Option<String>) -> Vec<Value> {
        let Some(path) = uri.and_then(uri_to_path) else { return Vec::new() };
        if let Some(text) = text {
            self.open.insert(path.clone(), text);
        }
        let Some(workspace) = self.workspace(&path) else { return Vec::new() };
        let checked = check_with(workspace.sources.clone(), Options { narrowing: true });
        let mut by_file: BTreeMap<PathBuf, Vec<Value>> = BTreeMap::new();
        for (id, file) in workspace.sources.files() {
            if !file.name.starts_with("std/") {
                by_file.insert(workspace.paths[id as usize].clone(), Vec::new());
            }
        }
        for d in &checked.diagnostics {
            let Some(span) = d.primary_span() else { continue };
            let Some(path) = workspace.paths.get(span.file as usize) else { continue };
            if let Some(list) = by_file.get_mut(path) {
                list.push(self.diagnostic(&workspace, d, span));
            }
        }
        let mut out = Vec::new();
        // Files of this set that had diagnostics before and have none now are cleared by the loop too.
        for (file, diagnostics) in by_file {
            if diagnostics.is_empty() && !self.published.contains(&file) {
                continue;
            }
            if diagnostics.is_empty() {
                self.published.remove(&file);
            } else {
                self.published.insert(file.clone());
            }
            out.push(json!({
                "jsonrpc": "2.0",
                "method": "textDocument/publishDiagnostics",
                "params": { "uri": path_to_uri(&file), "diagnostics": diagnostics },
            }));
        }
        out
    }

    fn diagnostic(&self, workspace: &Workspace, d: &Diagnostic, span: Span) -> Value {
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        let related: Vec<Value> = d
            .labels
            .iter()
            .filter_map(|label| {
                let path = workspace.paths.get(label.span.file as usize)?;
                Some(json!({
                    "location": { "uri": path_to_uri(path), "range": self.range(&workspace.sources, label.span) },
                    "message": if label.message.is_empty() { d.message.clone() } else { label.message.clone() },
                }))
            })
            .collect();
        json!({
            "range": self.range(&workspace.sources, span),
            "severity": match d.severity { Severity::Error => 1, Severity::Warning => 2 },
            "code": d.code,
            "source": "remit",
            "message": message,
            "relatedInformation": related,
        })
    }

    /// The policy set a document belongs to: every `.remit` file under its folder (the editor's texts for open
    /// ones), after the standard library, named relative to the folder as `remit check FOLDER` names them.
    fn workspace(&self, document: &Path) -> Option<Workspace> {
        let folder = document.parent()?.to_path_buf();
        let mut files = Vec::new();
        // An unreadable entry ends the walk; what was found so far is still checked.
        let _ = super::load::collect(&folder, &mut files);
        if !files.contains(&document.to_path_buf()) {
            files.push(document.to_path_buf());
        }
        files.sort();
        let mut sources = remit_lang::stdlib::sources();
        let std_folder = stdlib_folder();
        let mut paths: Vec<PathBuf> = remit_lang::stdlib::FILES.iter().map(|(name, _)| std_folder.join(name)).collect();
        for file in files {
            let text = match self.open.get(&file) {
                Some(text) => text.clone(),
                None => std::fs::read_to_string(&file).unwrap_or_default(),
            };
            let name = file.strip_prefix(&folder).unwrap_or(&file).to_string_lossy().replace('\\', "/");
            sources.add(name, text);
            paths.push(file);
        }
        Some(Workspace { sources, paths })
    }

    /// The workspace, index, file id and byte offset of a request's `textDocument` and `position`.
    fn locate(&self, params: &Value) -> Option<(Workspace, Index, u32, usize)> {
        let path = uri_to_path(params["textDocument"]["uri"].as_str()?)?;
        let workspace = self.workspace(&path)?;
        let file = workspace.file_of(&path)?;
        let text = &workspace.sources.file(file).text;
        let line = params["position"]["line"].as_u64()? as usize;
        let character = params["position"]["character"].as_u64()? as usize;
        let offset = self.offset(text, line, character);
        let index = Index::build(&workspace.sources);
        Some((workspace, index, file, offset))
    }

    fn hover(&self, params: &Value) -> Value {
        let Some((workspace, index, file, offset)) = self.locate(params) else { return Value::Null };
        let Some(name) = index.name_at(file, offset) else { return Value::Null };
        match index.hover(&workspace.sources, name) {
            Some(text) => json!({ "contents": { "kind": "markdown", "value": text } }),
            None => Value::Null,
        }
    }

    fn definition(&self, params: &Value) -> Value {
        let Some((workspace, index, file, offset)) = self.locate(params) else { return Value::Null };
        let Some(span) = index.name_at(file, offset).and_then(|n| index.definition(n)) else { return Value::Null };
        self.location(&workspace, span)
    }

    fn references(&self, params: &Value) -> Value {
        let Some((workspace, index, file, offset)) = self.locate(params) else { return Value::Null };
        let Some(name) = index.name_at(file, offset) else { return json!([]) };
        let declaration = params["context"]["includeDeclaration"].as_bool().unwrap_or(true);
        Value::Array(index.references(name, declaration).into_iter().map(|s| self.location(&workspace, s)).collect())
    }

    fn completion(&self, params: &Value) -> Value {
        let Some((workspace, index, file, offset)) = self.locate(params) else { return json!([]) };
        let text = &workspace.sources.file(file).text;
        let items: Vec<Value> = index
            .complete(text, offset)
            .into_iter()
            .map(|c| {
                let kind = match c.kind {
                    CompletionKind::Field => 5,
                    CompletionKind::Keyword => 14,
                    CompletionKind::Name(SymbolKind::Tool) => 3,
                    CompletionKind::Name(SymbolKind::Effect | SymbolKind::Kind | SymbolKind::Enum) => 7,
                    CompletionKind::Name(SymbolKind::Mandate) => 9,
                    CompletionKind::Name(_) => 21,
                };
                json!({ "label": c.label, "detail": c.detail, "kind": kind })
            })
            .collect();
        Value::Array(items)
    }

    fn symbols(&self, params: &Value) -> Value {
        let Some(path) = params["textDocument"]["uri"].as_str().and_then(uri_to_path) else { return json!([]) };
        let Some(workspace) = self.workspace(&path) else { return json!([]) };
        let Some(file) = workspace.file_of(&path) else { return json!([]) };
        let index = Index::build(&workspace.sources);
        let symbols: Vec<Value> = index
            .outline(file)
            .into_iter()
            .map(|s| {
                let kind = match s.kind {
                    SymbolKind::Tool => 12,     // function
                    SymbolKind::Effect => 5,    // class
                    SymbolKind::Mandate => 2,   // module
                    SymbolKind::Approval => 23, // struct
                    SymbolKind::Enum => 10,
                    SymbolKind::Level => 22, // enum member
                    SymbolKind::Kind => 26,  // type parameter
                    SymbolKind::Context => 13,
                };
                json!({
                    "name": s.name,
                    "detail": s.kind.as_str(),
                    "kind": kind,
                    "range": self.range(&workspace.sources, s.decl_span),
                    "selectionRange": self.range(&workspace.sources, s.span),
                })
            })
            .collect();
        Value::Array(symbols)
    }

    fn location(&self, workspace: &Workspace, span: Span) -> Value {
        let path = &workspace.paths[span.file as usize];
        if workspace.sources.file(span.file).name.starts_with("std/") {
            write_stdlib(path, &workspace.sources.file(span.file).text);
        }
        json!({ "uri": path_to_uri(path), "range": self.range(&workspace.sources, span) })
    }

    fn range(&self, sources: &SourceMap, span: Span) -> Value {
        let text = &sources.file(span.file).text;
        let (l1, c1) = self.position(text, span.start as usize);
        let (l2, c2) = self.position(text, span.end as usize);
        json!({ "start": { "line": l1, "character": c1 }, "end": { "line": l2, "character": c2 } })
    }

    /// Line and character (UTF-16 code units, or bytes with UTF-8) of a byte offset.
    fn position(&self, text: &str, offset: usize) -> (usize, usize) {
        let offset = offset.min(text.len());
        let before = &text[..offset];
        let line = before.matches('\n').count();
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = &text[line_start..offset];
        (line, if self.utf8 { column.len() } else { column.encode_utf16().count() })
    }

    /// The byte offset of a line and character.
    fn offset(&self, text: &str, line: usize, character: usize) -> usize {
        let line_start = if line == 0 {
            0
        } else {
            match text.match_indices('\n').nth(line - 1) {
                Some((i, _)) => i + 1,
                None => return text.len(),
            }
        };
        let line_text = text[line_start..].split('\n').next().unwrap_or("");
        let mut units = 0;
        for (i, c) in line_text.char_indices() {
            if units >= character {
                return line_start + i;
            }
            units += if self.utf8 { c.len_utf8() } else { c.len_utf16() };
        }
        line_start + line_text.len()
    }
}

/// Where the standard library's files are shown from (one folder per remit version).
fn stdlib_folder() -> PathBuf {
    std::env::temp_dir().join(format!("remit-stdlib-{}", env!("CARGO_PKG_VERSION")))
}

fn write_stdlib(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return;
    }
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = std::fs::write(path, text);
}

/// `file:///a%20b/c.remit` → `/a b/c.remit`.
fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8(out).ok()?))
}

/// `/a b/c.remit` → `file:///a%20b/c.remit`.
fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
