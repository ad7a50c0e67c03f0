//! The state an operator sets and every later decision reads: stops (of a mandate, or with an id and a level) and
//! fact versions, each change logged in its transaction. Uses [`super::policy`] (what the policy has).

use serde_json::{json, Map, Value as Json};

use super::{ActionError, Gateway};
use crate::store::{StopRecord, StoreError};
use remit_lang::syntax::ast::FactVersion;

impl Gateway {
    /// Sets (`active`) or clears the stop of a mandate; it applies to every decision that starts after this returns.
    pub fn set_stop(&self, mandate: &str, active: bool, by: &str) -> Result<(), ActionError> {
        if self.policy().meta.mandate(mandate).is_none() {
            return Err(ActionError::NotFound(format!("no mandate `{mandate}` in the policy")));
        }
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        tx.set_stop(mandate, active)?;
        let body = json!({"mandate": mandate, "active": active, "by": by});
        tx.append_log(now, "stop", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// Sets a stop with an id and a level on a mandate or a principal of the policy (replacing one with the same
    /// id); it applies to every decision that starts after this returns.
    pub fn set_stop_record(&self, stop: &StopRecord, by: &str) -> Result<(), ActionError> {
        if stop.id.trim().is_empty() {
            return Err(ActionError::Invalid("a stop needs a non-empty `id`".into()));
        }
        if !StopRecord::LEVELS.contains(&stop.level.as_str()) {
            return Err(ActionError::Invalid(format!(
                "`{}` is not a stop level: `pause`, `cancel`, `revoke` or `quarantine`",
                stop.level
            )));
        }
        let meta = &self.policy().meta;
        match (&stop.mandate, &stop.principal) {
            (Some(mandate), None) if meta.mandate(mandate).is_none() => {
                return Err(ActionError::NotFound(format!("no mandate `{mandate}` in the policy")));
            }
            (None, Some(principal)) if !meta.mandates.iter().any(|m| &m.principal == principal) => {
                return Err(ActionError::NotFound(format!("no mandate of the policy is given by `{principal}`")));
            }
            (Some(_), None) | (None, Some(_)) => {}
            _ => return Err(ActionError::Invalid("a stop names exactly one of `mandate` and `principal`".into())),
        }
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        tx.set_stop_record(stop)?;
        let mut body = stop.to_json();
        body["active"] = json!(true);
        body["by"] = json!(by);
        tx.append_log(now, "stop", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// Clears the stop with `id`.
    pub fn clear_stop_record(&self, id: &str, by: &str) -> Result<(), ActionError> {
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        if !tx.clear_stop_record(id)? {
            return Err(ActionError::NotFound(format!("no stop `{id}`")));
        }
        let body = json!({"id": id, "active": false, "by": by});
        tx.append_log(now, "stop", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// Publishes the current version of a fact.
    pub fn set_fact(&self, name: &str, version: &FactVersion, by: &str) -> Result<(), ActionError> {
        // A version of a fact no rule reads would be acknowledged and then ignored (a typo stays unnoticed):
        // refused, as a stop on a mandate the policy does not have is.
        if !self.policy().meta.uses_fact(name) {
            return Err(ActionError::NotFound(format!("the policy reads no fact `{name}`")));
        }
        let mut tx = self.store.begin()?;
        let now = tx.now().unwrap_or_else(|| self.clock.now());
        tx.set_fact(name, version)?;
        let body = json!({"fact": name, "version": version.to_json(), "by": by});
        tx.append_log(now, "fact", &body.to_string())?;
        tx.commit()?;
        Ok(())
    }

    /// The active stops, the current fact versions and the data sets' version.
    pub fn state(&self) -> Result<Json, StoreError> {
        // A read transaction: `/ready` asks this, and must not wait for writers (on PostgreSQL, for a writer's head
        // lock or a counter's).
        let mut tx = self.store.begin_read()?;
        let stops = tx.stops()?;
        let records = tx.stop_records()?;
        let facts: Map<String, Json> = tx.facts()?.into_iter().map(|(n, v)| (n, v.to_json())).collect();
        // `null` from a store that keeps no data sets.
        let data = tx.data_state().ok();
        Ok(json!({"stops": stops, "stops_by_id": records, "facts": facts, "data": data}))
    }
}
