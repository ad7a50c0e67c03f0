//! The authority of a mandate chain over one tool, as formulas: one conjunct per clause that can refuse a call
//! (validity window, maximum level, the grants of each mandate, each prohibition, limit, scope, gate, operation
//! id, fact and budget), so that "the chain allows the call" is their conjunction and a refused call names the
//! clause that refused it. It mirrors `eval::Tally::examine` clause by clause; what the interpreter reads from
//! state the gateway keeps (approvals, facts, counters) becomes variables (see `formula`).
//!
//! Stops are not part of authority: a stop is state, not a term of a mandate, and it refuses the same calls on
//! both sides of a comparison. Comparisons therefore range over requests without stops.

use std::collections::BTreeSet;

use super::formula::{and, is, lit, or, path, Model, Var, VarId, Vars, F};
use crate::check::sat::for_level;
use crate::ir::{
    Approvers, Atom, Attr, Binding, Cond, Mandate, MandateId, Program, RuleKind, Test, ToolId, Type, Value,
};
use crate::syntax::ast::{CompareOp, FactVersion};
use crate::value::{Decimal, DECIMAL_SCALE};

/// One side of a comparison: a chain of mandates of one program, as seen by one request.
#[derive(Debug, Clone)]
pub struct Side<'p> {
    pub program: &'p Program,
    /// The mandates whose clauses apply, root first (a sub-mandate standing alone: just itself).
    pub chain: Vec<MandateId>,
    /// The mandate whose holders (ids and `under` prefixes) the leaf accepts; `None` when the holder is not
    /// compared.
    pub holders: Option<&'p Mandate>,
    /// The mandate names an approval may name to count on this side.
    pub approval_names: Vec<String>,
    /// For a template's symbolic instance: its principal is a parameter, admitted by these ids and prefixes (`for`;
    /// both empty: anyone). A gate `approved by principal` of the template is read as admitting every identity
    /// `for` admits, a superset of the one principal an instance names: the instance's side can only allow more,
    /// so a proof stays sound (a witness that needs another approver is not confirmed, and not shown).
    pub instance_principal: Option<(&'p [String], &'p [String])>,
    /// A mandate that is not in the program (a template's symbolic instance), standing alone: when set, it is the
    /// whole chain (its conjuncts' origins name mandate `usize::MAX`).
    pub leaf: Option<&'p Mandate>,
}

/// The clause a conjunct stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// The tool is not declared in this program.
    Undeclared,
    /// The tool administers mandates: never grantable.
    SelfModification,
    /// The credential must carry one of the tool's scopes.
    Scopes,
    /// The subject must hold the leaf mandate.
    Holder,
    ValidFrom(MandateId),
    ValidUntil(MandateId),
    MaxLevel(MandateId),
    /// Some grant of the mandate must match.
    Grants(MandateId),
    /// A rule of the mandate (by index in `Mandate::rules`) that can refuse.
    Rule(MandateId, usize),
}

#[derive(Debug, Clone)]
pub struct Conjunct {
    pub formula: F,
    pub origin: Origin,
}

/// The conjuncts of "`side` allows a call to the tool named `tool`". A conjunct that always holds is left out.
pub fn conjuncts(side: &Side<'_>, tool: &str, vars: &mut Vars) -> Vec<Conjunct> {
    let program = side.program;
    let Some(tool_id) = program.tool(tool) else {
        return vec![Conjunct { formula: F::False, origin: Origin::Undeclared }];
    };
    let t = &program.tools[tool_id];
    if t.administers_mandates {
        return vec![Conjunct { formula: F::False, origin: Origin::SelfModification }];
    }
    let mut enc = Encoder::for_tool(program, tool_id, vars);
    let mut out = Vec::new();
    let mut push = |formula: F, origin: Origin| {
        if formula != F::True {
            out.push(Conjunct { formula, origin });
        }
    };
    if !t.scopes.is_empty() {
        let scopes = Attr::SubjectScopes;
        let value = enc.vars.id(Var::Value(scopes.clone(), Type::Set(Box::new(Type::String))));
        let any = or(t.scopes.iter().map(|s| lit(value, Test::Contains(Value::String(s.clone())))));
        let present = enc.vars.id(Var::Present(scopes));
        push(and([is(present, true), any]), Origin::Scopes);
    }
    if let Some(holder) = side.holders {
        // `subject.id in [ids] or subject.id under p …`: decidable like any `under` condition (`sat`'s prefixes).
        let subject = enc.vars.id(Var::Value(Attr::SubjectId, Type::String));
        let ids: Vec<Value> = holder.holders.iter().map(|h| Value::String(h.clone())).collect();
        let exact = (!ids.is_empty()).then(|| lit(subject, Test::In(ids)));
        let patterns = holder.holder_prefixes.iter().map(|p| pattern(subject, p));
        push(or(exact.into_iter().chain(patterns)), Origin::Holder);
    }
    let chain: Vec<(MandateId, &Mandate)> = match side.leaf {
        Some(leaf) => vec![(usize::MAX, leaf)],
        None => side.chain.iter().map(|&m| (m, &program.mandates[m])).collect(),
    };
    for &(m, mandate) in &chain {
        let now = enc.vars.id(Var::Value(Attr::Now, Type::Timestamp));
        if let Some(from) = mandate.valid_from {
            let from = Value::Timestamp(i128::from(from) * crate::value::NANOS_PER_SECOND);
            push(lit(now, Test::Compare(CompareOp::Ge, from)), Origin::ValidFrom(m));
        }
        if let Some(until) = mandate.valid_until {
            let until = Value::Timestamp(i128::from(until) * crate::value::NANOS_PER_SECOND);
            push(lit(now, Test::Compare(CompareOp::Lt, until)), Origin::ValidUntil(m));
        }
        if mandate.max_level.is_some_and(|max| t.level > max) {
            push(F::False, Origin::MaxLevel(m));
        }
        let grants: Vec<F> = mandate
            .rules
            .iter()
            .filter(|r| r.kind == RuleKind::Allow && covers(r, tool_id))
            .map(|r| enc.truth(&r.condition))
            .collect();
        push(or(grants), Origin::Grants(m));
        for (index, rule) in mandate.rules.iter().enumerate() {
            if !covers(rule, tool_id) {
                continue;
            }
            let origin = Origin::Rule(m, index);
            match &rule.kind {
                RuleKind::Allow => {}
                RuleKind::Forbid => push(enc.falsity(&rule.condition), origin),
                RuleKind::Limit | RuleKind::Scope => push(enc.truth(&rule.condition), origin),
                RuleKind::Gate { approval, .. } => {
                    let kind = &program.approvals[*approval];
                    let principal = mandate.principal.as_str();
                    let approvers = kind.approvers.as_ref().map(|a| (a, principal));
                    let instance = side.instance_principal.filter(|_| chain.len() == 1);
                    let approved =
                        enc.approved(&kind.name, kind.ttl, &kind.binds, &side.approval_names, approvers, instance);
                    push(or([enc.falsity(&rule.condition), approved]), origin);
                }
                RuleKind::RequireOperationId => {
                    let id = enc.vars.id(Var::OperationId);
                    push(or([enc.falsity(&rule.condition), is(id, true)]), origin);
                }
                RuleKind::Fact { name, version, .. } => {
                    let present = enc.vars.id(Var::FactPresent(name.clone()));
                    let is_text = enc.vars.id(Var::FactIsText(name.clone()));
                    let is_version = match version {
                        FactVersion::Number(n) => and([
                            is(is_text, false),
                            lit(enc.vars.id(Var::Fact(name.clone())), Test::Compare(CompareOp::Eq, whole(*n))),
                        ]),
                        FactVersion::Text(text) => and([
                            is(is_text, true),
                            lit(
                                enc.vars.id(Var::FactText(name.clone())),
                                Test::Compare(CompareOp::Eq, Value::String(text.clone())),
                            ),
                        ]),
                    };
                    let current = and([is(present, true), is_version]);
                    push(or([enc.falsity(&rule.condition), current]), origin);
                }
                RuleKind::Budget { name, max, .. } => {
                    let present = enc.vars.id(Var::CounterPresent(name.clone()));
                    let value = enc.vars.id(Var::Counter(name.clone()));
                    let left = and([
                        is(present, true),
                        lit(value, Test::Compare(CompareOp::Ge, whole(0))),
                        lit(value, Test::Compare(CompareOp::Lt, whole(*max))),
                    ]);
                    push(or([enc.falsity(&rule.condition), left]), origin);
                }
            }
        }
    }
    out
}

fn covers(rule: &crate::ir::Rule, tool: ToolId) -> bool {
    rule.tools.binary_search(&tool).is_ok()
}

/// A whole number as the interpreter compares JSON integers.
fn whole(n: u64) -> Value {
    Value::Number(Decimal(i128::from(n) * 10i128.pow(DECIMAL_SCALE)))
}

/// Whether an attribute can be absent from a request (`now` and `subject.id` are required fields; `level` is the
/// called tool's).
pub fn optional(attr: &Attr) -> bool {
    !matches!(attr, Attr::Now | Attr::SubjectId | Attr::Level)
}

/// An identity `var` admitted by the pattern `under "prefix"` of a holder or an approver: as in `under`, one that
/// is not a testable path is under no prefix (`eval::holds`).
pub fn pattern(var: VarId, prefix: &str) -> F {
    and([path(var, true), lit(var, Test::Under(prefix.to_string()))])
}

/// The currency a money test compares with, if any.
pub fn currency(test: &Test) -> Option<&str> {
    fn first_money(values: &[Value]) -> Option<&str> {
        values.iter().find_map(|v| match v {
            Value::Money(m) => Some(m.currency.as_str()),
            _ => None,
        })
    }
    match test {
        Test::Compare(_, v) | Test::Contains(v) | Test::NotContains(v) => first_money(std::slice::from_ref(v)),
        Test::In(vs) | Test::NotIn(vs) | Test::Within(vs) | Test::NotWithin(vs) => first_money(vs),
        Test::Under(_) | Test::NotUnder(_) => None,
    }
}

/// Turns conditions of one tool's rules into formulas.
pub struct Encoder<'v> {
    pub vars: &'v mut Vars,
    /// The called tool's level: `level` atoms are constants.
    pub level: usize,
    /// The called tool's `signed` parameters: every other money argument must be >= 0 to be read.
    pub signed: Vec<String>,
    /// The context attributes declared `signed`: every other money attribute must be >= 0 to be read.
    pub signed_contexts: &'v BTreeSet<String>,
    /// The calendars `t in CALENDAR` reads: outside its zone table's window an instant is in no calendar (an error).
    pub calendars: &'v std::collections::BTreeMap<String, crate::ir::CalendarDef>,
}

impl<'v> Encoder<'v> {
    /// The encoder of conditions of a call to tool `tool` of `program` (its level, its `signed` parameters).
    pub fn for_tool(program: &'v Program, tool: usize, vars: &'v mut Vars) -> Encoder<'v> {
        let called = &program.tools[tool];
        Encoder {
            vars,
            level: called.level,
            signed: called.signed.clone(),
            signed_contexts: &program.signed_contexts,
            calendars: &program.calendars,
        }
    }

    /// The condition evaluates to true (no error): what a grant, a limit and a scope need.
    pub fn truth(&mut self, cond: &Cond) -> F {
        let cond = for_level(cond, self.level);
        and([self.defined(&cond), self.value(&cond, false)])
    }

    /// The condition evaluates to false (no error): what a prohibition, a gate, a fact or a budget needs to stay
    /// out of the way.
    pub fn falsity(&mut self, cond: &Cond) -> F {
        let cond = for_level(cond, self.level);
        and([self.defined(&cond), self.value(&cond, true)])
    }

    /// Every attribute the condition reads is present, and every money amount is in the compared currency.
    fn defined(&mut self, cond: &Cond) -> F {
        match cond {
            Cond::True | Cond::False => F::True,
            Cond::And(items) | Cond::Or(items) => and(items.iter().map(|c| self.defined(c)).collect::<Vec<_>>()),
            Cond::Atom(atom) => {
                let mut parts = Vec::new();
                if optional(&atom.attr) {
                    parts.push(is(self.vars.id(Var::Present(atom.attr.clone())), true));
                }
                // A comparison, membership or relation is defined only when its operands are present: the
                // solver still treats its value as a bool of its own, but a witness carries the operands.
                for operand in atom.attr.reads().into_iter().skip(1) {
                    if optional(operand) && !operand.is_derived() {
                        parts.push(is(self.vars.id(Var::Present(operand.clone())), true));
                    }
                }
                if let Some(code) = currency(&atom.test) {
                    let var = self.vars.id(Var::Currency(atom.attr.clone()));
                    parts.push(lit(var, Test::Compare(CompareOp::Eq, Value::String(code.to_string()))));
                }
                // `under` and `not under` are errors on a string that is not a testable path.
                if matches!(atom.test, Test::Under(_) | Test::NotUnder(_)) {
                    let value = Var::Value(atom.attr.clone(), atom.ty.clone());
                    parts.push(path(self.vars.id(value), true));
                }
                self.readable(&atom.attr, &atom.ty, &mut parts);
                // A calendar reads its instant through its zone's table (outside the table's window, an error):
                // the theory states that as a lemma on the instant's value, which needs a variable for it.
                if let Attr::InCalendar(name, instant) = &atom.attr {
                    if self.calendars.contains_key(name) {
                        self.vars.id(Var::Value((**instant).clone(), Type::Timestamp));
                    }
                }
                // An item tested for membership in a template's set parameter: the theory's `within` lemma states
                // what the item may be, which needs a variable for it.
                if let Attr::Member(item, set, ty) = &atom.attr {
                    if matches!(**set, Attr::Param(_) | Attr::ParentParam(_)) {
                        self.vars.id(Var::Value((**item).clone(), ty.clone()));
                    }
                }
                // The operands of a comparison are read the same way (the theory gives them values).
                if let Attr::Compare(left, _, right, ty) = &atom.attr {
                    self.readable(left, ty, &mut parts);
                    self.readable(right, ty, &mut parts);
                }
                and(parts)
            }
        }
    }

    /// As the interpreter reads an attribute: a money argument or context attribute that is not `signed` is
    /// mistyped below zero, and an empty resource id is absent.
    fn readable(&mut self, attr: &Attr, ty: &Type, parts: &mut Vec<F>) {
        let value = || Var::Value(attr.clone(), ty.clone());
        match attr {
            Attr::Arg(name) if *ty == Type::Money && !self.signed.contains(name) => {
                let var = self.vars.id(value());
                parts.push(lit(var, Test::Compare(CompareOp::Ge, Value::Number(Decimal(0)))));
            }
            Attr::Context(name) if *ty == Type::Money && !self.signed_contexts.contains(name) => {
                let var = self.vars.id(value());
                parts.push(lit(var, Test::Compare(CompareOp::Ge, Value::Number(Decimal(0)))));
            }
            Attr::ResourceId => {
                let var = self.vars.id(value());
                parts.push(lit(var, Test::Compare(CompareOp::Ne, Value::String(String::new()))));
            }
            _ => {}
        }
    }

    /// The condition's boolean value (or its negation), assuming it is defined.
    fn value(&mut self, cond: &Cond, negated: bool) -> F {
        match cond {
            Cond::True => F::from_bool(!negated),
            Cond::False => F::from_bool(negated),
            Cond::And(items) | Cond::Or(items) => {
                let parts: Vec<F> = items.iter().map(|c| self.value(c, negated)).collect();
                if matches!(cond, Cond::And(_)) != negated {
                    and(parts)
                } else {
                    or(parts)
                }
            }
            Cond::Atom(atom) => self.atom(atom, negated),
        }
    }

    fn atom(&mut self, atom: &Atom, negated: bool) -> F {
        let test = if negated { atom.test.negated() } else { atom.test.clone() };
        let var = self.vars.id(Var::Value(atom.attr.clone(), atom.ty.clone()));
        // A money amount is compared as a decimal; its currency is its own variable.
        let test = if atom.ty == Type::Money { amounts(test) } else { test };
        lit(var, test)
    }

    /// An approval of kind `kind` that satisfies a gate: presented, issued under one of `names`, within its ttl,
    /// and matching every binding of the kind.
    /// `approvers`: the kind's `approved by` and the chain's principal, when it says who grants it.
    pub fn approved(
        &mut self,
        kind: &str,
        ttl: u64,
        binds: &[Binding],
        names: &[String],
        approvers: Option<(&Approvers, &str)>,
        instance: Option<(&[String], &[String])>,
    ) -> F {
        let presented = self.vars.id(Var::Approval(kind.to_string()));
        let age = self.vars.id(Var::ApprovalAge(kind.to_string()));
        let mandate = self.vars.id(Var::ApprovalMandate(kind.to_string()));
        let ttl = i64::try_from(ttl).unwrap_or(i64::MAX);
        let mut parts = vec![
            is(presented, true),
            lit(age, Test::Compare(CompareOp::Ge, Value::Duration(0))),
            lit(age, Test::Compare(CompareOp::Lt, Value::Duration(ttl))),
            lit(mandate, Test::In(names.iter().map(|n| Value::String(n.clone())).collect())),
        ];
        if let Some((approvers, principal)) = approvers {
            let by = self.vars.id(Var::ApprovalBy(kind.to_string()));
            let mut named: Vec<Value> = approvers.ids.iter().map(|id| Value::String(id.clone())).collect();
            let mut admitted = Vec::new();
            match instance {
                Some((ids, prefixes)) if approvers.principal => {
                    if ids.is_empty() && prefixes.is_empty() {
                        admitted.push(F::True);
                    }
                    named.extend(ids.iter().map(|id| Value::String(id.clone())));
                    admitted.extend(prefixes.iter().map(|p| pattern(by, p)));
                }
                _ if approvers.principal => named.push(Value::String(principal.to_string())),
                _ => {}
            }
            admitted.push(lit(by, Test::In(named)));
            admitted.extend(approvers.prefixes.iter().map(|p| pattern(by, p)));
            parts.push(or(admitted));
        }
        for &binding in binds {
            parts.push(is(self.vars.id(Var::ApprovalBound(kind.to_string(), binding)), true));
            match binding {
                Binding::Target => {
                    parts.push(is(self.vars.id(Var::Present(Attr::ResourceId)), true));
                    // An empty resource id is absent: nothing binds to it.
                    let value = self.vars.id(Var::Value(Attr::ResourceId, Type::String));
                    parts.push(lit(value, Test::Compare(CompareOp::Ne, Value::String(String::new()))));
                }
                Binding::Manifest => {
                    let manifest = Attr::Arg("manifest".into());
                    parts.push(is(self.vars.id(Var::Present(manifest.clone())), true));
                    // A blank manifest binds nothing.
                    let value = self.vars.id(Var::Value(manifest, Type::String));
                    parts.push(lit(value, Test::Compare(CompareOp::Ne, Value::String(String::new()))));
                }
                Binding::Tool | Binding::Arguments => {}
            }
        }
        and(parts)
    }
}

/// Whether a condition evaluates to true under a model (the variables were made by an [`Encoder`] of the same
/// comparison; a variable no formula reads counts as unknown, so the answer is false).
pub fn truth_in(cond: &Cond, level: usize, vars: &Vars, model: &Model) -> bool {
    fn defined(cond: &Cond, vars: &Vars, model: &Model) -> bool {
        match cond {
            Cond::True | Cond::False => true,
            Cond::And(items) | Cond::Or(items) => items.iter().all(|c| defined(c, vars, model)),
            Cond::Atom(atom) => atom_defined(atom, vars, model),
        }
    }
    fn value(cond: &Cond, vars: &Vars, model: &Model) -> bool {
        match cond {
            Cond::True => true,
            Cond::False => false,
            Cond::And(items) => items.iter().all(|c| value(c, vars, model)),
            Cond::Or(items) => items.iter().any(|c| value(c, vars, model)),
            Cond::Atom(atom) => atom_value(atom, vars, model),
        }
    }
    let cond = for_level(cond, level);
    defined(&cond, vars, model) && value(&cond, vars, model)
}

/// Whether an atom evaluates to true under a model.
pub fn atom_true(atom: &Atom, vars: &Vars, model: &Model) -> bool {
    atom_defined(atom, vars, model) && atom_value(atom, vars, model)
}

fn atom_defined(atom: &Atom, vars: &Vars, model: &Model) -> bool {
    let lookup = |var: Var| vars.find(&var).and_then(|id| model.get(id as usize));
    let present = !optional(&atom.attr) || matches!(lookup(Var::Present(atom.attr.clone())), Some(Value::Bool(true)));
    let same_currency = match currency(&atom.test) {
        Some(code) => matches!(lookup(Var::Currency(atom.attr.clone())), Some(Value::String(c)) if c == code),
        None => true,
    };
    // `under` and `not under` are errors on a string that is not a testable path.
    let testable = match (&atom.test, lookup(Var::Value(atom.attr.clone(), atom.ty.clone()))) {
        (Test::Under(_) | Test::NotUnder(_), Some(Value::String(s))) => crate::check::sat::testable_path(s),
        (Test::Under(_) | Test::NotUnder(_), _) => false,
        _ => true,
    };
    present && same_currency && testable
}

fn atom_value(atom: &Atom, vars: &Vars, model: &Model) -> bool {
    let test = if atom.ty == Type::Money { amounts(atom.test.clone()) } else { atom.test.clone() };
    vars.find(&Var::Value(atom.attr.clone(), atom.ty.clone()))
        .and_then(|id| model.get(id as usize))
        .is_some_and(|value| crate::check::sat::holds(value, &test))
}

/// A money test with its amounts as plain decimals.
fn amounts(test: Test) -> Test {
    let plain = |v: Value| match v {
        Value::Money(m) => Value::Number(m.amount),
        other => other,
    };
    match test {
        Test::Compare(op, v) => Test::Compare(op, plain(v)),
        Test::In(vs) => Test::In(vs.into_iter().map(plain).collect()),
        Test::NotIn(vs) => Test::NotIn(vs.into_iter().map(plain).collect()),
        other => other,
    }
}
