//! The SQLite evidence store: the real [`EvidenceStore`].
//!
//! One file, `bus/bus.sqlite`, in WAL mode with `synchronous=FULL`, opened
//! with `SQLITE_DBCONFIG_DEFENSIVE` and `trusted_schema=off`. The schema
//! (`mosaic-schema`) makes every table append-only and guards references and
//! shapes in triggers, so the file refuses tampering through SQL even when the
//! broker is not the writer.
//!
//! Opening never repairs and never initializes an existing file: a new file
//! is created only where none exists ([`SqliteStore::create`]); an existing
//! one ([`SqliteStore::open`]) must pass every check first: integrity
//! (`quick_check`, `foreign_key_check`), the pinned `sqlite_master` digest,
//! the schema version, WAL mode, and the ledger (canonical, strictly
//! increasing timestamps; every ledger row has its typed row). Until the
//! checks pass the connection does not checkpoint on close, so a refused open
//! leaves the file exactly as it was.
//!
//! A commit is one `BEGIN IMMEDIATE` transaction: a ledger row plus a typed
//! row per fact, all or nothing. Group commit stages many requests in one
//! transaction, each after the first in a `SAVEPOINT` of its own, so a
//! request that breaks a rule rolls back only itself (the first stage by
//! rolling back the transaction, which holds nothing else), and the whole
//! batch costs one WAL sync. Each row links to the hash of the row before,
//! kept from the last stage rather than read back. The ledger's insert
//! trigger checks canonical, known and increasing rows at a cost that does
//! not grow with the table; the open-time pass checks every stored row.
//!
//! Beside this file: `verify.rs` (the checks, the notes), `pass.rs` (the
//! ledger pass), `verdict.rs`, `rows.rs` and `rows/` (the typed rows),
//! `reads.rs` (the reads over a business's history: tasks, closings),
//! `carry.rs` (a send's grant on its message's row), `chain.rs` (the hash
//! chain), `reserve.rs` (the disk reserve) and `backup.rs`.

mod backup;
mod carry;
mod chain;
mod pass;
mod reads;
mod reserve;
mod rows;
mod verdict;
mod verify;

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use mosaic_domain::evidence::{DecisionRecord, Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, DecisionId, MessageId, Refusal, RoleInstance, RunId, Timestamp};
use mosaic_ports::{Closings, EvidenceStore, StoreError, StoreHead, StoreReaders, TaskView};
use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

pub use backup::backup;
use chain::Hash;
pub use pass::Cut;
use reserve::{ReaderHoldsNoReserve, Reserve};
pub use reserve::{FILES_SPARE, RESERVE_BYTES, RESERVE_FILE};
use rows::{ReadError, Undecodable};
use verdict::{open_failure, Replayable};
pub use verdict::{Broken, OpenError};
use verify::{check_store, names_a_file, Journal, Verified};
pub use verify::{verify_file, verify_file_cut, NoteMismatch, OpenCost, Verification};

/// The SQLite evidence store.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The ledger sequence number of the next committed record.
    next_seq: i64,
    /// With a batch open, the sequence number of its next staged record.
    staged_seq: Option<i64>,
    /// The newest ledger row's sequence number and hash, staged rows
    /// included, once a write has learned them: the next row links to it
    /// without reading it back. `None` until then, and after a batch ends
    /// without committing; the row is then read from the store.
    tip: Option<(i64, Hash)>,
    /// Watermarks that keep `undelivered` and `unread` from walking a
    /// recipient's whole history; see [`Watermarks`].
    marks: RefCell<Watermarks>,
    /// The rows a restart replays, as the open-time pass found them; taken
    /// by the first replay, dropped by the first write.
    replayable: RefCell<Option<Replayable>>,
    cost: OpenCost,
    /// The disk reserve beside the file; `None` on a reader.
    reserve: Option<Reserve>,
}

/// Which history a watermark skips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Walk {
    /// Messages delivered to someone (`undelivered`).
    Delivered,
    /// Messages read (`unread`).
    Read,
}

/// Per recipient and [`Walk`], a ledger sequence number below which every
/// message of that recipient is known to be delivered (or read).
///
/// Deliveries and reads are never removed and new messages get higher
/// numbers, so a watermark learned from committed state stays true forever,
/// and a query may start its walk there instead of at the recipient's first
/// message: `message.receive` and `inbox` cost what their page costs, not
/// what the recipient's history costs. A watermark learned while a batch is
/// open may rest on staged records, so it is kept aside until the batch
/// commits, and dropped if it does not.
#[derive(Debug, Default)]
struct Watermarks {
    committed: HashMap<(String, Option<String>, Walk), i64>,
    staged: HashMap<(String, Option<String>, Walk), i64>,
}

impl Watermarks {
    fn get(&self, key: &(String, Option<String>, Walk)) -> i64 {
        let committed = self.committed.get(key).copied().unwrap_or(0);
        self.staged.get(key).copied().unwrap_or(0).max(committed)
    }

    fn learn(&mut self, key: (String, Option<String>, Walk), seq: i64, batch_open: bool) {
        let marks = if batch_open {
            &mut self.staged
        } else {
            &mut self.committed
        };
        let mark = marks.entry(key).or_insert(0);
        *mark = (*mark).max(seq);
    }

    fn settle(&mut self, committed: bool) {
        let staged = std::mem::take(&mut self.staged);
        if committed {
            for (key, seq) in staged {
                let mark = self.committed.entry(key).or_insert(0);
                *mark = (*mark).max(seq);
            }
        }
    }
}

impl SqliteStore {
    /// Creates a new store at `path`, which must not exist. The file is
    /// created exclusively with mode 0600 before SQLite touches it.
    ///
    /// # Errors
    /// [`OpenError::WrongState`] when something exists at `path`;
    /// [`OpenError::Unavailable`] when it cannot be created (the partial file
    /// is removed again).
    pub fn create(path: &Path) -> Result<Self, OpenError> {
        create_private(path)?;
        Self::initialize(path).inspect_err(|_| {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = path.as_os_str().to_owned();
                p.push(suffix);
                // The file is ours and holds nothing yet; removing it lets a retry create it again.
                let _ = std::fs::remove_file(PathBuf::from(p));
            }
        })
    }

    fn initialize(path: &Path) -> Result<Self, OpenError> {
        let mut conn = connect(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_failure)?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(open_failure)?;
        tx.execute_batch(mosaic_schema::SCHEMA_SQL)
            .map_err(open_failure)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
            params![mosaic_schema::VERSION_KEY, mosaic_schema::VERSION],
        )
        .map_err(open_failure)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
            params![mosaic_schema::STORE_ID_KEY, new_store_id()?],
        )
        .map_err(open_failure)?;
        tx.commit().map_err(open_failure)?;
        Self::verified(conn, path)
    }

    /// Opens the existing store at `path` after every check passes.
    ///
    /// # Errors
    /// [`OpenError::WrongState`] when there is no file; `SchemaMismatch`,
    /// `IntegrityFailed` or `Unavailable` when a check fails. A refused open
    /// changes nothing in the file.
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => return Err(OpenError::WrongState),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(OpenError::WrongState)
            }
            Err(e) => return Err(OpenError::Unavailable(Box::new(e))),
        }
        Self::verified(connect(path)?, path)
    }

    /// A second connection to a store another handle opened (and verified):
    /// for reads only (`query_only`), so it never writes, and in WAL mode
    /// it never waits for the writer's commits or their syncs.
    ///
    /// # Errors
    /// [`OpenError::Unavailable`] when the file cannot be opened.
    pub fn reader(path: &Path) -> Result<Self, OpenError> {
        let conn = connect(path)?;
        conn.pragma_update(None, "query_only", true)
            .map_err(open_failure)?;
        Ok(Self {
            conn,
            path: path.to_owned(),
            next_seq: 0,
            staged_seq: None,
            tip: None,
            marks: RefCell::default(),
            replayable: RefCell::new(None),
            cost: OpenCost::default(),
            reserve: None,
        })
    }

    /// Opens the store at `path`, creating it only when nothing is there.
    ///
    /// # Errors
    /// As [`SqliteStore::create`] and [`SqliteStore::open`].
    pub fn open_or_create(path: &Path) -> Result<Self, OpenError> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path),
            Ok(_) | Err(_) => Self::open(path),
        }
    }

    /// Runs every open-time check, then allows checkpoints again.
    fn verified(conn: Connection, path: &Path) -> Result<Self, OpenError> {
        let verified = verify(&conn, path)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false)
            .map_err(open_failure)?;
        Ok(Self {
            conn,
            path: path.to_owned(),
            next_seq: verified.walked.head + 1,
            staged_seq: None,
            tip: None,
            marks: RefCell::default(),
            replayable: RefCell::new(Some(verified.walked.replayable)),
            cost: verified.cost,
            reserve: Some(Reserve::beside(path)),
        })
    }

    /// What the open-time checks cost (zero for a reader, which runs none).
    pub fn open_cost(&self) -> OpenCost {
        self.cost
    }

    /// A WAL deleted under a running store is a nameless file only this
    /// connection still writes: a crash would lose every frame in it,
    /// acknowledged commits included. So after each commit, if the WAL's
    /// name is gone, its frames are copied into the database file at once
    /// (a `TRUNCATE` checkpoint, with its fsync), before the commit is
    /// acknowledged; this repeats after every commit until a restart
    /// creates a new WAL. The commit stands either way: a checkpoint that
    /// cannot run leaves the frames where they were.
    fn keep_frames_if_wal_deleted(&self) {
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        if names_a_file(Path::new(&wal)) {
            return;
        }
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            });
    }

    /// Ends the open transaction without keeping anything. SQLite may have
    /// ended it already (a failed `COMMIT` on a full disk does), so a
    /// `ROLLBACK` that finds none is fine.
    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    /// Runs one transaction-control statement (`BEGIN IMMEDIATE`,
    /// `SAVEPOINT stage`, `COMMIT`, …) from the statement cache: every
    /// write runs several, and parsing each anew costs more than running it.
    fn control(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([]).map(drop)
    }

    /// The hash of the ledger row before `seq`, read from the store (inside
    /// the open transaction, so a staged row counts): the genesis of the
    /// store id for the first row.
    fn hash_before(&self, seq: i64) -> rusqlite::Result<Hash> {
        if seq <= 1 {
            let id: String = self
                .conn
                .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
                .query_row([mosaic_schema::STORE_ID_KEY], |r| r.get(0))?;
            return Ok(chain::genesis(&id));
        }
        self.conn
            .prepare_cached("SELECT hash FROM ledger WHERE seq = ?1")?
            .query_row([seq - 1], |r| r.get(0))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A new store's random id: 16 bytes from the system's entropy, in
/// lowercase hex.
fn new_store_id() -> Result<String, OpenError> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| OpenError::Unavailable(Box::new(e)))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Prepared statements each connection keeps.
const STATEMENT_CACHE: usize = 64;

/// A connection to an existing file with the store's settings. It does not
/// checkpoint on close until [`SqliteStore::verified`] allows it.
fn connect(path: &Path) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(open_failure)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(open_failure)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .map_err(open_failure)?;
    // One plan per statement, whatever is bound. Without this, a bundled
    // SQLite built with STAT4 prepares a statement again on every run that
    // binds a new value to an indexed non-unique column (`m.business = ?1`):
    // 10 to 40 µs a query, where the query itself takes 2.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(open_failure)?;
    // Room for every statement the store runs (one insert per table, the
    // reads, the transaction control), so none is evicted and parsed again;
    // rusqlite's default holds 16.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.pragma_update(None, "trusted_schema", false)
        .map_err(open_failure)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(open_failure)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(open_failure)?;
    Ok(conn)
}

/// The open-time checks, at boot: [`check_store`] with the pass on
/// `query_only` connections, cut for this machine. A record that breaks the
/// ledger is logged by its `seq`.
fn verify(conn: &Connection, path: &Path) -> Result<Verified, OpenError> {
    let reader = || {
        let reader = connect(path)?;
        reader
            .pragma_update(None, "query_only", true)
            .map_err(open_failure)?;
        Ok(reader)
    };
    let verified = check_store(conn, Journal::Pragma, &reader, Cut::here());
    verified.map_err(|broken| {
        if let Some(seq) = broken.seq {
            tracing::error!(seq, "the ledger record does not check: refusing the store");
        }
        broken.error
    })
}

/// Maps a failed write onto the port's error kinds. The schema's triggers
/// raise `mosaic:<kind>`; constraint failures map by their kind; anything
/// else means the store could not write.
///
/// The cross-business guard raises the refusal's own code as its kind.
fn write_failure(e: rusqlite::Error) -> StoreError {
    const CROSS_BUSINESS: &str = Refusal::CrossBusiness.code();
    if let rusqlite::Error::SqliteFailure(err, message) = &e {
        if err.code == ErrorCode::DiskFull {
            return StoreError::Full(Box::new(e));
        }
        if err.code == ErrorCode::ConstraintViolation {
            let raised = message.as_deref().and_then(|m| m.strip_prefix("mosaic:"));
            return match raised {
                Some("duplicate") => StoreError::Duplicate,
                Some("dangling") => StoreError::Dangling,
                Some(CROSS_BUSINESS) => StoreError::CrossBusiness,
                Some("non-monotonic") => StoreError::NonMonotonic,
                // The store never updates or deletes: a row that would is
                // one no rule of ours lets through.
                Some("malformed" | "append-only") => StoreError::Malformed,
                None => match err.extended_code {
                    rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => StoreError::Dangling,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => StoreError::Duplicate,
                    rusqlite::ffi::SQLITE_CONSTRAINT_CHECK
                    | rusqlite::ffi::SQLITE_CONSTRAINT_NOTNULL => StoreError::Malformed,
                    // Another constraint: this schema raises none.
                    _ => StoreError::Unavailable(Box::new(e)),
                },
                // A trigger message this binary does not know: the schema
                // and the code disagree, which is no rule break of the
                // record's.
                Some(_) => StoreError::Unavailable(Box::new(e)),
            };
        }
    }
    StoreError::Unavailable(Box::new(e))
}

fn read_failure(e: impl Into<ReadError>) -> StoreError {
    match e.into() {
        ReadError::Sql(e) => StoreError::Unavailable(Box::new(e)),
        ReadError::Undecodable(e) => StoreError::Unavailable(Box::new(e)),
    }
}

impl SqliteStore {
    /// The facts about the message in each row of a [`FACTS`] query, each
    /// with its ledger sequence number.
    fn facts(
        &self,
        sql: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<(i64, MessageFacts)>, StoreError> {
        let mut st = self.conn.prepare_cached(sql).map_err(read_failure)?;
        let mut rows = st.query(args).map_err(read_failure)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(read_failure)? {
            let record = rows::message_row(r).map_err(read_failure)?;
            let delivered: Option<String> = r.get(11).map_err(read_failure)?;
            let delivered_to = match delivered {
                Some(run) => Some(
                    RunId::parse(&run).map_err(|_| read_failure(Undecodable("delivered run")))?,
                ),
                None => None,
            };
            let facts = MessageFacts {
                record,
                delivered_to,
                read: r.get(12).map_err(read_failure)?,
            };
            out.push((r.get(13).map_err(read_failure)?, facts));
        }
        Ok(out)
    }

    fn load_seqs(
        &self,
        sql: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<Stamped>, StoreError> {
        let mut st = self.conn.prepare_cached(sql).map_err(read_failure)?;
        let ledger: Vec<(i64, String, String)> = st
            .query_map(args, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(read_failure)?
            .collect::<Result<_, _>>()
            .map_err(read_failure)?;
        ledger
            .iter()
            .map(|(seq, at, kind)| rows::load(&self.conn, *seq, at, kind).map_err(read_failure))
            .collect()
    }
}

impl SqliteStore {
    /// Up to `limit` messages of `business` to `role` (`None`: the human)
    /// for which `pending` holds, oldest first, walking from the
    /// recipient's [`Watermarks`] on; then moves the watermark to the first
    /// message found, or past the newest one looked at when none is.
    ///
    /// The newest message is read first and the walk stops there. Two
    /// statements are two snapshots on a reader connection: a message
    /// committed between them has a higher sequence number than every one
    /// the first saw, so it is outside this walk and is found by the next,
    /// never skipped by the watermark.
    fn pending(
        &self,
        business: &BusinessId,
        role: Option<&str>,
        walk: Walk,
        pending: &str,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        let newest: Option<i64> = self
            .conn
            .prepare_cached("SELECT max(seq) FROM messages WHERE business = ?1 AND to_role IS ?2")
            .and_then(|mut st| st.query_row(params![business.as_str(), role], |r| r.get(0)))
            .map_err(read_failure)?;
        let Some(newest) = newest else {
            return Ok(Vec::new());
        };
        let key = (business.as_str().to_owned(), role.map(str::to_owned), walk);
        let from = self.marks.borrow().get(&key);
        let found = self.facts(
            &format!(
                "{FACTS} WHERE m.business = ?1 AND m.to_role IS ?2 AND m.seq BETWEEN ?3 AND ?4 \
                 AND {pending} ORDER BY m.seq LIMIT ?5"
            ),
            params![
                business.as_str(),
                role,
                from,
                newest,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
        )?;
        let mark = match found.first() {
            Some((seq, _)) => Some(*seq),
            // Nothing pending up to the newest (not merely a page of nothing).
            None if limit > 0 => Some(newest + 1),
            None => None,
        };
        if let Some(seq) = mark {
            let batch_open = self.staged_seq.is_some();
            self.marks.borrow_mut().learn(key, seq, batch_open);
        }
        Ok(found.into_iter().map(|(_, facts)| facts).collect())
    }
}

/// Whether message `m` was read, as SQL: its run's `message.read`, or, for
/// a message to the human, the human's (a `human.input` with that verb and
/// the message as subject, as the human's acts are recorded).
macro_rules! read {
    () => {
        "(EXISTS (SELECT 1 FROM reads r WHERE r.message = m.id) \
         OR (m.to_role IS NULL AND EXISTS (SELECT 1 FROM human_inputs h \
         WHERE h.subject_kind = 'message' AND h.subject = m.id AND h.verb = 'message.read')))"
    };
}

/// A message's row with its delivered run, read flag and sequence number.
/// The delivery is a scalar subquery, not a `LEFT JOIN`: SQLite sets a join
/// up on every run (about 20 µs here, even for no row at all), a
/// subquery on the unique `deliveries.message` costs one index probe.
const FACTS: &str = concat!(
    "SELECT m.id, m.business, m.from_role, m.from_run, m.to_role, m.class, m.body, m.in_reply_to, \
    m.corrects, m.decision, m.request, (SELECT d.run FROM deliveries d WHERE d.message = m.id), ",
    read!(),
    ", m.seq FROM messages m"
);

impl StoreReaders for SqliteStore {
    /// A read-only connection to the same file ([`SqliteStore::reader`]).
    fn reader(&self) -> Result<Self, StoreError> {
        SqliteStore::reader(&self.path).map_err(|e| match e {
            OpenError::Unavailable(source) => StoreError::Unavailable(source),
            other @ (OpenError::SchemaMismatch
            | OpenError::IntegrityFailed
            | OpenError::WrongState) => StoreError::Unavailable(Box::new(other)),
        })
    }
}

impl EvidenceStore for SqliteStore {
    fn stage(&mut self, records: &[Stamped]) -> Result<(), StoreError> {
        // What the open found is history from here on; a replay reads it anew.
        self.replayable.get_mut().take();
        // A batch's first stage needs no savepoint: undoing it is undoing
        // the whole transaction.
        let first = self.staged_seq.is_none();
        let staged = match self.staged_seq {
            Some(seq) => seq,
            None => {
                self.control("BEGIN IMMEDIATE").map_err(write_failure)?;
                self.staged_seq = Some(self.next_seq);
                self.next_seq
            }
        };
        if !first {
            self.control("SAVEPOINT stage").map_err(write_failure)?;
        }
        let mut seq = staged;
        let prev = match self.tip {
            Some((tip, hash)) if tip == seq - 1 => Ok(hash),
            Some(_) | None => self.hash_before(seq),
        };
        let written = prev.and_then(|mut prev| {
            // A send's grant rides on its message's row: two B-trees fewer.
            for (record, this) in records.iter().zip(carry::plan(records)) {
                prev = rows::insert(&self.conn, seq, record, &prev, this)?;
                seq += 1;
            }
            Ok(prev)
        });
        match written {
            Ok(hash) if seq > staged => self.tip = Some((seq - 1, hash)),
            Ok(_) => {}
            Err(e) => {
                // Undo this stage only; a failure that already ended the
                // transaction (disk full, I/O) fails this too, and the caller
                // abandons the batch.
                if first {
                    self.abandon();
                } else {
                    let _ = self
                        .control("ROLLBACK TO stage")
                        .and_then(|()| self.control("RELEASE stage"));
                }
                return Err(write_failure(e));
            }
        }
        if !first {
            self.control("RELEASE stage").map_err(write_failure)?;
        }
        self.staged_seq = Some(seq);
        Ok(())
    }

    fn commit_staged(&mut self) -> Result<(), StoreError> {
        let Some(seq) = self.staged_seq.take() else {
            return Ok(());
        };
        if let Err(e) = self.control("COMMIT") {
            self.rollback();
            self.tip = None;
            self.marks.borrow_mut().settle(false);
            return Err(write_failure(e));
        }
        self.marks.borrow_mut().settle(true);
        self.next_seq = seq;
        self.keep_frames_if_wal_deleted();
        Ok(())
    }

    fn abandon(&mut self) {
        if self.staged_seq.take().is_some() {
            self.rollback();
            self.tip = None;
        }
        self.marks.borrow_mut().settle(false);
    }

    fn take_reserve(&mut self) -> Result<(), StoreError> {
        let reserve = self.reserve.as_mut();
        reserve.map_or_else(ReaderHoldsNoReserve::refused, Reserve::take)
    }

    fn release_reserve(&mut self) -> Result<bool, StoreError> {
        let reserve = self.reserve.as_mut();
        reserve.map_or(
            Err(StoreError::Unavailable(Box::new(ReaderHoldsNoReserve))),
            Reserve::release,
        )
    }

    fn check_room(&self) -> Result<(), StoreError> {
        let reserve = self.reserve.as_ref();
        reserve.map_or_else(ReaderHoldsNoReserve::refused, Reserve::check)
    }

    fn last_write(&self) -> Result<Option<Timestamp>, StoreError> {
        let at: Option<String> = self
            .conn
            .query_row("SELECT at FROM ledger ORDER BY seq DESC LIMIT 1", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(read_failure)?;
        at.map(|at| Timestamp::parse(&at).map_err(|_| read_failure(Undecodable("at"))))
            .transpose()
    }

    fn replay(&self, visit: &mut dyn FnMut(Stamped)) -> Result<(), StoreError> {
        if let Some(found) = self.replayable.take() {
            for (seq, at, kind) in found {
                visit(rows::load(&self.conn, seq, &at, &kind).map_err(read_failure)?);
            }
            return Ok(());
        }
        let sql = format!(
            "SELECT seq, at, kind FROM ledger WHERE kind IN ({}) ORDER BY seq",
            rows::MACHINE_KINDS.as_str()
        );
        let mut st = self.conn.prepare(&sql).map_err(read_failure)?;
        let mut ledger = st.query([]).map_err(read_failure)?;
        while let Some(r) = ledger.next().map_err(read_failure)? {
            let (seq, at, kind): (i64, String, String) = (
                r.get(0).map_err(read_failure)?,
                r.get(1).map_err(read_failure)?,
                r.get(2).map_err(read_failure)?,
            );
            visit(rows::load(&self.conn, seq, &at, &kind).map_err(read_failure)?);
        }
        Ok(())
    }

    fn head(&self) -> Result<u64, StoreError> {
        let head: i64 = self
            .conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM ledger")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(read_failure)?;
        u64::try_from(head).map_err(|_| read_failure(Undecodable("seq")))
    }

    fn chain_head(&self) -> Result<StoreHead, StoreError> {
        let (store_id, size, hash): (String, Option<i64>, Option<Hash>) = self
            .conn
            .prepare_cached(
                "SELECT (SELECT value FROM meta WHERE key = ?1), \
                 (SELECT seq FROM ledger ORDER BY seq DESC LIMIT 1), \
                 (SELECT hash FROM ledger ORDER BY seq DESC LIMIT 1)",
            )
            .and_then(|mut st| {
                st.query_row([mosaic_schema::STORE_ID_KEY], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
            })
            .map_err(read_failure)?;
        let hash = hash.unwrap_or_else(|| chain::genesis(&store_id));
        Ok(StoreHead {
            size: u64::try_from(size.unwrap_or(0)).map_err(|_| read_failure(Undecodable("seq")))?,
            store_id,
            hash,
        })
    }

    fn ledger(
        &self,
        business: &BusinessId,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Stamped)>, StoreError> {
        let bound = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT seq, at, kind FROM ledger WHERE seq > ?1 AND seq <= ?2 AND business = ?3 \
                 AND kind IN ({}) ORDER BY seq LIMIT ?4",
                rows::CHANGE_KINDS.as_str()
            ))
            .map_err(read_failure)?;
        let ledger: Vec<(i64, String, String)> = st
            .query_map(
                params![
                    bound(after),
                    bound(upto),
                    business.as_str(),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(read_failure)?
            .collect::<Result<_, _>>()
            .map_err(read_failure)?;
        ledger
            .iter()
            .map(|(seq, at, kind)| {
                let record = rows::load(&self.conn, *seq, at, kind).map_err(read_failure)?;
                let seq = u64::try_from(*seq).map_err(|_| read_failure(Undecodable("seq")))?;
                Ok((seq, record))
            })
            .collect()
    }

    fn decision(&self, id: &DecisionId) -> Result<Option<DecisionRecord>, StoreError> {
        rows::decision_by_id(&self.conn, &id.to_string()).map_err(read_failure)
    }

    fn decision_business(&self, id: &DecisionId) -> Result<Option<BusinessId>, StoreError> {
        let business: Option<String> = self
            .conn
            .prepare_cached("SELECT business FROM decisions WHERE id = ?1")
            .and_then(|mut st| st.query_row([id.to_string()], |r| r.get(0)).optional())
            .map_err(read_failure)?;
        business
            .map(|b| BusinessId::parse(&b).map_err(|_| read_failure(Undecodable("business"))))
            .transpose()
    }

    fn message(&self, id: &MessageId) -> Result<Option<MessageFacts>, StoreError> {
        Ok(self
            .facts(&format!("{FACTS} WHERE m.id = ?1"), [id.to_string()])?
            .pop()
            .map(|(_, facts)| facts))
    }

    fn undelivered(
        &self,
        business: &BusinessId,
        role: &RoleInstance,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        self.pending(
            business,
            Some(role.as_str()),
            Walk::Delivered,
            "NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id)",
            limit,
        )
    }

    fn unread(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        let role = match recipient {
            Recipient::Role(r) => Some(r.as_str()),
            Recipient::Human => None,
        };
        self.pending(business, role, Walk::Read, concat!("NOT ", read!()), limit)
    }

    fn unread_count(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
    ) -> Result<u64, StoreError> {
        let role = match recipient {
            Recipient::Role(r) => Some(r.as_str()),
            Recipient::Human => None,
        };
        let count: i64 = self
            .conn
            .prepare_cached(concat!(
                "SELECT count(*) FROM messages m WHERE m.business = ?1 AND m.to_role IS ?2 AND NOT ",
                read!()
            ))
            .and_then(|mut st| st.query_row(params![business.as_str(), role], |r| r.get(0)))
            .map_err(read_failure)?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    fn tasks(&self, business: &BusinessId) -> Result<Vec<TaskView>, StoreError> {
        reads::tasks(&self.conn, business).map_err(read_failure)
    }

    fn trail(&self, business: &BusinessId, subject: &Subject) -> Result<Vec<Stamped>, StoreError> {
        let (kind, text) = rows::subject_key(subject);
        self.load_seqs(
            "SELECT l.seq, l.at, l.kind FROM ledger l WHERE l.seq IN \
             (SELECT t.seq FROM trail t WHERE t.business = ?1 AND t.subject_kind = ?2 AND t.subject = ?3) \
             ORDER BY l.seq",
            params![business.as_str(), kind, text],
        )
    }

    fn closings(
        &self,
        business: &BusinessId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Closings, StoreError> {
        reads::closings(&self.conn, business, before, limit).map_err(read_failure)
    }
}

/// Creates the empty file `path`, mode 0600, refusing anything already
/// there (a link included) with [`OpenError::WrongState`].
fn create_private(path: &Path) -> Result<std::fs::File, OpenError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                OpenError::WrongState
            } else {
                OpenError::Unavailable(Box::new(e))
            }
        })
}

#[cfg(test)]
mod tests {
    use super::names_a_file;

    #[test]
    fn a_name_counts_whatever_it_points_at() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("bus.sqlite-wal");
        assert!(!names_a_file(&file));
        std::fs::write(&file, b"frames").expect("write");
        assert!(names_a_file(&file));
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nothing"), &link).expect("symlink");
        assert!(names_a_file(&link));
        std::fs::remove_file(&file).expect("remove");
        assert!(!names_a_file(&file));
    }
}
