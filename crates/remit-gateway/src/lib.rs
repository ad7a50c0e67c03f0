//! The gateway (`remit serve`): the decision point that keeps the state decisions depend on, carries out their
//! obligations, logs every decision in a hash chain and sends escalations to the principal's inbox.
//!
//! Above the module host (`remit-host`, which decides) and the language (`remit-lang`, for a policy's metadata and,
//! given the sources, explanations). The only layer that knows the async runtime (tokio), the HTTP framework (axum,
//! on hyper), the databases (SQLite through rusqlite, PostgreSQL through tokio-postgres) and TLS (rustls on ring, the platform's root certificates
//! through rustls-native-certs); the MCP proxy (`remit-mcp`) is built on it. Its pieces:
//! - [`store`]: the state behind a trait ([`store::Store`], [`store::Tx`]); [`sqlite`] its embedded implementation,
//!   [`postgres`] the one several gateways share;
//!   [`state_cache`] what a decision reads, kept between decisions that change nothing while the store does not;
//! - [`core`]: filling state and time into requests, deciding through the module, obligations, access requests,
//!   stops and facts — no HTTP;
//! - [`audit`]: the log's hash chain, `why`, receipts, [`head`] the log's signed head; [`replay`]: re-deciding a log
//!   under another policy;
//! - [`data`]: the data sets' file formats (JSON, CSV) and how their records are written into a store;
//! - [`bundle`]: signed policy bundles (with their data files); [`keys`] the ed25519 keys and signatures both are signed with;
//! - [`clock`]: where the time comes from;
//! - [`http`]: AuthZEN, the native API, the inbox, the admin API and metrics over HTTP; [`conn`] its servers'
//!   connections (limit, header and idle timeouts); [`https`] their TLS;
//! - [`client`]: the one HTTP client for what remit fetches over `http://` and `https://` (MCP upstreams, key sets,
//!   the CLI's calls to a gateway): hyper-util's pooled client, async and blocking.

pub mod audit;
pub mod bundle;
pub mod client;
pub mod clock;
pub mod conn;
pub mod core;
pub mod data;
pub mod head;
pub mod http;
pub mod https;
pub mod keys;
pub mod postgres;
pub mod postgres_tls;
pub mod replay;
pub mod sqlite;
pub mod state_cache;
pub mod store;
mod wal_index;

/// https servers made at test time (tests/support/tls.rs, shared with the integration tests).
#[cfg(test)]
#[path = "../../../tests/support/tls.rs"]
mod test_tls;

pub use self::clock::{Clock, FixedClock, StartedClock, SystemClock};
pub use self::core::{Config, Decided, Gateway, NoExplanation, Policy};
pub use self::postgres::{PostgresOptions, PostgresStore};
pub use self::sqlite::{Durability, SqliteStore};
pub use self::store::{Store, StoreError, Tx};
pub use remit_lang::wasm::meta::PolicyMeta;
