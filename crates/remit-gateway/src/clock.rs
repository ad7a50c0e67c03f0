//! Where the gateway's time comes from: the system clock in production, a clock started at a given instant for
//! `--clock`, a settable one in tests. The core decides and the audit log signs its head by it. Depends on nothing
//! else of the crate.

use std::sync::atomic::{AtomicI64, Ordering};

/// Where the time comes from: the system clock in production, a settable one in tests.
pub trait Clock: Send + Sync {
    /// Unix seconds.
    fn now(&self) -> i64;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| d.as_secs() as i64)
    }
}

/// A clock set to an instant at start that then advances with the system's monotonic clock: `--clock` of `remit
/// serve` and `remit mcp-proxy`, for demos and tests whose decisions must not depend on the date they run on (a
/// mandate valid in December 2026 is served as in December 2026 on any day).
#[derive(Debug, Clone, Copy)]
pub struct StartedClock {
    start: i64,
    since: std::time::Instant,
}

impl StartedClock {
    pub fn new(start: i64) -> StartedClock {
        StartedClock { start, since: std::time::Instant::now() }
    }
}

impl Clock for StartedClock {
    fn now(&self) -> i64 {
        self.start.saturating_add(self.since.elapsed().as_secs() as i64)
    }
}

/// A clock that says what it was told.
#[derive(Debug, Default)]
pub struct FixedClock(pub AtomicI64);

impl FixedClock {
    pub fn new(now: i64) -> FixedClock {
        FixedClock(AtomicI64::new(now))
    }

    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
