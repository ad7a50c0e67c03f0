//! MCP as the proxy speaks it, on both sides: JSON-RPC 2.0 messages (one per line over stdio), the protocol
//! revisions (2025-06-18 and the earlier ones it accepts, and the stateless revision 2026-07-28 with its `_meta`
//! envelope and typed results), the error codes, and the reading of a message by its head without parsing it into a
//! tree. Shared by the agent's side (the stdio front, `stdio`; Streamable HTTP, `http`), the upstream side
//! (`upstream`) and the decisions (`decision`); depends on no other module of the crate.

use std::io::BufRead;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value as Json};

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

/// The stateless revision: no `initialize`, no session; each request carries its revision, client info and
/// capabilities in `params._meta` and mirrors its method (and tool, prompt or resource) in headers.
pub const STATELESS_VERSION: &str = "2026-07-28";
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Where a stateless result names the server (`_meta`).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The JSON-RPC error of 2026-07-28 for a protocol version the server does not speak.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// Results a 2026-07-28 client may cache: they carry `ttlMs` and `cacheScope`.
const CACHEABLE: [&str; 6] =
    ["server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"];

/// The `_meta` key under which a tool result carries remit's decision.
pub const META_DECISION: &str = "remit.dev/decision";

/// The `_meta` key that tags every message of a `subscriptions/listen` stream with the request's id (2026-07-28).
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The result type of revision 2026-07-28 that asks the client for input (elicitation, sampling, roots) before the
/// server answers: the client answers in `inputResponses` when it sends the same request again.
pub const INPUT_REQUIRED: &str = "input_required";

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

    pub(crate) fn to_json(&self) -> Json {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    /// The error object of a response, as the upstream sent it.
    pub(crate) fn from_json(error: &Json) -> RpcError {
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
pub(crate) fn response(id: &Json, outcome: Result<Json, RpcError>) -> Json {
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
pub(crate) fn request_message(id: u64, method: &str, params: Option<Json>) -> Json {
    let mut message = Map::with_capacity(4);
    message.insert("jsonrpc".into(), Json::from("2.0"));
    message.insert("id".into(), Json::from(id));
    message.insert("method".into(), Json::from(method));
    if let Some(params) = params {
        message.insert("params".into(), params);
    }
    Json::Object(message)
}

/// A message as one line to the agent.
pub(crate) fn line(message: &Json) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("a JSON value serializes");
    line.push(b'\n');
    line
}

/// `result` as 2026-07-28 writes it for `method`.
pub fn stateless_result(method: &str, mut result: Json) -> Json {
    if let Some(fields) = result.as_object_mut() {
        fields.entry("resultType").or_insert_with(|| json!("complete"));
        if CACHEABLE.contains(&method) {
            fields.entry("ttlMs").or_insert_with(|| json!(0));
            fields.entry("cacheScope").or_insert_with(|| json!("private"));
        }
    }
    result
}

/// The revisions `server/discover` names: the stateless one first, then those `initialize` accepts.
pub(crate) fn stateless_versions() -> Vec<&'static str> {
    let mut versions = vec![STATELESS_VERSION];
    versions.extend(SUPPORTED_VERSIONS);
    versions
}

/// The error an agent gets for an upstream result the proxy does not relay to it.
pub(crate) fn not_relayed(result_type: &str) -> RpcError {
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
pub(crate) fn result_type(result: &Json) -> Option<&str> {
    result.get("resultType").and_then(Json::as_str)
}

/// Whether a tool result says it failed (`isError`).
pub(crate) fn is_error(result: &Json) -> bool {
    result.get("isError").and_then(Json::as_bool).unwrap_or(false)
}

/// A tool's `name`.
pub(crate) fn tool_name(tool: &Json) -> Option<&str> {
    tool.get("name").and_then(Json::as_str)
}

/// Whether a message with `method` is a request, which the agent must send with an id: every method but the
/// notifications (`notifications/…`: `initialized`, `cancelled`, `progress`, `roots/list_changed`, …), whatever
/// the method (MCP's requests — `tools/call`, `tools/list`, `resources/read`, `prompts/get`, … — and any other).
pub(crate) fn is_request_method(method: &str) -> bool {
    !method.starts_with("notifications/")
}

/// The capabilities the proxy announces for the upstream session `upstream` (its `initialize` result): the
/// upstream's, always an object and always with `tools` (the proxy lists tools even for a server that has none).
pub(crate) fn offered_capabilities(upstream: &Json) -> Json {
    let mut capabilities = upstream.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    if !capabilities.is_object() {
        capabilities = json!({});
    }
    if capabilities.get("tools").is_none() {
        capabilities["tools"] = json!({});
    }
    capabilities
}

/// A response's `result`, as the upstream wrote it: one JSON value (checked), not parsed into a tree.
pub(crate) struct RawResult(pub(crate) String);

/// The members of a message from the upstream that say what it is, the others skipped (checked, not parsed): a
/// response to the proxy is handed on without being parsed into a tree.
#[derive(serde::Deserialize)]
pub(crate) struct Head<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(crate) method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(crate) result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(crate) error: Option<&'a RawValue>,
}

/// The members of a tool result the proxy looks at; the others are checked and skipped.
#[derive(serde::Deserialize)]
pub(crate) struct ResultHead<'a> {
    #[serde(rename = "isError", borrow, default, deserialize_with = "present")]
    pub(crate) is_error: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default, deserialize_with = "present")]
    pub(crate) meta: Option<&'a RawValue>,
    #[serde(rename = "resultType", borrow, default, deserialize_with = "present")]
    pub(crate) result_type: Option<&'a RawValue>,
    #[serde(rename = "requestState", borrow, default, deserialize_with = "present")]
    pub(crate) request_state: Option<&'a RawValue>,
}

/// A member that is there, `null` included (`Option`'s own reading takes `null` for absent).
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    serde::Deserialize::deserialize(value).map(Some)
}

/// The rest of a line after its `start`: `start`, then `rest` up to and including the line's end (then nothing).
pub(crate) struct LineRest<'a, R> {
    pub(crate) start: &'a [u8],
    pub(crate) rest: &'a mut R,
    pub(crate) ended: bool,
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
