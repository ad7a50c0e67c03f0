//! The proxy's side of each upstream MCP server: a child process spoken to over its stdin/stdout, or a server
//! reached over Streamable HTTP at an `http://` or `https://` URL (through `remit_gateway::client`, the one HTTP
//! client: blocking for the threads that wait, async for a call forwarded from the HTTP front's worker). A session
//! with it (`initialize` in revision 2025-06-18, or the stateless revision 2026-07-28 after `server/discover`,
//! as `--upstream-revision` says), requests and their answers (renumbered ids, deadlines, cancellation), the tools it
//! lists (every page), and its own messages (notifications, requests to the client) passed to the agent through
//! the [`Outbox`]. `remit import mcp` reads a server's tools through it too ([`list_tools`]).
//!
//! Depends on `protocol`, `outbox` and `headers`; knows nothing of decisions or of the agent's transport.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value as Json};

use crate::headers::{encode_header_value, param_headers};
use crate::outbox::Outbox;
use crate::protocol::{
    name_param, not_relayed, request_message, response, tool_name, Head, LineRest, RawResult, ResultHead, RpcError,
    INPUT_REQUIRED, INTERNAL_ERROR, MAX_MESSAGE, META_CAPABILITIES, META_SERVER_INFO, META_SUBSCRIPTION_ID,
    META_VERSION, METHOD_NOT_FOUND, PROTOCOL_VERSION, STATELESS_VERSION,
};
use remit_gateway::client::{blocking, Client, Tls};

/// An upstream reached over Streamable HTTP: each message is one `POST` (on a kept connection when there is one), answered with JSON or
/// with an event stream that ends with the response.
pub(crate) struct HttpLink {
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
/// proxy answers from the upstream's reader thread (the stdio front's shorter way), a function that answers the agent.
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

/// How often a stdio upstream's requests answered by a function are checked against their deadline.
const DEADLINE_TICK: Duration = Duration::from_millis(100);

/// How long the cancellation of a call that timed out may take to reach an HTTP upstream before the agent is
/// answered anyway.
const CANCEL_WITHIN: Duration = Duration::from_secs(1);

/// The upstream MCP server: a child process spoken to over its stdin/stdout, or a server reached over HTTP.
pub(crate) struct Upstream {
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Option<Child>>,
    pub(crate) http: Option<HttpLink>,
    /// Requests sent up, waiting for their response.
    pending: Mutex<HashMap<u64, Waiter>>,
    /// Whether the thread that fails overdue [`Waiter::Then`] requests runs.
    sweeping: std::sync::atomic::AtomicBool,
    next_id: AtomicU64,
    /// Why the upstream is not running, once it is not.
    pub(crate) gone: Mutex<Option<String>>,
    /// The upstream's `initialize` result, once the session is open.
    session: Mutex<Option<Result<Json, RpcError>>>,
    /// The upstream's tools (every page), until it says the list changed.
    pub(crate) tools: Mutex<Option<Arc<Vec<Json>>>>,
    timeout: Duration,
    /// Not the first of several upstreams: its requests to the client (sampling, roots, elicitation) are refused by
    /// the proxy instead of reaching the agent, whose answers could not be told apart from the first upstream's.
    pub(crate) secondary: std::sync::atomic::AtomicBool,
    /// The revision to speak, as `--upstream-revision` says ([`Upstream::session`] chooses with it).
    pub(crate) revision: Mutex<UpstreamRevision>,
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

impl Upstream {
    /// Spawns `command` and starts the thread that reads it; its messages that are not responses go to `outbox`.
    pub(crate) fn spawn(command: &[String], outbox: Outbox, timeout: Duration) -> Result<Arc<Upstream>, String> {
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
    pub(crate) fn connect(url: &str, outbox: Outbox, timeout: Duration, tls: &Tls) -> Result<Arc<Upstream>, String> {
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
    pub(crate) fn new(
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

    pub(crate) fn gone(&self) -> Option<String> {
        self.gone.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn write(&self, message: &Json) -> Result<(), RpcError> {
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
    pub(crate) fn request(&self, method: &str, params: Option<Json>) -> Result<Json, RpcError> {
        self.request_as(self.new_id(), method, params)
    }

    pub(crate) fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// [`Upstream::request`] under an id from [`Upstream::new_id`].
    pub(crate) fn request_as(&self, id: u64, method: &str, params: Option<Json>) -> Result<Json, RpcError> {
        if let Some(why) = self.gone() {
            return Err(RpcError::new(INTERNAL_ERROR, why));
        }
        self.request_within(id, method, params, self.timeout)
    }

    /// [`Upstream::request`] to an HTTP upstream on the async runtime, no thread waiting ([`Upstream::post_async`]).
    pub(crate) async fn request_async(&self, method: &str, params: Json) -> Result<RawResult, RpcError> {
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
    pub(crate) fn request_then(
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
    pub(crate) fn session(&self) -> Result<Json, RpcError> {
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
    /// `input_required` (an `InputRequiredResult`, relayed to agents of that revision, see [`crate::protocol::for_earlier_agent`]).
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
    pub(crate) fn tools(&self) -> Result<Arc<Vec<Json>>, RpcError> {
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

    pub(crate) fn kill(&self) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
