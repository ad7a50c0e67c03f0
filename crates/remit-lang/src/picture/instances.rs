//! Instances of templates drawn under their templates (`remit graph --instances FILE`): the instances as
//! `GET /v1/grants` lists them (`{"grants": [...]}`, with `granted_at`, `granted_by`, `revoked_at`) or as a request's
//! `context.grants` carries them (a list, or a request with `context.grants`; with `granted`). Each becomes a node
//! under its template, named as decisions name it (`TEMPLATE/ID@VERSION`), with its parameters, principal, holder,
//! window and grantor; one the interpreter's check refuses (the check every decision runs on an instance, without
//! the time of day) says why. It decides nothing.

use serde_json::{Map, Value as Json};

use super::model::{Forest, InstanceFacts, Node, Stop};
use crate::eval::grants::{check, GrantInstance};
use crate::ir::{Program, TimeBound};
use crate::value::{format_timestamp, parse_timestamp};

/// The instances of `text` (JSON): a list, `{"grants": [...]}` or a request with `context.grants`. An item needs
/// `id`, `version`, `template` (one of `program`'s), `principal`, `holder`, `params` and `granted` (RFC 3339) or
/// `granted_at` (Unix seconds); `granted_by` and `revoked_at` are shown when given.
pub fn parse(program: &Program, text: &[u8]) -> Result<Vec<GrantedInstance>, String> {
    let json: Json = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let items = match &json {
        Json::Array(items) => items,
        Json::Object(o) => match (o.get("grants"), o.get("context").and_then(|c| c.get("grants"))) {
            (Some(Json::Array(items)), _) | (None, Some(Json::Array(items))) => items,
            _ => {
                return Err("expected a list of instances, `{\"grants\": [...]}` or a request's `context.grants`".into())
            }
        },
        _ => return Err("expected a list of instances, `{\"grants\": [...]}` or a request's `context.grants`".into()),
    };
    items
        .iter()
        .enumerate()
        .map(|(n, item)| one(program, item).map_err(|e| format!("instance {}: {e}", n + 1)))
        .collect()
}

/// The forest of `program` ([`Forest::of`]) with `instances` (of [`parse`]) drawn under their templates.
pub fn forest(program: &Program, stops: &[String], instances: &[GrantedInstance]) -> Forest {
    let mut forest = Forest::of(program, stops);
    for granted in instances {
        let parent = forest
            .nodes
            .iter()
            .position(|n| n.template.is_some() && n.name == granted.instance.template)
            .expect("`parse` keeps instances of the policy's templates only");
        let drawn = node(program, granted, &forest.nodes[parent]);
        forest.nodes.push(drawn);
        let id = forest.nodes.len() - 1;
        forest.nodes[parent].children.push(id);
    }
    forest.sort();
    forest
}

/// One instance as given, with what the picture needs.
#[derive(Debug, Clone)]
pub struct GrantedInstance {
    pub instance: GrantInstance,
    pub granted_by: Option<String>,
    /// RFC 3339.
    pub revoked_at: Option<String>,
}

fn one(program: &Program, item: &Json) -> Result<GrantedInstance, String> {
    let object = item.as_object().ok_or("not an object")?;
    let text = |key: &str| -> Result<String, String> {
        object.get(key).and_then(Json::as_str).map(str::to_string).ok_or_else(|| format!("no string `{key}`"))
    };
    let instant = |key: &str| -> Result<Option<String>, String> {
        match object.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::Number(n)) => {
                n.as_i64().map(|s| Some(format_timestamp(s))).ok_or(format!("`{key}` is not Unix seconds"))
            }
            Some(Json::String(s)) if parse_timestamp(s).is_some() => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` is neither Unix seconds nor an RFC 3339 timestamp")),
        }
    };
    let granted = match (instant("granted")?, instant("granted_at")?) {
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => return Err("no `granted` (RFC 3339) or `granted_at` (Unix seconds)".into()),
    };
    let template = text("template")?;
    if !program.templates.iter().any(|t| t.name == template) {
        return Err(format!("the template `{template}` is not one of this policy's"));
    }
    let instance = GrantInstance {
        id: text("id")?,
        version: object.get("version").and_then(Json::as_u64).ok_or("no whole number `version`")?,
        template,
        principal: text("principal")?,
        holder: text("holder")?,
        params: object.get("params").and_then(Json::as_object).cloned().ok_or("no object `params`")?,
        granted,
    };
    let granted_by = object.get("granted_by").and_then(Json::as_str).map(str::to_string);
    Ok(GrantedInstance { instance, granted_by, revoked_at: instant("revoked_at")? })
}

/// The value of a parameter as a line shows it: a string as itself, anything else as JSON.
fn shown(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The node of `granted`, under its template's node `template_node` (whose stop it shares).
pub fn node(program: &Program, granted: &GrantedInstance, template_node: &Node) -> Node {
    let instance = &granted.instance;
    let template = program.templates.iter().find(|t| t.name == instance.template).expect("checked by `parse`");
    let params: &Map<String, Json> = &instance.params;
    let bound = |b: &Option<TimeBound>| {
        b.as_ref().map(|b| match b {
            TimeBound::At(t) => format_timestamp(*t),
            TimeBound::Param(name) => params.get(name).map(shown).unwrap_or_else(|| format!("{name} (missing)")),
        })
    };
    let window = match (bound(&template.valid_from), bound(&template.valid_until)) {
        (None, None) => None,
        (from, until) => {
            Some(format!("{} → {}", from.unwrap_or_else(|| "…".into()), until.unwrap_or_else(|| "…".into())))
        }
    };
    let outside = check(program, template, instance).err().map(|refusal| refusal.to_string());
    Node {
        name: format!("{}/{}@{}", instance.template, instance.id, instance.version),
        template: None,
        instance: Some(InstanceFacts {
            template: instance.template.clone(),
            version: instance.version,
            params: template
                .params
                .iter()
                .filter_map(|p| params.get(&p.name).map(|v| format!("{} = {}", p.name, shown(v))))
                .chain(
                    params
                        .iter()
                        .filter(|(name, _)| !template.params.iter().any(|p| &p.name == *name))
                        .map(|(name, v)| format!("{name} = {} (not a parameter of the template)", shown(v))),
                )
                .collect(),
            granted: match &granted.granted_by {
                Some(by) => format!("granted by {by} at {}", instance.granted),
                None => format!("granted at {}", instance.granted),
            },
            revoked_at: granted.revoked_at.clone(),
            outside,
        }),
        principal: instance.principal.clone(),
        holders: vec![instance.holder.clone()],
        purpose: None,
        window,
        max_level: template_node.max_level.clone(),
        otherwise: template_node.otherwise,
        delegation_depth: None,
        sections: Vec::new(),
        children: Vec::new(),
        stop: match &template_node.stop {
            Stop::None => Stop::None,
            Stop::Here => Stop::Inherited(template_node.name.clone()),
            inherited => inherited.clone(),
        },
        change: None,
    }
}
