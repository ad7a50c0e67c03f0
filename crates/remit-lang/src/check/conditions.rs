//! Conditions: the attributes a `where` reads, the type of every test and literal, and the lowering to
//! negation-free [`Cond`]s (each negation pushed into the atoms by De Morgan and [`CompareOp::negated`]).

use std::collections::HashMap;

use super::{err, Checker, Scope};
use crate::ir::{self, Atom, Attr, Cond, Test, Type, Value};
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
            (Type::Timestamp, Literal::Timestamp(t)) => {
                Some(Value::Timestamp(i128::from(*t) * crate::value::NANOS_PER_SECOND))
            }
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

struct CondEnv<'s, 't> {
    target: &'s ast::Target,
    resolved: Option<&'s (ir::Target, Vec<usize>)>,
    scope: &'s Scope<'t>,
    failed: bool,
    /// The first currency each money attribute was compared with.
    currencies: HashMap<String, (String, Span)>,
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
