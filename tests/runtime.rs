//! The host runtime (`remit_host`), `remit build` / `remit eval policy.wasm`, and the cross-runtime proof:
//! every example request decided by the module in Node's built-in WebAssembly and in wasmtime, byte-identical to
//! the reference interpreter.
//!
//! The host is tested against the stub modules of tests/support/stub.rs (an echo decision, an infinite loop, a trap,
//! a slow call, an out-of-bounds result), so it does not depend on the decision logic; the cross-runtime proof uses
//! the real compiler.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use remit_host::{Compiled, Limits, PolicyHandle, Runtime, REASON_FUEL, REASON_TRAP};
use remit_lang::check::check;
use remit_lang::json::MAX_INPUT;
use support::examples::{self, EXAMPLES};
use support::stub::{deny, info, raw_module, stub, Listing, STUB_OVERSIZE, STUB_VISIBLE};

fn stub_a() -> Vec<u8> {
    stub("A", "sha256:stub-a", 1, Listing::Fixed)
}

fn runtime() -> Runtime {
    Runtime::new().expect("wasmtime")
}

fn load(runtime: &Runtime, wasm: &[u8]) -> Arc<Compiled> {
    Arc::new(runtime.load(wasm).expect("the module loads"))
}

// ---------------------------------------------------------------------------------------------------------------
// The host

#[test]
fn requests_go_in_and_results_come_out_through_one_reused_instance() {
    let compiled = load(&runtime(), &stub_a());
    assert_eq!(compiled.policy(), "sha256:stub-a");
    assert_eq!(compiled.info().json, info("sha256:stub-a"));
    let mut evaluator = compiled.evaluator().unwrap();
    for i in 0..2_000 {
        let request = format!("{{\"n\":{i}}}");
        assert_eq!(evaluator.decide(request.as_bytes()), request.as_bytes());
    }
    assert_eq!(evaluator.decide(b""), b"");
    assert_eq!(evaluator.decide(b"P"), b"A");
    let largest = vec![b'x'; MAX_INPUT];
    assert_eq!(evaluator.decide(&largest), largest, "a request of exactly the limit is written whole");
    assert_eq!(evaluator.visible_tools(b"{}"), STUB_VISIBLE.as_bytes());
    assert!(evaluator.fuel_used() > 0);
    let seen = evaluator.decide_with(b"zero copy", |bytes| bytes.to_vec());
    assert_eq!(seen, b"zero copy");
}

#[test]
fn an_oversize_request_is_not_written_and_the_module_answers_it() {
    let mut evaluator = load(&runtime(), &stub_a()).evaluator().unwrap();
    let oversize = vec![b'x'; MAX_INPUT + 1];
    assert_eq!(evaluator.decide(&oversize), STUB_OVERSIZE.as_bytes());
}

#[test]
fn an_endless_call_runs_out_of_fuel_and_is_denied() {
    let compiled = load(&runtime(), &stub_a());
    let mut evaluator = compiled.evaluator().unwrap();
    let started = Instant::now();
    assert_eq!(evaluator.decide(b"L"), deny(REASON_FUEL, "sha256:stub-a"));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // The instance was replaced; the next call works.
    assert_eq!(evaluator.decide(b"after"), b"after");
}

#[test]
fn a_trap_or_a_result_outside_memory_is_denied_and_the_instance_replaced() {
    let mut evaluator = load(&runtime(), &stub_a()).evaluator().unwrap();
    assert_eq!(evaluator.decide(b"T"), deny(REASON_TRAP, "sha256:stub-a"));
    assert_eq!(evaluator.decide(b"ok"), b"ok");
    assert_eq!(evaluator.decide(b"X"), deny(REASON_TRAP, "sha256:stub-a"));
    assert_eq!(evaluator.decide(b"ok"), b"ok");
    assert_eq!(evaluator.visible_tools(b"T"), STUB_VISIBLE.as_bytes(), "the stub's listing does not trap");
}

#[test]
fn a_small_fuel_budget_denies_a_call_that_needs_more() {
    let limits = Limits { fuel: 10_000, ..Limits::default() };
    let mut evaluator = load(&Runtime::with_limits(limits).unwrap(), &stub_a()).evaluator().unwrap();
    assert_eq!(evaluator.decide(b"S"), deny(REASON_FUEL, "sha256:stub-a"));
    assert_eq!(evaluator.decide(b"P"), b"A");
}

#[test]
fn modules_that_break_the_abi_are_refused_at_load_time() {
    let runtime = runtime();
    let refused = |wasm: &[u8]| runtime.load(wasm).expect_err("refused");
    assert!(refused(&raw_module(true)).contains("imports `env.clock`"), "{}", refused(&raw_module(true)));
    assert!(
        refused(&stub("A", "p", 2, Listing::Fixed)).contains("ABI version 2"),
        "{}",
        refused(&stub("A", "p", 2, Listing::Fixed))
    );
    assert!(refused(b"not wasm at all").contains("not a valid WebAssembly module"));
    // A memory and the version global, no functions.
    let skeleton = {
        use wasm_encoder::{ConstExpr, ExportKind, ExportSection, GlobalSection, GlobalType, MemorySection};
        let mut module = wasm_encoder::Module::new();
        let mut memories = MemorySection::new();
        memories.memory(wasm_encoder::MemoryType {
            minimum: 1,
            maximum: Some(1),
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        module.section(&memories);
        let mut globals = GlobalSection::new();
        let constant = GlobalType { val_type: wasm_encoder::ValType::I32, mutable: false, shared: false };
        globals.global(constant, &ConstExpr::i32_const(1));
        module.section(&globals);
        let mut exports = ExportSection::new();
        exports.export("memory", ExportKind::Memory, 0);
        exports.export("remit_abi_version", ExportKind::Global, 0);
        module.section(&exports);
        module.finish()
    };
    assert!(refused(&skeleton).contains("does not export `remit_alloc`"), "{}", refused(&skeleton));
    let bad_info = stub("A", "p\"", 1, Listing::Fixed); // `{"policy":"p"",…}` is not JSON
    assert!(refused(&bad_info).contains("invalid JSON"), "{}", refused(&bad_info));
}

#[test]
fn memory_is_capped() {
    // Growth beyond the cap is refused (the module sees -1 and carries on).
    let mut evaluator = load(&runtime(), &raw_module(false)).evaluator().unwrap();
    assert_eq!(evaluator.decide(b"{}").len(), 1, "memory.grow past the cap must fail");
    // A module whose fixed memory is larger than the cap does not load.
    let small = Runtime::with_limits(Limits { memory_bytes: 1 << 20, ..Limits::default() }).unwrap();
    let error = small.load(&stub_a()).expect_err("the stub's memory is a few MiB");
    assert!(error.contains("cannot instantiate"), "{error}");
}

#[test]
fn precompiled_modules_load_and_decide_like_the_wasm() {
    let runtime = runtime();
    let cwasm = runtime.precompile(&stub_a()).unwrap();
    assert!(wasmtime::Engine::detect_precompiled(&cwasm).is_some());
    let compiled = runtime.load(&cwasm).expect("a .cwasm of this engine loads");
    assert_eq!(compiled.policy(), "sha256:stub-a");
    let mut evaluator = Arc::new(compiled).evaluator().unwrap();
    assert_eq!(evaluator.decide(b"echo"), b"echo");
    assert_eq!(evaluator.decide(b"L"), deny(REASON_FUEL, "sha256:stub-a"), "fuel metering is compiled in");
    assert!(runtime.load(&cwasm[..cwasm.len() / 2]).is_err(), "a truncated .cwasm is refused");
    // An engine with other settings (here: no fuel metering) refuses it instead of running it unbounded.
    let other = wasmtime::Engine::new(&wasmtime::Config::new()).unwrap();
    assert!(other.precompile_module(&stub_a()).is_ok());
    let foreign = other.precompile_module(&stub_a()).unwrap();
    assert!(runtime.load(&foreign).is_err(), "a .cwasm compiled without fuel metering must not load");
}

#[test]
fn module_v2_runs_unmetered_and_only_module_v2() {
    let runtime = Runtime::new().unwrap();
    let program = support::examples::program("wallet");
    let request = &support::examples::requests(&support::examples::dir("wallet"))[0];
    let module = remit_lang::wasm::link(&program).unwrap();
    let expected = remit_lang::eval::decide(&program, request).to_json().into_bytes();
    for bytes in [module.clone(), runtime.precompile(&module).unwrap()] {
        let compiled = Arc::new(runtime.load(&bytes).unwrap());
        assert!(!compiled.metered());
        let mut evaluator = compiled.evaluator().unwrap();
        assert_eq!(evaluator.decide(request), expected);
        assert_eq!(evaluator.fuel_used(), 0);
    }
    // A byte of the runtime's code changed (the code is most of the module, the image and metadata at its end)
    // makes it an ordinary module; another image is still module v2.
    let mut changed = module.clone();
    changed[module.len() / 3] ^= 0x40;
    assert!(!remit_module::is_linked_runtime(&changed));
    assert!(remit_module::is_linked_runtime(&module));
    let other_image = remit_lang::wasm::link(&support::examples::program("club")).unwrap();
    assert!(remit_module::is_linked_runtime(&other_image));
    assert!(!remit_module::is_linked_runtime(&stub_a()));
    assert!(runtime.load(&stub_a()).unwrap().metered());
    // Metering it on request.
    let metering = Runtime::with_limits(Limits { meter_bounded: true, ..Limits::default() }).unwrap();
    let mut metered = Arc::new(metering.load(&module).unwrap()).evaluator().unwrap();
    assert_eq!(metered.decide(request), expected);
    assert!(metered.fuel_used() > 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Hot reload

fn slow_runtime() -> Runtime {
    Runtime::with_limits(Limits { fuel: 20_000_000_000, ..Limits::default() }).unwrap()
}

#[test]
fn a_swap_never_interrupts_a_call_in_flight_and_every_later_call_sees_it() {
    let runtime = slow_runtime();
    let (a, b) = (stub_a(), stub("B", "sha256:stub-b", 1, Listing::Fixed));
    let handle = PolicyHandle::new(runtime.load(&a).unwrap());
    let mut overlapped = 0;
    let mut attempt = 0u64;
    while attempt < 4 || (overlapped == 0 && attempt < 20) {
        // Generation `attempt` holds A when even, B when odd; the swap installs the other one.
        let (old_tag, new_tag, next) = if attempt.is_multiple_of(2) { ("A", "B", &b) } else { ("B", "A", &a) };
        let next = runtime.load(next).unwrap();
        let mut evaluator = handle.evaluator().unwrap();
        assert_eq!(evaluator.generation(), attempt);
        let (started, swapped) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let worker = {
            let (started, swapped) = (started.clone(), swapped.clone());
            std::thread::spawn(move || {
                started.wait();
                let result = evaluator.decide(b"S");
                let ended = Instant::now();
                let generation = evaluator.generation();
                swapped.wait();
                let after = evaluator.decide(b"P");
                (result, generation, ended, after, evaluator.generation())
            })
        };
        started.wait();
        std::thread::sleep(Duration::from_millis(10));
        let previous = handle.swap(next);
        let swap_returned = Instant::now();
        swapped.wait();
        assert_eq!(previous.policy(), format!("sha256:stub-{}", old_tag.to_lowercase()));
        let (result, generation, ended, after, after_generation) = worker.join().unwrap();
        // The call answered with the policy it ran on, whole.
        let tag = if generation == attempt { old_tag } else { new_tag };
        assert_eq!(result, tag.as_bytes());
        // The call after the swap runs on the new policy.
        assert_eq!((after.as_slice(), after_generation), (new_tag.as_bytes(), attempt + 1));
        if generation == attempt && swap_returned < ended {
            overlapped += 1; // the swap returned while the old policy was still answering
        }
        attempt += 1;
    }
    assert!(overlapped >= 1, "no attempt swapped while a call was in flight");
}

#[test]
fn threads_calling_through_many_swaps_always_get_one_whole_current_policy() {
    let runtime = slow_runtime();
    let (a, b) = (stub_a(), stub("B", "sha256:stub-b", 1, Listing::Fixed));
    let handle = PolicyHandle::new(runtime.load(&a).unwrap());
    let published = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (handle, published, done) = (handle.clone(), published.clone(), done.clone());
            std::thread::spawn(move || {
                let mut evaluator = handle.evaluator().unwrap();
                let mut calls = 0u64;
                while done.load(Ordering::SeqCst) == 0 || calls < 10 {
                    let at_least = published.load(Ordering::SeqCst);
                    let result = evaluator.decide(b"P");
                    let generation = evaluator.generation();
                    assert!(generation >= at_least, "a call started after swap {at_least} ran on {generation}");
                    let expected: &[u8] = if generation.is_multiple_of(2) { b"A" } else { b"B" };
                    assert_eq!(result, expected, "generation {generation}");
                    assert_eq!(evaluator.decide(b"echo me"), b"echo me");
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    for generation in 1..=30u64 {
        let next = if generation.is_multiple_of(2) { &a } else { &b };
        handle.swap(runtime.load(next).unwrap());
        published.store(generation, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
    }
    done.store(1, Ordering::SeqCst);
    for worker in workers {
        assert!(worker.join().unwrap() >= 10);
    }
    assert_eq!(handle.current().policy(), "sha256:stub-a");
}

// ---------------------------------------------------------------------------------------------------------------
// The CLI

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-runtime-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn remit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .output()
        .expect("run remit")
}

#[test]
fn remit_build_writes_a_valid_module_and_a_precompiled_one() {
    let dir = temp_dir("build");
    let wasm = dir.join("wallet.wasm");
    let out = remit(&["build", "examples/wallet", "-o", wasm.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&wasm).unwrap();
    wasmparser::Validator::new().validate_all(&bytes).expect("a valid module");
    let cwasm = dir.join("wallet.cwasm");
    let out = remit(&["build", "examples/wallet", "-o", cwasm.to_str().unwrap(), "--precompile"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(wasmtime::Engine::detect_precompiled(&std::fs::read(&cwasm).unwrap()).is_some());
    // A policy with errors builds nothing.
    let broken = dir.join("broken.remit");
    std::fs::write(&broken, "mandate m for \"p\" { allow no_such_tool }").unwrap();
    let out = remit(&["build", broken.to_str().unwrap(), "-o", dir.join("broken.wasm").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!dir.join("broken.wasm").exists());
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn remit_eval_runs_a_wasm_policy_through_the_runtime() {
    let dir = temp_dir("eval");
    let module = dir.join("stub.wasm");
    std::fs::write(&module, stub_a()).unwrap();
    let request = dir.join("request.json");
    std::fs::write(&request, b"{\"echo\": true}").unwrap();
    let out = remit(&["eval", module.to_str().unwrap(), "--request", request.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"{\"echo\": true}\n");
    std::fs::write(&request, b"T").unwrap();
    let out = remit(&["eval", module.to_str().unwrap(), "--request", request.to_str().unwrap()]);
    assert_eq!(out.stdout, [deny(REASON_TRAP, "sha256:stub-a"), b"\n".to_vec()].concat());
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn remit_eval_of_sources_runs_the_runtime_natively_or_the_interpreter_with_the_same_bytes() {
    let example = examples::dir("wallet");
    for request in std::fs::read_dir(example.join("requests")).unwrap() {
        let request = request.unwrap().path();
        let (policy, request_arg) = (example.to_str().unwrap(), request.to_str().unwrap());
        let native = remit(&["eval", policy, "--request", request_arg]);
        let interpreter = remit(&["eval", policy, "--request", request_arg, "--engine", "interpreter"]);
        assert!(native.status.success() && interpreter.status.success());
        assert_eq!(String::from_utf8_lossy(&native.stdout), String::from_utf8_lossy(&interpreter.stdout));
        let expected = remit_lang::eval::decide(&examples::program("wallet"), &std::fs::read(&request).unwrap());
        assert_eq!(native.stdout, format!("{}\n", expected.to_json()).into_bytes());
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Cross-runtime proof: Node's WebAssembly, wasmtime, the interpreter

fn node_available() -> bool {
    Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Runs tests/node/decide.mjs on `requests` (written to files) with a time limit: one result per request.
fn node_decide(dir: &Path, wasm: &[u8], requests: &[Vec<u8>], visible_tools: bool) -> Vec<Vec<u8>> {
    let module = dir.join("policy.wasm");
    std::fs::write(&module, wasm).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/decide.mjs");
    let mut command = Command::new("node");
    command.arg(script);
    if visible_tools {
        command.arg("--visible-tools");
    }
    command.arg(&module);
    for (i, request) in requests.iter().enumerate() {
        let path = dir.join(format!("request-{i:05}.json"));
        std::fs::write(&path, request).unwrap();
        command.arg(path);
    }
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run node");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("node did not finish within 300 s (a module that never returns?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).ok();
    assert!(status.success(), "node failed: {stderr}");
    let out = reader.join().unwrap().unwrap();
    let mut lines: Vec<Vec<u8>> = out.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    assert_eq!(lines.pop(), Some(Vec::new()), "output ends with a newline");
    assert_eq!(lines.len(), requests.len(), "one line per request; stderr: {stderr}");
    lines
}

#[test]
fn the_node_host_and_the_wasmtime_host_agree_on_the_stub() {
    if !node_available() {
        eprintln!("skipping: `node` is not on PATH (the cross-runtime proof needs Node's built-in WebAssembly)");
        return;
    }
    let wasm = stub_a();
    let requests: Vec<Vec<u8>> = vec![
        b"{\"subject\":{\"id\":\"a\"}}".to_vec(),
        Vec::new(),
        vec![0xff, 0xfe, 0x00, 0x80],
        "é – ✓".as_bytes().to_vec(),
        vec![b'y'; MAX_INPUT],
        vec![b'z'; MAX_INPUT + 1],
        b"T".to_vec(),
        b"P".to_vec(),
    ];
    let dir = temp_dir("node-stub");
    let from_node = node_decide(&dir, &wasm, &requests, false);
    let mut evaluator = load(&runtime(), &wasm).evaluator().unwrap();
    for (request, node) in requests.iter().zip(&from_node) {
        assert_eq!(
            &evaluator.decide(request),
            node,
            "request {:?}",
            String::from_utf8_lossy(&request[..request.len().min(40)])
        );
    }
    assert_eq!(from_node[5], STUB_OVERSIZE.as_bytes());
    let listing = node_decide(&dir, &wasm, &requests[..1], true);
    assert_eq!(listing[0], evaluator.visible_tools(&requests[0]));
    std::fs::remove_dir_all(dir).ok();
}

fn is_deny(decision: &[u8]) -> bool {
    let value: serde_json::Value = serde_json::from_slice(decision).expect("a decision is JSON");
    value["decision"] == "deny"
        && value["reasons"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| !r.as_str().unwrap_or("").starts_with("runtime.")))
}

#[test]
fn every_example_request_decides_alike_in_node_wasmtime_and_the_interpreter() {
    if !node_available() {
        eprintln!("skipping: `node` is not on PATH (the cross-runtime proof needs Node's built-in WebAssembly)");
        return;
    }
    let runtime = runtime();
    let mut checked = 0;
    for name in EXAMPLES {
        let program = examples::program(name);
        let wasm = remit_lang::wasm::compile(&program).expect("the example compiles");
        // Only WebAssembly 2.0 features, so every runtime of the last years runs it.
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::WASM2)
            .validate_all(&wasm)
            .unwrap_or_else(|e| panic!("{name}: the module needs more than WebAssembly 2.0: {e}"));
        let requests = examples::requests(&examples::dir(name));
        // The shared garbage ends with the request padded to exactly the limit (decided normally), then oversize.
        let garbage = support::garbage(&requests[0]);
        let all: Vec<Vec<u8>> = requests.iter().chain(&garbage).cloned().collect();
        let dir = temp_dir(&format!("cross-{name}"));
        let from_node = node_decide(&dir, &wasm, &all, false);
        let mut evaluator = load(&runtime, &wasm).evaluator().unwrap();
        let oversize_at = requests.len() + garbage.len() - 1;
        for (i, request) in all.iter().enumerate() {
            let shown = String::from_utf8_lossy(&request[..request.len().min(300)]).into_owned();
            let from_wasmtime = evaluator.decide(request);
            assert_eq!(
                String::from_utf8_lossy(&from_wasmtime),
                String::from_utf8_lossy(&from_node[i]),
                "{name}: wasmtime and node differ on {shown}"
            );
            if i == oversize_at {
                let value: serde_json::Value = serde_json::from_slice(&from_wasmtime).unwrap();
                assert_eq!(value["reasons"], serde_json::json!(["request.oversize"]), "{name}");
                assert!(is_deny(&from_wasmtime));
            }
            let expected = remit_lang::eval::decide(&program, request).to_json();
            assert_eq!(
                String::from_utf8_lossy(&from_wasmtime),
                expected,
                "{name}: wasm and interpreter differ on {shown}"
            );
            if i >= requests.len() && i < oversize_at - 1 {
                assert!(is_deny(&from_wasmtime), "{name}: garbage not denied: {shown}");
            }
            checked += 1;
        }
        // Tool listings: the example's subjects (when it has them) and its requests.
        let mut subjects = requests.clone();
        subjects.extend(examples::subjects(&examples::dir(name)));
        subjects.extend(garbage[..garbage.len() - 1].iter().cloned());
        let from_node = node_decide(&dir, &wasm, &subjects, true);
        for (request, node) in subjects.iter().zip(&from_node) {
            let expected = remit_lang::eval::visible_tools(&program, request).to_json();
            assert_eq!(String::from_utf8_lossy(&evaluator.visible_tools(request)), expected, "{name}");
            assert_eq!(String::from_utf8_lossy(node), expected, "{name}");
        }
        std::fs::remove_dir_all(dir).ok();
    }
    assert!(checked >= 100, "{checked}");
}

/// Issue 7, item 1, through the real hosts with their default limits: six approval kinds that each bind the target
/// and the manifest, and a request with a 120,000-character resource id and manifest. The escalation (1.44 MB)
/// comes out whole; with 80 kinds (past the 16 MiB output area) it is the `decision.oversize` deny. wasmtime (with
/// its default fuel), Node and the interpreter agree byte for byte.
#[test]
fn large_escalations_come_out_whole_or_as_an_oversize_deny_in_every_host() {
    let long = "x".repeat(120_000);
    let request = serde_json::json!({
        "subject": {"id": "agent:a"},
        "action": {"name": "put", "arguments": {"manifest": long}},
        "resource": {"id": long},
        "context": {"mandate": "m", "now": "2026-11-30T12:00:00Z"}
    })
    .to_string()
    .into_bytes();
    let runtime = runtime();
    for (kinds, outcome) in [(6, "escalate"), (80, "deny")] {
        let mut text = String::from("tool put(manifest: string) {\n  side effects\n}\nmandate m for \"user:p\" {\n");
        text.push_str("  holder \"agent:a\"\n  allow put\n");
        for k in 0..kinds {
            text.push_str(&format!("  require approval k{k} for put\n"));
        }
        text.push_str("}\n");
        for k in 0..kinds {
            text.push_str(&format!("approval k{k} {{\n  binds target, manifest\n  ttl 1h\n}}\n"));
        }
        let mut sources = remit_lang::stdlib::sources();
        sources.add("gates.remit", text);
        let program = check(sources).program.expect("the policy checks");
        let wasm = remit_lang::wasm::compile(&program).expect("compiles");
        let expected = remit_lang::eval::decide(&program, &request).to_json();
        let value: serde_json::Value = serde_json::from_str(&expected).expect("valid JSON");
        assert_eq!(value["decision"], outcome);
        let from_wasmtime = load(&runtime, &wasm).evaluator().unwrap().decide(&request);
        assert!(from_wasmtime == expected.as_bytes(), "{kinds} kinds: wasmtime differs from the interpreter");
        if node_available() {
            let dir = temp_dir(&format!("large-{kinds}"));
            let from_node = node_decide(&dir, &wasm, std::slice::from_ref(&request), false);
            assert!(from_node[0] == expected.as_bytes(), "{kinds} kinds: node differs from the interpreter");
            std::fs::remove_dir_all(dir).ok();
        }
    }
}

/// Issue 7, item 8, near the input limit: 1,500 presented approvals (identical copies of one, or 1,500 distinct
/// ids, smallest last) decide alike in wasmtime with its default fuel and in the interpreter: the module looks for
/// contradicting copies of the chosen id only, not of every satisfying approval.
#[test]
fn many_presented_approvals_decide_within_the_default_fuel() {
    let mut sources = remit_lang::stdlib::sources();
    sources.add(
        "gate.remit",
        "tool put(doc: string) {\n  side effects\n}\nmandate m for \"user:p\" {\n  holder \"agent:a\"\n  allow put\n  \
         require approval legal for put\n}\n",
    );
    let program = check(sources).program.expect("the policy checks");
    let wasm = remit_lang::wasm::compile(&program).expect("compiles");
    let mut evaluator = load(&runtime(), &wasm).evaluator().unwrap();
    for same in [true, false] {
        let approvals: Vec<serde_json::Value> = (0..1_500)
            .map(|i| {
                serde_json::json!({
                    "id": if same { "a".to_string() } else { format!("a{:05}", 1_500 - i) },
                    "kind": "legal", "mandate": "m", "issued_at": "2026-11-30T11:00:00Z",
                    "expires_at": "2026-12-01T00:00:00Z", "target": "doc:1"
                })
            })
            .collect();
        let request = serde_json::json!({
            "subject": {"id": "agent:a"}, "action": {"name": "put", "arguments": {"doc": "d"}},
            "resource": {"id": "doc:1"},
            "context": {"mandate": "m", "now": "2026-11-30T12:00:00Z", "approvals": approvals}
        })
        .to_string()
        .into_bytes();
        assert!(request.len() <= MAX_INPUT);
        let expected = remit_lang::eval::decide(&program, &request).to_json();
        assert!(expected.starts_with(r#"{"decision":"allow""#), "{expected}");
        assert_eq!(String::from_utf8_lossy(&evaluator.decide(&request)), expected, "same ids: {same}");
    }
}

/// The host writes the deny of a failed call itself (it does not depend on the interpreter): byte for byte what the
/// interpreter's `Decision::deny` writes, escapes included.
#[test]
fn the_hosts_deny_is_the_interpreters() {
    for (reason, policy) in [(REASON_TRAP, "sha256:ab12"), (REASON_FUEL, "p\"o\\l\u{1}i\u{e9}cy\n")] {
        assert_eq!(remit_host::deny_json(reason, policy), deny(reason, policy), "{policy:?}");
    }
}
