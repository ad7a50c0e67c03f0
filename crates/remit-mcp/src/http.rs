//! `remit mcp-proxy --listen`: the proxy's agent side over MCP's Streamable HTTP transport (revision 2025-06-18)
//! instead of stdio. One endpoint, `/mcp`: `POST` carries one JSON-RPC message and is answered with one JSON
//! response (`application/json`; an SSE stream only for a `subscriptions/listen` of revision 2026-07-28, which stays
//! open), `202 Accepted` for a notification or a response; `GET` in a session opens the stream of server-initiated
//! messages (tool-list changes), `405` without one; `DELETE` ends a session.
//!
//! Identity comes from the bearer token: a configured agent token maps to a subject (`--agent-token SUBJECT=TOKEN`);
//! with a key set (`--jwks`, [`crate::auth`]) any other token must be a valid JWT, whose claims give the subject,
//! the credential and its scopes. A request without an accepted token is `401` with `WWW-Authenticate: Bearer` (with
//! a key set: `resource_metadata`, the URL of the OAuth protected resource metadata (RFC 9728) served at
//! `/.well-known/oauth-protected-resource/mcp`, and `error="invalid_token"` for a token that was refused). The token
//! never goes upstream: the upstream sees only the JSON-RPC message and the proxy's own headers. `initialize` opens a session (`Mcp-Session-Id`), bound
//! to the token's subject; later requests must carry it (`400` without, `404` for an unknown one or another
//! subject's). A request whose `Origin` is not a loopback origin is `403` (DNS rebinding), and an
//! `MCP-Protocol-Version` the proxy does not speak is `400` (`UnsupportedProtocolVersion`, -32022, with the versions
//! it does).
//!
//! The stateless revision 2026-07-28 (`MCP-Protocol-Version: 2026-07-28`) is served on the same endpoint: no
//! `initialize` and no session (`server/discover` instead); the `Mcp-Method` and `Mcp-Name` headers must match the
//! body (and `params._meta` carry the revision), else `400` with `HeaderMismatch` (-32020).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::FutureExt;
use serde_json::{json, Value as Json};

use crate::auth::JwtVerifier;
use crate::decision::Identity;
use crate::headers::{decode_header_value, ParamHeader};
use crate::protocol::{
    name_param, response_for_earlier_agent, stateless_result, INVALID_PARAMS, MAX_MESSAGE, META_CAPABILITIES,
    META_DECISION, META_VERSION, METHOD_NOT_FOUND, STATELESS_VERSION, SUPPORTED_VERSIONS, UNSUPPORTED_VERSION,
};
use crate::proxy::{Answering, Proxy, Reply};

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";
/// The prefix of the headers that mirror tool arguments (`Mcp-Param-{Name}`), lowercase as header names are read.
const PARAM_PREFIX: &str = "mcp-param-";

/// The JSON-RPC error of 2026-07-28 for headers that do not match the message.
pub const HEADER_MISMATCH: i64 = -32020;
/// The JSON-RPC error in the body of a `403 insufficient_scope` (remit's own code, in the range JSON-RPC leaves to
/// servers: MCP defines the HTTP status and the challenge, not a code).
pub const INSUFFICIENT_SCOPE: i64 = -32003;

/// Where metadata about the protected resource is published (RFC 9728, the path of `/mcp` inserted).
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// JWT bearer tokens: how they are checked and what the identity they give carries besides the claims.
#[derive(Debug)]
pub struct Bearer {
    pub verifier: JwtVerifier,
    /// The credential id when the token has no credential claim.
    pub credential: Option<String>,
    /// The mandate to act under (`--mandate`), for every token.
    pub mandate: Option<String>,
    /// The resource's URL (`http://ADDRESS/mcp`), the `resource` of the metadata.
    pub resource: String,
    /// The authorization servers the metadata names (by default the accepted issuers).
    pub authorization_servers: Vec<String>,
}

impl Bearer {
    fn metadata_url(&self) -> String {
        let origin = self.resource.strip_suffix("/mcp").unwrap_or(&self.resource);
        format!("{origin}{RESOURCE_METADATA_PATH}")
    }
}

struct App {
    proxy: Arc<Proxy>,
    /// Bearer token → who the agent is.
    agents: BTreeMap<String, Identity>,
    /// JWT bearer tokens, when a key set is configured.
    bearer: Option<Bearer>,
    /// Session id → the subject that opened it.
    sessions: Mutex<HashMap<String, String>>,
}

/// The `/mcp` endpoint for `agents` (bearer token → identity) and, with `bearer`, JWTs (and the resource metadata).
pub fn router(proxy: Arc<Proxy>, agents: BTreeMap<String, Identity>, bearer: Option<Bearer>) -> Router {
    let with_metadata = bearer.is_some();
    let app = Arc::new(App { proxy, agents, bearer, sessions: Mutex::new(HashMap::new()) });
    let mut router = Router::new().route("/mcp", post(post_mcp).get(get_mcp).delete(delete_mcp));
    if with_metadata {
        router = router
            .route(RESOURCE_METADATA_PATH, get(resource_metadata))
            .route("/.well-known/oauth-protected-resource", get(resource_metadata));
    }
    router.layer(DefaultBodyLimit::max(MAX_MESSAGE)).with_state(app)
}

/// OAuth 2.0 Protected Resource Metadata (RFC 9728), which MCP clients read to find the authorization server.
async fn resource_metadata(State(app): State<Arc<App>>) -> Response {
    let Some(bearer) = &app.bearer else { return StatusCode::NOT_FOUND.into_response() };
    let body = json!({
        "resource": bearer.resource,
        "authorization_servers": bearer.authorization_servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "remit mcp-proxy",
    });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn plain(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {"code": status.as_u16(), "message": message}}).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Whether an `Origin` is the loopback's (`http://localhost`, `http://127.0.0.1`, `http://[::1]`, any port).
fn loopback_origin(origin: &HeaderValue) -> bool {
    let Ok(origin) = origin.to_str() else { return false };
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else { return false };
    let host = if rest.starts_with('[') { rest.split(']').next().map(|h| format!("{h}]")) } else { None };
    let host = host.unwrap_or_else(|| rest.split(':').next().unwrap_or("").to_string());
    ["localhost", "127.0.0.1", "[::1]"].contains(&host.as_str())
}

/// The caller's identity, or the response refusing it.
#[allow(clippy::result_large_err)]
fn identify(app: &App, headers: &HeaderMap) -> Result<Identity, Response> {
    identify_how(app, headers).map(|(identity, _)| identity)
}

/// [`identify`], and whether the identity is a JWT's (whose holder can ask the authorization server for more
/// scopes: a call refused for want of one is challenged with `insufficient_scope`).
#[allow(clippy::result_large_err)]
fn identify_how(app: &App, headers: &HeaderMap) -> Result<(Identity, bool), Response> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !loopback_origin(origin) {
            return Err(plain(StatusCode::FORBIDDEN, "requests from another origin are refused"));
        }
    }
    let token = remit_gateway::http::bearer_token(headers);
    let found = token.and_then(|t| app.agents.iter().find(|(known, _)| remit_gateway::http::tokens_equal(known, t)));
    if let Some((_, identity)) = found {
        return Ok((identity.clone(), false));
    }
    let Some(bearer) = &app.bearer else {
        let mut response = plain(StatusCode::UNAUTHORIZED, "an agent's bearer token is required");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"remit\""));
        return Err(response);
    };
    let refused = match token {
        None => None,
        Some(token) => match bearer.verifier.verify(token, crate::auth::now()) {
            Ok(claims) => {
                let identity = Identity {
                    subject: claims.subject,
                    credential: claims.credential.or_else(|| bearer.credential.clone()),
                    scopes: claims.scopes,
                    mandate: bearer.mandate.clone(),
                };
                return Ok((identity, true));
            }
            Err(why) => Some(why),
        },
    };
    // RFC 6750 §3: no error code when no token was sent; `invalid_token` with the reason when one was refused.
    let mut challenge = format!("Bearer realm=\"remit\", resource_metadata=\"{}\"", bearer.metadata_url());
    let message = match &refused {
        Some(why) => {
            challenge.push_str(&format!(", error=\"invalid_token\", error_description=\"{why}\""));
            why.to_string()
        }
        None => "a bearer token is required".to_string(),
    };
    let mut response = plain(StatusCode::UNAUTHORIZED, &message);
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    Err(response)
}

/// A `tools/call` answer refused only because the JWT lacks a scope the tool requires, as the MCP authorization
/// spec's scope challenge (RFC 6750 §3.1): `403` with `WWW-Authenticate: Bearer error="insufficient_scope",
/// scope="…"` and the resource metadata, the body a JSON-RPC error carrying the refusal. `None` for anything else:
/// another answer, a deny with other reasons too (more scope would not make it an allow), a token that is not a JWT
/// (no authorization server to ask), a policy without sources (the module does not know the scopes' names), or a
/// scope that cannot be written in a challenge.
///
/// The scope challenged for is the first one the tool's `requires scope` lists: any one of them would do, and the
/// challenge names the scopes needed, so it names one, the declaration's order saying which.
fn scope_challenge(app: &App, jwt: bool, body: &[u8], answer: &Json) -> Option<Response> {
    let bearer = app.bearer.as_ref().filter(|_| jwt)?;
    let decision = answer.pointer("/result/_meta")?.get(META_DECISION)?;
    let reasons = decision.pointer("/decision/reasons")?.as_array()?;
    if decision.get("outcome")? != "deny" || reasons.len() != 1 || reasons[0] != "credential.scope-missing" {
        return None;
    }
    let message: Json = serde_json::from_slice(body).ok()?;
    let tool = message.pointer("/params/name")?.as_str()?;
    let scope = app.proxy.tool_scopes(tool)?.into_iter().next()?;
    // RFC 6750 §3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ); the description's characters are those and space.
    let token_char = |c: char| c == '!' || ('#'..='[').contains(&c) || (']'..='~').contains(&c);
    if scope.is_empty() || !scope.chars().all(token_char) {
        return None;
    }
    let description: String = format!("the token lacks the scope `{scope}` that the tool `{tool}` requires")
        .chars()
        .map(|c| if c == ' ' || token_char(c) { c } else { '?' })
        .collect();
    let challenge = format!(
        "Bearer realm=\"remit\", error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}\", \
         error_description=\"{description}\"",
        bearer.metadata_url()
    );
    let text = answer.pointer("/result/content/0/text").and_then(Json::as_str).unwrap_or("remit denied this call.");
    let error = json!({"code": INSUFFICIENT_SCOPE, "message": text,
                       "data": {"scope": scope, "_meta": {META_DECISION: decision}}});
    let mut response = rpc(StatusCode::FORBIDDEN, json!({"jsonrpc": "2.0", "id": answer.get("id"), "error": error}));
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_str(&challenge).ok()?);
    Some(response)
}

fn session_of(headers: &HeaderMap) -> Option<String> {
    headers.get(SESSION).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn post_mcp(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let (identity, jwt) = match identify_how(&app, &headers) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Some(version) = headers.get(VERSION) {
        let version = version.to_str().unwrap_or("");
        if version == STATELESS_VERSION {
            return stateless(app, (identity, jwt), &headers, body).await;
        }
        if !SUPPORTED_VERSIONS.contains(&version) {
            let id = serde_json::from_slice::<Json>(&body).ok().and_then(|m| m.get("id").cloned());
            let mut supported = vec![STATELESS_VERSION];
            supported.extend(SUPPORTED_VERSIONS);
            let error = json!({"code": UNSUPPORTED_VERSION,
                               "message": format!("protocol version `{version}` is not supported"),
                               "data": {"supported": supported, "requested": version}});
            return rpc(StatusCode::BAD_REQUEST, json!({"jsonrpc": "2.0", "id": id, "error": error}));
        }
    }
    let initialize = method_of(&body).as_deref() == Some("initialize");
    if !initialize {
        let Some(session) = session_of(&headers) else {
            return plain(StatusCode::BAD_REQUEST, "the `Mcp-Session-Id` header is missing: `initialize` first");
        };
        let owner = app.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&session).cloned();
        if owner.as_deref() != Some(identity.subject.as_str()) {
            return plain(StatusCode::NOT_FOUND, "no such session: `initialize` again");
        }
    }
    let subject = identity.subject.clone();
    let answer = match answer_message(&app, &identity, &body, false).await {
        Some(answer) => answer,
        None => return plain(StatusCode::INTERNAL_SERVER_ERROR, "the proxy failed"),
    };
    let Some(answer) = answer else { return StatusCode::ACCEPTED.into_response() };
    // A forwarded call's result (never a challenge, an `initialize` or an error) as the proxy wrote it.
    let answer = match answer.result_line() {
        Ok(line) => return result_line(line),
        Err(answer) => answer,
    };
    if let Some(challenge) = scope_challenge(&app, jwt, &body, &answer) {
        return challenge;
    }
    // A session is of the revisions before 2026-07-28: it cannot answer an `InputRequiredResult`.
    let answer = response_for_earlier_agent(answer);
    let malformed = answer.get("id").is_some_and(Json::is_null) && answer.get("error").is_some();
    let status = if malformed { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response();
    if initialize && answer.get("result").is_some() {
        let session = remit_gateway::core::new_id("mcp");
        app.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(session.clone(), subject);
        if let Ok(value) = HeaderValue::from_str(&session) {
            response.headers_mut().insert(SESSION, value);
        }
    }
    response
}

/// A message's `method` when it is a JSON object with a string `method` (its other members skipped, not built:
/// the proxy parses the message again to answer it).
fn method_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
    }
    serde_json::from_slice::<Message>(body).ok()?.method
}

/// [`Proxy::answer`] on this async worker: what needs no upstream (a decision that is not forwarded) at once; an
/// allowed call awaited without a thread waiting (to a stdio upstream [`Proxy::finish_then`]: the upstream's reader
/// thread answers; to an HTTP one [`Proxy::finish_async`]); any other wait on an upstream in [`blocking`]. `None`
/// when it panicked (the request is answered `500`).
async fn answer_message(app: &App, identity: &Identity, body: &[u8], stateless: bool) -> Option<Option<Reply>> {
    let proxy = &app.proxy;
    match guarded(|| proxy.begin(identity, body, stateless))? {
        Answering::Done(answer) => Some(answer.map(Reply::Message)),
        Answering::Upstream(pending) if pending.answered_later() => {
            let (send, answered) = tokio::sync::oneshot::channel();
            proxy.finish_then(pending, move |answer| {
                let _ = send.send(answer);
            });
            answered.await.ok()
        }
        Answering::Upstream(pending) if pending.answered_async() => {
            std::panic::AssertUnwindSafe(proxy.finish_async(pending)).catch_unwind().await.ok()
        }
        Answering::Upstream(pending) => blocking(|| proxy.finish(pending).map(Reply::Message)),
    }
}

/// A response with a result, written as a line already: sent as it is.
fn result_line(mut line: Vec<u8>) -> Response {
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], line).into_response()
}

/// Runs `work` (which never waits on an upstream) here; `None` when it panicked.
fn guarded<R>(work: impl FnOnce() -> R) -> Option<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).ok()
}

/// Runs the proxy's blocking work (a call upstream) on this worker thread, the runtime moving its other tasks to
/// another meanwhile: handing it to the blocking pool cost a thread wake-up per request. `None` when it panicked
/// (the request is answered `500`, as a failed blocking task was).
fn blocking<R>(work: impl FnOnce() -> R) -> Option<R> {
    tokio::task::block_in_place(|| guarded(work))
}

fn rpc(status: StatusCode, message: Json) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], message.to_string()).into_response()
}

/// A POST of the stateless revision (2026-07-28): the headers checked against the body (`400` with `HeaderMismatch`
/// when they differ or are missing), then the message answered as any other, without a session; results tagged
/// `resultType: complete`, and cacheable ones `ttlMs: 0`, `cacheScope: private` (a listing is decided per caller and
/// can change with the gateway's state).
async fn stateless(app: Arc<App>, identity: (Identity, bool), headers: &HeaderMap, body: Bytes) -> Response {
    let message = match serde_json::from_slice::<Json>(&body) {
        Ok(Json::Object(message)) => message,
        // Not a JSON-RPC object: the proxy's own error answer.
        _ => return answer(app, identity, body, None, Vec::new()).await,
    };
    let (Some(id), Some(method)) = (message.get("id").cloned(), message.get("method").and_then(Json::as_str)) else {
        // A notification (or a malformed message): nothing to route, as in the earlier revisions.
        return answer(app, identity, body, None, Vec::new()).await;
    };
    let refuse = |status: StatusCode, code: i64, text: String, data: Option<Json>| {
        let mut error = json!({"code": code, "message": text});
        if let Some(data) = data {
            error["data"] = data;
        }
        rpc(status, json!({"jsonrpc": "2.0", "id": id, "error": error}))
    };
    let mismatch = |text: String| refuse(StatusCode::BAD_REQUEST, HEADER_MISMATCH, text, None);
    for name in [VERSION, METHOD, NAME] {
        if headers.get_all(name).iter().count() > 1 {
            return mismatch(format!("header mismatch: `{name}` appears more than once"));
        }
    }
    let meta = message.get("params").and_then(|p| p.get("_meta")).and_then(Json::as_object);
    let Some(meta) = meta.filter(|m| m.contains_key(META_VERSION) && m.contains_key(META_CAPABILITIES)) else {
        let text = format!("`params._meta` must carry `{META_VERSION}` and `{META_CAPABILITIES}`");
        return refuse(StatusCode::BAD_REQUEST, INVALID_PARAMS, text, None);
    };
    if meta.get(META_VERSION).and_then(Json::as_str) != Some(STATELESS_VERSION) {
        return mismatch(format!(
            "header mismatch: `MCP-Protocol-Version` is `{STATELESS_VERSION}`, the body's is not"
        ));
    }
    let header = |name: &str| headers.get(name).map(|v| v.to_str().map_err(|_| ()));
    match header(METHOD) {
        Some(Ok(value)) if value == method => {}
        Some(Ok(value)) => {
            return mismatch(format!("header mismatch: `Mcp-Method` is `{value}`, the body's method `{method}`"))
        }
        Some(Err(())) => return mismatch("header mismatch: `Mcp-Method` has invalid characters".into()),
        None => return mismatch("header mismatch: the `Mcp-Method` header is missing".into()),
    }
    let named = name_param(method).and_then(|key| Some((key, message.get("params")?.get(key)?.as_str()?.to_string())));
    if let Some((key, value)) = named {
        let decoded = match header(NAME) {
            None => return mismatch("header mismatch: the `Mcp-Name` header is missing".into()),
            Some(Err(())) => None,
            Some(Ok(raw)) => decode_header_value(raw),
        };
        if decoded.as_deref() != Some(value.as_str()) {
            return mismatch(format!("header mismatch: `Mcp-Name` does not match the body's `{key}` `{value}`"));
        }
    }
    match method {
        "server/discover" => {
            let proxy = app.proxy.clone();
            let mut versions = vec![STATELESS_VERSION];
            versions.extend(SUPPORTED_VERSIONS);
            let found = tokio::task::spawn_blocking(move || proxy.discover(&versions)).await;
            match found {
                Ok(Ok(result)) => {
                    let result = stateless_result(method, result);
                    rpc(StatusCode::OK, json!({"jsonrpc": "2.0", "id": id, "result": result}))
                }
                Ok(Err(e)) => refuse(StatusCode::OK, e.code, e.message, e.data),
                Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "the proxy failed"),
            }
        }
        "subscriptions/listen" => listen(&app, &id, message.get("params")),
        "initialize" => refuse(
            StatusCode::NOT_FOUND,
            METHOD_NOT_FOUND,
            format!("`initialize` is not part of MCP {STATELESS_VERSION}: use `server/discover`"),
            None,
        ),
        _ => {
            // The `Mcp-Param-*` headers, checked against the arguments once the tool's schema is at hand.
            let params: Vec<(String, Option<String>)> = headers
                .iter()
                .filter(|(name, _)| name.as_str().starts_with(PARAM_PREFIX))
                .map(|(name, value)| (name.as_str().to_string(), value.to_str().ok().map(str::to_string)))
                .collect();
            answer(app, identity, body, Some(method.to_string()), params).await
        }
    }
}

/// An agent's `subscriptions/listen` (revision 2026-07-28): the answer is an event stream that stays open, its
/// acknowledgement first, then a `notifications/tools/list_changed` (tagged with the request's id) whenever an
/// upstream's tool list changes ([`Proxy::listen`]); it ends when the agent closes the connection or the proxy stops.
fn listen(app: &App, id: &Json, params: Option<&Json>) -> Response {
    let (sender, messages) = tokio::sync::mpsc::unbounded_channel::<Json>();
    app.proxy.listen(id, params, Box::new(sender));
    event_stream(messages)
}

/// An event stream of the messages that come on `messages`, one event each, open until the agent closes it (then
/// the sender sees the channel closed, and its listener is dropped). Kept alive by a comment
/// every 15 s, so that an idle stream is not taken for a dead one by the agent's HTTP stack or a proxy between.
fn event_stream(messages: tokio::sync::mpsc::UnboundedReceiver<Json>) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let events = futures_util::stream::unfold(messages, |mut messages| async move {
        let message = messages.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(Event::default().event("message").data(message.to_string())), messages))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15))).into_response()
}

/// Checks a stateless `tools/call`'s `Mcp-Param-*` headers against its arguments, as MCP 2026-07-28 requires of a
/// server that reads the body: for each `x-mcp-header` annotation of the tool's input schema, an argument that is
/// present (and not `null`) needs its header, once, whose value — visible ASCII, decoded when it is
/// `=?base64?…?=` — is the argument's (numbers compared as numbers); an absent argument must have no header.
/// `Mcp-Param-*` headers no annotation names are ignored (the revision tells servers to), and so is a tool no
/// upstream offers (its call is refused anyway). Why the request is refused.
fn check_param_headers(proxy: &Proxy, message: &Json, sent: &[(String, Option<String>)]) -> Result<(), String> {
    let Some(tool) = message.pointer("/params/name").and_then(Json::as_str) else { return Ok(()) };
    let Some(annotations) = proxy.param_headers(tool) else { return Ok(()) };
    let empty = json!({});
    let arguments = message.pointer("/params/arguments").unwrap_or(&empty);
    for annotation in annotations {
        let header = annotation.header();
        let lower = header.to_ascii_lowercase();
        let values: Vec<&Option<String>> = sent.iter().filter(|(name, _)| *name == lower).map(|(_, v)| v).collect();
        if values.len() > 1 {
            return Err(format!("`{header}` appears more than once"));
        }
        let argument = annotation.argument(arguments);
        match (argument, values.first()) {
            (None, None) => {}
            (None, Some(_)) => return Err(format!("`{header}` is sent, the argument it mirrors is not")),
            (Some(_), None) => return Err(format!("the `{header}` header is missing")),
            (Some(_), Some(None)) => return Err(format!("`{header}` has invalid characters")),
            (Some(value), Some(Some(raw))) => {
                let Some(decoded) = decode_header_value(raw) else {
                    return Err(format!("`{header}` is not a valid `=?base64?…?=` value"));
                };
                let expected = annotation.value(arguments).unwrap_or_default();
                if !ParamHeader::matches(&decoded, &expected, value.is_number()) {
                    return Err(format!("`{header}` does not match the argument `{}`", annotation.path.join(".")));
                }
            }
        }
    }
    Ok(())
}

/// The proxy's answer to a message of the stateless revision (`method`: the request's), or to a message that is
/// not a request (`None`).
///
/// `params`: the `Mcp-Param-*` headers of a stateless `tools/call` (lowercase names; `None` for a value that is not
/// visible ASCII), checked against its arguments before anything is decided ([`check_param_headers`]).
async fn answer(
    app: Arc<App>,
    identity: (Identity, bool),
    body: Bytes,
    method: Option<String>,
    params: Vec<(String, Option<String>)>,
) -> Response {
    let (identity, jwt) = identity;
    if method.as_deref() == Some("tools/call") {
        let message: Json = serde_json::from_slice(&body).unwrap_or(Json::Null);
        // The tool's schema may have to be read from the upstream first.
        let check = || check_param_headers(&app.proxy, &message, &params);
        let checked = if app.proxy.tools_known() { guarded(check) } else { blocking(check) };
        match checked {
            Some(Ok(())) => {}
            Some(Err(why)) => {
                let error = json!({"code": HEADER_MISMATCH, "message": format!("header mismatch: {why}")});
                let id = message.get("id");
                return rpc(StatusCode::BAD_REQUEST, json!({"jsonrpc": "2.0", "id": id, "error": error}));
            }
            None => return plain(StatusCode::INTERNAL_SERVER_ERROR, "the proxy failed"),
        }
    }
    let answer = match answer_message(&app, &identity, &body, true).await {
        Some(answer) => answer,
        None => return plain(StatusCode::INTERNAL_SERVER_ERROR, "the proxy failed"),
    };
    let Some(answer) = answer else { return StatusCode::ACCEPTED.into_response() };
    // A forwarded call's result, typed as the revision types it already (`Forward::answer`).
    let mut answer = match answer.result_line() {
        Ok(line) => return result_line(line),
        Err(answer) => answer,
    };
    if let Some(challenge) = scope_challenge(&app, jwt, &body, &answer) {
        return challenge;
    }
    let code = answer.get("error").and_then(|e| e.get("code")).and_then(Json::as_i64);
    let status = match code {
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(_) if answer.get("id").is_some_and(Json::is_null) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    };
    if let (Some(method), Some(result)) = (&method, answer.get_mut("result")) {
        *result = stateless_result(method, result.take());
    }
    rpc(status, answer)
}

/// `GET` in a session: the event stream of server-initiated messages (revision 2025-06-18), on which the proxy sends
/// `notifications/tools/list_changed` whenever an upstream's tool list changes; it stays open until the agent closes
/// it. Without a session (a client of the stateless revision, which listens with `subscriptions/listen`) `405`.
async fn get_mcp(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let identity = match identify(&app, &headers) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let Some(session) = session_of(&headers) else {
        let mut response =
            plain(StatusCode::METHOD_NOT_ALLOWED, "an event stream belongs to a session: `initialize` first");
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
        return response;
    };
    let owner = app.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&session).cloned();
    if owner.as_deref() != Some(identity.subject.as_str()) {
        return plain(StatusCode::NOT_FOUND, "no such session: `initialize` again");
    }
    let (sender, messages) = tokio::sync::mpsc::unbounded_channel::<Json>();
    app.proxy.watch(Box::new(sender));
    event_stream(messages)
}

async fn delete_mcp(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let identity = match identify(&app, &headers) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let Some(session) = session_of(&headers) else {
        return plain(StatusCode::BAD_REQUEST, "the `Mcp-Session-Id` header is missing");
    };
    let mut sessions = app.sessions.lock().unwrap_or_else(|p| p.into_inner());
    if sessions.get(&session) != Some(&identity.subject) {
        return plain(StatusCode::NOT_FOUND, "no such session");
    }
    sessions.remove(&session);
    StatusCode::OK.into_response()
}
