//! The runtime every decision module carries, written as wasm-encoder instruction sequences: JSON parsing into a
//! tape, string and number helpers, the output writer, SHA-256 and the canonical argument digest.
//! Each piece first declares its functions (so pieces may call each other), then defines them.

use super::module::ModuleBuilder;

pub fn declare(m: &mut ModuleBuilder) {
    let _ = m;
}

pub fn define(m: &mut ModuleBuilder) {
    let _ = m;
}
