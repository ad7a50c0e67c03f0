//! The decision log as hash chains: every entry hashes its predecessor's hash with its own content, so a changed,
//! deleted or reordered entry breaks the chain at that point ([`verify`]).
//!
//! The log is one chain per writer (docs/scaling.md "The log with several writers"): the one-writer log (SQLite) is
//! the chain of writer `""`, from [`GENESIS`]; each gateway sharing a PostgreSQL store writes a chain of its own,
//! from its own genesis ([`writer_genesis`]), and seals it every second with the heads of the others' chains
//! ([`SEAL`] entries). Seals cross-link the chains: an entry another writer sealed cannot be changed, deleted or cut
//! away, nor its whole chain dropped or its hashes computed again, without [`verify`] finding it.
//!
//! The chains alone prove only that the log is consistent with itself: whoever can write the store can change an
//! entry and compute the hashes after it again, or cut the tail. So the gateway signs its chain's head (sequence
//! number, hash, time) with its own key ([`SignedHead`], [`HeadSigner`]), and a head kept elsewhere is checked
//! against the chain ([`check_head`]): the entries up to it are then the ones the gateway wrote.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use crate::clock::Clock;
/// The signed head, kept by the store and checked here.
pub use crate::head::SignedHead;
/// Hex as the log writes hashes (the MCP proxy's call keys use it too).
pub use crate::keys::hex;
use crate::keys::{public_key_text, SigningKey};
use crate::store::{LogEntry, Store, StoreError};

/// The `prev` of the first entry of the one-writer log (writer `""`).
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The kind of a seal entry: its body is `{"heads": [{"writer", "seq", "hash"}…]}`, the head of every other writer's
/// chain as the sealing transaction read it committed (writers with no entry yet left out).
pub const SEAL: &str = "seal";

/// A chain's head as a seal names it: the writer, its entry's sequence number, its hash.
pub type ChainHead = (String, u64, String);

/// The `prev` of a writer's first entry: [`GENESIS`] for the one-writer log (`""`), else
/// `sha256:` + hex of SHA-256 over `remit writer\n` + the writer's id.
pub fn writer_genesis(writer: &str) -> String {
    if writer.is_empty() {
        return GENESIS.to_string();
    }
    format!("sha256:{}", hex(&Sha256::digest(format!("remit writer\n{writer}").as_bytes())))
}

/// The hash of an entry of the one-writer log: [`chain_hash`] with the writer `""`.
pub fn entry_hash(prev: &str, seq: u64, time: i64, kind: &str, body: &str) -> String {
    chain_hash(prev, "", seq, time, kind, body)
}

/// `sha256:` + hex of SHA-256 over `prev \n writer \n seq \n time \n kind \n body`, with `\n writer` left out when the
/// writer is `""` (so the one-writer log's hashes are what they were before there were several writers).
pub fn chain_hash(prev: &str, writer: &str, seq: u64, time: i64, kind: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    if !writer.is_empty() {
        hasher.update(format!("\n{writer}").as_bytes());
    }
    hasher.update(format!("\n{seq}\n{time}\n{kind}\n").as_bytes());
    hasher.update(body.as_bytes());
    format!("sha256:{}", hex(&hasher.finalize()))
}

/// The hash `entry` should have, from its content.
pub fn hash_of(entry: &LogEntry) -> String {
    chain_hash(&entry.prev, &entry.writer, entry.seq, entry.time, &entry.kind, &entry.body)
}

/// How an entry is named in messages: `entry 7`, or `entry 7 of writer gw-…`.
pub fn entry_name(writer: &str, seq: u64) -> String {
    if writer.is_empty() {
        format!("entry {seq}")
    } else {
        format!("entry {seq} of writer `{writer}`")
    }
}

/// Where the log broke: the entry (`writer`'s `seq`) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub writer: String,
    pub seq: u64,
    pub problem: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", entry_name(&self.writer, self.seq), self.problem)
    }
}

/// What a log that holds is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    /// Every entry, of every chain.
    pub entries: u64,
    /// Each writer's chain: its last entry's sequence number and hash (sorted by writer).
    pub chains: BTreeMap<String, (u64, String)>,
    /// The seal entries, and the heads they named (every one found in its chain with its hash).
    pub seals: u64,
    pub sealed_heads: u64,
}

/// Checks a whole log given in the order it is stored in (one-writer log: by `seq`; several writers: by `gseq`):
/// each writer's chain has sequence numbers 1, 2, 3… without gaps, each `prev` the hash of the chain's entry before
/// (the first: the writer's genesis), each `hash` recomputed from the content; and every head a seal names is in its
/// writer's chain with the hash recorded. The number of entries when it holds.
pub fn verify(entries: impl IntoIterator<Item = LogEntry>) -> Result<u64, Broken> {
    verify_chains(entries).map(|verified| verified.entries)
}

/// [`verify`], saying what the log is made of.
pub fn verify_chains(entries: impl IntoIterator<Item = LogEntry>) -> Result<Verified, Broken> {
    struct Chain {
        hashes: Vec<String>,
    }
    let mut chains: HashMap<String, Chain> = HashMap::new();
    // (sealing writer, its seal's seq, the heads named).
    let mut seals: Vec<(String, u64, Vec<ChainHead>)> = Vec::new();
    let mut count = 0u64;
    for entry in entries {
        count += 1;
        let chain = chains.entry(entry.writer.clone()).or_insert_with(|| Chain { hashes: Vec::new() });
        let expected = chain.hashes.len() as u64 + 1;
        let broken = |problem: String| Err(Broken { writer: entry.writer.clone(), seq: entry.seq, problem });
        if entry.seq != expected {
            return broken(format!(
                "{} comes where entry {expected} should: an entry was deleted or moved",
                entry_name(&entry.writer, entry.seq)
            ));
        }
        let prev = chain.hashes.last().cloned().unwrap_or_else(|| writer_genesis(&entry.writer));
        if entry.prev != prev {
            let what = if expected == 1 { "its writer's genesis" } else { "the hash of the entry before it" };
            return broken(format!("its `prev` is not {what}"));
        }
        if hash_of(&entry) != entry.hash {
            return broken("its content does not match its hash: the entry was changed".into());
        }
        if entry.kind == SEAL && !entry.writer.is_empty() {
            let Some(heads) = seal_heads(&entry.body) else {
                return broken("it is a seal whose body does not name heads".into());
            };
            seals.push((entry.writer.clone(), entry.seq, heads));
        }
        chain.hashes.push(entry.hash);
    }
    let mut sealed_heads = 0u64;
    for (sealer, at, heads) in &seals {
        let by = format!("the seal at {}", entry_name(sealer, *at));
        for (writer, seq, hash) in heads {
            sealed_heads += 1;
            let broken = |problem: String| Err(Broken { writer: writer.clone(), seq: *seq, problem });
            let Some(chain) = chains.get(writer) else {
                return broken(format!(
                    "{by} names it, but writer `{writer}` has no entry in the log: its chain was dropped"
                ));
            };
            match chain.hashes.get((*seq as usize).wrapping_sub(1)) {
                None => {
                    return broken(format!(
                        "{by} names it, but `{writer}`'s chain ends at entry {}: entries were cut from its end",
                        chain.hashes.len()
                    ))
                }
                Some(found) if found != hash => {
                    return broken(format!(
                        "it has the hash {found}, {by} recorded {hash}: `{writer}`'s chain was rewritten at or before \
                         it (its hashes computed again)"
                    ))
                }
                Some(_) => {}
            }
        }
    }
    let chains = chains
        .into_iter()
        .map(|(writer, chain)| {
            let seq = chain.hashes.len() as u64;
            let hash = chain.hashes.last().cloned().unwrap_or_else(|| writer_genesis(&writer));
            (writer, (seq, hash))
        })
        .collect();
    Ok(Verified { entries: count, chains, seals: seals.len() as u64, sealed_heads })
}

/// The heads a seal's body names; `None` when it names none in the expected shape.
pub fn seal_heads(body: &str) -> Option<Vec<ChainHead>> {
    let value = remit_lang::json::parse_stored(body).ok()?;
    let mut heads = Vec::new();
    for head in value.get("heads")?.as_array()? {
        let writer = head.get("writer")?.as_str()?.to_string();
        let seq = head.get("seq")?.as_u64()?;
        let hash = head.get("hash")?.as_str()?.to_string();
        heads.push((writer, seq, hash));
    }
    Some(heads)
}

/// A seal's body naming `heads` (writer, seq, hash).
pub fn seal_body(heads: &[ChainHead]) -> String {
    let heads: Vec<serde_json::Value> = heads
        .iter()
        .map(|(writer, seq, hash)| serde_json::json!({"writer": writer, "seq": seq, "hash": hash}))
        .collect();
    serde_json::json!({ "heads": heads }).to_string()
}

/// Checks that a head is in a log whose chains hold ([`verify`]): its entry is in its writer's chain, with its hash.
/// A chain cut before the head's entry, or changed at or before it (even with every hash after the change computed
/// again), fails. Entries after the head are not covered by it.
pub fn check_head(entries: &[LogEntry], head: &SignedHead) -> Result<(), String> {
    let name = entry_name(&head.writer, head.seq);
    if head.seq == 0 {
        let genesis = writer_genesis(&head.writer);
        return if head.hash == genesis { Ok(()) } else { Err("a head of entry 0 has the genesis hash".into()) };
    }
    let chain = entries.iter().filter(|e| e.writer == head.writer);
    let (mut last, mut found) = (0, None);
    for entry in chain {
        last = entry.seq;
        if entry.seq == head.seq {
            found = Some(entry);
            break;
        }
    }
    let Some(entry) = found else {
        let chain = if head.writer.is_empty() { "the log".to_string() } else { format!("`{}`'s chain", head.writer) };
        return Err(format!("{chain} ends at entry {last}, before the head's {name}: entries were cut from its end"));
    };
    if entry.hash != head.hash {
        return Err(format!(
            "{name} has the hash {}, the head signed {}: the log was rewritten at or before {name}",
            entry.hash, head.hash
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
        let head = SignedHead::sign_chain(&self.key, tx.writer(), seq, &hash, self.clock.now());
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

/// Seals `store`'s chain every `interval` on a thread of its own ([`Store::seal`]: when the gateway wrote since its
/// last seal), until the store is dropped. A seal that fails is tried again at the next interval.
pub fn seal_every(store: &std::sync::Arc<dyn Store>, interval: std::time::Duration) {
    let store = std::sync::Arc::downgrade(store);
    std::thread::Builder::new()
        .name("remit-log-seal".into())
        .spawn(move || loop {
            std::thread::sleep(interval);
            let Some(store) = store.upgrade() else { return };
            if let Err(e) = store.seal() {
                eprintln!("the log's chain was not sealed: {e}");
            }
        })
        .expect("a thread starts");
}

/// Every entry of a store's log, every writer's, in the order of `gseq` (the one-writer log: of `seq`).
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
        format!(
            "at {} (log {}, {})",
            remit_lang::value::format_timestamp(entry.time),
            entry_name(&entry.writer, entry.seq),
            entry.hash
        ),
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
    out.extend(grants_used(entries, &b));
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

/// The instances a decision was made under (docs/grants-design.md): each instance of the request's `context.grants`
/// that its mandate chain names (`TEMPLATE/ID@VERSION`), with who granted that version and when, from the version's
/// `grant` or `change` entry, and whether it was revoked since.
fn grants_used(entries: &[LogEntry], b: &serde_json::Value) -> Vec<String> {
    let chain: Vec<&str> =
        b["decision"]["mandate_chain"].as_array().into_iter().flatten().filter_map(|m| m.as_str()).collect();
    let mut out = Vec::new();
    for g in b["request"]["context"]["grants"].as_array().into_iter().flatten() {
        let (Some(id), Some(version), Some(template)) =
            (g["id"].as_str(), g["version"].as_u64(), g["template"].as_str())
        else {
            continue;
        };
        let name = format!("{template}/{id}@{version}");
        if !chain.contains(&name.as_str()) {
            continue;
        }
        let granted = entries.iter().find(|e| {
            (e.kind == "grant" || e.kind == "change") && body(e)["id"] == id && body(e)["version"] == version
        });
        let by = granted.map_or_else(
            || "granted by an entry not in this log".to_string(),
            |e| {
                format!(
                    "{} by {} at {} (log {}) with {}",
                    if e.kind == "grant" { "granted" } else { "changed" },
                    body(e)["by"].as_str().unwrap_or("?"),
                    remit_lang::value::format_timestamp(e.time),
                    entry_name(&e.writer, e.seq),
                    g["params"]
                )
            },
        );
        let principal = g["principal"].as_str().unwrap_or("?");
        out.push(format!("instance: {name} for {principal}, {by}"));
    }
    out
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
        let mut decision = json!({
            "id": b["id"], "time": remit_lang::value::format_timestamp(entry.time), "agent": r["subject"]["id"],
            "tool": tool, "decision": d["decision"], "reasons": d["reasons"], "mandate_chain": d["mandate_chain"],
            "log_entry": entry.seq, "hash": entry.hash,
        });
        let instances = grants_used(entries, &b);
        if !instances.is_empty() {
            decision["instances"] = instances.into();
        }
        if !entry.writer.is_empty() {
            decision["writer"] = entry.writer.clone().into();
        }
        decisions.push(decision);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, kind: &str, body: serde_json::Value) -> LogEntry {
        LogEntry {
            seq,
            writer: String::new(),
            gseq: seq,
            time: 1_796_400_000 + seq as i64,
            kind: kind.into(),
            body: body.to_string(),
            prev: String::new(),
            hash: String::new(),
        }
    }

    /// `why` names who granted the version of each instance the chain names, and no other instance filled.
    #[test]
    fn why_names_who_granted_the_version_decided_under() {
        let grant = |v: u64| {
            serde_json::json!({"id": "g-1", "version": v, "template": "shop", "principal": "user:a",
                                                "params": {"cap": format!("{v}0 USD")}})
        };
        let decision = serde_json::json!({
            "id": "dec-1",
            "request": {"subject": {"id": "agent:s"}, "action": {"name": "pay"},
                        "context": {"operation_id": "op-1", "grants": [
                grant(2), {"id": "g-2", "version": 1, "template": "shop", "principal": "user:b", "params": {}}]}},
            "decision": {"decision": "allow", "reasons": [], "mandate_chain": ["ceiling", "shop/g-1@2"]},
        });
        let mut first = grant(1);
        first["by"] = "user:a".into();
        let mut second = grant(2);
        second["by"] = "ops:c".into();
        let entries = vec![
            entry(1, "grant", first),
            entry(2, "change", second),
            entry(3, "grant", serde_json::json!({"id": "g-2", "version": 1, "by": "user:b"})),
            entry(4, "decision", decision),
        ];
        let lines = why(&entries, "dec-1").unwrap();
        let instances: Vec<&String> = lines.iter().filter(|l| l.starts_with("instance:")).collect();
        assert_eq!(instances.len(), 1, "{lines:#?}");
        assert!(instances[0].starts_with("instance: shop/g-1@2 for user:a, changed by ops:c at "), "{lines:#?}");
        assert!(instances[0].contains("(log entry 2)"), "{lines:#?}");
        let receipt = receipt(&entries, "op-1");
        assert_eq!(receipt["decisions"][0]["instances"][0], *instances[0], "{receipt}");
    }
}
