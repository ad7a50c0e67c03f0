//! The store that several gateways share (`remit serve --store postgres://…`, docs/scaling.md): PostgreSQL through
//! tokio-postgres, connections pooled by deadpool-postgres. Beside [`super::sqlite`], behind the same
//! [`Store`]/[`Tx`]; uses [`super::store`] and [`super::audit`]'s hash, nothing of the core.
//!
//! What the database enforces, whatever the gateways do:
//! - the log is one hash chain per writer (docs/scaling.md "The log with several writers"): each store is a writer
//!   with an id made when it connects (`gw-` + 16 random hex digits, registered in `writers`), and every write
//!   transaction begins by locking its own writer's head (`writer_heads`), which no other replica locks; each entry
//!   also takes a global order key `gseq` from a sequence when it is inserted (with the commit), which the log is
//!   read by; every second a writer that wrote seals its chain with the heads of the others ([`Store::seal`]).
//!   Everything a decision reads comes after its transaction began, so a stop, a fact or a consumed approval
//!   committed by any replica before is seen (READ COMMITTED: each statement sees what committed before it);
//! - a single-use approval is consumed by a conditional update (`… WHERE NOT consumed`): one winner;
//! - counters are made if missing and locked (`INSERT … ON CONFLICT DO UPDATE … WHERE false`, in sorted order),
//!   then read, in one pipeline, and incremented in place (all of a batch's counts in one statement), so two
//!   replicas' batches counting the same budget wait for each other;
//! - at most one live pending access request per key (a unique index on `pending_key`), answered once (a
//!   conditional update on `status = 'pending'`);
//! - the schema is created and migrated by the gateway under an advisory lock, in one transaction, with the
//!   versions applied in `remit_schema`: two replicas starting at once migrate once.
//!
//! Isolation: READ COMMITTED with those locks (the row locks, conditional updates and unique indexes are what keep
//! the promises across replicas; SERIALIZABLE would add only its predicate-lock bookkeeping and false conflicts); a
//! serialization failure, a deadlock (two batches consuming the same two approvals in opposite orders) or a unique
//! violation (a stale pending request) is marked a conflict ([`StoreError::conflict`]), which the core retries a
//! bounded number of times before it denies. Read transactions (`begin_read`) are REPEATABLE READ READ ONLY: one
//! snapshot for all their reads, no lock.
//!
//! Time: a transaction reads the database's clock (`clock_timestamp()`, after its lock is granted) and offers it as
//! [`Tx::now`], so that every replica decides by one clock, and log times never go back along a writer's chain.
//!
//! Bridging: the traits are synchronous (the core runs decisions on blocking threads: `block_in_place`,
//! `spawn_blocking`, the committer). The connections' I/O runs on a current-thread tokio runtime of the store's own,
//! which the thread that waits for an answer drives itself (`Runtime::block_on`): the request written, the socket
//! polled and the answer read on that thread, no wake of another thread and back per round trip. Threads that wait
//! at once take turns driving it (tokio hands the runtime to one, which drives the others' connections too). It is
//! never entered from an async task (its `block_on` would panic there): the core's store calls all run on blocking
//! threads, and it never needs the caller's runtime.
//!
//! Round trips: a transaction's commands that answer nothing (`SAVEPOINT`, `RELEASE`) and its writes whose result
//! nobody reads ([`Tx::count`], an operation recorded, the log's entries) wait to go with its next statement (the
//! next job's reads, or the commit: a failure there fails the whole transaction, and no decision of the batch is
//! answered before its commit); a batch reads what all its decisions need in one pipeline ([`Tx::prefetch`], kept
//! up to date with the transaction's writes), else a decision's reads go as one pipeline; log entries are kept in
//! memory (the writer's head is locked, so their sequence numbers and hashes are known) and written with the
//! commit, in one pipeline ([`PostgresStore::stats`] counts).
//!
//! To add a method: its SQL next to the others, a few lines in `impl Tx for PgTx` through `PgTx::query` /
//! `PgTx::execute` (a write: `PgTx::writing` first, or `PgTx::defer` when nobody reads its result), and a migration
//! appended to [`MIGRATIONS`] when it needs a table.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, SimpleQueryMessage};

use super::audit::{chain_hash, seal_body, writer_genesis, GENESIS, SEAL};
use super::postgres_tls::{Connection, TlsFiles};
use super::store::*;
use remit_lang::syntax::ast::FactVersion;

/// The schema, one migration per version (version `i + 1` is `MIGRATIONS[i]`); a store of a later version than the
/// gateway knows is refused. Applied in one transaction under [`MIGRATION_LOCK`].
const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE approvals (
  id text PRIMARY KEY, kind text NOT NULL, mandate text NOT NULL, issued_at bigint NOT NULL,
  expires_at bigint NOT NULL, tool text, target text, digest text, manifest text, single_use boolean NOT NULL,
  consumed boolean NOT NULL DEFAULT false, approver text NOT NULL, access_request text, consumed_by text,
  consumed_at bigint, agent text);
CREATE INDEX approvals_live ON approvals (mandate, expires_at) WHERE NOT consumed;
CREATE INDEX approvals_by_request ON approvals (access_request);
CREATE TABLE counters (
  counter text NOT NULL, counter_window text NOT NULL, value bigint NOT NULL, PRIMARY KEY (counter, counter_window));
CREATE TABLE stops (mandate text PRIMARY KEY);
CREATE TABLE stop_records (id text PRIMARY KEY, level text NOT NULL, mandate text, principal text);
CREATE TABLE facts (name text PRIMARY KEY, number bigint, text text, CHECK ((number IS NULL) <> (text IS NULL)));
CREATE TABLE operations (
  id bigserial PRIMARY KEY, operation text NOT NULL, decision_id text NOT NULL, tool text NOT NULL,
  time bigint NOT NULL);
CREATE INDEX operations_by_id ON operations (operation);
CREATE TABLE access_requests (
  id text PRIMARY KEY, status text NOT NULL, created_at bigint NOT NULL, expires_at bigint NOT NULL, principal text,
  agent text NOT NULL, credential text, mandate text NOT NULL, tool text NOT NULL, target text, digest text NOT NULL,
  manifest text, arguments text NOT NULL, missing_approvals text NOT NULL, reasons text NOT NULL, chain text NOT NULL,
  decision_id text NOT NULL, key text NOT NULL, decided_by text, decided_at bigint, log_seq bigint, earlier text,
  pending_key text);
CREATE INDEX access_requests_key ON access_requests (key, status);
CREATE INDEX access_requests_listed ON access_requests (created_at DESC, id);
CREATE UNIQUE INDEX access_requests_one_pending ON access_requests (pending_key);
CREATE TABLE rounds (key text PRIMARY KEY, carried text NOT NULL, expires_at bigint NOT NULL);
CREATE TABLE bundle_revision (id integer PRIMARY KEY CHECK (id = 1), revision bigint NOT NULL, policy text NOT NULL);
CREATE TABLE log_heads (
  id bigserial PRIMARY KEY, seq bigint NOT NULL, hash text NOT NULL, time bigint NOT NULL, key text NOT NULL,
  signature text NOT NULL);
CREATE TABLE log (
  seq bigint PRIMARY KEY, time bigint NOT NULL, kind text NOT NULL, body text NOT NULL, prev text NOT NULL,
  hash text NOT NULL);
CREATE TABLE log_head (id integer PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL, hash text NOT NULL);
",
    "
CREATE TABLE entities (
  type text NOT NULL, id text NOT NULL, origin text NOT NULL, attributes text NOT NULL,
  PRIMARY KEY (type, id, origin));
CREATE TABLE tuples (
  relation text NOT NULL, a text NOT NULL, b text NOT NULL, origin text NOT NULL,
  PRIMARY KEY (relation, a, b, origin));
CREATE TABLE data_state (id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL, bundle text);
",
    // The log with several writers: a chain per writer, `gseq` the order across them. The entries written before
    // are the chain of writer '' (hashed as before); `log_head` stays, so a replica of the previous version still
    // running appends to that chain under its old lock until it stops. The rows every replica read and then write
    // (the data sets' version) exist from here on, so that they can be locked.
    "
CREATE TABLE writers (
  id text PRIMARY KEY, name text NOT NULL, started_at bigint NOT NULL, policy text, last_seen bigint NOT NULL);
CREATE TABLE writer_heads (writer text PRIMARY KEY, wseq bigint NOT NULL, hash text NOT NULL);
CREATE SEQUENCE log_gseq;
ALTER TABLE log ADD COLUMN writer text NOT NULL DEFAULT '', ADD COLUMN gseq bigint;
UPDATE log SET gseq = seq;
SELECT setval('log_gseq', coalesce((SELECT max(seq) FROM log), 0) + 1, false);
ALTER TABLE log ALTER COLUMN gseq SET DEFAULT nextval('log_gseq'), ALTER COLUMN gseq SET NOT NULL;
ALTER SEQUENCE log_gseq OWNED BY log.gseq;
ALTER TABLE log DROP CONSTRAINT log_pkey, ADD PRIMARY KEY (writer, seq);
CREATE UNIQUE INDEX log_order ON log (gseq);
ALTER TABLE log_heads ADD COLUMN writer text NOT NULL DEFAULT '';
ALTER TABLE access_requests ADD COLUMN log_writer text;
INSERT INTO data_state (id, version) VALUES (1, 0) ON CONFLICT DO NOTHING;
",
    // Signed bundles published in the database (`remit bundle publish`), which every replica started with
    // `--bundle-from-store` polls and verifies with its own key (docs/scaling.md "Policy rollout"). A replica of
    // version 3 does not know the table and serves its policy files as before.
    "
CREATE TABLE published_bundles (
  id bigserial PRIMARY KEY, revision bigint NOT NULL, policy text NOT NULL, sha256 text NOT NULL,
  bytes bytea NOT NULL, published_by text NOT NULL, published_at bigint NOT NULL);
",
    // Instances of templates granted at run time (docs/grants-design.md): every version kept, the current one
    // marked (one per id, a unique index), and the active ones indexed by holder, which every decision of a policy
    // with templates reads. A replica of version 4 does not know the table and decides nothing under an instance.
    "
CREATE TABLE grants (
  id text NOT NULL, version bigint NOT NULL, template text NOT NULL, principal text NOT NULL, holder text NOT NULL,
  params text NOT NULL, granted_by text NOT NULL, granted_at bigint NOT NULL, revoked_at bigint,
  current boolean NOT NULL, PRIMARY KEY (id, version));
CREATE UNIQUE INDEX grants_current ON grants (id) WHERE current;
CREATE INDEX grants_by_holder ON grants (holder) WHERE current AND revoked_at IS NULL;
",
    // Sub-delegation (an instance of a template under a template names the instance it came from): a decision
    // under it reads its parent by id, and revoking a parent revokes its children (found by this index).
    "
ALTER TABLE grants ADD COLUMN parent text;
CREATE INDEX grants_by_parent ON grants (parent) WHERE current AND revoked_at IS NULL;
",
    // No query reads an operation by its `id` (it orders an operation's records, read on `operations_by_id`): its
    // index was one more B-tree insert for every call counted, for nothing.
    "
ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_pkey;
",
];

/// The first schema version with a chain per writer (before it, the log is the one chain of writer `''`).
const CHAINS_VERSION: i32 = 3;

/// The advisory lock the migrations are applied under (`remit` in ASCII).
const MIGRATION_LOCK: i64 = 0x72_65_6d_69_74;

/// Settings of a transaction's session: a lock held by a replica that hangs, or a statement stuck, ends in an error
/// (a deny) rather than a gateway that waits forever.
const SESSION_OPTIONS: &str =
    "-c lock_timeout=5s -c statement_timeout=30s -c idle_in_transaction_session_timeout=30s -c TimeZone=UTC";

/// How a [`PostgresStore`] is set up.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The most connections this gateway opens.
    pub pool_size: usize,
    /// Decide by the database's clock ([`Tx::now`]); off, by the gateway's (`remit serve --clock`, tests that set
    /// the time).
    pub database_clock: bool,
    /// Who this gateway is, in `remit_schema.applied_by`, `writers.name` and the database's `application_name`
    /// (its writer's id, `gw-…`, is made when it connects: [`PostgresStore::writer`]).
    pub writer: String,
    /// How long a transaction waits for the server's answer to a request on an open connection before it gives the
    /// connection up (a server that hangs, a network that drops packets: the connection is not closed, so nothing
    /// else ends the wait) and fails: the call is denied `gateway.store-unavailable`. The default,
    /// [`ANSWER_TIMEOUT`], is longer than any one statement may run (`statement_timeout`), so that a server that
    /// answers is not cut off but for a pipeline of several statements that each wait long for locks; what is cut
    /// off is denied (its commit may have happened: an allow logged and answered deny, never the other way round).
    pub answer_timeout: Duration,
    /// The TLS files given outside the URL (`--store-ssl-root-cert`, `--store-ssl-cert`, `--store-ssl-key`): as the
    /// URL's `sslrootcert`, `sslcert` and `sslkey` ([`super::postgres_tls`]).
    pub tls: TlsFiles,
}

/// [`PostgresOptions::answer_timeout`]'s default: the sessions' `statement_timeout` (30 s) and 5 s more.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(35);

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions {
            pool_size: 16,
            database_clock: true,
            writer: "remit".into(),
            answer_timeout: ANSWER_TIMEOUT,
            tls: TlsFiles::default(),
        }
    }
}

/// What the store sent: statements, round trips (a pipeline is one), transactions begun, conflicts met.
#[derive(Debug, Default)]
pub struct Stats {
    pub statements: AtomicU64,
    pub round_trips: AtomicU64,
    pub transactions: AtomicU64,
    pub conflicts: AtomicU64,
}

pub struct PostgresStore {
    pool: Pool,
    /// Drives the connections: a current-thread runtime, run by whichever thread waits for the database
    /// ([`PostgresStore::wait`]), so that a round trip costs no hand-off to another thread and back; shut down in
    /// the background on drop (the store may be dropped on a tokio worker).
    runtime: Option<tokio::runtime::Runtime>,
    database_clock: bool,
    /// Opened by [`PostgresStore::open_existing`]: transactions are read transactions.
    read_only: bool,
    /// The schema has a chain per writer ([`CHAINS_VERSION`]); an older one, read by `remit audit`, has one chain.
    chains: bool,
    /// This gateway's writer id (`gw-` + 16 hex digits), `""` when it only reads.
    writer: String,
    /// This writer's sequence number at its last seal (0: none yet).
    sealed: std::sync::Mutex<u64>,
    /// The policy this gateway serves, recorded in `writers` with the next seal.
    policy: std::sync::Mutex<Option<String>>,
    stats: Stats,
    /// The URL's TLS mode and roots, to say why a connection failed.
    connection: Connection,
    /// [`PostgresOptions::answer_timeout`].
    answer_timeout: Duration,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("pool", &self.pool.status()).finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn store_err(e: tokio_postgres::Error) -> StoreError {
    let text = match e.as_db_error() {
        Some(db) => format!("postgres {}: {}", db.code().code(), db.message()),
        None => format!("postgres: {e}"),
    };
    let conflicts = [SqlState::T_R_SERIALIZATION_FAILURE, SqlState::T_R_DEADLOCK_DETECTED, SqlState::UNIQUE_VIOLATION];
    match e.code() {
        Some(code) if conflicts.contains(code) => StoreError::conflict(text),
        _ => StoreError(text),
    }
}

/// `url` with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user = &url[scheme + 3..at];
            match user.split_once(':') {
                Some((name, _)) => format!("{}{name}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/database`, TLS as its `sslmode`
    /// says: [`super::postgres_tls`]; the password, when the URL has none, is `password`) and creates or migrates
    /// its schema.
    pub fn connect(url: &str, password: Option<&str>, options: &PostgresOptions) -> StoreResult<PostgresStore> {
        let mut store = PostgresStore::connect_unmigrated(url, password, options, true)?;
        store.migrate(&options.writer)?;
        store.register(&options.writer)?;
        Ok(store)
    }

    /// Makes this gateway a writer of the log: a new id, registered in `writers`, its chain's head at its genesis.
    fn register(&mut self, name: &str) -> StoreResult<()> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| StoreError(format!("no randomness from the system: {e}")))?;
        let writer = format!("gw-{}", super::keys::hex(&random));
        let client = self.client()?;
        let now = "floor(extract(epoch FROM clock_timestamp()))::bigint";
        let registered = self.wait(async {
            client.batch_execute("BEGIN").await?;
            client
                .execute(
                    &format!("INSERT INTO writers (id, name, started_at, last_seen) VALUES ($1, $2, {now}, {now})"),
                    &[&writer, &name],
                )
                .await?;
            client
                .execute(
                    "INSERT INTO writer_heads (writer, wseq, hash) VALUES ($1, 0, $2)",
                    &[&writer, &writer_genesis(&writer)],
                )
                .await?;
            client.batch_execute("COMMIT").await
        });
        if let Err(e) = registered {
            let _ = Object::take(client);
            return Err(store_err(e));
        }
        self.writer = writer;
        Ok(())
    }

    /// This gateway's writer id: its chain in the log (`""` for a store opened only to read).
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// The store's pool, no connection made yet; a store that `writes` connects to a server that accepts writes
    /// only ([`writable_hosts`]).
    fn connect_unmigrated(
        url: &str,
        password: Option<&str>,
        options: &PostgresOptions,
        writes: bool,
    ) -> StoreResult<PostgresStore> {
        let mut connection = Connection::from_url_with(url, &redact(url), &options.tls).map_err(StoreError)?;
        let config = &mut connection.config;
        if writes {
            writable_hosts(config, url, &redact(url)).map_err(StoreError)?;
        }
        if let (None, Some(password)) = (config.get_password(), password) {
            config.password(password);
        }
        config.connect_timeout(Duration::from_secs(5));
        config.application_name(&options.writer);
        config.options(SESSION_OPTIONS);
        let manager = Manager::from_config(
            config.clone(),
            connection.tls.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError(format!("cannot start the database's runtime: {e}")))?;
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| StoreError(format!("cannot make the connection pool: {e}")))?;
        Ok(PostgresStore {
            pool,
            runtime: Some(runtime),
            database_clock: options.database_clock,
            read_only: false,
            chains: true,
            writer: String::new(),
            sealed: std::sync::Mutex::new(0),
            policy: std::sync::Mutex::new(None),
            stats: Stats::default(),
            connection,
            answer_timeout: options.answer_timeout,
        })
    }

    /// Opens an existing store for reading and checking (`remit audit`, also while gateways run): creates nothing,
    /// changes nothing, takes no lock a writer waits for (every transaction is a read transaction), and fails when
    /// the database is not a remit store of a version this gateway knows.
    pub fn open_existing(url: &str, password: Option<&str>) -> StoreResult<PostgresStore> {
        PostgresStore::open_existing_with(url, password, &TlsFiles::default())
    }

    /// [`PostgresStore::open_existing`] with TLS files given outside the URL.
    pub fn open_existing_with(url: &str, password: Option<&str>, tls: &TlsFiles) -> StoreResult<PostgresStore> {
        let options = PostgresOptions {
            pool_size: 2,
            writer: "remit audit".into(),
            tls: tls.clone(),
            ..PostgresOptions::default()
        };
        let mut store = PostgresStore::connect_unmigrated(url, password, &options, false)?;
        store.read_only = true;
        let version = store.schema_version().map_err(|e| StoreError(format!("not a remit store: {e}")))?;
        if !(1..=MIGRATIONS.len() as i32).contains(&version) {
            return Err(StoreError(format!(
                "not a remit store of a schema version this gateway knows (found {version}, known 1 to {})",
                MIGRATIONS.len()
            )));
        }
        store.chains = version >= CHAINS_VERSION;
        Ok(store)
    }

    /// What the store sent so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The schema's version in the database.
    pub fn schema_version(&self) -> StoreResult<i32> {
        let client = self.client()?;
        let row = self.wait(client.query_one("SELECT max(version) FROM remit_schema", &[])).map_err(store_err)?;
        Ok(row.get::<_, Option<i32>>(0).unwrap_or(0))
    }

    /// The migrations applied to the database: version and who applied it, in order.
    pub fn schema_history(&self) -> StoreResult<Vec<(i32, String)>> {
        let client = self.client()?;
        let rows = self
            .wait(client.query("SELECT version, applied_by FROM remit_schema ORDER BY version", &[]))
            .map_err(store_err)?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Runs raw SQL on the store, outside any transaction (tests use it to tamper with the log or break the store).
    pub fn execute_raw(&self, sql: &str) -> StoreResult<()> {
        let client = self.client()?;
        self.wait(client.batch_execute(sql)).map_err(store_err)
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime lives as long as the store")
    }

    /// Waits for the server's answer to `request`, at most [`PostgresOptions::answer_timeout`]: `None` when none
    /// came. A connection's I/O ends only when the server answers or the socket is closed; a server that hangs, or a
    /// network that drops packets, does neither, and without this bound a transaction (and the replica's batches
    /// behind it, one at a time) would wait for as long as TCP keeps the connection, many minutes.
    fn answered<T>(&self, request: impl Future<Output = T>) -> Option<T> {
        // The timer is the store's runtime's, driven by this thread while it waits.
        self.wait(async { tokio::time::timeout(self.answer_timeout, request).await.ok() })
    }

    /// Runs `future` to its end on this thread, which drives the store's runtime meanwhile: the connections' tasks
    /// (the requests written, the answers read), their sockets and timers ([`PostgresStore::runtime`]).
    fn wait<T>(&self, future: impl Future<Output = T>) -> T {
        self.runtime().block_on(future)
    }

    /// What a request that got no answer fails with, after the pool's idle connections are dropped: they lead to the
    /// same server, so the next transaction opens a new one (its wait bounded by the connect timeout) rather than
    /// wait as long again on another.
    fn unanswered(&self) -> StoreError {
        self.pool.retain(|_, _| false);
        StoreError(format!("the database did not answer within {} s", self.answer_timeout.as_secs()))
    }

    /// A pooled connection (made on the store's runtime, which its connection task needs).
    fn client(&self) -> StoreResult<Object> {
        let pool = self.pool.clone();
        match self.wait(async move { pool.get().await }) {
            Ok(client) => Ok(client),
            Err(deadpool_postgres::PoolError::Backend(e)) => {
                Err(StoreError(format!("cannot reach the database: {}", self.connection.why(&e))))
            }
            Err(e) => Err(StoreError(format!("cannot reach the database: {e}"))),
        }
    }

    /// Sends `sql` (simple protocol: several statements, one round trip) on a pooled connection — followed, for
    /// `writer`, by [`HEAD_LOCK`] of that writer, in the same round trip — and gives the connection with the rows
    /// (as text); a connection found closed (the server restarted) is dropped and another taken.
    fn start(&self, sql: &str, writer: Option<&str>) -> StoreResult<(Object, Vec<Vec<Option<String>>>)> {
        let mut last = None;
        for _ in 0..3 {
            let client = self.client()?;
            self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
            let statements = sql.matches(';').count() as u64 + 1 + u64::from(writer.is_some());
            self.stats.statements.fetch_add(statements, Ordering::Relaxed);
            let answer = self.answered(async {
                let Some(writer) = writer else {
                    let messages = client.simple_query(sql).await?;
                    return Ok(messages
                        .iter()
                        .filter_map(|m| match m {
                            SimpleQueryMessage::Row(row) => {
                                Some((0..row.len()).map(|i| row.get(i).map(str::to_string)).collect())
                            }
                            _ => None,
                        })
                        .collect());
                };
                // From the connection's cache after the first time: no round trip then.
                let head_lock = client.prepare_cached(HEAD_LOCK).await?;
                // Both sent before either answer is read: one round trip.
                let (begun, rows) =
                    futures_util::future::join(client.batch_execute(sql), client.query(&head_lock, &[&writer])).await;
                begun?;
                Ok(rows?
                    .iter()
                    .map(|row| {
                        let (seq, hash, now): (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
                        vec![Some(seq.to_string()), Some(hash), Some(now.to_string())]
                    })
                    .collect::<Vec<Vec<Option<String>>>>())
            });
            let Some(answer) = answer else {
                // Its transaction may have begun: the connection is given up, never back to the pool.
                let _ = Object::take(client);
                return Err(self.unanswered());
            };
            match answer {
                Ok(rows) => return Ok((client, rows)),
                Err(e) if client.is_closed() => {
                    let _ = Object::take(client);
                    last = Some(store_err(e));
                }
                Err(e) => {
                    // The transaction may have begun: this connection does not go back to the pool.
                    let _ = Object::take(client);
                    return Err(store_err(e));
                }
            }
        }
        Err(last.unwrap_or_else(|| StoreError("cannot reach the database".into())))
    }

    /// Creates or migrates the schema: one transaction under an advisory lock, so a replica starting at the same
    /// time waits and then finds the schema migrated.
    fn migrate(&self, writer: &str) -> StoreResult<()> {
        let client = self.client()?;
        let migrated = self.wait(async {
            client
                .batch_execute(&format!(
                    // A migration may rewrite a large log, and wait for another replica's: no session timeout.
                    "BEGIN; SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0; \
                     SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); CREATE TABLE IF NOT EXISTS remit_schema (
                       version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                       applied_by text NOT NULL)"
                ))
                .await?;
            let current: Option<i32> = client.query_one("SELECT max(version) FROM remit_schema", &[]).await?.get(0);
            let current = current.unwrap_or(0).max(0) as usize;
            if current > MIGRATIONS.len() {
                client.batch_execute("ROLLBACK").await?;
                return Ok(Err(current));
            }
            for (index, migration) in MIGRATIONS.iter().enumerate().skip(current) {
                client.batch_execute(migration).await?;
                let version = index as i32 + 1;
                client
                    .execute("INSERT INTO remit_schema (version, applied_by) VALUES ($1, $2)", &[&version, &writer])
                    .await?;
            }
            client
                .execute("INSERT INTO log_head (id, seq, hash) VALUES (1, 0, $1) ON CONFLICT DO NOTHING", &[&GENESIS])
                .await?;
            client.batch_execute("COMMIT").await.map(|()| Ok(()))
        });
        match migrated {
            Ok(Ok(())) => Ok(()),
            Ok(Err(version)) => Err(StoreError(format!(
                "the database has schema version {version}; this gateway knows versions up to {}",
                MIGRATIONS.len()
            ))),
            Err(e) => {
                let _ = Object::take(client);
                Err(store_err(e))
            }
        }
    }
}

/// A writer's URL that names several servers (libpq's multi-host form, `postgres://user@h1:p1,h2:p2/db`: a
/// primary and its standbys, docs/scaling.md "Failover") connects to the one that accepts writes: its
/// `target_session_attrs` is `read-write` when the URL gives none (tokio-postgres asks each server `SHOW
/// transaction_read_only` and goes on to the next one while the answer is `on`). Any other value, with several
/// hosts, is refused: a gateway on a standby would deny every call while its read transactions, and so `/ready`,
/// still succeed, and its connections there would stay in the pool after the primary came back.
fn writable_hosts(config: &mut tokio_postgres::Config, url: &str, shown: &str) -> Result<(), String> {
    use tokio_postgres::config::TargetSessionAttrs;
    let given = url
        .split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(|p| p.split('=').next() == Some("target_session_attrs")));
    match config.get_target_session_attrs() {
        TargetSessionAttrs::ReadWrite => Ok(()),
        _ if !given => {
            if config.get_hosts().len() > 1 {
                config.target_session_attrs(TargetSessionAttrs::ReadWrite);
            }
            Ok(())
        }
        // One server: what it is, it is (libpq's default is `any`).
        _ if config.get_hosts().len() <= 1 => Ok(()),
        other => Err(format!(
            "`{shown}`: `target_session_attrs={}` would let this gateway connect to a server that does not accept \
             writes (a standby): give `target_session_attrs=read-write`, or leave it out (with several hosts it is \
             `read-write`)",
            match other {
                TargetSessionAttrs::ReadOnly => "read-only",
                _ => "any",
            }
        )),
    }
}

const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
     SELECT floor(extract(epoch FROM clock_timestamp()))::bigint";
/// What a write transaction begins with, in one round trip: `BEGIN` and [`HEAD_LOCK`].
const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";
/// Its writer's head locked, the database's clock read after the lock is granted: a prepared statement (parsed and
/// planned once per connection, not once per transaction as a simple query is).
const HEAD_LOCK: &str = "SELECT wseq, hash, floor(extract(epoch FROM clock_timestamp()))::bigint FROM writer_heads \
     WHERE writer = $1 FOR UPDATE";

impl PostgresStore {
    /// A write transaction: this writer's head locked (no other replica's transaction waits for it), the database's
    /// clock read after the lock is granted.
    fn begin_write(&self) -> StoreResult<PgTx<'_>> {
        let (client, rows) = self.start(BEGIN_WRITE, Some(&self.writer))?;
        self.stats.transactions.fetch_add(1, Ordering::Relaxed);
        let row = rows.first().ok_or_else(|| StoreError("this writer's head is missing from `writer_heads`".into()))?;
        let field = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
        let seq: u64 = field(0).parse().map_err(|_| StoreError("the writer's head is not a number".into()))?;
        let now: i64 = field(2).parse().map_err(|_| StoreError("the database's clock is not a number".into()))?;
        Ok(PgTx::new(self, client, true, now, (seq, field(1))))
    }
}

impl Store for PostgresStore {
    fn begin(&self) -> StoreResult<Box<dyn Tx + '_>> {
        if self.read_only {
            return self.begin_read();
        }
        Ok(Box::new(self.begin_write()?))
    }

    /// Seals this writer's chain when it wrote since its last seal: a `seal` entry naming the head of every other
    /// writer's chain as committed now (those with entries), and `writers.last_seen` (and the policy served)
    /// brought up to date.
    fn seal(&self) -> StoreResult<bool> {
        if self.read_only || self.writer.is_empty() {
            return Ok(false);
        }
        let mut sealed = self.sealed.lock().unwrap_or_else(|p| p.into_inner());
        let mut tx = self.begin_write()?;
        if tx.head.0 == *sealed {
            return Ok(false);
        }
        let rows = tx.query(
            "SELECT writer, wseq, hash FROM writer_heads WHERE writer <> $1 AND wseq > 0 ORDER BY writer COLLATE \"C\"",
            &[&self.writer],
        )?;
        let heads: Vec<super::audit::ChainHead> =
            rows.iter().map(|row| (row.get(0), row.get::<_, i64>(1) as u64, row.get(2))).collect();
        let policy = self.policy.lock().unwrap_or_else(|p| p.into_inner()).clone();
        tx.defer(
            "UPDATE writers SET last_seen = $2, policy = coalesce($3, policy) WHERE id = $1",
            vec![Box::new(self.writer.clone()), Box::new(tx.now), Box::new(policy)],
        )?;
        let now = tx.now;
        let entry = tx.append_log(now, SEAL, &seal_body(&heads))?;
        Box::new(tx).commit()?;
        *sealed = entry.seq;
        Ok(true)
    }

    fn sent(&self) -> Option<crate::store::Sent> {
        let stats = &self.stats;
        Some(crate::store::Sent {
            statements: stats.statements.load(Ordering::Relaxed),
            round_trips: stats.round_trips.load(Ordering::Relaxed),
            transactions: stats.transactions.load(Ordering::Relaxed),
            conflicts: stats.conflicts.load(Ordering::Relaxed),
        })
    }

    fn note_policy(&self, policy: &str) {
        let previous = self.policy.lock().unwrap_or_else(|p| p.into_inner()).replace(policy.to_string());
        // A policy taken while this writer's chain did not move (another replica logged the new revision) would
        // reach `writers.policy` only with the next seal after a write: the next seal is written anyway.
        if previous.is_some_and(|previous| previous != policy) {
            *self.sealed.lock().unwrap_or_else(|p| p.into_inner()) = u64::MAX;
        }
    }

    fn begin_read(&self) -> StoreResult<Box<dyn Tx + '_>> {
        let (client, rows) = self.start(BEGIN_READ, None)?;
        self.stats.transactions.fetch_add(1, Ordering::Relaxed);
        let now = rows.first().and_then(|row| row.first().cloned().flatten()).unwrap_or_default();
        let now: i64 = now.parse().map_err(|_| StoreError("the database's clock is not a number".into()))?;
        Ok(Box::new(PgTx::new(self, client, false, now, (0, String::new()))))
    }
}

/// A savepoint of a [`PgTx`] (one per decision of a batch): opened only before the decision's first write (a
/// decision that only reads and logs costs no subtransaction), and sent with the next statement after that.
#[derive(Debug)]
struct Savepoint {
    opened: Opened,
    entries: usize,
    head: (u64, String),
    /// How many of the transaction's kept counts and operations (`PgTx::counts`, `PgTx::operations`) came before
    /// it: the rest are the decision's, dropped when it is rolled back.
    counts: usize,
    operations: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// Nothing written yet: there is nothing in the database to roll back.
    No,
    /// `SAVEPOINT job` waits in `pending`, at this index.
    Queued(usize),
    Sent,
}

struct PgTx<'a> {
    store: &'a PostgresStore,
    /// `None` once committed, rolled back, or dropped from the pool after an error.
    client: Option<Object>,
    /// A write transaction (its writer's head locked) or a read one.
    writes: bool,
    now: i64,
    /// The head of this writer's chain, after the entries appended so far.
    head: (u64, String),
    /// Entries appended and not yet written (they are written with the commit, or before the log is read).
    entries: Vec<LogEntry>,
    /// What waits to go before the next statement, in the same round trip: commands that answer nothing
    /// (`SAVEPOINT`, `RELEASE`) and writes whose result nobody reads (a budget counted, an operation recorded, the
    /// log's entries). Their errors surface with that statement (a later job's, in a batch) or at the commit, and
    /// then the transaction fails as a whole: no job of the batch is answered, since none is before the commit.
    pending: Vec<Item>,
    savepoint: Option<Savepoint>,
    /// Why a statement failed outside a savepoint: the transaction can only roll back (and its commit says why:
    /// a conflict stays a conflict, which the core runs again).
    failed: Option<StoreError>,
    /// The stops and facts read in this transaction, kept for its later decisions (a batch's, whose calls all came
    /// before the transaction began: a stop committed by another replica after the read is concurrent with them),
    /// and forgotten when this transaction writes them or rolls back to a savepoint.
    state: Option<DecisionState>,
    /// What [`Tx::prefetch`] read for the batch's decisions, kept up to date with this transaction's own writes.
    ahead: Option<Ahead>,
    /// The active instances [`Tx::prefetch_grants`] read for the batch's holders, by holder (every holder asked, an
    /// empty list for none): its decisions' reads of their instances are answered from here. A batch's calls all came
    /// before its transaction began, as for `state`: an instance granted or revoked by another replica after the read
    /// is concurrent with them. Forgotten when this transaction writes a grant.
    grants_ahead: Option<std::collections::HashMap<String, Vec<GrantRecord>>>,
    /// Read with `grants_ahead`: the instances above the holders' (their parents, by parent id, up to
    /// [`ABOVE_DEPTH`] levels), by id — `None` for an id looked up and not active — which answer
    /// [`Tx::active_grant`], so that a sub-delegated decision's chain, and with it its counters and approvals, is
    /// read ahead and locked with the batch's. Forgotten with `grants_ahead`.
    instances_ahead: Option<std::collections::HashMap<String, Option<GrantRecord>>>,
    /// The failure came with writes of earlier jobs (deferred past their savepoints' release): no savepoint can
    /// repair it, and the whole transaction fails.
    fatal: bool,
    /// The counts ([`Tx::count`]) and operations ([`Tx::record_operation`]) not sent yet, in order: written with
    /// the next statement as one statement each for all of them (the counts summed per counter:
    /// [`COUNT_ALL`], [`RECORD_OPERATIONS`]), not one per decision.
    counts: Vec<(String, String)>,
    operations: Vec<OperationRecord>,
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // A connection that cannot roll back (or does not answer) does not go back to the pool inside a
            // transaction.
            if !matches!(self.store.answered(client.batch_execute("ROLLBACK")), Some(Ok(()))) {
                let _ = Object::take(client);
            }
        }
    }
}

const APPROVAL_COLUMNS: &str = "id, kind, mandate, issued_at, expires_at, tool, target, digest, manifest, single_use, \
     consumed, approver, access_request, consumed_by, consumed_at, agent";
const REQUEST_COLUMNS: &str = "id, status, created_at, expires_at, principal, agent, credential, mandate, tool, \
     target, digest, manifest, arguments, missing_approvals, reasons, chain, decision_id, key, decided_by, decided_at, \
     log_seq, earlier, log_writer";

const LIVE_APPROVALS: &str = "SELECT id, kind, mandate, issued_at, expires_at, tool, target, digest, manifest, \
     single_use, consumed, approver, access_request, consumed_by, consumed_at, agent FROM approvals \
     WHERE mandate = ANY($1) AND NOT consumed AND expires_at > $2 ORDER BY array_position($1, mandate), id";
/// Stops, facts and stops with ids in one statement (tag 0, 1, 2).
const DECISION_STATE: &str = "SELECT 0, mandate, NULL::bigint, NULL, NULL, NULL FROM stops \
     UNION ALL SELECT 1, name, number, text, NULL, NULL FROM facts \
     UNION ALL SELECT 2, id, NULL, level, mandate, principal FROM stop_records";
/// The counters asked for, made when missing (with 0) and locked, in sorted order: a new row is locked as it is
/// inserted (another transaction making the same one waits for this one), an existing one by the `DO UPDATE` action,
/// which locks the row whether or not its `WHERE` lets it update it (`WHERE false`: never, so no new row version).
/// The values are then read by [`COUNTERS`], in the same pipeline: the rows are locked, so they are the values
/// last committed, and nothing but this transaction changes them until it ends.
const COUNTERS_LOCKED: &str = "INSERT INTO counters (counter, counter_window, value) \
     SELECT DISTINCT c, w, 0 FROM unnest($1::text[], $2::text[]) AS k(c, w) ORDER BY c, w \
     ON CONFLICT (counter, counter_window) DO UPDATE SET value = counters.value WHERE false";
/// The counters asked for, each by its key on the primary key's index (a lateral subquery that is not pulled up:
/// a join of the keys with `counters` may be planned as a hash join over a scan of the whole table, which grows
/// with every operation counted).
const COUNTERS: &str = "SELECT k.c, k.w, x.value FROM unnest($1::text[], $2::text[]) AS k(c, w) \
     CROSS JOIN LATERAL (SELECT value FROM counters WHERE counter = k.c AND counter_window = k.w OFFSET 0) AS x";
/// How many levels above the holders' instances [`Tx::prefetch_grants`] reads (a deeper chain's top is read by the
/// decision itself).
const ABOVE_DEPTH: i32 = 16;
/// The active instances of the holders `$1` (depth 0) and, level by level, the active instances their parents name
/// (`TEMPLATE/ID`: by the id after the last `/`, as [`Tx::active_grant`] is asked), up to depth `$2`; each parent
/// looked up by its id on the index of current rows (a lateral subquery, not a join that may scan the table).
const HELD_AND_ABOVE: &str = "WITH RECURSIVE chain AS ( \
     SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent, 0 AS depth \
     FROM grants WHERE holder = ANY($1) AND current AND revoked_at IS NULL \
     UNION ALL SELECT g.id, g.version, g.template, g.principal, g.holder, g.params, g.granted_by, g.granted_at, \
     g.revoked_at, g.parent, c.depth + 1 FROM chain c CROSS JOIN LATERAL (SELECT * FROM grants \
     WHERE id = regexp_replace(c.parent, '^.*/', '') AND current AND revoked_at IS NULL OFFSET 0) AS g \
     WHERE c.parent IS NOT NULL AND c.depth < $2) \
     SELECT * FROM chain ORDER BY depth, id COLLATE \"C\"";
/// A transaction's entries, in order (`gseq` from its default, one by one in the rows' order).
const INSERT_LOG: &str = "INSERT INTO log (writer, seq, time, kind, body, prev, hash) \
     SELECT $1::text, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[])";
const UPDATE_HEAD: &str = "UPDATE writer_heads SET wseq = $2, hash = $3 WHERE writer = $1";
const LOG_COLUMNS: &str = "seq, time, kind, body, prev, hash, writer, gseq";
/// The columns of a log of one chain (a schema before [`CHAINS_VERSION`], read by `remit audit`).
const ONE_CHAIN_COLUMNS: &str = "seq, time, kind, body, prev, hash, '', seq";

fn approval_of(row: &Row) -> StoredApproval {
    StoredApproval {
        id: row.get(0),
        kind: row.get(1),
        mandate: row.get(2),
        issued_at: row.get(3),
        expires_at: row.get(4),
        tool: row.get(5),
        target: row.get(6),
        digest: row.get(7),
        manifest: row.get(8),
        single_use: row.get(9),
        consumed: row.get(10),
        approver: row.get(11),
        access_request: row.get(12),
        consumed_by: row.get(13),
        consumed_at: row.get(14),
        agent: row.get(15),
    }
}

/// A JSON column, read with the project's parser (the values hold request data; see crates/remit-lang/src/json.rs).
fn json_column(row: &Row, index: usize) -> StoreResult<serde_json::Value> {
    let text: String = row.get(index);
    remit_lang::json::parse_stored(&text).map_err(|e| StoreError(format!("column {index}: {e}")))
}

fn request_of(row: &Row, listed: bool) -> StoreResult<AccessRequest> {
    let length: Option<i32> = if listed { row.get(23) } else { None };
    let cut = length.filter(|n| *n as usize > LIST_ARGUMENTS_CHARS);
    let arguments = match cut {
        Some(_) => serde_json::Value::String(row.get(12)),
        None => json_column(row, 12)?,
    };
    let strings = |index| -> StoreResult<Vec<String>> {
        serde_json::from_value(json_column(row, index)?).map_err(|e| StoreError(format!("column {index}: {e}")))
    };
    let earlier: Option<String> = row.get(21);
    let earlier = match earlier {
        Some(text) => serde_json::from_str(&text).map_err(|e| StoreError(format!("earlier uses: {e}")))?,
        None => Vec::new(),
    };
    Ok(AccessRequest {
        id: row.get(0),
        status: row.get(1),
        created_at: row.get(2),
        expires_at: row.get(3),
        principal: row.get(4),
        agent: row.get(5),
        credential: row.get(6),
        mandate: row.get(7),
        tool: row.get(8),
        target: row.get(9),
        digest: row.get(10),
        manifest: row.get(11),
        arguments,
        missing_approvals: json_column(row, 13)?,
        reasons: strings(14)?,
        chain: strings(15)?,
        decision_id: row.get(16),
        key: row.get(17),
        decided_by: row.get(18),
        decided_at: row.get(19),
        log_seq: row.get::<_, Option<i64>>(20).map(|seq| seq as u64),
        log_writer: row.get(22),
        earlier,
        arguments_truncated: cut.map(|n| n as u64),
    })
}

fn log_of(row: &Row) -> LogEntry {
    LogEntry {
        seq: row.get::<_, i64>(0) as u64,
        writer: row.get(6),
        gseq: row.get::<_, i64>(7) as u64,
        time: row.get(1),
        kind: row.get(2),
        body: row.get(3),
        prev: row.get(4),
        hash: row.get(5),
    }
}

/// A [`GrantRecord`] from a row of `grants` (the columns in the order the grant reads select them).
fn grant_of(row: &Row) -> StoreResult<GrantRecord> {
    let params: String = row.get(5);
    let params = match remit_lang::json::parse_stored(&params) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return Err(StoreError("a grant's parameters are not a JSON object".into())),
    };
    Ok(GrantRecord {
        id: row.get(0),
        version: row.get::<_, i64>(1) as u64,
        template: row.get(2),
        principal: row.get(3),
        holder: row.get(4),
        params,
        granted_by: row.get(6),
        granted_at: row.get(7),
        revoked_at: row.get(8),
        parent: row.get(9),
    })
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serializes")
}

type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

impl<'a> PgTx<'a> {
    fn new(store: &'a PostgresStore, client: Object, writes: bool, now: i64, head: (u64, String)) -> PgTx<'a> {
        PgTx {
            store,
            client: Some(client),
            writes,
            now,
            head,
            entries: Vec::new(),
            pending: Vec::new(),
            savepoint: None,
            failed: None,
            fatal: false,
            state: None,
            ahead: None,
            grants_ahead: None,
            instances_ahead: None,
            counts: Vec::new(),
            operations: Vec::new(),
        }
    }

    fn client(&self) -> StoreResult<&Object> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.client.as_ref().ok_or_else(|| StoreError("the transaction has ended".into()))
    }

    /// Runs what is pending, then `statements` (each with its parameters), as one pipeline (one round trip), and
    /// gives each statement's rows. A failure marks the transaction failed until a savepoint is rolled back to.
    fn pipeline(&mut self, statements: &[(&str, Params<'_>)]) -> StoreResult<Vec<Vec<Row>>> {
        self.queue_kept()?;
        let pending = std::mem::take(&mut self.pending);
        // Writes queued before the current savepoint are earlier jobs' (or there is no savepoint): a failure then
        // cannot be rolled back to a savepoint.
        // Without a savepoint opened, a failure cannot be rolled back to one; with one queued, neither can a failure
        // of the writes queued before it (earlier decisions').
        let earlier = match self.savepoint.as_ref().map(|s| s.opened) {
            Some(Opened::Queued(at)) => pending[..at].iter().any(|item| matches!(item, Item::Write(..))),
            Some(Opened::Sent) => false,
            Some(Opened::No) | None => true,
        };
        if let Some(savepoint) = self.savepoint.as_mut().filter(|s| s.opened != Opened::No) {
            savepoint.opened = Opened::Sent;
        }
        let store = self.store;
        let client = self.client()?;
        let stats = &store.stats;
        stats.statements.fetch_add((pending.len() + statements.len()) as u64, Ordering::Relaxed);
        stats.round_trips.fetch_add(1, Ordering::Relaxed);
        let answer = store.answered(async {
            // Prepared first (from the connection's cache after the first time: no round trip then).
            let mut prepared_pending = Vec::with_capacity(pending.len());
            for item in &pending {
                prepared_pending.push(match item {
                    Item::Simple(_) => None,
                    Item::Write(sql, _) => Some(client.prepare_cached(sql).await?),
                });
            }
            let mut prepared = Vec::with_capacity(statements.len());
            for (sql, _) in statements {
                prepared.push(client.prepare_cached(sql).await?);
            }
            // Each request is sent when its future is first polled, and `join_all` polls them in order: one
            // pipeline, in the order given.
            let before = pending.iter().zip(&prepared_pending).map(|(item, statement)| async move {
                match (item, statement) {
                    (Item::Write(_, params), Some(statement)) => {
                        let params: Vec<&(dyn ToSql + Sync)> =
                            params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect();
                        client.execute(statement, &params).await.map(|_| ())
                    }
                    (Item::Simple(sql), _) | (Item::Write(sql, _), None) => client.batch_execute(sql).await,
                }
            });
            let queries =
                statements.iter().zip(&prepared).map(|((_, params), statement)| client.query(statement, params));
            let (before, rows) = futures_util::future::join(
                futures_util::future::join_all(before),
                futures_util::future::join_all(queries),
            )
            .await;
            before.into_iter().collect::<Result<Vec<()>, _>>()?;
            rows.into_iter().collect::<Result<Vec<_>, _>>()
        });
        let Some(result) = answer else {
            // In the middle of a transaction, its state unknown: the connection is given up, and the transaction
            // can only fail (nothing of it is answered before its commit, which never came back).
            if let Some(client) = self.client.take() {
                let _ = Object::take(client);
            }
            let e = store.unanswered();
            self.failed = Some(e.clone());
            self.fatal = true;
            return Err(e);
        };
        result.map_err(|e| {
            let e = store_err(e);
            self.failed = Some(e.clone());
            self.fatal |= earlier;
            if e.is_conflict() {
                stats.conflicts.fetch_add(1, Ordering::Relaxed);
            }
            e
        })
    }

    /// Queues the counts and operations kept so far as (at most) two statements for each side of the current
    /// decision's savepoint: those of earlier decisions before it (where a rollback to it does not reach them),
    /// the decision's own after it (opening it first when it has not been).
    fn queue_kept(&mut self) -> StoreResult<()> {
        if self.counts.is_empty() && self.operations.is_empty() {
            return Ok(());
        }
        let (counts, operations) = match &self.savepoint {
            Some(s) if s.opened != Opened::Sent => (s.counts, s.operations),
            // Everything kept is the decision's, after its savepoint (sent), or there is no decision.
            Some(_) => (0, 0),
            None => (self.counts.len(), self.operations.len()),
        };
        let own_counts = self.counts.split_off(counts);
        let own_operations = self.operations.split_off(operations);
        let earlier = kept_statements(&std::mem::take(&mut self.counts), &std::mem::take(&mut self.operations));
        match self.savepoint.as_mut().map(|s| (s.opened, s)) {
            Some((Opened::Queued(at), savepoint)) => {
                let n = earlier.len();
                savepoint.opened = Opened::Queued(at + n);
                self.pending.splice(at..at, earlier);
            }
            _ => self.pending.extend(earlier),
        }
        if !own_counts.is_empty() || !own_operations.is_empty() {
            self.opening()?;
            self.pending.extend(kept_statements(&own_counts, &own_operations));
        }
        if let Some(savepoint) = &mut self.savepoint {
            (savepoint.counts, savepoint.operations) = (0, 0);
        }
        Ok(())
    }

    /// Sends what is pending now (its errors are this call's).
    fn flush(&mut self) -> StoreResult<()> {
        self.pipeline(&[]).map(|_| ())
    }

    /// Queues a write whose result nobody reads, to go with the next statement.
    fn defer(&mut self, sql: &'static str, params: Vec<Box<dyn ToSql + Sync + Send>>) -> StoreResult<()> {
        self.opening()?;
        self.pending.push(Item::Write(sql, params));
        Ok(())
    }

    fn query(&mut self, sql: &str, params: Params<'_>) -> StoreResult<Vec<Row>> {
        Ok(self.pipeline(&[(sql, params)])?.pop().unwrap_or_default())
    }

    fn query_opt(&mut self, sql: &str, params: Params<'_>) -> StoreResult<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs a statement that changes rows and gives how many it changed (statements end with `RETURNING 1`).
    fn execute(&mut self, sql: &str, params: Params<'_>) -> StoreResult<u64> {
        self.opening()?;
        Ok(self.query(sql, params)?.len() as u64)
    }

    /// Keeps what was read ahead up to date with a count of this transaction.
    fn counted(&mut self, counter: &str, window: &str) {
        if let Some(value) =
            self.ahead.as_mut().and_then(|a| a.counters.get_mut(&(counter.to_string(), window.to_string())))
        {
            *value += 1;
        }
    }

    /// Before a statement that writes: refuses it in a read transaction, and opens the decision's savepoint.
    fn opening(&mut self) -> StoreResult<()> {
        self.writing()?;
        if let Some(savepoint) = self.savepoint.as_mut().filter(|s| s.opened == Opened::No) {
            savepoint.opened = Opened::Queued(self.pending.len());
            self.pending.push(Item::Simple("SAVEPOINT job"));
        }
        Ok(())
    }

    /// Refuses a write in a read transaction.
    fn writing(&self) -> StoreResult<()> {
        if self.writes {
            Ok(())
        } else {
            Err(StoreError("a read transaction does not write".into()))
        }
    }

    /// Queues the entries appended so far and the head after them (before the log is read in this transaction, and
    /// at the commit).
    fn queue_log(&mut self) -> StoreResult<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        if self.savepoint.as_ref().is_some_and(|s| s.entries > 0) {
            // Rolling the savepoint back would then take entries appended before it out of the database.
            return Err(StoreError("the log is read inside a savepoint after entries were appended".into()));
        }
        self.opening()?;
        let entries = std::mem::take(&mut self.entries);
        if let Some(savepoint) = &mut self.savepoint {
            // What the savepoint would roll back is now queued after it, where the rollback reaches it.
            savepoint.entries = 0;
        }
        let (appended, head) = log_columns(&self.store.writer, &entries, &self.head);
        self.pending.push(Item::Write(INSERT_LOG, appended));
        let mut head_params: Columns = vec![Box::new(self.store.writer.clone())];
        head_params.extend(head);
        self.pending.push(Item::Write(UPDATE_HEAD, head_params));
        Ok(())
    }
}

/// Approvals and counters read ahead for a batch's decisions (in a write transaction: the counters locked, so nothing
/// but this transaction changes them; an approval may be consumed by another replica meanwhile, which the conditional
/// update that consumes it finds: the decision is then denied, never allowed).
#[derive(Debug)]
struct Ahead {
    /// The time they were read live at: a decision at an earlier time is not answered from here.
    now: i64,
    /// Per mandate read, its approvals live at `now`, by id.
    approvals: std::collections::HashMap<String, Vec<StoredApproval>>,
    /// Every counter read, with its value (0 for none yet).
    counters: std::collections::HashMap<(String, String), u64>,
}

impl Ahead {
    /// What a decision at `now` reads, when everything it needs was read ahead.
    fn answer(
        &self,
        mandates: &[String],
        counters: &[(String, String)],
        now: i64,
    ) -> Option<(Vec<StoredApproval>, Vec<u64>)> {
        if now < self.now {
            return None;
        }
        let mut approvals = Vec::new();
        for mandate in mandates {
            approvals.extend(self.approvals.get(mandate)?.iter().filter(|a| a.expires_at > now).cloned());
        }
        let values = counters.iter().map(|key| self.counters.get(key).copied()).collect::<Option<Vec<u64>>>()?;
        Some((approvals, values))
    }
}

/// All the counts of a transaction not sent yet in one statement: summed per counter (a row is updated once per
/// statement), made or incremented in sorted order, as the batch locked them.
const COUNT_ALL: &str = "INSERT INTO counters (counter, counter_window, value) \
     SELECT c, w, n FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(c, w, n) ORDER BY c, w \
     ON CONFLICT (counter, counter_window) DO UPDATE SET value = counters.value + excluded.value";
/// All the operations of a transaction not sent yet in one statement, in the order they were recorded (`id` from
/// its sequence, row by row).
const RECORD_OPERATIONS: &str = "INSERT INTO operations (operation, decision_id, tool, time) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])";

/// The statements that write `counts` (summed per counter) and `operations`: none, one or two.
fn kept_statements(counts: &[(String, String)], operations: &[OperationRecord]) -> Vec<Item> {
    let mut items = Vec::new();
    let (counted, recorded) = kept_columns(counts, operations);
    if !counts.is_empty() {
        items.push(Item::Write(COUNT_ALL, counted));
    }
    if !operations.is_empty() {
        items.push(Item::Write(RECORD_OPERATIONS, recorded));
    }
    items
}

/// A statement's parameters, as a pipeline keeps them.
type Columns = Vec<Box<dyn ToSql + Sync + Send>>;

/// The parameters of [`COUNT_ALL`] (the counts summed per counter, in sorted order) and of [`RECORD_OPERATIONS`].
fn kept_columns(counts: &[(String, String)], operations: &[OperationRecord]) -> (Columns, Columns) {
    let mut summed: std::collections::BTreeMap<&(String, String), i64> = std::collections::BTreeMap::new();
    for key in counts {
        *summed.entry(key).or_default() += 1;
    }
    let names: Vec<String> = summed.keys().map(|(c, _)| c.clone()).collect();
    let windows: Vec<String> = summed.keys().map(|(_, w)| w.clone()).collect();
    let values: Vec<i64> = summed.into_values().collect();
    let column = |f: fn(&OperationRecord) -> &String| operations.iter().map(f).cloned().collect::<Vec<String>>();
    (
        vec![Box::new(names), Box::new(windows), Box::new(values)],
        vec![
            Box::new(column(|o| &o.operation)),
            Box::new(column(|o| &o.decision_id)),
            Box::new(column(|o| &o.tool)),
            Box::new(operations.iter().map(|o| o.time).collect::<Vec<i64>>()),
        ],
    )
}

/// What a transaction writes at its commit, in one statement (data-modifying `WITH` queries, each of a table of
/// its own): the counts and operations kept ([`COUNT_ALL`], [`RECORD_OPERATIONS`]: an empty array inserts no row),
/// the log's entries ([`INSERT_LOG`]) and this writer's head ([`UPDATE_HEAD`]) — one statement, not four, in the
/// commit's pipeline.
const COMMIT_WRITES: &str = "WITH counted AS (INSERT INTO counters (counter, counter_window, value) \
     SELECT c, w, n FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(c, w, n) ORDER BY c, w \
     ON CONFLICT (counter, counter_window) DO UPDATE SET value = counters.value + excluded.value), \
     recorded AS (INSERT INTO operations (operation, decision_id, tool, time) \
     SELECT * FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[])), \
     logged AS (INSERT INTO log (writer, seq, time, kind, body, prev, hash) \
     SELECT $8::text, * FROM unnest($9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::text[])) \
     UPDATE writer_heads SET wseq = $15, hash = $16 WHERE writer = $8";

/// What waits in a transaction's pipeline.
enum Item {
    /// A command sent with the simple protocol.
    Simple(&'static str),
    /// A statement and its parameters.
    Write(&'static str, Vec<Box<dyn ToSql + Sync + Send>>),
}

/// The parameters that append `entries` to `writer`'s chain: the writer and the entries' columns (`INSERT_LOG`'s),
/// and the head after them (its seq and hash: `UPDATE_HEAD`'s after the writer).
fn log_columns(writer: &str, entries: &[LogEntry], head: &(u64, String)) -> (Columns, Columns) {
    let column = |f: fn(&LogEntry) -> &String| entries.iter().map(f).cloned().collect::<Vec<String>>();
    let appended: Columns = vec![
        Box::new(writer.to_string()),
        Box::new(entries.iter().map(|e| e.seq as i64).collect::<Vec<i64>>()),
        Box::new(entries.iter().map(|e| e.time).collect::<Vec<i64>>()),
        Box::new(column(|e| &e.kind)),
        Box::new(column(|e| &e.body)),
        Box::new(column(|e| &e.prev)),
        Box::new(column(|e| &e.hash)),
    ];
    (appended, vec![Box::new(head.0 as i64), Box::new(head.1.clone())])
}

impl Tx for PgTx<'_> {
    fn now(&self) -> Option<i64> {
        self.store.database_clock.then_some(self.now)
    }

    fn writer(&self) -> &str {
        &self.store.writer
    }

    fn stops(&mut self) -> StoreResult<Vec<String>> {
        let rows = self.query("SELECT mandate FROM stops ORDER BY mandate COLLATE \"C\"", &[])?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn facts(&mut self) -> StoreResult<Vec<(String, FactVersion)>> {
        Ok(self.decision_state()?.facts)
    }

    fn stop_records(&mut self) -> StoreResult<Vec<StopRecord>> {
        Ok(self.decision_state()?.records)
    }

    fn decision_state(&mut self) -> StoreResult<DecisionState> {
        if let Some(state) = &self.state {
            return Ok(state.clone());
        }
        let rows = self.query(DECISION_STATE, &[])?;
        let state = decision_state_of(&rows)?;
        self.state = Some(state.clone());
        Ok(state)
    }

    fn read_for_decision(
        &mut self,
        mandates: &[String],
        counters: &[(String, String)],
        now: i64,
    ) -> StoreResult<(Vec<StoredApproval>, DecisionState, Vec<u64>)> {
        if let (Some(ahead), Some(state)) = (&self.ahead, &self.state) {
            if let Some((approvals, values)) = ahead.answer(mandates, counters, now) {
                return Ok((approvals, state.clone(), values));
            }
        }
        let names: Vec<&str> = counters.iter().map(|(c, _)| c.as_str()).collect();
        let windows: Vec<&str> = counters.iter().map(|(_, w)| w.as_str()).collect();
        let kept = self.state.clone();
        let mut statements: Vec<(&str, Params<'_>)> = Vec::new();
        if kept.is_none() {
            statements.push((DECISION_STATE, &[]));
        }
        let approvals_params: [&(dyn ToSql + Sync); 2] = [&mandates, &now];
        let counter_params: [&(dyn ToSql + Sync); 2] = [&names, &windows];
        if !mandates.is_empty() {
            statements.push((LIVE_APPROVALS, &approvals_params));
        }
        // In a write transaction the counters are made if missing and locked first (another replica's batch counting
        // one of them then waits), then read.
        let make = self.writes && !counters.is_empty();
        if make {
            statements.push((COUNTERS_LOCKED, &counter_params));
        }
        if !counters.is_empty() {
            statements.push((COUNTERS, &counter_params));
        }
        let mut results = self.pipeline(&statements)?.into_iter();
        let state = match kept {
            Some(state) => state,
            None => decision_state_of(&results.next().unwrap_or_default())?,
        };
        self.state = Some(state.clone());
        let approvals = if mandates.is_empty() {
            Vec::new()
        } else {
            results.next().unwrap_or_default().iter().map(approval_of).collect()
        };
        if make {
            results.next();
        }
        let mut values = vec![0u64; counters.len()];
        for row in results.next().unwrap_or_default() {
            let (counter, window, value): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
            for (slot, key) in values.iter_mut().zip(counters) {
                if key.0 == counter && key.1 == window {
                    *slot = value as u64;
                }
            }
        }
        Ok((approvals, state, values))
    }

    fn prefetch(&mut self, mandates: &[String], counters: &[(String, String)], now: i64) -> StoreResult<()> {
        if !self.writes {
            return Ok(());
        }
        // One round trip for the whole batch; the counters made and locked in sorted order (`COUNTERS_LOCKED`).
        let (approvals, state, values) = self.read_for_decision(mandates, counters, now)?;
        let mut ahead = Ahead {
            now,
            approvals: mandates.iter().map(|m| (m.clone(), Vec::new())).collect(),
            counters: counters.iter().cloned().zip(values).collect(),
        };
        for approval in approvals {
            if let Some(live) = ahead.approvals.get_mut(&approval.mandate) {
                live.push(approval);
            }
        }
        self.state = Some(state);
        self.ahead = Some(ahead);
        Ok(())
    }

    fn live_approvals(&mut self, mandates: &[String], now: i64) -> StoreResult<Vec<StoredApproval>> {
        let rows = self.query(LIVE_APPROVALS, &[&mandates, &now])?;
        Ok(rows.iter().map(approval_of).collect())
    }

    fn approvals_of_request(&mut self, access_request: &str) -> StoreResult<Vec<StoredApproval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE access_request = $1 ORDER BY id");
        Ok(self.query(&sql, &[&access_request])?.iter().map(approval_of).collect())
    }

    fn approval(&mut self, id: &str) -> StoreResult<Option<StoredApproval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1");
        Ok(self.query_opt(&sql, &[&id])?.as_ref().map(approval_of))
    }

    fn counter(&mut self, counter: &str, window: &str) -> StoreResult<u64> {
        if self.writes {
            let key = [(counter.to_string(), window.to_string())];
            return Ok(self.read_for_decision(&[], &key, self.now)?.2[0]);
        }
        let sql = "SELECT value FROM counters WHERE counter = $1 AND counter_window = $2";
        let row = self.query_opt(sql, &[&counter, &window])?;
        Ok(row.map_or(0, |row| row.get::<_, i64>(0) as u64))
    }

    fn access_request(&mut self, id: &str) -> StoreResult<Option<AccessRequest>> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM access_requests WHERE id = $1");
        self.query_opt(&sql, &[&id])?.map(|row| request_of(&row, false)).transpose()
    }

    fn pending_access_request(&mut self, key: &str, now: i64) -> StoreResult<Option<AccessRequest>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM access_requests WHERE key = $1 AND status = 'pending' AND expires_at > $2 \
             ORDER BY created_at DESC LIMIT 1"
        );
        self.query_opt(&sql, &[&key, &now])?.map(|row| request_of(&row, false)).transpose()
    }

    fn access_requests(&mut self, status: Option<&str>) -> StoreResult<Vec<AccessRequest>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM access_requests WHERE $1::text IS NULL OR status = $1 \
             ORDER BY created_at DESC, id COLLATE \"C\" LIMIT 1000"
        );
        self.query(&sql, &[&status])?.iter().map(|row| request_of(row, false)).collect()
    }

    fn access_request_page(
        &mut self,
        status: Option<&str>,
        after: Option<&Cursor>,
        limit: usize,
        keep: &mut dyn FnMut(&AccessRequest) -> bool,
    ) -> StoreResult<Page> {
        // As the SQLite store: every request after the cursor is looked at (its arguments cut) until `keep` admitted
        // one more than the page holds. Read in chunks, so a long list is not held at once.
        let sql = format!(
            "SELECT id, status, created_at, expires_at, principal, agent, credential, mandate, tool, target, digest, \
             manifest, substr(arguments, 1, {LIST_ARGUMENTS_CHARS}), missing_approvals, reasons, chain, decision_id, \
             key, decided_by, decided_at, log_seq, earlier, log_writer, char_length(arguments) FROM access_requests \
             WHERE ($1::text IS NULL OR status = $1) \
             AND ($2::bigint IS NULL OR created_at < $2 OR (created_at = $2 AND id COLLATE \"C\" > $3)) \
             ORDER BY created_at DESC, id COLLATE \"C\" LIMIT 500"
        );
        let mut page = Page::default();
        let (mut at, mut id) = (after.map(|c| c.created_at), after.map(|c| c.id.clone()));
        loop {
            let rows = self.query(&sql, &[&status, &at, &id])?;
            let done = rows.len() < 500;
            for row in &rows {
                let request = request_of(row, true)?;
                (at, id) = (Some(request.created_at), Some(request.id.clone()));
                if !keep(&request) {
                    continue;
                }
                if page.requests.len() == limit {
                    page.next = page.requests.last().map(Cursor::of);
                    return Ok(page);
                }
                page.requests.push(request);
            }
            if done {
                return Ok(page);
            }
        }
    }

    fn earlier_uses(&mut self, key: &str) -> StoreResult<Vec<EarlierUse>> {
        let rows = self.query(
            "SELECT a.id, a.access_request, a.approver, a.consumed_by, a.consumed_at FROM access_requests r \
             JOIN approvals a ON a.access_request = r.id WHERE r.key = $1 AND a.consumed \
             ORDER BY a.consumed_at DESC NULLS LAST, a.id COLLATE \"C\" LIMIT $2",
            &[&key, &(MAX_EARLIER as i64)],
        )?;
        Ok(rows
            .iter()
            .map(|row| EarlierUse {
                approval: row.get(0),
                access_request: row.get(1),
                approved_by: row.get(2),
                consumed_by: row.get(3),
                consumed_at: row.get(4),
            })
            .collect())
    }

    fn operations(&mut self, operation: &str) -> StoreResult<Vec<OperationRecord>> {
        let rows = self.query(
            "SELECT operation, decision_id, tool, time FROM operations WHERE operation = $1 ORDER BY id",
            &[&operation],
        )?;
        Ok(rows
            .iter()
            .map(|row| OperationRecord {
                operation: row.get(0),
                decision_id: row.get(1),
                tool: row.get(2),
                time: row.get(3),
            })
            .collect())
    }

    fn log_head(&mut self) -> StoreResult<(u64, String)> {
        if self.writes {
            return Ok(self.head.clone());
        }
        let writer = self.store.writer.clone();
        if writer.is_empty() {
            return Ok((0, GENESIS.to_string()));
        }
        let row = self.query_opt("SELECT wseq, hash FROM writer_heads WHERE writer = $1", &[&writer])?;
        Ok(row.map_or((0, writer_genesis(&writer)), |row| (row.get::<_, i64>(0) as u64, row.get(1))))
    }

    fn log_entries(&mut self, from: u64, limit: usize) -> StoreResult<Vec<LogEntry>> {
        self.queue_log()?;
        let limit = limit.min(i64::MAX as usize) as i64;
        let sql = if self.store.chains {
            format!("SELECT {LOG_COLUMNS} FROM log WHERE gseq >= $1 ORDER BY gseq LIMIT $2")
        } else {
            format!("SELECT {ONE_CHAIN_COLUMNS} FROM log WHERE seq >= $1 ORDER BY seq LIMIT $2")
        };
        let rows = self.query(&sql, &[&(from as i64), &limit])?;
        Ok(rows.iter().map(log_of).collect())
    }

    fn log_entry(&mut self, writer: &str, seq: u64) -> StoreResult<Option<LogEntry>> {
        self.queue_log()?;
        let sql = if self.store.chains {
            format!("SELECT {LOG_COLUMNS} FROM log WHERE writer = $1 AND seq = $2")
        } else {
            format!("SELECT {ONE_CHAIN_COLUMNS} FROM log WHERE $1 = '' AND seq = $2")
        };
        Ok(self.query_opt(&sql, &[&writer, &(seq as i64)])?.as_ref().map(log_of))
    }

    fn consume_approval(&mut self, id: &str, decision: &str, at: i64) -> StoreResult<bool> {
        if let Some(ahead) = &mut self.ahead {
            for live in ahead.approvals.values_mut() {
                live.retain(|a| a.id != id);
            }
        }
        let changed = self.execute(
            "UPDATE approvals SET consumed = true, consumed_by = $2, consumed_at = $3 WHERE id = $1 AND NOT consumed \
             RETURNING 1",
            &[&id, &decision, &at],
        )?;
        Ok(changed == 1)
    }

    fn increment_counter(&mut self, counter: &str, window: &str) -> StoreResult<u64> {
        self.counted(counter, window);
        self.opening()?;
        let row = self.query_opt(
            "INSERT INTO counters (counter, counter_window, value) VALUES ($1, $2, 1) \
             ON CONFLICT (counter, counter_window) DO UPDATE SET value = counters.value + 1 RETURNING value",
            &[&counter, &window],
        )?;
        Ok(row.map_or(0, |row| row.get::<_, i64>(0) as u64))
    }

    fn count(&mut self, counter: &str, window: &str) -> StoreResult<()> {
        // Kept, and sent with the next statement with every other count kept (`queue_kept`): one statement for
        // the batch's counts, not one per decision.
        self.writing()?;
        self.counted(counter, window);
        self.counts.push((counter.to_string(), window.to_string()));
        Ok(())
    }

    fn record_operation(&mut self, record: &OperationRecord) -> StoreResult<()> {
        self.writing()?;
        self.operations.push(record.clone());
        Ok(())
    }

    fn insert_approval(&mut self, a: &StoredApproval) -> StoreResult<()> {
        self.ahead = None;
        let sql = format!(
            "INSERT INTO approvals ({APPROVAL_COLUMNS}) \
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16) RETURNING 1"
        );
        self.execute(
            &sql,
            &[
                &a.id,
                &a.kind,
                &a.mandate,
                &a.issued_at,
                &a.expires_at,
                &a.tool,
                &a.target,
                &a.digest,
                &a.manifest,
                &a.single_use,
                &a.consumed,
                &a.approver,
                &a.access_request,
                &a.consumed_by,
                &a.consumed_at,
                &a.agent,
            ],
        )?;
        Ok(())
    }

    fn insert_access_request(&mut self, r: &AccessRequest) -> StoreResult<()> {
        self.opening()?;
        // A pending request holds its key in `pending_key` (unique) until it is answered, or until a new request
        // for the key finds it expired: at most one live pending request per key, whoever files it.
        let pending_key = (r.status == PENDING).then_some(r.key.as_str());
        let sql = format!(
            "INSERT INTO access_requests ({REQUEST_COLUMNS}, pending_key) \
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24)"
        );
        let (arguments, missing, reasons, chain) =
            (json(&r.arguments), json(&r.missing_approvals), json(&r.reasons), json(&r.chain));
        let (log_seq, earlier) = (r.log_seq.map(|seq| seq as i64), (!r.earlier.is_empty()).then(|| json(&r.earlier)));
        let params: [&(dyn ToSql + Sync); 24] = [
            &r.id,
            &r.status,
            &r.created_at,
            &r.expires_at,
            &r.principal,
            &r.agent,
            &r.credential,
            &r.mandate,
            &r.tool,
            &r.target,
            &r.digest,
            &r.manifest,
            &arguments,
            &missing,
            &reasons,
            &chain,
            &r.decision_id,
            &r.key,
            &r.decided_by,
            &r.decided_at,
            &log_seq,
            &earlier,
            &r.log_writer,
            &pending_key,
        ];
        self.pipeline(&[
            (
                "UPDATE access_requests SET pending_key = NULL WHERE pending_key = $1 AND expires_at <= $2",
                &[&r.key, &r.created_at],
            ),
            (&sql, &params),
        ])?;
        Ok(())
    }

    fn decide_access_request(&mut self, id: &str, status: &str, by: &str, at: i64) -> StoreResult<()> {
        let changed = self.execute(
            "UPDATE access_requests SET status = $2, decided_by = $3, decided_at = $4, pending_key = NULL \
             WHERE id = $1 AND status = 'pending' RETURNING 1",
            &[&id, &status, &by, &at],
        )?;
        if changed == 0 {
            return Err(StoreError(format!("access request `{id}` is not pending (answered already, or unknown)")));
        }
        Ok(())
    }

    fn set_stop(&mut self, mandate: &str, active: bool) -> StoreResult<()> {
        self.state = None;
        let sql = if active {
            "INSERT INTO stops (mandate) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1"
        } else {
            "DELETE FROM stops WHERE mandate = $1 RETURNING 1"
        };
        self.execute(sql, &[&mandate])?;
        Ok(())
    }

    fn set_stop_record(&mut self, stop: &StopRecord) -> StoreResult<()> {
        self.state = None;
        self.execute(
            "INSERT INTO stop_records (id, level, mandate, principal) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO \
             UPDATE SET level = excluded.level, mandate = excluded.mandate, principal = excluded.principal RETURNING 1",
            &[&stop.id, &stop.level, &stop.mandate, &stop.principal],
        )?;
        Ok(())
    }

    fn clear_stop_record(&mut self, id: &str) -> StoreResult<bool> {
        self.state = None;
        Ok(self.execute("DELETE FROM stop_records WHERE id = $1 RETURNING 1", &[&id])? > 0)
    }

    fn set_fact(&mut self, name: &str, version: &FactVersion) -> StoreResult<()> {
        self.state = None;
        // A number is kept as the bits of its u64 (as SQLite keeps it), a text as text: never one read as the other.
        let (number, text) = match version {
            FactVersion::Number(n) => (Some(*n as i64), None),
            FactVersion::Text(text) => (None, Some(text.as_str())),
        };
        self.execute(
            "INSERT INTO facts (name, number, text) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE \
             SET number = excluded.number, text = excluded.text RETURNING 1",
            &[&name, &number, &text],
        )?;
        Ok(())
    }

    fn keep_round(&mut self, key: &str, carried: &str, expires_at: i64, now: i64) -> StoreResult<()> {
        self.opening()?;
        self.pipeline(&[
            ("DELETE FROM rounds WHERE expires_at <= $1", &[&now]),
            (
                "INSERT INTO rounds (key, carried, expires_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE \
                 SET carried = excluded.carried, expires_at = excluded.expires_at",
                &[&key, &carried, &expires_at],
            ),
        ])?;
        Ok(())
    }

    fn take_round(&mut self, key: &str, now: i64) -> StoreResult<Option<String>> {
        self.opening()?;
        let row = self.query_opt("DELETE FROM rounds WHERE key = $1 RETURNING carried, expires_at", &[&key])?;
        Ok(row.filter(|row| row.get::<_, i64>(1) > now).map(|row| row.get(0)))
    }

    fn bundle_revision(&mut self) -> StoreResult<Option<(u64, String)>> {
        // Locked in a write transaction: read, then set by `bundle::admit`, by one replica at a time.
        let sql = if self.writes {
            "SELECT revision, policy FROM bundle_revision WHERE id = 1 FOR UPDATE"
        } else {
            "SELECT revision, policy FROM bundle_revision WHERE id = 1"
        };
        let row = self.query_opt(sql, &[])?;
        Ok(row.map(|row| (row.get::<_, i64>(0) as u64, row.get(1))))
    }

    fn publish_bundle(&mut self, bundle: &PublishedBundle) -> StoreResult<u64> {
        self.opening()?;
        let row = self.query_opt(
            "INSERT INTO published_bundles (revision, policy, sha256, bytes, published_by, published_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            &[
                &(bundle.revision as i64),
                &bundle.policy,
                &bundle.sha256,
                &bundle.bytes,
                &bundle.published_by,
                &bundle.published_at,
            ],
        )?;
        let id = row.ok_or_else(|| StoreError("the published bundle was given no id".into()))?.get::<_, i64>(0);
        Ok(id as u64)
    }

    fn published_bundle_id(&mut self) -> StoreResult<Option<u64>> {
        let row = self.query_opt("SELECT max(id) FROM published_bundles", &[])?;
        Ok(row.and_then(|row| row.get::<_, Option<i64>>(0)).map(|id| id as u64))
    }

    fn published_bundle(&mut self, below: Option<u64>) -> StoreResult<Option<PublishedBundle>> {
        let below = below.map_or(i64::MAX, |id| id.min(i64::MAX as u64) as i64);
        let row = self.query_opt(
            "SELECT id, revision, policy, sha256, published_by, published_at, bytes FROM published_bundles \
             WHERE id < $1 ORDER BY id DESC LIMIT 1",
            &[&below],
        )?;
        Ok(row.map(|row| PublishedBundle {
            id: row.get::<_, i64>(0) as u64,
            revision: row.get::<_, i64>(1) as u64,
            policy: row.get(2),
            sha256: row.get(3),
            published_by: row.get(4),
            published_at: row.get(5),
            bytes: row.get(6),
        }))
    }

    // Grants (docs/grants-design.md): as the SQLite store keeps them. Two replicas changing one instance at once
    // both lock its current row (`grant`, `FOR UPDATE`); the second then reads the first's version and takes the
    // next, or, had it not locked, its insert of a version taken meanwhile fails on the key (a conflict).

    fn put_grant(&mut self, g: &GrantRecord) -> StoreResult<()> {
        self.grants_ahead = None;
        self.instances_ahead = None;
        self.execute("UPDATE grants SET current = false WHERE id = $1 AND current RETURNING 1", &[&g.id])?;
        let params = json(&g.params);
        self.execute(
            "INSERT INTO grants (id, version, template, principal, holder, params, granted_by, granted_at, \
             revoked_at, current, parent) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, true, $10) RETURNING 1",
            &[
                &g.id,
                &(g.version as i64),
                &g.template,
                &g.principal,
                &g.holder,
                &params,
                &g.granted_by,
                &g.granted_at,
                &g.revoked_at,
                &g.parent,
            ],
        )?;
        Ok(())
    }

    fn revoke_grant(&mut self, id: &str, at: i64) -> StoreResult<bool> {
        self.grants_ahead = None;
        self.instances_ahead = None;
        let sql = "UPDATE grants SET revoked_at = $2 WHERE id = $1 AND current AND revoked_at IS NULL RETURNING 1";
        Ok(self.execute(sql, &[&id, &at])? > 0)
    }

    fn grant(&mut self, id: &str) -> StoreResult<Option<GrantRecord>> {
        let sql = if self.writes {
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent FROM grants \
             WHERE id = $1 AND current FOR UPDATE"
        } else {
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent FROM grants \
             WHERE id = $1 AND current"
        };
        let found = self.query(sql, &[&id])?.iter().map(grant_of).next().transpose()?;
        if found.is_none() && self.writes {
            // Under READ COMMITTED a row changed by another replica while this one waited for its lock is not
            // current any more, and its successor is not in this statement's snapshot: a conflict (the core tries
            // again, and then reads the successor), not an instance that does not exist.
            if self.query_opt("SELECT 1 FROM grants WHERE id = $1 LIMIT 1", &[&id])?.is_some() {
                return Err(StoreError::conflict(format!("the grant `{id}` changed meanwhile")));
            }
        }
        Ok(found)
    }

    fn grant_history(&mut self, id: &str) -> StoreResult<Vec<GrantRecord>> {
        let rows = self.query(
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent FROM grants \
             WHERE id = $1 ORDER BY version",
            &[&id],
        )?;
        rows.iter().map(grant_of).collect()
    }

    fn grants(&mut self, principal: Option<&str>, holder: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
        let rows = self.query(
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent FROM grants \
             WHERE current AND ($1::text IS NULL OR principal = $1) AND ($2::text IS NULL OR holder = $2) \
             ORDER BY id COLLATE \"C\"",
            &[&principal, &holder],
        )?;
        rows.iter().map(grant_of).collect()
    }

    fn active_grants(&mut self, holder: &str) -> StoreResult<Vec<GrantRecord>> {
        if let Some(read) = self.grants_ahead.as_ref().and_then(|ahead| ahead.get(holder)) {
            return Ok(read.clone());
        }
        let rows = self.query(
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent FROM grants \
             WHERE holder = $1 AND current AND revoked_at IS NULL ORDER BY id COLLATE \"C\"",
            &[&holder],
        )?;
        rows.iter().map(grant_of).collect()
    }

    fn active_grant(&mut self, id: &str) -> StoreResult<Option<GrantRecord>> {
        if let Some(read) = self.instances_ahead.as_ref().and_then(|ahead| ahead.get(id)) {
            return Ok(read.clone());
        }
        let rows = self.query(
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent \
             FROM grants WHERE id = $1 AND current AND revoked_at IS NULL",
            &[&id],
        )?;
        rows.iter().map(grant_of).next().transpose()
    }

    fn active_children(&mut self, parent: &str) -> StoreResult<Vec<GrantRecord>> {
        let rows = self.query(
            "SELECT id, version, template, principal, holder, params, granted_by, granted_at, revoked_at, parent \
             FROM grants WHERE parent = $1 AND current AND revoked_at IS NULL ORDER BY id COLLATE \"C\"",
            &[&parent],
        )?;
        rows.iter().map(grant_of).collect()
    }

    fn prefetch_grants(
        &mut self,
        holders: &[String],
    ) -> StoreResult<Option<std::collections::HashMap<String, Vec<GrantRecord>>>> {
        if !self.writes {
            return Ok(None);
        }
        // One read for the whole batch: the holders' instances (on the holder index, in the order `active_grants`
        // gives) and those above them, by parent id.
        let rows = self.query(HELD_AND_ABOVE, &[&holders, &ABOVE_DEPTH])?;
        let mut read: std::collections::HashMap<String, Vec<GrantRecord>> =
            holders.iter().map(|h| (h.clone(), Vec::new())).collect();
        let mut instances: std::collections::HashMap<String, Option<GrantRecord>> = std::collections::HashMap::new();
        // Each id at its lowest depth (rows come by depth): one whose parent was looked up when below the bound.
        let mut looked_up: Vec<String> = Vec::new();
        for row in &rows {
            let grant = grant_of(row)?;
            let depth: i32 = row.get(10);
            if instances.contains_key(&grant.id) {
                continue;
            }
            if depth == 0 {
                if let Some(held) = read.get_mut(&grant.holder) {
                    held.push(grant.clone());
                }
            }
            if depth < ABOVE_DEPTH {
                looked_up
                    .extend(grant.parent.as_deref().map(|p| p.rsplit_once('/').map_or(p, |(_, id)| id).to_string()));
            }
            instances.insert(grant.id.clone(), Some(grant));
        }
        for id in looked_up {
            instances.entry(id).or_insert(None);
        }
        self.instances_ahead = Some(instances);
        self.grants_ahead = Some(read.clone());
        Ok(Some(read))
    }

    // The data sets (docs/gateway.md "Data sets"), as the SQLite store keeps them: rows by origin, `admin` winning.

    fn entity(&mut self, kind: &str, id: &str) -> StoreResult<Option<serde_json::Map<String, serde_json::Value>>> {
        let rows = self.query(
            "SELECT attributes FROM entities WHERE type = $1 AND id = $2 ORDER BY origin COLLATE \"C\"",
            &[&kind, &id],
        )?;
        let mut merged: Option<serde_json::Map<String, serde_json::Value>> = None;
        for row in &rows {
            let text: String = row.get(0);
            let attributes: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)
                .map_err(|e| StoreError(format!("the attributes of `{kind}` `{id}` are not a JSON object: {e}")))?;
            let merged = merged.get_or_insert_with(serde_json::Map::new);
            for (name, value) in attributes {
                merged.entry(name).or_insert(value);
            }
        }
        Ok(merged)
    }

    fn holds(&mut self, relation: &str, a: &str, b: &str) -> StoreResult<bool> {
        let row = self.query_opt(
            "SELECT 1 FROM tuples WHERE relation = $1 AND a = $2 AND b = $3 LIMIT 1",
            &[&relation, &a, &b],
        )?;
        Ok(row.is_some())
    }

    fn related(&mut self, relation: &str, a: &str) -> StoreResult<Vec<String>> {
        let rows = self.query(
            "SELECT DISTINCT b COLLATE \"C\" FROM tuples WHERE relation = $1 AND a = $2 ORDER BY 1",
            &[&relation, &a],
        )?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn entity_ids(&mut self, kind: &str) -> StoreResult<Vec<String>> {
        let rows = self.query("SELECT DISTINCT id COLLATE \"C\" FROM entities WHERE type = $1 ORDER BY 1", &[&kind])?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn put_entity(
        &mut self,
        origin: &str,
        kind: &str,
        id: &str,
        attributes: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> StoreResult<bool> {
        let removed = self.execute(
            "DELETE FROM entities WHERE type = $1 AND id = $2 AND origin = $3 RETURNING 1",
            &[&kind, &id, &origin],
        )?;
        if let Some(attributes) = attributes {
            let text = serde_json::Value::Object(attributes.clone()).to_string();
            self.execute(
                "INSERT INTO entities (type, id, origin, attributes) VALUES ($1, $2, $3, $4) RETURNING 1",
                &[&kind, &id, &origin, &text],
            )?;
        }
        Ok(removed > 0)
    }

    fn set_tuple(&mut self, origin: &str, relation: &str, a: &str, b: &str, holds: bool) -> StoreResult<bool> {
        let sql = if holds {
            "INSERT INTO tuples (relation, a, b, origin) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING 1"
        } else {
            "DELETE FROM tuples WHERE relation = $1 AND a = $2 AND b = $3 AND origin = $4 RETURNING 1"
        };
        let changed = self.execute(sql, &[&relation, &a, &b, &origin])?;
        // An insert that changed nothing found the tuple there; a delete that changed something did.
        Ok(if holds { changed == 0 } else { changed > 0 })
    }

    fn clear_data(&mut self, origin: &str) -> StoreResult<u64> {
        let entities = self.execute("DELETE FROM entities WHERE origin = $1 RETURNING 1", &[&origin])?;
        let tuples = self.execute("DELETE FROM tuples WHERE origin = $1 RETURNING 1", &[&origin])?;
        Ok(entities + tuples)
    }

    fn data_state(&mut self) -> StoreResult<DataState> {
        // Locked in a write transaction: the version is read, then moved on, by one replica at a time.
        let sql = if self.writes {
            "SELECT version, bundle FROM data_state WHERE id = 1 FOR UPDATE"
        } else {
            "SELECT version, bundle FROM data_state WHERE id = 1"
        };
        let row = self.query_opt(sql, &[])?;
        Ok(row.map_or_else(DataState::default, |row| DataState {
            version: row.get::<_, i64>(0) as u64,
            bundle: row.get(1),
        }))
    }

    fn set_data_state(&mut self, state: &DataState) -> StoreResult<()> {
        self.execute(
            "INSERT INTO data_state (id, version, bundle) VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE \
             SET version = excluded.version, bundle = excluded.bundle RETURNING 1",
            &[&(state.version as i64), &state.bundle],
        )?;
        Ok(())
    }

    fn set_bundle_revision(&mut self, revision: u64, policy: &str) -> StoreResult<()> {
        self.execute(
            "INSERT INTO bundle_revision (id, revision, policy) VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE \
             SET revision = excluded.revision, policy = excluded.policy RETURNING 1",
            &[&(revision as i64), &policy],
        )?;
        Ok(())
    }

    fn signed_heads(&mut self) -> StoreResult<Vec<crate::head::SignedHead>> {
        let sql = if self.store.chains {
            "SELECT seq, hash, time, key, signature, writer FROM log_heads ORDER BY id"
        } else {
            "SELECT seq, hash, time, key, signature, '' FROM log_heads ORDER BY id"
        };
        let rows = self.query(sql, &[])?;
        Ok(rows
            .iter()
            .map(|row| crate::head::SignedHead {
                writer: row.get(5),
                seq: row.get::<_, i64>(0) as u64,
                hash: row.get(1),
                time: row.get(2),
                key: row.get(3),
                signature: row.get(4),
            })
            .collect())
    }

    fn insert_signed_head(&mut self, head: &crate::head::SignedHead) -> StoreResult<()> {
        self.execute(
            "INSERT INTO log_heads (seq, hash, time, key, signature, writer) VALUES ($1, $2, $3, $4, $5, $6) \
             RETURNING 1",
            &[&(head.seq as i64), &head.hash, &head.time, &head.key, &head.signature, &head.writer],
        )?;
        Ok(())
    }

    fn append_log(&mut self, time: i64, kind: &str, body: &str) -> StoreResult<LogEntry> {
        self.writing()?;
        let (last, prev) = self.head.clone();
        let seq = last + 1;
        let writer = self.store.writer.clone();
        let hash = chain_hash(&prev, &writer, seq, time, kind, body);
        // `gseq` is taken when the entry is inserted, with the commit: unknown (0) until then.
        let entry = LogEntry { seq, writer, gseq: 0, time, kind: kind.to_string(), body: body.to_string(), prev, hash };
        self.head = (seq, entry.hash.clone());
        self.entries.push(entry.clone());
        Ok(entry)
    }

    fn savepoint(&mut self) -> StoreResult<()> {
        self.savepoint = Some(Savepoint {
            opened: Opened::No,
            entries: self.entries.len(),
            head: self.head.clone(),
            counts: self.counts.len(),
            operations: self.operations.len(),
        });
        Ok(())
    }

    fn release(&mut self, keep: bool) -> StoreResult<()> {
        let Some(savepoint) = self.savepoint.take() else {
            return Err(StoreError("no savepoint to release".into()));
        };
        if !keep {
            self.entries.truncate(savepoint.entries.min(self.entries.len()));
            // The decision's counts and operations not sent yet (those sent, after its savepoint, are rolled back).
            self.counts.truncate(savepoint.counts);
            self.operations.truncate(savepoint.operations);
            self.head = savepoint.head;
            self.state = None;
            self.ahead = None;
        }
        match (savepoint.opened, keep) {
            // Nothing written: nothing to roll back or release (a failed read stays the transaction's failure).
            (Opened::No, _) => {}
            // Nothing was sent since the savepoint: what was queued after it goes with it.
            (Opened::Queued(at), false) => self.pending.truncate(at),
            // Everything pending now was queued after the savepoint was sent.
            (Opened::Sent, false) => {
                self.pending.clear();
                self.pending.push(Item::Simple("ROLLBACK TO job; RELEASE job"));
                // A failure of the job's own statements is undone by the rollback; one of an earlier job's writes
                // is not (that job was counted done), and the transaction stays failed.
                if !self.fatal {
                    self.failed = None;
                }
            }
            // Nothing of the job was sent: its savepoint could never be rolled back to (its writes wait for the next
            // statement, where their failure fails the batch, savepoint or not), so it is not sent at all — two
            // statements and a subtransaction fewer for a decision whose writes are all deferred (a budget counted,
            // an operation recorded).
            (Opened::Queued(at), true) => {
                self.pending.remove(at);
            }
            // The job's writes wait with the release for the next statement: a failure there fails the batch.
            (Opened::Sent, true) => self.pending.push(Item::Simple("RELEASE job")),
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> StoreResult<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        // The counts and operations kept, the log's entries, the head and `COMMIT` in one pipeline; a failure before
        // `COMMIT` is seen in its statement's result (a `COMMIT` after a failed statement is a rollback).
        if self.savepoint.is_none() && !self.entries.is_empty() {
            // As one statement (`COMMIT_WRITES`).
            self.writing()?;
            let (counts, operations) = (std::mem::take(&mut self.counts), std::mem::take(&mut self.operations));
            let (counted, recorded) = kept_columns(&counts, &operations);
            let entries = std::mem::take(&mut self.entries);
            let (appended, head) = log_columns(&self.store.writer, &entries, &self.head);
            let mut params = counted;
            params.extend(recorded);
            params.extend(appended);
            params.extend(head);
            self.pending.push(Item::Write(COMMIT_WRITES, params));
        } else {
            self.queue_kept()?;
            self.queue_log()?;
        }
        self.pending.push(Item::Simple("COMMIT"));
        self.flush()?;
        // Back to the pool.
        self.client.take();
        Ok(())
    }
}

fn decision_state_of(rows: &[Row]) -> StoreResult<DecisionState> {
    let mut state = DecisionState::default();
    for row in rows {
        let name: String = row.get(1);
        match row.get::<_, i32>(0) {
            0 => state.stops.push(name),
            1 => {
                let version = match (row.get::<_, Option<i64>>(2), row.get::<_, Option<String>>(3)) {
                    (Some(number), None) => FactVersion::Number(number as u64),
                    (None, Some(text)) => FactVersion::Text(text),
                    _ => return Err(StoreError(format!("fact `{name}` has no version"))),
                };
                state.facts.push((name, version));
            }
            _ => state.records.push(StopRecord {
                id: name,
                level: row.get(3),
                mandate: row.get(4),
                principal: row.get(5),
            }),
        }
    }
    // Sorted bytewise, as SQLite's BINARY collation sorts them (the order decisions see must not depend on the store).
    state.stops.sort_unstable();
    state.facts.sort_unstable();
    state.records.sort_unstable_by(|a, b| a.id.cmp(&b.id));
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::config::TargetSessionAttrs;

    fn attrs(url: &str) -> Result<TargetSessionAttrs, String> {
        let mut config: tokio_postgres::Config = url.parse().unwrap();
        writable_hosts(&mut config, url, url).map(|()| config.get_target_session_attrs())
    }

    #[test]
    fn a_writer_naming_several_hosts_connects_to_the_one_that_accepts_writes() {
        let two = "postgres://u@h1:5432,h2:5433/d";
        assert_eq!(attrs(two), Ok(TargetSessionAttrs::ReadWrite), "read-write by default with several hosts");
        let given = format!("{two}?target_session_attrs=read-write");
        assert_eq!(attrs(&given), Ok(TargetSessionAttrs::ReadWrite));
        for other in ["any", "read-only"] {
            let why = attrs(&format!("{two}?target_session_attrs={other}")).unwrap_err();
            assert!(why.contains(&format!("`target_session_attrs={other}` would let")), "{why}");
        }
        // One host: as libpq, whatever the URL says.
        assert_eq!(attrs("postgres://u@h1/d"), Ok(TargetSessionAttrs::Any));
        assert_eq!(attrs("postgres://u@h1/d?target_session_attrs=any"), Ok(TargetSessionAttrs::Any));
        // The refusal comes before any connection is tried.
        let options = PostgresOptions::default();
        let url = format!("{two}?target_session_attrs=any");
        let refused = PostgresStore::connect(&url, None, &options).unwrap_err();
        assert!(refused.0.contains("would let this gateway connect"), "{refused:?}");
        // A reader (`remit audit`) may read a standby.
        assert!(PostgresStore::connect_unmigrated(&url, None, &options, false).is_ok());
    }
}
