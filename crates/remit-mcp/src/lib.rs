//! The MCP proxy (`remit mcp-proxy`): the gateway as an MCP server in front of upstream MCP servers, so that every
//! `tools/call` an agent makes is decided before it reaches the upstream, and `tools/list` shows only what the
//! subject may use.
//!
//! A front end of the gateway's core (`remit_gateway::Gateway`), like the gateway's own HTTP API; it depends on the
//! gateway and the language (for tool names), never the other way round. Its pieces:
//! - [`protocol`]: MCP's JSON-RPC messages, revisions and error codes, as both sides speak them;
//! - [`proxy`]: the [`proxy::Proxy`] both fronts share (its upstreams, a message accepted and routed, the answer in
//!   two steps for the HTTP front), over [`upstream`] (the MCP client of each upstream server, over stdio or
//!   Streamable HTTP), [`decision`] (`tools/call` decided by the gateway, the decision spliced into the result,
//!   rounds of multi round-trip calls), [`tools`] (the upstreams' tools merged, and what a subject sees) and
//!   [`outbox`] (the way back to the agent, and its streams of tool-list changes);
//! - [`stdio`]: the agent side over stdio (threads); [`http`]: the agent side over Streamable HTTP (bearer tokens →
//!   subjects);
//! - [`auth`]: JWT bearer tokens (the proxy as an OAuth 2.1 resource server, key sets fetched over https);
//! - [`catalog`]: `remit import mcp`, a typed tool catalog from a server's `tools/list`;
//! - [`headers`]: the headers of MCP 2026-07-28 that mirror a message (`Mcp-Name`, `Mcp-Param-*`).
//!
//! Each module depends only on those listed before it in this order: `protocol`, `headers`, `outbox`, `upstream`,
//! `decision`, `tools`, `proxy`, then the fronts (`stdio`, `http`, with `auth`); `catalog` stands alone.

pub mod auth;
pub mod catalog;
pub mod decision;
pub mod headers;
pub mod http;
pub mod outbox;
pub mod protocol;
pub mod proxy;
pub mod stdio;
pub mod tools;
pub mod upstream;
