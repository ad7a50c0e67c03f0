//! What a decision reads from the store — the live approvals of its mandate chain, the stops and facts, the counters
//! of its budgets, and for a policy that reads the world its lookups in the data sets — and a cache of it for the decisions that change nothing (`Gateway::decide_deferring`: a deny, an
//! allow without obligations), kept while the store's version ([`Store::version`]) stays the same. A stream of such
//! calls (the MCP proxy's) then reads the store once per change of its state rather than once per call, and waits
//! for no writer: reading the store was about a third of a decision's time, and waiting for the connection while the
//! proxy's writer thread put queued log entries in was as much again (docs/mcp.md, "Latency").
//!
//! Invariants:
//! - A decision's reads come all from one state: either all from the cache, kept for the version the store has now,
//!   or all from its transaction. What a transaction read is kept only when the store's version did not change
//!   between the moment it was taken (before the transaction began) and the end of the reads, so the cache never
//!   holds two states under one version.
//! - Time is applied as the store applies it: approvals are kept per mandate with the time they were read, and
//!   answered for a later time by the same filter as the store's (`expires_at > now`); an earlier time (a clock set
//!   back) is not answered.
//! - A decision that writes reads its own transaction, never the cache.
//! - A decision of a policy that reads the world (`core::world`) reads its data (each lookup by its keys: an
//!   entity, a tuple, a calendar's holidays) and its state either all from the cache, every lookup answered for
//!   one version, or all from one transaction: on the first lookup the cache cannot answer, everything is read
//!   again in the transaction ([`DataReads`]: [`CachedData`], then [`TxData`], whose lookups are kept as the
//!   state is). A policy with templates reads in the transaction always (`core::prepare`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value as Json};

use super::store::{DecisionState, Store, StoreError, StoreResult, StoredApproval, Tx};

/// What one decision reads: the approvals of `mandates` (its chain) and the counters `(budget, window)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    pub mandates: Vec<String>,
    pub counters: Vec<(String, String)>,
}

/// What was read for [`Needs`]: the approvals live at the time, mandate by mandate in the chain's order (each by id,
/// as [`Tx::live_approvals`] gives them), the state, and each counter's value in the order of `Needs::counters`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    pub approvals: Vec<StoredApproval>,
    pub state: DecisionState,
    pub counters: Vec<u64>,
}

impl Read {
    /// Reads `needs` at `now` in `tx`.
    pub fn from_tx(tx: &mut dyn Tx, needs: &Needs, now: i64) -> StoreResult<Read> {
        let (approvals, state, counters) = tx.read_for_decision(&needs.mandates, &needs.counters, now)?;
        Ok(Read { approvals, state, counters })
    }
}

/// One lookup of the gateway's data sets (`core::world`'s fill), as a key of the cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataKey {
    /// The entity `(kind, id)` ([`Tx::entity`]).
    Entity(String, String),
    /// The tuple `relation(a, b)` ([`Tx::holds`]).
    Holds(String, String, String),
    /// Every `b` of `relation(a, b)` ([`Tx::related`]: a calendar's holidays).
    Related(String, String),
}

/// What a [`DataKey`] looked up: shared, so that an answer from the cache copies no attributes.
#[derive(Debug, Clone, PartialEq)]
pub enum DataValue {
    Entity(Option<Arc<Map<String, Json>>>),
    Holds(bool),
    Related(Arc<Vec<String>>),
}

/// The data sets as a decision's fill reads them: from a transaction ([`TxData`]) or from the cache
/// ([`CachedData`]).
pub trait DataReads {
    fn entity(&mut self, kind: &str, id: &str) -> StoreResult<Option<Arc<Map<String, Json>>>>;
    fn holds(&mut self, relation: &str, a: &str, b: &str) -> StoreResult<bool>;
    fn related(&mut self, relation: &str, a: &str) -> StoreResult<Arc<Vec<String>>>;
}

/// The data sets read in a transaction; with [`TxData::recording`], each lookup and its answer recorded, to be kept
/// in the cache when the transaction saw the version the cache is for.
pub struct TxData<'t, 'a> {
    tx: &'t mut (dyn Tx + 'a),
    record: bool,
    seen: Vec<(DataKey, DataValue)>,
}

impl<'t, 'a> TxData<'t, 'a> {
    pub fn new(tx: &'t mut (dyn Tx + 'a)) -> TxData<'t, 'a> {
        TxData { tx, record: false, seen: Vec::new() }
    }

    pub fn recording(tx: &'t mut (dyn Tx + 'a)) -> TxData<'t, 'a> {
        TxData { tx, record: true, seen: Vec::new() }
    }

    fn saw(&mut self, key: impl FnOnce() -> DataKey, value: DataValue) {
        if self.record {
            self.seen.push((key(), value));
        }
    }

    /// The lookups made, with their answers.
    pub fn into_seen(self) -> Vec<(DataKey, DataValue)> {
        self.seen
    }
}

impl std::fmt::Debug for TxData<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxData").field("seen", &self.seen).finish_non_exhaustive()
    }
}

impl DataReads for TxData<'_, '_> {
    fn entity(&mut self, kind: &str, id: &str) -> StoreResult<Option<Arc<Map<String, Json>>>> {
        let found = self.tx.entity(kind, id)?.map(Arc::new);
        self.saw(|| DataKey::Entity(kind.into(), id.into()), DataValue::Entity(found.clone()));
        Ok(found)
    }

    fn holds(&mut self, relation: &str, a: &str, b: &str) -> StoreResult<bool> {
        let holds = self.tx.holds(relation, a, b)?;
        self.saw(|| DataKey::Holds(relation.into(), a.into(), b.into()), DataValue::Holds(holds));
        Ok(holds)
    }

    fn related(&mut self, relation: &str, a: &str) -> StoreResult<Arc<Vec<String>>> {
        let related = Arc::new(self.tx.related(relation, a)?);
        self.saw(|| DataKey::Related(relation.into(), a.into()), DataValue::Related(related.clone()));
        Ok(related)
    }
}

/// The data sets as the cache holds them for `version`. A lookup it does not hold (or held for another version) is
/// a miss: answered as nothing, and [`CachedData::missed`] says the fill must be done again in a transaction.
#[derive(Debug)]
pub struct CachedData<'c> {
    cache: &'c StateCache,
    version: u64,
    missed: bool,
}

impl<'c> CachedData<'c> {
    pub fn new(cache: &'c StateCache, version: u64) -> CachedData<'c> {
        CachedData { cache, version, missed: false }
    }

    /// Whether a lookup was not answered for the version.
    pub fn missed(&self) -> bool {
        self.missed
    }

    fn lookup(&mut self, key: DataKey) -> Option<DataValue> {
        if self.missed {
            return None;
        }
        let kept = self.cache.kept.lock().unwrap_or_else(|p| p.into_inner());
        let found = if kept.version == Some(self.version) { kept.data.get(&key).cloned() } else { None };
        self.missed = found.is_none();
        found
    }
}

impl DataReads for CachedData<'_> {
    fn entity(&mut self, kind: &str, id: &str) -> StoreResult<Option<Arc<Map<String, Json>>>> {
        Ok(match self.lookup(DataKey::Entity(kind.into(), id.into())) {
            Some(DataValue::Entity(found)) => found,
            _ => None,
        })
    }

    fn holds(&mut self, relation: &str, a: &str, b: &str) -> StoreResult<bool> {
        Ok(matches!(self.lookup(DataKey::Holds(relation.into(), a.into(), b.into())), Some(DataValue::Holds(true))))
    }

    fn related(&mut self, relation: &str, a: &str) -> StoreResult<Arc<Vec<String>>> {
        Ok(match self.lookup(DataKey::Related(relation.into(), a.into())) {
            Some(DataValue::Related(related)) => related,
            _ => Arc::default(),
        })
    }
}

/// The most approval lists and counters kept for one version (a version lasts until the next commit: the proxy's
/// writer commits every 50 ms, so this bounds a burst of new subjects or windows, not a steady state).
const MAX_KEPT: usize = 10_000;

/// Reads kept for the store's version they were read at.
#[derive(Debug, Default)]
pub struct StateCache {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    version: Option<u64>,
    state: Option<DecisionState>,
    /// Per mandate: the time its approvals were read, and those live then.
    approvals: HashMap<String, (i64, Vec<StoredApproval>)>,
    counters: HashMap<(String, String), u64>,
    /// The data sets' lookups ([`DataKey`]) with their answers.
    data: HashMap<DataKey, DataValue>,
}

impl StateCache {
    /// What `needs` reads at `now`, when everything it needs is kept for `version`.
    pub fn answer(&self, version: u64, needs: &Needs, now: i64) -> Option<Read> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.version != Some(version) {
            return None;
        }
        let state = kept.state.clone()?;
        let mut approvals = Vec::new();
        for mandate in &needs.mandates {
            let (read_at, live) = kept.approvals.get(mandate)?;
            if now < *read_at {
                return None;
            }
            approvals.extend(live.iter().filter(|a| a.expires_at > now).cloned());
        }
        let counters = needs.counters.iter().map(|key| kept.counters.get(key).copied()).collect::<Option<_>>()?;
        Some(Read { approvals, state, counters })
    }

    /// Keeps what was read for `needs` at `now` in a transaction that saw the store at `version` (the caller checks
    /// that the version did not change around its reads); forgets what was kept for another version.
    pub fn keep(&self, version: u64, needs: &Needs, now: i64, read: &Read) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.version != Some(version) || kept.approvals.len() + kept.counters.len() + kept.data.len() > MAX_KEPT {
            *kept = Kept { version: Some(version), ..Kept::default() };
        }
        kept.state = Some(read.state.clone());
        for mandate in &needs.mandates {
            let live = read.approvals.iter().filter(|a| &a.mandate == mandate).cloned().collect();
            kept.approvals.insert(mandate.clone(), (now, live));
        }
        for (key, value) in needs.counters.iter().zip(&read.counters) {
            kept.counters.insert(key.clone(), *value);
        }
    }
}

impl StateCache {
    /// Keeps the data lookups a fill made in a transaction that saw the store at `version` (the caller checks, as for
    /// [`StateCache::keep`], which it calls first for the same decision), unless the cache has moved on to another
    /// version since.
    pub fn keep_data(&self, version: u64, seen: Vec<(DataKey, DataValue)>) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.version != Some(version) {
            return;
        }
        kept.data.extend(seen);
    }
}

/// Where a decision reads: the transaction of its batch, or (a batch of decisions that change nothing, on a store
/// that tells its version) the cache, with a read transaction opened only when the cache cannot answer.
pub enum Reads<'t, 'a> {
    Tx(&'t mut (dyn Tx + 'a)),
    Cached { store: &'a dyn Store, tx: &'t mut Option<Box<dyn Tx + 'a>>, cache: &'t StateCache, version: u64 },
}

impl std::fmt::Debug for Reads<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reads::Tx(_) => f.write_str("Reads::Tx"),
            Reads::Cached { version, .. } => f.debug_struct("Reads::Cached").field("version", version).finish(),
        }
    }
}

impl<'a> Reads<'_, 'a> {
    /// What `needs` reads at `now`.
    pub fn read(&mut self, needs: &Needs, now: i64) -> StoreResult<Read> {
        match self {
            Reads::Tx(tx) => Read::from_tx(&mut **tx, needs, now),
            Reads::Cached { store, tx, cache, version } => {
                if let Some(read) = cache.answer(*version, needs, now) {
                    return Ok(read);
                }
                let tx = match tx {
                    Some(tx) => tx,
                    None => tx.insert(store.begin_read()?),
                };
                let read = Read::from_tx(tx.as_mut(), needs, now)?;
                if store.version() == Some(*version) {
                    cache.keep(*version, needs, now, &read);
                }
                Ok(read)
            }
        }
    }

    /// A transaction to read in: the batch's, opened (a read transaction) when it has none yet. What a decision
    /// reads there is not kept in the cache.
    pub fn reading_tx(&mut self) -> StoreResult<&mut (dyn Tx + 'a)> {
        match self {
            Reads::Tx(tx) => Ok(&mut **tx),
            Reads::Cached { store, tx, .. } => match tx {
                Some(tx) => Ok(tx.as_mut()),
                None => Ok(tx.insert(store.begin_read()?).as_mut()),
            },
        }
    }

    /// The transaction itself, for a decision that writes (its batch always has one).
    pub fn tx(&mut self) -> StoreResult<&mut (dyn Tx + '_)> {
        match self {
            Reads::Tx(tx) => Ok(&mut **tx),
            Reads::Cached { tx: Some(tx), .. } => Ok(tx.as_mut()),
            Reads::Cached { tx: None, .. } => Err(StoreError("a decision that writes has no transaction".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(id: &str, mandate: &str, expires_at: i64) -> StoredApproval {
        StoredApproval {
            id: id.into(),
            kind: "k".into(),
            mandate: mandate.into(),
            issued_at: 0,
            expires_at,
            tool: None,
            target: None,
            digest: None,
            manifest: None,
            single_use: true,
            consumed: false,
            approver: "user:a".into(),
            access_request: None,
            consumed_by: None,
            consumed_at: None,
            agent: None,
        }
    }

    /// Kept reads answer only for their version, only what was kept, for a time no earlier than they were read, and
    /// with the store's filter on expiry applied at the time asked.
    #[test]
    fn the_cache_answers_what_the_store_would() {
        let cache = StateCache::default();
        let needs =
            Needs { mandates: vec!["root".into(), "child".into()], counters: vec![("b".into(), "total".into())] };
        let read = Read {
            approvals: vec![approval("a1", "root", 200), approval("a2", "child", 100), approval("a3", "child", 300)],
            state: DecisionState { stops: vec!["m".into()], ..Default::default() },
            counters: vec![7],
        };
        assert_eq!(cache.answer(1, &needs, 50), None, "nothing kept");
        cache.keep(1, &needs, 50, &read);
        assert_eq!(cache.answer(1, &needs, 50), Some(read.clone()));
        assert_eq!(cache.answer(2, &needs, 50), None, "another version");
        assert_eq!(cache.answer(1, &needs, 49), None, "a time before the read");
        // At 150 the approval that expired at 100 is no longer live; the order stays mandate by mandate.
        let later = cache.answer(1, &needs, 150).unwrap();
        let ids: Vec<&str> = later.approvals.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["a1", "a3"]);
        // A counter or a mandate not kept: no answer.
        let more = Needs { counters: vec![("b".into(), "hour:x".into())], ..needs.clone() };
        assert_eq!(cache.answer(1, &more, 50), None);
        let other = Needs { mandates: vec!["other".into()], ..needs.clone() };
        assert_eq!(cache.answer(1, &other, 50), None);
        // Keeping for a new version forgets the old one's reads.
        cache.keep(2, &other, 60, &Read { approvals: vec![], state: DecisionState::default(), counters: vec![7] });
        assert_eq!(cache.answer(2, &needs, 60), None);
        assert!(cache.answer(2, &other, 60).is_some());
    }

    /// Data lookups are answered only for the version they were kept for, only those kept; the first one not
    /// answered marks the whole fill as missed (what it answers after that is nothing); lookups kept for a version
    /// the cache has moved on from are dropped.
    #[test]
    fn data_lookups_are_answered_for_their_version_only() {
        let cache = StateCache::default();
        let entity = DataKey::Entity("agent".into(), "agent:a".into());
        let team: Map<String, Json> = serde_json::from_str(r#"{"team": "payments"}"#).unwrap();
        let seen = vec![
            (entity.clone(), DataValue::Entity(Some(Arc::new(team.clone())))),
            (DataKey::Holds("member_of".into(), "agent:a".into(), "team:x".into()), DataValue::Holds(true)),
            (
                DataKey::Related("holiday".into(), "office".into()),
                DataValue::Related(Arc::new(vec!["2026-12-25".into()])),
            ),
        ];
        cache.keep_data(1, seen.clone());
        assert!(CachedData::new(&cache, 1).entity("agent", "agent:a").unwrap().is_none(), "no version kept yet");
        let empty = Needs::default();
        cache.keep(1, &empty, 0, &Read::default());
        cache.keep_data(1, seen.clone());
        let mut data = CachedData::new(&cache, 1);
        assert_eq!(data.entity("agent", "agent:a").unwrap().as_deref(), Some(&team));
        assert!(data.holds("member_of", "agent:a", "team:x").unwrap());
        assert_eq!(*data.related("holiday", "office").unwrap(), ["2026-12-25"]);
        assert!(!data.missed());
        // A tuple not kept: missed, and nothing answered after it.
        assert!(!data.holds("member_of", "agent:a", "team:y").unwrap());
        assert!(data.missed());
        assert!(data.entity("agent", "agent:a").unwrap().is_none());
        // Another version: missed; lookups kept for the old version once the cache moved on: dropped.
        let mut newer = CachedData::new(&cache, 2);
        assert!(newer.entity("agent", "agent:a").unwrap().is_none() && newer.missed());
        cache.keep(2, &empty, 0, &Read::default());
        cache.keep_data(1, seen);
        let mut newer = CachedData::new(&cache, 2);
        assert!(newer.entity("agent", "agent:a").unwrap().is_none() && newer.missed());
    }
}
