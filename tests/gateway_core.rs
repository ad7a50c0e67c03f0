//! The gateway core without HTTP: state filled from the store, obligations exactly once under concurrency, forged
//! state ignored, the log's hash chain, and a store failure denying.

mod support;

use std::path::PathBuf;
use std::sync::{Arc, Barrier};

use remit_gateway::audit;
use remit_gateway::core::{FixedClock, REASON_AMBIGUOUS, REASON_STORE};
use remit_gateway::store::{StopRecord, Store, StoreError, StoreResult, Tx};
use remit_gateway::{Config, Durability, Gateway, Policy, PolicyMeta, SqliteStore};
use remit_host::Runtime;
use remit_lang::ir::Program;
use remit_lang::syntax::ast::FactVersion;
use remit_lang::value::parse_timestamp;
use serde_json::{json, Value};
use support::examples;

const NOW: &str = "2026-12-03T15:30:00Z";

fn policy(program: &Program) -> Policy {
    let wasm = remit_lang::wasm::compile(program).unwrap();
    let compiled = Runtime::new().unwrap().load(&wasm).unwrap();
    Policy::new(compiled, PolicyMeta::from_program(program)).unwrap()
}

struct Setup {
    gateway: Arc<Gateway>,
    store: Arc<SqliteStore>,
    clock: Arc<FixedClock>,
    dir: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

fn setup(name: &str, program: &Program) -> Setup {
    setup_with(name, policy(program), Config::default())
}

/// A gateway serving `policy` with `config`, over a fresh store in a folder of its own (removed on drop).
fn setup_with(name: &str, policy: Policy, config: Config) -> Setup {
    let dir = std::env::temp_dir().join(format!("remit-gateway-core-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.join("state.db"), Durability::Process).unwrap());
    let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
    let gateway = Gateway::new(policy, store.clone(), clock.clone(), config);
    Setup { gateway: Arc::new(gateway), store, clock, dir }
}

fn payment(amount: &str, operation: &str) -> Vec<u8> {
    json!({
        "subject": {"id": "agent:shopper", "credential": {"id": "cred-1", "scopes": ["wallet.all"]}},
        "action": {"name": "make_payment", "arguments": {"merchant": "acme-grocer", "amount": amount}},
        "resource": {"id": "order:991"},
        "context": {"mandate": "wallet", "operation_id": operation}
    })
    .to_string()
    .into_bytes()
}

fn decision(decided: &remit_gateway::Decided) -> Value {
    serde_json::from_str(&decided.decision).unwrap()
}

fn log(store: &SqliteStore) -> Vec<remit_gateway::store::LogEntry> {
    store.begin().unwrap().log_entries(1, usize::MAX >> 1).unwrap()
}

/// Runs `n` calls of `request` at once; the number of allows.
fn concurrently(gateway: &Arc<Gateway>, request: &[u8], n: usize) -> usize {
    let barrier = Barrier::new(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    gateway.decide(request).allowed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).filter(|a| *a).count()
    })
}

const GATED: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require approval commercial_terms for make_payment
}
"#;

fn gated_payment() -> Vec<u8> {
    json!({
        "subject": {"id": "agent:shopper"},
        "action": {"name": "make_payment", "arguments": {"merchant": "acme-grocer", "amount": "80.00 USD"}},
        "resource": {"id": "order:1"}
    })
    .to_string()
    .into_bytes()
}

#[test]
fn two_hundred_concurrent_calls_with_one_single_use_approval_allow_exactly_once() {
    let s = setup("single-use", &examples::compile(&[("shop.remit".into(), GATED.into())]));
    let first = s.gateway.decide(&gated_payment());
    assert_eq!(first.outcome, "escalate", "{}", first.decision);
    let request = first.access_request.clone().expect("an access request");
    let minted = s.gateway.approve(&request.id, "user:alice").unwrap();
    assert_eq!(minted.len(), 1);
    assert!(minted[0].single_use);
    assert_eq!(concurrently(&s.gateway, &gated_payment(), 200), 1);
    // The one allow consumed the approval; the log has every decision and the chain holds.
    let entries = log(&s.store);
    let allows: Vec<Value> = entries
        .iter()
        .filter(|e| e.kind == "decision")
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap())
        .filter(|b| b["decision"]["decision"] == "allow")
        .collect();
    assert_eq!(allows.len(), 1);
    assert_eq!(allows[0]["approvals_used"][0]["approver"], "user:alice");
    assert_eq!(audit::verify(entries).unwrap(), 1 + 1 + 200);
    let approval = s.store.begin().unwrap().approval(&minted[0].id).unwrap().unwrap();
    assert!(approval.consumed);
}

/// A later round of an allowed call (a tool that asked for input first, `remit mcp-proxy`) is decided without what
/// the earlier rounds' obligations did, kept in the store: the single-use approval they consumed counts for it and is
/// not consumed again, their budget count is not counted again; anything else is decided as for any call. A round
/// is taken once, and not after it expired.
#[test]
fn a_continued_call_is_decided_without_what_its_earlier_rounds_carried_out() {
    let text = format!("{}\n", GATED.trim_end().trim_end_matches('}'))
        + "  budget daily: at most 1 calls to make_payment per day\n}\n";
    let s = setup("continued", &examples::compile(&[("shop.remit".into(), text)]));
    let request = || serde_json::from_slice::<serde_json::Map<String, Value>>(&gated_payment()).unwrap();
    let escalated = s.gateway.decide(&gated_payment());
    let minted = s.gateway.approve(&escalated.access_request.unwrap().id, "user:alice").unwrap();
    let first = s.gateway.decide(&gated_payment());
    assert!(first.allowed(), "{}", first.decision);
    let day = "day:2026-12-03".to_string();
    let carried = remit_gateway::core::Carried {
        approvals: vec![minted[0].id.clone()],
        counts: vec![("daily".to_string(), day.clone())],
    };
    assert_eq!(first.carried, carried);
    let counter = || s.store.begin().unwrap().counter("daily", &day).unwrap();
    assert_eq!(counter(), 1);

    // Not continuing: the approval is consumed and the day's budget used up.
    let fresh = s.gateway.decide(&gated_payment());
    assert_eq!(fresh.outcome, "deny", "{}", fresh.decision);
    assert_eq!(fresh.reasons, ["budget.exhausted"]);

    // A round not kept (or kept by no one): a new call.
    assert_eq!(s.gateway.decide_continuing(request(), "r-none").reasons, ["budget.exhausted"]);

    // Continuing: allowed, the approval used again (and said so in the log), nothing counted again.
    s.gateway.keep_round("r-1", &first.carried).unwrap();
    let second = s.gateway.decide_continuing(request(), "r-1");
    assert!(second.allowed(), "{}", second.decision);
    assert_eq!(second.carried, carried, "what the call carried out, for its next round");
    assert_eq!(counter(), 1);
    let approval = s.store.begin().unwrap().approval(&minted[0].id).unwrap().unwrap();
    assert_eq!(approval.consumed_by.as_deref(), Some(first.id.as_str()));
    let entry = log(&s.store).into_iter().find(|e| e.body.contains(&second.id)).unwrap();
    let entry: Value = serde_json::from_str(&entry.body).unwrap();
    assert_eq!(entry["approvals_used"][0]["id"], minted[0].id.as_str());
    assert_eq!(entry["approvals_used"][0]["earlier_round"], true);

    // Other arguments are another call: the approval, bound to the first ones, does not cover it.
    let mut other = request();
    other["action"]["arguments"]["amount"] = json!("81.00 USD");
    s.gateway.keep_round("r-2", &second.carried).unwrap();
    let changed = s.gateway.decide_continuing(other, "r-2");
    assert_eq!(changed.outcome, "escalate", "{}", changed.decision);
    assert_eq!(changed.carried, Default::default());
    // Taken once: that round is gone.
    assert_eq!(s.gateway.decide_continuing(request(), "r-2").reasons, ["budget.exhausted"]);

    // Not after it expired.
    s.gateway.keep_round("r-3", &second.carried).unwrap();
    s.clock.set(parse_timestamp(NOW).unwrap() + remit_gateway::core::ROUND_TTL_SECONDS);
    assert_eq!(s.gateway.decide_continuing(request(), "r-3").reasons, ["budget.exhausted"]);
    s.clock.set(parse_timestamp(NOW).unwrap());

    // A stop set between the rounds stops the next one.
    s.gateway.keep_round("r-4", &second.carried).unwrap();
    s.gateway.set_stop("shop", true, "admin").unwrap();
    let stopped = s.gateway.decide_continuing(request(), "r-4");
    assert_eq!(stopped.reasons, ["stop.active"]);
    assert_eq!(counter(), 1);
}

#[test]
fn a_budget_of_n_per_operation_allows_exactly_n_of_two_hundred_concurrent_calls() {
    let text = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require operation id for make_payment
  budget per_op: at most 3 calls to make_payment per operation
}
"#;
    let s = setup("budget", &examples::compile(&[("shop.remit".into(), text.into())]));
    let request = |op: &str| {
        json!({"subject": {"id": "agent:shopper"},
               "action": {"name": "make_payment", "arguments": {"merchant": "m", "amount": "1.00 USD"}},
               "context": {"operation_id": op}})
        .to_string()
        .into_bytes()
    };
    assert_eq!(concurrently(&s.gateway, &request("op-1"), 200), 3);
    // Another operation has its own window; the counter of op-1 is exactly 3.
    assert!(s.gateway.decide(&request("op-2")).allowed());
    assert_eq!(s.store.begin().unwrap().counter("per_op", "operation:op-1").unwrap(), 3);
    let denied = s.gateway.decide(&request("op-1"));
    assert_eq!(denied.reasons, ["budget.exhausted"]);
}

#[test]
fn hourly_and_daily_budgets_count_in_the_window_of_the_gateway_clock() {
    let text = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  budget hourly: at most 2 calls to make_payment per hour
  budget daily: at most 3 calls to make_payment per day
}
"#;
    let s = setup("windows", &examples::compile(&[("shop.remit".into(), text.into())]));
    let request = br#"{"subject":{"id":"agent:shopper"},"action":{"name":"make_payment","arguments":{}}}"#;
    let start = parse_timestamp("2026-12-03T10:00:00Z").unwrap();
    s.clock.set(start);
    let outcomes: Vec<bool> = [0, 60, 120, 3600, 3660, 7200]
        .iter()
        .map(|dt| {
            s.clock.set(start + dt);
            s.gateway.decide(request).allowed()
        })
        .collect();
    // Two in the first hour, then the third of the day in the next hour, then the day is used up.
    assert_eq!(outcomes, [true, true, false, true, false, false]);
    s.clock.set(start + 86_400);
    assert!(s.gateway.decide(request).allowed(), "a new day and a new hour");
}

#[test]
fn forged_approvals_counters_stops_facts_and_time_in_the_request_are_ignored_and_logged() {
    let s = setup("forged", &examples::static_wallet_program());
    let mut request: Value = serde_json::from_slice(&payment("80.00 USD", "op-1")).unwrap();
    let digest = remit_lang::eval::argument_digest("make_payment", &request["action"]["arguments"]);
    request["context"]["approvals"] = json!([{
        "id": "apr-forged", "kind": "commercial_terms", "mandate": "wallet",
        "issued_at": "2026-12-03T15:00:00Z", "expires_at": "2026-12-03T16:00:00Z",
        "tool": "make_payment", "target": "order:991", "digest": digest, "consumed": false
    }]);
    request["context"]["counters"] = json!({"payment_per_op": 0});
    request["context"]["now"] = json!("2026-12-03T15:30:00Z");
    let decided = s.gateway.decide(request.to_string().as_bytes());
    assert_eq!(decided.outcome, "escalate", "{}", decided.decision);
    assert_eq!(decided.reasons, ["approval.missing"]);
    let entry = log(&s.store).pop().unwrap();
    let body: Value = serde_json::from_str(&entry.body).unwrap();
    assert_eq!(body["ignored"], json!(["context.approvals", "context.counters", "context.now"]));
    assert_eq!(body["request"]["context"]["approvals"], json!([]), "the gateway's own (none)");
    // A counter reset in the request does not reopen a used-up budget.
    let small = payment("20.00 USD", "op-2");
    assert!(s.gateway.decide(&small).allowed());
    let mut again: Value = serde_json::from_slice(&small).unwrap();
    again["context"]["counters"] = json!({"payment_per_op": 0});
    let decided = s.gateway.decide(again.to_string().as_bytes());
    assert_eq!(decided.reasons, ["budget.exhausted"]);
    // The time is the gateway's: the mandate expired on its clock, whatever the request says.
    s.clock.set(parse_timestamp("2027-02-01T00:00:00Z").unwrap());
    let decided = s.gateway.decide(&payment("20.00 USD", "op-3"));
    assert_eq!(decided.reasons, ["mandate.expired"]);
    assert_eq!(s.gateway.counts.ignored_fields.load(std::sync::atomic::Ordering::Relaxed), 2);
}

#[test]
fn an_approved_call_is_allowed_once_and_a_changed_argument_escalates_again() {
    let s = setup("approve", &examples::static_wallet_program());
    let escalated = s.gateway.decide(&payment("80.00 USD", "op-1"));
    assert_eq!(escalated.outcome, "escalate");
    let request = escalated.access_request.unwrap();
    assert!(request.url.ends_with(&format!("/inbox/{}", request.id)));
    // The same call again while pending joins the same access request.
    let joined = s.gateway.decide(&payment("80.00 USD", "op-1"));
    assert_eq!(joined.access_request.unwrap().id, request.id);
    // An agent never approves; only the principal does.
    assert!(matches!(
        s.gateway.approve(&request.id, "agent:shopper"),
        Err(remit_gateway::core::ActionError::Forbidden(_))
    ));
    assert!(matches!(s.gateway.approve(&request.id, "user:bob"), Err(remit_gateway::core::ActionError::Forbidden(_))));
    let minted = s.gateway.approve(&request.id, "user:alice").unwrap();
    assert_eq!(minted[0].kind, "commercial_terms");
    assert_eq!(minted[0].expires_at - minted[0].issued_at, 3600, "the kind's ttl");
    assert!(minted[0].digest.as_deref().unwrap().starts_with("sha256:"));
    assert!(s.gateway.approve(&request.id, "user:alice").is_err(), "approved once");
    // Another amount is another call: not covered.
    let changed = s.gateway.decide(&payment("81.00 USD", "op-1"));
    assert_eq!(changed.outcome, "escalate");
    let allowed = s.gateway.decide(&payment("80.00 USD", "op-1"));
    assert!(allowed.allowed(), "{}", allowed.decision);
    let obligations = &decision(&allowed)["obligations"];
    assert_eq!(obligations[0]["kind"], "consume-approval");
    let again = s.gateway.decide(&payment("80.00 USD", "op-9"));
    assert_eq!(again.outcome, "escalate", "the approval was consumed");
    let ops = s.store.begin().unwrap().operations("op-1").unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].decision_id, allowed.id);
}

#[test]
fn only_the_approvers_a_kind_names_answer_and_the_decision_says_who_approved() {
    const SPEND: &str = r#"
approval spend {
  binds tool, target
  ttl 1h
  approved by "user:cfo", under "role:finance/"
}

mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require approval spend for make_payment
}
"#;
    let s = setup("approvers", &examples::compile(&[("shop.remit".into(), SPEND.into())]));
    let escalated = s.gateway.decide(&gated_payment());
    let request = escalated.access_request.clone().expect("an access request");
    // The principal is not among the kind's approvers: neither sees it nor answers it; the CFO and finance do.
    let pending = s.gateway.access_requests(None).unwrap();
    let addressed = |who: &str| pending.iter().filter(|r| s.gateway.may_answer(r, who)).count();
    assert_eq!((addressed("user:alice"), addressed("user:cfo"), addressed("role:finance/lea")), (0, 1, 1));
    assert_eq!(addressed("role:finance/../ceo"), 0, "under's path rules");
    assert!(matches!(
        s.gateway.approve(&request.id, "user:alice"),
        Err(remit_gateway::core::ActionError::Forbidden(_))
    ));
    let minted = s.gateway.approve(&request.id, "role:finance/lea").unwrap();
    assert_eq!(minted[0].approver, "role:finance/lea");
    let allowed = s.gateway.decide(&gated_payment());
    assert!(allowed.allowed(), "{}", allowed.decision);
    let used = &decision(&allowed)["approvals"];
    assert_eq!(used, &json!([{"id": minted[0].id, "kind": "spend", "approved_by": "role:finance/lea"}]));
}

#[test]
fn stops_and_facts_come_from_the_store() {
    let s = setup("stops", &examples::static_wallet_program());
    assert!(s.gateway.decide(&payment("20.00 USD", "op-1")).allowed());
    s.gateway.set_stop("wallet", true, "admin").unwrap();
    assert_eq!(s.gateway.decide(&payment("20.00 USD", "op-2")).reasons, ["stop.active"]);
    s.gateway.set_stop("wallet", false, "admin").unwrap();
    assert!(s.gateway.decide(&payment("20.00 USD", "op-3")).allowed());
    assert!(s.gateway.set_stop("nope", true, "admin").is_err());
    // The wallet reads no fact: a version published for one would be ignored, so it is refused.
    assert!(s.gateway.set_fact("price_sheet", &FactVersion::Number(7), "admin").is_err());
    let s = setup("facts", &examples::program("web-publication"));
    s.gateway.set_fact("price_sheet", &FactVersion::Number(7), "admin").unwrap();
    assert_eq!(s.gateway.state().unwrap()["facts"]["price_sheet"], 7);
}

#[test]
fn a_subject_with_one_mandate_gets_it_and_one_with_several_is_denied_ambiguous() {
    let text = r#"
mandate a for "user:alice" { holder "agent:one" holder "agent:two" allow make_payment }
mandate b for "user:alice" { holder "agent:two" allow make_payment }
"#;
    let s = setup("ambiguous", &examples::compile(&[("m.remit".into(), text.into())]));
    let call = |agent: &str| {
        json!({"subject": {"id": agent}, "action": {"name": "make_payment", "arguments": {}}}).to_string().into_bytes()
    };
    let one = s.gateway.decide(&call("agent:one"));
    assert!(one.allowed(), "{}", one.decision);
    assert_eq!(decision(&one)["mandate_chain"], json!(["a"]));
    let two = s.gateway.decide(&call("agent:two"));
    assert_eq!(two.reasons, [REASON_AMBIGUOUS]);
    // A malformed request goes to the module as it came, and is logged.
    let garbage = s.gateway.decide(b"{\"subject\": ");
    assert_eq!(garbage.reasons, ["request.malformed"]);
    assert!(garbage.logged.is_some());
}

fn view_orders() -> Vec<u8> {
    json!({
        "subject": {"id": "agent:shopper", "credential": {"id": "cred-1", "scopes": ["wallet.all"]}},
        "action": {"name": "view_orders", "arguments": {"merchant": "acme-grocer"}},
        "context": {"mandate": "wallet"}
    })
    .to_string()
    .into_bytes()
}

fn stop(id: &str, level: &str, mandate: Option<&str>, principal: Option<&str>) -> StopRecord {
    StopRecord {
        id: id.into(),
        level: level.into(),
        mandate: mandate.map(str::to_string),
        principal: principal.map(str::to_string),
    }
}

#[test]
fn a_principal_stop_reaches_the_principals_mandates_and_the_decision_names_it() {
    let s = setup("principal-stop", &examples::static_wallet_program());
    assert!(s.gateway.decide(&view_orders()).allowed());
    s.gateway.set_stop_record(&stop("STOP-ALICE-1", "revoke", None, Some("user:alice")), "admin").unwrap();
    let paid = s.gateway.decide(&payment("20.00 USD", "op-1"));
    assert_eq!(paid.reasons, ["stop.active"]);
    let rules = &decision(&paid)["rules"];
    assert_eq!(rules.as_array().unwrap().len(), 1, "{rules}");
    assert_eq!(rules[0]["mandate"], "wallet");
    assert_eq!(rules[0]["rule"], "stop STOP-ALICE-1 (revoke)");
    // `revoke` refuses side effects only: reads go on.
    assert!(s.gateway.decide(&view_orders()).allowed());
    // The stop was filled into the request in the documented shape, and logged.
    let state = s.gateway.state().unwrap();
    assert_eq!(state["stops_by_id"], json!([{"id": "STOP-ALICE-1", "level": "revoke", "principal": "user:alice"}]));
    assert!(log(&s.store).iter().any(|e| e.kind == "stop" && e.body.contains("STOP-ALICE-1")));
    // Another principal's stop changes nothing; a principal of no mandate, a bad level, both targets are refused.
    s.gateway.clear_stop_record("STOP-ALICE-1", "admin").unwrap();
    assert!(s.gateway.decide(&payment("20.00 USD", "op-2")).allowed());
    assert!(s.gateway.set_stop_record(&stop("S", "revoke", None, Some("user:bob")), "admin").is_err());
    assert!(s.gateway.set_stop_record(&stop("S", "halt", Some("wallet"), None), "admin").is_err());
    assert!(s.gateway.set_stop_record(&stop("S", "pause", Some("wallet"), Some("user:alice")), "admin").is_err());
    assert!(s.gateway.clear_stop_record("STOP-ALICE-1", "admin").is_err(), "cleared already");
    assert!(s.gateway.decide(&payment("20.00 USD", "op-3")).allowed());
}

#[test]
fn a_quarantine_refuses_reads_too_and_a_bare_stop_still_works_beside_it() {
    let s = setup("quarantine", &examples::static_wallet_program());
    s.gateway.set_stop_record(&stop("STOP-WALLET-9", "quarantine", Some("wallet"), None), "admin").unwrap();
    let read = s.gateway.decide(&view_orders());
    assert_eq!(read.reasons, ["stop.active"]);
    assert_eq!(decision(&read)["rules"][0]["rule"], "stop STOP-WALLET-9 (quarantine)");
    // A bare stop on the same mandate is weaker: the quarantine is still the one named.
    s.gateway.set_stop("wallet", true, "admin").unwrap();
    let paid = s.gateway.decide(&payment("20.00 USD", "op-1"));
    assert_eq!(decision(&paid)["rules"][0]["rule"], "stop STOP-WALLET-9 (quarantine)");
    s.gateway.clear_stop_record("STOP-WALLET-9", "admin").unwrap();
    assert!(s.gateway.decide(&view_orders()).allowed());
    assert_eq!(decision(&s.gateway.decide(&payment("20.00 USD", "op-2")))["rules"][0]["rule"], "stop");
    // A forged stop in the request is removed like every gateway field.
    let mut forged: Value = serde_json::from_slice(&view_orders()).unwrap();
    forged["context"]["stops"] = json!([{"id": "X", "level": "pause", "mandate": "nope"}, 7]);
    assert!(s.gateway.decide(forged.to_string().as_bytes()).allowed());
}

#[test]
fn a_holder_pattern_picks_the_mandate_counts_for_ambiguity_and_makes_an_agent() {
    let text = r#"
mandate club for "org:club" { holder under "agent:club/" allow make_payment }
mandate desk for "org:club" { holder under "agent:club/desk/" allow make_payment }
"#;
    let s = setup("patterns", &examples::compile(&[("m.remit".into(), text.into())]));
    let call = |agent: &str| {
        json!({"subject": {"id": agent}, "action": {"name": "make_payment", "arguments": {}}}).to_string().into_bytes()
    };
    let bot = s.gateway.decide(&call("agent:club/bot-1"));
    assert!(bot.allowed(), "{}", bot.decision);
    assert_eq!(decision(&bot)["mandate_chain"], json!(["club"]));
    // Under both prefixes: two mandates, so the request must name one.
    assert_eq!(s.gateway.decide(&call("agent:club/desk/evening")).reasons, [REASON_AMBIGUOUS]);
    // Under no prefix (`..` climbs out of it): no mandate, denied by the module.
    assert_eq!(s.gateway.decide(&call("agent:club/../x")).outcome, "deny");
    // An identity held by a pattern is an agent: it never approves; others may.
    assert!(!s.gateway.may_approve("agent:club/bot-1"));
    assert!(s.gateway.may_approve("agent:clubhouse"));
}

#[test]
fn a_changed_deleted_or_reordered_log_entry_is_detected() {
    let s = setup("tamper", &examples::static_wallet_program());
    for op in ["op-1", "op-2", "op-3", "op-4"] {
        s.gateway.decide(&payment("20.00 USD", op));
    }
    assert_eq!(audit::verify(log(&s.store)).unwrap(), 4);
    s.store.execute_raw("UPDATE log SET body = replace(body, 'op-2', 'op-X') WHERE seq = 2").unwrap();
    let broken = audit::verify(log(&s.store)).unwrap_err();
    assert_eq!(broken.seq, 2);
    assert!(broken.problem.contains("changed"), "{}", broken.problem);
    s.store.execute_raw("UPDATE log SET body = replace(body, 'op-X', 'op-2') WHERE seq = 2").unwrap();
    assert_eq!(audit::verify(log(&s.store)).unwrap(), 4);
    s.store.execute_raw("DELETE FROM log WHERE seq = 3").unwrap();
    assert_eq!(audit::verify(log(&s.store)).unwrap_err().seq, 4);
    // Moving entry 4 into the hole: its `prev` no longer fits.
    s.store.execute_raw("UPDATE log SET seq = 3 WHERE seq = 4").unwrap();
    assert_eq!(audit::verify(log(&s.store)).unwrap_err().seq, 3);
}

/// A store that is down.
struct Down;

impl Store for Down {
    fn begin(&self) -> StoreResult<Box<dyn Tx + '_>> {
        Err(StoreError("disk I/O error".into()))
    }
}

#[test]
fn a_store_that_fails_denies_every_call() {
    let program = examples::static_wallet_program();
    let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
    let gateway = Gateway::new(policy(&program), Arc::new(Down), clock, Config::default());
    let decided = gateway.decide(&payment("20.00 USD", "op-1"));
    assert_eq!(decided.outcome, "deny");
    assert_eq!(decided.reasons, [REASON_STORE]);
    assert!(decided.logged.is_none());
    // A full disk: a store whose writes fail after the decision also denies, and nothing is half-written.
    let s = setup("full", &program);
    s.store
        .execute_raw(
            "CREATE TRIGGER full BEFORE INSERT ON log BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END;",
        )
        .unwrap();
    let decided = s.gateway.decide(&payment("20.00 USD", "op-1"));
    assert_eq!(decided.reasons, [REASON_STORE]);
    s.store.execute_raw("DROP TRIGGER full").unwrap();
    assert!(s.store.begin().unwrap().operations("op-1").unwrap().is_empty(), "the obligations rolled back");
    assert!(s.gateway.decide(&payment("20.00 USD", "op-1")).allowed(), "the counter was not incremented");
}

fn wallet_files(replace: &[(&str, &str)]) -> Vec<(String, String)> {
    let dir = examples::static_wallet();
    ["catalog.remit", "policy.remit"]
        .iter()
        .map(|name| {
            let mut text = std::fs::read_to_string(dir.join(name)).unwrap();
            for (from, to) in replace {
                text = text.replace(from, to);
            }
            (name.to_string(), text)
        })
        .collect()
}

#[test]
fn shadow_mode_logs_the_policys_decision_and_answers_allow() {
    let program = examples::static_wallet_program();
    let config = Config { shadow_mandates: vec!["wallet".into()], ..Config::default() };
    let s = setup_with("shadow", policy(&program), config);
    let (gateway, store) = (&s.gateway, &s.store);
    let over = gateway.decide(&payment("120.00 USD", "op-1"));
    assert!(over.allowed());
    assert_eq!(over.reasons, ["gateway.shadow"]);
    let would: Value = serde_json::from_str(over.shadowed.as_deref().unwrap()).unwrap();
    assert_eq!(would["reasons"], json!(["limit.exceeded"]));
    let escalated = gateway.decide(&payment("80.00 USD", "op-2"));
    assert!(escalated.allowed() && escalated.access_request.is_none(), "no access request in shadow mode");
    // An allow is an allow: its obligations are carried out.
    let allowed = gateway.decide(&payment("20.00 USD", "op-3"));
    assert!(allowed.allowed() && allowed.shadowed.is_none());
    assert_eq!(store.begin().unwrap().counter("payment_per_op", "operation:op-3").unwrap(), 1);
    let entries = log(store);
    let first: Value = serde_json::from_str(&entries[0].body).unwrap();
    assert_eq!(first["decision"]["decision"], "deny", "the log has the policy's decision");
    assert_eq!(first["shadow"]["answered"], "allow");
}

#[test]
fn replay_reports_the_decisions_another_policy_would_change() {
    let s = setup("replay", &examples::static_wallet_program());
    for (amount, op) in [("20.00 USD", "op-1"), ("80.00 USD", "op-2"), ("120.00 USD", "op-3")] {
        s.gateway.decide(&payment(amount, op));
    }
    s.gateway.decide(b"not json");
    let entries = log(&s.store);
    let same = policy(&examples::static_wallet_program()).compiled;
    let report = remit_gateway::replay::replay(&entries, &same).unwrap();
    assert_eq!((report.replayed, report.changes.len()), (4, 0), "the same policy decides the same");
    // Approvals above 90 USD only, and a cap of 150 USD.
    let wider = examples::compile(&wallet_files(&[("> 60 USD", "> 90 USD"), ("<= 100 USD", "<= 150 USD")]));
    let report = remit_gateway::replay::replay(&entries, &policy(&wider).compiled).unwrap();
    let summary: Vec<(String, String)> = report.changes.iter().map(|c| (c.before.clone(), c.after.clone())).collect();
    assert_eq!(summary, [("escalate".into(), "allow".into()), ("deny".into(), "escalate".into())]);
    assert_eq!(report.changes.iter().filter(|c| c.widens()).count(), 1);
}

#[test]
fn an_access_request_is_explained_from_its_log_entry_only_with_the_sources_of_the_policy_that_decided() {
    use remit_gateway::NoExplanation;
    let wallet = examples::static_wallet_program();
    let s = setup("explain", &wallet);
    let escalated = s.gateway.decide(&payment("80.00 USD", "op-1"));
    let request = s.gateway.access_request(&escalated.access_request.unwrap().id).unwrap().unwrap();
    // A module alone cannot say which clause did what.
    assert_eq!(s.gateway.explain(&request).unwrap_err(), NoExplanation::NoSources);
    s.gateway.swap_policy(policy(&wallet).with_program(Arc::new(wallet.clone())).unwrap());
    let explanation = s.gateway.explain(&request).unwrap();
    assert_eq!(explanation.decision.outcome.as_str(), "escalate");
    assert_eq!(explanation.decision.reasons, ["approval.missing"]);
    let gate = explanation.mandates[0].steps.iter().find(|s| s.text.starts_with("require approval")).unwrap();
    assert!(gate.decided && gate.effect.contains("no presented approval satisfies it"), "{gate:?}");
    assert_eq!(explanation.notes.len(), 1, "the decision is re-decided as it was: {:?}", explanation.notes);
    // Sources of another policy than the one that decided are not used to explain it.
    let other = examples::compile(&[
        ("a.remit".into(), std::fs::read_to_string("tests/fixtures/wallet-static/policy.remit").unwrap()),
        ("catalog.remit".into(), std::fs::read_to_string("tests/fixtures/wallet-static/catalog.remit").unwrap()),
        ("note.remit".into(), "// version B\n".into()),
    ]);
    s.gateway.swap_policy(policy(&other).with_program(Arc::new(other.clone())).unwrap());
    let NoExplanation::Unexplainable(why) = s.gateway.explain(&request).unwrap_err() else { panic!() };
    assert!(why.contains("was made by policy") && why.contains(&other.hash), "{why}");
    // A program must be the module's policy.
    assert!(policy(&wallet).with_program(Arc::new(other)).is_err());
}

#[test]
fn masked_arguments_are_explained_as_logged_and_a_changed_outcome_is_said() {
    let wallet = examples::static_wallet_program();
    let config = Config { mask: vec!["amount".into()], ..Config::default() };
    let served = policy(&wallet).with_program(Arc::new(wallet.clone())).unwrap();
    let s = setup_with("mask", served, config);
    let gateway = &s.gateway;
    let escalated = gateway.decide(&payment("80.00 USD", "op-1"));
    let request = gateway.access_request(&escalated.access_request.unwrap().id).unwrap().unwrap();
    let explanation = gateway.explain(&request).unwrap();
    // `"***"` is no amount: the re-decision differs from the gateway's, and the page says why.
    let said = explanation.notes.join("\n");
    assert!(said.contains("the gateway decided escalate (approval.missing)"), "{said}");
    assert!(said.contains("the log masks `amount`"), "{said}");
}

#[test]
fn a_store_of_schema_version_2_gains_stops_with_ids() {
    let wallet = examples::static_wallet_program();
    let s = setup("schema-2", &wallet);
    s.gateway.set_stop("wallet", true, "admin").unwrap();
    // Make it a version 2 store: no `stop_records` table.
    s.store.execute_raw("DROP TABLE stop_records; PRAGMA user_version = 2;").unwrap();
    let path = s.dir.join("state.db");
    assert!(SqliteStore::open_existing(&path).is_ok(), "audit readers read a version 2 log");
    let upgraded = Arc::new(SqliteStore::open(&path, Durability::Process).unwrap());
    let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
    let gateway = Gateway::new(policy(&wallet), upgraded.clone(), clock, Config::default());
    // The bare stop survived; a stop with an id can be set now.
    assert_eq!(gateway.decide(&payment("20.00 USD", "op-1")).reasons, ["stop.active"]);
    let quarantine = stop("STOP-Q", "quarantine", Some("wallet"), None);
    gateway.set_stop_record(&quarantine, "admin").unwrap();
    assert_eq!(gateway.decide(&view_orders()).reasons, ["stop.active"]);
    drop(gateway);
    drop(upgraded);
    // A store of a later version than this gateway's is refused.
    let later = SqliteStore::open(&path, Durability::Process).unwrap();
    later.execute_raw("PRAGMA user_version = 5;").unwrap();
    drop(later);
    assert!(SqliteStore::open(&path, Durability::Process).is_err());
}

#[test]
fn a_store_of_schema_version_1_is_upgraded_and_its_old_requests_say_they_cannot_be_explained() {
    let wallet = examples::static_wallet_program();
    let s = setup("schema-1", &wallet);
    let escalated = s.gateway.decide(&payment("80.00 USD", "op-1"));
    let id = escalated.access_request.unwrap().id;
    // Make it a version 1 store: no `log_seq` column.
    s.store.execute_raw("ALTER TABLE access_requests DROP COLUMN log_seq; PRAGMA user_version = 1;").unwrap();
    let path = s.dir.join("state.db");
    assert!(SqliteStore::open_existing(&path).is_ok(), "audit readers read a version 1 log");
    let upgraded = SqliteStore::open(&path, Durability::Process).unwrap();
    let request = upgraded.begin().unwrap().access_request(&id).unwrap().unwrap();
    assert_eq!(request.log_seq, None);
    let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
    let served = policy(&wallet).with_program(Arc::new(wallet.clone())).unwrap();
    let gateway = Gateway::new(served, Arc::new(upgraded), clock, Config::default());
    let remit_gateway::NoExplanation::Unexplainable(why) = gateway.explain(&request).unwrap_err() else { panic!() };
    assert!(why.contains("before the store recorded"), "{why}");
    // New requests in the upgraded store record their entry.
    let again = gateway.decide(&payment("70.00 USD", "op-2"));
    let fresh = gateway.access_request(&again.access_request.unwrap().id).unwrap().unwrap();
    assert!(fresh.log_seq.is_some() && gateway.explain(&fresh).is_ok());
}

#[test]
fn the_checkpoint_thread_copies_committed_decisions_into_the_database_file() {
    let wallet = examples::static_wallet_program();
    let s = setup("checkpoint", &wallet);
    let database = s.dir.join("state.db");
    let before = std::fs::metadata(&database).unwrap().len();
    for n in 0..300 {
        assert!(s.gateway.decide(&payment("20.00 USD", &format!("op-{n}"))).allowed());
    }
    // A commit checkpoints by itself only past 10,000 pages (40 MB): these few pages reach the database file only
    // through the checkpoint thread (every 100 ms).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::metadata(&database).unwrap().len() <= before && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(std::fs::metadata(&database).unwrap().len() > before, "nothing was checkpointed");
    assert_eq!(audit::verify(audit::read_all(s.store.as_ref()).unwrap()).unwrap(), 300);
}

/// Under a steady stream of commits the checkpoint thread still ends its checkpoints, so the WAL starts again from
/// its beginning long before the 10,000 frames at which a commit checkpoints by itself (an fsync of everything copied
/// since the last one, while every decision waits: the p99 of BENCHMARKS.md's "Gateway over HTTP"). A passive
/// checkpoint alone ended only when no commit came while it copied, which under such a stream is never: the WAL then
/// grew to 10,000 frames (41 MB), again and again.
#[test]
fn under_a_steady_stream_of_commits_the_wal_starts_again_before_a_commit_would_checkpoint() {
    let dir = std::env::temp_dir().join(format!("remit-gateway-core-wal-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let store = SqliteStore::open(&dir.join("state.db"), Durability::Process).unwrap();
    // Each entry's body spans three pages (a leaf and two overflow pages): 9,000 transactions write 27,000 frames or
    // more, a commit every few hundred µs, with a short pause between them (as the committer hands out a batch's
    // results between its transactions).
    let body = "x".repeat(10_000);
    for n in 0..9_000 {
        let mut tx = store.begin().unwrap();
        tx.append_log(n, "test", &body).unwrap();
        tx.commit().unwrap();
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    let frames = |bytes: u64| (bytes.saturating_sub(32)) / (4096 + 24);
    let wal = frames(std::fs::metadata(dir.join("state.db-wal")).unwrap().len());
    assert!(wal < 9_000, "the WAL grew to {wal} frames: it did not start again before a commit had to checkpoint");
    assert_eq!(audit::verify(audit::read_all(&store).unwrap()).unwrap(), 9_000);
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
}

/// A tool that names its target argument (`target args.path`): the gateway sets `resource.id` from it, whatever the
/// caller sent, so a scope on `resource.id` and an approval bound to the target apply to calls that have no resource
/// (MCP). The metadata carries the target, also inside a built module.
#[test]
fn the_target_argument_fills_the_resource() {
    let text = r#"
        tool read_text_file(path: string, head: int) {
          effects read_only
          target args.path
        }
        mandate files for "user:owner" {
          holder "agent:coder"
          allow read_text_file
          scope read_text_file: resource.id under "workspace/"
        }
    "#;
    let program = examples::compile(&[("files.remit".to_string(), text.to_string())]);
    let meta = PolicyMeta::from_program(&program);
    assert_eq!(meta.target_of("read_text_file"), Some("path"));
    let built = remit_lang::wasm::meta::embed(&remit_lang::wasm::compile(&program).unwrap(), &meta);
    assert_eq!(remit_lang::wasm::meta::extract(&built).unwrap().unwrap().target_of("read_text_file"), Some("path"));

    let setup = setup("target", &program);
    let read = |arguments: Value, resource: Option<&str>| {
        let mut request = json!({"subject": {"id": "agent:coder"},
                                 "action": {"name": "read_text_file", "arguments": arguments}});
        if let Some(id) = resource {
            request["resource"] = json!({"id": id});
        }
        let decided = setup.gateway.decide(request.to_string().as_bytes());
        (decided.outcome.clone(), decided.reasons.clone())
    };
    assert_eq!(read(json!({"path": "workspace/a.txt"}), None).0, "allow");
    // The caller's resource does not count: the argument is what the tool acts on.
    assert_eq!(read(json!({"path": "workspace/a.txt"}), Some("elsewhere/b")).0, "allow");
    assert_eq!(read(json!({"path": "secret.txt"}), Some("workspace/a.txt")).1, ["scope.outside"]);
    assert_eq!(read(json!({"path": "workspace/../secret.txt"}), None).1, ["scope.outside"]);
    // No string to take the target from: no resource, and the scope fails closed.
    assert_eq!(read(json!({"head": 3}), Some("workspace/a.txt")).1, ["scope.outside"]);
    assert_eq!(read(json!({"path": 7}), None).0, "deny");
    let entries = audit::read_all(setup.store.as_ref()).unwrap();
    let ignored = entries.iter().filter(|e| e.body.contains(r#""ignored":["resource.id"]"#)).count();
    assert_eq!(ignored, 3, "a replaced resource is recorded");
}

/// Queued entries (an MCP call's outcome) go into the log with the next batch of decisions, before its decisions,
/// or when flushed; the chain holds either way.
#[test]
fn queued_entries_are_written_with_the_next_decisions_or_when_flushed() {
    let s = setup("queued", &examples::static_wallet_program());
    s.gateway.decide(&payment("20.00 USD", "op-1"));
    s.gateway.queue_outcome(&json!({"decision": "dec-1", "tool": "make_payment", "is_error": false}));
    assert_eq!(log(&s.store).len(), 1, "queued, not written yet");
    s.gateway.decide(&payment("20.00 USD", "op-2"));
    let kinds: Vec<String> = log(&s.store).iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, ["decision", "outcome", "decision"]);
    s.gateway.queue_outcome(&json!({"decision": "dec-2", "tool": "make_payment", "is_error": true}));
    s.gateway.flush_entries().unwrap();
    s.gateway.flush_entries().unwrap();
    let entries = log(&s.store);
    assert_eq!(entries.len(), 4);
    assert!(entries[3].body.contains("dec-2"), "{}", entries[3].body);
    assert_eq!(audit::verify(entries).unwrap(), 4);
}

const DEFERRING: &str = r#"
tool look(path: string) {
  effects read_only
  level research
}

mandate shop for "user:alice" {
  holder "agent:shopper"
  allow look
  allow make_payment
  require approval commercial_terms for make_payment
}
"#;

fn look(subject: &str) -> Vec<u8> {
    json!({"subject": {"id": subject}, "action": {"name": "look", "arguments": {"path": "a.txt"}}})
        .to_string()
        .into_bytes()
}

/// `decide_deferring` (remit mcp-proxy): a decision that changes nothing but the log is answered before its entry
/// is written — the entry waits in the queue with outcome entries, in order, until the next decision that changes the
/// state (committed with the queue before it, before it is answered) or the next flush. While writing the queue
/// fails, nothing is deferred: a decision is committed before it is answered, so a store that cannot be written
/// denies.
#[test]
fn deferred_entries_wait_in_order_and_state_changes_are_committed_before_the_answer() {
    let s = setup("deferred", &examples::compile(&[("shop.remit".into(), DEFERRING.into())]));
    let body = |e: &remit_gateway::store::LogEntry| serde_json::from_str::<Value>(&e.body).unwrap();
    let allowed = s.gateway.decide_deferring(&look("agent:shopper"));
    assert!(allowed.allowed(), "{}", allowed.decision);
    assert_eq!(allowed.logged, None);
    let denied = s.gateway.decide_deferring(&look("agent:stranger"));
    assert_eq!(denied.outcome, "deny");
    s.gateway.queue_outcome(&json!({"decision": allowed.id, "tool": "look", "is_error": false}));
    assert!(log(&s.store).is_empty(), "nothing written yet");

    // An escalation files an access request: committed before it is answered, after what was queued.
    let escalated = s.gateway.decide_deferring(&gated_payment());
    assert_eq!(escalated.outcome, "escalate", "{}", escalated.decision);
    assert!(escalated.logged.is_some());
    let entries = log(&s.store);
    let ids: Vec<Value> =
        entries.iter().map(|e| body(e).get("id").or(body(e).get("decision")).cloned().unwrap()).collect();
    assert_eq!(ids, [json!(allowed.id), json!(denied.id), json!(allowed.id), json!(escalated.id)]);
    assert_eq!(
        entries.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["decision", "decision", "outcome", "decision"]
    );
    let request = escalated.access_request.clone().unwrap();
    assert_eq!(s.gateway.access_request(&request.id).unwrap().unwrap().log_seq, Some(4));

    // The approved retry consumes the approval: consumed in the store before the allow is answered.
    let minted = s.gateway.approve(&request.id, "user:alice").unwrap();
    let paid = s.gateway.decide_deferring(&gated_payment());
    assert!(paid.allowed(), "{}", paid.decision);
    assert!(paid.logged.is_some());
    assert!(s.store.begin().unwrap().approval(&minted[0].id).unwrap().unwrap().consumed);

    // A plain allow waits again, until a flush.
    let before = log(&s.store).len();
    let again = s.gateway.decide_deferring(&look("agent:shopper"));
    assert_eq!(again.logged, None);
    assert_eq!(log(&s.store).len(), before);
    s.gateway.flush_entries().unwrap();
    let entries = log(&s.store);
    assert_eq!(entries.len(), before + 1);
    assert_eq!(body(entries.last().unwrap())["id"], json!(again.id));
    assert_eq!(audit::verify(entries).unwrap() as usize, before + 1);

    // The log cannot be written: the queued entry stays queued, and from then on nothing is deferred — the next
    // plain allow is committed before it is answered, so it is the store's deny.
    s.store
        .execute_raw(
            "CREATE TRIGGER full BEFORE INSERT ON log BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END;",
        )
        .unwrap();
    let queued = s.gateway.decide_deferring(&look("agent:shopper"));
    assert!(queued.allowed(), "the failure is not known yet");
    assert!(s.gateway.flush_entries().is_err());
    let refused = s.gateway.decide_deferring(&look("agent:shopper"));
    assert_eq!(refused.reasons, [REASON_STORE]);
    s.store.execute_raw("DROP TRIGGER full").unwrap();
    // Once it can be written again, the entry that waited goes in and deferring resumes.
    s.gateway.flush_entries().unwrap();
    let entries = log(&s.store);
    assert_eq!(body(entries.last().unwrap())["id"], json!(queued.id));
    assert_eq!(s.gateway.decide_deferring(&look("agent:shopper")).logged, None);
    assert_eq!(audit::verify(entries).unwrap() as usize, before + 2);
}

/// A store that counts its read transactions, and tells its version or not; everything else is SQLite's.
struct CountingReads {
    inner: SqliteStore,
    versioned: bool,
    reads: std::sync::atomic::AtomicUsize,
}

impl Store for CountingReads {
    fn begin(&self) -> StoreResult<Box<dyn Tx + '_>> {
        self.inner.begin()
    }

    fn begin_read(&self) -> StoreResult<Box<dyn Tx + '_>> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.begin_read()
    }

    fn version(&self) -> Option<u64> {
        self.inner.version().filter(|_| self.versioned)
    }
}

/// What deferring decisions read is kept while the store does not change (`gateway::state_cache`): a stream of them
/// opens one read transaction, and every commit — a stop set through the gateway, one written by another connection
/// to the same file (as another process would), a flush of queued entries — is seen by the next decision, which
/// reads again. A store that cannot tell its version is read by every decision.
#[test]
fn deferring_decisions_read_the_store_once_per_change() {
    let program = examples::compile(&[("shop.remit".into(), DEFERRING.into())]);
    for versioned in [false, true] {
        let dir = std::env::temp_dir().join(format!("remit-gateway-core-cache-{versioned}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.db");
        let inner = SqliteStore::open(&path, Durability::Process).unwrap();
        let store = Arc::new(CountingReads { inner, versioned, reads: Default::default() });
        let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
        let gateway = Gateway::new(policy(&program), store.clone(), clock, Config::default());
        let reads = || store.reads.load(std::sync::atomic::Ordering::SeqCst);
        let decide = || gateway.decide_deferring(&look("agent:shopper"));
        let per_change = |n: usize| if versioned { n } else { 0 };

        for _ in 0..5 {
            assert!(decide().allowed());
        }
        assert_eq!(reads(), if versioned { 1 } else { 5 }, "five decisions");
        // A listing reads as those decisions do.
        let listing = |gateway: &Gateway| -> Value {
            serde_json::from_slice(&gateway.visible_tools(&look("agent:shopper")).unwrap()).unwrap()
        };
        assert_eq!(listing(&gateway)["visible"], json!(["look", "make_payment"]));
        assert_eq!(reads(), if versioned { 1 } else { 6 }, "and a listing");
        // A quarantine (it stops reads too) set through the gateway is seen at once, and so is its end.
        let quarantine = stop("Q-1", "quarantine", Some("shop"), None);
        gateway.set_stop_record(&quarantine, "user:alice").unwrap();
        let stopped = decide();
        assert_eq!(stopped.reasons, ["stop.active"], "{}", stopped.decision);
        assert_eq!(listing(&gateway)["visible"], json!([]), "a quarantine hides every tool");
        gateway.clear_stop_record("Q-1", "user:alice").unwrap();
        assert!(decide().allowed());
        assert!(decide().allowed());
        assert_eq!(reads(), per_change(3) + if versioned { 0 } else { 10 });
        // One written by another connection to the file.
        let other = SqliteStore::open(&path, Durability::Process).unwrap();
        let mut tx = other.begin().unwrap();
        tx.set_stop_record(&quarantine).unwrap();
        tx.commit().unwrap();
        assert_eq!(decide().reasons, ["stop.active"]);
        let mut tx = other.begin().unwrap();
        tx.clear_stop_record("Q-1").unwrap();
        tx.commit().unwrap();
        assert!(decide().allowed());
        // The queued entries going in is a commit too: read again after it.
        let before = reads();
        gateway.flush_entries().unwrap();
        assert!(decide().allowed());
        assert!(decide().allowed());
        assert_eq!(reads() - before, if versioned { 1 } else { 2 });
        assert_eq!(log(&store.inner).len(), 12, "every decision is in the log");
        drop(gateway);
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A deferred decision's entry is written from its parts when the queue is flushed: the same entry, masked
/// arguments masked, as the decision committed at once makes (and as the proxy's request object, not serialized
/// first, makes).
#[test]
fn a_deferred_entry_is_the_entry_decide_writes_masks_included() {
    let program = examples::compile(&[("shop.remit".into(), DEFERRING.into())]);
    let config = Config { mask: vec!["path".into()], ..Config::default() };
    let s = setup_with("deferred-mask", policy(&program), config);
    let (gateway, store) = (&s.gateway, &s.store);
    let request = look("agent:shopper");
    let committed = gateway.decide(&request);
    let deferred = gateway.decide_deferring(&request);
    let Value::Object(object) = serde_json::from_slice::<Value>(&request).unwrap() else { panic!() };
    let built = gateway.decide_request_deferring(object);
    assert_eq!(deferred.logged, None);
    assert_eq!(built.logged, None);
    gateway.flush_entries().unwrap();
    let entries = log(store);
    assert_eq!(entries.len(), 3);
    let mut bodies: Vec<Value> = entries.iter().map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    assert_eq!(bodies[0]["request"]["action"]["arguments"]["path"], "***", "{}", bodies[0]);
    for (body, decided) in bodies.iter_mut().zip([&committed, &deferred, &built]) {
        assert_eq!(body["id"], json!(decided.id));
        body["id"] = json!("dec");
    }
    assert_eq!(bodies[1], bodies[0]);
    assert_eq!(bodies[2], bodies[0]);
}
