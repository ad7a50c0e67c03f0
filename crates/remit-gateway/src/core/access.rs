//! Access requests: filing (or joining) one for an escalated call, the inbox's lists, and answering one — approving
//! mints the approvals the call was missing, bound as the policy says. Uses [`super::log`] (masked arguments) and
//! [`super::policy`].

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

use super::{new_id, ActionError, Gateway};
use crate::keys::hex;
use crate::store::{
    AccessRequest, Cursor, Page, StoreError, StoreResult, StoredApproval, Tx, APPROVED, DENIED, PENDING,
};

/// Where an escalated call waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRequestRef {
    pub id: String,
    pub url: String,
    pub expires_at: i64,
}

impl Gateway {
    /// Files (or joins) the access request of an escalated call.
    pub(super) fn escalate(
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
            log_writer: Some(tx.writer().to_string()).filter(|w| !w.is_empty()),
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
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
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
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
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
}
