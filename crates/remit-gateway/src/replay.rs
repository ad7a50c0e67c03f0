//! `remit replay`: re-decides the requests of a decision log under another policy and reports which decisions would
//! change. A logged request is the request as the module decided it (the gateway's state and clock filled in), so
//! replaying it asks exactly "what would this policy have said then".

use std::sync::Arc;

use serde_json::Value as Json;

use super::store::LogEntry;
use remit_host::Compiled;

/// One decision that comes out differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub decision_id: String,
    /// The decision's log entry: its writer's chain (`""`: the one-writer log) and its number there.
    pub writer: String,
    pub seq: u64,
    pub tool: String,
    pub agent: String,
    pub before: String,
    pub before_reasons: Vec<String>,
    pub after: String,
    pub after_reasons: Vec<String>,
}

impl Change {
    /// A change toward allow: the new policy grants what the old one did not.
    pub fn widens(&self) -> bool {
        self.after == "allow" && self.before != "allow"
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub replayed: usize,
    /// Decisions the gateway made itself (store failures, obligation failures, ambiguous mandates): no module
    /// decision to compare with.
    pub skipped: usize,
    /// Requests with masked arguments (their replay sees `"***"`).
    pub masked: usize,
    pub changes: Vec<Change>,
}

fn strings(value: &Json) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(Json::as_str).map(str::to_string).collect()).unwrap_or_default()
}

/// Replays every decision of `entries` through `policy`.
pub fn replay(entries: &[LogEntry], policy: &Arc<Compiled>) -> Result<Report, String> {
    let mut evaluator = policy.evaluator()?;
    let mut report = Report::default();
    for entry in entries.iter().filter(|e| e.kind == "decision") {
        let body: Json = remit_lang::json::parse_stored(&entry.body)
            .map_err(|e| format!("log {}: {e}", super::audit::entry_name(&entry.writer, entry.seq)))?;
        // The module's decision: the logged one, or the one an obligation failure replaced.
        let decided = body.get("module_decision").unwrap_or(&body["decision"]);
        let reasons = strings(&decided["reasons"]);
        if reasons.iter().any(|r| r.starts_with("gateway.") || r == super::core::REASON_AMBIGUOUS) {
            report.skipped += 1;
            continue;
        }
        let request = &body["request"];
        let bytes = match request {
            Json::String(raw) => raw.clone().into_bytes(),
            other => serde_json::to_vec(other).expect("JSON serializes"),
        };
        if request
            .pointer("/action/arguments")
            .and_then(Json::as_object)
            .is_some_and(|a| a.values().any(|v| v == "***"))
        {
            report.masked += 1;
        }
        let after: Json = serde_json::from_slice(&evaluator.decide(&bytes)).unwrap_or(Json::Null);
        report.replayed += 1;
        let before_outcome = decided["decision"].as_str().unwrap_or("").to_string();
        let after_outcome = after["decision"].as_str().unwrap_or("").to_string();
        let after_reasons = strings(&after["reasons"]);
        if before_outcome != after_outcome || reasons != after_reasons {
            report.changes.push(Change {
                decision_id: body["id"].as_str().unwrap_or("").to_string(),
                writer: entry.writer.clone(),
                seq: entry.seq,
                tool: request.pointer("/action/name").and_then(Json::as_str).unwrap_or("").to_string(),
                agent: request.pointer("/subject/id").and_then(Json::as_str).unwrap_or("").to_string(),
                before: before_outcome,
                before_reasons: reasons,
                after: after_outcome,
                after_reasons,
            });
        }
    }
    Ok(report)
}
