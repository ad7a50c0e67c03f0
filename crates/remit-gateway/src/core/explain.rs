//! Explaining an escalated decision to whoever answers its access request: the logged request re-decided by the
//! interpreter on the policy's checked program, drawn as the path it took. Uses [`super::policy`].

use serde_json::Value as Json;

use super::Gateway;
use crate::store::{AccessRequest, StoreError};
use remit_lang::picture::explain::Explanation;

/// Why [`Gateway::explain`] has no explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoExplanation {
    /// The gateway serves a compiled module (a `.wasm` or a bundle) without its sources.
    NoSources,
    /// The logged decision cannot be explained by this gateway's policy (said why).
    Unexplainable(String),
    Store(StoreError),
}

impl std::fmt::Display for NoExplanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoExplanation::NoSources => f.write_str(
                "this gateway serves a compiled module without its policy sources, and an explanation needs them: \
                 serve the policy folder (`remit serve POLICY_DIR`) to explain decisions",
            ),
            NoExplanation::Unexplainable(why) => f.write_str(why),
            NoExplanation::Store(e) => write!(f, "{e}"),
        }
    }
}

impl Gateway {
    /// The escalated decision of an access request drawn as the path it took ([`remit_lang::picture::explain`]): the
    /// request as the gateway logged it (with the state and time it filled in) re-decided by the interpreter on the
    /// checked program of the policy that decided it. Needs the policy's sources; refuses rather than explain under
    /// another policy, from an entry whose hash does not hold, or from an entry that is not that decision's.
    pub fn explain(&self, request: &AccessRequest) -> Result<Explanation, NoExplanation> {
        let policy = self.policy();
        let Some(program) = policy.program.clone() else { return Err(NoExplanation::NoSources) };
        let unexplainable = |why: String| Err(NoExplanation::Unexplainable(why));
        let Some(seq) = request.log_seq else {
            return unexplainable("the request was filed before the store recorded its decision's log entry".into());
        };
        let writer = request.log_writer.as_deref().unwrap_or("");
        let entry = self.store.begin().map_err(NoExplanation::Store)?.log_entry(writer, seq);
        let Some(entry) = entry.map_err(NoExplanation::Store)? else {
            return unexplainable(format!("log entry {seq} is missing"));
        };
        if crate::audit::hash_of(&entry) != entry.hash {
            return unexplainable(format!("log entry {seq} does not match its hash: it was changed"));
        }
        let body = remit_lang::json::parse_stored(&entry.body).unwrap_or(Json::Null);
        if entry.kind != "decision" || body["id"] != request.decision_id.as_str() {
            return unexplainable(format!("log entry {seq} is not decision `{}`", request.decision_id));
        }
        let decided_by = body["policy"].as_str().unwrap_or("");
        if decided_by != program.hash {
            return unexplainable(format!(
                "decision `{}` was made by policy `{decided_by}`; this gateway now serves `{}`",
                request.decision_id, program.hash
            ));
        }
        let bytes = match &body["request"] {
            Json::String(raw) => raw.as_bytes().to_vec(),
            value => serde_json::to_vec(value).expect("a JSON value serializes"),
        };
        let mut explanation = remit_lang::picture::explain::explain(&program, &bytes);
        explanation.notes.push(format!(
            "access request {} · decision {} · log entry {seq} ({}), as the gateway filled it in (state, time)",
            request.id, request.decision_id, entry.hash
        ));
        let logged = &body["decision"];
        let again = &explanation.decision;
        let reasons: Vec<&str> = logged["reasons"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
        if logged["decision"].as_str() != Some(again.outcome.as_str()) || reasons != again.reasons {
            let masked = self.config.mask.iter().filter(|m| request.arguments.get(m.as_str()).is_some());
            let masked: Vec<&str> = masked.map(String::as_str).collect();
            explanation.notes.push(format!(
                "the gateway decided {} ({}); re-deciding the logged request gives {} ({}){}",
                logged["decision"].as_str().unwrap_or("?"),
                reasons.join(", "),
                again.outcome.as_str(),
                again.reasons.join(", "),
                if masked.is_empty() {
                    String::new()
                } else {
                    format!(": the log masks `{}`, whose values the rules may read", masked.join("`, `"))
                }
            ));
        } else if self.config.mask.iter().any(|m| request.arguments.get(m.as_str()).is_some()) {
            explanation.notes.push("masked arguments are shown as \"***\", as the log keeps them".into());
        }
        Ok(explanation)
    }
}
