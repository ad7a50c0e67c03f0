//! Modules built by hand for the hosts' tests (tests/runtime.rs, tests/hosts.rs): stubs that speak the ABI
//! (docs/abi.md) but decide nothing, so a host is tested without the decision logic, and a raw module with what
//! `ModuleBuilder` never emits (an import, a memory that may grow). The decision module never traps, runs away or
//! answers outside its memory by design; a stub does on request.

use remit::wasm::layout::{INPUT_BASE, MAX_INPUT};
use remit::wasm::module::ModuleBuilder;
use wasm_encoder::{BlockType, Function, Instruction as I, ValType};

/// The stubs' tool listing.
pub const STUB_VISIBLE: &str = r#"{"visible":["stub_tool"],"hidden":[]}"#;
/// The stubs' answer to an oversize request (`ptr == 0`).
pub const STUB_OVERSIZE: &str = r#"{"decision":"deny","reasons":["request.oversize"]}"#;

/// The stubs' `remit_policy_info`.
pub fn info(policy: &str) -> String {
    format!(r#"{{"policy":"{policy}","abi_version":1,"mandates":[],"entry_points":[]}}"#)
}

/// A host's deny of `reason` for `policy`, as bytes.
pub fn deny(reason: &str, policy: &str) -> Vec<u8> {
    remit::eval::Decision::deny(vec![reason.to_string()], policy).to_json().into_bytes()
}

/// What a stub's `remit_visible_tools` does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Always [`STUB_VISIBLE`].
    Fixed,
    /// On a request starting with `L`, `T` or `X`, what `remit_decide` does; [`STUB_VISIBLE`] otherwise.
    Failing,
}

fn pack_const(f: &mut Function, addr: u32, len: usize) {
    f.instruction(&I::I64Const(((addr as i64) << 32) | len as i64));
}

/// `if first byte (local 2) == byte`; the caller closes the block.
fn on(f: &mut Function, byte: u8) {
    f.instruction(&I::LocalGet(2)).instruction(&I::I32Const(byte as i32)).instruction(&I::I32Eq);
    f.instruction(&I::If(BlockType::Empty));
}

/// Loads the first byte of a non-empty request into local 2 and fails on `L` (loops forever), `T` (traps) and `X`
/// (returns bytes outside the memory); leaves the `if len != 0` block open.
fn failures(f: &mut Function) {
    f.instruction(&I::LocalGet(1)).instruction(&I::If(BlockType::Empty));
    f.instruction(&I::LocalGet(0))
        .instruction(&I::I32Load8U(remit::wasm::module::mem(0, 1)))
        .instruction(&I::LocalSet(2));
    on(f, b'L');
    f.instruction(&I::Loop(BlockType::Empty)).instruction(&I::Br(0)).instruction(&I::End).instruction(&I::End);
    on(f, b'T');
    f.instruction(&I::Unreachable).instruction(&I::End);
    on(f, b'X');
    f.instruction(&I::I64Const((0xffff_0000_i64 << 32) | 16)).instruction(&I::Return).instruction(&I::End);
}

/// A module that speaks the ABI. `remit_decide` on a request starting with `L` loops forever, `T` traps, `X` returns
/// bytes outside its memory, `S` spins ~50 M iterations and then returns `tag`, `P` returns `tag`; any other request
/// is echoed back; an oversize request (`ptr == 0`) gets [`STUB_OVERSIZE`]. `remit_visible_tools` as `listing` says.
pub fn stub(tag: &str, policy: &str, abi_version: i32, listing: Listing) -> Vec<u8> {
    let mut m = ModuleBuilder::new();
    m.declare("remit_alloc", &[ValType::I32], &[ValType::I32]);
    m.declare("remit_decide", &[ValType::I32, ValType::I32], &[ValType::I64]);
    m.declare("remit_visible_tools", &[ValType::I32, ValType::I32], &[ValType::I64]);
    m.declare("remit_policy_info", &[], &[ValType::I64]);
    let tag_at = m.bytes(tag.as_bytes());
    let visible_at = m.bytes(STUB_VISIBLE.as_bytes());
    let oversize_at = m.bytes(STUB_OVERSIZE.as_bytes());
    let info_json = info(policy);
    let info_at = m.bytes(info_json.as_bytes());

    let mut f = Function::new([]);
    f.instruction(&I::LocalGet(0))
        .instruction(&I::I32Const(MAX_INPUT as i32))
        .instruction(&I::I32GtU)
        .instruction(&I::If(BlockType::Result(ValType::I32)))
        .instruction(&I::I32Const(0))
        .instruction(&I::Else)
        .instruction(&I::I32Const(INPUT_BASE as i32))
        .instruction(&I::End)
        .instruction(&I::End);
    m.define("remit_alloc", f);

    let mut f = Function::new([(2, ValType::I32)]); // 2: first byte, 3: counter
    f.instruction(&I::LocalGet(0)).instruction(&I::I32Eqz).instruction(&I::If(BlockType::Empty));
    pack_const(&mut f, oversize_at, STUB_OVERSIZE.len());
    f.instruction(&I::Return).instruction(&I::End);
    failures(&mut f);
    on(&mut f, b'S');
    f.instruction(&I::I32Const(50_000_000))
        .instruction(&I::LocalSet(3))
        .instruction(&I::Loop(BlockType::Empty))
        .instruction(&I::LocalGet(3))
        .instruction(&I::I32Const(1))
        .instruction(&I::I32Sub)
        .instruction(&I::LocalTee(3))
        .instruction(&I::BrIf(0))
        .instruction(&I::End);
    pack_const(&mut f, tag_at, tag.len());
    f.instruction(&I::Return).instruction(&I::End);
    on(&mut f, b'P');
    pack_const(&mut f, tag_at, tag.len());
    f.instruction(&I::Return).instruction(&I::End);
    f.instruction(&I::End); // if len != 0
                            // Echo: (ptr << 32) | len.
    f.instruction(&I::LocalGet(0))
        .instruction(&I::I64ExtendI32U)
        .instruction(&I::I64Const(32))
        .instruction(&I::I64Shl)
        .instruction(&I::LocalGet(1))
        .instruction(&I::I64ExtendI32U)
        .instruction(&I::I64Or)
        .instruction(&I::End);
    m.define("remit_decide", f);

    let mut f = Function::new([(1, ValType::I32)]); // 2: first byte
    if listing == Listing::Failing {
        failures(&mut f);
        f.instruction(&I::End); // if len != 0
    }
    pack_const(&mut f, visible_at, STUB_VISIBLE.len());
    f.instruction(&I::End);
    m.define("remit_visible_tools", f);
    let mut f = Function::new([]);
    pack_const(&mut f, info_at, info_json.len());
    f.instruction(&I::End);
    m.define("remit_policy_info", f);

    for name in ["remit_alloc", "remit_decide", "remit_visible_tools", "remit_policy_info"] {
        m.export_func(name, name);
    }
    m.export_global("remit_abi_version", abi_version);
    m.finish().expect("the stub validates")
}

/// A module built by hand, for what `ModuleBuilder` never emits: an import (`env.clock`), or a memory that may grow.
/// Its `remit_decide` tries to grow the memory by 2,000 pages (125 MiB) and returns 1 byte when that was refused, 2
/// when it succeeded.
pub fn raw_module(import: bool) -> Vec<u8> {
    use wasm_encoder::*;
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    types.ty().function([ValType::I32, ValType::I32], [ValType::I64]);
    types.ty().function([], [ValType::I64]);
    module.section(&types);
    if import {
        let mut imports = ImportSection::new();
        imports.import("env", "clock", EntityType::Function(2));
        module.section(&imports);
    }
    let base = if import { 1 } else { 0 };
    let mut functions = FunctionSection::new();
    for ty in [0, 1, 1, 2] {
        functions.function(ty);
    }
    module.section(&functions);
    let mut memories = MemorySection::new();
    memories.memory(MemoryType { minimum: 1, maximum: None, memory64: false, shared: false, page_size_log2: None });
    module.section(&memories);
    let mut globals = GlobalSection::new();
    globals.global(GlobalType { val_type: ValType::I32, mutable: false, shared: false }, &ConstExpr::i32_const(1));
    module.section(&globals);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("remit_abi_version", ExportKind::Global, 0);
    for (i, name) in ["remit_alloc", "remit_decide", "remit_visible_tools", "remit_policy_info"].iter().enumerate() {
        exports.export(name, ExportKind::Func, base + i as u32);
    }
    module.section(&exports);
    let info_json = info("sha256:grow");
    let mut code = CodeSection::new();
    let mut alloc = Function::new([]);
    alloc.instruction(&I::I32Const(1024)).instruction(&I::End);
    code.function(&alloc);
    for _ in 0..2 {
        let mut grow = Function::new([]);
        grow.instruction(&I::I32Const(2000))
            .instruction(&I::MemoryGrow(0))
            .instruction(&I::I32Const(-1))
            .instruction(&I::I32Eq)
            .instruction(&I::If(BlockType::Result(ValType::I64)))
            .instruction(&I::I64Const(1))
            .instruction(&I::Else)
            .instruction(&I::I64Const(2))
            .instruction(&I::End)
            .instruction(&I::End);
        code.function(&grow);
    }
    let mut policy_info = Function::new([]);
    policy_info.instruction(&I::I64Const(info_json.len() as i64)).instruction(&I::End);
    code.function(&policy_info);
    module.section(&code);
    let mut data = DataSection::new();
    data.active(0, &ConstExpr::i32_const(0), info_json.bytes());
    module.section(&data);
    module.finish()
}
