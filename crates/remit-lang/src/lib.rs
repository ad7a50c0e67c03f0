//! The remit language and its compiler: a policy's sources in, a checked program, its decisions and its decision
//! module out.
//!
//! The pipeline: [`syntax`] (parse, with the grammar at the repository's `grammar/remit.pest`) → [`check`] (resolve,
//! type-check, lint, prove that every delegation narrows; produces the [`ir`]) → [`eval`] (the reference interpreter,
//! which defines the semantics) | [`wasm`] (the policy image and the decision module, linked by `remit-module`).
//! Beside it: [`analysis`] (what the editor asks: symbols, hovers), [`picture`] (graphs, diffs, explanations),
//! [`testing`] (the policy test runner), [`native`] (the module's runtime called natively over a program's image),
//! [`time`] (zone tables from the compiled-in tzdb, local time, calendars; the runtime's twin is `remit_rt::time`).
//!
//! Must not depend on: an async runtime, an HTTP stack, a database, or wasmtime. The crate does no IO: the `remit`
//! binary owns files, the terminal and output formats; gateways own time and state and pass them in.

pub mod analysis;
pub mod check;
pub mod diag;
pub mod eval;
pub mod ir;
pub mod json;
pub mod native;
pub mod picture;
pub mod source;
pub mod stdlib;
pub mod syntax;
pub mod testing;
pub mod time;
pub mod value;
pub mod wasm;
