//! `mosaic-bus/6` on real files: the ends of runs (`run_ends`). The schema
//! refuses what the store's rules and the domain's endings refuse, also
//! for SQL that goes around the store; the projections `role_holders` and
//! `agents` count an ended run as holding nothing and show its end; and
//! ends read back and replay as over the in-memory store.

use std::path::Path;

use mosaic_adapters::sqlite::SqliteStore;
use mosaic_domain::bus::Command;
use mosaic_domain::evidence::{
    ClaimEvidence, EndCause, Ending, Evidence, Harness, LaunchRecord, RunEnd, Stamped, Subject,
};
use mosaic_domain::{Refusal, RunId};
use mosaic_ports::fakes::MemoryStore;
use mosaic_ports::{EvidenceStore, StoreError};
use mosaic_tests::fixture::{acme, agent, caller, human, policy_a, role, t};
use mosaic_tests::sqlite::populated;
use mosaic_tests::Driver;
use rusqlite::Connection;

fn raw(path: &Path) -> Connection {
    Connection::open(path).expect("raw connection")
}

/// The next ledger position and a time later than every stored one.
const NEXT: &str = "(SELECT max(seq) + 1 FROM ledger)";
const LATER: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT max(at) FROM ledger), '+1 second')";

/// Inserts a `session.ended` ledger row and the `run_ends` row `values`
/// (its columns after `seq` and `business`), then rolls both back; the
/// error message if SQLite refused.
fn try_end(conn: &Connection, values: &str) -> Result<(), String> {
    let sql = format!(
        "SAVEPOINT s; \
         INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'session.ended', 'acme'); \
         INSERT INTO run_ends (seq, business, role, run, cause, status, signal, vacated) \
         VALUES ((SELECT max(seq) FROM ledger), 'acme', {values});"
    );
    let result = conn.execute_batch(&sql).map_err(|e| e.to_string());
    conn.execute_batch("ROLLBACK TO s; RELEASE s").unwrap();
    result
}

#[test]
fn the_schema_refuses_a_second_end_or_an_ending_whose_cause_and_process_disagree() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    // A run that never ended, every way the rules allow.
    for allowed in [
        "'dev', 'x1', 'exited', NULL, NULL, 0",
        "'dev', 'x1', 'exited', 0, NULL, 0",
        "'dev', 'x1', 'failed', 3, NULL, 1",
        "'dev', 'x1', 'failed', NULL, 9, 1",
        "'dev', 'x1', 'failed', NULL, NULL, 0",
        "'dev', 'x1', 'human', NULL, NULL, 1",
        "'dev', 'x1', 'budget', 143, NULL, 0",
        "'dev', 'x1', 'process-gone', NULL, NULL, 0",
    ] {
        assert_eq!(try_end(&conn, allowed), Ok(()), "{allowed}");
    }
    for (refused, why) in [
        ("'dev', 'x1', 'exited', 1, NULL, 0", "CHECK"),
        ("'dev', 'x1', 'exited', NULL, 9, 0", "CHECK"),
        ("'dev', 'x1', 'failed', 0, NULL, 0", "CHECK"),
        ("'dev', 'x1', 'failed', 3, 9, 0", "CHECK"),
        ("'dev', 'x1', 'budget', 256, NULL, 0", "CHECK"),
        ("'dev', 'x1', 'budget', NULL, 65, 0", "CHECK"),
        ("'dev', 'x1', 'budget', NULL, 0, 0", "CHECK"),
        ("'dev', 'x1', 'gone', NULL, NULL, 0", "CHECK"),
        ("'dev', 'x1', 'human', NULL, NULL, 2", "CHECK"),
        // The scenario's host ended d1 already.
        ("'dev', 'd1', 'human', NULL, NULL, 0", "mosaic:duplicate"),
    ] {
        let message = try_end(&conn, refused).expect_err(refused);
        assert!(message.contains(why), "{refused}: {message}");
    }
    // INSERT OR REPLACE cannot overwrite an end either.
    let replaced = conn
        .execute_batch(&format!(
            "INSERT INTO ledger (hash, seq, at, kind, business) VALUES (zeroblob(32), {NEXT}, {LATER}, 'session.ended', 'acme'); \
             INSERT OR REPLACE INTO run_ends (seq, business, role, run, cause, status, signal, vacated) \
             VALUES ((SELECT max(seq) FROM ledger), 'acme', 'dev', 'd1', 'human', NULL, NULL, 0);"
        ))
        .expect_err("an end is never replaced")
        .to_string();
    assert!(replaced.contains("mosaic:duplicate"), "{replaced}");
}

/// A row of the `agents` view: run, holding, and its end's cause, status,
/// signal and whether it has a time.
type AgentRow = (String, bool, Option<String>, Option<i64>, Option<i64>, bool);

#[test]
fn the_projections_count_an_ended_run_as_holding_nothing_and_show_its_end() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    // The scenario: the human ended l0 (which held lead), the host ended d1
    // (status 3), the revoke ended o0; nobody holds a role at its end.
    let holders: i64 = conn
        .query_row("SELECT count(*) FROM role_holders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(holders, 0);
    let mut rows = conn
        .prepare(
            "SELECT run, holding, end_cause, end_status, end_signal, ended_at IS NOT NULL \
             FROM agents ORDER BY run",
        )
        .unwrap();
    let agents: Vec<AgentRow> = rows
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let row = |run: &str, cause: Option<&str>, status: Option<i64>| {
        (
            run.to_owned(),
            false,
            cause.map(str::to_owned),
            status,
            None,
            cause.is_some(),
        )
    };
    assert_eq!(
        agents,
        [
            row("d0", None, None),
            row("d1", Some("failed"), Some(3)),
            row("l0", Some("human"), None),
            row("o0", Some("revoked"), None),
        ]
    );
}

/// An end and the claims around it, committed through the driver over
/// SQLite and over the fake: the same records read back, the same trail
/// of the role, and the same bus rebuilt.
#[test]
fn ends_read_back_trail_and_replay_as_over_the_in_memory_store() {
    fn day<S: EvidenceStore>(store: S) -> Driver<S> {
        let mut driver = Driver::open(policy_a(), store).unwrap();
        let record = |run: &str, pid| LaunchRecord {
            business: acme(),
            role: role("dev"),
            run: RunId::parse(run).unwrap(),
            harness: Harness::ClaudeCode,
            address: None,
            pid,
            start_time: 9,
        };
        driver.bind(t(10), record("r1", 11)).unwrap();
        driver.bind(t(11), record("r2", 12)).unwrap();
        driver
            .call(t(12), &caller("dev", "r1"), Command::Claim)
            .unwrap();
        let killed = Ending::of_exit(None, Some(9)).unwrap();
        driver
            .end(t(13), &RunId::parse("r1").unwrap(), killed)
            .unwrap();
        driver
            .call(t(14), &caller("dev", "r2"), Command::Claim)
            .unwrap();
        let end = Command::EndRun {
            run: RunId::parse("r2").unwrap(),
        };
        driver.call(t(15), &human(1), end).unwrap();
        driver
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus.sqlite");
    let sqlite = day(SqliteStore::create(&path).unwrap());
    let memory = day(MemoryStore::new());
    let subject = Subject::Role(role("dev"));
    let trail = sqlite.store().trail(&acme(), &subject).unwrap();
    assert_eq!(trail, memory.store().trail(&acme(), &subject).unwrap());
    let ends: Vec<&Stamped> = trail
        .iter()
        .filter(|r| matches!(r.evidence, Evidence::Claim(ClaimEvidence::Ended(_))))
        .collect();
    assert_eq!(
        ends.iter().map(|r| r.evidence.clone()).collect::<Vec<_>>(),
        [
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: acme(),
                agent: agent("dev", "r1"),
                ending: Ending::of_exit(None, Some(9)).unwrap(),
                vacated: true,
            })),
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: acme(),
                agent: agent("dev", "r2"),
                ending: Ending::of_cause(EndCause::Human),
                vacated: true,
            })),
        ]
    );
    assert!(sqlite.bus() == memory.bus(), "the same state either way");
    drop(sqlite);
    let reopened = Driver::open(policy_a(), SqliteStore::open(&path).unwrap()).unwrap();
    assert!(
        reopened.bus() == memory.bus(),
        "a reopened file rebuilds the same state"
    );
    assert_eq!(
        reopened
            .bus()
            .claims()
            .check_live(&RunId::parse("r2").unwrap()),
        Err(Refusal::RunEnded)
    );
    // The store keeps a run's one end: a second is a duplicate.
    let mut store = reopened.into_store();
    let last = store.last_write().unwrap().unwrap();
    let again = Stamped {
        at: mosaic_domain::Timestamp::from_unix_ms(last.unix_ms() + 1).unwrap(),
        evidence: Evidence::Claim(ClaimEvidence::Ended(RunEnd {
            business: acme(),
            agent: agent("dev", "r1"),
            ending: Ending::of_cause(EndCause::ProcessGone),
            vacated: false,
        })),
    };
    assert!(matches!(store.commit(&[again]), Err(StoreError::Duplicate)));
}
