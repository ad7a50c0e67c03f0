//! The WebAssembly backend: a checked [`Program`] becomes a self-contained decision module (docs/abi.md: no imports,
//! a fixed memory, the ABI's exports) that answers every request exactly as the reference interpreter does.
//!
//! The module is the runtime written once in Rust (crates/remit-rt), compiled once to wasm32 and committed
//! (`runtime.wasm`, built by scripts/build-runtime.sh), linked with the policy as data: [`image::write`] lowers the
//! program to a policy image, and [`link::link_image`] puts the runtime's sections and the image together
//! (docs/module-v2.md). No compiler runs at build time. Errors are [`err::Error`].

pub mod err;
pub mod image;
pub mod link;

use crate::ir::Program;

pub use link::link;

/// The ABI version exported as the global `remit_abi_version`.
pub const ABI_VERSION: i32 = 1;

/// The decision module of a checked program (what `remit build` writes): [`link()`], validated, with the gateway's
/// metadata in its custom section `remit.gateway`.
pub fn compile(program: &Program) -> Result<Vec<u8>, err::Error> {
    link(program)
}
