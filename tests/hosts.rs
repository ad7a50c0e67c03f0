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

use remit_lang::json::MAX_INPUT;
use support::stub::{deny, raw_module, Listing, STUB_VISIBLE};
use support::{corpus, frames, garbage, installed, remit_bin, root, run, temp_dir, unframe, Unit};

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
        // `remit build` writes the library's module (with the gateway's metadata, a custom section hosts ignore).
        assert!(
            std::fs::read(&path).unwrap() == remit_lang::wasm::compile(&unit.program).unwrap(),
            "{}: `remit build` is the library's module",
            unit.name
        );
    } else {
        std::fs::write(&path, remit_lang::wasm::compile(&unit.program).unwrap()).unwrap();
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
            let expected = remit_lang::eval::decide(&unit.program, request).to_json();
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
            let expected = remit_lang::eval::visible_tools(&unit.program, request).to_json();
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
// modules it refuses to load. The module never does these by design (docs/abi.md), so a stub (support/stub.rs) does.

const STUB_POLICY: &str = "sha256:stub";

/// The stub of tests/support/stub.rs whose listing fails as its decision does.
fn stub(abi_version: i32) -> Vec<u8> {
    support::stub::stub("A", STUB_POLICY, abi_version, Listing::Failing)
}

fn failing_calls_are_denied_and_the_instance_replaced(host: Host) {
    let dir = temp_dir(&format!("hosts-stub-{}", label(host)));
    let wasm = dir.join("stub.wasm");
    std::fs::write(&wasm, stub(1)).unwrap();
    let mut requests: Vec<Vec<u8>> = vec![b"echo".to_vec(), b"T".to_vec(), b"after a trap".to_vec(), b"X".to_vec()];
    requests.extend([b"after X".to_vec(), Vec::new(), vec![b'y'; MAX_INPUT], vec![0xff, 0x00, 0x80]]);
    if !matches!(host, Host::Js) {
        // Node has no fuel: an endless call is bounded by a worker thread and a deadline (hosts/js/src/bounded.ts).
        requests.extend([b"L".to_vec(), b"after a runaway call".to_vec()]);
    }
    let started = Instant::now();
    let results = host_results(host, &dir, &wasm, &requests, false);
    let trap = deny("runtime.trap", STUB_POLICY);
    let mut expected = vec![b"echo".to_vec(), trap.clone(), b"after a trap".to_vec(), trap, b"after X".to_vec()];
    expected.extend([Vec::new(), vec![b'y'; MAX_INPUT], vec![0xff, 0x00, 0x80]]);
    if !matches!(host, Host::Js) {
        expected.extend([deny("runtime.fuel-exhausted", STUB_POLICY), b"after a runaway call".to_vec()]);
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
        (raw_module(true), "imports `env.clock`"),
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

/// A bounded call ends on its own answer, not on a wake-up: with another thread notifying the words the calling
/// thread waits on (as a worker's late notify did on a loaded machine, answering a call with the call before's
/// result), every result is still the unbounded evaluator's.
#[test]
fn the_js_host_with_a_deadline_answers_each_call_with_its_own_result_under_stray_wake_ups() {
    let dir = temp_dir("hosts-stray-wake-ups");
    let dist = js_cli().parent().unwrap().to_path_buf();
    for unit in corpus().iter().filter(|unit| unit.name.starts_with("examples/")) {
        let wasm = module(unit, &dir);
        let input = dir.join("requests.frames");
        std::fs::write(&input, frames(&unit.requests)).unwrap();
        let out = run(
            Command::new("node").arg(root().join("tests/node/bounded_wakeups.mjs")).arg(&dist).arg(&wasm).arg(&input),
            secs(300),
        );
        assert!(
            out.status.success(),
            "{}: {}{}",
            unit.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("every result the unbounded evaluator's"));
    }
    std::fs::remove_dir_all(dir).ok();
}
