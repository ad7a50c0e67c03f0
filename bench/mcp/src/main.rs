//! The latency `remit mcp-proxy` adds to a `tools/call`: the same MCP server (`@modelcontextprotocol/server-filesystem`
//! from tests/mcp) spoken to directly and through the proxy, side by side in one run, over stdio, one call in flight.
//!
//! Each round times `--calls` sequential `read_text_file` calls (allowed by tests/mcp/filesystem, so the proxy
//! decides, logs the decision, forwards, logs the outcome) directly, then the same through the proxy, then a call the
//! policy denies through the proxy (decided and logged, never forwarded); rounds alternate so noise hits both alike.
//! Percentiles are over all calls. With `--baseline PATH` another `remit` binary (e.g. a build of an earlier commit)
//! is timed the same way in the same rounds, so two versions of the proxy are compared side by side. Usage (after
//! `scripts/test-deps-mcp.sh` and `cargo build --release`):
//!
//! ```sh
//! cargo run --release --manifest-path bench/mcp/Cargo.toml -- [--remit target/release/remit] [--baseline OLD_REMIT] \
//!   [--calls 200] [--rounds 10]
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Session {
    fn start(mut command: Command, cwd: &Path) -> Session {
        let mut child = command
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut session = Session { child, stdin, stdout, next: 1 };
        let init = r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#;
        session.call(init);
        writeln!(session.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        session.call(r#""method":"tools/list""#);
        session
    }

    /// Sends a request (`"method":…,"params":…` without id) and returns its response line.
    fn call(&mut self, rest: &str) -> String {
        let id = self.next;
        self.next += 1;
        writeln!(self.stdin, r#"{{"jsonrpc":"2.0","id":{id},{rest}}}"#).unwrap();
        self.stdin.flush().unwrap();
        // The response's own id: first or last member (servers differ), never one inside `result`.
        let (first, last) = (format!(r#"{{"jsonrpc":"2.0","id":{id},"#), format!(r#","id":{id}}}"#));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the server closed its output");
            if line.starts_with(&first) || line.trim_end().ends_with(&last) {
                return line;
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let mut args = std::env::args().skip(1);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let (mut remit, mut calls, mut rounds) = (repo.join("target/release/remit"), 200usize, 10usize);
    let mut baseline: Option<PathBuf> = None;
    while let Some(flag) = args.next() {
        let value = args.next().expect("a value");
        match flag.as_str() {
            "--remit" => remit = PathBuf::from(value),
            "--baseline" => baseline = Some(PathBuf::from(value)),
            "--calls" => calls = value.parse().unwrap(),
            "--rounds" => rounds = value.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    let server = repo.join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(server.exists(), "run scripts/test-deps-mcp.sh first");
    let dir = std::env::temp_dir().join(format!("remit-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("root/workspace")).unwrap();
    std::fs::write(dir.join("root/workspace/a.txt"), "hello\n").unwrap();
    let root = dir.join("root");

    let mut direct = Command::new("node");
    direct.arg(&server).arg(&root);
    let proxy = |remit: &Path, store: &str| {
        let mut proxied = Command::new(remit);
        proxied
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(repo.join("tests/mcp/filesystem"))
            .args(["--subject", "agent:coder", "--store"])
            .arg(format!("sqlite:{}", dir.join(store).display()))
            .arg("--")
            .arg("node")
            .arg(&server)
            .arg(&root);
        Session::start(proxied, &root)
    };
    let mut direct = Session::start(direct, &root);
    let mut proxied = proxy(&remit, "state.db");
    let mut old = baseline.as_deref().map(|b| proxy(b, "baseline.db"));

    let read = r#""method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"workspace/a.txt"}}"#;
    let denied = r#""method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"../secret.txt"}}"#;
    assert!(direct.call(read).contains("hello"));
    let answer = proxied.call(read);
    assert!(answer.contains("hello") && answer.contains(r#""outcome":"allow""#), "{answer}");
    assert!(proxied.call(denied).contains("scope.outside"));
    if let Some(old) = old.as_mut() {
        assert!(old.call(read).contains("hello") && old.call(denied).contains("scope.outside"));
    }

    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load().trim());
    let (mut d, mut p, mut n, mut bp, mut bn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let time = |session: &mut Session, request: &str, samples: &mut Vec<Duration>| {
        for _ in 0..calls {
            let started = Instant::now();
            session.call(request);
            samples.push(started.elapsed());
        }
    };
    for _ in 0..rounds {
        time(&mut direct, read, &mut d);
        time(&mut proxied, read, &mut p);
        time(&mut proxied, denied, &mut n);
        if let Some(old) = old.as_mut() {
            time(old, read, &mut bp);
            time(old, denied, &mut bn);
        }
    }
    println!("load average at end:   {}", load().trim());
    println!("{} calls each, one in flight, in {rounds} interleaved rounds", d.len());
    println!("{:<44} {:>10} {:>10} {:>10}", "", "p50 µs", "p90 µs", "p99 µs");
    let mut rows = vec![
        ("direct to the server (read_text_file)", &mut d),
        ("through remit mcp-proxy (allowed, forwarded)", &mut p),
        ("through remit mcp-proxy (denied, not sent)", &mut n),
    ];
    if old.is_some() {
        rows.push(("baseline proxy (allowed, forwarded)", &mut bp));
        rows.push(("baseline proxy (denied, not sent)", &mut bn));
    }
    for (name, samples) in rows {
        samples.sort();
        let [a, b, c] = [0.5, 0.9, 0.99].map(|q| micros(percentile(samples, q)));
        println!("{name:<44} {a:>10.0} {b:>10.0} {c:>10.0}");
    }
    println!("added by the proxy, p50: {:.0} µs", micros(percentile(&p, 0.5)) - micros(percentile(&d, 0.5)));
    if old.is_some() {
        println!("added by the baseline, p50: {:.0} µs", micros(percentile(&bp, 0.5)) - micros(percentile(&d, 0.5)));
    }
    drop(direct);
    drop(proxied);
    drop(old);
    std::fs::remove_dir_all(&dir).ok();
}
