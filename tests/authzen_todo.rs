//! The OpenID AuthZEN Todo interop suite (openid/authzen, interop/authzen-todo-backend, vendored in
//! tests/authzen/todo with its commit and licence), evaluated unchanged through a served gateway: every request of
//! the four decision files through `/access/v1/evaluation`, and the batches of the last one through
//! `/access/v1/evaluations`. The policy states the Todo application's rules over roles, emails and owners; the
//! users and the todos' owners are the gateway's data, loaded through the admin API. The suite's own `ownerID`
//! properties come from the caller, whom the policy does not trust for them: they are removed and ignored.

mod support;

use std::path::Path;

use remit_gateway::http::Tokens;
use serde_json::Value;
use support::gateway::{policy, HttpGateway, Options};

const ADMIN: &str = "todo-admin-token";

fn suite() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/authzen/todo"))
}

/// A gateway serving the Todo policy on a free loopback port, with the suite's data loaded, until the test ends.
fn start() -> HttpGateway {
    let source = std::fs::read_to_string(suite().join("todo.remit")).unwrap();
    let program = support::examples::compile(&[("todo.remit".into(), source)]);
    let mut tokens = Tokens::default();
    tokens.admin.insert(ADMIN.into(), "ops".into());
    let served = HttpGateway::start("authzen-todo", policy(&program), Options { tokens, ..Options::default() });
    served.load_data(ADMIN, &std::fs::read(suite().join("data.json")).unwrap());
    served
}

/// Every decision of the four files, evaluated one by one and in the batches the last file has.
#[test]
fn the_todo_interop_suite_passes_with_its_owners_as_gateway_data() {
    let policy = std::fs::read_to_string(suite().join("todo.remit")).unwrap();
    for todo_id in ["7240d0db-8ff0-41ec-98b2-34a096273b91", "240d0db-8ff0-41ec-98b2-34a096273b95"] {
        assert!(!policy.contains(todo_id), "the policy names no todo");
    }
    let served = start();
    let mut files: Vec<_> = std::fs::read_dir(suite())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("decisions"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "the four decision files");
    let (mut single, mut batched) = (0, 0);
    for file in &files {
        let suite: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let cases = suite.get("evaluation").or_else(|| suite.get("decisions")).and_then(Value::as_array).unwrap();
        assert_eq!(cases.len(), 40, "{name}");
        for (i, case) in cases.iter().enumerate() {
            let body = serde_json::to_vec(&case["request"]).unwrap();
            let (status, answer) = served.post_json("/access/v1/evaluation", &body, None);
            assert_eq!(status, 200, "{name} #{i}: {answer}");
            assert_eq!(answer["decision"], case["expected"], "{name} #{i}: {}\n{answer}", case["request"]);
            single += 1;
        }
        for (i, case) in suite.get("evaluations").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let body = serde_json::to_vec(&case["request"]).unwrap();
            let (status, answer) = served.post_json("/access/v1/evaluations", &body, None);
            assert_eq!(status, 200, "{name} batch #{i}: {answer}");
            let decisions: Vec<&Value> =
                answer["evaluations"].as_array().unwrap().iter().map(|e| &e["decision"]).collect();
            let expected: Vec<&Value> = case["expected"].as_array().unwrap().iter().map(|e| &e["decision"]).collect();
            assert_eq!(decisions, expected, "{name} batch #{i}: {}\n{answer}", case["request"]);
            batched += expected.len();
        }
    }
    assert_eq!((single, batched), (160, 6));

    // Beyond the suite: `can_update_todo` declares that it acts on a `todo`, so a todo a caller calls something
    // else is still looked up as a todo (its owner from the data), never as the type the caller names.
    let update = |todo: &str, resource_type: &str| {
        let body = serde_json::json!({"subject": {"type": "user", "id": "morty@the-citadel.com"},
                                      "action": {"name": "can_update_todo"},
                                      "resource": {"type": resource_type, "id": todo}});
        let (status, answer) = served.post_json("/access/v1/evaluation", body.to_string().as_bytes(), None);
        assert_eq!(status, 200, "{answer}");
        answer["decision"].clone()
    };
    let (mortys, ricks) = ("7240d0db-8ff0-41ec-98b2-34a096273b91", "7240d0db-8ff0-41ec-98b2-34a096273b92");
    for resource_type in ["todo", "user", "note"] {
        assert_eq!(update(mortys, resource_type), Value::Bool(true), "an editor's own todo, called a {resource_type}");
        assert_eq!(update(ricks, resource_type), Value::Bool(false), "another's todo, called a {resource_type}");
    }
}
