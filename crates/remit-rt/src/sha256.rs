//! SHA-256 (FIPS 180-4), streaming: [`Sha256::write`] any number of times, then [`Sha256::finish`]. The argument
//! digest hashes the canonical text as it is written, so it is never held whole.

use crate::{copy, copy_short, Sink};

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
];

const H0: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// Bytes held before they are compressed: two blocks. A write that fits is one copy, as the output writer's (the
/// canonical JSON comes in pieces of a few bytes: punctuation, keys, short values), and the blocks are compressed in
/// a run when the buffer fills or at [`Sha256::finish`]. Not more: LLVM zeroes a larger buffer with `memory.fill`,
/// which wasmtime runs as a call out of the module (docs/module-v2.md, measured).
const BUF: usize = 128;

/// A hash in progress.
#[derive(Clone, Debug)]
pub struct Sha256 {
    state: [u32; 8],
    /// Bytes not yet compressed.
    buf: [u8; BUF],
    /// Bytes in `buf` (at most `BUF`).
    buffered: usize,
    /// Bytes compressed so far (whole blocks).
    compressed: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256::new()
    }
}

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256 { state: H0, buf: [0; BUF], buffered: 0, compressed: 0 }
    }

    /// The hash of everything written. By reference: moving the hasher here was a copy of it (a `memory.copy` on
    /// wasm32); it is spent afterwards (the padding is in it).
    pub fn finish(&mut self) -> [u8; 32] {
        let bits = self.compressed.wrapping_add(self.buffered as u64).wrapping_mul(8);
        self.byte(0x80);
        // Zeros up to 56 bytes into a block (into the next one when fewer than 8 bytes are left), then the length:
        // the buffer then holds whole blocks only.
        let zeros = (64 + 56 - self.buffered % 64) % 64;
        self.write([0; 64].get(..zeros).unwrap_or(&[]));
        self.write(&bits.to_be_bytes());
        let held = self.buffered;
        self.compress_held(held);
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_exact_mut(4).zip(self.state.iter()) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    /// Compresses the buffer's first `len` bytes: whole blocks (a full buffer, or the padded end) and empties it.
    fn compress_held(&mut self, len: usize) {
        let held = self.buf.get(..len).unwrap_or(&[]);
        compress_blocks(&mut self.state, held);
        self.compressed = self.compressed.wrapping_add(len as u64);
        self.buffered = 0;
    }

    /// A write that does not fit the buffer: the buffer is filled and compressed, then the whole blocks of the rest
    /// straight from `bytes`, and what is left is buffered.
    #[inline(never)]
    fn spill(&mut self, bytes: &[u8]) {
        let room = BUF - self.buffered.min(BUF);
        let (head, rest) = bytes.split_at(room.min(bytes.len()));
        copy(self.buf.get_mut(self.buffered..).unwrap_or(&mut []), head);
        self.compress_held(self.buffered + head.len());
        let whole = rest.len() / 64 * 64;
        let (blocks, tail) = rest.split_at(whole);
        compress_blocks(&mut self.state, blocks);
        self.compressed = self.compressed.wrapping_add(whole as u64);
        copy(&mut self.buf, tail);
        self.buffered = tail.len();
    }
}

impl Sink for Sha256 {
    /// One byte: the canonical JSON writes its quotes, colons and commas one at a time.
    #[inline]
    fn byte(&mut self, byte: u8) {
        match self.buf.get_mut(self.buffered) {
            Some(slot) => {
                *slot = byte;
                self.buffered += 1;
            }
            None => self.spill(&[byte]),
        }
    }

    #[inline(never)]
    fn write(&mut self, bytes: &[u8]) {
        let end = self.buffered + bytes.len();
        match self.buf.get_mut(self.buffered..end) {
            Some(to) => {
                copy_short(to, bytes);
                self.buffered = end;
            }
            None => self.spill(bytes),
        }
    }
}

/// Compresses every whole block of `bytes` into `state`.
fn compress_blocks(state: &mut [u32; 8], bytes: &[u8]) {
    for block in bytes.chunks_exact(64) {
        if let Ok(block) = <&[u8; 64]>::try_from(block) {
            compress(state, block);
        }
    }
}

fn compress(state: &mut [u32; 8], block: &[u8; 64]) {
    // The message schedule in 16 words, each overwritten once it is no longer needed (`W[t-16]` is the word that
    // becomes `W[t]`), at indices that are constants after unrolling, so the words stay in locals instead of a
    // 64-word array in memory. Measured in the wasm32 build: fuel per block 7.7k -> see docs/module-v2.md.
    let mut w = [0u32; 16];
    for (slot, chunk) in w.iter_mut().zip(block.chunks_exact(4)) {
        if let [a, b, c, d] = *chunk {
            *slot = u32::from_be_bytes([a, b, c, d]);
        }
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    // One round, with the working variables' roles rotated by name instead of moved (moving them after every round
    // cost about as much as the round itself). `Ch` and `Maj` in their forms with one operation fewer.
    macro_rules! round {
        ($a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident, $k:expr, $w:expr) => {
            let t1 = $h
                .wrapping_add($e.rotate_right(6) ^ $e.rotate_right(11) ^ $e.rotate_right(25))
                .wrapping_add($g ^ ($e & ($f ^ $g)))
                .wrapping_add($k)
                .wrapping_add($w);
            let t2 = ($a.rotate_right(2) ^ $a.rotate_right(13) ^ $a.rotate_right(22))
                .wrapping_add(($a & $b) | ($c & ($a | $b)));
            $d = $d.wrapping_add(t1);
            $h = t1.wrapping_add(t2);
        };
    }
    // Sixteen rounds from `K[base]`, computing each word of the schedule first when `next` is set.
    macro_rules! sixteen {
        ($base:expr, $next:expr) => {
            sixteen!(@ $base, $next; 0 a b c d e f g h; 1 h a b c d e f g; 2 g h a b c d e f; 3 f g h a b c d e;
                4 e f g h a b c d; 5 d e f g h a b c; 6 c d e f g h a b; 7 b c d e f g h a;
                8 a b c d e f g h; 9 h a b c d e f g; 10 g h a b c d e f; 11 f g h a b c d e;
                12 e f g h a b c d; 13 d e f g h a b c; 14 c d e f g h a b; 15 b c d e f g h a)
        };
        (@ $base:expr, $next:expr; $($t:literal $a:ident $b:ident $c:ident $d:ident $e:ident $f:ident $g:ident $h:ident);*) => {
            $(
                if $next {
                    let w15 = w[($t + 1) & 15];
                    let w2 = w[($t + 14) & 15];
                    let s0 = w15.rotate_right(7) ^ w15.rotate_right(18) ^ (w15 >> 3);
                    let s1 = w2.rotate_right(17) ^ w2.rotate_right(19) ^ (w2 >> 10);
                    w[$t] = w[$t].wrapping_add(s0).wrapping_add(w[($t + 9) & 15]).wrapping_add(s1);
                }
                round!($a, $b, $c, $d, $e, $f, $g, $h, K[$base + $t], w[$t]);
            )*
        };
    }
    sixteen!(0, false);
    let mut base = 16;
    while base < 64 {
        sixteen!(base, true);
        base += 16;
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = s.wrapping_add(v);
    }
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn nist_vectors() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    #[test]
    fn a_million_bytes() {
        // FIPS 180-2's third example: through the buffer and straight from the input.
        let data = vec![b'a'; 1_000_000];
        let expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
        assert_eq!(hex(&sha256(&data)), expected);
        let mut h = Sha256::new();
        for piece in data.chunks(7) {
            h.write(piece);
        }
        assert_eq!(hex(&h.finish()), expected);
    }

    #[test]
    fn bytes_and_writes_of_every_length_hash_like_the_whole() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 13 + i / 5) as u8).collect();
        for piece in 0..=300 {
            let mut h = Sha256::new();
            let mut at = 0;
            // A byte, then `piece` bytes, until the data runs out: the buffer's end falls everywhere.
            while at < data.len() {
                h.byte(data[at]);
                let end = (at + 1 + piece).min(data.len());
                h.write(&data[at + 1..end.max(at + 1)]);
                at = end.max(at + 1);
            }
            assert_eq!(h.finish(), sha256(&data), "pieces of {piece}");
        }
        for len in 0..300 {
            let mut h = Sha256::new();
            for &b in &data[..len] {
                h.byte(b);
            }
            assert_eq!(h.finish(), sha256(&data[..len]), "{len} bytes one at a time");
        }
    }

    #[test]
    fn pieces_hash_like_the_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for split in [0, 1, 55, 56, 63, 64, 65, 128, 999] {
            let mut h = Sha256::new();
            h.write(&data[..split]);
            h.write(&data[split..]);
            assert_eq!(h.finish(), sha256(&data), "split at {split}");
        }
    }
}
