//! Templates: `template NAME(PARAM: TYPE where BOUND, …) under PARENT { … }` lowered to an [`ir::Template`] —
//! parameters typed like a tool's, bounds over the parameters and `granted` only, a parent that is a mandate or a
//! template, and the body checked as a mandate's with the parameters readable as attributes ([`ir::Attr::Param`]).
//!
//! A template decides nothing by itself (instances are granted at run time, docs/grants-design.md), so nothing here
//! touches the mandates, and no engine reads a template. The proof that every instance narrows its parent is
//! `narrowing::parametric`.

use std::collections::{BTreeMap, HashMap};

use super::{err, Checker, Scope, Symbol, TemplateScope};
use crate::diag::Diagnostic;
use crate::ir::{self, Cond, Parent, Program, TimeBound, Type, IMPLICIT_PARAMS};
use crate::source::Span;
use crate::syntax::ast::{self, ClauseKind, Outcome};

/// Names a template parameter may not have: the implicit parameters, and the roots of a request's attributes.
const RESERVED: [&str; 10] =
    ["principal", "holder", "granted", "now", "attempt", "level", "args", "context", "subject", "resource"];

impl Checker<'_> {
    /// Lowers every template, in declaration order (so a template's index is its [`Symbol::Template`] id).
    pub(super) fn templates(
        &mut self,
        decls: &[&ast::TemplateDecl],
        tools: &[ir::Tool],
        effects: &[ir::Effect],
    ) -> Vec<ir::Template> {
        let parents: Vec<Option<Parent>> = decls.iter().map(|t| self.template_parent(t)).collect();
        for (index, t) in decls.iter().enumerate() {
            let mut current = index;
            for _ in 0..decls.len() {
                match parents[current] {
                    Some(Parent::Template(parent)) if parent == index => {
                        self.error(err::delegation_cycle(&[t.name.text.clone(), t.parent.text.clone()], t.name.span));
                        break;
                    }
                    Some(Parent::Template(parent)) => current = parent,
                    _ => break,
                }
            }
        }
        // Every template's declared parameters first: a template under a template reads its parent's as
        // `parent.NAME`, whichever is declared first.
        let typed: Vec<Vec<(String, Type)>> = decls.iter().map(|t| self.declared_params(t)).collect();
        decls
            .iter()
            .zip(&parents)
            .enumerate()
            .map(|(index, (t, parent))| {
                let parent_scope = match parent {
                    Some(Parent::Template(id)) => {
                        Some((decls[*id].name.text.clone(), typed[*id].iter().cloned().collect()))
                    }
                    _ => None,
                };
                // A placeholder parent after an error: the program is not produced then.
                let parent = parent.unwrap_or(Parent::Mandate(0));
                self.template(t, &typed[index], parent, parent_scope, tools, effects)
            })
            .collect()
    }

    /// A template's declared parameters with their types (`remit::reserved-parameter` and
    /// `remit::duplicate-parameter` reported here, once).
    fn declared_params(&mut self, t: &ast::TemplateDecl) -> Vec<(String, Type)> {
        for p in &t.params {
            if RESERVED.contains(&p.name.text.as_str()) {
                self.error(err::reserved_parameter(&p.name.text, p.name.span));
            }
        }
        let declared: Vec<ast::Param> = t
            .params
            .iter()
            .filter(|p| !RESERVED.contains(&p.name.text.as_str()))
            .map(|p| ast::Param { name: p.name.clone(), ty: p.ty.clone(), signed: p.signed })
            .collect();
        self.params(&declared)
    }

    fn template_parent(&mut self, t: &ast::TemplateDecl) -> Option<Parent> {
        match self.symbols.get(&t.parent.text).copied() {
            Some((Symbol::Mandate(id), _)) => Some(Parent::Mandate(id)),
            Some((Symbol::Template(id), _)) => Some(Parent::Template(id)),
            _ => {
                let candidates = self.names_where(|s| matches!(s, Symbol::Mandate(_) | Symbol::Template(_)));
                let d = err::unknown_template_parent(&t.parent.text, t.parent.span, &candidates);
                self.error(d);
                None
            }
        }
    }

    fn template(
        &mut self,
        t: &ast::TemplateDecl,
        typed: &[(String, Type)],
        parent: Parent,
        parent_scope: Option<(String, BTreeMap<String, Type>)>,
        tools: &[ir::Tool],
        effects: &[ir::Effect],
    ) -> ir::Template {
        let name = t.name.text.clone();
        let under_template = parent_scope.is_some();
        let mut bound_params: BTreeMap<String, Type> = typed.iter().cloned().collect();
        bound_params.insert("granted".into(), Type::Timestamp);
        let mut body_params = bound_params.clone();
        for (implicit, ty) in IMPLICIT_PARAMS {
            body_params.insert(implicit.to_string(), ty);
        }

        let mut params = Vec::new();
        for (param_name, ty) in typed {
            let decl = t.params.iter().find(|p| p.name.text == *param_name).expect("typed from these");
            let (bound, bound_text) = match &decl.bound {
                Some(expr) => {
                    let scope = TemplateScope {
                        name: name.clone(),
                        params: bound_params.clone(),
                        bound_of: Some(param_name.clone()),
                        parent: parent_scope.clone(),
                    };
                    let scope = Scope { tools, effects, principal: None, template: Some(&scope) };
                    // A bound has no tool: `args.…` is refused before a target would be needed.
                    let target = ast::Target::AnyTool(expr.span());
                    let text = crate::syntax::format::one_line(self.sources.snippet(expr.span()));
                    (self.condition(expr, &target, None, &scope).unwrap_or(Cond::True), Some(text))
                }
                None => (Cond::True, None),
            };
            params.push(ir::TemplateParam {
                name: param_name.clone(),
                ty: ty.clone(),
                signed: decl.signed.is_some(),
                bound,
                bound_text,
                span: decl.name.span,
            });
        }

        let mut out = ir::Template {
            name: name.clone(),
            params,
            parent,
            principals: Vec::new(),
            principal_prefixes: Vec::new(),
            holders: Vec::new(),
            holder_prefixes: Vec::new(),
            granted_by: ir::Approvers::default(),
            purpose: None,
            valid_from: None,
            valid_until: None,
            max_level: None,
            otherwise: Outcome::Deny,
            delegation_depth: None,
            rules: Vec::new(),
            span: t.name.span,
            valid_span: t.name.span,
            max_level_span: t.name.span,
            otherwise_span: t.name.span,
            depth_span: t.name.span,
            proved: false,
        };
        let template_scope =
            TemplateScope { name: name.clone(), params: body_params.clone(), bound_of: None, parent: parent_scope };
        let scope = Scope { tools, effects, principal: None, template: Some(&template_scope) };
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
        let mut granted_by_written = false;
        for clause in &t.clauses {
            let span = clause.span;
            match &clause.kind {
                ClauseKind::Holder(holders) => {
                    for holder in holders {
                        if !holder.under {
                            out.holders.push(holder.text.clone());
                        } else {
                            if holder.text.is_empty() {
                                self.error(err::holder_pattern_empty(&name, holder.span));
                            } else if !holder.text.ends_with(['/', ':']) {
                                self.error(err::holder_pattern_open(&holder.text, holder.span));
                            }
                            out.holder_prefixes.push(holder.text.clone());
                        }
                    }
                }
                ClauseKind::For(principals) => {
                    if under_template {
                        self.error(err::template_principal_inherited(&name, &t.parent.text, span));
                    }
                    for principal in principals {
                        if !principal.under {
                            out.principals.push(principal.text.clone());
                        } else {
                            if principal.text.is_empty() {
                                self.error(err::template_pattern_empty("for", &name, principal.span));
                            }
                            out.principal_prefixes.push(principal.text.clone());
                        }
                    }
                }
                ClauseKind::GrantedBy(grantors) => {
                    granted_by_written = true;
                    for (grantor, span) in grantors {
                        match grantor {
                            ast::Approver::Principal => out.granted_by.principal = true,
                            ast::Approver::Id(id) => out.granted_by.ids.push(id.clone()),
                            ast::Approver::Under(prefix) => {
                                if prefix.is_empty() {
                                    self.error(err::template_pattern_empty("granted by", &name, *span));
                                }
                                out.granted_by.prefixes.push(prefix.clone());
                            }
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
                        out.valid_span = span;
                        out.valid_from = from.as_ref().and_then(|(b, _)| self.time_bound(b, &template_scope));
                        out.valid_until = until.as_ref().and_then(|(b, _)| self.time_bound(b, &template_scope));
                        if let (Some(TimeBound::At(f)), Some(TimeBound::At(u))) = (&out.valid_from, &out.valid_until) {
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
                    if let Some(rule) = self.rule(clause, &scope) {
                        out.rules.push(rule);
                    }
                }
            }
        }
        // Without `granted by`, an instance is granted by the principal it names, and by nobody else.
        if !granted_by_written {
            out.granted_by.principal = true;
        }
        for list in [
            &mut out.holders,
            &mut out.holder_prefixes,
            &mut out.principals,
            &mut out.principal_prefixes,
            &mut out.granted_by.ids,
            &mut out.granted_by.prefixes,
        ] {
            list.sort();
            list.dedup();
        }
        if out.holders.is_empty() && out.holder_prefixes.is_empty() {
            self.error(err::template_missing_holder(&name, t.name.span));
        }
        out
    }

    /// A bound of a template's window: an instant, or a timestamp parameter of the template.
    fn time_bound(&mut self, bound: &ast::TimeBound, scope: &TemplateScope) -> Option<TimeBound> {
        match bound {
            ast::TimeBound::At(t) => Some(TimeBound::At(*t)),
            ast::TimeBound::Param(param) => match scope.params.get(&param.text) {
                Some(Type::Timestamp) => Some(TimeBound::Param(param.text.clone())),
                Some(ty) => {
                    self.error(err::window_param_not_timestamp(&param.text, ty, param.span));
                    None
                }
                None => {
                    let candidates: Vec<&str> = scope.params.keys().map(String::as_str).collect();
                    let d = err::unknown_template_parameter(&param.text, &scope.name, param.span, &candidates);
                    self.error(d);
                    None
                }
            },
        }
    }
}

/// What is checked of templates on the lowered program, as `lints.rs` checks mandates: holders inside a parent held
/// by patterns (`remit::holder-outside-parent`) and every ancestor's `delegation depth`.
pub(super) fn lint(program: &Program) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for t in &program.templates {
        // The parent's holders, name and span.
        let (parent_ids, parent_prefixes, parent_name, parent_span) = match t.parent {
            Parent::Mandate(id) => {
                let m = &program.mandates[id];
                (&m.holders, &m.holder_prefixes, &m.name, m.span)
            }
            Parent::Template(id) => {
                let p = &program.templates[id];
                (&p.holders, &p.holder_prefixes, &p.name, p.span)
            }
        };
        if !parent_prefixes.is_empty() {
            let outside_ids = t.holders.iter().filter(|id| !crate::eval::holds(parent_ids, parent_prefixes, id));
            let outside_prefixes = t
                .holder_prefixes
                .iter()
                .filter(|p| !parent_prefixes.iter().any(|q| p.starts_with(q.as_str())))
                .map(|p| format!("under \"{p}\""));
            let outside: Vec<String> = outside_ids.map(|id| format!("\"{id}\"")).chain(outside_prefixes).collect();
            if !outside.is_empty() {
                out.push(err::holder_outside_parent(&t.name, parent_name, &outside, t.span, parent_span));
            }
        }
        // Every ancestor bounds how far below it an instance may sit: the templates above, then the mandates.
        let mut distance = 0u32;
        let mut parent = Some(t.parent);
        let mut steps = 0;
        while let Some(current) = parent {
            distance += 1;
            steps += 1;
            if steps > program.templates.len() + program.mandates.len() {
                break; // cycles are reported when lowering
            }
            let (name, depth, depth_span, next) = match current {
                Parent::Template(id) => {
                    let a = &program.templates[id];
                    (&a.name, a.delegation_depth, a.depth_span, Some(a.parent))
                }
                Parent::Mandate(id) => {
                    let a = &program.mandates[id];
                    (&a.name, a.delegation_depth, a.depth_span, a.parent.map(Parent::Mandate))
                }
            };
            if let Some(depth) = depth {
                if distance > depth {
                    out.push(err::delegation_too_deep(&t.name, name, depth, t.span, depth_span));
                }
            }
            parent = next;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::check::check;
    use crate::ir::{Atom, Attr, Cond, Parent, Program, Test, TimeBound, Type};
    use crate::syntax::ast::CompareOp;

    const CEILING: &str = r#"
mandate ceiling for "org:acme" {
  holder under "agent:"
  allow make_payment where args.amount <= 500 USD
}
"#;

    fn program(text: &str) -> Program {
        let mut sources = crate::stdlib::sources();
        sources.add("policy.remit", format!("{CEILING}{text}"));
        let checked = check(sources);
        // Every template here is proved, a template under a template (its bounds read `parent.cap`) too.
        assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
        let program = checked.program.expect("checks");
        assert!(program.templates.iter().all(|t| t.proved));
        program
    }

    fn atoms(cond: &Cond) -> Vec<&Atom> {
        match cond {
            Cond::Atom(atom) => vec![atom],
            Cond::And(items) | Cond::Or(items) => items.iter().flat_map(atoms).collect(),
            Cond::True | Cond::False => Vec::new(),
        }
    }

    #[test]
    fn parameters_are_attributes_of_the_body_and_the_bounds() {
        let p = program(
            r#"
template shopping(
  merchants: set<string> where merchants within ["acme", "globex"],
  cap: money where cap > 0 USD and cap <= 500 USD,
  until: timestamp where until - granted <= 30d,
) under ceiling {
  for under "user:"
  holder under "agent:"
  valid until until
  allow make_payment where args.merchant in merchants and args.amount <= cap
}
"#,
        );
        assert!(p.mandates.iter().all(|m| m.name != "shopping"), "a template is not a mandate");
        let t = &p.templates[p.template_index["shopping"]];
        assert_eq!(t.parent, Parent::Mandate(p.mandate("ceiling").unwrap()));
        assert_eq!(t.valid_until, Some(TimeBound::Param("until".into())));
        assert_eq!(t.principal_prefixes, ["user:"]);
        // Without `granted by`, the principal alone grants.
        assert!(t.granted_by.principal && t.granted_by.ids.is_empty() && t.granted_by.prefixes.is_empty());

        let merchants = t.param("merchants").unwrap();
        assert_eq!(merchants.ty, Type::Set(Box::new(Type::String)));
        let bound = atoms(&merchants.bound);
        assert_eq!(bound.len(), 1);
        assert_eq!(bound[0].attr, Attr::Param("merchants".into()));
        assert!(matches!(&bound[0].test, Test::Within(v) if v.len() == 2));
        let until = atoms(&t.param("until").unwrap().bound);
        assert!(matches!(&until[0].attr, Attr::Elapsed(later, earlier, CompareOp::Le, 2_592_000)
            if **later == Attr::Param("until".into()) && **earlier == Attr::Param("granted".into())));
        assert_eq!(t.param("cap").unwrap().bound_text.as_deref(), Some("cap > 0 USD and cap <= 500 USD"));

        let body: Vec<&Attr> = t.rules.iter().flat_map(|r| atoms(&r.condition)).map(|a| &a.attr).collect();
        let member = Attr::Member(
            Box::new(Attr::Arg("merchant".into())),
            Box::new(Attr::Param("merchants".into())),
            Type::String,
        );
        let capped = Attr::Compare(
            Box::new(Attr::Arg("amount".into())),
            CompareOp::Le,
            Box::new(Attr::Param("cap".into())),
            Type::Money,
        );
        assert_eq!(body, [&member, &capped]);
    }

    #[test]
    fn a_template_under_a_template_and_the_implicit_parameters() {
        let p = program(
            r#"
template shopping(cap: money where cap <= 500 USD) under ceiling {
  holder under "agent:"
  granted by "user:ops", under "ops:"
  allow make_payment where args.amount <= cap
}

template errands(small: money where small <= 20 USD and small <= parent.cap) under shopping {
  holder under "agent:errands/"
  allow make_payment where args.amount <= small and args.merchant != principal and subject.id == holder
  allow make_payment where args.amount <= parent.cap and args.merchant == "acme"
}
"#,
        );
        let errands = &p.templates[p.template_index["errands"]];
        assert_eq!(errands.parent, Parent::Template(p.template_index["shopping"]));
        let shopping = &p.templates[p.template_index["shopping"]];
        assert!(!shopping.granted_by.principal, "`granted by` written without `principal`");
        assert_eq!(shopping.granted_by.ids, ["user:ops"]);
        let reads: Vec<Attr> = errands
            .rules
            .iter()
            .flat_map(|r| atoms(&r.condition))
            .flat_map(|a| a.attr.reads().into_iter().cloned().collect::<Vec<_>>())
            .filter(|a| matches!(a, Attr::Param(_)))
            .collect();
        assert_eq!(reads, [Attr::Param("small".into()), Attr::Param("principal".into()), Attr::Param("holder".into())]);
        // `parent.cap`: the parent instance's parameter, in the bounds and in the rules, of the parent's type.
        let bound = atoms(&errands.param("small").unwrap().bound);
        assert!(matches!(&bound[1].attr, Attr::Compare(left, CompareOp::Le, right, Type::Money)
            if **left == Attr::Param("small".into()) && **right == Attr::ParentParam("cap".into())));
        assert_eq!(bound[1].attr.display(), "small <= parent.cap");
        let capped = atoms(&errands.rules[1].condition);
        assert!(capped[0].attr.reads().contains(&&Attr::ParentParam("cap".into())));
    }

    #[test]
    fn a_policy_with_templates_decides_as_without_them() {
        let template = r#"
template shopping(cap: money where cap <= 500 USD) under ceiling {
  holder under "agent:"
  otherwise escalate
  allow make_payment where args.amount <= cap
}
"#;
        let with = program(template);
        let mut sources = crate::stdlib::sources();
        sources.add("policy.remit", CEILING.to_string());
        let without = check(sources).program.expect("checks");
        for (mandate, amount) in [("ceiling", "40.00 USD"), ("ceiling", "600.00 USD"), ("shopping", "40.00 USD")] {
            let request = serde_json::json!({
                "subject": {"id": "agent:a"},
                "action": {"name": "make_payment", "arguments": {"merchant": "acme", "amount": amount}},
                "context": {"mandate": mandate, "now": "2026-11-30T12:00:00Z"},
            })
            .to_string();
            let decide = |p: &Program| {
                let d = crate::eval::decide(p, request.as_bytes());
                (format!("{:?}", d.outcome), d.reasons, d.mandate_chain)
            };
            assert_eq!(decide(&with), decide(&without), "{mandate} {amount}");
        }
        assert_ne!(crate::check::program_hash(&with), crate::check::program_hash(&without));
        let meta = crate::wasm::meta::PolicyMeta::from_program(&with);
        assert_eq!(meta.templates.len(), 1);
        assert!(meta.templates[0].proved, "every instance within `cap <= 500 USD` narrows `ceiling`");
        assert_eq!(meta.templates[0].params[0].bound.as_deref(), Some("cap <= 500 USD"));
        let read = crate::wasm::meta::PolicyMeta::from_json(meta.to_json().as_bytes()).expect("reads back");
        assert_eq!(read, meta, "what a gateway reads is what the compiler wrote");
        assert!(!crate::wasm::meta::PolicyMeta::from_program(&without).to_json().contains("templates"));
    }
}
