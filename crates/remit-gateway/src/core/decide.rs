//! The gateway's decisions as front ends ask for them: a request's bytes or its JSON object, committed before the
//! answer or (deferring) with its entry queued, a later round of a call; and the tool listing of a request's
//! subject. Uses [`super::batch`] (which runs them), [`super::prepare`] and [`super::policy`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{Map, Value as Json};

use super::batch::Job;
use super::obligations::Carried;
use super::{new_id, Decided, Gateway, REASON_STORE};
use crate::state_cache::Reads;
use crate::store::StoreError;
use remit_lang::eval::Decision;

/// A request as a front end hands it to the gateway.
enum Request<'a> {
    /// remit's request JSON, as it came.
    Bytes(&'a [u8]),
    /// The same, already read.
    Value(Map<String, Json>),
}

impl Gateway {
    /// Decides one request (remit's request JSON, docs/requests.md), carrying out its obligations and logging it.
    pub fn decide(&self, request: &[u8]) -> Decided {
        self.decide_with(Request::Bytes(request), false)
    }

    /// [`Gateway::decide`] for a caller the operator may trust with AuthZEN `properties` (`trusted`: an
    /// enforcement point named by `--trusted-pep`): its `from properties` values are kept. Every other caller's
    /// are removed ([`Gateway::decide`]), and nobody's `from data` values are ever kept.
    pub fn decide_as(&self, request: &[u8], trusted: bool) -> Decided {
        self.decide_with_continuing(Request::Bytes(request), false, None, trusted)
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
        self.decide_with_continuing(Request::Value(request), false, Some(round.to_string()), false)
    }

    /// [`Gateway::decide_as`] for an async front end: the request is prepared on the calling thread, and the
    /// result awaited while the committer thread runs its batch ([`Gateway::queue_awaited`]); no thread blocks for
    /// it. The same group commit, the same promises: answered only after its batch committed.
    pub async fn decide_awaiting(self: &Arc<Self>, request: &[u8], trusted: bool) -> Decided {
        let (job, id, policy_hash) = self.job(Request::Bytes(request), false, None, trusted);
        let (result, handed) = self.queue_awaited(job).await;
        if let Some(handed) = handed {
            self.counts.stages.wake.observe(handed.elapsed().as_secs_f64());
        }
        self.finish(result, id, policy_hash)
    }

    fn decide_with(&self, request: Request<'_>, defer: bool) -> Decided {
        self.decide_with_continuing(request, defer, None, false)
    }

    fn decide_with_continuing(
        &self,
        request: Request<'_>,
        defer: bool,
        continues: Option<String>,
        trusted: bool,
    ) -> Decided {
        let (job, id, policy_hash) = self.job(request, defer, continues, trusted);
        let result = self.run_batched(job);
        self.finish(result, id, policy_hash)
    }

    /// The job of a request, prepared: with its decision's id and the policy's hash.
    fn job(
        &self,
        request: Request<'_>,
        defer: bool,
        continues: Option<String>,
        trusted: bool,
    ) -> (Job, String, String) {
        let policy = self.policy();
        let policy_hash = policy.compiled.policy().to_string();
        let now = self.clock.now();
        let id = new_id("dec");
        let (prepared, request) = match request {
            Request::Bytes(bytes) => (self.prepare(bytes, &policy.meta, trusted), bytes.to_vec()),
            Request::Value(value) => {
                // A request the gateway cannot prepare goes to the module as it is, as bytes.
                let odd = value.get("context").is_some_and(|c| !c.is_object());
                let raw = if odd { serde_json::to_vec(&value).expect("a JSON value serializes") } else { Vec::new() };
                (self.prepare_value(value, &policy.meta, trusted), raw)
            }
        };
        if !prepared.ignored.is_empty() {
            self.counts.ignored_fields.fetch_add(1, Ordering::Relaxed);
        }
        let queued = std::time::Instant::now();
        let job = Job { policy: policy.clone(), id: id.clone(), raw: request, prepared, now, queued, defer, continues };
        (job, id, policy_hash)
    }

    /// A job's result as answered (a store that failed: a deny), counted.
    fn finish(&self, result: crate::store::StoreResult<Decided>, id: String, policy_hash: String) -> Decided {
        let decided = match result {
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

    /// The tool listing (docs/abi.md) of a request's subject, with the gateway's state and time filled in.
    pub fn visible_tools(&self, request: &[u8]) -> Result<Vec<u8>, StoreError> {
        self.visible_tools_as(request, false)
    }

    /// [`Gateway::visible_tools`] for a caller that may be trusted with `properties` ([`Gateway::decide_as`]).
    pub fn visible_tools_as(&self, request: &[u8], trusted: bool) -> Result<Vec<u8>, StoreError> {
        let policy = self.policy();
        let now = self.clock.now();
        let prepared = self.prepare(request, &policy.meta, trusted);
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
            self.fill(&mut reads, &mut value, &policy.meta, &prepared.world, now, None)?;
        }
        let bytes = serde_json::to_vec(&value).expect("a JSON value serializes");
        Ok(self.module_listing(&policy, &bytes))
    }
}
