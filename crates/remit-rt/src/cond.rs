//! Conditions, the twin of `crates/remit-lang/src/eval/cond.rs`: a rule's condition read from the policy image (its [`Node`]s in
//! prefix order) and evaluated against a request read from its tape. Attributes are decoded by the type the checker
//! gave them ([`Type`]); a missing or wrongly typed attribute, or a comparison of values of different kinds, is an
//! error, and an error anywhere in a condition makes the whole condition an error ([`Truth::Error`]), so each caller
//! fails closed in its own direction. [`possible`] is the tool listing's question: the outcomes a condition may
//! still have while the per-call values are unknown.
//!
//! Attributes derived from others (a comparison of two attributes, membership in a set attribute, a relation
//! answered by the request's `context.relations`) read their operands, written attributes, one level deep: the first
//! operand that cannot be read is the error and the attribute a decision names ([`cause`]).
//!
//! Nothing allocates and nothing recurses: `and`/`or` nodes open frames on a fixed stack of [`MAX_COND_DEPTH`]
//! (the image writer refuses deeper conditions; a deeper or truncated condition in a corrupt image is an error), and
//! a frame counts the children still to come, so the stack's depth is the nesting, never the number of children.
//! Values are not copied out of the request: a string is its tape token, compared unescaped; a set is its array
//! token, its elements decoded again when a test walks them (sets of sets do not exist: the checker refuses them, and
//! an image that holds one reads as an error).

use core::cmp::Ordering;

use crate::image::{self, Image, Node, Tool, Type, Value, MAX_COND_DEPTH};
use crate::json::{Doc, ARRAY, FALSE, NUMBER, OBJECT, STRING, TRUE};
use crate::request::{elements, Request};
use crate::time;
use crate::value::{
    duration_of, parse_decimal, parse_money, parse_timestamp, DECIMAL_SCALE, MAX_NUMBER_TEXT, MAX_TIMESTAMP_TEXT,
};

/// The value of a condition: true, false, or an error (fail closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    False,
    True,
    Error,
}

impl Truth {
    pub fn of(b: bool) -> Truth {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }

    /// As the interpreter's trace writes it: `None` for an error.
    pub fn ok(self) -> Option<bool> {
        match self {
            Truth::False => Some(false),
            Truth::True => Some(true),
            Truth::Error => None,
        }
    }
}

/// A set of possible outcomes of a condition: true, false, error (`crates/remit-lang/src/eval/cond.rs`'s `Possible`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Possible(pub u8);

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

    /// The one outcome `truth`.
    pub fn of(truth: Truth) -> Possible {
        match truth {
            Truth::True => Possible::TRUE,
            Truth::False => Possible::FALSE,
            Truth::Error => Possible::ERROR,
        }
    }

    /// Whether `truth` is one of the outcomes.
    pub fn contains(self, truth: Truth) -> bool {
        self.0 & Possible::of(truth).0 != 0
    }

    fn from_flags(t: bool, f: bool, e: bool) -> Possible {
        Possible(u8::from(t) | u8::from(f) << 1 | u8::from(e) << 2)
    }
}

/// What a condition is evaluated against: the request (its document and what [`crate::request::parse`] read from
/// it) and the called tool (`level` reads its level; an argument's money may be negative when the tool's parameter
/// of that name is `signed`).
#[derive(Clone, Copy, Debug)]
pub struct Env<'e> {
    pub image: &'e Image<'e>,
    pub doc: &'e Doc<'e>,
    pub request: &'e Request,
    /// The called tool's record.
    pub tool: Tool,
    /// Tool listing: the call is not known yet (arguments are unknown, and so are the resource and the attempt when
    /// the request has none).
    pub listing: bool,
    /// The principal of the request's mandate chain, as text (`principal.NAME` reads its attributes).
    pub principal: &'e [u8],
    /// The instance of a template the request is decided under (a template's parameter reads its values).
    pub instance: Option<crate::request::Instance>,
    /// The instance `instance` hangs under (sub-delegation): `parent.NAME` reads its values.
    pub parent: Option<crate::request::Instance>,
}

impl<'e> Env<'e> {
    /// The environment of a call to (or a listing of) tool `tool` of `image`, under mandate record `mandate` (any
    /// of the chain: each carries its root's principal).
    pub fn new(
        image: &'e Image<'e>,
        doc: &'e Doc<'e>,
        request: &'e Request,
        tool: u32,
        listing: bool,
        mandate: &image::Mandate,
    ) -> Env<'e> {
        let principal = image.str(mandate.principal_text_off, mandate.principal_text_len);
        Env { image, doc, request, tool: image.tool(tool), listing, principal, instance: None, parent: None }
    }

    /// The object of the principal's attributes in `context.principals`, if the request has one.
    fn principal_attributes(&self) -> Option<u32> {
        self.request.principals.and_then(|principals| self.doc.get(principals, self.principal))
    }
}

/// One open `and`/`or`: the children still to come, and what those seen so far give.
#[derive(Clone, Copy, Debug)]
struct Frame {
    left: u32,
    and: bool,
    /// [`eval`]: the value so far; [`possible`]: the `ALL_*`/`ANY_*` bits.
    bits: u8,
}

impl Frame {
    const EMPTY: Frame = Frame { left: 0, and: false, bits: 0 };
}

/// Evaluates the condition of `cond_count` nodes from `cond_off` (a [`crate::image::Rule`]'s) against `env`
/// (whose image is `image`). An error anywhere is the result: an atom that fails ends the evaluation, since no
/// later child could change that.
pub fn eval(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Truth {
    let first = node(image, cond_off, 0);
    // Most conditions are one node: no stack for them.
    if cond_count == 1 && first.op != image::NODE_AND && first.op != image::NODE_OR {
        return leaf(image, first, env);
    }
    eval_nested(image, cond_off, cond_count, env)
}

fn node(image: &Image<'_>, cond_off: u32, i: u32) -> Node {
    Node::decode(image.bytes, Image::at(cond_off, Node::SIZE, i))
}

/// A node that is not `and`/`or`.
fn leaf(image: &Image<'_>, node: Node, env: &Env<'_>) -> Truth {
    match node.op {
        image::NODE_TRUE => Truth::True,
        image::NODE_FALSE => Truth::False,
        image::NODE_ATOM => match fetch(image, node.arg, env) {
            Fetched::Value(check, value) => test(image, env.doc, &check, value),
            Fetched::Unknown | Fetched::Failed(_) => Truth::Error,
        },
        _ => Truth::Error,
    }
}

/// Why an atom cannot be evaluated (`crates/remit-lang/src/eval/err.rs`'s `EvalError`): absent from the request.
pub const PROBLEM_MISSING: u32 = 0;
/// Present but not of the attribute's type.
pub const PROBLEM_MISTYPED: u32 = 1;
/// Not comparable with the operand (money in another currency).
pub const PROBLEM_INCOMPARABLE: u32 = 2;
/// A value tested with `under` that could leave its prefix.
pub const PROBLEM_UNSAFE_PATH: u32 = 3;

/// How a decision names a problem (`EvalError::code`).
pub fn problem_name(problem: u32) -> &'static [u8] {
    match problem {
        PROBLEM_MISSING => b"missing",
        PROBLEM_MISTYPED => b"mistyped",
        PROBLEM_INCOMPARABLE => b"incomparable",
        _ => b"unsafe-path",
    }
}

/// The first atom of a condition in prefix order (the image's node order: as written, left to right) that cannot
/// be evaluated, and why: `(atom offset, problem)`; `crates/remit-lang/src/eval/cond.rs`'s `cause`. [`eval`] gives an error exactly
/// when there is one (it evaluates every node and stops at the first error). A flat walk: prefix order needs no
/// stack.
pub fn cause(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Option<(u32, u32)> {
    let mut i = 0u32;
    while i < cond_count {
        let n = node(image, cond_off, i);
        i += 1;
        if n.op != image::NODE_ATOM {
            continue;
        }
        let problem = match fetch(image, n.arg, env) {
            Fetched::Value(check, value) => match test(image, env.doc, &check, value) {
                Truth::Error => test_problem(image, &check, value),
                _ => continue,
            },
            Fetched::Unknown => PROBLEM_MISSING,
            Fetched::Failed(problem) => problem,
        };
        return Some((culprit(image, n.arg, env), problem));
    }
    None
}

/// The record (an atom's or one of its operands') of the attribute to blame when atom `at` cannot be evaluated
/// (`crates/remit-lang/src/eval/cond.rs`'s `culprit`): for a derived attribute, its first operand that fails, left to
/// right; else the atom's own attribute (a relation's tuple the request does not answer, money in two currencies).
fn culprit(image: &Image<'_>, at: u32, env: &Env<'_>) -> u32 {
    let atom = image::Atom::decode(image.bytes, at);
    if is_derived(atom.attr) {
        for k in 0..atom.operands_count {
            let operand_at = image.word(atom.operands_off.wrapping_add(4 * k));
            let operand = Attribute::at(image, operand_at);
            if operand.attr != image::ATTR_TEXT && read_base(image, &operand, env).is_err() {
                return operand_at;
            }
        }
    }
    at
}

/// Why [`test`] failed on `value`: an `under` test of a string against a string prefix fails only on an unsafe
/// path; everything else that fails is incomparable.
fn test_problem(image: &Image<'_>, atom: &Check, value: Val) -> u32 {
    let under = atom.test == image::TEST_UNDER || atom.test == image::TEST_NOT_UNDER;
    let string_prefix =
        || Value::decode(image.bytes, Image::at(atom.values_off, Value::SIZE, 0)).tag == image::VALUE_STRING;
    if under && atom.values_count == 1 && matches!(value, Val::Str(_)) && string_prefix() {
        PROBLEM_UNSAFE_PATH
    } else {
        PROBLEM_INCOMPARABLE
    }
}

/// The number of nodes of the subtree at node `i` (prefix order) of a condition of `count` nodes.
fn subtree_len(image: &Image<'_>, cond_off: u32, i: u32, count: u32) -> u32 {
    let (mut pending, mut j) = (1u32, i);
    while pending > 0 && j < count {
        let n = node(image, cond_off, j);
        pending -= 1;
        if n.op == image::NODE_AND || n.op == image::NODE_OR {
            pending = pending.saturating_add(n.arg);
        }
        j += 1;
    }
    j - i
}

/// How far a condition that does not hold is from holding: how many of its top-level conjuncts (the children of a
/// root `and`, else the condition itself) are not true (`crates/remit-lang/src/eval/cond.rs`'s `distance`).
pub fn distance(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> u32 {
    let root = node(image, cond_off, 0);
    if cond_count == 0 || root.op != image::NODE_AND || root.arg == 0 {
        return 1;
    }
    let (mut i, mut k, mut count) = (1u32, 0u32, 0u32);
    while k < root.arg && i < cond_count {
        let len = subtree_len(image, cond_off, i, cond_count);
        if eval(image, Image::at(cond_off, Node::SIZE, i), len, env) != Truth::True {
            count += 1;
        }
        i += len;
        k += 1;
    }
    count
}

/// The atom (its offset) that makes a false condition false, following it down: an `and` to its first false
/// child, an `or` to its first child (`crates/remit-lang/src/eval/cond.rs`'s `failed_atom`). A loop over ever smaller subtrees: no
/// recursion.
pub fn failed_atom(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Option<u32> {
    let (mut off, mut count) = (cond_off, cond_count);
    while count > 0 {
        let n = node(image, off, 0);
        match n.op {
            image::NODE_ATOM => return Some(n.arg),
            image::NODE_AND if n.arg > 0 => {
                let (mut i, mut k) = (1u32, 0u32);
                let mut next = None;
                while k < n.arg && i < count {
                    let len = subtree_len(image, off, i, count);
                    let child = Image::at(off, Node::SIZE, i);
                    if eval(image, child, len, env) == Truth::False {
                        next = Some((child, len));
                        break;
                    }
                    i += len;
                    k += 1;
                }
                let (o, c) = next?;
                off = o;
                count = c;
            }
            image::NODE_OR if n.arg > 0 => {
                count = subtree_len(image, off, 1, count);
                off = Image::at(off, Node::SIZE, 1);
            }
            _ => return None,
        }
    }
    None
}

/// The record (atom `at`'s or one of its operands') of the attribute a closest grant's `failed` names and gives the
/// request's value of (`crates/remit-lang/src/eval/cond.rs`'s `failed_attribute`): a membership in a template's set
/// parameter (`args.merchant in merchants`, `args.merchant in parent.merchants`) names its item, as a membership in
/// a written set does; any other atom names its own attribute.
pub fn failed_attribute(image: &Image<'_>, at: u32) -> u32 {
    let atom = image::Atom::decode(image.bytes, at);
    if atom.attr == image::ATTR_MEMBER && atom.operands_count == 2 {
        let item = image.word(atom.operands_off);
        let set = image::Atom::decode(image.bytes, image.word(atom.operands_off.wrapping_add(4)));
        if set.attr == image::ATTR_PARAM || set.attr == image::ATTR_PARENT_PARAM {
            return item;
        }
    }
    at
}

/// The request's token of atom `at`'s attribute, for `args.*`, `context.*`, `resource.id`, `subject.id` and the
/// declared attributes of the subject, the resource and the principal.
pub fn value_token(image: &Image<'_>, at: u32, env: &Env<'_>) -> Option<u32> {
    let atom = image::Atom::decode(image.bytes, at);
    let name = image.str(atom.name_off, atom.name_len);
    let (doc, request) = (env.doc, env.request);
    match atom.attr {
        image::ATTR_ARG => request.call.and_then(|c| c.arguments).and_then(|args| doc.get(args, name)),
        image::ATTR_CONTEXT => request.attributes.and_then(|attrs| doc.get(attrs, name)),
        image::ATTR_RESOURCE_ID => request.resource_id,
        image::ATTR_SUBJECT_ID => Some(request.subject_id),
        image::ATTR_SUBJECT => request.subject_properties.and_then(|object| doc.get(object, name)),
        image::ATTR_RESOURCE => request.resource_properties.and_then(|object| doc.get(object, name)),
        image::ATTR_PRINCIPAL => env.principal_attributes().and_then(|object| doc.get(object, name)),
        _ => None,
    }
}

/// Writes the attribute of record `at` (an atom's or an operand's) as the policy writes it (`ir::Attr::display`),
/// as a JSON string: the image holds it so written.
pub fn write_attribute(out: &mut impl crate::Sink, image: &Image<'_>, at: u32) {
    let atom = image::Atom::decode(image.bytes, at);
    out.write(image.str(atom.attr_text_off, atom.attr_text_len));
}

/// Conditions nested at most this deep are evaluated on a small stack (a deeper one starts again on the full
/// [`MAX_COND_DEPTH`] stack): zeroing the full stack for every condition cost more than evaluating most of them.
const SHALLOW: usize = 16;

fn eval_nested(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Truth {
    match eval_on(&mut [Frame::EMPTY; SHALLOW], image, cond_off, cond_count, env) {
        Some(truth) => truth,
        None => eval_deep(image, cond_off, cond_count, env),
    }
}

#[inline(never)]
fn eval_deep(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Truth {
    eval_on(&mut [Frame::EMPTY; MAX_COND_DEPTH], image, cond_off, cond_count, env).unwrap_or(Truth::Error)
}

/// [`eval`] on `stack`; `None` when the condition nests deeper than the stack.
#[inline(never)]
fn eval_on(stack: &mut [Frame], image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Option<Truth> {
    let mut sp = 0usize;
    let mut i = 0u32;
    while i < cond_count {
        let n = node(image, cond_off, i);
        i += 1;
        let mut value = match n.op {
            image::NODE_AND | image::NODE_OR if n.arg > 0 => {
                let and = n.op == image::NODE_AND;
                match stack.get_mut(sp) {
                    Some(frame) => *frame = Frame { left: n.arg, and, bits: u8::from(and) },
                    None => return None,
                }
                sp += 1;
                continue;
            }
            // No children: `and` is true, `or` false.
            image::NODE_AND => true,
            image::NODE_OR => false,
            _ => match leaf(image, n, env) {
                Truth::True => true,
                Truth::False => false,
                Truth::Error => return Some(Truth::Error),
            },
        };
        // Close every frame this value completes.
        loop {
            if sp == 0 {
                // The root's value; nodes left over mean a corrupt image.
                return Some(if i == cond_count { Truth::of(value) } else { Truth::Error });
            }
            let frame = match stack.get_mut(sp - 1) {
                Some(frame) => frame,
                None => return Some(Truth::Error),
            };
            let b = frame.bits != 0;
            frame.bits = u8::from(if frame.and { b && value } else { b || value });
            frame.left -= 1;
            if frame.left > 0 {
                break;
            }
            value = frame.bits != 0;
            sp -= 1;
        }
    }
    // The nodes ran out before the root closed.
    Some(Truth::Error)
}

// The bits of a frame of [`possible`]: whether all its children so far can be true, can be false, can evaluate
// (true or false); whether any can be true, can be false, can fail.
const ALL_TRUE: u8 = 1;
const ALL_FALSE: u8 = 2;
const ALL_SUCCEED: u8 = 4;
const ANY_TRUE: u8 = 8;
const ANY_FALSE: u8 = 16;
const ANY_FAIL: u8 = 32;

/// The outcomes [`eval`] may give the condition once the unknown per-call values are known: an over-approximation
/// (atoms on the same unknown attribute are treated as independent) that is exact when nothing is unknown, as
/// `crates/remit-lang/src/eval/cond.rs`'s `possible`.
pub fn possible(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Possible {
    let first = node(image, cond_off, 0);
    if cond_count == 1 && first.op != image::NODE_AND && first.op != image::NODE_OR {
        return possible_leaf(image, first, env);
    }
    possible_nested(image, cond_off, cond_count, env)
}

fn possible_leaf(image: &Image<'_>, node: Node, env: &Env<'_>) -> Possible {
    match node.op {
        image::NODE_TRUE => Possible::TRUE,
        image::NODE_FALSE => Possible::FALSE,
        image::NODE_ATOM => match fetch(image, node.arg, env) {
            Fetched::Value(check, value) => Possible::of(test(image, env.doc, &check, value)),
            Fetched::Unknown => Possible::ANY,
            Fetched::Failed(_) => Possible::ERROR,
        },
        _ => Possible::ERROR,
    }
}

/// The outcomes of an `and` (or an `or`) whose children's outcomes gave `bits`.
fn close(and: bool, bits: u8) -> Possible {
    let all_succeed = bits & ALL_SUCCEED != 0;
    let fail = bits & ANY_FAIL != 0;
    if and {
        Possible::from_flags(bits & ALL_TRUE != 0, all_succeed && bits & ANY_FALSE != 0, fail)
    } else {
        Possible::from_flags(all_succeed && bits & ANY_TRUE != 0, bits & ALL_FALSE != 0, fail)
    }
}

#[inline(never)]
fn possible_nested(image: &Image<'_>, cond_off: u32, cond_count: u32, env: &Env<'_>) -> Possible {
    let mut stack = [Frame::EMPTY; MAX_COND_DEPTH];
    let mut sp = 0usize;
    let mut i = 0u32;
    const START: u8 = ALL_TRUE | ALL_FALSE | ALL_SUCCEED;
    while i < cond_count {
        let n = node(image, cond_off, i);
        i += 1;
        let mut value = match n.op {
            image::NODE_AND | image::NODE_OR if n.arg > 0 => {
                match stack.get_mut(sp) {
                    Some(frame) => *frame = Frame { left: n.arg, and: n.op == image::NODE_AND, bits: START },
                    None => return Possible::ERROR,
                }
                sp += 1;
                continue;
            }
            image::NODE_AND => close(true, START),
            image::NODE_OR => close(false, START),
            _ => possible_leaf(image, n, env),
        };
        loop {
            if sp == 0 {
                return if i == cond_count { value } else { Possible::ERROR };
            }
            let frame = match stack.get_mut(sp - 1) {
                Some(frame) => frame,
                None => return Possible::ERROR,
            };
            let (t, f, e) = (value.can_be_true(), value.can_be_false(), value.can_fail());
            let mut bits = frame.bits;
            if !t {
                bits &= !ALL_TRUE;
            }
            if !f {
                bits &= !ALL_FALSE;
            }
            if !(t || f) {
                bits &= !ALL_SUCCEED;
            }
            if t {
                bits |= ANY_TRUE;
            }
            if f {
                bits |= ANY_FALSE;
            }
            if e {
                bits |= ANY_FAIL;
            }
            frame.bits = bits;
            frame.left -= 1;
            if frame.left > 0 {
                break;
            }
            value = close(frame.and, bits);
            sp -= 1;
        }
    }
    Possible::ERROR
}

/// An attribute's value, read from the request (`crates/remit-lang/src/eval/cond.rs`'s `Value` of the attribute).
#[derive(Clone, Copy, Debug)]
enum Val {
    /// A string token of the request.
    Str(u32),
    /// An exact decimal (units of 10^-9).
    Num(i128),
    Money(i128, [u8; 3]),
    Bool(bool),
    /// Nanoseconds since the Unix epoch (a policy's timestamps are whole seconds, in nanoseconds too).
    Timestamp(i128),
    Duration(i64),
    Level(i128),
    /// An array token of the request, every element of which decodes as the element type.
    Set(u32, Type),
}

enum Fetched {
    /// The value, and the atom's test to apply to it.
    Value(Check, Val),
    /// A per-call value, while listing tools.
    Unknown,
    /// Not evaluable: [`PROBLEM_MISSING`] (absent from the request), [`PROBLEM_MISTYPED`] (present but not of the
    /// attribute's type, or negative money where it may not be) or [`PROBLEM_INCOMPARABLE`] (a derived attribute's
    /// operands that cannot be compared: money in two currencies).
    Failed(u32),
}

/// The type of the elements of `subject.scopes`.
const STRINGS: Type = Type { code: image::TYPE_STRING, variants_off: 0, variants_count: 0, element: 0 };

/// What [`test`] needs of an atom's record: its test and the operand's constants, three of the record's twenty
/// words. A fetched value carries this, not the whole [`image::Atom`]: every atom's fetch returned the record,
/// twenty words copied to be read three.
#[derive(Clone, Copy, Debug)]
struct Check {
    test: u32,
    values_off: u32,
    values_count: u32,
}

impl Check {
    #[inline(always)]
    fn of(atom: &image::Atom) -> Check {
        Check { test: atom.test, values_off: atom.values_off, values_count: atom.values_count }
    }
}

/// What reading a written attribute needs of its record (an atom's, or a derived attribute's operand's): the five
/// words of an [`image::Atom`] that say where the value is and how it is read. An operand is read as this, not as a
/// whole `Atom`: its other fields are unused, and a whole record decoded and passed around is twenty words copied.
#[derive(Clone, Copy, Debug)]
struct Attribute {
    attr: u32,
    name_off: u32,
    name_len: u32,
    ty: u32,
    signed: u32,
}

impl Attribute {
    #[inline(always)]
    fn of(atom: &image::Atom) -> Attribute {
        Attribute {
            attr: atom.attr,
            name_off: atom.name_off,
            name_len: atom.name_len,
            ty: atom.ty,
            signed: atom.signed,
        }
    }

    /// The attribute of the record at `at` (inlined, only its five words are read).
    #[inline(always)]
    fn at(image: &Image<'_>, at: u32) -> Attribute {
        Attribute::of(&image::Atom::decode(image.bytes, at))
    }
}

/// Reads atom `at`'s attribute from the request (`crates/remit-lang/src/eval/cond.rs`'s `fetch`).
fn fetch(image: &Image<'_>, at: u32, env: &Env<'_>) -> Fetched {
    let atom = image::Atom::decode(image.bytes, at);
    let read = if is_derived(atom.attr) {
        read_derived(image, &atom, env)
    } else {
        read_base(image, &Attribute::of(&atom), env)
    };
    match read {
        Ok(Some(value)) => Fetched::Value(Check::of(&atom), value),
        Ok(None) => Fetched::Unknown,
        Err(problem) => Fetched::Failed(problem),
    }
}

/// Whether an attribute code is of an attribute derived from others.
fn is_derived(attr: u32) -> bool {
    matches!(
        attr,
        image::ATTR_COMPARE | image::ATTR_MEMBER | image::ATTR_RELATION | image::ATTR_IN_CALENDAR | image::ATTR_ELAPSED
    )
}

/// Reads the written attribute of record `atom` (an atom's or an operand's) as its type: `Ok(None)` for a per-call
/// value while listing, `Err` with the problem when it cannot be read. A derived attribute is never an operand: read
/// here it is mistyped.
fn read_base(image: &Image<'_>, atom: &Attribute, env: &Env<'_>) -> Result<Option<Val>, u32> {
    let doc = env.doc;
    let request = env.request;
    let name = image.str(atom.name_off, atom.name_len);
    // The declared attributes (arguments, context attributes, the subject's, the resource's and the principal's):
    // their object, then one read of the name in it, inline. (A read per kind, each through a closure, had the
    // properties' reads take a call the arguments' did not.)
    let object = match atom.attr {
        image::ATTR_ARG if env.listing => return Ok(None),
        image::ATTR_ARG => request.call.and_then(|c| c.arguments),
        image::ATTR_CONTEXT => request.attributes,
        image::ATTR_SUBJECT => request.subject_properties,
        // An entry that is not an object has no attributes: missing, as an absent one (the interpreter's reading).
        image::ATTR_PRINCIPAL => env.principal_attributes(),
        // Listing tools before the call: the resource's attributes come with the call.
        image::ATTR_RESOURCE
            if env.listing && request.resource_properties.and_then(|object| doc.get(object, name)).is_none() =>
        {
            return Ok(None)
        }
        image::ATTR_RESOURCE => request.resource_properties,
        _ => return read_fixed(image, atom, env),
    };
    // Money is non-negative unless the attribute is declared `signed` (an argument: the tool's parameter of its
    // name): a negative amount is a mistyped attribute.
    let signed = || if atom.attr == image::ATTR_ARG { signed_param(image, &env.tool, name) } else { atom.signed != 0 };
    declared(image, doc, atom, object, signed).map(Some)
}

/// [`read_base`] of an attribute that is not declared: the request's fixed fields, a template's parameters, the
/// tool's level.
#[inline(always)]
fn read_fixed(image: &Image<'_>, atom: &Attribute, env: &Env<'_>) -> Result<Option<Val>, u32> {
    let doc = env.doc;
    let request = env.request;
    let name = image.str(atom.name_off, atom.name_len);
    let value = match atom.attr {
        image::ATTR_RESOURCE_ID => match request.resource_id {
            Some(id) => Val::Str(id),
            None if env.listing => return Ok(None),
            None => return Err(PROBLEM_MISSING),
        },
        image::ATTR_ATTEMPT => match request.attempt {
            Some(n) => Val::Num(n),
            None if env.listing => return Ok(None),
            None => return Err(PROBLEM_MISSING),
        },
        image::ATTR_SUBJECT_ID => Val::Str(request.subject_id),
        image::ATTR_SUBJECT_SCOPES => match request.scopes {
            Some(scopes) => Val::Set(scopes, STRINGS),
            None => return Err(PROBLEM_MISSING),
        },
        image::ATTR_NOW => Val::Timestamp(request.now),
        // A template's parameter: the instance's value (checked before any condition reads it), or its implicit
        // `principal`, `holder` and `granted`; mistyped without an instance (`eval::cond`'s reading).
        image::ATTR_PARAM => {
            let instance = env.instance.ok_or(PROBLEM_MISTYPED)?;
            let grant = instance.grant;
            match doc.get(grant.params, name) {
                Some(json) => decode(image, doc, json, &Type::decode(image.bytes, atom.ty)).ok_or(PROBLEM_MISTYPED)?,
                None if name == b"principal" => Val::Str(grant.principal),
                None if name == b"holder" => Val::Str(grant.holder),
                None if name == b"granted" => Val::Timestamp(instance.granted),
                None => return Err(PROBLEM_MISSING),
            }
        }
        // `parent.NAME`: the parent instance's value, read as a parameter is (`eval::cond`'s reading).
        image::ATTR_PARENT_PARAM => {
            let parent = env.parent.ok_or(PROBLEM_MISTYPED)?;
            let grant = parent.grant;
            match doc.get(grant.params, name) {
                Some(json) => decode(image, doc, json, &Type::decode(image.bytes, atom.ty)).ok_or(PROBLEM_MISTYPED)?,
                None if name == b"principal" => Val::Str(grant.principal),
                None if name == b"holder" => Val::Str(grant.holder),
                None if name == b"granted" => Val::Timestamp(parent.granted),
                None => return Err(PROBLEM_MISSING),
            }
        }
        image::ATTR_LEVEL => Val::Level(i128::from(env.tool.level)),
        _ => return Err(PROBLEM_MISTYPED),
    };
    Ok(Some(value))
}

/// The value of the attribute of record `atom` in the request's object `object` (arguments, context attributes,
/// properties), by its name: missing when absent, mistyped when not of its type or when its money is negative and
/// `signed` (asked only then: for an argument it is the tool's parameter's) says no.
#[inline(always)]
fn declared(
    image: &Image<'_>,
    doc: &Doc<'_>,
    atom: &Attribute,
    object: Option<u32>,
    signed: impl Fn() -> bool,
) -> Result<Val, u32> {
    let name = image.str(atom.name_off, atom.name_len);
    let json = object.and_then(|object| doc.get(object, name)).ok_or(PROBLEM_MISSING)?;
    let value = decode(image, doc, json, &Type::decode(image.bytes, atom.ty)).ok_or(PROBLEM_MISTYPED)?;
    if negative(image, doc, &value) && !signed() {
        return Err(PROBLEM_MISTYPED);
    }
    Ok(value)
}

/// The attribute of operand `k` of the derived attribute `atom`.
#[inline(always)]
fn operand(image: &Image<'_>, atom: &image::Atom, k: u32) -> Attribute {
    Attribute::at(image, image.word(atom.operands_off.wrapping_add(4 * k)))
}

/// Reads a derived attribute (a comparison, a membership, a relation), a bool, from its operands: each is read in
/// order, and the first that cannot be read is the result whatever the others hold; an unknown operand (listing)
/// makes the attribute unknown.
fn read_derived(image: &Image<'_>, atom: &image::Atom, env: &Env<'_>) -> Result<Option<Val>, u32> {
    let c = Cmp { image, doc: env.doc };
    let b = match atom.attr {
        image::ATTR_COMPARE if atom.operands_count == 2 => {
            let left = read_base(image, &operand(image, atom, 0), env)?;
            let right = read_base(image, &operand(image, atom, 1), env)?;
            let (left, right) = match (left, right) {
                (Some(left), Some(right)) => (left, right),
                _ => return Ok(None),
            };
            let result = match atom.op {
                image::TEST_EQ => c.equal_vals(left, right),
                image::TEST_NE => c.equal_vals(left, right).map(|b| !b),
                image::TEST_LT => c.order_vals(left, right).map(|o| o == Ordering::Less),
                image::TEST_LE => c.order_vals(left, right).map(|o| o != Ordering::Greater),
                image::TEST_GT => c.order_vals(left, right).map(|o| o == Ordering::Greater),
                image::TEST_GE => c.order_vals(left, right).map(|o| o != Ordering::Less),
                _ => return Err(PROBLEM_MISTYPED),
            };
            result.map_err(|()| PROBLEM_INCOMPARABLE)?
        }
        image::ATTR_MEMBER if atom.operands_count == 2 => {
            let item = read_base(image, &operand(image, atom, 0), env)?;
            let set = read_base(image, &operand(image, atom, 1), env)?;
            match (item, set) {
                (Some(item), Some(Val::Set(array, element))) => {
                    c.member_of_request_set(item, array, &element).map_err(|()| PROBLEM_INCOMPARABLE)?
                }
                (Some(_), Some(_)) => return Err(PROBLEM_INCOMPARABLE),
                _ => return Ok(None),
            }
        }
        image::ATTR_RELATION => match relation(image, atom, env)? {
            Some(b) => b,
            None => return Ok(None),
        },
        image::ATTR_IN_CALENDAR if atom.operands_count == 1 => {
            let instant = match read_base(image, &operand(image, atom, 0), env)? {
                Some(Val::Timestamp(instant)) => instant,
                _ => return Ok(None),
            };
            match in_calendar(image, atom, env, instant)? {
                Some(b) => b,
                None => return Ok(None),
            }
        }
        image::ATTR_ELAPSED if atom.operands_count == 2 => {
            let later = read_base(image, &operand(image, atom, 0), env)?;
            let earlier = read_base(image, &operand(image, atom, 1), env)?;
            let (later, earlier) = match (later, earlier) {
                (Some(Val::Timestamp(later)), Some(Val::Timestamp(earlier))) => (later, earlier),
                _ => return Ok(None),
            };
            let between = time::nanos_between(earlier, later).ok_or(PROBLEM_INCOMPARABLE)?;
            let order = time::compare_nanos_to_seconds(between, image::join64(atom.seconds_lo, atom.seconds_hi));
            match atom.op {
                image::TEST_EQ => order == Ordering::Equal,
                image::TEST_NE => order != Ordering::Equal,
                image::TEST_LT => order == Ordering::Less,
                image::TEST_LE => order != Ordering::Greater,
                image::TEST_GT => order == Ordering::Greater,
                image::TEST_GE => order != Ordering::Less,
                _ => return Err(PROBLEM_MISTYPED),
            }
        }
        _ => return Err(PROBLEM_MISTYPED),
    };
    Ok(Some(Val::Bool(b)))
}

/// Whether `instant` is in the calendar of atom `atom` (`crates/remit-lang/src/eval/cond.rs`'s `InCalendar` arm):
/// `Ok(None)` while listing without the calendar's holidays. The tables are read where the atom needs them: the zone
/// table as a view (its layout checked in constant time, the offset found by binary search: the image is never
/// trusted blindly, but a corrupt one may decide wrongly, as everywhere else), the hours decoded and checked (a few
/// intervals, all of which membership reads anyway); the holidays of a calendar `closed on holidays` are read from `context.holidays.NAME` and checked whole
/// before the instant's local time is asked for, as the interpreter does: a list that is not an array of dates is
/// mistyped, an absent one missing (whatever the instant), an instant outside the zone table incomparable.
///
/// The holidays are not collected: the list is scanned once, each item parsed and compared with the instant's local
/// date (a sorted set in the interpreter, the same membership), so any number of them is read without a buffer and
/// in time linear in the request.
fn in_calendar(image: &Image<'_>, atom: &image::Atom, env: &Env<'_>, instant: i128) -> Result<Option<bool>, u32> {
    let record = image.calendar(atom.calendar);
    let table = time::ZoneTable::view(image.str(record.table_off, record.table_len)).ok_or(PROBLEM_MISTYPED)?;
    let calendar = time::Calendar::decode(image.str(record.hours_off, record.hours_len)).ok_or(PROBLEM_MISTYPED)?;
    let parts = table.local_parts(instant);
    let mut on_holiday = None;
    if calendar.closed_on_holidays() {
        let doc = env.doc;
        let name = image.str(record.name_off, record.name_len);
        let listed = match env.request.holidays.and_then(|holidays| doc.get(holidays, name)) {
            Some(listed) => listed,
            None if env.listing => return Ok(None),
            None => return Err(PROBLEM_MISSING),
        };
        if doc.token(listed).kind() != ARRAY {
            return Err(PROBLEM_MISTYPED);
        }
        let mut found = false;
        for item in elements(doc, listed) {
            if doc.token(item).kind() != STRING {
                return Err(PROBLEM_MISTYPED);
            }
            let mut buf = [0u8; DATE_TEXT];
            let day = unescaped(doc, item, &mut buf).and_then(time::parse_date).ok_or(PROBLEM_MISTYPED)?;
            found |= parts.map_or(false, |parts| parts.day_number == day);
        }
        on_holiday = Some(found);
    }
    let parts = parts.ok_or(PROBLEM_INCOMPARABLE)?;
    match calendar.contains_local(&parts, on_holiday) {
        Ok(inside) => Ok(Some(inside)),
        Err(time::TimeError::HolidaysMissing) => Err(PROBLEM_MISSING),
        Err(time::TimeError::OutsideTable) => Err(PROBLEM_INCOMPARABLE),
    }
}

/// Bytes of a date a holiday list writes, `YYYY-MM-DD`.
const DATE_TEXT: usize = 10;

/// A relation's term as it is compared with the listed tuples' strings: its bytes (a constant of the image, or a
/// string of the request without an escape, whose raw bytes are its text), or a string token of the request with
/// an escape (compared unescaped).
#[derive(Clone, Copy, Debug)]
enum Text<'t> {
    Bytes(&'t [u8]),
    Token(u32),
}

impl Text<'_> {
    const EMPTY: Text<'static> = Text::Bytes(&[]);
}

/// The text of a relation's term (operand record `term`): `Ok(None)` when unknown (listing); a value that is not a
/// string is mistyped.
#[inline(always)]
fn term<'t>(image: &Image<'t>, term: &Attribute, env: &Env<'t>) -> Result<Option<Text<'t>>, u32> {
    let token = if term.attr == image::ATTR_TEXT {
        return Ok(Some(Text::Bytes(image.str(term.name_off, term.name_len))));
    } else if term.attr == image::ATTR_SUBJECT_ID {
        // `subject`, the most common term besides a constant: its id, as [`read_base`] reads it, without a [`Val`].
        env.request.subject_id
    } else {
        match read_base(image, term, env)? {
            Some(Val::Str(tok)) => tok,
            Some(_) => return Err(PROBLEM_MISTYPED),
            None => return Ok(None),
        }
    };
    Ok(Some(match env.doc.plain(token) {
        Some(raw) => Text::Bytes(raw),
        None => Text::Token(token),
    }))
}

/// Reads relation atom `atom` (`crates/remit-lang/src/eval/cond.rs`'s `Relation` arm): its terms in order (the first
/// that cannot be read is the result; an unknown one makes the atom unknown), then what `context.relations.NAME`
/// says of their tuple ([`holds`]). A relation of at most two terms (nearly all: `owns(principal, resource)`,
/// `member_of(subject, "team:…")`) keeps them in two locals; a longer one keeps its first
/// [`image::RELATION_TERMS_KEPT`] in an array, and reads the later ones again for each listed tuple.
fn relation(image: &Image<'_>, atom: &image::Atom, env: &Env<'_>) -> Result<Option<bool>, u32> {
    let count = atom.operands_count;
    let answer = if count <= 2 {
        let mut pair = [Text::EMPTY; 2];
        let mut unknown = false;
        for (k, slot) in (0..count).zip(pair.iter_mut()) {
            match term(image, &operand(image, atom, k), env)? {
                Some(text) => *slot = text,
                None => unknown = true,
            }
        }
        if unknown {
            return Ok(None);
        }
        let [first, second] = pair;
        holds(image, atom, env, |k| if k == 0 { first } else { second })
    } else {
        // Each slot is written once, as its term is read (a kept array filled first and written again was a 96-byte
        // fill); after a term that cannot be read, none is (the first such term is the result).
        let (mut unknown, mut failed) = (false, None);
        let kept: [Text; image::RELATION_TERMS_KEPT] = core::array::from_fn(|k| {
            let k = k as u32;
            if k >= count || failed.is_some() {
                return Text::EMPTY;
            }
            match term(image, &operand(image, atom, k), env) {
                Ok(Some(text)) => text,
                Ok(None) => {
                    unknown = true;
                    Text::EMPTY
                }
                Err(problem) => {
                    failed = Some(problem);
                    Text::EMPTY
                }
            }
        });
        if let Some(problem) = failed {
            return Err(problem);
        }
        for k in image::RELATION_TERMS_KEPT as u32..count {
            if term(image, &operand(image, atom, k), env)?.is_none() {
                unknown = true;
            }
        }
        if unknown {
            return Ok(None);
        }
        holds(image, atom, env, |k| match kept.get(k as usize) {
            Some(&text) => text,
            None => match term(image, &operand(image, atom, k), env) {
                Ok(Some(text)) => text,
                _ => Text::EMPTY,
            },
        })
    };
    match answer {
        Err(()) => Err(PROBLEM_MISTYPED),
        Ok(Some(b)) => Ok(Some(b)),
        Ok(None) if env.listing => Ok(None),
        Ok(None) => Err(PROBLEM_MISSING),
    }
}

/// What the request's `context.relations.NAME` says of the tuple of relation atom `atom`'s terms, term `k` being
/// `text_of(k)` (all of which read as strings, as [`relation`] read them): `Ok(Some(holds))`, `Ok(None)` when it
/// does not list the tuple, `Err` when the list is not an array of `{"args": [strings], "holds": bool}` or says two
/// things of the tuple (`crates/remit-lang/src/eval/cond.rs`'s `holds`: every item is checked, also after an answer
/// is found).
#[inline(always)]
fn holds<'t>(
    image: &Image<'t>,
    atom: &image::Atom,
    env: &Env<'t>,
    text_of: impl Fn(u32) -> Text<'t>,
) -> Result<Option<bool>, ()> {
    let doc = env.doc;
    let name = image.str(atom.name_off, atom.name_len);
    let listed = match env.request.relations.and_then(|relations| doc.get(relations, name)) {
        Some(listed) => listed,
        None => return Ok(None),
    };
    if doc.token(listed).kind() != ARRAY {
        return Err(());
    }
    let count = atom.operands_count;
    let mut answer = None;
    for item in elements(doc, listed) {
        let (args, held) = tuple_fields(doc, item).ok_or(())?;
        let (mut same, mut k) = (true, 0u32);
        for arg in elements(doc, args) {
            if doc.token(arg).kind() != STRING {
                return Err(());
            }
            if same {
                same = k < count
                    && match text_of(k) {
                        Text::Bytes(bytes) => doc.text_is(arg, bytes),
                        Text::Token(tok) => doc.text_eq(arg, tok),
                    };
            }
            k = k.saturating_add(1);
        }
        if same && k == count {
            if answer.map_or(false, |previous| previous != held) {
                return Err(());
            }
            answer = Some(held);
        }
    }
    Ok(answer)
}

/// A listed tuple `item` of `context.relations.NAME`: its `args` (an array token) and `holds` (a bool), or `None`
/// when it is not an object with both so typed. One pass over its keys, each compared inline by its length and
/// bytes (the keys of a parsed object are distinct; an escaped key is compared unescaped): two [`Doc::get`]s were
/// two searches with a call per matching key, for every listed tuple.
#[inline(always)]
fn tuple_fields(doc: &Doc<'_>, item: u32) -> Option<(u32, bool)> {
    let object = doc.token(item);
    if object.kind() != OBJECT {
        return None;
    }
    let (mut args, mut held) = (None, None);
    let mut k = item + 1;
    while k < object.next {
        let key = doc.token(k);
        let (is_args, is_holds) = match doc.plain(k) {
            Some(raw) => {
                // The first four bytes as one word (slice `==` is a `memcmp` call on wasm32).
                let head = raw.get(..4).and_then(|h| <[u8; 4]>::try_from(h).ok()).map(u32::from_le_bytes);
                let is = |word: &[u8; 4], len: usize| raw.len() == len && head == Some(u32::from_le_bytes(*word));
                (is(b"args", 4), is(b"hold", 5) && raw.get(4) == Some(&b's'))
            }
            None => (doc.text(k).eq(b"args".iter().copied()), doc.text(k).eq(b"holds".iter().copied())),
        };
        if is_args {
            args = Some(key.next);
        } else if is_holds {
            held = Some(key.next);
        }
        // The key's value, then the next key (`max`: always forward, on any tape).
        k = doc.token(key.next).next.max(k + 1);
    }
    let args = args.filter(|&a| doc.token(a).kind() == ARRAY)?;
    let held = match held.map(|h| doc.token(h).kind()) {
        Some(TRUE) => true,
        Some(FALSE) => false,
        _ => return None,
    };
    Some((args, held))
}

/// Whether the request's subject holds the mandate (`eval::is_holder`): one of its ids, or under one of its
/// `holder under` prefixes with `under`'s meaning (an id that could leave its prefix is under nothing).
pub fn is_holder(image: &Image<'_>, doc: &Doc<'_>, mandate: &image::Mandate, subject: u32) -> bool {
    let ids = (mandate.holders_off, mandate.holders_count);
    holds_identity(image, doc, ids, (mandate.holder_prefixes_off, mandate.holder_prefixes_count), subject)
}

/// Whether the string token `identity` is one of the [`Str`](image::Str) records `ids` (offset, count), or under one
/// of the records `prefixes` with `under`'s meaning: the twin of `eval::holds`, for holders and approvers alike.
pub fn holds_identity(image: &Image<'_>, doc: &Doc<'_>, ids: (u32, u32), prefixes: (u32, u32), identity: u32) -> bool {
    if (0..ids.1).any(|i| doc.text_is(identity, image.str_at(ids.0, i))) {
        return true;
    }
    prefixes.1 > 0
        && !unsafe_path(doc.text(identity))
        && (0..prefixes.1).any(|i| starts_with(doc.text(identity), image.str_at(prefixes.0, i)))
}

/// Whether the request's value `tok` is of the type record at `ty` and, unless `signed`, not negative money: a
/// template parameter's value (`eval::grants::check`).
pub fn param_ok(image: &Image<'_>, doc: &Doc<'_>, tok: u32, ty: u32, signed: bool) -> bool {
    match decode(image, doc, tok, &Type::decode(image.bytes, ty)) {
        Some(value) => signed || !negative(image, doc, &value),
        None => false,
    }
}

/// Whether the tool's parameter `name` is declared `signed` (`ir::Tool::is_signed`; an undeclared name is not).
fn signed_param(image: &Image<'_>, tool: &Tool, name: &[u8]) -> bool {
    image.param(tool, |p| crate::same_bytes(p, name)).map_or(false, |p| p.signed != 0)
}

/// Whether a money value (or an element of a set of money) is below zero. Inline: every declared attribute read
/// asks, and nearly every answer is a tag test.
#[inline(always)]
fn negative(image: &Image<'_>, doc: &Doc<'_>, value: &Val) -> bool {
    match *value {
        Val::Money(amount, _) => amount < 0,
        Val::Set(array, element) if element.code == image::TYPE_MONEY => negative_element(image, doc, array, &element),
        _ => false,
    }
}

/// Whether an element of the request's set of money `array` is below zero.
fn negative_element(image: &Image<'_>, doc: &Doc<'_>, array: u32, element: &Type) -> bool {
    elements(doc, array).any(|item| matches!(decode(image, doc, item, element), Some(Val::Money(a, _)) if a < 0))
}

/// The unescaped content of the string token `tok` (in `buf` when it has an escape), when it fits `buf`.
fn unescaped<'b>(doc: &Doc<'b>, tok: u32, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    // Without an escape the raw bytes are the text (no copy), within the same bound.
    if let Some(raw) = doc.plain(tok) {
        return (raw.len() <= buf.len()).then_some(raw);
    }
    let mut len = 0;
    for byte in doc.text(tok) {
        *buf.get_mut(len)? = byte;
        len += 1;
    }
    buf.get(..len)
}

/// Whether `list` (of [`image::Str`] records from `off`) holds the string token `tok`; its position.
fn position(image: &Image<'_>, doc: &Doc<'_>, tok: u32, off: u32, count: u32) -> Option<u32> {
    (0..count).find(|&i| doc.text_is(tok, image.str_at(off, i)))
}

/// Decodes the request's value `tok` as `ty` (`crates/remit-lang/src/eval/cond.rs`'s `decode`; encodings: docs/requests.md); `None`
/// when it is not one (a wrong type).
fn decode(image: &Image<'_>, doc: &Doc<'_>, tok: u32, ty: &Type) -> Option<Val> {
    let kind = doc.token(tok).kind();
    // A buffer for an escaped text is zeroed only where a text has an escape (rarely), not on every decode.
    Some(match ty.code {
        image::TYPE_STRING | image::TYPE_KIND if kind == STRING => Val::Str(tok),
        // A value outside the enum is a type error, not just an unequal string.
        image::TYPE_ENUM if kind == STRING => {
            position(image, doc, tok, ty.variants_off, ty.variants_count)?;
            Val::Str(tok)
        }
        image::TYPE_INT if kind == NUMBER => {
            let n = parse_decimal(doc.raw(tok))?;
            if n % 10i128.pow(DECIMAL_SCALE) != 0 {
                return None;
            }
            Val::Num(n)
        }
        image::TYPE_DECIMAL if kind == NUMBER => Val::Num(parse_decimal(doc.raw(tok))?),
        // Without an escape (nearly always) the raw bytes are read in place: a text longer than
        // [`MAX_NUMBER_TEXT`], which [`unescaped`] refuses, is no decimal or money either.
        image::TYPE_DECIMAL if kind == STRING => match doc.plain(tok) {
            Some(raw) => Val::Num(parse_decimal(raw)?),
            None => Val::Num(parse_decimal(unescaped(doc, tok, &mut [0u8; MAX_NUMBER_TEXT])?)?),
        },
        image::TYPE_MONEY if kind == STRING => {
            let (amount, currency) = match doc.plain(tok) {
                Some(raw) => parse_money(raw)?,
                None => parse_money(unescaped(doc, tok, &mut [0u8; MAX_NUMBER_TEXT])?)?,
            };
            Val::Money(amount, currency)
        }
        image::TYPE_BOOL if kind == TRUE => Val::Bool(true),
        image::TYPE_BOOL if kind == FALSE => Val::Bool(false),
        image::TYPE_TIMESTAMP if kind == STRING => {
            let mut text = [0u8; MAX_TIMESTAMP_TEXT];
            Val::Timestamp(parse_timestamp(unescaped(doc, tok, &mut text)?)?)
        }
        image::TYPE_DURATION => {
            let seconds = match kind {
                // serde_json's `as_u64` of a number kept as written: its text read by `u64::from_str` (a JSON number
                // has no `+`, so: digits only).
                NUMBER => {
                    let raw = doc.raw(tok);
                    if raw.is_empty() || !raw.iter().all(|b| b.is_ascii_digit()) {
                        return None;
                    }
                    let mut n: u64 = 0;
                    for &d in raw {
                        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
                    }
                    n
                }
                STRING => duration_of(doc.text(tok))?,
                _ => return None,
            };
            Val::Duration(i64::try_from(seconds).ok()?)
        }
        image::TYPE_LEVEL if kind == STRING => {
            let h = &image.header;
            Val::Level(i128::from(position(image, doc, tok, h.levels_off, h.levels_count)?))
        }
        image::TYPE_SET if kind == ARRAY => {
            let element = Type::decode(image.bytes, ty.element);
            // Sets of sets do not exist (the checker refuses them); decoding one would need recursion.
            if element.code == image::TYPE_SET {
                return None;
            }
            for item in elements(doc, tok) {
                element_of(image, doc, item, &element)?;
            }
            Val::Set(tok, element)
        }
        _ => return None,
    })
}

/// [`decode`] of an element of a set: a string (the usual element: teams, scopes, tags) is its token, tested inline
/// rather than through a call; every other type is decoded.
#[inline(always)]
fn element_of(image: &Image<'_>, doc: &Doc<'_>, tok: u32, element: &Type) -> Option<Val> {
    if element.code == image::TYPE_STRING {
        return (doc.token(tok).kind() == STRING).then_some(Val::Str(tok));
    }
    decode(image, doc, tok, element)
}

/// Applies atom `atom`'s test to its attribute's value (`crates/remit-lang/src/eval/cond.rs`'s `test`).
fn test(image: &Image<'_>, doc: &Doc<'_>, atom: &Check, value: Val) -> Truth {
    // A bool (the value of every derived attribute: a comparison, a membership, a relation) tested with `==` or
    // `!=` against a bool: the constant's record read in place, what [`Cmp::equal`] and [`Cmp::equal_scalar`] do
    // with it without their calls. Any other constant takes the general path (an error there).
    if let Val::Bool(b) = value {
        if (atom.test == image::TEST_EQ || atom.test == image::TEST_NE) && atom.values_count == 1 {
            let constant = Value::decode(image.bytes, Image::at(atom.values_off, Value::SIZE, 0));
            if constant.tag == image::VALUE_BOOL {
                return Truth::of((i128::from(b) == constant.number()) == (atom.test == image::TEST_EQ));
            }
        }
    }
    let c = Cmp { image, doc };
    let operand = || c.value(atom.values_off, 0);
    let (items, count) = (atom.values_off, atom.values_count);
    let result = match atom.test {
        image::TEST_EQ | image::TEST_NE if count == 1 => {
            c.equal(value, &operand()).map(|b| b == (atom.test == image::TEST_EQ))
        }
        image::TEST_LT if count == 1 => c.order(value, &operand()).map(|o| o == Ordering::Less),
        image::TEST_LE if count == 1 => c.order(value, &operand()).map(|o| o != Ordering::Greater),
        image::TEST_GT if count == 1 => c.order(value, &operand()).map(|o| o == Ordering::Greater),
        image::TEST_GE if count == 1 => c.order(value, &operand()).map(|o| o != Ordering::Less),
        image::TEST_IN => c.member(value, items, count),
        image::TEST_NOT_IN => c.member(value, items, count).map(|b| !b),
        image::TEST_UNDER | image::TEST_NOT_UNDER if count == 1 => {
            let prefix = operand();
            match value {
                Val::Str(tok) if prefix.tag == image::VALUE_STRING => {
                    let prefix = image.str(prefix.str_off, prefix.str_len);
                    // Without escapes the raw bytes are the text: no unescaping iterator.
                    let under = match doc.plain(tok) {
                        Some(raw) if unsafe_raw_path(raw) => return Truth::Error,
                        Some(raw) => raw.starts_with(prefix),
                        None if unsafe_path(doc.text(tok)) => return Truth::Error,
                        None => starts_with(doc.text(tok), prefix),
                    };
                    Ok(under == (atom.test == image::TEST_UNDER))
                }
                _ => Err(()),
            }
        }
        image::TEST_CONTAINS | image::TEST_NOT_CONTAINS if count == 1 => match value {
            Val::Set(array, element) => {
                c.member_of_set(&operand(), array, &element).map(|b| b == (atom.test == image::TEST_CONTAINS))
            }
            _ => Err(()),
        },
        image::TEST_WITHIN | image::TEST_NOT_WITHIN => match value {
            Val::Set(array, element) => {
                c.within(array, &element, items, count).map(|b| b == (atom.test == image::TEST_WITHIN))
            }
            _ => Err(()),
        },
        _ => Err(()),
    };
    match result {
        Ok(b) => Truth::of(b),
        Err(()) => Truth::Error,
    }
}

/// Whether `text` begins with `prefix`.
pub fn starts_with(mut text: impl Iterator<Item = u8>, prefix: &[u8]) -> bool {
    prefix.iter().all(|&p| text.next() == Some(p))
}

/// [`unsafe_path`] of bytes in memory, eight at a time while none is a dot, `%`, backslash or NUL: then only an
/// empty segment (`//`) can make the text unsafe. Resource ids are mostly such paths. From the first word that has
/// one of those bytes, the bytes are read one by one from the last `/` before that word, which gives the answer of
/// a reading from the start: the bytes before that `/` have no `%`, no dot and no `//`, so none of them is part of a
/// `.` or `..` segment, an empty one or an escape. (A file name's dot no longer has the whole path read again.)
pub fn unsafe_raw_path(raw: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Bit 7 of each byte of `x` that is zero, exactly (no borrow crosses bytes).
    let zero = |x: u64| !(((x & LOW).wrapping_add(LOW)) | x | LOW);
    let bytewise_from = |at: usize| unsafe_path(raw.get(at..).unwrap_or(raw).iter().copied());
    let mut words = raw.chunks_exact(8);
    let mut slash_before = false;
    // The word's offset, and the offset of the last `/` of the words before it.
    let (mut at, mut last_slash) = (0usize, 0usize);
    for word in &mut words {
        let x = match <[u8; 8]>::try_from(word) {
            Ok(w) => u64::from_le_bytes(w),
            Err(_) => return unsafe_path(raw.iter().copied()),
        };
        let special = zero(x ^ (ONES * u64::from(b'.')))
            | zero(x ^ (ONES * u64::from(b'%')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | zero(x);
        if special != 0 {
            return bytewise_from(last_slash);
        }
        let slashes = zero(x ^ (ONES * u64::from(b'/')));
        if slashes & (slashes >> 8) != 0 || (slash_before && slashes & 0x80 != 0) {
            return true;
        }
        slash_before = slashes >> 63 != 0;
        if slashes != 0 {
            // The highest flagged byte is the word's last `/`.
            last_slash = at + (63 - slashes.leading_zeros() as usize) / 8;
        }
        at += 8;
    }
    let rest = words.remainder();
    if rest.iter().any(|&b| matches!(b, b'.' | b'%' | b'\\' | 0)) {
        return bytewise_from(last_slash);
    }
    let mut prev_slash = slash_before;
    for &b in rest {
        if b == b'/' && prev_slash {
            return true;
        }
        prev_slash = b == b'/';
    }
    false
}

/// A text `under` cannot test (`crates/remit-lang/src/eval/cond.rs`'s `unsafe_path`): a backslash or NUL, an empty segment (`//`), a
/// `.` or `..` segment, or a percent-encoded separator, dot, NUL or percent (`%2f %5c %2e %00 %25`, either case).
/// Read byte by byte: the last two bytes (lowercased) and the current segment's length and whether it is all dots.
pub fn unsafe_path(bytes: impl Iterator<Item = u8>) -> bool {
    let (mut prev2, mut prev1) = (0u8, 0u8);
    let mut segment = 0usize;
    let mut dots = true;
    let dot_segment = |len: usize, dots: bool| dots && (len == 1 || len == 2);
    for b in bytes {
        if b == b'\\' || b == 0 {
            return true;
        }
        let lower = b.to_ascii_lowercase();
        if b == b'/' {
            if prev1 == b'/' || dot_segment(segment, dots) {
                return true;
            }
            segment = 0;
            dots = true;
        } else {
            segment = segment.saturating_add(1);
            dots &= b == b'.';
        }
        if prev2 == b'%' && matches!((prev1, lower), (b'2', b'f' | b'e' | b'5') | (b'5', b'c') | (b'0', b'0')) {
            return true;
        }
        prev2 = prev1;
        prev1 = lower;
    }
    dot_segment(segment, dots)
}

/// Comparisons of request values with the image's constants.
struct Cmp<'c> {
    image: &'c Image<'c>,
    doc: &'c Doc<'c>,
}

impl Cmp<'_> {
    /// The [`Value`] record `i` of a list from `off`.
    fn value(&self, off: u32, i: u32) -> Value {
        Value::decode(self.image.bytes, Image::at(off, Value::SIZE, i))
    }

    /// Equality of two values of the same kind (`crates/remit-lang/src/eval/cond.rs`'s `equal`): money in different currencies is not
    /// comparable; sets are equal when each contains the other.
    fn equal(&self, left: Val, right: &Value) -> Result<bool, ()> {
        match (left, right.tag) {
            (Val::Set(array, element), image::VALUE_SET) => {
                Ok(self.within(array, &element, right.items_off, right.items_count)?
                    && self.set_within(right.items_off, right.items_count, array, &element)?)
            }
            _ => self.equal_scalar(left, right),
        }
    }

    /// [`Cmp::equal`] where `left` is an element of a set (never a set itself).
    fn equal_scalar(&self, left: Val, right: &Value) -> Result<bool, ()> {
        let n = right.number();
        Ok(match (left, right.tag) {
            (Val::Str(tok), image::VALUE_STRING) => self.doc.text_is(tok, self.image.str(right.str_off, right.str_len)),
            (Val::Num(a), image::VALUE_NUMBER) => a == n,
            (Val::Money(a, currency), image::VALUE_MONEY)
                if currency[..] == *self.image.str(right.str_off, right.str_len) =>
            {
                a == n
            }
            (Val::Bool(b), image::VALUE_BOOL) => i128::from(b) == n,
            (Val::Timestamp(t), image::VALUE_TIMESTAMP) => t == n,
            (Val::Duration(d), image::VALUE_DURATION) => i128::from(d) == n,
            (Val::Level(l), image::VALUE_LEVEL) => l == n,
            _ => return Err(()),
        })
    }

    fn order(&self, left: Val, right: &Value) -> Result<Ordering, ()> {
        let n = right.number();
        Ok(match (left, right.tag) {
            (Val::Num(a), image::VALUE_NUMBER) => a.cmp(&n),
            (Val::Money(a, currency), image::VALUE_MONEY)
                if currency[..] == *self.image.str(right.str_off, right.str_len) =>
            {
                a.cmp(&n)
            }
            (Val::Timestamp(t), image::VALUE_TIMESTAMP) => t.cmp(&n),
            (Val::Duration(d), image::VALUE_DURATION) => i128::from(d).cmp(&n),
            (Val::Level(l), image::VALUE_LEVEL) => l.cmp(&n),
            _ => return Err(()),
        })
    }

    /// Whether `value` equals one of the `count` constants from `items` (`member`). A match decides; without one,
    /// an incomparable item is an error (it might have been the match).
    fn member(&self, value: Val, items: u32, count: u32) -> Result<bool, ()> {
        let mut failed = false;
        for i in 0..count {
            match self.equal(value, &self.value(items, i)) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(()) => failed = true,
            }
        }
        if failed {
            Err(())
        } else {
            Ok(false)
        }
    }

    /// Whether the constant `item` equals one of the elements of the request's set `array` (`member(item, set)`).
    fn member_of_set(&self, item: &Value, array: u32, element: &Type) -> Result<bool, ()> {
        // A string among strings (nearly every `contains`): the constant's bytes found once, each element compared
        // with them; what [`Cmp::any_element_equal`] with [`Cmp::equal_scalar`] does there, without a [`Val`] built
        // and matched per element (an element that is not a string is an error unless an earlier one matched).
        if element.code == image::TYPE_STRING && item.tag == image::VALUE_STRING {
            let text = self.image.str(item.str_off, item.str_len);
            for tok in elements(self.doc, array) {
                if self.doc.token(tok).kind() != STRING {
                    return Err(());
                }
                if self.doc.text_is(tok, text) {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        // Equality is symmetric: `equal(item, x)` is `equal(x, item)`.
        self.any_element_equal(array, element, |x| self.equal_scalar(x, item))
    }

    /// Whether `equal` holds for an element of the request's set `array`: a match decides; without one, an
    /// element `equal` cannot compare is an error (it might have been the match), as is an unreadable element.
    fn any_element_equal(
        &self,
        array: u32,
        element: &Type,
        equal: impl Fn(Val) -> Result<bool, ()>,
    ) -> Result<bool, ()> {
        let mut failed = false;
        for tok in elements(self.doc, array) {
            let x = element_of(self.image, self.doc, tok, element).ok_or(())?;
            match equal(x) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(()) => failed = true,
            }
        }
        if failed {
            Err(())
        } else {
            Ok(false)
        }
    }

    /// Whether every element of the request's set `array` is one of the constants (`within(set, items)`).
    fn within(&self, array: u32, element: &Type, items: u32, count: u32) -> Result<bool, ()> {
        let mut all = true;
        for tok in elements(self.doc, array) {
            let x = element_of(self.image, self.doc, tok, element).ok_or(())?;
            let mut found = false;
            let mut failed = false;
            for i in 0..count {
                match self.equal_scalar(x, &self.value(items, i)) {
                    Ok(true) => {
                        found = true;
                        break;
                    }
                    Ok(false) => {}
                    Err(()) => failed = true,
                }
            }
            if !found && failed {
                return Err(());
            }
            all &= found;
        }
        Ok(all)
    }

    /// Equality of two values of the request (`equal`, for a comparison of two attributes): of the same kind, money
    /// in one currency; sets are equal when each contains the other.
    fn equal_vals(&self, left: Val, right: Val) -> Result<bool, ()> {
        match (left, right) {
            (Val::Set(a, a_element), Val::Set(b, b_element)) => Ok(self
                .set_within_set(a, &a_element, b, &b_element)?
                && self.set_within_set(b, &b_element, a, &a_element)?),
            _ => self.equal_scalar_vals(left, right),
        }
    }

    /// [`Cmp::equal_vals`] of two values neither of which is a set (a set is incomparable here).
    fn equal_scalar_vals(&self, left: Val, right: Val) -> Result<bool, ()> {
        Ok(match (left, right) {
            (Val::Str(a), Val::Str(b)) => self.doc.text_eq(a, b),
            (Val::Num(a), Val::Num(b)) => a == b,
            (Val::Money(a, x), Val::Money(b, y)) if x == y => a == b,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::Timestamp(a), Val::Timestamp(b)) => a == b,
            (Val::Duration(a), Val::Duration(b)) => a == b,
            (Val::Level(a), Val::Level(b)) => a == b,
            _ => return Err(()),
        })
    }

    /// The order of two values of the request (`order`).
    fn order_vals(&self, left: Val, right: Val) -> Result<Ordering, ()> {
        Ok(match (left, right) {
            (Val::Num(a), Val::Num(b)) => a.cmp(&b),
            (Val::Money(a, x), Val::Money(b, y)) if x == y => a.cmp(&b),
            (Val::Timestamp(a), Val::Timestamp(b)) => a.cmp(&b),
            (Val::Duration(a), Val::Duration(b)) => a.cmp(&b),
            (Val::Level(a), Val::Level(b)) => a.cmp(&b),
            _ => return Err(()),
        })
    }

    /// Whether the request's value `item` equals an element of the request's set `array` (`member(item, set)`): a
    /// match decides; without one, an incomparable element is an error (it might have been the match).
    fn member_of_request_set(&self, item: Val, array: u32, element: &Type) -> Result<bool, ()> {
        // `x` is never a set (sets of sets do not exist), so neither side is one for a match.
        self.any_element_equal(array, element, |x| self.equal_scalar_vals(item, x))
    }

    /// Whether every element of the request's set `a` is an element of the request's set `b` (`within(a, b)`).
    fn set_within_set(&self, a: u32, a_element: &Type, b: u32, b_element: &Type) -> Result<bool, ()> {
        let mut all = true;
        for tok in elements(self.doc, a) {
            let x = element_of(self.image, self.doc, tok, a_element).ok_or(())?;
            all &= self.member_of_request_set(x, b, b_element)?;
        }
        Ok(all)
    }

    /// Whether every constant is an element of the request's set `array` (`within(items, set)`).
    fn set_within(&self, items: u32, count: u32, array: u32, element: &Type) -> Result<bool, ()> {
        let mut all = true;
        for i in 0..count {
            all &= self.member_of_set(&self.value(items, i), array, element)?;
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Header, MAGIC, NODE_AND, NODE_ATOM, NODE_FALSE, NODE_OR, NODE_TRUE, VERSION};
    use crate::json::Buffers;
    use crate::request::Need;

    const REQUEST: &[u8] = br#"{"subject":{"id":"a"},"action":{"name":"t","arguments":{"x":1}},"context":{"mandate":"m","now":"2026-11-30T12:00:00Z"}}"#;

    /// Evaluates the condition `nodes` (`(op, arg)`; an atom's `arg` is ignored: every atom reads the absent
    /// argument `absent`, an error, or unknown while listing) of a hand-written image: `eval` and `possible`, and
    /// `possible` while listing.
    fn run(nodes: &[(u32, u32)], count: usize) -> (Truth, Possible, Possible) {
        let atom_at = Header::SIZE;
        let name_at = atom_at + image::Atom::SIZE;
        let nodes_at = name_at + 8;
        let mut bytes = vec![0u8; nodes_at + nodes.len() * Node::SIZE];
        Header { magic: MAGIC, version: VERSION, image_len: bytes.len() as u32, ..Header::default() }
            .encode(&mut bytes);
        let atom =
            image::Atom { attr: image::ATTR_ARG, name_off: name_at as u32, name_len: 6, ..image::Atom::default() };
        atom.encode(&mut bytes[atom_at..]);
        bytes[name_at..name_at + 6].copy_from_slice(b"absent");
        for (i, &(op, arg)) in nodes.iter().enumerate() {
            let arg = if op == NODE_ATOM { atom_at as u32 } else { arg };
            Node { op, arg }.encode(&mut bytes[nodes_at + i * Node::SIZE..]);
        }
        let image = Image::new(&bytes).unwrap();
        let mut buffers = Buffers::new();
        let (doc, _) = buffers.parse(REQUEST).unwrap();
        let request = crate::request::parse(&doc, Need::Call).unwrap();
        let mut env = Env {
            image: &image,
            doc: &doc,
            request: &request,
            tool: Tool::default(),
            listing: false,
            principal: b"",
            instance: None,
            parent: None,
        };
        let (off, count) = (nodes_at as u32, count as u32);
        let truth = eval(&image, off, count, &env);
        let p = possible(&image, off, count, &env);
        env.listing = true;
        (truth, p, possible(&image, off, count, &env))
    }

    fn eval_of(nodes: &[(u32, u32)]) -> Truth {
        let (truth, p, _) = run(nodes, nodes.len());
        // Nothing is unknown: `possible` is exact.
        assert_eq!(p, Possible::of(truth), "{nodes:?}");
        truth
    }

    const T: (u32, u32) = (NODE_TRUE, 0);
    const F: (u32, u32) = (NODE_FALSE, 0);
    const A: (u32, u32) = (NODE_ATOM, 0);
    const fn and(n: u32) -> (u32, u32) {
        (NODE_AND, n)
    }
    const fn or(n: u32) -> (u32, u32) {
        (NODE_OR, n)
    }

    #[test]
    fn and_or_in_prefix_order() {
        assert_eq!(eval_of(&[T]), Truth::True);
        assert_eq!(eval_of(&[F]), Truth::False);
        assert_eq!(eval_of(&[and(2), T, or(2), F, T]), Truth::True);
        assert_eq!(eval_of(&[and(2), or(2), F, F, T]), Truth::False);
        assert_eq!(eval_of(&[or(3), F, and(0), F]), Truth::True);
        assert_eq!(eval_of(&[and(2), T, or(0)]), Truth::False);
        assert_eq!(eval_of(&[or(2), and(2), T, and(1), or(1), F, F]), Truth::False);
        // An error anywhere is the value, whatever the other children say.
        assert_eq!(eval_of(&[and(2), F, A]), Truth::Error);
        assert_eq!(eval_of(&[or(2), T, A]), Truth::Error);
        assert_eq!(eval_of(&[or(2), and(1), A, T]), Truth::Error);
        assert_eq!(eval_of(&[A]), Truth::Error);
    }

    #[test]
    fn many_children_need_one_frame() {
        let mut nodes = vec![or(10_000)];
        nodes.extend(std::iter::repeat(F).take(9_999));
        nodes.push(T);
        assert_eq!(eval_of(&nodes), Truth::True);
    }

    #[test]
    fn a_corrupt_condition_is_an_error() {
        let error = (Truth::Error, Possible::ERROR, Possible::ERROR);
        assert_eq!(run(&[], 0), error);
        assert_eq!(run(&[and(2), T], 2), error, "truncated");
        assert_eq!(run(&[and(2), T, T], 2), error, "count short of the nodes");
        assert_eq!(run(&[T, T], 2), error, "nodes after the root");
        assert_eq!(run(&[(9, 0)], 1), error, "no such node");
        assert_eq!(run(&[and(1), (9, 0)], 2), error);
        // Nesting: the stack holds `MAX_COND_DEPTH` open nodes, no more.
        let mut deep = vec![or(1); MAX_COND_DEPTH];
        deep.push(T);
        assert_eq!(eval_of(&deep), Truth::True);
        deep.insert(0, and(1));
        assert_eq!(run(&deep, deep.len()), error);
    }

    #[test]
    fn listing_an_unknown_argument() {
        let (_, _, listed) = run(&[A], 1);
        assert_eq!(listed, Possible::ANY);
        // `and`: false once something is false; an error stays possible.
        let (_, _, listed) = run(&[and(2), A, F], 3);
        assert_eq!(listed, Possible(Possible::FALSE.0 | Possible::ERROR.0));
        let (_, _, listed) = run(&[or(2), A, T], 3);
        assert_eq!(listed, Possible(Possible::TRUE.0 | Possible::ERROR.0));
        let (_, _, listed) = run(&[and(2), A, T], 3);
        assert_eq!(listed, Possible::ANY);
    }

    #[test]
    fn unsafe_paths() {
        let yes = [
            "a\\b", "a\0b", "a//b", "//", "a/./b", "a/../b", "..", ".", "a/.", "./a", "%2f", "x%2Fy", "%5C", "%2e",
            "%00", "%25", "a%%25",
        ];
        for text in yes {
            assert!(unsafe_path(text.bytes()), "{text:?}");
        }
        let no = ["", "a", "/", "a/b/", "/a", "...", "a/.../b", ".a", "a.", "%2", "%", "%2g", "%20", "2f%", "a/b"];
        for text in no {
            assert!(!unsafe_path(text.bytes()), "{text:?}");
        }
    }

    #[test]
    fn starts_with_prefix() {
        assert!(starts_with(b"orders/7".iter().copied(), b"orders/"));
        assert!(starts_with(b"x".iter().copied(), b""));
        assert!(!starts_with(b"order".iter().copied(), b"orders/"));
    }

    #[test]
    fn possible_of_and_or() {
        let all = ALL_TRUE | ALL_FALSE | ALL_SUCCEED;
        assert_eq!(close(true, all), Possible::TRUE);
        assert_eq!(close(false, all), Possible::FALSE);
        // One child ANY: an `and` of it alone may be anything.
        let any = ALL_TRUE | ALL_FALSE | ALL_SUCCEED | ANY_TRUE | ANY_FALSE | ANY_FAIL;
        assert_eq!(close(true, any), Possible::ANY);
        // A child that can only fail: neither true nor false is possible for `or`, and `and` cannot be false.
        assert_eq!(close(false, ANY_FAIL), Possible::ERROR);
        assert_eq!(close(true, ANY_FAIL), Possible::ERROR);
    }
}
