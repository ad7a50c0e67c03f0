//! TLS to PostgreSQL for [`super::postgres`]: what a store URL's `sslmode`, `sslrootcert`, `sslcert` and `sslkey`
//! ask for (or the same files given outside the URL: [`TlsFiles`]), turned into tokio-postgres' configuration and a
//! TLS connector (tokio-postgres-rustls: rustls over tokio, on ring like the gateway's HTTP client in
//! `client/tls.rs`; no OpenSSL). Depends on nothing else of the gateway.
//!
//! The modes (libpq's names, docs/scaling.md):
//! - no `sslmode`, or `disable`: plain TCP, as before TLS was built (libpq's default is `prefer`: ours stays what
//!   deployed gateways already do; `prefer` gives no protection against an active attacker anyway);
//! - `prefer`: TLS when the server offers it, else plain TCP; the certificate is not checked;
//! - `require`: TLS or no connection; the certificate is NOT checked: it keeps passive listeners out, but does not
//!   stop a man in the middle, who presents a certificate of his own. With `sslrootcert=FILE` it is `verify-ca`, as
//!   libpq ("if a root CA file exists, the behavior of sslmode=require will be the same as that of verify-ca");
//!   with `sslrootcert=system` it is refused, as libpq refuses it;
//! - `verify-ca`: TLS, the server's chain checked against the roots of `sslrootcert=FILE` (PEM; required: against
//!   the platform's roots, a chain check without the name would take any certificate a public CA issued to
//!   anyone), the host name not checked (a private CA that issues database certificates only);
//! - `verify-full`: TLS, the server's chain checked against the roots of `sslrootcert=FILE` (PEM; only those, as
//!   libpq) or, without it or with `sslrootcert=system`, the platform's root certificates, and the certificate must
//!   name the URL's host (a DNS name, or an IP address in its subject alternative names).
//!
//! A client certificate (`sslcert=FILE`, the chain in PEM, and `sslkey=FILE`, its unencrypted key in PEM: PKCS#8,
//! PKCS#1 or SEC1) is presented when the server asks for one, with any mode but `disable`; without either, libpq's
//! default files `$HOME/.postgresql/postgresql.crt` and `postgresql.key` when the certificate is there. The key file
//! must be a regular file without group or world access (0600) — or, owned by root, without group write and world
//! access (0640) — as libpq demands. Both are read at start (an error stops the gateway) and again at a handshake
//! after either file changed (a rotated certificate taken without a restart); a changed pair that cannot be read or
//! does not match keeps the last good one, said on stderr.
//!
//! Revocation lists (`sslcrl=FILE`, PEM or DER) are checked with `verify-ca` and `verify-full` by rustls' verifier:
//! every certificate of the chain, an issuer without a list refused, an expired list refused (OpenSSL's checks for
//! libpq).
//!
//! Refused rather than half done: `allow`, a root file or a revocation list with a mode that would not read it
//! (`disable`, `prefer`: silently not checking would look like checking), a client certificate without its key (or
//! the other way round) or with `disable`, `sslcrldir`, and encrypted keys (`sslpassword`; a key file in an
//! encrypted form is refused naming it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What the URL's TLS parameters ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The TLS files given outside the URL (`remit serve --store-ssl-root-cert`, `--store-ssl-cert`, `--store-ssl-key`,
/// their `REMIT_STORE_SSL_*` variables and configuration keys): each is what the URL's parameter of the same meaning
/// would say. Given both ways, the two must agree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// `sslrootcert`: a PEM file of root certificates, or `system`.
    pub root_cert: Option<String>,
    /// `sslcert`: the client's certificate chain (PEM).
    pub cert: Option<String>,
    /// `sslkey`: the client certificate's private key (PEM, unencrypted).
    pub key: Option<String>,
    /// `sslcrl`: certificate revocation lists (PEM or DER) the server's chain is checked against.
    pub crl: Option<String>,
}

/// A store URL read: tokio-postgres' configuration (the TLS mode set), the connector its connections use, and the
/// mode, for messages.
pub struct Connection {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    pub mode: TlsMode,
    /// The mode as the URL writes it (`require` where a root file makes it `verify-ca`), for messages.
    written: TlsMode,
    /// Where the roots of `verify-ca` and `verify-full` come from, for messages: the file of `sslrootcert`, or the
    /// platform.
    roots: String,
    /// The client certificate's file, for messages.
    client_cert: Option<String>,
    /// The revocation lists' file, for messages.
    crl: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("mode", &self.mode)
            .field("roots", &self.roots)
            .field("client_cert", &self.client_cert)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Reads `url` (`postgres://user[:password]@host[:port]/database[?param=value&…]`): `sslmode`, `sslrootcert`,
    /// `sslcert` and `sslkey` here, the other parameters by tokio-postgres. `shown` names the URL in messages (its
    /// password hidden).
    pub fn from_url(url: &str, shown: &str) -> Result<Connection, String> {
        Connection::from_url_with(url, shown, &TlsFiles::default())
    }

    /// [`Connection::from_url`] with the TLS files `files` given outside the URL; the default client certificate
    /// is looked for in `$HOME/.postgresql` ([`Connection::from_url_in`]).
    pub fn from_url_with(url: &str, shown: &str, files: &TlsFiles) -> Result<Connection, String> {
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).map(PathBuf::from);
        Connection::from_url_in(url, shown, files, home.as_deref())
    }

    /// [`Connection::from_url_with`], the home folder `home` (of the default client certificate, libpq's
    /// `~/.postgresql/postgresql.crt` and `postgresql.key`) given.
    pub fn from_url_in(url: &str, shown: &str, files: &TlsFiles, home: Option<&Path>) -> Result<Connection, String> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!("`{shown}` is not a PostgreSQL URL (`postgres://user@host:port/database`)"));
        }
        let (rest, mode, in_url) = take_tls_parameters(url)?;
        let files = in_url.merged(files).map_err(|e| format!("`{shown}`: {e}"))?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e| format!("`{shown}` is not a PostgreSQL URL: {}", describe(&e)))?;
        let written = mode;
        let mode = match (mode, files.root_cert.as_deref()) {
            // As libpq: "if a root CA file exists, the behavior of sslmode=require will be the same as that of
            // verify-ca". The platform's roots (`system`) are libpq's error with any mode but `verify-full`.
            (TlsMode::Require, Some("system")) => {
                return Err(format!(
                    "`{shown}`: `sslrootcert=system` is read only with `sslmode=verify-full` (the platform's roots \
                     without the host name would take any certificate a public CA issued to anyone)"
                ))
            }
            (TlsMode::Require, Some(_)) => TlsMode::VerifyCa,
            (TlsMode::Disable | TlsMode::Prefer, Some(_)) => {
                return Err(format!(
                    "`{shown}`: `sslrootcert` is read only with `sslmode=require` (which it makes `verify-ca`, as \
                     libpq), `verify-ca` or `verify-full` (with `sslmode={}` the server's certificate would not be \
                     checked against it)",
                    mode.name()
                ))
            }
            (mode, _) => mode,
        };
        let client_files = match (&files.cert, &files.key) {
            (None, None) if mode == TlsMode::Disable => None,
            (None, None) => default_client_files(home)?,
            (Some(_), Some(_)) if mode == TlsMode::Disable => {
                return Err(format!(
                    "`{shown}`: a client certificate (`sslcert`, `sslkey`) is sent over TLS only: give an `sslmode` \
                     (`require`, `verify-ca` or `verify-full`)"
                ));
            }
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (Some(_), None) => {
                return Err(format!("`{shown}`: `sslcert` without `sslkey`: give the certificate's key"))
            }
            (None, Some(_)) => return Err(format!("`{shown}`: `sslkey` without `sslcert`: give the certificate too")),
        };
        let crls = match (files.crl.as_deref(), mode) {
            (None, _) => Vec::new(),
            (Some(file), TlsMode::VerifyCa | TlsMode::VerifyFull) => file_crls(Path::new(file))?,
            (Some(_), mode) => {
                return Err(format!(
                    "`{shown}`: `sslcrl` is read only with `sslmode=verify-ca` or `verify-full` (or `require` with \
                     `sslrootcert`, which is `verify-ca`): with `sslmode={}` the server's certificate is not checked",
                    mode.name()
                ))
            }
        };
        config.ssl_mode(match mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        // rustls' verifier of the chain, validity and server-auth usage, with the revocation lists when given (every
        // certificate of the chain checked, one without a list of its issuer refused, an expired list refused: what
        // OpenSSL does for libpq's `sslcrl`), and of the name.
        let webpki = |roots: RootCertStore| {
            let builder =
                rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let builder = match crls.is_empty() {
                true => builder,
                false => builder.with_crls(crls.clone()).enforce_revocation_expiration(),
            };
            // The lists are parsed here: a damaged file stops the gateway at start rather than refuse every
            // connection.
            builder.build().map_err(|e| match (e, files.crl.as_deref()) {
                (rustls::client::VerifierBuilderError::InvalidCrl(why), Some(file)) => {
                    format!("`sslcrl={file}`: not a usable revocation list: {why:?}")
                }
                (e, _) => format!("TLS: {e}"),
            })
        };
        let (verifier, roots): (Arc<dyn ServerCertVerifier>, String) = match (mode, files.root_cert.as_deref()) {
            (TlsMode::VerifyFull, None | Some("system")) => {
                (webpki(platform_roots()?)?, "the platform's root certificates".to_string())
            }
            (TlsMode::VerifyFull, Some(file)) => {
                (webpki(file_roots(Path::new(file))?)?, format!("`sslrootcert={file}`"))
            }
            (TlsMode::VerifyCa, None | Some("system")) => {
                return Err(format!(
                    "`{shown}`: `sslmode=verify-ca` needs `sslrootcert=FILE`, the roots of the CA that issues the \
                     database's certificates (against the platform's roots, a check without the host name would take \
                     any certificate a public CA issued to anyone: use `verify-full` there)"
                ))
            }
            (TlsMode::VerifyCa, Some(file)) => {
                let chain = Some(webpki(file_roots(Path::new(file))?)?);
                (Arc::new(Verifier { provider: provider.clone(), chain }), format!("`sslrootcert={file}`"))
            }
            _ => (Arc::new(Verifier { provider: provider.clone(), chain: None }), String::new()),
        };
        let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
        let mut client = match &client_files {
            Some((cert, key)) => {
                builder.with_client_cert_resolver(Arc::new(ClientIdentity::read(cert, key, provider.clone())?))
            }
            None => builder.with_no_client_auth(),
        };
        // PostgreSQL 17 checks the ALPN name when it is sent, and needs it for `sslnegotiation=direct`.
        client.alpn_protocols = vec![b"postgresql".to_vec()];
        let client_cert = client_files.as_ref().map(|(cert, _)| cert.display().to_string());
        let crl = files.crl.clone();
        Ok(Connection { config, tls: MakeRustlsConnect::new(client), mode, written, roots, client_cert, crl })
    }

    /// Why a connection failed, in words: the causes tokio-postgres keeps behind its short message, a refused
    /// certificate said as what the operator can act on.
    pub fn why(&self, error: &(dyn std::error::Error + 'static)) -> String {
        let mut words = describe(error);
        let mut cause = Some(error);
        while let Some(e) = cause {
            if let Some(refused) = refused_certificate(e) {
                let mode = match self.written {
                    written if written != self.mode => {
                        format!("sslmode={}, read as {} since `sslrootcert` is given", written.name(), self.mode.name())
                    }
                    _ => format!("sslmode={}", self.mode.name()),
                };
                words.push_str(&format!(" ({}; {mode})", self.refusal(refused)));
                break;
            }
            cause = e.source();
        }
        words
    }

    fn refusal(&self, refused: &rustls::Error) -> String {
        use rustls::AlertDescription as Alert;
        use rustls::CertificateError as Certificate;
        match refused {
            rustls::Error::InvalidCertificate(certificate) => match certificate {
                Certificate::UnknownIssuer => {
                    format!("the server's certificate is not issued by a root of {}", self.roots)
                }
                Certificate::NotValidForName | Certificate::NotValidForNameContext { .. } => {
                    // With several hosts (a primary and its standbys), the one refused is not known here.
                    let hosts: Vec<String> = self
                        .config
                        .get_hosts()
                        .iter()
                        .filter_map(|host| match host {
                            tokio_postgres::config::Host::Tcp(host) => Some(format!("`{host}`")),
                            _ => None,
                        })
                        .collect();
                    match hosts.len() {
                        0 | 1 => format!("the server's certificate is not valid for the URL's host {}", hosts.join("")),
                        _ => format!(
                            "the server's certificate is not valid for the URL's host (one of {})",
                            hosts.join(", ")
                        ),
                    }
                }
                Certificate::Expired | Certificate::ExpiredContext { .. } => {
                    "the server's certificate has expired".to_string()
                }
                Certificate::NotValidYet | Certificate::NotValidYetContext { .. } => {
                    "the server's certificate is not valid yet".to_string()
                }
                Certificate::Revoked => format!("the server's certificate is revoked by {}", self.crl_named()),
                Certificate::UnknownRevocationStatus => format!(
                    "the revocation of the server's certificate cannot be checked: {} has no list of its issuer",
                    self.crl_named()
                ),
                Certificate::ExpiredRevocationList | Certificate::ExpiredRevocationListContext { .. } => {
                    format!("the revocation list of {} has expired (its next update is past)", self.crl_named())
                }
                other => format!("the server's certificate is refused: {other:?}"),
            },
            // The server's alert about this client's certificate (PostgreSQL with `ssl_ca_file`).
            rustls::Error::AlertReceived(
                alert @ (Alert::BadCertificate
                | Alert::UnknownCA
                | Alert::CertificateRequired
                | Alert::CertificateExpired
                | Alert::CertificateRevoked
                | Alert::CertificateUnknown
                | Alert::UnsupportedCertificate
                | Alert::AccessDenied),
            ) => match &self.client_cert {
                Some(cert) => format!("the server refused the client certificate `sslcert={cert}`: {alert:?}"),
                None => format!("the server wants a client certificate (`sslcert`, `sslkey`): {alert:?}"),
            },
            rustls::Error::InvalidCertRevocationList(why) => {
                format!("the revocation list of {} is not usable: {why:?}", self.crl_named())
            }
            other => other.to_string(),
        }
    }

    fn crl_named(&self) -> String {
        match &self.crl {
            Some(file) => format!("`sslcrl={file}`"),
            None => "no `sslcrl`".to_string(),
        }
    }
}

impl TlsMode {
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

impl TlsFiles {
    /// These files (the URL's) with `outside`'s added; a file given both ways must be the same.
    fn merged(mut self, outside: &TlsFiles) -> Result<TlsFiles, String> {
        let pairs = [
            (&mut self.root_cert, &outside.root_cert, "sslrootcert", "--store-ssl-root-cert"),
            (&mut self.cert, &outside.cert, "sslcert", "--store-ssl-cert"),
            (&mut self.key, &outside.key, "sslkey", "--store-ssl-key"),
            (&mut self.crl, &outside.crl, "sslcrl", "--store-ssl-crl"),
        ];
        for (in_url, outside, parameter, flag) in pairs {
            match (&*in_url, outside) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!(
                    "`{parameter}={a}` in the URL and `{flag}` (or its variable or key) `{b}` disagree: give it once"
                ))
                }
                (None, Some(b)) => *in_url = Some(b.clone()),
                _ => {}
            }
        }
        Ok(self)
    }
}

/// `url` without its TLS parameters, the mode (none: [`TlsMode::Disable`]) and the files the URL names.
fn take_tls_parameters(url: &str) -> Result<(String, TlsMode, TlsFiles), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), TlsMode::Disable, TlsFiles::default()));
    };
    let (mut mode, mut files, mut kept) = (TlsMode::Disable, TlsFiles::default(), Vec::new());
    for parameter in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = parameter.split_once('=').unwrap_or((parameter, ""));
        match key {
            "sslmode" => {
                mode = match percent_decoded(value)?.as_str() {
                    "disable" => TlsMode::Disable,
                    "prefer" => TlsMode::Prefer,
                    "require" => TlsMode::Require,
                    "verify-ca" => TlsMode::VerifyCa,
                    "verify-full" => TlsMode::VerifyFull,
                    other => {
                        return Err(format!(
                            "`sslmode={other}` is not supported: `disable` (the default), `prefer`, `require`, \
                             `verify-ca` or `verify-full`"
                        ))
                    }
                }
            }
            "sslrootcert" => files.root_cert = Some(percent_decoded(value)?),
            "sslcert" => files.cert = Some(percent_decoded(value)?),
            "sslkey" => files.key = Some(percent_decoded(value)?),
            "sslcrl" => files.crl = Some(percent_decoded(value)?),
            "sslcrldir" => {
                return Err("`sslcrldir` is not supported: give the lists in one file, `sslcrl=FILE` (PEM)".into())
            }
            "sslpassword" => {
                return Err("`sslpassword` is not supported: give `sslkey` an unencrypted key file (mode 0600)".into())
            }
            _ => kept.push(parameter),
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, mode, files))
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

/// The revocation lists of `path`: PEM (`-----BEGIN X509 CRL-----`, one or more) or one in DER, as libpq reads
/// `sslcrl`.
fn file_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `sslcrl={shown}`: {e}"))?;
    let pem = CertificateRevocationListDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`sslcrl={shown}` is not PEM revocation lists: {e}"))?;
    let crls = match pem.is_empty() {
        true if bytes.first() == Some(&0x30) => vec![CertificateRevocationListDer::from(bytes)],
        true => return Err(format!("`sslcrl={shown}` holds no revocation list (`-----BEGIN X509 CRL-----`, or DER)")),
        false => pem,
    };
    Ok(crls)
}

/// libpq's default client certificate, used when neither `sslcert` nor `sslkey` is given: `postgresql.crt` in
/// `~/.postgresql` (`$HOME`'s), with the key `postgresql.key` beside it. None when the certificate is not there (no
/// certificate is then presented); the certificate without its key is an error, as in libpq.
fn default_client_files(home: Option<&Path>) -> Result<Option<(PathBuf, PathBuf)>, String> {
    let Some(home) = home else { return Ok(None) };
    let folder = home.join(".postgresql");
    let (cert, key) = (folder.join("postgresql.crt"), folder.join("postgresql.key"));
    if !cert.exists() {
        return Ok(None);
    }
    if !key.exists() {
        return Err(format!(
            "the default client certificate `{}` is there (no `sslcert` given: libpq's \
             `~/.postgresql/postgresql.crt`), but not its key `{}`: add the key, or name the files (`sslcert`, \
             `sslkey`)",
            cert.display(),
            key.display()
        ));
    }
    Ok(Some((cert, key)))
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

/// The server's certificate for `prefer` and `require` (`roots` none: any certificate accepted, that is what those
/// modes mean) and `verify-ca` (the chain must lead to one of `roots`, the name is not looked at). The handshake's
/// signatures are checked either way, as rustls' own verifier does, so that the session is at least with the holder
/// of the key shown.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    /// rustls' verifier of the roots (and revocation lists), whose verdict on the name is not taken.
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        if let Some(chain) = &self.chain {
            // What rustls' WebPkiServerVerifier checks (the chain, validity, the server-auth usage, revocation) but
            // the name, which it checks last: a refusal of the name means everything before it held.
            match chain.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
                Err(rustls::Error::InvalidCertificate(NotValidForName | NotValidForNameContext { .. })) => {}
                other => return other,
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, certificate, signature, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, certificate, signature, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The client certificate (`sslcert`) and its key (`sslkey`), presented when the server asks: read when made, and
/// read again at a handshake once either file's stamp (size, modification time, inode) changed. A changed pair that
/// cannot be used keeps the last good one (a rotation writes two files, one after the other), said on stderr once
/// for each change.
#[derive(Debug)]
struct ClientIdentity {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    /// The files' stamps when last looked at, and the identity in use.
    current: Mutex<(Stamps, Arc<CertifiedKey>)>,
}

type Stamps = [Option<(std::time::SystemTime, u64, u64)>; 2];

impl ClientIdentity {
    fn read(cert: &Path, key: &Path, provider: Arc<CryptoProvider>) -> Result<ClientIdentity, String> {
        let stamps = [stamp(cert), stamp(key)];
        let identity = Arc::new(certified_key(cert, key, &provider)?);
        let current = Mutex::new((stamps, identity));
        Ok(ClientIdentity { cert: cert.to_path_buf(), key: key.to_path_buf(), provider, current })
    }
}

impl ResolvesClientCert for ClientIdentity {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let stamps = [stamp(&self.cert), stamp(&self.key)];
        if stamps != current.0 {
            current.0 = stamps;
            match certified_key(&self.cert, &self.key, &self.provider) {
                Ok(identity) => current.1 = Arc::new(identity),
                Err(e) => eprintln!("the store's client certificate changed but is not used, the last one is: {e}"),
            }
        }
        Some(current.1.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

fn stamp(path: &Path) -> Option<(std::time::SystemTime, u64, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
    #[cfg(not(unix))]
    let inode = 0;
    Some((metadata.modified().ok()?, metadata.len(), inode))
}

/// The chain of `cert` and the key of `key`, checked as libpq checks them (the key file's permissions) and against
/// each other.
fn certified_key(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let (cert_shown, key_shown) = (cert.display(), key.display());
    let pem = std::fs::read(cert).map_err(|e| format!("cannot read `sslcert={cert_shown}`: {e}"))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`sslcert={cert_shown}` is not PEM certificates: {e}"))?;
    if chain.is_empty() {
        return Err(format!("`sslcert={cert_shown}` holds no certificate (`-----BEGIN CERTIFICATE-----`)"));
    }
    key_permissions(key)?;
    let pem = std::fs::read(key).map_err(|e| format!("cannot read `sslkey={key_shown}`: {e}"))?;
    // PKCS#8's encrypted form, and OpenSSL's traditional one (a `Proc-Type` header in the PEM block).
    let text = String::from_utf8_lossy(&pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "`sslkey={key_shown}` is an encrypted private key, which is not supported (no `sslpassword`): give the \
             key unencrypted, in a file only its owner reads (`openssl pkey -in {key_shown} -out KEY`, `chmod 0600 \
             KEY`)"
        ));
    }
    let private = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        let encrypted = String::from_utf8_lossy(&pem).contains("ENCRYPTED");
        let why =
            if encrypted { "an encrypted key (not supported: no `sslpassword`)".to_string() } else { e.to_string() };
        format!("`sslkey={key_shown}` is not an unencrypted private key in PEM (PKCS#8, PKCS#1 or SEC1): {why}")
    })?;
    CertifiedKey::from_der(chain, private, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            format!("`sslkey={key_shown}` is not the key of the certificate `sslcert={cert_shown}`")
        }
        e => format!("`sslkey={key_shown}`: not a usable key: {e}"),
    })
}

/// libpq's rule for the key file: a regular file; owned by the user, no access for the group or others (0600 or
/// less); owned by root, no write or execute for the group and no access for others (0640 or less, for a key that
/// a system manages and a group may read).
fn key_permissions(key: &Path) -> Result<(), String> {
    let shown = key.display();
    let metadata = std::fs::metadata(key).map_err(|e| format!("cannot read `sslkey={shown}`: {e}"))?;
    if !metadata.is_file() {
        return Err(format!("`sslkey={shown}` is not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (mode, owner) = (metadata.mode() & 0o777, metadata.uid());
        let refused = if owner == 0 { mode & 0o037 != 0 } else { mode & 0o077 != 0 };
        if refused {
            return Err(format!(
                "`sslkey={shown}` has group or world access (mode {mode:04o}): it must be u=rw (0600) or less if \
                 owned by the user, or u=rw,g=r (0640) or less if owned by root, as libpq demands (`chmod 0600 {shown}`)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_read_and_the_others_kept() {
        let url = "postgres://u:p@h:5/d?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&a=b\
                   &sslcert=/c.pem&sslkey=/k.pem";
        let (rest, mode, files) = take_tls_parameters(url).unwrap();
        assert_eq!((rest.as_str(), mode), ("postgres://u:p@h:5/d?application_name=x&a=b", TlsMode::VerifyFull));
        let files_named = TlsFiles {
            root_cert: Some("/tmp/ca.pem".into()),
            cert: Some("/c.pem".into()),
            key: Some("/k.pem".into()),
            crl: None,
        };
        assert_eq!(files, files_named);
        assert_eq!(take_tls_parameters("postgres://h/d").unwrap().1, TlsMode::Disable, "the default is plain TCP");
        assert_eq!(take_tls_parameters("postgres://h/d?sslmode=require").unwrap().0, "postgres://h/d");
        assert_eq!(take_tls_parameters("postgres://h/d?sslmode=verify-ca").unwrap().1, TlsMode::VerifyCa);
        assert!(take_tls_parameters("postgres://h/d?sslmode=allow").unwrap_err().contains("not supported"));
        assert!(take_tls_parameters("postgres://h/d?sslpassword=x").unwrap_err().contains("unencrypted"));
    }

    #[test]
    fn a_root_file_needs_a_verifying_mode_makes_require_verify_ca_and_must_hold_certificates() {
        let shown = "postgres://h/d";
        let refused = |url: &str| Connection::from_url(url, shown).err().unwrap();
        let only = "only with `sslmode=require` (which it makes `verify-ca`, as libpq), `verify-ca` or `verify-full`";
        assert!(refused("postgres://h/d?sslmode=prefer&sslrootcert=/x").contains(only));
        assert!(refused("postgres://h/d?sslrootcert=/x").contains(only));
        // `require` with a root file is `verify-ca`, which reads it; with the platform's roots, refused (libpq).
        assert!(refused("postgres://h/d?sslmode=require&sslrootcert=/x").contains("cannot read `sslrootcert=/x`"));
        let system = "`sslrootcert=system` is read only with `sslmode=verify-full`";
        assert!(refused("postgres://h/d?sslmode=require&sslrootcert=system").contains(system));
        assert!(refused("postgres://h/d?sslmode=verify-full&sslrootcert=/no/such/file").contains("cannot read"));
        assert!(refused("postgres://h/d?sslmode=verify-ca").contains("needs `sslrootcert=FILE`"));
        assert!(refused("postgres://h/d?sslmode=verify-ca&sslrootcert=system").contains("needs `sslrootcert=FILE`"));
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
        let url = format!("postgres://h/d?sslmode=verify-ca&sslrootcert={}", file.display());
        let connection = Connection::from_url(&url, shown).unwrap();
        assert_eq!((connection.mode, connection.config.get_ssl_mode()), (TlsMode::VerifyCa, SslMode::Require));
        let require = format!("postgres://h/d?sslmode=require&sslrootcert={}", file.display());
        let connection = Connection::from_url(&require, shown).unwrap();
        assert_eq!((connection.mode, connection.config.get_ssl_mode()), (TlsMode::VerifyCa, SslMode::Require));
        assert_eq!(connection.roots, format!("`sslrootcert={}`", file.display()));
        // The root file given outside the URL means the same; given both ways, the two must agree.
        let outside = TlsFiles { root_cert: Some(file.display().to_string()), ..TlsFiles::default() };
        let connection = Connection::from_url_with("postgres://h/d?sslmode=verify-ca", shown, &outside).unwrap();
        assert_eq!(connection.roots, format!("`sslrootcert={}`", file.display()));
        let connection = Connection::from_url_with("postgres://h/d?sslmode=require", shown, &outside).unwrap();
        assert_eq!(connection.mode, TlsMode::VerifyCa);
        assert!(Connection::from_url_with("postgres://h/d", shown, &outside).unwrap_err().contains(only));
        let other = TlsFiles { root_cert: Some("/other.pem".into()), ..TlsFiles::default() };
        assert!(Connection::from_url_with(&url, shown, &other).unwrap_err().contains("disagree"));
        assert_eq!(Connection::from_url(shown, shown).unwrap().config.get_ssl_mode(), SslMode::Disable);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_client_certificate_needs_its_key_tls_and_a_key_file_only_its_owner_reads() {
        use std::os::unix::fs::PermissionsExt;
        let shown = "postgres://h/d";
        let dir = std::env::temp_dir().join(format!("remit-pgtls-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = crate::test_tls::TestCa::new("remit client CA");
        let (cert, key) = ca.client_files("remit", &dir);
        let files =
            |cert: &str, key: &str| TlsFiles { cert: Some(cert.into()), key: Some(key.into()), ..Default::default() };
        let connect = |url: &str, files: &TlsFiles| Connection::from_url_with(url, shown, files);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let connection = connect("postgres://h/d?sslmode=require", &files(&cert, &key)).unwrap();
        assert_eq!(connection.client_cert.as_deref(), Some(cert.as_str()));
        let both = format!("postgres://h/d?sslmode=verify-full&sslcert={cert}&sslkey={key}");
        let in_url = connect(&both, &TlsFiles::default()).unwrap();
        assert_eq!(in_url.client_cert.as_deref(), Some(cert.as_str()));
        assert!(connect("postgres://h/d", &files(&cert, &key)).unwrap_err().contains("over TLS only"));
        let half = TlsFiles { cert: Some(cert.clone()), ..Default::default() };
        assert!(connect("postgres://h/d?sslmode=require", &half).unwrap_err().contains("without `sslkey`"));
        // libpq's permissions: readable by the group or the world is refused, for its owner and for root alike.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let why = connect("postgres://h/d?sslmode=require", &files(&cert, &key)).unwrap_err();
        assert!(why.contains("has group or world access (mode 0644)"), "{why}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Another certificate's key, and a file that is no key.
        let (_, other_key) = ca.client_files("other", &dir.join("other"));
        std::fs::set_permissions(&other_key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let why = connect("postgres://h/d?sslmode=require", &files(&cert, &other_key)).unwrap_err();
        assert!(why.contains("is not the key of the certificate"), "{why}");
        std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o600)).unwrap();
        let why = connect("postgres://h/d?sslmode=require", &files(&cert, &cert)).unwrap_err();
        assert!(why.contains("is not an unencrypted private key"), "{why}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// libpq's default client certificate: `$HOME/.postgresql/postgresql.crt` with `postgresql.key`, when neither
    /// `sslcert` nor `sslkey` is given and the mode is not `disable`; none when the certificate is not there; the
    /// certificate without its key refused.
    #[test]
    fn the_default_client_certificate_is_read_from_home_as_libpq_reads_it() {
        use std::os::unix::fs::PermissionsExt;
        let shown = "postgres://h/d";
        let home = std::env::temp_dir().join(format!("remit-pgtls-home-{}", std::process::id()));
        let folder = home.join(".postgresql");
        std::fs::create_dir_all(&folder).unwrap();
        let connect = |url: &str, files: &TlsFiles| Connection::from_url_in(url, shown, files, Some(&home));
        // Nothing there: no certificate, no error.
        assert_eq!(connect("postgres://h/d?sslmode=require", &TlsFiles::default()).unwrap().client_cert, None);
        let ca = crate::test_tls::TestCa::new("remit client CA");
        let (cert, key) = ca.client_files("remit", &home.join("made"));
        let (default_cert, default_key) = (folder.join("postgresql.crt"), folder.join("postgresql.key"));
        std::fs::copy(&cert, &default_cert).unwrap();
        // The certificate without its key: refused, naming both files.
        let why = connect("postgres://h/d?sslmode=require", &TlsFiles::default()).unwrap_err();
        assert!(why.contains(&format!("`{}` is there", default_cert.display())), "{why}");
        assert!(why.contains(&format!("not its key `{}`", default_key.display())), "{why}");
        std::fs::copy(&key, &default_key).unwrap();
        std::fs::set_permissions(&default_key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let found = connect("postgres://h/d?sslmode=verify-full&sslrootcert=system", &TlsFiles::default());
        let default = Some(default_cert.display().to_string());
        match found {
            Ok(connection) => assert_eq!(connection.client_cert, default),
            // A machine without platform roots: the same with `require`.
            Err(e) => assert!(e.contains("needs trusted roots"), "{e}"),
        }
        assert_eq!(connect("postgres://h/d?sslmode=prefer", &TlsFiles::default()).unwrap().client_cert, default);
        // Checked as a named key is: readable by others, refused.
        std::fs::set_permissions(&default_key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let why = connect("postgres://h/d?sslmode=require", &TlsFiles::default()).unwrap_err();
        assert!(why.contains("has group or world access"), "{why}");
        std::fs::set_permissions(&default_key, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Plain TCP sends none; named files win; no home, no default.
        assert_eq!(connect("postgres://h/d", &TlsFiles::default()).unwrap().client_cert, None);
        let named = TlsFiles { cert: Some(cert.clone()), key: Some(key.clone()), ..TlsFiles::default() };
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(connect("postgres://h/d?sslmode=require", &named).unwrap().client_cert, Some(cert.clone()));
        let homeless = Connection::from_url_in("postgres://h/d?sslmode=require", shown, &TlsFiles::default(), None);
        assert_eq!(homeless.unwrap().client_cert, None);
        std::fs::remove_dir_all(&home).ok();
    }

    /// `sslcrl`: read from the URL or outside it, only with a mode that checks the server's chain; a file that holds
    /// no list, or a damaged one, stops the start. (Revocation itself: tests/gateway_postgres.rs, against a server.)
    #[test]
    fn revocation_lists_need_a_verifying_mode_and_a_usable_file() {
        let shown = "postgres://h/d";
        let (_, _, files) = take_tls_parameters("postgres://h/d?sslmode=verify-ca&sslcrl=%2Fetc%2Fdb.crl").unwrap();
        assert_eq!(files.crl.as_deref(), Some("/etc/db.crl"));
        assert!(take_tls_parameters("postgres://h/d?sslcrldir=/etc/crls").unwrap_err().contains("`sslcrl=FILE`"));
        let dir = std::env::temp_dir().join(format!("remit-pgtls-crl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = crate::test_tls::TestCa::new("remit CRL CA");
        let root = ca.write(&dir.join("ca.pem"));
        let refused = |url: &str| Connection::from_url_in(url, shown, &TlsFiles::default(), None).unwrap_err();
        for mode in ["prefer", "require"] {
            let why = refused(&format!("postgres://h/d?sslmode={mode}&sslcrl=/x.crl"));
            let only = "`sslcrl` is read only with `sslmode=verify-ca` or `verify-full` (or `require` with \
                        `sslrootcert`, which is `verify-ca`)";
            assert!(why.contains(&format!("{only}: with `sslmode={mode}`")), "{why}");
        }
        let why = refused(&format!("postgres://h/d?sslmode=verify-ca&sslrootcert={root}&sslcrl=/no/such.crl"));
        assert!(why.contains("cannot read `sslcrl=/no/such.crl`"), "{why}");
        let empty = dir.join("empty.crl");
        std::fs::write(&empty, "no list here").unwrap();
        let why = refused(&format!("postgres://h/d?sslmode=verify-full&sslrootcert={root}&sslcrl={}", empty.display()));
        assert!(why.contains("holds no revocation list"), "{why}");
        let damaged = dir.join("damaged.crl");
        std::fs::write(&damaged, "-----BEGIN X509 CRL-----\nMAMCAQA=\n-----END X509 CRL-----\n").unwrap();
        let url = format!("postgres://h/d?sslmode=require&sslrootcert={root}&sslcrl={}", damaged.display());
        assert!(refused(&url).contains("not a usable revocation list"), "{}", refused(&url));
        // Given outside the URL it means the same; both ways, the two must agree.
        let outside = TlsFiles { crl: Some("/a.crl".into()), ..TlsFiles::default() };
        let why = Connection::from_url_in("postgres://h/d?sslmode=require", shown, &outside, None).unwrap_err();
        assert!(why.contains("`sslcrl` is read only"), "{why}");
        let both = Connection::from_url_in("postgres://h/d?sslcrl=/b.crl", shown, &outside, None).unwrap_err();
        assert!(both.contains("disagree"), "{both}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// An encrypted key (PKCS#8's `ENCRYPTED PRIVATE KEY`, or OpenSSL's traditional form with its `Proc-Type`
    /// header) is refused naming the file, and `sslpassword` with it: remit reads unencrypted keys only.
    #[test]
    fn an_encrypted_key_is_refused_naming_the_file() {
        use std::os::unix::fs::PermissionsExt;
        let shown = "postgres://h/d";
        let dir = std::env::temp_dir().join(format!("remit-pgtls-encrypted-{}", std::process::id()));
        let ca = crate::test_tls::TestCa::new("remit client CA");
        let (cert, _) = ca.client_files("remit", &dir);
        let encrypted = [
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIGbMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAiK\n\
             -----END ENCRYPTED PRIVATE KEY-----\n",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0F3E\n\nMIIEow==\n\
             -----END RSA PRIVATE KEY-----\n",
        ];
        for (i, pem) in encrypted.iter().enumerate() {
            let key = dir.join(format!("encrypted-{i}.key"));
            std::fs::write(&key, pem).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            let files =
                TlsFiles { cert: Some(cert.clone()), key: Some(key.display().to_string()), ..Default::default() };
            let why = Connection::from_url_in("postgres://h/d?sslmode=require", shown, &files, None).unwrap_err();
            let named = format!("`sslkey={}` is an encrypted private key, which is not supported", key.display());
            assert!(why.contains(&named), "{why}");
        }
        let why = Connection::from_url_in("postgres://h/d?sslpassword=x", shown, &TlsFiles::default(), None);
        assert!(why.unwrap_err().contains("`sslpassword` is not supported"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
