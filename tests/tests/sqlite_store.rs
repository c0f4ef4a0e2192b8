//! The SQLite store on real files: append-only tables, refusal to open a
//! tampered file (without changing it), canonical timestamps, and restarts.

use std::path::{Path, PathBuf};

use mosaic_adapters::sqlite::{OpenError, SqliteStore};
use mosaic_domain::bus::Command;
use mosaic_domain::{Refusal, Timestamp};
use mosaic_ports::EvidenceStore;
use mosaic_tests::fixture::{caller, policy_a, t};
use mosaic_tests::sqlite::{populated, TempSqlite};
use mosaic_tests::{scenario, Driver, FreshStore};
use proptest::prelude::*;
use rusqlite::Connection;

/// [`populated`], then three failed proofs in one window: a row, then a
/// count of two. Every table holds a row.
fn populated_with_refusal_counts() -> (tempfile::TempDir, PathBuf) {
    let (dir, path) = populated();
    let store = SqliteStore::open(&path).expect("the store opens");
    let mut driver = Driver::open(policy_a(), store).expect("opens");
    let now = t(9_000_000_000_000);
    for _ in 0..3 {
        let refused = driver.refuse(now, None, "inbox", Refusal::HumanProofFailed);
        assert_eq!(refused, Refusal::HumanProofFailed);
    }
    driver.stage_refusal_counts(now, true);
    driver.finish().expect("the count is written");
    drop(driver);
    (dir, path)
}

/// A raw connection with none of the store's protections, as an attacker
/// with file access would use.
fn raw(path: &Path) -> Connection {
    Connection::open(path).expect("raw connection")
}

fn tables(conn: &Connection) -> Vec<String> {
    let mut st = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| {
        r.get(0)
    })
    .unwrap()
}

#[track_caller]
fn refused_open(path: &Path) -> Refusal {
    match SqliteStore::open(path) {
        Ok(_) => panic!("a tampered store opened"),
        Err(e) => e.refusal(),
    }
}

#[test]
fn every_table_refuses_update_delete_and_insert_or_replace_with_recursive_triggers_on_and_off() {
    let (_dir, path) = populated_with_refusal_counts();
    let conn = raw(&path);
    let names = tables(&conn);
    assert_eq!(names.len(), 17, "{names:?}");
    for recursive in ["OFF", "ON"] {
        conn.execute_batch(&format!("PRAGMA recursive_triggers = {recursive}"))
            .unwrap();
        for table in &names {
            let before = count(&conn, table);
            assert!(before > 0, "the scenario leaves a row in {table}");
            let first: String = conn
                .query_row(
                    &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid LIMIT 1"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            let attempts = [
                format!("UPDATE \"{table}\" SET \"{first}\" = \"{first}\""),
                format!("DELETE FROM \"{table}\""),
                format!("INSERT OR REPLACE INTO \"{table}\" SELECT * FROM \"{table}\" LIMIT 1"),
                format!("REPLACE INTO \"{table}\" SELECT * FROM \"{table}\" ORDER BY rowid DESC LIMIT 1"),
            ];
            for sql in attempts {
                assert!(
                    conn.execute(&sql, []).is_err(),
                    "{sql} (recursive_triggers {recursive}) succeeded"
                );
                assert_eq!(count(&conn, table), before, "{sql} changed {table}");
            }
        }
    }
}

/// The view `refusal_tally` shows a window's first refusal as a row and the
/// rest as its count; the store reads both back.
#[test]
fn refusal_tally_shows_a_window_as_its_row_and_its_count() {
    let (_dir, path) = populated_with_refusal_counts();
    let conn = raw(&path);
    let tally: Vec<(String, i64)> = conn
        .prepare(
            "SELECT kind, count FROM refusal_tally JOIN ledger USING (seq) \
             WHERE code = 'human-proof-failed' ORDER BY seq",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        tally,
        [
            ("request.refused".to_owned(), 1),
            ("refusals.counted".to_owned(), 2)
        ]
    );
    let since: String = conn
        .query_row("SELECT since FROM refusal_counts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(since, t(9_000_000_000_000).to_string());
    drop(conn);
    // The open-time ledger pass matches the count's row to its ledger row.
    SqliteStore::open(&path).expect("the store opens");
}

/// Applies `tamper` through a raw connection, then checks the store refuses
/// to open with `code` and leaves the file byte for byte as it was.
#[track_caller]
fn assert_tamper_refused(code: Refusal, tamper: &str) {
    let (_dir, path) = populated();
    raw(&path)
        .execute_batch(tamper)
        .expect("the tamper applies");
    let before = std::fs::read(&path).unwrap();
    assert_eq!(refused_open(&path), code, "{tamper}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a refused open changed the file"
    );
    assert_eq!(refused_open(&path), code, "refusal is stable");
}

#[test]
fn an_added_trigger_or_view_refuses_with_schema_mismatch() {
    assert_tamper_refused(
        Refusal::SchemaMismatch,
        "CREATE TRIGGER sneaky AFTER INSERT ON messages BEGIN SELECT 1; END;",
    );
    assert_tamper_refused(
        Refusal::SchemaMismatch,
        "CREATE VIEW peek AS SELECT * FROM messages;",
    );
    assert_tamper_refused(
        Refusal::SchemaMismatch,
        "CREATE INDEX extra ON ledger(kind);",
    );
}

#[test]
fn a_dropped_trigger_or_view_refuses_with_schema_mismatch() {
    assert_tamper_refused(
        Refusal::SchemaMismatch,
        "DROP TRIGGER consumptions_no_delete;",
    );
    assert_tamper_refused(Refusal::SchemaMismatch, "DROP VIEW inbox;");
}

#[test]
fn a_missing_metadata_row_refuses() {
    let drop_and_restore = format!(
        "DROP TRIGGER meta_no_delete; DELETE FROM meta; {}",
        schema_statement("CREATE TRIGGER meta_no_delete")
    );
    assert_tamper_refused(Refusal::SchemaMismatch, &drop_and_restore);
}

/// The exact statement of the pinned schema that starts with `prefix`.
fn schema_statement(prefix: &str) -> String {
    let start = mosaic_schema::SCHEMA_SQL
        .find(prefix)
        .expect("statement in schema");
    let rest = &mosaic_schema::SCHEMA_SQL[start..];
    let end = rest.find("END;").expect("trigger end") + 4;
    rest[..end].to_owned()
}

/// `sql` run with `trigger` dropped, then the trigger restored exactly as
/// the pinned schema has it, so the schema digest still matches.
fn behind(trigger: &str, sql: &str) -> String {
    format!(
        "DROP TRIGGER {trigger}; {sql}; {}",
        schema_statement(&format!("CREATE TRIGGER {trigger} "))
    )
}

/// The next ledger position and a time later than every stored one.
const NEXT: &str = "(SELECT max(seq) + 1 FROM ledger)";
const LATER: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT max(at) FROM ledger), '+1 second')";

/// The ledger's insert trigger refuses a non-canonical time and an unknown
/// kind, even through a raw connection with CHECKs ignored.
#[test]
fn the_ledger_refuses_a_non_canonical_time_or_an_unknown_kind_at_insert() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    conn.execute_batch("PRAGMA ignore_check_constraints = ON")
        .unwrap();
    for (at, kind) in [
        (
            "strftime('%Y-%m-%dT%H:%M:%S', (SELECT max(at) FROM ledger), '+1 second')",
            "'request.refused'",
        ),
        ("'2999-02-30T00:00:00.000Z'", "'request.refused'"),
        (LATER, "'request.ignored'"),
    ] {
        let refused = conn
            .execute_batch(&format!(
                "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {at}, {kind}, NULL)"
            ))
            .expect_err("the ledger refuses the row");
        assert!(
            refused.to_string().contains("mosaic:malformed"),
            "{refused}"
        );
    }
}

/// Each ledger rule, broken behind the schema's triggers, refuses the open
/// with `integrity-failed` and leaves the file as it was.
#[test]
fn every_ledger_rule_broken_behind_the_triggers_refuses_with_integrity_failed() {
    let refusal = |seq: &str, at: &str| {
        format!(
            "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {seq}, {at}, 'request.refused', NULL); \
             INSERT INTO refusals (seq, code) SELECT max(seq), 'bad-request' FROM ledger"
        )
    };
    let cases = [
        // A ledger row without its typed row.
        format!(
            "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'message.sent', 'acme')"
        ),
        // A gap in the sequence.
        behind(
            "ledger_insert",
            &refusal("(SELECT max(seq) + 2 FROM ledger)", LATER),
        ),
        // A time earlier than the row before (`at` is unique, so never equal).
        behind(
            "ledger_insert",
            &refusal(
                NEXT,
                "strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT min(at) FROM ledger), '-1 second')",
            ),
        ),
        // A kind the schema does not have.
        behind(
            "ledger_insert",
            &format!(
                "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'request.ignored', NULL)"
            ),
        ),
        // A typed row deleted from under its ledger row.
        behind(
            "observations_no_delete",
            "DELETE FROM observations WHERE seq = (SELECT max(seq) FROM observations)",
        ),
        // A typed row past the end of the ledger.
        format!(
            "PRAGMA foreign_keys = OFF; {}",
            behind(
                "refusals_insert",
                "INSERT INTO refusals (seq, code) SELECT max(seq) + 1, 'bad-request' FROM ledger",
            )
        ),
    ];
    for tamper in &cases {
        assert_tamper_refused(Refusal::IntegrityFailed, tamper);
    }
}

/// A typed row standing at the place of a record of another kind (here a
/// launch switch beside a refusal's own row) is refused too: the ledger
/// pass matches every typed row to its ledger row, both ways.
#[test]
fn a_typed_row_at_the_place_of_another_kind_refuses_with_integrity_failed() {
    assert_tamper_refused(
        Refusal::IntegrityFailed,
        &format!(
            "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'request.refused', NULL); \
             INSERT INTO refusals (seq, code) SELECT max(seq), 'bad-request' FROM ledger; {}",
            behind(
                "launch_switches_insert",
                "INSERT INTO launch_switches (seq, business, state) \
                 SELECT max(seq), 'acme', 'off' FROM ledger",
            )
        ),
    );
}

/// The ledger pass runs beside the integrity and schema checks, but a file
/// broken both ways is refused with the more precise code: the schema's.
#[test]
fn a_changed_schema_is_named_before_a_broken_ledger() {
    assert_tamper_refused(
        Refusal::SchemaMismatch,
        &format!(
            "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'message.sent', 'acme'); \
             CREATE INDEX extra ON ledger(kind);"
        ),
    );
}

#[test]
fn a_non_canonical_timestamp_inserted_with_raw_sql_refuses_at_open() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    let (seq, last): (i64, String) = conn
        .query_row("SELECT max(seq) + 1, max(at) FROM ledger", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    // Later than every stored time, so only its form is wrong.
    let bad = format!("{}Z", &last[..19].replacen(&last[..4], "2999", 1));
    assert!(
        Timestamp::parse(&bad).is_err(),
        "{bad} must be non-canonical"
    );
    // Behind the ledger's insert trigger, which checks the form.
    conn.execute_batch("DROP TRIGGER ledger_insert").unwrap();
    conn.execute(
        "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), ?1, ?2, 'request.refused', NULL)",
        rusqlite::params![seq, bad],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO refusals (seq, code) VALUES (?1, 'bad-request')",
        [seq],
    )
    .unwrap();
    conn.execute_batch(&schema_statement("CREATE TRIGGER ledger_insert "))
        .unwrap();
    drop(conn);
    let before = std::fs::read(&path).unwrap();
    assert_eq!(refused_open(&path), Refusal::IntegrityFailed);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_corrupted_page_refuses_with_integrity_failed() {
    let (_dir, path) = populated();
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    assert!(bytes.len() > 6 * page, "the scenario fills several pages");
    for b in &mut bytes[4 * page + 16..5 * page - 16] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(refused_open(&path), Refusal::IntegrityFailed);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_file_that_is_not_a_database_refuses_and_is_never_reinitialized() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus.sqlite");
    std::fs::write(&path, b"not a database at all, but it is somebody's file").unwrap();
    assert_eq!(refused_open(&path), Refusal::IntegrityFailed);
    assert!(matches!(
        SqliteStore::create(&path),
        Err(OpenError::WrongState)
    ));
    assert!(matches!(
        SqliteStore::open_or_create(&path),
        Err(OpenError::IntegrityFailed)
    ));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"not a database at all, but it is somebody's file"
    );
}

#[test]
fn an_empty_existing_file_is_refused_not_initialized() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus.sqlite");
    std::fs::write(&path, b"").unwrap();
    assert_eq!(refused_open(&path), Refusal::SchemaMismatch);
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

#[test]
fn a_new_store_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let store = TempSqlite::fresh();
    let mode = std::fs::metadata(store.dir().join("bus.sqlite"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn write_times_continue_after_a_reopen_even_when_the_wall_clock_is_behind() {
    let (_dir, path) = populated();
    let store = SqliteStore::open(&path).unwrap();
    let last = store.last_write().unwrap().expect("the scenario wrote");
    let mut driver = Driver::open(policy_a(), store).unwrap();
    // The wall clock now reads earlier than the last write. (The human
    // ended l0's run, which freed lead.)
    driver
        .call(t(5), &caller("lead", "l1"), Command::Claim)
        .unwrap();
    let after = driver.store().last_write().unwrap().unwrap();
    assert!(after > last, "{after} after {last}");
    assert_eq!(after, Timestamp::from_unix_ms(last.unix_ms() + 1).unwrap());
}

#[test]
fn the_scenario_rebuilds_identically_from_the_file() {
    let (_dir, path) = populated();
    let first = Driver::open(policy_a(), SqliteStore::open(&path).unwrap()).unwrap();
    let again = Driver::open(policy_a(), SqliteStore::open(&path).unwrap()).unwrap();
    assert!(
        first.bus() == again.bus(),
        "two opens of one file rebuild the same state"
    );
    let mut memory = Driver::open(policy_a(), mosaic_ports::fakes::MemoryStore::new()).unwrap();
    scenario::working_day(&mut memory, &mut 1_000);
    let rebuilt = Driver::open(policy_a(), memory.store().clone()).unwrap();
    assert!(
        first.bus() == rebuilt.bus(),
        "SQLite and memory replay agree"
    );
}

/// The canonical-timestamp predicate the schema applies to each inserted row
/// (and the open-time scan applies to every row).
fn sql_canonical(conn: &Connection, text: &str) -> bool {
    conn.query_row(
        "SELECT length(?1) = 24 AND ?1 >= '1970' AND strftime('%Y-%m-%dT%H:%M:%fZ', ?1) IS ?1",
        [text],
        |r| r.get::<_, Option<bool>>(0),
    )
    .unwrap()
    .unwrap_or(false)
}

fn near_canonical() -> impl Strategy<Value = String> {
    prop_oneof![
        // Right shape, any digits: bad months, days, hours, leap days.
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z",
        // Plausible values with a random edit.
        (
            1970i64..2200,
            1u32..13,
            1u32..32,
            0u32..25,
            0u32..61,
            0u32..61,
            0u32..1000,
            0usize..30,
            any::<char>()
        )
            .prop_map(|(y, mo, d, h, mi, s, ms, at, c)| {
                let mut text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z");
                if at < text.len() && text.is_char_boundary(at) && c != '\0' {
                    text.replace_range(at..=at, &c.to_string());
                }
                text
            }),
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// The per-row check accepts exactly what the domain's parser accepts,
    /// so checking only the inserted rows catches everything a full scan
    /// would.
    #[test]
    fn the_row_check_accepts_exactly_the_canonical_form(text in near_canonical()) {
        let conn = Connection::open_in_memory().unwrap();
        prop_assert_eq!(sql_canonical(&conn, &text), Timestamp::parse(&text).is_ok(), "{}", text);
    }
}

/// `undelivered` and `unread` start their walk at a per-recipient
/// watermark. One learned inside a batch rests on staged records: a batch
/// that fails must not leave it behind, and reads out of order must not
/// move it past a message still unread.
#[test]
fn watermarks_skip_history_but_never_a_pending_message() {
    use mosaic_domain::bus::{Reply, SendInput};
    use mosaic_domain::evidence::Recipient;
    use mosaic_domain::MessageId;
    use mosaic_tests::fixture::{acme, human, role};

    let mut driver = Driver::open(policy_a(), TempSqlite::fresh()).expect("opens");
    let dev = caller("dev", "d0");
    let mut now = 1_000;
    let mut at = || {
        now += 1;
        t(now)
    };
    driver.call(at(), &dev, Command::Claim).expect("claims");
    let send = |driver: &mut Driver<TempSqlite>, n: u64, at: Timestamp| -> MessageId {
        let command = Command::Send {
            id: MessageId::from_random([n as u8; 16]),
            input: Box::new(SendInput {
                to: Recipient::Role(role("dev")),
                class: None,
                body: format!("message {n}"),
                in_reply_to: None,
                corrects: None,
                decision: None,
            }),
            known: Vec::new(),
        };
        match driver.call(at, &human(n), command) {
            Ok(Reply::Sent { id, .. }) => id,
            other => panic!("send {n}: {other:?}"),
        }
    };
    let ids = |facts: Vec<mosaic_domain::messages::MessageFacts>| -> Vec<MessageId> {
        facts.into_iter().map(|f| f.record.id).collect()
    };
    let (a, to_dev) = (acme(), Recipient::Role(role("dev")));
    let m1 = send(&mut driver, 1, at());
    let m2 = send(&mut driver, 2, at());
    driver
        .call(at(), &dev, Command::Receive { batch: Vec::new() })
        .expect("receives 1 and 2");
    let m3 = send(&mut driver, 3, at());
    let m4 = send(&mut driver, 4, at());
    let undelivered = |driver: &Driver<TempSqlite>| {
        ids(driver
            .store()
            .undelivered(&a, &role("dev"), 100)
            .expect("reads"))
    };
    assert_eq!(undelivered(&driver), [m3, m4]);

    // Delivered inside a batch that then fails: nothing pending while it is
    // open, everything pending again after.
    driver
        .stage_call(
            at(),
            &dev,
            "message.receive",
            Command::Receive { batch: Vec::new() },
        )
        .expect("stages the delivery of 3 and 4");
    assert_eq!(undelivered(&driver), []);
    driver.store_mut().set_unavailable(true);
    assert_eq!(driver.finish(), Err(Refusal::StorageUnavailable));
    driver.store_mut().set_unavailable(false);
    assert_eq!(
        undelivered(&driver),
        [m3, m4],
        "the failed batch's watermark is gone"
    );

    // Delivered for real; a later message is pending again.
    driver
        .call(at(), &dev, Command::Receive { batch: Vec::new() })
        .expect("receives 3 and 4");
    assert_eq!(undelivered(&driver), []);
    let m5 = send(&mut driver, 5, at());
    assert_eq!(undelivered(&driver), [m5]);

    // Read out of order: 2 before 1. The oldest unread stays in view.
    let unread =
        |driver: &Driver<TempSqlite>| ids(driver.store().unread(&a, &to_dev, 100).expect("reads"));
    assert_eq!(unread(&driver), [m1, m2, m3, m4, m5]);
    let read = |id| Command::Read { id, known: None };
    driver.call(at(), &dev, read(m2)).expect("reads 2");
    assert_eq!(unread(&driver), [m1, m3, m4, m5]);
    driver.call(at(), &dev, read(m1)).expect("reads 1");
    assert_eq!(unread(&driver), [m3, m4, m5]);
    driver.call(at(), &dev, read(m3)).expect("reads 3");
    driver.call(at(), &dev, read(m4)).expect("reads 4");
    assert_eq!(unread(&driver), [m5]);
}

/// A reader connection polls `unread` while the writer commits a message
/// at a time: every poll lists every message committed before it began.
/// (A watermark moved past a message committed between the poll's two
/// statements would hide that message from this connection for good.)
#[test]
fn a_reader_polling_during_commits_never_loses_a_message() {
    use std::sync::{Arc, Mutex};

    use mosaic_domain::bus::{Caller, Reply, SendInput};
    use mosaic_domain::evidence::Recipient;
    use mosaic_domain::{EventId, MessageId};
    use mosaic_tests::fixture::{acme, role};

    const MESSAGES: u32 = 1_500;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("bus.sqlite");
    let mut driver =
        Driver::open(policy_a(), SqliteStore::create(&path).expect("creates")).expect("opens");
    let reader = SqliteStore::reader(&path).expect("a reader");
    let committed: Arc<Mutex<Vec<MessageId>>> = Arc::default();
    let writer = {
        let committed = Arc::clone(&committed);
        std::thread::spawn(move || {
            for n in 0..MESSAGES {
                let mut bytes = [5u8; 16];
                bytes[..4].copy_from_slice(&n.to_be_bytes());
                let human = Caller::Human {
                    business: acme(),
                    input: EventId::from_random(bytes),
                };
                let command = Command::Send {
                    id: MessageId::from_random(bytes),
                    input: Box::new(SendInput {
                        to: Recipient::Role(role("dev")),
                        class: None,
                        body: format!("message {n}"),
                        in_reply_to: None,
                        corrects: None,
                        decision: None,
                    }),
                    known: Vec::new(),
                };
                match driver.call(t(10_000 + i64::from(n)), &human, command) {
                    Ok(Reply::Sent { id, .. }) => committed.lock().expect("a lock").push(id),
                    other => panic!("send {n}: {other:?}"),
                }
            }
        })
    };
    let to_dev = Recipient::Role(role("dev"));
    let mut polls = 0;
    loop {
        let before: Vec<MessageId> = committed.lock().expect("a lock").clone();
        let listed: std::collections::HashSet<MessageId> = reader
            .unread(&acme(), &to_dev, usize::MAX)
            .expect("reads")
            .into_iter()
            .map(|f| f.record.id)
            .collect();
        let missing = before.iter().filter(|id| !listed.contains(id)).count();
        assert_eq!(
            missing, 0,
            "poll {polls}: {missing} committed messages not listed"
        );
        polls += 1;
        if before.len() == MESSAGES as usize {
            break;
        }
    }
    writer.join().expect("the writer");
    assert!(
        polls > 10,
        "the reader polled while the writer wrote ({polls} polls)"
    );
}

/// A file of an earlier schema (`mosaic-bus/2` had `ledger.at UNIQUE` and
/// compared times through it) refuses with `schema-mismatch`, and so does
/// this schema recorded under an earlier version; neither file changes.
#[test]
fn a_store_of_an_earlier_schema_refuses_with_schema_mismatch() {
    let current = mosaic_schema::SCHEMA_SQL;
    let earlier = current
        .replacen("at TEXT NOT NULL,\n", "at TEXT NOT NULL UNIQUE,\n", 1)
        .replacen(
            "OR NEW.at <= (SELECT at FROM ledger WHERE seq = NEW.seq - 1);",
            "OR NEW.at <= (SELECT max(at) FROM ledger);",
            1,
        );
    assert_ne!(earlier, current, "the earlier schema differs");
    for (schema, version) in [
        (earlier.as_str(), "mosaic-bus/2"),
        (current, "mosaic-bus/2"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus.sqlite");
        let conn = raw(&path);
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(schema).unwrap();
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
            [mosaic_schema::VERSION_KEY, version],
        )
        .unwrap();
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        assert_eq!(refused_open(&path), Refusal::SchemaMismatch, "{version}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
}

/// The message a raw insert is refused with.
#[track_caller]
fn refused_insert(conn: &Connection, sql: &str) -> String {
    match conn.execute_batch(sql) {
        Ok(()) => panic!("{sql} was accepted"),
        Err(e) => e.to_string(),
    }
}

/// `ledger.at` has no unique index: the ledger trigger alone keeps times
/// strictly increasing, so a repeated time is refused at insert, by SQL
/// that goes around the store as well as through it.
#[test]
fn a_repeated_or_earlier_time_is_refused_at_insert_without_a_unique_index() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    let rows = count(&conn, "ledger");
    for at in [
        "(SELECT at FROM ledger WHERE seq = (SELECT max(seq) FROM ledger))",
        "(SELECT min(at) FROM ledger)",
        "strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT max(at) FROM ledger), '-0.001 seconds')",
    ] {
        let message = refused_insert(
            &conn,
            &format!(
                "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {at}, 'request.refused', NULL)"
            ),
        );
        assert!(message.contains("mosaic:non-monotonic"), "{at}: {message}");
    }
    assert_eq!(count(&conn, "ledger"), rows);
    // A later time at the next position is fine (and then undone).
    conn.execute_batch(&format!(
        "SAVEPOINT s; INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'request.refused', NULL); \
         ROLLBACK TO s; RELEASE s"
    ))
    .unwrap();
}

/// Typed rows have no foreign key to `ledger(seq)`: each typed table's insert
/// trigger finds its ledger row, so a typed row without one, at the place
/// of another kind, or under another business is refused at insert, with
/// foreign keys on or off.
#[test]
fn a_typed_row_without_its_ledger_row_is_refused_at_insert_without_a_foreign_key() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    for fk in ["OFF", "ON"] {
        conn.execute_batch(&format!("PRAGMA foreign_keys = {fk}"))
            .unwrap();
        let rows = count(&conn, "refusals");
        // Past the ledger's end.
        let past = refused_insert(
            &conn,
            "INSERT INTO refusals (seq, code) SELECT max(seq) + 1, 'bad-request' FROM ledger",
        );
        // At the place of a message.
        let other_kind = refused_insert(
            &conn,
            "INSERT INTO refusals (seq, code) SELECT max(seq), 'bad-request' FROM messages",
        );
        // At a launch switch's own kind, under another business.
        let launches = count(&conn, "launch_switches");
        let other_business = refused_insert(
            &conn,
            &format!(
                "BEGIN; INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'launch.revoked', 'acme'); \
                 INSERT INTO launch_switches (seq, business, state) SELECT max(seq), 'globex', 'off' FROM ledger"
            ),
        );
        conn.execute_batch("ROLLBACK").unwrap();
        for message in [&past, &other_kind, &other_business] {
            assert!(message.contains("mosaic:malformed"), "{fk}: {message}");
        }
        assert_eq!(count(&conn, "refusals"), rows);
        assert_eq!(count(&conn, "launch_switches"), launches);
    }
}
