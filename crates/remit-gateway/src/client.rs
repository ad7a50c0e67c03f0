//! A minimal blocking HTTP/1.1 client (one request per connection) for the CLI's `remit approvals` and `remit admin`
//! and for tests: enough to talk to a gateway, with no client library. `https://` goes through the gateway's TLS
//! client ([`crate::wire`]), trusting the platform's roots (`SSL_CERT_FILE` names a CA bundle to use instead,
//! as for other tools built on the system's store), and a CA file's with [`request_trusting`].

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

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

/// Sends one request to `url` (`http://HOST:PORT/PATH` or `https://…`).
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Result<Response, String> {
    static PLATFORM: std::sync::OnceLock<crate::wire::Tls> = std::sync::OnceLock::new();
    request_trusting(PLATFORM.get_or_init(crate::wire::Tls::platform), method, url, headers, body)
}

/// [`request`], an `https://` URL trusting what `tls` says (e.g. the CA file of `--tls-ca`).
pub fn request_trusting(
    tls: &crate::wire::Tls,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Response, String> {
    if url.starts_with("https://") {
        let mut headers = headers.to_vec();
        // The exchange frames the body itself; a caller's own length would be sent twice.
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case("content-length"));
        let mut exchange = crate::wire::exchange(tls, method, url, &headers, body, Duration::from_secs(60))?;
        let body = exchange.body(MAX_RESPONSE).map_err(|e| format!("cannot read from `{url}`: {e}"))?;
        return Ok(Response { status: exchange.status, headers: exchange.headers.clone(), body });
    }
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("`{url}`: only http:// URLs are supported"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = TcpStream::connect(host).map_err(|e| format!("cannot connect to `{host}`: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    stream.write_all(&bytes).map_err(|e| format!("cannot send to `{host}`: {e}"))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| format!("cannot read from `{host}`: {e}"))?;
    parse(&raw)
}

/// The longest response body read over TLS.
const MAX_RESPONSE: usize = 64 << 20;

fn parse(raw: &[u8]) -> Result<Response, String> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("an incomplete HTTP response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("no HTTP status")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body)?;
    }
    Ok(Response { status, headers, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").ok_or("a broken chunked body")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "a broken chunk size")?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err("a truncated chunk".into());
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}
