//! `remit mcp-proxy` in front of a real MCP server (`@modelcontextprotocol/server-filesystem` from npm, pinned in
//! tests/mcp/package-lock.json and installed by `scripts/test-deps-mcp.sh`), driven over its stdin/stdout the way an
//! MCP client drives it: one JSON-RPC message per line, protocol revision 2025-06-18 — by the test itself (exact
//! messages, bad input, crashes) and by a real client, the official Python SDK (tests/mcp/client.py). The policy is
//! tests/mcp/filesystem: reads inside `workspace/` allowed, writes there need the owner's approval, anything else
//! (`..`, absolute paths, other folders) denied. The escalated write is approved over the inbox's HTTP API on the
//! loopback port the proxy serves, then retried. Everything runs in a temporary folder, on loopback, and every wait
//! is bounded. https (key sets, upstreams) against servers with certificates the tests make (tests/support/tls.rs).
//!
//! One file of about 2,700 lines, on purpose: its thirty-odd scenarios share one harness (the proxy's process, the
//! upstreams, the inbox calls, below), and every file in tests/ is a binary of its own linking the whole workspace
//! (about 300 MB and a link each in a debug build), so splitting it by scenario would multiply that for no gain in
//! what each scenario can reach.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/tls.rs"]
mod tls;
// Throwaway PostgreSQL servers (scripts/postgres.sh), alone: the rest of tests/support is not needed here.
#[path = "support/postgres.rs"]
#[allow(dead_code)]
mod postgres;

const WAIT: Duration = Duration::from_secs(30);
const OWNER_TOKEN: &str = "owner-inbox-token";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The filesystem server's entry point; missing → the set-up script to run.
fn server() -> PathBuf {
    let path = root().join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        path.exists(),
        "the MCP test server is missing: run `./scripts/test-deps.sh` (or scripts/test-deps-mcp.sh)"
    );
    path
}

/// A fresh folder: `root/` is what the filesystem server may touch (`workspace/a.txt` inside, `secret.txt` beside).
fn sandbox(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-mcp-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(dir.join("root/workspace")).unwrap();
    std::fs::write(dir.join("root/workspace/a.txt"), "hello from the workspace\n").unwrap();
    std::fs::write(dir.join("root/secret.txt"), "the owner's secret\n").unwrap();
    dir
}

/// One side of an MCP session over a child's stdin/stdout.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    errors: Receiver<String>,
    dir: PathBuf,
    /// Notifications read while waiting for a response ([`Session::notification`] finds them here).
    skipped: Vec<Value>,
}

impl Drop for Session {
    /// Closes the session as a client does (end of input: a stdio proxy stops its upstream and exits); then SIGTERM
    /// (an HTTP proxy stops on it); kills what has not exited within a few seconds.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let exited = |child: &mut Child, within: Duration| {
            let deadline = Instant::now() + within;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        };
        if exited(&mut self.child, Duration::from_secs(2)) {
            return;
        }
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().ok();
        if !exited(&mut self.child, Duration::from_secs(3)) {
            self.child.kill().ok();
            self.child.wait().ok();
        }
    }
}

impl Session {
    /// The URL of the proxy's `/mcp` endpoint, from the line it prints when it listens (by `deadline`).
    fn mcp_url(&self, deadline: Instant) -> String {
        loop {
            let line = self.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the URL");
            if let Some(url) = line.strip_prefix("remit mcp-proxy: mcp ") {
                return url.to_string();
            }
        }
    }

    fn spawn(mut command: Command, dir: &Path) -> Session {
        let mut child = command
            .current_dir(dir.join("root"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the process");
        let (send, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let (send, errors) = channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Session { child, stdin, lines, errors, dir: dir.to_path_buf(), skipped: Vec::new() }
    }

    /// The proxy for `subject`, in front of the filesystem server on `dir/root` (started through `sh`, which
    /// writes the server's pid to `dir/upstream.pid`), with its inbox on a free loopback port.
    fn proxy(dir: &Path, subject: &str) -> Session {
        Session::proxy_with(dir, subject, &[])
    }

    /// [`Session::proxy`] with more flags for the proxy.
    fn proxy_with(dir: &Path, subject: &str, flags: &[&str]) -> Session {
        let store = format!("sqlite:{}", dir.join("state.db").display());
        Session::proxy_on(dir, subject, &store, flags)
    }

    /// [`Session::proxy_with`] over the store `store` (`sqlite:PATH` or `postgres://…`).
    fn proxy_on(dir: &Path, subject: &str, store: &str, flags: &[&str]) -> Session {
        let upstream = format!(
            "echo $$ > '{}'; exec node '{}' '{}'",
            dir.join("upstream.pid").display(),
            server().display(),
            dir.join("root").display()
        );
        let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
        command
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(root().join("tests/mcp/filesystem"))
            .args(["--subject", subject, "--credential", "cred-1"])
            .args(["--store", store])
            .args(["--inbox", "127.0.0.1:0", "--inbox-token", &format!("user:owner={OWNER_TOKEN}")])
            .args(flags)
            .args(["--upstream-timeout", "30", "--", "sh", "-c", &upstream]);
        Session::spawn(command, dir)
    }

    /// The filesystem server alone (for comparing what the proxy passes through).
    fn direct(dir: &Path) -> Session {
        let mut command = Command::new("node");
        command.arg(server()).arg(dir.join("root"));
        Session::spawn(command, dir)
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method}).to_string());
    }

    fn notify_with(&mut self, method: &str, params: Value) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string());
    }

    /// The next message with `id` (notifications on the way are kept aside).
    fn response(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("no response to id {id} in time"));
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message.get("id") == Some(id) {
                return message;
            }
            if message.get("method").is_some() {
                self.skipped.push(message);
            }
        }
    }

    /// The first notification of `method` (one kept aside, or the next to come).
    fn notification(&mut self, method: &str) -> Value {
        if let Some(at) = self.skipped.iter().position(|m| m["method"] == method) {
            return self.skipped.remove(at);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("no `{method}` in time"));
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if message["method"] == method {
                return message;
            }
            if message.get("method").is_some() {
                self.skipped.push(message);
            }
        }
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&message.to_string());
        self.response(&json!(id))
    }

    fn initialize(&mut self) -> Value {
        let params = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "remit-tests", "version": "1"}});
        let answer = self.request(0, "initialize", params);
        self.notify("notifications/initialized");
        answer
    }

    fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        let answer = self.request(id, "tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(answer.get("result").is_some(), "a tool result: {answer}");
        answer["result"].clone()
    }

    /// The inbox's base URL, as the proxy printed it on stderr.
    fn inbox(&mut self) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.errors.recv_timeout(left).expect("the proxy prints its inbox URL");
            if let Some(url) = line.strip_prefix("remit mcp-proxy: inbox ") {
                return url.trim_end_matches("/inbox").to_string();
            }
        }
    }
}

/// The official Python SDK's client (tests/mcp/client.py) through the proxy: handshake, listing, allowed read,
/// denied traversal, escalated write approved over HTTP, retried and allowed once.
#[test]
fn the_official_python_sdk_client_works_through_the_proxy() {
    sdk_over_stdio("sdk", false);
}

/// The same flow over stdio in the stateless revision 2026-07-28: the client's `server/discover` instead of
/// `initialize`, every request carrying the revision in its `_meta`.
#[test]
fn the_official_python_sdk_client_over_stdio_in_the_stateless_revision() {
    sdk_over_stdio("sdk-stateless", true);
}

fn sdk_over_stdio(name: &str, stateless: bool) {
    let dir = sandbox(name);
    let python = python();
    let store = format!("sqlite:{}", dir.join("state.db").display());
    let owner = format!("user:owner={OWNER_TOKEN}");
    let policy = root().join("tests/mcp/filesystem");
    let mut command = Command::new(python);
    command
        .arg(root().join("tests/mcp/client.py"))
        .arg("--cwd")
        .arg(dir.join("root"))
        .args(["--token", OWNER_TOKEN, "--errlog"])
        .arg(dir.join("proxy.log"))
        .args(stateless.then_some("--stateless"))
        .args(["--", env!("CARGO_BIN_EXE_remit"), "mcp-proxy", "--policy"])
        .arg(&policy)
        .args(["--subject", "agent:coder", "--store", &store, "--inbox", "127.0.0.1:0", "--inbox-token", &owner])
        .args(["--", "node"])
        .arg(server())
        .arg(dir.join("root"))
        .stdin(Stdio::null());
    let report = client_report(command, &dir.join("proxy.log"));
    check_report_at(&report, &dir, if stateless { "2026-07-28" } else { "2025-06-18" });
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs the Python client to its end (bounded) and parses the report it prints.
fn client_report(mut command: Command, log: &Path) -> Value {
    let (send, done) = channel();
    std::thread::spawn(move || {
        let _ = send.send(command.output());
    });
    let output = done.recv_timeout(Duration::from_secs(150)).expect("the client finishes").expect("run python");
    let log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(output.status.success(), "{}\n{log}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the client prints its report")
}

/// What tests/mcp/client.py must have seen, over either transport.
fn check_report(report: &Value, dir: &Path) {
    check_report_at(report, dir, "2025-06-18");
}

fn check_report_at(report: &Value, dir: &Path, protocol: &str) {
    assert_eq!(report["server"], "remit-mcp-proxy");
    assert_eq!(report["protocol"], protocol);
    let tools = json!(["create_directory", "get_file_info", "list_directory", "read_text_file", "write_file"]);
    assert_eq!(report["tools"], tools);
    assert_eq!(report["read"], json!({"is_error": false, "text": "hello from the workspace\n"}));
    assert_eq!(report["traversal"]["is_error"], true);
    assert!(report["traversal"]["text"].as_str().unwrap().contains("scope.outside"), "{report}");
    assert_eq!(report["escalated"]["is_error"], true);
    let access = report["escalated"]["access_request"].as_str().unwrap();
    assert!(report["escalated"]["text"].as_str().unwrap().contains(access), "{report}");
    assert_eq!(report["approved"], 200);
    assert_eq!(report["retried"]["is_error"], false, "{report}");
    assert_eq!(report["retried"]["outcome"], "allow");
    let written = std::fs::read_to_string(dir.join("root/workspace/from-sdk.txt")).unwrap();
    assert_eq!(written, "written through the SDK\n");
    assert_eq!(report["again"]["is_error"], true);
    assert!(report["again"]["text"].as_str().unwrap().contains("access request"), "{report}");
}

fn python() -> PathBuf {
    let python = root().join("tests/mcp/.venv/bin/python");
    assert!(python.exists(), "the MCP client is missing: run `./scripts/test-deps.sh` (or scripts/test-deps-mcp.sh)");
    python
}

/// `remit mcp-proxy --listen` on a free loopback port in front of the filesystem server on `dir/root`, with the
/// bearer token `coder-token-1` for `agent:coder`, the owner's inbox token and `flags`; the proxy and its `/mcp` URL.
fn filesystem_over_http(dir: &Path, flags: &[&str]) -> (Session, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/filesystem"))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(["--listen", "127.0.0.1:0", "--agent-token", "agent:coder=coder-token-1"])
        .args(flags)
        .args(["--inbox-token", &format!("user:owner={OWNER_TOKEN}"), "--", "node"])
        .arg(server())
        .arg(dir.join("root"));
    let proxy = Session::spawn(command, dir);
    let url = proxy.mcp_url(Instant::now() + WAIT);
    (proxy, url)
}

/// The official Python SDK's HTTP client (tests/mcp/client.py) through the proxy at `url` as `agent:coder`, the
/// whole filesystem flow checked (trusting the CA file `ca` through `SSL_CERT_FILE`, for https).
fn sdk_over_http(url: &str, dir: &Path, ca: Option<&str>) {
    let mut sdk = Command::new(python());
    sdk.arg(root().join("tests/mcp/client.py"))
        .args(["--http", url, "--agent-token", "coder-token-1", "--token", OWNER_TOKEN])
        .stdin(Stdio::null());
    if let Some(ca) = ca {
        sdk.env("SSL_CERT_FILE", ca);
    }
    let report = client_report(sdk, &dir.join("none.log"));
    check_report(&report, dir);
}

/// The proxy over Streamable HTTP (`--listen`), with two agents' bearer tokens: the official Python SDK's HTTP
/// client through it, and the transport's refusals (no token, a foreign origin, no session, another agent's
/// session, GET) with the exact status codes.
#[test]
fn streamable_http_with_bearer_tokens() {
    use remit_gateway::client::blocking::request;
    let dir = sandbox("http");
    let (proxy, url) = filesystem_over_http(&dir, &["--agent-token", "agent:stranger=stranger-token-1"]);
    sdk_over_http(&url, &dir, None);

    let post = |token: Option<&str>, session: Option<&str>, origin: Option<&str>, body: &Value| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
        }
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        request("POST", &url, &headers, Some(body.to_string().as_bytes())).unwrap()
    };
    let init = initialize_message();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(post(None, None, None, &init).status, 401);
    assert_eq!(post(Some("wrong-token-1"), None, None, &init).status, 401);
    // The scheme's name in any case (HTTP's authentication schemes are case-insensitive); another scheme is no token.
    let raw = |authorization: &str| {
        let headers = [("Content-Type", "application/json"), ("Authorization", authorization)];
        request("POST", &url, &headers, Some(init.to_string().as_bytes())).unwrap().status
    };
    assert_eq!(raw("bearer coder-token-1"), 200);
    assert_eq!(raw("BEARER  coder-token-1"), 200);
    assert_eq!(raw("Basic coder-token-1"), 401);
    assert_eq!(post(Some("coder-token-1"), None, Some("http://evil.example"), &init).status, 403);
    assert_eq!(post(Some("coder-token-1"), None, Some("http://localhost:3000"), &init).status, 200);
    assert_eq!(post(Some("coder-token-1"), None, None, &list).status, 400, "no session");

    let stranger = post(Some("stranger-token-1"), None, None, &init);
    assert_eq!(stranger.status, 200);
    let session = stranger.header("mcp-session-id").expect("a session").to_string();
    let listed = post(Some("stranger-token-1"), Some(&session), None, &list);
    assert_eq!(listed.json()["result"]["tools"], json!([]), "the stranger holds no mandate: no tool");
    assert_eq!(post(Some("coder-token-1"), Some(&session), None, &list).status, 404, "another agent's session");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(Some("stranger-token-1"), Some(&session), None, &note).status, 202);
    let garbage = request(
        "POST",
        &url,
        &[("Authorization", "Bearer stranger-token-1"), ("Mcp-Session-Id", &session)],
        Some(b"{not json"),
    )
    .unwrap();
    assert_eq!((garbage.status, garbage.json()["error"]["code"].clone()), (400, json!(-32700)));
    let get = request("GET", &url, &[("Authorization", "Bearer stranger-token-1")], None).unwrap();
    assert_eq!(get.status, 405);
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

fn text(result: &Value) -> String {
    result["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    names
}

#[test]
fn the_agent_sees_its_tools_reads_inside_is_denied_outside_and_writes_after_approval() {
    let dir = sandbox("flow");
    let mut proxy = Session::proxy(&dir, "agent:coder");
    let inbox = proxy.inbox();

    let init = proxy.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "remit-mcp-proxy");
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");

    // The listing: the five declared and granted tools of the fourteen the server has, schemas as the server
    // wrote them.
    let list = proxy.request(1, "tools/list", json!({}));
    let shown = names(&list);
    assert_eq!(shown, ["create_directory", "get_file_info", "list_directory", "read_text_file", "write_file"]);
    let mut direct = Session::direct(&dir);
    direct.initialize();
    let all = direct.request(1, "tools/list", json!({}));
    assert!(names(&all).len() > shown.len() + 5, "the server has more tools: {:?}", names(&all));
    for tool in list["result"]["tools"].as_array().unwrap() {
        let original = all["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == tool["name"]).unwrap();
        assert_eq!(tool, original, "the proxy passes a visible tool through unchanged");
    }
    drop(direct);

    // A read inside the workspace reaches the server.
    let read = proxy.call(2, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(!is_error(&read), "{read}");
    assert_eq!(text(&read), "hello from the workspace\n");
    assert_eq!(read["_meta"]["remit.dev/decision"]["outcome"], "allow");

    // Traversal and paths outside the workspace are denied with the reason and the rule; nothing is read.
    for (id, path) in
        [(3, "workspace/../secret.txt".to_string()), (4, dir.join("root/secret.txt").display().to_string())]
    {
        let denied = proxy.call(id, "read_text_file", json!({"path": path}));
        assert!(is_error(&denied), "{denied}");
        let said = text(&denied);
        assert!(said.contains("remit denied this call"), "{said}");
        assert!(said.contains("scope.outside"), "{said}");
        assert!(said.contains("scope read_only: resource.id under \"workspace/\""), "the rule: {said}");
        if id == 3 {
            // `..` could leave the folder: the scope fails closed, and says on what.
            assert!(
                said.contains("which fails closed: `resource.id` is not a path that stays under its prefix"),
                "{said}"
            );
        }
        assert!(!said.contains("secret"), "{said}");
        assert_eq!(denied["_meta"]["remit.dev/decision"]["outcome"], "deny");
    }

    // A write escalates: nothing is written, the agent is told the access request and where it waits.
    let write = json!({"path": "workspace/notes.txt", "content": "approved words\n"});
    let escalated = proxy.call(5, "write_file", write.clone());
    assert!(is_error(&escalated), "{escalated}");
    let said = text(&escalated);
    let access = escalated["_meta"]["remit.dev/decision"]["access_request"]["id"].as_str().unwrap().to_string();
    assert!(said.contains(&format!("access request {access}")), "{said}");
    assert!(said.contains(&format!("{inbox}/inbox/{access}")), "{said}");
    assert!(said.contains("file_write") && said.contains("approval.missing"), "{said}");
    assert!(!dir.join("root/workspace/notes.txt").exists());

    // The owner approves in the inbox; the same call is then allowed once and reaches the server.
    let url = format!("{inbox}/inbox/api/requests/{access}/approve");
    let auth = format!("Bearer {OWNER_TOKEN}");
    let approved =
        remit_gateway::client::blocking::request("POST", &url, &[("Authorization", auth.as_str())], None).unwrap();
    assert_eq!(approved.status, 200, "{}", approved.json());
    let allowed = proxy.call(6, "write_file", write.clone());
    assert!(!is_error(&allowed), "{allowed}");
    assert_eq!(allowed["_meta"]["remit.dev/decision"]["outcome"], "allow");
    assert_eq!(std::fs::read_to_string(dir.join("root/workspace/notes.txt")).unwrap(), "approved words\n");

    // The approval was single use; other content is another call.
    let again = proxy.call(7, "write_file", write);
    assert!(is_error(&again) && text(&again).contains("access request"), "{again}");
    let other = proxy.call(8, "write_file", json!({"path": "workspace/notes.txt", "content": "other words\n"}));
    assert!(is_error(&other) && text(&other).contains("access request"), "{other}");
    assert_eq!(std::fs::read_to_string(dir.join("root/workspace/notes.txt")).unwrap(), "approved words\n");

    // Every decision and every forwarded call's outcome is in the log, and the chain holds.
    drop(proxy);
    let store = format!("sqlite:{}", dir.join("state.db").display());
    let verify = Command::new(env!("CARGO_BIN_EXE_remit")).args(["audit", "verify", &store]).output().unwrap();
    let out = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{out}");
    // 7 decisions, 1 approval, 2 outcomes (the read and the approved write).
    assert!(out.starts_with("10 entries, the chain holds"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A real MCP session through `remit mcp-proxy --store postgres://…` (a server of scripts/postgres.sh): a read
/// inside the workspace allowed, a traversal denied, a write escalated, approved in the inbox and then allowed
/// once; every decision, the approval and the forwarded calls' outcomes are in the database's log, which `remit
/// audit verify postgres://…` verifies — and stops verifying once an entry is edited.
#[test]
fn an_mcp_session_over_the_postgresql_store_decides_and_its_log_verifies() {
    let dir = sandbox("postgres");
    let server = postgres::Server::start();
    let url = server.url().to_string();
    let mut proxy = Session::proxy_on(&dir, "agent:coder", &url, &[]);
    let inbox = proxy.inbox();
    proxy.initialize();

    let read = proxy.call(1, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(!is_error(&read), "{read}");
    assert_eq!(text(&read), "hello from the workspace\n");
    assert_eq!(read["_meta"]["remit.dev/decision"]["outcome"], "allow");
    let denied = proxy.call(2, "read_text_file", json!({"path": "workspace/../secret.txt"}));
    assert!(is_error(&denied) && text(&denied).contains("scope.outside"), "{denied}");
    assert_eq!(denied["_meta"]["remit.dev/decision"]["outcome"], "deny");

    let write = json!({"path": "workspace/notes.txt", "content": "approved words\n"});
    let escalated = proxy.call(3, "write_file", write.clone());
    assert_eq!(escalated["_meta"]["remit.dev/decision"]["outcome"], "escalate", "{escalated}");
    let access = escalated["_meta"]["remit.dev/decision"]["access_request"]["id"].as_str().unwrap().to_string();
    // The access request is a row of the database: the inbox reads it there.
    assert_eq!(server.query(&format!("SELECT status FROM access_requests WHERE id = '{access}'")), "pending");
    let url_approve = format!("{inbox}/inbox/api/requests/{access}/approve");
    let auth = format!("Bearer {OWNER_TOKEN}");
    let approved =
        remit_gateway::client::blocking::request("POST", &url_approve, &[("Authorization", auth.as_str())], None)
            .unwrap();
    assert_eq!(approved.status, 200, "{}", approved.json());
    let allowed = proxy.call(4, "write_file", write.clone());
    assert_eq!(allowed["_meta"]["remit.dev/decision"]["outcome"], "allow", "{allowed}");
    assert_eq!(std::fs::read_to_string(dir.join("root/workspace/notes.txt")).unwrap(), "approved words\n");
    let again = proxy.call(5, "write_file", write);
    assert!(is_error(&again), "the approval was single use: {again}");
    assert_eq!(server.query("SELECT count(*) FROM approvals WHERE consumed"), "1");
    // The proxy is a writer of its own, named after its command (a replica is `remit serve PID`).
    assert_eq!(server.query("SELECT count(*) FROM writers WHERE name LIKE 'remit mcp-proxy %'"), "1");
    // The agent closes its input: the proxy logs what it queued and exits.
    drop(proxy);

    let (bare, password) = server.url_and_password(&url);
    let reader = remit_gateway::PostgresStore::open_existing(&bare, Some(&password)).unwrap();
    let entries = remit_gateway::audit::read_all(&reader).unwrap();
    let outcomes: Vec<String> = entries
        .iter()
        .filter(|e| e.kind == "decision")
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap()["decision"]["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(outcomes, ["allow", "deny", "escalate", "allow", "escalate"], "in the order decided");
    let count = |kind: &str| entries.iter().filter(|e| e.kind == kind).count();
    assert_eq!((count("approval"), count("outcome")), (1, 2), "the approval, the read's and the write's outcomes");
    let verify = || {
        let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(["audit", "verify", &url]).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (verified, said) = verify();
    assert!(verified && said.contains("in 1 chains, each holds from its genesis"), "{said}");
    // The verification is not vacuous: the first decision turned from allow into deny is found.
    server.query(
        "UPDATE log SET body = replace(body, '\"allow\"', '\"deny\"') \
         WHERE gseq = (SELECT min(gseq) FROM log WHERE kind = 'decision') RETURNING 1",
    );
    let (verified, said) = verify();
    assert!(!verified && said.contains("does not match its hash"), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_messages_and_unknown_tools_get_errors_and_the_proxy_stays_up() {
    let dir = sandbox("bad");
    let mut proxy = Session::proxy(&dir, "agent:coder");
    proxy.initialize();

    proxy.send_line("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
    let parse = proxy.response(&Value::Null);
    assert_eq!(parse["error"]["code"], -32700, "{parse}");

    proxy.send_line(r#"[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]"#);
    let batch = proxy.response(&Value::Null);
    assert_eq!(batch["error"]["code"], -32600, "{batch}");

    proxy.send_line(r#"{"id": 3, "method": "ping"}"#);
    let version = proxy.response(&json!(3));
    assert_eq!(version["error"]["code"], -32600, "{version}");

    proxy.send_line(r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}}"#);
    let nameless = proxy.response(&json!(4));
    assert_eq!(nameless["error"]["code"], -32602, "{nameless}");

    // A tool the server does not have: the MCP error for an unknown tool.
    let unknown = proxy.request(5, "tools/call", json!({"name": "delete_everything", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("delete_everything"), "{unknown}");

    // A tool the server has and the policy does not declare: denied, never forwarded.
    let undeclared = proxy.call(6, "move_file", json!({"source": "workspace/a.txt", "destination": "gone.txt"}));
    assert!(is_error(&undeclared) && text(&undeclared).contains("tool.undeclared"), "{undeclared}");
    assert!(dir.join("root/workspace/a.txt").exists());

    // An argument the tool does not declare: denied.
    let extra = proxy.call(7, "read_text_file", json!({"path": "workspace/a.txt", "encoding": "latin1"}));
    assert!(is_error(&extra) && text(&extra).contains("request.undeclared-argument"), "{extra}");

    // A message over 4 MiB: refused, and the next line is read as a message of its own.
    let huge =
        format!(r#"{{"jsonrpc": "2.0", "id": 11, "method": "ping", "params": {{"pad": "{}"}}}}"#, "x".repeat(5 << 20));
    proxy.send_line(&huge);
    let oversize = proxy.response(&Value::Null);
    assert_eq!(oversize["error"]["code"], -32600, "{oversize}");

    // Still up: other methods are forwarded, and calls still work.
    let ping = proxy.request(8, "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    let read = proxy.call(9, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(!is_error(&read), "{read}");
    let forwarded = proxy.request(10, "resources/list", json!({}));
    assert!(forwarded.get("error").is_some() || forwarded.get("result").is_some(), "{forwarded}");
    std::fs::remove_dir_all(&proxy.dir).ok();
}

/// The upstream crashes (SIGKILL): the calls in flight are answered with errors, the proxy stays up, and the next
/// request starts the server again (a new session), so calls work again. A server that crashes again soon after it
/// was started is started again only after a backoff (here 10 s): until then requests that need it are answered
/// with an error saying when, and calls the policy refuses are still refused.
#[test]
fn an_upstream_crash_is_survived_and_the_server_started_again_with_backoff() {
    let dir = sandbox("crash");
    let mut proxy = Session::proxy_with(&dir, "agent:coder", &["--upstream-restart-backoff", "10"]);
    proxy.initialize();
    let read = proxy.call(1, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(!is_error(&read), "{read}");

    let kill_upstream = |proxy: &mut Session| {
        let pid = std::fs::read_to_string(dir.join("upstream.pid")).unwrap();
        std::fs::remove_file(dir.join("upstream.pid")).unwrap();
        let killed = Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
        assert!(killed.success());
        // The proxy notices on its own (it reads the server's output until the end).
        let deadline = Instant::now() + WAIT;
        loop {
            let line = proxy.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("noticed");
            if line.starts_with("remit mcp-proxy: the upstream server exited") {
                break;
            }
        }
    };
    kill_upstream(&mut proxy);
    // It ran a while before: started again at once, and the call reaches the new server.
    let read = proxy.call(2, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(!is_error(&read), "{read}");
    assert_eq!(text(&read), "hello from the workspace\n");
    assert!(dir.join("upstream.pid").exists(), "a new server process");

    // Crashed again right after its start: no new start before the backoff.
    kill_upstream(&mut proxy);
    let crashed_at = Instant::now();
    for id in [3, 4] {
        let answer = proxy.request(
            id,
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": "workspace/a.txt"}}),
        );
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("upstream server exited") && message.contains("started again in"), "{answer}");
    }
    let forwarded = proxy.request(5, "resources/list", json!({}));
    assert_eq!(forwarded["error"]["code"], -32603, "{forwarded}");
    assert!(!dir.join("upstream.pid").exists(), "not started again yet");
    // Decisions that need no upstream are still made; the proxy itself answers.
    let denied = proxy.call(6, "read_text_file", json!({"path": "workspace/../secret.txt"}));
    assert!(is_error(&denied) && text(&denied).contains("scope.outside"), "{denied}");
    let ping = proxy.request(7, "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");

    // After the backoff the next call starts it again and works.
    let mut id = 8;
    let read = loop {
        let answer = proxy.request(
            id,
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": "workspace/a.txt"}}),
        );
        if answer.get("result").is_some() {
            break answer["result"].clone();
        }
        assert!(crashed_at.elapsed() < Duration::from_secs(40), "never started again: {answer}");
        std::thread::sleep(Duration::from_millis(500));
        id += 1;
    };
    assert!(!is_error(&read) && text(&read) == "hello from the workspace\n", "{read}");
    assert!(crashed_at.elapsed() >= Duration::from_secs(8), "not before the backoff: {:?}", crashed_at.elapsed());
    std::fs::remove_dir_all(&proxy.dir).ok();
}

#[test]
fn a_subject_without_a_mandate_sees_no_tool_and_calls_none() {
    let dir = sandbox("stranger");
    let mut proxy = Session::proxy(&dir, "agent:stranger");
    proxy.initialize();
    let list = proxy.request(1, "tools/list", json!({}));
    assert_eq!(names(&list), Vec::<String>::new(), "{list}");
    let read = proxy.call(2, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(is_error(&read), "{read}");
    assert!(!text(&read).contains("hello"), "{read}");
    std::fs::remove_dir_all(&proxy.dir).ok();
}

/// `remit import mcp` against the filesystem server: a catalog that checks and is canonically formatted, with the
/// server's exact names, types and hints; run again against a catalog that differs, it reports what changed.
#[test]
fn import_mcp_writes_a_checked_catalog_and_reports_changes() {
    let dir = sandbox("import");
    let catalog = dir.join("catalog.remit");
    let upstream = format!("stdio:node {} {}", server().display(), dir.join("root").display());
    let remit = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).stdin(Stdio::null()).output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let path = catalog.display().to_string();
    let (code, _) = remit(&["import", "mcp", "--upstream", &upstream, "-o", &path]);
    assert_eq!(code, Some(0));
    let text = std::fs::read_to_string(&catalog).unwrap();
    // The server types `head` and `tail` as JSON Schema numbers: decimal.
    let read = "tool read_text_file(\n  path: string, // required\n  tail: decimal, // optional\n  head: decimal, // optional\n";
    assert!(text.contains(read), "{text}");
    assert!(text.contains("tool write_file(\n  path: string, // required\n  content: string, // required\n"), "{text}");
    assert!(text.contains("  effects read_only // the server's readOnlyHint\n  level research\n"), "{text}");
    assert!(text.contains("the server says it has side effects (destructive)\n  side effects\n"), "{text}");
    assert!(text.contains("`edits` (required, array of object) has no remit type"), "{text}");
    assert!(text.contains("the standard library already declares `read_file`"), "{text}");
    assert!(!text.contains("\ntool read_file("), "{text}");
    assert_eq!(remit(&["check", &path]).0, Some(0), "the catalog checks");
    assert_eq!(remit(&["fmt", "--check", &path]).0, Some(0), "the catalog is in the canonical layout");

    // The same server again: nothing changed, the file is left alone.
    let (code, out) = remit(&["import", "mcp", "--upstream", &upstream, "-o", &path]);
    assert_eq!((code, out.contains("the server's tools are the ones declared")), (Some(0), true), "{out}");
    // A catalog that is behind the server: a tool missing, a type changed, a tool the server no longer has.
    let behind = text
        .replace("tool get_file_info(\n  path: string,", "tool get_file_info(\n  path: int,")
        .replace("tool write_file(", "tool old_write_file(");
    std::fs::write(&catalog, &behind).unwrap();
    let (code, out) = remit(&["import", "mcp", "--upstream", &upstream, "-o", &path]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("new: write_file (not declared: calls to it are denied"), "{out}");
    assert!(out.contains("removed: old_write_file"), "{out}");
    assert!(out.contains("changed: get_file_info: `path` is now `string` (was `int`)"), "{out}");
    assert_eq!(std::fs::read_to_string(&catalog).unwrap(), behind, "left as it is");
    std::fs::remove_dir_all(&dir).ok();
}

/// What the policy tests/mcp/everything lets through the proxy (ids 0-4): the session opened with the upstream's
/// capabilities, the two declared tools listed (`get-sum` quoted, its MCP name not an identifier), an echo of
/// `words` forwarded, a forbidden echo denied, a small sum forwarded.
fn everything_through(proxy: &mut Session, words: &str) {
    let init = proxy.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "remit-mcp-proxy", "{init}");
    assert!(init["result"]["capabilities"]["resources"].is_object(), "the upstream's capabilities: {init}");
    let list = proxy.request(1, "tools/list", json!({}));
    assert_eq!(names(&list), ["echo", "get-sum"], "{list}");
    let echoed = proxy.call(2, "echo", json!({"message": words}));
    assert!(!is_error(&echoed), "{echoed}");
    assert_eq!(text(&echoed), format!("Echo: {words}"));
    let forbidden = proxy.call(3, "echo", json!({"message": "forbidden"}));
    assert!(is_error(&forbidden) && text(&forbidden).contains("rule.forbidden"), "{forbidden}");
    let sum = proxy.call(4, "get-sum", json!({"a": 1, "b": 2}));
    assert!(!is_error(&sum) && text(&sum).contains('3'), "{sum}");
}

/// The reference server (`@modelcontextprotocol/server-everything`) over Streamable HTTP as the upstream, on a
/// loopback port it picks (tests/mcp/loopback.cjs): the proxy opens an HTTP session with it (event-stream answers),
/// lists only the two declared tools (`get-sum` quoted), forwards allowed calls, denies a forbidden echo, a sum over
/// the limit and an undeclared tool, and answers an error when the server is gone.
#[test]
fn an_upstream_over_streamable_http() {
    let dir = sandbox("http-upstream");
    let (upstream, port) = everything_over_http(&dir);
    let mut command = everything_proxy(&dir.join("state.db"));
    command.args(["--subject", "agent:tester", "--", &format!("http://127.0.0.1:{port}/mcp")]);
    let mut proxy = Session::spawn(command, &dir);
    everything_through(&mut proxy, "hello over http");
    let large = proxy.call(8, "get-sum", json!({"a": 1000, "b": 2}));
    assert!(is_error(&large) && text(&large).contains("limit.exceeded"), "{large}");
    let undeclared = proxy.call(9, "get-env", json!({}));
    assert!(is_error(&undeclared) && text(&undeclared).contains("tool.undeclared"), "{undeclared}");
    let forwarded = proxy.request(5, "prompts/list", json!({}));
    assert!(forwarded["result"]["prompts"].is_array(), "{forwarded}");

    drop(upstream);
    let gone = proxy.request(6, "tools/call", json!({"name": "echo", "arguments": {"message": "anyone?"}}));
    assert_eq!(gone["error"]["code"], -32603, "{gone}");
    let ping = proxy.request(7, "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// A stop hides tools from what the module lists, so setting one, or ending it, changes the tool list the agent
/// sees: the proxy tells it (`notifications/tools/list_changed`), wherever the stop was set. Here it is written by
/// another connection to the proxy's store file, as `remit admin` on another gateway of the same file, or another
/// process, would: the proxy notices the store's change, reads the stops again and tells the agent, whose next
/// listing shows the change. A quarantine hides every tool of the mandate.
#[test]
fn a_stop_changes_the_tool_list_and_the_agent_is_told() {
    use remit_gateway::store::{StopRecord, Store};
    let dir = sandbox("stop-listing");
    let mut proxy = Session::proxy(&dir, "agent:coder");
    proxy.initialize();
    let listed = proxy.request(1, "tools/list", json!({}));
    assert_eq!(names(&listed).len(), 5, "{listed}");

    let store = remit_gateway::SqliteStore::open(&dir.join("state.db"), remit_gateway::Durability::Process).unwrap();
    let quarantine =
        StopRecord { id: "Q-7".into(), level: "quarantine".into(), mandate: Some("workspace".into()), principal: None };
    let mut tx = store.begin().unwrap();
    tx.set_stop_record(&quarantine).unwrap();
    tx.commit().unwrap();
    proxy.notification("notifications/tools/list_changed");
    let stopped = proxy.request(2, "tools/list", json!({}));
    assert_eq!(names(&stopped), Vec::<String>::new(), "{stopped}");

    let mut tx = store.begin().unwrap();
    tx.clear_stop_record("Q-7").unwrap();
    tx.commit().unwrap();
    proxy.notification("notifications/tools/list_changed");
    let again = proxy.request(3, "tools/list", json!({}));
    assert_eq!(names(&again), names(&listed));
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// The proxy reloads its policy (`--watch`, and `POST /admin/v1/reload` on its inbox's server): the agent is told its
/// tool list changed, its next listing and calls are the new policy's, and a policy with errors stays out (the one in
/// force stays). Over stdio, in front of the official Python SDK's server, in a session of 2025-06-18 (told unasked).
#[test]
fn the_proxy_reloads_its_policy_and_tells_the_agent() {
    let dir = sandbox("reload");
    let policy = dir.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    let original = std::fs::read_to_string(root().join("tests/mcp/modern/policy.remit")).unwrap();
    std::fs::write(policy.join("policy.remit"), &original).unwrap();
    let python = python();
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .args(["mcp-proxy", "--watch", "--policy"])
        .arg(&policy)
        .args(["--subject", "agent:tester", "--store"])
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(["--inbox", "127.0.0.1:0", "--admin-token", "ops=admin-token-1", "--"])
        .arg(python)
        .arg(root().join("tests/mcp/modern/server.py"));
    let mut proxy = Session::spawn(command, &dir);
    let inbox = proxy.inbox();
    proxy.initialize();
    let before = names(&proxy.request(1, "tools/list", json!({})));
    assert!(before.contains(&"grow".to_string()), "{before:?}");
    let policy_of = |result: &Value| result["_meta"]["remit.dev/decision"]["decision"]["policy"].clone();
    let first = policy_of(&proxy.call(2, "revision", json!({})));

    // The grant of `grow` taken out of the file: reloaded, told, gone from the listing, denied.
    std::fs::write(policy.join("policy.remit"), original.replace("  allow grow\n", "")).unwrap();
    proxy.notification("notifications/tools/list_changed");
    let after = names(&proxy.request(3, "tools/list", json!({})));
    assert_eq!(after.len(), before.len() - 1, "{after:?}");
    assert!(!after.contains(&"grow".to_string()), "{after:?}");
    let denied = proxy.call(4, "grow", json!({}));
    assert!(is_error(&denied) && text(&denied).contains("rule.unmatched"), "{denied}");
    let second = policy_of(&denied);
    assert_ne!(second, first, "decided by the new policy");

    // A policy with errors is not loaded: by the watch, nor by the admin API, which says why.
    std::fs::write(policy.join("policy.remit"), original.replace("allow grow", "allow nonesuch")).unwrap();
    let reload = format!("{inbox}/admin/v1/reload");
    let admin = [("Authorization", "Bearer admin-token-1")];
    let refused = remit_gateway::client::blocking::request("POST", &reload, &admin, None).unwrap();
    assert_eq!(refused.status, 422, "{}", refused.json());
    assert_eq!(policy_of(&proxy.call(5, "revision", json!({}))), second, "the policy in force stays");
    let nobody = remit_gateway::client::blocking::request("POST", &reload, &[], None).unwrap();
    assert_eq!(nobody.status, 401);

    // The file as it was, reloaded over the admin API (or by the watch, whichever comes first): told again.
    std::fs::write(policy.join("policy.remit"), &original).unwrap();
    let reloaded = remit_gateway::client::blocking::request("POST", &reload, &admin, None).unwrap();
    assert_eq!(reloaded.status, 200, "{}", reloaded.json());
    assert_eq!(reloaded.json()["policy"], first);
    proxy.notification("notifications/tools/list_changed");
    assert_eq!(names(&proxy.request(6, "tools/list", json!({}))), before);
    assert_eq!(policy_of(&proxy.call(7, "revision", json!({}))), first);
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--verify-key`: the proxy serves only a bundle signed by that key, as `remit serve` does; an unsigned bundle, or
/// sources, are refused at start, and a reload to an unsigned bundle is refused (the signed policy stays).
#[test]
fn with_a_verify_key_the_proxy_serves_only_signed_bundles() {
    let dir = sandbox("verify-key");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let remit = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let policy = root().join("tests/mcp/modern").to_str().unwrap().to_string();
    assert_eq!(remit(&["keygen", "-o", &path("owner.key")]).0, Some(0));
    let signed = ["build", &policy, "-o", &path("signed.bundle"), "--bundle", "--sign", &path("owner.key")];
    assert_eq!(remit(&signed).0, Some(0));
    assert_eq!(remit(&["build", &policy, "-o", &path("unsigned.bundle"), "--bundle"]).0, Some(0));
    let python = python();
    let server = root().join("tests/mcp/modern/server.py");
    let upstream = [python.to_str().unwrap(), server.to_str().unwrap()];
    let key = path("owner.key.pub");
    let store = format!("sqlite:{}", path("state.db"));
    let proxy_args = |policy: &str| -> Vec<String> {
        let args =
            ["mcp-proxy", "--policy", policy, "--subject", "agent:tester", "--store", &store, "--verify-key", &key];
        args.map(str::to_string).to_vec()
    };
    for (refused, why) in [(path("unsigned.bundle"), "not signed"), (policy.clone(), "only a signed bundle")] {
        let mut args = proxy_args(&refused);
        args.push("--".into());
        args.extend(upstream.map(str::to_string));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, said) = remit(&args);
        assert_eq!(code, Some(2), "{said}");
        assert!(said.contains(why), "{said}");
    }

    std::fs::copy(path("signed.bundle"), path("serving.bundle")).unwrap();
    let serving = path("serving.bundle");
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .args(proxy_args(&serving))
        .args(["--inbox", "127.0.0.1:0", "--admin-token", "ops=admin-token-1", "--"])
        .args(upstream);
    let mut proxy = Session::spawn(command, &dir);
    let inbox = proxy.inbox();
    proxy.initialize();
    let listed = names(&proxy.request(1, "tools/list", json!({})));
    assert_eq!(listed, ["confirm", "grow", "revision", "shout"], "{listed:?}");
    std::fs::copy(path("unsigned.bundle"), &serving).unwrap();
    let reload = format!("{inbox}/admin/v1/reload");
    let refused =
        remit_gateway::client::blocking::request("POST", &reload, &[("Authorization", "Bearer admin-token-1")], None)
            .unwrap();
    assert_eq!(refused.status, 422, "{}", refused.json());
    assert!(refused.json().to_string().contains("not signed"), "{}", refused.json());
    assert_eq!(names(&proxy.request(2, "tools/list", json!({}))), listed, "the signed policy stays");
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--bundle-from-store`: the proxy serves the signed bundle published in its store (`remit bundle publish`), on the
/// PostgreSQL store replicas share, as `remit serve --bundle-from-store` does: it takes the next one published within
/// its poll (the agent told its tool list changed, its calls decided by the new policy), refuses one its key did not
/// sign (the policy in force stays), and logs what it took and refused. It needs `--verify-key`, and no `--policy`.
#[test]
fn the_proxy_serves_the_bundle_published_in_the_store_and_the_next_one() {
    let dir = sandbox("from-store");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let remit = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(remit(&["keygen", "-o", &path("owner.key")]).0, Some(0));
    assert_eq!(remit(&["keygen", "-o", &path("other.key")]).0, Some(0));
    let original = std::fs::read_to_string(root().join("tests/mcp/modern/policy.remit")).unwrap();
    let without_grow = original.replace("  allow grow\n", "");
    assert_ne!(without_grow, original);
    for (name, source, revision, key) in [
        ("v1", &original, "1", "owner.key"),
        ("v2", &without_grow, "2", "owner.key"),
        ("v3", &original, "3", "other.key"),
    ] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("policy.remit"), source).unwrap();
        let bundle = format!("{name}.bundle");
        let built = ["build", &path(name), "-o", &path(&bundle), "--bundle", "--sign", &path(key)];
        let (code, said) = remit(&[&built[..], &["--revision", revision]].concat());
        assert_eq!(code, Some(0), "{said}");
    }
    let server = postgres::Server::start();
    let url = server.url().to_string();
    let publish = |bundle: &str| remit(&["bundle", "publish", &path(bundle), "--store", &url]);
    let key = path("owner.key.pub");
    let python = python();
    let upstream = root().join("tests/mcp/modern/server.py");
    let proxy = |flags: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
        command
            .args(["mcp-proxy", "--subject", "agent:tester", "--store", &url])
            .args(flags)
            .arg("--")
            .arg(&python)
            .arg(&upstream);
        command
    };
    let refused = |flags: &[&str]| {
        let out = proxy(flags).stdin(Stdio::null()).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // What serving the store's bundle needs: its key, no policy files, and a bundle published.
    assert!(refused(&["--bundle-from-store"]).contains("--verify-key"));
    let with_policy = ["--bundle-from-store", "--verify-key", &key, "--policy", &path("v1")];
    assert!(refused(&with_policy).contains("cannot be used with"));
    let none = refused(&["--bundle-from-store", "--verify-key", &key]);
    assert!(none.contains("no bundle is published in the store"), "{none}");

    assert_eq!(publish("v1.bundle").0, Some(0));
    let command = proxy(&["--bundle-from-store", "--verify-key", &key, "--inbox", "127.0.0.1:0"]);
    let mut proxy = Session::spawn(command, &dir);
    proxy.inbox();
    proxy.initialize();
    let before = names(&proxy.request(1, "tools/list", json!({})));
    assert!(before.contains(&"grow".to_string()), "{before:?}");
    let policy_of = |result: &Value| result["_meta"]["remit.dev/decision"]["decision"]["policy"].clone();
    let first = policy_of(&proxy.call(2, "revision", json!({})));

    // Revision 2 published (as a deployment pipeline does, by another process): taken within the poll, told.
    assert_eq!(publish("v2.bundle").0, Some(0));
    proxy.notification("notifications/tools/list_changed");
    let after = names(&proxy.request(3, "tools/list", json!({})));
    assert_eq!(after.len(), before.len() - 1, "{after:?}");
    assert!(!after.contains(&"grow".to_string()), "{after:?}");
    let denied = proxy.call(4, "grow", json!({}));
    assert!(is_error(&denied) && text(&denied).contains("rule.unmatched"), "{denied}");
    let second = policy_of(&denied);
    assert_ne!(second, first, "decided by the published policy");

    // Revision 3 signed by another key (published unchecked: the publisher was given no key): refused by the proxy.
    assert_eq!(publish("v3.bundle").0, Some(0));
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = proxy.errors.recv_timeout(left).expect("the proxy says it refused the bundle published");
        if line.contains("the published bundle 3 is refused") {
            assert!(line.contains("signature"), "{line}");
            break;
        }
    }
    assert_eq!(names(&proxy.request(5, "tools/list", json!({}))), after, "the policy in force stays");
    assert_eq!(policy_of(&proxy.call(6, "revision", json!({}))), second);
    drop(proxy);

    let bodies: Vec<Value> = server
        .query("SELECT body FROM log WHERE kind = 'policy' ORDER BY gseq")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let taken: Vec<u64> =
        bodies.iter().filter(|b| b["serving"] == true).map(|b| b["published"].as_u64().unwrap()).collect();
    assert_eq!(taken, [1, 2], "taken at start and on a poll: {bodies:?}");
    let refusals: Vec<u64> =
        bodies.iter().filter(|b| b["refused"].is_string()).map(|b| b["published"].as_u64().unwrap()).collect();
    assert_eq!(refusals, [3], "{bodies:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The reference server (`@modelcontextprotocol/server-everything`) over Streamable HTTP, on a loopback port it
/// picks (tests/mcp/loopback.cjs), and that port.
fn everything_over_http(dir: &Path) -> (Session, u16) {
    let everything = root().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(everything.exists(), "the MCP test server is missing: run `./scripts/test-deps.sh`");
    let mut command = Command::new("node");
    command
        .arg("--require")
        .arg(root().join("tests/mcp/loopback.cjs"))
        .arg(everything)
        .arg("streamableHttp")
        .env("PORT", "0");
    let upstream = Session::spawn(command, dir);
    let deadline = Instant::now() + WAIT;
    loop {
        let line = upstream.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("a port");
        if let Some(port) = line.strip_prefix("loopback listening on port ") {
            return (upstream, port.trim().parse().unwrap());
        }
    }
}

/// An `https://` upstream: the reference server behind a TLS-terminating relay in the test, with a certificate for
/// `localhost` from a CA made here. Given that CA (`--tls-ca`), the proxy lists and calls through it (decisions as
/// over http), and `remit import mcp` reads its tools; without it, the server's certificate is refused, the proxy
/// answers an error naming why, and stays up. A certificate for another name is refused too.
#[test]
fn an_upstream_over_https() {
    let dir = sandbox("https-upstream");
    let (_upstream, port) = everything_over_http(&dir);
    let ca = tls::TestCa::new("remit test CA");
    let ca_file = ca.write(&dir.join("ca.pem"));
    let backend = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (relay, handshakes) = tls::relay(ca.server(&["localhost"]), backend);
    let url = format!("https://localhost:{}/mcp", relay.port());
    let mut command = everything_proxy(&dir.join("state.db"));
    command.args(["--subject", "agent:tester", "--tls-ca", &ca_file, "--", &url]);
    let mut proxy = Session::spawn(command, &dir);
    everything_through(&mut proxy, "hello over https");
    assert!(handshakes.load(std::sync::atomic::Ordering::SeqCst) >= 1, "the messages went through the relay");
    drop(proxy);

    // `remit import mcp` over the same https URL. The platform's roots are the system's store, which
    // rustls-native-certs reads from `SSL_CERT_FILE` when it is set: pointed at the test CA, no `--tls-ca` is needed;
    // pointed at an empty file, https cannot work without `--tls-ca`, and says so.
    let catalog = dir.join("catalog.remit");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let import = |extra: &[&str], store: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
        command.args(["import", "mcp", "--upstream", &url, "-o"]).arg(&catalog).args(extra);
        if let Some(store) = store {
            command.env("SSL_CERT_FILE", store).env_remove("SSL_CERT_DIR");
        }
        let output = command.stdin(Stdio::null()).output().unwrap();
        let written = std::fs::read_to_string(&catalog).unwrap_or_default();
        std::fs::remove_file(&catalog).ok();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success() && written.contains("tool echo("), stderr)
    };
    for (extra, store) in [(vec!["--tls-ca", ca_file.as_str()], None), (vec![], Some(dir.join("ca.pem")))] {
        let (ok, stderr) = import(&extra, store.as_deref());
        assert!(ok, "{extra:?} {store:?}: a catalog with the server's tools: {stderr}");
    }
    let (ok, stderr) = import(&["--tls-ca", &ca_file], Some(&empty));
    assert!(ok, "the CA file alone is enough: {stderr}");
    let (ok, stderr) = import(&[], None);
    assert!(!ok && stderr.contains("not issued by a trusted authority"), "{stderr}");
    let (ok, stderr) = import(&[], Some(&empty));
    assert!(!ok && stderr.contains("https needs trusted root certificates: the platform has none"), "{stderr}");

    // Without the CA, the server's certificate is not trusted: each request that needs the upstream gets an error
    // that says so, and the proxy answers what it can itself.
    let mut command = everything_proxy(&dir.join("untrusted.db"));
    command.args(["--subject", "agent:tester", "--", &url]);
    let mut proxy = Session::spawn(command, &dir);
    let refused = proxy.request(1, "tools/list", json!({}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("over TLS") && message.contains("not issued by a trusted authority"), "{refused}");
    let call = proxy.request(2, "tools/call", json!({"name": "echo", "arguments": {"message": "anyone?"}}));
    assert!(call["error"]["message"].as_str().is_some_and(|m| m.contains("not issued by a trusted")), "{call}");
    let ping = proxy.request(3, "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "the proxy stays up: {ping}");
    drop(proxy);

    // A platform without root certificates, which gets them while the proxy runs (the system's CA bundle installed):
    // refused, then trusted, with no restart.
    let store = dir.join("platform.pem");
    std::fs::write(&store, "").unwrap();
    let mut command = everything_proxy(&dir.join("late-roots.db"));
    command.args(["--subject", "agent:tester", "--", &url]).env("SSL_CERT_FILE", &store).env_remove("SSL_CERT_DIR");
    let mut proxy = Session::spawn(command, &dir);
    let refused = proxy.request(1, "tools/list", json!({}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("https needs trusted root certificates"), "{refused}");
    std::fs::copy(dir.join("ca.pem"), &store).unwrap();
    let listed = proxy.request(2, "tools/list", json!({}));
    assert!(names(&listed).contains(&"echo".to_string()), "{listed}");
    drop(proxy);

    // A certificate from the trusted CA, but for another host: refused too.
    let (elsewhere, _) = tls::relay(ca.server(&["elsewhere.example"]), backend);
    let mut command = everything_proxy(&dir.join("misnamed.db"));
    let misnamed = format!("https://localhost:{}/mcp", elsewhere.port());
    command.args(["--subject", "agent:tester", "--tls-ca", &ca_file, "--", &misnamed]);
    let mut proxy = Session::spawn(command, &dir);
    let refused = proxy.request(1, "tools/list", json!({}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not valid for the name `localhost`"), "{refused}");
    assert_eq!(proxy.request(2, "ping", json!({}))["result"], json!({}));
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// A minimal MCP server over Streamable HTTP, in the test (JSON answers), that records every request's headers and
/// body: to show what the proxy sends upstream. Its `echo` mirrors `message` into `Mcp-Param-Message`
/// (`x-mcp-header`, MCP 2026-07-28); its `get-sum` has an annotation the revision forbids (on a `number`), so the
/// proxy leaves it out. Listens on a loopback port it picks; stops
/// when the test ends (its thread dies with the process, the listener with the thread).
fn recording_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            stream.set_read_timeout(Some(WAIT)).ok();
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                head.push_str(&line);
            }
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0usize);
            let mut body = vec![0; length];
            reader.read_exact(&mut body).ok();
            let body = String::from_utf8_lossy(&body).into_owned();
            record.lock().unwrap().push(format!("{head}\n{body}"));
            let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let result = match message["method"].as_str() {
                Some("initialize") => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                             "serverInfo": {"name": "recorder", "version": "1"}}),
                Some("tools/list") => json!({"tools": [
                    {"name": "echo", "inputSchema": {"type": "object",
                     "properties": {"message": {"type": "string", "x-mcp-header": "Message"}}}},
                    {"name": "get-sum", "inputSchema": {"type": "object",
                     "properties": {"a": {"type": "number", "x-mcp-header": "A"}, "b": {"type": "number"}}}}]}),
                Some("tools/call") => json!({"content": [{"type": "text",
                                             "text": format!("Echo: {}", message["params"]["arguments"]["message"].as_str().unwrap_or(""))}]}),
                _ => json!({}),
            };
            let (status, answer) = if message.get("id").is_some() {
                ("200 OK", json!({"jsonrpc": "2.0", "id": message["id"], "result": result}).to_string())
            } else {
                ("202 Accepted", String::new())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
            let mut stream = reader.into_inner();
            stream.write_all(response.as_bytes()).ok();
        }
    });
    (url, seen)
}

/// A signing key made in the test (ES256 and EdDSA) and its JWKS entry.
fn es256_key(kid: &str) -> (jsonwebtoken::EncodingKey, Value) {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use p256::pkcs8::EncodePrivateKey;
    let key = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
    let point = key.verifying_key().to_encoded_point(false);
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                     "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()), "y": URL_SAFE_NO_PAD.encode(point.y().unwrap())});
    (jsonwebtoken::EncodingKey::from_ec_der(key.to_pkcs8_der().unwrap().as_bytes()), jwk)
}

fn ed25519_key(kid: &str) -> (jsonwebtoken::EncodingKey, Value) {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).unwrap();
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
                     "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes())});
    (jsonwebtoken::EncodingKey::from_ed_der(key.to_pkcs8_der().unwrap().as_bytes()), jwk)
}

fn jwt(alg: jsonwebtoken::Algorithm, kid: &str, key: &jsonwebtoken::EncodingKey, claims: &Value) -> String {
    let mut header = jsonwebtoken::Header::new(alg);
    header.kid = Some(kid.to_string());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

/// `remit mcp-proxy` on the policy tests/mcp/everything with its store at `db`; the caller adds the transport, the
/// identity and the upstream.
fn everything_proxy(db: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/everything"))
        .arg("--store")
        .arg(format!("sqlite:{}", db.display()));
    command
}

/// An `initialize` request of revision 2025-06-18.
fn initialize_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The proxy as an OAuth 2.1 resource server (`--jwks`): a 401 that points at the protected resource metadata, the
/// metadata itself, JWTs (ES256, EdDSA) whose claims are the agent's identity, every way a token is refused, and the
/// token never reaching the upstream (a server in the test records what it receives).
#[test]
fn jwt_bearer_tokens_over_streamable_http() {
    use jsonwebtoken::Algorithm::{EdDSA, ES256};
    use remit_gateway::client::blocking::request;
    let dir = sandbox("jwt");
    let (upstream, seen) = recording_upstream();
    let (ec, ec_jwk) = es256_key("ec-1");
    let (ed, ed_jwk) = ed25519_key("ed-1");
    let (forger, _) = es256_key("ec-1");
    std::fs::write(dir.join("jwks.json"), json!({"keys": [ec_jwk, ed_jwk]}).to_string()).unwrap();
    let issuer = "https://auth.test.example";
    let mut command = everything_proxy(&dir.join("state.db"));
    command.args(["--listen", "127.0.0.1:0", "--jwks"]).arg(dir.join("jwks.json")).args([
        "--jwt-issuer",
        issuer,
        "--",
        &upstream,
    ]);
    let proxy = Session::spawn(command, &dir);
    let deadline = Instant::now() + WAIT;
    let url = proxy.mcp_url(deadline);
    let origin = url.trim_end_matches("/mcp");
    let post = |token: Option<&str>, session: Option<&str>, body: &Value| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
        }
        request("POST", &url, &headers, Some(body.to_string().as_bytes())).unwrap()
    };
    let init = initialize_message();

    // No token: 401 pointing at the metadata, which names the resource and the authorization server.
    let metadata_url = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    let missing = post(None, None, &init);
    assert_eq!(missing.status, 401);
    let challenge = missing.header("www-authenticate").unwrap().to_string();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
    assert!(!challenge.contains("error="), "no error code without a token: {challenge}");
    let metadata = request("GET", &metadata_url, &[], None).unwrap();
    assert_eq!(metadata.status, 200);
    assert_eq!(metadata.json()["resource"], json!(url));
    assert_eq!(metadata.json()["authorization_servers"], json!([issuer]));

    // A valid token: its `sub` is the subject, the proxy's resource URL its audience.
    let now = unix_now();
    let claims = json!({"iss": issuer, "aud": url, "sub": "agent:tester", "exp": now + 300, "iat": now,
                        "scope": "echo.use"});
    let token = jwt(ES256, "ec-1", &ec, &claims);
    let opened = post(Some(&token), None, &init);
    assert_eq!(opened.status, 200, "{}", opened.json());
    let session = opened.header("mcp-session-id").unwrap().to_string();
    let list = post(Some(&token), Some(&session), &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert_eq!(names(&list.json()), ["echo"]);
    let call = |token: &str, id: i64, message: &str| {
        post(
            Some(token),
            Some(&session),
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": message}}}),
        )
    };
    let echoed = call(&token, 3, "hello with a JWT");
    assert_eq!(echoed.status, 200);
    assert_eq!(text(&echoed.json()["result"]), "Echo: hello with a JWT");
    let forbidden = call(&token, 4, "forbidden");
    assert!(text(&forbidden.json()["result"]).contains("rule.forbidden"), "{}", forbidden.json());
    // EdDSA too, for the same subject (the session is the subject's, whichever of its tokens is used).
    let ed_token = jwt(EdDSA, "ed-1", &ed, &claims);
    assert_eq!(text(&call(&ed_token, 5, "hello with EdDSA").json()["result"]), "Echo: hello with EdDSA");

    // Each refused token: 401 with `invalid_token` and the reason; nothing reaches the upstream.
    let calls_before = seen.lock().unwrap().iter().filter(|r| r.contains("tools/call")).count();
    let with = |key: &str, value: Value| {
        let mut c = claims.clone();
        c[key] = value;
        c
    };
    let refused = [
        (jwt(ES256, "ec-1", &ec, &with("exp", json!(now - 120))), "expired"),
        (jwt(ES256, "ec-1", &ec, &with("aud", json!("http://127.0.0.1:1/mcp"))), "audience"),
        (jwt(ES256, "ec-1", &ec, &with("iss", json!("https://evil.example"))), "issuer"),
        (jwt(ES256, "ec-1", &forger, &claims), "signature"),
        (jwt(ES256, "ec-9", &ec, &claims), "key or algorithm"),
        ("not.a.jwt".to_string(), "not a JWT"),
    ];
    for (bad, why) in &refused {
        let answer = call(bad, 6, "should not pass");
        assert_eq!(answer.status, 401, "{why}");
        let challenge = answer.header("www-authenticate").unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{why}: {challenge}");
        assert!(challenge.contains(why), "{why}: {challenge}");
        assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
    }
    let calls_after = seen.lock().unwrap().iter().filter(|r| r.contains("tools/call")).count();
    assert_eq!(calls_before, calls_after, "refused tokens reach nothing");

    // Another subject's valid token holds no mandate: no tool listed, no call forwarded; and it cannot use the
    // tester's session.
    let stranger = jwt(ES256, "ec-1", &ec, &with("sub", json!("agent:stranger")));
    let list = post(Some(&stranger), Some(&session), &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}));
    assert_eq!(list.status, 404, "another subject's session");
    let own = post(Some(&stranger), None, &init).header("mcp-session-id").unwrap().to_string();
    let list = post(Some(&stranger), Some(&own), &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}));
    assert_eq!(names(&list.json()), Vec::<String>::new());

    // The upstream saw the calls but never a token: no Authorization header, no token text anywhere.
    drop(proxy);
    let seen = seen.lock().unwrap();
    let forwarded = seen.iter().find(|r| r.contains("hello with a JWT")).expect("the call reached the upstream");
    // The routing headers of 2026-07-28 go upstream too, mirrored from the message.
    let head = forwarded.to_ascii_lowercase();
    assert!(head.contains("\nmcp-method: tools/call\r\n") && head.contains("\nmcp-name: echo\r\n"), "{forwarded}");
    for received in seen.iter() {
        assert!(!received.to_ascii_lowercase().contains("authorization:"), "{received}");
        assert!(!received.contains(&token) && !received.contains(&ed_token), "{received}");
        assert!(!received.contains("Bearer"), "{received}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The official Python SDK's HTTP client with a JWT as its bearer token (audience and claim names configured): the
/// same flow as with a configured token, the subject and its credential read from the token's claims.
#[test]
fn the_python_sdk_client_with_a_jwt() {
    let dir = sandbox("jwt-sdk");
    let (key, jwk) = ed25519_key("ed-1");
    std::fs::write(dir.join("jwks.json"), json!({"keys": [jwk]}).to_string()).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/filesystem"))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(["--listen", "127.0.0.1:0", "--jwks"])
        .arg(dir.join("jwks.json"))
        .args(["--jwt-issuer", "https://auth.test.example", "--jwt-audience", "remit-files"])
        .args(["--subject-claim", "agent", "--inbox-token", &format!("user:owner={OWNER_TOKEN}"), "--", "node"])
        .arg(server())
        .arg(dir.join("root"));
    let proxy = Session::spawn(command, &dir);
    let deadline = Instant::now() + WAIT;
    let url = proxy.mcp_url(deadline);
    let now = unix_now();
    let claims = json!({"iss": "https://auth.test.example", "aud": "remit-files", "sub": "user-42",
                        "agent": "agent:coder", "exp": now + 600, "client_id": "cred-1"});
    let token = jwt(jsonwebtoken::Algorithm::EdDSA, "ed-1", &key, &claims);
    let mut sdk = Command::new(python());
    sdk.arg(root().join("tests/mcp/client.py"))
        .args(["--http", &url, "--agent-token", &token, "--token", OWNER_TOKEN])
        .stdin(Stdio::null());
    let report = client_report(sdk, &dir.join("none.log"));
    check_report(&report, &dir);
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// The club example (examples/club, seed 004) through the proxy, with the official Python SDK as the client and a
/// club server built on the same SDK (tests/mcp/club/): for each lane — no credential, an applicant's, a member's —
/// the client sees exactly the tools `remit tools` shows for that lane (3, 10 and 14 of the 15), every listed tool
/// is callable, and every other one is denied and never reaches the server. Over stdio (one proxy per lane, the
/// credential from the flags) and over HTTP (one proxy, the credential's scopes from each lane's JWT).
#[test]
fn the_club_lanes_through_a_real_client() {
    let dir = sandbox("club");
    let remit_bin = env!("CARGO_BIN_EXE_remit");
    // The lanes as `remit tools` computes them on the example itself (its subjects carry their own `now`).
    let mut expected = std::collections::BTreeMap::new();
    for lane in ["none", "applicant", "member"] {
        let subject = root().join(format!("examples/club/subjects/{lane}.json"));
        let output = Command::new(remit_bin)
            .arg("tools")
            .arg(root().join("examples/club"))
            .arg("--subject")
            .arg(subject)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let tools: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect();
        expected.insert(lane, tools);
    }
    assert_eq!([expected["none"].len(), expected["applicant"].len(), expected["member"].len()], [3, 10, 14]);
    let catalog = std::fs::read_to_string(root().join("examples/club/catalog.remit")).unwrap();
    let declared: Vec<&str> =
        catalog.lines().filter_map(|l| l.strip_prefix("tool ")).map(|l| l.split('(').next().unwrap()).collect();
    assert_eq!(declared.len(), 15);
    assert!(!expected["member"].iter().any(|t| t == "export_roster"), "the mandate forbids the roster");

    // The proxy decides with the gateway's clock: the example's mandate is valid 2026-09-01..2027-09-01, so the
    // test runs a copy whose only change is a window that holds today.
    let club = dir.join("club");
    std::fs::create_dir_all(&club).unwrap();
    std::fs::write(club.join("catalog.remit"), &catalog).unwrap();
    let policy = std::fs::read_to_string(root().join("examples/club/policy.remit")).unwrap();
    let window = "valid from 2026-09-01T00:00:00Z until 2027-09-01T00:00:00Z";
    assert!(policy.contains(window), "the example's window changed: update this test");
    std::fs::write(
        club.join("policy.remit"),
        policy.replace(window, "valid from 2020-01-01T00:00:00Z until 2100-01-01T00:00:00Z"),
    )
    .unwrap();

    let server = root().join("tests/mcp/club/server.py");
    let client = root().join("tests/mcp/club/client.py");
    // What one lane's report must show; `calls` is what reached the server. Over HTTP (a JWT) a call refused only
    // for want of a scope is a `403 insufficient_scope` challenge naming the first scope the tool requires.
    let first_scope =
        |tool: &str| if expected["applicant"].iter().any(|t| t == tool) { "club.applicant" } else { "club.member" };
    let check = |lane: &str, report: &Value, calls: Option<&Path>, http: bool| {
        let want = &expected[lane];
        assert_eq!(report["tools"], json!(want), "lane {lane}");
        for tool in &declared {
            let call = &report["calls"][tool];
            if want.iter().any(|t| t == tool) {
                assert_eq!(
                    (call["outcome"].as_str(), call["is_error"].as_bool()),
                    (Some("allow"), Some(false)),
                    "{lane} {tool}: {call}"
                );
                assert!(call["text"].as_str().unwrap().starts_with(&format!("{tool}: ")), "{lane} {tool}: {call}");
            } else {
                assert_eq!(
                    (call["outcome"].as_str(), call["is_error"].as_bool()),
                    (Some("deny"), Some(true)),
                    "{lane} {tool}: {call}"
                );
                let said = call["text"].as_str().unwrap();
                assert!(said.starts_with("remit denied this call."), "{lane} {tool}: {said}");
                let reason = if *tool == "export_roster" { "rule.forbidden" } else { "credential.scope-missing" };
                assert!(said.contains(reason), "{lane} {tool}: {said}");
                if http && *tool != "export_roster" {
                    assert_eq!(call["code"], -32003, "{lane} {tool}: {call}");
                    let challenge = call["challenge"].as_str().unwrap_or_else(|| panic!("{lane} {tool}: {call}"));
                    let scope = format!("scope=\"{}\"", first_scope(tool));
                    assert!(
                        challenge.starts_with("Bearer ") && challenge.contains("error=\"insufficient_scope\""),
                        "{challenge}"
                    );
                    assert!(challenge.contains(&scope), "{lane} {tool}: {challenge}");
                    assert!(challenge.contains("resource_metadata=\"http://127.0.0.1:"), "{challenge}");
                } else {
                    assert!(call.get("code").is_none() && call.get("challenge").is_none(), "{lane} {tool}: {call}");
                }
            }
        }
        if let Some(calls) = calls {
            let mut reached: Vec<String> =
                std::fs::read_to_string(calls).unwrap_or_default().lines().map(str::to_string).collect();
            reached.sort();
            assert_eq!(&reached, want, "lane {lane}: only the listed tools reach the server");
        }
    };

    // Over stdio: one proxy per lane, the credential given on its command line.
    for (lane, credential) in [
        ("none", None),
        ("applicant", Some(("cred-applicant-0457", "club.applicant"))),
        ("member", Some(("cred-member-0192", "club.member"))),
    ] {
        let calls = dir.join(format!("calls-stdio-{lane}.txt"));
        let mut command = Command::new(python());
        command.arg(&client).args(["--lane", lane, "--", remit_bin, "mcp-proxy", "--policy"]).arg(&club);
        command
            .args(["--subject", "agent:club/answers", "--store"])
            .arg(format!("sqlite:{}", dir.join(format!("{lane}.db")).display()));
        if let Some((id, scope)) = credential {
            command.args(["--credential", id, "--credential-scopes", scope]);
        }
        command.arg("--").arg(python()).arg(&server).arg("--calls").arg(&calls).stdin(Stdio::null());
        let report = client_report(command, &dir.join("none.log"));
        check(lane, &report[lane], Some(&calls), false);
    }

    // Over HTTP: one proxy, each lane a JWT whose `scope` is the lane's credential.
    let (key, jwk) = es256_key("club-1");
    std::fs::write(dir.join("jwks.json"), json!({"keys": [jwk]}).to_string()).unwrap();
    let calls = dir.join("calls-http.txt");
    let mut command = Command::new(remit_bin);
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(&club)
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("http.db").display()))
        .args(["--listen", "127.0.0.1:0", "--jwks"])
        .arg(dir.join("jwks.json"))
        .args(["--jwt-issuer", "https://id.harbour-rowing.example", "--jwt-audience", "club-answers", "--"])
        .arg(python())
        .arg(&server)
        .arg("--calls")
        .arg(&calls);
    let proxy = Session::spawn(command, &dir);
    let deadline = Instant::now() + WAIT;
    let url = proxy.mcp_url(deadline);
    let now = unix_now();
    let token = |scope: &str, client: &str| {
        let claims = json!({"iss": "https://id.harbour-rowing.example", "aud": "club-answers",
                            "sub": "agent:club/answers", "exp": now + 600, "scope": scope, "client_id": client});
        jwt(jsonwebtoken::Algorithm::ES256, "club-1", &key, &claims)
    };
    let mut sdk = Command::new(python());
    sdk.arg(&client)
        .args(["--http", &url])
        .args(["--lane", &format!("none={}", token("", "conversation-1"))])
        .args(["--lane", &format!("applicant={}", token("club.applicant", "cred-applicant-0457"))])
        .args(["--lane", &format!("member={}", token("club.member", "cred-member-0192"))])
        .stdin(Stdio::null());
    let report = client_report(sdk, &dir.join("none.log"));
    // One server for the three lanes: what reached it is the lanes' listings together (each call once).
    let mut all: Vec<String> = expected.values().flatten().cloned().collect();
    all.sort();
    let mut reached: Vec<String> = std::fs::read_to_string(&calls).unwrap().lines().map(str::to_string).collect();
    reached.sort();
    assert_eq!(reached, all);
    for lane in ["none", "applicant", "member"] {
        check(lane, &report[lane], None, true);
    }
    // The stateless revision gets the same challenge: an applicant's token calling a member's tool.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "crew_schedule", "arguments": {"week": "2026-W50"},
                                 "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                           "io.modelcontextprotocol/clientCapabilities": {}}}});
    let auth = format!("Bearer {}", token("club.applicant", "cred-applicant-0457"));
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "crew_schedule"),
    ];
    let refused =
        remit_gateway::client::blocking::request("POST", &url, &headers, Some(call.to_string().as_bytes())).unwrap();
    assert_eq!(refused.status, 403, "{}", refused.json());
    let challenge = refused.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"club.member\""),
        "{challenge}"
    );
    assert_eq!((refused.json()["id"].clone(), refused.json()["error"]["code"].clone()), (json!(7), json!(-32003)));
    assert_eq!(refused.json()["error"]["data"]["scope"], "club.member");
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// The stateless revision 2026-07-28 over HTTP: the official Python SDK's client in its stateless mode
/// (`server/discover`, `_meta` and the `Mcp-Method` / `Mcp-Name` headers on every request) runs the whole flow
/// without a session; requests whose headers do not match their body are refused with `HeaderMismatch`.
#[test]
fn the_stateless_revision_over_http() {
    let dir = sandbox("stateless");
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/filesystem"))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(["--listen", "127.0.0.1:0", "--agent-token", "agent:coder=coder-token-1"])
        .args(["--inbox-token", &format!("user:owner={OWNER_TOKEN}"), "--", "node"])
        .arg(server())
        .arg(dir.join("root"));
    let proxy = Session::spawn(command, &dir);
    let deadline = Instant::now() + WAIT;
    let url = proxy.mcp_url(deadline);
    let mut sdk = Command::new(python());
    sdk.arg(root().join("tests/mcp/client.py"))
        .args(["--http", &url, "--agent-token", "coder-token-1", "--token", OWNER_TOKEN, "--stateless"])
        .stdin(Stdio::null());
    let report = client_report(sdk, &dir.join("none.log"));
    check_report_at(&report, &dir, "2026-07-28");

    // By hand: (header name, value) pairs and a body.
    let post = |extra: &[(&str, &str)], body: &Value| stateless_post(&url, "coder-token-1", extra, body);
    let meta = stateless_meta();
    let v = ("MCP-Protocol-Version", "2026-07-28");
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}});
    let found = post(&[v, ("Mcp-Method", "server/discover")], &discover);
    assert_eq!(found.status, 200, "{}", found.json());
    assert!(found.header("mcp-session-id").is_none(), "no session in the stateless revision");
    let result = &found.json()["result"];
    assert!(result["supportedVersions"].as_array().unwrap().contains(&json!("2026-07-28")), "{result}");
    assert!(result["supportedVersions"].as_array().unwrap().contains(&json!("2025-06-18")), "{result}");
    assert_eq!((result["resultType"].as_str(), result["ttlMs"].as_i64()), (Some("complete"), Some(0)), "{result}");

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}});
    let listed = post(&[v, ("Mcp-Method", "tools/list")], &list);
    assert_eq!(names(&listed.json()).len(), 5, "{}", listed.json());
    assert_eq!(listed.json()["result"]["cacheScope"], "private");

    let read = |id: i64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": {"path": "workspace/"}, "_meta": meta}})
    };
    let ok = post(&[v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "list_directory")], &read(3, "list_directory"));
    assert_eq!(ok.status, 200);
    assert!(text(&ok.json()["result"]).contains("a.txt"), "{}", ok.json());
    // The same name, Base64-wrapped as the revision allows, is the same name.
    let wrapped = format!("=?base64?{}?=", "bGlzdF9kaXJlY3Rvcnk=");
    let ok = post(&[v, ("Mcp-Method", "tools/call"), ("Mcp-Name", &wrapped)], &read(4, "list_directory"));
    assert_eq!(ok.status, 200, "{}", ok.json());

    // Headers that disagree with the body, or are missing: 400, HeaderMismatch, the request's id; nothing runs.
    for (id, headers) in [
        (5, vec![v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "read_text_file")]),
        (6, vec![v, ("Mcp-Method", "tools/list"), ("Mcp-Name", "list_directory")]),
        (7, vec![v, ("Mcp-Name", "list_directory")]),
        (8, vec![v, ("Mcp-Method", "tools/call")]),
        (9, vec![v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?not base64?=")]),
        (10, vec![v, ("Mcp-Method", "tools/call"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "list_directory")]),
    ] {
        let refused = post(&headers, &read(id, "list_directory"));
        assert_eq!(refused.status, 400, "{id}: {}", refused.json());
        assert_eq!(refused.json()["error"]["code"], -32020, "{id}: {}", refused.json());
        assert_eq!(refused.json()["id"], id);
    }
    // A body whose `_meta` names another revision than the header.
    let mut other = read(11, "list_directory");
    other["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-06-18");
    let refused = post(&[v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "list_directory")], &other);
    assert_eq!((refused.status, refused.json()["error"]["code"].clone()), (400, json!(-32020)));
    // No `_meta` envelope: invalid params.
    let bare = json!({"jsonrpc": "2.0", "id": 12, "method": "tools/list"});
    let refused = post(&[v, ("Mcp-Method", "tools/list")], &bare);
    assert_eq!((refused.status, refused.json()["error"]["code"].clone()), (400, json!(-32602)));
    // A revision the proxy does not speak: the versions it does.
    let unknown = post(&[("MCP-Protocol-Version", "2099-01-01"), ("Mcp-Method", "tools/list")], &list);
    assert_eq!((unknown.status, unknown.json()["error"]["code"].clone()), (400, json!(-32022)));
    assert!(unknown.json()["error"]["data"]["supported"].as_array().unwrap().contains(&json!("2026-07-28")));
    // `initialize` is not part of the revision.
    let init = json!({"jsonrpc": "2.0", "id": 13, "method": "initialize",
                      "params": {"protocolVersion": "2026-07-28", "capabilities": {}, "_meta": meta,
                                 "clientInfo": {"name": "t", "version": "1"}}});
    let refused = post(&[v, ("Mcp-Method", "initialize")], &init);
    assert_eq!((refused.status, refused.json()["error"]["code"].clone()), (404, json!(-32601)));
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// Several upstreams behind one proxy (`--upstream NAME=stdio:…`): the filesystem server and the club's server, their
/// tools merged under their own names, each call routed to the server that offers the tool; the same server twice
/// makes every tool a collision, reported on stderr, neither listed nor called.
#[test]
fn several_upstreams_merge_their_tools_and_refuse_collisions() {
    let dir = sandbox("multi");
    let club = format!("stdio:{} {}", python().display(), root().join("tests/mcp/club/server.py").display());
    let files = format!("stdio:node {} {}", server().display(), dir.join("root").display());
    let proxy_for = |name: &str, upstreams: &[String]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
        command
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(root().join("tests/mcp/multi"))
            .arg(root().join("tests/mcp/filesystem/catalog.remit"))
            .arg(root().join("examples/club/catalog.remit"))
            .args(["--subject", "agent:helper", "--store"])
            .arg(format!("sqlite:{}", dir.join(format!("{name}.db")).display()));
        for upstream in upstreams {
            command.arg("--upstream").arg(upstream);
        }
        Session::spawn(command, &dir)
    };

    let mut proxy = proxy_for("merged", &[format!("files={files}"), format!("club={club}")]);
    proxy.initialize();
    let list = proxy.request(1, "tools/list", json!({}));
    assert_eq!(names(&list), ["club_info", "opening_hours", "read_text_file"], "{list}");
    let read = proxy.call(2, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert_eq!((is_error(&read), text(&read)), (false, "hello from the workspace\n".to_string()), "{read}");
    let asked = proxy.call(3, "opening_hours", json!({"weekday": "monday"}));
    assert_eq!((is_error(&asked), text(&asked)), (false, "opening_hours: monday: 07:00-21:00".to_string()));
    let denied = proxy.call(4, "read_text_file", json!({"path": "secret.txt"}));
    assert!(is_error(&denied) && text(&denied).contains("scope.outside"), "{denied}");
    let undeclared = proxy.call(5, "crew_schedule", json!({"week": "2026-W50"}));
    assert!(is_error(&undeclared) && text(&undeclared).contains("remit denied"), "{undeclared}");
    drop(proxy);

    let mut twice = proxy_for("twice", &[format!("a={club}"), format!("b={club}")]);
    twice.initialize();
    let list = twice.request(1, "tools/list", json!({}));
    assert_eq!(names(&list), Vec::<String>::new(), "{list}");
    let refused = twice.request(2, "tools/call", json!({"name": "club_info", "arguments": {"topic": "history"}}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("several upstream servers"), "{refused}");
    let deadline = Instant::now() + WAIT;
    loop {
        let line = twice.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("reported");
        if line.contains("the tool `club_info` is offered by the upstreams `a` and `b`") {
            break;
        }
    }
    drop(twice);
    std::fs::remove_dir_all(&dir).ok();
}

/// The proxy with policy tests/mcp/slow (its store in `dir`), `identity`'s flags and a 1 s `--upstream-timeout`, in
/// front of `@modelcontextprotocol/server-everything` over stdio.
fn slow_proxy(dir: &Path, identity: &[&str], upstream: Option<&str>) -> Command {
    let everything = root().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(everything.exists(), "run `./scripts/test-deps.sh` (or scripts/test-deps-mcp.sh)");
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/slow"))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(identity)
        .args(["--upstream-timeout", "1", "--"]);
    match upstream {
        Some(url) => command.arg(url),
        None => command.arg("node").arg(&everything).arg("stdio"),
    };
    command
}

/// A call the upstream does not answer within `--upstream-timeout` fails on its own (`-32603`, and the request is
/// cancelled upstream) while calls after it are answered; the proxy goes on serving. The upstream is
/// `@modelcontextprotocol/server-everything` over stdio, whose long-running operation takes as long as it is asked
/// to. The tools are listed first, so the calls take the proxy's direct path (decided on the thread that reads the
/// agent, answered from the one that reads the upstream) and the timeout is that path's.
#[test]
fn a_call_the_upstream_does_not_answer_in_time_fails_alone() {
    let dir = sandbox("slow");
    let mut proxy = Session::spawn(slow_proxy(&dir, &["--subject", "agent:tester"], None), &dir);
    proxy.initialize();
    let listed = proxy.request(1, "tools/list", json!({}));
    assert_eq!(names(&listed), ["echo", "trigger-long-running-operation"]);

    let started = Instant::now();
    let slow = json!({"name": "trigger-long-running-operation", "arguments": {"duration": 4, "steps": 1}});
    proxy.send_line(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": slow}).to_string());
    // Sent after the slow call and answered before its timeout: nothing waits on it.
    let echo = proxy.call(3, "echo", json!({"message": "meanwhile"}));
    assert!(text(&echo).contains("meanwhile"), "{echo}");
    assert!(started.elapsed() < Duration::from_millis(900), "the echo waited for the slow call");
    let timed_out = proxy.response(&json!(2));
    let waited = started.elapsed();
    assert_eq!(timed_out["error"]["code"], -32603, "{timed_out}");
    let message = timed_out["error"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer `tools/call` within 1 s"), "{message}");
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(3), "answered after {waited:?}");
    // Still serving, and the slow call's late answer (the server was asked to cancel it) reaches nobody.
    let echo = proxy.call(4, "echo", json!({"message": "after"}));
    assert!(text(&echo).contains("after"), "{echo}");
    let quick = json!({"name": "trigger-long-running-operation", "arguments": {"duration": 0.1, "steps": 1}});
    let done = proxy.request(5, "tools/call", quick);
    assert!(text(&done["result"]).contains("completed"), "{done}");
    assert_eq!(done["result"]["_meta"]["remit.dev/decision"]["outcome"], "allow", "{done}");
}

type Shared<T> = std::sync::Arc<std::sync::Mutex<T>>;

/// A key set served by the test on a loopback port at `/jwks.json`, which the test can change, and the number of
/// times it was fetched; and an authorization server's metadata (RFC 8414) at
/// `/.well-known/oauth-authorization-server` (`404` while it is `null`). Over https with the `tls` configuration
/// (the URL then names `localhost`), else plain http on 127.0.0.1.
fn key_set_server(
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> (String, Shared<Value>, std::sync::Arc<std::sync::atomic::AtomicU64>, Shared<Value>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = match tls {
        Some(_) => format!("https://localhost:{port}/jwks.json"),
        None => format!("http://127.0.0.1:{port}/jwks.json"),
    };
    let keys = Arc::new(Mutex::new(json!({"keys": []})));
    let metadata = Arc::new(Mutex::new(Value::Null));
    let hits = Arc::new(AtomicU64::new(0));
    let (served, counted, described) = (keys.clone(), hits.clone(), metadata.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            stream.set_read_timeout(Some(WAIT)).ok();
            let mut reader = BufReader::new(tls::Accepted::new(stream, tls.as_ref()));
            let mut request_line = String::new();
            reader.read_line(&mut request_line).ok();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
            }
            let path = request_line.split(' ').nth(1).unwrap_or("").to_string();
            let body = if path == "/jwks.json" {
                counted.fetch_add(1, Ordering::SeqCst);
                Some(served.lock().unwrap().to_string())
            } else if path == "/.well-known/oauth-authorization-server" {
                Some(described.lock().unwrap().clone()).filter(|m| !m.is_null()).map(|m| m.to_string())
            } else {
                None
            };
            let (status, body) = match body {
                Some(body) => ("200 OK", body),
                None => ("404 Not Found", String::new()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut stream = reader.into_inner();
            stream.write_all(response.as_bytes()).ok();
            stream.finish();
        }
    });
    (url, keys, hits, metadata)
}

/// `--jwks-url`: the key set is fetched at start, again when a token names a key it lacks (a rotated key works at
/// once; a made-up `kid` causes no further fetch within 10 s) and when it is older than `--jwks-refresh`. A URL that
/// cannot be fetched, or is not loopback `http://`, stops the proxy at start. `--jwks-from-issuer` reads the URL from
/// the issuer's metadata (RFC 8414), which must name that issuer.
#[test]
fn jwt_keys_fetched_from_a_url_follow_rotation_and_refresh() {
    use jsonwebtoken::Algorithm::ES256;
    use remit_gateway::client::blocking::request;
    use std::sync::atomic::Ordering;
    let dir = sandbox("jwks-url");
    let (upstream, _) = recording_upstream();
    let (old, old_jwk) = es256_key("old");
    let (new, new_jwk) = es256_key("new");
    let (url, keys, hits, metadata) = key_set_server(None);
    *keys.lock().unwrap() = json!({"keys": [old_jwk.clone()]});
    let issuer = "https://auth.test.example";
    let proxy_with = |key_url: &str| {
        let mut command = everything_proxy(&dir.join("state.db"));
        command.args(["--listen", "127.0.0.1:0", "--jwks-url", key_url, "--jwks-refresh", "2"]).args([
            "--jwt-issuer",
            issuer,
            "--jwt-audience",
            "remit-test",
            "--",
            &upstream,
        ]);
        command
    };
    let proxy = Session::spawn(proxy_with(&url), &dir);
    let deadline = Instant::now() + WAIT;
    let mcp = proxy.mcp_url(deadline);
    assert_eq!(hits.load(Ordering::SeqCst), 1, "fetched at start");
    let now = unix_now();
    let claims = json!({"iss": issuer, "aud": "remit-test", "sub": "agent:tester", "exp": now + 300});
    let init = initialize_message();
    let open = |token: &str| {
        let auth = format!("Bearer {token}");
        let headers = [("Content-Type", "application/json"), ("Authorization", auth.as_str())];
        request("POST", &mcp, &headers, Some(init.to_string().as_bytes())).unwrap()
    };
    assert_eq!(open(&jwt(ES256, "old", &old, &claims)).status, 200);
    assert_eq!(hits.load(Ordering::SeqCst), 1, "a known key needs no fetch");

    // The authorization server rotates to a new key: the first token signed with it makes the proxy fetch again.
    *keys.lock().unwrap() = json!({"keys": [new_jwk.clone()]});
    assert_eq!(open(&jwt(ES256, "new", &new, &claims)).status, 200);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // The old key is gone, and further unknown keys (a made-up `kid`) fetch nothing more for now.
    let refused = open(&jwt(ES256, "old", &old, &claims));
    assert_eq!(refused.status, 401);
    assert!(refused.header("www-authenticate").unwrap().contains("error=\"invalid_token\""));
    assert_eq!(open(&jwt(ES256, "made-up", &old, &claims)).status, 401);
    assert_eq!(hits.load(Ordering::SeqCst), 2, "unknown keys refetch at most once per 10 s");

    // Past `--jwks-refresh`, the next request fetches the set again: the old key, served again, is accepted.
    *keys.lock().unwrap() = json!({"keys": [old_jwk, new_jwk]});
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!(open(&jwt(ES256, "old", &old, &claims)).status, 200);
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    drop(proxy);

    // A key set that cannot be fetched, or would be fetched in the clear from another host, stops the proxy.
    for (bad, said) in [("http://127.0.0.1:9/jwks.json", "cannot connect"), ("http://auth.example/jwks", "loopback")] {
        let output = proxy_with(bad).current_dir(dir.join("root")).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(said), "{bad}: {stderr}");
    }

    // `--jwks-from-issuer`: the URL is the `jwks_uri` of the issuer's metadata, which must name that issuer.
    let local_issuer = url.trim_end_matches("/jwks.json").to_string();
    let from_issuer = |issuer: &str| {
        let mut command = everything_proxy(&dir.join("issuer.db"));
        command.args(["--listen", "127.0.0.1:0", "--jwks-from-issuer", "--jwt-issuer", issuer]).args([
            "--jwt-audience",
            "remit-test",
            "--",
            &upstream,
        ]);
        command
    };
    let output = from_issuer(&local_issuer).current_dir(dir.join("root")).stdin(Stdio::null()).output().unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("no metadata for the issuer"), "no metadata yet");
    *metadata.lock().unwrap() = json!({"issuer": "http://elsewhere.example", "jwks_uri": url});
    let output = from_issuer(&local_issuer).current_dir(dir.join("root")).stdin(Stdio::null()).output().unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("names another issuer"), "a mismatching issuer");
    *metadata.lock().unwrap() = json!({"issuer": local_issuer, "jwks_uri": url});
    let proxy = Session::spawn(from_issuer(&local_issuer), &dir);
    let mcp = proxy.mcp_url(deadline);
    let claims = json!({"iss": local_issuer, "aud": "remit-test", "sub": "agent:tester", "exp": now + 300});
    let auth = format!("Bearer {}", jwt(ES256, "new", &new, &claims));
    let headers = [("Content-Type", "application/json"), ("Authorization", auth.as_str())];
    assert_eq!(request("POST", &mcp, &headers, Some(init.to_string().as_bytes())).unwrap().status, 200);
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// Key sets over https: fetched from a server whose certificate a CA made here signed, given with `--tls-ca`, a
/// token signed by the served key is accepted (and `--jwks-from-issuer` discovers the URL over https too). Without
/// the CA, or with a certificate for another name, or a CA file that holds no certificate, the proxy stops at start
/// and says why; plain http to another host is refused (jwt_keys_fetched_from_a_url_follow_rotation_and_refresh).
#[test]
fn jwt_keys_fetched_over_https() {
    use jsonwebtoken::Algorithm::ES256;
    use remit_gateway::client::blocking::request;
    use std::sync::atomic::Ordering;
    let dir = sandbox("jwks-https");
    let (upstream, _) = recording_upstream();
    let (key, jwk) = es256_key("k1");
    let ca = tls::TestCa::new("remit test CA");
    let ca_file = ca.write(&dir.join("ca.pem"));
    let (url, keys, hits, metadata) = key_set_server(Some(ca.server(&["localhost", "127.0.0.1"])));
    *keys.lock().unwrap() = json!({"keys": [jwk]});
    let issuer = url.trim_end_matches("/jwks.json").to_string();
    *metadata.lock().unwrap() = json!({"issuer": issuer, "jwks_uri": url});
    let proxy_with = |keys: &[&str], ca: Option<&str>| {
        let mut command = everything_proxy(&dir.join("state.db"));
        command.args(["--listen", "127.0.0.1:0"]).args(keys);
        if let Some(ca) = ca {
            command.args(["--tls-ca", ca]);
        }
        command.args(["--jwt-issuer", &issuer, "--jwt-audience", "remit-test", "--", &upstream]);
        command
    };
    let now = unix_now();
    let claims = json!({"iss": issuer, "aud": "remit-test", "sub": "agent:tester", "exp": now + 300});
    let token = format!("Bearer {}", jwt(ES256, "k1", &key, &claims));
    let headers = [("Content-Type", "application/json"), ("Authorization", token.as_str())];
    let init = initialize_message().to_string();
    for (flags, fetched) in [(vec!["--jwks-url", url.as_str()], 1), (vec!["--jwks-from-issuer"], 2)] {
        let proxy = Session::spawn(proxy_with(&flags, Some(&ca_file)), &dir);
        let mcp = proxy.mcp_url(Instant::now() + WAIT);
        assert_eq!(hits.load(Ordering::SeqCst), fetched, "{flags:?}: fetched at start");
        let opened = request("POST", &mcp, &headers, Some(init.as_bytes())).unwrap();
        assert_eq!(opened.status, 200, "{flags:?}: a token signed by the key fetched over https");
        drop(proxy);
    }

    // Refused at start, saying why.
    let (misnamed, misnamed_keys, _, _) = key_set_server(Some(ca.server(&["elsewhere.example"])));
    *misnamed_keys.lock().unwrap() = json!({"keys": [es256_key("k2").1]});
    let not_pem = dir.join("not-a-ca.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let not_pem = not_pem.display().to_string();
    for (flags, ca, said) in [
        (vec!["--jwks-url", url.as_str()], None, "not issued by a trusted authority"),
        (vec!["--jwks-from-issuer"], None, "not issued by a trusted authority"),
        (vec!["--jwks-url", misnamed.as_str()], Some(ca_file.as_str()), "not valid for the name `localhost`"),
        (vec!["--jwks-url", url.as_str()], Some(not_pem.as_str()), "holds no certificate"),
        (vec!["--jwks-url", "http://auth.example/jwks.json"], Some(ca_file.as_str()), "only from a loopback host"),
    ] {
        let output = proxy_with(&flags, ca).current_dir(dir.join("root")).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(said), "{flags:?} {ca:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The `Mcp-Param-*` headers of MCP 2026-07-28: a stateless `tools/call` must carry, for each argument its tool's schema
/// marks `x-mcp-header`, the header with the argument's value (plain or `=?base64?…?=`); a missing, different,
/// repeated or undecodable one, or one for an absent argument, is `400 HeaderMismatch` and nothing is decided or
/// forwarded. Upstream, the proxy sends the headers from the message it forwards. A tool whose annotations break the
/// revision's rules is left out (listing and calls).
#[test]
fn mcp_param_headers_are_checked_against_the_arguments_and_sent_upstream() {
    let dir = sandbox("mcp-param");
    let (upstream, seen) = recording_upstream();
    let mut command = everything_proxy(&dir.join("state.db"));
    command.args(["--listen", "127.0.0.1:0", "--agent-token", "agent:tester=tester-token", "--", &upstream]);
    let proxy = Session::spawn(command, &dir);
    let deadline = Instant::now() + WAIT;
    let url = proxy.mcp_url(deadline);
    let post = |extra: &[(&str, &str)], body: &Value| stateless_post(&url, "tester-token", extra, body);
    let meta = stateless_meta();
    let v = ("MCP-Protocol-Version", "2026-07-28");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    let listed = post(&[v, ("Mcp-Method", "tools/list")], &list);
    assert_eq!(names(&listed.json()), ["echo"], "get-sum's annotation is invalid: {}", listed.json());
    let warned = loop {
        let line = proxy.errors.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("a warning");
        if line.contains("`get-sum` is left out") {
            break line;
        }
    };
    assert!(warned.contains("not a string, integer or boolean"), "{warned}");

    let echo = |id: i64, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": arguments, "_meta": meta}})
    };
    let call = [v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        call.iter().chain(extra).copied().collect()
    };
    let forwarded =
        || seen.lock().unwrap().iter().filter(|r| r.contains("\"tools/call\"")).cloned().collect::<Vec<_>>();

    // The header matches the argument: decided and forwarded, the upstream gets the header too.
    let ok = post(&with(&[("Mcp-Param-Message", "hello")]), &echo(2, json!({"message": "hello"})));
    assert_eq!(ok.status, 200, "{}", ok.json());
    assert_eq!(text(&ok.json()["result"]), "Echo: hello");
    assert!(forwarded()[0].to_ascii_lowercase().contains("mcp-param-message: hello\r\n"), "{}", forwarded()[0]);
    // Header names are case-insensitive; a value outside plain ASCII comes Base64-wrapped, and goes on so.
    let wrapped = "=?base64?R3LDvMOfZQ==?="; // "Grüße"
    let ok = post(&with(&[("MCP-PARAM-MESSAGE", wrapped)]), &echo(3, json!({"message": "Grüße"})));
    assert_eq!(ok.status, 200, "{}", ok.json());
    let sent = forwarded()[1].to_ascii_lowercase();
    assert!(sent.contains(&format!("mcp-param-message: {}\r\n", wrapped.to_ascii_lowercase())), "{sent}");
    // No argument, no header (and an unknown Mcp-Param header is ignored): past the headers, to the decision (the
    // policy's `forbid echo where args.message == …` cannot be evaluated without it, so it is denied).
    let ok = post(&with(&[("Mcp-Param-Other", "x")]), &echo(4, json!({})));
    assert_eq!(ok.status, 200, "{}", ok.json());
    assert_eq!(ok.json()["result"]["_meta"]["remit.dev/decision"]["outcome"], "deny", "{}", ok.json());

    // Missing, different, repeated, undecodable, or sent for an absent argument: refused before anything runs.
    for (id, headers, arguments) in [
        (5, vec![], json!({"message": "hello"})),
        (6, vec![("Mcp-Param-Message", "other")], json!({"message": "hello"})),
        (7, vec![("Mcp-Param-Message", "hello"), ("Mcp-Param-Message", "hello")], json!({"message": "hello"})),
        (8, vec![("Mcp-Param-Message", "=?base64?not base64?=")], json!({"message": "hello"})),
        (9, vec![("Mcp-Param-Message", "hello")], json!({})),
        (10, vec![("Mcp-Param-Message", "hello")], json!({"message": null})),
    ] {
        let refused = post(&with(&headers), &echo(id, arguments));
        assert_eq!(refused.status, 400, "{id}: {}", refused.json());
        assert_eq!(refused.json()["error"]["code"], -32020, "{id}: {}", refused.json());
        assert_eq!(refused.json()["id"], id);
    }
    assert_eq!(forwarded().len(), 2, "no refused call reached the upstream");
    // The invalid tool cannot be called either.
    let sum = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
                     "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}, "_meta": meta}});
    let refused = post(&[v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "get-sum"), ("Mcp-Param-A", "1")], &sum);
    assert_eq!(refused.json()["error"]["code"], -32602, "{}", refused.json());
    // Once the proxy has stopped, the entries that waited in the queue (these decisions change nothing but the log,
    // so they were answered before their entries were written) are in the log, and the chain holds: three decisions,
    // and the outcomes of the two forwarded calls.
    drop(proxy);
    let store = format!("sqlite:{}", dir.join("state.db").display());
    let verify = Command::new(env!("CARGO_BIN_EXE_remit")).args(["audit", "verify", &store]).output().unwrap();
    let out = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success() && out.starts_with("5 entries, the chain holds"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A POST of `body` to the proxy's `/mcp` at `url` with the agent token `token` and the `extra` headers.
fn stateless_post(
    url: &str,
    token: &str,
    extra: &[(&str, &str)],
    body: &Value,
) -> remit_gateway::client::blocking::Response {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("Content-Type", "application/json"), ("Authorization", auth.as_str())];
    headers.extend_from_slice(extra);
    remit_gateway::client::blocking::request("POST", url, &headers, Some(body.to_string().as_bytes())).unwrap()
}

/// The `_meta` a request of the stateless 2026-07-28 revision carries.
fn stateless_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
}

/// The stateless revision 2026-07-28 over stdio, by hand: no `initialize` before the requests, `server/discover`
/// answered by the proxy, results typed (`resultType`, and `ttlMs` / `cacheScope` on listings) whether the call is
/// forwarded or refused, and the revision's refusals; a request without the revision's `_meta` in the same session
/// is answered as before.
#[test]
fn the_stateless_revision_over_stdio() {
    let dir = sandbox("stateless-stdio");
    let mut proxy = Session::proxy(&dir, "agent:coder");
    let meta = stateless_meta();
    let with_meta = |params: Value| {
        let mut params = params;
        params["_meta"] = meta.clone();
        params
    };

    let found = proxy.request(1, "server/discover", with_meta(json!({})));
    let result = &found["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28", "2025-06-18", "2025-03-26", "2024-11-05"]), "{found}");
    assert!(result["capabilities"]["tools"].is_object(), "{found}");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "remit-mcp-proxy", "{found}");
    assert_eq!(
        (&result["resultType"], &result["ttlMs"], &result["cacheScope"]),
        (&json!("complete"), &json!(0), &json!("private"))
    );

    let list = proxy.request(2, "tools/list", with_meta(json!({})));
    assert_eq!(names(&list), ["create_directory", "get_file_info", "list_directory", "read_text_file", "write_file"]);
    assert_eq!((&list["result"]["resultType"], &list["result"]["ttlMs"]), (&json!("complete"), &json!(0)), "{list}");

    // Forwarded and answered from the upstream's reader thread (the decision spliced in) …
    let call = |path: &str| with_meta(json!({"name": "read_text_file", "arguments": {"path": path}}));
    let read = proxy.request(3, "tools/call", call("workspace/a.txt"))["result"].clone();
    assert_eq!(text(&read), "hello from the workspace\n", "{read}");
    assert_eq!(read["resultType"], "complete", "{read}");
    assert_eq!(read["_meta"]["remit.dev/decision"]["outcome"], "allow", "{read}");
    // … and refused by the proxy.
    let denied = proxy.request(4, "tools/call", call("../secret.txt"))["result"].clone();
    assert!(is_error(&denied) && text(&denied).contains("scope.outside"), "{denied}");
    assert_eq!(denied["resultType"], "complete", "{denied}");

    // The same request without the revision's `_meta`: the earlier revisions' answer, untyped.
    let plain = proxy.call(5, "read_text_file", json!({"path": "workspace/a.txt"}));
    assert!(plain.get("resultType").is_none() && text(&plain) == "hello from the workspace\n", "{plain}");

    // Refusals: `server/discover` without the revision's `_meta`; `initialize` in that revision; a revision the
    // proxy does not speak (with those it does); the revision without the client's capabilities.
    let error = |answer: &Value| (answer["error"]["code"].as_i64().unwrap_or(0), answer.to_string());
    let bare = proxy.request(6, "server/discover", json!({}));
    assert_eq!(error(&bare).0, -32602, "{bare}");
    let init =
        json!({"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let initialize = proxy.request(7, "initialize", with_meta(init));
    assert_eq!(error(&initialize).0, -32601, "{initialize}");
    assert!(error(&initialize).1.contains("server/discover"), "{initialize}");
    let future = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                                  "io.modelcontextprotocol/clientCapabilities": {}}});
    let unsupported = proxy.request(8, "tools/list", future);
    assert_eq!(error(&unsupported).0, -32022, "{unsupported}");
    assert_eq!(unsupported["error"]["data"]["requested"], "2099-01-01");
    assert!(unsupported["error"]["data"]["supported"].as_array().unwrap().contains(&json!("2026-07-28")));
    let incapable = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    assert_eq!(error(&proxy.request(9, "tools/list", incapable)).0, -32602);

    // A legacy session still opens as before, in the same process.
    let opened = proxy.initialize();
    assert_eq!(opened["result"]["protocolVersion"], "2025-06-18", "{opened}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit mcp-proxy` on the policy tests/mcp/modern for `agent:tester`, in front of `upstream` (a command or an
/// HTTP URL), with `flags` before it.
/// tests/mcp/modern/server.py over Streamable HTTP on a free loopback port, once it listens; its `/mcp` URL.
fn modern_server_over_http(dir: &Path) -> (Session, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut command = Command::new(python());
    command.arg(root().join("tests/mcp/modern/server.py")).args(["--http", &port.to_string()]);
    let server = Session::spawn(command, dir);
    let deadline = Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the Python server did not listen on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// `remit mcp-proxy --listen` with tests/mcp/modern's policy, the store `dir/store`, the agent token
/// `tester-token-1` for `agent:tester`, `flags`, and `upstream`; the proxy and its `/mcp` URL.
fn modern_http_proxy(dir: &Path, store: &str, flags: &[&str], upstream: &[&str]) -> (Session, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .args(["mcp-proxy", "--policy"])
        .arg(root().join("tests/mcp/modern"))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join(store).display()))
        .args(["--listen", "127.0.0.1:0", "--agent-token", "agent:tester=tester-token-1"])
        .args(flags)
        .arg("--")
        .args(upstream);
    let proxy = Session::spawn(command, dir);
    let url = proxy.mcp_url(Instant::now() + WAIT);
    (proxy, url)
}

/// The `_meta` of a request of revision 2026-07-28 from a client that can answer a form elicitation.
fn asking_meta() -> Value {
    let mut meta = stateless_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {"form": {}}});
    meta
}

/// Every entry of the log of the store at `path`, read after its proxy stopped.
fn log_entries(path: &Path) -> Vec<remit_gateway::store::LogEntry> {
    let store = remit_gateway::sqlite::SqliteStore::open_existing(path).unwrap();
    let entries = remit_gateway::store::Store::begin_read(&store).unwrap().log_entries(0, 1000).unwrap();
    entries
}

fn modern_proxy(dir: &Path, flags: &[&str], upstream: &[&str]) -> Session {
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(root().join("tests/mcp/modern"))
        .args(["--subject", "agent:tester", "--store"])
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(flags)
        .arg("--")
        .args(upstream);
    Session::spawn(command, dir)
}

/// A minimal upstream of revision 2026-07-28 over HTTP, written here to control what a real server would not let a
/// test control: it announces `tools.listChanged`, lists `revision` and `shout` (and `grown` once `grown` is set),
/// and answers the proxy's `subscriptions/listen` with an event stream that it acknowledges, keeps open until
/// `grown` is set, and then ends without announcing the change. Its port, the flag, and how many listens it got.
fn silent_stateless_upstream() -> (u16, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (grown, listens) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let (flag, count) = (grown.clone(), listens.clone());
    std::thread::spawn(move || {
        for connection in listener.incoming().flatten() {
            let (grown, listens) = (flag.clone(), count.clone());
            std::thread::spawn(move || {
                let mut writer = connection.try_clone().unwrap();
                let mut reader = BufReader::new(connection);
                while let Some(body) = tls::read_request(&mut reader) {
                    let message: Value = serde_json::from_slice(&body).unwrap();
                    let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
                        writer.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").unwrap();
                        continue;
                    };
                    let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
                    let result = match method {
                        "server/discover" => json!({"supportedVersions": ["2026-07-28"], "resultType": "complete",
                                                    "capabilities": {"tools": {"listChanged": true}}}),
                        "tools/list" => {
                            let mut tools = vec![tool("revision"), tool("shout")];
                            if grown.load(Ordering::SeqCst) {
                                tools.push(tool("grown"));
                            }
                            json!({"tools": tools, "resultType": "complete"})
                        }
                        "subscriptions/listen" => {
                            listens.fetch_add(1, Ordering::SeqCst);
                            let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                                             "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                                                        "notifications": {"toolsListChanged": true}}});
                            let head =
                                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                            writer.write_all(format!("{head}data: {ack}\n\n").as_bytes()).unwrap();
                            let deadline = Instant::now() + WAIT;
                            while !grown.load(Ordering::SeqCst) && Instant::now() < deadline {
                                std::thread::sleep(Duration::from_millis(10));
                            }
                            // The stream ends, and with it the connection, the change untold.
                            return;
                        }
                        _ => {
                            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}});
                            let text = error.to_string();
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                                text.len()
                            );
                            writer.write_all(format!("{head}{text}").as_bytes()).unwrap();
                            continue;
                        }
                    };
                    let text = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        text.len()
                    );
                    writer.write_all(format!("{head}{text}").as_bytes()).unwrap();
                }
            });
        }
    });
    (port, grown, listens)
}

/// A change the upstream made while the proxy's `subscriptions/listen` stream to it was closing, and did not send
/// (a real server sends a change on the streams open at the time): when a stream ends, the proxy lists the tools
/// again before it opens the next one, and tells the agents when they differ. Without that, the agent would learn
/// of `grown` only at a listing of its own.
#[test]
fn a_change_missed_between_two_listen_streams_is_told() {
    let dir = sandbox("listen-gap");
    let (port, grown, listens) = silent_stateless_upstream();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut proxy = modern_proxy(&dir, &[], &[&url]);
    proxy.initialize();
    let list = proxy.request(1, "tools/list", json!({}));
    assert_eq!(names(&list), ["revision", "shout"], "{list}");
    let deadline = Instant::now() + WAIT;
    while listens.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the proxy never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    grown.store(true, Ordering::SeqCst);
    proxy.notification("notifications/tools/list_changed");
    let list = proxy.request(2, "tools/list", json!({}));
    assert_eq!(names(&list), ["grown", "revision", "shout"], "{list}");
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// An agent of revision 2026-07-28 listens for tool-list changes through the proxy (`subscriptions/listen`), over
/// stdio and over Streamable HTTP: the proxy acknowledges what it honours (tool-list changes only), tags every
/// message of the stream with the request's id, and tells the stream when the upstream's tool list changes (the
/// Python server's `grow` adds a tool); over stdio a cancelled subscription is told nothing more. Over HTTP a session of
/// the earlier revisions gets the same change on its `GET` event stream, untagged.
#[test]
fn an_agent_listens_for_tool_list_changes() {
    use remit_gateway::client::Tls;
    let dir = sandbox("agent-listens");
    let server = root().join("tests/mcp/modern/server.py");
    let server = server.to_str().unwrap();
    let python = python();
    let python = python.to_str().unwrap();
    let tag = "io.modelcontextprotocol/subscriptionId";
    let mut listen = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}});
    listen["_meta"] = stateless_meta();

    // Over stdio, the revision's `_meta` on each request.
    let mut proxy = modern_proxy(&dir, &[], &[python, server]);
    proxy.send_line(
        &json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                            "params": listen})
        .to_string(),
    );
    let ack = proxy.notification("notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "{ack}");
    assert_eq!(ack["params"]["_meta"][tag], "listen-1", "{ack}");
    // Without the revision's `_meta` the request is of the earlier revisions, which have no such method.
    let earlier = proxy.request(1, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}));
    assert_eq!(earlier["error"]["code"], -32601, "{earlier}");
    let mut call = json!({"name": "grow", "arguments": {}});
    call["_meta"] = stateless_meta();
    let grew = proxy.request(2, "tools/call", call.clone());
    assert_eq!(text(&grew["result"]), "grew", "{grew}");
    let changed = proxy.notification("notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"][tag], "listen-1", "{changed}");
    let mut list = json!({});
    list["_meta"] = stateless_meta();
    let listed = proxy.request(3, "tools/list", list);
    assert!(names(&listed).contains(&"grown".to_string()), "{listed}");
    // Cancelled: the next change reaches no stream, and this agent (of 2026-07-28 only: it opened no session) is not
    // sent the unasked notification of the earlier revisions either.
    proxy.notify_with("notifications/cancelled", json!({"requestId": "listen-1"}));
    assert_eq!(text(&proxy.request(4, "tools/call", call)["result"]), "grew");
    std::thread::sleep(Duration::from_millis(300));
    proxy.request(5, "ping", json!({}));
    let changes = proxy.skipped.iter().filter(|m| m["method"] == "notifications/tools/list_changed").count();
    assert_eq!(changes, 0, "{:?}", proxy.skipped);
    drop(proxy);

    // Over Streamable HTTP: the answer to the POST is an event stream that stays open.
    let (proxy, url) = modern_http_proxy(&dir, "http.db", &[], &[python, server]);
    let v = ("MCP-Protocol-Version", "2026-07-28");
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": listen}).to_string();
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", "Bearer tester-token-1"),
        v,
        ("Mcp-Method", "subscriptions/listen"),
    ];
    let mut stream = exchange(&Tls::platform(), "POST", &url, &headers, Some(body.as_bytes()), WAIT).unwrap();
    assert_eq!(stream.status, 200);
    assert!(stream.header("content-type").is_some_and(|t| t.starts_with("text/event-stream")));
    let next = |stream: &mut remit_gateway::client::blocking::Exchange| {
        let mut found = Value::Null;
        stream
            .events(1 << 20, |data| {
                found = serde_json::from_str(data).unwrap();
                true
            })
            .unwrap();
        found
    };
    let ack = next(&mut stream);
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "{ack}");
    assert_eq!(ack["params"]["_meta"][tag], 7, "{ack}");
    let mut call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                          "params": {"name": "grow", "arguments": {}}});
    call["params"]["_meta"] = stateless_meta();
    let grew = stateless_post(&url, "tester-token-1", &[v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "grow")], &call);
    assert!(String::from_utf8_lossy(&grew.body).contains("grew"), "{}", String::from_utf8_lossy(&grew.body));
    let changed = next(&mut stream);
    assert_eq!(changed["method"], "notifications/tools/list_changed", "{changed}");
    assert_eq!(changed["params"]["_meta"][tag], 7, "{changed}");
    // In a session of the earlier revision the request is refused, not passed upstream.
    let agent = [("Content-Type", "application/json"), ("Authorization", "Bearer tester-token-1")];
    let post = |headers: &[(&str, &str)], body: Value| {
        remit_gateway::client::blocking::request("POST", &url, headers, Some(body.to_string().as_bytes())).unwrap()
    };
    let opened = post(&agent, initialize_message());
    let session = opened.header("mcp-session-id").expect("a session").to_string();
    let in_session = [agent[0], agent[1], ("Mcp-Session-Id", session.as_str())];
    let listen = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                        "params": {"notifications": {"toolsListChanged": true}}});
    let refused = post(&in_session, listen).json();
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    // There, `GET` opens the session's event stream, which is told of changes without a tag; without a session `GET`
    // is refused.
    let get = |headers: &[(&str, &str)]| exchange(&Tls::platform(), "GET", &url, headers, None, WAIT).unwrap();
    assert_eq!(get(&agent[1..]).status, 405);
    let mut events = get(&[agent[1], in_session[2], ("Accept", "text/event-stream")]);
    assert_eq!(events.status, 200);
    let grow = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "grow", "arguments": {}}});
    assert_eq!(post(&in_session, grow).json()["result"]["content"][0]["text"], "grew");
    let plain = next(&mut events);
    assert_eq!(plain, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    // And the stateless agent's stream was told too.
    assert_eq!(next(&mut stream)["params"]["_meta"][tag], 7);
    drop(events);
    drop(stream);
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// Upstream in the stateless revision: a server of the official Python SDK (tests/mcp/modern/server.py, which speaks
/// 2026-07-28 and the earlier revisions; its tool `revision` says which one a call came in) behind the proxy, over
/// stdio and over Streamable HTTP. By default (`--upstream-revision auto`) the proxy finds 2026-07-28 in the
/// server's `server/discover` and speaks it, to an agent of revision 2025-06-18; decisions are made as ever.
/// `--upstream-revision 2025-06-18` opens a session instead; `2026-07-28` in front of a server of the earlier
/// revisions (the npm reference server, which every other test here reaches through `auto`'s fallback) fails.
#[test]
fn an_upstream_of_the_stateless_revision() {
    let dir = sandbox("modern-upstream");
    let server = root().join("tests/mcp/modern/server.py");
    let server = server.to_str().unwrap();
    let python = python();
    let python = python.to_str().unwrap();
    let ask = |proxy: &mut Session| {
        let init = proxy.initialize();
        assert!(init["result"]["capabilities"]["tools"].is_object(), "the upstream's capabilities: {init}");
        let list = proxy.request(1, "tools/list", json!({}));
        assert_eq!(names(&list), ["confirm", "grow", "revision", "shout"], "{list}");
        let loud = proxy.call(2, "shout", json!({"text": "hello"}));
        assert_eq!(text(&loud), "HELLO", "{loud}");
        assert_eq!(loud["_meta"]["remit.dev/decision"]["outcome"], "allow", "{loud}");
        let forbidden = proxy.call(3, "shout", json!({"text": "forbidden"}));
        assert!(is_error(&forbidden) && text(&forbidden).contains("rule.forbidden"), "{forbidden}");
        // A call no grant allows: the agent is told the closest grant and what it needs.
        let unlisted = proxy.call(5, "shout", json!({"text": "whisper"}));
        let said = text(&unlisted);
        assert!(is_error(&unlisted) && said.contains("rule.unmatched"), "{unlisted}");
        let closest = "closest grant: tester: `allow shout where args.text in [\"hello\", \"forbidden\"]` \
                       (policy.remit:38:3): `args.text` is \"whisper\", and the grant needs \
                       `args.text in [\"hello\", \"forbidden\"]`";
        assert!(said.contains(closest), "{said}");
        // The server adds a tool and says so: on the proxy's `subscriptions/listen` stream in 2026-07-28, unasked in
        // 2025-06-18. The proxy lists the upstream's tools again, so the new one is listed and callable.
        assert_eq!(text(&proxy.call(6, "grow", json!({}))), "grew");
        // This agent opened a session of 2025-06-18: it is told unasked, as that revision does.
        let told = proxy.notification("notifications/tools/list_changed");
        assert!(told.get("params").is_none(), "{told}");
        let deadline = Instant::now() + WAIT;
        let mut id = 10;
        loop {
            let list = proxy.request(id, "tools/list", json!({}));
            id += 1;
            if names(&list).contains(&"grown".to_string()) {
                break;
            }
            assert!(Instant::now() < deadline, "the proxy never listed the new tool: {list}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(text(&proxy.call(id, "grown", json!({}))), "grown");
        text(&proxy.call(4, "revision", json!({})))
    };

    let mut proxy = modern_proxy(&dir, &[], &[python, server]);
    assert_eq!(ask(&mut proxy), "2026-07-28");
    drop(proxy);
    let mut proxy = modern_proxy(&dir, &["--upstream-revision", "2025-06-18"], &[python, server]);
    assert_eq!(ask(&mut proxy), "2025-06-18");
    drop(proxy);

    // Over Streamable HTTP, on a free loopback port.
    let (upstream, url) = modern_server_over_http(&dir);
    let mut proxy = modern_proxy(&dir, &[], &[&url]);
    assert_eq!(ask(&mut proxy), "2026-07-28");
    drop(proxy);
    drop(upstream);

    // A server of the earlier revisions only, held to 2026-07-28.
    let everything = root().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut proxy =
        modern_proxy(&dir, &["--upstream-revision", "2026-07-28"], &["node", everything.to_str().unwrap(), "stdio"]);
    proxy.initialize();
    let refused = proxy.request(1, "tools/list", json!({}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not speak 2026-07-28: `server/discover`: Method not found"), "{refused}");
    let bad = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["mcp-proxy", "--policy", "x", "--subject", "a", "--upstream-revision", "2027-01-01", "--", "true"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && said.contains("`2027-01-01` is not a revision"), "{said}");
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// A tool that asks the user first (revision 2026-07-28's multi round-trip requests): the upstream, a server of the
/// official Python SDK, answers `tools/call` with an `InputRequiredResult`. An agent of that revision gets it as it
/// came, decision added, with the capabilities it declared passed upstream; it calls again with its answers
/// (`inputResponses`, `requestState`), and that call is decided and forwarded as any other. An agent of the earlier
/// revisions, which cannot answer it, gets an error instead. Over stdio and over HTTP, in front of the server over
/// stdio and over HTTP; the log marks the first round's outcome `input_required`.
#[test]
fn a_tool_that_asks_for_input_first() {
    let dir = sandbox("input-required");
    let server = root().join("tests/mcp/modern/server.py");
    let python = python();
    let upstream = [python.to_str().unwrap(), server.to_str().unwrap()];
    let meta = asking_meta();
    let first = |text: &str| json!({"name": "confirm", "arguments": {"text": text}, "_meta": meta});
    // The first round's result asks, and the second round answers it.
    let asked = |result: &Value| {
        assert_eq!(result["resultType"], "input_required", "{result}");
        assert_eq!(result["_meta"]["remit.dev/decision"]["outcome"], "allow", "{result}");
        let requests = result["inputRequests"].as_object().unwrap_or_else(|| panic!("input requests: {result}"));
        let (key, request) = requests.iter().next().unwrap();
        assert_eq!(request["method"], "elicitation/create", "{result}");
        assert_eq!(request["params"]["message"], "Shout hello?", "{result}");
        let mut again = first("hello");
        again["inputResponses"] = json!({key.as_str(): {"action": "accept", "content": {"sure": true}}});
        again["requestState"] = result["requestState"].clone();
        again
    };
    let answered = |result: &Value| {
        assert_eq!(result["resultType"], "complete", "{result}");
        assert_eq!(result["content"][0]["text"], "HELLO", "{result}");
        assert_eq!(result["_meta"]["remit.dev/decision"]["outcome"], "allow", "{result}");
    };
    // The proxy declares no capabilities upstream for it, so the server refuses to ask (a server that asked anyway
    // would be refused by the proxy: the unit test `a_spliced_answer_is_the_parsed_and_rebuilt_one`).
    let refused = |answer: &Value| {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("did not declare the form elicitation capability"), "{answer}");
    };

    // Over stdio.
    let mut proxy = modern_proxy(&dir, &[], &upstream);
    let result = proxy.request(1, "tools/call", first("hello"))["result"].clone();
    let again = asked(&result);
    answered(&proxy.request(2, "tools/call", again)["result"]);
    // The policy still decides every round.
    let forbidden = proxy.request(3, "tools/call", first("forbidden"))["result"].clone();
    assert_eq!(forbidden["_meta"]["remit.dev/decision"]["outcome"], "deny", "{forbidden}");
    // An agent of 2025-06-18 in the same proxy.
    proxy.initialize();
    refused(&proxy.request(4, "tools/call", json!({"name": "confirm", "arguments": {"text": "hello"}})));
    drop(proxy);

    // The log: the first round asked for input, the second completed, the third failed upstream.
    let entries = log_entries(&dir.join("state.db"));
    let outcomes: Vec<Value> = entries
        .iter()
        .filter(|e| e.kind == "outcome")
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap())
        .map(|e| json!([e.get("result_type"), e.get("is_error"), e.get("error").is_some()]))
        .collect();
    let want = [json!(["input_required", false, false]), json!([null, false, false]), json!([null, null, true])];
    assert_eq!(outcomes, want, "{entries:?}");

    // Over HTTP: an agent of 2026-07-28, then a session of 2025-06-18; in front of the server over stdio, then over
    // HTTP (the result read by the async client, and the decision spliced into it, not parsed).
    let over_http = |store: &str, upstream: &[&str]| {
        let (proxy, url) = modern_http_proxy(&dir, store, &[], upstream);
        let v = ("MCP-Protocol-Version", "2026-07-28");
        let headers = [v, ("Mcp-Method", "tools/call"), ("Mcp-Name", "confirm")];
        let call =
            |id: i64, params: &Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let asking = stateless_post(&url, "tester-token-1", &headers, &call(1, &first("hello")));
        let again = asked(&asking.json()["result"]);
        answered(&stateless_post(&url, "tester-token-1", &headers, &call(2, &again)).json()["result"]);
        let auth = ("Authorization", "Bearer tester-token-1");
        let json_type = ("Content-Type", "application/json");
        let accept = ("Accept", "application/json, text/event-stream");
        let init = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                                     "clientInfo": {"name": "t", "version": "1"}}});
        let post = |headers: &[(&str, &str)], body: &Value| {
            remit_gateway::client::blocking::request("POST", &url, headers, Some(body.to_string().as_bytes())).unwrap()
        };
        let opened = post(&[auth, json_type, accept], &init);
        let session = opened.header("mcp-session-id").expect("a session").to_string();
        let in_session = [auth, json_type, accept, ("Mcp-Session-Id", session.as_str())];
        let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                          "params": {"name": "confirm", "arguments": {"text": "hello"}}});
        let refusal = post(&in_session, &body);
        assert_eq!(refusal.status, 200, "{}", refusal.json());
        refused(&refusal.json());
        drop(proxy);
    };
    over_http("http.db", &upstream);
    let (server_over_http, url) = modern_server_over_http(&dir);
    over_http("http-upstream.db", &[&url]);
    drop(server_over_http);
    std::fs::remove_dir_all(&dir).ok();
}

/// A round of a multi round-trip call continues the round before it: when the owner's single-use approval let the
/// first round through (and the first round consumed it), the agent's answer to what the tool asked is the same
/// call and is allowed without a second approval. The round is taken once: the same answer sent again, or the call
/// begun anew, needs a new approval; but a round the upstream answered with an error is there for the next try. In
/// front of the official Python SDK's server: an agent over stdio (the server over stdio), and over HTTP (the server
/// over HTTP: the async client's path).
#[test]
fn an_approved_call_that_asks_for_input_is_approved_once() {
    let dir = sandbox("input-required-approved");
    let server = root().join("tests/mcp/modern/server.py");
    let python = python();
    let owner = format!("user:owner={OWNER_TOKEN}");
    let meta = asking_meta();
    let loud = json!({"name": "confirm", "arguments": {"text": "loud"}, "_meta": meta});
    let outcome = |result: &Value| result["_meta"]["remit.dev/decision"]["outcome"].as_str().unwrap_or("").to_string();
    // The flow, with `call` sending a `tools/call` and giving its result, and `between` run between the rounds; the
    // access request approved.
    let flow = |call: &dyn Fn(i64, &Value) -> Value, between: &dyn Fn(), inbox: &str| -> String {
        let escalated = call(1, &loud);
        assert_eq!(outcome(&escalated), "escalate", "{escalated}");
        let access = escalated["_meta"]["remit.dev/decision"]["access_request"]["id"].as_str().unwrap().to_string();
        let url = format!("{inbox}/inbox/api/requests/{access}/approve");
        let auth = format!("Bearer {OWNER_TOKEN}");
        let approved =
            remit_gateway::client::blocking::request("POST", &url, &[("Authorization", auth.as_str())], None).unwrap();
        assert_eq!(approved.status, 200, "{}", approved.json());

        // The first round: allowed (the approval consumed), and the tool asks.
        let asking = call(2, &loud);
        assert_eq!((outcome(&asking).as_str(), &asking["resultType"]), ("allow", &json!("input_required")), "{asking}");
        let (key, _) = asking["inputRequests"].as_object().unwrap().iter().next().unwrap();
        let mut answer = loud.clone();
        answer["inputResponses"] = json!({key.as_str(): {"action": "accept", "content": {"sure": true}}});
        answer["requestState"] = asking["requestState"].clone();
        // An answer the upstream refuses (an error response, not a result): the round is still there for the next.
        let mut wrong = answer.clone();
        wrong["inputResponses"] = json!("nonsense");
        let refused = call(30, &wrong);
        assert!(refused.is_null(), "an error response, not {refused}");
        between();

        // The second round continues it: allowed, without another approval, and the tool runs.
        let answered = call(3, &answer);
        assert_eq!(outcome(&answered), "allow", "{answered}");
        assert_eq!(answered["content"][0]["text"], "LOUD", "{answered}");

        // Taken once: the same answer again, and the call begun anew, escalate (the approval is consumed).
        let replayed = call(4, &answer);
        assert_eq!(outcome(&replayed), "escalate", "{replayed}");
        let anew = call(5, &loud);
        assert_eq!(outcome(&anew), "escalate", "{anew}");
        access
    };
    // The log: the second round (both tries) used the approval the first consumed, as the first round's.
    let logged = |store: &str, access: &str| {
        let entries = log_entries(&dir.join(store));
        let used: Vec<Value> = entries
            .iter()
            .filter(|e| e.kind == "decision")
            .map(|e| serde_json::from_str::<Value>(&e.body).unwrap())
            .filter(|e| e["decision"]["decision"] == "allow")
            .map(|e| json!([e["approvals_used"][0]["access_request"], e["approvals_used"][0].get("earlier_round")]))
            .collect();
        assert_eq!(used, [json!([access, null]), json!([access, true]), json!([access, true])], "{entries:?}");
    };

    // Over stdio.
    let flags = ["--inbox", "127.0.0.1:0", "--inbox-token", owner.as_str()];
    let mut proxy = modern_proxy(&dir, &flags, &[python.to_str().unwrap(), server.to_str().unwrap()]);
    let inbox = proxy.inbox();
    let proxy = std::cell::RefCell::new(proxy);
    let call = |id, params: &Value| proxy.borrow_mut().request(id, "tools/call", params.clone())["result"].clone();
    let access = flow(&call, &|| {}, &inbox);
    drop(proxy);
    logged("state.db", &access);

    // Over HTTP, in front of the server over HTTP.
    let (_server, upstream) = modern_server_over_http(&dir);
    let start = || {
        let (mut proxy, url) = modern_http_proxy(&dir, "http.db", &["--inbox-token", &owner], &[&upstream]);
        let inbox = proxy.inbox();
        (proxy, url, inbox)
    };
    let (proxy, url, inbox) = start();
    let serving = std::cell::RefCell::new((proxy, url));
    let headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "confirm")];
    let call = |id, params: &Value| {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        stateless_post(&serving.borrow().1, "tester-token-1", &headers, &message).json()["result"].clone()
    };
    // Between the rounds another proxy process on the same store takes over (the first one stops): the round is
    // the store's, not a process's.
    let restart = || {
        let (stopped, _) = serving.replace({
            let (proxy, url, _) = start();
            (proxy, url)
        });
        drop(stopped);
    };
    let access = flow(&call, &restart, &inbox);
    drop(serving);
    logged("http.db", &access);
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit mcp-proxy --listen … --tls-cert --tls-key`: the proxy as a resource server over https. Its URL says so; the
/// official Python SDK's client runs the whole filesystem flow through it (trusting the test CA through
/// `SSL_CERT_FILE`), the inbox is served on the same port, a client without the CA refuses the certificate, and a
/// plain-http client gets no answer while the proxy serves on.
#[test]
fn streamable_http_over_tls() {
    use remit_gateway::client::Tls;
    let dir = sandbox("https-listen");
    let ca = tls::TestCa::new("remit test CA");
    let ca_file = ca.write(&dir.join("ca.pem"));
    let (cert, key) = ca.server_files(&["localhost", "127.0.0.1"], &dir);
    let (proxy, url) = filesystem_over_http(&dir, &["--tls-cert", &cert, "--tls-key", &key]);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    sdk_over_http(&url, &dir, Some(&ca_file));

    // The inbox is served over the same TLS port.
    let trusting = Tls::with_ca_pem(ca.pem.as_bytes(), "the test CA").unwrap();
    let inbox = format!("{}/inbox", url.trim_end_matches("/mcp"));
    let timeout = Duration::from_secs(30);
    let page = exchange(&trusting, "GET", &inbox, &[], None, timeout).unwrap();
    assert_eq!(page.status, 200);
    let untrusted = exchange(&Tls::platform(), "GET", &inbox, &[], None, timeout);
    assert!(untrusted.is_err(), "a client without the CA refuses the certificate");
    let plain = remit_gateway::client::blocking::request("GET", &inbox.replacen("https://", "http://", 1), &[], None);
    assert!(plain.as_ref().map_or(true, |r| r.status != 200), "{plain:?}");
    let again = exchange(&trusting, "GET", &inbox, &[], None, timeout).unwrap();
    assert_eq!(again.status, 200);
    drop(proxy);
    std::fs::remove_dir_all(&dir).ok();
}

/// Over Streamable HTTP, in front of a stdio upstream and of an HTTP one: a call the server does not answer in time
/// fails alone, after `--upstream-timeout`, while calls sent after it are answered at once; and allowed calls wait
/// on the upstream without holding a thread each (a stdio upstream's reader answers them, `Proxy::finish_then`; an
/// HTTP upstream is awaited on the async runtime, `Proxy::finish_async`), so three slow calls in flight leave the
/// proxy's thread count as it was (`/proc/PID/status`).
#[test]
fn over_http_a_slow_call_holds_up_no_other() {
    let dir = sandbox("http-slow");
    let (_upstream, port) = everything_over_http(&dir);
    let url = format!("http://127.0.0.1:{port}/mcp");
    for upstream in [None, Some(url.as_str())] {
        over_http_a_slow_call_holds_up_no_other_in_front_of(&dir, upstream);
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn over_http_a_slow_call_holds_up_no_other_in_front_of(dir: &Path, upstream: Option<&str>) {
    std::fs::remove_file(dir.join("state.db")).ok();
    let identity = ["--listen", "127.0.0.1:0", "--agent-token", "agent:tester=tester-token-1"];
    let proxy = Session::spawn(slow_proxy(dir, &identity, upstream), dir);
    let url = proxy.mcp_url(Instant::now() + WAIT);
    let call = move |id: i64, tool: &str, arguments: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments, "_meta": stateless_meta()}});
        let headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", tool)];
        stateless_post(&url, "tester-token-1", &headers, &body).json()
    };
    // The tools are read once first (a call that finds them unknown waits for them on a blocking thread).
    let first = call(1, "echo", json!({"message": "first"}));
    assert!(text(&first["result"]).contains("first"), "{first}");

    let threads = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap().to_string();
        line["Threads:".len()..].trim().parse::<u32>().unwrap()
    };
    let before = threads();
    let started = Instant::now();
    let slow: Vec<_> = (0..3)
        .map(|i| {
            let slow_call = call.clone();
            std::thread::spawn(move || {
                let slow = json!({"duration": 4, "steps": 1});
                (slow_call(20 + i, "trigger-long-running-operation", slow), started.elapsed())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    for id in 3..6 {
        let echo = call(id, "echo", json!({"message": format!("meanwhile {id}")}));
        assert!(text(&echo["result"]).contains("meanwhile"), "{echo}");
    }
    assert!(started.elapsed() < Duration::from_millis(900), "the echoes waited for the slow calls");
    let during = threads();
    assert!(during <= before, "{upstream:?}: {before} threads before the slow calls, {during} while they wait");
    for slow in slow {
        let (timed_out, waited) = slow.join().unwrap();
        assert_eq!(timed_out["error"]["code"], -32603, "{timed_out}");
        let message = timed_out["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("did not answer `tools/call` within 1 s"), "{upstream:?}: {message}");
        assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(3), "answered after {waited:?}");
    }
    drop(proxy);
}

/// One exchange with `url` on a client of its own that trusts what `tls` says (a new connection).
fn exchange(
    tls: &remit_gateway::client::Tls,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<remit_gateway::client::blocking::Exchange, String> {
    let client = remit_gateway::client::Client::new(tls.clone());
    remit_gateway::client::blocking::send(&client, method, url, headers, body, timeout)
}
