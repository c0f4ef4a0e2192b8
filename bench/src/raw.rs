//! The physical limit: raw rusqlite, WAL, `synchronous=FULL`, one single-row
//! INSERT per `BEGIN IMMEDIATE` transaction, on a scratch database in the
//! run's directory (so on the same disk as every store figure). With more
//! tables, one row into each per transaction, the same code gives the limit
//! for a commit that writes that many B-trees.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};
use serde_json::Value;

use crate::output::{round1, round3, Failure, Fields};
use crate::stats::{Round, Series};
use crate::Ctx;

/// About the size of a `message.send` body, so the row is not trivially small.
const BODY: &str = "raw reference row: one INSERT, one transaction, one fsync, nothing else";

/// The raw reference database: `tables` tables of one rowid B-tree each,
/// one row into every table per transaction.
pub struct Raw {
    conn: Connection,
    next: i64,
    inserts: Vec<String>,
}

impl Raw {
    /// Creates the scratch database at `path`, which must not exist, with
    /// `tables` tables (the physical limit itself has one).
    ///
    /// # Errors
    /// When it cannot be created, or does not end up in WAL mode with
    /// `synchronous=FULL`.
    pub fn create(path: &Path, tables: usize) -> Result<Self, Failure> {
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
        let names: Vec<String> = (0..tables).map(|t| format!("raw_{t}")).collect();
        for name in &names {
            conn.execute_batch(&format!(
                "CREATE TABLE {name} (id INTEGER PRIMARY KEY, body TEXT NOT NULL) STRICT"
            ))
            .map_err(fail)?;
        }
        let inserts = names
            .iter()
            .map(|name| format!("INSERT INTO {name} (id, body) VALUES (?1, ?2)"))
            .collect();
        Ok(Self {
            conn,
            next: 1,
            inserts,
        })
    }

    /// One durable commit of one row per table.
    ///
    /// # Errors
    /// When the commit fails.
    pub fn commit_one(&mut self) -> Result<(), Failure> {
        self.commit_rows(1)
    }

    /// One durable commit of `rows` rows per table.
    ///
    /// # Errors
    /// When the commit fails.
    pub fn commit_rows(&mut self, rows: usize) -> Result<(), Failure> {
        let fail = |_| Failure::new("raw commit failed");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        for _ in 0..rows {
            for insert in &self.inserts {
                tx.prepare_cached(insert)
                    .and_then(|mut st| st.execute(params![self.next, BODY]))
                    .map_err(fail)?;
            }
            self.next += 1;
        }
        tx.commit().map_err(fail)?;
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

/// Busy threads, one per CPU, at the lowest priority (nice 19): while
/// they run no CPU is ever idle, yet any other runnable thread takes the
/// CPU from them at once.
///
/// They exist to show a property of the machine, not of the broker: on a
/// virtual machine an idle vCPU may notice an I/O completion only at its
/// next timer tick (4 ms at 250 Hz), so an fsync issued while nothing else
/// runs looks many times slower than the disk is.
pub struct Awake {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Awake {
    /// Starts the threads.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..cpus)
            .filter_map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::Builder::new()
                    .name("awake".into())
                    .spawn(move || {
                        // `who = 0` is the calling thread: Linux keeps a
                        // nice value per thread.
                        let _ = rustix::process::setpriority_process(None, 19);
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .ok()
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `raw_sqlite_commit`: commits/s (median round), p50/p99 µs; then the
/// same rounds again, alternating with rounds while [`Awake`] keeps every
/// CPU busy, so the line shows how much of a commit's time was the
/// machine waking up rather than the disk (`idle_penalty_p50`).
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
    let (mut idle, mut awake) = (Series::default(), Series::default());
    for round in 0..sizes.raw_rounds {
        let awake_round = |raw: &mut Raw| {
            let _awake = Awake::start();
            raw.round(sizes.raw_per_round)
        };
        if round % 2 == 0 {
            idle.rounds.push(raw.round(sizes.raw_per_round)?);
            awake.rounds.push(awake_round(raw)?);
        } else {
            awake.rounds.push(awake_round(raw)?);
            idle.rounds.push(raw.round(sizes.raw_per_round)?);
        }
    }
    let mut fields = series.fields("commits_per_s");
    fields.extend([
        (
            "settings",
            Value::from("WAL, synchronous=FULL, BEGIN IMMEDIATE, 1 row per transaction"),
        ),
        ("idle_p50_us", round1(idle.percentile_us(50.0))),
        ("awake_p50_us", round1(awake.percentile_us(50.0))),
        ("awake_p99_us", round1(awake.percentile_us(99.0))),
        ("awake_commits_per_s", round1(awake.rate())),
        (
            "idle_penalty_p50",
            round3(idle.percentile_us(50.0) / awake.percentile_us(50.0)),
        ),
        (
            "awake_note",
            Value::from("idle_ and awake_ rounds alternate after the plain ones; awake = one busy nice-19 thread per CPU, so no CPU idles; a penalty well above 1 means the machine, not the disk, set the plain figures (every ratio to raw of this run is then suspect)"),
        ),
    ]);
    Ok(fields)
}

/// Alternates `rounds` rounds of `measure` with raw rounds of `raw_n`
/// commits on the shared raw reference (which of the two goes first
/// alternates too, so neither always follows the other); returns the
/// measured series and the raw one.
///
/// # Errors
/// The first failure of either.
pub fn alternate(
    ctx: &mut Ctx,
    rounds: usize,
    raw_n: usize,
    mut measure: impl FnMut() -> Result<Round, Failure>,
) -> Result<(Series, Series), Failure> {
    let raw = ctx.raw()?;
    let (mut measured, mut raws) = (Series::default(), Series::default());
    for round in 0..rounds {
        if round % 2 == 0 {
            raws.rounds.push(raw.round(raw_n)?);
            measured.rounds.push(measure()?);
        } else {
            measured.rounds.push(measure()?);
            raws.rounds.push(raw.round(raw_n)?);
        }
    }
    Ok((measured, raws))
}
