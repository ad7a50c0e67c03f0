//! The gateway's HTTP servers against slow and idle clients (issue 28): `remit serve` closes a connection whose
//! request head does not arrive within `--header-timeout` of its first byte (slowloris) and one idle for
//! `--idle-timeout`; past `--max-connections` a new connection waits until one closes, and is then served; an
//! event stream of `remit mcp-proxy --listen` stays open past the idle timeout. Short timeouts, on loopback, each
//! wait bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-slow-clients-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running server, killed when dropped.
struct Server {
    child: Child,
    /// `host:port`
    address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// A policy without a validity window (the tests hold on any date).
const POLICY: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
}
"#;

/// `remit serve` on a free loopback port with `flags`.
fn serve(dir: &Path, flags: &[&str]) -> Server {
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    std::fs::write(dir.join("policy/shop.remit"), POLICY).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_remit"))
        .arg("serve")
        .arg(dir.join("policy"))
        .args(["--listen", "127.0.0.1:0", "--store"])
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the gateway says where it listens").unwrap();
    let address = first.strip_prefix("remit gateway listening on http://").expect(&first).to_string();
    std::thread::spawn(move || for _ in lines {});
    Server { child, address }
}

/// How long until the server closes `stream` (reads return end of file or a reset), at most `within`; `None` when
/// it is still open then. What the server sends meanwhile is appended to `seen`.
fn closed_after(stream: &mut TcpStream, within: Duration, seen: &mut Vec<u8>) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 4096];
    loop {
        let left = within.saturating_sub(started.elapsed());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return Some(started.elapsed()),
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return None,
            Err(_) => return Some(started.elapsed()),
        }
    }
}

/// One `GET /health` on a connection of its own: its response's first line, or why there is none.
fn health(address: &str, within: Duration) -> Result<String, String> {
    let mut stream = TcpStream::connect(address).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(within)).unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).map_err(|e| e.to_string())?;
    Ok(answer.trim_end().to_string())
}

/// A slowloris client sends part of a request head and stalls, or sends it a byte at a time: either way its
/// connection is closed once the header timeout (1 s) has passed since its first byte, though the idle timeout is
/// long; a real client is served meanwhile.
#[test]
fn a_slow_request_head_is_cut_at_the_header_timeout() {
    let dir = fresh_dir("slowloris");
    let server = serve(&dir, &["--header-timeout", "1s", "--idle-timeout", "60s"]);
    let mut stalled = TcpStream::connect(&server.address).unwrap();
    stalled.write_all(b"GET /health HTTP/1.1\r\nhost: te").unwrap();
    let mut dripping = TcpStream::connect(&server.address).unwrap();
    let started = Instant::now();
    let drip = std::thread::spawn(move || {
        // A byte every 200 ms, never finishing the head: until a write fails (the server closed the connection).
        for byte in b"GET /health HTTP/1.1\r\nx-slow: ".iter().chain([b'a'; 200].iter()) {
            if dripping.write_all(&[*byte]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        started.elapsed()
    });
    assert_eq!(health(&server.address, WAIT).unwrap(), "HTTP/1.1 200 OK", "a real client is served meanwhile");
    let mut seen = Vec::new();
    let closed = closed_after(&mut stalled, WAIT, &mut seen).expect("the stalled connection is closed");
    assert!(closed >= Duration::from_millis(700), "closed too soon: {closed:?}");
    assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
    assert!(seen.is_empty(), "no answer to half a request: {}", String::from_utf8_lossy(&seen));
    let dripped = drip.join().unwrap();
    // The drip's writes fail a little after the close (one more byte to notice it).
    assert!(dripped < Duration::from_secs(5), "the dripping client was cut after {dripped:?}");
}

/// A connection that sends nothing, and one kept alive after its request, are closed after the idle timeout (1 s).
#[test]
fn an_idle_connection_is_closed_at_the_idle_timeout() {
    let dir = fresh_dir("idle");
    let server = serve(&dir, &["--idle-timeout", "1s"]);
    let mut silent = TcpStream::connect(&server.address).unwrap();
    let mut kept = TcpStream::connect(&server.address).unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n").unwrap();
    let mut seen = Vec::new();
    let closed = closed_after(&mut silent, WAIT, &mut seen).expect("the silent connection is closed");
    assert!((Duration::from_millis(700)..Duration::from_secs(5)).contains(&closed), "closed after {closed:?}");
    let closed = closed_after(&mut kept, WAIT, &mut seen).expect("the kept connection is closed");
    assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200 OK"), "{}", String::from_utf8_lossy(&seen));
}

/// With `--max-connections 4`, four idle connections hold every slot: a fifth client waits in the accept queue (it
/// is not answered while they are open), and is served once the idle timeout (2 s) has closed them.
#[test]
fn past_the_connection_limit_a_client_waits_until_a_slot_frees() {
    let dir = fresh_dir("limit");
    let server = serve(&dir, &["--max-connections", "4", "--idle-timeout", "2s"]);
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(&server.address).unwrap()).collect();
    // Their slots are taken once the server accepted them: a moment for that.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut waiting = TcpStream::connect(&server.address).unwrap();
    waiting.write_all(b"GET /health HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").unwrap();
    let mut seen = Vec::new();
    assert_eq!(closed_after(&mut waiting, Duration::from_millis(800), &mut seen), None);
    assert!(seen.is_empty(), "served past the limit: {}", String::from_utf8_lossy(&seen));
    let closed = closed_after(&mut waiting, WAIT, &mut seen).expect("served, then closed");
    let answered = started.elapsed();
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200 OK"), "{}", String::from_utf8_lossy(&seen));
    assert!(answered < Duration::from_secs(8), "served after {answered:?} ({closed:?} after waiting)");
    drop(idle);
}

/// `--max-connections 0` and a duration that is not one are refused at start, naming the flag's value.
#[test]
fn bad_connection_flags_are_refused() {
    let dir = fresh_dir("flags");
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    std::fs::write(dir.join("policy/shop.remit"), POLICY).unwrap();
    for (flag, value, says) in [
        ("--max-connections", "0", "0"),
        ("--idle-timeout", "soon", "`soon` is not a duration"),
        ("--header-timeout", "0s", "more than 0"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_remit"))
            .arg("serve")
            .arg(dir.join("policy"))
            .args(["--listen", "127.0.0.1:0", flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
}

/// `remit mcp-proxy --listen` with a 1 s idle timeout: an idle connection is closed after it, while a session's
/// event stream (`GET /mcp`) stays open three times as long — a request in progress is not idle.
#[test]
fn an_open_event_stream_is_not_cut_by_the_idle_timeout() {
    use remit_gateway::client::blocking::request;
    let dir = fresh_dir("stream");
    let python = root().join("tests/mcp/.venv/bin/python");
    assert!(python.exists(), "the MCP test tools are missing: run `./scripts/test-deps.sh`");
    let mut child = Command::new(env!("CARGO_BIN_EXE_remit"))
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/naive"))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(["--listen", "127.0.0.1:0", "--agent-token", "agent:tester=tester-token-1", "--idle-timeout", "1s"])
        .arg("--")
        .arg(&python)
        .arg(root().join("tests/mcp/naive/server.py"))
        .arg(dir.join("record.jsonl"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = errors.next().expect("the URL").unwrap();
        if let Some(url) = line.strip_prefix("remit mcp-proxy: mcp ") {
            break url.to_string();
        }
    };
    std::thread::spawn(move || for _ in errors {});
    let server = Server { child, address: url.trim_start_matches("http://").trim_end_matches("/mcp").to_string() };
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let headers = [("Content-Type", "application/json"), ("Authorization", "Bearer tester-token-1")];
    let opened = request("POST", &url, &headers, Some(initialize.to_string().as_bytes())).unwrap();
    assert_eq!(opened.status, 200);
    let session = opened.header("mcp-session-id").expect("a session").to_string();

    let mut idle = TcpStream::connect(&server.address).unwrap();
    let mut stream = TcpStream::connect(&server.address).unwrap();
    let get = format!(
        "GET /mcp HTTP/1.1\r\nhost: test\r\nauthorization: Bearer tester-token-1\r\nmcp-session-id: {session}\r\n\
         accept: text/event-stream\r\n\r\n"
    );
    stream.write_all(get.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let closed = closed_after(&mut idle, WAIT, &mut seen).expect("the idle connection is closed");
    assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
    let mut events = Vec::new();
    assert_eq!(closed_after(&mut stream, Duration::from_secs(3), &mut events), None, "the event stream was cut");
    let head = String::from_utf8_lossy(&events);
    assert!(head.starts_with("HTTP/1.1 200 OK") && head.contains("text/event-stream"), "{head}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}
