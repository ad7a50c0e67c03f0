//! Syntax: the pest grammar (`grammar/remit.pest`) and its lowering to the [`ast`]. Only this module knows pest.

pub mod ast;
mod err;
pub mod format;
mod parser;

pub use parser::{invisible_name, parse_file, MAX_NESTING};
