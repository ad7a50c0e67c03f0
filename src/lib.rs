//! remit: a policy language and compiler for AI agents acting on behalf of people.
//!
//! The pipeline: [`syntax`] (parse) → [`check`] (resolve, type-check, lint; produces the [`ir`]) →
//! [`eval`] (the reference interpreter). The core does no IO; the `remit` binary owns files, JSON output and the
//! terminal.

pub mod analysis;
pub mod check;
pub mod diag;
pub mod eval;
pub mod gateway;
pub mod ir;
pub mod json;
pub mod picture;
pub mod runtime;
pub mod source;
pub mod stdlib;
pub mod syntax;
pub mod testing;
pub mod value;
pub mod wasm;
