//! The connections of the gateway's HTTP servers (`remit serve`, `remit mcp-proxy --listen`, the proxy's inbox):
//! how many may be open at once and how long a client may keep one without using it, so that slow or idle clients
//! cannot hold the connections (and the file descriptors) that real clients need. axum's own `serve` has no limit and
//! no timeout: a client that sent half a request head and stalled (slowloris) kept its connection for ever.
//!
//! - **At most `max_connections` open at once** (TLS handshakes included): past it the server accepts no more, and a
//!   new connection waits in the kernel's accept queue until one closes (it is not refused: a client is served late
//!   rather than not at all, and the idle timeout frees the slots idle clients hold).
//! - **Header timeout**: a request's head must be complete within `header_timeout` of its first byte (as Envoy's
//!   `request_headers_timeout`), else the connection is closed.
//! - **Idle timeout**: a connection with no request in progress (before its first request, or between two on a kept
//!   connection) is closed after `idle_timeout`. A request is in progress until its response's last byte is written,
//!   so an event stream (`subscriptions/listen`, a session's `GET`) is never cut while it is open.
//!
//! A connection is served by hyper's HTTP/1.1 server directly (what axum's `serve` does, plus these watches); a
//! graceful shutdown stops accepting, lets every connection finish its request in progress, and waits for them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::Request;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How long a client may take to send a request's head, from its first byte, by default.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may stay open with no request in progress, by default.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How many connections a server keeps open at once, by default.
pub const MAX_CONNECTIONS: usize = 1024;

/// The limits of a server's connections (`--header-timeout`, `--idle-timeout`, `--max-connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { header_timeout: HEADER_TIMEOUT, idle_timeout: IDLE_TIMEOUT, max_connections: MAX_CONNECTIONS }
    }
}

/// A server's limits and its open connections' slots, shared by every runtime that accepts on its listener
/// (`http::run_router` runs one per core): cheap to clone.
#[derive(Debug, Clone)]
pub struct Connections {
    pub limits: Limits,
    slots: Arc<Semaphore>,
}

impl Connections {
    pub fn new(limits: Limits) -> Connections {
        let slots = Arc::new(Semaphore::new(limits.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
        Connections { limits, slots }
    }

    /// A slot for one more connection, once one is free.
    pub async fn slot(&self) -> OwnedSemaphorePermit {
        self.slots.clone().acquire_owned().await.expect("the slots are never closed")
    }
}

/// Where a server's connections come from: each with the slot it holds until it closes.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = (Self::Io, OwnedSemaphorePermit)> + Send;

    /// The router that serves `io`: what its requests learn about the connection (axum's `ConnectInfo`, e.g. the
    /// TLS peer's certificate), if anything.
    fn describe(_io: &Self::Io, router: Router) -> Router {
        router
    }
}

/// Plain TCP connections of a listener, within the slots of `connections`.
#[derive(Debug)]
pub struct Plain {
    pub listener: tokio::net::TcpListener,
    pub connections: Connections,
}

impl Accept for Plain {
    type Io = tokio::net::TcpStream;

    async fn accept(&mut self) -> (tokio::net::TcpStream, OwnedSemaphorePermit) {
        let slot = self.connections.slot().await;
        loop {
            match self.listener.accept().await {
                Ok((tcp, _)) => {
                    // Every write goes out at once: without `TCP_NODELAY` a small write waits while the one before
                    // it is unacknowledged, and an agent that delays its acknowledgements would get each event of a
                    // stream about 40 ms late.
                    tcp.set_nodelay(true).ok();
                    return (tcp, slot);
                }
                // Out of file descriptors, say: a moment, then on (as axum's own listener does).
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

/// Serves `router` on the connections `incoming` accepts until `shutdown` resolves, then lets each finish its
/// request in progress and returns when all are closed.
pub async fn serve<A: Accept>(
    mut incoming: A,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    // `stop` closes when the shutdown comes; `done` when every connection has ended.
    let (stop, stopping) = tokio::sync::watch::channel(());
    tokio::spawn(async move {
        shutdown.await;
        drop(stopping);
    });
    let (done, open) = tokio::sync::watch::channel(());
    loop {
        let (io, slot) = tokio::select! {
            accepted = incoming.accept() => accepted,
            _ = stop.closed() => break,
        };
        let activity = Arc::new(Activity::new());
        let router = A::describe(&io, router.clone());
        let io = Watched { io, activity: activity.clone(), _slot: slot };
        let (stop, open) = (stop.clone(), open.clone());
        tokio::spawn(async move {
            serve_one(io, router, activity, limits, stop).await;
            drop(open);
        });
    }
    drop(open);
    drop(incoming);
    done.closed().await;
}

/// Serves one connection until it ends, its client is too slow or idle too long, or the shutdown is done with it.
async fn serve_one<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: Watched<T>,
    router: Router,
    activity: Arc<Activity>,
    limits: Limits,
    stop: tokio::sync::watch::Sender<()>,
) {
    let inner = TowerToHyperService::new(router);
    let counted = activity.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        // Counted from here until the response's body is dropped: written to its end, or the client gone.
        let open = Open::new(counted.clone());
        let answered = hyper::service::Service::call(&inner, request);
        async move { answered.await.map(|response| response.map(|body| Tracked { body, _open: open })) }
    });
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    let mut stopping = std::pin::pin!(stop.closed());
    let mut stopped = false;
    loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = &mut stopping, if !stopped => {
                stopped = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = activity.changed.notified() => {}
            _ = tokio::time::sleep_until(deadline.into()) => {
                // Closed by dropping it: no request is in progress, so nothing is cut short.
                if activity.expired(&limits) {
                    return;
                }
            }
        }
    }
}

/// What a connection is doing, for its timeouts: times in milliseconds since `epoch`.
#[derive(Debug)]
struct Activity {
    epoch: Instant,
    /// Requests whose response has not ended.
    open: AtomicUsize,
    /// When the connection last had no request in progress (accepted, or a response ended).
    idle_since: AtomicU64,
    /// When the first byte of the next request came, while none was in progress ([`NONE`]: not yet).
    head_since: AtomicU64,
    /// Woken when the deadline moves earlier: a request's first byte (a request begun or ended only moves it later,
    /// which the watch finds when the earlier deadline passes; no wake-up on every request).
    changed: Notify,
}

const NONE: u64 = u64::MAX;

impl Activity {
    fn new() -> Activity {
        Activity {
            epoch: Instant::now(),
            open: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(NONE),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Bytes came from the client: while no request is in progress, the first byte of a request's head.
    fn read(&self) {
        if self.open.load(Ordering::Acquire) == 0
            && self.head_since.compare_exchange(NONE, self.now(), Ordering::AcqRel, Ordering::Acquire).is_ok()
        {
            self.changed.notify_one();
        }
    }

    /// When the connection is to be closed if nothing changes (a while ahead when a request is in progress: it is
    /// looked at again then).
    fn deadline(&self, limits: &Limits) -> Instant {
        if self.open.load(Ordering::Acquire) > 0 {
            return Instant::now() + limits.idle_timeout;
        }
        let at = |since: u64, timeout: Duration| self.epoch + Duration::from_millis(since) + timeout;
        match self.head_since.load(Ordering::Acquire) {
            NONE => at(self.idle_since.load(Ordering::Acquire), limits.idle_timeout),
            since => at(since, limits.header_timeout),
        }
    }

    fn expired(&self, limits: &Limits) -> bool {
        self.open.load(Ordering::Acquire) == 0 && Instant::now() >= self.deadline(limits)
    }
}

/// A request in progress on a connection (see [`Activity`]).
struct Open(Arc<Activity>);

impl Open {
    fn new(activity: Arc<Activity>) -> Open {
        activity.open.fetch_add(1, Ordering::AcqRel);
        activity.head_since.store(NONE, Ordering::Release);
        Open(activity)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.idle_since.store(activity.now(), Ordering::Release);
        activity.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response's body, which keeps its request counted as in progress until it is dropped.
struct Tracked {
    body: Body,
    _open: Open,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream: its reads tell its [`Activity`]; it holds its slot until it is dropped.
struct Watched<T> {
    io: T,
    activity: Arc<Activity>,
    _slot: OwnedSemaphorePermit,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
