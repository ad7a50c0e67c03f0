//! Parsing a request (docs/requests.md) into typed data. Works on any bytes without panicking: the bytes must first
//! pass [`crate::json::validate`] (strict JSON, at most 64 levels deep, no duplicate keys, at most `MAX_INPUT`
//! bytes; docs/json.md), then serde_json parses them, and every field is checked for its JSON type before use.
//! `null` counts as a wrong type, never as absent, so `"stops": null` cannot switch a stop off.

use serde_json::{Map, Value as Json};

use super::err;
use crate::json::JsonError;
use crate::value::{is_blank, parse_instant, Decimal, DECIMAL_SCALE};

/// What the caller needs from the request: a tool call (`decide`) or only the subject and context (tool listing,
/// where `action` is not read at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Call,
    Listing,
}

/// What is wrong with a request that cannot be decided on. `malformed` and `missing` may both be set; `oversize`
/// comes alone. The fields that are wrong (bit `i` is [`FIELDS`]`[i]`) are recorded when the request is a JSON
/// object: a request that is not JSON, or not an object, names none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestError {
    pub malformed: bool,
    pub missing: bool,
    pub oversize: bool,
    /// Fields present with the wrong JSON type or an unreadable value (`context.now` that is no timestamp).
    pub malformed_fields: u32,
    /// Required fields that are absent (or whose parent object is).
    pub missing_fields: u32,
}

/// The fields a request is read by, as a decision names them (`fields`, docs/requests.md), in byte order: a set of
/// them is a `u32` whose bit `i` is `FIELDS[i]`, listed in this order.
pub(crate) const FIELDS: [&str; 26] = [
    "action",
    "action.arguments",
    "action.name",
    "context",
    "context.approvals",
    "context.attempt",
    "context.attributes",
    "context.counters",
    "context.facts",
    "context.grants",
    "context.holidays",
    "context.mandate",
    "context.now",
    "context.operation_id",
    "context.principals",
    "context.relations",
    "context.stops",
    "resource",
    "resource.id",
    "resource.properties",
    "subject",
    "subject.credential",
    "subject.credential.id",
    "subject.credential.scopes",
    "subject.id",
    "subject.properties",
];

/// The bit of a field of [`FIELDS`] (a path not in the table has none).
fn field_bit(path: &str) -> u32 {
    FIELDS.iter().position(|f| *f == path).map_or(0, |i| 1 << i)
}

impl RequestError {
    /// The reason codes, sorted.
    pub fn codes(self) -> Vec<String> {
        let mut codes = Vec::new();
        if self.malformed {
            codes.push(err::REQUEST_MALFORMED.to_string());
        }
        if self.missing {
            codes.push(err::REQUEST_MISSING_FIELD.to_string());
        }
        if self.oversize {
            codes.push(err::REQUEST_OVERSIZE.to_string());
        }
        codes
    }

    pub fn is_error(self) -> bool {
        self.malformed || self.missing || self.oversize
    }

    /// The fields that are wrong, in [`FIELDS`] order, each with its problem: `malformed` (present, of the wrong type
    /// or unreadable) or `missing` (a required field that is absent).
    pub fn fields(self) -> Vec<(&'static str, &'static str)> {
        FIELDS
            .iter()
            .enumerate()
            .filter_map(|(i, field)| {
                if self.malformed_fields & 1 << i != 0 {
                    Some((*field, "malformed"))
                } else if self.missing_fields & 1 << i != 0 {
                    Some((*field, "missing"))
                } else {
                    None
                }
            })
            .collect()
    }
}

/// The tool call of a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub name: String,
    /// `action.arguments`, always a JSON object when present.
    pub arguments: Option<Json>,
}

impl Call {
    pub fn argument(&self, name: &str) -> Option<&Json> {
        self.arguments.as_ref().and_then(|a| a.get(name))
    }
}

/// A presented approval whose every field has the right type. Approvals that do not are dropped at parse time:
/// they never satisfy anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Approval {
    pub id: String,
    pub kind: String,
    pub mandate: String,
    /// Nanoseconds since the Unix epoch, as `now`.
    pub issued_at: i128,
    pub expires_at: i128,
    pub tool: Option<String>,
    pub target: Option<String>,
    pub digest: Option<String>,
    pub manifest: Option<String>,
    pub consumed: bool,
    /// Who granted it (blank: absent); checked against the kind's `approved by`.
    pub approved_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub subject_id: String,
    /// `subject.credential.id`, when it is not blank: who authorised the call, named in its decision.
    pub credential_id: Option<String>,
    /// `subject.credential.scopes`; `None` when there is no credential or it lists no scopes field.
    pub scopes: Option<Vec<String>>,
    /// Always present for [`Need::Call`]; never read for [`Need::Listing`].
    pub call: Option<Call>,
    pub resource_id: Option<String>,
    /// `context.mandate`; `None` only when the request carries `context.grants` (the mandate is then resolved
    /// by holder among the static mandates and the instances: `super::resolve`).
    pub mandate: Option<String>,
    /// `context.now` in nanoseconds since the Unix epoch (`value::parse_instant`: a fraction and an offset allowed).
    pub now: i128,
    pub operation_id: Option<String>,
    pub attempt: Option<Decimal>,
    pub approvals: Vec<Approval>,
    pub stops: Vec<Stop>,
    pub facts: Map<String, Json>,
    pub counters: Map<String, Json>,
    pub attributes: Map<String, Json>,
    /// `subject.properties`: the subject's declared attributes, as the gateway (or a trusted caller) filled them.
    pub subject_properties: Map<String, Json>,
    /// `resource.properties`.
    pub resource_properties: Map<String, Json>,
    /// `context.relations`: per relation, the tuples asked about and whether each holds.
    pub relations: Map<String, Json>,
    /// `context.holidays`: per calendar, its holidays as local dates `YYYY-MM-DD`.
    pub holidays: Map<String, Json>,
    /// `context.principals`: per principal id, its declared attributes (`{"user:dana": {"region": "eu"}}`).
    pub principals: Map<String, Json>,
    /// `context.grants`: the instances of templates the gateway filled for the subject (`None`: absent).
    pub grants: Option<Vec<super::instance::GrantInstance>>,
}

impl Request {
    /// A request that carries nothing: what a template's bounds are evaluated against (they read only the
    /// instance's parameters).
    pub(crate) fn blank() -> Request {
        Request {
            subject_id: String::new(),
            credential_id: None,
            scopes: None,
            call: None,
            resource_id: None,
            mandate: None,
            now: 0,
            operation_id: None,
            attempt: None,
            approvals: Vec::new(),
            stops: Vec::new(),
            facts: Map::new(),
            counters: Map::new(),
            attributes: Map::new(),
            subject_properties: Map::new(),
            resource_properties: Map::new(),
            relations: Map::new(),
            holidays: Map::new(),
            principals: Map::new(),
            grants: None,
        }
    }

    /// `context.principals.PRINCIPAL.NAME`; `None` when absent, also when the principal's entry is not an object.
    pub(crate) fn principal_attribute(&self, principal: &str, name: &str) -> Option<&Json> {
        self.principals.get(principal)?.as_object()?.get(name)
    }
}

/// Parses `bytes` as a request.
pub(crate) fn parse(bytes: &[u8], need: Need) -> Result<Request, RequestError> {
    const MALFORMED: RequestError =
        RequestError { malformed: true, missing: false, oversize: false, malformed_fields: 0, missing_fields: 0 };
    let json = match crate::json::parse(bytes) {
        Ok(json) => json,
        Err(JsonError::TooLarge) => return Err(RequestError { oversize: true, ..RequestError::default() }),
        Err(JsonError::Syntax | JsonError::Depth | JsonError::Duplicate) => return Err(MALFORMED),
    };
    let Some(root) = json.as_object() else {
        return Err(MALFORMED);
    };
    let mut p = Problems::default();

    let subject = p.object(root, "subject");
    let subject_id = p.required_string(root, "subject", "id");
    let credential = subject.and_then(|s| p.object(s, "subject.credential"));
    let subject_properties = subject.and_then(|s| p.object(s, "subject.properties")).cloned().unwrap_or_default();
    // Blank counts as absent, as for every identifier.
    let credential_id = credential.and_then(|c| p.string(c, "subject.credential.id")).filter(|id| !is_blank(id));
    let scopes = credential.and_then(|c| p.strings(c, "subject.credential.scopes"));

    let call = match need {
        Need::Listing => None,
        Need::Call => {
            let action = p.object(root, "action");
            let name = p.required_string(root, "action", "name");
            let arguments = action.and_then(|a| p.object(a, "action.arguments")).map(|a| Json::Object(a.clone()));
            name.map(|name| Call { name, arguments })
        }
    };

    // An empty or white-space-only id is absent (never binds, never matches, never counts as given).
    let resource = p.object(root, "resource");
    let resource_id = resource.and_then(|r| p.string(r, "resource.id")).filter(|id| !is_blank(id));
    let resource_properties = resource.and_then(|r| p.object(r, "resource.properties")).cloned().unwrap_or_default();

    let context = p.object(root, "context");
    // With `context.grants` the mandate may be left to resolution by holder; without, it is required.
    let mandate: Option<Option<String>> = match context {
        Some(context) if context.contains_key("grants") => match context.get("mandate") {
            None => Some(None),
            Some(Json::String(name)) => Some(Some(name.clone())),
            Some(_) => {
                p.malformed("context.mandate");
                None
            }
        },
        _ => p.required_string(root, "context", "mandate").map(Some),
    };
    let now = p.required_string(root, "context", "now").and_then(|text| {
        let parsed = parse_instant(&text);
        if parsed.is_none() {
            p.malformed("context.now");
        }
        parsed
    });
    let empty = Map::new();
    let context = context.unwrap_or(&empty);
    let operation_id = p.string(context, "context.operation_id").filter(|id| !is_blank(id));
    let attempt = match context.get("attempt") {
        None => None,
        Some(value) => {
            let attempt = integer(value);
            if attempt.is_none() {
                p.malformed("context.attempt");
            }
            attempt
        }
    };
    let approvals = match context.get("approvals") {
        None => Vec::new(),
        Some(Json::Array(items)) => usable_approvals(items),
        Some(_) => {
            p.malformed("context.approvals");
            Vec::new()
        }
    };
    let stops = p.stops(context).unwrap_or_default();
    let facts = p.object(context, "context.facts").cloned().unwrap_or_default();
    let counters = p.object(context, "context.counters").cloned().unwrap_or_default();
    let attributes = p.object(context, "context.attributes").cloned().unwrap_or_default();
    let relations = p.object(context, "context.relations").cloned().unwrap_or_default();
    let holidays = p.object(context, "context.holidays").cloned().unwrap_or_default();
    let principals = p.object(context, "context.principals").cloned().unwrap_or_default();
    // Every entry must be a well-formed instance (`GrantInstance::from_json`), at most `MAX_GRANTS` of them: one
    // that is not is no instance anyone could be decided under, and the gateway never fills one, so the whole
    // request is malformed.
    let grants = match context.get("grants") {
        None => None,
        Some(Json::Array(items)) => {
            let read: Option<Vec<_>> = items.iter().map(super::instance::GrantInstance::from_json).collect();
            let read = read.filter(|_| items.len() <= super::instance::MAX_GRANTS);
            if read.is_none() {
                p.malformed("context.grants");
            }
            read
        }
        Some(_) => {
            p.malformed("context.grants");
            None
        }
    };

    if p.error.is_error() {
        return Err(p.error);
    }
    // With no problem recorded every required field was found; the `else` only guards the types.
    let (Some(subject_id), Some(mandate), Some(now)) = (subject_id, mandate, now) else {
        return Err(RequestError { missing: true, ..RequestError::default() });
    };
    if need == Need::Call && call.is_none() {
        return Err(RequestError { missing: true, ..RequestError::default() });
    }
    Ok(Request {
        subject_id,
        credential_id,
        scopes,
        call,
        resource_id,
        mandate,
        now,
        operation_id,
        attempt,
        approvals,
        stops,
        facts,
        counters,
        attributes,
        subject_properties,
        resource_properties,
        relations,
        holidays,
        principals,
        grants,
    })
}

/// Reads fields while recording what is wrong, so one pass reports both a missing field and a malformed one.
#[derive(Debug, Default)]
struct Problems {
    error: RequestError,
}

/// The last segment of a field's path: its key in its parent object.
fn key_of(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

impl Problems {
    /// Records the field at `path` (a [`FIELDS`] entry) as present but wrong.
    fn malformed(&mut self, path: &str) {
        self.error.malformed = true;
        self.error.malformed_fields |= field_bit(path);
    }

    /// Records the required field at `path` as absent.
    fn missing(&mut self, path: &str) {
        self.error.missing = true;
        self.error.missing_fields |= field_bit(path);
    }

    /// An optional object field (`path` names it, its last segment is its key); a present non-object is malformed.
    fn object<'a>(&mut self, parent: &'a Map<String, Json>, path: &str) -> Option<&'a Map<String, Json>> {
        match parent.get(key_of(path)) {
            None => None,
            Some(Json::Object(map)) => Some(map),
            Some(_) => {
                self.malformed(path);
                None
            }
        }
    }

    /// An optional string field; a present non-string is malformed.
    fn string(&mut self, parent: &Map<String, Json>, path: &str) -> Option<String> {
        match parent.get(key_of(path)) {
            None => None,
            Some(Json::String(s)) => Some(s.clone()),
            Some(_) => {
                self.malformed(path);
                None
            }
        }
    }

    /// A required string field `parent.key` of the root. An absent parent means the field is missing too; a
    /// parent of the wrong type is already recorded as malformed by [`Problems::object`].
    fn required_string(&mut self, root: &Map<String, Json>, parent: &str, key: &str) -> Option<String> {
        let path = format!("{parent}.{key}");
        match root.get(parent) {
            None => {
                self.missing(&path);
                None
            }
            Some(Json::Object(map)) => match map.get(key) {
                None => {
                    self.missing(&path);
                    None
                }
                Some(Json::String(s)) => Some(s.clone()),
                Some(_) => {
                    self.malformed(&path);
                    None
                }
            },
            Some(_) => None,
        }
    }

    /// An optional array of strings.
    fn strings(&mut self, parent: &Map<String, Json>, path: &str) -> Option<Vec<String>> {
        let items = match parent.get(key_of(path)) {
            None => return None,
            Some(Json::Array(items)) => items,
            Some(_) => {
                self.malformed(path);
                return None;
            }
        };
        let strings: Option<Vec<String>> = items.iter().map(|i| i.as_str().map(str::to_string)).collect();
        if strings.is_none() {
            self.malformed(path);
        }
        strings
    }
}

/// One item of `context.stops` (docs/requests.md "Stops").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A mandate's name: today's stop, without id or level (it refuses calls with side effects).
    Named(String),
    /// `{"id", "level", "mandate" | "principal"}`.
    Object { id: String, level: StopLevel, on: StopOn },
}

/// What a stop object names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StopOn {
    Mandate(String),
    /// Every mandate of the principal: the roots it gave and the instances it was granted (and so every mandate below
    /// them).
    Principal(String),
}

/// A stop's level, weakest first: pause, cancel and revoke refuse calls with side effects, quarantine every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum StopLevel {
    Pause,
    Cancel,
    Revoke,
    Quarantine,
}

impl StopLevel {
    pub(crate) const ALL: [StopLevel; 4] =
        [StopLevel::Pause, StopLevel::Cancel, StopLevel::Revoke, StopLevel::Quarantine];

    pub(crate) fn name(self) -> &'static str {
        super::STOP_LEVEL_NAMES[self as usize]
    }

    fn parse(text: &str) -> Option<StopLevel> {
        StopLevel::ALL.into_iter().find(|l| l.name() == text)
    }
}

impl Problems {
    /// `context.stops`: an array of mandate names and stop objects. An object must carry a string `id`, a `level`
    /// of the four and exactly one of a string `mandate` or `principal` (other keys are ignored); anything else
    /// makes the request malformed, so an unreadable stop never allows what it would refuse.
    fn stops(&mut self, context: &Map<String, Json>) -> Option<Vec<Stop>> {
        let items = match context.get("stops") {
            None => return None,
            Some(Json::Array(items)) => items,
            Some(_) => {
                self.malformed("context.stops");
                return None;
            }
        };
        let stops: Option<Vec<Stop>> = items.iter().map(stop).collect();
        if stops.is_none() {
            self.malformed("context.stops");
        }
        stops
    }
}

fn stop(item: &Json) -> Option<Stop> {
    let object = match item {
        Json::String(name) => return Some(Stop::Named(name.clone())),
        Json::Object(object) => object,
        _ => return None,
    };
    let text = |key: &str| object.get(key).map(|v| v.as_str().map(str::to_string));
    let id = text("id")??;
    let level = StopLevel::parse(object.get("level")?.as_str()?)?;
    let on = match (text("mandate"), text("principal")) {
        (Some(Some(mandate)), None) => StopOn::Mandate(mandate),
        (None, Some(Some(principal))) => StopOn::Principal(principal),
        _ => return None,
    };
    Some(Stop::Object { id, level, on })
}

/// A JSON integer (not `1.0`) as an exact decimal.
fn integer(value: &Json) -> Option<Decimal> {
    let n = value.as_number()?;
    let whole = match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => i128::from(i),
        (None, Some(u)) => i128::from(u),
        (None, None) => return None,
    };
    whole.checked_mul(10i128.pow(DECIMAL_SCALE)).map(Decimal)
}

/// The fields a presented approval has: two approvals with the same id are the same approval only if these are equal.
const APPROVAL_FIELDS: [&str; 11] = [
    "id",
    "kind",
    "mandate",
    "issued_at",
    "expires_at",
    "tool",
    "target",
    "digest",
    "manifest",
    "consumed",
    "approved_by",
];

/// The well-formed approvals whose id no other presented approval contradicts. Two approvals with the same `id`
/// are one approval only if both are well formed and every field is equal (as JSON values, an absent field equal
/// only to an absent one): identical duplicates count once, and when any two differ (or one is malformed) no
/// approval with that id satisfies anything (a consumed copy next to an unconsumed one, for instance).
fn usable_approvals(items: &[Json]) -> Vec<Approval> {
    let mut groups: std::collections::HashMap<&str, Vec<&Json>> = std::collections::HashMap::new();
    for item in items {
        if let Some(id) = item.get("id").and_then(Json::as_str) {
            groups.entry(id).or_default().push(item);
        }
    }
    let same = |a: &Json, b: &Json| APPROVAL_FIELDS.iter().all(|key| a.get(key) == b.get(key));
    let contradicted: std::collections::HashSet<&str> = groups
        .iter()
        .filter(|(_, group)| {
            group.len() > 1 && group.iter().any(|item| approval(item).is_none() || !same(item, group[0]))
        })
        .map(|(id, _)| *id)
        .collect();
    items.iter().filter_map(approval).filter(|a| !contradicted.contains(a.id.as_str())).collect()
}

/// One presented approval, or `None` when a field it needs is absent or any known field has the wrong type.
fn approval(value: &Json) -> Option<Approval> {
    let map = value.as_object()?;
    let required = |key: &str| map.get(key).and_then(Json::as_str).map(str::to_string);
    // An optional field that is present must be a string; a wrongly typed one spoils the whole approval.
    let optional = |key: &str| -> Result<Option<String>, ()> {
        match map.get(key) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(()),
        }
    };
    let consumed = match map.get("consumed") {
        None => false,
        Some(Json::Bool(b)) => *b,
        Some(_) => return None,
    };
    Some(Approval {
        id: required("id").filter(|id| !is_blank(id))?,
        kind: required("kind")?,
        mandate: required("mandate")?,
        issued_at: parse_instant(&required("issued_at")?)?,
        expires_at: parse_instant(&required("expires_at")?)?,
        tool: optional("tool").ok()?,
        target: optional("target").ok()?.filter(|t| !is_blank(t)),
        digest: optional("digest").ok()?,
        manifest: optional("manifest").ok()?.filter(|m| !is_blank(m)),
        consumed,
        approved_by: optional("approved_by").ok()?.filter(|a| !is_blank(a)),
    })
}
