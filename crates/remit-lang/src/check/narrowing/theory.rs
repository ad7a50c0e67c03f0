//! The theory of equality over terms, for the solver (`solve`). The search treats a comparison of two attributes
//! (`resource.owner == args.payee`) and a relation atom (`owns(subject, resource)`) as bools of their own; once it
//! has a model, this module holds the model to the laws those bools obey in every request:
//! - **equality**: the terms the model says are equal form classes (union-find); all the literal tests on the
//!   members of a class (`args.payee == "user:alice"`, the principal being a literal) must have one value in
//!   common, and no two members may be said to differ (this is transitivity and substitution);
//! - **congruence**: relation atoms of one relation over equal terms (the same class, or the same constant) must
//!   agree, on being answered and on the answer;
//! - a comparison or relation atom is defined only when the attributes it reads are present, and an equality of
//!   two present attributes (not money: it also needs one currency) is defined.
//!
//! A model that obeys them gets values: one per class, distinct classes apart, so that the witness written from it
//! makes the interpreter compute every atom as the model has it. A model that breaks one yields a **lemma**: a
//! disjunction of literals, true in every request (it is guarded by the presence of what it reads), that the model
//! violates. The solver adds it to its goals and searches again (lazy theory reasoning, as SMT solvers do), so
//! what is decided stays sound and the loop ends (each lemma excludes the assumptions that broke it).
//!
//! What stays opaque: order comparisons (`a < b`), memberships, calendars and durations. When no value assignment
//! is found and the failure is not a proven conflict (many terms pairwise apart in a small finite domain, a
//! relation tuple that coincides by choice), the answer is [`Verdict::Unknown`]: the check does not guess.
//!
//! Depends on `formula` and `sat` only; never on the interpreter.

use std::collections::{BTreeMap, BTreeSet};

use super::authority::optional;
use super::formula::{is, or, Var, VarId, Vars, F};
use crate::check::sat::{holds, path_model};
use crate::ir::{Attr, Term, Test, Type, Value};
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
        Var::Value(Attr::Compare(_, CompareOp::Eq, _, ty), _) => !matches!(ty, Type::Set(_)),
        Var::Value(Attr::Relation(..), _) | Var::Present(Attr::Relation(..)) => true,
        _ => false,
    })
}

/// `left == right`, decided by the model, defined (both present).
struct Edge {
    left: usize,
    right: usize,
    equal: bool,
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
    };
    match theory.run() {
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
            let Var::Present(Attr::Compare(left, CompareOp::Eq, right, ty)) = var else { continue };
            if matches!(ty, Type::Money | Type::Set(_)) || self.decided(id) != Some(false) {
                continue;
            }
            if self.present(left) == Some(true) && self.present(right) == Some(true) {
                let mut lemma = vec![is(id, true)];
                lemma.extend([left, right].into_iter().filter_map(|a| self.present_var(a)).map(|p| is(p, false)));
                return Err(or(lemma));
            }
        }
        // Equalities between attributes the model decides, and their operands.
        for (id, var) in vars.iter() {
            let Var::Value(attr @ Attr::Compare(left, CompareOp::Eq, right, ty), _) = var else { continue };
            if matches!(ty, Type::Set(_)) {
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
            self.edges.push(Edge { left: l, right: r, equal, value: id, defined });
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
        if self.edges.is_empty() && atoms.len() < 2 {
            return Ok(Verdict::Consistent(Assignment::default()));
        }

        // Classes.
        for e in 0..self.edges.len() {
            if !self.edges[e].equal {
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
            if self.edges[e].equal {
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

        // Values: one per class, apart from the classes it must differ from, and preferably from every other
        // class and every constant a relation names (so that no equality or tuple coincides by accident).
        let constants: Vec<Value> = atoms
            .iter()
            .flat_map(|atom| atom.terms.iter())
            .filter_map(|t| match t {
                Term::Value(s) => Some(Value::String(s.clone())),
                Term::Attr(_) => None,
            })
            .collect();
        let mut chosen: BTreeMap<usize, Value> = BTreeMap::new();
        for &root in classes.keys() {
            let domain = self.domain(root);
            let (tests, path) = &feasible[&root];
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
            let currency = (self.types[root] == Type::Money && members.len() > 1).then(|| self.currency(members));
            for &m in members {
                for id in self.value_vars(m) {
                    assignment.overrides.push((id, value.clone()));
                }
                if let Some(Some(code)) = &currency {
                    assignment.currencies.insert(self.terms[m].clone(), code.clone());
                }
                assignment.terms.insert(self.terms[m].clone(), (value.clone(), self.types[m].clone()));
            }
        }
        Ok(Verdict::Consistent(assignment))
    }

    /// A currency every member of a money class passes, as a valid code.
    fn currency(&self, members: &[usize]) -> Option<String> {
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
            .find(|code| tests.iter().all(|t| holds(code, t)))
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
