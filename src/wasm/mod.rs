//! The WebAssembly backend: compiles a checked [`Program`] into a self-contained decision module (no imports)
//! that answers requests exactly as the reference interpreter does (see docs/abi.md).
//!
//! The program is first lowered to [`tables`] (the backend's IR: interned strings, per-tool rule lists, condition
//! bytecode); the module is the fixed runtime ([`rt`]) plus those tables as static data, emitted with
//! wasm-encoder in one [`module::ModuleBuilder::finish`], which validates it with wasmparser every time.

pub mod layout;
pub mod module;
pub mod rt;

use crate::ir::Program;

/// The ABI version exported as the global `remit_abi_version`.
pub const ABI_VERSION: i32 = 1;

/// Compiles a checked program into a validated WebAssembly module.
pub fn compile(program: &Program) -> Result<Vec<u8>, String> {
    let mut m = module::ModuleBuilder::new();
    rt::declare(&mut m);
    rt::define(&mut m);
    let _ = program;
    m.export_global("remit_abi_version", ABI_VERSION);
    m.finish()
}
