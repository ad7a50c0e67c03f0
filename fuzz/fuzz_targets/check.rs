//! Fuzzes the compiler's front end: any text given as a policy file (next to the standard library) must be
//! checked without a panic; a policy that checks must compile to a module (`remit build` refuses nothing
//! `remit check` accepts); a file that parses must format (`remit fmt`: same tokens, a fixed point) to a file that
//! parses again.
//! Run: `cargo +nightly fuzz run check` from the repository root (see fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if remit_lang::syntax::parse_file(0, text).is_ok() {
        let formatted = remit_lang::syntax::format::format(text).expect("a file that parses formats");
        assert!(remit_lang::syntax::parse_file(0, &formatted).is_ok(), "the formatted file parses");
    }
    let mut sources = remit_lang::stdlib::sources();
    sources.add("fuzz.remit", text);
    let checked = remit_lang::check::check(sources);
    if let Some(program) = checked.program.filter(|_| !checked.diagnostics.iter().any(|d| d.is_error())) {
        remit_lang::wasm::compile(&program).expect("a policy that checks compiles");
    }
});
