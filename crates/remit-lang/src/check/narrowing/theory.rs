//! The theory of equality, order and membership over terms, for the solver (`solve`). The search treats a
//! comparison of two attributes (`resource.owner == args.payee`, `args.amount <= resource.total`), a membership, a
//! relation atom (`owns(subject, resource)`) and a calendar atom as bools of their own; once it has a model, this
//! module holds the model to the laws those bools obey in every request:
//! - **equality**: the terms the model says are equal form classes (union-find); all the literal tests on the
//!   members of a class (`args.payee == "user:alice"`, the principal being a literal) must have one value in
//!   common, and no two members may be said to differ (this is transitivity and substitution);
//! - **order** (ints, decimals, money in one currency, timestamps, durations): `<` and `<=` are edges between
//!   classes; a cycle through a strict edge is a contradiction, a cycle of `<=` makes one class, and the bounds the
//!   literal tests set are carried along the edges (a class whose bounds cross is a contradiction);
//! - **congruence**: relation atoms of one relation over equal terms (the same class, or the same constant) must
//!   agree, on being answered and on the answer; so must memberships of equal items in one set;
//! - **calendars** (`calendars`): `t in C` and not `t in P` is a contradiction when C holds only instants P holds;
//! - **durations** (`difference`): `until - granted <= 30d` and the like, with the order and the literal bounds of
//!   the timestamps they read, are difference constraints `x - y <= c`; a negative cycle is a contradiction;
//! - a comparison, membership, relation or calendar atom is defined only when what it reads is present (and, for
//!   a calendar, inside its zone table), and an equality or order of two present attributes (not money: it also
//!   needs one currency, which the money groups see to) is defined.
//!
//! A model that obeys them gets values: one per class, distinct classes apart, in the order of the edges, so that
//! the witness written from it makes the interpreter compute every atom as the model has it. A model that breaks
//! one yields a **lemma**: a disjunction of literals, true in every request (it is guarded by the presence of what
//! it reads), that the model violates. The solver adds it to its goals and searches again (lazy theory reasoning,
//! as SMT solvers do), so what is decided stays sound and the loop ends (each lemma excludes the assumptions that
//! broke it).
//!
//! What stays opaque: memberships beyond congruence, calendars in two zones over a long or unbounded
//! window. When no value assignment is found and the failure is not a proven conflict (many terms pairwise apart in
//! a small finite domain, a relation tuple that coincides by choice, an order whose only values fall in the gaps of
//! `!=` tests), the answer is [`Verdict::Unknown`]: the check does not guess.
//!
//! Depends on `formula`, `sat`, `difference` and `calendars` (the time library) only; never on the interpreter.

use std::collections::{BTreeMap, BTreeSet};

use super::authority::optional;
use super::calendars::{containment, outside_near, Containment};
use super::difference::{self, Outcome};
use super::formula::{and, is, or, Var, VarId, Vars, F};
use crate::check::sat::{holds, path_model};
use crate::ir::{Attr, CalendarDef, Term, Test, Type, Value};
use crate::syntax::ast::CompareOp;

/// What the solver assumed when it found a model.
pub struct Assumptions<'a, 'f> {
    pub vars: &'a Vars,
    /// The literals assumed on each variable.
    pub assumed: &'a [Vec<&'f Test>],
    /// The path literal assumed on each variable.
    pub path: &'a [Option<bool>],
    /// A value passing each variable's literals.
    pub value: &'a [Option<Value>],
    pub levels: usize,
    /// The program's calendars, when the atoms that name them mean them (not across two versions of a policy).
    pub calendars: Option<&'a BTreeMap<String, CalendarDef>>,
}

pub enum Verdict {
    /// The model obeys the laws; the values that show it.
    Consistent(Assignment),
    /// A lemma the model violates.
    Conflict(F),
    /// No assignment found, and no lemma proven.
    Unknown,
}

/// The values the theory chose: each term's, each money class's currency, and model values to replace (variables
/// the search left free, set to agree with the rest).
#[derive(Debug, Default)]
pub struct Assignment {
    pub terms: BTreeMap<Attr, (Value, Type)>,
    pub currencies: BTreeMap<Attr, String>,
    pub overrides: Vec<(VarId, Value)>,
}

/// Whether a comparison has variables the theory reasons about (otherwise the check is skipped).
pub fn relevant(vars: &Vars) -> bool {
    vars.iter().any(|(_, var)| match var {
        Var::Value(Attr::Compare(_, op, _, ty), _) => reasoned(*op, ty),
        Var::Value(Attr::Relation(..), _) | Var::Present(Attr::Relation(..)) => true,
        _ => false,
    }) || vars.iter().filter(|(_, var)| matches!(var, Var::Value(Attr::InCalendar(..), _))).count() >= 2
        || vars.iter().any(|(_, var)| matches!(var, Var::Value(Attr::Member(..) | Attr::Elapsed(..), _)))
}

/// Whether the theory reasons about a comparison of two attributes: equality of anything but sets, order
/// (`sat::canonical` leaves only `<` and `<=`) of the ordered types.
fn reasoned(op: CompareOp, ty: &Type) -> bool {
    match op {
        CompareOp::Eq => !matches!(ty, Type::Set(_)),
        CompareOp::Lt | CompareOp::Le => ordered(ty),
        _ => false,
    }
}

/// The types whose values the order of the theory ranges over (money in one currency).
fn ordered(ty: &Type) -> bool {
    matches!(ty, Type::Int | Type::Decimal | Type::Money | Type::Timestamp | Type::Duration)
}

/// `left OP right` (`==`, `<` or `<=`), decided by the model (`equal` is the model's answer), defined (both
/// present).
struct Edge {
    left: usize,
    right: usize,
    op: CompareOp,
    equal: bool,
    value: VarId,
    defined: VarId,
}

/// `from < to` (`strict`) or `from <= to` between two classes, as an edge of the model says.
#[derive(Clone, Copy)]
struct Arc {
    from: usize,
    to: usize,
    strict: bool,
    edge: usize,
}

/// `item in set`, decided by the model, defined.
struct Membership<'v> {
    item: usize,
    set: &'v Attr,
    holds: bool,
    value: VarId,
    defined: VarId,
}

/// A relation atom the model decides.
struct RelationAtom<'v> {
    name: &'v str,
    terms: &'v [Term],
    present: (Option<VarId>, Option<bool>),
    holds: (Option<VarId>, Option<bool>),
}

struct Theory<'a, 'f> {
    a: &'a Assumptions<'a, 'f>,
    /// The terms (attributes), their types (the compared type, or the attribute's own), and classes.
    terms: Vec<&'a Attr>,
    types: Vec<Type>,
    index: BTreeMap<&'a Attr, usize>,
    parent: Vec<usize>,
    /// The equalities that merged each class (by root), as indices into `edges`.
    merged: Vec<Vec<usize>>,
    edges: Vec<Edge>,
    /// Money comparisons the model has undefined while both operands are present: their terms need two currencies.
    undefined_money: Vec<(usize, usize, VarId)>,
}

pub fn check(a: &Assumptions<'_, '_>) -> Verdict {
    let mut theory = Theory {
        a,
        terms: Vec::new(),
        types: Vec::new(),
        index: BTreeMap::new(),
        parent: Vec::new(),
        merged: Vec::new(),
        edges: Vec::new(),
        undefined_money: Vec::new(),
    };
    match theory.run() {
        // Durations: the difference constraints over the timestamps (`difference`), values chosen to satisfy them.
        Ok(Verdict::Consistent(mut assignment)) => {
            let model = difference::Model { vars: a.vars, assumed: a.assumed, value: a.value };
            let chosen = difference::Chosen { terms: &assignment.terms, overrides: &assignment.overrides };
            match difference::check(&model, &chosen) {
                Ok(Outcome::Consistent(values)) => {
                    for (attr, at, ids) in values {
                        let value = Value::Timestamp(at);
                        assignment.overrides.extend(ids.into_iter().map(|id| (id, value.clone())));
                        assignment.terms.insert(attr, (value, Type::Timestamp));
                    }
                    Verdict::Consistent(assignment)
                }
                Ok(Outcome::Unknown) => Verdict::Unknown,
                Err(lemma) => Verdict::Conflict(lemma),
            }
        }
        Ok(verdict) => verdict,
        Err(lemma) => Verdict::Conflict(lemma),
    }
}

impl<'a, 'f> Theory<'a, 'f> {
    fn decided(&self, id: VarId) -> Option<bool> {
        let v = id as usize;
        (!self.a.assumed[v].is_empty()).then(|| matches!(self.a.value[v], Some(Value::Bool(true))))
    }

    fn present_var(&self, attr: &Attr) -> Option<VarId> {
        self.a.vars.find(&Var::Present(attr.clone()))
    }

    /// Whether the model has the attribute present (`None`: undecided).
    fn present(&self, attr: &Attr) -> Option<bool> {
        if !optional(attr) {
            return Some(true);
        }
        self.present_var(attr).and_then(|id| self.decided(id))
    }

    /// `defined` (a comparison or relation atom) needs `attr` present: a lemma when the model does not have it.
    fn needs_present(&self, defined: VarId, attr: &Attr) -> Result<bool, F> {
        match self.present(attr) {
            Some(true) => Ok(true),
            _ => match self.present_var(attr) {
                Some(p) => Err(or([is(defined, false), is(p, true)])),
                None => Ok(false),
            },
        }
    }

    fn term(&mut self, attr: &'a Attr, ty: Type) -> usize {
        if let Some(&i) = self.index.get(attr) {
            return i;
        }
        let i = self.terms.len();
        self.terms.push(attr);
        self.types.push(ty);
        self.index.insert(attr, i);
        self.parent.push(i);
        self.merged.push(Vec::new());
        i
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// The solver's domain for a term's values.
    fn domain(&self, term: usize) -> Type {
        Var::Value(self.terms[term].clone(), self.types[term].clone()).domain()
    }

    /// The value variables of a term whose domain is the term's.
    fn value_vars(&self, term: usize) -> Vec<VarId> {
        let domain = self.domain(term);
        self.a
            .vars
            .iter()
            .filter(|(_, var)| {
                matches!(var, Var::Value(attr, ty) if attr == self.terms[term]
                && Var::Value(attr.clone(), ty.clone()).domain() == domain)
            })
            .map(|(id, _)| id)
            .collect()
    }

    /// The negation of what the model assumed on a variable, as lemma literals.
    fn denial(&self, id: VarId, out: &mut Vec<F>) {
        let v = id as usize;
        out.extend(self.a.assumed[v].iter().map(|t| F::Lit(id, t.negated())));
        if let Some(safe) = self.a.path[v] {
            out.push(F::Path(id, !safe));
        }
    }

    /// The equalities that made a class.
    fn explain_edges(&self, root: usize, out: &mut Vec<F>) {
        for &e in &self.merged[root] {
            let edge = &self.edges[e];
            out.push(is(edge.defined, false));
            out.push(is(edge.value, !edge.equal));
        }
    }

    /// The literal tests on a class's members, guarded by their presence.
    fn explain_tests(&self, members: &[usize], out: &mut Vec<F>) {
        for &m in members {
            let before = out.len();
            for id in self.value_vars(m) {
                self.denial(id, out);
            }
            if out.len() > before && optional(self.terms[m]) {
                if let Some(p) = self.present_var(self.terms[m]) {
                    out.push(is(p, false));
                }
            }
        }
    }

    fn explain_currencies(&self, members: &[usize], out: &mut Vec<F>) {
        for &m in members {
            if let Some(id) = self.a.vars.find(&Var::Currency(self.terms[m].clone())) {
                let before = out.len();
                self.denial(id, out);
                if out.len() > before {
                    if let Some(p) = self.present_var(self.terms[m]) {
                        out.push(is(p, false));
                    }
                }
            }
        }
    }

    /// Every literal test on a class's members, and their path literal; `None` when two path literals disagree.
    fn tests(&self, members: &[usize]) -> Option<(Vec<&'f Test>, Option<bool>)> {
        let mut tests = Vec::new();
        let mut path = None;
        for &m in members {
            for id in self.value_vars(m) {
                tests.extend(self.a.assumed[id as usize].iter().copied());
                match (path, self.a.path[id as usize]) {
                    (Some(a), Some(b)) if a != b => return None,
                    (None, Some(b)) => path = Some(b),
                    _ => {}
                }
            }
        }
        Some((tests, path))
    }

    fn run(&mut self) -> Result<Verdict, F> {
        let vars = self.a.vars;
        // An equality of two present attributes is defined (money also needs one currency: not checked here).
        for (id, var) in vars.iter() {
            let Var::Present(Attr::Compare(left, op, right, ty)) = var else { continue };
            if !reasoned(*op, ty) || self.decided(id) != Some(false) {
                continue;
            }
            if self.present(left) == Some(true) && self.present(right) == Some(true) {
                // Money in one currency is defined too: the witness gives these two apart currencies.
                if *ty == Type::Money {
                    let (l, r) = (self.term(left, ty.clone()), self.term(right, ty.clone()));
                    self.undefined_money.push((l, r, id));
                    continue;
                }
                let mut lemma = vec![is(id, true)];
                lemma.extend([left, right].into_iter().filter_map(|a| self.present_var(a)).map(|p| is(p, false)));
                return Err(or(lemma));
            }
        }
        // Equalities and order between attributes the model decides, and their operands.
        for (id, var) in vars.iter() {
            let Var::Value(attr @ Attr::Compare(left, op, right, ty), _) = var else { continue };
            if !reasoned(*op, ty) {
                continue;
            }
            let Some(equal) = self.decided(id) else { continue };
            let Some(defined) = self.present_var(attr) else { continue };
            if self.decided(defined) != Some(true) {
                continue;
            }
            if !(self.needs_present(defined, left)? && self.needs_present(defined, right)?) {
                continue;
            }
            let (l, r) = (self.term(left, ty.clone()), self.term(right, ty.clone()));
            self.edges.push(Edge { left: l, right: r, op: *op, equal, value: id, defined });
        }
        // A membership of a present item (not money: currencies) in a present set is defined.
        for (id, var) in vars.iter() {
            let Var::Present(Attr::Member(item, set, ty)) = var else { continue };
            if *ty == Type::Money || self.decided(id) != Some(false) {
                continue;
            }
            if self.present(item) == Some(true) && self.present(set) == Some(true) {
                let mut lemma = vec![is(id, true)];
                lemma.extend([item, set].into_iter().filter_map(|a| self.present_var(a)).map(|p| is(p, false)));
                return Err(or(lemma));
            }
        }
        // Memberships the model decides: their items are terms (equal items, the same answer for one set).
        let mut memberships: Vec<Membership<'a>> = Vec::new();
        for (id, var) in vars.iter() {
            let Var::Value(attr @ Attr::Member(item, set, ty), _) = var else { continue };
            let Some(holds) = self.decided(id) else { continue };
            let Some(defined) = self.present_var(attr) else { continue };
            if self.decided(defined) != Some(true) {
                continue;
            }
            if !(self.needs_present(defined, item)? && self.needs_present(defined, set)?) {
                continue;
            }
            let item = self.term(item, ty.clone());
            memberships.push(Membership { item, set, holds, value: id, defined });
        }
        // Relation atoms the model decides, whose terms are present.
        let mut relations: BTreeSet<&Attr> = BTreeSet::new();
        for (_, var) in vars.iter() {
            if let Var::Value(attr @ Attr::Relation(..), _) | Var::Present(attr @ Attr::Relation(..)) = var {
                relations.insert(attr);
            }
        }
        let mut atoms: Vec<RelationAtom<'a>> = Vec::new();
        for attr in relations {
            let Attr::Relation(name, terms) = attr else { continue };
            let present_id = self.present_var(attr);
            let holds_id = vars.find(&Var::Value(attr.clone(), Type::Bool));
            let present = (present_id, present_id.and_then(|id| self.decided(id)));
            let holds = (holds_id, holds_id.and_then(|id| self.decided(id)));
            if present.1.is_none() && holds.1.is_none() {
                continue;
            }
            let mut all_present = true;
            for term in terms {
                let Term::Attr(t) = term else { continue };
                all_present &= match (present, self.present(t)) {
                    (_, Some(true)) => true,
                    ((Some(p), Some(true)), _) => self.needs_present(p, t)?,
                    _ => false,
                };
            }
            if !all_present {
                continue;
            }
            for term in terms {
                if let Term::Attr(t) = term {
                    let ty = vars
                        .iter()
                        .find_map(|(_, v)| match v {
                            Var::Value(a, ty) if a == t => Some(ty.clone()),
                            _ => None,
                        })
                        .unwrap_or(Type::String);
                    self.term(t, ty);
                }
            }
            atoms.push(RelationAtom { name, terms, present, holds });
        }
        // Calendars: a child's calendar contained in a parent's, for the same instant.
        let hints = match self.a.calendars {
            Some(calendars) => self.calendar_lemmas(calendars)?,
            None => Vec::new(),
        };
        let within = memberships.iter().any(|m| matches!(m.set, Attr::Param(_) | Attr::ParentParam(_)));
        if self.edges.is_empty()
            && self.undefined_money.is_empty()
            && atoms.len() < 2
            && memberships.len() < 2
            && !within
        {
            let mut assignment = Assignment::default();
            self.hint(&hints, &mut assignment);
            return Ok(Verdict::Consistent(assignment));
        }

        // Classes.
        for e in 0..self.edges.len() {
            if !self.edges[e].equal || self.edges[e].op != CompareOp::Eq {
                continue;
            }
            let (a, b) = (self.find(self.edges[e].left), self.find(self.edges[e].right));
            if a != b {
                self.parent[b] = a;
                let moved = std::mem::take(&mut self.merged[b]);
                self.merged[a].extend(moved);
                self.merged[a].push(e);
            }
        }
        // Order: a cycle through a strict edge is a contradiction, a cycle of `<=` makes its classes one.
        self.order_cycles()?;
        let mut classes: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for t in 0..self.terms.len() {
            let root = self.find(t);
            classes.entry(root).or_default().push(t);
        }
        // Each class: its members' tests have a value in common, in one currency, and no member differs from another.
        let mut feasible: BTreeMap<usize, (Vec<&'f Test>, Option<bool>)> = BTreeMap::new();
        for (&root, members) in &classes {
            let domain = self.domain(root);
            let tests = self.tests(members);
            let fits = tests.as_ref().and_then(|(t, p)| path_model(&domain, t, *p, self.a.levels));
            if fits.is_none() {
                let mut lemma = Vec::new();
                self.explain_edges(root, &mut lemma);
                self.explain_tests(members, &mut lemma);
                return Err(or(lemma));
            }
            if self.types[root] == Type::Money && members.len() > 1 && self.currency(members).is_none() {
                let mut lemma = Vec::new();
                self.explain_edges(root, &mut lemma);
                self.explain_currencies(members, &mut lemma);
                return Err(or(lemma));
            }
            feasible.insert(root, tests.unwrap_or_default());
        }
        let mut apart: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        for e in 0..self.edges.len() {
            if self.edges[e].equal || self.edges[e].op != CompareOp::Eq {
                continue;
            }
            let (a, b) = (self.find(self.edges[e].left), self.find(self.edges[e].right));
            if a == b {
                let mut lemma = Vec::new();
                self.explain_edges(a, &mut lemma);
                lemma.push(is(self.edges[e].defined, false));
                lemma.push(is(self.edges[e].value, true));
                return Err(or(lemma));
            }
            apart.entry(a).or_default().push((b, e));
            apart.entry(b).or_default().push((a, e));
        }

        // Money compared (by equality or order) needs one currency.
        let currencies = self.currency_groups()?;
        // Order: the bounds the literal tests set, carried along the edges; a class whose bounds cross is a
        // contradiction (the tests on the start of a chain, its edges, the tests on its end).
        let arcs = self.arcs();
        let sequence = self.sequence(classes.keys().copied().collect(), &arcs);
        let bounds = self.bounds(&sequence, &arcs, &feasible)?;

        // Values: one per class, apart from the classes it must differ from, and preferably from every other
        // class and every constant a relation names (so that no equality or tuple coincides by accident); in the
        // order of the edges, each within its bounds and above the classes before it.
        let constants: Vec<Value> = atoms
            .iter()
            .flat_map(|atom| atom.terms.iter())
            .filter_map(|t| match t {
                Term::Value(s) => Some(Value::String(s.clone())),
                Term::Attr(_) => None,
            })
            .collect();
        let mut chosen: BTreeMap<usize, Value> = BTreeMap::new();
        for &root in &sequence {
            let domain = self.domain(root);
            let (tests, path) = &feasible[&root];
            let mut order_tests: Vec<Test> = Vec::new();
            if let Some(&(lo, hi)) = bounds.get(&root) {
                order_tests.extend(lo.map(|lo| Test::Compare(CompareOp::Ge, ordinal_value(&domain, lo))));
                order_tests.extend(hi.map(|hi| Test::Compare(CompareOp::Le, ordinal_value(&domain, hi))));
                for arc in arcs.iter().filter(|arc| arc.to == root && arc.from != root) {
                    if let Some(before) = chosen.get(&arc.from) {
                        let op = if arc.strict { CompareOp::Gt } else { CompareOp::Ge };
                        order_tests.push(Test::Compare(op, before.clone()));
                    }
                }
            }
            let mut tests = tests.clone();
            tests.extend(order_tests.iter());
            let tests = &tests;
            let required: Vec<Value> =
                apart.get(&root).into_iter().flatten().filter_map(|(other, _)| chosen.get(other).cloned()).collect();
            let mut preferred = required.clone();
            preferred.extend(chosen.iter().filter(|(r, _)| self.domain(**r) == domain).map(|(_, v)| v.clone()));
            if matches!(domain, Type::String | Type::Kind(_) | Type::Enum(..)) {
                preferred.extend(constants.iter().cloned());
            }
            let avoiding = |values: &[Value]| {
                let nots: Vec<Test> = values.iter().map(|v| Test::Compare(CompareOp::Ne, v.clone())).collect();
                let mut all: Vec<&Test> = tests.clone();
                all.extend(nots.iter());
                path_model(&domain, &all, *path, self.a.levels)
            };
            let value = match avoiding(&preferred).or_else(|| avoiding(&required)) {
                Some(value) => value,
                None => {
                    // Proven only when this class and one it must differ from can each take one value, the same.
                    for &(other, e) in apart.get(&root).into_iter().flatten() {
                        if let Some(v) = chosen.get(&other) {
                            if self.pinned(root, v) && self.pinned(other, v) {
                                let mut lemma = Vec::new();
                                for class in [root, other] {
                                    self.explain_edges(class, &mut lemma);
                                    self.explain_tests(&classes[&class], &mut lemma);
                                }
                                lemma.push(is(self.edges[e].defined, false));
                                lemma.push(is(self.edges[e].value, true));
                                return Err(or(lemma));
                            }
                        }
                    }
                    return Ok(Verdict::Unknown);
                }
            };
            chosen.insert(root, value);
        }

        // Congruence: memberships of equal items in one set agree.
        for (i, x) in memberships.iter().enumerate() {
            for y in &memberships[i + 1..] {
                if x.set == y.set && x.holds != y.holds && self.find(x.item) == self.find(y.item) {
                    let mut lemma = Vec::new();
                    self.explain_edges(self.root_of(x.item), &mut lemma);
                    for m in [x, y] {
                        lemma.push(is(m.defined, false));
                        lemma.push(is(m.value, !m.holds));
                    }
                    return Err(or(lemma));
                }
            }
        }

        // `x in P` and `P within L` (a parameter's bound): `x in L`. The lemma needs a literal on `x`'s value, which
        // the encoder makes for every membership in a parameter's set.
        for m in &memberships {
            if !m.holds || self.types[m.item] == Type::Money {
                continue;
            }
            let set_var = Var::Value(m.set.clone(), Type::Set(Box::new(self.types[m.item].clone())));
            let Some(set_id) = self.a.vars.find(&set_var) else { continue };
            let Some(value) = chosen.get(&self.root_of(m.item)) else { continue };
            for test in &self.a.assumed[set_id as usize] {
                let Test::Within(allowed) = test else { continue };
                let inside = Test::In(allowed.clone());
                if holds(value, &inside) {
                    continue;
                }
                let items = self.value_vars(m.item);
                if items.is_empty() {
                    return Ok(Verdict::Unknown);
                }
                let mut lemma =
                    vec![is(m.defined, false), is(m.value, false), F::Lit(set_id, Test::NotWithin(allowed.clone()))];
                lemma.extend(items.into_iter().map(|id| F::Lit(id, inside.clone())));
                return Err(or(lemma));
            }
        }

        // Congruence: relation atoms over equal tuples agree.
        let mut assignment = Assignment::default();
        let tuple = |theory: &mut Self, atom: &RelationAtom<'_>| -> Option<Vec<String>> {
            atom.terms
                .iter()
                .map(|t| match t {
                    Term::Value(s) => Some(s.clone()),
                    Term::Attr(a) => {
                        let root = theory.index.get(a).copied().map(|i| theory.find(i))?;
                        match chosen.get(&root) {
                            Some(Value::String(s)) => Some(s.clone()),
                            _ => None,
                        }
                    }
                })
                .collect()
        };
        let mut groups: BTreeMap<(&str, Vec<String>), Vec<usize>> = BTreeMap::new();
        for (i, atom) in atoms.iter().enumerate() {
            if let Some(values) = tuple(self, atom) {
                groups.entry((atom.name, values)).or_default().push(i);
            }
        }
        for ((_, values), members) in &groups {
            if members.len() < 2 {
                continue;
            }
            let present = members.iter().find_map(|&i| atoms[i].present.1);
            let answer = members.iter().find_map(|&i| atoms[i].holds.1);
            let listed = present == Some(true);
            for &i in members {
                for &j in members {
                    let (x, y) = (&atoms[i], &atoms[j]);
                    let present_differs = matches!((x.present.1, y.present.1), (Some(p), Some(q)) if p != q);
                    let holds_differs = listed && matches!((x.holds.1, y.holds.1), (Some(p), Some(q)) if p != q);
                    if i < j && (present_differs || holds_differs) {
                        let mut lemma = Vec::new();
                        if !self.explain_tuple(x, y, values, &classes, &mut lemma) {
                            return Ok(Verdict::Unknown);
                        }
                        for atom in [x, y] {
                            for id in [atom.present.0, atom.holds.0].into_iter().flatten() {
                                self.denial(id, &mut lemma);
                            }
                        }
                        return Err(or(lemma));
                    }
                }
            }
            for &i in members {
                if let (Some(id), Some(p), None) = (atoms[i].present.0, present, atoms[i].present.1) {
                    assignment.overrides.push((id, Value::Bool(p)));
                }
                if let (Some(id), Some(h), None) = (atoms[i].holds.0, answer, atoms[i].holds.1) {
                    assignment.overrides.push((id, Value::Bool(h)));
                }
            }
        }

        for (&root, members) in &classes {
            let value = chosen[&root].clone();
            for &m in members {
                for id in self.value_vars(m) {
                    assignment.overrides.push((id, value.clone()));
                }
                if let Some(code) = currencies.get(&m) {
                    assignment.currencies.insert(self.terms[m].clone(), code.clone());
                }
                assignment.terms.insert(self.terms[m].clone(), (value.clone(), self.types[m].clone()));
            }
        }
        self.hint(&hints, &mut assignment);
        Ok(Verdict::Consistent(assignment))
    }

    /// `t in C` holding and `t in P` failing, both defined, where every instant C holds P holds too (over the
    /// instant's bounds when that was needed): a lemma. Where an instant in C and not in P is known, it is returned
    /// as a hint for the witness.
    fn calendar_lemmas(&self, calendars: &BTreeMap<String, CalendarDef>) -> Result<Vec<(Attr, i128)>, F> {
        // Without holidays to read, a calendar atom is defined when its instant is present and inside the zone
        // table's window (the encoding says the converse).
        for (id, var) in self.a.vars.iter() {
            let Var::Present(Attr::InCalendar(name, instant)) = var else { continue };
            let Some(def) = calendars.get(name) else { continue };
            let Some(at) = self.a.vars.find(&Var::Value((**instant).clone(), Type::Timestamp)) else { continue };
            let second = crate::value::NANOS_PER_SECOND;
            let (from, until) = (i128::from(def.table.from()) * second, i128::from(def.table.until()) * second);
            // An instant the model leaves free can be put inside the window.
            let outside = !self.a.assumed[at as usize].is_empty()
                && !matches!(self.a.value[at as usize], Some(Value::Timestamp(t)) if t >= from && t < until);
            // Defined: the instant is inside the window.
            if self.decided(id) == Some(true) && outside {
                let inside = and([
                    F::Lit(at, Test::Compare(CompareOp::Ge, Value::Timestamp(from))),
                    F::Lit(at, Test::Compare(CompareOp::Lt, Value::Timestamp(until))),
                ]);
                return Err(or([is(id, false), inside]));
            }
            if def.calendar.closed_on_holidays()
                || self.decided(id) != Some(false)
                || self.present(instant) != Some(true)
            {
                continue;
            }
            if !outside {
                let mut lemma = vec![
                    is(id, true),
                    F::Lit(at, Test::Compare(CompareOp::Lt, Value::Timestamp(from))),
                    F::Lit(at, Test::Compare(CompareOp::Ge, Value::Timestamp(until))),
                ];
                lemma.extend(self.present_var(instant).map(|p| is(p, false)));
                return Err(or(lemma));
            }
        }
        let mut decided: Vec<(&Attr, &String, bool, VarId, VarId)> = Vec::new();
        for (id, var) in self.a.vars.iter() {
            let Var::Value(attr @ Attr::InCalendar(name, instant), _) = var else { continue };
            let (Some(holds), Some(present)) = (self.decided(id), self.present_var(attr)) else { continue };
            if self.decided(present) == Some(true) {
                decided.push((instant, name, holds, present, id));
            }
        }
        let mut hints = Vec::new();
        for &(instant, child, _, child_present, child_holds) in decided.iter().filter(|d| d.2) {
            for &(_, parent, _, parent_present, parent_holds) in
                decided.iter().filter(|d| !d.2 && d.0 == instant && d.1 != child)
            {
                let (Some(c), Some(p)) = (calendars.get(child), calendars.get(parent)) else { continue };
                let at = self.a.vars.find(&Var::Value(instant.clone(), Type::Timestamp));
                let tests: Vec<&Test> = at.map(|id| self.a.assumed[id as usize].clone()).unwrap_or_default();
                let (lo, hi) = interval(&Type::Timestamp, &tests);
                let fits = |x: i128| tests.iter().all(|t| holds(&Value::Timestamp(x), t));
                match containment(c, p, lo, hi) {
                    Containment::Contained { needs_window } => {
                        let mut lemma = vec![
                            is(child_present, false),
                            is(child_holds, false),
                            is(parent_present, false),
                            is(parent_holds, true),
                        ];
                        if let (true, Some(id)) = (needs_window, at) {
                            self.denial(id, &mut lemma);
                        }
                        return Err(or(lemma));
                    }
                    Containment::Outside(x) if fits(x) => hints.push((instant.clone(), x)),
                    _ => {
                        let near = match at.and_then(|id| self.a.value[id as usize].clone()) {
                            Some(Value::Timestamp(t)) => t,
                            _ => crate::check::sat::domain_model(&Type::Timestamp, &tests, 0)
                                .and_then(|v| match v {
                                    Value::Timestamp(t) => Some(t),
                                    _ => None,
                                })
                                .unwrap_or(0),
                        };
                        if let Some(x) = outside_near(c, p, near).filter(|&x| fits(x)) {
                            hints.push((instant.clone(), x));
                        }
                    }
                }
            }
        }
        Ok(hints)
    }

    /// Instants known to separate two calendars, for the terms no class gave a value.
    fn hint(&self, hints: &[(Attr, i128)], assignment: &mut Assignment) {
        for (attr, x) in hints {
            if assignment.terms.contains_key(attr) {
                continue;
            }
            assignment.terms.insert(attr.clone(), (Value::Timestamp(*x), Type::Timestamp));
            if let Some(id) = self.a.vars.find(&Var::Value(attr.clone(), Type::Timestamp)) {
                assignment.overrides.push((id, Value::Timestamp(*x)));
            }
        }
    }

    /// The order edges the model decides, between the classes of their terms: `a < b` holding is `a < b`, failing
    /// it is `b <= a`; `a <= b` failing is `b < a`.
    fn arcs(&mut self) -> Vec<Arc> {
        let mut arcs = Vec::new();
        for e in 0..self.edges.len() {
            let Edge { left, right, op, equal, .. } = self.edges[e];
            let (from, to, strict) = match (op, equal) {
                (CompareOp::Lt, true) => (left, right, true),
                (CompareOp::Le, true) => (left, right, false),
                (CompareOp::Lt, false) => (right, left, false),
                (CompareOp::Le, false) => (right, left, true),
                _ => continue,
            };
            arcs.push(Arc { from: self.find(from), to: self.find(to), strict, edge: e });
        }
        arcs
    }

    /// An arc's edge, and the equalities that put its terms in their classes.
    fn explain_arc(&self, arc: &Arc, out: &mut Vec<F>) {
        let edge = &self.edges[arc.edge];
        out.push(is(edge.defined, false));
        out.push(is(edge.value, !edge.equal));
        self.explain_edges(self.root_of(edge.left), out);
        self.explain_edges(self.root_of(edge.right), out);
    }

    /// A cycle of order edges through a strict one is a lemma; a cycle of `<=` edges gives its classes one value,
    /// so they become one class (explained by the cycle's edges).
    fn order_cycles(&mut self) -> Result<(), F> {
        loop {
            let arcs = self.arcs();
            for arc in arcs.iter().filter(|arc| arc.strict) {
                if let Some(back) = path(&arcs, arc.to, arc.from) {
                    let mut lemma = Vec::new();
                    self.explain_arc(arc, &mut lemma);
                    for &i in &back {
                        self.explain_arc(&arcs[i], &mut lemma);
                    }
                    return Err(or(lemma));
                }
            }
            let cycle = arcs.iter().filter(|arc| arc.from != arc.to).find_map(|arc| {
                let back = path(&arcs, arc.to, arc.from)?;
                Some((*arc, back))
            });
            let Some((arc, back)) = cycle else { return Ok(()) };
            let (a, b) = (arc.from, arc.to);
            self.parent[b] = a;
            let moved = std::mem::take(&mut self.merged[b]);
            self.merged[a].extend(moved);
            self.merged[a].push(arc.edge);
            self.merged[a].extend(back.iter().map(|&i| arcs[i].edge));
        }
    }

    /// The classes in an order where every order edge goes forward (the graph has no cycle left).
    fn sequence(&self, roots: Vec<usize>, arcs: &[Arc]) -> Vec<usize> {
        let mut before: BTreeMap<usize, usize> = roots.iter().map(|&r| (r, 0)).collect();
        for arc in arcs.iter().filter(|arc| arc.from != arc.to) {
            *before.entry(arc.to).or_default() += 1;
        }
        let mut ready: Vec<usize> = roots.iter().copied().filter(|r| before[r] == 0).rev().collect();
        let mut out = Vec::with_capacity(roots.len());
        while let Some(next) = ready.pop() {
            out.push(next);
            for arc in arcs.iter().filter(|arc| arc.from == next && arc.to != next) {
                let count = before.entry(arc.to).or_default();
                *count -= 1;
                if *count == 0 {
                    ready.push(arc.to);
                }
            }
        }
        // Unreachable without a cycle; kept total all the same.
        out.extend(roots.into_iter().filter(|r| before[r] > 0));
        out
    }

    /// Each ordered class's bounds: its tests' (a relaxation: `!=` and gaps in `in` lists are ignored), the lower
    /// ones carried forward along the edges and the upper ones backward. Where a class's carried lower bound
    /// passes its own upper one, no values exist: a lemma made of the tests at the start of the chain, its edges
    /// and the class's tests.
    #[allow(clippy::type_complexity)]
    fn bounds(
        &self,
        sequence: &[usize],
        arcs: &[Arc],
        feasible: &BTreeMap<usize, (Vec<&'f Test>, Option<bool>)>,
    ) -> Result<BTreeMap<usize, (Option<i128>, Option<i128>)>, F> {
        let involved: BTreeSet<usize> = arcs.iter().flat_map(|arc| [arc.from, arc.to]).collect();
        let mut bounds: BTreeMap<usize, (Option<i128>, Option<i128>)> = BTreeMap::new();
        for &class in &involved {
            bounds.insert(class, interval(&self.types[class], &feasible[&class].0));
        }
        let mut raised_by: BTreeMap<usize, usize> = BTreeMap::new();
        for &class in sequence.iter().filter(|c| involved.contains(c)) {
            for (i, arc) in arcs.iter().enumerate().filter(|(_, arc)| arc.to == class && arc.from != class) {
                let Some(lo) = bounds[&arc.from].0 else { continue };
                let carried = lo + if arc.strict { step(&self.types[class]) } else { 0 };
                if bounds[&class].0.is_none_or(|own| carried > own) {
                    bounds.entry(class).or_default().0 = Some(carried);
                    raised_by.insert(class, i);
                }
            }
            if let (Some(lo), Some(hi)) = bounds[&class] {
                if lo > hi {
                    let mut lemma = Vec::new();
                    let mut at = class;
                    while let Some(&i) = raised_by.get(&at) {
                        self.explain_arc(&arcs[i], &mut lemma);
                        at = arcs[i].from;
                    }
                    for end in [class, at] {
                        let members: Vec<usize> = (0..self.terms.len()).filter(|&t| self.root_of(t) == end).collect();
                        self.explain_edges(end, &mut lemma);
                        self.explain_tests(&members, &mut lemma);
                    }
                    return Err(or(lemma));
                }
            }
        }
        for &class in sequence.iter().rev().filter(|c| involved.contains(c)) {
            for arc in arcs.iter().filter(|arc| arc.from == class && arc.to != class) {
                let Some(hi) = bounds[&arc.to].1 else { continue };
                let carried = hi - if arc.strict { step(&self.types[class]) } else { 0 };
                if bounds[&class].1.is_none_or(|own| carried < own) {
                    bounds.entry(class).or_default().1 = Some(carried);
                }
            }
        }
        Ok(bounds)
    }

    /// Money compared with money (equal, different or ordered) is in one currency: per group of terms so
    /// connected, a currency every member's tests pass, or a lemma.
    fn currency_groups(&mut self) -> Result<BTreeMap<usize, String>, F> {
        let mut group: Vec<usize> = (0..self.terms.len()).collect();
        fn top(group: &mut [usize], mut i: usize) -> usize {
            while group[i] != i {
                group[i] = group[group[i]];
                i = group[i];
            }
            i
        }
        let money: Vec<usize> =
            (0..self.edges.len()).filter(|&e| self.types[self.edges[e].left] == Type::Money).collect();
        for &e in &money {
            let (a, b) = (top(&mut group, self.edges[e].left), top(&mut group, self.edges[e].right));
            group[b] = a;
        }
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &e in &money {
            for t in [self.edges[e].left, self.edges[e].right] {
                let members = groups.entry(top(&mut group, t)).or_default();
                if !members.contains(&t) {
                    members.push(t);
                }
            }
        }
        for &(l, r, _) in &self.undefined_money {
            for t in [l, r] {
                let root = top(&mut group, t);
                let members = groups.entry(root).or_default();
                if !members.contains(&t) {
                    members.push(t);
                }
            }
        }
        // An undefined comparison inside a group: the group's edges, defined, put its operands in one currency, so
        // it is defined unless an operand is absent or below zero (a money argument that is not `signed`).
        for &(l, r, id) in &self.undefined_money {
            let root = top(&mut group, l);
            if root != top(&mut group, r) {
                continue;
            }
            let mut lemma: Vec<F> = money
                .iter()
                .filter(|&&e| top(&mut group, self.edges[e].left) == root)
                .map(|&e| is(self.edges[e].defined, false))
                .collect();
            lemma.push(is(id, true));
            for t in [l, r] {
                if let Some(p) = self.present_var(self.terms[t]) {
                    lemma.push(is(p, false));
                }
                for v in self.value_vars(t) {
                    lemma.push(F::Lit(v, Test::Compare(CompareOp::Lt, Value::Number(crate::value::Decimal(0)))));
                }
            }
            return Err(or(lemma));
        }
        let mut out: BTreeMap<usize, String> = BTreeMap::new();
        let mut codes: BTreeMap<usize, String> = BTreeMap::new();
        for (root, members) in groups {
            // Apart from the groups an undefined comparison separates from this one.
            let avoid: Vec<String> = self
                .undefined_money
                .iter()
                .filter_map(|&(l, r, _)| {
                    let (a, b) = (top(&mut group, l), top(&mut group, r));
                    let other = if a == root {
                        b
                    } else if b == root {
                        a
                    } else {
                        return None;
                    };
                    codes.get(&other).cloned()
                })
                .collect();
            match self.currency_avoiding(&members, &avoid).or_else(|| self.currency(&members)) {
                Some(code) => {
                    codes.insert(root, code.clone());
                    out.extend(members.iter().map(|&m| (m, code.clone())));
                }
                None => {
                    let mut lemma: Vec<F> = money
                        .iter()
                        .filter(|&&e| top(&mut group, self.edges[e].left) == root)
                        .map(|&e| is(self.edges[e].defined, false))
                        .collect();
                    self.explain_currencies(&members, &mut lemma);
                    return Err(or(lemma));
                }
            }
        }
        Ok(out)
    }

    /// A currency every member of a money class passes, as a valid code.
    fn currency(&self, members: &[usize]) -> Option<String> {
        self.currency_avoiding(members, &[])
    }

    /// A currency every member of a money class passes, other than the ones given, as a valid code.
    fn currency_avoiding(&self, members: &[usize], avoid: &[String]) -> Option<String> {
        let mut tests: Vec<&Test> = Vec::new();
        for &m in members {
            if let Some(id) = self.a.vars.find(&Var::Currency(self.terms[m].clone())) {
                tests.extend(self.a.assumed[id as usize].iter().copied());
            }
        }
        ["USD", "EUR", "GBP", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK"]
            .iter()
            .map(|c| Value::String(c.to_string()))
            .chain(crate::check::sat::domain_model(&Type::String, &tests, self.a.levels))
            .find(|code| tests.iter().all(|t| holds(code, t)) && !matches!(code, Value::String(c) if avoid.contains(c)))
            .and_then(|code| match code {
                Value::String(s) => Some(s),
                _ => None,
            })
    }

    /// The class of `root` can take no value but `value`.
    fn pinned(&self, root: usize, value: &Value) -> bool {
        let members: Vec<usize> = (0..self.terms.len()).filter(|&t| self.root_of(t) == root).collect();
        let Some((mut tests, path)) = self.tests(&members) else { return false };
        let domain = self.domain(root);
        let fits = |tests: &[&Test]| path_model(&domain, tests, path, self.a.levels);
        if fits(&tests).is_none_or(|v| &v != value) {
            return false;
        }
        let not = Test::Compare(CompareOp::Ne, value.clone());
        tests.push(&not);
        fits(&tests).is_none()
    }

    fn root_of(&self, mut i: usize) -> usize {
        while self.parent[i] != i {
            i = self.parent[i];
        }
        i
    }

    /// Why two relation atoms have the same tuple: per position, the same constant or attribute, a class's
    /// equalities, or a class whose tests allow only that constant. `false` when a position coincides by choice.
    fn explain_tuple(
        &self,
        x: &RelationAtom<'_>,
        y: &RelationAtom<'_>,
        values: &[String],
        classes: &BTreeMap<usize, Vec<usize>>,
        out: &mut Vec<F>,
    ) -> bool {
        for ((s, t), value) in x.terms.iter().zip(y.terms).zip(values) {
            match (s, t) {
                (Term::Value(_), Term::Value(_)) => {}
                (Term::Attr(a), Term::Attr(b)) if a == b => {}
                (Term::Attr(a), Term::Attr(b)) if self.root_of(self.index[a]) == self.root_of(self.index[b]) => {
                    self.explain_edges(self.root_of(self.index[a]), out);
                }
                (s, t) => {
                    for term in [s, t] {
                        let Term::Attr(attr) = term else { continue };
                        let root = self.root_of(self.index[attr]);
                        if !self.pinned(root, &Value::String(value.clone())) {
                            return false;
                        }
                        self.explain_edges(root, out);
                        self.explain_tests(&classes[&root], out);
                    }
                }
            }
        }
        true
    }
}

/// A path of order edges from class `from` to class `to` (breadth first), as indices into `arcs`.
fn path(arcs: &[Arc], from: usize, to: usize) -> Option<Vec<usize>> {
    let mut came: BTreeMap<usize, Option<usize>> = BTreeMap::from([(from, None)]);
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            let mut out = Vec::new();
            let mut at = to;
            while let Some(&Some(i)) = came.get(&at) {
                out.push(i);
                at = arcs[i].from;
            }
            out.reverse();
            return Some(out);
        }
        for (i, arc) in arcs.iter().enumerate() {
            if arc.from == node && !came.contains_key(&arc.to) {
                came.insert(arc.to, Some(i));
                queue.push_back(arc.to);
            }
        }
    }
    None
}

/// The smallest difference between two values of an ordered type, in [`ordinal`] units (ints are scaled decimals).
fn step(ty: &Type) -> i128 {
    if *ty == Type::Int {
        10i128.pow(crate::value::DECIMAL_SCALE)
    } else {
        1
    }
}

/// An ordered value as an integer in its smallest unit (money: its amount).
fn ordinal(value: &Value) -> Option<i128> {
    match value {
        Value::Number(d) => Some(d.0),
        Value::Money(m) => Some(m.amount.0),
        Value::Timestamp(t) => Some(*t),
        Value::Duration(d) => Some(i128::from(*d)),
        _ => None,
    }
}

/// The value of a term's domain at an ordinal.
fn ordinal_value(domain: &Type, x: i128) -> Value {
    match domain {
        Type::Timestamp => Value::Timestamp(x),
        Type::Duration => Value::Duration(x.clamp(0, i128::from(i64::MAX)) as i64),
        _ => Value::Number(crate::value::Decimal(x)),
    }
}

/// The bounds a class's tests set, on the type's grid (an empty range has its lower bound above its upper one).
/// A relaxation: `!=`, `not in` and the gaps of an `in` list are not bounds.
fn interval(ty: &Type, tests: &[&Test]) -> (Option<i128>, Option<i128>) {
    let step = step(ty);
    let mut lo: Option<i128> = (*ty == Type::Duration).then_some(0);
    let mut hi: Option<i128> = None;
    let raise = |lo: &mut Option<i128>, x: i128| *lo = Some(lo.map_or(x, |l| l.max(x)));
    let lower = |hi: &mut Option<i128>, x: i128| *hi = Some(hi.map_or(x, |h| h.min(x)));
    for test in tests {
        match test {
            Test::Compare(op, v) => {
                let Some(x) = ordinal(v) else { continue };
                let floor = x.div_euclid(step) * step;
                let ceil = if x.rem_euclid(step) == 0 { x } else { floor + step };
                match op {
                    CompareOp::Eq => {
                        raise(&mut lo, ceil);
                        lower(&mut hi, floor);
                    }
                    CompareOp::Lt => lower(&mut hi, ceil - step),
                    CompareOp::Le => lower(&mut hi, floor),
                    CompareOp::Gt => raise(&mut lo, floor + step),
                    CompareOp::Ge => raise(&mut lo, ceil),
                    CompareOp::Ne => {}
                }
            }
            Test::In(items) if !items.is_empty() => {
                let ords: Vec<i128> = items.iter().filter_map(ordinal).collect();
                if ords.len() == items.len() {
                    raise(&mut lo, ords.iter().copied().min().unwrap_or(0));
                    lower(&mut hi, ords.iter().copied().max().unwrap_or(0));
                }
            }
            _ => {}
        }
    }
    (lo, hi)
}
