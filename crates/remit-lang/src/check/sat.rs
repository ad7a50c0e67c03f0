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
    let Some(dnf) = dnf(cond) else {
        // Too many alternatives: the atoms every alternative shares (the top-level `and`) may still contradict.
        let mut shared = Vec::new();
        conjuncts(cond, &mut shared);
        return (!conjunction_satisfiable(&shared, levels)).then_some(false);
    };
    Some(dnf.iter().any(|conjunction| conjunction_satisfiable(conjunction, levels)))
}

/// The atoms of `cond`'s top-level `and` (through nested `and`s): every request satisfying `cond` satisfies them.
fn conjuncts<'a>(cond: &'a Cond, out: &mut Conjunction<'a>) {
    match cond {
        Cond::And(items) => items.iter().for_each(|item| conjuncts(item, out)),
        Cond::Atom(atom) => out.push(atom),
        _ => {}
    }
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
        Cond::Atom(atom) => Cond::Atom(canonical(atom)),
    }
}

/// One variable for comparisons of two attributes that say the same thing: `b == a` is `a == b`, `a > b` is
/// `b < a`, and `a != b` is `a == b` negated. The solvers treat a comparison as a bool of its own, so without this
/// they would see two unrelated bools.
pub fn canonical(atom: &Atom) -> Atom {
    let Attr::Compare(left, op, right, ty) = &atom.attr else { return atom.clone() };
    let (left, op, right, flip) = match op {
        CompareOp::Ne => (left, CompareOp::Eq, right, true),
        CompareOp::Gt => (right, CompareOp::Lt, left, false),
        CompareOp::Ge => (right, CompareOp::Le, left, false),
        other => (left, *other, right, false),
    };
    let (left, right) = if op == CompareOp::Eq && right < left { (right, left) } else { (left, right) };
    let test = match &atom.test {
        Test::Compare(test_op, Value::Bool(b)) if flip => Test::Compare(*test_op, Value::Bool(!b)),
        other => other.clone(),
    };
    Atom { attr: Attr::Compare(left.clone(), op, right.clone(), ty.clone()), ty: atom.ty.clone(), test }
}

/// The negation of a condition, still negation-free.
pub fn negate(cond: &Cond) -> Cond {
    match cond {
        Cond::True => Cond::False,
        Cond::False => Cond::True,
        Cond::And(items) => Cond::Or(items.iter().map(negate).collect()),
        Cond::Or(items) => Cond::And(items.iter().map(negate).collect()),
        Cond::Atom(atom) => {
            Cond::Atom(Atom { attr: atom.attr.clone(), ty: atom.ty.clone(), test: atom.test.negated() })
        }
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
    let mut by_attr: BTreeMap<&Attr, Vec<&Test>> = BTreeMap::new();
    let mut types: BTreeMap<&Attr, &Type> = BTreeMap::new();
    for atom in atoms {
        by_attr.entry(&atom.attr).or_default().push(&atom.test);
        types.entry(&atom.attr).or_insert(&atom.ty);
    }
    by_attr.iter().all(|(attr, tests)| domain_model(types[attr], tests, levels).is_some())
}

/// The earliest and latest timestamps a request can carry, in nanoseconds (`YYYY` has four digits, the fraction
/// nine, and an offset of up to 23:59 moves either end by as much).
const FIRST_TIMESTAMP: i128 = (-62_167_219_200 - 86_340) * NANOS; // 0000-01-01T00:00:00+23:59
const LAST_TIMESTAMP: i128 = (253_402_300_800 + 86_340) * NANOS - 1; // 9999-12-31T23:59:59.999999999-23:59
/// Where an unconstrained timestamp is placed, so witnesses read naturally: 2026-01-01T00:00:00Z.
const DEFAULT_TIMESTAMP: i128 = 1_767_225_600 * NANOS;
const NANOS: i128 = crate::value::NANOS_PER_SECOND;

/// A value of type `ty` that passes every test, or `None` when no value does. This decides satisfiability one
/// attribute at a time (attributes are independent), and gives the narrowing check the concrete values of its
/// counterexamples. Values are chosen to read well: the bound itself, whole numbers, the required prefix extended by a
/// letter (`user:a`, a member of `under "user:"`).
/// `levels` is the size of the impact scale.
pub fn domain_model(ty: &Type, tests: &[&Test], levels: usize) -> Option<Value> {
    path_model(ty, tests, None, levels)
}

/// [`domain_model`] with the narrowing check's path literal: with `Some(safe)`, the value is a string that
/// `under` can test (`true`) or one it refuses as unsafe (`false`), as [`testable_path`] says.
pub fn path_model(ty: &Type, tests: &[&Test], path: Option<bool>, levels: usize) -> Option<Value> {
    if path.is_some() && !matches!(ty, Type::String | Type::Kind(_)) {
        return None;
    }
    match ty {
        Type::Set(element) => set_model(element, tests, levels),
        Type::Int | Type::Decimal | Type::Money | Type::Timestamp | Type::Duration | Type::Level => {
            ordered_model(ty, tests, levels)
        }
        Type::Bool => {
            discrete_model(tests, Some(vec!["false".into(), "true".into()]), None).map(|b| Value::Bool(b == "true"))
        }
        Type::Enum(_, variants) => discrete_model(tests, Some(variants.clone()), None).map(Value::String),
        Type::String | Type::Kind(_) => discrete_model(tests, None, path).map(Value::String),
    }
}

/// Whether `under` and `not under` can test `text`: the interpreter refuses a path that could name a place outside
/// the prefix once normalised or decoded (an error, so the condition fails closed; docs/language.md).
pub fn testable_path(text: &str) -> bool {
    !crate::eval::unsafe_path(text)
}

/// Whether `value` passes `test` (values of different kinds never compare).
pub fn holds(value: &Value, test: &Test) -> bool {
    match test {
        Test::Compare(op, operand) => compare(*op, value, operand),
        Test::In(items) => items.contains(value),
        Test::NotIn(items) => !items.contains(value),
        Test::Under(prefix) => matches!(value, Value::String(s) if s.starts_with(prefix.as_str())),
        Test::NotUnder(prefix) => matches!(value, Value::String(s) if !s.starts_with(prefix.as_str())),
        Test::Contains(item) => matches!(value, Value::Set(items) if items.contains(item)),
        Test::NotContains(item) => matches!(value, Value::Set(items) if !items.contains(item)),
        Test::Within(list) => matches!(value, Value::Set(items) if items.iter().all(|i| list.contains(i))),
        Test::NotWithin(list) => matches!(value, Value::Set(items) if !items.iter().all(|i| list.contains(i))),
    }
}

fn compare(op: CompareOp, left: &Value, right: &Value) -> bool {
    let order = match (left, right) {
        (Value::Money(a), Value::Money(b)) if a.currency != b.currency => return false,
        (Value::Money(a), Value::Money(b)) => a.amount.cmp(&b.amount),
        _ if std::mem::discriminant(left) != std::mem::discriminant(right) => return false,
        _ => match (ordinal(left), ordinal(right)) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => {
                return match op {
                    CompareOp::Eq => left == right,
                    CompareOp::Ne => left != right,
                    _ => false,
                }
            }
        },
    };
    match op {
        CompareOp::Eq => order.is_eq(),
        CompareOp::Ne => order.is_ne(),
        CompareOp::Lt => order.is_lt(),
        CompareOp::Le => order.is_le(),
        CompareOp::Gt => order.is_gt(),
        CompareOp::Ge => order.is_ge(),
    }
}

/// Ordered values as integers in their smallest unit, so strict bounds become inclusive ones.
fn ordinal(value: &Value) -> Option<i128> {
    match value {
        Value::Number(d) => Some(d.0),
        Value::Money(m) => Some(m.amount.0),
        Value::Timestamp(t) => Some(*t),
        Value::Duration(d) => Some(*d as i128),
        Value::Level(l) => Some(*l as i128),
        _ => None,
    }
}

fn ordered_model(ty: &Type, tests: &[&Test], levels: usize) -> Option<Value> {
    // Ints are stored as scaled decimals: their unit step is 10^9.
    let unit: i128 = 10i128.pow(DECIMAL_SCALE);
    let step: i128 = if *ty == Type::Int { unit } else { 1 };
    // What the tests require, and separately what a request can carry: levels on the scale, durations as
    // unsigned seconds, four-digit years.
    let (mut lo, mut hi): (Option<i128>, Option<i128>) = (None, None);
    let (type_lo, type_hi): (Option<i128>, Option<i128>) = match ty {
        Type::Level => (Some(0), Some(levels.saturating_sub(1) as i128)),
        Type::Duration => (Some(0), None),
        Type::Timestamp => (Some(FIRST_TIMESTAMP), Some(LAST_TIMESTAMP)),
        _ => (None, None),
    };
    let mut allowed: Option<BTreeSet<i128>> = None;
    let mut excluded: BTreeSet<i128> = BTreeSet::new();
    let mut currencies: BTreeSet<&str> = BTreeSet::new();
    let restrict = |set: BTreeSet<i128>, allowed: &mut Option<BTreeSet<i128>>| {
        *allowed = Some(match allowed.take() {
            Some(current) => current.intersection(&set).copied().collect(),
            None => set,
        });
    };
    for test in tests {
        let values: Vec<&Value> = match test {
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
        match test {
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
        return None; // a value has one currency; comparing it with another always fails
    }
    let currency = currencies.first().map_or("USD", |c| c).to_string();
    let tighter = |a: Option<i128>, b: Option<i128>, pick: fn(i128, i128) -> i128| match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    };
    let (min, max) = (tighter(lo, type_lo, i128::max), tighter(hi, type_hi, i128::min));
    let fits = |x: i128| {
        min.is_none_or(|l| x >= l) && max.is_none_or(|h| x <= h) && x.rem_euclid(step) == 0 && !excluded.contains(&x)
    };
    let found = match allowed {
        Some(allowed) => allowed.into_iter().find(|x| fits(*x)),
        None => {
            // Prefer round values (whole units, then hundredths; whole seconds, then milliseconds) at the bound the
            // tests set.
            let grids: &[i128] = match ty {
                Type::Decimal | Type::Money => &[unit, unit / 100, 1],
                Type::Timestamp => &[NANOS, NANOS / 1000, 1],
                _ => &[step],
            };
            let default: i128 = if *ty == Type::Timestamp { DEFAULT_TIMESTAMP } else { 0 };
            let mut found = None;
            'grids: for &grid in grids {
                let start = match (lo, hi) {
                    (Some(l), _) => (l + grid - 1).div_euclid(grid) * grid,
                    (None, Some(h)) => h.div_euclid(grid) * grid,
                    (None, None) => default,
                };
                // Into what a request can carry (an empty range is caught by `fits`).
                let start = max.map_or(start, |h| start.min(h));
                let start = min.map_or(start, |l| start.max(l));
                if start.rem_euclid(grid) != 0 {
                    continue; // no point of this grid where the bounds put it: try a finer one
                }
                // Finitely many exclusions: one of the next |excluded| + 1 grid points up or down is free.
                for k in 0..=excluded.len() as i128 {
                    for x in [start + k * grid, start - k * grid] {
                        if fits(x) {
                            found = Some(x);
                            break 'grids;
                        }
                    }
                }
            }
            found
        }
    }?;
    Some(match ty {
        Type::Int | Type::Decimal => Value::Number(crate::value::Decimal(found)),
        Type::Money => Value::Money(crate::value::Money { amount: crate::value::Decimal(found), currency }),
        Type::Timestamp => Value::Timestamp(found),
        Type::Duration => Value::Duration(i64::try_from(found).ok()?),
        _ => Value::Level(usize::try_from(found).ok()?),
    })
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A string passing `tests` from `domain` (any string when `None`); with `path`, one [`testable_path`] says is
/// (`Some(true)`) or is not (`Some(false)`) a path `under` can test.
fn discrete_model(tests: &[&Test], domain: Option<Vec<String>>, path: Option<bool>) -> Option<String> {
    let mut allowed: Option<BTreeSet<String>> = domain.map(|d| d.into_iter().collect());
    let mut excluded: BTreeSet<String> = BTreeSet::new();
    let mut prefixes: Vec<&str> = Vec::new();
    let mut not_prefixes: Vec<&str> = Vec::new();
    for test in tests {
        let mut restrict = |set: BTreeSet<String>| {
            allowed = Some(match allowed.take() {
                Some(current) => current.intersection(&set).cloned().collect(),
                None => set,
            });
        };
        match test {
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
            && path.is_none_or(|safe| testable_path(s) == safe)
    };
    if let Some(allowed) = allowed {
        return allowed.into_iter().find(|s| fits(s));
    }
    // Infinitely many strings: the longest required prefix must extend every other one and must not
    // itself fall under an excluded prefix; then some extension of it avoids the finitely many exclusions.
    let longest = prefixes.iter().max_by_key(|p| p.len()).copied().unwrap_or("");
    if !prefixes.iter().all(|p| longest.starts_with(p)) || not_prefixes.iter().any(|q| longest.starts_with(q)) {
        return None;
    }
    // Each exclusion and each excluded prefix rules out at most one extension by a distinct character; past the
    // 26 letters, further distinct characters keep that true. A safe path needs three more: an extension by `c`,
    // `e` or `f` can complete an encoded separator or dot (`%5c`, `%2e`, `%2f`) the prefix began.
    let blockers = excluded.len() + not_prefixes.len() + if path == Some(true) { 3 } else { 0 };
    let extensions = (0..=blockers as u32).map(|i| match i {
        0..=25 => char::from(b'a' + i as u8),
        _ => char::from_u32(0x4E00 + i).unwrap_or('?'),
    });
    let mut candidates: Vec<String> = Vec::new();
    if path == Some(false) {
        // An unsafe path reads best as one that climbs out of the prefix: `{prefix}../`, or `{prefix}{c}/../`
        // (a `..` segment, whatever the prefix ends with), each extension distinct as above.
        candidates.push(longest.to_string());
        candidates.push(format!("{longest}../"));
        candidates.extend(extensions.map(|c| format!("{longest}{c}/../")));
        return candidates.into_iter().find(|s| fits(s));
    }
    // A member of the prefix before the prefix itself: `user:a` names someone, `user:` a namespace (and a witness
    // naming `principal` = `"user:"` reads as a slip). The prefix stays the last resort.
    candidates.extend(extensions.map(|c| format!("{longest}{c}")));
    if !longest.is_empty() {
        candidates.push(longest.to_string());
    }
    candidates.into_iter().find(|s| fits(s))
}

fn set_model(element: &Type, tests: &[&Test], levels: usize) -> Option<Value> {
    let mut must: Vec<&Value> = Vec::new();
    let mut must_not: Vec<Value> = Vec::new();
    let mut within: Option<Vec<&Value>> = None;
    let mut not_within: Vec<&[Value]> = Vec::new();
    for test in tests {
        match test {
            Test::Contains(v) => must.push(v),
            Test::NotContains(v) => must_not.push(v.clone()),
            Test::Within(vs) => {
                within = Some(match within.take() {
                    Some(current) => current.into_iter().filter(|v| vs.contains(v)).collect(),
                    None => vs.iter().collect(),
                })
            }
            Test::NotWithin(vs) => not_within.push(vs),
            _ => {}
        }
    }
    if must.iter().any(|m| must_not.contains(m)) {
        return None;
    }
    if let Some(within) = &within {
        if !must.iter().all(|m| within.contains(m)) {
            return None;
        }
    }
    let mut members: Vec<Value> = Vec::new();
    for m in must {
        if !members.contains(m) {
            members.push(m.clone());
        }
    }
    // Each `not within L` needs a member outside L: add one (from `within`, never a forbidden one) when the
    // members so far all lie in L. Adding members never breaks `contains`, so this greedy choice is complete.
    for list in not_within {
        if members.iter().any(|m| !list.contains(m)) {
            continue;
        }
        let mut avoid = list.to_vec();
        avoid.extend(must_not.iter().cloned());
        let allowed = within.as_ref().map(|w| Test::In(w.iter().map(|v| (*v).clone()).collect()));
        let avoid = Test::NotIn(avoid);
        let mut element_tests: Vec<&Test> = vec![&avoid];
        element_tests.extend(allowed.as_ref());
        members.push(domain_model(element, &element_tests, levels)?);
    }
    members.sort();
    Some(Value::Set(members))
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

    fn model(ty: Type, tests: &[Test]) -> Option<Value> {
        let refs: Vec<&Test> = tests.iter().collect();
        let found = domain_model(&ty, &refs, 5);
        if let Some(value) = &found {
            assert!(tests.iter().all(|t| holds(value, t)), "{value:?} must pass {tests:?}");
        }
        found
    }

    #[test]
    fn models_pick_readable_values_at_the_bounds() {
        let gt = |v| Test::Compare(CompareOp::Gt, v);
        assert_eq!(model(Type::Money, &[gt(money("100"))]), Some(money("101")));
        assert_eq!(
            model(Type::Money, &[gt(money("100")), Test::Compare(CompareOp::Lt, money("100.5"))]),
            Some(money("100.01"))
        );
        assert_eq!(
            model(Type::Int, &[Test::Compare(CompareOp::Le, int(3)), Test::NotIn(vec![int(3), int(2)])]),
            Some(int(1))
        );
        let noon = Value::Timestamp(1_780_000_000 * NANOS);
        assert_eq!(
            model(Type::Timestamp, &[Test::Compare(CompareOp::Lt, noon.clone())]),
            Some(Value::Timestamp(1_779_999_999 * NANOS))
        );
        // A request may carry a fraction: between two whole seconds there is a timestamp (half a second in).
        let next = Value::Timestamp(1_780_000_001 * NANOS);
        assert_eq!(
            model(Type::Timestamp, &[Test::Compare(CompareOp::Gt, noon), Test::Compare(CompareOp::Lt, next)]),
            Some(Value::Timestamp(1_780_000_000 * NANOS + 1_000_000))
        );
        assert_eq!(model(Type::Duration, &[Test::Compare(CompareOp::Lt, Value::Duration(0))]), None);
        assert_eq!(model(Type::Level, &[Test::Compare(CompareOp::Gt, Value::Level(3))]), Some(Value::Level(4)));
    }

    #[test]
    fn string_models_extend_the_required_prefix() {
        let s = |t: &str| Value::String(t.to_string());
        assert_eq!(model(Type::String, &[Test::Under("site/".into())]), Some(s("site/a")));
        // A member of an identity namespace, not the namespace: `user:a`, never `user:`.
        assert_eq!(model(Type::String, &[Test::Under("user:".into())]), Some(s("user:a")));
        // The prefix itself when nothing else is left.
        let only = [Test::Under("site/".into()), Test::In(vec![s("site/"), s("web/")])];
        assert_eq!(model(Type::String, &only), Some(s("site/")));
        let blocked =
            [Test::Under("site/".into()), Test::Compare(CompareOp::Ne, s("site/")), Test::NotUnder("site/a".into())];
        assert_eq!(model(Type::String, &blocked), Some(s("site/b")));
        assert_eq!(model(Type::String, &[Test::Under("a/b".into()), Test::NotUnder("a/".into())]), None);
    }

    /// A path literal: the model is a string `under` can test, or one it refuses, and passes the other tests.
    #[test]
    fn path_models_are_testable_or_not_as_asked() {
        let s = |t: &str| Value::String(t.to_string());
        let path = |tests: &[Test], safe: bool| {
            let refs: Vec<&Test> = tests.iter().collect();
            let found = path_model(&Type::String, &refs, Some(safe), 5);
            if let Some(Value::String(text)) = &found {
                assert_eq!(testable_path(text), safe, "{text:?}");
                assert!(tests.iter().all(|t| holds(&s(text), t)), "{text:?} must pass {tests:?}");
            }
            found
        };
        let under = |p: &str| Test::Under(p.into());
        assert_eq!(path(&[under("site/")], true), Some(s("site/a")));
        assert_eq!(path(&[under("site/")], false), Some(s("site/../")));
        // A prefix that ends in a `..` segment is extended into a testable one; one that holds `//` never is.
        assert_eq!(path(&[under("a/..")], true), Some(s("a/..a")));
        assert_eq!(path(&[under("a//")], true), None);
        assert_eq!(path(&[under("a//")], false), Some(s("a//")));
        // An extension must not complete an encoded dot the prefix began (`%2` + `e`).
        let blocked = [under("x%2"), Test::NotIn(vec![s("x%2"), s("x%2a"), s("x%2b"), s("x%2c"), s("x%2d")])];
        assert_eq!(path(&blocked, true), Some(s("x%2g")));
        // Listed values are kept or not by the literal alone.
        let listed = [Test::In(vec![s("notes/a.txt"), s("notes/../secret/key")])];
        assert_eq!(path(&listed, true), Some(s("notes/a.txt")));
        assert_eq!(path(&listed, false), Some(s("notes/../secret/key")));
        let climbing = [under("site/"), Test::NotUnder("site/../".into()), Test::NotUnder("site/a/".into())];
        assert_eq!(path(&climbing, false), Some(s("site/b/../")));
        assert_eq!(path_model(&Type::Int, &[], Some(true), 5), None);
    }

    #[test]
    fn set_models_add_members_outside_excluded_lists() {
        let s = |t: &str| Value::String(t.to_string());
        let tags = Type::Set(Box::new(Type::String));
        let found = model(tags.clone(), &[Test::Contains(s("a")), Test::NotWithin(vec![s("a"), s("b")])]);
        assert!(matches!(found, Some(Value::Set(items)) if items.len() == 2));
        // Over a finite element type, "not within" every variant is impossible.
        let e = Type::Set(Box::new(Type::Enum("c".into(), vec!["a".into(), "b".into()])));
        assert_eq!(model(e, &[Test::NotWithin(vec![s("a"), s("b")])]), None);
        assert_eq!(model(tags, &[Test::Contains(s("a")), Test::Within(vec![s("b")])]), None);
    }
}
