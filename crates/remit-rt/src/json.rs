//! The JSON acceptance rule of docs/json.md, the twin of `src/json.rs`: strict RFC 8259, containers nested at most
//! [`MAX_DEPTH`] deep, no two keys of an object equal after unescaping, at most [`MAX_INPUT`] bytes. An accepted
//! document is described by a tape of [`Token`]s (one per value and one per object key, in document order) in a
//! buffer the caller provides: no allocator, no recursion (containers are tracked on a fixed stack of
//! [`MAX_DEPTH`] frames).
//!
//! The error kinds agree with `remit::json::validate` on every input with one fault. With several, the first one in
//! document order is reported, except that a duplicate among more than [`SMALL_OBJECT`] keys is found when its object
//! closes (by sorting), so a later syntax or depth fault inside that object is reported instead. Both are
//! `request.malformed`.

use crate::MAX_INPUT;

/// Deepest nesting accepted: the root container is at depth 1.
pub const MAX_DEPTH: usize = 64;

/// Objects with at most this many keys are checked for duplicates key by key (a Bloom filter of 64 bits first);
/// larger ones are also sorted when they close, so no input makes the check quadratic.
pub const SMALL_OBJECT: u32 = 16;

pub const NULL: u8 = 1;
pub const FALSE: u8 = 2;
pub const TRUE: u8 = 3;
pub const NUMBER: u8 = 4;
pub const STRING: u8 = 5;
pub const ARRAY: u8 = 6;
pub const OBJECT: u8 = 7;

/// [`Token::flags`]: the string contains at least one escape.
pub const ESCAPED: u8 = 1;

/// One value or object key. Offsets are relative to the start of the input.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token {
    /// [`NULL`] .. [`OBJECT`]; 0 for no token.
    pub kind: u8,
    /// [`ESCAPED`] on strings.
    pub flags: u8,
    /// Containers: elements of an array, entries of an object, saturated at `0xffff`.
    pub count: u16,
    /// Strings: after the opening quote; numbers and literals: their first byte; containers: the `[` or `{`.
    pub start: u32,
    /// Strings: the closing quote; numbers and literals: after their last byte; containers: after `]` or `}`.
    pub end: u32,
    /// The first token after this value and all its descendants; for a key, its value.
    pub next: u32,
}

/// Why bytes are not an acceptable document (`remit::json::JsonError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonError {
    Syntax,
    Depth,
    Duplicate,
    /// More than [`MAX_INPUT`] bytes, or more than the tape or key buffer given can hold.
    TooLarge,
}

/// Tokens (and key slots) enough for any input of `len` bytes, up to where [`parse`] stops. Every token starts on a
/// byte of its own, and every token but the root also follows a byte of its own: a `,` or `:`, or its container's
/// `[` or `{` when it is the first child, in which case the container's own second byte is its `]` or `}` — except
/// for containers still open, at most [`MAX_DEPTH`] at a time. Plus the slot taken for a value that turns out bad.
pub const fn capacity(len: usize) -> usize {
    (len + MAX_DEPTH + 1) / 2 + 2
}

/// An accepted document: the input and its tape.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    pub input: &'a [u8],
    pub tape: &'a [Token],
}

const NONE: Token = Token { kind: 0, flags: 0, count: 0, start: 0, end: 0, next: u32::MAX };

impl<'a> Doc<'a> {
    /// Token `i`, or a token of kind 0 when there is none.
    pub fn token(&self, i: u32) -> Token {
        match self.tape.get(i as usize) {
            Some(t) => *t,
            None => NONE,
        }
    }

    /// The raw bytes between a token's start and end (a string's content still escaped).
    pub fn raw(&self, i: u32) -> &'a [u8] {
        let t = self.token(i);
        self.input.get(t.start as usize..t.end as usize).unwrap_or(&[])
    }

    /// The unescaped bytes of a string token (nothing for another kind).
    pub fn text(&self, i: u32) -> Unescaped<'a> {
        let t = self.token(i);
        if t.kind != STRING {
            return Unescaped::new(&[]);
        }
        Unescaped::new(self.raw(i))
    }

    /// Whether the string tokens `a` and `b` have equal unescaped contents.
    pub fn text_eq(&self, a: u32, b: u32) -> bool {
        if (self.token(a).flags | self.token(b).flags) & ESCAPED == 0 {
            return self.raw(a) == self.raw(b);
        }
        self.text(a).eq(self.text(b))
    }

    /// Byte order of the unescaped contents of string tokens `a` and `b`.
    pub fn text_cmp(&self, a: u32, b: u32) -> core::cmp::Ordering {
        if (self.token(a).flags | self.token(b).flags) & ESCAPED == 0 {
            return self.raw(a).cmp(self.raw(b));
        }
        self.text(a).cmp(self.text(b))
    }

    /// The value of the entry of object `obj` whose unescaped key is `key`.
    pub fn get(&self, obj: u32, key: &[u8]) -> Option<u32> {
        let o = self.token(obj);
        if o.kind != OBJECT {
            return None;
        }
        let mut k = obj + 1;
        while k < o.next {
            let kt = self.token(k);
            let matches =
                if kt.flags & ESCAPED == 0 { self.raw(k) == key } else { self.text(k).eq(key.iter().copied()) };
            if matches {
                return Some(kt.next);
            }
            k = self.token(kt.next).next;
        }
        None
    }
}

/// The unescaped bytes of a string's raw content, which [`parse`] has accepted (on other bytes it yields something,
/// never panics).
#[derive(Clone, Debug)]
pub struct Unescaped<'a> {
    raw: &'a [u8],
    i: usize,
    /// UTF-8 bytes of a decoded `\u` escape still to yield, from the end.
    pending: [u8; 4],
    npending: usize,
}

impl<'a> Unescaped<'a> {
    pub fn new(raw: &'a [u8]) -> Unescaped<'a> {
        Unescaped { raw, i: 0, pending: [0; 4], npending: 0 }
    }
}

impl<'a> Iterator for Unescaped<'a> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if self.npending > 0 {
            self.npending -= 1;
            return self.pending.get(self.npending).copied();
        }
        let b = *self.raw.get(self.i)?;
        if b != b'\\' {
            self.i += 1;
            return Some(b);
        }
        let e = at(self.raw, self.i + 1);
        self.i += 2;
        let simple = match e {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => 0,
            other => other,
        };
        if e != b'u' {
            return Some(simple);
        }
        let unit = hex4(self.raw, self.i).unwrap_or(0xfffd);
        self.i += 4;
        let mut code = unit;
        if (0xD800..0xDC00).contains(&unit) {
            let low = hex4(self.raw, self.i + 2).unwrap_or(0xDC00);
            self.i += 6;
            code = 0x10000 + ((unit - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3ff);
        }
        let c = char::from_u32(code).unwrap_or('\u{fffd}');
        let mut buf = [0u8; 4];
        let len = c.encode_utf8(&mut buf).len();
        // Yield buf[0], keep buf[1..len] reversed in `pending`.
        let mut n = 0;
        let mut j = len;
        while j > 1 {
            j -= 1;
            if let (Some(d), Some(s)) = (self.pending.get_mut(n), buf.get(j)) {
                *d = *s;
            }
            n += 1;
        }
        self.npending = n;
        Some(buf[0])
    }
}

/// The byte at `i`, or 0 past the end. 0 is never valid where a byte is read, so the end of the input needs no
/// separate check.
#[inline(always)]
fn at(s: &[u8], i: usize) -> u8 {
    match s.get(i) {
        Some(b) => *b,
        None => 0,
    }
}

fn hex4(s: &[u8], i: usize) -> Option<u32> {
    let mut value = 0;
    for k in 0..4 {
        let d = at(s, i + k);
        let digit = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        value = value * 16 + u32::from(digit);
    }
    Some(value)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `i` (little-endian), when eight remain.
#[inline(always)]
fn word(s: &[u8], i: usize) -> Option<u64> {
    let mut bytes = [0u8; 8];
    crate::copy(&mut bytes, s.get(i..i.wrapping_add(8))?);
    Some(u64::from_le_bytes(bytes))
}

/// Bit 7 of each byte set exactly when that byte of `x` is not zero (no carry crosses a byte).
#[inline(always)]
fn nonzero(x: u64) -> u64 {
    ((x & LOW7).wrapping_add(LOW7) | x) & HIGH
}

#[inline(always)]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Skips whitespace from `i`: two bytes one at a time (compact JSON has none, pretty JSON often one after a colon),
/// then a longer run (a newline and indentation) eight bytes at a time.
#[inline(always)]
fn ws(s: &[u8], i: usize) -> usize {
    if !is_ws(at(s, i)) {
        return i;
    }
    ws_run(s, i + 1)
}

/// The rest of [`ws`], out of line: the parse loop stays small.
#[inline(never)]
fn ws_run(s: &[u8], mut i: usize) -> usize {
    if !is_ws(at(s, i)) {
        return i;
    }
    i += 1;
    while let Some(w) = word(s, i) {
        let other = nonzero(w ^ (ONES * 0x20))
            & nonzero(w ^ (ONES * 0x09))
            & nonzero(w ^ (ONES * 0x0a))
            & nonzero(w ^ (ONES * 0x0d));
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while is_ws(at(s, i)) {
        i += 1;
    }
    i
}

#[derive(Clone, Copy)]
struct Frame {
    tok: u32,
    count: u32,
    object: bool,
    /// Small objects: a Bloom filter of their keys (see [`key_bit`]).
    bloom: u64,
}

/// One bit for a key by its (length, first byte, last byte); an escaped key says nothing by its raw bytes.
fn key_bit(raw: &[u8], escaped: bool) -> u64 {
    if escaped {
        return u64::MAX;
    }
    let len = raw.len() as u64;
    let first = u64::from(at(raw, 0));
    let last = match raw.last() {
        Some(b) => u64::from(*b),
        None => 0,
    };
    1u64 << ((len.wrapping_mul(31) ^ first.wrapping_mul(7) ^ last.wrapping_mul(131)) & 63)
}

/// Parses `input` into `tape` (which needs [`capacity`]`(input.len())` tokens; `keys`, scratch for sorting the keys
/// of large objects, as many) and returns the number of tokens; token 0 is the root.
pub fn parse(input: &[u8], tape: &mut [Token], keys: &mut [u32]) -> Result<u32, JsonError> {
    if input.len() > MAX_INPUT || tape.len() < capacity(input.len()) || keys.len() < capacity(input.len()) {
        return Err(JsonError::TooLarge);
    }
    match tokens(input, tape, keys) {
        // The interpreter checks the encoding first (src/json.rs); here it is checked inside strings as they are
        // scanned (outside strings a byte past ASCII is a syntax error anyway), so a depth or duplicate fault found
        // before an invalid byte must still be reported as what the encoding makes it.
        Err(JsonError::Depth | JsonError::Duplicate) if core::str::from_utf8(input).is_err() => Err(JsonError::Syntax),
        result => result,
    }
}

fn tokens(input: &[u8], tape: &mut [Token], keys: &mut [u32]) -> Result<u32, JsonError> {
    let s = input;
    // The innermost open container lives in `cur` (locals, as the hand-written parser keeps it); the ones around
    // it in `stack[..sp - 1]`.
    const EMPTY: Frame = Frame { tok: 0, count: 0, object: false, bloom: 0 };
    let mut stack = [EMPTY; MAX_DEPTH];
    let mut cur = EMPTY;
    let mut sp = 0usize;
    let mut n = 0u32;
    let mut i = ws(s, 0);
    'value: loop {
        // A value starts at `i`.
        let tok = n;
        let slot = match tape.get_mut(tok as usize) {
            Some(slot) => slot,
            None => return Err(JsonError::TooLarge),
        };
        n += 1;
        let c = at(s, i);
        match c {
            b'{' | b'[' => {
                if sp >= MAX_DEPTH {
                    return Err(JsonError::Depth);
                }
                *slot = Token {
                    kind: if c == b'{' { OBJECT } else { ARRAY },
                    flags: 0,
                    count: 0,
                    start: i as u32,
                    end: 0,
                    next: 0,
                };
                if let Some(f) = stack.get_mut(sp.wrapping_sub(1)) {
                    *f = cur;
                }
                cur = Frame { tok, count: 0, object: c == b'{', bloom: 0 };
                sp += 1;
                i = ws(s, i + 1);
                let close = if c == b'{' { b'}' } else { b']' };
                if at(s, i) != close {
                    if c == b'{' {
                        i = key(s, i, tape, &mut n, &mut cur)?;
                    }
                    cur.count += 1;
                    continue 'value;
                }
                // An empty container: closed below, like any other.
            }
            b'"' => {
                let (end, escaped) = string(s, i + 1)?;
                *slot = Token {
                    kind: STRING,
                    flags: if escaped { ESCAPED } else { 0 },
                    count: 0,
                    start: i as u32 + 1,
                    end: end as u32,
                    next: n,
                };
                i = ws(s, end + 1);
            }
            b'-' | b'0'..=b'9' => {
                let end = number(s, i)?;
                *slot = Token { kind: NUMBER, flags: 0, count: 0, start: i as u32, end: end as u32, next: n };
                i = ws(s, end);
            }
            b't' | b'f' | b'n' => {
                let (word, kind): (&[u8], u8) = match c {
                    b't' => (b"true", TRUE),
                    b'f' => (b"false", FALSE),
                    _ => (b"null", NULL),
                };
                if s.get(i..i + word.len()) != Some(word) {
                    return Err(JsonError::Syntax);
                }
                let end = i + word.len();
                *slot = Token { kind, flags: 0, count: 0, start: i as u32, end: end as u32, next: n };
                i = ws(s, end);
            }
            _ => return Err(JsonError::Syntax),
        }
        // After a value (or on the closing byte of an empty container): commas and closes.
        loop {
            if sp == 0 {
                break 'value;
            }
            let frame = cur;
            let object = frame.object;
            match at(s, i) {
                b',' => {
                    i = ws(s, i + 1);
                    if object {
                        i = key(s, i, tape, &mut n, &mut cur)?;
                    }
                    cur.count += 1;
                    continue 'value;
                }
                b'}' if object => {
                    if frame.count > SMALL_OBJECT {
                        sorted_keys_distinct(input, tape, keys, frame.tok, n)?;
                    }
                }
                b']' if !object => {}
                _ => return Err(JsonError::Syntax),
            }
            if let Some(t) = tape.get_mut(frame.tok as usize) {
                t.end = i as u32 + 1;
                t.next = n;
                t.count = if frame.count > 0xffff { 0xffff } else { frame.count as u16 };
            }
            sp -= 1;
            if let Some(f) = stack.get(sp.wrapping_sub(1)) {
                cur = *f;
            }
            i = ws(s, i + 1);
        }
    }
    if i != s.len() {
        return Err(JsonError::Syntax);
    }
    Ok(n)
}

/// A key at `i` (then `:` and whitespace) in the object `frame`; returns where its value starts.
#[inline(never)]
fn key(s: &[u8], i: usize, tape: &mut [Token], n: &mut u32, frame: &mut Frame) -> Result<usize, JsonError> {
    if at(s, i) != b'"' {
        return Err(JsonError::Syntax);
    }
    let (end, escaped) = string(s, i + 1)?;
    let tok = *n;
    let t = Token {
        kind: STRING,
        flags: if escaped { ESCAPED } else { 0 },
        count: 0,
        start: i as u32 + 1,
        end: end as u32,
        next: tok + 1,
    };
    match tape.get_mut(tok as usize) {
        Some(slot) => *slot = t,
        None => return Err(JsonError::TooLarge),
    }
    *n += 1;
    if frame.count < SMALL_OBJECT {
        let raw = s.get(i + 1..end).unwrap_or(&[]);
        let bit = key_bit(raw, escaped);
        if frame.bloom & bit != 0 {
            let doc = Doc { input: s, tape };
            let mut k = frame.tok + 1;
            while k < tok {
                if doc.text_eq(k, tok) {
                    return Err(JsonError::Duplicate);
                }
                k = doc.token(doc.token(k).next).next;
            }
        }
        frame.bloom |= bit;
    }
    let j = ws(s, end + 1);
    if at(s, j) != b':' {
        return Err(JsonError::Syntax);
    }
    Ok(ws(s, j + 1))
}

/// A string whose content starts at `i` (after the quote): returns the index of the closing quote and whether the
/// content has escapes. Raw bytes are checked for control characters and, past ASCII, for valid UTF-8.
#[inline(always)]
fn string(s: &[u8], mut i: usize) -> Result<(usize, bool), JsonError> {
    let mut escaped = false;
    loop {
        // Eight bytes at a time to the first quote, backslash or control character (bit 7 of each byte of
        // `special`, exact per byte: a byte below 0x20 has bit 7 clear in itself and in itself + 0x60).
        while let Some(w) = word(s, i) {
            let control = !(((w & LOW7).wrapping_add(ONES * 0x60)) | w) & HIGH;
            let special = (!nonzero(w ^ (ONES * u64::from(b'"'))) | !nonzero(w ^ (ONES * u64::from(b'\\')))) & HIGH
                | control
                | (w & HIGH);
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match at(s, i) {
            b'"' => return Ok((i, escaped)),
            b'\\' => {
                escaped = true;
                match escape_len(s, i) {
                    0 => return Err(JsonError::Syntax),
                    len => i += len,
                }
            }
            // Control characters, and the end of the input (read as 0).
            0x00..=0x1f => return Err(JsonError::Syntax),
            0x80..=0xff => match utf8_char(s, i) {
                0 => return Err(JsonError::Syntax),
                len => i += len,
            },
            _ => i += 1,
        }
    }
}

// The rare paths below are out of line and return a plain length (0: invalid), so the parse loop stays small:
// Cranelift's register allocator spills more the more a function holds (docs/module-v2.md, measured).

/// The length of the escape at `i` (on its backslash), a `\u` surrogate pair counting as one; 0 when invalid.
#[inline(never)]
fn escape_len(s: &[u8], i: usize) -> usize {
    match at(s, i + 1) {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
        b'u' => match hex4(s, i + 2) {
            Some(0xDC00..=0xDFFF) | None => 0,
            Some(0xD800..=0xDBFF) => {
                if at(s, i + 6) != b'\\' || at(s, i + 7) != b'u' {
                    return 0;
                }
                match hex4(s, i + 8) {
                    Some(0xDC00..=0xDFFF) => 12,
                    _ => 0,
                }
            }
            Some(_) => 6,
        },
        _ => 0,
    }
}

/// The length of the UTF-8 character at `i` (whose first byte is past ASCII): no overlong forms, no surrogates,
/// nothing above U+10FFFF; 0 when invalid.
#[inline(never)]
fn utf8_char(s: &[u8], i: usize) -> usize {
    let len = match at(s, i) {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return 0,
    };
    match s.get(i..i.wrapping_add(len)).map(core::str::from_utf8) {
        Some(Ok(_)) => len,
        _ => 0,
    }
}

fn digits(s: &[u8], mut i: usize) -> Result<usize, JsonError> {
    if !at(s, i).is_ascii_digit() {
        return Err(JsonError::Syntax);
    }
    while at(s, i).is_ascii_digit() {
        i += 1;
    }
    Ok(i)
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` from `i`; returns its end.
fn number(s: &[u8], mut i: usize) -> Result<usize, JsonError> {
    if at(s, i) == b'-' {
        i += 1;
    }
    match at(s, i) {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(s, i)?,
        _ => return Err(JsonError::Syntax),
    }
    if at(s, i) == b'.' {
        i = digits(s, i + 1)?;
    }
    if matches!(at(s, i), b'e' | b'E') {
        i += 1;
        if matches!(at(s, i), b'+' | b'-') {
            i += 1;
        }
        i = digits(s, i)?;
    }
    Ok(i)
}

/// The keys of the object at `obj` (whose tokens end before `end`) are pairwise distinct: sorted by content in
/// `keys`, then neighbours compared. `n log n` key comparisons whatever the keys are.
#[inline(never)]
fn sorted_keys_distinct(input: &[u8], tape: &[Token], keys: &mut [u32], obj: u32, end: u32) -> Result<(), JsonError> {
    let doc = Doc { input, tape };
    let mut len = 0usize;
    let mut k = obj + 1;
    while k < end {
        match keys.get_mut(len) {
            Some(slot) => *slot = k,
            None => return Err(JsonError::TooLarge),
        }
        len += 1;
        k = doc.token(doc.token(k).next).next;
    }
    let keys = keys.get_mut(..len).unwrap_or(&mut []);
    heap_sort(keys, |a, b| doc.text_cmp(a, b).is_lt());
    for pair in keys.windows(2) {
        if let [a, b] = pair {
            if doc.text_eq(*a, *b) {
                return Err(JsonError::Duplicate);
            }
        }
    }
    Ok(())
}

fn swap(v: &mut [u32], a: usize, b: usize) {
    if a < v.len() && b < v.len() {
        v.swap(a, b);
    }
}

/// Sorts `v` by `less` in place: no allocation, no recursion, `n log n` comparisons on every input.
pub fn heap_sort(v: &mut [u32], less: impl Fn(u32, u32) -> bool) {
    let len = v.len();
    let sift = |v: &mut [u32], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            break;
        }
        let (mut c, r) = match (v.get(child), v.get(root)) {
            (Some(&c), Some(&r)) => (c, r),
            _ => break,
        };
        if let Some(&c2) = v.get(child + 1) {
            if child + 1 < end && less(c, c2) {
                child += 1;
                c = c2;
            }
        }
        if !less(r, c) {
            break;
        }
        swap(v, root, child);
        root = child;
    };
    let mut start = len / 2;
    while start > 0 {
        start -= 1;
        sift(v, start, len);
    }
    let mut end = len;
    while end > 1 {
        end -= 1;
        swap(v, 0, end);
        sift(v, 0, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &[u8]) -> Result<u32, JsonError> {
        let mut tape = vec![Token::default(); capacity(text.len())];
        let mut keys = vec![0u32; capacity(text.len())];
        parse(text, &mut tape, &mut keys)
    }

    #[test]
    fn kinds_of_single_faults() {
        assert_eq!(check(b"{\"a\":1}"), Ok(3));
        assert_eq!(check(b" [1, 2.5e-3, \"x\", true, false, null, {}, []] "), Ok(9));
        assert_eq!(check(b"{\"a\":1,\"\\u0061\":2}"), Err(JsonError::Duplicate));
        assert_eq!(check(&[b'['; 65]), Err(JsonError::Depth));
        assert_eq!(check(b"01"), Err(JsonError::Syntax));
        assert_eq!(check(b"\"\\ud800\""), Err(JsonError::Syntax));
        assert_eq!(check(b"\"\\udc00\""), Err(JsonError::Syntax));
        assert_eq!(check(b"\"a\x01\""), Err(JsonError::Syntax));
        assert_eq!(check(b"\"abcdefghijkl"), Err(JsonError::Syntax));
        // Open containers take more tokens than bytes / 2 (`capacity` allows for them).
        for tail in ["1,{\"a\":", "[", "{\"a\":[1,"] {
            let deep = "[".repeat(MAX_DEPTH - 2) + tail;
            assert_eq!(check(deep.as_bytes()), Err(JsonError::Syntax), "{deep}");
        }
        let big = vec![b' '; MAX_INPUT + 1];
        assert_eq!(check(&big), Err(JsonError::TooLarge));
    }

    #[test]
    fn large_objects_are_checked_when_they_close() {
        let mut text = String::from("{");
        for i in 0..40 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        text.push_str("\"k\\u0037\":0}");
        assert_eq!(check(text.as_bytes()), Err(JsonError::Duplicate));
        assert!(check(text.replace("k\\u0037", "k\\u0037x").as_bytes()).is_ok());
    }

    #[test]
    fn tape_fields() {
        let text = b"{\"a\\n\":[1,{}],\"b\":null}";
        let mut tape = vec![Token::default(); capacity(text.len())];
        let mut keys = vec![0u32; capacity(text.len())];
        let n = parse(text, &mut tape, &mut keys).unwrap();
        assert_eq!(n, 7);
        let doc = Doc { input: text, tape: &tape[..n as usize] };
        assert_eq!(doc.token(0), Token { kind: OBJECT, flags: 0, count: 2, start: 0, end: 23, next: 7 });
        assert_eq!(doc.token(1).flags, ESCAPED);
        assert_eq!(doc.text(1).collect::<Vec<u8>>(), b"a\n");
        assert_eq!(doc.get(0, b"a\n"), Some(2));
        assert_eq!(doc.token(2), Token { kind: ARRAY, flags: 0, count: 2, start: 7, end: 13, next: 5 });
        assert_eq!(doc.get(0, b"b"), Some(6));
        assert_eq!(doc.token(6).kind, NULL);
        assert_eq!(doc.token(99).kind, 0);
    }

    #[test]
    fn unescaping() {
        let text = br#""\u00e9\ud83d\ude00\/\t\"x""#;
        let mut tape = vec![Token::default(); capacity(text.len())];
        let mut keys = vec![0u32; capacity(text.len())];
        parse(text, &mut tape, &mut keys).unwrap();
        let doc = Doc { input: text, tape: &tape };
        assert_eq!(doc.text(0).collect::<Vec<u8>>(), "é😀/\t\"x".as_bytes());
    }
}
