//! The output writer: a cursor over a fixed buffer that never writes past it. A write that does not fit writes
//! nothing, leaves the cursor where it was and sets the overflow flag, which callers check once at the end (so
//! output is never truncated JSON: an overflowing result is replaced, e.g. by the `decision.oversize` deny).
//! And the one JSON string writer (the interpreter's `write_string` in crates/remit-lang/src/eval/digest.rs), for any [`Sink`].

use crate::json::{Doc, ESCAPED, STRING};
use crate::{copy_short, Sink};

/// Writes into `buf` from its start.
#[derive(Debug)]
pub struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
    overflow: bool,
}

impl<'a> Out<'a> {
    pub fn new(buf: &'a mut [u8]) -> Out<'a> {
        Out { buf, pos: 0, overflow: false }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Whether a write did not fit.
    pub fn overflow(&self) -> bool {
        self.overflow
    }

    /// Forgets everything written and the overflow (to write a smaller answer instead).
    pub fn clear(&mut self) {
        self.pos = 0;
        self.overflow = false;
    }

    /// What was written.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.pos).unwrap_or(&[])
    }
}

impl<'a> Sink for Out<'a> {
    // Out of line: a decision writes from dozens of places, and one copy of this code keeps the module's hot code
    // small (instruction cache misses, not instructions, were what the decision paid for; docs/module-v2.md).
    #[inline(never)]
    fn write(&mut self, bytes: &[u8]) {
        let end = self.pos.wrapping_add(bytes.len());
        match self.buf.get_mut(self.pos..end) {
            Some(dst) if end >= self.pos => {
                copy_short(dst, bytes);
                self.pos = end;
            }
            _ => self.overflow = true,
        }
    }

    fn byte(&mut self, byte: u8) {
        match self.buf.get_mut(self.pos) {
            Some(dst) => {
                *dst = byte;
                self.pos += 1;
            }
            None => self.overflow = true,
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The escape of `byte` in a JSON string, if it needs one: `"` and `\` with a backslash, the short forms JSON has,
/// other control characters `\u00xx`.
#[inline(always)]
fn escape(byte: u8) -> Option<([u8; 6], usize)> {
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        b'\n' => b'n',
        b'\t' => b't',
        b'\r' => b'r',
        0x08 => b'b',
        0x0c => b'f',
        0x00..=0x1f => {
            let hi = HEX.get(usize::from(byte >> 4)).copied().unwrap_or(b'0');
            let lo = HEX.get(usize::from(byte & 0xf)).copied().unwrap_or(b'0');
            return Some(([b'\\', b'u', b'0', b'0', hi, lo], 6));
        }
        _ => return None,
    };
    Some(([b'\\', short, 0, 0, 0, 0], 2))
}

/// Writes the unescaped string `text` as JSON: runs of plain bytes at once, escapes as needed. Everything but `"`,
/// `\` and control characters (DEL and non-ASCII included) is written as is.
pub fn write_string(out: &mut impl Sink, text: &[u8]) {
    out.byte(b'"');
    write_escaped(out, text);
    out.byte(b'"');
}

/// [`write_string`] without the quotes.
pub fn write_escaped(out: &mut impl Sink, text: &[u8]) {
    let mut run = 0;
    let mut i = 0;
    while i < text.len() {
        // Eight bytes at a time up to the first byte that needs an escape (most strings have none).
        if let Some(word) = text.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
            match first_special(u64::from_le_bytes(word)) {
                8 => {
                    i += 8;
                    continue;
                }
                n => i += n,
            }
        }
        if let Some((esc, len)) = text.get(i).and_then(|&b| escape(b)) {
            out.write(text.get(run..i).unwrap_or(&[]));
            out.write(esc.get(..len).unwrap_or(&[]));
            run = i + 1;
        }
        i += 1;
    }
    out.write(text.get(run..).unwrap_or(&[]));
}

/// The index of the first byte of the little-endian word `x` that [`escape`] escapes (`"`, `\`, below 0x20), 8
/// when there is none. Bit 7 of a byte of `special` is set when that byte is below 0x20 or zero after the xor with
/// `"` or `\` (a borrow), masked by `!x` so a byte past ASCII is never flagged; a borrow only runs upwards, so the
/// lowest flagged byte is exact.
#[inline(always)]
fn first_special(x: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    let special = (x.wrapping_sub(ONES * 0x20) & !x
        | quote.wrapping_sub(ONES) & !quote
        | backslash.wrapping_sub(ONES) & !backslash)
        & HIGH;
    (special.trailing_zeros() / 8) as usize
}

/// Writes the string token `tok` as [`write_string`] writes its unescaped content; `null` for another token.
pub fn write_string_tok(out: &mut impl Sink, doc: &Doc<'_>, tok: u32) {
    let t = doc.token(tok);
    if t.kind() != STRING {
        out.write(b"null");
    } else if t.flags() & ESCAPED == 0 {
        write_string(out, doc.raw(tok));
    } else {
        out.byte(b'"');
        for b in doc.text(tok) {
            match escape(b) {
                Some((esc, len)) => out.write(esc.get(..len).unwrap_or(&[])),
                None => out.byte(b),
            }
        }
        out.byte(b'"');
    }
}

/// The bytes [`write_string_tok`] writes between the quotes of the string token `tok` (escaped minimally), one by
/// one: for comparing the JSON of two strings without writing them.
pub fn escaped<'d>(doc: &Doc<'d>, tok: u32) -> impl Iterator<Item = u8> + 'd {
    doc.text(tok).flat_map(|b| {
        let (bytes, len) = escape(b).unwrap_or(([b, 0, 0, 0, 0, 0], 1));
        bytes.into_iter().take(len)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_of_every_short_length() {
        let src: Vec<u8> = (1..=40).collect();
        for len in 0..=40 {
            let mut buf = [0u8; 64];
            let mut out = Out::new(&mut buf);
            out.byte(0xff);
            out.write(&src[..len]);
            out.byte(0xee);
            let mut expected = vec![0xff];
            expected.extend_from_slice(&src[..len]);
            expected.push(0xee);
            assert_eq!(out.written(), &expected[..], "{len}");
        }
    }

    #[test]
    fn a_write_that_does_not_fit_writes_nothing() {
        let mut buf = [0u8; 8];
        let mut out = Out::new(&mut buf);
        out.write(b"abcde");
        out.write(b"fghi");
        assert!(out.overflow());
        assert_eq!(out.written(), b"abcde");
        out.write(b"xyz");
        out.byte(b'!');
        assert_eq!(out.written(), b"abcdexyz");
        out.byte(b'?');
        assert_eq!(out.len(), 8);
    }

    #[test]
    fn strings_are_escaped_as_byte_by_byte() {
        // Every byte at every position of a word, among plain bytes and escapes.
        let plain = |text: &[u8]| {
            let mut json = vec![b'"'];
            for &b in text {
                match escape(b) {
                    Some((esc, len)) => json.extend_from_slice(&esc[..len]),
                    None => json.push(b),
                }
            }
            json.push(b'"');
            json
        };
        for b in 0..=255u8 {
            for at in 0..20 {
                for len in [at + 1, at + 3, 20] {
                    let mut text: Vec<u8> = (0..len).map(|i| "abc\\é\"z\n".as_bytes()[i % 8]).collect();
                    text[at] = b;
                    let mut buf = [0u8; 256];
                    let mut out = Out::new(&mut buf);
                    write_string(&mut out, &text);
                    assert_eq!(out.written(), &plain(&text)[..], "{b:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn strings_are_escaped_minimally() {
        let mut buf = [0u8; 128];
        let mut out = Out::new(&mut buf);
        write_string(&mut out, "q\" b\\ n\n t\t r\r b\u{8} f\u{c} nul\u{0} us\u{1f} del\u{7f} / é".as_bytes());
        assert_eq!(
            out.written(),
            "\"q\\\" b\\\\ n\\n t\\t r\\r b\\b f\\f nul\\u0000 us\\u001f del\u{7f} / é\"".as_bytes()
        );
        assert!(!out.overflow());
    }
}
