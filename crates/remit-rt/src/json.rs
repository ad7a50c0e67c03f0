//! The JSON acceptance rule of docs/json.md, the twin of `crates/remit-lang/src/json.rs`: strict RFC 8259, containers nested at most
//! [`MAX_DEPTH`] deep, no two keys of an object equal after unescaping, at most [`MAX_INPUT`] bytes. An accepted
//! document is described by a tape of [`Token`]s (one per value and one per object key, in document order) in a
//! buffer the caller provides: no allocator, no recursion (containers are tracked on a fixed stack of
//! [`MAX_DEPTH`] frames).
//!
//! The error kinds agree with `remit_lang::json::validate` on every input with one fault. With several, the first one in
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

/// One value or object key. Offsets are relative to the start of the input. The kind, flags and count share one
/// `u32` (in that order from the lowest byte, the layout of docs/json.md's tape), so the parser writes a token with
/// four stores rather than six (measured: about 5% of the parse).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token {
    /// [`Token::kind`], [`Token::flags`], [`Token::count`].
    head: u32,
    /// Strings: after the opening quote; numbers and literals: their first byte; containers: the `[` or `{`.
    pub start: u32,
    /// Strings: the closing quote; numbers and literals: after their last byte; containers: after `]` or `}`.
    pub end: u32,
    /// The first token after this value and all its descendants; for a key, its value.
    pub next: u32,
}

impl Token {
    pub const fn new(kind: u8, flags: u8, count: u16, start: u32, end: u32, next: u32) -> Token {
        Token { head: kind as u32 | (flags as u32) << 8 | (count as u32) << 16, start, end, next }
    }

    /// [`NULL`] .. [`OBJECT`]; 0 for no token.
    pub fn kind(&self) -> u8 {
        self.head as u8
    }

    /// [`ESCAPED`] on strings.
    pub fn flags(&self) -> u8 {
        (self.head >> 8) as u8
    }

    /// Containers: elements of an array, entries of an object, saturated at `0xffff`.
    pub fn count(&self) -> u16 {
        (self.head >> 16) as u16
    }

    fn set_count(&mut self, count: u16) {
        self.head = self.head & 0xffff | u32::from(count) << 16;
    }
}

/// Why bytes are not an acceptable document (`remit_lang::json::JsonError`).
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

/// The window a document is parsed in: a power of two larger than [`MAX_INPUT`] plus the end marker, so that a
/// read position masked to the window is always in it and never wraps around before the end of the document.
pub const WINDOW: usize = 1 << 19;

/// The bytes [`parse`] reads: the document somewhere in the first [`MAX_INPUT`] bytes, and eight more bytes than
/// the mask reaches, so that a word read at any masked position is in the array too.
pub type Window = [u8; WINDOW + 8];

/// Tokens enough for every document of at most [`MAX_INPUT`] bytes.
pub const TAPE_LEN: usize = capacity(MAX_INPUT);

/// The tape [`parse`] writes.
pub type Tape = [Token; TAPE_LEN];

/// What [`parse`] keeps besides the tape: the stack of open containers, and a slot per token for sorting the keys of
/// large objects (which [`crate::digest`] reuses to sort keys). Passed in rather than made per call, so a parse does
/// not begin by zeroing a frame stack.
#[derive(Clone, Debug)]
pub struct Scratch {
    pub keys: [u32; TAPE_LEN],
    frames: [Frame; MAX_DEPTH],
}

impl Scratch {
    pub const EMPTY: Scratch = Scratch { keys: [0; TAPE_LEN], frames: [Frame::EMPTY; MAX_DEPTH] };
}

/// What an entry point reads: a parsed document and the parse's key slots (which the request reading reuses), or
/// the parse's error.
pub type Parsed<'a> = Result<(Doc<'a>, &'a mut [u32]), JsonError>;

/// An accepted document: the input and its tape.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    pub input: &'a [u8],
    pub tape: &'a [Token],
}

const NONE: Token = Token::new(0, 0, 0, 0, 0, u32::MAX);

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
        if t.kind() != STRING {
            return Unescaped::new(&[]);
        }
        Unescaped::new(self.raw(i))
    }

    /// Whether the string tokens `a` and `b` have equal unescaped contents.
    pub fn text_eq(&self, a: u32, b: u32) -> bool {
        if (self.token(a).flags() | self.token(b).flags()) & ESCAPED == 0 {
            return crate::same_bytes(self.raw(a), self.raw(b));
        }
        self.text(a).eq(self.text(b))
    }

    /// The values of the entries of object `obj` named `names` (unescaped keys), found in one pass over its keys;
    /// all `None` when `obj` is absent or not an object.
    #[inline(always)]
    pub fn fields<const N: usize>(&self, obj: Option<u32>, names: &[Key<'_>; N]) -> [Option<u32>; N] {
        let mut found = [None; N];
        self.find_fields(obj, names, &mut found);
        found
    }

    /// [`Doc::fields`], once for every number of names: one loop over the names rather than a copy unrolled for
    /// each object read (the module's code executed per decision is what it pays for, in instruction cache misses).
    #[inline(never)]
    fn find_fields(&self, obj: Option<u32>, names: &[Key<'_>], found: &mut [Option<u32>]) {
        let obj = match obj {
            Some(obj) if self.token(obj).kind() == OBJECT => obj,
            _ => return,
        };
        let end = self.token(obj).next;
        let mut k = obj + 1;
        // Keys are distinct in a parsed document, so the pass ends once every name is found.
        let mut missing = names.len();
        while k < end && missing > 0 {
            let kt = self.token(k);
            let at = if kt.flags() & ESCAPED == 0 {
                let key = self.key_words(&kt);
                names.iter().position(|name| name.is(self, k, key))
            } else {
                names.iter().position(|name| self.text(k).eq(name.name.iter().copied()))
            };
            if let Some(slot) = at.and_then(|i| found.get_mut(i)) {
                if slot.is_none() {
                    missing -= 1;
                }
                *slot = Some(kt.next);
            }
            // The key's value, then the next key (`max`: always forward, on any tape).
            k = self.token(kt.next).next.max(k + 1);
        }
    }

    /// An unescaped key's length and its first 16 bytes as [`Key`] holds them: two words read whole when the input
    /// has 16 bytes from the key's start (nearly always: a value and the closing brace follow every key).
    #[inline(always)]
    fn key_words(&self, t: &Token) -> (u32, u64, u64) {
        let len = t.end.wrapping_sub(t.start);
        let start = t.start as usize;
        let (lo, hi) = match self.input.get(start..start.wrapping_add(16)) {
            Some(src) => {
                let word = |at: usize| src.get(at..at + 8).and_then(|b| <[u8; 8]>::try_from(b).ok());
                (word(0).map_or(0, u64::from_le_bytes), word(8).map_or(0, u64::from_le_bytes))
            }
            None => self.key_words_at_end(t),
        };
        let (lo, hi) = Key::keep(lo, hi, len as usize);
        (len, lo, hi)
    }

    /// [`Doc::key_words`] of a key with fewer than 16 bytes of input from its start: its bytes only.
    #[inline(never)]
    fn key_words_at_end(&self, t: &Token) -> (u64, u64) {
        let key = self.input.get(t.start as usize..t.end as usize).unwrap_or(&[]);
        (le_word(key), le_word(key.get(8..).unwrap_or(&[])))
    }

    /// Whether the string token `tok`'s unescaped content is `bytes` (a plain comparison when it has no escape).
    #[inline]
    pub fn text_is(&self, tok: u32, bytes: &[u8]) -> bool {
        if self.token(tok).flags() & ESCAPED == 0 {
            return crate::same_bytes(self.raw(tok), bytes);
        }
        self.text(tok).eq(bytes.iter().copied())
    }

    /// The raw content of string token `tok` when it has no escape (so raw is unescaped).
    #[inline]
    pub fn plain(&self, tok: u32) -> Option<&'a [u8]> {
        (self.token(tok).flags() & ESCAPED == 0).then(|| self.raw(tok))
    }

    /// Byte order of the unescaped contents of string tokens `a` and `b`.
    pub fn text_cmp(&self, a: u32, b: u32) -> core::cmp::Ordering {
        if (self.token(a).flags() | self.token(b).flags()) & ESCAPED == 0 {
            return crate::compare_bytes(self.raw(a), self.raw(b));
        }
        self.text(a).cmp(self.text(b))
    }

    /// The value of the entry of object `obj` whose unescaped key is `key`. One name, so no [`Key`] is prepared
    /// (its two words cost more than the search in the small objects attributes are read from): a key without an
    /// escape is compared by its length, read from its token, then by its bytes; an escaped one unescaped. Inline, so
    /// that the caller makes the `Option` from [`Doc::find`]'s plain number (an `Option` returned is written to
    /// memory).
    #[inline(always)]
    pub fn get(&self, obj: u32, key: &[u8]) -> Option<u32> {
        match self.find(obj, key) {
            u32::MAX => None,
            value => Some(value),
        }
    }

    /// [`Doc::get`]'s search: the value's token, or `u32::MAX` when there is none. The loop tests only lengths;
    /// the bytes of a key of the same length are compared out of line ([`Doc::key_is`]), so the search does not
    /// begin by preparing the name's words for a comparison most keys never reach (measured: about 75 instructions
    /// a lookup).
    #[inline(never)]
    fn find(&self, obj: u32, key: &[u8]) -> u32 {
        let t = self.token(obj);
        if t.kind() != OBJECT {
            return u32::MAX;
        }
        let end = t.next;
        let mut k = obj + 1;
        while k < end {
            let kt = self.token(k);
            let found = if kt.flags() & ESCAPED == 0 {
                kt.end.wrapping_sub(kt.start) as usize == key.len() && self.key_is(kt.start, key)
            } else {
                self.escaped_key_is(k, key)
            };
            if found {
                return kt.next;
            }
            // The key's value, then the next key (`max`: always forward, on any tape).
            k = self.token(kt.next).next.max(k + 1);
        }
        u32::MAX
    }

    /// Whether the input from `start` begins with `key` (an unescaped key of `key`'s length starts there).
    #[inline(never)]
    fn key_is(&self, start: u32, key: &[u8]) -> bool {
        let start = start as usize;
        crate::same_bytes(self.input.get(start..start.wrapping_add(key.len())).unwrap_or(&[]), key)
    }

    /// Whether the escaped key token `k` is `key` once unescaped (out of line: the unescaping iterator lives on
    /// the stack, which the lookups that never meet an escape need not set up).
    #[inline(never)]
    fn escaped_key_is(&self, k: u32, key: &[u8]) -> bool {
        self.text(k).eq(key.iter().copied())
    }
}

/// The first eight bytes of `bytes` as a little-endian word (one load when there are eight; zeros past a shorter
/// slice).
#[inline(always)]
fn le_word(bytes: &[u8]) -> u64 {
    match bytes.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
        Some(b) => u64::from_le_bytes(b),
        None => bytes.iter().take(8).enumerate().fold(0, |w, (i, &b)| w | u64::from(b) << (8 * i)),
    }
}

/// A key name prepared for [`Doc::fields`]: its length and its first 16 bytes as two little-endian words, zero past
/// the name, so a key is compared with two word comparisons rather than a byte loop (and the rest of the bytes only
/// for names longer than 16). The names a request has are constants: `Key::new` in a `const`.
#[derive(Clone, Copy, Debug)]
pub struct Key<'n> {
    pub name: &'n [u8],
    len: u32,
    lo: u64,
    hi: u64,
}

impl<'n> Key<'n> {
    pub const fn new(name: &'n [u8]) -> Key<'n> {
        let (mut lo, mut hi, mut i) = (0u64, 0u64, 0);
        while i < name.len() && i < 16 {
            if i < 8 {
                lo |= (name[i] as u64) << (8 * i);
            } else {
                hi |= (name[i] as u64) << (8 * (i - 8));
            }
            i += 1;
        }
        Key { name, len: name.len() as u32, lo, hi }
    }

    /// [`Key::new`] at run time.
    pub fn of(name: &'n [u8]) -> Key<'n> {
        let (lo, hi) = Key::keep(le_word(name), le_word(name.get(8..).unwrap_or(&[])), name.len());
        Key { name, len: name.len() as u32, lo, hi }
    }

    /// `lo` and `hi` with the bytes past the first `len` zeroed.
    #[inline(always)]
    const fn keep(lo: u64, hi: u64, len: usize) -> (u64, u64) {
        let lo_keep = if len >= 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
        let hi_keep = if len >= 16 {
            u64::MAX
        } else if len <= 8 {
            0
        } else {
            (1u64 << (8 * (len - 8))) - 1
        };
        (lo & lo_keep, hi & hi_keep)
    }

    /// Whether the unescaped key token `k` of `doc`, whose [`Doc::key_words`] are `words`, is this name.
    #[inline]
    fn is(&self, doc: &Doc<'_>, k: u32, (len, lo, hi): (u32, u64, u64)) -> bool {
        len == self.len && lo == self.lo && hi == self.hi && (len <= 16 || crate::same_bytes(doc.raw(k), self.name))
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
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The byte at `i` of the window. The index is masked to the window, so there is no bounds check and no length
/// to keep in a register: the parse loop reads at most a few bytes past the end of the document (which [`parse`]
/// marks with a 0 byte), never near [`WINDOW`].
#[inline(always)]
fn peek(w: &Window, i: usize) -> u8 {
    w[i & (WINDOW - 1)]
}

/// The eight bytes at `i` of the window (little-endian); the window has eight bytes past the mask for this.
#[inline(always)]
fn word(w: &Window, i: usize) -> u64 {
    let j = i & (WINDOW - 1);
    let mut bytes = [0u8; 8];
    if let Some(src) = w.get(j..j + 8) {
        crate::copy(&mut bytes, src);
    }
    u64::from_le_bytes(bytes)
}

/// [`peek`] read as the low byte of [`word`]: the same byte, but a value of its own, so that a comparison with it
/// is not merged into a `match` on [`peek`]'s byte (see where [`tokens`] uses it). Strings and commas tested first
/// this way made decisions about 1% faster (docs/module-v2.md, the JSON parse: "Later").
#[inline(always)]
fn first_byte(w: &Window, i: usize) -> u8 {
    word(w, i) as u8
}

/// Skips whitespace from `i`, a byte at a time through a table, inline. Measured against the alternatives
/// (docs/module-v2.md): runs eight bytes at a time out of line cost a call at every skip, and Cranelift then spills
/// what is live across it (the read position among them); inline, the word loop made the parse loop too large.
/// Requests have short runs (a newline and indentation); a long run costs about 1 ns per 2 bytes.
#[inline(always)]
fn ws(w: &Window, mut i: usize) -> usize {
    while WS[usize::from(peek(w, i))] {
        i += 1;
    }
    i
}

/// [`ws`] from `i`, whose byte `c` the caller has read (and found to be no token's first byte): where the run ends
/// and the byte there, so the caller tests that byte without reading it again.
#[inline(always)]
fn ws_at(w: &Window, mut i: usize, mut c: u8) -> (usize, u8) {
    while WS[usize::from(c)] {
        i += 1;
        c = peek(w, i);
    }
    (i, c)
}

/// The four whitespace bytes, as a table (one load per byte). The end marker (0) is not whitespace, so a run ends
/// at the end of the document at the latest.
static WS: [bool; 256] = {
    let mut table = [false; 256];
    table[b' ' as usize] = true;
    table[b'\t' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'\r' as usize] = true;
    table
};

#[derive(Clone, Copy, Debug)]
struct Frame {
    tok: u32,
    count: u32,
    object: bool,
    /// Small objects: a Bloom filter of their keys (see [`key_bit`]).
    bloom: u64,
}

impl Frame {
    const EMPTY: Frame = Frame { tok: 0, count: 0, object: false, bloom: 0 };
}

/// The innermost of `sp` open containers (`sp` is at most [`MAX_DEPTH`]; the mask only spares the bounds check).
#[inline(always)]
fn top(stack: &mut [Frame; MAX_DEPTH], sp: usize) -> &mut Frame {
    &mut stack[sp.wrapping_sub(1) & (MAX_DEPTH - 1)]
}

/// One bit for a key by its (length, first byte, last byte); an escaped key says nothing by its raw bytes.
#[inline(always)]
fn key_bit(w: &Window, start: usize, end: usize, escaped: bool) -> u64 {
    if escaped {
        return u64::MAX;
    }
    let len = end.wrapping_sub(start) as u64;
    // For an empty key both bytes are outside it (the quotes): still a fixed pair.
    let first = u64::from(peek(w, start));
    let last = u64::from(peek(w, end.wrapping_sub(1)));
    1u64 << ((len.wrapping_mul(31) ^ first.wrapping_mul(7) ^ last.wrapping_mul(131)) & 63)
}

/// Parses the document `window[start..end]` into `tape` and returns the number of tokens; token 0 is the root, and
/// token offsets are offsets into the window. Byte `end` of the window is overwritten with 0, the end marker that
/// lets the parse loop run without a length: 0 is never valid where the parser reads a byte (not whitespace, not
/// a value's first byte, a control character inside a string, not a digit), so every scan stops there at the
/// latest, and reaching it is an error unless the root value ended just before.
pub fn parse(
    window: &mut Window,
    start: usize,
    end: usize,
    tape: &mut Tape,
    scratch: &mut Scratch,
) -> Result<u32, JsonError> {
    if end > MAX_INPUT || start > end || end - start > MAX_INPUT {
        return Err(JsonError::TooLarge);
    }
    if let Some(b) = window.get_mut(end) {
        *b = 0;
    }
    let w: &Window = window;
    match tokens(w, start, end, tape, &mut scratch.keys, &mut scratch.frames) {
        // The interpreter checks the encoding first (crates/remit-lang/src/json.rs); here it is checked inside strings as they are
        // scanned (outside strings a byte past ASCII is a syntax error anyway), so a depth or duplicate fault found
        // before an invalid byte must still be reported as what the encoding makes it.
        Err(JsonError::Depth | JsonError::Duplicate)
            if core::str::from_utf8(w.get(start..end).unwrap_or(&[])).is_err() =>
        {
            Err(JsonError::Syntax)
        }
        result => result,
    }
}

/// The parse loop. What it keeps in locals is the read position, the token count and the depth; the open containers
/// are in `stack` (memory), and the window, tape and stack are fixed-size arrays, so their bounds are constants and
/// need no register (Cranelift spills what does not fit its registers, and it chose the read position: see
/// docs/module-v2.md for what was measured). Out of line: inlined into its caller, the loop shared its error exit
/// with the caller's (the encoding check below needs `start` and `end` there), which cost about 6%.
#[inline(never)]
fn tokens(
    w: &Window,
    start: usize,
    end: usize,
    tape: &mut Tape,
    keys: &mut [u32; TAPE_LEN],
    stack: &mut [Frame; MAX_DEPTH],
) -> Result<u32, JsonError> {
    // The open containers are `stack[..sp]`, the innermost last: in memory, not in locals, so that the loop
    // carries only `i`, `n` and `sp` (measured: docs/module-v2.md).
    let mut sp = 0usize;
    let mut n = 0usize;
    let mut i = start;
    // Set when an object key comes first (after `{` or a comma in an object): one key parser for both.
    let mut want_key = false;
    'value: loop {
        // Every way back to this point (an open container, a comma) sets `want_key` again.
        if want_key {
            i = key(w, i, tape, &mut n, top(stack, sp))?;
        }
        // A value starts at `i`, after whitespace if any: the byte is read once for both (a compact request has
        // none, and the whitespace loop costs a table load and a branch even when it skips nothing).
        let mut c = peek(w, i);
        if u32::from(c) <= u32::from(b' ') {
            (i, c) = ws_at(w, i, c);
        }
        let tok = n;
        if tok >= TAPE_LEN {
            return Err(JsonError::TooLarge);
        }
        n += 1;
        // Strings, most values, first and by one comparison. Written as a test of `c` LLVM folds it into the
        // `match` below, whose lowering sends a string through two jump tables (the one for `[`..`{`, whose default
        // it is, then the one for `"`..`.`): two indirect jumps per string. Read through `word` (the same byte), the
        // test is on another value, which LLVM leaves where it is. Measured: see `first_byte`.
        if first_byte(w, i) == b'"' {
            let (close, escaped) = string(w, i + 1)?;
            put(
                tape,
                tok,
                Token::new(STRING, if escaped { ESCAPED } else { 0 }, 0, i as u32 + 1, close as u32, n as u32),
            );
            i = close + 1;
        } else {
            match c {
                b'{' | b'[' => {
                    if sp >= MAX_DEPTH {
                        return Err(JsonError::Depth);
                    }
                    let object = c == b'{';
                    put(tape, tok, Token::new(if object { OBJECT } else { ARRAY }, 0, 0, i as u32, 0, 0));
                    sp += 1;
                    let cur = top(stack, sp);
                    *cur = Frame { tok: tok as u32, count: 0, object, bloom: 0 };
                    i += 1;
                    let mut b = peek(w, i);
                    if u32::from(b) <= u32::from(b' ') {
                        (i, b) = ws_at(w, i, b);
                    }
                    // `]` is `[` + 2, as `}` is `{` + 2.
                    if b != c + 2 {
                        want_key = object;
                        cur.count += 1;
                        continue 'value;
                    }
                    // An empty container: closed below, like any other.
                }
                b'-' | b'0'..=b'9' => {
                    let last = number(w, i)?;
                    put(tape, tok, Token::new(NUMBER, 0, 0, i as u32, last as u32, n as u32));
                    i = last;
                }
                b't' | b'f' | b'n' => {
                    // The literal's bytes compared as one word (the bytes past the window's end marker are never equal
                    // to a literal's, since the marker is 0).
                    let x = word(w, i);
                    let (len, kind) = if x & 0xffff_ffff == u64::from(u32::from_le_bytes(*b"true")) {
                        (4, TRUE)
                    } else if x & 0xff_ffff_ffff == u64::from_le_bytes(*b"false\0\0\0") {
                        (5, FALSE)
                    } else if x & 0xffff_ffff == u64::from(u32::from_le_bytes(*b"null")) {
                        (4, NULL)
                    } else {
                        return Err(JsonError::Syntax);
                    };
                    put(tape, tok, Token::new(kind, 0, 0, i as u32, (i + len) as u32, n as u32));
                    i += len;
                }
                _ => return Err(JsonError::Syntax),
            }
        }
        // After a value (or on the closing byte of an empty container): commas and closes.
        loop {
            if sp == 0 {
                break 'value;
            }
            // Whitespace skipped only when there is some, the byte read once for the test and the dispatch.
            let mut b = peek(w, i);
            if u32::from(b) <= u32::from(b' ') {
                (i, b) = ws_at(w, i, b);
            }
            let cur = top(stack, sp);
            // Commas, the most frequent, first. What follows (whitespace, then a key or a value) is skipped where it
            // is read.
            if b == b',' {
                i += 1;
                want_key = cur.object;
                cur.count += 1;
                continue 'value;
            }
            // Else the innermost container's close (`}` is `]` + 32): one comparison with a computed byte, where a
            // `match` on `b` became a switch that tested `]` and `}` before the comma.
            if u32::from(b) != u32::from(b']') + 32 * u32::from(cur.object) {
                return Err(JsonError::Syntax);
            }
            if cur.object && cur.count > SMALL_OBJECT {
                sorted_keys_distinct(w, tape, keys, cur.tok, n as u32)?;
            }
            if let Some(t) = tape.get_mut(cur.tok as usize) {
                t.end = i as u32 + 1;
                t.next = n as u32;
                t.set_count(if cur.count > 0xffff { 0xffff } else { cur.count as u16 });
            }
            sp -= 1;
            i += 1;
        }
    }
    if ws(w, i) != end {
        return Err(JsonError::Syntax);
    }
    Ok(n as u32)
}

/// Writes token `tok` (the loop checked it against [`TAPE_LEN`] when it counted the token, so `get_mut` never
/// fails: the check is only there because the compiler cannot see that). Written whole at the end of each value rather
/// than through a reference taken at its start, which Cranelift kept in a stack slot.
#[inline(always)]
fn put(tape: &mut Tape, tok: usize, token: Token) {
    if let Some(slot) = tape.get_mut(tok) {
        *slot = token;
    }
}

/// A key at `i` (after whitespace, if any), then `:`, in the object `frame`; returns the byte after the colon (the
/// value's whitespace, if any, is skipped where the value is read).
#[inline(always)]
fn key(w: &Window, i: usize, tape: &mut Tape, n: &mut usize, frame: &mut Frame) -> Result<usize, JsonError> {
    let (mut i, mut c) = (i, peek(w, i));
    if c != b'"' {
        (i, c) = ws_at(w, i, c);
        if c != b'"' {
            return Err(JsonError::Syntax);
        }
    }
    let (close, escaped) = string(w, i + 1)?;
    let tok = *n;
    match tape.get_mut(tok) {
        Some(slot) => {
            *slot = Token::new(STRING, if escaped { ESCAPED } else { 0 }, 0, i as u32 + 1, close as u32, tok as u32 + 1)
        }
        None => return Err(JsonError::TooLarge),
    }
    *n += 1;
    // `frame.count` already counts this key: the first [`SMALL_OBJECT`] keys go through the filter, and an object
    // with more is also sorted when it closes.
    if frame.count <= SMALL_OBJECT {
        let bit = key_bit(w, i + 1, close, escaped);
        if frame.bloom & bit != 0 && duplicate_key(w, tape, frame.tok, tok as u32) {
            return Err(JsonError::Duplicate);
        }
        frame.bloom |= bit;
    }
    // The colon, nearly always right after the quote; the value's own whitespace is skipped where it is read.
    let (mut j, mut c) = (close + 1, peek(w, close + 1));
    if c != b':' {
        (j, c) = ws_at(w, j, c);
        if c != b':' {
            return Err(JsonError::Syntax);
        }
    }
    Ok(j + 1)
}

/// Whether the key `tok` of the object `obj` equals one of the object's earlier keys (out of line: only a Bloom
/// filter hit comes here).
#[inline(never)]
fn duplicate_key(w: &Window, tape: &Tape, obj: u32, tok: u32) -> bool {
    let doc = Doc { input: w, tape };
    let mut k = obj + 1;
    while k < tok {
        if doc.text_eq(k, tok) {
            return true;
        }
        k = doc.token(doc.token(k).next).next;
    }
    false
}

/// A string whose content starts at `i` (after the quote): returns the index of the closing quote and whether the
/// content has escapes. Raw bytes are checked for control characters and, past ASCII, for valid UTF-8.
#[inline(always)]
fn string(w: &Window, mut i: usize) -> Result<(usize, bool), JsonError> {
    let mut escaped = false;
    loop {
        // Eight bytes at a time to the first quote, backslash, control character (the end marker is one) or
        // non-ASCII byte: bit 7 of the lowest such byte of `special` is set, and of no byte below it. A byte below
        // 0x20, or a byte equal to `"` or `\` after the xor, borrows when its constant is subtracted and sets its bit
        // 7; a borrow only runs upwards, so bytes above the first special one may be flagged too, never below. A
        // byte past ASCII needs no term of its own: it keeps bit 7 through both xors, and loses it by subtracting 1
        // only when it was 0x80 after the xor — 0xa2 for the quote's, 0xdc for the backslash's, never both.
        loop {
            let x = word(w, i);
            let special = (x.wrapping_sub(ONES * 0x20)
                | (x ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES)
                | (x ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES))
                & HIGH;
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        // The closing quote first: the special byte of nearly every string.
        let special = peek(w, i);
        if special == b'"' {
            return Ok((i, escaped));
        }
        match special {
            b'\\' => {
                escaped = true;
                match escape_len(w, i) {
                    0 => return Err(JsonError::Syntax),
                    len => i += len,
                }
            }
            0x80..=0xff => match utf8_char(w, i) {
                0 => return Err(JsonError::Syntax),
                len => i += len,
            },
            // Control characters and the end marker.
            _ => return Err(JsonError::Syntax),
        }
    }
}

// The rare paths below are out of line and return a plain length (0: invalid), so the parse loop stays small:
// Cranelift's register allocator spills more the more a function holds (docs/module-v2.md, measured).

/// The length of the escape at `i` (on its backslash), a `\u` surrogate pair counting as one; 0 when invalid.
#[inline(never)]
fn escape_len(w: &Window, i: usize) -> usize {
    let s: &[u8] = w;
    let i = i & (WINDOW - 1);
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
/// nothing above U+10FFFF; 0 when invalid (also when it runs into the end marker, which is no continuation byte).
#[inline(never)]
fn utf8_char(w: &Window, i: usize) -> usize {
    let i = i & (WINDOW - 1);
    let len = match peek(w, i) {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return 0,
    };
    match w.get(i..i + len).map(core::str::from_utf8) {
        Some(Ok(_)) => len,
        _ => 0,
    }
}

/// Whether `b` is an ASCII digit, computed on `u32`: on `u8` the compiler masks every byte to 8 bits again, which
/// Cranelift does not remove.
#[inline(always)]
fn digit(b: u8) -> bool {
    u32::from(b).wrapping_sub(u32::from(b'0')) < 10
}

#[inline(always)]
fn digits(w: &Window, mut i: usize) -> Result<usize, JsonError> {
    if !digit(peek(w, i)) {
        return Err(JsonError::Syntax);
    }
    i += 1;
    while digit(peek(w, i)) {
        i += 1;
    }
    Ok(i)
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` from `i`; returns its end.
#[inline(always)]
fn number(w: &Window, mut i: usize) -> Result<usize, JsonError> {
    if peek(w, i) == b'-' {
        i += 1;
    }
    let first = u32::from(peek(w, i));
    if first == u32::from(b'0') {
        i += 1;
    } else if first.wrapping_sub(u32::from(b'1')) < 9 {
        i = digits(w, i)?;
    } else {
        return Err(JsonError::Syntax);
    }
    if peek(w, i) == b'.' {
        i = digits(w, i + 1)?;
    }
    if u32::from(peek(w, i)) | 0x20 == u32::from(b'e') {
        i += 1;
        let sign = u32::from(peek(w, i));
        if sign == u32::from(b'+') || sign == u32::from(b'-') {
            i += 1;
        }
        i = digits(w, i)?;
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
    if len > keys.len() {
        return Err(JsonError::TooLarge);
    }
    let (keys, buf) = keys.split_at_mut(len);
    // Keys without escapes (nearly always all of them) compare as raw bytes, inline in the sort.
    if keys.iter().all(|&k| doc.token(k).flags() & ESCAPED == 0) {
        merge_sort(keys, buf, |a, b| crate::compare_bytes(doc.raw(a), doc.raw(b)).is_lt());
    } else {
        merge_sort(keys, buf, |a, b| doc.text_cmp(a, b).is_lt());
    }
    for pair in keys.windows(2) {
        if let [a, b] = pair {
            if doc.text_eq(*a, *b) {
                return Err(JsonError::Duplicate);
            }
        }
    }
    Ok(())
}

/// Sorts `v` by `less`, stably, with `buf` (at least as long as `v`, else [`heap_sort`] in place) as the merge's
/// other half: no allocation, no recursion, at most `n ⌈log2 n⌉` comparisons on every input, about half of what
/// [`heap_sort`] makes. For the sorts whose length the input chooses (a request's object keys and approvals), where
/// the comparisons are most of the work.
pub fn merge_sort(v: &mut [u32], buf: &mut [u32], less: impl Fn(u32, u32) -> bool) {
    let n = v.len();
    let buf = match buf.get_mut(..n) {
        Some(buf) => buf,
        None => return heap_sort(v, less),
    };
    // Runs of `width` merged pairwise, from `v` into `buf` and back, until one run covers everything.
    let mut width = 1;
    let mut in_buf = false;
    while width < n {
        if in_buf {
            merge_runs(buf, v, width, &less);
        } else {
            merge_runs(v, buf, width, &less);
        }
        in_buf = !in_buf;
        width *= 2;
    }
    if in_buf {
        for (d, s) in v.iter_mut().zip(buf.iter()) {
            *d = *s;
        }
    }
}

/// One pass of [`merge_sort`]: each two neighbouring runs of `width` in `src` merged into the same place of `dst`
/// (the left one first among equals).
fn merge_runs(src: &[u32], dst: &mut [u32], width: usize, less: &impl Fn(u32, u32) -> bool) {
    let n = src.len().min(dst.len());
    let mut start = 0;
    while start < n {
        let mid = n.min(start + width);
        let end = n.min(mid + width);
        let (mut i, mut j) = (start, mid);
        for slot in dst.get_mut(start..end).unwrap_or(&mut []) {
            let left = src.get(i).copied().filter(|_| i < mid);
            let right = src.get(j).copied().filter(|_| j < end);
            *slot = match (left, right) {
                (Some(l), Some(r)) if less(r, l) => {
                    j += 1;
                    r
                }
                (Some(l), _) => {
                    i += 1;
                    l
                }
                (None, Some(r)) => {
                    j += 1;
                    r
                }
                (None, None) => 0,
            };
        }
        start = end;
    }
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

/// Boxed parse buffers for the unit tests (the fixed-size arrays are too large for a test thread's stack).
#[cfg(test)]
pub(crate) struct Buffers {
    pub window: Box<Window>,
    pub tape: Box<Tape>,
    pub scratch: Box<Scratch>,
}

#[cfg(test)]
impl Buffers {
    pub fn new() -> Buffers {
        Buffers {
            window: vec![0u8; WINDOW + 8].into_boxed_slice().try_into().unwrap(),
            tape: vec![Token::default(); TAPE_LEN].into_boxed_slice().try_into().unwrap(),
            scratch: Box::new(Scratch::EMPTY),
        }
    }

    /// Parses `text` (at the window's start); the document and the key buffer.
    pub fn parse(&mut self, text: &[u8]) -> Result<(Doc<'_>, &mut [u32]), JsonError> {
        let len = text.len().min(MAX_INPUT);
        crate::copy(&mut self.window[..len], text);
        let n = parse(&mut self.window, 0, text.len(), &mut self.tape, &mut self.scratch)?;
        Ok((Doc { input: &self.window[..text.len()], tape: &self.tape[..n as usize] }, &mut self.scratch.keys[..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_sort() {
        // Every length up to 70 (runs of every parity), values with repeats; stability by sorting on the high
        // half only and checking the low half keeps its order among equals.
        let mut state = 0x9e37_79b9u32;
        for n in 0..70 {
            let v: Vec<u32> = (0..n)
                .map(|i| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    (state % 7) << 16 | i
                })
                .collect();
            let mut expected = v.clone();
            expected.sort_by_key(|x| x >> 16);
            let mut merged = v.clone();
            merge_sort(&mut merged, &mut vec![0; n as usize], |a, b| a >> 16 < b >> 16);
            assert_eq!(merged, expected, "merge {n}");
            let mut short = v.clone();
            merge_sort(&mut short, &mut vec![0; (n as usize).saturating_sub(1)], |a, b| a >> 16 < b >> 16);
            assert!(short.windows(2).all(|w| w[0] >> 16 <= w[1] >> 16), "heap fallback {n}");
            let mut heap = v.clone();
            heap_sort(&mut heap, |a, b| a < b);
            let mut sorted = v;
            sorted.sort_unstable();
            assert_eq!(heap, sorted, "heap {n}");
        }
    }

    fn check(text: &[u8]) -> Result<u32, JsonError> {
        Buffers::new().parse(text).map(|(doc, _)| doc.tape.len() as u32)
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
    fn a_duplicate_is_found_at_every_object_size() {
        // Around the small-object limit above all: the filter takes the first keys, the sort the objects past it.
        for n in 1..40 {
            for (at, copy) in [(0, "\"k0\""), (n - 1, "\"k\\u0030\""), (n / 2, "\"k0\""), (n, "\"k0\"")] {
                let mut keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
                keys.insert(at, format!("{copy}:0"));
                let text = format!("{{{}}}", keys.join(","));
                assert_eq!(check(text.as_bytes()), Err(JsonError::Duplicate), "{text}");
            }
        }
    }

    #[test]
    fn tape_fields() {
        let text = b"{\"a\\n\":[1,{}],\"b\":null}";
        let mut buffers = Buffers::new();
        let (doc, _) = buffers.parse(text).unwrap();
        assert_eq!(doc.tape.len(), 7);
        assert_eq!(doc.token(0), Token::new(OBJECT, 0, 2, 0, 23, 7));
        assert_eq!(doc.token(1).flags(), ESCAPED);
        assert_eq!(doc.text(1).collect::<Vec<u8>>(), b"a\n");
        assert_eq!(doc.get(0, b"a\n"), Some(2));
        assert_eq!(doc.token(2), Token::new(ARRAY, 0, 2, 7, 13, 5));
        assert_eq!(doc.get(0, b"b"), Some(6));
        assert_eq!(doc.token(6).kind(), NULL);
        assert_eq!(doc.token(99).kind(), 0);
    }

    #[test]
    fn get_is_fields_of_one_name() {
        // Keys of every length around the word sizes, plain and escaped (an escaped key's raw bytes are longer than
        // its text), and names that share a key's length or its first bytes: `get` finds what `fields` finds.
        let text = br#"{"":0,"i":1,"id":2,"ids":3,"idsx":4,"a\u0062c":5,"owner":6,"total12":7,"total123":8,"properties":9,"properties12345":10,"properties123456":11,"properties1234567":12,"x\"y":13,"nested":{"id":14}}"#;
        let mut buffers = Buffers::new();
        let (doc, _) = buffers.parse(text).unwrap();
        let names: [&[u8]; 22] = [
            b"",
            b"i",
            b"id",
            b"ids",
            b"idsx",
            b"abc",
            b"a\\u0062c",
            b"owner",
            b"ownex",
            b"total12",
            b"total123",
            b"total124",
            b"properties",
            b"properties12345",
            b"properties123456",
            b"properties1234567",
            b"properties1234568",
            b"x\"y",
            b"x\\\"y",
            b"nested",
            b"nestedx",
            b"missing",
        ];
        for name in names {
            let [expected] = doc.fields(Some(0), &[Key::of(name)]);
            assert_eq!(doc.get(0, name), expected, "{:?}", String::from_utf8_lossy(name));
        }
        assert!(doc.get(0, b"abc").is_some() && doc.get(0, b"x\"y").is_some() && doc.get(0, b"id").is_some());
        let nested = doc.get(0, b"nested").unwrap();
        assert_eq!(doc.get(nested, b"id").map(|v| doc.raw(v)), Some(&b"14"[..]));
        // Not an object: nothing.
        assert_eq!(doc.get(doc.get(0, b"id").unwrap(), b"id"), None);
        assert_eq!(doc.get(999, b"id"), None);
    }

    #[test]
    fn fields_compare_whole_names_of_every_length() {
        // Names of 0-20 bytes sharing prefixes, each found only under its exact key, also as the document's last
        // key (fewer than 16 bytes left to read) and written with an escape.
        let names: Vec<String> = (0..=20).map(|n| "abcdefghijklmnopqrstu"[..n].to_string()).collect();
        for (i, name) in names.iter().enumerate() {
            let escaped = name.replacen('a', "\\u0061", 1);
            for key in [name.clone(), escaped] {
                for text in [format!(r#"{{"{key}": {i}, "zz": 0}}"#), format!(r#"{{"zz": 0, "{key}": {i}}}"#)] {
                    let mut buffers = Buffers::new();
                    let (doc, _) = buffers.parse(text.as_bytes()).unwrap();
                    for (j, other) in names.iter().enumerate() {
                        let [found, zz] = doc.fields(Some(0), &[Key::of(other.as_bytes()), Key::new(b"zz")]);
                        assert!(zz.is_some(), "{text}");
                        assert_eq!(
                            found.map(|v| doc.raw(v)),
                            (i == j).then(|| i.to_string().into_bytes()).as_deref(),
                            "{other} in {text}"
                        );
                    }
                }
            }
        }
    }

    /// Parses `text` with every byte of the window past it set to `junk`: what the word reads see past the end
    /// marker never changes the verdict.
    fn check_over(text: &[u8], junk: u8) -> Result<Vec<Token>, JsonError> {
        let mut buffers = Buffers::new();
        buffers.window.fill(junk);
        buffers.parse(text).map(|(doc, _)| doc.tape.to_vec())
    }

    /// `check_over` with junk of every kind the scanners look for, all giving `expected`.
    fn assert_verdict(text: &[u8], expected: Result<(), JsonError>) -> Vec<Token> {
        let mut tapes = Vec::new();
        for junk in [0, b'"', b'\\', b',', b':', b' ', b'a', b'}', 0x80] {
            let got = check_over(text, junk);
            assert_eq!(
                got.as_ref().map(|_| ()),
                expected.as_ref().copied(),
                "{:?} over {junk:#x}",
                String::from_utf8_lossy(text)
            );
            tapes.extend(got.ok());
        }
        assert!(
            tapes.windows(2).all(|t| t[0] == t[1]),
            "{:?}: one tape whatever follows",
            String::from_utf8_lossy(text)
        );
        tapes.pop().unwrap_or_default()
    }

    #[test]
    fn string_scan_finds_each_special_byte_at_each_position_of_a_word() {
        // The string's content starts at byte 2 of the input (after `["`), so `pad` bytes before the special one
        // put it at every position of the first and the second word read, and the string's end anywhere in a word.
        let plain = |pad: usize| b"abcdefghijklmnop"[..pad].to_vec();
        let cases: [(&[u8], Result<(), JsonError>, bool); 18] = [
            (b"\\\"", Ok(()), true),
            (b"\\\\", Ok(()), true),
            (b"\\n", Ok(()), true),
            (b"\\u00e9", Ok(()), true),
            (b"\\ud83d\\ude00", Ok(()), true),
            (b"\\x", Err(JsonError::Syntax), true),
            (b"\\ud83d", Err(JsonError::Syntax), true),
            (&[0x01], Err(JsonError::Syntax), false),
            (&[0x1f], Err(JsonError::Syntax), false),
            (&[0x00], Err(JsonError::Syntax), false),
            (&[0x20, 0x7f], Ok(()), false),
            ("é".as_bytes(), Ok(()), false),
            ("€".as_bytes(), Ok(()), false),
            ("😀".as_bytes(), Ok(()), false),
            (&[0xc0, 0x80], Err(JsonError::Syntax), false),
            (&[0x80], Err(JsonError::Syntax), false),
            (&[0x9f], Err(JsonError::Syntax), false),
            (&[0xe2, 0x82], Err(JsonError::Syntax), false),
        ];
        for pad in 0..16 {
            for tail in 0..10 {
                // A plain string of `pad` bytes: its closing quote at every position.
                let mut text = b"[\"".to_vec();
                text.extend(plain(pad));
                text.extend(b"\"]");
                let tape = assert_verdict(&text, Ok(()));
                assert_eq!((tape[1].start, tape[1].end, tape[1].flags()), (2, 2 + pad as u32, 0));
                for (special, expected, escaped) in cases {
                    let mut text = b"[\"".to_vec();
                    text.extend(plain(pad));
                    text.extend(special);
                    text.extend(plain(tail));
                    text.extend(b"\"]");
                    let tape = assert_verdict(&text, expected);
                    if expected.is_ok() {
                        let end = (text.len() - 2) as u32;
                        assert_eq!((tape[1].start, tape[1].end), (2, end), "{:?}", String::from_utf8_lossy(&text));
                        assert_eq!(tape[1].flags(), if escaped { ESCAPED } else { 0 });
                    }
                }
            }
        }
    }

    #[test]
    fn strings_ending_near_the_end_of_the_input() {
        // The last 7 bytes of the input: a word read there runs past the end marker.
        for len in 0..20 {
            let body = "x".repeat(len);
            let tape = assert_verdict(format!("\"{body}\"").as_bytes(), Ok(()));
            assert_eq!((tape[0].start, tape[0].end), (1, 1 + len as u32));
            assert_verdict(format!("\"{body}").as_bytes(), Err(JsonError::Syntax));
            assert_verdict(format!("\"{body}\\").as_bytes(), Err(JsonError::Syntax));
            assert_verdict(format!("\"{body}\\u00").as_bytes(), Err(JsonError::Syntax));
            assert_verdict(format!("{{\"{body}\":\"{body}\"}}").as_bytes(), Ok(()));
            assert_verdict(format!("{{\"{body}\":\"{body}\" }}").as_bytes(), Ok(()));
            // A multi-byte character cut by the end of the input.
            let mut cut = format!("\"{body}").into_bytes();
            cut.extend(&"😀".as_bytes()[..3]);
            assert_verdict(&cut, Err(JsonError::Syntax));
        }
    }

    #[test]
    fn commas_and_colons_where_the_loop_tests_them_first() {
        for (text, expected) in [
            (&b"[1,2]"[..], Ok(())),
            (b"[1 ,2]", Ok(())),
            (b"[1\n,\n2]", Ok(())),
            (b"[\"a\",\"b\"]", Ok(())),
            (b"{\"a\":1,\"b\":2}", Ok(())),
            (b"{\"a\" : 1 , \"b\" :2 }", Ok(())),
            (b"[[],{},1]", Ok(())),
            (b"[1,]", Err(JsonError::Syntax)),
            (b"[,1]", Err(JsonError::Syntax)),
            (b"[1,,2]", Err(JsonError::Syntax)),
            (b"{\"a\":1,}", Err(JsonError::Syntax)),
            (b"{\"a\",1}", Err(JsonError::Syntax)),
            (b"{\"a\":1,2}", Err(JsonError::Syntax)),
            (b"1,2", Err(JsonError::Syntax)),
            (b"\"a\",", Err(JsonError::Syntax)),
            (b"[1", Err(JsonError::Syntax)),
            (b"[\"a\"", Err(JsonError::Syntax)),
            (b"{\"a\":1", Err(JsonError::Syntax)),
            // Whitespace is skipped where the next byte is read (before a value, a key, a colon, a comma or a
            // close), only when there is some: every place, every whitespace byte, and the bytes that are not.
            (b" \t\r\n[ 1 , \"a\" ,\n{ \"k\" :\t[ ] , \"l\"\r\n:\r\n{ } } ]\n ", Ok(())),
            (b"{ }", Ok(())),
            (b"[ ]", Ok(())),
            (b"{\"a\":1 }", Ok(())),
            (b"{\"a\":1\t,\t\"b\":2}", Ok(())),
            (b"[\"a\"\n]", Ok(())),
            (b" 1 ", Ok(())),
            (b" ", Err(JsonError::Syntax)),
            (b"", Err(JsonError::Syntax)),
            (b"[ , 1]", Err(JsonError::Syntax)),
            (b"[1 , ]", Err(JsonError::Syntax)),
            (b"{ , \"a\":1}", Err(JsonError::Syntax)),
            (b"{\"a\" 1}", Err(JsonError::Syntax)),
            (b"{\"a\": }", Err(JsonError::Syntax)),
            (b"{\"a\":1 , }", Err(JsonError::Syntax)),
            (b"{ 1:1}", Err(JsonError::Syntax)),
            (b"[1\x0b]", Err(JsonError::Syntax)),
            (b"[\x0c1]", Err(JsonError::Syntax)),
            (b"{\"a\"\x00:1}", Err(JsonError::Syntax)),
            (b"{\"a\":\x1f1}", Err(JsonError::Syntax)),
            (b"[1]\x00", Err(JsonError::Syntax)),
            (b"[1] x", Err(JsonError::Syntax)),
            (b"{\"a\":1 ]", Err(JsonError::Syntax)),
            (b"[1 }", Err(JsonError::Syntax)),
            (b"{\"a\":1,\"a\" :2}", Err(JsonError::Duplicate)),
        ] {
            assert_verdict(text, expected);
        }
    }

    #[test]
    fn unescaping() {
        let text = br#""\u00e9\ud83d\ude00\/\t\"x""#;
        let mut buffers = Buffers::new();
        let (doc, _) = buffers.parse(text).unwrap();
        assert_eq!(doc.text(0).collect::<Vec<u8>>(), "é😀/\t\"x".as_bytes());
    }
}
