//! The runtime crate's decisions and tool listings (crates/remit-rt/src/decide.rs, visible.rs), natively over each
//! policy's image, against the interpreter byte for byte: on every request of the corpus, the garbage inputs, and
//! mutated requests (`REMIT_DIFF_ROUNDS` per unit, default 300).

mod support;

use remit::runtime::native::Native;

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
            let expected = remit::eval::decide(&unit.program, request).to_json();
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
            let expected = remit::eval::visible_tools(&unit.program, request).to_json();
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

/// The linked module (the runtime artifact + the image, `remit::wasm::link`) in wasmtime writes exactly what the
/// runtime writes natively: the same source code compiled twice.
#[test]
fn linked_modules_equal_the_native_engine() {
    let runtime = remit::runtime::Runtime::new().unwrap();
    let mut failures = Vec::new();
    let mut compared = 0;
    for unit in support::corpus() {
        let mut native = Native::new(&unit.program).unwrap();
        let wasm = remit::wasm::link(&unit.program).unwrap();
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
