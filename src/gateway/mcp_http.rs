//! `remit mcp-proxy --listen`: the proxy's agent side over MCP's Streamable HTTP transport (revision 2025-06-18)
//! instead of stdio. One endpoint, `/mcp`: `POST` carries one JSON-RPC message and is answered with one JSON
//! response (`application/json`; the proxy never opens an SSE stream), `202 Accepted` for a notification or a
//! response; `GET` is `405` (no server-initiated stream); `DELETE` ends a session.
//!
//! Identity comes from the bearer token: a configured agent token maps to a subject (`--agent-token SUBJECT=TOKEN`);
//! with a key set (`--jwks`, [`super::mcp_auth`]) any other token must be a valid JWT, whose claims give the subject,
//! the credential and its scopes. A request without an accepted token is `401` with `WWW-Authenticate: Bearer` (with
//! a key set: `resource_metadata`, the URL of the OAuth protected resource metadata (RFC 9728) served at
//! `/.well-known/oauth-protected-resource/mcp`, and `error="invalid_token"` for a token that was refused). The token
//! never goes upstream: the upstream sees only the JSON-RPC message and the proxy's own headers. `initialize` opens a session (`Mcp-Session-Id`), bound
//! to the token's subject; later requests must carry it (`400` without, `404` for an unknown one or another
//! subject's). A request whose `Origin` is not a loopback origin is `403` (DNS rebinding), and an
//! `MCP-Protocol-Version` the proxy does not speak is `400`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value as Json};

use super::mcp::{Identity, Proxy, MAX_MESSAGE};
use super::mcp_auth::JwtVerifier;

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

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
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !loopback_origin(origin) {
            return Err(plain(StatusCode::FORBIDDEN, "requests from another origin are refused"));
        }
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let found =
        token.and_then(|t| app.agents.iter().find(|(known, _)| constant_time_eq(known.as_bytes(), t.as_bytes())));
    if let Some((_, identity)) = found {
        return Ok(identity.clone());
    }
    let Some(bearer) = &app.bearer else {
        let mut response = plain(StatusCode::UNAUTHORIZED, "an agent's bearer token is required");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"remit\""));
        return Err(response);
    };
    let refused = match token {
        None => None,
        Some(token) => match bearer.verifier.verify(token, super::mcp_auth::now()) {
            Ok(claims) => {
                return Ok(Identity {
                    subject: claims.subject,
                    credential: claims.credential.or_else(|| bearer.credential.clone()),
                    scopes: claims.scopes,
                    mandate: bearer.mandate.clone(),
                })
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

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn session_of(headers: &HeaderMap) -> Option<String> {
    headers.get(SESSION).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn post_mcp(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let identity = match identify(&app, &headers) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    if let Some(version) = headers.get(VERSION).and_then(|v| v.to_str().ok()) {
        if !super::mcp::SUPPORTED_VERSIONS.contains(&version) {
            return plain(StatusCode::BAD_REQUEST, &format!("protocol version `{version}` is not supported"));
        }
    }
    let method = serde_json::from_slice::<Json>(&body).ok().and_then(|m| m.get("method")?.as_str().map(str::to_string));
    let initialize = method.as_deref() == Some("initialize");
    if !initialize {
        let Some(session) = session_of(&headers) else {
            return plain(StatusCode::BAD_REQUEST, "the `Mcp-Session-Id` header is missing: `initialize` first");
        };
        let owner = app.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&session).cloned();
        if owner.as_deref() != Some(identity.subject.as_str()) {
            return plain(StatusCode::NOT_FOUND, "no such session: `initialize` again");
        }
    }
    let proxy = app.proxy.clone();
    let subject = identity.subject.clone();
    let answer = match tokio::task::spawn_blocking(move || proxy.answer(&identity, &body)).await {
        Ok(answer) => answer,
        Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "the proxy failed"),
    };
    let Some(answer) = answer else { return StatusCode::ACCEPTED.into_response() };
    let malformed = answer.get("id").is_some_and(Json::is_null) && answer.get("error").is_some();
    let status = if malformed { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response();
    if initialize && answer.get("result").is_some() {
        let session = super::core::new_id("mcp");
        app.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(session.clone(), subject);
        if let Ok(value) = HeaderValue::from_str(&session) {
            response.headers_mut().insert(SESSION, value);
        }
    }
    response
}

async fn get_mcp(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(response) = identify(&app, &headers) {
        return response;
    }
    let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "this server opens no event stream: POST messages");
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    response
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
