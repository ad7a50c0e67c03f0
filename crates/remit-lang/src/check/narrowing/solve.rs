//! Satisfiability of a conjunction of formulas, with a model. Variables only constrain each other through the
//! formulas' structure (the theory is per variable: `sat::domain_model`), which the search exploits:
//! - literals are assumed as soon as they are reached, and each variable keeps a value that satisfies all of its
//!   literals, so most new literals are checked by one comparison;
//! - alternatives that contradict what is assumed are dropped before branching, and a disjunction left with one
//!   alternative is assumed outright;
//! - disjunctions that share no variable are solved independently, so unrelated clauses never multiply the search.
//!
//! The fragment is decidable and the search is complete; the step budget only bounds pathological inputs, which
//! are reported as undecided rather than guessed.
//!
//! Comparisons of two attributes, memberships, relation and calendar atoms are bools of their own to the search; a
//! model it finds is then held to the laws of equality, order, congruence and calendars (`theory`), which either
//! assigns the terms' values or returns a lemma the model violates. The lemma joins the goals (for every later
//! question of the comparison too: it is true of every request) and the search runs again.

use std::cell::OnceCell;

use super::formula::{Mask, Model, VarId, Vars, F};
use super::theory::{self, Assignment, Assumptions, Verdict};
use crate::check::sat::{domain_model, holds, path_model, testable_path};
use crate::ir::{Test, Value};

/// Search steps before giving up on one question.
const STEP_BUDGET: usize = 200_000;

/// Lemmas learned for one question before giving up on it.
const LEMMA_BUDGET: usize = 256;

/// The lemmas a solver learns, kept where the solver can refer to them as it refers to its goals: an append-only
/// list whose items never move (the solver holds references to the literals it assumed).
#[derive(Debug, Default)]
pub struct Lemmas {
    head: OnceCell<Box<Lemma>>,
}

#[derive(Debug)]
struct Lemma {
    formula: F,
    next: OnceCell<Box<Lemma>>,
}

impl Lemmas {
    fn push(&self, formula: F) -> &F {
        let mut cell = &self.head;
        while let Some(lemma) = cell.get() {
            cell = &lemma.next;
        }
        &cell.get_or_init(|| Box::new(Lemma { formula, next: OnceCell::new() })).formula
    }
}

#[derive(Debug)]
pub enum Answer {
    Sat(Model),
    Unsat,
    /// The step budget ran out.
    Unknown,
}

#[derive(Debug)]
struct Exhausted;

pub struct Solver<'f> {
    vars: &'f Vars,
    levels: usize,
    /// The calendars the atoms name, for the theory's containment lemmas (none across two versions).
    calendars: Option<&'f std::collections::BTreeMap<String, crate::ir::CalendarDef>>,
    /// Whether the theory of equality has anything to check (a comparison of two attributes, a relation atom).
    theory: bool,
    lemmas: &'f Lemmas,
    learned: Vec<&'f F>,
    /// The literals assumed on each variable.
    assumed: Vec<Vec<&'f Test>>,
    /// The path literal assumed on each variable, if any (one value at most: its opposite contradicts it).
    path: Vec<Option<bool>>,
    /// A value satisfying every literal assumed on the variable. It stays valid when literals are undone, so it
    /// is kept: the next literal is usually checked against it alone.
    value: Vec<Option<Value>>,
    trail: Vec<Undo>,
    steps: usize,
}

/// What [`Solver::undo`] takes back: a variable's last literal, or its path literal.
#[derive(Debug, Clone, Copy)]
enum Undo {
    Test(VarId),
    Path(VarId),
}

impl<'f> Solver<'f> {
    pub fn new(vars: &'f Vars, levels: usize, lemmas: &'f Lemmas) -> Solver<'f> {
        Solver {
            vars,
            levels,
            calendars: None,
            theory: theory::relevant(vars),
            lemmas,
            learned: Vec::new(),
            assumed: vec![Vec::new(); vars.len()],
            path: vec![None; vars.len()],
            value: vec![None; vars.len()],
            trail: Vec::new(),
            steps: 0,
        }
    }

    /// Lets the theory compare the program's calendars (a child's contained in a parent's).
    pub fn with_calendars(mut self, calendars: &'f std::collections::BTreeMap<String, crate::ir::CalendarDef>) -> Self {
        self.calendars = Some(calendars);
        self
    }

    /// Whether every goal can hold at once, with a value for every variable when they can.
    pub fn solve(&mut self, goals: &[&'f F]) -> Answer {
        self.steps = 0;
        let mut rounds = 0;
        let answer = loop {
            let mut all = goals.to_vec();
            all.extend(self.learned.iter().copied());
            match self.search(all) {
                Ok(true) => {}
                Ok(false) => break Answer::Unsat,
                Err(Exhausted) => break Answer::Unknown,
            }
            if !self.theory {
                break Answer::Sat(self.model(Assignment::default()));
            }
            let assumptions = Assumptions {
                vars: self.vars,
                assumed: &self.assumed,
                path: &self.path,
                value: &self.value,
                levels: self.levels,
                calendars: self.calendars,
            };
            match theory::check(&assumptions) {
                Verdict::Consistent(assignment) => break Answer::Sat(self.model(assignment)),
                Verdict::Unknown => break Answer::Unknown,
                Verdict::Conflict(lemma) => {
                    self.undo(0);
                    rounds += 1;
                    // A lemma learned before cannot be violated again: seeing one twice is a bug, not progress.
                    if rounds > LEMMA_BUDGET || self.learned.iter().any(|l| **l == lemma) {
                        break Answer::Unknown;
                    }
                    let lemma = self.lemmas.push(lemma);
                    self.learned.push(lemma);
                }
            }
        };
        self.undo(0);
        answer
    }

    fn model(&self, assignment: Assignment) -> Model {
        let mut values: Vec<Value> = (0..self.vars.len())
            .map(|v| match &self.value[v] {
                Some(value) if !self.assumed[v].is_empty() || self.path[v].is_some() => value.clone(),
                // Unconstrained: any value of the domain.
                _ => domain_model(self.vars.domain(v as VarId), &[], self.levels).unwrap_or(Value::Bool(false)),
            })
            .collect();
        for (id, value) in assignment.overrides {
            values[id as usize] = value;
        }
        Model { values, terms: assignment.terms, currencies: assignment.currencies }
    }

    fn undo(&mut self, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Undo::Test(v)) => _ = self.assumed[v as usize].pop(),
                Some(Undo::Path(v)) => self.path[v as usize] = None,
                None => {}
            }
        }
    }

    /// Assumes a literal; `false` (and nothing assumed) when it contradicts the variable's literals.
    fn assume(&mut self, var: VarId, test: &'f Test) -> bool {
        let v = var as usize;
        if !self.value[v].as_ref().is_some_and(|value| holds(value, test)) {
            let mut tests = self.assumed[v].clone();
            tests.push(test);
            match path_model(self.vars.domain(var), &tests, self.path[v], self.levels) {
                Some(value) => self.value[v] = Some(value),
                None => return false,
            }
        }
        self.assumed[v].push(test);
        self.trail.push(Undo::Test(var));
        true
    }

    /// Assumes a path literal; `false` (and nothing assumed) when it contradicts the variable's literals.
    fn assume_path(&mut self, var: VarId, safe: bool) -> bool {
        let v = var as usize;
        if let Some(assumed) = self.path[v] {
            return assumed == safe;
        }
        if !self.path_consistent(var, safe) {
            return false;
        }
        self.path[v] = Some(safe);
        self.trail.push(Undo::Path(var));
        true
    }

    /// Whether a path literal fits the variable's literals; when it does, the variable's value passes it too.
    fn path_consistent(&mut self, var: VarId, safe: bool) -> bool {
        let v = var as usize;
        match self.path[v] {
            Some(assumed) => return assumed == safe,
            None if matches!(&self.value[v], Some(Value::String(s)) if testable_path(s) == safe) => return true,
            None => {}
        }
        match path_model(self.vars.domain(var), &self.assumed[v], Some(safe), self.levels) {
            Some(value) => {
                self.value[v] = Some(value);
                true
            }
            None => false,
        }
    }

    /// Whether a literal is consistent with what is assumed (nothing is assumed).
    fn consistent(&mut self, var: VarId, test: &'f Test) -> bool {
        let v = var as usize;
        if self.value[v].as_ref().is_some_and(|value| holds(value, test)) {
            return true;
        }
        let mut tests = self.assumed[v].clone();
        tests.push(test);
        path_model(self.vars.domain(var), &tests, self.path[v], self.levels).is_some()
    }

    /// A cheap necessary condition for an alternative to hold: its own literals fit what is assumed.
    fn possible(&mut self, f: &'f F) -> bool {
        match f {
            F::True | F::Or(..) => true,
            F::False => false,
            F::Lit(v, t) => self.consistent(*v, t),
            F::Path(v, safe) => self.path_consistent(*v, *safe),
            F::And(items, _) => items.iter().all(|i| match i {
                F::Lit(v, t) => self.consistent(*v, t),
                F::Path(v, safe) => self.path_consistent(*v, *safe),
                F::False => false,
                _ => true,
            }),
        }
    }

    fn tick(&mut self) -> Result<(), Exhausted> {
        self.steps += 1;
        if self.steps > STEP_BUDGET {
            Err(Exhausted)
        } else {
            Ok(())
        }
    }

    /// Assumes every goal; on failure nothing stays assumed.
    fn search(&mut self, goals: Vec<&'f F>) -> Result<bool, Exhausted> {
        let mark = self.trail.len();
        let result = self.search_here(goals);
        if !matches!(result, Ok(true)) {
            self.undo(mark);
        }
        result
    }

    fn search_here(&mut self, goals: Vec<&'f F>) -> Result<bool, Exhausted> {
        self.tick()?;
        let mut stack = goals;
        let mut ors: Vec<&'f F> = Vec::new();
        loop {
            while let Some(f) = stack.pop() {
                match f {
                    F::True => {}
                    F::False => return Ok(false),
                    F::Lit(v, t) => {
                        if !self.assume(*v, t) {
                            return Ok(false);
                        }
                    }
                    F::Path(v, safe) => {
                        if !self.assume_path(*v, *safe) {
                            return Ok(false);
                        }
                    }
                    F::And(items, _) => stack.extend(items.iter()),
                    F::Or(..) => ors.push(f),
                }
            }
            // Propagation: a disjunction with no viable alternative fails, one with a single one is assumed.
            let mut progressed = false;
            let mut i = 0;
            while i < ors.len() {
                let F::Or(items, _) = ors[i] else {
                    i += 1;
                    continue;
                };
                let mut viable = None;
                let mut count = 0;
                for item in items {
                    if self.possible(item) {
                        count += 1;
                        viable = Some(item);
                        if count > 1 {
                            break;
                        }
                    }
                }
                match (count, viable) {
                    (0, _) => return Ok(false),
                    (1, Some(only)) => {
                        stack.push(only);
                        ors.swap_remove(i);
                        progressed = true;
                    }
                    _ => i += 1,
                }
            }
            if !progressed {
                break;
            }
        }
        for group in components(ors) {
            if !self.branch(group)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Satisfies a group of disjunctions by trying the alternatives of the most constrained one.
    fn branch(&mut self, mut ors: Vec<&'f F>) -> Result<bool, Exhausted> {
        let mut best: Option<(usize, Vec<&'f F>)> = None;
        for (index, f) in ors.iter().enumerate() {
            let F::Or(items, _) = f else { continue };
            let viable: Vec<&'f F> = items.iter().filter(|i| self.possible(i)).collect();
            if best.as_ref().is_none_or(|(_, b)| viable.len() < b.len()) {
                best = Some((index, viable));
            }
        }
        let Some((index, alternatives)) = best else { return Ok(true) };
        ors.swap_remove(index);
        for alternative in alternatives {
            let mut goals = ors.clone();
            goals.push(alternative);
            if self.search(goals)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Groups of disjunctions that share variables (transitively).
fn components(ors: Vec<&F>) -> Vec<Vec<&F>> {
    let mut groups: Vec<(Mask, Vec<&F>)> = Vec::new();
    for f in ors {
        let mut mask = f.mask();
        let mut members = vec![f];
        let mut i = 0;
        while i < groups.len() {
            if groups[i].0 & mask != 0 {
                let (m, fs) = groups.swap_remove(i);
                mask |= m;
                members.extend(fs);
                i = 0;
            } else {
                i += 1;
            }
        }
        groups.push((mask, members));
    }
    groups.into_iter().map(|(_, fs)| fs).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::narrowing::formula::{and, is, lit, negate, or, Var};
    use crate::ir::{Attr, Type};
    use crate::syntax::ast::CompareOp;
    use crate::value::Decimal;

    fn amount(vars: &mut Vars) -> VarId {
        vars.id(Var::Value(Attr::Arg("amount".into()), Type::Int))
    }

    fn at_most(var: VarId, n: i64) -> F {
        lit(var, Test::Compare(CompareOp::Le, Value::Number(Decimal::from_int(n))))
    }

    #[test]
    fn implication_between_ranges_with_a_model() {
        let mut vars = Vars::default();
        let a = amount(&mut vars);
        let (small, large) = (at_most(a, 50), at_most(a, 100));
        // small ∧ ¬large is unsatisfiable; large ∧ ¬small has a model, at the bound.
        let refused = negate(&large);
        assert!(matches!(Solver::new(&vars, 5, &Lemmas::default()).solve(&[&small, &refused]), Answer::Unsat));
        let refused = negate(&small);
        match Solver::new(&vars, 5, &Lemmas::default()).solve(&[&large, &refused]) {
            Answer::Sat(model) => assert_eq!(model[a as usize], Value::Number(Decimal::from_int(51))),
            other => panic!("expected a model, got {other:?}"),
        }
    }

    /// `a == b`, `b == c`, `a == "x"` and `c != "x"`: unrelated bools and literals to the search, a contradiction
    /// to the theory of equality; without `c != "x"`, a model whose three terms share the value "x".
    #[test]
    fn equality_is_transitive_and_substitutes() {
        let mut vars = Vars::default();
        let attr = |n: &str| Attr::Arg(n.into());
        let equal = |vars: &mut Vars, l: &str, r: &str| {
            let compare = Attr::Compare(Box::new(attr(l)), CompareOp::Eq, Box::new(attr(r)), Type::String);
            let defined = vars.id(Var::Present(compare.clone()));
            let value = vars.id(Var::Value(compare, Type::Bool));
            and([is(defined, true), is(value, true)])
        };
        let mut goals = vec![equal(&mut vars, "a", "b"), equal(&mut vars, "b", "c")];
        for name in ["a", "b", "c"] {
            goals.push(is(vars.id(Var::Present(attr(name))), true));
        }
        let a = vars.id(Var::Value(attr("a"), Type::String));
        let c = vars.id(Var::Value(attr("c"), Type::String));
        goals.push(lit(a, Test::Compare(CompareOp::Eq, Value::String("x".into()))));
        let differs = lit(c, Test::Compare(CompareOp::Ne, Value::String("x".into())));
        let lemmas = Lemmas::default();
        let with: Vec<&F> = goals.iter().chain([&differs]).collect();
        assert!(matches!(Solver::new(&vars, 5, &lemmas).solve(&with), Answer::Unsat));
        let without: Vec<&F> = goals.iter().collect();
        match Solver::new(&vars, 5, &Lemmas::default()).solve(&without) {
            Answer::Sat(model) => {
                for name in ["a", "b", "c"] {
                    assert_eq!(model.terms.get(&attr(name)).map(|t| &t.0), Some(&Value::String("x".into())));
                }
            }
            other => panic!("expected a model, got {other:?}"),
        }
    }

    /// `a < b`, `b <= c`, `a >= 5` and `c <= 5` (ints): unrelated bools to the search, a contradiction to the order
    /// of the theory; with `c <= 6`, a model whose values are in that order; `a < b` with `b < a`, a cycle.
    #[test]
    fn order_is_transitive_with_bounds_and_cycles() {
        let attr = |n: &str| Attr::Arg(n.into());
        let compare = |vars: &mut Vars, l: &str, op: CompareOp, r: &str| {
            let compare = Attr::Compare(Box::new(attr(l)), op, Box::new(attr(r)), Type::Int);
            let defined = vars.id(Var::Present(compare.clone()));
            let value = vars.id(Var::Value(compare, Type::Bool));
            and([is(defined, true), is(value, true)])
        };
        let int = |n: i64| Value::Number(Decimal::from_int(n));
        let mut vars = Vars::default();
        let mut goals = vec![compare(&mut vars, "a", CompareOp::Lt, "b"), compare(&mut vars, "b", CompareOp::Le, "c")];
        for name in ["a", "b", "c"] {
            goals.push(is(vars.id(Var::Present(attr(name))), true));
        }
        let (a, c) = (vars.id(Var::Value(attr("a"), Type::Int)), vars.id(Var::Value(attr("c"), Type::Int)));
        goals.push(lit(a, Test::Compare(CompareOp::Ge, int(5))));
        let low = lit(c, Test::Compare(CompareOp::Le, int(5)));
        let with: Vec<&F> = goals.iter().chain([&low]).collect();
        assert!(matches!(Solver::new(&vars, 5, &Lemmas::default()).solve(&with), Answer::Unsat));
        let high = lit(c, Test::Compare(CompareOp::Le, int(6)));
        let with: Vec<&F> = goals.iter().chain([&high]).collect();
        match Solver::new(&vars, 5, &Lemmas::default()).solve(&with) {
            Answer::Sat(model) => {
                let value = |n: &str| model.terms.get(&attr(n)).map(|t| t.0.clone());
                assert_eq!([value("a"), value("b"), value("c")], [Some(int(5)), Some(int(6)), Some(int(6))]);
            }
            other => panic!("expected a model, got {other:?}"),
        }
        let back = compare(&mut vars, "b", CompareOp::Lt, "a");
        let with: Vec<&F> = goals.iter().chain([&back]).collect();
        assert!(matches!(Solver::new(&vars, 5, &Lemmas::default()).solve(&with), Answer::Unsat));
    }

    #[test]
    fn unrelated_disjunctions_are_solved_apart() {
        // Thirty independent two-way choices and one contradiction: without splitting into components the
        // search would revisit 2^30 combinations before failing.
        let mut vars = Vars::default();
        let mut goals = Vec::new();
        for i in 0..30 {
            let x = vars.id(Var::Present(Attr::Arg(format!("x{i}"))));
            let y = vars.id(Var::Present(Attr::Arg(format!("y{i}"))));
            goals.push(or([is(x, true), is(y, true)]));
        }
        let a = amount(&mut vars);
        goals.push(or([and([at_most(a, 1), negate(&at_most(a, 5))]), and([at_most(a, 2), negate(&at_most(a, 3))])]));
        let refs: Vec<&F> = goals.iter().collect();
        assert!(matches!(Solver::new(&vars, 5, &Lemmas::default()).solve(&refs), Answer::Unsat));
    }
}
