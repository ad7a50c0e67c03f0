//! `remit serve` replicas as a deployment runs them: processes on one PostgreSQL database, each on a loopback port
//! of its own choosing (support::served), killed when dropped; the calls the fault tests send them; and what those
//! tests check afterwards in the database, as an auditor would: `remit audit verify` passes, every allow a caller
//! was answered is in the log, every budget counter equals the allows logged for it, and every consumed approval
//! has the allow that consumed it in the log. Needs the server of support::postgres and the `remit` binary; nothing
//! of the gateway's insides (the log is read through the store, as `remit audit` reads it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use remit_gateway::client::blocking::request;
use remit_gateway::store::LogEntry;
use remit_gateway::{audit, PostgresOptions, PostgresStore};
use serde_json::Value;

use super::served::Served;

/// Alice's token for the inbox of every replica (`--inbox-token user:alice=…`).
pub const ALICE: &str = "alice-replicas-inbox-token";

/// `remit serve` processes on one database, each its stderr in a file of `dir` (shown when a test fails).
pub struct Replicas {
    pub served: Vec<Served>,
    dir: PathBuf,
}

impl Replicas {
    /// `n` replicas of `remit serve POLICY --store URL --inbox-token user:alice=ALICE EXTRA…` (URL with its password),
    /// started one after the other.
    pub fn start(n: usize, policy: &Path, url: &str, dir: &Path, extra: &[&str]) -> Replicas {
        let served = (0..n)
            .map(|i| {
                let log = std::fs::File::create(dir.join(format!("replica-{i}.log"))).unwrap();
                let mut command = Command::new(super::remit_bin());
                command
                    .arg("serve")
                    .arg(policy)
                    .args(["--listen", "127.0.0.1:0", "--store", url])
                    .arg(format!("--inbox-token=user:alice={ALICE}"))
                    .args(extra)
                    .env_remove("REMIT_STORE_PASSWORD")
                    .stdin(Stdio::null())
                    .stderr(log);
                Served::start(&mut command)
            })
            .collect();
        Replicas { served, dir: dir.to_path_buf() }
    }

    pub fn url(&self, i: usize) -> &str {
        &self.served[i].url
    }

    pub fn pid(&self, i: usize) -> u32 {
        self.served[i].child.id()
    }

    /// `kill -9`: no drain, no last seal, a transaction cut wherever it was.
    pub fn kill(&mut self, i: usize) {
        self.served[i].child.kill().unwrap();
        self.served[i].child.wait().unwrap();
    }

    /// Whether replica `i` is still the process started (it never exited, so it was never restarted).
    pub fn running(&mut self, i: usize) -> bool {
        self.served[i].child.try_wait().unwrap().is_none()
    }

    /// `/ready`'s status.
    pub fn ready(&self, i: usize) -> u16 {
        request("GET", &format!("{}/ready", self.url(i)), &[], None).map(|r| r.status).unwrap_or(0)
    }

    /// What replica `i` wrote on stderr.
    pub fn stderr(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("replica-{i}.log"))).unwrap_or_default()
    }
}

/// A gateway's answer to a call, as the caller saw it.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// `allow`, `deny` or `escalate` (the native API's, or the AuthZEN context's).
    pub outcome: String,
    pub reasons: Vec<String>,
    /// The decision's id (`remit-decision-id`, or the AuthZEN context's `decision_id`).
    pub id: Option<String>,
    /// The access request it filed, if it escalated.
    pub access_request: Option<String>,
}

impl Answer {
    pub fn allowed(&self) -> bool {
        self.status == 200 && self.outcome == "allow"
    }

    pub fn store_unavailable(&self) -> bool {
        self.status == 200 && self.outcome == "deny" && self.reasons == ["gateway.store-unavailable"]
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

/// `POST /v1/decide` (the native API) with `body`; an error when no answer came (the replica is gone).
pub fn decide(url: &str, body: &Value) -> Result<Answer, String> {
    let sent = body.to_string();
    let response = request("POST", &format!("{url}/v1/decide"), &[], Some(sent.as_bytes()))?;
    let answer = response.json();
    Ok(Answer {
        status: response.status,
        outcome: answer["decision"].as_str().unwrap_or("").to_string(),
        reasons: strings(&answer["reasons"]),
        id: response.header("remit-decision-id").map(str::to_string),
        access_request: response.header("remit-access-request").and_then(|u| u.rsplit('/').next()).map(str::to_string),
    })
}

/// `POST /access/v1/evaluation` (AuthZEN) with `body`, the answer's context read as [`decide`] reads the native one.
pub fn evaluate(url: &str, body: &Value) -> Result<Answer, String> {
    let sent = body.to_string();
    let headers = [("Content-Type", "application/json")];
    let response = request("POST", &format!("{url}/access/v1/evaluation"), &headers, Some(sent.as_bytes()))?;
    let context = &response.json()["context"];
    Ok(Answer {
        status: response.status,
        outcome: context["decision"].as_str().unwrap_or("").to_string(),
        reasons: strings(&context["reasons"]),
        id: context["decision_id"].as_str().map(str::to_string),
        access_request: context["access_request"]["id"].as_str().map(str::to_string),
    })
}

/// Alice approves access request `id` through the inbox API of the replica at `url`: the HTTP status.
pub fn approve(url: &str, id: &str) -> Result<u16, String> {
    let auth = format!("Bearer {ALICE}");
    let url = format!("{url}/inbox/api/requests/{id}/approve");
    request("POST", &url, &[("Authorization", auth.as_str())], None).map(|r| r.status)
}

/// `remit audit verify URL` (a process of its own, reading the database in read transactions): whether it passed,
/// and what it said.
pub fn audit_verify(url: &str) -> (bool, String) {
    let out = Command::new(super::remit_bin()).args(["audit", "verify", url]).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// The rows `sql` answers on the database at `url` (psql's unaligned output: a line a row, `|` between fields).
pub fn query(url: &str, sql: &str) -> Vec<String> {
    let out = Command::new("psql").args([url, "-Atq", "-c", sql]).output().unwrap();
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// A row lock held by another session (a `psql` of its own, in an open transaction) until released or dropped: a
/// replica's transaction that needs the row waits for it, so that a fault can be made to land in its middle.
pub struct RowLock {
    psql: std::process::Child,
}

impl RowLock {
    /// Runs `BEGIN; SELECT_FOR_UPDATE` on the database at `url` and waits until it answered (the lock is held).
    pub fn take(url: &str, select_for_update: &str) -> RowLock {
        use std::io::{BufRead, Write};
        let mut psql = Command::new("psql")
            .args([url, "-Atq", "-v", "ON_ERROR_STOP=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = psql.stdin.as_mut().unwrap();
        writeln!(stdin, "BEGIN;\n{select_for_update};\nSELECT 'locked';").unwrap();
        stdin.flush().unwrap();
        let mut lines = std::io::BufReader::new(psql.stdout.take().unwrap()).lines();
        assert!(lines.any(|l| l.unwrap() == "locked"), "psql took the lock: {select_for_update}");
        RowLock { psql }
    }

    /// Commits the transaction: the lock is released.
    pub fn release(mut self) {
        use std::io::Write;
        let mut stdin = self.psql.stdin.take().unwrap();
        writeln!(stdin, "COMMIT;").unwrap();
        drop(stdin);
        assert!(self.psql.wait().unwrap().success(), "psql committed");
    }
}

impl Drop for RowLock {
    fn drop(&mut self) {
        let _ = self.psql.kill();
        let _ = self.psql.wait();
    }
}

/// How many sessions of the `remit serve` process `pid` wait for a lock now.
pub fn waiting_for_a_lock(url: &str, pid: u32) -> usize {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'remit serve {pid}' AND wait_event_type = 'Lock'"
    );
    query(url, &sql)[0].parse().unwrap()
}

/// The writer id of the `remit serve` process `pid` (it registers as `remit serve PID`).
pub fn writer_of(url: &str, pid: u32) -> String {
    let ids = query(url, &format!("SELECT id FROM writers WHERE name = 'remit serve {pid}'"));
    assert_eq!(ids.len(), 1, "one writer for process {pid}: {ids:?}");
    ids[0].clone()
}

/// What the replicas left in the database at `url`, once checked ([`audited`]).
pub struct Audited {
    pub entries: Vec<LogEntry>,
    /// Every decision logged: its id → its log entry's body.
    pub decisions: BTreeMap<String, Value>,
    /// How many chains `remit audit verify` verified.
    pub chains: usize,
}

impl Audited {
    pub fn outcome(&self, decision: &str) -> Option<&str> {
        self.decisions.get(decision).and_then(|b| b["decision"]["decision"].as_str())
    }
}

/// Checks what replicas left in the database at `url` (the password in it), failing with what is wrong:
/// - `remit audit verify` passes: every writer's chain holds from its genesis, and every head a seal names is there
///   (so a chain was cut, if at all, only after the last entry another writer sealed);
/// - every decision id of `answered_allows` (what callers were answered allow) is logged as an allow;
/// - the counter `budget` of each operation (`operation:ID`) equals the allows logged with that operation id;
/// - every consumed approval was consumed by an allow logged that names it among the approvals it used.
pub fn audited(url: &str, answered_allows: &[String], budget: &str) -> Audited {
    let (passed, said) = audit_verify(url);
    assert!(passed, "remit audit verify: {said}");
    let chains: usize = said
        .split(" in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("remit audit verify names its chains: {said}"));
    let options = PostgresOptions { writer: "auditor".into(), ..PostgresOptions::default() };
    let store = PostgresStore::connect(url, None, &options).unwrap();
    let entries = audit::read_all(&store).unwrap();
    let decisions: BTreeMap<String, Value> = entries
        .iter()
        .filter(|e| e.kind == "decision")
        .map(|e| serde_json::from_str::<Value>(&e.body).unwrap())
        .map(|b| (b["id"].as_str().unwrap().to_string(), b))
        .collect();
    let audited = Audited { entries, decisions, chains };
    for id in answered_allows {
        assert_eq!(audited.outcome(id), Some("allow"), "decision `{id}` was answered allow: it must be logged so");
    }
    // Allows logged per operation, against the counters.
    let mut allows: BTreeMap<String, i64> = BTreeMap::new();
    for body in audited.decisions.values().filter(|b| b["decision"]["decision"] == "allow") {
        if let Some(operation) = body["request"]["context"]["operation_id"].as_str() {
            *allows.entry(format!("operation:{operation}")).or_default() += 1;
        }
    }
    let counted: BTreeMap<String, i64> =
        query(url, &format!("SELECT counter_window, value FROM counters WHERE counter = '{budget}' AND value > 0"))
            .iter()
            .map(|row| {
                let (window, value) = row.rsplit_once('|').unwrap();
                (window.to_string(), value.parse().unwrap())
            })
            .collect();
    assert!(!counted.is_empty(), "the budget `{budget}` counted something");
    assert_eq!(counted, allows, "the budget's counters equal the allows logged, operation by operation");
    // Consumed approvals, against the allows that consumed them.
    for row in query(url, "SELECT id, consumed_by FROM approvals WHERE consumed") {
        let (approval, by) = row.split_once('|').unwrap();
        let body =
            audited.decisions.get(by).unwrap_or_else(|| panic!("approval `{approval}` consumed by `{by}`, not logged"));
        assert_eq!(body["decision"]["decision"], "allow", "approval `{approval}` consumed by a decision not allowed");
        let used: BTreeSet<&str> =
            body["approvals_used"].as_array().unwrap().iter().filter_map(|a| a["id"].as_str()).collect();
        assert!(used.contains(approval), "the allow `{by}` that consumed `{approval}` names it: {used:?}");
    }
    audited
}

/// Waits until `done()` holds, at most `limit`, polling every 50 ms: whether it did.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}
