//! The gateway over HTTP (axum on tokio): OpenID AuthZEN 1.0 (evaluation, evaluations, the action, resource and
//! subject searches, discovery),
//! remit's native `/v1/decide`, the principal's inbox (a web page and its JSON API), the grants API (`/v1/grants`:
//! instances of templates), the admin API (stops, facts),
//! and operations (`/health`, `/ready`, Prometheus `/metrics`). docs/gateway.md is the reference.
//!
//! Decisions run on tokio's blocking pool: the core is synchronous (SQLite, wasmtime).

// Helpers return the error response itself (`Result<_, Response>`), which handlers answer as is: boxing it would
// only add an allocation on the error path.
#![allow(clippy::result_large_err)]

use remit_lang::syntax::ast::FactVersion;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::RawQuery;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use serde_json::{json, Map, Value as Json};

use super::conn::{Connections, Limits, Plain};
use super::core::{
    ActionError, DataChange, Decided, Gateway, GrantAsk, GrantError, Histogram, NoExplanation, Policy, Searched,
};
use super::data::Format;
use super::https::{ServerTls, TlsListener};
use super::store::StopRecord;

/// The largest body of a single decision request (the module's maximum input).
pub const MAX_BODY: usize = 262_144;
/// The largest body of a batch (`/access/v1/evaluations`).
pub const MAX_BATCH_BODY: usize = 4 << 20;
/// The most evaluations one batch may carry.
pub const MAX_BATCH: usize = 1000;
/// The largest data file a bulk load takes (`POST /admin/v1/data/load`): a million tuples fit.
pub const MAX_DATA_BODY: usize = 256 << 20;

/// Who may use the inbox, the admin API and the decision endpoints: bearer token → identity.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub inbox: BTreeMap<String, String>,
    pub admin: BTreeMap<String, String>,
    /// The enforcement points that may ask for decisions (AuthZEN, `/v1/decide`): bearer token → name.
    pub pep: BTreeMap<String, String>,
    /// Whether a caller that shows no PEP credential (token or client certificate) may ask for decisions.
    pub anonymous_pep: bool,
    /// The enforcement points (names of `pep` tokens) trusted with AuthZEN `properties`: their `from properties`
    /// values are decided on (`--trusted-pep NAME`); every other caller's are removed.
    pub trusted_pep: BTreeSet<String>,
}

impl Default for Tokens {
    /// No tokens; decisions open to anyone who reaches the gateway (what `remit serve` on loopback has by default).
    fn default() -> Tokens {
        Tokens {
            inbox: BTreeMap::new(),
            admin: BTreeMap::new(),
            pep: BTreeMap::new(),
            anonymous_pep: true,
            trusted_pep: BTreeSet::new(),
        }
    }
}

impl Tokens {
    /// Refuses one token given to two uses (inbox and admin, an inbox and a PEP…) or, in `others`, to an identity
    /// of another kind (an agent's token): whoever holds it would act as both. Duplicates within one kind are
    /// refused where the pairs are read. The tokens themselves are never named.
    pub fn check_distinct<'a>(
        &'a self,
        others: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Result<(), String> {
        let mut seen: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
        let kinds = [("inbox", &self.inbox), ("admin", &self.admin), ("pep", &self.pep)];
        let all = kinds
            .iter()
            .flat_map(|(kind, map)| map.iter().map(move |(token, who)| (token.as_str(), *kind, who.as_str())))
            .chain(others);
        for (token, kind, who) in all {
            if let Some((first_kind, first)) = seen.insert(token, (kind, who)) {
                return Err(format!(
                    "one token is given to `{first}` ({first_kind} token) and to `{who}` ({kind} token): give each its own"
                ));
            }
        }
        Ok(())
    }
}

/// Loads the policy again (from where it came): what `POST /admin/v1/reload` and the file watch call.
pub type Reloader = Arc<dyn Fn() -> Result<Policy, String> + Send + Sync>;

struct App {
    gateway: Arc<Gateway>,
    tokens: Tokens,
    latency: Histogram,
    reloader: Option<Reloader>,
    /// Decisions running now (see [`blocking_decision`]).
    running: std::sync::atomic::AtomicUsize,
    /// Set when the gateway is asked to stop ([`run`]): `/ready` answers 503 from then on, and responses close their
    /// connections, so that load balancers and clients move to another replica while this one drains.
    draining: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("gateway", &self.gateway).finish_non_exhaustive()
    }
}

type Shared = State<Arc<App>>;

/// The router of every endpoint.
pub fn router(gateway: Arc<Gateway>, tokens: Tokens) -> Router {
    router_with_reload(gateway, tokens, None)
}

/// [`router`] with `POST /admin/v1/reload`, which swaps in what `reloader` loads.
pub fn router_with_reload(gateway: Arc<Gateway>, tokens: Tokens, reloader: Option<Reloader>) -> Router {
    router_draining(gateway, tokens, reloader, Default::default())
}

/// [`router_with_reload`] whose `/ready` answers 503 once `draining` is set ([`run`] sets it on SIGTERM).
pub fn router_draining(
    gateway: Arc<Gateway>,
    tokens: Tokens,
    reloader: Option<Reloader>,
    draining: Arc<std::sync::atomic::AtomicBool>,
) -> Router {
    let app = Arc::new(App {
        gateway,
        tokens,
        latency: Histogram::default(),
        reloader,
        running: Default::default(),
        draining,
    });
    let single = Router::new()
        .route("/access/v1/evaluation", post(evaluation))
        .route("/access/v1/search/action", post(search_action))
        .route("/access/v1/search/resource", post(search_resource))
        .route("/access/v1/search/subject", post(search_subject))
        .route("/v1/decide", post(decide))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    let batch =
        Router::new().route("/access/v1/evaluations", post(evaluations)).layer(DefaultBodyLimit::max(MAX_BATCH_BODY));
    // The decision endpoints answer only the enforcement points the operator named (or anyone, when allowed).
    let decisions =
        Router::new().merge(single).merge(batch).layer(axum::middleware::from_fn_with_state(app.clone(), pep_only));
    Router::new()
        .merge(decisions)
        .route("/.well-known/authzen-configuration", get(configuration))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/inbox", get(inbox_page))
        .route("/inbox/{id}", get(inbox_page))
        .route("/inbox/{id}/explanation", get(explanation_page))
        .route("/inbox/api/requests", get(inbox_list))
        .route("/inbox/api/requests/{id}", get(inbox_one))
        .route("/inbox/api/requests/{id}/explanation", get(inbox_explanation))
        .route("/inbox/api/requests/{id}/approve", post(inbox_approve))
        .route("/inbox/api/requests/{id}/deny", post(inbox_deny))
        .route("/inbox/api/mandates", get(inbox_mandates))
        .route("/v1/grants", post(grants_grant).get(grants_list))
        .route("/v1/grants/{id}", get(grants_show).put(grants_change).delete(grants_revoke))
        .route("/admin/v1/state", get(admin_state))
        .route("/admin/v1/stops/{mandate}", put(admin_stop).delete(admin_unstop))
        .route("/admin/v1/stop-ids/{id}", put(admin_stop_record).delete(admin_clear_stop_record))
        .route("/admin/v1/facts/{name}", put(admin_fact))
        .route("/admin/v1/reload", post(admin_reload))
        .route(
            "/admin/v1/data/entities/{kind}/{id}",
            get(admin_data_entity).put(admin_data_put_entity).delete(admin_data_delete_entity),
        )
        .route("/admin/v1/data/relations/{relation}/{a}", get(admin_data_related))
        .route(
            "/admin/v1/data/relations/{relation}/{a}/{b}",
            get(admin_data_holds).put(admin_data_add_tuple).delete(admin_data_remove_tuple),
        )
        .route("/admin/v1/data/holidays/{calendar}", get(admin_data_holidays))
        .route(
            "/admin/v1/data/holidays/{calendar}/{date}",
            put(admin_data_add_holiday).delete(admin_data_remove_holiday),
        )
        .route("/admin/v1/data/load", post(admin_data_load).layer(DefaultBodyLimit::max(MAX_DATA_BODY)))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(echo_request_id))
        .layer(axum::middleware::from_fn_with_state(app.clone(), close_when_draining))
        .with_state(app)
}

/// While the gateway drains, every response says `Connection: close`: a client (or a load balancer) that kept its
/// connection open opens its next one elsewhere, rather than meeting this gateway's closed listener.
async fn close_when_draining(
    State(app): Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = next.run(request).await;
    if app.draining.load(Ordering::Relaxed) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// AuthZEN's request identification: a request's `X-Request-ID` goes back, unchanged, on its response (whatever the
/// response: a decision, an error, a 404).
async fn echo_request_id(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let id = request.headers().get(REQUEST_ID).cloned();
    let mut response = next.run(request).await;
    if let Some(id) = id {
        response.headers_mut().insert(REQUEST_ID, id);
    }
    response
}

const REQUEST_ID: &str = "x-request-id";

/// Lets a decision request through when it comes from a known enforcement point — a PEP bearer token, or a client
/// certificate verified by `--client-ca` — or when anonymous callers are allowed; otherwise `401` with a
/// `WWW-Authenticate` challenge (AuthZEN 1.0, "Sender Authentication Failure").
async fn pep_only(State(app): Shared, request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if !app.tokens.anonymous_pep {
        let peer = request.extensions().get::<axum::extract::ConnectInfo<super::https::TlsPeer>>();
        let certified = peer.is_some_and(|peer| peer.0.certified);
        let token = bearer_token(request.headers()).filter(|t| !t.is_empty());
        let known = token.is_some_and(|t| find_token(&app.tokens.pep, t).is_some());
        if !certified && !known {
            let message = match token {
                None => "this gateway answers only authenticated enforcement points: send a PEP bearer token",
                Some(_) => "this token is not one of the gateway's PEP tokens",
            };
            let mut response = error(StatusCode::UNAUTHORIZED, "auth.pep-required", message);
            let challenge = HeaderValue::from_static("Bearer realm=\"remit\"");
            response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
            return response;
        }
    }
    next.run(request).await
}

/// Serves until `shutdown` resolves, then finishes the requests in flight (the log is written before each response,
/// so nothing is left to flush). Over TLS with `tls` ([`super::https`]); with the default connection limit and
/// timeouts ([`serve_with`] for others).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Option<ServerTls>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, tls, Connections::new(Limits::default()), shutdown).await
}

/// [`serve`] within the connection limit and timeouts of `connections` ([`super::conn`]), whose slots may be shared
/// with other runtimes serving the same listener.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Option<ServerTls>,
    connections: Connections,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = connections.limits;
    match tls {
        None => super::conn::serve(Plain { listener, connections }, router, limits, shutdown).await,
        Some(tls) => {
            let listener = TlsListener::new(listener, &tls, connections)?;
            super::conn::serve(listener, router, limits, shutdown).await
        }
    }
    Ok(())
}

/// A JSON error: `{"error": {"code": …, "message": …}}`.
fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"code": code, "message": message.into()}});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "http.not-found", "no such endpoint")
}

/// Parses a body as one acceptable JSON object (docs/json.md), or a 400.
fn parse_object(body: &[u8]) -> Result<Map<String, Json>, Response> {
    match remit_lang::json::parse(body) {
        Ok(Json::Object(map)) => Ok(map),
        Ok(_) => Err(error(StatusCode::BAD_REQUEST, "http.bad-json", "the body must be a JSON object")),
        Err(e) => Err(error(StatusCode::BAD_REQUEST, "http.bad-json", format!("the body is not acceptable JSON: {e}"))),
    }
}

/// remit's request from an AuthZEN one (docs/gateway.md, "From AuthZEN to remit"): `subject.id`, the credential
/// from `subject.credential` or `subject.properties.credential`; `action.name`, the tool arguments from
/// `action.arguments` or else `action.properties`; `resource.id`; `context` as it is. `type`s are kept only in the
/// log's copy of the AuthZEN request.
pub fn remit_request(authzen: &Map<String, Json>) -> Json {
    remit_request_keeping(authzen, false)
}

/// [`remit_request`]; with `world` (the policy reads the world: `core::world`) also the subject's and the
/// resource's `type` and `properties` (the credential aside), which the gateway then strips and fills.
pub fn remit_request_keeping(authzen: &Map<String, Json>, world: bool) -> Json {
    let field = |object: &str, key: &str| authzen.get(object).and_then(|o| o.get(key)).cloned();
    let mut subject = Map::new();
    if let Some(id) = field("subject", "id") {
        subject.insert("id".into(), id);
    }
    let credential = field("subject", "credential")
        .or_else(|| authzen.get("subject").and_then(|s| s.pointer("/properties/credential")).cloned());
    if let Some(credential) = credential {
        subject.insert("credential".into(), credential);
    }
    // The world's keys and values (the subject's and the resource's type and properties), when the policy reads them.
    let world_of = |entity: &str, into: &mut Map<String, Json>| {
        if let Some(kind) = field(entity, "type") {
            into.insert("type".into(), kind);
        }
        if let Some(Json::Object(mut properties)) = field(entity, "properties") {
            if entity == "subject" {
                properties.remove("credential");
            }
            into.insert("properties".into(), Json::Object(properties));
        }
    };
    if world {
        world_of("subject", &mut subject);
    }
    let mut action = Map::new();
    if let Some(name) = field("action", "name") {
        action.insert("name".into(), name);
    }
    if let Some(arguments) = field("action", "arguments").or_else(|| field("action", "properties")) {
        action.insert("arguments".into(), arguments);
    }
    let mut request = Map::new();
    request.insert("subject".into(), Json::Object(subject));
    request.insert("action".into(), Json::Object(action));
    if let Some(id) = field("resource", "id") {
        let mut resource = Map::new();
        resource.insert("id".into(), id);
        if world {
            world_of("resource", &mut resource);
        }
        request.insert("resource".into(), Json::Object(resource));
    }
    if let Some(context) = authzen.get("context") {
        request.insert("context".into(), context.clone());
    }
    Json::Object(request)
}

/// The AuthZEN answer for a decision: `decision` true only for an allow; `context` is remit's decision with its
/// id and, for an escalation, the access request (id, URL, expiry).
fn authzen_answer(decided: &Decided) -> Json {
    let mut context = match serde_json::from_str::<Json>(&decided.decision) {
        Ok(Json::Object(map)) => map,
        _ => Map::new(),
    };
    context.insert("decision_id".into(), decided.id.clone().into());
    if let Some(request) = &decided.access_request {
        context.insert(
            "access_request".into(),
            json!({"id": request.id, "url": request.url,
                   "expires_at": remit_lang::value::format_timestamp(request.expires_at)}),
        );
    }
    if let Some(would) = decided.shadowed.as_ref().and_then(|d| serde_json::from_str::<Json>(d).ok()) {
        context.insert("shadow".into(), would);
    }
    json!({"decision": decided.allowed(), "context": context})
}

/// Whether the caller of a decision request is an enforcement point the operator trusts with `properties`: its PEP
/// token's name is one of `--trusted-pep` (a client certificate alone is not trusted with them).
fn trusted_caller(app: &App, headers: &HeaderMap) -> bool {
    if app.tokens.trusted_pep.is_empty() {
        return false;
    }
    let name = bearer_token(headers).filter(|t| !t.is_empty()).and_then(|t| find_token(&app.tokens.pep, t));
    name.is_some_and(|name| app.tokens.trusted_pep.contains(&name))
}

/// [`remit_request_keeping`] for the policy in force.
fn authzen_to_remit(app: &App, authzen: &Map<String, Json>) -> Json {
    remit_request_keeping(authzen, !app.gateway.world().is_empty())
}

async fn run_decision(app: &Arc<App>, request: Vec<u8>, trusted: bool) -> Decided {
    let started = Instant::now();
    let decided = decision(app, request, trusted).await;
    let elapsed = started.elapsed();
    app.latency.observe(elapsed.as_secs_f64());
    if app.gateway.counts.stages.enabled {
        app.gateway.counts.stages.total.observe(elapsed.as_secs_f64());
    }
    if let (true, Ok(d)) = (app.gateway.config().access_log, &decided) {
        let line = json!({
            "time": remit_lang::value::format_timestamp(app.gateway.now()), "decision_id": d.id, "outcome": d.outcome,
            "reasons": d.reasons, "policy": d.policy, "logged": d.logged, "shadow": d.shadowed.is_some(),
            "access_request": d.access_request.as_ref().map(|r| &r.id), "micros": elapsed.as_micros() as u64,
        });
        eprintln!("{line}");
    }
    match decided {
        Ok(decided) => decided,
        // The blocking task panicked: deny, as the core would for a store it cannot use.
        Err(_) => {
            let policy = app.gateway.policy().compiled.policy().to_string();
            let reason = super::core::REASON_STORE;
            Decided {
                id: super::core::new_id("dec"),
                decision: remit_lang::eval::Decision::deny(vec![reason.into()], policy.as_str()).to_json(),
                outcome: "deny".into(),
                reasons: vec![reason.into()],
                access_request: None,
                logged: None,
                policy,
                shadowed: None,
                carried: Default::default(),
            }
        }
    }
}

/// Runs a decision. When no other decision is running, on a multi-threaded runtime, in place on the worker that
/// received the request (`block_in_place`, [`blocking_decision`]); otherwise its job is queued for the group
/// commit and awaited (`Gateway::decide_awaiting`): the committer thread runs the batches, and no thread of the
/// blocking pool waits for each decision (BENCHMARKS.md, "Gateway"). `Err` when the decision panicked.
async fn decision(app: &Arc<App>, request: Vec<u8>, trusted: bool) -> Result<Decided, ()> {
    use futures_util::FutureExt;
    use tokio::runtime::{Handle, RuntimeFlavor};
    let alone = app.running.load(Ordering::Acquire) == 0;
    if alone && Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        let gateway = app.gateway.clone();
        return blocking_decision(app, move || gateway.decide_as(&request, trusted)).await;
    }
    struct Running<'a>(&'a std::sync::atomic::AtomicUsize);
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
        }
    }
    app.running.fetch_add(1, Ordering::AcqRel);
    let _running = Running(&app.running);
    let gateway = app.gateway.clone();
    std::panic::AssertUnwindSafe(async move { gateway.decide_awaiting(&request, trusted).await })
        .catch_unwind()
        .await
        .map_err(|_| ())
}

/// Runs a decision, which blocks (SQLite, the group commit). When no other decision is running, on a
/// multi-threaded runtime, in place on the worker that received the request (`block_in_place`: two thread wake-ups
/// fewer than a round trip through the blocking pool, which is most of one lone call's latency); otherwise on the
/// blocking pool, since handing a worker's tasks to another thread on every call costs more than it saves under
/// concurrency (BENCHMARKS.md, "Gateway"). `Err` when the decision panicked.
async fn blocking_decision<T: Send + 'static>(app: &App, f: impl FnOnce() -> T + Send + 'static) -> Result<T, ()> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    /// Counts the decision out also when its request is dropped while it waits (the client went away).
    struct Running<'a>(&'a std::sync::atomic::AtomicUsize);
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let alone = app.running.fetch_add(1, Ordering::AcqRel) == 0;
    let _running = Running(&app.running);
    if alone && Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tokio::task::block_in_place(f))).map_err(|_| ())
    } else {
        tokio::task::spawn_blocking(f).await.map_err(|_| ())
    }
}

/// The members AuthZEN 1.0 requires of an evaluation (its information model: a Subject's and a Resource's `type`
/// and `id`, an Action's `name`, each a string).
const EVALUATION_MEMBERS: &[(&str, &[&str])] =
    &[("subject", &["type", "id"]), ("action", &["name"]), ("resource", &["type", "id"])];
/// An action search names no action (AuthZEN 1.0, "Action Search API").
const ACTION_SEARCH_MEMBERS: &[(&str, &[&str])] = &[("subject", &["type", "id"]), ("resource", &["type", "id"])];
/// A resource search names no resource id, a subject search no subject id (AuthZEN 1.0: omitted, and ignored when
/// given); the searched side's `type` is checked before these ([`searched_type`]).
const RESOURCE_SEARCH_MEMBERS: &[(&str, &[&str])] =
    &[("subject", &["type", "id"]), ("action", &["name"]), ("resource", &["type"])];
const SUBJECT_SEARCH_MEMBERS: &[(&str, &[&str])] =
    &[("subject", &["type"]), ("action", &["name"]), ("resource", &["type", "id"])];

/// A `400` naming the first member of `required` that `object` lacks (or has as another thing than a string), as
/// AuthZEN's JSON binding requires for an omitted required attribute; `at` says which evaluation of a batch.
fn require_members(object: &Map<String, Json>, required: &[(&str, &[&str])], at: &str) -> Result<(), Response> {
    for (entity, keys) in required {
        let Some(value) = object.get(*entity) else {
            let message = format!("{at}`{entity}` is required");
            return Err(error(StatusCode::BAD_REQUEST, "authzen.bad-request", message));
        };
        let Json::Object(members) = value else {
            let message = format!("{at}`{entity}` must be an object");
            return Err(error(StatusCode::BAD_REQUEST, "authzen.bad-request", message));
        };
        for key in *keys {
            match members.get(*key) {
                Some(Json::String(_)) => {}
                Some(_) => {
                    let message = format!("{at}`{entity}.{key}` must be a string");
                    return Err(error(StatusCode::BAD_REQUEST, "authzen.bad-request", message));
                }
                None => {
                    let message = format!("{at}`{entity}.{key}` is required");
                    return Err(error(StatusCode::BAD_REQUEST, "authzen.bad-request", message));
                }
            }
        }
    }
    Ok(())
}

/// Whether the AuthZEN answers of this request are minimal (`{"decision": bool}`, as the interop suites compare them)
/// or carry remit's decision as `context`: the request's `options.decision_context` (`"full"` or `"minimal"`), else
/// the gateway's `--authzen-context`.
fn minimal_context(app: &App, object: &Map<String, Json>) -> Result<bool, Response> {
    match object.get("options").and_then(|o| o.get("decision_context")) {
        None => Ok(app.gateway.config().authzen_minimal),
        Some(Json::String(mode)) if mode == "full" => Ok(false),
        Some(Json::String(mode)) if mode == "minimal" => Ok(true),
        Some(other) => Err(error(
            StatusCode::BAD_REQUEST,
            "authzen.bad-request",
            format!("`options.decision_context` is `\"full\"` or `\"minimal\"`, not `{other}`"),
        )),
    }
}

/// [`authzen_answer`], or only its `decision` when `minimal`.
fn answer(decided: &Decided, minimal: bool) -> Json {
    if minimal {
        json!({"decision": decided.allowed()})
    } else {
        authzen_answer(decided)
    }
}

async fn evaluation(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let minimal = match require_members(&object, EVALUATION_MEMBERS, "").and_then(|()| minimal_context(&app, &object)) {
        Ok(minimal) => minimal,
        Err(response) => return response,
    };
    let request = serde_json::to_vec(&authzen_to_remit(&app, &object)).expect("JSON serializes");
    let decided = run_decision(&app, request, trusted_caller(&app, &headers)).await;
    json_response(StatusCode::OK, answer(&decided, minimal).to_string())
}

async fn evaluations(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let trusted = trusted_caller(&app, &headers);
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let items = match object.get("evaluations") {
        None => Vec::new(),
        Some(Json::Array(items)) => items.clone(),
        Some(_) => return error(StatusCode::BAD_REQUEST, "http.bad-request", "`evaluations` must be an array"),
    };
    if items.len() > MAX_BATCH {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "http.too-many", format!("at most {MAX_BATCH} evaluations"));
    }
    let semantic = object.get("options").and_then(|o| o.get("evaluations_semantic")).and_then(Json::as_str);
    let semantic = semantic.unwrap_or("execute_all");
    if !["execute_all", "deny_on_first_deny", "permit_on_first_permit"].contains(&semantic) {
        return error(
            StatusCode::BAD_REQUEST,
            "http.bad-request",
            format!("unknown evaluations_semantic `{semantic}`"),
        );
    }
    let minimal = match minimal_context(&app, &object) {
        Ok(minimal) => minimal,
        Err(response) => return response,
    };
    // Without `evaluations`, or with an empty array, the request is one evaluation of the top-level members
    // (AuthZEN 1.0: "backwards-compatible" with the single evaluation), answered as one.
    if items.is_empty() {
        if let Err(response) = require_members(&object, EVALUATION_MEMBERS, "") {
            return response;
        }
        let request = serde_json::to_vec(&authzen_to_remit(&app, &object)).expect("JSON serializes");
        let decided = run_decision(&app, request, trusted).await;
        return json_response(StatusCode::OK, answer(&decided, minimal).to_string());
    }
    // Every evaluation is checked before any is decided: a bad batch is refused whole, and changes nothing.
    let mut requests = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let Json::Object(item) = item else {
            return error(StatusCode::BAD_REQUEST, "http.bad-request", "every evaluation must be an object");
        };
        // Each evaluation's subject, action, resource and context replace the request's defaults.
        let mut merged = object.clone();
        merged.remove("evaluations");
        merged.remove("options");
        for (key, value) in item {
            merged.insert(key, value);
        }
        if let Err(response) = require_members(&merged, EVALUATION_MEMBERS, &format!("evaluation {index}: ")) {
            return response;
        }
        requests.push(serde_json::to_vec(&authzen_to_remit(&app, &merged)).expect("JSON serializes"));
    }
    let mut answers = Vec::new();
    for request in requests {
        let decided = run_decision(&app, request, trusted).await;
        let allowed = decided.allowed();
        answers.push(answer(&decided, minimal));
        if (semantic == "deny_on_first_deny" && !allowed) || (semantic == "permit_on_first_permit" && allowed) {
            break;
        }
    }
    json_response(StatusCode::OK, json!({"evaluations": answers}).to_string())
}

/// A search request's page: where it starts (from `page.token`) and how many results it may hold (`page.limit`),
/// or a `400` for a limit that is not a whole number ≥ 1 or a token this gateway did not give for this very query.
struct Page {
    offset: usize,
    limit: Option<usize>,
    /// What the tokens of this query are bound to: the request without its `page.token`.
    query: String,
}

impl Page {
    fn read(object: &Map<String, Json>) -> Result<Page, Response> {
        let bad = |message: &str| error(StatusCode::BAD_REQUEST, "search.bad-page", message.to_string());
        let page = match object.get("page") {
            None => Map::new(),
            Some(Json::Object(page)) => page.clone(),
            Some(_) => return Err(bad("`page` must be an object")),
        };
        let limit = match page.get("limit") {
            None => None,
            Some(limit) => match limit.as_u64().filter(|n| *n >= 1) {
                Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                None => return Err(bad("`page.limit` must be a whole number of at least 1")),
            },
        };
        let mut unpaged = object.clone();
        if let Some(Json::Object(page)) = unpaged.get_mut("page") {
            page.remove("token");
        }
        let query = canonical(&Json::Object(unpaged));
        let offset = match page.get("token") {
            None => 0,
            Some(Json::String(token)) if token.is_empty() => 0,
            Some(Json::String(token)) => Page::offset_of(token, &query).ok_or_else(|| {
                bad("`page.token` is not a `next_token` of this query (its subject, resource, context and limit must stay the same)")
            })?,
            Some(_) => return Err(bad("`page.token` must be a string")),
        };
        Ok(Page { offset, limit, query })
    }

    /// The opaque token of the page starting at `offset`: the offset and a digest of the query, so that a token is
    /// refused for another query.
    fn token(&self, offset: usize) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{offset}.{}", Page::digest(&self.query)))
    }

    fn offset_of(token: &str, query: &str) -> Option<usize> {
        use base64::Engine;
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
        let text = String::from_utf8(text).ok()?;
        let (offset, digest) = text.split_once('.')?;
        (digest == Page::digest(query)).then(|| offset.parse().ok()).flatten()
    }

    fn digest(query: &str) -> String {
        use sha2::{Digest, Sha256};
        Sha256::digest(query.as_bytes())[..12].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// This page of `results` (in their order) and the `page` object of the answer: `next_token` empty on the last.
    fn cut(&self, results: Vec<Json>) -> (Vec<Json>, Json) {
        let total = results.len();
        let start = self.offset.min(total);
        let end = match self.limit {
            Some(limit) => start.saturating_add(limit).min(total),
            None => total,
        };
        let next = if end < total { self.token(end) } else { String::new() };
        let page: Vec<Json> = results.into_iter().skip(start).take(end - start).collect();
        let meta = json!({"next_token": next, "count": page.len(), "total": total});
        (page, meta)
    }
}

/// `value` as JSON text with every object's keys sorted: the same query, written in another key order, gets the
/// same page tokens.
fn canonical(value: &Json) -> String {
    match value {
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Json::String((*k).clone()), canonical(&map[*k]))).collect();
            format!("{{{}}}", members.join(","))
        }
        Json::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The tools the subject may call (the module's listing with the gateway's state), sorted by name:
/// `{"results": [{"name": …}], "page": {"next_token", "count", "total"}}`, a page of at most `page.limit` results
/// with `page.token` the `next_token` of the page before.
async fn search_action(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let page = match require_members(&object, ACTION_SEARCH_MEMBERS, "").and_then(|()| Page::read(&object)) {
        Ok(page) => page,
        Err(response) => return response,
    };
    let mut request = authzen_to_remit(&app, &object);
    // The listing needs no action; a placeholder name keeps the request well-formed for the module.
    request["action"] = json!({"name": "", "arguments": {}});
    let bytes = serde_json::to_vec(&request).expect("JSON serializes");
    let gateway = app.gateway.clone();
    let trusted = trusted_caller(&app, &headers);
    let listing = tokio::task::spawn_blocking(move || gateway.visible_tools_as(&bytes, trusted)).await;
    let listing = match listing {
        Ok(Ok(listing)) => listing,
        _ => return error(StatusCode::SERVICE_UNAVAILABLE, super::core::REASON_STORE, "the store is unavailable"),
    };
    let listing: Json = serde_json::from_slice(&listing).unwrap_or(Json::Null);
    let mut names: Vec<String> = listing
        .get("visible")
        .and_then(Json::as_array)
        .map(|tools| tools.iter().filter_map(Json::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    // A stable order, so that the pages of one query fit together.
    names.sort();
    names.dedup();
    let (results, page) = page.cut(names.into_iter().map(|name| json!({"name": name})).collect());
    json_response(StatusCode::OK, json!({"page": page, "results": results}).to_string())
}

/// The type a subject or resource search lists (`side`'s `type`, a string not empty), or a `400`
/// (`search.no-type`): AuthZEN requires it, and without it there is no set of entities to search.
fn searched_type(object: &Map<String, Json>, side: &str) -> Result<String, Response> {
    match object.get(side).and_then(|entity| entity.get("type")).and_then(Json::as_str) {
        Some(kind) if !kind.is_empty() => Ok(kind.to_string()),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "search.no-type",
            format!("a {side} search lists the {side}s of one type: `{side}.type` is required (a string)"),
        )),
    }
}

/// The resources of `resource.type` in the gateway's data the subject may do the action on (`Gateway::search`),
/// sorted by id: `{"page": {…}, "results": [{"type": …, "id": …}]}`, paged as the action search is.
async fn search_resource(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    search_over_data(&app, &headers, &body, Searched::Resource).await
}

/// The subjects of `subject.type` in the gateway's data, and the mandates' exact holders, that may do the action on
/// the resource, sorted by id and paged as the resource search; with `context.holder_patterns` (every page) when a
/// subject under a mandate's `holder under` prefix that the data does not know would be allowed:
/// `[{"type": …, "under": "agent:club/", "mandate": "club"}]`. AuthZEN's `results` are exact ids only.
async fn search_subject(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    search_over_data(&app, &headers, &body, Searched::Subject).await
}

async fn search_over_data(app: &Arc<App>, headers: &HeaderMap, body: &[u8], searched: Searched) -> Response {
    let (side, members) = match searched {
        Searched::Resource => ("resource", RESOURCE_SEARCH_MEMBERS),
        Searched::Subject => ("subject", SUBJECT_SEARCH_MEMBERS),
    };
    let object = match parse_object(body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let checked = searched_type(&object, side)
        .and_then(|kind| require_members(&object, members, "").map(|()| kind))
        .and_then(|kind| Page::read(&object).map(|page| (kind, page)));
    let (kind, page) = match checked {
        Ok(checked) => checked,
        Err(response) => return response,
    };
    // The searched side's id is each candidate's: the core puts it in (an empty placeholder keeps the side, with its
    // type, in remit's request).
    let mut query = object.clone();
    if let Some(Json::Object(entity)) = query.get_mut(side) {
        entity.insert("id".into(), Json::String(String::new()));
    }
    let Json::Object(request) = authzen_to_remit(app, &query) else { unreachable!("remit's request is an object") };
    let gateway = app.gateway.clone();
    let trusted = trusted_caller(app, headers);
    let searching = kind.clone();
    let found = tokio::task::spawn_blocking(move || gateway.search(&request, searched, &searching, trusted)).await;
    let found = match found {
        Ok(Ok(found)) => found,
        _ => return error(StatusCode::SERVICE_UNAVAILABLE, super::core::REASON_STORE, "the store is unavailable"),
    };
    let results = found.ids.into_iter().map(|id| json!({"type": kind, "id": id})).collect();
    let (results, page) = page.cut(results);
    let mut answer = json!({"page": page, "results": results});
    if !found.patterns.is_empty() {
        let patterns: Vec<Json> =
            found.patterns.iter().map(|p| json!({"type": kind, "under": p.under, "mandate": p.mandate})).collect();
        answer["context"] = json!({"holder_patterns": patterns});
    }
    json_response(StatusCode::OK, answer.to_string())
}

/// remit's decision JSON unchanged; the decision id (and the access request of an escalation) in headers.
async fn decide(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let decided = run_decision(&app, body.to_vec(), trusted_caller(&app, &headers)).await;
    let mut response = json_response(StatusCode::OK, decided.decision.clone());
    let headers = response.headers_mut();
    if let Ok(id) = HeaderValue::from_str(&decided.id) {
        headers.insert("remit-decision-id", id);
    }
    if let Some(url) = decided.access_request.as_ref().and_then(|r| HeaderValue::from_str(&r.url).ok()) {
        headers.insert("remit-access-request", url);
    }
    if let Some(would) = decided.shadowed.as_ref().and_then(|d| HeaderValue::from_str(d).ok()) {
        headers.insert("remit-shadow-decision", would);
    }
    response
}

async fn configuration(State(app): Shared) -> Response {
    let base = app.gateway.config().base_url.trim_end_matches('/').to_string();
    let body = json!({
        "policy_decision_point": base,
        "access_evaluation_endpoint": format!("{base}/access/v1/evaluation"),
        "access_evaluations_endpoint": format!("{base}/access/v1/evaluations"),
        "search_action_endpoint": format!("{base}/access/v1/search/action"),
        "search_resource_endpoint": format!("{base}/access/v1/search/resource"),
        "search_subject_endpoint": format!("{base}/access/v1/search/subject"),
    });
    json_response(StatusCode::OK, body.to_string())
}

async fn health() -> Response {
    json_response(StatusCode::OK, r#"{"status":"ok"}"#.into())
}

/// Ready when the store answers and the gateway is not draining (asked to stop). Not ready is `503`, so that a
/// load balancer's health check (or Kubernetes' readiness probe) takes the replica out of rotation; `/health` stays
/// `200` as long as the process serves (a liveness probe must not restart a replica whose database is down).
async fn ready(State(app): Shared) -> Response {
    if app.draining.load(Ordering::Relaxed) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "gateway.draining", "the gateway is stopping");
    }
    let gateway = app.gateway.clone();
    let ok = tokio::task::spawn_blocking(move || gateway.state().is_ok()).await.unwrap_or(false);
    if ok {
        let served = app.gateway.policy();
        let mut body = json!({"status": "ready", "policy": served.compiled.policy()});
        if let Some(revision) = served.revision {
            body["revision"] = json!(revision);
        }
        json_response(StatusCode::OK, body.to_string())
    } else {
        error(StatusCode::SERVICE_UNAVAILABLE, super::core::REASON_STORE, "the store is unavailable")
    }
}

async fn metrics(State(app): Shared) -> Response {
    use std::fmt::Write;
    let counts = &app.gateway.counts;
    let mut out = String::new();
    out.push_str("# HELP remit_decisions_total Decisions by outcome.\n# TYPE remit_decisions_total counter\n");
    for (outcome, n) in [("allow", &counts.allow), ("deny", &counts.deny), ("escalate", &counts.escalate)] {
        let _ = writeln!(out, "remit_decisions_total{{outcome=\"{outcome}\"}} {}", n.load(Ordering::Relaxed));
    }
    out.push_str("# HELP remit_decision_reasons_total Decisions by reason code.\n");
    out.push_str("# TYPE remit_decision_reasons_total counter\n");
    for (reason, n) in counts.reasons.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let _ = writeln!(out, "remit_decision_reasons_total{{reason=\"{reason}\"}} {n}");
    }
    for (name, help, n) in [
        ("remit_store_failures_total", "Decisions denied because the store failed.", &counts.store_failures),
        ("remit_obligation_failures_total", "Allows turned into denies by an obligation.", &counts.obligation_failures),
        ("remit_ignored_fields_total", "Requests that carried state only the gateway fills.", &counts.ignored_fields),
        ("remit_policy_reloads_total", "Policies swapped in.", &counts.reloads),
        (
            "remit_decision_commits_total",
            "Store transactions that committed decisions (group commit).",
            &counts.commits,
        ),
        (
            "remit_store_retries_total",
            "Decisions run again after losing to another gateway's transaction (a shared store).",
            &counts.store_retries,
        ),
        ("remit_shadowed_total", "Denies and escalations answered allow in shadow mode.", &counts.shadowed),
        ("remit_policy_reload_failures_total", "Reloads refused (the policy did not load).", &counts.reload_failures),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", n.load(Ordering::Relaxed));
    }
    if let Some(sent) = app.gateway.store().sent() {
        for (name, help, n) in [
            ("remit_store_statements_total", "Statements sent to the database server.", sent.statements),
            (
                "remit_store_round_trips_total",
                "Round trips to the database server (a pipeline is one).",
                sent.round_trips,
            ),
            ("remit_store_transactions_total", "Transactions begun on the database server.", sent.transactions),
            (
                "remit_store_conflicts_total",
                "Serialization failures, deadlocks and unique violations met (the batch is run again, or denied).",
                sent.conflicts,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {n}");
        }
    }
    app.latency.render("remit_decision_seconds", "Time to decide, log and answer one request.", &mut out);
    counts.log_lag.render(
        "remit_log_lag_seconds",
        "From a decision's arrival to the commit of its log entry (group commit); it is answered only after.",
        &mut out,
    );
    counts.stages.render(&mut out);
    let pending = counts.log_pending.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "# HELP remit_log_pending Decisions arrived and not yet logged.\n# TYPE remit_log_pending gauge\n\
         remit_log_pending {pending}"
    );
    let policy = app.gateway.policy();
    let _ = writeln!(
        out,
        "# HELP remit_mandate_expiry_seconds Seconds until the mandate expires on the gateway's clock (negative: \
         expired); mandates without an end are not listed.\n# TYPE remit_mandate_expiry_seconds gauge"
    );
    let now = app.gateway.now();
    for mandate in &policy.meta.mandates {
        if let Some(until) = mandate.expires_at {
            let _ = writeln!(out, "remit_mandate_expiry_seconds{{mandate=\"{}\"}} {}", mandate.name, until - now);
        }
    }
    let revision = policy.revision;
    let policy = policy.compiled.policy().to_string();
    let _ = writeln!(out, "# HELP remit_policy_info The policy in force.\n# TYPE remit_policy_info gauge");
    let _ = writeln!(out, "remit_policy_info{{policy=\"{policy}\"}} 1");
    if let Some(revision) = revision {
        let _ = writeln!(
            out,
            "# HELP remit_policy_revision The revision of the signed bundle in force.\n# TYPE remit_policy_revision gauge"
        );
        let _ = writeln!(out, "remit_policy_revision {revision}");
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme's name in any case, as HTTP's authentication
/// schemes are: RFC 9110, 11.1), trimmed.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The identity of a bearer token in `tokens`: 401 without a bearer token, 403 with one that is not in `tokens`
/// (an agent's credential, an admin token on the inbox, a token of another gateway).
fn authenticate(headers: &HeaderMap, tokens: &BTreeMap<String, String>) -> Result<String, Response> {
    let bearer = bearer_token(headers).filter(|t| !t.is_empty());
    let Some(token) = bearer else {
        let mut response = error(StatusCode::UNAUTHORIZED, "auth.missing", "a bearer token is required");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Err(response);
    };
    find_token(tokens, token)
        .ok_or_else(|| error(StatusCode::FORBIDDEN, "auth.forbidden", "this token may not use this API"))
}

/// The identity of `token` in `tokens`, comparing it with every configured token in full ([`tokens_equal`]), so
/// the time taken says nothing about which token, or which prefix of one, matched.
pub(crate) fn find_token(tokens: &BTreeMap<String, String>, token: &str) -> Option<String> {
    let mut found = None;
    for (known, identity) in tokens {
        if tokens_equal(known, token) {
            found = Some(identity.clone());
        }
    }
    found
}

/// Whether two tokens are equal, in time that depends on neither their contents nor their lengths: their SHA-256
/// digests (32 bytes whatever the token) are compared byte by byte without an early exit. (Comparing the tokens
/// themselves would return at once on a length mismatch, telling a caller how long the token is.)
pub fn tokens_equal(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    let mut difference = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        difference |= x ^ y;
    }
    std::hint::black_box(difference) == 0
}

fn action_error(e: ActionError) -> Response {
    match e {
        ActionError::NotFound(m) => error(StatusCode::NOT_FOUND, "inbox.not-found", m),
        ActionError::Conflict(m) => error(StatusCode::CONFLICT, "inbox.conflict", m),
        ActionError::Forbidden(m) => error(StatusCode::FORBIDDEN, "auth.forbidden", m),
        ActionError::Invalid(m) => error(StatusCode::UNPROCESSABLE_ENTITY, "inbox.invalid", m),
        ActionError::Store(e) => error(StatusCode::SERVICE_UNAVAILABLE, super::core::REASON_STORE, e.to_string()),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ActionError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(action_error),
        Err(_) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, "gateway.internal", "the request failed")),
    }
}

/// The inbox's pages are never shown inside another site's frame (`frame-ancestors 'none'`, and `X-Frame-Options`
/// for older browsers): a page that framed them could trick a principal into clicking "approve" (clickjacking).
const NO_FRAMING: [(header::HeaderName, &str); 2] =
    [(header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'"), (header::X_FRAME_OPTIONS, "DENY")];

async fn inbox_page() -> impl IntoResponse {
    (NO_FRAMING, Html(include_str!("inbox.html")))
}

/// The page that shows an access request's explanation: it holds no data, and fetches the explanation with the
/// inbox token the inbox page signed in with.
async fn explanation_page() -> impl IntoResponse {
    (NO_FRAMING, Html(include_str!("explanation.html")))
}

/// How many access requests a page of the inbox's list holds without `limit`, and at most.
pub const LIST_LIMIT: usize = 100;
pub const LIST_LIMIT_MAX: usize = 1000;

/// The access requests the token's identity may answer (its own as principal), newest first, a page at a time:
/// `?limit=N` (default [`LIST_LIMIT`], at most [`LIST_LIMIT_MAX`]), `?cursor=C` (the `next_cursor` of the page
/// before), `?status=S`. Each request's arguments are cut to [`super::store::LIST_ARGUMENTS_CHARS`] characters of
/// JSON (`arguments_truncated`); `GET /inbox/api/requests/ID` shows them whole.
async fn inbox_list(State(app): Shared, headers: HeaderMap, Query(query): Query<BTreeMap<String, String>>) -> Response {
    let identity = match authenticate(&headers, &app.tokens.inbox) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => LIST_LIMIT,
        Some(Ok(n)) if (1..=LIST_LIMIT_MAX).contains(&n) => n,
        Some(_) => {
            let message = format!("`limit` is a whole number from 1 to {LIST_LIMIT_MAX}");
            return error(StatusCode::BAD_REQUEST, "http.bad-request", message);
        }
    };
    let cursor = match query.get("cursor").map(|c| super::store::Cursor::parse(c)) {
        None => None,
        Some(Some(cursor)) => Some(cursor),
        Some(None) => {
            let message = "`cursor` is not one this gateway gave (`next_cursor` of the page before)";
            return error(StatusCode::BAD_REQUEST, "http.bad-request", message);
        }
    };
    let status = query.get("status").cloned();
    let gateway = app.gateway.clone();
    let who = identity.clone();
    let list =
        blocking(move || Ok(gateway.access_request_page(&who, status.as_deref(), cursor.as_ref(), limit)?)).await;
    match list {
        Ok(page) => {
            // Whether the requests can be explained: only with the policy's sources (docs/gateway.md).
            let explanations = app.gateway.policy().program.is_some();
            let next = page.next.map(|c| c.token());
            let body = json!({"identity": identity, "requests": page.requests, "explanations": explanations,
                              "next_cursor": next});
            json_response(StatusCode::OK, body.to_string())
        }
        Err(response) => response,
    }
}

/// `GET /inbox/api/mandates`: the principal's authority, as her page shows it — the static mandates whose principal
/// she is (holders, chain, end), and the templates she may grant from: those whose `for` admits her (she grants for
/// herself) or whose `granted by` names her or a prefix of hers (she grants for others), each with its parameters'
/// types and bounds as written, its `for`, `holder` and `granted by` patterns and its window. `grants` says whether
/// this gateway can check a grant (it needs the policy's sources, as explanations do). Her instances are
/// `GET /v1/grants`.
async fn inbox_mandates(State(app): Shared, headers: HeaderMap) -> Response {
    let identity = match authenticate(&headers, &app.tokens.inbox) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let policy = app.gateway.policy();
    let mandates: Vec<&remit_lang::wasm::meta::MandateMeta> =
        policy.meta.mandates.iter().filter(|m| m.principal == identity).collect();
    let templates: Vec<Json> = policy
        .meta
        .templates
        .iter()
        .filter_map(|t| {
            let anyone = t.principals.is_empty() && t.principal_prefixes.is_empty();
            let for_self = anyone || remit_lang::eval::holds(&t.principals, &t.principal_prefixes, &identity);
            let for_others = remit_lang::eval::holds(&t.granted_by.ids, &t.granted_by.prefixes, &identity);
            if !for_self && !for_others {
                return None;
            }
            let mut template = serde_json::to_value(t).expect("plain data serializes");
            template["for_self"] = Json::Bool(for_self);
            template["for_others"] = Json::Bool(for_others);
            Some(template)
        })
        .collect();
    let body = json!({"identity": identity, "mandates": mandates, "templates": templates,
                      "grants": policy.program.is_some()});
    json_response(StatusCode::OK, body.to_string())
}

async fn inbox_one(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let identity = match authenticate(&headers, &app.tokens.inbox) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    let found = blocking(move || Ok(gateway.access_request(&id)?)).await;
    match found {
        Ok(Some(request)) if app.gateway.may_answer(&request, &identity) => {
            json_response(StatusCode::OK, serde_json::to_string(&request).expect("serializes"))
        }
        Ok(_) => error(StatusCode::NOT_FOUND, "inbox.not-found", "no such access request for you"),
        Err(response) => response,
    }
}

/// `GET /inbox/api/requests/{id}/explanation`: the escalated decision drawn as the path it took, as a
/// self-contained HTML page (`text/html`, no scripts, all request text escaped; a content security policy forbids
/// scripts should anything slip through) or, with `Accept: text/plain`, as text. Same authentication and
/// visibility as the request itself; `501` when the gateway has no policy sources, `409` when the logged decision
/// cannot be explained by the policy in force.
async fn inbox_explanation(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let identity = match authenticate(&headers, &app.tokens.inbox) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let plain = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/plain"));
    let gateway = app.gateway.clone();
    let explained = tokio::task::spawn_blocking(move || {
        let request = match gateway.access_request(&id) {
            Ok(Some(request)) if app.gateway.may_answer(&request, &identity) => request,
            Ok(_) => return Err(error(StatusCode::NOT_FOUND, "inbox.not-found", "no such access request for you")),
            Err(e) => return Err(error(StatusCode::SERVICE_UNAVAILABLE, super::core::REASON_STORE, e.to_string())),
        };
        gateway.explain(&request).map_err(|e| {
            let status = match e {
                NoExplanation::NoSources => StatusCode::NOT_IMPLEMENTED,
                NoExplanation::Unexplainable(_) => StatusCode::CONFLICT,
                NoExplanation::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            error(status, "explain.unavailable", e.to_string())
        })
    })
    .await;
    match explained {
        Ok(Ok(explanation)) if plain => {
            let text = remit_lang::picture::explain::text(&explanation, false);
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
        }
        Ok(Ok(explanation)) => {
            let page = remit_lang::picture::explain::html(&explanation);
            let csp = "default-src 'none'; style-src 'unsafe-inline'";
            ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CONTENT_SECURITY_POLICY, csp)], page)
                .into_response()
        }
        Ok(Err(response)) => response,
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "gateway.internal", "the request failed"),
    }
}

async fn inbox_approve(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let identity = match authenticate(&headers, &app.tokens.inbox) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    match blocking(move || gateway.approve(&id, &identity)).await {
        Ok(minted) => json_response(StatusCode::OK, json!({"status": "approved", "approvals": minted}).to_string()),
        Err(response) => response,
    }
}

async fn inbox_deny(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let identity = match authenticate(&headers, &app.tokens.inbox) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    match blocking(move || gateway.deny_request(&id, &identity)).await {
        Ok(()) => json_response(StatusCode::OK, json!({"status": "denied"}).to_string()),
        Err(response) => response,
    }
}

async fn admin_state(State(app): Shared, headers: HeaderMap) -> Response {
    if let Err(response) = authenticate(&headers, &app.tokens.admin) {
        return response;
    }
    let gateway = app.gateway.clone();
    match blocking(move || Ok(gateway.state()?)).await {
        Ok(state) => json_response(StatusCode::OK, state.to_string()),
        Err(response) => response,
    }
}

async fn set_stop(app: Arc<App>, headers: HeaderMap, mandate: String, active: bool) -> Response {
    let identity = match authenticate(&headers, &app.tokens.admin) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    let m = mandate.clone();
    match blocking(move || gateway.set_stop(&m, active, &identity)).await {
        Ok(()) => json_response(StatusCode::OK, json!({"mandate": mandate, "stopped": active}).to_string()),
        Err(response) => response,
    }
}

async fn admin_stop(State(app): Shared, headers: HeaderMap, Path(mandate): Path<String>) -> Response {
    set_stop(app, headers, mandate, true).await
}

async fn admin_unstop(State(app): Shared, headers: HeaderMap, Path(mandate): Path<String>) -> Response {
    set_stop(app, headers, mandate, false).await
}

/// `POST /admin/v1/reload`: loads the policy again and swaps it in atomically (decisions in flight finish on the old
/// one); a policy that does not load leaves the current one in force (`422`).
async fn admin_reload(State(app): Shared, headers: HeaderMap) -> Response {
    if let Err(response) = authenticate(&headers, &app.tokens.admin) {
        return response;
    }
    let Some(reloader) = app.reloader.clone() else {
        return error(StatusCode::NOT_FOUND, "reload.unavailable", "this gateway cannot reload its policy");
    };
    let gateway = app.gateway.clone();
    let swapped = tokio::task::spawn_blocking(move || {
        let policy = reloader()?;
        let hash = policy.compiled.policy().to_string();
        gateway.swap_policy(policy);
        Ok::<_, String>(hash)
    })
    .await;
    match swapped {
        Ok(Ok(policy)) => json_response(StatusCode::OK, json!({"policy": policy}).to_string()),
        Ok(Err(e)) => {
            app.gateway.counts.reload_failures.fetch_add(1, Ordering::Relaxed);
            error(StatusCode::UNPROCESSABLE_ENTITY, "reload.failed", e)
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "gateway.internal", "the reload failed"),
    }
}

/// `PUT /admin/v1/facts/NAME` with `{"version": N}`.
/// `PUT /admin/v1/stop-ids/ID` with `{"level": …, "mandate": …}` or `{"level": …, "principal": …}`: a stop with an
/// id and a level (docs/gateway.md "Stops").
async fn admin_stop_record(State(app): Shared, headers: HeaderMap, Path(id): Path<String>, body: Bytes) -> Response {
    let identity = match authenticate(&headers, &app.tokens.admin) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let text = |key: &str| object.get(key).and_then(Json::as_str).map(str::to_string);
    let usage = "the body must be `{\"level\": LEVEL, \"mandate\": NAME}` or `{\"level\": LEVEL, \"principal\": ID}`";
    let Some(level) = text("level") else {
        return error(StatusCode::BAD_REQUEST, "http.bad-request", usage);
    };
    let stop = StopRecord { id, level, mandate: text("mandate"), principal: text("principal") };
    let gateway = app.gateway.clone();
    let record = stop.clone();
    match blocking(move || gateway.set_stop_record(&record, &identity)).await {
        Ok(()) => json_response(StatusCode::OK, json!({"stop": stop, "stopped": true}).to_string()),
        Err(response) => response,
    }
}

async fn admin_clear_stop_record(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let identity = match authenticate(&headers, &app.tokens.admin) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    let i = id.clone();
    match blocking(move || gateway.clear_stop_record(&i, &identity)).await {
        Ok(()) => json_response(StatusCode::OK, json!({"id": id, "stopped": false}).to_string()),
        Err(response) => response,
    }
}

async fn admin_fact(State(app): Shared, headers: HeaderMap, Path(name): Path<String>, body: Bytes) -> Response {
    let identity = match authenticate(&headers, &app.tokens.admin) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let Some(version) = object.get("version").and_then(FactVersion::from_json) else {
        let shape =
            "the body must be `{\"version\": N}` (N ≥ 0) or `{\"version\": \"TEXT\"}` (not blank, not digits alone)";
        return error(StatusCode::BAD_REQUEST, "http.bad-request", shape);
    };
    let gateway = app.gateway.clone();
    let n = name.clone();
    let answer = json!({"fact": name, "version": version.to_json()}).to_string();
    match blocking(move || gateway.set_fact(&n, &version, &identity)).await {
        Ok(()) => json_response(StatusCode::OK, answer),
        Err(response) => response,
    }
}

/// Who calls the grants API: an inbox identity, or an admin (by the admin token's name; an admin sees every
/// instance). 401 without a bearer token, 403 with one of neither kind.
fn grants_caller(app: &App, headers: &HeaderMap) -> Result<(String, bool), Response> {
    match authenticate(headers, &app.tokens.inbox) {
        Ok(identity) => Ok((identity, false)),
        Err(response) if response.status() == StatusCode::FORBIDDEN => {
            authenticate(headers, &app.tokens.admin).map(|name| (name, true))
        }
        Err(response) => Err(response),
    }
}

fn grant_error(e: GrantError) -> Response {
    match e {
        GrantError::NotFound(m) => error(StatusCode::NOT_FOUND, "grant.not-found", m),
        GrantError::Forbidden(m) => error(StatusCode::FORBIDDEN, "grant.forbidden", m),
        GrantError::Revoked(m) => error(StatusCode::CONFLICT, "grant.revoked", m),
        GrantError::Unavailable(m) => error(StatusCode::NOT_IMPLEMENTED, "grant.unavailable", m),
        GrantError::Refused { message, refusal } => {
            let body = json!({"error": {"code": "grant.refused", "message": message, "refusal": refusal}});
            json_response(StatusCode::UNPROCESSABLE_ENTITY, body.to_string())
        }
        GrantError::Store(e) => error(StatusCode::SERVICE_UNAVAILABLE, super::core::REASON_STORE, e.to_string()),
    }
}

/// Runs a grants call of the core on the blocking pool, answering its value with `status`.
async fn grants_call<T: serde::Serialize + Send + 'static>(
    status: StatusCode,
    f: impl FnOnce() -> Result<T, GrantError> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(value)) => json_response(status, serde_json::to_string(&value).expect("serializes")),
        Ok(Err(e)) => grant_error(e),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "gateway.internal", "the request failed"),
    }
}

/// `params` of a body: an object (`{}` when absent).
fn grant_params(object: &Map<String, Json>) -> Result<Map<String, Json>, Response> {
    match object.get("params") {
        None => Ok(Map::new()),
        Some(Json::Object(params)) => Ok(params.clone()),
        Some(_) => Err(error(StatusCode::BAD_REQUEST, "http.bad-request", "`params` must be an object")),
    }
}

/// `POST /v1/grants` with `{template, principal, holder, params}`: `201` and the instance's first version.
async fn grants_grant(State(app): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let (identity, _) = match grants_caller(&app, &headers) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let text = |key: &str| object.get(key).and_then(Json::as_str).map(str::to_string);
    let parent = text("parent");
    // A sub-delegated instance acts for its parent's principal: it need not be written again.
    let principal = text("principal").or_else(|| parent.as_ref().map(|_| String::new()));
    let (Some(template), Some(principal), Some(holder)) = (text("template"), principal, text("holder")) else {
        let usage = "the body must be `{\"template\": NAME, \"principal\": ID, \"holder\": ID, \"params\": {…}}` \
                     (`\"parent\": ID` instead of `principal` for an instance sub-delegated from another)";
        return error(StatusCode::BAD_REQUEST, "http.bad-request", usage);
    };
    if object.get("parent").is_some_and(|p| !p.is_string()) {
        return error(StatusCode::BAD_REQUEST, "http.bad-request", "`parent` must be an instance's id");
    }
    let params = match grant_params(&object) {
        Ok(params) => params,
        Err(response) => return response,
    };
    let ask = GrantAsk { template, principal, holder, params, parent };
    let gateway = app.gateway.clone();
    grants_call(StatusCode::CREATED, move || gateway.grant(&identity, &ask)).await
}

/// `GET /v1/grants?principal=…&holder=…`: the current versions the caller may see.
async fn grants_list(
    State(app): Shared,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let (identity, admin) = match grants_caller(&app, &headers) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    grants_call(StatusCode::OK, move || {
        let grants = gateway.grants(
            &identity,
            admin,
            query.get("principal").map(String::as_str),
            query.get("holder").map(String::as_str),
        )?;
        Ok(json!({"grants": grants}))
    })
    .await
}

/// `GET /v1/grants/{id}`: every version, oldest first.
async fn grants_show(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let (identity, admin) = match grants_caller(&app, &headers) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    grants_call(StatusCode::OK, move || {
        Ok(json!({"id": id, "versions": gateway.grant_history(&identity, admin, &id)?}))
    })
    .await
}

/// `PUT /v1/grants/{id}` with `{params}`: a new version.
async fn grants_change(State(app): Shared, headers: HeaderMap, Path(id): Path<String>, body: Bytes) -> Response {
    let (identity, _) = match grants_caller(&app, &headers) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let params = match parse_object(&body).and_then(|object| grant_params(&object)) {
        Ok(params) => params,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    grants_call(StatusCode::OK, move || gateway.change_grant(&identity, &id, &params)).await
}

/// `DELETE /v1/grants/{id}`: revokes; answered after the commit, so the next decision of the holder, on any
/// replica, is not filled with it.
async fn grants_revoke(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let (identity, _) = match grants_caller(&app, &headers) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    grants_call(StatusCode::OK, move || gateway.revoke_grant(&identity, &id)).await
}

/// The data sets (docs/gateway.md "Data sets"): a change by the admin, answered with the new data version.
async fn change_data(app: Arc<App>, headers: HeaderMap, change: DataChange) -> Response {
    let identity = match authenticate(&headers, &app.tokens.admin) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let gateway = app.gateway.clone();
    match blocking(move || gateway.change_data(&change, &identity)).await {
        Ok(version) => json_response(StatusCode::OK, json!({"data_version": version}).to_string()),
        Err(response) => response,
    }
}

/// A read of the data sets by key.
async fn read_data(
    app: Arc<App>,
    headers: HeaderMap,
    read: impl FnOnce(&Gateway) -> Result<Json, ActionError> + Send + 'static,
) -> Response {
    if let Err(response) = authenticate(&headers, &app.tokens.admin) {
        return response;
    }
    let gateway = app.gateway.clone();
    match blocking(move || read(&gateway)).await {
        Ok(answer) => json_response(StatusCode::OK, answer.to_string()),
        Err(response) => response,
    }
}

/// `PUT /admin/v1/data/entities/TYPE/ID` with `{"attributes": {…}}`: the admin's attributes of the entity (replaced
/// whole).
async fn admin_data_put_entity(
    State(app): Shared,
    headers: HeaderMap,
    Path((kind, id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    if let Err(response) = authenticate(&headers, &app.tokens.admin) {
        return response;
    }
    let object = match parse_object(&body) {
        Ok(object) => object,
        Err(response) => return response,
    };
    let attributes = match (object.get("attributes"), object.len()) {
        (Some(Json::Object(attributes)), 1) => attributes.clone(),
        _ => return error(StatusCode::BAD_REQUEST, "http.bad-request", "the body must be `{\"attributes\": {…}}`"),
    };
    change_data(app, headers, DataChange::Entity { kind, id, attributes: Some(attributes) }).await
}

async fn admin_data_delete_entity(
    State(app): Shared,
    headers: HeaderMap,
    Path((kind, id)): Path<(String, String)>,
) -> Response {
    change_data(app, headers, DataChange::Entity { kind, id, attributes: None }).await
}

/// `GET /admin/v1/data/entities/TYPE/ID`: the entity's attributes over both origins (`404` when none keeps it).
async fn admin_data_entity(
    State(app): Shared,
    headers: HeaderMap,
    Path((kind, id)): Path<(String, String)>,
) -> Response {
    read_data(app, headers, move |gateway| match gateway.data_entity(&kind, &id)? {
        Some(attributes) => Ok(json!({"type": kind, "id": id, "attributes": attributes})),
        None => Err(ActionError::NotFound(format!("no entity `{kind}` `{id}` in the data sets"))),
    })
    .await
}

async fn admin_data_add_tuple(
    State(app): Shared,
    headers: HeaderMap,
    Path((relation, a, b)): Path<(String, String, String)>,
) -> Response {
    change_data(app, headers, DataChange::Tuple { relation, a, b, holds: true }).await
}

async fn admin_data_remove_tuple(
    State(app): Shared,
    headers: HeaderMap,
    Path((relation, a, b)): Path<(String, String, String)>,
) -> Response {
    change_data(app, headers, DataChange::Tuple { relation, a, b, holds: false }).await
}

/// `GET /admin/v1/data/relations/R/A/B`: `{"holds": bool}`.
async fn admin_data_holds(
    State(app): Shared,
    headers: HeaderMap,
    Path((relation, a, b)): Path<(String, String, String)>,
) -> Response {
    read_data(app, headers, move |gateway| {
        let holds = gateway.data_holds(&relation, &a, &b)?;
        Ok(json!({"relation": relation, "args": [a, b], "holds": holds}))
    })
    .await
}

/// `GET /admin/v1/data/relations/R/A`: every `B` with `R(A, B)`.
async fn admin_data_related(
    State(app): Shared,
    headers: HeaderMap,
    Path((relation, a)): Path<(String, String)>,
) -> Response {
    read_data(app, headers, move |gateway| {
        let related = gateway.data_related(&relation, &a)?;
        Ok(json!({"relation": relation, "a": a, "b": related}))
    })
    .await
}

async fn admin_data_add_holiday(
    State(app): Shared,
    headers: HeaderMap,
    Path((calendar, date)): Path<(String, String)>,
) -> Response {
    change_data(app, headers, DataChange::Holiday { calendar, date, holds: true }).await
}

async fn admin_data_remove_holiday(
    State(app): Shared,
    headers: HeaderMap,
    Path((calendar, date)): Path<(String, String)>,
) -> Response {
    change_data(app, headers, DataChange::Holiday { calendar, date, holds: false }).await
}

/// `GET /admin/v1/data/holidays/CALENDAR`: the calendar's holidays, sorted.
async fn admin_data_holidays(State(app): Shared, headers: HeaderMap, Path(calendar): Path<String>) -> Response {
    read_data(app, headers, move |gateway| {
        let dates = gateway.data_related(crate::store::HOLIDAY_RELATION, &calendar)?;
        Ok(json!({"calendar": calendar, "holidays": dates}))
    })
    .await
}

/// `POST /admin/v1/data/load?format=json|csv[&replace=true]` with the file as the body: a bulk load, atomic
/// (`422` naming the first bad record's line, and nothing loaded).
async fn admin_data_load(State(app): Shared, headers: HeaderMap, RawQuery(query): RawQuery, body: Bytes) -> Response {
    let identity = match authenticate(&headers, &app.tokens.admin) {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let (mut format, mut replace) = (Format::Json, false);
    for pair in query.as_deref().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("format", value)) => match Format::parse(value) {
                Ok(parsed) => format = parsed,
                Err(message) => return error(StatusCode::BAD_REQUEST, "http.bad-request", message),
            },
            Some(("replace", value @ ("true" | "false"))) => replace = value == "true",
            _ => {
                let message = format!("`{pair}`: the query is `format=json|csv` and `replace=true|false`");
                return error(StatusCode::BAD_REQUEST, "http.bad-request", message);
            }
        }
    }
    let gateway = app.gateway.clone();
    match blocking(move || gateway.load_data(&body, format, replace, &identity)).await {
        Ok(answer) => json_response(StatusCode::OK, answer.to_string()),
        Err(response) => response,
    }
}

/// How a gateway stops on SIGTERM or Ctrl-C ([`run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    /// How long `/ready` answers 503 while the gateway still accepts and serves: the time a load balancer needs to
    /// see it and send elsewhere (its check interval times the failures it waits for).
    pub delay: Duration,
    /// Then, how long the requests in flight may take to finish (no new connection is accepted) before the process
    /// goes on stopping anyway: a decision answered by then was logged before its response; one cut is not answered.
    pub timeout: Duration,
}

impl Default for Drain {
    fn default() -> Drain {
        Drain { delay: Duration::ZERO, timeout: Duration::from_secs(30) }
    }
}

/// Runs a gateway on `listen` until SIGTERM or Ctrl-C, then drains ([`Drain`]: `/ready` 503 at once, the listener
/// closed after `delay`, the requests in flight given `timeout`); `make` gets the bound address (port 0 picks one)
/// and returns the gateway and the tokens. On one runtime of a worker per core, not [`run_router`]'s runtime per
/// core: `remit serve`'s batches run on the committer thread (or in place, for a lone call) anyway, and its
/// throughput under many connections (where one runtime may accept more of them than another) was measured with
/// this model only.
pub fn run(
    listen: &str,
    tls: Option<ServerTls>,
    limits: Limits,
    drain: Drain,
    make: impl FnOnce(SocketAddr) -> (Arc<Gateway>, Tokens, Option<Reloader>),
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let served = runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(listen).await.map_err(|e| format!("cannot listen on `{listen}`: {e}"))?;
        let address = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
        let (gateway, tokens, reloader) = make(address);
        let connections = Connections::new(limits);
        let draining = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let router = router_draining(gateway, tokens, reloader, draining.clone());
        let (closed, listener_closed) = tokio::sync::oneshot::channel::<()>();
        let stop = async move {
            shutdown_signal().await;
            draining.store(true, Ordering::Relaxed);
            eprintln!(
                "stopping: /ready answers 503; the listener closes in {:?}, then requests in flight get {:?}",
                drain.delay, drain.timeout
            );
            tokio::time::sleep(drain.delay).await;
            let _ = closed.send(());
        };
        let served = serve_with(listener, router, tls, connections, stop);
        let bound = async move {
            match listener_closed.await {
                Ok(()) => tokio::time::sleep(drain.timeout).await,
                // The server ended before the signal (it failed): nothing to bound.
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            served = served => served.map_err(|e| format!("the server failed: {e}")),
            _ = bound => {
                eprintln!("stopping: requests still in flight after {:?}; they are cut (none was answered)", drain.timeout);
                Ok(())
            }
        }
    });
    // A decision still running on a blocking thread is not waited for past a moment: its transaction commits or
    // rolls back in the store, and its caller was not answered.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served
}

/// Serves `router` on an already bound listener until SIGTERM or Ctrl-C (then finishes the requests in flight), on
/// as many async runtimes as the machine has cores, each of one worker thread and each accepting on the listener: a
/// connection is served, from its first byte to its last response, by the runtime that accepted it (the model of
/// Envoy's workers). Why not one runtime of several workers: its scheduler wakes an idle worker to look for work at
/// every event, and a task may move between workers; on `remit mcp-proxy --listen`'s path (an agent's call, the
/// decision, the call upstream, the response) that was two to three more thread wake-ups per call than one worker
/// needs (bench/mcp prints the proxy's context switches per call), each costing tens of µs on a shared VM.
/// The runtimes share one connection limit.
pub fn run_router(
    listener: std::net::TcpListener,
    router: Router,
    tls: Option<ServerTls>,
    limits: Limits,
) -> Result<(), String> {
    listener.set_nonblocking(true).map_err(|e| format!("cannot use the listener: {e}"))?;
    let connections = Connections::new(limits);
    let count = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (done, mut ended) = tokio::sync::mpsc::unbounded_channel::<Result<(), String>>();
    let mut servers = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = listener.try_clone().map_err(|e| format!("cannot use the listener: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let (router, tls, mut stopped, done) = (router.clone(), tls.clone(), stopped.clone(), done.clone());
        let connections = connections.clone();
        servers.push(std::thread::spawn(move || {
            let served = runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).map_err(|e| format!("cannot listen: {e}"))?;
                let stop = async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                };
                serve_with(listener, router, tls, connections, stop)
                    .await
                    .map_err(|e| format!("the server failed: {e}"))
            });
            let _ = done.send(served);
        }));
    }
    drop(done);
    // This thread waits for the signal, or for a server that ended on its own (it failed), then stops them all.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let failed = signals.block_on(async {
        tokio::select! {
            _ = shutdown_signal() => None,
            ended = ended.recv() => ended,
        }
    });
    let _ = stop.send(true);
    for server in servers {
        let _ = server.join();
    }
    let mut outcome = failed.unwrap_or(Ok(()));
    while let Ok(served) = ended.try_recv() {
        outcome = outcome.and(served);
    }
    outcome
}

/// Serves `router` on an already bound listener from a thread of its own (with its own async runtime) until the
/// process ends: how `remit mcp-proxy` offers the inbox beside its stdio session.
pub fn serve_in_background(
    listener: std::net::TcpListener,
    router: Router,
    tls: Option<ServerTls>,
    limits: Limits,
) -> Result<(), String> {
    listener.set_nonblocking(true).map_err(|e| format!("cannot use the listener: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => {
                    let connections = Connections::new(limits);
                    if let Err(e) = serve_with(listener, router, tls, connections, std::future::pending()).await {
                        eprintln!("the inbox server failed: {e}");
                    }
                }
                Err(e) => eprintln!("the inbox server cannot listen: {e}"),
            }
        })
    });
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn tokens_are_compared_by_digest_whatever_their_length() {
        assert!(tokens_equal("ops-admin-token", "ops-admin-token"));
        for other in ["ops-admin-tokem", "ops-admin-token-", "ops-admin-toke", "", "OPS-ADMIN-TOKEN"] {
            assert!(!tokens_equal("ops-admin-token", other), "{other:?}");
        }
        let tokens = BTreeMap::from([("alice-token-1".to_string(), "user:alice".to_string())]);
        assert_eq!(find_token(&tokens, "alice-token-1").as_deref(), Some("user:alice"));
        assert_eq!(find_token(&tokens, "alice-token"), None);
    }

    #[test]
    fn one_token_for_two_uses_is_refused_without_naming_it() {
        let mut tokens = Tokens::default();
        tokens.inbox.insert("shared-secret-1".into(), "user:alice".into());
        tokens.admin.insert("admin-secret-1".into(), "ops".into());
        assert!(tokens.check_distinct([]).is_ok());
        assert!(tokens.check_distinct([("agent-secret-1", "agent", "agent:coder")]).is_ok());
        let agent = tokens.check_distinct([("shared-secret-1", "agent", "agent:coder")]).unwrap_err();
        assert!(
            agent.contains("`user:alice` (inbox token)") && agent.contains("`agent:coder` (agent token)"),
            "{agent}"
        );
        tokens.pep.insert("admin-secret-1".into(), "backend".into());
        let pep = tokens.check_distinct([]).unwrap_err();
        assert!(pep.contains("`ops`") && pep.contains("`backend`") && !pep.contains("admin-secret-1"), "{pep}");
    }

    /// An event written soon after another reaches the client at once. Without `TCP_NODELAY` the kernel holds a
    /// small write back while the previous one is not yet acknowledged (Nagle's algorithm), and a client that has
    /// been exchanging requests and responses on the connection delays its acknowledgement (up to about 40 ms on
    /// Linux): a notification on an agent's event stream would wait for it.
    #[test]
    fn a_second_event_is_not_held_back() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let address = listener.local_addr().unwrap();
        let router = Router::new().route("/ping", get(|| async { "pong" })).route(
            "/events",
            get(|| async {
                let events = futures_util::stream::unfold(0, |sent| async move {
                    if sent == 2 {
                        return None;
                    }
                    if sent == 1 {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    Some((Ok::<_, std::convert::Infallible>(format!("event {sent}\n")), sent + 1))
                });
                axum::body::Body::from_stream(events)
            }),
        );
        runtime.spawn(serve(listener, router, None, std::future::pending()));
        let mut client = std::net::TcpStream::connect(address).unwrap();
        let mut buffer = [0u8; 4096];
        let mut gaps = Vec::new();
        for _ in 0..5 {
            // Requests and responses first, as an agent's session has them before it listens.
            for _ in 0..3 {
                client.write_all(b"GET /ping HTTP/1.1\r\nhost: test\r\n\r\n").unwrap();
                let mut seen = Vec::new();
                while !String::from_utf8_lossy(&seen).contains("pong") {
                    let n = client.read(&mut buffer).unwrap();
                    assert!(n > 0, "the connection closed");
                    seen.extend_from_slice(&buffer[..n]);
                }
            }
            client.write_all(b"GET /events HTTP/1.1\r\nhost: test\r\n\r\n").unwrap();
            let mut seen = Vec::new();
            let mut first = None;
            while !String::from_utf8_lossy(&seen).contains("event 1") {
                let n = client.read(&mut buffer).unwrap();
                assert!(n > 0, "the stream ended early: {}", String::from_utf8_lossy(&seen));
                seen.extend_from_slice(&buffer[..n]);
                if first.is_none() && String::from_utf8_lossy(&seen).contains("event 0") {
                    first = Some(std::time::Instant::now());
                }
            }
            // The chunked body's end, so that the connection is ready for the next request.
            while !String::from_utf8_lossy(&seen).ends_with("0\r\n\r\n") {
                let n = client.read(&mut buffer).unwrap();
                assert!(n > 0, "the stream ended early");
                seen.extend_from_slice(&buffer[..n]);
            }
            gaps.push(first.expect("the first event came first").elapsed());
        }
        // The shortest of five: a load spike can delay one, while Nagle's algorithm delays them all.
        let shortest = *gaps.iter().min().unwrap();
        assert!(shortest < std::time::Duration::from_millis(25), "gaps between the events: {gaps:?}");
    }
}
