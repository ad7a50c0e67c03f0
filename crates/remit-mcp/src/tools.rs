//! The tools an agent sees: every upstream's tools merged into one catalog, where a name several upstreams offer is
//! left out of listings and calls (it could not be routed), and of those the ones the module's listing shows the
//! subject. Depends on `protocol` and `decision`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::decision::Identity;
use crate::protocol::{tool_name, RpcError, INTERNAL_ERROR};
use remit_gateway::core::Gateway;

/// The tools of each upstream that has some: its index among the upstreams, and its tools (shared, not copied).
pub(crate) type Offered = Vec<(usize, Arc<Vec<Json>>)>;

/// The tool names several upstreams offer, each with the upstreams that offer it.
pub(crate) fn collisions(tools: &Offered) -> Vec<(String, Vec<usize>)> {
    if tools.len() < 2 {
        return Vec::new();
    }
    let mut offered: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, list) in tools {
        for name in list.iter().filter_map(tool_name) {
            offered.entry(name).or_default().push(*index);
        }
    }
    offered.into_iter().filter(|(_, slots)| slots.len() > 1).map(|(tool, slots)| (tool.to_string(), slots)).collect()
}

/// The tool names the module's listing shows the subject.
pub(crate) fn visible(gateway: &Gateway, identity: &Identity) -> Result<Vec<String>, RpcError> {
    let request = serde_json::to_vec(&Json::Object(identity.request(None))).expect("JSON serializes");
    let listing = gateway
        .visible_tools(&request)
        .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("the gateway's store is unavailable: {e}")))?;
    let listing: Json = serde_json::from_slice(&listing).unwrap_or(Json::Null);
    Ok(listing
        .get("visible")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .map(str::to_string)
        .collect())
}

/// `tools/list`'s result: the tools offered whose names are `visible` and not `collided`, schemas unchanged.
pub(crate) fn listing(tools: &Offered, visible: &[String], collided: &[String]) -> Json {
    let shown: Vec<Json> = tools
        .iter()
        .flat_map(|(_, list)| list.iter())
        .filter(|t| tool_name(t).is_some_and(|n| visible.iter().any(|v| v == n) && !collided.iter().any(|c| c == n)))
        .cloned()
        .collect();
    json!({"tools": shown})
}
