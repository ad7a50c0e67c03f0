//! remit: a policy language and compiler for AI agents acting on behalf of people.
//!
//! The pipeline: [`syntax`] (parse) → [`check`] (resolve, type-check, lint; produces the [`ir`]) →
//! [`eval`] (the reference interpreter). The core does no IO; the `remit` binary owns files, JSON output and the
//! terminal.

pub mod diag;
pub mod source;
pub mod syntax;
pub mod value;
pub mod ir;
pub mod check;
pub mod stdlib;
pub mod eval;
pub mod testing;
