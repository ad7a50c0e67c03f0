//! The MCP proxy (`remit mcp-proxy`): the gateway as an MCP server in front of upstream MCP servers, so that every
//! `tools/call` an agent makes is decided before it reaches the upstream, and `tools/list` shows only what the
//! subject may use.
//!
//! A front end of the gateway's core (`remit_gateway::Gateway`), like the gateway's own HTTP API; it depends on the
//! gateway and the language (for tool names), never the other way round. Its pieces:
//! - [`proxy`]: the proxy over stdio, and what both transports share (sessions with upstreams, forwarding,
//!   decisions on `tools/call`, tool listings);
//! - [`http`]: the agent side over Streamable HTTP (bearer tokens → subjects);
//! - [`auth`]: JWT bearer tokens (the proxy as an OAuth 2.1 resource server, key sets fetched over https);
//! - [`catalog`]: `remit import mcp`, a typed tool catalog from a server's `tools/list`;
//! - [`headers`]: the headers of MCP 2026-07-28 that mirror a message (`Mcp-Name`, `Mcp-Param-*`).

pub mod auth;
pub mod catalog;
pub mod headers;
pub mod http;
pub mod proxy;
