//! One HTTP/1.1 exchange with an MCP server over Streamable HTTP, read as it arrives (std only), on a new connection
//! or one kept open from an earlier exchange ([`Connections`]): the status and
//! headers, then a JSON body framed by `Content-Length` or chunks, or an event stream read event by event until
//! the caller has the message it waits for. A server may keep an event stream (or the connection) open after the
//! response; reading to the end of the connection would wait for the server's timeout. Also the header values of
//! MCP 2026-07-28 (`Mcp-Name`, `Mcp-Param-*`: plain, or `=?base64?…?=`) and the `x-mcp-header` annotations of a
//! tool's input schema that say which arguments a `tools/call` mirrors into `Mcp-Param-{Name}` headers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value as Json;

/// The status, the headers (lowercase names) and a reader of the body (framing removed).
pub struct Exchange {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    body: BufReader<Body>,
    /// The connection may serve another exchange once this body is read to its end (HTTP/1.1 keep-alive: asked for,
    /// and the server did not say `Connection: close`).
    reusable: bool,
}

/// Idle connections to one server, kept open between exchanges (HTTP/1.1 keep-alive), so that a message does not
/// pay for a new TCP connection (and the server for accepting it).
#[derive(Debug, Default)]
pub struct Connections {
    idle: std::sync::Mutex<Vec<BufReader<TcpStream>>>,
}

/// The most idle connections kept per server.
const MAX_IDLE: usize = 4;

impl Connections {
    fn take(&self) -> Option<BufReader<TcpStream>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    /// Keeps the connection of a finished exchange when its body can be read to the end without waiting (an event
    /// stream the server keeps open after the response is closed instead).
    pub fn release(&self, exchange: Exchange) {
        if !exchange.reusable {
            return;
        }
        let mut body = exchange.body;
        let socket = body.get_ref().stream.get_ref().try_clone();
        let Ok(socket) = socket else { return };
        if socket.set_nonblocking(true).is_err() {
            return;
        }
        let mut scratch = [0u8; 4096];
        let mut left = 64 << 10;
        let ended = loop {
            match body.read(&mut scratch) {
                Ok(0) => break true,
                Ok(n) if n < left => left -= n,
                _ => break false,
            }
        };
        if !ended || socket.set_nonblocking(false).is_err() {
            return;
        }
        let body = body.into_inner();
        let done = matches!(body.framing, Framing::Length(0) | Framing::Chunked { done: true, .. });
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if done && idle.len() < MAX_IDLE {
            idle.push(body.stream);
        }
    }
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange").field("status", &self.status).finish_non_exhaustive()
    }
}

enum Framing {
    Length(u64),
    /// Bytes left in the current chunk; `None` before the first chunk and after the last one.
    Chunked {
        left: u64,
        done: bool,
    },
    UntilClose,
}

struct Body {
    stream: BufReader<TcpStream>,
    framing: Framing,
}

impl Read for Body {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.framing {
            Framing::Length(0) => Ok(0),
            Framing::Length(left) => {
                let want = out.len().min(*left as usize);
                let n = self.stream.read(&mut out[..want])?;
                *left -= n as u64;
                Ok(n)
            }
            Framing::UntilClose => self.stream.read(out),
            Framing::Chunked { done: true, .. } => Ok(0),
            Framing::Chunked { left, done } => {
                if *left == 0 {
                    let mut line = String::new();
                    self.stream.read_line(&mut line)?;
                    if line.trim().is_empty() {
                        // The CRLF that ends the previous chunk.
                        line.clear();
                        self.stream.read_line(&mut line)?;
                    }
                    let size = u64::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                        .map_err(|_| std::io::Error::other("a broken chunk size"))?;
                    if size == 0 {
                        // The trailer section, to its empty line: the connection's next response starts after it.
                        loop {
                            line.clear();
                            if self.stream.read_line(&mut line)? == 0 || line.trim().is_empty() {
                                break;
                            }
                        }
                        *done = true;
                        return Ok(0);
                    }
                    *left = size;
                }
                let want = out.len().min(*left as usize);
                let n = self.stream.read(&mut out[..want])?;
                if n == 0 {
                    return Err(std::io::Error::other("a truncated chunk"));
                }
                *left -= n as u64;
                Ok(n)
            }
        }
    }
}

impl Exchange {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The whole body (as framed; at most `limit` bytes).
    pub fn body(&mut self, limit: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        (&mut self.body).take(limit as u64).read_to_end(&mut out)?;
        Ok(out)
    }

    /// Reads an event stream's events (the `data:` lines of each, joined) until `take` returns true or the stream
    /// ends; at most `limit` bytes in all.
    pub fn events(&mut self, limit: usize, mut take: impl FnMut(&str) -> bool) -> std::io::Result<()> {
        let mut data = String::new();
        let mut line = String::new();
        let mut read = 0;
        loop {
            line.clear();
            let n = self.body.read_line(&mut line)?;
            read += n;
            if read > limit {
                return Err(std::io::Error::other("the event stream is too long"));
            }
            let text = line.trim_end_matches(['\r', '\n']);
            if n == 0 || text.is_empty() {
                if !data.is_empty() && take(&data) {
                    return Ok(());
                }
                data.clear();
                if n == 0 {
                    return Ok(());
                }
            } else if let Some(value) = text.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
    }
}

/// Sends `method url` with `headers` and `body` (one connection, `Connection: close`) and reads the head.
pub fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Exchange, String> {
    let (host, path) = split_url(url)?;
    let stream = connect(host)?;
    send(stream, method, host, path, headers, body, timeout, false).map_err(|(why, _)| why)
}

/// [`exchange`] on a kept-open connection of `pool` when there is one (else a new one, kept open afterwards if the
/// caller hands the exchange back with [`Connections::release`]). A kept connection the server closed meanwhile
/// (nothing received) is replaced by a new one for the same request.
pub fn exchange_with(
    pool: &Connections,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Exchange, String> {
    let (host, path) = split_url(url)?;
    if let Some(stream) = pool.take() {
        match send(stream, method, host, path, headers, body, timeout, true) {
            Ok(exchange) => return Ok(exchange),
            // The server had closed it: the request never reached it, so it is sent again.
            Err((_, true)) => {}
            Err((why, false)) => return Err(why),
        }
    }
    let stream = connect(host)?;
    send(stream, method, host, path, headers, body, timeout, true).map_err(|(why, _)| why)
}

fn split_url(url: &str) -> Result<(&str, &str), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("`{url}`: only http:// URLs are supported"))?;
    Ok(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    })
}

fn connect(host: &str) -> Result<BufReader<TcpStream>, String> {
    let stream = TcpStream::connect(host).map_err(|e| format!("cannot connect to `{host}`: {e}"))?;
    // One write per request, but no waiting for the ACK of the previous one on a kept connection.
    stream.set_nodelay(true).ok();
    Ok(BufReader::new(stream))
}

/// One request on `stream` and the head of its response; on failure, why, and whether nothing at all came back
/// (a kept connection the server had closed).
#[allow(clippy::too_many_arguments)]
fn send(
    mut stream: BufReader<TcpStream>,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
    keep_alive: bool,
) -> Result<Exchange, (String, bool)> {
    stream.get_ref().set_read_timeout(Some(timeout)).ok();
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: {connection}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.map_or(0, <[u8]>::len)));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    stream.get_mut().write_all(&bytes).map_err(|e| (format!("cannot send to `{host}`: {e}"), true))?;
    let broken = |e: std::io::Error| format!("cannot read from `{host}`: {e}");
    let mut status_line = String::new();
    match stream.read_line(&mut status_line) {
        Ok(0) => return Err((format!("`{host}` closed the connection"), true)),
        Err(e) if status_line.is_empty() => return Err((broken(e), true)),
        Err(e) => return Err((broken(e), false)),
        Ok(_) => {}
    }
    let status =
        status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or(("no HTTP status".to_string(), false))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).map_err(|e| (broken(e), false))? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let framing = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        Framing::Chunked { left: 0, done: false }
    } else if let Some(length) = header("content-length").and_then(|v| v.parse().ok()) {
        Framing::Length(length)
    } else if status == 202 || status == 204 || method == "HEAD" {
        Framing::Length(0)
    } else {
        Framing::UntilClose
    };
    let closes = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let reusable = keep_alive && !closes && !matches!(framing, Framing::UntilClose);
    Ok(Exchange { status, headers, body: BufReader::new(Body { stream, framing }), reusable })
}

/// A value for `Mcp-Name` (MCP 2026-07-28): as it is when it is visible ASCII and spaces without edge whitespace and
/// does not look like the sentinel; otherwise `=?base64?BASE64?=` of its UTF-8.
pub fn encode_header_value(value: &str) -> String {
    use base64::Engine;
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain && !value.is_empty() {
        return value.to_string();
    }
    format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value.as_bytes()))
}

/// The inverse of [`encode_header_value`]; `None` for a malformed sentinel (bad or non-canonical base64, not UTF-8),
/// so a corrupt header never matches.
pub fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_string());
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).ok()?;
    if engine.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// One `x-mcp-header` annotation of a tool's input schema: the `{Name}` of its `Mcp-Param-{Name}` header and the
/// chain of `properties` keys leading to the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    pub name: String,
    pub path: Vec<String>,
}

impl ParamHeader {
    /// The header's full name.
    pub fn header(&self) -> String {
        format!("Mcp-Param-{}", self.name)
    }

    /// The argument's value in a call's `arguments`, as the header carries it (before encoding): a string as it is,
    /// an integer in decimal, a boolean `true`/`false`; `None` when absent or `null` (then no header is sent).
    pub fn value(&self, arguments: &Json) -> Option<String> {
        match self.argument(arguments)? {
            Json::String(text) => Some(text.clone()),
            Json::Bool(b) => Some(b.to_string()),
            other => Some(other.to_string()),
        }
    }

    /// The argument itself; `None` when absent or `null`.
    pub fn argument<'a>(&self, arguments: &'a Json) -> Option<&'a Json> {
        let mut value = arguments;
        for key in &self.path {
            value = value.get(key)?;
        }
        Some(value).filter(|v| !v.is_null())
    }

    /// Whether a header value (decoded) says the same as the argument `value` of [`ParamHeader::value`]: the same
    /// text, or for a number the same number (`42` and `42.0` alike).
    pub fn matches(header: &str, value: &str, arguments_value_is_number: bool) -> bool {
        if arguments_value_is_number {
            return match (header.trim().parse::<f64>(), value.parse::<f64>()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
        }
        header == value
    }
}

/// The `x-mcp-header` annotations of a tool's `inputSchema` (MCP 2026-07-28), or why they make the tool invalid: a
/// name that is empty, not an HTTP token (`1*tchar`) or not case-insensitively unique; a parameter whose `type` is not
/// `string`, `integer` or `boolean`; an annotation not reached from the root through `properties` keys only (under
/// `items`, `oneOf`, `$ref` …), or not a string.
pub fn param_headers(schema: &Json) -> Result<Vec<ParamHeader>, String> {
    fn walk(node: &Json, path: Option<&[String]>, found: &mut Vec<ParamHeader>) -> Result<(), String> {
        let Json::Object(fields) = node else {
            if let Json::Array(items) = node {
                for item in items {
                    walk(item, None, found)?;
                }
            }
            return Ok(());
        };
        if let Some(annotation) = fields.get("x-mcp-header") {
            let path = path
                .filter(|p| !p.is_empty())
                .ok_or("`x-mcp-header` on a schema not reached from the root through `properties` only".to_string())?;
            let Json::String(name) = annotation else { return Err("`x-mcp-header` is not a string".into()) };
            let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if name.is_empty() || !name.chars().all(tchar) {
                return Err(format!("`x-mcp-header` `{name}` is not an HTTP field-name token"));
            }
            match fields.get("type").and_then(Json::as_str) {
                Some("string" | "integer" | "boolean") => {}
                _ => {
                    return Err(format!(
                        "`x-mcp-header` `{name}` is on a parameter that is not a string, integer or boolean"
                    ))
                }
            }
            if found.iter().any(|h| h.name.eq_ignore_ascii_case(name)) {
                return Err(format!("`x-mcp-header` `{name}` appears more than once"));
            }
            found.push(ParamHeader { name: name.clone(), path: path.to_vec() });
        }
        for (key, value) in fields {
            match key.as_str() {
                // Values, not schemas.
                "x-mcp-header" | "enum" | "const" | "default" | "examples" => {}
                "properties" => {
                    let Json::Object(properties) = value else { continue };
                    for (name, property) in properties {
                        let reached = path.map(|p| {
                            let mut p = p.to_vec();
                            p.push(name.clone());
                            p
                        });
                        walk(property, reached.as_deref(), found)?;
                    }
                }
                _ => walk(value, None, found)?,
            }
        }
        Ok(())
    }
    let mut found = Vec::new();
    walk(schema, Some(&[]), &mut found)?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Kept connections are reused (a chunked answer read to its end, trailers included, leaves the connection
    /// ready), and one the server closed while idle is replaced by a new one for the same request, sent once.
    #[test]
    fn connections_are_kept_and_a_closed_one_is_replaced() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (accepted, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, r) = (accepted.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                a.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(stream);
                // Two requests per connection, then the server closes it (as an idle timeout would).
                for turn in 0..2 {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                    let answer = format!("{{\"n\":{n}}}");
                    let response = if turn == 1 {
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len())
                    } else {
                        format!(
                            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{answer}\r\n0\r\nX-Trailer: t\r\n\r\n",
                            answer.len()
                        )
                    };
                    reader.get_mut().write_all(response.as_bytes()).unwrap();
                }
            }
        });
        let pool = Connections::default();
        let mut answers = Vec::new();
        for _ in 0..5 {
            let mut exchange = exchange_with(&pool, "POST", &url, &[], Some(b"{}"), Duration::from_secs(5)).unwrap();
            answers.push(String::from_utf8(exchange.body(1024).unwrap()).unwrap());
            pool.release(exchange);
            // Let the server close its side after its second answer.
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(answers, [r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#, r#"{"n":4}"#, r#"{"n":5}"#]);
        assert_eq!(requests.load(Ordering::SeqCst), 5, "each request reached the server once");
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "two requests per connection");
    }

    #[test]
    fn param_header_annotations_are_read_and_invalid_ones_refused() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "target": {"type": "object", "properties": {"tenant": {"type": "integer", "x-mcp-header": "Tenant"}}},
            "tags": {"type": "array", "items": {"type": "string"}, "default": [{"x-mcp-header": "NotASchema"}]},
        }});
        let found = param_headers(&schema).unwrap();
        assert_eq!(
            found,
            [
                ParamHeader { name: "Region".into(), path: vec!["region".into()] },
                ParamHeader { name: "Tenant".into(), path: vec!["target".into(), "tenant".into()] },
            ]
        );
        let arguments = json!({"region": "us-west1", "target": {"tenant": 42}});
        assert_eq!(found[0].value(&arguments).as_deref(), Some("us-west1"));
        assert_eq!(found[1].value(&arguments).as_deref(), Some("42"));
        assert_eq!(found[0].value(&json!({"region": null})), None);
        assert!(ParamHeader::matches("42.0", "42", true) && !ParamHeader::matches("43", "42", true));
        let invalid =
            |property: Json| param_headers(&json!({"type": "object", "properties": {"p": property}})).unwrap_err();
        assert!(invalid(json!({"type": "number", "x-mcp-header": "P"})).contains("not a string, integer"));
        assert!(invalid(json!({"type": "string", "x-mcp-header": ""})).contains("token"));
        assert!(invalid(json!({"type": "string", "x-mcp-header": "Bad Name"})).contains("token"));
        assert!(invalid(json!({"type": "string", "x-mcp-header": "A\r\nX-Injected: 1"})).contains("token"));
        let nested = json!({"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}});
        assert!(invalid(nested).contains("properties"));
        let composed = json!({"oneOf": [{"type": "string", "x-mcp-header": "One"}]});
        assert!(invalid(composed).contains("properties"));
        let twice = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "Same"}, "b": {"type": "boolean", "x-mcp-header": "same"}}});
        assert!(param_headers(&twice).unwrap_err().contains("more than once"));
        assert!(param_headers(&json!({"type": "string", "x-mcp-header": "Root"})).is_err(), "the root is no parameter");
    }

    #[test]
    fn header_values_round_trip_and_only_unsafe_ones_are_encoded() {
        for (value, encoded) in [
            ("get_weather", "get_weather"),
            ("get-sum", "get-sum"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ] {
            assert_eq!(encode_header_value(value), encoded);
            assert_eq!(decode_header_value(encoded).as_deref(), Some(value));
        }
        assert_eq!(decode_header_value("=?base64?not base64?="), None);
        assert_eq!(decode_header_value("=?base64?IHBhZGRlZCB=?="), None, "non-canonical");
        assert_eq!(decode_header_value("=?base64?/w==?="), None, "not UTF-8");
    }
}
