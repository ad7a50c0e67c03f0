//! Reading a request (docs/requests.md) from its tape, the twin of `crates/remit-lang/src/eval/request.rs`: the same fields, read in the
//! same order, with the same classification of what is wrong (`request.malformed`, `request.missing-field`,
//! `request.oversize`). The document must have passed [`crate::json::parse`] (its error is classified by
//! [`RequestError::json`]); every field is checked for its JSON type before use, and `null` counts as a wrong type,
//! never as absent, so `"stops": null` cannot switch a stop off.
//!
//! Nothing is copied: strings, arrays and objects are tape tokens (read with [`Doc::text`] and friends); only the
//! timestamps and the attempt number are converted. The usable approvals are listed in a slot buffer the caller
//! gives (the parse's key slots, [`crate::json::Scratch::keys`], which the parse no longer needs).

use crate::json::{merge_sort, Doc, Key, ARRAY, FALSE, NULL, NUMBER, OBJECT, STRING, TRUE};
use crate::value::{parse_timestamp, DECIMAL_SCALE, MAX_TIMESTAMP_TEXT};

/// What the caller needs from the request: a tool call (`decide`) or only the subject and context (tool listing,
/// where `action` is not read at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Call,
    Listing,
}

/// What is wrong with a request that cannot be decided on. `malformed` and `missing` may both be set; `oversize`
/// comes alone. The fields that are wrong (bit `i` is [`FIELDS`]`[i]`) are recorded when the request is a JSON
/// object: a request that is not JSON, or not an object, names none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestError {
    pub malformed: bool,
    pub missing: bool,
    pub oversize: bool,
    /// Fields present with the wrong JSON type or an unreadable value (`context.now` that is no timestamp).
    pub malformed_fields: u32,
    /// Required fields that are absent (or whose parent object is).
    pub missing_fields: u32,
}

const MALFORMED: RequestError =
    RequestError { malformed: true, missing: false, oversize: false, malformed_fields: 0, missing_fields: 0 };
const MISSING: RequestError =
    RequestError { malformed: false, missing: true, oversize: false, malformed_fields: 0, missing_fields: 0 };

/// The fields a request is read by, as a decision names them (`fields`), in byte order: a set of them is a `u32`
/// whose bit `i` is `FIELDS[i]` (`eval::request::FIELDS`).
pub const FIELDS: [&str; 26] = [
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
const F_ACTION: u32 = 1 << 0;
const F_ARGUMENTS: u32 = 1 << 1;
const F_NAME: u32 = 1 << 2;
const F_CONTEXT: u32 = 1 << 3;
const F_APPROVALS: u32 = 1 << 4;
const F_ATTEMPT: u32 = 1 << 5;
const F_ATTRIBUTES: u32 = 1 << 6;
const F_COUNTERS: u32 = 1 << 7;
const F_FACTS: u32 = 1 << 8;
const F_GRANTS: u32 = 1 << 9;
const F_HOLIDAYS: u32 = 1 << 10;
const F_MANDATE: u32 = 1 << 11;
const F_NOW: u32 = 1 << 12;
const F_OPERATION_ID: u32 = 1 << 13;
const F_PRINCIPALS: u32 = 1 << 14;
const F_RELATIONS: u32 = 1 << 15;
const F_STOPS: u32 = 1 << 16;
const F_RESOURCE: u32 = 1 << 17;
const F_RESOURCE_ID: u32 = 1 << 18;
const F_RESOURCE_PROPERTIES: u32 = 1 << 19;
const F_SUBJECT: u32 = 1 << 20;
const F_CREDENTIAL: u32 = 1 << 21;
const F_CREDENTIAL_ID: u32 = 1 << 22;
const F_SCOPES: u32 = 1 << 23;
const F_SUBJECT_ID: u32 = 1 << 24;
const F_SUBJECT_PROPERTIES: u32 = 1 << 25;

impl RequestError {
    /// The classification of a document the JSON rule refused.
    pub fn json(e: crate::json::JsonError) -> RequestError {
        match e {
            crate::json::JsonError::TooLarge => RequestError { oversize: true, ..RequestError::default() },
            _ => MALFORMED,
        }
    }

    /// The reason codes, sorted (`request.malformed` < `request.missing-field` < `request.oversize`).
    pub fn codes(self) -> impl Iterator<Item = &'static str> {
        [
            (self.malformed, "request.malformed"),
            (self.missing, "request.missing-field"),
            (self.oversize, "request.oversize"),
        ]
        .into_iter()
        .filter(|(set, _)| *set)
        .map(|(_, code)| code)
    }

    pub fn is_error(self) -> bool {
        self.malformed || self.missing || self.oversize
    }
}

/// The tool call of a request: the name's string token and `action.arguments` (an object token) when present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub name: u32,
    pub arguments: Option<u32>,
}

/// A presented approval whose every field has the right type (strings are tokens). Approvals that do not are
/// dropped when the request is read: they never satisfy anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approval {
    pub id: u32,
    pub kind: u32,
    pub mandate: u32,
    /// Nanoseconds since the Unix epoch, as `now`.
    pub issued_at: i128,
    pub expires_at: i128,
    pub tool: Option<u32>,
    pub target: Option<u32>,
    pub digest: Option<u32>,
    pub manifest: Option<u32>,
    pub consumed: bool,
    /// Who granted it (blank: absent).
    pub approved_by: Option<u32>,
}

impl Approval {
    /// All zeros (a placeholder in fixed arrays; never a presented approval).
    pub const EMPTY: Approval = Approval {
        id: 0,
        kind: 0,
        mandate: 0,
        issued_at: 0,
        expires_at: 0,
        tool: None,
        target: None,
        digest: None,
        manifest: None,
        consumed: false,
        approved_by: None,
    };
}

/// A request that can be decided on. Tokens are of the document it was read from.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub subject_id: u32,
    /// `subject.credential.id`; absent also when empty or only white space.
    pub credential_id: Option<u32>,
    /// `subject.credential.scopes` (an array token whose items are all strings); `None` when there is no credential
    /// or it lists no scopes field.
    pub scopes: Option<u32>,
    /// Always present for [`Need::Call`]; never read for [`Need::Listing`].
    pub call: Option<Call>,
    /// Absent also when empty or only white space.
    pub resource_id: Option<u32>,
    /// `context.mandate`; absent only when the request carries `context.grants` (the mandate is then resolved by
    /// holder: `decide::resolve`).
    pub mandate: Option<u32>,
    /// `context.grants`: an array token of at most [`crate::image::MAX_GRANTS`] instances, each well-formed
    /// ([`grant`]).
    pub grants: Option<u32>,
    /// `context.now` in nanoseconds since the Unix epoch.
    pub now: i128,
    /// Absent also when empty or only white space.
    pub operation_id: Option<u32>,
    /// An exact decimal (units of 10^-9), always a whole number.
    pub attempt: Option<i128>,
    /// `context.approvals`: an array token (what it holds is read by [`Request::approvals`]).
    pub approval_items: Option<u32>,
    /// `context.stops`: an array token whose items are all mandate names or well-formed stop objects ([`stop`]).
    pub stops: Option<u32>,
    /// `context.facts`, `context.counters`, `context.attributes`: object tokens (absent: empty).
    pub facts: Option<u32>,
    pub counters: Option<u32>,
    pub attributes: Option<u32>,
    /// `subject.properties`, `resource.properties`: object tokens (absent: empty), the declared attributes of the
    /// subject and the resource.
    pub subject_properties: Option<u32>,
    pub resource_properties: Option<u32>,
    /// `context.relations`: an object token (absent: empty), per relation the tuples asked about (read by
    /// `cond::holds`).
    pub relations: Option<u32>,
    /// `context.holidays`: an object token (absent: empty), per calendar its holidays as local dates `YYYY-MM-DD`
    /// (read by `cond::in_calendar`).
    pub holidays: Option<u32>,
    /// `context.principals`: an object token (absent: empty), per principal id the object of its declared
    /// attributes (read by `cond::read_base` under the principal of the request's mandate).
    pub principals: Option<u32>,
}

impl Request {
    /// The usable approvals ([`usable_approvals`]) of `context.approvals`, listed in `slots`, the first
    /// `read.len()` of them also read into `read`. `None` only when `slots` has fewer than three entries per item with
    /// an id (never with the parse's key slots, one per token: such an item is at least three tokens).
    pub fn approvals<'s>(&self, doc: &Doc<'_>, slots: &'s mut [u32], read: &mut [Approval]) -> Option<&'s [u32]> {
        match self.approval_items {
            None => Some(&[]),
            Some(items) => usable_approvals(doc, items, slots, read),
        }
    }
}

/// The fields read, by object.
const ID: Key<'static> = Key::new(b"id");
const PROPERTIES: Key<'static> = Key::new(b"properties");
const ROOT_FIELDS: [Key<'static>; 4] =
    [Key::new(b"subject"), Key::new(b"action"), Key::new(b"resource"), Key::new(b"context")];
const SUBJECT_FIELDS: [Key<'static>; 3] = [ID, Key::new(b"credential"), PROPERTIES];
const CREDENTIAL_FIELDS: [Key<'static>; 2] = [ID, Key::new(b"scopes")];
const ACTION_FIELDS: [Key<'static>; 2] = [Key::new(b"name"), Key::new(b"arguments")];
const CONTEXT_FIELDS: [Key<'static>; 13] = [
    Key::new(b"mandate"),
    Key::new(b"now"),
    Key::new(b"operation_id"),
    Key::new(b"attempt"),
    Key::new(b"approvals"),
    Key::new(b"stops"),
    Key::new(b"facts"),
    Key::new(b"counters"),
    Key::new(b"attributes"),
    Key::new(b"relations"),
    Key::new(b"holidays"),
    Key::new(b"principals"),
    Key::new(b"grants"),
];

/// Reads the request whose root is token 0 of `doc`. The presented approvals are only checked to be an array: an
/// item that is not a usable approval is left out, never an error, so they are read when a gate needs them
/// ([`Request::approvals`]), and a decision that ends before any gate never reads them.
pub fn parse(doc: &Doc<'_>, need: Need) -> Result<Request, RequestError> {
    const ROOT: u32 = 0;
    if doc.token(ROOT).kind() != OBJECT {
        return Err(MALFORMED);
    }
    let mut p = Problems { doc, error: RequestError::default() };
    // Each object's fields are found in one pass over its keys.
    let [subject, action, resource, context] = doc.fields(Some(ROOT), &ROOT_FIELDS);

    let subject_object = p.typed(subject, OBJECT, F_SUBJECT);
    let [subject_id, credential, subject_properties] = doc.fields(subject_object, &SUBJECT_FIELDS);
    let subject_id = p.required_string(subject, subject_id, F_SUBJECT_ID);
    let credential = p.typed(credential, OBJECT, F_CREDENTIAL);
    let subject_properties = p.typed(subject_properties, OBJECT, F_SUBJECT_PROPERTIES);
    let [credential_id, scopes] = doc.fields(credential, &CREDENTIAL_FIELDS);
    let credential_id = p.typed(credential_id, STRING, F_CREDENTIAL_ID).filter(|&id| !is_blank(doc, id));
    let scopes = p.strings(scopes, F_SCOPES);

    let call = match need {
        Need::Listing => None,
        Need::Call => {
            let object = p.typed(action, OBJECT, F_ACTION);
            let [name, arguments] = doc.fields(object, &ACTION_FIELDS);
            let name = p.required_string(action, name, F_NAME);
            let arguments = p.typed(arguments, OBJECT, F_ARGUMENTS);
            name.map(|name| Call { name, arguments })
        }
    };

    let resource = p.typed(resource, OBJECT, F_RESOURCE);
    let [resource_id, resource_properties] = doc.fields(resource, &[ID, PROPERTIES]);
    let resource_id = p.typed(resource_id, STRING, F_RESOURCE_ID).filter(|&id| !is_blank(doc, id));
    let resource_properties = p.typed(resource_properties, OBJECT, F_RESOURCE_PROPERTIES);

    let object = p.typed(context, OBJECT, F_CONTEXT);
    let [mandate, now, operation_id, attempt, approval_items, stops, facts, counters, attributes, relations, holidays, principals, grants] =
        doc.fields(object, &CONTEXT_FIELDS);
    // With `context.grants` the mandate may be left to resolution by holder; without, it is required.
    let mandate = match (grants, mandate) {
        (Some(_), None) => Some(None),
        (Some(_), Some(m)) => p.typed(Some(m), STRING, F_MANDATE).map(Some),
        (None, m) => p.required_string(context, m, F_MANDATE).map(Some),
    };
    // Every entry must be a well-formed instance (`GrantInstance::from_json`), at most `MAX_GRANTS` of them: else
    // the whole request is malformed.
    let grants = p.typed(grants, ARRAY, F_GRANTS);
    let grants = match grants {
        Some(items)
            if elements(doc, items).count() > crate::image::MAX_GRANTS
                || elements(doc, items).any(|item| grant(doc, item).is_none()) =>
        {
            p.malformed(F_GRANTS);
            None
        }
        g => g,
    };
    let now = p.required_string(context, now, F_NOW).and_then(|text| {
        let parsed = timestamp(doc, text);
        if parsed.is_none() {
            p.malformed(F_NOW);
        }
        parsed
    });
    let operation_id = p.typed(operation_id, STRING, F_OPERATION_ID).filter(|&id| !is_blank(doc, id));
    let attempt = match attempt {
        None => None,
        Some(value) => {
            let attempt = integer(doc, value);
            if attempt.is_none() {
                p.malformed(F_ATTEMPT);
            }
            attempt
        }
    };
    let approval_items = p.typed(approval_items, ARRAY, F_APPROVALS);
    let stops = p.stops(stops);
    let facts = p.typed(facts, OBJECT, F_FACTS);
    let counters = p.typed(counters, OBJECT, F_COUNTERS);
    let attributes = p.typed(attributes, OBJECT, F_ATTRIBUTES);
    let relations = p.typed(relations, OBJECT, F_RELATIONS);
    let holidays = p.typed(holidays, OBJECT, F_HOLIDAYS);
    let principals = p.typed(principals, OBJECT, F_PRINCIPALS);

    if p.error.is_error() {
        return Err(p.error);
    }
    // With no problem recorded every required field was found; the `match` only guards the types.
    let (subject_id, mandate, now) = match (subject_id, mandate, now) {
        (Some(s), Some(m), Some(n)) => (s, m, n),
        _ => return Err(MISSING),
    };
    if need == Need::Call && call.is_none() {
        return Err(MISSING);
    }
    Ok(Request {
        subject_id,
        credential_id,
        scopes,
        call,
        resource_id,
        mandate,
        grants,
        now,
        operation_id,
        attempt,
        approval_items,
        stops,
        facts,
        counters,
        attributes,
        subject_properties,
        resource_properties,
        relations,
        holidays,
        principals,
    })
}

/// Reads fields while recording what is wrong, so one pass reports both a missing field and a malformed one.
struct Problems<'d, 'a> {
    doc: &'d Doc<'a>,
    error: RequestError,
}

impl Problems<'_, '_> {
    /// Records `field` (a bit of [`FIELDS`]) as present but wrong.
    fn malformed(&mut self, field: u32) {
        self.error.malformed = true;
        self.error.malformed_fields |= field;
    }

    /// Records the required `field` as absent.
    fn missing(&mut self, field: u32) {
        self.error.missing = true;
        self.error.missing_fields |= field;
    }

    /// An optional field of `kind` (its value token, when present); a present value of another kind is malformed.
    fn typed(&mut self, value: Option<u32>, kind: u8, field: u32) -> Option<u32> {
        let value = value?;
        if self.doc.token(value).kind() != kind {
            self.malformed(field);
            return None;
        }
        Some(value)
    }

    /// A required string field `value` of the root's field `parent`. An absent parent means the field is missing
    /// too; a parent of the wrong type is recorded as malformed where it is read.
    fn required_string(&mut self, parent: Option<u32>, value: Option<u32>, field: u32) -> Option<u32> {
        let parent = match parent {
            None => {
                self.missing(field);
                return None;
            }
            Some(parent) => parent,
        };
        if self.doc.token(parent).kind() != OBJECT {
            return None;
        }
        match value {
            None => {
                self.missing(field);
                None
            }
            Some(value) if self.doc.token(value).kind() == STRING => Some(value),
            Some(_) => {
                self.malformed(field);
                None
            }
        }
    }

    /// An optional array of strings (the array token); a present non-array, or an item that is not a string, is
    /// malformed.
    fn strings(&mut self, value: Option<u32>, field: u32) -> Option<u32> {
        let items = self.typed(value, ARRAY, field)?;
        if elements(self.doc, items).any(|item| self.doc.token(item).kind() != STRING) {
            self.malformed(field);
            return None;
        }
        Some(items)
    }
}

impl Problems<'_, '_> {
    /// `context.stops`: every item a mandate name or a stop object [`stop`] reads; else the request is malformed.
    fn stops(&mut self, value: Option<u32>) -> Option<u32> {
        let items = self.typed(value, ARRAY, F_STOPS)?;
        if elements(self.doc, items).any(|item| stop(self.doc, item).is_none()) {
            self.malformed(F_STOPS);
            return None;
        }
        Some(items)
    }
}

const STOP_FIELDS: [Key<'static>; 4] = [ID, Key::new(b"level"), Key::new(b"mandate"), Key::new(b"principal")];

/// The level names, weakest first (`eval::request::StopLevel`): a stop's strength is its index plus one.
pub const STOP_LEVELS: [&[u8]; 4] = [b"pause", b"cancel", b"revoke", b"quarantine"];

/// One item of `context.stops` (the twin of `eval::request::Stop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    /// 0 for a bare mandate name; else the level's index in [`STOP_LEVELS`] plus one.
    pub strength: u32,
    /// The id's string token (a bare name: the name's).
    pub id: u32,
    /// The named mandate's or principal's string token.
    pub on: u32,
    pub principal: bool,
}

/// One instance of `context.grants`, its fields as tokens (`eval::instance::GrantInstance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub id: u32,
    pub version: u64,
    pub template: u32,
    pub principal: u32,
    pub holder: u32,
    pub params: u32,
    pub granted: u32,
    /// `parent`, a string token (`TEMPLATE/ID`): the instance it hangs under (sub-delegation).
    pub parent: Option<u32>,
}

impl Grant {
    pub const EMPTY: Grant =
        Grant { id: 0, version: 0, template: 0, principal: 0, holder: 0, params: 0, granted: 0, parent: None };
}

/// An instance the request is decided under: its template (index), the mandate record it decides as
/// ([`crate::image::MANDATE_TEMPLATE`]); its checks and names are `crate::grants`'s, its fields, and once checked its `granted` and window (nanoseconds).
#[derive(Clone, Copy, Debug)]
pub struct Instance {
    pub template: u32,
    pub mandate: u32,
    pub grant: Grant,
    pub granted: i128,
    pub valid_from: Option<i128>,
    pub valid_until: Option<i128>,
}

impl Instance {
    pub const EMPTY: Instance =
        Instance { template: 0, mandate: 0, grant: Grant::EMPTY, granted: 0, valid_from: None, valid_until: None };
}

/// The longest instance id (bytes of its text), `eval::instance::MAX_INSTANCE_ID`.
pub const MAX_INSTANCE_ID: usize = 128;

const GRANT_FIELDS: [Key<'static>; 8] = [
    ID,
    Key::new(b"version"),
    Key::new(b"template"),
    Key::new(b"principal"),
    Key::new(b"holder"),
    Key::new(b"params"),
    Key::new(b"granted"),
    Key::new(b"parent"),
];

/// Reads one entry of `context.grants` strictly (`GrantInstance::from_json`): an object whose `id` (1 to
/// [`MAX_INSTANCE_ID`] bytes, not blank), `template`, `principal`, `holder` and `granted` are strings, `version` a
/// whole number that fits `u64`, `params` an object and `parent`, when present, a string (other keys are ignored).
pub fn grant(doc: &Doc<'_>, item: u32) -> Option<Grant> {
    if doc.token(item).kind() != OBJECT {
        return None;
    }
    let [id, version, template, principal, holder, params, granted, parent] = doc.fields(Some(item), &GRANT_FIELDS);
    let string = |t: Option<u32>| t.filter(|&t| doc.token(t).kind() == STRING);
    let id = string(id).filter(|&id| doc.text(id).count() <= MAX_INSTANCE_ID && !is_blank(doc, id))?;
    let version = version.filter(|&v| doc.token(v).kind() == NUMBER)?;
    let raw = doc.raw(version);
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in raw {
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    let parent = match parent {
        None => None,
        Some(p) => Some(string(Some(p))?),
    };
    Some(Grant {
        id,
        version: n,
        template: string(template)?,
        principal: string(principal)?,
        holder: string(holder)?,
        params: params.filter(|&p| doc.token(p).kind() == OBJECT)?,
        granted: string(granted)?,
        parent,
    })
}

/// A stop item: a string (a mandate's name), or an object with a string `id`, a `level` of [`STOP_LEVELS`] and
/// exactly one of a string `mandate` or `principal` (other keys ignored). `None`: unreadable.
pub fn stop(doc: &Doc<'_>, item: u32) -> Option<Stop> {
    let kind = doc.token(item).kind();
    if kind == STRING {
        return Some(Stop { strength: 0, id: item, on: item, principal: false });
    }
    if kind != OBJECT {
        return None;
    }
    let string = |t: Option<u32>| t.filter(|&t| doc.token(t).kind() == STRING);
    let [id, level, mandate, principal] = doc.fields(Some(item), &STOP_FIELDS);
    let id = string(id)?;
    let level = string(level)?;
    let strength = (0..STOP_LEVELS.len()).find(|&i| doc.text_is(level, STOP_LEVELS[i]))? as u32 + 1;
    let (on, principal) = match (mandate, principal) {
        (Some(m), None) => (string(Some(m))?, false),
        (None, Some(p)) => (string(Some(p))?, true),
        _ => return None,
    };
    Some(Stop { strength, id, on, principal })
}

/// The elements of the array token `array`, in order.
pub fn elements<'d>(doc: &'d Doc<'_>, array: u32) -> impl Iterator<Item = u32> + 'd {
    let end = doc.token(array).next;
    let mut item = if doc.token(array).kind() == ARRAY { array + 1 } else { end };
    core::iter::from_fn(move || {
        if item >= end {
            return None;
        }
        let current = item;
        // A token's `next` is always past it (the parser's tape), so this ends; `max` keeps it so on any tape.
        item = doc.token(item).next.max(item + 1);
        Some(current)
    })
}

/// Empty or only white space (Unicode `White_Space`, as `char::is_whitespace`, [`white_space`]): such an identifier counts as absent.
/// `tok` is a string token.
pub fn is_blank(doc: &Doc<'_>, tok: u32) -> bool {
    // The usual case: a first byte that is printable ASCII other than a space.
    if let Some(&first) = doc.plain(tok).and_then(|raw| raw.first()) {
        if (0x21..0x7f).contains(&first) {
            return false;
        }
    }
    let mut bytes = doc.text(tok);
    // The unescaped content of an accepted string is UTF-8: decode it character by character.
    while let Some(first) = bytes.next() {
        let (len, init) = match first {
            0x00..=0x7f => (0, u32::from(first)),
            0xc0..=0xdf => (1, u32::from(first & 0x1f)),
            0xe0..=0xef => (2, u32::from(first & 0x0f)),
            _ => (3, u32::from(first & 0x07)),
        };
        let mut code = init;
        for _ in 0..len {
            code = (code << 6) | u32::from(bytes.next().unwrap_or(0x80) & 0x3f);
        }
        if !white_space(code) {
            return false;
        }
    }
    true
}

/// The Unicode `White_Space` property, which `char::is_whitespace` tests (its table lookup in `core` keeps a panic
/// path on wasm32, so the 25 code points are listed here; a test compares every `char`).
pub fn white_space(code: u32) -> bool {
    matches!(
        code,
        0x09..=0x0d | 0x20 | 0x85 | 0xa0 | 0x1680 | 0x2000..=0x200a | 0x2028 | 0x2029 | 0x202f | 0x205f | 0x3000
    )
}

/// The timestamp a string token holds (its unescaped content), or `None`.
pub(crate) fn timestamp_of(doc: &Doc<'_>, tok: u32) -> Option<i128> {
    timestamp(doc, tok)
}

fn timestamp(doc: &Doc<'_>, tok: u32) -> Option<i128> {
    if let Some(raw) = doc.plain(tok) {
        return parse_timestamp(raw);
    }
    let mut text = [0u8; MAX_TIMESTAMP_TEXT];
    let mut len = 0;
    for byte in doc.text(tok) {
        *text.get_mut(len)? = byte;
        len += 1;
    }
    parse_timestamp(text.get(..len)?)
}

/// A JSON integer (not `1.0`, not `1e3`) in the range of `i64` or `u64`, as an exact decimal: what serde_json's
/// `as_i64` / `as_u64` accept of a number it keeps as written (`arbitrary_precision`).
fn integer(doc: &Doc<'_>, tok: u32) -> Option<i128> {
    if doc.token(tok).kind() != NUMBER {
        return None;
    }
    let raw = doc.raw(tok);
    let (negative, digits) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    // At most 20 digits: below 10^20, which `u128` holds; `u64` arithmetic while it fits (an `i128`
    // multiplication is a call on wasm32).
    let mut whole: u128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = u64::from(d - b'0');
        whole = match u64::try_from(whole) {
            Ok(w) if w < u64::MAX / 10 - 9 => u128::from(w * 10 + digit),
            _ => whole * 10 + u128::from(digit),
        };
    }
    let whole = i128::try_from(whole).ok()?;
    let whole = if negative { -whole } else { whole };
    if whole < i128::from(i64::MIN) || whole > i128::from(u64::MAX) {
        return None;
    }
    whole.checked_mul(10i128.pow(DECIMAL_SCALE))
}

/// The fields a presented approval has: two approvals with the same id are the same approval only if these are equal.
const APPROVAL_FIELDS: [Key<'static>; 11] = [
    ID,
    Key::new(b"kind"),
    Key::new(b"mandate"),
    Key::new(b"issued_at"),
    Key::new(b"expires_at"),
    Key::new(b"tool"),
    Key::new(b"target"),
    Key::new(b"digest"),
    Key::new(b"manifest"),
    Key::new(b"consumed"),
    Key::new(b"approved_by"),
];

/// The well-formed approvals among the items of the array `items` whose id no other presented approval
/// contradicts, in document order, listed in `slots`. Two approvals with the same `id` are one approval only if
/// both are well formed and every field is equal (as JSON values, an absent field equal only to an absent one):
/// identical duplicates count once, and when any two differ (or one is malformed) no approval with that id satisfies
/// anything. Items are grouped by sorting them by id, so any number of approvals costs `n log n` comparisons.
/// `None` when `slots` is too small. The first `read.len()` usable approvals are also read into `read`.
pub fn usable_approvals<'a>(
    doc: &Doc<'_>,
    items: u32,
    slots: &'a mut [u32],
    read: &mut [Approval],
) -> Option<&'a [u32]> {
    // The items with a string id (only they can be grouped, and only they can be usable) at the front of `slots`,
    // their ids two lengths further: both in document order, as each id lies inside its item; the slots between them
    // are the sort's buffer. The ids are sorted and grouped without looking anything up again (an id looked up per
    // comparison cost most of a decision with many approvals). Each item's id is looked up once and written beside it,
    // then the pairs are split (an item with an id is at least three tokens, so three slots per item are there).
    let mut len = 0;
    for item in elements(doc, items) {
        if doc.token(item).kind() != OBJECT {
            continue;
        }
        if let Some(id) = doc.get(item, b"id").filter(|&id| doc.token(id).kind() == STRING) {
            *slots.get_mut(2 * len)? = item;
            *slots.get_mut(2 * len + 1)? = id;
            len += 1;
        }
    }
    if 3 * len > slots.len() {
        return None;
    }
    for k in 0..len {
        *slots.get_mut(2 * len + k)? = *slots.get(2 * k + 1)?;
    }
    for k in 0..len {
        *slots.get_mut(k)? = *slots.get(2 * k)?;
    }
    if len > slots.len() {
        return None;
    }
    let (listed, rest) = slots.split_at_mut(len);
    if len > rest.len() {
        return None;
    }
    let (buf, ids) = rest.split_at_mut(len);
    let ids = ids.get_mut(..len)?;
    merge_sort(ids, buf, |a, b| doc.text_cmp(a, b).is_lt());
    // A group whose items are not all well formed and equal is struck out in `listed` (the `STRUCK` bit set, above
    // every token index, so `listed` stays in order). The item an id lies in is the last item that starts before it.
    const STRUCK: u32 = 1 << 31;
    let place = |listed: &[u32], id: u32| listed.partition_point(|&item| item & !STRUCK < id).wrapping_sub(1);
    let mut first = 0;
    while first < len {
        let head = *ids.get(first)?;
        let mut end = first + 1;
        while end < len && doc.text_eq(head, *ids.get(end)?) {
            end += 1;
        }
        let group = ids.get(first..end)?;
        if group.len() > 1 {
            let head = *listed.get(place(listed, head))? & !STRUCK;
            let contradicted = group.iter().any(|&id| match listed.get(place(listed, id)) {
                Some(&item) => {
                    let item = item & !STRUCK;
                    approval(doc, item).is_none() || !APPROVAL_FIELDS.iter().all(|key| same(doc, item, head, key.name))
                }
                None => true,
            });
            if contradicted {
                for &id in group {
                    let at = place(listed, id);
                    if let Some(slot) = listed.get_mut(at) {
                        *slot |= STRUCK;
                    }
                }
            }
        }
        first = end;
    }
    // The well-formed ones that are not struck out, in document order at the front of `slots`, the first of them
    // also read into `read`.
    let mut kept = 0;
    for k in 0..len {
        let item = *listed.get(k)?;
        if item & STRUCK != 0 {
            continue;
        }
        if let Some(approval) = approval(doc, item) {
            *listed.get_mut(kept)? = item;
            if let Some(slot) = read.get_mut(kept) {
                *slot = approval;
            }
            kept += 1;
        }
    }
    listed.get(..kept)
}

/// Whether the objects `a` and `b` have equal values for `key` (both absent counts as equal).
fn same(doc: &Doc<'_>, a: u32, b: u32, key: &[u8]) -> bool {
    match (doc.get(a, key), doc.get(b, key)) {
        (None, None) => true,
        (Some(x), Some(y)) => value_eq(doc, x, y, 0),
        _ => false,
    }
}

/// JSON value equality as serde_json's (with `arbitrary_precision`): numbers by their text as written, strings
/// by their unescaped content, arrays element by element, objects by their entries in any order. Recursion follows
/// the nesting, which the parser bounds; past [`crate::json::MAX_DEPTH`] (never on a parsed tape) values are unequal.
pub fn value_eq(doc: &Doc<'_>, a: u32, b: u32, depth: usize) -> bool {
    let (ta, tb) = (doc.token(a), doc.token(b));
    if ta.kind() != tb.kind() || depth > crate::json::MAX_DEPTH {
        return false;
    }
    match ta.kind() {
        NULL | TRUE | FALSE => true,
        NUMBER => crate::same_bytes(doc.raw(a), doc.raw(b)),
        STRING => doc.text_eq(a, b),
        ARRAY => {
            let (mut x, mut y) = (elements(doc, a), elements(doc, b));
            loop {
                match (x.next(), y.next()) {
                    (None, None) => return true,
                    (Some(i), Some(j)) if value_eq(doc, i, j, depth + 1) => {}
                    _ => return false,
                }
            }
        }
        OBJECT => {
            // Keys are distinct in an accepted document: equal sizes and every entry of `a` found equal in `b`.
            let entries = |obj: u32| elements_of_object(doc, obj).count();
            entries(a) == entries(b)
                && elements_of_object(doc, a).all(|key| {
                    let mut found = None;
                    for other in elements_of_object(doc, b) {
                        if doc.text_eq(key, other) {
                            found = Some(doc.token(other).next);
                            break;
                        }
                    }
                    match found {
                        Some(value) => value_eq(doc, doc.token(key).next, value, depth + 1),
                        None => false,
                    }
                })
        }
        _ => false,
    }
}

/// The key tokens of the object token `obj`, in order.
pub fn elements_of_object<'d>(doc: &'d Doc<'_>, obj: u32) -> impl Iterator<Item = u32> + 'd {
    let end = doc.token(obj).next;
    let mut key = if doc.token(obj).kind() == OBJECT { obj + 1 } else { end };
    core::iter::from_fn(move || {
        if key >= end {
            return None;
        }
        let current = key;
        let value = doc.token(key).next.max(key + 1);
        key = doc.token(value).next.max(value + 1);
        Some(current)
    })
}

/// One presented approval, or `None` when a field it needs is absent or any known field has the wrong type.
pub fn approval(doc: &Doc<'_>, item: u32) -> Option<Approval> {
    if doc.token(item).kind() != OBJECT {
        return None;
    }
    // One pass over the approval's keys.
    let [id, kind, mandate, issued_at, expires_at, tool, target, digest, manifest, consumed, approved_by] =
        doc.fields(Some(item), &APPROVAL_FIELDS);
    let required = |v: Option<u32>| v.filter(|&v| doc.token(v).kind() == STRING);
    // An optional field that is present must be a string; a wrongly typed one spoils the whole approval.
    let optional = |v: Option<u32>| -> Result<Option<u32>, ()> {
        match v {
            None => Ok(None),
            Some(v) if doc.token(v).kind() == STRING => Ok(Some(v)),
            Some(_) => Err(()),
        }
    };
    let consumed = match consumed.map(|v| doc.token(v).kind()) {
        None => false,
        Some(TRUE) => true,
        Some(FALSE) => false,
        Some(_) => return None,
    };
    Some(Approval {
        id: required(id).filter(|&id| !is_blank(doc, id))?,
        kind: required(kind)?,
        mandate: required(mandate)?,
        issued_at: timestamp(doc, required(issued_at)?)?,
        expires_at: timestamp(doc, required(expires_at)?)?,
        tool: optional(tool).ok()?,
        target: optional(target).ok()?.filter(|&t| !is_blank(doc, t)),
        digest: optional(digest).ok()?,
        manifest: optional(manifest).ok()?.filter(|&m| !is_blank(doc, m)),
        consumed,
        approved_by: optional(approved_by).ok()?.filter(|&a| !is_blank(doc, a)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Buffers;

    #[test]
    fn white_space_is_char_is_whitespace() {
        for code in 0..=0x10ffffu32 {
            if let Some(c) = char::from_u32(code) {
                assert_eq!(white_space(code), c.is_whitespace(), "U+{code:04X}");
            }
        }
    }

    fn read(text: &str, need: Need) -> Result<usize, RequestError> {
        let mut buffers = Buffers::new();
        let (doc, keys) = buffers.parse(text.as_bytes()).map_err(RequestError::json)?;
        let mut slots = keys.to_vec();
        parse(&doc, need).map(|r| r.approvals(&doc, &mut slots, &mut []).map_or(0, <[u32]>::len))
    }

    #[test]
    fn classification() {
        let base =
            r#"{"subject":{"id":"a"},"action":{"name":"t"},"context":{"mandate":"m","now":"2026-11-30T12:00:00Z"}}"#;
        assert_eq!(read(base, Need::Call), Ok(0));
        assert_eq!(read("[]", Need::Call), Err(MALFORMED));
        let fields = |malformed_fields, missing_fields| RequestError {
            malformed: malformed_fields != 0,
            missing: missing_fields != 0,
            oversize: false,
            malformed_fields,
            missing_fields,
        };
        assert_eq!(read(&base.replace(r#""action":{"name":"t"},"#, ""), Need::Call), Err(fields(0, F_NAME)));
        assert_eq!(read(&base.replace(r#""action":{"name":"t"},"#, ""), Need::Listing), Ok(0));
        let both = base.replace(r#""name":"t""#, r#""name":1"#).replace(r#""mandate":"m","#, "");
        assert_eq!(read(&both, Need::Call), Err(fields(F_NAME, F_MANDATE)));
        assert_eq!(read(&base.replace("12:00:00Z", "12:00:60Z"), Need::Call), Err(fields(F_NOW, 0)));
        assert_eq!(read(&base.replace(r#"{"id":"a"}"#, "7"), Need::Call), Err(fields(F_SUBJECT, 0)));
        assert_eq!(read(&base.replace("12:00:00Z", "12:00:00+0100"), Need::Call), Err(fields(F_NOW, 0)));
        assert_eq!(read(&base.replace("12:00:00Z", "12:00:00.250+01:00"), Need::Call), Ok(0));
        assert_eq!(read(&base.replace(r#""now""#, r#""attempt":1.0,"now""#), Need::Call), Err(fields(F_ATTEMPT, 0)));
        assert_eq!(read(&base.replace(r#""now""#, r#""attempt":-0,"now""#), Need::Call), Ok(0));
    }

    #[test]
    fn approvals_with_one_id_must_agree() {
        let approval = r#"{"id":"x","kind":"k","mandate":"m","issued_at":"2026-11-30T11:00:00Z","expires_at":"2026-11-30T13:00:00Z"}"#;
        let with = |items: &str| {
            read(
                &format!(
                    r#"{{"subject":{{"id":"a"}},"action":{{"name":"t"}},"context":{{"mandate":"m","now":"2026-11-30T12:00:00Z","approvals":[{items}]}}}}"#
                ),
                Need::Call,
            )
        };
        assert_eq!(with(approval), Ok(1));
        assert_eq!(with(&format!("{approval},{approval}")), Ok(2));
        let consumed = approval.replace('}', r#","consumed":true}"#);
        assert_eq!(with(&format!("{approval},{consumed}")), Ok(0));
        let other = approval.replace(r#""id":"x""#, r#""id":"\u0079""#);
        assert_eq!(with(&format!("{approval},{other},1,null")), Ok(2));
        let broken = approval.replace(r#""kind":"k""#, r#""kind":7"#);
        assert_eq!(with(&format!("{approval},{broken}")), Ok(0));
        assert_eq!(with(&format!("{other},{broken}")), Ok(1));
    }
}
