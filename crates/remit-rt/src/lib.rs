//! The runtime of the decision module, version 2 (docs/module-v2.md): written once in `no_std` Rust with no
//! allocator, compiled once to wasm32 by `scripts/build-runtime.sh` into the committed
//! `crates/remit-module/runtime.wasm`, and compiled natively (with std, for tests and the `native` engine) by cargo.
//! It depends on no other crate: the build script compiles it with rustc alone. Files are named after the
//! interpreter's (crates/remit-lang) where they mirror it: `json.rs` is `json.rs`'s acceptance rule (docs/json.md)
//! into a tape, `digest.rs` is `eval/digest.rs`'s canonical argument digest, `request.rs` is `eval/request.rs`
//! (reading a request's fields from the tape), `cond.rs` is `eval/cond.rs` (conditions over the policy image),
//! `decide.rs` and `visible.rs` are `eval/mod.rs` and `eval/visible.rs`, `value.rs` the timestamps, decimals, money
//! and durations of `value.rs`, `time.rs` the zone tables and calendars of `time/`; `sha256.rs` and `out.rs` (the
//! output writer) have no twin there. `wasm.rs` holds the artifact's exports and its fixed buffers; it exists only on
//! wasm32.
//!
//! The whole crate must stay panic-free on wasm32: a panic path that the optimizer cannot remove becomes a call to
//! an undefined function, which the build script refuses as an import (the module imports nothing and never traps).
//! So indexing is `get`/`get_mut` or guarded by a check the optimizer can see, and nothing recurses without a bound.
//! It is written in the Rust that Debian's rustc 1.63 accepts (`rust-version` in Cargo.toml keeps clippy to it).
#![cfg_attr(not(any(test, feature = "std")), no_std)]

pub mod cond;
pub mod decide;
pub mod digest;
pub mod err;
pub mod grants;
pub mod image;
pub mod json;
pub mod out;
pub mod request;
pub mod sha256;
pub mod time;
pub mod value;
pub mod visible;
#[cfg(target_arch = "wasm32")]
mod wasm;

/// Largest request accepted, in bytes (docs/abi.md; the same as `remit_lang::json::MAX_INPUT`, checked by
/// tests/rt_native.rs).
pub const MAX_INPUT: usize = 262_144;

/// Copies `src` to `dst` as far as both go. `copy_from_slice` panics on a length mismatch, which the optimizer
/// cannot always rule out; this never panics and still compiles to a `memcpy`.
#[inline(always)]
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// [`copy`] of `src` into `dst` (of the same length), a short one as two overlapping fixed-size copies instead of a
/// `memcpy`: most writes are short (a key, a name, punctuation), and on wasm32 a `memcpy` is `memory.copy`, which
/// wasmtime runs as a call out of the module.
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [u8], src: &[u8]) {
    /// `src[at..at + N]` to `dst[at..at + N]`, as one load and one store.
    #[inline(always)]
    fn fixed<const N: usize>(dst: &mut [u8], src: &[u8], at: usize) {
        let from = src.get(at..at + N).and_then(|s| <&[u8; N]>::try_from(s).ok());
        let to = dst.get_mut(at..at + N).and_then(|d| <&mut [u8; N]>::try_from(d).ok());
        if let (Some(from), Some(to)) = (from, to) {
            *to = *from;
        }
    }
    let len = src.len();
    match len {
        0 => {}
        1..=3 => {
            // The first, middle and last bytes cover every length from 1 to 3.
            fixed::<1>(dst, src, 0);
            fixed::<1>(dst, src, len / 2);
            fixed::<1>(dst, src, len - 1);
        }
        4..=7 => {
            fixed::<4>(dst, src, 0);
            fixed::<4>(dst, src, len - 4);
        }
        8..=16 => {
            fixed::<8>(dst, src, 0);
            fixed::<8>(dst, src, len - 8);
        }
        _ => copy(dst, src),
    }
}

/// Whether `a` and `b` are the same bytes, compared eight at a time (slice `==` is a call to a byte-by-byte
/// `memcmp` on wasm32; the names compared here are mostly under 32 bytes).
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // Up to 16 bytes (most names, ids and keys): two overlapping loads a side, as [`copy_short`] copies them,
    // rather than a loop over the bytes past the last whole word.
    let len = a.len();
    match len {
        0 => return true,
        1..=3 => {
            // The first, middle and last bytes cover every length from 1 to 3.
            let byte = |s: &[u8], at: usize| s.get(at).copied();
            return byte(a, 0) == byte(b, 0)
                && byte(a, len / 2) == byte(b, len / 2)
                && byte(a, len - 1) == byte(b, len - 1);
        }
        4..=7 => {
            let word = |s: &[u8], at: usize| s.get(at..at + 4).and_then(|w| <[u8; 4]>::try_from(w).ok());
            return word(a, 0) == word(b, 0) && word(a, len - 4) == word(b, len - 4);
        }
        8..=16 => {
            let word = |s: &[u8], at: usize| {
                s.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).map(u64::from_le_bytes)
            };
            return word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8);
        }
        _ => {}
    }
    let (mut x, mut y) = (a.chunks_exact(8), b.chunks_exact(8));
    for (p, q) in (&mut x).zip(&mut y) {
        if let (Ok(p), Ok(q)) = (<[u8; 8]>::try_from(p), <[u8; 8]>::try_from(q)) {
            if u64::from_le_bytes(p) != u64::from_le_bytes(q) {
                return false;
            }
        }
    }
    x.remainder().iter().zip(y.remainder()).all(|(p, q)| p == q)
}

/// The byte order of `a` and `b` (slice `cmp`), compared eight bytes at a time: slice `cmp` is a call to a
/// byte-by-byte `memcmp` on wasm32, and sorting keys that share long prefixes spent most of its time there.
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> core::cmp::Ordering {
    let (mut x, mut y) = (a.chunks_exact(8), b.chunks_exact(8));
    for (p, q) in (&mut x).zip(&mut y) {
        if let (Ok(p), Ok(q)) = (<[u8; 8]>::try_from(p), <[u8; 8]>::try_from(q)) {
            let (p, q) = (u64::from_be_bytes(p), u64::from_be_bytes(q));
            if p != q {
                return p.cmp(&q);
            }
        }
    }
    // Past the common whole words: the rest of the shorter one (its remainder, or nothing when it ran out of words
    // first) against the same place in the other.
    let common = a.len().min(b.len()) / 8 * 8;
    let (a, b) = (a.get(common..).unwrap_or(&[]), b.get(common..).unwrap_or(&[]));
    for (p, q) in a.iter().zip(b) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

/// Where bytes go: the output writer, or a hash.
pub trait Sink {
    /// Appends `bytes`.
    fn write(&mut self, bytes: &[u8]);
    /// Appends one byte.
    fn byte(&mut self, byte: u8) {
        self.write(&[byte]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_is_slice_equality() {
        let text: Vec<u8> = (0..40u8).collect();
        for len in 0..20 {
            for at in 0..len {
                let a = &text[..len];
                let mut b = a.to_vec();
                assert!(same_bytes(a, &b));
                b[at] ^= 1;
                assert!(!same_bytes(a, &b), "{len} {at}");
            }
            assert!(!same_bytes(&text[..len], &text[..len + 1]));
        }
    }

    #[test]
    fn compare_bytes_is_slice_order() {
        let words: [&[u8]; 12] = [
            b"",
            b"a",
            b"ab",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgha",
            b"abcdefgi",
            b"abcdefghabcdefgh",
            b"abcdefghabcdefgi",
            b"abcdefghabcdefgh\xff",
            b"\xff",
            b"abcdefgh\x00",
        ];
        for a in words {
            for b in words {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }
}
