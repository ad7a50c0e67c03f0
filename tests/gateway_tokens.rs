//! The gateway's secrets and what its admin and inbox accept: tokens from files and environment variables (never
//! only on the command line, where `ps` shows them), one token for two uses refused at start, anonymous decisions on
//! an address other hosts reach refused unless allowed, the inbox's pages never framed, and a fact version for a
//! fact the policy never reads refused. `remit serve` runs as a child on 127.0.0.1 (port 0) and is killed at the
//! end of its test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use remit_gateway::client::blocking::request;
use serde_json::json;

mod support;
#[path = "support/tls.rs"]
mod tls;

use support::served::Served;

/// A policy without a validity window (the tests hold on any date), reading one fact.
const SHOP: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  require operation id for make_payment
  fact price_sheet at version 7 for make_payment
}
"#;

fn remit_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_remit"))
}

/// A fresh folder for a test named `name`, with the policy in `policy/shop.remit`.
fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-gateway-tokens-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    std::fs::write(dir.join("policy/shop.remit"), SHOP).unwrap();
    dir
}

/// `remit serve` on a free loopback port with `extra` flags and `env`, killed when dropped.
fn serve(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
    let mut command = remit_bin();
    command
        .args(["serve", dir.join("policy").to_str().unwrap(), "--listen", "127.0.0.1:0", "--store"])
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(extra)
        .stderr(Stdio::inherit());
    for (name, value) in env {
        command.env(name, value);
    }
    Served::start(&mut command)
}

/// `remit serve …` that is expected to refuse to start: whether it started after all (it is then stopped, so that
/// the test fails rather than waits) and what it said on stderr.
fn refused(dir: &Path, extra: &[&str]) -> (bool, String) {
    let mut child = remit_bin()
        .args(["serve", dir.join("policy").to_str().unwrap(), "--store"])
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let listening = std::thread::spawn(move || {
        BufReader::new(stdout).lines().next().is_some_and(|l| l.is_ok_and(|l| l.contains("listening on")))
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut listening = Some(listening);
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        // Said that it listens (its stdout closing without that means it is exiting: wait for it).
        if listening.as_ref().is_some_and(|l| l.is_finished()) && listening.take().unwrap().join().unwrap() {
            break None;
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let started = match exited {
        Some(status) => status.success(),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            true
        }
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    (started, said)
}

fn get(url: &str, token: &str) -> u16 {
    let auth = format!("Bearer {token}");
    request("GET", url, &[("Authorization", auth.as_str())], None).unwrap().status
}

fn evaluation() -> String {
    json!({"subject": {"type": "agent", "id": "agent:shopper"},
           "action": {"name": "make_payment", "properties": {"merchant": "m", "amount": "5.00 USD"}},
           "resource": {"type": "order", "id": "o-1"}, "context": {"operation_id": "op-1"}})
    .to_string()
}

#[test]
fn tokens_from_files_and_the_environment_work_and_stay_out_of_the_process_arguments() {
    let dir = dir("files");
    let admin_secret = "ops-admin-token-from-a-file";
    let inbox_secret = "alice-inbox-token-from-a-file";
    let pep_secret = "pep-token-from-the-environment";
    std::fs::write(dir.join("admin.tokens"), format!("# the operators\nops={admin_secret}\n\n")).unwrap();
    std::fs::write(dir.join("inbox.tokens"), format!("user:alice={inbox_secret}\n")).unwrap();
    let admin_file = dir.join("admin.tokens").display().to_string();
    let inbox_file = dir.join("inbox.tokens").display().to_string();
    let server = serve(
        &dir,
        &["--admin-token-file", &admin_file, "--inbox-token-file", &inbox_file],
        &[("REMIT_PEP_TOKEN", &format!("backend={pep_secret}"))],
    );
    assert_eq!(get(&format!("{}/admin/v1/state", server.url), admin_secret), 200);
    assert_eq!(get(&format!("{}/inbox/api/requests", server.url), inbox_secret), 200);
    assert_eq!(get(&format!("{}/admin/v1/state", server.url), inbox_secret), 403);
    // The PEP token from the environment: decisions need it now.
    let url = format!("{}/access/v1/evaluation", server.url);
    let body = evaluation();
    let anonymous = request("POST", &url, &[], Some(body.as_bytes())).unwrap();
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    let auth = format!("Bearer {pep_secret}");
    let known = request("POST", &url, &[("Authorization", auth.as_str())], Some(body.as_bytes())).unwrap();
    assert_eq!(known.status, 200, "{}", known.text());
    // What `ps` shows of the gateway: none of the secrets.
    #[cfg(target_os = "linux")]
    {
        let arguments = std::fs::read(format!("/proc/{}/cmdline", server.child.id())).unwrap();
        let arguments = String::from_utf8_lossy(&arguments).replace('\0', " ");
        assert!(arguments.contains("--admin-token-file"), "{arguments}");
        for secret in [admin_secret, inbox_secret, pep_secret] {
            assert!(!arguments.contains(secret), "`{secret}` is visible in the arguments: {arguments}");
        }
    }
    // The CLI reads its token from a file too.
    std::fs::write(dir.join("my.token"), format!("{admin_secret}\n")).unwrap();
    let out = remit_bin()
        .args(["admin", "state", "--gateway", &server.url, "--token-file"])
        .arg(dir.join("my.token"))
        .env_remove("REMIT_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn one_token_for_two_identities_or_two_uses_is_refused_at_start() {
    let dir = dir("twice");
    let secret = "the-same-token-twice";
    for flags in [
        vec!["--inbox-token", "user:alice=the-same-token-twice", "--admin-token", "ops=the-same-token-twice"],
        vec!["--inbox-token", "user:alice=the-same-token-twice", "--inbox-token", "user:bob=the-same-token-twice"],
        vec!["--admin-token", "ops=the-same-token-twice", "--pep-token", "backend=the-same-token-twice"],
    ] {
        let (started, said) = refused(&dir, &[&["--listen", "127.0.0.1:0"][..], &flags].concat());
        assert!(!started, "{flags:?} started");
        assert!(said.contains("give each its own"), "{flags:?}: {said}");
        assert!(!said.contains(secret), "the message shows the token: {said}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn anonymous_decisions_on_an_address_other_hosts_reach_must_be_allowed() {
    let dir = dir("anonymous");
    let (started, said) = refused(&dir, &["--listen", "0.0.0.0:0"]);
    assert!(!started);
    assert!(said.contains("--allow-anonymous-pep") && said.contains("--pep-token"), "{said}");
    // Said explicitly, it starts (and answers anyone).
    let mut child = remit_bin()
        .args(["serve", dir.join("policy").to_str().unwrap(), "--listen", "0.0.0.0:0", "--allow-anonymous-pep"])
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let first = BufReader::new(child.stdout.take().unwrap()).lines().next().unwrap().unwrap();
    assert!(first.starts_with("remit gateway listening on http://0.0.0.0:"), "{first}");
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_inbox_pages_refuse_to_be_framed() {
    let dir = dir("frames");
    let server = serve(&dir, &[], &[]);
    for path in ["/inbox", "/inbox/ar-1", "/inbox/ar-1/explanation"] {
        let page = request("GET", &format!("{}{path}", server.url), &[], None).unwrap();
        assert_eq!(page.status, 200, "{path}");
        assert_eq!(page.header("content-security-policy"), Some("frame-ancestors 'none'"), "{path}");
        assert_eq!(page.header("x-frame-options"), Some("DENY"), "{path}");
    }
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_fact_the_policy_never_reads_is_refused_with_404() {
    let dir = dir("facts");
    let server = serve(&dir, &["--admin-token", "ops=ops-admin-token-1"], &[]);
    let publish = |name: &str| {
        let auth = "Bearer ops-admin-token-1";
        let url = format!("{}/admin/v1/facts/{name}", server.url);
        request("PUT", &url, &[("Authorization", auth)], Some(br#"{"version": 7}"#)).unwrap()
    };
    assert_eq!(publish("price_sheet").status, 200);
    let typo = publish("price_shet");
    assert_eq!(typo.status, 404, "{}", typo.text());
    assert!(typo.json()["error"]["message"].as_str().unwrap().contains("`price_shet`"), "{}", typo.text());
    let state = request(
        "GET",
        &format!("{}/admin/v1/state", server.url),
        &[("Authorization", "Bearer ops-admin-token-1")],
        None,
    )
    .unwrap()
    .json();
    assert_eq!(state["facts"], json!({"price_sheet": 7}), "{state}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_mcp_proxy_reads_agent_tokens_from_a_file_and_refuses_one_that_is_also_an_inbox_token() {
    let dir = dir("agents");
    std::fs::write(dir.join("agents.tokens"), "# agents\nagent:shopper=shared-token-of-two\n").unwrap();
    let mut child = remit_bin()
        .args(["mcp-proxy", "--policy", dir.join("policy").to_str().unwrap(), "--store"])
        .arg(format!("sqlite:{}", dir.join("state.db").display()))
        .args(["--listen", "127.0.0.1:0", "--agent-token-file", dir.join("agents.tokens").to_str().unwrap()])
        .args(["--inbox-token", "user:alice=shared-token-of-two", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(status.is_some_and(|s| !s.success()), "the proxy started: {said}");
    assert!(said.contains("`agent:shopper` (agent token)") && said.contains("give each its own"), "{said}");
    assert!(!said.contains("shared-token-of-two"), "the message shows the token: {said}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn remit_serve_with_a_client_ca_answers_an_enforcement_point_that_shows_its_certificate() {
    let dir = dir("mtls");
    let (ca, pep_ca) = (tls::TestCa::new("remit test CA"), tls::TestCa::new("remit test PEP CA"));
    let (cert, key) = ca.server_files(&["127.0.0.1"], &dir);
    let client_ca = pep_ca.write(&dir.join("pep-ca.pem"));
    let server = serve(&dir, &["--tls-cert", &cert, "--tls-key", &key, "--client-ca", &client_ca], &[]);
    let address: std::net::SocketAddr = server.url.strip_prefix("https://").expect(&server.url).parse().unwrap();
    let body = evaluation();
    let (status, answer) = ca.https_post(address, "/access/v1/evaluation", &body, Some(&pep_ca)).unwrap();
    assert_eq!(status, 200, "{answer}");
    // `--client-ca` alone makes the decision endpoints need a credential.
    let (status, answer) = ca.https_post(address, "/access/v1/evaluation", &body, None).unwrap();
    assert_eq!(status, 401, "{answer}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}
