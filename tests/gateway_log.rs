//! The gateway's attack review (issue 28, item 5): bundles that cannot roll back (a bundle revision the store keeps,
//! refused when older at reload and at restart, taken only when forced and then logged) and a decision log a rewrite
//! cannot fool (heads signed with the gateway's log key, `remit audit head`, `remit audit verify --head --key`).
//! Servers run on 127.0.0.1 with a port they pick and stop at the end of their test.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use remit_gateway::audit::{self, HeadSigner, SignedHead};
use remit_gateway::bundle::{self, Manifest};
use remit_gateway::client::blocking::request;
use remit_gateway::core::FixedClock;
use remit_gateway::store::LogEntry;
use remit_gateway::{Config, Durability, Gateway, Policy, PolicyMeta, SqliteStore, Store};
use remit_host::Runtime;
use remit_lang::check::check;
use remit_lang::value::parse_timestamp;
use serde_json::{json, Value};

const ADMIN: &str = "ops-admin-token";
const NOW: &str = "2026-12-03T15:30:00Z";

/// Grants payments and refunds.
const V1: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  allow refund
}
"#;

/// The next version: payments revoked.
const V2: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow refund
}
"#;

fn remit(args: &[&str]) -> Output {
    support::run(Command::new(support::remit_bin()).args(args), Duration::from_secs(120))
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn program(source: &str) -> remit_lang::ir::Program {
    let mut sources = remit_lang::stdlib::sources();
    sources.add("shop.remit".to_string(), source.to_string());
    check(sources).program.unwrap()
}

fn policy(source: &str) -> Policy {
    let program = program(source);
    let compiled = Runtime::new().unwrap().load(&remit_lang::wasm::compile(&program).unwrap()).unwrap();
    Policy::new(compiled, PolicyMeta::from_program(&program)).unwrap()
}

fn payment() -> Vec<u8> {
    json!({"subject": {"id": "agent:shopper"},
           "action": {"name": "make_payment", "arguments": {"merchant": "acme", "amount": "5.00 USD"}}})
    .to_string()
    .into_bytes()
}

fn log(store: &dyn Store) -> Vec<LogEntry> {
    audit::read_all(store).unwrap()
}

/// `remit serve` of a bundle on a free port until dropped, with what these tests ask of it.
struct Served(support::served::Served);

impl std::ops::Deref for Served {
    type Target = support::served::Served;
    fn deref(&self) -> &support::served::Served {
        &self.0
    }
}

impl std::ops::DerefMut for Served {
    fn deref_mut(&mut self) -> &mut support::served::Served {
        &mut self.0
    }
}

impl Served {
    fn start(policy: &Path, store: &Path, extra: &[&str]) -> Served {
        Served(support::served::Served::start(
            Command::new(support::remit_bin())
                .args(["serve", policy.to_str().unwrap(), "--listen", "127.0.0.1:0", "--admin-token"])
                .arg(format!("ops={ADMIN}"))
                .arg("--store")
                .arg(format!("sqlite:{}", store.display()))
                .args(extra)
                .stderr(Stdio::inherit()),
        ))
    }

    fn decide(&self, body: &[u8]) -> Value {
        request("POST", &format!("{}/v1/decide", self.url), &[], Some(body)).unwrap().json()
    }

    fn policy(&self) -> Value {
        request("GET", &format!("{}/ready", self.url), &[], None).unwrap().json()["policy"].clone()
    }

    fn reload(&self) -> (u16, String) {
        let auth = format!("Bearer {ADMIN}");
        let answer =
            request("POST", &format!("{}/admin/v1/reload", self.url), &[("Authorization", &auth)], None).unwrap();
        (answer.status, answer.text())
    }

    /// SIGTERM, as a service manager stops it; waits for the exit.
    fn stop(mut self) {
        let killed = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the gateway stops on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A folder with `policy/shop.remit` (`source`) and a key pair `owner.key`, `owner.key.pub`.
fn workspace(name: &str, source: &str) -> PathBuf {
    let dir = support::temp_dir(&format!("gateway-log-{name}"));
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    std::fs::write(dir.join("policy/shop.remit"), source).unwrap();
    let key = dir.join("owner.key");
    assert!(remit(&["keygen", "-o", key.to_str().unwrap()]).status.success());
    dir
}

fn build(dir: &Path, source: &str, output: &str, extra: &[&str]) {
    std::fs::write(dir.join("policy/shop.remit"), source).unwrap();
    let (policy, output) = (dir.join("policy"), dir.join(output));
    let key = dir.join("owner.key");
    let mut args = vec!["build", policy.to_str().unwrap(), "-o", output.to_str().unwrap(), "--bundle", "--sign"];
    args.push(key.to_str().unwrap());
    args.extend(extra);
    let out = remit(&args);
    assert!(out.status.success(), "{}", said(&out));
}

fn manifest(path: &Path) -> Manifest {
    bundle::Bundle::read(&std::fs::read(path).unwrap()).unwrap().manifest
}

/// The issue's attack: the newer bundle revoked payments; putting the older one back and reloading is refused (the
/// gateway keeps serving the newer one, its decisions unchanged); a restart onto it is refused too (the store keeps
/// the revision); only a start with `--allow-rollback` takes it, and the log says so.
#[test]
fn a_rolled_back_bundle_is_refused_on_reload_and_restart_unless_forced_and_then_logged() {
    let dir = workspace("rollback", V1);
    build(&dir, V1, "v1.bundle", &["--revision", "1"]);
    build(&dir, V2, "v2.bundle", &["--revision", "2"]);
    let (serving, store, key) = (dir.join("serving.bundle"), dir.join("state.db"), dir.join("owner.key.pub"));
    let verify = ["--verify-key", key.to_str().unwrap()];
    std::fs::copy(dir.join("v2.bundle"), &serving).unwrap();
    let server = Served::start(&serving, &store, &verify);
    let newer = server.policy();
    assert_eq!(server.decide(&payment())["decision"], "deny", "revision 2 revoked payments");

    std::fs::copy(dir.join("v1.bundle"), &serving).unwrap();
    let (status, text) = server.reload();
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("revision 1, older than revision 2"), "{text}");
    assert!(text.contains("--allow-rollback"), "{text}");
    assert_eq!(server.policy(), newer, "the newer policy stays in force");
    assert_eq!(server.decide(&payment())["decision"], "deny");
    server.stop();

    let refused = remit(
        &["serve", serving.to_str().unwrap(), "--listen", "127.0.0.1:0", "--verify-key"]
            .into_iter()
            .chain([key.to_str().unwrap(), "--store", &format!("sqlite:{}", store.display())])
            .collect::<Vec<_>>(),
    );
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(said(&refused).contains("older than revision 2"), "{}", said(&refused));
    // `remit mcp-proxy` on the same store keeps the same revision.
    let sqlite = format!("sqlite:{}", store.display());
    let proxy = remit(&[
        "mcp-proxy",
        "--policy",
        serving.to_str().unwrap(),
        "--subject",
        "agent:shopper",
        "--store",
        &sqlite,
        "--",
        "true",
    ]);
    assert_eq!(proxy.status.code(), Some(2), "{}", said(&proxy));
    assert!(said(&proxy).contains("older than revision 2"), "{}", said(&proxy));

    let forced = Served::start(&serving, &store, &[verify[0], verify[1], "--allow-rollback"]);
    assert_ne!(forced.policy(), newer);
    assert_eq!(forced.decide(&payment())["decision"], "allow", "a forced rollback serves revision 1");
    drop(forced);
    // The rollback is the revision in force now: revision 1 starts again without the flag.
    let again = Served::start(&serving, &store, &verify);
    assert_eq!(again.decide(&payment())["decision"], "allow");
    drop(again);

    let entries = log(&SqliteStore::open_existing(&store).unwrap());
    assert_eq!(audit::verify(entries.clone()), Ok(entries.len() as u64));
    let policies: Vec<Value> =
        entries.iter().filter(|e| e.kind == "policy").map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    assert_eq!(policies.len(), 2, "{policies:?}");
    assert_eq!(policies[0]["revision"], 2);
    assert_eq!(policies[0]["rollback"], false);
    assert_eq!(policies[1]["revision"], 1);
    assert_eq!(policies[1]["rollback"], true);
    assert_eq!(policies[1]["previous"]["revision"], 2);
    assert_eq!(policies[1]["previous"]["policy"], newer);
    std::fs::remove_dir_all(&dir).ok();
}

/// Without `--revision`, a bundle is one more than the bundle it replaces at the output path (1 for a new file).
#[test]
fn a_bundle_is_numbered_after_the_one_it_replaces() {
    let dir = workspace("numbered", V1);
    let out = dir.join("out.bundle");
    build(&dir, V1, "out.bundle", &[]);
    assert_eq!(manifest(&out).revision, Some(1));
    build(&dir, V2, "out.bundle", &[]);
    assert_eq!(manifest(&out).revision, Some(2));
    build(&dir, V2, "out.bundle", &["--revision", "7"]);
    assert_eq!(manifest(&out).revision, Some(7));
    let refused = remit(&["build", dir.join("policy").to_str().unwrap(), "-o", "x", "--bundle", "--revision", "r42"]);
    assert_eq!(refused.status.code(), Some(2), "a revision is a whole number");
    std::fs::remove_dir_all(&dir).ok();
}

fn manifest_of(policy: &str, revision: Option<u64>) -> Manifest {
    Manifest {
        policy: policy.into(),
        revision,
        sources: "sha256:00".into(),
        module: "sha256:00".into(),
        built_at: NOW.into(),
        key: None,
        data: Vec::new(),
    }
}

/// `bundle::admit`, the rule behind both: older refused, the same revision under another policy refused, forced
/// ones taken and logged; bundles without a number (written before revisions were numbers) count as revision 0.
#[test]
fn admit_keeps_the_revision_in_force() {
    let dir = support::temp_dir("gateway-log-admit");
    let store = SqliteStore::open(&dir.join("state.db"), Durability::Process).unwrap();
    let now = parse_timestamp(NOW).unwrap();
    assert_eq!(bundle::admit(&store, &manifest_of("sha256:a", None), now, false), Ok(()));
    assert_eq!(bundle::admit(&store, &manifest_of("sha256:b", None), now, false), Ok(()), "unnumbered: unordered");
    assert!(log(&store).is_empty(), "nothing to keep");
    assert_eq!(bundle::admit(&store, &manifest_of("sha256:c", Some(3)), now, false), Ok(()));
    assert_eq!(bundle::admit(&store, &manifest_of("sha256:c", Some(3)), now, false), Ok(()), "the same again");
    let older = bundle::admit(&store, &manifest_of("sha256:a", None), now, false).unwrap_err();
    assert!(older.contains("revision 0, older than revision 3"), "{older}");
    let other = bundle::admit(&store, &manifest_of("sha256:d", Some(3)), now, false).unwrap_err();
    assert!(other.contains("a revision names one policy"), "{other}");
    assert_eq!(bundle::admit(&store, &manifest_of("sha256:d", Some(3)), now, true), Ok(()), "forced");
    assert_eq!(bundle::admit(&store, &manifest_of("sha256:e", Some(4)), now, false), Ok(()));
    let bodies: Vec<Value> = log(&store).iter().map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    assert_eq!(
        bodies,
        [
            json!({"revision": 3, "policy": "sha256:c", "previous": null, "rollback": false}),
            json!({"revision": 3, "policy": "sha256:d", "previous": {"revision": 3, "policy": "sha256:c"},
                   "rollback": true}),
            json!({"revision": 4, "policy": "sha256:e", "previous": {"revision": 3, "policy": "sha256:d"},
                   "rollback": false}),
        ]
    );
    // A manifest written before revisions were numbers reads as unnumbered.
    let legacy = r#"{"policy":"sha256:a","revision":"r42","sources":"s","module":"m","built_at":"t","key":null}"#;
    assert_eq!(serde_json::from_str::<Manifest>(legacy).unwrap().revision, None);
    std::fs::remove_dir_all(&dir).ok();
}

/// A store made before the tables of bundle revisions and signed heads gets them when a gateway opens it.
#[test]
fn an_older_store_is_migrated_in_place() {
    let dir = support::temp_dir("gateway-log-migrate");
    let path = dir.join("state.db");
    let store = SqliteStore::open(&path, Durability::Process).unwrap();
    let gateway = Gateway::new(policy(V1), Arc::new(store), Arc::new(FixedClock::new(0)), Config::default());
    gateway.decide(&payment());
    drop(gateway);
    let old = SqliteStore::open(&path, Durability::Process).unwrap();
    old.execute_raw("DROP TABLE bundle_revision; DROP TABLE log_heads;").unwrap();
    drop(old);
    let heads = remit(&["audit", "head", "--store", path.to_str().unwrap()]);
    assert!(said(&heads).contains("no signed head"), "a store without the table reads as one without heads");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Durability::Process).unwrap());
    assert_eq!(bundle::admit(&*store, &manifest_of("sha256:a", Some(2)), 0, false), Ok(()));
    let key = bundle::signing_key(&bundle::keygen().unwrap().0).unwrap();
    let signer = HeadSigner::new(key, store.clone(), Arc::new(FixedClock::new(0)));
    assert_eq!(signer.sign().unwrap().unwrap().seq, 2, "the decision and the revision taken");
    std::fs::remove_dir_all(&dir).ok();
}

/// Rewrites the log from entry `from` with `change` applied to it, computing every hash after it again: what anyone
/// with write access to the store can do.
fn rewrite(store: &SqliteStore, from: u64, change: impl Fn(&mut Value)) {
    let mut prev = audit::GENESIS.to_string();
    for entry in log(store) {
        let mut body = entry.body.clone();
        if entry.seq == from {
            let mut value: Value = serde_json::from_str(&body).unwrap();
            change(&mut value);
            body = value.to_string();
        }
        let hash = audit::entry_hash(&prev, entry.seq, entry.time, &entry.kind, &body);
        let sql = format!(
            "UPDATE log SET body = '{}', prev = '{prev}', hash = '{hash}' WHERE seq = {}",
            body.replace('\'', "''"),
            entry.seq
        );
        store.execute_raw(&sql).unwrap();
        prev = hash;
    }
}

/// The issue's attack on the log: a deny rewritten to an allow, the chain computed again after it. Plain verify
/// passes (it proves only that the log is consistent with itself) once the stored heads are gone too; verify
/// against a kept head fails. So does a log cut before the kept head, and a head whose signature is forged.
#[test]
fn a_rewritten_or_cut_log_passes_the_chain_but_not_a_kept_head() {
    let dir = support::temp_dir("gateway-log-rewrite");
    let path = dir.join("state.db");
    let store = Arc::new(SqliteStore::open(&path, Durability::Process).unwrap());
    let clock = Arc::new(FixedClock::new(parse_timestamp(NOW).unwrap()));
    let gateway = Gateway::new(policy(V2), store.clone(), clock.clone(), Config::default());
    let denied = gateway.decide(&payment());
    assert_eq!(denied.outcome, "deny");
    let refund = json!({"subject": {"id": "agent:shopper"},
                        "action": {"name": "refund", "arguments": {"merchant": "acme", "amount": "5.00 USD"}}});
    assert_eq!(gateway.decide(refund.to_string().as_bytes()).outcome, "allow");
    let (secret, public) = bundle::keygen().unwrap();
    std::fs::write(dir.join("log.key.pub"), &public).unwrap();
    let signer = HeadSigner::new(bundle::signing_key(&secret).unwrap(), store.clone(), clock.clone());
    let head = signer.sign().unwrap().expect("a head of entry 2");
    assert_eq!((head.seq, head.hash.clone()), (2, log(&*store)[1].hash.clone()));
    assert_eq!(signer.sign().unwrap(), None, "signed again only when the log moved");
    clock.set(clock.0.load(std::sync::atomic::Ordering::SeqCst) + 60);
    gateway.decide(&payment());
    // `remit audit head` exports the latest; it is kept outside the store.
    let store_arg = path.to_str().unwrap();
    let exported = remit(&["audit", "head", "--store", store_arg]);
    assert!(exported.status.success(), "{}", said(&exported));
    assert_eq!(SignedHead::from_json(&String::from_utf8_lossy(&exported.stdout)).unwrap(), head);
    std::fs::write(dir.join("head.json"), &exported.stdout).unwrap();
    let (kept, key) = (dir.join("head.json"), dir.join("log.key.pub"));
    let verify_kept =
        || remit(&["audit", "verify", store_arg, "--head", kept.to_str().unwrap(), "--key", key.to_str().unwrap()]);
    let fine = verify_kept();
    assert!(fine.status.success(), "{}", said(&fine));
    assert!(said(&fine).contains("3 entries, the chain holds"), "{}", said(&fine));
    assert!(said(&fine).contains("signed heads kept in the store: 1, each in the log"), "{}", said(&fine));
    assert!(said(&fine).contains("the kept head (entry 2, signed at 2026-12-03T15:30:00Z) is in the log"));

    // The deny of entry 1 rewritten to an allow, the chain after it computed again.
    rewrite(&store, 1, |body| body["decision"]["decision"] = json!("allow"));
    let entries = log(&*store);
    assert!(entries[0].body.contains(r#""decision":"allow""#));
    assert_eq!(audit::verify(entries.clone()), Ok(3), "the chain holds");
    let stored = remit(&["audit", "verify", store_arg]);
    assert_eq!(stored.status.code(), Some(1), "the head stored by the gateway no longer matches");
    assert!(said(&stored).contains("the signed head of entry 2 kept in the store fails"), "{}", said(&stored));
    store.execute_raw("DELETE FROM log_heads").unwrap();
    let plain = remit(&["audit", "verify", store_arg]);
    assert!(plain.status.success(), "without a head, verify sees a consistent log: {}", said(&plain));
    let caught = verify_kept();
    assert_eq!(caught.status.code(), Some(1), "{}", said(&caught));
    assert!(said(&caught).contains("the log was rewritten at or before entry 2"), "{}", said(&caught));

    // A head forged for the rewritten log: its signature does not verify; one signed with another key is refused.
    let mut forged = head.clone();
    forged.hash = entries[1].hash.clone();
    std::fs::write(&kept, forged.to_json().to_string()).unwrap();
    let caught = verify_kept();
    assert_eq!(caught.status.code(), Some(1));
    assert!(said(&caught).contains("the head's signature does not verify"), "{}", said(&caught));
    let other = bundle::signing_key(&bundle::keygen().unwrap().0).unwrap();
    let resigned = SignedHead::sign(&other, 2, &entries[1].hash, head.time);
    std::fs::write(&kept, resigned.to_json().to_string()).unwrap();
    let caught = verify_kept();
    assert_eq!(caught.status.code(), Some(1));
    assert!(said(&caught).contains("signed by another key"), "{}", said(&caught));

    // A log cut before the kept head: the chain still holds, the head's entry is gone.
    std::fs::write(&kept, head.to_json().to_string()).unwrap();
    store.execute_raw("DELETE FROM log WHERE seq >= 2").unwrap();
    let plain = remit(&["audit", "verify", store_arg]);
    assert!(plain.status.success(), "{}", said(&plain));
    let caught = verify_kept();
    assert_eq!(caught.status.code(), Some(1));
    assert!(said(&caught).contains("the log ends at entry 1, before the head's entry 2"), "{}", said(&caught));
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit serve --log-key`: the head is signed when the gateway stops (SIGTERM), so the last decisions are covered,
/// and at the interval while it runs; the exported head verifies against the log.
#[test]
fn the_gateway_signs_its_log_head_on_shutdown_and_at_intervals() {
    let dir = workspace("serve-head", V1);
    let (store, key) = (dir.join("state.db"), dir.join("owner.key"));
    let store_arg = store.to_str().unwrap();
    let latest = || {
        let out = remit(&["audit", "head", "--store", store_arg]);
        out.status.success().then(|| (SignedHead::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap(), out))
    };
    // An hour's interval: only the shutdown signs.
    let server =
        Served::start(&dir.join("policy"), &store, &["--log-key", key.to_str().unwrap(), "--head-interval", "1h"]);
    for _ in 0..3 {
        assert_eq!(server.decide(&payment())["decision"], "allow");
    }
    assert!(latest().is_none(), "nothing signed before the interval");
    server.stop();
    assert_eq!(latest().expect("signed on shutdown").0.seq, 3);
    // A second's interval: signed while it runs.
    let server =
        Served::start(&dir.join("policy"), &store, &["--log-key", key.to_str().unwrap(), "--head-interval", "1s"]);
    server.decide(&payment());
    let deadline = Instant::now() + Duration::from_secs(30);
    let (running, out) = loop {
        match latest() {
            Some((head, out)) if head.seq == 4 => break (head, out),
            _ => assert!(Instant::now() < deadline, "a head within the interval"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(server);
    let head = dir.join("head.json");
    std::fs::write(&head, &out.stdout).unwrap();
    let pubkey = dir.join("owner.key.pub");
    let args = ["audit", "verify", store_arg, "--head", head.to_str().unwrap(), "--key", pubkey.to_str().unwrap()];
    let verified = remit(&args);
    assert!(verified.status.success(), "{}", said(&verified));
    assert!(said(&verified)
        .contains(&format!("the kept head (entry 4, signed at {}", remit_lang::value::format_timestamp(running.time))));
    let bad = remit(&["serve", "x", "--log-key", key.to_str().unwrap(), "--head-interval", "0s"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(said(&bad).contains("--head-interval"), "{}", said(&bad));
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit mcp-proxy --log-key` signs its log's head too: here when the agent closes stdin, after the queued entries
/// (a forbidden call's) are written.
#[test]
fn the_mcp_proxy_signs_its_log_head_at_exit() {
    use std::io::Write;
    let python = support::root().join("tests/mcp/.venv/bin/python");
    assert!(python.exists(), "the MCP server's Python is missing: run `./scripts/test-deps.sh`");
    let dir = workspace("proxy-head", V1);
    let (store, key) = (dir.join("state.db"), dir.join("owner.key"));
    let policy = support::root().join("tests/mcp/modern");
    let server = support::root().join("tests/mcp/modern/server.py");
    let mut child = Command::new(support::remit_bin())
        .args(["mcp-proxy", "--policy", policy.to_str().unwrap(), "--subject", "agent:tester", "--store"])
        .arg(format!("sqlite:{}", store.display()))
        .args(["--log-key", key.to_str().unwrap(), "--head-interval", "1h", "--"])
        .args([python.to_str().unwrap(), server.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "gateway-log", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "shout", "arguments": {"text": "forbidden"}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for message in messages {
        writeln!(stdin, "{message}").unwrap();
    }
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the proxy ends when stdin closes");
        std::thread::sleep(Duration::from_millis(20));
    }
    let entries = log(&SqliteStore::open_existing(&store).unwrap());
    assert!(!entries.is_empty());
    let out = remit(&["audit", "head", "--store", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    let head = SignedHead::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!((head.seq, &head.hash), (entries.len() as u64, &entries.last().unwrap().hash));
    std::fs::remove_dir_all(&dir).ok();
}

/// A bundle published in the store (`remit bundle publish`) on SQLite, one gateway: `remit serve --bundle-from-store`
/// serves it and takes the next one published within its poll; the publisher refuses an older revision and a bundle
/// its key did not sign; the gateway needs its key and no policy files; the log records each publication and each
/// bundle the gateway took.
#[test]
fn a_bundle_published_in_the_store_is_served_and_replaced_by_the_next_one_published() {
    let dir = workspace("published", V1);
    build(&dir, V1, "v1.bundle", &["--revision", "1"]);
    build(&dir, V2, "v2.bundle", &["--revision", "2"]);
    let store = dir.join("state.db");
    let store_arg = format!("sqlite:{}", store.display());
    let key = dir.join("owner.key.pub");
    let publish = |bundle: &str, extra: &[&str]| {
        let bundle = dir.join(bundle);
        let mut args = vec!["bundle", "publish", bundle.to_str().unwrap(), "--store", &store_arg];
        args.extend(extra);
        remit(&args)
    };
    let serve = |extra: &[&str]| {
        let mut command = Command::new(support::remit_bin());
        command.args(["serve", "--bundle-from-store", "--listen", "127.0.0.1:0", "--store", &store_arg]);
        command.args(extra).args(["--admin-token", &format!("ops={ADMIN}")]);
        command
    };
    // What a gateway serving the store's bundle needs: its key, no policy files, and a bundle published.
    let out = remit(&["serve", "--bundle-from-store", "--store", &store_arg]);
    assert!(!out.status.success() && said(&out).contains("--verify-key"), "{}", said(&out));
    let policy_dir = dir.join("policy");
    let with_files = serve(&["--verify-key", key.to_str().unwrap(), policy_dir.to_str().unwrap()]).output().unwrap();
    assert!(
        !with_files.status.success() && said(&with_files).contains("give no POLICY files"),
        "{}",
        said(&with_files)
    );
    let none = serve(&["--verify-key", key.to_str().unwrap()]).output().unwrap();
    assert!(!none.status.success() && said(&none).contains("no bundle is published in the store"), "{}", said(&none));

    let out = publish("v1.bundle", &["--verify-key", key.to_str().unwrap(), "--by", "ci"]);
    assert!(out.status.success() && said(&out).starts_with("published bundle 1: revision 1"), "{}", said(&out));
    let (v1, v2) = (manifest(&dir.join("v1.bundle")).policy, manifest(&dir.join("v2.bundle")).policy);
    let served = Served(support::served::Served::start(
        serve(&["--verify-key", key.to_str().unwrap()]).stderr(Stdio::inherit()),
    ));
    assert_eq!(served.policy(), v1.as_str());
    assert_eq!(served.decide(&payment())["decision"], "allow");

    assert!(publish("v2.bundle", &[]).status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while served.policy() != v2.as_str() {
        assert!(Instant::now() < deadline, "the gateway takes the bundle published next");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(served.decide(&payment())["decision"], "deny", "payments revoked by revision 2");
    // An admin reload takes the bundle published last: the same one, nothing changes.
    let (status, text) = served.reload();
    assert_eq!((status, served.policy()), (200, Value::from(v2.clone())), "{text}");

    // The publisher refuses what the gateway would: an older revision, a bundle its key did not sign.
    let out = publish("v1.bundle", &[]);
    assert!(!out.status.success() && said(&out).contains("older than revision 2"), "{}", said(&out));
    let other = dir.join("other.key");
    assert!(remit(&["keygen", "-o", other.to_str().unwrap()]).status.success());
    let out = publish("v2.bundle", &["--verify-key", &format!("{}.pub", other.display())]);
    assert!(!out.status.success() && said(&out).contains("signature does not verify"), "{}", said(&out));
    served.stop();

    let store = SqliteStore::open_existing(&store).unwrap();
    let bodies: Vec<Value> =
        log(&store).iter().filter(|e| e.kind == "policy").map(|e| serde_json::from_str(&e.body).unwrap()).collect();
    let published: Vec<(u64, u64)> = bodies
        .iter()
        .filter(|b| b["by"].is_string())
        .map(|b| (b["published"].as_u64().unwrap(), b["revision"].as_u64().unwrap()))
        .collect();
    assert_eq!(published, [(1, 1), (2, 2)], "each publication logged: {bodies:?}");
    assert_eq!(bodies.iter().find(|b| b["by"].is_string()).unwrap()["by"], "ci");
    let taken: Vec<u64> =
        bodies.iter().filter(|b| b["serving"] == true).map(|b| b["published"].as_u64().unwrap()).collect();
    assert_eq!(taken, [1, 2, 2], "taken at start, on the poll and on the admin reload: {bodies:?}");
    std::fs::remove_dir_all(&dir).ok();
}
