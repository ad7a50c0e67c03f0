//! Questions an editor asks about a policy set, answered from its syntax trees: where a name is declared, where
//! it is used, what it is (hover), what may be typed here (completion), and the outline of a file. Pure: a
//! [`SourceMap`] in, spans and text out; the language server (`remit lsp`, in the cli) turns them into protocol
//! messages. Diagnostics come from [`crate::check`] itself, so an editor shows exactly what `remit check` says.
//!
//! Files that do not parse contribute nothing here (their syntax error is a diagnostic), so the answers stay
//! those of the last state of every other file.

use std::collections::BTreeMap;

use crate::source::{FileId, SourceMap, Span};
use crate::syntax::ast::{Clause, ClauseKind, Decl, File, Name, Target, TypeExpr};
use crate::syntax::parse_file;

/// What a declared name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SymbolKind {
    Tool,
    Effect,
    Approval,
    Mandate,
    Template,
    Level,
    Kind,
    Enum,
    Context,
    /// `subject NAME { … }` / `resource NAME { … }`.
    Entity,
    Relation,
    Calendar,
}

impl SymbolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SymbolKind::Tool => "tool",
            SymbolKind::Effect => "effect class",
            SymbolKind::Approval => "approval kind",
            SymbolKind::Mandate => "mandate",
            SymbolKind::Template => "template",
            SymbolKind::Level => "level",
            SymbolKind::Kind => "identifier kind",
            SymbolKind::Enum => "enum",
            SymbolKind::Context => "context attribute",
            SymbolKind::Entity => "subject or resource type",
            SymbolKind::Relation => "relation",
            SymbolKind::Calendar => "calendar",
        }
    }
}

/// A declaration: its name, what it is, and where the name is written.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    pub span: Span,
    /// The whole declaration.
    pub decl_span: Span,
}

/// Every declaration and every use of a declared name in a policy set.
#[derive(Debug, Default)]
pub struct Index {
    pub symbols: Vec<Symbol>,
    /// Spans where a name is used (not declared), with the name.
    pub uses: Vec<(Span, String)>,
    files: BTreeMap<FileId, File>,
    /// `///` comments right above a declaration, by declared name.
    docs: BTreeMap<String, String>,
    /// The parameters of every template: names local to their template, so looked up by position.
    params: Vec<TemplateParamInfo>,
}

/// A template's parameter as an editor shows it.
#[derive(Debug, Clone)]
struct TemplateParamInfo {
    template: String,
    name: String,
    ty: String,
    /// The bound as written, on one line.
    bound: Option<String>,
    span: Span,
    /// The whole template declaration: where the parameter may be named.
    template_span: Span,
}

impl Index {
    pub fn build(sources: &SourceMap) -> Index {
        let mut index = Index::default();
        for (id, file) in sources.files() {
            let Ok(parsed) = parse_file(id, &file.text) else { continue };
            for (decl, &span) in parsed.decls.iter().zip(&parsed.spans) {
                index.declare(decl, span, &file.text);
            }
            index.files.insert(id, parsed);
        }
        index
    }

    fn define(&mut self, name: &str, kind: SymbolKind, span: Span, decl_span: Span, text: &str) {
        self.symbols.push(Symbol { name: name.to_string(), kind, span, decl_span });
        let doc = doc_comment(text, decl_span.start as usize);
        if !doc.is_empty() {
            self.docs.insert(name.to_string(), doc);
        }
    }

    fn declare(&mut self, decl: &Decl, span: Span, text: &str) {
        match decl {
            Decl::Import(_) => {}
            Decl::Effect(e) => {
                self.define(&e.name.text, SymbolKind::Effect, e.name.span, span, text);
                e.params.iter().for_each(|p| self.type_uses(&p.ty));
            }
            Decl::Levels(l) => {
                for level in &l.levels {
                    self.define(&level.text, SymbolKind::Level, level.span, span, text);
                }
            }
            Decl::Kind(name) => self.define(&name.text, SymbolKind::Kind, name.span, span, text),
            Decl::Enum(e) => self.define(&e.name.text, SymbolKind::Enum, e.name.span, span, text),
            Decl::Context(c) => {
                self.define(&c.name.text, SymbolKind::Context, c.name.span, span, text);
                self.type_uses(&c.ty);
            }
            Decl::Approval(a) => self.define(&a.name.text, SymbolKind::Approval, a.name.span, span, text),
            Decl::Tool(t) => {
                self.define(&t.name.text, SymbolKind::Tool, t.name.span, span, text);
                t.params.iter().for_each(|p| self.type_uses(&p.ty));
                for effect in &t.effects {
                    self.uses.push((effect.span, effect.text.clone()));
                }
                if let Some(level) = &t.level {
                    self.uses.push((level.span, level.text.clone()));
                }
                for resource_type in &t.resource_types {
                    self.uses.push((resource_type.span, resource_type.text.clone()));
                }
            }
            Decl::Classify(c) => {
                for name in c.tools.iter().chain(&c.classes) {
                    self.uses.push((name.span, name.text.clone()));
                }
            }
            Decl::Mandate(m) => {
                self.define(&m.name.text, SymbolKind::Mandate, m.name.span, span, text);
                self.parent_and_clause_uses(m.parent.as_ref(), &m.clauses);
            }
            Decl::Template(t) => {
                self.define(&t.name.text, SymbolKind::Template, t.name.span, span, text);
                t.params.iter().for_each(|p| self.type_uses(&p.ty));
                self.parent_and_clause_uses(Some(&t.parent), &t.clauses);
                for p in &t.params {
                    self.params.push(TemplateParamInfo {
                        template: t.name.text.clone(),
                        name: p.name.text.clone(),
                        ty: type_text(&p.ty),
                        bound: p.bound.as_ref().map(|b| {
                            let s = b.span();
                            crate::syntax::format::one_line(&text[s.start as usize..s.end as usize])
                        }),
                        span: p.name.span,
                        template_span: span,
                    });
                }
            }
            Decl::Entity(e) => {
                self.define(&e.name.text, SymbolKind::Entity, e.name.span, span, text);
                e.attributes.iter().for_each(|a| self.type_uses(&a.ty));
            }
            Decl::Relation(r) => {
                self.define(&r.name.text, SymbolKind::Relation, r.name.span, span, text);
                r.params.iter().for_each(|ty| self.type_uses(ty));
            }
            Decl::Calendar(c) => self.define(&c.name.text, SymbolKind::Calendar, c.name.span, span, text),
        }
    }

    fn type_uses(&mut self, ty: &TypeExpr) {
        match ty {
            TypeExpr::Named(name) => self.uses.push((name.span, name.text.clone())),
            TypeExpr::Set(inner, _) => self.type_uses(inner),
        }
    }

    fn parent_and_clause_uses(&mut self, parent: Option<&Name>, clauses: &[Clause]) {
        if let Some(parent) = parent {
            self.uses.push((parent.span, parent.text.clone()));
        }
        for clause in clauses {
            let target = match &clause.kind {
                ClauseKind::MaxLevel(level) => {
                    self.uses.push((level.span, level.text.clone()));
                    None
                }
                ClauseKind::Gate { approval, target, .. } => {
                    self.uses.push((approval.span, approval.text.clone()));
                    Some(target)
                }
                ClauseKind::Allow { target, .. }
                | ClauseKind::Forbid { target, .. }
                | ClauseKind::Limit { target, .. }
                | ClauseKind::Scope { target, .. }
                | ClauseKind::RequireOperationId { target }
                | ClauseKind::Budget { target, .. }
                | ClauseKind::Fact { target, .. } => Some(target),
                _ => None,
            };
            if let Some(Target::Named(name)) = target {
                self.uses.push((name.span, name.text.clone()));
            }
        }
    }

    /// The declarations named `name` (several only in a policy with a duplicate, which `check` reports).
    pub fn lookup<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Symbol> + 'a {
        self.symbols.iter().filter(move |s| s.name == name)
    }

    /// The declared name written at `offset` of `file`, whether declared or used there.
    pub fn name_at(&self, file: FileId, offset: usize) -> Option<&str> {
        let inside = |span: &Span| span.file == file && span.start as usize <= offset && offset <= span.end as usize;
        if let Some(symbol) = self.symbols.iter().find(|s| inside(&s.span)) {
            return Some(&symbol.name);
        }
        let (_, name) = self.uses.iter().find(|(span, _)| inside(span))?;
        self.lookup(name).next().map(|s| s.name.as_str())
    }

    /// Where `name` is declared.
    pub fn definition(&self, name: &str) -> Option<Span> {
        self.lookup(name).next().map(|s| s.span)
    }

    /// Every use of `name`, in file and position order; with `declaration`, its declaration too.
    pub fn references(&self, name: &str, declaration: bool) -> Vec<Span> {
        let mut out: Vec<Span> = self.uses.iter().filter(|(_, n)| n == name).map(|(s, _)| *s).collect();
        if declaration {
            out.extend(self.lookup(name).map(|s| s.span));
        }
        out.sort();
        out.dedup();
        out
    }

    /// The declarations of `file`, in order: the outline an editor shows.
    pub fn outline(&self, file: FileId) -> Vec<&Symbol> {
        let mut out: Vec<&Symbol> = self.symbols.iter().filter(|s| s.span.file == file).collect();
        out.sort_by_key(|s| s.span.start);
        out
    }

    /// Markdown describing `name`: a tool's parameters, classes, level and side effects; a class's member tools;
    /// a mandate's chain and what it grants; an approval kind's bindings.
    pub fn hover(&self, sources: &SourceMap, name: &str) -> Option<String> {
        let symbol = self.lookup(name).next()?;
        let decl_text = |span: Span| sources.snippet(span).to_string();
        let mut out = format!("**{}** `{}`\n\n", symbol.kind.as_str(), symbol.name);
        if let Some(doc) = self.docs.get(name) {
            out.push_str(doc);
            out.push_str("\n\n");
        }
        match symbol.kind {
            SymbolKind::Tool => {
                let tool = self.find_decl(|d| matches!(d, Decl::Tool(t) if t.name.text == name))?;
                let Decl::Tool(t) = tool else { return None };
                let params: Vec<String> =
                    t.params.iter().map(|p| format!("{}: {}", p.name.text, type_text(&p.ty))).collect();
                out.push_str(&format!("```remit\ntool {}({})\n```\n", t.name.text, params.join(", ")));
                let effects: Vec<&str> = t.effects.iter().map(|e| e.text.as_str()).collect();
                out.push_str(&format!(
                    "- classes: {}\n- level: {}\n- side effects: {}\n",
                    if effects.is_empty() { "none".to_string() } else { effects.join(", ") },
                    t.level.as_ref().map_or("the lowest", |l| l.text.as_str()),
                    if t.side_effects { "yes (stops refuse it)" } else { "no" },
                ));
                if !t.scopes.is_empty() {
                    let scopes: Vec<&str> = t.scopes.iter().map(|(s, _)| s.as_str()).collect();
                    out.push_str(&format!("- credential scopes (one of): {}\n", scopes.join(", ")));
                }
                if let Some(target) = t.targets.first() {
                    out.push_str(&format!("- target: `args.{}` (the gateway's `resource.id`)\n", target.text));
                }
                if let Some(resource_type) = t.resource_types.first() {
                    out.push_str(&format!(
                        "- acts on: `{}` resources (their attributes are looked up as this type)\n",
                        resource_type.text
                    ));
                }
                if t.administers_mandates {
                    out.push_str("- administers mandates: never grantable\n");
                }
            }
            SymbolKind::Effect => {
                let members: Vec<String> = self
                    .decls()
                    .filter_map(|d| match d {
                        Decl::Tool(t) if t.effects.iter().any(|e| e.text == name) => Some(t.name.text.clone()),
                        _ => None,
                    })
                    .collect();
                out.push_str(&format!("```remit\n{}\n```\n", decl_text(symbol.decl_span).trim()));
                out.push_str(&format!(
                    "member tools ({}): {}\n",
                    members.len(),
                    if members.is_empty() { "none yet".to_string() } else { members.join(", ") }
                ));
            }
            SymbolKind::Mandate => {
                let mut chain = vec![name.to_string()];
                let mut current = name.to_string();
                while let Some(Decl::Mandate(m)) =
                    self.find_decl(|d| matches!(d, Decl::Mandate(m) if m.name.text == current))
                {
                    match &m.parent {
                        Some(parent) if !chain.contains(&parent.text) => {
                            chain.insert(0, parent.text.clone());
                            current = parent.text.clone();
                        }
                        _ => break,
                    }
                }
                out.push_str(&format!("chain: {}\n\n", chain.join(" → ")));
                if let Some(Decl::Mandate(m)) = self.find_decl(|d| matches!(d, Decl::Mandate(m) if m.name.text == name))
                {
                    for clause in &m.clauses {
                        let text: String =
                            sources.snippet(clause.span).split_whitespace().collect::<Vec<_>>().join(" ");
                        match &clause.kind {
                            ClauseKind::Holder(_) | ClauseKind::Purpose(_) | ClauseKind::Allow { .. } => {
                                out.push_str(&format!("- {text}\n"));
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => out.push_str(&format!("```remit\n{}\n```\n", decl_text(symbol.decl_span).trim())),
        }
        Some(out)
    }

    /// The parameter of a template named by the word at `offset` of `file` (declared or used inside the template),
    /// as markdown: its type, its bound and the template it belongs to.
    pub fn parameter_hover(&self, sources: &SourceMap, file: FileId, offset: usize) -> Option<String> {
        let text = &sources.file(file).text;
        let word = word_at(text, offset)?;
        let param = self.template_param_at(file, offset, word)?;
        let mut out = format!(
            "**parameter** `{}` of template `{}`

",
            param.name, param.template
        );
        out.push_str(&format!(
            "```remit
{}: {}",
            param.name, param.ty
        ));
        if let Some(bound) = &param.bound {
            out.push_str(&format!(" where {bound}"));
        }
        out.push_str(
            "
```
constant per instance: chosen when an instance is granted, within its bound
",
        );
        Some(out)
    }

    /// Where the template parameter named at `offset` of `file` is declared.
    pub fn parameter_definition(&self, sources: &SourceMap, file: FileId, offset: usize) -> Option<Span> {
        let word = word_at(&sources.file(file).text, offset)?;
        self.template_param_at(file, offset, word).map(|p| p.span)
    }

    /// The declared parameter `word` of the template whose declaration holds `offset`.
    fn template_param_at(&self, file: FileId, offset: usize, word: &str) -> Option<&TemplateParamInfo> {
        self.params.iter().find(|p| {
            let t = p.template_span;
            t.file == file && t.start as usize <= offset && offset <= t.end as usize && p.name == word
        })
    }

    /// [`Index::complete`], plus, inside a template, its parameters and the implicit ones (`principal`, `holder`,
    /// `granted`).
    pub fn complete_at(&self, file: FileId, text: &str, offset: usize) -> Vec<Completion> {
        let mut out = self.complete(text, offset);
        let before = &text[..offset.min(text.len())];
        let word_start =
            before.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).map_or(0, |i| i + 1);
        let word = &before[word_start..];
        if word.contains('.') {
            return out;
        }
        let inside = |span: Span| span.file == file && span.start as usize <= offset && offset <= span.end as usize;
        let mut params: Vec<Completion> = self
            .params
            .iter()
            .filter(|p| inside(p.template_span) && p.name.starts_with(word))
            .map(|p| Completion { label: p.name.clone(), detail: p.ty.clone(), kind: CompletionKind::Parameter })
            .collect();
        if self.params.iter().any(|p| inside(p.template_span))
            || self.symbols.iter().any(|s| s.kind == SymbolKind::Template && inside(s.decl_span))
        {
            for (name, ty) in crate::ir::IMPLICIT_PARAMS {
                if name.starts_with(word) {
                    let detail = format!("{} (every instance's)", ty.display());
                    params.push(Completion { label: name.to_string(), detail, kind: CompletionKind::Parameter });
                }
            }
        }
        out.retain(|c| !params.iter().any(|p| p.label == c.label));
        out.extend(params);
        out.sort_by(|a, b| a.label.cmp(&b.label));
        out
    }

    fn decls(&self) -> impl Iterator<Item = &Decl> {
        self.files.values().flat_map(|f| f.decls.iter())
    }

    fn find_decl(&self, pred: impl Fn(&Decl) -> bool) -> Option<&Decl> {
        self.decls().find(|d| pred(d))
    }

    /// The parameters `args.` may name in a clause about `target` (a tool, or a class: its own parameters and
    /// those every member tool declares).
    pub fn arguments_of(&self, target: &str) -> Vec<(String, String)> {
        for decl in self.decls() {
            match decl {
                Decl::Tool(t) if t.name.text == target => {
                    return t.params.iter().map(|p| (p.name.text.clone(), type_text(&p.ty))).collect();
                }
                Decl::Effect(e) if e.name.text == target => {
                    let mut params: Vec<(String, String)> =
                        e.params.iter().map(|p| (p.name.text.clone(), type_text(&p.ty))).collect();
                    let members: Vec<&crate::syntax::ast::ToolDecl> = self
                        .decls()
                        .filter_map(|d| match d {
                            Decl::Tool(t) if t.effects.iter().any(|x| x.text == target) => Some(t),
                            _ => None,
                        })
                        .collect();
                    if let Some(first) = members.first() {
                        for p in &first.params {
                            let ty = type_text(&p.ty);
                            let everywhere = members
                                .iter()
                                .all(|m| m.params.iter().any(|q| q.name.text == p.name.text && type_text(&q.ty) == ty));
                            if everywhere && !params.iter().any(|(n, _)| *n == p.name.text) {
                                params.push((p.name.text.clone(), ty));
                            }
                        }
                    }
                    return params;
                }
                _ => {}
            }
        }
        Vec::new()
    }

    /// The attributes `subject.`, `resource.` or `principal.` may name: the request's own (`id`, and `scopes` of a
    /// subject; the principal has none, it is a constant of the mandate) and every declared one, with its type
    /// (sorted, each once).
    pub fn attributes_of(&self, role: crate::syntax::ast::EntityRole) -> Vec<(String, String)> {
        use crate::syntax::ast::EntityRole;
        let mut out: Vec<(String, String)> = match role {
            EntityRole::Subject => vec![("id".into(), "string".into()), ("scopes".into(), "set<string>".into())],
            EntityRole::Resource => vec![("id".into(), "string".into())],
            EntityRole::Principal => Vec::new(),
        };
        for decl in self.decls() {
            if let Decl::Entity(e) = decl {
                if e.role == role {
                    out.extend(e.attributes.iter().map(|a| (a.name.text.clone(), type_text(&a.ty))));
                }
            }
        }
        out.sort();
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }

    /// What may be typed at `offset` of `text`: after `args.`, the parameters of the clause's target; after
    /// `subject.`, `resource.` or `principal.`, their attributes; else every declared name and the clause keywords.
    pub fn complete(&self, text: &str, offset: usize) -> Vec<Completion> {
        let before = &text[..offset.min(text.len())];
        let word_start =
            before.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).map_or(0, |i| i + 1);
        let word = &before[word_start..];
        if let Some(prefix) = word.strip_prefix("args.") {
            let Some(target) = clause_target(before) else { return Vec::new() };
            return self
                .arguments_of(&target)
                .into_iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(name, ty)| Completion { label: name, detail: ty, kind: CompletionKind::Field })
                .collect();
        }
        for (root, role) in [
            ("subject.", crate::syntax::ast::EntityRole::Subject),
            ("resource.", crate::syntax::ast::EntityRole::Resource),
            ("principal.", crate::syntax::ast::EntityRole::Principal),
        ] {
            if let Some(prefix) = word.strip_prefix(root) {
                return self
                    .attributes_of(role)
                    .into_iter()
                    .filter(|(name, _)| name.starts_with(prefix))
                    .map(|(name, ty)| Completion { label: name, detail: ty, kind: CompletionKind::Field })
                    .collect();
            }
        }
        let mut out: Vec<Completion> = self
            .symbols
            .iter()
            .filter(|s| s.name.starts_with(word))
            .map(|s| Completion {
                label: s.name.clone(),
                detail: s.kind.as_str().to_string(),
                kind: CompletionKind::Name(s.kind),
            })
            .collect();
        out.extend(KEYWORDS.iter().filter(|k| k.starts_with(word)).map(|k| Completion {
            label: k.to_string(),
            detail: "keyword".into(),
            kind: CompletionKind::Keyword,
        }));
        out.sort_by(|a, b| a.label.cmp(&b.label));
        out.dedup_by(|a, b| a.label == b.label);
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub label: String,
    pub detail: String,
    pub kind: CompletionKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    Name(SymbolKind),
    Field,
    /// A template's parameter, inside the template.
    Parameter,
    Keyword,
}

const KEYWORDS: &[&str] = &[
    "allow",
    "approval",
    "budget",
    "calendar",
    "classify",
    "contains",
    "delegation",
    "effect",
    "enum",
    "fact",
    "for",
    "forbid",
    "granted",
    "holder",
    "import",
    "kind",
    "level",
    "levels",
    "limit",
    "mandate",
    "max",
    "not",
    "otherwise",
    "principal",
    "properties",
    "purpose",
    "relation",
    "require",
    "resource",
    "scope",
    "signed",
    "subject",
    "target",
    "template",
    "tool",
    "under",
    "valid",
    "where",
    "within",
];

/// The target of the clause being written before the cursor: the word after `allow`, `forbid`, `limit`, `scope`
/// or `for` (in `require approval K for T`) in the text since the last clause keyword.
fn clause_target(before: &str) -> Option<String> {
    let words: Vec<&str> = before
        .split(|c: char| c.is_whitespace() || c == ':' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let at = words.iter().rposition(|w| matches!(*w, "allow" | "forbid" | "limit" | "scope" | "for"))?;
    words.get(at + 1).map(|w| w.to_string())
}

fn type_text(ty: &TypeExpr) -> String {
    match ty {
        TypeExpr::Named(n) => n.text.clone(),
        TypeExpr::Set(inner, _) => format!("set<{}>", type_text(inner)),
    }
}

/// The identifier that `offset` of `text` is in (or just after).
fn word_at(text: &str, offset: usize) -> Option<&str> {
    let offset = offset.min(text.len());
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let start = text[..offset].rfind(|c: char| !is_word(c)).map_or(0, |i| i + 1);
    let end = text[offset..].find(|c: char| !is_word(c)).map_or(text.len(), |i| offset + i);
    // Not a field (`args.cap` names an argument, not the parameter).
    if start > 0 && text[..start].ends_with('.') {
        return None;
    }
    (start < end).then(|| &text[start..end])
}

/// The `///` lines right above `start`, without their markers.
fn doc_comment(text: &str, start: usize) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in text[..start].lines().rev() {
        let trimmed = line.trim();
        if trimmed.is_empty() && lines.is_empty() {
            continue;
        }
        match trimmed.strip_prefix("///") {
            Some(doc) => lines.push(doc.trim()),
            None => break,
        }
    }
    lines.reverse();
    lines.join(" ")
}
