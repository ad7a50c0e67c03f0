//! Why the backend cannot make a decision module of a checked program. None of these is the policy author's
//! mistake that `remit check` could point at: the checker's limits keep every checked program far from the image's
//! and the memory's bounds, and the rest are faults of the runtime artifact (`crates/remit-module/runtime.wasm`) or of the
//! linker itself. So they carry a stable code and a help, but no span. Style: lowercase, no final period.

use std::fmt;

/// Why a program cannot be written as a policy image (the checker's limits keep every checked program far from
/// these): written by the compiler's image writer (`remit_lang::wasm::image`), reported with the linker's errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// The image would pass 4 GiB (offsets are `u32`).
    TooLarge,
    /// A condition nests `and`/`or` deeper than the runtime evaluates, or reads an attribute derived from a
    /// derived attribute (a comparison of comparisons: the runtime reads operands one level deep, and the checker
    /// lowers only written attributes into operands).
    TooDeep,
}

/// An error of the backend (the image writer and [`crate::link_image`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The policy image cannot be written.
    Image(ImageError),
    /// The policy needs more memory than a 32-bit WebAssembly memory has.
    Memory {
        /// Bytes the module would need: the runtime's statics, the image, the output area.
        bytes: u64,
    },
    /// The runtime artifact is not what the linker expects (a missing export, an import, a wrong type…).
    Runtime(String),
    /// The linked module does not validate.
    Invalid(String),
}

impl Error {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Image(ImageError::TooLarge) => "remit::image-too-large",
            Error::Image(ImageError::TooDeep) => "remit::condition-too-deep",
            Error::Memory { .. } => "remit::memory-too-large",
            Error::Runtime(_) => "remit::runtime-artifact",
            Error::Invalid(_) => "remit::invalid-module",
        }
    }

    /// What to do about it.
    pub fn help(&self) -> &'static str {
        match self {
            Error::Image(_) | Error::Memory { .. } => {
                "split the policy into smaller folders, each built into its own module"
            }
            Error::Runtime(_) => {
                "the committed crates/remit-module/runtime.wasm does not match this compiler: rebuild it with \
                 `./scripts/build-runtime.sh`"
            }
            Error::Invalid(_) => "this is a bug in remit, not in the policy; please report it together with the policy",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Image(ImageError::TooLarge) => write!(f, "the policy image would pass 4 GiB"),
            Error::Image(ImageError::TooDeep) => write!(f, "a condition nests deeper than the runtime evaluates"),
            Error::Memory { bytes } => {
                write!(f, "the module would need {bytes} bytes of memory, more than WebAssembly's 4 GiB")
            }
            Error::Runtime(what) => write!(f, "the runtime artifact cannot be linked: {what}"),
            Error::Invalid(what) => write!(f, "the linked module is not valid WebAssembly: {what}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ImageError> for Error {
    fn from(e: ImageError) -> Error {
        Error::Image(e)
    }
}
