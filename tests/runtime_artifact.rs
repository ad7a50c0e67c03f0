//! The committed runtime artifact, crates/remit-module/runtime.wasm (crates/remit-rt built by scripts/build-runtime.sh):
//! - it was built from the sources in this tree (the hash in its custom section `remit.runtime.sources`), and
//!   rebuilding it with Debian's rustc gives the same bytes (scripts/test-deps.sh installs that toolchain);
//! - it imports nothing, its memory never grows (min = max), it exports what crates/remit-rt/src/wasm.rs says (the
//!   entry points of docs/abi.md, which tests/link.rs runs linked with each policy's image, and the test exports
//!   `rt_*`); a build with a panic path left in is refused;
//! - in wasmtime and in Node it agrees with the crate compiled natively, and with the interpreter's JSON rule
//!   (`remit_lang::json::validate`) and argument digest (`remit_lang::eval::argument_digest`), on the whole decision corpus,
//!   the garbage inputs, and the corpus requests with every element duplicated.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use remit_lang::json::MAX_INPUT;
use remit_rt::json::{JsonError, TAPE_LEN, WINDOW};
use remit_rt::request::{Need, RequestError};
use sha2::{Digest, Sha256};
use support::{corpus, frames, garbage, root, run, temp_dir, unframe};
use wasmparser::{Parser, Payload, TypeRef};
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

const ARTIFACT: &str = "crates/remit-module/runtime.wasm";
const SECTION: &str = "remit.runtime.sources";
const RUSTC: &str = "/usr/bin/rustc";
const WASM32_STD: &str = "/usr/lib/rustlib/wasm32-unknown-unknown/lib";

fn artifact() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| std::fs::read(root().join(ARTIFACT)).unwrap())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hash scripts/build-runtime.sh puts in the artifact: SHA-256 of the `sha256sum` listing of the crate's `.rs`
/// files and the script, in byte order of their paths.
fn sources_hash() -> String {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path.strip_prefix(root()).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut paths = vec!["scripts/build-runtime.sh".to_string()];
    walk(&root().join("crates/remit-rt/src"), &mut paths);
    paths.sort();
    let listing: String = paths
        .iter()
        .map(|p| format!("{}  {p}\n", hex(&Sha256::digest(std::fs::read(root().join(p)).unwrap()))))
        .collect();
    hex(&Sha256::digest(listing.as_bytes()))
}

/// What a module is, as the tests below need it.
#[derive(Debug, Default)]
struct Shape {
    imports: Vec<String>,
    memory: Option<(u64, Option<u64>)>,
    exports: Vec<String>,
    sources: Option<String>,
}

fn shape(bytes: &[u8]) -> Shape {
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.expect("the artifact parses") {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.unwrap();
                    let kind = match import.ty {
                        TypeRef::Func(_) => "func",
                        TypeRef::Memory(_) => "memory",
                        _ => "other",
                    };
                    shape.imports.push(format!("{}.{} ({kind})", import.module, import.name));
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let memory = memory.unwrap();
                    assert!(shape.memory.is_none(), "one memory");
                    shape.memory = Some((memory.initial, memory.maximum));
                }
            }
            Payload::ExportSection(reader) => {
                shape.exports.extend(reader.into_iter().map(|e| e.unwrap().name.to_string()));
            }
            Payload::CustomSection(section) if section.name() == SECTION => {
                shape.sources = Some(String::from_utf8(section.data().to_vec()).unwrap());
            }
            _ => {}
        }
    }
    shape
}

#[test]
fn the_artifact_is_built_from_these_sources() {
    let recorded = shape(artifact()).sources.expect("the artifact names its sources");
    assert_eq!(
        recorded,
        sources_hash(),
        "{ARTIFACT} is stale: crates/remit-rt or scripts/build-runtime.sh changed since it was built; run \
         `./scripts/build-runtime.sh` and commit the artifact"
    );
}

#[test]
fn the_artifact_imports_nothing_and_never_grows() {
    wasmparser::Validator::new().validate_all(artifact()).expect("the artifact validates");
    let shape = shape(artifact());
    assert_eq!(shape.imports, Vec::<String>::new());
    let (min, max) = shape.memory.expect("a memory");
    assert_eq!(Some(min), max, "min = max memory");
    // The memory holds the input, a tape for the largest input, the key buffer and the output.
    let needed = WINDOW + MAX_INPUT + TAPE_LEN * (16 + 4);
    assert!(min as usize * 65536 >= needed, "{min} pages");
    // Past `__heap_base` (where a decision module's image goes, crates/remit-module/src/link.rs), the bare artifact has room for
    // the test exports' output: as much as the input.
    let engine = Engine::default();
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &Module::new(&engine, artifact()).unwrap(), &[]).unwrap();
    let heap_base = instance.get_global(&mut store, "__heap_base").unwrap().get(&mut store).i32().unwrap() as u64;
    assert!(heap_base.next_multiple_of(8) + MAX_INPUT as u64 <= min * 65536, "{heap_base} in {min} pages");
    let exports = [
        "memory",
        "remit_alloc",
        "remit_decide",
        "remit_visible_tools",
        "remit_policy_info",
        "__heap_base",
        "rt_input",
        "rt_json_validate",
        "rt_json_canonical",
        "rt_argument_digest",
        "rt_sha256",
        "rt_request_decode",
    ];
    for name in exports {
        assert!(shape.exports.iter().any(|e| e == name), "exports {name}: {:?}", shape.exports);
    }
}

/// Rebuilding with the same toolchain gives the committed bytes. The toolchain is Debian's (scripts/test-deps.sh).
#[test]
fn rebuilding_the_artifact_gives_the_same_bytes() {
    assert!(
        Path::new(RUSTC).exists() && Path::new(WASM32_STD).exists(),
        "{RUSTC} with the wasm32 standard library is missing: run `./scripts/test-deps.sh` (it installs Debian's \
         rustc, libstd-rust-dev-wasm32 and lld)"
    );
    let out = temp_dir("runtime-rebuild").join("runtime.wasm");
    let built = run(Command::new("scripts/build-runtime.sh").arg(&out).current_dir(root()), Duration::from_secs(300));
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let rebuilt = std::fs::read(&out).unwrap();
    assert!(rebuilt == artifact(), "the rebuilt runtime differs from {ARTIFACT}: run `./scripts/build-runtime.sh`");
}

/// A panic path the optimizer keeps fails the build: the panic handler calls an undefined function, which becomes
/// an import, which the script refuses (the module never traps by panicking).
#[test]
fn a_panic_path_fails_the_runtime_build() {
    assert!(Path::new(RUSTC).exists() && Path::new(WASM32_STD).exists(), "run `./scripts/test-deps.sh`");
    let out = temp_dir("runtime-panic-probe").join("runtime.wasm");
    let built = run(
        Command::new("scripts/build-runtime.sh")
            .arg(&out)
            .env("REMIT_RT_CFG", "remit_rt_panic_probe")
            .current_dir(root()),
        Duration::from_secs(300),
    );
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(!built.status.success(), "the build accepted a panic path: {stderr}");
    assert!(stderr.contains("imports env.remit_rt_panic_path_survived_optimization"), "{stderr}");
    assert!(!out.exists(), "nothing is written");
}

// ---------------------------------------------------------------------------------------------------------------
// The artifact against the native crate and the interpreter.

struct Rt {
    store: Store<()>,
    memory: Memory,
    input: u32,
    validate: TypedFunc<i32, i32>,
    canonical: TypedFunc<i32, i64>,
    digest: TypedFunc<(i32, i32), i64>,
    sha256: TypedFunc<i32, i32>,
    request: TypedFunc<(i32, i32), i32>,
}

impl Rt {
    fn new() -> Rt {
        static MODULE: OnceLock<(Engine, Module)> = OnceLock::new();
        let (engine, module) = MODULE.get_or_init(|| {
            let engine = Engine::default();
            let module = Module::new(&engine, artifact()).unwrap();
            (engine, module)
        });
        let mut store = Store::new(engine, ());
        let instance = Instance::new(&mut store, module, &[]).expect("instantiates with no imports");
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        let input = instance.get_typed_func::<(), i32>(&mut store, "rt_input").unwrap().call(&mut store, ()).unwrap();
        Rt {
            input: input as u32,
            validate: instance.get_typed_func(&mut store, "rt_json_validate").unwrap(),
            canonical: instance.get_typed_func(&mut store, "rt_json_canonical").unwrap(),
            digest: instance.get_typed_func(&mut store, "rt_argument_digest").unwrap(),
            sha256: instance.get_typed_func(&mut store, "rt_sha256").unwrap(),
            request: instance.get_typed_func(&mut store, "rt_request_decode").unwrap(),
            memory,
            store,
        }
    }

    /// Writes `bytes` (at most `MAX_INPUT` of them) to the input buffer; the length to pass.
    fn put(&mut self, bytes: &[u8]) -> i32 {
        let n = bytes.len().min(MAX_INPUT);
        self.memory.write(&mut self.store, self.input as usize, &bytes[..n]).unwrap();
        bytes.len() as i32
    }

    fn unpack(&self, r: i64) -> Result<Vec<u8>, i32> {
        let (ptr, len) = ((r as u64 >> 32) as usize, (r as u64 & 0xffff_ffff) as usize);
        if ptr == 0 {
            return Err(len as i32);
        }
        Ok(self.memory.data(&self.store)[ptr..ptr + len].to_vec())
    }

    fn validate(&mut self, bytes: &[u8]) -> i32 {
        let len = self.put(bytes);
        self.validate.call(&mut self.store, len).unwrap()
    }

    fn canonical(&mut self, bytes: &[u8]) -> Result<Vec<u8>, i32> {
        let len = self.put(bytes);
        let r = self.canonical.call(&mut self.store, len).unwrap();
        self.unpack(r)
    }

    fn digest(&mut self, tool: &str, args: &[u8]) -> Result<Vec<u8>, i32> {
        let both = [tool.as_bytes(), args].concat();
        let len = self.put(&both);
        let r = self.digest.call(&mut self.store, (tool.len() as i32, len)).unwrap();
        self.unpack(r)
    }

    /// `rt_request_decode`: 0 or the reading's error bits, else the number of usable approvals `<< 8`.
    fn request(&mut self, bytes: &[u8], need: Need) -> i32 {
        let len = self.put(bytes);
        self.request.call(&mut self.store, (len, if need == Need::Call { 0 } else { 1 })).unwrap()
    }

    fn sha256(&mut self, bytes: &[u8]) -> Vec<u8> {
        let len = self.put(bytes);
        let at = self.sha256.call(&mut self.store, len).unwrap() as usize;
        self.memory.data(&self.store)[at..at + 32].to_vec()
    }
}

fn code(e: JsonError) -> i32 {
    match e {
        JsonError::Syntax => 1,
        JsonError::Depth => 2,
        JsonError::Duplicate => 3,
        JsonError::TooLarge => 4,
    }
}

/// The native crate's verdict, as the artifact's code.
fn native_code(bytes: &[u8]) -> i32 {
    support::rt_parse(bytes, |parsed| parsed.map_or_else(code, |_| 0))
}

/// The interpreter's verdict, as the artifact's code.
fn interpreter_code(bytes: &[u8]) -> i32 {
    remit_lang::json::validate(bytes).map_or_else(
        |e| match e {
            remit_lang::json::JsonError::Syntax => 1,
            remit_lang::json::JsonError::Depth => 2,
            remit_lang::json::JsonError::Duplicate => 3,
            remit_lang::json::JsonError::TooLarge => 4,
        },
        |_| 0,
    )
}

/// The native crate's canonical JSON of an accepted input.
fn native_canonical(bytes: &[u8]) -> Vec<u8> {
    support::rt_parse(bytes, |parsed| {
        let (doc, keys) = parsed.unwrap();
        let mut buf = vec![0u8; 2 * bytes.len() + 16];
        let mut out = remit_rt::out::Out::new(&mut buf);
        assert!(remit_rt::digest::write_canonical(&mut out, &doc, 0, keys, 0));
        out.written().to_vec()
    })
}

/// Every input the artifact is checked on: the corpus requests, the garbage, and each request with its first key
/// repeated (a duplicate) and with its whole text repeated inside an array (`[r, r]`).
fn inputs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for unit in corpus() {
        for request in unit.requests.iter().chain(&unit.subjects) {
            out.push(request.clone());
            let text = String::from_utf8_lossy(request);
            if let Some(at) = text.find("\":") {
                let key_start = text[..at].rfind('"').unwrap();
                let key = &text[key_start..at + 2];
                out.push(text.replacen(key, &format!("{key} 0, {key}"), 1).into_bytes());
            }
            out.push([b"[".as_slice(), request, b",", request, b"]"].concat());
        }
        if let Some(first) = unit.requests.first() {
            out.extend(garbage(first));
        }
    }
    out
}

#[test]
fn the_artifact_agrees_with_the_native_crate_and_the_interpreter() {
    let mut rt = Rt::new();
    let (mut accepted, mut rejected) = (0, 0);
    for input in inputs() {
        let shown = String::from_utf8_lossy(&input[..input.len().min(200)]).into_owned();
        let wasm = rt.validate(&input);
        assert_eq!(wasm, native_code(&input), "artifact vs native on {shown}");
        let reference = interpreter_code(&input);
        // Both reject the same inputs; the kind may differ only for a duplicate among more than 16 keys (found when
        // the object closes), which the corpus does not have.
        assert_eq!(wasm, reference, "artifact vs interpreter on {shown}");
        if wasm != 0 {
            rejected += 1;
            assert_eq!(rt.canonical(&input), Err(wasm));
            continue;
        }
        accepted += 1;
        let value = remit_lang::json::parse(&input).unwrap();
        for tool in ["pay", "t\"ool\n", "é"] {
            // The tool name and the arguments share the input buffer.
            if tool.len() + input.len() > MAX_INPUT {
                assert_eq!(rt.digest(tool, &input), Err(4));
                continue;
            }
            let digest = rt.digest(tool, &input).expect("digest of an accepted input");
            assert_eq!(String::from_utf8(digest).unwrap(), remit_lang::eval::argument_digest(tool, &value), "{shown}");
        }
        // The canonical text fits the output buffer unless it is longer than the input (`1E3` → `1e+3`).
        let native = native_canonical(&input);
        match rt.canonical(&input) {
            Ok(text) => assert_eq!(text, native, "{shown}"),
            Err(code) => assert!(code == 5 && native.len() > MAX_INPUT, "{code} on {shown}"),
        }
        assert_eq!(rt.sha256(&input), Sha256::digest(&input).to_vec());
    }
    assert!(accepted > 500 && rejected > 30, "{accepted} accepted, {rejected} rejected");
    // No arguments: `{}`.
    let none = rt.digest("t", b"").unwrap();
    assert_eq!(String::from_utf8(none).unwrap(), remit_lang::eval::argument_digest("t", &serde_json::json!({})));
}

/// The native crate's reading of a request, as `rt_request_decode` reports it.
fn native_request(bytes: &[u8], need: Need) -> i32 {
    support::rt_parse(bytes, |parsed| {
        let read = match parsed {
            Err(e) => Err(RequestError::json(e)),
            Ok((doc, keys)) => {
                remit_rt::request::parse(&doc, need).map(|r| r.approvals(&doc, keys, &mut []).map_or(0, <[u32]>::len))
            }
        };
        match read {
            Ok(approvals) => (approvals as i32) << 8,
            Err(e) => i32::from(e.malformed) | i32::from(e.missing) << 1 | i32::from(e.oversize) << 2,
        }
    })
}

/// Requests are read in the artifact as natively (tests/rt_native.rs holds the native reading to the interpreter's)
/// and classified as the interpreter classifies them: the corpus, the inputs above, and mutated requests.
#[test]
fn the_artifact_reads_requests_as_the_native_crate() {
    let mut rt = Rt::new();
    let corpus = corpus();
    let mut requests = inputs();
    let mut rng = support::mutate::Rng(0xa11ce);
    for round in 0..2_000 {
        let unit = &corpus[round % corpus.len()];
        let Some(base) = unit.requests.get(rng.below(unit.requests.len())) else { continue };
        let mut value: serde_json::Value = serde_json::from_slice(base).unwrap();
        support::mutate::mutate(&mut rng, &mut value, 0);
        let text = value.to_string();
        requests.push(if rng.below(4) == 0 { support::mutate::damage(&mut rng, &text) } else { text.into_bytes() });
    }
    let program = &corpus[0].program;
    let (mut read, mut refused) = (0, 0);
    for request in &requests {
        let shown = String::from_utf8_lossy(&request[..request.len().min(200)]).into_owned();
        for need in [Need::Call, Need::Listing] {
            assert_eq!(rt.request(request, need), native_request(request, need), "{need:?}: {shown}");
        }
        let verdict = rt.request(request, Need::Call);
        let codes: Vec<&str> = [(1, "request.malformed"), (2, "request.missing-field"), (4, "request.oversize")]
            .into_iter()
            .filter(|(bit, _)| verdict & 0xff & bit != 0)
            .map(|(_, code)| code)
            .collect();
        let decision = remit_lang::eval::decide(program, request);
        // A request that carries `context.grants` may leave out `context.mandate`: reading it finds nothing missing,
        // and a `request.missing-field` for the mandate then comes from resolving it (no mandate or instance its
        // subject holds), after reading.
        let json: Option<serde_json::Value> = serde_json::from_slice(request).ok();
        let context = json.as_ref().and_then(|j| j.get("context"));
        let resolved_later = context.is_some_and(|c| c.get("grants").is_some_and(|g| g.is_array()))
            && context.and_then(|c| c.get("mandate")).is_none()
            && decision.fields.len() == 1
            && decision.fields[0].field == "context.mandate";
        let reading: Vec<&str> = decision
            .reasons
            .iter()
            .map(String::as_str)
            .filter(|c| ["request.malformed", "request.missing-field", "request.oversize"].contains(c))
            .filter(|c| !(resolved_later && *c == "request.missing-field"))
            .collect();
        assert_eq!(codes, reading, "{shown}");
        if codes.is_empty() {
            read += 1;
        } else {
            refused += 1;
        }
    }
    assert!(read > 300 && refused > 300, "{read} read, {refused} refused");
}

/// A canonical text longer than the output buffer is refused whole (code 5), never truncated.
#[test]
fn an_overflowing_output_is_reported_not_truncated() {
    let mut rt = Rt::new();
    let count = MAX_INPUT / 4 - 1;
    let text = format!("[{}1E1]", "1E1,".repeat(count - 1));
    assert_eq!(rt.validate(text.as_bytes()), 0);
    assert_eq!(rt.canonical(text.as_bytes()), Err(5));
    let shorter = format!("[{}1E1]", "1E1,".repeat(1000));
    assert_eq!(rt.canonical(shorter.as_bytes()).unwrap(), native_canonical(shorter.as_bytes()));
    // Lengths past the input buffer are refused without reading, including negative ones.
    for len in [MAX_INPUT as i32 + 1, -1, i32::MIN] {
        assert_eq!(rt.validate.call(&mut rt.store, len).unwrap(), 4);
        assert_eq!(rt.canonical.call(&mut rt.store, len).unwrap(), 4);
    }
}

/// Node runs the artifact (tests/node/runtime_artifact.mjs) on the same inputs: the same verdicts and digests.
#[test]
fn node_agrees_with_wasmtime() {
    let inputs: Vec<Vec<u8>> = inputs().into_iter().filter(|i| i.len() <= MAX_INPUT).collect();
    let dir = temp_dir("runtime-node");
    std::fs::write(dir.join("inputs"), frames(&inputs)).unwrap();
    let out = run(
        Command::new("node").arg("tests/node/runtime_artifact.mjs").arg(ARTIFACT).arg(dir.join("inputs")),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The inputs file is 14 MB: do not leave one behind per run.
    std::fs::remove_dir_all(&dir).ok();
    let results = unframe(&out.stdout);
    assert_eq!(results.len(), inputs.len());
    let mut rt = Rt::new();
    for (input, result) in inputs.iter().zip(results) {
        let code = rt.validate(input);
        let mut expected = vec![code as u8];
        if code == 0 && input.len() + 3 <= MAX_INPUT {
            expected.extend(rt.digest("pay", input).unwrap());
        }
        assert_eq!(result, expected, "{}", String::from_utf8_lossy(&input[..input.len().min(200)]));
    }
}
