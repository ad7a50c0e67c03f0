//! The gateway over HTTP on 127.0.0.1 (port 0): AuthZEN 1.0, the native API, bad input, operations endpoints, the
//! inbox and admin APIs with their tokens, the wallet end to end, and `remit serve` / `remit approvals` / `remit
//! admin` / `remit audit` as commands. Every server stops by itself at the end of its test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use remit_gateway::client::blocking::{request, Response};
use remit_gateway::http::{Reloader, Tokens};
use remit_gateway::{Durability, Policy, PolicyMeta, SqliteStore};
use remit_host::Runtime;
use remit_lang::check::check;
use serde_json::{json, Value};

mod support;
#[path = "support/tls.rs"]
mod tls;

use support::gateway::{HttpGateway, Options};
use support::served::Served;

const ALICE: &str = "alice-inbox-token";
const BOB: &str = "bob-inbox-token";
const AGENT: &str = "agent-pretends-to-be-inbox";
const ADMIN: &str = "ops-admin-token";

fn wallet() -> remit_lang::ir::Program {
    wallet_and(&[])
}

/// The wallet with extra files (another policy version).
fn wallet_and(extra: &[(&str, &str)]) -> remit_lang::ir::Program {
    let dir = support::examples::static_wallet();
    let mut sources = remit_lang::stdlib::sources();
    for (name, text) in extra {
        sources.add(name.to_string(), text.to_string());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "remit")) {
        sources.add(path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(path).unwrap());
    }
    check(sources).program.unwrap()
}

/// A fresh folder for a test named `name`, with `source` as its policy (`policy/shop.remit`).
fn policy_dir(name: &str, source: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-gateway-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    std::fs::write(dir.join("policy/shop.remit"), source).unwrap();
    dir
}

/// A gateway on the wallet with a fixed clock (and the program, so that it explains decisions), served on a free
/// loopback port with Alice's, Bob's and an agent's inbox tokens and an admin token, until dropped.
fn start(name: &str) -> HttpGateway {
    start_with(name, None)
}

fn start_with(name: &str, reloader: Option<Reloader>) -> HttpGateway {
    let program = wallet();
    let policy = support::gateway::policy(&program).with_program(Arc::new(program)).unwrap();
    let mut tokens = Tokens::default();
    tokens.inbox.insert(ALICE.into(), "user:alice".into());
    tokens.inbox.insert(BOB.into(), "user:bob".into());
    tokens.inbox.insert(AGENT.into(), "agent:shopper".into());
    tokens.admin.insert(ADMIN.into(), "ops".into());
    HttpGateway::start(&format!("gateway-http-{name}"), policy, Options { tokens, reloader, ..Options::default() })
}

impl HttpGateway {
    fn post(&self, path: &str, body: &Value) -> Response {
        self.call("POST", path, None, Some(body.to_string().as_bytes()))
    }
}

/// An AuthZEN evaluation of a wallet payment.
fn payment(amount: &str, operation: &str) -> Value {
    json!({
        "subject": {"type": "agent", "id": "agent:shopper",
                    "properties": {"credential": {"id": "cred-7", "scopes": ["wallet.all"]}}},
        "action": {"name": "make_payment", "properties": {"merchant": "acme-grocer", "amount": amount}},
        "resource": {"type": "order", "id": "order:991"},
        "context": {"operation_id": operation}
    })
}

/// HTTP callers (under concurrency their decisions are awaited, and the committer thread runs the batches) and
/// in-process callers (blocking, leading batches themselves and handing the lead on) share one group commit: 24
/// calls at once of one payment operation, whose budget is one payment, are allowed exactly once; every call is
/// answered and logged, and the log verifies.
#[test]
fn http_and_in_process_callers_share_the_group_commit_and_its_promises() {
    let s = start("shared-commit");
    let native = |operation: &str| {
        let authzen = payment("20.00 USD", operation);
        serde_json::to_vec(&remit_gateway::http::remit_request(authzen.as_object().unwrap())).unwrap()
    };
    assert!(s.gateway.decide(&native("op-alone")).allowed(), "an in-process call alone is allowed");
    for round in 0..5 {
        let operation = format!("op-shared-{round}");
        let (authzen, native) = (payment("20.00 USD", &operation), native(&operation));
        let allows: usize = std::thread::scope(|scope| {
            let http: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| s.post("/access/v1/evaluation", &authzen).json()["decision"] == true))
                .collect();
            let core: Vec<_> = (0..8).map(|_| scope.spawn(|| s.gateway.decide(&native).allowed())).collect();
            http.into_iter().chain(core).map(|h| usize::from(h.join().unwrap())).sum()
        });
        assert_eq!(allows, 1, "round {round}: one payment per operation");
    }
    let entries = remit_gateway::audit::read_all(s.store.as_ref()).unwrap();
    assert_eq!(entries.iter().filter(|e| e.kind == "decision").count(), 1 + 5 * 24, "every call logged");
    remit_gateway::audit::verify(entries).unwrap();
}

#[test]
fn authzen_evaluation_answers_allow_deny_and_escalate_with_remit_context() {
    let s = start("evaluation");
    let allowed = s.post("/access/v1/evaluation", &payment("20.00 USD", "op-1"));
    assert_eq!(allowed.status, 200);
    let body = allowed.json();
    assert_eq!(body["decision"], true, "{body}");
    assert_eq!(body["context"]["decision"], "allow");
    assert_eq!(body["context"]["mandate_chain"], json!(["wallet"]), "the subject's one mandate");
    assert!(body["context"]["decision_id"].as_str().unwrap().starts_with("dec-"));
    let escalated = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-2")).json();
    assert_eq!(escalated["decision"], false);
    assert_eq!(escalated["context"]["decision"], "escalate");
    let access = &escalated["context"]["access_request"];
    assert!(access["url"].as_str().unwrap().starts_with(&s.url("/inbox/ar-")), "{access}");
    assert_eq!(access["expires_at"], "2026-12-04T15:30:00Z");
    // The AuthZEN interop shapes work unchanged: an unknown action is a plain `false`.
    let interop = json!({"subject": {"type": "user", "id": "alice@acmecorp.com"},
                         "action": {"name": "can_read_user"},
                         "resource": {"type": "user", "id": "rick@the-citadel.com"}});
    let answer = s.post("/access/v1/evaluation", &interop);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["decision"], false);
    // The subject holds no mandate, so none is filled in: the module's deny.
    assert_eq!(answer.json()["context"]["reasons"], json!(["request.missing-field"]));
}

#[test]
fn authzen_evaluations_follow_the_three_semantics_and_merge_defaults() {
    let s = start("evaluations");
    let batch = |semantic: &str| {
        let mut defaults = payment("20.00 USD", "op-x");
        defaults["evaluations"] = json!([
            {"context": {"operation_id": format!("{semantic}-a")}},
            {"action": {"name": "export_purchase_history", "properties": {"destination": "x"}}},
            {"context": {"operation_id": format!("{semantic}-b")}}
        ]);
        defaults["options"] = json!({"evaluations_semantic": semantic});
        let answer = s.post("/access/v1/evaluations", &defaults);
        assert_eq!(answer.status, 200, "{}", answer.text());
        let list = answer.json()["evaluations"].as_array().unwrap().clone();
        list.iter().map(|e| e["decision"].as_bool().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(batch("execute_all"), [true, false, true]);
    assert_eq!(batch("deny_on_first_deny"), [true, false]);
    assert_eq!(batch("permit_on_first_permit"), [true]);
    // Without `evaluations` the request is one evaluation.
    let single = s.post("/access/v1/evaluations", &payment("20.00 USD", "op-single")).json();
    assert_eq!(single["decision"], true);
    let bad = s.post("/access/v1/evaluations", &json!({"evaluations": [], "options": {"evaluations_semantic": "x"}}));
    assert_eq!(bad.status, 400);
}

#[test]
fn the_native_api_returns_remit_decisions_unchanged() {
    let s = start("native");
    let request_json = json!({
        "subject": {"id": "agent:shopper", "credential": {"id": "c", "scopes": ["orders.read"]}},
        "action": {"name": "view_orders", "arguments": {"merchant": "acme-grocer"}},
        "context": {"mandate": "wallet"}
    });
    let answer = s.post("/v1/decide", &request_json);
    assert_eq!(answer.status, 200);
    let text = answer.text();
    assert!(text.starts_with("{\"decision\":\"allow\",\"reasons\":[\"rule.allowed\"]"), "{text}");
    assert!(answer.header("remit-decision-id").unwrap().starts_with("dec-"));
    // Malformed request JSON is the module's deny, as everywhere else.
    let garbage = request("POST", &s.url("/v1/decide"), &[], Some(b"{\"subject\":")).unwrap();
    assert_eq!(garbage.status, 200);
    assert_eq!(garbage.json()["reasons"], json!(["request.malformed"]));
}

#[test]
fn bad_input_is_a_json_400_and_oversize_a_413() {
    let s = start("bad-input");
    for body in [&b"{\"subject\":"[..], b"[1, 2]", b"{\"a\": 1, \"a\": 2}", b"\xff"] {
        let answer = request("POST", &s.url("/access/v1/evaluation"), &[], Some(body)).unwrap();
        assert_eq!(answer.status, 400, "{:?}", String::from_utf8_lossy(body));
        assert_eq!(answer.json()["error"]["code"], "http.bad-json");
    }
    let big = vec![b' '; 300_000];
    let answer = request("POST", &s.url("/access/v1/evaluation"), &[], Some(&big)).unwrap();
    assert_eq!(answer.status, 413);
    let answer = request("POST", &s.url("/v1/decide"), &[], Some(&big)).unwrap();
    assert_eq!(answer.status, 413);
    let answer = s.call("GET", "/nope", None, None);
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json()["error"]["code"], "http.not-found");
}

#[test]
fn discovery_search_health_ready_and_metrics() {
    let s = start("ops");
    let config = s.call("GET", "/.well-known/authzen-configuration", None, None).json();
    assert_eq!(config["access_evaluation_endpoint"], s.url("/access/v1/evaluation"));
    assert_eq!(config["search_action_endpoint"], s.url("/access/v1/search/action"));
    let search = s.post(
        "/access/v1/search/action",
        &json!({"subject": {"type": "agent", "id": "agent:shopper",
                            "properties": {"credential": {"id": "c", "scopes": ["wallet.all"]}}},
                "resource": {"type": "wallet", "id": "wallet:alice"}}),
    );
    assert_eq!(search.status, 200, "{}", search.text());
    let names: Vec<String> =
        search.json()["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
    assert!(names.contains(&"make_payment".to_string()), "{names:?}");
    assert!(!names.contains(&"export_purchase_history".to_string()), "{names:?}");
    assert_eq!(s.call("GET", "/health", None, None).status, 200);
    assert_eq!(s.call("GET", "/ready", None, None).json()["status"], "ready");
    s.post("/access/v1/evaluation", &payment("20.00 USD", "op-1"));
    s.post("/access/v1/evaluation", &payment("20.00 USD", "op-1"));
    let metrics = s.call("GET", "/metrics", None, None).text();
    assert!(metrics.contains("remit_decisions_total{outcome=\"allow\"} 1"), "{metrics}");
    assert!(metrics.contains("remit_decision_reasons_total{reason=\"budget.exhausted\"} 1"), "{metrics}");
    assert!(metrics.contains("remit_decision_seconds_count 2"), "{metrics}");
    // The log lag: both decisions were logged (in committed transactions), none waits.
    assert!(metrics.contains("remit_log_lag_seconds_count 2"), "{metrics}");
    // A store in the process sends no statements to a server.
    assert!(!metrics.contains("remit_store_round_trips_total"), "{metrics}");
    assert!(metrics.contains("remit_log_lag_seconds_bucket{le=\"+Inf\"} 2"), "{metrics}");
    assert!(metrics.contains("remit_log_pending 0"), "{metrics}");
}

#[test]
fn the_inbox_and_admin_apis_need_their_own_tokens() {
    let s = start("auth");
    let escalated = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json();
    let id = escalated["context"]["access_request"]["id"].as_str().unwrap().to_string();
    let approve = format!("/inbox/api/requests/{id}/approve");
    assert_eq!(s.call("GET", "/inbox/api/requests", None, None).status, 401);
    assert_eq!(s.call("POST", &approve, None, None).status, 401);
    assert_eq!(s.call("POST", &approve, Some("not-a-token"), None).status, 403);
    assert_eq!(s.call("POST", &approve, Some(ADMIN), None).status, 403, "an admin token is not an inbox token");
    assert_eq!(s.call("POST", &approve, Some(AGENT), None).status, 403, "an agent never approves");
    assert_eq!(s.call("POST", &approve, Some(BOB), None).status, 403, "not bob's request");
    assert_eq!(s.call("GET", "/inbox/api/requests", Some(BOB), None).json()["requests"], json!([]));
    assert_eq!(s.call("PUT", "/admin/v1/stops/wallet", None, None).status, 401);
    assert_eq!(s.call("PUT", "/admin/v1/stops/wallet", Some(ALICE), None).status, 403);
    // Stops and facts through the admin API take effect on the next decision.
    assert_eq!(s.call("PUT", "/admin/v1/stops/wallet", Some(ADMIN), None).status, 200);
    let stopped = s.post("/access/v1/evaluation", &payment("20.00 USD", "op-2")).json();
    assert_eq!(stopped["context"]["reasons"], json!(["stop.active"]));
    assert_eq!(s.call("DELETE", "/admin/v1/stops/wallet", Some(ADMIN), None).status, 200);
    assert_eq!(s.post("/access/v1/evaluation", &payment("20.00 USD", "op-3")).json()["decision"], true);
    assert_eq!(s.call("PUT", "/admin/v1/stops/nope", Some(ADMIN), None).status, 404);
    // Stops with ids: a quarantine of the principal refuses reads too, and the decision names it.
    let admin = [("Authorization", format!("Bearer {ADMIN}"))];
    let admin: Vec<(&str, &str)> = admin.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let quarantine = br#"{"level": "quarantine", "principal": "user:alice"}"#;
    let put = |path: &str, body: &[u8], headers: &[(&str, &str)]| {
        request("PUT", &s.url(path), headers, Some(body)).unwrap().status
    };
    assert_eq!(put("/admin/v1/stop-ids/STOP-ALICE-7", quarantine, &[]), 401);
    // The scheme's name in any case (HTTP's authentication schemes are case-insensitive); another scheme is no token.
    let lower = format!("bearer {ADMIN}");
    assert_eq!(put("/admin/v1/stop-ids/STOP-ALICE-6", quarantine, &[("Authorization", &lower)]), 200);
    let basic = format!("Basic {ADMIN}");
    assert_eq!(put("/admin/v1/stop-ids/STOP-ALICE-6", quarantine, &[("Authorization", &basic)]), 401);
    let cleared = request("DELETE", &s.url("/admin/v1/stop-ids/STOP-ALICE-6"), &[("Authorization", &lower)], None);
    assert_eq!(cleared.unwrap().status, 200);
    assert_eq!(put("/admin/v1/stop-ids/STOP-ALICE-7", quarantine, &admin), 200);
    let read = json!({"subject": {"id": "agent:shopper", "credential": {"id": "cred-7", "scopes": ["wallet.all"]}},
                      "action": {"name": "view_orders", "arguments": {"merchant": "acme-grocer"}}});
    let refused = s.post("/v1/decide", &read).json();
    assert_eq!(refused["reasons"], json!(["stop.active"]), "{refused}");
    assert_eq!(refused["rules"][0]["rule"], "stop STOP-ALICE-7 (quarantine)");
    let state = s.call("GET", "/admin/v1/state", Some(ADMIN), None).json();
    assert_eq!(state["stops_by_id"][0]["principal"], "user:alice", "{state}");
    assert_eq!(s.call("DELETE", "/admin/v1/stop-ids/STOP-ALICE-7", Some(ADMIN), None).status, 200);
    assert_eq!(s.call("DELETE", "/admin/v1/stop-ids/STOP-ALICE-7", Some(ADMIN), None).status, 404);
    assert_eq!(s.post("/v1/decide", &read).json()["decision"], "allow");
    assert_eq!(put("/admin/v1/stop-ids/S", br#"{"level": "halt", "mandate": "wallet"}"#, &admin), 422);
    assert_eq!(put("/admin/v1/stop-ids/S", br#"{"level": "pause", "principal": "user:nobody"}"#, &admin), 404);
    assert_eq!(put("/admin/v1/stop-ids/S", br#"{"mandate": "wallet"}"#, &admin), 400);
    // The wallet reads no fact: a version published for one would be ignored, so it is refused (tests/gateway_tokens.rs
    // publishes the facts a policy reads).
    let fact = request(
        "PUT",
        &s.url("/admin/v1/facts/price_sheet"),
        &[("Authorization", &format!("Bearer {ADMIN}"))],
        Some(br#"{"version": 4}"#),
    )
    .unwrap();
    assert_eq!(fact.status, 404, "{}", fact.text());
    assert_eq!(s.call("GET", "/admin/v1/state", Some(ADMIN), None).json()["facts"], json!({}));
    // A version's shape is checked first: digits alone in a string, blank or negative are refused.
    let publish = |body: &[u8]| {
        let auth = format!("Bearer {ADMIN}");
        request("PUT", &s.url("/admin/v1/facts/pricing_cpi"), &[("Authorization", &auth)], Some(body)).unwrap()
    };
    for refused in [&br#"{"version": "12"}"#[..], br#"{"version": "  "}"#, br#"{"version": -1}"#] {
        assert_eq!(publish(refused).status, 400, "{}", String::from_utf8_lossy(refused));
    }
}

#[test]
fn wallet_end_to_end_escalate_approve_retry_consume_escalate_again() {
    let s = start("e2e");
    let first = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json();
    assert_eq!(first["decision"], false);
    let id = first["context"]["access_request"]["id"].as_str().unwrap().to_string();
    let inbox = s.call("GET", "/inbox/api/requests", Some(ALICE), None).json();
    let waiting = &inbox["requests"][0];
    assert_eq!(waiting["id"], id.as_str());
    assert_eq!(waiting["status"], "pending");
    assert_eq!(waiting["tool"], "make_payment");
    assert_eq!(waiting["target"], "order:991");
    assert_eq!(waiting["agent"], "agent:shopper");
    assert_eq!(waiting["credential"], "cred-7");
    assert_eq!(waiting["missing_approvals"][0]["kind"], "commercial_terms");
    assert_eq!(waiting["reasons"], json!(["approval.missing"]));
    // The page itself is served.
    let page = s.call("GET", &format!("/inbox/{id}"), None, None);
    assert_eq!(page.status, 200);
    assert!(page.text().contains("remit — access requests"));
    let approved = s.call("POST", &format!("/inbox/api/requests/{id}/approve"), Some(ALICE), None);
    assert_eq!(approved.status, 200, "{}", approved.text());
    assert_eq!(approved.json()["approvals"][0]["approver"], "user:alice");
    assert_eq!(s.call("POST", &format!("/inbox/api/requests/{id}/approve"), Some(ALICE), None).status, 409);
    // A changed argument is another call.
    assert_eq!(s.post("/access/v1/evaluation", &payment("80.01 USD", "op-1")).json()["decision"], false);
    let retry = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json();
    assert_eq!(retry["decision"], true, "{retry}");
    assert!(retry["context"]["obligations"].as_array().unwrap().iter().any(|o| o["kind"] == "consume-approval"));
    // Consumed: the same call in a new operation escalates again (in the same operation the budget denies).
    let again = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-2")).json();
    assert_eq!(again["decision"], false);
    assert_eq!(again["context"]["decision"], "escalate");
    let entries = s.store_log();
    // Four decisions and one approval.
    assert_eq!(remit_gateway::audit::verify(entries).unwrap(), 5);
}

/// The inbox links an escalated request to its explanation: the logged request re-decided on the policy's
/// sources, drawn as the path it took, as HTML (escaped, no scripts) or text, only for the request's principal.
#[test]
fn the_inbox_explains_an_escalated_request_from_its_log_entry() {
    let s = start("explain");
    let escalated = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json();
    let id = escalated["context"]["access_request"]["id"].as_str().unwrap().to_string();
    let path = format!("/inbox/api/requests/{id}/explanation");
    assert_eq!(s.call("GET", &path, None, None).status, 401);
    assert_eq!(s.call("GET", &path, Some(ADMIN), None).status, 403, "an admin token is not an inbox token");
    assert_eq!(s.call("GET", &path, Some(BOB), None).status, 404, "not bob's request");
    assert_eq!(s.call("GET", "/inbox/api/requests/ar-nope/explanation", Some(ALICE), None).status, 404);
    assert_eq!(s.call("GET", "/inbox/api/requests", Some(ALICE), None).json()["explanations"], true);
    let page = s.call("GET", &path, Some(ALICE), None);
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.header("content-security-policy").unwrap().contains("default-src 'none'"));
    let html = page.text();
    assert!(html.contains(r#"<span class="outcome escalate" id="outcome">escalate to user:alice</span>"#), "{html}");
    // The gate that escalated, with the request's value and the approval it lacked.
    let gate = r#"<div class="step escalated decided"><span class="mark">?</span> <span class="rule">require approval commercial_terms for make_payment where args.amount &gt; 60 USD</span>"#;
    assert!(html.contains(gate), "{html}");
    assert!(html.contains("no `commercial_terms` approval was presented"), "{html}");
    assert!(html.contains("args.amount = &quot;80.00 USD&quot;"), "{html}");
    assert!(html.contains(r#"<li class="missing">commercial_terms under wallet"#), "{html}");
    // The grant that matched, and the entry it was read from.
    assert!(html.contains(r#"<div class="step passed"><span class="mark">✓</span> <span class="rule">allow make_payment where args.merchant in"#), "{html}");
    assert!(html.contains(&format!("access request {id} · decision dec-")), "{html}");
    let decision_id = escalated["context"]["decision_id"].as_str().unwrap();
    assert!(html.contains(decision_id), "{html}");
    // The time and state the gateway filled in, not the caller's.
    assert!(html.contains("at 2026-12-03T15:30:00Z"), "{html}");
    let auth = format!("Bearer {ALICE}");
    let text = request("GET", &s.url(&path), &[("Authorization", &auth), ("Accept", "text/plain")], None).unwrap();
    assert!(text.header("content-type").unwrap().starts_with("text/plain"));
    assert!(text.text().contains("? require approval commercial_terms for make_payment"), "{}", text.text());
    // Request strings are escaped: a merchant outside the list escalates (`otherwise escalate`) with its name.
    let mut hostile = payment("10.00 USD", "op-2");
    hostile["action"]["properties"]["merchant"] = json!("<script>alert(1)</script>");
    hostile["resource"]["id"] = json!("<img src=x onerror=alert(2)>");
    let other = s.post("/access/v1/evaluation", &hostile).json();
    assert_eq!(other["context"]["decision"], "escalate", "{other}");
    let other_id = other["context"]["access_request"]["id"].as_str().unwrap();
    let page = s.call("GET", &format!("/inbox/api/requests/{other_id}/explanation"), Some(ALICE), None).text();
    assert!(!page.contains("<script") && !page.contains("<img"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && page.contains("&lt;img src=x"), "{page}");
    // Approved and consumed, the request still explains the decision that filed it.
    assert_eq!(s.call("POST", &format!("/inbox/api/requests/{id}/approve"), Some(ALICE), None).status, 200);
    assert_eq!(s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json()["decision"], true);
    assert_eq!(s.call("GET", &path, Some(ALICE), None).status, 200);
    // An entry whose hash no longer holds is not explained.
    let seq =
        s.call("GET", &format!("/inbox/api/requests/{id}"), Some(ALICE), None).json()["log_seq"].as_u64().unwrap();
    s.store
        .execute_raw(&format!("UPDATE log SET body = replace(body, '80.00 USD', '8.00 USD') WHERE seq = {seq}"))
        .unwrap();
    let changed = s.call("GET", &path, Some(ALICE), None);
    assert_eq!(changed.status, 409, "{}", changed.text());
    assert!(changed.json()["error"]["message"].as_str().unwrap().contains("was changed"), "{}", changed.text());
    // The page that shows it is served like the inbox page (it holds no data: it fetches with the token).
    let shell = s.call("GET", &format!("/inbox/{id}/explanation"), None, None);
    assert_eq!(shell.status, 200);
    assert!(shell.text().contains(r#"sandbox="""#));
}

impl HttpGateway {
    fn store_log(&self) -> Vec<remit_gateway::store::LogEntry> {
        use remit_gateway::Store;
        self.store.begin().unwrap().log_entries(1, 1 << 30).unwrap()
    }
}

// ---- the commands ----

fn remit_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_remit"))
}

fn serve_process(policy: &Path, store: &Path) -> Served {
    serve_process_with(policy, store, &[])
}

/// `remit serve` on a free port with Alice's inbox token, an admin token and `--watch`.
fn serve_process_with(policy: &Path, store: &Path, extra: &[&str]) -> Served {
    Served::start(
        remit_bin()
            .args(["serve", policy.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(extra)
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .args([
                "--inbox-token",
                &format!("user:alice={ALICE}"),
                "--admin-token",
                &format!("ops={ADMIN}"),
                "--watch",
            ])
            .stderr(Stdio::inherit()),
    )
}

/// A policy without a validity window, so the command tests hold on any date.
const SHOP: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require approval commercial_terms for make_payment where args.amount > 60 USD
  require operation id for make_payment
}
"#;

#[test]
fn remit_serve_approvals_admin_and_a_graceful_stop() {
    let dir = policy_dir("cli", SHOP);
    // A built module serves like its sources.
    let wasm = dir.join("shop.wasm");
    let built =
        remit_bin().args(["build", dir.join("policy").to_str().unwrap(), "-o", wasm.to_str().unwrap()]).output();
    assert!(built.unwrap().status.success());
    let store = dir.join("state.db");
    let server = serve_process(&wasm, &store);
    let call = json!({"subject": {"type": "agent", "id": "agent:shopper"},
                      "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "80.00 USD"}},
                      "resource": {"type": "order", "id": "o-1"}, "context": {"operation_id": "op-1"}});
    let post = |body: &Value| {
        let text = body.to_string();
        request("POST", &format!("{}/access/v1/evaluation", server.url), &[], Some(text.as_bytes())).unwrap().json()
    };
    let escalated = post(&call);
    let id = escalated["context"]["access_request"]["id"].as_str().unwrap().to_string();
    let cli = |args: &[&str], token: &str| {
        let out = remit_bin().args(args).args(["--gateway", &server.url, "--token", token]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, listed, _) = cli(&["approvals", "list"], ALICE);
    assert!(ok && listed.contains(&id) && listed.contains("commercial_terms"), "{listed}");
    // A bare module has no sources: the inbox says an explanation needs them instead of linking to one.
    let alice = format!("Bearer {ALICE}");
    let get =
        |path: &str| request("GET", &format!("{}{path}", server.url), &[("Authorization", &alice)], None).unwrap();
    assert_eq!(get("/inbox/api/requests").json()["explanations"], false);
    let unavailable = get(&format!("/inbox/api/requests/{id}/explanation"));
    assert_eq!(unavailable.status, 501, "{}", unavailable.text());
    assert_eq!(unavailable.json()["error"]["code"], "explain.unavailable");
    assert!(unavailable.json()["error"]["message"].as_str().unwrap().contains("needs them"), "{}", unavailable.text());
    let (ok, _, err) = cli(&["approvals", "explain", &id], ALICE);
    assert!(!ok && err.contains("501") && err.contains("needs them"), "{err}");
    let (ok, _, err) = cli(&["approvals", "approve", &id], ADMIN);
    assert!(!ok && err.contains("403"), "{err}");
    let (ok, out, err) = cli(&["approvals", "approve", &id], ALICE);
    assert!(ok, "{err}");
    assert!(out.contains("minted approval apr-"), "{out}");
    let allowed = post(&call);
    assert_eq!(allowed["decision"], true);
    let allowed_id = allowed["context"]["decision_id"].as_str().unwrap().to_string();
    let (ok, _, err) = cli(&["admin", "stop", "shop"], ADMIN);
    assert!(ok, "{err}");
    let small = json!({"subject": {"type": "agent", "id": "agent:shopper"},
                       "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "5.00 USD"}},
                       "resource": {"type": "order", "id": "o-2"}, "context": {"operation_id": "op-2"}});
    assert_eq!(post(&small)["context"]["reasons"], json!(["stop.active"]));
    let (ok, _, _) = cli(&["admin", "unstop", "shop"], ADMIN);
    assert!(ok);
    assert_eq!(post(&small)["decision"], true);
    // A stop with an id on the principal, and its clearing.
    let (ok, out, err) =
        cli(&["admin", "stop", "--principal", "user:alice", "--id", "STOP-SHOP-1", "--level", "pause"], ADMIN);
    assert!(ok && out.contains("STOP-SHOP-1"), "{out}{err}");
    assert_eq!(post(&small)["context"]["reasons"], json!(["stop.active"]));
    let (ok, _, err) = cli(&["admin", "unstop", "--id", "STOP-SHOP-1"], ADMIN);
    assert!(ok, "{err}");
    assert_eq!(post(&small)["decision"], true);
    // `--watch`: a rebuilt module is swapped in without a restart.
    let ready = || request("GET", &format!("{}/ready", server.url), &[], None).unwrap().json()["policy"].clone();
    let before = ready();
    std::fs::write(dir.join("policy/note.remit"), "// version B\n").unwrap();
    let mut rebuilt = remit_bin();
    rebuilt.args(["build", dir.join("policy").to_str().unwrap(), "-o", wasm.to_str().unwrap()]);
    assert!(rebuilt.output().unwrap().status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ready() == before && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_ne!(ready(), before, "the watched module was reloaded");
    // The log can be checked while the gateway runs (a read-only reader beside the writer).
    let live = remit_bin().args(["audit", "verify", &format!("sqlite:{}", store.display())]).output().unwrap();
    assert!(live.status.success(), "{}", String::from_utf8_lossy(&live.stdout));
    // SIGTERM: the gateway drains and exits cleanly.
    let mut server = server;
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert!(server.child.wait().unwrap().success());
    // The audit commands read the store the gateway left.
    let audit = |args: &[&str]| {
        let out = remit_bin().arg("audit").args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let spec = format!("sqlite:{}", store.display());
    let (code, out) = audit(&["verify", &spec]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("11 entries, the chain holds"), "{out}");
    let (code, why) = audit(&["why", &allowed_id, "--store", &spec]);
    assert_eq!(code, Some(0), "{why}");
    assert!(why.contains("agent:shopper calls make_payment on o-1"), "{why}");
    assert!(why.contains("of kind commercial_terms by user:alice (access request ar-"), "{why}");
    assert!(why.contains("mandate chain: shop"), "{why}");
    assert!(
        why.contains("rule: shop `require approval commercial_terms for make_payment where args.amount > 60 USD`"),
        "{why}"
    );
    let (code, receipt) = audit(&["receipt", "--operation", "op-1", "--store", &spec]);
    assert_eq!(code, Some(0), "{receipt}");
    let receipt: Value = serde_json::from_str(&receipt).unwrap();
    assert_eq!(receipt["agents"], json!(["agent:shopper"]));
    assert_eq!(receipt["approvals"][0]["approver"], "user:alice");
    assert_eq!(receipt["external_effects"].as_array().unwrap().len(), 1);
    assert_eq!(receipt["outcome"], "allow");
    // Replaying the log under the policy's sources changes nothing.
    let policy_dir = dir.join("policy");
    let replayed = remit_bin().args(["replay", &spec, "--policy", policy_dir.to_str().unwrap()]).output().unwrap();
    let said = String::from_utf8_lossy(&replayed.stdout).into_owned();
    assert!(
        replayed.status.success() && said.contains("6 decisions replayed") && said.contains(": 0 changed"),
        "{said}"
    );
    // A changed entry is found.
    let tampered = SqliteStore::open(&store, Durability::Process).unwrap();
    tampered.execute_raw("UPDATE log SET body = replace(body, '80.00 USD', '8.00 USD') WHERE seq = 3").unwrap();
    drop(tampered);
    let (code, out) = audit(&["verify", &spec]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("broken at entry 3"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_stop_set_during_load_refuses_every_call_that_starts_after_it_is_acknowledged() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    let s = start("stop-under-load");
    let done = AtomicBool::new(false);
    let counter = AtomicUsize::new(0);
    let (acknowledged, results) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut seen = Vec::new();
                    while !done.load(Ordering::SeqCst) {
                        let op = format!("op-{}", counter.fetch_add(1, Ordering::SeqCst));
                        let sent = Instant::now();
                        let answer = s.post("/access/v1/evaluation", &payment("20.00 USD", &op)).json();
                        seen.push((sent, answer["decision"] == true));
                    }
                    seen
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(s.call("PUT", "/admin/v1/stops/wallet", Some(ADMIN), None).status, 200);
        let acknowledged = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        done.store(true, Ordering::SeqCst);
        let results: Vec<(Instant, bool)> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        (acknowledged, results)
    });
    let before = results.iter().filter(|(sent, allowed)| *sent < acknowledged && *allowed).count();
    let after: Vec<_> = results.iter().filter(|(sent, _)| *sent > acknowledged).collect();
    assert!(before > 0, "calls were allowed before the stop");
    assert!(!after.is_empty(), "calls were made after the stop");
    assert!(after.iter().all(|(_, allowed)| !allowed), "no allow after the stop was acknowledged");
}

const COUNTED: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  budget total_payments: at most 1000000 calls to make_payment in total
}
"#;

#[test]
fn kill_9_under_load_loses_no_acknowledged_decision_and_the_counters_match_the_log() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = policy_dir("crash", COUNTED);
    let store = dir.join("state.db");
    let mut server = serve_process(&dir.join("policy"), &store);
    let url = format!("{}/v1/decide", server.url);
    let body = br#"{"subject":{"id":"agent:shopper"},"action":{"name":"make_payment","arguments":{}}}"#;
    let done = AtomicBool::new(false);
    let acknowledged: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut ids = Vec::new();
                    while !done.load(Ordering::SeqCst) {
                        match request("POST", &url, &[], Some(body)) {
                            Ok(r) if r.status == 200 => ids.push(r.header("remit-decision-id").unwrap().to_string()),
                            _ => break,
                        }
                    }
                    ids
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(500));
        server.child.kill().unwrap(); // SIGKILL, mid-load
        server.child.wait().unwrap();
        done.store(true, Ordering::SeqCst);
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert!(acknowledged.len() > 10, "the load ran ({} decisions)", acknowledged.len());
    let opened = SqliteStore::open(&store, Durability::Process).unwrap();
    let entries = remit_gateway::audit::read_all(&opened).unwrap();
    let logged: std::collections::BTreeSet<String> = entries
        .iter()
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap()["id"].as_str().unwrap().to_string())
        .collect();
    assert!(acknowledged.iter().all(|id| logged.contains(id)), "every acknowledged decision is in the log");
    let allows = entries.iter().filter(|e| e.body.contains("\"decision\":{\"decision\":\"allow\"")).count() as u64;
    use remit_gateway::Store;
    assert_eq!(opened.begin().unwrap().counter("total_payments", "total").unwrap(), allows);
    assert_eq!(remit_gateway::audit::verify(entries).unwrap(), logged.len() as u64);
    drop(opened);
    // Restarted on the same store, the gateway goes on from where it stopped.
    let server = serve_process(&dir.join("policy"), &store);
    let after = request("POST", &format!("{}/v1/decide", server.url), &[], Some(body)).unwrap();
    assert_eq!(after.json()["decision"], "allow");
    drop(server);
    let opened = SqliteStore::open(&store, Durability::Process).unwrap();
    let entries = remit_gateway::audit::read_all(&opened).unwrap();
    assert_eq!(remit_gateway::audit::verify(entries).unwrap(), logged.len() as u64 + 1);
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit serve` given the sources explains an access request; `remit approvals explain` prints it as text.
#[test]
fn remit_approvals_explain_prints_the_path_of_a_request_served_from_sources() {
    let dir = policy_dir("explain-cli", SHOP);
    let server = serve_process(&dir.join("policy"), &dir.join("state.db"));
    let call = json!({"subject": {"type": "agent", "id": "agent:shopper"},
                      "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "80.00 USD"}},
                      "resource": {"type": "order", "id": "o-1"}, "context": {"operation_id": "op-1"}});
    let text = call.to_string();
    let url = format!("{}/access/v1/evaluation", server.url);
    let escalated = request("POST", &url, &[], Some(text.as_bytes())).unwrap().json();
    let id = escalated["context"]["access_request"]["id"].as_str().unwrap().to_string();
    let explain = |token: &str| {
        let out = remit_bin()
            .args(["approvals", "explain", &id, "--gateway", &server.url, "--token", token])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = explain(ALICE);
    assert!(ok, "{err}");
    assert!(out.starts_with("decision ESCALATE to user:alice"), "{out}");
    assert!(out.contains("? require approval commercial_terms for make_payment where args.amount > 60 USD *"), "{out}");
    assert!(out.contains("args.amount = \"80.00 USD\""), "{out}");
    assert!(out.contains(&format!("access request {id}")), "{out}");
    let (ok, _, err) = explain(ADMIN);
    assert!(!ok && err.contains("403"), "{err}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

/// The wallet end to end with the principal approving in the web page, in headless Debian chromium driven by
/// Playwright (`scripts/test-deps.sh` installs both; the README's test command runs it).
#[test]
fn wallet_end_to_end_the_principal_approves_in_the_browser() {
    let ready = Command::new("python3").args(["-c", "import playwright.sync_api"]).status().is_ok_and(|s| s.success())
        && Path::new("/usr/bin/chromium").exists();
    assert!(ready, "the browser test needs chromium and Playwright: run scripts/test-deps.sh");
    let s = start("browser");
    let first = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json();
    assert_eq!(first["context"]["decision"], "escalate");
    let id = first["context"]["access_request"]["id"].as_str().unwrap().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/inbox.py");
    let screenshot = s.dir.join("inbox.png");
    // The browser is the principal's client, not the gateway under test (which runs on its own fixed clock here):
    // under scripts/any-date.sh it runs without libfaketime, whose hook on Chromium's every clock read made this
    // 9-second test take 90-100 seconds.
    let out = Command::new("python3")
        .arg(&script)
        .args([&s.url(""), ALICE, &id, screenshot.to_str().unwrap()])
        .env_remove("LD_PRELOAD")
        .env_remove("FAKETIME")
        .output()
        .unwrap();
    let say = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{say}");
    if let Ok(keep) = std::env::var("REMIT_KEEP_SCREENSHOT") {
        std::fs::copy(&screenshot, keep).unwrap();
    }
    // The page's approval is the one the retry consumes.
    let retry = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-1")).json();
    assert_eq!(retry["decision"], true, "{retry}");
    let again = s.post("/access/v1/evaluation", &payment("80.00 USD", "op-2")).json();
    assert_eq!(again["context"]["decision"], "escalate");
}

#[test]
fn a_hundred_hot_reloads_under_load_lose_no_call_and_every_decision_names_a_policy_it_was_given() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let runtime = Runtime::new().unwrap();
    let versions: Vec<(Arc<remit_host::Compiled>, PolicyMeta)> =
        [wallet(), wallet_and(&[("note.remit", "// version B of the wallet\n")])]
            .iter()
            .map(|p| {
                (Arc::new(runtime.load(&remit_lang::wasm::compile(p).unwrap()).unwrap()), PolicyMeta::from_program(p))
            })
            .collect();
    let hashes: Vec<String> = versions.iter().map(|(c, _)| c.policy().to_string()).collect();
    assert_ne!(hashes[0], hashes[1]);
    let next = Arc::new(AtomicUsize::new(0));
    let counter = next.clone();
    let reloader: Reloader = Arc::new(move || {
        let (compiled, meta) = versions[(counter.fetch_add(1, Ordering::SeqCst) + 1) % 2].clone();
        Ok(Policy { compiled, meta, program: None, revision: None })
    });
    let s = start_with("reload", Some(reloader));
    let done = AtomicBool::new(false);
    let ops = AtomicUsize::new(0);
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let mut seen = Vec::new();
                    while !done.load(Ordering::SeqCst) {
                        let op = format!("op-{}", ops.fetch_add(1, Ordering::SeqCst));
                        let answer = s.post("/access/v1/evaluation", &payment("20.00 USD", &op));
                        seen.push((answer.status, answer.json()));
                    }
                    seen
                })
            })
            .collect();
        for _ in 0..100 {
            let reloaded = s.call("POST", "/admin/v1/reload", Some(ADMIN), None);
            assert_eq!(reloaded.status, 200, "{}", reloaded.text());
            // Spread the reloads over the load, so calls land on both policies.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        done.store(true, Ordering::SeqCst);
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert!(answers.len() > 20, "the load ran ({} calls)", answers.len());
    for (status, answer) in &answers {
        assert_eq!(*status, 200);
        assert_eq!(answer["decision"], true, "{answer}");
        assert!(hashes.contains(&answer["context"]["policy"].as_str().unwrap().to_string()), "{answer}");
    }
    for hash in &hashes {
        assert!(answers.iter().any(|(_, a)| a["context"]["policy"] == hash.as_str()), "some decisions ran on {hash}");
    }
    assert_eq!(next.load(Ordering::SeqCst), 100);
    let metrics = s.call("GET", "/metrics", None, None).text();
    assert!(metrics.contains("remit_policy_reloads_total 100"), "{metrics}");
    assert_eq!(s.call("POST", "/admin/v1/reload", Some(ALICE), None).status, 403);
}

#[test]
fn signed_bundles_serve_and_unsigned_changed_or_foreign_ones_are_refused() {
    let dir = policy_dir("bundle", SHOP);
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = remit_bin().args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(run(&["keygen", "-o", &path("owner.key")]).0, Some(0));
    assert_eq!(run(&["keygen", "-o", &path("other.key")]).0, Some(0));
    let policy = path("policy");
    let (code, said) = run(&[
        "build",
        &policy,
        "-o",
        &path("signed.bundle"),
        "--bundle",
        "--sign",
        &path("owner.key"),
        "--revision",
        "42",
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("signed bundle"), "{said}");
    assert_eq!(run(&["build", &policy, "-o", &path("unsigned.bundle"), "--bundle"]).0, Some(0));
    assert_eq!(
        run(&["build", &policy, "-o", &path("x"), "--sign", &path("owner.key")]).0,
        Some(2),
        "--sign needs --bundle"
    );
    let mut changed = std::fs::read(path("signed.bundle")).unwrap();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    std::fs::write(path("changed.bundle"), &changed).unwrap();
    let store = path("state.db");
    let key = path("owner.key.pub");
    let refused = |policy: &str, key: &str| {
        let out = remit_bin()
            .args([
                "serve",
                policy,
                "--listen",
                "127.0.0.1:0",
                "--store",
                &format!("sqlite:{store}"),
                "--verify-key",
                key,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "refused");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(refused(&path("unsigned.bundle"), &key).contains("not signed"));
    assert!(refused(&path("changed.bundle"), &key).contains("was changed"));
    assert!(refused(&path("signed.bundle"), &path("other.key.pub")).contains("does not verify"));
    assert!(refused(&policy, &key).contains("only a signed bundle"));
    // The signed bundle serves; a reload to an unsigned one is refused and the signed policy stays.
    std::fs::copy(path("signed.bundle"), path("serving.bundle")).unwrap();
    let server = serve_process_with(Path::new(&path("serving.bundle")), Path::new(&store), &["--verify-key", &key]);
    let ready = || request("GET", &format!("{}/ready", server.url), &[], None).unwrap().json()["policy"].clone();
    let before = ready();
    assert!(before.as_str().unwrap().starts_with("sha256:"));
    std::fs::write(dir.join("policy/note.remit"), "// another version\n").unwrap();
    assert_eq!(run(&["build", &policy, "-o", &path("serving.bundle"), "--bundle"]).0, Some(0));
    let auth = format!("Bearer {ADMIN}");
    let reload =
        request("POST", &format!("{}/admin/v1/reload", server.url), &[("Authorization", &auth)], None).unwrap();
    assert_eq!(reload.status, 422, "{}", reload.text());
    assert_eq!(ready(), before);
    // Signed by the owner, the new version is taken.
    let (code, _) = run(&["build", &policy, "-o", &path("serving.bundle"), "--bundle", "--sign", &path("owner.key")]);
    assert_eq!(code, Some(0));
    let reload =
        request("POST", &format!("{}/admin/v1/reload", server.url), &[("Authorization", &auth)], None).unwrap();
    assert_eq!(reload.status, 200, "{}", reload.text());
    assert_ne!(ready(), before);
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_access_log_prints_one_json_line_per_decision() {
    let dir = policy_dir("access-log", COUNTED);
    let mut child = remit_bin()
        .args(["serve", dir.join("policy").to_str().unwrap(), "--listen", "127.0.0.1:0", "--access-log"])
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines.next().unwrap().unwrap().strip_prefix("remit gateway listening on ").unwrap().to_string();
    let body = br#"{"subject":{"id":"agent:shopper"},"action":{"name":"make_payment","arguments":{}}}"#;
    let answer = request("POST", &format!("{url}/v1/decide"), &[], Some(body)).unwrap();
    let id = answer.header("remit-decision-id").unwrap().to_string();
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line: Value = stderr.lines().find_map(|l| serde_json::from_str(l).ok()).expect("a JSON line");
    assert_eq!(line["decision_id"], id.as_str());
    assert_eq!(line["outcome"], "allow");
    assert_eq!(line["logged"], 1);
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit serve --tls-cert --tls-key`: the gateway over https. Its URL says so; a client that trusts the CA decides
/// and the CLI answers the inbox (trusting the CA through `SSL_CERT_FILE`, as tools built on the system's store do);
/// without it the CLI refuses the certificate; a plain-http client gets no answer and the server serves on; renewed
/// certificate files are served without a restart (a broken renewal keeps the last good pair); a key that is not the
/// certificate's stops `remit serve` at start.
#[test]
fn remit_serve_over_tls() {
    use remit_gateway::client::Tls;
    let dir = policy_dir("tls", SHOP);
    let ca = tls::TestCa::new("remit test CA");
    let ca_file = ca.write(&dir.join("ca.pem"));
    let (cert, key) = ca.server_files(&["localhost", "127.0.0.1"], &dir);
    let server =
        serve_process_with(&dir.join("policy"), &dir.join("state.db"), &["--tls-cert", &cert, "--tls-key", &key]);
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);

    let trusting = Tls::with_ca_pem(ca.pem.as_bytes(), "the test CA").unwrap();
    let call = json!({"subject": {"type": "agent", "id": "agent:shopper"},
                      "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "80.00 USD"}},
                      "resource": {"type": "order", "id": "o-1"}, "context": {"operation_id": "op-1"}})
    .to_string();
    let url = format!("{}/access/v1/evaluation", server.url);
    let timeout = std::time::Duration::from_secs(30);
    let mut answer = exchange(&trusting, "POST", &url, &[], Some(call.as_bytes()), timeout).unwrap();
    assert_eq!(answer.status, 200);
    let decided: Value = serde_json::from_slice(&answer.body(1 << 20).unwrap()).unwrap();
    let id = decided["context"]["access_request"]["id"].as_str().expect("an escalation").to_string();
    assert!(decided["context"]["access_request"]["url"].as_str().unwrap().starts_with("https://"), "{decided}");

    let cli = |trust: bool| {
        let mut command = remit_bin();
        command.args(["approvals", "list", "--gateway", &server.url, "--token", ALICE]);
        if trust {
            command.env("SSL_CERT_FILE", &ca_file);
        } else {
            command.env("SSL_CERT_FILE", dir.join("ca-missing.pem"));
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, listed, err) = cli(true);
    assert!(ok && listed.contains(&id), "{listed}{err}");
    let (ok, _, err) = cli(false);
    assert!(!ok && err.contains("TLS"), "{err}");
    // `--tls-ca` instead of the platform's store.
    let with_flag = remit_bin()
        .args(["approvals", "list", "--gateway", &server.url, "--token", ALICE, "--tls-ca", &ca_file])
        .env("SSL_CERT_FILE", dir.join("ca-missing.pem"))
        .output()
        .unwrap();
    assert!(with_flag.status.success(), "{}", String::from_utf8_lossy(&with_flag.stderr));
    assert!(String::from_utf8_lossy(&with_flag.stdout).contains(&id));

    // Plain http to the TLS port: no answer, and the server goes on.
    let plain = server.url.replacen("https://", "http://", 1);
    let refused = request("GET", &format!("{plain}/health"), &[], None);
    assert!(refused.as_ref().map_or(true, |r| r.status != 200), "{refused:?}");
    let health = exchange(&trusting, "GET", &format!("{}/health", server.url), &[], None, timeout).unwrap();
    assert_eq!(health.status, 200);

    // A renewed certificate (here from another CA) is served from the next handshake after the files change,
    // without a restart; a broken one is refused and the last good one kept.
    let renewed_ca = tls::TestCa::new("remit renewed test CA");
    let renewed = Tls::with_ca_pem(renewed_ca.pem.as_bytes(), "the renewed CA").unwrap();
    let renewed_files = dir.join("renewed");
    std::fs::create_dir_all(&renewed_files).unwrap();
    let (new_cert, new_key) = renewed_ca.server_files(&["localhost", "127.0.0.1"], &renewed_files);
    std::fs::copy(&new_key, &key).unwrap();
    std::fs::copy(&new_cert, &cert).unwrap();
    std::thread::sleep(remit_gateway::https::RELOAD_CHECK + std::time::Duration::from_millis(200));
    let health_url = format!("{}/health", server.url);
    assert_eq!(exchange(&renewed, "GET", &health_url, &[], None, timeout).unwrap().status, 200);
    // A client of its own: `trusting` could resume its earlier TLS session, which presents no certificate.
    let old_only = Tls::with_ca_pem(ca.pem.as_bytes(), "the test CA").unwrap();
    assert!(exchange(&old_only, "GET", &health_url, &[], None, timeout).is_err(), "the old certificate is gone");
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nbroken\n").unwrap();
    std::thread::sleep(remit_gateway::https::RELOAD_CHECK + std::time::Duration::from_millis(200));
    assert_eq!(exchange(&renewed, "GET", &health_url, &[], None, timeout).unwrap().status, 200, "the last good one");
    drop(server);
    std::fs::copy(&new_cert, &cert).unwrap();

    let (other_cert, _) = ca.server_files(&["localhost"], &dir.join("policy"));
    let bad = remit_bin()
        .args(["serve", dir.join("policy").to_str().unwrap(), "--listen", "127.0.0.1:0", "--tls-cert", &other_cert])
        .args(["--tls-key", &key])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && said.contains("is not the key of the certificate"), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}

/// One exchange with `url` on a client of its own that trusts what `tls` says (a new connection).
fn exchange(
    tls: &remit_gateway::client::Tls,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: std::time::Duration,
) -> Result<remit_gateway::client::blocking::Exchange, String> {
    let client = remit_gateway::client::Client::new(tls.clone());
    remit_gateway::client::blocking::send(&client, method, url, headers, body, timeout)
}
