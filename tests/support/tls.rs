//! https on loopback, made by the test itself: a certificate authority generated at test time (rcgen), server
//! certificates it signs for the names a test chooses (a DNS name, an IP address, or another host's name to be
//! refused), the connections a test server accepts (plain or TLS) and the requests it reads from them, and a
//! TLS-terminating relay that puts https in front of a real server speaking plain http. Shared by the integration
//! tests (`#[path = "support/tls.rs"]`) and the gateway's unit tests (crates/remit-gateway/src/lib.rs).
#![allow(dead_code)]

use std::io::{BufRead, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// A certificate authority made for one test; trusted only by a client given its certificate.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    der: CertificateDer<'static>,
    /// Its certificate in PEM (what `--tls-ca` reads).
    pub pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        use rcgen::KeyUsagePurpose::{CrlSign, DigitalSignature, KeyCertSign};
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyCertSign, CrlSign, DigitalSignature];
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        TestCa { pem: certificate.pem(), der: certificate.der().clone(), issuer: rcgen::Issuer::new(params, key) }
    }

    /// Writes the CA's certificate to `path` (PEM) and returns the path.
    pub fn write(&self, path: &Path) -> String {
        std::fs::write(path, &self.pem).unwrap();
        path.display().to_string()
    }

    /// A TLS server configuration with a certificate this CA signed for `names` (DNS names or IP addresses; the
    /// chain sent is the certificate and the CA's).
    pub fn server(&self, names: &[&str]) -> Arc<ServerConfig> {
        let (certificate, key) = self.issue(names);
        let chain = vec![certificate.der().clone(), self.der.clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .unwrap();
        Arc::new(config)
    }

    /// [`TestCa::server`]'s certificate and key as the files `--tls-cert` and `--tls-key` read, in `dir`: the chain
    /// (the certificate, then the CA's) and the key, in PEM. Returns their paths.
    pub fn server_files(&self, names: &[&str], dir: &Path) -> (String, String) {
        let (certificate, key) = self.issue(names);
        let (cert, key_path) = (dir.join("server-chain.pem"), dir.join("server-key.pem"));
        std::fs::write(&cert, format!("{}{}", certificate.pem(), self.pem)).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert.display().to_string(), key_path.display().to_string())
    }

    /// A client certificate this CA signs for `name` (for mutual TLS), and its key.
    pub fn client_identity(&self, name: &str) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (vec![certificate.der().clone(), self.der.clone()], private)
    }

    /// [`TestCa::client_identity`]'s certificate (CN `name`) and key as PEM files in `dir` (made if missing):
    /// `client-chain.pem` (the certificate, then the CA's) and `client-key.pem` (PKCS#8, mode as the umask says).
    /// Returns their paths.
    pub fn client_files(&self, name: &str, dir: &Path) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        let (cert, key_path) = (dir.join("client-chain.pem"), dir.join("client-key.pem"));
        std::fs::write(&cert, format!("{}{}", certificate.pem(), self.pem)).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert.display().to_string(), key_path.display().to_string())
    }

    /// POSTs `body` (JSON) to `path` at `address` over https, trusting this CA for the server and presenting a
    /// client certificate `identity` issued, if any; the status and the body, or why the exchange failed (a
    /// refused handshake included).
    pub fn https_post(
        &self,
        address: SocketAddr,
        path: &str,
        body: &str,
        identity: Option<&TestCa>,
    ) -> Result<(u16, String), String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match identity {
            Some(issuer) => {
                let (chain, key) = issuer.client_identity("pep:todo-backend");
                builder.with_client_auth_cert(chain, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        let name = rustls::pki_types::ServerName::from(address.ip());
        let connection = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
        let socket = TcpStream::connect(address).map_err(|e| e.to_string())?;
        socket.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let mut stream = StreamOwned::new(connection, socket);
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        // A server that closes without TLS's close_notify ends the answer as well as one that sends it.
        match stream.read_to_end(&mut answer) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => {}
            Err(e) => return Err(e.to_string()),
        }
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status =
            text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("no answer: {text:?}"))?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        Ok((status, body))
    }

    /// A server certificate this CA signs for `names`, and its key.
    fn issue(&self, names: &[&str]) -> (rcgen::Certificate, rcgen::KeyPair) {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, names[0]);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        (certificate, key)
    }
}

/// A connection a test server accepted: plain TCP, or TLS (the handshake runs at the first read or write; a client
/// that refuses the certificate makes that read fail).
pub enum Accepted {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Accepted {
    /// `socket` as it is, or with TLS as `tls` configures it.
    pub fn new(socket: TcpStream, tls: Option<&Arc<ServerConfig>>) -> Accepted {
        match tls {
            None => Accepted::Plain(socket),
            Some(config) => {
                let connection = ServerConnection::new(config.clone()).unwrap();
                Accepted::Tls(Box::new(StreamOwned::new(connection, socket)))
            }
        }
    }

    /// Ends the connection as a server should: TLS's `close_notify`, then the socket closed for writing.
    pub fn finish(&mut self) {
        if let Accepted::Tls(tls) = self {
            tls.conn.send_close_notify();
            tls.flush().ok();
        }
        self.socket().shutdown(Shutdown::Write).ok();
    }

    pub fn socket(&self) -> &TcpStream {
        match self {
            Accepted::Plain(socket) => socket,
            Accepted::Tls(tls) => tls.get_ref(),
        }
    }
}

impl Read for Accepted {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Accepted::Plain(socket) => socket.read(out),
            Accepted::Tls(tls) => tls.read(out),
        }
    }
}

impl Write for Accepted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Accepted::Plain(socket) => socket.write(bytes),
            Accepted::Tls(tls) => tls.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Accepted::Plain(socket) => socket.flush(),
            Accepted::Tls(tls) => tls.flush(),
        }
    }
}

/// A TLS-terminating relay on a loopback port it picks: each connection's TLS ends here and its bytes go on over
/// plain TCP to `target`, both ways, until either side closes. Returns the relay's address and a count of the
/// connections whose handshake succeeded. Its threads end with the test process.
pub fn relay(config: Arc<ServerConfig>, target: SocketAddr) -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let handshakes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = handshakes.clone();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { break };
            let (config, counted) = (config.clone(), counted.clone());
            std::thread::spawn(move || relay_one(config, socket, target, &counted));
        }
    });
    (address, handshakes)
}

/// One relayed connection. One rustls connection serves both directions, so it is shared under a lock: this
/// thread decrypts what the client sends and writes it to the target; a second one encrypts what the target sends.
fn relay_one(
    config: Arc<ServerConfig>,
    mut socket: TcpStream,
    target: SocketAddr,
    handshakes: &std::sync::atomic::AtomicU64,
) -> std::io::Result<()> {
    let mut connection = ServerConnection::new(config).map_err(std::io::Error::other)?;
    // A client that refuses the certificate ends the handshake with an alert: an error here, nothing relayed.
    while connection.is_handshaking() {
        connection.complete_io(&mut socket)?;
    }
    handshakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let backend = TcpStream::connect(target)?;
    let connection = Arc::new(Mutex::new(connection));
    let (mut from_backend, mut to_client, shared) = (backend.try_clone()?, socket.try_clone()?, connection.clone());
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 << 10];
        loop {
            let n = from_backend.read(&mut buffer).unwrap_or(0);
            let mut connection = shared.lock().unwrap();
            if n == 0 {
                connection.send_close_notify();
            } else if connection.writer().write_all(&buffer[..n]).is_err() {
                return;
            }
            while connection.wants_write() {
                if connection.write_tls(&mut to_client).is_err() {
                    return;
                }
            }
            if n == 0 {
                to_client.shutdown(Shutdown::Write).ok();
                return;
            }
        }
    });
    let mut to_backend = backend;
    // What the client sent that rustls has not taken yet. Empty at first, but rustls may already hold more than the
    // handshake: a client sends its request right after its last handshake message, often in the same read.
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 << 10];
    loop {
        let mut plain = Vec::new();
        let closed = {
            let mut connection = connection.lock().unwrap();
            let mut rest = &received[..];
            let mut closed = false;
            loop {
                if !rest.is_empty() {
                    connection.read_tls(&mut rest)?;
                }
                let state = connection.process_new_packets().map_err(std::io::Error::other)?;
                closed |= state.peer_has_closed();
                match connection.reader().read_to_end(&mut plain) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if rest.is_empty() {
                    break;
                }
            }
            while connection.wants_write() {
                connection.write_tls(&mut socket)?;
            }
            closed
        };
        to_backend.write_all(&plain)?;
        if closed {
            break;
        }
        let n = socket.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        received.clear();
        received.extend_from_slice(&buffer[..n]);
    }
    to_backend.shutdown(Shutdown::Write)
}

/// The body of the next HTTP/1.1 request on a test server's connection (its head read and dropped, the body by
/// `Content-Length`); `None` when the client closed the connection.
pub fn read_request(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}
