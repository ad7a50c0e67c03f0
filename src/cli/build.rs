//! `remit build` (a policy to a WebAssembly decision module, optionally precompiled) and `remit eval` of a compiled
//! policy (`.wasm` / `.cwasm`) through the host runtime.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit::runtime::Runtime;

use super::Format;

/// `remit build PATHS… -o OUT [--precompile]`.
pub fn run(paths: &[PathBuf], output: &Path, precompile: bool) -> Result<ExitCode, String> {
    let (program, _, _) = super::compile(paths, Format::Human)?;
    let Some(program) = program else { return Ok(ExitCode::from(1)) };
    let wasm = remit::wasm::compile(&program).map_err(|e| format!("cannot compile the policy: {e}"))?;
    // What a gateway needs besides the decisions (holders, approval kinds, budget windows), in a custom section
    // that runtimes skip: `remit serve policy.wasm` knows what `remit serve FOLDER` knows.
    let wasm = remit::gateway::meta::embed(&wasm, &remit::gateway::PolicyMeta::from_program(&program));
    let (bytes, what) = if precompile {
        (Runtime::new()?.precompile(&wasm)?, format!("precompiled module (from {} bytes of wasm)", wasm.len()))
    } else {
        (wasm, "module".to_string())
    };
    std::fs::write(output, &bytes).map_err(|e| format!("cannot write `{}`: {e}", output.display()))?;
    eprintln!("wrote {} ({} bytes): {what}, policy {}", output.display(), bytes.len(), program.hash);
    Ok(ExitCode::SUCCESS)
}

/// The compiled policy among `remit eval`'s paths: a single `.wasm` or `.cwasm` file.
pub fn compiled_policy(paths: &[PathBuf]) -> Option<&Path> {
    match paths {
        [path] if path.extension().is_some_and(|e| e == "wasm" || e == "cwasm") => Some(path),
        _ => None,
    }
}

/// `remit eval policy.wasm --request REQ.json`: the same bytes (and newline) as evaluating the sources.
pub fn eval(policy: &Path, request: &[u8]) -> Result<ExitCode, String> {
    let compiled = std::sync::Arc::new(Runtime::new()?.load_file(policy)?);
    let mut evaluator = compiled.evaluator()?;
    let mut decision = evaluator.decide(request);
    decision.push(b'\n');
    use std::io::Write;
    std::io::stdout().write_all(&decision).map_err(|e| format!("cannot write the decision: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
