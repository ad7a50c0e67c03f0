//! `remit-gateway-bench [--seconds S] [--rounds R]`: what the gateway adds to a decision, side by side in one
//! process, on the wallet example (BENCHMARKS.md, "Gateway"). For each case (a read that is allowed and only
//! logged; a payment that is allowed and also counts a budget and records its operation id) it times, at 1 and at
//! 64 concurrent callers:
//!
//! - `runtime`: `remit_host::Evaluator::decide` on the very request bytes the gateway handed its module (read
//!   back from the gateway's log): the in-process decision;
//! - `core`: `Gateway::decide` in process (state filled from SQLite, decision, obligations, log entry, group
//!   commit), no HTTP;
//! - `http disk`: the gateway over HTTP/1.1 keep-alive on loopback (AuthZEN `POST /access/v1/evaluation`), its SQLite
//!   store on disk: what `remit serve` runs;
//! - `http tmpfs`: the same with the store in `/dev/shm` (the log is written, the disk is out of the picture);
//! - `http log off`: the same with a store that keeps the state in memory and discards log entries. The gateway has
//!   no switch to turn its log off (every decision is logged, by design); this store exists only here, to show
//!   what the log and SQLite cost.
//!
//! Variants are timed in interleaved rounds (each round runs every variant for S seconds), so drifting load on the
//! shared machine hits them alike. The callers run in this process, on the same cores as the gateway.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use remit_gateway::core::FixedClock;
use remit_gateway::http::{remit_request, router, serve, Tokens};
use remit_gateway::store::*;
use remit_gateway::{Config, Durability, Gateway, Policy, PolicyMeta, SqliteStore};
use remit_host::Runtime;
use remit_lang::syntax::ast::FactVersion;
use serde_json::{json, Value};

/// A case: its name and its AuthZEN request (given a number for a fresh operation id).
type Case = (&'static str, fn(u64) -> Value);

const NOW: &str = "2026-12-03T15:30:00Z";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str, default: f64| {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().expect(name))
    };
    let seconds = flag("--seconds", 2.0);
    let rounds = flag("--rounds", 3.0) as usize;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let program = wallet(&root);
    let runtime = Runtime::new().expect("wasmtime");
    let compiled = Arc::new(runtime.load(&remit_lang::wasm::compile(&program).expect("compiles")).expect("loads"));
    let meta = PolicyMeta::from_program(&program);
    let scratch = std::env::temp_dir().join(format!("remit-gateway-bench-{}", std::process::id()));
    let shm = PathBuf::from("/dev/shm").join(format!("remit-gateway-bench-{}", std::process::id()));
    for dir in [&scratch, &shm] {
        std::fs::remove_dir_all(dir).ok();
        std::fs::create_dir_all(dir).expect("a scratch folder");
    }
    println!("# remit-gateway-bench: {seconds} s × {rounds} rounds per variant; load average {}", load_average());
    println!("# store on disk: {}; tmpfs: {}", scratch.display(), shm.display());

    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let make = |store: Arc<dyn Store>| {
        let policy = Policy { compiled: compiled.clone(), meta: meta.clone(), program: None, revision: None };
        let clock = Arc::new(FixedClock::new(remit_lang::value::parse_timestamp(NOW).unwrap()));
        Arc::new(Gateway::new(policy, store, clock, Config::default()))
    };
    let disk = Arc::new(SqliteStore::open(&scratch.join("state.db"), Durability::Process).expect("store"));
    let tmpfs = Arc::new(SqliteStore::open(&shm.join("state.db"), Durability::Process).expect("store"));
    let core_store = Arc::new(SqliteStore::open(&scratch.join("core.db"), Durability::Process).expect("store"));
    let gateways = [
        ("http disk", make(disk.clone())),
        ("http tmpfs", make(tmpfs)),
        ("http log off", make(Arc::new(MemoryStore::default()))),
    ];
    let core = make(core_store);
    let addresses: Vec<SocketAddr> = gateways
        .iter()
        .map(|(_, gateway)| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
            let address = listener.local_addr().unwrap();
            listener.set_nonblocking(true).unwrap();
            let app = router(gateway.clone(), Tokens::default());
            tokio.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                serve(listener, app, None, std::future::pending()).await.unwrap();
            });
            address
        })
        .collect();

    let cases: [Case; 2] = [("read (allow; log)", read), ("pay (allow; budget, operation, log)", pay)];
    let counter = AtomicU64::new(0);
    for (case, body) in cases {
        // The request the module sees: the gateway's own, from its log (state and time filled in).
        let answer = post(addresses[0], &body(u64::MAX - 1));
        assert_eq!(answer["decision"], true, "{case}: {answer}");
        let sent = last_logged_request(&disk);
        let mut timings: BTreeMap<(usize, usize), Timing> = BTreeMap::new();
        let names = ["runtime", "core", gateways[0].0, gateways[1].0, gateways[2].0];
        for _ in 0..rounds {
            for connections in [1usize, 64] {
                for v in 0..names.len() {
                    let deadline = Duration::from_secs_f64(seconds);
                    let run = match v {
                        0 => run(connections, deadline, || {
                            let mut evaluator = compiled.evaluator().expect("an instance");
                            let sent = sent.clone();
                            move || {
                                let out = evaluator.decide(&sent);
                                out.starts_with(br#"{"decision":"allow""#)
                            }
                        }),
                        1 => run(connections, deadline, || {
                            let core = core.clone();
                            let counter = &counter;
                            move || {
                                let authzen = body(counter.fetch_add(1, Ordering::Relaxed));
                                let request = serde_json::to_vec(&remit_request(authzen.as_object().unwrap())).unwrap();
                                core.decide(&request).allowed()
                            }
                        }),
                        _ => {
                            let address = addresses[v - 2];
                            run(connections, deadline, || {
                                let mut client = Client::connect(address);
                                let counter = &counter;
                                move || {
                                    let payload = body(counter.fetch_add(1, Ordering::Relaxed)).to_string();
                                    client.post("/access/v1/evaluation", payload.as_bytes())
                                }
                            })
                        }
                    };
                    timings.entry((v, connections)).or_default().add(run);
                }
            }
        }
        println!("\n## {case}\n");
        println!("| variant | callers | decisions/s | p50 | p99 | max | errors |");
        println!("|---|---|---|---|---|---|---|");
        for connections in [1usize, 64] {
            for (v, name) in names.iter().enumerate() {
                let t = timings.get_mut(&(v, connections)).unwrap();
                t.latencies.sort();
                println!(
                    "| {name} | {connections} | {:.0} | {} | {} | {} | {} |",
                    t.latencies.len() as f64 / t.elapsed.as_secs_f64(),
                    human(t.at(0.5)),
                    human(t.at(0.99)),
                    human(t.at(1.0)),
                    t.errors
                );
            }
        }
        let p50 = |v: usize| timings[&(v, 1)].at(0.5);
        println!(
            "\nadded over the in-process decision at 1 caller (p50): core {}, http disk {}, http tmpfs {}, http log off {}",
            human(p50(1).saturating_sub(p50(0))),
            human(p50(2).saturating_sub(p50(0))),
            human(p50(3).saturating_sub(p50(0))),
            human(p50(4).saturating_sub(p50(0)))
        );
    }
    let entries = remit_gateway::audit::read_all(disk.as_ref()).expect("the log");
    let count = remit_gateway::audit::verify(entries).expect("the chain holds");
    println!("\n# the disk store's log: {count} entries, the chain holds; load average {}", load_average());
    drop(gateways);
    for dir in [&scratch, &shm] {
        std::fs::remove_dir_all(dir).ok();
    }
    std::process::exit(0);
}

/// A wallet read the mandate allows (`allow read_only`): one log entry, no obligation.
fn read(_: u64) -> Value {
    json!({
        "subject": {"type": "agent", "id": "agent:shopper",
                    "properties": {"credential": {"id": "cred-7", "scopes": ["wallet.all"]}}},
        "action": {"name": "view_orders", "properties": {"merchant": "acme-grocer"}},
        "resource": {"type": "order", "id": "order:991"}
    })
}

/// A 25 USD payment in a fresh operation: allowed, and it increments the per-operation budget and records the
/// operation id with its log entry.
fn pay(n: u64) -> Value {
    json!({
        "subject": {"type": "agent", "id": "agent:shopper",
                    "properties": {"credential": {"id": "cred-7", "scopes": ["wallet.all"]}}},
        "action": {"name": "make_payment", "properties": {"merchant": "acme-grocer", "amount": "25.00 USD"}},
        "resource": {"type": "order", "id": "order:991"},
        "context": {"operation_id": format!("op-{n}")}
    })
}

fn wallet(root: &Path) -> remit_lang::ir::Program {
    let dir = root.join("examples/wallet");
    let mut sources = remit_lang::stdlib::sources();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "remit")) {
        sources.add(path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(path).unwrap());
    }
    remit_lang::check::check(sources).program.expect("the wallet checks")
}

fn last_logged_request(store: &SqliteStore) -> Vec<u8> {
    let (head, _) = store.begin().unwrap().log_head().unwrap();
    let entry = store.begin().unwrap().log_entries(head, 1).unwrap().remove(0);
    let body: Value = serde_json::from_str(&entry.body).unwrap();
    serde_json::to_vec(&body["request"]).unwrap()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or("?".into(), |l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
}

#[derive(Default)]
struct Timing {
    latencies: Vec<Duration>,
    elapsed: Duration,
    errors: usize,
}

impl Timing {
    fn add(&mut self, other: Timing) {
        self.latencies.extend(other.latencies);
        self.elapsed += other.elapsed;
        self.errors += other.errors;
    }

    /// The `q` quantile of the sorted latencies.
    fn at(&self, q: f64) -> Duration {
        let n = self.latencies.len();
        if n == 0 {
            return Duration::ZERO;
        }
        self.latencies[((n as f64 * q) as usize).min(n - 1)]
    }
}

fn human(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// Runs `callers` threads for `length`, each calling the closure `setup` made for it in a loop; a call returns
/// whether it got the expected answer.
fn run<S, C>(callers: usize, length: Duration, setup: S) -> Timing
where
    S: Fn() -> C + Sync,
    C: FnMut() -> bool,
{
    let barrier = std::sync::Barrier::new(callers + 1);
    let started = Mutex::new(Instant::now());
    let results: Vec<Timing> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..callers)
            .map(|_| {
                let (setup, barrier, started) = (&setup, &barrier, &started);
                scope.spawn(move || {
                    let mut call = setup();
                    barrier.wait();
                    let deadline = *started.lock().unwrap() + length;
                    let mut t = Timing::default();
                    loop {
                        let sent = Instant::now();
                        if sent >= deadline {
                            break;
                        }
                        let ok = call();
                        t.latencies.push(sent.elapsed());
                        t.errors += usize::from(!ok);
                    }
                    t
                })
            })
            .collect();
        *started.lock().unwrap() = Instant::now();
        barrier.wait();
        workers.into_iter().map(|w| w.join().expect("a caller")).collect()
    });
    let elapsed = started.lock().unwrap().elapsed();
    let mut total = Timing { elapsed, ..Timing::default() };
    for r in results {
        total.latencies.extend(r.latencies);
        total.errors += r.errors;
    }
    total
}

/// One keep-alive HTTP/1.1 connection.
struct Client {
    host: String,
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    line: String,
    body: Vec<u8>,
}

impl Client {
    fn connect(address: SocketAddr) -> Client {
        let stream = TcpStream::connect(address).expect("connects");
        stream.set_nodelay(true).ok();
        let writer = stream.try_clone().expect("a socket clone");
        Client { host: address.to_string(), writer, reader: BufReader::new(stream), line: String::new(), body: vec![] }
    }

    /// POSTs `body`; whether the answer is a 200 whose AuthZEN decision is `true`.
    fn post(&mut self, path: &str, body: &[u8]) -> bool {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.writer.write_all(&request).expect("sends");
        self.line.clear();
        self.reader.read_line(&mut self.line).expect("a status line");
        let ok = self.line.split(' ').nth(1) == Some("200");
        let mut length = 0usize;
        loop {
            self.line.clear();
            self.reader.read_line(&mut self.line).expect("a header");
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        self.body.resize(length, 0);
        self.reader.read_exact(&mut self.body).expect("a body");
        ok && self.body.starts_with(br#"{"decision":true"#)
    }
}

fn post(address: SocketAddr, body: &Value) -> Value {
    let mut client = Client::connect(address);
    let payload = body.to_string();
    client.post("/access/v1/evaluation", payload.as_bytes());
    serde_json::from_slice(&client.body).expect("a JSON answer")
}

/// A store that keeps the state in memory and discards log entries: the gateway with its log off, for this
/// benchmark only. Transactions are the mutex; it never rolls back (the benchmark's decisions never fail).
#[derive(Default)]
struct MemoryStore(Mutex<Memory>);

#[derive(Default)]
struct Memory {
    approvals: BTreeMap<String, StoredApproval>,
    counters: HashMap<(String, String), u64>,
    stops: Vec<String>,
    facts: Vec<(String, FactVersion)>,
    operations: u64,
    requests: BTreeMap<String, AccessRequest>,
    seq: u64,
}

struct MemoryTx<'a>(MutexGuard<'a, Memory>);

impl Store for MemoryStore {
    fn begin(&self) -> StoreResult<Box<dyn Tx + '_>> {
        Ok(Box::new(MemoryTx(self.0.lock().unwrap())))
    }
}

impl Tx for MemoryTx<'_> {
    fn stops(&mut self) -> StoreResult<Vec<String>> {
        Ok(self.0.stops.clone())
    }
    fn facts(&mut self) -> StoreResult<Vec<(String, FactVersion)>> {
        Ok(self.0.facts.clone())
    }
    fn live_approvals(&mut self, mandates: &[String], now: i64) -> StoreResult<Vec<StoredApproval>> {
        let live = self.0.approvals.values().filter(|a| !a.consumed && a.expires_at > now);
        Ok(live.filter(|a| mandates.contains(&a.mandate)).cloned().collect())
    }
    fn approvals_of_request(&mut self, request: &str) -> StoreResult<Vec<StoredApproval>> {
        let of = self.0.approvals.values().filter(|a| a.access_request.as_deref() == Some(request));
        Ok(of.cloned().collect())
    }
    fn approval(&mut self, id: &str) -> StoreResult<Option<StoredApproval>> {
        Ok(self.0.approvals.get(id).cloned())
    }
    fn counter(&mut self, counter: &str, window: &str) -> StoreResult<u64> {
        Ok(self.0.counters.get(&(counter.to_string(), window.to_string())).copied().unwrap_or(0))
    }
    fn access_request(&mut self, id: &str) -> StoreResult<Option<AccessRequest>> {
        Ok(self.0.requests.get(id).cloned())
    }
    fn pending_access_request(&mut self, key: &str, now: i64) -> StoreResult<Option<AccessRequest>> {
        let pending = self.0.requests.values().filter(|r| r.key == key && r.status == PENDING && r.expires_at > now);
        Ok(pending.max_by_key(|r| r.created_at).cloned())
    }
    fn access_requests(&mut self, status: Option<&str>) -> StoreResult<Vec<AccessRequest>> {
        let all = self.0.requests.values().filter(|r| status.is_none_or(|s| r.status == s));
        Ok(all.cloned().collect())
    }
    fn access_request_page(
        &mut self,
        status: Option<&str>,
        after: Option<&Cursor>,
        limit: usize,
        keep: &mut dyn FnMut(&AccessRequest) -> bool,
    ) -> StoreResult<Page> {
        // Newest first, as the SQLite store pages them: by `created_at` descending, then `id`.
        let mut all: Vec<AccessRequest> = self.0.requests.values().cloned().collect();
        all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.id.cmp(&b.id)));
        let after_cursor = |r: &AccessRequest| {
            after.is_none_or(|c| r.created_at < c.created_at || (r.created_at == c.created_at && r.id > c.id))
        };
        let mut requests = Vec::new();
        let mut next = None;
        for mut r in all.into_iter().filter(|r| status.is_none_or(|s| r.status == s) && after_cursor(r)) {
            cut_arguments(&mut r);
            if !keep(&r) {
                continue;
            }
            if requests.len() == limit {
                let last: &AccessRequest = requests.last().expect("a full page has a last request");
                next = Some(Cursor { created_at: last.created_at, id: last.id.clone() });
                break;
            }
            requests.push(r);
        }
        Ok(Page { requests, next })
    }
    /// The bench mints no approvals from access requests.
    fn earlier_uses(&mut self, _: &str) -> StoreResult<Vec<EarlierUse>> {
        Ok(Vec::new())
    }
    fn operations(&mut self, _: &str) -> StoreResult<Vec<OperationRecord>> {
        Ok(Vec::new())
    }
    fn log_head(&mut self) -> StoreResult<(u64, String)> {
        Ok((self.0.seq, String::new()))
    }
    fn log_entries(&mut self, _: u64, _: usize) -> StoreResult<Vec<LogEntry>> {
        Ok(Vec::new())
    }
    fn consume_approval(&mut self, id: &str, decision: &str, at: i64) -> StoreResult<bool> {
        match self.0.approvals.get_mut(id) {
            Some(a) if !a.consumed => {
                a.consumed = true;
                a.consumed_by = Some(decision.to_string());
                a.consumed_at = Some(at);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
    fn increment_counter(&mut self, counter: &str, window: &str) -> StoreResult<u64> {
        let value = self.0.counters.entry((counter.to_string(), window.to_string())).or_default();
        *value += 1;
        Ok(*value)
    }
    fn record_operation(&mut self, _: &OperationRecord) -> StoreResult<()> {
        self.0.operations += 1;
        Ok(())
    }
    fn insert_approval(&mut self, a: &StoredApproval) -> StoreResult<()> {
        self.0.approvals.insert(a.id.clone(), a.clone());
        Ok(())
    }
    fn insert_access_request(&mut self, r: &AccessRequest) -> StoreResult<()> {
        self.0.requests.insert(r.id.clone(), r.clone());
        Ok(())
    }
    fn decide_access_request(&mut self, id: &str, status: &str, by: &str, at: i64) -> StoreResult<()> {
        if let Some(r) = self.0.requests.get_mut(id) {
            r.status = status.to_string();
            r.decided_by = Some(by.to_string());
            r.decided_at = Some(at);
        }
        Ok(())
    }
    fn set_stop(&mut self, mandate: &str, active: bool) -> StoreResult<()> {
        self.0.stops.retain(|m| m != mandate);
        if active {
            self.0.stops.push(mandate.to_string());
        }
        Ok(())
    }
    fn set_fact(&mut self, name: &str, version: &FactVersion) -> StoreResult<()> {
        self.0.facts.retain(|(n, _)| n != name);
        self.0.facts.push((name.to_string(), version.clone()));
        Ok(())
    }
    /// The log is off: the entry is numbered and dropped.
    fn append_log(&mut self, time: i64, kind: &str, _body: &str) -> StoreResult<LogEntry> {
        self.0.seq += 1;
        let (seq, kind) = (self.0.seq, kind.to_string());
        Ok(LogEntry {
            seq,
            writer: String::new(),
            gseq: seq,
            time,
            kind,
            body: String::new(),
            prev: String::new(),
            hash: String::new(),
        })
    }
    fn savepoint(&mut self) -> StoreResult<()> {
        Ok(())
    }
    fn release(&mut self, keep: bool) -> StoreResult<()> {
        assert!(keep, "the benchmark's memory store cannot roll back");
        Ok(())
    }
    fn commit(self: Box<Self>) -> StoreResult<()> {
        Ok(())
    }
}
