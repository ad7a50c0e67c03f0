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
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let granted = one(program, item).map_err(|e| format!("instance {}: {e}", n + 1))?;
        let i = &granted.instance;
        // A node's name is its id in DOT: one instance version drawn twice would be one node.
        if !seen.insert((i.id.clone(), i.version)) {
            return Err(format!("instance {}: `{}/{}@{}` is given twice", n + 1, i.template, i.id, i.version));
        }
        out.push(granted);
    }
    Ok(out)
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
        let drawn = node(program, granted, instances, &forest.nodes[parent]);
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
        parent: object.get("parent").and_then(Json::as_str).map(str::to_string),
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
/// `all`: the instances given, where an instance of a template under a template finds its parent instance.
pub fn node(program: &Program, granted: &GrantedInstance, all: &[GrantedInstance], template_node: &Node) -> Node {
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
    let grants: Vec<GrantInstance> = all.iter().map(|g| g.instance.clone()).collect();
    let outside = check(program, template, instance, &grants).err().map(|refusal| refusal.to_string());
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POLICY: &str = r#"
tool pay(merchant: string, amount: money) {
  side effects
}

mandate ceiling for "org:acme" {
  holder under "agent:"
  allow pay where args.amount <= 500 USD
}

template shopping(cap: money where cap <= 500 USD, until: timestamp) under ceiling {
  holder under "agent:"
  valid from 2026-01-01T00:00:00Z until until
  allow pay where args.amount <= cap
}
"#;

    fn program() -> Program {
        let mut sources = crate::stdlib::sources();
        sources.add("p.remit", POLICY);
        let checked = crate::check::check_with(sources, crate::check::Options { narrowing: false });
        checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics))
    }

    fn item(cap: &str) -> Json {
        json!({"id": "g-1", "version": 2, "template": "shopping", "principal": "user:a", "holder": "agent:a",
               "params": {"cap": cap, "until": "2026-12-31T00:00:00Z"}, "granted_at": 1796398200,
               "granted_by": "ops:b"})
    }

    #[test]
    fn the_three_shapes_give_the_same_instances_and_bad_files_are_refused_naming_the_item() {
        let program = program();
        let listed = parse(&program, json!({"grants": [item("10 USD")]}).to_string().as_bytes()).unwrap();
        let bare = parse(&program, json!([item("10 USD")]).to_string().as_bytes()).unwrap();
        let request = parse(&program, json!({"context": {"grants": [item("10 USD")]}}).to_string().as_bytes()).unwrap();
        for given in [&listed, &bare, &request] {
            assert_eq!(given.len(), 1);
            assert_eq!(given[0].instance.granted, "2026-12-04T15:30:00Z");
            assert_eq!(given[0].granted_by.as_deref(), Some("ops:b"));
        }
        for (text, error) in [
            ("{", "not JSON"),
            ("{\"a\": 1}", "expected a list"),
            ("[1]", "instance 1: not an object"),
            (r#"[{"id": "g", "version": 1, "template": "nope"}]"#, "instance 1: no `granted`"),
        ] {
            let refused = parse(&program, text.as_bytes()).unwrap_err();
            assert!(refused.contains(error), "{text}: {refused}");
        }
        let mut unknown = item("10 USD");
        unknown["template"] = json!("nope");
        assert!(parse(&program, json!([unknown]).to_string().as_bytes()).unwrap_err().contains("`nope`"));
        let twice = parse(&program, json!([item("10 USD"), item("20 USD")]).to_string().as_bytes()).unwrap_err();
        assert!(twice.contains("instance 2: `shopping/g-1@2` is given twice"), "{twice}");
        let mut no_version = item("10 USD");
        no_version["version"] = json!("2");
        assert!(parse(&program, json!([no_version]).to_string().as_bytes()).unwrap_err().contains("`version`"));
    }

    #[test]
    fn a_node_names_the_instance_fills_its_window_and_says_why_the_check_refuses_it() {
        let program = program();
        let mut wide = item("600 USD");
        wide["id"] = json!("g-2");
        let granted = parse(&program, json!([item("10 USD"), wide]).to_string().as_bytes()).unwrap();
        let forest = forest(&program, &["ceiling".to_string()], &granted);
        let template = forest.index("shopping").unwrap();
        assert_eq!(forest.nodes[template].children.len(), 2);
        let within = &forest.nodes[forest.nodes[template].children[0]];
        assert_eq!(within.name, "shopping/g-1@2");
        assert_eq!(within.window.as_deref(), Some("2026-01-01T00:00:00Z → 2026-12-31T00:00:00Z"));
        let facts = within.facts();
        assert!(facts.contains(&"parameter cap = 10 USD".to_string()), "{facts:?}");
        assert!(facts.contains(&"granted by ops:b at 2026-12-04T15:30:00Z".to_string()), "{facts:?}");
        // A stop on the ceiling reaches the instances, as it reaches the template.
        assert!(facts.iter().any(|f| f == "STOPPED via ceiling: side-effecting calls refused"), "{facts:?}");
        let outside = forest.nodes[template]
            .children
            .iter()
            .map(|&c| &forest.nodes[c])
            .find(|n| n.instance.as_ref().is_some_and(|i| i.outside.is_some()));
        let outside = outside.expect("the 600 USD instance is outside its template");
        assert_eq!(outside.class(), "invalid");
        assert!(outside.facts().iter().any(|f| f.contains("bound-failed") && f.contains("600 USD")));
    }
}
