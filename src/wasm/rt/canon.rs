//! The argument digest of `binds arguments` approvals, computed in the module exactly as
//! [`crate::eval::argument_digest`] computes it: `sha256:` + lowercase hex SHA-256 of the canonical JSON of
//! `{"arguments": A, "tool": T}` (docs/requests.md). The canonical text is never materialized whole: it is written into
//! a small stream buffer whose full 64-byte blocks are hashed whenever it passes [`FLUSH_AT`] bytes, so the memory used
//! does not depend on the size of the arguments (only the key sort does, see below).
//!
//! Exported to the rest of the runtime:
//! - `digest_args(args_tok: i32, tool_ptr: i32, tool_len: i32, out: i32)`: writes the 71 ASCII bytes
//!   `sha256:<64 lowercase hex>` at `out`. `args_tok` is the tape token of the arguments value (any kind; the
//!   interpreter only digests objects), or -1 for `{}`; the tool name is `tool_len` raw (unescaped) UTF-8 bytes at
//!   `tool_ptr`, which may lie anywhere except in this file's scratch sub-range.
//! - `canon_write(tok: i32, dst: i32) -> i32`: appends the canonical JSON of the tape value `tok` at the stream cursor
//!   `dst` and returns the new cursor. Only meaningful inside a digest (it hashes and shifts the buffer as it goes), so
//!   `dst` must be a cursor of the stream buffer; `digest_args` is the one caller today.
//!
//! The canonical form, value by value (the tape is `json.rs`'s: 16-byte tokens at `TAPE_BASE`):
//! - `null`, `true`, `false` as such;
//! - numbers as serde_json with `arbitrary_precision` prints them: the text as written, except that the exponent
//!   marker is written `e` and gains a `+` when it has no sign (`1E3` → `1e+3`, `1.50` → `1.50`, `-0` → `-0`);
//! - strings re-escaped minimally: `"` and `\` with a backslash, `\b \t \n \f \r` short forms, other control
//!   characters `\u00xx` (lowercase hex), everything else as UTF-8 bytes (`\/` → `/`, `\u00e9` → `é`, surrogate
//!   pairs combined). A string without escapes is copied as is;
//! - arrays in order; objects with their entries sorted by the unescaped key bytes (equivalently: by code points),
//!   and of duplicate keys only the last one, as serde_json's map keeps the last value (`json_parse` rejects
//!   duplicate keys, so this only matters for tapes built some other way).
//!
//! Objects are sorted by a Shell sort (insertion sort for small objects) over their key token indices with the token
//! index as tie-break, so equal keys stay in input order and the last one wins by skipping an entry whose key equals
//! the next entry's. Keys are compared on the raw bytes when neither has escapes, else by decoding code points.
//!
//! Cost (release, wasmtime, this 2-core machine): about 0.9 µs for a 107-byte argument object (its canonical text
//! is 3 SHA-256 blocks at about 0.2 µs each; see the ignored `digest_speed` test in tests/wasm_digest.rs).
//!
//! Memory: the first `MAX_INPUT` bytes of the scratch area, `SCRATCH_BASE..+MAX_INPUT`, are reserved for the digest
//! (the decision VM's scratch, `vm::VM_SCRATCH`, starts right after): [`super::sha256::SHA256_SCRATCH`] (256 bytes), then
//! [`CANON_SCRATCH`]`..+`[`CANON_SCRATCH_SIZE`]: the stream state and buffer (8.3 KiB), then the key-sort stack (4
//! bytes per key of each object on the current path; an input of `MAX_INPUT` bytes has at most `MAX_INPUT / 5` keys
//! (`"":0,`), 205 KiB, which fits; a guard keeps memory safe regardless).

use wasm_encoder::{BlockType, Function, InstructionSink, ValType};

use super::sha256::{SHA256_SCRATCH, SHA256_SCRATCH_SIZE};
use crate::wasm::layout::{MAX_INPUT, SCRATCH_BASE, SCRATCH_SIZE, TAPE_BASE};
use crate::wasm::module::{mem, ModuleBuilder};

/// Start of the scratch sub-range used by the canonical writer and the streaming digest.
pub const CANON_SCRATCH: u32 = SHA256_SCRATCH + SHA256_SCRATCH_SIZE;
/// Size of that sub-range (it runs to `SCRATCH_BASE + MAX_INPUT`).
pub const CANON_SCRATCH_SIZE: u32 = MAX_INPUT - SHA256_SCRATCH_SIZE;
/// The hash state of the digest in progress (8 words).
const STREAM_STATE: u32 = CANON_SCRATCH;
/// Bytes of canonical text already hashed (a u32).
const STREAM_TOTAL: u32 = CANON_SCRATCH + 32;
/// The stream buffer: canonical text not yet hashed.
const STREAM_BUF: u32 = CANON_SCRATCH + 64;
/// The buffer is flushed (its full blocks hashed) before a write when the cursor has reached this many bytes.
pub const FLUSH_AT: u32 = 4096;
/// Longest single write into the buffer (long strings and numbers are copied in chunks of this size).
const CHUNK: u32 = 4096;
/// The key-sort stack: from here to the end of the sub-range.
const ENTRIES: u32 = STREAM_BUF + FLUSH_AT + CHUNK + 1024;
const ENTRIES_END: u32 = CANON_SCRATCH + CANON_SCRATCH_SIZE;

const _: () = assert!(ENTRIES_END - ENTRIES >= 4 * (MAX_INPUT / 5));
const _: () = assert!(FLUSH_AT.is_multiple_of(64));
const _: () = assert!(ENTRIES_END <= SCRATCH_BASE + MAX_INPUT && MAX_INPUT <= SCRATCH_SIZE);

const I32: ValType = ValType::I32;

// Tape token fields.
const KIND: u64 = TAPE_BASE as u64;
const FLAGS: u64 = TAPE_BASE as u64 + 1;
const START: u64 = TAPE_BASE as u64 + 4;
const END: u64 = TAPE_BASE as u64 + 8;
const NEXT: u64 = TAPE_BASE as u64 + 12;

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("digest_args", &[I32, I32, I32, I32], &[]);
    m.declare("canon_write", &[I32, I32], &[I32]);
    m.declare("canon_value", &[I32, I32, I32], &[I32]);
    m.declare("canon_flush", &[I32], &[I32]);
    m.declare("canon_copy", &[I32, I32, I32], &[I32]);
    m.declare("canon_emit_cp", &[I32, I32], &[I32]);
    m.declare("canon_bytes", &[I32, I32, I32], &[I32]);
    m.declare("canon_hex4", &[I32], &[I32]);
    m.declare("canon_cp", &[I32], &[I32, I32]);
    m.declare("canon_string", &[I32, I32], &[I32]);
    m.declare("canon_number", &[I32, I32], &[I32]);
    m.declare("canon_key_cmp", &[I32, I32], &[I32]);
    m.declare("canon_sort", &[I32, I32], &[]);
}

pub fn define(m: &mut ModuleBuilder) {
    define_flush(m);
    define_copy(m);
    define_emit_cp(m);
    define_bytes(m);
    define_hex4(m);
    define_cp(m);
    define_string(m);
    define_number(m);
    define_key_cmp(m);
    define_sort(m);
    define_value(m);
    define_write(m);
    define_digest_args(m);
}

/// Flushes the stream buffer if the cursor in local `dst` has reached [`FLUSH_AT`]: afterwards at least `CHUNK`
/// bytes can be written at `dst`.
fn ensure(i: &mut InstructionSink<'_>, flush: u32, dst: u32) {
    i.local_get(dst).i32_const((STREAM_BUF + FLUSH_AT) as i32).i32_ge_u();
    i.if_(BlockType::Empty).local_get(dst).call(flush).local_set(dst).end();
}

/// Writes the byte `b` at local `dst` and advances it (no flush check).
fn put(i: &mut InstructionSink<'_>, dst: u32, b: u8) {
    i.local_get(dst).i32_const(i32::from(b)).i32_store8(mem(0, 1));
    i.local_get(dst).i32_const(1).i32_add().local_set(dst);
}

/// Pushes the address of the tape token in local `tok`, minus `TAPE_BASE` (the field constants add it back).
fn tok_addr(i: &mut InstructionSink<'_>, tok: u32) {
    i.local_get(tok).i32_const(4).i32_shl();
}

fn define_flush(m: &mut ModuleBuilder) {
    // (dst) -> dst
    const DST: u32 = 0;
    const FULL: u32 = 1;
    const REM: u32 = 2;
    let blocks = m.func("sha256_blocks");
    let mut f = Function::new([(2, I32)]);
    let mut i = f.instructions();
    i.local_get(DST).i32_const(STREAM_BUF as i32).i32_sub().local_tee(REM);
    i.i32_const(!63).i32_and().local_set(FULL);
    i.local_get(REM).i32_const(63).i32_and().local_set(REM);
    i.i32_const(STREAM_STATE as i32).i32_const(STREAM_BUF as i32).local_get(FULL).i32_const(6).i32_shr_u();
    i.call(blocks);
    i.i32_const(0).i32_const(0).i32_load(mem(STREAM_TOTAL as u64, 4)).local_get(FULL).i32_add();
    i.i32_store(mem(STREAM_TOTAL as u64, 4));
    i.i32_const(STREAM_BUF as i32);
    i.local_get(FULL).i32_const(STREAM_BUF as i32).i32_add();
    i.local_get(REM).memory_copy(0, 0);
    i.local_get(REM).i32_const(STREAM_BUF as i32).i32_add();
    i.end();
    m.define("canon_flush", f);
}

fn define_copy(m: &mut ModuleBuilder) {
    // (src, len, dst) -> dst: copies in chunks, flushing between them.
    const SRC: u32 = 0;
    const LEN: u32 = 1;
    const DST: u32 = 2;
    const N: u32 = 3;
    let flush = m.func("canon_flush");
    let mut f = Function::new([(1, I32)]);
    let mut i = f.instructions();
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(LEN).i32_eqz().br_if(1);
    ensure(&mut i, flush, DST);
    i.i32_const(CHUNK as i32).local_get(LEN).local_get(LEN).i32_const(CHUNK as i32).i32_gt_u().select().local_set(N);
    i.local_get(DST).local_get(SRC).local_get(N).memory_copy(0, 0);
    i.local_get(DST).local_get(N).i32_add().local_set(DST);
    i.local_get(SRC).local_get(N).i32_add().local_set(SRC);
    i.local_get(LEN).local_get(N).i32_sub().local_set(LEN);
    i.br(0);
    i.end().end();
    i.local_get(DST);
    i.end();
    m.define("canon_copy", f);
}

fn define_emit_cp(m: &mut ModuleBuilder) {
    // (cp, dst) -> dst: the code point minimally escaped or as UTF-8; at most 6 bytes, no flush check.
    const CP: u32 = 0;
    const DST: u32 = 1;
    const SHORT: u32 = 2;
    let mut short = [0u8; 32];
    for (c, s) in [(8, b'b'), (9, b't'), (10, b'n'), (12, b'f'), (13, b'r')] {
        short[c] = s;
    }
    let short_at = m.bytes(&short);
    let mut f = Function::new([(1, I32)]);
    let mut i = f.instructions();
    i.local_get(CP).i32_const(0x80).i32_lt_u().if_(BlockType::Empty);
    {
        // `"` and `\`
        i.local_get(CP).i32_const(0x22).i32_eq().local_get(CP).i32_const(0x5c).i32_eq().i32_or();
        i.if_(BlockType::Empty);
        i.local_get(DST).i32_const(0x5c).i32_store8(mem(0, 1));
        i.local_get(DST).local_get(CP).i32_store8(mem(1, 1));
        i.local_get(DST).i32_const(2).i32_add().return_();
        i.end();
        i.local_get(CP).i32_const(0x20).i32_lt_u().if_(BlockType::Empty);
        {
            i.local_get(CP).i32_load8_u(mem(short_at as u64, 1)).local_tee(SHORT).if_(BlockType::Empty);
            i.local_get(DST).i32_const(0x5c).i32_store8(mem(0, 1));
            i.local_get(DST).local_get(SHORT).i32_store8(mem(1, 1));
            i.local_get(DST).i32_const(2).i32_add().return_();
            i.end();
            // \u00XX
            i.local_get(DST).i32_const(i32::from_le_bytes(*b"\\u00")).i32_store(mem(0, 1));
            i.local_get(DST).local_get(CP).i32_const(4).i32_shr_u().i32_const(0x30).i32_add().i32_store8(mem(4, 1));
            // low nibble: '0'..'9' or 'a'..'f'
            i.local_get(DST);
            i.local_get(CP).i32_const(15).i32_and().local_tee(SHORT).i32_const(0x30).i32_add();
            i.local_get(SHORT).i32_const(0x57).i32_add();
            i.local_get(SHORT).i32_const(10).i32_lt_u().select();
            i.i32_store8(mem(5, 1));
            i.local_get(DST).i32_const(6).i32_add().return_();
        }
        i.end();
        i.local_get(DST).local_get(CP).i32_store8(mem(0, 1));
        i.local_get(DST).i32_const(1).i32_add().return_();
    }
    i.end();
    i.local_get(CP).i32_const(0x800).i32_lt_u().if_(BlockType::Empty);
    {
        i.local_get(DST).local_get(CP).i32_const(6).i32_shr_u().i32_const(0xc0).i32_or().i32_store8(mem(0, 1));
        i.local_get(DST).local_get(CP).i32_const(0x3f).i32_and().i32_const(0x80).i32_or().i32_store8(mem(1, 1));
        i.local_get(DST).i32_const(2).i32_add().return_();
    }
    i.end();
    i.local_get(CP).i32_const(0x10000).i32_lt_u().if_(BlockType::Empty);
    {
        i.local_get(DST).local_get(CP).i32_const(12).i32_shr_u().i32_const(0xe0).i32_or().i32_store8(mem(0, 1));
        i.local_get(DST).local_get(CP).i32_const(6).i32_shr_u().i32_const(0x3f).i32_and().i32_const(0x80).i32_or();
        i.i32_store8(mem(1, 1));
        i.local_get(DST).local_get(CP).i32_const(0x3f).i32_and().i32_const(0x80).i32_or().i32_store8(mem(2, 1));
        i.local_get(DST).i32_const(3).i32_add().return_();
    }
    i.end();
    i.local_get(DST).local_get(CP).i32_const(18).i32_shr_u().i32_const(0xf0).i32_or().i32_store8(mem(0, 1));
    i.local_get(DST).local_get(CP).i32_const(12).i32_shr_u().i32_const(0x3f).i32_and().i32_const(0x80).i32_or();
    i.i32_store8(mem(1, 1));
    i.local_get(DST).local_get(CP).i32_const(6).i32_shr_u().i32_const(0x3f).i32_and().i32_const(0x80).i32_or();
    i.i32_store8(mem(2, 1));
    i.local_get(DST).local_get(CP).i32_const(0x3f).i32_and().i32_const(0x80).i32_or().i32_store8(mem(3, 1));
    i.local_get(DST).i32_const(4).i32_add();
    i.end();
    m.define("canon_emit_cp", f);
}

fn define_bytes(m: &mut ModuleBuilder) {
    // (ptr, len, dst) -> dst: raw bytes as a minimally escaped JSON string, quotes included.
    const PTR: u32 = 0;
    const LEN: u32 = 1;
    const DST: u32 = 2;
    const END_P: u32 = 3;
    const B: u32 = 4;
    let flush = m.func("canon_flush");
    let emit = m.func("canon_emit_cp");
    let mut f = Function::new([(2, I32)]);
    let mut i = f.instructions();
    i.local_get(PTR).local_get(LEN).i32_add().local_set(END_P);
    ensure(&mut i, flush, DST);
    put(&mut i, DST, b'"');
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(PTR).local_get(END_P).i32_ge_u().br_if(1);
    ensure(&mut i, flush, DST);
    i.local_get(PTR).i32_load8_u(mem(0, 1)).local_tee(B);
    i.i32_const(0x20).i32_ge_u();
    i.local_get(B).i32_const(0x22).i32_ne().i32_and();
    i.local_get(B).i32_const(0x5c).i32_ne().i32_and();
    i.if_(BlockType::Empty);
    i.local_get(DST).local_get(B).i32_store8(mem(0, 1));
    i.local_get(DST).i32_const(1).i32_add().local_set(DST);
    i.else_();
    i.local_get(B).local_get(DST).call(emit).local_set(DST);
    i.end();
    i.local_get(PTR).i32_const(1).i32_add().local_set(PTR);
    i.br(0);
    i.end().end();
    ensure(&mut i, flush, DST);
    put(&mut i, DST, b'"');
    i.local_get(DST);
    i.end();
    m.define("canon_bytes", f);
}

fn define_hex4(m: &mut ModuleBuilder) {
    // (p) -> the value of the 4 hex digits at p (garbage, never a trap, for non-hex bytes):
    // hexval(c) = (c & 15) + 9 * (c >> 6). Locals: the accumulator (1) and the current byte (2).
    let mut f = Function::new([(2, I32)]);
    let mut i = f.instructions();
    i.i32_const(0).local_set(1);
    for k in 0..4 {
        i.local_get(1).i32_const(4).i32_shl();
        i.local_get(0).i32_load8_u(mem(k, 1)).local_tee(2).i32_const(15).i32_and();
        i.local_get(2).i32_const(6).i32_shr_u().i32_const(9).i32_mul().i32_add();
        i.i32_or().local_set(1);
    }
    i.local_get(1);
    i.end();
    m.define("canon_hex4", f);
}

fn define_cp(m: &mut ModuleBuilder) {
    // (p) -> (cp, p'): the code point at p in a JSON string's raw text, escape or UTF-8 (assumed well formed).
    const P: u32 = 0;
    const B: u32 = 1;
    const U: u32 = 2;
    const L: u32 = 3;
    let hex4 = m.func("canon_hex4");
    let mut esc = [0u8; 256];
    for (c, slot) in esc.iter_mut().enumerate() {
        *slot = c as u8;
    }
    for (c, v) in [(b'b', 8), (b'f', 12), (b'n', 10), (b'r', 13), (b't', 9)] {
        esc[usize::from(c)] = v;
    }
    let esc_at = m.bytes(&esc);
    let mut f = Function::new([(3, I32)]);
    let mut i = f.instructions();
    i.local_get(P).i32_load8_u(mem(0, 1)).local_tee(B).i32_const(0x5c).i32_ne().if_(BlockType::Empty);
    {
        i.local_get(B).i32_const(0x80).i32_lt_u().if_(BlockType::Empty);
        i.local_get(B).local_get(P).i32_const(1).i32_add().return_();
        i.end();
        i.local_get(B).i32_const(0xe0).i32_lt_u().if_(BlockType::Empty);
        i.local_get(B).i32_const(0x1f).i32_and().i32_const(6).i32_shl();
        i.local_get(P).i32_load8_u(mem(1, 1)).i32_const(0x3f).i32_and().i32_or();
        i.local_get(P).i32_const(2).i32_add().return_();
        i.end();
        i.local_get(B).i32_const(0xf0).i32_lt_u().if_(BlockType::Empty);
        i.local_get(B).i32_const(0x0f).i32_and().i32_const(12).i32_shl();
        i.local_get(P).i32_load8_u(mem(1, 1)).i32_const(0x3f).i32_and().i32_const(6).i32_shl().i32_or();
        i.local_get(P).i32_load8_u(mem(2, 1)).i32_const(0x3f).i32_and().i32_or();
        i.local_get(P).i32_const(3).i32_add().return_();
        i.end();
        i.local_get(B).i32_const(0x07).i32_and().i32_const(18).i32_shl();
        i.local_get(P).i32_load8_u(mem(1, 1)).i32_const(0x3f).i32_and().i32_const(12).i32_shl().i32_or();
        i.local_get(P).i32_load8_u(mem(2, 1)).i32_const(0x3f).i32_and().i32_const(6).i32_shl().i32_or();
        i.local_get(P).i32_load8_u(mem(3, 1)).i32_const(0x3f).i32_and().i32_or();
        i.local_get(P).i32_const(4).i32_add().return_();
    }
    i.end();
    i.local_get(P).i32_load8_u(mem(1, 1)).local_tee(B).i32_const(0x75).i32_ne().if_(BlockType::Empty);
    i.local_get(B).i32_load8_u(mem(esc_at as u64, 1)).local_get(P).i32_const(2).i32_add().return_();
    i.end();
    i.local_get(P).i32_const(2).i32_add().call(hex4).local_set(U);
    // a high surrogate followed by `\u` and a low surrogate: one supplementary code point
    i.local_get(U).i32_const(0xfc00).i32_and().i32_const(0xd800).i32_eq();
    i.local_get(P).i32_load16_u(mem(6, 1)).i32_const(i32::from(u16::from_le_bytes(*b"\\u"))).i32_eq().i32_and();
    i.if_(BlockType::Empty);
    i.local_get(P).i32_const(8).i32_add().call(hex4).local_tee(L).i32_const(0xfc00).i32_and();
    i.i32_const(0xdc00).i32_eq().if_(BlockType::Empty);
    i.local_get(U).i32_const(0xd800).i32_sub().i32_const(10).i32_shl();
    i.local_get(L).i32_const(0xdc00).i32_sub().i32_add().i32_const(0x10000).i32_add();
    i.local_get(P).i32_const(12).i32_add().return_();
    i.end();
    i.end();
    i.local_get(U).local_get(P).i32_const(6).i32_add();
    i.end();
    m.define("canon_cp", f);
}

fn define_string(m: &mut ModuleBuilder) {
    // (tok, dst) -> dst
    const TOK: u32 = 0;
    const DST: u32 = 1;
    const P: u32 = 2;
    const END_P: u32 = 3;
    const B: u32 = 4;
    let flush = m.func("canon_flush");
    let copy = m.func("canon_copy");
    let cp = m.func("canon_cp");
    let emit = m.func("canon_emit_cp");
    let mut f = Function::new([(3, I32)]);
    let mut i = f.instructions();
    tok_addr(&mut i, TOK);
    i.i32_load(mem(START, 4)).local_set(P);
    tok_addr(&mut i, TOK);
    i.i32_load(mem(END, 4)).local_set(END_P);
    ensure(&mut i, flush, DST);
    put(&mut i, DST, b'"');
    tok_addr(&mut i, TOK);
    i.i32_load8_u(mem(FLAGS, 1)).i32_const(1).i32_and().i32_eqz().if_(BlockType::Empty);
    {
        // no escapes: the raw bytes are already canonical
        i.local_get(P).local_get(END_P).local_get(P).i32_sub().local_get(DST).call(copy).local_set(DST);
    }
    i.else_();
    {
        i.block(BlockType::Empty).loop_(BlockType::Empty);
        i.local_get(P).local_get(END_P).i32_ge_u().br_if(1);
        ensure(&mut i, flush, DST);
        i.local_get(P).i32_load8_u(mem(0, 1)).local_tee(B).i32_const(0x5c).i32_eq().if_(BlockType::Empty);
        i.local_get(P).call(cp).local_set(P).local_get(DST).call(emit).local_set(DST);
        i.else_();
        i.local_get(DST).local_get(B).i32_store8(mem(0, 1));
        i.local_get(DST).i32_const(1).i32_add().local_set(DST);
        i.local_get(P).i32_const(1).i32_add().local_set(P);
        i.end();
        i.br(0);
        i.end().end();
    }
    i.end();
    ensure(&mut i, flush, DST);
    put(&mut i, DST, b'"');
    i.local_get(DST);
    i.end();
    m.define("canon_string", f);
}

fn define_number(m: &mut ModuleBuilder) {
    // (tok, dst) -> dst: the text with its exponent marker normalized to `e` and an explicit sign.
    const TOK: u32 = 0;
    const DST: u32 = 1;
    const START_P: u32 = 2;
    const END_P: u32 = 3;
    const P: u32 = 4;
    const B: u32 = 5;
    let flush = m.func("canon_flush");
    let copy = m.func("canon_copy");
    let mut f = Function::new([(4, I32)]);
    let mut i = f.instructions();
    tok_addr(&mut i, TOK);
    i.i32_load(mem(START, 4)).local_tee(START_P).local_set(P);
    tok_addr(&mut i, TOK);
    i.i32_load(mem(END, 4)).local_set(END_P);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(P).local_get(END_P).i32_ge_u().br_if(1);
    i.local_get(P).i32_load8_u(mem(0, 1)).i32_const(0x20).i32_or().i32_const(i32::from(b'e')).i32_eq().br_if(1);
    i.local_get(P).i32_const(1).i32_add().local_set(P);
    i.br(0);
    i.end().end();
    i.local_get(START_P).local_get(P).local_get(START_P).i32_sub().local_get(DST).call(copy).local_set(DST);
    i.local_get(P).local_get(END_P).i32_lt_u().if_(BlockType::Empty);
    {
        ensure(&mut i, flush, DST);
        put(&mut i, DST, b'e');
        i.local_get(P).i32_const(1).i32_add().local_tee(P).i32_load8_u(mem(0, 1)).local_set(B);
        i.local_get(B).i32_const(i32::from(b'+')).i32_ne().local_get(B).i32_const(i32::from(b'-')).i32_ne().i32_and();
        i.if_(BlockType::Empty);
        put(&mut i, DST, b'+');
        i.end();
        i.local_get(P).local_get(END_P).local_get(P).i32_sub().local_get(DST).call(copy).local_set(DST);
    }
    i.end();
    i.local_get(DST);
    i.end();
    m.define("canon_number", f);
}

fn define_key_cmp(m: &mut ModuleBuilder) {
    // (a, b) -> -1/0/1: string tokens compared by unescaped bytes.
    const A: u32 = 0;
    const B: u32 = 1;
    const PA: u32 = 2;
    const EA: u32 = 3;
    const PB: u32 = 4;
    const EB: u32 = 5;
    const N: u32 = 6;
    const X: u32 = 7;
    const Y: u32 = 8;
    let cp = m.func("canon_cp");
    let mut f = Function::new([(7, I32)]);
    let mut i = f.instructions();
    for (tok, p, e) in [(A, PA, EA), (B, PB, EB)] {
        tok_addr(&mut i, tok);
        i.i32_load(mem(START, 4)).local_set(p);
        tok_addr(&mut i, tok);
        i.i32_load(mem(END, 4)).local_set(e);
    }
    tok_addr(&mut i, A);
    i.i32_load8_u(mem(FLAGS, 1));
    tok_addr(&mut i, B);
    i.i32_load8_u(mem(FLAGS, 1));
    i.i32_or().i32_const(1).i32_and().i32_eqz().if_(BlockType::Empty);
    {
        // both raw: memcmp, then the shorter first. N = PA + min(len a, len b)
        i.local_get(EA).local_get(PA).i32_sub().local_tee(X);
        i.local_get(EB).local_get(PB).i32_sub().local_tee(Y);
        i.local_get(X).local_get(Y).i32_lt_u().select().local_get(PA).i32_add().local_set(N);
        i.block(BlockType::Empty).loop_(BlockType::Empty);
        i.local_get(PA).local_get(N).i32_ge_u().br_if(1);
        i.local_get(PA).i32_load8_u(mem(0, 1)).local_tee(X);
        i.local_get(PB).i32_load8_u(mem(0, 1)).local_tee(Y).i32_ne().if_(BlockType::Empty);
        i.local_get(X).local_get(Y).i32_gt_u().local_get(X).local_get(Y).i32_lt_u().i32_sub().return_();
        i.end();
        i.local_get(PA).i32_const(1).i32_add().local_set(PA);
        i.local_get(PB).i32_const(1).i32_add().local_set(PB);
        i.br(0);
        i.end().end();
        // a prefix of the other (or equal): compare lengths
        i.local_get(EA).local_get(PA).i32_sub().local_tee(X);
        i.local_get(EB).local_get(PB).i32_sub().local_tee(Y);
        i.i32_gt_u().local_get(X).local_get(Y).i32_lt_u().i32_sub().return_();
    }
    i.end();
    i.loop_(BlockType::Empty);
    i.local_get(PA).local_get(EA).i32_ge_u().if_(BlockType::Empty);
    i.i32_const(0).i32_const(-1).local_get(PB).local_get(EB).i32_ge_u().select().return_();
    i.end();
    i.local_get(PB).local_get(EB).i32_ge_u().if_(BlockType::Empty);
    i.i32_const(1).return_();
    i.end();
    i.local_get(PA).call(cp).local_set(PA).local_set(X);
    i.local_get(PB).call(cp).local_set(PB).local_tee(Y);
    i.local_get(X).i32_ne().if_(BlockType::Empty);
    i.local_get(X).local_get(Y).i32_gt_u().local_get(X).local_get(Y).i32_lt_u().i32_sub().return_();
    i.end();
    i.br(0);
    i.end();
    i.i32_const(0);
    i.end();
    m.define("canon_key_cmp", f);
}

fn define_sort(m: &mut ModuleBuilder) {
    // (base, n): Shell sort (Knuth's gaps) of n key token indices at base, by key then token index.
    const BASE: u32 = 0;
    const N: u32 = 1;
    const H: u32 = 2;
    const I: u32 = 3;
    const J: u32 = 4;
    const V: u32 = 5;
    const U: u32 = 6;
    const C: u32 = 7;
    let cmp = m.func("canon_key_cmp");
    let mut f = Function::new([(6, I32)]);
    let mut i = f.instructions();
    i.i32_const(1).local_set(H);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(H).local_get(N).i32_const(3).i32_div_u().i32_ge_u().br_if(1);
    i.local_get(H).i32_const(3).i32_mul().i32_const(1).i32_add().local_set(H);
    i.br(0);
    i.end().end();
    i.loop_(BlockType::Empty); // per gap
    {
        i.local_get(H).local_set(I);
        i.block(BlockType::Empty).loop_(BlockType::Empty); // per i
        {
            i.local_get(I).local_get(N).i32_ge_u().br_if(1);
            i.local_get(BASE).local_get(I).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4)).local_set(V);
            i.local_get(I).local_set(J);
            i.block(BlockType::Empty).loop_(BlockType::Empty); // shift
            {
                i.local_get(J).local_get(H).i32_lt_u().br_if(1);
                i.local_get(BASE).local_get(J).local_get(H).i32_sub().i32_const(2).i32_shl().i32_add();
                i.i32_load(mem(0, 4)).local_set(U);
                // stop unless v < u: cmp(v, u) < 0, or equal keys and v's token first
                i.local_get(V).local_get(U).call(cmp).local_tee(C).i32_const(0).i32_gt_s().br_if(1);
                i.local_get(C).i32_eqz().local_get(V).local_get(U).i32_gt_u().i32_and().br_if(1);
                i.local_get(BASE).local_get(J).i32_const(2).i32_shl().i32_add().local_get(U).i32_store(mem(0, 4));
                i.local_get(J).local_get(H).i32_sub().local_set(J);
                i.br(0);
            }
            i.end().end();
            i.local_get(BASE).local_get(J).i32_const(2).i32_shl().i32_add().local_get(V).i32_store(mem(0, 4));
            i.local_get(I).i32_const(1).i32_add().local_set(I);
            i.br(0);
        }
        i.end().end();
        i.local_get(H).i32_const(1).i32_gt_u().if_(BlockType::Empty);
        i.local_get(H).i32_const(3).i32_div_u().local_set(H);
        i.br(1);
        i.end();
    }
    i.end();
    i.end();
    m.define("canon_sort", f);
}

fn define_value(m: &mut ModuleBuilder) {
    // (tok, dst, sp) -> dst
    const TOK: u32 = 0;
    const DST: u32 = 1;
    const SP: u32 = 2;
    const END_T: u32 = 3;
    const K: u32 = 4;
    const N: u32 = 5;
    const IX: u32 = 6;
    const WROTE: u32 = 7;
    let flush = m.func("canon_flush");
    let number = m.func("canon_number");
    let string = m.func("canon_string");
    let cmp = m.func("canon_key_cmp");
    let sort = m.func("canon_sort");
    let value = m.func("canon_value");
    let mut f = Function::new([(5, I32)]);
    let mut i = f.instructions();
    ensure(&mut i, flush, DST);
    for _ in 0..7 {
        i.block(BlockType::Empty);
    }
    tok_addr(&mut i, TOK);
    i.i32_load8_u(mem(KIND, 1));
    i.br_table([0, 0, 1, 2, 3, 4, 5, 6], 0);
    i.end();
    // null (and, never expected, an unknown kind)
    i.local_get(DST).i32_const(i32::from_le_bytes(*b"null")).i32_store(mem(0, 1));
    i.local_get(DST).i32_const(4).i32_add().return_();
    i.end();
    // false
    i.local_get(DST).i32_const(i32::from_le_bytes(*b"fals")).i32_store(mem(0, 1));
    i.local_get(DST).i32_const(i32::from(b'e')).i32_store8(mem(4, 1));
    i.local_get(DST).i32_const(5).i32_add().return_();
    i.end();
    // true
    i.local_get(DST).i32_const(i32::from_le_bytes(*b"true")).i32_store(mem(0, 1));
    i.local_get(DST).i32_const(4).i32_add().return_();
    i.end();
    // number
    i.local_get(TOK).local_get(DST).call(number).return_();
    i.end();
    // string
    i.local_get(TOK).local_get(DST).call(string).return_();
    i.end();
    // array
    {
        put(&mut i, DST, b'[');
        tok_addr(&mut i, TOK);
        i.i32_load(mem(NEXT, 4)).local_set(END_T);
        i.local_get(TOK).i32_const(1).i32_add().local_set(K);
        i.block(BlockType::Empty).loop_(BlockType::Empty);
        i.local_get(K).local_get(END_T).i32_ge_u().br_if(1);
        i.local_get(K).local_get(TOK).i32_const(1).i32_add().i32_ne().if_(BlockType::Empty);
        ensure(&mut i, flush, DST);
        put(&mut i, DST, b',');
        i.end();
        i.local_get(K).local_get(DST).local_get(SP).call(value).local_set(DST);
        tok_addr(&mut i, K);
        i.i32_load(mem(NEXT, 4)).local_set(K);
        i.br(0);
        i.end().end();
        ensure(&mut i, flush, DST);
        put(&mut i, DST, b']');
        i.local_get(DST).return_();
    }
    i.end();
    // object: collect the key tokens on the sort stack, sort, write (skipping all but the last of equal keys)
    tok_addr(&mut i, TOK);
    i.i32_load(mem(NEXT, 4)).local_set(END_T);
    i.local_get(TOK).i32_const(1).i32_add().local_set(K);
    i.i32_const(0).local_set(N);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(K).local_get(END_T).i32_ge_u().br_if(1);
    // never reached for inputs within MAX_INPUT; keeps memory safe if it were
    i.local_get(SP).local_get(N).i32_const(2).i32_shl().i32_add().local_tee(IX);
    i.i32_const((ENTRIES_END - 4) as i32).i32_gt_u().br_if(1);
    i.local_get(IX).local_get(K).i32_store(mem(0, 4));
    i.local_get(N).i32_const(1).i32_add().local_set(N);
    i.local_get(K).i32_const(1).i32_add().local_set(K);
    tok_addr(&mut i, K);
    i.i32_load(mem(NEXT, 4)).local_set(K);
    i.br(0);
    i.end().end();
    i.local_get(SP).local_get(N).call(sort);
    put(&mut i, DST, b'{');
    i.i32_const(0).local_set(IX);
    i.i32_const(0).local_set(WROTE);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    {
        i.local_get(IX).local_get(N).i32_ge_u().br_if(1);
        i.local_get(SP).local_get(IX).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4)).local_set(K);
        // a duplicate key followed by a later one: skip
        i.local_get(IX).i32_const(1).i32_add().local_tee(IX).local_get(N).i32_lt_u().if_(BlockType::Empty);
        i.local_get(K);
        i.local_get(SP).local_get(IX).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4));
        i.call(cmp).i32_eqz().br_if(1);
        i.end();
        i.local_get(WROTE).if_(BlockType::Empty);
        ensure(&mut i, flush, DST);
        put(&mut i, DST, b',');
        i.end();
        i.i32_const(1).local_set(WROTE);
        i.local_get(K).local_get(DST).call(string).local_set(DST);
        ensure(&mut i, flush, DST);
        put(&mut i, DST, b':');
        i.local_get(K).i32_const(1).i32_add().local_get(DST);
        i.local_get(SP).local_get(N).i32_const(2).i32_shl().i32_add();
        i.call(value).local_set(DST);
        i.br(0);
    }
    i.end().end();
    ensure(&mut i, flush, DST);
    put(&mut i, DST, b'}');
    i.local_get(DST);
    i.end();
    m.define("canon_value", f);
}

fn define_write(m: &mut ModuleBuilder) {
    let value = m.func("canon_value");
    let mut f = Function::new([]);
    f.instructions().local_get(0).local_get(1).i32_const(ENTRIES as i32).call(value).end();
    m.define("canon_write", f);
}

fn define_digest_args(m: &mut ModuleBuilder) {
    // (args_tok, tool_ptr, tool_len, out)
    const ARGS: u32 = 0;
    const TOOL: u32 = 1;
    const TOOL_LEN: u32 = 2;
    const OUT: u32 = 3;
    const DST: u32 = 4;
    const W: u32 = 5;
    const NIB: u32 = 6;
    let init = m.func("sha256_init");
    let fin = m.func("sha256_final");
    let flush = m.func("canon_flush");
    let value = m.func("canon_value");
    let bytes = m.func("canon_bytes");
    let prefix = b"{\"arguments\":";
    let middle = b",\"tool\":";
    let prefix_at = m.bytes(prefix);
    let middle_at = m.bytes(middle);
    let label_at = m.bytes(b"sha256:");
    let mut f = Function::new([(3, I32)]);
    let mut i = f.instructions();
    i.i32_const(STREAM_STATE as i32).call(init);
    i.i32_const(0).i32_const(0).i32_store(mem(STREAM_TOTAL as u64, 4));
    i.i32_const(STREAM_BUF as i32).i32_const(prefix_at as i32).i32_const(prefix.len() as i32).memory_copy(0, 0);
    i.i32_const((STREAM_BUF as usize + prefix.len()) as i32).local_set(DST);
    i.local_get(ARGS).i32_const(-1).i32_eq().if_(BlockType::Empty);
    put(&mut i, DST, b'{');
    put(&mut i, DST, b'}');
    i.else_();
    i.local_get(ARGS).local_get(DST).i32_const(ENTRIES as i32).call(value).local_set(DST);
    i.end();
    ensure(&mut i, flush, DST);
    i.local_get(DST).i32_const(middle_at as i32).i32_const(middle.len() as i32).memory_copy(0, 0);
    i.local_get(DST).i32_const(middle.len() as i32).i32_add().local_set(DST);
    i.local_get(TOOL).local_get(TOOL_LEN).local_get(DST).call(bytes).local_set(DST);
    ensure(&mut i, flush, DST);
    put(&mut i, DST, b'}');
    // hash the rest: len = dst - BUF, total = hashed + len
    i.i32_const(STREAM_STATE as i32).i32_const(STREAM_BUF as i32);
    i.local_get(DST).i32_const(STREAM_BUF as i32).i32_sub().local_tee(W);
    i.i32_const(0).i32_load(mem(STREAM_TOTAL as u64, 4)).local_get(W).i32_add();
    i.call(fin);
    i.local_get(OUT).i32_const(label_at as i32).i32_const(7).memory_copy(0, 0);
    for word in 0..8u64 {
        i.i32_const(0).i32_load(mem(STREAM_STATE as u64 + 4 * word, 4)).local_set(W);
        for k in 0..8u64 {
            i.local_get(OUT);
            i.local_get(W).i32_const(28 - 4 * k as i32).i32_shr_u().i32_const(15).i32_and().local_tee(NIB);
            i.i32_const(0x30).i32_add();
            i.local_get(NIB).i32_const(0x57).i32_add();
            i.local_get(NIB).i32_const(10).i32_lt_u().select();
            i.i32_store8(mem(7 + 8 * word + k, 1));
        }
    }
    i.end();
    m.define("digest_args", f);
}
