//! What the policy reads about the world — subjects' and resources' attributes, relations, calendars' holidays —
//! and where each value comes from: the gateway's data sets (`from data`) or a trusted enforcement point's AuthZEN
//! `properties` (`from properties`). The module stays data-free: the gateway fills the values each request needs
//! into it, looked up by the request's own keys, before deciding (docs/gateway.md "Data sets").
//!
//! Two steps, as for the rest of the state: [`strip`] (before the batch, no store) removes every value the caller
//! may not give — a `from data` value always (the agent is never a source), a `from properties` value unless the
//! caller is an enforcement point the operator trusts, and what the policy does not read at all —, recording each in
//! `ignored`; [`fill`] (in the batch's transaction) looks the `from data` values up in the store.
//!
//! The request shape (what the module reads): `subject.properties.ATTR`, `resource.properties.ATTR`,
//! `context.principals.PRINCIPAL.ATTR` (the attributes of the principals of the mandates that may decide the
//! request, always from the data sets: no caller knows them),
//! `context.relations.R` (an array of `{"args": [A, B], "holds": bool}`, one per tuple the policy asks about,
//! holding or not: an asked tuple that is not listed is unevaluable, and fails closed) and
//! `context.holidays.CALENDAR` (the calendar's holidays, `YYYY-MM-DD`). Uses nothing else of the core.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};

use crate::state_cache::DataReads;
use crate::store::{StoreResult, HOLIDAY_RELATION};
use remit_lang::wasm::meta::PolicyMeta;

/// What the policy reads about the world, and from where: what the compiled policy's metadata says
/// ([`WorldSpec::from_meta`]), unless an operator overrides it as JSON (`remit serve --world FILE`); the empty spec
/// (the default) changes no request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldSpec {
    /// The declared subject types (`subject user { … }`).
    #[serde(default)]
    pub subject_types: Vec<EntitySpec>,
    /// The declared resource types (`resource todo { … }`).
    #[serde(default)]
    pub resource_types: Vec<EntitySpec>,
    /// The resource type of each tool that declares one (`resource TYPE` in the tool): a request is looked up as
    /// this type, a caller's other `resource.type` replaced (and recorded in `ignored`); a request of a tool that
    /// declares none is looked up as its `resource.type`, else as the single declared resource type.
    #[serde(default)]
    pub tool_resource_types: BTreeMap<String, String>,
    #[serde(default)]
    pub relations: Vec<RelationSpec>,
    #[serde(default)]
    pub calendars: Vec<CalendarSpec>,
    /// The declared principal type (`principal customer { … }`): its attributes are filled into
    /// `context.principals`, from the data sets only (a `properties` source is refused here as in the language).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_type: Option<EntitySpec>,
}

impl WorldSpec {
    /// What the compiled policy's metadata says it reads (`remit_lang::wasm::meta::WorldMeta`); empty for a policy
    /// that reads nothing of the world, or whose module was built before the metadata carried it.
    pub fn from_meta(meta: &PolicyMeta) -> WorldSpec {
        use remit_lang::wasm::meta::{EntityMeta, TermMeta};
        let Some(world) = &meta.world else { return WorldSpec::default() };
        let source = |text: &str| if text == "properties" { Source::Properties } else { Source::Data };
        let entity = |e: &EntityMeta| EntitySpec {
            type_name: e.type_name.clone(),
            attributes: e
                .attributes
                .iter()
                .map(|a| AttrSpec { name: a.name.clone(), source: source(&a.source) })
                .collect(),
        };
        let term = |t: &TermMeta| -> Option<Term> {
            Some(match t {
                TermMeta::Value(text) => Term::Literal(text.clone()),
                TermMeta::Subject => Term::Subject,
                TermMeta::Resource => Term::Resource,
                TermMeta::Arg(name) => Term::Arg(name.clone()),
                TermMeta::SubjectAttribute(name) => Term::SubjectAttr(name.clone()),
                TermMeta::ResourceAttribute(name) => Term::ResourceAttr(name.clone()),
                TermMeta::PrincipalAttribute(name) => Term::PrincipalAttr(name.clone()),
                // Not looked up: the atom is left out of the request, so the module finds it unevaluable.
                TermMeta::Context(_) => return None,
            })
        };
        let relations = world
            .relations
            .iter()
            .map(|r| RelationSpec {
                name: r.name.clone(),
                source: source(&r.source),
                atoms: r
                    .atoms
                    .iter()
                    .filter_map(|terms| match terms.as_slice() {
                        [a, b] => Some([term(a)?, term(b)?]),
                        _ => None,
                    })
                    .collect(),
            })
            .collect();
        WorldSpec {
            subject_types: world.subjects.iter().map(entity).collect(),
            resource_types: world.resources.iter().map(entity).collect(),
            tool_resource_types: world.tool_resource_types.clone(),
            relations,
            calendars: world
                .calendars
                .iter()
                .map(|c| CalendarSpec { name: c.name.clone(), holidays: c.holidays })
                .collect(),
            principal_type: world.principal.as_ref().map(entity),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntitySpec {
    pub type_name: String,
    #[serde(default)]
    pub attributes: Vec<AttrSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttrSpec {
    pub name: String,
    pub source: Source,
}

/// Where a value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The gateway's data sets.
    Data,
    /// The AuthZEN `properties` of an enforcement point the operator trusts (`--trusted-pep`).
    Properties,
}

/// A relation and the atoms of it the policy asks about: for each, the tuple of the atom's two terms' values is
/// looked up (a term without a value — no resource, an argument that is not a string — leaves the atom out, so the
/// module finds it unevaluable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationSpec {
    pub name: String,
    pub source: Source,
    #[serde(default)]
    pub atoms: Vec<[Term; 2]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalendarSpec {
    pub name: String,
    /// Whether it is `closed on holidays` (then `context.holidays.NAME` is filled from the data sets).
    #[serde(default)]
    pub holidays: bool,
}

/// A term of a relation atom. In JSON: `"subject"`, `"resource"`, `"principal"`, `"args.NAME"`, `"subject.ATTR"`,
/// `"resource.ATTR"`, `"principal.ATTR"`, or `{"literal": "team:payments"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TermText", into = "TermText")]
pub enum Term {
    /// `subject.id`.
    Subject,
    /// `resource.id`.
    Resource,
    /// The principal of the request's mandate.
    Principal,
    Arg(String),
    SubjectAttr(String),
    ResourceAttr(String),
    /// `principal.ATTR`: an attribute of the request's mandate's principal.
    PrincipalAttr(String),
    Literal(String),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum TermText {
    Path(String),
    Literal { literal: String },
}

impl TryFrom<TermText> for Term {
    type Error = String;

    fn try_from(text: TermText) -> Result<Term, String> {
        let path = match text {
            TermText::Literal { literal } => return Ok(Term::Literal(literal)),
            TermText::Path(path) => path,
        };
        let named = |prefix: &str| path.strip_prefix(prefix).filter(|n| !n.is_empty()).map(str::to_string);
        match path.as_str() {
            "subject" => Ok(Term::Subject),
            "resource" => Ok(Term::Resource),
            "principal" => Ok(Term::Principal),
            _ => named("args.")
                .map(Term::Arg)
                .or_else(|| named("subject.").map(Term::SubjectAttr))
                .or_else(|| named("resource.").map(Term::ResourceAttr))
                .or_else(|| named("principal.").map(Term::PrincipalAttr))
                .ok_or_else(|| {
                    format!(
                        "`{path}` is not a term: `subject`, `resource`, `principal`, `args.NAME`, `subject.ATTR`, \
                         `resource.ATTR`, `principal.ATTR` or {{\"literal\": …}}"
                    )
                }),
        }
    }
}

impl From<Term> for TermText {
    fn from(term: Term) -> TermText {
        TermText::Path(match term {
            Term::Subject => "subject".into(),
            Term::Resource => "resource".into(),
            Term::Principal => "principal".into(),
            Term::Arg(name) => format!("args.{name}"),
            Term::SubjectAttr(name) => format!("subject.{name}"),
            Term::ResourceAttr(name) => format!("resource.{name}"),
            Term::PrincipalAttr(name) => format!("principal.{name}"),
            Term::Literal(literal) => return TermText::Literal { literal },
        })
    }
}

impl WorldSpec {
    /// Reads a spec from JSON, checking it: names not empty, no type, attribute, relation or calendar twice.
    pub fn from_json(text: &str) -> Result<WorldSpec, String> {
        let spec: WorldSpec = serde_json::from_str(text).map_err(|e| format!("not a world spec: {e}"))?;
        let mut seen = std::collections::BTreeSet::new();
        let entities = spec
            .subject_types
            .iter()
            .map(|e| ("subject", e))
            .chain(spec.resource_types.iter().map(|e| ("resource", e)));
        for (side, entity) in entities {
            if entity.type_name.is_empty() || !seen.insert(format!("{side} {}", entity.type_name)) {
                return Err(format!("{side} type `{}` is empty or declared twice", entity.type_name));
            }
            let mut names = std::collections::BTreeSet::new();
            for attribute in &entity.attributes {
                if attribute.name.is_empty() || !names.insert(&attribute.name) {
                    return Err(format!(
                        "attribute `{}` of `{}` is empty or declared twice",
                        attribute.name, entity.type_name
                    ));
                }
            }
        }
        if let Some(principal) = &spec.principal_type {
            if principal.type_name.is_empty() {
                return Err("the principal type is empty".into());
            }
            let mut names = std::collections::BTreeSet::new();
            for attribute in &principal.attributes {
                if attribute.name.is_empty() || !names.insert(&attribute.name) {
                    return Err(format!(
                        "attribute `{}` of `{}` is empty or declared twice",
                        attribute.name, principal.type_name
                    ));
                }
                if attribute.source != Source::Data {
                    return Err(format!(
                        "principal attribute `{}` comes from data: no caller knows the mandate's principal",
                        attribute.name
                    ));
                }
            }
        }
        for relation in &spec.relations {
            if relation.name.is_empty()
                || relation.name == HOLIDAY_RELATION
                || !seen.insert(format!("relation {}", relation.name))
            {
                return Err(format!("relation `{}` is empty, reserved or declared twice", relation.name));
            }
        }
        for calendar in &spec.calendars {
            if calendar.name.is_empty() || !seen.insert(format!("calendar {}", calendar.name)) {
                return Err(format!("calendar `{}` is empty or declared twice", calendar.name));
            }
        }
        Ok(spec)
    }

    /// Whether the policy reads nothing about the world (then no request is changed).
    pub fn is_empty(&self) -> bool {
        self.subject_types.is_empty()
            && self.resource_types.is_empty()
            && self.relations.is_empty()
            && self.calendars.is_empty()
            && self.principal_type.is_none()
    }

    fn subject_type(&self, request: &Map<String, Json>) -> Option<&EntitySpec> {
        let given = request.get("subject").and_then(|s| s.get("type")).and_then(Json::as_str);
        entity_of(&self.subject_types, given, None)
    }

    fn resource_type(&self, request: &Map<String, Json>) -> Option<&EntitySpec> {
        let given = request.get("resource").and_then(|r| r.get("type")).and_then(Json::as_str);
        let tool = request.get("action").and_then(|a| a.get("name")).and_then(Json::as_str);
        let declared = tool.and_then(|t| self.tool_resource_types.get(t)).map(String::as_str);
        entity_of(&self.resource_types, given, declared)
    }
}

/// The declared type a request's subject or resource is read as: the type it names, else the tool's declared
/// one, else the single declared type; `None` when it names an undeclared type or none can be chosen.
fn entity_of<'s>(types: &'s [EntitySpec], given: Option<&str>, declared: Option<&str>) -> Option<&'s EntitySpec> {
    match given.or(declared) {
        Some(name) => types.iter().find(|t| t.type_name == name),
        None => match types {
            [one] => Some(one),
            _ => None,
        },
    }
}

/// Removes from a request every world value the caller may not give (`trusted`: the caller is an enforcement
/// point the operator trusts with `properties`), recording each removed field in `ignored`. With an empty spec,
/// nothing.
pub(super) fn strip(request: &mut Map<String, Json>, spec: &WorldSpec, trusted: bool, ignored: &mut Vec<String>) {
    if spec.is_empty() {
        return;
    }
    // A tool that declares its resource type acts on resources of that type, whatever the caller calls them (as the
    // target is what the tool acts on): another type would have the resource's values looked up elsewhere.
    let tool = request.get("action").and_then(|a| a.get("name")).and_then(Json::as_str);
    if let Some(declared) = tool.and_then(|t| spec.tool_resource_types.get(t)).cloned() {
        if let Some(Json::Object(resource)) = request.get_mut("resource") {
            if resource.get("type").is_some_and(|given| given.as_str() != Some(declared.as_str())) {
                resource.insert("type".into(), Json::String(declared));
                ignored.push("resource.type".into());
            }
        }
    }
    let kinds = [("subject", spec.subject_type(request).cloned()), ("resource", spec.resource_type(request).cloned())];
    for (side, entity) in kinds {
        let Some(Json::Object(object)) = request.get_mut(side) else { continue };
        let Some(properties) = object.remove("properties") else { continue };
        let Json::Object(properties) = properties else {
            ignored.push(format!("{side}.properties"));
            continue;
        };
        let mut kept = Map::new();
        for (name, value) in properties {
            let source = entity.as_ref().and_then(|e| e.attributes.iter().find(|a| a.name == name)).map(|a| a.source);
            if trusted && source == Some(Source::Properties) {
                kept.insert(name, value);
            } else {
                ignored.push(format!("{side}.properties.{name}"));
            }
        }
        if !kept.is_empty() {
            object.insert("properties".into(), Json::Object(kept));
        }
    }
    let Some(Json::Object(context)) = request.get_mut("context") else { return };
    if context.remove("holidays").is_some() {
        ignored.push("context.holidays".into());
    }
    // Only the gateway's data says what a principal is, trusted caller or not.
    if context.remove("principals").is_some() {
        ignored.push("context.principals".into());
    }
    if let Some(relations) = context.remove("relations") {
        let mut kept = Map::new();
        if let Json::Object(relations) = relations {
            for (name, tuples) in relations {
                let source = spec.relations.iter().find(|r| r.name == name).map(|r| r.source);
                if trusted && source == Some(Source::Properties) {
                    kept.insert(name, tuples);
                } else {
                    ignored.push(format!("context.relations.{name}"));
                }
            }
        } else {
            ignored.push("context.relations".into());
        }
        if !kept.is_empty() {
            context.insert("relations".into(), Json::Object(kept));
        }
    }
}

/// Fills the `from data` values of a stripped request from the data sets, as `data` reads them (the batch's
/// transaction, or the cache: `state_cache`): the subject's and the resource's attributes (by their type and id),
/// each asked relation tuple (by the atoms' term values), and the calendars' holidays. A value the data sets do not
/// have is left out (the module then denies, naming it).
pub(super) fn fill(
    tx: &mut dyn DataReads,
    request: &mut Map<String, Json>,
    spec: &WorldSpec,
    meta: &PolicyMeta,
) -> StoreResult<()> {
    if spec.is_empty() {
        return Ok(());
    }
    let kinds = [("subject", spec.subject_type(request).cloned()), ("resource", spec.resource_type(request).cloned())];
    for (side, entity) in kinds {
        let Some(entity) = entity else { continue };
        if !entity.attributes.iter().any(|a| a.source == Source::Data) {
            continue;
        }
        let Some(Json::Object(object)) = request.get_mut(side) else { continue };
        let Some(id) = object.get("id").and_then(Json::as_str).filter(|id| !id.is_empty()) else { continue };
        let Some(stored) = tx.entity(&entity.type_name, id)? else { continue };
        let properties = object.entry("properties").or_insert_with(|| Json::Object(Map::new()));
        let Json::Object(properties) = properties else { continue };
        for attribute in entity.attributes.iter().filter(|a| a.source == Source::Data) {
            if let Some(value) = stored.get(&attribute.name) {
                properties.insert(attribute.name.clone(), value.clone());
            }
        }
    }
    // Before the relations: a relation's term may be a principal's attribute.
    let principals = principal_attributes(tx, request, spec, meta)?;
    if !principals.is_empty() {
        if let Some(Json::Object(context)) = request.get_mut("context") {
            context.insert("principals".into(), Json::Object(principals));
        }
    }
    let mut relations = Map::new();
    for relation in spec.relations.iter().filter(|r| r.source == Source::Data) {
        let mut asked: Vec<(String, String)> = Vec::new();
        for [first, second] in &relation.atoms {
            if let (Some(a), Some(b)) = (value_of(first, request, meta), value_of(second, request, meta)) {
                if !asked.contains(&(a.clone(), b.clone())) {
                    asked.push((a, b));
                }
            }
        }
        let mut tuples = Vec::with_capacity(asked.len());
        for (a, b) in asked {
            let holds = tx.holds(&relation.name, &a, &b)?;
            tuples.push(json!({"args": [a, b], "holds": holds}));
        }
        relations.insert(relation.name.clone(), Json::Array(tuples));
    }
    let mut holidays = Map::new();
    for calendar in spec.calendars.iter().filter(|c| c.holidays) {
        let dates = tx.related(HOLIDAY_RELATION, &calendar.name)?;
        holidays.insert(calendar.name.clone(), Json::Array(dates.iter().cloned().map(Json::String).collect()));
    }
    let Some(Json::Object(context)) = request.get_mut("context") else { return Ok(()) };
    if !relations.is_empty() {
        // A trusted enforcement point's `from properties` relations, kept by `strip`, stay beside them.
        match context.entry("relations").or_insert_with(|| Json::Object(Map::new())) {
            Json::Object(kept) => kept.extend(relations),
            other => *other = Json::Object(relations),
        }
    }
    if !holidays.is_empty() {
        context.insert("holidays".into(), Json::Object(holidays));
    }
    Ok(())
}

/// Where [`fill`] writes in a request: the subject's and the resource's `properties`, and `context`'s
/// `principals`, `relations` and `holidays`.
const FILLED: [(&str, &str); 5] = [
    ("subject", "properties"),
    ("resource", "properties"),
    ("context", "principals"),
    ("context", "relations"),
    ("context", "holidays"),
];

/// What a request holds where [`fill`] writes, for [`restore_parts`].
pub(super) fn filled_parts(request: &Map<String, Json>) -> [Option<Json>; 5] {
    FILLED.map(|(object, key)| request.get(object).and_then(|o| o.get(key)).cloned())
}

/// Puts back what [`filled_parts`] saw, undoing a [`fill`] made since.
pub(super) fn restore_parts(request: &mut Map<String, Json>, parts: [Option<Json>; 5]) {
    for ((object, key), part) in FILLED.into_iter().zip(parts) {
        let Some(Json::Object(object)) = request.get_mut(object) else { continue };
        match part {
            Some(value) => object.insert(key.to_string(), value),
            None => object.shift_remove(key),
        };
    }
}

/// The principals whose attributes a request may need: the principal of the mandate it names, else those of the
/// mandates whose holders admit its subject (the mandates the module may be asked to decide it under). Never any
/// other principal: the request carries only what can decide it.
fn candidate_principals(request: &Map<String, Json>, meta: &PolicyMeta) -> Vec<String> {
    let context = request.get("context");
    let mut principals: Vec<String> = match context.and_then(|c| c.get("mandate")) {
        Some(named) => {
            named.as_str().and_then(|name| meta.mandate(name)).map(|m| m.principal.clone()).into_iter().collect()
        }
        None => {
            let subject = request.get("subject").and_then(|s| s.get("id")).and_then(Json::as_str);
            subject.map(|s| meta.held_by(s).into_iter().map(|m| m.principal.clone()).collect()).unwrap_or_default()
        }
    };
    principals.retain(|p| !p.is_empty());
    principals.sort();
    principals.dedup();
    principals
}

/// `context.principals`: for each candidate principal the data sets know as an entity of the principal type, its
/// declared attributes that the data sets have (an attribute they lack is left out: the module then denies,
/// naming it).
fn principal_attributes(
    tx: &mut dyn DataReads,
    request: &Map<String, Json>,
    spec: &WorldSpec,
    meta: &PolicyMeta,
) -> StoreResult<Map<String, Json>> {
    let mut out = Map::new();
    let Some(entity) = &spec.principal_type else { return Ok(out) };
    if entity.attributes.is_empty() {
        return Ok(out);
    }
    for principal in candidate_principals(request, meta) {
        let Some(stored) = tx.entity(&entity.type_name, &principal)? else { continue };
        let attributes: Map<String, Json> = entity
            .attributes
            .iter()
            .filter(|a| a.source == Source::Data)
            .filter_map(|a| stored.get(&a.name).map(|value| (a.name.clone(), value.clone())))
            .collect();
        out.insert(principal, Json::Object(attributes));
    }
    Ok(out)
}

/// A term's value in a request: a string, or `None` (then the atom is not asked).
fn value_of(term: &Term, request: &Map<String, Json>, meta: &PolicyMeta) -> Option<String> {
    let text = |value: Option<&Json>| value.and_then(Json::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    match term {
        Term::Subject => text(request.get("subject").and_then(|s| s.get("id"))),
        Term::Resource => text(request.get("resource").and_then(|r| r.get("id"))),
        Term::Principal => {
            let mandate = request.get("context").and_then(|c| c.get("mandate")).and_then(Json::as_str)?;
            meta.mandate(mandate).map(|m| m.principal.clone())
        }
        Term::Arg(name) => text(request.get("action").and_then(|a| a.get("arguments")).and_then(|a| a.get(name))),
        Term::SubjectAttr(name) => {
            text(request.get("subject").and_then(|s| s.get("properties")).and_then(|p| p.get(name)))
        }
        Term::ResourceAttr(name) => {
            text(request.get("resource").and_then(|r| r.get("properties")).and_then(|p| p.get(name)))
        }
        Term::PrincipalAttr(name) => {
            let principal = value_of(&Term::Principal, request, meta)?;
            let principals = request.get("context").and_then(|c| c.get("principals"));
            text(principals.and_then(|p| p.get(&principal)).and_then(|p| p.get(name)))
        }
        Term::Literal(literal) => Some(literal.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> PolicyMeta {
        let mandate = |name: &str, principal: &str, holder: &str| {
            json!({"name": name, "principal": principal, "holders": [holder], "holder_prefixes": [],
                   "chain": [name], "expires_at": null})
        };
        let text = json!({"policy": "sha256:0", "approvals": [], "budgets": [], "mandates": [
            mandate("dana_desk", "user:dana", "agent:a"),
            mandate("erin_desk", "user:erin", "agent:a"),
            mandate("erin_too", "user:erin", "agent:a"),
            mandate("gina_desk", "user:gina", "agent:g"),
        ]});
        PolicyMeta::from_json(text.to_string().as_bytes()).unwrap()
    }

    fn request(value: Json) -> Map<String, Json> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_named_mandates_principal_else_those_of_the_mandates_the_subject_holds() {
        let meta = meta();
        let named = request(json!({"subject": {"id": "agent:a"}, "context": {"mandate": "erin_too"}}));
        assert_eq!(candidate_principals(&named, &meta), ["user:erin"]);
        let held = request(json!({"subject": {"id": "agent:a"}, "context": {}}));
        assert_eq!(candidate_principals(&held, &meta), ["user:dana", "user:erin"], "each once, never gina");
        let unknown = request(json!({"subject": {"id": "agent:a"}, "context": {"mandate": "nobody"}}));
        assert!(candidate_principals(&unknown, &meta).is_empty(), "a named mandate is never widened to others");
        let stranger = request(json!({"subject": {"id": "agent:z"}}));
        assert!(candidate_principals(&stranger, &meta).is_empty());
    }
}
