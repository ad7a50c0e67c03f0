//! The standard library, written in remit and embedded in the binary so that every policy has it.

/// `(name, source)` of every standard library file.
pub const FILES: &[(&str, &str)] = &[
    ("std/effects.remit", include_str!("../../../stdlib/effects.remit")),
    ("std/levels.remit", include_str!("../../../stdlib/levels.remit")),
    ("std/approvals.remit", include_str!("../../../stdlib/approvals.remit")),
    ("std/tools.remit", include_str!("../../../stdlib/tools.remit")),
];

/// A source map holding the standard library, ready for a policy's own files.
pub fn sources() -> crate::source::SourceMap {
    let mut map = crate::source::SourceMap::new();
    for (name, text) in FILES {
        map.add(*name, *text);
    }
    map
}

/// Whether `file` of `sources` is a standard library file: one of the first files, as [`sources`] adds them.
pub fn is_library(sources: &crate::source::SourceMap, file: crate::source::FileId) -> bool {
    FILES.get(file as usize).is_some_and(|(name, _)| sources.file(file).name == *name)
}
