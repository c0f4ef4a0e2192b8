//! The physical limit: raw rusqlite, WAL, `synchronous=FULL`, one single-row
//! INSERT per `BEGIN IMMEDIATE` transaction, on a scratch database in the
//! run's directory (so on the same disk as every store figure).

use std::path::Path;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};
use serde_json::Value;

use crate::output::{Failure, Fields};
use crate::stats::{Round, Series};
use crate::Ctx;

/// About the size of a `message.send` body, so the row is not trivially small.
const BODY: &str = "raw reference row: one INSERT, one transaction, one fsync, nothing else";

/// The raw reference database.
pub struct Raw {
    conn: Connection,
    next: i64,
}

impl Raw {
    /// Creates the scratch database at `path`, which must not exist.
    ///
    /// # Errors
    /// When it cannot be created, or does not end up in WAL mode with
    /// `synchronous=FULL`.
    pub fn create(path: &Path) -> Result<Self, Failure> {
        if path.exists() {
            return Err(Failure::new("raw reference database already exists"));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let fail = |_| Failure::new("cannot create the raw reference database");
        let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(fail)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(fail)?;
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(fail)?;
        if !mode.eq_ignore_ascii_case("wal") || sync != 2 {
            return Err(Failure::new(
                "raw reference database is not WAL with synchronous=FULL",
            ));
        }
        conn.execute_batch("CREATE TABLE raw (id INTEGER PRIMARY KEY, body TEXT NOT NULL) STRICT")
            .map_err(fail)?;
        Ok(Self { conn, next: 1 })
    }

    /// One durable single-row commit.
    ///
    /// # Errors
    /// When the commit fails.
    pub fn commit_one(&mut self) -> Result<(), Failure> {
        let fail = |_| Failure::new("raw commit failed");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.prepare_cached("INSERT INTO raw (id, body) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(params![self.next, BODY]))
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        self.next += 1;
        Ok(())
    }

    /// A timed round of `n` commits.
    ///
    /// # Errors
    /// When a commit fails.
    pub fn round(&mut self, n: usize) -> Result<Round, Failure> {
        Round::run(n, || self.commit_one())
    }

    /// `n` untimed commits.
    ///
    /// # Errors
    /// When a commit fails.
    pub fn warm_up(&mut self, n: usize) -> Result<(), Failure> {
        (0..n).try_for_each(|_| self.commit_one())
    }
}

/// `raw_sqlite_commit`: commits/s (median round), p50/p99 µs.
///
/// # Errors
/// When the database cannot be created or a commit fails.
pub fn figure(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let raw = ctx.raw()?;
    let mut series = Series::default();
    for _ in 0..sizes.raw_rounds {
        series.rounds.push(raw.round(sizes.raw_per_round)?);
    }
    let mut fields = series.fields("commits_per_s");
    fields.push((
        "settings",
        Value::from("WAL, synchronous=FULL, BEGIN IMMEDIATE, 1 row per transaction"),
    ));
    Ok(fields)
}
