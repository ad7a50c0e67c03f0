//! The WebAssembly backend: a checked [`Program`] becomes a self-contained decision module (docs/abi.md: no imports,
//! a fixed memory, the ABI's exports) that answers every request exactly as the reference interpreter does.
//!
//! The module is the runtime written once in Rust (crates/remit-rt), compiled once to wasm32 and committed
//! (crates/remit-module, built by scripts/build-runtime.sh), linked with the policy as data: [`image::write`] lowers
//! the program to a policy image, [`meta`] says what a gateway must know of the policy, and
//! [`remit_module::link_image`] puts the runtime's sections, the image and the metadata together (docs/module-v2.md).
//! No compiler runs at build time. Errors are [`err::Error`].

pub mod image;
pub mod meta;

use crate::ir::Program;

/// The backend's errors: the image writer's and the linker's, one type with stable codes (`remit_module::err`).
pub mod err {
    pub use remit_module::err::{Error, ImageError};
}

pub use remit_module::ABI_VERSION;

/// The decision module of a checked program: the runtime artifact linked with the program's image, with the
/// gateway's metadata in the custom section `remit.gateway`. Validated.
pub fn link(program: &Program) -> Result<Vec<u8>, err::Error> {
    let image = image::write(program)?;
    let meta = meta::PolicyMeta::from_program(program).to_json();
    remit_module::link_image(remit_module::RUNTIME, &image, Some(&meta))
}

/// The decision module of a checked program (what `remit build` writes): [`link()`].
pub fn compile(program: &Program) -> Result<Vec<u8>, err::Error> {
    link(program)
}
