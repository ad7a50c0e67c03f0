//! The argument digest that `binds arguments` approvals carry, and the one JSON string writer of the interpreter.
//! The canonical form has to be reproducible by gateways and by the wasm backend, so it is spelled out here rather
//! than left to a serializer: object keys sorted by byte order, no whitespace, strings escaped minimally, numbers exactly
//! as written in the request (serde_json's `arbitrary_precision` keeps their text).

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

/// `sha256:` + lowercase hex SHA-256 of the canonical JSON of `{"arguments": arguments, "tool": tool}`.
pub fn argument_digest(tool: &str, arguments: &Json) -> String {
    let mut text = String::from("{\"arguments\":");
    write_canonical(&mut text, arguments);
    text.push_str(",\"tool\":");
    write_string(&mut text, tool);
    text.push('}');
    let hash = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash {
        out.push(HEX[usize::from(byte >> 4)] as char);
        out.push(HEX[usize::from(byte & 0xf)] as char);
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn write_canonical(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(&n.to_string()),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Json::Object(map) => {
            // `str` orders by bytes, which for UTF-8 is also code point order.
            let mut entries: Vec<(&String, &Json)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_canonical(out, item);
            }
            out.push('}');
        }
    }
}

/// Writes `s` as a JSON string: only `"`, `\` and control characters are escaped, with the short forms where JSON
/// has them. Everything else, non-ASCII included, is written as is.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let code = c as u32 as usize;
                out.push_str("\\u00");
                out.push(HEX[code >> 4] as char);
                out.push(HEX[code & 0xf] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canonical_json(value: &Json) -> String {
        let mut out = String::new();
        write_canonical(&mut out, value);
        out
    }

    #[test]
    fn keys_are_sorted_by_bytes_at_every_depth() {
        let value: Json =
            serde_json::from_str(r#"{"b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "B": true}, "é": null, "Z": "s"}"#)
                .expect("test JSON parses");
        assert_eq!(canonical_json(&value), r#"{"Z":"s","a":{"B":true,"z":[3,{"x":2,"y":1}]},"b":1,"é":null}"#);
    }

    #[test]
    fn strings_are_escaped_minimally() {
        let value = json!("q\" b\\ n\n t\t r\r b\u{8} f\u{c} nul\u{0} us\u{1f} del\u{7f} / é ✓");
        assert_eq!(
            canonical_json(&value),
            "\"q\\\" b\\\\ n\\n t\\t r\\r b\\b f\\f nul\\u0000 us\\u001f del\u{7f} / é ✓\""
        );
    }

    #[test]
    fn numbers_are_written_as_in_the_request() {
        let value: Json = serde_json::from_str("[1, -2, 12.50, 1.0, 18446744073709551615, 1e3, 1E20, 1.5e-7, 0.1, -0]")
            .expect("parses");
        // No float round trip: `12.50` keeps its trailing zero; an exponent gains its sign (`1e3` → `1e+3`).
        assert_eq!(canonical_json(&value), "[1,-2,12.50,1.0,18446744073709551615,1e+3,1e+20,1.5e-7,0.1,-0]");
    }

    #[test]
    fn digest_covers_tool_and_arguments_in_canonical_form() {
        let a: Json = serde_json::from_str(r#"{"amount": "25.00 USD", "merchant": "acme"}"#).expect("parses");
        let b: Json = serde_json::from_str(r#"{ "merchant":"acme","amount":"25.00 USD" }"#).expect("parses");
        assert_eq!(argument_digest("pay", &a), argument_digest("pay", &b));
        assert_ne!(argument_digest("pay", &a), argument_digest("refund", &a));
        // Digests of the canonical texts, computed with `printf '%s' TEXT | sha256sum`.
        assert_eq!(
            argument_digest("pay", &a),
            "sha256:4c32a2e75e970c681e0162da2416da6dc0bbec36565b866fe1b1edbec497f97f"
        );
        assert_eq!(
            argument_digest("t", &json!({})),
            "sha256:8fd627452e8a504048e4617df4e2cda85034bf48d3e7df4c3e2eb4a4acb0133e"
        );
    }
}
