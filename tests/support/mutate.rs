//! Mutated requests for differential tests (tests/wasm_decide.rs, tests/rt_native.rs, tests/runtime_artifact.rs):
//! random JSON values with the strings and numbers requests trip on, one-value mutations of a request, and
//! text-level damage a JSON value cannot express.

/// The generator these inputs were fixed with (xorshift); tests/wasm_decide.rs, tests/rt_native.rs and
/// tests/runtime_artifact.rs name it `mutate::Rng`.
pub use super::rng::XorShift as Rng;

pub fn random_value(rng: &mut Rng, depth: u32) -> serde_json::Value {
    use serde_json::{json, Value};
    let strings = [
        "acme-grocer",
        "",
        "é",
        "a\"b",
        "back\\slash",
        "line\nbreak",
        "\u{1}",
        "100 USD",
        "75.00 USD",
        "100.000000001 USD",
        "12.50",
        "-0",
        "1e3",
        "2026-12-03T15:20:00Z",
        "2026-02-30T00:00:00Z",
        "900s",
        "+15m",
        "1é",
        "wallet",
        "agent:shopper",
        "op-1",
        "USD",
        "sha256:00",
        // Paths `under` refuses, blank identifiers (issue 7, items 6 and 9), negative money (item 5).
        "site/services/consulting/../../admin/",
        "a//b",
        "a/./b",
        "..",
        "a\\b",
        "a\u{0}b",
        "%2e%2E/%2F%5c%00%25",
        " ",
        "\t\u{a0}\u{3000}\u{2028}",
        "\u{200b}",
        "-1000.00 USD",
        "-0.00 USD",
        // Stop levels (issue 8, item 10).
        "quarantine",
        "pause",
        // RFC 3339 spellings (issue 28, item 4): JavaScript's milliseconds, offsets, lowercase, and near misses (a
        // leap second, a tenth fractional digit, an offset without its colon).
        "2026-12-03T15:20:00.000Z",
        "2026-12-03T15:19:59.999Z",
        "2026-12-03T16:20:00.5+01:00",
        "2026-12-03t15:20:00.000000001z",
        "2026-12-03T10:20:00-05:00",
        "2026-12-03T15:20:60Z",
        "2026-12-03T15:20:00.1234567891Z",
        "2026-12-03T15:20:00+0100",
    ];
    match rng.below(if depth > 2 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => {
            let numbers = [
                "0",
                "-1",
                "7",
                "100",
                "1.5",
                "12.50",
                "1e2",
                "-0",
                "18446744073709551616",
                "9223372036854775808",
                "-9223372036854775809",
                "0.1234567891",
            ];
            serde_json::from_str(numbers[rng.below(numbers.len())]).unwrap()
        }
        3..=5 => Value::String(strings[rng.below(strings.len())].to_string()),
        6 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth + 1)).collect()),
        7 => json!({ "id": random_value(rng, depth + 1), "kind": "commercial_terms", "mandate": "wallet" }),
        _ => {
            let keys = [
                "amount",
                "merchant",
                "id",
                "scopes",
                "mandate",
                "now",
                "kind",
                "x",
                "target",
                "operation_id",
                "level",
                "principal",
            ];
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(4) {
                map.insert(keys[rng.below(keys.len())].to_string(), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// Replaces, removes or adds one value somewhere in the request.
pub fn mutate(rng: &mut Rng, value: &mut serde_json::Value, depth: u32) {
    use serde_json::Value;
    match value {
        Value::Object(map) if !map.is_empty() && rng.below(4) != 0 => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.below(keys.len())];
            match rng.below(5) {
                0 => {
                    map.remove(key);
                }
                1 => {
                    map.insert(key.clone(), random_value(rng, depth));
                }
                _ => mutate(rng, map.get_mut(key).unwrap(), depth + 1),
            }
        }
        Value::Array(items) if !items.is_empty() && rng.below(3) != 0 => {
            let i = rng.below(items.len());
            mutate(rng, &mut items[i], depth + 1);
        }
        _ => *value = random_value(rng, depth),
    }
}

/// Text-level damage a JSON value cannot express: truncation, duplicate keys, invalid UTF-8, deep nesting.
pub fn damage(rng: &mut Rng, text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    match rng.below(6) {
        0 => bytes.truncate(rng.below(bytes.len() + 1)),
        1 => {
            let at = rng.below(bytes.len());
            bytes[at] = (rng.next() & 0xff) as u8;
        }
        2 => {
            // A duplicate key inside the first object.
            if let Some(at) = text.find('{') {
                bytes.splice(at + 1..at + 1, br#""subject":{"id":"agent:other"},"#.iter().copied());
            }
        }
        3 => bytes = format!("{}{}{}", "[".repeat(70), text, "]".repeat(70)).into_bytes(),
        4 => bytes.extend_from_slice(b" x"),
        _ => bytes.insert(rng.below(bytes.len() + 1), 0xc3),
    }
    bytes
}
