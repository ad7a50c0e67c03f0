//! The argument digest of `binds arguments` approvals, the twin of `crates/remit-lang/src/eval/digest.rs`: `sha256:` + lowercase hex
//! SHA-256 of the canonical JSON of `{"arguments": A, "tool": T}` (docs/requests.md). The canonical text is hashed
//! as it is written, never held whole:
//! - `null`, `true`, `false` as such;
//! - numbers as serde_json with `arbitrary_precision` prints them: the text as written, except that the exponent
//!   marker is written `e` and gains a `+` when it has no sign (`1E3` → `1e+3`);
//! - strings re-escaped minimally ([`crate::out::write_string`]);
//! - arrays in order; objects with their entries sorted by the unescaped key bytes, and of equal keys only the last
//!   (as serde_json's map keeps it; [`crate::json::parse`] rejects duplicates, so only other tapes have them).
//!
//! Objects are sorted in a key buffer the caller provides ([`crate::json::capacity`] of the input is always
//! enough: each object on the current path holds its keys there). Recursion follows the nesting, which the parser
//! bounds at 64; a deeper tape (not from the parser) is written as `null` below that depth.

use crate::json::{merge_sort, Doc, ARRAY, FALSE, MAX_DEPTH, NULL, NUMBER, OBJECT, STRING, TRUE};
use crate::out::{write_string, write_string_tok};
use crate::sha256::Sha256;
use crate::{copy, Sink};

/// `sha256:<64 lowercase hex>` of `tool` (raw UTF-8) and the value `args` of `doc` (`None`: `{}`). `false` when the
/// key buffer was too small for an object (never for a tape of [`crate::json::parse`] with as many key slots).
pub fn argument_digest(doc: &Doc<'_>, args: Option<u32>, tool: &[u8], keys: &mut [u32]) -> ([u8; 71], bool) {
    let mut h = Sha256::new();
    h.write(b"{\"arguments\":");
    let complete = match args {
        Some(tok) => write_canonical(&mut h, doc, tok, keys, 0),
        None => {
            h.write(b"{}");
            true
        }
    };
    h.write(b",\"tool\":");
    write_string(&mut h, tool);
    h.write(b"}");
    let hash = h.finish();
    let mut out = [0u8; 71];
    copy(&mut out, b"sha256:");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.get_mut(7..).unwrap_or(&mut []).chunks_exact_mut(2).zip(hash) {
        if let [hi, lo] = pair {
            *hi = HEX[usize::from(byte >> 4)];
            *lo = HEX[usize::from(byte & 0xf)];
        }
    }
    (out, complete)
}

/// Writes the canonical JSON of the value `tok`; `false` when `keys` was too small for an object (which is then
/// written unsorted).
pub fn write_canonical(out: &mut impl Sink, doc: &Doc<'_>, tok: u32, keys: &mut [u32], depth: usize) -> bool {
    let t = doc.token(tok);
    match t.kind() {
        NULL => out.write(b"null"),
        TRUE => out.write(b"true"),
        FALSE => out.write(b"false"),
        NUMBER => write_number(out, doc.raw(tok)),
        STRING => write_string_tok(out, doc, tok),
        ARRAY if depth < MAX_DEPTH => {
            out.byte(b'[');
            let mut complete = true;
            let mut item = tok + 1;
            let mut first = true;
            while item < t.next {
                if !first {
                    out.byte(b',');
                }
                first = false;
                complete &= write_canonical(out, doc, item, keys, depth + 1);
                item = doc.token(item).next;
            }
            out.byte(b']');
            return complete;
        }
        OBJECT if depth < MAX_DEPTH => {
            let mut len = 0usize;
            let mut k = tok + 1;
            let mut complete = true;
            while k < t.next {
                match keys.get_mut(len) {
                    Some(slot) => *slot = k,
                    None => complete = false,
                }
                len += 1;
                k = doc.token(doc.token(k).next).next;
            }
            if !complete {
                return false;
            }
            let (mine, rest) = keys.split_at_mut(len.min(keys.len()));
            // Equal keys keep their input order, so the last of them is the one written. `rest` is free until the
            // values are written: the sort's buffer.
            merge_sort(mine, rest, |a, b| doc.text_cmp(a, b).then(a.cmp(&b)).is_lt());
            out.byte(b'{');
            let mut first = true;
            for (i, &key) in mine.iter().enumerate() {
                if let Some(&later) = mine.get(i + 1) {
                    if doc.text_eq(key, later) {
                        continue;
                    }
                }
                if !first {
                    out.byte(b',');
                }
                first = false;
                write_string_tok(out, doc, key);
                out.byte(b':');
                complete &= write_canonical(out, doc, doc.token(key).next, rest, depth + 1);
            }
            out.byte(b'}');
            return complete;
        }
        _ => out.write(b"null"),
    }
    true
}

/// A number's text with the exponent marker written `e` and a `+` added when the exponent has no sign.
fn write_number(out: &mut impl Sink, text: &[u8]) {
    match text.iter().position(|&b| b == b'e' || b == b'E') {
        None => out.write(text),
        Some(e) => {
            out.write(text.get(..e).unwrap_or(&[]));
            out.byte(b'e');
            let rest = text.get(e + 1..).unwrap_or(&[]);
            if !matches!(rest.first(), Some(b'+' | b'-')) {
                out.byte(b'+');
            }
            out.write(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Buffers;
    use crate::out::Out;

    fn canonical(text: &str) -> String {
        let mut buffers = Buffers::new();
        let (doc, keys) = buffers.parse(text.as_bytes()).unwrap();
        let mut buf = vec![0u8; 2 * text.len() + 16];
        let mut out = Out::new(&mut buf);
        assert!(write_canonical(&mut out, &doc, 0, keys, 0));
        assert!(!out.overflow());
        String::from_utf8(out.written().to_vec()).unwrap()
    }

    #[test]
    fn keys_are_sorted_by_bytes_at_every_depth() {
        assert_eq!(
            canonical(r#"{"b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "B": true}, "é": null, "Z": "s"}"#),
            r#"{"Z":"s","a":{"B":true,"z":[3,{"x":2,"y":1}]},"b":1,"é":null}"#
        );
    }

    #[test]
    fn numbers_are_written_as_in_the_request() {
        assert_eq!(
            canonical("[1, -2, 12.50, 1.0, 18446744073709551615, 1e3, 1E20, 1.5e-7, 0.1, -0]"),
            "[1,-2,12.50,1.0,18446744073709551615,1e+3,1e+20,1.5e-7,0.1,-0]"
        );
    }

    #[test]
    fn digest_of_fixed_cases() {
        let text = br#"{"amount": "25.00 USD", "merchant": "acme"}"#;
        let mut buffers = Buffers::new();
        let (doc, keys) = buffers.parse(text).unwrap();
        // Digests of the canonical texts, computed with `printf '%s' TEXT | sha256sum` (crates/remit-lang/src/eval/digest.rs).
        let (d, complete) = argument_digest(&doc, Some(0), b"pay", keys);
        assert!(complete);
        assert_eq!(&d[..], &b"sha256:4c32a2e75e970c681e0162da2416da6dc0bbec36565b866fe1b1edbec497f97f"[..]);
        let (d, _) = argument_digest(&doc, None, b"t", keys);
        assert_eq!(&d[..], &b"sha256:8fd627452e8a504048e4617df4e2cda85034bf48d3e7df4c3e2eb4a4acb0133e"[..]);
    }
}
