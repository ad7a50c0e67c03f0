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
