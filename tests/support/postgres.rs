//! Throwaway PostgreSQL servers for the tests of the PostgreSQL store, started and stopped by the project's own
//! script (scripts/postgres.sh: Debian's server as the `postgres` user, data in a temporary folder, a loopback
//! port). A machine without the server fails the test, naming the script that installs it; nothing is skipped.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

pub const SCRIPT: &str = "scripts/postgres.sh";

/// A server of its own; stopped, its folder removed, when dropped (and by the script's watcher when the test
/// process ends first).
pub struct Server {
    dir: PathBuf,
    url: String,
}

fn script() -> Command {
    Command::new(super::root().join(SCRIPT))
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// A server that also speaks TLS with the certificate chain and key of these PEM files (`ssl = on`).
    pub fn start_tls(certificate: &str, key: &str) -> Server {
        Server::start_with(&["--tls", certificate, key])
    }

    /// [`Server::start_tls`] asking clients for a certificate issued by a CA of the PEM file `client_ca`: every
    /// database but `remit` (the one [`Server::database`] makes the others through) only over TLS with a certificate
    /// naming the user (`hostssl … cert`), no password (scripts/postgres.sh `--client-ca`).
    pub fn start_client_certificates(certificate: &str, key: &str, client_ca: &str) -> Server {
        Server::start_with(&["--tls", certificate, key, "--client-ca", client_ca])
    }

    fn start_with(options: &[&str]) -> Server {
        let out = script()
            .args(["start", "--owner", &std::process::id().to_string()])
            .args(options)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {SCRIPT}: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{SCRIPT} start failed (no PostgreSQL server? `{SCRIPT} install` installs Debian's, and \
             scripts/test-deps.sh runs it): {stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut lines = stdout.lines();
        let (Some(dir), Some(url)) = (lines.next(), lines.next()) else {
            panic!("{SCRIPT} start printed no folder and URL: {stdout}");
        };
        Server { dir: PathBuf::from(dir), url: url.to_string() }
    }

    /// A streaming-replication standby of this server (scripts/postgres.sh `standby`: a base backup of every
    /// database, then the primary's WAL streamed), started on a port of its own; with `synchronous`, the primary's
    /// commits wait until the standby has flushed them (`synchronous_standby_names`). Its [`Server::url`] is its
    /// database `remit`; [`Server::database_url`] names the others, which are the primary's.
    pub fn standby(&self, synchronous: bool) -> Server {
        let dir = self.dir.display().to_string();
        let mut options = vec!["--owner".to_string(), std::process::id().to_string()];
        if synchronous {
            options.push("--sync".into());
        }
        let out = script()
            .args(["standby", &dir])
            .args(&options)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {SCRIPT}: {e}"));
        assert!(out.status.success(), "{SCRIPT} standby failed: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut lines = stdout.lines();
        let (Some(dir), Some(url)) = (lines.next(), lines.next()) else {
            panic!("{SCRIPT} standby printed no folder and URL: {stdout}");
        };
        Server { dir: PathBuf::from(dir), url: url.to_string() }
    }

    /// Promotes a standby ([`Server::standby`]) to a primary: returns once it accepts writes.
    pub fn promote(&self) {
        let status = script().arg("promote").arg(&self.dir).status().unwrap();
        assert!(status.success(), "{SCRIPT} promote");
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        std::fs::read_to_string(self.dir.join("port")).unwrap().trim().parse().unwrap()
    }

    /// The URL of the database `name` on this server and then on `standby` (libpq's multi-host form,
    /// `postgres://user:password@h1:p1,h2:p2/name?target_session_attrs=read-write`): a connection goes to whichever
    /// of the two accepts writes.
    pub fn failover_url(&self, standby: &Server, name: &str) -> String {
        let password = std::fs::read_to_string(self.dir.join("password")).unwrap().trim().to_string();
        let name: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        format!(
            "postgres://remit:{password}@127.0.0.1:{},127.0.0.1:{}/{name}?target_session_attrs=read-write",
            self.port(),
            standby.port()
        )
    }

    /// The server's folder (scripts/postgres.sh's: `data/` holds the cluster).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The URL of the server's database `remit` (the password in it).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL without its password, and the password.
    pub fn url_and_password(&self, url: &str) -> (String, String) {
        let password = std::fs::read_to_string(self.dir.join("password")).unwrap().trim().to_string();
        (url.replacen(&format!(":{password}@"), "@", 1), password)
    }

    /// A new empty database `name` on the server: its URL.
    pub fn database(&self, name: &str) -> String {
        let name: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        let out = Command::new("psql")
            .args([self.url.as_str(), "-q", "-c", &format!("DROP DATABASE IF EXISTS {name}"), "-c"])
            .arg(format!("CREATE DATABASE {name}"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run psql (installed with the server by `{SCRIPT} install`): {e}"));
        assert!(out.status.success(), "CREATE DATABASE {name}: {}", String::from_utf8_lossy(&out.stderr));
        let base = self.url.rsplit_once('/').expect("a URL with a database").0;
        format!("{base}/{name}")
    }

    /// The URL of the database `name` that [`Server::database`] made (the same name), as it is now.
    pub fn database_url(&self, name: &str) -> String {
        let name: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        let base = self.url.rsplit_once('/').expect("a URL with a database").0;
        format!("{base}/{name}")
    }

    /// Replaces the TLS certificate and key of a server started with [`Server::start_tls`]; new connections get them.
    pub fn set_certificate(&self, certificate: &str, key: &str) {
        let status = script().arg("certificate").arg(&self.dir).args([certificate, key]).status().unwrap();
        assert!(status.success(), "{SCRIPT} certificate");
    }

    /// The rows `sql` answers on the database `remit` (psql's unaligned output: one line a row, `|` between fields).
    pub fn query(&self, sql: &str) -> String {
        let out = Command::new("psql").args([self.url.as_str(), "-Atq", "-c", sql]).output().unwrap();
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops the server, keeping its data (the store is then unreachable).
    pub fn pause(&self) {
        let status = script().arg("pause").arg(&self.dir).status().unwrap();
        assert!(status.success(), "{SCRIPT} pause");
    }

    /// Starts it again on the same port.
    pub fn resume(&self) {
        let status = script().arg("resume").arg(&self.dir).status().unwrap();
        assert!(status.success(), "{SCRIPT} resume");
    }

    /// Stops the server's processes (SIGSTOP), its connections left open: a server that no longer answers, as
    /// behind a network that drops packets. Thawed by [`Server::thaw`], or when dropped.
    pub fn freeze(&self) {
        let status = script().arg("freeze").arg(&self.dir).status().unwrap();
        assert!(status.success(), "{SCRIPT} freeze");
    }

    /// Lets a frozen server go on.
    pub fn thaw(&self) {
        let status = script().arg("thaw").arg(&self.dir).status().unwrap();
        assert!(status.success(), "{SCRIPT} thaw");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = script().arg("stop").arg(&self.dir).status();
    }
}

/// One server for the tests of a process that do not stop it (each test takes a database of its own).
pub fn shared() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(Server::start)
}
