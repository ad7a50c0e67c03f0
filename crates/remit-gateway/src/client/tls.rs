//! The client's connections: TCP for `http://`, and rustls (on ring) over TCP for `https://`, checked against the
//! roots [`Tls`] says. hyper-util's pooled client asks [`Connector`] for a new connection when it has no idle one
//! for the origin.
//!
//! TLS: the server's certificate chain must lead to a trusted root (the platform's, and those of a CA file the
//! operator gives, `--tls-ca`) and name the URL's host (a DNS name, or an IP address in the certificate's subject
//! alternative names); SNI carries the host name. No setting turns these checks off.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;

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
    fn config(&self) -> Result<Arc<ClientConfig>, String> {
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

/// Why a connection could not be made, in the words the caller shows (hyper-util's error carries it as its
/// source, where the client finds it).
#[derive(Debug)]
pub(super) struct ConnectFailed(pub(super) String);

impl std::fmt::Display for ConnectFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectFailed {}

/// What opens the pooled client's connections (a `tower` service from the origin's URI to a connection).
#[derive(Clone, Debug)]
pub(super) struct Connector {
    pub(super) tls: Tls,
}

impl tower_service::Service<Uri> for Connector {
    type Response = Stream;
    type Error = ConnectFailed;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, ConnectFailed>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectFailed>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, origin: Uri) -> Self::Future {
        let tls = self.tls.clone();
        Box::pin(async move { connect(&tls, &origin).await.map_err(ConnectFailed) })
    }
}

/// A new connection to `origin` (`scheme://authority/`): TCP, then for `https://` the TLS handshake, so that a
/// server that cannot be trusted is said so here, by name, rather than as a failed write.
async fn connect(tls: &Tls, origin: &Uri) -> Result<Stream, String> {
    let authority = origin.authority().map_or("", |a| a.as_str());
    let host = origin.host().unwrap_or("");
    // `[::1]` in a URI; the address without brackets for the socket and the certificate.
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let secure = origin.scheme_str() == Some("https");
    let port = origin.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port)).await.map_err(|e| format!("cannot connect to `{authority}`: {e}"))?;
    // One write per request, but no waiting for the ACK of the previous one on a kept connection.
    tcp.set_nodelay(true).ok();
    if !secure {
        return Ok(Stream::Plain(TokioIo::new(tcp)));
    }
    let config = tls.config()?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| format!("`{host}` is not a host name or IP address a certificate can be checked for"))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let stream = connector.connect(name, tcp).await.map_err(|e| tls_refused(authority, host, &e))?;
    Ok(Stream::Tls(Box::new(TokioIo::new(stream))))
}

/// Why a TLS handshake with `authority` failed, in words: an untrusted issuer, a certificate for another name
/// (`host`), an expired one; else rustls' own words.
fn tls_refused(authority: &str, host: &str, e: &std::io::Error) -> String {
    use rustls::CertificateError as Certificate;
    let why = match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(certificate)) => match certificate {
            Certificate::UnknownIssuer => "its certificate is not issued by a trusted authority (the platform's root \
                                           certificates, and the CA file of `--tls-ca` when given)"
                .to_string(),
            Certificate::NotValidForName | Certificate::NotValidForNameContext { .. } => {
                format!("its certificate is not valid for the name `{host}`")
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
    format!("cannot connect to `{authority}` over TLS: {why}")
}

/// A connection: plain TCP (`http://`) or TLS over TCP (`https://`).
#[derive(Debug)]
pub(super) enum Stream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<tokio_rustls::client::TlsStream<TcpStream>>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, bytes),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, bytes),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_certificates() {
        assert!(Tls::with_ca_pem(b"not a certificate", "f.pem").unwrap_err().contains("holds no certificate"));
        let ca = crate::test_tls::TestCa::new("remit test CA");
        assert!(Tls::with_ca_pem(ca.pem.as_bytes(), "ca.pem").is_ok());
        let broken = ca.pem.replace("\n", "\n!").replacen("!", "", 1);
        assert!(Tls::with_ca_pem(broken.as_bytes(), "ca.pem").is_err());
    }
}
