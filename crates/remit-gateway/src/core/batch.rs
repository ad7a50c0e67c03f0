//! Deciding in batches (group commit): queued decisions run one after the other in one store transaction, each in
//! its own savepoint, and none is answered before the commit; and one decision inside that transaction — the module
//! asked, the obligations carried out, an escalation filed, the entry logged or queued. Uses [`super::prepare`],
//! [`super::obligations`], [`super::access`], [`super::log`] and [`super::policy`]; [`super::decide`] uses it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use serde_json::Value as Json;

use super::log::{Body, DecisionParts, QueuedEntry};
use super::obligations::Carried;
use super::policy::Policy;
use super::prepare::Prepared;
use super::{Decided, Gateway, REASON_OBLIGATION, REASON_SHADOW};
use crate::state_cache::Reads;
use crate::store::{StoreError, StoreResult, Tx};
use remit_lang::eval::Decision;

/// The most decisions one transaction commits together.
const MAX_BATCH: usize = 256;
/// How many times the jobs of a batch that lost to a concurrent transaction run again before they are denied.
const CONFLICT_RETRIES: u32 = 3;

/// A decision waiting for its batch.
pub(super) struct Job {
    pub(super) policy: Arc<Policy>,
    pub(super) id: String,
    pub(super) raw: Vec<u8>,
    pub(super) prepared: Prepared,
    pub(super) now: i64,
    /// When the job was queued, for the log lag.
    pub(super) queued: std::time::Instant,
    /// The round of an earlier call this one continues ([`Gateway::decide_continuing`]): its key in the store.
    pub(super) continues: Option<String>,
    /// Whether the decision's entry may wait in the queue when the decision changes nothing else
    /// ([`Gateway::decide_deferring`]).
    pub(super) defer: bool,
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
pub(super) struct Slot {
    handed: Mutex<Handing>,
    ready: std::sync::Condvar,
    /// The job's caller awaits it ([`Answer`]) rather than blocking: it is never handed the lead (the committer
    /// thread leads for it).
    awaited: bool,
}

#[derive(Default)]
struct Handing {
    handed: Option<Handed>,
    /// When the result was handed (its batch committed), for the wake-up's time (`Stages::wake`).
    at: Option<std::time::Instant>,
    /// Whether the job's caller waits on `ready`: a leader fills its own slot too, and waking nobody is still a
    /// system call (a futex wake per decision).
    waiting: bool,
    /// The task awaiting the slot ([`Answer`]).
    waker: Option<Waker>,
}

impl Slot {
    fn hand(&self, handed: Handed, at: Option<std::time::Instant>) {
        let mut handing = self.handed.lock().unwrap_or_else(|p| p.into_inner());
        handing.handed = Some(handed);
        handing.at = at;
        if handing.waiting {
            self.ready.notify_all();
        }
        let waker = handing.waker.take();
        drop(handing);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn fill(&self, result: StoreResult<Decided>, at: Option<std::time::Instant>) {
        self.hand(Handed::Done(result), at);
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

/// The result of a job queued by [`Gateway::queue_awaited`], as a future: ready once its batch committed (or failed).
pub(super) struct Answer(Arc<Slot>);

impl std::future::Future for Answer {
    /// The result, and when it was handed (with `REMIT_DEBUG_TIMING`).
    type Output = (StoreResult<Decided>, Option<std::time::Instant>);

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut handing = self.0.handed.lock().unwrap_or_else(|p| p.into_inner());
        match handing.handed.take() {
            Some(Handed::Done(result)) => Poll::Ready((result, handing.at)),
            // An awaited slot is never handed the lead.
            Some(Handed::Lead) => {
                Poll::Ready((Err(StoreError("the group commit handed the lead to a task".into())), None))
            }
            None => {
                if !handing.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    handing.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// The thread that leads batches for the jobs whose callers await them (an async front end: no caller thread of
/// theirs can run a batch). Started with the first such job; it ends when the gateway is dropped.
pub(super) struct Committer {
    work: Mutex<bool>,
    wake: Condvar,
}

impl Committer {
    fn start(gateway: Weak<Gateway>) -> Arc<Committer> {
        let committer = Arc::new(Committer { work: Mutex::new(false), wake: Condvar::new() });
        let own = committer.clone();
        std::thread::Builder::new()
            .name("remit-committer".into())
            .spawn(move || loop {
                {
                    let mut work = own.work.lock().unwrap_or_else(|p| p.into_inner());
                    while !*work {
                        let (next, _) = own
                            .wake
                            .wait_timeout(work, std::time::Duration::from_secs(1))
                            .unwrap_or_else(|p| p.into_inner());
                        work = next;
                        if !*work && gateway.strong_count() == 0 {
                            return;
                        }
                    }
                    *work = false;
                }
                match gateway.upgrade() {
                    Some(gateway) => gateway.lead_until_empty(),
                    None => return,
                }
            })
            .expect("a committer thread");
        committer
    }

    /// Makes the committer lead: the queue's `leading` is already set for it.
    fn lead(&self) {
        *self.work.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_one();
    }
}

#[derive(Default)]
pub(super) struct Batch {
    jobs: Vec<(Job, Arc<Slot>)>,
    /// A leader is running batches.
    leading: bool,
}

impl Gateway {
    /// Group commit: the caller queues its job; whoever finds no batch running becomes the leader and runs every
    /// queued job, one after the other, in one transaction (each in its own savepoint, so a job whose writes fail
    /// leaves the others intact), commits once, and hands each job its result. No result is handed out before the
    /// commit, so an answered decision is always in the log. Jobs are taken before the transaction begins: a job
    /// queued after a stop (or any change) committed sees it.
    ///
    /// A leader leads until its own job is done, then hands the lead to the caller of the oldest queued job (which
    /// runs the next batch, its own job in it): under a steady stream of calls no caller keeps leading batches of
    /// others while its own answer waits.
    pub(super) fn run_batched(&self, job: Job) -> StoreResult<Decided> {
        let slot = Arc::new(Slot::default());
        let lead = self.queue_job(job, &slot);
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
                    // Hand on the lead (still `leading`, so nobody else takes the queue meanwhile), or end it. An
                    // awaited job's caller cannot lead: the committer thread does.
                    match queue.jobs.first() {
                        Some((_, next)) if next.awaited => match self.committer.get() {
                            Some(committer) => committer.lead(),
                            None => next.hand(Handed::Lead, None),
                        },
                        Some((_, next)) => next.hand(Handed::Lead, None),
                        None => queue.leading = false,
                    }
                    break;
                }
                let take = queue.jobs.len().min(MAX_BATCH);
                queue.jobs.drain(..take).collect::<Vec<_>>()
            };
            self.run_taken(jobs);
        }
        match slot.wait() {
            Handed::Done(result) => result,
            // Only a queued job is handed the lead, and this one is done: never happens, and would deny.
            Handed::Lead => Err(StoreError("the group commit lost a result".into())),
        }
    }

    /// Queues `job` with `slot`: whether its caller is to lead (no batch is running).
    fn queue_job(&self, job: Job, slot: &Arc<Slot>) -> bool {
        let mut queue = self.batch.lock().unwrap_or_else(|p| p.into_inner());
        queue.jobs.push((job, slot.clone()));
        self.counts.log_pending.fetch_add(1, Ordering::Relaxed);
        !std::mem::replace(&mut queue.leading, true)
    }

    /// Group commit for a caller that awaits its result (the HTTP front end, on tokio's workers) rather than
    /// blocking a thread for it: the job is queued, and when no batch is running the committer thread leads (it
    /// runs batches until the queue is empty). Per decision one task wake-up, where a blocking caller costs a
    /// thread of the blocking pool, its wake-up, and the wake-up of the task awaiting that thread.
    pub(super) fn queue_awaited(self: &Arc<Self>, job: Job) -> Answer {
        let slot = Arc::new(Slot { awaited: true, ..Slot::default() });
        let committer = self.committer.get_or_init(|| Committer::start(Arc::downgrade(self)));
        if self.queue_job(job, &slot) {
            committer.lead();
        }
        Answer(slot)
    }

    /// The committer thread's lead: batches until the queue is empty (it is nobody's own answer that waits).
    fn lead_until_empty(&self) {
        loop {
            let jobs = {
                let mut queue = self.batch.lock().unwrap_or_else(|p| p.into_inner());
                if queue.jobs.is_empty() {
                    queue.leading = false;
                    return;
                }
                let take = queue.jobs.len().min(MAX_BATCH);
                queue.jobs.drain(..take).collect::<Vec<_>>()
            };
            self.run_taken(jobs);
        }
    }

    /// Runs the jobs taken from the queue as one batch and hands each its result.
    fn run_taken(&self, jobs: Vec<(Job, Arc<Slot>)>) {
        let stages = &self.counts.stages;
        let taken = stages.enabled.then(std::time::Instant::now);
        // A panic while running the batch must not leave its followers waiting: they get a store error
        // (a deny), and the lead passes on as usual.
        let run = std::panic::AssertUnwindSafe(|| self.run_batch_retrying(&jobs));
        let results = std::panic::catch_unwind(run)
            .unwrap_or_else(|_| vec![Err(StoreError("the batch failed".into())); jobs.len()]);
        let committed = std::time::Instant::now();
        if let Some(taken) = taken {
            stages.jobs.observe(jobs.len() as f64 * 1e-5);
            for (job, _) in &jobs {
                stages.queue.observe(taken.duration_since(job.queued).as_secs_f64());
                stages.batch.observe(committed.duration_since(taken).as_secs_f64());
            }
        }
        for ((job, slot), result) in jobs.iter().zip(results) {
            self.counts.log_lag.observe(committed.duration_since(job.queued).as_secs_f64());
            self.counts.log_pending.fetch_sub(1, Ordering::Relaxed);
            slot.fill(result, taken.map(|_| committed));
        }
    }

    /// [`Gateway::run_batch`], then again for the jobs that lost to a concurrent transaction (a store shared by
    /// several gateways: [`StoreError::is_conflict`]), at most [`CONFLICT_RETRIES`] times, after a short random
    /// pause; a job still in conflict then is denied (`gateway.store-unavailable`), never allowed. The jobs that
    /// succeeded were committed and keep their results.
    fn run_batch_retrying(&self, jobs: &[(Job, Arc<Slot>)]) -> Vec<StoreResult<Decided>> {
        let mut results = self.run_batch(jobs.iter().map(|(job, _)| job));
        for attempt in 0..CONFLICT_RETRIES {
            let again: Vec<usize> =
                (0..results.len()).filter(|&i| matches!(&results[i], Err(e) if e.is_conflict())).collect();
            if again.is_empty() {
                break;
            }
            self.counts.store_retries.fetch_add(again.len() as u64, Ordering::Relaxed);
            // A pause that grows and differs between replicas, so that the two that collided do not again.
            let jitter = crate::core::new_id("").bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
            std::thread::sleep(std::time::Duration::from_micros((1_000 << attempt) + jitter % 2_000));
            let rerun = self.run_batch(again.iter().map(|&i| &jobs[i].0));
            for (i, result) in again.into_iter().zip(rerun) {
                results[i] = result;
            }
        }
        results
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
            if let Err(e) = prefetch(tx.as_mut(), &jobs) {
                return vec![Err(e); count];
            }
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
        // A store shared by several gateways gives its clock, so that they decide by one.
        let now = tx.as_ref().and_then(|tx| tx.now()).unwrap_or(job.now);
        if defer {
            // A deferring decision writes nothing (it answers `Rerun` before it would): no savepoint.
            let mut reads = match cached {
                Some(version) => Reads::Cached { store: self.store.as_ref(), tx, cache: &self.state_cache, version },
                None => Reads::Tx(tx.as_mut().ok_or_else(missing)?.as_mut()),
            };
            return self.decide_in_store(&mut reads, job, true, now);
        }
        let tx = tx.as_mut().ok_or_else(missing)?;
        tx.savepoint()?;
        let stored = self.decide_in_store(&mut Reads::Tx(tx.as_mut()), job, false, now);
        tx.release(stored.is_ok())?;
        stored
    }

    /// One decision inside the batch's transaction (see [`Gateway::decide`]); its writes are kept only if the
    /// transaction commits. With `defer`, a decision that changes nothing but the log writes nothing (its entry is
    /// returned, to be queued), and one that would change the state writes nothing either: [`Stored::Rerun`].
    fn decide_in_store(&self, reads: &mut Reads<'_, '_>, job: &Job, defer: bool, now: i64) -> StoreResult<Stored> {
        let Job { policy, id, raw, prepared, continues, .. } = job;
        let id = id.as_str();
        let continues: Option<Carried> = match continues {
            Some(round) => reads.tx()?.take_round(round, now)?.and_then(|text| serde_json::from_str(&text).ok()),
            None => None,
        };
        let continues = continues.as_ref();
        let prepared = prepared.clone();
        let policy_hash = policy.compiled.policy();
        let Prepared { value, ignored, early_deny, world } = prepared;
        let mut chain = Vec::new();
        let (sent, mut decision_json) = match (value, early_deny) {
            (Some(value), Some(reason)) => {
                (Json::Object(value), Decision::deny(vec![reason.to_string()], policy_hash).to_json())
            }
            (Some(mut value), None) => {
                chain = self.fill(reads, &mut value, &policy.meta, &world, now, continues)?;
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
}

/// Reads ahead, in `tx`, what the jobs of a write batch will read (`Tx::prefetch`): every approval and counter their
/// requests need, at the earliest time any of them decides at (the transaction's clock, when the store gives one).
/// The counters of a decision under an instance depend on the instance (a template's budget is counted per instance),
/// so for a policy with templates the instances of the jobs' subjects, and the instances above them, are read ahead
/// first, when the store reads ahead (`Tx::prefetch_grants`: one read), and filled into a copy of each request to
/// find its needs.
fn prefetch(tx: &mut dyn Tx, jobs: &[&Job]) -> StoreResult<()> {
    let now = tx.now();
    let ready = |job: &&&Job| matches!(&job.prepared, Prepared { value: Some(_), early_deny: None, .. });
    let mut holders: Vec<String> = jobs
        .iter()
        .filter(ready)
        .filter(|job| !job.policy.meta.templates.is_empty())
        .filter_map(|job| job.prepared.value.as_ref().and_then(super::grants::subject_of))
        .collect();
    holders.sort_unstable();
    holders.dedup();
    let grants = if holders.is_empty() { None } else { tx.prefetch_grants(&holders)? };
    let mut mandates: Vec<String> = Vec::new();
    let mut counters: Vec<(String, String)> = Vec::new();
    let mut earliest = i64::MAX;
    for job in jobs {
        let Prepared { value: Some(value), early_deny: None, .. } = &job.prepared else { continue };
        let at = now.unwrap_or(job.now);
        earliest = earliest.min(at);
        let meta = &job.policy.meta;
        // The subject's instances and those above them (a sub-delegated one's parent, its parent's, …), as the
        // decision will fill them: from what the store read ahead (no round trip), so that the counters and
        // approvals of the whole chain are read and locked with the batch's.
        let subject =
            grants.as_ref().filter(|_| !meta.templates.is_empty()).and_then(|_| super::grants::subject_of(value));
        let held = match subject {
            Some(subject) => Some(super::grants::filled(tx, &subject)?),
            None => None,
        };
        let (needs, _) = match held {
            Some(held) => {
                let mut filled = value.clone();
                super::grants::fill_read_grants(&mut filled, meta, &held);
                super::prepare::needs_of(&filled, meta, at)
            }
            None => super::prepare::needs_of(value, meta, at),
        };
        mandates.extend(needs.mandates);
        counters.extend(needs.counters);
    }
    if earliest == i64::MAX {
        return Ok(());
    }
    mandates.sort_unstable();
    mandates.dedup();
    counters.sort_unstable();
    counters.dedup();
    tx.prefetch(&mandates, &counters, earliest)
}
