//! Request decoding in the module, mirroring src/eval/request.rs: a table of field specifications (parent,
//! key, expected JSON kind, required) walked by one generic loop, then the few fields with a finer type (the
//! timestamp `now`, the integer `attempt`, arrays of strings).
//!
//! Each spec writes the field's token to a slot: the token index, -1 when absent, -2 when of the wrong kind (so a
//! child of a wrongly typed parent is not reported as missing: the parent was already malformed).

use wasm_encoder::{BlockType, Instruction as I, ValType};

use super::super::asm::{load32, load8, store32, Body};
use super::super::module::ModuleBuilder;

const I32: ValType = ValType::I32;

/// JSON kinds as the tape stores them.
pub const KIND_STRING: i32 = 5;
pub const KIND_ARRAY: i32 = 6;
pub const KIND_OBJECT: i32 = 7;

/// Error bits of a decoded request.
pub const MALFORMED: i32 = 1;
pub const MISSING: i32 = 2;
pub const OVERSIZE: i32 = 4;

/// Token slots of the decoder (beyond the named request slots).
pub mod tok {
    use super::super::V;
    pub const SUBJECT: u32 = V + 400;
    pub const SUBJECT_ID: u32 = V + 404;
    pub const CREDENTIAL: u32 = V + 408;
    pub const CREDENTIAL_ID: u32 = V + 412;
    pub const SCOPES: u32 = V + 416;
    pub const ACTION: u32 = V + 420;
    pub const NAME: u32 = V + 424;
    pub const ARGUMENTS: u32 = V + 428;
    pub const RESOURCE: u32 = V + 432;
    pub const RESOURCE_ID: u32 = V + 436;
    pub const CONTEXT: u32 = V + 440;
    pub const MANDATE: u32 = V + 444;
    pub const NOW: u32 = V + 448;
    pub const OPERATION_ID: u32 = V + 452;
    pub const ATTEMPT: u32 = V + 456;
    pub const APPROVALS: u32 = V + 460;
    pub const STOPS: u32 = V + 464;
    pub const FACTS: u32 = V + 468;
    pub const COUNTERS: u32 = V + 472;
    pub const ATTRIBUTES: u32 = V + 476;
    /// The root object's token (always 0 once parsed as an object).
    pub const ROOT: u32 = V + 480;
}

/// One field: `(parent slot, key, kind, required, slot)`; kind 0 means any JSON kind.
type Spec = (u32, &'static str, i32, bool, u32);

fn specs(call: bool) -> Vec<Spec> {
    let mut out = vec![
        (tok::ROOT, "subject", KIND_OBJECT, false, tok::SUBJECT),
        (tok::SUBJECT, "id", KIND_STRING, true, tok::SUBJECT_ID),
        (tok::SUBJECT, "credential", KIND_OBJECT, false, tok::CREDENTIAL),
        (tok::CREDENTIAL, "id", KIND_STRING, false, tok::CREDENTIAL_ID),
        (tok::CREDENTIAL, "scopes", KIND_ARRAY, false, tok::SCOPES),
    ];
    if call {
        out.extend([
            (tok::ROOT, "action", KIND_OBJECT, false, tok::ACTION),
            (tok::ACTION, "name", KIND_STRING, true, tok::NAME),
            (tok::ACTION, "arguments", KIND_OBJECT, false, tok::ARGUMENTS),
        ]);
    }
    out.extend([
        (tok::ROOT, "resource", KIND_OBJECT, false, tok::RESOURCE),
        (tok::RESOURCE, "id", KIND_STRING, false, tok::RESOURCE_ID),
        (tok::ROOT, "context", KIND_OBJECT, false, tok::CONTEXT),
        (tok::CONTEXT, "mandate", KIND_STRING, true, tok::MANDATE),
        (tok::CONTEXT, "now", KIND_STRING, true, tok::NOW),
        (tok::CONTEXT, "operation_id", KIND_STRING, false, tok::OPERATION_ID),
        (tok::CONTEXT, "attempt", 4, false, tok::ATTEMPT),
        (tok::CONTEXT, "approvals", KIND_ARRAY, false, tok::APPROVALS),
        (tok::CONTEXT, "stops", KIND_ARRAY, false, tok::STOPS),
        (tok::CONTEXT, "facts", KIND_OBJECT, false, tok::FACTS),
        (tok::CONTEXT, "counters", KIND_OBJECT, false, tok::COUNTERS),
        (tok::CONTEXT, "attributes", KIND_OBJECT, false, tok::ATTRIBUTES),
    ]);
    out
}

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("vm_fields", &[I32, I32], &[I32]);
    m.declare("vm_strings_only", &[I32], &[I32]);
}

/// Lays the spec tables out in static data: 20-byte records (parent, key ptr, key len, kind, required | slot).
fn table(m: &mut ModuleBuilder, call: bool) -> (u32, u32) {
    let specs = specs(call);
    let mut bytes = Vec::new();
    for (parent, key, kind, required, dst) in &specs {
        let key_at = m.bytes(key.as_bytes());
        for word in [*parent, key_at, key.len() as u32, *kind as u32, (*required as u32) << 31 | dst] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
    }
    (m.raw(&bytes, 4), specs.len() as u32)
}

pub fn define(m: &mut ModuleBuilder) {
    let call_table = table(m, true);
    let listing_table = table(m, false);
    let json_get = m.func("json_get");
    let json_kind = m.func("json_kind");
    // vm_fields(listing: i32, unused) -> error bits. Walks the spec table of a call (0) or a listing (1).
    let mut b = Body::new(2);
    let (spec, end, parent, value, flags, dst) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
    let kind = b.i32();
    b.emit([
        I::I32Const(tok::ROOT as i32),
        I::I32Const(0),
        store32(0),
        I::I32Const(listing_table.0 as i32),
        I::I32Const(call_table.0 as i32),
        I::LocalGet(0),
        I::Select,
        I::LocalSet(spec),
        I::I32Const((listing_table.0 + listing_table.1 * 20) as i32),
        I::I32Const((call_table.0 + call_table.1 * 20) as i32),
        I::LocalGet(0),
        I::Select,
        I::LocalSet(end),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(spec),
        I::LocalGet(end),
        I::I32GeU,
        I::BrIf(1),
        // dst slot, without the required bit
        I::LocalGet(spec),
        load32(16),
        I::I32Const(0x7fff_ffff),
        I::I32And,
        I::LocalSet(dst),
        I::LocalGet(spec),
        load32(0),
        load32(0),
        I::LocalSet(parent),
        I::I32Const(-1),
        I::LocalSet(value),
        I::Block(BlockType::Empty),
        // A parent of the wrong kind was reported already: its children are neither missing nor malformed.
        I::LocalGet(parent),
        I::I32Const(-2),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::I32Const(-2),
        I::LocalSet(value),
        I::Br(1),
        I::End,
        I::LocalGet(parent),
        I::I32Const(0),
        I::I32GeS,
        I::If(BlockType::Empty),
        I::LocalGet(parent),
        I::LocalGet(spec),
        load32(4),
        I::LocalGet(spec),
        load32(8),
        I::Call(json_get),
        I::LocalSet(value),
        I::End,
        I::LocalGet(value),
        I::I32Const(0),
        I::I32LtS,
        I::If(BlockType::Empty),
        // Absent: missing when required.
        I::LocalGet(spec),
        load32(16),
        I::I32Const(31),
        I::I32ShrU,
        I::If(BlockType::Empty),
        I::LocalGet(flags),
        I::I32Const(MISSING),
        I::I32Or,
        I::LocalSet(flags),
        I::End,
        I::Br(1),
        I::End,
        I::LocalGet(spec),
        load32(12),
        I::LocalTee(kind),
        I::If(BlockType::Empty),
        I::LocalGet(value),
        I::Call(json_kind),
        I::LocalGet(kind),
        I::I32Ne,
        I::If(BlockType::Empty),
        I::LocalGet(flags),
        I::I32Const(MALFORMED),
        I::I32Or,
        I::LocalSet(flags),
        I::I32Const(-2),
        I::LocalSet(value),
        I::End,
        I::End,
        I::End,
        I::LocalGet(dst),
        I::LocalGet(value),
        store32(0),
        I::LocalGet(spec),
        I::I32Const(20),
        I::I32Add,
        I::LocalSet(spec),
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(flags),
    ]);
    m.define("vm_fields", b.finish());

    // vm_strings_only(tok) -> 1 when tok is an array whose elements are all strings.
    let json_next = m.func("json_next");
    let json_count = m.func("json_count");
    let mut b = Body::new(1);
    let (i, n, el) = (b.i32(), b.i32(), b.i32());
    b.emit([
        I::LocalGet(0),
        I::Call(json_count),
        I::LocalSet(n),
        I::LocalGet(0),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(el),
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::LocalGet(i),
        I::LocalGet(n),
        I::I32GeU,
        I::BrIf(1),
        I::LocalGet(el),
        I::Call(json_kind),
        I::I32Const(KIND_STRING),
        I::I32Ne,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::Return,
        I::End,
        I::LocalGet(el),
        I::Call(json_next),
        I::LocalSet(el),
        I::LocalGet(i),
        I::I32Const(1),
        I::I32Add,
        I::LocalSet(i),
        I::Br(0),
        I::End,
        I::End,
        I::I32Const(1),
    ]);
    m.define("vm_strings_only", b.finish());
    let _ = load8;
}
