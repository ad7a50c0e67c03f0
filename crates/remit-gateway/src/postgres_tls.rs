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
//! PKCS#1 or SEC1) is presented when the server asks for one, with any mode but `disable`. The key file must be a
//! regular file without group or world access (0600) — or, owned by root, without group write and world access
//! (0640) — as libpq demands. Both are read at start (an error stops the gateway) and again at a handshake after
//! either file changed (a rotated certificate taken without a restart); a changed pair that cannot be read or does
//! not match keeps the last good one, said on stderr.
//!
//! Refused rather than half done: `allow`, a root file with a mode that would not read it (`disable`, `prefer`:
//! silently not checking would look like checking), a client certificate without
//! its key (or the other way round) or with `disable`, and `sslpassword` (encrypted keys: tokio-postgres refuses the
//! parameter as unknown).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
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

    /// [`Connection::from_url`] with the TLS files `files` given outside the URL.
    pub fn from_url_with(url: &str, shown: &str, files: &TlsFiles) -> Result<Connection, String> {
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
            (None, None) => None,
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
        config.ssl_mode(match mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let (verifier, roots): (Arc<dyn ServerCertVerifier>, String) = match (mode, files.root_cert.as_deref()) {
            (TlsMode::VerifyFull, None | Some("system")) => {
                let roots = Arc::new(platform_roots()?);
                let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("TLS: {e}"))?;
                (verifier, "the platform's root certificates".to_string())
            }
            (TlsMode::VerifyFull, Some(file)) => {
                let roots = Arc::new(file_roots(Path::new(file))?);
                let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("TLS: {e}"))?;
                (verifier, format!("`sslrootcert={file}`"))
            }
            (TlsMode::VerifyCa, None | Some("system")) => {
                return Err(format!(
                    "`{shown}`: `sslmode=verify-ca` needs `sslrootcert=FILE`, the roots of the CA that issues the \
                     database's certificates (against the platform's roots, a check without the host name would take \
                     any certificate a public CA issued to anyone: use `verify-full` there)"
                ))
            }
            (TlsMode::VerifyCa, Some(file)) => {
                let roots = Some(file_roots(Path::new(file))?);
                (Arc::new(Verifier { provider: provider.clone(), roots }), format!("`sslrootcert={file}`"))
            }
            _ => (Arc::new(Verifier { provider: provider.clone(), roots: None }), String::new()),
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
        let client_cert = files.cert.clone();
        Ok(Connection { config, tls: MakeRustlsConnect::new(client), mode, written, roots, client_cert })
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
    roots: Option<RootCertStore>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            // What rustls' WebPkiServerVerifier checks (the chain, validity, the server-auth usage) but the name.
            let certificate = rustls::server::ParsedCertificate::try_from(end_entity)?;
            let algorithms = self.provider.signature_verification_algorithms.all;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &certificate,
                roots,
                intermediates,
                now,
                algorithms,
            )?;
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
        let files_named =
            TlsFiles { root_cert: Some("/tmp/ca.pem".into()), cert: Some("/c.pem".into()), key: Some("/k.pem".into()) };
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
}
