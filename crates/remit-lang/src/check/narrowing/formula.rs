//! Formulas over the variables of a request: the symbolic form of "this mandate chain allows this call".
//!
//! The interpreter's conditions are three-valued (true, false, error) and an error anywhere makes a whole
//! condition an error. Here every variable is two-valued: an optional attribute has a `Present` variable and a
//! `Value` variable, a money attribute also a `Currency`, so "the condition errs" becomes an ordinary formula
//! (some attribute it reads is absent, or a money value is in another currency). Formulas are negation-free
//! (each literal's test can be negated in place), so negating a formula is exact.

use std::collections::{BTreeMap, HashMap};

use crate::ir::{Attr, Binding, Test, Type, Value};
use crate::syntax::ast::CompareOp;

pub type VarId = u32;

/// What a variable stands for. Variables are named by what they read, never by rule or mandate, so the same
/// request attribute is the same variable on both sides of a comparison (and in two versions of a policy).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Var {
    /// The value of a request attribute when present; for money, the amount (the currency is [`Var::Currency`]).
    Value(Attr, Type),
    /// The attribute is in the request with a value of its type.
    Present(Attr),
    /// The currency of a money attribute.
    Currency(Attr),
    /// `context.operation_id` is present and not empty.
    OperationId,
    /// `context.facts.NAME` (current only when it equals the required version): whether it is a string, and its
    /// value as an integer or as a string (the one `FactIsText` says).
    Fact(String),
    FactIsText(String),
    FactText(String),
    FactPresent(String),
    /// `context.counters.NAME` (a budget needs a non-negative integer below its maximum).
    Counter(String),
    CounterPresent(String),
    /// One unconsumed approval of this kind is presented, with `issued_at <= now < expires_at`.
    Approval(String),
    /// `now - issued_at` of that approval (it must be below the kind's ttl).
    ApprovalAge(String),
    /// The mandate that approval was issued under (it must be in the chain).
    ApprovalMandate(String),
    /// Who granted that approval (`approved_by`; it must be one its kind's `approved by` admits).
    ApprovalBy(String),
    /// The approval's field for this binding matches the call.
    ApprovalBound(String, Binding),
}

impl Var {
    /// The domain the solver decides this variable in.
    pub fn domain(&self) -> Type {
        match self {
            Var::Value(_, Type::Money) => Type::Decimal,
            Var::Value(_, ty) => ty.clone(),
            Var::Currency(_) | Var::ApprovalMandate(_) | Var::ApprovalBy(_) | Var::FactText(_) => Type::String,
            Var::Fact(_) | Var::Counter(_) => Type::Int,
            Var::ApprovalAge(_) => Type::Duration,
            Var::Present(_)
            | Var::OperationId
            | Var::FactPresent(_)
            | Var::FactIsText(_)
            | Var::CounterPresent(_)
            | Var::Approval(_)
            | Var::ApprovalBound(..) => Type::Bool,
        }
    }
}

/// The variables of one comparison, numbered.
#[derive(Debug, Default)]
pub struct Vars {
    list: Vec<Var>,
    domains: Vec<Type>,
    index: HashMap<Var, VarId>,
}

impl Vars {
    pub fn id(&mut self, var: Var) -> VarId {
        if let Some(&id) = self.index.get(&var) {
            return id;
        }
        let id = self.list.len() as VarId;
        self.domains.push(var.domain());
        self.list.push(var.clone());
        self.index.insert(var, id);
        id
    }

    /// The id of a variable, if a formula of this comparison reads it.
    pub fn find(&self, var: &Var) -> Option<VarId> {
        self.index.get(var).copied()
    }

    pub fn get(&self, id: VarId) -> &Var {
        &self.list[id as usize]
    }

    pub fn domain(&self, id: VarId) -> &Type {
        &self.domains[id as usize]
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (VarId, &Var)> {
        self.list.iter().enumerate().map(|(i, v)| (i as VarId, v))
    }
}

/// The variables a formula reads, as a bit set (ids past 127 share the last bit: a coarser but safe answer).
pub type Mask = u128;

fn bit(var: VarId) -> Mask {
    1u128 << var.min(127)
}

/// A negation-free formula. `And` and `Or` carry the mask of the variables below them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum F {
    True,
    False,
    Lit(VarId, Test),
    /// The variable's string is (`true`) or is not (`false`) a path `under` can test: one the interpreter does not
    /// refuse as unsafe (`..` and `.` segments, `//`, backslashes, NUL, encoded separators and dots). `under` and
    /// `not under` are errors on any other string, so an atom testing one needs this literal to be defined.
    Path(VarId, bool),
    And(Vec<F>, Mask),
    Or(Vec<F>, Mask),
}

impl F {
    pub fn from_bool(b: bool) -> F {
        if b {
            F::True
        } else {
            F::False
        }
    }

    pub fn mask(&self) -> Mask {
        match self {
            F::True | F::False => 0,
            F::Lit(v, _) | F::Path(v, _) => bit(*v),
            F::And(_, m) | F::Or(_, m) => *m,
        }
    }
}

pub fn lit(var: VarId, test: Test) -> F {
    F::Lit(var, test)
}

/// The string variable `var` is a path `under` can test (`safe`), or is not.
pub fn path(var: VarId, safe: bool) -> F {
    F::Path(var, safe)
}

/// A bool variable is `value`.
pub fn is(var: VarId, value: bool) -> F {
    F::Lit(var, Test::Compare(CompareOp::Eq, Value::Bool(value)))
}

/// Conjunction, flattened and simplified (`False` absorbs, `True` vanishes, duplicates go).
pub fn and(items: impl IntoIterator<Item = F>) -> F {
    let mut out: Vec<F> = Vec::new();
    for item in items {
        match item {
            F::True => {}
            F::False => return F::False,
            F::And(inner, _) => {
                for i in inner {
                    if !out.contains(&i) {
                        out.push(i);
                    }
                }
            }
            other => {
                if !out.contains(&other) {
                    out.push(other);
                }
            }
        }
    }
    match out.len() {
        0 => F::True,
        1 => out.pop().unwrap_or(F::True),
        _ => {
            let mask = out.iter().fold(0, |m, f| m | f.mask());
            F::And(out, mask)
        }
    }
}

/// Disjunction, flattened and simplified (`True` absorbs, `False` vanishes, duplicates go).
pub fn or(items: impl IntoIterator<Item = F>) -> F {
    let mut out: Vec<F> = Vec::new();
    for item in items {
        match item {
            F::False => {}
            F::True => return F::True,
            F::Or(inner, _) => {
                for i in inner {
                    if !out.contains(&i) {
                        out.push(i);
                    }
                }
            }
            other => {
                if !out.contains(&other) {
                    out.push(other);
                }
            }
        }
    }
    match out.len() {
        0 => F::False,
        1 => out.pop().unwrap_or(F::False),
        _ => {
            let mask = out.iter().fold(0, |m, f| m | f.mask());
            F::Or(out, mask)
        }
    }
}

pub fn negate(f: &F) -> F {
    match f {
        F::True => F::False,
        F::False => F::True,
        F::Lit(v, test) => F::Lit(*v, test.negated()),
        F::Path(v, safe) => F::Path(*v, !safe),
        F::And(items, mask) => F::Or(items.iter().map(negate).collect(), *mask),
        F::Or(items, mask) => F::And(items.iter().map(negate).collect(), *mask),
    }
}

/// A value for every variable of a comparison, and what the theory of equality chose for the terms it reasons
/// about (see `theory`): one value per class of equal terms, distinct classes apart, so that a witness written
/// from the model makes the interpreter compute every equality and relation atom as the model has it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    pub values: Vec<Value>,
    /// Each term's value (with its type), including terms no variable stands for (an operand no literal tests).
    pub terms: BTreeMap<Attr, (Value, Type)>,
    /// The one currency of each money term in a class with others (a comparison of two amounts is defined only in
    /// one currency).
    pub currencies: BTreeMap<Attr, String>,
}

impl std::ops::Deref for Model {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        &self.values
    }
}

/// Calls `visit` on every literal of a formula.
pub fn literals<'f>(f: &'f F, visit: &mut impl FnMut(VarId, &'f Test)) {
    match f {
        F::True | F::False | F::Path(..) => {}
        F::Lit(v, t) => visit(*v, t),
        F::And(items, _) | F::Or(items, _) => items.iter().for_each(|i| literals(i, visit)),
    }
}
