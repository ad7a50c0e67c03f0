//! The fixed memory layout of every decision module (see docs/abi.md). Regions are at constant addresses so the
//! runtime code can use them as immediates; the policy's static data comes last.

/// Largest request the module accepts; larger inputs get a `request.oversize` deny.
pub const MAX_INPUT: u32 = 256 * 1024;

/// Per-call request slots written by the request decoder (small fixed records).
pub const SLOTS_BASE: u32 = 1024;
pub const SLOTS_SIZE: u32 = 64 * 1024 - SLOTS_BASE;
/// Where the host writes the request (what `remit_alloc` returns).
pub const INPUT_BASE: u32 = 64 * 1024;
/// The JSON tape: one 16-byte token per JSON value or key.
pub const TAPE_BASE: u32 = INPUT_BASE + MAX_INPUT;
pub const TAPE_TOKEN_SIZE: u32 = 16;
pub const TAPE_CAPACITY: u32 = MAX_INPUT + 8;
/// Scratch space reset on every call: unescaped strings, the canonical argument text, sort buffers.
pub const SCRATCH_BASE: u32 = TAPE_BASE + TAPE_CAPACITY * TAPE_TOKEN_SIZE;
pub const SCRATCH_SIZE: u32 = 4 * MAX_INPUT;
/// The decision (or tool listing) JSON written by the call. Its size is the policy's: the most bytes any decision
/// or listing of that policy can take ([`crate::eval::output_limit`], at least [`OUT_SIZE`] and at most
/// [`crate::eval::MAX_OUTPUT`]); a module built with `ModuleBuilder::new()` has `OUT_SIZE`.
pub const OUT_BASE: u32 = SCRATCH_BASE + SCRATCH_SIZE;
pub const OUT_SIZE: u32 = crate::eval::MIN_OUTPUT as u32;
/// The policy's static data (strings, tables) starts after the output area.
pub const fn data_base(out_size: u32) -> u32 {
    OUT_BASE + out_size
}

pub const PAGE: u32 = 64 * 1024;
