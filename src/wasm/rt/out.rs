//! The output writer: appends bytes at a cursor, never past a limit. A write that does not fit writes nothing
//! visible (the cursor does not move) and sets the overflow flag, so a caller checks `out_overflow` once at the end
//! instead of after every write.
//!
//! Functions (all i32):
//! - `out_reset()`: cursor at `OUT_BASE`, limit the end of the module's output area, overflow cleared;
//! - `out_to(base, limit)`: cursor at `base`, limit `limit` (clamped to at least `base`), e.g. to write into a
//!   scratch buffer; the overflow flag is kept;
//! - `out_pos() -> i32`: absolute address of the next byte; `out_overflow() -> i32`: 1 after a dropped write;
//! - `out_byte(b)`, `out_bytes(ptr, len)`;
//! - `out_json_string_tok(tok)`: a string token's content as a JSON string, byte for byte as the interpreter's
//!   `write_string` (src/eval/digest.rs) writes the unescaped string: `"` and `\` escaped with a backslash,
//!   `\n \t \r \b \f` short forms, other control characters `\u00xx` (lowercase hex), everything else as is. A token
//!   that is not a string writes `null`;
//! - `out_json_string_raw(ptr, len)`: the same from raw UTF-8 bytes.
//!
//! Slots: [`SLOT_POS`], [`SLOT_LIMIT`], [`SLOT_OVERFLOW`].

use wasm_encoder::ValType;

use super::json::{function, Asm, KIND_STRING, T_END, T_FLAGS, T_START, UNESC_A};
use crate::wasm::layout::{OUT_BASE, SLOTS_BASE};
use crate::wasm::module::{mem, ModuleBuilder};

/// The cursor: absolute address of the next byte.
pub const SLOT_POS: u32 = SLOTS_BASE + 0x480;
/// The cursor never passes this address.
pub const SLOT_LIMIT: u32 = SLOTS_BASE + 0x484;
/// 1 when a write was dropped since the last `out_reset`.
pub const SLOT_OVERFLOW: u32 = SLOTS_BASE + 0x488;

const I32: ValType = ValType::I32;

/// `\u00` as one little-endian word.
const BACKSLASH_U00: i32 = i32::from_le_bytes(*b"\\u00");

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("out_reset", &[], &[]);
    m.declare("out_to", &[I32, I32], &[]);
    m.declare("out_pos", &[], &[I32]);
    m.declare("out_overflow", &[], &[I32]);
    m.declare("out_byte", &[I32], &[]);
    m.declare("out_bytes", &[I32, I32], &[]);
    m.declare("out_json_string_tok", &[I32], &[]);
    m.declare("out_json_string_raw", &[I32, I32], &[]);
    // (dst, src, len): copies without bounds checks; small copies inline, large ones with memory.copy.
    m.declare("out_copy", &[I32, I32, I32], &[]);
}

/// Pushes the value of a slot.
fn slot(a: &mut Asm, at: u32) {
    a.i32_const(at as i32).i32_load(mem(0, 4));
}

/// Stores local `value` in a slot.
fn set_slot(a: &mut Asm, at: u32, value: u32) {
    a.i32_const(at as i32).local_get(value).i32_store(mem(0, 4));
}

/// Branches to `label` unless `need` (pushed by `push_need`) bytes fit between local `o` and local `limit`.
fn reserve(a: &mut Asm, o: u32, limit: u32, push_need: impl FnOnce(&mut Asm), label: &str) {
    a.local_get(limit).local_get(o).i32_sub();
    push_need(a);
    a.i32_lt_u();
    a.br_if(label);
}

pub fn define(m: &mut ModuleBuilder) {
    let mut escapes = [0u8; 256];
    escapes[..0x20].fill(b'u');
    for (c, e) in [(8, b'b'), (9, b't'), (10, b'n'), (12, b'f'), (13, b'r'), (b'"', b'"'), (b'\\', b'\\')] {
        escapes[c as usize] = e;
    }
    let escapes = m.raw(&escapes, 1);
    let hex = m.bytes(b"0123456789abcdef");
    let null = m.bytes(b"null");
    let copy = m.func("out_copy");
    let out_bytes = m.func("out_bytes");
    let out_raw = m.func("out_json_string_raw");
    let json_kind = m.func("json_kind");
    let view = m.func("json_str_view");
    let out_end = OUT_BASE + m.out_size();

    m.define(
        "out_reset",
        function(&[], |a| {
            a.i32_const(SLOT_POS as i32).i32_const(OUT_BASE as i32).i32_store(mem(0, 4));
            a.i32_const(SLOT_LIMIT as i32).i32_const(out_end as i32).i32_store(mem(0, 4));
            a.i32_const(SLOT_OVERFLOW as i32).i32_const(0).i32_store(mem(0, 4));
        }),
    );
    m.define(
        "out_to",
        function(&[], |a| {
            set_slot(a, SLOT_POS, 0);
            // limit = max(limit, base) (unsigned), so `limit - pos` never wraps.
            a.i32_const(SLOT_LIMIT as i32).local_get(1).local_get(0).local_get(1).local_get(0).i32_ge_u().select();
            a.i32_store(mem(0, 4));
        }),
    );
    m.define("out_pos", function(&[], |a| slot(a, SLOT_POS)));
    m.define("out_overflow", function(&[], |a| slot(a, SLOT_OVERFLOW)));

    // out_byte(b)
    const B: u32 = 0;
    const BO: u32 = 1;
    m.define(
        "out_byte",
        function(&[I32], |a| {
            slot(a, SLOT_POS);
            a.local_tee(BO);
            slot(a, SLOT_LIMIT);
            a.i32_lt_u();
            a.if_("fits");
            a.local_get(BO).local_get(B).i32_store8(mem(0, 1));
            a.i32_const(SLOT_POS as i32).local_get(BO).i32_const(1).i32_add().i32_store(mem(0, 4));
            a.return_();
            a.end();
            a.i32_const(SLOT_OVERFLOW as i32).i32_const(1).i32_store(mem(0, 4));
        }),
    );

    // out_copy(dst, src, len): eight bytes at a time, then single bytes; memory.copy (a call out of the module in
    // most runtimes) only for long copies.
    const CD: u32 = 0;
    const CS: u32 = 1;
    const CN: u32 = 2;
    m.define(
        "out_copy",
        function(&[], |a| {
            a.local_get(CN).i32_const(64).i32_ge_u();
            a.if_("long");
            a.local_get(CD).local_get(CS).local_get(CN).memory_copy(0, 0);
            a.return_();
            a.end();
            a.block("words_done");
            a.loop_("words");
            a.local_get(CN).i32_const(8).i32_lt_u();
            a.br_if("words_done");
            a.local_get(CD).local_get(CS).i64_load(mem(0, 1)).i64_store(mem(0, 1));
            a.add_to(CD, 8);
            a.add_to(CS, 8);
            a.add_to(CN, -8);
            a.br("words");
            a.end();
            a.end();
            a.block("done");
            a.loop_("bytes");
            a.local_get(CN).i32_eqz();
            a.br_if("done");
            a.local_get(CD).local_get(CS).i32_load8_u(mem(0, 1)).i32_store8(mem(0, 1));
            a.add_to(CD, 1);
            a.add_to(CS, 1);
            a.add_to(CN, -1);
            a.br("bytes");
            a.end();
            a.end();
        }),
    );

    // out_bytes(ptr, len)
    const P: u32 = 0;
    const L: u32 = 1;
    const O: u32 = 2;
    const LIM: u32 = 3;
    m.define(
        "out_bytes",
        function(&[I32, I32], |a| {
            a.block("full");
            slot(a, SLOT_POS);
            a.local_set(O);
            slot(a, SLOT_LIMIT);
            a.local_set(LIM);
            reserve(
                a,
                O,
                LIM,
                |a| {
                    a.local_get(L);
                },
                "full",
            );
            a.local_get(O).local_get(P).local_get(L).call(copy);
            a.i32_const(SLOT_POS as i32).local_get(O).local_get(L).i32_add().i32_store(mem(0, 4));
            a.return_();
            a.end();
            a.i32_const(SLOT_OVERFLOW as i32).i32_const(1).i32_store(mem(0, 4));
        }),
    );

    // out_json_string_tok(tok)
    const TOK: u32 = 0;
    const TA: u32 = 1;
    const TS: u32 = 2;
    const TL: u32 = 3;
    const TO: u32 = 4;
    m.define(
        "out_json_string_tok",
        function(&[I32; 4], |a| {
            a.local_get(TOK).call(json_kind).i32_const(KIND_STRING).i32_ne();
            a.if_("not_string");
            a.i32_const(null as i32).i32_const(4).call(out_bytes).return_();
            a.end();
            // With escapes: unescape, then escape again the interpreter's way.
            a.local_get(TOK).i32_const(4).i32_shl().local_tee(TA).i32_load8_u(mem(T_FLAGS, 1)).i32_const(1).i32_and();
            a.if_("escaped");
            a.local_get(TOK).i32_const(UNESC_A as i32).call(view).call(out_raw).return_();
            a.end();
            // Without escapes the content has no `"`, `\` or control character: it is written as is.
            a.block("full");
            a.local_get(TA).i32_load(mem(T_START, 4)).local_set(TS);
            a.local_get(TA).i32_load(mem(T_END, 4)).local_get(TS).i32_sub().local_set(TL);
            slot(a, SLOT_POS);
            a.local_set(TO);
            slot(a, SLOT_LIMIT);
            a.local_set(TA);
            reserve(
                a,
                TO,
                TA,
                |a| {
                    a.local_get(TL).i32_const(2).i32_add();
                },
                "full",
            );
            a.local_get(TO).i32_const(b'"' as i32).i32_store8(mem(0, 1));
            a.local_get(TO).i32_const(1).i32_add().local_get(TS).local_get(TL).call(copy);
            a.local_get(TO).local_get(TL).i32_add().i32_const(b'"' as i32).i32_store8(mem(1, 1));
            a.i32_const(SLOT_POS as i32).local_get(TO).local_get(TL).i32_add().i32_const(2).i32_add();
            a.i32_store(mem(0, 4));
            a.return_();
            a.end();
            a.i32_const(SLOT_OVERFLOW as i32).i32_const(1).i32_store(mem(0, 4));
        }),
    );

    // out_json_string_raw(ptr, len)
    const RS: u32 = 0;
    const RL: u32 = 1;
    const RO: u32 = 2;
    const RLIM: u32 = 3;
    const RE: u32 = 4;
    const RC: u32 = 5;
    const RX: u32 = 6;
    m.define(
        "out_json_string_raw",
        function(&[I32; 5], |a| {
            slot(a, SLOT_POS);
            a.local_set(RO);
            slot(a, SLOT_LIMIT);
            a.local_set(RLIM);
            a.local_get(RS).local_get(RL).i32_add().local_set(RE);
            a.block("full");
            reserve(
                a,
                RO,
                RLIM,
                |a| {
                    a.i32_const(1);
                },
                "full",
            );
            a.local_get(RO).i32_const(b'"' as i32).i32_store8(mem(0, 1));
            a.add_to(RO, 1);
            a.block("done");
            a.loop_("bytes");
            a.local_get(RS).local_get(RE).i32_ge_u();
            a.br_if("done");
            a.local_get(RS).i32_load8_u(mem(0, 1)).local_tee(RC).i32_load8_u(mem(u64::from(escapes), 1)).local_tee(RX);
            a.i32_eqz();
            a.if_("plain");
            reserve(
                a,
                RO,
                RLIM,
                |a| {
                    a.i32_const(1);
                },
                "full",
            );
            a.local_get(RO).local_get(RC).i32_store8(mem(0, 1));
            a.add_to(RO, 1);
            a.else_();
            a.local_get(RX).i32_const(b'u' as i32).i32_eq();
            a.if_("unicode");
            // `\u00` and two lowercase hex digits.
            reserve(
                a,
                RO,
                RLIM,
                |a| {
                    a.i32_const(6);
                },
                "full",
            );
            a.local_get(RO).i32_const(BACKSLASH_U00).i32_store(mem(0, 1));
            a.local_get(RO).local_get(RC).i32_const(4).i32_shr_u().i32_load8_u(mem(u64::from(hex), 1));
            a.i32_store8(mem(4, 1));
            a.local_get(RO).local_get(RC).i32_const(15).i32_and().i32_load8_u(mem(u64::from(hex), 1));
            a.i32_store8(mem(5, 1));
            a.add_to(RO, 6);
            a.else_();
            // A short form: backslash and the letter.
            reserve(
                a,
                RO,
                RLIM,
                |a| {
                    a.i32_const(2);
                },
                "full",
            );
            a.local_get(RO).i32_const(b'\\' as i32).i32_store8(mem(0, 1));
            a.local_get(RO).local_get(RX).i32_store8(mem(1, 1));
            a.add_to(RO, 2);
            a.end();
            a.end();
            a.add_to(RS, 1);
            a.br("bytes");
            a.end();
            a.end();
            reserve(
                a,
                RO,
                RLIM,
                |a| {
                    a.i32_const(1);
                },
                "full",
            );
            a.local_get(RO).i32_const(b'"' as i32).i32_store8(mem(0, 1));
            a.i32_const(SLOT_POS as i32).local_get(RO).i32_const(1).i32_add().i32_store(mem(0, 4));
            a.return_();
            a.end();
            a.i32_const(SLOT_OVERFLOW as i32).i32_const(1).i32_store(mem(0, 4));
        }),
    );
}
