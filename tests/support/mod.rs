//! Shared by the tests of what ships around the compiler (tests/hosts.rs, tests/editor.rs, tests/ci_action.rs,
//! tests/tutorial.rs): the decision corpus, running child processes with a deadline, and the dependencies that
//! `scripts/test-deps-hosts.sh` installs (a missing one fails the test, naming the script); `examples` the
//! one loader of the shipped examples and policy folders; `mutate` mutated requests for the differential tests;
//! `postgres` throwaway PostgreSQL servers (scripts/postgres.sh); `replicas` `remit serve` processes on one of them
//! and the audit of what they left there; `rng` the deterministic random sources of every
//! randomised test; `served` a `remit serve` process on a free port; `gateway` a gateway served in-process over
//! HTTP on a free port;
//! `stub` hand-built modules for the hosts' tests;
//! `wasm` a decision module run directly in wasmtime. (`tls.rs`, https servers made at test time, is not a module of
//! this tree: tests/mcp_proxy.rs and the gateway's unit tests include it by path, alone.)
#![allow(dead_code)]

pub mod examples;
pub mod gateway;
pub mod mutate;
pub mod postgres;
pub mod replicas;
pub mod rng;
pub mod served;
pub mod stub;
pub mod wasm;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use remit_lang::check::{check_with, Options};
use remit_lang::ir::Program;
use remit_lang::json::MAX_INPUT;

pub const DEPS: &str = "scripts/test-deps-hosts.sh";

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A path that `scripts/test-deps-hosts.sh` creates; a missing one fails with that script's name.
pub fn installed(relative: &str) -> PathBuf {
    let path = root().join(relative);
    assert!(path.exists(), "`{relative}` is missing: run `./{DEPS}` (it installs the pinned test dependencies)");
    path
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `command` to its end, or kills it and fails after `limit`; stdout and stderr are collected.
pub fn run(command: &mut Command, limit: Duration) -> Output {
    let shown = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        out.read_to_end(&mut bytes).map(|_| bytes)
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        err.read_to_end(&mut bytes).map(|_| bytes)
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("{shown} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output { status, stdout: out.join().unwrap().unwrap(), stderr: err.join().unwrap().unwrap() }
}

pub fn remit_bin() -> &'static str {
    env!("CARGO_BIN_EXE_remit")
}

/// One policy of the corpus: a shipped example or a folder of tests/semantics.
#[derive(Debug)]
pub struct Unit {
    pub name: String,
    pub dir: PathBuf,
    pub program: Program,
    /// Every request: the `requests/` folder, then every test case's request (as `remit test` sends it).
    pub requests: Vec<Vec<u8>>,
    /// Subjects for tool listings (the example's `subjects/` folder, when it has one).
    pub subjects: Vec<Vec<u8>>,
}

/// The folders of tests/semantics only the interpreter decides yet (as tests/semantics.rs runs them); the corpus
/// leaves them out, as every test of it compares engines or hosts. None today: `grants` (instances of templates in
/// `context.grants`) runs on every engine since the runtime reads them.
pub const INTERPRETER_ONLY: [&str; 0] = [];

/// Every example and every folder of tests/semantics (but [`INTERPRETER_ONLY`]). The examples are checked as
/// `remit build` checks them (with the narrowing proof, which a template's `proved` in the module's metadata
/// records); the semantics folders as `remit test` does (they hold deliberately widening sub-mandates, so the proof
/// is off: decisions never depend on it).
pub fn corpus() -> Vec<Unit> {
    use examples::sorted;
    let mut dirs: Vec<PathBuf> = sorted(&root().join("examples")).into_iter().filter(|p| p.is_dir()).collect();
    let only = |p: &PathBuf| INTERPRETER_ONLY.iter().any(|name| p.file_name().is_some_and(|f| f == *name));
    dirs.extend(sorted(&root().join("tests/semantics")).into_iter().filter(|p| p.is_dir() && !only(p)));
    dirs.into_iter()
        .map(|dir| {
            let name = dir.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
            // Named relative to the folder, as `remit build FOLDER` names them (imports stay inside the folder).
            let mut sources = remit_lang::stdlib::sources();
            for (file, text) in examples::remit_files(&dir) {
                sources.add(file, text);
            }
            let narrowing = dir.starts_with(root().join("examples"));
            let checked = check_with(sources, Options { narrowing });
            let program =
                checked.program.unwrap_or_else(|| panic!("{name} does not check: {:#?}", checked.diagnostics));
            let requests = examples::requests(&dir);
            let subjects = examples::subjects(&dir);
            Unit { name, dir, program, requests, subjects }
        })
        .collect()
}

/// Inputs no gateway should send; every one must be denied. The last one is oversize (as tests/runtime.rs).
pub fn garbage(valid: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![
        Vec::new(),
        b"not json".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{\"subject\":".to_vec(),
        valid[..valid.len() / 2].to_vec(),
        vec![b'['; 100_000],
        b"{\"subject\":{\"id\":1e999999},\"action\":{\"name\":[]},\"context\":{}}".to_vec(),
        b"{\"subject\":{\"id\":\"\\ud800\"}}".to_vec(),
    ];
    let text = String::from_utf8_lossy(valid).into_owned();
    if let Some(at) = text.find("\"id\": \"").or_else(|| text.find("\"id\":\"")) {
        let mut bytes = valid.to_vec();
        let quote = at + text[at..].find(": \"").map_or(5, |i| i + 3);
        bytes.splice(quote..quote, [0xff, 0xc0, 0x80]);
        out.push(bytes);
    }
    const JSONISH: &[u8] = b"{}[]\":,0123456789.-etrufalsn \\";
    let mut rng = rng::XorShift(0x2545_f491_4f6c_dd1d);
    for i in 0..24 {
        let len = [1, 7, 64, 300, 2_000, 40_000][i % 6];
        let bytes = (0..len)
            .map(|_| {
                let seed = rng.next();
                if i.is_multiple_of(2) {
                    JSONISH[(seed % JSONISH.len() as u64) as usize]
                } else {
                    seed as u8
                }
            })
            .collect();
        out.push(bytes);
    }
    let mut at_limit = valid.to_vec();
    at_limit.resize(MAX_INPUT, b' '); // exactly the limit: decided normally
    out.push(at_limit);
    let mut oversize = valid.to_vec();
    oversize.resize(MAX_INPUT + 1, b' ');
    out.push(oversize);
    out
}

/// Frames: a 4-byte big-endian length, then the bytes (the hosts' `--frames` format).
pub fn frames(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for item in items {
        out.extend((item.len() as u32).to_be_bytes());
        out.extend(item);
    }
    out
}

pub fn unframe(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.len() >= 4, "a truncated frame");
        let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        out.push(bytes[4..4 + len].to_vec());
        bytes = &bytes[4 + len..];
    }
    out
}

/// The runtime crate's buffers (crates/remit-rt/src/json.rs: fixed-size arrays, so the parse loop needs no
/// lengths), boxed.
pub struct RtBuffers {
    window: Box<remit_rt::json::Window>,
    tape: Box<remit_rt::json::Tape>,
    scratch: Box<remit_rt::json::Scratch>,
}

impl RtBuffers {
    fn new() -> RtBuffers {
        use remit_rt::json::{Token, TAPE_LEN, WINDOW};
        RtBuffers {
            window: vec![0u8; WINDOW + 8].into_boxed_slice().try_into().unwrap(),
            tape: vec![Token::default(); TAPE_LEN].into_boxed_slice().try_into().unwrap(),
            scratch: Box::new(remit_rt::json::Scratch::EMPTY),
        }
    }
}

/// Calls `f` with the runtime crate's parse of `bytes` (natively): the document and the key buffer, or the error.
/// The buffers are made once per thread and reused, as the artifact reuses its memory: whatever an earlier, longer
/// input left past the end of this one must not change anything.
pub fn rt_parse<R>(
    bytes: &[u8],
    f: impl FnOnce(Result<(remit_rt::json::Doc<'_>, &mut [u32]), remit_rt::json::JsonError>) -> R,
) -> R {
    thread_local! {
        static BUFFERS: std::cell::RefCell<Option<RtBuffers>> = const { std::cell::RefCell::new(None) };
    }
    BUFFERS.with(|cell| {
        let mut guard = cell.borrow_mut();
        let b = guard.get_or_insert_with(RtBuffers::new);
        let len = bytes.len().min(remit_rt::MAX_INPUT);
        b.window[..len].copy_from_slice(&bytes[..len]);
        match remit_rt::json::parse(&mut b.window, 0, bytes.len(), &mut b.tape, &mut b.scratch) {
            Ok(n) => {
                let doc = remit_rt::json::Doc { input: &b.window[..bytes.len()], tape: &b.tape[..n as usize] };
                f(Ok((doc, &mut b.scratch.keys[..])))
            }
            Err(e) => f(Err(e)),
        }
    })
}
