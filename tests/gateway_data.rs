//! The gateway's data sets (issue 30, item 4): where attribute and relation values come from, and who is trusted.
//! Single changes and bulk loads (JSON, CSV) through the admin API and `remit admin data`, each versioned and a
//! `data` entry of the hash-chained log (`remit audit verify` over them); data files inside a signed bundle,
//! installed with it and replaced by the next; the values filled into requests from a world spec — the caller's
//! forged `from data` values replaced, untrusted `properties` stripped, a trusted enforcement point's kept —; and a
//! lookup's cost with 1,000,000 tuples against 10.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use remit_gateway::bundle::{self, Bundle};
use remit_gateway::client::blocking::request;
use remit_gateway::core::{FixedClock, WorldSpec};
use remit_gateway::http::Tokens;
use remit_gateway::store::{LogEntry, ORIGIN_ADMIN};
use remit_gateway::{Config, Durability, Gateway, Policy, SqliteStore, Store};
use remit_lang::value::parse_timestamp;
use serde_json::{json, Value};
use support::examples;
use support::gateway::{HttpGateway, Options, NOW};
use support::served::Served;

const ADMIN: &str = "ops-admin-token";
const BACKEND: &str = "backend-pep-token";
const OTHER: &str = "other-pep-token";

/// Todo-like: anyone holding the mandate may call the tools; what the policy would read of the world is in the
/// world spec below (the module ignores the fields it does not read, so the decisions stay allows while the
/// requests as decided show what the gateway filled).
const TODOS: &str = r#"
tool update_todo(todo: string, board: string) {
  target args.todo
}
tool read_todo(todo: string, board: string) {
  effects read_only
}
mandate todos for "user:alice" {
  holder "agent:assistant"
  allow update_todo
  allow read_todo
}
"#;

const WORLD: &str = r#"{
  "subject_types": [{"type_name": "agent", "attributes": [
    {"name": "team", "source": "data"}, {"name": "device", "source": "properties"}]}],
  "resource_types": [
    {"type_name": "todo", "attributes": [{"name": "owner", "source": "data"}, {"name": "title", "source": "properties"}]},
    {"type_name": "board", "attributes": [{"name": "owner", "source": "data"}]}],
  "tool_resource_types": {"update_todo": "todo"},
  "relations": [
    {"name": "member_of", "source": "data", "atoms": [["subject", {"literal": "team:payments"}], ["principal", "subject.team"]]},
    {"name": "owns", "source": "data", "atoms": [["principal", "resource"], ["subject", "args.board"]]},
    {"name": "delegates", "source": "properties", "atoms": [["principal", "subject"]]}],
  "calendars": [{"name": "office", "holidays": true}, {"name": "always", "holidays": false}]
}"#;

fn policy_of(source: &str) -> Policy {
    support::gateway::policy(&examples::compile(&[("todos.remit".into(), source.into())]))
}

fn setup(name: &str, world: &str) -> HttpGateway {
    setup_with(name, TODOS, Some(world))
}

/// A gateway on the policy `source` over a fresh store, served on a free loopback port with an admin token and two
/// PEP tokens (`backend` trusted with properties, `other` not), until dropped; with the world spec `world` or,
/// without one, what the policy's metadata says it reads (as `remit serve` does).
fn setup_with(name: &str, source: &str, world: Option<&str>) -> HttpGateway {
    let mut tokens = Tokens::default();
    tokens.admin.insert(ADMIN.into(), "ops".into());
    tokens.pep.insert(BACKEND.into(), "backend".into());
    tokens.pep.insert(OTHER.into(), "other".into());
    tokens.trusted_pep.insert("backend".into());
    let options = Options { tokens, ..Options::default() };
    let served = HttpGateway::start(&format!("gateway-data-{name}"), policy_of(source), options);
    // Before any request: every decision reads this spec.
    if let Some(world) = world {
        served.gateway.set_world(WorldSpec::from_json(world).unwrap());
    }
    served
}

impl HttpGateway {
    fn admin(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let response = self.call(method, path, Some(ADMIN), body.map(str::as_bytes));
        (response.status, response.json())
    }

    fn log(&self) -> Vec<LogEntry> {
        self.store.begin().unwrap().log_entries(1, 1 << 30).unwrap()
    }

    /// The body of the last log entry of `kind`.
    fn last(&self, kind: &str) -> Value {
        let entry = self.log().into_iter().rev().find(|e| e.kind == kind).expect(kind);
        serde_json::from_str(&entry.body).unwrap()
    }

    fn data_version(&self) -> u64 {
        self.admin("GET", "/admin/v1/state", None).1["data"]["version"].as_u64().unwrap()
    }
}

#[test]
fn single_changes_are_versioned_logged_and_read_back_by_key() {
    let s = setup("single", WORLD);
    assert_eq!(s.data_version(), 0);
    let (status, answer) =
        s.admin("PUT", "/admin/v1/data/entities/todo/t%2F1", Some(r#"{"attributes": {"owner": "user:alice"}}"#));
    assert_eq!((status, answer), (200, json!({"data_version": 1})));
    let (status, entity) = s.admin("GET", "/admin/v1/data/entities/todo/t%2F1", None);
    assert_eq!((status, entity), (200, json!({"type": "todo", "id": "t/1", "attributes": {"owner": "user:alice"}})));
    assert_eq!(s.admin("PUT", "/admin/v1/data/relations/member_of/agent:assistant/team:payments", None).0, 200);
    assert_eq!(s.admin("PUT", "/admin/v1/data/relations/member_of/agent:assistant/team:web", None).0, 200);
    assert_eq!(s.admin("PUT", "/admin/v1/data/holidays/office/2026-12-25", None).0, 200);
    let (_, related) = s.admin("GET", "/admin/v1/data/relations/member_of/agent:assistant", None);
    assert_eq!(related["b"], json!(["team:payments", "team:web"]));
    let (_, holds) = s.admin("GET", "/admin/v1/data/relations/member_of/agent:assistant/team:web", None);
    assert_eq!(holds["holds"], json!(true));
    assert_eq!(s.admin("DELETE", "/admin/v1/data/relations/member_of/agent:assistant/team:web", None).0, 200);
    let (_, holds) = s.admin("GET", "/admin/v1/data/relations/member_of/agent:assistant/team:web", None);
    assert_eq!(holds["holds"], json!(false));
    let (_, holidays) = s.admin("GET", "/admin/v1/data/holidays/office", None);
    assert_eq!(holidays["holidays"], json!(["2026-12-25"]));
    assert_eq!(s.data_version(), 5);
    // Refused, changing nothing: what is not there, a bad date, the reserved relation, another token.
    assert_eq!(s.admin("DELETE", "/admin/v1/data/relations/member_of/agent:assistant/team:web", None).0, 404);
    assert_eq!(s.admin("DELETE", "/admin/v1/data/entities/todo/t9", None).0, 404);
    assert_eq!(s.admin("GET", "/admin/v1/data/entities/todo/t9", None).0, 404);
    assert_eq!(s.admin("PUT", "/admin/v1/data/holidays/office/2026-02-30", None).0, 422);
    assert_eq!(s.admin("PUT", "/admin/v1/data/relations/holiday/office/2026-12-24", None).0, 422);
    assert_eq!(s.admin("PUT", "/admin/v1/data/entities/todo/t2", Some(r#"{"owner": "x"}"#)).0, 400);
    assert_eq!(s.call("PUT", "/admin/v1/data/relations/r/a/b", Some(BACKEND), None).status, 403);
    assert_eq!(s.call("GET", "/admin/v1/data/entities/todo/t%2F1", Some(""), None).status, 401);
    assert_eq!(s.data_version(), 5);
    // Each change is a `data` entry with its version and who made it.
    let entries: Vec<Value> =
        s.log().iter().filter(|e| e.kind == "data").map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    let ops: Vec<(&str, u64)> =
        entries.iter().map(|e| (e["op"].as_str().unwrap(), e["version"].as_u64().unwrap())).collect();
    assert_eq!(ops, [("put-entity", 1), ("add-tuple", 2), ("add-tuple", 3), ("add-holiday", 4), ("remove-tuple", 5)]);
    assert_eq!(entries[4]["args"], json!(["agent:assistant", "team:web"]));
    assert_eq!(entries[4]["by"], json!("ops"));
}

#[test]
fn bulk_loads_are_atomic_and_name_the_bad_line() {
    let s = setup("bulk", WORLD);
    let json_file = r#"[
  {"type": "todo", "id": "t1", "attributes": {"owner": "user:alice"}},
  {"relation": "owns", "args": ["user:alice", "t1"]},
  {"calendar": "office", "holiday": "2026-12-25"}
]"#;
    let (status, answer) = s.admin("POST", "/admin/v1/data/load?format=json", Some(json_file));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["entities"].clone(), answer["tuples"].clone(), answer["holidays"].clone()),
        (json!(1), json!(1), json!(1))
    );
    let csv = "# more todos\nentity,todo,t2,owner,user:bob\nentity,todo,t2,tags:json,\"[\"\"a\"\"]\"\n\
               relation,owns,user:bob,t2\nholiday,office,2026-12-26\n";
    let (status, answer) = s.admin("POST", "/admin/v1/data/load?format=csv", Some(csv));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["version"], json!(2));
    assert!(answer["digest"].as_str().unwrap().starts_with("sha256:"));
    let (_, t2) = s.admin("GET", "/admin/v1/data/entities/todo/t2", None);
    assert_eq!(t2["attributes"], json!({"owner": "user:bob", "tags": ["a"]}));
    // A bad row refuses the whole load, naming its line; nothing of it is kept, and the version stays.
    let bad = "relation,owns,user:carol,t3\nentity,todo,t3,owner,user:carol\nrelation,owns,user:carol\n";
    let (status, answer) = s.admin("POST", "/admin/v1/data/load?format=csv", Some(bad));
    assert_eq!(status, 422);
    assert!(answer["error"]["message"].as_str().unwrap().starts_with("line 3: 3 fields"), "{answer}");
    let bad_json = "[\n{\"relation\": \"owns\", \"args\": [\"user:carol\", \"t3\"]},\n{\"type\": \"todo\"}\n]";
    let (status, answer) = s.admin("POST", "/admin/v1/data/load", Some(bad_json));
    assert_eq!(status, 422);
    assert!(answer["error"]["message"].as_str().unwrap().starts_with("line 3: `id` is missing"), "{answer}");
    assert_eq!(s.admin("GET", "/admin/v1/data/relations/owns/user:carol/t3", None).1["holds"], json!(false));
    assert_eq!(s.admin("GET", "/admin/v1/data/entities/todo/t3", None).0, 404);
    assert_eq!(s.data_version(), 2);
    assert_eq!(s.admin("POST", "/admin/v1/data/load?format=xml", Some("")).0, 400);
    // Replacing: the admin's data becomes the file's.
    let (status, answer) =
        s.admin("POST", "/admin/v1/data/load?format=csv&replace=true", Some("relation,owns,user:dan,t4\n"));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["removed"], json!(6));
    assert_eq!(s.admin("GET", "/admin/v1/data/entities/todo/t1", None).0, 404);
    assert_eq!(s.admin("GET", "/admin/v1/data/holidays/office", None).1["holidays"], json!([]));
    assert_eq!(s.admin("GET", "/admin/v1/data/relations/owns/user:dan/t4", None).1["holds"], json!(true));
    // One entry per load, with the digest and counts, never one per row.
    let loads: Vec<Value> =
        s.log().iter().filter(|e| e.kind == "data").map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    assert_eq!(loads.len(), 3);
    assert_eq!(loads[1]["format"], json!("csv"));
    assert_eq!((loads[1]["entities"].clone(), loads[1]["tuples"].clone()), (json!(1), json!(1)));
    assert_eq!(loads[2]["replace"], json!(true));
}

/// The subject, action and context of a Todo call, with every world value an agent might forge.
fn forged_call(tool: &str) -> Value {
    json!({
        "subject": {"type": "agent", "id": "agent:assistant",
                    "properties": {"team": "team:root", "device": "laptop-7", "clearance": "top"}},
        "action": {"name": tool, "properties": {"todo": "t1", "board": "b1"}},
        "resource": {"type": "todo", "id": "t1", "properties": {"owner": "agent:assistant", "title": "Pay rent"}},
        "context": {"relations": {"member_of": [{"args": ["agent:assistant", "team:payments"], "holds": true}],
                                  "delegates": [{"args": ["user:alice", "agent:assistant"], "holds": true}]},
                    "holidays": {"office": ["2026-12-03"]}}
    })
}

#[test]
fn filling_replaces_forged_values_and_keeps_properties_only_from_a_trusted_pep() {
    let s = setup("fill", WORLD);
    let data = "entity,todo,t1,owner,user:alice\nentity,agent,agent:assistant,team,team:web\n\
                relation,member_of,agent:assistant,team:web\nrelation,member_of,user:alice,team:web\n\
                relation,owns,user:alice,t1\nholiday,office,2026-12-25\n";
    assert_eq!(s.admin("POST", "/admin/v1/data/load?format=csv", Some(data)).0, 200);
    let filled_relations = json!({
        "member_of": [{"args": ["agent:assistant", "team:payments"], "holds": false},
                      {"args": ["user:alice", "team:web"], "holds": true}],
        "owns": [{"args": ["user:alice", "t1"], "holds": true}, {"args": ["agent:assistant", "b1"], "holds": false}]
    });
    for (token, trusted) in [(OTHER, false), (BACKEND, true)] {
        let body = forged_call("update_todo").to_string();
        let response = s.call("POST", "/access/v1/evaluation", Some(token), Some(body.as_bytes()));
        assert_eq!(response.status, 200);
        assert_eq!(response.json()["decision"], json!(true), "the module reads none of it: still allowed");
        let entry = s.last("decision");
        let request = &entry["request"];
        let (device, title, delegates) = match trusted {
            true => (
                json!("laptop-7"),
                json!("Pay rent"),
                json!([{"args": ["user:alice", "agent:assistant"], "holds": true}]),
            ),
            false => (Value::Null, Value::Null, Value::Null),
        };
        // The subject's team and the todo's owner come from the data sets, whatever the caller said.
        assert_eq!(request["subject"]["properties"]["team"], json!("team:web"), "{token}");
        assert_eq!(request["subject"]["properties"]["device"], device, "{token}");
        assert_eq!(request["subject"]["properties"].get("clearance"), None, "not read by the policy");
        assert_eq!(request["resource"]["properties"]["owner"], json!("user:alice"), "{token}");
        assert_eq!(request["resource"]["properties"]["title"], title, "{token}");
        let mut relations = filled_relations.clone();
        if trusted {
            relations["delegates"] = delegates.clone();
        }
        assert_eq!(request["context"]["relations"], relations, "{token}");
        assert_eq!(request["context"]["holidays"], json!({"office": ["2026-12-25"]}), "{token}");
        let ignored: Vec<&str> = entry["ignored"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let mut expected = vec![
            "subject.properties.team",
            "subject.properties.clearance",
            "resource.properties.owner",
            "context.holidays",
            "context.relations.member_of",
        ];
        if !trusted {
            expected.extend(["subject.properties.device", "resource.properties.title", "context.relations.delegates"]);
        }
        let (mut ignored, mut expected) = (ignored, expected);
        ignored.sort();
        expected.sort();
        assert_eq!(ignored, expected, "{token}");
    }
    // The resource type of a call that names none is the tool's; an undeclared type is filled with nothing.
    let mut call = forged_call("update_todo");
    call["resource"] = json!({"id": "t1"});
    let request = serde_json::to_vec(&remit_gateway::http::remit_request_keeping(call.as_object().unwrap(), true));
    s.gateway.decide(&request.unwrap());
    assert_eq!(s.last("decision")["request"]["resource"]["properties"], json!({"owner": "user:alice"}));
    // A tool that declares its resource type looks the resource up as that type, whatever the caller says.
    let mut call = forged_call("update_todo");
    call["resource"]["type"] = json!("board");
    let request = serde_json::to_vec(&remit_gateway::http::remit_request_keeping(call.as_object().unwrap(), true));
    s.gateway.decide(&request.unwrap());
    let decided = s.last("decision");
    assert_eq!(decided["request"]["resource"]["type"], json!("todo"));
    assert_eq!(decided["request"]["resource"]["properties"], json!({"owner": "user:alice"}));
    assert!(decided["ignored"].as_array().unwrap().contains(&json!("resource.type")));
    let mut call = forged_call("read_todo");
    call["resource"] = json!({"type": "sticker", "id": "t1", "properties": {"owner": "agent:assistant"}});
    let request = serde_json::to_vec(&remit_gateway::http::remit_request_keeping(call.as_object().unwrap(), true));
    s.gateway.decide_as(&request.unwrap(), true);
    let decided = s.last("decision");
    assert_eq!(decided["request"]["resource"].get("properties"), None);
    assert!(decided["ignored"].as_array().unwrap().contains(&json!("resource.properties.owner")));
    // A change of the data applies to the next decision, also to one that decides without committing (the MCP
    // proxy's, which otherwise reads the state through a cache).
    let native = json!({"subject": {"type": "agent", "id": "agent:assistant"},
                        "action": {"name": "read_todo", "arguments": {"todo": "t1", "board": "b1"}},
                        "resource": {"type": "todo", "id": "t1"}})
    .to_string();
    let owner_seen = || {
        s.gateway.flush_entries().unwrap();
        s.last("decision")["request"]["resource"]["properties"]["owner"].clone()
    };
    assert!(s.gateway.decide_deferring(native.as_bytes()).allowed());
    assert_eq!(owner_seen(), json!("user:alice"));
    assert_eq!(
        s.admin("PUT", "/admin/v1/data/entities/todo/t1", Some(r#"{"attributes": {"owner": "user:bob"}}"#)).0,
        200
    );
    assert!(s.gateway.decide_deferring(native.as_bytes()).allowed());
    assert_eq!(owner_seen(), json!("user:bob"));
    let body = forged_call("update_todo").to_string();
    s.call("POST", "/access/v1/evaluation", Some(OTHER), Some(body.as_bytes()));
    assert_eq!(s.last("decision")["request"]["resource"]["properties"]["owner"], json!("user:bob"));
}

/// Todos and boards share ids; `update_todo` declares the type it acts on, `rename_board` does not.
const TYPED_TODOS: &str = r#"
resource todo {
  owner: string
}
resource board {
  owner: string
}
tool update_todo(todo: string) {
  target args.todo
  resource todo
}
tool rename_board(board: string) {
  target args.board
}
mandate todos for "user:alice" {
  holder "agent:assistant"
  allow update_todo where resource.owner == principal
  allow rename_board where resource.owner == principal
}
"#;

/// A tool's `resource TYPE`, from the policy's metadata alone (no world spec given): the gateway looks the call's
/// resource up as that type; a caller's other `resource.type` is replaced and recorded in `ignored`. A tool that
/// declares none is looked up as the caller says.
#[test]
fn a_tools_declared_resource_type_replaces_the_callers() {
    let s = setup_with("tool-type", TYPED_TODOS, None);
    assert_eq!(s.gateway.world().tool_resource_types.get("update_todo").map(String::as_str), Some("todo"));
    let data = "entity,todo,t1,owner,user:alice\nentity,board,t1,owner,user:bob\n";
    assert_eq!(s.admin("POST", "/admin/v1/data/load?format=csv", Some(data)).0, 200);
    // An AuthZEN call (whose resource has a type), or a native one (which may name none) for `resource: {"id": …}`.
    // The target argument is the resource's id (`target args.…`): the caller's `resource.id` is the same.
    let evaluate = |tool: &str, resource: Value| {
        let argument = if tool == "update_todo" { "todo" } else { "board" };
        let subject = json!({"type": "agent", "id": "agent:assistant"});
        let allowed = if resource.get("type").is_some() {
            let body = json!({"subject": subject, "action": {"name": tool, "properties": {argument: "t1"}},
                              "resource": resource});
            let response = s.call("POST", "/access/v1/evaluation", Some(OTHER), Some(body.to_string().as_bytes()));
            assert_eq!(response.status, 200, "{body}");
            response.json()["decision"].as_bool().unwrap()
        } else {
            let native = json!({"subject": subject, "action": {"name": tool, "arguments": {argument: "t1"}},
                                "resource": resource});
            s.gateway.decide(native.to_string().as_bytes()).allowed()
        };
        let entry = s.last("decision");
        let ignored: Vec<String> =
            entry["ignored"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        (json!(allowed), entry["request"]["resource"].clone(), ignored)
    };
    // Called a board, the todo is still looked up as a todo (alice's, not bob's board of the same id).
    let (decision, resource, ignored) = evaluate("update_todo", json!({"type": "board", "id": "t1"}));
    assert_eq!(decision, json!(true), "{resource}");
    assert_eq!(resource, json!({"type": "todo", "id": "t1", "properties": {"owner": "user:alice"}}));
    assert_eq!(ignored, ["resource.type"]);
    // Its own type, or none: nothing to replace.
    for given in [json!({"type": "todo", "id": "t1"}), json!({"id": "t1"})] {
        let (decision, resource, ignored) = evaluate("update_todo", given.clone());
        assert_eq!((decision, ignored), (json!(true), Vec::<String>::new()), "{given}");
        assert_eq!(resource["properties"], json!({"owner": "user:alice"}), "{given}");
    }
    // A tool without a declared type: the caller's type is the lookup's (so a forged type changes what is read),
    // and without one, of two declared types, nothing is filled and the condition fails closed.
    let (decision, resource, ignored) = evaluate("rename_board", json!({"type": "board", "id": "t1"}));
    assert_eq!((decision, resource["properties"].clone()), (json!(false), json!({"owner": "user:bob"})));
    assert!(ignored.is_empty(), "{ignored:?}");
    let (decision, resource, _) = evaluate("rename_board", json!({"type": "todo", "id": "t1"}));
    assert_eq!((decision, resource["properties"].clone()), (json!(true), json!({"owner": "user:alice"})));
    let (decision, resource, _) = evaluate("rename_board", json!({"id": "t1"}));
    assert_eq!((decision, resource.get("properties")), (json!(false), None));
}

/// Customers' desks: each mandate's principal is a customer whose accounts (data) bound the transfers.
const CUSTOMERS: &str = r#"
principal customer {
  accounts: set<string>
  region: string
}
tool transfer(account: string) {
  level draft
  side effects
}
mandate dana_desk for "user:dana" {
  holder "agent:assistant"
  allow transfer where args.account in principal.accounts and principal.region == "eu"
}
mandate erin_desk for "user:erin" {
  holder "agent:other"
  allow transfer where args.account in principal.accounts
}
mandate gina_desk for "user:gina" {
  holder "agent:third"
  allow transfer where args.account in principal.accounts
}
"#;

#[test]
fn principal_attributes_come_from_the_data_for_the_deciding_mandates_principal_only() {
    let s = setup_with("principals", CUSTOMERS, None);
    let data = r#"[{"type": "customer", "id": "user:dana", "attributes": {"accounts": ["acc1", "acc2"], "region": "eu"}},
                   {"type": "customer", "id": "user:erin", "attributes": {"accounts": ["acc9"], "region": "us"}}]"#;
    assert_eq!(s.admin("POST", "/admin/v1/data/load?format=json", Some(data)).0, 200);
    let call = |subject: &str, account: &str, forged: Option<Value>| {
        let mut request =
            json!({"subject": {"id": subject}, "action": {"name": "transfer", "arguments": {"account": account}}});
        if let Some(forged) = forged {
            request["context"] = json!({"principals": forged});
        }
        let decided = s.gateway.decide(request.to_string().as_bytes());
        (decided.allowed(), s.last("decision"))
    };
    let dana = json!({"user:dana": {"accounts": ["acc1", "acc2"], "region": "eu"}});
    // The mandate the gateway picks by holder: its principal's attributes, and no other principal's.
    let (allowed, entry) = call("agent:assistant", "acc1", None);
    assert!(allowed, "{entry}");
    assert_eq!(entry["request"]["context"]["principals"], dana);
    assert_eq!(entry["ignored"], json!([]));
    let (allowed, entry) = call("agent:assistant", "acc9", None);
    assert!(!allowed, "erin's account is not dana's: {entry}");
    assert_eq!(entry["request"]["context"]["principals"], dana);
    // A caller's principals are never kept, trusted or not: removed, recorded, and replaced by the data's.
    let forged = json!({"user:dana": {"accounts": ["forged"], "region": "eu"}, "user:erin": {"accounts": ["forged"]}});
    let (allowed, entry) = call("agent:assistant", "forged", Some(forged.clone()));
    assert!(!allowed, "{entry}");
    assert_eq!(entry["request"]["context"]["principals"], dana);
    assert_eq!(entry["ignored"], json!(["context.principals"]));
    let body = json!({"subject": {"type": "agent", "id": "agent:assistant"}, "action": {"name": "transfer"},
                      "resource": {"type": "account", "id": "forged"},
                      "context": {"principals": forged}});
    let response = s.call("POST", "/access/v1/evaluation", Some(BACKEND), Some(body.to_string().as_bytes()));
    assert_eq!(response.status, 200);
    let entry = s.last("decision");
    assert_eq!(entry["request"]["context"]["principals"], dana, "a trusted enforcement point is no source either");
    assert!(entry["ignored"].as_array().unwrap().contains(&json!("context.principals")), "{entry}");
    // Another mandate reads its own principal's attributes.
    let (allowed, entry) = call("agent:other", "acc9", None);
    assert!(allowed, "{entry}");
    assert_eq!(entry["request"]["context"]["principals"], json!({"user:erin": {"accounts": ["acc9"], "region": "us"}}));
    // A principal the data sets do not know: nothing filled, and the module denies (fails closed).
    let (allowed, entry) = call("agent:third", "acc1", None);
    assert!(!allowed, "{entry}");
    assert_eq!(entry["request"]["context"].get("principals"), None);
    // A change of the data applies to the next decision.
    let changed = r#"{"attributes": {"accounts": ["acc1"], "region": "us"}}"#;
    assert_eq!(s.admin("PUT", "/admin/v1/data/entities/customer/user:dana", Some(changed)).0, 200);
    let (allowed, entry) = call("agent:assistant", "acc1", None);
    assert!(!allowed, "dana's region is no longer eu: {entry}");
    assert_eq!(entry["request"]["context"]["principals"]["user:dana"]["region"], json!("us"));
}

#[test]
fn an_empty_world_changes_no_request() {
    let s = setup("empty", "{}");
    let mut native = forged_call("update_todo");
    native["action"] = json!({"name": "update_todo", "arguments": {"todo": "t1", "board": "b1"}});
    let decided = s.gateway.decide(native.to_string().as_bytes());
    assert!(decided.allowed(), "{}", decided.decision);
    let entry = s.last("decision");
    // As before the data sets: the native request as sent (the target filled in), nothing removed.
    assert_eq!(entry["request"]["subject"], native["subject"]);
    assert_eq!(entry["request"]["context"]["relations"], native["context"]["relations"]);
    assert_eq!(entry["ignored"], json!([]));
    // AuthZEN's types and properties are not carried into remit's request.
    let response = s.call("POST", "/access/v1/evaluation", Some(OTHER), Some(native.to_string().as_bytes()));
    assert_eq!(response.json()["decision"], json!(true));
    let request = &s.last("decision")["request"];
    assert_eq!(request["subject"], json!({"id": "agent:assistant"}));
    assert_eq!(request["resource"], json!({"id": "t1"}));
}

fn remit_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_remit"))
}

/// `remit admin data …` against `url`; its stdout as JSON.
fn admin_cli(url: &str, args: &[&str]) -> Value {
    let output =
        remit_bin().args(["admin", "data"]).args(args).args(["--gateway", url, "--token", ADMIN]).output().unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn serve_process(policy: &Path, store: &Path, extra: &[&str]) -> Served {
    Served::start(
        remit_bin()
            .args(["serve", policy.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .args(["--admin-token", &format!("ops={ADMIN}")])
            .args(extra)
            .stderr(Stdio::inherit()),
    )
}

#[test]
fn the_cli_changes_loads_and_reads_the_data_and_audit_verify_checks_its_entries() {
    let dir = support::temp_dir("gateway-data-cli");
    let policy = dir.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(policy.join("todos.remit"), TODOS).unwrap();
    let world = dir.join("world.json");
    std::fs::write(&world, WORLD).unwrap();
    let store = dir.join("state.db");
    // `--trusted-pep` names an enforcement point of `--pep-token`, or `remit serve` refuses to start.
    let refused = remit_bin()
        .args(["serve", policy.to_str().unwrap(), "--listen", "127.0.0.1:0", "--store"])
        .arg(format!("sqlite:{}", dir.join("refused.db").display()))
        .args(["--pep-token", &format!("backend={BACKEND}"), "--trusted-pep", "frontend"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("`frontend` is not the name of a --pep-token"));
    let (backend, other) = (format!("backend={BACKEND}"), format!("other={OTHER}"));
    let flags = ["--world", world.to_str().unwrap(), "--trusted-pep", "backend", "--pep-token", &backend];
    let served = serve_process(&policy, &store, &[&flags[..], &["--pep-token", &other]].concat());
    let url = served.url.clone();
    // The served gateway trusts `backend` with properties, and not `other`.
    for (token, device) in [(BACKEND, json!("laptop-7")), (OTHER, Value::Null)] {
        let auth = format!("Bearer {token}");
        let body = forged_call("read_todo").to_string();
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        let answer = request("POST", &format!("{url}/access/v1/evaluation"), &headers, Some(body.as_bytes())).unwrap();
        assert_eq!(answer.json()["decision"], json!(true), "{token}");
        let log = SqliteStore::open_existing(&store).unwrap().begin().unwrap().log_entries(1, 1 << 20).unwrap();
        let entry: Value = serde_json::from_str(&log.last().unwrap().body).unwrap();
        assert_eq!(entry["request"]["subject"]["properties"]["device"], device, "{token}");
    }
    assert_eq!(
        admin_cli(&url, &["put-entity", "todo", "t 1/x", r#"{"owner": "user:alice"}"#]),
        json!({"data_version": 1})
    );
    assert_eq!(admin_cli(&url, &["entity", "todo", "t 1/x"])["attributes"], json!({"owner": "user:alice"}));
    admin_cli(&url, &["add-tuple", "member_of", "agent:assistant", "team:web"]);
    assert_eq!(admin_cli(&url, &["tuples", "member_of", "agent:assistant"])["b"], json!(["team:web"]));
    assert_eq!(admin_cli(&url, &["tuples", "member_of", "agent:assistant", "team:web"])["holds"], json!(true));
    admin_cli(&url, &["remove-tuple", "member_of", "agent:assistant", "team:web"]);
    admin_cli(&url, &["add-holiday", "office", "2026-12-25"]);
    assert_eq!(admin_cli(&url, &["holidays", "office"])["holidays"], json!(["2026-12-25"]));
    admin_cli(&url, &["remove-holiday", "office", "2026-12-25"]);
    admin_cli(&url, &["delete-entity", "todo", "t 1/x"]);
    let csv = dir.join("owners.csv");
    std::fs::write(&csv, "entity,todo,t1,owner,user:alice\nrelation,owns,user:alice,t1\n").unwrap();
    let loaded = admin_cli(&url, &["load", csv.to_str().unwrap()]);
    assert_eq!((loaded["format"].clone(), loaded["tuples"].clone()), (json!("csv"), json!(1)));
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "[\n{\"relation\": \"owns\", \"args\": [\"a\", \"b\"]},\n{\"relation\": 7}\n]").unwrap();
    let refused = remit_bin()
        .args(["admin", "data", "load", bad.to_str().unwrap(), "--gateway", &url, "--token", ADMIN])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("line 3: `relation` must be a string"), "{stderr}");
    let state: Value = {
        let output = remit_bin().args(["admin", "state", "--gateway", &url, "--token", ADMIN]).output().unwrap();
        serde_json::from_slice(&output.stdout).unwrap()
    };
    assert_eq!(state["data"]["version"], json!(7));
    // The store's log, `data` entries included, verifies.
    drop(served);
    let verified = remit_bin().args(["audit", "verify", store.to_str().unwrap()]).output().unwrap();
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));
    // …and an entry changed after the fact does not.
    let tampered = SqliteStore::open(&store, Durability::Process).unwrap();
    tampered
        .execute_raw("UPDATE log SET body = replace(body, '\"tuples\":1', '\"tuples\":9') WHERE kind = 'data'")
        .unwrap();
    drop(tampered);
    let verified = remit_bin().args(["audit", "verify", store.to_str().unwrap()]).output().unwrap();
    assert!(!verified.status.success());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bundle_data_is_signed_installed_with_the_bundle_and_replaced_by_the_next() {
    let dir = support::temp_dir("gateway-data-bundle");
    let policy = dir.join("policy");
    std::fs::create_dir_all(policy.join("data")).unwrap();
    std::fs::write(policy.join("todos.remit"), TODOS).unwrap();
    std::fs::write(policy.join("data/owners.csv"), "entity,todo,t1,owner,user:alice\nrelation,owns,user:alice,t1\n")
        .unwrap();
    std::fs::write(policy.join("data/holidays.json"), r#"[{"calendar": "office", "holiday": "2026-12-25"}]"#).unwrap();
    std::fs::write(policy.join("data/README.md"), "not a data file").unwrap();
    let key = dir.join("owner.key");
    assert!(remit_bin().args(["keygen", "-o", key.to_str().unwrap()]).status().unwrap().success());
    let built = dir.join("todos.bundle");
    let build = |revision: &str| {
        let output = remit_bin()
            .args(["build", policy.to_str().unwrap(), "-o", built.to_str().unwrap(), "--bundle", "--sign"])
            .arg(&key)
            .args(["--revision", revision])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    build("1");
    let bytes = std::fs::read(&built).unwrap();
    let read = Bundle::read(&bytes).unwrap();
    let names: Vec<&str> = read.manifest.data.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["data/holidays.json", "data/owners.csv"]);
    // A data file changed after signing is refused (its digest), as is one whose manifest entry was changed to
    // match (the signature).
    let at = bytes.windows(5).position(|w| w == b"alice").unwrap();
    let mut changed = bytes.clone();
    changed[at..at + 5].copy_from_slice(b"mallo");
    assert!(Bundle::read(&changed).unwrap_err().contains("data file `data/owners.csv`"));
    let public = remit_gateway::bundle::verifying_key(&std::fs::read_to_string(dir.join("owner.key.pub")).unwrap());
    assert!(read.verify(&public.unwrap()).is_ok());

    let store = dir.join("state.db");
    let pub_key = dir.join("owner.key.pub");
    let served = serve_process(&built, &store, &["--verify-key", pub_key.to_str().unwrap()]);
    assert_eq!(admin_cli(&served.url, &["entity", "todo", "t1"])["attributes"], json!({"owner": "user:alice"}));
    assert_eq!(admin_cli(&served.url, &["holidays", "office"])["holidays"], json!(["2026-12-25"]));
    // The admin's own data stays beside the bundle's, and wins for an attribute both give.
    admin_cli(&served.url, &["put-entity", "todo", "t1", r#"{"owner": "user:carol"}"#]);
    admin_cli(&served.url, &["add-tuple", "owns", "user:carol", "t9"]);
    assert_eq!(admin_cli(&served.url, &["entity", "todo", "t1"])["attributes"], json!({"owner": "user:carol"}));
    drop(served);

    // Revision 2: the owner changed and the holiday gone. Its data replaces revision 1's; the admin's stays.
    std::fs::write(policy.join("data/owners.csv"), "entity,todo,t2,owner,user:bob\nrelation,owns,user:bob,t2\n")
        .unwrap();
    std::fs::remove_file(policy.join("data/holidays.json")).unwrap();
    build("2");
    let served = serve_process(&built, &store, &["--verify-key", pub_key.to_str().unwrap()]);
    assert_eq!(admin_cli(&served.url, &["tuples", "owns", "user:alice", "t1"])["holds"], json!(false));
    assert_eq!(admin_cli(&served.url, &["tuples", "owns", "user:bob", "t2"])["holds"], json!(true));
    assert_eq!(admin_cli(&served.url, &["tuples", "owns", "user:carol", "t9"])["holds"], json!(true));
    assert_eq!(admin_cli(&served.url, &["holidays", "office"])["holidays"], json!([]));
    assert_eq!(admin_cli(&served.url, &["entity", "todo", "t1"])["attributes"], json!({"owner": "user:carol"}));
    drop(served);
    // The same bundle served again installs nothing more.
    let served = serve_process(&built, &store, &["--verify-key", pub_key.to_str().unwrap()]);
    drop(served);
    let log = SqliteStore::open_existing(&store).unwrap().begin().unwrap().log_entries(1, 1 << 20).unwrap();
    let installs: Vec<Value> = log
        .iter()
        .filter(|e| e.kind == "data")
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap())
        .filter(|b| b["op"] == "bundle")
        .collect();
    assert_eq!(installs.len(), 2, "{installs:?}");
    assert_eq!(
        (installs[0]["revision"].clone(), installs[0]["tuples"].clone(), installs[0]["holidays"].clone()),
        (json!(1), json!(1), json!(1))
    );
    assert_eq!((installs[1]["revision"].clone(), installs[1]["removed"].clone()), (json!(2), json!(3)));
    let verified = remit_bin().args(["audit", "verify", store.to_str().unwrap()]).output().unwrap();
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));

    // A bad data file stops the build, naming the file and the line.
    std::fs::write(policy.join("data/owners.csv"), "relation,owns,a,b\nrelation,owns\n").unwrap();
    let output = remit_bin()
        .args(["build", policy.to_str().unwrap(), "-o", dir.join("bad.bundle").to_str().unwrap(), "--bundle"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`data/owners.csv`: line 2"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A bundle refused (an older revision) installs none of its data; one taken installs it with its revision, in one
/// transaction.
#[test]
fn a_refused_bundle_installs_no_data() {
    let dir = support::temp_dir("gateway-data-refused");
    let store = SqliteStore::open(&dir.join("state.db"), Durability::Process).unwrap();
    let data = |text: &str| vec![("data/t.csv".to_string(), text.as_bytes().to_vec())];
    let manifest_of = |revision: u64, files: &[(String, Vec<u8>)]| {
        let bytes = bundle::write_with_data(b"\0asm", files, "sha256:p", revision, "s".into(), "t".into(), None);
        Bundle::read(&bytes).unwrap()
    };
    let second = manifest_of(2, &data("relation,owns,a,b\n"));
    bundle::admit_with_data(&store, &second.manifest, &second.data, 0, false).unwrap();
    let first = manifest_of(1, &data("relation,owns,c,d\n"));
    assert!(bundle::admit_with_data(&store, &first.manifest, &first.data, 0, false).unwrap_err().contains("older"));
    let mut tx = store.begin().unwrap();
    assert!(tx.holds("owns", "a", "b").unwrap());
    assert!(!tx.holds("owns", "c", "d").unwrap());
    assert_eq!(tx.data_state().unwrap().version, 1);
    drop(tx);
    std::fs::remove_dir_all(&dir).ok();
}

/// The median of `samples`.
fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// A lookup, and a whole decision that fills an entity and two relation tuples, cost about the same with 1,000,000
/// tuples in the store as with 10: every lookup is by key on an index. Measured in interleaved runs (the two
/// stores take turns, so a slower moment of the shared machine falls on both), compared by each one's fastest run
/// (the medians are printed too).
#[test]
fn a_million_tuples_cost_a_lookup_and_a_decision_what_ten_do() {
    let dir = support::temp_dir("gateway-data-scale");
    let world = r#"{"resource_types": [{"type_name": "todo", "attributes": [{"name": "owner", "source": "data"}]}],
                   "relations": [{"name": "member_of", "source": "data",
                                  "atoms": [["subject", {"literal": "team:7"}], ["principal", "resource.owner"]]}]}"#;
    let make = |name: &str, tuples: u64| {
        let store = Arc::new(SqliteStore::open(&dir.join(format!("{name}.db")), Durability::Process).unwrap());
        let started = Instant::now();
        let mut tx = store.begin().unwrap();
        for i in 0..tuples {
            tx.set_tuple(ORIGIN_ADMIN, "member_of", &format!("user:{i}"), &format!("team:{}", i % 1000), true).unwrap();
        }
        let owner = json!({"owner": "user:5"});
        tx.put_entity(ORIGIN_ADMIN, "todo", "t1", Some(owner.as_object().unwrap())).unwrap();
        tx.commit().unwrap();
        // The million rows' WAL copied into the database now, not by the checkpoint thread while decisions are timed.
        store.execute_raw("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        eprintln!("{name}: {tuples} tuples written in {:.1} s", started.elapsed().as_secs_f64());
        let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
        let gateway = Gateway::new(policy_of(TODOS), store.clone(), clock, Config::default());
        gateway.set_world(WorldSpec::from_json(world).unwrap());
        (store, gateway)
    };
    let (small_store, small) = make("ten", 10);
    let (large_store, large) = make("million", 1_000_000);
    let call = json!({"subject": {"id": "agent:assistant"}, "action": {"name": "read_todo", "arguments": {}},
                      "resource": {"type": "todo", "id": "t1"}})
    .to_string();
    // Both decide the same, with the same values filled in.
    for gateway in [&small, &large] {
        assert!(gateway.decide(call.as_bytes()).allowed());
    }
    let filled = |store: &SqliteStore| {
        let log = store.begin().unwrap().log_entries(1, 1 << 20).unwrap();
        let body: Value = serde_json::from_str(&log.last().unwrap().body).unwrap();
        (body["request"]["resource"]["properties"].clone(), body["request"]["context"]["relations"].clone())
    };
    assert_eq!(filled(&small_store), filled(&large_store));
    assert_eq!(filled(&large_store).1["member_of"][1], json!({"args": ["user:alice", "user:5"], "holds": false}));

    // Keys of ten users (the pages on their paths stay cached), and keys spread over the million (most pages of
    // the large store's index are then read from the file system's cache, not SQLite's).
    let keys: Vec<String> = (0..1_000u64).map(|i| format!("user:{}", i % 10)).collect();
    let spread: Vec<String> = (0..1_000u64).map(|i| format!("user:{}", (i * 7919 + 13) % 1_000_000)).collect();
    let lookups = |store: &SqliteStore, keys: &[String]| {
        let mut tx = store.begin_read().unwrap();
        let started = Instant::now();
        let mut held = 0;
        for key in keys {
            held += u64::from(tx.holds("member_of", key, "team:3").unwrap());
        }
        let elapsed = started.elapsed().as_secs_f64() / keys.len() as f64;
        (elapsed, held)
    };
    // Decisions that change nothing but the log, with their entries queued (as `remit mcp-proxy` decides) and
    // written between the timed runs: what is timed is the filling and the deciding, not the commits' I/O.
    let decisions = |gateway: &Gateway, n: usize| {
        let started = Instant::now();
        for _ in 0..n {
            assert!(gateway.decide_deferring(call.as_bytes()).allowed());
        }
        let elapsed = started.elapsed().as_secs_f64() / n as f64;
        gateway.flush_entries().unwrap();
        elapsed
    };
    let mut runs: [Vec<f64>; 6] = Default::default();
    for round in 0..40 {
        let (small_hot, held_small) = lookups(&small_store, &keys);
        let (large_hot, held_large) = lookups(&large_store, &keys);
        assert_eq!((held_small, held_large), (100, 100), "user:3 is in team:3 in both stores");
        runs[0].push(small_hot);
        runs[1].push(large_hot);
        runs[2].push(lookups(&small_store, &spread).0);
        runs[3].push(lookups(&large_store, &spread).0);
        // Each goes first in every other round.
        if round % 2 == 0 {
            runs[4].push(decisions(&small, 25));
            runs[5].push(decisions(&large, 25));
        } else {
            runs[5].push(decisions(&large, 25));
            runs[4].push(decisions(&small, 25));
        }
    }
    let medians = runs.clone().map(median);
    eprintln!(
        "medians (µs): lookup of 10 keys {:.2} / {:.2}, spread {:.2} / {:.2}, decision {:.1} / {:.1} (10 / 1,000,000 \
         tuples)",
        medians[0] * 1e6,
        medians[1] * 1e6,
        medians[2] * 1e6,
        medians[3] * 1e6,
        medians[4] * 1e6,
        medians[5] * 1e6
    );
    // On a shared machine a run is often preempted (whole runs take 3 or 5 times as long): the fastest run of each
    // is its cost when not preempted, which is what the two stores are compared by.
    let [hot_small, hot_large, spread_small, spread_large, decide_small, decide_large] =
        runs.map(|samples| samples.into_iter().fold(f64::INFINITY, f64::min));
    eprintln!(
        "fastest runs: lookup of 10 keys: {:.2} µs with 10 tuples, {:.2} µs with 1,000,000 ({:.2}×); of keys spread over the \
         million: {:.2} µs, {:.2} µs ({:.2}×); decision: {:.1} µs with 10, {:.1} µs with 1,000,000 ({:.2}×)",
        hot_small * 1e6,
        hot_large * 1e6,
        hot_large / hot_small,
        spread_small * 1e6,
        spread_large * 1e6,
        spread_large / spread_small,
        decide_small * 1e6,
        decide_large * 1e6,
        decide_large / decide_small
    );
    // A scan would cost 100,000 times more; a B-tree lookup adds a few page steps (its depth grows with the
    // logarithm): microseconds, against a decision's hundreds.
    assert!(
        hot_large / hot_small < 3.0,
        "a lookup with a million tuples costs {:.2}× one with ten",
        hot_large / hot_small
    );
    assert!(spread_large - spread_small < 10e-6, "a spread lookup adds {:.1} µs", (spread_large - spread_small) * 1e6);
    assert!(
        decide_large / decide_small < 1.2,
        "a decision with a million tuples costs {:.2}× one with ten",
        decide_large / decide_small
    );
    drop((small, large, small_store, large_store));
    std::fs::remove_dir_all(&dir).ok();
}

/// A world policy's decisions that change nothing (`decide_deferring`, as the MCP proxy decides) read the data
/// through the state cache while the store's version stays the same: repeated, they fill the same values; after
/// each change of the data (an entity, a tuple, set and removed) the next decision fills and decides by the new
/// data, without a commit of the log in between.
#[test]
fn world_decisions_through_the_cache_follow_every_change_of_the_data() {
    let dir = support::temp_dir("gateway-data-cached-world");
    let store = Arc::new(SqliteStore::open(&dir.join("world.db"), Durability::Process).unwrap());
    let put = |change: &dyn Fn(&mut dyn remit_gateway::store::Tx)| {
        let mut tx = store.begin().unwrap();
        change(tx.as_mut());
        tx.commit().unwrap();
    };
    put(&|tx| {
        let order = json!({"owner": "user:alice", "total": "120.00 EUR"});
        tx.put_entity(ORIGIN_ADMIN, "order", "order-1", Some(order.as_object().unwrap())).unwrap();
        let agent = json!({"teams": ["refunds"]});
        tx.put_entity(ORIGIN_ADMIN, "agent", "agent:desk", Some(agent.as_object().unwrap())).unwrap();
    });
    let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
    let gateway = Gateway::new(policy_of(examples::REFUNDS_WORLD), store.clone(), clock, Config::default());
    let call = json!({"subject": {"type": "agent", "id": "agent:desk"},
                      "action": {"name": "refund", "arguments": {"order": "order-1", "amount": "40.00 EUR"}},
                      "resource": {"type": "order", "id": "order-1"}})
    .to_string();
    // The outcome of each decision, and the requests it decided (the log written only at the end).
    let mut outcomes = Vec::new();
    let mut decide = |times: usize| {
        for _ in 0..times {
            outcomes.push(gateway.decide_deferring(call.as_bytes()).outcome);
        }
    };
    decide(3);
    put(&|tx| {
        tx.set_tuple(ORIGIN_ADMIN, "member_of", "agent:desk", "team:suspended", true).unwrap();
    });
    decide(2);
    put(&|tx| {
        tx.set_tuple(ORIGIN_ADMIN, "member_of", "agent:desk", "team:suspended", false).unwrap();
    });
    decide(2);
    put(&|tx| {
        let order = json!({"owner": "user:bob", "total": "120.00 EUR"});
        tx.put_entity(ORIGIN_ADMIN, "order", "order-1", Some(order.as_object().unwrap())).unwrap();
    });
    decide(2);
    put(&|tx| {
        tx.put_entity(ORIGIN_ADMIN, "agent", "agent:desk", None).unwrap();
    });
    decide(1);
    assert_eq!(outcomes, ["allow", "allow", "allow", "deny", "deny", "allow", "allow", "deny", "deny", "deny"]);
    // Two orders decided in turn, then one of them changed: the first decided after the change reads the store
    // and keeps its lookups for the new version; the other's, looked up only before the change, are not answered
    // from the cache.
    put(&|tx| {
        let agent = json!({"teams": ["refunds"]});
        tx.put_entity(ORIGIN_ADMIN, "agent", "agent:desk", Some(agent.as_object().unwrap())).unwrap();
        for id in ["order-2", "order-3"] {
            let order = json!({"owner": "user:alice", "total": "120.00 EUR"});
            tx.put_entity(ORIGIN_ADMIN, "order", id, Some(order.as_object().unwrap())).unwrap();
        }
    });
    let refund = |order: &str| {
        let call = json!({"subject": {"type": "agent", "id": "agent:desk"},
                          "action": {"name": "refund", "arguments": {"order": order, "amount": "40.00 EUR"}},
                          "resource": {"type": "order", "id": order}});
        gateway.decide_deferring(call.to_string().as_bytes()).outcome
    };
    assert_eq!([refund("order-2"), refund("order-3"), refund("order-2"), refund("order-3")], ["allow"; 4]);
    put(&|tx| {
        let order = json!({"owner": "user:bob", "total": "120.00 EUR"});
        tx.put_entity(ORIGIN_ADMIN, "order", "order-3", Some(order.as_object().unwrap())).unwrap();
    });
    assert_eq!(
        [refund("order-2"), refund("order-3"), refund("order-2"), refund("order-3")],
        ["allow", "deny", "allow", "deny"]
    );
    gateway.flush_entries().unwrap();
    let log = store.begin().unwrap().log_entries(1, 1 << 20).unwrap();
    let requests: Vec<Value> = log
        .iter()
        .filter(|e| e.kind == "decision")
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap()["request"].clone())
        .collect();
    assert_eq!(requests.len(), 18);
    let filled = |r: &Value| {
        (
            r["resource"]["properties"]["owner"].clone(),
            r["subject"]["properties"].clone(),
            r["context"]["relations"].clone(),
        )
    };
    let held = |holds: bool| json!({"member_of": [{"args": ["agent:desk", "team:suspended"], "holds": holds}]});
    let alice = (json!("user:alice"), json!({"teams": ["refunds"]}), held(false));
    assert_eq!(requests[..3].iter().map(filled).collect::<Vec<_>>(), vec![alice.clone(); 3]);
    assert_eq!(filled(&requests[3]), (json!("user:alice"), json!({"teams": ["refunds"]}), held(true)));
    assert_eq!(filled(&requests[5]), alice);
    assert_eq!(filled(&requests[7]), (json!("user:bob"), json!({"teams": ["refunds"]}), held(false)));
    // The agent's entity removed: no properties filled (the module denies, naming the attribute).
    assert_eq!(filled(&requests[9]), (json!("user:bob"), Value::Null, held(false)));
    drop(gateway);
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 30's first benchmark seen from the gateway: the same agent's call decided under a policy with literals and
/// under one that reads attributes and relations, each gateway filling what its policy reads (the world's from its
/// data sets: two entities looked up and a relation tuple asked about) and logging the decision, two ways: as `remit
/// mcp-proxy` decides (entries queued, written between the timed batches; the data read through the state cache)
/// and as `remit serve` decides (each decision its own committed transaction, here one caller at a time, so no
/// batch shares a commit). What the world costs a caller in the gateway, beside the module-only ratio of
/// tests/rt_decide.rs `world_speed` (BENCHMARKS.md, "Reading the world").
/// A measurement: `cargo test --release --test gateway_data -- --ignored --nocapture world_decisions_in_the_gateway`.
#[test]
#[ignore]
fn world_decisions_in_the_gateway_against_literals() {
    let dir = support::temp_dir("gateway-data-world-speed");
    let gateway = |name: &str, source: &str| {
        let store = Arc::new(SqliteStore::open(&dir.join(format!("{name}.db")), Durability::Process).unwrap());
        let mut tx = store.begin().unwrap();
        let order = json!({"owner": "user:alice", "total": "120.00 EUR"});
        tx.put_entity(ORIGIN_ADMIN, "order", "order-1", Some(order.as_object().unwrap())).unwrap();
        let agent = json!({"teams": ["refunds", "billing"]});
        tx.put_entity(ORIGIN_ADMIN, "agent", "agent:desk", Some(agent.as_object().unwrap())).unwrap();
        for i in 0..100 {
            tx.set_tuple(ORIGIN_ADMIN, "member_of", &format!("agent:{i}"), "team:suspended", true).unwrap();
        }
        tx.commit().unwrap();
        let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
        (store.clone(), Gateway::new(policy_of(source), store, clock, Config::default()))
    };
    let (literal_store, literal) = gateway("literal", examples::REFUNDS_LITERAL);
    let (world_store, world) = gateway("world", examples::REFUNDS_WORLD);
    let call = json!({"subject": {"type": "agent", "id": "agent:desk"},
                      "action": {"name": "refund", "arguments": {"order": "order-1", "amount": "40.00 EUR"}},
                      "resource": {"type": "order", "id": "order-1"}})
    .to_string();
    for (gateway, store) in [(&literal, &literal_store), (&world, &world_store)] {
        let decided = gateway.decide(call.as_bytes());
        assert!(decided.allowed(), "{decided:?}");
        let log = store.begin().unwrap().log_entries(1, 1 << 20).unwrap();
        let body: Value = serde_json::from_str(&log.last().unwrap().body).unwrap();
        eprintln!("decided: {}", body["request"]);
    }
    let batch = |gateway: &Gateway, n: usize, deferring: bool| {
        let started = Instant::now();
        for _ in 0..n {
            let decided =
                if deferring { gateway.decide_deferring(call.as_bytes()) } else { gateway.decide(call.as_bytes()) };
            assert!(decided.allowed());
        }
        let elapsed = started.elapsed().as_secs_f64() / n as f64;
        gateway.flush_entries().unwrap();
        elapsed
    };
    let rounds: usize = std::env::var("REMIT_SPEED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    for (deferring, how) in [(true, "deferring (remit mcp-proxy)"), (false, "committed (remit serve)")] {
        let (mut literals, mut worlds) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Each goes first in every other round.
            if round % 2 == 0 {
                literals.push(batch(&literal, 100, deferring));
                worlds.push(batch(&world, 100, deferring));
            } else {
                worlds.push(batch(&world, 100, deferring));
                literals.push(batch(&literal, 100, deferring));
            }
        }
        let (l, w) = (median(literals), median(worlds));
        eprintln!(
            "in the gateway, {how}, medians of {rounds} batches of 100: literals {:.2} µs, world {:.2} µs: {:.3}×",
            l * 1e6,
            w * 1e6,
            w / l
        );
    }
    drop((literal, world, literal_store, world_store));
    std::fs::remove_dir_all(&dir).ok();
}
