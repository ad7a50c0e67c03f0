//! `remit serve` (the gateway), and the commands that talk to a running gateway (`remit approvals`, `remit admin`)
//! or read its store (`remit audit`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::Value as Json;

use remit_gateway::client::blocking;
use remit_gateway::client::Tls;
use remit_gateway::conn::Limits;
use remit_gateway::http::{Reloader, Tokens};
use remit_gateway::https::ServerTls;
use remit_gateway::{Clock, Config, Durability, Gateway, Policy, PolicyMeta, SqliteStore, StartedClock, SystemClock};
use remit_host::Runtime;

use super::Format;

/// What `remit serve` and `remit mcp-proxy` share: who may use the inbox, the admin API and the decision endpoints,
/// and what the log masks. Every token can come from a file or an environment variable instead of the command line,
/// where any user of the machine can read it (`ps`).
#[derive(Args, Debug)]
pub struct InboxArgs {
    /// An inbox user: `IDENTITY=TOKEN` (e.g. `user:alice=s3cret`); repeatable. Prefer `--inbox-token-file` or
    /// $REMIT_INBOX_TOKEN: the command line is visible to every user of the machine
    #[arg(long = "inbox-token", value_name = "IDENTITY=TOKEN", env = "REMIT_INBOX_TOKEN", hide_env_values = true)]
    inbox_tokens: Vec<String>,
    /// A file of inbox users, one `IDENTITY=TOKEN` a line (blank lines and `#` comments skipped); repeatable
    #[arg(long = "inbox-token-file", value_name = "FILE")]
    inbox_token_files: Vec<PathBuf>,
    /// An admin: `NAME=TOKEN`; repeatable (or `--admin-token-file`, $REMIT_ADMIN_TOKEN)
    #[arg(long = "admin-token", value_name = "NAME=TOKEN", env = "REMIT_ADMIN_TOKEN", hide_env_values = true)]
    admin_tokens: Vec<String>,
    /// A file of admins, one `NAME=TOKEN` a line; repeatable
    #[arg(long = "admin-token-file", value_name = "FILE")]
    admin_token_files: Vec<PathBuf>,
    /// An enforcement point that may ask for decisions (AuthZEN, `/v1/decide`) with this bearer token: `NAME=TOKEN`;
    /// repeatable (or `--pep-token-file`, $REMIT_PEP_TOKEN). Once one is given, callers without one are refused
    /// (`401`) unless `--allow-anonymous-pep`
    #[arg(long = "pep-token", value_name = "NAME=TOKEN", env = "REMIT_PEP_TOKEN", hide_env_values = true)]
    pep_tokens: Vec<String>,
    /// A file of enforcement points, one `NAME=TOKEN` a line; repeatable
    #[arg(long = "pep-token-file", value_name = "FILE")]
    pep_token_files: Vec<PathBuf>,
    /// Answer decision requests from callers that show no PEP credential. The default when no `--pep-token` or
    /// `--client-ca` is given and the gateway listens on a loopback address; elsewhere it must be said
    #[arg(long)]
    allow_anonymous_pep: bool,
    /// An argument name whose value the decision log masks; repeatable
    #[arg(long)]
    pub mask: Vec<String>,
    /// How long an access request waits for an answer, in seconds
    #[arg(long, default_value_t = 86_400)]
    pub access_request_ttl: i64,
}

impl InboxArgs {
    /// The tokens, refusing an inbox token for an identity that holds a mandate (an agent must not approve), one
    /// token given twice, and anonymous decisions on an address other hosts reach unless they were allowed.
    /// `listen` is the address the decision endpoints are served on; `client_ca` whether TLS client certificates
    /// authenticate enforcement points there.
    pub fn tokens(&self, policy: &Policy, listen: &str, client_ca: bool) -> Result<Tokens, String> {
        let inbox = [self.inbox_tokens.clone(), read_token_files(&self.inbox_token_files)?].concat();
        let admin = [self.admin_tokens.clone(), read_token_files(&self.admin_token_files)?].concat();
        let pep = [self.pep_tokens.clone(), read_token_files(&self.pep_token_files)?].concat();
        let tokens = Tokens {
            inbox: pairs(&inbox, "inbox token")?,
            admin: pairs(&admin, "admin token")?,
            pep: pairs(&pep, "pep token")?,
            anonymous_pep: true,
            trusted_pep: Default::default(),
        };
        for identity in tokens.inbox.values() {
            if !policy.meta.held_by(identity).is_empty() {
                return Err(format!("`{identity}` holds a mandate: an agent cannot have an inbox token"));
            }
        }
        tokens.check_distinct([])?;
        let authenticated = !tokens.pep.is_empty() || client_ca;
        let anonymous_pep = if self.allow_anonymous_pep {
            true
        } else if authenticated {
            false
        } else if is_loopback(listen) {
            true
        } else {
            return Err(format!(
                "`{listen}` is reached from other hosts: say who may ask for decisions with --pep-token NAME=TOKEN \
                 (or --pep-token-file, $REMIT_PEP_TOKEN, or --client-ca with --tls-cert), or answer anyone with \
                 --allow-anonymous-pep"
            ));
        };
        Ok(Tokens { anonymous_pep, ..tokens })
    }
}

/// Whether `listen` (`HOST:PORT`) is a loopback address, which only the gateway's own host reaches.
fn is_loopback(listen: &str) -> bool {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(address) => address.ip().is_loopback(),
        Err(_) => listen.rsplit_once(':').is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost")),
    }
}

/// The `NAME=TOKEN` lines of token files (blank lines and lines starting with `#` skipped, spaces around a line
/// trimmed), so that secrets stay out of the command line.
pub(super) fn read_token_files(files: &[PathBuf]) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        for line in text.lines().map(str::trim) {
            if !line.is_empty() && !line.starts_with('#') {
                lines.push(line.to_string());
            }
        }
    }
    Ok(lines)
}

/// The gateway's server over TLS (`remit serve`, `remit mcp-proxy`).
#[derive(Args, Debug)]
pub struct TlsServerArgs {
    /// Serve over TLS (https) with the certificate chain of this PEM file (the server's certificate first)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM: PKCS#8, PKCS#1 or SEC1)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With `--tls-cert`: enforcement points that present a client certificate issued by a CA of this PEM file may
    /// ask for decisions (mutual TLS); clients without one still connect (the inbox, PEP tokens)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    client_ca: Option<PathBuf>,
}

impl TlsServerArgs {
    /// What the server presents, when `--tls-cert` and `--tls-key` are given; read (and checked) at start.
    pub fn load(&self) -> Result<Option<ServerTls>, String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                ServerTls::from_files_with_clients(cert, key, self.client_ca.as_deref()).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Whether client certificates authenticate enforcement points (`--client-ca`).
    pub fn client_ca(&self) -> bool {
        self.client_ca.is_some()
    }
}

/// The connections of the gateway's HTTP server (`remit serve`; `remit mcp-proxy` with `--listen` or `--inbox`):
/// docs/gateway.md, "Connections".
#[derive(Args, Debug)]
pub struct ConnectionArgs {
    /// How long a client may take to send a request's head, from its first byte (`10s`, `500ms`, `1m`); then the
    /// connection is closed
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    header_timeout: std::time::Duration,
    /// How long a connection may stay open with no request in progress (an open event stream is one in progress)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    idle_timeout: std::time::Duration,
    /// The most connections open at once; past it new ones wait to be accepted until one closes
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
}

impl ConnectionArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections as usize,
        }
    }
}

/// A duration: a number and its unit, `ms`, `s`, `m` or `h` (`10s`, `1.5s`, `500ms`); a number alone is seconds.
fn duration(text: &str) -> Result<std::time::Duration, String> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("`{text}` is not a duration: write a number and `ms`, `s`, `m` or `h`, e.g. `10s`")),
    };
    let seconds = number.parse::<f64>().ok().filter(|n| n.is_finite()).map(|n| n * scale);
    match seconds {
        Some(seconds) if seconds > 0.0 && seconds <= 1e9 => Ok(std::time::Duration::from_secs_f64(seconds)),
        Some(_) => Err(format!("`{text}`: a duration must be more than 0 and at most 1e9 seconds")),
        None => Err(format!("`{text}` is not a duration: write a number and `ms`, `s`, `m` or `h`, e.g. `10s`")),
    }
}

/// A duration that may be nothing (`0s`), else as [`duration`].
fn delay(text: &str) -> Result<std::time::Duration, String> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.parse::<f64>() == Ok(0.0) && matches!(unit, "" | "ms" | "s" | "m" | "h") {
        return Ok(std::time::Duration::ZERO);
    }
    duration(text)
}

/// The scheme of the gateway's own URLs: `https` when it serves TLS.
pub fn scheme(tls: &Option<ServerTls>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// The gateway's clock, and how far ahead it warns of mandates that expire (`remit serve`, `remit mcp-proxy`).
#[derive(Args, Debug, Clone)]
pub struct ClockArgs {
    /// Run the gateway's clock from this instant (RFC 3339, e.g. `2026-12-03T15:30:00Z`), advancing in real time,
    /// instead of the system clock: for demos and tests that must decide the same on any date. Not for production
    #[arg(long, value_name = "INSTANT")]
    pub(crate) clock: Option<String>,
    /// Warn at start and reload of every mandate expired or expiring within this long (`30d`, `12h`, `0s`)
    #[arg(long, value_name = "DURATION", default_value = "30d")]
    expiry_horizon: String,
}

impl ClockArgs {
    /// The clock and the horizon in seconds; says on stderr when the clock is not the system's.
    pub fn load(&self) -> Result<(Arc<dyn Clock>, u64), String> {
        let horizon = remit_lang::value::parse_duration(&self.expiry_horizon).ok_or_else(|| {
            format!("`{}`: --expiry-horizon is a duration such as `30d`, `12h` or `0s`", self.expiry_horizon)
        })?;
        let clock: Arc<dyn Clock> = match &self.clock {
            Some(text) => {
                let start = remit_lang::value::parse_timestamp(text)
                    .ok_or_else(|| format!("`{text}`: --clock is an instant such as `2026-12-03T15:30:00Z`"))?;
                eprintln!("clock: starts at {text} (--clock) and advances in real time; not the system clock");
                Arc::new(StartedClock::new(start))
            }
            None => Arc::new(SystemClock),
        };
        Ok((clock, horizon))
    }
}

/// Says on stderr which mandates of `policy` have expired on the gateway's clock, or expire within `horizon`
/// seconds (as `remit check` warns, `remit::mandate-expiring`): at start and at every reload.
pub fn warn_expiring(policy: &Policy, clock: &dyn Clock, horizon: u64) {
    let now = clock.now();
    for (mandate, until) in policy.meta.expiring(now, horizon) {
        let at = remit_lang::value::format_timestamp(until);
        let when = if until <= now {
            format!("expired on {at}, {} ago", remit_lang::value::duration_in_words(now.abs_diff(until)))
        } else {
            format!("expires on {at}, in {}", remit_lang::value::duration_in_words(until.abs_diff(now)))
        };
        eprintln!(
            "warning[remit::mandate-expiring]: mandate `{mandate}` {when}; its calls are then denied `mandate.expired`"
        );
    }
}

/// Where the state lives (`remit serve`, `remit mcp-proxy`): one definition of the flags, one way to open it
/// ([`StoreArgs::open`]).
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// Where the state lives: `sqlite:PATH` (one gateway), or `postgres://USER@HOST:PORT/DATABASE[?sslmode=…]` (a
    /// database that several gateways share: docs/scaling.md); a primary and its standbys as
    /// `postgres://USER@H1:P1,H2:P2/DATABASE`, connecting to the one that accepts writes
    #[arg(long, default_value = "sqlite:remit-gateway.db")]
    store: String,
    /// A file holding the PostgreSQL store's password (its first line), when the URL has none
    #[arg(long, value_name = "PATH")]
    store_password_file: Option<PathBuf>,
    /// The PostgreSQL store's password, when the URL has none and no `--store-password-file` is given (an
    /// environment variable only: a command line is visible to every user of the machine)
    #[arg(long = "store-password-env", hide = true, env = "REMIT_STORE_PASSWORD", hide_env_values = true)]
    store_password: Option<String>,
    /// The most connections to the PostgreSQL store
    #[arg(long, default_value_t = 16)]
    store_connections: usize,
    /// How long this process waits for any answer of the PostgreSQL server before it gives up on that batch
    /// (denied `gateway.store-unavailable`): a frozen or unreachable server never hangs a decision for longer
    #[arg(long, value_name = "DURATION", default_value = "35s", value_parser = duration)]
    store_answer_timeout: std::time::Duration,
    /// The roots the PostgreSQL server's certificate must lead to, a PEM file (or `system`), as the URL's
    /// `sslrootcert` (with `sslmode=verify-ca` or `verify-full`; `require` with it is `verify-ca`, as libpq)
    #[arg(long, value_name = "FILE", env = "REMIT_STORE_SSL_ROOT_CERT")]
    store_ssl_root_cert: Option<String>,
    /// A client certificate to present to the PostgreSQL server, its chain in a PEM file, as the URL's `sslcert`
    /// (with `--store-ssl-key`, over TLS)
    #[arg(long, value_name = "FILE", env = "REMIT_STORE_SSL_CERT")]
    store_ssl_cert: Option<String>,
    /// The client certificate's private key, an unencrypted PEM file readable by its owner only (0600), as the
    /// URL's `sslkey`
    #[arg(long, value_name = "FILE", env = "REMIT_STORE_SSL_KEY")]
    store_ssl_key: Option<String>,
    /// Certificate revocation lists (PEM) the PostgreSQL server's certificate chain is checked against, as the
    /// URL's `sslcrl` (with `sslmode=verify-ca` or `verify-full`)
    #[arg(long, value_name = "FILE", env = "REMIT_STORE_SSL_CRL")]
    store_ssl_crl: Option<String>,
}

impl StoreArgs {
    /// The store, opened: SQLite with `durability`, or PostgreSQL as a writer named after this process, its chain
    /// sealed every second.
    /// `command` names the process in the writers table (`remit serve`, `remit mcp-proxy`).
    pub fn open(
        &self,
        command: &str,
        durability: Durability,
        gateway_clock: bool,
    ) -> Result<Arc<dyn remit_gateway::Store>, String> {
        if !is_postgres(&self.store) {
            self.no_tls_files()?;
            return Ok(Arc::new(open_store(&self.store, durability)?));
        }
        let writer = format!("{command} {}", std::process::id());
        let store = self.connect_postgres(self.store_connections, gateway_clock, &writer)?;
        let store: Arc<dyn remit_gateway::Store> = Arc::new(store);
        // This replica's chain, sealed with the others' heads every second while it writes (docs/scaling.md).
        remit_gateway::audit::seal_every(&store, std::time::Duration::from_secs(1));
        Ok(store)
    }

    /// The store, opened by a command that writes once and exits (`remit bundle publish`): on PostgreSQL a writer
    /// of its own named `name` (its chain sealed by the replicas' seals), without the seals of a gateway.
    pub fn open_once(&self, name: &str) -> Result<Arc<dyn remit_gateway::Store>, String> {
        if !is_postgres(&self.store) {
            self.no_tls_files()?;
            return Ok(Arc::new(open_store(&self.store, Durability::Process)?));
        }
        Ok(Arc::new(self.connect_postgres(2, false, name)?))
    }

    /// A SQLite store with TLS files or a password file given: refused, rather than ignored (an operator who gives
    /// them believes the gateway talks to a PostgreSQL server, over TLS, with that password).
    fn no_tls_files(&self) -> Result<(), String> {
        let tls: Vec<String> = [
            (&self.store_ssl_root_cert, "--store-ssl-root-cert"),
            (&self.store_ssl_cert, "--store-ssl-cert"),
            (&self.store_ssl_key, "--store-ssl-key"),
            (&self.store_ssl_crl, "--store-ssl-crl"),
        ]
        .into_iter()
        .filter(|(value, _)| value.is_some())
        .map(|(_, flag)| format!("`{flag}`"))
        .collect();
        if !tls.is_empty() {
            return Err(format!(
                "TLS files ({}: flags, `REMIT_STORE_SSL_…` variables or configuration keys) are for a PostgreSQL \
                 store; the store `{}` is SQLite, which would ignore them: give a `postgres://` store, or leave them \
                 out",
                tls.join(", "),
                self.store
            ));
        }
        if let Some(file) = &self.store_password_file {
            return Err(format!(
                "`--store-password-file {}` (a flag, `REMIT_STORE_PASSWORD_FILE` or a configuration key) is for a \
                 PostgreSQL store; the store `{}` is SQLite, which would ignore it: give a `postgres://` store, or \
                 leave it out",
                file.display(),
                self.store
            ));
        }
        Ok(())
    }

    /// The TLS files of the flags (or their variables, or the configuration's keys).
    fn tls_files(&self) -> remit_gateway::postgres_tls::TlsFiles {
        remit_gateway::postgres_tls::TlsFiles {
            root_cert: self.store_ssl_root_cert.clone(),
            cert: self.store_ssl_cert.clone(),
            key: self.store_ssl_key.clone(),
            crl: self.store_ssl_crl.clone(),
        }
    }

    /// The PostgreSQL store with at most `connections` connections, as the writer `writer`; the database's clock
    /// unless `gateway_clock`.
    fn connect_postgres(
        &self,
        connections: usize,
        gateway_clock: bool,
        writer: &str,
    ) -> Result<remit_gateway::PostgresStore, String> {
        let password = store_password(self.store_password_file.as_deref(), self.store_password.as_deref())?;
        let options = remit_gateway::PostgresOptions {
            pool_size: connections,
            database_clock: !gateway_clock,
            writer: writer.to_string(),
            answer_timeout: self.store_answer_timeout,
            tls: self.tls_files(),
        };
        remit_gateway::PostgresStore::connect(&self.store, password.as_deref(), &options)
            .map_err(|e| format!("cannot open the store `{}`: {e}", remit_gateway::postgres::redact(&self.store)))
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The policy: a folder (or .remit files), or a .wasm built by `remit build`; none with `--bundle-from-store`
    policy: Vec<PathBuf>,
    /// Read settings from this TOML file: each flag without its dashes is a key (`listen = "0.0.0.0:8181"`), a
    /// relative path is relative to the file's folder; a variable `REMIT_KEY` (`REMIT_LISTEN`) overrides the file, and
    /// the command line both (docs/gateway.md "Configuration")
    #[arg(long, value_name = "FILE", env = "REMIT_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    /// Address to listen on (port 0 picks a free port)
    #[arg(long, default_value = "127.0.0.1:8181")]
    listen: String,
    /// The URL clients reach the gateway at, for access request links (default: http://LISTEN, or https://LISTEN with
    /// `--tls-cert`)
    #[arg(long)]
    base_url: Option<String>,
    #[command(flatten)]
    inbox: InboxArgs,
    #[command(flatten)]
    tls: TlsServerArgs,
    #[command(flatten)]
    connections: ConnectionArgs,
    /// On SIGTERM (or Ctrl-C), how long `/ready` answers 503 while the gateway still serves, before it closes its
    /// listener: the time a load balancer takes to stop sending to it (`5s` behind one; `0s`: close at once)
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = delay)]
    drain_delay: std::time::Duration,
    /// Then, how long the requests in flight may take to finish before the gateway exits anyway
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    drain_timeout: std::time::Duration,
    /// `process` (survives a crash of the gateway) or `full` (also a power loss: an fsync per decision)
    #[arg(long, default_value = "process", value_parser = ["process", "full"])]
    durability: String,
    /// Serve only a bundle signed by this public key (`remit keygen`); refuse unsigned or changed ones, also on
    /// reload
    #[arg(long, value_name = "PUB")]
    verify_key: Option<PathBuf>,
    /// Shadow mode: log the decision the policy makes, answer allow (try a policy before enforcing it)
    #[arg(long)]
    shadow: bool,
    /// Shadow mode only for calls under this mandate (or a sub-mandate of it); repeatable
    #[arg(long, value_name = "MANDATE")]
    shadow_mandate: Vec<String>,
    /// Print one JSON line per decision on stderr (id, outcome, reasons, policy, log entry, latency)
    #[arg(long)]
    access_log: bool,
    /// Reload the policy when its files change (also: `POST /admin/v1/reload`, `remit admin reload`)
    #[arg(long)]
    watch: bool,
    /// Serve the signed bundle published in the store (`remit bundle publish`) in place of policy files, and take
    /// each one published after it (the store polled every half second); needs `--verify-key`
    #[arg(long, conflicts_with = "watch", requires = "verify_key")]
    bundle_from_store: bool,
    /// What AuthZEN answers carry: `full` (remit's decision as `context`) or `minimal` (`{"decision": bool}` alone, as
    /// the AuthZEN interop suites compare them); a request's `options.decision_context` chooses for itself
    #[arg(long, value_name = "full|minimal", default_value = "full", value_parser = ["full", "minimal"])]
    authzen_context: String,
    /// Grant instances of templates that `remit check` did not prove to narrow their parents
    /// (`remit::template-narrowing-unproved`); without it, `POST /v1/grants` on such a template answers `501`
    #[arg(long)]
    grant_unproved: bool,
    /// Trust the enforcement point of this `--pep-token` name with AuthZEN `properties`: its values of attributes
    /// and relations the policy reads `from properties` are decided on (everyone else's are removed); repeatable
    #[arg(long, value_name = "NAME")]
    trusted_pep: Vec<String>,
    /// What the policy reads about the world and from where (a JSON world spec, docs/gateway.md "Data sets"),
    /// instead of what the policy's own metadata says
    #[arg(long, value_name = "FILE")]
    world: Option<PathBuf>,
    #[command(flatten)]
    clock: ClockArgs,
    #[command(flatten)]
    rollback: RollbackArgs,
    #[command(flatten)]
    log_key: LogKeyArgs,
}

/// What `remit serve` and `remit mcp-proxy` share about the log's signed heads.
#[derive(Args, Debug)]
pub struct LogKeyArgs {
    /// Sign the decision log's head with this secret key (`remit keygen`), at intervals and on shutdown (`remit
    /// audit head`, `remit audit verify --head`)
    #[arg(long, value_name = "KEY")]
    log_key: Option<PathBuf>,
    /// With `--log-key`: how often the log's head is signed (when it moved): `60s`, `5m`, `1h`
    #[arg(long, value_name = "DURATION", default_value = "60s", requires = "log_key")]
    head_interval: String,
}

/// A log key and how often it signs.
pub type LogKey = Option<(remit_gateway::bundle::SigningKey, std::time::Duration)>;

impl LogKeyArgs {
    /// The key and the interval, read and checked at start.
    pub fn load(&self) -> Result<LogKey, String> {
        let Some(path) = &self.log_key else { return Ok(None) };
        let interval = duration(&self.head_interval).map_err(|e| format!("`--head-interval`: {e}"))?;
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let key = remit_gateway::bundle::signing_key(&text).map_err(|e| format!("`{}`: {e}", path.display()))?;
        Ok(Some((key, interval)))
    }
}

/// The signer of `store`'s log heads with `key` (from [`LogKeyArgs::load`]), signing at its interval from now on.
pub fn head_signer(
    key: LogKey,
    store: Arc<dyn remit_gateway::Store>,
    clock: Arc<dyn Clock>,
) -> Option<Arc<remit_gateway::audit::HeadSigner>> {
    let (key, interval) = key?;
    let signer = Arc::new(remit_gateway::audit::HeadSigner::new(key, store, clock));
    signer.clone().every(interval);
    Some(signer)
}

/// Signs the log's head once more as the process stops (its last decisions committed).
pub fn sign_at_exit(signer: Option<Arc<remit_gateway::audit::HeadSigner>>) -> Result<(), String> {
    match signer {
        Some(signer) => signer.sign().map(|_| ()).map_err(|e| format!("the log's head was not signed at exit: {e}")),
        None => Ok(()),
    }
}

/// What `remit serve` and `remit mcp-proxy` share about bundle revisions.
#[derive(Args, Debug)]
pub struct RollbackArgs {
    /// Serve a bundle older than the revision the store has in force (or another policy under that revision): a
    /// deliberate rollback, logged. Only at start: a reload never rolls back
    #[arg(long)]
    pub allow_rollback: bool,
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// List the access requests waiting for you (and those answered), newest first, with their calls' arguments
    List {
        #[command(flatten)]
        remote: Remote,
        #[arg(long)]
        json: bool,
        /// At most this many (default 100, at most 1000)
        #[arg(long)]
        limit: Option<usize>,
        /// Start after the last request of a page before (the `next` it printed)
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Approve an access request: mints the approvals its call needs
    Approve {
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Deny an access request
    Deny {
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Explain why an access request waits: its decision drawn as the path it took (needs a gateway that serves
    /// the policy's sources)
    Explain {
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
}

#[derive(Subcommand, Debug)]
pub enum GrantsCommand {
    /// Grant an instance of a template: `remit grants grant TEMPLATE --principal P --holder H --param NAME=JSON…`;
    /// of a template under a template: `--parent ID` (the instance it is sub-delegated from, whose principal it
    /// acts for) instead of `--principal`
    Grant {
        template: String,
        #[arg(long, required_unless_present = "parent")]
        principal: Option<String>,
        #[arg(long)]
        holder: String,
        /// The instance this one is sub-delegated from (`ID` or `TEMPLATE/ID`)
        #[arg(long)]
        parent: Option<String>,
        /// A parameter's value, in the JSON tool arguments use (`cap='"100 USD"'`, `merchants='["acme"]'`); a value
        /// that is not JSON is taken as a string (`cap=100 USD`); repeatable
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the current versions of the instances you may see (revoked ones marked)
    List {
        #[arg(long)]
        principal: Option<String>,
        #[arg(long)]
        holder: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Show every version of an instance
    Show {
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Change an instance's parameters: a new version (give every parameter)
    Change {
        id: String,
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Revoke an instance: no decision that starts after this returns is made under it
    Revoke {
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
}

/// `NAME=VALUE` pairs as a JSON object: each value JSON when it parses as JSON, else a string.
fn grant_params(pairs: &[String]) -> Result<Json, String> {
    let mut params = serde_json::Map::new();
    for pair in pairs {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!("`--param {pair}`: write `NAME=VALUE`"));
        };
        let value = remit_lang::json::parse(value.as_bytes()).unwrap_or_else(|_| Json::String(value.to_string()));
        if params.insert(name.to_string(), value).is_some() {
            return Err(format!("`--param {name}` is given twice"));
        }
    }
    Ok(Json::Object(params))
}

/// `remit grants …`: over the gateway's grants API (`/v1/grants`), with an inbox (or admin) token.
pub fn grants(command: GrantsCommand) -> Result<ExitCode, String> {
    let answer = match command {
        GrantsCommand::Grant { template, principal, holder, parent, params, remote } => {
            let mut body =
                serde_json::json!({"template": template, "holder": holder, "params": grant_params(&params)?});
            if let Some(principal) = principal {
                body["principal"] = principal.into();
            }
            if let Some(parent) = parent {
                body["parent"] = parent.into();
            }
            remote.call("POST", "/v1/grants", Some(body.to_string().as_bytes()))?
        }
        GrantsCommand::List { principal, holder, remote } => {
            let mut query = Vec::new();
            if let Some(principal) = principal {
                query.push(format!("principal={}", path_segment(&principal)));
            }
            if let Some(holder) = holder {
                query.push(format!("holder={}", path_segment(&holder)));
            }
            let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
            remote.call("GET", &format!("/v1/grants{query}"), None)?
        }
        GrantsCommand::Show { id, remote } => remote.call("GET", &format!("/v1/grants/{}", path_segment(&id)), None)?,
        GrantsCommand::Change { id, params, remote } => {
            let body = serde_json::json!({"params": grant_params(&params)?}).to_string();
            remote.call("PUT", &format!("/v1/grants/{}", path_segment(&id)), Some(body.as_bytes()))?
        }
        GrantsCommand::Revoke { id, remote } => {
            remote.call("DELETE", &format!("/v1/grants/{}", path_segment(&id)), None)?
        }
    };
    println!("{}", printable(&answer.to_string(), false));
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Stop a mandate (and every mandate under it), or with `--principal` every mandate a principal gave. Without
    /// `--id`: a stop on the mandate refusing side-effecting calls. With `--id ID --level LEVEL`: a stop with an id;
    /// `pause`, `cancel` and `revoke` refuse side-effecting calls, `quarantine` every call (docs/gateway.md)
    Stop {
        #[arg(required_unless_present = "principal")]
        mandate: Option<String>,
        /// Stop every mandate of this principal (needs `--id` and `--level`)
        #[arg(long, conflicts_with = "mandate", requires = "id")]
        principal: Option<String>,
        /// The stop's id (`STOP-WEB-014`); the decision names it
        #[arg(long, requires = "level")]
        id: Option<String>,
        /// `pause`, `cancel`, `revoke` or `quarantine`
        #[arg(long, requires = "id")]
        level: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Clear a mandate's stop, or with `--id` the stop with that id
    Unstop {
        #[arg(required_unless_present = "id", conflicts_with = "id")]
        mandate: Option<String>,
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Publish the current version of a canonical fact (digits alone: a whole number; anything else: a string)
    Fact {
        name: String,
        version: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Load the gateway's policy again from its files and swap it in
    Reload {
        #[command(flatten)]
        remote: Remote,
    },
    /// Print the active stops and fact versions
    State {
        #[command(flatten)]
        remote: Remote,
    },
    /// Change and read the gateway's data sets: entities' attributes, relation tuples, calendars' holidays
    /// (docs/gateway.md "Data sets")
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Keep an entity's attributes, a JSON object (`'{"owner": "alice"}'`), replacing what the admin kept for it
    PutEntity {
        #[arg(value_name = "TYPE")]
        kind: String,
        id: String,
        attributes: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Remove the admin's entity
    DeleteEntity {
        #[arg(value_name = "TYPE")]
        kind: String,
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Print an entity's attributes (the admin's over the bundle's)
    Entity {
        #[arg(value_name = "TYPE")]
        kind: String,
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Add the tuple RELATION(A, B)
    AddTuple {
        relation: String,
        a: String,
        b: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Remove the admin's tuple RELATION(A, B)
    RemoveTuple {
        relation: String,
        a: String,
        b: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Print every B with RELATION(A, B); with B, whether RELATION(A, B) holds
    Tuples {
        relation: String,
        a: String,
        b: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Add a holiday (`YYYY-MM-DD`) to a calendar
    AddHoliday {
        calendar: String,
        date: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Remove a holiday the admin added
    RemoveHoliday {
        calendar: String,
        date: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Print a calendar's holidays
    Holidays {
        calendar: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Load a data file (JSON or CSV) in one transaction: all of it, or nothing and the first bad record's line
    Load {
        file: PathBuf,
        /// `json` or `csv` (default: from the file's extension, `.csv` or else JSON)
        #[arg(long)]
        format: Option<String>,
        /// Replace the admin's data with the file's (else the file's records are added)
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

#[derive(Args, Debug)]
pub struct Remote {
    /// The gateway's URL (default: $REMIT_GATEWAY, else http://127.0.0.1:8181)
    #[arg(long)]
    gateway: Option<String>,
    /// Your bearer token (default: $REMIT_TOKEN; or `--token-file`, which keeps it out of the command line)
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// A file holding your bearer token (its first line)
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// For an https gateway: trust the CA certificates of this PEM file too (besides the platform's roots)
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

impl Remote {
    /// The bearer token: `--token`, the first line of `--token-file`, else $REMIT_TOKEN.
    fn bearer(&self) -> Result<String, String> {
        if let Some(file) = &self.token_file {
            let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
            return Ok(text.lines().next().unwrap_or_default().trim().to_string());
        }
        Ok(self.token.clone().or_else(|| std::env::var("REMIT_TOKEN").ok()).unwrap_or_default())
    }

    /// Whom an https gateway is trusted on: the platform's roots, and `--tls-ca`'s.
    fn tls(&self) -> Result<Tls, String> {
        match &self.tls_ca {
            Some(path) => Tls::with_ca_file(path),
            None => Ok(Tls::platform()),
        }
    }

    fn url(&self, path: &str) -> String {
        let base = self
            .gateway
            .clone()
            .or_else(|| std::env::var("REMIT_GATEWAY").ok())
            .unwrap_or_else(|| "http://127.0.0.1:8181".into());
        format!("{}{path}", base.trim_end_matches('/'))
    }

    /// GETs `path` as text (`Accept: text/plain`).
    fn text(&self, path: &str) -> Result<String, String> {
        let token = self.bearer()?;
        let auth = format!("Bearer {token}");
        let headers = [("Authorization", auth.as_str()), ("Accept", "text/plain")];
        let response = blocking::request_trusting(&self.tls()?, "GET", &self.url(path), &headers, None)?;
        if response.status >= 400 {
            let json = response.json();
            let message = json.pointer("/error/message").and_then(Json::as_str).unwrap_or("").to_string();
            return Err(format!("the gateway answered {}: {message}", response.status));
        }
        Ok(response.text())
    }

    fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Json, String> {
        let token = self.bearer()?;
        let auth = format!("Bearer {token}");
        let mut headers = vec![("Authorization", auth.as_str())];
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        let response = blocking::request_trusting(&self.tls()?, method, &self.url(path), &headers, body)?;
        let json = response.json();
        if response.status >= 400 {
            let mut message = json.pointer("/error/message").and_then(Json::as_str).unwrap_or("").to_string();
            // A refused grant's witness: a request the instance would allow and its parent refuses.
            if let Some(witness) = json.pointer("/error/refusal/witness") {
                let pretty = serde_json::to_string_pretty(witness).unwrap_or_default();
                message.push_str(&format!(
                    "\nwitness: a request the instance would allow and its parent refuses (`remit eval` format):\n{pretty}"
                ));
            }
            return Err(format!("the gateway answered {}: {message}", response.status));
        }
        Ok(json)
    }
}

pub(super) fn pairs(values: &[String], what: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut out = std::collections::BTreeMap::new();
    for value in values {
        let (identity, token) =
            value.rsplit_once('=').ok_or_else(|| format!("`{value}`: a {what} is written `IDENTITY=TOKEN`"))?;
        if identity.is_empty() || token.len() < 8 {
            return Err(format!("`{identity}`: a {what} needs an identity and a token of at least 8 characters"));
        }
        // One token for two identities would make whoever holds it both (the last one given, silently).
        if let Some(first) = out.insert(token.to_string(), identity.to_string()) {
            return Err(format!("`{first}` and `{identity}` are given the same {what}: give each its own"));
        }
    }
    Ok(out)
}

/// A single policy file that is a bundle.
fn bundle_path(paths: &[PathBuf]) -> Option<&Path> {
    match paths {
        [path] if path.is_file() => {
            let mut head = [0u8; 15];
            use std::io::Read;
            let read = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
            remit_gateway::bundle::is_bundle(&head[..read]).then_some(path.as_path())
        }
        _ => None,
    }
}

/// The public key of `--verify-key`, read from its file.
pub(super) fn verifying_key(path: Option<&Path>) -> Result<Option<remit_gateway::bundle::VerifyingKey>, String> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    remit_gateway::bundle::verifying_key(&text).map(Some).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The policy to serve: a module and its gateway metadata. With `verify_key`, only a bundle signed by that key.
pub(super) fn load_policy(
    paths: &[PathBuf],
    runtime: &Runtime,
    verify_key: Option<&remit_gateway::bundle::VerifyingKey>,
) -> Result<Option<Policy>, String> {
    Ok(load_bundled(paths, runtime, verify_key)?.map(|(policy, _)| policy))
}

/// [`load_policy`], with the bundle's manifest and data files when the policy is a bundle.
type Loaded = Option<(Policy, Option<(remit_gateway::bundle::Manifest, Vec<(String, Vec<u8>)>)>)>;

/// [`load_policy`] for serving: a bundle's revision is checked against the store's ([`remit_gateway::bundle::admit`];
/// `force` at start with `--allow-rollback`) before the policy is returned.
pub(super) fn load_admitted(
    paths: &[PathBuf],
    runtime: &Runtime,
    verify_key: Option<&remit_gateway::bundle::VerifyingKey>,
    store: &dyn remit_gateway::Store,
    force: bool,
    clock: &dyn Clock,
) -> Result<Option<Policy>, String> {
    let Some((policy, manifest)) = load_bundled(paths, runtime, verify_key)? else { return Ok(None) };
    if let Some((manifest, data)) = manifest {
        let now = clock.now();
        let path = paths.first().map(|p| p.display().to_string()).unwrap_or_default();
        remit_gateway::bundle::admit_with_data(store, &manifest, &data, now, force)
            .map_err(|e| format!("`{path}`: {e}"))?;
    }
    Ok(Some(policy))
}

fn load_bundled(
    paths: &[PathBuf],
    runtime: &Runtime,
    verify_key: Option<&remit_gateway::bundle::VerifyingKey>,
) -> Result<Loaded, String> {
    if let Some(path) = bundle_path(paths) {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let (policy, bundle) =
            bundle_policy(&bytes, runtime, verify_key).map_err(|e| format!("`{}`: {e}", path.display()))?;
        return Ok(Some((policy, Some((bundle.manifest, bundle.data)))));
    }
    if verify_key.is_some() {
        return Err(
            "with --verify-key the gateway serves only a signed bundle (`remit build --bundle --sign KEY`)".into()
        );
    }
    let (wasm, meta, program) = match super::build::compiled_policy(paths) {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            let meta = remit_lang::wasm::meta::extract(&bytes)?.ok_or_else(|| {
                format!(
                    "`{}` carries no gateway metadata: build it with `remit build`, or serve the sources",
                    path.display()
                )
            })?;
            (bytes, meta, None)
        }
        None => {
            let (program, _, _) = super::compile(paths, Format::Human)?;
            let Some(program) = program else { return Ok(None) };
            let wasm = remit_lang::wasm::link(&program).map_err(|e| format!("cannot compile the policy: {e}"))?;
            let meta = PolicyMeta::from_program(&program);
            // Kept for the inbox's explanations, which re-decide a logged request on the checked program.
            (wasm, meta, Some(Arc::new(program)))
        }
    };
    let policy = Policy::new(runtime.load(&wasm)?, meta)?;
    match program {
        Some(program) => policy.with_program(program).map(|p| Some((p, None))),
        None => Ok(Some((policy, None))),
    }
}

/// The policy of a bundle's bytes: read, its signature verified with `verify_key` when given, its module loaded.
fn bundle_policy(
    bytes: &[u8],
    runtime: &Runtime,
    verify_key: Option<&remit_gateway::bundle::VerifyingKey>,
) -> Result<(Policy, remit_gateway::bundle::Bundle), String> {
    let bundle = remit_gateway::bundle::Bundle::read(bytes)?;
    if let Some(key) = verify_key {
        bundle.verify(key)?;
    }
    let meta =
        remit_lang::wasm::meta::extract(&bundle.module)?.ok_or("the bundle's module carries no gateway metadata")?;
    let mut policy = Policy::new(runtime.load(&bundle.module)?, meta)?;
    // A bundle written before revisions were numbers counts as revision 0 (as `bundle::admit` counts it).
    policy.revision = Some(bundle.manifest.revision.unwrap_or(0));
    if policy.compiled.policy() != bundle.manifest.policy {
        return Err("the manifest names another policy than its module's".into());
    }
    Ok((policy, bundle))
}

/// `--bundle-from-store`: the policy of the bundle published in the store with the highest id below `below` (all
/// when `None`), verified with `key` exactly as a bundle file is and its revision admitted against the store's
/// ([`remit_gateway::bundle::admit_or_fail`]; `force` at start with `--allow-rollback`). What this gateway made of
/// it is logged in its own chain ([`remit_gateway::bundle::log_published`]) and said on stderr.
fn take_published(
    store: &dyn remit_gateway::Store,
    below: Option<u64>,
    runtime: &Runtime,
    key: &remit_gateway::bundle::VerifyingKey,
    force: bool,
    clock: &dyn Clock,
) -> Taken {
    let read = store.begin_read().and_then(|mut tx| tx.published_bundle(below));
    let published = match read {
        Ok(Some(published)) => published,
        Ok(None) => return Taken::NonePublished,
        Err(e) => return Taken::StoreFailed(format!("cannot read the bundles published in the store: {e}")),
    };
    let id = published.id;
    use remit_gateway::bundle::Admission;
    let taken =
        bundle_policy(&published.bytes, runtime, Some(key)).map_err(Admission::Refused).and_then(|(policy, bundle)| {
            let now = clock.now();
            remit_gateway::bundle::admit_or_fail(store, &bundle.manifest, &bundle.data, now, force)?;
            Ok(policy)
        });
    let taken = match taken {
        Ok(policy) => Ok(policy),
        Err(Admission::Refused(why)) => Err(why),
        // Not refused: the store failed while the bundle was taken; the next poll tries it again.
        Err(Admission::StoreFailed(why)) => {
            return Taken::StoreFailed(format!("the published bundle {id} was not taken: {why}"))
        }
    };
    let logged = remit_gateway::bundle::log_published(
        store,
        &published,
        taken.as_ref().map(|_| ()).map_err(String::as_str),
        clock.now(),
    );
    match taken {
        Ok(policy) => {
            eprintln!(
                "serving the published bundle {id}: revision {}, policy {}",
                published.revision,
                policy.compiled.policy()
            );
            // Served without its entry (the store failed meanwhile) is said, not hidden.
            if let Err(e) = logged {
                eprintln!("{e}");
            }
            Taken::Serving(id, Box::new(policy))
        }
        Err(why) => Taken::Refused(id, format!("the published bundle {id} is refused: {why}")),
    }
}

/// What [`take_published`] made of the bundle published last (below an id).
enum Taken {
    /// Verified and admitted: the bundle `id`'s policy, to serve.
    Serving(u64, Box<Policy>),
    NonePublished,
    /// The bundle `id` is refused: taking it again would refuse it again.
    Refused(u64, String),
    /// The store failed: nothing was decided about any bundle, and the next poll tries again.
    StoreFailed(String),
}

/// At start with `--bundle-from-store`: the newest published bundle this gateway takes, trying older ones while
/// the newer are refused (a bundle with a bad signature published after the one in force leaves the replicas that
/// start later serving the one in force, as the running ones do). The id of the newest bundle looked at (what the
/// polls start after) and the policy.
pub fn take_published_at_start(
    store: &dyn remit_gateway::Store,
    runtime: &Runtime,
    key: &remit_gateway::bundle::VerifyingKey,
    force: bool,
    clock: &dyn Clock,
) -> Result<(u64, Policy), String> {
    let (mut below, mut newest) = (None, None);
    loop {
        // `--allow-rollback` forces the newest only: a bundle older than it is never rolled back to unasked.
        match take_published(store, below, runtime, key, force && below.is_none(), clock) {
            Taken::Serving(id, policy) => return Ok((newest.unwrap_or(id), *policy)),
            Taken::NonePublished if below.is_none() => {
                return Err("no bundle is published in the store: publish one with `remit bundle publish`".into())
            }
            Taken::NonePublished => {
                return Err("no bundle published in the store is taken by this gateway (above)".into())
            }
            Taken::Refused(id, why) => {
                eprintln!("{why}");
                newest.get_or_insert(id);
                below = Some(id);
            }
            Taken::StoreFailed(why) => return Err(why),
        }
    }
}

/// A reload with `--bundle-from-store` (a poll that saw a new bundle, or an admin call): the bundle published last,
/// verified and admitted, and `seen` moved on to it, whether it is taken or refused.
pub fn reload_published(
    store: &dyn remit_gateway::Store,
    runtime: &Runtime,
    key: &remit_gateway::bundle::VerifyingKey,
    seen: &AtomicU64,
    clock: &dyn Clock,
) -> Result<Policy, String> {
    match take_published(store, None, runtime, key, false, clock) {
        Taken::Serving(id, policy) => {
            seen.fetch_max(id, Ordering::SeqCst);
            Ok(*policy)
        }
        Taken::NonePublished => Err("no bundle is published in the store".into()),
        Taken::Refused(id, why) => {
            seen.fetch_max(id, Ordering::SeqCst);
            Err(format!("{why}; the current policy stays in force"))
        }
        Taken::StoreFailed(why) => Err(format!("{why}; the current policy stays in force")),
    }
}

/// `--bundle-from-store`: polls the id of the bundle published last every half second and, when a new one was
/// published, takes it (verified and admitted) or refuses it; the current policy stays when it is refused. Polled,
/// not notified: a gateway that could not reach the store catches up on its first poll after (a notification is
/// lost while disconnected). `seen`: the id of the newest bundle this gateway looked at (the reloader moves it on,
/// whether a poll or an admin call asked), so that each bundle is taken or refused once.
pub fn watch_published(store: &dyn remit_gateway::Store, seen: &AtomicU64, reloader: &Reloader, gateway: &Gateway) {
    loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let newest = store.begin_read().and_then(|mut tx| tx.published_bundle_id());
        let Ok(Some(newest)) = newest else { continue };
        if newest <= seen.load(Ordering::SeqCst) {
            continue;
        }
        match reloader() {
            Ok(policy) => gateway.swap_policy(policy),
            Err(e) => {
                gateway.counts.reload_failures.fetch_add(1, Ordering::Relaxed);
                eprintln!("not reloaded: {e}");
            }
        }
    }
}

fn is_postgres(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// The PostgreSQL store's password when the URL has none: the first line of `password_file`, else `password`
/// (`REMIT_STORE_PASSWORD`), else none.
fn store_password(password_file: Option<&Path>, password: Option<&str>) -> Result<Option<String>, String> {
    match password_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the store's password file `{}`: {e}", path.display()))?;
            Ok(Some(text.lines().next().unwrap_or("").to_string()))
        }
        None => Ok(password.map(str::to_string)),
    }
}

pub fn open_store(spec: &str, durability: Durability) -> Result<SqliteStore, String> {
    let path = spec.strip_prefix("sqlite:").ok_or_else(|| format!("`{spec}`: the store is written `sqlite:PATH`"))?;
    SqliteStore::open(Path::new(path), durability).map_err(|e| format!("cannot open the store `{path}`: {e}"))
}

pub fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    // Every flag is read before anything is opened: bad input changes nothing (no store file is made).
    let (clock, horizon) = args.clock.load()?;
    let tls = args.tls.load()?;
    let runtime = Runtime::new()?;
    let verify_key = verifying_key(args.verify_key.as_deref())?;
    let log_key = args.log_key.load()?;
    let durability = match args.durability.as_str() {
        "process" => Durability::Process,
        "full" => Durability::Full,
        other => return Err(format!("`{other}`: --durability is `process` or `full`")),
    };
    let authzen_minimal = match args.authzen_context.as_str() {
        "full" => false,
        "minimal" => true,
        other => return Err(format!("`{other}`: --authzen-context is `full` or `minimal`")),
    };
    // `--world FILE` overrides what the policy's metadata says it reads of the world.
    let world = match &args.world {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            Some(remit_gateway::core::WorldSpec::from_json(&text).map_err(|e| format!("`{}`: {e}", path.display()))?)
        }
        None => None,
    };
    let from_store = match (&verify_key, args.bundle_from_store) {
        (Some(key), true) if args.policy.is_empty() => Some(*key),
        (_, true) => {
            return Err("with --bundle-from-store the policy is the bundle published in the store: give no POLICY \
                        files, and --verify-key"
                .into())
        }
        (_, false) if args.policy.is_empty() => {
            return Err("no policy to serve: give POLICY files (or --bundle-from-store, or `policy` in --config)".into())
        }
        (_, false) => None,
    };
    let store = args.store.open("remit serve", durability, args.clock.clock.is_some())?;
    let force = args.rollback.allow_rollback;
    // The id of the newest published bundle this gateway took or refused (`--bundle-from-store`).
    let seen = Arc::new(AtomicU64::new(0));
    let policy = match &from_store {
        Some(key) => {
            let (id, policy) = take_published_at_start(&*store, &runtime, key, force, clock.as_ref())?;
            seen.store(id, Ordering::SeqCst);
            policy
        }
        None => {
            let loaded = load_admitted(&args.policy, &runtime, verify_key.as_ref(), &*store, force, clock.as_ref())?;
            let Some(policy) = loaded else { return Ok(ExitCode::from(1)) };
            policy
        }
    };
    let signer = head_signer(log_key, store.clone(), clock.clone());
    let sealed_at_exit = store.clone();
    let mut tokens = args.inbox.tokens(&policy, &args.listen, args.tls.client_ca())?;
    for name in &args.trusted_pep {
        if !tokens.pep.values().any(|pep| pep == name) {
            return Err(format!("`{name}` is not the name of a --pep-token: --trusted-pep names an enforcement point"));
        }
        tokens.trusted_pep.insert(name.clone());
    }
    warn_expiring(&policy, clock.as_ref(), horizon);
    let policy_hash = policy.compiled.policy().to_string();
    if args.shadow || !args.shadow_mandate.is_empty() {
        eprintln!("shadow mode: denies and escalations are logged and answered allow");
    }
    let listen = args.listen.clone();
    let base_url = args.base_url.clone();
    let paths = args.policy.clone();
    let reload_store = store.clone();
    let reloaded_clock = clock.clone();
    let watch_published_with = from_store.is_some().then(|| (store.clone(), seen.clone()));
    let reloader: Reloader = Arc::new(move || {
        let loaded = match &from_store {
            // The bundle published last, whichever poll or admin call asks.
            Some(key) => Some(reload_published(&*reload_store, &runtime, key, &seen, reloaded_clock.as_ref())?),
            None => {
                load_admitted(&paths, &runtime, verify_key.as_ref(), &*reload_store, false, reloaded_clock.as_ref())?
            }
        };
        match loaded {
            Some(policy) => {
                warn_expiring(&policy, reloaded_clock.as_ref(), horizon);
                Ok(policy)
            }
            None => Err("the policy has errors (printed by the gateway); the current policy stays in force".into()),
        }
    });
    let watch = args.watch.then(|| (args.policy.clone(), reloader.clone()));
    let watch_store = watch_published_with.map(|(store, seen)| (store, seen, reloader.clone()));
    let make = move |base: String| {
        let config = Config {
            base_url: base,
            access_request_ttl: args.inbox.access_request_ttl,
            mask: args.inbox.mask.clone(),
            shadow: args.shadow,
            shadow_mandates: args.shadow_mandate.clone(),
            access_log: args.access_log,
            authzen_minimal,
            grant_unproved: args.grant_unproved,
        };
        let gateway = Arc::new(Gateway::new(policy, store, clock, config));
        if let Some(world) = world {
            gateway.set_world(world);
        }
        if let Some((paths, reloader)) = watch {
            let gateway = gateway.clone();
            std::thread::spawn(move || watch_files(&paths, &reloader, &gateway));
        }
        if let Some((store, seen, reloader)) = watch_store {
            let gateway = gateway.clone();
            std::thread::spawn(move || watch_published(&*store, &seen, &reloader, &gateway));
        }
        gateway
    };
    // The base URL is known once the port is bound (port 0), so the gateway is made then.
    let scheme = scheme(&tls);
    let drain = remit_gateway::http::Drain { delay: args.drain_delay, timeout: args.drain_timeout };
    remit_gateway::http::run(&listen, tls, args.connections.limits(), drain, move |address| {
        let base = base_url.unwrap_or_else(|| format!("{scheme}://{address}"));
        println!("remit gateway listening on {scheme}://{address}");
        println!("policy {policy_hash}");
        println!("inbox: {base}/inbox");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        (make(base), tokens, Some(reloader))
    })?;
    // Stopped: the last decisions are committed; the chain is sealed and its head signed before the process ends.
    if let Err(e) = sealed_at_exit.seal() {
        eprintln!("the log's chain was not sealed at exit: {e}");
    }
    sign_at_exit(signer)?;
    Ok(ExitCode::SUCCESS)
}

/// The latest modification time among the policy's files (folders searched).
fn latest_change(paths: &[PathBuf]) -> Option<std::time::SystemTime> {
    fn walk(path: &Path, latest: &mut Option<std::time::SystemTime>) {
        if let Ok(meta) = std::fs::metadata(path) {
            if let Ok(modified) = meta.modified() {
                *latest = (*latest).max(Some(modified));
            }
            if meta.is_dir() {
                for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                    walk(&entry.path(), latest);
                }
            }
        }
    }
    let mut latest = None;
    for path in paths {
        walk(path, &mut latest);
    }
    latest
}

/// `--watch`: polls the policy's files every half second and swaps in the policy once they changed and then stayed
/// the same for one poll (so a file being written is not loaded half-way), when it loads.
pub(super) fn watch_files(paths: &[PathBuf], reloader: &Reloader, gateway: &Gateway) {
    let mut seen = latest_change(paths);
    let mut changed = false;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = latest_change(paths);
        if now != seen {
            seen = now;
            changed = true;
            continue;
        }
        if !changed {
            continue;
        }
        changed = false;
        match reloader() {
            Ok(policy) => {
                eprintln!("reloaded: policy {}", policy.compiled.policy());
                gateway.swap_policy(policy);
            }
            Err(e) => {
                gateway.counts.reload_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                eprintln!("not reloaded: {e}");
            }
        }
    }
}

pub fn approvals(command: ApprovalsCommand) -> Result<ExitCode, String> {
    match command {
        ApprovalsCommand::List { remote, json, limit, cursor } => {
            let mut query = Vec::new();
            if let Some(limit) = limit {
                query.push(format!("limit={limit}"));
            }
            if let Some(cursor) = cursor {
                query.push(format!("cursor={}", path_segment(&cursor)));
            }
            let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
            let answer = remote.call("GET", &format!("/inbox/api/requests{query}"), None)?;
            if json {
                println!("{}", printable(&answer.to_string(), false));
                return Ok(ExitCode::SUCCESS);
            }
            let requests = answer.get("requests").and_then(Json::as_array).cloned().unwrap_or_default();
            if requests.is_empty() {
                println!("no access requests");
            }
            for r in requests {
                // Every string came from an agent's call: printed with its control characters escaped.
                let text = |k: &str| printable(r.get(k).and_then(Json::as_str).unwrap_or("-"), false);
                let kinds: Vec<String> = r
                    .get("missing_approvals")
                    .and_then(Json::as_array)
                    .map(|m| {
                        m.iter().filter_map(|m| m.get("kind").and_then(Json::as_str)).map(str::to_string).collect()
                    })
                    .unwrap_or_default();
                println!(
                    "{}  {:<8}  {} calls {} on {} (digest {})  needs: {}  reasons: {}",
                    text("id"),
                    text("status"),
                    text("agent"),
                    text("tool"),
                    text("target"),
                    text("digest"),
                    printable(&if kinds.is_empty() { "-".into() } else { kinds.join(", ") }, false),
                    printable(&r.get("reasons").map(|r| r.to_string()).unwrap_or_default(), false)
                );
                // The arguments as the gateway shows them (masked ones `"***"`), cut in a list past 4,096
                // characters of JSON.
                match (r.get("arguments"), r.get("arguments_truncated").and_then(Json::as_u64)) {
                    (Some(Json::String(start)), Some(length)) => println!(
                        "    arguments: {}… ({length} characters, cut; the whole request: GET /inbox/api/requests/{})",
                        printable(start, false),
                        text("id")
                    ),
                    (Some(arguments), _) => println!("    arguments: {}", printable(&arguments.to_string(), false)),
                    (None, _) => {}
                }
                for e in r.get("earlier").and_then(Json::as_array).into_iter().flatten() {
                    let field = |k: &str| printable(e.get(k).and_then(Json::as_str).unwrap_or("?"), false);
                    let at = e.get("consumed_at").and_then(Json::as_i64).map(remit_lang::value::format_timestamp);
                    println!(
                        "    earlier: the same call was approved by {} (access request {}, approval {}) and used by \
                         decision {}{}",
                        field("approved_by"),
                        field("access_request"),
                        field("approval"),
                        field("consumed_by"),
                        at.map(|t| format!(" at {t}")).unwrap_or_default()
                    );
                }
            }
            if let Some(next) = answer.get("next_cursor").and_then(Json::as_str) {
                println!("more: remit approvals list --cursor {}", printable(next, false));
            }
        }
        ApprovalsCommand::Approve { id, remote } => {
            let answer = remote.call("POST", &format!("/inbox/api/requests/{id}/approve"), None)?;
            for a in answer.get("approvals").and_then(Json::as_array).into_iter().flatten() {
                let text = |k: &str| a.get(k).and_then(Json::as_str).unwrap_or("").to_string();
                let expires = a.get("expires_at").and_then(Json::as_i64).map(remit_lang::value::format_timestamp);
                let line = format!(
                    "approved {id}: minted approval {} of kind {} for {}, expires at {}",
                    text("id"),
                    text("kind"),
                    text("approver"),
                    expires.unwrap_or_default()
                );
                println!("{}", printable(&line, false));
            }
        }
        ApprovalsCommand::Deny { id, remote } => {
            remote.call("POST", &format!("/inbox/api/requests/{id}/deny"), None)?;
            println!("denied {id}");
        }
        ApprovalsCommand::Explain { id, remote } => {
            print!("{}", printable(&remote.text(&format!("/inbox/api/requests/{id}/explanation"))?, true));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `text` with every control character (C0, DEL, C1; the line break too unless `lines`) and every bidirectional
/// formatting character written `\u00XX` / `\uXXXX`: what every command prints of request data goes through it, so
/// that an agent's string (a `resource.id` with an ANSI escape) cannot move the cursor, recolour or rewrite what a
/// terminal shows. In JSON text the escapes are JSON's own, so the JSON stays valid.
pub(super) fn printable(text: &str, lines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi =
            matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && !(lines && c == '\n')) || bidi {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as one path segment: unreserved characters as they are, every other byte percent-encoded.
fn path_segment(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn admin(command: AdminCommand) -> Result<ExitCode, String> {
    let answer = match command {
        AdminCommand::Stop { mandate, principal, id, level, remote } => match (id, mandate) {
            (None, Some(mandate)) => remote.call("PUT", &format!("/admin/v1/stops/{mandate}"), None)?,
            (Some(id), mandate) => {
                let body = match (mandate, principal) {
                    (Some(mandate), _) => serde_json::json!({"level": level, "mandate": mandate}),
                    (None, principal) => serde_json::json!({"level": level, "principal": principal}),
                };
                let body = body.to_string();
                remote.call("PUT", &format!("/admin/v1/stop-ids/{}", path_segment(&id)), Some(body.as_bytes()))?
            }
            (None, None) => return Err("give the mandate to stop, or `--principal P --id ID --level LEVEL`".into()),
        },
        AdminCommand::Unstop { mandate, id, remote } => match (id, mandate) {
            (Some(id), _) => remote.call("DELETE", &format!("/admin/v1/stop-ids/{}", path_segment(&id)), None)?,
            (None, Some(mandate)) => remote.call("DELETE", &format!("/admin/v1/stops/{mandate}"), None)?,
            (None, None) => return Err("give the mandate, or `--id ID`".into()),
        },
        AdminCommand::Fact { name, version, remote } => {
            // Digits alone (ASCII: `+5`, `٣` and ` 5` are strings) are a number; anything else is a string.
            let digits = !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit());
            let version = match digits {
                true => serde_json::json!(version
                    .parse::<u64>()
                    .map_err(|_| format!("`{version}` is too large for a version number (at most {})", u64::MAX))?),
                false => serde_json::json!(version),
            };
            let body = serde_json::json!({"version": version}).to_string();
            remote.call("PUT", &format!("/admin/v1/facts/{name}"), Some(body.as_bytes()))?
        }
        AdminCommand::State { remote } => remote.call("GET", "/admin/v1/state", None)?,
        AdminCommand::Reload { remote } => remote.call("POST", "/admin/v1/reload", None)?,
        AdminCommand::Data { command } => data(command)?,
    };
    println!("{}", printable(&answer.to_string(), false));
    Ok(ExitCode::SUCCESS)
}

/// `remit admin data …`: the gateway's answer.
fn data(command: DataCommand) -> Result<Json, String> {
    let segments = |parts: &[&str]| parts.iter().map(|p| path_segment(p)).collect::<Vec<_>>().join("/");
    match command {
        DataCommand::PutEntity { kind, id, attributes, remote } => {
            let attributes: Json = serde_json::from_str(&attributes)
                .map_err(|e| format!("`{attributes}`: the attributes are a JSON object: {e}"))?;
            let body = serde_json::json!({"attributes": attributes}).to_string();
            remote.call("PUT", &format!("/admin/v1/data/entities/{}", segments(&[&kind, &id])), Some(body.as_bytes()))
        }
        DataCommand::DeleteEntity { kind, id, remote } => {
            remote.call("DELETE", &format!("/admin/v1/data/entities/{}", segments(&[&kind, &id])), None)
        }
        DataCommand::Entity { kind, id, remote } => {
            remote.call("GET", &format!("/admin/v1/data/entities/{}", segments(&[&kind, &id])), None)
        }
        DataCommand::AddTuple { relation, a, b, remote } => {
            remote.call("PUT", &format!("/admin/v1/data/relations/{}", segments(&[&relation, &a, &b])), None)
        }
        DataCommand::RemoveTuple { relation, a, b, remote } => {
            remote.call("DELETE", &format!("/admin/v1/data/relations/{}", segments(&[&relation, &a, &b])), None)
        }
        DataCommand::Tuples { relation, a, b, remote } => {
            let path = match &b {
                Some(b) => segments(&[&relation, &a, b]),
                None => segments(&[&relation, &a]),
            };
            remote.call("GET", &format!("/admin/v1/data/relations/{path}"), None)
        }
        DataCommand::AddHoliday { calendar, date, remote } => {
            remote.call("PUT", &format!("/admin/v1/data/holidays/{}", segments(&[&calendar, &date])), None)
        }
        DataCommand::RemoveHoliday { calendar, date, remote } => {
            remote.call("DELETE", &format!("/admin/v1/data/holidays/{}", segments(&[&calendar, &date])), None)
        }
        DataCommand::Holidays { calendar, remote } => {
            remote.call("GET", &format!("/admin/v1/data/holidays/{}", segments(&[&calendar])), None)
        }
        DataCommand::Load { file, format, replace, remote } => {
            let name = file.display().to_string();
            let format = match format {
                Some(format) => format,
                None if remit_gateway::data::Format::of_file(&name) == Some(remit_gateway::data::Format::Csv) => {
                    "csv".into()
                }
                None => "json".into(),
            };
            remit_gateway::data::Format::parse(&format)?;
            let bytes = std::fs::read(&file).map_err(|e| format!("cannot read `{name}`: {e}"))?;
            let path = format!("/admin/v1/data/load?format={format}&replace={replace}");
            remote.call("POST", &path, Some(&bytes)).map_err(|e| format!("`{name}`: {e}"))
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Check the decision log's hash chains (one per writer, each from its genesis, and the heads the writers' seals
    /// name) and the signed heads in the store; with `--head`, also that the log holds that head (kept elsewhere):
    /// exit 1 at the first changed, deleted or moved entry, cut or dropped chain, or a head that fails
    Verify {
        /// The store: `sqlite:PATH` or PATH, or `postgres://…` (its password from `REMIT_STORE_PASSWORD`)
        store: String,
        /// A signed head kept outside the store (`remit audit head`): the log must hold its entry with its hash
        #[arg(long, value_name = "HEAD.json", requires = "key")]
        head: Option<PathBuf>,
        /// The gateway's public log key (`--log-key`'s `.pub`): the kept head and the stored heads must be signed by it
        #[arg(long, value_name = "PUB")]
        key: Option<PathBuf>,
    },
    /// Print the log's latest signed head (JSON), to keep outside the store for `remit audit verify --head`
    Head {
        #[arg(long)]
        store: String,
    },
    /// Say who authorised a decision: mandate chain, rules, approvals and approvers, credential, policy
    Why {
        decision: String,
        #[arg(long)]
        store: String,
    },
    /// Print the chain receipt of an operation (JSON)
    Receipt {
        #[arg(long)]
        operation: String,
        #[arg(long)]
        store: String,
    },
}

fn read_log(spec: &str) -> Result<Vec<remit_gateway::store::LogEntry>, String> {
    let (store, path) = open_log(spec)?;
    remit_gateway::audit::read_all(store.as_ref()).map_err(|e| format!("cannot read the log of `{path}`: {e}"))
}

/// The store `spec` names, for reading: `sqlite:PATH` or PATH, or a PostgreSQL URL (the password, when the URL has
/// none, from `REMIT_STORE_PASSWORD`; TLS files the URL does not name from `REMIT_STORE_SSL_ROOT_CERT`,
/// `REMIT_STORE_SSL_CERT`, `REMIT_STORE_SSL_KEY` and `REMIT_STORE_SSL_CRL`, as `remit serve` reads them); and how
/// to name it in messages.
fn open_log(spec: &str) -> Result<(Box<dyn remit_gateway::Store>, String), String> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        let shown = remit_gateway::postgres::redact(spec);
        let password = std::env::var("REMIT_STORE_PASSWORD").ok();
        let tls = remit_gateway::postgres_tls::TlsFiles {
            root_cert: std::env::var("REMIT_STORE_SSL_ROOT_CERT").ok(),
            cert: std::env::var("REMIT_STORE_SSL_CERT").ok(),
            key: std::env::var("REMIT_STORE_SSL_KEY").ok(),
            crl: std::env::var("REMIT_STORE_SSL_CRL").ok(),
        };
        let store = remit_gateway::PostgresStore::open_existing_with(spec, password.as_deref(), &tls)
            .map_err(|e| format!("cannot open `{shown}`: {e}"))?;
        return Ok((Box::new(store), shown));
    }
    let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
    if !Path::new(path).is_file() {
        return Err(format!("`{path}` is not a store file"));
    }
    let store = SqliteStore::open_existing(Path::new(path)).map_err(|e| format!("cannot open `{path}`: {e}"))?;
    Ok((Box::new(store), path.to_string()))
}

/// The signed heads a store keeps, oldest first.
fn signed_heads(spec: &str) -> Result<Vec<remit_gateway::audit::SignedHead>, String> {
    let (store, path) = open_log(spec)?;
    let read = store.begin().and_then(|mut tx| tx.signed_heads());
    read.map_err(|e| format!("cannot read the signed heads of `{path}`: {e}"))
}

/// `remit audit verify`: the chain, then every stored head (signed by `key` when given, else by the key it names;
/// its entry in the chain), then the kept `head`. Each line says what holds; the first failure ends it.
fn verify_log(store: &str, head: Option<&Path>, key: Option<&Path>) -> Result<ExitCode, String> {
    use remit_gateway::audit::{self, SignedHead};
    let key = verifying_key(key)?;
    let kept = match head {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            Some(SignedHead::from_json(&text).map_err(|e| format!("`{}` is not a signed head: {e}", path.display()))?)
        }
        None => None,
    };
    let entries = read_log(store)?;
    let heads = signed_heads(store)?;
    let verified = match audit::verify_chains(entries.iter().cloned()) {
        Ok(verified) => verified,
        Err(broken) => {
            println!("the chain is broken at {broken}");
            return Ok(ExitCode::from(1));
        }
    };
    if verified.chains.keys().all(String::is_empty) {
        // The one-writer log (SQLite, or a PostgreSQL store before it had a chain per writer).
        let last = entries.last().map(|e| e.hash.clone()).unwrap_or_else(|| audit::GENESIS.to_string());
        println!("{} entries, the chain holds; head {last}", verified.entries);
    } else {
        println!(
            "{} entries in {} chains, each holds from its genesis; {} seals, naming {} heads, each in its chain",
            verified.entries,
            verified.chains.len(),
            verified.seals,
            verified.sealed_heads
        );
        for (writer, (seq, hash)) in &verified.chains {
            let writer = if writer.is_empty() { "'' (written before the log had several writers)" } else { writer };
            println!("  chain {writer}: {seq} entries, head {hash}");
        }
    }
    for stored in &heads {
        if let Err(e) = stored.verify(key.as_ref()).and_then(|()| audit::check_head(&entries, stored)) {
            println!(
                "the signed head of {} kept in the store fails: {e}",
                audit::entry_name(&stored.writer, stored.seq)
            );
            return Ok(ExitCode::from(1));
        }
    }
    match heads.last() {
        Some(latest) => println!(
            "signed heads kept in the store: {}, each in the log; the latest of {}, signed at {}",
            heads.len(),
            audit::entry_name(&latest.writer, latest.seq),
            remit_lang::value::format_timestamp(latest.time)
        ),
        None => println!("no signed head in the store"),
    }
    if let Some(kept) = kept {
        if let Err(e) = kept.verify(key.as_ref()).and_then(|()| audit::check_head(&entries, &kept)) {
            println!("the kept head fails: {e}");
            return Ok(ExitCode::from(1));
        }
        let chain = if kept.writer.is_empty() { String::new() } else { format!(" of writer `{}`", kept.writer) };
        println!(
            "the kept head ({}, signed at {}) is in the log: entries 1 to {}{chain} are the ones the gateway signed",
            audit::entry_name(&kept.writer, kept.seq),
            remit_lang::value::format_timestamp(kept.time),
            kept.seq
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn audit(command: AuditCommand) -> Result<ExitCode, String> {
    use remit_gateway::audit;
    match command {
        AuditCommand::Verify { store, head, key } => verify_log(&store, head.as_deref(), key.as_deref()),
        AuditCommand::Head { store } => {
            let Some(head) = signed_heads(&store)?.pop() else {
                return Err(format!("no signed head in `{store}`: start the gateway with `--log-key KEY`"));
            };
            println!("{}", head.to_json());
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Why { decision, store } => {
            let entries = read_log(&store)?;
            let Some(lines) = audit::why(&entries, &decision) else {
                return Err(format!("no decision `{decision}` in the log"));
            };
            for line in lines {
                println!("{}", printable(&line, false));
            }
            if let Err(broken) = audit::verify(entries) {
                println!("warning: the log's chain is broken at {broken}");
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Receipt { operation, store } => {
            let entries = read_log(&store)?;
            let receipt = audit::receipt(&entries, &operation);
            if receipt["decisions"].as_array().is_none_or(|d| d.is_empty()) {
                return Err(format!("no decision in the log has the operation id `{operation}`"));
            }
            println!("{}", printable(&serde_json::to_string_pretty(&receipt).expect("JSON serializes"), true));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `remit replay STORE --policy NEW…`: exit 1 when a decision would widen (become an allow).
pub fn replay(store: &str, policy: &[PathBuf]) -> Result<ExitCode, String> {
    let entries = read_log(store)?;
    let runtime = Runtime::new()?;
    let Some(policy) = load_policy(policy, &runtime, None)? else { return Ok(ExitCode::from(1)) };
    let report = remit_gateway::replay::replay(&entries, &policy.compiled)?;
    for change in &report.changes {
        let line = format!(
            "{} (log {}): {} calls {}: {} ({}) -> {} ({})",
            change.decision_id,
            remit_gateway::audit::entry_name(&change.writer, change.seq),
            change.agent,
            change.tool,
            change.before,
            change.before_reasons.join(", "),
            change.after,
            change.after_reasons.join(", ")
        );
        println!("{}", printable(&line, false));
    }
    let widened = report.changes.iter().filter(|c| c.widens()).count();
    println!(
        "{} decisions replayed under {}: {} changed ({} to allow), {} skipped (made by the gateway){}",
        report.replayed,
        policy.compiled.policy(),
        report.changes.len(),
        widened,
        report.skipped,
        if report.masked > 0 { format!(", {} with masked arguments", report.masked) } else { String::new() }
    );
    Ok(if widened > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `remit keygen -o KEY`: KEY (secret, mode 0600) and KEY.pub.
pub fn keygen(output: &Path) -> Result<ExitCode, String> {
    let (secret, public) = remit_gateway::bundle::keygen()?;
    let public_path = PathBuf::from(format!("{}.pub", output.display()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    use std::io::Write;
    options
        .open(output)
        .and_then(|mut f| f.write_all(secret.as_bytes()))
        .map_err(|e| format!("cannot write `{}`: {e}", output.display()))?;
    std::fs::write(&public_path, public).map_err(|e| format!("cannot write `{}`: {e}", public_path.display()))?;
    eprintln!("wrote {} (secret: keep it out of the repository) and {}", output.display(), public_path.display());
    Ok(ExitCode::SUCCESS)
}
