//! `remit build` (a policy to a WebAssembly decision module, optionally precompiled) and `remit eval` of a compiled
//! policy (`.wasm` / `.cwasm`) and `remit tools` of one, through the host runtime.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use remit_host::Runtime;

use super::Format;

/// How `remit build` packages the module.
#[derive(Debug, Default)]
pub struct Packaging {
    pub precompile: bool,
    /// Write a bundle (module + manifest), signed with this secret key file when given.
    pub bundle: bool,
    pub sign: Option<PathBuf>,
    pub revision: Option<u64>,
}

/// `remit build PATHS… -o OUT [--precompile | --bundle [--sign KEY] [--revision N]]`.
pub fn run(paths: &[PathBuf], output: &Path, packaging: Packaging) -> Result<ExitCode, String> {
    let Packaging { precompile, bundle, sign, revision } = packaging;
    if sign.is_some() && !bundle {
        return Err("`--sign` signs a bundle: add `--bundle`".into());
    }
    if precompile && bundle {
        return Err("a bundle carries the portable `.wasm`: drop `--precompile`".into());
    }
    let key = match &sign {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            Some(remit_gateway::bundle::signing_key(&text).map_err(|e| format!("`{}`: {e}", path.display()))?)
        }
        None => None,
    };
    let (program, sources, _) = super::compile(paths, Format::Human)?;
    let Some(program) = program else { return Ok(ExitCode::from(1)) };
    // Module v2: the runtime linked with the policy's image, and what a gateway needs besides the decisions
    // (holders, approval kinds, budget windows) in the custom section `remit.gateway`, which runtimes skip:
    // `remit serve policy.wasm` knows what `remit serve FOLDER` knows.
    let wasm = remit_lang::wasm::link(&program).map_err(|e| format!("cannot compile the policy: {e}"))?;
    let (bytes, what) = if precompile {
        (Runtime::new()?.precompile(&wasm)?, format!("precompiled module (from {} bytes of wasm)", wasm.len()))
    } else if bundle {
        let files = sources
            .files()
            .filter(|(_, f)| !f.name.starts_with("std/"))
            .map(|(_, f)| (f.name.as_str(), f.text.as_str()));
        let digest = remit_gateway::bundle::sources_digest(files);
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let built_at = remit_lang::value::format_timestamp(since as i64);
        // Without `--revision`, one more than the bundle this one replaces: monotonic for every bundle published to
        // the same file, with no clock (build hosts' clocks differ, and a clock set back would number backwards). A
        // lost file starts again at 1, which a gateway that served more refuses: it fails closed, naming `--revision`.
        let revision =
            revision.unwrap_or_else(|| remit_gateway::bundle::revision_at(output).map_or(1, |r| r.saturating_add(1)));
        let data = data_files(paths)?;
        let bytes = remit_gateway::bundle::write_with_data(
            &wasm,
            &data,
            &program.hash,
            revision,
            digest,
            built_at,
            key.as_ref(),
        );
        let what = if key.is_some() { "signed bundle" } else { "unsigned bundle" };
        let with = match data.len() {
            0 => String::new(),
            n => format!(", {n} data file{}", if n == 1 { "" } else { "s" }),
        };
        (bytes, format!("{what}, revision {revision}{with}"))
    } else {
        (wasm, "module".to_string())
    };
    std::fs::write(output, &bytes).map_err(|e| format!("cannot write `{}`: {e}", output.display()))?;
    eprintln!("wrote {} ({} bytes): {what}, policy {}", output.display(), bytes.len(), program.hash);
    Ok(ExitCode::SUCCESS)
}

/// The data files a bundle carries: every `.json`, `.jsonl` and `.csv` file of the `data/` folder of each policy
/// folder among `paths`, as `data/NAME`, sorted by name; each read as the gateway will read it (a bad record stops
/// the build, naming the file and the line), so that no bundle is signed that a gateway would refuse.
fn data_files(paths: &[PathBuf]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files = Vec::new();
    for folder in paths.iter().filter(|p| p.is_dir()).map(|p| p.join("data")).filter(|p| p.is_dir()) {
        let entries = std::fs::read_dir(&folder).map_err(|e| format!("cannot read `{}`: {e}", folder.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("cannot read `{}`: {e}", folder.display()))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
            if !path.is_file() || remit_gateway::data::Format::of_file(&name).is_none() {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            let name = format!("data/{name}");
            if files.iter().any(|(seen, _): &(String, Vec<u8>)| *seen == name) {
                return Err(format!("two policy folders have `{name}`: give each data file its own name"));
            }
            files.push((name, bytes));
        }
    }
    files.sort();
    remit_gateway::bundle::read_data(&files)?;
    Ok(files)
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

/// `remit tools policy.wasm --subject REQ.json`: the listing JSON the module gives (the interpreter's bytes).
pub fn visible_tools(policy: &Path, request: &[u8]) -> Result<String, String> {
    let compiled = std::sync::Arc::new(Runtime::new()?.load_file(policy)?);
    let listing = compiled.evaluator()?.visible_tools(request);
    let listing = String::from_utf8(listing).map_err(|_| "the module's tool listing is not UTF-8".to_string())?;
    if listing.starts_with("{\"visible\":[],\"hidden\":[],\"error\"") {
        return Err(format!("the module failed: {listing}"));
    }
    Ok(listing)
}
