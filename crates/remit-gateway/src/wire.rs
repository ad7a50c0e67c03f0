//! One HTTP/1.1 exchange with a server over `http://` or `https://` (std and rustls' blocking API), read as it
//! arrives, on a new connection or one kept open from an earlier exchange ([`Connections`]): the status and
//! headers, then a JSON body framed by `Content-Length` or chunks, or an event stream read event by event until
//! the caller has the message it waits for. A server may keep an event stream (or the connection) open after the
//! response; reading to the end of the connection would wait for the server's timeout. The gateway's one client for
//! what it fetches (MCP upstreams over Streamable HTTP, JWT key sets). Also the header values of
//! MCP 2026-07-28 (`Mcp-Name`, `Mcp-Param-*`: plain, or `=?base64?…?=`) and the `x-mcp-header` annotations of a
//! tool's input schema that say which arguments a `tools/call` mirrors into `Mcp-Param-{Name}` headers.
//!
//! TLS ([`Tls`]): the server's certificate chain must lead to a trusted root (the platform's, and those of a CA file
//! the operator gives, `--tls-ca`) and name the URL's host (a DNS name, or an IP address in the certificate's
//! subject alternative names); SNI carries the host name. No setting turns these checks off.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use serde_json::Value as Json;

/// Which servers an `https://` connection trusts: the platform's root certificates (read by `rustls-native-certs`
/// from the system's store: on Linux the distribution's CA bundle, `SSL_CERT_FILE` / `SSL_CERT_DIR` when set), plus
/// the CA certificates of a PEM file the operator names (`--tls-ca`, for a private CA or a test server). The
/// platform's store rather than roots compiled into remit: it follows the system's updates and the operator's own
/// additions and removals. Read at the first https connection, not at start: a proxy that speaks only plain http
/// never reads them. Kept once read (until a restart); none found, they are read again at the next connection.
/// Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct Tls {
    inner: Arc<TlsRoots>,
}

#[derive(Default)]
struct TlsRoots {
    /// The CA certificates of the operator's file, and its name for messages.
    extra: Vec<CertificateDer<'static>>,
    file: Option<String>,
    /// Built at the first https connection that can build it (see [`Tls::config`]).
    config: Mutex<Option<Arc<ClientConfig>>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("ca_file", &self.inner.file).finish_non_exhaustive()
    }
}

impl Tls {
    /// The platform's root certificates only.
    pub fn platform() -> Tls {
        Tls::default()
    }

    /// The platform's root certificates and the CA certificates of the PEM file at `path` (as curl's `--cacert`,
    /// but added to the platform's roots rather than replacing them). An error when the file cannot be read, holds
    /// no certificate, or one that cannot be a trust root.
    pub fn with_ca_file(path: &Path) -> Result<Tls, String> {
        let pem = std::fs::read(path).map_err(|e| format!("cannot read the CA file `{}`: {e}", path.display()))?;
        Tls::with_ca_pem(&pem, &path.display().to_string())
    }

    /// [`Tls::with_ca_file`] for PEM text; `source` names it in messages.
    pub fn with_ca_pem(pem: &[u8], source: &str) -> Result<Tls, String> {
        let certificates = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the CA file `{source}` is not PEM certificates: {e}"))?;
        if certificates.is_empty() {
            return Err(format!("the CA file `{source}` holds no certificate (`-----BEGIN CERTIFICATE-----`)"));
        }
        // Checked now, not at the first https connection: a bad file is a mistake in the command line.
        let mut roots = RootCertStore::empty();
        for certificate in &certificates {
            roots.add(certificate.clone()).map_err(|e| format!("the CA file `{source}`: not a usable CA: {e}"))?;
        }
        let roots = TlsRoots { extra: certificates, file: Some(source.to_string()), config: Mutex::new(None) };
        Ok(Tls { inner: Arc::new(roots) })
    }

    /// The client configuration: built at the first call, the same one afterwards. A failure is not kept: a platform
    /// without root certificates may get them (the system's CA bundle installed) while the proxy runs.
    pub(crate) fn config(&self) -> Result<Arc<ClientConfig>, String> {
        let mut config = self.inner.config.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(built) = config.as_ref() {
            return Ok(built.clone());
        }
        let built = self.inner.build()?;
        *config = Some(built.clone());
        Ok(built)
    }
}

impl TlsRoots {
    fn build(&self) -> Result<Arc<ClientConfig>, String> {
        let mut roots = RootCertStore::empty();
        let platform = rustls_native_certs::load_native_certs();
        // Certificates of the platform's store that cannot be parsed are skipped, as other TLS clients do.
        roots.add_parsable_certificates(platform.certs);
        roots.add_parsable_certificates(self.extra.iter().cloned());
        if roots.is_empty() {
            let why = match platform.errors.first() {
                Some(e) => format!(" ({e})"),
                None => String::new(),
            };
            return Err(format!(
                "https needs trusted root certificates: the platform has none{why} and no CA file was given \
                 (`--tls-ca FILE`; or install the system's CA bundle, e.g. the `ca-certificates` package)"
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // The client speaks HTTP/1.1 only: a server that offers HTTP/2 must not pick it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A connection to a server: plain TCP (`http://`) or TLS over TCP (`https://`).
enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// The TCP socket under it (for timeouts and non-blocking reads).
    fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(socket) => socket,
            Stream::Tls(tls) => tls.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.read(out),
            Stream::Tls(tls) => tls.read(out),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.write(bytes),
            Stream::Tls(tls) => tls.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(socket) => socket.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// The parts of an `http://` or `https://` URL that a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// `https://`.
    pub tls: bool,
    /// The scheme and the authority (`https://host:port`): what kept connections are kept for.
    pub origin: &'a str,
    /// `host[:port]` as written (the `Host` header).
    pub authority: &'a str,
    /// The host name or IP address, without the brackets of an IPv6 address.
    pub host: &'a str,
    /// The port given, else 80 or 443.
    pub port: u16,
    /// The path and query (at least `/`).
    pub path: &'a str,
}

impl<'a> Target<'a> {
    /// The parts of `url`; an error for another scheme, user information (`user@host`), no host or a bad port.
    pub fn parse(url: &'a str) -> Result<Target<'a>, String> {
        let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return Err(format!("`{url}`: only http:// and https:// URLs are supported")),
        };
        let end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = (&rest[..end], if end == rest.len() { "/" } else { &rest[end..] });
        if authority.contains('@') {
            return Err(format!("`{url}`: user information in the URL (`user@host`) is not supported"));
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').ok_or_else(|| format!("`{url}`: an unclosed `[`"))?;
                (host, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        if host.is_empty() {
            return Err(format!("`{url}`: no host"));
        }
        let port = match port {
            Some(port) => port.parse().map_err(|_| format!("`{url}`: `{port}` is not a port"))?,
            None if tls => 443,
            None => 80,
        };
        let origin = &url[..url.len() - rest.len() + authority.len()];
        Ok(Target { tls, origin, authority, host, port, path })
    }

    /// Whether the host is this machine (`localhost`, or a loopback address).
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// The status, the headers (lowercase names) and a reader of the body (framing removed).
pub struct Exchange {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    body: BufReader<Body>,
    /// The connection may serve another exchange once this body is read to its end (HTTP/1.1 keep-alive: asked for,
    /// and the server did not say `Connection: close`).
    reusable: bool,
    /// The scheme and authority the connection goes to (what it is kept for).
    origin: String,
}

/// Idle connections, kept open between exchanges (HTTP/1.1 keep-alive) for the origin (scheme and authority) they
/// go to, so that a message does not pay for a new TCP connection and TLS handshake (and the server for accepting
/// them); and the TLS settings of new ones.
#[derive(Default)]
pub struct Connections {
    idle: std::sync::Mutex<Vec<(String, BufReader<Stream>)>>,
    tls: Tls,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).len();
        f.debug_struct("Connections").field("idle", &idle).field("tls", &self.tls).finish()
    }
}

/// The most idle connections kept per pool.
const MAX_IDLE: usize = 4;

impl Connections {
    /// An empty pool whose new `https://` connections trust what `tls` says.
    pub fn new(tls: Tls) -> Connections {
        Connections { idle: Default::default(), tls }
    }

    /// The TLS settings of new connections.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    fn take(&self, origin: &str) -> Option<BufReader<Stream>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let at = idle.iter().rposition(|(o, _)| o == origin)?;
        Some(idle.swap_remove(at).1)
    }

    /// Keeps the connection of a finished exchange when its body can be read to the end without waiting (an event
    /// stream the server keeps open after the response is closed instead).
    pub fn release(&self, exchange: Exchange) {
        if !exchange.reusable {
            return;
        }
        let mut body = exchange.body;
        let socket = body.get_ref().stream.get_ref().socket().try_clone();
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
            idle.push((exchange.origin, body.stream));
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
    stream: BufReader<Stream>,
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
        let mut events = EventData::default();
        let mut line = String::new();
        let mut read = 0;
        loop {
            line.clear();
            let n = self.body.read_line(&mut line)?;
            read += n;
            if read > limit {
                return Err(std::io::Error::other("the event stream is too long"));
            }
            let event = if n == 0 { events.end() } else { events.line(line.trim_end_matches(['\r', '\n'])) };
            if event.is_some_and(|data| take(&data)) || n == 0 {
                return Ok(());
            }
        }
    }
}

/// The data of an event stream's events, from its lines (read by the blocking and the async client alike): the
/// `data:` lines of an event joined by line feeds; other fields (`event:`, `id:`, `retry:`) and comments ignored.
#[derive(Debug, Default)]
pub struct EventData {
    data: String,
}

impl EventData {
    /// One line, without its end; the event's data when the line ends an event that has some.
    pub fn line(&mut self, line: &str) -> Option<String> {
        if line.is_empty() {
            return self.end();
        }
        if let Some(value) = line.strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
        None
    }

    /// At the end of the stream: the data of an event left without its empty line, if any.
    pub fn end(&mut self) -> Option<String> {
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data))
    }
}

/// Sends `method url` with `headers` and `body` (one connection, `Connection: close`; an `https://` one trusting what
/// `tls` says) and reads the head.
pub fn exchange(
    tls: &Tls,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Exchange, String> {
    let target = Target::parse(url)?;
    let stream = connect(&target, tls, timeout)?;
    send(stream, method, &target, headers, body, timeout, false).map_err(|(why, _)| why)
}

/// [`exchange`] on a kept-open connection of `pool` to the URL's origin when there is one (else a new one, kept open
/// afterwards if the caller hands the exchange back with [`Connections::release`]). A kept connection the server
/// closed meanwhile (nothing received) is replaced by a new one for the same request.
pub fn exchange_with(
    pool: &Connections,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Exchange, String> {
    let target = Target::parse(url)?;
    if let Some(stream) = pool.take(target.origin) {
        match send(stream, method, &target, headers, body, timeout, true) {
            Ok(exchange) => return Ok(exchange),
            // The server had closed it: the request never reached it, so it is sent again.
            Err((_, true)) => {}
            Err((why, false)) => return Err(why),
        }
    }
    let stream = connect(&target, &pool.tls, timeout)?;
    send(stream, method, &target, headers, body, timeout, true).map_err(|(why, _)| why)
}

/// A new connection to the target: TCP, then for `https://` the TLS handshake (within `timeout`), so that a server
/// that cannot be trusted is said so here, by name, rather than as a failed write.
fn connect(target: &Target, tls: &Tls, timeout: Duration) -> Result<BufReader<Stream>, String> {
    let authority = target.authority;
    let mut socket =
        TcpStream::connect((target.host, target.port)).map_err(|e| format!("cannot connect to `{authority}`: {e}"))?;
    // One write per request, but no waiting for the ACK of the previous one on a kept connection.
    socket.set_nodelay(true).ok();
    if !target.tls {
        return Ok(BufReader::new(Stream::Plain(socket)));
    }
    let config = tls.config()?;
    let name = ServerName::try_from(target.host.to_string())
        .map_err(|_| format!("`{}` is not a host name or IP address a certificate can be checked for", target.host))?;
    let mut connection =
        ClientConnection::new(config, name).map_err(|e| format!("cannot connect to `{authority}` over TLS: {e}"))?;
    socket.set_read_timeout(Some(timeout)).ok();
    socket.set_write_timeout(Some(timeout)).ok();
    while connection.is_handshaking() {
        connection.complete_io(&mut socket).map_err(|e| tls_refused(target, &e))?;
    }
    Ok(BufReader::new(Stream::Tls(Box::new(StreamOwned::new(connection, socket)))))
}

/// Why a TLS handshake with `target` failed, in words: an untrusted issuer, a certificate for another name, an
/// expired one; else rustls' own words.
pub(crate) fn tls_refused(target: &Target, e: &std::io::Error) -> String {
    use rustls::CertificateError as Certificate;
    let why = match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(certificate)) => match certificate {
            Certificate::UnknownIssuer => "its certificate is not issued by a trusted authority (the platform's root \
                                           certificates, and the CA file of `--tls-ca` when given)"
                .to_string(),
            Certificate::NotValidForName | Certificate::NotValidForNameContext { .. } => {
                format!("its certificate is not valid for the name `{}`", target.host)
            }
            Certificate::Expired | Certificate::ExpiredContext { .. } => "its certificate has expired".to_string(),
            Certificate::NotValidYet | Certificate::NotValidYetContext { .. } => {
                "its certificate is not valid yet".to_string()
            }
            other => format!("its certificate is refused: {other:?}"),
        },
        Some(other) => other.to_string(),
        None => e.to_string(),
    };
    format!("cannot connect to `{}` over TLS: {why}", target.authority)
}

/// One request on `stream` and the head of its response; on failure, why, and whether nothing at all came back
/// (a kept connection the server had closed).
fn send(
    mut stream: BufReader<Stream>,
    method: &str,
    target: &Target,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
    keep_alive: bool,
) -> Result<Exchange, (String, bool)> {
    let (host, path) = (target.authority, target.path);
    stream.get_ref().socket().set_read_timeout(Some(timeout)).ok();
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: {connection}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.map_or(0, <[u8]>::len)));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    let sent = stream.get_mut().write_all(&bytes).and_then(|()| stream.get_mut().flush());
    sent.map_err(|e| (format!("cannot send to `{host}`: {e}"), true))?;
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
    let origin = if reusable { target.origin.to_string() } else { String::new() };
    Ok(Exchange { status, headers, body: BufReader::new(Body { stream, framing }), reusable, origin })
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
    /// ready), and one the server closed while idle is replaced by a new one for the same request, sent once; over
    /// plain http and over https alike (there the server closes without TLS's `close_notify`, as a crashed one would).
    #[test]
    fn connections_are_kept_and_a_closed_one_is_replaced() {
        let ca = crate::test_tls::TestCa::new("remit test CA");
        let tls = Tls::with_ca_pem(ca.pem.as_bytes(), "the test CA").unwrap();
        keeps_connections(None, Connections::default());
        keeps_connections(Some(ca.server(&["localhost"])), Connections::new(tls));
    }

    fn keeps_connections(server: Option<Arc<rustls::ServerConfig>>, pool: Connections) {
        use crate::test_tls::Accepted;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = match server {
            Some(_) => format!("https://localhost:{port}/mcp"),
            None => format!("http://127.0.0.1:{port}/mcp"),
        };
        let (accepted, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, r) = (accepted.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                a.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(Accepted::new(stream, server.as_ref()));
                // Two requests per connection, then the server closes it (as an idle timeout would).
                for turn in 0..2 {
                    if crate::test_tls::read_request(&mut reader).is_none() {
                        return;
                    }
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
        let mut answers = Vec::new();
        for _ in 0..5 {
            let mut exchange = exchange_with(&pool, "POST", &url, &[], Some(b"{}"), Duration::from_secs(5)).unwrap();
            answers.push(String::from_utf8(exchange.body(1024).unwrap()).unwrap());
            pool.release(exchange);
            // Let the server close its side after its second answer.
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(answers, [r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#, r#"{"n":4}"#, r#"{"n":5}"#], "{url}");
        assert_eq!(requests.load(Ordering::SeqCst), 5, "{url}: each request reached the server once");
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "{url}: two requests per connection");
    }

    #[test]
    fn urls_are_split_into_what_a_request_needs() {
        let t = Target::parse("https://auth.example/.well-known/jwks.json?x=1").unwrap();
        assert_eq!(
            (t.tls, t.origin, t.authority, t.host, t.port, t.path),
            (true, "https://auth.example", "auth.example", "auth.example", 443, "/.well-known/jwks.json?x=1")
        );
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((t.tls, t.origin, t.host, t.port, t.path), (false, "http://127.0.0.1:8080", "127.0.0.1", 8080, "/"));
        assert!(t.is_loopback());
        let t = Target::parse("https://[::1]:9443/mcp").unwrap();
        assert_eq!((t.authority, t.host, t.port), ("[::1]:9443", "::1", 9443));
        assert!(t.is_loopback() && Target::parse("http://LocalHost/").unwrap().is_loopback());
        assert!(!Target::parse("http://auth.example/").unwrap().is_loopback());
        assert!(!Target::parse("http://10.0.0.1/").unwrap().is_loopback());
        assert!(Target::parse("ftp://x/").unwrap_err().contains("only http:// and https://"));
        assert!(Target::parse("https://127.0.0.1@evil.example/").unwrap_err().contains("user information"));
        assert!(Target::parse("http://x:port/").unwrap_err().contains("not a port"));
        assert!(Target::parse("https:///path").unwrap_err().contains("no host"));
    }

    #[test]
    fn a_ca_file_must_hold_certificates() {
        assert!(Tls::with_ca_pem(b"not a certificate", "f.pem").unwrap_err().contains("holds no certificate"));
        let ca = crate::test_tls::TestCa::new("remit test CA");
        assert!(Tls::with_ca_pem(ca.pem.as_bytes(), "ca.pem").is_ok());
        let broken = ca.pem.replace("\n", "\n!").replacen("!", "", 1);
        assert!(Tls::with_ca_pem(broken.as_bytes(), "ca.pem").is_err());
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
