//! `remit_decide`: the decision algorithm of src/eval/mod.rs over the compiled tables, and the decision JSON.
//!
//! Reasons are a bitset (bit = position of the code in byte order, so they print sorted); the rules a decision
//! lists are compile-time ranks collected in arrays, sorted and deduplicated at the end; missing approvals are
//! ranked by (kind, mandate) the same way. Everything else is written straight to the output.

use wasm_encoder::{BlockType, Instruction as I, ValType};

use super::super::asm::{load32, load64, store32, store64, Body};
use super::super::codegen::{self, Tables, APPROVAL_REC, MANDATE_REC, RULE_REC, TOOL_REC};
use super::super::layout::{MAX_INPUT, OUT_BASE};
use super::super::module::{mem, ModuleBuilder};
use super::request::{tok, KIND_OBJECT, KIND_STRING, MALFORMED, MISSING};
use super::values::TAG_DEC;
use super::{array, reason, slot, ARRAY_CAP, REASONS, VM_SCRATCH};

const I32: ValType = ValType::I32;
const I64: ValType = ValType::I64;

/// Outcomes as `vm_finish` takes them.
const DENY: i32 = 0;
const ESCALATE: i32 = 1;
const ALLOW: i32 = 2;

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("vm_find", &[I32, I32, I32, I32], &[I32]);
    m.declare("vm_in_strings", &[I32, I32, I32], &[I32]);
    m.declare("vm_push", &[I32, I32, I32], &[]);
    m.declare("vm_sort_unique", &[I32, I32], &[]);
    m.declare("vm_digest", &[], &[]);
    m.declare("vm_approval_ok", &[I32, I32, I32, I32], &[I32]);
    m.declare("vm_approval_wf", &[I32], &[I32]);
    m.declare("vm_approval_conflict", &[I32], &[I32]);
    m.declare("vm_u64_member", &[I32, I32, I32], &[I32]);
    m.declare("vm_blank_tok", &[I32], &[I32]);
    m.declare("vm_finish", &[I32], &[I64]);
    m.declare("vm_examine", &[I32, I32], &[]);
    m.declare("vm_lacks_scope", &[I32], &[I32]);
    m.declare("vm_undeclared_argument", &[I32], &[I32]);
    m.declare("vm_is_holder", &[I32], &[I32]);
    m.declare("vm_hidden", &[I32, I32], &[I32]);
    m.declare("remit_alloc", &[I32], &[I32]);
    m.declare("remit_decide", &[I32, I32], &[I64]);
    m.declare("vm_read_request", &[I32, I32, I32], &[I32]);
    m.declare("remit_visible_tools", &[I32, I32], &[I64]);
    m.declare("remit_policy_info", &[], &[I64]);
    m.declare("vm_cond", &[I32, I32], &[I32]);
}

/// `if (stack) { return C }` for i32 functions.
fn ret_if(c: i32) -> [I<'static>; 4] {
    [I::If(BlockType::Empty), I::I32Const(c), I::Return, I::End]
}

/// Pushes the i32 field at `offset` of the record whose address is in `local`.
fn field(local: u32, offset: u64) -> [I<'static>; 2] {
    [I::LocalGet(local), load32(offset)]
}

/// Pushes `(ptr << 32) | len` of a static byte string as two i32 values (ptr, len).
fn text(m: &mut ModuleBuilder, s: &str) -> [I<'static>; 2] {
    let at = m.bytes(s.as_bytes());
    [I::I32Const(at as i32), I::I32Const(s.len() as i32)]
}

pub fn define(m: &mut ModuleBuilder, t: &Tables) {
    define_helpers(m, t);
    define_approval(m, t);
    define_lacks_scope(m);
    define_undeclared_argument(m);
    define_is_holder(m, t);
    define_examine(m, t);
    define_hidden(m, t);
    define_finish(m, t);
    define_entry_points(m, t);
}

fn define_helpers(m: &mut ModuleBuilder, t: &Tables) {
    let _ = t;
    let hash = m.func("vm_hash");
    let eq = m.func("vm_bytes_eq");
    // vm_find(table, mask, p, l) -> id or -1.
    let mut b = Body::new(4);
    let (table, mask, p, l) = (0, 1, 2, 3);
    let (h, e) = (b.i32(), b.i32());
    b.emit([I::LocalGet(p), I::LocalGet(l), I::Call(hash), I::LocalGet(mask), I::I32And, I::LocalSet(h)]);
    b.emit([I::Loop(BlockType::Empty)]);
    b.emit([
        I::LocalGet(table),
        I::LocalGet(h),
        I::I32Const(12),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::I32Eqz,
    ]);
    b.emit(ret_if(-1));
    b.emit([I::LocalGet(e), load32(0), I::LocalGet(e), load32(4), I::LocalGet(p), I::LocalGet(l), I::Call(eq)]);
    b.emit([I::If(BlockType::Empty), I::LocalGet(e), load32(8), I::Return, I::End]);
    b.emit([I::LocalGet(h), I::I32Const(1), I::I32Add, I::LocalGet(mask), I::I32And, I::LocalSet(h), I::Br(0), I::End]);
    b.emit([I::I32Const(-1)]);
    m.define("vm_find", b.finish());

    // vm_in_strings(array_tok, p, l) -> 1 when a string of the array equals (p, l). Scratch used to unescape
    // an element is released right away, so long arrays never exhaust it.
    let str_of = m.func("vm_str");
    let count = m.func("json_count");
    let next = m.func("json_next");
    let mut b = Body::new(3);
    let (arr, p, l) = (0, 1, 2);
    let (i, n, el, save) = (b.i32(), b.i32(), b.i32(), b.i32());
    let packed = b.i64();
    b.emit([I::LocalGet(arr), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([I::I32Const(slot::BUMP as i32), load32(0), I::LocalSet(save)]);
    b.emit([
        I::LocalGet(arr),
        I::Call(count),
        I::LocalSet(n),
        I::LocalGet(arr),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(el),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(el),
        I::Call(str_of),
        I::LocalTee(packed),
        I::I64Const(32),
        I::I64ShrU,
        I::I32WrapI64,
        I::LocalGet(packed),
        I::I32WrapI64,
        I::LocalGet(p),
        I::LocalGet(l),
        I::Call(eq),
        I::I32Const(slot::BUMP as i32),
        I::LocalGet(save),
        store32(0),
    ]);
    b.emit(ret_if(1));
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
        I::I32Const(0),
    ]);
    m.define("vm_in_strings", b.finish());

    // vm_push(array, count_slot, value): arrays are sized at compile time for the worst case, the bound is a guard.
    let mut b = Body::new(3);
    let (arr, cnt, v) = (0, 1, 2);
    let n = b.i32();
    b.emit([
        I::LocalGet(cnt),
        load32(0),
        I::LocalTee(n),
        I::I32Const(ARRAY_CAP as i32),
        I::I32GeU,
        I::If(BlockType::Empty),
        I::Return,
        I::End,
    ]);
    b.emit([
        I::LocalGet(arr),
        I::LocalGet(n),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        I::LocalGet(v),
        store32(0),
        I::LocalGet(cnt),
        I::LocalGet(n),
        I::I32Const(1),
        I::I32Add,
        store32(0),
    ]);
    m.define("vm_push", b.finish());

    // vm_sort_unique(array, count_slot): insertion sort ascending, then drop repeats.
    let mut b = Body::new(2);
    let cnt = 1;
    let (n, i, j, x, w) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let at = |idx: u32| [I::LocalGet(0), I::LocalGet(idx), I::I32Const(4), I::I32Mul, I::I32Add];
    b.emit([I::LocalGet(cnt), load32(0), I::LocalSet(n), I::I32Const(1), I::LocalSet(i)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit(at(i));
    b.emit([load32(0), I::LocalSet(x), I::LocalGet(i), I::LocalSet(j)]);
    b.emit([I::Block(BlockType::Empty), I::Loop(BlockType::Empty), I::LocalGet(j), I::I32Eqz, I::BrIf(1)]);
    b.emit(at(j));
    b.emit([I::I32Const(4), I::I32Sub, load32(0), I::LocalGet(x), I::I32LeS, I::BrIf(1)]);
    b.emit(at(j));
    b.emit(at(j));
    b.emit([
        I::I32Const(4),
        I::I32Sub,
        load32(0),
        store32(0),
        I::LocalGet(j),
        I::I32Const(1),
        I::I32Sub,
        I::LocalSet(j),
        I::Br(0),
        I::End,
        I::End,
    ]);
    b.emit(at(j));
    b.emit([
        I::LocalGet(x),
        store32(0),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
    ]);
    // Dedup in place: w is the write index.
    b.emit([
        I::LocalGet(n),
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::Return,
        I::End,
        I::I32Const(1),
        I::LocalSet(w),
        I::I32Const(1),
        I::LocalSet(i),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit(at(i));
    b.emit([load32(0), I::LocalSet(x)]);
    b.emit(at(w));
    b.emit([I::I32Const(4), I::I32Sub, load32(0), I::LocalGet(x), I::I32Ne, I::If(BlockType::Empty)]);
    b.emit(at(w));
    b.emit([I::LocalGet(x), store32(0), I::LocalGet(w), I::I32Const(1), I::I32Add, I::LocalSet(w), I::End]);
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End]);
    b.emit([I::LocalGet(cnt), I::LocalGet(w), store32(0)]);
    m.define("vm_sort_unique", b.finish());

    // vm_digest(): the call's argument digest, computed once per call when a binding needs it.
    let digest = m.func("digest_args");
    let mut b = Body::new(0);
    b.emit([I::I32Const(slot::DIGEST_DONE as i32), load32(0), I::If(BlockType::Empty), I::Return, I::End]);
    b.emit([
        I::I32Const(tok::ARGUMENTS as i32),
        load32(0),
        I::I32Const(slot::NAME_P as i32),
        load32(0),
        I::I32Const(slot::NAME_L as i32),
        load32(0),
        I::I32Const(slot::DIGEST as i32),
        I::Call(digest),
        I::I32Const(slot::DIGEST_DONE as i32),
        I::I32Const(1),
        store32(0),
    ]);
    m.define("vm_digest", b.finish());

    // vm_u64_member(object_tok, name_ptr, name_len) -> 1 and the value in slot TMP+8 when the object has a JSON
    // number under the name that is a u64 (serde's as_u64: digits only).
    let get = m.func("json_get");
    let kind = m.func("json_kind");
    let start = m.func("json_start");
    let end = m.func("json_end");
    let u64p = m.func("vm_parse_u64");
    let mut b = Body::new(3);
    let (obj, p, l) = (0, 1, 2);
    let v = b.i32();
    b.emit([I::LocalGet(obj), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(obj), I::LocalGet(p), I::LocalGet(l), I::Call(get), I::LocalTee(v), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(v), I::Call(kind), I::I32Const(4), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(v),
        I::Call(start),
        I::LocalGet(v),
        I::Call(end),
        I::LocalGet(v),
        I::Call(start),
        I::I32Sub,
        I::I32Const(slot::TMP as i32),
        I::Call(u64p),
    ]);
    m.define("vm_u64_member", b.finish());

    // vm_blank_tok(string_tok) -> 1 when the string is empty or white space only; scratch used to unescape it is
    // released.
    let blank = m.func("vm_blank");
    let mut b = Body::new(1);
    let (save, r) = (b.i32(), b.i32());
    let packed = b.i64();
    b.emit([
        I::I32Const(slot::BUMP as i32),
        load32(0),
        I::LocalSet(save),
        I::LocalGet(0),
        I::Call(str_of),
        I::LocalTee(packed),
        I::I64Const(32),
        I::I64ShrU,
        I::I32WrapI64,
        I::LocalGet(packed),
        I::I32WrapI64,
        I::Call(blank),
        I::LocalSet(r),
        I::I32Const(slot::BUMP as i32),
        I::LocalGet(save),
        store32(0),
        I::LocalGet(r),
    ]);
    m.define("vm_blank_tok", b.finish());
}

/// Emits the checks that make a presented approval well formed (src/eval/request.rs `approval`): an object; `id`,
/// `kind`, `mandate`, `issued_at`, `expires_at` strings; `tool`, `target`, `digest`, `manifest` absent or strings;
/// `consumed` absent or a bool (and, `for_use`, not true); both timestamps parse; the id is not blank. Returns 0
/// from the function being built when one fails; leaves the field tokens and the two timestamps in locals.
fn approval_form(m: &mut ModuleBuilder, b: &mut Body, a: u32, for_use: bool) -> (Vec<u32>, u32, u32) {
    let get = m.func("json_get");
    let kind = m.func("json_kind");
    let str_of = m.func("vm_str");
    let ts = m.func("vm_parse_timestamp");
    let blank = m.func("vm_blank");
    let (k, f, save) = (b.i32(), b.i32(), b.i32());
    let fields: Vec<u32> = (0..9).map(|_| b.i32()).collect();
    let (issued, expires) = (b.i64(), b.i64());
    let packed = b.i64();
    let names = ["id", "kind", "mandate", "issued_at", "expires_at", "tool", "target", "digest", "manifest"];
    b.emit([I::LocalGet(a), I::Call(kind), I::I32Const(KIND_OBJECT), I::I32Ne]);
    b.emit(ret_if(0));
    for (index, name) in names.iter().enumerate() {
        let key = text(m, name);
        b.emit([I::LocalGet(a)]);
        b.emit(key);
        b.emit([I::Call(get), I::LocalTee(f), I::LocalSet(fields[index])]);
        // Required: present and a string; optional: absent or a string.
        if index < 5 {
            b.emit([I::LocalGet(f), I::I32Const(0), I::I32LtS]);
            b.emit(ret_if(0));
        }
        b.emit([
            I::LocalGet(f),
            I::I32Const(0),
            I::I32GeS,
            I::If(BlockType::Empty),
            I::LocalGet(f),
            I::Call(kind),
            I::I32Const(KIND_STRING),
            I::I32Ne,
        ]);
        b.emit(ret_if(0));
        b.emit([I::End]);
    }
    // consumed: absent, or a bool; true never satisfies.
    let key = text(m, "consumed");
    b.emit([I::LocalGet(a)]);
    b.emit(key);
    b.emit([I::Call(get), I::LocalTee(f), I::I32Const(0), I::I32GeS, I::If(BlockType::Empty)]);
    if for_use {
        b.emit([I::LocalGet(f), I::Call(kind), I::LocalTee(k), I::I32Const(3), I::I32Eq]);
        b.emit(ret_if(0));
    } else {
        b.emit([I::LocalGet(f), I::Call(kind), I::LocalSet(k), I::LocalGet(k), I::I32Const(3), I::I32Eq]);
        b.emit([I::If(BlockType::Empty), I::I32Const(2), I::LocalSet(k), I::End]);
    }
    b.emit([I::LocalGet(k), I::I32Const(2), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([I::End]);
    // Both timestamps parse, and the id is not blank.
    b.emit([I::I32Const(slot::BUMP as i32), load32(0), I::LocalSet(save)]);
    b.emit([
        I::LocalGet(fields[0]),
        I::Call(str_of),
        I::LocalTee(packed),
        I::I64Const(32),
        I::I64ShrU,
        I::I32WrapI64,
        I::LocalGet(packed),
        I::I32WrapI64,
        I::Call(blank),
        I::I32Const(slot::BUMP as i32),
        I::LocalGet(save),
        store32(0),
    ]);
    b.emit(ret_if(0));
    for (index, target) in [(3usize, issued), (4, expires)] {
        b.emit([
            I::LocalGet(fields[index]),
            I::Call(str_of),
            I::LocalTee(packed),
            I::I64Const(32),
            I::I64ShrU,
            I::I32WrapI64,
            I::LocalGet(packed),
            I::I32WrapI64,
            I::I32Const(slot::TMP as i32),
            I::Call(ts),
            I::I32Const(slot::BUMP as i32),
            I::LocalGet(save),
            store32(0),
            I::I32Eqz,
        ]);
        b.emit(ret_if(0));
        b.emit([I::I32Const(slot::TMP as i32), load64(8), I::LocalSet(target)]);
    }
    (fields, issued, expires)
}

fn define_approval(m: &mut ModuleBuilder, t: &Tables) {
    let get = m.func("json_get");
    let kind = m.func("json_kind");
    let str_eq = m.func("json_str_eq");
    let str_eq_tok = m.func("json_str_eq_tok");
    let digest = m.func("vm_digest");
    let blank_tok = m.func("vm_blank_tok");
    // vm_approval_ok(approval_tok, kind_id, chain_ptr, chain_n) -> 1 when the presented approval satisfies a gate
    // of that kind for this call, issued under one of the first chain_n mandates of the chain (src/eval/mod.rs `satisfies`, after request.rs `approval`).
    let mut b = Body::new(4);
    let (a, kid, chain, chain_n) = (0, 1, 2, 3);
    let (f, i, found, krec) = (b.i32(), b.i32(), b.i32(), b.i32());
    let now = b.i64();
    let (fields, issued, expires) = approval_form(m, &mut b, a, true);
    // The kind.
    b.emit([
        I::LocalGet(kid),
        I::I32Const(APPROVAL_REC as i32),
        I::I32Mul,
        I::I32Const(t.approvals as i32),
        I::I32Add,
        I::LocalSet(krec),
        I::LocalGet(fields[1]),
    ]);
    b.emit(field(krec, 0));
    b.emit(field(krec, 4));
    b.emit([I::Call(str_eq), I::I32Eqz]);
    b.emit(ret_if(0));
    // Issued under one of the given mandates of the chain (the gate's and its ancestors).
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(chain_n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(fields[2]),
        I::LocalGet(chain),
        I::LocalGet(i),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(f),
        load32(0),
        I::LocalGet(f),
        load32(4),
        I::Call(str_eq),
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(found),
        I::Br(2),
        I::End,
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(found),
        I::I32Eqz,
    ]);
    b.emit(ret_if(0));
    // In time: issued <= now < expires, and now - issued < ttl (unsigned: the ttl is a u64).
    b.emit([
        I::I32Const(slot::NOW as i32),
        load64(0),
        I::LocalTee(now),
        I::LocalGet(issued),
        I::I64LtS,
        I::LocalGet(now),
        I::LocalGet(expires),
        I::I64GeS,
        I::I32Or,
    ]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(now), I::LocalGet(issued), I::I64Sub, I::LocalGet(krec), load64(16), I::I64GeU]);
    b.emit(ret_if(0));
    // Bindings.
    let binds = |bit: i32| [I::LocalGet(krec), load32(8), I::I32Const(bit), I::I32And];
    b.emit(binds(1));
    b.emit([I::If(BlockType::Empty), I::LocalGet(fields[5]), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(fields[5]),
        I::I32Const(slot::NAME_P as i32),
        load32(0),
        I::I32Const(slot::NAME_L as i32),
        load32(0),
        I::Call(str_eq),
        I::I32Eqz,
    ]);
    b.emit(ret_if(0));
    b.emit([I::End]);
    b.emit(binds(2));
    b.emit([
        I::If(BlockType::Empty),
        I::LocalGet(fields[6]),
        I::I32Const(0),
        I::I32LtS,
        I::I32Const(slot::HAS_RES as i32),
        load32(0),
        I::I32Eqz,
        I::I32Or,
    ]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(fields[6]),
        I::I32Const(slot::RES_P as i32),
        load32(0),
        I::I32Const(slot::RES_L as i32),
        load32(0),
        I::Call(str_eq),
        I::I32Eqz,
    ]);
    b.emit(ret_if(0));
    b.emit([I::End]);
    b.emit(binds(4));
    b.emit([I::If(BlockType::Empty), I::LocalGet(fields[7]), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([
        I::Call(digest),
        I::LocalGet(fields[7]),
        I::I32Const(slot::DIGEST as i32),
        I::I32Const(71),
        I::Call(str_eq),
        I::I32Eqz,
    ]);
    b.emit(ret_if(0));
    b.emit([I::End]);
    b.emit(binds(8));
    b.emit([I::If(BlockType::Empty), I::LocalGet(fields[8]), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    let manifest = text(m, "manifest");
    b.emit([I::I32Const(tok::ARGUMENTS as i32), load32(0), I::LocalTee(f), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(f)]);
    b.emit(manifest);
    b.emit([I::Call(get), I::LocalTee(f), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(f), I::Call(kind), I::I32Const(KIND_STRING), I::I32Ne]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(f), I::Call(blank_tok)]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(fields[8]), I::LocalGet(f), I::Call(str_eq_tok), I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([I::End, I::I32Const(1)]);
    m.define("vm_approval_ok", b.finish());

    // vm_approval_wf(approval_tok) -> 1 when the presented approval is well formed (consumed or not).
    let mut b = Body::new(1);
    approval_form(m, &mut b, 0, false);
    b.emit([I::I32Const(1)]);
    m.define("vm_approval_wf", b.finish());

    // vm_approval_conflict(approval_tok) -> 1 when another presented approval has the same id and is not the same
    // approval: malformed, or different in any field an approval has (src/eval/request.rs `conflicting`). The
    // approval itself is well formed.
    let wf = m.func("vm_approval_wf");
    let count = m.func("json_count");
    let next = m.func("json_next");
    let mut b = Body::new(1);
    let a = 0;
    let (id, el, n, i, x, y, same) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let keys = ["id", "kind", "mandate", "issued_at", "expires_at", "tool", "target", "digest", "manifest", "consumed"];
    let id_key = text(m, "id");
    b.emit([I::LocalGet(a)]);
    b.emit(id_key.clone());
    b.emit([
        I::Call(get),
        I::LocalSet(id),
        I::I32Const(tok::APPROVALS as i32),
        load32(0),
        I::LocalTee(el),
        I::Call(count),
        I::LocalSet(n),
        I::LocalGet(el),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(el),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
        // Another object whose id is a string equal to this one's.
        I::LocalGet(el),
        I::LocalGet(a),
        I::I32Ne,
        I::LocalGet(el),
        I::Call(kind),
        I::I32Const(KIND_OBJECT),
        I::I32Eq,
        I::I32And,
        I::If(BlockType::Empty),
        I::LocalGet(el),
    ]);
    b.emit(id_key);
    b.emit([
        I::Call(get),
        I::LocalTee(x),
        I::Call(kind),
        I::I32Const(KIND_STRING),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(id),
        I::LocalGet(x),
        I::Call(str_eq_tok),
        I::If(BlockType::Empty),
        I::LocalGet(el),
        I::Call(wf),
        I::LocalSet(same),
    ]);
    for key in keys {
        let key = text(m, key);
        b.emit([I::LocalGet(a)]);
        b.emit(key.clone());
        b.emit([I::Call(get), I::LocalSet(x), I::LocalGet(el)]);
        b.emit(key);
        b.emit([
            I::Call(get),
            I::LocalSet(y),
            // Both absent; or both present, of one kind, and (strings) equal.
            I::LocalGet(x),
            I::I32Const(0),
            I::I32LtS,
            I::LocalGet(y),
            I::I32Const(0),
            I::I32LtS,
            I::I32Ne,
            I::If(BlockType::Empty),
            I::I32Const(0),
            I::LocalSet(same),
            I::Else,
            I::LocalGet(x),
            I::I32Const(0),
            I::I32GeS,
            I::If(BlockType::Empty),
            I::LocalGet(x),
            I::Call(kind),
            I::LocalGet(y),
            I::Call(kind),
            I::I32Ne,
            I::If(BlockType::Empty),
            I::I32Const(0),
            I::LocalSet(same),
            I::Else,
            I::LocalGet(x),
            I::Call(kind),
            I::I32Const(KIND_STRING),
            I::I32Eq,
            I::If(BlockType::Empty),
            I::LocalGet(same),
            I::LocalGet(x),
            I::LocalGet(y),
            I::Call(str_eq_tok),
            I::I32And,
            I::LocalSet(same),
            I::End,
            I::End,
            I::End,
            I::End,
        ]);
    }
    b.emit([I::LocalGet(same), I::I32Eqz]);
    b.emit(ret_if(1));
    b.emit([
        I::End,
        I::End,
        I::End,
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
        I::I32Const(0),
    ]);
    m.define("vm_approval_conflict", b.finish());
}

/// Adds a reason bit to the deny (or escalate) set and its entry rank to the matching array.
fn finding(b: &mut Body, push: u32, escalate: Option<u32>, bit: u32, rank: &[I<'static>]) {
    match escalate {
        None => {
            b.emit([
                I::I32Const(slot::DENY_BITS as i32),
                I::I32Const(slot::DENY_BITS as i32),
                load32(0),
                I::I32Const(bit as i32),
                I::I32Or,
                store32(0),
            ]);
            b.emit([I::I32Const(array::DENY as i32), I::I32Const(slot::DENY_N as i32)]);
        }
        Some(flag) => {
            // `flag` holds 1 for an escalation, 0 for a deny.
            b.emit([
                I::I32Const(slot::ESC_BITS as i32),
                I::I32Const(slot::DENY_BITS as i32),
                I::LocalGet(flag),
                I::Select,
                I::I32Const(slot::ESC_BITS as i32),
                I::I32Const(slot::DENY_BITS as i32),
                I::LocalGet(flag),
                I::Select,
                load32(0),
                I::I32Const(bit as i32),
                I::I32Or,
                store32(0),
                I::I32Const(array::ESC as i32),
                I::I32Const(array::DENY as i32),
                I::LocalGet(flag),
                I::Select,
                I::I32Const(slot::ESC_N as i32),
                I::I32Const(slot::DENY_N as i32),
                I::LocalGet(flag),
                I::Select,
            ]);
        }
    }
    b.emit(rank.iter().cloned());
    b.emit([I::Call(push)]);
}

/// vm_is_holder(mandate) -> 1 when the request's subject is one of the mandate's holders.
fn define_is_holder(m: &mut ModuleBuilder, t: &Tables) {
    let eq = m.func("vm_bytes_eq");
    let mut b = Body::new(1);
    let (rec, i, h) = (b.i32(), b.i32(), b.i32());
    b.emit([
        I::LocalGet(0),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalSet(rec),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(rec),
        load32(12),
        I::I32GeU,
        I::BrIf(1),
        I::LocalGet(rec),
        load32(8),
        I::LocalGet(i),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(h),
        load32(0),
        I::LocalGet(h),
        load32(4),
        I::I32Const(slot::SUBJ_P as i32),
        load32(0),
        I::I32Const(slot::SUBJ_L as i32),
        load32(0),
        I::Call(eq),
    ]);
    b.emit(ret_if(1));
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End, I::I32Const(0)]);
    m.define("vm_is_holder", b.finish());
}

/// vm_lacks_scope(tool_rec) -> 1 when the tool requires scopes and the credential carries none of them.
fn define_lacks_scope(m: &mut ModuleBuilder) {
    let in_strings = m.func("vm_in_strings");
    let mut b = Body::new(1);
    let trec = 0;
    let (i, e) = (b.i32(), b.i32());
    b.emit(field(trec, 20));
    b.emit([I::I32Eqz]);
    b.emit(ret_if(0));
    b.emit([I::Block(BlockType::Empty), I::Loop(BlockType::Empty), I::LocalGet(i)]);
    b.emit(field(trec, 20));
    b.emit([I::I32GeU, I::BrIf(1), I::I32Const(tok::SCOPES as i32), load32(0)]);
    b.emit(field(trec, 16));
    b.emit([
        I::LocalGet(i),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::LocalGet(e),
        load32(4),
        I::Call(in_strings),
    ]);
    b.emit(ret_if(0));
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End, I::I32Const(1)]);
    m.define("vm_lacks_scope", b.finish());
}

/// vm_undeclared_argument(tool_rec) -> 1 when the tool is closed and the call passes an argument it does not
/// declare (src/eval/mod.rs `has_undeclared_argument`).
fn define_undeclared_argument(m: &mut ModuleBuilder) {
    let count = m.func("json_count");
    let next = m.func("json_next");
    let str_eq = m.func("json_str_eq");
    let mut b = Body::new(1);
    let trec = 0;
    let (args, key, i, n, j, e, found) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    b.emit(field(trec, 12));
    b.emit([I::I32Const(1 << codegen::TOOL_OPEN_ARGUMENTS_BIT), I::I32And]);
    b.emit(ret_if(0));
    b.emit([I::I32Const(tok::ARGUMENTS as i32), load32(0), I::LocalTee(args), I::I32Const(0), I::I32LtS]);
    b.emit(ret_if(0));
    b.emit([
        I::LocalGet(args),
        I::Call(count),
        I::LocalSet(n),
        I::LocalGet(args),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(key),
    ]);
    // For each key: is it one of the declared names?
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
        I::I32Const(0),
        I::LocalSet(found),
        I::I32Const(0),
        I::LocalSet(j),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(j),
    ]);
    b.emit(field(trec, 28));
    b.emit([I::I32GeU, I::BrIf(1), I::LocalGet(key)]);
    b.emit(field(trec, 24));
    b.emit([
        I::LocalGet(j),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::LocalGet(e),
        load32(4),
        I::Call(str_eq),
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(found),
        I::Br(2),
        I::End,
        I::LocalGet(j),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(j),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(found),
        I::I32Eqz,
    ]);
    b.emit(ret_if(1));
    b.emit([
        I::LocalGet(key),
        I::Call(next),
        I::Call(next),
        I::LocalSet(key),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::I32Const(0),
    ]);
    m.define("vm_undeclared_argument", b.finish());
}

fn define_examine(m: &mut ModuleBuilder, t: &Tables) {
    let push = m.func("vm_push");
    let cond = m.func("vm_cond");
    let in_strings = m.func("vm_in_strings");
    let approval_ok = m.func("vm_approval_ok");
    let conflict = m.func("vm_approval_conflict");
    let cmp_tok = m.func("json_str_cmp_tok");
    let count = m.func("json_count");
    let next = m.func("json_next");
    let u64m = m.func("vm_u64_member");
    let get = m.func("json_get");
    let lacks_scope = m.func("vm_lacks_scope");
    let undeclared = m.func("vm_undeclared_argument");
    // vm_examine(tool, leaf): every mandate of the leaf's chain, every rule of the tool (src/eval/mod.rs examine).
    let mut b = Body::new(2);
    let (tool, leaf) = (0, 1);
    let (trec, lrec, mrec, ci, cn, chain, ri, rn, ids, rule, rrec, res, granted, flag) = (
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
    );
    let (ai, an, el, best, index) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let (floor, best_el) = (b.i32(), b.i32());
    let now = b.i64();
    b.emit([
        I::LocalGet(tool),
        I::I32Const(TOOL_REC as i32),
        I::I32Mul,
        I::I32Const(t.tools as i32),
        I::I32Add,
        I::LocalSet(trec),
        I::LocalGet(leaf),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(lrec),
        load32(40),
        I::LocalSet(chain),
        I::LocalGet(lrec),
        load32(44),
        I::LocalSet(cn),
        I::I32Const(slot::NOW as i32),
        load64(0),
        I::LocalSet(now),
    ]);
    // A tool that administers mandates is never granted.
    b.emit(field(trec, 12));
    b.emit([I::I32Const(2), I::I32And, I::If(BlockType::Empty)]);
    b.emit([
        I::I32Const(slot::DENY_BITS as i32),
        I::I32Const(slot::DENY_BITS as i32),
        load32(0),
        I::I32Const(reason("mandate.self-modification") as i32),
        I::I32Or,
        store32(0),
        I::End,
    ]);
    // Credential scopes: the tool needs one of its scopes.
    b.emit([I::LocalGet(trec), I::Call(lacks_scope), I::If(BlockType::Empty)]);
    b.emit([
        I::I32Const(slot::DENY_BITS as i32),
        I::I32Const(slot::DENY_BITS as i32),
        load32(0),
        I::I32Const(reason("credential.scope-missing") as i32),
        I::I32Or,
        store32(0),
        I::End,
    ]);
    // Closed tools: an undeclared argument denies.
    b.emit([I::LocalGet(trec), I::Call(undeclared), I::If(BlockType::Empty)]);
    b.emit([
        I::I32Const(slot::DENY_BITS as i32),
        I::I32Const(slot::DENY_BITS as i32),
        load32(0),
        I::I32Const(reason("request.undeclared-argument") as i32),
        I::I32Or,
        store32(0),
        I::End,
    ]);

    // For each mandate of the chain.
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(ci),
        I::LocalGet(cn),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(chain),
        I::LocalGet(ci),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalSet(mrec),
    ]);
    // Validity window (entry rank at +64).
    let rank_at = |off: u64| vec![I::LocalGet(mrec), load32(off)];
    b.emit(field(mrec, 16));
    b.emit([
        I::I32Const(1),
        I::I32And,
        I::LocalGet(now),
        I::LocalGet(mrec),
        load64(24),
        I::I64LtS,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    finding(&mut b, push, None, reason("mandate.not-yet-valid"), &rank_at(72));
    b.emit([I::Else]);
    b.emit(field(mrec, 16));
    b.emit([
        I::I32Const(1),
        I::I32ShrU,
        I::I32Const(1),
        I::I32And,
        I::LocalGet(now),
        I::LocalGet(mrec),
        load64(32),
        I::I64GeS,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    finding(&mut b, push, None, reason("mandate.expired"), &rank_at(72));
    b.emit([I::End, I::End]);
    // Stop: a side-effecting tool under a stopped mandate.
    b.emit(field(trec, 12));
    b.emit([I::I32Const(1), I::I32And, I::If(BlockType::Empty), I::I32Const(tok::STOPS as i32), load32(0)]);
    b.emit(field(mrec, 0));
    b.emit(field(mrec, 4));
    b.emit([I::Call(in_strings), I::If(BlockType::Empty)]);
    finding(&mut b, push, None, reason("stop.active"), &rank_at(76));
    b.emit([I::End, I::End]);
    // Maximum level.
    b.emit(field(mrec, 20));
    b.emit([I::I32Const(-1), I::I32Ne]);
    b.emit(field(trec, 8));
    b.emit(field(mrec, 20));
    b.emit([I::I32GtU, I::I32And, I::If(BlockType::Empty)]);
    finding(&mut b, push, None, reason("level.exceeded"), &rank_at(80));
    b.emit([I::End]);
    // The rules of this tool in this mandate.
    b.emit([
        I::I32Const(0),
        I::LocalSet(granted),
        I::LocalGet(mrec),
        load32(48),
        I::LocalGet(tool),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(rrec),
        load32(4),
        I::LocalSet(rn),
        I::LocalGet(rrec),
        load32(0),
        I::I32Const(4),
        I::I32Mul,
        I::I32Const(t.rule_ids as i32),
        I::I32Add,
        I::LocalSet(ids),
        I::I32Const(0),
        I::LocalSet(ri),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(ri),
        I::LocalGet(rn),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(ids),
        I::LocalGet(ri),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::LocalTee(rule),
        I::I32Const(RULE_REC as i32),
        I::I32Mul,
        I::I32Const(t.rules as i32),
        I::I32Add,
        I::LocalSet(rrec),
        I::LocalGet(rule),
    ]);
    b.emit(field(trec, 8));
    b.emit([I::Call(cond), I::LocalSet(res)]);
    let rule_rank = vec![I::LocalGet(rrec), load32(4)];
    let kind_is = |k: u32| [I::LocalGet(rrec), load32(0), I::I32Const(k as i32), I::I32Eq];
    // allow: true grants.
    b.emit(kind_is(codegen::RULE_ALLOW));
    b.emit([
        I::LocalGet(res),
        I::I32Const(1),
        I::I32Eq,
        I::I32And,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(granted),
    ]);
    b.emit([I::I32Const(array::GRANT as i32), I::I32Const(slot::GRANT_N as i32)]);
    b.emit(rule_rank.clone());
    b.emit([I::Call(push), I::End]);
    // forbid: true or error denies.
    b.emit(kind_is(codegen::RULE_FORBID));
    b.emit([I::LocalGet(res), I::I32Const(0), I::I32Ne, I::I32And, I::If(BlockType::Empty)]);
    finding(&mut b, push, None, reason("rule.forbidden"), &rule_rank);
    b.emit([I::End]);
    // limit and scope: anything but true denies.
    for (k, code) in [(codegen::RULE_LIMIT, "limit.exceeded"), (codegen::RULE_SCOPE, "scope.outside")] {
        b.emit(kind_is(k));
        b.emit([I::LocalGet(res), I::I32Const(1), I::I32Ne, I::I32And, I::If(BlockType::Empty)]);
        finding(&mut b, push, None, reason(code), &rule_rank);
        b.emit([I::End]);
    }
    // The remaining kinds apply when the condition is not false.
    b.emit([I::LocalGet(res), I::If(BlockType::Empty)]);
    // operation id: required, and not empty.
    b.emit(kind_is(codegen::RULE_OPERATION));
    b.emit([
        I::I32Const(slot::HAS_OPID as i32),
        load32(0),
        I::I32Const(slot::OPID_L as i32),
        load32(0),
        I::I32Const(0),
        I::I32Ne,
        I::I32And,
        I::I32Eqz,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    finding(&mut b, push, None, reason("operation.missing-id"), &rule_rank);
    b.emit([I::End]);
    // fact: current only as a JSON integer (u64) equal to the version.
    b.emit(kind_is(codegen::RULE_FACT));
    b.emit([I::If(BlockType::Empty), I::I32Const(tok::FACTS as i32), load32(0)]);
    b.emit(field(rrec, 8));
    b.emit(field(rrec, 12));
    b.emit([
        I::Call(u64m),
        I::If(BlockType::Result(I32)),
        I::I32Const(slot::TMP as i32),
        load64(8),
        I::LocalGet(rrec),
        load64(24),
        I::I64Ne,
        I::Else,
        I::I32Const(1),
        I::End,
        I::If(BlockType::Empty),
    ]);
    b.emit(field(rrec, 16));
    b.emit([I::LocalSet(flag)]);
    finding(&mut b, push, Some(flag), reason("fact.stale"), &rule_rank);
    b.emit([I::End, I::End]);
    // budget: the counter must be present and below the maximum; it is incremented on allow.
    b.emit(kind_is(codegen::RULE_BUDGET));
    b.emit([I::If(BlockType::Empty), I::I32Const(array::COUNTER as i32), I::I32Const(slot::COUNTER_N as i32)]);
    b.emit(field(rrec, 12));
    b.emit([I::I32Const(16), I::I32ShrU, I::Call(push), I::I32Const(tok::COUNTERS as i32), load32(0)]);
    b.emit(field(rrec, 8));
    b.emit(field(rrec, 12));
    b.emit([
        I::I32Const(0xffff),
        I::I32And,
        I::Call(u64m),
        I::If(BlockType::Result(I32)),
        I::I32Const(slot::TMP as i32),
        load64(8),
        I::LocalGet(rrec),
        load64(24),
        I::I64GeU,
        I::Else,
        I::I32Const(1),
        I::End,
        I::If(BlockType::Empty),
    ]);
    finding(&mut b, push, None, reason("budget.exhausted"), &rule_rank);
    b.emit([I::End, I::End]);
    // gate: the smallest id among the satisfying approvals whose id no other approval contradicts, or a missing
    // approval. The smallest satisfying id above `floor` is found first and only then checked for a contradicting
    // copy (one scan per contradicted id, not one per approval); a contradicted id raises the floor.
    b.emit(kind_is(codegen::RULE_GATE));
    b.emit([
        I::If(BlockType::Empty),
        I::I32Const(-1),
        I::LocalSet(best),
        I::I32Const(-1),
        I::LocalSet(floor),
        I::I32Const(tok::APPROVALS as i32),
        load32(0),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::I32Const(-1),
        I::LocalSet(best),
        I::I32Const(tok::APPROVALS as i32),
        load32(0),
        I::LocalTee(el),
        I::Call(count),
        I::LocalSet(an),
        I::LocalGet(el),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(el),
        I::I32Const(0),
        I::LocalSet(ai),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(ai),
        I::LocalGet(an),
        I::I32GeU,
        I::BrIf(1),
        I::LocalGet(el),
    ]);
    b.emit(field(rrec, 8));
    // Issued under the gate's mandate or an ancestor: the chain up to and including position ci.
    b.emit([
        I::LocalGet(chain),
        I::LocalGet(ci),
        I::I32Const(1),
        I::I32Add,
        I::Call(approval_ok),
        I::If(BlockType::Empty),
    ]);
    let id = m.bytes(b"id");
    b.emit([I::LocalGet(el), I::I32Const(id as i32), I::I32Const(2), I::Call(get), I::LocalSet(index)]);
    // Above the floor, and below the best so far.
    b.emit([
        I::LocalGet(floor),
        I::I32Const(0),
        I::I32LtS,
        I::If(BlockType::Result(I32)),
        I::I32Const(1),
        I::Else,
        I::LocalGet(index),
        I::LocalGet(floor),
        I::Call(cmp_tok),
        I::I32Const(0),
        I::I32GtS,
        I::End,
        I::If(BlockType::Empty),
        I::LocalGet(best),
        I::I32Const(0),
        I::I32LtS,
        I::If(BlockType::Result(I32)),
        I::I32Const(1),
        I::Else,
        I::LocalGet(index),
        I::LocalGet(best),
        I::Call(cmp_tok),
        I::I32Const(0),
        I::I32LtS,
        I::End,
        I::If(BlockType::Empty),
        I::LocalGet(index),
        I::LocalSet(best),
        I::LocalGet(el),
        I::LocalSet(best_el),
        I::End,
        I::End,
        I::End,
        I::LocalGet(el),
        I::Call(next),
        I::LocalSet(el),
        I::LocalGet(ai),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(ai),
        I::Br(0),
        I::End,
        I::End,
        // None: missing. A contradicted id: try the ids above it. Else found.
        I::LocalGet(best),
        I::I32Const(0),
        I::I32LtS,
        I::BrIf(1),
        I::LocalGet(best_el),
        I::Call(conflict),
        I::I32Eqz,
        I::BrIf(1),
        I::LocalGet(best),
        I::LocalSet(floor),
        I::Br(0),
        I::End,
        I::End,
        I::End,
        I::LocalGet(best),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
    ]);
    // Satisfied: a single-use kind is consumed on allow; the gate is listed among the deciding rules.
    b.emit([I::I32Const(t.approvals as i32)]);
    b.emit(field(rrec, 8));
    b.emit([
        I::I32Const(APPROVAL_REC as i32),
        I::I32Mul,
        I::I32Add,
        load32(12),
        I::If(BlockType::Empty),
        I::I32Const(array::CONSUMED as i32),
        I::I32Const(slot::CONSUMED_N as i32),
        I::LocalGet(best),
        I::Call(push),
        I::End,
        I::I32Const(array::GRANT as i32),
        I::I32Const(slot::GRANT_N as i32),
    ]);
    b.emit(rule_rank.clone());
    b.emit([I::Call(push), I::Else, I::I32Const(array::MISSING as i32), I::I32Const(slot::MISSING_N as i32)]);
    b.emit(field(rrec, 12));
    b.emit([I::Call(push)]);
    b.emit([I::I32Const(1), I::LocalSet(flag)]);
    finding(&mut b, push, Some(flag), reason("approval.missing"), &rule_rank);
    b.emit([I::End, I::End]);
    b.emit([I::End]); // res != 0
    b.emit([I::LocalGet(ri), I::I32Const(1), I::I32Add, I::LocalSet(ri), I::Br(0), I::End, I::End]);
    // Nothing granted: the mandate's `otherwise`.
    b.emit([I::LocalGet(granted), I::I32Eqz, I::If(BlockType::Empty)]);
    b.emit(field(mrec, 16));
    b.emit([I::I32Const(2), I::I32ShrU, I::I32Const(1), I::I32And, I::LocalSet(flag)]);
    finding(&mut b, push, Some(flag), reason("rule.unmatched"), &rank_at(84));
    b.emit([I::End]);
    b.emit([I::LocalGet(ci), I::I32Const(1), I::I32Add, I::LocalSet(ci), I::Br(0), I::End, I::End]);
    m.define("vm_examine", b.finish());
}

fn define_finish(m: &mut ModuleBuilder, t: &Tables) {
    let out_reset = m.func("out_reset");
    let out_bytes = m.func("out_bytes");
    let out_pos = m.func("out_pos");
    let out_overflow = m.func("out_overflow");
    let this = m.func("vm_finish");
    let out_raw = m.func("out_json_string_raw");
    let out_tok = m.func("out_json_string_tok");
    let sort = m.func("vm_sort_unique");
    let cmp = m.func("vm_bytes_cmp");
    let alloc = m.func("vm_alloc");
    let digest = m.func("vm_digest");
    let get = m.func("json_get");
    let kind = m.func("json_kind");
    let blank_tok = m.func("vm_blank_tok");
    let reasons_at = reasons_table(m);
    let outcomes = [
        text(m, "{\"decision\":\"deny\",\"reasons\":["),
        text(m, "{\"decision\":\"escalate\",\"reasons\":["),
        text(m, "{\"decision\":\"allow\",\"reasons\":["),
    ];

    // vm_finish(outcome) -> (ptr << 32) | len of the decision JSON.
    let mut b = Body::new(1);
    let outcome = 0;
    let (bits, i, first, arr, n, r, p, e, mrec, tmp) =
        (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    // The escaped resource id and manifest of an escalation, written once and copied per missing approval
    // (length -1: not prepared, escape in place).
    let (tp, tl, mp, ml) = (b.i32(), b.i32(), b.i32(), b.i32());
    let comma = text(m, ",");
    let put = |b: &mut Body, s: &[I<'static>]| {
        b.emit(s.iter().cloned());
        b.emit([I::Call(out_bytes)]);
    };
    // Separator before every element but the first.
    let sep = |b: &mut Body, comma: &[I<'static>]| {
        b.emit([I::LocalGet(first), I::I32Eqz, I::If(BlockType::Empty)]);
        b.emit(comma.iter().cloned());
        b.emit([I::Call(out_bytes), I::End, I::I32Const(0), I::LocalSet(first)]);
    };
    // The consumed approvals' ids, escaped, computed before anything is written (they borrow the output area).
    b.emit([I::Call(out_reset), I::LocalGet(outcome), I::I32Const(ALLOW), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::I32Const(slot::CONSUMED_N as i32),
        load32(0),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::Call(out_pos),
        I::LocalSet(p),
        I::I32Const(array::CONSUMED as i32),
        I::LocalGet(i),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::Call(out_tok),
        I::Call(out_pos),
        I::LocalGet(p),
        I::I32Sub,
        I::LocalTee(n),
        I::Call(alloc),
        I::LocalTee(e),
        I::LocalGet(p),
        I::LocalGet(n),
        I::MemoryCopy { src_mem: 0, dst_mem: 0 },
        I::I32Const(array::CONSUMED_JSON as i32),
        I::LocalGet(i),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(tmp),
        I::LocalGet(e),
        store32(0),
        I::LocalGet(tmp),
        I::LocalGet(n),
        store32(4),
        I::Call(out_reset),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::End,
    ]);
    // An escalation may repeat the resource id and the manifest once per missing approval: escape them once.
    let prepare = |b: &mut Body, write: &[I<'static>], ptr: u32, len: u32| {
        b.emit([I::Call(out_pos), I::LocalSet(p)]);
        b.emit(write.iter().cloned());
        b.emit([
            I::Call(out_pos),
            I::LocalGet(p),
            I::I32Sub,
            I::LocalTee(n),
            I::Call(alloc),
            I::LocalTee(e),
            I::If(BlockType::Empty),
            I::LocalGet(e),
            I::LocalGet(p),
            I::LocalGet(n),
            I::MemoryCopy { src_mem: 0, dst_mem: 0 },
            I::LocalGet(e),
            I::LocalSet(ptr),
            I::LocalGet(n),
            I::LocalSet(len),
            I::End,
            I::Call(out_reset),
        ]);
    };
    b.emit([I::I32Const(-1), I::LocalSet(tl), I::I32Const(-1), I::LocalSet(ml)]);
    b.emit([I::LocalGet(outcome), I::I32Const(ESCALATE), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([I::I32Const(slot::HAS_RES as i32), load32(0), I::If(BlockType::Empty)]);
    prepare(
        &mut b,
        &[I::I32Const(slot::RES_P as i32), load32(0), I::I32Const(slot::RES_L as i32), load32(0), I::Call(out_raw)],
        tp,
        tl,
    );
    b.emit([I::End]);
    let manifest_key = text(m, "manifest");
    b.emit([I::I32Const(tok::ARGUMENTS as i32), load32(0), I::LocalTee(tmp), I::I32Const(0), I::I32GeS]);
    b.emit([I::If(BlockType::Empty), I::LocalGet(tmp)]);
    b.emit(manifest_key);
    b.emit([
        I::Call(get),
        I::LocalTee(tmp),
        I::Call(kind),
        I::I32Const(KIND_STRING),
        I::I32Eq,
        I::If(BlockType::Empty),
    ]);
    prepare(&mut b, &[I::LocalGet(tmp), I::Call(out_tok)], mp, ml);
    b.emit([I::End, I::End, I::End]);
    // Header and reasons.
    for (k, o) in outcomes.iter().enumerate() {
        b.emit([I::LocalGet(outcome), I::I32Const(k as i32), I::I32Eq, I::If(BlockType::Empty)]);
        put(&mut b, o);
        b.emit([I::End]);
    }
    b.emit([
        I::I32Const(slot::DENY_BITS as i32),
        load32(0),
        I::I32Const(slot::ESC_BITS as i32),
        load32(0),
        I::I32Const(reason("rule.allowed") as i32),
        I::LocalGet(outcome),
        I::I32Const(ESCALATE),
        I::I32Eq,
        I::Select,
        I::LocalGet(outcome),
        I::I32Const(DENY),
        I::I32Eq,
        I::Select,
        I::LocalSet(bits),
        I::I32Const(1),
        I::LocalSet(first),
        I::I32Const(0),
        I::LocalSet(i),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::I32Const(REASONS.len() as i32),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([I::LocalGet(bits), I::LocalGet(i), I::I32ShrU, I::I32Const(1), I::I32And, I::If(BlockType::Empty)]);
    sep(&mut b, &comma);
    b.emit([
        I::I32Const(reasons_at as i32),
        I::LocalGet(i),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(tmp),
        load32(0),
        I::LocalGet(tmp),
        load32(4),
        I::Call(out_bytes),
        I::End,
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
    ]);
    put(&mut b, &text(m, "],\"rules\":["));
    // Deciding rules of the outcome, by rank.
    b.emit([
        I::I32Const(array::ESC as i32),
        I::I32Const(array::GRANT as i32),
        I::LocalGet(outcome),
        I::I32Const(ESCALATE),
        I::I32Eq,
        I::Select,
        I::I32Const(array::DENY as i32),
        I::LocalGet(outcome),
        I::I32Const(DENY),
        I::I32Ne,
        I::Select,
        I::LocalSet(arr),
        I::I32Const(slot::ESC_N as i32),
        I::I32Const(slot::GRANT_N as i32),
        I::LocalGet(outcome),
        I::I32Const(ESCALATE),
        I::I32Eq,
        I::Select,
        I::I32Const(slot::DENY_N as i32),
        I::LocalGet(outcome),
        I::I32Const(DENY),
        I::I32Ne,
        I::Select,
        I::LocalTee(tmp),
        I::LocalGet(arr),
        I::LocalGet(tmp),
        I::Call(sort),
        load32(0),
        I::LocalSet(n),
        I::I32Const(1),
        I::LocalSet(first),
        I::I32Const(0),
        I::LocalSet(i),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    sep(&mut b, &comma);
    b.emit([
        I::I32Const(t.entries as i32),
        I::LocalGet(arr),
        I::LocalGet(i),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(tmp),
        load32(0),
        I::LocalGet(tmp),
        load32(4),
        I::Call(out_bytes),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
    ]);
    put(&mut b, &text(m, "],\"missing_approvals\":["));
    // Missing approvals (escalate only): the static prefix, then the values of this call the kind binds.
    b.emit([I::LocalGet(outcome), I::I32Const(ESCALATE), I::I32Eq, I::If(BlockType::Empty)]);
    b.emit([
        I::I32Const(array::MISSING as i32),
        I::I32Const(slot::MISSING_N as i32),
        I::Call(sort),
        I::I32Const(slot::MISSING_N as i32),
        load32(0),
        I::LocalSet(n),
        I::I32Const(1),
        I::LocalSet(first),
        I::I32Const(0),
        I::LocalSet(i),
    ]);
    // A full output area stops the list: the decision is replaced by `decision.oversize` anyway.
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::Call(out_overflow),
        I::I32Or,
        I::BrIf(1),
    ]);
    sep(&mut b, &comma);
    b.emit([
        I::I32Const(t.missing as i32),
        I::I32Const(array::MISSING as i32),
        I::LocalGet(i),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(12),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::LocalGet(e),
        load32(4),
        I::Call(out_bytes),
        I::LocalGet(e),
        load32(8),
        I::LocalSet(bits),
    ]);
    b.emit([I::LocalGet(bits), I::I32Const(1), I::I32And, I::If(BlockType::Empty)]);
    put(&mut b, &text(m, ",\"tool\":"));
    b.emit([
        I::I32Const(slot::NAME_P as i32),
        load32(0),
        I::I32Const(slot::NAME_L as i32),
        load32(0),
        I::Call(out_raw),
        I::End,
    ]);
    b.emit([
        I::LocalGet(bits),
        I::I32Const(1),
        I::I32ShrU,
        I::I32Const(1),
        I::I32And,
        I::I32Const(slot::HAS_RES as i32),
        load32(0),
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    put(&mut b, &text(m, ",\"target\":"));
    b.emit([
        I::LocalGet(tl),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
        I::LocalGet(tp),
        I::LocalGet(tl),
        I::Call(out_bytes),
        I::Else,
        I::I32Const(slot::RES_P as i32),
        load32(0),
        I::I32Const(slot::RES_L as i32),
        load32(0),
        I::Call(out_raw),
        I::End,
        I::End,
    ]);
    b.emit([I::LocalGet(bits), I::I32Const(4), I::I32And, I::If(BlockType::Empty), I::Call(digest)]);
    put(&mut b, &text(m, ",\"digest\":"));
    b.emit([I::I32Const(slot::DIGEST as i32), I::I32Const(71), I::Call(out_raw), I::End]);
    let manifest = text(m, "manifest");
    b.emit([
        I::LocalGet(bits),
        I::I32Const(3),
        I::I32ShrU,
        I::I32Const(1),
        I::I32And,
        I::I32Const(tok::ARGUMENTS as i32),
        load32(0),
        I::LocalTee(tmp),
        I::I32Const(0),
        I::I32GeS,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    b.emit([I::LocalGet(tmp)]);
    b.emit(manifest);
    b.emit([
        I::Call(get),
        I::LocalTee(tmp),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
        I::LocalGet(tmp),
        I::Call(kind),
        I::I32Const(KIND_STRING),
        I::I32Eq,
        I::LocalGet(tmp),
        I::Call(blank_tok),
        I::I32Eqz,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    put(&mut b, &text(m, ",\"manifest\":"));
    b.emit([
        I::LocalGet(ml),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
        I::LocalGet(mp),
        I::LocalGet(ml),
        I::Call(out_bytes),
        I::Else,
        I::LocalGet(tmp),
        I::Call(out_tok),
        I::End,
        I::End,
        I::End,
        I::End,
    ]);
    put(&mut b, &text(m, "}"));
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End, I::End]);
    put(&mut b, &text(m, "],\"obligations\":["));
    // Obligations (allow only), in the order of their JSON text: consume-approval, increment-counter,
    // record-operation.
    b.emit([
        I::LocalGet(outcome),
        I::I32Const(ALLOW),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(first),
    ]);
    // Sort the escaped ids (insertion sort of (ptr, len) pairs by bytes), skipping repeats when writing.
    let (xp, xl, j) = (p, r, mrec);
    let pair =
        |idx: u32| [I::I32Const(array::CONSUMED_JSON as i32), I::LocalGet(idx), I::I32Const(8), I::I32Mul, I::I32Add];
    b.emit([I::I32Const(slot::CONSUMED_N as i32), load32(0), I::LocalSet(n), I::I32Const(1), I::LocalSet(i)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit(pair(i));
    b.emit([
        I::LocalTee(tmp),
        load32(0),
        I::LocalSet(xp),
        I::LocalGet(tmp),
        load32(4),
        I::LocalSet(xl),
        I::LocalGet(i),
        I::LocalSet(j),
    ]);
    b.emit([I::Block(BlockType::Empty), I::Loop(BlockType::Empty), I::LocalGet(j), I::I32Eqz, I::BrIf(1)]);
    b.emit(pair(j));
    b.emit([
        I::I32Const(8),
        I::I32Sub,
        I::LocalTee(tmp),
        load32(0),
        I::LocalGet(tmp),
        load32(4),
        I::LocalGet(xp),
        I::LocalGet(xl),
        I::Call(cmp),
        I::I32Const(0),
        I::I32LeS,
        I::BrIf(1),
    ]);
    b.emit(pair(j));
    b.emit([
        I::LocalGet(tmp),
        I::I64Load(mem(0, 4)),
        I::I64Store(mem(0, 4)),
        I::LocalGet(j),
        I::I32Const(1),
        I::I32Sub,
        I::LocalSet(j),
        I::Br(0),
        I::End,
        I::End,
    ]);
    b.emit(pair(j));
    b.emit([I::LocalTee(tmp), I::LocalGet(xp), store32(0), I::LocalGet(tmp), I::LocalGet(xl), store32(4)]);
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End]);
    let consume = text(m, "{\"kind\":\"consume-approval\",\"id\":");
    let close = text(m, "}");
    b.emit([I::I32Const(0), I::LocalSet(i)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit(pair(i));
    b.emit([I::LocalTee(tmp), load32(0), I::LocalSet(xp), I::LocalGet(tmp), load32(4), I::LocalSet(xl)]);
    // A repeat of the previous id is written once.
    b.emit([
        I::LocalGet(i),
        I::If(BlockType::Empty),
        I::LocalGet(tmp),
        I::I32Const(8),
        I::I32Sub,
        I::LocalTee(e),
        load32(0),
        I::LocalGet(e),
        load32(4),
        I::LocalGet(xp),
        I::LocalGet(xl),
        I::Call(cmp),
        I::I32Eqz,
        I::If(BlockType::Empty),
    ]);
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(2), I::End, I::End]);
    sep(&mut b, &comma);
    put(&mut b, &consume);
    b.emit([I::LocalGet(xp), I::LocalGet(xl), I::Call(out_bytes)]);
    put(&mut b, &close);
    b.emit([I::LocalGet(i), I::I32Const(1), I::I32Add, I::LocalSet(i), I::Br(0), I::End, I::End]);
    // Counters, by rank.
    b.emit([
        I::I32Const(array::COUNTER as i32),
        I::I32Const(slot::COUNTER_N as i32),
        I::Call(sort),
        I::I32Const(slot::COUNTER_N as i32),
        load32(0),
        I::LocalSet(n),
        I::I32Const(0),
        I::LocalSet(i),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    sep(&mut b, &comma);
    b.emit([
        I::I32Const(t.counters as i32),
        I::I32Const(array::COUNTER as i32),
        I::LocalGet(i),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(tmp),
        load32(0),
        I::LocalGet(tmp),
        load32(4),
        I::Call(out_bytes),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
    ]);
    // The operation id of a side-effecting call.
    b.emit([
        I::I32Const(slot::HAS_OPID as i32),
        load32(0),
        I::I32Const(slot::OPID_L as i32),
        load32(0),
        I::I32Const(0),
        I::I32Ne,
        I::I32And,
        I::I32Const(slot::TOOL as i32),
        load32(0),
        I::I32Const(TOOL_REC as i32),
        I::I32Mul,
        I::I32Const(t.tools as i32),
        I::I32Add,
        load32(12),
        I::I32Const(1),
        I::I32And,
        I::I32And,
        I::If(BlockType::Empty),
    ]);
    sep(&mut b, &comma);
    put(&mut b, &text(m, "{\"kind\":\"record-operation\",\"id\":"));
    b.emit([
        I::I32Const(slot::OPID_P as i32),
        load32(0),
        I::I32Const(slot::OPID_L as i32),
        load32(0),
        I::Call(out_raw),
    ]);
    put(&mut b, &close);
    b.emit([I::End, I::End]);
    put(&mut b, &text(m, "],\"mandate_chain\":["));
    // The chain, once the mandate is known.
    b.emit([
        I::I32Const(slot::LEAF as i32),
        load32(0),
        I::LocalTee(tmp),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::LocalGet(tmp),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(tmp),
        load32(40),
        I::LocalSet(arr),
        I::LocalGet(tmp),
        load32(44),
        I::LocalSet(n),
        I::I32Const(1),
        I::LocalSet(first),
        I::I32Const(0),
        I::LocalSet(i),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
    ]);
    sep(&mut b, &comma);
    b.emit([
        I::LocalGet(arr),
        I::LocalGet(i),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(tmp),
        load32(56),
        I::LocalGet(tmp),
        load32(60),
        I::Call(out_bytes),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::End,
    ]);
    put(&mut b, &text(m, "],\"escalate_to\":"));
    b.emit([I::LocalGet(outcome), I::I32Const(ESCALATE), I::I32Eq, I::If(BlockType::Empty)]);
    // The root's principal: the first mandate of the chain (arr still holds the chain).
    b.emit([
        I::LocalGet(arr),
        load32(0),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(tmp),
        load32(64),
        I::LocalGet(tmp),
        load32(68),
        I::Call(out_bytes),
        I::Else,
    ]);
    put(&mut b, &text(m, "null"));
    b.emit([I::End]);
    put(&mut b, &text(m, ",\"policy\":"));
    b.emit([I::I32Const(t.policy_json.0 as i32), I::I32Const(t.policy_json.1 as i32), I::Call(out_bytes)]);
    put(&mut b, &close);
    // A decision that did not fit the output area is replaced by a deny of its own (src/eval/mod.rs `decide`);
    // that one always fits, the area being at least as large as all the static text of the policy.
    let oversize = reason("decision.oversize") as i32;
    b.emit([
        I::Call(out_overflow),
        I::I32Const(slot::DENY_BITS as i32),
        load32(0),
        I::I32Const(oversize),
        I::I32Ne,
        I::I32And,
        I::If(BlockType::Empty),
        I::I32Const(slot::DENY_BITS as i32),
        I::I32Const(oversize),
        store32(0),
        I::I32Const(slot::DENY_N as i32),
        I::I32Const(0),
        store32(0),
        I::I32Const(DENY),
        I::Call(this),
        I::Return,
        I::End,
    ]);
    b.emit([
        I::I64Const(OUT_BASE as i64),
        I::I64Const(32),
        I::I64Shl,
        I::Call(out_pos),
        I::I32Const(OUT_BASE as i32),
        I::I32Sub,
        I::I64ExtendI32U,
        I::I64Or,
    ]);
    m.define("vm_finish", b.finish());
}

fn define_entry_points(m: &mut ModuleBuilder, t: &Tables) {
    use super::super::layout::INPUT_BASE;
    // remit_alloc(len) -> where to write the request, or 0 when it is too large.
    let mut b = Body::new(1);
    b.emit([
        I::I32Const(INPUT_BASE as i32),
        I::I32Const(0),
        I::LocalGet(0),
        I::I32Const(MAX_INPUT as i32),
        I::I32LeU,
        I::Select,
    ]);
    m.define("remit_alloc", b.finish());

    let mut b = Body::new(0);
    b.emit([I::I64Const(((t.policy_info.0 as i64) << 32) | t.policy_info.1 as i64)]);
    m.define("remit_policy_info", b.finish());

    let parse = m.func("json_parse");
    let kind = m.func("json_kind");
    let fields = m.func("vm_fields");
    let strings_only = m.func("vm_strings_only");
    let str_of = m.func("vm_str");
    let ts = m.func("vm_parse_timestamp");
    let dec = m.func("vm_parse_decimal");
    let u64p = m.func("vm_parse_u64");
    let start = m.func("json_start");
    let end = m.func("json_end");
    let find = m.func("vm_find");
    let blank = m.func("vm_blank");
    let examine = m.func("vm_examine");
    let is_holder = m.func("vm_is_holder");
    let finish = m.func("vm_finish");
    let mut b = Body::new(3);
    let (ptr, len, listing) = (0, 1, 2);
    let (flags, x, y, i, h) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let packed = b.i64();
    let deny_with = |bit: u32| [I::I32Const(bit as i32), I::Return];
    // A fresh call: every slot and count the decision reads starts empty.
    b.emit([I::I32Const(slot::BUMP as i32), I::I32Const(VM_SCRATCH as i32), store32(0)]);
    for s in [
        slot::DENY_BITS,
        slot::ESC_BITS,
        slot::DENY_N,
        slot::ESC_N,
        slot::GRANT_N,
        slot::MISSING_N,
        slot::CONSUMED_N,
        slot::COUNTER_N,
        slot::DIGEST_DONE,
        slot::HAS_RES,
        slot::HAS_OPID,
        slot::HAS_ATTEMPT,
    ] {
        b.emit([I::I32Const(s as i32), I::I32Const(0), store32(0)]);
    }
    b.emit([I::I32Const(slot::LISTING as i32), I::LocalGet(listing), store32(0)]);
    // Every token slot starts absent: a listing reads no action, and nothing may leak from the previous call.
    for s in [slot::LEAF, slot::TOOL].into_iter().chain((tok::SUBJECT..tok::ROOT).step_by(4)) {
        b.emit([I::I32Const(s as i32), I::I32Const(-1), store32(0)]);
    }
    // The input must be the region remit_alloc handed out.
    b.emit([I::LocalGet(len), I::I32Const(MAX_INPUT as i32), I::I32GtU, I::If(BlockType::Empty)]);
    b.emit(deny_with(reason("request.oversize")));
    b.emit([I::End, I::LocalGet(ptr), I::I32Const(INPUT_BASE as i32), I::I32Ne, I::If(BlockType::Empty)]);
    b.emit(deny_with(reason("request.malformed")));
    b.emit([
        I::End,
        I::LocalGet(ptr),
        I::LocalGet(len),
        I::Call(parse),
        I::LocalTee(x),
        I::I32Const(2),
        I::I32Eq,
        I::If(BlockType::Empty),
    ]);
    b.emit(deny_with(reason("request.oversize")));
    b.emit([I::End, I::LocalGet(x), I::If(BlockType::Empty)]);
    b.emit(deny_with(reason("request.malformed")));
    b.emit([I::End, I::I32Const(0), I::Call(kind), I::I32Const(KIND_OBJECT), I::I32Ne, I::If(BlockType::Empty)]);
    b.emit(deny_with(reason("request.malformed")));
    b.emit([I::End, I::LocalGet(listing), I::I32Const(0), I::Call(fields), I::LocalSet(flags)]);
    // now: a timestamp.
    b.emit([
        I::I32Const(tok::NOW as i32),
        load32(0),
        I::LocalTee(x),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::LocalGet(x),
        I::Call(str_of),
        I::LocalTee(packed),
        I::I64Const(32),
        I::I64ShrU,
        I::I32WrapI64,
        I::LocalGet(packed),
        I::I32WrapI64,
        I::I32Const(slot::TMP as i32),
        I::Call(ts),
        I::If(BlockType::Empty),
        I::I32Const(slot::NOW as i32),
        I::I32Const(slot::TMP as i32),
        load64(8),
        store64(0),
        I::Else,
        I::LocalGet(flags),
        I::I32Const(MALFORMED),
        I::I32Or,
        I::LocalSet(flags),
        I::End,
        I::End,
    ]);
    // attempt: an integer (serde's as_i64, else as_u64): `-?digits` within i64, or digits within u64.
    b.emit([
        I::I32Const(tok::ATTEMPT as i32),
        load32(0),
        I::LocalTee(x),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::LocalGet(x),
        I::Call(start),
        I::LocalSet(y),
        I::LocalGet(x),
        I::Call(end),
        I::LocalGet(y),
        I::I32Sub,
        I::LocalSet(i),
    ]);
    b.emit([
        I::I32Const(0),
        I::LocalSet(h),
        I::LocalGet(y),
        load32(0),
        I::I32Const(0xff),
        I::I32And,
        I::I32Const(b'-' as i32),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(h),
        I::End,
        // The digits after the sign must parse as a u64 (no `+` can occur in JSON).
        I::LocalGet(y),
        I::LocalGet(h),
        I::I32Add,
        I::LocalGet(i),
        I::LocalGet(h),
        I::I32Sub,
        I::I32Const(slot::TMP as i32),
        I::Call(u64p),
        I::If(BlockType::Result(I32)),
        // negative: at most 2^63
        I::LocalGet(h),
        I::If(BlockType::Result(I32)),
        I::I32Const(slot::TMP as i32),
        load64(8),
        I::I64Const(i64::MIN),
        I::I64LeU,
        I::Else,
        I::I32Const(1),
        I::End,
        I::Else,
        I::I32Const(0),
        I::End,
        I::If(BlockType::Empty),
        I::LocalGet(y),
        I::LocalGet(i),
        I::I32Const(slot::ATTEMPT as i32),
        I::Call(dec),
        I::I32Const(slot::HAS_ATTEMPT as i32),
        I::I32Const(1),
        store32(0),
        I::Drop,
        I::Else,
        I::LocalGet(flags),
        I::I32Const(MALFORMED),
        I::I32Or,
        I::LocalSet(flags),
        I::End,
        I::End,
    ]);
    // Arrays of strings.
    for s in [tok::SCOPES, tok::STOPS] {
        b.emit([
            I::I32Const(s as i32),
            load32(0),
            I::LocalTee(x),
            I::I32Const(0),
            I::I32GeS,
            I::If(BlockType::Empty),
            I::LocalGet(x),
            I::Call(strings_only),
            I::I32Eqz,
            I::If(BlockType::Empty),
            I::LocalGet(flags),
            I::I32Const(MALFORMED),
            I::I32Or,
            I::LocalSet(flags),
            I::End,
            I::End,
        ]);
    }
    b.emit([I::LocalGet(flags), I::If(BlockType::Empty)]);
    b.emit([
        I::I32Const(reason("request.malformed") as i32),
        I::I32Const(0),
        I::LocalGet(flags),
        I::I32Const(MALFORMED),
        I::I32And,
        I::Select,
        I::I32Const(reason("request.missing-field") as i32),
        I::I32Const(0),
        I::LocalGet(flags),
        I::I32Const(MISSING),
        I::I32And,
        I::Select,
        I::I32Or,
        I::Return,
        I::End,
    ]);
    // The strings the decision uses.
    for (tk, p, l, has) in [
        (tok::SUBJECT_ID, slot::SUBJ_P, slot::SUBJ_L, None),
        (tok::NAME, slot::NAME_P, slot::NAME_L, None),
        (tok::MANDATE, slot::MANDATE_P, slot::MANDATE_L, None),
        (tok::RESOURCE_ID, slot::RES_P, slot::RES_L, Some(slot::HAS_RES)),
        (tok::OPERATION_ID, slot::OPID_P, slot::OPID_L, Some(slot::HAS_OPID)),
    ] {
        b.emit([I::I32Const(tk as i32), load32(0), I::LocalTee(x), I::I32Const(0), I::I32GeS, I::If(BlockType::Empty)]);
        b.emit([
            I::LocalGet(x),
            I::Call(str_of),
            I::LocalSet(packed),
            I::I32Const(p as i32),
            I::LocalGet(packed),
            I::I64Const(32),
            I::I64ShrU,
            I::I32WrapI64,
            store32(0),
            I::I32Const(l as i32),
            I::LocalGet(packed),
            I::I32WrapI64,
            store32(0),
        ]);
        if let Some(hs) = has {
            // An empty or white-space-only id is absent (src/eval/request.rs `is_blank`).
            b.emit([
                I::I32Const(hs as i32),
                I::LocalGet(packed),
                I::I64Const(32),
                I::I64ShrU,
                I::I32WrapI64,
                I::LocalGet(packed),
                I::I32WrapI64,
                I::Call(blank),
                I::I32Eqz,
                store32(0),
            ]);
        }
        b.emit([I::End]);
    }
    b.emit([I::I32Const(0)]);
    m.define("vm_read_request", b.finish());

    let read = m.func("vm_read_request");
    let mut b = Body::new(2);
    let (ptr, len) = (0, 1);
    let (x, tool, leaf) = (b.i32(), b.i32(), b.i32());
    let deny_with = |bit: u32| {
        [
            I::I32Const(slot::DENY_BITS as i32),
            I::I32Const(bit as i32),
            store32(0),
            I::I32Const(DENY),
            I::Call(finish),
            I::Return,
        ]
    };
    b.emit([
        I::LocalGet(ptr),
        I::LocalGet(len),
        I::I32Const(0),
        I::Call(read),
        I::LocalTee(x),
        I::If(BlockType::Empty),
    ]);
    b.emit([
        I::I32Const(slot::DENY_BITS as i32),
        I::LocalGet(x),
        store32(0),
        I::I32Const(DENY),
        I::Call(finish),
        I::Return,
        I::End,
    ]);
    // Tool, mandate, holder.
    b.emit([
        I::I32Const(t.tool_hash as i32),
        I::I32Const(t.tool_hash_mask as i32),
        I::I32Const(slot::NAME_P as i32),
        load32(0),
        I::I32Const(slot::NAME_L as i32),
        load32(0),
        I::Call(find),
        I::LocalTee(tool),
        I::I32Const(0),
        I::I32LtS,
        I::If(BlockType::Empty),
    ]);
    b.emit(deny_with(reason("tool.undeclared")));
    b.emit([
        I::End,
        I::I32Const(slot::TOOL as i32),
        I::LocalGet(tool),
        store32(0),
        I::I32Const(t.mandate_hash as i32),
        I::I32Const(t.mandate_hash_mask as i32),
        I::I32Const(slot::MANDATE_P as i32),
        load32(0),
        I::I32Const(slot::MANDATE_L as i32),
        load32(0),
        I::Call(find),
        I::LocalTee(leaf),
        I::I32Const(0),
        I::I32LtS,
        I::If(BlockType::Empty),
    ]);
    b.emit(deny_with(reason("mandate.unknown")));
    b.emit([
        I::End,
        I::I32Const(slot::LEAF as i32),
        I::LocalGet(leaf),
        store32(0),
        I::LocalGet(leaf),
        I::Call(is_holder),
        I::I32Eqz,
        I::If(BlockType::Empty),
    ]);
    b.emit(deny_with(reason("subject.not-holder")));
    b.emit([
        I::End,
        I::LocalGet(tool),
        I::LocalGet(leaf),
        I::Call(examine),
        // deny bits ? DENY : (escalate bits ? ESCALATE : ALLOW)
        I::I32Const(DENY),
        I::I32Const(ESCALATE),
        I::I32Const(ALLOW),
        I::I32Const(slot::ESC_BITS as i32),
        load32(0),
        I::Select,
        I::I32Const(slot::DENY_BITS as i32),
        load32(0),
        I::Select,
        I::Call(finish),
    ]);
    m.define("remit_decide", b.finish());
    let _ = TAG_DEC;
}

/// The reason codes as JSON strings, by bit: (ptr, len) pairs in static data, laid out once per module.
fn reasons_table(m: &mut ModuleBuilder) -> u32 {
    let mut bytes = Vec::new();
    for code in REASONS {
        let json = format!("\"{code}\"");
        let p = m.bytes(json.as_bytes());
        bytes.extend_from_slice(&p.to_le_bytes());
        bytes.extend_from_slice(&(json.len() as u32).to_le_bytes());
    }
    // Both users ask for the same bytes; interning them keeps one copy.
    m.bytes(&bytes)
}

/// Index of a reason code (its bit position).
fn code(c: &str) -> i32 {
    reason(c).trailing_zeros() as i32
}

/// vm_hidden(tool, leaf) -> the index of the first reason that denies every call to the tool (src/eval/visible.rs
/// `hidden_because`), or -1; the rank of the clause behind it (or -1) is left in slot TMP.
fn define_hidden(m: &mut ModuleBuilder, t: &Tables) {
    let lacks_scope = m.func("vm_lacks_scope");
    let in_strings = m.func("vm_in_strings");
    let poss = m.func("vm_poss");
    let mut b = Body::new(2);
    let (tool, leaf) = (0, 1);
    let (trec, chain, cn, ci, mrec, best, ri, rn, ids, rrec, p, may, best_f) = (
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
        b.i32(),
    );
    let now = b.i64();
    let found = |b: &mut Body, c: i32, rank: u32| {
        b.emit([I::I32Const(slot::TMP as i32), I::LocalGet(rank), store32(0), I::I32Const(c), I::Return]);
    };
    b.emit([
        I::I32Const(slot::TMP as i32),
        I::I32Const(-1),
        store32(0),
        I::LocalGet(tool),
        I::I32Const(TOOL_REC as i32),
        I::I32Mul,
        I::I32Const(t.tools as i32),
        I::I32Add,
        I::LocalSet(trec),
        I::LocalGet(leaf),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(mrec),
        load32(40),
        I::LocalSet(chain),
        I::LocalGet(mrec),
        load32(44),
        I::LocalSet(cn),
        I::I32Const(slot::NOW as i32),
        load64(0),
        I::LocalSet(now),
    ]);
    b.emit(field(trec, 12));
    b.emit([I::I32Const(2), I::I32And]);
    b.emit(ret_if(code("mandate.self-modification")));
    b.emit([I::LocalGet(trec), I::Call(lacks_scope)]);
    b.emit(ret_if(code("credential.scope-missing")));
    // Per-mandate reasons in order; the smallest rank among the mandates that give one.
    let each_mandate = |b: &mut Body, test: &dyn Fn(&mut Body), rank_off: u64| {
        b.emit([I::I32Const(-1), I::LocalSet(best), I::I32Const(0), I::LocalSet(ci)]);
        b.emit([
            I::Block(BlockType::Empty),
            I::Loop(BlockType::Empty),
            I::LocalGet(ci),
            I::LocalGet(cn),
            I::I32GeU,
            I::BrIf(1),
        ]);
        b.emit([
            I::LocalGet(chain),
            I::LocalGet(ci),
            I::I32Const(4),
            I::I32Mul,
            I::I32Add,
            load32(0),
            I::I32Const(MANDATE_REC as i32),
            I::I32Mul,
            I::I32Const(t.mandates as i32),
            I::I32Add,
            I::LocalSet(mrec),
        ]);
        test(b);
        // best = min(best, rank) as unsigned, so -1 is "none".
        b.emit([
            I::If(BlockType::Empty),
            I::LocalGet(mrec),
            load32(rank_off),
            I::LocalGet(best),
            I::LocalGet(mrec),
            load32(rank_off),
            I::LocalGet(best),
            I::I32LtU,
            I::Select,
            I::LocalSet(best),
            I::End,
            I::LocalGet(ci),
            I::I32Const(1),
            I::I32Add,
            I::LocalSet(ci),
            I::Br(0),
            I::End,
            I::End,
        ]);
    };
    let not_yet = |b: &mut Body| {
        b.emit(field(mrec, 16));
        b.emit([I::I32Const(1), I::I32And, I::LocalGet(now), I::LocalGet(mrec), load64(24), I::I64LtS, I::I32And]);
    };
    let expired = |b: &mut Body| {
        b.emit(field(mrec, 16));
        b.emit([
            I::I32Const(1),
            I::I32ShrU,
            I::I32Const(1),
            I::I32And,
            I::LocalGet(now),
            I::LocalGet(mrec),
            load64(32),
            I::I64GeS,
            I::I32And,
        ]);
    };
    let stopped = |b: &mut Body| {
        b.emit(field(trec, 12));
        b.emit([I::I32Const(1), I::I32And, I::If(BlockType::Result(I32)), I::I32Const(tok::STOPS as i32), load32(0)]);
        b.emit(field(mrec, 0));
        b.emit(field(mrec, 4));
        b.emit([I::Call(in_strings), I::Else, I::I32Const(0), I::End]);
    };
    let above = |b: &mut Body| {
        b.emit(field(mrec, 20));
        b.emit([I::I32Const(-1), I::I32Ne]);
        b.emit(field(trec, 8));
        b.emit(field(mrec, 20));
        b.emit([I::I32GtU, I::I32And]);
    };
    for (test, off, c) in [
        (&not_yet as &dyn Fn(&mut Body), 72, "mandate.not-yet-valid"),
        (&expired, 72, "mandate.expired"),
        (&stopped, 76, "stop.active"),
        (&above, 80, "level.exceeded"),
    ] {
        each_mandate(&mut b, test, off);
        b.emit([I::LocalGet(best), I::I32Const(-1), I::I32Ne, I::If(BlockType::Empty)]);
        found(&mut b, code(c), best);
        b.emit([I::End]);
    }
    // Prohibitions that match whatever the arguments, and mandates without a grant that could match.
    b.emit([I::I32Const(-1), I::LocalSet(best_f), I::I32Const(-1), I::LocalSet(best), I::I32Const(0), I::LocalSet(ci)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(ci),
        I::LocalGet(cn),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(chain),
        I::LocalGet(ci),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::I32Const(MANDATE_REC as i32),
        I::I32Mul,
        I::I32Const(t.mandates as i32),
        I::I32Add,
        I::LocalTee(mrec),
        load32(48),
        I::LocalGet(tool),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(rrec),
        load32(4),
        I::LocalSet(rn),
        I::LocalGet(rrec),
        load32(0),
        I::I32Const(4),
        I::I32Mul,
        I::I32Const(t.rule_ids as i32),
        I::I32Add,
        I::LocalSet(ids),
        I::I32Const(0),
        I::LocalSet(ri),
        I::I32Const(0),
        I::LocalSet(may),
    ]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(ri),
        I::LocalGet(rn),
        I::I32GeU,
        I::BrIf(1),
    ]);
    b.emit([
        I::LocalGet(ids),
        I::LocalGet(ri),
        I::I32Const(4),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::LocalTee(p),
        I::I32Const(RULE_REC as i32),
        I::I32Mul,
        I::I32Const(t.rules as i32),
        I::I32Add,
        I::LocalSet(rrec),
        I::LocalGet(p),
    ]);
    b.emit(field(trec, 8));
    b.emit([I::Call(poss), I::LocalSet(p)]);
    // forbid that cannot be false
    b.emit([
        I::LocalGet(rrec),
        load32(0),
        I::I32Const(codegen::RULE_FORBID as i32),
        I::I32Eq,
        I::LocalGet(p),
        I::I32Const(2),
        I::I32And,
        I::I32Eqz,
        I::I32And,
        I::If(BlockType::Empty),
        I::LocalGet(rrec),
        load32(4),
        I::LocalGet(best_f),
        I::LocalGet(rrec),
        load32(4),
        I::LocalGet(best_f),
        I::I32LtU,
        I::Select,
        I::LocalSet(best_f),
        I::End,
        // allow that can be true
        I::LocalGet(rrec),
        load32(0),
        I::I32Const(codegen::RULE_ALLOW as i32),
        I::I32Eq,
        I::LocalGet(p),
        I::I32Const(1),
        I::I32And,
        I::I32And,
        I::If(BlockType::Empty),
        I::I32Const(1),
        I::LocalSet(may),
        I::End,
        I::LocalGet(ri),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(ri),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(may),
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::LocalGet(mrec),
        load32(84),
        I::LocalGet(best),
        I::LocalGet(mrec),
        load32(84),
        I::LocalGet(best),
        I::I32LtU,
        I::Select,
        I::LocalSet(best),
        I::End,
        I::LocalGet(ci),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(ci),
        I::Br(0),
        I::End,
        I::End,
    ]);
    b.emit([I::LocalGet(best_f), I::I32Const(-1), I::I32Ne, I::If(BlockType::Empty)]);
    found(&mut b, code("rule.forbidden"), best_f);
    b.emit([I::End, I::LocalGet(best), I::I32Const(-1), I::I32Ne, I::If(BlockType::Empty)]);
    found(&mut b, code("rule.unmatched"), best);
    b.emit([I::End, I::I32Const(-1)]);
    m.define("vm_hidden", b.finish());

    define_visible(m, t);
}

/// remit_visible_tools(ptr, len) -> the listing JSON (src/eval/visible.rs `Visibility::to_json`).
fn define_visible(m: &mut ModuleBuilder, t: &Tables) {
    let read = m.func("vm_read_request");
    let find = m.func("vm_find");
    let hidden = m.func("vm_hidden");
    let is_holder = m.func("vm_is_holder");
    let out_reset = m.func("out_reset");
    let out_bytes = m.func("out_bytes");
    let out_pos = m.func("out_pos");
    let reasons_at = reasons_table(m);
    let mut b = Body::new(2);
    let (ptr, len) = (0, 1);
    let (x, all, k, leaf, first, e) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let n = t.tool_count as i32;
    let listed = |idx: u32| [I::I32Const(array::LISTED as i32), I::LocalGet(idx), I::I32Const(8), I::I32Mul, I::I32Add];
    // `all` >= 0: every tool is hidden for that reason (a request problem, unknown mandate, not a holder).
    b.emit([
        I::I32Const(-1),
        I::LocalSet(all),
        I::LocalGet(ptr),
        I::LocalGet(len),
        I::I32Const(1),
        I::Call(read),
        I::LocalTee(x),
    ]);
    b.emit([I::If(BlockType::Empty), I::LocalGet(x), I::I32Ctz, I::LocalSet(all), I::Else]);
    b.emit([
        I::I32Const(t.mandate_hash as i32),
        I::I32Const(t.mandate_hash_mask as i32),
        I::I32Const(slot::MANDATE_P as i32),
        load32(0),
        I::I32Const(slot::MANDATE_L as i32),
        load32(0),
        I::Call(find),
        I::LocalTee(leaf),
        I::I32Const(0),
        I::I32LtS,
        I::If(BlockType::Empty),
        I::I32Const(code("mandate.unknown")),
        I::LocalSet(all),
        I::Else,
        I::LocalGet(leaf),
        I::Call(is_holder),
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::I32Const(code("subject.not-holder")),
        I::LocalSet(all),
        I::End,
        I::End,
        I::End,
    ]);
    // Per tool, in name order: (reason, rank).
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(k),
        I::I32Const(n),
        I::I32GeS,
        I::BrIf(1),
    ]);
    b.emit(listed(k));
    b.emit([
        I::LocalTee(e),
        I::LocalGet(all),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Result(I32)),
        I::I32Const(slot::TMP as i32),
        I::I32Const(-1),
        store32(0),
        I::LocalGet(all),
        I::Else,
        I::I32Const(t.tools_by_name as i32),
        I::LocalGet(k),
        I::I32Const(12),
        I::I32Mul,
        I::I32Add,
        load32(0),
        I::LocalGet(leaf),
        I::Call(hidden),
        I::End,
        store32(0),
        I::LocalGet(e),
        I::I32Const(slot::TMP as i32),
        load32(0),
        store32(4),
        I::LocalGet(k),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(k),
        I::Br(0),
        I::End,
        I::End,
    ]);
    // {"visible":[…],"hidden":[…]}
    let name = |k: u32| [I::I32Const(t.tools_by_name as i32), I::LocalGet(k), I::I32Const(12), I::I32Mul, I::I32Add];
    let comma = text(m, ",");
    let sep = |b: &mut Body| {
        b.emit([I::LocalGet(first), I::I32Eqz, I::If(BlockType::Empty)]);
        b.emit(comma.iter().cloned());
        b.emit([I::Call(out_bytes), I::End, I::I32Const(0), I::LocalSet(first)]);
    };
    b.emit([I::Call(out_reset)]);
    b.emit(text(m, "{\"visible\":["));
    b.emit([I::Call(out_bytes), I::I32Const(1), I::LocalSet(first), I::I32Const(0), I::LocalSet(k)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(k),
        I::I32Const(n),
        I::I32GeS,
        I::BrIf(1),
    ]);
    b.emit(listed(k));
    b.emit([load32(0), I::I32Const(-1), I::I32Eq, I::If(BlockType::Empty)]);
    sep(&mut b);
    b.emit(name(k));
    b.emit([I::LocalTee(e), load32(4), I::LocalGet(e), load32(8), I::Call(out_bytes), I::End]);
    b.emit([I::LocalGet(k), I::I32Const(1), I::I32Add, I::LocalSet(k), I::Br(0), I::End, I::End]);
    b.emit(text(m, "],\"hidden\":["));
    b.emit([I::Call(out_bytes), I::I32Const(1), I::LocalSet(first), I::I32Const(0), I::LocalSet(k)]);
    b.emit([
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(k),
        I::I32Const(n),
        I::I32GeS,
        I::BrIf(1),
    ]);
    b.emit(listed(k));
    b.emit([load32(0), I::I32Const(-1), I::I32Ne, I::If(BlockType::Empty)]);
    sep(&mut b);
    b.emit(text(m, "{\"tool\":"));
    b.emit([I::Call(out_bytes)]);
    b.emit(name(k));
    b.emit([I::LocalTee(e), load32(4), I::LocalGet(e), load32(8), I::Call(out_bytes)]);
    b.emit(text(m, ",\"reason\":"));
    b.emit([I::Call(out_bytes), I::I32Const(reasons_at as i32)]);
    b.emit(listed(k));
    b.emit([
        load32(0),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::LocalGet(e),
        load32(4),
        I::Call(out_bytes),
    ]);
    b.emit(listed(k));
    b.emit([load32(4), I::LocalTee(x), I::I32Const(-1), I::I32Ne, I::If(BlockType::Empty)]);
    b.emit(text(m, ",\"rule\":"));
    b.emit([
        I::Call(out_bytes),
        I::I32Const(t.entries as i32),
        I::LocalGet(x),
        I::I32Const(8),
        I::I32Mul,
        I::I32Add,
        I::LocalTee(e),
        load32(0),
        I::LocalGet(e),
        load32(4),
        I::Call(out_bytes),
        I::End,
    ]);
    b.emit(text(m, "}"));
    b.emit([I::Call(out_bytes), I::End]);
    b.emit([I::LocalGet(k), I::I32Const(1), I::I32Add, I::LocalSet(k), I::Br(0), I::End, I::End]);
    b.emit(text(m, "]}"));
    b.emit([
        I::Call(out_bytes),
        I::I64Const(OUT_BASE as i64),
        I::I64Const(32),
        I::I64Shl,
        I::Call(out_pos),
        I::I32Const(OUT_BASE as i32),
        I::I32Sub,
        I::I64ExtendI32U,
        I::I64Or,
    ]);
    m.define("remit_visible_tools", b.finish());
}
