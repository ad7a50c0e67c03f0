//! The linker of the decision module, version 2 (docs/module-v2.md): the committed runtime artifact
//! ([`RUNTIME`], crates/remit-rt built by scripts/build-runtime.sh) plus a policy image (written by the compiler,
//! `remit_lang::wasm::image::write`)
//! is the whole module. No compiler runs at build time: the runtime's sections are copied as they are, and the
//! policy is one more data segment.
//!
//! What the linker writes, from the artifact:
//! - the type, function, table, tag, element and code sections as raw bytes, and every data segment of the
//!   runtime's;
//! - one more active data segment: the image, at the runtime's `__heap_base` rounded up to 8 (the value of the
//!   artifact's exported global of that name; the runtime knows the same address as a link-time constant,
//!   crates/remit-rt/src/wasm.rs);
//! - the memory, min = max: the runtime's statics up to `__heap_base`, the image, the output area after it (its size
//!   in the image header, the compiler's `eval::output_limit`), in whole pages;
//! - the globals, plus the immutable `i32` global `remit_abi_version` = [`ABI_VERSION`], appended;
//! - exactly the exports of docs/abi.md: `memory`, `remit_abi_version`, `remit_alloc`, `remit_decide`,
//!   `remit_visible_tools`, `remit_policy_info` (the runtime's test exports `rt_*` and the globals `__data_end`,
//!   `__heap_base` are not exported; their code stays);
//! - the runtime's custom sections (`remit.runtime.sources` names the sources it was built from), then
//!   `remit.gateway`, the gateway's metadata (`remit_lang::wasm::meta`), as `remit build` adds it.
//!
//! The result is validated with wasmparser, for WebAssembly 2.0 features at most and no SIMD (docs/abi.md).

use std::borrow::Cow;
use std::collections::HashMap;

use remit_rt::image::Header;
use wasm_encoder::{
    ConstExpr, CustomSection, DataCountSection, DataSection, Encode, ExportKind, ExportSection, GlobalType,
    MemorySection, MemoryType, Module, RawSection, SectionId, ValType,
};
use wasmparser::{DataKind, ExternalKind, Operator, Parser, Payload, Validator, WasmFeatures};

use crate::err::Error;
use crate::{ABI_VERSION, GATEWAY_SECTION};

/// The runtime artifact (crates/remit-rt, built by scripts/build-runtime.sh; tests/runtime_artifact.rs refuses a
/// stale one).
pub const RUNTIME: &[u8] = include_bytes!("../runtime.wasm");

const PAGE: u64 = 65_536;

/// The functions of docs/abi.md, which the runtime exports under these names, with their types.
const FUNCTIONS: [(&str, &[wasmparser::ValType], &[wasmparser::ValType]); 4] = {
    use wasmparser::ValType::{I32, I64};
    [
        ("remit_alloc", &[I32], &[I32]),
        ("remit_decide", &[I32, I32], &[I64]),
        ("remit_visible_tools", &[I32, I32], &[I64]),
        ("remit_policy_info", &[], &[I64]),
    ]
};

/// The policy image of `module` when `module` is exactly [`RUNTIME`] linked with it (and gateway metadata): the
/// module's last data segment taken as the image and its `remit.gateway` section as the metadata, linking them again
/// gives the same bytes. Such a module runs the runtime's code, whose work is bounded by its input's length and its
/// image (docs/module-v2.md, "The work bound"), so a host may run it without a fuel meter. Any other module, or a
/// byte changed anywhere, gives `None`.
pub fn linked_image(module: &[u8]) -> Option<&[u8]> {
    let mut image = None;
    let mut gateway = None;
    for payload in Parser::new(0).parse_all(module) {
        match payload.ok()? {
            Payload::DataSection(reader) => {
                for segment in reader {
                    image = Some(segment.ok()?.data);
                }
            }
            Payload::CustomSection(section) if section.name() == GATEWAY_SECTION => {
                gateway = Some(std::str::from_utf8(section.data()).ok()?);
            }
            _ => {}
        }
    }
    let image = image?;
    link_image(RUNTIME, image, gateway).is_ok_and(|linked| linked == module).then_some(image)
}

/// Whether `module` is exactly [`RUNTIME`] linked with some image ([`linked_image`]).
pub fn is_linked_runtime(module: &[u8]) -> bool {
    linked_image(module).is_some()
}

/// Where the pieces of a linked module are: what [`link_image`] computed, for tests and docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The runtime's `__heap_base`: the end of its stack and statics.
    pub heap_base: u32,
    /// The image: `__heap_base` rounded up to 8, and its length.
    pub image: u32,
    pub image_len: u32,
    /// The output area: after the image (8-aligned), and its length (the image header's `output_limit`).
    pub output: u32,
    pub output_len: u32,
    /// Pages of memory (min = max).
    pub pages: u64,
}

/// The layout of `runtime` linked with `image` (an image written by `remit_lang::wasm::image::write`).
pub fn layout(runtime: &[u8], image: &[u8]) -> Result<Layout, Error> {
    let runtime = Runtime::read(runtime)?;
    runtime.layout(image)
}

/// `runtime` linked with `image`, and with a `remit.gateway` section holding `gateway` when given.
pub fn link_image(runtime: &[u8], image: &[u8], gateway: Option<&str>) -> Result<Vec<u8>, Error> {
    let rt = Runtime::read(runtime)?;
    let layout = rt.layout(image)?;
    let mut module = Module::new();
    let raw = |module: &mut Module, id: SectionId, range: &Option<std::ops::Range<usize>>| {
        if let Some(range) = range {
            module.section(&RawSection { id: id as u8, data: &runtime[range.clone()] });
        }
    };
    raw(&mut module, SectionId::Type, &rt.types);
    raw(&mut module, SectionId::Function, &rt.functions);
    raw(&mut module, SectionId::Table, &rt.tables);
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: layout.pages,
        maximum: Some(layout.pages),
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    module.section(&memories);
    raw(&mut module, SectionId::Tag, &rt.tags);

    // The runtime's globals as they are, then `remit_abi_version`.
    let mut globals = Vec::new();
    leb128(&mut globals, u64::from(rt.globals_count) + 1);
    if let Some(range) = &rt.global_entries {
        globals.extend_from_slice(&runtime[range.clone()]);
    }
    GlobalType { val_type: ValType::I32, mutable: false, shared: false }.encode(&mut globals);
    ConstExpr::i32_const(ABI_VERSION).encode(&mut globals);
    module.section(&RawSection { id: SectionId::Global as u8, data: &globals });

    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("remit_abi_version", ExportKind::Global, rt.globals_count);
    for (name, _, _) in FUNCTIONS {
        exports.export(name, ExportKind::Func, rt.functions_exported[name]);
    }
    module.section(&exports);
    raw(&mut module, SectionId::Element, &rt.elements);
    if rt.data_count {
        module.section(&DataCountSection { count: rt.data.len() as u32 + 1 });
    }
    raw(&mut module, SectionId::Code, &rt.code);
    let mut data = DataSection::new();
    for range in &rt.data {
        data.raw(&runtime[range.clone()]);
    }
    data.active(0, &ConstExpr::i32_const(layout.image as i32), image.iter().copied());
    module.section(&data);
    for (name, content) in &rt.customs {
        if *name != GATEWAY_SECTION {
            module.section(&CustomSection { name: Cow::Borrowed(name), data: Cow::Borrowed(content) });
        }
    }
    if let Some(gateway) = gateway {
        module
            .section(&CustomSection { name: Cow::Borrowed(GATEWAY_SECTION), data: Cow::Borrowed(gateway.as_bytes()) });
    }
    let bytes = module.finish();
    Validator::new_with_features(WasmFeatures::WASM2.difference(WasmFeatures::SIMD))
        .validate_all(&bytes)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(bytes)
}

/// What the linker reads of the runtime artifact: byte ranges of the sections it copies, and the values it needs.
#[derive(Debug, Default)]
struct Runtime<'a> {
    types: Option<std::ops::Range<usize>>,
    functions: Option<std::ops::Range<usize>>,
    tables: Option<std::ops::Range<usize>>,
    tags: Option<std::ops::Range<usize>>,
    elements: Option<std::ops::Range<usize>>,
    code: Option<std::ops::Range<usize>>,
    /// The global section's entries (after its count), and the count.
    global_entries: Option<std::ops::Range<usize>>,
    globals_count: u32,
    /// Each data segment, whole.
    data: Vec<std::ops::Range<usize>>,
    /// The end of the highest data segment.
    data_end: u64,
    data_count: bool,
    customs: Vec<(&'a str, &'a [u8])>,
    /// The ABI's functions, by name.
    functions_exported: HashMap<&'static str, u32>,
    heap_base: u32,
}

fn range(r: std::ops::Range<u64>) -> std::ops::Range<usize> {
    r.start as usize..r.end as usize
}

fn bad(what: impl Into<String>) -> Error {
    Error::Runtime(what.into())
}

/// The value of a constant expression `i32.const N`.
fn i32_const(expr: &wasmparser::ConstExpr<'_>) -> Option<i32> {
    let mut ops = expr.get_operators_reader();
    match (ops.read().ok()?, ops.read().ok()?) {
        (Operator::I32Const { value }, Operator::End) => Some(value),
        _ => None,
    }
}

impl<'a> Runtime<'a> {
    fn read(bytes: &'a [u8]) -> Result<Runtime<'a>, Error> {
        let mut rt = Runtime::default();
        let mut types = Vec::new();
        let mut function_types = Vec::new();
        let mut global_values = Vec::new();
        let mut exports = HashMap::new();
        let mut memory = None;
        let parse = |e: wasmparser::BinaryReaderError| bad(format!("it does not parse: {e}"));
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.map_err(parse)? {
                Payload::Version { .. } | Payload::End(_) | Payload::CodeSectionEntry(_) => {}
                Payload::TypeSection(reader) => {
                    rt.types = Some(range(reader.range()));
                    for ty in reader.into_iter_err_on_gc_types() {
                        types.push(ty.map_err(parse)?);
                    }
                }
                Payload::ImportSection(reader) => {
                    if reader.count() > 0 {
                        return Err(bad("it imports something (a decision module imports nothing)"));
                    }
                }
                Payload::FunctionSection(reader) => {
                    rt.functions = Some(range(reader.range()));
                    for ty in reader {
                        function_types.push(ty.map_err(parse)?);
                    }
                }
                Payload::TableSection(reader) => rt.tables = Some(range(reader.range())),
                Payload::TagSection(reader) => rt.tags = Some(range(reader.range())),
                Payload::MemorySection(reader) => {
                    for m in reader {
                        if memory.replace(m.map_err(parse)?).is_some() {
                            return Err(bad("it has more than one memory"));
                        }
                    }
                }
                Payload::GlobalSection(reader) => {
                    let all = range(reader.range());
                    rt.globals_count = reader.count();
                    let mut first = all.end;
                    for (i, item) in reader.into_iter_with_offsets().enumerate() {
                        let (offset, global) = item.map_err(parse)?;
                        if i == 0 {
                            first = offset as usize;
                        }
                        global_values.push(i32_const(&global.init_expr));
                    }
                    rt.global_entries = Some(first..all.end);
                }
                Payload::ExportSection(reader) => {
                    for export in reader {
                        let export = export.map_err(parse)?;
                        exports.insert(export.name, (export.kind, export.index));
                    }
                }
                Payload::StartSection { .. } => return Err(bad("it has a start function")),
                Payload::ElementSection(reader) => rt.elements = Some(range(reader.range())),
                Payload::DataCountSection { .. } => rt.data_count = true,
                Payload::CodeSectionStart { unchecked_range, .. } => {
                    // The parse goes on through every entry of the section, so a range past the end fails there.
                    rt.code = Some(range(unchecked_range));
                }
                Payload::DataSection(reader) => {
                    for segment in reader {
                        let segment = segment.map_err(parse)?;
                        if let DataKind::Active { memory_index: 0, offset_expr } = &segment.kind {
                            let at = i32_const(offset_expr)
                                .ok_or_else(|| bad("a data segment's offset is not a constant"))?;
                            rt.data_end = rt.data_end.max(u64::from(at as u32) + segment.data.len() as u64);
                        }
                        rt.data.push(range(segment.range));
                    }
                }
                Payload::CustomSection(section) => {
                    // The name section (if a build kept one) would name functions of another module: dropped.
                    if section.name() != "name" {
                        rt.customs.push((section.name(), section.data()));
                    }
                }
                other => {
                    return Err(bad(format!("it has an unexpected section ({:?})", other.as_section())));
                }
            }
        }
        match memory {
            Some(m) if !m.memory64 && !m.shared && m.page_size_log2.is_none() => {}
            Some(_) => return Err(bad("its memory is not a plain 32-bit memory")),
            None => return Err(bad("it has no memory")),
        }
        match exports.get("memory") {
            Some((ExternalKind::Memory, 0)) => {}
            _ => return Err(bad("it does not export its memory as `memory`")),
        }
        rt.heap_base = match exports.get("__heap_base") {
            Some(&(ExternalKind::Global, index)) => global_values.get(index as usize).copied().flatten(),
            _ => None,
        }
        .ok_or_else(|| bad("it does not export `__heap_base` as a constant global"))? as u32;
        for (name, params, results) in FUNCTIONS {
            let index = match exports.get(name) {
                Some(&(ExternalKind::Func, index)) => index,
                _ => return Err(bad(format!("it does not export the function `{name}`"))),
            };
            let ty = function_types.get(index as usize).and_then(|t| types.get(*t as usize));
            if !ty.is_some_and(|ty| ty.params() == params && ty.results() == results) {
                return Err(bad(format!("its `{name}` does not have the type of docs/abi.md")));
            }
            rt.functions_exported.insert(name, index);
        }
        Ok(rt)
    }

    fn layout(&self, image: &[u8]) -> Result<Layout, Error> {
        let header = Header::decode(image, 0);
        if header.magic != remit_rt::image::MAGIC || header.image_len as usize != image.len() {
            return Err(Error::Invalid("the policy image has no valid header".into()));
        }
        let start = align8(u64::from(self.heap_base));
        let output = align8(start + image.len() as u64);
        let end = (output + u64::from(header.output_limit)).max(self.data_end);
        let pages = end.div_ceil(PAGE);
        if pages > 65_536 {
            return Err(Error::Memory { bytes: end });
        }
        Ok(Layout {
            heap_base: self.heap_base,
            image: start as u32,
            image_len: image.len() as u32,
            output: output as u32,
            output_len: header.output_limit,
            pages,
        })
    }
}

fn align8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// Appends `value` as unsigned LEB128 (the wasm binary format's integers; also the length fields of the
/// `remit.gateway` custom section that `remit_lang::wasm::meta` embeds).
pub fn leb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
