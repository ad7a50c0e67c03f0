//! Byte-string primitives of the VM: equality, ordering, prefixes, hashing, the scratch bump allocator and the
//! raw bytes of a JSON string token.

use wasm_encoder::{BlockType, Instruction as I, ValType};

use super::super::asm::{load32, load8, store32, Body};
use super::super::layout::{TAPE_BASE, TAPE_TOKEN_SIZE};
use super::super::module::ModuleBuilder;
use super::{slot, VM_SCRATCH, VM_SCRATCH_STRINGS};

const I32: ValType = ValType::I32;

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("vm_bytes_eq", &[I32, I32, I32, I32], &[I32]);
    m.declare("vm_bytes_cmp", &[I32, I32, I32, I32], &[I32]);
    m.declare("vm_starts_with", &[I32, I32, I32, I32], &[I32]);
    m.declare("vm_hash", &[I32, I32], &[I32]);
    m.declare("vm_alloc", &[I32], &[I32]);
    m.declare("vm_str", &[I32], &[ValType::I64]);
    m.declare("vm_blank", &[I32, I32], &[I32]);
    m.declare("vm_path_unsafe", &[I32, I32], &[I32]);
}

pub fn define(m: &mut ModuleBuilder) {
    m.define("vm_bytes_cmp", bytes_cmp());
    let cmp = m.func("vm_bytes_cmp");
    // Equal lengths and equal bytes.
    let mut b = Body::new(4);
    b.emit([
        I::LocalGet(1),
        I::LocalGet(3),
        I::I32Ne,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::Return,
        I::End,
        I::LocalGet(0),
        I::LocalGet(1),
        I::LocalGet(2),
        I::LocalGet(3),
        I::Call(cmp),
        I::I32Eqz,
    ]);
    m.define("vm_bytes_eq", b.finish());
    // (p, l) starts with (q, k): k <= l and the first k bytes compare equal.
    let mut b = Body::new(4);
    b.emit([
        I::LocalGet(3),
        I::LocalGet(1),
        I::I32GtU,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::Return,
        I::End,
        I::LocalGet(0),
        I::LocalGet(3),
        I::LocalGet(2),
        I::LocalGet(3),
        I::Call(cmp),
        I::I32Eqz,
    ]);
    m.define("vm_starts_with", b.finish());
    m.define("vm_hash", hash());
    m.define("vm_alloc", alloc());
    m.define("vm_str", string_of_token(m));
    m.define("vm_blank", blank());
    m.define("vm_path_unsafe", path_unsafe());
}

/// vm_blank(p, l) -> 1 when the UTF-8 bytes are empty or only white space (Unicode `White_Space`, as Rust's
/// `char::is_whitespace`: U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
/// U+205F, U+3000). The bytes are valid UTF-8, so a lead byte's continuation bytes lie inside the string; the
/// word read at the cursor may extend past the end, but only its bytes of the current character are compared.
fn blank() -> wasm_encoder::Function {
    let mut b = Body::new(2);
    let (p, l) = (0, 1);
    let (i, w, n) = (b.i32(), b.i32(), b.i32());
    let is = |b: &mut Body, mask: i32, value: i32, width: i32| {
        b.emit([
            I::LocalGet(w),
            I::I32Const(mask),
            I::I32And,
            I::I32Const(value),
            I::I32Eq,
            I::If(BlockType::Empty),
            I::I32Const(width),
            I::LocalSet(n),
            I::End,
        ]);
    };
    b.emit([I::Loop(BlockType::Empty), I::LocalGet(i), I::LocalGet(l), I::I32GeU, I::If(BlockType::Empty)]);
    b.emit([I::I32Const(1), I::Return, I::End]);
    b.emit([I::LocalGet(p), I::LocalGet(i), I::I32Add, load32(0), I::LocalSet(w), I::I32Const(0), I::LocalSet(n)]);
    // One byte: space, \t \n \v \f \r.
    is(&mut b, 0xff, 0x20, 1);
    b.emit([
        I::LocalGet(w),
        I::I32Const(0xff),
        I::I32And,
        I::I32Const(9),
        I::I32Sub,
        I::I32Const(5),
        I::I32LtU,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(n),
        I::End,
    ]);
    // Two bytes: U+0085, U+00A0. Three: U+1680, U+2028, U+2029, U+202F, U+205F, U+3000, U+2000..U+200A.
    for (mask, value, width) in [
        (0xffff, 0x85c2, 2),
        (0xffff, 0xa0c2, 2),
        (0xff_ffff, 0x80_9ae1, 3),
        (0xff_ffff, 0xa8_80e2, 3),
        (0xff_ffff, 0xa9_80e2, 3),
        (0xff_ffff, 0xaf_80e2, 3),
        (0xff_ffff, 0x9f_81e2, 3),
        (0xff_ffff, 0x80_80e3, 3),
    ] {
        is(&mut b, mask, value, width);
    }
    b.emit([
        I::LocalGet(w),
        I::I32Const(0xffff),
        I::I32And,
        I::I32Const(0x80e2),
        I::I32Eq,
        I::LocalGet(w),
        I::I32Const(16),
        I::I32ShrU,
        I::I32Const(0xff),
        I::I32And,
        I::I32Const(0x80),
        I::I32Sub,
        I::I32Const(11),
        I::I32LtU,
        I::I32And,
        I::If(BlockType::Empty),
        I::I32Const(3),
        I::LocalSet(n),
        I::End,
    ]);
    b.emit([I::LocalGet(n), I::I32Eqz, I::If(BlockType::Empty), I::I32Const(0), I::Return, I::End]);
    b.emit([I::LocalGet(i), I::LocalGet(n), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::I32Const(0)]);
    b.finish()
}

/// vm_path_unsafe(p, l) -> 1 when a value cannot be tested with `under` (src/eval/cond.rs `unsafe_path`): a
/// backslash or NUL byte, `//`, a `.` or `..` segment, or `%2f %5c %2e %00 %25` in either case.
fn path_unsafe() -> wasm_encoder::Function {
    let mut b = Body::new(2);
    let (p, l) = (0, 1);
    let (i, c, d, e) = (b.i32(), b.i32(), b.i32(), b.i32());
    // Pushes the byte at i + k, or 0x2f (`/`) at the end of the string (a segment ends there too).
    let at = |b: &mut Body, k: i32| {
        b.emit([
            I::LocalGet(p),
            I::LocalGet(i),
            I::I32Add,
            load8(k as u64),
            I::I32Const(0x2f),
            I::LocalGet(i),
            I::I32Const(k),
            I::I32Add,
            I::LocalGet(l),
            I::I32LtU,
            I::Select,
        ]);
    };
    b.emit([I::Loop(BlockType::Empty), I::LocalGet(i), I::LocalGet(l), I::I32GeU, I::If(BlockType::Empty)]);
    b.emit([I::I32Const(0), I::Return, I::End]);
    at(&mut b, 0);
    b.emit([I::LocalSet(c)]);
    at(&mut b, 1);
    b.emit([I::LocalSet(d)]);
    at(&mut b, 2);
    b.emit([I::LocalSet(e)]);
    let ret1 = [I::If(BlockType::Empty), I::I32Const(1), I::Return, I::End];
    // A backslash or NUL; `//` (the end of the string does not count as a second `/` here).
    b.emit([I::LocalGet(c), I::I32Const(0x5c), I::I32Eq, I::LocalGet(c), I::I32Eqz, I::I32Or]);
    b.emit(ret1.clone());
    b.emit([
        I::LocalGet(c),
        I::I32Const(0x2f),
        I::I32Eq,
        I::LocalGet(d),
        I::I32Const(0x2f),
        I::I32Eq,
        I::I32And,
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalGet(l),
        I::I32LtU,
        I::I32And,
    ]);
    b.emit(ret1.clone());
    // A percent escape (three bytes inside the string).
    b.emit([
        I::LocalGet(c),
        I::I32Const(0x25),
        I::I32Eq,
        I::LocalGet(i),
        I::I32Const(2),
        I::I32Add,
        I::LocalGet(l),
        I::I32LtU,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    for (first, seconds) in [(b'2', &b"fFeE5"[..]), (b'5', &b"cC"[..]), (b'0', &b"0"[..])] {
        for &second in seconds {
            b.emit([
                I::LocalGet(d),
                I::I32Const(first as i32),
                I::I32Eq,
                I::LocalGet(e),
                I::I32Const(second as i32),
                I::I32Eq,
                I::I32And,
            ]);
            b.emit(ret1.clone());
        }
    }
    b.emit([I::End]);
    // A `.` or `..` segment: at a segment start, `.` then the end or `/`, or `..` then the end or `/`.
    b.emit([I::LocalGet(i), I::I32Eqz]);
    b.emit([I::If(BlockType::Result(I32)), I::I32Const(1), I::Else]);
    b.emit([
        I::LocalGet(p),
        I::LocalGet(i),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        load8(0),
        I::I32Const(0x2f),
        I::I32Eq,
    ]);
    b.emit([I::End, I::LocalGet(c), I::I32Const(0x2e), I::I32Eq, I::I32And, I::If(BlockType::Empty)]);
    b.emit([I::LocalGet(d), I::I32Const(0x2f), I::I32Eq]);
    b.emit(ret1.clone());
    b.emit([I::LocalGet(d), I::I32Const(0x2e), I::I32Eq, I::LocalGet(e), I::I32Const(0x2f), I::I32Eq, I::I32And]);
    b.emit(ret1);
    b.emit([I::End]);
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::I32Const(0)]);
    b.finish()
}

/// Byte order of two byte strings: -1, 0 or 1.
fn bytes_cmp() -> wasm_encoder::Function {
    let mut b = Body::new(4);
    let (p, l, q, k) = (0, 1, 2, 3);
    let i = b.i32();
    let n = b.i32();
    let x = b.i32();
    let y = b.i32();
    b.emit([
        // n = min(l, k)
        I::LocalGet(l),
        I::LocalGet(k),
        I::LocalGet(l),
        I::LocalGet(k),
        I::I32LtU,
        I::Select,
        I::LocalSet(n),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
        I::LocalGet(p),
        I::LocalGet(i),
        I::I32Add,
        load8(0),
        I::LocalSet(x),
        I::LocalGet(q),
        I::LocalGet(i),
        I::I32Add,
        load8(0),
        I::LocalSet(y),
        I::LocalGet(x),
        I::LocalGet(y),
        I::I32Ne,
        I::If(BlockType::Empty),
        I::I32Const(-1),
        I::I32Const(1),
        I::LocalGet(x),
        I::LocalGet(y),
        I::I32LtU,
        I::Select,
        I::Return,
        I::End,
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        // A common prefix: the shorter string comes first.
        I::LocalGet(l),
        I::LocalGet(k),
        I::I32LtU,
        I::If(BlockType::Empty),
        I::I32Const(-1),
        I::Return,
        I::End,
        I::LocalGet(l),
        I::LocalGet(k),
        I::I32GtU,
    ]);
    b.finish()
}

/// FNV-1a (32 bit) of a byte string: the key of the compile-time name tables.
fn hash() -> wasm_encoder::Function {
    let mut b = Body::new(2);
    let h = b.i32();
    let i = b.i32();
    b.emit([
        I::I32Const(0x811c9dc5u32 as i32),
        I::LocalSet(h),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(1),
        I::I32GeU,
        I::BrIf(1),
        I::LocalGet(h),
        I::LocalGet(0),
        I::LocalGet(i),
        I::I32Add,
        load8(0),
        I::I32Xor,
        I::I32Const(0x01000193),
        I::I32Mul,
        I::LocalSet(h),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(h),
    ]);
    b.finish()
}

/// The same hash at compile time.
pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c9dc5u32, |h, &b| (h ^ b as u32).wrapping_mul(0x01000193))
}

/// Bump allocation in the VM scratch; 0 when it is exhausted (callers treat that as an error, never trap).
fn alloc() -> wasm_encoder::Function {
    let mut b = Body::new(1);
    let at = b.i32();
    b.emit([
        I::I32Const(slot::BUMP as i32),
        load32(0),
        I::LocalTee(at),
        I::LocalGet(0),
        I::I32Add,
        I::I32Const((VM_SCRATCH + VM_SCRATCH_STRINGS) as i32),
        I::I32GtU,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::Return,
        I::End,
        I::I32Const(slot::BUMP as i32),
        I::LocalGet(at),
        I::LocalGet(0),
        I::I32Add,
        store32(0),
        I::LocalGet(at),
    ]);
    b.finish()
}

/// `(ptr << 32) | len` of a string token's raw bytes: the input itself when it has no escapes, else a copy
/// unescaped into the scratch. (0, 0) if the scratch is exhausted — a string of length 0 at address 0, which
/// callers distinguish from a real empty string by the address.
fn string_of_token(m: &ModuleBuilder) -> wasm_encoder::Function {
    let unescape = m.func("json_str_unescape");
    let alloc = m.func("vm_alloc");
    let mut b = Body::new(1);
    let t = b.i32();
    let start = b.i32();
    let end = b.i32();
    let at = b.i32();
    let len = b.i32();
    b.emit([
        I::LocalGet(0),
        I::I32Const(TAPE_TOKEN_SIZE as i32),
        I::I32Mul,
        I::I32Const(TAPE_BASE as i32),
        I::I32Add,
        I::LocalTee(t),
        load32(4),
        I::LocalSet(start),
        I::LocalGet(t),
        load32(8),
        I::LocalSet(end),
        I::LocalGet(t),
        load8(1),
        I::I32Const(1),
        I::I32And,
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::LocalGet(start),
        I::I64ExtendI32U,
        I::I64Const(32),
        I::I64Shl,
        I::LocalGet(end),
        I::LocalGet(start),
        I::I32Sub,
        I::I64ExtendI32U,
        I::I64Or,
        I::Return,
        I::End,
        // Unescaping never lengthens a string.
        I::LocalGet(end),
        I::LocalGet(start),
        I::I32Sub,
        I::Call(alloc),
        I::LocalTee(at),
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::I64Const(0),
        I::Return,
        I::End,
        I::LocalGet(0),
        I::LocalGet(at),
        I::Call(unescape),
        I::LocalSet(len),
        I::LocalGet(at),
        I::I64ExtendI32U,
        I::I64Const(32),
        I::I64Shl,
        I::LocalGet(len),
        I::I64ExtendI32U,
        I::I64Or,
    ]);
    b.finish()
}
