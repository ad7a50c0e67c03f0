//! The wasm32 artifact's exports (scripts/build-runtime.sh builds `src/wasm/runtime.wasm` from this crate): the
//! entry points of docs/abi.md, the fixed buffers every call works in, the panic handler that turns a surviving
//! panic path into an import (which the build refuses), and the custom section that names the sources the artifact
//! was built from.
//!
//! **The decision module** is this artifact plus a policy image, put together by the linker (`src/wasm/link.rs`,
//! no compiler involved): the image is one data segment at `__heap_base` rounded up to 8 ([`image_start`]; wasm-ld
//! defines the symbol, so the runtime knows the address as a constant and the linker reads it from the exported
//! global of the same name), and the output area follows it, [`Header::output_limit`] bytes (8-aligned), up to the
//! end of the memory, which the linker sizes for both. Memory map (`--stack-first`): the shadow stack (64 KiB,
//! growing down to 0), the statics below (input window, tape, scratch, work lists), `__heap_base`, the image, the
//! output area.
//!
//! | export (docs/abi.md) | what |
//! |---|---|
//! | `remit_alloc(len) -> i32` | the input buffer's address, or 0 when `len` (unsigned) is past [`MAX_INPUT`] |
//! | `remit_decide(ptr, len) -> i64` | `crate::decide::decide` on the parsed input, its JSON in the output area, packed `ptr << 32 \| len` |
//! | `remit_visible_tools(ptr, len) -> i64` | `crate::visible::visible_tools`, the same way |
//! | `remit_policy_info() -> i64` | `crate::decide::policy_info` |
//!
//! A `len` past [`MAX_INPUT`] (whatever `ptr` is: the host passes 0 after `remit_alloc` said 0) is the JSON parse's
//! `TooLarge` (`request.oversize`); a `ptr` that is not the input buffer is a `Syntax` fault (`request.malformed`,
//! as the hand-written module answers). Without a valid image (the bare artifact, or a corrupt one) the entry
//! points decide over an empty image and `remit_policy_info` answers no bytes, which no host accepts.
//!
//! The test exports (`rt_*`), for the differential tests (tests/runtime_artifact.rs,
//! tests/node/runtime_artifact.mjs); the linker does not export them:
//!
//! | export | what |
//! |---|---|
//! | `rt_input() -> i32` | address of the input buffer ([`MAX_INPUT`] bytes) |
//! | `rt_json_validate(len) -> i32` | the input's first `len` bytes by the JSON rule: 0 accepted, 1 syntax, 2 depth, 3 duplicate key, 4 too large |
//! | `rt_json_canonical(len) -> i64` | the canonical JSON of an accepted input (the argument digest's form), packed `ptr << 32 \| len`; `ptr` 0 and `len` the code above on a rejected input, 5 when the output overflowed |
//! | `rt_argument_digest(tool_len, len) -> i64` | the input is the tool name (`tool_len` bytes) then the arguments' JSON (none: `{}`); the 71-byte `sha256:…` digest, packed; `ptr` 0 and a code on a rejected input |
//! | `rt_request_decode(len, need) -> i32` | the input read as a request (`need` 0: for a decision, 1: for a tool listing; `crate::request::parse`): 0 or bits 0 `request.malformed`, 1 `request.missing-field`, 2 `request.oversize`; when none is set, the number of usable approvals `<< 8` (tests only) |
//! | `rt_sha256(len) -> i32` | address of the 32-byte SHA-256 of the input's first `len` bytes (of no bytes when `len` is too large) |
//!
//! The test exports write into the output area too, at most [`TEST_OUT_LEN`] bytes of it (in the bare artifact the
//! area is what the build script leaves between `__heap_base` and the end of the memory).
//!
//! Every length is read as unsigned and checked against the buffer before anything is read.
#![allow(unsafe_code)]

use core::ptr::{addr_of, addr_of_mut};

use crate::decide::{decide, policy_info, Work};
use crate::digest::{argument_digest, write_canonical};
use crate::image::{Header, Image};
use crate::json::{parse, Doc, JsonError, Scratch, Tape, Token, Window, TAPE_LEN, WINDOW};
use crate::out::Out;
use crate::request::{self, Need, RequestError};
use crate::sha256::sha256;
use crate::visible::visible_tools;
use crate::{Sink, MAX_INPUT};

/// The most output the test exports write: as much as the input, so that canonical JSON (which writes `1E3` as
/// `1e+3`) can overflow it (tests/runtime_artifact.rs checks that an overflow is reported, not truncated).
pub const TEST_OUT_LEN: usize = MAX_INPUT;

/// The input buffer is the parser's window: the host writes a request at its start.
static mut INPUT: Window = [0; WINDOW + 8];
static mut TAPE: Tape = [Token::new(0, 0, 0, 0, 0, 0); TAPE_LEN];
static mut SCRATCH: Scratch = Scratch::EMPTY;
static mut WORK: Work = Work::EMPTY;
static mut HASH: [u8; 32] = [0; 32];

extern "C" {
    /// Defined by wasm-ld: the first byte past the statics (and the stack). Resolved at link time, not imported:
    /// its address is a constant in the code, and the artifact exports it as the global `__heap_base`.
    static __heap_base: u8;
}

const PAGE: usize = 65_536;

/// Where the linker puts the policy image: `__heap_base` rounded up to 8 (src/wasm/link.rs computes the same from
/// the exported global).
fn image_start() -> usize {
    // Safety: only the symbol's address is taken, never its byte.
    let base = unsafe { addr_of!(__heap_base) as usize };
    base.wrapping_add(7) & !7
}

/// The end of the memory (it never grows: min = max).
fn memory_end() -> usize {
    core::arch::wasm32::memory_size(0).wrapping_mul(PAGE)
}

/// The bytes from `start` to `end` of the memory (none when `start` is past `end`).
///
/// Safety: the caller holds no other reference into the range (calls are not re-entrant, docs/abi.md).
unsafe fn region(start: usize, end: usize) -> &'static mut [u8] {
    let len = end.saturating_sub(start);
    if len == 0 {
        return &mut [];
    }
    // The memory is one allocation from 0 to `memory_end`, and nothing Rust owns lies past `__heap_base`.
    core::slice::from_raw_parts_mut(start as *mut u8, len)
}

/// The policy image, and the output area after it. Without a valid image (the bare artifact) the image is empty
/// and the output area is everything past `__heap_base`.
fn image_and_output() -> (Image<'static>, &'static mut [u8]) {
    // Read once per instance: the image never changes (the host writes only where `remit_alloc` points), and
    // reading and checking its header cost a measurable part of a small decision.
    // Safety: calls are not re-entrant (docs/abi.md).
    if let Some((image, out, out_end)) = unsafe { *addr_of!(LAYOUT) } {
        return (image, unsafe { region(out, out_end) });
    }
    let (image, out, out_end) = layout();
    unsafe { *addr_of_mut!(LAYOUT) = Some((image, out, out_end)) };
    (image, unsafe { region(out, out_end) })
}

/// The image and the output area (start, end) found after `__heap_base`, cached by [`image_and_output`].
static mut LAYOUT: Option<(Image<'static>, usize, usize)> = None;

fn layout() -> (Image<'static>, usize, usize) {
    let (start, end) = (image_start(), memory_end());
    // Safety: the image and the output area are disjoint, past every static, and used only within one call.
    let header = Header::decode(unsafe { region(start, start.saturating_add(Header::SIZE).min(end)) }, 0);
    let len = (header.image_len as usize).min(end.saturating_sub(start));
    let image = Image::new(unsafe { region(start, start.saturating_add(len)) });
    match image {
        Some(image) => {
            let out = start.saturating_add(len).saturating_add(7) & !7;
            let out_end = out.saturating_add(header.output_limit as usize).min(end);
            (image, out, out_end)
        }
        None => (Image { bytes: &[], header: Header::default() }, start, end),
    }
}

/// The output area for a test export: at most [`TEST_OUT_LEN`] bytes.
fn test_output() -> &'static mut [u8] {
    let out = image_and_output().1;
    let len = out.len().min(TEST_OUT_LEN);
    out.get_mut(..len).unwrap_or(&mut [])
}

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

/// The input's first `len` bytes, when `len` is at most [`MAX_INPUT`].
fn input(len: i32) -> Option<&'static [u8]> {
    let len = len as u32 as usize;
    if len > MAX_INPUT {
        return None;
    }
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

/// Parses the input's bytes `start..end` into the tape; the document (over the input's first `end` bytes) and the
/// key buffer.
fn parsed(start: usize, end: usize) -> Result<(Doc<'static>, &'static mut [u32]), JsonError> {
    // Safety: as in `input`; the window, tape and keys are only used within one call, and the window is written
    // (its end marker) before it is read through the document.
    let (window, tape, scratch) =
        unsafe { (&mut *addr_of_mut!(INPUT), &mut *addr_of_mut!(TAPE), &mut *addr_of_mut!(SCRATCH)) };
    let n = parse(window, start, end, tape, scratch)?;
    let window: &'static Window = window;
    let tape: &'static [Token] = tape.get(..n as usize).unwrap_or(&[]);
    Ok((Doc { input: window.get(..end).unwrap_or(&[]), tape }, &mut scratch.keys))
}

/// The request at `ptr`, `len` bytes, parsed: `TooLarge` past [`MAX_INPUT`] (the host passes `ptr` 0 then), a
/// `Syntax` fault when `ptr` is not the input buffer `remit_alloc` hands out.
fn request_at(ptr: i32, len: i32) -> Result<(Doc<'static>, &'static mut [u32]), JsonError> {
    let len = len as u32 as usize;
    if len > MAX_INPUT {
        return Err(JsonError::TooLarge);
    }
    if ptr as u32 as usize != unsafe { addr_of!(INPUT) as usize } {
        return Err(JsonError::Syntax);
    }
    parsed(0, len)
}

/// Runs `write` on the image, the work lists and the output area; what it wrote, packed.
fn answer(write: impl FnOnce(&Image<'static>, &mut Work, &mut Out<'_>)) -> i64 {
    let (image, buf) = image_and_output();
    let ptr = buf.as_ptr() as usize;
    let mut out = Out::new(buf);
    // Safety: as in `input`.
    let work = unsafe { &mut *addr_of_mut!(WORK) };
    write(&image, work, &mut out);
    pack(ptr, out.len())
}

#[no_mangle]
pub extern "C" fn remit_alloc(len: i32) -> i32 {
    if len as u32 as usize > MAX_INPUT {
        return 0;
    }
    unsafe { addr_of!(INPUT) as usize as i32 }
}

#[no_mangle]
pub extern "C" fn remit_decide(ptr: i32, len: i32) -> i64 {
    answer(|image, work, out| decide(image, request_at(ptr, len), work, out))
}

#[no_mangle]
pub extern "C" fn remit_visible_tools(ptr: i32, len: i32) -> i64 {
    answer(|image, work, out| visible_tools(image, request_at(ptr, len), work, out))
}

#[no_mangle]
pub extern "C" fn remit_policy_info() -> i64 {
    answer(|image, _, out| policy_info(image, out))
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
    match parsed(0, len as u32 as usize) {
        Ok(_) => 0,
        Err(e) => code(e),
    }
}

#[no_mangle]
pub extern "C" fn rt_json_canonical(len: i32) -> i64 {
    let (doc, keys) = match parsed(0, len as u32 as usize) {
        Ok(p) => p,
        Err(e) => return pack(0, code(e) as usize),
    };
    let buf = test_output();
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
    let len = len as u32 as usize;
    if len > MAX_INPUT {
        return pack(0, 4);
    }
    let split = (tool_len as u32 as usize).min(len);
    let (digest, complete) = if split == len {
        let tool = input(len as i32).unwrap_or(&[]);
        argument_digest(&Doc { input: &[], tape: &[] }, None, tool, &mut [])
    } else {
        match parsed(split, len) {
            // The document is over the whole input, the tool name included (the parse writes past its end only).
            Ok((doc, keys)) => argument_digest(&doc, Some(0), doc.input.get(..split).unwrap_or(&[]), keys),
            Err(e) => return pack(0, code(e) as usize),
        }
    };
    if !complete {
        return pack(0, 5);
    }
    let buf = test_output();
    let ptr = buf.as_ptr() as usize;
    let mut out = Out::new(buf);
    out.write(&digest);
    pack(ptr, out.len())
}

#[no_mangle]
pub extern "C" fn rt_request_decode(len: i32, need: i32) -> i32 {
    let need = if need == 0 { Need::Call } else { Need::Listing };
    let read = match parsed(0, len as u32 as usize) {
        Err(e) => Err(RequestError::json(e)),
        Ok((doc, keys)) => request::parse(&doc, need).map(|r| r.approvals(&doc, keys, &mut []).map_or(0, <[u32]>::len)),
    };
    match read {
        Ok(approvals) => (approvals as i32) << 8,
        Err(e) => i32::from(e.malformed) | i32::from(e.missing) << 1 | i32::from(e.oversize) << 2,
    }
}

#[no_mangle]
pub extern "C" fn rt_sha256(len: i32) -> i32 {
    let hash = sha256(input(len).unwrap_or(&[]));
    unsafe {
        *addr_of_mut!(HASH) = hash;
        addr_of!(HASH) as usize as i32
    }
}
