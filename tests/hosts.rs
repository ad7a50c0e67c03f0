//! The host libraries, hosts/python (wasmtime from PyPI) and hosts/js (TypeScript on Node's built-in WebAssembly),
//! against the reference interpreter on the whole corpus: every example request, every policy test case of the
//! examples and of tests/semantics, and the garbage inputs, for decisions and for tool listings, byte for byte, each
//! through one reused instance. The examples' modules are built by the `remit` binary. Dependencies:
//! `scripts/test-deps-hosts.sh`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use remit::wasm::layout::{INPUT_BASE, MAX_INPUT};
use remit::wasm::module::ModuleBuilder;
use support::{corpus, frames, garbage, installed, remit_bin, root, run, temp_dir, unframe, Unit};
use wasm_encoder::{BlockType, Function, Instruction as I, ValType};

#[derive(Clone, Copy, Debug)]
enum Host {
    Python,
    Js,
    /// hosts/js with every call in a worker thread bounded by this many milliseconds (`--timeout-ms`).
    JsBounded(u32),
}

/// hosts/js compiled by the pinned TypeScript (type errors fail the test), once per test process.
fn js_cli() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let tsc = installed("hosts/js/node_modules/typescript/bin/tsc");
            let out = run(Command::new("node").arg(tsc).args(["-p", "hosts/js"]).current_dir(root()), secs(120));
            assert!(
                out.status.success(),
                "tsc: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            root().join("hosts/js/dist/cli.js")
        })
        .clone()
}

fn label(host: Host) -> String {
    format!("{host:?}").replace(['(', ')'], "")
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn host_command(host: Host) -> Command {
    match host {
        Host::Python => {
            let mut command = Command::new(installed("hosts/python/.venv/bin/python"));
            command.args(["-m", "remit_host"]).env("PYTHONPATH", root().join("hosts/python"));
            command
        }
        Host::Js => {
            let mut command = Command::new("node");
            command.arg(js_cli());
            command
        }
        Host::JsBounded(ms) => {
            let mut command = Command::new("node");
            command.arg(js_cli()).arg("--timeout-ms").arg(ms.to_string());
            command
        }
    }
}

/// Runs a host on `requests` (sent as frames, through one evaluator): one result per request.
fn host_results(host: Host, dir: &Path, wasm: &Path, requests: &[Vec<u8>], visible_tools: bool) -> Vec<Vec<u8>> {
    let input = dir.join(if visible_tools { "subjects.frames" } else { "requests.frames" });
    std::fs::write(&input, frames(requests)).unwrap();
    let mut command = host_command(host);
    if visible_tools {
        command.arg("--visible-tools");
    }
    command.arg("--frames").arg(&input).arg(wasm);
    let out = run(&mut command, secs(300));
    assert!(out.status.success(), "{host:?} host failed: {}", String::from_utf8_lossy(&out.stderr));
    let results = unframe(&out.stdout);
    assert_eq!(results.len(), requests.len(), "{host:?}: one result per request");
    results
}

/// The module of a corpus unit: the examples built by `remit build`, the semantics folders (whose sub-mandates
/// widen on purpose, which `remit build` refuses) compiled by the library.
fn module(unit: &Unit, dir: &Path) -> PathBuf {
    let path = dir.join(format!("{}.wasm", unit.name.replace('/', "-")));
    if unit.name.starts_with("examples/") {
        let out = run(Command::new(remit_bin()).arg("build").arg(&unit.dir).arg("-o").arg(&path), secs(120));
        assert!(out.status.success(), "remit build {}: {}", unit.name, String::from_utf8_lossy(&out.stderr));
        // `remit build` adds the gateway's metadata (a custom section hosts ignore) to the library's module.
        let library = remit::wasm::compile(&unit.program).unwrap();
        let with_meta = remit::gateway::meta::embed(&library, &remit::gateway::PolicyMeta::from_program(&unit.program));
        assert!(
            std::fs::read(&path).unwrap() == with_meta,
            "{}: `remit build` is the library's module plus the gateway metadata",
            unit.name
        );
    } else {
        std::fs::write(&path, remit::wasm::compile(&unit.program).unwrap()).unwrap();
    }
    path
}

fn is_plain_deny(decision: &str) -> bool {
    let value: serde_json::Value = serde_json::from_str(decision).expect("a decision is JSON");
    value["decision"] == "deny"
        && value["reasons"].as_array().is_some_and(|r| r.iter().all(|r| !r.as_str().unwrap().starts_with("runtime.")))
}

fn host_agrees_with_the_interpreter_on_the_corpus(host: Host) {
    let started = Instant::now();
    let dir = temp_dir(&format!("hosts-{}", label(host)));
    let (mut decisions, mut listings, mut units) = (0, 0, 0);
    for unit in corpus() {
        let wasm = module(&unit, &dir);
        let garbage = garbage(&unit.requests[0]);
        let all: Vec<Vec<u8>> = unit.requests.iter().chain(&garbage).cloned().collect();
        let results = host_results(host, &dir, &wasm, &all, false);
        for (i, (request, result)) in all.iter().zip(&results).enumerate() {
            let expected = remit::eval::decide(&unit.program, request).to_json();
            let shown = String::from_utf8_lossy(&request[..request.len().min(300)]).into_owned();
            assert_eq!(String::from_utf8_lossy(result), expected, "{host:?}, {}: differs on {shown}", unit.name);
            if i >= unit.requests.len() && i != all.len() - 2 {
                assert!(is_plain_deny(&expected), "{}: garbage not denied: {shown}", unit.name);
            }
        }
        assert!(String::from_utf8_lossy(results.last().unwrap()).contains("\"reasons\":[\"request.oversize\"]"));
        decisions += results.len();

        let subjects: Vec<Vec<u8>> = unit.subjects.iter().chain(&all).cloned().collect();
        let results = host_results(host, &dir, &wasm, &subjects, true);
        for (request, result) in subjects.iter().zip(&results) {
            let expected = remit::eval::visible_tools(&unit.program, request).to_json();
            let shown = String::from_utf8_lossy(&request[..request.len().min(300)]).into_owned();
            assert_eq!(
                String::from_utf8_lossy(result),
                expected,
                "{host:?}, {}: listing differs on {shown}",
                unit.name
            );
        }
        listings += results.len();
        units += 1;
    }
    eprintln!("{host:?}: {units} policies, {decisions} decisions, {listings} listings in {:?}", started.elapsed());
    assert!(units >= 20 && decisions >= 1_000, "{units} policies, {decisions} decisions");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_python_host_returns_the_interpreters_bytes_on_the_whole_corpus() {
    host_agrees_with_the_interpreter_on_the_corpus(Host::Python);
}

#[test]
fn the_js_host_returns_the_interpreters_bytes_on_the_whole_corpus() {
    host_agrees_with_the_interpreter_on_the_corpus(Host::Js);
}

#[test]
fn the_js_host_with_a_deadline_per_call_returns_the_interpreters_bytes_on_the_whole_corpus() {
    host_agrees_with_the_interpreter_on_the_corpus(Host::JsBounded(10_000));
}

// ---------------------------------------------------------------------------------------------------------------
// Failing modules: what a host answers when a call traps, runs away or returns bytes outside the memory, and which
// modules it refuses to load. The module never does these by design (docs/abi.md), so a stub built here does.

const STUB_POLICY: &str = "sha256:stub";
const STUB_VISIBLE: &str = r#"{"visible":["stub_tool"],"hidden":[]}"#;

/// `remit_decide` and `remit_visible_tools` on a request starting with `T` trap, `L` loop forever, `X` return bytes
/// outside the memory; any other request is echoed back. `remit_visible_tools` answers [`STUB_VISIBLE`] otherwise.
fn stub(abi_version: i32) -> Vec<u8> {
    let mut m = ModuleBuilder::new();
    m.declare("remit_alloc", &[ValType::I32], &[ValType::I32]);
    m.declare("remit_decide", &[ValType::I32, ValType::I32], &[ValType::I64]);
    m.declare("remit_visible_tools", &[ValType::I32, ValType::I32], &[ValType::I64]);
    m.declare("remit_policy_info", &[], &[ValType::I64]);
    let info = format!(r#"{{"policy":"{STUB_POLICY}","abi_version":1,"mandates":[],"entry_points":[]}}"#);
    let info_at = m.bytes(info.as_bytes());
    let visible_at = m.bytes(STUB_VISIBLE.as_bytes());
    let pack = |f: &mut Function, addr: u32, len: usize| {
        f.instruction(&I::I64Const(((addr as i64) << 32) | len as i64));
    };

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

    for (name, otherwise) in [("remit_decide", None), ("remit_visible_tools", Some(visible_at))] {
        let mut f = Function::new([(1, ValType::I32)]);
        f.instruction(&I::LocalGet(1)).instruction(&I::If(BlockType::Empty));
        f.instruction(&I::LocalGet(0))
            .instruction(&I::I32Load8U(remit::wasm::module::mem(0, 1)))
            .instruction(&I::LocalSet(2));
        for byte in [b'T', b'L', b'X'] {
            f.instruction(&I::LocalGet(2))
                .instruction(&I::I32Const(byte as i32))
                .instruction(&I::I32Eq)
                .instruction(&I::If(BlockType::Empty));
            match byte {
                b'T' => f.instruction(&I::Unreachable),
                b'L' => f.instruction(&I::Loop(BlockType::Empty)).instruction(&I::Br(0)).instruction(&I::End),
                _ => f.instruction(&I::I64Const((0xffff_0000_i64 << 32) | 16)).instruction(&I::Return),
            };
            f.instruction(&I::End);
        }
        f.instruction(&I::End);
        match otherwise {
            Some(at) => pack(&mut f, at, STUB_VISIBLE.len()),
            None => {
                f.instruction(&I::LocalGet(0))
                    .instruction(&I::I64ExtendI32U)
                    .instruction(&I::I64Const(32))
                    .instruction(&I::I64Shl)
                    .instruction(&I::LocalGet(1))
                    .instruction(&I::I64ExtendI32U)
                    .instruction(&I::I64Or);
            }
        }
        f.instruction(&I::End);
        m.define(name, f);
    }
    let mut f = Function::new([]);
    pack(&mut f, info_at, info.len());
    f.instruction(&I::End);
    m.define("remit_policy_info", f);
    for name in ["remit_alloc", "remit_decide", "remit_visible_tools", "remit_policy_info"] {
        m.export_func(name, name);
    }
    m.export_global("remit_abi_version", abi_version);
    m.finish().expect("the stub validates")
}

/// A module that imports a host function: refused.
fn importing() -> Vec<u8> {
    use wasm_encoder::{EntityType, ImportSection, Module, TypeSection};
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], [ValType::I64]);
    module.section(&types);
    let mut imports = ImportSection::new();
    imports.import("env", "clock", EntityType::Function(0));
    module.section(&imports);
    module.finish()
}

fn deny(reason: &str) -> String {
    remit::eval::Decision::deny(vec![reason.to_string()], STUB_POLICY).to_json()
}

fn failing_calls_are_denied_and_the_instance_replaced(host: Host) {
    let dir = temp_dir(&format!("hosts-stub-{}", label(host)));
    let wasm = dir.join("stub.wasm");
    std::fs::write(&wasm, stub(1)).unwrap();
    let mut requests: Vec<Vec<u8>> = vec![b"echo".to_vec(), b"T".to_vec(), b"after a trap".to_vec(), b"X".to_vec()];
    requests.extend([b"after X".to_vec(), Vec::new(), vec![b'y'; MAX_INPUT as usize], vec![0xff, 0x00, 0x80]]);
    if !matches!(host, Host::Js) {
        // Node has no fuel: an endless call is bounded by a worker thread and a deadline (hosts/js/src/bounded.ts).
        requests.extend([b"L".to_vec(), b"after a runaway call".to_vec()]);
    }
    let started = Instant::now();
    let results = host_results(host, &dir, &wasm, &requests, false);
    let trap = deny("runtime.trap").into_bytes();
    let mut expected = vec![b"echo".to_vec(), trap.clone(), b"after a trap".to_vec(), trap, b"after X".to_vec()];
    expected.extend([Vec::new(), vec![b'y'; MAX_INPUT as usize], vec![0xff, 0x00, 0x80]]);
    if !matches!(host, Host::Js) {
        expected.extend([deny("runtime.fuel-exhausted").into_bytes(), b"after a runaway call".to_vec()]);
    }
    for (i, (result, expected)) in results.iter().zip(&expected).enumerate() {
        assert_eq!(String::from_utf8_lossy(result), String::from_utf8_lossy(expected), "{host:?}: request {i}");
    }
    assert!(started.elapsed() < secs(60), "{:?}", started.elapsed());
    let listings = host_results(host, &dir, &wasm, &[b"{}".to_vec(), b"T".to_vec(), b"{}".to_vec()], true);
    let failed = r#"{"visible":[],"hidden":[],"error":"runtime.trap"}"#;
    assert_eq!(listings, [STUB_VISIBLE.as_bytes(), failed.as_bytes(), STUB_VISIBLE.as_bytes()]);

    for (bytes, message) in [
        (stub(2), "ABI version 2"),
        (importing(), "imports `env.clock`"),
        (b"not wasm".to_vec(), "not a valid WebAssembly module"),
    ] {
        std::fs::write(&wasm, bytes).unwrap();
        let out = run(host_command(host).arg(&wasm).arg(&wasm), secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{host:?}: {stderr}");
        assert!(stderr.contains(message), "{host:?}: `{message}` not in {stderr}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_python_host_denies_failing_calls_and_refuses_foreign_modules() {
    failing_calls_are_denied_and_the_instance_replaced(Host::Python);
}

#[test]
fn the_js_host_denies_failing_calls_and_refuses_foreign_modules() {
    failing_calls_are_denied_and_the_instance_replaced(Host::Js);
}

#[test]
fn the_js_host_with_a_deadline_denies_a_runaway_call_and_carries_on() {
    failing_calls_are_denied_and_the_instance_replaced(Host::JsBounded(1_000));
}
