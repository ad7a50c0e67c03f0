//! `remit bundle publish`: a signed bundle published once in the store, which every gateway serving the store's
//! bundle (`remit serve --bundle-from-store`) takes on its next poll (docs/scaling.md "Policy rollout"). Through the
//! store rather than a replica's admin API: a release is published by whoever holds the bundle and the store's
//! credentials (CI, an operator), with no replica up or reachable, and no replica can be skipped. Knows the gateway's
//! store and bundles, nothing of HTTP.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use remit_gateway::Clock;

#[derive(Subcommand, Debug)]
pub enum BundleCommand {
    /// Publish a signed bundle (`remit build --bundle --sign`) in the store: every `remit serve --bundle-from-store`
    /// of the store verifies it with its own `--verify-key` and serves it, unless it is older than the revision in
    /// force
    Publish(PublishArgs),
}

#[derive(Args, Debug)]
pub struct PublishArgs {
    /// The bundle file
    bundle: PathBuf,
    #[command(flatten)]
    store: super::serve::StoreArgs,
    /// Refuse to publish unless the bundle is signed by this public key (the gateways check it again with theirs)
    #[arg(long, value_name = "PUB")]
    verify_key: Option<PathBuf>,
    /// Who publishes, as the log records it (default: `remit bundle publish` and the process id)
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
}

pub fn run(command: BundleCommand) -> Result<ExitCode, String> {
    match command {
        BundleCommand::Publish(args) => publish(args),
    }
}

fn publish(args: PublishArgs) -> Result<ExitCode, String> {
    // Read and checked before the store is opened: a bad file changes nothing.
    let bytes = std::fs::read(&args.bundle).map_err(|e| format!("cannot read `{}`: {e}", args.bundle.display()))?;
    let key = super::serve::verifying_key(args.verify_key.as_deref())?;
    let by = args.by.unwrap_or_else(|| format!("remit bundle publish {}", std::process::id()));
    let store = args.store.open_once(&by)?;
    let now = remit_gateway::SystemClock.now();
    let published = remit_gateway::bundle::publish(&*store, &bytes, key.as_ref(), &by, now)
        .map_err(|e| format!("`{}`: {e}", args.bundle.display()))?;
    println!(
        "published bundle {}: revision {}, policy {}, {}",
        published.id, published.revision, published.policy, published.sha256
    );
    Ok(ExitCode::SUCCESS)
}
