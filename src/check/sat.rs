//! Satisfiability of conditions. The constraint fragment (comparisons with literals, membership, prefixes, set
//! tests, connectives) is decidable: a condition is put in disjunctive normal form and each conjunction is
//! decided attribute by attribute. Used for contradiction and dead-grant lints, and by the narrowing proof.

use std::collections::{BTreeMap, BTreeSet};

use crate::ir::{Atom, Attr, Cond, Test, Type, Value};
use crate::syntax::ast::CompareOp;
use crate::value::DECIMAL_SCALE;

/// Beyond this many conjunctions the normal form is not built and the answer is "unknown".
const MAX_CONJUNCTIONS: usize = 4096;

/// Whether some request satisfies `cond` (`None` when the condition is too large to decide).
/// `levels` is the size of the impact scale.
pub fn satisfiable(cond: &Cond, levels: usize) -> Option<bool> {
    let dnf = dnf(cond)?;
    Some(dnf.iter().any(|conjunction| conjunction_satisfiable(conjunction, levels)))
}

/// Whether every request satisfying `a` satisfies `b` (`None` when undecided).
pub fn implies(a: &Cond, b: &Cond, levels: usize) -> Option<bool> {
    satisfiable(&Cond::And(vec![a.clone(), negate(b)]), levels).map(|sat| !sat)
}

/// `cond` for calls to a tool of level `level`: the `level` attribute is known, so its atoms become constants.
pub fn for_level(cond: &Cond, level: usize) -> Cond {
    match cond {
        Cond::True | Cond::False => cond.clone(),
        Cond::And(items) => Cond::And(items.iter().map(|c| for_level(c, level)).collect()),
        Cond::Or(items) => Cond::Or(items.iter().map(|c| for_level(c, level)).collect()),
        Cond::Atom(atom) if atom.attr == Attr::Level => {
            let pinned =
                Atom { attr: Attr::Level, ty: Type::Level, test: Test::Compare(CompareOp::Eq, Value::Level(level)) };
            let both = Cond::And(vec![Cond::Atom(pinned), cond.clone()]);
            // Decided by the one-attribute domain check: satisfiable together with `level == L` or not.
            if satisfiable(&both, usize::MAX).unwrap_or(true) {
                Cond::True
            } else {
                Cond::False
            }
        }
        Cond::Atom(_) => cond.clone(),
    }
}

/// The negation of a condition, still negation-free.
pub fn negate(cond: &Cond) -> Cond {
    match cond {
        Cond::True => Cond::False,
        Cond::False => Cond::True,
        Cond::And(items) => Cond::Or(items.iter().map(negate).collect()),
        Cond::Or(items) => Cond::And(items.iter().map(negate).collect()),
        Cond::Atom(atom) => {
            let test = match &atom.test {
                Test::Compare(op, v) => Test::Compare(negate_op(*op), v.clone()),
                Test::In(v) => Test::NotIn(v.clone()),
                Test::NotIn(v) => Test::In(v.clone()),
                Test::Under(p) => Test::NotUnder(p.clone()),
                Test::NotUnder(p) => Test::Under(p.clone()),
                Test::Contains(v) => Test::NotContains(v.clone()),
                Test::NotContains(v) => Test::Contains(v.clone()),
                Test::Within(v) => Test::NotWithin(v.clone()),
                Test::NotWithin(v) => Test::Within(v.clone()),
            };
            Cond::Atom(Atom { attr: atom.attr.clone(), ty: atom.ty.clone(), test })
        }
    }
}

fn negate_op(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Eq => CompareOp::Ne,
        CompareOp::Ne => CompareOp::Eq,
        CompareOp::Lt => CompareOp::Ge,
        CompareOp::Le => CompareOp::Gt,
        CompareOp::Gt => CompareOp::Le,
        CompareOp::Ge => CompareOp::Lt,
    }
}

type Conjunction<'a> = Vec<&'a Atom>;

fn dnf(cond: &Cond) -> Option<Vec<Conjunction<'_>>> {
    match cond {
        Cond::True => Some(vec![Vec::new()]),
        Cond::False => Some(Vec::new()),
        Cond::Atom(atom) => Some(vec![vec![atom]]),
        Cond::Or(items) => {
            let mut out = Vec::new();
            for item in items {
                out.extend(dnf(item)?);
                if out.len() > MAX_CONJUNCTIONS {
                    return None;
                }
            }
            Some(out)
        }
        Cond::And(items) => {
            let mut out: Vec<Conjunction<'_>> = vec![Vec::new()];
            for item in items {
                let part = dnf(item)?;
                if out.len().saturating_mul(part.len()) > MAX_CONJUNCTIONS {
                    return None;
                }
                out = out
                    .iter()
                    .flat_map(|left| part.iter().map(move |right| left.iter().chain(right.iter()).copied().collect()))
                    .collect();
            }
            Some(out)
        }
    }
}

fn conjunction_satisfiable(atoms: &[&Atom], levels: usize) -> bool {
    let mut by_attr: BTreeMap<&Attr, Vec<&Atom>> = BTreeMap::new();
    for atom in atoms {
        by_attr.entry(&atom.attr).or_default().push(atom);
    }
    by_attr.values().all(|group| group_satisfiable(group, levels))
}

fn group_satisfiable(atoms: &[&Atom], levels: usize) -> bool {
    match &atoms[0].ty {
        Type::Set(_) => sets_satisfiable(atoms),
        Type::Int | Type::Decimal | Type::Money | Type::Timestamp | Type::Duration | Type::Level => {
            ordered_satisfiable(atoms, levels)
        }
        Type::Bool => discrete_satisfiable(atoms, Some(vec!["false".into(), "true".into()])),
        Type::Enum(_, variants) => discrete_satisfiable(atoms, Some(variants.clone())),
        Type::String | Type::Kind(_) => discrete_satisfiable(atoms, None),
    }
}

/// Ordered values as integers in their smallest unit, so strict bounds become inclusive ones.
fn ordinal(value: &Value) -> Option<i128> {
    match value {
        Value::Number(d) => Some(d.0),
        Value::Money(m) => Some(m.amount.0),
        Value::Timestamp(t) => Some(*t as i128),
        Value::Duration(d) => Some(*d as i128),
        Value::Level(l) => Some(*l as i128),
        _ => None,
    }
}

fn ordered_satisfiable(atoms: &[&Atom], levels: usize) -> bool {
    let ty = &atoms[0].ty;
    // Ints are stored as scaled decimals: their unit step is 10^9.
    let step: i128 = if *ty == Type::Int { 10i128.pow(DECIMAL_SCALE) } else { 1 };
    let (mut lo, mut hi): (Option<i128>, Option<i128>) = (None, None);
    if *ty == Type::Level {
        lo = Some(0);
        hi = Some(levels.saturating_sub(1) as i128);
    }
    let mut allowed: Option<BTreeSet<i128>> = None;
    let mut excluded: BTreeSet<i128> = BTreeSet::new();
    let mut currencies: BTreeSet<&str> = BTreeSet::new();
    let restrict = |set: BTreeSet<i128>, allowed: &mut Option<BTreeSet<i128>>| {
        *allowed = Some(match allowed.take() {
            Some(current) => current.intersection(&set).copied().collect(),
            None => set,
        });
    };
    for atom in atoms {
        let values: Vec<&Value> = match &atom.test {
            Test::Compare(_, v) => vec![v],
            Test::In(vs) | Test::NotIn(vs) => vs.iter().collect(),
            _ => Vec::new(),
        };
        for v in &values {
            if let Value::Money(m) = v {
                currencies.insert(&m.currency);
            }
        }
        let ords: BTreeSet<i128> = values.iter().filter_map(|v| ordinal(v)).collect();
        match &atom.test {
            Test::Compare(op, v) => {
                let Some(x) = ordinal(v) else { continue };
                // The smallest value above x and the largest below it, on the type's grid.
                let above = (x.div_euclid(step) + 1) * step;
                let below = if x.rem_euclid(step) == 0 { x - step } else { x.div_euclid(step) * step };
                match op {
                    CompareOp::Eq => restrict([x].into(), &mut allowed),
                    CompareOp::Ne => {
                        excluded.insert(x);
                    }
                    CompareOp::Lt => hi = Some(hi.map_or(below, |h| h.min(below))),
                    CompareOp::Le => {
                        let at = x.div_euclid(step) * step;
                        hi = Some(hi.map_or(at, |h| h.min(at)))
                    }
                    CompareOp::Gt => lo = Some(lo.map_or(above, |l| l.max(above))),
                    CompareOp::Ge => {
                        let at = if x.rem_euclid(step) == 0 { x } else { above };
                        lo = Some(lo.map_or(at, |l| l.max(at)))
                    }
                }
            }
            Test::In(_) => restrict(ords, &mut allowed),
            Test::NotIn(_) => excluded.extend(ords),
            _ => {}
        }
    }
    if currencies.len() > 1 {
        return false; // a value has one currency; comparing it with another always fails
    }
    let in_range = |x: i128| lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h) && x.rem_euclid(step) == 0;
    if let Some(allowed) = allowed {
        return allowed.iter().any(|x| in_range(*x) && !excluded.contains(x));
    }
    match (lo, hi) {
        (Some(l), Some(h)) => {
            if l > h {
                return false;
            }
            let count = (h - l) / step + 1;
            let blocked = excluded.iter().filter(|x| in_range(**x)).count() as i128;
            count > blocked
        }
        _ => true,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn discrete_satisfiable(atoms: &[&Atom], domain: Option<Vec<String>>) -> bool {
    let mut allowed: Option<BTreeSet<String>> = domain.map(|d| d.into_iter().collect());
    let mut excluded: BTreeSet<String> = BTreeSet::new();
    let mut prefixes: Vec<&str> = Vec::new();
    let mut not_prefixes: Vec<&str> = Vec::new();
    for atom in atoms {
        let mut restrict = |set: BTreeSet<String>| {
            allowed = Some(match allowed.take() {
                Some(current) => current.intersection(&set).cloned().collect(),
                None => set,
            });
        };
        match &atom.test {
            Test::Compare(CompareOp::Eq, v) => restrict(text(v).into_iter().collect()),
            Test::Compare(_, v) => excluded.extend(text(v)),
            Test::In(vs) => restrict(vs.iter().filter_map(text).collect()),
            Test::NotIn(vs) => excluded.extend(vs.iter().filter_map(text)),
            Test::Under(p) => prefixes.push(p),
            Test::NotUnder(p) => not_prefixes.push(p),
            _ => {}
        }
    }
    let fits = |s: &str| {
        !excluded.contains(s)
            && prefixes.iter().all(|p| s.starts_with(p))
            && !not_prefixes.iter().any(|p| s.starts_with(p))
    };
    if let Some(allowed) = allowed {
        return allowed.iter().any(|s| fits(s));
    }
    // Infinitely many strings: the longest required prefix must extend every other one and must not
    // itself fall under an excluded prefix; then some extension of it avoids the finitely many exclusions.
    let longest = prefixes.iter().max_by_key(|p| p.len()).copied().unwrap_or("");
    prefixes.iter().all(|p| longest.starts_with(p)) && !not_prefixes.iter().any(|q| longest.starts_with(q))
}

fn sets_satisfiable(atoms: &[&Atom]) -> bool {
    let mut must: BTreeSet<&Value> = BTreeSet::new();
    let mut must_not: BTreeSet<&Value> = BTreeSet::new();
    let mut within: Option<BTreeSet<&Value>> = None;
    let mut not_within: Vec<BTreeSet<&Value>> = Vec::new();
    for atom in atoms {
        match &atom.test {
            Test::Contains(v) => {
                must.insert(v);
            }
            Test::NotContains(v) => {
                must_not.insert(v);
            }
            Test::Within(vs) => {
                let set: BTreeSet<&Value> = vs.iter().collect();
                within = Some(match within.take() {
                    Some(current) => current.intersection(&set).copied().collect(),
                    None => set,
                });
            }
            Test::NotWithin(vs) => not_within.push(vs.iter().collect()),
            _ => {}
        }
    }
    if !must.is_disjoint(&must_not) {
        return false;
    }
    if let Some(within) = &within {
        if !must.is_subset(within) {
            return false;
        }
    }
    // Each `not within L` needs one member outside L: a required member, or one we may add.
    not_within.iter().all(|list| {
        must.iter().any(|m| !list.contains(m))
            || match &within {
                Some(w) => w.iter().any(|v| !list.contains(v) && !must_not.contains(v)),
                None => true,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Decimal, Money};

    fn atom(attr: &str, ty: Type, test: Test) -> Cond {
        Cond::Atom(Atom { attr: Attr::Arg(attr.into()), ty, test })
    }

    fn money(amount: &str) -> Value {
        Value::Money(Money { amount: Decimal::parse(amount).unwrap(), currency: "USD".into() })
    }

    fn int(n: i64) -> Value {
        Value::Number(Decimal::from_int(n))
    }

    #[test]
    fn contradictory_bounds_are_unsatisfiable() {
        let c = Cond::And(vec![
            atom("n", Type::Int, Test::Compare(CompareOp::Lt, int(0))),
            atom("n", Type::Int, Test::Compare(CompareOp::Gt, int(10))),
        ]);
        assert_eq!(satisfiable(&c, 5), Some(false));
    }

    #[test]
    fn integer_gaps_are_unsatisfiable_but_decimal_gaps_are_not() {
        let between = |ty: Type, lo: Value, hi: Value| {
            Cond::And(vec![
                atom("n", ty.clone(), Test::Compare(CompareOp::Gt, lo)),
                atom("n", ty, Test::Compare(CompareOp::Lt, hi)),
            ])
        };
        assert_eq!(satisfiable(&between(Type::Int, int(1), int(2)), 5), Some(false));
        assert_eq!(satisfiable(&between(Type::Money, money("1"), money("2")), 5), Some(true));
    }

    #[test]
    fn implication_between_ranges() {
        let small = atom("a", Type::Money, Test::Compare(CompareOp::Le, money("50")));
        let large = atom("a", Type::Money, Test::Compare(CompareOp::Le, money("100")));
        assert_eq!(implies(&small, &large, 5), Some(true));
        assert_eq!(implies(&large, &small, 5), Some(false));
    }

    #[test]
    fn prefixes() {
        let s = |t| Value::String(String::from(t));
        let c = Cond::And(vec![
            atom("p", Type::String, Test::Under("site/a/".into())),
            atom("p", Type::String, Test::NotUnder("site/".into())),
        ]);
        assert_eq!(satisfiable(&c, 5), Some(false));
        let c = Cond::And(vec![
            atom("p", Type::String, Test::Under("site/a/".into())),
            atom("p", Type::String, Test::Compare(CompareOp::Eq, s("other"))),
        ]);
        assert_eq!(satisfiable(&c, 5), Some(false));
    }

    #[test]
    fn enums_have_finite_domains() {
        let e = Type::Enum("c".into(), vec!["a".into(), "b".into()]);
        let s = |t| Value::String(String::from(t));
        let c = Cond::And(vec![
            atom("c", e.clone(), Test::Compare(CompareOp::Ne, s("a"))),
            atom("c", e, Test::Compare(CompareOp::Ne, s("b"))),
        ]);
        assert_eq!(satisfiable(&c, 5), Some(false));
    }

    #[test]
    fn levels_are_bounded_by_the_scale() {
        let c = atom("l", Type::Level, Test::Compare(CompareOp::Gt, Value::Level(4)));
        assert_eq!(satisfiable(&c, 5), Some(false));
        assert_eq!(satisfiable(&c, 6), Some(true));
    }
}
