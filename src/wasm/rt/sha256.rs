//! SHA-256 (FIPS 180-4) in the module's runtime.
//!
//! Exported to the rest of the runtime:
//! - `sha256(ptr: i32, len: i32, out: i32)`: writes the 32-byte digest of `len` bytes at `ptr` to `out`.
//!
//! Building blocks, also used by the streaming argument digest in [`super::canon`]:
//! - `sha256_init(state: i32)`: writes the initial hash value (8 little-endian `u32` words, 32 bytes) at `state`;
//! - `sha256_blocks(state: i32, ptr: i32, n: i32)`: compresses `n` consecutive 64-byte blocks at `ptr` into the
//!   state at `state` (`n` may be 0);
//! - `sha256_final(state: i32, ptr: i32, len: i32, total: i32)`: compresses the last `len` bytes of the message (any
//!   length; they are read at `ptr`) with the padding for a message of `total` bytes in all. The digest is then the
//!   state's words written big-endian.
//!
//! The 64 rounds run as a loop of 4 iterations over 16 unrolled rounds: the message schedule lives in 16 locals
//! (round `t` only needs `W[t-2]`, `W[t-7]`, `W[t-15]` and `W[t-16]`, all at fixed offsets modulo 16) and the
//! working variables are renamed instead of shifted, so a round touches memory only to load its constant `K[t]`.
//!
//! Memory: the `K` table is static data; the padding buffer and the state of `sha256` are the sub-range
//! [`SHA256_SCRATCH`]`..+`[`SHA256_SCRATCH_SIZE`] of the per-call scratch (the start of the part of the scratch area
//! that the digest code reserves; see [`super::canon`]).

use wasm_encoder::{BlockType, Function, ValType};

use crate::wasm::layout::SCRATCH_BASE;
use crate::wasm::module::{mem, ModuleBuilder};

/// Start of the scratch sub-range used by `sha256` (its state and the padding buffer).
pub const SHA256_SCRATCH: u32 = SCRATCH_BASE;
/// Size of that sub-range.
pub const SHA256_SCRATCH_SIZE: u32 = 256;
/// The 128-byte buffer where `sha256_final` builds the padded last block(s).
const PAD: u32 = SHA256_SCRATCH;
/// The state of a one-shot `sha256` call.
const STATE: u32 = SHA256_SCRATCH + 128;

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

const IV: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

const I32: ValType = ValType::I32;

pub fn declare(m: &mut ModuleBuilder) {
    m.declare("sha256", &[I32, I32, I32], &[]);
    m.declare("sha256_init", &[I32], &[]);
    m.declare("sha256_blocks", &[I32, I32, I32], &[]);
    m.declare("sha256_final", &[I32, I32, I32, I32], &[]);
}

pub fn define(m: &mut ModuleBuilder) {
    let k: Vec<u8> = K.iter().flat_map(|w| w.to_le_bytes()).collect();
    let k_at = m.raw(&k, 4);
    define_init(m);
    define_blocks(m, k_at);
    define_final(m);
    define_sha256(m);
}

fn define_init(m: &mut ModuleBuilder) {
    let mut f = Function::new([]);
    let mut i = f.instructions();
    for (n, word) in IV.iter().enumerate() {
        i.local_get(0).i32_const(*word as i32).i32_store(mem(4 * n as u64, 4));
    }
    i.end();
    m.define("sha256_init", f);
}

/// Emits a byte swap of the i32 in local `x`, leaving the result on the stack.
fn bswap_local(i: &mut wasm_encoder::InstructionSink<'_>, x: u32) {
    i.local_get(x).i32_const(8).i32_rotl().i32_const(0x00ff_00ff).i32_and();
    i.local_get(x).i32_const(8).i32_rotr().i32_const(0xff00_ff00u32 as i32).i32_and();
    i.i32_or();
}

fn define_blocks(m: &mut ModuleBuilder, k_at: u32) {
    // params: state 0, ptr 1, n 2
    const STATE_P: u32 = 0;
    const PTR: u32 = 1;
    const N: u32 = 2;
    const H: u32 = 3; // H0..H7: 3..=10
    const V: u32 = 11; // working variables a..h: 11..=18
    const W: u32 = 19; // schedule: 19..=34
    const T1: u32 = 35;
    const KP: u32 = 36;
    const TMP: u32 = 37;
    let mut f = Function::new([(35, I32)]);
    let mut i = f.instructions();
    // if n == 0: return
    i.local_get(N).i32_eqz().if_(BlockType::Empty).return_().end();
    for n in 0..8 {
        i.local_get(STATE_P).i32_load(mem(4 * n as u64, 4)).local_set(H + n);
    }
    i.loop_(BlockType::Empty); // per block
    for n in 0..8 {
        i.local_get(H + n).local_set(V + n);
    }
    for n in 0..16 {
        i.local_get(PTR).i32_load(mem(4 * n as u64, 1)).local_set(TMP);
        bswap_local(&mut i, TMP);
        i.local_set(W + n);
    }
    i.i32_const(k_at as i32).local_set(KP);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    for j in 0..16u32 {
        let role = |x: u32| V + (x + 8 - (j % 8)) % 8;
        let (a, b, c, d, e, ff, g, h) = (role(0), role(1), role(2), role(3), role(4), role(5), role(6), role(7));
        // T1 = h + Σ1(e) + Ch(e,f,g) + K[t] + W[t]
        i.local_get(h);
        i.local_get(e).i32_const(6).i32_rotr();
        i.local_get(e).i32_const(11).i32_rotr().i32_xor();
        i.local_get(e).i32_const(25).i32_rotr().i32_xor();
        i.i32_add();
        i.local_get(g).local_get(e).local_get(ff).local_get(g).i32_xor().i32_and().i32_xor();
        i.i32_add();
        i.local_get(KP).i32_load(mem(4 * j as u64, 4)).i32_add();
        i.local_get(W + j).i32_add();
        i.local_set(T1);
        // d += T1
        i.local_get(d).local_get(T1).i32_add().local_set(d);
        // h = T1 + Σ0(a) + Maj(a,b,c)
        i.local_get(T1);
        i.local_get(a).i32_const(2).i32_rotr();
        i.local_get(a).i32_const(13).i32_rotr().i32_xor();
        i.local_get(a).i32_const(22).i32_rotr().i32_xor();
        i.i32_add();
        i.local_get(a).local_get(b).i32_and();
        i.local_get(c).local_get(a).local_get(b).i32_or().i32_and();
        i.i32_or().i32_add();
        i.local_set(h);
    }
    i.local_get(KP).i32_const(64).i32_add().local_tee(KP);
    i.i32_const((k_at + 256) as i32).i32_eq().br_if(1);
    // The next 16 words of the schedule.
    for j in 0..16u32 {
        let w1 = W + (j + 1) % 16;
        let w9 = W + (j + 9) % 16;
        let w14 = W + (j + 14) % 16;
        i.local_get(W + j);
        // σ0(W[t-15])
        i.local_get(w1).i32_const(7).i32_rotr();
        i.local_get(w1).i32_const(18).i32_rotr().i32_xor();
        i.local_get(w1).i32_const(3).i32_shr_u().i32_xor();
        i.i32_add();
        i.local_get(w9).i32_add();
        // σ1(W[t-2])
        i.local_get(w14).i32_const(17).i32_rotr();
        i.local_get(w14).i32_const(19).i32_rotr().i32_xor();
        i.local_get(w14).i32_const(10).i32_shr_u().i32_xor();
        i.i32_add();
        i.local_set(W + j);
    }
    i.br(0);
    i.end().end(); // rounds loop, done block
    for n in 0..8 {
        i.local_get(H + n).local_get(V + n).i32_add().local_set(H + n);
    }
    i.local_get(PTR).i32_const(64).i32_add().local_set(PTR);
    i.local_get(N).i32_const(1).i32_sub().local_tee(N).br_if(0);
    i.end(); // block loop
    for n in 0..8 {
        i.local_get(STATE_P).local_get(H + n).i32_store(mem(4 * n as u64, 4));
    }
    i.end();
    m.define("sha256_blocks", f);
}

fn define_final(m: &mut ModuleBuilder) {
    // params: state 0, ptr 1, len 2, total 3
    const STATE_P: u32 = 0;
    const PTR: u32 = 1;
    const LEN: u32 = 2;
    const TOTAL: u32 = 3;
    const FULL: u32 = 4;
    const REM: u32 = 5;
    const NB: u32 = 6;
    const TMP: u32 = 7;
    let blocks = m.func("sha256_blocks");
    let mut f = Function::new([(4, I32)]);
    let mut i = f.instructions();
    i.local_get(LEN).i32_const(6).i32_shr_u().local_set(FULL);
    i.local_get(STATE_P).local_get(PTR).local_get(FULL).call(blocks);
    i.local_get(LEN).i32_const(63).i32_and().local_set(REM);
    // PAD[0..128] = 0; PAD[0..rem] = tail; PAD[rem] = 0x80
    i.i32_const(PAD as i32).i32_const(0).i32_const(128).memory_fill(0);
    i.i32_const(PAD as i32);
    i.local_get(PTR).local_get(FULL).i32_const(6).i32_shl().i32_add();
    i.local_get(REM).memory_copy(0, 0);
    i.local_get(REM).i32_const(0x80).i32_store8(mem(PAD as u64, 1));
    // one block if the length fits after the 0x80 byte, else two
    i.i32_const(2).i32_const(1).local_get(REM).i32_const(56).i32_ge_u().select().local_set(NB);
    // the bit length (total * 8 as a u64), big-endian, in the last 8 bytes
    i.local_get(TOTAL).i32_const(29).i32_shr_u().local_set(TMP);
    i.local_get(NB).i32_const(6).i32_shl();
    bswap_local(&mut i, TMP);
    i.i32_store(mem(PAD as u64 - 8, 1));
    i.local_get(TOTAL).i32_const(3).i32_shl().local_set(TMP);
    i.local_get(NB).i32_const(6).i32_shl();
    bswap_local(&mut i, TMP);
    i.i32_store(mem(PAD as u64 - 4, 1));
    i.local_get(STATE_P).i32_const(PAD as i32).local_get(NB).call(blocks);
    i.end();
    m.define("sha256_final", f);
}

fn define_sha256(m: &mut ModuleBuilder) {
    // params: ptr 0, len 1, out 2
    const TMP: u32 = 3;
    let init = m.func("sha256_init");
    let fin = m.func("sha256_final");
    let mut f = Function::new([(1, I32)]);
    let mut i = f.instructions();
    i.i32_const(STATE as i32).call(init);
    i.i32_const(STATE as i32).local_get(0).local_get(1).local_get(1).call(fin);
    for n in 0..8u64 {
        i.i32_const(STATE as i32).i32_load(mem(4 * n, 4)).local_set(TMP);
        i.local_get(2);
        bswap_local(&mut i, TMP);
        i.i32_store(mem(4 * n, 1));
    }
    i.end();
    m.define("sha256", f);
}
