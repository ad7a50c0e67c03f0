//! The gateway's core, which knows nothing of HTTP: it fills the state and the time into each request from its store
//! and clock, decides through the compiled module ([`remit_host`], never the interpreter), and carries out the
//! decision's obligations atomically with appending the log entry, in one store transaction, exactly once.
//!
//! - Caller-supplied `context.approvals`, `counters`, `stops`, `facts` and `now` are removed before the gateway
//!   fills its own; the attempt is recorded in the log entry (`ignored`).
//! - An obligation that cannot be carried out (an approval already consumed, a counter whose window the policy does
//!   not declare) turns the allow into a deny (`gateway.obligation-failed`); a store that fails turns any decision
//!   into a deny (`gateway.store-unavailable`). Neither ever allows.
//! - An escalation becomes an access request in the principal's inbox; approving it mints approvals of the gate's
//!   kind, bound as the policy says, which the retry of the exact call presents (filled by the gateway) and consumes.

use remit_lang::syntax::ast::FactVersion;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

use super::audit::hex;
use super::state_cache::{Needs, Reads, StateCache};
use super::store::*;
use remit_host::{Compiled, Evaluator};
use remit_lang::eval::Decision;
use remit_lang::ir::Program;
use remit_lang::picture::explain::Explanation;
use remit_lang::value::format_timestamp;
use remit_lang::wasm::meta::PolicyMeta;

/// The reason of the deny the gateway answers when its store cannot be read or written.
pub const REASON_STORE: &str = "gateway.store-unavailable";
/// The reason of the deny that replaces an allow whose obligations cannot be carried out.
pub const REASON_OBLIGATION: &str = "gateway.obligation-failed";
/// The reason of the allow a gateway in shadow mode answers in place of a deny or an escalation.
pub const REASON_SHADOW: &str = "gateway.shadow";
/// The reason of the deny of a request that names no mandate when its subject holds several.
pub const REASON_AMBIGUOUS: &str = "mandate.ambiguous";

/// The most decisions one transaction commits together.
const MAX_BATCH: usize = 256;

/// A decision waiting for its batch.
struct Job {
    policy: Arc<Policy>,
    id: String,
    raw: Vec<u8>,
    prepared: Prepared,
    now: i64,
    /// When the job was queued, for the log lag.
    queued: std::time::Instant,
    /// The round of an earlier call this one continues ([`Gateway::decide_continuing`]): its key in the store.
    continues: Option<String>,
    /// Whether the decision's entry may wait in the queue when the decision changes nothing else
    /// ([`Gateway::decide_deferring`]).
    defer: bool,
}

/// A decision's log entry, in the order of its fields in the log.
#[derive(serde::Serialize)]
struct LogBody<'a> {
    id: &'a str,
    request: &'a Json,
    decision: &'a Json,
    policy: &'a str,
    credential: Option<&'a Json>,
    approvals_used: &'a [Json],
    ignored: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    module_decision: Option<&'a Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    obligation_problem: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    access_request: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shadow: Option<ShadowNote>,
}

#[derive(serde::Serialize)]
struct ShadowNote {
    answered: &'static str,
}

/// A log entry waiting to be written: its time, kind and body.
type QueuedEntry = (i64, &'static str, Body);

/// A queued entry's body: its text, or a deferred decision's parts, serialized only when the entry is written (by
/// the writer thread, or in the next transaction that writes), not on the way to the decision's answer.
enum Body {
    Text(String),
    Decision(Box<DecisionParts>),
}

/// What a decision's log entry says ([`LogBody`], owned).
struct DecisionParts {
    id: String,
    request: Json,
    decision: Json,
    policy: String,
    approvals_used: Vec<Json>,
    ignored: Vec<String>,
    module_decision: Option<(Json, String)>,
    access_request: Option<String>,
    shadow: bool,
}

impl DecisionParts {
    /// The entry's text; the request with the masked arguments' values replaced (`mask`).
    fn text(&self, mask: &[String]) -> String {
        let masks = self
            .request
            .pointer("/action/arguments")
            .and_then(Json::as_object)
            .is_some_and(|a| mask.iter().any(|name| a.contains_key(name)));
        // Serialized from borrowed parts (the request is copied only when an argument is masked).
        let masked = masks.then(|| masked(self.request.clone(), mask));
        let body = LogBody {
            id: &self.id,
            request: masked.as_ref().unwrap_or(&self.request),
            decision: &self.decision,
            policy: &self.policy,
            credential: self.request.pointer("/subject/credential/id"),
            approvals_used: &self.approvals_used,
            ignored: &self.ignored,
            module_decision: self.module_decision.as_ref().map(|(module, _)| module),
            obligation_problem: self.module_decision.as_ref().map(|(_, problem)| problem.as_str()),
            access_request: self.access_request.as_deref(),
            shadow: self.shadow.then_some(ShadowNote { answered: "allow" }),
        };
        serde_json::to_string(&body).expect("a log entry serializes")
    }
}

/// `request` with the values of the arguments named in `mask` replaced by `"***"`.
fn masked(mut request: Json, mask: &[String]) -> Json {
    if let Some(arguments) = request.pointer_mut("/action/arguments").and_then(Json::as_object_mut) {
        for name in mask {
            if let Some(value) = arguments.get_mut(name) {
                *value = Json::String("***".into());
            }
        }
    }
    request
}

/// What one decision did inside the batch's transaction.
// Moved once per decision.
#[allow(clippy::large_enum_variant)]
enum Stored {
    /// Its state changes and its entry are written in the transaction.
    Logged(Decided),
    /// It changes nothing but the log, and its entry waits in the queue.
    Deferred(Decided, QueuedEntry),
    /// A deferring job whose decision changes the state: nothing was written; it runs again as a logged one.
    Rerun,
}

/// What a job's caller is handed: its result, or the lead (its job is still queued, and it runs the next batch).
// Moved once per decision; boxing the result would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Handed {
    Done(StoreResult<Decided>),
    Lead,
}

/// Where a batch leader puts a job's result, or hands the lead on.
#[derive(Default)]
struct Slot {
    handed: Mutex<Handing>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct Handing {
    handed: Option<Handed>,
    /// Whether the job's caller waits on `ready`: a leader fills its own slot too, and waking nobody is still a
    /// system call (a futex wake per decision).
    waiting: bool,
}

impl Slot {
    fn hand(&self, handed: Handed) {
        let mut handing = self.handed.lock().unwrap_or_else(|p| p.into_inner());
        handing.handed = Some(handed);
        if handing.waiting {
            self.ready.notify_all();
        }
    }

    fn fill(&self, result: StoreResult<Decided>) {
        self.hand(Handed::Done(result));
    }

    fn wait(&self) -> Handed {
        let mut handing = self.handed.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(handed) = handing.handed.take() {
                return handed;
            }
            handing.waiting = true;
            handing = self.ready.wait(handing).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn is_done(&self) -> bool {
        matches!(self.handed.lock().unwrap_or_else(|p| p.into_inner()).handed, Some(Handed::Done(_)))
    }
}

#[derive(Default)]
struct Batch {
    jobs: Vec<(Job, Arc<Slot>)>,
    /// A leader is running batches.
    leading: bool,
}

/// How many idle module instances the gateway keeps.
const MAX_POOLED_EVALUATORS: usize = 8;

/// The context fields only the gateway may fill.
pub const GATEWAY_FIELDS: [&str; 5] = ["approvals", "counters", "stops", "facts", "now"];

/// Where the time comes from: the system clock in production, a settable one in tests.
pub trait Clock: Send + Sync {
    /// Unix seconds.
    fn now(&self) -> i64;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| d.as_secs() as i64)
    }
}

/// A clock set to an instant at start that then advances with the system's monotonic clock: `--clock` of `remit
/// serve` and `remit mcp-proxy`, for demos and tests whose decisions must not depend on the date they run on (a
/// mandate valid in December 2026 is served as in December 2026 on any day).
#[derive(Debug, Clone, Copy)]
pub struct StartedClock {
    start: i64,
    since: std::time::Instant,
}

impl StartedClock {
    pub fn new(start: i64) -> StartedClock {
        StartedClock { start, since: std::time::Instant::now() }
    }
}

impl Clock for StartedClock {
    fn now(&self) -> i64 {
        self.start.saturating_add(self.since.elapsed().as_secs() as i64)
    }
}

/// A clock that says what it was told.
#[derive(Debug, Default)]
pub struct FixedClock(pub AtomicI64);

impl FixedClock {
    pub fn new(now: i64) -> FixedClock {
        FixedClock(AtomicI64::new(now))
    }

    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Where the gateway is reached, for access request URLs (`{base_url}/inbox/{id}`).
    pub base_url: String,
    /// How long an access request waits for an answer, in seconds.
    pub access_request_ttl: i64,
    /// Argument names whose values the log replaces with `"***"`.
    pub mask: Vec<String>,
    /// Shadow mode for every decision: log the decision the policy makes, answer allow.
    pub shadow: bool,
    /// Shadow mode for the requests whose mandate chain contains one of these mandates.
    pub shadow_mandates: Vec<String>,
    /// Print one JSON line per decision on stderr (structured access log).
    pub access_log: bool,
    /// AuthZEN answers are `{"decision": bool}` alone unless a request asks for the full context
    /// (`--authzen-context minimal`; `gateway::http`).
    pub authzen_minimal: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            base_url: "http://127.0.0.1:8181".into(),
            access_request_ttl: 86_400,
            mask: Vec::new(),
            shadow: false,
            shadow_mandates: Vec::new(),
            access_log: false,
            authzen_minimal: false,
        }
    }
}

/// A policy the gateway serves: the compiled module and what the gateway must know about it, and the checked
/// program when the gateway was given the sources (then the inbox can explain decisions; a module alone cannot).
#[derive(Debug)]
pub struct Policy {
    pub compiled: Arc<Compiled>,
    pub meta: PolicyMeta,
    pub program: Option<Arc<Program>>,
}

impl Policy {
    /// Pairs a module with its metadata; they must describe the same policy.
    pub fn new(compiled: Compiled, meta: PolicyMeta) -> Result<Policy, String> {
        if compiled.policy() != meta.policy {
            return Err(format!(
                "the gateway metadata is for policy `{}`, the module is policy `{}`",
                meta.policy,
                compiled.policy()
            ));
        }
        Ok(Policy { compiled: Arc::new(compiled), meta, program: None })
    }

    /// Adds the checked program the module was compiled from, for explanations; it must be the same policy.
    pub fn with_program(mut self, program: Arc<Program>) -> Result<Policy, String> {
        if program.hash != self.compiled.policy() {
            return Err(format!(
                "the sources are policy `{}`, the module is policy `{}`",
                program.hash,
                self.compiled.policy()
            ));
        }
        self.program = Some(program);
        Ok(self)
    }
}

/// Where an escalated call waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRequestRef {
    pub id: String,
    pub url: String,
    pub expires_at: i64,
}

/// What [`Gateway::decide`] answers.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The decision's id in the log.
    pub id: String,
    /// remit's decision JSON: the module's bytes, or the gateway's own deny.
    pub decision: String,
    /// `allow`, `deny`, `escalate`.
    pub outcome: String,
    /// The reasons of the decision.
    pub reasons: Vec<String>,
    pub access_request: Option<AccessRequestRef>,
    /// The log entry's sequence number; `None` when the store failed (then the decision is a deny), or when the entry
    /// waits in the queue ([`Gateway::decide_deferring`]).
    pub logged: Option<u64>,
    /// The policy hash that decided.
    pub policy: String,
    /// In shadow mode, the decision the policy made (JSON) when the gateway answered allow in its place.
    pub shadowed: Option<String>,
    /// What the call's obligations did, with what the rounds it continues did: what a call continuing it is decided
    /// without ([`Gateway::decide_continuing`]). Empty unless the call is allowed.
    pub carried: Carried,
}

/// How long a round of a call is kept for the next one ([`Gateway::keep_round`]): the user may take a while to answer
/// what a tool asked.
pub const ROUND_TTL_SECONDS: i64 = 3600;

/// The single-use approvals an allowed call consumed and the budget counts it added (counter and window), for a later
/// round of the same call to be decided without them ([`Gateway::decide_continuing`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Carried {
    pub approvals: Vec<String>,
    pub counts: Vec<(String, String)>,
}

impl Carried {
    fn has_approval(&self, id: &str) -> bool {
        self.approvals.iter().any(|a| a == id)
    }

    fn has_count(&self, counter: &str, window: &str) -> bool {
        self.counts.iter().any(|(c, w)| c == counter && w == window)
    }
}

impl Decided {
    pub fn allowed(&self) -> bool {
        self.outcome == "allow"
    }
}

/// Why an inbox or admin action was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionError {
    NotFound(String),
    /// Already approved, denied or expired.
    Conflict(String),
    Forbidden(String),
    Invalid(String),
    Store(StoreError),
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionError::NotFound(m)
            | ActionError::Conflict(m)
            | ActionError::Forbidden(m)
            | ActionError::Invalid(m) => f.write_str(m),
            ActionError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl From<StoreError> for ActionError {
    fn from(e: StoreError) -> ActionError {
        ActionError::Store(e)
    }
}

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

/// The upper bounds of the buckets of the gateway's latency histograms, in seconds.
pub const BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// A Prometheus histogram of durations over [`BUCKETS`] (cumulative buckets, count, sum).
#[derive(Debug, Default)]
pub struct Histogram {
    pub buckets: [AtomicU64; BUCKETS.len()],
    pub count: AtomicU64,
    /// Microseconds.
    pub sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, seconds: f64) {
        for (bucket, le) in self.buckets.iter().zip(BUCKETS) {
            if seconds <= le {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// The histogram in Prometheus text format under `name`.
    pub fn render(&self, name: &str, help: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bucket, le) in self.buckets.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {}", bucket.load(Ordering::Relaxed));
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Counts the gateway keeps for `/metrics`.
#[derive(Debug, Default)]
pub struct Counts {
    pub allow: AtomicU64,
    pub deny: AtomicU64,
    pub escalate: AtomicU64,
    pub store_failures: AtomicU64,
    pub obligation_failures: AtomicU64,
    pub ignored_fields: AtomicU64,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    /// Denies and escalations answered allow in shadow mode.
    pub shadowed: AtomicU64,
    /// Decision transactions committed (group commit: one for a batch of decisions).
    pub commits: AtomicU64,
    /// The log lag: from a decision's arrival to the end of the transaction that logged it (committed, or failed
    /// and denied); no decision is answered before.
    pub log_lag: Histogram,
    /// Decisions that arrived and are not yet logged (queued or in the running transaction).
    pub log_pending: AtomicU64,
    /// Reason code → decisions that gave it.
    pub reasons: Mutex<std::collections::BTreeMap<String, u64>>,
}

/// The decision point with its state.
pub struct Gateway {
    policy: RwLock<Arc<Policy>>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: Config,
    evaluators: Mutex<Vec<Evaluator>>,
    batch: Mutex<Batch>,
    /// Log entries waiting to be written: what happened after a decision (an MCP call's outcome) and the entries of
    /// deferred decisions ([`Gateway::decide_deferring`]), written in order with the next batch that writes or by
    /// [`Gateway::flush_entries`], whichever comes first: no transaction of their own on the path of the next call.
    queued_entries: Mutex<Vec<QueuedEntry>>,
    /// The last attempt to write queued entries failed: no decision's entry waits in the queue until one succeeds
    /// (every decision is then committed before it is answered, and a store that cannot be written denies).
    queue_failing: std::sync::atomic::AtomicBool,
    /// What decisions that change nothing read, kept while the store's version stays the same.
    state_cache: StateCache,
    pub counts: Counts,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("policy", &self.policy().compiled.policy()).finish_non_exhaustive()
    }
}

/// A request as a front end hands it to the gateway.
enum Request<'a> {
    /// remit's request JSON, as it came.
    Bytes(&'a [u8]),
    /// The same, already read.
    Value(Map<String, Json>),
}

/// A request after the gateway prepared it (before the state is filled in).
#[derive(Clone)]
struct Prepared {
    /// `None` when the bytes are not an acceptable JSON object: they go to the module as they came.
    value: Option<Map<String, Json>>,
    ignored: Vec<String>,
    /// A deny the gateway makes itself before asking the module.
    early_deny: Option<&'static str>,
}

impl Gateway {
    pub fn new(policy: Policy, store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: Config) -> Gateway {
        Gateway {
            policy: RwLock::new(Arc::new(policy)),
            store,
            clock,
            config,
            evaluators: Mutex::new(Vec::new()),
            batch: Mutex::new(Batch::default()),
            queued_entries: Mutex::new(Vec::new()),
            queue_failing: std::sync::atomic::AtomicBool::new(false),
            state_cache: StateCache::default(),
            counts: Counts::default(),
        }
    }

    pub fn policy(&self) -> Arc<Policy> {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the policy: decisions that already started finish on the old one.
    pub fn swap_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        self.counts.reloads.fetch_add(1, Ordering::Relaxed);
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs `f` on a pooled evaluator of `policy`; `None` when no instance can be made (the module instantiated at
    /// load time, so only when memory is exhausted): the caller then fails closed.
    fn with_evaluator<R>(&self, policy: &Arc<Policy>, f: impl FnOnce(&mut Evaluator) -> R) -> Option<R> {
        let pooled = self.evaluators.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut evaluator = match pooled {
            Some(e) if Arc::ptr_eq(e.compiled(), &policy.compiled) => e,
            _ => policy.compiled.evaluator().ok()?,
        };
        let result = f(&mut evaluator);
        let mut pool = self.evaluators.lock().unwrap_or_else(|p| p.into_inner());
        // Decisions take turns (one store transaction at a time); only listings run side by side. A few instances
        // cover that; more would only hold their fixed memories.
        if pool.len() < MAX_POOLED_EVALUATORS {
            pool.push(evaluator);
        }
        Some(result)
    }

    /// The module's decision JSON for `request` (a `runtime.trap` deny when no instance can be made).
    fn module_decide(&self, policy: &Arc<Policy>, request: &[u8]) -> String {
        match self.with_evaluator(policy, |e| e.decide(request)) {
            Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            None => Decision::deny(vec![remit_host::REASON_TRAP.to_string()], policy.compiled.policy()).to_json(),
        }
    }

    fn module_listing(&self, policy: &Arc<Policy>, request: &[u8]) -> Vec<u8> {
        let listing = self.with_evaluator(policy, |e| e.visible_tools(request));
        listing.unwrap_or_else(|| br#"{"visible":[],"hidden":[],"error":"runtime.trap"}"#.to_vec())
    }

    /// Removes the fields only the gateway fills and picks the mandate of a request that names none.
    fn prepare(&self, request: &[u8], meta: &PolicyMeta) -> Prepared {
        match remit_lang::json::parse(request) {
            Ok(Json::Object(value)) => self.prepare_value(value, meta),
            _ => Prepared { value: None, ignored: Vec::new(), early_deny: None },
        }
    }

    /// [`Gateway::prepare`] of a request already read.
    fn prepare_value(&self, mut value: Map<String, Json>, meta: &PolicyMeta) -> Prepared {
        let mut prepared = Prepared { value: None, ignored: Vec::new(), early_deny: None };
        fill_target(&mut value, meta, &mut prepared.ignored);
        let context = value.entry("context").or_insert_with(|| Json::Object(Map::new()));
        let Json::Object(context) = context else { return prepared };
        for field in GATEWAY_FIELDS {
            if context.remove(field).is_some() {
                prepared.ignored.push(format!("context.{field}"));
            }
        }
        if !context.contains_key("mandate") {
            let subject = value.get("subject").and_then(|s| s.get("id")).and_then(Json::as_str);
            if let Some(subject) = subject {
                let held = meta.held_by(subject);
                match held.as_slice() {
                    [one] => {
                        let name = Json::String(one.name.clone());
                        value["context"].as_object_mut().expect("an object").insert("mandate".into(), name);
                    }
                    [] => {}
                    _ => prepared.early_deny = Some(REASON_AMBIGUOUS),
                }
            }
        }
        prepared.value = Some(value);
        prepared
    }

    /// Fills the gateway's state into a prepared request; the chain of its mandate. For a call that `continues`
    /// earlier rounds, as if their obligations had not been carried out ([`Gateway::decide_continuing`]).
    fn fill(
        &self,
        reads: &mut Reads<'_, '_>,
        request: &mut Map<String, Json>,
        meta: &PolicyMeta,
        now: i64,
        continues: Option<&Carried>,
    ) -> StoreResult<Vec<String>> {
        let mandate = request.get("context").and_then(|c| c.get("mandate")).and_then(Json::as_str);
        let chain = mandate.and_then(|m| meta.mandate(m)).map(|m| m.chain.clone()).unwrap_or_default();
        let tool = request.get("action").and_then(|a| a.get("name")).and_then(Json::as_str).map(str::to_string);
        let operation = request
            .get("context")
            .and_then(|c| c.get("operation_id"))
            .and_then(Json::as_str)
            .filter(|o| !o.is_empty())
            .map(str::to_string);
        let mut needs = Needs { mandates: chain.clone(), counters: Vec::new() };
        for budget in meta.budgets_of(&chain) {
            if needs.counters.iter().any(|(name, _)| *name == budget.name) {
                continue;
            }
            if let Some(window) = window_key(&budget.window, operation.as_deref(), now) {
                needs.counters.push((budget.name.clone(), window));
            }
        }
        let read = reads.read(&needs, now)?;
        // An approval is presented only to calls of the agent it was minted for (`StoredApproval::agent`): the
        // gateway is the only source of a request's approvals, so a co-holder of the mandate never sees another
        // agent's approval, and the module needs no binding of its own for it.
        let subject = request.get("subject").and_then(|s| s.get("id")).and_then(Json::as_str).map(str::to_string);
        let for_tool = |a: &StoredApproval| {
            (a.tool.is_none() || a.tool == tool) && (a.agent.is_none() || a.agent.as_deref() == subject.as_deref())
        };
        let mut approvals: Vec<Json> = read.approvals.iter().filter(|a| for_tool(a)).map(presented).collect();
        let mut counts = read.counters;
        if let Some(earlier) = continues {
            for id in &earlier.approvals {
                // Consumed, so not among the live ones read above.
                if let Some(mut approval) = reads.tx()?.approval(id)?.filter(|a| a.consumed && for_tool(a)) {
                    approval.consumed = false;
                    approvals.push(presented(&approval));
                }
            }
            for ((counter, window), count) in needs.counters.iter().zip(counts.iter_mut()) {
                if earlier.has_count(counter, window) {
                    *count = count.saturating_sub(1);
                }
            }
        }
        // Mandates stopped without an id as their names, then the stops with ids as objects (docs/requests.md).
        let mut stops: Vec<Json> = read.state.stops.into_iter().map(Json::String).collect();
        stops.extend(read.state.records.iter().map(StopRecord::to_json));
        let facts: Map<String, Json> = read.state.facts.into_iter().map(|(name, v)| (name, v.to_json())).collect();
        let counters: Map<String, Json> =
            needs.counters.into_iter().map(|(name, _)| name).zip(counts.into_iter().map(Json::from)).collect();
        let context = request.get_mut("context").and_then(Json::as_object_mut).expect("prepare made it an object");
        context.insert("now".into(), Json::String(format_timestamp(now)));
        context.insert("approvals".into(), Json::Array(approvals));
        context.insert("stops".into(), Json::Array(stops));
        context.insert("facts".into(), Json::Object(facts));
        context.insert("counters".into(), Json::Object(counters));
        Ok(chain)
    }

    /// Decides one request (remit's request JSON, docs/requests.md), carrying out its obligations and logging it.
    pub fn decide(&self, request: &[u8]) -> Decided {
        self.decide_with(Request::Bytes(request), false)
    }

    /// [`Gateway::decide`] for a front end that flushes the queue ([`Gateway::flush_entries`]) within moments and at
    /// exit (`remit mcp-proxy`): a decision that changes nothing but the log — a deny, or an allow without
    /// obligations — is answered before its entry is committed, and its entry waits in the queue with the outcome
    /// entries (written, in order, before the next decisions that change the state, or by the next flush). A crash
    /// before then loses those entries, never an approval's consumption, a counter, an operation record or an access
    /// request: a decision that writes any of them is committed, with its entry and every entry queued before it,
    /// before it is answered. While writing the queue fails, every decision is committed before it is answered (and
    /// denied when the store cannot be written), as with [`Gateway::decide`].
    pub fn decide_deferring(&self, request: &[u8]) -> Decided {
        let defer = !self.queue_failing.load(Ordering::Relaxed);
        self.decide_with(Request::Bytes(request), defer)
    }

    /// [`Gateway::decide_deferring`] of a request the front end built itself (`remit mcp-proxy`), as a JSON object
    /// rather than its bytes: not serialized by the front end only to be read again here. The module still reads
    /// the request as bytes (the gateway serializes it after filling in the state) and refuses what [`remit_lang::json`]
    /// refuses; the front end's own parser read whatever came from outside (serde_json: a duplicate key is not
    /// refused there, and the last one is kept — in what is decided and in what is forwarded alike).
    pub fn decide_request_deferring(&self, request: Map<String, Json>) -> Decided {
        let defer = !self.queue_failing.load(Ordering::Relaxed);
        self.decide_with(Request::Value(request), defer)
    }

    /// Decides what may be a later round of a call the gateway allowed before (`remit mcp-proxy`: the agent
    /// answering a tool's `input_required` result): `round` is the key the earlier round was kept under
    /// ([`Gateway::keep_round`]). The round is taken (once: it is removed in the decision's transaction), and the call
    /// is decided like any call, against the state as it is now (a stop set or a fact changed since applies), except
    /// that what the earlier rounds' obligations did does not count against it: the single-use approvals they
    /// consumed are presented again, as not consumed, and not consumed a second time; the budget counts they added
    /// are taken off the counters it sees (in the same window) and not added again. Without such a round, as a new
    /// call. Committed before it is answered.
    pub fn decide_continuing(&self, request: Map<String, Json>, round: &str) -> Decided {
        self.decide_with_continuing(Request::Value(request), false, Some(round.to_string()))
    }

    /// Keeps what an allowed call carried out ([`Decided::carried`]) under `round` for [`ROUND_TTL_SECONDS`], for
    /// its next round ([`Gateway::decide_continuing`]), in the store, so that another gateway of the same store, or
    /// this one started again, continues it too.
    pub fn keep_round(&self, round: &str, carried: &Carried) -> StoreResult<()> {
        let now = self.clock.now();
        let text = serde_json::to_string(carried).expect("a round serializes");
        let mut tx = self.store.begin()?;
        tx.keep_round(round, &text, now + ROUND_TTL_SECONDS, now)?;
        tx.commit()
    }

    fn decide_with(&self, request: Request<'_>, defer: bool) -> Decided {
        self.decide_with_continuing(request, defer, None)
    }

    fn decide_with_continuing(&self, request: Request<'_>, defer: bool, continues: Option<String>) -> Decided {
        let policy = self.policy();
        let policy_hash = policy.compiled.policy().to_string();
        let now = self.clock.now();
        let id = new_id("dec");
        let (prepared, request) = match request {
            Request::Bytes(bytes) => (self.prepare(bytes, &policy.meta), bytes.to_vec()),
            Request::Value(value) => {
                // A request the gateway cannot prepare goes to the module as it is, as bytes.
                let odd = value.get("context").is_some_and(|c| !c.is_object());
                let raw = if odd { serde_json::to_vec(&value).expect("a JSON value serializes") } else { Vec::new() };
                (self.prepare_value(value, &policy.meta), raw)
            }
        };
        if !prepared.ignored.is_empty() {
            self.counts.ignored_fields.fetch_add(1, Ordering::Relaxed);
        }
        let queued = std::time::Instant::now();
        let job = Job { policy: policy.clone(), id: id.clone(), raw: request, prepared, now, queued, defer, continues };
        let decided = match self.run_batched(job) {
            Ok(decided) => decided,
            Err(_) => {
                self.counts.store_failures.fetch_add(1, Ordering::Relaxed);
                let decision = Decision::deny(vec![REASON_STORE.to_string()], policy_hash.as_str()).to_json();
                Decided {
                    id,
                    decision,
                    outcome: "deny".into(),
                    reasons: vec![REASON_STORE.into()],
                    access_request: None,
                    logged: None,
                    policy: policy_hash,
                    shadowed: None,
                    carried: Carried::default(),
                }
            }
        };
        self.count(&decided);
        decided
    }

    /// Group commit: the caller queues its job; whoever finds no batch running becomes the leader and runs every
    /// queued job, one after the other, in one transaction (each in its own savepoint, so a job whose writes fail
    /// leaves the others intact), commits once, and hands each job its result. No result is handed out before the
    /// commit, so an answered decision is always in the log. Jobs are taken before the transaction begins: a job
    /// queued after a stop (or any change) committed sees it.
    ///
    /// A leader leads until its own job is done, then hands the lead to the caller of the oldest queued job (which
    /// runs the next batch, its own job in it): under a steady stream of calls no caller keeps leading batches of
    /// others while its own answer waits.
    fn run_batched(&self, job: Job) -> StoreResult<Decided> {
        let slot = Arc::new(Slot::default());
        let lead = {
            let mut queue = self.batch.lock().unwrap_or_else(|p| p.into_inner());
            queue.jobs.push((job, slot.clone()));
            self.counts.log_pending.fetch_add(1, Ordering::Relaxed);
            !std::mem::replace(&mut queue.leading, true)
        };
        if !lead {
            match slot.wait() {
                Handed::Done(result) => return result,
                Handed::Lead => {}
            }
        }
        loop {
            let jobs = {
                let mut queue = self.batch.lock().unwrap_or_else(|p| p.into_inner());
                if slot.is_done() {
                    // Hand on the lead (still `leading`, so nobody else takes the queue meanwhile), or end it.
                    match queue.jobs.first() {
                        Some((_, next)) => next.hand(Handed::Lead),
                        None => queue.leading = false,
                    }
                    break;
                }
                let take = queue.jobs.len().min(MAX_BATCH);
                queue.jobs.drain(..take).collect::<Vec<_>>()
            };
            // A panic while running the batch must not leave its followers waiting: they get a store error
            // (a deny), and the lead passes on as usual.
            let run = std::panic::AssertUnwindSafe(|| self.run_batch(jobs.iter().map(|(job, _)| job)));
            let results = std::panic::catch_unwind(run)
                .unwrap_or_else(|_| vec![Err(StoreError("the batch failed".into())); jobs.len()]);
            let committed = std::time::Instant::now();
            for ((job, slot), result) in jobs.iter().zip(results) {
                self.counts.log_lag.observe(committed.duration_since(job.queued).as_secs_f64());
                self.counts.log_pending.fetch_sub(1, Ordering::Relaxed);
                slot.fill(result);
            }
        }
        match slot.wait() {
            Handed::Done(result) => result,
            // Only a queued job is handed the lead, and this one is done: never happens, and would deny.
            Handed::Lead => Err(StoreError("the group commit lost a result".into())),
        }
    }

    fn run_batch<'j>(&self, jobs: impl ExactSizeIterator<Item = &'j Job>) -> Vec<StoreResult<Decided>> {
        let jobs: Vec<&Job> = jobs.collect();
        let count = jobs.len();
        // Whether this transaction writes: then every entry goes into it, in order. A batch of deferring jobs
        // starts as a read, and becomes a write transaction only if one of its decisions turns out to write. Such
        // a batch reads through the cache while the store's version stays the one taken here (after its jobs were
        // taken: a job queued after a change committed sees it), and opens its read transaction only when the
        // cache cannot answer (`state_cache`).
        let mut writes = jobs.iter().any(|job| !job.defer);
        let version = if writes { None } else { self.store.version() };
        let begun = match (writes, version) {
            (true, _) => self.store.begin().map(Some),
            (false, None) => self.store.begin_read().map(Some),
            (false, Some(_)) => Ok(None),
        };
        let mut tx = match begun {
            Ok(tx) => tx,
            Err(e) => return vec![Err(e); count],
        };
        // The queued entries taken into this transaction (queued again if it does not commit), and the entries of
        // this batch's deferred decisions (queued after it commits, unless a later decision of the batch writes).
        let mut taken: Vec<QueuedEntry> = Vec::new();
        let mut deferred: Vec<QueuedEntry> = Vec::new();
        if let (true, Some(tx)) = (writes, tx.as_mut()) {
            self.write_queued(tx, &mut taken, &mut deferred);
        }
        let mut results: Vec<StoreResult<Decided>> = Vec::with_capacity(count);
        for job in jobs {
            // After a store error the transaction may have been rolled back as a whole (SQLite does so for a full
            // disk or an I/O error): the rest of the batch is not run, so nothing is written outside it.
            if let Some(Err(e)) = results.last() {
                let e = e.clone();
                results.push(Err(e));
                continue;
            }
            let result = match self.run_job(&mut tx, job, job.defer && !writes, (!writes).then_some(version).flatten())
            {
                Ok(Stored::Rerun) => {
                    // The read transaction ends (its decisions wrote nothing) and a write transaction takes over:
                    // SQLite may refuse to turn a read transaction into a write one when another connection wrote
                    // since it began, so none is.
                    let ended = tx.take().map_or(Ok(()), |read| read.commit());
                    match ended.and_then(|()| self.store.begin()) {
                        Ok(write) => tx = Some(write),
                        Err(e) => {
                            results.push(Err(e.clone()));
                            results.resize(count, Err(e));
                            self.queued_entries.lock().unwrap_or_else(|p| p.into_inner()).extend(deferred);
                            return results;
                        }
                    }
                    writes = true;
                    if let Some(tx) = tx.as_mut() {
                        self.write_queued(tx, &mut taken, &mut deferred);
                    }
                    self.run_job(&mut tx, job, false, None)
                }
                other => other,
            };
            results.push(match result {
                Ok(Stored::Logged(decided)) => Ok(decided),
                Ok(Stored::Deferred(decided, entry)) => {
                    deferred.push(entry);
                    Ok(decided)
                }
                Ok(Stored::Rerun) => Err(StoreError("a decision ran again without writing".into())),
                Err(e) => Err(e),
            });
        }
        let committed = match tx {
            Some(tx) => tx.commit().inspect(|()| _ = self.counts.commits.fetch_add(1, Ordering::Relaxed)),
            None => Ok(()),
        };
        match committed {
            Ok(()) => {
                if !deferred.is_empty() {
                    self.queued_entries.lock().unwrap_or_else(|p| p.into_inner()).extend(deferred);
                }
                results
            }
            Err(e) => {
                // The batch's own deferred entries go with its decisions, which are answered with the store's deny.
                self.requeue(taken);
                vec![Err(e); count]
            }
        }
    }

    /// One job of [`Gateway::run_batch`]: a deferring one reads through the cache when `cached` gives the store's
    /// version (its batch writes nothing so far), else in `tx`; one that writes in a savepoint of `tx`.
    fn run_job<'a>(
        &'a self,
        tx: &mut Option<Box<dyn Tx + 'a>>,
        job: &Job,
        defer: bool,
        cached: Option<u64>,
    ) -> StoreResult<Stored> {
        let missing = || StoreError("a decision has no transaction".into());
        if defer {
            // A deferring decision writes nothing (it answers `Rerun` before it would): no savepoint.
            let mut reads = match cached {
                Some(version) => Reads::Cached { store: self.store.as_ref(), tx, cache: &self.state_cache, version },
                None => Reads::Tx(tx.as_mut().ok_or_else(missing)?.as_mut()),
            };
            return self.decide_in_store(&mut reads, job, true);
        }
        let tx = tx.as_mut().ok_or_else(missing)?;
        tx.savepoint()?;
        let stored = self.decide_in_store(&mut Reads::Tx(tx.as_mut()), job, false);
        tx.release(stored.is_ok())?;
        stored
    }

    /// Writes the queued entries, then `deferred` (the running batch's own), into `tx` in a savepoint of their own:
    /// those taken from the queue are added to `taken`, and `deferred` is emptied (its entries commit with the
    /// batch's decisions, or go with them). If they cannot be written, the queue's are queued again, `deferred` is
    /// left as it was, and the decisions go on.
    fn write_queued(&self, tx: &mut Box<dyn Tx + '_>, taken: &mut Vec<QueuedEntry>, deferred: &mut Vec<QueuedEntry>) {
        let queued = std::mem::take(&mut *self.queued_entries.lock().unwrap_or_else(|p| p.into_inner()));
        if queued.is_empty() && deferred.is_empty() {
            return;
        }
        let written = tx.savepoint().and_then(|()| {
            let appended = queued
                .iter()
                .chain(deferred.iter())
                .try_for_each(|(time, kind, body)| tx.append_log(*time, kind, &self.body_text(body)).map(|_| ()));
            tx.release(appended.is_ok())?;
            appended
        });
        self.queue_failing.store(written.is_err(), Ordering::Relaxed);
        if written.is_err() {
            self.requeue(queued);
            return;
        }
        taken.extend(queued);
        deferred.clear();
    }

    /// Puts entries that could not be written back at the head of the queue.
    fn requeue(&self, entries: Vec<QueuedEntry>) {
        if entries.is_empty() {
            return;
        }
        let mut queue = self.queued_entries.lock().unwrap_or_else(|p| p.into_inner());
        let later = std::mem::replace(&mut *queue, entries);
        queue.extend(later);
    }

    fn count(&self, decided: &Decided) {
        let counter = match decided.outcome.as_str() {
            "allow" => &self.counts.allow,
            "escalate" => &self.counts.escalate,
            _ => &self.counts.deny,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut reasons = self.counts.reasons.lock().unwrap_or_else(|p| p.into_inner());
        for reason in &decided.reasons {
            // A reason seen before is not copied again.
            match reasons.get_mut(reason) {
                Some(count) => *count += 1,
                None => _ = reasons.insert(reason.clone(), 1),
            }
        }
    }

    /// One decision inside the batch's transaction (see [`Gateway::decide`]); its writes are kept only if the
    /// transaction commits. With `defer`, a decision that changes nothing but the log writes nothing (its entry is
    /// returned, to be queued), and one that would change the state writes nothing either: [`Stored::Rerun`].
    fn decide_in_store(&self, reads: &mut Reads<'_, '_>, job: &Job, defer: bool) -> StoreResult<Stored> {
        let Job { policy, id, raw, prepared, now, continues, .. } = job;
        let (id, now) = (id.as_str(), *now);
        let continues: Option<Carried> = match continues {
            Some(round) => reads.tx()?.take_round(round, now)?.and_then(|text| serde_json::from_str(&text).ok()),
            None => None,
        };
        let continues = continues.as_ref();
        let prepared = prepared.clone();
        let policy_hash = policy.compiled.policy();
        let Prepared { value, ignored, early_deny } = prepared;
        let mut chain = Vec::new();
        let (sent, mut decision_json) = match (value, early_deny) {
            (Some(value), Some(reason)) => {
                (Json::Object(value), Decision::deny(vec![reason.to_string()], policy_hash).to_json())
            }
            (Some(mut value), None) => {
                chain = self.fill(reads, &mut value, &policy.meta, now, continues)?;
                let bytes = serde_json::to_vec(&value).expect("a JSON value serializes");
                (Json::Object(value), self.module_decide(policy, &bytes))
            }
            (None, _) => (Json::String(String::from_utf8_lossy(raw).into_owned()), self.module_decide(policy, raw)),
        };
        let mut decision: Json = serde_json::from_str(&decision_json).unwrap_or(Json::Null);
        let outcome = decision.get("decision").and_then(Json::as_str).unwrap_or("deny").to_string();
        let mut outcome =
            if ["allow", "deny", "escalate"].contains(&outcome.as_str()) { outcome } else { "deny".into() };
        let mandate = sent.pointer("/context/mandate").and_then(Json::as_str);
        let in_shadow = self.config.shadow
            || self.config.shadow_mandates.iter().any(|m| chain.contains(m) || mandate == Some(m.as_str()));
        let obligations = decision.get("obligations").and_then(Json::as_array).is_some_and(|o| !o.is_empty());
        if defer && ((outcome == "allow" && obligations) || (outcome == "escalate" && !in_shadow)) {
            return Ok(Stored::Rerun);
        }
        let mut module_decision = None;
        let mut approvals_used = Vec::new();
        // A continued call's earlier rounds stay carried out while it is allowed.
        let mut carried = if outcome == "allow" { continues.cloned().unwrap_or_default() } else { Carried::default() };
        let mut access_request = None;
        // An allow without obligations has none to carry out (and a deferring decision may have no transaction).
        if outcome == "allow" && obligations {
            match self.carry_out(reads.tx()?, &decision, &sent, &policy.meta, &chain, id, now, continues)? {
                Ok((used, done)) => (approvals_used, carried) = (used, done),
                Err(problem) => {
                    carried = Carried::default();
                    self.counts.obligation_failures.fetch_add(1, Ordering::Relaxed);
                    module_decision = Some((decision.clone(), problem));
                    decision_json = Decision::deny(vec![REASON_OBLIGATION.to_string()], policy_hash).to_json();
                    decision = serde_json::from_str(&decision_json).expect("a deny is JSON");
                    outcome = "deny".into();
                }
            }
        }
        let mut shadowed = None;
        if outcome != "allow" && in_shadow {
            self.counts.shadowed.fetch_add(1, Ordering::Relaxed);
            let mut allow = Decision::deny(vec![REASON_SHADOW.to_string()], policy_hash);
            allow.outcome = remit_lang::eval::Outcome::Allow;
            allow.mandate_chain = chain.clone();
            shadowed = Some(std::mem::replace(&mut decision_json, allow.to_json()));
            outcome = "allow".into();
        } else if outcome == "escalate" {
            access_request = Some(self.escalate(reads.tx()?, &decision, &sent, id, now)?);
        }
        // What was answered: the decision, but for the allow answered in place of a shadowed one.
        let shadow_allow: Option<Json> =
            shadowed.as_ref().map(|_| serde_json::from_str(&decision_json).unwrap_or(Json::Null));
        let reasons: Vec<String> = shadow_allow
            .as_ref()
            .unwrap_or(&decision)
            .get("reasons")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let parts = DecisionParts {
            id: id.to_string(),
            request: sent,
            decision,
            policy: policy_hash.to_string(),
            approvals_used,
            ignored,
            module_decision,
            access_request: access_request.as_ref().map(|r| r.id.clone()),
            shadow: shadowed.is_some(),
        };
        let (logged, body) = if defer {
            (None, Body::Decision(Box::new(parts)))
        } else {
            let body = parts.text(&self.config.mask);
            (Some(reads.tx()?.append_log(now, "decision", &body)?.seq), Body::Text(body))
        };
        let decided = Decided {
            id: id.to_string(),
            decision: decision_json,
            outcome,
            reasons,
            access_request,
            logged,
            policy: policy_hash.to_string(),
            shadowed,
            carried,
        };
        Ok(if defer { Stored::Deferred(decided, (now, "decision", body)) } else { Stored::Logged(decided) })
    }

    /// Carries out an allow's obligations; `Ok(Err(problem))` when one of them cannot be, and then nothing was
    /// written (every obligation is checked before any is carried out). Those the rounds the call `continues` carried
    /// out already are not carried out again. The approvals used (as the log lists them), and what the call has
    /// carried out with its earlier rounds.
    #[allow(clippy::too_many_arguments)]
    fn carry_out(
        &self,
        tx: &mut dyn Tx,
        decision: &Json,
        sent: &Json,
        meta: &PolicyMeta,
        chain: &[String],
        id: &str,
        now: i64,
        continues: Option<&Carried>,
    ) -> StoreResult<Result<(Vec<Json>, Carried), String>> {
        let none = Carried::default();
        let earlier = continues.unwrap_or(&none);
        let mut carried = earlier.clone();
        let obligations = decision.get("obligations").and_then(Json::as_array).cloned().unwrap_or_default();
        let operation = sent.pointer("/context/operation_id").and_then(Json::as_str).filter(|o| !o.is_empty());
        let tool = sent.pointer("/action/name").and_then(Json::as_str).unwrap_or("");
        enum Step {
            Consume(String),
            Count(String, String),
            Record(String),
        }
        let mut steps = Vec::new();
        let mut used = Vec::new();
        for obligation in &obligations {
            let kind = obligation.get("kind").and_then(Json::as_str).unwrap_or("");
            let field = |name: &str| obligation.get(name).and_then(Json::as_str).map(str::to_string);
            match (kind, field("id"), field("counter")) {
                ("consume-approval", Some(approval), _) => match tx.approval(&approval)? {
                    // Consumed by an earlier round of this call (and presented again, see `Gateway::fill`).
                    Some(a) if earlier.has_approval(&approval) && a.expires_at > now => {
                        used.push(json!({"id": a.id, "kind": a.kind, "approver": a.approver,
                                         "access_request": a.access_request, "earlier_round": true}));
                    }
                    Some(a) if !a.consumed && a.expires_at > now => {
                        used.push(json!({"id": a.id, "kind": a.kind, "approver": a.approver,
                                         "access_request": a.access_request}));
                        carried.approvals.push(approval.clone());
                        steps.push(Step::Consume(approval));
                    }
                    Some(_) => return Ok(Err(format!("approval `{approval}` is already consumed or expired"))),
                    None => return Ok(Err(format!("approval `{approval}` is not in the store"))),
                },
                ("increment-counter", _, Some(counter)) => {
                    let window = meta.window_of(chain, &counter).and_then(|w| window_key(w, operation, now));
                    match window {
                        // Counted by an earlier round of this call.
                        Some(window) if earlier.has_count(&counter, &window) => {}
                        Some(window) => {
                            carried.counts.push((counter.clone(), window.clone()));
                            steps.push(Step::Count(counter, window));
                        }
                        None => return Ok(Err(format!("counter `{counter}` has no window the gateway can keep"))),
                    }
                }
                ("record-operation", Some(op), _) => steps.push(Step::Record(op)),
                _ => return Ok(Err(format!("unknown obligation {obligation}"))),
            }
        }
        for step in steps {
            match step {
                Step::Consume(approval) => {
                    if !tx.consume_approval(&approval, id, now)? {
                        return Err(StoreError(format!("approval `{approval}` changed inside a transaction")));
                    }
                }
                Step::Count(counter, window) => {
                    tx.increment_counter(&counter, &window)?;
                }
                Step::Record(operation) => {
                    let record =
                        OperationRecord { operation, decision_id: id.to_string(), tool: tool.to_string(), time: now };
                    tx.record_operation(&record)?;
                }
            }
        }
        Ok(Ok((used, carried)))
    }

    /// Files (or joins) the access request of an escalated call.
    fn escalate(
        &self,
        tx: &mut dyn Tx,
        decision: &Json,
        sent: &Json,
        decision_id: &str,
        now: i64,
    ) -> StoreResult<AccessRequestRef> {
        let text = |pointer: &str| sent.pointer(pointer).and_then(Json::as_str).map(str::to_string);
        let tool = text("/action/name").unwrap_or_default();
        let empty = Json::Object(Map::new());
        let arguments = sent.pointer("/action/arguments").unwrap_or(&empty);
        let missing = decision.get("missing_approvals").cloned().unwrap_or(Json::Array(Vec::new()));
        let chain: Vec<String> = decision
            .get("mandate_chain")
            .and_then(Json::as_array)
            .map(|c| c.iter().filter_map(Json::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let reasons: Vec<String> = decision
            .get("reasons")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let mut request = AccessRequest {
            id: new_id("ar"),
            status: PENDING.into(),
            created_at: now,
            expires_at: now + self.config.access_request_ttl,
            principal: decision.get("escalate_to").and_then(Json::as_str).map(str::to_string),
            agent: text("/subject/id").unwrap_or_default(),
            credential: text("/subject/credential/id"),
            mandate: text("/context/mandate").unwrap_or_default(),
            digest: remit_lang::eval::argument_digest(&tool, arguments),
            tool,
            target: text("/resource/id"),
            manifest: text("/action/arguments/manifest"),
            arguments: self.masked(sent.clone()).pointer("/action/arguments").cloned().unwrap_or(empty.clone()),
            missing_approvals: missing,
            reasons,
            chain,
            decision_id: decision_id.to_string(),
            key: String::new(),
            decided_by: None,
            decided_at: None,
            // The decision's entry is the next one this transaction appends (see `decide_in_store`).
            log_seq: Some(tx.log_head()?.0 + 1),
            earlier: Vec::new(),
            arguments_truncated: None,
        };
        let identity = json!([
            request.agent,
            request.credential,
            request.mandate,
            request.tool,
            request.target,
            request.digest,
            request.manifest,
            request.missing_approvals,
            request.reasons
        ]);
        request.key = format!("sha256:{}", hex(&Sha256::digest(identity.to_string().as_bytes())));
        let request = match tx.pending_access_request(&request.key, now)? {
            Some(existing) => existing,
            None => {
                // The same call approved and used before: its approver is told (a second payment is not approved
                // blindly).
                request.earlier = tx.earlier_uses(&request.key)?;
                tx.insert_access_request(&request)?;
                request
            }
        };
        Ok(AccessRequestRef {
            url: format!("{}/inbox/{}", self.config.base_url.trim_end_matches('/'), request.id),
            id: request.id,
            expires_at: request.expires_at,
        })
    }

    /// Whether [`Gateway::masked`] would change `request`.
    /// A queued entry's text.
    fn body_text<'b>(&self, body: &'b Body) -> std::borrow::Cow<'b, str> {
        match body {
            Body::Text(text) => text.into(),
            Body::Decision(parts) => parts.text(&self.config.mask).into(),
        }
    }

    fn masked(&self, request: Json) -> Json {
        masked(request, &self.config.mask)
    }

    /// Queues what became of an allowed call (a front end that carries calls out, `remit mcp-proxy`, reports the
    /// upstream's answer) as an `outcome` entry: it goes into the log after its decision, with the next batch that
    /// writes (in that transaction, before its decisions) or at the next [`Gateway::flush_entries`], whichever comes
    /// first — no transaction of its own on the path of the next call.
    pub fn queue_outcome(&self, body: &Json) {
        self.queue_entry("outcome", body);
    }

    /// Queues an entry of `kind` that no decision made (`refused`: a message a front end refused before deciding,
    /// such as an MCP request sent without an id), written as [`Gateway::queue_outcome`]'s entries are.
    pub fn queue_entry(&self, kind: &'static str, body: &Json) {
        let entry = (self.clock.now(), kind, Body::Text(body.to_string()));
        self.queued_entries.lock().unwrap_or_else(|p| p.into_inner()).push(entry);
    }

    /// Writes the queued entries in one transaction (nothing when none is queued).
    pub fn flush_entries(&self) -> Result<(), StoreError> {
        if self.queued_entries.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin()?;
        // Taken inside the transaction, as a batch takes them: whoever holds the store writes what was queued before
        // it, so entries go into the log in the order they were queued.
        let entries = std::mem::take(&mut *self.queued_entries.lock().unwrap_or_else(|p| p.into_inner()));
        let written = entries
            .iter()
            .try_for_each(|(time, kind, body)| tx.append_log(*time, kind, &self.body_text(body)).map(|_| ()))
            .and_then(|()| tx.commit());
        self.queue_failing.store(written.is_err(), Ordering::Relaxed);
        if written.is_err() {
            // Kept for the next batch or flush, ahead of what was queued meanwhile.
            self.requeue(entries);
        }
        written
    }

    /// The tool listing (docs/abi.md) of a request's subject, with the gateway's state and time filled in.
    pub fn visible_tools(&self, request: &[u8]) -> Result<Vec<u8>, StoreError> {
        let policy = self.policy();
        let now = self.clock.now();
        let prepared = self.prepare(request, &policy.meta);
        let Some(mut value) = prepared.value else {
            return Ok(self.module_listing(&policy, request));
        };
        // Read as a decision that changes nothing reads: through the cache while the store's version stays the same,
        // else in a read transaction, ended (it wrote nothing) before the module runs.
        {
            let mut tx = None;
            let mut reads = match self.store.version() {
                Some(version) => {
                    Reads::Cached { store: self.store.as_ref(), tx: &mut tx, cache: &self.state_cache, version }
                }
                None => Reads::Tx(tx.insert(self.store.begin_read()?).as_mut()),
            };
            self.fill(&mut reads, &mut value, &policy.meta, now, None)?;
        }
        let bytes = serde_json::to_vec(&value).expect("a JSON value serializes");
        Ok(self.module_listing(&policy, &bytes))
    }

    /// Access requests, newest first (only those with `status` when given).
    pub fn access_requests(&self, status: Option<&str>) -> Result<Vec<AccessRequest>, StoreError> {
        self.store.begin()?.access_requests(status)
    }

    /// One page of the access requests `identity` may answer ([`Gateway::may_answer`]), newest first, after
    /// `after`, at most `limit`, their arguments cut for a list (only those with `status` when given).
    pub fn access_request_page(
        &self,
        identity: &str,
        status: Option<&str>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Page, StoreError> {
        let mut tx = self.store.begin_read()?;
        tx.access_request_page(status, after, limit, &mut |r| self.may_answer(r, identity))
    }

    pub fn access_request(&self, id: &str) -> Result<Option<AccessRequest>, StoreError> {
        self.store.begin()?.access_request(id)
    }

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
        let entry = self.store.begin().map_err(NoExplanation::Store)?.log_entries(seq, 1);
        let entry = entry.map_err(NoExplanation::Store)?.into_iter().next().filter(|e| e.seq == seq);
        let Some(entry) = entry else { return unexplainable(format!("log entry {seq} is missing")) };
        if super::audit::entry_hash(&entry.prev, entry.seq, entry.time, &entry.kind, &entry.body) != entry.hash {
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

    /// Whether `identity` may answer access requests at all: an agent (a holder of a mandate) never may.
    pub fn may_approve(&self, identity: &str) -> bool {
        self.policy().meta.held_by(identity).is_empty()
    }

    /// Approves a pending access request as `approver`: mints one approval per missing approval, of the gate's
    /// kind, bound to what the kind binds (the exact call's tool, target, argument digest, manifest), valid for the
    /// kind's TTL from now, single use when the kind is.
    pub fn approve(&self, id: &str, approver: &str) -> Result<Vec<StoredApproval>, ActionError> {
        let policy = self.policy();
        if !self.may_approve(approver) {
            return Err(ActionError::Forbidden(format!("`{approver}` holds a mandate: an agent never approves")));
        }
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        let request = self.answerable(tx.as_mut(), id, approver, now)?;
        let missing = request.missing_approvals.as_array().cloned().unwrap_or_default();
        if missing.is_empty() {
            return Err(ActionError::Invalid(format!(
                "access request `{id}` waits for no approval (its reasons: {}): change the policy instead",
                request.reasons.join(", ")
            )));
        }
        let mut minted = Vec::new();
        for m in &missing {
            let text = |key: &str| m.get(key).and_then(Json::as_str).map(str::to_string);
            let kind = text("kind").unwrap_or_default();
            let Some(meta) = policy.meta.approval(&kind) else {
                return Err(ActionError::Invalid(format!("the policy has no approval kind `{kind}`")));
            };
            // A kind that binds the target (or the manifest) on a call without one: the approval would never match
            // the call (`binding-mismatch`), and every retry would file a new request.
            for binding in ["target", "manifest"] {
                if meta.binds.iter().any(|b| b == binding) && text(binding).is_none() {
                    return Err(ActionError::Invalid(format!(
                        "approval kind `{kind}` binds the {binding}, and the call of access request `{id}` has none: \
                         an approval could never be used (the tool needs `target args.NAME`, or the caller a \
                         `resource.id`): deny it, or change the policy"
                    )));
                }
            }
            minted.push(StoredApproval {
                id: new_id("apr"),
                kind,
                mandate: text("mandate").unwrap_or_else(|| request.mandate.clone()),
                issued_at: now,
                expires_at: now + meta.ttl as i64,
                tool: text("tool"),
                target: text("target"),
                digest: text("digest"),
                manifest: text("manifest"),
                single_use: meta.single_use,
                consumed: false,
                approver: approver.to_string(),
                access_request: Some(request.id.clone()),
                consumed_by: None,
                consumed_at: None,
                agent: Some(request.agent.clone()),
            });
        }
        for approval in &minted {
            tx.insert_approval(approval)?;
        }
        tx.decide_access_request(id, APPROVED, approver, now)?;
        let body = json!({"access_request": id, "status": APPROVED, "by": approver, "approvals": minted});
        tx.append_log(now, "approval", &body.to_string())?;
        tx.commit()?;
        Ok(minted)
    }

    /// Denies a pending access request as `by`.
    pub fn deny_request(&self, id: &str, by: &str) -> Result<(), ActionError> {
        if !self.may_approve(by) {
            return Err(ActionError::Forbidden(format!("`{by}` holds a mandate: an agent never answers")));
        }
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        self.answerable(tx.as_mut(), id, by, now)?;
        tx.decide_access_request(id, DENIED, by, now)?;
        let body = json!({"access_request": id, "status": DENIED, "by": by});
        tx.append_log(now, "approval", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    fn answerable(&self, tx: &mut dyn Tx, id: &str, by: &str, now: i64) -> Result<AccessRequest, ActionError> {
        let Some(request) = tx.access_request(id)? else {
            return Err(ActionError::NotFound(format!("no access request `{id}`")));
        };
        if request.status != PENDING {
            return Err(ActionError::Conflict(format!("access request `{id}` is already {}", request.status)));
        }
        if request.expires_at <= now {
            return Err(ActionError::Conflict(format!("access request `{id}` expired")));
        }
        if !self.may_answer(&request, by) {
            return Err(ActionError::Forbidden(format!(
                "access request `{id}` is for `{}` or the approvers its approval kinds name, not `{by}`",
                request.principal.as_deref().unwrap_or("")
            )));
        }
        Ok(request)
    }

    /// Whether `identity` may answer `request`: it waits for approvals and `identity` may grant every one of them
    /// (`approved by`; without it, the principal), or it waits for none and `identity` is its principal.
    pub fn may_answer(&self, request: &AccessRequest, identity: &str) -> bool {
        let principal = request.principal.as_deref().unwrap_or("");
        let missing = request.missing_approvals.as_array().map(Vec::as_slice).unwrap_or(&[]);
        if missing.is_empty() {
            return identity == principal;
        }
        let meta = &self.policy().meta;
        missing.iter().all(|m| {
            let kind = m.get("kind").and_then(Json::as_str).unwrap_or("");
            meta.approval(kind).is_some_and(|k| k.answerable_by(identity, principal))
        })
    }

    /// Sets (`active`) or clears the stop of a mandate; it applies to every decision that starts after this returns.
    pub fn set_stop(&self, mandate: &str, active: bool, by: &str) -> Result<(), ActionError> {
        if self.policy().meta.mandate(mandate).is_none() {
            return Err(ActionError::NotFound(format!("no mandate `{mandate}` in the policy")));
        }
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        tx.set_stop(mandate, active)?;
        let body = json!({"mandate": mandate, "active": active, "by": by});
        tx.append_log(now, "stop", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// Sets a stop with an id and a level on a mandate or a principal of the policy (replacing one with the same
    /// id); it applies to every decision that starts after this returns.
    pub fn set_stop_record(&self, stop: &StopRecord, by: &str) -> Result<(), ActionError> {
        if stop.id.trim().is_empty() {
            return Err(ActionError::Invalid("a stop needs a non-empty `id`".into()));
        }
        if !StopRecord::LEVELS.contains(&stop.level.as_str()) {
            return Err(ActionError::Invalid(format!(
                "`{}` is not a stop level: `pause`, `cancel`, `revoke` or `quarantine`",
                stop.level
            )));
        }
        let meta = &self.policy().meta;
        match (&stop.mandate, &stop.principal) {
            (Some(mandate), None) if meta.mandate(mandate).is_none() => {
                return Err(ActionError::NotFound(format!("no mandate `{mandate}` in the policy")));
            }
            (None, Some(principal)) if !meta.mandates.iter().any(|m| &m.principal == principal) => {
                return Err(ActionError::NotFound(format!("no mandate of the policy is given by `{principal}`")));
            }
            (Some(_), None) | (None, Some(_)) => {}
            _ => return Err(ActionError::Invalid("a stop names exactly one of `mandate` and `principal`".into())),
        }
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        tx.set_stop_record(stop)?;
        let mut body = stop.to_json();
        body["active"] = json!(true);
        body["by"] = json!(by);
        tx.append_log(now, "stop", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// Clears the stop with `id`.
    pub fn clear_stop_record(&self, id: &str, by: &str) -> Result<(), ActionError> {
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        if !tx.clear_stop_record(id)? {
            return Err(ActionError::NotFound(format!("no stop `{id}`")));
        }
        let body = json!({"id": id, "active": false, "by": by});
        tx.append_log(now, "stop", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// Publishes the current version of a fact.
    pub fn set_fact(&self, name: &str, version: &FactVersion, by: &str) -> Result<(), ActionError> {
        // A version of a fact no rule reads would be acknowledged and then ignored (a typo stays unnoticed):
        // refused, as a stop on a mandate the policy does not have is.
        if !self.policy().meta.uses_fact(name) {
            return Err(ActionError::NotFound(format!("the policy reads no fact `{name}`")));
        }
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        tx.set_fact(name, version)?;
        let body = json!({"fact": name, "version": version.to_json(), "by": by});
        tx.append_log(now, "fact", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// The active stops and the current fact versions.
    pub fn state(&self) -> Result<Json, StoreError> {
        let mut tx = self.store.begin()?;
        let stops = tx.stops()?;
        let records = tx.stop_records()?;
        let facts: Map<String, Json> = tx.facts()?.into_iter().map(|(n, v)| (n, v.to_json())).collect();
        Ok(json!({"stops": stops, "stops_by_id": records, "facts": facts}))
    }
}

/// For a tool that names its target (`target args.NAME`), sets `resource.id` to that argument's string value, or
/// removes the resource when the argument is absent or not a string (then every condition on `resource.id` fails
/// closed and nothing binds to it). A caller's different `resource.id` is replaced and recorded in `ignored`: the
/// target is what the tool acts on, not what the caller says it is.
pub fn fill_target(request: &mut Map<String, Json>, meta: &PolicyMeta, ignored: &mut Vec<String>) {
    let tool = request.get("action").and_then(|a| a.get("name")).and_then(Json::as_str);
    let Some(argument) = tool.and_then(|t| meta.target_of(t)) else { return };
    let target = request.get("action").and_then(|a| a.get("arguments")).and_then(|a| a.get(argument));
    let target = target.and_then(Json::as_str).map(str::to_string);
    let given = request.get("resource").map(|r| r.get("id").and_then(Json::as_str).map(str::to_string));
    if given.is_some() && given != Some(target.clone()) {
        ignored.push("resource.id".into());
    }
    match target {
        Some(id) => {
            request.insert("resource".into(), json!({"id": id}));
        }
        None => {
            request.remove("resource");
        }
    }
}

/// An approval as the module reads it (docs/requests.md).
fn presented(a: &StoredApproval) -> Json {
    let mut map = Map::new();
    map.insert("id".into(), a.id.clone().into());
    map.insert("kind".into(), a.kind.clone().into());
    map.insert("mandate".into(), a.mandate.clone().into());
    map.insert("issued_at".into(), format_timestamp(a.issued_at).into());
    map.insert("expires_at".into(), format_timestamp(a.expires_at).into());
    for (key, value) in [("tool", &a.tool), ("target", &a.target), ("digest", &a.digest), ("manifest", &a.manifest)] {
        if let Some(value) = value {
            map.insert(key.into(), value.clone().into());
        }
    }
    map.insert("consumed".into(), a.consumed.into());
    // Who answered the access request: what a kind's `approved by` checks.
    map.insert("approved_by".into(), a.approver.clone().into());
    Json::Object(map)
}

/// The window a budget counts in at `now`: `operation:ID`, `hour:YYYY-MM-DDTHH`, `day:YYYY-MM-DD`, `total`.
/// `None` for a per-operation budget of a call without an operation id (the counter stays absent: the module
/// denies, `budget.exhausted`).
pub fn window_key(window: &str, operation: Option<&str>, now: i64) -> Option<String> {
    let time = format_timestamp(now);
    match window {
        "operation" => operation.map(|op| format!("operation:{op}")),
        "hour" => Some(format!("hour:{}", &time[..13])),
        "day" => Some(format!("day:{}", &time[..10])),
        "total" => Some("total".to_string()),
        _ => None,
    }
}

/// A fresh identifier `PREFIX-` + 16 random hex digits (std's randomly keyed hasher over a counter and the time).
pub fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    format!("{prefix}-{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::window_key;

    #[test]
    fn budget_windows_are_keyed_by_operation_utc_hour_day_or_nothing() {
        let now = remit_lang::value::parse_timestamp("2026-12-03T15:30:00Z").unwrap();
        assert_eq!(window_key("operation", Some("op-1"), now).as_deref(), Some("operation:op-1"));
        assert_eq!(window_key("operation", None, now), None);
        assert_eq!(window_key("hour", None, now).as_deref(), Some("hour:2026-12-03T15"));
        assert_eq!(window_key("day", None, now).as_deref(), Some("day:2026-12-03"));
        assert_eq!(window_key("total", Some("op"), now).as_deref(), Some("total"));
        assert_eq!(window_key("fortnight", None, now), None);
    }
}
