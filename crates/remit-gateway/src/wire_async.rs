//! [`crate::wire`]'s exchange on the async runtime (hyper's HTTP/1.1 client over tokio's sockets, TLS by
//! tokio-rustls with the same [`Tls`] settings): how `remit mcp-proxy --listen` forwards an allowed `tools/call` to
//! an HTTP upstream from the worker that decided it. The blocking client handed the worker's other tasks to another
//! thread for the whole wait ([`tokio::task::block_in_place`]), a thread wake-up or two per call, which on a shared
//! two-core machine cost more than the rest of the proxy's work (docs/mcp.md, "Latency"). The blocking client stays
//! for what has no runtime (the stdio proxy, `remit import mcp`, key sets) and for long-lived event streams.
//!
//! The same rules as the blocking client: one request per connection at a time, kept open between exchanges for the
//! origin it goes to ([`AsyncConnections`]), a kept connection the server closed replaced for the same request, the
//! body read as it arrives (JSON, or an event stream until the caller has its message), and a connection kept only
//! when its body ends without waiting on the server.

use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use futures_util::FutureExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

use crate::wire::{tls_refused, EventData, Target, Tls};

/// How long a body the caller has finished with may take to end before its connection is given up (an event stream
/// the server keeps open after the response).
const DRAIN_WITHIN: Duration = Duration::from_secs(1);

/// The most idle connections kept per runtime (as the blocking client's per pool).
const MAX_IDLE: usize = 4;

/// Idle connections of the async client, by the runtime that drives them and by origin, and the TLS settings of new
/// ones.
///
/// A connection is reused only by the runtime it was opened on. Its dispatcher is a task of that runtime, and a
/// request from another runtime's worker wakes that task across threads, then the response wakes the caller back:
/// two thread wake-ups per call. `remit mcp-proxy --listen` runs a runtime per core (`http::run_router`); with one
/// pool for all of them, an agent's connection accepted by one runtime could have every call forwarded on a
/// connection another runtime drives (docs/mcp.md, "stop 24").
#[derive(Default)]
pub struct AsyncConnections {
    idle: Mutex<Vec<Idle>>,
    tls: Tls,
}

/// A kept connection: the runtime whose task drives it (`None` outside a runtime), its origin, the connection.
type Idle = (Option<tokio::runtime::Id>, String, SendRequest<Full<Bytes>>);

/// The runtime the caller runs on.
fn current_runtime() -> Option<tokio::runtime::Id> {
    tokio::runtime::Handle::try_current().ok().map(|runtime| runtime.id())
}

impl std::fmt::Debug for AsyncConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).len();
        f.debug_struct("AsyncConnections").field("idle", &idle).finish()
    }
}

/// A response: its status and headers (lowercase names), and its body as it arrives.
#[derive(Debug)]
pub struct AsyncExchange {
    pub status: u16,
    headers: hyper::HeaderMap,
    body: Incoming,
    /// The connection, kept for the origin once the body has ended (`None`: the server closes it).
    connection: Option<(String, SendRequest<Full<Bytes>>)>,
}

impl AsyncConnections {
    pub fn new(tls: Tls) -> AsyncConnections {
        AsyncConnections { idle: Default::default(), tls }
    }

    fn take(&self, origin: &str) -> Option<SendRequest<Full<Bytes>>> {
        let runtime = current_runtime();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(at) = idle.iter().rposition(|(r, o, _)| *r == runtime && o == origin) {
            let (_, _, connection) = idle.swap_remove(at);
            if !connection.is_closed() {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection`, which the caller's runtime drives (it was opened or taken there).
    fn keep(&self, origin: String, connection: SendRequest<Full<Bytes>>) {
        let runtime = current_runtime();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.iter().filter(|(r, _, _)| *r == runtime).count() < MAX_IDLE && !connection.is_closed() {
            idle.push((runtime, origin, connection));
        }
    }

    /// Sends `method url` with `headers` and `body` on a kept connection to the URL's origin, or a new one; the
    /// response's head. The whole exchange, body included, is the caller's to bound in time.
    pub async fn exchange(
        &self,
        method: &str,
        url: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<AsyncExchange, String> {
        let target = Target::parse(url)?;
        let mut request = hyper::Request::builder().method(method).uri(target.path).header("host", target.authority);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request.body(Full::new(Bytes::from(body))).map_err(|e| format!("a request not sent: {e}"))?;
        let host = target.authority;
        let mut request = request;
        if let Some(mut connection) = self.take(target.origin) {
            if connection.ready().await.is_ok() {
                match connection.try_send_request(request).await {
                    Ok(response) => return Ok(AsyncExchange::new(response, target.origin, connection)),
                    // Not sent (the server had closed the connection): sent again on a new one.
                    Err(mut e) => match e.take_message() {
                        Some(unsent) => request = unsent,
                        None => return Err(format!("cannot read from `{host}`: {}", e.error())),
                    },
                }
            }
        }
        let mut connection = self.connect(&target).await?;
        let response = connection.send_request(request).await.map_err(|e| format!("cannot send to `{host}`: {e}"))?;
        Ok(AsyncExchange::new(response, target.origin, connection))
    }

    /// A new connection to the target (TCP, then TLS for `https://`), its HTTP/1.1 dispatcher running on a task of
    /// its own.
    async fn connect(&self, target: &Target<'_>) -> Result<SendRequest<Full<Bytes>>, String> {
        let authority = target.authority;
        let tcp = tokio::net::TcpStream::connect((target.host, target.port))
            .await
            .map_err(|e| format!("cannot connect to `{authority}`: {e}"))?;
        // One write per request, as the blocking client.
        tcp.set_nodelay(true).ok();
        if !target.tls {
            return handshake(TokioIo::new(tcp), authority).await;
        }
        let config = self.tls.config()?;
        let name = ServerName::try_from(target.host.to_string()).map_err(|_| {
            format!("`{}` is not a host name or IP address a certificate can be checked for", target.host)
        })?;
        let tls =
            tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.map_err(|e| tls_refused(target, &e))?;
        handshake(TokioIo::new(tls), authority).await
    }
}

/// hyper's HTTP/1.1 handshake on an open connection; the connection's dispatcher is spawned.
async fn handshake<T>(io: T, authority: &str) -> Result<SendRequest<Full<Bytes>>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) =
        hyper::client::conn::http1::handshake(io).await.map_err(|e| format!("cannot connect to `{authority}`: {e}"))?;
    tokio::spawn(async move {
        // Ends when the server or the pool closes the connection; an error then is nobody's to report.
        let _ = connection.await;
    });
    Ok(sender)
}

impl AsyncExchange {
    fn new(response: hyper::Response<Incoming>, origin: &str, connection: SendRequest<Full<Bytes>>) -> AsyncExchange {
        let (head, body) = response.into_parts();
        let closes = head
            .headers
            .get(hyper::header::CONNECTION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let connection = (!closes).then(|| (origin.to_string(), connection));
        AsyncExchange { status: head.status.as_u16(), headers: head.headers, body, connection }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The next piece of the body; `None` at its end.
    async fn chunk(&mut self) -> std::io::Result<Option<Bytes>> {
        while let Some(frame) = self.body.frame().await {
            let frame = frame.map_err(std::io::Error::other)?;
            if let Ok(data) = frame.into_data() {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// The whole body (at most `limit` bytes).
    pub async fn body(&mut self, limit: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(data) = self.chunk().await? {
            if out.len() + data.len() > limit {
                return Err(std::io::Error::other("the body is too long"));
            }
            out.extend_from_slice(&data);
        }
        Ok(out)
    }

    /// Reads an event stream's events until `take` returns true or the stream ends; at most `limit` bytes in all
    /// (as [`crate::wire::Exchange::events`]).
    pub async fn events(&mut self, limit: usize, mut take: impl FnMut(&str) -> bool) -> std::io::Result<()> {
        let mut events = EventData::default();
        let mut line: Vec<u8> = Vec::new();
        let mut read = 0;
        while let Some(data) = self.chunk().await? {
            read += data.len();
            if read > limit {
                return Err(std::io::Error::other("the event stream is too long"));
            }
            for piece in data.split_inclusive(|b| *b == b'\n') {
                line.extend_from_slice(piece);
                if !line.ends_with(b"\n") {
                    continue;
                }
                let text = String::from_utf8_lossy(&line);
                let event = events.line(text.trim_end_matches(['\r', '\n']));
                line.clear();
                if event.is_some_and(|data| take(&data)) {
                    return Ok(());
                }
            }
        }
        match events.end() {
            Some(data) => {
                take(&data);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Hands the connection back to `pool` once the rest of the body has arrived: at once when it already has, else
    /// from a task that waits for it at most [`DRAIN_WITHIN`] (the connection is closed when it does not end).
    pub fn release(mut self, pool: &std::sync::Arc<AsyncConnections>) {
        let Some((origin, connection)) = self.connection.take() else { return };
        let mut left = 64usize << 10;
        loop {
            match self.body.frame().now_or_never() {
                // Ended: the connection can serve the next request.
                Some(None) => return pool.keep(origin, connection),
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
        let pool = pool.clone();
        tokio::spawn(async move {
            let drained = tokio::time::timeout(DRAIN_WITHIN, async {
                while let Some(frame) = self.body.frame().await {
                    let data = frame.map_err(|_| ())?;
                    left = left.checked_sub(data.data_ref().map_or(0, |d| d.len())).ok_or(())?;
                }
                Ok::<(), ()>(())
            });
            if let Ok(Ok(())) = drained.await {
                pool.keep(origin, connection);
            }
        });
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
    use std::sync::Arc;

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
        let pool = Arc::new(AsyncConnections::default());
        let runtime = || tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (first, second) = (runtime(), runtime());
        let call = |on: &tokio::runtime::Runtime| {
            let (pool, url) = (pool.clone(), url.clone());
            // On the runtime's worker, as a connection's task is, not on the thread that blocks on it.
            on.block_on(on.spawn(async move {
                let mut exchange = pool.exchange("POST", &url, &[], b"{}".to_vec()).await.unwrap();
                assert_eq!(exchange.body(64).await.unwrap(), b"{}");
                exchange.release(&pool);
            }))
            .unwrap();
            accepted.load(Ordering::SeqCst)
        };
        assert_eq!(call(&first), 1);
        assert_eq!(call(&first), 1, "kept for the runtime that opened it");
        assert_eq!(call(&second), 2, "another runtime opens its own");
        assert_eq!(call(&second), 2);
        assert_eq!(call(&first), 2, "each keeps its own");
        assert_eq!(pool.idle.lock().unwrap().len(), 2);
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
}
