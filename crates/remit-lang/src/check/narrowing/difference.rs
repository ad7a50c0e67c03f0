//! Difference constraints between timestamps, for the theory (`theory`): the time between two instants
//! (`until - granted <= 30d`, an `Attr::Elapsed` atom) read with the order of timestamps and their literal bounds.
//!
//! Each fact the model has on timestamps is a constraint `x - y <= c` (in nanoseconds, the interpreter's unit) over
//! terms and a zero node standing for the epoch:
//! - `later - earlier OP d` decided true or false (`Attr::Elapsed`): `<=`, `<`, `>=`, `>`, `==` as one or two
//!   constraints (`!=` is none: it is checked on the values only);
//! - a comparison of two timestamp attributes decided (`a < b`: `a - b <= -1`; `a == b`: two; `a != b`: none);
//! - a literal bound on a term's value (`until <= 2030-01-01T00:00:00Z`: `until - 0 <= …`).
//!
//! A set of such constraints is contradictory exactly when the graph with an edge `y → x` of weight `c` per
//! constraint has a negative cycle (Bellman-Ford). The cycle's constraints cannot hold together in any request: the
//! lemma is the disjunction of their negations, each guarded by what defines it. Otherwise the shortest distances
//! give every term a value that satisfies every constraint; they start from the values the model has, and whole
//! seconds are preferred (a window's bound must be one, `parametric::instance`), so the witness written from
//! them makes the interpreter compute every duration as the model has it.
//!
//! Only a model that decides a duration is looked at: the order of timestamps alone is the theory's.

use std::collections::BTreeMap;

use super::authority::optional;
use super::formula::{is, or, Var, VarId, Vars, F};
use crate::check::sat::holds;
use crate::ir::{Attr, Test, Type, Value};
use crate::syntax::ast::CompareOp;
use crate::value::NANOS_PER_SECOND;

/// What the solver assumed (the theory's `Assumptions`, less what this module does not read).
pub struct Model<'a, 'f> {
    pub vars: &'a Vars,
    pub assumed: &'a [Vec<&'f Test>],
    pub value: &'a [Option<Value>],
}

/// The values the theory chose so far: the terms' (by attribute) and the variables it overrides.
pub struct Chosen<'a> {
    pub terms: &'a BTreeMap<Attr, (Value, Type)>,
    pub overrides: &'a [(VarId, Value)],
}

/// What the difference constraints say of a model.
pub enum Outcome {
    /// Every constraint holds with these values: each instant's, with the variables that stand for it (none when no
    /// duration is decided).
    Consistent(Vec<(Attr, i128, Vec<VarId>)>),
    /// The constraints hold together, but no values were found that also pass the other tests (`!=`).
    Unknown,
}

/// `x - y <= c` (nodes; 0 is the epoch), and the literals that deny it.
struct Constraint {
    x: usize,
    y: usize,
    c: i128,
    why: Vec<F>,
}

/// A test the values must pass that is no constraint: `left - right OP d` with `!=`, or `left != right`.
struct Apart {
    left: usize,
    right: usize,
    /// The difference `left - right` the values must avoid.
    gap: i128,
}

struct Graph<'a> {
    nodes: Vec<Option<&'a Attr>>,
    index: BTreeMap<&'a Attr, usize>,
    constraints: Vec<Constraint>,
    apart: Vec<Apart>,
}

impl<'a> Graph<'a> {
    fn node(&mut self, attr: &'a Attr) -> usize {
        if let Some(&i) = self.index.get(attr) {
            return i;
        }
        self.nodes.push(Some(attr));
        self.index.insert(attr, self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    /// `left - right OP c` as constraints (`!=` as a test on the values).
    fn relate(&mut self, left: usize, right: usize, op: CompareOp, c: i128, why: &[F]) {
        let mut push = |x, y, c| self.constraints.push(Constraint { x, y, c, why: why.to_vec() });
        match op {
            CompareOp::Le => push(left, right, c),
            CompareOp::Lt => push(left, right, c - 1),
            CompareOp::Ge => push(right, left, -c),
            CompareOp::Gt => push(right, left, -c - 1),
            CompareOp::Eq => {
                push(left, right, c);
                push(right, left, -c);
            }
            CompareOp::Ne => self.apart.push(Apart { left, right, gap: c }),
        }
    }
}

fn decided(a: &Model<'_, '_>, id: VarId) -> Option<bool> {
    let v = id as usize;
    (!a.assumed[v].is_empty()).then(|| matches!(a.value[v], Some(Value::Bool(true))))
}

fn present(a: &Model<'_, '_>, attr: &Attr) -> bool {
    !optional(attr) || a.vars.find(&Var::Present(attr.clone())).and_then(|id| decided(a, id)) == Some(true)
}

/// Checks the durations the model decides with the order and bounds of the timestamps they read: a lemma when they
/// contradict each other, else the timestamps' values that satisfy all of them.
pub fn check(a: &Model<'_, '_>, assignment: &Chosen<'_>) -> Result<Outcome, F> {
    let mut g = Graph { nodes: vec![None], index: BTreeMap::new(), constraints: Vec::new(), apart: Vec::new() };
    // Durations decided, and defined (both instants present).
    for (id, var) in a.vars.iter() {
        let Var::Value(attr @ Attr::Elapsed(later, earlier, op, seconds), _) = var else { continue };
        let Some(holds) = decided(a, id) else { continue };
        let Some(defined) = a.vars.find(&Var::Present(attr.clone())) else { continue };
        if decided(a, defined) != Some(true) || !present(a, later) || !present(a, earlier) {
            continue;
        }
        let op = if holds { *op } else { op.negated() };
        let (l, e) = (g.node(later), g.node(earlier));
        let why = [is(defined, false), is(id, !holds)];
        g.relate(l, e, op, i128::from(*seconds) * NANOS_PER_SECOND, &why);
    }
    if g.constraints.is_empty() && g.apart.is_empty() {
        return Ok(Outcome::Consistent(Vec::new()));
    }
    // Comparisons of two timestamps decided, and defined.
    for (id, var) in a.vars.iter() {
        let Var::Value(attr @ Attr::Compare(left, op, right, Type::Timestamp), _) = var else { continue };
        let Some(holds) = decided(a, id) else { continue };
        let Some(defined) = a.vars.find(&Var::Present(attr.clone())) else { continue };
        if decided(a, defined) != Some(true) || !present(a, left) || !present(a, right) {
            continue;
        }
        let op = if holds { *op } else { op.negated() };
        let (l, r) = (g.node(left), g.node(right));
        g.relate(l, r, op, 0, &[is(defined, false), is(id, !holds)]);
    }
    // Literal bounds on the terms' values.
    let value_vars: Vec<(usize, VarId)> = a
        .vars
        .iter()
        .filter_map(|(id, var)| match var {
            Var::Value(attr, Type::Timestamp) => g.index.get(attr).map(|&node| (node, id)),
            _ => None,
        })
        .collect();
    for &(node, id) in &value_vars {
        let attr = g.nodes[node].expect("a term");
        let guard = if optional(attr) { a.vars.find(&Var::Present(attr.clone())) } else { None };
        for test in &a.assumed[id as usize] {
            let Test::Compare(op, Value::Timestamp(at)) = test else { continue };
            let mut why = vec![F::Lit(id, test.negated())];
            why.extend(guard.map(|p| is(p, false)));
            g.relate(node, 0, *op, *at, &why);
        }
    }
    if let Some(cycle) = negative_cycle(g.nodes.len(), &g.constraints, |c| c) {
        let mut lemma: Vec<F> = Vec::new();
        for c in cycle {
            for f in &g.constraints[c].why {
                if !lemma.contains(f) {
                    lemma.push(f.clone());
                }
            }
        }
        return Err(or(lemma));
    }

    // Values: the model's, when they satisfy every constraint; else the shortest distances from them, in whole
    // seconds when the constraints allow (they do whenever a solution in seconds exists), else in nanoseconds.
    let current: Vec<i128> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(node, attr)| match attr {
            None => 0,
            Some(attr) => value_of(a, assignment, attr, &value_vars, node).unwrap_or(DEFAULT_NOW),
        })
        .collect();
    let fits = |values: &[i128]| {
        g.constraints.iter().all(|c| values[c.x] - values[c.y] <= c.c)
            && g.apart.iter().all(|p| values[p.left] - values[p.right] != p.gap)
            && value_vars
                .iter()
                .all(|&(node, id)| a.assumed[id as usize].iter().all(|t| holds(&Value::Timestamp(values[node]), t)))
    };
    let values = if fits(&current) {
        current
    } else {
        let seconds = current.iter().map(|v| v.div_euclid(NANOS_PER_SECOND) * NANOS_PER_SECOND).collect();
        let whole = shortest(seconds, &g.constraints, |c| c.div_euclid(NANOS_PER_SECOND) * NANOS_PER_SECOND);
        match whole.filter(|v| fits(v)).or_else(|| shortest(current.clone(), &g.constraints, |c| c)) {
            Some(values) if fits(&values) => values,
            _ => return Ok(Outcome::Unknown),
        }
    };
    let out = g
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(node, attr)| {
            let ids = value_vars.iter().filter(|(n, _)| *n == node).map(|&(_, id)| id).collect();
            attr.map(|attr| (attr.clone(), values[node], ids))
        })
        .collect();
    Ok(Outcome::Consistent(out))
}

/// 2026-01-01T00:00:00Z, for an instant the model gives no value (the witness's `now` when the model has none).
const DEFAULT_NOW: i128 = 1_767_225_600 * NANOS_PER_SECOND;

/// A term's value as the theory or the search left it.
fn value_of(
    a: &Model<'_, '_>,
    assignment: &Chosen<'_>,
    attr: &Attr,
    value_vars: &[(usize, VarId)],
    node: usize,
) -> Option<i128> {
    if let Some((Value::Timestamp(t), _)) = assignment.terms.get(attr) {
        return Some(*t);
    }
    let overridden = |id: VarId| assignment.overrides.iter().rev().find(|(v, _)| *v == id).map(|(_, value)| value);
    value_vars.iter().filter(|(n, _)| *n == node).find_map(|&(_, id)| {
        match overridden(id).or(a.value[id as usize].as_ref().filter(|_| !a.assumed[id as usize].is_empty())) {
            Some(Value::Timestamp(t)) => Some(*t),
            _ => None,
        }
    })
}

/// The shortest distances from `start` (each node's own value, the epoch's 0) along the constraints, with their
/// constants mapped by `scale`, shifted so that the epoch stays at 0; `None` on a negative cycle.
fn shortest(start: Vec<i128>, constraints: &[Constraint], scale: impl Fn(i128) -> i128) -> Option<Vec<i128>> {
    let mut dist = start;
    for _ in 0..=dist.len() {
        let mut changed = false;
        for c in constraints {
            let bound = dist[c.y].saturating_add(scale(c.c));
            if dist[c.x] > bound {
                dist[c.x] = bound;
                changed = true;
            }
        }
        if !changed {
            let zero = dist[0];
            return Some(dist.into_iter().map(|d| d - zero).collect());
        }
    }
    None
}

/// The constraints of a negative cycle (Bellman-Ford from a source joined to every node), if there is one.
fn negative_cycle(nodes: usize, constraints: &[Constraint], scale: impl Fn(i128) -> i128) -> Option<Vec<usize>> {
    let mut dist = vec![0i128; nodes];
    let mut pred: Vec<Option<usize>> = vec![None; nodes];
    let mut last = None;
    for _ in 0..nodes {
        last = None;
        for (i, c) in constraints.iter().enumerate() {
            let bound = dist[c.y].saturating_add(scale(c.c));
            if dist[c.x] > bound {
                dist[c.x] = bound;
                pred[c.x] = Some(i);
                last = Some(c.x);
            }
        }
        last?;
    }
    // Still relaxing after `nodes` rounds: walk back `nodes` steps to land on the cycle, then go round it once.
    let mut node = last?;
    for _ in 0..nodes {
        node = constraints[pred[node]?].y;
    }
    let start = node;
    let mut cycle = Vec::new();
    loop {
        let c = pred[node]?;
        cycle.push(c);
        node = constraints[c].y;
        if node == start {
            break;
        }
    }
    Some(cycle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(x: usize, y: usize, c: i128) -> Constraint {
        Constraint { x, y, c, why: Vec::new() }
    }

    #[test]
    fn a_negative_cycle_is_found_and_a_feasible_system_solved() {
        // until - granted <= 30, granted - 0 <= 100, 0 - until <= -131 (until > 130): contradiction.
        let cs = vec![c(1, 2, 30), c(2, 0, 100), c(0, 1, -131)];
        let cycle = negative_cycle(3, &cs, |c| c).expect("a cycle");
        let mut sorted = cycle.clone();
        sorted.sort();
        assert_eq!(sorted, [0, 1, 2]);
        // until > 130 is the exact edge: until >= 130 is satisfiable.
        let cs = vec![c(1, 2, 30), c(2, 0, 100), c(0, 1, -130)];
        assert!(negative_cycle(3, &cs, |c| c).is_none());
        let values = shortest(vec![0, 500, 0], &cs, |c| c).expect("solved");
        assert!(cs.iter().all(|k| values[k.x] - values[k.y] <= k.c), "{values:?}");
        assert_eq!(values[0], 0);
    }
}
