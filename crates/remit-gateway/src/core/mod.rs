//! The gateway's core, which knows nothing of HTTP: it fills the state and the time into each request from its store
//! and clock, decides through the compiled module ([`remit_host`], never the interpreter), and carries out the
//! decision's obligations atomically with appending the log entry, in one store transaction, exactly once.
//!
//! - Caller-supplied `context.approvals`, `counters`, `stops`, `facts` and `now` are removed before the gateway
//!   fills its own; the attempt is recorded in the log entry (`ignored`). So are the world's values the caller may
//!   not give (`from data` ones always, `from properties` ones unless it is a trusted enforcement point).
//! - An obligation that cannot be carried out (an approval already consumed, a counter whose window the policy does
//!   not declare) turns the allow into a deny (`gateway.obligation-failed`); a store that fails turns any decision
//!   into a deny (`gateway.store-unavailable`). Neither ever allows.
//! - An escalation becomes an access request in the principal's inbox; approving it mints approvals of the gate's
//!   kind, bound as the policy says, which the retry of the exact call presents (filled by the gateway) and consumes.
//!
//! Its modules, each using only those listed before it (and this file's shared types): [`metrics`], [`policy`] (the policy served and the module instances), [`log`] (entries waiting to be written),
//! [`obligations`] (carrying out an allow's obligations, budgets' windows, rounds), [`grants`] (instances of
//! templates granted, changed, revoked, and filled into their holders' requests), [`prepare`] (a request made ready
//! for the module, the state filled in), [`access`] (access requests and their answers), [`state`] (stops and
//! facts), [`explain`] (explanations for the inbox), [`batch`] (group commit, one decision in its transaction),
//! [`decide`] (the decisions and listings front ends ask for) and [`search`] (subjects and resources searched over
//! the data, decided without being logged); [`world`] (what the policy reads about the world and from where, used
//! by [`prepare`]) and [`data`] (the data sets as the admin changes them) stand beside them.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::state_cache::StateCache;
use crate::store::{Store, StoreError};
use remit_host::Evaluator;

use self::batch::Batch;
use self::log::QueuedEntry;

mod access;
mod batch;
mod data;
mod decide;
mod explain;
mod grants;
mod log;
mod metrics;
mod obligations;
mod policy;
mod prepare;
mod search;
mod state;
mod world;

pub use self::access::AccessRequestRef;
pub(crate) use self::data::log_change as log_data_change;
pub use self::data::DataChange;
pub use self::explain::NoExplanation;
pub use self::grants::{may_grant, GrantAsk, GrantError};
pub use self::metrics::{Counts, Histogram, BUCKETS};
pub use self::obligations::{window_key, Carried, ROUND_TTL_SECONDS};
pub use self::policy::Policy;
pub use self::prepare::{fill_target, GATEWAY_FIELDS};
pub use self::search::{Found, HolderPattern, Searched, PATTERN_SUBJECT};
pub use self::world::{AttrSpec, CalendarSpec, EntitySpec, RelationSpec, Source, Term, WorldSpec};
/// The clocks, which the core decides by (they are the crate's: the audit log signs its head by them too).
pub use crate::clock::{Clock, FixedClock, StartedClock, SystemClock};

/// The reason of the deny the gateway answers when its store cannot be read or written.
pub const REASON_STORE: &str = "gateway.store-unavailable";
/// The reason of the deny that replaces an allow whose obligations cannot be carried out.
pub const REASON_OBLIGATION: &str = "gateway.obligation-failed";
/// The reason of the allow a gateway in shadow mode answers in place of a deny or an escalation.
pub const REASON_SHADOW: &str = "gateway.shadow";
/// The reason of the deny of a request that names no mandate when its subject holds several.
pub const REASON_AMBIGUOUS: &str = "mandate.ambiguous";

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
    /// Grant instances of templates `remit check` did not prove to narrow their parents (`--grant-unproved`);
    /// without it such a grant is refused (`501`, docs/grants-design.md).
    pub grant_unproved: bool,
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
            grant_unproved: false,
        }
    }
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

/// The decision point with its state.
pub struct Gateway {
    policy: RwLock<Arc<Policy>>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: Config,
    evaluators: Mutex<Vec<Evaluator>>,
    batch: Mutex<Batch>,
    /// The thread that leads batches for awaited jobs ([`Gateway::decide_awaiting`]), once there was one.
    committer: std::sync::OnceLock<Arc<batch::Committer>>,
    /// Log entries waiting to be written: what happened after a decision (an MCP call's outcome) and the entries of
    /// deferred decisions ([`Gateway::decide_deferring`]), written in order with the next batch that writes or by
    /// [`Gateway::flush_entries`], whichever comes first: no transaction of their own on the path of the next call.
    queued_entries: Mutex<Vec<QueuedEntry>>,
    /// The last attempt to write queued entries failed: no decision's entry waits in the queue until one succeeds
    /// (every decision is then committed before it is answered, and a store that cannot be written denies).
    queue_failing: std::sync::atomic::AtomicBool,
    /// What decisions that change nothing read, kept while the store's version stays the same.
    state_cache: StateCache,
    /// What the policy reads about the world and from where ([`world`]): from the policy's metadata, unless an
    /// operator gave it (`world_given`).
    world: RwLock<Arc<WorldSpec>>,
    world_given: std::sync::atomic::AtomicBool,
    pub counts: Counts,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("policy", &self.policy().compiled.policy()).finish_non_exhaustive()
    }
}

impl Gateway {
    pub fn new(policy: Policy, store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: Config) -> Gateway {
        let policy_meta = policy.meta.clone();
        store.note_policy(policy.compiled.policy());
        Gateway {
            policy: RwLock::new(Arc::new(policy)),
            store,
            clock,
            config,
            evaluators: Mutex::new(Vec::new()),
            batch: Mutex::new(Batch::default()),
            committer: std::sync::OnceLock::new(),
            queued_entries: Mutex::new(Vec::new()),
            queue_failing: std::sync::atomic::AtomicBool::new(false),
            state_cache: StateCache::default(),
            world: RwLock::new(Arc::new(WorldSpec::from_meta(&policy_meta))),
            world_given: std::sync::atomic::AtomicBool::new(false),
            counts: Counts::default(),
        }
    }

    /// What the policy reads about the world, and from where, instead of what its metadata says (`remit serve
    /// --world FILE`), also after a reload. Decisions that start after this returns use it.
    pub fn set_world(&self, world: WorldSpec) {
        self.world_given.store(true, std::sync::atomic::Ordering::SeqCst);
        *self.world.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(world);
    }

    pub fn world(&self) -> Arc<WorldSpec> {
        self.world.read().unwrap_or_else(|p| p.into_inner()).clone()
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
