//! Timestamps in requests (docs/requests.md, "Timestamps"; issue 28, item 4): every timestamp of every corpus request
//! (the examples and tests/semantics: `context.now`, approvals' `issued_at` / `expires_at`, timestamp arguments) is
//! spelled again — the same instant with a fraction of zeros, an offset, lowercase `t`/`z`; a nanosecond and half a
//! second later or earlier; and near misses the reading refuses (a leap second, a tenth fractional digit, an offset
//! without its colon, a space for `T`). On each variant the interpreter, the runtime natively and the linked module in
//! wasmtime write the same bytes, and a spelling of the same instant decides as the original does.

mod support;

use remit_lang::native::Native;
use remit_lang::value::{format_instant, parse_instant, NANOS_PER_SECOND};
use serde_json::Value;
use support::wasm::Wasm;
use wasmtime::Engine;

/// The same instant as `text` (a whole-second UTC timestamp), written otherwise.
fn same_instant(text: &str) -> Vec<String> {
    let nanos = parse_instant(text).unwrap();
    let whole = &text[..19];
    let seconds = nanos.div_euclid(NANOS_PER_SECOND);
    // Written at +05:30 and at -23:59: the wall clock moves, the instant does not.
    let at = |offset: i128, zone: &str| {
        let local = format_instant((seconds + offset) * NANOS_PER_SECOND);
        format!("{}{zone}", &local[..19])
    };
    vec![
        format!("{whole}.000Z"),
        format!("{whole}.000000000Z"),
        format!("{}z", whole.replacen('T', "t", 1)),
        format!("{whole}-00:00"),
        at(5 * 3600 + 1800, "+05:30"),
        at(-(23 * 3600 + 59 * 60), "-23:59"),
    ]
}

/// Other instants near `text`, and spellings no engine may accept.
fn other_spellings(text: &str) -> Vec<String> {
    let nanos = parse_instant(text).unwrap();
    let whole = &text[..19];
    let mut out: Vec<String> =
        [1, -1, NANOS_PER_SECOND / 2, -NANOS_PER_SECOND / 2].iter().map(|d| format_instant(nanos + d)).collect();
    out.extend([
        format!("{}:60Z", &whole[..16]),
        format!("{whole}.0000000000Z"),
        format!("{whole}+0000"),
        format!("{whole}.Z"),
        format!("{whole}.5"),
        whole.replacen('T', " ", 1) + "Z",
    ]);
    out
}

/// Every JSON pointer to a string of `value` that is a whole-second UTC timestamp.
fn timestamps(value: &Value, at: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) if s.len() == 20 && parse_instant(s).is_some() => out.push((at, s.clone())),
        Value::Object(map) => {
            for (key, v) in map {
                timestamps(v, format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                timestamps(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn respelled(request: &Value, pointer: &str, text: &str) -> Vec<u8> {
    let mut value = request.clone();
    *value.pointer_mut(pointer).unwrap() = Value::String(text.to_string());
    value.to_string().into_bytes()
}

/// A decision without the request's own values (`failed.value` echoes an attribute as written).
fn without_values(decision: &str) -> String {
    let mut value: Value = serde_json::from_str(decision).unwrap();
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("value");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value.to_string()
}

/// Whether `pointer` is inside a presented approval whose id another one shares.
fn duplicated(request: &Value, pointer: &str) -> bool {
    let Some(rest) = pointer.strip_prefix("/context/approvals/") else { return false };
    let index = rest.split('/').next().unwrap_or_default();
    let id = request.pointer(&format!("/context/approvals/{index}/id"));
    let approvals = request.pointer("/context/approvals").and_then(Value::as_array);
    id.is_some() && approvals.is_some_and(|a| a.iter().filter(|x| x.get("id") == id).count() > 1)
}

#[test]
fn every_engine_reads_every_spelling_of_every_timestamp_alike() {
    let engine = Engine::default();
    let (mut compared, mut same, mut refused) = (0, 0, 0);
    let mut failures = Vec::new();
    for unit in support::corpus() {
        let mut native = Native::new(&unit.program).unwrap();
        let mut module = Wasm::new(&engine, &remit_lang::wasm::compile(&unit.program).unwrap());
        for bytes in &unit.requests {
            let Ok(request) = serde_json::from_slice::<Value>(bytes) else { continue };
            let original = remit_lang::eval::decide(&unit.program, bytes).to_json();
            let mut found = Vec::new();
            timestamps(&request, String::new(), &mut found);
            for (pointer, text) in found {
                let equal = same_instant(&text);
                let others = other_spellings(&text);
                for (k, spelling) in equal.iter().chain(&others).enumerate() {
                    let variant = respelled(&request, &pointer, spelling);
                    let expected = remit_lang::eval::decide(&unit.program, &variant).to_json();
                    let (got_native, got_module) = (native.decide(&variant), module.decide(&variant));
                    compared += 1;
                    if got_native != expected.as_bytes() || got_module != expected {
                        failures.push(format!(
                            "{} {pointer} = {spelling}\n  interpreter: {expected}\n  native:      {}\n  module:      {got_module}",
                            unit.name,
                            String::from_utf8_lossy(&got_native)
                        ));
                    }
                    // Outside the arguments (whose spelling is part of the digest an approval binds), and not in
                    // an approval presented twice (copies of one id must be equal as JSON, requests.md).
                    if k < equal.len() && pointer.starts_with("/context/") && !duplicated(&request, &pointer) {
                        same += 1;
                        if without_values(&expected) != without_values(&original) {
                            failures.push(format!(
                                "{} {pointer}: {spelling} is {text}, but decides otherwise\n  {text}: {original}\n  {spelling}: {expected}",
                                unit.name
                            ));
                        }
                    }
                    // `now` is named malformed exactly when it is spelled in one of the refused ways (the last six).
                    if pointer == "/context/now" {
                        let named = expected.contains(r#"{"field":"context.now","problem":"malformed"}"#);
                        let refusable = k >= equal.len() + 4;
                        refused += usize::from(named);
                        if named != refusable {
                            failures.push(format!("{} now = {spelling}: named {named}: {expected}", unit.name));
                        }
                    }
                }
            }
        }
    }
    let shown: Vec<&String> = failures.iter().take(6).collect();
    assert!(failures.is_empty(), "{} of {compared} variants fail; first:\n{shown:#?}", failures.len());
    // Every unit's requests carry `now`; the refused spellings of it were met, and the same-instant ones.
    assert!(compared > 5_000 && same > 2_000 && refused > 500, "{compared} compared, {same} same, {refused} refused");
}
