//! The gateway (`remit serve`): the decision point that keeps the state decisions depend on, carries out their
//! obligations, logs every decision in a hash chain and sends escalations to the principal's inbox.
//!
//! A layer above [`crate::runtime`]; the only part of remit that knows the async runtime (tokio), the HTTP
//! framework (axum), the database (SQLite through rusqlite) and TLS (rustls on ring, the platform's root
//! certificates through rustls-native-certs). Its pieces:
//! - [`meta`]: what the gateway must know about a policy besides its decisions (holders, approval kinds, budgets);
//! - [`store`]: the state behind a trait ([`store::Store`], [`store::Tx`]); [`sqlite`] its embedded implementation;
//!   [`state_cache`] what a decision reads, kept between decisions that change nothing while the store does not;
//! - [`core`]: filling state and time into requests, deciding through the module, obligations, access requests,
//!   stops and facts — no HTTP;
//! - [`audit`]: the log's hash chain, `why`, receipts; [`replay`]: re-deciding a log under another policy;
//! - [`bundle`]: signed policy bundles (ed25519);
//! - [`mcp`]: `remit mcp-proxy`, the gateway as an MCP server in front of upstream MCP servers (stdio, HTTP);
//!   [`mcp_http`] the same over Streamable HTTP (bearer tokens → subjects); [`mcp_auth`] JWT bearer tokens
//!   (the proxy as an OAuth 2.1 resource server); [`mcp_wire`] the gateway's outgoing HTTP/1.1, over `http://`
//!   and `https://` (MCP upstreams over Streamable HTTP, key sets), blocking; [`mcp_wire_async`] the same exchange
//!   on the async runtime (hyper's client), for the HTTP proxy's forwarded calls; [`mcp_catalog`]: `remit import
//!   mcp`, a typed tool catalog from a server's `tools/list`;
//! - [`http`]: AuthZEN, the native API, the inbox, the admin API and metrics over HTTP; [`conn`] its servers'
//!   connections (limit, header and idle timeouts); [`client`] a minimal HTTP client for the CLI and tests.

pub mod audit;
pub mod bundle;
pub mod client;
pub mod conn;
pub mod core;
pub mod http;
pub mod https;
pub mod mcp;
pub mod mcp_auth;
pub mod mcp_catalog;
pub mod mcp_http;
pub mod mcp_wire;
pub mod mcp_wire_async;
pub mod meta;
pub mod replay;
pub mod sqlite;
pub mod state_cache;
pub mod store;
mod wal_index;

/// https servers made at test time (tests/support/tls.rs, shared with the integration tests).
#[cfg(test)]
#[path = "../../tests/support/tls.rs"]
mod test_tls;

pub use self::core::{Clock, Config, Decided, FixedClock, Gateway, NoExplanation, Policy, StartedClock, SystemClock};
pub use self::meta::PolicyMeta;
pub use self::sqlite::{Durability, SqliteStore};
pub use self::store::{Store, StoreError, Tx};
