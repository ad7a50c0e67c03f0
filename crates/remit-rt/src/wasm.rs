//! The wasm32 artifact's exports (scripts/build-runtime.sh builds `src/wasm/runtime.wasm` from this crate): the
//! fixed buffers every call works in, the panic handler that turns a surviving panic path into an import (which the
//! build refuses), and the custom section that names the sources the artifact was built from.
//!
//! The exports are the runtime's policy-independent pieces, for the differential tests (tests/runtime_artifact.rs,
//! tests/node/runtime_artifact.mjs) until the decision entry points of docs/abi.md come with the policy image:
//!
//! | export | what |
//! |---|---|
//! | `rt_input() -> i32` | address of the input buffer ([`MAX_INPUT`] bytes) |
//! | `rt_json_validate(len) -> i32` | the input's first `len` bytes by the JSON rule: 0 accepted, 1 syntax, 2 depth, 3 duplicate key, 4 too large |
//! | `rt_json_canonical(len) -> i64` | the canonical JSON of an accepted input (the argument digest's form), packed `ptr << 32 \| len`; `ptr` 0 and `len` the code above on a rejected input, 5 when the output overflowed |
//! | `rt_argument_digest(tool_len, len) -> i64` | the input is the tool name (`tool_len` bytes) then the arguments' JSON (none: `{}`); the 71-byte `sha256:…` digest, packed; `ptr` 0 and a code on a rejected input |
//! | `rt_sha256(len) -> i32` | address of the 32-byte SHA-256 of the input's first `len` bytes (of no bytes when `len` is too large) |
//!
//! Every length is read as unsigned and checked against the buffer before anything is read.
#![allow(unsafe_code)]

use core::ptr::{addr_of, addr_of_mut};

use crate::digest::{argument_digest, write_canonical};
use crate::json::{capacity, parse, Doc, JsonError, Token};
use crate::out::Out;
use crate::sha256::sha256;
use crate::{Sink, MAX_INPUT};

const TAPE_LEN: usize = capacity(MAX_INPUT);
/// The output buffer: as large as the input, so that canonical JSON (which writes `1E3` as `1e+3`) can overflow it.
const OUT_LEN: usize = MAX_INPUT;

static mut INPUT: [u8; MAX_INPUT] = [0; MAX_INPUT];
static mut TAPE: [Token; TAPE_LEN] = [Token { kind: 0, flags: 0, count: 0, start: 0, end: 0, next: 0 }; TAPE_LEN];
static mut KEYS: [u32; TAPE_LEN] = [0; TAPE_LEN];
static mut OUT: [u8; OUT_LEN] = [0; OUT_LEN];
static mut HASH: [u8; 32] = [0; 32];

/// The SHA-256 (hex) of the sources this artifact was built from (scripts/build-runtime.sh sets it; the test
/// tests/runtime_artifact.rs recomputes it from the working tree and refuses a stale artifact).
#[link_section = "remit.runtime.sources"]
#[used]
static SOURCES: [u8; 64] = hex64(env!("REMIT_RT_SOURCES"));

const fn hex64(text: &str) -> [u8; 64] {
    let bytes = text.as_bytes();
    let mut out = [b'?'; 64];
    let mut i = 0;
    while i < 64 && i < bytes.len() {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// Any panic path left after optimization calls this undefined function, which makes it an import of the artifact;
/// the build script refuses every import, so the runtime never traps by panicking.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    extern "C" {
        fn remit_rt_panic_path_survived_optimization() -> !;
    }
    unsafe { remit_rt_panic_path_survived_optimization() }
}

fn input(len: i32) -> Option<&'static [u8]> {
    let len = len as u32 as usize;
    // Safety: calls are not re-entrant (docs/abi.md), so no other reference to the buffer is alive.
    unsafe { (*addr_of!(INPUT)).get(..len) }
}

fn code(e: JsonError) -> i32 {
    match e {
        JsonError::Syntax => 1,
        JsonError::Depth => 2,
        JsonError::Duplicate => 3,
        JsonError::TooLarge => 4,
    }
}

fn pack(ptr: usize, len: usize) -> i64 {
    ((ptr as u64) << 32 | len as u64) as i64
}

/// Parses `bytes` into the tape; the document and the key buffer.
fn parsed(bytes: &'static [u8]) -> Result<(Doc<'static>, &'static mut [u32]), JsonError> {
    // Safety: as in `input`; the tape and keys are only used within one call.
    let (tape, keys) = unsafe { (&mut *addr_of_mut!(TAPE), &mut *addr_of_mut!(KEYS)) };
    let n = parse(bytes, tape, keys)?;
    let tape: &'static [Token] = tape.get(..n as usize).unwrap_or(&[]);
    Ok((Doc { input: bytes, tape }, keys))
}

/// Only in the build script's self-test (`REMIT_RT_CFG=remit_rt_panic_probe`, tests/runtime_artifact.rs): an index
/// the optimizer cannot prove in bounds, so the build must fail.
#[cfg(remit_rt_panic_probe)]
#[no_mangle]
pub extern "C" fn rt_panic_probe(i: i32) -> i32 {
    let table = [3, 1, 4, 1, 5];
    table[i as usize]
}

#[no_mangle]
pub extern "C" fn rt_input() -> i32 {
    unsafe { addr_of!(INPUT) as usize as i32 }
}

#[no_mangle]
pub extern "C" fn rt_json_validate(len: i32) -> i32 {
    match input(len) {
        None => code(JsonError::TooLarge),
        Some(bytes) => match parsed(bytes) {
            Ok(_) => 0,
            Err(e) => code(e),
        },
    }
}

#[no_mangle]
pub extern "C" fn rt_json_canonical(len: i32) -> i64 {
    let bytes = match input(len) {
        Some(bytes) => bytes,
        None => return pack(0, 4),
    };
    let (doc, keys) = match parsed(bytes) {
        Ok(p) => p,
        Err(e) => return pack(0, code(e) as usize),
    };
    let buf = unsafe { &mut *addr_of_mut!(OUT) };
    let ptr = buf.as_ptr() as usize;
    let mut out = Out::new(buf);
    let complete = write_canonical(&mut out, &doc, 0, keys, 0);
    if out.overflow() || !complete {
        return pack(0, 5);
    }
    pack(ptr, out.len())
}

#[no_mangle]
pub extern "C" fn rt_argument_digest(tool_len: i32, len: i32) -> i64 {
    let bytes = match input(len) {
        Some(bytes) => bytes,
        None => return pack(0, 4),
    };
    let split = (tool_len as u32 as usize).min(bytes.len());
    let (tool, args) = bytes.split_at(split);
    let (digest, complete) = if args.is_empty() {
        argument_digest(&Doc { input: &[], tape: &[] }, None, tool, &mut [])
    } else {
        match parsed(args) {
            Ok((doc, keys)) => argument_digest(&doc, Some(0), tool, keys),
            Err(e) => return pack(0, code(e) as usize),
        }
    };
    if !complete {
        return pack(0, 5);
    }
    let buf = unsafe { &mut *addr_of_mut!(OUT) };
    let ptr = buf.as_ptr() as usize;
    let mut out = Out::new(buf);
    out.write(&digest);
    pack(ptr, out.len())
}

#[no_mangle]
pub extern "C" fn rt_sha256(len: i32) -> i32 {
    let hash = sha256(input(len).unwrap_or(&[]));
    unsafe {
        *addr_of_mut!(HASH) = hash;
        addr_of!(HASH) as usize as i32
    }
}
