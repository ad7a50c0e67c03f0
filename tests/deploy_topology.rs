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

/// Policy rollout through the database itself (no shared volume): a signed bundle published once with `remit bundle
/// publish` is taken by every `remit serve --bundle-from-store` replica before a deadline, each reporting it in
/// `/ready`, `/metrics` and the writers table; a bundle whose signature does not verify with the replicas' key
/// (signed by another key, or changed after signing) and an older revision (written into the table by someone with
/// the database's credentials, past the publisher's own check) are refused by every replica, which keep serving the
/// newer one; a replica started later serves the bundle in force; and the log says which replica took or refused
/// which bundle, and under which policy each decided.
#[test]
fn a_signed_bundle_published_in_the_database_is_taken_by_every_replica_and_a_bad_or_older_one_by_none() {
    let postgres = Server::start();
    let dir = support::temp_dir("topology-published");
    let (store, password) = postgres.url_and_password(postgres.url());
    std::fs::write(dir.join("store-password"), format!("{password}\n")).unwrap();
    std::fs::write(dir.join("admin-tokens"), format!("ops={ADMIN}\n")).unwrap();
    std::fs::write(dir.join("pep-tokens"), format!("pep={PEP}\n")).unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_remit")).args(args).current_dir(&dir).output().unwrap();
    let remit = |args: &[&str]| {
        let out = run(args);
        assert!(out.status.success(), "remit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    remit(&["keygen", "-o", "owner.key"]);
    remit(&["keygen", "-o", "intruder.key"]);
    let shop = std::fs::read_to_string(support::root().join("deploy/compose/policy/shop.remit")).unwrap();
    let approval = "  allow make_payment\n  require approval commercial_terms for make_payment\n";
    // v1: the demo policy; v2: payments need an approval; forged: v1 again as revision 3, by another key.
    let builds = [
        ("v1", shop.clone(), "owner.key", 1),
        ("v2", shop.replace("  allow make_payment\n", approval), "owner.key", 2),
        ("forged", shop.clone(), "intruder.key", 3),
    ];
    for (name, source, key, revision) in &builds {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("shop.remit"), source).unwrap();
        let bundle = format!("{name}.bundle");
        remit(&["build", name, "--bundle", "--sign", key, "--revision", &revision.to_string(), "-o", &bundle]);
    }
    // Changed after signing: v2's manifest made to say revision 9, its owner's signature kept.
    let v2_bytes = std::fs::read(dir.join("v2.bundle")).unwrap();
    let tampered = String::from_utf8_lossy(&v2_bytes).contains("\"revision\":2");
    assert!(tampered, "the manifest names its revision");
    let at = v2_bytes.windows(12).position(|w| w == b"\"revision\":2").unwrap();
    let mut changed = v2_bytes.clone();
    changed[at + 11] = b'9';
    std::fs::write(dir.join("tampered.bundle"), &changed).unwrap();
    let policy_of = |name: &str| {
        let bytes = std::fs::read(dir.join(format!("{name}.bundle"))).unwrap();
        remit_gateway::bundle::Bundle::read(&bytes).unwrap().manifest.policy
    };
    let (v1, v2) = (policy_of("v1"), policy_of("v2"));
    assert_ne!(v1, v2);
    let store_args = ["--store", store.as_str(), "--store-password-file", "store-password"];
    let publish = |name: &str| -> u64 {
        let bundle = format!("{name}.bundle");
        let said = remit(&[&["bundle", "publish", bundle.as_str()][..], &store_args[..]].concat());
        let id = said.strip_prefix("published bundle ").and_then(|s| s.split(':').next()).expect(&said);
        id.parse().unwrap()
    };
    let published_count = || postgres.query("SELECT count(*) FROM published_bundles");
    let v1_id = publish("v1");

    std::fs::write(
        dir.join("remit.toml"),
        "verify-key = \"owner.key.pub\"\nbundle-from-store = true\nstore-password-file = \"store-password\"\n\
         admin-token-file = [\"admin-tokens\"]\npep-token-file = [\"pep-tokens\"]\n",
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
            .stderr(Stdio::inherit());
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the replica says where it listens").unwrap();
        let address = first.strip_prefix("remit gateway listening on http://").expect(&first).to_string();
        std::thread::spawn(move || for _ in lines {});
        (Process { child, name }, address)
    };
    let replicas = [start("replica a"), start("replica b")];
    let policy = |address: &str| ready(address).json()["policy"].as_str().unwrap().to_string();
    for (_, address) in &replicas {
        assert_eq!(policy(address), v1, "a replica starts on the published bundle");
        assert!(allowed(&decide(&format!("http://{address}"), "op-v1").unwrap()));
    }

    let v2_id = publish("v2");
    let published_at = Instant::now();
    let deadline = published_at + Duration::from_secs(20);
    while replicas.iter().any(|(_, address)| policy(address) != v2) {
        assert!(Instant::now() < deadline, "every replica takes the published bundle within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("both replicas served revision 2 {:?} after it was published", published_at.elapsed());
    for (_, address) in &replicas {
        let metrics = request("GET", &format!("http://{address}/metrics"), &[], None).unwrap().text();
        assert!(metrics.contains(&format!("remit_policy_info{{policy=\"{v2}\"}} 1")), "{metrics}");
        assert!(metrics.contains("\nremit_policy_revision 2\n"), "{metrics}");
        assert_eq!(ready(address).json()["revision"], 2, "/ready names the revision it serves");
        let answer = decide(&format!("http://{address}"), "op-v2").unwrap();
        assert_eq!(answer.json()["decision"], "escalate", "decided under v2: {}", answer.text());
    }

    // The publisher's own checks: a bundle its key did not sign, and an older revision, are not published.
    let before = published_count();
    let out =
        run(&[&["bundle", "publish", "forged.bundle", "--verify-key", "owner.key.pub"][..], &store_args[..]].concat());
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("signature does not verify"));
    let out = run(&[&["bundle", "publish", "v1.bundle"][..], &store_args[..]].concat());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("older than revision 2"), "{said}");
    assert_eq!(published_count(), before, "nothing published");

    // Published anyway (no key given to the publisher; the table written directly): every replica refuses each.
    let failures = |address: &str| {
        let metrics = request("GET", &format!("http://{address}/metrics"), &[], None).unwrap().text();
        let line = metrics.lines().find(|l| l.starts_with("remit_policy_reload_failures_total")).unwrap().to_string();
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    let refused_everywhere = |expected: u64| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while replicas.iter().any(|(_, address)| failures(address) < expected) {
            assert!(Instant::now() < deadline, "every replica tried the bundle and refused it");
            std::thread::sleep(Duration::from_millis(100));
        }
        for (_, address) in &replicas {
            assert_eq!(failures(address), expected, "one refusal per bundle");
            assert_eq!(policy(address), v2, "the replica still serves revision 2");
            let answer = decide(&format!("http://{address}"), "op-refused").unwrap();
            assert_eq!(answer.json()["decision"], "escalate", "still decided under v2: {}", answer.text());
        }
    };
    let forged_id = publish("forged");
    refused_everywhere(1);
    let tampered_id = publish("tampered");
    refused_everywhere(2);
    let older_id = {
        use remit_gateway::Store;
        let options =
            remit_gateway::PostgresOptions { writer: "someone with the credentials".into(), ..Default::default() };
        let direct = remit_gateway::PostgresStore::connect(&store, Some(&password), &options).unwrap();
        let bytes = std::fs::read(dir.join("v1.bundle")).unwrap();
        let mut tx = direct.begin().unwrap();
        let older = remit_gateway::store::PublishedBundle {
            id: 0,
            revision: 1,
            policy: v1.clone(),
            sha256: String::new(),
            published_by: "someone".into(),
            published_at: 0,
            bytes,
        };
        let id = tx.publish_bundle(&older).unwrap();
        tx.commit().unwrap();
        id
    };
    refused_everywhere(3);

    // A replica started now takes the newest bundle it can serve: revision 2, past the three refused ones.
    let late = start("replica c");
    assert_eq!(policy(&late.1), v2, "a replica started later serves the bundle in force");
    assert_eq!(decide(&format!("http://{}", late.1), "op-late").unwrap().json()["decision"], "escalate");

    // The writers table: each replica's row names the policy it serves (brought up to date by its seals).
    let pids: Vec<String> = replicas.iter().chain([&late]).map(|(p, _)| p.child.id().to_string()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let writers = loop {
        let rows = postgres.query("SELECT id, name, coalesce(policy, '') FROM writers WHERE name LIKE 'remit serve %'");
        let rows: Vec<(String, String, String)> = rows
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                (f[0].to_string(), f[1].strip_prefix("remit serve ").unwrap().to_string(), f[2].to_string())
            })
            .collect();
        let serving = pids.iter().all(|pid| rows.iter().any(|(_, p, policy)| p == pid && *policy == v2));
        if serving {
            break rows;
        }
        assert!(Instant::now() < deadline, "every replica's writer row names revision 2's policy: {rows:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let writer_of = |i: usize| writers.iter().find(|(_, pid, _)| *pid == pids[i]).unwrap().0.clone();

    // The log: which replica took or refused which bundle, and under which policy each decided.
    let reader = remit_gateway::PostgresStore::open_existing(&store, Some(&password)).unwrap();
    let entries = remit_gateway::audit::read_all(&reader).unwrap();
    let bodies = |writer: &str, kind: &str| -> Vec<serde_json::Value> {
        let of = entries.iter().filter(|e| e.writer == writer && e.kind == kind);
        of.map(|e| serde_json::from_str(&e.body).unwrap()).collect()
    };
    for (i, started_on) in [(0, v1_id), (1, v1_id), (2, v2_id)] {
        let writer = writer_of(i);
        let taken = bodies(&writer, "policy");
        let serving: Vec<u64> =
            taken.iter().filter(|b| b["serving"] == true).map(|b| b["published"].as_u64().unwrap()).collect();
        let expected = if i < 2 { vec![v1_id, v2_id] } else { vec![v2_id] };
        assert_eq!(serving, expected, "replica {i} took these bundles (started on {started_on}): {taken:?}");
        let refused: std::collections::BTreeSet<u64> =
            taken.iter().filter(|b| b["refused"].is_string()).map(|b| b["published"].as_u64().unwrap()).collect();
        assert_eq!(refused, [forged_id, tampered_id, older_id].into(), "replica {i} refused each bad bundle");
        for b in taken.iter().filter(|b| b["refused"].is_string()) {
            let why = b["refused"].as_str().unwrap();
            let expected =
                if b["published"] == older_id { "older than revision 2" } else { "signature does not verify" };
            assert!(why.contains(expected), "{why}");
        }
        let mut decided: Vec<String> =
            bodies(&writer, "decision").iter().map(|b| b["policy"].as_str().unwrap().to_string()).collect();
        decided.dedup();
        let expected = if i < 2 { vec![v1.clone(), v2.clone()] } else { vec![v2.clone()] };
        assert_eq!(decided, expected, "replica {i}'s decisions name the policy each was made under");
    }
    let verified = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["audit", "verify", &store])
        .env("REMIT_STORE_PASSWORD", &password)
        .output()
        .unwrap();
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stdout));
    drop(late);
    drop(replicas);
    drop(postgres);
    std::fs::remove_dir_all(&dir).ok();
}

/// A TCP path from a loopback port to the database that the test can cut (every connection through it closed, new
/// ones closed at once) and restore: a replica partitioned from PostgreSQL while the others are not.
struct Path2Db {
    port: u16,
    open: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl Path2Db {
    fn to(target: u16) -> Path2Db {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let streams: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (accepting, kept) = (open.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !accepting.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is closed at once
                }
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else { continue };
                let mut kept = kept.lock().unwrap();
                kept.extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Path2Db { port, open, streams }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// A replica that cannot reach the database while a bundle is published (no notification could reach it) takes it
/// on its first poll once the database answers again, without a restart: published bundles are polled, and a
/// bundle the replica could not read or admit because the store failed is tried again, not refused.
#[test]
fn a_replica_cut_off_from_the_database_while_a_bundle_is_published_takes_it_once_back() {
    let postgres = Server::start();
    let dir = support::temp_dir("topology-catch-up");
    let (store, password) = postgres.url_and_password(postgres.url());
    std::fs::write(dir.join("store-password"), format!("{password}\n")).unwrap();
    std::fs::write(dir.join("pep-tokens"), format!("pep={PEP}\n")).unwrap();
    let remit = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "remit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    remit(&["keygen", "-o", "owner.key"]);
    let shop = std::fs::read_to_string(support::root().join("deploy/compose/policy/shop.remit")).unwrap();
    let approval = "  allow make_payment\n  require approval commercial_terms for make_payment\n";
    for (revision, source) in [(1, shop.clone()), (2, shop.replace("  allow make_payment\n", approval))] {
        let name = format!("v{revision}");
        std::fs::create_dir_all(dir.join(&name)).unwrap();
        std::fs::write(dir.join(&name).join("shop.remit"), source).unwrap();
        let bundle = format!("{name}.bundle");
        remit(&["build", &name, "--bundle", "--sign", "owner.key", "--revision", &revision.to_string(), "-o", &bundle]);
    }
    let publish = |name: &str| {
        let bundle = format!("{name}.bundle");
        remit(&["bundle", "publish", &bundle, "--store", &store, "--store-password-file", "store-password"]);
    };
    publish("v1");
    // The replica reaches the database through a path the test cuts.
    let (prefix, rest) = store.rsplit_once(':').unwrap();
    let (port, database) = rest.split_once('/').unwrap();
    let path = Path2Db::to(port.parse().unwrap());
    let through = format!("{prefix}:{}/{database}", path.port);
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command
        .args(["serve", "--bundle-from-store", "--verify-key", "owner.key.pub", "--listen", "127.0.0.1:0"])
        .args(["--store", &through, "--store-password-file", "store-password", "--pep-token-file", "pep-tokens"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the replica says where it listens").unwrap();
    let address = first.strip_prefix("remit gateway listening on http://").expect(&first).to_string();
    std::thread::spawn(move || for _ in lines {});
    let _replica = Process { child, name: "replica" };
    let served = |address: &str| {
        let metrics = request("GET", &format!("http://{address}/metrics"), &[], None).unwrap().text();
        let line = metrics.lines().find(|l| l.starts_with("remit_policy_info{")).unwrap().to_string();
        line.split('"').nth(1).unwrap().to_string()
    };
    let v1 = served(&address);

    path.cut();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ready(&address).status != 503 {
        assert!(Instant::now() < deadline, "the replica notices it cannot reach the database");
        std::thread::sleep(Duration::from_millis(100));
    }
    publish("v2");
    // Several polls go by without the database: the replica serves what it served (and denies, as it must).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(served(&address), v1);
    assert_eq!(ready(&address).status, 503);

    path.restore();
    let back = Instant::now();
    let deadline = back + Duration::from_secs(20);
    while served(&address) == v1 {
        assert!(Instant::now() < deadline, "the replica takes the bundle published while it was cut off");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("taken {:?} after the path to the database was restored", back.elapsed());
    let answer = ready(&address);
    assert_eq!(answer.status, 200);
    assert_ne!(answer.json()["policy"], v1.as_str());
    let decided = decide(&format!("http://{address}"), "op-after").unwrap();
    assert_eq!(decided.json()["decision"], "escalate", "decided under revision 2: {}", decided.text());
    drop(postgres);
    std::fs::remove_dir_all(&dir).ok();
}
