//! Typed values in the module, mirroring src/eval/cond.rs: decoding request values by their declared type into
//! 32-byte records, equality and order, the tests of the constraint fragment, and `vm_atom`, which fetches one
//! attribute and applies one test. Policy literals are encoded into the same records at compile time
//! ([`encode`]), so the module compares like with like.
//!
//! Record layout: +0 tag; strings +4 ptr +8 len; decimals (int and decimal) +4 negative +8 integer-digits ptr
//! +12 len (no leading zeros) +16 fraction-digits ptr +20 len (no trailing zeros), zero is never negative;
//! money = decimal + currency (3 bytes) at +24; bool +4; timestamp and duration i64 at +8; level +4;
//! set +4 elements ptr +8 count.

use wasm_encoder::{BlockType, Instruction as I, ValType};

use super::super::asm::{load32, load64, load8, store32, store64, Body};
use super::super::module::ModuleBuilder;
use super::{request::tok, slot};
use crate::ir::{Test, Type, Value};
use crate::syntax::ast::CompareOp;

const I32: ValType = ValType::I32;
const I64: ValType = ValType::I64;

pub const REC: i32 = 32;
pub const TAG_STR: i32 = 1;
pub const TAG_DEC: i32 = 4;
pub const TAG_MONEY: i32 = 5;
pub const TAG_BOOL: i32 = 6;
pub const TAG_TS: i32 = 7;
pub const TAG_DUR: i32 = 8;
pub const TAG_SET: i32 = 9;
pub const TAG_LEVEL: i32 = 10;

/// Type classes passed to `vm_decode` (the tag a value of the class decodes to, except int/enum).
pub const CLS_STRING: i32 = 1;
pub const CLS_ENUM: i32 = 2;
pub const CLS_INT: i32 = 3;
pub const CLS_DEC: i32 = 4;
pub const CLS_MONEY: i32 = 5;
pub const CLS_BOOL: i32 = 6;
pub const CLS_TS: i32 = 7;
pub const CLS_DUR: i32 = 8;
pub const CLS_SET: i32 = 9;
pub const CLS_LEVEL: i32 = 10;

/// Attribute kinds passed to `vm_atom`.
pub const ATTR_ARG: i32 = 1;
pub const ATTR_CONTEXT: i32 = 2;
pub const ATTR_RESOURCE: i32 = 3;
pub const ATTR_SUBJECT: i32 = 4;
pub const ATTR_SCOPES: i32 = 5;
pub const ATTR_NOW: i32 = 6;
pub const ATTR_ATTEMPT: i32 = 7;
pub const ATTR_LEVEL: i32 = 8;
/// Or-ed into the attribute kind of an argument or context attribute that is not `signed`: negative money is a
/// mistyped value.
pub const ATTR_NON_NEGATIVE: i32 = 0x100;

pub fn class(ty: &Type) -> (i32, i32) {
    match ty {
        Type::String | Type::Kind(_) => (CLS_STRING, 0),
        Type::Enum(..) => (CLS_ENUM, 0),
        Type::Int => (CLS_INT, 0),
        Type::Decimal => (CLS_DEC, 0),
        Type::Money => (CLS_MONEY, 0),
        Type::Bool => (CLS_BOOL, 0),
        Type::Timestamp => (CLS_TS, 0),
        Type::Duration => (CLS_DUR, 0),
        Type::Level => (CLS_LEVEL, 0),
        Type::Set(element) => (CLS_SET, class(element).0),
    }
}

/// `(test kind, comparison op)` codes of `vm_test`.
pub fn test_code(test: &Test) -> (i32, i32) {
    let op = |op: &CompareOp| match op {
        CompareOp::Eq => 0,
        CompareOp::Ne => 1,
        CompareOp::Lt => 2,
        CompareOp::Le => 3,
        CompareOp::Gt => 4,
        CompareOp::Ge => 5,
    };
    match test {
        Test::Compare(o, _) => (1, op(o)),
        Test::In(_) => (2, 0),
        Test::NotIn(_) => (3, 0),
        Test::Under(_) => (4, 0),
        Test::NotUnder(_) => (5, 0),
        Test::Contains(_) => (6, 0),
        Test::NotContains(_) => (7, 0),
        Test::Within(_) => (8, 0),
        Test::NotWithin(_) => (9, 0),
    }
}

/// Encodes policy literals as records in static data; returns the address of the first.
pub fn encode(m: &mut ModuleBuilder, values: &[Value]) -> u32 {
    let mut bytes = Vec::with_capacity(values.len() * REC as usize);
    for value in values {
        let mut rec = [0u32; 8];
        let mut wide: Option<i64> = None;
        match value {
            Value::String(s) => {
                rec[0] = TAG_STR as u32;
                rec[1] = m.bytes(s.as_bytes());
                rec[2] = s.len() as u32;
            }
            Value::Number(d) => {
                rec[0] = TAG_DEC as u32;
                decimal_fields(m, &d.to_string(), &mut rec);
            }
            Value::Money(money) => {
                rec[0] = TAG_MONEY as u32;
                decimal_fields(m, &money.amount.to_string(), &mut rec);
                let c = money.currency.as_bytes();
                rec[6] = c[0] as u32 | (c[1] as u32) << 8 | (c[2] as u32) << 16;
            }
            Value::Bool(b) => {
                rec[0] = TAG_BOOL as u32;
                rec[1] = *b as u32;
            }
            Value::Timestamp(t) => {
                rec[0] = TAG_TS as u32;
                wide = Some(*t);
            }
            Value::Duration(d) => {
                rec[0] = TAG_DUR as u32;
                wide = Some(*d);
            }
            Value::Level(l) => {
                rec[0] = TAG_LEVEL as u32;
                rec[1] = *l as u32;
            }
            Value::Set(_) => unreachable!("policy literals are never sets"),
        }
        if let Some(w) = wide {
            rec[2] = w as u32;
            rec[3] = (w >> 32) as u32;
        }
        for word in rec {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
    }
    if bytes.is_empty() {
        return 0;
    }
    m.raw(&bytes, 8)
}

/// The normalized digit strings of a decimal's canonical text (`-12.5`).
fn decimal_fields(m: &mut ModuleBuilder, text: &str, rec: &mut [u32; 8]) {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let whole = whole.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    rec[1] = (negative && !(whole.is_empty() && frac.is_empty())) as u32;
    rec[2] = m.bytes(whole.as_bytes());
    rec[3] = whole.len() as u32;
    rec[4] = m.bytes(frac.as_bytes());
    rec[5] = frac.len() as u32;
}

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("vm_parse_decimal", &[I32, I32, I32], &[I32]);
    m.declare("vm_parse_money", &[I32, I32, I32], &[I32]);
    m.declare("vm_parse_timestamp", &[I32, I32, I32], &[I32]);
    m.declare("vm_parse_duration", &[I32, I32, I32], &[I32]);
    m.declare("vm_parse_u64", &[I32, I32, I32], &[I32]);
    m.declare("vm_days_from_civil", &[I64, I64, I64], &[I64]);
    m.declare("vm_dec_cmp", &[I32, I32], &[I32]);
    m.declare("vm_eq", &[I32, I32], &[I32]);
    m.declare("vm_ord", &[I32, I32], &[I32]);
    m.declare("vm_member", &[I32, I32, I32], &[I32]);
    m.declare("vm_test", &[I32, I32, I32, I32, I32, I32, I32], &[I32]);
    m.declare("vm_decode", &[I32, I32, I32, I32, I32, I32], &[I32]);
    m.declare("vm_decode_text", &[I32, I32, I32, I32, I32, I32, I32], &[I32]);
    m.declare("vm_negative", &[I32], &[I32]);
    m.declare("vm_atom", &[I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], &[I32]);
}

/// Emits `if (cond on stack) { return C }`.
fn ret_if(c: i32) -> [I<'static>; 4] {
    [I::If(BlockType::Empty), I::I32Const(c), I::Return, I::End]
}

/// Pushes `byte[p + i]`.
fn byte_at(p: u32, i: u32) -> [I<'static>; 4] {
    [I::LocalGet(p), I::LocalGet(i), I::I32Add, load8(0)]
}

/// Pushes whether the byte on the stack is an ASCII digit (consumes it).
fn is_digit(tmp: u32) -> [I<'static>; 7] {
    [I::LocalSet(tmp), I::LocalGet(tmp), I::I32Const(48), I::I32Sub, I::I32Const(10), I::I32LtU, I::Nop]
}

pub fn define(m: &mut ModuleBuilder) {
    define_parse_decimal(m);
    define_parse_money(m);
    define_parse_timestamp(m);
    define_parse_duration(m);
    define_compare(m);
    define_test(m);
    define_decode(m);
    define_atom(m);
}

fn define_parse_decimal(m: &mut ModuleBuilder) {
    // vm_parse_decimal(p, l, dst) -> ok: Decimal::parse, normalized into a TAG_DEC record.
    let mut b = Body::new(3);
    let (p, l, dst) = (0, 1, 2);
    let (i, neg, ws, wl, fs, fl, t) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let digits = |b: &mut Body| {
        // while i < l && is_digit(byte[p+i]) { i++ }
        b.emit([
            I::Block(BlockType::Empty),
            I::Loop(BlockType::Empty),
            I::LocalGet(i),
            I::LocalGet(l),
            I::I32GeU,
            I::BrIf(1),
        ]);
        b.emit(byte_at(p, i));
        b.emit(is_digit(t));
        b.emit([
            I::I32Eqz,
            I::BrIf(1),
            I::LocalGet(i),
            I::I32Const(1),
            I::I32Add,
            I::LocalSet(i),
            I::Br(0),
            I::End,
            I::End,
        ]);
    };
    b.emit([I::LocalGet(l), I::I32Const(0), I::I32GtU, I::If(BlockType::Empty)]);
    b.emit(byte_at(p, i));
    b.emit([
        I::I32Const(b'-' as i32),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(neg),
        I::I32Const(1),
        I::LocalSet(i),
        I::End,
        I::End,
        I::LocalGet(i),
        I::LocalSet(ws),
    ]);
    digits(&mut b);
    b.emit([I::LocalGet(i), I::LocalGet(ws), I::I32Sub, I::LocalTee(wl), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(wl), I::I32Const(24), I::I32GtU]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(i), I::LocalSet(fs), I::LocalGet(i), I::LocalGet(l), I::I32LtU, I::If(BlockType::Empty)]);
    b.emit(byte_at(p, i));
    b.emit([I::I32Const(b'.' as i32), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalTee(i), I::LocalSet(fs)]);
    digits(&mut b);
    b.emit([I::LocalGet(i), I::LocalGet(fs), I::I32Sub, I::LocalTee(fl), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(fl), I::I32Const(9), I::I32GtU]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(i), I::LocalGet(l), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([I::End]);
    // Strip leading zeros of the integer part and trailing zeros of the fraction.
    b.emit([I::Block(BlockType::Empty), I::Loop(BlockType::Empty), I::LocalGet(wl), I::I32Eqz, I::BrIf(1)]);
    b.emit(byte_at(p, ws));
    b.emit([
        I::I32Const(b'0' as i32),
        I::I32Ne,
        I::BrIf(1),
        I::LocalGet(ws),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(ws),
        I::LocalGet(wl),
        I::I32Const(1),
        I::I32Sub,
        I::LocalSet(wl),
        I::Br(0),
        I::End,
        I::End,
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(fl),
        I::I32Eqz,
        I::BrIf(1),
        I::LocalGet(p),
        I::LocalGet(fs),
        I::I32Add,
        I::LocalGet(fl),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        load8(0),
        I::I32Const(b'0' as i32),
        I::I32Ne,
        I::BrIf(1),
        I::LocalGet(fl),
        I::I32Const(1),
        I::I32Sub,
        I::LocalSet(fl),
        I::Br(0),
        I::End,
        I::End,
        // Zero is never negative.
        I::LocalGet(wl),
        I::LocalGet(fl),
        I::I32Or,
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::LocalSet(neg),
        I::End,
        I::LocalGet(dst),
        I::I32Const(TAG_DEC),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(neg),
        store32(4),
        I::LocalGet(dst),
        I::LocalGet(p),
        I::LocalGet(ws),
        I::I32Add,
        store32(8),
        I::LocalGet(dst),
        I::LocalGet(wl),
        store32(12),
        I::LocalGet(dst),
        I::LocalGet(p),
        I::LocalGet(fs),
        I::I32Add,
        store32(16),
        I::LocalGet(dst),
        I::LocalGet(fl),
        store32(20),
        I::I32Const(1),
    ]);
    m.define("vm_parse_decimal", b.finish());
}

fn define_parse_money(m: &mut ModuleBuilder) {
    // vm_parse_money(p, l, dst) -> ok: "AMOUNT CUR", split at the first space; CUR is three ASCII capitals.
    let dec = m.func("vm_parse_decimal");
    let mut b = Body::new(3);
    let (p, l, dst) = (0, 1, 2);
    let (i, t, k) = (b.i32(), b.i32(), b.i32());
    b.emit([I::Block(BlockType::Empty), I::Loop(BlockType::Empty), I::LocalGet(i), I::LocalGet(l), I::I32GeU]);
    b.emit(ret_if(0));
    b.emit(byte_at(p, i));
    b.emit([
        I::I32Const(b' ' as i32),
        I::I32Eq,
        I::BrIf(1),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
    ]);
    // The currency: exactly 3 bytes after the space, each A-Z.
    b.emit([I::LocalGet(l), I::LocalGet(i), I::I32Sub, I::I32Const(4), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([I::I32Const(1), I::LocalSet(k)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(k),
        I::I32Const(4),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(p),
        I::LocalGet(i),
        I::I32Add,
        I::LocalGet(k),
        I::I32Add,
        load8(0),
        I::I32Const(b'A' as i32),
        I::I32Sub,
        I::LocalTee(t),
        I::I32Const(26),
        I::I32GeU,
    ]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(k), I::I32Const(1), I::I32Add, I::LocalSet(k), I::Br(0), I::End, I::End]);
    b.emit([I::LocalGet(p), I::LocalGet(i), I::LocalGet(dst), I::Call(dec), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(dst),
        I::I32Const(TAG_MONEY),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(p),
        I::LocalGet(i),
        I::I32Add,
        I::LocalTee(t),
        load8(1),
        I::LocalGet(t),
        load8(2),
        I::I32Const(8),
        I::I32Shl,
        I::I32Or,
        I::LocalGet(t),
        load8(3),
        I::I32Const(16),
        I::I32Shl,
        I::I32Or,
        store32(24),
        I::I32Const(1),
    ]);
    m.define("vm_parse_money", b.finish());
}

fn define_parse_timestamp(m: &mut ModuleBuilder) {
    // vm_days_from_civil(y, m, d) -> days since 1970-01-01 (Howard Hinnant's algorithm, as src/value.rs).
    let mut b = Body::new(3);
    let (y, mo, d) = (0, 1, 2);
    let (era, yoe, mp, doy, doe) = (b.i64(), b.i64(), b.i64(), b.i64(), b.i64());
    b.emit([
        I::LocalGet(y),
        I::LocalGet(mo),
        I::I64Const(2),
        I::I64LeS,
        I::I64ExtendI32U,
        I::I64Sub,
        I::LocalSet(y),
        // era = floor(y / 400)
        I::LocalGet(y),
        I::LocalGet(y),
        I::I64Const(399),
        I::I64Sub,
        I::LocalGet(y),
        I::I64Const(0),
        I::I64GeS,
        I::Select,
        I::I64Const(400),
        I::I64DivS,
        I::LocalSet(era),
        I::LocalGet(y),
        I::LocalGet(era),
        I::I64Const(400),
        I::I64Mul,
        I::I64Sub,
        I::LocalSet(yoe),
        I::LocalGet(mo),
        I::I64Const(9),
        I::I64Add,
        I::I64Const(12),
        I::I64RemS,
        I::LocalSet(mp),
        I::LocalGet(mp),
        I::I64Const(153),
        I::I64Mul,
        I::I64Const(2),
        I::I64Add,
        I::I64Const(5),
        I::I64DivS,
        I::LocalGet(d),
        I::I64Add,
        I::I64Const(1),
        I::I64Sub,
        I::LocalSet(doy),
        I::LocalGet(yoe),
        I::I64Const(365),
        I::I64Mul,
        I::LocalGet(yoe),
        I::I64Const(4),
        I::I64DivS,
        I::I64Add,
        I::LocalGet(yoe),
        I::I64Const(100),
        I::I64DivS,
        I::I64Sub,
        I::LocalGet(doy),
        I::I64Add,
        I::LocalSet(doe),
        I::LocalGet(era),
        I::I64Const(146_097),
        I::I64Mul,
        I::LocalGet(doe),
        I::I64Add,
        I::I64Const(719_468),
        I::I64Sub,
    ]);
    m.define("vm_days_from_civil", b.finish());

    // vm_parse_timestamp(p, l, dst) -> ok: `YYYY-MM-DDTHH:MM:SSZ` into a TAG_TS record.
    let civil = m.func("vm_days_from_civil");
    let mut b = Body::new(3);
    let (p, l, dst) = (0, 1, 2);
    let (i, t, n) = (b.i32(), b.i32(), b.i32());
    let fields: Vec<u32> = (0..6).map(|_| b.i64()).collect();
    let days = b.i64();
    b.emit([I::LocalGet(l), I::I32Const(20), I::I32Ne]);
    b.emit(ret_if(0));
    for (at, ch) in [(4u32, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'Z')] {
        b.emit([I::LocalGet(p), load8(at as u64), I::I32Const(ch as i32), I::I32Ne]);
        b.emit(ret_if(0));
    }
    // Each numeric field: all digits.
    for (field, (from, to)) in [(0, 4u32), (5, 7), (8, 10), (11, 13), (14, 16), (17, 19)].into_iter().enumerate() {
        b.emit([I::I32Const(0), I::LocalSet(n), I::I32Const(from), I::LocalSet(i)]);
        b.emit([
            I::Block(BlockType::Empty),
            I::Loop(BlockType::Empty),
            I::LocalGet(i),
            I::I32Const(to as i32),
            I::I32GeU,
            I::BrIf(1),
        ]);
        b.emit(byte_at(p, i));
        b.emit([I::I32Const(48), I::I32Sub, I::LocalTee(t), I::I32Const(10), I::I32GeU]);
        b.emit(ret_if(0));
        b.emit([
            I::LocalGet(n),
            I::I32Const(10),
            I::I32Mul,
            I::LocalGet(t),
            I::I32Add,
            I::LocalSet(n),
            I::LocalGet(i),
            I::I32Const(1),
            I::I32Add,
            I::LocalSet(i),
            I::Br(0),
            I::End,
            I::End,
            I::LocalGet(n),
            I::I64ExtendI32U,
            I::LocalSet(fields[field]),
        ]);
    }
    let (year, month, day, hour, minute, second) = (fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]);
    // Ranges: month 1-12, day 1..days in month, hour <= 23, minute and second <= 59.
    b.emit([I::LocalGet(month), I::I64Const(1), I::I64LtS, I::LocalGet(month), I::I64Const(12), I::I64GtS, I::I32Or]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(day), I::I64Const(1), I::I64LtS]);
    b.emit(ret_if(0));
    // Days in month: 31 except 4, 6, 9, 11 (30) and February (28 or 29).
    let dim = b.i64();
    let leap = b.i32();
    b.emit([
        // leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
        I::LocalGet(year),
        I::I64Const(4),
        I::I64RemS,
        I::I64Eqz,
        I::LocalGet(year),
        I::I64Const(100),
        I::I64RemS,
        I::I64Const(0),
        I::I64Ne,
        I::I32And,
        I::LocalGet(year),
        I::I64Const(400),
        I::I64RemS,
        I::I64Eqz,
        I::I32Or,
        I::LocalSet(leap),
        I::I64Const(31),
        I::LocalSet(dim),
        I::LocalGet(month),
        I::I64Const(4),
        I::I64Eq,
        I::LocalGet(month),
        I::I64Const(6),
        I::I64Eq,
        I::I32Or,
        I::LocalGet(month),
        I::I64Const(9),
        I::I64Eq,
        I::I32Or,
        I::LocalGet(month),
        I::I64Const(11),
        I::I64Eq,
        I::I32Or,
        I::If(BlockType::Empty),
        I::I64Const(30),
        I::LocalSet(dim),
        I::End,
        I::LocalGet(month),
        I::I64Const(2),
        I::I64Eq,
        I::If(BlockType::Empty),
        I::I64Const(29),
        I::I64Const(28),
        I::LocalGet(leap),
        I::Select,
        I::LocalSet(dim),
        I::End,
        I::LocalGet(day),
        I::LocalGet(dim),
        I::I64GtS,
    ]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(hour),
        I::I64Const(23),
        I::I64GtS,
        I::LocalGet(minute),
        I::I64Const(59),
        I::I64GtS,
        I::I32Or,
        I::LocalGet(second),
        I::I64Const(59),
        I::I64GtS,
        I::I32Or,
    ]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(year),
        I::LocalGet(month),
        I::LocalGet(day),
        I::Call(civil),
        I::LocalSet(days),
        I::LocalGet(dst),
        I::I32Const(TAG_TS),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(days),
        I::I64Const(86_400),
        I::I64Mul,
        I::LocalGet(hour),
        I::I64Const(3600),
        I::I64Mul,
        I::I64Add,
        I::LocalGet(minute),
        I::I64Const(60),
        I::I64Mul,
        I::I64Add,
        I::LocalGet(second),
        I::I64Add,
        store64(8),
        I::I32Const(1),
    ]);
    m.define("vm_parse_timestamp", b.finish());
}

fn define_parse_duration(m: &mut ModuleBuilder) {
    // vm_parse_u64(p, l, dst) -> ok: Rust's `str::parse::<u64>` (an optional `+`, then at least one digit,
    // no overflow); the value is stored as i64 bits at dst + 8.
    let mut b = Body::new(3);
    let (p, l, dst) = (0, 1, 2);
    let (i, t) = (b.i32(), b.i32());
    let acc = b.i64();
    b.emit([I::LocalGet(l), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(p),
        load8(0),
        I::I32Const(b'+' as i32),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(i),
        I::End,
    ]);
    b.emit([I::LocalGet(i), I::LocalGet(l), I::I32GeU]);
    b.emit(ret_if(0));
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(l),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit(byte_at(p, i));
    b.emit([I::I32Const(48), I::I32Sub, I::LocalTee(t), I::I32Const(10), I::I32GeU]);
    b.emit(ret_if(0));
    // Overflow: acc > (u64::MAX - t) / 10.
    b.emit([
        I::LocalGet(acc),
        I::I64Const(-1),
        I::LocalGet(t),
        I::I64ExtendI32U,
        I::I64Sub,
        I::I64Const(10),
        I::I64DivU,
        I::I64GtU,
    ]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(acc),
        I::I64Const(10),
        I::I64Mul,
        I::LocalGet(t),
        I::I64ExtendI32U,
        I::I64Add,
        I::LocalSet(acc),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(dst),
        I::LocalGet(acc),
        store64(8),
        I::I32Const(1),
    ]);
    m.define("vm_parse_u64", b.finish());

    // vm_parse_duration(p, l, dst) -> ok: `900s`, `15m`, `24h`, `7d` (src/value.rs parse_duration), at most
    // i64::MAX seconds, into a TAG_DUR record.
    let u64p = m.func("vm_parse_u64");
    let mut b = Body::new(3);
    let (p, l, dst) = (0, 1, 2);
    let factor = b.i64();
    let unit = b.i32();
    let v = b.i64();
    b.emit([I::LocalGet(l), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(p),
        I::LocalGet(l),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        load8(0),
        I::LocalSet(unit),
        I::I64Const(0),
        I::LocalSet(factor),
    ]);
    for (ch, f) in [(b's', 1i64), (b'm', 60), (b'h', 3600), (b'd', 86_400)] {
        b.emit([
            I::LocalGet(unit),
            I::I32Const(ch as i32),
            I::I32Eq,
            I::If(BlockType::Empty),
            I::I64Const(f),
            I::LocalSet(factor),
            I::End,
        ]);
    }
    b.emit([I::LocalGet(factor), I::I64Eqz]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(p), I::LocalGet(l), I::I32Const(1), I::I32Sub, I::LocalGet(dst), I::Call(u64p), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(dst), load64(8), I::LocalTee(v), I::I64Const(-1), I::LocalGet(factor), I::I64DivU, I::I64GtU]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(v), I::LocalGet(factor), I::I64Mul, I::LocalTee(v), I::I64Const(0), I::I64LtS]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(dst),
        I::I32Const(TAG_DUR),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(v),
        store64(8),
        I::I32Const(1),
    ]);
    m.define("vm_parse_duration", b.finish());
}

fn define_compare(m: &mut ModuleBuilder) {
    let cmp = m.func("vm_bytes_cmp");
    let eq = m.func("vm_bytes_eq");
    // vm_dec_cmp(a, b) -> -1/0/1 on decimal (or money) records.
    let mut b = Body::new(2);
    let (a, c) = (0, 1);
    let (sign, r) = (b.i32(), b.i32());
    b.emit([
        I::LocalGet(a),
        load32(4),
        I::LocalGet(c),
        load32(4),
        I::I32Ne,
        I::If(BlockType::Empty),
        I::I32Const(-1),
        I::I32Const(1),
        I::LocalGet(a),
        load32(4),
        I::Select,
        I::Return,
        I::End,
        // Same sign: compare magnitudes, negated when negative.
        I::I32Const(-1),
        I::I32Const(1),
        I::LocalGet(a),
        load32(4),
        I::Select,
        I::LocalSet(sign),
        I::LocalGet(a),
        load32(12),
        I::LocalGet(c),
        load32(12),
        I::I32Ne,
        I::If(BlockType::Empty),
        I::I32Const(-1),
        I::I32Const(1),
        I::LocalGet(a),
        load32(12),
        I::LocalGet(c),
        load32(12),
        I::I32LtU,
        I::Select,
        I::LocalGet(sign),
        I::I32Mul,
        I::Return,
        I::End,
        I::LocalGet(a),
        load32(8),
        I::LocalGet(a),
        load32(12),
        I::LocalGet(c),
        load32(8),
        I::LocalGet(c),
        load32(12),
        I::Call(cmp),
        I::LocalTee(r),
        I::If(BlockType::Empty),
        I::LocalGet(r),
        I::LocalGet(sign),
        I::I32Mul,
        I::Return,
        I::End,
        // Fractions without trailing zeros order like their digit strings.
        I::LocalGet(a),
        load32(16),
        I::LocalGet(a),
        load32(20),
        I::LocalGet(c),
        load32(16),
        I::LocalGet(c),
        load32(20),
        I::Call(cmp),
        I::LocalGet(sign),
        I::I32Mul,
    ]);
    m.define("vm_dec_cmp", b.finish());
    let dec_cmp = m.func("vm_dec_cmp");

    // vm_ord(a, b) -> -1/0/1, or 2 when the values have no common order.
    let mut b = Body::new(2);
    let (a, c) = (0, 1);
    let tag = b.i32();
    let (x, y) = (b.i64(), b.i64());
    b.emit([I::LocalGet(a), load32(0), I::LocalTee(tag), I::LocalGet(c), load32(0), I::I32Ne]);
    b.emit(ret_if(2));
    b.emit([
        I::LocalGet(tag),
        I::I32Const(TAG_MONEY),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(a),
        load32(24),
        I::LocalGet(c),
        load32(24),
        I::I32Ne,
    ]);
    b.emit(ret_if(2));
    b.emit([
        I::End,
        I::LocalGet(tag),
        I::I32Const(TAG_DEC),
        I::I32Eq,
        I::LocalGet(tag),
        I::I32Const(TAG_MONEY),
        I::I32Eq,
        I::I32Or,
    ]);
    b.emit([I::If(BlockType::Empty), I::LocalGet(a), I::LocalGet(c), I::Call(dec_cmp), I::Return, I::End]);
    b.emit([
        I::LocalGet(tag),
        I::I32Const(TAG_TS),
        I::I32Eq,
        I::LocalGet(tag),
        I::I32Const(TAG_DUR),
        I::I32Eq,
        I::I32Or,
        I::If(BlockType::Empty),
        I::LocalGet(a),
        load64(8),
        I::LocalSet(x),
        I::LocalGet(c),
        load64(8),
        I::LocalSet(y),
        I::End,
        I::LocalGet(tag),
        I::I32Const(TAG_LEVEL),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(a),
        load32(4),
        I::I64ExtendI32U,
        I::LocalSet(x),
        I::LocalGet(c),
        load32(4),
        I::I64ExtendI32U,
        I::LocalSet(y),
        I::End,
        I::LocalGet(tag),
        I::I32Const(TAG_TS),
        I::I32Eq,
        I::LocalGet(tag),
        I::I32Const(TAG_DUR),
        I::I32Eq,
        I::I32Or,
        I::LocalGet(tag),
        I::I32Const(TAG_LEVEL),
        I::I32Eq,
        I::I32Or,
        I::I32Eqz,
    ]);
    b.emit(ret_if(2));
    b.emit([
        I::I32Const(-1),
        I::LocalGet(x),
        I::LocalGet(y),
        I::I64GtS,
        I::LocalGet(x),
        I::LocalGet(y),
        I::I64LtS,
        I::Select,
    ]);
    m.define("vm_ord", b.finish());
    let ord = m.func("vm_ord");

    // vm_eq(a, b) -> 0/1, or 2 when incomparable (money in different currencies).
    let mut b = Body::new(2);
    let (a, c) = (0, 1);
    let tag = b.i32();
    b.emit([I::LocalGet(a), load32(0), I::LocalTee(tag), I::LocalGet(c), load32(0), I::I32Ne]);
    b.emit(ret_if(2));
    b.emit([I::LocalGet(tag), I::I32Const(TAG_STR), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([
        I::LocalGet(a),
        load32(4),
        I::LocalGet(a),
        load32(8),
        I::LocalGet(c),
        load32(4),
        I::LocalGet(c),
        load32(8),
        I::Call(eq),
        I::Return,
        I::End,
        I::LocalGet(tag),
        I::I32Const(TAG_BOOL),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(a),
        load32(4),
        I::LocalGet(c),
        load32(4),
        I::I32Eq,
        I::Return,
        I::End,
        I::LocalGet(a),
        I::LocalGet(c),
        I::Call(ord),
        I::LocalTee(tag),
        I::I32Const(2),
        I::I32Eq,
    ]);
    b.emit(ret_if(2));
    b.emit([I::LocalGet(tag), I::I32Eqz]);
    m.define("vm_eq", b.finish());
    let veq = m.func("vm_eq");

    // vm_member(v, items, n) -> 1 when v equals an item; else 2 if some item was incomparable; else 0.
    let mut b = Body::new(3);
    let (v, items, n) = (0, 1, 2);
    let (i, r, failed) = (b.i32(), b.i32(), b.i32());
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(v),
        I::LocalGet(items),
        I::LocalGet(i),
        I::I32Const(REC),
        I::I32Mul,
        I::I32Add,
        I::Call(veq),
        I::LocalTee(r),
        I::I32Const(1),
        I::I32Eq,
    ]);
    b.emit(ret_if(1));
    b.emit([
        I::LocalGet(r),
        I::I32Const(2),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(failed),
        I::End,
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::I32Const(2),
        I::I32Const(0),
        I::LocalGet(failed),
        I::Select,
    ]);
    m.define("vm_member", b.finish());
}

fn define_test(m: &mut ModuleBuilder) {
    let veq = m.func("vm_eq");
    let ord = m.func("vm_ord");
    let member = m.func("vm_member");
    let starts = m.func("vm_starts_with");
    let path_unsafe = m.func("vm_path_unsafe");
    // vm_test(v, kind, op, items, n, prefix_ptr, prefix_len) -> 0/1/2.
    let mut b = Body::new(7);
    let (v, kind, op, items, n, pp, pl) = (0, 1, 2, 3, 4, 5, 6);
    let (r, i, all) = (b.i32(), b.i32(), b.i32());
    // Compare
    b.emit([I::LocalGet(kind), I::I32Const(1), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([I::LocalGet(op), I::I32Const(2), I::I32LtU, I::If(BlockType::Empty)]);
    b.emit([I::LocalGet(v), I::LocalGet(items), I::Call(veq), I::LocalTee(r), I::I32Const(2), I::I32Eq]);
    b.emit(ret_if(2));
    b.emit([I::LocalGet(r), I::LocalGet(op), I::I32Xor, I::Return, I::End]);
    b.emit([I::LocalGet(v), I::LocalGet(items), I::Call(ord), I::LocalTee(r), I::I32Const(2), I::I32Eq]);
    b.emit(ret_if(2));
    for (code, when) in [(2, [-1, -1]), (3, [-1, 0]), (4, [1, 1]), (5, [0, 1])] {
        b.emit([
            I::LocalGet(op),
            I::I32Const(code),
            I::I32Eq,
            I::If(BlockType::Empty),
            I::LocalGet(r),
            I::I32Const(when[0]),
            I::I32Eq,
            I::LocalGet(r),
            I::I32Const(when[1]),
            I::I32Eq,
            I::I32Or,
            I::Return,
            I::End,
        ]);
    }
    b.emit([I::I32Const(2), I::Return, I::End]);
    // In / NotIn
    b.emit([
        I::LocalGet(kind),
        I::I32Const(2),
        I::I32Eq,
        I::LocalGet(kind),
        I::I32Const(3),
        I::I32Eq,
        I::I32Or,
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::LocalGet(v),
        I::LocalGet(items),
        I::LocalGet(n),
        I::Call(member),
        I::LocalTee(r),
        I::I32Const(2),
        I::I32Eq,
    ]);
    b.emit(ret_if(2));
    b.emit([I::LocalGet(r), I::LocalGet(kind), I::I32Const(3), I::I32Eq, I::I32Xor, I::Return, I::End]);
    // Under / NotUnder: text only.
    b.emit([
        I::LocalGet(kind),
        I::I32Const(4),
        I::I32Eq,
        I::LocalGet(kind),
        I::I32Const(5),
        I::I32Eq,
        I::I32Or,
        I::If(BlockType::Empty),
    ]);
    b.emit([I::LocalGet(v), load32(0), I::I32Const(TAG_STR), I::I32Ne]);
    b.emit(ret_if(2));
    // A value with a dot segment, `//`, a backslash, NUL or percent-encoded separator is never under anything.
    b.emit([I::LocalGet(v), load32(4), I::LocalGet(v), load32(8), I::Call(path_unsafe)]);
    b.emit(ret_if(2));
    b.emit([
        I::LocalGet(v),
        load32(4),
        I::LocalGet(v),
        load32(8),
        I::LocalGet(pp),
        I::LocalGet(pl),
        I::Call(starts),
        I::LocalGet(kind),
        I::I32Const(5),
        I::I32Eq,
        I::I32Xor,
        I::Return,
        I::End,
    ]);
    // Sets only from here.
    b.emit([I::LocalGet(v), load32(0), I::I32Const(TAG_SET), I::I32Ne]);
    b.emit(ret_if(2));
    // Contains / NotContains: the item is a member of the set.
    b.emit([
        I::LocalGet(kind),
        I::I32Const(6),
        I::I32Eq,
        I::LocalGet(kind),
        I::I32Const(7),
        I::I32Eq,
        I::I32Or,
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::LocalGet(items),
        I::LocalGet(v),
        load32(4),
        I::LocalGet(v),
        load32(8),
        I::Call(member),
        I::LocalTee(r),
        I::I32Const(2),
        I::I32Eq,
    ]);
    b.emit(ret_if(2));
    b.emit([I::LocalGet(r), I::LocalGet(kind), I::I32Const(7), I::I32Eq, I::I32Xor, I::Return, I::End]);
    // Within / NotWithin: every element is one of the items; the first error stops.
    b.emit([I::I32Const(1), I::LocalSet(all)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(v),
        load32(8),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(v),
        load32(4),
        I::LocalGet(i),
        I::I32Const(REC),
        I::I32Mul,
        I::I32Add,
        I::LocalGet(items),
        I::LocalGet(n),
        I::Call(member),
        I::LocalTee(r),
        I::I32Const(2),
        I::I32Eq,
    ]);
    b.emit(ret_if(2));
    b.emit([
        I::LocalGet(all),
        I::LocalGet(r),
        I::I32And,
        I::LocalSet(all),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(all),
        I::LocalGet(kind),
        I::I32Const(9),
        I::I32Eq,
        I::I32Xor,
    ]);
    m.define("vm_test", b.finish());
}

fn define_decode(m: &mut ModuleBuilder) {
    let kind = m.func("json_kind");
    let str_of = m.func("vm_str");
    let start = m.func("json_start");
    let end = m.func("json_end");
    let count = m.func("json_count");
    let next = m.func("json_next");
    let alloc = m.func("vm_alloc");
    let dec = m.func("vm_parse_decimal");
    let money = m.func("vm_parse_money");
    let ts = m.func("vm_parse_timestamp");
    let dur = m.func("vm_parse_duration");
    let u64p = m.func("vm_parse_u64");
    let eq = m.func("vm_bytes_eq");
    let this = m.func("vm_decode");

    // vm_decode_text(p, l, cls, variants, nvariants, dst, unused) -> ok: a JSON string's content as `cls`.
    let mut b = Body::new(7);
    let (p, l, cls, vars, nvars, dst) = (0, 1, 2, 3, 4, 5);
    let i = b.i32();
    let variant = b.i32();
    b.emit([I::LocalGet(p), I::I32Eqz, I::LocalGet(l), I::I32Eqz, I::I32And]);
    // (0, 0) is the exhausted scratch, see vm_str: fail closed.
    b.emit([I::If(BlockType::Empty), I::I32Const(0), I::Return, I::End]);
    b.emit([
        I::LocalGet(cls),
        I::I32Const(CLS_STRING),
        I::I32Eq,
        I::LocalGet(cls),
        I::I32Const(CLS_ENUM),
        I::I32Eq,
        I::I32Or,
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::LocalGet(dst),
        I::I32Const(TAG_STR),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(p),
        store32(4),
        I::LocalGet(dst),
        I::LocalGet(l),
        store32(8),
    ]);
    b.emit([I::LocalGet(cls), I::I32Const(CLS_STRING), I::I32Eq]);
    b.emit(ret_if(1));
    // An enum value must be one of the variants.
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(nvars),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(p),
        I::LocalGet(l),
        I::LocalGet(vars),
        I::LocalGet(i),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(variant),
        load32(0),
        I::LocalGet(variant),
        load32(4),
        I::Call(eq),
    ]);
    b.emit(ret_if(1));
    b.emit([
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::I32Const(0),
        I::Return,
        I::End,
    ]);
    for (c, f) in [(CLS_DEC, dec), (CLS_MONEY, money), (CLS_TS, ts), (CLS_DUR, dur)] {
        b.emit([
            I::LocalGet(cls),
            I::I32Const(c),
            I::I32Eq,
            I::If(BlockType::Empty),
            I::LocalGet(p),
            I::LocalGet(l),
            I::LocalGet(dst),
            I::Call(f),
            I::Return,
            I::End,
        ]);
    }
    b.emit([I::I32Const(0)]);
    m.define("vm_decode_text", b.finish());
    let text = m.func("vm_decode_text");

    // vm_decode(tok, cls, elem_cls, variants, nvariants, dst) -> ok: a request value as its declared type.
    let mut b = Body::new(6);
    let (t, cls, ecls, vars, nvars, dst) = (0, 1, 2, 3, 4, 5);
    let (k, s, n, i, el, arr, ptr, len) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let packed = b.i64();
    b.emit([I::LocalGet(t), I::Call(kind), I::LocalSet(k)]);
    // Strings (every class but int, bool and set accepts one).
    b.emit([I::LocalGet(k), I::I32Const(5), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([
        I::LocalGet(t),
        I::Call(str_of),
        I::LocalTee(packed),
        I::I64Const(32),
        I::I64ShrU,
        I::I32WrapI64,
        I::LocalSet(ptr),
        I::LocalGet(packed),
        I::I32WrapI64,
        I::LocalSet(len),
        I::LocalGet(ptr),
        I::LocalGet(len),
        I::LocalGet(cls),
        I::LocalGet(vars),
        I::LocalGet(nvars),
        I::LocalGet(dst),
        I::I32Const(0),
        I::Call(text),
        I::Return,
        I::End,
    ]);
    // Numbers: int, decimal (their text), duration (whole seconds).
    b.emit([I::LocalGet(k), I::I32Const(4), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([
        I::LocalGet(t),
        I::Call(start),
        I::LocalSet(s),
        I::LocalGet(t),
        I::Call(end),
        I::LocalGet(s),
        I::I32Sub,
        I::LocalSet(n),
    ]);
    b.emit([
        I::LocalGet(cls),
        I::I32Const(CLS_DEC),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(s),
        I::LocalGet(n),
        I::LocalGet(dst),
        I::Call(dec),
        I::Return,
        I::End,
    ]);
    b.emit([I::LocalGet(cls), I::I32Const(CLS_INT), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([I::LocalGet(s), I::LocalGet(n), I::LocalGet(dst), I::Call(dec), I::I32Eqz]);
    b.emit(ret_if(0));
    // An int has no fractional part (5.0 is 5).
    b.emit([I::LocalGet(dst), load32(20), I::I32Eqz, I::Return, I::End]);
    b.emit([I::LocalGet(cls), I::I32Const(CLS_DUR), I::I32Eq, I::If(BlockType::Empty)]);
    // JSON numbers are never `+…`, so vm_parse_u64 is serde's as_u64 here; then at most i64::MAX.
    b.emit([I::LocalGet(s), I::LocalGet(n), I::LocalGet(dst), I::Call(u64p), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(dst), load64(8), I::I64Const(0), I::I64LtS]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(dst), I::I32Const(TAG_DUR), store32(0), I::I32Const(1), I::Return, I::End]);
    b.emit([I::I32Const(0), I::Return, I::End]);
    // Booleans.
    b.emit([
        I::LocalGet(cls),
        I::I32Const(CLS_BOOL),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(k),
        I::I32Const(2),
        I::I32Eq,
        I::LocalGet(k),
        I::I32Const(3),
        I::I32Eq,
        I::I32Or,
        I::I32Eqz,
    ]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(dst),
        I::I32Const(TAG_BOOL),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(k),
        I::I32Const(3),
        I::I32Eq,
        store32(4),
        I::I32Const(1),
        I::Return,
        I::End,
    ]);
    // Sets: every element decodes as the element class.
    b.emit([I::LocalGet(cls), I::I32Const(CLS_SET), I::I32Ne, I::LocalGet(k), I::I32Const(6), I::I32Ne, I::I32Or]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(t),
        I::Call(count),
        I::LocalTee(n),
        I::I32Const(REC),
        I::I32Mul,
        I::Call(alloc),
        I::LocalTee(arr),
        I::I32Eqz,
        I::LocalGet(n),
        I::I32Const(0),
        I::I32Ne,
        I::I32And,
    ]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(t), I::I32Const(1), I::I32Add, I::LocalSet(el)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    // Elements are scalars: a recursive call with the element class (an element that is a set fails).
    b.emit([
        I::LocalGet(el),
        I::LocalGet(ecls),
        I::I32Const(0),
        I::LocalGet(vars),
        I::LocalGet(nvars),
        I::LocalGet(arr),
        I::LocalGet(i),
        I::I32Const(REC),
        I::I32Mul,
        I::I32Add,
        I::Call(this),
        I::I32Eqz,
    ]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(el),
        I::Call(next),
        I::LocalSet(el),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(dst),
        I::I32Const(TAG_SET),
        store32(0),
        I::LocalGet(dst),
        I::LocalGet(arr),
        store32(4),
        I::LocalGet(dst),
        I::LocalGet(n),
        store32(8),
        I::I32Const(1),
    ]);
    m.define("vm_decode", b.finish());
}

fn define_atom(m: &mut ModuleBuilder) {
    // vm_negative(record) -> 1 when the value is negative money or a set with a negative money element
    // (src/eval/cond.rs `negative`).
    let mut b = Body::new(1);
    let (i, e) = (b.i32(), b.i32());
    b.emit([I::LocalGet(0), load32(0), I::I32Const(TAG_MONEY), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([I::LocalGet(0), load32(4), I::Return, I::End]);
    b.emit([I::LocalGet(0), load32(0), I::I32Const(TAG_SET), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(0),
        load32(8),
        I::I32GeU,
        I::BrIf(1),
        I::LocalGet(0),
        load32(4),
        I::LocalGet(i),
        I::I32Const(REC),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::I32Const(TAG_MONEY),
        I::I32Eq,
        I::LocalGet(e),
        load32(4),
        I::I32And,
    ]);
    b.emit(ret_if(1));
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End, I::I32Const(0)]);
    m.define("vm_negative", b.finish());
    let negative = m.func("vm_negative");
    let get = m.func("json_get");
    let decode = m.func("vm_decode");
    let test = m.func("vm_test");
    // vm_atom(attr, name_ptr, name_len, cls, elem_cls, variants, nvariants, test, op, items, n, prefix_ptr,
    // prefix_len) -> 0/1/2: fetches the attribute (2 when missing or mistyped) and applies the test. Values
    // decoded for the test live in the scratch only until it returns.
    let mut b = Body::new(13);
    let (attr, np, nl, cls, ecls, vars, nvars) = (0, 1, 2, 3, 4, 5, 6);
    let (tk, op, items, n, pp, pl) = (7, 8, 9, 10, 11, 12);
    let (save, r, obj, t, v) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let non_negative = b.i32();
    let val = slot::VAL as i32;
    b.emit([
        I::LocalGet(attr),
        I::I32Const(ATTR_NON_NEGATIVE),
        I::I32And,
        I::LocalSet(non_negative),
        I::LocalGet(attr),
        I::I32Const(0xff),
        I::I32And,
        I::LocalSet(attr),
    ]);
    b.emit([
        I::I32Const(slot::BUMP as i32),
        load32(0),
        I::LocalSet(save),
        I::I32Const(2),
        I::LocalSet(r),
        I::I32Const(val),
        I::LocalSet(v),
        I::Block(BlockType::Empty),
    ]);
    // While listing tools, arguments are unknown (3).
    b.emit([
        I::LocalGet(attr),
        I::I32Const(ATTR_ARG),
        I::I32Eq,
        I::I32Const(slot::LISTING as i32),
        load32(0),
        I::I32And,
        I::If(BlockType::Empty),
        I::I32Const(3),
        I::LocalSet(r),
        I::Br(1),
        I::End,
    ]);
    // Arguments and context attributes: a member of an object of the request.
    b.emit([
        I::LocalGet(attr),
        I::I32Const(ATTR_ARG),
        I::I32Eq,
        I::LocalGet(attr),
        I::I32Const(ATTR_CONTEXT),
        I::I32Eq,
        I::I32Or,
        I::If(BlockType::Empty),
        I::I32Const(tok::ARGUMENTS as i32),
        I::I32Const(tok::ATTRIBUTES as i32),
        I::LocalGet(attr),
        I::I32Const(ATTR_ARG),
        I::I32Eq,
        I::Select,
        load32(0),
        I::LocalTee(obj),
        I::I32Const(0),
        I::I32LtS,
        I::BrIf(1),
        I::LocalGet(obj),
        I::LocalGet(np),
        I::LocalGet(nl),
        I::Call(get),
        I::LocalTee(t),
        I::I32Const(0),
        I::I32LtS,
        I::BrIf(1),
        I::LocalGet(t),
        I::LocalGet(cls),
        I::LocalGet(ecls),
        I::LocalGet(vars),
        I::LocalGet(nvars),
        I::I32Const(val),
        I::Call(decode),
        I::I32Eqz,
        I::BrIf(1),
        I::LocalGet(non_negative),
        I::If(BlockType::Empty),
        I::I32Const(val),
        I::Call(negative),
        I::BrIf(2),
        I::End,
        I::End,
    ]);
    // Strings of the request: resource.id (optional) and subject.id.
    for (kind, p_slot, l_slot, guard) in [
        (ATTR_RESOURCE, slot::RES_P, slot::RES_L, Some(slot::HAS_RES)),
        (ATTR_SUBJECT, slot::SUBJ_P, slot::SUBJ_L, None),
    ] {
        b.emit([I::LocalGet(attr), I::I32Const(kind), I::I32Eq, I::If(BlockType::Empty)]);
        if let Some(g) = guard {
            // Absent: an error when deciding, unknown (3) when listing.
            b.emit([
                I::I32Const(g as i32),
                load32(0),
                I::I32Eqz,
                I::If(BlockType::Empty),
                I::I32Const(3),
                I::I32Const(2),
                I::I32Const(slot::LISTING as i32),
                load32(0),
                I::Select,
                I::LocalSet(r),
                I::Br(2),
                I::End,
            ]);
        }
        b.emit([
            I::I32Const(val),
            I::I32Const(TAG_STR),
            store32(0),
            I::I32Const(val),
            I::I32Const(p_slot as i32),
            load32(0),
            store32(4),
            I::I32Const(val),
            I::I32Const(l_slot as i32),
            load32(0),
            store32(8),
            I::End,
        ]);
    }
    // subject.scopes: the credential's scopes, an error without a credential or without scopes.
    b.emit([
        I::LocalGet(attr),
        I::I32Const(ATTR_SCOPES),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(tok::SCOPES as i32),
        load32(0),
        I::LocalTee(t),
        I::I32Const(0),
        I::I32LtS,
        I::BrIf(1),
        I::LocalGet(t),
        I::I32Const(CLS_SET),
        I::I32Const(CLS_STRING),
        I::I32Const(0),
        I::I32Const(0),
        I::I32Const(val),
        I::Call(decode),
        I::I32Eqz,
        I::BrIf(1),
        I::End,
        I::LocalGet(attr),
        I::I32Const(ATTR_NOW),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(val),
        I::I32Const(TAG_TS),
        store32(0),
        I::I32Const(val),
        I::I32Const(slot::NOW as i32),
        load64(0),
        store64(8),
        I::End,
        I::LocalGet(attr),
        I::I32Const(ATTR_ATTEMPT),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(slot::HAS_ATTEMPT as i32),
        load32(0),
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::I32Const(3),
        I::I32Const(2),
        I::I32Const(slot::LISTING as i32),
        load32(0),
        I::Select,
        I::LocalSet(r),
        I::Br(2),
        I::End,
        I::I32Const(slot::ATTEMPT as i32),
        I::LocalSet(v),
        I::End,
        // level: the called tool's level, passed by the caller in name_ptr.
        I::LocalGet(attr),
        I::I32Const(ATTR_LEVEL),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(val),
        I::I32Const(TAG_LEVEL),
        store32(0),
        I::I32Const(val),
        I::LocalGet(np),
        store32(4),
        I::End,
        I::LocalGet(v),
        I::LocalGet(tk),
        I::LocalGet(op),
        I::LocalGet(items),
        I::LocalGet(n),
        I::LocalGet(pp),
        I::LocalGet(pl),
        I::Call(test),
        I::LocalSet(r),
        I::End,
        I::I32Const(slot::BUMP as i32),
        I::LocalGet(save),
        store32(0),
        I::LocalGet(r),
    ]);
    m.define("vm_atom", b.finish());
    let _ = load8;
}
