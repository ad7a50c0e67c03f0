//! `remit serve` as a service manager runs it: its settings from `--config FILE`, `REMIT_*` variables and the
//! command line, in that order of precedence, with errors that name the key and the file (or the variable); on
//! SIGTERM `/ready` turns 503 at once, the gateway keeps serving through `drain-delay`, lets the requests in flight
//! finish within `drain-timeout`, and exits 0; `/ready` is 503 while its PostgreSQL is unreachable and 200 again
//! once it is back, without a restart (docs/gateway.md "Configuration", "Stopping"; docs/scaling.md).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use remit_gateway::client::blocking::request;
use serde_json::json;

const POLICY: &str = r#"
mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
}
"#;

/// A folder with `policy/shop.remit`.
fn workspace(name: &str) -> PathBuf {
    let dir = support::temp_dir(&format!("serve-config-{name}"));
    std::fs::create_dir_all(dir.join("policy")).unwrap();
    std::fs::write(dir.join("policy/shop.remit"), POLICY).unwrap();
    dir
}

/// `remit serve` with no `REMIT_*` variable of the test's environment (only those given).
fn remit(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command.current_dir(cwd).args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("REMIT_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command
}

/// A gateway process, killed when dropped; its stdout lines (the address, the policy, the inbox URL) as printed.
struct Gateway {
    child: Child,
    lines: Vec<String>,
}

impl Gateway {
    fn start(mut command: Command) -> Gateway {
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let lines: Vec<String> = (0..3).map_while(|_| out.next().and_then(Result::ok)).collect();
        if lines.len() < 3 {
            let mut errors = String::new();
            child.stderr.take().unwrap().read_to_string(&mut errors).unwrap();
            panic!("the gateway did not start: {lines:?} {errors}");
        }
        std::thread::spawn(move || for _ in out {});
        let mut errors = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut errors, &mut std::io::sink()));
        Gateway { child, lines }
    }

    fn address(&self) -> &str {
        self.lines[0].strip_prefix("remit gateway listening on http://").expect(&self.lines[0])
    }

    fn inbox(&self) -> &str {
        self.lines[2].strip_prefix("inbox: ").expect(&self.lines[2])
    }

    fn ready(&self) -> (u16, String) {
        let answer = request("GET", &format!("http://{}/ready", self.address()), &[], None).unwrap();
        (answer.status, answer.text())
    }

    fn terminate(&self) {
        assert!(Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap().success());
    }

    fn wait(&mut self, limit: Duration) -> (std::process::ExitStatus, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, started.elapsed());
            }
            assert!(started.elapsed() < limit, "the gateway did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a start that must fail says on stderr (it exits before listening).
fn refused(mut command: Command) -> String {
    let out = support::run(&mut command, Duration::from_secs(60));
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn settings_come_from_the_file_then_the_environment_then_the_command_line() {
    let dir = workspace("layers");
    let other = support::temp_dir("serve-config-elsewhere");
    let config = dir.join("remit.toml");
    // Relative paths are the file's folder's, whatever the gateway's working directory.
    std::fs::write(
        &config,
        "policy = [\"policy\"]\nstore = \"sqlite:state.db\"\nlisten = \"127.0.0.1:0\"\n\
         base-url = \"http://from-the-file.example\"\nadmin-token-file = [\"admins\"]\ndrain-timeout = \"5s\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("admins"), "ops=admin-token-of-the-file\n").unwrap();
    let config = config.to_str().unwrap();

    let gateway = Gateway::start(remit(&other, &["serve", "--config", config], &[]));
    assert_eq!(gateway.inbox(), "http://from-the-file.example/inbox");
    assert!(dir.join("state.db").is_file(), "the store is beside the file, not in the working directory");
    assert!(!other.join("state.db").exists());
    // The admin token of the file's token file works.
    let state = format!("http://{}/admin/v1/state", gateway.address());
    let auth = [("Authorization", "Bearer admin-token-of-the-file")];
    assert_eq!(request("GET", &state, &auth, None).unwrap().status, 200);
    drop(gateway);

    // A variable overrides the file; `REMIT_CONFIG` names the file.
    let env = [("REMIT_CONFIG", config), ("REMIT_BASE_URL", "http://from-the-environment.example")];
    let gateway = Gateway::start(remit(&other, &["serve"], &env));
    assert_eq!(gateway.inbox(), "http://from-the-environment.example/inbox");
    drop(gateway);

    // The command line overrides both.
    let args = ["serve", "--base-url", "http://from-the-command-line.example"];
    let gateway = Gateway::start(remit(&other, &args, &env));
    assert_eq!(gateway.inbox(), "http://from-the-command-line.example/inbox");
    drop(gateway);

    // Errors name the key and the file, or the variable.
    let bad = |text: &str| {
        let path = dir.join("bad.toml");
        std::fs::write(&path, format!("policy = [\"policy\"]\nlisten = \"127.0.0.1:0\"\n{text}\n")).unwrap();
        refused(remit(&other, &["serve", "--config", path.to_str().unwrap()], &[]))
    };
    let shown = dir.join("bad.toml").display().to_string();
    let error = bad("listn = \"127.0.0.1:8181\"");
    assert!(error.contains(&format!("`{shown}`: unknown key `listn`")), "{error}");
    let error = bad("store-connections = \"many\"");
    assert!(error.contains(&format!("`{shown}`, key `store-connections`")), "{error}");
    let error = bad("drain-timeout = \"soon\"");
    assert!(error.contains(&format!("`{shown}`, key `drain-timeout`: ")) && error.contains("`soon`"), "{error}");
    let error = bad("durability = \"sometimes\"");
    assert!(error.contains("key `durability`") && error.contains("sometimes"), "{error}");
    let error = bad("shadow = \"yes\"");
    assert!(error.contains("key `shadow`: is `true` or `false`"), "{error}");
    let error = bad("mask = [[\"card\"]]");
    assert!(error.contains("key `mask`: is a string or a number"), "{error}");
    let error = bad("store-password = \"hunter2\"");
    assert!(error.contains("unknown key `store-password`") && error.contains("store-password-file"), "{error}");
    let error = bad("listen = ");
    assert!(error.contains(&format!("`{shown}`, line 3")), "{error}");
    let error = refused(remit(&other, &["serve", "--config", config], &[("REMIT_STORE_CONNECTIONS", "-1")]));
    assert!(error.contains("$REMIT_STORE_CONNECTIONS"), "{error}");
    let error = refused(remit(&other, &["serve", "--config", "missing.toml"], &[]));
    assert!(error.contains("cannot read the configuration `missing.toml`"), "{error}");

    // The shipped example parses: every key is known and every value checks (it stops at the first file it names
    // that this machine does not have).
    let example = support::root().join("deploy/remit.toml");
    let error = refused(remit(&other, &["serve", "--config", example.to_str().unwrap()], &[]));
    assert!(error.contains("cannot read `/etc/remit/bundle.pub`"), "{error}");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&other).ok();
}

/// The TLS files of a PostgreSQL store (`--store-ssl-root-cert`, `--store-ssl-cert`, `--store-ssl-key`,
/// `--store-ssl-crl`) and its password file given with a SQLite store, by a flag, a variable or a key of the
/// configuration file: `remit serve` (and `remit mcp-proxy`, `remit bundle publish`) does not start and says why,
/// rather than ignore them (the operator believes the gateway talks to a database over TLS, with that password).
#[test]
fn store_tls_files_with_a_sqlite_store_are_refused() {
    let dir = workspace("sqlite-tls");
    let base = ["serve", "policy", "--listen", "127.0.0.1:0", "--store", "sqlite:state.db"];
    let error = refused(remit(&dir, &[&base[..], &["--store-ssl-root-cert", "ca.pem"]].concat(), &[]));
    assert!(
        error.contains("`--store-ssl-root-cert`") && error.contains("the store `sqlite:state.db` is SQLite"),
        "{error}"
    );
    let env = [("REMIT_STORE_SSL_CERT", "client.pem"), ("REMIT_STORE_SSL_KEY", "client.key")];
    let error = refused(remit(&dir, &base, &env));
    assert!(error.contains("`--store-ssl-cert`, `--store-ssl-key`") && error.contains("is SQLite"), "{error}");
    std::fs::write(
        dir.join("remit.toml"),
        "policy = [\"policy\"]\nlisten = \"127.0.0.1:0\"\nstore = \"sqlite:state.db\"\nstore-ssl-root-cert = \"ca.pem\"\n",
    )
    .unwrap();
    let error = refused(remit(&dir, &["serve", "--config", "remit.toml"], &[]));
    assert!(error.contains("`--store-ssl-root-cert`") && error.contains("is SQLite"), "{error}");
    let error = refused(remit(&dir, &[&base[..], &["--store-ssl-crl", "db.crl"]].concat(), &[]));
    assert!(error.contains("`--store-ssl-crl`") && error.contains("is SQLite"), "{error}");
    // The password file too (a flag, a variable, a key), and by `remit mcp-proxy` as by `remit serve`.
    let password = "`--store-password-file pw` (a flag, `REMIT_STORE_PASSWORD_FILE` or a configuration key) is for a \
                    PostgreSQL store; the store `sqlite:state.db` is SQLite";
    let error = refused(remit(&dir, &[&base[..], &["--store-password-file", "pw"]].concat(), &[]));
    assert!(error.contains(password), "{error}");
    let error = refused(remit(&dir, &base, &[("REMIT_STORE_PASSWORD_FILE", "pw")]));
    assert!(error.contains(password), "{error}");
    std::fs::write(
        dir.join("password.toml"),
        "policy = [\"policy\"]\nlisten = \"127.0.0.1:0\"\nstore = \"sqlite:state.db\"\nstore-password-file = \"pw\"\n",
    )
    .unwrap();
    let error = refused(remit(&dir, &["serve", "--config", "password.toml"], &[]));
    assert!(error.contains("`--store-password-file") && error.contains("is SQLite"), "{error}");
    let proxy = ["mcp-proxy", "--policy", "policy", "--subject", "agent:a", "--store", "sqlite:state.db"];
    let error = refused(remit(&dir, &[&proxy[..], &["--store-password-file", "pw", "--", "true"]].concat(), &[]));
    assert!(error.contains(password), "{error}");
    // `remit bundle publish` too, once its bundle is read and checked.
    let made =
        |args: &[&str]| assert!(support::run(&mut remit(&dir, args, &[]), Duration::from_secs(60)).status.success());
    made(&["keygen", "-o", "owner.key"]);
    made(&["build", "policy", "--bundle", "--sign", "owner.key", "--revision", "1", "-o", "p.bundle"]);
    let publish = ["bundle", "publish", "p.bundle", "--verify-key", "owner.key.pub", "--store", "sqlite:state.db"];
    let error = refused(remit(&dir, &[&publish[..], &["--store-password-file", "pw"]].concat(), &[]));
    assert!(error.contains(password), "{error}");
    assert!(!dir.join("state.db").exists(), "refused before the store is made");
    // Without them, the same gateway starts.
    drop(Gateway::start(remit(&dir, &base, &[])));
    assert!(dir.join("state.db").is_file());
    std::fs::remove_dir_all(&dir).ok();
}

/// Sends a decision request's head and the first half of its body: a request in flight until the rest comes.
fn half_sent(address: &str) -> (TcpStream, Vec<u8>) {
    let body = json!({"subject": {"id": "agent:shopper"}, "action": {"name": "make_payment", "arguments":
        {"merchant": "acme-grocer", "amount": "80.00 USD"}}})
    .to_string()
    .into_bytes();
    let mut stream = TcpStream::connect(address).unwrap();
    let head = format!(
        "POST /v1/decide HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let (first, rest) = body.split_at(body.len() / 2);
    stream.write_all(first).unwrap();
    stream.flush().unwrap();
    (stream, rest.to_vec())
}

#[test]
fn sigterm_turns_ready_503_at_once_then_drains_the_requests_in_flight_and_exits_0_within_its_bound() {
    let dir = workspace("drain");
    let config = dir.join("remit.toml");
    std::fs::write(
        &config,
        "policy = [\"policy\"]\nstore = \"sqlite:state.db\"\nlisten = \"127.0.0.1:0\"\ndrain-delay = \"2s\"\n\
         drain-timeout = \"2s\"\n",
    )
    .unwrap();
    let mut gateway = Gateway::start(remit(&dir, &["serve", "--config", config.to_str().unwrap()], &[]));
    assert_eq!(gateway.ready().0, 200);
    let address = gateway.address().to_string();
    // Two requests in flight: one that completes during the drain, one whose client never sends the rest.
    let (mut finishing, rest) = half_sent(&address);
    let (_stalled, _) = half_sent(&address);
    std::thread::sleep(Duration::from_millis(200));

    let signalled = Instant::now();
    gateway.terminate();
    std::thread::sleep(Duration::from_millis(100));
    let (status, body) = gateway.ready();
    assert_eq!(status, 503, "/ready turns 503 at once: {body}");
    assert!(body.contains("gateway.draining"), "{body}");
    // Through the drain-delay the gateway still accepts and answers, and asks clients to go elsewhere next time.
    let health = request("GET", &format!("http://{address}/health"), &[], None).unwrap();
    assert_eq!(health.status, 200);
    assert_eq!(health.header("connection"), Some("close"));

    // After the delay the listener is closed; the request in flight is still answered.
    std::thread::sleep(Duration::from_millis(2300));
    assert!(TcpStream::connect(&address).is_err(), "no new connection after the drain-delay");
    finishing.write_all(&rest).unwrap();
    let mut answer = String::new();
    finishing.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"decision\":\"allow\""), "{answer}");

    // The stalled one holds the drain until its timeout: then the gateway exits 0 anyway, within the bound.
    let (status, _) = gateway.wait(Duration::from_secs(20));
    let took = signalled.elapsed();
    assert!(status.success(), "exit status {status}");
    assert!(took >= Duration::from_secs(4), "delay and timeout both passed: {took:?}");
    assert!(took < Duration::from_secs(8), "bounded by delay + timeout (+ a second for running decisions): {took:?}");
    // The decision answered during the drain is in the log.
    let verified = remit(&dir, &["audit", "verify", "sqlite:state.db"], &[]).output().unwrap();
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success() && report.starts_with("1 entries"), "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ready_is_503_while_postgresql_is_unreachable_and_200_again_once_it_is_back() {
    let dir = workspace("ready-postgres");
    let server = support::postgres::Server::start();
    let (url, password) = server.url_and_password(server.url());
    std::fs::write(dir.join("password"), format!("{password}\n")).unwrap();
    let args = ["serve", "policy", "--listen", "127.0.0.1:0", "--store", &url, "--store-password-file", "password"];
    let gateway = Gateway::start(remit(&dir, &args, &[]));
    let (status, body) = gateway.ready();
    assert_eq!(status, 200, "{body}");
    server.pause();
    let started = Instant::now();
    let (status, body) = gateway.ready();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("gateway.store-unavailable"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(15), "answered within a probe's timeout: {:?}", started.elapsed());
    // `/health` (liveness) stays 200: a database outage must not get the replica restarted.
    let health = request("GET", &format!("http://{}/health", gateway.address()), &[], None).unwrap();
    assert_eq!(health.status, 200);
    server.resume();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = gateway.ready();
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "ready again once the database is back: {status} {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(gateway);
    std::fs::remove_dir_all(&dir).ok();
}
