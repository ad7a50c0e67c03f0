//! The gateway's own servers over TLS (`--tls-cert FILE --tls-key FILE` on `remit serve` and `remit mcp-proxy`):
//! bearer tokens, inbox answers, approvals and decisions then never cross a network in the clear, as OAuth 2.1 asks
//! of a resource server. rustls on ring (as the gateway's client, `crate::client`); TLS 1.2 and 1.3, no client
//! certificates unless `--client-ca` names the CAs whose client certificates authenticate enforcement points
//! (mutual TLS: verified when shown, never required, so browsers reach the inbox; [`TlsPeer`] tells the decision
//! endpoints who showed one); HTTP/1.1 (announced by ALPN).
//!
//! A connection reaches the server ([`super::conn`]) once its handshake is done ([`TlsListener`]): each accepted connection shakes hands on a
//! task of its own, so a client slow to finish (or never finishing: dropped after [`HANDSHAKE_TIMEOUT`]) holds up no
//! other, and one that speaks plain HTTP to the TLS port is dropped without an answer.
//!
//! Certificates are renewed without a restart (as ACME clients renew them every few weeks): a handshake that finds the
//! files changed since they were read (checked at most every [`RELOAD_CHECK`]) loads them again, and a pair that
//! does not load (half-written, or a key that is not the certificate's) is reported and the last good one kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::conn::{Accept, Connections};

/// How long a client may take over its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a handshake looks whether the certificate or key file changed.
pub const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// What a TLS server presents: a certificate chain (the server's first, then its intermediates) and its private key,
/// from PEM files. Cheap to clone (shared).
#[derive(Clone)]
pub struct ServerTls(Arc<rustls::ServerConfig>);

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The chain of the PEM file `cert` and the key (PKCS#8, PKCS#1 or SEC1) of the PEM file `key`, read again when
    /// they change; an error naming the file when one cannot be read, holds none, or the key is not the
    /// certificate's.
    pub fn from_files(cert: &Path, key: &Path) -> Result<ServerTls, String> {
        ServerTls::from_files_with_clients(cert, key, None)
    }

    /// [`ServerTls::from_files`], and with `client_ca` a PEM file of CA certificates: a client certificate one of
    /// them issued is verified in the handshake (one that does not verify ends it); a client may also show none.
    pub fn from_files_with_clients(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<ServerTls, String> {
        let files = CertFiles { cert: cert.to_path_buf(), key: key.to_path_buf() };
        let (loaded, stamp) = files.load()?;
        let now = std::time::Instant::now();
        let state = Mutex::new(Current { loaded: Arc::new(loaded), stamp, checked: now });
        let resolver = Arc::new(Renewing { files, state });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
                let mut roots = rustls::RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(&pem) {
                    let certificate = certificate
                        .map_err(|e| format!("`{}` is not a PEM certificate file: {e:?}", path.display()))?;
                    roots.add(certificate).map_err(|e| format!("`{}`: {e}", path.display()))?;
                }
                if roots.is_empty() {
                    return Err(format!("`{}` holds no CA certificate", path.display()));
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| format!("`{}`: {e}", path.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls(Arc::new(config)))
    }
}

/// The certificate and key files of a server.
#[derive(Debug)]
struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
}

/// When the files were last changed (their modification times), to know when to read them again.
type Stamp = (Option<SystemTime>, Option<SystemTime>);

impl CertFiles {
    fn stamp(&self) -> Stamp {
        let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        (modified(&self.cert), modified(&self.key))
    }

    /// The chain and key, checked to go together, and the stamp of what was read.
    fn load(&self) -> Result<(CertifiedKey, Stamp), String> {
        let stamp = self.stamp();
        let read = |path: &Path| std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()));
        let (cert_pem, key_pem) = (read(&self.cert)?, read(&self.key)?);
        let (cert_name, key_name) = (self.cert.display(), self.key.display());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("`{cert_name}` is not a PEM certificate chain: {e:?}"))?;
        if chain.is_empty() {
            return Err(format!("`{cert_name}` holds no certificate (`-----BEGIN CERTIFICATE-----`)"));
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| format!("`{key_name}` holds no private key in PEM (PKCS#8, PKCS#1 or SEC1): {e:?}"))?;
        let provider = rustls::crypto::ring::default_provider();
        let loaded = CertifiedKey::from_der(chain, key, &provider)
            .map_err(|e| format!("`{key_name}` is not the key of the certificate in `{cert_name}`: {e}"))?;
        Ok((loaded, stamp))
    }
}

/// The certificate a handshake presents: the files' current pair ([`ServerTls::from_files`]).
#[derive(Debug)]
struct Renewing {
    files: CertFiles,
    state: Mutex<Current>,
}

#[derive(Debug)]
struct Current {
    loaded: Arc<CertifiedKey>,
    /// The files' stamp when `loaded` was read (or last failed to be).
    stamp: Stamp,
    checked: std::time::Instant,
}

impl ResolvesServerCert for Renewing {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if current.checked.elapsed() >= RELOAD_CHECK {
            current.checked = std::time::Instant::now();
            let stamp = self.files.stamp();
            if stamp != current.stamp {
                current.stamp = stamp;
                match self.files.load() {
                    Ok((loaded, stamp)) => {
                        eprintln!("tls: the certificate `{}` was read again", self.files.cert.display());
                        current.loaded = Arc::new(loaded);
                        current.stamp = stamp;
                    }
                    Err(e) => eprintln!("tls: the new certificate is not used ({e}); the last good one is kept"),
                }
            }
        }
        Some(current.loaded.clone())
    }
}

/// A listener that hands the server the connections whose TLS handshake is done, in the order they finish it.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, OwnedSemaphorePermit)>,
}

impl TlsListener {
    /// Accepts on `listener` from a task of its own (within the current tokio runtime), until this listener is
    /// dropped; a connection holds one of the slots of `connections` from before it is accepted (its handshake
    /// included) until it closes.
    pub fn new(listener: TcpListener, tls: &ServerTls, connections: Connections) -> std::io::Result<TlsListener> {
        let acceptor = TlsAcceptor::from(tls.0.clone());
        let (send, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let slot = connections.slot().await;
                let (tcp, _) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    // Out of file descriptors, say: a moment, then on (as axum's own listener does).
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if send.is_closed() {
                    return;
                }
                tcp.set_nodelay(true).ok();
                let (acceptor, send) = (acceptor.clone(), send.clone());
                tokio::spawn(async move {
                    if let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        let _ = send.send((tls, slot)).await;
                    }
                });
            }
        });
        Ok(TlsListener { ready })
    }
}

/// Who is at the other end of a TLS connection (axum's `ConnectInfo` of every request on it): the address, and
/// whether the client showed a certificate that `--client-ca` verified (an authenticated enforcement point).
#[derive(Debug, Clone)]
pub struct TlsPeer {
    pub address: std::net::SocketAddr,
    pub certified: bool,
}

impl Accept for TlsListener {
    type Io = TlsStream<TcpStream>;

    async fn accept(&mut self) -> (Self::Io, OwnedSemaphorePermit) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task ended (it never does while this listener lives).
            None => std::future::pending().await,
        }
    }

    /// Every request of the connection carries its [`TlsPeer`]. The handshake ended unless a certificate shown was
    /// verified, so one being there is enough.
    fn describe(io: &Self::Io, router: axum::Router) -> axum::Router {
        let (tcp, session) = io.get_ref();
        let Ok(address) = tcp.peer_addr() else { return router };
        let certified = session.peer_certificates().is_some_and(|chain| !chain.is_empty());
        router.layer(axum::Extension(axum::extract::ConnectInfo(TlsPeer { address, certified })))
    }
}
