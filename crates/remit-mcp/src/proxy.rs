//! `remit mcp-proxy`: the gateway in front of an MCP server. To the agent the proxy is an MCP server (JSON-RPC 2.0,
//! one message per line on stdin/stdout, protocol revision 2025-06-18, and 2026-07-28 for a request whose `_meta`
//! names it: no `initialize` needed, `server/discover`, typed results); to the upstream server it is an MCP client
//! over the upstream command's stdin/stdout, or over Streamable HTTP at an `http://` or `https://` URL
//! ([`remit_gateway::client`]). It is a front end of [`Gateway`], like [`remit_gateway::http`]: every
//! `tools/call` is decided by the gateway core (state, clock, obligations, log, access requests) before anything
//! reaches the upstream, and `tools/list` shows only the tools the module's listing lets the subject see.
//!
//! - `initialize` is answered by the proxy (it holds its own session with the upstream, opened once); `ping` too.
//! - `tools/list`: the upstream's tools (every page), only those visible to the subject, schemas unchanged.
//! - `tools/call`: a tool the upstream does not list → JSON-RPC error `-32602`; otherwise decided: deny → a tool
//!   result with `isError` whose text gives the reasons and rules; escalate → `isError` naming the access request
//!   and its inbox URL; allow → forwarded, and its outcome appended to the log after the decision.
//! - Every other request and notification is forwarded as it is (request ids are renumbered on the way up and back);
//!   the upstream's notifications and requests go to the agent as they are.
//! - A line that is not JSON-RPC gets an error response; an upstream that exits fails the calls waiting on it with
//!   an error response, and a stdio upstream is started again by the next request that needs it (with a backoff
//!   when it keeps exiting soon after its start). The proxy stays up in both cases.
//!
//! Several upstreams (`--upstream NAME=…`): their tools merged under their own names (a name two offer is neither
//! listed nor called), each call routed to the server offering the tool, everything else to the first.
//!
//! Threads, not async: one thread reads the agent, one each upstream, agent requests run on a pool of worker threads
//! that grows whenever none is idle (decisions are synchronous: SQLite and wasmtime), and outcome entries are queued
//! in the gateway (written with the next decisions, or by a thread of their own when no call comes). A `tools/call`
//! for a stdio upstream whose tools are known takes a shorter way, because each hand-off between threads costs
//! scheduling latency on a busy machine: it is decided on the thread that reads the agent, written to the upstream
//! from there, and answered from the thread that reads the upstream (a sweeper thread fails it at its deadline):
//! the upstream's result is not parsed there, the decision is spliced into its text ([`Forward::answer`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value as Json};

use crate::headers::{encode_header_value, param_headers};
use crate::http::{META_CAPABILITIES, META_SERVER_INFO, META_VERSION, STATELESS_VERSION};
use remit_gateway::client::{blocking, Client, Tls};
use remit_gateway::core::Gateway;

/// The protocol revision the proxy speaks (and asks the upstream for).
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The revisions an agent may ask for; any other gets [`PROTOCOL_VERSION`].
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];
/// The longest line (one message) the proxy reads from either side.
pub const MAX_MESSAGE: usize = 4 << 20;

/// JSON-RPC error codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const METHOD_NOT_FOUND: i64 = -32601;

/// The `_meta` key under which a tool result carries remit's decision.
pub const META_DECISION: &str = "remit.dev/decision";

/// Who the agent is: over stdio fixed when the proxy starts; over HTTP the bearer token's.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub subject: String,
    pub credential: Option<String>,
    pub scopes: Vec<String>,
    /// The mandate to act under; `None`: the one mandate the subject holds (the gateway picks it).
    pub mandate: Option<String>,
}

impl Identity {
    /// remit's request for a call of `tool` with `arguments` (docs/requests.md); the gateway fills the rest.
    fn request(&self, tool: Option<(&str, &Json)>) -> Map<String, Json> {
        let mut subject = Map::with_capacity(2);
        subject.insert("id".into(), Json::from(self.subject.as_str()));
        if self.credential.is_some() || !self.scopes.is_empty() {
            let mut credential = Map::with_capacity(2);
            let scopes = self.scopes.iter().map(|s| Json::from(s.as_str())).collect();
            credential.insert("scopes".into(), Json::Array(scopes));
            if let Some(id) = &self.credential {
                credential.insert("id".into(), Json::from(id.as_str()));
            }
            subject.insert("credential".into(), Json::Object(credential));
        }
        let mut context = Map::new();
        if let Some(mandate) = &self.mandate {
            context.insert("mandate".into(), Json::from(mandate.as_str()));
        }
        let mut request = Map::with_capacity(3);
        request.insert("subject".into(), Json::Object(subject));
        request.insert("context".into(), Json::Object(context));
        if let Some((name, arguments)) = tool {
            let mut action = Map::with_capacity(2);
            action.insert("name".into(), Json::from(name));
            action.insert("arguments".into(), arguments.clone());
            request.insert("action".into(), Json::Object(action));
        }
        request
    }
}

/// The parameter a method's `Mcp-Name` header mirrors (MCP 2026-07-28): `name` of `tools/call` and `prompts/get`,
/// `uri` of `resources/read`.
pub fn name_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Json>,
    /// The upstream refused the request with this error (a JSON-RPC error response, or an HTTP `4xx`): it did not
    /// run. Not so for an error of the proxy's own (a timeout, a lost connection), after which the request may have
    /// run upstream all the same.
    pub refused_upstream: bool,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None, refused_upstream: false }
    }

    fn to_json(&self) -> Json {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    /// The error object of a response, as the upstream sent it.
    fn from_json(error: &Json) -> RpcError {
        RpcError {
            code: error.get("code").and_then(Json::as_i64).unwrap_or(INTERNAL_ERROR),
            message: error.get("message").and_then(Json::as_str).unwrap_or("").to_string(),
            data: error.get("data").cloned(),
            refused_upstream: true,
        }
    }
}

// Messages are built by moving their parts in: `json!` would copy each value it is given (it serializes them), and
// a tool's result or arguments can be large.
fn response(id: &Json, outcome: Result<Json, RpcError>) -> Json {
    let mut message = Map::with_capacity(3);
    message.insert("jsonrpc".into(), Json::from("2.0"));
    message.insert("id".into(), id.clone());
    match outcome {
        Ok(result) => message.insert("result".into(), result),
        Err(error) => message.insert("error".into(), error.to_json()),
    };
    Json::Object(message)
}

/// A JSON-RPC request to the upstream.
fn request_message(id: u64, method: &str, params: Option<Json>) -> Json {
    let mut message = Map::with_capacity(4);
    message.insert("jsonrpc".into(), Json::from("2.0"));
    message.insert("id".into(), Json::from(id));
    message.insert("method".into(), Json::from(method));
    if let Some(params) = params {
        message.insert("params".into(), params);
    }
    Json::Object(message)
}

/// Where the agent's messages go: one JSON value per line, written whole under a lock; and the agents' open
/// `subscriptions/listen` requests (revision 2026-07-28), which are told when a tool list changes.
#[derive(Clone)]
pub struct Outbox {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    listeners: Arc<Mutex<Vec<Listener>>>,
    /// The agent opened a session of the earlier revisions (`initialize`): it is sent the change notifications an
    /// upstream sends unasked. An agent of revision 2026-07-28 only is not (that revision sends them only on a
    /// `subscriptions/listen` stream the agent opened).
    in_session: Arc<std::sync::atomic::AtomicBool>,
}

/// The notifications revision 2026-07-28 sends only on `subscriptions/listen` streams (the earlier ones, unasked).
const CHANGE_NOTIFICATIONS: [&str; 4] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
];

/// An agent's open stream for tool-list changes: a `subscriptions/listen` (its request id, which tags every message),
/// or the event stream of a session of the earlier revisions (no id: plain notifications).
struct Listener {
    id: Option<Json>,
    stream: Box<dyn AgentStream>,
}

/// Where the messages of an agent's stream go: the agent's stdio, or the channel of an HTTP event stream.
pub trait AgentStream: Send {
    /// Sends one message; `false` when the stream is gone.
    fn send(&self, message: Json) -> bool;
    /// Whether the agent still holds the stream (a closed one is dropped when another opens, so that streams opened
    /// and closed while nothing changes do not pile up).
    fn is_open(&self) -> bool;
}

impl AgentStream for tokio::sync::mpsc::UnboundedSender<Json> {
    fn send(&self, message: Json) -> bool {
        tokio::sync::mpsc::UnboundedSender::send(self, message).is_ok()
    }

    fn is_open(&self) -> bool {
        !self.is_closed()
    }
}

/// The agent's stdio (not the writer itself: the outbox that holds the listeners holds the writer).
struct AgentStdio(std::sync::Weak<Mutex<Box<dyn Write + Send>>>);

impl AgentStream for AgentStdio {
    fn send(&self, message: Json) -> bool {
        self.0.upgrade().is_some_and(|writer| write_line(&writer, &line(&message)))
    }

    fn is_open(&self) -> bool {
        self.0.strong_count() > 0
    }
}

/// Writes one line whole; whether it was written.
fn write_line(writer: &Mutex<Box<dyn Write + Send>>, line: &[u8]) -> bool {
    let mut writer = writer.lock().unwrap_or_else(|p| p.into_inner());
    writer.write_all(line).and_then(|()| writer.flush()).is_ok()
}

/// A notification of the `subscriptions/listen` stream of request `id`: tagged with its id, as revision 2026-07-28
/// requires of every message on the stream.
fn on_stream(id: &Json, method: &str, mut params: Map<String, Json>) -> Json {
    let mut meta = Map::with_capacity(1);
    meta.insert(META_SUBSCRIPTION_ID.into(), id.clone());
    params.insert("_meta".into(), Json::Object(meta));
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outbox")
    }
}

impl Outbox {
    pub fn new(writer: Box<dyn Write + Send>) -> Outbox {
        Outbox { writer: Arc::new(Mutex::new(writer)), listeners: Default::default(), in_session: Default::default() }
    }

    /// Sends a message from an upstream that no request of the agent's asked for: a change notification only to an
    /// agent that opened a session of the earlier revisions ([`Outbox::in_session`]), anything else as it is.
    fn send_unasked(&self, message: &Json) {
        let method = message.get("method").and_then(Json::as_str).unwrap_or("");
        if CHANGE_NOTIFICATIONS.contains(&method) && !self.in_session.load(Ordering::Relaxed) {
            return;
        }
        self.send(message);
    }

    /// Opens an agent's `subscriptions/listen` (request `id`, with `params`): the acknowledgement, then, while `send`
    /// returns true, `notifications/tools/list_changed` whenever an upstream's tool list changes (what the agent may
    /// list can change with it). Only tool-list changes are honoured, and the acknowledgement says so: the proxy
    /// passes no prompt or resource notifications on this revision's streams.
    pub fn listen(&self, id: &Json, params: Option<&Json>, stream: Box<dyn AgentStream>) {
        let asked = params.and_then(|p| p.get("notifications")).and_then(|n| n.get("toolsListChanged"));
        let tools = asked == Some(&Json::Bool(true));
        let mut honoured = Map::new();
        if tools {
            honoured.insert("toolsListChanged".into(), Json::Bool(true));
        }
        let mut params = Map::with_capacity(1);
        params.insert("notifications".into(), Json::Object(honoured));
        if stream.send(on_stream(id, "notifications/subscriptions/acknowledged", params)) && tools {
            self.add(Listener { id: Some(id.clone()), stream });
        }
    }

    /// Tells `stream` of every tool-list change, as plain `notifications/tools/list_changed` (the event stream an
    /// agent of the earlier revisions opens with `GET`), while it is open.
    pub fn watch(&self, stream: Box<dyn AgentStream>) {
        self.add(Listener { id: None, stream });
    }

    fn add(&self, listener: Listener) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|l| l.stream.is_open());
        listeners.push(listener);
    }

    /// [`Outbox::listen`] for an agent on this outbox's own writer (stdio).
    fn listen_here(&self, id: &Json, params: Option<&Json>) {
        self.listen(id, params, Box::new(AgentStdio(Arc::downgrade(&self.writer))));
    }

    /// Ends the agent's subscription `id` (it cancelled the request); whether there was one.
    fn unlisten(&self, id: &Json) -> bool {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        let before = listeners.len();
        listeners.retain(|l| l.id.as_ref() != Some(id));
        listeners.len() != before
    }

    /// Tells every open subscription that a tool list changed (dropping those whose stream is gone).
    fn tools_changed(&self) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|l| {
            let method = "notifications/tools/list_changed";
            l.stream.send(match &l.id {
                Some(id) => on_stream(id, method, Map::new()),
                None => json!({"jsonrpc": "2.0", "method": method}),
            })
        });
    }

    fn send(&self, message: &Json) {
        self.send_line(&line(message));
    }

    /// Sends one message already serialized, ending with its newline.
    fn send_line(&self, line: &[u8]) {
        // The agent went away: nothing to tell it; the read loop ends at its EOF.
        write_line(&self.writer, line);
    }
}

/// An upstream reached over Streamable HTTP: each message is one `POST` (on a kept connection when there is one), answered with JSON or
/// with an event stream that ends with the response.
struct HttpLink {
    url: String,
    /// The `Mcp-Session-Id` the server gave at `initialize`.
    session: Mutex<Option<String>>,
    /// The revision negotiated, sent as `MCP-Protocol-Version` after `initialize`.
    version: Mutex<Option<String>>,
    outbox: Outbox,
    /// The HTTP client, and the connections to the server it keeps open between messages.
    client: Client,
}

impl HttpLink {
    /// An error naming the upstream.
    fn down(&self, why: String) -> RpcError {
        RpcError::new(INTERNAL_ERROR, format!("the upstream server at {}: {why}", self.url))
    }
}

/// Whether a response's `Content-Type` is an event stream.
fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| t.starts_with("text/event-stream"))
}

/// What is done with a response from a stdio upstream: handed to the thread waiting for it, or, for a call the
/// proxy answers from the upstream's reader thread (see [`Proxy::run`]), a function that answers the agent.
enum Waiter {
    Thread(mpsc::Sender<Result<Json, RpcError>>),
    /// Called with the response's `result` as the upstream wrote it (JSON text, not parsed: the proxy adds its part
    /// to it by splicing), or with an error when the upstream exits or the deadline passes.
    Then {
        deadline: Instant,
        method: String,
        reply: Box<dyn FnOnce(Result<RawResult, RpcError>) + Send>,
    },
}

/// A response's `result`, as the upstream wrote it: one JSON value (checked), not parsed into a tree.
struct RawResult(String);

impl Waiter {
    fn answer(self, outcome: Result<Json, RpcError>) {
        match self {
            Waiter::Thread(waiting) => {
                let _ = waiting.send(outcome);
            }
            Waiter::Then { reply, .. } => reply(outcome.map(|result| RawResult(result.to_string()))),
        }
    }

    /// [`Waiter::answer`] with the response's `result` or `error` as the upstream wrote them.
    fn answer_raw(self, result: Option<&RawValue>, error: Option<&RawValue>) {
        let error = error.map(|e| RpcError::from_json(&serde_json::from_str(e.get()).unwrap_or(Json::Null)));
        match (self, error) {
            (waiting, Some(error)) => waiting.answer(Err(error)),
            (Waiter::Then { reply, .. }, None) => {
                reply(Ok(RawResult(result.map_or_else(|| "null".to_string(), |r| r.get().to_string()))))
            }
            (waiting @ Waiter::Thread(_), None) => {
                let result = result.and_then(|r| serde_json::from_str(r.get()).ok()).unwrap_or(Json::Null);
                waiting.answer(Ok(result))
            }
        }
    }
}

/// The members of a message from the upstream that say what it is, the others skipped (checked, not parsed): a
/// response to the proxy is handed on without being parsed into a tree.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// How often a stdio upstream's requests answered by a function are checked against their deadline.
const DEADLINE_TICK: Duration = Duration::from_millis(100);

/// How long the cancellation of a call that timed out may take to reach an HTTP upstream before the agent is
/// answered anyway.
const CANCEL_WITHIN: Duration = Duration::from_secs(1);

/// The upstream MCP server: a child process spoken to over its stdin/stdout, or a server reached over HTTP.
struct Upstream {
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Option<Child>>,
    http: Option<HttpLink>,
    /// Requests sent up, waiting for their response.
    pending: Mutex<HashMap<u64, Waiter>>,
    /// Whether the thread that fails overdue [`Waiter::Then`] requests runs.
    sweeping: std::sync::atomic::AtomicBool,
    next_id: AtomicU64,
    /// Why the upstream is not running, once it is not.
    gone: Mutex<Option<String>>,
    /// The upstream's `initialize` result, once the session is open.
    session: Mutex<Option<Result<Json, RpcError>>>,
    /// The upstream's tools (every page), until it says the list changed.
    tools: Mutex<Option<Arc<Vec<Json>>>>,
    timeout: Duration,
    /// Not the first of several upstreams: its requests to the client (sampling, roots, elicitation) are refused by
    /// the proxy instead of reaching the agent, whose answers could not be told apart from the first upstream's.
    secondary: std::sync::atomic::AtomicBool,
    /// The revision to speak, as `--upstream-revision` says ([`Upstream::session`] chooses with it).
    revision: Mutex<UpstreamRevision>,
    /// Speaking the stateless revision 2026-07-28: every request carries its `_meta` envelope
    /// ([`Upstream::enveloped`]) and, over HTTP, `MCP-Protocol-Version: 2026-07-28`; no session.
    stateless: std::sync::atomic::AtomicBool,
    /// The id of the proxy's own `subscriptions/listen` request to a stateless upstream ([`Upstream::listen`]), while
    /// it listens: the notifications tagged with it are the proxy's, not an agent's.
    listening: Mutex<Option<u64>>,
    /// This upstream, for the thread that listens to it over HTTP (which must not keep it alive between streams).
    me: std::sync::Weak<Upstream>,
}

/// The revision `remit mcp-proxy` speaks to its upstream servers (`--upstream-revision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamRevision {
    /// The stateless revision 2026-07-28 when the server's `server/discover` offers it, else a 2025-06-18 session:
    /// what the official SDKs' clients do.
    #[default]
    Auto,
    /// The stateless revision only (a server that does not speak it is an error).
    Stateless,
    /// A 2025-06-18 session (`initialize`) only.
    Session,
}

impl UpstreamRevision {
    /// `auto`, `2026-07-28` or `2025-06-18`.
    pub fn parse(text: &str) -> Result<UpstreamRevision, String> {
        match text {
            "auto" => Ok(UpstreamRevision::Auto),
            "2026-07-28" => Ok(UpstreamRevision::Stateless),
            "2025-06-18" => Ok(UpstreamRevision::Session),
            other => {
                Err(format!("`{other}` is not a revision the proxy speaks upstream (auto, 2026-07-28, 2025-06-18)"))
            }
        }
    }
}

/// How long `--upstream-revision auto` waits for an answer to `server/discover` before it opens a session instead
/// (servers of the earlier revisions answer it at once with an error; one that ignores it costs this once).
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the proxy's `subscriptions/listen` stream to an HTTP upstream may stay silent before it is opened again
/// (a server sends nothing on it until something changes).
const LISTEN_IDLE: Duration = Duration::from_secs(3600);

/// The longest wait before a failed `subscriptions/listen` stream is opened again.
const LISTEN_RETRY: Duration = Duration::from_secs(30);

/// The `_meta` key that tags every message of a `subscriptions/listen` stream with the request's id (2026-07-28).
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

impl Upstream {
    /// Spawns `command` and starts the thread that reads it; its messages that are not responses go to `outbox`.
    fn spawn(command: &[String], outbox: Outbox, timeout: Duration) -> Result<Arc<Upstream>, String> {
        let (program, args) = command.split_first().ok_or("the upstream command is empty")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the upstream server `{program}`: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let stdin = child.stdin.take();
        let upstream = Upstream::new(stdin, Some(child), None, timeout);
        let reader = upstream.clone();
        std::thread::spawn(move || reader.read(BufReader::new(stdout), &outbox));
        Ok(upstream)
    }

    /// An upstream at `url` (`http://` or `https://HOST[:PORT]/PATH`, the server's certificate checked as `tls`
    /// says); nothing is sent before the first request.
    fn connect(url: &str, outbox: Outbox, timeout: Duration, tls: &Tls) -> Result<Arc<Upstream>, String> {
        remit_gateway::client::Target::parse(url)
            .map_err(|e| format!("{e}: the upstream is `http://` or `https://HOST[:PORT]/PATH`"))?;
        let http = HttpLink {
            url: url.to_string(),
            session: Mutex::new(None),
            version: Mutex::new(None),
            outbox,
            client: Client::new(tls.clone()),
        };
        Ok(Upstream::new(None, None, Some(http), timeout))
    }

    /// An upstream with nothing pending yet: a child's pipe, or an HTTP link.
    fn new(
        stdin: Option<ChildStdin>,
        child: Option<Child>,
        http: Option<HttpLink>,
        timeout: Duration,
    ) -> Arc<Upstream> {
        Arc::new_cyclic(|me| Upstream {
            stdin: Mutex::new(stdin),
            child: Mutex::new(child),
            http,
            pending: Mutex::new(HashMap::new()),
            sweeping: std::sync::atomic::AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            gone: Mutex::new(None),
            session: Mutex::new(None),
            tools: Mutex::new(None),
            timeout,
            secondary: std::sync::atomic::AtomicBool::new(false),
            revision: Mutex::new(UpstreamRevision::Auto),
            stateless: std::sync::atomic::AtomicBool::new(false),
            listening: Mutex::new(None),
            me: me.clone(),
        })
    }

    /// A message the upstream sent that is not a response to the proxy: to the agent.
    fn notify_agent(&self, message: Map<String, Json>, outbox: &Outbox) {
        let changed = message.get("method").and_then(Json::as_str) == Some("notifications/tools/list_changed");
        if changed {
            *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = None;
            outbox.tools_changed();
        }
        let meta = message.get("params").and_then(|p| p.get("_meta"));
        let tag = meta.and_then(|m| m.get(META_SUBSCRIPTION_ID)).and_then(Json::as_u64);
        let listening = *self.listening.lock().unwrap_or_else(|p| p.into_inner());
        if tag.is_some() && tag == listening {
            // A message of the proxy's own subscription (its acknowledgement, a change): no agent asked for it. A
            // changed tool list is told to the agent as an upstream of the earlier revisions tells it.
            if changed {
                outbox.send_unasked(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            }
            return;
        }
        if self.secondary.load(Ordering::Relaxed) {
            if let Some(id) = message.get("id") {
                let error = RpcError::new(
                    METHOD_NOT_FOUND,
                    "remit mcp-proxy passes requests to the client only from its first upstream server",
                );
                let _ = self.write(&response(id, Err(error)));
                return;
            }
        }
        outbox.send_unasked(&Json::Object(message));
    }

    /// POSTs one message to an HTTP upstream; the response with `id` when one is awaited. Other messages in an
    /// event stream go to the agent.
    fn post(
        &self,
        http: &HttpLink,
        message: &Json,
        id: Option<u64>,
        timeout: Duration,
    ) -> Result<Option<Json>, RpcError> {
        let (headers, body, session) = self.post_head(http, message);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let exchanged = blocking::send(&http.client, "POST", &http.url, &headers, Some(&body), timeout);
        let mut response = exchanged.map_err(|why| http.down(why))?;
        if response.status >= 400 {
            let text = response.body_start(4096).map(|b| String::from_utf8_lossy(&b).trim().to_string());
            return Err(self.refused(http, response.status, session, text.unwrap_or_default()));
        }
        self.keep_session(http, response.header("mcp-session-id"));
        let Some(id) = id else {
            response.finish();
            return Ok(None);
        };
        let mut answer = None;
        let mut take = |text: &str| self.take_answer(http, id, text, &mut answer);
        let read = if is_event_stream(response.header("content-type")) {
            response.events(MAX_MESSAGE, &mut take)
        } else {
            response.body(MAX_MESSAGE).map(|body| {
                take(&String::from_utf8_lossy(&body));
            })
        };
        read.map_err(|e| http.down(e.to_string()))?;
        // Kept for the next message when the server ends its answer (the connection is closed otherwise).
        response.finish();
        answer.unwrap_or_else(|| Err(http.down(format!("no response to request {id}")))).map(Some)
    }

    /// [`Upstream::post`] of a request on the async runtime ([`Client::send`]), waiting at most the
    /// upstream's timeout: no thread waits on the upstream. The result as the upstream wrote it, not parsed into a
    /// tree ([`Upstream::take_raw_answer`]).
    async fn post_async(&self, http: &HttpLink, id: u64, message: &Json) -> Result<RawResult, RpcError> {
        let (headers, body, session) = self.post_head(http, message);
        let exchange = async {
            let exchanged = http.client.send("POST", &http.url, &headers, body).await;
            let mut response = exchanged.map_err(|why| http.down(why))?;
            if response.status >= 400 {
                let text = response.body_start(4096).await.map(|b| String::from_utf8_lossy(&b).trim().to_string());
                return Err(self.refused(http, response.status, session, text.unwrap_or_default()));
            }
            self.keep_session(http, response.header("mcp-session-id"));
            let mut answer = None;
            let mut take = |text: &str| self.take_raw_answer(http, id, text, &mut answer);
            let read = if is_event_stream(response.header("content-type")) {
                response.events(MAX_MESSAGE, &mut take).await
            } else {
                response.body(MAX_MESSAGE).await.map(|body| {
                    take(&String::from_utf8_lossy(&body));
                })
            };
            read.map_err(|e| http.down(e.to_string()))?;
            response.finish();
            answer.unwrap_or_else(|| Err(http.down(format!("no response to request {id}"))))
        };
        remit_gateway::client::anchor_deadlines();
        let Ok(outcome) = tokio::time::timeout(self.timeout, exchange).await else {
            // Dropping the exchange closed its connection; the server is told to stop working on the request too.
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": id, "reason": "timed out in remit mcp-proxy"}});
            let (headers, body, _) = self.post_head(http, &cancel);
            let sent = http.client.send("POST", &http.url, &headers, body);
            if let Ok(Ok(response)) = tokio::time::timeout(CANCEL_WITHIN, sent).await {
                response.finish();
            }
            return Err(self.too_slow(message.get("method").and_then(Json::as_str).unwrap_or("?")));
        };
        outcome
    }

    /// The headers and body of a POST of `message`, and whether it carries a session.
    fn post_head(&self, http: &HttpLink, message: &Json) -> (Vec<(String, String)>, Vec<u8>, bool) {
        let session = http.session.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let version = http.version.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut headers = vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            ("Accept".to_string(), "application/json, text/event-stream".to_string()),
        ];
        let in_session = session.is_some();
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id".into(), session));
        }
        if let Some(version) = version {
            headers.push(("MCP-Protocol-Version".into(), version));
        }
        // The routing headers of MCP 2026-07-28, mirrored from the message the proxy itself built (so they match
        // it); a server of an earlier revision ignores them.
        let method = message.get("method").and_then(Json::as_str);
        if let Some(method) = method {
            headers.push(("Mcp-Method".into(), method.to_string()));
        }
        let name = method.and_then(name_param).and_then(|key| message.get("params")?.get(key)?.as_str());
        if let Some(name) = name {
            headers.push(("Mcp-Name".into(), encode_header_value(name)));
            // And the arguments its tool's schema marks `x-mcp-header`, as `Mcp-Param-{Name}` (absent or null:
            // none).
            if method == Some("tools/call") {
                headers.extend(self.param_headers(message));
            }
        }
        let body = serde_json::to_vec(message).expect("a JSON value serializes");
        (headers, body, in_session)
    }

    /// The error for a POST answered with an HTTP error `status` (and `text`); a session the server ended (`404`)
    /// is dropped, so that the next request opens a new one.
    fn refused(&self, http: &HttpLink, status: u16, in_session: bool, text: String) -> RpcError {
        let mut error = if status == 404 && in_session {
            *http.session.lock().unwrap_or_else(|p| p.into_inner()) = None;
            *self.session.lock().unwrap_or_else(|p| p.into_inner()) = None;
            http.down("the session expired; it is opened again on the next request".into())
        } else {
            http.down(format!("HTTP {status}: {text}"))
        };
        // A client error: the server did not take the request. (A `5xx` may have come after it ran.)
        error.refused_upstream = (400..500).contains(&status);
        error
    }

    /// Keeps the `Mcp-Session-Id` a response gave.
    fn keep_session(&self, http: &HttpLink, session: Option<&str>) {
        if let Some(session) = session {
            *http.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(session.to_string());
        }
    }

    /// One message of a POST's answer: the response to request `id` goes to `answer` (true: nothing more to read);
    /// a request or notification of the server goes to the agent.
    fn take_answer(&self, http: &HttpLink, id: u64, text: &str, answer: &mut Option<Result<Json, RpcError>>) -> bool {
        let Ok(Json::Object(message)) = serde_json::from_str::<Json>(text) else { return false };
        if message.contains_key("method") {
            self.notify_agent(message, &http.outbox);
            return false;
        }
        if message.get("id").and_then(Json::as_u64) != Some(id) {
            return false;
        }
        *answer = Some(match message.get("error") {
            Some(error) => Err(RpcError::from_json(error)),
            None => self.complete(message.get("result").cloned().unwrap_or(Json::Null)),
        });
        true
    }

    /// [`Upstream::take_answer`] without a tree: the result of the response to request `id` as the upstream wrote
    /// it, read only as far as its head ([`Head`]), as the stdio reader reads one. A message whose head cannot be
    /// read that way (a key twice, say) is parsed whole.
    fn take_raw_answer(
        &self,
        http: &HttpLink,
        id: u64,
        text: &str,
        answer: &mut Option<Result<RawResult, RpcError>>,
    ) -> bool {
        let head = match serde_json::from_str::<Head>(text) {
            Ok(head) if head.method.is_none() => head,
            // A request or notification of the server (for the agent), or a message read as a tree.
            _ => {
                let mut parsed = None;
                let taken = self.take_answer(http, id, text, &mut parsed);
                *answer = parsed.map(|outcome| outcome.map(|result| RawResult(result.to_string())));
                return taken;
            }
        };
        if head.id.and_then(|i| i.get().parse::<u64>().ok()) != Some(id) {
            return false;
        }
        *answer = Some(match head.error {
            Some(error) => Err(RpcError::from_json(&serde_json::from_str(error.get()).unwrap_or(Json::Null))),
            None => {
                let result = head.result.map_or("null", |r| r.get());
                let result_type = serde_json::from_str::<ResultHead>(result).ok().and_then(|head| head.result_type);
                match self.not_complete(result_type.and_then(|t| serde_json::from_str(t.get()).ok())) {
                    Some(refused) => Err(refused),
                    None => Ok(RawResult(result.to_string())),
                }
            }
        });
        true
    }

    /// The `Mcp-Param-{Name}` headers of a `tools/call` message, from its tool's `x-mcp-header` annotations (the
    /// tool as last listed) and its arguments, encoded.
    fn param_headers(&self, message: &Json) -> Vec<(String, String)> {
        let params = message.get("params");
        let tool = params.and_then(|p| p.get("name")).and_then(Json::as_str);
        let tools = self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let schema = tools.as_ref().and_then(|t| t.iter().find(|t| tool_name(t) == tool)?.get("inputSchema"));
        let (Some(schema), Some(arguments)) = (schema, params.and_then(|p| p.get("arguments"))) else {
            return Vec::new();
        };
        let annotations = param_headers(schema).unwrap_or_default();
        annotations.iter().filter_map(|a| Some((a.header(), encode_header_value(&a.value(arguments)?)))).collect()
    }

    fn read(&self, mut stdout: impl BufRead, outbox: &Outbox) {
        let mut line = Vec::new();
        loop {
            line.clear();
            match std::io::Read::take(&mut stdout, MAX_MESSAGE as u64 + 1).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_MESSAGE && !line.ends_with(b"\n") {
                self.oversize(&line, &mut stdout);
                continue;
            }
            // A response (the common case) is read only as far as its id; anything else, or a message whose head
            // cannot be read that way (a key twice, say), is parsed whole.
            if let Ok(Head { id: Some(id), method: None, result, error }) = serde_json::from_slice::<Head>(&line) {
                let Ok(id) = id.get().parse::<u64>() else { continue };
                let waiting = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                if let Some(waiting) = waiting {
                    let result_type = result.and_then(|r| serde_json::from_str::<ResultHead>(r.get()).ok());
                    let result_type = result_type.and_then(|head| serde_json::from_str(head.result_type?.get()).ok());
                    match self.not_complete(result_type) {
                        Some(refused) => waiting.answer(Err(refused)),
                        None => waiting.answer_raw(result, error),
                    }
                }
                continue;
            }
            let Ok(Json::Object(message)) = serde_json::from_slice::<Json>(&line) else {
                eprintln!("remit mcp-proxy: the upstream sent a line that is not a JSON-RPC message; ignored");
                continue;
            };
            if message.contains_key("method") {
                self.notify_agent(message, outbox);
                continue;
            }
            let Some(id) = message.get("id").and_then(Json::as_u64) else { continue };
            let waiting = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            if let Some(waiting) = waiting {
                let mut message = message;
                let outcome = match message.remove("error") {
                    Some(error) => Err(RpcError::from_json(&error)),
                    None => self.complete(message.remove("result").unwrap_or(Json::Null)),
                };
                waiting.answer(outcome);
            }
        }
        let status = self.child.lock().unwrap_or_else(|p| p.into_inner()).as_mut().map(|c| c.wait());
        let why = match status {
            Some(Ok(status)) => format!("the upstream server exited ({status})"),
            _ => "the upstream server closed its output".to_string(),
        };
        // `gone` first: a writer that finds the pipe closed reads why from it.
        *self.gone.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
        *self.stdin.lock().unwrap_or_else(|p| p.into_inner()) = None;
        eprintln!("remit mcp-proxy: {why}");
        let waiting: Vec<Waiter> =
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, w)| w).collect();
        for waiting in waiting {
            waiting.answer(Err(RpcError::new(INTERNAL_ERROR, why.clone())));
        }
    }

    /// A line of the upstream's longer than [`MAX_MESSAGE`] (`start` read already): read to its end without being
    /// kept, so that the next line is read as the next message, its top-level `id` taken on the way (it may come
    /// after the result); the request waiting for it is answered an error naming the limit at once, not left to
    /// its deadline.
    fn oversize(&self, start: &[u8], rest: &mut impl BufRead) {
        #[derive(serde::Deserialize)]
        struct Far {
            #[serde(default)]
            id: Option<Json>,
            #[serde(default)]
            method: Option<serde::de::IgnoredAny>,
        }
        // serde_json reads a reader a byte at a time: a buffer in between keeps that off `LineRest`.
        let mut reader = std::io::BufReader::new(LineRest { start, rest, ended: false });
        let far: Result<Far, _> =
            serde::Deserialize::deserialize(&mut serde_json::Deserializer::from_reader(&mut reader));
        // Whatever the parser left of the line (all of it when it stopped early).
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
        let why = format!("the upstream's message is larger than {MAX_MESSAGE} bytes, the most the proxy relays");
        let waiting = match far {
            Ok(Far { id: Some(id), method: None }) => {
                id.as_u64().and_then(|id| self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id))
            }
            _ => None,
        };
        match waiting {
            Some(waiting) => waiting.answer(Err(RpcError::new(INTERNAL_ERROR, why))),
            None => eprintln!("remit mcp-proxy: {why}; dropped"),
        }
    }

    fn gone(&self) -> Option<String> {
        self.gone.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn write(&self, message: &Json) -> Result<(), RpcError> {
        if let Some(http) = &self.http {
            return self.post(http, message, None, self.timeout).map(|_| ());
        }
        let mut line = serde_json::to_vec(message).expect("a JSON value serializes");
        line.push(b'\n');
        let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        let down = || RpcError::new(INTERNAL_ERROR, self.gone().unwrap_or("the upstream server is not running".into()));
        let Some(pipe) = stdin.as_mut() else { return Err(down()) };
        pipe.write_all(&line).and_then(|()| pipe.flush()).map_err(|_| down())
    }

    /// Sends a request and waits for its result (or the upstream's error, or an error when it exits or times out).
    fn request(&self, method: &str, params: Option<Json>) -> Result<Json, RpcError> {
        self.request_as(self.new_id(), method, params)
    }

    fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// [`Upstream::request`] under an id from [`Upstream::new_id`].
    fn request_as(&self, id: u64, method: &str, params: Option<Json>) -> Result<Json, RpcError> {
        if let Some(why) = self.gone() {
            return Err(RpcError::new(INTERNAL_ERROR, why));
        }
        self.request_within(id, method, params, self.timeout)
    }

    /// [`Upstream::request`] to an HTTP upstream on the async runtime, no thread waiting ([`Upstream::post_async`]).
    async fn request_async(&self, method: &str, params: Json) -> Result<RawResult, RpcError> {
        if let Some(why) = self.gone() {
            return Err(RpcError::new(INTERNAL_ERROR, why));
        }
        let Some(http) = &self.http else {
            return Err(RpcError::new(INTERNAL_ERROR, "not an HTTP upstream"));
        };
        let id = self.new_id();
        self.post_async(http, id, &request_message(id, method, self.enveloped(Some(params)))).await
    }

    /// [`Upstream::request_as`], waiting at most `timeout`.
    fn request_within(&self, id: u64, method: &str, params: Option<Json>, timeout: Duration) -> Result<Json, RpcError> {
        let params = self.enveloped(params);
        if let Some(http) = &self.http {
            let message = request_message(id, method, params);
            return self.post(http, &message, Some(id), timeout).map(|answer| answer.unwrap_or(Json::Null));
        }
        let (send, receive) = mpsc::channel();
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Waiter::Thread(send));
        let message = request_message(id, method, params);
        if let Err(e) = self.write(&message) {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            return Err(e);
        }
        match receive.recv_timeout(timeout) {
            Ok(outcome) => outcome,
            Err(_) => {
                self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                Err(self.timed_out(id, method))
            }
        }
    }

    /// Cancels request `id` upstream; the error its caller gets.
    fn timed_out(&self, id: u64, method: &str) -> RpcError {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "timed out in remit mcp-proxy"}});
        let _ = self.write(&cancel);
        self.too_slow(method)
    }

    /// The error of a request the upstream did not answer within its timeout.
    fn too_slow(&self, method: &str) -> RpcError {
        RpcError::new(
            INTERNAL_ERROR,
            format!("the upstream server did not answer `{method}` within {} s", self.timeout.as_secs()),
        )
    }

    /// Sends a request to a stdio upstream without waiting: `reply` is called with the response on the upstream's
    /// reader thread, or with an error — at once when it cannot be sent, when the upstream exits, or after the
    /// timeout (the request is then cancelled upstream, as [`Upstream::request`] does).
    fn request_then(
        self: &Arc<Self>,
        method: &str,
        params: Json,
        reply: Box<dyn FnOnce(Result<RawResult, RpcError>) + Send>,
    ) {
        if let Some(why) = self.gone() {
            return reply(Err(RpcError::new(INTERNAL_ERROR, why)));
        }
        let id = self.new_id();
        let waiter = Waiter::Then { deadline: Instant::now() + self.timeout, method: method.to_string(), reply };
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, waiter);
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            let upstream = Arc::downgrade(self);
            std::thread::spawn(move || Upstream::sweep(upstream));
        }
        let message = request_message(id, method, self.enveloped(Some(params)));
        if let Err(e) = self.write(&message) {
            // Unless the reader, finding the upstream gone, answered it already.
            if let Some(waiting) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                waiting.answer(Err(e));
            }
        }
    }

    /// Fails the requests of [`Upstream::request_then`] whose deadline passed, until the upstream is gone (its
    /// reader answers what is left) or dropped.
    fn sweep(upstream: std::sync::Weak<Upstream>) {
        loop {
            std::thread::sleep(DEADLINE_TICK);
            let Some(upstream) = upstream.upgrade() else { return };
            if upstream.gone().is_some() {
                return;
            }
            let now = Instant::now();
            let overdue: Vec<(u64, Waiter)> = {
                let mut pending = upstream.pending.lock().unwrap_or_else(|p| p.into_inner());
                let ids: Vec<u64> = pending
                    .iter()
                    .filter(|(_, w)| matches!(w, Waiter::Then { deadline, .. } if *deadline <= now))
                    .map(|(id, _)| *id)
                    .collect();
                ids.into_iter().filter_map(|id| Some((id, pending.remove(&id)?))).collect()
            };
            for (id, waiting) in overdue {
                let method = match &waiting {
                    Waiter::Then { method, .. } => method.clone(),
                    Waiter::Thread(_) => String::new(),
                };
                waiting.answer(Err(upstream.timed_out(id, &method)));
            }
        }
    }

    /// What the upstream said of itself (its `initialize` result, or the same made from its `server/discover`
    /// result: [`Upstream::discover`]), opening the session or the stateless exchange the first time, in the
    /// revision [`UpstreamRevision`] says.
    fn session(&self) -> Result<Json, RpcError> {
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Ok(result)) = session.as_ref() {
            return Ok(result.clone());
        }
        let revision = *self.revision.lock().unwrap_or_else(|p| p.into_inner());
        let result = match revision {
            UpstreamRevision::Session => self.initialize()?,
            UpstreamRevision::Stateless => self.discover(self.timeout)?,
            UpstreamRevision::Auto => match self.discover(DISCOVER_TIMEOUT.min(self.timeout)) {
                Ok(result) => result,
                // A server of an earlier revision refuses `server/discover` (an unknown method, or a request
                // outside a session): a session then.
                Err(_) if self.gone().is_none() => self.initialize()?,
                Err(e) => return Err(e),
            },
        };
        *session = Some(Ok(result.clone()));
        let announces = result.get("capabilities").and_then(|c| c.get("tools")).and_then(|t| t.get("listChanged"));
        if self.stateless.load(Ordering::Relaxed) && announces == Some(&Json::Bool(true)) {
            self.listen();
        }
        Ok(result)
    }

    /// Opens the proxy's `subscriptions/listen` to a stateless upstream that announces tool-list changes: in the
    /// revision 2026-07-28 a server tells a client of changes only on a stream the client opened, where the earlier
    /// ones sent `notifications/tools/list_changed` unasked. Its notifications reach [`Upstream::notify_agent`] like
    /// any other, which recognises them by their tag. Over stdio the request is written and never answered (until the
    /// server ends the subscription); over HTTP its answer is a long-lived event stream, read on a thread of its own
    /// ([`Upstream::listen_over_http`]).
    fn listen(&self) {
        let id = self.new_id();
        *self.listening.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
        let params = json!({"notifications": {"toolsListChanged": true}});
        let message = request_message(id, "subscriptions/listen", self.enveloped(Some(params)));
        if self.http.is_none() {
            if let Err(e) = self.write(&message) {
                eprintln!("remit mcp-proxy: cannot listen for the upstream's tool-list changes: {}", e.message);
            }
            return;
        }
        let me = self.me.clone();
        std::thread::spawn(move || Upstream::listen_over_http(me, id, message));
    }

    /// Reads the stream of the `subscriptions/listen` request `message` (whose id is `id`) from an HTTP upstream, and
    /// opens it again when it ends or breaks (after 1 s, doubling up to [`LISTEN_RETRY`] while it keeps failing),
    /// until the upstream is stopped or dropped. A change made while no stream was open is not sent again: so each
    /// time a stream ends the tools are listed again before the next one opens, and when they differ from those
    /// listed before, the agents are told as for a change sent on the stream (only a change in the moment between
    /// that listing and the stream's opening goes unseen). A server that refuses the request (a JSON-RPC error) is
    /// not asked again.
    fn listen_over_http(me: std::sync::Weak<Upstream>, id: u64, message: Json) {
        let mut wait = Duration::from_secs(1);
        // The tools as listed when the last stream ended.
        let mut before: Option<Arc<Vec<Json>>> = None;
        loop {
            let Some(upstream) = me.upgrade() else { return };
            let Some(http) = &upstream.http else { return };
            if *upstream.listening.lock().unwrap_or_else(|p| p.into_inner()) != Some(id) {
                return;
            }
            if let (Some(before), Ok(now)) = (before.take(), upstream.tools()) {
                if before != now {
                    http.outbox.tools_changed();
                    http.outbox.send_unasked(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
                }
            }
            let opened = Instant::now();
            let ended = upstream.post(http, &message, Some(id), LISTEN_IDLE);
            before = upstream.tools.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Err(e) = &ended {
                if e.code != INTERNAL_ERROR {
                    eprintln!("remit mcp-proxy: the upstream refuses `subscriptions/listen`: {}", e.message);
                    return;
                }
            }
            drop(upstream);
            if opened.elapsed() > LISTEN_RETRY {
                wait = Duration::from_secs(1);
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(LISTEN_RETRY);
        }
    }

    /// Opens the stateless revision 2026-07-28: `server/discover`, in the envelope every request then carries. What
    /// it tells is returned as an `initialize` result would tell it (`protocolVersion`, `capabilities`,
    /// `serverInfo`, `instructions`), for what the proxy reads of it. An error, and the envelope off again, when the
    /// server refuses it or does not list 2026-07-28 among its versions.
    fn discover(&self, timeout: Duration) -> Result<Json, RpcError> {
        self.set_stateless(true);
        let asked = self.request_within(self.new_id(), "server/discover", None, timeout).map_err(|e| {
            let why =
                format!("the upstream server does not speak {STATELESS_VERSION}: `server/discover`: {}", e.message);
            RpcError::new(e.code, why)
        });
        let discovered = asked.and_then(|found| {
            let versions = found.get("supportedVersions").and_then(Json::as_array);
            if !versions.is_some_and(|v| v.iter().any(|v| v == STATELESS_VERSION)) {
                let listed = versions.map_or_else(|| "none".to_string(), |v| Json::from(v.clone()).to_string());
                let why = format!("the upstream server does not speak {STATELESS_VERSION} (it lists {listed})");
                return Err(RpcError::new(INTERNAL_ERROR, why));
            }
            let mut told = Map::with_capacity(4);
            told.insert("protocolVersion".into(), Json::from(STATELESS_VERSION));
            told.insert("capabilities".into(), found.get("capabilities").cloned().unwrap_or_else(|| json!({})));
            if let Some(server) = found.get("_meta").and_then(|m| m.get(META_SERVER_INFO)) {
                told.insert("serverInfo".into(), server.clone());
            }
            if let Some(instructions) = found.get("instructions") {
                told.insert("instructions".into(), instructions.clone());
            }
            Ok(Json::Object(told))
        });
        if discovered.is_err() {
            self.set_stateless(false);
        }
        discovered
    }

    /// Turns the stateless revision's envelope (and HTTP header) on or off.
    fn set_stateless(&self, on: bool) {
        self.stateless.store(on, Ordering::Relaxed);
        if let Some(http) = &self.http {
            *http.version.lock().unwrap_or_else(|p| p.into_inner()) = on.then(|| STATELESS_VERSION.to_string());
        }
    }

    /// A request's params with the stateless revision's `_meta` envelope when it is spoken: the proxy's revision, and
    /// as client capabilities those of an agent of that revision (what it can answer when a server asks it for
    /// input in an `InputRequiredResult`, which the proxy relays), else none (a server of that revision sends no
    /// requests to the client); the rest of `_meta` (an agent's progress token, say) kept.
    fn enveloped(&self, params: Option<Json>) -> Option<Json> {
        if !self.stateless.load(Ordering::Relaxed) {
            return params;
        }
        let mut params = match params {
            Some(Json::Object(params)) => params,
            _ => Map::new(),
        };
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if !meta.is_object() {
            *meta = json!({});
        }
        if let Some(meta) = meta.as_object_mut() {
            let agents = meta.get(META_VERSION).and_then(Json::as_str) == Some(STATELESS_VERSION);
            let capabilities = meta.get(META_CAPABILITIES).filter(|c| agents && c.is_object()).cloned();
            meta.insert(META_VERSION.into(), Json::from(STATELESS_VERSION));
            meta.insert(META_CAPABILITIES.into(), capabilities.unwrap_or_else(|| json!({})));
        }
        Some(Json::Object(params))
    }

    /// `result`, or an error when it is a stateless result that is not `complete` ([`Upstream::not_complete`]).
    fn complete(&self, result: Json) -> Result<Json, RpcError> {
        let result_type = result.get("resultType").and_then(Json::as_str).map(str::to_string);
        match self.not_complete(result_type) {
            Some(refused) => Err(refused),
            None => Ok(result),
        }
    }

    /// In the stateless revision, the error for a result of a type the proxy does not know: neither `complete` nor
    /// `input_required` (an `InputRequiredResult`, relayed to agents of that revision, see [`for_earlier_agent`]).
    fn not_complete(&self, result_type: Option<String>) -> Option<RpcError> {
        let known = |t: &String| t == "complete" || t == INPUT_REQUIRED;
        let result_type = result_type.filter(|t| !known(t) && self.stateless.load(Ordering::Relaxed))?;
        Some(not_relayed(&result_type))
    }

    /// Opens a session in revision 2025-06-18: `initialize`, then `notifications/initialized`.
    fn initialize(&self) -> Result<Json, RpcError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "remit-mcp-proxy", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self.request("initialize", Some(params))?;
        if let Some(http) = &self.http {
            let version = result.get("protocolVersion").and_then(Json::as_str).unwrap_or(PROTOCOL_VERSION);
            *http.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_string());
        }
        self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(result)
    }

    /// The upstream's tools, every page of `tools/list`.
    /// (Shared, not copied: every `tools/call` looks its tool up here.)
    fn tools(&self) -> Result<Arc<Vec<Json>>, RpcError> {
        if let Some(tools) = self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Ok(tools);
        }
        self.session()?;
        let mut tools = Vec::new();
        let mut cursor: Option<Json> = None;
        for _ in 0..1000 {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let page = self.request("tools/list", params)?;
            tools.extend(page.get("tools").and_then(Json::as_array).into_iter().flatten().cloned());
            cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        // A tool whose `x-mcp-header` annotations break the rules of MCP 2026-07-28 is left out, as the revision
        // tells an HTTP client to: its `Mcp-Param-*` headers could not be built or checked.
        tools.retain(|tool| {
            let Some(schema) = tool.get("inputSchema") else { return true };
            match param_headers(schema) {
                Ok(_) => true,
                Err(why) => {
                    let name = tool_name(tool).unwrap_or("?");
                    eprintln!("remit mcp-proxy: the upstream's tool `{name}` is left out: {why}");
                    false
                }
            }
        });
        let tools = Arc::new(tools);
        *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = Some(tools.clone());
        Ok(tools)
    }

    fn kill(&self) {
        *self.listening.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if let Some(http) = &self.http {
            let session = http.session.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(session) = session {
                let headers = [("Mcp-Session-Id", session.as_str())];
                let ended = blocking::send(&http.client, "DELETE", &http.url, &headers, None, Duration::from_secs(5));
                if let Ok(response) = ended {
                    response.finish();
                }
            }
        }
        if let Some(child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = child.kill();
        }
    }
}

/// Starts `command` as an MCP server, opens a session and reads its tools (every page): its `initialize` result and
/// the tools. The server is stopped before this returns. An `https://` server is trusted as `tls` says. (`remit import
/// mcp`.)
pub fn list_tools(command: &[String], timeout: Duration, tls: &Tls) -> Result<(Json, Vec<Json>), String> {
    let sink = Outbox::new(Box::new(std::io::sink()));
    let upstream = match command {
        [url] if url.starts_with("http://") || url.starts_with("https://") => {
            Upstream::connect(url, sink, timeout, tls)?
        }
        _ => Upstream::spawn(command, sink, timeout)?,
    };
    let listed = upstream.session().and_then(|info| Ok((info, upstream.tools()?.to_vec())));
    upstream.kill();
    listed.map_err(|e| format!("the MCP server `{}` answered: {} ({})", command.join(" "), e.message, e.code))
}

/// How soon a crashed upstream command is started again: at once after it ran a while, then after the first
/// backoff ([`UpstreamOptions::restart_backoff`]), twice that, four times … (at most [`MAX_BACKOFF`]) while it keeps
/// exiting within [`STABLE`] of its start.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
const STABLE: Duration = Duration::from_secs(30);

/// How the proxy treats its upstream.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    /// How long one request waits for the upstream's answer.
    pub timeout: Duration,
    /// The revision spoken to the upstream servers.
    pub revision: UpstreamRevision,
    /// The first wait before starting a stdio upstream again that exited soon after it was started.
    pub restart_backoff: Duration,
    /// Which `https://` upstreams are trusted.
    pub tls: Tls,
}

/// The upstream in use, and what restarting a stdio upstream after it exited needs.
struct Current {
    upstream: Arc<Upstream>,
    started: Instant,
    /// Restarts in a row of an upstream that did not stay up for [`STABLE`].
    quick_restarts: u32,
    /// No restart before this.
    not_before: Instant,
}

/// One upstream server behind the proxy.
struct Slot {
    /// Its name (`--upstream NAME=…`), for diagnostics.
    name: String,
    current: Mutex<Current>,
    /// The stdio upstream's command, to start it again after it exits; `None` for an HTTP upstream.
    command: Option<Vec<String>>,
}

/// The proxy: the gateway, the agent's identity, the upstreams and the way back to the agent.
pub struct Proxy {
    gateway: Arc<Gateway>,
    identity: Identity,
    /// The upstream servers; the first also serves everything but tools (resources, prompts, …).
    slots: Vec<Slot>,
    /// Tool names offered by several upstreams, already reported.
    collisions: Mutex<std::collections::BTreeSet<String>>,
    /// Outcome entries go into the log with the next batch of decisions (the decision's own entry was committed
    /// before the call was forwarded; this one only records how it went); dropping this sender stops the thread
    /// that writes those no batch took.
    outcomes: Mutex<Option<mpsc::Sender<Json>>>,
    outcome_writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    options: UpstreamOptions,
    outbox: Outbox,
    /// Agent request id (as JSON text) → the id it was forwarded under, for `notifications/cancelled`.
    forwarded: Mutex<HashMap<String, u64>>,
    /// Calls answered from an upstream's reader thread whose answer is not sent or whose outcome is not queued yet.
    in_flight: Arc<AtomicU64>,
}

/// The rounds of multi round-trip calls (revision 2026-07-28): when the proxy allowed and forwarded a call and its
/// upstream answered `input_required`, what the call's obligations carried out is kept in the store
/// ([`Gateway::keep_round`]) under the call (who called, which tool, which arguments) and the `requestState` the
/// upstream answered with ([`round_key`]). The agent's next round, the same call with that `requestState`, is decided
/// without it ([`Gateway::decide_continuing`]): a single-use approval the first round consumed still covers the
/// call, and its budget count is not counted twice. Each round is taken by the first call that continues it, and kept
/// again when the upstream refuses that call with an error (the round did not run; the agent may try it again). A
/// timeout or a lost connection leaves it taken: the round may have run upstream, and a single-use approval covers
/// one run.
///
/// This is the call a round belongs to: the caller (subject, credential, scopes, mandate), the tool and the digest
/// of its arguments, as one hash.
fn round_of(identity: &Identity, name: &str, arguments: &Json) -> String {
    use sha2::{Digest, Sha256};
    let digest = remit_lang::eval::argument_digest(name, arguments);
    let call = json!([identity.subject, identity.credential, identity.scopes, identity.mandate, name, digest]);
    remit_gateway::audit::hex(&Sha256::digest(call.to_string().as_bytes()))
}

/// The key of the round of `call` ([`round_of`]) that the upstream answered with `state` (its `requestState`).
fn round_key(call: &str, state: &Json) -> String {
    use sha2::{Digest, Sha256};
    remit_gateway::audit::hex(&Sha256::digest(json!([call, state]).to_string().as_bytes()))
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl Proxy {
    /// Starts the upstream `command` (a command, or one `http://` URL); messages to the agent go to `outbox`.
    pub fn start(
        gateway: Arc<Gateway>,
        identity: Identity,
        command: &[String],
        outbox: Outbox,
        options: UpstreamOptions,
    ) -> Result<Arc<Proxy>, String> {
        Proxy::start_many(gateway, identity, &[("main".to_string(), command.to_vec())], outbox, options)
    }

    /// Starts several named upstreams. Their tools are merged under their own names; a name two of them offer is
    /// neither listed nor called (reported on stderr). Everything else goes to the first.
    pub fn start_many(
        gateway: Arc<Gateway>,
        identity: Identity,
        upstreams: &[(String, Vec<String>)],
        outbox: Outbox,
        options: UpstreamOptions,
    ) -> Result<Arc<Proxy>, String> {
        if upstreams.is_empty() {
            return Err("no upstream server: give its command after `--`, or `--upstream NAME=stdio:COMMAND`".into());
        }
        let mut slots = Vec::new();
        for (i, (name, command)) in upstreams.iter().enumerate() {
            let (upstream, restart) = match command.as_slice() {
                [url] if url.starts_with("http://") || url.starts_with("https://") => {
                    (Upstream::connect(url, outbox.clone(), options.timeout, &options.tls)?, None)
                }
                _ => (Upstream::spawn(command, outbox.clone(), options.timeout)?, Some(command.clone())),
            };
            upstream.secondary.store(i > 0, Ordering::Relaxed);
            *upstream.revision.lock().unwrap_or_else(|p| p.into_inner()) = options.revision;
            let now = Instant::now();
            let current = Current { upstream, started: now, quick_restarts: 0, not_before: now };
            slots.push(Slot { name: name.clone(), current: Mutex::new(current), command: restart });
        }
        // Outcome entries are queued in the gateway and go into the log with the next batch of decisions; this
        // thread writes those that waited longer than a moment (no further call came), and all of them at the end.
        // It also watches the stops, which hide and show tools (`StopWatch`), and the policy in force (swapped in by
        // `--watch` or `POST /admin/v1/reload`), which decides which tools an agent sees.
        let (outcomes, stop) = mpsc::channel::<Json>();
        let logger = gateway.clone();
        let watched = outbox.clone();
        let outcome_writer = std::thread::spawn(move || {
            let mut stops = StopWatch::default();
            let mut policy = logger.policy().compiled.policy().to_string();
            loop {
                let stopped =
                    matches!(stop.recv_timeout(Duration::from_millis(50)), Err(mpsc::RecvTimeoutError::Disconnected));
                if let Err(e) = logger.flush_entries() {
                    eprintln!("remit mcp-proxy: outcome entries are not in the log: {e}");
                }
                if stopped {
                    return;
                }
                let stops_changed = stops.changed(logger.store().as_ref());
                let in_force = logger.policy();
                let policy_changed = in_force.compiled.policy() != policy;
                if policy_changed {
                    policy = in_force.compiled.policy().to_string();
                }
                if stops_changed || policy_changed {
                    // The gateway's own tool list changed for the agents: told as an upstream's change is.
                    watched.tools_changed();
                    watched.send_unasked(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
                }
            }
        });
        Ok(Arc::new(Proxy {
            gateway,
            identity,
            slots,
            collisions: Mutex::new(Default::default()),
            outcomes: Mutex::new(Some(outcomes)),
            outcome_writer: Mutex::new(Some(outcome_writer)),
            options,
            outbox,
            forwarded: Mutex::new(HashMap::new()),
            in_flight: Arc::new(AtomicU64::new(0)),
        }))
    }

    /// The first upstream, which serves everything but tools.
    fn upstream(&self) -> Arc<Upstream> {
        self.slot_upstream(0)
    }

    /// The upstream of slot `index`. A stdio upstream that exited is started again (a new session; calls that were
    /// waiting on the old one were answered with an error) unless it crashed again too soon: then, until its
    /// backoff elapses, the exited one, whose requests fail saying when the next start may be.
    fn slot_upstream(&self, index: usize) -> Arc<Upstream> {
        let slot = &self.slots[index];
        let mut current = slot.current.lock().unwrap_or_else(|p| p.into_inner());
        let (Some(why), Some(command)) = (current.upstream.gone(), &slot.command) else {
            return current.upstream.clone();
        };
        // Why it exited, without the note added while it waits.
        let why = why.split("; it is started again").next().unwrap_or_default().to_string();
        let now = Instant::now();
        if now < current.not_before {
            let wait = current.not_before - now;
            let mut note = current.upstream.gone.lock().unwrap_or_else(|p| p.into_inner());
            *note = Some(format!("{why}; it is started again in {:.1} s at the earliest", wait.as_secs_f64()));
            return current.upstream.clone();
        }
        let quick = now.duration_since(current.started) < STABLE;
        current.quick_restarts = if quick { current.quick_restarts + 1 } else { 0 };
        let backoff = match current.quick_restarts {
            0 => Duration::ZERO,
            n => self.options.restart_backoff.saturating_mul(1 << (n - 1).min(5)).min(MAX_BACKOFF),
        };
        eprintln!("remit mcp-proxy: starting the upstream server `{}` again ({why})", slot.name);
        match Upstream::spawn(command, self.outbox.clone(), self.options.timeout) {
            Ok(upstream) => {
                upstream.secondary.store(index > 0, Ordering::Relaxed);
                *upstream.revision.lock().unwrap_or_else(|p| p.into_inner()) = self.options.revision;
                current.upstream = upstream;
                current.started = now;
            }
            Err(e) => eprintln!("remit mcp-proxy: {e}"),
        }
        // The backoff runs from this start: a server that exits again at once waits before the next one.
        current.not_before = now + backoff;
        current.upstream.clone()
    }

    /// Serves the agent until its input ends, then stops the upstream.
    pub fn run(self: &Arc<Self>, mut input: impl BufRead) {
        // Requests run on worker threads, kept between requests (starting a thread per call costs more than the
        // call's own work); a new worker starts whenever none is idle, so a slow call never holds up another.
        // The request, and whether it is of the stateless revision (its result written as 2026-07-28 writes it).
        type Job = (Json, String, Option<Json>, bool);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let idle = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            match std::io::Read::take(&mut input, MAX_MESSAGE as u64 + 1).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_MESSAGE {
                let error = RpcError::new(INVALID_REQUEST, format!("a message is at most {MAX_MESSAGE} bytes"));
                self.outbox.send(&response(&Json::Null, Err(error)));
                // Skip the rest of the oversize line (if its end was not read already), without keeping it.
                if !line.ends_with(b"\n") {
                    let _ = std::io::copy(
                        &mut LineRest { start: &[], rest: &mut input, ended: false },
                        &mut std::io::sink(),
                    );
                }
                continue;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match self.accept(&self.identity, &line) {
                Err(Refused { reply, answer: true }) => self.outbox.send(&reply),
                // A request sent as a notification: JSON-RPC answers no notification (it is logged, not forwarded).
                Err(Refused { answer: false, .. }) => {}
                Ok(None) => {}
                Ok(Some((id, method, params))) => {
                    let stateless = match stateless_request(&method, params.as_ref()) {
                        Ok(stateless) => stateless,
                        Err(error) => {
                            self.outbox.send(&response(&id, Err(error)));
                            continue;
                        }
                    };
                    // A request of revision 2026-07-28 only (in the earlier ones `Proxy::request` refuses it).
                    if method == "subscriptions/listen" && stateless {
                        self.outbox.listen_here(&id, params.as_ref());
                        continue;
                    }
                    if method == "tools/call" && self.ready_here() {
                        self.call_tool_here(&id, params, stateless);
                        continue;
                    }
                    let job = (id, method, params, stateless);
                    // Claim an idle worker, or start one.
                    let claimed = idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
                    if !claimed {
                        let (proxy, queue, idle) = (self.clone(), queue.clone(), idle.clone());
                        workers.push(std::thread::spawn(move || loop {
                            let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                            let Ok((id, method, params, stateless)) = job else { return };
                            let outcome = match method.as_str() {
                                "server/discover" => proxy.discover(&stateless_versions()),
                                _ => proxy.request(&proxy.identity, &id, &method, params),
                            };
                            let outcome = match stateless {
                                true => outcome.map(|r| crate::http::stateless_result(&method, r)),
                                false => for_earlier_agent(outcome),
                            };
                            proxy.outbox.send(&response(&id, outcome));
                            idle.fetch_add(1, Ordering::AcqRel);
                        }));
                    }
                    let _ = jobs.send(job);
                }
            }
        }
        drop(jobs);
        for worker in workers {
            let _ = worker.join();
        }
        // And the calls answered from the upstreams' reader threads (each ends by its deadline at the latest), until
        // each answer is sent and its outcome queued.
        while self.in_flight.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        for slot in &self.slots {
            slot.current.lock().unwrap_or_else(|p| p.into_inner()).upstream.kill();
        }
        self.flush_outcomes();
    }

    /// Writes the outcome entries still queued, then logs further ones as they come (synchronously).
    pub fn flush_outcomes(&self) {
        drop(self.outcomes.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(writer) = self.outcome_writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.join();
        }
    }

    /// Reads one message from `identity`: a request to answer (`Ok(Some)`), something handled already (`Ok(None)`:
    /// a notification or a response, forwarded), or the message refused (`Err`).
    #[allow(clippy::type_complexity)]
    fn accept(&self, identity: &Identity, line: &[u8]) -> Result<Option<(Json, String, Option<Json>)>, Refused> {
        let invalid =
            |id: &Json, message: &str| Refused::answer(response(id, Err(RpcError::new(INVALID_REQUEST, message))));
        let message: Json = serde_json::from_slice(line).map_err(|e| {
            Refused::answer(response(
                &Json::Null,
                Err(RpcError::new(PARSE_ERROR, format!("the message is not JSON: {e}"))),
            ))
        })?;
        let Json::Object(mut message) = message else {
            let what = if message.is_array() {
                "batches are not part of MCP 2025-06-18: send one message per line"
            } else {
                "a JSON-RPC message is a JSON object"
            };
            return Err(invalid(&Json::Null, what));
        };
        let id = message.get("id").cloned();
        if let Some(id) = &id {
            if !(id.is_string() || id.is_i64() || id.is_u64()) {
                return Err(invalid(&Json::Null, "`id` must be a string or an integer"));
            }
        }
        let reply_id = id.clone().unwrap_or(Json::Null);
        if message.get("jsonrpc").and_then(Json::as_str) != Some("2.0") {
            return Err(invalid(&reply_id, "`jsonrpc` must be \"2.0\""));
        }
        // Taken, not copied: a call's arguments can be large.
        let params = message.remove("params");
        if params.as_ref().is_some_and(|p| !p.is_object()) {
            return Err(invalid(&reply_id, "`params` must be an object"));
        }
        match (message.get("method"), id) {
            (Some(Json::String(method)), Some(id)) => Ok(Some((id, method.clone(), params))),
            (Some(Json::String(method)), None) if is_request_method(method) => {
                Err(self.refuse_without_id(identity, method, params.as_ref()))
            }
            (Some(Json::String(method)), None) => {
                self.notification(method, params);
                Ok(None)
            }
            (Some(_), _) => Err(invalid(&reply_id, "`method` must be a string")),
            (None, Some(_)) if message.contains_key("result") || message.contains_key("error") => {
                // The agent answers a request the upstream sent it (sampling, roots, elicitation): pass it up.
                if self.upstream().write(&Json::Object(message)).is_err() {
                    eprintln!("remit mcp-proxy: a response for the upstream was dropped: it is not running");
                }
                Ok(None)
            }
            (None, _) => Err(invalid(&reply_id, "a request needs a `method`")),
        }
    }

    /// A request sent without an id (a JSON-RPC notification) is never forwarded: nothing reaches an upstream
    /// undecided, and a server need not ignore a `tools/call` without an id as the official SDKs do. It is logged in
    /// the gateway's log (a `refused` entry: subject, method, tool) and on stderr.
    fn refuse_without_id(&self, identity: &Identity, method: &str, params: Option<&Json>) -> Refused {
        let tool = params.and_then(|p| p.get("name")).and_then(Json::as_str);
        let entry = json!({"subject": identity.subject, "method": method, "tool": tool,
                           "reason": "mcp.request-without-id"});
        self.gateway.queue_entry("refused", &entry);
        let named = tool.map(|t| format!(" (tool `{t}`)")).unwrap_or_default();
        eprintln!(
            "remit mcp-proxy: refused `{method}`{named} from `{}`: a request without an id is not forwarded",
            identity.subject
        );
        let why = format!("`{method}` is a request: it needs an `id` (sent as a notification, it is not forwarded)");
        Refused { reply: response(&Json::Null, Err(RpcError::new(INVALID_REQUEST, why))), answer: false }
    }

    fn notification(&self, method: &str, params: Option<Json>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        match method {
            // The proxy opened its own session with the upstream.
            "notifications/initialized" => return,
            "notifications/cancelled" => {
                let listen = params.as_ref().and_then(|p| p.get("requestId"));
                if listen.is_some_and(|id| self.outbox.unlisten(id)) {
                    return;
                }
                let request = params.as_ref().and_then(|p| p.get("requestId")).map(Json::to_string);
                let upstream_id =
                    request.and_then(|r| self.forwarded.lock().unwrap_or_else(|p| p.into_inner()).get(&r).copied());
                let Some(upstream_id) = upstream_id else { return };
                let mut params = params.unwrap_or_else(|| json!({}));
                params["requestId"] = Json::from(upstream_id);
                message["params"] = params;
            }
            _ => {
                if let Some(params) = params {
                    message["params"] = params;
                }
            }
        }
        let _ = self.upstream().write(&message);
    }

    /// Answers one message that came over HTTP from `identity` (Streamable HTTP, [`crate::http`]): the response
    /// to a request (a JSON-RPC error for a message that is not one), `None` for a notification or a response.
    pub fn answer(&self, identity: &Identity, body: &[u8]) -> Option<Json> {
        match self.begin(identity, body, false) {
            Answering::Done(answer) => answer,
            Answering::Upstream(pending) => self.finish(pending),
        }
    }

    /// [`Proxy::answer`] up to the first wait on an upstream: a message answered without one is [`Answering::Done`]
    /// (a malformed message, a notification, `ping`, and a `tools/call` the policy does not allow, once every
    /// upstream's tools are known), anything else is handed back to be finished where blocking is allowed
    /// ([`Proxy::finish`]). Deciding does not wait on a disk either: the proxy's store commits without an fsync
    /// (WAL, `synchronous = NORMAL`). So the HTTP server answers denials and escalations on its async worker,
    /// without the hand-off to a blocking thread, which cost about 50-70 µs per call (bench/mcp, `--http`). (A stdio
    /// upstream that exits between that check and the decision is started again right there: a rare wait, as on the
    /// stdio reader thread of [`Proxy::call_tool_here`].)
    ///
    /// `stateless`: the message came in revision 2026-07-28 (an `InputRequiredResult` of the upstream is relayed to
    /// it, see [`for_earlier_agent`]).
    pub fn begin(&self, identity: &Identity, body: &[u8], stateless: bool) -> Answering {
        let (id, method, params) = match self.accept(identity, body) {
            // Over HTTP a refused notification is answered too: its status (400) is what says it was refused.
            Err(Refused { reply, .. }) => return Answering::Done(Some(reply)),
            Ok(None) => return Answering::Done(None),
            Ok(Some(accepted)) => accepted,
        };
        match method.as_str() {
            "ping" => Answering::Done(Some(response(&id, Ok(json!({}))))),
            "tools/call" if self.tools_known() => {
                match self.decide_call(identity, params.unwrap_or_else(|| json!({}))) {
                    Err(e) => Answering::Done(Some(response(&id, Err(e)))),
                    Ok(Call::Answered(result)) => Answering::Done(Some(response(&id, Ok(result)))),
                    Ok(Call::Forward(mut forward)) => {
                        if stateless {
                            forward.in_stateless_revision(identity);
                        }
                        Answering::Upstream(Pending(Waiting::Call { id, forward }))
                    }
                }
            }
            _ => Answering::Upstream(Pending(Waiting::Request { identity: identity.clone(), id, method, params })),
        }
    }

    /// [`Proxy::finish`] without a thread waiting, when [`Pending::answered_later`]: the allowed call is written to
    /// its stdio upstream here and `reply` is called with the response from the upstream's reader thread (or with an
    /// error response when it exits or the deadline passes), as the stdio proxy answers (see
    /// [`Proxy::call_tool_here`]); the outcome is logged after. Anything else is finished here, waiting.
    pub fn finish_then(self: &Arc<Self>, pending: Pending, reply: impl FnOnce(Option<Reply>) + Send + 'static) {
        match pending.0 {
            Waiting::Call { id, forward } if forward.upstream.http.is_none() => {
                self.forward_then(id, forward, move |line| reply(Some(Reply::Line(line.to_vec()))))
            }
            waiting => reply(self.finish(Pending(waiting)).map(Reply::Message)),
        }
    }

    /// [`Proxy::finish`] of a [`Pending::answered_async`] call on the async runtime: the call is POSTed to its HTTP
    /// upstream with no thread waiting on it ([`Client::send`]), its outcome logged, and the response
    /// returned: the upstream's result with the decision spliced in, as over stdio ([`Forward::answer`]), never
    /// parsed into a tree. Anything else is finished here as [`Proxy::finish`] does, waiting.
    pub async fn finish_async(&self, pending: Pending) -> Option<Reply> {
        match pending.0 {
            Waiting::Call { id, mut forward } if forward.upstream.http.is_some() => {
                let params = std::mem::take(&mut forward.params);
                let outcome = forward.upstream.request_async("tools/call", params).await;
                let answer = forward.answer(&id, outcome);
                self.keep_round(&forward, answer.asked);
                self.log_outcome(&answer.entry);
                Some(Reply::Line(answer.line))
            }
            waiting => self.finish(Pending(waiting)).map(Reply::Message),
        }
    }

    /// The rest of [`Proxy::begin`]'s answer: the wait on the upstream, and the response.
    pub fn finish(&self, pending: Pending) -> Option<Json> {
        Some(match pending.0 {
            Waiting::Call { id, mut forward } => {
                let params = std::mem::take(&mut forward.params);
                let outcome = forward.upstream.request("tools/call", Some(params));
                response(&id, self.finish_call(*forward, outcome))
            }
            Waiting::Request { identity, id, method, params } => {
                response(&id, self.request(&identity, &id, &method, params))
            }
        })
    }

    fn request(&self, identity: &Identity, id: &Json, method: &str, params: Option<Json>) -> Result<Json, RpcError> {
        match method {
            "initialize" => self.initialize(params),
            "ping" => Ok(json!({})),
            "tools/list" => self.list_tools(identity),
            "tools/call" => self.call_tool(identity, params.unwrap_or_else(|| json!({}))),
            // Served where the transport can keep a stream open: over stdio (`Proxy::run`) and as a POST of the
            // revision over HTTP (`mcp_http`); not the upstream's to answer (its stream would tag another id).
            "subscriptions/listen" => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("`subscriptions/listen` is of revision {STATELESS_VERSION}: send it in that revision"),
            )),
            _ => {
                let upstream = self.upstream();
                upstream.session()?;
                let key = id.to_string();
                let up = upstream.new_id();
                self.forwarded.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), up);
                let outcome = upstream.request_as(up, method, params);
                self.forwarded.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                outcome
            }
        }
    }

    fn initialize(&self, params: Option<Json>) -> Result<Json, RpcError> {
        let asked = params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Json::as_str);
        let Some(asked) = asked else {
            return Err(RpcError::new(INVALID_PARAMS, "`initialize` needs `params.protocolVersion`"));
        };
        let version = if SUPPORTED_VERSIONS.contains(&asked) { asked } else { PROTOCOL_VERSION };
        self.outbox.in_session.store(true, Ordering::Relaxed);
        let upstream = self.upstream().session()?;
        let capabilities = offered_capabilities(&upstream);
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {"name": "remit-mcp-proxy", "title": "remit (policy-governed MCP proxy)",
                           "version": env!("CARGO_PKG_VERSION")},
        });
        if let Some(instructions) = upstream.get("instructions") {
            result["instructions"] = instructions.clone();
        }
        Ok(result)
    }

    /// What `server/discover` (MCP 2026-07-28) tells about the server behind the proxy: the upstream's
    /// capabilities (with `tools`) and instructions, as [`Proxy::initialize`] does.
    pub fn discover(&self, versions: &[&str]) -> Result<Json, RpcError> {
        let upstream = self.upstream().session()?;
        let capabilities = offered_capabilities(&upstream);
        let mut result = json!({
            "supportedVersions": versions,
            "capabilities": capabilities,
            "_meta": {META_SERVER_INFO: {"name": "remit-mcp-proxy",
                      "title": "remit (policy-governed MCP proxy)", "version": env!("CARGO_PKG_VERSION")}},
        });
        if let Some(instructions) = upstream.get("instructions") {
            result["instructions"] = instructions.clone();
        }
        Ok(result)
    }

    /// Opens an agent's `subscriptions/listen` on a stream of the caller's ([`Outbox::listen`]).
    pub fn listen(&self, id: &Json, params: Option<&Json>, stream: Box<dyn AgentStream>) {
        self.outbox.listen(id, params, stream)
    }

    /// Tells a stream of the caller's of every tool-list change ([`Outbox::watch`]).
    pub fn watch(&self, stream: Box<dyn AgentStream>) {
        self.outbox.watch(stream)
    }

    /// The scopes a tool's declaration requires (`requires scope …`: any one of them will do), when the proxy has
    /// the policy's sources (a compiled module does not carry their names).
    pub fn tool_scopes(&self, tool: &str) -> Option<Vec<String>> {
        let policy = self.gateway.policy();
        let program = policy.program.as_ref()?;
        program.tool(tool).map(|t| program.tools[t].scopes.clone())
    }

    /// The `x-mcp-header` annotations of the tool `name` (MCP 2026-07-28), reading the upstreams' tools when they are
    /// not known yet; `None` for a tool no upstream offers (its call is an error anyway).
    pub fn param_headers(&self, name: &str) -> Option<Vec<crate::headers::ParamHeader>> {
        let (tools, _) = self.tools().ok()?;
        let tool = tools.iter().flat_map(|(_, list)| list.iter()).find(|t| tool_name(t) == Some(name))?;
        Some(tool.get("inputSchema").and_then(|s| param_headers(s).ok()).unwrap_or_default())
    }

    /// The tool names the module's listing shows the subject.
    fn visible(&self, identity: &Identity) -> Result<Vec<String>, RpcError> {
        let request = serde_json::to_vec(&Json::Object(identity.request(None))).expect("JSON serializes");
        let listing = self
            .gateway
            .visible_tools(&request)
            .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("the gateway's store is unavailable: {e}")))?;
        let listing: Json = serde_json::from_slice(&listing).unwrap_or(Json::Null);
        Ok(listing
            .get("visible")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .map(str::to_string)
            .collect())
    }

    /// Every upstream's tools (shared, not copied), and the names several offer (left out of listings and calls,
    /// reported once). With several upstreams one that fails is left out too (reported); the error when all fail.
    #[allow(clippy::type_complexity)]
    fn tools(&self) -> Result<(Vec<(usize, Arc<Vec<Json>>)>, Vec<String>), RpcError> {
        let mut tools = Vec::new();
        let mut failed = None;
        for index in 0..self.slots.len() {
            match self.slot_upstream(index).tools() {
                Ok(offered) => tools.push((index, offered)),
                Err(e) if self.slots.len() > 1 => {
                    let name = &self.slots[index].name;
                    eprintln!("remit mcp-proxy: the upstream `{name}` has no tools to offer: {}", e.message);
                    failed = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        if tools.is_empty() {
            if let Some(e) = failed {
                return Err(e);
            }
        }
        if tools.len() < 2 {
            return Ok((tools, Vec::new()));
        }
        let mut offered: HashMap<&str, Vec<usize>> = HashMap::new();
        for (index, list) in &tools {
            for name in list.iter().filter_map(tool_name) {
                offered.entry(name).or_default().push(*index);
            }
        }
        let mut collided = Vec::new();
        let mut reported = self.collisions.lock().unwrap_or_else(|p| p.into_inner());
        for (tool, slots) in offered.iter().filter(|(_, slots)| slots.len() > 1) {
            collided.push(tool.to_string());
            if reported.insert(tool.to_string()) {
                let names: Vec<String> = slots.iter().map(|i| format!("`{}`", self.slots[*i].name)).collect();
                eprintln!(
                    "remit mcp-proxy: the tool `{tool}` is offered by the upstreams {}: it is neither listed nor \
                     called (put each behind its own proxy)",
                    names.join(" and ")
                );
            }
        }
        drop(reported);
        Ok((tools, collided))
    }

    fn list_tools(&self, identity: &Identity) -> Result<Json, RpcError> {
        let (tools, collided) = self.tools()?;
        let visible = self.visible(identity)?;
        let shown: Vec<Json> = tools
            .iter()
            .flat_map(|(_, list)| list.iter())
            .filter(|t| {
                tool_name(t).is_some_and(|n| visible.iter().any(|v| v == n) && !collided.iter().any(|c| c == n))
            })
            .cloned()
            .collect();
        Ok(json!({"tools": shown}))
    }

    fn call_tool(&self, identity: &Identity, params: Json) -> Result<Json, RpcError> {
        match self.decide_call(identity, params)? {
            Call::Answered(result) => Ok(result),
            Call::Forward(mut forward) => {
                let params = std::mem::take(&mut forward.params);
                let outcome = forward.upstream.request("tools/call", Some(params));
                self.finish_call(*forward, outcome)
            }
        }
    }

    /// Answers `tools/call` request `id` to the agent: decided on this thread, and when it is allowed, forwarded
    /// to its stdio upstream and answered from that upstream's reader thread — no hand-off to another thread on the
    /// way there or back. Only when [`Proxy::ready_here`]: a call that may have to wait for the upstream before it
    /// can be decided (a tool list not read yet, an upstream to start again) or goes to an HTTP upstream is a
    /// worker's.
    fn call_tool_here(self: &Arc<Self>, id: &Json, params: Option<Json>, stateless: bool) {
        let params = params.unwrap_or_else(|| json!({}));
        match self.decide_call(&self.identity, params) {
            Err(e) => self.outbox.send(&response(id, Err(e))),
            Ok(Call::Answered(result)) if stateless => {
                self.outbox.send(&response(id, Ok(crate::http::stateless_result("tools/call", result))))
            }
            Ok(Call::Answered(result)) => self.outbox.send(&response(id, Ok(result))),
            Ok(Call::Forward(mut forward)) => {
                if stateless {
                    forward.in_stateless_revision(&self.identity);
                }
                let proxy = self.clone();
                self.forward_then(id.clone(), forward, move |line| proxy.outbox.send_line(line));
            }
        }
    }

    /// Writes an allowed call to its stdio upstream; `reply` gets the response line (`id`'s, the decision spliced in)
    /// from the upstream's reader thread, or an error response when it exits or the deadline passes. What only the
    /// answer needs (the decision as the result carries it) is made while the upstream works, and the outcome is
    /// logged after `reply` (the agent has its answer first).
    fn forward_then(self: &Arc<Self>, id: Json, mut forward: Box<Forward>, reply: impl FnOnce(&[u8]) + Send + 'static) {
        let upstream = forward.upstream.clone();
        let params = std::mem::take(&mut forward.params);
        let forward = Arc::<Forward>::from(forward);
        let (proxy, allowed) = (self.clone(), forward.clone());
        let in_flight = InFlight::new(self);
        upstream.request_then(
            "tools/call",
            params,
            Box::new(move |outcome| {
                let _in_flight = in_flight;
                let answer = allowed.answer(&id, outcome);
                // Kept before the agent has the question, so that its answer finds the round.
                proxy.keep_round(&allowed, answer.asked);
                reply(&answer.line);
                proxy.log_outcome(&answer.entry);
            }),
        );
        forward.meta();
    }

    /// Whether a `tools/call` can be decided and forwarded without waiting for an upstream (see
    /// [`Proxy::call_tool_here`]): every upstream is a running stdio one whose tools are known.
    fn ready_here(&self) -> bool {
        self.slots.iter().all(|slot| slot.current.lock().unwrap_or_else(|p| p.into_inner()).upstream.http.is_none())
            && self.tools_known()
    }

    /// Whether a `tools/call` can be decided without waiting for an upstream: every upstream is running (none to
    /// start again) and its tools are known.
    pub fn tools_known(&self) -> bool {
        self.slots.iter().all(|slot| {
            let current = slot.current.lock().unwrap_or_else(|p| p.into_inner());
            let upstream = &current.upstream;
            upstream.gone().is_none() && upstream.tools.lock().unwrap_or_else(|p| p.into_inner()).is_some()
        })
    }

    /// Decides a `tools/call`: the agent's answer when it is not forwarded (a deny, an escalation), else what to
    /// forward.
    fn decide_call(&self, identity: &Identity, params: Json) -> Result<Call, RpcError> {
        let Some(name) = params.get("name").and_then(Json::as_str) else {
            return Err(RpcError::new(INVALID_PARAMS, "`tools/call` needs `params.name`, a string"));
        };
        let empty = json!({});
        let arguments = params.get("arguments").unwrap_or(&empty);
        if !arguments.is_object() {
            return Err(RpcError::new(INVALID_PARAMS, "`params.arguments` must be an object"));
        }
        let (tools, collided) = self.tools()?;
        let offering = tools.iter().find(|(_, list)| list.iter().any(|t| tool_name(t) == Some(name))).map(|t| t.0);
        let several = collided.iter().any(|c| c == name);
        let Some(index) = offering.filter(|_| !several) else {
            let why = if several { "several upstream servers offer it" } else { "the upstream server has none" };
            return Err(RpcError::new(INVALID_PARAMS, format!("unknown tool: `{name}` ({why})")));
        };
        drop(tools);
        let upstream = self.slot_upstream(index);
        let request = identity.request(Some((name, arguments)));
        // Maybe a later round of a call the proxy allowed, whose upstream asked for input first (see `round_of`).
        let decided = match params.get("requestState") {
            Some(state) => {
                self.gateway.decide_continuing(request, &round_key(&round_of(identity, name, arguments), state))
            }
            // The decision's entry may wait for the writer thread when it changes nothing else (see
            // `Gateway::decide_deferring`): the proxy flushes the queue within moments and at exit.
            None => self.gateway.decide_request_deferring(request),
        };
        if !decided.allowed() {
            let decision: Json = serde_json::from_str(&decided.decision).unwrap_or(Json::Null);
            let text = refusal_text(&decided, &decision);
            let mut result = json!({"content": [{"type": "text", "text": text}], "isError": true});
            let mut meta = Map::with_capacity(1);
            meta.insert(META_DECISION.into(), decision_meta(&decided, decision));
            result["_meta"] = Json::Object(meta);
            return Ok(Call::Answered(result));
        }
        let tool = name.to_string();
        let meta = Default::default();
        Ok(Call::Forward(Box::new(Forward { upstream, params, decided, tool, meta, stateless: false, caller: None })))
    }

    /// Logs how a forwarded call went (its `outcome` entry) and adds the decision to the upstream's result.
    fn finish_call(&self, forward: Forward, outcome: Result<Json, RpcError>) -> Result<Json, RpcError> {
        let entry = forward.outcome_entry(outcome.as_ref().map(|r| (is_error(r), result_type(r))));
        let asked = match &outcome {
            Ok(result) => result.get("requestState").filter(|_| result_type(result) == Some(INPUT_REQUIRED)).cloned(),
            Err(e) => forward.retried_after(e),
        };
        self.keep_round(&forward, asked);
        self.log_outcome(&entry);
        let mut result = outcome?;
        if let Some(result) = result.as_object_mut() {
            let slot = result.entry("_meta").or_insert_with(|| json!({}));
            if let Some(slot) = slot.as_object_mut() {
                slot.insert(META_DECISION.into(), serde_json::from_str(forward.meta()).unwrap_or(Json::Null));
            }
        }
        Ok(result)
    }

    /// When the upstream asked for input (the agent of the stateless revision gets `requestState` `asked`), keeps
    /// what the call carried out for the agent's next round ([`round_of`]); nothing when it carried out nothing.
    fn keep_round(&self, forward: &Forward, asked: Option<Json>) {
        let carried = &forward.decided.carried;
        let (Some(caller), Some(state)) = (&forward.caller, asked) else { return };
        if carried == &Default::default() {
            return;
        }
        let call = round_of(&caller.identity, &forward.tool, &caller.arguments);
        if let Err(e) = self.gateway.keep_round(&round_key(&call, &state), carried) {
            let id = &forward.decided.id;
            eprintln!("remit mcp-proxy: the round of {id} is not kept ({e}): its next round is decided as a new call");
        }
    }

    /// Queues a forwarded call's `outcome` entry (written by the writer thread, or at once when the proxy stops).
    fn log_outcome(&self, entry: &Json) {
        self.gateway.queue_outcome(entry);
        if self.outcomes.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
            // Stopping: nobody flushes later.
            if let Err(e) = self.gateway.flush_entries() {
                eprintln!("remit mcp-proxy: the outcome of {} is not in the log: {e}", entry["decision"]);
            }
        }
    }
}

/// The stops the proxy last saw (with ids or without), and the store's version then. A stop, or its end, hides or
/// shows tools in what the module lists for an agent (the rest of the state — facts, counters, approvals — is left to
/// the decision of each call), so a change is a change of the tool list the agents see, wherever it was made: the
/// inbox's admin API in this process, `remit admin`, another process writing the same store. Checked by the
/// proxy's writer thread every 50 ms; the stops are read again only when the store's version changed (every read
/// when the store cannot tell its version).
#[derive(Default)]
struct StopWatch {
    version: Option<u64>,
    seen: Option<(Vec<String>, Vec<remit_gateway::store::StopRecord>)>,
}

impl StopWatch {
    /// Whether the stops differ from those seen last (not at the first look).
    fn changed(&mut self, store: &dyn remit_gateway::store::Store) -> bool {
        let version = store.version();
        if version.is_some() && version == self.version {
            return false;
        }
        let Ok(state) = store.begin_read().and_then(|mut tx| tx.decision_state()) else { return false };
        self.version = version;
        let now = (state.stops, state.records);
        let before = self.seen.replace(now.clone());
        before.is_some_and(|before| before != now)
    }
}

/// The result type of revision 2026-07-28 that asks the client for input (elicitation, sampling, roots) before the
/// server answers: the client answers in `inputResponses` when it sends the same request again.
pub const INPUT_REQUIRED: &str = "input_required";

/// The error an agent gets for an upstream result the proxy does not relay to it.
fn not_relayed(result_type: &str) -> RpcError {
    let why =
        format!("the upstream server answered with a `{result_type}` result, which remit mcp-proxy does not relay");
    let why = match result_type {
        INPUT_REQUIRED => format!("{why} to a client of the revisions before {STATELESS_VERSION}"),
        _ => why,
    };
    RpcError::new(INTERNAL_ERROR, why)
}

/// `outcome` for an agent of the revisions before 2026-07-28: an `InputRequiredResult` (`resultType:
/// input_required`) is an error, since such an agent cannot answer it (it would take the result for a final one).
/// An agent of 2026-07-28 gets it as it came, and sends the request again with its answers.
pub fn for_earlier_agent(outcome: Result<Json, RpcError>) -> Result<Json, RpcError> {
    match outcome {
        Ok(result) if result_type(&result) == Some(INPUT_REQUIRED) => Err(not_relayed(INPUT_REQUIRED)),
        outcome => outcome,
    }
}

/// [`for_earlier_agent`] of a whole response.
pub fn response_for_earlier_agent(answer: Json) -> Json {
    match answer.get("result") {
        Some(result) if result_type(result) == Some(INPUT_REQUIRED) => {
            response(answer.get("id").unwrap_or(&Json::Null), Err(not_relayed(INPUT_REQUIRED)))
        }
        _ => answer,
    }
}

/// A result's `resultType` (revision 2026-07-28).
fn result_type(result: &Json) -> Option<&str> {
    result.get("resultType").and_then(Json::as_str)
}

/// Whether a tool result says it failed (`isError`).
fn is_error(result: &Json) -> bool {
    result.get("isError").and_then(Json::as_bool).unwrap_or(false)
}

/// The decision as a result's `_meta` carries it: its id, outcome, remit's decision JSON and the access request.
fn decision_meta(decided: &remit_gateway::core::Decided, decision: Json) -> Json {
    let mut meta = Map::with_capacity(4);
    meta.insert("id".into(), Json::from(decided.id.as_str()));
    meta.insert("outcome".into(), Json::from(decided.outcome.as_str()));
    meta.insert("decision".into(), decision);
    if let Some(access) = &decided.access_request {
        meta.insert(
            "access_request".into(),
            json!({"id": access.id, "url": access.url,
                   "expires_at": remit_lang::value::format_timestamp(access.expires_at)}),
        );
    }
    Json::Object(meta)
}

/// An answer to the agent: a message, or one written as a line already (an upstream's result with the decision
/// spliced in, [`Forward::answer`]).
#[derive(Debug)]
pub enum Reply {
    Message(Json),
    Line(Vec<u8>),
}

impl Reply {
    /// The line as it is when it is a response with a result (sent without being parsed), else the message (a line
    /// that is an error response is parsed: its code can decide an HTTP status).
    pub fn result_line(self) -> Result<Vec<u8>, Json> {
        match self {
            Reply::Message(message) => Err(message),
            Reply::Line(line) => match serde_json::from_slice::<Head>(&line) {
                Ok(Head { result: Some(_), error: None, .. }) => Ok(line),
                _ => Err(serde_json::from_slice(&line).unwrap_or(Json::Null)),
            },
        }
    }
}

/// The rest of a line after its `start`: `start`, then `rest` up to and including the line's end (then nothing).
struct LineRest<'a, R> {
    start: &'a [u8],
    rest: &'a mut R,
    ended: bool,
}

impl<R: BufRead> std::io::Read for LineRest<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if !self.start.is_empty() {
            let n = self.start.len().min(out.len());
            out[..n].copy_from_slice(&self.start[..n]);
            self.start = &self.start[n..];
            return Ok(n);
        }
        if self.ended {
            return Ok(0);
        }
        let available = self.rest.fill_buf()?;
        let line_end = available.iter().position(|b| *b == b'\n').map(|at| at + 1);
        let n = line_end.unwrap_or(available.len()).min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.rest.consume(n);
        self.ended = n == 0 || line_end == Some(n);
        Ok(n)
    }
}

/// A message [`Proxy::accept`] does not take: the error response, and whether to send it over stdio (not to a request
/// sent as a notification, which JSON-RPC never answers).
struct Refused {
    reply: Json,
    answer: bool,
}

impl Refused {
    fn answer(reply: Json) -> Refused {
        Refused { reply, answer: true }
    }
}

/// Whether a message with `method` is a request, which the agent must send with an id: every method but the
/// notifications (`notifications/…`: `initialized`, `cancelled`, `progress`, `roots/list_changed`, …), whatever
/// the method (MCP's requests — `tools/call`, `tools/list`, `resources/read`, `prompts/get`, … — and any other).
fn is_request_method(method: &str) -> bool {
    !method.starts_with("notifications/")
}

/// [`Proxy::begin`]'s outcome.
#[derive(Debug)]
pub enum Answering {
    /// Answered without waiting on an upstream (`None`: nothing to answer, a notification or a response).
    Done(Option<Json>),
    /// To be finished by [`Proxy::finish`], which waits on an upstream.
    Upstream(Pending),
}

/// A message [`Proxy::begin`] could not answer without waiting on an upstream.
pub struct Pending(Waiting);

impl Pending {
    /// Whether [`Proxy::finish_then`] answers it without a thread waiting: an allowed call to a stdio upstream.
    pub fn answered_later(&self) -> bool {
        matches!(&self.0, Waiting::Call { forward, .. } if forward.upstream.http.is_none())
    }

    /// Whether [`Proxy::finish_async`] answers it without a thread waiting: an allowed call to an HTTP upstream.
    pub fn answered_async(&self) -> bool {
        matches!(&self.0, Waiting::Call { forward, .. } if forward.upstream.http.is_some())
    }
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.0 {
            Waiting::Call { id, .. } => format!("tools/call {id}"),
            Waiting::Request { id, method, .. } => format!("{method} {id}"),
        };
        f.debug_tuple("Pending").field(&what).finish()
    }
}

enum Waiting {
    /// An allowed `tools/call` (decided and logged) to forward.
    Call { id: Json, forward: Box<Forward> },
    /// Any other request, not begun.
    Request { identity: Identity, id: Json, method: String, params: Option<Json> },
}

/// A decided `tools/call`.
enum Call {
    /// Not forwarded: its result.
    Answered(Json),
    /// Allowed: to be forwarded.
    Forward(Box<Forward>),
}

/// An allowed call on its way to the upstream: the message's params, and what its outcome entry and result carry.
struct Forward {
    upstream: Arc<Upstream>,
    params: Json,
    decided: remit_gateway::core::Decided,
    tool: String,
    /// The decision as the result's `_meta` carries it ([`decision_meta`]), serialized: made once, by whichever
    /// comes first, the thread that forwarded the call (while the upstream works) or the upstream's answer.
    meta: std::sync::OnceLock<String>,
    /// A request of the stateless revision: the result says `resultType: complete` (see [`Forward::answer`]).
    stateless: bool,
    /// For a request of the stateless revision, the call its rounds belong to.
    caller: Option<Box<Caller>>,
}

/// Who made a call of the stateless revision, with which arguments ([`round_of`], worked out only when a round is
/// kept), and the `requestState` of the round it continues, if any.
struct Caller {
    identity: Identity,
    arguments: Json,
    continued: Option<Json>,
}

/// The agent's answer to a forwarded call ([`Forward::answer`]).
struct Answer {
    /// The response, one line.
    line: Vec<u8>,
    /// The call's outcome entry.
    entry: Json,
    /// The `requestState` the agent's next round will carry: that of an `input_required` result relayed to it, or,
    /// when the upstream refused a continued round ([`RpcError::refused_upstream`]: it did not run), the state that
    /// round came with (the agent may send it again, and it is still the same round: the round taken to decide it is
    /// kept again).
    asked: Option<Json>,
}

impl Forward {
    /// Marks a call that came in the stateless revision from `identity` (its upstream's `input_required` results are
    /// relayed, and their rounds kept).
    fn in_stateless_revision(&mut self, identity: &Identity) {
        self.stateless = true;
        let arguments = self.params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let continued = self.params.get("requestState").cloned();
        self.caller = Some(Box::new(Caller { identity: identity.clone(), arguments, continued }));
    }

    /// When the upstream refused this call with `error` ([`RpcError::refused_upstream`]: it did not run), the
    /// `requestState` of the round it continues, which the agent may send again: the round is kept again. Not after
    /// an error of the proxy's own, after which the call may have run.
    fn retried_after(&self, error: &RpcError) -> Option<Json> {
        let caller = self.caller.as_ref().filter(|_| error.refused_upstream)?;
        caller.continued.clone()
    }

    fn meta(&self) -> &str {
        self.meta.get_or_init(|| {
            let decided = &self.decided;
            // The decision goes in as the gateway wrote it (the module's output, or the gateway's own deny): checked
            // to be one JSON value, not parsed into a tree and serialized again.
            let meta = Meta {
                id: &decided.id,
                outcome: &decided.outcome,
                decision: serde_json::from_str(&decided.decision).ok(),
                access_request: decided.access_request.as_ref().map(|access| {
                    json!({"id": access.id, "url": access.url,
                           "expires_at": remit_lang::value::format_timestamp(access.expires_at)})
                }),
            };
            serde_json::to_string(&meta).expect("the decision's meta serializes")
        })
    }

    /// The `outcome` entry of the call: whether the tool failed (and the result's type when it is not a final one:
    /// `input_required`, the tool has not run yet), or the JSON-RPC error the upstream answered.
    fn outcome_entry(&self, outcome: Result<(bool, Option<&str>), &RpcError>) -> Json {
        let (decision, tool) = (&self.decided.id, &self.tool);
        match outcome {
            Ok((is_error, Some(result_type))) if result_type != "complete" => {
                json!({"decision": decision, "tool": tool, "is_error": is_error, "result_type": result_type})
            }
            Ok((is_error, _)) => json!({"decision": decision, "tool": tool, "is_error": is_error}),
            Err(e) => json!({"decision": decision, "tool": tool, "error": e.to_json()}),
        }
    }

    /// The agent's answer (one line) to request `id` from the upstream's `outcome`, and the call's outcome entry.
    /// The decision is spliced into the result's text as the upstream wrote it: `"_meta":{"remit.dev/decision":…}`
    /// added as its last member. A result that has `_meta` already (or is not an object) is parsed and serialized
    /// again, as [`Proxy::finish_call`] does.
    fn answer(&self, id: &Json, outcome: Result<RawResult, RpcError>) -> Answer {
        let result = match outcome {
            Err(e) => {
                let entry = self.outcome_entry(Err(&e));
                let asked = self.retried_after(&e);
                return Answer { line: line(&response(id, Err(e))), entry, asked };
            }
            Ok(RawResult(result)) => result,
        };
        let members = serde_json::from_str::<ResultHead>(&result);
        let declared = members.as_ref().ok().and_then(|head| head.result_type);
        let declared = declared.and_then(|t| serde_json::from_str::<String>(t.get()).ok());
        let input_required = declared.as_deref() == Some(INPUT_REQUIRED);
        if input_required && !self.stateless {
            // Logged as the upstream answered (the tool has not run), refused to the agent.
            let entry = self.outcome_entry(Ok((false, Some(INPUT_REQUIRED))));
            return Answer { line: line(&response(id, Err(not_relayed(INPUT_REQUIRED)))), entry, asked: None };
        }
        let state = members.as_ref().ok().and_then(|head| head.request_state);
        let asked = state.filter(|_| input_required).and_then(|state| serde_json::from_str(state.get()).ok());
        let result_type = declared.as_deref();
        // Over the stateless revision a result that says nothing of its type says `resultType: complete` (added as
        // `crate::http::stateless_result` adds it).
        let typed = |result_type: &Option<&RawValue>| result_type.is_none() && self.stateless;
        let spliced = match members {
            Ok(ResultHead { is_error, meta: None, result_type, .. }) if result.trim_start().starts_with('{') => {
                let add_type = typed(&result_type);
                let end = result.trim_end();
                let body = end[..end.len() - 1].trim_end();
                let comma = if body.trim_start().len() > 1 { "," } else { "" };
                let is_error = is_error.as_ref().and_then(|e| e.get().parse::<bool>().ok()).unwrap_or(false);
                Some((is_error, body, comma, add_type))
            }
            _ => None,
        };
        let Some((is_error, body, comma, add_type)) = spliced else {
            let parsed: Json = serde_json::from_str(&result).unwrap_or(Json::Null);
            let entry = self.outcome_entry(Ok((self::is_error(&parsed), result_type)));
            let mut parsed = parsed;
            if let Some(members) = parsed.as_object_mut() {
                let slot = members.entry("_meta").or_insert_with(|| json!({}));
                if let Some(slot) = slot.as_object_mut() {
                    slot.insert(META_DECISION.into(), serde_json::from_str(self.meta()).unwrap_or(Json::Null));
                }
            }
            if self.stateless {
                parsed = crate::http::stateless_result("tools/call", parsed);
            }
            return Answer { line: line(&response(id, Ok(parsed))), entry, asked };
        };
        let meta = self.meta();
        let mut out = Vec::with_capacity(result.len() + meta.len() + 96);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut out, id).expect("an id serializes");
        out.extend_from_slice(br#","result":"#);
        out.extend_from_slice(body.as_bytes());
        out.extend_from_slice(comma.as_bytes());
        if add_type {
            out.extend_from_slice(br#""resultType":"complete","#);
        }
        out.extend_from_slice(br#""_meta":{""#);
        out.extend_from_slice(META_DECISION.as_bytes());
        out.extend_from_slice(br#"":"#);
        out.extend_from_slice(meta.as_bytes());
        out.extend_from_slice(b"}}}\n");
        Answer { line: out, entry: self.outcome_entry(Ok((is_error, result_type))), asked }
    }
}

/// [`decision_meta`] with the decision's text as the gateway made it.
#[derive(serde::Serialize)]
struct Meta<'a> {
    id: &'a str,
    outcome: &'a str,
    decision: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    access_request: Option<Json>,
}

/// The members of a tool result the proxy looks at; the others are checked and skipped.
#[derive(serde::Deserialize)]
struct ResultHead<'a> {
    #[serde(rename = "isError", borrow, default, deserialize_with = "present")]
    is_error: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default, deserialize_with = "present")]
    meta: Option<&'a RawValue>,
    #[serde(rename = "resultType", borrow, default, deserialize_with = "present")]
    result_type: Option<&'a RawValue>,
    #[serde(rename = "requestState", borrow, default, deserialize_with = "present")]
    request_state: Option<&'a RawValue>,
}

/// A member that is there, `null` included (`Option`'s own reading takes `null` for absent).
fn present<'de, D: serde::Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    serde::Deserialize::deserialize(value).map(Some)
}

/// A message as one line to the agent.
fn line(message: &Json) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("a JSON value serializes");
    line.push(b'\n');
    line
}

/// Counts a call answered from an upstream's reader thread until its answer is sent and its outcome queued, so that
/// the proxy does not stop before (see [`Proxy::run`]).
struct InFlight(Arc<AtomicU64>);

impl InFlight {
    fn new(proxy: &Proxy) -> InFlight {
        proxy.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(proxy.in_flight.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The revisions `server/discover` names: the stateless one first, then those `initialize` accepts.
fn stateless_versions() -> Vec<&'static str> {
    let mut versions = vec![crate::http::STATELESS_VERSION];
    versions.extend(SUPPORTED_VERSIONS);
    versions
}

/// Whether a request that came over stdio is of the stateless revision 2026-07-28, whose requests need no
/// `initialize` before them: its `params._meta` names that revision, and must then carry the client's capabilities
/// too. Why it is refused: `server/discover` (answered by the proxy) needs the stateless `_meta`; `initialize` is not
/// part of that revision; a revision the proxy does not speak is `-32022` with those it does.
fn stateless_request(method: &str, params: Option<&Json>) -> Result<bool, RpcError> {
    use crate::http::UNSUPPORTED_VERSION;
    let meta = params.and_then(|p| p.get("_meta")).and_then(Json::as_object);
    let needs_meta = || {
        let text = format!("`params._meta` must carry `{META_VERSION}` and `{META_CAPABILITIES}`");
        RpcError::new(INVALID_PARAMS, text)
    };
    let Some(version) = meta.and_then(|m| m.get(META_VERSION)) else {
        return if method == "server/discover" { Err(needs_meta()) } else { Ok(false) };
    };
    let legacy = version.as_str().is_some_and(|v| SUPPORTED_VERSIONS.contains(&v));
    if version.as_str() != Some(STATELESS_VERSION) && !(legacy && method != "server/discover") {
        let shown = version.as_str().map_or_else(|| version.to_string(), str::to_string);
        let mut error = RpcError::new(UNSUPPORTED_VERSION, format!("protocol version `{shown}` is not supported"));
        error.data = Some(json!({"supported": stateless_versions(), "requested": version}));
        return Err(error);
    }
    if legacy {
        return Ok(false);
    }
    if !meta.and_then(|m| m.get(META_CAPABILITIES)).is_some_and(Json::is_object) {
        return Err(needs_meta());
    }
    if method == "initialize" {
        let text = format!("`initialize` is not part of MCP {STATELESS_VERSION}: use `server/discover`");
        return Err(RpcError::new(METHOD_NOT_FOUND, text));
    }
    Ok(true)
}

/// A tool's `name`.
fn tool_name(tool: &Json) -> Option<&str> {
    tool.get("name").and_then(Json::as_str)
}

/// What the agent reads when a call is denied or escalated.
fn refusal_text(decided: &remit_gateway::core::Decided, decision: &Json) -> String {
    let strings = |key: &str| -> Vec<String> {
        decision
            .get(key)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .map(str::to_string)
            .collect()
    };
    let rules: Vec<String> =
        decision.get("rules").and_then(Json::as_array).into_iter().flatten().map(rule_text).collect();
    // What kept each mandate's closest grant from granting (`rule.unmatched`): what the agent could change.
    let closest: Vec<String> = decision
        .get("rules")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("closest"))
        .map(|grant| {
            let failed = grant.get("failed").map(|failed| {
                let text = |k: &str| failed.get(k).and_then(Json::as_str).unwrap_or("");
                match failed.get("value") {
                    Some(value) => {
                        format!(": `{}` is {value}, and the grant needs `{}`", text("attribute"), text("condition"))
                    }
                    None => format!(": the grant needs `{}`", text("condition")),
                }
            });
            format!("closest grant: {}{}", rule_text(grant), failed.unwrap_or_default())
        })
        .collect();
    let mut lines = Vec::new();
    match &decided.access_request {
        Some(access) => {
            let to = decision.get("escalate_to").and_then(Json::as_str).unwrap_or("the principal");
            lines.push(format!(
                "remit escalated this call: it waits for {to} as access request {} ({}, open until {}). \
                 Once it is approved, make the same call again; a call with other arguments needs its own approval.",
                access.id,
                access.url,
                remit_lang::value::format_timestamp(access.expires_at)
            ));
            let missing: Vec<String> = decision
                .get("missing_approvals")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("kind").and_then(Json::as_str))
                .map(str::to_string)
                .collect();
            if !missing.is_empty() {
                lines.push(format!("missing approvals: {}", missing.join(", ")));
            }
        }
        None => lines.push("remit denied this call.".to_string()),
    }
    lines.push(format!("reasons: {}", strings("reasons").join(", ")));
    if !rules.is_empty() {
        lines.push(format!("rules: {}", rules.join("; ")));
    }
    lines.extend(closest);
    lines.push(format!("decision {} under policy {}", decided.id, decided.policy));
    lines.join("\n")
}

/// A rule of a decision in words: `mandate: `rule` (at)`, and the attribute a fail-closed rule could not read.
fn rule_text(rule: &Json) -> String {
    let text = |k: &str| rule.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    let mut said = format!("{}: `{}` ({})", text("mandate"), text("rule"), text("at"));
    if let Some(unevaluable) = rule.get("unevaluable") {
        let attribute = unevaluable.get("attribute").and_then(Json::as_str).unwrap_or("");
        let problem = match unevaluable.get("problem").and_then(Json::as_str).unwrap_or("") {
            "missing" => "is missing",
            "mistyped" => "is not of its type",
            "incomparable" => "is in another currency than the policy's",
            "unsafe-path" => "is not a path that stays under its prefix",
            _ => "could not be read",
        };
        said.push_str(&format!(", which fails closed: `{attribute}` {problem}"));
    }
    said
}

/// The capabilities the proxy announces for the upstream session `upstream` (its `initialize` result): the
/// upstream's, always an object and always with `tools` (the proxy lists tools even for a server that has none).
fn offered_capabilities(upstream: &Json) -> Json {
    let mut capabilities = upstream.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    if !capabilities.is_object() {
        capabilities = json!({});
    }
    if capabilities.get("tools").is_none() {
        capabilities["tools"] = json!({});
    }
    capabilities
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_the_agent_closed_are_dropped_when_another_opens() {
        let outbox = Outbox::new(Box::new(std::io::sink()));
        let tools = json!({"notifications": {"toolsListChanged": true}});
        let mut kept = Vec::new();
        for i in 0..4 {
            let (sender, mut messages) = tokio::sync::mpsc::unbounded_channel::<Json>();
            outbox.listen(&json!(i), Some(&tools), Box::new(sender));
            let ack = messages.try_recv().unwrap();
            assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], i);
            if i % 2 == 0 {
                kept.push(messages);
            }
        }
        // A stream that asks for nothing the proxy honours is acknowledged and not kept.
        let (sender, mut messages) = tokio::sync::mpsc::unbounded_channel::<Json>();
        outbox.listen(
            &json!("prompts"),
            Some(&json!({"notifications": {"promptsListChanged": true}})),
            Box::new(sender),
        );
        assert_eq!(messages.try_recv().unwrap()["params"]["notifications"], json!({}));
        let (sender, watched) = tokio::sync::mpsc::unbounded_channel::<Json>();
        outbox.watch(Box::new(sender));
        // Streams 1 and 3 were closed: dropped when the watch opened.
        assert_eq!(outbox.listeners.lock().unwrap().len(), 3);
        outbox.tools_changed();
        for (messages, id) in kept.iter_mut().zip([0, 2]) {
            let changed = messages.try_recv().unwrap();
            assert_eq!(changed["method"], "notifications/tools/list_changed");
            assert_eq!(changed["params"]["_meta"][META_SUBSCRIPTION_ID], id);
        }
        drop(watched);
        outbox.tools_changed();
        assert_eq!(outbox.listeners.lock().unwrap().len(), 2, "a stream gone when a change is sent is dropped too");
    }

    fn forward(decision: &str) -> Forward {
        let decided = remit_gateway::core::Decided {
            id: "dec-1".into(),
            decision: decision.into(),
            outcome: "allow".into(),
            reasons: Vec::new(),
            access_request: None,
            logged: None,
            policy: "p".into(),
            shadowed: None,
            carried: Default::default(),
        };
        let upstream = Upstream::new(None, None, None, Duration::from_secs(1));
        Forward {
            upstream,
            params: Json::Null,
            decided,
            tool: "t".into(),
            meta: Default::default(),
            stateless: false,
            caller: None,
        }
    }

    /// The agent's answer spliced from the upstream's text is the answer the proxy would make by parsing the result
    /// and adding the decision to it: same JSON, same outcome entry, whatever the result's shape.
    #[test]
    fn a_spliced_answer_is_the_parsed_and_rebuilt_one() {
        let decision = r#"{"decision":"allow","reasons":["rule.allowed"],"obligations":[],"n":1.50}"#;
        let results = [
            r#"{"content":[{"type":"text","text":"hello\n"}]}"#,
            r#"{"content":[],"isError":true}"#,
            r#"{"isError":false,"content":[]}"#,
            "{}",
            " { \n } ",
            r#" {"a": [1, 2.0, "\u00e9"], "b": {"c": null}} "#,
            r#"{"_meta":{"x":1},"content":[]}"#,
            r#"{"_meta":null}"#,
            r#"{"isError":"yes"}"#,
            r#"{"content":[],"resultType":"incomplete"}"#,
            r#"{"inputRequests":{"a":{"method":"elicitation/create","params":{}}},"requestState":"s","resultType":"input_required"}"#,
            r#"{"resultType":"input_required","requestState":"s","_meta":{"x":1}}"#,
            "[1,2]",
            "null",
            "\"text\"",
        ];
        for (result, stateless) in results.iter().flat_map(|r| [(*r, false), (*r, true)]) {
            let mut forward = forward(decision);
            forward.stateless = stateless;
            let id = json!(7);
            let Answer { line, entry, asked } = forward.answer(&id, Ok(RawResult(result.to_string())));
            assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'), "one line for {result}");
            let answer: Json = serde_json::from_slice(&line).unwrap_or_else(|e| panic!("{e}: {result}"));
            let asks = result.contains(r#""resultType":"input_required""#);
            let expected = if asks && !stateless {
                // Not for an agent of the earlier revisions: refused, logged as the upstream answered.
                let entry = json!({"decision": "dec-1", "tool": "t", "is_error": false, "result_type": INPUT_REQUIRED});
                (response(&id, Err(not_relayed(INPUT_REQUIRED))), entry)
            } else {
                let mut result: Json = serde_json::from_str(result).unwrap();
                let rebuilt = forward.outcome_entry(Ok((is_error(&result), result_type(&result))));
                if let Some(members) = result.as_object_mut() {
                    let slot = members.entry("_meta").or_insert_with(|| json!({}));
                    if let Some(slot) = slot.as_object_mut() {
                        let meta = json!({"id": "dec-1", "outcome": "allow",
                                          "decision": serde_json::from_str::<Json>(decision).unwrap()});
                        slot.insert(META_DECISION.into(), meta);
                    }
                }
                if stateless {
                    result = crate::http::stateless_result("tools/call", result);
                }
                (response(&id, Ok(result)), rebuilt)
            };
            assert_eq!((answer, entry), expected, "for {result} (stateless: {stateless})");
            if asks && stateless {
                assert_eq!(expected.0["result"]["resultType"], INPUT_REQUIRED, "relayed as it came");
                assert_eq!(expected.1["result_type"], INPUT_REQUIRED, "logged as asking");
                assert_eq!(asked, Some(json!("s")), "its request state, for the next round: {result}");
            } else {
                assert_eq!(asked, None, "only a relayed question has a next round: {result}");
            }
        }
        // An upstream's error is passed on, and logged as the outcome.
        let forward = forward(decision);
        let Answer { line, entry, .. } = forward.answer(&json!("a"), Err(RpcError::new(-32000, "broken")));
        let answer: Json = serde_json::from_slice(&line).unwrap();
        assert_eq!(answer, json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32000, "message": "broken"}}));
        assert_eq!(entry["error"]["message"], "broken");
    }

    /// A continued round's error leaves the round for the next try only when the upstream refused the call (it did
    /// not run): not after an error of the proxy's own, a timeout say, after which the call may have run upstream.
    #[test]
    fn only_a_refused_round_is_there_for_the_next_try() {
        let mut forward = forward(r#"{"decision":"allow"}"#);
        forward.params = json!({"name": "t", "arguments": {"a": 1}, "requestState": "s1"});
        let identity = Identity { subject: "agent:a".into(), credential: None, scopes: Vec::new(), mandate: None };
        forward.in_stateless_revision(&identity);
        let refused = RpcError::from_json(&json!({"code": -32602, "message": "bad answer"}));
        let timed_out = RpcError::new(INTERNAL_ERROR, "the upstream did not answer in time");
        assert!(refused.refused_upstream && !timed_out.refused_upstream);
        assert_eq!(forward.answer(&json!(1), Err(refused)).asked, Some(json!("s1")));
        assert_eq!(forward.answer(&json!(2), Err(timed_out)).asked, None);
        // A first round (no `requestState`) has no round to keep again.
        let mut first = self::forward(r#"{"decision":"allow"}"#);
        first.params = json!({"name": "t", "arguments": {}});
        first.in_stateless_revision(&identity);
        let refused = RpcError::from_json(&json!({"code": -32602, "message": "bad"}));
        assert_eq!(first.answer(&json!(3), Err(refused)).asked, None);
    }

    /// The async client's reading of an upstream's message, by its head only, takes what the reading as a tree takes:
    /// the same messages, the same results (as JSON), the same errors, whatever the shape; a stateless upstream's
    /// result of an unknown type refused, an `InputRequiredResult` kept.
    #[test]
    fn a_raw_answer_is_the_parsed_one() {
        let link = |url: &str| HttpLink {
            url: url.into(),
            session: Default::default(),
            version: Default::default(),
            outbox: Outbox::new(Box::new(std::io::sink())),
            client: Client::default(),
        };
        let upstream = Upstream::new(None, None, None, Duration::from_secs(1));
        let http = link("http://127.0.0.1:1/mcp");
        let messages = [
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"result":{"a":[1,2.50,"\u00e9"]},"id":7,"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":7}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no such method"}}"#,
            r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"7","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"id":7,"result":{"twice":true}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"later","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}"#,
            "[1,2]",
            "not json",
        ];
        for stateless in [false, true] {
            upstream.stateless.store(stateless, Ordering::Relaxed);
            for message in messages {
                let (mut tree, mut raw) = (None, None);
                let took = upstream.take_answer(&http, 7, message, &mut tree);
                assert_eq!(upstream.take_raw_answer(&http, 7, message, &mut raw), took, "{message}");
                let raw = raw.map(|outcome| outcome.map(|r| serde_json::from_str::<Json>(&r.0).unwrap()));
                let same = match (&tree, &raw) {
                    (Some(Err(a)), Some(Err(b))) => a.to_json() == b.to_json(),
                    (a, b) => format!("{a:?}") == format!("{b:?}"),
                };
                assert!(same, "{message} (stateless: {stateless}): {tree:?} against {raw:?}");
            }
        }
    }

    /// A decision text that is not one JSON value (never made by the gateway) is carried as `null`, not spliced.
    #[test]
    fn a_broken_decision_text_is_not_spliced() {
        let forward = forward(r#"{"decision":"allow"} trailing"#);
        let meta: Json = serde_json::from_str(forward.meta()).unwrap();
        assert_eq!(meta, json!({"id": "dec-1", "outcome": "allow", "decision": null}));
    }
}
