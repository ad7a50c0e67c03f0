//! The gateway's store and its approvals (issue 28): fact versions keep their JSON type through the admin API, the
//! CLI, a restart and an upgrade from schema version 3; an approval serves only the agent it was minted for; an
//! approval that could never be used is not minted; a new access request for a call approved and used before says
//! so; the inbox list is filtered before it is cut, paged, and bounds the arguments it shows; request data reaches
//! terminals with its control characters escaped.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use remit_gateway::client::blocking::{request, Response};
use remit_gateway::core::ActionError;
use remit_gateway::http::Tokens;
use remit_gateway::store::EarlierUse;
use remit_gateway::{Config, Durability, Policy, PolicyMeta, SqliteStore, Store};
use remit_host::Runtime;
use remit_lang::syntax::ast::FactVersion;
use remit_lang::value::parse_timestamp;
use serde_json::{json, Value};
use support::examples;
use support::gateway::{HttpGateway, Options};
use support::served::Served;

const NOW: &str = "2026-12-03T15:30:00Z";
const ALICE: &str = "alice-inbox-token";
const BOB: &str = "bob-inbox-token";
const ADMIN: &str = "ops-admin-token";

fn policy_of(source: &str) -> Policy {
    let program = examples::compile(&[("shop.remit".into(), source.into())]);
    let wasm = remit_lang::wasm::compile(&program).unwrap();
    let compiled = Runtime::new().unwrap().load(&wasm).unwrap();
    Policy::new(compiled, PolicyMeta::from_program(&program)).unwrap().with_program(Arc::new(program)).unwrap()
}

/// A gateway on `source` with a fixed clock over a fresh store, served on a free loopback port (with Alice's and
/// Bob's inbox tokens and an admin token) until dropped; most tests decide through `gateway` directly.
fn setup(name: &str, source: &str, config: Config) -> HttpGateway {
    let mut tokens = Tokens::default();
    tokens.inbox.insert(ALICE.into(), "user:alice".into());
    tokens.inbox.insert(BOB.into(), "user:bob".into());
    tokens.admin.insert(ADMIN.into(), "ops".into());
    let options = Options { tokens, config, ..Options::default() };
    HttpGateway::start(&format!("gateway-store-{name}"), policy_of(source), options)
}

impl HttpGateway {
    fn get(&self, path: &str, token: &str) -> Response {
        let auth = format!("Bearer {token}");
        request("GET", &self.url(path), &[("Authorization", &auth)], None).unwrap()
    }

    /// Decides `call`; the decision's JSON and the access request's id when it escalated.
    fn decide(&self, call: &Value) -> (Value, Option<String>) {
        let decided = self.gateway.decide(call.to_string().as_bytes());
        (serde_json::from_str(&decided.decision).unwrap(), decided.access_request.map(|r| r.id))
    }
}

fn payment(agent: &str, merchant: &str, resource: Option<&str>) -> Value {
    let mut call = json!({
        "subject": {"id": agent},
        "action": {"name": "make_payment", "arguments": {"merchant": merchant, "amount": "80.00 USD"}}
    });
    if let Some(resource) = resource {
        call["resource"] = json!({"id": resource});
    }
    call
}

fn remit_bin() -> Command {
    Command::new(support::remit_bin())
}

/// Runs `remit ARGS`; whether it succeeded, its stdout and its stderr.
fn cli(args: &[&str]) -> (bool, String, String) {
    let out = support::run(remit_bin().args(args), std::time::Duration::from_secs(60));
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

// ---- fact versions ----

/// `remit serve` of `policy` on a free port with Alice's inbox token and an admin token; killed on drop.
fn serve_process(policy: &Path, store: &Path) -> Served {
    Served::start(
        remit_bin()
            .args(["serve", policy.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .args(["--inbox-token", &format!("user:alice={ALICE}"), "--admin-token", &format!("ops={ADMIN}")])
            .stderr(Stdio::inherit()),
    )
}

const PINNED: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  fact price_sheet at version 1000 for make_payment
}
"#;

/// Strings that look like numbers, or like the number 1000, to someone: each is a string version, published and
/// kept as that string.
const NUMERIC_LOOKING: [&str; 16] = [
    "3.3",
    "1e3",
    "1E3",
    "1e+3",
    "1000.0",
    " 1000",
    "1000 ",
    "\t1000",
    "+1000",
    "-1000",
    "0x3E8",
    "1_000",
    "١٠٠٠",
    "１０００",
    "1000\u{a0}",
    "NaN",
];

/// A fact's version is current only as the JSON type it was published in (docs/requests.md): a string that looks
/// numeric (`"1e3"`, `" 1000"`, unicode digits) is published, stored, shown and decided as that string — never as
/// the number 1000 (a wrongful allow under `at version 1000`) nor as a real no read accepts (every decision denied
/// `gateway.store-unavailable`, `/ready` 503) — through the admin API, the CLI, and a restart of the gateway.
#[test]
fn fact_versions_keep_their_type_through_the_api_the_cli_and_a_restart() {
    let dir = support::temp_dir("gateway-store-facts");
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    // The gateway refuses a fact no rule reads (404): the facts `f0`… the loop publishes are read by a second mandate.
    let archive: String =
        (0..NUMERIC_LOOKING.len()).map(|i| format!("  fact f{i} at version 1 for read_file\n")).collect();
    let archive = format!(
        "mandate archive for \"user:alice\" {{\n  holder \"agent:archivist\"\n  allow read_file\n{archive}}}\n"
    );
    std::fs::write(dir.join("policy/shop.remit"), format!("{PINNED}{archive}")).unwrap();
    let store = dir.join("state.db");
    let admin = format!("Bearer {ADMIN}");
    let put = |url: &str, name: &str, version: &Value| {
        let body = json!({"version": version}).to_string();
        let headers = [("Authorization", admin.as_str()), ("Content-Type", "application/json")];
        request("PUT", &format!("{url}/admin/v1/facts/{name}"), &headers, Some(body.as_bytes())).unwrap()
    };
    let state = |url: &str| {
        let answer = request("GET", &format!("{url}/admin/v1/state"), &[("Authorization", &admin)], None).unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json()["facts"].clone()
    };
    let ready = |url: &str| request("GET", &format!("{url}/ready"), &[], None).unwrap().status;
    let pay = |url: &str| {
        let call = json!({"subject": {"type": "agent", "id": "agent:shopper"},
                          "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "5.00 USD"}},
                          "resource": {"type": "order", "id": "order:1"}});
        let text = call.to_string();
        request("POST", &format!("{url}/access/v1/evaluation"), &[], Some(text.as_bytes())).unwrap().json()
    };
    let server = serve_process(&dir.join("policy"), &store);
    let url = server.url.clone();
    assert_eq!(put(&url, "price_sheet", &json!(1000)).status, 200);
    assert_eq!(state(&url)["price_sheet"], json!(1000));
    assert_eq!(pay(&url)["decision"], true, "the number 1000 is current");
    for (i, text) in NUMERIC_LOOKING.iter().enumerate() {
        let answer = put(&url, "price_sheet", &json!(text));
        assert_eq!(answer.status, 200, "{text:?}: {}", answer.text());
        assert_eq!(answer.json()["version"], json!(text), "{text:?}: the answer");
        assert_eq!(state(&url)["price_sheet"], json!(text), "{text:?}: the state shows what was published");
        assert_eq!(ready(&url), 200, "{text:?}: the store still answers");
        let decided = pay(&url);
        assert_eq!(decided["decision"], false, "{text:?} is not the number 1000: {decided}");
        assert_eq!(decided["context"]["reasons"], json!(["fact.stale"]), "{text:?}");
        assert_eq!(put(&url, &format!("f{i}"), &json!(text)).status, 200);
    }
    // The CLI: digits alone publish a number, anything else (a sign, a space, an exponent) a string.
    let admin_cli = |args: &[&str]| cli(&[args, &["--gateway", &url, "--token", ADMIN]].concat());
    for (given, published) in
        [("1000", json!(1000)), ("1e3", json!("1e3")), ("+1000", json!("+1000")), (" 1000", json!(" 1000"))]
    {
        let (ok, out, err) = admin_cli(&["admin", "fact", "price_sheet", given]);
        assert!(ok, "{given:?}: {err}");
        let answer: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(answer["version"], published, "{given:?}");
        let (ok, out, err) = admin_cli(&["admin", "state"]);
        assert!(ok, "{err}");
        let shown: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(shown["facts"]["price_sheet"], published, "{given:?}: `remit admin state`");
        assert_eq!(pay(&url)["decision"], published == json!(1000), "{given:?}");
    }
    let (ok, _, err) = admin_cli(&["admin", "fact", "price_sheet", "99999999999999999999"]);
    assert!(!ok && err.contains("too large"), "{err}");
    // A restart reads every version back as it was published.
    drop(server);
    let server = serve_process(&dir.join("policy"), &store);
    let facts = state(&server.url);
    for (i, text) in NUMERIC_LOOKING.iter().enumerate() {
        assert_eq!(facts[format!("f{i}")], json!(text), "{text:?} after a restart");
    }
    assert_eq!(facts["price_sheet"], json!(" 1000"));
    assert_eq!(pay(&server.url)["context"]["reasons"], json!(["fact.stale"]));
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

/// The schema of version 3, as a gateway of that version wrote it.
const SCHEMA_3: &str = "
CREATE TABLE approvals (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, mandate TEXT NOT NULL, issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL, tool TEXT, target TEXT, digest TEXT, manifest TEXT,
  single_use INTEGER NOT NULL, consumed INTEGER NOT NULL DEFAULT 0, approver TEXT NOT NULL,
  access_request TEXT, consumed_by TEXT);
CREATE INDEX approvals_live ON approvals (mandate, consumed, expires_at);
CREATE TABLE counters (
  counter TEXT NOT NULL, window TEXT NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (counter, window));
CREATE TABLE stops (mandate TEXT PRIMARY KEY);
CREATE TABLE stop_records (id TEXT PRIMARY KEY, level TEXT NOT NULL, mandate TEXT, principal TEXT);
CREATE TABLE facts (name TEXT PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE operations (
  operation TEXT NOT NULL, decision_id TEXT NOT NULL, tool TEXT NOT NULL, time INTEGER NOT NULL);
CREATE INDEX operations_by_id ON operations (operation);
CREATE TABLE access_requests (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  principal TEXT, agent TEXT NOT NULL, credential TEXT, mandate TEXT NOT NULL, tool TEXT NOT NULL, target TEXT,
  digest TEXT NOT NULL, manifest TEXT, arguments TEXT NOT NULL, missing_approvals TEXT NOT NULL, reasons TEXT NOT NULL, chain TEXT NOT NULL,
  decision_id TEXT NOT NULL, key TEXT NOT NULL, decided_by TEXT, decided_at INTEGER, log_seq INTEGER);
CREATE INDEX access_requests_key ON access_requests (key, status);
CREATE TABLE rounds (key TEXT PRIMARY KEY, carried TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE log (
  seq INTEGER PRIMARY KEY, time INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, prev TEXT NOT NULL,
  hash TEXT NOT NULL);
PRAGMA journal_mode = WAL;
INSERT INTO facts VALUES ('real', '3.3'), ('text', 'v3.2'), ('number', 7), ('exponent', '1e3');
INSERT INTO access_requests VALUES ('ar-1', 'approved', 0, 100, 'user:alice', 'agent:a', NULL, 'shop', 'make_payment',
  'order:1', 'sha256:x', NULL, '{}', '[]', '[]', '[\"shop\"]', 'dec-1', 'k', 'user:alice', 1, NULL);
INSERT INTO approvals VALUES ('apr-1', 'commercial_terms', 'shop', 0, 4102444800, 'make_payment', 'order:1',
  'sha256:x', NULL, 1, 0, 'user:alice', 'ar-1', NULL);
PRAGMA user_version = 3;
";

/// A store written by a gateway of schema version 3 (by another SQLite, Python's) is upgraded in place when a gateway
/// opens it: the facts it could read are kept with their types (`"1e3"`, which version 3 stored as 1000, stays the
/// number it became), the one it had turned into a real — which made every read of the state fail — is dropped with
/// a log entry that says so, approvals are bound to their access request's agent, and the store then keeps any
/// version as published.
#[test]
fn a_store_of_schema_version_3_is_upgraded_in_place() {
    let dir = support::temp_dir("gateway-store-upgrade");
    let path = dir.join("state.db");
    let script = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.executescript(sys.argv[2])\nc.close()\n";
    let ran = Command::new("python3").args(["-c", script]).arg(&path).arg(SCHEMA_3).output();
    let ran = ran.expect("python3 runs (scripts/test-deps.sh installs it)");
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let store = SqliteStore::open(&path, Durability::Process).unwrap();
    let mut tx = store.begin().unwrap();
    let number = |name: &str, n| (name.to_string(), FactVersion::Number(n));
    let text = ("text".to_string(), FactVersion::Text("v3.2".into()));
    assert_eq!(tx.facts().unwrap(), [number("exponent", 1000), number("number", 7), text]);
    let log = tx.log_entries(1, 100).unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    let body: Value = serde_json::from_str(&log[0].body).unwrap();
    assert_eq!((log[0].kind.as_str(), &body["fact"], &body["version"]), ("fact", &json!("real"), &Value::Null));
    assert_eq!(body["dropped"], "3.3");
    assert_eq!(tx.approval("apr-1").unwrap().unwrap().agent.as_deref(), Some("agent:a"));
    tx.set_fact("real", &FactVersion::Text("3.3".into())).unwrap();
    tx.commit().unwrap();
    drop(store);
    // Opened again (version 4 now): nothing more to upgrade, and the string stays one.
    let store = SqliteStore::open(&path, Durability::Process).unwrap();
    let mut tx = store.begin().unwrap();
    assert!(tx.facts().unwrap().contains(&("real".to_string(), FactVersion::Text("3.3".into()))));
    assert_eq!(remit_gateway::audit::verify(tx.log_entries(1, 100).unwrap()).unwrap(), 1);
    drop(tx);
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
}

// ---- approvals ----

const TWO_AGENTS: &str = r#"
mandate shop for "user:alice" {
  holder "agent:a", "agent:a2"
  allow make_payment
  require approval commercial_terms for make_payment
}
"#;

/// Alice approves `agent:a`'s call; `agent:a2`, who holds the same mandate, makes the same call: it is not allowed
/// with that approval (the gateway presents an approval only to the agent it was minted for), and `agent:a` still
/// is. The credential is not bound: the agent's next call with a renewed credential uses it.
#[test]
fn an_approval_serves_only_the_agent_it_was_minted_for() {
    let s = setup("agent", TWO_AGENTS, Config::default());
    let call = |agent: &str| payment(agent, "acme", Some("order:1"));
    let (escalated, request) = s.decide(&call("agent:a"));
    assert_eq!(escalated["decision"], "escalate");
    let minted = s.gateway.approve(&request.unwrap(), "user:alice").unwrap();
    assert_eq!(minted[0].agent.as_deref(), Some("agent:a"));
    let (other, other_request) = s.decide(&call("agent:a2"));
    assert_eq!(other["decision"], "escalate", "a co-holder is not allowed with agent:a's approval: {other}");
    assert!(other_request.is_some(), "its own access request");
    let mut renewed = call("agent:a");
    renewed["subject"]["credential"] = json!({"id": "cred-renewed", "scopes": []});
    let (allowed, _) = s.decide(&renewed);
    assert_eq!(allowed["decision"], "allow", "{allowed}");
    assert_eq!(allowed["approvals"][0]["id"], json!(minted[0].id));
}

/// When the same call escalates again after its single-use approval was used, the new access request says which
/// decision used the earlier approval, and when, so that a principal does not approve a second payment blindly.
#[test]
fn a_new_request_for_a_call_approved_and_used_before_says_so() {
    let s = setup("earlier", TWO_AGENTS, Config::default());
    let call = payment("agent:a", "acme", Some("order:1"));
    let (_, first) = s.decide(&call);
    let first = first.unwrap();
    assert!(s.gateway.access_request(&first).unwrap().unwrap().earlier.is_empty());
    let minted = s.gateway.approve(&first, "user:alice").unwrap();
    let used = s.gateway.decide(call.to_string().as_bytes());
    assert!(used.allowed(), "{}", used.decision);
    s.clock.set(parse_timestamp("2026-12-03T16:00:00Z").unwrap());
    let (again, second) = s.decide(&call);
    assert_eq!(again["decision"], "escalate");
    let second = s.gateway.access_request(&second.unwrap()).unwrap().unwrap();
    assert_ne!(second.id, first);
    let expected = EarlierUse {
        approval: minted[0].id.clone(),
        access_request: first.clone(),
        approved_by: "user:alice".into(),
        consumed_by: Some(used.id.clone()),
        consumed_at: Some(parse_timestamp(NOW).unwrap()),
    };
    assert_eq!(second.earlier, [expected]);
}

const GATED: &str = r#"
mandate shop for "user:alice" {
  holder "agent:a"
  allow make_payment
  require approval commercial_terms for make_payment
}
"#;

/// `commercial_terms` binds the target; a call with no `resource.id` (and a tool that declares no `target
/// args.X`) could never use an approval of it (`binding-mismatch`, then a new request, forever): approving it is
/// refused (`422`), and it can be denied.
#[test]
fn an_approval_that_could_never_be_used_is_not_minted() {
    let s = setup("unbindable", GATED, Config::default());
    let (escalated, request) = s.decide(&payment("agent:a", "acme", None));
    assert_eq!(escalated["decision"], "escalate");
    let request = request.unwrap();
    match s.gateway.approve(&request, "user:alice") {
        Err(ActionError::Invalid(message)) => {
            assert!(message.contains("binds the target") && message.contains("could never be used"), "{message}")
        }
        other => panic!("approved: {other:?}"),
    }
    let auth = format!("Bearer {ALICE}");
    let url = s.url(&format!("/inbox/api/requests/{request}/approve"));
    let answer = request_post(&url, &auth);
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(answer.json()["error"]["code"], "inbox.invalid");
    assert!(s.gateway.deny_request(&request, "user:alice").is_ok());
    // With a target the same kind is approved.
    let (_, bound) = s.decide(&payment("agent:a", "acme", Some("order:1")));
    assert!(s.gateway.approve(&bound.unwrap(), "user:alice").is_ok());
    // A kind that binds the manifest, on a call without one.
    let publishing = setup("unbindable-manifest", PUBLISHING, Config::default());
    let call = |manifest: Option<&str>| {
        let mut arguments = json!({"path": "site/index.html"});
        if let Some(manifest) = manifest {
            arguments["manifest"] = json!(manifest);
        }
        json!({"subject": {"id": "agent:a"}, "action": {"name": "web_publish", "arguments": arguments}})
    };
    let (escalated, request) = publishing.decide(&call(None));
    assert_eq!(escalated["decision"], "escalate", "{escalated}");
    match publishing.gateway.approve(&request.unwrap(), "user:alice") {
        Err(ActionError::Invalid(message)) => assert!(message.contains("binds the manifest"), "{message}"),
        other => panic!("approved: {other:?}"),
    }
    let (_, request) = publishing.decide(&call(Some("sha256:m")));
    assert!(publishing.gateway.approve(&request.unwrap(), "user:alice").is_ok());
}

const PUBLISHING: &str = r#"
mandate site for "user:alice" {
  holder "agent:a"
  allow web_publish
  require approval human_publication for web_publish
}
"#;

fn request_post(url: &str, auth: &str) -> Response {
    request("POST", url, &[("Authorization", auth)], None).unwrap()
}

// ---- the inbox list ----

const TWO_PRINCIPALS: &str = r#"
mandate shop for "user:alice" {
  holder "agent:a"
  allow make_payment
  require approval commercial_terms for make_payment
}
mandate shop_b for "user:bob" {
  holder "agent:b"
  allow make_payment
  require approval commercial_terms for make_payment
}
"#;

/// 1,005 newer escalations of Bob's agent do not hide Alice's 8: the list is filtered by who may answer before it is
/// cut, and paged (`limit`, `cursor`) without losing or repeating a request.
#[test]
fn the_inbox_of_one_principal_is_not_drowned_by_another_agent() {
    let s = setup("drowning", TWO_PRINCIPALS, Config::default());
    let mut alices = Vec::new();
    for i in 0..8 {
        alices.push(s.decide(&payment("agent:a", &format!("m{i}"), Some("order:1"))).1.unwrap());
    }
    s.clock.set(parse_timestamp("2026-12-03T15:31:00Z").unwrap());
    for i in 0..1005 {
        assert!(s.decide(&payment("agent:b", &format!("m{i}"), Some("order:1"))).1.is_some());
    }
    let list = s.get("/inbox/api/requests", ALICE).json();
    let ids = |list: &Value| -> Vec<String> {
        list["requests"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
    };
    let mut shown = ids(&list);
    shown.sort();
    alices.sort();
    assert_eq!(shown, alices, "all of Alice's requests");
    assert_eq!(list["next_cursor"], Value::Null);
    // Pages of 3: 3, 3, 2, each once.
    let (mut paged, mut sizes, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/inbox/api/requests?limit=3&cursor={c}"),
            None => "/inbox/api/requests?limit=3".into(),
        };
        let page = s.get(&path, ALICE).json();
        sizes.push(ids(&page).len());
        paged.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(sizes, [3, 3, 2]);
    paged.sort();
    assert_eq!(paged, alices);
    // Bob's: 100 by default, and all of them in pages of 1,000.
    let bobs = s.get("/inbox/api/requests", BOB).json();
    assert_eq!(ids(&bobs).len(), 100);
    let first = s.get("/inbox/api/requests?limit=1000", BOB).json();
    let next = first["next_cursor"].as_str().unwrap().to_string();
    let rest = s.get(&format!("/inbox/api/requests?limit=1000&cursor={next}"), BOB).json();
    assert_eq!(ids(&first).len() + ids(&rest).len(), 1005);
    assert_eq!(rest["next_cursor"], Value::Null);
    for bad in ["limit=0", "limit=1001", "limit=x", "cursor=nonsense"] {
        let answer = s.get(&format!("/inbox/api/requests?{bad}"), ALICE);
        assert_eq!(answer.status, 400, "{bad}: {}", answer.text());
    }
}

/// Each request of the list shows at most 4,096 characters of its arguments' JSON (cut, with their whole length);
/// the request's own endpoint shows them whole. 40 requests with 200 KB arguments make a list of about 200 KB, not
/// 8 MB.
#[test]
fn the_inbox_list_bounds_the_arguments_it_shows() {
    let s = setup("bound", GATED, Config::default());
    let long = "x".repeat(200_000);
    let mut last = None;
    for i in 0..40 {
        last = s.decide(&payment("agent:a", &format!("{i}{long}"), Some("order:1"))).1;
    }
    let list = s.get("/inbox/api/requests", ALICE);
    assert!(list.text().len() < 40 * 6_000, "the list is {} bytes", list.text().len());
    let requests = list.json()["requests"].as_array().unwrap().clone();
    assert_eq!(requests.len(), 40);
    for r in &requests {
        let shown = r["arguments"].as_str().expect("the cut arguments, as text");
        assert_eq!(shown.chars().count(), 4096);
        assert!(shown.starts_with("{\"merchant\":\""), "{}", &shown[..60]);
        assert!(r["arguments_truncated"].as_u64().unwrap() > 200_000);
    }
    let whole = s.get(&format!("/inbox/api/requests/{}", last.unwrap()), ALICE).json();
    assert_eq!(whole["arguments"]["merchant"].as_str().unwrap().len(), 200_002);
    assert!(whole.get("arguments_truncated").is_none());
}

// ---- terminals ----

/// A `resource.id` with ANSI escapes (erase the line, go back, print a harmless line in green) is printed with its
/// control characters escaped by `remit approvals list`, `approvals explain` and `audit why`; the list shows the
/// call's arguments (masked ones as `"***"`) and, for a call approved and used before, which decision used the
/// earlier approval and when.
#[test]
fn request_data_reaches_terminals_escaped_and_the_list_shows_the_call() {
    let config = Config { mask: vec!["merchant".into()], ..Config::default() };
    let s = setup("terminal", GATED, config);
    let forged = "order:1\u{1b}[2K\r\u{1b}[32mharmless\u{1b}[0m\u{9b}2K";
    let call = payment("agent:a", "acme", Some(forged));
    let (_, id) = s.decide(&call);
    let id = id.unwrap();
    let url = s.url("");
    let inbox = |args: &[&str]| cli(&[args, &["--gateway", &url, "--token", ALICE]].concat());
    let clean = |what: &str, out: &str| {
        assert!(!out.contains('\u{1b}') && !out.contains('\u{9b}') && !out.contains('\r'), "{what}: {out:?}");
        assert!(out.contains("order:1\\u001b[2K\\u000d\\u001b[32mharmless"), "{what}: {out}");
    };
    let (ok, listed, err) = inbox(&["approvals", "list"]);
    assert!(ok, "{err}");
    clean("approvals list", &listed);
    assert!(listed.contains(r#"arguments: {"merchant":"***","amount":"80.00 USD"}"#), "{listed}");
    let (ok, explained, err) = inbox(&["approvals", "explain", &id]);
    assert!(ok, "{err}");
    clean("approvals explain", &explained);
    s.gateway.approve(&id, "user:alice").unwrap();
    let used = s.gateway.decide(call.to_string().as_bytes());
    assert!(used.allowed(), "{}", used.decision);
    let store = format!("sqlite:{}", s.dir.join("state.db").display());
    let (ok, why, err) = cli(&["audit", "why", &used.id, "--store", &store]);
    assert!(ok, "{err}");
    clean("audit why", &why);
    // Escalated again: the list says which decision used the earlier approval.
    s.decide(&call);
    let (ok, listed, err) = inbox(&["approvals", "list"]);
    assert!(ok, "{err}");
    let earlier = format!("and used by decision {} at {NOW}", used.id);
    assert!(
        listed.contains("earlier: the same call was approved by user:alice") && listed.contains(&earlier),
        "{listed}"
    );
}
