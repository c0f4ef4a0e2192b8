//! `mosaic-bus/5` on real files: a send's `action.allowed` rides on its
//! message's row, and nothing a reader sees depends on it. The records
//! read back and the trail are the same whether a store keeps the record
//! in `allowances` or in the message; the schema refuses a
//! record kept both ways, or carried by a message it does not precede;
//! and a store of `mosaic-bus/4` or `mosaic-bus/5` refuses to open.

use std::path::{Path, PathBuf};

use mosaic_adapters::sqlite::{verify_file, SqliteStore};
use mosaic_domain::bus::{Command, SendInput};
use mosaic_domain::evidence::{
    ActionAllowed, Evidence, Harness, LaunchRecord, MessageEvidence, MessageRecord, Recipient,
    Sender, Stamped, Subject,
};
use mosaic_domain::{MessageId, Refusal, RunId, Target};
use mosaic_ports::fakes::MemoryStore;
use mosaic_ports::EvidenceStore;
use mosaic_tests::fixture::{
    acme, action, agent, caller, decision_id, human, key, policy_a, raise, role, t,
};
use mosaic_tests::sqlite::{populated, TempSqlite};
use mosaic_tests::{Driver, FreshStore};
use rusqlite::Connection;

fn raw(path: &Path) -> Connection {
    Connection::open(path).expect("raw connection")
}

#[track_caller]
fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// A within-role send from `lead` to `dev` at `ms`: its `action.allowed`
/// and its message, as the bus stages them.
fn send(n: u8, ms: i64) -> [Stamped; 2] {
    let from = agent("lead", "run-lead-1");
    let allowed = Evidence::Allowed(ActionAllowed {
        business: acme(),
        agent: from.clone(),
        action: action("message.send"),
        target: Some(Target::from(&role("dev"))),
        decision: None,
        subject: Some(Subject::Role(role("dev"))),
    });
    let message = Evidence::Message(MessageEvidence::Sent(Box::new(MessageRecord {
        id: MessageId::from_random([n; 16]),
        business: acme(),
        from: Sender::Agent(from),
        to: Recipient::Role(role("dev")),
        class: None,
        body: format!("message {n}"),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    })));
    [
        Stamped {
            at: t(ms),
            evidence: allowed,
        },
        Stamped {
            at: t(ms + 1),
            evidence: message,
        },
    ]
}

/// Two stores with one store id (a copy of one new, closed file), so their
/// chains start alike.
fn twins(dir: &Path) -> (PathBuf, PathBuf) {
    let one = dir.join("one.sqlite");
    drop(SqliteStore::create(&one).expect("new store"));
    let other = dir.join("other.sqlite");
    std::fs::copy(&one, &other).expect("copy");
    (one, other)
}

/// The same sends staged as the bus stages them (each send's two records in
/// one call: carried) and one record a call (each its own row) read back
/// alike, trail and replay included, and both files verify.
#[test]
fn a_carried_action_allowed_reads_and_chains_as_one_kept_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (carried, apart) = twins(dir.path());
    let sends: Vec<[Stamped; 2]> = (1..=3).map(|n| send(n, 1_000 * i64::from(n))).collect();
    let mut a = SqliteStore::open(&carried).unwrap();
    let mut b = SqliteStore::open(&apart).unwrap();
    for pair in &sends {
        a.stage(pair).unwrap();
        a.commit_staged().unwrap();
        for record in pair {
            b.stage(std::slice::from_ref(record)).unwrap();
            b.commit_staged().unwrap();
        }
    }
    // The role's trail holds the grants; each message's, its message.
    let trail = |s: &SqliteStore, subject: Subject| s.trail(&acme(), &subject).unwrap();
    let grants: Vec<Stamped> = sends.iter().map(|[allowed, _]| allowed.clone()).collect();
    for store in [&a, &b] {
        assert_eq!(trail(store, Subject::Role(role("dev"))), grants);
        for n in 1..=3 {
            let id = MessageId::from_random([n; 16]);
            let message = &sends[usize::from(n) - 1][1];
            assert_eq!(
                trail(store, Subject::Message(id)),
                std::slice::from_ref(message)
            );
            let facts = store.message(&id).unwrap().expect("the message");
            assert_eq!(
                Evidence::Message(MessageEvidence::Sent(Box::new(facts.record))),
                message.evidence
            );
        }
    }
    // The grant hashes alike either way; the message's `allowed` column
    // is hashed with the message, so the heads differ from there on.
    let (head_a, head_b) = (a.chain_head().unwrap(), b.chain_head().unwrap());
    assert_eq!(
        (head_a.store_id, head_a.size),
        (head_b.store_id, head_b.size)
    );
    assert_ne!(head_a.hash, head_b.hash);
    let mut replayed = (Vec::new(), Vec::new());
    a.replay(&mut |r| replayed.0.push(r)).unwrap();
    b.replay(&mut |r| replayed.1.push(r)).unwrap();
    assert_eq!(replayed.0, replayed.1);
    drop((a, b));
    for (path, kept_apart, carrying) in [(&carried, 0, 3), (&apart, 3, 0)] {
        let conn = raw(path);
        assert_eq!(count(&conn, "SELECT count(*) FROM allowances"), kept_apart);
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM messages WHERE allowed = 'within-role'"
            ),
            carrying
        );
        assert_eq!(count(&conn, "SELECT count(*) FROM actions_allowed"), 3);
        drop(conn);
        let verified = verify_file(path).expect("verifies");
        assert_eq!(verified.head().size, 6);
        SqliteStore::open(path).expect("opens again");
    }
}

/// The working-day scenario through the real bus: every message an agent
/// sends carries its `action.allowed`; none is left in `allowances`.
#[test]
fn every_agent_send_of_the_scenario_is_carried_by_its_message() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM allowances WHERE action = 'message.send'"
        ),
        0
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM messages WHERE from_run IS NOT NULL AND allowed IS NULL"
        ),
        0
    );
    assert!(
        count(
            &conn,
            "SELECT count(*) FROM messages WHERE allowed = 'within-role'"
        ) > 0
    );
}

/// `ops` sends to `dev` with the human's approval, through the bus over
/// the in-memory store and over SQLite: the message carries its grant as
/// `approved`, the decision's trail (which holds the grant) and the
/// message read back are the same over both stores, and the file
/// verifies and opens again.
#[test]
fn an_approved_send_is_carried_and_reads_as_over_the_fake() {
    fn day<S: EvidenceStore>(store: S) -> S {
        let mut driver = Driver::open(policy_a(), store).expect("opens");
        let mut now = 1_000;
        let mut at = || {
            now += 7;
            t(now)
        };
        let record = LaunchRecord {
            business: acme(),
            role: role("ops"),
            run: RunId::parse("o0").unwrap(),
            harness: Harness::Pi,
            address: None,
            pid: 100,
            start_time: 4_100,
        };
        driver.bind(at(), record).expect("binds");
        let ops = caller("ops", "o0");
        driver.call(at(), &ops, Command::Claim).expect("claims");
        driver
            .call(at(), &ops, raise(7, "message.send", Some("dev")))
            .expect("raises");
        let resolve = Command::Resolve {
            id: decision_id(7),
            choice: key("yes"),
            note: None,
        };
        driver.call(at(), &human(1), resolve).expect("resolves");
        let send = Command::Send {
            id: MessageId::from_random([9; 16]),
            input: Box::new(SendInput {
                to: Recipient::Role(role("dev")),
                class: None,
                body: "approved".into(),
                in_reply_to: None,
                corrects: None,
                decision: Some(decision_id(7)),
            }),
            known: Vec::new(),
        };
        driver
            .call(at(), &ops, send)
            .expect("sends with the approval");
        driver.into_store()
    }
    let fake = day(MemoryStore::new());
    let file = day(TempSqlite::fresh());
    let subject = Subject::Decision(decision_id(7));
    let trail = file.trail(&acme(), &subject).unwrap();
    assert_eq!(trail, fake.trail(&acme(), &subject).unwrap());
    assert!(
        trail.iter().any(
            |r| matches!(&r.evidence, Evidence::Allowed(a) if a.decision == Some(decision_id(7)))
        ),
        "{trail:?}"
    );
    let id = MessageId::from_random([9; 16]);
    assert_eq!(
        file.message(&id).unwrap().map(|f| f.record),
        fake.message(&id).unwrap().map(|f| f.record)
    );
    let path = file.dir().join("bus.sqlite");
    let conn = raw(&path);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM messages WHERE allowed = 'approved' AND decision IS NOT NULL"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM allowances WHERE action = 'message.send'"
        ),
        0
    );
    drop(conn);
    verify_file(&path).expect("verifies");
    drop(file.reopen());
}

/// The message a raw statement is refused with.
#[track_caller]
fn refused(conn: &Connection, sql: &str) -> String {
    match conn.execute_batch(sql) {
        Ok(()) => panic!("{sql} was accepted"),
        Err(e) => e.to_string(),
    }
}

/// A carried record cannot also be a row of `allowances`, and a message
/// cannot carry what is not an `action.allowed` of its business right
/// before it: the insert triggers refuse both, by SQL around the store.
#[test]
fn a_record_kept_twice_or_carried_from_elsewhere_is_refused_at_insert() {
    let (_dir, path) = populated();
    let conn = raw(&path);
    let (seq, business): (i64, String) = conn
        .query_row(
            "SELECT seq, business FROM messages WHERE allowed IS NOT NULL ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let twice = refused(
        &conn,
        &format!(
            "INSERT INTO allowances (seq, business, role, run, action) \
             VALUES ({}, '{business}', 'lead', 'run-lead-1', 'message.send')",
            seq - 1
        ),
    );
    assert!(twice.contains("mosaic:duplicate"), "{twice}");
    // A message at the next place whose row before it is no `action.allowed`.
    let next = count(&conn, "SELECT max(seq) + 1 FROM ledger");
    let at = "strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT max(at) FROM ledger), '+1 seconds')";
    conn.execute_batch(&format!(
        "INSERT INTO ledger (seq, at, kind, business, hash) VALUES ({next}, {at}, 'message.sent', '{business}', zeroblob(32))"
    ))
    .unwrap();
    let elsewhere = refused(
        &conn,
        &format!(
            "INSERT INTO messages (seq, id, business, from_role, from_run, to_role, body, allowed) \
             VALUES ({next}, '00000000-0000-4000-8000-0000000000ff', '{business}', 'lead', 'run-lead-1', 'dev', 'x', 'within-role')"
        ),
    );
    assert!(elsewhere.contains("mosaic:malformed"), "{elsewhere}");
}

/// A store of `mosaic-bus/4` or `mosaic-bus/5` (its schema, its version, a
/// store id: what that version's `create` wrote) refuses to open and to
/// verify with `schema-mismatch`, and so does that schema claiming this
/// version; no file changes.
#[test]
fn a_store_of_mosaic_bus_4_or_5_refuses_with_schema_mismatch() {
    const V4: &str = include_str!("fixtures/mosaic-bus-4.sql");
    const V5: &str = include_str!("fixtures/mosaic-bus-5.sql");
    let earlier = [
        (V4, "mosaic-bus/4"),
        (V4, mosaic_schema::VERSION),
        (V5, "mosaic-bus/5"),
        (V5, mosaic_schema::VERSION),
    ];
    for (schema, version) in earlier {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus.sqlite");
        let conn = raw(&path);
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(schema).unwrap();
        for (key, value) in [
            (mosaic_schema::VERSION_KEY, version),
            (
                mosaic_schema::STORE_ID_KEY,
                "00112233445566778899aabbccddeeff",
            ),
        ] {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                [key, value],
            )
            .unwrap();
        }
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        match SqliteStore::open(&path) {
            Ok(_) => panic!("a {version} store opened"),
            Err(e) => assert_eq!(e.refusal(), Refusal::SchemaMismatch, "{version}"),
        }
        match verify_file(&path) {
            Ok(_) => panic!("a {version} store verified"),
            Err(broken) => assert_eq!(broken.error.refusal(), Refusal::SchemaMismatch),
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "{version}");
    }
}
