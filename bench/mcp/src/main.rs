//! The latency `remit mcp-proxy` adds to a `tools/call`: the same MCP server (`@modelcontextprotocol/server-filesystem`
//! from tests/mcp) spoken to directly and through the proxy, side by side in one run, over stdio, one call in flight.
//!
//! Each round times `--calls` sequential `read_text_file` calls (allowed by tests/mcp/filesystem, so the proxy
//! decides, logs the decision, forwards, logs the outcome) directly, then the same through the proxy, then a call the
//! policy denies through the proxy (decided and logged, never forwarded); rounds alternate so noise hits both alike.
//! Percentiles are over all calls. With `--http` the same over Streamable HTTP: `@modelcontextprotocol/server-everything`
//! (its `echo` tool, policy tests/mcp/everything) served on a loopback port, called directly and through
//! `remit mcp-proxy --listen` in front of it (the bench's client: each message one POST on a new connection, to the
//! server and to the proxy alike; the proxy keeps its connections to the server open).
//! With `--keep-alive` (with `--http`) the bench's client keeps its connection to the server and to the proxy open
//! between messages, as HTTP clients such as the SDKs' do, so neither side's figure includes a TCP connection.
//! With `--baseline PATH` another `remit` binary (e.g. a build of an earlier commit)
//! is timed the same way in the same rounds, so two versions of the proxy are compared side by side.
//!
//! With `--stub-upstream MICROS` the upstream is not the Node server itself but a stub that replays its
//! answers: this binary, started as `--serve-stub`, answers `initialize` and `tools/list` with what the real server
//! answered and each `tools/call` with the real server's answer to the timed call after computing (spinning) for
//! MICROS µs, as a server that does work would. Each Node process has a speed of its own (its JIT, its heap, where
//! the scheduler puts it), and the direct side and each proxy have their own: on a shared machine that difference
//! alone moves the "added" figure by tens of µs from one run to the next. The stub's answers take the same time in
//! every process, so the difference between the direct side and a proxy is the proxy's own cost, wake-ups
//! included. With `--http` the stub is an HTTP server (`--serve-stub-http`: a thread per kept connection, JSON
//! answers) replaying `server-everything`'s answers to `tools/list` and the timed `echo`.
//!
//! With `--relay` (with `--http`) a fourth side: the same server behind a relay that only copies bytes (two threads
//! per connection in this process, `TCP_NODELAY` both ways), timed in the same rounds. It does what any proxy must at
//! the least (one more hop each way, each a wake-up) and nothing else, so "added by the relay" is the floor under the
//! proxy's figure on this machine, and the difference between the two is what the proxy's own work costs.
//!
//! With `--forwarder PATH` (with `--http`) one more side: the same server behind bench/http-forwarder's binary, an
//! HTTP/1.1 forwarder built on the proxy's own stack (hyper's server and client over tokio, a one-worker runtime per
//! core, a kept upstream connection per runtime) that decides, parses and logs nothing. "Added by the forwarder" is
//! what terminating HTTP on that stack costs, and the proxy's figure minus it is what its MCP work costs.
//!
//! Each proxy's CPU time per call through it (all its threads, user and kernel, read from /proc) is printed too, and its
//! context switches per call (summed over the threads alive at the end).
//!
//! With `--instances K` each side is K processes (K servers; K proxies, each with its server), called in turn.
//!
//! With `--concurrency K` (with `--http`), after the rounds: each proxy's throughput with K clients at once, each on a
//! kept connection of its own, two 2-second runs per proxy for denied calls (the proxy's own work) and allowed ones.
//!
//! ```sh
//! cargo run --release --manifest-path bench/mcp/Cargo.toml -- [--remit target/release/remit] [--baseline OLD_REMIT] \
//!   [--http [--keep-alive] [--relay] [--forwarder bench/http-forwarder/target/release/remit-http-forwarder]] [--stub-upstream 150] [--instances 1] [--calls 200] [--rounds 10]
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    /// The answers to `initialize` and `tools/list`.
    answers: Vec<String>,
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
        let mut session = Session { child, stdin, stdout, next: 1, answers: Vec::new() };
        let init = r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#;
        let answer = session.call(init);
        session.answers.push(answer);
        writeln!(session.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        let answer = session.call(r#""method":"tools/list""#);
        session.answers.push(answer);
        session
    }

    /// Sends a request (`"method":…,"params":…` without id) and returns its response line.
    fn call(&mut self, rest: &str) -> String {
        let id = self.next;
        self.next += 1;
        // One write per message, as clients do: `writeln!` on the unbuffered pipe would write each piece of the
        // format on its own, and wake the reader (the server, or the proxy) for a partial line.
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},{rest}}}\n");
        self.stdin.write_all(line.as_bytes()).unwrap();
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

/// One side of a benchmarked MCP conversation: a request in, its response line out.
trait Caller {
    fn call(&mut self, rest: &str) -> String;
}

impl Caller for Session {
    fn call(&mut self, rest: &str) -> String {
        Session::call(self, rest)
    }
}

/// An MCP client over Streamable HTTP: one POST per message, each on a new connection, a bearer token when given,
/// the session id the server gave at `initialize`; a JSON or an event-stream answer, read until the response.
struct HttpSession {
    host: String,
    path: String,
    token: Option<String>,
    session: Option<String>,
    next: u64,
    /// With `--keep-alive`: the connection kept open between messages (as HTTP clients such as the SDKs' do).
    keep_alive: bool,
    connection: Option<BufReader<std::net::TcpStream>>,
}

impl HttpSession {
    fn start(url: &str, token: Option<&str>, keep_alive: bool) -> HttpSession {
        let rest = url.strip_prefix("http://").expect("an http:// URL");
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut session = HttpSession {
            host: host.into(),
            path: path.into(),
            token: token.map(Into::into),
            session: None,
            next: 1,
            keep_alive,
            connection: None,
        };
        let init = r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#;
        session.call(init);
        session.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, None);
        session.call(r#""method":"tools/list""#);
        session
    }

    /// POSTs `body`; the response with `id` (a JSON body, or the event stream's matching `data:` line).
    fn post(&mut self, body: &str, id: Option<u64>) -> String {
        use std::io::Read;
        let connect = |host: &str| {
            let stream = std::net::TcpStream::connect(host).expect("connect");
            stream.set_nodelay(true).ok();
            BufReader::new(stream)
        };
        let kept = self.connection.take();
        let reused = kept.is_some();
        let mut reader = kept.unwrap_or_else(|| connect(&self.host));
        let connection = if self.keep_alive { "keep-alive" } else { "close" };
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nConnection: {connection}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n",
            self.path,
            self.host,
            body.len()
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(session) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        let mut line = String::new();
        let sent = reader.get_mut().write_all(head.as_bytes()).is_ok();
        if !(sent && reader.read_line(&mut line).is_ok_and(|n| n > 0)) {
            // A kept connection the server closed while the other sides ran (Node closes one idle for 5 s): the
            // message again on a new one.
            assert!(reused, "the server closed a new connection");
            reader = connect(&self.host);
            reader.get_mut().write_all(head.as_bytes()).unwrap();
            line.clear();
            reader.read_line(&mut line).unwrap();
        }
        let mut length = None;
        let mut chunked = false;
        // The headers, after the status line read above.
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            let lower = trimmed.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("mcp-session-id:") {
                let start = trimmed.len() - value.len();
                self.session = Some(trimmed[start..].trim().to_string());
            }
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse::<usize>().ok();
            }
            chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
        }
        if self.keep_alive {
            // The whole body, so the connection is ready for the next message.
            let body = if chunked {
                let mut body = Vec::new();
                loop {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                    let size = usize::from_str_radix(line.trim(), 16).expect("a chunk size");
                    if size == 0 {
                        line.clear();
                        reader.read_line(&mut line).unwrap();
                        break;
                    }
                    let mut chunk = vec![0; size + 2];
                    reader.read_exact(&mut chunk).unwrap();
                    body.extend_from_slice(&chunk[..size]);
                }
                body
            } else {
                let mut body = vec![0; length.unwrap_or(0)];
                reader.read_exact(&mut body).unwrap();
                body
            };
            self.connection = Some(reader);
            let Some(id) = id else { return String::new() };
            let text = String::from_utf8(body).unwrap();
            if !chunked || length.is_some() {
                return text;
            }
            let want = format!(r#""id":{id}"#);
            let data = text.lines().filter_map(|l| l.strip_prefix("data:")).find(|d| d.contains(&want));
            return data.expect("the response in the stream").trim().to_string();
        }
        let Some(id) = id else { return String::new() };
        let want = format!(r#""id":{id}"#);
        if let Some(length) = length {
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            return String::from_utf8(body).unwrap();
        }
        loop {
            line.clear();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended without the response");
            if let Some(data) = line.strip_prefix("data:") {
                if data.contains(&want) {
                    return data.trim().to_string();
                }
            }
        }
    }
}

impl Caller for HttpSession {
    fn call(&mut self, rest: &str) -> String {
        let id = self.next;
        self.next += 1;
        self.post(&format!(r#"{{"jsonrpc":"2.0","id":{id},{rest}}}"#), Some(id))
    }
}

/// `--instances K`: K processes of one side (K servers, or K proxies each with its own server), each called for a
/// block of consecutive calls in turn (not one call each: that would leave every process cold on every call), so
/// that no one process's speed (where the scheduler put it, its JIT and heap) is the side's.
struct Pool {
    sides: Vec<Box<dyn Caller>>,
    calls: usize,
    block: usize,
}

impl Caller for Pool {
    fn call(&mut self, rest: &str) -> String {
        let side = self.calls / self.block % self.sides.len();
        self.calls += 1;
        self.sides[side].call(rest)
    }
}

/// K of a side, made by `make(i)`, as one, each called `block` times in a row.
fn pool(k: usize, block: usize, mut make: impl FnMut(usize) -> Box<dyn Caller>) -> Box<dyn Caller> {
    Box::new(Pool { sides: (0..k).map(&mut make).collect(), calls: 0, block: block.max(1) })
}

/// Stops a child when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// A child process whose stderr is read until a line starting with `prefix`: the child and the rest of that line.
fn started(mut command: Command, prefix: &str) -> (Running, String) {
    let mut child =
        Running(command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start"));
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no `{prefix}` line");
        if let Some(rest) = line.trim_end().strip_prefix(prefix) {
            let rest = rest.to_string();
            // Keep draining stderr so the child never blocks on it.
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            return (child, rest);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// `--relay`: a loopback listener that relays every connection to `upstream` byte for byte (a thread each way), for
/// as long as the bench runs; its address.
fn relay(upstream: &str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let upstream = upstream.to_string();
    std::thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(inbound) = inbound else { continue };
            let outbound = std::net::TcpStream::connect(&upstream).expect("connect to the upstream");
            for stream in [&inbound, &outbound] {
                stream.set_nodelay(true).ok();
            }
            let (mut a, mut b) = (inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
            let (mut c, mut d) = (inbound, outbound);
            std::thread::spawn(move || std::io::copy(&mut a, &mut b));
            std::thread::spawn(move || std::io::copy(&mut d, &mut c));
        }
    });
    address
}

/// The direct side, the proxy, the baseline proxy, the allowed call and the denied call.
type Sides = (Box<dyn Caller>, Box<dyn Caller>, Option<Box<dyn Caller>>, &'static str, &'static str);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The user and kernel CPU time of the processes in `pids` marked `current` (all their threads, those that ended
/// included), from /proc (in clock ticks, 10 ms on Linux: a run of thousands of calls is needed).
fn cpu_time(pids: &[(bool, u32)], current: bool) -> [Duration; 2] {
    let mut total = [Duration::ZERO; 2];
    for (_, pid) in pids.iter().filter(|(c, _)| *c == current) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th of them.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
        for (k, field) in [11, 12].into_iter().enumerate() {
            let ticks: u64 = fields.get(field).and_then(|f| f.parse().ok()).unwrap_or(0);
            total[k] += Duration::from_millis(ticks * 10);
        }
    }
    total
}

/// Calls per second through the proxy at `url` from `clients` threads at once, each on a kept connection of its
/// own, for two seconds (every answer checked for `expect`).
fn throughput(url: &str, request: &str, clients: usize, expect: &str) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(2);
    let started = Instant::now();
    let done: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(move || {
                    let mut session = HttpSession::start(url, Some("bench-token"), true);
                    let mut calls = 0;
                    while Instant::now() < deadline {
                        let answer = session.call(request);
                        assert!(answer.contains(expect), "not the expected answer: {answer}");
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    done as f64 / started.elapsed().as_secs_f64()
}

/// The context switches (voluntary and not) of the processes of `pids` that are (or are not) the one measured, summed
/// over their threads as /proc lists them now (a thread that has exited is no longer counted).
fn switches(pids: &[(bool, u32)], current: bool) -> u64 {
    let mut total = 0;
    for (_, pid) in pids.iter().filter(|(c, _)| *c == current) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            for line in status.lines().filter(|l| l.contains("ctxt_switches:")) {
                total += line.rsplit(char::is_whitespace).next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    total
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The request id and method of a message from the bench or the proxy (`{"jsonrpc":"2.0","id":N,"method":"M",…`:
/// both write those members in that order), without a JSON parser (this package is std only).
fn id_and_method(line: &str) -> Option<(&str, &str)> {
    let rest = &line[line.find(r#""id":"#)? + 5..];
    let id = &rest[..rest.find(',')?];
    let rest = &line[line.find(r#""method":""#)? + 10..];
    Some((id, &rest[..rest.find('"')?]))
}

/// `--serve-stub MICROS DIR`: an MCP server on stdin/stdout that replays the real server's answers kept in DIR
/// (`initialize.json`, `tools-list.json`, `call.json`: each a `result`), after spinning MICROS µs for a tool call.
fn serve_stub(micros: u64, dir: &Path) {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("a recorded answer");
    let (initialize, tools, call) = (read("initialize.json"), read("tools-list.json"), read("call.json"));
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    let mut out = stdout.lock();
    for line in stdin.lock().lines() {
        let line = line.expect("a line");
        let Some((id, method)) = id_and_method(&line) else { continue };
        let result = match method {
            "initialize" => &initialize,
            "tools/list" => &tools,
            "tools/call" => {
                let started = Instant::now();
                while started.elapsed() < Duration::from_micros(micros) {
                    std::hint::spin_loop();
                }
                &call
            }
            _ => "{}",
        };
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{}}}\n", result.trim());
        out.write_all(line.as_bytes()).unwrap();
        out.flush().unwrap();
    }
}

/// `--serve-stub-http MICROS DIR`: [`serve_stub`] over Streamable HTTP on a loopback port (printed on stderr as
/// `stub listening on port N`): a thread per connection, kept open between requests; each request answered with
/// `application/json` (a notification `202`), the call after spinning MICROS µs; any method but `initialize`,
/// `tools/list` and `tools/call` refused with `-32601`, as the reference servers refuse `server/discover`.
fn serve_stub_http(micros: u64, dir: &Path) {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("a recorded answer");
    let answers = Arc::new([read("initialize.json"), read("tools-list.json"), read("call.json")]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    eprintln!("stub listening on port {}", listener.local_addr().unwrap().port());
    for connection in listener.incoming() {
        let Ok(connection) = connection else { continue };
        let answers = answers.clone();
        std::thread::spawn(move || {
            connection.set_nodelay(true).ok();
            let mut writer = connection.try_clone().unwrap();
            let mut reader = BufReader::new(connection);
            loop {
                let mut length = 0;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
                    return;
                }
                let body = String::from_utf8_lossy(&body);
                let Some((id, method)) = id_and_method(&body) else {
                    writer.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").ok();
                    continue;
                };
                let outcome = match method {
                    "initialize" => format!("\"result\":{}", answers[0].trim()),
                    "tools/list" => format!("\"result\":{}", answers[1].trim()),
                    "tools/call" => {
                        let started = Instant::now();
                        while started.elapsed() < Duration::from_micros(micros) {
                            std::hint::spin_loop();
                        }
                        format!("\"result\":{}", answers[2].trim())
                    }
                    _ => r#""error":{"code":-32601,"message":"Method not found"}"#.to_string(),
                };
                let message = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},{outcome}}}");
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: stub\r\n\
                     Content-Length: {}\r\n\r\n{message}",
                    message.len()
                );
                if writer.write_all(response.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}

/// The `result` member of a response line from the real server (its last member there).
fn result_of(response: &str) -> String {
    let start = response.find(r#""result":"#).expect("a result") + 9;
    let end = response.rfind(r#","jsonrpc""#).filter(|e| *e > start).unwrap_or(response.trim_end().len() - 1);
    response[start..end].to_string()
}

fn main() {
    let mut args = std::env::args().skip(1);
    if std::env::args().nth(1).as_deref() == Some("--serve-stub") {
        let micros = std::env::args().nth(2).and_then(|m| m.parse().ok()).expect("--serve-stub MICROS DIR");
        return serve_stub(micros, Path::new(&std::env::args().nth(3).expect("--serve-stub MICROS DIR")));
    }
    if std::env::args().nth(1).as_deref() == Some("--serve-stub-http") {
        let micros = std::env::args().nth(2).and_then(|m| m.parse().ok()).expect("--serve-stub-http MICROS DIR");
        return serve_stub_http(micros, Path::new(&std::env::args().nth(3).expect("--serve-stub-http MICROS DIR")));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let (mut remit, mut calls, mut rounds) = (repo.join("target/release/remit"), 200usize, 10usize);
    let mut baseline: Option<PathBuf> = None;
    let mut forwarder: Option<PathBuf> = None;
    let (mut http, mut keep_alive, mut relayed) = (false, false, false);
    let mut stub: Option<u64> = None;
    let mut instances = 1usize;
    let mut concurrency = 0usize;
    while let Some(flag) = args.next() {
        if flag == "--http" {
            http = true;
            continue;
        }
        if flag == "--keep-alive" {
            keep_alive = true;
            continue;
        }
        if flag == "--relay" {
            relayed = true;
            continue;
        }
        let value = args.next().expect("a value");
        match flag.as_str() {
            "--remit" => remit = PathBuf::from(value),
            "--baseline" => baseline = Some(PathBuf::from(value)),
            "--forwarder" => forwarder = Some(PathBuf::from(value)),
            "--calls" => calls = value.parse().unwrap(),
            "--rounds" => rounds = value.parse().unwrap(),
            "--stub-upstream" => stub = Some(value.parse().unwrap()),
            "--instances" => instances = value.parse::<usize>().unwrap().max(1),
            "--concurrency" => concurrency = value.parse::<usize>().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    let server = repo.join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(server.exists(), "run scripts/test-deps-mcp.sh first");
    let dir = std::env::temp_dir().join(format!("remit-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("root/workspace")).unwrap();
    std::fs::write(dir.join("root/workspace/a.txt"), "hello\n").unwrap();
    let root = dir.join("root");

    let mut running = Vec::new();
    // The proxies' process ids (and whether each is the one measured rather than the baseline), for their CPU time.
    let proxies = std::cell::RefCell::new(Vec::new());
    // The proxies' URLs over HTTP (and whether each is the one measured), for `--concurrency`.
    let urls = std::cell::RefCell::new(Vec::<(bool, String)>::new());
    let remit_path = remit.clone();
    let mut through_relay: Option<Box<dyn Caller>> = None;
    let mut through_forwarder: Option<Box<dyn Caller>> = None;
    // The forwarder's process id, for its CPU time.
    let mut forwarder_pid = Vec::new();
    let (mut direct, mut proxied, mut old, read, denied): Sides = if http {
        let everything = repo.join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let mut command = Command::new("node");
        command.arg("--require").arg(repo.join("tests/mcp/loopback.cjs")).arg(everything).arg("streamableHttp");
        command.env("PORT", "0");
        let (child, mut port) = started(command, "loopback listening on port ");
        running.push(child);
        if let Some(micros) = stub {
            // Record the real server's answers for the stub to replay, then put the stub in its place.
            let mut real = HttpSession::start(&format!("http://127.0.0.1:{}/mcp", port.trim()), None, true);
            let tools = real.call(r#""method":"tools/list""#);
            let call = real.call(r#""method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}"#);
            let initialize = r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"stub","version":"1"}}"#;
            for (name, text) in [
                ("initialize.json", initialize.to_string()),
                ("tools-list.json", result_of(&tools)),
                ("call.json", result_of(&call)),
            ] {
                std::fs::write(dir.join(name), text).unwrap();
            }
            let mut command = Command::new(std::env::current_exe().unwrap());
            command.arg("--serve-stub-http").arg(micros.to_string()).arg(&dir);
            let (child, stub_port) = started(command, "stub listening on port ");
            running.push(child);
            port = stub_port;
        }
        let upstream = format!("http://127.0.0.1:{}/mcp", port.trim());
        let mut proxy = |remit: &Path, store: &str| {
            let mut command = Command::new(remit);
            command
                .arg("mcp-proxy")
                .arg("--policy")
                .arg(repo.join("tests/mcp/everything"))
                .args(["--listen", "127.0.0.1:0", "--agent-token", "agent:tester=bench-token", "--store"])
                .arg(format!("sqlite:{}", dir.join(store).display()))
                .args(["--", &upstream]);
            let (child, url) = started(command, "remit mcp-proxy: mcp ");
            proxies.borrow_mut().push((remit == remit_path, child.0.id()));
            urls.borrow_mut().push((remit == remit_path, url.clone()));
            running.push(child);
            Box::new(HttpSession::start(&url, Some("bench-token"), keep_alive)) as Box<dyn Caller>
        };
        let proxied = pool(instances, calls / instances, |i| proxy(&remit, &format!("state-{i}.db")));
        let old =
            baseline.as_deref().map(|b| pool(instances, calls / instances, |i| proxy(b, &format!("baseline-{i}.db"))));
        let direct = pool(instances, calls / instances, |_| Box::new(HttpSession::start(&upstream, None, keep_alive)));
        if relayed {
            let address = relay(&format!("127.0.0.1:{}", port.trim()));
            through_relay = Some(Box::new(HttpSession::start(&format!("http://{address}/mcp"), None, keep_alive)));
        }
        if let Some(forwarder) = &forwarder {
            let mut command = Command::new(forwarder);
            command.arg(format!("127.0.0.1:{}", port.trim()));
            let (child, port) = started(command, "forwarder listening on port ");
            forwarder_pid.push((true, child.0.id()));
            running.push(child);
            let url = format!("http://127.0.0.1:{}/mcp", port.trim());
            through_forwarder = Some(Box::new(HttpSession::start(&url, None, keep_alive)));
        }
        let read = r#""method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}"#;
        let denied = r#""method":"tools/call","params":{"name":"echo","arguments":{"message":"forbidden"}}"#;
        (direct, proxied, old, read, denied)
    } else {
        let mut direct = Command::new("node");
        direct.arg(&server).arg(&root);
        let read = r#""method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"workspace/a.txt"}}"#;
        let upstream: Vec<std::ffi::OsString> = match stub {
            None => vec!["node".into(), server.clone().into(), root.clone().into()],
            Some(micros) => {
                // Record the real server's answers for the stub to replay.
                let mut real = Session::start(direct, &root);
                let (initialize, tools) = (real.answers[0].clone(), real.answers[1].clone());
                let call = real.call(read);
                for (name, line) in [("initialize.json", initialize), ("tools-list.json", tools), ("call.json", call)] {
                    std::fs::write(dir.join(name), result_of(&line)).unwrap();
                }
                let me = std::env::current_exe().unwrap();
                direct = Command::new(&me);
                direct.arg("--serve-stub").arg(micros.to_string()).arg(&dir);
                vec![me.into(), "--serve-stub".into(), micros.to_string().into(), dir.clone().into()]
            }
        };
        let proxy = |remit: &Path, store: &str| {
            let mut proxied = Command::new(remit);
            proxied
                .arg("mcp-proxy")
                .arg("--policy")
                .arg(repo.join("tests/mcp/filesystem"))
                .args(["--subject", "agent:coder", "--store"])
                .arg(format!("sqlite:{}", dir.join(store).display()))
                .arg("--")
                .args(&upstream);
            let session = Session::start(proxied, &root);
            proxies.borrow_mut().push((remit == remit_path, session.child.id()));
            Box::new(session) as Box<dyn Caller>
        };
        let direct = pool(instances, calls / instances, |_| {
            let mut command = Command::new(direct.get_program());
            command.args(direct.get_args());
            Box::new(Session::start(command, &root))
        });
        let proxied = pool(instances, calls / instances, |i| proxy(&remit, &format!("state-{i}.db")));
        let old =
            baseline.as_deref().map(|b| pool(instances, calls / instances, |i| proxy(b, &format!("baseline-{i}.db"))));
        let denied = r#""method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"../secret.txt"}}"#;
        (direct, proxied, old, read, denied)
    };
    let refused = if http { "rule.forbidden" } else { "scope.outside" };
    assert!(direct.call(read).contains("hello"));
    let answer = proxied.call(read);
    assert!(answer.contains("hello") && answer.contains(r#""outcome":"allow""#), "{answer}");
    assert!(proxied.call(denied).contains(refused));
    if let Some(old) = old.as_mut() {
        assert!(old.call(read).contains("hello") && old.call(denied).contains(refused));
    }

    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load().trim());
    let (mut d, mut p, mut n, mut bp, mut bn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut r, mut f) = (Vec::new(), Vec::new());
    // Every answer is checked (after its time is taken): a side that answered errors fast would time nothing.
    let expected = |request: &str| if request == read { "hello" } else { refused };
    let time = |session: &mut Box<dyn Caller>, request: &str, samples: &mut Vec<Duration>| {
        for _ in 0..calls {
            let started = Instant::now();
            let answer = session.call(request);
            samples.push(started.elapsed());
            assert!(answer.contains(expected(request)), "not the expected answer: {answer}");
        }
    };
    let cpu_before = [true, false].map(|current| cpu_time(&proxies.borrow(), current));
    let switches_before = [true, false].map(|current| switches(&proxies.borrow(), current));
    let forwarder_before = cpu_time(&forwarder_pid, true);
    for _ in 0..rounds {
        time(&mut direct, read, &mut d);
        if let Some(relay) = through_relay.as_mut() {
            time(relay, read, &mut r);
        }
        if let Some(forwarder) = through_forwarder.as_mut() {
            time(forwarder, read, &mut f);
        }
        time(&mut proxied, read, &mut p);
        time(&mut proxied, denied, &mut n);
        if let Some(old) = old.as_mut() {
            time(old, read, &mut bp);
            time(old, denied, &mut bn);
        }
    }
    println!("load average at end:   {}", load().trim());
    let cpu_after = [true, false].map(|current| cpu_time(&proxies.borrow(), current));
    let switches_after = [true, false].map(|current| switches(&proxies.borrow(), current));
    let forwarder_after = cpu_time(&forwarder_pid, true);
    println!("{} calls each, one in flight, in {rounds} interleaved rounds", d.len());
    println!("{:<44} {:>10} {:>10} {:>10}", "", "p50 µs", "p90 µs", "p99 µs");
    let mut rows = vec![
        (if http { "direct to the server (echo, HTTP)" } else { "direct to the server (read_text_file)" }, &mut d),
        ("through remit mcp-proxy (allowed, forwarded)", &mut p),
        ("through remit mcp-proxy (denied, not sent)", &mut n),
    ];
    if through_relay.is_some() {
        rows.push(("through a byte relay (the floor)", &mut r));
    }
    if through_forwarder.is_some() {
        rows.push(("through a bare hyper forwarder", &mut f));
    }
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
    if through_relay.is_some() {
        println!("added by the byte relay, p50: {:.0} µs", micros(percentile(&r, 0.5)) - micros(percentile(&d, 0.5)));
    }
    if through_forwarder.is_some() {
        println!("added by the forwarder, p50: {:.0} µs", micros(percentile(&f, 0.5)) - micros(percentile(&d, 0.5)));
    }
    if old.is_some() {
        println!("added by the baseline, p50: {:.0} µs", micros(percentile(&bp, 0.5)) - micros(percentile(&d, 0.5)));
    }
    // The proxies' CPU time per call through them (allowed and denied alike), all their threads, user and kernel.
    let per_call = (2 * calls * rounds) as f64;
    for (i, name) in ["the proxy", "the baseline"].iter().enumerate().take(if old.is_some() { 2 } else { 1 }) {
        let [user, system] = [0, 1].map(|k| (cpu_after[i][k] - cpu_before[i][k]).as_secs_f64() * 1e6 / per_call);
        println!("CPU time of {name} per call: {:.0} µs (user {user:.0}, kernel {system:.0})", user + system);
        // Each is a thread put to sleep and woken again, the costliest thing on this VM after the work itself.
        let switched = switches_after[i].saturating_sub(switches_before[i]) as f64 / per_call;
        println!("context switches of {name} per call: {switched:.1}");
    }
    if through_forwarder.is_some() {
        // Allowed calls only: the forwarder has nothing to deny.
        let [user, system] = [0, 1].map(|k| (forwarder_after[k] - forwarder_before[k]).as_secs_f64() * 1e6);
        let per_call = (calls * rounds) as f64;
        println!("CPU time of the forwarder per call: {:.0} µs", (user + system) / per_call);
    }
    if concurrency > 0 && http {
        // Throughput: `concurrency` clients at once, each on a kept connection of its own, for two seconds per
        // proxy and request kind, the proxies in turn (twice each, alternating).
        println!("throughput with {concurrency} connections at once (calls per second, two 2 s runs each):");
        for (request, kind) in [(denied, "denied"), (read, "allowed")] {
            for (current, url) in urls.borrow().iter() {
                let name = if *current { "the proxy" } else { "the baseline" };
                let runs: Vec<f64> = (0..2).map(|_| throughput(url, request, concurrency, expected(request))).collect();
                println!("  {name}, {kind}: {:.0} and {:.0}", runs[0], runs[1]);
            }
        }
    }
    drop(direct);
    drop(proxied);
    drop(old);
    drop(through_relay);
    drop(through_forwarder);
    drop(running);
    std::fs::remove_dir_all(&dir).ok();
}
