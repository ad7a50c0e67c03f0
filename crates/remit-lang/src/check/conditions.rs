//! Conditions: the attributes a `where` reads, the type of every test and literal, and the lowering to
//! negation-free [`Cond`]s (each negation pushed into the atoms by De Morgan and [`CompareOp::negated`]).

use std::collections::HashMap;

use super::{err, Checker, Scope, TemplateScope};
use crate::ir::{self, Atom, Attr, Cond, Term, Test, Type, Value};
use crate::source::Span;
use crate::syntax::ast::{self, CompareOp, Expr, Literal};
use crate::value::{Decimal, Money};

impl Checker<'_> {
    /// Type-checks a condition and lowers it to negation normal form.
    pub(super) fn condition(
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
            // `principal == resource.owner` reads as `resource.owner == principal`.
            Expr::Compare { attr, op, operand: ast::Operand { value: Literal::Path(other), .. }, span }
                if attr.root == "principal" && attr.field.is_none() =>
            {
                let principal = ast::Operand { value: Literal::Ident("principal".into()), span: attr.span };
                let swapped = Expr::Compare { attr: other.clone(), op: op.swapped(), operand: principal, span: *span };
                self.expr(&swapped, negated, env)
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
                if let Some(other) = attribute_operand(operand, &ty, env.scope.template) {
                    return self.compare_attributes(attr, &ty, *op, &other, *span, negated, env);
                }
                let Some(value) = self.literal(attr, &ty, operand, env) else { return Cond::True };
                let op = if negated { op.negated() } else { *op };
                Cond::Atom(Atom { attr: self.attr_of(attr), ty, test: Test::Compare(op, value) })
            }
            Expr::InSet { attr, negated: not_in, set, span } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                let Some(set_ty) = self.attribute(set, env) else { return Cond::True };
                let Type::Set(element) = &set_ty else {
                    self.error(err::invalid_operator(
                        "in",
                        &set_ty.display(),
                        set.span,
                        "`in` takes a list `[…]` or a set attribute",
                    ));
                    env.failed = true;
                    return Cond::True;
                };
                if matches!(ty, Type::Set(_)) || !same_type(&ty, element) {
                    self.error(err::attribute_types_differ(&attr.display(), &ty, &set.display(), &set_ty, *span));
                    env.failed = true;
                    return Cond::True;
                }
                let member = Attr::Member(Box::new(self.attr_of(attr)), Box::new(self.attr_of(set)), ty);
                let holds = *not_in == negated;
                Cond::Atom(Atom {
                    attr: member,
                    ty: Type::Bool,
                    test: Test::Compare(CompareOp::Eq, Value::Bool(holds)),
                })
            }
            Expr::Relation { name, terms, span } => self.relation(name, terms, *span, negated, env),
            // `args.merchant in merchants`: a set parameter of the template, not a calendar.
            Expr::InCalendar { attr, negated: not_in, calendar, span }
                if is_param(env.scope.template, &calendar.text) =>
            {
                let set = ast::Attribute { root: calendar.text.clone(), field: None, span: calendar.span };
                let member = Expr::InSet { attr: attr.clone(), negated: *not_in, set, span: *span };
                self.expr(&member, negated, env)
            }
            Expr::InCalendar { attr, negated: not_in, calendar, span: _ } => {
                let Some(ty) = self.attribute(attr, env) else { return Cond::True };
                if ty != Type::Timestamp {
                    self.error(err::not_a_timestamp(&attr.display(), &ty, attr.span));
                    env.failed = true;
                    return Cond::True;
                }
                if !self.world.calendars.contains_key(&calendar.text) {
                    let candidates: Vec<&str> = self.world.calendars.keys().map(String::as_str).collect();
                    let d = err::unknown_calendar(&calendar.text, calendar.span, &candidates);
                    self.error(d);
                    env.failed = true;
                    return Cond::True;
                }
                let inside = Attr::InCalendar(calendar.text.clone(), Box::new(self.attr_of(attr)));
                let holds = *not_in == negated;
                Cond::Atom(Atom {
                    attr: inside,
                    ty: Type::Bool,
                    test: Test::Compare(CompareOp::Eq, Value::Bool(holds)),
                })
            }
            Expr::Elapsed { later, earlier, op, operand, span: _ } => {
                let (Some(later_ty), Some(earlier_ty)) = (self.attribute(later, env), self.attribute(earlier, env))
                else {
                    return Cond::True;
                };
                for (attr, ty) in [(later, &later_ty), (earlier, &earlier_ty)] {
                    if *ty != Type::Timestamp {
                        self.error(err::not_a_timestamp(&attr.display(), ty, attr.span));
                        env.failed = true;
                    }
                }
                // Named as written in a type error: `args.end - args.start` is `duration`.
                let elapsed = ast::Attribute {
                    root: format!("{} - {}", later.display(), earlier.display()),
                    field: None,
                    span: later.span.to(earlier.span),
                };
                let Some(Value::Duration(seconds)) = self.literal(&elapsed, &Type::Duration, operand, env) else {
                    return Cond::True;
                };
                if env.failed {
                    return Cond::True;
                }
                let attr = Attr::Elapsed(Box::new(self.attr_of(later)), Box::new(self.attr_of(earlier)), *op, seconds);
                Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(!negated)) })
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
                // Attributes in the list (`args.to in [principal, resource.owner, "x"]`) are comparisons of their own.
                let (others, literals): (Vec<&ast::Operand>, Vec<&ast::Operand>) =
                    items.iter().partition(|item| attribute_operand(item, &ty, env.scope.template).is_some());
                let excluded = *not_in != negated;
                let mut parts = Vec::new();
                if !literals.is_empty() || others.is_empty() {
                    let literals: Vec<ast::Operand> = literals.into_iter().cloned().collect();
                    let values = self.list(attr, &ty, &literals, *span, env);
                    let test = if excluded { Test::NotIn(values) } else { Test::In(values) };
                    parts.push(Cond::Atom(Atom { attr: self.attr_of(attr), ty: ty.clone(), test }));
                }
                for other in others {
                    let other = attribute_operand(other, &ty, env.scope.template).expect("partitioned on it");
                    parts.push(self.compare_attributes(attr, &ty, CompareOp::Eq, &other, *span, excluded, env));
                }
                match (parts.len(), excluded) {
                    (1, _) => parts.pop().expect("one part"),
                    (_, true) => Cond::And(parts),
                    (_, false) => Cond::Or(parts),
                }
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

    /// `left OP right` for two attributes: both typed alike, the operator allowed on the type; a bool atom that
    /// holds when the comparison does (is false when `negated`).
    #[allow(clippy::too_many_arguments)]
    fn compare_attributes(
        &mut self,
        left: &ast::Attribute,
        ty: &Type,
        op: CompareOp,
        right: &ast::Attribute,
        span: Span,
        negated: bool,
        env: &mut CondEnv<'_, '_>,
    ) -> Cond {
        let Some(right_ty) = self.attribute(right, env) else { return Cond::True };
        if !same_type(ty, &right_ty) {
            self.error(err::attribute_types_differ(&left.display(), ty, &right.display(), &right_ty, span));
            env.failed = true;
            return Cond::True;
        }
        let attr = Attr::Compare(Box::new(self.attr_of(left)), op, Box::new(self.attr_of(right)), ty.clone());
        Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(!negated)) })
    }

    /// `name(terms…)`: a declared relation, one textual term per parameter.
    fn relation(
        &mut self,
        name: &ast::Name,
        terms: &[ast::Operand],
        span: Span,
        negated: bool,
        env: &mut CondEnv<'_, '_>,
    ) -> Cond {
        let Some(relation) = self.world.relations.get(&name.text).cloned() else {
            let candidates: Vec<&str> = self.world.relations.keys().map(String::as_str).collect();
            let d = err::unknown_relation(&name.text, name.span, &candidates);
            self.error(d);
            env.failed = true;
            return Cond::True;
        };
        if terms.len() != relation.params.len() {
            self.error(err::relation_arity(&name.text, relation.params.len(), terms.len(), span, relation.span));
            env.failed = true;
            return Cond::True;
        }
        let mut lowered = Vec::new();
        for (term, param) in terms.iter().zip(&relation.params) {
            let value = match &term.value {
                Literal::String(text) => Some(Term::Value(text.clone())),
                Literal::Ident(word) if word == "principal" && !is_param(env.scope.template, word) => {
                    match env.scope.principal {
                        Some(principal) => Some(Term::Value(principal.to_string())),
                        None => {
                            self.error(err::principal_unknown(term.span));
                            None
                        }
                    }
                }
                other => match attribute_operand(term, param, env.scope.template) {
                    Some(attr) => match self.attribute(&attr, env) {
                        Some(ty) if same_type(&ty, param) => Some(Term::Attr(self.attr_of(&attr))),
                        Some(ty) => {
                            let d = err::type_mismatch(
                                &format!("{}(…)", name.text),
                                &param.display(),
                                &format!("`{}` of type `{}`", attr.display(), ty.display()),
                                term.span,
                                name.span,
                            );
                            self.error(d);
                            None
                        }
                        None => None,
                    },
                    None => {
                        let text = match other {
                            Literal::Ident(word) => word.clone(),
                            _ => describe_literal(other),
                        };
                        self.error(err::unknown_term(&text, term.span));
                        None
                    }
                },
            };
            match value {
                Some(value) => lowered.push(value),
                None => env.failed = true,
            }
        }
        if env.failed {
            return Cond::True;
        }
        let attr = Attr::Relation(name.text.clone(), lowered);
        Cond::Atom(Atom { attr, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(!negated)) })
    }

    fn attr_of(&self, attr: &ast::Attribute) -> Attr {
        match (attr.root.as_str(), attr.field.as_deref()) {
            ("args", Some(f)) => Attr::Arg(f.to_string()),
            ("context", Some(f)) => Attr::Context(f.to_string()),
            ("resource", Some("id") | None) => Attr::ResourceId,
            ("resource", Some(f)) => Attr::Resource(f.to_string()),
            ("subject", Some("id") | None) => Attr::SubjectId,
            ("subject", Some("scopes")) => Attr::SubjectScopes,
            ("subject", Some(f)) => Attr::Subject(f.to_string()),
            ("principal", Some(f)) => Attr::Principal(f.to_string()),
            ("now", _) => Attr::Now,
            ("attempt", _) => Attr::Attempt,
            ("level", _) => Attr::Level,
            // `attribute` accepted it: the parent instance's parameter, in a template under a template.
            ("parent", Some(f)) => Attr::ParentParam(f.to_string()),
            // Any other name `attribute` accepted is a template's parameter.
            (name, _) => Attr::Param(name.to_string()),
        }
    }

    /// The type of an attribute, or `None` after reporting why it has none.
    fn attribute(&mut self, attr: &ast::Attribute, env: &mut CondEnv<'_, '_>) -> Option<Type> {
        // `parent.NAME`: the parent instance's parameter, in a template under a template (its bounds and rules).
        if let ("parent", Some(name)) = (attr.root.as_str(), attr.field.as_deref()) {
            let parent = env.scope.template.and_then(|t| t.parent.as_ref());
            let ty = match parent {
                Some((_, params)) if params.contains_key(name) => return Some(params[name].clone()),
                Some((parent, params)) => {
                    let candidates: Vec<&str> = params.keys().map(String::as_str).collect();
                    err::unknown_parent_parameter(name, parent, attr.span, &candidates)
                }
                None => err::parent_parameter_not_allowed(
                    &attr.display(),
                    env.scope.template.map(|t| t.name.as_str()),
                    attr.span,
                ),
            };
            self.error(ty);
            env.failed = true;
            return None;
        }
        if let Some(template) = env.scope.template {
            if attr.field.is_none() {
                if let Some(ty) = template.params.get(&attr.root) {
                    return Some(ty.clone());
                }
                if !REQUEST_ROOTS.contains(&attr.root.as_str()) {
                    let candidates: Vec<&str> = template.params.keys().map(String::as_str).collect();
                    self.error(err::unknown_template_parameter(&attr.root, &template.name, attr.span, &candidates));
                    env.failed = true;
                    return None;
                }
            }
            if let Some(param) = &template.bound_of {
                self.error(err::bound_not_parameter(&attr.display(), param, attr.span));
                env.failed = true;
                return None;
            }
        }
        let ty = match (attr.root.as_str(), attr.field.as_deref()) {
            ("args", Some(param)) => return self.argument(param, attr, env),
            // `subject` and `resource` alone are their ids (`subject == resource.owner`).
            ("resource", Some("id") | None) | ("subject", Some("id") | None) => Some(Type::String),
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
            ("subject", Some(name)) => return self.entity_attribute(ast::EntityRole::Subject, name, attr, env),
            ("resource", Some(name)) => return self.entity_attribute(ast::EntityRole::Resource, name, attr, env),
            ("principal", Some(name)) => return self.entity_attribute(ast::EntityRole::Principal, name, attr, env),
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

    /// A declared attribute of the subject, the resource or the mandate's principal.
    fn entity_attribute(
        &mut self,
        role: ast::EntityRole,
        name: &str,
        attr: &ast::Attribute,
        env: &mut CondEnv<'_, '_>,
    ) -> Option<Type> {
        let declared = match role {
            ast::EntityRole::Subject => &self.world.subject_attributes,
            ast::EntityRole::Resource => &self.world.resource_attributes,
            ast::EntityRole::Principal => &self.world.principal_attributes,
        };
        if let Some(found) = declared.get(name) {
            if let (ast::EntityRole::Principal, Some(template)) = (role, env.scope.template) {
                self.error(err::principal_attribute_in_template(&attr.display(), &template.name, attr.span));
                env.failed = true;
                return None;
            }
            if role == ast::EntityRole::Principal && env.scope.principal.is_none() {
                // Read under the mandate's principal: a mandate without one has nothing to read it under.
                self.error(err::principal_unknown(attr.span));
                env.failed = true;
                return None;
            }
            return Some(found.ty.clone());
        }
        let mut candidates: Vec<&str> = declared.keys().map(String::as_str).collect();
        match role {
            ast::EntityRole::Subject => candidates.extend(["id", "scopes"]),
            ast::EntityRole::Resource => candidates.push("id"),
            // The principal itself is `principal`, a constant of the mandate: it has no `.id`.
            ast::EntityRole::Principal => {}
        }
        let d = err::unknown_entity_attribute(role.keyword(), name, attr.span, &candidates);
        self.error(d);
        env.failed = true;
        None
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
            (Type::String | Type::Kind(_), Literal::Ident(word)) if word == "principal" => match env.scope.principal {
                Some(principal) => Some(Value::String(principal.to_string())),
                None => {
                    self.error(err::principal_unknown(operand.span));
                    env.failed = true;
                    return None;
                }
            },
            (_, Literal::Path(other)) => {
                self.error(err::attribute_not_allowed(&other.display(), operand.span));
                env.failed = true;
                return None;
            }
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
            (Type::Timestamp, Literal::Timestamp(t)) => {
                Some(Value::Timestamp(i128::from(*t) * crate::value::NANOS_PER_SECOND))
            }
            (Type::Duration, Literal::Duration(d)) => Some(Value::Duration(*d as i64)),
            (ty, Literal::Ident(word))
                if *ty != Type::Level
                    && env.scope.template.is_some()
                    && word != "principal"
                    && !REQUEST_ROOTS.contains(&word.as_str()) =>
            {
                let template = env.scope.template.expect("checked");
                let candidates: Vec<&str> = template.params.keys().map(String::as_str).collect();
                self.error(err::unknown_template_parameter(word, &template.name, operand.span, &candidates));
                env.failed = true;
                return None;
            }
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

/// The attributes of a request that are written without a field (`now`), and the roots of those with one.
const REQUEST_ROOTS: [&str; 7] = ["now", "attempt", "level", "args", "context", "subject", "resource"];

struct CondEnv<'s, 't> {
    target: &'s ast::Target,
    resolved: Option<&'s (ir::Target, Vec<usize>)>,
    scope: &'s Scope<'t>,
    failed: bool,
    /// The first currency each money attribute was compared with.
    currencies: HashMap<String, (String, Span)>,
}

/// Whether `name` is a parameter the template's condition being checked may read.
fn is_param(template: Option<&TemplateScope>, name: &str) -> bool {
    template.is_some_and(|t| t.params.contains_key(name))
}

/// Values of one type for a comparison: equal types, or two kinds of identifiers (strings and kinds).
fn same_type(a: &Type, b: &Type) -> bool {
    a == b || (a.is_textual() && b.is_textual())
}

/// The attribute an operand names, when it names one: another attribute (`resource.owner`), or, where identifiers
/// are compared, `subject` and `resource` for their ids.
fn attribute_operand(operand: &ast::Operand, ty: &Type, template: Option<&TemplateScope>) -> Option<ast::Attribute> {
    match &operand.value {
        Literal::Path(attr) => Some(attr.clone()),
        // A template's parameter is an attribute, constant per instance (`args.amount <= cap`).
        Literal::Ident(word) if is_param(template, word) => {
            Some(ast::Attribute { root: word.clone(), field: None, span: operand.span })
        }
        Literal::Ident(word) if ty.is_textual() && (word == "subject" || word == "resource") => {
            Some(ast::Attribute { root: word.clone(), field: Some("id".into()), span: operand.span })
        }
        _ => None,
    }
}

fn describe_literal(literal: &Literal) -> String {
    match literal {
        Literal::Path(attr) => format!("the attribute `{}`", attr.display()),
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
