//! `remit lsp`: a language server over stdio (LSP 3.17). Small handlers over [`remit_lang::analysis`] and
//! [`remit_lang::check`]; the JSON-RPC framing and envelopes are `lsp-server`'s and the messages `lsp-types`', so
//! this file only speaks the protocol and reads the disk.
//!
//! - Diagnostics as you type: on every open, change or save, the document's policy set is re-checked (its
//!   folder's `.remit` files, recursively, with the editor's unsaved texts in place of the disk's) and every file
//!   of the set gets the diagnostics `remit check` would print — same codes, messages and help.
//! - Hover, go to definition, find references, completion (names, keywords, and `args.` with the parameters of
//!   the clause's tool or class), document symbols.
//! - Positions are UTF-16 code units unless the client offers UTF-8 (LSP 3.17 `positionEncodings`).
//! - Standard-library declarations are written once to a folder under the system's temporary directory so that
//!   "go to definition" on `make_payment` opens a real file.
//! - One message at a time, on the calling thread (the analysis is synchronous). A message whose body is not
//!   JSON-RPC is skipped; a broken frame ends the session. Exit status: 0 after `shutdown` and `exit` or at the end
//!   of the input, 1 for `exit` without `shutdown` (LSP 3.17), 2 when the client cannot be read or written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use lsp_server::{ErrorCode, Message, Notification, Request, Response};
use lsp_types as lsp; // for the names remit has too: `lsp::Diagnostic`, `lsp::SymbolKind`
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument, Exit,
    Notification as NotificationKind, PublishDiagnostics,
};
use lsp_types::request::{
    Completion, DocumentSymbolRequest, GotoDefinition, HoverRequest, Initialize, References, Request as RequestKind,
    Shutdown,
};
use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionOptions, CompletionParams, CompletionResponse,
    DiagnosticRelatedInformation, DiagnosticSeverity, DocumentSymbol, DocumentSymbolParams, DocumentSymbolResponse,
    GotoDefinitionParams, GotoDefinitionResponse, Hover, HoverContents, HoverParams, InitializeResult, Location,
    MarkupContent, MarkupKind, NumberOrString, OneOf, Position, PositionEncodingKind, PublishDiagnosticsParams, Range,
    ReferenceParams, SaveOptions, ServerCapabilities, ServerInfo, TextDocumentPositionParams, TextDocumentSyncKind,
    TextDocumentSyncOptions, Url,
};
use remit_lang::analysis::{CompletionKind, Index, SymbolKind};
use remit_lang::check::{check_with, Options};
use remit_lang::diag::{Diagnostic, Severity};
use remit_lang::source::{SourceMap, Span};
use serde_json::Value;

pub fn run() -> Result<ExitCode, String> {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut server = Server::default();
    loop {
        let message = match Message::read(&mut input) {
            Ok(Some(message)) => message,
            Ok(None) => return Ok(ExitCode::SUCCESS),
            Err(e) if read_whole_frame(&e) => {
                eprintln!("remit lsp: skipped a message: {e}");
                continue;
            }
            Err(e) => return Err(format!("cannot read from the client: {e}")),
        };
        if matches!(&message, Message::Notification(n) if n.method == Exit::METHOD) {
            return Ok(if server.shut_down { ExitCode::SUCCESS } else { ExitCode::from(1) });
        }
        let replies = match message {
            Message::Request(request) => vec![server.respond(request).into()],
            Message::Notification(n) => server.notified(n).into_iter().map(Message::from).collect(),
            Message::Response(_) => Vec::new(), // the server sends no requests, so it awaits no responses
        };
        for reply in replies {
            reply.write(&mut output).map_err(|e| format!("cannot write to the client: {e}"))?;
        }
    }
}

/// Whether [`Message::read`] failed only after consuming a whole frame (its body is not UTF-8 or not a JSON-RPC
/// message), so that the next frame can still be read. lsp-server says so only in its error's text; the test
/// `malformed_input_and_exit_statuses` (tests/lsp.rs) notices if that text changes.
fn read_whole_frame(error: &std::io::Error) -> bool {
    let not_utf8 = error.get_ref().is_some_and(|inner| inner.is::<std::string::FromUtf8Error>());
    not_utf8 || error.to_string().starts_with("malformed LSP payload")
}

#[derive(Default)]
struct Server {
    /// Unsaved texts of open documents, by path.
    open: BTreeMap<PathBuf, String>,
    /// Files that were last sent diagnostics, so fixed files get an empty list.
    published: BTreeSet<PathBuf>,
    utf8: bool,
    shut_down: bool,
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
    fn respond(&mut self, request: Request) -> Response {
        match request.method.as_str() {
            Initialize::METHOD => Response::new_ok(request.id, self.initialize(&request.params)),
            Shutdown::METHOD => {
                self.shut_down = true; // and requests until `exit` are still answered, as they always were
                Response::new_ok(request.id, ())
            }
            HoverRequest::METHOD => self.answer::<HoverRequest>(request, Server::hover),
            GotoDefinition::METHOD => self.answer::<GotoDefinition>(request, Server::definition),
            References::METHOD => self.answer::<References>(request, Server::references),
            Completion::METHOD => self.answer::<Completion>(request, Server::completion),
            DocumentSymbolRequest::METHOD => self.answer::<DocumentSymbolRequest>(request, Server::symbols),
            method => {
                let message = format!("`{method}` is not supported");
                Response::new_err(request.id, ErrorCode::MethodNotFound as i32, message)
            }
        }
    }

    /// Answers a request with `handler`, typed by its method; parameters that are not the method's are an error.
    fn answer<R: RequestKind>(&self, request: Request, handler: fn(&Server, R::Params) -> R::Result) -> Response {
        match serde_json::from_value(request.params) {
            Ok(params) => Response::new_ok(request.id, handler(self, params)),
            Err(e) => {
                let message = format!("invalid parameters for `{}`: {e}", R::METHOD);
                Response::new_err(request.id, ErrorCode::InvalidParams as i32, message)
            }
        }
    }

    /// Handles a notification; its answer, if any, is diagnostics to publish.
    fn notified(&mut self, notification: Notification) -> Vec<Notification> {
        let Notification { method, params } = notification;
        match method.as_str() {
            DidOpenTextDocument::METHOD => self.on::<DidOpenTextDocument>(params, |server, p| {
                server.update(&p.text_document.uri, Some(p.text_document.text))
            }),
            DidChangeTextDocument::METHOD => self.on::<DidChangeTextDocument>(params, |server, p| {
                let text = p.content_changes.into_iter().last().map(|change| change.text);
                server.update(&p.text_document.uri, text)
            }),
            DidSaveTextDocument::METHOD => {
                self.on::<DidSaveTextDocument>(params, |server, p| server.update(&p.text_document.uri, None))
            }
            DidCloseTextDocument::METHOD => self.on::<DidCloseTextDocument>(params, |server, p| {
                if let Some(path) = file_path(&p.text_document.uri) {
                    server.open.remove(&path);
                }
                Vec::new()
            }),
            _ => Vec::new(), // other notifications need no answer
        }
    }

    /// Handles a notification with `handler`, typed by its method. A notification has no answer to carry an
    /// error, so parameters that are not the method's are reported on stderr (the client's log) and ignored.
    fn on<N: NotificationKind>(
        &mut self,
        params: Value,
        handler: fn(&mut Self, N::Params) -> Vec<Notification>,
    ) -> Vec<Notification> {
        match serde_json::from_value(params) {
            Ok(params) => handler(self, params),
            Err(e) => {
                eprintln!("remit lsp: ignored `{}`: invalid parameters: {e}", N::METHOD);
                Vec::new()
            }
        }
    }

    /// Only the position encodings are read of the client's capabilities: capabilities this server does not use
    /// must not fail the start (lsp-types' enums refuse values added to the protocol after them).
    fn initialize(&mut self, params: &Value) -> InitializeResult {
        let offered = &params["capabilities"]["general"]["positionEncodings"];
        let offered: Vec<PositionEncodingKind> = serde_json::from_value(offered.clone()).unwrap_or_default();
        self.utf8 = offered.contains(&PositionEncodingKind::UTF8);
        let sync = TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::FULL),
            save: Some(SaveOptions { include_text: Some(false) }.into()),
            ..Default::default()
        };
        let capabilities = ServerCapabilities {
            position_encoding: Some(if self.utf8 { PositionEncodingKind::UTF8 } else { PositionEncodingKind::UTF16 }),
            text_document_sync: Some(sync.into()),
            hover_provider: Some(true.into()),
            definition_provider: Some(OneOf::Left(true)),
            references_provider: Some(OneOf::Left(true)),
            completion_provider: Some(CompletionOptions {
                trigger_characters: Some(vec![".".into()]),
                ..Default::default()
            }),
            document_symbol_provider: Some(OneOf::Left(true)),
            ..Default::default()
        };
        let version = Some(env!("CARGO_PKG_VERSION").to_string());
        InitializeResult { capabilities, server_info: Some(ServerInfo { name: "remit".to_string(), version }) }
    }

    /// Records an opened or changed text and publishes the diagnostics of its policy set.
    fn update(&mut self, uri: &Url, text: Option<String>) -> Vec<Notification> {
        let Some(path) = file_path(uri) else { return Vec::new() };
        if let Some(text) = text {
            self.open.insert(path.clone(), text);
        }
        let Some(workspace) = self.workspace(&path) else { return Vec::new() };
        let checked = check_with(workspace.sources.clone(), Options { narrowing: true });
        let mut by_file: BTreeMap<PathBuf, Vec<lsp::Diagnostic>> = BTreeMap::new();
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
            let Some(uri) = file_uri(&file) else { continue };
            if diagnostics.is_empty() {
                self.published.remove(&file);
            } else {
                self.published.insert(file);
            }
            let params = PublishDiagnosticsParams { uri, diagnostics, version: None };
            out.push(Notification::new(PublishDiagnostics::METHOD.to_string(), params));
        }
        out
    }

    fn diagnostic(&self, workspace: &Workspace, d: &Diagnostic, span: Span) -> lsp::Diagnostic {
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        let related = d
            .labels
            .iter()
            .filter_map(|label| {
                Some(DiagnosticRelatedInformation {
                    location: self.location(workspace, label.span)?,
                    message: if label.message.is_empty() { d.message.clone() } else { label.message.clone() },
                })
            })
            .collect();
        let range = self.range(&workspace.sources, span);
        let severity = match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        };
        let (code, source) = (NumberOrString::String(d.code.to_string()), "remit".to_string());
        lsp::Diagnostic::new(range, Some(severity), Some(code), Some(source), message, Some(related), None)
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

    /// The workspace, index and file id of a document.
    fn document(&self, uri: &Url) -> Option<(Workspace, Index, u32)> {
        let path = file_path(uri)?;
        let workspace = self.workspace(&path)?;
        let file = workspace.file_of(&path)?;
        let index = Index::build(&workspace.sources);
        Some((workspace, index, file))
    }

    /// The workspace, index, file id and byte offset of a request's document and position.
    fn locate(&self, at: &TextDocumentPositionParams) -> Option<(Workspace, Index, u32, usize)> {
        let (workspace, index, file) = self.document(&at.text_document.uri)?;
        let offset = self.offset(&workspace.sources.file(file).text, at.position);
        Some((workspace, index, file, offset))
    }

    fn hover(&self, params: HoverParams) -> Option<Hover> {
        let (workspace, index, file, offset) = self.locate(&params.text_document_position_params)?;
        // A template's parameter first: its name is local to the template, and may be any declared name too.
        let text = match index.parameter_hover(&workspace.sources, file, offset) {
            Some(text) => text,
            None => index.hover(&workspace.sources, index.name_at(file, offset)?)?,
        };
        let contents = HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: text });
        Some(Hover { contents, range: None })
    }

    fn definition(&self, params: GotoDefinitionParams) -> Option<GotoDefinitionResponse> {
        let (workspace, index, file, offset) = self.locate(&params.text_document_position_params)?;
        let span = match index.parameter_definition(&workspace.sources, file, offset) {
            Some(span) => span,
            None => index.definition(index.name_at(file, offset)?)?,
        };
        self.location(&workspace, span).map(GotoDefinitionResponse::Scalar)
    }

    fn references(&self, params: ReferenceParams) -> Option<Vec<Location>> {
        let (workspace, index, file, offset) = self.locate(&params.text_document_position)?;
        let Some(name) = index.name_at(file, offset) else { return Some(Vec::new()) };
        let spans = index.references(name, params.context.include_declaration);
        Some(spans.into_iter().filter_map(|span| self.location(&workspace, span)).collect())
    }

    fn completion(&self, params: CompletionParams) -> Option<CompletionResponse> {
        let Some((workspace, index, file, offset)) = self.locate(&params.text_document_position) else {
            return Some(CompletionResponse::Array(Vec::new()));
        };
        let text = &workspace.sources.file(file).text;
        let items = index
            .complete_at(file, text, offset)
            .into_iter()
            .map(|c| CompletionItem {
                kind: Some(match c.kind {
                    CompletionKind::Field => CompletionItemKind::FIELD,
                    CompletionKind::Parameter => CompletionItemKind::VARIABLE,
                    CompletionKind::Keyword => CompletionItemKind::KEYWORD,
                    CompletionKind::Name(SymbolKind::Tool) => CompletionItemKind::FUNCTION,
                    CompletionKind::Name(SymbolKind::Effect | SymbolKind::Kind | SymbolKind::Enum) => {
                        CompletionItemKind::CLASS
                    }
                    CompletionKind::Name(SymbolKind::Mandate | SymbolKind::Template) => CompletionItemKind::MODULE,
                    CompletionKind::Name(_) => CompletionItemKind::CONSTANT,
                }),
                ..CompletionItem::new_simple(c.label, c.detail)
            })
            .collect();
        Some(CompletionResponse::Array(items))
    }

    fn symbols(&self, params: DocumentSymbolParams) -> Option<DocumentSymbolResponse> {
        let Some((workspace, index, file)) = self.document(&params.text_document.uri) else {
            return Some(DocumentSymbolResponse::Nested(Vec::new()));
        };
        #[allow(deprecated)] // `DocumentSymbol::deprecated` must be written, though it is not used
        let symbols = index.outline(file).into_iter().map(|s| DocumentSymbol {
            name: s.name.clone(),
            detail: Some(s.kind.as_str().to_string()),
            kind: match s.kind {
                SymbolKind::Tool => lsp::SymbolKind::FUNCTION,
                SymbolKind::Effect => lsp::SymbolKind::CLASS,
                SymbolKind::Mandate | SymbolKind::Template => lsp::SymbolKind::MODULE,
                SymbolKind::Approval => lsp::SymbolKind::STRUCT,
                SymbolKind::Enum => lsp::SymbolKind::ENUM,
                SymbolKind::Level => lsp::SymbolKind::ENUM_MEMBER,
                SymbolKind::Kind => lsp::SymbolKind::TYPE_PARAMETER,
                SymbolKind::Context => lsp::SymbolKind::VARIABLE,
                SymbolKind::Entity => lsp::SymbolKind::OBJECT,
                SymbolKind::Relation => lsp::SymbolKind::INTERFACE,
                SymbolKind::Calendar => lsp::SymbolKind::EVENT,
            },
            tags: None,
            deprecated: None,
            range: self.range(&workspace.sources, s.decl_span),
            selection_range: self.range(&workspace.sources, s.span),
            children: None,
        });
        Some(DocumentSymbolResponse::Nested(symbols.collect()))
    }

    fn location(&self, workspace: &Workspace, span: Span) -> Option<Location> {
        let path = workspace.paths.get(span.file as usize)?;
        if workspace.sources.file(span.file).name.starts_with("std/") {
            write_stdlib(path, &workspace.sources.file(span.file).text);
        }
        Some(Location { uri: file_uri(path)?, range: self.range(&workspace.sources, span) })
    }

    fn range(&self, sources: &SourceMap, span: Span) -> Range {
        let text = &sources.file(span.file).text;
        Range { start: self.position(text, span.start as usize), end: self.position(text, span.end as usize) }
    }

    /// The line and character (UTF-16 code units, or bytes with UTF-8) of a byte offset.
    fn position(&self, text: &str, offset: usize) -> Position {
        let offset = offset.min(text.len());
        let before = &text[..offset];
        let line = before.matches('\n').count();
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = &text[line_start..offset];
        let character = if self.utf8 { column.len() } else { column.encode_utf16().count() };
        Position { line: line as u32, character: character as u32 }
    }

    /// The byte offset of a line and character.
    fn offset(&self, text: &str, position: Position) -> usize {
        let line_start = match position.line as usize {
            0 => 0,
            line => match text.match_indices('\n').nth(line - 1) {
                Some((i, _)) => i + 1,
                None => return text.len(),
            },
        };
        let line_text = text[line_start..].split('\n').next().unwrap_or("");
        let mut units = 0;
        for (i, c) in line_text.char_indices() {
            if units >= position.character as usize {
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

/// `file:///a%20b/c.remit` → `/a b/c.remit`; `None` for a document that is not a file (`untitled:`).
fn file_path(uri: &Url) -> Option<PathBuf> {
    uri.to_file_path().ok().filter(|_| uri.scheme() == "file")
}

/// `/a b/c.remit` → `file:///a%20b/c.remit`; `None` for a relative path, which no file URI names.
fn file_uri(path: &Path) -> Option<Url> {
    Url::from_file_path(path).ok()
}
