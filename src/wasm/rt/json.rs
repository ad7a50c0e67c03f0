//! JSON in the module: `json_parse` validates a request exactly like [`crate::json::validate`] (docs/json.md) and
//! builds a tape of 16-byte tokens at [`TAPE_BASE`]; the accessors below read it. No recursion: open containers
//! live on an explicit stack of at most [`MAX_DEPTH`] entries, so no input can trap the parser.
//!
//! A token, in document order (token 0 is the root; each object member is a key token then a value token):
//!
//! | offset | size | field |
//! |---|---|---|
//! | +0 | u8 | kind: 1 null, 2 false, 3 true, 4 number, 5 string, 6 array, 7 object |
//! | +1 | u8 | flags: bit 0 set when the string has escapes |
//! | +2 | u16 | containers: number of elements / entries, saturated at 0xffff (then `json_count` walks) |
//! | +4 | u32 | start: absolute address (strings: after the opening quote; others: first byte) |
//! | +8 | u32 | end: absolute address (strings: the closing quote; containers: after `]` / `}`) |
//! | +12 | u32 | next: index of the first token after this value and its descendants (a key's next is its value) |
//!
//! Every function takes and returns i32. Accessors accept any token index: out-of-range indices (including the -1
//! that `json_get` / `json_index` return for "absent") read as "no value": kind 0, next -1, start/end/count 0, and
//! string functions treat them as non-strings. After a failed parse every index is out of range.
//!
//! Duplicate keys are found during the parse: while an object has at most 16 keys, a 64-bit Bloom filter of
//! (length, first byte, last byte) sends a key to a comparison with the earlier keys only on a filter hit (an
//! escaped key always compares, and fills the filter); an object with more keys is merge-sorted by key at its close
//! and checked for equal neighbours, so no object costs more than O(n log n) comparisons.
//!
//! Memory: the slots [`SLOT_NTOK`] and [`STACK`] (`SLOTS_BASE..+0x440`), and the tape region: tokens from
//! `TAPE_BASE`, then, above the largest possible tape, two unescape buffers ([`UNESC_A`], [`UNESC_B`]) used
//! transiently by comparisons of escaped strings, and two sort buffers ([`SORT_A`], [`SORT_B`]) used by the parse.
//! Nothing outside the tape region and these slots is written, except `json_str_unescape`'s destination.

use std::ops::{Deref, DerefMut};

use wasm_encoder::{BlockType, Function, InstructionSink, ValType};

use crate::json::MAX_DEPTH;
use crate::wasm::layout::{MAX_INPUT, SLOTS_BASE, TAPE_BASE, TAPE_CAPACITY, TAPE_TOKEN_SIZE};
use crate::wasm::module::{mem, ModuleBuilder};

/// Number of tokens of the last successful parse (0 after a failure, and before any parse).
pub const SLOT_NTOK: u32 = SLOTS_BASE;
/// The parser's stack of open containers: per level the parent's token, entry count (i32 each) and Bloom filter
/// (i64); `MAX_DEPTH` entries of 16 bytes.
pub const STACK: u32 = SLOTS_BASE + 0x40;
/// End of the slots used by this file.
pub const JSON_SLOTS_END: u32 = STACK + 16 * MAX_DEPTH as u32;

/// Most tokens any accepted input can produce: every token but the root is preceded by its own `[`, `{`, `,` or
/// `:` and is at least one byte long.
pub const MAX_TOKENS: u32 = MAX_INPUT / 2 + 1;
/// Unescaped copies of strings being compared (each up to `MAX_INPUT` bytes; unescaping never lengthens).
pub const UNESC_A: u32 = TAPE_BASE + TAPE_TOKEN_SIZE * MAX_TOKENS;
pub const UNESC_B: u32 = UNESC_A + MAX_INPUT;
/// Key token indices of a large object being checked for duplicates (at most `MAX_INPUT / 5 + 1` keys of 4 bytes).
pub const SORT_A: u32 = UNESC_B + MAX_INPUT;
pub const SORT_B: u32 = SORT_A + MAX_INPUT;
const _: () = assert!(SORT_B + MAX_INPUT <= TAPE_BASE + TAPE_CAPACITY * TAPE_TOKEN_SIZE);
const _: () = assert!(JSON_SLOTS_END <= SLOTS_BASE + 0x500);

/// Objects with more keys than this are checked for duplicates by sorting at their close.
const SMALL_OBJECT: i32 = 16;

pub const KIND_NULL: i32 = 1;
pub const KIND_FALSE: i32 = 2;
pub const KIND_TRUE: i32 = 3;
pub const KIND_NUMBER: i32 = 4;
pub const KIND_STRING: i32 = 5;
pub const KIND_ARRAY: i32 = 6;
pub const KIND_OBJECT: i32 = 7;

/// Static offsets of the token fields, to be used with an address of `token << 4`.
pub(super) const T_KIND: u64 = TAPE_BASE as u64;
pub(super) const T_FLAGS: u64 = T_KIND + 1;
pub(super) const T_COUNT: u64 = T_KIND + 2;
pub(super) const T_START: u64 = T_KIND + 4;
pub(super) const T_END: u64 = T_KIND + 8;
pub(super) const T_NEXT: u64 = T_KIND + 12;

const I32: ValType = ValType::I32;
const I64: ValType = ValType::I64;

/// Every byte repeated: the SWAR constants of the string scanner.
const ONES: i64 = 0x0101_0101_0101_0101;
const HIGHS: i64 = ONES.wrapping_mul(0x80);

/// A function body with named labels: `br("done")` computes the relative depth, so no branch counts blocks by
/// hand. Instructions go through to wasm-encoder's sink (`Deref`). Only the labelled `block`, `loop_`, `if_`,
/// `else_` and `end` below may open or close blocks; an unbalanced body fails validation in `finish`.
pub(super) struct Asm<'a> {
    sink: InstructionSink<'a>,
    labels: Vec<&'static str>,
}

impl<'a> Deref for Asm<'a> {
    type Target = InstructionSink<'a>;
    fn deref(&self) -> &Self::Target {
        &self.sink
    }
}

impl DerefMut for Asm<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.sink
    }
}

impl<'a> Asm<'a> {
    pub(super) fn new(f: &'a mut Function) -> Asm<'a> {
        Asm { sink: f.instructions(), labels: Vec::new() }
    }

    pub(super) fn block(&mut self, label: &'static str) {
        self.sink.block(BlockType::Empty);
        self.labels.push(label);
    }

    pub(super) fn loop_(&mut self, label: &'static str) {
        self.sink.loop_(BlockType::Empty);
        self.labels.push(label);
    }

    /// `if` on the i32 on the stack.
    pub(super) fn if_(&mut self, label: &'static str) {
        self.sink.if_(BlockType::Empty);
        self.labels.push(label);
    }

    pub(super) fn else_(&mut self) {
        self.sink.else_();
    }

    pub(super) fn end(&mut self) {
        self.sink.end();
        self.labels.pop().expect("`end` without an open block");
    }

    fn depth(&self, label: &str) -> u32 {
        let from_top = self.labels.iter().rev().position(|l| *l == label);
        from_top.unwrap_or_else(|| panic!("no enclosing block `{label}`")) as u32
    }

    pub(super) fn br(&mut self, label: &str) {
        let depth = self.depth(label);
        self.sink.br(depth);
    }

    pub(super) fn br_if(&mut self, label: &str) {
        let depth = self.depth(label);
        self.sink.br_if(depth);
    }

    pub(super) fn br_table(&mut self, targets: &[&str], default: &str) {
        let targets: Vec<u32> = targets.iter().map(|l| self.depth(l)).collect();
        let default = self.depth(default);
        self.sink.br_table(targets, default);
    }

    /// `local += by`.
    pub(super) fn add_to(&mut self, local: u32, by: i32) {
        self.sink.local_get(local).i32_const(by).i32_add().local_set(local);
    }

    /// Ends the function body.
    pub(super) fn finish(mut self) {
        assert!(self.labels.is_empty(), "unclosed blocks: {:?}", self.labels);
        self.sink.end();
    }
}

/// Builds a function: `params` parameters then `locals`, the body written by `body`.
pub(super) fn function(locals: &[ValType], body: impl FnOnce(&mut Asm)) -> Function {
    let mut f = Function::new_with_locals_types(locals.iter().copied());
    let mut a = Asm::new(&mut f);
    body(&mut a);
    a.finish();
    f
}

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("json_parse", &[I32, I32], &[I32]);
    m.declare("json_kind", &[I32], &[I32]);
    m.declare("json_next", &[I32], &[I32]);
    m.declare("json_start", &[I32], &[I32]);
    m.declare("json_end", &[I32], &[I32]);
    m.declare("json_count", &[I32], &[I32]);
    m.declare("json_get", &[I32, I32, I32], &[I32]);
    m.declare("json_index", &[I32, I32], &[I32]);
    m.declare("json_str_eq", &[I32, I32, I32], &[I32]);
    m.declare("json_str_eq_tok", &[I32, I32], &[I32]);
    m.declare("json_str_cmp_tok", &[I32, I32], &[I32]);
    m.declare("json_str_starts_with", &[I32, I32, I32], &[I32]);
    m.declare("json_str_unescape", &[I32, I32], &[I32]);
    // (tok, buf) -> (ptr, len): a string token's unescaped content, in place or unescaped into `buf`. Unchecked.
    m.declare("json_str_view", &[I32, I32], &[I32, I32]);
    // Internal helpers.
    m.declare("json_hex4", &[I32], &[I32]);
    m.declare("json_scan_escape", &[I32, I32], &[I32]);
    m.declare("json_scan_utf8", &[I32, I32], &[I32]);
    m.declare("json_unescape_raw", &[I32, I32, I32], &[I32]);
    m.declare("json_utf8_put", &[I32, I32], &[I32]);
    m.declare("json_memeq", &[I32, I32, I32], &[I32]);
    m.declare("json_memcmp", &[I32, I32, I32, I32], &[I32]);
    m.declare("json_key_eq", &[I32, I32], &[I32]);
    m.declare("json_key_cmp", &[I32, I32], &[I32]);
    m.declare("json_dup_scan", &[I32, I32, I32], &[I32]);
    m.declare("json_dup_sort", &[I32, I32], &[I32]);
}

pub fn define(m: &mut ModuleBuilder) {
    let tables = Tables::new(m);
    m.define("json_parse", parse(m, &tables));
    define_scanners(m, &tables);
    define_strings(m, &tables);
    define_duplicates(m);
    define_accessors(m);
}

/// Addresses of the byte tables in the static data.
struct Tables {
    /// 1 for the four whitespace bytes.
    ws: u32,
    /// The byte a simple escape stands for (`n` → 0x0a), 1 for `u`, 0 for an invalid escape.
    escape: u32,
}

impl Tables {
    fn new(m: &mut ModuleBuilder) -> Tables {
        let mut ws = [0u8; 256];
        for b in [b' ', b'\t', b'\n', b'\r'] {
            ws[b as usize] = 1;
        }
        let mut escape = [0u8; 256];
        for (e, b) in
            [(b'"', b'"'), (b'\\', b'\\'), (b'/', b'/'), (b'b', 8), (b'f', 12), (b'n', 10), (b'r', 13), (b't', 9)]
        {
            escape[e as usize] = b;
        }
        escape[b'u' as usize] = 1;
        Tables { ws: m.raw(&ws, 1), escape: m.raw(&escape, 1) }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// json_parse

mod parse_locals {
    pub const PTR: u32 = 0;
    pub const LEN: u32 = 1;
    /// The read position.
    pub const P: u32 = 2;
    pub const END: u32 = 3;
    /// The current byte.
    pub const C: u32 = 4;
    /// The next token's index.
    pub const TI: u32 = 5;
    /// Number of open containers.
    pub const SP: u32 = 6;
    /// The innermost open container's token, its completed children, whether it is an object.
    pub const CTOK: u32 = 7;
    pub const COUNT: u32 = 8;
    pub const COBJ: u32 = 9;
    /// Set when the next thing to read is an object key.
    pub const NEEDKEY: u32 = 10;
    /// Start of the token being scanned; escape flag of the string being scanned.
    pub const S: u32 = 11;
    pub const FLAGS: u32 = 12;
    /// Scratch: a token's address, a Bloom hit.
    pub const T: u32 = 13;
    pub const H: u32 = 14;
    /// The innermost object's Bloom filter of keys (i64).
    pub const BLOOM: u32 = 15;
    /// Scratch i64: eight input bytes, their special-byte mask.
    pub const V: u32 = 16;
    pub const M: u32 = 17;
}

fn parse(m: &ModuleBuilder, tables: &Tables) -> Function {
    use parse_locals::*;
    let scan_escape = m.func("json_scan_escape");
    let scan_utf8 = m.func("json_scan_utf8");
    let dup_scan = m.func("json_dup_scan");
    let dup_sort = m.func("json_dup_sort");
    let locals = [I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I64, I64, I64];
    function(&locals, |a| {
        // The tape is invalid until this parse succeeds.
        a.i32_const(SLOT_NTOK as i32).i32_const(0).i32_store(mem(0, 4));
        a.local_get(LEN).i32_const(MAX_INPUT as i32).i32_gt_u();
        a.if_("oversize");
        a.i32_const(2).return_();
        a.end();
        // The input must lie in memory (computed in 64 bits: no wrap-around), so no load below can trap.
        a.local_get(PTR).i64_extend_i32_u().local_get(LEN).i64_extend_i32_u().i64_add();
        a.memory_size(0).i64_extend_i32_u().i64_const(16).i64_shl().i64_gt_u();
        a.if_("outside");
        a.i32_const(1).return_();
        a.end();
        a.local_get(PTR).local_tee(P).local_get(LEN).i32_add().local_set(END);

        a.block("err");
        a.block("ok");
        skip_ws(a, tables);
        a.loop_("L");
        {
            // Key state: an object key, its colon, then the value below.
            a.local_get(NEEDKEY);
            a.if_("key");
            a.i32_const(0).local_set(NEEDKEY);
            a.local_get(P).local_get(END).i32_ge_u();
            a.br_if("err");
            a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b'"' as i32).i32_ne();
            a.br_if("err");
            string(a, scan_escape, scan_utf8);
            check_key(a, dup_scan);
            skip_ws(a, tables);
            a.local_get(P).local_get(END).i32_ge_u();
            a.br_if("err");
            a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b':' as i32).i32_ne();
            a.br_if("err");
            a.add_to(P, 1);
            skip_ws(a, tables);
            a.end();

            // Value state: one value at P; scalars and strings complete here, containers open.
            a.block("after");
            a.local_get(P).local_get(END).i32_ge_u();
            a.br_if("err");
            a.local_get(P).i32_load8_u(mem(0, 1)).local_set(C);
            a.block("null");
            a.block("false");
            a.block("true");
            a.block("number");
            a.block("array");
            a.block("object");
            a.block("string");
            let mut targets = ["err"; 256];
            targets[b'"' as usize] = "string";
            targets[b'{' as usize] = "object";
            targets[b'[' as usize] = "array";
            targets[b'-' as usize] = "number";
            for d in b'0'..=b'9' {
                targets[d as usize] = "number";
            }
            targets[b't' as usize] = "true";
            targets[b'f' as usize] = "false";
            targets[b'n' as usize] = "null";
            a.local_get(C);
            a.br_table(&targets, "err");
            a.end();
            // "string"
            string(a, scan_escape, scan_utf8);
            a.br("after");
            a.end();
            // "object": an empty one completes at once, else a key follows.
            open(a, tables, KIND_OBJECT);
            a.block("members");
            a.local_get(P).local_get(END).i32_ge_u();
            a.br_if("members");
            a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b'}' as i32).i32_ne();
            a.br_if("members");
            a.add_to(P, 1);
            close(a);
            a.br("after");
            a.end();
            a.i32_const(1).local_set(NEEDKEY);
            a.br("L");
            a.end();
            // "array"
            open(a, tables, KIND_ARRAY);
            a.local_get(P).local_get(END).i32_lt_u();
            a.if_("elements");
            a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b']' as i32).i32_eq();
            a.if_("empty");
            a.add_to(P, 1);
            close(a);
            a.br("after");
            a.end();
            a.end();
            a.br("L");
            a.end();
            // "number"
            number(a);
            a.br("after");
            a.end();
            // "true": four bytes compared at once (unaligned loads are fine in wasm).
            literal(a, b"true", KIND_TRUE);
            a.br("after");
            a.end();
            // "false": the `f` is known, compare the other four.
            literal(a, b"false", KIND_FALSE);
            a.br("after");
            a.end();
            // "null"
            literal(a, b"null", KIND_NULL);
            a.end();

            // After a value: the root is done, or a `,` or the container's closing bracket follows.
            a.loop_("A");
            a.local_get(SP).i32_eqz();
            a.br_if("ok");
            a.add_to(COUNT, 1);
            skip_ws(a, tables);
            a.local_get(P).local_get(END).i32_ge_u();
            a.br_if("err");
            a.local_get(P).i32_load8_u(mem(0, 1)).local_set(C);
            a.add_to(P, 1);
            a.local_get(C).i32_const(b',' as i32).i32_eq();
            a.if_("comma");
            skip_ws(a, tables);
            a.local_get(COBJ).local_set(NEEDKEY);
            a.br("L");
            a.end();
            // `]` closes an array, `}` (0x20 more) an object.
            a.local_get(C).local_get(COBJ).i32_const(5).i32_shl().i32_const(b']' as i32).i32_add().i32_ne();
            a.br_if("err");
            // Objects too large for the Bloom filter are checked for duplicates now.
            a.local_get(COBJ).local_get(COUNT).i32_const(SMALL_OBJECT).i32_gt_u().i32_and();
            a.if_("large");
            a.local_get(CTOK).local_get(COUNT).call(dup_sort);
            a.br_if("err");
            a.end();
            close(a);
            a.br("A");
            a.end();
        }
        a.br("err");
        a.end();
        a.end();
        // "ok": only whitespace may follow the root.
        skip_ws(a, tables);
        a.local_get(P).local_get(END).i32_ne();
        a.br_if("err");
        a.i32_const(SLOT_NTOK as i32).local_get(TI).i32_store(mem(0, 4));
        a.i32_const(0).return_();
        a.end();
        // "err": syntax, depth or duplicate.
        a.i32_const(1);
    })
}

/// Advances P over whitespace: up to two bytes one at a time (compact JSON has none, pretty JSON often one after
/// a colon), then a longer run (a newline and indentation) eight bytes at a time.
fn skip_ws(a: &mut Asm, tables: &Tables) {
    use parse_locals::*;
    let ws_byte = |a: &mut Asm| {
        a.local_get(P).local_get(END).i32_ge_u();
        a.br_if("ws_done");
        a.local_get(P).i32_load8_u(mem(0, 1)).i32_load8_u(mem(tables.ws as u64, 1)).i32_eqz();
        a.br_if("ws_done");
        a.add_to(P, 1);
    };
    a.block("ws_done");
    ws_byte(a);
    ws_byte(a);
    a.block("ws_tail");
    a.loop_("ws_words");
    a.local_get(P).i32_const(8).i32_add().local_get(END).i32_gt_u();
    a.br_if("ws_tail");
    // Bit 7 of each byte of M: the byte is not whitespace. nonzero(x) = ((x & 0x7f..) + 0x7f..) | x is exact per
    // byte (no carry crosses a byte), and a byte is whitespace when it equals one of the four.
    a.local_get(P).i64_load(mem(0, 8)).local_set(V);
    for (i, w) in [b' ', b'\t', b'\n', b'\r'].into_iter().enumerate() {
        a.local_get(V).i64_const(ONES.wrapping_mul(i64::from(w))).i64_xor().local_tee(M);
        a.i64_const(ONES.wrapping_mul(0x7f))
            .i64_and()
            .i64_const(ONES.wrapping_mul(0x7f))
            .i64_add()
            .local_get(M)
            .i64_or();
        if i > 0 {
            a.i64_and();
        }
    }
    a.i64_const(HIGHS).i64_and().local_tee(M).i64_eqz();
    a.if_("all_ws");
    a.add_to(P, 8);
    a.br("ws_words");
    a.end();
    a.local_get(P).local_get(M).i64_ctz().i32_wrap_i64().i32_const(3).i32_shr_u().i32_add().local_set(P);
    a.br("ws_done");
    a.end();
    a.end();
    a.loop_("ws_bytes");
    ws_byte(a);
    a.br("ws_bytes");
    a.end();
    a.end();
}

/// Writes token TI as a scalar of `kind` from S to P (its `next` is the following token) and moves TI on.
fn scalar_token(a: &mut Asm, kind: i32) {
    use parse_locals::*;
    a.local_get(TI).i32_const(4).i32_shl().local_tee(T).i32_const(kind).i32_store(mem(T_KIND, 4));
    a.local_get(T).local_get(S).i32_store(mem(T_START, 4));
    a.local_get(T).local_get(P).i32_store(mem(T_END, 4));
    a.local_get(T).local_get(TI).i32_const(1).i32_add().local_tee(TI).i32_store(mem(T_NEXT, 4));
}

/// A string at P (on its opening quote): validates it, writes its token, leaves P after the closing quote.
fn string(a: &mut Asm, scan_escape: u32, scan_utf8: u32) {
    use parse_locals::*;
    a.local_get(P).i32_const(1).i32_add().local_tee(S).local_set(P);
    a.i32_const(0).local_set(FLAGS);
    a.block("closed");
    a.loop_("bytes");
    {
        // Eight bytes at a time while eight remain: the mask has bit 7 set in the first byte that is `"`, `\`, a
        // control character or non-ASCII (bytes above the first such byte may be flagged spuriously; none below).
        a.block("special");
        a.loop_("swar");
        a.local_get(P).i32_const(8).i32_add().local_get(END).i32_gt_u();
        a.br_if("special");
        a.local_get(P).i64_load(mem(0, 8)).local_tee(V).i64_const(ONES.wrapping_mul(0x20)).i64_sub();
        a.local_get(V).i64_const(ONES.wrapping_mul(0x22)).i64_xor().i64_const(ONES).i64_sub().i64_or();
        a.local_get(V).i64_const(ONES.wrapping_mul(0x5c)).i64_xor().i64_const(ONES).i64_sub().i64_or();
        a.local_get(V).i64_or().i64_const(HIGHS).i64_and().local_tee(M).i64_eqz();
        a.if_("plain");
        a.add_to(P, 8);
        a.br("swar");
        a.end();
        a.local_get(P).local_get(M).i64_ctz().i32_wrap_i64().i32_const(3).i32_shr_u().i32_add().local_set(P);
        a.end();
        a.end();
        // One byte: the end of the string, an escape, a UTF-8 sequence, an error, or (near the end of the input)
        // an ordinary byte.
        a.local_get(P).local_get(END).i32_ge_u();
        a.br_if("err");
        a.local_get(P).i32_load8_u(mem(0, 1)).local_tee(C).i32_const(b'"' as i32).i32_eq();
        a.br_if("closed");
        a.local_get(C).i32_const(b'\\' as i32).i32_eq();
        a.if_("escape");
        a.i32_const(1).local_set(FLAGS);
        a.local_get(P).local_get(END).call(scan_escape).local_tee(P).i32_const(-1).i32_eq();
        a.br_if("err");
        a.br("bytes");
        a.end();
        a.local_get(C).i32_const(0x20).i32_lt_u();
        a.br_if("err");
        a.local_get(C).i32_const(0x80).i32_ge_u();
        a.if_("utf8");
        a.local_get(P).local_get(END).call(scan_utf8).local_tee(P).i32_const(-1).i32_eq();
        a.br_if("err");
        a.br("bytes");
        a.end();
        a.add_to(P, 1);
        a.br("bytes");
    }
    a.end();
    a.end();
    a.local_get(TI).i32_const(4).i32_shl().local_tee(T);
    a.i32_const(KIND_STRING).local_get(FLAGS).i32_const(8).i32_shl().i32_or().i32_store(mem(T_KIND, 4));
    a.local_get(T).local_get(S).i32_store(mem(T_START, 4));
    a.local_get(T).local_get(P).i32_store(mem(T_END, 4));
    a.local_get(T).local_get(TI).i32_const(1).i32_add().local_tee(TI).i32_store(mem(T_NEXT, 4));
    a.add_to(P, 1);
}

/// The duplicate check of the key just scanned (token TI-1, content S..P-1), while the object is small.
fn check_key(a: &mut Asm, dup_scan: u32) {
    use parse_locals::*;
    a.local_get(COUNT).i32_const(SMALL_OBJECT).i32_lt_u();
    a.if_("small");
    a.local_get(FLAGS);
    a.if_("escaped");
    // An escaped key's raw bytes say nothing about its content: compare it, and make every later key compare.
    a.i64_const(-1).local_set(BLOOM);
    a.i32_const(1).local_set(H);
    a.else_();
    // Filter bit from the first byte, the last byte and the length (for "" both bytes are quotes: still fixed).
    a.i64_const(1);
    a.local_get(S).i32_load8_u(mem(0, 1));
    a.local_get(P).i32_const(2).i32_sub().i32_load8_u(mem(0, 1)).i32_const(2).i32_shl().i32_xor();
    a.local_get(P).local_get(S).i32_sub().i32_const(4).i32_shl().i32_xor();
    a.i64_extend_i32_u().i64_shl().local_tee(V);
    a.local_get(BLOOM).i64_and().i64_const(0).i64_ne().local_set(H);
    a.local_get(BLOOM).local_get(V).i64_or().local_set(BLOOM);
    a.end();
    a.local_get(H).local_get(COUNT).i32_const(0).i32_ne().i32_and();
    a.if_("compare");
    a.local_get(CTOK).local_get(TI).i32_const(1).i32_sub().local_get(COUNT).call(dup_scan);
    a.br_if("err");
    a.end();
    a.end();
}

/// A number at P (its first byte is `-` or a digit): `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn number(a: &mut Asm) {
    use parse_locals::*;
    a.local_get(P).local_set(S);
    a.local_get(C).i32_const(b'-' as i32).i32_eq();
    a.if_("minus");
    a.add_to(P, 1);
    a.local_get(P).local_get(END).i32_ge_u();
    a.br_if("err");
    a.local_get(P).i32_load8_u(mem(0, 1)).local_set(C);
    a.end();
    // Integer part: a lone 0, or a non-zero digit and more digits.
    a.local_get(C).i32_const(b'0' as i32).i32_eq();
    a.if_("zero");
    a.add_to(P, 1);
    a.else_();
    a.local_get(C).i32_const(b'1' as i32).i32_sub().i32_const(9).i32_ge_u();
    a.br_if("err");
    digits(a);
    a.end();
    // Fraction.
    a.block("no_fraction");
    a.local_get(P).local_get(END).i32_ge_u();
    a.br_if("no_fraction");
    a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b'.' as i32).i32_ne();
    a.br_if("no_fraction");
    a.add_to(P, 1);
    required_digits(a);
    a.end();
    // Exponent.
    a.block("no_exponent");
    a.local_get(P).local_get(END).i32_ge_u();
    a.br_if("no_exponent");
    a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(0x20).i32_or().i32_const(b'e' as i32).i32_ne();
    a.br_if("no_exponent");
    a.add_to(P, 1);
    a.block("unsigned");
    a.local_get(P).local_get(END).i32_ge_u();
    a.br_if("unsigned");
    a.local_get(P).i32_load8_u(mem(0, 1)).local_tee(C).i32_const(b'+' as i32).i32_ne();
    a.local_get(C).i32_const(b'-' as i32).i32_ne().i32_and();
    a.br_if("unsigned");
    a.add_to(P, 1);
    a.end();
    required_digits(a);
    a.end();
    scalar_token(a, KIND_NUMBER);
}

/// At least one digit, else an error.
fn required_digits(a: &mut Asm) {
    use parse_locals::*;
    a.local_get(P).local_get(END).i32_ge_u();
    a.br_if("err");
    a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b'0' as i32).i32_sub().i32_const(10).i32_ge_u();
    a.br_if("err");
    digits(a);
}

/// Advances P over the digit at P and the digits after it.
fn digits(a: &mut Asm) {
    use parse_locals::*;
    a.block("digits_done");
    a.loop_("digit");
    a.add_to(P, 1);
    a.local_get(P).local_get(END).i32_ge_u();
    a.br_if("digits_done");
    a.local_get(P).i32_load8_u(mem(0, 1)).i32_const(b'0' as i32).i32_sub().i32_const(10).i32_lt_u();
    a.br_if("digit");
    a.end();
    a.end();
}

/// `true`, `false` or `null` at P.
fn literal(a: &mut Asm, word: &[u8], kind: i32) {
    use parse_locals::*;
    let tail = &word[word.len() - 4..];
    let expected = i32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    a.local_get(END).local_get(P).i32_sub().i32_const(word.len() as i32).i32_lt_u();
    a.br_if("err");
    a.local_get(P).i32_load(mem(word.len() as u64 - 4, 1)).i32_const(expected).i32_ne();
    a.br_if("err");
    a.local_get(P).local_set(S);
    a.add_to(P, word.len() as i32);
    scalar_token(a, kind);
}

/// Opens a container at P: pushes the enclosing one, writes the token's kind and start, moves P past the bracket
/// and over whitespace.
fn open(a: &mut Asm, tables: &Tables, kind: i32) {
    use parse_locals::*;
    a.local_get(SP).i32_const(MAX_DEPTH as i32).i32_ge_u();
    a.br_if("err");
    a.local_get(SP).i32_const(4).i32_shl().local_tee(T).local_get(CTOK).i32_store(mem(STACK as u64, 4));
    a.local_get(T).local_get(COUNT).i32_store(mem(STACK as u64 + 4, 4));
    a.local_get(T).local_get(BLOOM).i64_store(mem(STACK as u64 + 8, 8));
    a.add_to(SP, 1);
    a.local_get(TI).local_set(CTOK);
    a.i32_const(0).local_set(COUNT);
    a.i64_const(0).local_set(BLOOM);
    a.i32_const(i32::from(kind == KIND_OBJECT)).local_set(COBJ);
    a.local_get(TI).i32_const(4).i32_shl().local_tee(T).i32_const(kind).i32_store(mem(T_KIND, 4));
    a.local_get(T).local_get(P).i32_store(mem(T_START, 4));
    a.add_to(TI, 1);
    a.add_to(P, 1);
    skip_ws(a, tables);
}

/// Closes the innermost container (P is past its bracket): completes its token and pops the enclosing one.
fn close(a: &mut Asm) {
    use parse_locals::*;
    a.local_get(CTOK).i32_const(4).i32_shl().local_tee(T).local_get(P).i32_store(mem(T_END, 4));
    a.local_get(T).local_get(TI).i32_store(mem(T_NEXT, 4));
    a.local_get(T).local_get(COUNT).i32_const(0xffff).local_get(COUNT).i32_const(0xffff).i32_lt_u().select();
    a.i32_store16(mem(T_COUNT, 2));
    a.add_to(SP, -1);
    a.local_get(SP).i32_const(4).i32_shl().local_tee(T).i32_load(mem(STACK as u64, 4)).local_set(CTOK);
    a.local_get(T).i32_load(mem(STACK as u64 + 4, 4)).local_set(COUNT);
    a.local_get(T).i64_load(mem(STACK as u64 + 8, 8)).local_set(BLOOM);
    // At the root this reads token 0's kind: harmless, the state is not used again.
    a.local_get(CTOK)
        .i32_const(4)
        .i32_shl()
        .i32_load8_u(mem(T_KIND, 1))
        .i32_const(KIND_OBJECT)
        .i32_eq()
        .local_set(COBJ);
}

// ---------------------------------------------------------------------------------------------------------------
// Validation helpers called by the parser for the rare bytes: escapes and non-ASCII.

fn define_scanners(m: &mut ModuleBuilder, tables: &Tables) {
    // json_hex4(p) -> the value of the four hex digits at p, or -1.
    const HP: u32 = 0;
    const HC: u32 = 1;
    const HD: u32 = 2;
    const HV: u32 = 3;
    m.define(
        "json_hex4",
        function(&[I32, I32, I32], |a| {
            for k in 0..4 {
                a.local_get(HP).i32_load8_u(mem(k, 1)).local_tee(HC).i32_const(b'0' as i32).i32_sub().local_tee(HD);
                a.i32_const(10).i32_ge_u();
                a.if_("letter");
                a.local_get(HC).i32_const(0x20).i32_or().i32_const(b'a' as i32).i32_sub().local_tee(HD);
                a.i32_const(6).i32_ge_u();
                a.if_("bad");
                a.i32_const(-1).return_();
                a.end();
                a.add_to(HD, 10);
                a.end();
                a.local_get(HV).i32_const(4).i32_shl().local_get(HD).i32_or().local_set(HV);
            }
            a.local_get(HV);
        }),
    );

    // json_scan_escape(p, end) -> the position after the escape at p (on its backslash), or -1. A `\u` high
    // surrogate must be followed by a `\u` low surrogate; a lone low surrogate is an error.
    const EP: u32 = 0;
    const EE: u32 = 1;
    const EU: u32 = 2;
    let hex4 = m.func("json_hex4");
    m.define(
        "json_scan_escape",
        function(&[I32], |a| {
            a.local_get(EE).local_get(EP).i32_sub().i32_const(2).i32_lt_u();
            a.if_("short");
            a.i32_const(-1).return_();
            a.end();
            a.local_get(EP).i32_load8_u(mem(1, 1)).local_tee(EU).i32_const(b'u' as i32).i32_ne();
            a.if_("simple");
            a.local_get(EP).i32_const(2).i32_add().i32_const(-1);
            a.local_get(EU).i32_load8_u(mem(tables.escape as u64, 1));
            a.select();
            a.return_();
            a.end();
            a.local_get(EE).local_get(EP).i32_sub().i32_const(6).i32_lt_u();
            a.if_("short_u");
            a.i32_const(-1).return_();
            a.end();
            // -1 (not hex) has the bits 0xfc00 set, so it falls to the error below with the low surrogates.
            a.local_get(EP).i32_const(2).i32_add().call(hex4).local_tee(EU).i32_const(0xfc00).i32_and();
            a.i32_const(0xd800).i32_ne();
            a.if_("not_high");
            a.local_get(EP).i32_const(6).i32_add().i32_const(-1);
            a.local_get(EU).i32_const(0xf800).i32_and().i32_const(0xd800).i32_ne();
            a.local_get(EU).i32_const(0).i32_ge_s().i32_and();
            a.select();
            a.return_();
            a.end();
            // A high surrogate: `\uDC00`..`\uDFFF` must follow.
            a.local_get(EE).local_get(EP).i32_sub().i32_const(12).i32_lt_u();
            a.if_("short_pair");
            a.i32_const(-1).return_();
            a.end();
            a.local_get(EP).i32_load16_u(mem(6, 1)).i32_const(i32::from(u16::from_le_bytes(*b"\\u"))).i32_ne();
            a.if_("no_pair");
            a.i32_const(-1).return_();
            a.end();
            a.local_get(EP).i32_const(12).i32_add().i32_const(-1);
            a.local_get(EP).i32_const(8).i32_add().call(hex4).i32_const(0xfc00).i32_and().i32_const(0xdc00).i32_eq();
            a.select();
        }),
    );

    // json_scan_utf8(p, end) -> the position after the UTF-8 sequence at p (a byte >= 0x80), or -1 when it is not
    // the shortest encoding of a scalar value (no overlongs, no surrogates, nothing above U+10FFFF).
    const UP: u32 = 0;
    const UE: u32 = 1;
    const UC: u32 = 2;
    const UN: u32 = 3;
    const LO: u32 = 4;
    const HI: u32 = 5;
    m.define(
        "json_scan_utf8",
        function(&[I32, I32, I32, I32], |a| {
            a.block("bad");
            a.local_get(UP).i32_load8_u(mem(0, 1)).local_tee(UC).i32_const(0xc2).i32_lt_u();
            a.br_if("bad");
            // Sequence length and the allowed range of the second byte.
            a.i32_const(0x80).local_set(LO);
            a.i32_const(0xbf).local_set(HI);
            a.local_get(UC).i32_const(0xe0).i32_lt_u();
            a.if_("two");
            a.i32_const(2).local_set(UN);
            a.else_();
            a.local_get(UC).i32_const(0xf0).i32_lt_u();
            a.if_("three");
            a.i32_const(3).local_set(UN);
            a.local_get(UC).i32_const(0xe0).i32_eq();
            a.if_("e0");
            a.i32_const(0xa0).local_set(LO);
            a.end();
            a.local_get(UC).i32_const(0xed).i32_eq();
            a.if_("ed");
            a.i32_const(0x9f).local_set(HI);
            a.end();
            a.else_();
            a.local_get(UC).i32_const(0xf4).i32_gt_u();
            a.br_if("bad");
            a.i32_const(4).local_set(UN);
            a.local_get(UC).i32_const(0xf0).i32_eq();
            a.if_("f0");
            a.i32_const(0x90).local_set(LO);
            a.end();
            a.local_get(UC).i32_const(0xf4).i32_eq();
            a.if_("f4");
            a.i32_const(0x8f).local_set(HI);
            a.end();
            a.end();
            a.end();
            a.local_get(UE).local_get(UP).i32_sub().local_get(UN).i32_lt_u();
            a.br_if("bad");
            a.local_get(UP).i32_load8_u(mem(1, 1)).local_tee(UC).local_get(LO).i32_lt_u();
            a.br_if("bad");
            a.local_get(UC).local_get(HI).i32_gt_u();
            a.br_if("bad");
            // Continuation bytes 3 and 4 (when the sequence has them).
            for k in 2..4u32 {
                a.local_get(UN).i32_const(k as i32).i32_gt_u();
                a.if_("more");
                a.local_get(UP).i32_load8_u(mem(u64::from(k), 1)).i32_const(0xc0).i32_and().i32_const(0x80).i32_ne();
                a.br_if("bad");
                a.end();
            }
            a.local_get(UP).local_get(UN).i32_add().return_();
            a.end();
            a.i32_const(-1);
        }),
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Strings: unescaping and comparing.

fn define_strings(m: &mut ModuleBuilder, tables: &Tables) {
    let hex4 = m.func("json_hex4");
    let utf8_put = m.func("json_utf8_put");
    let unescape_raw = m.func("json_unescape_raw");
    let memeq = m.func("json_memeq");
    let memcmp = m.func("json_memcmp");
    let view = m.func("json_str_view");

    // json_utf8_put(dst, cp) -> bytes written: the UTF-8 encoding of a scalar value.
    const D: u32 = 0;
    const CP: u32 = 1;
    m.define(
        "json_utf8_put",
        function(&[], |a| {
            a.local_get(CP).i32_const(0x80).i32_lt_u();
            a.if_("one");
            a.local_get(D).local_get(CP).i32_store8(mem(0, 1));
            a.i32_const(1).return_();
            a.end();
            // The lead byte, then continuation bytes from the most significant down.
            let cont = |a: &mut Asm, at: u64, shift: i32| {
                a.local_get(D).local_get(CP).i32_const(shift).i32_shr_u().i32_const(0x3f).i32_and();
                a.i32_const(0x80).i32_or().i32_store8(mem(at, 1));
            };
            a.local_get(CP).i32_const(0x800).i32_lt_u();
            a.if_("two");
            a.local_get(D).local_get(CP).i32_const(6).i32_shr_u().i32_const(0xc0).i32_or().i32_store8(mem(0, 1));
            cont(a, 1, 0);
            a.i32_const(2).return_();
            a.end();
            a.local_get(CP).i32_const(0x10000).i32_lt_u();
            a.if_("three");
            a.local_get(D).local_get(CP).i32_const(12).i32_shr_u().i32_const(0xe0).i32_or().i32_store8(mem(0, 1));
            cont(a, 1, 6);
            cont(a, 2, 0);
            a.i32_const(3).return_();
            a.end();
            a.local_get(D).local_get(CP).i32_const(18).i32_shr_u().i32_const(0xf0).i32_or().i32_store8(mem(0, 1));
            cont(a, 1, 12);
            cont(a, 2, 6);
            cont(a, 3, 0);
            a.i32_const(4);
        }),
    );

    // json_unescape_raw(src, end, dst) -> length: the unescaped UTF-8 of validated string content src..end.
    const SRC: u32 = 0;
    const SEND: u32 = 1;
    const DST: u32 = 2;
    const O: u32 = 3;
    const C: u32 = 4;
    const U: u32 = 5;
    m.define(
        "json_unescape_raw",
        function(&[I32, I32, I32], |a| {
            a.local_get(DST).local_set(O);
            a.block("done");
            a.loop_("bytes");
            a.local_get(SRC).local_get(SEND).i32_ge_u();
            a.br_if("done");
            a.local_get(SRC).i32_load8_u(mem(0, 1)).local_tee(C).i32_const(b'\\' as i32).i32_ne();
            a.if_("plain");
            a.local_get(O).local_get(C).i32_store8(mem(0, 1));
            a.add_to(O, 1);
            a.add_to(SRC, 1);
            a.br("bytes");
            a.end();
            a.local_get(SRC).i32_load8_u(mem(1, 1)).local_tee(C).i32_const(b'u' as i32).i32_eq();
            a.if_("unicode");
            a.local_get(SRC).i32_const(2).i32_add().call(hex4).local_set(U);
            a.add_to(SRC, 6);
            // A high surrogate is always followed by its low half (the parser checked).
            a.local_get(U).i32_const(0xfc00).i32_and().i32_const(0xd800).i32_eq();
            a.if_("pair");
            a.local_get(U).i32_const(0xd800).i32_sub().i32_const(10).i32_shl();
            a.local_get(SRC).i32_const(2).i32_add().call(hex4).i32_const(0xdc00).i32_sub().i32_add();
            a.i32_const(0x10000).i32_add().local_set(U);
            a.add_to(SRC, 6);
            a.end();
            a.local_get(O).local_get(O).local_get(U).call(utf8_put).i32_add().local_set(O);
            a.br("bytes");
            a.end();
            a.local_get(O).local_get(C).i32_load8_u(mem(tables.escape as u64, 1)).i32_store8(mem(0, 1));
            a.add_to(O, 1);
            a.add_to(SRC, 2);
            a.br("bytes");
            a.end();
            a.end();
            a.local_get(O).local_get(DST).i32_sub();
        }),
    );

    // json_str_view(tok, buf) -> (ptr, len): the unescaped content of string token `tok` (not checked), in place
    // when it has no escapes, else unescaped into `buf`.
    const VT: u32 = 0;
    const VBUF: u32 = 1;
    const VA: u32 = 2;
    m.define(
        "json_str_view",
        function(&[I32], |a| {
            a.local_get(VT).i32_const(4).i32_shl().local_tee(VA).i32_load8_u(mem(T_FLAGS, 1)).i32_const(1).i32_and();
            a.if_("escaped");
            a.local_get(VBUF);
            a.local_get(VA).i32_load(mem(T_START, 4)).local_get(VA).i32_load(mem(T_END, 4)).local_get(VBUF);
            a.call(unescape_raw).return_();
            a.end();
            a.local_get(VA).i32_load(mem(T_START, 4));
            a.local_get(VA).i32_load(mem(T_END, 4)).local_get(VA).i32_load(mem(T_START, 4)).i32_sub();
        }),
    );

    // json_memeq(a, b, n) -> 1 when the n bytes at a and b are equal; eight at a time, then one at a time.
    const MA: u32 = 0;
    const MB: u32 = 1;
    const MN: u32 = 2;
    m.define(
        "json_memeq",
        function(&[], |a| {
            a.block("tail");
            a.loop_("words");
            a.local_get(MN).i32_const(8).i32_lt_u();
            a.br_if("tail");
            a.local_get(MA).i64_load(mem(0, 1)).local_get(MB).i64_load(mem(0, 1)).i64_ne();
            a.if_("differ");
            a.i32_const(0).return_();
            a.end();
            a.add_to(MA, 8);
            a.add_to(MB, 8);
            a.add_to(MN, -8);
            a.br("words");
            a.end();
            a.end();
            a.block("equal");
            a.loop_("bytes");
            a.local_get(MN).i32_eqz();
            a.br_if("equal");
            a.local_get(MA).i32_load8_u(mem(0, 1)).local_get(MB).i32_load8_u(mem(0, 1)).i32_ne();
            a.if_("differ");
            a.i32_const(0).return_();
            a.end();
            a.add_to(MA, 1);
            a.add_to(MB, 1);
            a.add_to(MN, -1);
            a.br("bytes");
            a.end();
            a.end();
            a.i32_const(1);
        }),
    );

    // json_memcmp(a, alen, b, blen) -> -1, 0 or 1: byte order, a proper prefix first.
    const CA: u32 = 0;
    const CAL: u32 = 1;
    const CB: u32 = 2;
    const CBL: u32 = 3;
    const CI: u32 = 4;
    const CN: u32 = 5;
    const CX: u32 = 6;
    const CY: u32 = 7;
    m.define(
        "json_memcmp",
        function(&[I32, I32, I32, I32], |a| {
            a.local_get(CAL).local_get(CBL).local_get(CAL).local_get(CBL).i32_lt_u().select().local_set(CN);
            // Skip the equal eight-byte words first.
            a.block("words_done");
            a.loop_("words");
            a.local_get(CN).local_get(CI).i32_sub().i32_const(8).i32_lt_u();
            a.br_if("words_done");
            a.local_get(CA).local_get(CI).i32_add().i64_load(mem(0, 1));
            a.local_get(CB).local_get(CI).i32_add().i64_load(mem(0, 1)).i64_ne();
            a.br_if("words_done");
            a.add_to(CI, 8);
            a.br("words");
            a.end();
            a.end();
            a.block("prefix");
            a.loop_("bytes");
            a.local_get(CI).local_get(CN).i32_ge_u();
            a.br_if("prefix");
            a.local_get(CA).local_get(CI).i32_add().i32_load8_u(mem(0, 1)).local_tee(CX);
            a.local_get(CB).local_get(CI).i32_add().i32_load8_u(mem(0, 1)).local_tee(CY).i32_ne();
            a.if_("differ");
            a.i32_const(1).i32_const(-1).local_get(CX).local_get(CY).i32_gt_u().select().return_();
            a.end();
            a.add_to(CI, 1);
            a.br("bytes");
            a.end();
            a.end();
            a.local_get(CAL).local_get(CBL).i32_gt_u().local_get(CAL).local_get(CBL).i32_lt_u().i32_sub();
        }),
    );

    // json_key_eq(a, b) / json_key_cmp(a, b): two string tokens (not checked) by unescaped content.
    const KA: u32 = 0;
    const KB: u32 = 1;
    const KTA: u32 = 2;
    const KTB: u32 = 3;
    const KL: u32 = 4;
    m.define(
        "json_key_eq",
        function(&[I32, I32, I32], |a| {
            a.local_get(KA).i32_const(4).i32_shl().local_tee(KTA).i32_load8_u(mem(T_FLAGS, 1));
            a.local_get(KB).i32_const(4).i32_shl().local_tee(KTB).i32_load8_u(mem(T_FLAGS, 1));
            a.i32_or().i32_const(1).i32_and().i32_eqz();
            a.if_("raw");
            // Neither has escapes: the raw bytes are the content.
            a.local_get(KTA).i32_load(mem(T_END, 4)).local_get(KTA).i32_load(mem(T_START, 4)).i32_sub().local_tee(KL);
            a.local_get(KTB).i32_load(mem(T_END, 4)).local_get(KTB).i32_load(mem(T_START, 4)).i32_sub().i32_ne();
            a.if_("lengths");
            a.i32_const(0).return_();
            a.end();
            a.local_get(KTA).i32_load(mem(T_START, 4)).local_get(KTB).i32_load(mem(T_START, 4)).local_get(KL);
            a.call(memeq).return_();
            a.end();
            a.local_get(KA).i32_const(UNESC_A as i32).call(view);
            a.local_get(KB).i32_const(UNESC_B as i32).call(view);
            a.call(memcmp).i32_eqz();
        }),
    );
    m.define(
        "json_key_cmp",
        function(&[], |a| {
            a.local_get(KA).i32_const(UNESC_A as i32).call(view);
            a.local_get(KB).i32_const(UNESC_B as i32).call(view);
            a.call(memcmp);
        }),
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Duplicate keys.

fn define_duplicates(m: &mut ModuleBuilder) {
    let key_eq = m.func("json_key_eq");
    let key_cmp = m.func("json_key_cmp");

    // json_dup_scan(obj, key, n) -> 1 when token `key` equals one of the first n keys of object `obj`.
    const OBJ: u32 = 0;
    const KEY: u32 = 1;
    const N: u32 = 2;
    const J: u32 = 3;
    m.define(
        "json_dup_scan",
        function(&[I32], |a| {
            a.local_get(OBJ).i32_const(1).i32_add().local_set(J);
            a.block("none");
            a.loop_("keys");
            a.local_get(N).i32_eqz();
            a.br_if("none");
            a.local_get(J).local_get(KEY).call(key_eq);
            a.if_("same");
            a.i32_const(1).return_();
            a.end();
            // The next key follows this key's value.
            a.local_get(J).i32_const(1).i32_add().i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(J);
            a.add_to(N, -1);
            a.br("keys");
            a.end();
            a.end();
            a.i32_const(0);
        }),
    );

    // json_dup_sort(obj, n) -> 1 when two of the n keys of object `obj` are equal: a bottom-up merge sort of the key
    // tokens by content (SORT_A <-> SORT_B), then a check of neighbours.
    const SO: u32 = 0;
    const SN: u32 = 1;
    const I: u32 = 2;
    const K: u32 = 3;
    const SRC: u32 = 4;
    const DST: u32 = 5;
    const WIDTH: u32 = 6;
    const LO: u32 = 7;
    const MID: u32 = 8;
    const HI: u32 = 9;
    const JJ: u32 = 10;
    const X: u32 = 11;
    m.define(
        "json_dup_sort",
        function(&[I32; 10], |a| {
            // Gather the keys.
            a.local_get(SO).i32_const(1).i32_add().local_set(K);
            a.block("gathered");
            a.loop_("gather");
            a.local_get(I).local_get(SN).i32_ge_u();
            a.br_if("gathered");
            a.local_get(I).i32_const(2).i32_shl().local_get(K).i32_store(mem(u64::from(SORT_A), 4));
            a.local_get(K).i32_const(1).i32_add().i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(K);
            a.add_to(I, 1);
            a.br("gather");
            a.end();
            a.end();
            a.i32_const(SORT_A as i32).local_set(SRC);
            a.i32_const(SORT_B as i32).local_set(DST);
            a.i32_const(1).local_set(WIDTH);
            a.block("sorted");
            a.loop_("pass");
            a.local_get(WIDTH).local_get(SN).i32_ge_u();
            a.br_if("sorted");
            a.i32_const(0).local_set(LO);
            a.block("pass_done");
            a.loop_("runs");
            a.local_get(LO).local_get(SN).i32_ge_u();
            a.br_if("pass_done");
            // mid = min(lo + width, n), hi = min(lo + 2 width, n)
            let min_n = |a: &mut Asm, into: u32| {
                a.local_tee(into).local_get(SN).local_get(into).local_get(SN).i32_lt_u().select().local_set(into);
            };
            a.local_get(LO).local_get(WIDTH).i32_add();
            min_n(a, MID);
            a.local_get(MID).local_get(WIDTH).i32_add();
            min_n(a, HI);
            a.local_get(LO).local_tee(I).local_set(K);
            a.local_get(MID).local_set(JJ);
            a.block("merged");
            a.loop_("merge");
            a.local_get(K).local_get(HI).i32_ge_u();
            a.br_if("merged");
            a.block("take_right");
            a.block("take_left");
            a.local_get(I).local_get(MID).i32_ge_u();
            a.br_if("take_right");
            a.local_get(JJ).local_get(HI).i32_ge_u();
            a.br_if("take_left");
            a.local_get(SRC).local_get(I).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4));
            a.local_get(SRC).local_get(JJ).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4));
            a.call(key_cmp).i32_const(0).i32_gt_s();
            a.br_if("take_right");
            a.end();
            a.local_get(SRC).local_get(I).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4)).local_set(X);
            a.add_to(I, 1);
            a.local_get(DST).local_get(K).i32_const(2).i32_shl().i32_add().local_get(X).i32_store(mem(0, 4));
            a.add_to(K, 1);
            a.br("merge");
            a.end();
            a.local_get(SRC).local_get(JJ).i32_const(2).i32_shl().i32_add().i32_load(mem(0, 4)).local_set(X);
            a.add_to(JJ, 1);
            a.local_get(DST).local_get(K).i32_const(2).i32_shl().i32_add().local_get(X).i32_store(mem(0, 4));
            a.add_to(K, 1);
            a.br("merge");
            a.end();
            a.end();
            a.local_get(HI).local_set(LO);
            a.br("runs");
            a.end();
            a.end();
            // Swap the buffers; double the run width.
            a.local_get(SRC).local_get(DST).local_set(SRC).local_set(DST);
            a.local_get(WIDTH).i32_const(1).i32_shl().local_set(WIDTH);
            a.br("pass");
            a.end();
            a.end();
            // Equal keys are neighbours now.
            a.i32_const(1).local_set(I);
            a.block("unique");
            a.loop_("neighbours");
            a.local_get(I).local_get(SN).i32_ge_u();
            a.br_if("unique");
            a.local_get(SRC).local_get(I).i32_const(2).i32_shl().i32_add().local_tee(X).i32_const(4).i32_sub();
            a.i32_load(mem(0, 4)).local_get(X).i32_load(mem(0, 4)).call(key_eq);
            a.if_("equal");
            a.i32_const(1).return_();
            a.end();
            a.add_to(I, 1);
            a.br("neighbours");
            a.end();
            a.end();
            a.i32_const(0);
        }),
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Accessors: every one checks its token indices against the last parse.

/// Pushes 1 when `tok` (a local) indexes a token of the last successful parse.
fn valid(a: &mut Asm, tok: u32) {
    a.local_get(tok).i32_const(SLOT_NTOK as i32).i32_load(mem(0, 4)).i32_lt_u();
}

fn define_accessors(m: &mut ModuleBuilder) {
    let memeq = m.func("json_memeq");
    let memcmp = m.func("json_memcmp");
    let view = m.func("json_str_view");
    let key_eq = m.func("json_key_eq");
    let unescape_raw = m.func("json_unescape_raw");

    // A field of a valid token, else `absent`.
    let field = |offset: u64, absent: i32, load8: bool| {
        function(&[], move |a| {
            valid(a, 0);
            a.if_("valid");
            a.local_get(0).i32_const(4).i32_shl();
            if load8 {
                a.i32_load8_u(mem(offset, 1));
            } else {
                a.i32_load(mem(offset, 4));
            }
            a.return_();
            a.end();
            a.i32_const(absent);
        })
    };
    m.define("json_kind", field(T_KIND, 0, true));
    m.define("json_next", field(T_NEXT, -1, false));
    m.define("json_start", field(T_START, 0, false));
    m.define("json_end", field(T_END, 0, false));

    // json_count(tok): elements of an array, entries of an object, else 0.
    const TOK: u32 = 0;
    const KIND: u32 = 1;
    const N: u32 = 2;
    const J: u32 = 3;
    const STOP: u32 = 4;
    m.define(
        "json_count",
        function(&[I32; 4], |a| {
            valid(a, TOK);
            a.i32_eqz();
            a.if_("invalid");
            a.i32_const(0).return_();
            a.end();
            a.local_get(TOK).i32_const(4).i32_shl().i32_load8_u(mem(T_KIND, 1)).local_tee(KIND);
            a.i32_const(KIND_ARRAY).i32_lt_u();
            a.if_("scalar");
            a.i32_const(0).return_();
            a.end();
            a.local_get(TOK)
                .i32_const(4)
                .i32_shl()
                .i32_load16_u(mem(T_COUNT, 2))
                .local_tee(N)
                .i32_const(0xffff)
                .i32_ne();
            a.if_("stored");
            a.local_get(N).return_();
            a.end();
            // Saturated: walk the children (an object's next entry follows the key's value).
            a.i32_const(0).local_set(N);
            a.local_get(TOK).i32_const(1).i32_add().local_set(J);
            a.local_get(TOK).i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(STOP);
            a.block("done");
            a.loop_("children");
            a.local_get(J).local_get(STOP).i32_ge_u();
            a.br_if("done");
            a.add_to(N, 1);
            a.local_get(J).local_get(KIND).i32_const(KIND_OBJECT).i32_eq().i32_add();
            a.i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(J);
            a.br("children");
            a.end();
            a.end();
            a.local_get(N);
        }),
    );

    // json_get(obj, key_ptr, key_len) -> the value of the entry whose unescaped key is those bytes, or -1.
    const OBJ: u32 = 0;
    const KP: u32 = 1;
    const KL: u32 = 2;
    const GJ: u32 = 3;
    const GSTOP: u32 = 4;
    const GT: u32 = 5;
    m.define(
        "json_get",
        function(&[I32; 3], |a| {
            a.block("absent");
            valid(a, OBJ);
            a.i32_eqz();
            a.br_if("absent");
            a.local_get(OBJ).i32_const(4).i32_shl().local_tee(GT).i32_load8_u(mem(T_KIND, 1));
            a.i32_const(KIND_OBJECT).i32_ne();
            a.br_if("absent");
            a.local_get(GT).i32_load(mem(T_NEXT, 4)).local_set(GSTOP);
            a.local_get(OBJ).i32_const(1).i32_add().local_set(GJ);
            a.loop_("keys");
            a.local_get(GJ).local_get(GSTOP).i32_ge_u();
            a.br_if("absent");
            a.local_get(GJ).i32_const(4).i32_shl().local_tee(GT).i32_load8_u(mem(T_FLAGS, 1)).i32_const(1).i32_and();
            a.if_("escaped");
            a.local_get(GJ).i32_const(UNESC_A as i32).call(view).local_get(KP).local_get(KL).call(memcmp).i32_eqz();
            a.if_("found");
            a.local_get(GJ).i32_const(1).i32_add().return_();
            a.end();
            a.else_();
            // Raw key: same length, then same bytes.
            a.local_get(GT).i32_load(mem(T_END, 4)).local_get(GT).i32_load(mem(T_START, 4)).i32_sub();
            a.local_get(KL).i32_eq();
            a.if_("length");
            a.local_get(GT).i32_load(mem(T_START, 4)).local_get(KP).local_get(KL).call(memeq);
            a.if_("found");
            a.local_get(GJ).i32_const(1).i32_add().return_();
            a.end();
            a.end();
            a.end();
            a.local_get(GJ).i32_const(1).i32_add().i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(GJ);
            a.br("keys");
            a.end();
            a.end();
            a.i32_const(-1);
        }),
    );

    // json_index(arr, i) -> the i-th element (from 0), or -1.
    const ARR: u32 = 0;
    const IDX: u32 = 1;
    const IJ: u32 = 2;
    const ISTOP: u32 = 3;
    m.define(
        "json_index",
        function(&[I32; 2], |a| {
            a.block("absent");
            valid(a, ARR);
            a.i32_eqz();
            a.br_if("absent");
            a.local_get(ARR).i32_const(4).i32_shl().i32_load8_u(mem(T_KIND, 1)).i32_const(KIND_ARRAY).i32_ne();
            a.br_if("absent");
            a.local_get(IDX).i32_const(0).i32_lt_s();
            a.br_if("absent");
            a.local_get(ARR).i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(ISTOP);
            a.local_get(ARR).i32_const(1).i32_add().local_set(IJ);
            a.loop_("elements");
            a.local_get(IJ).local_get(ISTOP).i32_ge_u();
            a.br_if("absent");
            a.local_get(IDX).i32_eqz();
            a.if_("here");
            a.local_get(IJ).return_();
            a.end();
            a.add_to(IDX, -1);
            a.local_get(IJ).i32_const(4).i32_shl().i32_load(mem(T_NEXT, 4)).local_set(IJ);
            a.br("elements");
            a.end();
            a.end();
            a.i32_const(-1);
        }),
    );

    // json_str_eq(tok, ptr, len) -> 1 when the string's unescaped content is those bytes.
    const ST: u32 = 0;
    const SP_: u32 = 1;
    const SL: u32 = 2;
    const VP: u32 = 3;
    const VL: u32 = 4;
    m.define(
        "json_str_eq",
        function(&[I32, I32], |a| {
            is_string_guard(a, ST);
            a.local_get(ST).i32_const(UNESC_A as i32).call(view).local_set(VL).local_set(VP);
            a.local_get(VL).local_get(SL).i32_ne();
            a.if_("lengths");
            a.i32_const(0).return_();
            a.end();
            a.local_get(VP).local_get(SP_).local_get(SL).call(memeq);
        }),
    );
    // json_str_starts_with(tok, ptr, len) -> 1 when the unescaped content begins with those bytes.
    m.define(
        "json_str_starts_with",
        function(&[I32, I32], |a| {
            is_string_guard(a, ST);
            a.local_get(ST).i32_const(UNESC_A as i32).call(view).local_set(VL).local_set(VP);
            a.local_get(VL).local_get(SL).i32_lt_u();
            a.if_("shorter");
            a.i32_const(0).return_();
            a.end();
            a.local_get(VP).local_get(SP_).local_get(SL).call(memeq);
        }),
    );
    // json_str_eq_tok(a, b) -> 1 when both are strings with the same unescaped content.
    m.define(
        "json_str_eq_tok",
        function(&[], |a| {
            is_string_guard(a, 0);
            is_string_guard(a, 1);
            a.local_get(0).local_get(1).call(key_eq);
        }),
    );
    // json_str_cmp_tok(a, b) -> -1, 0, 1 by the byte order of the unescaped contents (a non-string counts as "").
    const CA: u32 = 0;
    const CB: u32 = 1;
    const PA: u32 = 2;
    const LA: u32 = 3;
    const PB: u32 = 4;
    const LB: u32 = 5;
    m.define(
        "json_str_cmp_tok",
        function(&[I32; 4], |a| {
            for (tok, buf, p, l) in [(CA, UNESC_A, PA, LA), (CB, UNESC_B, PB, LB)] {
                a.block("not_string");
                valid(a, tok);
                a.i32_eqz();
                a.br_if("not_string");
                a.local_get(tok).i32_const(4).i32_shl().i32_load8_u(mem(T_KIND, 1)).i32_const(KIND_STRING).i32_ne();
                a.br_if("not_string");
                a.local_get(tok).i32_const(buf as i32).call(view).local_set(l).local_set(p);
                a.end();
            }
            a.local_get(PA).local_get(LA).local_get(PB).local_get(LB).call(memcmp);
        }),
    );
    // json_str_unescape(tok, dst) -> length: writes the unescaped UTF-8 content at dst (0 for a non-string).
    const UT: u32 = 0;
    const UDST: u32 = 1;
    const UA: u32 = 2;
    const UL: u32 = 3;
    m.define(
        "json_str_unescape",
        function(&[I32, I32], |a| {
            is_string_guard(a, UT);
            a.local_get(UT).i32_const(4).i32_shl().local_tee(UA).i32_load8_u(mem(T_FLAGS, 1)).i32_const(1).i32_and();
            a.if_("escaped");
            a.local_get(UA).i32_load(mem(T_START, 4)).local_get(UA).i32_load(mem(T_END, 4)).local_get(UDST);
            a.call(unescape_raw).return_();
            a.end();
            a.local_get(UDST).local_get(UA).i32_load(mem(T_START, 4));
            a.local_get(UA).i32_load(mem(T_END, 4)).local_get(UA).i32_load(mem(T_START, 4)).i32_sub().local_tee(UL);
            a.memory_copy(0, 0);
            a.local_get(UL);
        }),
    );
}

/// Returns 0 from the function unless local `tok` is a valid string token.
fn is_string_guard(a: &mut Asm, tok: u32) {
    a.block("guard");
    valid(a, tok);
    a.if_("valid");
    a.local_get(tok).i32_const(4).i32_shl().i32_load8_u(mem(T_KIND, 1)).i32_const(KIND_STRING).i32_eq();
    a.br_if("guard");
    a.end();
    a.i32_const(0).return_();
    a.end();
}
