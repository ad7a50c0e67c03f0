//! The one HTTP client for everything remit fetches: an MCP upstream over Streamable HTTP (JSON answers and event
//! streams), a JWT key set and an issuer's metadata, and the CLI's calls to a gateway (`remit approvals`, `remit
//! admin`), over `http://` or `https://` ([`Tls`]: rustls on ring, the platform's roots). It is hyper-util's pooled
//! HTTP/1.1 client (`client::legacy::Client`) on tokio; this module adds what remit asks of it:
//!
//! - [`Client::send`] for async callers (the MCP proxy forwarding a call from the worker that decided it), and
//!   [`blocking`] for threads without a runtime (the stdio proxy's threads, the CLI, key sets, tests): the same
//!   client, each calling thread driving its exchanges and their connections on a runtime of its own
//!   ([`blocking::request`]: a request read whole, for the CLI's calls to a gateway and the tests').
//! - Connections are kept open between exchanges (at most [`MAX_IDLE`] idle per origin), and each only for the
//!   runtime that opened it ([`Client`]); a kept connection the server closed meanwhile is replaced for the same
//!   request (hyper-util sends again a request it had not begun to send).
//! - A body is read as it arrives: whole (at most a given length, [`Exchange::body`]) or as an event stream, event by
//!   event until the caller has the message it waits for ([`Exchange::events`]). A server may keep an event stream,
//!   or the connection, open after the response: reading to its end would wait for the server's timeout.
//! - No redirect is followed and no proxy is used; a request carries the headers its caller gives (and `Host`,
//!   `Content-Length`).
//!
//! Knows HTTP only: nothing of MCP or of the gateway's core. Its submodules depend on this one, never the other way
//! round: [`blocking`] on [`Client`] and [`Exchange`]; `tls` (the connections) on nothing here.

mod tls;

pub mod blocking;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Uri};
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub use self::tls::Tls;
use self::tls::{ConnectFailed, Connector};

/// The most idle connections kept per origin, per runtime.
pub const MAX_IDLE: usize = 4;

/// How long a body the caller has finished with may take to end before its connection is given up (an event stream
/// the server keeps open after the response).
const DRAIN_WITHIN: Duration = Duration::from_secs(1);

/// The most bytes of such a body read before its connection is given up.
const DRAIN_AT_MOST: usize = 64 << 10;

/// The client: the TLS settings of its `https://` connections and its kept connections. Cheap to clone (shared).
///
/// A connection is reused only by the runtime it was opened on: its dispatcher is a task of that runtime, and a
/// request from another runtime's worker would wake that task across threads, then the response wake the caller
/// back, two thread wake-ups per call. `remit mcp-proxy --listen` runs a runtime per core (`http::run_router`); with
/// one pool for all of them, an agent's connection accepted by one runtime could have every call forwarded on a
/// connection another runtime drives (docs/benchmarks/mcp.md, "`6ed2fe2` and `6b431f9`: a kept upstream connection
/// per runtime"). So the client keeps one hyper-util pool per runtime ([`blocking`]: one per calling thread).
#[derive(Clone, Default)]
pub struct Client {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    tls: Tls,
    /// hyper-util's pooled client, one per runtime that sent with it.
    pools: Mutex<Vec<(tokio::runtime::Id, Pool)>>,
}

type Pool = hyper_util::client::legacy::Client<Connector, Full<Bytes>>;

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let runtimes = self.shared.pools.lock().unwrap_or_else(|p| p.into_inner()).len();
        f.debug_struct("Client").field("tls", &self.shared.tls).field("runtimes", &runtimes).finish()
    }
}

impl Client {
    /// A client whose `https://` connections trust what `tls` says.
    pub fn new(tls: Tls) -> Client {
        Client { shared: Arc::new(Shared { tls, pools: Mutex::default() }) }
    }

    /// The TLS settings of its connections.
    pub fn tls(&self) -> &Tls {
        &self.shared.tls
    }

    /// The pool of the runtime the caller runs on.
    fn pool(&self) -> Result<Pool, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "the HTTP client is called outside a tokio runtime".to_string())?
            .id();
        let mut pools = self.shared.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, pool)) = pools.iter().find(|(r, _)| *r == runtime) {
            return Ok(pool.clone());
        }
        let pool = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(MAX_IDLE)
            .pool_timer(TokioTimer::new())
            .build(Connector { tls: self.shared.tls.clone() });
        pools.push((runtime, pool.clone()));
        Ok(pool)
    }

    /// Sends `method url` with `headers` and `body` on a kept connection to the URL's origin, or a new one; the
    /// response's head, its body to be read. The whole exchange, body included, is the caller's to bound in time.
    pub async fn send<S: AsRef<str>>(
        &self,
        method: &str,
        url: &str,
        headers: &[(S, S)],
        body: Vec<u8>,
    ) -> Result<Exchange, String> {
        let target = Target::parse(url)?;
        let uri: Uri = url.parse().map_err(|e| format!("`{url}`: not a URL: {e}"))?;
        let method = Method::from_bytes(method.as_bytes()).map_err(|_| format!("`{method}` is not an HTTP method"))?;
        let mut request = hyper::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            let (name, value) = (name.as_ref(), value.as_ref());
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("`{name}` is not a header name"))?;
            let value = HeaderValue::from_bytes(value.as_bytes())
                .map_err(|_| format!("the `{name}` header's value cannot be sent (a line break, or a control byte)"))?;
            request = request.header(name, value);
        }
        let request = request.body(Full::new(Bytes::from(body))).map_err(|e| format!("`{url}`: {e}"))?;
        let response = self.pool()?.request(request).await.map_err(|e| failed(&e, target.authority))?;
        let (head, body) = response.into_parts();
        Ok(Exchange {
            status: head.status.as_u16(),
            headers: head.headers,
            body,
            unread: Vec::new(),
            events: EventData::default(),
            idle: None,
        })
    }
}

/// Why an exchange with `authority` failed, in words: the connector's own when the connection could not be made
/// (it names the server, and for TLS says what was wrong with its certificate), else hyper's.
fn failed(e: &hyper_util::client::legacy::Error, authority: &str) -> String {
    use std::error::Error;
    let mut causes = Vec::new();
    let mut cause = e.source();
    while let Some(inner) = cause {
        if let Some(ConnectFailed(why)) = inner.downcast_ref::<ConnectFailed>() {
            return why.clone();
        }
        causes.push(inner.to_string());
        cause = inner.source();
    }
    if causes.is_empty() {
        causes.push(e.to_string());
    }
    let what = if e.is_connect() { "cannot connect to" } else { "no answer from" };
    format!("{what} `{authority}`: {}", causes.join(": "))
}

/// A response: its status and headers, and its body as it arrives.
#[derive(Debug)]
pub struct Exchange {
    pub status: u16,
    headers: HeaderMap,
    body: Incoming,
    /// Bytes of the body received and not read yet: what came after the event [`Exchange::events`] stopped at.
    unread: Vec<u8>,
    /// The data of the event being read.
    events: EventData,
    /// How long one read of the body may wait ([`blocking`]'s timeout); `None`: the caller bounds the exchange.
    idle: Option<Duration>,
}

impl Exchange {
    /// The value of the header `name` (the first, when there are several); `None` when absent or not text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every header (names lowercase), in the order received; values that are not text are left out.
    pub fn headers(&self) -> Vec<(String, String)> {
        let text = |(name, value): (&HeaderName, &HeaderValue)| Some((name.to_string(), value.to_str().ok()?.into()));
        self.headers.iter().filter_map(text).collect()
    }

    /// The next piece of the body; `None` at its end.
    async fn chunk(&mut self) -> io::Result<Option<Bytes>> {
        if !self.unread.is_empty() {
            return Ok(Some(Bytes::from(std::mem::take(&mut self.unread))));
        }
        loop {
            let frame = match self.idle {
                None => self.body.frame().await,
                Some(idle) => tokio::time::timeout(idle, self.body.frame()).await.map_err(|_| {
                    io::Error::new(io::ErrorKind::TimedOut, format!("nothing received within {} s", idle.as_secs()))
                })?,
            };
            let Some(frame) = frame else { return Ok(None) };
            if let Ok(data) = frame.map_err(io::Error::other)?.into_data() {
                return Ok(Some(data));
            }
        }
    }

    /// The whole body; an error when it is longer than `limit` bytes.
    pub async fn body(&mut self, limit: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(data) = self.chunk().await? {
            if out.len() + data.len() > limit {
                return Err(io::Error::other(format!("the body is larger than {limit} bytes")));
            }
            out.extend_from_slice(&data);
        }
        Ok(out)
    }

    /// The body's first `limit` bytes, or all of it when shorter (the rest is not read: the connection is not kept).
    pub async fn body_start(&mut self, limit: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(data) = self.chunk().await? else { break };
            out.extend_from_slice(&data[..data.len().min(limit - out.len())]);
        }
        Ok(out)
    }

    /// Reads an event stream's events (the `data:` lines of each, joined) until `take` returns true or the stream
    /// ends; at most `limit` bytes in this call. What was received after the event `take` accepted is kept for the
    /// next call.
    pub async fn events(&mut self, limit: usize, mut take: impl FnMut(&str) -> bool) -> io::Result<()> {
        let mut read = 0;
        let mut pending = std::mem::take(&mut self.unread);
        loop {
            let mut start = 0;
            while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
                let line = String::from_utf8_lossy(&pending[start..start + end]);
                start += end + 1;
                if self.events.line(line.trim_end_matches('\r')).is_some_and(|data| take(&data)) {
                    self.unread = pending.split_off(start);
                    return Ok(());
                }
            }
            pending.drain(..start);
            let Some(data) = self.chunk().await? else { break };
            read += data.len();
            if read > limit {
                return Err(io::Error::other(format!("the event stream is larger than {limit} bytes")));
            }
            pending.extend_from_slice(&data);
        }
        // The end: a last line without its line end, and an event without its empty line.
        let last = String::from_utf8_lossy(&pending);
        let data = match self.events.line(last.trim_end_matches('\r')) {
            Some(data) => Some(data),
            None => self.events.end(),
        };
        if let Some(data) = data {
            take(&data);
        }
        Ok(())
    }

    /// Done with the exchange: its connection is kept for the next one once the rest of the body has arrived, at
    /// once when it already has, else from a task that waits for it at most [`DRAIN_WITHIN`] (an event stream the
    /// server keeps open after the response: the connection is closed when it does not end). Dropping an exchange
    /// instead closes its connection unless the body was read to its end.
    pub fn finish(mut self) {
        if self.body.is_end_stream() {
            return;
        }
        let mut left = DRAIN_AT_MOST;
        loop {
            match self.body.frame().now_or_never() {
                // Ended: hyper-util puts the connection back in its pool.
                Some(None) => return,
                Some(Some(Ok(frame))) => {
                    left = left.saturating_sub(frame.data_ref().map_or(0, |d| d.len()));
                    if left == 0 {
                        return;
                    }
                }
                Some(Some(Err(_))) => return,
                None => break,
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let mut body = self.body;
        runtime.spawn(async move {
            let _ = tokio::time::timeout(DRAIN_WITHIN, async {
                while let Some(Ok(frame)) = body.frame().await {
                    left = left.checked_sub(frame.data_ref().map_or(0, |d| d.len()))?;
                }
                Some(())
            })
            .await;
        });
    }
}

/// The data of an event stream's events, from its lines: the `data:` lines of an event joined by line feeds; other
/// fields (`event:`, `id:`, `retry:`) and comments ignored.
#[derive(Debug, Default)]
struct EventData {
    data: String,
}

impl EventData {
    /// One line, without its end; the event's data when the line ends an event that has some.
    fn line(&mut self, line: &str) -> Option<String> {
        if line.is_empty() {
            return self.end();
        }
        if let Some(value) = line.strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
        None
    }

    /// At the end of the stream: the data of an event left without its empty line, if any.
    fn end(&mut self) -> Option<String> {
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data))
    }
}

/// The parts of an `http://` or `https://` URL that say where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// `https://`.
    pub tls: bool,
    /// `host[:port]` as written (the `Host` header).
    pub authority: &'a str,
    /// The host name or IP address, without the brackets of an IPv6 address.
    pub host: &'a str,
    /// The port given, else 80 or 443.
    pub port: u16,
    /// The path and query (at least `/`).
    pub path: &'a str,
}

impl<'a> Target<'a> {
    /// The parts of `url`; an error for another scheme, user information (`user@host`), no host or a bad port.
    pub fn parse(url: &'a str) -> Result<Target<'a>, String> {
        let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return Err(format!("`{url}`: only http:// and https:// URLs are supported")),
        };
        let end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = (&rest[..end], if end == rest.len() { "/" } else { &rest[end..] });
        if authority.contains('@') {
            return Err(format!("`{url}`: user information in the URL (`user@host`) is not supported"));
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').ok_or_else(|| format!("`{url}`: an unclosed `[`"))?;
                (host, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        if host.is_empty() {
            return Err(format!("`{url}`: no host"));
        }
        let port = match port {
            Some(port) => port.parse().map_err(|_| format!("`{url}`: `{port}` is not a port"))?,
            None if tls => 443,
            None => 80,
        };
        Ok(Target { tls, authority, host, port, path })
    }

    /// Whether the host is this machine (`localhost`, or a loopback address).
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// The period of [`anchor_deadlines`]' timer.
const ANCHOR: Duration = Duration::from_millis(500);

/// Keeps a timer pending on the current runtime, so that a call's deadline does not wake its time driver. Tokio wakes
/// the driver (an `eventfd` write, and one more `epoll_wait` when the worker next parks) whenever a timer is set to
/// fire before every other pending one, which a lone call's deadline always is. With a timer of this task always due
/// within [`ANCHOR`], a deadline further off than that is set without waking anyone. Started once per runtime.
pub fn anchor_deadlines() {
    static ANCHORED: Mutex<Vec<tokio::runtime::Id>> = Mutex::new(Vec::new());
    thread_local! {
        // The runtime this thread last saw anchored: the check of every call, without the lock.
        static SEEN: std::cell::Cell<Option<tokio::runtime::Id>> = const { std::cell::Cell::new(None) };
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    if SEEN.with(|seen| seen.replace(Some(runtime.id()))) == Some(runtime.id()) {
        return;
    }
    let mut anchored = ANCHORED.lock().unwrap_or_else(|p| p.into_inner());
    if anchored.contains(&runtime.id()) {
        return;
    }
    anchored.push(runtime.id());
    runtime.spawn(async {
        loop {
            tokio::time::sleep(ANCHOR).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Kept connections are reused (a chunked answer read to its end, trailers included, leaves the connection
    /// ready), and one the server closed while idle is replaced by a new one for the same request, sent once; over
    /// plain http and over https alike (there the server closes without TLS's `close_notify`, as a crashed one would).
    #[test]
    fn connections_are_kept_and_a_closed_one_is_replaced() {
        let ca = crate::test_tls::TestCa::new("remit test CA");
        let tls = Tls::with_ca_pem(ca.pem.as_bytes(), "the test CA").unwrap();
        keeps_connections(None, Client::default());
        keeps_connections(Some(ca.server(&["localhost"])), Client::new(tls));
    }

    fn keeps_connections(server: Option<Arc<rustls::ServerConfig>>, client: Client) {
        use crate::test_tls::Accepted;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = match server {
            Some(_) => format!("https://localhost:{port}/mcp"),
            None => format!("http://127.0.0.1:{port}/mcp"),
        };
        let (accepted, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, r) = (accepted.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                a.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(Accepted::new(stream, server.as_ref()));
                // Two requests per connection, then the server closes it a moment after its answer, while the
                // client keeps it idle (as an idle timeout would).
                for turn in 0..2 {
                    if crate::test_tls::read_request(&mut reader).is_none() {
                        return;
                    }
                    let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                    let answer = format!("{{\"n\":{n}}}");
                    let response = if turn == 1 {
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len())
                    } else {
                        format!(
                            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{answer}\r\n0\r\nX-Trailer: t\r\n\r\n",
                            answer.len()
                        )
                    };
                    reader.get_mut().write_all(response.as_bytes()).unwrap();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let mut answers = Vec::new();
        for _ in 0..5 {
            let mut exchange = blocking::send(&client, "POST", &url, &[], Some(b"{}"), Duration::from_secs(5)).unwrap();
            answers.push(String::from_utf8(exchange.body(1024).unwrap()).unwrap());
            exchange.finish();
            // Let the server close its side after its second answer.
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(answers, [r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#, r#"{"n":4}"#, r#"{"n":5}"#], "{url}");
        assert_eq!(requests.load(Ordering::SeqCst), 5, "{url}: each request reached the server once");
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "{url}: two requests per connection");
    }

    /// A kept connection serves the runtime that opened it, and only that one: on the runtimes `remit mcp-proxy
    /// --listen` runs (one worker each), a second runtime opens its own instead of driving the first one's from
    /// another thread. Checked by the connections a server accepts.
    #[test]
    fn a_connection_is_kept_for_the_runtime_that_opened_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream);
                    while crate::test_tls::read_request(&mut reader).is_some() {
                        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let client = Client::default();
        let runtime = || tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (first, second) = (runtime(), runtime());
        let call = |on: &tokio::runtime::Runtime| {
            let (client, url) = (client.clone(), url.clone());
            // On the runtime's worker, as a connection's task is, not on the thread that blocks on it.
            on.block_on(on.spawn(async move {
                let headers: [(&str, &str); 0] = [];
                let mut exchange = client.send("POST", &url, &headers, b"{}".to_vec()).await.unwrap();
                assert_eq!(exchange.body(64).await.unwrap(), b"{}");
                exchange.finish();
            }))
            .unwrap();
            // The connection goes back to its pool from a task of its runtime.
            std::thread::sleep(Duration::from_millis(20));
            accepted.load(Ordering::SeqCst)
        };
        assert_eq!(call(&first), 1);
        assert_eq!(call(&first), 1, "kept for the runtime that opened it");
        assert_eq!(call(&second), 2, "another runtime opens its own");
        assert_eq!(call(&second), 2);
        assert_eq!(call(&first), 2, "each keeps its own");
        assert_eq!(client.shared.pools.lock().unwrap().len(), 2);
    }

    /// A blocking caller's thread keeps the connections it opened, for itself (they are driven by its own runtime):
    /// another thread opens its own, and a thread's connections and pool go when it ends. A caller inside a runtime
    /// (a worker blocking in place, where tokio refuses to block on another runtime) is served too.
    #[test]
    fn a_blocking_thread_keeps_its_own_connections_until_it_ends() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (accepted, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, c) = (accepted.clone(), closed.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                a.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream);
                    while crate::test_tls::read_request(&mut reader).is_some() {
                        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                            break;
                        }
                    }
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        let client = Client::default();
        let call = |client: &Client, url: &str| {
            let mut exchange = blocking::send(client, "POST", url, &[], Some(b"{}"), Duration::from_secs(5)).unwrap();
            assert_eq!(exchange.body(64).unwrap(), b"{}");
            exchange.finish();
        };
        let pools = |client: &Client| client.shared.pools.lock().unwrap().len();
        let on_a_thread = |expected: usize| {
            let (caller, url, accepted) = (client.clone(), url.clone(), accepted.clone());
            // Joined when the thread has ended, its thread-locals dropped (a scoped thread's end is seen before).
            std::thread::spawn(move || {
                for _ in 0..3 {
                    call(&caller, &url);
                }
                assert_eq!(accepted.load(Ordering::SeqCst), expected, "one connection for the thread's calls");
                assert_eq!(pools(&caller), 1);
            })
            .join()
            .unwrap();
            assert_eq!(pools(&client), 0, "the thread's pool goes with it");
            let until = std::time::Instant::now() + Duration::from_secs(5);
            while closed.load(Ordering::SeqCst) < expected && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(closed.load(Ordering::SeqCst), expected, "and its connection");
        };
        on_a_thread(1);
        on_a_thread(2);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (client, url) = (client.clone(), url.clone());
        runtime.block_on(runtime.spawn(async move { tokio::task::block_in_place(|| call(&client, &url)) })).unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    /// [`blocking::request`] closes its connection before it returns, not at its thread's next call (the thread's
    /// runtime runs only during calls; hyper's dispatcher shuts the connection as it gives the body's end): the server
    /// sees the end while the caller does nothing more.
    #[test]
    fn a_request_closes_its_connection_when_it_returns() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let (closed, seen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut reader = BufReader::new(stream);
            crate::test_tls::read_request(&mut reader);
            // Answered without closing: the client closes, having asked to (`Connection: close`).
            reader.get_mut().write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
            let _ = closed.send(std::io::Read::read(reader.get_mut(), &mut [0; 16]).ok());
        });
        let response = blocking::request("GET", &url, &[], None).unwrap();
        assert_eq!((response.status, response.text().as_str()), (200, "{}"));
        let end = seen.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(end, Some(0), "the client closed its side");
    }

    /// An event stream is read event by event, across calls: what arrived after the event taken is the next call's
    /// (two events in one piece, an event split across pieces, comments and other fields skipped, an event left
    /// without its empty line at the end).
    #[test]
    fn events_are_read_one_by_one_across_pieces() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/events", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            crate::test_tls::read_request(&mut reader);
            let stream = reader.get_mut();
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).unwrap();
            stream
                .write_all(b": a comment\r\nevent: message\r\ndata: one\r\n\r\ndata: two\ndata: lines\n\ndata: th")
                .unwrap();
            stream.flush().unwrap();
            std::thread::sleep(Duration::from_millis(50));
            stream.write_all(b"ree\n\nid: 4\ndata: last").unwrap();
        });
        let client = Client::default();
        let mut exchange = blocking::send(&client, "GET", &url, &[], None, Duration::from_secs(5)).unwrap();
        assert_eq!(exchange.header("content-type"), Some("text/event-stream"));
        let mut next = || {
            let mut found = Vec::new();
            exchange
                .events(1 << 10, |data| {
                    found.push(data.to_string());
                    true
                })
                .unwrap();
            found
        };
        assert_eq!(next(), ["one"]);
        assert_eq!(next(), ["two\nlines"]);
        assert_eq!(next(), ["three"]);
        assert_eq!(next(), ["last"]);
        assert!(next().is_empty(), "the end");
    }

    /// The deadline anchor is one task per runtime, whatever the number of calls, on every runtime that calls.
    #[test]
    fn deadlines_are_anchored_once_per_runtime() {
        for _ in 0..2 {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                for _ in 0..10 {
                    anchor_deadlines();
                }
                let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
                assert_eq!(tasks, 1, "one anchor on this runtime");
            });
        }
    }

    #[test]
    fn urls_are_split_into_what_a_request_needs() {
        let t = Target::parse("https://auth.example/.well-known/jwks.json?x=1").unwrap();
        assert_eq!(
            (t.tls, t.authority, t.host, t.port, t.path),
            (true, "auth.example", "auth.example", 443, "/.well-known/jwks.json?x=1")
        );
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((t.tls, t.authority, t.host, t.port, t.path), (false, "127.0.0.1:8080", "127.0.0.1", 8080, "/"));
        assert!(t.is_loopback());
        let t = Target::parse("https://[::1]:9443/mcp").unwrap();
        assert_eq!((t.authority, t.host, t.port), ("[::1]:9443", "::1", 9443));
        assert!(t.is_loopback() && Target::parse("http://LocalHost/").unwrap().is_loopback());
        assert!(!Target::parse("http://auth.example/").unwrap().is_loopback());
        assert!(!Target::parse("http://10.0.0.1/").unwrap().is_loopback());
        assert!(Target::parse("ftp://x/").unwrap_err().contains("only http:// and https://"));
        assert!(Target::parse("https://127.0.0.1@evil.example/").unwrap_err().contains("user information"));
        assert!(Target::parse("http://x:port/").unwrap_err().contains("not a port"));
        assert!(Target::parse("https:///path").unwrap_err().contains("no host"));
    }
}
