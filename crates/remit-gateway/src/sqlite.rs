//! The embedded store: one SQLite file in WAL mode (SQLite built from source by `rusqlite`'s `bundled` feature, so
//! no system library is needed).
//!
//! One connection behind a mutex; every [`Tx`] is a `BEGIN IMMEDIATE` transaction, so transactions are serialized
//! (also against other processes opening the same file, e.g. `remit audit verify`). `synchronous = NORMAL` in WAL
//! mode: a committed transaction survives a crash of the process (`kill -9`); `--durability full` (`synchronous =
//! FULL`) also survives a power loss at the cost of an fsync per decision.
//!
//! The store's version ([`Store::version`]) is `PRAGMA data_version` on a connection of its own, which changes
//! whenever another connection (the store's own, a checkpoint's, another process's) commits; reading it takes no
//! lock a writer holds.
//!
//! Checkpoints (copying the WAL into the database file, with an fsync) run on a thread of their own with its own
//! connection, every 100 ms, so that no decision waits for one ([`checkpointer`]): a passive checkpoint copies what
//! was committed while the writer goes on, and the thread syncs the database file itself; once the WAL holds 4,000
//! frames it ends a checkpoint while the writer's connection is idle (its lock held), which lets the next write
//! transaction start the WAL again from its beginning. A committing transaction checkpoints by itself only when the
//! WAL has grown past 10,000 pages (the background thread fell behind). Checkpoints move only committed
//! transactions, so where they run changes no durability.

use remit_lang::syntax::ast::FactVersion;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::audit::{entry_hash, GENESIS};
use super::store::*;
use super::wal_index::WalIndexHeader;

/// The schema's version (`PRAGMA user_version`): a store of another version is refused, not silently reused.
/// Version 2 added `access_requests.log_seq`, version 3 the table `stop_records` (stops with ids and levels: a
/// gateway of version 2 would not read them, so it must refuse such a store); older stores are migrated when a
/// gateway opens them. The table `rounds` came later within version 3: a gateway that does not know it keeps no
/// rounds and decides every round as a new call, which is safe, so it needs no new version.
/// So did `bundle_revision` (the bundle revision in force, which refuses rollbacks) and `log_heads` (the log's signed
/// heads), made when a gateway opens a store without them: a gateway that does not know them serves bundles and
/// writes the log as before, and the log's chain stays what `remit audit verify` checks. So did the data sets
/// (`entities`, `tuples`, `data_state`; docs/gateway.md "Data sets"): a gateway that does not know them fills no
/// data into requests, and a rule that reads data then fails closed (its value is missing). Version 4 keeps a
/// fact's version with its type (`facts.version` without affinity: the `INTEGER` column of versions 1 to 3 turned
/// the string `"1e3"` into the number 1000 and `"3.3"` into a real no read accepted), binds approvals to the agent
/// they were minted for (`approvals.agent`) and records when one was consumed and what an access request's call
/// used before (`approvals.consumed_at`, `access_requests.earlier`); a gateway of version 3 would present an
/// approval to every holder, so it must refuse such a store. `published_bundles` (bundles published in the store,
/// `remit bundle publish`) came later within version 4: a gateway that does not know it serves its policy files
/// as before. So did `grants` (instances of templates granted at run time, docs/grants-design.md): a gateway that
/// does not know it serves policies without templates as before, and decides nothing under an instance.
const SCHEMA_VERSION: i64 = 4;

// The columns' types, audited for SQLite's type affinity: a text bound to a column of `INTEGER`, `REAL` or
// `NUMERIC` affinity that looks like a number is stored as a number. Every column holding text that comes from
// outside (names, ids, targets, JSON) is `TEXT`, which never converts a text; every `INTEGER` column is bound
// integers only (times, counts, flags, sequence numbers); `facts.version`, a number or a text, is `BLOB` (no
// affinity: a value is stored as bound) and checked to be one of the two (tests/gateway_store.rs audits it).

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, mandate TEXT NOT NULL, issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL, tool TEXT, target TEXT, digest TEXT, manifest TEXT,
  single_use INTEGER NOT NULL, consumed INTEGER NOT NULL DEFAULT 0, approver TEXT NOT NULL,
  access_request TEXT, consumed_by TEXT, consumed_at INTEGER, agent TEXT);
CREATE INDEX IF NOT EXISTS approvals_live ON approvals (mandate, consumed, expires_at);
CREATE INDEX IF NOT EXISTS approvals_by_request ON approvals (access_request);
CREATE TABLE IF NOT EXISTS counters (
  counter TEXT NOT NULL, window TEXT NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (counter, window));
CREATE TABLE IF NOT EXISTS stops (mandate TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS stop_records (id TEXT PRIMARY KEY, level TEXT NOT NULL, mandate TEXT, principal TEXT);
CREATE TABLE IF NOT EXISTS facts (name TEXT PRIMARY KEY, version BLOB NOT NULL
  CHECK (typeof(version) IN ('integer', 'text')));
CREATE TABLE IF NOT EXISTS operations (
  operation TEXT NOT NULL, decision_id TEXT NOT NULL, tool TEXT NOT NULL, time INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS operations_by_id ON operations (operation);
CREATE TABLE IF NOT EXISTS access_requests (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  principal TEXT, agent TEXT NOT NULL, credential TEXT, mandate TEXT NOT NULL, tool TEXT NOT NULL, target TEXT,
  digest TEXT NOT NULL, manifest TEXT, arguments TEXT NOT NULL, missing_approvals TEXT NOT NULL, reasons TEXT NOT NULL, chain TEXT NOT NULL,
  decision_id TEXT NOT NULL, key TEXT NOT NULL, decided_by TEXT, decided_at INTEGER, log_seq INTEGER, earlier TEXT);
CREATE INDEX IF NOT EXISTS access_requests_key ON access_requests (key, status);
CREATE TABLE IF NOT EXISTS rounds (key TEXT PRIMARY KEY, carried TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS bundle_revision (
  id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER NOT NULL, policy TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_heads (
  seq INTEGER NOT NULL, hash TEXT NOT NULL, time INTEGER NOT NULL, key TEXT NOT NULL, signature TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entities (
  type TEXT NOT NULL, id TEXT NOT NULL, origin TEXT NOT NULL, attributes TEXT NOT NULL,
  PRIMARY KEY (type, id, origin)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tuples (
  relation TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, origin TEXT NOT NULL,
  PRIMARY KEY (relation, a, b, origin)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS data_state (
  id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, bundle TEXT);
CREATE TABLE IF NOT EXISTS published_bundles (
  id INTEGER PRIMARY KEY, revision INTEGER NOT NULL, policy TEXT NOT NULL, sha256 TEXT NOT NULL, bytes BLOB NOT NULL,
  published_by TEXT NOT NULL, published_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS grants (
  id TEXT NOT NULL, version INTEGER NOT NULL, template TEXT NOT NULL, principal TEXT NOT NULL, holder TEXT NOT NULL,
  params TEXT NOT NULL, granted_by TEXT NOT NULL, granted_at INTEGER NOT NULL, revoked_at INTEGER,
  current INTEGER NOT NULL, parent TEXT, PRIMARY KEY (id, version)) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS grants_current ON grants (id) WHERE current = 1;
CREATE INDEX IF NOT EXISTS grants_by_holder ON grants (holder) WHERE current = 1 AND revoked_at IS NULL;
CREATE TABLE IF NOT EXISTS log (
  seq INTEGER PRIMARY KEY, time INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, prev TEXT NOT NULL,
  hash TEXT NOT NULL);
";

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Survives a crash of the process (WAL, `synchronous = NORMAL`).
    Process,
    /// Survives a power loss too (`synchronous = FULL`: an fsync per commit).
    Full,
}

#[derive(Debug)]
pub struct SqliteStore {
    /// The connection every transaction runs on (shared with the checkpoint thread, which holds its lock to end a
    /// checkpoint while no transaction runs).
    connection: Arc<Mutex<Connection>>,
    /// The connection that reads the store's version (a store opened with [`SqliteStore::open`]).
    watcher: Option<Mutex<Watcher>>,
    /// Opened by [`SqliteStore::open_existing`]: transactions are read transactions.
    read_only: bool,
    /// Dropping it stops the checkpoint thread.
    _checkpointer: Option<std::sync::mpsc::Sender<()>>,
}

/// How often the checkpoint thread runs a passive checkpoint.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// The WAL size, in pages, past which a committing transaction checkpoints by itself (SQLite's default: 1,000).
const WAL_AUTOCHECKPOINT: i64 = 10_000;
/// The WAL size, in frames, from which the checkpoint thread ends a checkpoint under the writer's lock.
const RESTART_FRAMES: i64 = 4_000;

/// Starts the checkpoint thread of the store at `path`, which runs every [`CHECKPOINT_EVERY`] until the returned
/// sender is dropped:
///
/// 1. a passive checkpoint on its own connection: it copies the frames committed so far into the database file
///    while the writer goes on (it never blocks the writer);
/// 2. when that copied frames, an fsync of the database file from the thread (`sync_data`, the inode's dirty pages
///    whatever descriptor wrote them);
/// 3. once the WAL holds [`RESTART_FRAMES`] frames, one more passive checkpoint while it holds the lock of `writer`
///    (the store's connection), so that no transaction appends meanwhile: it copies the few frames committed since
///    step 1, syncs the database file (little is left to write: step 2) and so ends, and the next write transaction
///    starts the WAL again from its beginning (with an fsync of the WAL's new header, SQLite's own).
///
/// Without steps 2 and 3 a passive checkpoint seldom ended under a steady stream of commits (one came while it
/// copied), so it never synced the database file and the WAL never started again: at 10,000 frames a commit
/// checkpointed by itself, with an fsync of the whole 40 MB copied since the last one (10–20 ms on this machine's
/// disk) while every decision waited (BENCHMARKS.md, "Gateway over HTTP"; the test
/// `under_a_steady_stream_of_commits_the_wal_starts_again_before_a_commit_would_checkpoint`).
fn checkpointer(
    path: &Path,
    synchronous: &str,
    writer: Weak<Mutex<Connection>>,
) -> StoreResult<std::sync::mpsc::Sender<()>> {
    let connection = Connection::open(path).map_err(store_err)?;
    connection.pragma_update(None, "synchronous", synchronous).map_err(store_err)?;
    // No waiting for another connection's lock (a checkpoint that cannot have one is tried at the next tick): this
    // connection checkpoints while holding the writer's lock too (step 3), when a wait would hold every decision.
    connection.busy_timeout(std::time::Duration::ZERO).map_err(store_err)?;
    let database =
        std::fs::File::open(path).map_err(|e| StoreError(format!("cannot open `{}`: {e}", path.display())))?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("remit-checkpoint".into())
        .spawn(move || {
            // The frames in the WAL and those copied into the database file.
            let passive = |connection: &Connection| {
                connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                    Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
                })
            };
            // What was synced last, and the WAL's frames when a checkpoint was last ended under the lock (the WAL
            // starts again at the next write; until one, there is nothing to end).
            let (mut synced, mut ended) = (0, 0);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY) {
                // A failed checkpoint is retried at the next tick; the writer's own checkpoints remain.
                let Ok((frames, copied)) = passive(&connection) else { continue };
                if copied > 0 && copied != synced && database.sync_data().is_ok() {
                    synced = copied;
                }
                // `frames` is the WAL as the checkpoint found it when it began: commits that came while it copied are
                // not in it, so that `copied == frames` does not mean the checkpoint reached the WAL's end.
                if frames >= RESTART_FRAMES && frames != ended {
                    let Some(writer) = writer.upgrade() else { return };
                    let _idle = writer.lock().unwrap_or_else(|p| p.into_inner());
                    if let Ok((frames, _)) = passive(&connection) {
                        ended = frames;
                    }
                }
            }
        })
        .map_err(|e| StoreError(format!("cannot start the checkpoint thread: {e}")))?;
    Ok(stop)
}

/// How the store's version is read: from the wal-index header ([`WalIndexHeader`], which keeps the connection that
/// mapped it), else with `PRAGMA data_version` on a connection of its own. One or the other for the store's life, so
/// two versions are never compared across the two.
#[derive(Debug)]
enum Watcher {
    Header(WalIndexHeader),
    Pragma(Connection),
}

impl Watcher {
    fn open(path: &Path) -> StoreResult<Watcher> {
        let connection = Connection::open(path).map_err(store_err)?;
        connection.busy_timeout(std::time::Duration::from_secs(5)).map_err(store_err)?;
        connection.pragma_update(None, "query_only", true).map_err(store_err)?;
        // A first read maps the wal-index.
        let mode: String = connection.pragma_query_value(None, "journal_mode", |row| row.get(0)).map_err(store_err)?;
        connection.query_row("PRAGMA data_version", [], |_| Ok(())).map_err(store_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Ok(Watcher::Pragma(connection));
        }
        Ok(WalIndexHeader::of(connection).map_or_else(Watcher::Pragma, Watcher::Header))
    }

    fn version(&self) -> Option<u64> {
        match self {
            Watcher::Header(header) => header.version(),
            Watcher::Pragma(connection) => {
                let version = connection.prepare_cached("PRAGMA data_version");
                version.and_then(|mut s| s.query_row([], |row| row.get(0))).ok().map(|v: i64| v as u64)
            }
        }
    }
}

fn store_err(e: rusqlite::Error) -> StoreError {
    StoreError(e.to_string())
}

impl SqliteStore {
    /// Opens (creating it when absent) the store at `path`.
    pub fn open(path: &Path, durability: Durability) -> StoreResult<SqliteStore> {
        let connection = Connection::open(path).map_err(store_err)?;
        let mut store = SqliteStore::setup(connection, durability)?;
        let synchronous = if durability == Durability::Full { "FULL" } else { "NORMAL" };
        store._checkpointer = Some(checkpointer(path, synchronous, Arc::downgrade(&store.connection))?);
        store.watcher = Some(Mutex::new(Watcher::open(path)?));
        Ok(store)
    }

    /// Opens an existing store for reading and checking (e.g. `remit audit verify`, also while a gateway runs):
    /// creates nothing, changes nothing, and fails when the file is not a store of this version.
    pub fn open_existing(path: &Path) -> StoreResult<SqliteStore> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(store_err)?;
        connection.busy_timeout(std::time::Duration::from_secs(5)).map_err(store_err)?;
        let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(store_err)?;
        // The log, which is what such a reader reads, is the same in versions 1 to 3.
        if !(1..=SCHEMA_VERSION).contains(&version) {
            return Err(StoreError(format!("not a remit store of schema version {SCHEMA_VERSION} (found {version})")));
        }
        let connection = Arc::new(Mutex::new(connection));
        Ok(SqliteStore { connection, watcher: None, read_only: true, _checkpointer: None })
    }

    fn setup(connection: Connection, durability: Durability) -> StoreResult<SqliteStore> {
        connection.busy_timeout(std::time::Duration::from_secs(5)).map_err(store_err)?;
        connection.pragma_update(None, "journal_mode", "WAL").map_err(store_err)?;
        let synchronous = match durability {
            Durability::Process => "NORMAL",
            Durability::Full => "FULL",
        };
        connection.pragma_update(None, "synchronous", synchronous).map_err(store_err)?;
        connection.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT).map_err(store_err)?;
        // The query planner stability guarantee: a cached statement's plan never depends on the values bound to it.
        // Without it (SQLite built with STAT4, as the bundled one is) binding a parameter the planner looked at
        // expires the statement, and `live_approvals` was compiled again on every decision (a third of its time).
        connection.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(store_err)?;
        let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(store_err)?;
        let tables: i64 = connection
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |row| row.get(0))
            .map_err(store_err)?;
        if (1..SCHEMA_VERSION).contains(&version) {
            upgrade(&connection).map_err(store_err)?;
        } else if version != SCHEMA_VERSION && (version != 0 || tables != 0) {
            return Err(StoreError(format!(
                "the store has schema version {version} (or is not a remit store); this gateway uses version \
                 {SCHEMA_VERSION}"
            )));
        }
        connection.execute_batch(SCHEMA).map_err(store_err)?;
        add_grants_parent(&connection).map_err(store_err)?;
        connection.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(store_err)?;
        let connection = Arc::new(Mutex::new(connection));
        Ok(SqliteStore { connection, watcher: None, read_only: false, _checkpointer: None })
    }

    /// Runs raw SQL on the store (tests use it to tamper with the log, or to break the store).
    pub fn execute_raw(&self, sql: &str) -> StoreResult<()> {
        self.lock().execute_batch(sql).map_err(store_err)
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no open transaction behind (the guard's drop rolls back), so the
        // connection is still usable.
        self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Upgrades a store of schema version 1, 2 or 3 to version 4 in one transaction (another gateway opening it at the
/// same time waits, then finds it upgraded). The facts table is made again without affinity, keeping every version
/// as it was stored; a version SQLite had turned into a real (a string such as `"3.3"`, which made every read of
/// the state fail) cannot be given back its text, so it is dropped — the fact is no longer published, and a rule
/// pinned to it fails closed until it is published again — with a `fact` entry in the log saying so. A string such
/// as `"1e3"` that version 3 stored as the number 1000 cannot be told from a published 1000 and stays a number.
/// Approvals get the agent of the access request they answered.
fn upgrade(connection: &Connection) -> rusqlite::Result<()> {
    connection.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if version >= SCHEMA_VERSION {
            return Ok(());
        }
        if version == 1 {
            connection.execute_batch("ALTER TABLE access_requests ADD COLUMN log_seq INTEGER")?;
        }
        let mut lost = connection.prepare(
            "SELECT name, CAST(version AS TEXT) FROM facts WHERE typeof(version) NOT IN ('integer', 'text') \
             ORDER BY name",
        )?;
        let lost: Vec<(String, String)> =
            lost.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
        // Each column added only where it is missing (a store written by a version 4 gateway and marked older, as
        // tests make them, has them).
        for (table, column) in
            [("approvals", "consumed_at INTEGER"), ("approvals", "agent TEXT"), ("access_requests", "earlier TEXT")]
        {
            let name = column.split(' ').next().unwrap_or(column);
            let present: i64 = connection.query_row(
                &format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"),
                [name],
                |row| row.get(0),
            )?;
            if present == 0 {
                connection.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column}"))?;
            }
        }
        connection.execute_batch(
            "UPDATE approvals SET agent = (SELECT agent FROM access_requests WHERE access_requests.id = \
               approvals.access_request) WHERE agent IS NULL;
             CREATE TABLE facts_v4 (name TEXT PRIMARY KEY, version BLOB NOT NULL
               CHECK (typeof(version) IN ('integer', 'text')));
             INSERT INTO facts_v4 SELECT name, version FROM facts WHERE typeof(version) IN ('integer', 'text');
             DROP TABLE facts;
             ALTER TABLE facts_v4 RENAME TO facts;",
        )?;
        // The store has no clock of the gateway's; the entry's time is the machine's.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        for (name, stored) in lost {
            let why = "stored as a real by schema version 3, which lost its text: publish it again";
            let body = serde_json::json!({"fact": name, "version": null, "by": "remit store upgrade",
                                          "dropped": stored, "why": why});
            append(connection, now as i64, "fact", &body.to_string())?;
        }
        connection.pragma_update(None, "user_version", SCHEMA_VERSION)
    })();
    match result {
        Ok(()) => connection.execute_batch("COMMIT"),
        Err(e) => {
            let _ = connection.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Gives a `grants` table made before sub-delegation its `parent` column (and the index revoking a parent reads).
/// No new schema version: a gateway that does not know the column fills a sub-delegated instance without its
/// parent, which both engines refuse (`grant.invalid`): it fails closed.
fn add_grants_parent(connection: &Connection) -> rusqlite::Result<()> {
    let present: i64 =
        connection.query_row("SELECT count(*) FROM pragma_table_info('grants') WHERE name = 'parent'", [], |row| {
            row.get(0)
        })?;
    if present == 0 {
        connection.execute_batch("ALTER TABLE grants ADD COLUMN parent TEXT")?;
    }
    connection.execute_batch(
        "CREATE INDEX IF NOT EXISTS grants_by_parent ON grants (parent) WHERE current = 1 AND revoked_at IS NULL",
    )
}

/// Appends a log entry after the head (computing its hash).
fn append(connection: &Connection, time: i64, kind: &str, body: &str) -> rusqlite::Result<LogEntry> {
    let head: Option<(i64, String)> = connection
        .prepare_cached("SELECT seq, hash FROM log ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (last, prev) = head.map_or((0, GENESIS.to_string()), |(seq, hash)| (seq as u64, hash));
    let seq = last + 1;
    let hash = entry_hash(&prev, seq, time, kind, body);
    connection
        .prepare_cached("INSERT INTO log (seq, time, kind, body, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
        .execute(params![seq as i64, time, kind, body, prev, hash])?;
    Ok(LogEntry {
        seq,
        writer: String::new(),
        gseq: seq,
        time,
        kind: kind.to_string(),
        body: body.to_string(),
        prev,
        hash,
    })
}

impl Store for SqliteStore {
    fn begin(&self) -> StoreResult<Box<dyn Tx + '_>> {
        let connection = self.lock();
        let begin = if self.read_only { "BEGIN DEFERRED" } else { "BEGIN IMMEDIATE" };
        connection.prepare_cached(begin).and_then(|mut s| s.execute([])).map_err(store_err)?;
        Ok(Box::new(SqliteTx { connection, open: true }))
    }

    fn begin_read(&self) -> StoreResult<Box<dyn Tx + '_>> {
        // No write lock (two fewer `fcntl` calls on the WAL index, to take it and to give it back).
        let connection = self.lock();
        connection.prepare_cached("BEGIN DEFERRED").and_then(|mut s| s.execute([])).map_err(store_err)?;
        Ok(Box::new(SqliteTx { connection, open: true }))
    }

    fn version(&self) -> Option<u64> {
        self.watcher.as_ref()?.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).version()
    }
}

struct SqliteTx<'a> {
    connection: MutexGuard<'a, Connection>,
    open: bool,
}

impl SqliteTx<'_> {
    /// Whether the store has `table`: a store no gateway of this version opened (read by `remit audit`, which
    /// changes nothing) may not.
    fn has_table(&self, table: &str) -> StoreResult<bool> {
        self.connection
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |row| {
                row.get::<_, i64>(0)
            })
            .map(|n| n > 0)
            .map_err(store_err)
    }
}

/// The columns a [`GrantRecord`] is read from ([`grant_of`]).
const GRANT_COLUMNS: &str =
    "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent FROM grants";

fn grant_of(row: &Row<'_>) -> rusqlite::Result<GrantRecord> {
    let params: String = row.get(5)?;
    let params = match remit_lang::json::parse_stored(&params) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return Err(rusqlite::Error::InvalidColumnType(5, "params".into(), rusqlite::types::Type::Text)),
    };
    Ok(GrantRecord {
        id: row.get(0)?,
        version: row.get::<_, i64>(1)? as u64,
        template: row.get(2)?,
        principal: row.get(3)?,
        holder: row.get(4)?,
        params,
        granted_by: row.get(6)?,
        granted_at: row.get(7)?,
        revoked_at: row.get(8)?,
        parent: row.get(9)?,
    })
}

impl SqliteTx<'_> {
    fn grants_where(&self, sql: &str, params: impl rusqlite::Params) -> StoreResult<Vec<GrantRecord>> {
        let mut statement = self.connection.prepare_cached(sql).map_err(store_err)?;
        let rows = statement.query_map(params, grant_of).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.connection.execute_batch("ROLLBACK");
        }
    }
}

fn approval_of(row: &Row<'_>) -> rusqlite::Result<StoredApproval> {
    Ok(StoredApproval {
        id: row.get(0)?,
        kind: row.get(1)?,
        mandate: row.get(2)?,
        issued_at: row.get(3)?,
        expires_at: row.get(4)?,
        tool: row.get(5)?,
        target: row.get(6)?,
        digest: row.get(7)?,
        manifest: row.get(8)?,
        single_use: row.get(9)?,
        consumed: row.get(10)?,
        approver: row.get(11)?,
        access_request: row.get(12)?,
        consumed_by: row.get(13)?,
        consumed_at: row.get(14)?,
        agent: row.get(15)?,
    })
}

macro_rules! approval_columns {
    () => {
        "id, kind, mandate, issued_at, expires_at, tool, target, digest, manifest, single_use, consumed, approver, \
         access_request, consumed_by, consumed_at, agent"
    };
}
const APPROVAL_COLUMNS: &str = approval_columns!();

const REQUEST_COLUMNS: &str = "id, status, created_at, expires_at, principal, agent, credential, mandate, tool, \
     target, digest, manifest, arguments, missing_approvals, reasons, chain, decision_id, key, decided_by, decided_at, \
     log_seq, earlier";

/// [`REQUEST_COLUMNS`] for a list: the arguments' JSON text cut at [`LIST_ARGUMENTS_CHARS`] characters (SQLite's
/// `substr` and `length` count the characters of a text), and its whole length last.
fn listed_columns() -> String {
    format!(
        "id, status, created_at, expires_at, principal, agent, credential, mandate, tool, target, digest, manifest, \
         substr(arguments, 1, {LIST_ARGUMENTS_CHARS}), missing_approvals, reasons, chain, decision_id, key, \
         decided_by, decided_at, log_seq, earlier, length(arguments)"
    )
}

/// A JSON column, read with the project's parser: the values hold request data, whose keys serde_json's
/// deserializer would misread (see crates/remit-lang/src/json.rs).
fn json_column(row: &Row<'_>, index: usize) -> rusqlite::Result<serde_json::Value> {
    let text: String = row.get(index)?;
    remit_lang::json::parse_stored(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

fn strings_column(row: &Row<'_>, index: usize) -> rusqlite::Result<Vec<String>> {
    serde_json::from_value(json_column(row, index)?)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

fn request_of(row: &Row<'_>) -> rusqlite::Result<AccessRequest> {
    request_from(row, false)
}

/// An access request read with [`listed_columns`]: arguments longer than [`LIST_ARGUMENTS_CHARS`] characters are
/// the first that many, as a string, and `arguments_truncated` their length.
fn listed_request_of(row: &Row<'_>) -> rusqlite::Result<AccessRequest> {
    request_from(row, true)
}

fn request_from(row: &Row<'_>, listed: bool) -> rusqlite::Result<AccessRequest> {
    let length: Option<i64> = if listed { row.get(22)? } else { None };
    let cut = length.filter(|n| *n as usize > LIST_ARGUMENTS_CHARS);
    let arguments = match cut {
        Some(_) => serde_json::Value::String(row.get(12)?),
        None => json_column(row, 12)?,
    };
    let earlier: Option<String> = row.get(21)?;
    let earlier = match earlier {
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(21, rusqlite::types::Type::Text, Box::new(e)))?,
        None => Vec::new(),
    };
    Ok(AccessRequest {
        id: row.get(0)?,
        status: row.get(1)?,
        created_at: row.get(2)?,
        expires_at: row.get(3)?,
        principal: row.get(4)?,
        agent: row.get(5)?,
        credential: row.get(6)?,
        mandate: row.get(7)?,
        tool: row.get(8)?,
        target: row.get(9)?,
        digest: row.get(10)?,
        manifest: row.get(11)?,
        arguments,
        missing_approvals: json_column(row, 13)?,
        reasons: strings_column(row, 14)?,
        chain: strings_column(row, 15)?,
        decision_id: row.get(16)?,
        key: row.get(17)?,
        decided_by: row.get(18)?,
        decided_at: row.get(19)?,
        log_seq: row.get::<_, Option<i64>>(20)?.map(|seq| seq as u64),
        log_writer: None,
        earlier,
        arguments_truncated: cut.map(|n| n as u64),
    })
}

fn log_of(row: &Row<'_>) -> rusqlite::Result<LogEntry> {
    let seq: i64 = row.get(0)?;
    // The one-writer log: the chain of writer `""`, in the order of its own sequence numbers.
    Ok(LogEntry {
        seq: seq as u64,
        writer: String::new(),
        gseq: seq as u64,
        time: row.get(1)?,
        kind: row.get(2)?,
        body: row.get(3)?,
        prev: row.get(4)?,
        hash: row.get(5)?,
    })
}

impl Tx for SqliteTx<'_> {
    fn stops(&mut self) -> StoreResult<Vec<String>> {
        let mut statement =
            self.connection.prepare_cached("SELECT mandate FROM stops ORDER BY mandate").map_err(store_err)?;
        let rows = statement.query_map([], |row| row.get(0)).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn stop_records(&mut self) -> StoreResult<Vec<StopRecord>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT id, level, mandate, principal FROM stop_records ORDER BY id")
            .map_err(store_err)?;
        let rows = statement
            .query_map([], |row| {
                Ok(StopRecord { id: row.get(0)?, level: row.get(1)?, mandate: row.get(2)?, principal: row.get(3)? })
            })
            .map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn decision_state(&mut self) -> StoreResult<DecisionState> {
        // One statement for all three (each costs a step through SQLite on every decision). Sorted here, as the
        // single reads sort them (bytewise: SQLite's BINARY collation).
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT 0, mandate, NULL, NULL, NULL FROM stops UNION ALL SELECT 1, name, version, NULL, NULL FROM facts \
                 UNION ALL SELECT 2, id, level, mandate, principal FROM stop_records",
            )
            .map_err(store_err)?;
        let mut rows = statement.query([]).map_err(store_err)?;
        let mut state = DecisionState::default();
        while let Some(row) = rows.next().map_err(store_err)? {
            let name: String = row.get(1).map_err(store_err)?;
            match row.get::<_, i64>(0).map_err(store_err)? {
                0 => state.stops.push(name),
                1 => state.facts.push((name, fact_version(row, 2).map_err(store_err)?)),
                _ => state.records.push(StopRecord {
                    id: name,
                    level: row.get(2).map_err(store_err)?,
                    mandate: row.get(3).map_err(store_err)?,
                    principal: row.get(4).map_err(store_err)?,
                }),
            }
        }
        state.stops.sort_unstable();
        state.facts.sort_unstable();
        state.records.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        Ok(state)
    }

    fn facts(&mut self) -> StoreResult<Vec<(String, FactVersion)>> {
        let mut statement =
            self.connection.prepare_cached("SELECT name, version FROM facts ORDER BY name").map_err(store_err)?;
        let rows =
            statement.query_map([], |row| Ok((row.get::<_, String>(0)?, fact_version(row, 1)?))).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn stops_and_facts(&mut self) -> StoreResult<(Vec<String>, Vec<(String, FactVersion)>)> {
        // One statement for both (each costs a step through SQLite on every decision): the stops' rows have no
        // version. Sorted here, as `stops` and `facts` sort them (by name, bytewise: SQLite's BINARY collation).
        let mut statement = self
            .connection
            .prepare_cached("SELECT 0, mandate, NULL FROM stops UNION ALL SELECT 1, name, version FROM facts")
            .map_err(store_err)?;
        let mut rows = statement.query([]).map_err(store_err)?;
        let (mut stops, mut facts) = (Vec::new(), Vec::new());
        while let Some(row) = rows.next().map_err(store_err)? {
            let name: String = row.get(1).map_err(store_err)?;
            match row.get::<_, i64>(0).map_err(store_err)? {
                0 => stops.push(name),
                _ => facts.push((name, fact_version(row, 2).map_err(store_err)?)),
            }
        }
        stops.sort_unstable();
        facts.sort_unstable();
        Ok((stops, facts))
    }

    fn live_approvals(&mut self, mandates: &[String], now: i64) -> StoreResult<Vec<StoredApproval>> {
        let mut statement = self
            .connection
            // A literal, not `format!`: this runs on every decision.
            .prepare_cached(concat!(
                "SELECT ",
                approval_columns!(),
                " FROM approvals WHERE mandate = ?1 AND consumed = 0 AND expires_at > ?2 ORDER BY id"
            ))
            .map_err(store_err)?;
        let mut out = Vec::new();
        for mandate in mandates {
            let rows = statement.query_map(params![mandate, now], approval_of).map_err(store_err)?;
            for row in rows {
                out.push(row.map_err(store_err)?);
            }
        }
        Ok(out)
    }

    fn approvals_of_request(&mut self, access_request: &str) -> StoreResult<Vec<StoredApproval>> {
        let mut statement = self
            .connection
            .prepare_cached(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE access_request = ?1 ORDER BY id"))
            .map_err(store_err)?;
        let rows = statement.query_map(params![access_request], approval_of).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn approval(&mut self, id: &str) -> StoreResult<Option<StoredApproval>> {
        self.connection
            .query_row(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"), params![id], approval_of)
            .optional()
            .map_err(store_err)
    }

    fn counter(&mut self, counter: &str, window: &str) -> StoreResult<u64> {
        let value: Option<i64> = self
            .connection
            .prepare_cached("SELECT value FROM counters WHERE counter = ?1 AND window = ?2")
            .and_then(|mut s| s.query_row(params![counter, window], |row| row.get(0)).optional())
            .map_err(store_err)?;
        Ok(value.unwrap_or(0) as u64)
    }

    fn access_request(&mut self, id: &str) -> StoreResult<Option<AccessRequest>> {
        self.connection
            .query_row(&format!("SELECT {REQUEST_COLUMNS} FROM access_requests WHERE id = ?1"), params![id], request_of)
            .optional()
            .map_err(store_err)
    }

    fn pending_access_request(&mut self, key: &str, now: i64) -> StoreResult<Option<AccessRequest>> {
        self.connection
            .query_row(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM access_requests WHERE key = ?1 AND status = 'pending' \
                     AND expires_at > ?2 ORDER BY created_at DESC LIMIT 1"
                ),
                params![key, now],
                request_of,
            )
            .optional()
            .map_err(store_err)
    }

    fn access_requests(&mut self, status: Option<&str>) -> StoreResult<Vec<AccessRequest>> {
        let mut statement = self
            .connection
            .prepare_cached(&format!(
                "SELECT {REQUEST_COLUMNS} FROM access_requests WHERE ?1 IS NULL OR status = ?1 \
                 ORDER BY created_at DESC, id LIMIT 1000"
            ))
            .map_err(store_err)?;
        let rows = statement.query_map(params![status], request_of).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn access_request_page(
        &mut self,
        status: Option<&str>,
        after: Option<&Cursor>,
        limit: usize,
        keep: &mut dyn FnMut(&AccessRequest) -> bool,
    ) -> StoreResult<Page> {
        // Every request after the cursor is looked at (its arguments cut, so a long one costs no memory) until `keep`
        // admitted one more than the page holds: who may answer a request depends on the policy in force (its
        // kinds' `approved by`), which SQL does not know.
        let mut statement = self
            .connection
            .prepare_cached(&format!(
                "SELECT {} FROM access_requests WHERE (?1 IS NULL OR status = ?1) \
                 AND (?2 IS NULL OR created_at < ?2 OR (created_at = ?2 AND id > ?3)) ORDER BY created_at DESC, id",
                listed_columns()
            ))
            .map_err(store_err)?;
        let (at, id) = (after.map(|c| c.created_at), after.map(|c| c.id.as_str()));
        let mut rows = statement.query(params![status, at, id]).map_err(store_err)?;
        let mut page = Page::default();
        while let Some(row) = rows.next().map_err(store_err)? {
            let request = listed_request_of(row).map_err(store_err)?;
            if !keep(&request) {
                continue;
            }
            if page.requests.len() == limit {
                page.next = page.requests.last().map(Cursor::of);
                break;
            }
            page.requests.push(request);
        }
        Ok(page)
    }

    fn earlier_uses(&mut self, key: &str) -> StoreResult<Vec<EarlierUse>> {
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT a.id, a.access_request, a.approver, a.consumed_by, a.consumed_at FROM access_requests r \
                 JOIN approvals a ON a.access_request = r.id WHERE r.key = ?1 AND a.consumed = 1 \
                 ORDER BY a.consumed_at DESC, a.id LIMIT ?2",
            )
            .map_err(store_err)?;
        let rows = statement
            .query_map(params![key, MAX_EARLIER as i64], |row| {
                Ok(EarlierUse {
                    approval: row.get(0)?,
                    access_request: row.get(1)?,
                    approved_by: row.get(2)?,
                    consumed_by: row.get(3)?,
                    consumed_at: row.get(4)?,
                })
            })
            .map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn operations(&mut self, operation: &str) -> StoreResult<Vec<OperationRecord>> {
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT operation, decision_id, tool, time FROM operations WHERE operation = ?1 ORDER BY rowid",
            )
            .map_err(store_err)?;
        let rows = statement
            .query_map(params![operation], |row| {
                Ok(OperationRecord {
                    operation: row.get(0)?,
                    decision_id: row.get(1)?,
                    tool: row.get(2)?,
                    time: row.get(3)?,
                })
            })
            .map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn log_head(&mut self) -> StoreResult<(u64, String)> {
        let head: Option<(i64, String)> = self
            .connection
            .prepare_cached("SELECT seq, hash FROM log ORDER BY seq DESC LIMIT 1")
            .and_then(|mut s| s.query_row([], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(store_err)?;
        Ok(head.map_or((0, GENESIS.to_string()), |(seq, hash)| (seq as u64, hash)))
    }

    fn log_entries(&mut self, from: u64, limit: usize) -> StoreResult<Vec<LogEntry>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT seq, time, kind, body, prev, hash FROM log WHERE seq >= ?1 ORDER BY seq LIMIT ?2")
            .map_err(store_err)?;
        let rows = statement.query_map(params![from as i64, limit as i64], log_of).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn keep_round(&mut self, key: &str, carried: &str, expires_at: i64, now: i64) -> StoreResult<()> {
        self.connection
            .prepare_cached("DELETE FROM rounds WHERE expires_at <= ?1")
            .and_then(|mut s| s.execute(params![now]))
            .and_then(|_| self.connection.prepare_cached("INSERT OR REPLACE INTO rounds VALUES (?1, ?2, ?3)"))
            .and_then(|mut s| s.execute(params![key, carried, expires_at]))
            .map(|_| ())
            .map_err(store_err)
    }

    fn take_round(&mut self, key: &str, now: i64) -> StoreResult<Option<String>> {
        self.connection
            .prepare_cached("DELETE FROM rounds WHERE key = ?1 RETURNING carried, expires_at")
            .and_then(|mut s| {
                s.query_row(params![key], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))).optional()
            })
            .map(|round| round.filter(|(_, expires_at)| *expires_at > now).map(|(carried, _)| carried))
            .map_err(store_err)
    }

    fn consume_approval(&mut self, id: &str, decision: &str, at: i64) -> StoreResult<bool> {
        let changed = self
            .connection
            .prepare_cached(
                "UPDATE approvals SET consumed = 1, consumed_by = ?2, consumed_at = ?3 WHERE id = ?1 AND consumed = 0",
            )
            .and_then(|mut s| s.execute(params![id, decision, at]))
            .map_err(store_err)?;
        Ok(changed == 1)
    }

    fn increment_counter(&mut self, counter: &str, window: &str) -> StoreResult<u64> {
        let value: i64 = self
            .connection
            .prepare_cached(
                "INSERT INTO counters (counter, window, value) VALUES (?1, ?2, 1) \
                 ON CONFLICT (counter, window) DO UPDATE SET value = value + 1 RETURNING value",
            )
            .and_then(|mut s| s.query_row(params![counter, window], |row| row.get(0)))
            .map_err(store_err)?;
        Ok(value as u64)
    }

    fn record_operation(&mut self, record: &OperationRecord) -> StoreResult<()> {
        self.connection
            .prepare_cached("INSERT INTO operations (operation, decision_id, tool, time) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut s| s.execute(params![record.operation, record.decision_id, record.tool, record.time]))
            .map_err(store_err)?;
        Ok(())
    }

    fn insert_approval(&mut self, a: &StoredApproval) -> StoreResult<()> {
        self.connection
            .execute(
                &format!(
                    "INSERT INTO approvals ({APPROVAL_COLUMNS}) \
                     VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)"
                ),
                params![
                    a.id,
                    a.kind,
                    a.mandate,
                    a.issued_at,
                    a.expires_at,
                    a.tool,
                    a.target,
                    a.digest,
                    a.manifest,
                    a.single_use,
                    a.consumed,
                    a.approver,
                    a.access_request,
                    a.consumed_by,
                    a.consumed_at,
                    a.agent
                ],
            )
            .map_err(store_err)?;
        Ok(())
    }

    fn insert_access_request(&mut self, r: &AccessRequest) -> StoreResult<()> {
        self.connection
            .execute(
                &format!(
                    "INSERT INTO access_requests ({REQUEST_COLUMNS}) \
                     VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)"
                ),
                params![
                    r.id,
                    r.status,
                    r.created_at,
                    r.expires_at,
                    r.principal,
                    r.agent,
                    r.credential,
                    r.mandate,
                    r.tool,
                    r.target,
                    r.digest,
                    r.manifest,
                    json(&r.arguments),
                    json(&r.missing_approvals),
                    json(&r.reasons),
                    json(&r.chain),
                    r.decision_id,
                    r.key,
                    r.decided_by,
                    r.decided_at,
                    r.log_seq.map(|seq| seq as i64),
                    (!r.earlier.is_empty()).then(|| json(&r.earlier))
                ],
            )
            .map_err(store_err)?;
        Ok(())
    }

    fn decide_access_request(&mut self, id: &str, status: &str, by: &str, at: i64) -> StoreResult<()> {
        self.connection
            .execute(
                "UPDATE access_requests SET status = ?2, decided_by = ?3, decided_at = ?4 WHERE id = ?1",
                params![id, status, by, at],
            )
            .map_err(store_err)?;
        Ok(())
    }

    fn set_stop(&mut self, mandate: &str, active: bool) -> StoreResult<()> {
        let sql = if active {
            "INSERT OR IGNORE INTO stops (mandate) VALUES (?1)"
        } else {
            "DELETE FROM stops WHERE mandate = ?1"
        };
        self.connection.execute(sql, params![mandate]).map_err(store_err)?;
        Ok(())
    }

    fn set_stop_record(&mut self, stop: &StopRecord) -> StoreResult<()> {
        self.connection
            .execute(
                "INSERT OR REPLACE INTO stop_records (id, level, mandate, principal) VALUES (?1, ?2, ?3, ?4)",
                params![stop.id, stop.level, stop.mandate, stop.principal],
            )
            .map_err(store_err)?;
        Ok(())
    }

    fn clear_stop_record(&mut self, id: &str) -> StoreResult<bool> {
        let n = self.connection.execute("DELETE FROM stop_records WHERE id = ?1", params![id]).map_err(store_err)?;
        Ok(n > 0)
    }

    fn set_fact(&mut self, name: &str, version: &FactVersion) -> StoreResult<()> {
        // Bound as an integer or a text, and stored as bound: the column has no affinity.
        let version = match version {
            FactVersion::Number(n) => rusqlite::types::Value::Integer(*n as i64),
            FactVersion::Text(text) => rusqlite::types::Value::Text(text.clone()),
        };
        self.connection
            .execute(
                "INSERT INTO facts (name, version) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET version = ?2",
                params![name, version],
            )
            .map_err(store_err)?;
        Ok(())
    }

    fn bundle_revision(&mut self) -> StoreResult<Option<(u64, String)>> {
        self.connection
            .prepare_cached("SELECT revision, policy FROM bundle_revision WHERE id = 1")
            .and_then(|mut s| s.query_row([], |row| Ok((row.get::<_, i64>(0)? as u64, row.get(1)?))).optional())
            .map_err(store_err)
    }

    fn set_bundle_revision(&mut self, revision: u64, policy: &str) -> StoreResult<()> {
        self.connection
            .prepare_cached("INSERT OR REPLACE INTO bundle_revision (id, revision, policy) VALUES (1, ?1, ?2)")
            .and_then(|mut s| s.execute(params![revision as i64, policy]))
            .map(|_| ())
            .map_err(store_err)
    }

    fn publish_bundle(&mut self, bundle: &PublishedBundle) -> StoreResult<u64> {
        // Ids are never reused (no row is ever deleted), so "a higher id" always means "published later".
        self.connection
            .prepare_cached(
                "INSERT INTO published_bundles (revision, policy, sha256, bytes, published_by, published_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    bundle.revision as i64,
                    bundle.policy,
                    bundle.sha256,
                    bundle.bytes,
                    bundle.published_by,
                    bundle.published_at
                ])
            })
            .map_err(store_err)?;
        Ok(self.connection.last_insert_rowid() as u64)
    }

    fn published_bundle_id(&mut self) -> StoreResult<Option<u64>> {
        if !self.has_table("published_bundles")? {
            return Ok(None);
        }
        self.connection
            .query_row("SELECT max(id) FROM published_bundles", [], |row| row.get::<_, Option<i64>>(0))
            .map(|id| id.map(|id| id as u64))
            .map_err(store_err)
    }

    fn published_bundle(&mut self, below: Option<u64>) -> StoreResult<Option<PublishedBundle>> {
        if !self.has_table("published_bundles")? {
            return Ok(None);
        }
        let below = below.map_or(i64::MAX, |id| id.min(i64::MAX as u64) as i64);
        self.connection
            .prepare_cached(
                "SELECT id, revision, policy, sha256, published_by, published_at, bytes FROM published_bundles \
                 WHERE id < ?1 ORDER BY id DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row([below], |row| {
                    Ok(PublishedBundle {
                        id: row.get::<_, i64>(0)? as u64,
                        revision: row.get::<_, i64>(1)? as u64,
                        policy: row.get(2)?,
                        sha256: row.get(3)?,
                        published_by: row.get(4)?,
                        published_at: row.get(5)?,
                        bytes: row.get(6)?,
                    })
                })
                .optional()
            })
            .map_err(store_err)
    }

    fn signed_heads(&mut self) -> StoreResult<Vec<crate::head::SignedHead>> {
        // A store no gateway of this version has opened (read by `remit audit`, which changes nothing) has no table.
        let exists: i64 = self
            .connection
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'log_heads'", [], |row| {
                row.get(0)
            })
            .map_err(store_err)?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        let mut statement = self
            .connection
            .prepare_cached("SELECT seq, hash, time, key, signature FROM log_heads ORDER BY rowid")
            .map_err(store_err)?;
        let rows = statement
            .query_map([], |row| {
                Ok(crate::head::SignedHead {
                    writer: String::new(),
                    seq: row.get::<_, i64>(0)? as u64,
                    hash: row.get(1)?,
                    time: row.get(2)?,
                    key: row.get(3)?,
                    signature: row.get(4)?,
                })
            })
            .map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn insert_signed_head(&mut self, head: &crate::head::SignedHead) -> StoreResult<()> {
        if !head.writer.is_empty() {
            return Err(StoreError("this store keeps one chain: a head of another writer's chain is not its".into()));
        }
        self.connection
            .prepare_cached("INSERT INTO log_heads (seq, hash, time, key, signature) VALUES (?1, ?2, ?3, ?4, ?5)")
            .and_then(|mut s| s.execute(params![head.seq as i64, head.hash, head.time, head.key, head.signature]))
            .map(|_| ())
            .map_err(store_err)
    }

    fn entity(&mut self, kind: &str, id: &str) -> StoreResult<Option<serde_json::Map<String, serde_json::Value>>> {
        // `admin` sorts before `bundle`: its attributes are merged first and win.
        let mut statement = self
            .connection
            .prepare_cached("SELECT attributes FROM entities WHERE type = ?1 AND id = ?2 ORDER BY origin")
            .map_err(store_err)?;
        let mut rows = statement.query(params![kind, id]).map_err(store_err)?;
        let mut merged: Option<serde_json::Map<String, serde_json::Value>> = None;
        while let Some(row) = rows.next().map_err(store_err)? {
            let text: String = row.get(0).map_err(store_err)?;
            let attributes = attributes_of(&text)?;
            let merged = merged.get_or_insert_with(serde_json::Map::new);
            for (name, value) in attributes {
                merged.entry(name).or_insert(value);
            }
        }
        Ok(merged)
    }

    fn holds(&mut self, relation: &str, a: &str, b: &str) -> StoreResult<bool> {
        self.connection
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM tuples WHERE relation = ?1 AND a = ?2 AND b = ?3)")
            .and_then(|mut s| s.query_row(params![relation, a, b], |row| row.get(0)))
            .map_err(store_err)
    }

    fn related(&mut self, relation: &str, a: &str) -> StoreResult<Vec<String>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT DISTINCT b FROM tuples WHERE relation = ?1 AND a = ?2 ORDER BY b")
            .map_err(store_err)?;
        let rows = statement.query_map(params![relation, a], |row| row.get(0)).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn entity_ids(&mut self, kind: &str) -> StoreResult<Vec<String>> {
        // The primary key (type, id, origin) orders the rows by id within a type: a range of the index, no sort.
        let mut statement = self
            .connection
            .prepare_cached("SELECT DISTINCT id FROM entities WHERE type = ?1 ORDER BY id")
            .map_err(store_err)?;
        let rows = statement.query_map(params![kind], |row| row.get(0)).map_err(store_err)?;
        rows.collect::<Result<_, _>>().map_err(store_err)
    }

    fn put_entity(
        &mut self,
        origin: &str,
        kind: &str,
        id: &str,
        attributes: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> StoreResult<bool> {
        let removed = self
            .connection
            .prepare_cached("DELETE FROM entities WHERE type = ?1 AND id = ?2 AND origin = ?3")
            .and_then(|mut s| s.execute(params![kind, id, origin]))
            .map_err(store_err)?;
        if let Some(attributes) = attributes {
            self.connection
                .prepare_cached("INSERT INTO entities (type, id, origin, attributes) VALUES (?1, ?2, ?3, ?4)")
                .and_then(|mut s| s.execute(params![kind, id, origin, json(attributes)]))
                .map_err(store_err)?;
        }
        Ok(removed > 0)
    }

    fn set_tuple(&mut self, origin: &str, relation: &str, a: &str, b: &str, holds: bool) -> StoreResult<bool> {
        let sql = if holds {
            "INSERT OR IGNORE INTO tuples (relation, a, b, origin) VALUES (?1, ?2, ?3, ?4)"
        } else {
            "DELETE FROM tuples WHERE relation = ?1 AND a = ?2 AND b = ?3 AND origin = ?4"
        };
        let changed = self
            .connection
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params![relation, a, b, origin]))
            .map_err(store_err)?;
        // An insert that changed nothing found the tuple there; a delete that changed something did.
        Ok(if holds { changed == 0 } else { changed > 0 })
    }

    fn clear_data(&mut self, origin: &str) -> StoreResult<u64> {
        let entities =
            self.connection.execute("DELETE FROM entities WHERE origin = ?1", params![origin]).map_err(store_err)?;
        let tuples =
            self.connection.execute("DELETE FROM tuples WHERE origin = ?1", params![origin]).map_err(store_err)?;
        Ok((entities + tuples) as u64)
    }

    fn data_state(&mut self) -> StoreResult<DataState> {
        let state: Option<(i64, Option<String>)> = self
            .connection
            .prepare_cached("SELECT version, bundle FROM data_state WHERE id = 1")
            .and_then(|mut s| s.query_row([], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(store_err)?;
        Ok(state.map_or_else(DataState::default, |(version, bundle)| DataState { version: version as u64, bundle }))
    }

    fn set_data_state(&mut self, state: &DataState) -> StoreResult<()> {
        self.connection
            .prepare_cached("INSERT OR REPLACE INTO data_state (id, version, bundle) VALUES (1, ?1, ?2)")
            .and_then(|mut s| s.execute(params![state.version as i64, state.bundle]))
            .map(|_| ())
            .map_err(store_err)
    }

    fn put_grant(&mut self, g: &GrantRecord) -> StoreResult<()> {
        self.connection
            .prepare_cached("UPDATE grants SET current = 0 WHERE id = ?1 AND current = 1")
            .and_then(|mut s| s.execute(params![g.id]))
            .map_err(store_err)?;
        self.connection
            .prepare_cached(
                "INSERT INTO grants (id, version, template, principal, holder, params, granted_by, granted_at, \
                 revoked_at, current, parent) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1, ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    g.id,
                    g.version as i64,
                    g.template,
                    g.principal,
                    g.holder,
                    json(&g.params),
                    g.granted_by,
                    g.granted_at,
                    g.revoked_at,
                    g.parent
                ])
            })
            .map_err(store_err)?;
        Ok(())
    }

    fn revoke_grant(&mut self, id: &str, at: i64) -> StoreResult<bool> {
        let n = self
            .connection
            .prepare_cached("UPDATE grants SET revoked_at = ?2 WHERE id = ?1 AND current = 1 AND revoked_at IS NULL")
            .and_then(|mut s| s.execute(params![id, at]))
            .map_err(store_err)?;
        Ok(n > 0)
    }

    fn grant(&mut self, id: &str) -> StoreResult<Option<GrantRecord>> {
        Ok(self.grants_where(&format!("{GRANT_COLUMNS} WHERE id = ?1 AND current = 1"), params![id])?.pop())
    }

    fn grant_history(&mut self, id: &str) -> StoreResult<Vec<GrantRecord>> {
        self.grants_where(&format!("{GRANT_COLUMNS} WHERE id = ?1 ORDER BY version"), params![id])
    }

    fn grants(&mut self, principal: Option<&str>, holder: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
        let sql = format!(
            "{GRANT_COLUMNS} WHERE current = 1 AND (?1 IS NULL OR principal = ?1) AND (?2 IS NULL OR holder = ?2) \
             ORDER BY id"
        );
        self.grants_where(&sql, params![principal, holder])
    }

    fn active_grants(&mut self, holder: &str) -> StoreResult<Vec<GrantRecord>> {
        let sql = format!("{GRANT_COLUMNS} WHERE holder = ?1 AND current = 1 AND revoked_at IS NULL ORDER BY id");
        self.grants_where(&sql, params![holder])
    }

    fn active_grant(&mut self, id: &str) -> StoreResult<Option<GrantRecord>> {
        let sql = format!("{GRANT_COLUMNS} WHERE id = ?1 AND current = 1 AND revoked_at IS NULL");
        Ok(self.grants_where(&sql, params![id])?.pop())
    }

    fn active_children(&mut self, parent: &str) -> StoreResult<Vec<GrantRecord>> {
        let sql = format!("{GRANT_COLUMNS} WHERE parent = ?1 AND current = 1 AND revoked_at IS NULL ORDER BY id");
        self.grants_where(&sql, params![parent])
    }

    fn append_log(&mut self, time: i64, kind: &str, body: &str) -> StoreResult<LogEntry> {
        append(&self.connection, time, kind, body).map_err(store_err)
    }

    fn savepoint(&mut self) -> StoreResult<()> {
        self.connection.prepare_cached("SAVEPOINT job").and_then(|mut s| s.execute([])).map_err(store_err)?;
        Ok(())
    }

    fn release(&mut self, keep: bool) -> StoreResult<()> {
        if keep {
            self.connection.prepare_cached("RELEASE job").and_then(|mut s| s.execute([])).map_err(store_err)?;
            return Ok(());
        }
        self.connection.execute_batch("ROLLBACK TO job; RELEASE job").map_err(store_err)
    }

    fn commit(mut self: Box<Self>) -> StoreResult<()> {
        self.open = false;
        if let Err(e) = self.connection.prepare_cached("COMMIT").and_then(|mut s| s.execute([])) {
            let _ = self.connection.execute_batch("ROLLBACK");
            return Err(store_err(e));
        }
        Ok(())
    }
}

/// A data set's entity attributes, kept as the text of a JSON object (read with the project's parser).
fn attributes_of(text: &str) -> StoreResult<serde_json::Map<String, serde_json::Value>> {
    match remit_lang::json::parse_stored(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(StoreError("an entity's attributes are not a JSON object".into())),
    }
}

/// A column kept as JSON text.
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serializes")
}

/// A fact's version from column `index`: an integer, or text for a version written as a string.
fn fact_version(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<FactVersion> {
    Ok(match row.get::<_, rusqlite::types::Value>(index)? {
        rusqlite::types::Value::Text(text) => FactVersion::Text(text),
        rusqlite::types::Value::Integer(n) => FactVersion::Number(n as u64),
        other => return Err(rusqlite::Error::InvalidColumnType(index, "version".into(), other.data_type())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new store in a folder of its own (`remit-sqlite-{name}-{pid}`): the folder, the store's file and the store.
    fn new_store(name: &str) -> (std::path::PathBuf, std::path::PathBuf, SqliteStore) {
        let dir = std::env::temp_dir().join(format!("remit-sqlite-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.db");
        let store = SqliteStore::open(&path, Durability::Process).unwrap();
        (dir, path, store)
    }

    /// The store's version changes with every commit, the store's own and another connection's, and not without one.
    #[test]
    fn the_version_changes_with_every_commit() {
        let (dir, path, store) = new_store("version");
        let first = store.version().unwrap();
        assert_eq!(store.version(), Some(first), "no commit, no change");
        let mut tx = store.begin().unwrap();
        tx.set_stop("m", true).unwrap();
        tx.commit().unwrap();
        let second = store.version().unwrap();
        assert_ne!(second, first, "the store's own commit");
        let read = store.begin_read().unwrap();
        drop(read);
        assert_eq!(store.version(), Some(second), "a read commits nothing");
        let other = SqliteStore::open(&path, Durability::Process).unwrap();
        let mut tx = other.begin().unwrap();
        tx.set_stop("m", false).unwrap();
        tx.commit().unwrap();
        assert_ne!(store.version(), Some(second), "another connection's commit");
        assert_eq!(SqliteStore::open_existing(&path).unwrap().version(), None);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The header read while another thread commits as fast as it can: a commit that began after one reading of the
    /// version and ended before the next always changes it (or the reading gives none, a writer caught between the
    /// header's copies), so a decision never keeps what it read across a commit it missed.
    #[test]
    fn no_commit_goes_unseen_by_the_header() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
        let (dir, path, store) = new_store("race");
        let watcher = Watcher::open(&path).unwrap();
        assert_eq!(matches!(watcher, Watcher::Header(_)), cfg!(unix));
        // Commits begun and ended, counted around each.
        let (begun, ended, done) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
        let (mut checked, mut unseen) = (0, 0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..3_000 {
                    begun.fetch_add(1, SeqCst);
                    let mut tx = store.begin().unwrap();
                    tx.set_stop("m", i % 2 == 0).unwrap();
                    tx.commit().unwrap();
                    ended.fetch_add(1, SeqCst);
                }
                done.store(true, SeqCst);
            });
            while !done.load(SeqCst) {
                let before = watcher.version();
                let begun_then = begun.load(SeqCst);
                // Until the next commit has ended (or a moment has passed).
                let wait = std::time::Instant::now() + std::time::Duration::from_millis(2);
                while ended.load(SeqCst) <= begun_then && std::time::Instant::now() < wait && !done.load(SeqCst) {
                    std::hint::spin_loop();
                }
                let ended_now = ended.load(SeqCst);
                let after = watcher.version();
                // Commit `begun_then + 1` began after `before` was read; if it ended before `after` was read, the
                // two must differ.
                if before.is_some() && after.is_some() && ended_now > begun_then {
                    checked += 1;
                    unseen += usize::from(before == after);
                }
            }
        });
        assert_eq!(unseen, 0, "{unseen} of {checked} commits unseen");
        assert!(checked > 0, "no commit fell between two readings");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Both ways of reading the version — the wal-index header (where it can be read: on unix, always here) and
    /// `PRAGMA data_version` — see a commit made by another process, with another build of SQLite (Python's), and
    /// stay the same without one.
    #[test]
    fn the_version_sees_another_process_commit() {
        let (dir, path, store) = new_store("process");
        let header = Watcher::open(&path).unwrap();
        assert_eq!(matches!(header, Watcher::Header(_)), cfg!(unix), "the header is read where it can be");
        let pragma = Watcher::Pragma(Connection::open(&path).unwrap());
        let watchers = [("the header", &header), ("the pragma", &pragma)];
        let before: Vec<Option<u64>> = watchers.iter().map(|(_, w)| w.version()).collect();
        for ((how, watcher), before) in watchers.iter().zip(&before) {
            assert!(before.is_some(), "{how}: a version");
            assert_eq!(&watcher.version(), before, "{how}: no commit, no change");
        }
        let script = "import sqlite3, sys\n\
                      c = sqlite3.connect(sys.argv[1])\n\
                      c.execute(\"INSERT INTO stops (mandate) VALUES ('m')\")\n\
                      c.commit()\n";
        let ran = std::process::Command::new("python3").arg("-c").arg(script).arg(&path).output();
        let ran = ran.expect("python3 runs (scripts/test-deps.sh installs it)");
        assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
        for ((how, watcher), before) in watchers.iter().zip(&before) {
            assert_ne!(&watcher.version(), before, "{how}: another process's commit");
            assert!(watcher.version().is_some(), "{how}: a version after it");
        }
        let stopped = store.begin_read().unwrap().decision_state().unwrap().stops;
        assert_eq!(stopped, vec!["m".to_string()], "the commit was one of this store's");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The audit of the columns' affinity (see the comment on `SCHEMA_VERSION`): every column is `TEXT` but those
    /// bound integers only, and `facts.version`, which has none and takes an integer or a text only.
    #[test]
    fn every_column_has_the_affinity_the_audit_says() {
        let (dir, _, store) = new_store("affinity");
        let integers = [
            "access_requests.created_at",
            "access_requests.decided_at",
            "access_requests.expires_at",
            "access_requests.log_seq",
            "approvals.consumed",
            "approvals.consumed_at",
            "approvals.expires_at",
            "approvals.issued_at",
            "approvals.single_use",
            "bundle_revision.id",
            "bundle_revision.revision",
            "counters.value",
            "data_state.id",
            "data_state.version",
            "grants.current",
            "grants.granted_at",
            "grants.revoked_at",
            "grants.version",
            "log.seq",
            "log.time",
            "log_heads.seq",
            "log_heads.time",
            "operations.time",
            "published_bundles.id",
            "published_bundles.published_at",
            "published_bundles.revision",
            "rounds.expires_at",
        ];
        let connection = store.lock();
        let tables: Vec<String> = {
            let mut tables = connection.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").unwrap();
            let rows = tables.query_map([], |row| row.get(0)).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let mut seen = 0;
        for table in tables {
            let mut columns =
                connection.prepare(&format!("SELECT name, type FROM pragma_table_info('{table}')")).unwrap();
            let columns = columns.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)));
            for (column, declared) in columns.unwrap().map(Result::unwrap) {
                let name = format!("{table}.{column}");
                let expected = match name.as_str() {
                    // No affinity: a fact's version as bound; a published bundle's bytes, bound as a blob.
                    "facts.version" | "published_bundles.bytes" => "BLOB",
                    name if integers.contains(&name) => "INTEGER",
                    _ => "TEXT",
                };
                assert_eq!(declared, expected, "{name}");
                seen += usize::from(expected == "INTEGER");
            }
        }
        assert_eq!(seen, integers.len(), "every integer column listed exists");
        drop(connection);
        assert!(store.execute_raw("INSERT INTO facts VALUES ('r', 3.3)").is_err(), "a real is refused");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Text that looks numeric is read back as written from every column that keeps text, fact versions included
    /// (schema version 3 stored `"3.3"` as a real that no read accepted, and `"1e3"` as the number 1000).
    #[test]
    fn numeric_looking_text_is_kept_as_written() {
        let (dir, path, store) = new_store("numeric");
        let texts = ["3.3", "1e3", " 1000", "1000 ", "+7", "-0", "0x10", "١٢٣", "１２３", "1000\u{a0}", "007"];
        let mut tx = store.begin().unwrap();
        for (i, text) in texts.iter().enumerate() {
            let version = FactVersion::Text(text.to_string());
            tx.set_fact(&format!("f{i}"), &version).unwrap();
            tx.set_fact(text, &FactVersion::Number(u64::MAX - i as u64)).unwrap();
            let some = Some(text.to_string());
            let approval = StoredApproval {
                id: format!("{text}#{i}"),
                kind: text.to_string(),
                mandate: text.to_string(),
                issued_at: 0,
                expires_at: 10,
                tool: some.clone(),
                target: some.clone(),
                digest: some.clone(),
                manifest: some.clone(),
                single_use: true,
                consumed: false,
                approver: text.to_string(),
                access_request: some.clone(),
                consumed_by: None,
                consumed_at: None,
                agent: some.clone(),
            };
            tx.insert_approval(&approval).unwrap();
            assert_eq!(tx.approval(&approval.id).unwrap(), Some(approval));
            tx.increment_counter(text, text).unwrap();
            assert_eq!(tx.counter(text, text).unwrap(), 1);
            tx.set_stop(text, true).unwrap();
        }
        tx.commit().unwrap();
        drop(store);
        let store = SqliteStore::open(&path, Durability::Process).unwrap();
        let state = store.begin_read().unwrap().decision_state().unwrap();
        for (i, text) in texts.iter().enumerate() {
            let version = |name: &str| state.facts.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            assert_eq!(version(&format!("f{i}")), Some(FactVersion::Text(text.to_string())), "{text:?}");
            assert_eq!(version(text), Some(FactVersion::Number(u64::MAX - i as u64)), "{text:?} as a name");
            assert!(state.stops.contains(&text.to_string()), "{text:?}");
        }
        drop(store);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The one statement that reads stops and facts together reads what the two that read each do, in their order.
    #[test]
    fn stops_and_facts_are_read_together_as_each_alone() {
        let (dir, _, store) = new_store("together");
        let read = |store: &SqliteStore| {
            let mut tx = store.begin_read().unwrap();
            let together = tx.stops_and_facts().unwrap();
            assert_eq!(together, (tx.stops().unwrap(), tx.facts().unwrap()));
            let state = tx.decision_state().unwrap();
            assert_eq!(
                state,
                DecisionState {
                    stops: together.0.clone(),
                    records: tx.stop_records().unwrap(),
                    facts: together.1.clone()
                }
            );
            together
        };
        assert_eq!(read(&store), (vec![], vec![]));
        let mut tx = store.begin().unwrap();
        for stop in ["m-b", "m-a", "M-c", "m-ä"] {
            tx.set_stop(stop, true).unwrap();
        }
        for (fact, version) in [("zeta", 3), ("alpha", 1), ("Beta", 7)] {
            tx.set_fact(fact, &FactVersion::Number(version)).unwrap();
        }
        tx.set_fact("gamma", &FactVersion::Text("v3.2".into())).unwrap();
        tx.set_stop("m-b", false).unwrap();
        for (id, mandate) in [("S-2", Some("m")), ("S-1", None), ("S-3", Some("n"))] {
            let principal = mandate.is_none().then(|| "user:p".to_string());
            let stop =
                StopRecord { id: id.into(), level: "pause".into(), mandate: mandate.map(str::to_string), principal };
            tx.set_stop_record(&stop).unwrap();
        }
        assert!(tx.clear_stop_record("S-3").unwrap());
        assert!(!tx.clear_stop_record("S-3").unwrap());
        tx.commit().unwrap();
        let ids: Vec<String> = store.begin_read().unwrap().stop_records().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["S-1", "S-2"]);
        let (stops, facts) = read(&store);
        assert_eq!(stops, ["M-c", "m-a", "m-ä"]);
        let number = |name: &str, n| (name.to_string(), FactVersion::Number(n));
        let text = ("gamma".to_string(), FactVersion::Text("v3.2".into()));
        assert_eq!(facts, [number("Beta", 7), number("alpha", 1), text, number("zeta", 3)]);
        drop(store);
        std::fs::remove_dir_all(&dir).ok();
    }
}
