//! `remit mcp-proxy`: the gateway in front of MCP servers. To the agent the proxy is an MCP server (JSON-RPC 2.0,
//! protocol revision 2025-06-18, and 2026-07-28 for a request whose `_meta` names it: no `initialize` needed,
//! `server/discover`, typed results), over stdio (`stdio`) or Streamable HTTP (`http`); to each upstream server it is
//! an MCP client, over the upstream command's stdin/stdout or over Streamable HTTP (`upstream`). It is a front end of
//! [`Gateway`], like `remit_gateway::http`: every `tools/call` is decided by the gateway core (state, clock,
//! obligations, log, access requests) before anything reaches the upstream (`decision`), and `tools/list` shows
//! only the tools the module's listing lets the subject see (`tools`).
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
//! This module is what both fronts share: the [`Proxy`] (its upstreams, restarted when they exit; the outcome
//! entries' writer thread, which also watches the stops and the policy in force), a message accepted and routed,
//! and the answer to a message in two steps for the HTTP front ([`Proxy::begin`], then [`Proxy::finish`] or its
//! variants that wait on no thread). Depends on `protocol`, `outbox`, `upstream`, `decision`, `tools` and
//! `headers`; the fronts depend on it, never the other way round.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

use crate::decision::{decide, round_key, round_of, Call, Forward, Identity};
use crate::headers::{param_headers, ParamHeader};
use crate::outbox::{AgentStream, Outbox};
use crate::protocol::{
    is_error, is_request_method, offered_capabilities, response, result_type, tool_name, Head, RpcError,
    INPUT_REQUIRED, INVALID_PARAMS, INVALID_REQUEST, META_DECISION, META_SERVER_INFO, METHOD_NOT_FOUND, PARSE_ERROR,
    PROTOCOL_VERSION, STATELESS_VERSION, SUPPORTED_VERSIONS,
};
use crate::tools::Offered;
use crate::upstream::{Upstream, UpstreamOptions};
use remit_gateway::core::Gateway;

/// How soon a crashed upstream command is started again: at once after it ran a while, then after the first
/// backoff ([`UpstreamOptions::restart_backoff`]), twice that, four times … (at most [`MAX_BACKOFF`]) while it keeps
/// exiting within [`STABLE`] of its start.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

const STABLE: Duration = Duration::from_secs(30);

/// The upstream in use, and what restarting a stdio upstream after it exited needs.
pub(crate) struct Current {
    pub(crate) upstream: Arc<Upstream>,
    started: Instant,
    /// Restarts in a row of an upstream that did not stay up for [`STABLE`].
    quick_restarts: u32,
    /// No restart before this.
    not_before: Instant,
}

/// One upstream server behind the proxy.
pub(crate) struct Slot {
    /// Its name (`--upstream NAME=…`), for diagnostics.
    name: String,
    pub(crate) current: Mutex<Current>,
    /// The stdio upstream's command, to start it again after it exits; `None` for an HTTP upstream.
    command: Option<Vec<String>>,
}

/// The proxy: the gateway, the agent's identity, the upstreams and the way back to the agent.
pub struct Proxy {
    gateway: Arc<Gateway>,
    pub(crate) identity: Identity,
    /// The upstream servers; the first also serves everything but tools (resources, prompts, …).
    pub(crate) slots: Vec<Slot>,
    /// Tool names offered by several upstreams, already reported.
    collisions: Mutex<std::collections::BTreeSet<String>>,
    /// Outcome entries go into the log with the next batch of decisions (the decision's own entry was committed
    /// before the call was forwarded; this one only records how it went); dropping this sender stops the thread
    /// that writes those no batch took.
    outcomes: Mutex<Option<mpsc::Sender<Json>>>,
    outcome_writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    options: UpstreamOptions,
    pub(crate) outbox: Outbox,
    /// Agent request id (as JSON text) → the id it was forwarded under, for `notifications/cancelled`.
    forwarded: Mutex<HashMap<String, u64>>,
    /// Calls answered from an upstream's reader thread whose answer is not sent or whose outcome is not queued yet.
    pub(crate) in_flight: Arc<AtomicU64>,
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
    pub(crate) fn accept(
        &self,
        identity: &Identity,
        line: &[u8],
    ) -> Result<Option<(Json, String, Option<Json>)>, Refused> {
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

    /// Answers one message that came over HTTP from `identity` (Streamable HTTP, the `http` front): the response
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
    /// it, see [`crate::protocol::for_earlier_agent`]).
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
    /// upstream with no thread waiting on it ([`remit_gateway::client::Client::send`]), its outcome logged, and the response
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

    pub(crate) fn request(
        &self,
        identity: &Identity,
        id: &Json,
        method: &str,
        params: Option<Json>,
    ) -> Result<Json, RpcError> {
        match method {
            "initialize" => self.initialize(params),
            "ping" => Ok(json!({})),
            "tools/list" => self.list_tools(identity),
            "tools/call" => self.call_tool(identity, params.unwrap_or_else(|| json!({}))),
            // Served where the transport can keep a stream open: over stdio (`Proxy::run`) and as a POST of the
            // revision over HTTP (`crate::http`); not the upstream's to answer (its stream would tag another id).
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
    pub fn param_headers(&self, name: &str) -> Option<Vec<ParamHeader>> {
        let (tools, _) = self.tools().ok()?;
        let tool = tools.iter().flat_map(|(_, list)| list.iter()).find(|t| tool_name(t) == Some(name))?;
        Some(tool.get("inputSchema").and_then(|s| param_headers(s).ok()).unwrap_or_default())
    }

    /// Every upstream's tools (shared, not copied), and the names several offer (left out of listings and calls,
    /// reported once). With several upstreams one that fails is left out too (reported); the error when all fail.
    #[allow(clippy::type_complexity)]
    fn tools(&self) -> Result<(Offered, Vec<String>), RpcError> {
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
        let mut collided = Vec::new();
        let mut reported = self.collisions.lock().unwrap_or_else(|p| p.into_inner());
        for (tool, slots) in crate::tools::collisions(&tools) {
            if reported.insert(tool.clone()) {
                let names: Vec<String> = slots.iter().map(|i| format!("`{}`", self.slots[*i].name)).collect();
                eprintln!(
                    "remit mcp-proxy: the tool `{tool}` is offered by the upstreams {}: it is neither listed nor \
                     called (put each behind its own proxy)",
                    names.join(" and ")
                );
            }
            collided.push(tool);
        }
        drop(reported);
        Ok((tools, collided))
    }

    fn list_tools(&self, identity: &Identity) -> Result<Json, RpcError> {
        let (tools, collided) = self.tools()?;
        Ok(crate::tools::listing(&tools, &crate::tools::visible(&self.gateway, identity)?, &collided))
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

    /// Writes an allowed call to its stdio upstream; `reply` gets the response line (`id`'s, the decision spliced in)
    /// from the upstream's reader thread, or an error response when it exits or the deadline passes. What only the
    /// answer needs (the decision as the result carries it) is made while the upstream works, and the outcome is
    /// logged after `reply` (the agent has its answer first).
    pub(crate) fn forward_then(
        self: &Arc<Self>,
        id: Json,
        mut forward: Box<Forward>,
        reply: impl FnOnce(&[u8]) + Send + 'static,
    ) {
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
    pub(crate) fn decide_call(&self, identity: &Identity, params: Json) -> Result<Call, RpcError> {
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
        Ok(decide(&self.gateway, identity, params, upstream))
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

/// A message [`Proxy::accept`] does not take: the error response, and whether to send it over stdio (not to a request
/// sent as a notification, which JSON-RPC never answers).
pub(crate) struct Refused {
    pub(crate) reply: Json,
    pub(crate) answer: bool,
}

impl Refused {
    fn answer(reply: Json) -> Refused {
        Refused { reply, answer: true }
    }
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

/// Counts a call answered from an upstream's reader thread until its answer is sent and its outcome queued, so that
/// the proxy does not stop before (see [`Proxy::run`]).
pub(crate) struct InFlight(Arc<AtomicU64>);

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
