//! The gateway's state behind one trait, so that a PostgreSQL store for several replicas can sit beside the
//! embedded SQLite one ([`super::sqlite::SqliteStore`]).
//!
//! Everything happens inside a [`Tx`]: a write transaction that sees a consistent state and either commits all of
//! its writes or none. The core reads the state a decision needs, decides, carries out the obligations and appends
//! the log entry in one `Tx`, which is what makes the obligations happen exactly once and atomically with the log.

use std::collections::HashMap;

use remit_lang::syntax::ast::FactVersion;
use serde::{Deserialize, Serialize};

/// A store that cannot be read or written (unavailable, full, corrupt). The core turns it into a deny with the
/// reason `gateway.store-unavailable`, never an allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "store: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// What a conflict's message starts with.
    const CONFLICT: &'static str = "conflict: ";

    /// A transaction that lost to a concurrent one (a serialization failure, a deadlock, a unique key taken
    /// meanwhile): running it again may succeed, and the core does so a bounded number of times before it denies.
    pub fn conflict(message: impl std::fmt::Display) -> StoreError {
        StoreError(format!("{}{message}", StoreError::CONFLICT))
    }

    pub fn is_conflict(&self) -> bool {
        self.0.starts_with(StoreError::CONFLICT)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A stop with an id and a level (docs/gateway.md "Stops"), on a mandate or on a principal; filled into a request's
/// `context.stops` as the object docs/requests.md describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRecord {
    pub id: String,
    /// `pause`, `cancel`, `revoke` or `quarantine`.
    pub level: String,
    /// Exactly one of the two is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mandate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

impl StopRecord {
    /// The levels, weakest first.
    pub const LEVELS: [&'static str; 4] = ["pause", "cancel", "revoke", "quarantine"];

    /// The item of `context.stops`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain data serializes")
    }
}

/// What every decision reads from the store besides approvals and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionState {
    /// The mandates stopped without an id (sorted).
    pub stops: Vec<String>,
    /// The stops with ids (sorted by id).
    pub records: Vec<StopRecord>,
    /// The current version of every published fact (sorted by name).
    pub facts: Vec<(String, FactVersion)>,
}

/// An approval minted by the gateway (on an access request's approval) and kept in the store; presented to the
/// module in the shape of docs/requests.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredApproval {
    pub id: String,
    pub kind: String,
    pub mandate: String,
    /// Unix seconds.
    pub issued_at: i64,
    pub expires_at: i64,
    pub tool: Option<String>,
    pub target: Option<String>,
    pub digest: Option<String>,
    pub manifest: Option<String>,
    pub single_use: bool,
    pub consumed: bool,
    /// The identity of the person who approved.
    pub approver: String,
    /// The access request it answered.
    pub access_request: Option<String>,
    /// The decision that consumed it.
    pub consumed_by: Option<String>,
    /// When it was consumed (Unix seconds); `None` while not consumed, and for one consumed by a gateway before
    /// schema version 4.
    #[serde(default)]
    pub consumed_at: Option<i64>,
    /// The agent whose call it was minted for (the access request's `subject.id`): it is presented only to that
    /// agent's calls, so a co-holder of the mandate cannot use it (docs/gateway.md). `None` only for an approval
    /// with no access request, which no gateway mints.
    #[serde(default)]
    pub agent: Option<String>,
}

/// An earlier approval of the same call, already used: what a new access request for that call tells its
/// approver, so that a second payment is not approved blindly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierUse {
    /// The approval, and the access request it answered.
    pub approval: String,
    pub access_request: String,
    pub approved_by: String,
    /// The decision that used it, and when (Unix seconds; `None` when a gateway before schema version 4 consumed
    /// it).
    pub consumed_by: Option<String>,
    pub consumed_at: Option<i64>,
}

/// How many earlier uses an access request records (the newest).
pub const MAX_EARLIER: usize = 10;

/// The longest `arguments` an access request shows in a list, in characters of its JSON text; longer ones are cut
/// there (see [`AccessRequest::arguments_truncated`]) and shown whole by the request's own endpoint.
pub const LIST_ARGUMENTS_CHARS: usize = 4096;

/// Where a page of access requests starts: after the request created at `created_at` with id `id` (newest first,
/// then by id), written as an opaque token ([`Cursor::token`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: i64,
    pub id: String,
}

impl Cursor {
    pub fn token(&self) -> String {
        format!("c{}.{}", self.created_at, self.id)
    }

    /// `None` for a token [`Cursor::token`] did not write.
    pub fn parse(token: &str) -> Option<Cursor> {
        let (created_at, id) = token.strip_prefix('c')?.split_once('.')?;
        Some(Cursor { created_at: created_at.parse().ok()?, id: id.to_string() }).filter(|c| !c.id.is_empty())
    }

    pub fn of(request: &AccessRequest) -> Cursor {
        Cursor { created_at: request.created_at, id: request.id.clone() }
    }

    /// Whether `request` comes after the cursor in the list's order.
    pub fn before(&self, request: &AccessRequest) -> bool {
        request.created_at < self.created_at || (request.created_at == self.created_at && request.id > self.id)
    }
}

/// One page of access requests and the cursor of the next (`None`: this was the last).
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub requests: Vec<AccessRequest>,
    pub next: Option<Cursor>,
}

/// Cuts an access request's `arguments` for a list: a JSON text longer than [`LIST_ARGUMENTS_CHARS`] becomes its
/// first that many characters, as a string, with `arguments_truncated` its whole length.
pub fn cut_arguments(request: &mut AccessRequest) {
    let text = request.arguments.to_string();
    let length = text.chars().count();
    if length > LIST_ARGUMENTS_CHARS {
        request.arguments = serde_json::Value::String(text.chars().take(LIST_ARGUMENTS_CHARS).collect());
        request.arguments_truncated = Some(length as u64);
    }
}

/// Where an access request is in its life.
pub const PENDING: &str = "pending";
pub const APPROVED: &str = "approved";
pub const DENIED: &str = "denied";

/// An escalated call waiting for (or having had) the principal's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRequest {
    pub id: String,
    /// `pending`, `approved`, `denied`.
    pub status: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// Who decides: the decision's `escalate_to`.
    pub principal: Option<String>,
    pub agent: String,
    pub credential: Option<String>,
    pub mandate: String,
    pub tool: String,
    pub target: Option<String>,
    pub digest: String,
    pub manifest: Option<String>,
    /// The call's arguments as the principal sees them (masked fields as `"***"`); the digest binds the real ones.
    pub arguments: serde_json::Value,
    /// The decision's `missing_approvals`, as JSON.
    pub missing_approvals: serde_json::Value,
    pub reasons: Vec<String>,
    pub chain: Vec<String>,
    /// The escalated decision.
    pub decision_id: String,
    /// The same call escalated again while pending joins this request instead of making a new one.
    pub key: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<i64>,
    /// The sequence number of the escalated decision's log entry in its writer's chain (what its explanation
    /// re-reads); `None` for a request filed by a store of schema version 1.
    #[serde(default)]
    pub log_seq: Option<u64>,
    /// The writer whose chain holds that entry ([`LogEntry::writer`]); `None` for the one-writer log (SQLite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_writer: Option<String>,
    /// Earlier approvals of the same call (same agent, credential, mandate, tool, target, digest, manifest) that were
    /// used already, newest first, at most [`MAX_EARLIER`]: recorded when the request is filed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<EarlierUse>,
    /// In a list: the length, in characters, of the arguments' JSON text when `arguments` holds only its first
    /// [`LIST_ARGUMENTS_CHARS`] characters (as a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_truncated: Option<u64>,
}

/// One entry of the decision log. The log is one hash chain per writer (docs/scaling.md "The log with several
/// writers"): `hash = sha256(prev ‖ writer ‖ seq ‖ time ‖ kind ‖ body)`, the writer left out when it is empty (see
/// [`super::audit::chain_hash`]). The one-writer log (SQLite) is the chain of writer `""`, hashed as it always was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The entry's number in its writer's chain: 1, 2, 3… without gaps.
    pub seq: u64,
    /// The writer whose chain the entry is in: `""` for the one-writer log; `gw-…` for a gateway sharing a
    /// PostgreSQL store.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub writer: String,
    /// The entry's place in the order of the whole log, across writers (what [`Tx::log_entries`] reads by): taken
    /// when the entry is written, so an entry written after another committed comes after it. Not hashed: an order,
    /// with gaps, not a chain. For the one-writer log, `seq`.
    #[serde(default)]
    pub gseq: u64,
    pub time: i64,
    /// `decision`, `approval`, `stop`, `fact`, `policy` (a bundle revision taken: `bundle::admit`), `data` (a change of
    /// the data sets: `core::data`), `grant`, `change`, `revoke` (an instance of a template: `core::grants`); `outcome` and
    /// `refused` from `remit mcp-proxy`.
    pub kind: String,
    /// JSON.
    pub body: String,
    pub prev: String,
    pub hash: String,
}

/// One recorded operation id (the `record-operation` obligation of an allowed side-effecting call).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationRecord {
    pub operation: String,
    pub decision_id: String,
    pub tool: String,
    pub time: i64,
}

/// Where a row of the gateway's data sets came from (docs/gateway.md, "Data sets"): the admin API and CLI
/// ([`ORIGIN_ADMIN`]: single changes and bulk loads), or the data files of the signed bundle in force
/// ([`ORIGIN_BUNDLE`]: replaced whole when another bundle's data is installed). Reads see both.
pub const ORIGIN_ADMIN: &str = "admin";
pub const ORIGIN_BUNDLE: &str = "bundle";

/// The relation whose tuples are the calendars' holidays: `holiday(CALENDAR, "YYYY-MM-DD")`.
pub const HOLIDAY_RELATION: &str = "holiday";

/// The data sets' own state: a version that every change of the data moves on (shown by `GET /admin/v1/state`,
/// recorded in every `data` entry of the log), and the digest of the bundle data installed, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataState {
    pub version: u64,
    /// `sha256:` over the installed bundle's data files (`bundle::Manifest::data_digest`); `None` when no bundle
    /// data is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
}

/// A signed bundle published in the store (`remit bundle publish`), for every gateway that serves the store's
/// bundle (`remit serve --bundle-from-store`) to take: its bytes as published, and what the publisher read of its
/// manifest (unverified: each gateway verifies the bytes with its own key, `bundle::take_published`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedBundle {
    /// 1, 2, 3… in the order of publication: a gateway takes the published bundle with the highest id.
    pub id: u64,
    /// The manifest's revision and policy as published.
    pub revision: u64,
    pub policy: String,
    /// `sha256:` of `bytes`.
    pub sha256: String,
    pub published_by: String,
    pub published_at: i64,
    pub bytes: Vec<u8>,
}

/// One version of a granted instance of a template (docs/grants-design.md, "Grants at run time"): the table
/// `grants` keeps every version of an instance, the current one marked, so that the history stays readable and a
/// decision reads only current, unrevoked rows (by the holder, on an index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRecord {
    /// `g-` + 16 hex digits, made by the gateway.
    pub id: String,
    /// 1 for the grant, one more for each change.
    pub version: u64,
    pub template: String,
    pub principal: String,
    pub holder: String,
    /// The parameters' values, in the JSON encoding tool arguments of their types have (docs/requests.md).
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The identity that granted (or changed) this version.
    pub granted_by: String,
    /// When this version was granted (Unix seconds, the store's clock where it has one).
    pub granted_at: i64,
    /// When the instance was revoked (on its current version); `None` while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<i64>,
    /// The instance this one was sub-delegated from (`TEMPLATE/ID`), for an instance of a template under a template;
    /// `None` for an instance of a template under a mandate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl GrantRecord {
    /// The item of a request's `context.grants`: `{id, version, template, principal, holder, params, granted}`,
    /// and `parent` for an instance sub-delegated from another.
    pub fn instance_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "id": self.id, "version": self.version, "template": self.template, "principal": self.principal,
            "holder": self.holder, "params": self.params,
            "granted": remit_lang::value::format_timestamp(self.granted_at),
        });
        if let Some(parent) = &self.parent {
            json["parent"] = parent.clone().into();
        }
        json
    }

    /// The instance as the engines read it (`remit_lang::eval::grants::GrantInstance`).
    pub fn instance(&self) -> remit_lang::eval::grants::GrantInstance {
        remit_lang::eval::grants::GrantInstance {
            id: self.id.clone(),
            version: self.version,
            template: self.template.clone(),
            principal: self.principal.clone(),
            holder: self.holder.clone(),
            params: self.params.clone(),
            granted: remit_lang::value::format_timestamp(self.granted_at),
            parent: self.parent.clone(),
        }
    }

    /// How a request names this instance: `TEMPLATE/ID`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.template, self.id)
    }
}

/// What a store that keeps no grants answers when asked for them: an error, never "none" — a decision of a policy
/// with templates must not be taken as if no instance had been granted.
fn no_grants<T>() -> StoreResult<T> {
    Err(StoreError("this store keeps no grants".into()))
}

/// What a store that keeps no data sets answers when asked for them: an error, never "none" — a relation that
/// does not hold can allow (`unless member_of(…)`), so a store that cannot tell must make the decision deny.
fn no_data<T>() -> StoreResult<T> {
    Err(StoreError("this store keeps no data sets".into()))
}

/// A write transaction. Dropping it without [`Tx::commit`] rolls everything back.
pub trait Tx {
    /// The time by the store's clock when the transaction began (Unix seconds), for a store that several gateways
    /// share: they then decide by one clock. `None`: the gateway's clock decides.
    fn now(&self) -> Option<i64> {
        None
    }
    /// The mandates with an active stop.
    fn stops(&mut self) -> StoreResult<Vec<String>>;
    /// The current version of every published fact.
    fn facts(&mut self) -> StoreResult<Vec<(String, FactVersion)>>;
    /// [`Tx::stops`] and [`Tx::facts`] together (what every decision reads: a store may read both at once).
    #[allow(clippy::type_complexity)]
    fn stops_and_facts(&mut self) -> StoreResult<(Vec<String>, Vec<(String, FactVersion)>)> {
        Ok((self.stops()?, self.facts()?))
    }
    /// The stops with ids, sorted by id. A store that keeps none (it refuses [`Tx::set_stop_record`]) has none.
    fn stop_records(&mut self) -> StoreResult<Vec<StopRecord>> {
        Ok(Vec::new())
    }
    /// The stops (both kinds) and the facts together (what every decision reads: a store may read them at once).
    fn decision_state(&mut self) -> StoreResult<DecisionState> {
        let (stops, facts) = self.stops_and_facts()?;
        Ok(DecisionState { stops, records: self.stop_records()?, facts })
    }
    /// What one decision reads: the live approvals of `mandates` ([`Tx::live_approvals`]), the state
    /// ([`Tx::decision_state`]) and the counters `(counter, window)` ([`Tx::counter`], in the order asked). A store may
    /// read them at once (PostgreSQL: one round trip), and must lock the counters in a write transaction.
    #[allow(clippy::type_complexity)]
    fn read_for_decision(
        &mut self,
        mandates: &[String],
        counters: &[(String, String)],
        now: i64,
    ) -> StoreResult<(Vec<StoredApproval>, DecisionState, Vec<u64>)> {
        let approvals = self.live_approvals(mandates, now)?;
        let state = self.decision_state()?;
        let counters = counters.iter().map(|(counter, window)| self.counter(counter, window));
        Ok((approvals, state, counters.collect::<StoreResult<_>>()?))
    }
    /// Reads ahead what a batch's decisions will read ([`Tx::read_for_decision`] of each, at `now` or later): the live
    /// approvals of `mandates`, the counters (in a write transaction of a store that several gateways share, locked
    /// here, all at once, in sorted order) and the state; a store may then answer their reads without a round trip,
    /// keeping what it read ahead up to date with the transaction's own writes. Reading nothing ahead is correct.
    fn prefetch(&mut self, mandates: &[String], counters: &[(String, String)], now: i64) -> StoreResult<()> {
        let _ = (mandates, counters, now);
        Ok(())
    }
    /// The approvals not consumed and not expired at `now`, issued under one of `mandates`.
    fn live_approvals(&mut self, mandates: &[String], now: i64) -> StoreResult<Vec<StoredApproval>>;
    fn approvals_of_request(&mut self, access_request: &str) -> StoreResult<Vec<StoredApproval>>;
    fn approval(&mut self, id: &str) -> StoreResult<Option<StoredApproval>>;
    /// The count of `counter` in its window `window` (e.g. `operation:op-1`, `hour:2026-11-30T12`, `total`); in a
    /// write transaction of a store that several gateways share, read under a lock held until the end of the
    /// transaction.
    fn counter(&mut self, counter: &str, window: &str) -> StoreResult<u64>;
    fn access_request(&mut self, id: &str) -> StoreResult<Option<AccessRequest>>;
    fn pending_access_request(&mut self, key: &str, now: i64) -> StoreResult<Option<AccessRequest>>;
    /// Access requests, newest first; only those with `status` when given.
    fn access_requests(&mut self, status: Option<&str>) -> StoreResult<Vec<AccessRequest>>;
    /// One page of the access requests that `keep` admits (filtered before the page is cut, so that no number of
    /// requests `keep` refuses hides one it admits), newest first, after `after`, at most `limit`, each with its
    /// arguments cut for a list ([`cut_arguments`]); only those with `status` when given.
    fn access_request_page(
        &mut self,
        status: Option<&str>,
        after: Option<&Cursor>,
        limit: usize,
        keep: &mut dyn FnMut(&AccessRequest) -> bool,
    ) -> StoreResult<Page>;
    /// The approvals minted for earlier access requests with `key` and used already, newest first, at most
    /// [`MAX_EARLIER`].
    fn earlier_uses(&mut self, key: &str) -> StoreResult<Vec<EarlierUse>>;
    fn operations(&mut self, operation: &str) -> StoreResult<Vec<OperationRecord>>;
    /// The writer whose chain this transaction appends to ([`LogEntry::writer`]): `""` for the one-writer log.
    fn writer(&self) -> &str {
        ""
    }
    /// The last entry's sequence number and hash in this transaction's writer's chain (`0` and the chain's genesis
    /// hash for an empty chain).
    fn log_head(&mut self) -> StoreResult<(u64, String)>;
    /// Entries with `gseq >= from`, in the order of `gseq` (the whole log, every writer's chain), at most `limit`.
    fn log_entries(&mut self, from: u64, limit: usize) -> StoreResult<Vec<LogEntry>>;
    /// The entry `seq` of `writer`'s chain.
    fn log_entry(&mut self, writer: &str, seq: u64) -> StoreResult<Option<LogEntry>> {
        if !writer.is_empty() {
            return Ok(None);
        }
        Ok(self.log_entries(seq, 1)?.into_iter().next().filter(|e| e.seq == seq && e.writer.is_empty()))
    }

    /// Marks a live approval consumed by `decision` at `at`; `false` when it is unknown or already consumed.
    fn consume_approval(&mut self, id: &str, decision: &str, at: i64) -> StoreResult<bool>;
    fn increment_counter(&mut self, counter: &str, window: &str) -> StoreResult<u64>;
    /// Counts one more in `counter`'s window, like [`Tx::increment_counter`] but without reading the new value, so
    /// that a store may send it with its next statement (an error then surfaces there, at the latest at the commit,
    /// which then fails).
    fn count(&mut self, counter: &str, window: &str) -> StoreResult<()> {
        self.increment_counter(counter, window).map(|_| ())
    }
    fn record_operation(&mut self, record: &OperationRecord) -> StoreResult<()>;
    fn insert_approval(&mut self, approval: &StoredApproval) -> StoreResult<()>;
    fn insert_access_request(&mut self, request: &AccessRequest) -> StoreResult<()>;
    fn decide_access_request(&mut self, id: &str, status: &str, by: &str, at: i64) -> StoreResult<()>;
    fn set_stop(&mut self, mandate: &str, active: bool) -> StoreResult<()>;
    /// Sets the stop with `stop.id` (replacing one with the same id). A store that cannot keep it refuses, so a stop
    /// is never acknowledged and then ignored.
    fn set_stop_record(&mut self, stop: &StopRecord) -> StoreResult<()> {
        let _ = stop;
        Err(StoreError("this store keeps no stops with ids".into()))
    }
    /// Clears the stop with `id`; `false` when there was none.
    fn clear_stop_record(&mut self, id: &str) -> StoreResult<bool> {
        let _ = id;
        Ok(false)
    }
    fn set_fact(&mut self, name: &str, version: &FactVersion) -> StoreResult<()>;
    /// Keeps `carried` (what an allowed call's obligations carried out, as JSON) under `key` until `expires_at`, for
    /// a later round of the call (`Gateway::keep_round`); drops the rounds expired at `now`. A store that cannot
    /// keep it refuses (then the next round is decided as a new call).
    fn keep_round(&mut self, key: &str, carried: &str, expires_at: i64, now: i64) -> StoreResult<()> {
        let _ = (key, carried, expires_at, now);
        Err(StoreError("this store keeps no rounds".into()))
    }
    /// Takes the round kept under `key` (removing it) unless it expired at `now`.
    fn take_round(&mut self, key: &str, now: i64) -> StoreResult<Option<String>> {
        let _ = (key, now);
        Ok(None)
    }
    /// The bundle revision in force and its policy (`bundle::admit`); `None` when no numbered bundle was served.
    fn bundle_revision(&mut self) -> StoreResult<Option<(u64, String)>> {
        Ok(None)
    }
    /// Sets the bundle revision in force. A store that cannot keep it refuses, so a rollback is never let through.
    fn set_bundle_revision(&mut self, revision: u64, policy: &str) -> StoreResult<()> {
        let _ = (revision, policy);
        Err(StoreError("this store keeps no bundle revisions".into()))
    }
    /// Keeps a bundle published for the gateways to take (its id is one more than the last one's); its
    /// [`PublishedBundle::id`] is set by the store and ignored here.
    fn publish_bundle(&mut self, bundle: &PublishedBundle) -> StoreResult<u64> {
        let _ = bundle;
        Err(StoreError("this store keeps no published bundles".into()))
    }
    /// The id of the bundle published last; `None` when none was. What a gateway polls (no bytes read).
    fn published_bundle_id(&mut self) -> StoreResult<Option<u64>> {
        Ok(None)
    }
    /// The bundle published last among those with an id below `below` (all when `None`), with its bytes.
    fn published_bundle(&mut self, below: Option<u64>) -> StoreResult<Option<PublishedBundle>> {
        let _ = below;
        Ok(None)
    }
    /// The log's signed heads, oldest first (none in a store that keeps none).
    fn signed_heads(&mut self) -> StoreResult<Vec<crate::head::SignedHead>> {
        Ok(Vec::new())
    }
    /// Keeps a signed head of the log.
    fn insert_signed_head(&mut self, head: &crate::head::SignedHead) -> StoreResult<()> {
        let _ = head;
        Err(StoreError("this store keeps no signed heads".into()))
    }
    /// The attributes of the entity `(kind, id)` in the data sets: the JSON object kept for it, merged over the
    /// origins (an attribute the admin origin gives wins over the bundle's); `None` when no origin keeps it. Looked
    /// up by its key (indexed: the cost does not grow with the number of entities).
    fn entity(&mut self, kind: &str, id: &str) -> StoreResult<Option<serde_json::Map<String, serde_json::Value>>> {
        let _ = (kind, id);
        no_data()
    }
    /// Whether an origin keeps the tuple `relation(a, b)` (indexed, as [`Tx::entity`]).
    fn holds(&mut self, relation: &str, a: &str, b: &str) -> StoreResult<bool> {
        let _ = (relation, a, b);
        no_data()
    }
    /// The `b` of every tuple `relation(a, b)` any origin keeps, sorted (bytewise), each once: a calendar's
    /// holidays, and what `GET /admin/v1/data/relations/R/A` shows.
    fn related(&mut self, relation: &str, a: &str) -> StoreResult<Vec<String>> {
        let _ = (relation, a);
        no_data()
    }
    /// The ids of every entity of type `kind` any origin keeps, sorted (bytewise), each once: the candidates of an
    /// AuthZEN subject or resource search (`Gateway::search`). Read by the type (the key the entities are indexed
    /// by first: the cost grows with the entities of that type, not with the data sets).
    fn entity_ids(&mut self, kind: &str) -> StoreResult<Vec<String>> {
        let _ = kind;
        no_data()
    }
    /// Keeps `attributes` (a JSON object) as the entity's under `origin`, replacing what that origin kept, or
    /// removes the origin's entity (`None`). Whether the origin kept the entity before.
    fn put_entity(
        &mut self,
        origin: &str,
        kind: &str,
        id: &str,
        attributes: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> StoreResult<bool> {
        let _ = (origin, kind, id, attributes);
        no_data()
    }
    /// Adds (`holds`) or removes the tuple `relation(a, b)` under `origin`. Whether the origin kept it before.
    fn set_tuple(&mut self, origin: &str, relation: &str, a: &str, b: &str, holds: bool) -> StoreResult<bool> {
        let _ = (origin, relation, a, b, holds);
        no_data()
    }
    /// Removes every entity and tuple of `origin` (a bulk load that replaces, a bundle's data installed); how many
    /// rows were removed.
    fn clear_data(&mut self, origin: &str) -> StoreResult<u64> {
        let _ = origin;
        no_data()
    }
    /// The data sets' version and installed bundle data (version 0 and none before any change).
    fn data_state(&mut self) -> StoreResult<DataState> {
        no_data()
    }
    fn set_data_state(&mut self, state: &DataState) -> StoreResult<()> {
        let _ = state;
        no_data()
    }

    /// Keeps `grant` as its instance's current version: the version before it (if any) stays as history. The
    /// caller gives the next version number; a version taken meanwhile (another replica changed the instance) is a
    /// conflict.
    fn put_grant(&mut self, grant: &GrantRecord) -> StoreResult<()> {
        let _ = grant;
        no_grants()
    }
    /// Marks the current version of instance `id` revoked at `at`; `false` when there is none, or it was revoked.
    fn revoke_grant(&mut self, id: &str, at: i64) -> StoreResult<bool> {
        let _ = (id, at);
        no_grants()
    }
    /// The current version of instance `id` (revoked or not); in a write transaction of a store that several
    /// gateways share, locked until the end of the transaction.
    fn grant(&mut self, id: &str) -> StoreResult<Option<GrantRecord>> {
        let _ = id;
        no_grants()
    }
    /// Every version of instance `id`, oldest first.
    fn grant_history(&mut self, id: &str) -> StoreResult<Vec<GrantRecord>> {
        let _ = id;
        no_grants()
    }
    /// The current versions of the instances (revoked ones included) of `principal` and of `holder` when given,
    /// sorted by id.
    fn grants(&mut self, principal: Option<&str>, holder: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
        let _ = (principal, holder);
        no_grants()
    }
    /// The active instances held by `holder` (current, not revoked), sorted by id: what a decision of a policy with
    /// templates reads, in its batch's transaction, on the holder's index.
    fn active_grants(&mut self, holder: &str) -> StoreResult<Vec<GrantRecord>> {
        let _ = holder;
        no_grants()
    }
    /// The active instance `id` (current, not revoked), read without a lock: the parent a decision under an
    /// instance sub-delegated from it reads.
    fn active_grant(&mut self, id: &str) -> StoreResult<Option<GrantRecord>> {
        let _ = id;
        no_grants()
    }
    /// The active instances sub-delegated from `parent` (`TEMPLATE/ID`), sorted by id: what revoking it revokes.
    fn active_children(&mut self, parent: &str) -> StoreResult<Vec<GrantRecord>> {
        let _ = parent;
        no_grants()
    }
    /// Reads ahead, for a write batch of a store that reads ahead ([`Tx::prefetch`]), the active instances of each of
    /// `holders` ([`Tx::active_grants`], all in one read), and the active instances above them (their parents, by
    /// parent id: what [`Tx::active_grant`] then answers): the batch then knows the counters of the instances its
    /// decisions are made under, sub-delegated ones' whole chain included (a template's budget is counted per
    /// instance), and reads and locks them with the rest. `None` when the store reads nothing ahead (the default:
    /// its decisions read their instances themselves).
    fn prefetch_grants(&mut self, holders: &[String]) -> StoreResult<Option<HashMap<String, Vec<GrantRecord>>>> {
        let _ = holders;
        Ok(None)
    }

    /// Appends an entry after the head (computing its hash) and returns it.
    fn append_log(&mut self, time: i64, kind: &str, body: &str) -> StoreResult<LogEntry>;

    /// Opens a savepoint inside the transaction.
    fn savepoint(&mut self) -> StoreResult<()>;
    /// Closes the savepoint: keeps its writes (`keep`) or rolls them back.
    fn release(&mut self, keep: bool) -> StoreResult<()>;

    fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// A place that keeps the gateway's state.
pub trait Store: Send + Sync {
    /// A write transaction; transactions are serializable (one at a time for SQLite; on PostgreSQL, one at a time
    /// per writer, and what two writers both change is locked or conditionally updated).
    fn begin(&self) -> StoreResult<Box<dyn Tx + '_>>;

    /// A transaction for reading: the same consistent view as [`Store::begin`], but it may refuse to write (SQLite:
    /// a deferred transaction, which takes no write lock). Reading is all a decision that changes nothing does.
    fn begin_read(&self) -> StoreResult<Box<dyn Tx + '_>> {
        self.begin()
    }

    /// A number that changes whenever a transaction commits, through this store or any other writer of the same
    /// state (it may also change when nothing did); `None` when the store cannot tell. What decisions read is kept
    /// between them while it stays the same (`gateway::state_cache`): a store that returns `Some` must not let a
    /// change go by without changing it.
    fn version(&self) -> Option<u64> {
        None
    }

    /// Appends a seal to this gateway's chain when it wrote since its last seal: an entry naming the head of every
    /// other writer's chain (docs/scaling.md "The log with several writers"); whether it did. A store with one
    /// writer has nothing to seal.
    fn seal(&self) -> StoreResult<bool> {
        Ok(false)
    }

    /// The policy this gateway serves (its hash), for the store's record of the writers. Kept nowhere by default.
    fn note_policy(&self, policy: &str) {
        let _ = policy;
    }

    /// What the store sent to a database server so far, for `/metrics`; `None` for a store in the process (SQLite:
    /// no round trips).
    fn sent(&self) -> Option<Sent> {
        None
    }
}

/// What a store sent to its database server since it was opened ([`Store::sent`]): statements, round trips (a
/// pipeline is one), transactions begun, and conflicts met (a serialization failure, a deadlock or a unique
/// violation: each makes the core run its batch again, or deny).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub statements: u64,
    pub round_trips: u64,
    pub transactions: u64,
    pub conflicts: u64,
}
