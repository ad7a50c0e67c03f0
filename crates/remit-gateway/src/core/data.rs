//! The gateway's data sets as an operator changes and reads them (the admin API and `remit admin data`): single
//! changes, bulk loads, and reads by key. Every change is one transaction that moves the data version on and
//! appends a `data` entry to the log (a bulk load: one entry with the file's digest and counts, not one per row).
//! Uses [`crate::data`] (the file formats) and nothing else of the core.

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

use super::{ActionError, Gateway};
use crate::data::{self, Format, Record};
use crate::store::{DataState, StoreError, Tx, HOLIDAY_RELATION, ORIGIN_ADMIN};

/// A change of the data sets made by the admin API.
#[derive(Debug, Clone, PartialEq)]
pub enum DataChange {
    /// Keeps the entity's attributes (replacing them) or, with `None`, removes it.
    Entity { kind: String, id: String, attributes: Option<Map<String, Json>> },
    /// Adds (`holds`) or removes a tuple.
    Tuple { relation: String, a: String, b: String, holds: bool },
    /// Adds or removes a holiday of a calendar.
    Holiday { calendar: String, date: String, holds: bool },
}

/// Moves the data version on and appends the `data` entry `body` (with the new version) in `tx`.
pub(crate) fn log_change(
    tx: &mut dyn Tx,
    now: i64,
    mut body: Json,
    bundle: Option<Option<String>>,
) -> Result<u64, StoreError> {
    let before = tx.data_state()?;
    let state = DataState { version: before.version + 1, bundle: bundle.unwrap_or(before.bundle) };
    tx.set_data_state(&state)?;
    body["version"] = json!(state.version);
    tx.append_log(now, "data", &body.to_string())?;
    Ok(state.version)
}

fn invalid(e: String) -> ActionError {
    ActionError::Invalid(e)
}

impl Gateway {
    /// Makes one change of the admin's data; the new data version. Removing what the admin origin does not keep
    /// is `NotFound` (a tuple or entity the bundle gives is changed by another bundle).
    pub fn change_data(&self, change: &DataChange, by: &str) -> Result<u64, ActionError> {
        let body = match change {
            DataChange::Entity { kind, id, attributes } => {
                non_empty(kind, "type")?;
                non_empty(id, "id")?;
                json!({"op": if attributes.is_some() { "put-entity" } else { "delete-entity" }, "type": kind, "id": id,
                       "attributes": attributes, "by": by})
            }
            DataChange::Tuple { relation, a, b, holds } => {
                data::relation_name(relation).map_err(invalid)?;
                non_empty(a, "a")?;
                non_empty(b, "b")?;
                json!({"op": if *holds { "add-tuple" } else { "remove-tuple" }, "relation": relation, "args": [a, b],
                       "by": by})
            }
            DataChange::Holiday { calendar, date, holds } => {
                non_empty(calendar, "calendar")?;
                data::date(date).map_err(invalid)?;
                json!({"op": if *holds { "add-holiday" } else { "remove-holiday" }, "calendar": calendar,
                       "holiday": date, "by": by})
            }
        };
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        let (existed, removing, what) = match change {
            DataChange::Entity { kind, id, attributes } => (
                tx.put_entity(ORIGIN_ADMIN, kind, id, attributes.as_ref())?,
                attributes.is_none(),
                format!("entity `{kind}` `{id}`"),
            ),
            DataChange::Tuple { relation, a, b, holds } => {
                (tx.set_tuple(ORIGIN_ADMIN, relation, a, b, *holds)?, !holds, format!("tuple `{relation}({a}, {b})`"))
            }
            DataChange::Holiday { calendar, date, holds } => (
                tx.set_tuple(ORIGIN_ADMIN, HOLIDAY_RELATION, calendar, date, *holds)?,
                !holds,
                format!("holiday `{date}` of calendar `{calendar}`"),
            ),
        };
        if removing && !existed {
            return Err(ActionError::NotFound(format!("the admin's data has no {what}")));
        }
        let version = log_change(tx.as_mut(), now, body, None)?;
        tx.commit()?;
        Ok(version)
    }

    /// Loads a data file (JSON or CSV, `crate::data`) into the admin's data in one transaction: all of it or, at
    /// the first bad record (named by its line), nothing. With `replace`, the admin's data is emptied first (the
    /// file becomes the whole of it); else the file's records are added (an entity's attributes replace its own).
    /// The answer: the counts, the file's digest and the new data version.
    pub fn load_data(&self, bytes: &[u8], format: Format, replace: bool, by: &str) -> Result<Json, ActionError> {
        let records: Vec<Record> = data::parse(bytes, format).map_err(invalid)?;
        let digest = format!("sha256:{}", crate::keys::hex(&Sha256::digest(bytes)));
        let now = self.clock.now();
        let mut tx = self.store.begin()?;
        let removed = if replace { tx.clear_data(ORIGIN_ADMIN)? } else { 0 };
        let counts = data::write(tx.as_mut(), ORIGIN_ADMIN, &records)?;
        let format = match format {
            Format::Json => "json",
            Format::Csv => "csv",
        };
        let mut body = json!({"op": "load", "format": format, "digest": digest, "replace": replace,
                              "removed": removed, "entities": counts.entities, "tuples": counts.tuples,
                              "holidays": counts.holidays, "by": by});
        let version = log_change(tx.as_mut(), now, body.clone(), None)?;
        tx.commit()?;
        body["version"] = json!(version);
        body.as_object_mut().expect("an object").remove("by");
        Ok(body)
    }

    /// An entity's attributes, merged over the origins (`GET /admin/v1/data/entities/TYPE/ID`).
    pub fn data_entity(&self, kind: &str, id: &str) -> Result<Option<Map<String, Json>>, StoreError> {
        self.store.begin_read()?.entity(kind, id)
    }

    /// The `b` of every tuple `relation(a, b)` (`GET /admin/v1/data/relations/R/A`; a calendar's holidays with
    /// `holiday`).
    pub fn data_related(&self, relation: &str, a: &str) -> Result<Vec<String>, StoreError> {
        self.store.begin_read()?.related(relation, a)
    }

    /// Whether `relation(a, b)` holds.
    pub fn data_holds(&self, relation: &str, a: &str, b: &str) -> Result<bool, StoreError> {
        self.store.begin_read()?.holds(relation, a, b)
    }
}

fn non_empty(text: &str, what: &str) -> Result<(), ActionError> {
    if text.is_empty() {
        return Err(ActionError::Invalid(format!("`{what}` must not be empty")));
    }
    Ok(())
}
