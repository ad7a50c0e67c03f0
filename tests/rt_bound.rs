//! The work bound of module v2 (docs/module-v2.md, "The work bound"): every example request inflated to the input
//! limit in the shapes that drive the runtime's loops longest, measured in wasmtime fuel (deterministic).

mod support;

use serde_json::{json, Map, Value};

/// Under the input limit (`remit_rt::MAX_INPUT`, 262,144 bytes) with room for the compact JSON's rounding.
const TARGET: usize = 260_000;

/// `request` with `fill(i)` appended to the array at `path` (created when absent) until the request is as large as
/// the target.
fn grow(request: &Value, path: &[&str], fill: &dyn Fn(usize) -> Value) -> Vec<u8> {
    let mut out = request.clone();
    if place(&mut out, path).and_then(Value::as_array_mut).is_none() {
        return Vec::new();
    }
    let base = serde_json::to_vec(&out).unwrap().len();
    let item = serde_json::to_vec(&fill(1_000_000)).unwrap().len() + 1;
    let count = TARGET.saturating_sub(base) / item;
    place(&mut out, path).and_then(Value::as_array_mut).unwrap().extend((0..count).map(fill));
    serde_json::to_vec(&out).unwrap()
}

/// The value at `path`, made (an object on the way, an array at the end) where absent.
fn place<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut at = value;
    for (k, key) in path.iter().enumerate() {
        let empty = if k + 1 == path.len() { json!([]) } else { json!({}) };
        at = at.as_object_mut()?.entry(key.to_string()).or_insert(empty);
    }
    Some(at)
}

/// `request` with `fill(i)` as extra keys of the object at `path`.
fn widen(request: &Value, path: &[&str], fill: &dyn Fn(usize) -> (String, Value)) -> Vec<u8> {
    let mut out = request.clone();
    let mut at = &mut out;
    for key in path {
        let Some(next) = at.get_mut(*key) else { return Vec::new() };
        at = next;
    }
    let Some(object) = at.as_object_mut() else { return Vec::new() };
    let (k, v) = fill(1_000_000);
    let item = k.len() + serde_json::to_vec(&v).unwrap().len() + 4;
    let base = serde_json::to_vec(request).unwrap().len();
    let count = TARGET.saturating_sub(base) / item;
    let extra: Map<String, Value> = (0..count).map(fill).collect();
    object.extend(extra);
    serde_json::to_vec(&out).unwrap()
}

/// The inflated shapes of one request, named.
fn shapes(request: &[u8]) -> Vec<(String, Vec<u8>)> {
    let Ok(request) = serde_json::from_slice::<Value>(request) else { return Vec::new() };
    let mut out = Vec::new();
    let approvals = request["context"]["approvals"].as_array().cloned().unwrap_or_default();
    let template = approvals.first().cloned().unwrap_or_else(|| {
        json!({"id": "apr", "kind": "k", "mandate": request["context"]["mandate"], "issued_at": "2026-01-01T00:00:00Z",
               "expires_at": "2027-01-01T00:00:00Z", "consumed": false})
    });
    for (name, digest) in [("approvals, digest differs", true), ("approvals, consumed", false)] {
        let template = template.clone();
        out.push((
            name.to_string(),
            grow(&request, &["context", "approvals"], &move |i| {
                let mut a = template.clone();
                a["id"] = json!(format!("apr-{i:07}"));
                if digest {
                    a["digest"] = json!(format!("sha256:{:064x}", i));
                } else {
                    a["consumed"] = json!(true);
                }
                a
            }),
        ));
    }
    out.push((
        "scopes".into(),
        grow(&request, &["subject", "credential", "scopes"], &|i| json!(format!("scope.{i:07}"))),
    ));
    // Stops with ids on the request's mandate (each read at every mandate of the chain, for every tool listed).
    let mandate = request["context"]["mandate"].clone();
    out.push((
        "stops".into(),
        grow(
            &request,
            &["context", "stops"],
            &move |i| json!({"id": format!("STOP-{i:07}"), "level": "pause", "mandate": mandate}),
        ),
    ));
    if let Some(args) = request["action"]["arguments"].as_object() {
        for (key, value) in args {
            match value {
                Value::Array(items) => {
                    let first = items.first().cloned().unwrap_or(json!("x"));
                    out.push((
                        format!("argument `{key}`, elements"),
                        grow(&request, &["action", "arguments", key], &move |i| match &first {
                            Value::Number(_) => json!(i),
                            Value::String(s) => json!(format!("{s}{i:07}")),
                            other => other.clone(),
                        }),
                    ));
                }
                Value::String(s) => {
                    let mut long = request.clone();
                    let filler =
                        if s.contains('/') { "a/".repeat(TARGET / 2 - 500) } else { "a".repeat(TARGET - 1000) };
                    long["action"]["arguments"][key] = json!(format!("{s}{filler}"));
                    out.push((format!("argument `{key}`, long string"), serde_json::to_vec(&long).unwrap()));
                }
                _ => {}
            }
        }
    }
    out.push(("argument keys".into(), widen(&request, &["action", "arguments"], &|i| (format!("k{i:07}"), json!(i)))));
    out.push(("context keys".into(), widen(&request, &["context"], &|i| (format!("k{i:07}"), json!(i)))));
    out.push(("counters".into(), widen(&request, &["context", "counters"], &|i| (format!("c{i:07}"), json!(i)))));
    out.retain(|(_, bytes)| !bytes.is_empty() && bytes.len() <= remit_rt::MAX_INPUT);
    out
}

/// The most fuel module v2 may use on one of these inputs: the budget every other module runs with
/// (`remit_host::DEFAULT_FUEL`), so running v2 without a meter changes no answer on them, with a margin.
const BOUND: u64 = remit_host::DEFAULT_FUEL * 3 / 4;

/// Every request of every shipped example, inflated to the input limit in each shape, decided and listed by module v2
/// with its fuel metered (a budget far above the bound, so the count is exact): the decision equals the native
/// engine's, and the fuel stays under [`BOUND`]. The largest count per shape is printed
/// (`cargo test --release --test rt_bound -- --nocapture`, with the time of the unmetered module as the runtime loads
/// it). A loop whose trips are a product of the input's sizes shows
/// here: the approvals' grouping and the object-key sort did, at 105 and 129 million units.
#[test]
fn inflated_requests_stay_under_the_work_bound() {
    let limits = remit_host::Limits { fuel: 100 * BOUND, meter_bounded: true, ..Default::default() };
    let metering = remit_host::Runtime::with_limits(limits).unwrap();
    let runtime = remit_host::Runtime::new().unwrap();
    let mut worst: std::collections::BTreeMap<String, (u64, std::time::Duration, String)> = Default::default();
    let mut over = Vec::new();
    for name in support::examples::EXAMPLES {
        let program = support::examples::program(name);
        let module = remit_lang::wasm::link(&program).unwrap();
        let mut metered = std::sync::Arc::new(metering.load(&module).unwrap()).evaluator().unwrap();
        let loaded = std::sync::Arc::new(runtime.load(&module).unwrap());
        assert!(!loaded.metered(), "module v2 loads without a meter");
        let mut loaded = loaded.evaluator().unwrap();
        let mut native = remit_lang::native::Native::new(&program).unwrap();
        for (i, request) in support::examples::requests(&support::examples::dir(name)).iter().enumerate() {
            for (shape, bytes) in shapes(request) {
                for listing in [false, true] {
                    let (got, expected, fuel, time) = if listing {
                        let got = metered.visible_tools(&bytes);
                        let start = std::time::Instant::now();
                        loaded.visible_tools(&bytes);
                        let time = start.elapsed();
                        (got, native.visible_tools(&bytes), metered.fuel_used(), time)
                    } else {
                        let got = metered.decide(&bytes);
                        let start = std::time::Instant::now();
                        loaded.decide(&bytes);
                        let time = start.elapsed();
                        (got, native.decide(&bytes), metered.fuel_used(), time)
                    };
                    let what = format!("{shape}{}", if listing { " (listing)" } else { "" });
                    let at = format!("{name} #{} ({} bytes)", i + 1, bytes.len());
                    assert_eq!(got, expected, "{at}, {what}");
                    if fuel > BOUND {
                        over.push(format!("{at}, {what}: {fuel}"));
                    }
                    let entry = worst.entry(what.clone()).or_default();
                    if fuel > entry.0 {
                        *entry = (fuel, time, at);
                        if let Ok(dir) = std::env::var("REMIT_BOUND_DUMP") {
                            let file = format!("{what}.{name}.json").replace([' ', '`', ',', '(', ')'], "-");
                            std::fs::write(std::path::Path::new(&dir).join(file), &bytes).unwrap();
                        }
                    }
                }
            }
        }
    }
    println!("| shape | fuel | time as loaded (no fuel) | request |");
    println!("|---|---|---|---|");
    for (shape, (fuel, time, at)) in &worst {
        println!("| {shape} | {fuel} | {time:.1?} | {at} |");
    }
    assert!(over.is_empty(), "over the bound of {BOUND} units:\n{}", over.join("\n"));
}

/// A policy built to be slow at the heaviest weight that still runs unmetered ([`MAX_UNMETERED_WEIGHT`]): `rules`
/// grants of one tool, each `args.tags within` the same `set` strings, so each grant scans the request's whole set
/// against the whole list; and a request filling `tags` with those strings to the input limit.
fn heavy(rules: usize, set: usize) -> (remit_lang::ir::Program, Vec<u8>) {
    use std::fmt::Write;
    let list: Vec<String> = (0..set).map(|i| format!("\"t{i:03}\"")).collect();
    let mut text = String::from("tool ht(tags: set<string>) {\n  level draft\n}\n");
    text.push_str("mandate heavy for \"user:p\" {\n  holder \"agent:a\"\n  purpose \"p\"\n");
    for r in 0..rules {
        writeln!(text, "  allow ht where args.tags within [{}] and attempt < {}", list.join(", "), 1_000 + r).unwrap();
    }
    text.push_str("}\n");
    let program = support::examples::compile(&[("heavy.remit".to_string(), text)]);
    let base = json!({"subject": {"id": "agent:a"}, "action": {"name": "ht", "arguments": {"tags": []}},
        "resource": {"id": "r"}, "context": {"mandate": "heavy", "now": "2026-12-01T00:00:00Z", "attempt": 1}});
    let request = grow(&base, &["action", "arguments", "tags"], &|i| json!(format!("t{:03}", i % set)));
    (program, request)
}

/// The heavy policy at the weight limit runs unmetered, and what it costs at the input limit; one step heavier it is
/// metered. Printed: `cargo test --release --test rt_bound -- --nocapture heavy`.
#[test]
fn the_heaviest_unmetered_policy_at_the_input_limit() {
    use remit_host::MAX_UNMETERED_WEIGHT;
    let weight = |program: &remit_lang::ir::Program| {
        let bytes = remit_lang::wasm::image::write(program).unwrap();
        remit_rt::image::work_weight(&remit_rt::image::Image::new(&bytes).unwrap(), u64::MAX)
    };
    // The most rules of 30 strings under the limit.
    let set = 30;
    let mut rules = 1;
    while weight(&heavy(rules + 1, set).0) <= MAX_UNMETERED_WEIGHT {
        rules += 1;
    }
    let (program, request) = heavy(rules, set);
    let module = remit_lang::wasm::link(&program).unwrap();
    let runtime = remit_host::Runtime::new().unwrap();
    let loaded = std::sync::Arc::new(runtime.load(&module).unwrap());
    assert!(!loaded.metered(), "weight {} runs unmetered", weight(&program));
    let limits = remit_host::Limits { fuel: u64::MAX / 4, meter_bounded: true, ..Default::default() };
    let metering = remit_host::Runtime::with_limits(limits).unwrap();
    let mut metered = std::sync::Arc::new(metering.load(&module).unwrap()).evaluator().unwrap();
    let expected = remit_lang::eval::decide(&program, &request).to_json().into_bytes();
    assert_eq!(metered.decide(&request), expected);
    let fuel = metered.fuel_used();
    let mut loaded = loaded.evaluator().unwrap();
    let start = std::time::Instant::now();
    assert_eq!(loaded.decide(&request), expected);
    let time = start.elapsed();
    println!(
        "heavy: {rules} rules of {set} strings, weight {} of {MAX_UNMETERED_WEIGHT}, a {}-byte request: {fuel} fuel, {time:.1?} unmetered",
        weight(&program),
        request.len()
    );
    // One rule more is over the limit: metered.
    let (heavier, _) = heavy(rules + 1, set);
    assert!(runtime.load(&remit_lang::wasm::link(&heavier).unwrap()).unwrap().metered());
}
