//! Mandates and their rules: delegation (`under PARENT`, cycles), a mandate's properties each stated once, and
//! each rule clause lowered to an [`ir::Rule`] with its target and the tools it applies to.

use std::collections::HashMap;

use super::{err, Checker, Scope, Symbol};
use crate::ir::{self, Cond, RuleKind};
use crate::source::Span;
use crate::syntax::ast::{self, ClauseKind, FactVersion, Outcome};

impl Checker<'_> {
    /// Resolves `under PARENT` for every mandate and reports unknown parents and cycles.
    pub(super) fn parents(&mut self, mandates: &[&ast::MandateDecl]) -> Vec<Option<usize>> {
        let mut parents = Vec::with_capacity(mandates.len());
        for m in mandates {
            let parent = m.parent.as_ref().and_then(|p| match self.symbols.get(&p.text).copied() {
                Some((Symbol::Mandate(id), _)) => Some(id),
                Some((Symbol::Template(_), _)) => {
                    self.error(err::template_as_mandate(&p.text, "a mandate's parent", p.span));
                    None
                }
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

    pub(super) fn mandate(&mut self, m: &ast::MandateDecl, parent: Option<usize>, scope: &Scope<'_>) -> ir::Mandate {
        let mut out = ir::Mandate {
            name: m.name.text.clone(),
            principal: m.principal.as_ref().map(|(p, _)| p.clone()).unwrap_or_default(),
            parent,
            holders: Vec::new(),
            holder_prefixes: Vec::new(),
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
        if let (Some(parent), Some((_, span))) = (&m.parent, &m.principal) {
            self.error(err::sub_mandate_principal(&m.name.text, &parent.text, *span));
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
                ClauseKind::Holder(holders) => {
                    for holder in holders {
                        if !holder.under {
                            out.holders.push(holder.text.clone());
                        } else {
                            if holder.text.is_empty() {
                                self.error(err::holder_pattern_empty(&m.name.text, holder.span));
                            } else if !holder.text.ends_with(['/', ':']) {
                                self.error(err::holder_pattern_open(&holder.text, holder.span));
                            }
                            out.holder_prefixes.push(holder.text.clone());
                        }
                    }
                }
                ClauseKind::Purpose(p) => {
                    if once(self, "purpose", span) {
                        out.purpose = Some(p.clone());
                    }
                }
                ClauseKind::Valid { from, until } => {
                    if once(self, "valid", span) {
                        let mut instant = |bound: &Option<(ast::TimeBound, Span)>| match bound {
                            Some((ast::TimeBound::At(t), _)) => Some(*t),
                            Some((ast::TimeBound::Param(name), _)) => {
                                self.error(err::parameter_outside_template(&name.text, name.span));
                                None
                            }
                            None => None,
                        };
                        out.valid_from = instant(from);
                        out.valid_until = instant(until);
                        out.valid_span = span;
                        if let (Some(f), Some(u)) = (out.valid_from, out.valid_until) {
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
        out.holder_prefixes.sort();
        out.holder_prefixes.dedup();
        // A mandate with templates under it may be held by no one: a ceiling, which only their instances act under.
        if out.holders.is_empty() && out.holder_prefixes.is_empty() && !self.ceilings.contains(&m.name.text) {
            self.error(err::missing_holder(&m.name.text, m.name.span));
        }
        out
    }

    pub(super) fn target(&mut self, target: &ast::Target, scope: &Scope<'_>) -> Option<(ir::Target, Vec<usize>)> {
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

    pub(super) fn rule(&mut self, clause: &ast::Clause, scope: &Scope<'_>) -> Option<ir::Rule> {
        let text = self.sources.snippet(clause.span);
        // The whole clause, its `where` condition and `else` included, so that two rules of one tool never share a
        // label; laid out on one line (comments and line breaks dropped) so that reformatting changes no decision.
        let label = crate::syntax::format::one_line(text);
        let (kind, target, condition) = match &clause.kind {
            ClauseKind::Allow { target, condition } => (RuleKind::Allow, target, condition.as_ref()),
            ClauseKind::Forbid { target, condition } => (RuleKind::Forbid, target, condition.as_ref()),
            ClauseKind::Limit { target, condition } => (RuleKind::Limit, target, Some(condition)),
            ClauseKind::Scope { target, condition } => (RuleKind::Scope, target, Some(condition)),
            ClauseKind::Gate { approval, target, condition, on_missing } => {
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
                    kind: RuleKind::Gate { approval: id?, on_missing: on_missing.unwrap_or(Outcome::Escalate) },
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
                if let FactVersion::Text(text) = version {
                    if FactVersion::text(text).is_none() {
                        self.error(err::invalid_fact_version(text, clause.span));
                    }
                }
                (
                    RuleKind::Fact { name: name.text.clone(), version: version.clone(), on_stale: *on_stale },
                    target,
                    None,
                )
            }
            _ => unreachable!("mandate and template properties are handled by the caller"),
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
}
