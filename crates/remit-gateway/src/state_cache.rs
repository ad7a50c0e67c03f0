//! What a decision reads from the store — the live approvals of its mandate chain, the stops and facts, the counters
//! of its budgets — and a cache of it for the decisions that change nothing (`Gateway::decide_deferring`: a deny, an
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
//! - A decision of a policy that reads the world (`core::world`) reads all of it — its data, looked up by keys no
//!   cache holds, and its state — in a transaction ([`Reads::reading_tx`]), never the cache.

use std::collections::HashMap;
use std::sync::Mutex;

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
        if kept.version != Some(version) || kept.approvals.len() + kept.counters.len() > MAX_KEPT {
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
}
