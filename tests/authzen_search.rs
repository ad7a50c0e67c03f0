//! AuthZEN's subject and resource searches over the gateway's data (`/access/v1/search/resource`,
//! `/access/v1/search/subject`), through a served gateway with data loaded through the admin API: the candidates,
//! the decisions (nothing logged), paging, holders by pattern, what fails closed and what is refused. Then the
//! OpenID AuthZEN search interop suite (openid/authzen, interop/authzen-search-demo, vendored in
//! tests/authzen/search with its commit and licence): every case of its three files, unchanged.

mod support;

use std::path::Path;

use remit_gateway::http::Tokens;
use serde_json::{json, Value};
use support::gateway::{policy, HttpGateway, Options};

const ADMIN: &str = "search-admin-token";

fn suite() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/authzen/search"))
}

impl HttpGateway {
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_json(path, body.to_string().as_bytes(), None)
    }

    /// The log's length (a search must not move it).
    fn log_length(&self) -> usize {
        remit_gateway::audit::read_all(self.store.as_ref()).unwrap().len()
    }
}

/// A gateway serving a policy on a free loopback port, with data loaded, until the test ends.
fn start(name: &str, file: &str, source: &str, data: &[u8]) -> HttpGateway {
    let program = support::examples::compile(&[(file.to_string(), source.to_string())]);
    let mut tokens = Tokens::default();
    tokens.admin.insert(ADMIN.into(), "ops".into());
    let options = Options { tokens, ..Options::default() };
    let served = HttpGateway::start(&format!("authzen-search-{name}"), policy(&program), options);
    served.load_data(ADMIN, data);
    served
}

/// Documents by path, and agents: one by name, the club's by a `holder under` prefix. The conditions read only the
/// request's own ids, so that the searches are tested whatever the decision module evaluates of the world.
const DOCS: &str = r#"
tool read_doc()
tool share_doc()
tool read_file(path: string) {
  target args.path
}

mandate docs for "org:acme" {
  holder "agent:reader"
  purpose "read the public documents"
  allow read_doc where resource.id under "docs/public/"
  allow share_doc where resource.id == "docs/public/a"
  allow read_file where resource.id under "docs/public/"
}

mandate club for "org:acme" {
  holder "agent:chair", under "agent:club/"
  purpose "read every document"
  allow read_doc
}
"#;

const DOCS_DATA: &str = r#"[
  {"type": "doc", "id": "docs/public/b"},
  {"type": "doc", "id": "docs/public/a"},
  {"type": "doc", "id": "docs/secret/c"},
  {"type": "note", "id": "docs/public/note"},
  {"type": "agent", "id": "agent:reader"},
  {"type": "agent", "id": "agent:club/ann"},
  {"type": "agent", "id": "agent:stranger"}
]"#;

fn docs(name: &str) -> HttpGateway {
    start(name, "docs.remit", DOCS, DOCS_DATA.as_bytes())
}

fn ids(answer: &Value) -> Vec<&str> {
    answer["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect()
}

fn resources(subject: &str, action: &str) -> Value {
    json!({"subject": {"type": "agent", "id": subject}, "action": {"name": action}, "resource": {"type": "doc"}})
}

fn subjects(action: &str, resource: &str) -> Value {
    json!({"subject": {"type": "agent"}, "action": {"name": action}, "resource": {"type": "doc", "id": resource}})
}

#[test]
fn the_resource_search_lists_the_entities_of_the_type_the_subject_may_act_on_sorted_and_logs_nothing() {
    let s = docs("resource");
    let logged = s.log_length();
    let (status, answer) = s.post("/access/v1/search/resource", &resources("agent:reader", "read_doc"));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(ids(&answer), ["docs/public/a", "docs/public/b"], "of type `doc` only, sorted: {answer}");
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["type"] == "doc"), "{answer}");
    assert_eq!(answer["page"], json!({"next_token": "", "count": 2, "total": 2}));
    assert_eq!(answer.get("context"), None, "a resource search reports no pattern");
    let (_, answer) = s.post("/access/v1/search/resource", &resources("agent:reader", "share_doc"));
    assert_eq!(ids(&answer), ["docs/public/a"]);
    // A tool that names its target acts on the argument: each candidate is that argument.
    let mut by_path = resources("agent:reader", "read_file");
    by_path["action"]["properties"] = json!({"path": "docs/secret/c"});
    let (_, answer) = s.post("/access/v1/search/resource", &by_path);
    assert_eq!(ids(&answer), ["docs/public/a", "docs/public/b"], "{answer}");
    // A `resource.id` given is ignored (AuthZEN: it MUST be), and so are the resource's properties.
    let mut with_id = resources("agent:chair", "read_doc");
    with_id["resource"]["id"] = json!("docs/public/a");
    with_id["resource"]["properties"] = json!({"owner": "agent:chair"});
    let (_, answer) = s.post("/access/v1/search/resource", &with_id);
    assert_eq!(ids(&answer), ["docs/public/a", "docs/public/b", "docs/secret/c"]);
    // A type the data has nothing of: nothing to list.
    let mut other = resources("agent:chair", "read_doc");
    other["resource"]["type"] = json!("invoice");
    let (status, answer) = s.post("/access/v1/search/resource", &other);
    assert_eq!((status, ids(&answer).len()), (200, 0), "{answer}");
    assert_eq!(s.log_length(), logged, "a search decides without logging");
    // Each result, evaluated, is allowed (AuthZEN: it SHOULD be), and each other entity of the type is not.
    for (id, allowed) in [("docs/public/a", true), ("docs/public/b", true), ("docs/secret/c", false)] {
        let evaluation = json!({"subject": {"type": "agent", "id": "agent:reader"}, "action": {"name": "read_doc"},
                                "resource": {"type": "doc", "id": id}});
        let (_, answer) = s.post("/access/v1/evaluation", &evaluation);
        assert_eq!(answer["decision"], allowed, "{id}: {answer}");
    }
}

#[test]
fn the_subject_search_decides_the_data_and_the_exact_holders_and_reports_patterns_as_patterns() {
    let s = docs("subject");
    let logged = s.log_length();
    // `agent:chair` is no entity of the data: an exact holder. `agent:club/ann` holds by pattern and is in the data;
    // `agent:stranger` is in the data and holds nothing.
    let (status, answer) = s.post("/access/v1/search/subject", &subjects("read_doc", "docs/public/a"));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(ids(&answer), ["agent:chair", "agent:club/ann", "agent:reader"], "{answer}");
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["type"] == "agent"), "{answer}");
    assert_eq!(
        answer["context"]["holder_patterns"],
        json!([{"type": "agent", "under": "agent:club/", "mandate": "club"}]),
        "whoever else is under the prefix may read it too"
    );
    let (_, answer) = s.post("/access/v1/search/subject", &subjects("read_doc", "docs/secret/c"));
    assert_eq!(ids(&answer), ["agent:chair", "agent:club/ann"], "{answer}");
    assert_eq!(answer["context"]["holder_patterns"][0]["under"], "agent:club/");
    // No pattern's mandate allows sharing: no pattern reported.
    let (_, answer) = s.post("/access/v1/search/subject", &subjects("share_doc", "docs/public/a"));
    assert_eq!(ids(&answer), ["agent:reader"], "{answer}");
    assert_eq!(answer.get("context"), None, "{answer}");
    // A mandate named in the context limits the search to it (the others' holders are not its holders).
    let mut named = subjects("read_doc", "docs/public/a");
    named["context"] = json!({"mandate": "docs"});
    let (_, answer) = s.post("/access/v1/search/subject", &named);
    assert_eq!(ids(&answer), ["agent:reader"], "{answer}");
    assert_eq!(answer.get("context"), None, "{answer}");
    // A `subject.id` given is ignored.
    let mut with_id = subjects("share_doc", "docs/public/a");
    with_id["subject"]["id"] = json!("agent:chair");
    assert_eq!(ids(&s.post("/access/v1/search/subject", &with_id).1), ["agent:reader"]);
    assert_eq!(s.log_length(), logged, "a search decides without logging");
}

#[test]
fn searches_fail_closed_for_what_the_data_and_the_policy_do_not_know() {
    let s = docs("closed");
    // A subject the data does not know, and no mandate holds: nothing.
    for subject in ["agent:nobody", "agent:stranger", ""] {
        let (status, answer) = s.post("/access/v1/search/resource", &resources(subject, "read_doc"));
        assert_eq!((status, ids(&answer).len()), (200, 0), "{subject}: {answer}");
    }
    // An action the policy does not know, and a resource nobody holds anything on.
    let (_, answer) = s.post("/access/v1/search/resource", &resources("agent:reader", "delete_everything"));
    assert_eq!(ids(&answer).len(), 0, "{answer}");
    let (_, answer) = s.post("/access/v1/search/subject", &subjects("delete_everything", "docs/public/a"));
    assert_eq!((ids(&answer).len(), answer.get("context")), (0, None), "{answer}");
    // A climbing id is under nothing: `agent:reader` cannot reach `docs/secret/` through `docs/public/..` (the
    // club reads every document).
    let (_, answer) = s.post("/access/v1/search/subject", &subjects("read_doc", "docs/public/../secret/c"));
    assert_eq!(ids(&answer), ["agent:chair", "agent:club/ann"], "{answer}");
}

#[test]
fn a_search_naming_no_type_or_missing_a_member_is_a_400_and_decides_nothing() {
    let s = docs("refused");
    let logged = s.log_length();
    let mut cases: Vec<(&str, Value, &str)> = Vec::new();
    for (path, side, body) in [
        ("/access/v1/search/resource", "resource", resources("agent:reader", "read_doc")),
        ("/access/v1/search/subject", "subject", subjects("read_doc", "docs/public/a")),
    ] {
        let mut untyped = body.clone();
        untyped[side].as_object_mut().unwrap().remove("type");
        cases.push((path, untyped, "search.no-type"));
        let mut empty = body.clone();
        empty[side]["type"] = json!("");
        cases.push((path, empty, "search.no-type"));
        let mut numeric = body.clone();
        numeric[side]["type"] = json!(7);
        cases.push((path, numeric, "search.no-type"));
        let mut absent = body.clone();
        absent.as_object_mut().unwrap().remove(side);
        cases.push((path, absent, "search.no-type"));
        let mut no_action = body.clone();
        no_action.as_object_mut().unwrap().remove("action");
        cases.push((path, no_action, "authzen.bad-request"));
        let mut bad_page = body.clone();
        bad_page["page"] = json!({"limit": 0});
        cases.push((path, bad_page, "search.bad-page"));
    }
    let mut no_subject_id = resources("agent:reader", "read_doc");
    no_subject_id["subject"].as_object_mut().unwrap().remove("id");
    cases.push(("/access/v1/search/resource", no_subject_id, "authzen.bad-request"));
    let mut no_resource_id = subjects("read_doc", "docs/public/a");
    no_resource_id["resource"].as_object_mut().unwrap().remove("id");
    cases.push(("/access/v1/search/subject", no_resource_id, "authzen.bad-request"));
    for (path, body, code) in &cases {
        let (status, answer) = s.post(path, body);
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert_eq!(answer["error"]["code"], *code, "{path} {body}: {answer}");
    }
    let (status, answer) = s.post("/access/v1/search/resource", &json!({"subject": {}}));
    assert_eq!((status, answer["error"]["message"].as_str().unwrap().contains("`resource.type`")), (400, true));
    assert_eq!(s.log_length(), logged);
}

#[test]
fn the_searches_page_as_the_action_search_does() {
    let s = docs("pages");
    for (path, body) in [
        ("/access/v1/search/resource", resources("agent:chair", "read_doc")),
        ("/access/v1/search/subject", subjects("read_doc", "docs/public/a")),
    ] {
        let all = ids(&s.post(path, &body).1).iter().map(|id| id.to_string()).collect::<Vec<_>>();
        assert_eq!(all.len(), 3, "{path}");
        let mut paged = body.clone();
        paged["page"] = json!({"limit": 2});
        let (status, first) = s.post(path, &paged);
        assert_eq!(status, 200, "{first}");
        assert_eq!(ids(&first), all[..2], "{path}");
        assert_eq!((first["page"]["count"].clone(), first["page"]["total"].clone()), (json!(2), json!(3)));
        let token = first["page"]["next_token"].as_str().unwrap().to_string();
        assert!(!token.is_empty());
        paged["page"]["token"] = json!(token);
        let (_, second) = s.post(path, &paged);
        assert_eq!(ids(&second), all[2..], "{path}");
        assert_eq!(second["page"]["next_token"], "");
        // The token of another query is refused.
        let mut other = paged.clone();
        other["action"]["name"] = json!("share_doc");
        let (status, answer) = s.post(path, &other);
        assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("search.bad-page")), "{answer}");
    }
}

#[test]
fn discovery_names_the_subject_and_resource_searches() {
    let s = docs("discovery");
    let config = s.call("GET", "/.well-known/authzen-configuration", None, None).json();
    for (key, path) in [
        ("search_subject_endpoint", "/access/v1/search/subject"),
        ("search_resource_endpoint", "/access/v1/search/resource"),
        ("search_action_endpoint", "/access/v1/search/action"),
    ] {
        assert!(config[key].as_str().unwrap().ends_with(path), "{key}: {config}");
    }
}

/// The suite's data as the gateway loads it (`data.json`) is its users and records, attribute for attribute, the
/// records' ids as strings (AuthZEN ids are strings; the suite's files write them so).
#[test]
fn the_search_suites_data_json_is_its_users_and_records() {
    let read = |name: &str| -> Value { serde_json::from_slice(&std::fs::read(suite().join(name)).unwrap()).unwrap() };
    let mut expected = Vec::new();
    for (file, kind) in [("users.json", "user"), ("records.json", "record")] {
        for item in read(file).as_array().unwrap() {
            let mut attributes = item.as_object().unwrap().clone();
            let id = attributes.remove("id").unwrap();
            let id = id.as_str().map(str::to_string).unwrap_or_else(|| id.to_string());
            expected.push(json!({"type": kind, "id": id, "attributes": attributes}));
        }
    }
    assert_eq!(read("data.json"), Value::Array(expected));
    let policy = std::fs::read_to_string(suite().join("search.remit")).unwrap();
    for record in 101..=120 {
        assert!(!policy.contains(&record.to_string()), "the policy names no record ({record})");
    }
}

/// Every case of the suite's three files, unchanged, through the served gateway. The suite's runner compares the
/// results in any order (it sorts both sides by type and id); the subject and resource searches answer sorted by
/// id, which is the order the files write, so those are compared exactly; the action search answers sorted by
/// name, the files write `view`, `edit`, `delete`: compared as sets.
#[test]
fn the_search_interop_suite_passes_from_the_gateways_data() {
    let policy = std::fs::read_to_string(suite().join("search.remit")).unwrap();
    let data = std::fs::read(suite().join("data.json")).unwrap();
    let s = start("interop", "search.remit", &policy, &data);
    let logged = s.log_length();
    let mut counts = Vec::new();
    for (kind, path) in [
        ("subject", "/access/v1/search/subject"),
        ("resource", "/access/v1/search/resource"),
        ("action", "/access/v1/search/action"),
    ] {
        let file: Value =
            serde_json::from_slice(&std::fs::read(suite().join(kind).join("results.json")).unwrap()).unwrap();
        let cases = file["evaluation"].as_array().unwrap();
        for (i, case) in cases.iter().enumerate() {
            let (status, answer) = s.post_json(path, case["request"].to_string().as_bytes(), None);
            assert_eq!(status, 200, "{kind} #{i}: {answer}");
            let expected = &case["expected"]["results"];
            if kind == "action" {
                let names = |results: &Value| {
                    let mut names: Vec<String> =
                        results.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
                    names.sort();
                    names
                };
                assert_eq!(names(&answer["results"]), names(expected), "{kind} #{i}: {}\n{answer}", case["request"]);
            } else {
                assert_eq!(&answer["results"], expected, "{kind} #{i}: {}\n{answer}", case["request"]);
            }
            assert_eq!(answer.get("context"), None, "no holder by pattern in this policy");
        }
        counts.push(cases.len());
    }
    assert_eq!(counts, [60, 18, 120]);
    assert_eq!(s.log_length(), logged, "the searches logged nothing");
    // Fail closed: a user nobody knows may do nothing; a holder the data no longer describes may do nothing a rule
    // reading its role or department grants (the condition cannot be evaluated, `or` or not), and still what a rule
    // reading only the record's owner and its id grants.
    assert_eq!(s.call("DELETE", "/admin/v1/data/entities/user/alice", Some(ADMIN), None).status, 200);
    let owned = json!([{"type": "record", "id": "101"}, {"type": "record", "id": "107"},
                       {"type": "record", "id": "113"}, {"type": "record", "id": "119"}]);
    for (subject, action, expected) in [
        ("mallory", "view", json!([])),
        ("alice", "view", json!([])),
        ("alice", "edit", json!([])),
        ("alice", "delete", owned),
    ] {
        let search = json!({"subject": {"type": "user", "id": subject}, "action": {"name": action},
                            "resource": {"type": "record"}});
        let (status, answer) = s.post("/access/v1/search/resource", &search);
        assert_eq!((status, answer["results"].clone()), (200, expected), "{subject} {action}: {answer}");
    }
    // Alice is no longer an entity of the data, and still a holder: a candidate of the subject search.
    for (action, expected) in [("view", json!(["bob", "carol", "dan"])), ("delete", json!(["alice"]))] {
        let search = json!({"subject": {"type": "user"}, "action": {"name": action},
                            "resource": {"type": "record", "id": "101"}});
        let answer = s.post("/access/v1/search/subject", &search).1;
        assert_eq!(json!(ids(&answer)), expected, "{action} 101: {answer}");
    }
}
