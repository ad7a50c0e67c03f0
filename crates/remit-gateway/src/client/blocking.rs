//! [`Client`] for a thread that has no runtime to await on (the stdio proxy's threads, `remit import mcp`, key
//! sets, the CLI, tests): the same client and its pools, not a second one, and [`request`]: one request read whole,
//! what the CLI's calls to a gateway (`remit approvals`, `remit admin`) and the tests need.
//!
//! Each calling thread drives its exchanges itself, connections included: it has a runtime of its own (tokio's
//! current-thread runtime, made at its first call and dropped with the thread), and each call blocks on it, so that
//! the exchange and the tasks of its connection (hyper's dispatcher, hyper-util's pool) run on the caller's thread,
//! with no other thread to wake on the way there or back (with one worker thread driving every blocking caller's
//! connections, a call the stdio proxy forwards took twice the context switches, 11 instead of 5.6, and 20-40 µs
//! more CPU). [`Client`] keeps a pool per runtime, so each thread reuses the connections it opened (and its pool is
//! dropped with it). That runtime runs only while its thread is in a call: a kept connection the server closed
//! meanwhile is seen at the start of the next call, before a request is given to it (`settle`), and the drain
//! that [`Exchange::finish`] may leave (an event stream the server keeps open) goes on during the thread's next
//! calls (its connection is not offered until it ends). An exchange is read on the thread that sent it (it is not
//! `Send`).
//!
//! A thread already inside a tokio runtime (a runtime's worker, in `block_in_place` or not), where tokio refuses to
//! block on another runtime, is the exception: it polls its exchange itself, parked in between, while the
//! connections' tasks run on a runtime the client starts for those callers (one worker thread, at the first such
//! call).

use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use super::{Client, Shared, Target, Tls};

/// A response being read by a blocking caller: [`super::Exchange`]'s methods, each waiting at most the timeout
/// given to [`send`] for the next piece of the body. Read on the thread that sent it, outside any tokio runtime when
/// it was sent outside one: its connection may be driven by that thread's runtime.
#[derive(Debug)]
pub struct Exchange {
    exchange: super::Exchange,
    driver: Driver,
    pub status: u16,
    /// Not `Send`.
    _here: PhantomData<*const ()>,
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
    let driver = Driver::current();
    // Made when first polled, in the runtime's context, where its timer can be registered.
    let sent = driver.run(Some(client), async {
        if driver == Driver::Here {
            settle().await;
        }
        tokio::time::timeout(timeout, client.send(method, url, headers, body)).await
    })?;
    let mut exchange =
        sent.map_err(|_| format!("`{authority}` did not answer within {} s", timeout.as_secs_f32()))??;
    exchange.idle = Some(timeout);
    Ok(Exchange { status: exchange.status, exchange, driver, _here: PhantomData })
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
        self.driver.run(None, self.exchange.body(limit)).map_err(std::io::Error::other)?
    }

    /// [`super::Exchange::body_start`].
    pub fn body_start(&mut self, limit: usize) -> std::io::Result<Vec<u8>> {
        self.driver.run(None, self.exchange.body_start(limit)).map_err(std::io::Error::other)?
    }

    /// [`super::Exchange::events`].
    pub fn events(&mut self, limit: usize, take: impl FnMut(&str) -> bool) -> std::io::Result<()> {
        self.driver.run(None, self.exchange.events(limit, take)).map_err(std::io::Error::other)?
    }

    /// [`super::Exchange::finish`]. A drain it leaves runs on the runtime that drives the connection: this thread's,
    /// during its next calls, unless it was sent from inside a runtime.
    pub fn finish(self) {
        match self.driver {
            Driver::Here => {
                let _ = HERE.try_with(|here| {
                    if let Some(here) = here.get() {
                        let _runtime = here.runtime.enter();
                        self.exchange.finish();
                    }
                });
            }
            Driver::Shared => {
                let _runtime = shared_runtime().enter();
                self.exchange.finish();
            }
        }
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

/// Where a blocking caller's exchange runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// On the calling thread's own runtime ([`Here`]), with the tasks of its connections.
    Here,
    /// Polled by the calling thread, which is inside a tokio runtime, its connections' tasks on [`shared_runtime`].
    Shared,
}

impl Driver {
    /// How this thread can run an exchange: on a runtime of its own, unless it is inside one already.
    fn current() -> Driver {
        match tokio::runtime::Handle::try_current() {
            Ok(_) => Driver::Shared,
            Err(_) => Driver::Here,
        }
    }

    /// Runs `future` to its end on this thread; `client` sends with this thread's runtime (so that its pool for it
    /// is dropped with the thread). An error when this thread's runtime cannot be made.
    fn run<F: Future>(self, client: Option<&Client>, future: F) -> Result<F::Output, String> {
        match self {
            Driver::Here => HERE.with(|here| {
                let here = match here.get() {
                    Some(here) => here,
                    None => {
                        let made = Here::new()?;
                        here.get_or_init(|| made)
                    }
                };
                if let Some(client) = client {
                    here.serves(client);
                }
                Ok(here.runtime.block_on(future))
            }),
            Driver::Shared => Ok(run_polling(future)),
        }
    }
}

thread_local! {
    /// The calling thread's runtime, made at its first call.
    static HERE: OnceCell<Here> = const { OnceCell::new() };
}

/// A thread's own runtime, and the clients that keep a pool for it.
struct Here {
    runtime: tokio::runtime::Runtime,
    /// The clients that sent on this runtime: each keeps a pool for it, dropped with the thread.
    clients: RefCell<Vec<Weak<Shared>>>,
}

impl Here {
    fn new() -> Result<Here, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the HTTP client's runtime on this thread: {e}"))?;
        Ok(Here { runtime, clients: RefCell::default() })
    }

    /// Notes that `client` sends on this runtime.
    fn serves(&self, client: &Client) {
        let mut clients = self.clients.borrow_mut();
        if !clients.iter().any(|c| std::ptr::eq(c.as_ptr(), Arc::as_ptr(&client.shared))) {
            clients.retain(|c| c.strong_count() > 0);
            clients.push(Arc::downgrade(&client.shared));
        }
    }
}

impl Drop for Here {
    /// The clients forget this runtime's pools, whose connections end with it.
    fn drop(&mut self) {
        let runtime = self.runtime.handle().id();
        for client in self.clients.get_mut().iter().filter_map(Weak::upgrade) {
            client.pools.lock().unwrap_or_else(|p| p.into_inner()).retain(|(r, _)| *r != runtime);
        }
    }
}

/// Lets this thread's runtime take in what happened since the thread's last call, before a request is given to a kept
/// connection: the events its sockets received meanwhile (a server closed a kept connection), then the tasks they
/// woke (that connection's dispatcher ends, so the pool no longer offers it, and the request goes on another one;
/// given to it, the request would be written to the closed connection and fail). The runtime polls its sockets
/// without waiting when its `block_on`'s future yields with no task ready, and runs the tasks it woke when it yields
/// again.
async fn settle() {
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
}

/// The runtime that drives the connections of the callers inside a runtime ([`Driver::Shared`]).
fn shared_runtime() -> &'static tokio::runtime::Runtime {
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

/// Runs `future` to its end on this thread, in the context of [`shared_runtime`] (where its sockets and timers are
/// registered and its connections' tasks spawned), parking the thread while it waits.
fn run_polling<F: Future>(future: F) -> F::Output {
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
    let _runtime = shared_runtime().enter();
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
