//! `remit serve` (the gateway), and the commands that talk to a running gateway (`remit approvals`, `remit admin`)
//! or read its store (`remit audit`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::Value as Json;

use remit::gateway::client;
use remit::gateway::conn::Limits;
use remit::gateway::http::{Reloader, Tokens};
use remit::gateway::https::ServerTls;
use remit::gateway::mcp_wire::Tls;
use remit::gateway::{Config, Durability, Gateway, Policy, PolicyMeta, SqliteStore, SystemClock};
use remit::runtime::Runtime;

use super::Format;

/// What `remit serve` and `remit mcp-proxy` share: who may use the inbox and the admin API, and what the log masks.
#[derive(Args, Debug)]
pub struct InboxArgs {
    /// An inbox user: `IDENTITY=TOKEN` (e.g. `user:alice=s3cret`); repeatable
    #[arg(long = "inbox-token", value_name = "IDENTITY=TOKEN")]
    inbox_tokens: Vec<String>,
    /// An admin: `NAME=TOKEN`; repeatable
    #[arg(long = "admin-token", value_name = "NAME=TOKEN")]
    admin_tokens: Vec<String>,
    /// An argument name whose value the decision log masks; repeatable
    #[arg(long)]
    pub mask: Vec<String>,
    /// How long an access request waits for an answer, in seconds
    #[arg(long, default_value_t = 86_400)]
    pub access_request_ttl: i64,
}

impl InboxArgs {
    /// The tokens, refusing an inbox token for an identity that holds a mandate (an agent must not approve).
    pub fn tokens(&self, policy: &Policy) -> Result<Tokens, String> {
        let tokens = Tokens {
            inbox: pairs(&self.inbox_tokens, "inbox token")?,
            admin: pairs(&self.admin_tokens, "admin token")?,
        };
        for identity in tokens.inbox.values() {
            if !policy.meta.held_by(identity).is_empty() {
                return Err(format!("`{identity}` holds a mandate: an agent cannot have an inbox token"));
            }
        }
        Ok(tokens)
    }
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
}

impl TlsServerArgs {
    /// What the server presents, when `--tls-cert` and `--tls-key` are given; read (and checked) at start.
    pub fn load(&self) -> Result<Option<ServerTls>, String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => ServerTls::from_files(cert, key).map(Some),
            _ => Ok(None),
        }
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

/// The scheme of the gateway's own URLs: `https` when it serves TLS.
pub fn scheme(tls: &Option<ServerTls>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The policy: a folder (or .remit files), or a .wasm built by `remit build`
    #[arg(required = true)]
    policy: Vec<PathBuf>,
    /// Where the state lives: `sqlite:PATH`
    #[arg(long, default_value = "sqlite:remit-gateway.db")]
    store: String,
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
    /// `process` (survives a crash of the gateway) or `full` (also a power loss: an fsync per decision)
    #[arg(long, default_value = "process")]
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
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// List the access requests waiting for you (and those answered)
    List {
        #[command(flatten)]
        remote: Remote,
        #[arg(long)]
        json: bool,
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
}

#[derive(Args, Debug)]
pub struct Remote {
    /// The gateway's URL (default: $REMIT_GATEWAY, else http://127.0.0.1:8181)
    #[arg(long)]
    gateway: Option<String>,
    /// Your bearer token (default: $REMIT_TOKEN)
    #[arg(long)]
    token: Option<String>,
    /// For an https gateway: trust the CA certificates of this PEM file too (besides the platform's roots)
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

impl Remote {
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
        let token = self.token.clone().or_else(|| std::env::var("REMIT_TOKEN").ok()).unwrap_or_default();
        let auth = format!("Bearer {token}");
        let headers = [("Authorization", auth.as_str()), ("Accept", "text/plain")];
        let response = client::request_trusting(&self.tls()?, "GET", &self.url(path), &headers, None)?;
        if response.status >= 400 {
            let json = response.json();
            let message = json.pointer("/error/message").and_then(Json::as_str).unwrap_or("").to_string();
            return Err(format!("the gateway answered {}: {message}", response.status));
        }
        Ok(response.text())
    }

    fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Json, String> {
        let token = self.token.clone().or_else(|| std::env::var("REMIT_TOKEN").ok()).unwrap_or_default();
        let auth = format!("Bearer {token}");
        let mut headers = vec![("Authorization", auth.as_str())];
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        let response = client::request_trusting(&self.tls()?, method, &self.url(path), &headers, body)?;
        let json = response.json();
        if response.status >= 400 {
            let message = json.pointer("/error/message").and_then(Json::as_str).unwrap_or("").to_string();
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
        out.insert(token.to_string(), identity.to_string());
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
            remit::gateway::bundle::is_bundle(&head[..read]).then_some(path.as_path())
        }
        _ => None,
    }
}

/// The public key of `--verify-key`, read from its file.
pub(super) fn verifying_key(path: Option<&Path>) -> Result<Option<remit::gateway::bundle::VerifyingKey>, String> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    remit::gateway::bundle::verifying_key(&text).map(Some).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The policy to serve: a module and its gateway metadata. With `verify_key`, only a bundle signed by that key.
pub(super) fn load_policy(
    paths: &[PathBuf],
    runtime: &Runtime,
    verify_key: Option<&remit::gateway::bundle::VerifyingKey>,
) -> Result<Option<Policy>, String> {
    if let Some(path) = bundle_path(paths) {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let bundle = remit::gateway::bundle::Bundle::read(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))?;
        if let Some(key) = verify_key {
            bundle.verify(key).map_err(|e| format!("`{}`: {e}", path.display()))?;
        }
        let meta = remit::gateway::meta::extract(&bundle.module)?
            .ok_or_else(|| format!("`{}`: the bundle's module carries no gateway metadata", path.display()))?;
        let policy = Policy::new(runtime.load(&bundle.module)?, meta)?;
        if policy.compiled.policy() != bundle.manifest.policy {
            return Err(format!("`{}`: the manifest names another policy than its module's", path.display()));
        }
        return Ok(Some(policy));
    }
    if verify_key.is_some() {
        return Err(
            "with --verify-key the gateway serves only a signed bundle (`remit build --bundle --sign KEY`)".into()
        );
    }
    let (wasm, meta, program) = match super::build::compiled_policy(paths) {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            let meta = remit::gateway::meta::extract(&bytes)?.ok_or_else(|| {
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
            let wasm = remit::wasm::link(&program).map_err(|e| format!("cannot compile the policy: {e}"))?;
            let meta = PolicyMeta::from_program(&program);
            // Kept for the inbox's explanations, which re-decide a logged request on the checked program.
            (wasm, meta, Some(Arc::new(program)))
        }
    };
    let policy = Policy::new(runtime.load(&wasm)?, meta)?;
    match program {
        Some(program) => policy.with_program(program).map(Some),
        None => Ok(Some(policy)),
    }
}

pub fn open_store(spec: &str, durability: Durability) -> Result<SqliteStore, String> {
    let path = spec.strip_prefix("sqlite:").ok_or_else(|| format!("`{spec}`: the store is written `sqlite:PATH`"))?;
    SqliteStore::open(Path::new(path), durability).map_err(|e| format!("cannot open the store `{path}`: {e}"))
}

pub fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    let tls = args.tls.load()?;
    let runtime = Runtime::new()?;
    let verify_key = verifying_key(args.verify_key.as_deref())?;
    let Some(policy) = load_policy(&args.policy, &runtime, verify_key.as_ref())? else {
        return Ok(ExitCode::from(1));
    };
    let durability = match args.durability.as_str() {
        "process" => Durability::Process,
        "full" => Durability::Full,
        other => return Err(format!("`{other}`: --durability is `process` or `full`")),
    };
    let store = open_store(&args.store, durability)?;
    let tokens = args.inbox.tokens(&policy)?;
    let policy_hash = policy.compiled.policy().to_string();
    if args.shadow || !args.shadow_mandate.is_empty() {
        eprintln!("shadow mode: denies and escalations are logged and answered allow");
    }
    let listen = args.listen.clone();
    let base_url = args.base_url.clone();
    let paths = args.policy.clone();
    let reloader: Reloader = Arc::new(move || match load_policy(&paths, &runtime, verify_key.as_ref())? {
        Some(policy) => Ok(policy),
        None => Err("the policy has errors (printed by the gateway); the current policy stays in force".into()),
    });
    let watch = args.watch.then(|| (args.policy.clone(), reloader.clone()));
    let make = move |base: String| {
        let config = Config {
            base_url: base,
            access_request_ttl: args.inbox.access_request_ttl,
            mask: args.inbox.mask.clone(),
            shadow: args.shadow,
            shadow_mandates: args.shadow_mandate.clone(),
            access_log: args.access_log,
        };
        let gateway = Arc::new(Gateway::new(policy, Arc::new(store), Arc::new(SystemClock), config));
        if let Some((paths, reloader)) = watch {
            let gateway = gateway.clone();
            std::thread::spawn(move || watch_files(&paths, &reloader, &gateway));
        }
        gateway
    };
    // The base URL is known once the port is bound (port 0), so the gateway is made then.
    let scheme = scheme(&tls);
    remit::gateway::http::run(&listen, tls, args.connections.limits(), move |address| {
        let base = base_url.unwrap_or_else(|| format!("{scheme}://{address}"));
        println!("remit gateway listening on {scheme}://{address}");
        println!("policy {policy_hash}");
        println!("inbox: {base}/inbox");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        (make(base), tokens, Some(reloader))
    })?;
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
        ApprovalsCommand::List { remote, json } => {
            let answer = remote.call("GET", "/inbox/api/requests", None)?;
            if json {
                println!("{answer}");
                return Ok(ExitCode::SUCCESS);
            }
            let requests = answer.get("requests").and_then(Json::as_array).cloned().unwrap_or_default();
            if requests.is_empty() {
                println!("no access requests");
            }
            for r in requests {
                let text = |k: &str| r.get(k).and_then(Json::as_str).unwrap_or("-").to_string();
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
                    if kinds.is_empty() { "-".into() } else { kinds.join(", ") },
                    r.get("reasons").map(|r| r.to_string()).unwrap_or_default()
                );
            }
        }
        ApprovalsCommand::Approve { id, remote } => {
            let answer = remote.call("POST", &format!("/inbox/api/requests/{id}/approve"), None)?;
            for a in answer.get("approvals").and_then(Json::as_array).into_iter().flatten() {
                let text = |k: &str| a.get(k).and_then(Json::as_str).unwrap_or("").to_string();
                let expires = a.get("expires_at").and_then(Json::as_i64).map(remit::value::format_timestamp);
                println!(
                    "approved {id}: minted approval {} of kind {} for {}, expires at {}",
                    text("id"),
                    text("kind"),
                    text("approver"),
                    expires.unwrap_or_default()
                );
            }
        }
        ApprovalsCommand::Deny { id, remote } => {
            remote.call("POST", &format!("/inbox/api/requests/{id}/deny"), None)?;
            println!("denied {id}");
        }
        ApprovalsCommand::Explain { id, remote } => {
            print!("{}", remote.text(&format!("/inbox/api/requests/{id}/explanation"))?);
        }
    }
    Ok(ExitCode::SUCCESS)
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
            let version = match version.parse::<u64>() {
                Ok(n) => serde_json::json!(n),
                Err(_) => serde_json::json!(version),
            };
            let body = serde_json::json!({"version": version}).to_string();
            remote.call("PUT", &format!("/admin/v1/facts/{name}"), Some(body.as_bytes()))?
        }
        AdminCommand::State { remote } => remote.call("GET", "/admin/v1/state", None)?,
        AdminCommand::Reload { remote } => remote.call("POST", "/admin/v1/reload", None)?,
    };
    println!("{answer}");
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Check the decision log's hash chain; exit 1 at the first changed, deleted or moved entry
    Verify {
        /// The store: `sqlite:PATH` or PATH
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

fn read_log(spec: &str) -> Result<Vec<remit::gateway::store::LogEntry>, String> {
    let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
    if !Path::new(path).is_file() {
        return Err(format!("`{path}` is not a store file"));
    }
    let store = SqliteStore::open_existing(Path::new(path)).map_err(|e| format!("cannot open `{path}`: {e}"))?;
    remit::gateway::audit::read_all(&store).map_err(|e| format!("cannot read the log of `{path}`: {e}"))
}

pub fn audit(command: AuditCommand) -> Result<ExitCode, String> {
    use remit::gateway::audit;
    match command {
        AuditCommand::Verify { store } => {
            let entries = read_log(&store)?;
            let head = entries.last().map(|e| e.hash.clone()).unwrap_or_else(|| audit::GENESIS.to_string());
            match audit::verify(entries) {
                Ok(count) => {
                    println!("{count} entries, the chain holds; head {head}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(broken) => {
                    println!("the chain is broken at entry {}: {}", broken.seq, broken.problem);
                    Ok(ExitCode::from(1))
                }
            }
        }
        AuditCommand::Why { decision, store } => {
            let entries = read_log(&store)?;
            let Some(lines) = audit::why(&entries, &decision) else {
                return Err(format!("no decision `{decision}` in the log"));
            };
            for line in lines {
                println!("{line}");
            }
            if let Err(broken) = audit::verify(entries) {
                println!("warning: the log's chain is broken at entry {}: {}", broken.seq, broken.problem);
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
            println!("{}", serde_json::to_string_pretty(&receipt).expect("JSON serializes"));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `remit replay STORE --policy NEW…`: exit 1 when a decision would widen (become an allow).
pub fn replay(store: &str, policy: &[PathBuf]) -> Result<ExitCode, String> {
    let entries = read_log(store)?;
    let runtime = Runtime::new()?;
    let Some(policy) = load_policy(policy, &runtime, None)? else { return Ok(ExitCode::from(1)) };
    let report = remit::gateway::replay::replay(&entries, &policy.compiled)?;
    for change in &report.changes {
        println!(
            "{} (log entry {}): {} calls {}: {} ({}) -> {} ({})",
            change.decision_id,
            change.seq,
            change.agent,
            change.tool,
            change.before,
            change.before_reasons.join(", "),
            change.after,
            change.after_reasons.join(", ")
        );
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
    let (secret, public) = remit::gateway::bundle::keygen()?;
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
