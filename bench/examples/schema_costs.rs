//! What each guard, index and trigger of the schema costs a `message.send`.
//!
//! `cargo run --release -p mosaic-bench --example schema_costs [-- ROUNDS [SENDS [off]]]`
//! (defaults 15 rounds of 300 sends; `off` runs with `synchronous=OFF`).
//!
//! Each variant is the pinned schema (`mosaic_schema::SCHEMA_SQL`) with one
//! textual edit: a guard of `mosaic-bus/2` put back, or one of today's
//! dropped. Every variant gets a store file of its own, opened with the
//! store's settings (WAL, `synchronous=FULL`, `DEFENSIVE`,
//! `trusted_schema=off`, `foreign_keys=on`, QPSG, cached statements), and
//! commits what one `message.send` commits in the store-only figure: in one
//! `BEGIN IMMEDIATE` transaction and one `SAVEPOINT`, the ledger row of the
//! `action.allowed`, then a ledger row and a `messages` row that carries the
//! grant (`mosaic-bus/5`), with the store's own statements, random message
//! ids and times a millisecond apart.
//!
//! Each file is warmed up until its WAL has wrapped, then the variants run
//! in rounds, in an order that rotates every round, so a slow stretch of the
//! disk or a busy neighbour lands on every variant alike. A variant's figure
//! is the median over its rounds of CPU µs per send (this process's CPU
//! clock, user and kernel: the SQL, the triggers, the pages, and the
//! `write`/`fsync` calls), of the CPU of the statements before `COMMIT`
//! alone (the thread's clock: the inserts, their triggers and checks, no
//! WAL write and no sync), and of sends per second. An edit that no longer
//! matches the schema is an error, so a variant never measures the base by
//! accident.

use std::path::Path;
use std::time::{Duration, Instant};

use mosaic_domain::Timestamp;
use rusqlite::config::DbConfig;
use rusqlite::{params, Connection};

/// One textual edit of the schema: every `from` must occur, and is
/// replaced by `to`; an empty `from` appends `to`.
type Edit = (&'static str, &'static str);

/// A variant: its name, what it is, its edits, and whether foreign keys are
/// enforced on its connection.
struct Variant {
    name: &'static str,
    what: &'static str,
    edits: Vec<Edit>,
    foreign_keys: bool,
}

/// The ledger trigger's time rule in `mosaic-bus/3`: the previous row by `seq`.
const LEDGER_PREV: &str = "OR NEW.at <= (SELECT at FROM ledger WHERE seq = NEW.seq - 1);";

/// The same rule in `mosaic-bus/2` and before: the newest time through the `at` index.
const LEDGER_MAX_AT: &str = "OR NEW.at <= (SELECT max(at) FROM ledger);";

/// The ledger-row guard of the hot table since `mosaic-bus/3`: one probe
/// (`_TWO_PROBES`: before). A send's grant has no typed row since
/// `mosaic-bus/5`, so its table's guard is off the send's path.
const SENT_ONE_PROBE: &str = "SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'message.sent' AND business IS NEW.business);";
const SENT_TWO_PROBES: &str = "SELECT RAISE(ABORT, 'mosaic:malformed') WHERE (SELECT kind FROM ledger WHERE seq = NEW.seq) IS NOT 'message.sent' OR (SELECT business FROM ledger WHERE seq = NEW.seq) IS NOT NEW.business;";

const MESSAGE_REFS: &str = "    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.in_reply_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.in_reply_to);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.in_reply_to IS NOT NULL AND (SELECT business FROM messages WHERE id = NEW.in_reply_to) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.corrects IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.corrects);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.corrects IS NOT NULL AND (SELECT business FROM messages WHERE id = NEW.corrects) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.decision IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.decision IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.request IS NOT NULL AND NOT EXISTS (SELECT 1 FROM human_inputs WHERE id = NEW.request);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.request IS NOT NULL AND (SELECT business FROM human_inputs WHERE id = NEW.request) IS NOT NEW.business;
";
const MESSAGE_REFS_ONE: &str = "    SELECT CASE
        WHEN NEW.in_reply_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.in_reply_to) THEN RAISE(ABORT, 'mosaic:dangling')
        WHEN NEW.in_reply_to IS NOT NULL AND (SELECT business FROM messages WHERE id = NEW.in_reply_to) IS NOT NEW.business THEN RAISE(ABORT, 'mosaic:cross-business')
        WHEN NEW.corrects IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.corrects) THEN RAISE(ABORT, 'mosaic:dangling')
        WHEN NEW.corrects IS NOT NULL AND (SELECT business FROM messages WHERE id = NEW.corrects) IS NOT NEW.business THEN RAISE(ABORT, 'mosaic:cross-business')
        WHEN NEW.decision IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision) THEN RAISE(ABORT, 'mosaic:dangling')
        WHEN NEW.decision IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business THEN RAISE(ABORT, 'mosaic:cross-business')
        WHEN NEW.request IS NOT NULL AND NOT EXISTS (SELECT 1 FROM human_inputs WHERE id = NEW.request) THEN RAISE(ABORT, 'mosaic:dangling')
        WHEN NEW.request IS NOT NULL AND (SELECT business FROM human_inputs WHERE id = NEW.request) IS NOT NEW.business THEN RAISE(ABORT, 'mosaic:cross-business')
    END;
";

const AT_UNIQUE: Edit = ("at TEXT NOT NULL,\n", "at TEXT NOT NULL UNIQUE,\n");
const MAX_AT: Edit = (LEDGER_PREV, LEDGER_MAX_AT);
const TWO_PROBES_SENT: Edit = (SENT_ONE_PROBE, SENT_TWO_PROBES);
/// Every typed table's `seq` references the ledger again (the ledger's own
/// `seq` line is the same text, so it is put back as it was).
const SEQ_FK: [Edit; 2] = [
    (
        "    seq INTEGER PRIMARY KEY,\n",
        "    seq INTEGER PRIMARY KEY REFERENCES ledger(seq),\n",
    ),
    (
        "CREATE TABLE ledger (\n    seq INTEGER PRIMARY KEY REFERENCES ledger(seq),",
        "CREATE TABLE ledger (\n    seq INTEGER PRIMARY KEY,",
    ),
];

fn variants() -> Vec<Variant> {
    let v = |name, what, edits: Vec<Edit>| Variant {
        name,
        what,
        edits,
        foreign_keys: true,
    };
    vec![
        v("base", "the pinned schema as it is", vec![]),
        v(
            "+at_unique",
            "put back `ledger.at UNIQUE` (an index written per record)",
            vec![AT_UNIQUE],
        ),
        v(
            "+at_unique+max_at",
            "put back `UNIQUE` and the trigger's `max(at)` through it",
            vec![AT_UNIQUE, MAX_AT],
        ),
        v(
            "+two_probes",
            "the hot typed trigger probes the ledger row twice (kind, then business)",
            vec![TWO_PROBES_SENT],
        ),
        v(
            "+seq_fk",
            "put back `seq REFERENCES ledger(seq)` on the 13 typed tables",
            SEQ_FK.to_vec(),
        ),
        v(
            "mosaic-bus/2",
            "all three put back: `mosaic-bus/2` as it was",
            [AT_UNIQUE, MAX_AT, TWO_PROBES_SENT, SEQ_FK[0], SEQ_FK[1]].to_vec(),
        ),
        v(
            "-dup_seq_guards",
            "drop the `seq` duplicate guard of the hot table (not allowed: REPLACE)",
            vec![(
                "EXISTS (SELECT 1 FROM messages WHERE seq = NEW.seq) OR ",
                "",
            )],
        ),
        v(
            "-typed_triggers",
            "drop the hot typed table's insert trigger (a floor, not a candidate)",
            vec![("", "DROP TRIGGER messages_insert;")],
        ),
        v(
            "refs_one_statement",
            "`messages_insert`'s eight reference checks as one CASE statement",
            vec![(MESSAGE_REFS, MESSAGE_REFS_ONE)],
        ),
        Variant {
            name: "fk_off",
            what: "`foreign_keys=off` on the connection (the store keeps it on)",
            edits: vec![],
            foreign_keys: false,
        },
    ]
}

fn apply(schema: &str, edits: &[Edit]) -> Result<String, String> {
    let mut out = schema.to_owned();
    for (from, to) in edits {
        if from.is_empty() {
            out.push_str(to);
            continue;
        }
        if !out.contains(from) {
            return Err(format!("edit does not match the schema: {from:?}"));
        }
        out = out.replace(from, to);
    }
    Ok(out)
}

/// A store file with the variant's schema and the store's connection settings.
fn open(path: &Path, schema: &str, foreign_keys: bool, sync: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(64);
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.execute_batch(schema)?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', 'experiment')",
        [],
    )?;
    conn.pragma_update(None, "trusted_schema", false)?;
    conn.pragma_update(None, "foreign_keys", foreign_keys)?;
    conn.pragma_update(None, "synchronous", sync)?;
    Ok(conn)
}

/// Random ids (splitmix64), as the entropy port draws them.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        let hex = format!("{a:016x}{b:016x}");
        format!(
            "{}-{}-4{}-8{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[13..16],
            &hex[17..20],
            &hex[20..32]
        )
    }
}

/// One variant's store and its position in time and `seq`.
struct Store {
    name: &'static str,
    conn: Connection,
    seq: i64,
    at_ms: i64,
    rng: Rng,
    cpu: Vec<f64>,
    sql: Vec<f64>,
    rate: Vec<f64>,
    /// CPU time spent in the statements before `COMMIT`, this round.
    in_sql: Duration,
}

/// The canonical form of the time `ms` milliseconds after the epoch.
fn stamp(ms: i64) -> String {
    Timestamp::from_unix_ms(ms)
        .expect("a time within the calendar")
        .to_string()
}

impl Store {
    /// What one `message.send` commits, with the store's statements.
    fn send(&mut self, n: u64) -> rusqlite::Result<()> {
        let started = thread_cpu();
        let c = &self.conn;
        c.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        c.prepare_cached("SAVEPOINT stage")?.execute([])?;
        let ledger = "INSERT INTO ledger (seq, at, kind, business, hash) VALUES (?1, ?2, ?3, ?4, zeroblob(32))";
        self.seq += 1;
        self.at_ms += 1;
        c.prepare_cached(ledger)?.execute(params![
            self.seq,
            stamp(self.at_ms),
            "action.allowed",
            "bench"
        ])?;
        self.seq += 1;
        self.at_ms += 1;
        c.prepare_cached(ledger)?.execute(params![
            self.seq,
            stamp(self.at_ms),
            "message.sent",
            "bench"
        ])?;
        c.prepare_cached(
            "INSERT INTO messages (seq, id, business, from_role, from_run, to_role, class, body, in_reply_to, \
             corrects, decision, request, allowed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?
        .execute(params![
            self.seq,
            self.rng.uuid(),
            "bench",
            Some("lead"),
            Some("l0"),
            Some("dev"),
            Some("INFO"),
            format!("bench message {n}: please review the change on the branch and report back"),
            None::<String>,
            None::<String>,
            None::<String>,
            None::<String>,
            "within-role"
        ])?;
        c.prepare_cached("RELEASE stage")?.execute([])?;
        self.in_sql += thread_cpu().saturating_sub(started);
        c.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

fn cpu_now() -> Duration {
    clock(rustix::time::ClockId::ProcessCPUTime)
}

fn thread_cpu() -> Duration {
    clock(rustix::time::ClockId::ThreadCPUTime)
}

fn clock(id: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(id);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(15), |a| a.parse())?;
    let sends: u64 = args.next().map_or(Ok(300), |a| a.parse())?;
    // `off`: no fsync, so the CPU figures are the SQL's and the WAL writes'.
    let sync = args.next().unwrap_or_else(|| "FULL".to_owned());
    // In the working directory: the disk the store would be on, not a tmpfs.
    let dir = tempfile::tempdir_in(".")?;
    let start_ms = 1_900_000_000_000;
    let mut stores = Vec::new();
    for (i, variant) in variants().into_iter().enumerate() {
        let schema = apply(mosaic_schema::SCHEMA_SQL, &variant.edits)
            .map_err(|e| format!("{}: {e}", variant.name))?;
        let path = dir.path().join(format!("{i}.sqlite"));
        let conn = open(&path, &schema, variant.foreign_keys, &sync)?;
        eprintln!("{:<20} {}", variant.name, variant.what);
        let mut store = Store {
            name: variant.name,
            conn,
            seq: 0,
            at_ms: start_ms,
            rng: Rng(0x5eed_0000 + i as u64),
            cpu: Vec::new(),
            sql: Vec::new(),
            rate: Vec::new(),
            in_sql: Duration::ZERO,
        };
        // Until the WAL has wrapped (1000 pages at the default checkpoint).
        for n in 0..3_000 {
            store.send(n)?;
        }
        stores.push(store);
    }
    for round in 0..rounds {
        let count = stores.len();
        for k in 0..count {
            let store = &mut stores[(k + round) % count];
            store.in_sql = Duration::ZERO;
            let (cpu, wall) = (cpu_now(), Instant::now());
            for n in 0..sends {
                store.send(n)?;
            }
            let (cpu, wall) = (cpu_now() - cpu, wall.elapsed());
            store.cpu.push(cpu.as_secs_f64() * 1e6 / sends as f64);
            store.rate.push(sends as f64 / wall.as_secs_f64());
            store
                .sql
                .push(store.in_sql.as_secs_f64() * 1e6 / sends as f64);
        }
        eprintln!("round {} of {rounds}", round + 1);
    }
    let (base, base_sql) = (median(&stores[0].cpu), median(&stores[0].sql));
    println!(
        "| variant | CPU µs/send | vs base | of it, statements before COMMIT | vs base | sends/s |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for store in &stores {
        let (cpu, sql) = (median(&store.cpu), median(&store.sql));
        println!(
            "| `{}` | {cpu:.1} | {:+.1} | {sql:.1} | {:+.1} | {:.0} |",
            store.name,
            cpu - base,
            sql - base_sql,
            median(&store.rate)
        );
    }
    Ok(())
}
