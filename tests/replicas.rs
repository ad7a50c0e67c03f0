//! Replicas as a deployment runs them — `remit serve` processes on one PostgreSQL, on loopback ports they choose —
//! under the faults issue 32 names, and the wallet's escalation flow across them (docs/scaling.md, "Failure
//! behaviour"): a replica `kill -9`ed under load, the others going on; PostgreSQL stopped and started under load,
//! every call of the outage denied `gateway.store-unavailable` and the same processes deciding again after; the
//! wallet's request filed on one replica, approved in the inbox of another, its retry allowed exactly once across
//! them. After each, the database is audited (support::replicas::audited): the log verifies, every allow answered
//! is logged, the counters equal the allows logged, every consumed approval has its allow. Each test is bounded in
//! calls and time, and everything it starts stops with it. The servers come from scripts/postgres.sh.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use remit_gateway::audit;
use serde_json::{json, Value};
use support::postgres::{shared, Server};
use support::replicas::{
    approve, audit_verify, audited, decide, evaluate, query, wait_until, waiting_for_a_lock, writer_of, Answer,
    Replicas, RowLock,
};

/// Payments of at most 3 per operation, those above 60 USD approved first by Alice (a single-use approval).
const SHOP: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require operation id for make_payment
  require approval commercial_terms for make_payment where args.amount > 60 USD
  budget per_op: at most 3 calls to make_payment per operation
}
"#;

fn payment(amount: &str, operation: &str) -> Value {
    json!({
        "subject": {"id": "agent:shopper"},
        "action": {"name": "make_payment", "arguments": {"merchant": "acme-grocer", "amount": amount}},
        "resource": {"id": "order:1"},
        "context": {"operation_id": operation}
    })
}

/// A folder of its own for a test, with `source` as its policy (`shop.remit`).
fn policy_dir(name: &str, source: &str) -> std::path::PathBuf {
    let dir = support::temp_dir(name);
    std::fs::write(dir.join("shop.remit"), source).unwrap();
    dir
}

/// What the callers of a load saw.
#[derive(Default)]
struct Seen {
    /// Every call answered: by which replica, when it was sent and answered, and the answer.
    answers: Vec<(usize, Instant, Instant, Answer)>,
    /// Calls that got no answer: the replica, when sent, the error.
    lost: Vec<(usize, Instant, String)>,
    /// Escalations approved in the inbox and then allowed, each on three replicas.
    approved_flows: usize,
}

/// When a store outage that two replicas rode under load happened, and what their `/ready` said during it.
struct Outage {
    cut_at: Instant,
    restored_at: Instant,
    /// When both replicas answered `/ready` 200 again.
    back_at: Instant,
    ready_while_down: [u16; 2],
}

impl Outage {
    /// The outage's timeline, while callers run: `before` of load, `cut()` (the store gone), both replicas'
    /// `/ready` read, `gap`, `restore()` (the store, or its promoted standby, back), both ready again (within 30 s),
    /// `after` more of load; then `done` stops the callers.
    fn ride(
        replicas: &Replicas,
        done: &AtomicBool,
        [before, gap, after]: [Duration; 3],
        cut: impl FnOnce(),
        restore: impl FnOnce(),
    ) -> Outage {
        std::thread::sleep(before);
        cut();
        let cut_at = Instant::now();
        let ready_while_down = [replicas.ready(0), replicas.ready(1)];
        std::thread::sleep(gap);
        let restored_at = Instant::now();
        restore();
        let back = wait_until(Duration::from_secs(30), || replicas.ready(0) == 200 && replicas.ready(1) == 200);
        assert!(back, "both replicas ready again: {}{}", replicas.stderr(0), replicas.stderr(1));
        let back_at = Instant::now();
        std::thread::sleep(after);
        done.store(true, Ordering::SeqCst);
        Outage { cut_at, restored_at, back_at, ready_while_down }
    }

    /// What every outage must show: `/ready` 503 on both while the store was gone, every call answered, and the
    /// same processes (never restarted) at the end.
    fn ridden_out(&self, replicas: &mut Replicas, pids: [u32; 2], seen: &Seen) {
        assert_eq!(self.ready_while_down, [503, 503], "/ready while the store is gone");
        assert!(seen.lost.is_empty(), "every call was answered: {:?}", seen.lost);
        for (i, pid) in pids.iter().enumerate() {
            assert!(replicas.running(i) && replicas.pid(i) == *pid, "replica {i} was not restarted");
        }
    }
}

impl Seen {
    fn allows(&self) -> Vec<String> {
        self.answers.iter().filter(|(.., a)| a.allowed()).map(|(.., a)| a.id.clone().unwrap()).collect()
    }
}

/// Three replicas under load — six callers, each call to another replica, small payments (counted by the budget)
/// and now and then a large one escalated on one replica, approved in the inbox of the next and retried on the
/// third — when replica 0 is `kill -9`ed. The callers then leave it out (as a load balancer does once its checks
/// fail). The other two go on answering every call; what the victim answered before it died is logged; its chain
/// ends at its last commit and the survivors' seals name that end; `remit audit verify` passes; counters equal the
/// allows logged; every consumed approval has its allow.
#[test]
fn a_replica_killed_under_load_leaves_the_others_serving_and_the_log_whole() {
    let started = Instant::now();
    let url = shared().database("replica_killed");
    let dir = policy_dir("replica-killed", SHOP);
    let mut replicas = Replicas::start(3, &dir.join("shop.remit"), &url, &dir, &[]);
    let victim_pid = replicas.pid(0);
    // The operation whose counter will hold the victim's last transaction open when it is killed (counted once now).
    assert!(decide(replicas.url(1), &payment("20.00 USD", "op-held")).unwrap().allowed());
    let killed = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let victim_calls = AtomicUsize::new(0);
    let (killed_at, victim_calls_at_kill, held) = std::thread::scope(|scope| {
        let (replicas, killed, done, seen, victim_calls) = (&replicas, &killed, &done, &seen, &victim_calls);
        for caller in 0..6 {
            scope.spawn(move || {
                // The replicas a caller may use: all, then the survivors only.
                let pick = |k: usize| if killed.load(Ordering::SeqCst) { 1 + k % 2 } else { k % 3 };
                let call = |replica: usize, body: &Value| {
                    let sent = Instant::now();
                    if replica == 0 {
                        victim_calls.fetch_add(1, Ordering::SeqCst);
                    }
                    let answer = decide(replicas.url(replica), body);
                    let mut seen = seen.lock().unwrap();
                    match answer {
                        Ok(answer) => {
                            seen.answers.push((replica, sent, Instant::now(), answer.clone()));
                            Some(answer)
                        }
                        Err(e) => {
                            seen.lost.push((replica, sent, e));
                            None
                        }
                    }
                };
                for k in 0..2_000 {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    let first = pick(caller + k);
                    if k % 5 != 4 {
                        call(first, &payment("20.00 USD", &format!("op-{caller}-{}", k / 4)));
                        continue;
                    }
                    // A large payment: escalated on one replica, approved on the next, retried on the third. An
                    // order of its own, so that no approval left over from a flow cut by the kill matches it.
                    let operation = format!("big-{caller}-{k}");
                    let mut big = payment("80.00 USD", &operation);
                    big["resource"]["id"] = json!(format!("order:{operation}"));
                    let Some(escalated) = call(first, &big) else { continue };
                    assert_eq!(escalated.outcome, "escalate", "{escalated:?}");
                    let Some(request) = escalated.access_request else { continue };
                    let second = pick(caller + k + 1);
                    match approve(replicas.url(second), &request) {
                        Ok(200) => {}
                        Ok(status) => panic!("approving `{request}` on replica {second}: {status}"),
                        Err(e) => {
                            seen.lock().unwrap().lost.push((second, Instant::now(), e));
                            continue;
                        }
                    }
                    let third = pick(caller + k + 2);
                    if call(third, &big).is_some_and(|a| a.allowed()) {
                        seen.lock().unwrap().approved_flows += 1;
                    }
                }
            });
        }
        // The load runs on all three, then replica 0 is killed in the middle of it, and the load goes on for
        // longer than the survivors' seal interval (1 s). The kill lands inside one of the victim's transactions:
        // another session holds the counter of `op-held`, so the victim's batch deciding a call of it waits for the
        // lock after it began (its writer's head locked), and the victim's calls queue behind that batch.
        std::thread::sleep(Duration::from_millis(1_200));
        let lock = RowLock::take(
            &url,
            "SELECT value FROM counters WHERE counter = 'per_op' AND counter_window = 'operation:op-held' FOR UPDATE",
        );
        let held = scope.spawn(|| decide(replicas.url(0), &payment("20.00 USD", "op-held")));
        let waiting = wait_until(Duration::from_secs(3), || waiting_for_a_lock(&url, victim_pid) > 0);
        assert!(waiting, "the victim's transaction waits for the counter's lock");
        let victim_calls_at_kill = victim_calls.load(Ordering::SeqCst);
        // Signalled through its pid: the callers hold the replicas for their URLs.
        let status = std::process::Command::new("kill").args(["-KILL", &victim_pid.to_string()]).status().unwrap();
        assert!(status.success(), "kill -9 {victim_pid}");
        let killed_at = Instant::now();
        killed.store(true, Ordering::SeqCst);
        lock.release();
        std::thread::sleep(Duration::from_millis(2_500));
        done.store(true, Ordering::SeqCst);
        (killed_at, victim_calls_at_kill, held.join().unwrap())
    });
    assert!(held.is_err(), "the call whose transaction the kill cut got no answer: {held:?}");
    assert!(!replicas.running(0), "replica 0 was killed");
    let seen = seen.into_inner().unwrap();

    // The survivors answered every call sent to them, none denied for want of the store, and are ready.
    let survivors_lost: Vec<_> = seen.lost.iter().filter(|(r, ..)| *r != 0).collect();
    assert!(survivors_lost.is_empty(), "calls to the survivors got no answer: {survivors_lost:?}");
    let victim_lost_before: Vec<_> = seen.lost.iter().filter(|(r, sent, _)| *r == 0 && *sent < killed_at).collect();
    let refused: Vec<_> = seen.answers.iter().filter(|(.., a)| a.status != 200 || a.store_unavailable()).collect();
    assert!(refused.is_empty(), "{} calls refused: {:?}", refused.len(), &refused[..refused.len().min(5)]);
    for survivor in [1, 2] {
        assert!(replicas.running(survivor));
        assert_eq!(replicas.ready(survivor), 200, "replica {survivor} is ready: {}", replicas.stderr(survivor));
    }
    let after_kill = |replica: usize| {
        seen.answers.iter().filter(|(r, sent, _, a)| *r == replica && *sent > killed_at && a.allowed()).count()
    };
    assert!(after_kill(1) > 0 && after_kill(2) > 0, "both survivors allowed calls after the kill");
    let victim_answered = seen.answers.iter().filter(|(r, ..)| *r == 0).count();
    assert!(victim_answered > 0 && seen.approved_flows > 0, "the victim decided; some escalations were approved");

    // The database, audited: every allow answered, by the victim too, is logged; counters and approvals agree.
    let audit = audited(&url, &seen.allows(), "per_op");
    assert_eq!(audit.chains, 3, "a chain per replica");
    let victim = writer_of(&url, victim_pid);
    let chain: Vec<_> = audit.entries.iter().filter(|e| e.writer == victim).collect();
    let end = chain.last().expect("the victim wrote");
    // Its chain ends where it last committed, and a survivor's seal written after names that end.
    let sealed_end = audit
        .entries
        .iter()
        .filter(|e| e.kind == "seal" && e.writer != victim && e.gseq > end.gseq)
        .any(|seal| audit::seal_heads(&seal.body).unwrap().contains(&(victim.clone(), end.seq, end.hash.clone())));
    assert!(sealed_end, "a survivor sealed the victim's last head, entry {} of `{victim}`", end.seq);
    // The cut transaction left nothing: `op-held` counted once, by its one allow before.
    let held_count = query(&url, "SELECT value FROM counters WHERE counter_window = 'operation:op-held'");
    assert_eq!(held_count, ["1"], "the cut transaction's count was rolled back");
    let consumed = query(&url, "SELECT count(*) FROM approvals WHERE consumed");
    eprintln!(
        "killed replica 0 after {victim_calls_at_kill} calls to it ({} of them lost in flight); {} calls answered, \
         {} allowed, {} approvals consumed, {} escalations approved and allowed; its chain ends at entry {}",
        victim_lost_before.len(),
        seen.answers.len(),
        seen.allows().len(),
        consumed[0],
        seen.approved_flows,
        end.seq
    );
    drop(replicas);
    std::fs::remove_dir_all(&dir).ok();
    assert!(started.elapsed() < Duration::from_secs(90), "bounded: {:?}", started.elapsed());
}

/// Two replicas under load while PostgreSQL is stopped (`pg_ctl stop -m immediate`: connections cut, the server
/// gone) and started again. Every call sent once the server was down and answered before it was started again is
/// denied `gateway.store-unavailable`, never allowed, and not logged; `/ready` answers 503; once it is back, the
/// same processes (never restarted) turn ready and allow again; the log verifies and the counters equal the allows
/// logged.
#[test]
fn postgresql_stopped_and_started_under_load_denies_then_recovers_without_restart() {
    let started = Instant::now();
    let server = Server::start();
    let url = server.database("outage");
    let dir = policy_dir("replicas-outage", &SHOP.replace("at most 3", "at most 1000"));
    let mut replicas = Replicas::start(2, &dir.join("shop.remit"), &url, &dir, &[]);
    let pids = [replicas.pid(0), replicas.pid(1)];
    let done = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let outage = std::thread::scope(|scope| {
        let (replicas, done, seen) = (&replicas, &done, &seen);
        for caller in 0..4 {
            scope.spawn(move || {
                for k in 0..1_000 {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    let replica = (caller + k) % 2;
                    let sent = Instant::now();
                    // Each call its own operation: allowed whenever the store answers.
                    let answer = decide(replicas.url(replica), &payment("20.00 USD", &format!("op-{caller}-{k}")));
                    let mut seen = seen.lock().unwrap();
                    match answer {
                        Ok(answer) => seen.answers.push((replica, sent, Instant::now(), answer)),
                        Err(e) => seen.lost.push((replica, sent, e)),
                    }
                    drop(seen);
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
        }
        let timing = [800, 1_500, 1_000].map(Duration::from_millis);
        Outage::ride(replicas, done, timing, || server.pause(), || server.resume())
    });
    let seen = seen.into_inner().unwrap();
    outage.ridden_out(&mut replicas, pids, &seen);
    let Outage { cut_at: paused_at, restored_at: resumed_at, back_at, .. } = outage;
    let during: Vec<&Answer> = seen
        .answers
        .iter()
        .filter(|(_, sent, got, _)| *sent > paused_at && *got < resumed_at)
        .map(|(.., a)| a)
        .collect();
    let not_denied: Vec<_> = during.iter().filter(|a| !a.store_unavailable()).collect();
    assert!(not_denied.is_empty(), "calls during the outage not denied store-unavailable: {not_denied:?}");
    for replica in [0, 1] {
        let denied = seen.answers.iter().filter(|(r, s, g, _)| *r == replica && *s > paused_at && *g < resumed_at);
        assert!(denied.count() > 0, "replica {replica} denied calls during the outage");
    }
    let after: Vec<&Answer> = seen.answers.iter().filter(|(_, sent, ..)| *sent > back_at).map(|(.., a)| a).collect();
    assert!(!after.is_empty() && after.iter().all(|a| a.allowed()), "allowed again once ready: {after:?}");
    let before = seen.answers.iter().filter(|(_, _, got, a)| *got < paused_at && a.allowed()).count();
    assert!(before > 0, "allowed before the outage");

    let audit = audited(&url, &seen.allows(), "per_op");
    assert_eq!(audit.chains, 2);
    // A call sent while the server was down never reached it: it is not logged.
    let logged: Vec<_> = seen
        .answers
        .iter()
        .filter(|(_, sent, got, _)| *sent > paused_at && *got < resumed_at)
        .filter_map(|(.., a)| a.id.as_deref().filter(|id| audit.decisions.contains_key(*id)))
        .collect();
    assert!(logged.is_empty(), "denied for want of the store, yet logged: {logged:?}");
    eprintln!(
        "{} calls: {} during the outage, all denied gateway.store-unavailable; {} allowed after, the same processes",
        seen.answers.len(),
        during.len(),
        after.len()
    );
    drop(replicas);
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
    assert!(started.elapsed() < Duration::from_secs(90), "bounded: {:?}", started.elapsed());
}

/// The wallet as it was, Alice's own static mandate (tests/fixtures/wallet-static; scripts/main-job.sh runs this flow
/// on one gateway, under an instance of the shipped example) on three replicas: the agent's
/// 80 USD payment escalates on replica A; Alice finds it in the inbox of replica B and approves it there (`remit
/// approvals approve --gateway B`); the agent's retries — twelve at once of the same call, on A and C, and twelve
/// of the same payment in other operations — are allowed exactly once in all, and the approval is consumed by that
/// allow. The receipt of the operation names decisions of several replicas; the log verifies.
#[test]
fn the_wallet_escalated_on_one_replica_approved_on_another_is_allowed_exactly_once() {
    let url = shared().database("wallet_replicas");
    let dir = support::temp_dir("replicas-wallet");
    let wallet = support::examples::static_wallet();
    let replicas = Replicas::start(3, &wallet, &url, &dir, &["--clock", "2026-12-03T15:30:00Z"]);
    let (a, b, c) = (replicas.url(0), replicas.url(1), replicas.url(2));
    // The main job's call (scripts/main-job.sh).
    let pay = |operation: &str| {
        json!({
            "subject": {"type": "agent", "id": "agent:shopper",
                        "properties": {"credential": {"id": "cred-alice-shopper-3", "scopes": ["payments.write"]}}},
            "action": {"name": "make_payment", "properties": {"merchant": "acme-grocer", "amount": "80.00 USD"}},
            "resource": {"type": "order", "id": "order:acme-20261203-118"},
            "context": {"operation_id": operation}
        })
    };
    let first = evaluate(a, &pay("op-wallet")).unwrap();
    assert_eq!((first.outcome.as_str(), first.reasons.as_slice()), ("escalate", &["approval.missing".to_string()][..]));
    let request = first.access_request.clone().expect("an access request in Alice's inbox");

    // Alice's inbox on replica B lists it; she approves it there, with the command the main job uses.
    let auth = format!("Bearer {}", support::replicas::ALICE);
    let inbox = |url: &str| {
        let listed = remit_gateway::client::blocking::request(
            "GET",
            &format!("{url}/inbox/api/requests"),
            &[("Authorization", auth.as_str())],
            None,
        )
        .unwrap()
        .json();
        let found = listed["requests"].as_array().unwrap().iter().find(|r| r["id"] == request.as_str()).cloned();
        found.unwrap_or_else(|| panic!("`{request}` in the inbox of {url}: {listed}"))
    };
    assert_eq!(inbox(b)["status"], "pending");
    let approved = support::run(
        std::process::Command::new(support::remit_bin())
            .args(["approvals", "approve", &request, "--gateway", b])
            .env("REMIT_TOKEN", support::replicas::ALICE),
        Duration::from_secs(30),
    );
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));

    // The retries, all at once on the replicas other than the inbox's: the same call (the agent retrying), and the
    // same payment in other operations (which the approval would also allow, were it not used up).
    let calls: Vec<(&str, String)> = (0..24)
        .map(|i| {
            (if i % 2 == 0 { a } else { c }, if i < 12 { "op-wallet".to_string() } else { format!("op-wallet-{i}") })
        })
        .collect();
    let barrier = Barrier::new(calls.len());
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let handles: Vec<_> = calls
            .iter()
            .map(|(url, operation)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    evaluate(url, &pay(operation)).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let allows: Vec<&Answer> = answers.iter().filter(|a| a.allowed()).collect();
    assert_eq!(allows.len(), 1, "allowed exactly once: {answers:?}");
    let allow = allows[0].id.clone().unwrap();
    let others: Vec<&Answer> = answers.iter().filter(|a| !a.allowed()).collect();
    assert!(others.iter().all(|a| a.status == 200 && !a.store_unavailable()), "{others:?}");
    assert_eq!(inbox(a)["status"], "approved", "the answer is seen through every replica");
    let consumed_by = query(&url, &format!("SELECT consumed_by FROM approvals WHERE access_request = '{request}'"));
    assert_eq!(consumed_by, std::slice::from_ref(&allow), "the one approval, consumed by the one allow");
    // Used up: the same payment in yet another operation escalates again, on any replica.
    let again = evaluate(b, &pay("op-wallet-again")).unwrap();
    assert_eq!((again.outcome.as_str(), again.reasons.as_slice()), ("escalate", &["approval.missing".to_string()][..]));

    let audit = audited(&url, &[allow], "payment_per_op");
    assert_eq!(audit.chains, 3, "each replica wrote a chain: A and C decisions, B the approval");
    let receipt = support::run(
        std::process::Command::new(support::remit_bin()).args([
            "audit",
            "receipt",
            "--operation",
            "op-wallet",
            "--store",
            &url,
        ]),
        Duration::from_secs(30),
    );
    assert!(receipt.status.success(), "{}", String::from_utf8_lossy(&receipt.stderr));
    let receipt: Value = serde_json::from_slice(&receipt.stdout).unwrap();
    let writers: std::collections::BTreeSet<&str> =
        receipt["decisions"].as_array().unwrap().iter().filter_map(|d| d["writer"].as_str()).collect();
    assert_eq!(receipt["decisions"].as_array().unwrap().len(), 13, "the escalation and the twelve retries");
    assert_eq!(writers.len(), 2, "decided by A and C: {writers:?}");
    drop(replicas);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--store-answer-timeout` bounds how long a replica waits for a server that stops answering without closing its
/// connections (frozen: a host that hangs, packets dropped): a payment is denied `gateway.store-unavailable` after
/// about the 2 s asked for, not the 35 s default; once the server answers again the same replica allows. The writer
/// is named after the command that opened it.
#[test]
fn the_answer_timeout_flag_bounds_the_wait_for_a_frozen_server() {
    let server = Server::start();
    let url = server.database("answer_timeout");
    let dir = policy_dir("replicas-answer-timeout", &SHOP.replace("at most 3", "at most 1000"));
    let replicas = Replicas::start(1, &dir.join("shop.remit"), &url, &dir, &["--store-answer-timeout", "2s"]);
    assert!(decide(replicas.url(0), &payment("20.00 USD", "op-1")).unwrap().allowed());
    writer_of(&url, replicas.pid(0));
    server.freeze();
    let sent = Instant::now();
    let answer = decide(replicas.url(0), &payment("20.00 USD", "op-2"));
    let took = sent.elapsed();
    server.thaw();
    let answer = answer.unwrap();
    assert!(answer.store_unavailable(), "{answer:?}");
    assert!(took >= Duration::from_millis(1_900) && took < Duration::from_secs(15), "denied after {took:?}");
    let back = wait_until(Duration::from_secs(30), || {
        decide(replicas.url(0), &payment("20.00 USD", "op-3")).is_ok_and(|a| a.allowed())
    });
    assert!(back, "allowed again once the server answers: {}", replicas.stderr(0));
    eprintln!("a payment to a frozen server denied after {took:?} (--store-answer-timeout 2s)");
    drop(replicas);
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

/// Failover (docs/scaling.md, "Failover"): a primary with a synchronous streaming-replication standby
/// (scripts/postgres.sh `standby --sync`), and two replicas whose store URL names both servers (libpq's multi-host
/// form, `…@primary:p1,standby:p2/db?target_session_attrs=read-write`), under load — small payments counted by a
/// budget of 3 per operation, and large ones escalated on one replica, approved in the inbox of the other, retried —
/// when the primary is stopped (`pg_ctl stop -m immediate`) and, 1.5 s later, the standby promoted (`pg_ctl
/// promote`). While there is no primary every call is answered, denied `gateway.store-unavailable` (never allowed,
/// never logged), and `/ready` answers 503; once the standby is promoted the same processes (never restarted)
/// connect to it, turn ready and decide again. On the promoted database: every allow any caller was answered, before
/// the failover too, is logged (a commit returned only once the standby had flushed it), `remit audit verify`
/// passes, every budget counter equals the allows logged, and every consumed approval has its allow.
#[test]
fn a_promoted_standby_takes_over_from_a_dead_primary_without_a_restart_and_loses_no_allow() {
    let started = Instant::now();
    let primary = Server::start();
    primary.database("failover");
    let standby = primary.standby(true);
    let url = primary.failover_url(&standby, "failover");
    let dir = policy_dir("replicas-failover", SHOP);
    let mut replicas = Replicas::start(2, &dir.join("shop.remit"), &url, &dir, &[]);
    let pids = [replicas.pid(0), replicas.pid(1)];
    let done = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let outage = std::thread::scope(|scope| {
        let (replicas, done, seen) = (&replicas, &done, &seen);
        for caller in 0..4 {
            scope.spawn(move || {
                let call = |replica: usize, body: &Value| {
                    let sent = Instant::now();
                    let answer = decide(replicas.url(replica), body);
                    let mut seen = seen.lock().unwrap();
                    match answer {
                        Ok(answer) => {
                            seen.answers.push((replica, sent, Instant::now(), answer.clone()));
                            Some(answer)
                        }
                        Err(e) => {
                            seen.lost.push((replica, sent, e));
                            None
                        }
                    }
                };
                for k in 0..2_000 {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    let first = (caller + k) % 2;
                    if k % 5 != 4 {
                        // Four calls per operation: the fourth is over the budget of 3.
                        call(first, &payment("20.00 USD", &format!("op-{caller}-{}", k / 4)));
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    let operation = format!("big-{caller}-{k}");
                    let mut big = payment("80.00 USD", &operation);
                    big["resource"]["id"] = json!(format!("order:{operation}"));
                    // Without a primary it is denied, not escalated: no flow then.
                    let Some(escalated) = call(first, &big) else { continue };
                    let Some(request) = escalated.access_request.filter(|_| escalated.outcome == "escalate") else {
                        continue;
                    };
                    match approve(replicas.url(1 - first), &request) {
                        Ok(200) => {}
                        // Refused without a primary (503): the flow ends there.
                        Ok(_) => continue,
                        Err(e) => {
                            seen.lock().unwrap().lost.push((1 - first, Instant::now(), e));
                            continue;
                        }
                    }
                    if call(first, &big).is_some_and(|a| a.allowed()) {
                        seen.lock().unwrap().approved_flows += 1;
                    }
                }
            });
        }
        let timing = [1_200, 1_500, 1_500].map(Duration::from_millis);
        Outage::ride(replicas, done, timing, || primary.pause(), || standby.promote())
    });
    let seen = seen.into_inner().unwrap();
    outage.ridden_out(&mut replicas, pids, &seen);
    let Outage { cut_at: stopped_at, restored_at: promoted_at, back_at, .. } = outage;
    // Without a primary: denied for want of the store, by both replicas, and never allowed.
    let gap: Vec<&(usize, Instant, Instant, Answer)> =
        seen.answers.iter().filter(|(_, sent, got, _)| *sent > stopped_at && *got < promoted_at).collect();
    let not_denied: Vec<_> = gap.iter().filter(|(.., a)| !a.store_unavailable()).collect();
    assert!(not_denied.is_empty(), "calls without a primary not denied store-unavailable: {not_denied:?}");
    for replica in [0, 1] {
        assert!(gap.iter().any(|(r, ..)| *r == replica), "replica {replica} denied calls without a primary");
    }
    // On the promoted standby: both decide again, allowing within the budget.
    let after: Vec<&(usize, Instant, Instant, Answer)> =
        seen.answers.iter().filter(|(_, sent, ..)| *sent > back_at).collect();
    let unavailable: Vec<_> = after.iter().filter(|(.., a)| a.store_unavailable() || a.status != 200).collect();
    assert!(unavailable.is_empty(), "refused once ready again: {unavailable:?}");
    for replica in [0, 1] {
        let allowed = after.iter().filter(|(r, .., a)| *r == replica && a.allowed()).count();
        assert!(allowed > 0, "replica {replica} allowed on the promoted standby");
    }
    let before = seen.answers.iter().filter(|(_, _, got, a)| *got < stopped_at && a.allowed()).count();
    assert!(before > 0 && seen.approved_flows > 0, "allowed before the failover; escalations approved and allowed");
    let promoted = standby.database_url("failover");
    assert_eq!(query(&promoted, "SELECT pg_is_in_recovery()"), ["f"], "the standby was promoted");
    let sessions = query(
        &promoted,
        "SELECT DISTINCT application_name FROM pg_stat_activity WHERE application_name LIKE 'remit serve %' ORDER BY 1",
    );
    let mut names: Vec<String> = pids.iter().map(|pid| format!("remit serve {pid}")).collect();
    names.sort();
    assert_eq!(sessions, names, "both replicas' connections are on the promoted standby");

    // The promoted database, audited: every allow answered (before the failover too) is there.
    let audit = audited(&promoted, &seen.allows(), "per_op");
    assert_eq!(audit.chains, 2, "a chain per replica, each going on after the failover");
    let logged: Vec<_> =
        gap.iter().filter_map(|(.., a)| a.id.as_deref().filter(|id| audit.decisions.contains_key(*id))).collect();
    assert!(logged.is_empty(), "denied for want of the store, yet logged: {logged:?}");
    let consumed = query(&promoted, "SELECT count(*) FROM approvals WHERE consumed");
    eprintln!(
        "{} calls, {} allowed ({before} before the primary died), {} without a primary (all denied \
         gateway.store-unavailable), ready on the promoted standby {:?} after `pg_ctl promote`; {} approvals \
         consumed, {} escalations approved and allowed",
        seen.answers.len(),
        seen.allows().len(),
        gap.len(),
        back_at - promoted_at,
        consumed[0],
        seen.approved_flows
    );
    drop(replicas);
    drop(standby);
    drop(primary);
    std::fs::remove_dir_all(&dir).ok();
    assert!(started.elapsed() < Duration::from_secs(90), "bounded: {:?}", started.elapsed());
}

/// What asynchronous replication loses at a failover, and what finds it (docs/scaling.md, "Failover"): a primary
/// with an asynchronous standby, one replica signing its chain's head every second (`--log-key`). Ten allows reach
/// the standby; then the standby stops (a replication lag as long as one likes), and ten more allows are answered
/// and committed on the primary alone, and their head signed and kept outside (`remit audit head`). The primary
/// dies; the standby, started again, is promoted; the same replica decides on it. The promoted database lacks the
/// ten last allows, and is a consistent earlier state of the primary's: `remit audit verify` passes on it — the
/// cut tail is not found by the log alone — while `remit audit verify --head` with the head kept outside fails,
/// naming the writer's entry that was rewritten.
#[test]
fn an_asynchronous_standby_promoted_loses_the_unreplicated_tail_which_only_a_head_kept_outside_finds() {
    let started = Instant::now();
    let primary = Server::start();
    primary.database("async_failover");
    let standby = primary.standby(false);
    // Without `target_session_attrs`: with several hosts, a gateway takes `read-write`.
    let url = primary.failover_url(&standby, "async_failover").replace("?target_session_attrs=read-write", "");
    let dir = policy_dir("replicas-async-failover", &SHOP.replace("at most 3", "at most 1000"));
    let key = dir.join("log.key");
    let made = Command::new(support::remit_bin()).arg("keygen").arg("-o").arg(&key).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let key_text = key.display().to_string();
    let replicas =
        Replicas::start(1, &dir.join("shop.remit"), &url, &dir, &["--log-key", &key_text, "--head-interval", "1s"]);
    let allow = |operation: &str| {
        let answer = decide(replicas.url(0), &payment("20.00 USD", operation)).unwrap();
        assert!(answer.allowed(), "{answer:?}: {}", replicas.stderr(0));
        answer.id.unwrap()
    };
    let (on_primary, on_standby) = (primary.database_url("async_failover"), standby.database_url("async_failover"));
    let decisions = "SELECT count(*) FROM log WHERE kind = 'decision'";
    let kept: Vec<String> = (0..10).map(|k| allow(&format!("op-kept-{k}"))).collect();
    let replicated = wait_until(Duration::from_secs(10), || query(&on_standby, decisions) == ["10"]);
    assert!(replicated, "the standby replayed the first ten allows");
    standby.pause();
    let lost: Vec<String> = (0..10).map(|k| allow(&format!("op-lost-{k}"))).collect();
    // A head signed after the lost allows, kept outside the database.
    let writer = writer_of(&on_primary, replicas.pid(0));
    let last: u64 =
        query(&on_primary, &format!("SELECT max(seq) FROM log WHERE writer = '{writer}'"))[0].parse().unwrap();
    let head_file = dir.join("head.json");
    let signed = wait_until(Duration::from_secs(10), || {
        let out = Command::new(support::remit_bin()).args(["audit", "head", "--store", &on_primary]).output().unwrap();
        let head: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let covers = head["writer"] == writer.as_str() && head["seq"].as_u64().is_some_and(|seq| seq >= last);
        if covers {
            std::fs::write(&head_file, &out.stdout).unwrap();
        }
        covers
    });
    assert!(signed, "a head of `{writer}` at or after entry {last} was signed");
    primary.pause();
    standby.resume();
    standby.promote();
    let back = wait_until(Duration::from_secs(30), || replicas.ready(0) == 200);
    assert!(back, "the replica is ready on the promoted standby: {}", replicas.stderr(0));
    let after = allow("op-after");

    // The promoted database: the first ten allows and the one after, not the ten the standby never received.
    let logged = |id: &str| query(&on_standby, &format!("SELECT count(*) FROM log WHERE body LIKE '%\"{id}\"%'"));
    for id in kept.iter().chain([&after]) {
        assert_eq!(logged(id), ["1"], "`{id}` is logged on the promoted standby");
    }
    let missing: Vec<&String> = lost.iter().filter(|id| logged(id) == ["0"]).collect();
    assert_eq!(missing.len(), lost.len(), "the allows committed on the primary alone are lost: {missing:?}");
    // The log alone verifies: an earlier, consistent state, the writer's chain going on from its replicated head.
    let (passed, said) = audit_verify(&on_standby);
    assert!(passed, "remit audit verify on the promoted standby: {said}");
    // The head kept outside finds the cut.
    let public = format!("{}.pub", key.display());
    let out = Command::new(support::remit_bin())
        .args(["audit", "verify", &on_standby, "--key", &public, "--head"])
        .arg(&head_file)
        .output()
        .unwrap();
    let kept_said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the kept head fails: {kept_said}");
    assert!(kept_said.contains("the kept head fails") && kept_said.contains(&writer), "{kept_said}");
    eprintln!("remit audit verify: {said}\nwith the head kept outside: {kept_said}");
    drop(replicas);
    drop(standby);
    drop(primary);
    std::fs::remove_dir_all(&dir).ok();
    assert!(started.elapsed() < Duration::from_secs(90), "bounded: {:?}", started.elapsed());
}
