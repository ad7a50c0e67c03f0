//! The decision module, version 2: the runtime artifact linked with a policy image (`remit_lang::wasm::link`,
//! crates/remit-module/src/link.rs), for every example and semantics folder:
//! - the module validates, imports nothing, has min = max memory sized for the runtime, the image and the output
//!   area, and exports exactly docs/abi.md version 1; the image is one data segment where the runtime looks for it;
//!   it carries the gateway's metadata (`remit.gateway`) and the runtime's sources hash;
//! - `remit_host` (wasmtime) loads it (the host's ABI check and `remit_policy_info`) and Node instantiates it
//!   with an empty import object: `remit_policy_info` is the JSON docs/abi.md describes, byte for byte;
//! - `remit_decide` and `remit_visible_tools` answer every request of the corpus and the garbage inputs without
//!   trapping, in the output area after the image (what they answer is not checked yet: the decision is being
//!   written, crates/remit-rt/src/decide.rs), nor with the image's header overwritten with any lengths and offsets;
//! - the linker refuses a runtime without the ABI's pieces and an image without a valid header.
//!
//! `cargo test --test link -- --ignored --nocapture sizes` prints module sizes.

mod support;

use std::process::Command;
use std::time::Duration;

use remit_lang::json::MAX_INPUT;
use remit_module::{layout, link_image, Layout, RUNTIME};
use support::{corpus, frames, garbage, root, run, temp_dir, unframe, Unit};
use wasmparser::{DataKind, ExternalKind, Operator, Parser, Payload};
use wasmtime::{Engine, Instance, Module, Store};

const ABI_EXPORTS: [&str; 6] =
    ["memory", "remit_abi_version", "remit_alloc", "remit_decide", "remit_visible_tools", "remit_policy_info"];

/// What a linked module is, as read back with wasmparser.
#[derive(Debug, Default)]
struct Shape {
    imports: usize,
    memory: Option<(u64, Option<u64>)>,
    exports: Vec<(String, ExternalKind)>,
    /// `(offset, bytes)` of each active data segment.
    data: Vec<(u32, Vec<u8>)>,
    /// The last global: its type and its value.
    last_global: Option<(wasmparser::GlobalType, Option<i32>)>,
    customs: Vec<(String, Vec<u8>)>,
}

fn i32_const(expr: &wasmparser::ConstExpr<'_>) -> Option<i32> {
    match expr.get_operators_reader().read().ok()? {
        Operator::I32Const { value } => Some(value),
        _ => None,
    }
}

fn shape(bytes: &[u8]) -> Shape {
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.expect("the module parses") {
            Payload::ImportSection(reader) => shape.imports += reader.count() as usize,
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let memory = memory.unwrap();
                    assert!(shape.memory.is_none(), "one memory");
                    shape.memory = Some((memory.initial, memory.maximum));
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    let global = global.unwrap();
                    shape.last_global = Some((global.ty, i32_const(&global.init_expr)));
                }
            }
            Payload::ExportSection(reader) => {
                shape.exports.extend(reader.into_iter().map(|e| e.unwrap()).map(|e| (e.name.to_string(), e.kind)));
            }
            Payload::DataSection(reader) => {
                for segment in reader {
                    let segment = segment.unwrap();
                    if let DataKind::Active { offset_expr, .. } = &segment.kind {
                        shape.data.push((i32_const(offset_expr).unwrap() as u32, segment.data.to_vec()));
                    }
                }
            }
            Payload::CustomSection(section) => {
                shape.customs.push((section.name().to_string(), section.data().to_vec()))
            }
            _ => {}
        }
    }
    shape
}

struct Linked<'a> {
    unit: &'a Unit,
    module: Vec<u8>,
    layout: Layout,
    /// The requests to answer: the unit's, its subjects, and the garbage inputs.
    requests: Vec<Vec<u8>>,
}

fn linked(units: &[Unit]) -> Vec<Linked<'_>> {
    units
        .iter()
        .map(|unit| {
            let module = remit_lang::wasm::link(&unit.program).unwrap_or_else(|e| panic!("{}: {e}", unit.name));
            let image = remit_lang::wasm::image::write(&unit.program).unwrap();
            let layout = layout(RUNTIME, &image).unwrap();
            let mut requests: Vec<Vec<u8>> = unit.requests.iter().chain(&unit.subjects).cloned().collect();
            if let Some(first) = unit.requests.first() {
                requests.extend(garbage(first));
            }
            Linked { unit, module, layout, requests }
        })
        .collect()
}

#[test]
fn every_policy_links_into_a_module_of_the_abi() {
    let units = corpus();
    assert!(units.len() > 20);
    for Linked { unit, module, layout, .. } in linked(&units) {
        let name = &unit.name;
        wasmparser::Validator::new().validate_all(&module).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shape = shape(&module);
        assert_eq!(shape.imports, 0, "{name}");
        let exports: Vec<&str> = shape.exports.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(exports, ABI_EXPORTS, "{name}");
        let (ty, value) = shape.last_global.unwrap();
        assert!(ty.content_type == wasmparser::ValType::I32 && !ty.mutable && value == Some(1), "{name}");

        // The image is the last data segment, at `__heap_base` rounded up to 8; the runtime's own segments lie
        // below `__heap_base`.
        let image = remit_lang::wasm::image::write(&unit.program).unwrap();
        let (&(at, ref bytes), runtime_segments) = shape.data.split_last().unwrap();
        assert_eq!((at, bytes), (layout.image, &image), "{name}");
        assert_eq!(at, layout.heap_base.next_multiple_of(8));
        for (offset, bytes) in runtime_segments {
            assert!(*offset as usize + bytes.len() <= layout.heap_base as usize, "{name}");
        }
        // min = max memory: the image, then the output area of the policy's size, in whole pages.
        let (min, max) = shape.memory.unwrap();
        assert_eq!((Some(min), min), (max, layout.pages), "{name}");
        assert_eq!(layout.output, (layout.image + layout.image_len).next_multiple_of(8));
        assert_eq!(layout.output_len as usize, remit_lang::eval::output_limit(&unit.program));
        let end = u64::from(layout.output) + u64::from(layout.output_len);
        assert!(end <= min * 65536 && end + 65536 > min * 65536, "{name}: {end} bytes in {min} pages");

        // The gateway's metadata, as `remit build` embeds it, and the runtime's sources.
        let meta = remit_lang::wasm::meta::extract(&module).unwrap();
        assert_eq!(meta, Some(remit_gateway::PolicyMeta::from_program(&unit.program)), "{name}");
        assert!(shape.customs.iter().any(|(n, d)| n == "remit.runtime.sources" && d.len() == 64), "{name}");
    }
}

/// In wasmtime: the host loads the module (checking the ABI), `remit_policy_info` is as docs/abi.md says, and every
/// request is answered inside the output area, without a trap.
#[test]
fn wasmtime_runs_every_linked_module() {
    let units = corpus();
    let runtime = remit_host::Runtime::new().unwrap();
    let engine = Engine::default();
    for Linked { unit, module, layout, requests } in linked(&units) {
        let name = &unit.name;
        let compiled = runtime.load(&module).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(compiled.info().json, expected_info(&unit.program), "{name}");
        assert_eq!(compiled.policy(), unit.program.hash);

        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &Module::new(&engine, &module).unwrap(), &[]).unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        let alloc = instance.get_typed_func::<i32, i32>(&mut store, "remit_alloc").unwrap();
        let decide = instance.get_typed_func::<(i32, i32), i64>(&mut store, "remit_decide").unwrap();
        let visible = instance.get_typed_func::<(i32, i32), i64>(&mut store, "remit_visible_tools").unwrap();
        // The input buffer lies below the image; too long a request gets no place.
        let input = alloc.call(&mut store, MAX_INPUT as i32).unwrap() as u32;
        assert!(input != 0 && input + MAX_INPUT as u32 <= layout.heap_base, "{name}: input at {input}");
        for len in [MAX_INPUT as i32 + 1, -1, i32::MIN, i32::MAX] {
            assert_eq!(alloc.call(&mut store, len).unwrap(), 0, "{name}: remit_alloc({len})");
        }
        let in_output = |r: i64| {
            let (ptr, len) = ((r as u64 >> 32) as u32, r as u64 as u32);
            ptr == layout.output && len <= layout.output_len
        };
        for request in &requests {
            let shown = String::from_utf8_lossy(&request[..request.len().min(100)]).into_owned();
            for entry in [&decide, &visible] {
                let len = i32::try_from(request.len()).unwrap();
                let ptr = alloc.call(&mut store, len).unwrap();
                assert_eq!(ptr != 0, request.len() <= MAX_INPUT, "{name}: {shown}");
                if ptr != 0 {
                    memory.write(&mut store, ptr as usize, request).unwrap();
                }
                let r = entry.call(&mut store, (ptr, len)).unwrap_or_else(|e| panic!("{name}: trap on {shown}: {e}"));
                assert!(in_output(r), "{name}: {r:#x} on {shown}");
            }
        }
        // A length past the limit at any place, and a place that is not the input buffer.
        for (ptr, len) in [(0, MAX_INPUT as i32 + 1), (0, i32::MAX), (0, -1), (0, 10), (input as i32 + 1, 10)] {
            for entry in [&decide, &visible] {
                let r = entry.call(&mut store, (ptr, len)).unwrap_or_else(|e| panic!("{name}: trap: {e}"));
                assert!(in_output(r), "{name}: {r:#x} on ({ptr}, {len})");
            }
        }
    }
}

/// In Node, with an empty import object: the same exports, ABI version, memory and policy info, and no trap.
#[test]
fn node_runs_every_linked_module() {
    let units = corpus();
    let linked = linked(&units);
    let mut items = Vec::new();
    for l in &linked {
        items.push(l.module.clone());
        items.push(frames(&l.requests));
    }
    let dir = temp_dir("link-node");
    std::fs::write(dir.join("units"), frames(&items)).unwrap();
    let out = run(
        Command::new("node").arg("tests/node/module_v2.mjs").arg(dir.join("units")).current_dir(root()),
        Duration::from_secs(300),
    );
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let results = unframe(&out.stdout);
    assert_eq!(results.len(), 3 * linked.len());
    for (l, result) in linked.iter().zip(results.chunks(3)) {
        let name = &l.unit.name;
        let kinds = ["memory", "global", "function", "function", "function", "function"];
        let mut expected = vec!["imports=0".to_string()];
        expected.extend(ABI_EXPORTS.iter().zip(kinds).map(|(n, k)| format!("{n}:{k}")));
        expected.push("abi=1".into());
        expected.push(format!("memory={}", l.layout.pages * 65536));
        assert_eq!(String::from_utf8_lossy(&result[0]), expected.join("\n"), "{name}");
        assert_eq!(String::from_utf8_lossy(&result[1]), expected_info(&l.unit.program), "{name}");
        assert_eq!(result[2].len(), l.requests.len(), "{name}");
        for (request, outcome) in l.requests.iter().zip(&result[2]) {
            let shown = String::from_utf8_lossy(&request[..request.len().min(100)]).into_owned();
            assert_eq!(*outcome, 0, "{name}: {shown}");
        }
    }
}

/// The runtime never trusts the image's header: with its lengths and offsets set to anything (written into the
/// memory of a running module, past the linker's checks), every entry point still answers inside the memory without
/// trapping.
#[test]
fn a_corrupt_image_header_never_traps() {
    let unit = &corpus()[0];
    let module = remit_lang::wasm::link(&unit.program).unwrap();
    let image = remit_lang::wasm::image::write(&unit.program).unwrap();
    let layout = layout(RUNTIME, &image).unwrap();
    let engine = Engine::default();
    let module = Module::new(&engine, &module).unwrap();
    let request = &unit.requests[0];
    let mut patched = 0;
    // The runtime reads the header at its first call (and keeps what it read): a fresh instance per corruption.
    for word in 0..remit_rt::image::Header::SIZE / 4 {
        for value in [0u32, 1, 7, image.len() as u32 + 1, 0x7fff_ffff, u32::MAX] {
            let mut store = Store::new(&engine, ());
            let instance = Instance::new(&mut store, &module, &[]).unwrap();
            let memory = instance.get_memory(&mut store, "memory").unwrap();
            let size = memory.data_size(&store) as u64;
            let inside = |r: i64| (r as u64 >> 32) + (r as u64 & 0xffff_ffff) <= size;
            let info = instance.get_typed_func::<(), i64>(&mut store, "remit_policy_info").unwrap();
            let alloc = instance.get_typed_func::<i32, i32>(&mut store, "remit_alloc").unwrap();
            memory.write(&mut store, layout.image as usize + 4 * word, &value.to_le_bytes()).unwrap();
            for entry in ["remit_decide", "remit_visible_tools"] {
                let f = instance.get_typed_func::<(i32, i32), i64>(&mut store, entry).unwrap();
                let ptr = alloc.call(&mut store, request.len() as i32).unwrap();
                memory.write(&mut store, ptr as usize, request).unwrap();
                let r = f.call(&mut store, (ptr, request.len() as i32)).unwrap_or_else(|e| panic!("{entry}: {e}"));
                assert!(inside(r), "{entry}: word {word} = {value}");
            }
            let r = info.call(&mut store, ()).unwrap_or_else(|e| panic!("word {word} = {value}: {e}"));
            assert!(inside(r), "word {word} = {value}");
            patched += 1;
        }
    }
    assert!(patched > 100);
}

/// What the linker refuses: a runtime without the ABI's pieces, an image without a header.
#[test]
fn the_linker_refuses_what_it_cannot_link() {
    let unit = &corpus()[0];
    let image = remit_lang::wasm::image::write(&unit.program).unwrap();
    // A module that exports the ABI but no `__heap_base` (a linked module: the linker keeps it internal).
    let linked = remit_lang::wasm::compile(&unit.program).unwrap();
    let e = link_image(&linked, &image, None).unwrap_err();
    assert_eq!(e.code(), "remit::runtime-artifact");
    assert!(e.to_string().contains("`__heap_base`"), "{e}");
    let e = link_image(b"\0asm\x01\0\0\0", &image, None).unwrap_err();
    assert_eq!(e.to_string(), "the runtime artifact cannot be linked: it has no memory");
    let e = link_image(RUNTIME, &image[..image.len() - 1], None).unwrap_err();
    assert_eq!(e.code(), "remit::invalid-module");
    // Without the gateway's metadata: the same module without its last section.
    let bare = link_image(RUNTIME, &image, None).unwrap();
    assert_eq!(remit_lang::wasm::meta::extract(&bare).unwrap(), None);
    let full = remit_lang::wasm::link(&unit.program).unwrap();
    assert!(full.len() > bare.len() && full.starts_with(&bare));
}

/// The artifact exports the ABI's functions besides its test exports and `__heap_base`; the linked module exports
/// none of the latter.
#[test]
fn the_artifact_carries_the_entry_points() {
    let artifact = shape(RUNTIME);
    for name in ["remit_alloc", "remit_decide", "remit_visible_tools", "remit_policy_info", "__heap_base"] {
        assert!(artifact.exports.iter().any(|(n, _)| n == name), "{name}");
    }
    let module = remit_lang::wasm::link(&corpus()[0].program).unwrap();
    let exports: Vec<String> = shape(&module).exports.into_iter().map(|(n, _)| n).collect();
    assert!(exports.iter().all(|e| !e.starts_with("rt_") && !e.starts_with("__")), "{exports:?}");
}

/// Sizes of the decision modules (with the gateway's metadata, as `remit build` writes them):
/// `cargo test --test link -- --ignored --nocapture sizes`.
#[test]
#[ignore]
fn sizes() {
    println!("{:<40} {:>9} {:>7} {:>6}", "policy", "bytes", "image", "pages");
    for unit in corpus() {
        let module = remit_lang::wasm::link(&unit.program).unwrap();
        let image = remit_lang::wasm::image::write(&unit.program).unwrap();
        let pages = shape(&module).memory.unwrap().0;
        println!("{:<40} {:>9} {:>7} {:>6}", unit.name, module.len(), image.len(), pages);
    }
}

/// `remit_policy_info`'s JSON as docs/abi.md describes it, built here from the program.
fn expected_info(program: &remit_lang::ir::Program) -> String {
    let mandates: Vec<&str> = program.mandates.iter().map(|m| m.name.as_str()).collect();
    serde_json::json!({
        "policy": program.hash,
        "program": remit_lang::check::program_hash(program),
        "abi_version": 1,
        "mandates": mandates,
        "entry_points": ["remit_decide", "remit_visible_tools", "remit_policy_info"],
    })
    .to_string()
}
