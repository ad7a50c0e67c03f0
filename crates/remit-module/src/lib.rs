//! The decision module's format, shared by the compiler that writes modules and the hosts that run them: the ABI
//! version (docs/abi.md), the committed runtime artifact ([`RUNTIME`], crates/remit-rt compiled once to wasm32 by
//! scripts/build-runtime.sh), and the linker that puts the artifact and a policy image together ([`link_image`]) or
//! finds the image in a module it did not write ([`linked_image`], how a host knows a module's work is bounded).
//!
//! Depends on nothing of the compiler (no parser, no checker, no diagnostics) and nothing of a host (no wasmtime):
//! wasm-encoder and wasmparser only, and the runtime crate for the image header. The compiler (`remit-lang`) writes
//! images; this crate only moves bytes.

pub mod err;
mod link;

pub use err::{Error, ImageError};
pub use link::{is_linked_runtime, layout, leb128, link_image, linked_image, Layout, RUNTIME};

/// The ABI version exported as the global `remit_abi_version`.
pub const ABI_VERSION: i32 = 1;

/// The custom section that carries the gateway's metadata of a policy (JSON, written by `remit build`; read by
/// `remit serve` and `remit mcp-proxy`).
pub const GATEWAY_SECTION: &str = "remit.gateway";
