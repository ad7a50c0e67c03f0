//! Modules built by hand for the hosts' tests (tests/runtime.rs, tests/hosts.rs): stubs that speak the ABI
//! (docs/abi.md) but decide nothing, so a host is tested without the decision logic, and a raw module with what a
//! decision module never has (an import, a memory that may grow). The decision module never traps, runs away or
//! answers outside its memory by design; a stub does on request.

use remit_lang::json::MAX_INPUT;
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, Instruction as I, MemorySection, MemoryType, Module, TypeSection, ValType,
};

/// Where a stub's request goes (what its `remit_alloc` returns); its constant bytes follow the request area.
const INPUT_BASE: u32 = 64 * 1024;
/// A stub's fixed memory: a few MiB, so that a runtime with a 1 MiB cap refuses it.
const STUB_PAGES: u64 = 32;

/// The four functions of the ABI, in this order, with their types.
const ABI_FUNCTIONS: [(&str, &[ValType], &[ValType]); 4] = [
    ("remit_alloc", &[ValType::I32], &[ValType::I32]),
    ("remit_decide", &[ValType::I32, ValType::I32], &[ValType::I64]),
    ("remit_visible_tools", &[ValType::I32, ValType::I32], &[ValType::I64]),
    ("remit_policy_info", &[], &[ValType::I64]),
];

/// A module with the ABI's exports: `bodies` in the order of [`ABI_FUNCTIONS`], `data` placed at its addresses,
/// a fixed memory of [`STUB_PAGES`], the global `remit_abi_version`. Validated.
fn abi_module(bodies: [Function; 4], data: &[(u32, Vec<u8>)], abi_version: i32) -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    for (_, params, results) in ABI_FUNCTIONS {
        types.ty().function(params.iter().copied(), results.iter().copied());
    }
    module.section(&types);
    let mut functions = FunctionSection::new();
    for i in 0..4 {
        functions.function(i);
    }
    module.section(&functions);
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: STUB_PAGES,
        maximum: Some(STUB_PAGES),
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    module.section(&memories);
    let mut globals = GlobalSection::new();
    let constant = GlobalType { val_type: ValType::I32, mutable: false, shared: false };
    globals.global(constant, &ConstExpr::i32_const(abi_version));
    module.section(&globals);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("remit_abi_version", ExportKind::Global, 0);
    for (i, (name, _, _)) in ABI_FUNCTIONS.iter().enumerate() {
        exports.export(name, ExportKind::Func, i as u32);
    }
    module.section(&exports);
    let mut code = CodeSection::new();
    for body in &bodies {
        code.function(body);
    }
    module.section(&code);
    let mut segments = DataSection::new();
    for (at, bytes) in data {
        segments.active(0, &ConstExpr::i32_const(*at as i32), bytes.iter().copied());
    }
    module.section(&segments);
    let bytes = module.finish();
    wasmparser::Validator::new().validate_all(&bytes).expect("the stub validates");
    bytes
}

/// Constant bytes for a stub, placed one after another past the request area.
#[derive(Default)]
struct Data {
    segments: Vec<(u32, Vec<u8>)>,
}

impl Data {
    /// Places `bytes` and says where.
    fn bytes(&mut self, bytes: &[u8]) -> u32 {
        let at = self.segments.last().map_or(INPUT_BASE + MAX_INPUT as u32, |(at, b)| at + b.len() as u32);
        self.segments.push((at, bytes.to_vec()));
        at
    }
}

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
    remit_lang::eval::Decision::deny(vec![reason.to_string()], policy).to_json().into_bytes()
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
        .instruction(&I::I32Load8U(wasm_encoder::MemArg {
            offset: 0,
            align: 0,
            target: wasm_encoder::MemArgTarget::Memory(0),
            ordering: None,
        }))
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
    let mut m = Data::default();
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
    let alloc = f;

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
    let decide = f;

    let mut f = Function::new([(1, ValType::I32)]); // 2: first byte
    if listing == Listing::Failing {
        failures(&mut f);
        f.instruction(&I::End); // if len != 0
    }
    pack_const(&mut f, visible_at, STUB_VISIBLE.len());
    f.instruction(&I::End);
    let visible_tools = f;
    let mut f = Function::new([]);
    pack_const(&mut f, info_at, info_json.len());
    f.instruction(&I::End);
    abi_module([alloc, decide, visible_tools, f], &m.segments, abi_version)
}

/// A module with what a decision module never has: an import (`env.clock`), or a memory that may grow.
/// Its `remit_decide` tries to grow the memory by 2,000 pages (125 MiB) and returns 1 byte when that was refused, 2
/// when it succeeded.
pub fn raw_module(import: bool) -> Vec<u8> {
    use wasm_encoder::{EntityType, ImportSection};
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
