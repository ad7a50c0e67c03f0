//! Log entries that wait to be written: a decision's entry built from its parts (serialized only when written), the
//! outcome entries front ends queue, and how the queue is written — with the next batch that writes or by a flush,
//! in order, put back at the head when it cannot be. Depends on nothing else of the core.

use std::sync::atomic::Ordering;

use serde_json::Value as Json;

use super::Gateway;
use crate::store::{StoreError, Tx};

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
pub(super) type QueuedEntry = (i64, &'static str, Body);

/// A queued entry's body: its text, or a deferred decision's parts, serialized only when the entry is written (by
/// the writer thread, or in the next transaction that writes), not on the way to the decision's answer.
pub(super) enum Body {
    Text(String),
    Decision(Box<DecisionParts>),
}

/// What a decision's log entry says ([`LogBody`], owned).
pub(super) struct DecisionParts {
    pub(super) id: String,
    pub(super) request: Json,
    pub(super) decision: Json,
    pub(super) policy: String,
    pub(super) approvals_used: Vec<Json>,
    pub(super) ignored: Vec<String>,
    pub(super) module_decision: Option<(Json, String)>,
    pub(super) access_request: Option<String>,
    pub(super) shadow: bool,
}

impl DecisionParts {
    /// The entry's text; the request with the masked arguments' values replaced (`mask`).
    pub(super) fn text(&self, mask: &[String]) -> String {
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

impl Gateway {
    /// Writes the queued entries, then `deferred` (the running batch's own), into `tx` in a savepoint of their own:
    /// those taken from the queue are added to `taken`, and `deferred` is emptied (its entries commit with the
    /// batch's decisions, or go with them). If they cannot be written, the queue's are queued again, `deferred` is
    /// left as it was, and the decisions go on.
    pub(super) fn write_queued(
        &self,
        tx: &mut Box<dyn Tx + '_>,
        taken: &mut Vec<QueuedEntry>,
        deferred: &mut Vec<QueuedEntry>,
    ) {
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
    pub(super) fn requeue(&self, entries: Vec<QueuedEntry>) {
        if entries.is_empty() {
            return;
        }
        let mut queue = self.queued_entries.lock().unwrap_or_else(|p| p.into_inner());
        let later = std::mem::replace(&mut *queue, entries);
        queue.extend(later);
    }

    /// A queued entry's text.
    fn body_text<'b>(&self, body: &'b Body) -> std::borrow::Cow<'b, str> {
        match body {
            Body::Text(text) => text.into(),
            Body::Decision(parts) => parts.text(&self.config.mask).into(),
        }
    }

    pub(super) fn masked(&self, request: Json) -> Json {
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
}
