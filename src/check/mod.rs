//! Semantic checks: resolves names, type-checks constraints, lints the mandates, and lowers the syntax tree of
//! a whole policy set to the [`ir::Program`]; then proves that every sub-mandate narrows its parent
//! ([`narrowing`], docs/narrowing.md). Every problem of every file is reported in one run.

mod err;
pub mod limits;
mod lints;
pub mod narrowing;
pub mod sat;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sha2::{Digest, Sha256};

use crate::diag::Diagnostic;
use crate::ir::{self, Atom, Attr, Binding, Cond, Level, RuleKind, Test, Type, Value};
use crate::source::{SourceMap, Span};
use crate::syntax::ast::{self, ClauseKind, CompareOp, Decl, Expr, Literal, Outcome, TypeExpr};
use crate::syntax::parse_file;
use crate::value::{Decimal, Money};

/// The result of checking a policy set: a program when there is no error, and every diagnostic.
#[derive(Debug)]
pub struct Checked {
    pub program: Option<ir::Program>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Which optional checks run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Prove that every sub-mandate narrows its parent (`narrowing`). Run time evaluates the whole chain
    /// anyway, so a program checked without it still cannot widen; what only needs decisions (`remit test`,
    /// `remit diff`, tests confirming counterexamples) turns it off.
    pub narrowing: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { narrowing: true }
    }
}

/// Parses and checks every file of `sources` as one policy set.
pub fn check(sources: SourceMap) -> Checked {
    check_with(sources, Options::default())
}

/// [`check`] with a choice of optional checks.
pub fn check_with(sources: SourceMap, options: Options) -> Checked {
    let mut diagnostics = Vec::new();
    let mut decls = Vec::new();
    for (id, file) in sources.files() {
        match parse_file(id, &file.text) {
            Ok(parsed) => decls.extend(parsed.decls),
            Err(errors) => diagnostics.extend(errors),
        }
    }
    let mut checker = Checker::new(&sources);
    checker.collect(&decls);
    let program = checker.lower(&decls);
    diagnostics.extend(checker.diagnostics);
    let program = program.map(|mut program| {
        diagnostics.extend(lints::lint(&program));
        diagnostics.extend(lints::unnamed_library_tools(&program, &sources, &decls));
        diagnostics.extend(limits::check(&program));
        // Narrowing compares sound programs only: after any error its questions have no reliable answer.
        if options.narrowing && !diagnostics.iter().any(Diagnostic::is_error) {
            program.sources = sources.clone();
            diagnostics.extend(narrowing::check(&program));
        }
        program.hash = policy_hash(&sources);
        program.sources = sources;
        program
    });
    diagnostics.sort_by_key(|d| (d.primary_span(), d.code));
    let has_error = diagnostics.iter().any(Diagnostic::is_error);
    Checked { program: if has_error { None } else { program }, diagnostics }
}

/// Each tool's target argument (`target args.NAME`), sorted by tool: what a gateway fills `resource.id` from.
/// Decisions never read it, so it is not part of [`ir::Tool`] (the interpreter and the module stay as they are); it
/// is read again from the checked program's sources, where `check` accepted it.
pub fn tool_targets(program: &ir::Program) -> Vec<(String, String)> {
    let mut targets = Vec::new();
    for (id, file) in program.sources.files() {
        let Ok(parsed) = parse_file(id, &file.text) else { continue };
        for decl in parsed.decls {
            let Decl::Tool(t) = decl else { continue };
            let (Some(target), Some(tool)) = (t.targets.first(), program.tool(&t.name.text)) else { continue };
            if matches!(program.tools[tool].param(&target.text), Some(Type::String | Type::Kind(_))) {
                targets.push((t.name.text.clone(), target.text.clone()));
            }
        }
    }
    targets.sort();
    targets.dedup();
    targets
}

/// `sha256:` + hex digest of all sources, sorted by name, so file order does not change it.
fn policy_hash(sources: &SourceMap) -> String {
    let mut files: Vec<_> = sources.files().map(|(_, f)| (f.name.as_str(), f.text.as_str())).collect();
    files.sort();
    let mut hasher = Sha256::new();
    for (name, text) in files {
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// What a top-level name refers to.
#[derive(Debug, Clone, Copy)]
enum Symbol {
    Effect(usize),
    Tool(usize),
    Kind,
    Enum,
    Approval(usize),
    Mandate(usize),
}

impl Symbol {
    /// The kind of declaration, with its article: "an effect class".
    fn with_article(self) -> &'static str {
        match self {
            Symbol::Effect(_) => "an effect class",
            Symbol::Tool(_) => "a tool",
            Symbol::Kind => "a kind",
            Symbol::Enum => "an enum",
            Symbol::Approval(_) => "an approval kind",
            Symbol::Mandate(_) => "a mandate",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Symbol::Effect(_) => "effect class",
            Symbol::Tool(_) => "tool",
            Symbol::Kind => "kind",
            Symbol::Enum => "enum",
            Symbol::Approval(_) => "approval kind",
            Symbol::Mandate(_) => "mandate",
        }
    }
}

struct Checker<'a> {
    sources: &'a SourceMap,
    diagnostics: Vec<Diagnostic>,
    symbols: HashMap<String, (Symbol, Span)>,
    levels: Vec<String>,
    enums: HashMap<String, Vec<String>>,
    contexts: BTreeMap<String, Type>,
    signed_contexts: BTreeSet<String>,
}

impl<'a> Checker<'a> {
    fn new(sources: &'a SourceMap) -> Checker<'a> {
        Checker {
            sources,
            diagnostics: Vec::new(),
            symbols: HashMap::new(),
            levels: Vec::new(),
            enums: HashMap::new(),
            contexts: BTreeMap::new(),
            signed_contexts: BTreeSet::new(),
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    /// First pass: every top-level name, so that declarations may refer to each other in any order.
    fn collect(&mut self, decls: &[Decl]) {
        let (mut effects, mut tools, mut approvals, mut mandates) = (0, 0, 0, 0);
        let mut levels_span: Option<Span> = None;
        for decl in decls {
            let (name, symbol) = match decl {
                Decl::Effect(e) => (&e.name, Symbol::Effect(post_inc(&mut effects))),
                Decl::Tool(t) => {
                    if !is_tool_name(&t.name.text) {
                        self.error(err::invalid_tool_name(&t.name.text, t.name.span));
                    }
                    (&t.name, Symbol::Tool(post_inc(&mut tools)))
                }
                Decl::Kind(k) => (k, Symbol::Kind),
                Decl::Enum(e) => {
                    self.enums.insert(e.name.text.clone(), e.variants.iter().map(|v| v.text.clone()).collect());
                    (&e.name, Symbol::Enum)
                }
                Decl::Approval(a) => (&a.name, Symbol::Approval(post_inc(&mut approvals))),
                Decl::Mandate(m) => (&m.name, Symbol::Mandate(post_inc(&mut mandates))),
                Decl::Levels(l) => {
                    match levels_span {
                        Some(first) => self.error(err::duplicate_levels(l.span, first)),
                        None => {
                            levels_span = Some(l.span);
                            self.levels = l.levels.iter().map(|n| n.text.clone()).collect();
                            let mut seen: HashMap<&str, Span> = HashMap::new();
                            for level in &l.levels {
                                if let Some(first) = seen.insert(&level.text, level.span) {
                                    self.diagnostics.push(err::duplicate_definition(
                                        "level",
                                        &level.text,
                                        level.span,
                                        first,
                                    ));
                                }
                            }
                        }
                    }
                    continue;
                }
                Decl::Import(_) | Decl::Context(_) | Decl::Classify(_) => continue,
            };
            if let Some((previous, first)) = self.symbols.get(&name.text) {
                let _ = previous;
                let d = err::duplicate_definition(symbol.describe(), &name.text, name.span, *first);
                self.error(d);
            } else {
                self.symbols.insert(name.text.clone(), (symbol, name.span));
            }
        }
        let mut context_spans: HashMap<&str, Span> = HashMap::new();
        for decl in decls {
            if let Decl::Context(c) = decl {
                if let Some(first) = context_spans.insert(&c.name.text, c.name.span) {
                    self.error(err::duplicate_definition("context attribute", &c.name.text, c.name.span, first));
                    continue;
                }
                if let Some(ty) = self.resolve_type(&c.ty) {
                    if let Some(span) = c.signed {
                        if ty != Type::Money && ty != Type::Set(Box::new(Type::Money)) {
                            self.error(err::signed_not_money("context attribute", &c.name.text, &ty.display(), span));
                        } else {
                            self.signed_contexts.insert(c.name.text.clone());
                        }
                    }
                    self.contexts.insert(c.name.text.clone(), ty);
                }
            }
            if let Decl::Enum(e) = decl {
                let mut seen: HashMap<&str, Span> = HashMap::new();
                for v in &e.variants {
                    if let Some(first) = seen.insert(&v.text, v.span) {
                        self.error(err::duplicate_definition("variant", &v.text, v.span, first));
                    }
                }
            }
        }
    }

    fn names_where(&self, keep: impl Fn(Symbol) -> bool) -> Vec<&str> {
        let mut names: Vec<&str> =
            self.symbols.iter().filter(|(_, (s, _))| keep(*s)).map(|(n, _)| n.as_str()).collect();
        names.sort();
        names
    }

    fn resolve_type(&mut self, ty: &TypeExpr) -> Option<Type> {
        match ty {
            TypeExpr::Set(element, span) => {
                let element = self.resolve_type(element)?;
                if matches!(element, Type::Set(_)) {
                    self.error(err::nested_set(*span));
                    return None;
                }
                Some(Type::Set(Box::new(element)))
            }
            TypeExpr::Named(name) => {
                let builtin = match name.text.as_str() {
                    "string" => Some(Type::String),
                    "int" => Some(Type::Int),
                    "decimal" => Some(Type::Decimal),
                    "money" => Some(Type::Money),
                    "bool" => Some(Type::Bool),
                    "timestamp" => Some(Type::Timestamp),
                    "duration" => Some(Type::Duration),
                    _ => None,
                };
                if builtin.is_some() {
                    return builtin;
                }
                match self.symbols.get(&name.text).map(|(s, _)| *s) {
                    Some(Symbol::Kind) => Some(Type::Kind(name.text.clone())),
                    Some(Symbol::Enum) => {
                        Some(Type::Enum(name.text.clone(), self.enums.get(&name.text).cloned().unwrap_or_default()))
                    }
                    Some(other) => {
                        self.error(err::not_a_type(&name.text, other.with_article(), name.span));
                        None
                    }
                    None => {
                        let mut candidates = vec!["string", "int", "decimal", "money", "bool", "timestamp", "duration"];
                        candidates.extend(self.names_where(|s| matches!(s, Symbol::Kind | Symbol::Enum)));
                        self.error(err::unknown_type(&name.text, name.span, &candidates));
                        None
                    }
                }
            }
        }
    }

    fn params(&mut self, params: &[ast::Param]) -> Vec<(String, Type)> {
        let mut out = Vec::new();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for p in params {
            if let Some(first) = seen.insert(&p.name.text, p.name.span) {
                self.error(err::duplicate_parameter(&p.name.text, p.name.span, first));
                continue;
            }
            if let Some(ty) = self.resolve_type(&p.ty) {
                if let Some(span) = p.signed {
                    if !matches!(&ty, Type::Money) && ty != Type::Set(Box::new(Type::Money)) {
                        self.error(err::signed_not_money("parameter", &p.name.text, &ty.display(), span));
                    }
                }
                out.push((p.name.text.clone(), ty));
            }
        }
        out
    }

    /// The names of the parameters written `signed` (money that may be negative).
    fn signed_params(params: &[ast::Param]) -> Vec<String> {
        params.iter().filter(|p| p.signed.is_some()).map(|p| p.name.text.clone()).collect()
    }

    fn level(&mut self, name: &ast::Name) -> Option<Level> {
        match self.levels.iter().position(|l| *l == name.text) {
            Some(level) => Some(level),
            None => {
                let candidates: Vec<&str> = self.levels.iter().map(String::as_str).collect();
                let d = err::unknown_level(&name.text, name.span, &candidates);
                self.error(d);
                None
            }
        }
    }

    /// Second pass: lowers every declaration. Returns `None` when a declaration could not be lowered.
    fn lower(&mut self, decls: &[Decl]) -> Option<ir::Program> {
        let errors_before = self.diagnostics.len();
        let mut effects = Vec::new();
        let mut effect_spans = Vec::new();
        for decl in decls {
            if let Decl::Effect(e) = decl {
                let params = self.params(&e.params);
                effect_spans.push(e.params.iter().map(|p| p.name.span).collect::<Vec<_>>());
                effects.push(ir::Effect {
                    name: e.name.text.clone(),
                    params,
                    signed: Self::signed_params(&e.params),
                    description: e.description.clone(),
                    span: e.name.span,
                });
            }
        }
        let classified = self.classified(decls);
        let mut tools = Vec::new();
        for decl in decls {
            if let Decl::Tool(t) = decl {
                let extra = classified.get(t.name.text.as_str()).map_or(&[][..], Vec::as_slice);
                tools.push(self.tool(t, extra, &effects, &effect_spans));
            }
        }
        let mut approvals = Vec::new();
        for decl in decls {
            if let Decl::Approval(a) = decl {
                approvals.push(self.approval(a));
            }
        }
        let mandate_decls: Vec<&ast::MandateDecl> =
            decls.iter().filter_map(|d| if let Decl::Mandate(m) = d { Some(m) } else { None }).collect();
        let parents = self.parents(&mandate_decls);
        let mut mandates = Vec::new();
        for (index, m) in mandate_decls.iter().enumerate() {
            let scope = Scope { tools: &tools, effects: &effects };
            mandates.push(self.mandate(m, parents[index], &scope));
        }
        // Principals are inherited from the root.
        for index in 0..mandates.len() {
            if mandates[index].parent.is_some() {
                let mut root = index;
                let mut steps = 0;
                while let Some(parent) = mandates[root].parent {
                    root = parent;
                    steps += 1;
                    if steps > mandates.len() {
                        break;
                    }
                }
                mandates[index].principal = mandates[root].principal.clone();
            }
        }
        if self.diagnostics[errors_before..].iter().any(Diagnostic::is_error) {
            return None;
        }
        let tool_index = tools.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        let mandate_index = mandates.iter().enumerate().map(|(i, m)| (m.name.clone(), i)).collect();
        Some(ir::Program {
            sources: SourceMap::new(),
            hash: String::new(),
            levels: self.levels.clone(),
            effects,
            tools,
            approvals,
            contexts: self.contexts.clone(),
            signed_contexts: self.signed_contexts.clone(),
            mandates,
            tool_index,
            mandate_index,
        })
    }

    /// The classes each tool is put in by `classify` declarations, by tool name; a name that is not a tool is
    /// reported here.
    fn classified<'d>(&mut self, decls: &'d [Decl]) -> HashMap<&'d str, Vec<&'d ast::Name>> {
        let mut out: HashMap<&str, Vec<&ast::Name>> = HashMap::new();
        for decl in decls {
            let Decl::Classify(c) = decl else { continue };
            for tool in &c.tools {
                match self.symbols.get(&tool.text).copied() {
                    Some((Symbol::Tool(_), _)) => out.entry(tool.text.as_str()).or_default().extend(&c.classes),
                    Some((other, _)) => self.error(err::not_a_tool(&tool.text, other.with_article(), tool.span)),
                    None => {
                        let candidates = self.names_where(|s| matches!(s, Symbol::Tool(_)));
                        let d = err::unknown_tool(&tool.text, tool.span, &candidates);
                        self.error(d);
                    }
                }
            }
        }
        out
    }

    /// Lowers a tool; `classified` are the classes `classify` declarations add to its `effects`.
    fn tool(
        &mut self,
        t: &ast::ToolDecl,
        classified: &[&ast::Name],
        effects: &[ir::Effect],
        effect_spans: &[Vec<Span>],
    ) -> ir::Tool {
        let params = self.params(&t.params);
        let mut tool_effects = Vec::new();
        for (e, by_classify) in t.effects.iter().map(|e| (e, false)).chain(classified.iter().map(|e| (*e, true))) {
            // A missing class parameter is reported where the membership is stated.
            let member_span = if by_classify { e.span } else { t.name.span };
            match self.symbols.get(&e.text).copied() {
                Some((Symbol::Effect(id), _)) => {
                    if !tool_effects.contains(&id) {
                        tool_effects.push(id);
                    }
                    for (pi, (pname, pty)) in effects[id].params.iter().enumerate() {
                        let class_span = effect_spans[id][pi];
                        match t.params.iter().position(|p| p.name.text == *pname) {
                            None => self.error(err::missing_class_parameter(
                                &t.name.text,
                                &e.text,
                                pname,
                                member_span,
                                class_span,
                            )),
                            Some(at) => {
                                let found = params.iter().find(|(n, _)| n == pname).map(|(_, ty)| ty);
                                let signed = |yes: bool, ty: &Type| {
                                    if yes {
                                        format!("signed {}", ty.display())
                                    } else {
                                        ty.display()
                                    }
                                };
                                let tool_signed = t.params[at].signed.is_some();
                                let class_signed = effects[id].signed.contains(pname);
                                if let Some(found) = found {
                                    if found != pty || tool_signed != class_signed {
                                        self.error(err::class_parameter_type(
                                            &t.name.text,
                                            pname,
                                            &signed(tool_signed, found),
                                            &signed(class_signed, pty),
                                            t.params[at].ty.span(),
                                            class_span,
                                        ));
                                    }
                                }
                            }
                        }
                    }
                }
                Some((other, decl)) => {
                    self.error(err::not_an_effect(&e.text, other.with_article(), e.span, decl));
                }
                None => {
                    let candidates = self.names_where(|s| matches!(s, Symbol::Effect(_)));
                    let d = err::unknown_effect(&e.text, e.span, &candidates);
                    self.error(d);
                }
            }
        }
        tool_effects.sort();
        let level = t.level.as_ref().and_then(|l| self.level(l)).unwrap_or(0);
        self.target_argument(t, &params);
        ir::Tool {
            name: t.name.text.clone(),
            params,
            effects: tool_effects,
            level,
            side_effects: t.side_effects,
            scopes: t.scopes.iter().map(|(s, _)| s.clone()).collect(),
            administers_mandates: t.administers_mandates,
            open_arguments: t.open_arguments,
            signed: Self::signed_params(&t.params),
            span: t.name.span,
        }
    }

    /// Checks a tool's `target args.NAME`: a declared parameter holding a string (or an identifier of a `kind`),
    /// stated once.
    fn target_argument(&mut self, t: &ast::ToolDecl, params: &[(String, Type)]) {
        let Some((first, rest)) = t.targets.split_first() else { return };
        for again in rest {
            self.error(err::duplicate_target(&t.name.text, again.span, first.span));
        }
        let Some((_, ty)) = params.iter().find(|(n, _)| *n == first.text) else {
            let candidates: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
            self.error(err::unknown_target_argument(&first.text, &t.name.text, first.span, &candidates));
            return;
        };
        if !matches!(ty, Type::String | Type::Kind(_)) {
            let declared = t.params.iter().find(|p| p.name.text == first.text).map_or(first.span, |p| p.ty.span());
            self.error(err::target_not_string(&first.text, &ty.display(), first.span, declared));
        }
    }

    fn approval(&mut self, a: &ast::ApprovalDecl) -> ir::ApprovalKind {
        let mut binds = Vec::new();
        for b in &a.binds {
            match Binding::ALL.iter().find(|k| k.name() == b.text) {
                Some(binding) => {
                    if !binds.contains(binding) {
                        binds.push(*binding);
                    }
                }
                None => self.error(err::unknown_binding(&b.text, b.span)),
            }
        }
        binds.sort();
        if a.binds.is_empty() {
            self.error(err::unbound_approval(&a.name.text, a.name.span));
        }
        if a.ttl.is_none() {
            self.error(err::missing_ttl(&a.name.text, a.name.span));
        }
        ir::ApprovalKind {
            name: a.name.text.clone(),
            binds,
            ttl: a.ttl.map_or(0, |(t, _)| t),
            single_use: a.single_use,
            span: a.name.span,
            binds_span: a.binds_span.unwrap_or(a.name.span),
            ttl_span: a.ttl.map_or(a.name.span, |(_, s)| s),
        }
    }

    /// Resolves `under PARENT` for every mandate and reports unknown parents and cycles.
    fn parents(&mut self, mandates: &[&ast::MandateDecl]) -> Vec<Option<usize>> {
        let mut parents = Vec::with_capacity(mandates.len());
        for m in mandates {
            let parent = m.parent.as_ref().and_then(|p| match self.symbols.get(&p.text).copied() {
                Some((Symbol::Mandate(id), _)) => Some(id),
                _ => {
                    let candidates = self.names_where(|s| matches!(s, Symbol::Mandate(_)));
                    let d = err::unknown_parent(&p.text, p.span, &candidates);
                    self.error(d);
                    None
                }
            });
            parents.push(parent);
        }
        for (index, m) in mandates.iter().enumerate() {
            if !self.in_cycle(&parents, index) {
                continue;
            }
            let mut members = vec![index];
            let mut current = index;
            while let Some(parent) = parents[current].filter(|&p| p != index) {
                members.push(parent);
                current = parent;
            }
            // One report per cycle, at its first-declared member.
            if members.iter().all(|&member| member >= index) {
                let mut names: Vec<String> = members.iter().map(|&i| mandates[i].name.text.clone()).collect();
                names.push(m.name.text.clone());
                self.error(err::delegation_cycle(&names, m.name.span));
            }
        }
        parents
    }

    /// Whether mandate `start` lies on a delegation cycle.
    fn in_cycle(&self, parents: &[Option<usize>], start: usize) -> bool {
        let mut current = start;
        for _ in 0..parents.len() {
            match parents[current] {
                Some(parent) if parent == start => return true,
                Some(parent) => current = parent,
                None => return false,
            }
        }
        false
    }

    fn mandate(&mut self, m: &ast::MandateDecl, parent: Option<usize>, scope: &Scope<'_>) -> ir::Mandate {
        let mut out = ir::Mandate {
            name: m.name.text.clone(),
            principal: m.principal.as_ref().map(|(p, _)| p.clone()).unwrap_or_default(),
            parent,
            holders: Vec::new(),
            purpose: None,
            valid_from: None,
            valid_until: None,
            max_level: None,
            otherwise: Outcome::Deny,
            delegation_depth: None,
            rules: Vec::new(),
            span: m.name.span,
            valid_span: m.name.span,
            max_level_span: m.name.span,
            otherwise_span: m.name.span,
            depth_span: m.name.span,
        };
        if m.parent.is_none() && m.principal.is_none() {
            self.error(err::missing_principal(&m.name.text, m.name.span));
        }
        let mut seen: HashMap<&'static str, Span> = HashMap::new();
        let mut once = |this: &mut Self, clause: &'static str, span: Span| -> bool {
            match seen.insert(clause, span) {
                Some(first) => {
                    this.error(err::duplicate_clause(clause, span, first));
                    false
                }
                None => true,
            }
        };
        for clause in &m.clauses {
            let span = clause.span;
            match &clause.kind {
                ClauseKind::Holder(holders) => out.holders.extend(holders.iter().map(|(h, _)| h.clone())),
                ClauseKind::Purpose(p) => {
                    if once(self, "purpose", span) {
                        out.purpose = Some(p.clone());
                    }
                }
                ClauseKind::Valid { from, until } => {
                    if once(self, "valid", span) {
                        out.valid_from = from.map(|(t, _)| t);
                        out.valid_until = until.map(|(t, _)| t);
                        out.valid_span = span;
                        if let (Some((f, _)), Some((u, _))) = (from, until) {
                            if f >= u {
                                self.error(err::empty_window(span));
                            }
                        }
                    }
                }
                ClauseKind::MaxLevel(level) => {
                    if once(self, "max level", span) {
                        out.max_level = self.level(level);
                        out.max_level_span = span;
                    }
                }
                ClauseKind::Otherwise(outcome) => {
                    if once(self, "otherwise", span) {
                        out.otherwise = *outcome;
                        out.otherwise_span = span;
                    }
                }
                ClauseKind::DelegationDepth(depth) => {
                    if once(self, "delegation depth", span) {
                        out.delegation_depth = Some(*depth);
                        out.depth_span = span;
                    }
                }
                _ => {
                    if let Some(rule) = self.rule(clause, scope) {
                        out.rules.push(rule);
                    }
                }
            }
        }
        out.holders.sort();
        out.holders.dedup();
        if out.holders.is_empty() {
            self.error(err::missing_holder(&m.name.text, m.name.span));
        }
        out
    }

    fn target(&mut self, target: &ast::Target, scope: &Scope<'_>) -> Option<(ir::Target, Vec<usize>)> {
        let resolved = match target {
            ast::Target::AnyTool(_) => ir::Target::AnyTool,
            ast::Target::SideEffects(_) => ir::Target::SideEffects,
            ast::Target::Named(name) => match self.symbols.get(&name.text).copied() {
                Some((Symbol::Tool(id), _)) => ir::Target::Tool(id),
                Some((Symbol::Effect(id), _)) => ir::Target::Effect(id),
                Some((other, _)) => {
                    self.error(err::not_a_target(&name.text, other.with_article(), name.span));
                    return None;
                }
                None => {
                    let candidates = self.names_where(|s| matches!(s, Symbol::Tool(_) | Symbol::Effect(_)));
                    let d = err::unknown_target(&name.text, name.span, &candidates);
                    self.error(d);
                    return None;
                }
            },
        };
        let tools = (0..scope.tools.len())
            .filter(|&t| match &resolved {
                ir::Target::Tool(id) => *id == t,
                ir::Target::Effect(e) => scope.tools[t].effects.contains(e),
                ir::Target::AnyTool => true,
                ir::Target::SideEffects => scope.tools[t].side_effects,
            })
            .collect();
        Some((resolved, tools))
    }

    fn rule(&mut self, clause: &ast::Clause, scope: &Scope<'_>) -> Option<ir::Rule> {
        let text = self.sources.snippet(clause.span);
        let label = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let label = label.split(" where ").next().unwrap_or(&label).trim_end_matches(':').to_string();
        let (kind, target, condition) = match &clause.kind {
            ClauseKind::Allow { target, condition } => (RuleKind::Allow, target, condition.as_ref()),
            ClauseKind::Forbid { target, condition } => (RuleKind::Forbid, target, condition.as_ref()),
            ClauseKind::Limit { target, condition } => (RuleKind::Limit, target, Some(condition)),
            ClauseKind::Scope { target, condition } => (RuleKind::Scope, target, Some(condition)),
            ClauseKind::Gate { approval, target, condition } => {
                let id = match self.symbols.get(&approval.text).copied() {
                    Some((Symbol::Approval(id), _)) => Some(id),
                    Some((other, _)) => {
                        self.error(err::not_an_approval(&approval.text, other.with_article(), approval.span));
                        None
                    }
                    None => {
                        let candidates = self.names_where(|s| matches!(s, Symbol::Approval(_)));
                        let d = err::unknown_approval(&approval.text, approval.span, &candidates);
                        self.error(d);
                        None
                    }
                };
                let resolved = self.target(target, scope);
                let condition = condition.as_ref().map(|c| self.condition(c, target, resolved.as_ref(), scope));
                let (target, tools) = resolved?;
                return Some(ir::Rule {
                    kind: RuleKind::Gate { approval: id? },
                    target,
                    tools,
                    condition: condition.unwrap_or(Some(Cond::True))?,
                    label,
                    span: clause.span,
                });
            }
            ClauseKind::RequireOperationId { target } => (RuleKind::RequireOperationId, target, None),
            ClauseKind::Budget { name, max, target, window } => {
                (RuleKind::Budget { name: name.text.clone(), max: *max, window: *window }, target, None)
            }
            ClauseKind::Fact { name, version, target, on_stale } => {
                (RuleKind::Fact { name: name.text.clone(), version: *version, on_stale: *on_stale }, target, None)
            }
            _ => unreachable!("mandate properties are handled by the caller"),
        };
        let resolved = self.target(target, scope);
        let condition = condition.map(|c| self.condition(c, target, resolved.as_ref(), scope));
        let (target, tools) = resolved?;
        Some(ir::Rule {
            kind,
            target,
            tools,
            condition: condition.unwrap_or(Some(Cond::True))?,
            label,
            span: clause.span,
        })
    }

    /// Type-checks a condition and lowers it to negation normal form.
    fn condition(
        &mut self,
        expr: &Expr,
        target: &ast::Target,
        resolved: Option<&(ir::Target, Vec<usize>)>,
        scope: &Scope<'_>,
    ) -> Option<Cond> {
        let mut env = CondEnv { target, resolved, scope, failed: false, currencies: HashMap::new() };
        let cond = self.expr(expr, false, &mut env);
        if env.failed {
            None
        } else {
            Some(cond)
        }
    }

    fn expr(&mut self, expr: &Expr, negated: bool, env: &mut CondEnv<'_, '_>) -> Cond {
        match expr {
            Expr::Or(items) | Expr::And(items) => {
                let parts = items.iter().map(|e| self.expr(e, negated, env)).collect();
                // De Morgan: negation swaps the connective.
                if matches!(expr, Expr::Or(_)) != negated {
                    Cond::Or(parts)
                } else {
                    Cond::And(parts)
                }
            }
            Expr::Not(inner, _) => self.expr(inner, !negated, env),
            Expr::Truthy(attr) => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                if ty != Type::Bool {
                    self.error(err::not_a_condition(&attr.display(), &ty.display(), attr.span));
                    env.failed = true;
                    return Cond::True;
                }
                let attr = self.attr_of(attr);
                Cond::Atom(Atom { attr, ty, test: Test::Compare(CompareOp::Eq, Value::Bool(!negated)) })
            }
            Expr::Compare { attr, op, operand, span } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                let ordering = !matches!(op, CompareOp::Eq | CompareOp::Ne);
                if ordering && !ty.is_ordered() {
                    self.error(err::invalid_operator(
                        op.symbol(),
                        &ty.display(),
                        *span,
                        "order comparisons apply to numbers, money, timestamps, durations and levels",
                    ));
                    env.failed = true;
                    return Cond::True;
                }
                if matches!(ty, Type::Set(_)) {
                    self.error(err::invalid_operator(
                        op.symbol(),
                        &ty.display(),
                        *span,
                        "compare sets with `contains` or `within`",
                    ));
                    env.failed = true;
                    return Cond::True;
                }
                let Some(value) = self.literal(attr, &ty, operand, env) else { return Cond::True };
                let op = if negated { op.negated() } else { *op };
                Cond::Atom(Atom { attr: self.attr_of(attr), ty, test: Test::Compare(op, value) })
            }
            Expr::In { attr, negated: not_in, items, span } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                if matches!(ty, Type::Set(_)) {
                    self.error(err::invalid_operator(
                        "in",
                        &ty.display(),
                        *span,
                        "for sets, use `within [...]` (subset) or `contains VALUE`",
                    ));
                    env.failed = true;
                    return Cond::True;
                }
                let values = self.list(attr, &ty, items, *span, env);
                let test = if *not_in != negated { Test::NotIn(values) } else { Test::In(values) };
                Cond::Atom(Atom { attr: self.attr_of(attr), ty, test })
            }
            Expr::Under { attr, prefix, span } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                if !ty.is_textual() {
                    self.error(err::invalid_operator(
                        "under",
                        &ty.display(),
                        *span,
                        "`under \"prefix\"` applies to strings and identifiers",
                    ));
                    env.failed = true;
                    return Cond::True;
                }
                let test = if negated { Test::NotUnder(prefix.clone()) } else { Test::Under(prefix.clone()) };
                Cond::Atom(Atom { attr: self.attr_of(attr), ty, test })
            }
            Expr::Contains { attr, item, span } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                let Type::Set(element) = &ty else {
                    self.error(err::invalid_operator(
                        "contains",
                        &ty.display(),
                        *span,
                        "`contains` applies to sets; for text prefixes use `under`",
                    ));
                    env.failed = true;
                    return Cond::True;
                };
                let Some(value) = self.literal(attr, element, item, env) else { return Cond::True };
                let test = if negated { Test::NotContains(value) } else { Test::Contains(value) };
                Cond::Atom(Atom { attr: self.attr_of(attr), ty, test })
            }
            Expr::Within { attr, items, span } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                let Type::Set(element) = &ty else {
                    self.error(err::invalid_operator(
                        "within",
                        &ty.display(),
                        *span,
                        "`within` applies to sets; for a single value use `in`",
                    ));
                    env.failed = true;
                    return Cond::True;
                };
                let element = (**element).clone();
                let values = self.list(attr, &element, items, *span, env);
                let test = if negated { Test::NotWithin(values) } else { Test::Within(values) };
                Cond::Atom(Atom { attr: self.attr_of(attr), ty, test })
            }
        }
    }

    fn attr_of(&self, attr: &ast::Attribute) -> Attr {
        match (attr.root.as_str(), attr.field.as_deref()) {
            ("args", Some(f)) => Attr::Arg(f.to_string()),
            ("context", Some(f)) => Attr::Context(f.to_string()),
            ("resource", _) => Attr::ResourceId,
            ("subject", Some("id")) => Attr::SubjectId,
            ("subject", _) => Attr::SubjectScopes,
            ("now", _) => Attr::Now,
            ("attempt", _) => Attr::Attempt,
            _ => Attr::Level,
        }
    }

    /// The type of an attribute, or `None` after reporting why it has none.
    fn attribute(&mut self, attr: &ast::Attribute, env: &mut CondEnv<'_, '_>) -> Option<Type> {
        let ty = match (attr.root.as_str(), attr.field.as_deref()) {
            ("args", Some(param)) => return self.argument(param, attr, env),
            ("resource", Some("id")) | ("subject", Some("id")) => Some(Type::String),
            ("subject", Some("scopes")) => Some(Type::Set(Box::new(Type::String))),
            ("context", Some(name)) => match self.contexts.get(name) {
                Some(ty) => Some(ty.clone()),
                None => {
                    let candidates: Vec<&str> = self.contexts.keys().map(String::as_str).collect();
                    let d = err::unknown_context(name, attr.span, &candidates);
                    self.error(d);
                    None
                }
            },
            ("now", None) => Some(Type::Timestamp),
            ("attempt", None) => Some(Type::Int),
            ("level", None) => Some(Type::Level),
            _ => {
                self.error(err::unknown_attribute(&attr.display(), attr.span));
                None
            }
        };
        if ty.is_none() {
            env.failed = true;
        }
        ty
    }

    fn argument(&mut self, param: &str, attr: &ast::Attribute, env: &mut CondEnv<'_, '_>) -> Option<Type> {
        let Some((resolved, _)) = env.resolved else {
            env.failed = true; // the target is unknown and already reported
            return None;
        };
        let (params, name): (&[(String, Type)], String) = match resolved {
            ir::Target::Tool(id) => (&env.scope.tools[*id].params, env.scope.tools[*id].name.clone()),
            ir::Target::Effect(id) => (&env.scope.effects[*id].params, env.scope.effects[*id].name.clone()),
            ir::Target::AnyTool | ir::Target::SideEffects => {
                let target = if matches!(env.target, ast::Target::AnyTool(_)) { "any tool" } else { "side effects" };
                self.error(err::arguments_on_broad_target(&attr.display(), target, attr.span));
                env.failed = true;
                return None;
            }
        };
        match params.iter().find(|(n, _)| n == param) {
            Some((_, ty)) => Some(ty.clone()),
            None => {
                let candidates: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
                self.error(err::unknown_parameter(param, &name, attr.span, &candidates));
                env.failed = true;
                None
            }
        }
    }

    fn list(
        &mut self,
        attr: &ast::Attribute,
        ty: &Type,
        items: &[ast::Operand],
        span: Span,
        env: &mut CondEnv<'_, '_>,
    ) -> Vec<Value> {
        if items.is_empty() {
            self.error(err::empty_list(span));
            env.failed = true;
        }
        let mut values: Vec<Value> = items.iter().filter_map(|item| self.literal(attr, ty, item, env)).collect();
        values.dedup();
        values
    }

    /// Type-checks a literal against the attribute's type and converts it.
    fn literal(
        &mut self,
        attr: &ast::Attribute,
        ty: &Type,
        operand: &ast::Operand,
        env: &mut CondEnv<'_, '_>,
    ) -> Option<Value> {
        let value = match (ty, &operand.value) {
            (Type::String | Type::Kind(_), Literal::String(s)) => Some(Value::String(s.clone())),
            (Type::Enum(name, variants), Literal::String(s)) => {
                if variants.contains(s) {
                    Some(Value::String(s.clone()))
                } else {
                    let names: Vec<&str> = variants.iter().map(String::as_str).collect();
                    self.error(err::unknown_variant(s, name, operand.span, &names));
                    env.failed = true;
                    return None;
                }
            }
            (Type::Int, Literal::Number(n)) if !n.contains('.') => Decimal::parse(n).map(Value::Number),
            (Type::Decimal, Literal::Number(n)) => Decimal::parse(n).map(Value::Number),
            (Type::Money, Literal::Money { amount, currency }) => {
                let first = env.currencies.entry(attr.display()).or_insert((currency.clone(), operand.span)).clone();
                if first.0 != *currency {
                    self.error(err::currency_mismatch(&attr.display(), operand.span, first.1));
                    env.failed = true;
                    return None;
                }
                Decimal::parse(amount).map(|a| Value::Money(Money { amount: a, currency: currency.clone() }))
            }
            (Type::Bool, Literal::Bool(b)) => Some(Value::Bool(*b)),
            (Type::Timestamp, Literal::Timestamp(t)) => Some(Value::Timestamp(*t)),
            (Type::Duration, Literal::Duration(d)) => Some(Value::Duration(*d as i64)),
            (Type::Level, Literal::String(name)) => {
                self.error(err::quoted_level(name, operand.span));
                env.failed = true;
                return None;
            }
            (Type::Level, Literal::Ident(name)) => {
                let level = self.level(&ast::Name { text: name.clone(), span: operand.span });
                if level.is_none() {
                    env.failed = true;
                }
                return level.map(Value::Level);
            }
            _ => None,
        };
        if value.is_none() {
            self.error(err::type_mismatch(
                &attr.display(),
                &ty.display(),
                &describe_literal(&operand.value),
                operand.span,
                attr.span,
            ));
            env.failed = true;
        }
        value
    }
}

struct Scope<'a> {
    tools: &'a [ir::Tool],
    effects: &'a [ir::Effect],
}

struct CondEnv<'s, 't> {
    target: &'s ast::Target,
    resolved: Option<&'s (ir::Target, Vec<usize>)>,
    scope: &'s Scope<'t>,
    failed: bool,
    /// The first currency each money attribute was compared with.
    currencies: HashMap<String, (String, Span)>,
}

/// The longest tool name (as MCP's tool-name guidance bounds it).
const MAX_TOOL_NAME: usize = 128;

/// A quoted tool name is the name requests carry: non-empty, at most [`MAX_TOOL_NAME`] bytes, and made of ASCII
/// letters, digits and `_ - . / :` only — no space, quote or control character that a log, a header or a
/// terminal could misread.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b':'))
}

fn describe_literal(literal: &Literal) -> String {
    match literal {
        Literal::String(s) => format!("the string `\"{s}\"`"),
        Literal::Number(n) if n.contains('.') => format!("the decimal `{n}`"),
        Literal::Number(n) => format!("the number `{n}`"),
        Literal::Money { amount, currency } => format!("the amount `{amount} {currency}`"),
        Literal::Bool(b) => format!("`{b}`"),
        Literal::Timestamp(t) => format!("the timestamp `{}`", crate::value::format_timestamp(*t)),
        Literal::Duration(d) => format!("the duration `{d}s`"),
        Literal::Ident(i) => format!("the name `{i}`"),
    }
}

fn post_inc(counter: &mut usize) -> usize {
    *counter += 1;
    *counter - 1
}

#[cfg(test)]
mod tests {
    #[test]
    fn standard_library_checks_without_diagnostics() {
        let sources = crate::stdlib::sources();
        let checked = super::check(sources.clone());
        let rendered: Vec<String> = checked
            .diagnostics
            .iter()
            .map(|d| format!("{} {} at {:?}", d.code, d.message, d.primary_span().map(|s| sources.location(s))))
            .collect();
        assert!(rendered.is_empty(), "{rendered:#?}");
        assert!(checked.program.is_some());
    }
}
