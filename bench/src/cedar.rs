//! Cedar versions of the benchmark policies, and the adapter from a remit request (JSON bytes) to a Cedar request.

use std::str::FromStr;

use cedar_policy::{Authorizer, Context, Decision, Entities, EntityId, EntityTypeName, EntityUid, PolicySet, Request};
use serde_json::{json, Map, Value};

pub struct Setup {
    authorizer: Authorizer,
    policies: PolicySet,
    entities: Entities,
    agent: EntityTypeName,
    action: EntityTypeName,
    resource: EntityTypeName,
}

impl Setup {
    /// `bench/policies/NAME.cedar` and `NAME.entities.json`.
    pub fn load(name: &str) -> Setup {
        let dir = super::root().join("bench/policies");
        let policies = std::fs::read_to_string(dir.join(format!("{name}.cedar"))).unwrap();
        let entities = std::fs::read_to_string(dir.join(format!("{name}.entities.json"))).unwrap();
        Setup::new(&policies, &entities)
    }

    pub fn new(policies: &str, entities: &str) -> Setup {
        Setup {
            authorizer: Authorizer::new(),
            policies: PolicySet::from_str(policies).unwrap_or_else(|e| panic!("{e:?}")),
            entities: Entities::from_json_str(entities, None).unwrap_or_else(|e| panic!("{e:?}")),
            agent: EntityTypeName::from_str("Agent").unwrap(),
            action: EntityTypeName::from_str("Action").unwrap(),
            resource: EntityTypeName::from_str("Resource").unwrap(),
        }
    }

    pub fn allows(&self, request: &Request) -> bool {
        self.authorizer.is_authorized(request, &self.policies, &self.entities).decision() == Decision::Allow
    }

    /// The Cedar request for a remit request: principal `Agent::subject.id`, action `Action::action.name`, resource
    /// `Resource::resource.id`; the context carries the mandate, `now` as a datetime, the credential's scopes, the
    /// arguments (a money argument `amount` also as `amount` decimal + `currency`), the operation id, counters,
    /// facts, the resource id, and the kinds of the unconsumed approvals presented (`approved`).
    pub fn request(&self, bytes: &[u8]) -> Request {
        let value: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).unwrap_or("");
        let uid = |ty: &EntityTypeName, id: &str| EntityUid::from_type_name_and_id(ty.clone(), EntityId::new(id));
        let mut context = Map::new();
        context.insert("mandate".into(), json!(text("/context/mandate")));
        context.insert("now".into(), json!({"__extn": {"fn": "datetime", "arg": text("/context/now")}}));
        let scopes = value.pointer("/subject/credential/scopes").cloned().unwrap_or(json!([]));
        context.insert("scopes".into(), scopes);
        let args = value.pointer("/action/arguments").cloned().unwrap_or(json!({}));
        if let Some((amount, currency)) = args.get("amount").and_then(Value::as_str).and_then(|a| a.split_once(' ')) {
            context.insert("amount".into(), json!({"__extn": {"fn": "decimal", "arg": amount}}));
            context.insert("currency".into(), json!(currency));
        }
        context.insert("args".into(), args);
        if let Some(id) = value.pointer("/context/operation_id") {
            context.insert("operation_id".into(), id.clone());
        }
        for key in ["counters", "facts"] {
            context.insert(key.into(), value.pointer(&format!("/context/{key}")).cloned().unwrap_or(json!({})));
        }
        context.insert("resource_id".into(), json!(text("/resource/id")));
        let approved: Vec<Value> = value
            .pointer("/context/approvals")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter(|a| a.get("consumed") != Some(&json!(true)))
                    .filter_map(|a| a.get("kind").cloned())
                    .collect()
            })
            .unwrap_or_default();
        context.insert("approved".into(), Value::Array(approved));
        let context = Context::from_json_value(Value::Object(context), None).unwrap_or_else(|e| panic!("{e:?}"));
        Request::new(
            uid(&self.agent, text("/subject/id")),
            uid(&self.action, text("/action/name")),
            uid(&self.resource, text("/resource/id")),
            context,
            None,
        )
        .unwrap()
    }
}
