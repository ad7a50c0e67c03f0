//! The decision log as a hash chain: every entry hashes its predecessor's hash with its own content, so a changed,
//! deleted or reordered entry breaks the chain at that point ([`verify`]).
//!
//! The chain alone proves only that the log is consistent with itself: whoever can write the store can change an
//! entry and compute the hashes after it again, or cut the tail. So the gateway signs the log's head (sequence
//! number, hash, time) with its own key ([`SignedHead`], [`HeadSigner`]), and a head kept elsewhere is checked
//! against the chain ([`check_head`]): the entries up to it are then the ones the gateway wrote.

use sha2::{Digest, Sha256};

use crate::clock::Clock;
/// The signed head, kept by the store and checked here.
pub use crate::head::SignedHead;
/// Hex as the log writes hashes (the MCP proxy's call keys use it too).
pub use crate::keys::hex;
use crate::keys::{public_key_text, SigningKey};
use crate::store::{LogEntry, Store, StoreError};

/// The `prev` of the first entry.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// `sha256:` + hex of SHA-256 over `prev \n seq \n time \n kind \n body`.
pub fn entry_hash(prev: &str, seq: u64, time: i64, kind: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(format!("\n{seq}\n{time}\n{kind}\n").as_bytes());
    hasher.update(body.as_bytes());
    format!("sha256:{}", hex(&hasher.finalize()))
}

/// Where a chain broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub seq: u64,
    pub problem: String,
}

/// Checks a whole log given in storage order: sequence numbers 1, 2, 3… without gaps, each `prev` the hash of the
/// entry before, each `hash` recomputed from the content. The number of entries when it holds.
pub fn verify(entries: impl IntoIterator<Item = LogEntry>) -> Result<u64, Broken> {
    let mut expected_prev = GENESIS.to_string();
    let mut count = 0u64;
    for entry in entries {
        count += 1;
        if entry.seq != count {
            let problem =
                format!("entry {} comes where entry {count} should: an entry was deleted or moved", entry.seq);
            return Err(Broken { seq: entry.seq, problem });
        }
        if entry.prev != expected_prev {
            let problem = "its `prev` is not the hash of the entry before it".to_string();
            return Err(Broken { seq: entry.seq, problem });
        }
        let hash = entry_hash(&entry.prev, entry.seq, entry.time, &entry.kind, &entry.body);
        if hash != entry.hash {
            let problem = "its content does not match its hash: the entry was changed".to_string();
            return Err(Broken { seq: entry.seq, problem });
        }
        expected_prev = entry.hash;
    }
    Ok(count)
}

/// Checks that a head is in a log whose chain holds ([`verify`]): its entry is there, with its hash. A log cut
/// before the head's entry, or changed at or before it (even with every hash after the change computed again),
/// fails. Entries after the head are not covered by it.
pub fn check_head(entries: &[LogEntry], head: &SignedHead) -> Result<(), String> {
    if head.seq == 0 {
        return if head.hash == GENESIS { Ok(()) } else { Err("a head of entry 0 has the genesis hash".into()) };
    }
    let Some(entry) = entries.get(head.seq as usize - 1).filter(|e| e.seq == head.seq) else {
        return Err(format!(
            "the log ends at entry {}, before the head's entry {}: entries were cut from its end",
            entries.len(),
            head.seq
        ));
    };
    if entry.hash != head.hash {
        return Err(format!(
            "entry {} has the hash {}, the head signed {}: the log was rewritten at or before entry {}",
            head.seq, entry.hash, head.hash, head.seq
        ));
    }
    Ok(())
}

/// Signs the log's head with the gateway's key into the store: every interval ([`HeadSigner::every`]) and when
/// the gateway stops.
pub struct HeadSigner {
    key: SigningKey,
    store: std::sync::Arc<dyn Store>,
    clock: std::sync::Arc<dyn Clock>,
    /// The head this signer signed last (sequence number and hash).
    last: std::sync::Mutex<Option<(u64, String)>>,
}

impl std::fmt::Debug for HeadSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret key.
        let key = public_key_text(&self.key.verifying_key());
        f.debug_struct("HeadSigner").field("key", &key).finish_non_exhaustive()
    }
}

impl HeadSigner {
    pub fn new(key: SigningKey, store: std::sync::Arc<dyn Store>, clock: std::sync::Arc<dyn Clock>) -> HeadSigner {
        HeadSigner { key, store, clock, last: std::sync::Mutex::new(None) }
    }

    /// Signs the head when the log moved since the head this signer signed last; the head signed, if any (an empty
    /// log has none).
    pub fn sign(&self) -> Result<Option<SignedHead>, StoreError> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let mut tx = self.store.begin()?;
        let (seq, hash) = tx.log_head()?;
        if seq == 0 || last.as_ref().is_some_and(|(s, h)| *s == seq && *h == hash) {
            return Ok(None);
        }
        let head = SignedHead::sign(&self.key, seq, &hash, self.clock.now());
        tx.insert_signed_head(&head)?;
        tx.commit()?;
        *last = Some((seq, hash));
        Ok(Some(head))
    }

    /// Signs every `interval` on a thread of its own, for the life of the process.
    pub fn every(self: std::sync::Arc<Self>, interval: std::time::Duration) {
        std::thread::Builder::new()
            .name("remit-log-head".into())
            .spawn(move || loop {
                std::thread::sleep(interval);
                if let Err(e) = self.sign() {
                    eprintln!("the log's head was not signed: {e}");
                }
            })
            .expect("a thread starts");
    }
}

/// Every entry of a store's log, in order of `seq`.
pub fn read_all(store: &dyn Store) -> Result<Vec<LogEntry>, StoreError> {
    store.begin()?.log_entries(0, usize::MAX >> 1)
}

fn body(entry: &LogEntry) -> serde_json::Value {
    remit_lang::json::parse_stored(&entry.body).unwrap_or(serde_json::Value::Null)
}

/// The log entry of a decision.
pub fn find_decision<'a>(entries: &'a [LogEntry], id: &str) -> Option<&'a LogEntry> {
    entries.iter().find(|e| e.kind == "decision" && body(e)["id"] == id)
}

/// Who authorised a decision: the call, the decision, the mandate chain and rules, the approvals with their approvers
/// (and the access requests they answered), the credential and the policy — as lines of text.
pub fn why(entries: &[LogEntry], id: &str) -> Option<Vec<String>> {
    use serde_json::Value as Json;
    let entry = find_decision(entries, id)?;
    let b = body(entry);
    let d = &b["decision"];
    let r = &b["request"];
    let text = |v: &Json| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    let list = |v: &Json| v.as_array().map(|a| a.iter().map(text).collect::<Vec<_>>().join(", ")).unwrap_or_default();
    let mut out = vec![
        format!("decision {id}: {} ({})", text(&d["decision"]), list(&d["reasons"])),
        format!("at {} (log entry {}, {})", remit_lang::value::format_timestamp(entry.time), entry.seq, entry.hash),
        format!(
            "call: {} calls {} on {} with {}",
            text(&r["subject"]["id"]),
            text(&r["action"]["name"]),
            text(&r["resource"]["id"]),
            r["action"]["arguments"]
        ),
        format!("credential: {}", b["credential"].as_str().unwrap_or("none presented")),
        format!("mandate chain: {}", list(&d["mandate_chain"])),
    ];
    for rule in d["rules"].as_array().into_iter().flatten() {
        out.push(format!("rule: {} `{}` at {}", text(&rule["mandate"]), text(&rule["rule"]), text(&rule["at"])));
    }
    let approvals = b["approvals_used"].as_array().cloned().unwrap_or_default();
    if approvals.is_empty() {
        out.push("approvals: none used".into());
    }
    for a in approvals {
        let request = a["access_request"].as_str().unwrap_or("");
        let when = entries
            .iter()
            .find(|e| e.kind == "approval" && body(e)["access_request"] == request && body(e)["status"] == "approved")
            .map(|e| e.time);
        out.push(format!(
            "approval: {} of kind {} by {} (access request {}{})",
            text(&a["id"]),
            text(&a["kind"]),
            text(&a["approver"]),
            if request.is_empty() { "-" } else { request },
            when.map(|t| format!(", approved at {}", remit_lang::value::format_timestamp(t))).unwrap_or_default()
        ));
    }
    if let Some(obligations) = d["obligations"].as_array().filter(|o| !o.is_empty()) {
        let parts: Vec<String> = obligations
            .iter()
            .map(|o| format!("{} {}", text(&o["kind"]), text(o.get("id").or(o.get("counter")).unwrap_or(&Json::Null))))
            .collect();
        out.push(format!("obligations carried out: {}", parts.join(", ")));
    }
    if let Some(ignored) = b["ignored"].as_array().filter(|i| !i.is_empty()) {
        out.push(format!("ignored from the caller: {}", ignored.iter().map(text).collect::<Vec<_>>().join(", ")));
    }
    out.push(format!("policy: {}", text(&b["policy"])));
    Some(out)
}

/// The chain receipt of an operation: every decision logged under `operation_id` — the agents, the tools used, the
/// fact versions and stops in force, the approvals and their approvers, the external effects (allowed calls with side
/// effects, i.e. those that recorded the operation), and the outcome of each call.
pub fn receipt(entries: &[LogEntry], operation: &str) -> serde_json::Value {
    use serde_json::{json, Value as Json};
    let mut agents = std::collections::BTreeSet::new();
    let mut tools = std::collections::BTreeSet::new();
    let mut policies = std::collections::BTreeSet::new();
    let mut approvals = Vec::new();
    let mut effects = Vec::new();
    let mut decisions = Vec::new();
    let mut facts = Json::Null;
    let mut stops = Json::Null;
    for entry in entries.iter().filter(|e| e.kind == "decision") {
        let b = body(entry);
        let r = &b["request"];
        if r["context"]["operation_id"] != operation {
            continue;
        }
        let d = &b["decision"];
        agents.insert(r["subject"]["id"].as_str().unwrap_or("").to_string());
        let tool = r["action"]["name"].as_str().unwrap_or("").to_string();
        tools.insert(tool.clone());
        policies.insert(b["policy"].as_str().unwrap_or("").to_string());
        facts = r["context"]["facts"].clone();
        stops = r["context"]["stops"].clone();
        approvals.extend(b["approvals_used"].as_array().cloned().unwrap_or_default());
        let recorded = d["obligations"].as_array().into_iter().flatten().any(|o| o["kind"] == "record-operation");
        if recorded {
            effects.push(json!({"tool": tool, "arguments": r["action"]["arguments"], "target": r["resource"]["id"],
                                "decision": b["id"]}));
        }
        decisions.push(json!({
            "id": b["id"], "time": remit_lang::value::format_timestamp(entry.time), "agent": r["subject"]["id"],
            "tool": tool, "decision": d["decision"], "reasons": d["reasons"], "mandate_chain": d["mandate_chain"],
            "log_entry": entry.seq, "hash": entry.hash,
        }));
    }
    let outcome = decisions.last().map(|d| d["decision"].clone()).unwrap_or(Json::Null);
    json!({
        "operation": operation,
        "agents": agents,
        "tools": tools,
        "fact_versions": facts,
        "approvals": approvals,
        "external_effects": effects,
        "operation_ids": [operation],
        "stops": stops,
        "policies": policies,
        "decisions": decisions,
        "outcome": outcome,
    })
}
