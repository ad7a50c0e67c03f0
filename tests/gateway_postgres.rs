//! The store shared by several gateways (docs/scaling.md): one store contract run on SQLite and on PostgreSQL, and
//! the promises that must hold across replicas — several `Gateway`s on one database (on SQLite, several handles on
//! one file) — a single-use approval consumed once, a budget of N allowing exactly N, a stop holding on every
//! replica, an access request answered once, and a PostgreSQL that goes away denying `gateway.store-unavailable`
//! and coming back without a restart. The servers are real (scripts/postgres.sh, through tests/support/postgres.rs).

mod support;
#[path = "support/tls.rs"]
mod tls;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use remit_gateway::audit;
use remit_gateway::core::{ActionError, FixedClock, REASON_STORE};
use remit_gateway::store::*;
use remit_gateway::{Config, Durability, Gateway, Policy, PolicyMeta, PostgresOptions, PostgresStore, SqliteStore};
use remit_host::Runtime;
use remit_lang::syntax::ast::FactVersion;
use serde_json::{json, Value};
use support::examples;
use support::postgres::{shared, Server};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

const KINDS: [Kind; 2] = [Kind::Sqlite, Kind::Postgres];

/// `n` handles on one new store of `kind` (SQLite: one file; PostgreSQL: one database, a pool each), as `n`
/// replicas would have; the folder of a SQLite store is removed on drop.
struct Replicas {
    stores: Vec<Arc<dyn Store>>,
    postgres: Vec<Arc<PostgresStore>>,
    dir: Option<PathBuf>,
}

impl Drop for Replicas {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            std::fs::remove_dir_all(dir).ok();
        }
    }
}

fn options(database_clock: bool) -> PostgresOptions {
    PostgresOptions { database_clock, ..PostgresOptions::default() }
}

fn replicas_on(kind: Kind, name: &str, n: usize, server: &Server) -> Replicas {
    match kind {
        Kind::Sqlite => {
            let dir = std::env::temp_dir().join(format!("remit-replicas-{name}-{}", std::process::id()));
            std::fs::remove_dir_all(&dir).ok();
            std::fs::create_dir_all(&dir).unwrap();
            let stores = (0..n)
                .map(|_| Arc::new(SqliteStore::open(&dir.join("state.db"), Durability::Process).unwrap()) as _)
                .collect();
            Replicas { stores, postgres: Vec::new(), dir: Some(dir) }
        }
        Kind::Postgres => {
            let url = server.database(name);
            let postgres: Vec<Arc<PostgresStore>> =
                (0..n).map(|_| Arc::new(PostgresStore::connect(&url, None, &options(true)).unwrap())).collect();
            let stores = postgres.iter().map(|s| s.clone() as Arc<dyn Store>).collect();
            Replicas { stores, postgres, dir: None }
        }
    }
}

fn replicas(kind: Kind, name: &str, n: usize) -> Replicas {
    replicas_on(kind, &format!("{name}_{kind:?}"), n, shared())
}

fn policy_of(source: &str) -> Policy {
    let program = examples::compile(&[("shop.remit".into(), source.into())]);
    let wasm = remit_lang::wasm::compile(&program).unwrap();
    let compiled = Runtime::new().unwrap().load(&wasm).unwrap();
    Policy::new(compiled, PolicyMeta::from_program(&program)).unwrap()
}

/// A gateway per store, serving `source`, by the system's clock (PostgreSQL: the database's).
fn gateways(replicas: &Replicas, source: &str) -> Vec<Arc<Gateway>> {
    let clock = Arc::new(remit_gateway::SystemClock);
    let gateway = |store: &Arc<dyn Store>| {
        Arc::new(Gateway::new(policy_of(source), store.clone(), clock.clone(), Config::default()))
    };
    replicas.stores.iter().map(gateway).collect()
}

/// Runs `n` calls of `request` at once, spread over `gateways` in turn; the number of allows.
fn concurrently(gateways: &[Arc<Gateway>], request: &[u8], n: usize) -> usize {
    let barrier = Barrier::new(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (barrier, gateway) = (&barrier, &gateways[i % gateways.len()]);
                scope.spawn(move || {
                    barrier.wait();
                    gateway.decide(request).allowed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).filter(|a| *a).count()
    })
}

fn log(store: &dyn Store) -> Vec<LogEntry> {
    audit::read_all(store).unwrap()
}

/// The decisions of the log, each with its place in the log's order (`gseq`: on SQLite, `seq`).
fn decisions(entries: &[LogEntry]) -> Vec<(u64, Value)> {
    entries
        .iter()
        .filter(|e| e.kind == "decision")
        .map(|e| (e.gseq, serde_json::from_str::<Value>(&e.body).unwrap()))
        .collect()
}

fn outcome(body: &Value) -> &str {
    body["decision"]["decision"].as_str().unwrap_or("")
}

const GATED: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require approval commercial_terms for make_payment
}
"#;

const BUDGET: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require operation id for make_payment
  budget per_op: at most 5 calls to make_payment per operation
}
"#;

fn payment(operation: &str) -> Vec<u8> {
    json!({
        "subject": {"id": "agent:shopper"},
        "action": {"name": "make_payment", "arguments": {"merchant": "acme-grocer", "amount": "80.00 USD"}},
        "resource": {"id": "order:1"},
        "context": {"operation_id": operation}
    })
    .to_string()
    .into_bytes()
}

fn approval(id: &str, mandate: &str, expires_at: i64) -> StoredApproval {
    StoredApproval {
        id: id.into(),
        kind: "k".into(),
        mandate: mandate.into(),
        issued_at: 0,
        expires_at,
        tool: Some("make_payment".into()),
        target: None,
        digest: Some("sha256:d".into()),
        manifest: None,
        single_use: true,
        consumed: false,
        approver: "user:a".into(),
        access_request: None,
        consumed_by: None,
        consumed_at: None,
        agent: Some("agent:shopper".into()),
    }
}

fn request(id: &str, key: &str, created_at: i64, expires_at: i64) -> AccessRequest {
    AccessRequest {
        id: id.into(),
        status: PENDING.into(),
        created_at,
        expires_at,
        principal: Some("user:alice".into()),
        agent: "agent:shopper".into(),
        credential: None,
        mandate: "shop".into(),
        tool: "make_payment".into(),
        target: Some("order:1".into()),
        digest: "sha256:d".into(),
        manifest: None,
        arguments: json!({"amount": "3.3", "note": "ünïcode"}),
        missing_approvals: json!([{"kind": "k"}]),
        reasons: vec!["approval.missing".into()],
        chain: vec!["shop".into()],
        decision_id: format!("dec-{id}"),
        key: key.into(),
        decided_by: None,
        decided_at: None,
        log_seq: Some(1),
        log_writer: None,
        earlier: Vec::new(),
        arguments_truncated: None,
    }
}

/// What every store must do, the same on both.
fn contract(kind: Kind, store: &dyn Store) {
    // Stops, stops with ids and facts: read sorted bytewise, a fact's version keeping its type.
    let mut tx = store.begin().unwrap();
    for stop in ["m-b", "m-a", "M-c", "m-ä", "m-a"] {
        tx.set_stop(stop, true).unwrap();
    }
    tx.set_fact("zeta", &FactVersion::Number(u64::MAX)).unwrap();
    tx.set_fact("alpha", &FactVersion::Text("1e3".into())).unwrap();
    tx.set_fact("Beta", &FactVersion::Number(7)).unwrap();
    for (id, mandate) in [("S-2", Some("m")), ("S-1", None), ("S-3", Some("n"))] {
        let principal = mandate.is_none().then(|| "user:p".to_string());
        let stop = StopRecord { id: id.into(), level: "pause".into(), mandate: mandate.map(str::to_string), principal };
        tx.set_stop_record(&stop).unwrap();
    }
    assert!(tx.clear_stop_record("S-3").unwrap());
    assert!(!tx.clear_stop_record("S-3").unwrap());
    tx.commit().unwrap();
    let state = store.begin_read().unwrap().decision_state().unwrap();
    assert_eq!(state.stops, ["M-c", "m-a", "m-b", "m-ä"], "{kind:?}");
    let facts: Vec<&str> = state.facts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(facts, ["Beta", "alpha", "zeta"], "{kind:?}");
    assert_eq!(state.facts[1].1, FactVersion::Text("1e3".into()), "{kind:?}");
    assert_eq!(state.facts[2].1, FactVersion::Number(u64::MAX), "{kind:?}");
    let ids: Vec<&str> = state.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["S-1", "S-2"], "{kind:?}");
    let mut tx = store.begin().unwrap();
    assert_eq!(tx.decision_state().unwrap(), state);
    tx.set_stop("m-b", false).unwrap();
    assert_eq!(tx.stops().unwrap(), ["M-c", "m-a", "m-ä"], "{kind:?}: a transaction reads its own writes");
    assert_eq!(tx.decision_state().unwrap().stops, ["M-c", "m-a", "m-ä"], "{kind:?}: also after reading them");
    tx.savepoint().unwrap();
    tx.set_fact("zeta", &FactVersion::Number(1)).unwrap();
    assert_eq!(tx.decision_state().unwrap().facts[2].1, FactVersion::Number(1));
    tx.release(false).unwrap();
    assert_eq!(tx.decision_state().unwrap().facts[2].1, FactVersion::Number(u64::MAX), "{kind:?}: rolled back");
    tx.commit().unwrap();

    // Approvals: live ones by mandate in the order asked, then by id; consumed once.
    let mut tx = store.begin().unwrap();
    for a in [approval("a2", "m", 100), approval("a1", "m", 100), approval("a3", "n", 100), approval("a4", "m", 50)] {
        tx.insert_approval(&a).unwrap();
    }
    let live: Vec<String> =
        tx.live_approvals(&["n".into(), "m".into()], 60).unwrap().into_iter().map(|a| a.id).collect();
    assert_eq!(live, ["a3", "a1", "a2"], "{kind:?}");
    assert!(tx.consume_approval("a1", "dec-1", 61).unwrap());
    assert!(!tx.consume_approval("a1", "dec-2", 62).unwrap(), "{kind:?}: consumed once");
    assert!(!tx.consume_approval("nope", "dec-2", 62).unwrap());
    tx.commit().unwrap();
    let consumed = store.begin().unwrap().approval("a1").unwrap().unwrap();
    assert_eq!(
        (consumed.consumed, consumed.consumed_by.as_deref(), consumed.consumed_at),
        (true, Some("dec-1"), Some(61))
    );
    assert_eq!(store.begin().unwrap().approval("a2").unwrap(), Some(approval("a2", "m", 100)), "{kind:?}");

    // Counters, and what a decision reads at once.
    let mut tx = store.begin().unwrap();
    assert_eq!(tx.increment_counter("c", "total").unwrap(), 1);
    assert_eq!(tx.increment_counter("c", "total").unwrap(), 2);
    tx.commit().unwrap();
    let mut tx = store.begin().unwrap();
    let keys = [("z".to_string(), "total".to_string()), ("c".to_string(), "total".to_string())];
    let (approvals, state, counters) = tx.read_for_decision(&["m".into()], &keys, 60).unwrap();
    assert_eq!(counters, [0, 2], "{kind:?}: in the order asked");
    assert_eq!(approvals.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), ["a2"], "{kind:?}");
    assert_eq!(state.stops, ["M-c", "m-a", "m-ä"]);
    drop(tx);
    // Read ahead for a batch: answered as the store would, the transaction's own writes included, also after a
    // savepoint is rolled back.
    let ids = |approvals: Vec<StoredApproval>| approvals.into_iter().map(|a| a.id).collect::<Vec<_>>();
    let mut tx = store.begin().unwrap();
    tx.prefetch(&["m".into(), "n".into()], &keys, 60).unwrap();
    let (approvals, _, counters) = tx.read_for_decision(&["m".into()], &keys, 60).unwrap();
    assert_eq!((ids(approvals), counters), (vec!["a2".to_string()], vec![0, 2]), "{kind:?}");
    tx.savepoint().unwrap();
    tx.count("c", "total").unwrap();
    assert!(tx.consume_approval("a2", "dec-3", 61).unwrap());
    tx.release(true).unwrap();
    let (approvals, _, counters) = tx.read_for_decision(&["n".into(), "m".into()], &keys, 61).unwrap();
    assert_eq!((ids(approvals), counters), (vec!["a3".to_string()], vec![0, 3]), "{kind:?}: its own writes");
    tx.savepoint().unwrap();
    tx.count("c", "total").unwrap();
    tx.release(false).unwrap();
    let (_, _, counters) = tx.read_for_decision(&[], &keys, 61).unwrap();
    assert_eq!(counters, [0, 3], "{kind:?}: the rolled-back count is not counted");
    drop(tx);
    assert_eq!(store.begin().unwrap().counter("c", "total").unwrap(), 2, "{kind:?}: dropped, nothing kept");

    // A batch's counts and operations: kept per decision and written together (on PostgreSQL one statement each
    // for the batch, the counts summed per counter); a decision rolled back takes its own with it — kept unsent, or
    // sent after its savepoint by a read of its own — and never an earlier decision's.
    let op = |decision: &str| OperationRecord {
        operation: "batch-op".into(),
        decision_id: decision.into(),
        tool: "pay".into(),
        time: 70,
    };
    let mut tx = store.begin().unwrap();
    tx.savepoint().unwrap();
    tx.count("batch-b", "total").unwrap();
    tx.count("batch-a", "total").unwrap();
    tx.record_operation(&op("d1")).unwrap();
    tx.release(true).unwrap();
    tx.savepoint().unwrap();
    tx.count("batch-b", "total").unwrap();
    tx.record_operation(&op("d2")).unwrap();
    tx.release(false).unwrap();
    tx.savepoint().unwrap();
    tx.count("batch-b", "total").unwrap();
    tx.record_operation(&op("d3")).unwrap();
    assert_eq!(tx.counter("batch-b", "total").unwrap(), 2, "{kind:?}: its own count and the earlier decision's");
    tx.release(false).unwrap();
    assert_eq!(tx.counter("batch-b", "total").unwrap(), 1, "{kind:?}: rolled back after it was sent");
    tx.savepoint().unwrap();
    tx.count("batch-b", "total").unwrap();
    tx.count("batch-b", "total").unwrap();
    tx.record_operation(&op("d4")).unwrap();
    tx.release(true).unwrap();
    tx.commit().unwrap();
    let mut tx = store.begin_read().unwrap();
    assert_eq!((tx.counter("batch-a", "total").unwrap(), tx.counter("batch-b", "total").unwrap()), (1, 3), "{kind:?}");
    let recorded: Vec<String> = tx.operations("batch-op").unwrap().into_iter().map(|o| o.decision_id).collect();
    assert_eq!(recorded, ["d1", "d4"], "{kind:?}");
    drop(tx);

    // Access requests: one pending per key while live; a new one once it expired.
    let mut tx = store.begin().unwrap();
    tx.insert_access_request(&request("r1", "k", 10, 100)).unwrap();
    assert_eq!(tx.pending_access_request("k", 20).unwrap().map(|r| r.id), Some("r1".into()));
    tx.decide_access_request("r1", APPROVED, "user:alice", 30).unwrap();
    assert_eq!(tx.pending_access_request("k", 40).unwrap(), None);
    tx.insert_access_request(&request("r2", "k", 40, 50)).unwrap();
    tx.insert_access_request(&request("r3", "k", 60, 200)).unwrap();
    assert_eq!(tx.pending_access_request("k", 70).unwrap().map(|r| r.id), Some("r3".into()));
    tx.commit().unwrap();
    let mut tx = store.begin().unwrap();
    let r1 = tx.access_request("r1").unwrap().unwrap();
    assert_eq!((r1.status.as_str(), r1.decided_by.as_deref()), (APPROVED, Some("user:alice")));
    assert_eq!(r1.arguments, json!({"amount": "3.3", "note": "ünïcode"}), "{kind:?}");
    let all: Vec<String> = tx.access_requests(None).unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(all, ["r3", "r2", "r1"], "{kind:?}: newest first");
    let page = tx.access_request_page(Some(PENDING), None, 1, &mut |_| true).unwrap();
    assert_eq!(page.requests.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r3"]);
    let next = tx.access_request_page(Some(PENDING), page.next.as_ref(), 1, &mut |_| true).unwrap();
    assert_eq!(next.requests.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r2"], "{kind:?}");
    drop(tx);

    // The log: a savepoint rolled back takes its writes and its entries with it; the chain holds.
    let mut tx = store.begin().unwrap();
    tx.append_log(100, "stop", "{\"n\":1}").unwrap();
    tx.savepoint().unwrap();
    tx.append_log(101, "stop", "{\"n\":2}").unwrap();
    tx.set_stop("rolled-back", true).unwrap();
    tx.release(false).unwrap();
    tx.savepoint().unwrap();
    tx.release(true).unwrap();
    tx.savepoint().unwrap();
    tx.set_stop("kept", true).unwrap();
    tx.release(true).unwrap();
    let third = tx.append_log(102, "stop", "{\"n\":3}").unwrap();
    assert_eq!(third.seq, 2, "{kind:?}");
    assert_eq!(tx.log_head().unwrap(), (2, third.hash.clone()));
    tx.commit().unwrap();
    let entries = log(store);
    assert_eq!(audit::verify(entries.clone()).unwrap(), 2, "{kind:?}");
    assert_eq!(entries[1].body, "{\"n\":3}");
    let stops = store.begin().unwrap().stops().unwrap();
    assert!(stops.contains(&"kept".to_string()) && !stops.contains(&"rolled-back".to_string()), "{kind:?}");
    // A transaction dropped without a commit leaves nothing.
    let mut tx = store.begin().unwrap();
    tx.append_log(103, "stop", "{}").unwrap();
    tx.set_stop("dropped", true).unwrap();
    drop(tx);
    assert_eq!(log(store).len(), 2, "{kind:?}");
    assert!(!store.begin().unwrap().stops().unwrap().contains(&"dropped".to_string()));

    // Rounds, operations, the bundle revision, signed heads.
    let mut tx = store.begin().unwrap();
    tx.keep_round("round", "{\"x\":1}", 500, 100).unwrap();
    tx.record_operation(&OperationRecord {
        operation: "op".into(),
        decision_id: "d1".into(),
        tool: "t".into(),
        time: 5,
    })
    .unwrap();
    tx.record_operation(&OperationRecord {
        operation: "op".into(),
        decision_id: "d2".into(),
        tool: "t".into(),
        time: 6,
    })
    .unwrap();
    tx.set_bundle_revision(3, "sha256:p").unwrap();
    let head = remit_gateway::head::SignedHead {
        writer: tx.writer().to_string(),
        seq: 2,
        hash: third.hash.clone(),
        time: 102,
        key: "ed25519:k".into(),
        signature: "s".into(),
    };
    tx.insert_signed_head(&head).unwrap();
    tx.commit().unwrap();
    let mut tx = store.begin().unwrap();
    assert_eq!(tx.take_round("round", 600).unwrap(), None, "{kind:?}: expired");
    tx.keep_round("round", "{\"x\":2}", 500, 100).unwrap();
    assert_eq!(tx.take_round("round", 200).unwrap().as_deref(), Some("{\"x\":2}"));
    assert_eq!(tx.take_round("round", 200).unwrap(), None, "{kind:?}: taken once");
    let ops: Vec<String> = tx.operations("op").unwrap().into_iter().map(|o| o.decision_id).collect();
    assert_eq!(ops, ["d1", "d2"], "{kind:?}");
    assert_eq!(tx.bundle_revision().unwrap(), Some((3, "sha256:p".into())));
    assert_eq!(tx.signed_heads().unwrap(), [head]);
    tx.commit().unwrap();

    // The data sets: entities by origin (the admin's attributes win), tuples, ids by type, clearing an origin.
    let mut tx = store.begin().unwrap();
    let attributes = |v: Value| v.as_object().unwrap().clone();
    assert_eq!(tx.entity("todo", "t1").unwrap(), None, "{kind:?}");
    assert!(!tx.put_entity("bundle", "todo", "t1", Some(&attributes(json!({"owner": "bob", "title": "x"})))).unwrap());
    assert!(!tx.put_entity("admin", "todo", "t1", Some(&attributes(json!({"owner": "alice"})))).unwrap());
    tx.put_entity("admin", "todo", "t0", Some(&attributes(json!({"owner": "carol"})))).unwrap();
    assert_eq!(tx.entity("todo", "t1").unwrap(), Some(attributes(json!({"owner": "alice", "title": "x"}))));
    assert_eq!(tx.entity_ids("todo").unwrap(), ["t0", "t1"], "{kind:?}");
    assert!(!tx.set_tuple("admin", "member_of", "u:a", "team:x", true).unwrap());
    assert!(tx.set_tuple("admin", "member_of", "u:a", "team:x", true).unwrap(), "{kind:?}: already there");
    tx.set_tuple("bundle", "member_of", "u:a", "team:b", true).unwrap();
    assert!(tx.holds("member_of", "u:a", "team:x").unwrap());
    assert!(!tx.holds("member_of", "u:b", "team:x").unwrap());
    assert_eq!(tx.related("member_of", "u:a").unwrap(), ["team:b", "team:x"], "{kind:?}");
    assert_eq!(tx.clear_data("bundle").unwrap(), 2, "{kind:?}: one entity and one tuple");
    assert_eq!(tx.entity("todo", "t1").unwrap(), Some(attributes(json!({"owner": "alice"}))));
    tx.set_data_state(&DataState { version: 4, bundle: Some("sha256:b".into()) }).unwrap();
    tx.commit().unwrap();
    let mut tx = store.begin().unwrap();
    assert_eq!(tx.data_state().unwrap(), DataState { version: 4, bundle: Some("sha256:b".into()) });
    assert!(tx.put_entity("admin", "todo", "t0", None).unwrap(), "{kind:?}: deleted");
    assert_eq!(tx.entity_ids("todo").unwrap(), ["t1"]);
    tx.commit().unwrap();

    // Published bundles: ids in the order of publication, the newest read first (or the newest below an id), the
    // bytes as given.
    let mut tx = store.begin().unwrap();
    assert_eq!(tx.published_bundle_id().unwrap(), None, "{kind:?}");
    assert_eq!(tx.published_bundle(None).unwrap(), None, "{kind:?}");
    let bundle = |revision: u64, bytes: &[u8]| PublishedBundle {
        id: 0,
        revision,
        policy: format!("sha256:p{revision}"),
        sha256: format!("sha256:b{revision}"),
        published_by: "ci".into(),
        published_at: 7,
        bytes: bytes.to_vec(),
    };
    let first = tx.publish_bundle(&bundle(2, b"one\0\xff\n")).unwrap();
    let second = tx.publish_bundle(&bundle(1, b"two")).unwrap();
    assert!(second > first, "{kind:?}: {first} then {second}");
    tx.commit().unwrap();
    let mut tx = store.begin_read().unwrap();
    assert_eq!(tx.published_bundle_id().unwrap(), Some(second), "{kind:?}");
    assert_eq!(tx.published_bundle(None).unwrap(), Some(PublishedBundle { id: second, ..bundle(1, b"two") }));
    let older = tx.published_bundle(Some(second)).unwrap().unwrap();
    assert_eq!((older.id, older.revision, older.bytes), (first, 2, b"one\0\xff\n".to_vec()), "{kind:?}");
    assert_eq!(tx.published_bundle(Some(first)).unwrap(), None, "{kind:?}");
}

#[test]
fn the_store_contract_holds_on_sqlite_and_postgresql() {
    for kind in KINDS {
        let replicas = replicas(kind, "contract", 1);
        contract(kind, replicas.stores[0].as_ref());
    }
}

/// The counts of replicas the exactness tests run with: every promise must hold however the calls are spread.
const REPLICA_COUNTS: [usize; 2] = [2, 3];

#[test]
fn three_hundred_calls_on_two_and_three_replicas_with_one_single_use_approval_allow_exactly_once() {
    for (kind, n) in KINDS.into_iter().flat_map(|kind| REPLICA_COUNTS.map(|n| (kind, n))) {
        let replicas = replicas(kind, &format!("single_use_{n}"), n);
        let gateways = gateways(&replicas, GATED);
        let first = gateways[0].decide(&payment("op-1"));
        assert_eq!(first.outcome, "escalate", "{kind:?} × {n}: {}", first.decision);
        let request = first.access_request.clone().unwrap();
        // Approved through another replica (the last).
        let minted = gateways[n - 1].approve(&request.id, "user:alice").unwrap();
        assert_eq!(minted.len(), 1);
        assert_eq!(concurrently(&gateways, &payment("op-1"), 300), 1, "{kind:?} × {n}");
        let entries = log(replicas.stores[1].as_ref());
        assert_eq!(audit::verify(entries.clone()).unwrap(), 1 + 1 + 300, "{kind:?} × {n}: every decision in the log");
        let allows: Vec<Value> =
            decisions(&entries).into_iter().map(|(_, b)| b).filter(|b| outcome(b) == "allow").collect();
        assert_eq!(allows.len(), 1, "{kind:?} × {n}");
        let approval = replicas.stores[0].begin().unwrap().approval(&minted[0].id).unwrap().unwrap();
        assert_eq!(approval.consumed_by.as_deref(), allows[0]["id"].as_str(), "{kind:?} × {n}: consumed by the allow");
    }
}

#[test]
fn a_budget_of_five_allows_exactly_five_of_three_hundred_calls_on_two_and_three_replicas() {
    for (kind, n) in KINDS.into_iter().flat_map(|kind| REPLICA_COUNTS.map(|n| (kind, n))) {
        let replicas = replicas(kind, &format!("budget_{n}"), n);
        let gateways = gateways(&replicas, BUDGET);
        assert_eq!(concurrently(&gateways, &payment("op-1"), 300), 5, "{kind:?} × {n}");
        let counted = replicas.stores[0].begin().unwrap().counter("per_op", "operation:op-1").unwrap();
        assert_eq!(counted, 5, "{kind:?} × {n}");
        let entries = log(replicas.stores[0].as_ref());
        let allows = decisions(&entries).iter().filter(|(_, b)| outcome(b) == "allow").count();
        assert_eq!(allows, 5, "{kind:?} × {n}: the counter equals the allows logged");
        assert_eq!(audit::verify(entries).unwrap(), 300);
        assert!(gateways[n - 1].decide(&payment("op-2")).allowed(), "{kind:?} × {n}: another operation counts anew");
    }
}

/// Calls stream through every replica but one while a stop is set through that one: no call that began after the
/// stop was set is allowed, and in the log no allow follows the stop's entry.
#[test]
fn a_stop_set_through_one_replica_holds_on_the_others_before_the_call_returns() {
    for (kind, n) in KINDS.into_iter().flat_map(|kind| REPLICA_COUNTS.map(|n| (kind, n))) {
        let replicas = replicas(kind, &format!("stop_{n}"), n);
        let gateways = gateways(&replicas, BUDGET.replace("at most 5", "at most 100000").as_str());
        let stopped = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        let (late_allows, calls) = std::thread::scope(|scope| {
            let callers: Vec<_> = (0..8)
                .map(|i| {
                    // Replicas 1 to n - 1 in turn; the stop goes through replica 0.
                    let (gateway, stopped, done) = (&gateways[1 + i % (n - 1)], &stopped, &done);
                    scope.spawn(move || {
                        let (mut late, mut calls) = (0, 0);
                        while !done.load(Ordering::SeqCst) {
                            let after_stop = stopped.load(Ordering::SeqCst);
                            let decided = gateway.decide(&payment(&format!("op-{i}")));
                            calls += 1;
                            late += usize::from(after_stop && decided.allowed());
                        }
                        (late, calls)
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(300));
            gateways[0].set_stop("shop", true, "admin").unwrap();
            stopped.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(300));
            done.store(true, Ordering::SeqCst);
            callers.into_iter().map(|c| c.join().unwrap()).fold((0, 0), |(l, c), (l2, c2)| (l + l2, c + c2))
        });
        assert_eq!(late_allows, 0, "{kind:?} × {n}: {late_allows} allows after the stop returned, of {calls} calls");
        let entries = log(replicas.stores[1].as_ref());
        let stop = entries.iter().find(|e| e.kind == "stop").expect("the stop's entry").gseq;
        let decided = decisions(&entries);
        let stopped_by = |b: &Value| b["decision"]["reasons"] == json!(["stop.active"]);
        let allowed_before = decided.iter().any(|(seq, b)| *seq < stop && outcome(b) == "allow");
        assert!(allowed_before, "{kind:?} × {n}: allows before it");
        assert!(decided.iter().any(|(_, b)| stopped_by(b)), "{kind:?} × {n}: calls went on after the stop, denied");
        // In the log's order, every call the stop denied comes after the stop (it read the stop's commit).
        let early: Vec<u64> = decided.iter().filter(|(seq, b)| *seq < stop && stopped_by(b)).map(|(s, _)| *s).collect();
        assert!(early.is_empty(), "{kind:?} × {n}: calls denied by the stop logged before it: {early:?}");
        // Within each deciding replica's chain (its own order), no allow follows the first call the stop denied.
        let writers: std::collections::BTreeSet<&str> =
            entries.iter().filter(|e| e.kind == "decision").map(|e| e.writer.as_str()).collect();
        assert_eq!(writers.len(), if kind == Kind::Sqlite { 1 } else { n - 1 }, "{kind:?} × {n}: {writers:?}");
        for writer in writers {
            let chain: Vec<&LogEntry> = entries.iter().filter(|e| e.kind == "decision" && e.writer == writer).collect();
            let bodies: Vec<Value> = chain.iter().map(|e| serde_json::from_str(&e.body).unwrap()).collect();
            let first_denied = bodies.iter().position(stopped_by).expect("each replica's calls were stopped");
            let allowed_after = bodies[first_denied..].iter().filter(|b| outcome(b) == "allow").count();
            assert_eq!(allowed_after, 0, "{kind:?} × {n}: allows after a call the stop denied, by `{writer}`");
        }
        if kind == Kind::Sqlite {
            // One writer: the log's order is the order the transactions ran in.
            let after: Vec<u64> =
                decided.iter().filter(|(seq, b)| *seq > stop && outcome(b) == "allow").map(|(s, _)| *s).collect();
            assert!(after.is_empty(), "{kind:?} × {n}: allows logged after the stop: {after:?}");
        }
        audit::verify(entries).unwrap();
    }
}

/// Approvers answer one access request at once, one through each replica: one answer, one set of approvals.
#[test]
fn principals_answering_one_request_on_two_and_three_replicas_mint_one_approval() {
    for (kind, n) in KINDS.into_iter().flat_map(|kind| REPLICA_COUNTS.map(|n| (kind, n))) {
        let replicas = replicas(kind, &format!("answer_once_{n}"), n);
        let gateways = gateways(&replicas, GATED);
        for round in 0..10 {
            let escalated = gateways[round % n].decide(&payment(&format!("op-{round}")));
            let id = escalated.access_request.unwrap().id;
            let barrier = Barrier::new(n);
            let answers: Vec<Result<usize, ActionError>> = std::thread::scope(|scope| {
                let handles: Vec<_> = gateways
                    .iter()
                    .map(|gateway| {
                        let (barrier, id) = (&barrier, &id);
                        scope.spawn(move || {
                            barrier.wait();
                            gateway.approve(id, "user:alice").map(|minted| minted.len())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(answers.iter().filter(|a| a.is_ok()).count(), 1, "{kind:?} × {n}: {answers:?}");
            let minted = replicas.stores[1].begin().unwrap().approvals_of_request(&id).unwrap();
            assert_eq!(minted.len(), 1, "{kind:?} × {n}");
            // The allow consumes it; the next round's call escalates anew.
            let retried = gateways[(round + 1) % n].decide(&payment(&format!("op-{round}")));
            assert!(retried.allowed(), "{kind:?} × {n}");
        }
    }
}

/// Replicas starting at once on an empty database: each sees the schema, which was made once.
#[test]
fn replicas_starting_at_once_migrate_the_schema_once() {
    let url = shared().database("migrate_once");
    let stores: Vec<PostgresStore> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..6).map(|_| scope.spawn(|| PostgresStore::connect(&url, None, &options(true)).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for store in &stores {
        assert_eq!(store.schema_version().unwrap(), 7);
    }
    assert_eq!(stores[0].schema_history().unwrap().len(), 7, "each of the seven migrations applied, once");
    let writers: std::collections::BTreeSet<&str> = stores.iter().map(|s| s.writer()).collect();
    assert_eq!(writers.len(), 6, "a writer each: {writers:?}");
    contract(Kind::Postgres, &stores[3]);
}

/// A database of a later schema is refused, not written by a gateway that does not know it.
#[test]
fn a_database_of_a_later_schema_is_refused() {
    let url = shared().database("later_schema");
    let store = PostgresStore::connect(&url, None, &options(true)).unwrap();
    store.execute_raw("INSERT INTO remit_schema (version, applied_by) VALUES (99, 'a later gateway')").unwrap();
    let refused = PostgresStore::connect(&url, None, &options(true)).unwrap_err();
    assert!(refused.0.contains("schema version 99"), "{refused}");
}

/// The decisions of every replica are timed by the database's clock: a gateway whose own clock is a year off still
/// logs the database's time, and expires approvals by it.
#[test]
fn replicas_decide_by_the_database_clock() {
    let url = shared().database("one_clock");
    let store = Arc::new(PostgresStore::connect(&url, None, &options(true)).unwrap());
    let system = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let off = Arc::new(FixedClock::new(system - 365 * 86_400));
    let gateway = Gateway::new(policy_of(BUDGET), store.clone(), off, Config::default());
    assert!(gateway.decide(&payment("op-1")).allowed());
    let entries = log(store.as_ref());
    let time = entries.last().unwrap().time;
    assert!((time - system).abs() < 60, "the entry's time {time} is the database's, not the gateway's");
    let tx = store.begin().unwrap();
    assert!((tx.now().unwrap() - system).abs() < 60);
    drop(tx);
    // Without the database's clock, the gateway's decides.
    let own = PostgresStore::connect(&url, None, &options(false)).unwrap();
    assert_eq!(own.begin().unwrap().now(), None);
}

/// The server goes away: every call is denied `gateway.store-unavailable` (never allowed), and once it is back the
/// same gateway decides again, without a restart.
#[test]
fn postgresql_unreachable_denies_store_unavailable_and_recovers_without_restart() {
    let server = Server::start();
    let replicas = replicas_on(Kind::Postgres, "unreachable", 2, &server);
    let gateways = gateways(&replicas, BUDGET.replace("at most 5", "at most 1000").as_str());
    for gateway in &gateways {
        assert!(gateway.decide(&payment("op-1")).allowed());
    }
    server.pause();
    for gateway in &gateways {
        for _ in 0..3 {
            let started = Instant::now();
            let decided = gateway.decide(&payment("op-1"));
            assert_eq!(decided.outcome, "deny");
            assert_eq!(decided.reasons, [REASON_STORE]);
            assert!(decided.logged.is_none());
            assert!(started.elapsed().as_secs() < 20, "denied in bounded time");
        }
        assert!(gateway.set_stop("shop", true, "admin").is_err(), "an admin action fails too");
    }
    server.resume();
    for gateway in &gateways {
        let decided = gateway.decide(&payment("op-1"));
        assert!(decided.allowed(), "the first call after the server is back: {}", decided.decision);
    }
    let entries = log(replicas.stores[0].as_ref());
    assert_eq!(audit::verify(entries.clone()).unwrap(), 4, "the denied calls were not logged, the others were");
    assert_eq!(replicas.stores[0].begin().unwrap().counter("per_op", "operation:op-1").unwrap(), 4);
    // A password given apart from the URL (`remit serve --store-password-file`, `REMIT_STORE_PASSWORD`).
    let (bare, password) = server.url_and_password(server.url());
    assert!(PostgresStore::connect(&bare, Some(&password), &options(true)).is_ok());
    let wrong = PostgresStore::connect(&bare, Some("wrong"), &options(true)).unwrap_err();
    assert!(!wrong.0.contains(&password), "{wrong}");
    let _ = &replicas.postgres;
}

/// The server stops answering without closing its connections (its processes frozen: a host that hangs, a network
/// that drops packets): a call is denied `gateway.store-unavailable` once the store has waited its answer timeout
/// (here 2 s), rather than for as long as TCP keeps the connection; the next ones within the connect timeout (5 s),
/// the pool's stale connections dropped; and once the server answers again the same gateway decides. Nothing of the
/// calls denied is logged.
#[test]
fn a_database_that_stops_answering_denies_in_bounded_time_and_recovers() {
    let server = Server::start();
    let url = server.database("frozen");
    let answer_timeout = std::time::Duration::from_secs(2);
    let store =
        Arc::new(PostgresStore::connect(&url, None, &PostgresOptions { answer_timeout, ..options(true) }).unwrap());
    let policy = policy_of(BUDGET.replace("at most 5", "at most 1000").as_str());
    let gateway =
        Arc::new(Gateway::new(policy, store.clone(), Arc::new(remit_gateway::SystemClock), Config::default()));
    // Several connections in the pool, all idle when the server freezes.
    assert_eq!(concurrently(std::slice::from_ref(&gateway), &payment("op-1"), 8), 8);
    server.freeze();
    let (sender, answers) = std::sync::mpsc::channel();
    let caller = {
        let gateway = gateway.clone();
        std::thread::spawn(move || {
            for _ in 0..3 {
                let started = Instant::now();
                let decided = gateway.decide(&payment("op-1"));
                let _ = sender.send((decided, started.elapsed()));
            }
        })
    };
    // Bounded however the store behaves: the test thaws the server after 60 s at most.
    let answered: Vec<_> =
        (0..3).map_while(|_| answers.recv_timeout(std::time::Duration::from_secs(60)).ok()).collect();
    server.thaw();
    caller.join().unwrap();
    assert_eq!(answered.len(), 3, "three calls to a server that does not answer, each answered within 60 s");
    for (decided, took) in &answered {
        assert_eq!(decided.reasons, [REASON_STORE], "{}", decided.decision);
        assert!(decided.logged.is_none());
        assert!(*took < std::time::Duration::from_secs(15), "denied after {took:?}");
    }
    assert!(answered[0].1 >= answer_timeout, "the first waited for its answer: {:?}", answered[0].1);
    eprintln!("calls to a frozen server denied after {:?}", answered.iter().map(|(_, took)| took).collect::<Vec<_>>());
    let decided = gateway.decide(&payment("op-1"));
    assert!(decided.allowed(), "the same gateway decides once the server answers: {}", decided.decision);
    assert_eq!(audit::verify(log(store.as_ref())).unwrap(), 9, "the calls denied are not logged");
    assert_eq!(store.begin().unwrap().counter("per_op", "operation:op-1").unwrap(), 9);
}

/// Not a test: decisions per second, and the PostgreSQL store's statements and round trips per decision, on SQLite
/// and on PostgreSQL with one and with two replicas, interleaved round by round in one process; prints the medians.
/// Cases: `pay` (each caller its own operation: a budget counted per call), `hot` (every call the same operation: one
/// counter row for all), `read` (an allow without obligations: only its log entry is written).
/// `cargo test --release --test gateway_postgres -- --ignored --nocapture measure` (docs/scaling.md).
#[test]
#[ignore]
fn measure_decisions_per_second() {
    const CALLERS: usize = 16;
    const CALLS: usize = 2_000;
    const ROUNDS: usize = 5;
    let tool = "tool view_orders(merchant: string) {\n  effects read_only\n}\n";
    let allowed = "  allow make_payment\n  allow view_orders\n";
    let source =
        tool.to_string() + &BUDGET.replace("at most 5", "at most 1000000").replace("  allow make_payment\n", allowed);
    let view =
        json!({"subject": {"id": "agent:shopper"}, "action": {"name": "view_orders", "arguments": {"merchant": "m"}}})
            .to_string()
            .into_bytes();
    let setups: Vec<(&str, Replicas)> = vec![
        ("sqlite, 1 gateway", replicas(Kind::Sqlite, "measure", 1)),
        ("postgresql, 1 replica", replicas(Kind::Postgres, "measure_one", 1)),
        ("postgresql, 2 replicas", replicas(Kind::Postgres, "measure_two", 2)),
    ];
    // Each replica seals its chain every second while it writes, as `remit serve` does.
    for (_, replicas) in &setups {
        for store in &replicas.stores {
            audit::seal_every(store, std::time::Duration::from_secs(1));
        }
    }
    let cases = ["pay", "hot", "read"];
    // (case, setup) → per round: decisions/s, statements and round trips per decision.
    let mut results: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); cases.len() * setups.len()];
    for round in 0..ROUNDS {
        for (c, case) in cases.iter().enumerate() {
            for (i, (_, replicas)) in setups.iter().enumerate() {
                let gateways = gateways(replicas, &source);
                let totals = |replicas: &Replicas| {
                    replicas.postgres.iter().fold((0, 0), |(s, r), store| {
                        let stats = store.stats();
                        (s + stats.statements.load(Ordering::Relaxed), r + stats.round_trips.load(Ordering::Relaxed))
                    })
                };
                let before = totals(replicas);
                let started = Instant::now();
                std::thread::scope(|scope| {
                    for caller in 0..CALLERS {
                        let gateway = &gateways[caller % gateways.len()];
                        let request = match *case {
                            "pay" => payment(&format!("op-{round}-{caller}")),
                            "hot" => payment(&format!("op-{round}")),
                            _ => view.clone(),
                        };
                        scope.spawn(move || {
                            for _ in 0..CALLS / CALLERS {
                                let decided = gateway.decide(&request);
                                assert!(decided.allowed(), "{}", decided.decision);
                            }
                        });
                    }
                });
                let elapsed = started.elapsed().as_secs_f64();
                let after = totals(replicas);
                let calls = CALLS as f64;
                results[c * setups.len() + i].push((
                    calls / elapsed,
                    (after.0 - before.0) as f64 / calls,
                    (after.1 - before.1) as f64 / calls,
                ));
            }
        }
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!("{CALLERS} callers, {CALLS} logged decisions per case and round, {ROUNDS} rounds, medians");
    for (c, case) in cases.iter().enumerate() {
        for (i, (name, _)) in setups.iter().enumerate() {
            let runs = &results[c * setups.len() + i];
            let rate = median(runs.iter().map(|r| r.0).collect());
            let (statements, trips) =
                (median(runs.iter().map(|r| r.1).collect()), median(runs.iter().map(|r| r.2).collect()));
            if name.starts_with("postgresql") {
                let per = format!("{statements:.2} statements, {trips:.2} round trips per decision");
                println!("{case:>4} | {name}: {rate:.0} decisions/s, {per}");
            } else {
                println!("{case:>4} | {name}: {rate:.0} decisions/s");
            }
        }
    }
}

/// Two `remit serve` processes on one database (the password from a file for one, from the environment for the
/// other): a budget of 5 allows exactly 5 of 60 HTTP calls spread over both; one killed, the other goes on; and
/// `remit audit verify` checks the one log of both through the database.
#[test]
fn two_remit_serve_processes_share_one_database_and_one_verifiable_log() {
    use remit_gateway::client::blocking::request;
    use std::process::{Command, Stdio};
    use support::served::Served;
    let url = shared().database("two_processes");
    let (bare, password) = shared().url_and_password(&url);
    let dir = std::env::temp_dir().join(format!("remit-two-processes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shop.remit"), BUDGET).unwrap();
    std::fs::write(dir.join("password"), format!("{password}\n")).unwrap();
    let serve = |password_file: bool| {
        let mut command = Command::new(support::remit_bin());
        command.args(["serve", dir.join("shop.remit").to_str().unwrap(), "--listen", "127.0.0.1:0", "--store", &bare]);
        command.env_remove("REMIT_STORE_PASSWORD").stderr(Stdio::inherit());
        if password_file {
            command.arg("--store-password-file").arg(dir.join("password"));
        } else {
            command.env("REMIT_STORE_PASSWORD", &password);
        }
        Served::start(&mut command)
    };
    let (a, b) = (serve(true), serve(false));
    let decide = |served: &Served, operation: &str| {
        let body = payment(operation);
        let response = request("POST", &format!("{}/v1/decide", served.url), &[], Some(&body)).unwrap();
        assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
        let decision: Value = serde_json::from_slice(&response.body).unwrap();
        decision["decision"] == "allow"
    };
    let allows = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..60)
            .map(|i| {
                let (served, decide) = (if i % 2 == 0 { &a } else { &b }, &decide);
                scope.spawn(move || decide(served, "op-1"))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).filter(|a| *a).count()
    });
    assert_eq!(allows, 5);
    // `/metrics` counts what the store sent to the server.
    let metrics = request("GET", &format!("{}/metrics", b.url), &[], None).unwrap();
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    let sample = |name: &str| -> u64 {
        let line =
            text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}: {text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (trips, statements) = (sample("remit_store_round_trips_total"), sample("remit_store_statements_total"));
    assert!(trips > 0 && statements >= trips, "{trips} round trips, {statements} statements");
    assert!(sample("remit_store_transactions_total") > 0);
    sample("remit_store_conflicts_total");
    let mut a = a;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    assert!(decide(&b, "op-2"), "the other replica goes on");
    let verified = Command::new(support::remit_bin())
        .args(["audit", "verify", &bare])
        .env("REMIT_STORE_PASSWORD", &password)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{said}{}", String::from_utf8_lossy(&verified.stderr));
    assert!(said.contains(" in 2 chains, each holds from its genesis"), "a chain per process: {said}");
    let store = PostgresStore::connect(&url, None, &options(true)).unwrap();
    let entries = log(&store);
    assert_eq!(decisions(&entries).len(), 61, "every decision of both in the log");
    // A changed entry is found.
    let last = entries.iter().rev().find(|e| e.kind == "decision").unwrap();
    store
        .execute_raw(&format!(
            "UPDATE log SET body = replace(body, 'op-2', 'op-3') WHERE writer = '{}' AND seq = {}",
            last.writer, last.seq
        ))
        .unwrap();
    let verified = Command::new(support::remit_bin()).args(["audit", "verify", &url]).output().unwrap();
    let said = String::from_utf8_lossy(&verified.stdout);
    let broken = format!("the chain is broken at entry {} of writer `{}`: its content", last.seq, last.writer);
    assert!(!verified.status.success() && said.contains(&broken), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit serve` on PostgreSQL: `/ready` says 503 while the database is down, and every call is denied
/// `gateway.store-unavailable`; when it is back, ready again and deciding, the same process.
#[test]
fn remit_serve_is_not_ready_while_postgresql_is_down_and_recovers() {
    use remit_gateway::client::blocking::request;
    use std::process::{Command, Stdio};
    use support::served::Served;
    let server = Server::start();
    let url = server.database("ready");
    let dir = std::env::temp_dir().join(format!("remit-ready-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shop.remit"), BUDGET).unwrap();
    let served = Served::start(
        Command::new(support::remit_bin())
            .args(["serve", dir.join("shop.remit").to_str().unwrap(), "--listen", "127.0.0.1:0", "--store", &url])
            .stderr(Stdio::null()),
    );
    let ready = || request("GET", &format!("{}/ready", served.url), &[], None).unwrap().status;
    let decide = || {
        let body = payment("op-1");
        let response = request("POST", &format!("{}/v1/decide", served.url), &[], Some(&body)).unwrap();
        serde_json::from_slice::<Value>(&response.body).unwrap()
    };
    assert_eq!(ready(), 200);
    assert_eq!(decide()["decision"], "allow");
    server.pause();
    assert_eq!(ready(), 503);
    let denied = decide();
    assert_eq!((denied["decision"].as_str(), denied["reasons"][0].as_str()), (Some("deny"), Some(REASON_STORE)));
    server.resume();
    assert_eq!(ready(), 200);
    assert_eq!(decide()["decision"], "allow");
    drop(served);
    std::fs::remove_dir_all(&dir).ok();
}

/// A replica that dies in the middle of a write transaction (its connection cut while it holds the log's lock, a
/// stop set and an entry queued) leaves nothing half done: the database rolls it back and releases the lock, and
/// the other replica's call, waiting for it, goes on.
#[test]
fn a_replica_cut_off_mid_transaction_leaves_nothing_half_done() {
    let url = shared().database("cut_off");
    let victim =
        PostgresStore::connect(&url, None, &PostgresOptions { writer: "victim".into(), ..options(true) }).unwrap();
    let other = Arc::new(PostgresStore::connect(&url, None, &options(true)).unwrap());
    let gateway =
        Gateway::new(policy_of(BUDGET), other.clone(), Arc::new(remit_gateway::SystemClock), Config::default());
    let mut tx = victim.begin().unwrap();
    tx.set_stop("shop", true).unwrap();
    tx.append_log(0, "stop", "{\"mandate\":\"shop\",\"active\":true}").unwrap();
    tx.count("per_op", "operation:op-1").unwrap();
    assert_eq!(tx.stops().unwrap(), ["shop"], "the transaction's writes reached the database");
    let decided = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| gateway.decide(&payment("op-1")));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!waiting.is_finished(), "the other replica waits for the budget's counter, made by the victim");
        other
            .execute_raw(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim' \
                 AND state LIKE 'idle in transaction%'",
            )
            .unwrap();
        waiting.join().unwrap()
    });
    assert!(decided.allowed(), "the stop was never committed: {}", decided.decision);
    assert!(tx.commit().is_err(), "the cut-off transaction cannot commit");
    let entries = log(other.as_ref());
    assert_eq!(audit::verify(entries.clone()).unwrap(), 1);
    assert_eq!(entries[0].kind, "decision");
    assert!(other.begin().unwrap().stops().unwrap().is_empty());
    assert_eq!(other.begin().unwrap().counter("per_op", "operation:op-1").unwrap(), 1, "counted once, by the allow");
}

/// A write that fails after its decision was made (a budget's count, refused by a trigger for one operation): that
/// call is never allowed, the calls batched with it are denied or allowed whole, and the counters equal the allows
/// logged. On PostgreSQL the count waits to go with the next statement, so its failure fails the whole batch.
#[test]
fn a_write_that_fails_after_the_decision_never_allows_and_leaves_nothing_half_done() {
    for kind in KINDS {
        let replicas = replicas(kind, "failing_write", 2);
        let gateways = gateways(&replicas, BUDGET.replace("at most 5", "at most 1000").as_str());
        match kind {
            Kind::Sqlite => {
                let path = replicas.dir.as_ref().unwrap().join("state.db");
                SqliteStore::open(&path, Durability::Process)
                    .unwrap()
                    .execute_raw(
                        "CREATE TRIGGER bad BEFORE INSERT ON counters WHEN NEW.\"window\" = 'operation:op-bad' \
                         BEGIN SELECT RAISE(FAIL, 'bad'); END;",
                    )
                    .unwrap();
            }
            Kind::Postgres => replicas.postgres[0]
                .execute_raw(
                    "CREATE FUNCTION bad() RETURNS trigger AS $$ BEGIN \
                       IF NEW.counter_window = 'operation:op-bad' THEN RAISE EXCEPTION 'bad'; END IF; RETURN NEW; \
                     END $$ LANGUAGE plpgsql; \
                     CREATE TRIGGER bad BEFORE INSERT OR UPDATE ON counters FOR EACH ROW EXECUTE FUNCTION bad();",
                )
                .unwrap(),
        }
        let barrier = Barrier::new(60);
        let decided: Vec<(bool, remit_gateway::Decided)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..60)
                .map(|i| {
                    let (barrier, gateway) = (&barrier, &gateways[i % 2]);
                    scope.spawn(move || {
                        barrier.wait();
                        let bad = i % 3 == 0;
                        (bad, gateway.decide(&payment(if bad { "op-bad" } else { "op-good" })))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (bad, decided) in &decided {
            if *bad {
                assert_eq!(decided.reasons, [REASON_STORE], "{kind:?}: {}", decided.decision);
            }
        }
        // A call alone in its batch is allowed (on PostgreSQL, one batched with a failing call may have been denied).
        assert!(gateways[1].decide(&payment("op-good")).allowed(), "{kind:?}");
        let good_allows = decided.iter().filter(|(_, d)| d.allowed()).count() + 1;
        let entries = log(replicas.stores[0].as_ref());
        audit::verify(entries.clone()).unwrap();
        let logged = decisions(&entries).iter().filter(|(_, b)| outcome(b) == "allow").count();
        assert_eq!(logged, good_allows, "{kind:?}: every allow answered is logged, no other");
        // Read in a read transaction: a write transaction on PostgreSQL makes a missing counter (with 0) to lock it,
        // which the trigger refuses for `op-bad`.
        let mut tx = replicas.stores[1].begin_read().unwrap();
        assert_eq!(tx.counter("per_op", "operation:op-good").unwrap() as usize, good_allows, "{kind:?}");
        assert_eq!(tx.counter("per_op", "operation:op-bad").unwrap(), 0, "{kind:?}");
        assert!(tx.operations("op-bad").unwrap().is_empty(), "{kind:?}");
    }
}

/// Two replicas deciding at once, each sealing its chain while it writes: the log is a chain per replica, each from
/// its genesis, cross-linked by seals; in the order of `gseq`, each chain's entries come in its own order; and
/// `remit audit verify` (through the database, read only) says so.
#[test]
fn two_replicas_writing_at_once_keep_a_chain_each_sealed_by_the_other() {
    let replicas = replicas(Kind::Postgres, "chains", 2);
    let gateways = gateways(&replicas, BUDGET.replace("at most 5", "at most 100000").as_str());
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (stores, done) = (&replicas.postgres, &done);
        let sealer = scope.spawn(move || {
            while !done.load(Ordering::SeqCst) {
                for store in stores {
                    store.seal().unwrap();
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        assert_eq!(concurrently(&gateways, &payment("op-1"), 200), 200);
        done.store(true, Ordering::SeqCst);
        sealer.join().unwrap();
    });
    // One more decision each, then a seal each: each names the other's head (the seals during the run may all
    // have come before the other wrote).
    for (gateway, store) in gateways.iter().zip(&replicas.postgres) {
        assert!(gateway.decide(&payment("op-2")).allowed());
        assert!(store.seal().unwrap());
    }
    let entries = log(replicas.stores[0].as_ref());
    let verified = audit::verify_chains(entries.clone()).unwrap();
    let writers: Vec<&str> = replicas.postgres.iter().map(|s| s.writer()).collect();
    assert_eq!(verified.chains.keys().map(String::as_str).collect::<Vec<_>>(), sorted(&writers));
    assert_eq!(decisions(&entries).len(), 202);
    assert!(verified.seals >= 2 && verified.sealed_heads >= 2, "{verified:?}");
    for writer in &writers {
        let chain: Vec<u64> = entries.iter().filter(|e| e.writer == *writer).map(|e| e.seq).collect();
        assert!(chain.len() > 1 && chain.windows(2).all(|w| w[1] == w[0] + 1), "{writer}: {chain:?}");
        assert_eq!(replicas.stores[0].begin_read().unwrap().log_entry(writer, 1).unwrap().unwrap().writer, *writer);
    }
    assert!(entries.windows(2).all(|w| w[0].gseq < w[1].gseq), "read in the order of gseq");
    let url = shared().database_url("chains_postgres");
    let said = audit_verify(&url);
    assert!(said.0 && said.1.contains("in 2 chains, each holds from its genesis"), "{}", said.1);
    // `remit audit why` and `receipt` find a decision in any chain, and name its entry by writer and number.
    let last = entries.iter().rev().find(|e| e.kind == "decision").unwrap();
    let id = serde_json::from_str::<Value>(&last.body).unwrap()["id"].as_str().unwrap().to_string();
    let remit = |args: &[&str]| {
        let out = std::process::Command::new(support::remit_bin()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let why = remit(&["audit", "why", &id, "--store", &url]);
    let named = format!("(log entry {} of writer `{}`, {})", last.seq, last.writer, last.hash);
    assert!(why.contains(&named), "{why}");
    let receipt: Value =
        serde_json::from_str(&remit(&["audit", "receipt", "--operation", "op-2", "--store", &url])).unwrap();
    let decided = receipt["decisions"].as_array().unwrap();
    assert_eq!(decided.len(), 2, "the two calls of op-2, one through each replica");
    assert_eq!((&decided[1]["writer"], &decided[1]["log_entry"]), (&json!(last.writer), &json!(last.seq)));
    assert_ne!(decided[0]["writer"], decided[1]["writer"]);
}

/// A replica of several signs its own chain's head (`--log-key`): the head names the writer, verifies, and is in
/// the log; once the chain is changed and hashed again (seals of the other cannot name what came after their last
/// one), the head signed before finds it.
#[test]
fn a_replica_signs_the_head_of_its_own_chain() {
    let (replicas, a, b) = sealed_chains("signed_chain");
    let key = remit_gateway::bundle::signing_key(&remit_gateway::bundle::keygen().unwrap().0).unwrap();
    let signer = audit::HeadSigner::new(key, replicas.stores[1].clone(), Arc::new(remit_gateway::SystemClock));
    let head = signer.sign().unwrap().expect("B wrote");
    assert_eq!((head.writer.as_str(), head.seq), (b.as_str(), 9), "B's chain: 7 decisions and 2 seals");
    head.verify(None).unwrap();
    let stored = replicas.stores[0].begin_read().unwrap().signed_heads().unwrap();
    assert_eq!(stored, std::slice::from_ref(&head));
    audit::check_head(&log(replicas.stores[0].as_ref()), &head).unwrap();
    assert_ne!(a, b);
    // B's unsealed tail (entries 8 and 9) changed and hashed again: the chains and seals still hold, the head not.
    let mut prev = String::new();
    let mut rewrite = String::new();
    for mut entry in log(replicas.stores[0].as_ref()).into_iter().filter(|e| e.writer == b && e.seq >= 7) {
        if entry.seq == 7 {
            prev = entry.hash;
            continue;
        }
        entry.body = entry.body.replace("op-1-", "op-1-x");
        entry.prev = prev;
        entry.hash = audit::hash_of(&entry);
        rewrite += &format!(
            "UPDATE log SET body = $b${}$b$, prev = '{}', hash = '{}' WHERE writer = '{b}' AND seq = {};",
            entry.body, entry.prev, entry.hash, entry.seq
        );
        prev = entry.hash;
    }
    replicas.postgres[0].execute_raw(&rewrite).unwrap();
    let entries = log(replicas.stores[0].as_ref());
    audit::verify(entries.clone()).expect("after the last seal naming B, only B's signed head covers its chain");
    let found = audit::check_head(&entries, &head).unwrap_err();
    assert!(found.contains(&format!("entry 9 of writer `{b}` has the hash")) && found.contains("rewritten"), "{found}");
    let (passed, said) = audit_verify(&shared().database_url("signed_chain"));
    assert!(!passed && said.contains("the signed head of entry 9 of writer"), "{said}");
}

fn sorted<'a>(writers: &[&'a str]) -> Vec<&'a str> {
    let mut writers = writers.to_vec();
    writers.sort_unstable();
    writers
}

/// `remit audit verify URL` (the password in the URL): whether it passed, and what it said.
fn audit_verify(url: &str) -> (bool, String) {
    let out = std::process::Command::new(support::remit_bin()).args(["audit", "verify", url]).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Two replicas, A and B, and their sealed chains, in a database of its own: A decides 3 times, B 3 times, both
/// seal; A 2 more and seals (naming B's entry 6), B 2 more, seals, and 2 more that no seal names.
fn sealed_chains(name: &str) -> (Replicas, String, String) {
    let replicas = replicas_on(Kind::Postgres, name, 2, shared());
    let gateways = gateways(&replicas, BUDGET.replace("at most 5", "at most 100000").as_str());
    let (a, b) = (&replicas.postgres[0], &replicas.postgres[1]);
    let decide = |gateway: usize, n: usize| {
        for i in 0..n {
            assert!(gateways[gateway].decide(&payment(&format!("op-{gateway}-{i}"))).allowed());
        }
    };
    decide(0, 3);
    decide(1, 3);
    assert!(a.seal().unwrap() && b.seal().unwrap());
    decide(0, 2);
    decide(1, 2);
    assert!(a.seal().unwrap());
    assert!(!a.seal().unwrap(), "nothing written since the last seal");
    decide(1, 0);
    assert!(b.seal().unwrap());
    decide(1, 2);
    let (a, b) = (a.writer().to_string(), b.writer().to_string());
    let entries = log(replicas.stores[0].as_ref());
    let sealed: Vec<_> = entries
        .iter()
        .filter(|e| e.kind == "seal" && e.writer == a)
        .map(|e| audit::seal_heads(&e.body).unwrap())
        .collect();
    assert_eq!(
        sealed,
        [
            vec![(b.clone(), 3, entries.iter().find(|e| e.writer == b && e.seq == 3).unwrap().hash.clone())],
            vec![(b.clone(), 6, entries.iter().find(|e| e.writer == b && e.seq == 6).unwrap().hash.clone())]
        ]
    );
    assert_eq!(audit::verify(entries).unwrap(), 5 + 2 + 9);
    (replicas, a, b)
}

/// Each way of tampering with the log's chains is found, with what it is: an edited entry, a deleted one, a tail cut
/// up to the last seal naming it, a dropped chain (its writer's registration deleted too), a chain whose entries were
/// changed and hashed again. A cut after the last seal naming the chain is not found: the bound of the design.
#[test]
fn every_kind_of_tampering_with_the_chains_is_found() {
    let broken = |replicas: &Replicas| audit::verify(log(replicas.stores[0].as_ref())).unwrap_err();

    let (replicas, _, b) = sealed_chains("tamper_edit");
    replicas.postgres[0]
        .execute_raw(&format!(
            "UPDATE log SET body = replace(body, 'op-1-1', 'op-1-9') WHERE writer = '{b}' AND seq = 2"
        ))
        .unwrap();
    let found = broken(&replicas);
    assert_eq!((found.writer.as_str(), found.seq), (b.as_str(), 2));
    assert!(found.problem.contains("does not match its hash: the entry was changed"), "{found}");

    let (replicas, _, b) = sealed_chains("tamper_delete");
    replicas.postgres[0].execute_raw(&format!("DELETE FROM log WHERE writer = '{b}' AND seq = 2")).unwrap();
    let found = broken(&replicas);
    assert_eq!((found.writer.as_str(), found.seq), (b.as_str(), 3));
    assert!(found.problem.contains("comes where entry 2 should: an entry was deleted"), "{found}");

    let (replicas, a, b) = sealed_chains("tamper_cut");
    replicas.postgres[0].execute_raw(&format!("DELETE FROM log WHERE writer = '{b}' AND seq > 5")).unwrap();
    let found = broken(&replicas);
    assert_eq!((found.writer.as_str(), found.seq), (b.as_str(), 6));
    assert!(found.problem.contains(&format!("the seal at entry 7 of writer `{a}` names it")), "{found}");
    assert!(found.problem.contains("chain ends at entry 5: entries were cut from its end"), "{found}");

    let (replicas, _, b) = sealed_chains("tamper_cut_unsealed");
    replicas.postgres[0].execute_raw(&format!("DELETE FROM log WHERE writer = '{b}' AND seq > 6")).unwrap();
    audit::verify(log(replicas.stores[0].as_ref())).expect("a cut after the last seal naming the chain");

    let (replicas, a, b) = sealed_chains("tamper_drop");
    replicas.postgres[0]
        .execute_raw(&format!(
            "DELETE FROM log WHERE writer = '{b}'; DELETE FROM writer_heads WHERE writer = '{b}'; \
             DELETE FROM writers WHERE id = '{b}'"
        ))
        .unwrap();
    let found = broken(&replicas);
    assert_eq!(found.writer, b);
    assert!(found.problem.contains(&format!("`{a}` names it, but writer `{b}` has no entry")), "{found}");
    assert!(found.problem.contains("its chain was dropped"), "{found}");
    // The command says the same, reading the database.
    let (passed, said) = audit_verify(&shared().database_url("tamper_drop"));
    assert!(!passed && said.contains("the chain is broken at entry 3 of writer") && said.contains("dropped"), "{said}");

    let (replicas, a, b) = sealed_chains("tamper_rehash");
    let mut prev = audit::writer_genesis(&b);
    let mut rewrite = String::new();
    for mut entry in log(replicas.stores[0].as_ref()).into_iter().filter(|e| e.writer == b) {
        if entry.seq == 2 {
            entry.body = entry.body.replace("op-1-1", "op-1-9");
        }
        entry.prev = prev;
        entry.hash = audit::hash_of(&entry);
        rewrite += &format!(
            "UPDATE log SET body = $b${}$b$, prev = '{}', hash = '{}' WHERE writer = '{b}' AND seq = {};",
            entry.body, entry.prev, entry.hash, entry.seq
        );
        prev = entry.hash;
    }
    replicas.postgres[0].execute_raw(&rewrite).unwrap();
    let found = broken(&replicas);
    assert_eq!((found.writer.as_str(), found.seq), (b.as_str(), 3), "the first head of B a seal of A named");
    assert!(found.problem.contains(&format!("the seal at entry 4 of writer `{a}` recorded")), "{found}");
    assert!(found.problem.contains("chain was rewritten at or before it"), "{found}");
}

/// A database of schema version 2 (one chain, under the head lock) with entries in its log: replicas of this
/// version starting at once migrate it once, their chains start beside the old one, and the whole log verifies —
/// the old entries with the hashes they had.
#[test]
fn a_database_with_one_chain_migrates_and_its_log_still_verifies() {
    let url = shared().database("one_chain");
    let store = PostgresStore::connect(&url, None, &options(true)).unwrap();
    // Back to version 2: the tables and columns of version 3 removed, three entries as a gateway of version 2 wrote.
    let mut old = String::from(
        "DROP TABLE writers; DROP TABLE writer_heads; ALTER TABLE log DROP CONSTRAINT log_pkey; \
         ALTER TABLE log DROP COLUMN writer, DROP COLUMN gseq; ALTER TABLE log ADD PRIMARY KEY (seq); \
         ALTER TABLE log_heads DROP COLUMN writer; ALTER TABLE access_requests DROP COLUMN log_writer; \
         DELETE FROM data_state; DROP TABLE published_bundles; DROP TABLE grants; \
         DELETE FROM remit_schema WHERE version >= 3;",
    );
    let mut prev = audit::GENESIS.to_string();
    let mut hashes = Vec::new();
    for seq in 1..=3u64 {
        let body = format!("{{\"n\":{seq}}}");
        let hash = audit::entry_hash(&prev, seq, 100 + seq as i64, "stop", &body);
        old += &format!(
            "INSERT INTO log (seq, time, kind, body, prev, hash) VALUES ({seq}, {}, 'stop', '{body}', '{prev}', \
             '{hash}'); UPDATE log_head SET seq = {seq}, hash = '{hash}';",
            100 + seq
        );
        hashes.push(hash.clone());
        prev = hash;
    }
    store.execute_raw(&old).unwrap();
    drop(store);
    // `remit audit verify` reads a store of version 2 as it is.
    let (passed, said) = audit_verify(&shared().database_url("one_chain"));
    assert!(passed && said.starts_with(&format!("3 entries, the chain holds; head {}", hashes[2])), "{said}");
    let stores: Vec<Arc<PostgresStore>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| Arc::new(PostgresStore::connect(&url, None, &options(true)).unwrap())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(stores[0].schema_history().unwrap().iter().filter(|(v, _)| *v == 3).count(), 1, "migrated once");
    let replicas =
        Replicas { stores: stores.iter().map(|s| s.clone() as Arc<dyn Store>).collect(), postgres: stores, dir: None };
    let gateways = gateways(&replicas, BUDGET);
    assert_eq!(concurrently(&gateways, &payment("op-1"), 20), 5);
    for store in &replicas.postgres {
        store.seal().unwrap();
    }
    let entries = log(replicas.stores[0].as_ref());
    let old: Vec<&LogEntry> = entries.iter().filter(|e| e.writer.is_empty()).collect();
    assert_eq!(
        old.iter().map(|e| (e.gseq, e.hash.clone())).collect::<Vec<_>>(),
        [(1, hashes[0].clone()), (2, hashes[1].clone()), (3, hashes[2].clone())]
    );
    assert!(entries[3..].iter().all(|e| !e.writer.is_empty() && e.gseq > 3), "the new chains come after");
    let verified = audit::verify_chains(entries).unwrap();
    assert_eq!(verified.chains.len(), 3, "the old chain and a chain per replica: {verified:?}");
    assert_eq!(verified.chains[""], (3, hashes[2].clone()));
}

/// Whether the connections of the gateway named `writer` (its `application_name`) to `server` use TLS: `t` or `f`
/// for each.
fn tls_of(server: &Server, writer: &str) -> String {
    server.query(&format!(
        "SELECT DISTINCT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '{writer}'"
    ))
}

fn writer(name: &str) -> PostgresOptions {
    PostgresOptions { pool_size: 2, writer: name.into(), ..PostgresOptions::default() }
}

/// TLS to PostgreSQL (the URL's `sslmode`): `verify-full` connects only to a server whose certificate leads to the
/// root of `sslrootcert` and names the URL's host, and says which of the two failed; `require` encrypts whatever the
/// certificate; no `sslmode` stays plain TCP; `verify-full` never falls back to plain TCP.
#[test]
fn tls_to_postgresql_verifies_the_chain_and_the_host_name() {
    let dir = std::env::temp_dir().join(format!("remit-pg-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, rogue) = (tls::TestCa::new("remit database CA"), tls::TestCa::new("someone else"));
    let (certificate, key) = ca.server_files(&["127.0.0.1"], &dir);
    let server = Server::start_tls(&certificate, &key);
    let root = ca.write(&dir.join("root.pem"));
    let wrong_root = rogue.write(&dir.join("rogue.pem"));
    let url = server.database("tls");

    let verified =
        PostgresStore::connect(&format!("{url}?sslmode=verify-full&sslrootcert={root}"), None, &writer("full"))
            .unwrap();
    let gateway =
        Gateway::new(policy_of(BUDGET), Arc::new(verified), Arc::new(remit_gateway::SystemClock), Config::default());
    assert!(gateway.decide(&payment("op-tls")).allowed());
    assert_eq!(tls_of(&server, "full"), "t", "verify-full connected over TLS");

    let refused = |url: String| PostgresStore::connect(&url, None, &writer("refused")).unwrap_err().to_string();
    let why = refused(format!("{url}?sslmode=verify-full&sslrootcert={wrong_root}"));
    assert!(why.contains("not issued by a root of `sslrootcert=") && why.contains("sslmode=verify-full"), "{why}");
    let localhost = url.replacen("@127.0.0.1:", "@localhost:", 1);
    let why = refused(format!("{localhost}?sslmode=verify-full&sslrootcert={root}"));
    assert!(why.contains("not valid for the URL's host `localhost`"), "{why}");
    // The shared server speaks no TLS: verify-full does not fall back to plain TCP.
    let why = refused(format!("{}?sslmode=verify-full&sslrootcert={root}", shared().database("tls_plain")));
    assert!(why.contains("does not support TLS"), "{why}");

    // require: encrypted, the certificate not checked (the rogue's root is no matter; none is given).
    let required = PostgresStore::connect(&format!("{url}?sslmode=require"), None, &writer("require")).unwrap();
    required.execute_raw("SELECT 1").unwrap();
    assert_eq!(tls_of(&server, "require"), "t");
    // No sslmode: plain TCP, as before TLS was built.
    let plain = PostgresStore::connect(&url, None, &writer("plain")).unwrap();
    plain.execute_raw("SELECT 1").unwrap();
    assert_eq!(tls_of(&server, "plain"), "f");
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit serve` with `sslmode=verify-full`: a database whose certificate stops being trusted (here: replaced by
/// one of another authority, as a man in the middle would present) is unreachable — `/ready` 503, decisions denied
/// `gateway.store-unavailable` — and the trusted certificate back, the same process decides again. A gateway
/// started against an untrusted database does not start, and says why.
#[test]
fn remit_serve_refuses_a_database_it_cannot_verify() {
    use remit_gateway::client::blocking::request;
    use std::process::{Command, Stdio};
    use support::served::Served;
    let dir = std::env::temp_dir().join(format!("remit-pg-tls-serve-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("rogue")).unwrap();
    let (ca, rogue) = (tls::TestCa::new("remit database CA"), tls::TestCa::new("someone else"));
    let (certificate, key) = ca.server_files(&["127.0.0.1"], &dir);
    let (rogue_certificate, rogue_key) = rogue.server_files(&["127.0.0.1"], &dir.join("rogue"));
    let server = Server::start_tls(&certificate, &key);
    let root = ca.write(&dir.join("root.pem"));
    let url = format!("{}?sslmode=verify-full&sslrootcert={root}", server.database("tls_serve"));
    std::fs::write(dir.join("shop.remit"), BUDGET).unwrap();
    let serve = |url: &str| {
        let mut command = Command::new(support::remit_bin());
        command.args(["serve", dir.join("shop.remit").to_str().unwrap(), "--listen", "127.0.0.1:0", "--store", url]);
        command
    };
    let wrong = url.replace(&root, &rogue.write(&dir.join("rogue.pem")));
    let out = serve(&wrong).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("not issued by a root of `sslrootcert="), "{said}");
    // `remit mcp-proxy` opens its store as `remit serve` does: the same refusal, and with the right root it makes
    // its store in the database (here `remit`, empty until then) and ends with its agent's input.
    let mcp_proxy = |url: &str| {
        let policy = support::root().join("tests/mcp/filesystem");
        Command::new(support::remit_bin())
            .args(["mcp-proxy", "--policy", policy.to_str().unwrap(), "--subject", "agent:coder", "--store", url])
            .args(["--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = mcp_proxy(&wrong);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("not issued by a root of `sslrootcert="), "{said}");
    assert_eq!(server.query("SELECT count(*) FROM pg_tables WHERE tablename = 'remit_schema'"), "0");
    let proxied = format!("{}?sslmode=verify-full&sslrootcert={root}", server.url());
    let out = mcp_proxy(&proxied);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.query("SELECT count(*) FROM pg_tables WHERE tablename = 'remit_schema'"), "1");

    let served = Served::start(serve(&url).stderr(Stdio::null()));
    let ready = || request("GET", &format!("{}/ready", served.url), &[], None).unwrap().status;
    let decide = || {
        let response = request("POST", &format!("{}/v1/decide", served.url), &[], Some(&payment("op-1"))).unwrap();
        serde_json::from_slice::<Value>(&response.body).unwrap()
    };
    assert_eq!(ready(), 200);
    assert_eq!(decide()["decision"], "allow");
    // Another authority's certificate; a restart drops the established connections.
    server.set_certificate(&rogue_certificate, &rogue_key);
    server.pause();
    server.resume();
    assert_eq!(ready(), 503);
    let denied = decide();
    assert_eq!((denied["decision"].as_str(), denied["reasons"][0].as_str()), (Some("deny"), Some(REASON_STORE)));
    server.set_certificate(&certificate, &key);
    assert_eq!(ready(), 200);
    assert_eq!(decide()["decision"], "allow");
    drop(served);
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs Debian's `openssl` in `dir` (missing: scripts/test-deps.sh installs it).
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out =
        std::process::Command::new("openssl").args(args).current_dir(dir).output().unwrap_or_else(|e| {
            panic!("cannot run openssl (Debian's `openssl`, installed by scripts/test-deps.sh): {e}")
        });
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Certificates as an operator makes them, with `openssl` in `dir`: a CA `NAME-ca.crt` (its key `NAME-ca.key`,
/// P-256), and a function that issues `FILE.crt` (the certificate, then the CA's) and `FILE.key` signed by it for a
/// subject and extensions (`extendedKeyUsage=…`, `subjectAltName=…`) with a key made by `keygen` (openssl's words).
fn openssl_ca(dir: &std::path::Path, name: &str) -> impl Fn(&str, &[&str], &str, &[&str]) -> (String, String) {
    let (ca_key, ca_crt) = (format!("{name}-ca.key"), format!("{name}-ca.crt"));
    openssl(dir, &["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &ca_key]);
    let subject = format!("/CN={name} CA");
    openssl(dir, &["req", "-x509", "-new", "-key", &ca_key, "-subj", &subject, "-days", "36500", "-out", &ca_crt]);
    let dir = dir.to_path_buf();
    move |file: &str, keygen: &[&str], subject: &str, extensions: &[&str]| {
        let (key, csr, crt) = (format!("{file}.key"), format!("{file}.csr"), format!("{file}.crt"));
        // `-out` right after the command: genrsa takes its key size last.
        openssl(&dir, &[&keygen[..1], &["-out", &key], &keygen[1..]].concat());
        openssl(&dir, &["req", "-new", "-key", &key, "-subj", subject, "-out", &csr]);
        let extfile = format!("{file}.ext");
        std::fs::write(dir.join(&extfile), format!("basicConstraints=CA:FALSE\n{}\n", extensions.join("\n"))).unwrap();
        let sign = ["x509", "-req", "-in", &csr, "-CA", &ca_crt, "-CAkey", &ca_key, "-set_serial", "0x1c3f"];
        openssl(&dir, &[&sign[..], &["-days", "36500", "-extfile", &extfile, "-out", &crt]].concat());
        let chain = format!(
            "{}{}",
            std::fs::read_to_string(dir.join(&crt)).unwrap(),
            std::fs::read_to_string(dir.join(&ca_crt)).unwrap()
        );
        std::fs::write(dir.join(&crt), chain).unwrap();
        set_mode(&dir.join(&key), 0o600);
        (dir.join(crt).display().to_string(), dir.join(key).display().to_string())
    }
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A PostgreSQL server that takes a connection only with a client certificate (`hostssl … cert`, clientcert=
/// verify-full: issued by its CA, naming the user) and whose own certificate names another host than the one the
/// URL says (`db.internal`, reached as 127.0.0.1), every certificate and key made by `openssl` (the client's an
/// RSA key in PKCS#1, the server's P-256 in SEC1). `verify-ca` with the client certificate connects and decides;
/// `verify-full` refuses the server's name; `require` with `sslrootcert` is `verify-ca` (libpq's reading); without a client certificate, with one of another CA, or with a key
/// file that others can read, no connection — each said as such.
#[test]
fn client_certificates_and_verify_ca_against_a_server_that_demands_them() {
    let dir = std::env::temp_dir().join(format!("remit-pg-certs-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let issue = openssl_ca(&dir, "db");
    let p256 = ["ecparam", "-name", "prime256v1", "-genkey", "-noout"];
    let rsa = ["genrsa", "-traditional", "2048"];
    let (server_crt, server_key) =
        issue("server", &p256, "/CN=db.internal", &["extendedKeyUsage=serverAuth", "subjectAltName=DNS:db.internal"]);
    let (client_crt, client_key) = issue("client", &rsa, "/CN=remit", &["extendedKeyUsage=clientAuth"]);
    assert!(std::fs::read_to_string(&client_key).unwrap().starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let rogue = openssl_ca(&dir, "rogue");
    let (rogue_crt, rogue_key) = rogue("rogue-client", &p256, "/CN=remit", &["extendedKeyUsage=clientAuth"]);
    let root = dir.join("db-ca.crt").display().to_string();
    let server = Server::start_client_certificates(&server_crt, &server_key, &root);
    let (url, _) = server.url_and_password(&server.database("certs"));

    let ca = format!("{url}?sslmode=verify-ca&sslrootcert={root}");
    let with = |url: &str, crt: &str, key: &str| format!("{url}&sslcert={crt}&sslkey={key}");
    let verified = PostgresStore::connect(&with(&ca, &client_crt, &client_key), None, &writer("cert")).unwrap();
    let gateway =
        Gateway::new(policy_of(BUDGET), Arc::new(verified), Arc::new(remit_gateway::SystemClock), Config::default());
    assert!(gateway.decide(&payment("op-cert")).allowed());
    let seen = server.query(
        "SELECT DISTINCT s.ssl, s.client_dn FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'cert'",
    );
    assert_eq!(seen, "t|/CN=remit", "over TLS, authenticated by the client certificate");

    let refused = |url: String| PostgresStore::connect(&url, None, &writer("refused")).unwrap_err().to_string();
    // The server's certificate names db.internal, not 127.0.0.1: verify-full refuses what verify-ca accepts.
    let full = format!("{url}?sslmode=verify-full&sslrootcert={root}");
    let why = refused(with(&full, &client_crt, &client_key));
    assert!(why.contains("not valid for the URL's host `127.0.0.1`"), "{why}");
    // verify-ca still checks the chain: the rogue CA's roots do not lead to the server's certificate.
    let rogue_root = dir.join("rogue-ca.crt").display().to_string();
    let why = refused(with(&format!("{url}?sslmode=verify-ca&sslrootcert={rogue_root}"), &client_crt, &client_key));
    assert!(why.contains("not issued by a root of `sslrootcert=") && why.contains("sslmode=verify-ca"), "{why}");
    // `require` with a root file is `verify-ca`, as libpq: it connects to db.internal reached as 127.0.0.1 (the
    // host name not checked), over TLS, and refuses a server whose chain does not lead to the root given.
    let require = |root: &str| with(&format!("{url}?sslmode=require&sslrootcert={root}"), &client_crt, &client_key);
    let required = PostgresStore::connect(&require(&root), None, &writer("require-ca")).unwrap();
    required.execute_raw("SELECT 1").unwrap();
    assert_eq!(tls_of(&server, "require-ca"), "t");
    let why = refused(require(&rogue_root));
    assert!(why.contains("not issued by a root of `sslrootcert="), "{why}");
    assert!(why.contains("sslmode=require, read as verify-ca since `sslrootcert` is given"), "{why}");
    // No client certificate: the server refuses the connection (its `cert` rule).
    let why = refused(ca.clone());
    assert!(why.contains("connection requires a valid client certificate"), "{why}");
    // A certificate of another CA: refused in the handshake, said as the server's refusal of it.
    let why = refused(with(&ca, &rogue_crt, &rogue_key));
    assert!(why.contains("the server refused the client certificate `sslcert="), "{why}");
    // A key file that others can read is refused before anything is sent, as libpq refuses it.
    set_mode(std::path::Path::new(&client_key), 0o644);
    let why = refused(with(&ca, &client_crt, &client_key));
    assert!(why.contains("has group or world access (mode 0644)"), "{why}");
    set_mode(std::path::Path::new(&client_key), 0o600);
    // Plain TCP to the database: rejected, whatever the password.
    let why = refused(server.database_url("certs"));
    assert!(why.contains("pg_hba.conf rejects connection"), "{why}");

    // `remit serve` with the files from its configuration file (paths relative to it) and the environment, none on
    // the command line. Without a client certificate, it does not start, and says why.
    use remit_gateway::client::blocking::request;
    use std::process::{Command, Stdio};
    use support::served::Served;
    let (live_crt, live_key) = (dir.join("live.crt"), dir.join("live.key"));
    let install = |crt: &str, key: &str| {
        std::fs::copy(crt, &live_crt).unwrap();
        std::fs::copy(key, &live_key).unwrap();
    };
    install(&client_crt, &client_key);
    std::fs::write(dir.join("shop.remit"), BUDGET).unwrap();
    let store = format!("{}?sslmode=verify-ca", server.url_and_password(&server.database("certs_serve")).0);
    let settings = format!("policy = \"shop.remit\"\nstore = \"{store}\"\nstore-ssl-root-cert = \"db-ca.crt\"\n");
    std::fs::write(dir.join("no-cert.toml"), &settings).unwrap();
    std::fs::write(dir.join("remit.toml"), format!("{settings}store-ssl-cert = \"live.crt\"\n")).unwrap();
    let serve = |config: &str| {
        let mut command = Command::new(support::remit_bin());
        command.args(["serve", "--config", dir.join(config).to_str().unwrap(), "--listen", "127.0.0.1:0"]);
        command
    };
    // The key alone is refused as half a setting.
    let out = serve("no-cert.toml").env("REMIT_STORE_SSL_KEY", &live_key).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("`sslkey` without `sslcert`"), "{said}");
    let out = serve("no-cert.toml").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("connection requires a valid client certificate"), "{said}");
    let served = Served::start(serve("remit.toml").env("REMIT_STORE_SSL_KEY", &live_key).stderr(Stdio::inherit()));
    let ready = || request("GET", &format!("{}/ready", served.url), &[], None).unwrap().status;
    let decide = || {
        let response = request("POST", &format!("{}/v1/decide", served.url), &[], Some(&payment("op-1"))).unwrap();
        serde_json::from_slice::<Value>(&response.body).unwrap()
    };
    assert_eq!(ready(), 200);
    assert_eq!(decide()["decision"], "allow");
    // The files rotated to a certificate the server does not trust; a restart drops the established connections:
    // the replica cannot reach its store (its new connections are refused), /ready 503, decisions denied.
    install(&rogue_crt, &rogue_key);
    server.pause();
    server.resume();
    assert_eq!(ready(), 503);
    let denied = decide();
    assert_eq!((denied["decision"].as_str(), denied["reasons"][0].as_str()), (Some("deny"), Some(REASON_STORE)));
    // A good certificate rotated in: the same process decides again, its files read anew.
    install(&client_crt, &client_key);
    assert_eq!(ready(), 200);
    assert_eq!(decide()["decision"], "allow");
    drop(served);
    // `remit audit` reads the files from the same variables.
    let audit = |with_files: bool| {
        let mut command = Command::new(support::remit_bin());
        command.args(["audit", "verify", &store]);
        if with_files {
            command.env("REMIT_STORE_SSL_ROOT_CERT", &root);
            command.env("REMIT_STORE_SSL_CERT", &live_crt).env("REMIT_STORE_SSL_KEY", &live_key);
        }
        command.output().unwrap()
    };
    let out = audit(true);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let out = audit(false);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("needs `sslrootcert=FILE`"), "{said}");

    // libpq's default client certificate: `$HOME/.postgresql/postgresql.crt` and `postgresql.key`, presented when
    // no `sslcert` is named (`remit audit verify`, a process of its own, with HOME set for it).
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".postgresql")).unwrap();
    let audit_in = |home: &std::path::Path| {
        let mut command = Command::new(support::remit_bin());
        command.args(["audit", "verify", &format!("{store}&sslrootcert={root}")]).env("HOME", home);
        command.env_remove("REMIT_STORE_SSL_CERT").env_remove("REMIT_STORE_SSL_KEY").output().unwrap()
    };
    let out = audit_in(&home);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("connection requires a valid client certificate"), "{said}");
    std::fs::copy(&client_crt, home.join(".postgresql/postgresql.crt")).unwrap();
    let out = audit_in(&home);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("postgresql.crt` is there") && said.contains("not its key"),
        "{said}"
    );
    std::fs::copy(&client_key, home.join(".postgresql/postgresql.key")).unwrap();
    set_mode(&home.join(".postgresql/postgresql.key"), 0o600);
    let out = audit_in(&home);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));

    // Encrypted keys, as openssl writes them (PKCS#8, and the traditional form with `Proc-Type`): refused, naming the
    // file, before anything is sent.
    let client_key_file = std::path::Path::new(&client_key).file_name().unwrap().to_str().unwrap().to_string();
    openssl(&dir, &["pkey", "-in", &client_key_file, "-aes256", "-passout", "pass:secret", "-out", "pkcs8.key"]);
    let traditional = ["rsa", "-in", &client_key_file, "-aes128", "-traditional", "-passout", "pass:secret"];
    openssl(&dir, &[&traditional[..], &["-out", "traditional.key"]].concat());
    for file in ["pkcs8.key", "traditional.key"] {
        let key = dir.join(file);
        set_mode(&key, 0o600);
        let why = refused(with(&ca, &client_crt, key.to_str().unwrap()));
        let named = format!("`sslkey={}` is an encrypted private key, which is not supported", key.display());
        assert!(why.contains(&named), "{why}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Revocation lists for the server's certificate (`sslcrl`, `--store-ssl-crl`, `REMIT_STORE_SSL_CRL`), made by
/// `openssl ca` as an operator makes them: a list of the server's CA that revokes nothing lets `verify-full` and
/// `verify-ca` connect; one that revokes the server's certificate refuses it, said as such, in both modes; a list of
/// another CA only (the server's issuer has none) and an expired list are refused too, as OpenSSL refuses them for
/// libpq. `remit audit verify` reads the list from the variable.
#[test]
fn revocation_lists_refuse_a_revoked_server_certificate() {
    let dir = std::env::temp_dir().join(format!("remit-pg-crl-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let issue = openssl_ca(&dir, "db");
    let p256 = ["ecparam", "-name", "prime256v1", "-genkey", "-noout"];
    let (server_crt, server_key) =
        issue("server", &p256, "/CN=127.0.0.1", &["extendedKeyUsage=serverAuth", "subjectAltName=IP:127.0.0.1"]);
    // Another CA, of which a list of its own (no list of the server's issuer).
    let _other = openssl_ca(&dir, "other");
    // `openssl ca`'s list of each CA: none revoked, then the server's certificate revoked.
    let gencrl = |ca: &str, out: &str, extra: &[&str]| {
        let config = format!("{ca}-ca.cnf");
        if !dir.join(&config).exists() {
            let body = format!(
                "[ca]\ndefault_ca = crl_ca\n[crl_ca]\ndatabase = {ca}-index.txt\ncrlnumber = {ca}-crlnumber\n\
                 default_md = sha256\ndefault_crl_days = 36500\n"
            );
            std::fs::write(dir.join(&config), body).unwrap();
            std::fs::write(dir.join(format!("{ca}-index.txt")), "").unwrap();
            std::fs::write(dir.join(format!("{ca}-crlnumber")), "01\n").unwrap();
        }
        let (key, crt) = (format!("{ca}-ca.key"), format!("{ca}-ca.crt"));
        let args = ["ca", "-config", &config, "-keyfile", &key, "-cert", &crt];
        match out {
            "" => openssl(&dir, &[&args[..], extra].concat()),
            out => openssl(&dir, &[&args[..], extra, &["-gencrl", "-out", out]].concat()),
        }
        dir.join(out).display().to_string()
    };
    let clean = gencrl("db", "clean.crl", &[]);
    let elsewhere = gencrl("other", "other.crl", &[]);
    gencrl("db", "", &["-revoke", &server_crt]);
    let revoked = gencrl("db", "revoked.crl", &[]);
    let expired = gencrl("db", "expired.crl", &["-crlsec", "1"]);

    let server = Server::start_tls(&server_crt, &server_key);
    let url = server.database("crl");
    let root = dir.join("db-ca.crt").display().to_string();
    let connect = |mode: &str, crl: &str| {
        let url = format!("{url}?sslmode={mode}&sslrootcert={root}&sslcrl={crl}");
        PostgresStore::connect(&url, None, &writer(&format!("crl-{mode}")))
    };
    for mode in ["verify-full", "verify-ca"] {
        let store = connect(mode, &clean).unwrap_or_else(|e| panic!("{mode} with a clean list: {e}"));
        store.execute_raw("SELECT 1").unwrap();
        assert_eq!(tls_of(&server, &format!("crl-{mode}")), "t");
        let why = connect(mode, &revoked).unwrap_err().to_string();
        let said = format!("the server's certificate is revoked by `sslcrl={revoked}`; sslmode={mode}");
        assert!(why.contains(&said), "{why}");
        let why = connect(mode, &elsewhere).unwrap_err().to_string();
        assert!(why.contains(&format!("cannot be checked: `sslcrl={elsewhere}` has no list of its issuer")), "{why}");
    }
    // The expired list: its next update one second after it was made.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let why = connect("verify-full", &expired).unwrap_err().to_string();
    assert!(why.contains(&format!("the revocation list of `sslcrl={expired}` has expired")), "{why}");

    // `remit audit verify` with the list from `REMIT_STORE_SSL_CRL` (the store made above, through the clean one).
    let audit = |crl: &str| {
        let mut command = std::process::Command::new(support::remit_bin());
        command.args(["audit", "verify", &format!("{url}?sslmode=verify-full&sslrootcert={root}")]);
        command.env("REMIT_STORE_SSL_CRL", crl).output().unwrap()
    };
    let out = audit(&clean);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let out = audit(&revoked);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("the server's certificate is revoked"), "{said}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}
