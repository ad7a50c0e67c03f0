//! A request made ready for the module: the fields only the gateway fills removed, the target and the mandate
//! filled in, then the gateway's state (approvals, counters, stops, facts), the world's values the policy reads
//! ([`super::world`]) and time. Uses [`super::obligations`] (budget windows, what earlier rounds carried out) and
//! [`super::world`].

use serde_json::{json, Map, Value as Json};

use std::sync::Arc;

use super::obligations::{counter_key, window_key, Carried};
use super::world::{self, WorldSpec};
use super::{Gateway, REASON_AMBIGUOUS};
use crate::state_cache::{CachedData, Needs, Read, Reads, TxData};
use crate::store::{StopRecord, StoreResult, StoredApproval};
use remit_lang::eval::grants::GrantInstance;
use remit_lang::value::format_timestamp;
use remit_lang::wasm::meta::PolicyMeta;

/// The context fields only the gateway may fill.
pub const GATEWAY_FIELDS: [&str; 6] = ["approvals", "counters", "stops", "facts", "grants", "now"];

/// A request after the gateway prepared it (before the state is filled in).
#[derive(Clone)]
pub(super) struct Prepared {
    /// `None` when the bytes are not an acceptable JSON object: they go to the module as they came.
    pub(super) value: Option<Map<String, Json>>,
    pub(super) ignored: Vec<String>,
    /// A deny the gateway makes itself before asking the module.
    pub(super) early_deny: Option<&'static str>,
    /// What the policy reads about the world (the spec the request was stripped by, and is filled by).
    pub(super) world: Arc<WorldSpec>,
}

impl Gateway {
    /// Removes the fields only the gateway fills (and the world's values the caller may not give: `trusted` when
    /// it is an enforcement point the operator trusts with `properties`) and picks the mandate of a request that
    /// names none.
    pub(super) fn prepare(&self, request: &[u8], meta: &PolicyMeta, trusted: bool) -> Prepared {
        match remit_lang::json::parse(request) {
            Ok(Json::Object(value)) => self.prepare_value(value, meta, trusted),
            _ => Prepared { value: None, ignored: Vec::new(), early_deny: None, world: self.world() },
        }
    }

    /// [`Gateway::prepare`] of a request already read.
    pub(super) fn prepare_value(&self, mut value: Map<String, Json>, meta: &PolicyMeta, trusted: bool) -> Prepared {
        let mut prepared = Prepared { value: None, ignored: Vec::new(), early_deny: None, world: self.world() };
        // The resource's type and properties survive the target's filling when it is the same resource.
        let resource = value.get("resource").cloned();
        fill_target(&mut value, meta, &mut prepared.ignored);
        if !prepared.world.is_empty() {
            if let (Some(Json::Object(before)), Some(Json::Object(after))) = (resource, value.get_mut("resource")) {
                if before.get("id") == after.get("id") {
                    for key in ["type", "properties"] {
                        if let Some(kept) = before.get(key) {
                            after.entry(key).or_insert_with(|| kept.clone());
                        }
                    }
                }
            }
            world::strip(&mut value, &prepared.world, trusted, &mut prepared.ignored);
        }
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
                    // A policy with templates: the subject may hold instances too, which only its transaction
                    // tells (`grants::fill_grants` names the mandate then).
                    [_] if !meta.templates.is_empty() => {}
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
    ///
    /// A request of a policy that reads the world reads its data (looked up by the request's keys) and its state
    /// from one state: all from the cache for the version it holds, when every lookup is there (a decision that
    /// changes nothing, [`Reads::Cached`]); else all in one transaction (the batch's), whose lookups are then kept
    /// like its state when the store's version did not change around them (`state_cache`'s invariants).
    pub(super) fn fill(
        &self,
        reads: &mut Reads<'_, '_>,
        request: &mut Map<String, Json>,
        meta: &PolicyMeta,
        world: &WorldSpec,
        now: i64,
        continues: Option<&Carried>,
    ) -> StoreResult<Vec<String>> {
        let templates = !meta.templates.is_empty();
        if world.is_empty() && !templates {
            return self.fill_state(reads, request, meta, now, continues, None);
        }
        if let (Reads::Cached { store, tx, cache, version }, false, None) = (&mut *reads, templates, continues) {
            let (store, cache, version) = (*store, *cache, *version);
            // First from the cache alone. A miss leaves the request half filled: what the fill writes is put back.
            let before = world::filled_parts(request);
            let mut cached = CachedData::new(cache, version);
            world::fill(&mut cached, request, world, meta)?;
            if !cached.missed() {
                let needed = needs_of(request, meta, now);
                if let Some(read) = cache.answer(version, &needed.0, now) {
                    return self.fill_state(reads, request, meta, now, None, Some((needed, read)));
                }
            }
            world::restore_parts(request, before);
            // Else all in the transaction, begun after `version` was taken.
            let tx = match tx {
                Some(tx) => tx,
                None => tx.insert(store.begin_read()?),
            };
            let mut data = TxData::recording(tx.as_mut());
            world::fill(&mut data, request, world, meta)?;
            let seen = data.into_seen();
            let needed = needs_of(request, meta, now);
            let read = Read::from_tx(tx.as_mut(), &needed.0, now)?;
            if store.version() == Some(version) {
                cache.keep(version, &needed.0, now, &read);
                cache.keep_data(version, seen);
            }
            return self.fill_state(reads, request, meta, now, None, Some((needed, read)));
        }
        // The instances of a policy with templates are read in the transaction too: a revocation committed before
        // the decision's transaction began is seen, on every replica.
        let tx = reads.reading_tx()?;
        if templates {
            super::grants::fill_grants(&mut *tx, request, meta)?;
        }
        if !world.is_empty() {
            world::fill(&mut TxData::new(&mut *tx), request, world, meta)?;
        }
        self.fill_state(&mut Reads::Tx(tx), request, meta, now, continues, None)
    }

    fn fill_state(
        &self,
        reads: &mut Reads<'_, '_>,
        request: &mut Map<String, Json>,
        meta: &PolicyMeta,
        now: i64,
        continues: Option<&Carried>,
        known: Option<((Needs, Vec<String>), Read)>,
    ) -> StoreResult<Vec<String>> {
        let tool = request.get("action").and_then(|a| a.get("name")).and_then(Json::as_str).map(str::to_string);
        // `known`: the request's needs (`needs_of`) and what the caller read for them, from the state its data came
        // from.
        let ((needs, names), read) = match known {
            Some(known) => known,
            None => {
                let (needs, names) = needs_of(request, meta, now);
                let read = reads.read(&needs, now)?;
                ((needs, names), read)
            }
        };
        let chain = needs.mandates.clone();
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
        // By the names the module reads, whatever the store keys them by (`counter_key`).
        let counters: Map<String, Json> = names.into_iter().zip(counts.into_iter().map(Json::from)).collect();
        let context = request.get_mut("context").and_then(Json::as_object_mut).expect("prepare made it an object");
        context.insert("now".into(), Json::String(format_timestamp(now)));
        context.insert("approvals".into(), Json::Array(approvals));
        context.insert("stops".into(), Json::Array(stops));
        context.insert("facts".into(), Json::Object(facts));
        context.insert("counters".into(), Json::Object(counters));
        Ok(chain)
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

/// What filling `request` at `now` reads: the approvals of its mandate chain and the counters of the chain's budgets
/// (an instance's template's included, keyed per instance: `counter_key`) in their current windows (known before
/// deciding, so a batch can read them for all its decisions at once); and the name the module reads each counter
/// by (`context.counters.NAME`), in the order of `Needs::counters`.
pub(super) fn needs_of(request: &Map<String, Json>, meta: &PolicyMeta, now: i64) -> (Needs, Vec<String>) {
    let context = request.get("context");
    let mandate = context.and_then(|c| c.get("mandate")).and_then(Json::as_str);
    let chain = match mandate.and_then(|m| meta.mandate(m)) {
        Some(m) => m.chain.clone(),
        None => instance_chain(request, meta, mandate).unwrap_or_default(),
    };
    let operation = request
        .get("context")
        .and_then(|c| c.get("operation_id"))
        .and_then(Json::as_str)
        .filter(|o| !o.is_empty())
        .map(str::to_string);
    let mut needs = Needs { mandates: chain.clone(), counters: Vec::new() };
    let mut names = Vec::new();
    // One budget per name (`budgets_of`): the one the obligation counts (`PolicyMeta::budget_of`).
    for budget in meta.budgets_of(&chain) {
        if let Some(window) = window_key(&budget.window, operation.as_deref(), now) {
            needs.counters.push((counter_key(budget, &chain), window));
            names.push(budget.name.clone());
        }
    }
    (needs, names)
}

/// The chain whose approvals and counters a decision under an instance reads: its template's parent mandate's, and
/// the instance's own name (`TEMPLATE/ID@VERSION`: an approval minted for a gate of the instance is issued under
/// it). The instance is the one named `TEMPLATE/ID` in `context.mandate` or, when the request names none, the one
/// instance filled for its subject. `None` for anything else.
fn instance_chain(request: &Map<String, Json>, meta: &PolicyMeta, mandate: Option<&str>) -> Option<Vec<String>> {
    let grants = request.get("context")?.get("grants")?.as_array()?;
    // The gateway filled them, so they read (`GrantInstance`'s reading); a request names one as `TEMPLATE/ID`,
    // with or without `@VERSION`.
    let filled: Vec<GrantInstance> = grants.iter().filter_map(GrantInstance::from_json).collect();
    let subject = request.get("subject").and_then(|s| s.get("id")).and_then(Json::as_str);
    let grant = match mandate {
        Some(named) => {
            let reference = named.split_once('@').map_or(named, |(reference, _)| reference);
            filled.iter().find(|g| g.reference() == reference)
        }
        // The one the subject holds (the parents filled beside a sub-delegated instance are held by others).
        None => {
            let mut held = filled.iter().filter(|g| Some(g.holder.as_str()) == subject);
            match (held.next(), held.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        }
    };
    let template = match (&grant, mandate) {
        (Some(grant), _) => grant.template.as_str(),
        // An instance the store does not have (revoked, or never granted): the parent's chain still reads its state.
        (None, Some(named)) => named.split_once('/')?.0,
        (None, None) => return None,
    };
    chain_under(meta, &filled, template, grant, 0)
}

/// The chain of an instance of `template` (`grant`, when present): the mandate chain its templates hang under,
/// then each instance it is sub-delegated from, then itself.
fn chain_under(
    meta: &PolicyMeta,
    filled: &[GrantInstance],
    template: &str,
    grant: Option<&GrantInstance>,
    depth: usize,
) -> Option<Vec<String>> {
    let template = meta.templates.iter().find(|t| t.name == template)?;
    let mut chain = if template.parent_kind == "mandate" {
        meta.mandate(&template.parent)?.chain.clone()
    } else {
        // Bounded: a cycle of `parent` references (which the engines refuse) must not loop here.
        if depth >= remit_lang::eval::grants::MAX_GRANTS {
            return None;
        }
        let parent = grant.and_then(|g| g.parent.as_deref()).and_then(|r| filled.iter().find(|p| p.reference() == r));
        chain_under(meta, filled, &template.parent, parent, depth + 1)?
    };
    chain.extend(grant.map(|g| g.name()));
    Some(chain)
}
