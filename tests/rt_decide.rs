//! The runtime crate's decisions and tool listings (crates/remit-rt/src/decide.rs, visible.rs), natively over each
//! policy's image, against the interpreter byte for byte: on every request of the corpus, the garbage inputs, and
//! mutated requests (`REMIT_DIFF_ROUNDS` per unit, default 300).

mod support;

use remit_lang::native::Native;

#[test]
fn native_decisions_equal_the_interpreter() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for unit in support::corpus() {
        let mut native = Native::new(&unit.program).unwrap();
        let mut inputs = unit.requests.clone();
        if let Some(first) = unit.requests.first() {
            inputs.extend(support::garbage(first));
        }
        for request in &inputs {
            let expected = remit_lang::eval::decide(&unit.program, request).to_json();
            let got = native.decide(request);
            compared += 1;
            if got != expected.as_bytes() {
                failures.push(format!(
                    "{}: {}\n  interpreter: {expected}\n  runtime:     {}",
                    unit.name,
                    String::from_utf8_lossy(&request[..request.len().min(300)]),
                    String::from_utf8_lossy(&got)
                ));
            }
            let expected = remit_lang::eval::visible_tools(&unit.program, request).to_json();
            let got = native.visible_tools(request);
            if got != expected.as_bytes() {
                failures.push(format!(
                    "{} (listing): {}\n  interpreter: {expected}\n  runtime:     {}",
                    unit.name,
                    String::from_utf8_lossy(&request[..request.len().min(300)]),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    let shown: Vec<&String> = failures.iter().take(8).collect();
    assert!(failures.is_empty(), "{} of {compared} requests differ; first:\n{shown:#?}", failures.len());
}

/// The linked module (the runtime artifact + the image, `remit_lang::wasm::link`) in wasmtime writes exactly what the
/// runtime writes natively: the same source code compiled twice.
#[test]
fn linked_modules_equal_the_native_engine() {
    let runtime = remit_host::Runtime::new().unwrap();
    let mut failures = Vec::new();
    let mut compared = 0;
    for unit in support::corpus() {
        let mut native = Native::new(&unit.program).unwrap();
        let wasm = remit_lang::wasm::link(&unit.program).unwrap();
        let compiled = std::sync::Arc::new(runtime.load(&wasm).unwrap());
        let mut module = compiled.evaluator().unwrap();
        let mut inputs = unit.requests.clone();
        if let Some(first) = unit.requests.first() {
            inputs.extend(support::garbage(first));
        }
        inputs.extend(unit.subjects.iter().cloned());
        for request in &inputs {
            compared += 1;
            let (a, b) = (native.decide(request), module.decide(request));
            if a != b {
                failures.push(format!(
                    "{}: native {}\n  module {}",
                    unit.name,
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
            let (a, b) = (native.visible_tools(request), module.visible_tools(request));
            if a != b {
                failures.push(format!(
                    "{} (listing): native {}\n  module {}",
                    unit.name,
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
        }
    }
    let shown: Vec<&String> = failures.iter().take(5).collect();
    assert!(failures.is_empty(), "{} of {compared} requests differ; first:\n{shown:#?}", failures.len());
}

/// The decision module on the examples' requests: as `remit_host` loads it (no fuel: its work bound), metered
/// by fuel, and as bare ABI calls, interleaved rounds, per-call medians. A timing benchmark, not a test:
/// `cargo test --release --test rt_decide -- --ignored --nocapture decide_speed`. With `REMIT_RT_ARTIFACT` the
/// module is not the committed runtime's, so "as loaded" is metered too: compare builds on the other columns.
#[test]
#[ignore]
fn decide_speed() {
    use std::time::Instant;
    let rounds: usize = std::env::var("REMIT_SPEED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let engine = wasmtime::Engine::default();
    let runtime = remit_host::Runtime::new().unwrap();
    let metering = remit_host::Limits { meter_bounded: true, ..Default::default() };
    let metering = remit_host::Runtime::with_limits(metering).unwrap();
    // `REMIT_RT_BASELINE=OTHER.wasm`: another build of the runtime, linked with the same images and called bare
    // like the last column, interleaved with it: a build against another, side by side in one process.
    let baseline = std::env::var("REMIT_RT_BASELINE").ok().map(|path| std::fs::read(path).unwrap());
    let extra = if baseline.is_some() { " baseline bare | bare / baseline |" } else { "" };
    println!("| request | bytes | as loaded (no fuel) | with fuel | fuel / as loaded | bare ABI call |{extra}");
    println!("|---|---|---|---|---|---|{}", if baseline.is_some() { "---|---|" } else { "" });
    let mut p50s = Vec::new();
    let mut ratios = Vec::new();
    let mut against_baseline = Vec::new();
    for name in ["wallet", "bank-disputes", "club", "web-publication"] {
        let program = &support::examples::program(name);
        let module = linked(program);
        let mut raw = support::wasm::Wasm::new(&engine, &module);
        let loaded = std::sync::Arc::new(runtime.load(&module).unwrap());
        assert!(!loaded.metered() || std::env::var_os("REMIT_RT_ARTIFACT").is_some());
        let mut loaded = loaded.evaluator().unwrap();
        let mut fuel = std::sync::Arc::new(metering.load(&module).unwrap()).evaluator().unwrap();
        let mut base = baseline.as_ref().map(|artifact| {
            let image = remit_lang::wasm::image::write(program).unwrap();
            support::wasm::Wasm::new(&engine, &remit_module::link_image(artifact, &image, None).unwrap())
        });
        let mut requests = support::examples::requests(&support::examples::dir(name));
        // `REMIT_SPEED_COMPACT=1`: each request without its layout, as the gateway writes requests (serde_json,
        // keys in their order), rather than the indented files.
        if std::env::var_os("REMIT_SPEED_COMPACT").is_some() {
            for request in &mut requests {
                *request = serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(request).unwrap()).unwrap();
            }
        }
        for (i, request) in requests.iter().enumerate() {
            let batch = 50;
            let mut samples: [Vec<f64>; 4] = Default::default();
            for _ in 0..rounds {
                let time = |f: &mut dyn FnMut() -> usize| {
                    let start = Instant::now();
                    for _ in 0..batch {
                        std::hint::black_box(f());
                    }
                    start.elapsed().as_nanos() as f64 / batch as f64
                };
                samples[0].push(time(&mut || loaded.decide_with(request, |d| d.len())));
                samples[1].push(time(&mut || fuel.decide_with(request, |d| d.len())));
                samples[2].push(time(&mut || raw.decide(request).len()));
                if let Some(base) = &mut base {
                    samples[3].push(time(&mut || base.decide(request).len()));
                }
            }
            let m: Vec<f64> = samples.iter_mut().map(|v| if v.is_empty() { 0.0 } else { median(v) }).collect();
            p50s.push(m[0]);
            ratios.push(m[1] / m[0]);
            let versus = if base.is_some() {
                against_baseline.push(m[2] / m[3]);
                format!(" {:.0} ns | {:.2} |", m[3], m[2] / m[3])
            } else {
                String::new()
            };
            println!(
                "| {name} #{} | {} | {:.0} ns | {:.0} ns | {:.2} | {:.0} ns |{versus}",
                i + 1,
                request.len(),
                m[0],
                m[1],
                m[1] / m[0],
                m[2]
            );
        }
    }
    let (p50, ratio) = (median(&mut p50s), median(&mut ratios));
    let (lo, hi) = (p50s[0], p50s[p50s.len() - 1]);
    println!(
        "as loaded: median {p50:.0} ns ({lo:.0}-{hi:.0} ns) over {} requests; with fuel: median {ratio:.2}x",
        p50s.len()
    );
    if !against_baseline.is_empty() {
        let faster = against_baseline.iter().filter(|r| **r < 1.0).count();
        let n = against_baseline.len();
        let r = median(&mut against_baseline);
        println!("bare / baseline bare: median {r:.3}x, faster on {faster} of {n} requests");
    }
}

/// `decide_speed`'s last columns (a build of the runtime against `REMIT_RT_BASELINE`, bare ABI calls) with the
/// requests mixed: each round times every request of an example once, one call at a time, in a new order (the same
/// order for both builds, which take turns going first), so a request never runs twice in a row. In
/// `decide_speed`'s batches of 50 calls of one request, the processor's branch predictors learn that document's
/// branches (the length of every whitespace run and string), which a gateway deciding different requests does not
/// get; here they cannot. A single call's time includes reading the clock (the same for both builds).
/// `REMIT_RT_ARTIFACT=NEW.wasm REMIT_RT_BASELINE=OLD.wasm cargo test --release --test rt_decide -- --ignored
/// --nocapture decide_speed_mixed`.
#[test]
#[ignore]
fn decide_speed_mixed() {
    use std::time::Instant;
    let rounds: usize = std::env::var("REMIT_SPEED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let engine = wasmtime::Engine::default();
    let baseline = std::fs::read(std::env::var("REMIT_RT_BASELINE").expect("REMIT_RT_BASELINE=OTHER.wasm")).unwrap();
    let mut rng = support::rng::XorShift(0x5eed_2012_0000_0003);
    let mut ratios = Vec::new();
    println!("| request | bytes | bare ABI call | baseline bare | bare / baseline bare |");
    println!("|---|---|---|---|---|");
    for name in ["wallet", "bank-disputes", "club", "web-publication"] {
        let program = &support::examples::program(name);
        let image = remit_lang::wasm::image::write(program).unwrap();
        let mut modules = [
            support::wasm::Wasm::new(&engine, &linked(program)),
            support::wasm::Wasm::new(&engine, &remit_module::link_image(&baseline, &image, None).unwrap()),
        ];
        let requests = support::examples::requests(&support::examples::dir(name));
        let mut samples = vec![[Vec::new(), Vec::new()]; requests.len()];
        for round in 0..rounds {
            let order = rng.permutation(requests.len());
            for turn in 0..2 {
                let which = (round + turn) % 2;
                for &k in &order {
                    let start = Instant::now();
                    std::hint::black_box(modules[which].decide(&requests[k]).len());
                    samples[k][which].push(start.elapsed().as_nanos() as f64);
                }
            }
        }
        for (k, [new, old]) in samples.iter_mut().enumerate() {
            let (new, old) = (median(new), median(old));
            ratios.push(new / old);
            println!("| {name} #{} | {} | {new:.0} ns | {old:.0} ns | {:.2} |", k + 1, requests[k].len(), new / old);
        }
    }
    let faster = ratios.iter().filter(|r| **r < 1.0).count();
    let n = ratios.len();
    let r = median(&mut ratios);
    println!(
        "bare / baseline bare, mixed: median {r:.3}x ({:.2}-{:.2}), faster on {faster} of {n} requests",
        ratios[0],
        ratios[n - 1]
    );
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// What a decision costs before any policy work, on BENCHMARKS.md's example requests: the committed runtime's test
/// exports time the parts every decision of docs/abi.md version 1 does whatever the policy (the request's JSON
/// accepted into a tape; then its fields read), and the argument digest an approval gate needs, beside the whole
/// decision of the linked module as `decide_speed`'s bare column times it, interleaved in one loop (batches of 50
/// calls, medians). The floor of issue 12's per-decision target.
/// `cargo test --release --test rt_decide -- --ignored --nocapture floor_speed`.
#[test]
#[ignore]
fn floor_speed() {
    use std::time::Instant;
    use wasmtime::{Instance, Module, Store, TypedFunc};
    let rounds: usize = std::env::var("REMIT_SPEED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let engine = wasmtime::Engine::default();
    let artifact = other_artifact().unwrap_or_else(|| remit_module::RUNTIME.to_vec());
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &Module::new(&engine, &artifact).unwrap(), &[]).unwrap();
    let memory = instance.get_memory(&mut store, "memory").unwrap();
    let input_at: TypedFunc<(), i32> = instance.get_typed_func(&mut store, "rt_input").unwrap();
    let validate: TypedFunc<i32, i32> = instance.get_typed_func(&mut store, "rt_json_validate").unwrap();
    let read: TypedFunc<(i32, i32), i32> = instance.get_typed_func(&mut store, "rt_request_decode").unwrap();
    let digest: TypedFunc<(i32, i32), i64> = instance.get_typed_func(&mut store, "rt_argument_digest").unwrap();
    let input = input_at.call(&mut store, ()).unwrap() as usize;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files =
        |dir: &str| support::examples::sorted(&root.join(dir)).iter().map(|p| std::fs::read(p).unwrap()).collect();
    let cases: [(&str, Vec<Vec<u8>>); 3] = [
        ("wallet (bench)", vec![std::fs::read(root.join("bench/requests/wallet-pay-allow.json")).unwrap()]),
        ("wallet", files("examples/wallet/requests")),
        ("web-publication", files("examples/web-publication/requests")),
    ];
    println!("| request | bytes | decision | JSON accepted | + fields read | read / decision | argument digest | empty call |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, requests) in cases {
        let example = name.split(' ').next().unwrap();
        let mut module = support::wasm::Wasm::new(&engine, &linked(&support::examples::program(example)));
        for (i, request) in requests.iter().enumerate() {
            let value: serde_json::Value = serde_json::from_slice(request).unwrap();
            let tool = value["action"]["name"].as_str().unwrap().to_string();
            let arguments = serde_json::to_vec(&value["action"]["arguments"]).unwrap();
            let tool_and_arguments = [tool.as_bytes(), &arguments].concat();
            // Each part timed must succeed (an early error would be a cheaper path than a decision's).
            let split = tool.len() as i32;
            memory.write(&mut store, input, request).unwrap();
            assert_eq!(validate.call(&mut store, request.len() as i32).unwrap(), 0, "{name} #{}: JSON accepted", i + 1);
            memory.write(&mut store, input, request).unwrap();
            assert_eq!(read.call(&mut store, (request.len() as i32, 0)).unwrap() & 0xff, 0, "{name} #{}: read", i + 1);
            memory.write(&mut store, input, &tool_and_arguments).unwrap();
            let digested = digest.call(&mut store, (split, tool_and_arguments.len() as i32)).unwrap();
            assert_ne!(digested as u64 >> 32, 0, "{name} #{}: digest", i + 1);
            let batch = 50;
            let mut samples: [Vec<f64>; 5] = Default::default();
            let time = |store: &mut Store<()>, bytes: &[u8], f: &mut dyn FnMut(&mut Store<()>, i32) -> i64| {
                let start = Instant::now();
                for _ in 0..batch {
                    memory.write(&mut *store, input, bytes).unwrap();
                    std::hint::black_box(f(store, bytes.len() as i32));
                }
                start.elapsed().as_nanos() as f64 / batch as f64
            };
            for _ in 0..rounds {
                let start = Instant::now();
                for _ in 0..batch {
                    std::hint::black_box(module.decide(request).len());
                }
                samples[0].push(start.elapsed().as_nanos() as f64 / batch as f64);
                samples[1].push(time(&mut store, request, &mut |s, len| validate.call(s, len).unwrap() as i64));
                samples[2].push(time(&mut store, request, &mut |s, len| read.call(s, (len, 0)).unwrap() as i64));
                samples[3]
                    .push(time(&mut store, &tool_and_arguments, &mut |s, len| digest.call(s, (split, len)).unwrap()));
                samples[4].push(time(&mut store, b"", &mut |s, _| input_at.call(s, ()).unwrap() as i64));
            }
            let m: Vec<f64> = samples.iter_mut().map(|v| median(v)).collect();
            println!(
                "| {name} #{} | {} | {:.0} ns | {:.0} ns | {:.0} ns | {:.0}% | {:.0} ns | {:.0} ns |",
                i + 1,
                request.len(),
                m[0],
                m[1],
                m[2],
                100.0 * m[2] / m[0],
                m[3],
                m[4]
            );
        }
    }
}

/// A loop over the runtime natively, for profiling (`perf record` the test binary):
/// `cargo test --release --test rt_decide -- --ignored native_loop`.
#[test]
#[ignore]
fn native_loop() {
    let (program, requests) = loop_requests();
    let mut native = Native::new(&program).unwrap();
    let calls: usize = std::env::var("REMIT_LOOP_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let mut total = 0;
    for i in 0..calls {
        total += native.decide(&requests[i % requests.len()]).len();
    }
    assert!(total > 0);
}

/// The profiling loops' policy and requests: the example `REMIT_LOOP_EXAMPLE` (wallet by default), all its requests
/// or only the one numbered `REMIT_LOOP_REQUEST` (from 1, as `fuel_per_decision` numbers them), or the request in the
/// file `REMIT_LOOP_FILE`.
fn loop_requests() -> (remit_lang::ir::Program, Vec<Vec<u8>>) {
    let name = std::env::var("REMIT_LOOP_EXAMPLE").unwrap_or_else(|_| "wallet".into());
    let mut requests = support::examples::requests(&support::examples::dir(&name));
    if let Some(n) = std::env::var("REMIT_LOOP_REQUEST").ok().and_then(|v| v.parse::<usize>().ok()) {
        requests = vec![requests.swap_remove(n - 1)];
    }
    if let Ok(path) = std::env::var("REMIT_LOOP_FILE") {
        requests = vec![std::fs::read(path).unwrap()];
    }
    (support::examples::program(&name), requests)
}

/// The decision module of `program`: linked with the committed runtime, or with the artifact at `REMIT_RT_ARTIFACT` (so that
/// the measurements below compare another build of the runtime without rebuilding the tests).
fn linked(program: &remit_lang::ir::Program) -> Vec<u8> {
    match other_artifact() {
        Some(artifact) => {
            let image = remit_lang::wasm::image::write(program).unwrap();
            remit_module::link_image(&artifact, &image, None).unwrap()
        }
        None => remit_lang::wasm::link(program).unwrap(),
    }
}

/// The runtime artifact at `REMIT_RT_ARTIFACT`, when that is set: another build measured in place of the committed one.
fn other_artifact() -> Option<Vec<u8>> {
    std::env::var("REMIT_RT_ARTIFACT").ok().map(|path| std::fs::read(path).unwrap())
}

/// A loop over a linked module in wasmtime with a perf map, for profiling the runtime's wasm code: build an
/// unstripped artifact (scripts/build-runtime.sh's rustc line without `-C strip=symbols`), then
/// `REMIT_RT_ARTIFACT=that.wasm perf record -k mono TEST_BINARY --ignored module_loop`.
#[test]
#[ignore]
fn module_loop() {
    let artifact = other_artifact().expect("REMIT_RT_ARTIFACT=an unstripped build of the runtime");
    let (program, requests) = loop_requests();
    let image = remit_lang::wasm::image::write(&program).unwrap();
    let module = remit_module::link_image(&artifact, &image, None).unwrap();
    if let Ok(path) = std::env::var("REMIT_LOOP_DUMP") {
        std::fs::write(path, &module).unwrap();
    }
    let mut config = wasmtime::Config::new();
    config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    let engine = wasmtime::Engine::new(&config).unwrap();
    // The module compiled as this engine compiles it, an ELF object (`objdump -d`): the code the perf map names.
    if let Ok(path) = std::env::var("REMIT_LOOP_NATIVE") {
        std::fs::write(path, engine.precompile_module(&module).unwrap()).unwrap();
    }
    let mut wasm = support::wasm::Wasm::new(&engine, &module);
    let calls: usize = std::env::var("REMIT_LOOP_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000);
    let mut total = 0;
    for i in 0..calls {
        total += wasm.decide(&requests[i % requests.len()]).len();
    }
    assert!(total > 0);
}

/// The scaling series of BENCHMARKS.md (N grants, each on its own tool; the called tool has a grant and a
/// prohibition) through the decision module as the runtime loads it (no fuel: its work bound) and metered by
/// fuel: how the latency grows with the policy.
/// `cargo test --release --test rt_decide -- --ignored --nocapture scale_speed`.
#[test]
#[ignore]
fn scale_speed() {
    use std::fmt::Write;
    use std::time::Instant;
    let runtime = remit_host::Runtime::new().unwrap();
    let metering = remit_host::Limits { meter_bounded: true, ..Default::default() };
    let metering = remit_host::Runtime::with_limits(metering).unwrap();
    let request = br#"{"subject":{"id":"agent:a"},"action":{"name":"t0","arguments":{"x":"v0"}},"resource":{"id":"r"},"context":{"mandate":"scale","now":"2026-12-01T00:00:00Z"}}"#;
    println!("| grants | as loaded (no fuel) | with fuel |");
    println!("|---|---|---|");
    for n in [10usize, 1_000, 10_000] {
        let mut text = String::new();
        for i in 0..n - 1 {
            writeln!(text, "tool t{i}(x: string) {{\n  level draft\n}}").unwrap();
        }
        text.push_str("mandate scale for \"user:p\" {\n  holder \"agent:a\"\n  purpose \"p\"\n");
        text.push_str("  allow t0 where args.x in [\"v0\", \"w0\"]\n  forbid t0 where args.x == \"bad\"\n");
        for i in 1..n - 1 {
            writeln!(text, "  allow t{i} where args.x == \"v{i}\"").unwrap();
        }
        text.push_str("}\n");
        let program = support::examples::compile(&[("scale.remit".to_string(), text)]);
        let module = linked(&program);
        let mut loaded = std::sync::Arc::new(runtime.load(&module).unwrap()).evaluator().unwrap();
        let mut fuel = std::sync::Arc::new(metering.load(&module).unwrap()).evaluator().unwrap();
        assert_eq!(loaded.decide(request), remit_lang::eval::decide(&program, request).to_json().into_bytes());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..300 {
            for (engine, samples) in [(&mut loaded, &mut a), (&mut fuel, &mut b)] {
                let start = Instant::now();
                for _ in 0..50 {
                    std::hint::black_box(engine.decide_with(request, |d| d.len()));
                }
                samples.push(start.elapsed().as_nanos() as f64 / 50.0);
            }
        }
        println!("| {n} | {:.0} ns | {:.0} ns |", median(&mut a), median(&mut b));
    }
}

/// Mutated and damaged requests (tests/support/mutate.rs) decided and listed by the runtime natively, against the
/// interpreter: `REMIT_DIFF_ROUNDS` rounds (default 3,000) over the corpus.
#[test]
fn mutated_requests_decide_as_the_interpreter_decides() {
    use support::mutate::{damage, Rng};
    let rounds: usize = std::env::var("REMIT_DIFF_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000);
    let corpus = support::corpus();
    let mut engines: Vec<Native> = corpus.iter().map(|u| Native::new(&u.program).unwrap()).collect();
    let mut rng = Rng(0x5eed_2012_0000_0002);
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..rounds {
        let index = round % corpus.len();
        let unit = &corpus[index];
        let Some(base) = unit.requests.get(rng.below(unit.requests.len())) else { continue };
        let mut value: serde_json::Value = serde_json::from_slice(base).unwrap();
        for _ in 0..=rng.below(3) {
            support::mutate::mutate(&mut rng, &mut value, 0);
        }
        let text = value.to_string();
        let request = if rng.below(4) == 0 { damage(&mut rng, &text) } else { text.into_bytes() };
        let decision = remit_lang::eval::decide(&unit.program, &request);
        *outcomes.entry(decision.outcome.as_str()).or_insert(0) += 1;
        let shown = || format!("{}: {}", unit.name, String::from_utf8_lossy(&request));
        assert_eq!(String::from_utf8_lossy(&engines[index].decide(&request)), decision.to_json(), "{}", shown());
        let listing = remit_lang::eval::visible_tools(&unit.program, &request).to_json();
        assert_eq!(String::from_utf8_lossy(&engines[index].visible_tools(&request)), listing, "{}", shown());
    }
    eprintln!("{rounds} mutated requests: {outcomes:?}");
    assert!(outcomes.len() == 3 || rounds < 100, "every outcome occurs: {outcomes:?}");
}

/// Work per decision, deterministically: wasmtime fuel (about one unit per executed wasm instruction) of the
/// decision module on every example request. `cargo test --test rt_decide -- --ignored --nocapture fuel`.
#[test]
#[ignore]
fn fuel_per_decision() {
    let limits = remit_host::Limits { meter_bounded: true, ..Default::default() };
    let runtime = remit_host::Runtime::with_limits(limits).unwrap();
    let mut total = 0u64;
    println!("| request | fuel |");
    println!("|---|---|");
    for name in ["wallet", "bank-disputes", "club", "web-publication"] {
        let program = support::examples::program(name);
        let mut module = std::sync::Arc::new(runtime.load(&linked(&program)).unwrap()).evaluator().unwrap();
        // REMIT_FUEL_REQUEST=FILE: that request instead of the example's (to measure one path of the decision).
        let requests = match std::env::var("REMIT_FUEL_REQUEST") {
            Ok(path) => vec![std::fs::read(path).unwrap()],
            Err(_) => support::examples::requests(&support::examples::dir(name)),
        };
        for (i, request) in requests.iter().enumerate() {
            if std::env::var("REMIT_FUEL_PRINT").is_ok() {
                println!("{}", String::from_utf8_lossy(request));
            }
            module.decide(request);
            total += module.fuel_used();
            println!("| {name} #{} | {} |", i + 1, module.fuel_used());
        }
    }
    println!("total: {total}");
}

/// What reading the world costs in the module (issue 30): the same decision with its condition written over
/// literals and over the world — a resource's owner compared with the principal, a comparison of two amounts, a set
/// attribute of the subject, a relation answered in the request — interleaved rounds, per-call medians, through the
/// host as a gateway calls it. Two ratios: (a) each policy on its own request (the world's is longer: it carries the
/// properties and the relation's answer), and (b) the literal policy on the world's request bytes, so that the JSON
/// parsed is the same and the ratio is what reading the world costs beyond parsing it. Beside each, the fuel of one
/// decision (about one unit per executed wasm instruction: deterministic, where the times are noisy) and the runtime
/// natively. `REMIT_RT_ARTIFACT=NEW.wasm` measures another build of the runtime. A timing benchmark, not a test:
/// `cargo test --release --test rt_decide -- --ignored --nocapture world_speed`.
#[test]
#[ignore]
fn world_speed() {
    use std::time::Instant;
    let rounds: usize = std::env::var("REMIT_SPEED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let (literal, world) = (support::examples::REFUNDS_LITERAL, support::examples::REFUNDS_WORLD);
    let literal_request = br#"{"subject":{"id":"agent:desk"},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1"},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z"}}"#.to_vec();
    let world_request = br#"{"subject":{"id":"agent:desk","properties":{"teams":["refunds","billing"]}},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1","properties":{"owner":"user:alice","total":"120.00 EUR"}},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z","relations":{"member_of":[{"args":["agent:desk","team:suspended"],"holds":false}]}}}"#.to_vec();
    let runtime = remit_host::Runtime::new().unwrap();
    let metering =
        remit_host::Runtime::with_limits(remit_host::Limits { meter_bounded: true, ..Default::default() }).unwrap();
    let engine = wasmtime::Engine::default();
    let program = |source: &str| support::examples::compile(&[("p.remit".to_string(), source.to_string())]);
    let (literal, world) = (program(literal), program(world));
    let load = |runtime: &remit_host::Runtime, program: &remit_lang::ir::Program| {
        std::sync::Arc::new(runtime.load(&linked(program)).unwrap()).evaluator().unwrap()
    };
    // The three cases: the literal policy on its request and on the world's, the world's policy on its request.
    let cases = [(&literal, &literal_request), (&literal, &world_request), (&world, &world_request)];
    for (program, request) in cases {
        let expected = remit_lang::eval::decide(program, request).to_json();
        assert!(expected.contains("\"allow\""), "{expected}");
        assert_eq!(String::from_utf8_lossy(&Native::new(program).unwrap().decide(request)), expected);
        assert_eq!(String::from_utf8_lossy(&load(&runtime, program).decide(request)), expected);
    }
    let fuel: Vec<u64> = cases
        .iter()
        .map(|(program, request)| {
            let mut metered = load(&metering, program);
            metered.decide(request);
            metered.fuel_used()
        })
        .collect();
    // Per case: the module as the host loads it (with `REMIT_RT_ARTIFACT` metered by fuel too: compare builds on
    // the bare column), the module called bare, the runtime natively.
    let mut loaded: Vec<_> = cases.iter().map(|(program, _)| load(&runtime, program)).collect();
    let mut bare: Vec<_> =
        cases.iter().map(|(program, _)| support::wasm::Wasm::new(&engine, &linked(program))).collect();
    let mut natives: Vec<Native> = cases.iter().map(|(program, _)| Native::new(program).unwrap()).collect();
    let batch = 50;
    let mut samples: [[Vec<f64>; 3]; 3] = Default::default();
    for _ in 0..rounds {
        let time = |f: &mut dyn FnMut() -> usize| {
            let start = Instant::now();
            for _ in 0..batch {
                std::hint::black_box(f());
            }
            start.elapsed().as_nanos() as f64 / batch as f64
        };
        for (k, (_, request)) in cases.iter().enumerate() {
            let module = &mut loaded[k];
            samples[0][k].push(time(&mut || module.decide_with(request, |d| d.len())));
            let module = &mut bare[k];
            samples[1][k].push(time(&mut || module.decide(request).len()));
            let native = &mut natives[k];
            samples[2][k].push(time(&mut || native.decide(request).len()));
        }
    }
    let m: Vec<Vec<f64>> = samples.iter_mut().map(|engine| engine.iter_mut().map(|v| median(v)).collect()).collect();
    println!("| case | request bytes | module as loaded | module, bare call | fuel | native |");
    println!("|---|---|---|---|---|---|");
    let names = ["literals, own request", "literals, world's request", "world"];
    for (k, name) in names.iter().enumerate() {
        let bytes = cases[k].1.len();
        println!("| {name} | {bytes} | {:.0} ns | {:.0} ns | {} | {:.0} ns |", m[0][k], m[1][k], fuel[k], m[2][k]);
    }
    let ratios = |a: usize, b: usize| {
        let f = fuel[b] as f64 / fuel[a] as f64;
        format!(
            "{:.2} (bare {:.2}, fuel {f:.2}, native {:.2})",
            m[0][b] / m[0][a],
            m[1][b] / m[1][a],
            m[2][b] / m[2][a]
        )
    };
    println!("world / literals: (a) own requests {}; (b) same request bytes {}", ratios(0, 2), ratios(1, 2));
}

/// Where `world_speed`'s extra work goes, deterministically: the fuel of a decision (about one unit per executed
/// wasm instruction) on the world's request when one atom of the literal policy is replaced by a world atom (and by
/// variants of it), above the literal policy's own; then the JSON accepted and the request read, for each request.
/// `cargo test --release --test rt_decide -- --ignored --nocapture world_fuel` (`REMIT_RT_ARTIFACT` for another
/// build of the runtime).
#[test]
#[ignore]
fn world_fuel() {
    use wasmtime::{Instance, Module, Store, TypedFunc};
    let literal_request = br#"{"subject":{"id":"agent:desk"},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1"},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z"}}"#.to_vec();
    let world_request = br#"{"subject":{"id":"agent:desk","properties":{"teams":["refunds","billing"]}},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1","properties":{"owner":"user:alice","total":"120.00 EUR"}},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z","relations":{"member_of":[{"args":["agent:desk","team:suspended"],"holds":false}]}}}"#.to_vec();
    let declarations = "resource order {\n  owner: string\n  total: money\n}\nsubject agent {\n  teams: set<string>\n}\nrelation member_of(string, string)\ntool refund(order: string, amount: money)\n";
    // Per atom of the condition: the literal one, then world atoms in its place (the first is world_speed's).
    let atoms: [&[&str]; 4] = [
        &["args.order == \"order-1\"", "resource.owner == principal"],
        &[
            "args.amount <= 120 EUR",
            "args.amount <= resource.total",
            "resource.total >= 40 EUR",
            "args.amount == args.amount",
            "args.order == args.order",
            // A money value read against a string read, in an atom of its own.
            "args.amount != 1 EUR",
            "args.order != \"x\"",
        ],
        &["args.order in [\"order-1\", \"order-2\"]", "subject.teams contains \"refunds\""],
        &["args.order == \"order-9\"", "member_of(subject, \"team:suspended\")"],
    ];
    let metering =
        remit_host::Runtime::with_limits(remit_host::Limits { meter_bounded: true, ..Default::default() }).unwrap();
    let fuel_of = |pick: [usize; 4]| {
        let text = format!(
            "{declarations}mandate desk for \"user:alice\" {{\n  holder \"agent:desk\"\n  allow refund where {} and {} and {}\n  forbid refund where {}\n}}\n",
            atoms[0][pick[0]], atoms[1][pick[1]], atoms[2][pick[2]], atoms[3][pick[3]]
        );
        let program = support::examples::compile(&[("p.remit".to_string(), text)]);
        let mut module = std::sync::Arc::new(metering.load(&linked(&program)).unwrap()).evaluator().unwrap();
        let decision = module.decide(&world_request);
        assert_eq!(decision, remit_lang::eval::decide(&program, &world_request).to_json().into_bytes());
        assert!(String::from_utf8_lossy(&decision).contains("\"allow\""));
        module.fuel_used() as i64
    };
    let base = fuel_of([0; 4]);
    println!("the literal policy on the world's request: {base} fuel");
    for (k, variants) in atoms.iter().enumerate() {
        for (v, atom) in variants.iter().enumerate().skip(1) {
            let mut pick = [0; 4];
            pick[k] = v;
            println!("  `{atom}` for `{}`: {:+}", variants[0], fuel_of(pick) - base);
        }
    }
    println!("  all of world_speed's: {:+}", fuel_of([1; 4]) - base);
    // The parts before any policy work: the JSON accepted, then also the request read (the bare artifact's test
    // exports).
    let mut config = wasmtime::Config::new();
    config.consume_fuel(true);
    let engine = wasmtime::Engine::new(&config).unwrap();
    let artifact = other_artifact().unwrap_or_else(|| remit_module::RUNTIME.to_vec());
    let mut store = Store::new(&engine, ());
    store.set_fuel(u64::MAX / 2).unwrap();
    let instance = Instance::new(&mut store, &Module::new(&engine, &artifact).unwrap(), &[]).unwrap();
    let memory = instance.get_memory(&mut store, "memory").unwrap();
    let input_at: TypedFunc<(), i32> = instance.get_typed_func(&mut store, "rt_input").unwrap();
    let validate: TypedFunc<i32, i32> = instance.get_typed_func(&mut store, "rt_json_validate").unwrap();
    let read: TypedFunc<(i32, i32), i32> = instance.get_typed_func(&mut store, "rt_request_decode").unwrap();
    let input = input_at.call(&mut store, ()).unwrap() as usize;
    for (name, request) in [("literals'", &literal_request), ("world's", &world_request)] {
        let len = request.len() as i32;
        memory.write(&mut store, input, request).unwrap();
        let before = store.get_fuel().unwrap();
        assert_eq!(validate.call(&mut store, len).unwrap(), 0);
        let parse = before - store.get_fuel().unwrap();
        let before = store.get_fuel().unwrap();
        assert_eq!(read.call(&mut store, (len, 0)).unwrap() & 0xff, 0);
        let both = before - store.get_fuel().unwrap();
        println!("the {name} request, {len} bytes: JSON accepted {parse} fuel, and read {both}");
    }
}

/// `world_speed`'s bare column for several builds of the runtime side by side in one process: the three cases of
/// each build (`REMIT_RT_ARTIFACTS`, paths separated by commas; the committed artifact when unset) called bare,
/// each module instantiated `REMIT_SPEED_INSTANCES` times (4), all interleaved in one loop (batches of 50,
/// `REMIT_SPEED_ROUNDS` rounds, 300), so that builds are compared under the same load rather than in runs apart.
/// A module's time depends on where its code lands (the same artifact instantiated twice in one process gave (a)
/// 1.24 and 1.29, each steady within ±0.01 over its rounds), so each build's medians pool its instances; then (a)
/// and (b) per build, and (a) per instance (the spread of that placement).
/// `REMIT_RT_ARTIFACTS=old.wasm,new.wasm cargo test --release --test rt_decide -- --ignored --nocapture world_speed_builds`.
#[test]
#[ignore]
fn world_speed_builds() {
    use std::time::Instant;
    let env = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (rounds, instances) = (env("REMIT_SPEED_ROUNDS", 300), env("REMIT_SPEED_INSTANCES", 4));
    let paths: Vec<String> =
        std::env::var("REMIT_RT_ARTIFACTS").map(|v| v.split(',').map(str::to_string).collect()).unwrap_or_default();
    let artifacts: Vec<(String, Vec<u8>)> = if paths.is_empty() {
        vec![("committed".to_string(), remit_module::RUNTIME.to_vec())]
    } else {
        paths.iter().map(|p| (p.clone(), std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}")))).collect()
    };
    let literal = "tool refund(order: string, amount: money)\nmandate desk for \"user:alice\" {\n  holder \"agent:desk\"\n  allow refund where args.order == \"order-1\" and args.amount <= 120 EUR and args.order in [\"order-1\", \"order-2\"]\n  forbid refund where args.order == \"order-9\"\n}\n";
    let world = "resource order {\n  owner: string\n  total: money\n}\nsubject agent {\n  teams: set<string>\n}\nrelation member_of(string, string)\ntool refund(order: string, amount: money)\nmandate desk for \"user:alice\" {\n  holder \"agent:desk\"\n  allow refund where resource.owner == principal and args.amount <= resource.total and subject.teams contains \"refunds\"\n  forbid refund where member_of(subject, \"team:suspended\")\n}\n";
    let literal_request = br#"{"subject":{"id":"agent:desk"},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1"},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z"}}"#.to_vec();
    let world_request = br#"{"subject":{"id":"agent:desk","properties":{"teams":["refunds","billing"]}},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1","properties":{"owner":"user:alice","total":"120.00 EUR"}},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z","relations":{"member_of":[{"args":["agent:desk","team:suspended"],"holds":false}]}}}"#.to_vec();
    let program = |source: &str| support::examples::compile(&[("p.remit".to_string(), source.to_string())]);
    let (literal, world) = (program(literal), program(world));
    let cases = [(&literal, &literal_request), (&literal, &world_request), (&world, &world_request)];
    let engine = wasmtime::Engine::default();
    // Per build, per instance, per case: the module bare.
    let mut modules: Vec<Vec<Vec<support::wasm::Wasm>>> = artifacts
        .iter()
        .map(|(_, artifact)| {
            let linked: Vec<Vec<u8>> = cases
                .iter()
                .map(|(program, _)| {
                    let image = remit_lang::wasm::image::write(program).unwrap();
                    remit_module::link_image(artifact, &image, None).unwrap()
                })
                .collect();
            (0..instances)
                .map(|_| {
                    cases
                        .iter()
                        .zip(&linked)
                        .map(|((program, request), bytes)| {
                            let mut module = support::wasm::Wasm::new(&engine, bytes);
                            assert_eq!(module.decide(request), remit_lang::eval::decide(program, request).to_json());
                            module
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let batch = 50;
    // Per build, per instance, per case.
    let mut samples: Vec<Vec<[Vec<f64>; 3]>> = vec![vec![Default::default(); instances]; artifacts.len()];
    for _ in 0..rounds {
        for (b, build) in modules.iter_mut().enumerate() {
            for (i, instance) in build.iter_mut().enumerate() {
                for (k, module) in instance.iter_mut().enumerate() {
                    let request = cases[k].1;
                    let start = Instant::now();
                    for _ in 0..batch {
                        std::hint::black_box(module.decide(request).len());
                    }
                    samples[b][i][k].push(start.elapsed().as_nanos() as f64 / batch as f64);
                }
            }
        }
    }
    println!("| build | literals, own request | literals, world's request | world | (a) | (b) | (a) per instance |");
    println!("|---|---|---|---|---|---|---|");
    for (b, (name, _)) in artifacts.iter().enumerate() {
        let per_instance: Vec<String> = samples[b]
            .iter_mut()
            .map(|cases| format!("{:.3}", median(&mut cases[2]) / median(&mut cases[0])))
            .collect();
        let m: Vec<f64> = (0..3)
            .map(|k| {
                let mut pooled: Vec<f64> = samples[b].iter().flat_map(|cases| cases[k].iter().copied()).collect();
                median(&mut pooled)
            })
            .collect();
        println!(
            "| {name} | {:.0} ns | {:.0} ns | {:.0} ns | {:.3} | {:.3} | {} |",
            m[0],
            m[1],
            m[2],
            m[2] / m[0],
            m[2] / m[1],
            per_instance.join(", ")
        );
    }
}

/// `world_fuel`'s swaps in time: the literal policy and each policy with one of `world_speed`'s world atoms in
/// place of its literal one (then all four: `world_speed`'s world policy), all on the world's request, the modules
/// called bare, interleaved in batches of 50, medians of `REMIT_SPEED_ROUNDS` rounds (300): what each world atom
/// costs beyond its literal twin, in nanoseconds. `REMIT_RT_ARTIFACT` for another build of the runtime.
/// `cargo test --release --test rt_decide -- --ignored --nocapture world_atom_speed`.
#[test]
#[ignore]
fn world_atom_speed() {
    use std::time::Instant;
    let rounds: usize = std::env::var("REMIT_SPEED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let world_request = br#"{"subject":{"id":"agent:desk","properties":{"teams":["refunds","billing"]}},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1","properties":{"owner":"user:alice","total":"120.00 EUR"}},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z","relations":{"member_of":[{"args":["agent:desk","team:suspended"],"holds":false}]}}}"#.to_vec();
    let declarations = "resource order {\n  owner: string\n  total: money\n}\nsubject agent {\n  teams: set<string>\n}\nrelation member_of(string, string)\ntool refund(order: string, amount: money)\n";
    let atoms: [[&str; 2]; 4] = [
        ["args.order == \"order-1\"", "resource.owner == principal"],
        ["args.amount <= 120 EUR", "args.amount <= resource.total"],
        ["args.order in [\"order-1\", \"order-2\"]", "subject.teams contains \"refunds\""],
        ["args.order == \"order-9\"", "member_of(subject, \"team:suspended\")"],
    ];
    let engine = wasmtime::Engine::default();
    let module_of = |pick: [usize; 4]| {
        let text = format!(
            "{declarations}mandate desk for \"user:alice\" {{\n  holder \"agent:desk\"\n  allow refund where {} and {} and {}\n  forbid refund where {}\n}}\n",
            atoms[0][pick[0]], atoms[1][pick[1]], atoms[2][pick[2]], atoms[3][pick[3]]
        );
        let program = support::examples::compile(&[("p.remit".to_string(), text)]);
        let mut module = support::wasm::Wasm::new(&engine, &linked(&program));
        assert_eq!(module.decide(&world_request), remit_lang::eval::decide(&program, &world_request).to_json());
        module
    };
    let mut picks = vec![[0; 4]];
    for k in 0..4 {
        let mut pick = [0; 4];
        pick[k] = 1;
        picks.push(pick);
    }
    picks.push([1; 4]);
    let mut modules: Vec<_> = picks.iter().map(|&pick| module_of(pick)).collect();
    let batch = 50;
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); modules.len()];
    for _ in 0..rounds {
        for (k, module) in modules.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..batch {
                std::hint::black_box(module.decide(&world_request).len());
            }
            samples[k].push(start.elapsed().as_nanos() as f64 / batch as f64);
        }
    }
    let m: Vec<f64> = samples.iter_mut().map(|v| median(v)).collect();
    println!("the literal policy on the world's request: {:.0} ns", m[0]);
    for k in 0..4 {
        println!("  `{}` for `{}`: {:+.0} ns", atoms[k][1], atoms[k][0], m[k + 1] - m[0]);
    }
    println!("  all of world_speed's: {:+.0} ns", m[5] - m[0]);
}

/// What accepting and reading `world_speed`'s two requests takes in time (where `world_fuel` counts fuel): the bare
/// artifact's test exports `rt_json_validate` (the JSON accepted) and `rt_request_decode` (accepted, then the
/// request's fields read), each request in batches of 100 calls, interleaved, medians of 400 rounds (an empty call,
/// `rt_input`, beside them). `REMIT_RT_ARTIFACT` for another build of the runtime.
/// `cargo test --release --test rt_decide -- --ignored --nocapture world_parse_speed`.
#[test]
#[ignore]
fn world_parse_speed() {
    use std::time::Instant;
    use wasmtime::{Instance, Module, Store, TypedFunc};
    let literal_request = br#"{"subject":{"id":"agent:desk"},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1"},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z"}}"#.to_vec();
    let world_request = br#"{"subject":{"id":"agent:desk","properties":{"teams":["refunds","billing"]}},"action":{"name":"refund","arguments":{"order":"order-1","amount":"40.00 EUR"}},"resource":{"id":"order-1","properties":{"owner":"user:alice","total":"120.00 EUR"}},"context":{"mandate":"desk","now":"2026-12-07T10:00:00Z","relations":{"member_of":[{"args":["agent:desk","team:suspended"],"holds":false}]}}}"#.to_vec();
    let engine = wasmtime::Engine::default();
    let artifact = other_artifact().unwrap_or_else(|| remit_module::RUNTIME.to_vec());
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &Module::new(&engine, &artifact).unwrap(), &[]).unwrap();
    let memory = instance.get_memory(&mut store, "memory").unwrap();
    let input_at: TypedFunc<(), i32> = instance.get_typed_func(&mut store, "rt_input").unwrap();
    let validate: TypedFunc<i32, i32> = instance.get_typed_func(&mut store, "rt_json_validate").unwrap();
    let read: TypedFunc<(i32, i32), i32> = instance.get_typed_func(&mut store, "rt_request_decode").unwrap();
    let input = input_at.call(&mut store, ()).unwrap() as usize;
    let requests = [&literal_request, &world_request];
    let batch = 100;
    // Per request: the empty call, the JSON accepted, accepted and read.
    let mut samples: [[Vec<f64>; 3]; 2] = Default::default();
    for _ in 0..400 {
        for (r, request) in requests.iter().enumerate() {
            memory.write(&mut store, input, request).unwrap();
            let len = request.len() as i32;
            let mut time = |f: &mut dyn FnMut(&mut Store<()>) -> i32| {
                let start = Instant::now();
                for _ in 0..batch {
                    std::hint::black_box(f(&mut store));
                }
                start.elapsed().as_nanos() as f64 / batch as f64
            };
            samples[r][0].push(time(&mut |s| input_at.call(s, ()).unwrap()));
            samples[r][1].push(time(&mut |s| validate.call(s, len).unwrap()));
            samples[r][2].push(time(&mut |s| read.call(s, (len, 0)).unwrap()));
        }
    }
    println!("| request | bytes | empty call | JSON accepted | accepted and read |");
    println!("|---|---|---|---|---|");
    for (r, name) in ["literals'", "world's"].iter().enumerate() {
        let [empty, accepted, read] = &mut samples[r];
        println!(
            "| {name} | {} | {:.0} ns | {:.0} ns | {:.0} ns |",
            requests[r].len(),
            median(empty),
            median(accepted),
            median(read)
        );
    }
}
