//! The instances of templates a request carries (`context.grants`): their shape as the gateway stores and fills
//! them ([`GrantInstance`]), and an instance once checked against its template ([`Instance`]), which conditions
//! read their parameters from. Data only: the check itself is [`super::grants`], the reading of a request
//! [`super::request`], so that neither imports the other back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::ir::Value;

/// The longest instance id a request may carry (bytes): decisions name the instance, so its id is bounded like
/// every other text a decision repeats.
pub const MAX_INSTANCE_ID: usize = remit_rt::request::MAX_INSTANCE_ID;

/// The most instances a request's `context.grants` may carry: more is `request.malformed` (the runtime's
/// `remit_rt::image::MAX_GRANTS`, which walks them again for each mandate it resolves by holder; the gateway fills
/// only the subject's instances).
pub const MAX_GRANTS: usize = remit_rt::image::MAX_GRANTS;

/// The most instances one chain holds: an instance and the instances it hangs under (sub-delegation, a template
/// under a template). An instance of a template nested deeper is `grant.invalid` in every engine (the runtime keeps
/// a chain's instances in a fixed array, `remit_rt::image::MAX_INSTANCE_DEPTH`).
pub const MAX_INSTANCE_DEPTH: usize = remit_rt::image::MAX_INSTANCE_DEPTH;

/// One granted instance of a template, as the gateway stores it and fills it into a request's `context.grants`:
/// `{"id", "version", "template", "principal", "holder", "params": {NAME: VALUE}, "granted": RFC 3339}`. Each
/// parameter's value has the JSON encoding a tool argument of its type has (docs/requests.md): money
/// `"12.50 USD"`, timestamps RFC 3339 strings, durations seconds or `"30d"`, sets arrays, enums and identities
/// strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantInstance {
    pub id: String,
    pub version: u64,
    pub template: String,
    pub principal: String,
    pub holder: String,
    #[serde(default)]
    pub params: Map<String, Json>,
    /// When it was granted (this version), RFC 3339, from the store's clock: the implicit parameter `granted`.
    pub granted: String,
    /// For an instance of a template under a template (sub-delegation): the instance it hangs under, as
    /// `TEMPLATE/ID` (no version: the parent's current entry in `context.grants` is the one used). Absent for an
    /// instance of a template under a mandate (present there, the instance is invalid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl GrantInstance {
    /// How decisions name the instance: `TEMPLATE/ID@VERSION` (`personal_shopping/g-1@3`).
    pub fn name(&self) -> String {
        format!("{}/{}@{}", self.template, self.id, self.version)
    }

    /// How a request names the instance in `context.mandate`: `TEMPLATE/ID` (any version: the one the gateway
    /// fills is the current one).
    pub fn reference(&self) -> String {
        format!("{}/{}", self.template, self.id)
    }

    /// Reads one entry of `context.grants` strictly: an object whose `id` (1 to [`MAX_INSTANCE_ID`] bytes, not
    /// blank), `template`, `principal`, `holder` and `granted` are strings, `version` a whole number ≥ 0 and
    /// `params` an object, and `parent`, when present, a string (other keys are ignored). `None` for anything else:
    /// the request is malformed.
    pub fn from_json(json: &Json) -> Option<GrantInstance> {
        let object = json.as_object()?;
        let text = |key: &str| object.get(key).and_then(Json::as_str).map(str::to_string);
        let id = text("id").filter(|id| id.len() <= MAX_INSTANCE_ID && !crate::value::is_blank(id))?;
        let parent = match object.get("parent") {
            None => None,
            Some(parent) => Some(parent.as_str()?.to_string()),
        };
        Some(GrantInstance {
            id,
            version: object.get("version").and_then(Json::as_u64)?,
            template: text("template")?,
            principal: text("principal")?,
            holder: text("holder")?,
            params: object.get("params").and_then(Json::as_object).cloned()?,
            granted: text("granted")?,
            parent,
        })
    }
}

/// An instance that passed [`super::grants::check`]: its parameters decoded (the implicit `principal`, `holder` and `granted`
/// included) and its window in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Instance {
    /// `TEMPLATE/ID@VERSION`.
    pub name: String,
    pub params: BTreeMap<String, Value>,
    pub valid_from: Option<i128>,
    pub valid_until: Option<i128>,
}
