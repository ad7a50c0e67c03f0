//! Instances of templates granted at run time (docs/grants-design.md, "Grants at run time"): granted, changed
//! (a new version) and revoked by a principal or whoever the template's `granted by` admits, each in one store
//! transaction with its log entry (`grant`, `change`, `revoke`), and filled into the requests of their holder
//! (`context.grants`, [`fill_grants`]). No HTTP here: `gateway::http` calls these. Uses [`super::policy`].

use serde_json::{json, Map, Value as Json};

use super::{new_id, Gateway};
use crate::store::{GrantRecord, StoreError, StoreResult, Tx};
use remit_lang::eval::grants::MAX_GRANTS;
use remit_lang::wasm::meta::{PolicyMeta, TemplateMeta};

/// What someone asks to grant: an instance of `template` for `principal`, held by `holder`, with `params`.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantAsk {
    pub template: String,
    pub principal: String,
    pub holder: String,
    pub params: Map<String, Json>,
    /// The instance this one is sub-delegated from (`ID` or `TEMPLATE/ID`), for a template under a template; the
    /// principal is then the parent's (blank: taken from it).
    pub parent: Option<String>,
}

/// Why a grant, a change or a revocation was refused; `gateway::http` answers each with its status.
#[derive(Debug, Clone, PartialEq)]
pub enum GrantError {
    /// No instance with this id (`404`).
    NotFound(String),
    /// The identity may not grant this instance (`403`).
    Forbidden(String),
    /// The instance is not within its template (`422`): `refusal` names the failing clause (`problem`, `field`,
    /// `condition`, `value`).
    Refused {
        message: String,
        refusal: Json,
    },
    /// The instance was revoked already (`409`).
    Revoked(String),
    /// The gateway cannot check instances of this policy (`501`): it has no checked program (a `.wasm` or a
    /// bundle), or the template is not proved and the gateway was not told to grant unproved templates.
    Unavailable(String),
    Store(StoreError),
}

impl std::fmt::Display for GrantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantError::NotFound(m)
            | GrantError::Forbidden(m)
            | GrantError::Revoked(m)
            | GrantError::Unavailable(m)
            | GrantError::Refused { message: m, .. } => f.write_str(m),
            GrantError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl From<StoreError> for GrantError {
    fn from(e: StoreError) -> GrantError {
        GrantError::Store(e)
    }
}

/// A refusal naming the failing clause, as the interpreter's check names it.
fn refused(problem: &str, field: &str, condition: &str, value: Option<&str>) -> GrantError {
    let mut message = format!("{problem}: `{field}` fails `{condition}`");
    if let Some(value) = value {
        message.push_str(&format!(" (value `{value}`)"));
    }
    let refusal = json!({"problem": problem, "field": field, "condition": condition, "value": value});
    GrantError::Refused { message, refusal }
}

/// Whether `identity` may grant (change, revoke) an instance of `template` whose principal is `principal`: it is
/// the principal, or the template's `granted by` admits it.
pub fn may_grant(template: &TemplateMeta, principal: &str, identity: &str) -> bool {
    let by = &template.granted_by;
    identity == principal || remit_lang::eval::admits(by.principal, &by.ids, &by.prefixes, identity, principal)
}

impl Gateway {
    /// The template `name` of the policy served, and whether the gateway may check instances of it.
    fn template(&self, name: &str) -> Result<TemplateMeta, GrantError> {
        let policy = self.policy();
        let Some(template) = policy.meta.templates.iter().find(|t| t.name == name) else {
            let condition = "a template of the policy served";
            return Err(refused("unknown-template", "template", condition, Some(name)));
        };
        if !template.proved && !self.config.grant_unproved {
            return Err(GrantError::Unavailable(format!(
                "the template `{name}` is not proved to narrow `{}` (`remit::template-narrowing-unproved`): the \
                 gateway grants its instances only with `--grant-unproved`",
                template.parent
            )));
        }
        Ok(template.clone())
    }

    /// Checks an instance against its template as the interpreter does (`remit_lang::eval::grants::
    /// validate_instance`, the check every decision runs again): the principal (`for`) and holder (`holder`), each
    /// parameter's type, the bounds (by the interpreter's condition code), the window inside the parent's and not
    /// ended at `now`. It needs the checked program: a gateway serving a `.wasm` or a bundle has none (`501`).
    fn check_instance(&self, record: &GrantRecord, ancestors: &[GrantRecord], now: i64) -> Result<(), GrantError> {
        let policy = self.policy();
        let Some(program) = &policy.program else {
            return Err(GrantError::Unavailable(
                "checking an instance needs the policy's sources: this gateway serves a module or a bundle".into(),
            ));
        };
        let Some(template) = program.templates.iter().find(|t| t.name == record.template) else {
            return Err(refused(
                "unknown-template",
                "template",
                "a template of the policy served",
                Some(&record.template),
            ));
        };
        let instance = record.instance();
        let ancestors: Vec<_> = ancestors.iter().map(GrantRecord::instance).collect();
        let now = i128::from(now) * remit_lang::value::NANOS_PER_SECOND;
        let concrete_params = || {
            let mut params = record.params.clone();
            params.insert("principal".into(), Json::from(record.principal.clone()));
            params.insert("holder".into(), Json::from(record.holder.clone()));
            params.insert("granted".into(), Json::from(instance.granted.clone()));
            // Under sub-delegation the proof builds the concrete chain: each instance above by its values, keyed
            // `parent.NAME`, `parent.parent.NAME`, … (the principal is the chain's one).
            for (level, above) in ancestors.iter().enumerate() {
                let prefix = "parent.".repeat(level + 1);
                for (name, value) in &above.params {
                    params.insert(format!("{prefix}{name}"), value.clone());
                }
                params.insert(format!("{prefix}holder"), Json::from(above.holder.clone()));
                params.insert(format!("{prefix}granted"), Json::from(above.granted.clone()));
            }
            params
        };
        let id = program.templates.iter().position(|t| t.name == record.template).expect("found above");
        let checked = remit_lang::eval::grants::validate_instance_under(program, template, &instance, &ancestors, now);
        // An unproved template (granted with `--grant-unproved`): this instance, within its bounds, is proved on its
        // own; one that widens its parent is refused with the witness.
        if checked.is_ok() && !template.proved {
            use remit_lang::check::narrowing::parametric::{concrete, Concrete};
            if let Concrete::Widens(request) = concrete(program, id, &concrete_params()) {
                let parent = match template.parent {
                    remit_lang::ir::Parent::Mandate(m) => program.mandates[m].name.clone(),
                    remit_lang::ir::Parent::Template(t) => program.templates[t].name.clone(),
                };
                let refusal = remit_lang::eval::grants::GrantRefusal {
                    problem: remit_lang::eval::grants::GrantProblem::InstanceWidens,
                    field: "template".into(),
                    condition: format!("template {} under {parent}", template.name),
                    value: Some(format!("{:?}", template.name)),
                    witness: Some(Box::new(request)),
                    instance_narrows: Some(false),
                };
                let message = format!(
                    "{refusal}; the template is not proved and this instance would allow a request its parent \
                     refuses (`witness`)"
                );
                return Err(GrantError::Refused {
                    message,
                    refusal: serde_json::to_value(&refusal).expect("plain data serializes"),
                });
            }
        }
        checked.map_err(|mut refusal| {
            // Out of its bounds or its window: what the instance would allow that its parent refuses, by the
            // narrowing proof on the concrete instance (only on a refusal: a grant within bounds runs no proof).
            use remit_lang::check::narrowing::parametric::{concrete, Concrete};
            use remit_lang::eval::grants::GrantProblem;
            if matches!(refusal.problem, GrantProblem::BoundFailed | GrantProblem::WindowInvalid) {
                match concrete(program, id, &concrete_params()) {
                    Concrete::Widens(request) => {
                        refusal.witness = Some(Box::new(request));
                        refusal.instance_narrows = Some(false);
                    }
                    Concrete::Narrows => refusal.instance_narrows = Some(true),
                    Concrete::Unknown => {}
                }
            }
            let mut message = refusal.to_string();
            match (&refusal.witness, refusal.instance_narrows) {
                (Some(_), _) => message.push_str("; the instance would allow a request its parent refuses (`witness`)"),
                (None, Some(true)) => message.push_str("; the instance would still narrow its parent"),
                _ => {}
            }
            GrantError::Refused { message, refusal: serde_json::to_value(&refusal).expect("plain data serializes") }
        })
    }

    /// Grants an instance: checked, stored as version 1 and logged (`grant`) in one transaction; it is filled into
    /// every decision of its holder that starts after this returns.
    pub fn grant(&self, identity: &str, ask: &GrantAsk) -> Result<GrantRecord, GrantError> {
        let template = self.template(&ask.template)?;
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        // Sub-delegation: the instance it comes from, locked (`Tx::grant`) so that revoking or changing it waits
        // for this grant and then sees it among its children.
        let ancestors = parent_of(&mut *tx, &template, ask.parent.as_deref())?;
        let principal = match ancestors.first() {
            Some(parent) if ask.principal.is_empty() || ask.principal == parent.principal => parent.principal.clone(),
            Some(parent) => {
                let condition = format!("the principal of `{}`", parent.reference());
                return Err(refused("principal-not-parents", "principal", &condition, Some(&ask.principal)));
            }
            None => ask.principal.clone(),
        };
        if !may_grant(&template, &principal, identity) {
            return Err(GrantError::Forbidden(format!(
                "`{identity}` may not grant `{}` for `{principal}`: neither the principal nor admitted by its `granted \
                 by`",
                ask.template
            )));
        }
        // Every decision of the holder carries all its active instances, and a request carries at most
        // `MAX_GRANTS` (more is `request.malformed` in both engines): one more grant would make every call of the
        // holder fail, so it is refused here instead.
        let held = filled(&mut *tx, &ask.holder)?.len();
        if held >= MAX_GRANTS {
            return Err(GrantError::Refused {
                message: format!("`{}` holds {held} active instances already, the most a request carries", ask.holder),
                refusal: serde_json::json!({"problem": "holder-full", "field": "holder",
                    "condition": format!("at most {MAX_GRANTS} active instances per holder"), "value": ask.holder}),
            });
        }
        let record = GrantRecord {
            id: new_id("g"),
            version: 1,
            template: ask.template.clone(),
            principal,
            holder: ask.holder.clone(),
            params: ask.params.clone(),
            granted_by: identity.to_string(),
            granted_at: now,
            revoked_at: None,
            parent: ancestors.first().map(GrantRecord::reference),
        };
        self.check_instance(&record, &ancestors, now)?;
        tx.put_grant(&record)?;
        tx.append_log(now, "grant", &entry(&record, None).to_string())?;
        tx.commit()?;
        Ok(record)
    }

    /// Changes an instance's parameters: a new version, checked, stored and logged (`change`) in one transaction.
    pub fn change_grant(
        &self,
        identity: &str,
        id: &str,
        params: &Map<String, Json>,
    ) -> Result<GrantRecord, GrantError> {
        retrying(|| self.change_once(identity, id, params))
    }

    fn change_once(&self, identity: &str, id: &str, params: &Map<String, Json>) -> Result<GrantRecord, GrantError> {
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        // The instances it is sub-delegated from, locked top-down before it, as a revocation's cascade locks them.
        let ancestors = locked_ancestors(&mut *tx, id)?;
        let current = self.current(&mut *tx, id)?;
        let template = self.template(&current.template)?;
        if !may_grant(&template, &current.principal, identity) {
            return Err(forbidden(identity, &current));
        }
        let record = GrantRecord {
            version: current.version + 1,
            params: params.clone(),
            granted_by: identity.to_string(),
            granted_at: now,
            ..current.clone()
        };
        self.check_instance(&record, &ancestors, now)?;
        tx.put_grant(&record)?;
        tx.append_log(now, "change", &entry(&record, Some(&current)).to_string())?;
        // An instance sub-delegated from this one whose bounds no longer hold under the new version (`cap <=
        // parent.cap` after the cap was lowered) would be refused by every decision: it is revoked now, with the
        // refusal in its entry, rather than left to look active.
        let mut lineage = vec![record.clone()];
        lineage.extend(ancestors);
        self.revoke_invalid_children(&mut *tx, &lineage, identity, now)?;
        tx.commit()?;
        Ok(record)
    }

    /// Revokes the active children of `lineage[0]` (whose ancestors follow it) that no longer pass the check, and
    /// checks the children of those that do in turn.
    fn revoke_invalid_children(
        &self,
        tx: &mut dyn Tx,
        lineage: &[GrantRecord],
        identity: &str,
        now: i64,
    ) -> Result<(), GrantError> {
        if lineage.len() > MAX_GRANTS {
            return Ok(());
        }
        for child in tx.active_children(&lineage[0].reference())? {
            match self.check_instance(&child, lineage, now) {
                Ok(()) => {
                    let mut below = vec![child];
                    below.extend(lineage.iter().cloned());
                    self.revoke_invalid_children(tx, &below, identity, now)?;
                }
                Err(GrantError::Refused { refusal, .. }) => {
                    let because = json!({"parent": lineage[0].reference(), "parent_version": lineage[0].version,
                                         "refusal": refusal});
                    revoke_with_children(tx, &child, identity, now, Some(because))?;
                }
                Err(other) => return Err(other),
            }
        }
        Ok(())
    }

    /// Revokes an instance: its current version marked revoked and a `revoke` entry, in one transaction; no decision
    /// that starts after this returns is filled with it.
    pub fn revoke_grant(&self, identity: &str, id: &str) -> Result<GrantRecord, GrantError> {
        retrying(|| self.revoke_once(identity, id))
    }

    fn revoke_once(&self, identity: &str, id: &str) -> Result<GrantRecord, GrantError> {
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        let current = self.current(&mut *tx, id)?;
        // A template no longer in the policy: only the principal may still revoke its instances.
        let policy = self.policy();
        let allowed = match policy.meta.templates.iter().find(|t| t.name == current.template) {
            Some(template) => may_grant(template, &current.principal, identity),
            None => identity == current.principal,
        };
        if !allowed {
            return Err(forbidden(identity, &current));
        }
        if !revoke_with_children(&mut *tx, &current, identity, now, None)? {
            return Err(GrantError::Revoked(format!("the grant `{id}` is revoked already")));
        }
        tx.commit()?;
        Ok(GrantRecord { revoked_at: Some(now), ..current })
    }

    /// The current version of `id`, not revoked.
    fn current(&self, tx: &mut dyn Tx, id: &str) -> Result<GrantRecord, GrantError> {
        match tx.grant(id)? {
            None => Err(GrantError::NotFound(format!("no grant `{id}`"))),
            Some(g) if g.revoked_at.is_some() => Err(GrantError::Revoked(format!("the grant `{id}` is revoked"))),
            Some(g) => Ok(g),
        }
    }

    /// Whether `identity` may see the instance: an admin sees every one; anyone else those it is the principal of,
    /// granted, or may grant.
    fn may_see(&self, meta: &PolicyMeta, identity: &str, admin: bool, g: &GrantRecord) -> bool {
        admin
            || identity == g.principal
            || identity == g.granted_by
            || meta.templates.iter().any(|t| t.name == g.template && may_grant(t, &g.principal, identity))
    }

    /// The current versions of the instances (revoked ones included) of `principal` and `holder` (each when given)
    /// that `identity` may see, sorted by id.
    pub fn grants(
        &self,
        identity: &str,
        admin: bool,
        principal: Option<&str>,
        holder: Option<&str>,
    ) -> Result<Vec<GrantRecord>, GrantError> {
        let mut tx = self.store.begin_read()?;
        let policy = self.policy();
        let all = tx.grants(principal, holder)?;
        Ok(all.into_iter().filter(|g| self.may_see(&policy.meta, identity, admin, g)).collect())
    }

    /// Every version of instance `id`, oldest first (`404` for one `identity` may not see).
    pub fn grant_history(&self, identity: &str, admin: bool, id: &str) -> Result<Vec<GrantRecord>, GrantError> {
        let mut tx = self.store.begin_read()?;
        let history = tx.grant_history(id)?;
        let policy = self.policy();
        match history.last() {
            Some(last) if self.may_see(&policy.meta, identity, admin, last) => Ok(history),
            _ => Err(GrantError::NotFound(format!("no grant `{id}` for you"))),
        }
    }
}

/// Revokes `grant` and, before it, every active instance sub-delegated from it (depth first), each with its
/// `revoke` entry (`because`, for one revoked with its parent, names the parent); `false` when `grant` was revoked
/// already.
fn revoke_with_children(
    tx: &mut dyn Tx,
    grant: &GrantRecord,
    identity: &str,
    now: i64,
    because: Option<Json>,
) -> Result<bool, GrantError> {
    let mut pending = vec![(grant.clone(), because, false)];
    let mut revoked_self = false;
    // An explicit stack: a chain of sub-delegations as deep as the store holds is not a deep recursion.
    while let Some((g, because, expanded)) = pending.pop() {
        if !expanded {
            let children = tx.active_children(&g.reference())?;
            let reason = json!({"parent": g.reference(), "parent_version": g.version, "revoked": true});
            pending.push((g, because, true));
            pending.extend(children.into_iter().map(|c| (c, Some(reason.clone()), false)));
            continue;
        }
        let done = tx.revoke_grant(&g.id, now)?;
        if g.id == grant.id {
            revoked_self = done;
        }
        if done {
            let mut body = json!({"id": g.id, "version": g.version, "template": g.template,
                                  "principal": g.principal, "holder": g.holder, "by": identity});
            if let Some(because) = because {
                body["because"] = because;
            }
            tx.append_log(now, "revoke", &body.to_string())?;
        }
    }
    Ok(revoked_self)
}

/// The instance a grant of `template` is sub-delegated from, with its ancestors (parent first): none for a
/// template under a mandate; for a template under a template, the named active instance of the parent template
/// (its current row locked), or a refusal.
fn parent_of(tx: &mut dyn Tx, template: &TemplateMeta, named: Option<&str>) -> Result<Vec<GrantRecord>, GrantError> {
    let under_template = template.parent_kind == "template";
    let condition = format!("an active instance of `{}`", template.parent);
    match (under_template, named) {
        (false, None) => Ok(Vec::new()),
        (false, Some(named)) => {
            let condition = format!("none: `{}` is under the mandate `{}`", template.name, template.parent);
            Err(refused("parent-unexpected", "parent", &condition, Some(named)))
        }
        (true, None) => Err(refused("parent-missing", "parent", &condition, None)),
        (true, Some(named)) => {
            let id = named.rsplit_once('/').map_or(named, |(_, id)| id);
            match tx.grant(id)? {
                Some(parent) if parent.revoked_at.is_none() && parent.template == template.parent => {
                    let mut lineage = vec![parent];
                    lineage.extend(ancestors(tx, lineage[0].parent.as_deref())?);
                    Ok(lineage)
                }
                Some(parent) if parent.revoked_at.is_none() => {
                    Err(refused("parent-template", "parent", &condition, Some(&parent.reference())))
                }
                _ => Err(refused("parent-missing", "parent", &condition, Some(named))),
            }
        }
    }
}

/// The instances the instance `id` is sub-delegated from, nearest first, each active and its current row locked
/// (`Tx::grant`) from the top of the chain down — the order in which a revocation locks them (the revoked instance,
/// then the children its cascade revokes) — or a refusal when one of them is no longer active.
///
/// Without it, a change of a child on one replica racing its parent's revocation on another (PostgreSQL, READ
/// COMMITTED) could commit the child's new version after the revocation had read the children to revoke and before
/// it revoked them: the cascade's update then found the old version no longer current, and the new one stayed
/// active under a revoked parent (refused by every decision, but listed active). With the parent locked first, the
/// change waits for a revocation under way and then finds the parent revoked, or the revocation waits for the
/// change and then finds the new version among the children.
fn locked_ancestors(tx: &mut dyn Tx, id: &str) -> Result<Vec<GrantRecord>, GrantError> {
    // The chain's ids, read without a lock (a parent is fixed when an instance is granted; no version changes it).
    let mut chain: Vec<String> = Vec::new();
    let mut next = match tx.active_grant(id)? {
        Some(instance) => instance.parent,
        // Revoked or not there: `current` says which, under its lock.
        None => return Ok(Vec::new()),
    };
    while let Some(reference) = next.take() {
        let parent = reference.rsplit_once('/').map_or(reference.as_str(), |(_, id)| id).to_string();
        // A cycle cannot be stored, but a bound keeps a damaged store finite.
        if chain.len() >= MAX_GRANTS || chain.contains(&parent) || parent == id {
            break;
        }
        next = tx.active_grant(&parent)?.and_then(|g| g.parent);
        chain.push(parent);
    }
    let mut locked = Vec::with_capacity(chain.len());
    for parent in chain.iter().rev() {
        match tx.grant(parent)? {
            Some(g) if g.revoked_at.is_none() => locked.push(g),
            _ => {
                let condition = format!("an active instance above `{id}`");
                return Err(refused("parent-missing", "parent", &condition, Some(parent)));
            }
        }
    }
    locked.reverse();
    Ok(locked)
}

/// The active instances `parent` (a `TEMPLATE/ID`) names and its own ancestors, nearest first (stopping at one
/// that is not active: the engines then refuse the instance below it).
fn ancestors(tx: &mut dyn Tx, parent: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
    let mut lineage: Vec<GrantRecord> = Vec::new();
    let mut next = parent.map(str::to_string);
    while let Some(reference) = next.take() {
        let id = reference.rsplit_once('/').map_or(reference.as_str(), |(_, id)| id);
        // A cycle cannot be stored (a parent exists before its child), but a bound keeps a damaged store finite.
        if lineage.len() >= MAX_GRANTS || lineage.iter().any(|g| g.id == id) {
            break;
        }
        if let Some(grant) = tx.active_grant(id)? {
            next = grant.parent.clone();
            lineage.push(grant);
        }
    }
    Ok(lineage)
}

/// What a decision of `holder` is filled with: its active instances and the active instances they are
/// sub-delegated from (held by others: the engines check a child against its parent), each once. Also what a
/// write batch reads ahead for each of its holders (`core::batch`'s `prefetch`), answered from what the store read
/// ahead.
pub(super) fn filled(tx: &mut dyn Tx, holder: &str) -> StoreResult<Vec<GrantRecord>> {
    let mut grants = tx.active_grants(holder)?;
    let mut next = 0;
    while next < grants.len() && grants.len() <= MAX_GRANTS {
        if let Some(parent) = grants[next].parent.clone() {
            let id = parent.rsplit_once('/').map_or(parent.as_str(), |(_, id)| id);
            if !grants.iter().any(|g| g.id == id) {
                grants.extend(tx.active_grant(id)?);
            }
        }
        next += 1;
    }
    Ok(grants)
}

/// How many times a change or revocation that lost to a concurrent one (on another replica) is tried.
const ATTEMPTS: usize = 8;

/// Runs `f` again while it fails with a conflict ([`StoreError::is_conflict`]), at most [`ATTEMPTS`] times.
fn retrying<T>(f: impl Fn() -> Result<T, GrantError>) -> Result<T, GrantError> {
    let mut attempt = 1;
    loop {
        match f() {
            Err(GrantError::Store(e)) if e.is_conflict() && attempt < ATTEMPTS => attempt += 1,
            other => return other,
        }
    }
}

fn forbidden(identity: &str, g: &GrantRecord) -> GrantError {
    GrantError::Forbidden(format!(
        "`{identity}` may not change `{}`: neither its principal `{}` nor admitted by its template's `granted by`",
        g.id, g.principal
    ))
}

/// The body of a `grant` or `change` entry: the version granted, by whom, and for a change the version before.
fn entry(record: &GrantRecord, previous: Option<&GrantRecord>) -> Json {
    let mut body = json!({
        "id": record.id, "version": record.version, "template": record.template, "principal": record.principal,
        "holder": record.holder, "params": record.params, "by": record.granted_by,
        "granted": remit_lang::value::format_timestamp(record.granted_at),
    });
    if let Some(parent) = &record.parent {
        body["parent"] = parent.clone().into();
    }
    if let Some(previous) = previous {
        body["previous"] = json!({"version": previous.version, "params": previous.params});
    }
    body
}

/// Fills `context.grants` with the active instances whose holder is the request's subject (one indexed read in
/// the decision's transaction) and those they are sub-delegated from (a read by id each), and, for a request that names no mandate, names the one static mandate its subject
/// holds when it holds no instance (else the module resolves among the mandates and instances it holds).
pub(super) fn fill_grants(tx: &mut dyn Tx, request: &mut Map<String, Json>, meta: &PolicyMeta) -> StoreResult<()> {
    let subject = subject_of(request);
    let grants = match &subject {
        Some(subject) => filled(tx, subject)?,
        None => Vec::new(),
    };
    fill_read_grants(request, meta, &grants);
    Ok(())
}

/// The request's `subject.id`: the holder whose instances [`fill_grants`] reads.
pub(super) fn subject_of(request: &Map<String, Json>) -> Option<String> {
    request.get("subject").and_then(|s| s.get("id")).and_then(Json::as_str).map(str::to_string)
}

/// [`fill_grants`] with the subject's active instances already read.
pub(super) fn fill_read_grants(request: &mut Map<String, Json>, meta: &PolicyMeta, grants: &[GrantRecord]) {
    let subject = subject_of(request);
    let Some(context) = request.get_mut("context").and_then(Json::as_object_mut) else { return };
    if !context.contains_key("mandate") && grants.is_empty() {
        if let [one] = subject.as_deref().map(|s| meta.held_by(s)).unwrap_or_default().as_slice() {
            context.insert("mandate".into(), Json::String(one.name.clone()));
        }
    }
    context.insert("grants".into(), Json::Array(grants.iter().map(GrantRecord::instance_json).collect()));
}
