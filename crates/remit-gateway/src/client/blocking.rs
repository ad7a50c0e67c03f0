//! [`Client`] for a thread that has no runtime to await on (the stdio proxy's threads, `remit import mcp`, key
//! sets, the CLI, tests): the same client and its pools, not a second one. The caller's thread drives its exchange
//! itself, waiting between steps; the connections' tasks (hyper's dispatchers) run on a runtime of the client's own,
//! one worker thread started at the first blocking call and kept for the life of the process, whose pool keeps the
//! connections of every blocking caller. Callable from anywhere, a runtime's worker included (where it blocks that
//! worker, as any blocking call does). And [`request`]: one request read whole, what the CLI's calls to a gateway
//! (`remit approvals`, `remit admin`) and the tests need.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use super::{Client, Target, Tls};

/// A response being read by a blocking caller: [`super::Exchange`]'s methods, each waiting at most the timeout
/// given to [`send`] for the next piece of the body.
#[derive(Debug)]
pub struct Exchange {
    exchange: super::Exchange,
    pub status: u16,
}

/// Sends `method url` with `headers` and `body` as [`Client::send`] does, waiting at most `timeout` for the
/// connection and the response's head.
pub fn send(
    client: &Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Exchange, String> {
    let authority = Target::parse(url)?.authority;
    let body = body.unwrap_or_default().to_vec();
    // Made when first polled, in the runtime's context, where its timer can be registered.
    let sent = run(async { tokio::time::timeout(timeout, client.send(method, url, headers, body)).await });
    let mut exchange =
        sent.map_err(|_| format!("`{authority}` did not answer within {} s", timeout.as_secs_f32()))??;
    exchange.idle = Some(timeout);
    Ok(Exchange { status: exchange.status, exchange })
}

impl Exchange {
    /// [`super::Exchange::header`].
    pub fn header(&self, name: &str) -> Option<&str> {
        self.exchange.header(name)
    }

    /// [`super::Exchange::headers`].
    pub fn headers(&self) -> Vec<(String, String)> {
        self.exchange.headers()
    }

    /// [`super::Exchange::body`].
    pub fn body(&mut self, limit: usize) -> std::io::Result<Vec<u8>> {
        run(self.exchange.body(limit))
    }

    /// [`super::Exchange::body_start`].
    pub fn body_start(&mut self, limit: usize) -> std::io::Result<Vec<u8>> {
        run(self.exchange.body_start(limit))
    }

    /// [`super::Exchange::events`].
    pub fn events(&mut self, limit: usize, take: impl FnMut(&str) -> bool) -> std::io::Result<()> {
        run(self.exchange.events(limit, take))
    }

    /// [`super::Exchange::finish`].
    pub fn finish(self) {
        let _runtime = runtime().enter();
        self.exchange.finish();
    }
}

/// A response read whole ([`request`]).
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// The longest response body [`request`] reads.
const MAX_RESPONSE: usize = 64 << 20;

/// How long [`request`] waits for the server, at each step.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Sends one request to `url` (`http://HOST:PORT/PATH` or `https://…`, the platform's roots trusted: `SSL_CERT_FILE`
/// names a CA bundle to use instead, as for other tools built on the system's store) on a connection of its own,
/// and reads the response whole: the CLI's calls to a gateway (`remit approvals`, `remit admin`) and the tests'.
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Result<Response, String> {
    static PLATFORM: std::sync::OnceLock<Client> = std::sync::OnceLock::new();
    request_with(PLATFORM.get_or_init(Client::default), method, url, headers, body)
}

/// [`request`], an `https://` URL trusting what `tls` says (e.g. the CA file of `--tls-ca`).
pub fn request_trusting(
    tls: &Tls,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Response, String> {
    request_with(&Client::new(tls.clone()), method, url, headers, body)
}

fn request_with(
    client: &Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Response, String> {
    let mut headers = headers.to_vec();
    // The client frames the body itself; a caller's own length would be sent twice.
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case("content-length"));
    // One request per connection, as a command line tool makes.
    headers.push(("Connection", "close"));
    let mut exchange = send(client, method, url, &headers, body, REQUEST_TIMEOUT)?;
    let body = exchange.body(MAX_RESPONSE).map_err(|e| format!("cannot read from `{url}`: {e}"))?;
    Ok(Response { status: exchange.status, headers: exchange.headers(), body })
}

/// The runtime that drives the blocking callers' connections.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("remit-http-client")
            .enable_all()
            .build()
            .expect("a tokio runtime for the HTTP client")
    })
}

/// Runs `future` to its end on this thread, in the context of the client's runtime (where its sockets and timers
/// are registered and its connections' tasks spawned), parking the thread while it waits.
fn run<F: Future>(future: F) -> F::Output {
    /// Wakes the thread that runs the future.
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let _runtime = runtime().enter();
    // Out of tokio's cooperative budget: on a runtime's worker (a key set fetched from a request's handler) a spent
    // budget would make every poll pending, and this loop would spin.
    let mut future = std::pin::pin!(tokio::task::unconstrained(future));
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}
