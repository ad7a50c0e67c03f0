//! AuthZEN's subject and resource searches over the gateway's data: the candidates are the entities of the searched
//! type in the data sets (for subjects, with every mandate's exact holders), each decided as an evaluation would be
//! — prepared, filled from the store, asked of the module — but all in one read transaction, with nothing carried
//! out and nothing logged: a search answers what the policy would allow, it is not a call. A mandate held by a
//! `holder under` prefix admits subjects nobody can list: the prefix is reported as such when a subject under it
//! that the data does not know would be allowed. Uses [`super::prepare`] and [`super::policy`].

use std::sync::Arc;

use serde_json::{Map, Value as Json};

use super::policy::Policy;
use super::Gateway;
use crate::state_cache::Reads;
use crate::store::{StoreResult, Tx};

/// What a pattern holder is decided as: the prefix followed by this, a subject id under the prefix that names
/// nobody the data knows (so the attributes the data would give a subject are missing, and fail closed).
pub const PATTERN_SUBJECT: &str = "*";

/// The side of the request a search lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched {
    Subject,
    Resource,
}

impl Searched {
    fn key(self) -> &'static str {
        match self {
            Searched::Subject => "subject",
            Searched::Resource => "resource",
        }
    }
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The ids allowed, sorted bytewise, each once.
    pub ids: Vec<String>,
    /// A subject search's `holder under` prefixes under which a subject the data does not know would be allowed, in
    /// the order of the policy's mandates.
    pub patterns: Vec<HolderPattern>,
}

/// A `holder under` prefix of a mandate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderPattern {
    pub under: String,
    pub mandate: String,
}

impl Gateway {
    /// The ids of type `kind` (the AuthZEN request's `subject.type` or `resource.type`) that may do the request's
    /// action: each candidate put in place of the searched side (its `id`, and its `type` when the request keeps
    /// one: the searched side's own `properties` describe no candidate and are dropped; for a tool that names its
    /// target, also that argument) and decided as
    /// [`Gateway::decide_as`] would decide it,
    /// without carrying anything out or logging it. A subject search also decides each `holder under` prefix (of
    /// the mandate the request names, else of every mandate) for the subject [`PATTERN_SUBJECT`] under it, under
    /// that mandate. `request` is remit's request JSON; an error when the store cannot be read.
    pub fn search(
        &self,
        request: &Map<String, Json>,
        searched: Searched,
        kind: &str,
        trusted: bool,
    ) -> StoreResult<Found> {
        let policy = self.policy();
        let now = self.clock.now();
        let side = searched.key();
        let typed = request.get(side).is_some_and(|s| s.get("type").is_some());
        let mut tx = self.store.begin_read()?;
        let mut candidates = tx.entity_ids(kind)?;
        let mut patterns = Vec::new();
        if searched == Searched::Subject {
            let named = request.get("context").and_then(|c| c.get("mandate")).and_then(Json::as_str);
            for mandate in &policy.meta.mandates {
                candidates.extend(mandate.holders.iter().cloned());
                if named.is_none_or(|name| name == mandate.name) {
                    let prefixes = mandate.holder_prefixes.iter();
                    patterns
                        .extend(prefixes.map(|p| HolderPattern { under: p.clone(), mandate: mandate.name.clone() }));
                }
            }
        }
        // Sorted here too: the results' order (and so the pages) does not rest on the store's.
        candidates.sort();
        candidates.dedup();
        // A tool that names its target (`target args.NAME`) acts on that argument, whatever `resource.id` says (the
        // gateway sets one from the other): the candidate resource is the argument's value.
        let tool = request.get("action").and_then(|a| a.get("name")).and_then(Json::as_str);
        let target = tool.and_then(|t| policy.meta.target_of(t)).filter(|_| searched == Searched::Resource);
        let as_candidate = |id: &str, mandate: Option<&str>| {
            let mut request = request.clone();
            if let Some(argument) = target {
                let action = request.entry("action").or_insert_with(|| Json::Object(Map::new()));
                if let Some(action) = action.as_object_mut() {
                    let arguments = action.entry("arguments").or_insert_with(|| Json::Object(Map::new()));
                    if let Some(arguments) = arguments.as_object_mut() {
                        arguments.insert(argument.to_string(), Json::String(id.to_string()));
                    }
                }
            }
            let mut entity = Map::new();
            if typed {
                entity.insert("type".into(), Json::String(kind.to_string()));
            }
            entity.insert("id".into(), Json::String(id.to_string()));
            request.insert(side.into(), Json::Object(entity));
            if let Some(mandate) = mandate {
                if let Some(Json::Object(context)) = request.get_mut("context") {
                    context.entry("mandate").or_insert_with(|| Json::String(mandate.to_string()));
                } else {
                    let mut context = Map::new();
                    context.insert("mandate".into(), Json::String(mandate.to_string()));
                    request.insert("context".into(), Json::Object(context));
                }
            }
            request
        };
        let mut found = Found::default();
        for id in candidates {
            if self.allowed_in(tx.as_mut(), &policy, as_candidate(&id, None), now, trusted)? {
                found.ids.push(id);
            }
        }
        for pattern in patterns {
            let subject = format!("{}{PATTERN_SUBJECT}", pattern.under);
            let request = as_candidate(&subject, Some(&pattern.mandate));
            if self.allowed_in(tx.as_mut(), &policy, request, now, trusted)? && !found.patterns.contains(&pattern) {
                found.patterns.push(pattern);
            }
        }
        Ok(found)
    }

    /// Whether the module allows `request` once it is prepared and filled from `tx` (no obligation carried out; an
    /// allow the gateway would answer only in shadow mode is not one).
    fn allowed_in(
        &self,
        tx: &mut dyn Tx,
        policy: &Arc<Policy>,
        request: Map<String, Json>,
        now: i64,
        trusted: bool,
    ) -> StoreResult<bool> {
        let prepared = self.prepare_value(request, &policy.meta, trusted);
        let (Some(mut value), None) = (prepared.value, prepared.early_deny) else { return Ok(false) };
        self.fill(&mut Reads::Tx(tx), &mut value, &policy.meta, &prepared.world, now, None)?;
        let bytes = serde_json::to_vec(&value).expect("a JSON value serializes");
        let decision: Json = serde_json::from_str(&self.module_decide(policy, &bytes)).unwrap_or(Json::Null);
        Ok(decision.get("decision").and_then(Json::as_str) == Some("allow"))
    }
}
