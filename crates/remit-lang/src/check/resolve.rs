//! Names and declarations: the first pass collects every top-level name (so declarations may refer to each
//! other in any order) and the context attributes; then types, parameters, levels, tools with their classes and
//! targets, and approval kinds are resolved and lowered.

use std::collections::HashMap;

use super::{err, is_tool_name, Checker, Symbol};
use crate::diag::Diagnostic;
use crate::ir::{self, Binding, Level, Type};
use crate::source::{SourceMap, Span};
use crate::syntax::ast::{self, Decl, TypeExpr};

/// The name a declaration defines in the one namespace of tools, effect classes, kinds, enums, approval kinds and
/// mandates, with what it is.
fn defined_name(decl: &Decl) -> Option<(&ast::Name, &'static str)> {
    Some(match decl {
        Decl::Effect(e) => (&e.name, "effect class"),
        Decl::Tool(t) => (&t.name, "tool"),
        Decl::Kind(k) => (k, "kind"),
        Decl::Enum(e) => (&e.name, "enum"),
        Decl::Approval(a) => (&a.name, "approval kind"),
        Decl::Mandate(m) => (&m.name, "mandate"),
        Decl::Template(t) => (&t.name, "template"),
        Decl::Import(_)
        | Decl::Levels(_)
        | Decl::Context(_)
        | Decl::Classify(_)
        | Decl::Entity(_)
        | Decl::Relation(_)
        | Decl::Calendar(_) => return None,
    })
}

/// A policy's own definitions shadow the standard library's (docs/language.md, at the top), so that a
/// policy that checked keeps checking when a later library adds a name it already uses. The library's declaration
/// of the name is dropped, with a `remit::shadows-library` warning at the policy's; the library's own tools stay
/// out of the policy's class of that name (they were members of the library's class, which no rule of the policy
/// can name any more), so what the policy's rules reach is what they reached before the library had the name.
pub(super) fn shadow_library(sources: &SourceMap, decls: Vec<Decl>) -> (Vec<Decl>, Vec<Diagnostic>) {
    let in_library = |span: Span| crate::stdlib::is_library(sources, span.file);
    let own: HashMap<String, (Span, &'static str)> = decls
        .iter()
        .filter_map(defined_name)
        .filter(|(name, _)| !in_library(name.span))
        .map(|(name, what)| (name.text.clone(), (name.span, what)))
        .collect();
    let mut diagnostics = Vec::new();
    let mut shadowed_classes = Vec::new();
    let mut kept = Vec::with_capacity(decls.len());
    for decl in decls {
        if let Some((name, what)) = defined_name(&decl).filter(|(name, _)| in_library(name.span)) {
            if let Some(&(span, own_what)) = own.get(&name.text) {
                diagnostics.push(err::shadows_library(&name.text, own_what, span, what, name.span));
                if what == "effect class" {
                    shadowed_classes.push(name.text.clone());
                }
                continue;
            }
        }
        kept.push(decl);
    }
    for decl in &mut kept {
        if let Decl::Tool(t) = decl {
            if in_library(t.name.span) {
                t.effects.retain(|class| !shadowed_classes.contains(&class.text));
            }
        }
    }
    (kept, diagnostics)
}

impl Checker<'_> {
    /// First pass: every top-level name, so that declarations may refer to each other in any order.
    pub(super) fn collect(&mut self, decls: &[Decl]) {
        let (mut effects, mut tools, mut approvals, mut mandates, mut templates) = (0, 0, 0, 0, 0);
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
                Decl::Template(t) => (&t.name, Symbol::Template(post_inc(&mut templates))),
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
                Decl::Import(_)
                | Decl::Context(_)
                | Decl::Classify(_)
                | Decl::Entity(_)
                | Decl::Relation(_)
                | Decl::Calendar(_) => continue,
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

    pub(super) fn resolve_type(&mut self, ty: &TypeExpr) -> Option<Type> {
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

    pub(super) fn params(&mut self, params: &[ast::Param]) -> Vec<(String, Type)> {
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
    pub(super) fn signed_params(params: &[ast::Param]) -> Vec<String> {
        params.iter().filter(|p| p.signed.is_some()).map(|p| p.name.text.clone()).collect()
    }

    pub(super) fn level(&mut self, name: &ast::Name) -> Option<Level> {
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

    /// The classes each tool is put in by `classify` declarations, by tool name; a name that is not a tool is
    /// reported here.
    pub(super) fn classified<'d>(&mut self, decls: &'d [Decl]) -> HashMap<&'d str, Vec<&'d ast::Name>> {
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
    pub(super) fn tool(
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
        let resource_type = self.tool_resource_type(t);
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
            resource_type,
            span: t.name.span,
        }
    }

    /// Checks a tool's `resource TYPE`: a declared resource type (`resource TYPE { … }`), stated once. The world's
    /// declarations are collected before any tool is lowered.
    fn tool_resource_type(&mut self, t: &ast::ToolDecl) -> Option<String> {
        use crate::syntax::ast::EntityRole;
        let (first, rest) = t.resource_types.split_first()?;
        for again in rest {
            self.error(err::duplicate_resource_type(&t.name.text, again.span, first.span));
        }
        let entities = &self.world.entities;
        if entities.iter().any(|e| e.role == EntityRole::Resource && e.name == first.text) {
            return Some(first.text.clone());
        }
        let other = entities.iter().find(|e| e.name == first.text).map(|e| format!("a {} type", e.role.keyword()));
        let candidates: Vec<&str> =
            entities.iter().filter(|e| e.role == EntityRole::Resource).map(|e| e.name.as_str()).collect();
        let d = err::unknown_resource_type(&first.text, &t.name.text, first.span, other.as_deref(), &candidates);
        self.error(d);
        None
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

    pub(super) fn approval(&mut self, a: &ast::ApprovalDecl) -> ir::ApprovalKind {
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
        let approvers = a.approvers.as_ref().map(|list| {
            let mut approvers = ir::Approvers::default();
            for (approver, span) in list {
                match approver {
                    ast::Approver::Principal => approvers.principal = true,
                    ast::Approver::Id(id) => approvers.ids.push(id.clone()),
                    ast::Approver::Under(prefix) => {
                        if prefix.is_empty() {
                            self.error(err::approver_pattern_empty(&a.name.text, *span));
                        }
                        approvers.prefixes.push(prefix.clone())
                    }
                }
            }
            approvers.ids.sort();
            approvers.ids.dedup();
            approvers.prefixes.sort();
            approvers.prefixes.dedup();
            approvers
        });
        ir::ApprovalKind {
            name: a.name.text.clone(),
            approvers,
            binds,
            ttl: a.ttl.map_or(0, |(t, _)| t),
            single_use: a.single_use,
            span: a.name.span,
            binds_span: a.binds_span.unwrap_or(a.name.span),
            ttl_span: a.ttl.map_or(a.name.span, |(_, s)| s),
        }
    }
}

fn post_inc(counter: &mut usize) -> usize {
    *counter += 1;
    *counter - 1
}
