//! The runtime every decision module carries, written as wasm-encoder instruction sequences: JSON parsing into a
//! tape, string and number helpers, the output writer, SHA-256 and the canonical argument digest.
//! Each piece first declares its functions (so pieces may call each other), then defines them.

pub mod canon;
pub mod json;
pub mod out;
pub mod sha256;

use super::module::ModuleBuilder;

pub fn declare(m: &mut ModuleBuilder) {
    json::declare(m);
    out::declare(m);
    sha256::declare(m);
    canon::declare(m);
}

pub fn define(m: &mut ModuleBuilder) {
    json::define(m);
    out::define(m);
    sha256::define(m);
    canon::define(m);
}
