//! What the gateway counts for `/metrics`: decisions by outcome and reason, failures, and latency histograms in
//! Prometheus' text format. Depends on nothing else of the core (the core counts into [`Counts`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The upper bounds of the buckets of the gateway's latency histograms, in seconds.
pub const BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// A Prometheus histogram of durations over [`BUCKETS`] (cumulative buckets, count, sum).
#[derive(Debug, Default)]
pub struct Histogram {
    pub buckets: [AtomicU64; BUCKETS.len()],
    pub count: AtomicU64,
    /// Microseconds.
    pub sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, seconds: f64) {
        for (bucket, le) in self.buckets.iter().zip(BUCKETS) {
            if seconds <= le {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// The histogram in Prometheus text format under `name`.
    pub fn render(&self, name: &str, help: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bucket, le) in self.buckets.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {}", bucket.load(Ordering::Relaxed));
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Counts the gateway keeps for `/metrics`.
#[derive(Debug, Default)]
pub struct Counts {
    pub allow: AtomicU64,
    pub deny: AtomicU64,
    pub escalate: AtomicU64,
    pub store_failures: AtomicU64,
    pub obligation_failures: AtomicU64,
    pub ignored_fields: AtomicU64,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    /// Denies and escalations answered allow in shadow mode.
    pub shadowed: AtomicU64,
    /// Decision transactions committed (group commit: one for a batch of decisions).
    pub commits: AtomicU64,
    /// Decisions run again after their transaction lost to a concurrent one (a store shared by several gateways).
    pub store_retries: AtomicU64,
    /// The log lag: from a decision's arrival to the end of the transaction that logged it (committed, or failed
    /// and denied); no decision is answered before.
    pub log_lag: Histogram,
    /// Decisions that arrived and are not yet logged (queued or in the running transaction).
    pub log_pending: AtomicU64,
    /// Reason code → decisions that gave it.
    pub reasons: Mutex<std::collections::BTreeMap<String, u64>>,
    /// Where a decision's time goes, with `REMIT_DEBUG_TIMING` set.
    pub stages: Stages,
}

/// Where a decision's time goes, in fine buckets, kept only when the variable `REMIT_DEBUG_TIMING` is set when the
/// gateway starts (a diagnosis aid, BENCHMARKS.md "Gateway over HTTP"): `/metrics` then lists each stage as
/// `remit_debug_STAGE{le="SECONDS"} COUNT` (each bucket on its own, not cumulative), and `tests/scale_bench.rs`
/// prints their quantiles. Off, a stage costs one branch.
#[derive(Debug)]
pub struct Stages {
    pub enabled: bool,
    /// From the job queued to its batch taken from the queue.
    pub queue: Fine,
    /// From its batch taken to its batch committed (every job of a batch counts the whole batch).
    pub batch: Fine,
    /// From its batch committed to its task polled with the result (the wake-up of an awaiting task).
    pub wake: Fine,
    /// The whole decision as the HTTP front end times it (`remit_decision_seconds`).
    pub total: Fine,
    /// Jobs per batch, counted per batch, in the same buckets read as 1e-5 × jobs (10 µs = 1 job).
    pub jobs: Fine,
}

impl Default for Stages {
    fn default() -> Stages {
        Stages {
            enabled: std::env::var_os("REMIT_DEBUG_TIMING").is_some(),
            queue: Fine::default(),
            batch: Fine::default(),
            wake: Fine::default(),
            total: Fine::default(),
            jobs: Fine::default(),
        }
    }
}

impl Stages {
    pub fn render(&self, out: &mut String) {
        if !self.enabled {
            return;
        }
        for (name, fine) in [
            ("queue", &self.queue),
            ("batch", &self.batch),
            ("wake", &self.wake),
            ("total", &self.total),
            ("jobs", &self.jobs),
        ] {
            fine.render(&format!("remit_debug_{name}"), out);
        }
    }
}

/// The number of [`Fine`] buckets: 10 µs × 1.25^i, up to about 5 s.
const FINE: usize = 60;

/// A histogram of durations in buckets 25% wide, from 10 µs ([`Stages`]).
#[derive(Debug)]
pub struct Fine([AtomicU64; FINE]);

impl Default for Fine {
    fn default() -> Fine {
        Fine(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Fine {
    fn bound(i: usize) -> f64 {
        1e-5 * 1.25f64.powi(i as i32)
    }

    pub fn observe(&self, seconds: f64) {
        let i = if seconds <= 1e-5 { 0 } else { ((seconds / 1e-5).ln() / 1.25f64.ln()).ceil() as usize };
        self.0[i.min(FINE - 1)].fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, name: &str, out: &mut String) {
        use std::fmt::Write;
        for (i, bucket) in self.0.iter().enumerate() {
            let n = bucket.load(Ordering::Relaxed);
            if n > 0 {
                let _ = writeln!(out, "{name}{{le=\"{:.7}\"}} {n}", Fine::bound(i));
            }
        }
    }
}
