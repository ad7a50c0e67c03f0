//! AuthZEN 1.0 conformance of `remit serve`'s decision endpoints, on 127.0.0.1 (port 0): required members (`400`),
//! `X-Request-ID`, minimal batch items as the interop suites compare them, `evaluations: []`, paged action search,
//! and the enforcement point's authentication (PEP bearer tokens, a client certificate over mutual TLS). Every
//! server stops by itself at the end of its test; the clock is fixed.

use remit_gateway::client::blocking::{request, Response};
use remit_gateway::http::Tokens;
use remit_gateway::https::ServerTls;
use remit_gateway::Config;
use serde_json::{json, Value};

mod support;
#[path = "support/tls.rs"]
mod tls;

use support::gateway::{HttpGateway, Options};

/// The Todo application of the AuthZEN interop, as remit mandates: Rick may read and update todos, Beth only read.
const TODO: &str = r#"
tool can_read_todos()
tool can_update_todo()
tool can_delete_todo()

mandate rick_todos for "org:citadel" {
  holder "rick@the-citadel.com"
  allow can_read_todos
  allow can_update_todo
}

mandate beth_todos for "org:citadel" {
  holder "beth@the-smiths.com"
  allow can_read_todos
}

mandate pays for "user:alice" {
  holder "agent:payer"
  allow make_payment
  require operation id for make_payment
  budget one_per_op: at most 1 call to make_payment per operation
}
"#;

fn program(source: &str) -> remit_lang::ir::Program {
    let mut sources = remit_lang::stdlib::sources();
    sources.add("todo.remit".to_string(), source.to_string());
    let checked = remit_lang::check::check(sources);
    checked.program.unwrap_or_else(|| panic!("the policy checks: {:?}", checked.diagnostics))
}

/// A gateway on the Todo policy with a fixed clock, served on a free loopback port (over TLS with `tls`) until
/// dropped.
fn start(name: &str, tokens: Tokens, config: Config, tls: Option<ServerTls>) -> HttpGateway {
    let policy = support::gateway::policy(&program(TODO));
    HttpGateway::start(&format!("authzen-{name}"), policy, Options { tokens, config, reloader: None, tls })
}

fn plain(name: &str) -> HttpGateway {
    start(name, Tokens::default(), Config::default(), None)
}

impl HttpGateway {
    fn post(&self, path: &str, body: &Value) -> Response {
        self.post_with(path, body, &[])
    }

    fn post_with(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Response {
        let body = body.to_string();
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        request("POST", &self.url(path), &all, Some(body.as_bytes())).unwrap()
    }

    /// The decisions in the log.
    fn decisions(&self) -> usize {
        let entries = remit_gateway::audit::read_all(self.store.as_ref()).unwrap();
        entries.iter().filter(|e| e.kind == "decision").count()
    }
}

fn todo(subject: &str, action: &str) -> Value {
    json!({"subject": {"type": "user", "id": subject}, "action": {"name": action},
           "resource": {"type": "todo", "id": "todo-1"}})
}

/// A payment of the `pays` mandate in `operation`: allowed once per operation (the budget is an obligation).
fn payment(operation: &str) -> Value {
    json!({"subject": {"type": "agent", "id": "agent:payer"},
           "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "5.00 USD"}},
           "resource": {"type": "order", "id": "order-1"}, "context": {"operation_id": operation}})
}

#[test]
fn a_request_missing_a_required_member_is_a_400_and_decides_nothing() {
    let s = plain("required");
    assert_eq!(
        s.post("/access/v1/evaluation", &todo("rick@the-citadel.com", "can_read_todos")).json()["decision"],
        true
    );
    let before = s.decisions();
    let mut cases: Vec<(Value, &str)> = Vec::new();
    for (pointer, member) in [
        ("/subject/type", "`subject.type`"),
        ("/subject/id", "`subject.id`"),
        ("/resource/type", "`resource.type`"),
        ("/resource/id", "`resource.id`"),
        ("/action/name", "`action.name`"),
    ] {
        let mut body = todo("rick@the-citadel.com", "can_read_todos");
        let (entity, key) = pointer[1..].split_once('/').unwrap();
        body[entity].as_object_mut().unwrap().remove(key);
        cases.push((body, member));
    }
    for entity in ["resource", "action", "subject"] {
        let mut body = todo("rick@the-citadel.com", "can_read_todos");
        body.as_object_mut().unwrap().remove(entity);
        cases.push((body, entity));
    }
    let mut numeric = todo("rick@the-citadel.com", "can_read_todos");
    numeric["resource"]["type"] = json!(7);
    cases.push((numeric, "`resource.type` must be a string"));
    for (body, named) in &cases {
        for path in ["/access/v1/evaluation", "/access/v1/evaluations"] {
            let answer = s.post(path, body);
            assert_eq!(answer.status, 400, "{path} {body}: {}", answer.text());
            let error = answer.json()["error"].clone();
            assert_eq!(error["code"], "authzen.bad-request", "{error}");
            assert!(error["message"].as_str().unwrap().contains(named), "{error} should name {named}");
        }
    }
    // A batch whose second evaluation lacks a member, with the defaults too: refused whole, the first not decided.
    let batch = json!({"subject": {"type": "user", "id": "rick@the-citadel.com"},
                       "resource": {"type": "todo", "id": "todo-1"},
                       "evaluations": [{"action": {"name": "can_read_todos"}}, {"resource": {"id": "todo-2"}}]});
    let answer = s.post("/access/v1/evaluations", &batch);
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.json()["error"]["message"].as_str().unwrap().starts_with("evaluation 1: "), "{}", answer.text());
    // The action search needs a subject and a resource.
    let search =
        s.post("/access/v1/search/action", &json!({"subject": {"type": "user", "id": "rick@the-citadel.com"}}));
    assert_eq!(search.status, 400, "{}", search.text());
    assert_eq!(s.decisions(), before, "a bad request decides (and logs) nothing");
}

#[test]
fn x_request_id_comes_back_on_every_response() {
    let s = start("request-id", Tokens { anonymous_pep: false, ..Tokens::default() }, Config::default(), None);
    let id = [("X-Request-ID", "bfe9eb29-ab87-4ca3-be83-a1d5d8305716")];
    let body = todo("rick@the-citadel.com", "can_read_todos");
    let refused = s.post_with("/access/v1/evaluation", &body, &id);
    assert_eq!(refused.status, 401, "no PEP token");
    assert_eq!(refused.header("x-request-id"), Some(id[0].1));
    let open = plain("request-id-open");
    for (path, body, status) in [
        ("/access/v1/evaluation", body.clone(), 200),
        ("/access/v1/evaluations", json!({"evaluations": [body.clone()]}), 200),
        ("/access/v1/search/action", json!({"subject": body["subject"], "resource": body["resource"]}), 200),
        ("/access/v1/evaluation", json!({"subject": {}}), 400),
        ("/nowhere", json!({}), 404),
    ] {
        let answer = open.post_with(path, &body, &id);
        assert_eq!(answer.status, status, "{path}: {}", answer.text());
        assert_eq!(answer.header("x-request-id"), Some(id[0].1), "{path}");
    }
    let inbox = request("GET", &open.url("/inbox/api/requests"), &id, None).unwrap();
    assert_eq!((inbox.status, inbox.header("x-request-id")), (401, Some(id[0].1)));
    // Without one, none is made up.
    assert_eq!(open.post("/access/v1/evaluation", &body).header("x-request-id"), None);
}

/// The interop suite's Todo batch file, in its shape (`request`, `expected`: the `evaluations` of the answer, which
/// its runner compares with `JSON.stringify`), two cases written for this test.
const TODO_BATCH: &str = r#"{
  "evaluations": [
    {
      "request": {
        "subject": {"type": "user", "id": "rick@the-citadel.com"},
        "resource": {"type": "todo", "id": "7240d0db-8ff0-41ec-98b2-34a096273b9f"},
        "evaluations": [{"action": {"name": "can_read_todos"}}, {"action": {"name": "can_update_todo"}},
                        {"action": {"name": "can_delete_todo"}}]
      },
      "expected": [{"decision": true}, {"decision": true}, {"decision": false}]
    },
    {
      "request": {
        "subject": {"type": "user", "id": "beth@the-smiths.com"},
        "action": {"name": "can_update_todo"},
        "evaluations": [{"resource": {"type": "todo", "id": "todo-1"}},
                        {"action": {"name": "can_read_todos"}, "resource": {"type": "todo", "id": "todo-2"}}]
      },
      "expected": [{"decision": false}, {"decision": true}]
    }
  ]
}"#;

#[test]
fn batch_items_are_the_minimal_decisions_the_interop_runner_compares_when_asked() {
    let suite: Value = serde_json::from_str(TODO_BATCH).unwrap();
    let cases = suite["evaluations"].as_array().unwrap();
    let run = |s: &HttpGateway, options: Option<Value>| -> usize {
        let mut passed = 0;
        for case in cases {
            let mut body = case["request"].clone();
            if let Some(options) = &options {
                body["options"] = options.clone();
            }
            let answer = s.post("/access/v1/evaluations", &body);
            assert_eq!(answer.status, 200, "{}", answer.text());
            // As the runner does: the answer's `evaluations` and the expected ones, as JSON text.
            let got = serde_json::to_string(&answer.json()["evaluations"]).unwrap();
            passed += usize::from(got == serde_json::to_string(&case["expected"]).unwrap());
        }
        passed
    };
    // The operator's default (`--authzen-context minimal`): the suite passes unchanged.
    let minimal = start("minimal", Tokens::default(), Config { authzen_minimal: true, ..Config::default() }, None);
    assert_eq!(run(&minimal, None), 2);
    // A request may still ask for the full context.
    let full = minimal.post(
        "/access/v1/evaluations",
        &json!({"evaluations": [todo("beth@the-smiths.com", "can_update_todo")],
                "options": {"decision_context": "full"}}),
    );
    let item = &full.json()["evaluations"][0];
    assert_eq!(item["context"]["decision"], "deny", "{item}");
    // Full context stays the gateway's default; a request asks for minimal items.
    let s = plain("full");
    assert_eq!(run(&s, None), 0, "full items carry remit's decision as context");
    assert_eq!(run(&s, Some(json!({"decision_context": "minimal"}))), 2);
    let single = s.post("/access/v1/evaluation", &todo("rick@the-citadel.com", "can_read_todos")).json();
    assert_eq!(single["context"]["decision"], "allow", "{single}");
    let mut asked = todo("rick@the-citadel.com", "can_read_todos");
    asked["options"] = json!({"decision_context": "minimal"});
    assert_eq!(s.post("/access/v1/evaluation", &asked).text(), r#"{"decision":true}"#);
    asked["options"] = json!({"decision_context": "short"});
    assert_eq!(s.post("/access/v1/evaluation", &asked).status, 400);
}

#[test]
fn an_empty_evaluations_array_is_one_evaluation_of_the_defaults_carried_out_once() {
    let s = plain("empty-batch");
    let mut batch = payment("op-1");
    batch["evaluations"] = json!([]);
    let answer = s.post("/access/v1/evaluations", &batch);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answer = answer.json();
    assert_eq!(answer["decision"], true, "answered as one evaluation: {answer}");
    assert!(answer.get("evaluations").is_none(), "{answer}");
    assert_eq!(s.decisions(), 1);
    // Its obligation (the per-operation budget) was carried out exactly once: the operation's next payment is over it.
    let again = s.post("/access/v1/evaluation", &payment("op-1")).json();
    assert_eq!(again["context"]["reasons"], json!(["budget.exhausted"]), "{again}");
    // Without defaults there is nothing to evaluate: a 400, and nothing decided or logged.
    let empty = s.post("/access/v1/evaluations", &json!({"evaluations": []}));
    assert_eq!(empty.status, 400, "{}", empty.text());
    assert_eq!(s.decisions(), 2);
}

#[test]
fn the_action_search_pages_through_its_results_with_limit_and_next_token() {
    let s = plain("paging");
    let query = json!({"subject": {"type": "user", "id": "rick@the-citadel.com"},
                       "resource": {"type": "todo", "id": "todo-1"}});
    let names = |answer: &Value| -> Vec<String> {
        answer["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
    };
    let unpaged = s.post("/access/v1/search/action", &query).json();
    let all = names(&unpaged);
    assert!(all.len() >= 2, "{unpaged}");
    assert!(all.contains(&"can_update_todo".to_string()) && !all.contains(&"can_delete_todo".to_string()), "{all:?}");
    assert_eq!(unpaged["page"]["next_token"], "");
    for limit in [1, 2] {
        let mut seen = Vec::new();
        let mut body = query.clone();
        body["page"] = json!({"limit": limit});
        loop {
            let answer = s.post("/access/v1/search/action", &body);
            assert_eq!(answer.status, 200, "{}", answer.text());
            let answer = answer.json();
            let page = names(&answer);
            assert!(page.len() <= limit && !page.is_empty(), "{answer}");
            assert_eq!(answer["page"]["count"], page.len());
            assert_eq!(answer["page"]["total"], all.len());
            seen.extend(page);
            let next = answer["page"]["next_token"].as_str().unwrap().to_string();
            if next.is_empty() {
                break;
            }
            // A token works only for the query that gave it: another subject or limit is refused.
            let mut other = body.clone();
            other["subject"]["id"] = json!("beth@the-smiths.com");
            other["page"]["token"] = json!(next);
            assert_eq!(s.post("/access/v1/search/action", &other).status, 400);
            other = body.clone();
            other["page"] = json!({"limit": limit + 1, "token": next});
            assert_eq!(s.post("/access/v1/search/action", &other).status, 400);
            body["page"]["token"] = json!(next);
        }
        assert_eq!(seen, all, "limit {limit}");
    }
    for page in [json!({"token": "not-a-token"}), json!({"limit": 0}), json!({"limit": "2"}), json!({"token": 3})] {
        let mut body = query.clone();
        body["page"] = page.clone();
        let answer = s.post("/access/v1/search/action", &body);
        assert_eq!(answer.status, 400, "{page}: {}", answer.text());
        assert_eq!(answer.json()["error"]["code"], "search.bad-page");
    }
}

#[test]
fn decision_endpoints_answer_only_known_enforcement_points_unless_anonymous_is_allowed() {
    let mut tokens = Tokens { anonymous_pep: false, ..Tokens::default() };
    tokens.pep.insert("pep-token-of-the-todo-backend".into(), "todo-backend".into());
    tokens.admin.insert("admin-token-of-ops".into(), "ops".into());
    let s = start("pep", tokens.clone(), Config::default(), None);
    let body = todo("rick@the-citadel.com", "can_read_todos");
    let search = json!({"subject": body["subject"], "resource": body["resource"]});
    let native = json!({"subject": {"id": "rick@the-citadel.com"}, "action": {"name": "can_read_todos"}});
    let calls = [
        ("/access/v1/evaluation", body.clone()),
        ("/access/v1/evaluations", json!({"evaluations": [body.clone()]})),
        ("/access/v1/search/action", search),
        (
            "/access/v1/search/resource",
            json!({"subject": body["subject"], "action": body["action"],
                                              "resource": {"type": "todo"}}),
        ),
        (
            "/access/v1/search/subject",
            json!({"subject": {"type": "user"}, "action": body["action"],
                                             "resource": body["resource"]}),
        ),
        ("/v1/decide", native),
    ];
    for (path, body) in &calls {
        let anonymous = s.post(path, body);
        assert_eq!(anonymous.status, 401, "{path}: {}", anonymous.text());
        assert_eq!(anonymous.json()["error"]["code"], "auth.pep-required");
        assert_eq!(anonymous.header("www-authenticate"), Some("Bearer realm=\"remit\""));
        // Another API's token is no PEP token.
        let admin = s.post_with(path, body, &[("Authorization", "Bearer admin-token-of-ops")]);
        assert_eq!(admin.status, 401, "{path}");
        let known = s.post_with(path, body, &[("Authorization", "Bearer pep-token-of-the-todo-backend")]);
        assert_eq!(known.status, 200, "{path}: {}", known.text());
    }
    assert_eq!(s.decisions(), 3, "only the authenticated calls were decided (the searches log nothing)");
    // Discovery stays open.
    let discovery = request("GET", &s.url("/.well-known/authzen-configuration"), &[], None).unwrap();
    assert_eq!(discovery.status, 200);
    // The operator may keep anonymous access beside the tokens.
    let open = start("pep-open", Tokens { anonymous_pep: true, ..tokens }, Config::default(), None);
    assert_eq!(open.post("/access/v1/evaluation", &body).status, 200);
}

#[test]
fn a_client_certificate_from_the_client_ca_authenticates_an_enforcement_point_over_mutual_tls() {
    let ca = tls::TestCa::new("remit test CA");
    let pep_ca = tls::TestCa::new("remit test PEP CA");
    let stranger_ca = tls::TestCa::new("someone else's CA");
    let dir = std::env::temp_dir().join(format!("remit-authzen-mtls-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = ca.server_files(&["127.0.0.1"], &dir);
    let client_ca = pep_ca.write(&dir.join("pep-ca.pem"));
    let server_tls = ServerTls::from_files_with_clients(
        std::path::Path::new(&cert),
        std::path::Path::new(&key),
        Some(std::path::Path::new(&client_ca)),
    )
    .unwrap();
    let s = start("mtls", Tokens { anonymous_pep: false, ..Tokens::default() }, Config::default(), Some(server_tls));
    let body = todo("rick@the-citadel.com", "can_read_todos").to_string();
    let call = |identity: Option<&tls::TestCa>| ca.https_post(s.address, "/access/v1/evaluation", &body, identity);
    let (status, answer) = call(Some(&pep_ca)).expect("the PEP's certificate is accepted");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["decision"], true);
    // Without a certificate the connection is made (browsers reach the inbox), and the decision is refused.
    let (status, answer) = call(None).expect("a client without a certificate connects");
    assert_eq!(status, 401, "{answer}");
    // A certificate from another CA ends the handshake.
    assert!(call(Some(&stranger_ca)).is_err(), "a certificate the client CA did not issue is refused");
    std::fs::remove_dir_all(&dir).ok();
}
