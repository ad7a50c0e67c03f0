//! TLS to PostgreSQL for [`super::postgres`]: what a store URL's `sslmode` and `sslrootcert` ask for, turned into
//! tokio-postgres' configuration and a TLS connector (tokio-postgres-rustls: rustls over tokio, on ring like the
//! gateway's HTTP client in `client/tls.rs`; no OpenSSL). Depends on nothing else of the gateway.
//!
//! The modes (libpq's names, docs/scaling.md):
//! - no `sslmode`, or `disable`: plain TCP, as before TLS was built (libpq's default is `prefer`: ours stays what
//!   deployed gateways already do; `prefer` gives no protection against an active attacker anyway);
//! - `prefer`: TLS when the server offers it, else plain TCP; the certificate is not checked;
//! - `require`: TLS or no connection; the certificate is NOT checked: it keeps passive listeners out, but does not
//!   stop a man in the middle, who presents a certificate of his own;
//! - `verify-full`: TLS, the server's chain checked against the roots of `sslrootcert=FILE` (PEM; only those, as
//!   libpq) or, without it or with `sslrootcert=system`, the platform's root certificates, and the certificate must
//!   name the URL's host (a DNS name, or an IP address in its subject alternative names).
//!
//! Refused rather than half done: `verify-ca` (a chain check without the name: not built, `verify-full` is the one
//! that stops a man in the middle), `allow`, and `sslrootcert` with a mode that would not read it (libpq turns
//! `require` with a root file into `verify-ca`; silently not checking would look like checking). Client certificates
//! (`sslcert`, `sslkey`) are not built: tokio-postgres refuses those parameters as unknown.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What the URL's TLS parameters ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyFull,
}

/// A store URL read: tokio-postgres' configuration (the TLS mode set), the connector its connections use, and the
/// mode, for messages.
pub struct Connection {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    pub mode: TlsMode,
    /// Where the roots of `verify-full` come from, for messages: the file of `sslrootcert`, or the platform.
    roots: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("mode", &self.mode).field("roots", &self.roots).finish_non_exhaustive()
    }
}

impl Connection {
    /// Reads `url` (`postgres://user[:password]@host[:port]/database[?param=value&…]`): `sslmode` and `sslrootcert`
    /// here, the other parameters by tokio-postgres. `shown` names the URL in messages (its password hidden).
    pub fn from_url(url: &str, shown: &str) -> Result<Connection, String> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!("`{shown}` is not a PostgreSQL URL (`postgres://user@host:port/database`)"));
        }
        let (rest, mode, root_file) = take_tls_parameters(url)?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e| format!("`{shown}` is not a PostgreSQL URL: {}", describe(&e)))?;
        if root_file.is_some() && mode != TlsMode::VerifyFull {
            return Err(format!(
                "`{shown}`: `sslrootcert` is read only with `sslmode=verify-full` (with another mode the server's \
                 certificate would not be checked against it)"
            ));
        }
        config.ssl_mode(match mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyFull => SslMode::Require,
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let (mut client, roots) = if mode == TlsMode::VerifyFull {
            let (roots, source) = match root_file.as_deref() {
                None | Some("system") => (platform_roots()?, "the platform's root certificates".to_string()),
                Some(file) => (file_roots(Path::new(file))?, format!("`sslrootcert={file}`")),
            };
            (builder.with_root_certificates(roots).with_no_client_auth(), source)
        } else {
            let unchecked = Arc::new(UncheckedCertificate(provider));
            (builder.dangerous().with_custom_certificate_verifier(unchecked).with_no_client_auth(), String::new())
        };
        // PostgreSQL 17 checks the ALPN name when it is sent, and needs it for `sslnegotiation=direct`.
        client.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Connection { config, tls: MakeRustlsConnect::new(client), mode, roots })
    }

    /// Why a connection failed, in words: the causes tokio-postgres keeps behind its short message, a refused
    /// certificate said as what the operator can act on.
    pub fn why(&self, error: &(dyn std::error::Error + 'static)) -> String {
        let mut words = describe(error);
        let mut cause = Some(error);
        while let Some(e) = cause {
            if let Some(refused) = refused_certificate(e) {
                words.push_str(&format!(" ({}; sslmode={})", self.refusal(refused), self.mode.name()));
                break;
            }
            cause = e.source();
        }
        words
    }

    fn refusal(&self, refused: &rustls::Error) -> String {
        use rustls::CertificateError as Certificate;
        match refused {
            rustls::Error::InvalidCertificate(certificate) => match certificate {
                Certificate::UnknownIssuer => {
                    format!("the server's certificate is not issued by a root of {}", self.roots)
                }
                Certificate::NotValidForName | Certificate::NotValidForNameContext { .. } => {
                    let host = match self.config.get_hosts().first() {
                        Some(tokio_postgres::config::Host::Tcp(host)) => host.as_str(),
                        _ => "",
                    };
                    format!("the server's certificate is not valid for the URL's host `{host}`")
                }
                Certificate::Expired | Certificate::ExpiredContext { .. } => {
                    "the server's certificate has expired".to_string()
                }
                Certificate::NotValidYet | Certificate::NotValidYetContext { .. } => {
                    "the server's certificate is not valid yet".to_string()
                }
                other => format!("the server's certificate is refused: {other:?}"),
            },
            other => other.to_string(),
        }
    }
}

impl TlsMode {
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

/// `url` without its `sslmode` and `sslrootcert` parameters, the mode (none: [`TlsMode::Disable`]) and the root file.
fn take_tls_parameters(url: &str) -> Result<(String, TlsMode, Option<String>), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), TlsMode::Disable, None));
    };
    let (mut mode, mut root_file, mut kept) = (TlsMode::Disable, None, Vec::new());
    for parameter in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = parameter.split_once('=').unwrap_or((parameter, ""));
        match key {
            "sslmode" => {
                mode = match percent_decoded(value)?.as_str() {
                    "disable" => TlsMode::Disable,
                    "prefer" => TlsMode::Prefer,
                    "require" => TlsMode::Require,
                    "verify-full" => TlsMode::VerifyFull,
                    "verify-ca" => {
                        return Err("`sslmode=verify-ca` is not supported: use `verify-full` (the chain and the \
                                    host name checked)"
                            .into())
                    }
                    other => {
                        return Err(format!(
                            "`sslmode={other}` is not supported: `disable` (the default), `prefer`, `require` or \
                             `verify-full`"
                        ))
                    }
                }
            }
            "sslrootcert" => root_file = Some(percent_decoded(value)?),
            _ => kept.push(parameter),
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, mode, root_file))
}

fn percent_decoded(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let (mut out, mut i) = (Vec::with_capacity(bytes.len()), 0);
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| format!("`{text}`: a `%` not followed by two hex digits"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{text}` is not UTF-8 once decoded"))
}

fn file_roots(path: &Path) -> Result<RootCertStore, String> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| format!("cannot read `sslrootcert={shown}`: {e}"))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`sslrootcert={shown}` is not PEM certificates: {e}"))?;
    if certificates.is_empty() {
        return Err(format!("`sslrootcert={shown}` holds no certificate (`-----BEGIN CERTIFICATE-----`)"));
    }
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots.add(certificate).map_err(|e| format!("`sslrootcert={shown}`: not a usable CA: {e}"))?;
    }
    Ok(roots)
}

fn platform_roots() -> Result<RootCertStore, String> {
    let platform = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(platform.certs);
    if roots.is_empty() {
        let why = platform.errors.first().map(|e| format!(" ({e})")).unwrap_or_default();
        return Err(format!(
            "`sslmode=verify-full` needs trusted roots: the platform has none{why} and the URL gives no \
             `sslrootcert=FILE`"
        ));
    }
    Ok(roots)
}

/// The message of `error` and of each of its causes (tokio-postgres' own says only "error performing TLS
/// handshake"; an `io::Error` hides the error it wraps from `source()`, so its text is taken as it is shown).
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut words = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !words.ends_with(&text) {
            words.push_str(": ");
            words.push_str(&text);
        }
        cause = e.source();
    }
    words
}

fn refused_certificate<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    error
        .downcast_ref::<rustls::Error>()
        .or_else(|| error.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).and_then(|e| e.downcast_ref()))
}

/// `prefer` and `require`: any certificate accepted (that is what those modes mean); the handshake's signatures are
/// still checked, as rustls' own verifier does, so that the session is at least with the holder of the key shown.
#[derive(Debug)]
struct UncheckedCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for UncheckedCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, certificate, signature, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, certificate, signature, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_read_and_the_others_kept() {
        let url = "postgres://u:p@h:5/d?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&a=b";
        let (rest, mode, root) = take_tls_parameters(url).unwrap();
        assert_eq!(
            (rest.as_str(), mode, root.as_deref()),
            ("postgres://u:p@h:5/d?application_name=x&a=b", TlsMode::VerifyFull, Some("/tmp/ca.pem"))
        );
        assert_eq!(take_tls_parameters("postgres://h/d").unwrap().1, TlsMode::Disable, "the default is plain TCP");
        assert_eq!(take_tls_parameters("postgres://h/d?sslmode=require").unwrap().0, "postgres://h/d");
        assert!(take_tls_parameters("postgres://h/d?sslmode=verify-ca").unwrap_err().contains("verify-full"));
        assert!(take_tls_parameters("postgres://h/d?sslmode=allow").unwrap_err().contains("not supported"));
    }

    #[test]
    fn a_root_file_needs_verify_full_and_must_hold_certificates() {
        let shown = "postgres://h/d";
        let refused = |url: &str| Connection::from_url(url, shown).err().unwrap();
        assert!(refused("postgres://h/d?sslmode=require&sslrootcert=/x").contains("only with `sslmode=verify-full`"));
        assert!(refused("postgres://h/d?sslrootcert=/x").contains("only with `sslmode=verify-full`"));
        assert!(refused("postgres://h/d?sslmode=verify-full&sslrootcert=/no/such/file").contains("cannot read"));
        let dir = std::env::temp_dir().join(format!("remit-pgtls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("empty.pem");
        std::fs::write(&file, "nothing").unwrap();
        let url = format!("postgres://h/d?sslmode=verify-full&sslrootcert={}", file.display());
        assert!(refused(&url).contains("holds no certificate"));
        let ca = crate::test_tls::TestCa::new("remit test CA");
        ca.write(&file);
        let connection = Connection::from_url(&url, shown).unwrap();
        assert_eq!((connection.mode, connection.config.get_ssl_mode()), (TlsMode::VerifyFull, SslMode::Require));
        assert_eq!(Connection::from_url(shown, shown).unwrap().config.get_ssl_mode(), SslMode::Disable);
        std::fs::remove_dir_all(&dir).ok();
    }
}
