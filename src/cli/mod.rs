//! Command-line interface: argument parsing (clap), loading files, rendering diagnostics and decisions.

mod build;
mod bundle;
mod config;
mod diff;
mod fmt;
mod load;
mod lsp;
mod mcp;
mod render;
mod serve;
mod tests;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use remit_lang::check::{check_with, Options};
use remit_lang::diag::Diagnostic;
use remit_lang::ir::Program;
use remit_lang::source::SourceMap;

#[derive(Parser, Debug)]
#[command(name = "remit", version, about = "Policy language and compiler for AI agents acting on behalf of people")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check policy files (and the folders' .remit files); exit 1 on any error
    Check {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// The instant mandates' validity is checked at (RFC 3339, e.g. `2026-12-03T15:30:00Z`; default:
        /// `SOURCE_DATE_EPOCH` when set, else the system clock): `remit::mandate-expiring` warns of every mandate
        /// expired then or expiring within the horizon
        #[arg(long, value_name = "INSTANT")]
        now: Option<String>,
        /// How far ahead `remit::mandate-expiring` looks (`30d`, `12h`, `0s` for expired mandates only)
        #[arg(long, value_name = "DURATION", default_value = "30d")]
        expiry_horizon: String,
        /// Exit 1 when there is any warning too (for CI)
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Compile a policy into a WebAssembly decision module (docs/abi.md)
    Build {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
        /// Write a wasmtime-precompiled module (.cwasm) instead of the .wasm
        #[arg(long)]
        precompile: bool,
        /// Write a policy bundle (module + manifest) for `remit serve`
        #[arg(long)]
        bundle: bool,
        /// Sign the bundle with this secret key (`remit keygen`)
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        /// The bundle's revision, a whole number greater than the last one served (a gateway refuses an older one);
        /// default: one more than the bundle at `--output`, else 1
        #[arg(long, value_name = "N")]
        revision: Option<u64>,
    },
    /// Publish signed bundles in a store for the gateways that serve the store's bundle (`remit serve
    /// --bundle-from-store`)
    #[command(subcommand)]
    Bundle(bundle::BundleCommand),
    /// Make an ed25519 key pair for signing bundles or log heads (`--log-key`): KEY (secret) and KEY.pub
    Keygen {
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Evaluate one request (JSON) against a policy (sources, or one .wasm/.cwasm) and print the decision (JSON)
    Eval {
        #[arg(required = true)]
        policy: Vec<PathBuf>,
        #[arg(long)]
        request: PathBuf,
        /// Evaluate sources even when a delegation fails the narrowing proof (to replay its witness)
        #[arg(long)]
        no_narrowing: bool,
        /// What decides sources: `native` (the module's runtime over the policy image, what gateways run) or
        /// `interpreter` (the reference, crates/remit-lang/src/eval); both write the same bytes
        #[arg(long, default_value = "native", value_parser = ["native", "interpreter"])]
        engine: String,
    },
    /// List the tools a subject may see (subject and context given as a request JSON), from sources or one .wasm/.cwasm
    Tools {
        #[arg(required = true)]
        policy: Vec<PathBuf>,
        #[arg(long)]
        subject: PathBuf,
        /// Also list every hidden tool with the rule, scope or stop that hides it
        #[arg(long)]
        explain: bool,
        #[arg(long)]
        json: bool,
    },
    /// Run policy test files (*.tests.toml) and print `N passed, M failed`
    Test {
        paths: Vec<PathBuf>,
        /// Which engines decide besides the reference interpreter, which always does: `native` (the module's
        /// runtime over the policy image, what gateways run; the default), `module` (the .wasm `remit build` writes,
        /// in wasmtime), `all`, or `interpreter` alone; every engine but the interpreter must write the interpreter's
        /// bytes
        #[arg(long, default_value = "native", value_parser = ["interpreter", "native", "module", "module-v2", "all"])]
        engine: String,
        /// Run only the cases whose name, or whose test file's path, contains this text
        #[arg(long, value_name = "PATTERN")]
        filter: Option<String>,
        /// Also write the results as JUnit XML to FILE (one testsuite per test file, one testcase per case)
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Put policy files (and the folders' .remit files) in the canonical layout; `--check` only reports
    Fmt {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Write nothing; exit 1 when a file is not formatted
        #[arg(long)]
        check: bool,
    },
    /// Run the language server over stdio (diagnostics as you type, hover, definitions, references, completion)
    Lsp,
    /// Print the argument digest of a request's call, as an approval binds it
    Digest {
        #[arg(long)]
        request: PathBuf,
    },
    /// Run the gateway: decisions over HTTP (AuthZEN 1.0 and native), state, obligations, log, inbox (docs/gateway.md)
    Serve(Box<serve::ServeArgs>),
    /// Put the gateway in front of an MCP server: an MCP server on stdin/stdout that filters `tools/list` and decides
    /// every `tools/call` before the upstream (started from the command after `--`) sees it (docs/mcp.md)
    McpProxy(Box<mcp::McpProxyArgs>),
    /// Write a typed tool catalog from what an external source declares
    #[command(subcommand)]
    Import(ImportCommand),
    /// Answer access requests in a running gateway's inbox
    #[command(subcommand)]
    Approvals(serve::ApprovalsCommand),
    /// Set stops and publish fact versions in a running gateway
    #[command(subcommand)]
    Admin(serve::AdminCommand),
    /// Grant, list, show, change and revoke instances of templates in a running gateway
    #[command(subcommand)]
    Grants(serve::GrantsCommand),
    /// Check the gateway's decision log, explain a decision, print an operation's receipt
    #[command(subcommand)]
    Audit(serve::AuditCommand),
    /// Re-decide a gateway log's requests under another policy; exit 1 when a decision would become an allow
    Replay {
        /// The gateway's store: `sqlite:PATH` or PATH
        store: String,
        #[arg(long, required = true, num_args = 1..)]
        policy: Vec<PathBuf>,
    },
    /// Compare the authority of each mandate in two versions (files or folders); exit 1 when any widened
    Diff {
        old: PathBuf,
        new: PathBuf,
        #[arg(long, value_enum, default_value_t = diff::DiffFormat::Human)]
        format: diff::DiffFormat,
        /// Where `html` and `svg` are written (default: standard output)
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Draw the delegation forest: every mandate with what it grants, forbids and gates
    Graph {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
        /// Write to this file instead of standard output
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Show a stop as active on this mandate (and so on every mandate under it); repeatable
        #[arg(long = "stop", value_name = "MANDATE")]
        stops: Vec<String>,
        /// Draw these instances of templates under their templates: a JSON list as `remit grants list` (`GET
        /// /v1/grants`) answers it, or as a request's `context.grants` carries it
        #[arg(long, value_name = "FILE")]
        instances: Option<PathBuf>,
    },
    /// Explain one decision: the chain, each rule of the called tool with its condition and the request's values
    Explain {
        #[arg(required = true)]
        policy: Vec<PathBuf>,
        #[arg(long)]
        request: PathBuf,
        #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
        format: ExplainFormat,
        /// Write to this file instead of standard output
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Explain even when a delegation fails the narrowing proof (to follow its witness)
        #[arg(long)]
        no_narrowing: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ImportCommand {
    /// A catalog from an MCP server's `tools/list` (docs/mcp.md); against an existing catalog, what changed
    Mcp(mcp::ImportMcpArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// Mermaid flowchart (renders in GitHub comments and Markdown)
    Mermaid,
    /// Graphviz DOT
    Dot,
    /// A self-contained SVG
    Svg,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainFormat {
    /// For the terminal (coloured when it is one and NO_COLOR is unset)
    Text,
    /// A self-contained HTML page
    Html,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Github,
}

pub fn run() -> ExitCode {
    // `remit serve --config FILE` and `REMIT_*` variables become arguments under the command line's (config.rs).
    use clap::CommandFactory;
    let argv =
        match config::layered(Cli::command(), std::env::args_os().collect(), &|name: &str| std::env::var_os(name)) {
            Ok(argv) => argv,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
    let cli = Cli::parse_from(argv);
    let result = match cli.command {
        Command::Check { paths, format, now, expiry_horizon, deny_warnings } => {
            Expiry::from_args(now.as_deref(), &expiry_horizon)
                .and_then(|expiry| cmd_check(&paths, format, expiry, deny_warnings))
        }
        Command::Build { paths, output, precompile, bundle, sign, revision } => {
            build::run(&paths, &output, build::Packaging { precompile, bundle, sign, revision })
        }
        Command::Keygen { output } => serve::keygen(&output),
        Command::Bundle(command) => bundle::run(command),
        Command::Eval { policy, request, no_narrowing, engine } => {
            cmd_eval(&policy, &request, Options { narrowing: !no_narrowing }, engine == "interpreter")
        }
        Command::Tools { policy, subject, explain, json } => cmd_tools(&policy, &subject, explain, json),
        Command::Test { paths, engine, filter, junit } => {
            let engine = remit_lang::testing::Engine::parse(&engine).unwrap_or_default();
            tests::run(&paths, &tests::TestOptions { engine, filter, junit })
        }
        Command::Digest { request } => cmd_digest(&request),
        Command::Diff { old, new, format, output } => diff::run(&old, &new, format, output.as_deref()),
        Command::Graph { paths, format, output, stops, instances } => {
            cmd_graph(&paths, format, output.as_deref(), &stops, instances.as_ref())
        }
        Command::Explain { policy, request, format, output, no_narrowing } => {
            cmd_explain(&policy, &request, format, output.as_deref(), Options { narrowing: !no_narrowing })
        }
        Command::Fmt { paths, check } => fmt::run(&paths, check),
        Command::Lsp => lsp::run(),
        Command::Serve(args) => serve::serve(*args),
        Command::McpProxy(args) => mcp::run(*args),
        Command::Import(ImportCommand::Mcp(args)) => mcp::import(args),
        Command::Approvals(command) => serve::approvals(command),
        Command::Admin(command) => serve::admin(command),
        Command::Grants(command) => serve::grants(command),
        Command::Audit(command) => serve::audit(command),
        Command::Replay { store, policy } => serve::replay(&store, &policy),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Loads and checks a policy; prints its diagnostics in `format`; `None` when it has errors.
pub fn compile(paths: &[PathBuf], format: Format) -> Result<(Option<Program>, SourceMap, Vec<Diagnostic>), String> {
    compile_with(paths, format, Options { narrowing: true })
}

/// [`compile`], with the narrowing proof on or off (`--no-narrowing`).
pub fn compile_with(
    paths: &[PathBuf],
    format: Format,
    options: Options,
) -> Result<(Option<Program>, SourceMap, Vec<Diagnostic>), String> {
    compile_and(paths, format, options, |_| Vec::new())
}

/// [`compile_with`], adding the diagnostics `more` finds in the checked program to the report.
fn compile_and(
    paths: &[PathBuf],
    format: Format,
    options: Options,
    more: impl FnOnce(&Program) -> Vec<Diagnostic>,
) -> Result<(Option<Program>, SourceMap, Vec<Diagnostic>), String> {
    let (sources, mut diagnostics) = load::load(paths)?;
    let checked = check_with(sources.clone(), options);
    diagnostics.extend(checked.diagnostics);
    if let Some(program) = &checked.program {
        diagnostics.extend(more(program));
        diagnostics.sort_by_key(|d| (d.primary_span(), d.code));
    }
    render::print(&sources, &diagnostics, format);
    let program = if diagnostics.iter().any(Diagnostic::is_error) { None } else { checked.program };
    Ok((program, sources, diagnostics))
}

/// What `remit check` holds mandates' validity windows against: an instant and a horizon.
#[derive(Debug, Clone, Copy)]
struct Expiry {
    now: i64,
    horizon: u64,
}

impl Expiry {
    fn from_args(now: Option<&str>, horizon: &str) -> Result<Expiry, String> {
        // `SOURCE_DATE_EPOCH` is the reproducible-builds convention for "the time of this build" (Unix seconds).
        let epoch = std::env::var("SOURCE_DATE_EPOCH").ok().filter(|e| !e.is_empty());
        let now = match (now, epoch) {
            (Some(text), _) => remit_lang::value::parse_timestamp(text)
                .ok_or_else(|| format!("`{text}`: --now is an instant such as `2026-12-03T15:30:00Z`"))?,
            (None, Some(epoch)) => epoch
                .trim()
                .parse()
                .map_err(|_| format!("`{epoch}`: SOURCE_DATE_EPOCH is a number of seconds since 1970-01-01"))?,
            (None, None) => remit_gateway::Clock::now(&remit_gateway::SystemClock),
        };
        let horizon = remit_lang::value::parse_duration(horizon)
            .ok_or_else(|| format!("`{horizon}`: --expiry-horizon is a duration such as `30d`, `12h` or `0s`"))?;
        Ok(Expiry { now, horizon })
    }
}

fn cmd_check(paths: &[PathBuf], format: Format, expiry: Expiry, deny_warnings: bool) -> Result<ExitCode, String> {
    let expiring = |program: &Program| remit_lang::check::expiring(program, expiry.now, expiry.horizon);
    let (program, sources, diagnostics) = compile_and(paths, format, Options { narrowing: true }, expiring)?;
    if format == Format::Human {
        let errors = diagnostics.iter().filter(|d| d.is_error()).count();
        let warnings = diagnostics.len() - errors;
        let files = sources.files().filter(|(_, f)| !f.name.starts_with("std/")).count();
        eprintln!("checked {files} file(s): {errors} error(s), {warnings} warning(s)");
    }
    // `--deny-warnings`: every warning counts, as an error would.
    let refused = deny_warnings && !diagnostics.is_empty();
    Ok(if program.is_some() && !refused { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

fn cmd_eval(policy: &[PathBuf], request: &PathBuf, options: Options, interpreter: bool) -> Result<ExitCode, String> {
    if let Some(module) = build::compiled_policy(policy) {
        return build::eval(module, &read(request)?);
    }
    let (program, _, _) = compile_with(policy, Format::Human, options)?;
    let Some(program) = program else { return Ok(ExitCode::from(1)) };
    // By default the module's runtime, natively over the policy image: the code a gateway runs. The interpreter
    // (`crates/remit-lang/src/eval`) is the reference the tests hold it to.
    let request = read(request)?;
    let decision = if interpreter {
        remit_lang::eval::decide(&program, &request).to_json().into_bytes()
    } else {
        native(&program)?.decide(&request)
    };
    println!("{}", String::from_utf8_lossy(&decision));
    Ok(ExitCode::SUCCESS)
}

fn native(program: &Program) -> Result<remit_lang::native::Native, String> {
    remit_lang::native::Native::new(program).map_err(|e| format!("cannot compile the policy: {e}"))
}

fn cmd_tools(policy: &[PathBuf], subject: &PathBuf, explain: bool, json: bool) -> Result<ExitCode, String> {
    // The listing JSON (`remit_lang::eval::Visibility::to_json`), from the module or from the runtime natively.
    let (listing, program) = if let Some(module) = build::compiled_policy(policy) {
        (build::visible_tools(module, &read(subject)?)?, None)
    } else {
        let (program, _, _) = compile(policy, Format::Human)?;
        let Some(program) = program else { return Ok(ExitCode::from(1)) };
        let listing = native(&program)?.visible_tools(&read(subject)?);
        (String::from_utf8_lossy(&listing).into_owned(), Some(program))
    };
    if json {
        println!("{listing}");
        return Ok(ExitCode::SUCCESS);
    }
    let value: serde_json::Value =
        serde_json::from_str(&listing).map_err(|e| format!("the tool listing is not JSON: {e}"))?;
    let strings = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    for tool in value["visible"].as_array().into_iter().flatten() {
        println!("{}", strings(tool));
    }
    if explain {
        for hidden in value["hidden"].as_array().into_iter().flatten() {
            let (tool, reason, rule) = (strings(&hidden["tool"]), strings(&hidden["reason"]), &hidden["rule"]);
            let detail = if rule.is_object() {
                format!(" ({} `{}` at {})", strings(&rule["mandate"]), strings(&rule["rule"]), strings(&rule["at"]))
            } else if reason == "credential.scope-missing" {
                // A module does not carry the scopes' names: only the sources can say which are needed.
                let scopes = program.as_ref().and_then(|p| p.tool(&tool).map(|t| p.tools[t].scopes.join("`, `")));
                scopes.map(|s| format!(" (needs one of the scopes `{s}`)")).unwrap_or_default()
            } else {
                String::new()
            };
            println!("hidden {tool}: {reason}{detail}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_digest(request: &PathBuf) -> Result<ExitCode, String> {
    let bytes = read(request)?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("`{}` is not JSON: {e}", request.display()))?;
    let tool = value.pointer("/action/name").and_then(|v| v.as_str()).ok_or("the request has no `action.name`")?;
    let empty = serde_json::Value::Object(Default::default());
    let arguments = value.pointer("/action/arguments").unwrap_or(&empty);
    println!("{}", remit_lang::eval::argument_digest(tool, arguments));
    Ok(ExitCode::SUCCESS)
}

/// Writes a rendered picture to `output`, or to standard output.
pub fn write_output(output: Option<&Path>, text: &str) -> Result<(), String> {
    match output {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("cannot write `{}`: {e}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

fn cmd_graph(
    paths: &[PathBuf],
    format: GraphFormat,
    output: Option<&Path>,
    stops: &[String],
    instances: Option<&PathBuf>,
) -> Result<ExitCode, String> {
    let (program, _, _) = compile(paths, Format::Human)?;
    let Some(program) = program else { return Ok(ExitCode::from(1)) };
    if let Some(unknown) = stops.iter().find(|s| program.mandate(s).is_none()) {
        return Err(format!("`--stop {unknown}` names no mandate of this policy"));
    }
    let format = match format {
        GraphFormat::Mermaid => remit_lang::picture::Format::Mermaid,
        GraphFormat::Dot => remit_lang::picture::Format::Dot,
        GraphFormat::Svg => remit_lang::picture::Format::Svg,
    };
    let picture = match instances {
        None => remit_lang::picture::graph(&program, stops, format),
        Some(path) => {
            let instances = remit_lang::picture::instances::parse(&program, &read(path)?)
                .map_err(|e| format!("`{}`: {e}", path.display()))?;
            remit_lang::picture::graph_with_instances(&program, stops, &instances, format)
        }
    };
    write_output(output, &picture)?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_explain(
    policy: &[PathBuf],
    request: &PathBuf,
    format: ExplainFormat,
    output: Option<&Path>,
    options: Options,
) -> Result<ExitCode, String> {
    let (program, _, _) = compile_with(policy, Format::Human, options)?;
    let Some(program) = program else { return Ok(ExitCode::from(1)) };
    let explanation = remit_lang::picture::explain::explain(&program, &read(request)?);
    let text = match format {
        ExplainFormat::Text => {
            use std::io::IsTerminal;
            let ansi = output.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            remit_lang::picture::explain::text(&explanation, ansi)
        }
        ExplainFormat::Html => remit_lang::picture::explain::html(&explanation),
    };
    write_output(output, &text)?;
    Ok(ExitCode::SUCCESS)
}
