//! Issue 32's benchmark (docs/scaling.md "Measurements", BENCHMARKS.md "Gateway"): `remit serve` processes on
//! loopback, over HTTP, on four stores side by side, interleaved in rounds so that the drifting load of this shared
//! machine hits them alike:
//!
//! - `sqlite full`: one gateway, its SQLite file on disk, `--durability full` (an fsync per commit);
//! - `sqlite process`: the same with `--durability process` (the default: WAL, `synchronous = NORMAL`);
//! - `pg 1`: one gateway on a PostgreSQL database (the throwaway server of scripts/postgres.sh, `fsync = off`);
//! - `pg 2`: two gateways on another database of that server, the callers split between them;
//! - `pg 2 sync`: the same on a second server with a synchronous streaming-replication standby (scripts/postgres.sh
//!   `standby --sync`: every commit waits until the standby has flushed it; docs/scaling.md "Failover"). Its
//!   server's CPU is the primary's only (the standby's is not counted).
//!
//! With `REMIT_BENCH_BASELINE=PATH` (another build's `remit`), `sqlite process` and `pg 2` run also on that binary
//! (`… base`, their own store and database), in the same rounds: a change measured side by side with its baseline.
//!
//! Cases: `read` (an allow with no obligation: its log entry only), `pay` (an allow that counts a budget and
//! records its operation, a fresh operation each call), `hot` (the same, every call one operation: one budget
//! counter shared by every call, of every caller). 1 and 64 callers (threads of this process, one keep-alive
//! connection each, `POST /v1/decide`). For each: decisions/s, p50/p99, commits/s and decisions per commit, and on
//! PostgreSQL statements and round trips per decision, conflicts and retries (the gateways' `/metrics`) and the
//! sessions waiting for a lock (`pg_stat_activity`, sampled every 10 ms); the CPU time the gateways, the database
//! server (PostgreSQL only) and the callers took per decision (`/proc`), and the load average. Every figure is the median of the
//! rounds.
//!
//! At the end every store is checked: `remit audit verify` passes, every call answered allow is logged as that
//! allow, the log holds as many allows as were answered (none lost, none extra), and each operation's budget
//! counter equals the allows logged for it (the hot counter among them).
//!
//! `cargo test --release --test scale_bench -- --ignored --nocapture` (about 3 minutes: `REMIT_BENCH_SECONDS`,
//! default 2, × 24 runs × `REMIT_BENCH_ROUNDS`, default 3). `REMIT_BENCH_STORES` (setup names' beginnings, e.g.
//! `sqlite process,pg 2`), `REMIT_BENCH_CASES` and `REMIT_BENCH_CALLERS` (comma-separated) run only those; without
//! a PostgreSQL setup no server is started. With `REMIT_DEBUG_TIMING` set (the gateways inherit it) the gateways
//! keep fine histograms of each decision's stages (`remit_debug_*` in `/metrics`), and a last table gives their
//! quantiles and each gateway thread's time on a CPU and waiting for one (`/proc/PID/task/TID/schedstat`).
//!
//! `REMIT_BENCH_GATEWAY_CPUS=LIST` (a `taskset` CPU list, e.g. `0`) runs the gateways on those CPUs only; run the
//! bench itself (the callers) on the others to separate the gateway's own tail from contention with its callers:
//! `REMIT_BENCH_GATEWAY_CPUS=0 taskset -c 1 target/release/deps/scale_bench-HASH --ignored --nocapture`.
//!
//! Its files (the SQLite stores, the gateways' logs) are in `$TMPDIR/remit-scale-bench-PID`, removed when the run
//! ends or fails; a run killed or interrupted leaves it, and the next run removes every such folder whose process
//! no longer exists. `cargo test --test scale_bench` (not ignored) tests that clean-up alone.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use remit_gateway::{audit, PostgresOptions, PostgresStore, SqliteStore};
use serde_json::Value;
use support::postgres::Server;
use support::served::Served;

/// `view_orders` allowed as a read; payments counted per operation, a budget no run reaches.
const POLICY: &str = r#"
tool view_orders(merchant: string) {
  effects read_only
}

mandate shop for "user:alice" {
  holder "agent:shopper"
  allow make_payment
  allow view_orders
  require operation id for make_payment
  budget per_op: at most 1000000 calls to make_payment per operation
}
"#;

const CASES: [&str; 3] = ["read", "pay", "hot"];
const CALLERS: [usize; 2] = [1, 64];

fn body(case: &str, n: u64) -> String {
    match case {
        "read" => r#"{"subject":{"id":"agent:shopper"},"action":{"name":"view_orders","arguments":{"merchant":"m"}}}"#
            .to_string(),
        "pay" => payment(&format!("op-{n}")),
        _ => payment("hot"),
    }
}

fn payment(operation: &str) -> String {
    format!(
        r#"{{"subject":{{"id":"agent:shopper"}},"action":{{"name":"make_payment","arguments":{{"merchant":"acme-grocer","amount":"25.00 USD"}}}},"resource":{{"id":"order:1"}},"context":{{"operation_id":"{operation}"}}}}"#
    )
}

/// One store and the `remit serve` processes on it.
struct Setup {
    name: String,
    served: Vec<Served>,
    /// `sqlite:PATH` or the database's URL (its password in it).
    store: String,
    /// The PostgreSQL database's name (for `pg_stat_activity`).
    database: Option<String>,
    /// Its server: the URL of its database `remit` (where `pg_stat_activity` is read) and its postmaster's pid.
    server: Option<(String, u32)>,
    /// The decision ids answered allow.
    allows: Mutex<Vec<String>>,
}

/// What one run measured.
#[derive(Debug, Default, Clone)]
struct Run {
    per_second: f64,
    p50: f64,
    p99: f64,
    commits_per_second: f64,
    per_commit: f64,
    statements: f64,
    round_trips: f64,
    conflicts: f64,
    retries: f64,
    /// Mean sessions waiting for a lock per sample, and the share of samples with at least one.
    lock_waiting: f64,
    lock_samples_waiting: f64,
    /// CPU µs per decision: the gateways, the database server, this process (the callers).
    cpu_gateway: f64,
    cpu_database: f64,
    cpu_callers: f64,
    errors: usize,
    /// With `REMIT_DEBUG_TIMING` set (inherited by the gateways): each stage's p50 and p99 in ms (`jobs`: jobs per
    /// batch), from the gateways' `remit_debug_*` buckets.
    stages: BTreeMap<String, (f64, f64)>,
    /// With `REMIT_DEBUG_TIMING`: per thread name of the gateways, µs per decision on a CPU and waiting for one
    /// (runnable, not running: `/proc/PID/task/TID/schedstat`), and times scheduled. (Not the callers': their
    /// threads have ended when the run is read.)
    threads: BTreeMap<String, (f64, f64, f64)>,
}

#[test]
#[ignore = "a benchmark: cargo test --release --test scale_bench -- --ignored --nocapture"]
fn scale_bench() {
    let env = |name: &str, default: f64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let seconds = env("REMIT_BENCH_SECONDS", 2.0);
    let rounds = env("REMIT_BENCH_ROUNDS", 3.0) as usize;
    // Filters, comma-separated (all when unset): `REMIT_BENCH_STORES` (setups whose name starts with one of
    // them, e.g. `sqlite process`: its baseline too), `REMIT_BENCH_CASES`, `REMIT_BENCH_CALLERS`.
    let list = |name: &str| -> Option<Vec<String>> {
        std::env::var(name).ok().map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
    };
    let stores = list("REMIT_BENCH_STORES");
    let wanted = |name: &str| stores.as_ref().is_none_or(|s| s.iter().any(|s| name.starts_with(s.as_str())));
    let cases: Vec<&str> = match list("REMIT_BENCH_CASES") {
        Some(l) => CASES.into_iter().filter(|c| l.iter().any(|w| w == c)).collect(),
        None => CASES.to_vec(),
    };
    let callers_run: Vec<usize> = match list("REMIT_BENCH_CALLERS") {
        Some(l) => l.iter().map(|c| c.parse().expect("REMIT_BENCH_CALLERS: numbers")).collect(),
        None => CALLERS.to_vec(),
    };
    // Folders left by runs that were killed or interrupted, then this run's own, removed however the run ends.
    remove_stale_scratch(&std::env::temp_dir());
    let scratch = Scratch(support::temp_dir("scale-bench"));
    let dir = scratch.0.clone();
    let policy = dir.join("shop.remit");
    std::fs::write(&policy, POLICY).unwrap();
    let with_postgres = wanted("pg 1") || wanted("pg 2");
    let server = with_postgres.then(Server::start);
    // The synchronous standby's primary, and its standby (kept until the end).
    let synchronous = wanted("pg 2 sync").then(|| {
        let primary = Server::start();
        let standby = primary.standby(true);
        (primary, standby)
    });
    let baseline = std::env::var("REMIT_BENCH_BASELINE").ok();
    let gateway_cpus = std::env::var("REMIT_BENCH_GATEWAY_CPUS").ok();
    let serve = |bin: &str, store: &str, extra: &[&str], log: &str| {
        let log = std::fs::File::create(dir.join(log)).unwrap();
        // Pinned with `taskset`, which replaces the affinity the child would inherit from this process.
        let mut command = match &gateway_cpus {
            Some(cpus) => {
                let mut taskset = Command::new("taskset");
                taskset.args(["-c", cpus.as_str(), bin]);
                taskset
            }
            None => Command::new(bin),
        };
        command
            .arg("serve")
            .arg(&policy)
            .args(["--listen", "127.0.0.1:0", "--store", store])
            .args(extra)
            .env_remove("REMIT_STORE_PASSWORD")
            .stdin(Stdio::null())
            .stderr(log);
        Served::start(&mut command)
    };
    let sqlite = |bin: &str, name: &str, file: &str, durability: &str| {
        let store = format!("sqlite:{}", dir.join(format!("{file}.db")).display());
        let served = vec![serve(bin, &store, &["--durability", durability], &format!("{file}.log"))];
        Setup { name: name.into(), served, store, database: None, server: None, allows: Mutex::new(Vec::new()) }
    };
    let postmaster_of = |server: &Server| -> u32 {
        let pid = std::fs::read_to_string(server.dir().join("data/postmaster.pid")).unwrap();
        pid.lines().next().unwrap().trim().parse().unwrap()
    };
    let postgres = |bin: &str, name: &str, server: &Server, database: &str, n: usize| {
        let url = server.database(database);
        let served = (0..n).map(|i| serve(bin, &url, &[], &format!("{database}-{i}.log"))).collect();
        let (database, server) = (Some(database.into()), Some((server.url().to_string(), postmaster_of(server))));
        Setup { name: name.into(), served, store: url, database, server, allows: Mutex::new(Vec::new()) }
    };
    let bin = support::remit_bin();
    let mut setups = Vec::new();
    if wanted("sqlite full") {
        setups.push(sqlite(bin, "sqlite full", "full", "full"));
    }
    if wanted("sqlite process") {
        setups.push(sqlite(bin, "sqlite process", "process", "process"));
        if let Some(base) = &baseline {
            setups.push(sqlite(base, "sqlite process base", "process-base", "process"));
        }
    }
    if let Some(server) = &server {
        if wanted("pg 1") {
            setups.push(postgres(bin, "pg 1", server, "bench_one", 1));
        }
        if wanted("pg 2") {
            setups.push(postgres(bin, "pg 2", server, "bench_two", 2));
            if let Some(base) = &baseline {
                setups.push(postgres(base, "pg 2 base", server, "bench_two_base", 2));
            }
        }
    }
    if let Some((primary, _)) = &synchronous {
        setups.push(postgres(bin, "pg 2 sync", primary, "bench_sync", 2));
    }
    if let Some(base) = &baseline {
        println!("# baseline: {base}");
    }
    println!(
        "# scale_bench: {seconds} s × {rounds} rounds per variant; PostgreSQL {}; load average {}",
        server.as_ref().map_or("not started".into(), |s| s.query("SHOW server_version")),
        load_average()
    );
    if let Some(cpus) = &gateway_cpus {
        println!("# gateways on CPUs {cpus} (taskset)");
    }
    let counter = AtomicU64::new(0);
    // (case, callers, setup) → runs.
    let mut runs: BTreeMap<(usize, usize, usize), Vec<Run>> = BTreeMap::new();
    for round in 0..rounds {
        println!("# round {} of {rounds}, load average {}", round + 1, load_average());
        for (c, case) in cases.iter().enumerate() {
            for (k, callers) in callers_run.iter().enumerate() {
                for (s, setup) in setups.iter().enumerate() {
                    let run = measure(setup, case, *callers, seconds, &counter);
                    runs.entry((c, k, s)).or_default().push(run);
                }
            }
        }
    }
    println!("# load average at the end {}", load_average());
    let median = |runs: &[Run], f: fn(&Run) -> f64| {
        let mut values: Vec<f64> = runs.iter().map(f).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    for (c, case) in cases.iter().enumerate() {
        println!("\n## {case}\n");
        println!(
            "| store | callers | decisions/s | p50 | p99 | commits/s | decisions/commit | statements · round trips \
             /decision | conflicts · retries | lock-waiting sessions (share of samples) | CPU µs/decision: gateways · \
             db · callers | errors |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (k, callers) in callers_run.iter().enumerate() {
            for (s, setup) in setups.iter().enumerate() {
                let r = &runs[&(c, k, s)];
                let m = |f: fn(&Run) -> f64| median(r, f);
                let pg = setup.database.is_some();
                let trips = if pg {
                    format!("{:.2} · {:.3}", m(|r| r.statements), m(|r| r.round_trips))
                } else {
                    "— (in process)".into()
                };
                let server = if pg { format!("{:.0}", m(|r| r.cpu_database)) } else { "—".into() };
                let waits = if pg {
                    format!("{:.2} ({:.0}%)", m(|r| r.lock_waiting), 100.0 * m(|r| r.lock_samples_waiting))
                } else {
                    "—".into()
                };
                println!(
                    "| {} | {callers} | {:.0} | {:.2} ms | {:.2} ms | {:.0} | {:.1} | {trips} | {:.0} · {:.0} | {waits} | \
                     {:.0} · {server} · {:.0} | {} |",
                    setup.name,
                    m(|r| r.per_second),
                    m(|r| r.p50),
                    m(|r| r.p99),
                    m(|r| r.commits_per_second),
                    m(|r| r.per_commit),
                    m(|r| r.conflicts),
                    m(|r| r.retries),
                    m(|r| r.cpu_gateway),
                    m(|r| r.cpu_callers),
                    r.iter().map(|r| r.errors).sum::<usize>(),
                );
            }
        }
    }
    if runs.values().flatten().any(|r| !r.stages.is_empty()) {
        println!("\n## stages (REMIT_DEBUG_TIMING: the gateways' own timing, p50 / p99 in ms; jobs per batch)\n");
        println!("| case | store | callers | queue | batch | wake | total | jobs |");
        println!("|---|---|---|---|---|---|---|---|");
        for (c, case) in cases.iter().enumerate() {
            for (k, callers) in callers_run.iter().enumerate() {
                for (s, setup) in setups.iter().enumerate() {
                    let r = &runs[&(c, k, s)];
                    if r.iter().all(|r| r.stages.is_empty() && r.threads.is_empty()) {
                        continue;
                    }
                    let cell = |stage: &str| {
                        let mut p50s: Vec<f64> = r.iter().map(|r| r.stages.get(stage).map_or(0.0, |s| s.0)).collect();
                        let mut p99s: Vec<f64> = r.iter().map(|r| r.stages.get(stage).map_or(0.0, |s| s.1)).collect();
                        p50s.sort_by(f64::total_cmp);
                        p99s.sort_by(f64::total_cmp);
                        format!("{:.2} / {:.2}", p50s[p50s.len() / 2], p99s[p99s.len() / 2])
                    };
                    println!(
                        "| {case} | {} | {callers} | {} | {} | {} | {} | {} |",
                        setup.name,
                        cell("queue"),
                        cell("batch"),
                        cell("wake"),
                        cell("total"),
                        cell("jobs")
                    );
                    let names: std::collections::BTreeSet<&String> = r.iter().flat_map(|r| r.threads.keys()).collect();
                    for name in names {
                        let t = |f: fn(&(f64, f64, f64)) -> f64| {
                            let mut v: Vec<f64> = r.iter().map(|r| r.threads.get(name).map_or(0.0, f)).collect();
                            v.sort_by(f64::total_cmp);
                            v[v.len() / 2]
                        };
                        println!(
                            "|   | thread `{name}`: µs/decision on CPU {:.1}, waiting for a CPU {:.1}; scheduled {:.2}/decision | | | | | |",
                            t(|x| x.0),
                            t(|x| x.1),
                            t(|x| x.2)
                        );
                    }
                }
            }
        }
    }
    println!();
    for setup in &setups {
        exact(setup);
    }
}

/// What a run's scratch folder is called: `remit-scale-bench-PID` (`support::temp_dir`), PID this process's.
const SCRATCH_PREFIX: &str = "remit-scale-bench-";

/// The run's scratch folder (the policy, the SQLite stores, the gateways' logs), removed when dropped: at the end of
/// the run, and when it fails, as a panic unwinds through it (it is the bench's first local, so it is dropped last,
/// after the gateways and the PostgreSQL server). A run that is killed or interrupted (SIGINT, SIGKILL) cannot remove
/// it: the next run does ([`remove_stale_scratch`]).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_name(pid: u32) -> String {
    format!("{SCRATCH_PREFIX}{pid}")
}

/// Removes the scratch folders under `temp` that runs of this bench left (`remit-scale-bench-PID`) whose process no
/// longer exists (no `/proc/PID`); a folder of a live process, this one's or another run's, is kept. What it removed.
fn remove_stale_scratch(temp: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(temp) else { return removed };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let dead = !Path::new("/proc").join(pid.to_string()).exists();
        if dead && entry.file_type().is_ok_and(|t| t.is_dir()) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

#[test]
fn scratch_is_removed_at_the_end_and_on_panic() {
    // Not the bench's own folder (`remit-scale-bench-PID`): a bench run by `--include-ignored` in this process uses it.
    let dir = std::env::temp_dir().join(format!("remit-scale-bench-guard-{}", std::process::id()));
    let scratch = Scratch(support::temp_dir("scale-bench-guard"));
    assert_eq!(scratch.0, dir);
    std::fs::write(scratch.0.join("a.db"), "x").unwrap();
    drop(scratch);
    assert!(!dir.exists(), "removed at the end");
    let failed = std::panic::catch_unwind(|| {
        let scratch = Scratch(support::temp_dir("scale-bench-guard"));
        std::fs::create_dir_all(scratch.0.join("inner")).unwrap();
        std::fs::write(scratch.0.join("inner/a.log"), "x").unwrap();
        panic!("the bench fails with its scratch folder {}", scratch.0.display());
    });
    assert!(failed.is_err());
    assert!(!dir.exists(), "removed on panic");
}

#[test]
fn stale_scratch_of_dead_processes_is_removed() {
    // A folder of its own, with folders named as a dead run's and as a live one's (this process), and others.
    let temp = support::temp_dir("scale-bench-stale");
    // No process has a pid above `pid_max`.
    let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let dead = temp.join(scratch_name(max + 1));
    let live = temp.join(scratch_name(std::process::id()));
    let other = temp.join(format!("{SCRATCH_PREFIX}notapid"));
    let another = temp.join(format!("remit-nesting-{}", max + 1));
    for dir in [&dead, &live, &other, &another] {
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        std::fs::write(dir.join("inner/process.db"), "x").unwrap();
    }
    assert_eq!(remove_stale_scratch(&temp), std::slice::from_ref(&dead));
    assert!(!dead.exists() && live.is_dir() && other.is_dir() && another.is_dir());
    std::fs::remove_dir_all(&temp).unwrap();
}

/// Runs `callers` callers on `setup` for `seconds` (caller `i` on gateway `i % n`).
fn measure(setup: &Setup, case: &str, callers: usize, seconds: f64, counter: &AtomicU64) -> Run {
    let postmaster = setup.server.as_ref().map(|(_, pid)| *pid);
    let metrics_before: Vec<BTreeMap<String, f64>> = setup.served.iter().map(metrics).collect();
    let gateways: Vec<u32> = setup.served.iter().map(|s| s.child.id()).collect();
    let cpu_before = (cpu(&gateways), postmaster.map_or(0.0, database_cpu), cpu(&[std::process::id()]));
    let debug = std::env::var_os("REMIT_DEBUG_TIMING").is_some();
    let sched_before = if debug { schedstats(&gateways) } else { BTreeMap::new() };
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(callers + 1);
    let length = Duration::from_secs_f64(seconds);
    let (results, elapsed, samples) = std::thread::scope(|scope| {
        let sampler = setup.database.as_ref().map(|database| {
            let (stop, url) = (&stop, setup.server.as_ref().expect("a PostgreSQL setup has its server").0.as_str());
            scope.spawn(move || lock_waits(url, database, stop))
        });
        let workers: Vec<_> = (0..callers)
            .map(|i| {
                let address = setup.served[i % setup.served.len()].address().to_string();
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut client = Client::connect(&address);
                    let mut latencies = Vec::new();
                    let mut allows = Vec::new();
                    let mut errors = 0;
                    barrier.wait();
                    let deadline = Instant::now() + length;
                    loop {
                        let sent = Instant::now();
                        if sent >= deadline {
                            break;
                        }
                        let payload = body(case, counter.fetch_add(1, Ordering::Relaxed));
                        match client.decide(payload.as_bytes()) {
                            Some(id) => allows.push(id),
                            None => errors += 1,
                        }
                        latencies.push(sent.elapsed());
                    }
                    (latencies, allows, errors)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let elapsed = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        (results, elapsed, sampler.map(|s| s.join().unwrap()))
    });
    let cpu_after = (cpu(&gateways), postmaster.map_or(0.0, database_cpu), cpu(&[std::process::id()]));
    let sched_after = if debug { schedstats(&gateways) } else { BTreeMap::new() };
    let metrics_after: Vec<BTreeMap<String, f64>> = setup.served.iter().map(metrics).collect();
    let delta = |name: &str| -> f64 {
        metrics_after
            .iter()
            .zip(&metrics_before)
            .map(|(a, b)| a.get(name).unwrap_or(&0.0) - b.get(name).unwrap_or(&0.0))
            .sum()
    };
    let mut latencies: Vec<Duration> = Vec::new();
    let mut errors = 0;
    {
        let mut allowed = setup.allows.lock().unwrap();
        for (l, a, e) in results {
            latencies.extend(l);
            allowed.extend(a);
            errors += e;
        }
    }
    latencies.sort();
    let n = latencies.len() as f64;
    // The gateways' stage buckets (`remit_debug_STAGE{le="S"}`), counted during this run.
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for name in metrics_after.iter().flat_map(|m| m.keys()).filter(|k| k.starts_with("remit_debug_")) {
        let Some((stage, le)) = name.strip_prefix("remit_debug_").and_then(|n| n.split_once("{le=\"")) else {
            continue;
        };
        let le: f64 = le.trim_end_matches("\"}").parse().unwrap();
        let count = delta(name);
        let stage = buckets.entry(stage.to_string()).or_default();
        if count > 0.0 && !stage.iter().any(|(l, _)| *l == le) {
            stage.push((le, count));
        }
    }
    let stages = buckets
        .into_iter()
        .map(|(stage, mut b)| {
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
            let total: f64 = b.iter().map(|(_, c)| c).sum();
            let scale = if stage == "jobs" { 1e5 } else { 1e3 };
            let quantile = |q: f64| {
                let mut seen = 0.0;
                b.iter()
                    .find(|(_, c)| {
                        seen += c;
                        seen >= q * total
                    })
                    .map_or(0.0, |(le, _)| le * scale)
            };
            (stage, (quantile(0.5), quantile(0.99)))
        })
        .collect();
    let at = |q: f64| latencies[((n * q) as usize).min(latencies.len() - 1)].as_secs_f64() * 1e3;
    let commits = delta("remit_decision_commits_total");
    let (waiting, with_any) = samples.unwrap_or((0.0, 0.0));
    Run {
        per_second: n / elapsed,
        p50: at(0.5),
        p99: at(0.99),
        commits_per_second: commits / elapsed,
        per_commit: delta("remit_decisions_total{outcome=\"allow\"}") / commits.max(1.0),
        statements: delta("remit_store_statements_total") / n,
        round_trips: delta("remit_store_round_trips_total") / n,
        conflicts: delta("remit_store_conflicts_total"),
        retries: delta("remit_store_retries_total"),
        lock_waiting: waiting,
        lock_samples_waiting: with_any,
        cpu_gateway: (cpu_after.0 - cpu_before.0) * 1e6 / n,
        cpu_database: (cpu_after.1 - cpu_before.1) * 1e6 / n,
        cpu_callers: (cpu_after.2 - cpu_before.2) * 1e6 / n,
        errors,
        stages,
        threads: sched_after
            .iter()
            .map(|(name, (run, wait, slices))| {
                let (r0, w0, s0) = sched_before.get(name).copied().unwrap_or_default();
                (name.clone(), ((run - r0) / 1e3 / n, (wait - w0) / 1e3 / n, (slices - s0) / n))
            })
            .collect(),
    }
}

/// Per thread name of the processes `gateways`: ns on a CPU, ns waiting for one, times scheduled.
fn schedstats(gateways: &[u32]) -> BTreeMap<String, (f64, f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for pid in gateways {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
            let v: Vec<f64> = stat.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            if v.len() < 3 {
                continue;
            }
            let e = out.entry(comm.trim().to_string()).or_default();
            (e.0, e.1, e.2) = (e.0 + v[0], e.1 + v[1], e.2 + v[2]);
        }
    }
    out
}

/// Samples the sessions of `database` waiting for a lock every 10 ms until `stop`: their mean number, and the share
/// of samples with at least one. One `psql` session for all samples.
fn lock_waits(url: &str, database: &str, stop: &AtomicBool) -> (f64, f64) {
    let mut psql = Command::new("psql")
        .args([url, "-Atq"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = psql.stdin.take().unwrap();
    let mut lines = BufReader::new(psql.stdout.take().unwrap()).lines();
    let (mut samples, mut waiting, mut with_any) = (0u64, 0u64, 0u64);
    let sql =
        format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' AND wait_event_type = 'Lock';");
    while !stop.load(Ordering::Relaxed) {
        writeln!(stdin, "{sql}").unwrap();
        stdin.flush().unwrap();
        let n: u64 = lines.next().unwrap().unwrap().trim().parse().unwrap();
        samples += 1;
        waiting += n;
        with_any += u64::from(n > 0);
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(stdin);
    let _ = psql.wait();
    let samples = samples.max(1) as f64;
    (waiting as f64 / samples, with_any as f64 / samples)
}

/// The `/metrics` of a gateway: each sample's name (with its labels) → value.
fn metrics(served: &Served) -> BTreeMap<String, f64> {
    let mut client = Client::connect(served.address());
    let text = client.get("/metrics");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(name, value)| Some((name.to_string(), value.parse().ok()?)))
        .collect()
}

/// CPU seconds (user + system) the processes `pids` took so far.
fn cpu(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|pid| stat(*pid)).map(|(_, ticks)| ticks).sum::<f64>() / ticks_per_second()
}

/// CPU seconds the PostgreSQL server took so far: the postmaster and its children (the backends; a backend that
/// ended is not counted).
fn database_cpu(postmaster: u32) -> f64 {
    let mut ticks = stat(postmaster).map_or(0.0, |(_, t)| t);
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some((parent, t)) = stat(pid) {
            if parent == postmaster {
                ticks += t;
            }
        }
    }
    ticks / ticks_per_second()
}

/// The parent pid and the CPU ticks (utime + stime) of process `pid`.
fn stat(pid: u32) -> Option<(u32, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // After the name: state(3) ppid(4) … utime(14) stime(15), counted from 1 with pid and name.
    let parent = fields.get(1)?.parse().ok()?;
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((parent, ticks))
}

fn ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(100.0)
    })
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or("?".into(), |l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
}

/// Checks what `setup`'s gateways left in their store: `remit audit verify` passes; every call answered allow is
/// logged as that allow; the log holds no other decision (each call answered was an allow); each operation's
/// budget counter equals the allows logged for it.
fn exact(setup: &Setup) {
    let verified = Command::new(support::remit_bin()).args(["audit", "verify", &setup.store]).output().unwrap();
    let said = String::from_utf8_lossy(&verified.stdout).into_owned() + &String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "{}: remit audit verify: {said}", setup.name);
    let sqlite = setup.store.strip_prefix("sqlite:").map(PathBuf::from);
    let entries = match &sqlite {
        Some(path) => audit::read_all(&SqliteStore::open_existing(path).unwrap()).unwrap(),
        None => {
            let options = PostgresOptions { writer: "auditor".into(), ..PostgresOptions::default() };
            audit::read_all(&PostgresStore::connect(&setup.store, None, &options).unwrap()).unwrap()
        }
    };
    let mut logged: BTreeMap<String, String> = BTreeMap::new();
    let mut per_operation: BTreeMap<String, u64> = BTreeMap::new();
    for entry in entries.iter().filter(|e| e.kind == "decision") {
        let body: Value = serde_json::from_str(&entry.body).unwrap();
        let outcome = body["decision"]["decision"].as_str().unwrap_or("").to_string();
        if outcome == "allow" {
            if let Some(operation) = body["request"]["context"]["operation_id"].as_str() {
                *per_operation.entry(operation.to_string()).or_default() += 1;
            }
        }
        logged.insert(body["id"].as_str().unwrap().to_string(), outcome);
    }
    let allows = setup.allows.lock().unwrap();
    for id in allows.iter() {
        assert_eq!(
            logged.get(id).map(String::as_str),
            Some("allow"),
            "{}: `{id}` answered allow, not logged so",
            setup.name
        );
    }
    assert_eq!(logged.len(), allows.len(), "{}: the decisions logged are the allows answered", setup.name);
    let counted = counters(setup, sqlite.as_deref(), &per_operation);
    assert_eq!(counted, per_operation, "{}: each operation's counter equals the allows logged for it", setup.name);
    println!(
        "{}: exact — {} allows answered, {} logged, `remit audit verify`: {}; {} operations' counters equal their \
         allows logged, the hot one {}",
        setup.name,
        allows.len(),
        logged.len(),
        said.trim(),
        counted.len(),
        counted.get("hot").copied().unwrap_or(0)
    );
}

/// The `per_op` counter of each operation (`operation:ID`), by operation id, those above 0.
fn counters(setup: &Setup, sqlite: Option<&Path>, operations: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let window = |w: &str| w.strip_prefix("operation:").unwrap_or(w).to_string();
    match sqlite {
        Some(path) => {
            let store = SqliteStore::open_existing(path).unwrap();
            let mut tx = remit_gateway::Store::begin_read(&store).unwrap();
            let mut counted = BTreeMap::new();
            // Every operation logged, and one no call named (it must read 0).
            for operation in operations.keys().map(String::as_str).chain(["never"]) {
                let value = tx.counter("per_op", &format!("operation:{operation}")).unwrap();
                if value > 0 {
                    counted.insert(operation.to_string(), value);
                }
            }
            counted
        }
        None => support::replicas::query(
            &setup.store,
            "SELECT counter_window, value FROM counters WHERE counter = 'per_op' AND value > 0",
        )
        .iter()
        .map(|row| {
            let (w, value) = row.rsplit_once('|').unwrap();
            (window(w), value.parse().unwrap())
        })
        .collect(),
    }
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
    fn connect(address: &str) -> Client {
        let stream = TcpStream::connect(address).expect("connects");
        stream.set_nodelay(true).ok();
        let writer = stream.try_clone().expect("a socket clone");
        Client { host: address.to_string(), writer, reader: BufReader::new(stream), line: String::new(), body: vec![] }
    }

    /// Sends a request; the status and the `remit-decision-id` header; the body is left in `self.body`.
    fn send(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, Option<String>) {
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.writer.write_all(&request).expect("sends");
        self.line.clear();
        self.reader.read_line(&mut self.line).expect("a status line");
        let status = self.line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let (mut length, mut id) = (0usize, None);
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
                } else if name.eq_ignore_ascii_case("remit-decision-id") {
                    id = Some(value.trim().to_string());
                }
            }
        }
        self.body.resize(length, 0);
        self.reader.read_exact(&mut self.body).expect("a body");
        (status, id)
    }

    /// `POST /v1/decide`: the decision's id when it was a `200` allow.
    fn decide(&mut self, body: &[u8]) -> Option<String> {
        let (status, id) = self.send("POST", "/v1/decide", body);
        let head = &self.body[..self.body.len().min(64)];
        let allowed = head.windows(18).any(|w| w == br#""decision":"allow""#);
        (status == 200 && allowed).then_some(id).flatten()
    }

    fn get(&mut self, path: &str) -> String {
        let (status, _) = self.send("GET", path, b"");
        assert_eq!(status, 200, "GET {path}");
        String::from_utf8_lossy(&self.body).into_owned()
    }
}
