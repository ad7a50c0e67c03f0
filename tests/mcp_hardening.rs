//! `remit mcp-proxy` against what an attack review found (issue 28): a request sent as a JSON-RPC notification (no
//! `id`) never reaches the upstream undecided, over stdio and over Streamable HTTP; an upstream's message over the
//! proxy's 4 MiB limit fails its call at once and the next message is read as the next one. The upstream is
//! tests/mcp/naive/server.py: a server that, unlike the official SDKs, runs every `tools/call` it reads, with or
//! without an id, and records every message it gets. Everything runs in a temporary folder, on loopback, and every
//! wait is bounded.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let python = root().join("tests/mcp/.venv/bin/python");
    assert!(
        python.exists(),
        "the MCP test tools are missing: run `./scripts/test-deps.sh` (or scripts/test-deps-mcp.sh)"
    );
    python
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-mcp-hardening-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The proxy in front of the naive server (its record in `dir/record.jsonl`, its store `dir/state.db`).
struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    errors: Receiver<String>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Proxy {
    fn start(dir: &Path, flags: &[&str]) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_remit"))
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(root().join("tests/mcp/naive"))
            .arg("--store")
            .arg(format!("sqlite:{}", dir.join("state.db").display()))
            .args(flags)
            .args(["--upstream-timeout", "30", "--"])
            .arg(python())
            .arg(root().join("tests/mcp/naive/server.py"))
            .arg(dir.join("record.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the proxy");
        let lines = read_lines(child.stdout.take().unwrap());
        let errors = read_lines(child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        Proxy { child, stdin, lines, errors }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the proxy writes to the agent.
    fn next(&self) -> Value {
        let line = self.lines.recv_timeout(WAIT).expect("a message from the proxy in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The stderr lines so far (and those that come within `within`).
    fn said(&self, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut said = Vec::new();
        while let Ok(line) = self.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            said.push(line);
        }
        said
    }

    /// Ends the agent's input (the proxy stops its upstream, writes its log and exits), then kills what is left.
    fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().ok();
        std::thread::sleep(Duration::from_millis(500));
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn read_lines(from: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (send, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// What the naive server recorded: every message it got, `{"method", "id", "name"}`.
fn record(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("record.jsonl")).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// Every entry of the proxy's log, read after it stopped.
fn log_entries(dir: &Path) -> Vec<remit_gateway::store::LogEntry> {
    let store = remit_gateway::sqlite::SqliteStore::open_existing(&dir.join("state.db")).unwrap();
    let entries = remit_gateway::store::Store::begin_read(&store).unwrap().log_entries(0, 1000).unwrap();
    entries
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
}

fn call(id: Option<u64>, name: &str, arguments: Value) -> Value {
    let mut message =
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    if let Some(id) = id {
        message["id"] = json!(id);
    }
    message
}

/// Requests sent as notifications (no `id`): a 9,999 USD payment that needs the owner's approval, a tool the policy
/// does not declare, an allowed one, and other requests; then the notifications MCP defines for a client.
fn undecided() -> Vec<Value> {
    vec![
        call(None, "send_payment", json!({"to": "mallory", "amount": "9999.00 USD"})),
        call(None, "wipe_disk", json!({})),
        call(None, "echo", json!({"text": "sneaked"})),
        json!({"jsonrpc": "2.0", "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "method": "resources/read", "params": {"uri": "file:///etc/passwd"}}),
        json!({"jsonrpc": "2.0", "method": "x-vendor/run", "params": {"name": "wipe_disk"}}),
    ]
}

/// The naive server got no request without an id (it would have run it), and it got the client notification that
/// passes (`notifications/roots/list_changed`) and the call that was decided.
fn nothing_undecided_reached(dir: &Path) {
    let record = record(dir);
    for message in &record {
        let method = message["method"].as_str().unwrap();
        if !method.starts_with("notifications/") {
            assert!(!message["id"].is_null(), "a request without an id reached the upstream: {message}; {record:?}");
        }
    }
    let names: Vec<&str> = record.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["echo"], "only the decided call ran: {record:?}");
    assert!(record.iter().any(|m| m["method"] == "notifications/roots/list_changed"), "{record:?}");
}

/// The refused messages are in the gateway's log as `refused` entries (subject, method, tool), and no decision was
/// made for them.
fn refusals_logged(dir: &Path, subject: &str) {
    let entries = log_entries(dir);
    let refused: Vec<Value> =
        entries.iter().filter(|e| e.kind == "refused").map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    let methods: Vec<&str> = refused.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        ["tools/call", "tools/call", "tools/call", "tools/list", "resources/read", "x-vendor/run"],
        "{refused:?}"
    );
    assert_eq!(refused[0]["tool"], "send_payment");
    assert_eq!(refused[1]["tool"], "wipe_disk");
    assert!(refused.iter().all(|r| r["subject"] == subject && r["reason"] == "mcp.request-without-id"));
    let decisions = entries.iter().filter(|e| e.kind == "decision").count();
    assert_eq!(decisions, 1, "only the echo with an id was decided");
}

#[test]
fn a_request_without_an_id_never_reaches_the_upstream_over_stdio() {
    let dir = fresh_dir("stdio");
    let mut proxy = Proxy::start(&dir, &["--subject", "agent:tester"]);
    proxy.send(&initialize(1));
    assert!(proxy.next()["result"]["serverInfo"].is_object());
    proxy.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for message in undecided() {
        proxy.send(&message);
    }
    proxy.send(&json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    proxy.send(&call(Some(2), "echo", json!({"text": "decided"})));
    // The refused notifications are not answered (JSON-RPC answers no notification): the next line is the echo's.
    let answer = proxy.next();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "decided", "{answer}");
    proxy.stop();
    nothing_undecided_reached(&dir);
    let said = proxy.said(Duration::from_millis(200)).join("\n");
    assert!(
        said.contains(
            "refused `tools/call` (tool `send_payment`) from `agent:tester`: a request without an id is not forwarded"
        ),
        "{said}"
    );
    refusals_logged(&dir, "agent:tester");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_request_without_an_id_never_reaches_the_upstream_over_http() {
    use remit_gateway::client::blocking::request;
    let dir = fresh_dir("http");
    let proxy = Proxy::start(&dir, &["--listen", "127.0.0.1:0", "--agent-token", "agent:tester=tester-token-1"]);
    let deadline = Instant::now() + WAIT;
    let url = loop {
        let line = proxy.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the URL");
        if let Some(url) = line.strip_prefix("remit mcp-proxy: mcp ") {
            break url.to_string();
        }
    };
    let post = |session: Option<&str>, version: Option<&str>, body: &Value| {
        let mut headers = vec![("Content-Type", "application/json"), ("Authorization", "Bearer tester-token-1")];
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
        }
        if let Some(version) = version {
            headers.push(("MCP-Protocol-Version", version));
        }
        request("POST", &url, &headers, Some(body.to_string().as_bytes())).unwrap()
    };
    let opened = post(None, None, &initialize(1));
    assert_eq!(opened.status, 200);
    let session = opened.header("mcp-session-id").expect("a session").to_string();
    let session = Some(session.as_str());
    assert_eq!(post(session, None, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).status, 202);
    let undecided = undecided();
    for (at, message) in undecided.iter().enumerate() {
        // In a session, and (the first) in the stateless revision 2026-07-28, which needs none.
        let refused = if at == 0 { post(None, Some("2026-07-28"), message) } else { post(session, None, message) };
        assert_eq!(refused.status, 400, "{message}: {}", refused.json());
        let body = refused.json();
        assert_eq!(body["id"], Value::Null, "{body}");
        assert_eq!(body["error"]["code"], -32600, "{body}");
        let text = body["error"]["message"].as_str().unwrap();
        assert!(text.contains("is a request: it needs an `id`"), "{text}");
    }
    let roots = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    assert_eq!(post(session, None, &roots).status, 202, "a client notification still passes");
    let answer = post(session, None, &call(Some(2), "echo", json!({"text": "decided"}))).json();
    assert_eq!(answer["result"]["content"][0]["text"], "decided", "{answer}");
    let mut proxy = proxy;
    Command::new("kill").args(["-TERM", &proxy.child.id().to_string()]).status().ok();
    proxy.stop();
    nothing_undecided_reached(&dir);
    refusals_logged(&dir, "agent:tester");
    std::fs::remove_dir_all(&dir).ok();
}

/// The naive server answers `big` with 5 MiB of text on one line, more than the proxy relays: the call fails at once
/// with an error naming the limit (not after the 30 s upstream timeout), and the next call is answered as usual (the
/// rest of the long line was not read as further messages).
#[test]
fn an_oversize_upstream_answer_fails_its_call_at_once_and_the_next_call_works() {
    let dir = fresh_dir("oversize");
    let mut proxy = Proxy::start(&dir, &["--subject", "agent:tester"]);
    proxy.send(&initialize(1));
    assert!(proxy.next()["result"]["serverInfo"].is_object());
    // Twice: once on the reader's way (tools known), once more after it.
    for round in 0..2 {
        let id = 10 + 2 * round;
        let started = Instant::now();
        proxy.send(&call(Some(id), "big", json!({})));
        let failed = proxy.next();
        let took = started.elapsed();
        assert_eq!(failed["id"], id, "{failed}");
        let message = failed["error"]["message"].as_str().unwrap_or_else(|| panic!("an error: {failed}"));
        assert!(message.contains("larger than 4194304 bytes"), "{message}");
        assert!(took < Duration::from_secs(10), "the oversize answer took {took:?}");
        proxy.send(&call(Some(id + 1), "echo", json!({"text": "after"})));
        let next = proxy.next();
        assert_eq!(next["id"], id + 1, "{next}");
        assert_eq!(next["result"]["content"][0]["text"], "after", "{next}");
    }
    proxy.stop();
    let said = proxy.said(Duration::from_millis(200)).join("\n");
    assert!(!said.contains("not a JSON-RPC message"), "the rest of the line was read as messages: {said}");
    std::fs::remove_dir_all(&dir).ok();
}
