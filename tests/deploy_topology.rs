//! The deployment of deploy/compose.yaml run as plain processes on loopback ports this test picks: a PostgreSQL
//! (scripts/postgres.sh), two `remit serve --config deploy/compose/remit.toml` replicas (their store and secrets from
//! `REMIT_*` variables and secret files, as in the compose file) and Debian's HAProxy with deploy/haproxy.cfg (its
//! addresses from the variables that file reads), checking the replicas on `/ready`. Decisions through HAProxy reach
//! both replicas; the budget of the demo policy (5 payments per operation) allows exactly 5 across both; a replica
//! stopped with SIGTERM turns unready, drains and exits 0 while decisions go on flowing through the other, none
//! failing; the log the two wrote verifies. Everything started is stopped at the end (and killed if the test fails).
//! HAProxy comes from scripts/test-deps.sh; a machine without it fails, naming the script.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use remit_gateway::client::blocking::{request, Response};
use serde_json::json;
use support::postgres::Server;

const PEP: &str = "pep-topology-token";
const ADMIN: &str = "admin-topology-token";

/// A child process killed (and waited for) when dropped: nothing outlives a failed test.
struct Process {
    child: Child,
    name: &'static str,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// SIGTERM, as a service manager or Kubernetes stops it.
    fn terminate(&self) {
        let sent = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(sent.success(), "kill -TERM {}", self.name);
    }

    /// Waits for the exit, at most `limit`: its status, and how long it took.
    fn wait(&mut self, limit: Duration) -> (std::process::ExitStatus, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, started.elapsed());
            }
            assert!(started.elapsed() < limit, "{} did not exit within {limit:?}", self.name);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn haproxy() -> PathBuf {
    let found = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].into_iter().map(PathBuf::from).find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("no HAProxy: run `scripts/test-deps.sh` (it installs Debian's `haproxy`)"))
}

/// A replica: `remit serve --config deploy/compose/remit.toml` on a free loopback port, the store and the secrets
/// from variables (as deploy/compose.yaml gives them); its address once it printed it.
fn replica(name: &'static str, store: &str, secrets: &Path) -> (Process, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .args(["serve", "--config"])
        .arg(support::root().join("deploy/compose/remit.toml"))
        .args(["--listen", "127.0.0.1:0"])
        .env("REMIT_STORE", store)
        .env("REMIT_STORE_PASSWORD_FILE", secrets.join("store-password"))
        .env("REMIT_ADMIN_TOKEN_FILE", secrets.join("admin-tokens"))
        .env("REMIT_PEP_TOKEN_FILE", secrets.join("pep-tokens"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().expect("start remit serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the replica says where it listens").unwrap();
    let address = first.strip_prefix("remit gateway listening on http://").expect(&first).to_string();
    std::thread::spawn(move || for _ in lines {});
    (Process { child, name }, address)
}

fn decide(url: &str, operation: &str) -> Result<Response, String> {
    let body = json!({
        "subject": {"id": "agent:shopper"},
        "action": {"name": "make_payment", "arguments": {"merchant": "acme-grocer", "amount": "80.00 USD"}},
        "resource": {"id": "order:1"},
        "context": {"operation_id": operation}
    })
    .to_string();
    let auth = format!("Bearer {PEP}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    request("POST", &format!("{url}/v1/decide"), &headers, Some(body.as_bytes()))
}

fn allowed(answer: &Response) -> bool {
    answer.status == 200 && answer.json()["decision"] == "allow"
}

/// The allows a replica counted (its `/metrics`).
fn allows(address: &str) -> u64 {
    let metrics = request("GET", &format!("http://{address}/metrics"), &[], None).unwrap().text();
    let line = metrics.lines().find(|l| l.starts_with("remit_decisions_total{outcome=\"allow\"}")).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn ready(address: &str) -> Response {
    request("GET", &format!("http://{address}/ready"), &[], None).unwrap()
}

#[test]
fn two_replicas_behind_haproxy_share_one_budget_and_survive_a_replica_stopped_with_sigterm() {
    let haproxy = haproxy();
    let started = Instant::now();
    let postgres = Server::start();
    let secrets = support::temp_dir("topology");
    let (store, password) = postgres.url_and_password(postgres.url());
    std::fs::write(secrets.join("store-password"), format!("{password}\n")).unwrap();
    std::fs::write(secrets.join("admin-tokens"), format!("ops={ADMIN}\n")).unwrap();
    std::fs::write(secrets.join("pep-tokens"), format!("pep={PEP}\n")).unwrap();

    let (mut a, a_address) = replica("replica a", &store, &secrets);
    let (mut b, b_address) = replica("replica b", &store, &secrets);
    let policy = |address: &str| ready(address).json()["policy"].as_str().unwrap().to_string();
    assert_eq!(policy(&a_address), policy(&b_address), "both replicas serve the one policy");

    let port = free_port();
    let lb = format!("http://127.0.0.1:{port}");
    let mut balancer = Process {
        child: Command::new(&haproxy)
            .args(["-db", "-f"])
            .arg(support::root().join("deploy/haproxy.cfg"))
            .env("REMIT_LB_BIND", format!("127.0.0.1:{port}"))
            .env("REMIT_REPLICA_A", &a_address)
            .env("REMIT_REPLICA_B", &b_address)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        name: "haproxy",
    };
    // HAProxy listens once its configuration is loaded; both replicas pass their first checks within a second.
    let deadline = Instant::now() + Duration::from_secs(15);
    while decide(&lb, "op-warm-0").is_err() {
        if let Some(status) = balancer.child.try_wait().unwrap() {
            let mut errors = String::new();
            std::io::Read::read_to_string(balancer.child.stderr.as_mut().unwrap(), &mut errors).unwrap();
            panic!("haproxy exited ({status}): {errors}");
        }
        assert!(Instant::now() < deadline, "haproxy answers on {lb}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Round robin: decisions through HAProxy reach both replicas.
    let before = (allows(&a_address), allows(&b_address));
    for i in 1..=10 {
        let answer = decide(&lb, &format!("op-warm-{i}")).unwrap();
        assert!(allowed(&answer), "{}", answer.text());
    }
    let (on_a, on_b) = (allows(&a_address) - before.0, allows(&b_address) - before.1);
    assert_eq!(on_a + on_b, 10);
    assert!(on_a >= 3 && on_b >= 3, "both replicas decide: {on_a} on a, {on_b} on b");

    // A budget of 5 per operation, 40 calls at once through HAProxy: exactly 5 allowed, across both replicas.
    let before = (allows(&a_address), allows(&b_address));
    let barrier = Barrier::new(40);
    let allowed_calls = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..40)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let answer = decide(&lb, "op-budget").unwrap();
                    assert_eq!(answer.status, 200, "{}", answer.text());
                    allowed(&answer)
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).filter(|a| *a).count()
    });
    assert_eq!(allowed_calls, 5, "a budget of 5 allows exactly 5 across the replicas");
    assert_eq!(allows(&a_address) - before.0 + allows(&b_address) - before.1, 5);

    // Decisions flow without a pause while replica a is stopped with SIGTERM: a turns unready at once, HAProxy
    // takes it out of rotation within its checks (2 x 1 s, less than the replicas' drain-delay of 3 s), a drains
    // and exits 0; b answers everything after. Each call its own operation, so each must be allowed. (HAProxy also
    // redispatches a connection a refuses once it stopped listening, so this passes with no drain-delay too: what
    // it shows is that nothing in flight is lost and that a exits 0, not the delay itself.)
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::<String>::new())));
    let callers: Vec<_> = (0..4)
        .map(|caller| {
            let (lb, stop, sent, failures) = (lb.clone(), stop.clone(), sent.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    sent.fetch_add(1, Ordering::Relaxed);
                    match decide(&lb, &format!("op-flow-{caller}-{i}")) {
                        Ok(answer) if allowed(&answer) => {}
                        Ok(answer) => failures.lock().unwrap().push(format!("{}: {}", answer.status, answer.text())),
                        Err(e) => failures.lock().unwrap().push(e),
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let a_before_stop = allows(&a_address);
    a.terminate();
    let unready = ready(&a_address);
    assert_eq!(unready.status, 503, "/ready turns 503 at once on SIGTERM: {}", unready.text());
    assert!(unready.text().contains("gateway.draining"), "{}", unready.text());
    let (status, took) = a.wait(Duration::from_secs(30));
    assert!(status.success(), "replica a exits 0 after draining: {status}");
    assert!(took >= Duration::from_millis(2500), "a kept serving through its drain-delay (3 s): {took:?}");
    let b_at_a_exit = allows(&b_address);
    // The callers go on against b alone for a while.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.join().unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    let sent = sent.load(Ordering::Relaxed);
    assert!(failures.is_empty(), "{} of {sent} calls failed while replica a stopped: {failures:?}", failures.len());
    assert!(allows(&b_address) > b_at_a_exit, "b decided after a was gone");
    assert!(a_before_stop > 0);
    assert!(sent > 50, "calls flowed throughout: {sent}");
    eprintln!("{sent} calls through HAProxy while replica a stopped, none failed; a exited 0 {took:?} after SIGTERM");

    // The log both replicas wrote is one chain that verifies.
    let verified = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["audit", "verify", &store])
        .env("REMIT_STORE_PASSWORD", &password)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{report}{}", String::from_utf8_lossy(&verified.stderr));

    b.terminate();
    assert!(b.wait(Duration::from_secs(30)).0.success());
    balancer.terminate();
    let _ = balancer.wait(Duration::from_secs(10));
    drop(postgres);
    std::fs::remove_dir_all(&secrets).ok();
    assert!(started.elapsed() < Duration::from_secs(120), "bounded: {:?}", started.elapsed());
}

/// Policy rollout across replicas: a signed bundle published once at the location every replica watches (a shared
/// volume, a Kubernetes ConfigMap) is taken by each, which then reports it in `/ready` and `/metrics`; an older
/// bundle put back is refused by every replica (the revision in force is the database's), which keep serving the
/// newer one.
#[test]
fn a_signed_bundle_published_once_is_taken_by_every_replica_and_an_older_one_by_none() {
    let postgres = Server::start();
    let dir = support::temp_dir("topology-rollout");
    let (store, password) = postgres.url_and_password(postgres.url());
    std::fs::write(dir.join("store-password"), format!("{password}\n")).unwrap();
    std::fs::write(dir.join("admin-tokens"), format!("ops={ADMIN}\n")).unwrap();
    std::fs::write(dir.join("pep-tokens"), format!("pep={PEP}\n")).unwrap();
    let remit = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "remit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    remit(&["keygen", "-o", "owner.key"]);
    let shop = std::fs::read_to_string(support::root().join("deploy/compose/policy/shop.remit")).unwrap();
    // Revision 1: the demo policy; revision 2: payments need an approval (so a payment is no longer allowed).
    let versions = [
        ("v1", shop.clone()),
        (
            "v2",
            shop.replace(
                "  allow make_payment\n",
                "  allow make_payment\n  require approval commercial_terms for make_payment\n",
            ),
        ),
    ];
    for (revision, (name, source)) in versions.iter().enumerate() {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("shop.remit"), source).unwrap();
        let bundle = format!("{name}.bundle");
        remit(&[
            "build",
            name,
            "--bundle",
            "--sign",
            "owner.key",
            "--revision",
            &(revision + 1).to_string(),
            "-o",
            &bundle,
        ]);
    }
    std::fs::create_dir_all(dir.join("published")).unwrap();
    // Published as a volume does it: written beside, then renamed into place (never half a file).
    let publish = |name: &str| {
        std::fs::copy(dir.join(format!("{name}.bundle")), dir.join("published/.policy.bundle.new")).unwrap();
        std::fs::rename(dir.join("published/.policy.bundle.new"), dir.join("published/policy.bundle")).unwrap();
    };
    publish("v1");
    std::fs::write(
        dir.join("remit.toml"),
        "policy = [\"published/policy.bundle\"]\nverify-key = \"owner.key.pub\"\nwatch = true\n\
         store-password-file = \"store-password\"\nadmin-token-file = [\"admin-tokens\"]\npep-token-file = [\"pep-tokens\"]\n",
    )
    .unwrap();
    let start = |name: &'static str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
        command
            .args(["serve", "--config"])
            .arg(dir.join("remit.toml"))
            .args(["--listen", "127.0.0.1:0"])
            .env("REMIT_STORE", &store)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the replica says where it listens").unwrap();
        let address = first.strip_prefix("remit gateway listening on http://").expect(&first).to_string();
        std::thread::spawn(move || for _ in lines {});
        (Process { child, name }, address)
    };
    let replicas = [start("replica a"), start("replica b")];
    let policy = |address: &str| ready(address).json()["policy"].as_str().unwrap().to_string();
    let v1 = policy(&replicas[0].1);
    assert_eq!(policy(&replicas[1].1), v1);
    for (_, address) in &replicas {
        assert!(allowed(&decide(&format!("http://{address}"), "op-v1").unwrap()));
    }

    publish("v2");
    let deadline = Instant::now() + Duration::from_secs(20);
    while replicas.iter().any(|(_, address)| policy(address) == v1) {
        assert!(Instant::now() < deadline, "every replica takes the published bundle");
        std::thread::sleep(Duration::from_millis(200));
    }
    let v2 = policy(&replicas[0].1);
    assert_eq!(policy(&replicas[1].1), v2, "both serve the one bundle");
    for (_, address) in &replicas {
        let metrics = request("GET", &format!("http://{address}/metrics"), &[], None).unwrap().text();
        assert!(metrics.contains(&format!("remit_policy_info{{policy=\"{v2}\"}} 1")), "{metrics}");
        let answer = decide(&format!("http://{address}"), "op-v2").unwrap();
        assert_eq!(answer.json()["decision"], "escalate", "decided under v2: {}", answer.text());
    }

    // Putting revision 1 back: every replica refuses it and keeps serving revision 2.
    publish("v1");
    let failed = |address: &str| {
        let metrics = request("GET", &format!("http://{address}/metrics"), &[], None).unwrap().text();
        let line = metrics.lines().find(|l| l.starts_with("remit_policy_reload_failures_total")).unwrap().to_string();
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while replicas.iter().any(|(_, address)| failed(address) == 0) {
        assert!(Instant::now() < deadline, "every replica tried the older bundle and refused it");
        std::thread::sleep(Duration::from_millis(200));
    }
    for (_, address) in &replicas {
        assert_eq!(policy(address), v2, "an older revision is not rolled out");
    }
    drop(replicas);
    drop(postgres);
    std::fs::remove_dir_all(&dir).ok();
}
