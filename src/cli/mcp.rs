//! `remit mcp-proxy`: the gateway as an MCP server on stdin/stdout in front of an upstream MCP server it starts
//! (docs/mcp.md). The protocol lives in `remit_mcp`; this module reads the flags and wires the pieces.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use remit_gateway::client::Tls;
use remit_gateway::{Config, Durability, Gateway};
use remit_host::Runtime;
use remit_mcp::decision::Identity;
use remit_mcp::outbox::Outbox;
use remit_mcp::proxy::Proxy;
use remit_mcp::upstream::{UpstreamOptions, UpstreamRevision};

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("keys").args(["jwks", "jwks_url", "jwks_from_issuer"])))]
pub struct McpProxyArgs {
    /// The policy: a folder (or .remit files), a .wasm built by `remit build`, or a bundle; none with
    /// `--bundle-from-store`
    #[arg(long, required_unless_present = "bundle_from_store", num_args = 1..)]
    policy: Vec<PathBuf>,
    /// Serve the signed bundle published in the store (`remit bundle publish`) in place of `--policy`, and take each
    /// one published after it (the store polled every half second), as `remit serve --bundle-from-store`; needs
    /// `--verify-key`
    #[arg(long, conflicts_with_all = ["policy", "watch"], requires = "verify_key")]
    bundle_from_store: bool,
    /// The subject the agent on stdin/stdout is (e.g. `agent:coder`); with `--listen`, `--agent-token` instead
    #[arg(long, required_unless_present = "listen")]
    subject: Option<String>,
    /// The id of the agent's credential
    #[arg(long)]
    credential: Option<String>,
    /// The scopes of the agent's credential, comma-separated (or the flag repeated)
    #[arg(long = "credential-scopes", value_delimiter = ',')]
    scopes: Vec<String>,
    /// The mandate the agent acts under (default: the one mandate the subject holds)
    #[arg(long)]
    mandate: Option<String>,
    #[command(flatten)]
    store: super::serve::StoreArgs,
    /// Serve the gateway's HTTP API and inbox on this loopback address (port 0 picks one; printed on stderr)
    #[arg(long, value_name = "ADDRESS", conflicts_with = "listen")]
    inbox: Option<String>,
    /// Speak MCP over Streamable HTTP at `http://ADDRESS/mcp` instead of stdio (with the inbox on the same address)
    #[arg(long, value_name = "ADDRESS")]
    listen: Option<String>,
    /// With `--listen`: an agent's bearer token, `SUBJECT=TOKEN` (the credential's scopes: `--credential-scopes`);
    /// repeatable
    #[arg(
        long = "agent-token",
        value_name = "SUBJECT=TOKEN",
        requires = "listen",
        env = "REMIT_AGENT_TOKEN",
        hide_env_values = true
    )]
    agent_tokens: Vec<String>,
    /// With `--listen`: a file of agents' bearer tokens, one `SUBJECT=TOKEN` a line (blank lines and `#` comments
    /// skipped); repeatable. Keeps the tokens out of the command line, which every user of the machine can read
    #[arg(long = "agent-token-file", value_name = "FILE", requires = "listen")]
    agent_token_files: Vec<PathBuf>,
    /// With `--listen`: accept JWT bearer tokens signed by a key of this JWKS file (RS256/384/512, PS256/384/512,
    /// ES256, ES384, EdDSA); their claims give the subject and the credential's scopes
    #[arg(long, value_name = "FILE", requires = "listen")]
    jwks: Option<PathBuf>,
    /// With `--listen`: as `--jwks`, the key set fetched from this URL (`https://`, or `http://` to a loopback host
    /// only), again every `--jwks-refresh` seconds and when a token names a key it lacks (at most once per 10 s)
    #[arg(long, value_name = "URL", requires = "listen", conflicts_with = "jwks")]
    jwks_url: Option<String>,
    /// With `--listen`: as `--jwks-url`, the URL read from the `jwks_uri` of the `--jwt-issuer`'s metadata (RFC 8414,
    /// else OpenID Connect discovery; `https://`, or `http://` to a loopback host only)
    #[arg(long, requires = "listen", conflicts_with_all = ["jwks", "jwks_url"])]
    jwks_from_issuer: bool,
    /// With `--jwks-url` or `--jwks-from-issuer`: how old the fetched key set may get before it is fetched again, in
    /// seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    jwks_refresh: u64,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): an accepted token issuer (`iss`); repeatable, at least one
    #[arg(long = "jwt-issuer", value_name = "ISSUER", requires = "keys")]
    jwt_issuers: Vec<String>,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): an accepted audience (`aud`); repeatable (default: the proxy's resource URL, http://ADDRESS/mcp)
    #[arg(long = "jwt-audience", value_name = "AUDIENCE", requires = "keys")]
    jwt_audiences: Vec<String>,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): seconds of clock skew allowed on `exp` and `nbf`
    #[arg(long, value_name = "SECONDS", default_value_t = 30, requires = "keys")]
    jwt_leeway: u64,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): the claim holding the subject id
    #[arg(long, value_name = "CLAIM", default_value = "sub", requires = "keys")]
    subject_claim: String,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): the claim holding the scopes, a space-separated string or an array (default: `scope`, else `scp`)
    #[arg(long, value_name = "CLAIM", requires = "keys")]
    scope_claim: Option<String>,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): the claim holding the credential id (default `client_id`; without it, `--credential`)
    #[arg(long, value_name = "CLAIM", default_value = "client_id", requires = "keys")]
    credential_claim: String,
    /// With a key set (`--jwks`, `--jwks-url`, `--jwks-from-issuer`): an authorization server named in the protected resource metadata; repeatable (default: the
    /// issuers)
    #[arg(long = "authorization-server", value_name = "URL", requires = "keys")]
    authorization_servers: Vec<String>,
    /// The URL the inbox is reached at, for access request links (default: http://ADDRESS of --inbox)
    #[arg(long)]
    base_url: Option<String>,
    #[command(flatten)]
    inbox_args: super::serve::InboxArgs,
    #[command(flatten)]
    clock: super::serve::ClockArgs,
    /// With `--listen` or `--inbox`: that server over TLS
    #[command(flatten)]
    serve_tls: super::serve::TlsServerArgs,
    /// With `--listen` or `--inbox`: that server's connections
    #[command(flatten)]
    connections: super::serve::ConnectionArgs,
    /// How long to wait for the upstream's answer to one request, in seconds
    #[arg(long, default_value_t = 120)]
    upstream_timeout: u64,
    /// How long to wait, in seconds, before starting a stdio upstream again that exited soon after it started;
    /// doubled on each such exit in a row, up to 30
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    upstream_restart_backoff: f64,
    /// The MCP revision spoken to the upstream servers: `auto` (the stateless 2026-07-28 when the server's
    /// `server/discover` offers it, else a 2025-06-18 session), `2026-07-28` or `2025-06-18`
    #[arg(long, value_name = "REVISION", default_value = "auto")]
    upstream_revision: String,
    /// Trust the CA certificates of this PEM file for https (key set URLs, `https://` upstreams), besides the
    /// platform's root certificates
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// Another upstream MCP server: `NAME=stdio:COMMAND ARGS…` (split at spaces) or `NAME=URL` (`http://` or
    /// `https://`); repeatable. Their tools are merged under their own names (one two servers offer is refused);
    /// resources, prompts and the rest go to the first upstream
    #[arg(long = "upstream", value_name = "NAME=SPEC")]
    upstreams: Vec<String>,
    /// Serve only a bundle signed by this public key (`remit keygen`); refuse unsigned or changed ones, also on
    /// reload (as `remit serve --verify-key`)
    #[arg(long, value_name = "PUB")]
    verify_key: Option<PathBuf>,
    #[command(flatten)]
    rollback: super::serve::RollbackArgs,
    #[command(flatten)]
    log_key: super::serve::LogKeyArgs,
    /// Reload the policy when its files change (also: `POST /admin/v1/reload` with an `--admin-token`, `remit admin
    /// reload`, where the proxy serves HTTP); the agents are told that their tool list changed
    #[arg(long)]
    watch: bool,
    /// The upstream MCP server's command and its arguments (after `--`), or its URL; the first upstream
    #[arg(last = true, value_name = "UPSTREAM")]
    upstream: Vec<String>,
}

/// The upstreams: the one after `--` (named `main`) first, then each `--upstream NAME=SPEC`.
fn upstreams(args: &McpProxyArgs) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut upstreams = Vec::new();
    if !args.upstream.is_empty() {
        upstreams.push(("main".to_string(), args.upstream.clone()));
    }
    for spec in &args.upstreams {
        let Some((name, what)) = spec.split_once('=').filter(|(n, _)| !n.is_empty()) else {
            return Err(format!(
                "`--upstream {spec}`: write `NAME=stdio:COMMAND ARGS…` or `NAME=URL` (`http://` or `https://`)"
            ));
        };
        let command: Vec<String> = if what.starts_with("http://") || what.starts_with("https://") {
            vec![what.to_string()]
        } else if let Some(line) = what.strip_prefix("stdio:") {
            line.split_whitespace().map(str::to_string).collect()
        } else {
            return Err(format!(
                "`--upstream {spec}`: the server is `stdio:COMMAND ARGS…` or an `http://` or `https://` URL"
            ));
        };
        if command.is_empty() {
            return Err(format!("`--upstream {spec}`: the command is empty"));
        }
        if upstreams.iter().any(|(n, _)| n == name) {
            return Err(format!("`--upstream {spec}`: there is already an upstream named `{name}`"));
        }
        upstreams.push((name.to_string(), command));
    }
    if upstreams.is_empty() {
        return Err("give the upstream MCP server: its command after `--`, or `--upstream NAME=stdio:COMMAND`".into());
    }
    Ok(upstreams)
}

/// What https connections trust: the platform's root certificates, and those of `--tls-ca FILE`.
fn trusted(ca: Option<&std::path::Path>) -> Result<Tls, String> {
    match ca {
        Some(path) => Tls::with_ca_file(path).map_err(|e| format!("--tls-ca: {e}")),
        None => Ok(Tls::platform()),
    }
}

fn policy_holders(gateway: &Gateway, subject: &str) -> bool {
    !gateway.policy().meta.held_by(subject).is_empty()
}

pub fn run(args: McpProxyArgs) -> Result<ExitCode, String> {
    let (clock, horizon) = args.clock.load()?;
    let revision =
        UpstreamRevision::parse(&args.upstream_revision).map_err(|e| format!("`--upstream-revision`: {e}"))?;
    let upstreams = upstreams(&args)?;
    let runtime = Runtime::new()?;
    let verify_key = super::serve::verifying_key(args.verify_key.as_deref())?;
    let log_key = args.log_key.load()?;
    let store = args.store.open("remit mcp-proxy", Durability::Process, args.clock.clock.is_some())?;
    let force = args.rollback.allow_rollback;
    // `--bundle-from-store`: the key its bundles must be signed by, and the id of the newest published bundle this
    // proxy took or refused.
    let from_store = if args.bundle_from_store { verify_key } else { None };
    let seen = Arc::new(AtomicU64::new(0));
    let policy = match &from_store {
        Some(key) => {
            let (id, policy) = super::serve::take_published_at_start(&*store, &runtime, key, force, clock.as_ref())?;
            seen.store(id, Ordering::SeqCst);
            policy
        }
        None => {
            let loaded = super::serve::load_admitted(
                &args.policy,
                &runtime,
                verify_key.as_ref(),
                &*store,
                force,
                clock.as_ref(),
            )?;
            let Some(policy) = loaded else { return Ok(ExitCode::from(1)) };
            policy
        }
    };
    let served_on = args.inbox.as_deref().or(args.listen.as_deref()).unwrap_or("127.0.0.1:0");
    let tokens = args.inbox_args.tokens(&policy, served_on, args.serve_tls.client_ca())?;
    let listener = match args.inbox.as_ref().or(args.listen.as_ref()) {
        Some(address) => {
            Some(std::net::TcpListener::bind(address).map_err(|e| format!("cannot listen on `{address}`: {e}"))?)
        }
        None => None,
    };
    let bound = listener.as_ref().map(|l| l.local_addr()).transpose().map_err(|e| e.to_string())?;
    let serve_tls = args.serve_tls.load()?;
    let scheme = super::serve::scheme(&serve_tls);
    let base_url = args
        .base_url
        .clone()
        .or_else(|| bound.map(|a| format!("{scheme}://{a}")))
        .unwrap_or_else(|| "http://127.0.0.1:8181".into());
    let config = Config {
        base_url: base_url.clone(),
        access_request_ttl: args.inbox_args.access_request_ttl,
        mask: args.inbox_args.mask.clone(),
        ..Config::default()
    };
    let policy_hash = policy.compiled.policy().to_string();
    super::serve::warn_expiring(&policy, clock.as_ref(), horizon);
    let gateway = Arc::new(Gateway::new(policy, store.clone(), clock.clone(), config));
    let signer = super::serve::head_signer(log_key, store.clone(), clock.clone());
    // Loads the policy again from where it came (`--watch`, `--bundle-from-store`'s polls, `POST
    // /admin/v1/reload`); the proxy tells the agents their tool list changed once a new one is in force
    // (`Proxy::start_many`'s writer thread).
    let paths = args.policy.clone();
    let watch_published_with = from_store.is_some().then(|| (store.clone(), seen.clone()));
    let reloader: remit_gateway::http::Reloader = Arc::new(move || {
        let loaded = match &from_store {
            Some(key) => Some(super::serve::reload_published(&*store, &runtime, key, &seen, clock.as_ref())?),
            None => super::serve::load_admitted(&paths, &runtime, verify_key.as_ref(), &*store, false, clock.as_ref())?,
        };
        match loaded {
            Some(policy) => {
                super::serve::warn_expiring(&policy, clock.as_ref(), horizon);
                Ok(policy)
            }
            None => Err("the policy has errors (printed by the proxy); the current policy stays in force".into()),
        }
    });
    if args.watch {
        let (paths, reloader, gateway) = (args.policy.clone(), reloader.clone(), gateway.clone());
        std::thread::spawn(move || super::serve::watch_files(&paths, &reloader, &gateway));
    }
    if let Some((store, seen)) = watch_published_with {
        let (reloader, gateway) = (reloader.clone(), gateway.clone());
        std::thread::spawn(move || super::serve::watch_published(&*store, &seen, &reloader, &gateway));
    }
    let backoff = Duration::try_from_secs_f64(args.upstream_restart_backoff).map_err(|_| {
        format!("`--upstream-restart-backoff {}`: not a number of seconds", args.upstream_restart_backoff)
    })?;
    let tls = trusted(args.tls_ca.as_deref())?;
    let timeout = Duration::from_secs(args.upstream_timeout.max(1));
    let options = UpstreamOptions { timeout, restart_backoff: backoff, revision, tls: tls.clone() };
    if args.listen.is_some() {
        let listener = listener.expect("bound");
        let mut agents = std::collections::BTreeMap::new();
        let agent_tokens =
            [args.agent_tokens.clone(), super::serve::read_token_files(&args.agent_token_files)?].concat();
        let agent_tokens = super::serve::pairs(&agent_tokens, "agent token")?;
        // An agent's token that is also an inbox or admin token would let the agent approve or stop.
        tokens
            .check_distinct(agent_tokens.iter().map(|(token, subject)| (token.as_str(), "agent", subject.as_str())))?;
        for (token, subject) in agent_tokens {
            if !policy_holders(&gateway, &subject) {
                eprintln!("remit mcp-proxy: warning: `{subject}` holds no mandate of the policy: its calls are denied");
            }
            let credential = args.credential.clone();
            let identity = Identity { subject, credential, scopes: args.scopes.clone(), mandate: args.mandate.clone() };
            agents.insert(token, identity);
        }
        let discovered = match (args.jwks_from_issuer, args.jwt_issuers.as_slice()) {
            (false, _) => None,
            (true, [issuer]) => Some(
                remit_mcp::auth::discover_jwks_uri(issuer, &tls, Duration::from_secs(10))
                    .map_err(|e| format!("--jwks-from-issuer: {e}"))?,
            ),
            (true, _) => {
                return Err("--jwks-from-issuer reads the metadata of one issuer: give one --jwt-issuer".into())
            }
        };
        let jwks_url = args.jwks_url.clone().or(discovered);
        let bearer = match (&args.jwks, &jwks_url) {
            (None, None) => None,
            (file, url) => {
                use remit_mcp::auth::{JwtConfig, JwtVerifier};
                if args.jwt_issuers.is_empty() {
                    return Err("with --jwks or --jwks-url, name the accepted issuers: --jwt-issuer ISSUER".into());
                }
                let resource = format!("{base_url}/mcp");
                let audiences =
                    if args.jwt_audiences.is_empty() { vec![resource.clone()] } else { args.jwt_audiences.clone() };
                let mut config = JwtConfig::new(audiences, args.jwt_issuers.clone());
                config.leeway = args.jwt_leeway;
                config.subject_claim = args.subject_claim.clone();
                config.scope_claim = args.scope_claim.clone();
                config.credential_claim = args.credential_claim.clone();
                let verifier = match (file, url) {
                    (Some(path), _) => {
                        let text = std::fs::read_to_string(path)
                            .map_err(|e| format!("cannot read the key set `{}`: {e}", path.display()))?;
                        JwtVerifier::from_jwks(&text, config)
                            .map_err(|e| format!("the key set `{}`: {e}", path.display()))?
                    }
                    (None, Some(url)) => {
                        let refresh = Duration::from_secs(args.jwks_refresh.max(1));
                        JwtVerifier::from_url(url, refresh, config, tls.clone())
                            .map_err(|e| format!("the key set {e}"))?
                    }
                    (None, None) => unreachable!("matched above"),
                };
                let authorization_servers = if args.authorization_servers.is_empty() {
                    args.jwt_issuers.clone()
                } else {
                    args.authorization_servers.clone()
                };
                Some(remit_mcp::http::Bearer {
                    verifier,
                    credential: args.credential.clone(),
                    mandate: args.mandate.clone(),
                    resource,
                    authorization_servers,
                })
            }
        };
        if agents.is_empty() && bearer.is_none() {
            return Err(
                "with --listen, give each agent a bearer token (--agent-token SUBJECT=TOKEN) or accept JWTs (--jwks, --jwks-url)"
                    .into(),
            );
        }
        let sink = Outbox::new(Box::new(std::io::sink()));
        let proxy = Proxy::start_many(gateway.clone(), Identity::default(), &upstreams, sink, options)?;
        let router = remit_gateway::http::router_with_reload(gateway, tokens, Some(reloader))
            .merge(remit_mcp::http::router(proxy.clone(), agents, bearer));
        eprintln!("remit mcp-proxy: policy {policy_hash}");
        eprintln!("remit mcp-proxy: mcp {base_url}/mcp");
        eprintln!("remit mcp-proxy: inbox {base_url}/inbox");
        let served = remit_gateway::http::run_router(listener, router, serve_tls, args.connections.limits());
        // Stopped (SIGTERM, Ctrl-C): the queued entries (outcomes, and decisions that changed nothing else) go into
        // the log before the process ends.
        proxy.flush_outcomes();
        super::serve::sign_at_exit(signer)?;
        served?;
        return Ok(ExitCode::SUCCESS);
    }
    let subject = args.subject.clone().unwrap_or_default();
    // stdout is the agent's channel: everything for people goes to stderr.
    eprintln!("remit mcp-proxy: policy {policy_hash}, subject {subject}");
    if let Some(listener) = listener {
        let router = remit_gateway::http::router_with_reload(gateway.clone(), tokens, Some(reloader));
        remit_gateway::http::serve_in_background(listener, router, serve_tls, args.connections.limits())?;
        eprintln!("remit mcp-proxy: inbox {base_url}/inbox");
    }
    let identity = Identity { subject, credential: args.credential, scopes: args.scopes, mandate: args.mandate };
    let outbox = Outbox::new(Box::new(std::io::stdout()));
    let proxy = Proxy::start_many(gateway, identity, &upstreams, outbox, options)?;
    proxy.run(std::io::stdin().lock());
    // The agent closed stdin: every entry is written (`run` flushes the queue); their head is signed.
    super::serve::sign_at_exit(signer)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ImportMcpArgs {
    /// The MCP server: `stdio:COMMAND ARGS…` (split at spaces; for arguments with spaces give the command after
    /// `--`), or the URL of a Streamable HTTP server
    #[arg(long)]
    upstream: Option<String>,
    /// The catalog to write. When it exists, it is compared with the server (new, removed and changed tools) and
    /// left as it is unless `--overwrite`
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing catalog
    #[arg(long)]
    overwrite: bool,
    /// How long to wait for the server, in seconds
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// With an `https://` server: trust the CA certificates of this PEM file, besides the platform's root
    /// certificates
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// The server's command and arguments (instead of `--upstream`)
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Names the standard library declares (a catalog cannot declare them again).
fn stdlib_names() -> std::collections::BTreeSet<String> {
    let checked = remit_lang::check::check(remit_lang::stdlib::sources());
    let Some(program) = checked.program else { return Default::default() };
    let mut names: std::collections::BTreeSet<String> = program.tools.iter().map(|t| t.name.clone()).collect();
    names.extend(program.effects.iter().map(|e| e.name.clone()));
    names.extend(program.approvals.iter().map(|a| a.name.clone()));
    names.extend(program.levels.iter().cloned());
    names
}

/// The tool signatures a catalog file declares.
fn declared(text: &str) -> Result<std::collections::BTreeMap<String, remit_mcp::catalog::Signature>, String> {
    use remit_lang::syntax::ast::{Decl, TypeExpr};
    fn ty(t: &TypeExpr) -> String {
        match t {
            TypeExpr::Named(n) => n.text.clone(),
            TypeExpr::Set(inner, _) => format!("set<{}>", ty(inner)),
        }
    }
    let mut sources = remit_lang::source::SourceMap::default();
    let file = sources.add("catalog", text);
    let parsed = remit_lang::syntax::parse_file(file, text).map_err(|_| "it does not parse (run `remit check`)")?;
    Ok(parsed
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Tool(t) => {
                Some((t.name.text.clone(), t.params.iter().map(|p| (p.name.text.clone(), ty(&p.ty))).collect()))
            }
            _ => None,
        })
        .collect())
}

pub fn import(args: ImportMcpArgs) -> Result<ExitCode, String> {
    use remit_mcp::catalog;
    let command: Vec<String> = match (&args.upstream, args.command.is_empty()) {
        (Some(upstream), true) if upstream.starts_with("http://") || upstream.starts_with("https://") => {
            vec![upstream.clone()]
        }
        (Some(upstream), true) => {
            let Some(line) = upstream.strip_prefix("stdio:") else {
                return Err(format!(
                    "`{upstream}`: the upstream is written `stdio:COMMAND ARGS…`, or is an `http://` or `https://` URL"
                ));
            };
            line.split_whitespace().map(str::to_string).collect()
        }
        (None, false) => args.command.clone(),
        _ => return Err("give the server as `--upstream stdio:COMMAND` or as a command after `--`, one of them".into()),
    };
    let tls = trusted(args.tls_ca.as_deref())?;
    let (info, tools) = remit_mcp::upstream::list_tools(&command, Duration::from_secs(args.timeout.max(1)), &tls)?;
    let server = match (info.pointer("/serverInfo/name").and_then(|v| v.as_str()), info.pointer("/serverInfo/version"))
    {
        (Some(name), Some(version)) => format!("`{name}` {}", version.as_str().unwrap_or_default()),
        (Some(name), None) => format!("`{name}`"),
        _ => format!("`{}`", command.join(" ")),
    };
    let taken = stdlib_names();
    let text = catalog::catalog(&tools, &taken, server.trim());
    if args.output.exists() && !args.overwrite {
        let existing = std::fs::read_to_string(&args.output)
            .map_err(|e| format!("cannot read `{}`: {e}", args.output.display()))?;
        let declared = declared(&existing).map_err(|e| format!("`{}`: {e}", args.output.display()))?;
        let changes = catalog::compare(&declared, &catalog::signatures(&tools, &taken));
        for name in &changes.new {
            println!("new: {name} (not declared: calls to it are denied until it is imported and classified)");
        }
        for name in &changes.removed {
            println!("removed: {name} (declared, the server no longer lists it)");
        }
        for (name, what) in &changes.changed {
            println!("changed: {name}: {what}");
        }
        if changes.is_empty() {
            println!("{}: the server's tools are the ones declared", args.output.display());
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!("{} left as it is; `--overwrite` replaces it with a fresh import", args.output.display());
        return Ok(ExitCode::from(1));
    }
    std::fs::write(&args.output, &text).map_err(|e| format!("cannot write `{}`: {e}", args.output.display()))?;
    let declared = text.lines().filter(|l| l.starts_with("tool ")).count();
    eprintln!(
        "wrote {}: {declared} of the server's {} tools declared; review its TODOs",
        args.output.display(),
        tools.len()
    );
    Ok(ExitCode::SUCCESS)
}
