//! The WebAssembly backend: compiles a checked [`Program`] into a self-contained decision module (no imports)
//! that answers requests exactly as the reference interpreter does (see docs/abi.md).
//!
//! The program is first lowered to [`tables`] (the backend's IR: interned strings, per-tool rule lists, condition
//! bytecode); the module is the fixed runtime ([`rt`]) plus those tables as static data, emitted with
//! wasm-encoder in one [`module::ModuleBuilder::finish`], which validates it with wasmparser every time.
//!
//! The module version 2 (issue 12, docs/module-v2.md), not used by `remit build` yet: [`link()`] puts the committed
//! runtime artifact (crates/remit-rt, `runtime.wasm`) and the program's policy image ([`image`]) together; its
//! errors are [`err::Error`].

pub mod asm;
pub mod codegen;
pub mod err;
pub mod image;
pub mod layout;
pub mod link;
pub mod module;
pub mod rt;
pub mod vm;

use crate::ir::Program;

pub use link::link;

/// The ABI version exported as the global `remit_abi_version`.
pub const ABI_VERSION: i32 = 1;

/// Compiles a checked program into a validated WebAssembly module.
pub fn compile(program: &Program) -> Result<Vec<u8>, String> {
    // The output area holds the largest decision or listing the policy can write (eval::output_limit).
    let mut m = module::ModuleBuilder::with_output(crate::eval::output_limit(program) as u32);
    rt::declare(&mut m);
    vm::prim::declare(&mut m);
    vm::request::declare(&mut m);
    vm::values::declare(&mut m);
    vm::decide::declare(&mut m);
    let tables = codegen::lower(&mut m, program)?;
    rt::define(&mut m);
    vm::prim::define(&mut m);
    vm::request::define(&mut m);
    vm::values::define(&mut m);
    vm::decide::define(&mut m, &tables);
    m.export_global("remit_abi_version", ABI_VERSION);
    m.export_func("remit_alloc", "remit_alloc");
    m.export_func("remit_decide", "remit_decide");
    m.export_func("remit_visible_tools", "remit_visible_tools");
    m.export_func("remit_policy_info", "remit_policy_info");
    m.finish()
}
