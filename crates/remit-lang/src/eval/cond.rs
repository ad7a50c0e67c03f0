//! Condition evaluation. Attributes are read from the request and decoded by the type the checker gave them; a
//! missing or wrongly typed attribute, or a comparison of values of different kinds, is an error, and an error
//! anywhere in a condition makes the whole condition an error, so each caller fails closed in its own direction
//! (a prohibition that errors matches, a grant that errors does not grant).
//!
//! Tool listing asks the same question before the call is known: [`possible`] gives the set of outcomes a
//! condition may still have when the per-call values (arguments, and the resource and attempt when the listing
//! request carries none) are unknown.

use std::cmp::Ordering;

use serde_json::{Number, Value as Json};

use super::err::EvalError;
use super::request::Request;
use crate::ir::{Attr, Cond, EntityAttribute, Program, Term, Test, ToolId, Type, Value};
use crate::syntax::ast::CompareOp;
use crate::value::{parse_duration, parse_instant, Decimal, Money, DECIMAL_SCALE};

/// What a condition is evaluated against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Env<'a> {
    pub program: &'a Program,
    pub request: &'a Request,
    /// The called tool (`level` reads its level).
    pub tool: ToolId,
    /// Tool listing: the call is not known yet.
    pub listing: bool,
    /// The principal of the request's mandate chain (`principal.ATTR` reads its attributes).
    pub principal: &'a str,
    /// The instance of a template the request is decided under, once checked: a parameter reads its value.
    pub instance: Option<&'a super::instance::Instance>,
    /// The instance `instance` hangs under, when its template hangs under a template (sub-delegation).
    pub parent: Option<&'a super::instance::Instance>,
}

/// Evaluates `cond`. Every child is evaluated; an error in any child is the result (see the module header).
pub(crate) fn eval(cond: &Cond, env: &Env) -> Result<bool, EvalError> {
    match cond {
        Cond::True => Ok(true),
        Cond::False => Ok(false),
        Cond::Atom(atom) => match fetch(&atom.attr, &atom.ty, env)? {
            Fetched::Value(value) => test(&value, &atom.test),
            Fetched::Unknown => Err(EvalError::Missing),
        },
        Cond::And(items) => {
            let mut all = true;
            for item in items {
                all &= eval(item, env)?;
            }
            Ok(all)
        }
        Cond::Or(items) => {
            let mut any = false;
            for item in items {
                any |= eval(item, env)?;
            }
            Ok(any)
        }
    }
}

/// The first atom of `cond` in prefix order (as written, left to right) that cannot be evaluated, and why: the atom
/// [`eval`] stops at when it gives an error (it evaluates children in order and returns the first error). `None`
/// when `cond` evaluates.
pub(crate) fn cause<'c>(cond: &'c Cond, env: &Env) -> Option<(&'c crate::ir::Atom, EvalError)> {
    match cond {
        Cond::True | Cond::False => None,
        Cond::Atom(atom) => {
            let result = match fetch(&atom.attr, &atom.ty, env) {
                Ok(Fetched::Value(value)) => test(&value, &atom.test).map(|_| ()),
                Ok(Fetched::Unknown) => Err(EvalError::Missing),
                Err(e) => Err(e),
            };
            result.err().map(|e| (atom, e))
        }
        Cond::And(items) | Cond::Or(items) => items.iter().find_map(|item| cause(item, env)),
    }
}

/// How far a condition that does not hold is from holding: how many of its top-level conjuncts (the children of a
/// root `and`, else the condition itself) are not true.
pub(crate) fn distance(cond: &Cond, env: &Env) -> usize {
    match cond {
        Cond::And(items) => items.iter().filter(|item| eval(item, env) != Ok(true)).count(),
        _ => 1,
    }
}

/// The atom that makes a false condition false, following it down: an `and` to its first false child, an `or` to
/// its first child (all are false). `None` for a constant.
pub(crate) fn failed_atom<'c>(cond: &'c Cond, env: &Env) -> Option<&'c crate::ir::Atom> {
    match cond {
        Cond::True | Cond::False => None,
        Cond::Atom(atom) => Some(atom),
        Cond::And(items) => failed_atom(items.iter().find(|item| eval(item, env) == Ok(false))?, env),
        Cond::Or(items) => failed_atom(items.first()?, env),
    }
}

/// The attribute a closest grant's `failed` names of atom attribute `attr`, whose request value it gives: a
/// membership in a template's set parameter (`args.merchant in merchants`, `args.merchant in parent.merchants`)
/// names its item, as a membership in a written set does (`args.merchant in ["a", "b"]` is an atom on
/// `args.merchant`); any other attribute names itself. The runtime's twin is `remit_rt::cond::failed_attribute`.
pub(crate) fn failed_attribute(attr: &Attr) -> &Attr {
    match attr {
        Attr::Member(item, set, _) if matches!(**set, Attr::Param(_) | Attr::ParentParam(_)) => item,
        _ => attr,
    }
}

/// An atom as a decision names it (`failed.condition`): attribute, test and operand in the language's words, the
/// negation the checker pushed into it written as `!=`, `not in`, `not under`, `not contains`, `not within` or the
/// opposite comparison (`args.amount <= 100 USD`, `args.merchant not in ["acme", "globex"]`).
pub(crate) fn atom_text(atom: &crate::ir::Atom, program: &Program) -> String {
    fn value(v: &Value, program: &Program) -> String {
        match v {
            Value::String(s) => Json::String(s.clone()).to_string(),
            Value::Number(n) => n.to_string(),
            Value::Money(m) => m.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Timestamp(t) => crate::value::format_instant(*t),
            Value::Duration(d) => format!("{d}s"),
            Value::Level(l) => program.levels.get(*l).cloned().unwrap_or_default(),
            Value::Set(items) => list(items, program),
        }
    }
    fn list(items: &[Value], program: &Program) -> String {
        format!("[{}]", items.iter().map(|v| value(v, program)).collect::<Vec<_>>().join(", "))
    }
    // A comparison, membership or relation reads as written, its negation as `>=`, `not in` or `not …`.
    if atom.attr.is_derived() {
        if let Test::Compare(op, Value::Bool(b)) = &atom.test {
            let holds = (*op == CompareOp::Eq) == *b;
            return if holds { atom.attr.display() } else { atom.attr.display_negated() };
        }
    }
    let test = match &atom.test {
        Test::Compare(op, v) => format!("{} {}", op.symbol(), value(v, program)),
        Test::In(items) => format!("in {}", list(items, program)),
        Test::NotIn(items) => format!("not in {}", list(items, program)),
        Test::Under(p) => format!("under {}", Json::String(p.clone())),
        Test::NotUnder(p) => format!("not under {}", Json::String(p.clone())),
        Test::Contains(v) => format!("contains {}", value(v, program)),
        Test::NotContains(v) => format!("not contains {}", value(v, program)),
        Test::Within(items) => format!("within {}", list(items, program)),
        Test::NotWithin(items) => format!("not within {}", list(items, program)),
    };
    format!("{} {test}", atom.attr.display())
}

/// A set of possible outcomes of a condition: true, false, error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Possible(u8);

impl Possible {
    pub const TRUE: Possible = Possible(1);
    pub const FALSE: Possible = Possible(2);
    pub const ERROR: Possible = Possible(4);
    pub const ANY: Possible = Possible(7);

    pub fn can_be_true(self) -> bool {
        self.0 & 1 != 0
    }

    pub fn can_be_false(self) -> bool {
        self.0 & 2 != 0
    }

    pub fn can_fail(self) -> bool {
        self.0 & 4 != 0
    }

    fn of(result: Result<bool, EvalError>) -> Possible {
        match result {
            Ok(true) => Possible::TRUE,
            Ok(false) => Possible::FALSE,
            Err(_) => Possible::ERROR,
        }
    }

    fn from_flags(t: bool, f: bool, e: bool) -> Possible {
        Possible(u8::from(t) | u8::from(f) << 1 | u8::from(e) << 2)
    }
}

/// The outcomes [`eval`] may give `cond` once the unknown per-call values are known. An over-approximation (atoms
/// on the same unknown attribute are treated as independent) that is exact when nothing is unknown: so "cannot be
/// true" and "cannot be false" are always safe conclusions.
pub(crate) fn possible(cond: &Cond, env: &Env) -> Possible {
    match cond {
        Cond::True => Possible::TRUE,
        Cond::False => Possible::FALSE,
        Cond::Atom(atom) => match fetch(&atom.attr, &atom.ty, env) {
            Ok(Fetched::Value(value)) => Possible::of(test(&value, &atom.test)),
            Ok(Fetched::Unknown) => Possible::ANY,
            Err(_) => Possible::ERROR,
        },
        Cond::And(items) | Cond::Or(items) => {
            let parts: Vec<Possible> = items.iter().map(|c| possible(c, env)).collect();
            let can_fail = parts.iter().any(|p| p.can_fail());
            // Without an error, every child must be able to evaluate.
            let all_can_succeed = parts.iter().all(|p| p.can_be_true() || p.can_be_false());
            if matches!(cond, Cond::And(_)) {
                let t = parts.iter().all(|p| p.can_be_true());
                let f = all_can_succeed && parts.iter().any(|p| p.can_be_false());
                Possible::from_flags(t, f, can_fail)
            } else {
                let t = all_can_succeed && parts.iter().any(|p| p.can_be_true());
                let f = parts.iter().all(|p| p.can_be_false());
                Possible::from_flags(t, f, can_fail)
            }
        }
    }
}

enum Fetched {
    Value(Value),
    /// A per-call value, while listing tools.
    Unknown,
}

/// Reads an attribute from the request.
fn fetch(attr: &Attr, ty: &Type, env: &Env) -> Result<Fetched, EvalError> {
    let request = env.request;
    let value = match attr {
        Attr::Arg(name) => {
            if env.listing {
                return Ok(Fetched::Unknown);
            }
            let json = request.call.as_ref().and_then(|c| c.argument(name)).ok_or(EvalError::Missing)?;
            let value = decode(json, ty, env.program)?;
            // Money is non-negative unless the parameter is `signed`: a negative amount is a mistyped argument.
            let signed = env.program.tools.get(env.tool).is_some_and(|t| t.is_signed(name));
            if !signed && negative(&value) {
                return Err(EvalError::WrongType);
            }
            value
        }
        Attr::Context(name) => {
            let value = decode(request.attributes.get(name).ok_or(EvalError::Missing)?, ty, env.program)?;
            // As for arguments: negative money is mistyped unless the attribute is declared `signed`.
            if !env.program.signed_contexts.contains(name) && negative(&value) {
                return Err(EvalError::WrongType);
            }
            value
        }
        Attr::ResourceId => match &request.resource_id {
            Some(id) => Value::String(id.clone()),
            None if env.listing => return Ok(Fetched::Unknown),
            None => return Err(EvalError::Missing),
        },
        Attr::Attempt => match request.attempt {
            Some(n) => Value::Number(n),
            None if env.listing => return Ok(Fetched::Unknown),
            None => return Err(EvalError::Missing),
        },
        Attr::SubjectId => Value::String(request.subject_id.clone()),
        Attr::SubjectScopes => {
            let scopes = request.scopes.as_ref().ok_or(EvalError::Missing)?;
            Value::Set(scopes.iter().cloned().map(Value::String).collect())
        }
        Attr::Now => Value::Timestamp(request.now),
        Attr::Level => Value::Level(env.program.tools.get(env.tool).ok_or(EvalError::Missing)?.level),
        Attr::Subject(name) => {
            let json = request.subject_properties.get(name).ok_or(EvalError::Missing)?;
            declared(json, ty, env.program.subject_attributes.get(name), env.program)?
        }
        Attr::Resource(name) => match request.resource_properties.get(name) {
            Some(json) => declared(json, ty, env.program.resource_attributes.get(name), env.program)?,
            // Listing tools before the call: the resource's attributes come with the call.
            None if env.listing => return Ok(Fetched::Unknown),
            None => return Err(EvalError::Missing),
        },
        // The principal's entry must be an object: anything else leaves every attribute of it missing, as an absent
        // one does (the gateway fills only objects; the runtime reads it the same way).
        Attr::Principal(name) => {
            let json = request.principal_attribute(env.principal, name).ok_or(EvalError::Missing)?;
            declared(json, ty, env.program.principal_attributes.get(name), env.program)?
        }
        // A template's parameter: the checked instance's value. No mandate reads one; should one be read without an
        // instance, it is mistyped (as the runtime reads an attribute code it does not know), so it fails closed.
        Attr::Param(name) => match env.instance {
            Some(instance) => instance.params.get(name).cloned().ok_or(EvalError::Missing)?,
            None => return Err(EvalError::WrongType),
        },
        // `parent.NAME` in a template under a template: the parent instance's value (checked before its child's
        // bounds and rules read it). Without a parent instance it is mistyped (fails closed), as a parameter
        // without an instance is.
        Attr::ParentParam(name) => match env.parent {
            Some(parent) => parent.params.get(name).cloned().ok_or(EvalError::Missing)?,
            None => return Err(EvalError::WrongType),
        },
        // Both sides are read, left first: the first error is the result, whatever the other side holds.
        Attr::Compare(left, op, right, operand_ty) => {
            let left = fetch(left, operand_ty, env)?;
            let right = fetch(right, operand_ty, env)?;
            let (Fetched::Value(left), Fetched::Value(right)) = (left, right) else { return Ok(Fetched::Unknown) };
            Value::Bool(compare(*op, &left, &right)?)
        }
        Attr::Member(item, set, item_ty) => {
            let item = fetch(item, item_ty, env)?;
            let set = fetch(set, &Type::Set(Box::new(item_ty.clone())), env)?;
            let (Fetched::Value(item), Fetched::Value(set)) = (item, set) else { return Ok(Fetched::Unknown) };
            Value::Bool(member(&item, self::set(&set)?)?)
        }
        Attr::Relation(name, terms) => {
            let mut values = Vec::with_capacity(terms.len());
            let mut unknown = false;
            for term in terms {
                match term {
                    Term::Value(text) => values.push(text.clone()),
                    Term::Attr(attr) => match fetch(attr, &Type::String, env)? {
                        Fetched::Value(Value::String(text)) => values.push(text),
                        Fetched::Value(_) => return Err(EvalError::WrongType),
                        Fetched::Unknown => unknown = true,
                    },
                }
            }
            if unknown {
                return Ok(Fetched::Unknown);
            }
            match holds(request, name, &values)? {
                Some(holds) => Value::Bool(holds),
                None if env.listing => return Ok(Fetched::Unknown),
                None => return Err(EvalError::Missing),
            }
        }
        Attr::InCalendar(name, instant) => {
            let Fetched::Value(Value::Timestamp(at)) = fetch(instant, &Type::Timestamp, env)? else {
                return Ok(Fetched::Unknown);
            };
            let def = env.program.calendars.get(name).ok_or(EvalError::Missing)?;
            let holidays = if def.calendar.closed_on_holidays() {
                match request.holidays.get(name) {
                    Some(listed) => Some(holiday_dates(listed)?),
                    None if env.listing => return Ok(Fetched::Unknown),
                    None => return Err(EvalError::Missing),
                }
            } else {
                None
            };
            match def.calendar.contains(&def.table, at, holidays.as_deref()) {
                Ok(inside) => Value::Bool(inside),
                Err(crate::time::TimeError::HolidaysMissing) => return Err(EvalError::Missing),
                // Outside the instants the policy carries the zone for: its local time is unknown here.
                Err(_) => return Err(EvalError::Incomparable),
            }
        }
        Attr::Elapsed(later, earlier, op, seconds) => {
            let later = fetch(later, &Type::Timestamp, env)?;
            let earlier = fetch(earlier, &Type::Timestamp, env)?;
            let (Fetched::Value(Value::Timestamp(later)), Fetched::Value(Value::Timestamp(earlier))) = (later, earlier)
            else {
                return Ok(Fetched::Unknown);
            };
            let between = crate::time::nanos_between(earlier, later).ok_or(EvalError::Incomparable)?;
            let order = crate::time::compare_nanos_to_seconds(between, *seconds);
            Value::Bool(match op {
                CompareOp::Eq => order == Ordering::Equal,
                CompareOp::Ne => order != Ordering::Equal,
                CompareOp::Lt => order == Ordering::Less,
                CompareOp::Le => order != Ordering::Greater,
                CompareOp::Gt => order == Ordering::Greater,
                CompareOp::Ge => order != Ordering::Less,
            })
        }
    };
    Ok(Fetched::Value(value))
}

/// A calendar's holidays as a request lists them: an array of local dates `YYYY-MM-DD`, sorted here (any item that
/// is not a date makes the whole list mistyped).
fn holiday_dates(listed: &Json) -> Result<Vec<crate::time::LocalDate>, EvalError> {
    let items = listed.as_array().ok_or(EvalError::WrongType)?;
    let mut dates = items
        .iter()
        .map(|item| item.as_str().and_then(crate::time::LocalDate::parse).ok_or(EvalError::WrongType))
        .collect::<Result<Vec<_>, _>>()?;
    dates.sort();
    dates.dedup();
    Ok(dates)
}

/// A declared subject or resource attribute's value: decoded by its type; negative money is mistyped unless the
/// attribute is declared `signed`.
fn declared(
    json: &Json,
    ty: &Type,
    declaration: Option<&EntityAttribute>,
    program: &Program,
) -> Result<Value, EvalError> {
    let value = decode(json, ty, program)?;
    if !declaration.is_some_and(|d| d.signed) && negative(&value) {
        return Err(EvalError::WrongType);
    }
    Ok(value)
}

/// What the request's `context.relations.NAME` says of the tuple `values`: `Some(holds)`, or `None` when it does
/// not list the tuple. The list must be well formed as a whole (an array of `{"args": [strings], "holds": bool}`)
/// and say one thing of each tuple: otherwise every question to the relation is mistyped (fails closed).
pub(crate) fn holds(
    request: &super::request::Request,
    name: &str,
    values: &[String],
) -> Result<Option<bool>, EvalError> {
    let Some(listed) = request.relations.get(name) else { return Ok(None) };
    let items = listed.as_array().ok_or(EvalError::WrongType)?;
    let mut answer = None;
    for item in items {
        let object = item.as_object().ok_or(EvalError::WrongType)?;
        let args = object.get("args").and_then(Json::as_array).ok_or(EvalError::WrongType)?;
        let held = object.get("holds").and_then(Json::as_bool).ok_or(EvalError::WrongType)?;
        let mut same = args.len() == values.len();
        for (arg, value) in args.iter().zip(values) {
            let arg = arg.as_str().ok_or(EvalError::WrongType)?;
            same &= arg == value;
        }
        // Every element must be a string, also past a mismatch: the whole list is checked.
        if args.iter().any(|a| !a.is_string()) {
            return Err(EvalError::WrongType);
        }
        if same {
            match answer {
                Some(previous) if previous != held => return Err(EvalError::WrongType),
                _ => answer = Some(held),
            }
        }
    }
    Ok(answer)
}

/// The attribute to blame when `attr` cannot be evaluated: for a comparison, membership or relation, its first
/// operand that fails (left to right), else the derived attribute itself (a relation's tuple the request does not
/// answer, money in two currencies).
pub(crate) fn culprit<'a>(attr: &'a Attr, ty: &Type, env: &Env) -> &'a Attr {
    match attr {
        Attr::Compare(left, _, right, operand_ty) => {
            for side in [left, right] {
                if fetch(side, operand_ty, env).is_err() {
                    return culprit(side, operand_ty, env);
                }
            }
            attr
        }
        Attr::Member(item, set, item_ty) => {
            if fetch(item, item_ty, env).is_err() {
                return culprit(item, item_ty, env);
            }
            let set_ty = Type::Set(Box::new(item_ty.clone()));
            if fetch(set, &set_ty, env).is_err() {
                return culprit(set, &set_ty, env);
            }
            attr
        }
        Attr::InCalendar(_, instant) => {
            if fetch(instant, &Type::Timestamp, env).is_err() {
                return culprit(instant, &Type::Timestamp, env);
            }
            attr
        }
        Attr::Elapsed(later, earlier, _, _) => {
            for side in [later, earlier] {
                if fetch(side, &Type::Timestamp, env).is_err() {
                    return culprit(side, &Type::Timestamp, env);
                }
            }
            attr
        }
        Attr::Relation(_, terms) => {
            for term in terms {
                if let Term::Attr(inner) = term {
                    if fetch(inner, &Type::String, env).is_err() {
                        return culprit(inner, &Type::String, env);
                    }
                }
            }
            attr
        }
        _ => {
            let _ = ty;
            attr
        }
    }
}

/// Decodes a JSON value of the request as `ty` (encodings: docs/requests.md).
pub(crate) fn decode(json: &Json, ty: &Type, program: &Program) -> Result<Value, EvalError> {
    let wrong = EvalError::WrongType;
    Ok(match ty {
        Type::String | Type::Kind(_) => Value::String(json.as_str().ok_or(wrong)?.to_string()),
        // A value outside the enum is a type error, not just an unequal string.
        Type::Enum(_, variants) => {
            let s = json.as_str().ok_or(wrong)?;
            if !variants.iter().any(|v| v == s) {
                return Err(wrong);
            }
            Value::String(s.to_string())
        }
        Type::Int => {
            let n = decimal_of_number(json.as_number().ok_or(wrong)?).ok_or(wrong)?;
            if n.0 % 10i128.pow(DECIMAL_SCALE) != 0 {
                return Err(wrong);
            }
            Value::Number(n)
        }
        Type::Decimal => Value::Number(match json {
            Json::Number(n) => decimal_of_number(n).ok_or(wrong)?,
            Json::String(s) => Decimal::parse(s).ok_or(wrong)?,
            _ => return Err(wrong),
        }),
        Type::Money => Value::Money(Money::parse(json.as_str().ok_or(wrong)?).ok_or(wrong)?),
        Type::Bool => Value::Bool(json.as_bool().ok_or(wrong)?),
        Type::Timestamp => Value::Timestamp(parse_instant(json.as_str().ok_or(wrong)?).ok_or(wrong)?),
        Type::Duration => {
            let seconds = match json {
                Json::Number(n) => n.as_u64().ok_or(wrong)?,
                Json::String(s) => parse_duration(s).ok_or(wrong)?,
                _ => return Err(wrong),
            };
            Value::Duration(i64::try_from(seconds).map_err(|_| wrong)?)
        }
        Type::Level => {
            let name = json.as_str().ok_or(wrong)?;
            Value::Level(program.levels.iter().position(|l| l == name).ok_or(wrong)?)
        }
        Type::Set(element) => {
            let items = json.as_array().ok_or(wrong)?;
            Value::Set(items.iter().map(|item| decode(item, element, program)).collect::<Result<_, _>>()?)
        }
    })
}

/// Whether a money value (or an element of a set of money) is below zero.
pub(crate) fn negative(value: &Value) -> bool {
    match value {
        Value::Money(money) => money.amount.0 < 0,
        Value::Set(items) => items.iter().any(negative),
        _ => false,
    }
}

/// A JSON number as an exact decimal: its text as written, `-?digits(.digits)?` with at most 24 integer and 9
/// fractional digits ([`Decimal::parse`]); exponent forms are not decimals. One rule, easy to reproduce in the
/// wasm backend.
pub(crate) fn decimal_of_number(n: &Number) -> Option<Decimal> {
    Decimal::parse(&n.to_string())
}

/// Applies a test to a value, as a condition applies it to an attribute's (the narrowing check folds a template's
/// parameters into constants with it); `None` when the test is an error.
pub(crate) fn constant_test(value: &Value, t: &Test) -> Option<bool> {
    test(value, t).ok()
}

/// `left OP right` of two values, as a comparison of two attributes evaluates it; `None` when it is an error.
pub(crate) fn constant_compare(op: CompareOp, left: &Value, right: &Value) -> Option<bool> {
    compare(op, left, right).ok()
}

/// Applies a test to an attribute's value.
fn test(value: &Value, test: &Test) -> Result<bool, EvalError> {
    match test {
        Test::Compare(op, operand) => compare(*op, value, operand),
        Test::In(items) => member(value, items),
        Test::NotIn(items) => member(value, items).map(|b| !b),
        Test::Under(prefix) => Ok(path(value)?.starts_with(prefix.as_str())),
        Test::NotUnder(prefix) => Ok(!path(value)?.starts_with(prefix.as_str())),
        Test::Contains(item) => member(item, set(value)?),
        Test::NotContains(item) => member(item, set(value)?).map(|b| !b),
        Test::Within(items) => within(set(value)?, items),
        Test::NotWithin(items) => within(set(value)?, items).map(|b| !b),
    }
}

fn text(value: &Value) -> Result<&str, EvalError> {
    match value {
        Value::String(s) => Ok(s),
        _ => Err(EvalError::Incomparable),
    }
}

/// The text of a value tested with `under`: a value that could name a place outside the prefix once a backend
/// normalises or decodes it cannot be tested, so the test is an error and fails closed (docs/language.md).
fn path(value: &Value) -> Result<&str, EvalError> {
    let text = text(value)?;
    if unsafe_path(text) {
        return Err(EvalError::UnsafePath);
    }
    Ok(text)
}

/// A backslash or NUL, an empty segment (`//`), a `.` or `..` segment, or a percent-encoded separator, dot, NUL or
/// percent (`%2f %5c %2e %00 %25`, either case).
pub(crate) fn unsafe_path(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    text.contains(['\\', '\0'])
        || text.contains("//")
        || ["%2f", "%5c", "%2e", "%00", "%25"].iter().any(|e| lower.contains(e))
        || text.split('/').any(|segment| segment == "." || segment == "..")
}

fn set(value: &Value) -> Result<&[Value], EvalError> {
    match value {
        Value::Set(items) => Ok(items),
        _ => Err(EvalError::Incomparable),
    }
}

fn compare(op: CompareOp, left: &Value, right: &Value) -> Result<bool, EvalError> {
    match op {
        CompareOp::Eq => equal(left, right),
        CompareOp::Ne => equal(left, right).map(|b| !b),
        CompareOp::Lt => Ok(order(left, right)? == Ordering::Less),
        CompareOp::Le => Ok(order(left, right)? != Ordering::Greater),
        CompareOp::Gt => Ok(order(left, right)? == Ordering::Greater),
        CompareOp::Ge => Ok(order(left, right)? != Ordering::Less),
    }
}

/// Equality of two values of the same kind. Money in different currencies is not comparable; sets are equal when
/// each contains the other.
fn equal(left: &Value, right: &Value) -> Result<bool, EvalError> {
    Ok(match (left, right) {
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => a == b,
        (Value::Money(a), Value::Money(b)) if a.currency == b.currency => a.amount == b.amount,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Timestamp(a), Value::Timestamp(b)) => a == b,
        (Value::Duration(a), Value::Duration(b)) => a == b,
        (Value::Level(a), Value::Level(b)) => a == b,
        (Value::Set(a), Value::Set(b)) => within(a, b)? && within(b, a)?,
        _ => return Err(EvalError::Incomparable),
    })
}

fn order(left: &Value, right: &Value) -> Result<Ordering, EvalError> {
    Ok(match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.cmp(b),
        (Value::Money(a), Value::Money(b)) if a.currency == b.currency => a.amount.cmp(&b.amount),
        (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
        (Value::Duration(a), Value::Duration(b)) => a.cmp(b),
        (Value::Level(a), Value::Level(b)) => a.cmp(b),
        _ => return Err(EvalError::Incomparable),
    })
}

/// Whether `value` equals one of `items`. A match decides; without one, an incomparable item is an error (it
/// might have been the match).
fn member(value: &Value, items: &[Value]) -> Result<bool, EvalError> {
    let mut failure = None;
    for item in items {
        match equal(value, item) {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) => failure = Some(e),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(false),
    }
}

/// Whether every element of `values` is one of `items`.
fn within(values: &[Value], items: &[Value]) -> Result<bool, EvalError> {
    let mut all = true;
    for value in values {
        all &= member(value, items)?;
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::request::{parse, Need};
    use crate::eval::tests::program;
    use crate::ir::Atom;

    fn request(json: &str) -> Request {
        parse(json.as_bytes(), Need::Call).expect("test request parses")
    }

    fn base(args: &str, attributes: &str) -> Request {
        request(&format!(
            r#"{{"subject":{{"id":"agent:a","credential":{{"scopes":["s1","s2"]}}}},
                "action":{{"name":"pay","arguments":{args}}},"resource":{{"id":"orders/7"}},
                "context":{{"mandate":"m","now":"2026-11-30T12:00:00Z","attempt":2,"attributes":{attributes}}}}}"#
        ))
    }

    fn atom(attr: Attr, ty: Type, test: Test) -> Cond {
        Cond::Atom(Atom { attr, ty, test })
    }

    fn arg(name: &str, ty: Type, test: Test) -> Cond {
        atom(Attr::Arg(name.into()), ty, test)
    }

    fn num(text: &str) -> Value {
        Value::Number(Decimal::parse(text).expect("test decimal"))
    }

    fn usd(text: &str) -> Value {
        Value::Money(Money::parse(text).expect("test money"))
    }

    fn run(cond: &Cond, req: &Request) -> Result<bool, EvalError> {
        let program = program();
        eval(
            cond,
            &Env {
                program: &program,
                request: req,
                tool: 0,
                listing: false,
                principal: "user:p",
                instance: None,
                parent: None,
            },
        )
    }

    #[test]
    fn compares_typed_arguments() {
        let req = base(
            r#"{"amount":"25.00 USD","n":3,"d":"1.50","f":2.5,"ok":true,"when":"2026-11-30T11:00:00Z","wait":"15m"}"#,
            "{}",
        );
        let le = |v| Test::Compare(CompareOp::Le, v);
        assert_eq!(run(&arg("amount", Type::Money, le(usd("100 USD"))), &req), Ok(true));
        assert_eq!(run(&arg("amount", Type::Money, le(usd("25 USD"))), &req), Ok(true));
        assert_eq!(run(&arg("amount", Type::Money, le(usd("24.99 USD"))), &req), Ok(false));
        assert_eq!(run(&arg("amount", Type::Money, le(usd("100 EUR"))), &req), Err(EvalError::Incomparable));
        assert_eq!(run(&arg("n", Type::Int, Test::Compare(CompareOp::Gt, num("2"))), &req), Ok(true));
        assert_eq!(run(&arg("d", Type::Decimal, Test::Compare(CompareOp::Eq, num("1.5"))), &req), Ok(true));
        assert_eq!(run(&arg("f", Type::Decimal, Test::Compare(CompareOp::Lt, num("2.51"))), &req), Ok(true));
        assert_eq!(run(&arg("ok", Type::Bool, Test::Compare(CompareOp::Eq, Value::Bool(true))), &req), Ok(true));
        let noon = Value::Timestamp(parse_instant("2026-11-30T12:00:00Z").expect("timestamp"));
        assert_eq!(run(&arg("when", Type::Timestamp, Test::Compare(CompareOp::Lt, noon.clone())), &req), Ok(true));
        assert_eq!(run(&atom(Attr::Now, Type::Timestamp, Test::Compare(CompareOp::Ge, noon.clone())), &req), Ok(true));
        // A fraction counts: half a second past noon is after noon, not equal to it; an offset is taken off.
        let at = |when: &str| base(&format!(r#"{{"when":"{when}"}}"#), "{}");
        let when = |op, v: &Value| arg("when", Type::Timestamp, Test::Compare(op, v.clone()));
        let half = at("2026-11-30T12:00:00.5Z");
        assert_eq!(run(&when(CompareOp::Gt, &noon), &half), Ok(true));
        assert_eq!(run(&when(CompareOp::Le, &noon), &half), Ok(false));
        assert_eq!(run(&when(CompareOp::Eq, &noon), &half), Ok(false));
        assert_eq!(run(&when(CompareOp::Eq, &noon), &at("2026-11-30T13:00:00.000+01:00")), Ok(true));
        assert_eq!(run(&when(CompareOp::Lt, &noon), &at("2026-11-30T11:59:59.999999999Z")), Ok(true));
        assert_eq!(run(&when(CompareOp::Eq, &noon), &at("2026-11-30T12:00:60Z")), Err(EvalError::WrongType));
        assert_eq!(
            run(&arg("wait", Type::Duration, Test::Compare(CompareOp::Eq, Value::Duration(900))), &req),
            Ok(true)
        );
        assert_eq!(run(&atom(Attr::Attempt, Type::Int, Test::Compare(CompareOp::Eq, num("2"))), &req), Ok(true));
    }

    #[test]
    fn missing_or_mistyped_attributes_are_errors() {
        let req = base(r#"{"n":"3","f":2.5,"s":1,"wait":"15 minutes","m":"25 usd"}"#, "{}");
        let eq = |v| Test::Compare(CompareOp::Eq, v);
        assert_eq!(run(&arg("absent", Type::String, eq(Value::String("x".into()))), &req), Err(EvalError::Missing));
        assert_eq!(run(&arg("n", Type::Int, eq(num("3"))), &req), Err(EvalError::WrongType));
        assert_eq!(run(&arg("f", Type::Int, eq(num("2"))), &req), Err(EvalError::WrongType));
        assert_eq!(run(&arg("s", Type::String, eq(Value::String("1".into()))), &req), Err(EvalError::WrongType));
        assert_eq!(run(&arg("wait", Type::Duration, eq(Value::Duration(900))), &req), Err(EvalError::WrongType));
        assert_eq!(run(&arg("m", Type::Money, eq(usd("25 USD"))), &req), Err(EvalError::WrongType));
        let ctx = atom(Attr::Context("region".into()), Type::String, eq(Value::String("eu".into())));
        assert_eq!(run(&ctx, &req), Err(EvalError::Missing));
        // Negated tests do not turn a missing value into a match.
        let not_in = arg("absent", Type::String, Test::NotIn(vec![Value::String("x".into())]));
        assert_eq!(run(&not_in, &req), Err(EvalError::Missing));
        let not_under = arg("absent", Type::String, Test::NotUnder("x".into()));
        assert_eq!(run(&not_under, &req), Err(EvalError::Missing));
    }

    #[test]
    fn an_error_anywhere_makes_the_condition_an_error() {
        let req = base(r#"{"to":"press@example.com"}"#, r#"{"region":"eu"}"#);
        let under = arg("to", Type::String, Test::Under("press@".into()));
        let missing = arg("absent", Type::String, Test::Under("x".into()));
        assert_eq!(run(&Cond::And(vec![Cond::False, missing.clone()]), &req), Err(EvalError::Missing));
        assert_eq!(run(&Cond::Or(vec![under.clone(), missing]), &req), Err(EvalError::Missing));
        assert_eq!(run(&Cond::And(vec![under.clone(), Cond::True]), &req), Ok(true));
        assert_eq!(run(&Cond::Or(vec![]), &req), Ok(false));
        assert_eq!(run(&Cond::And(vec![]), &req), Ok(true));
        let region = atom(Attr::Context("region".into()), Type::String, Test::In(vec![Value::String("eu".into())]));
        assert_eq!(run(&Cond::And(vec![under, region]), &req), Ok(true));
    }

    #[test]
    fn sets_and_enums() {
        let req = base(r#"{"tags":["a","b"],"channel":"sms","bad":"fax"}"#, "{}");
        let strings = |xs: &[&str]| xs.iter().map(|x| Value::String(x.to_string())).collect::<Vec<_>>();
        let set = Type::Set(Box::new(Type::String));
        assert_eq!(run(&arg("tags", set.clone(), Test::Contains(Value::String("a".into()))), &req), Ok(true));
        assert_eq!(run(&arg("tags", set.clone(), Test::NotContains(Value::String("a".into()))), &req), Ok(false));
        assert_eq!(run(&arg("tags", set.clone(), Test::Within(strings(&["a", "b", "c"]))), &req), Ok(true));
        assert_eq!(run(&arg("tags", set.clone(), Test::Within(strings(&["a"]))), &req), Ok(false));
        assert_eq!(run(&arg("tags", set.clone(), Test::NotWithin(strings(&["a"]))), &req), Ok(true));
        let same = Test::Compare(CompareOp::Eq, Value::Set(strings(&["b", "a", "a"])));
        assert_eq!(run(&arg("tags", set, same), &req), Ok(true));
        let scopes = Type::Set(Box::new(Type::String));
        let has = Test::Contains(Value::String("s2".into()));
        assert_eq!(run(&atom(Attr::SubjectScopes, scopes, has), &req), Ok(true));
        let channel = Type::Enum("channel".into(), vec!["email".into(), "sms".into()]);
        assert_eq!(run(&arg("channel", channel.clone(), Test::In(strings(&["sms"]))), &req), Ok(true));
        assert_eq!(run(&arg("bad", channel, Test::NotIn(strings(&["sms"]))), &req), Err(EvalError::WrongType));
        let under = Test::Under("orders/".into());
        assert_eq!(run(&atom(Attr::ResourceId, Type::String, under), &req), Ok(true));
    }

    #[test]
    fn membership_with_an_incomparable_item_is_an_error_unless_matched() {
        let req = base(r#"{"amount":"10 EUR"}"#, "{}");
        let found = Test::In(vec![usd("10 USD"), usd("10 EUR")]);
        assert_eq!(run(&arg("amount", Type::Money, found), &req), Ok(true));
        let not_found = Test::NotIn(vec![usd("10 USD"), usd("20 EUR")]);
        assert_eq!(run(&arg("amount", Type::Money, not_found), &req), Err(EvalError::Incomparable));
    }

    #[test]
    fn levels_compare_by_position() {
        let req = base("{}", "{}");
        let program = program();
        let env = Env {
            program: &program,
            request: &req,
            tool: 0,
            listing: false,
            principal: "user:p",
            instance: None,
            parent: None,
        };
        let at_most = |l| atom(Attr::Level, Type::Level, Test::Compare(CompareOp::Le, Value::Level(l)));
        let level = program.tools[0].level;
        assert_eq!(eval(&at_most(level), &env), Ok(true));
        assert_eq!(eval(&at_most(level - 1), &env), Ok(false));
    }

    #[test]
    fn json_numbers_become_exact_decimals() {
        let n = |text: &str| decimal_of_number(&serde_json::from_str::<Number>(text).expect("number"));
        assert_eq!(n("12"), Decimal::parse("12"));
        assert_eq!(n("-12.50"), Decimal::parse("-12.5"));
        assert_eq!(n("-0"), Decimal::parse("0"));
        assert_eq!(n("18446744073709551615"), Decimal::parse("18446744073709551615"));
        // Exponent forms and more than 9 fractional digits are not exact decimals here.
        assert_eq!(n("1e3"), None);
        assert_eq!(n("1.5e-7"), None);
        assert_eq!(n("0.1234567891"), None);
    }

    #[test]
    fn non_ascii_durations_are_wrong_types_not_panics() {
        let req = base(r#"{"wait":"1é"}"#, "{}");
        let cond = arg("wait", Type::Duration, Test::Compare(CompareOp::Eq, Value::Duration(1)));
        assert_eq!(run(&cond, &req), Err(EvalError::WrongType));
    }

    #[test]
    fn listing_treats_per_call_values_as_unknown() {
        let req = parse(
            br#"{"subject":{"id":"agent:a"},"context":{"mandate":"m","now":"2026-11-30T12:00:00Z"}}"#,
            Need::Listing,
        )
        .expect("listing request parses");
        let program = program();
        let env = Env {
            program: &program,
            request: &req,
            tool: 0,
            listing: true,
            principal: "user:p",
            instance: None,
            parent: None,
        };
        let on_arg = arg("to", Type::String, Test::Under("press@".into()));
        let on_ctx = atom(Attr::Context("region".into()), Type::String, Test::Under("eu".into()));
        let on_subject = atom(Attr::SubjectId, Type::String, Test::Under("agent:".into()));
        assert_eq!(possible(&on_arg, &env), Possible::ANY);
        assert_eq!(possible(&atom(Attr::ResourceId, Type::String, Test::Under("x".into())), &env), Possible::ANY);
        assert_eq!(possible(&on_ctx, &env), Possible::ERROR);
        assert_eq!(possible(&on_subject, &env), Possible::TRUE);
        // An error anywhere is possible; false under `and` once something is false; true under `or`.
        let and_false = possible(&Cond::And(vec![on_arg.clone(), Cond::False]), &env);
        assert!(!and_false.can_be_true() && and_false.can_be_false() && and_false.can_fail());
        let or_true = possible(&Cond::Or(vec![on_arg.clone(), on_subject.clone()]), &env);
        assert!(or_true.can_be_true() && !or_true.can_be_false() && or_true.can_fail());
        // A known error dominates: the condition can never be true or false.
        assert_eq!(possible(&Cond::Or(vec![on_arg, on_ctx]), &env), Possible::ERROR);
        assert_eq!(possible(&Cond::And(vec![on_subject, Cond::True]), &env), Possible::TRUE);
    }
}
