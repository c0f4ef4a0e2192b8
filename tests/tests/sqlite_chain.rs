//! The ledger's hash chain (`mosaic-bus/4`) on real files: every column of
//! every table hashes as SQLite returns it; an edit behind the triggers is
//! refused at open and by the offline verifier, which names the record;
//! truncation and forks are caught against a note kept outside.

use std::path::{Path, PathBuf};

use mosaic_adapters::sqlite::{
    verify_file, verify_file_cut, Cut, NoteMismatch, OpenError, SqliteStore,
};
use mosaic_domain::evidence::{
    AgentRef, ClaimEvidence, DecisionEvidence, Ending, Evidence, LaunchEvidence, MessageClass,
    MessageEvidence, RefusalCount, RefusalRecord, RunEnd, Sender, Stamped,
};
use mosaic_domain::{DecisionId, MessageId, Refusal, RunId, Timestamp};
use mosaic_ports::{EvidenceStore, StoreHead};
use mosaic_tests::sqlite::populated;
use rusqlite::Connection;

fn raw(path: &Path) -> Connection {
    Connection::open(path).expect("raw connection")
}

fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The head `verify_file` finds, checking that it created nothing beside
/// the file and changed nothing in it, and that the ledger pass cut into
/// ranges of 1, 2 or 7 rows, walked by 1, 2 or 3 threads and the checks'
/// thread (as boot cuts a large ledger), finds the very same.
#[track_caller]
fn verified(path: &Path) -> Result<StoreHead, (Refusal, Option<u64>)> {
    let before = std::fs::read(path).unwrap();
    let had_wal = beside(path, "-wal").exists();
    let found = verify_file(path)
        .map(|v| v.head().clone())
        .map_err(|b| (b.error.refusal(), b.seq));
    for (workers, rows) in [(1, 1), (2, 2), (3, 7)] {
        let cut = verify_file_cut(path, Cut::new(workers, rows))
            .map(|v| v.head().clone())
            .map_err(|b| (b.error.refusal(), b.seq));
        assert_eq!(cut, found, "in ranges of {rows} rows, {workers} threads");
    }
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "verify changed the file"
    );
    if !had_wal {
        for suffix in ["-wal", "-shm", "-journal"] {
            assert!(!beside(path, suffix).exists(), "verify created {suffix}");
        }
    }
    found
}

/// `sql` with `trigger` dropped, then restored exactly as the pinned schema
/// has it, so every digest still matches.
fn behind(trigger: &str, sql: &str) -> String {
    let schema = mosaic_schema::SCHEMA_SQL;
    let start = schema
        .find(&format!("CREATE TRIGGER {trigger} "))
        .expect("trigger in schema");
    let rest = &schema[start..];
    let statement = &rest[..rest.find("END;").expect("trigger end") + 4];
    format!("DROP TRIGGER {trigger}; {sql}; {statement}")
}

/// Applies `tamper` to a populated store and checks that the open and the
/// verifier both refuse it with `integrity-failed`, the verifier naming
/// the `seq` that `seq_sql` selected before the tamper.
#[track_caller]
fn assert_chain_breaks_at(seq_sql: &str, tamper: &str) {
    let (_dir, path) = populated();
    let conn = raw(&path);
    let seq: i64 = conn.query_row(seq_sql, [], |r| r.get(0)).unwrap();
    let seq = u64::try_from(seq).unwrap();
    conn.execute_batch(tamper).expect("the tamper applies");
    drop(conn);
    assert_eq!(
        verified(&path),
        Err((Refusal::IntegrityFailed, Some(seq))),
        "{tamper}"
    );
    let before = std::fs::read(&path).unwrap();
    match SqliteStore::open(&path) {
        Ok(_) => panic!("a tampered store opened: {tamper}"),
        Err(e) => assert_eq!(e.refusal(), Refusal::IntegrityFailed, "{tamper}"),
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a refused open changed the file"
    );
}

/// The writer hashes the values it binds, the verifiers the values SQLite
/// returns: the scenario writes a row into every table, and the chain
/// recomputed from what SQLite returns matches what the writer stored, for
/// every column (each of which holds a value somewhere).
#[test]
fn every_column_of_every_table_round_trips_into_the_same_chain() {
    let (_dir, path) = populated();
    with_the_columns_the_scenario_leaves_empty(&path);
    let conn = raw(&path);
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'meta'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tables.len(), 16, "{tables:?}");
    let mut never_set = Vec::new();
    for table in &tables {
        let columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for column in columns {
            let set: i64 = conn
                .query_row(
                    &format!("SELECT count(*) FROM \"{table}\" WHERE \"{column}\" IS NOT NULL"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            if set == 0 {
                never_set.push(format!("{table}.{column}"));
            }
        }
    }
    drop(conn);
    assert_eq!(
        never_set,
        Vec::<String>::new(),
        "columns the scenario never sets"
    );
    let head = verified(&path).expect("the chain verifies");
    let store = SqliteStore::open(&path).expect("the chain verifies at open");
    assert_eq!(head.size, store.head().unwrap());
}

/// Records that set what the scenario never does: a launch's address, a
/// decision's project and requirement, a message's class, correction and
/// decision, an end by a signal; each a copy of a stored record under a
/// new id.
fn with_the_columns_the_scenario_leaves_empty(path: &Path) {
    let mut store = SqliteStore::open(path).expect("opens");
    let mut launch = None;
    store
        .replay(&mut |r| {
            if let Evidence::Launch(LaunchEvidence::Launched(l)) = r.evidence {
                launch = Some(l);
            }
        })
        .unwrap();
    let mut launch = launch.expect("the scenario launches");
    launch.run = RunId::parse("run-with-an-address").unwrap();
    launch.address = Some("tmux:%7".to_owned());
    // That run ends killed by a signal, which no end of the scenario is.
    let (end_business, end_agent) = (
        launch.business.clone(),
        AgentRef {
            role: launch.role.clone(),
            run: launch.run.clone(),
        },
    );
    let conn = raw(path);
    let (decision, message): (String, String) = conn
        .query_row(
            "SELECT (SELECT id FROM decisions WHERE business = m.business ORDER BY seq LIMIT 1), m.id \
             FROM messages m WHERE m.from_role IS NOT NULL ORDER BY m.seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    drop(conn);
    let decision = DecisionId::parse(&decision).unwrap();
    let mut raised = store.decision(&decision).unwrap().expect("stored");
    raised.id = DecisionId::from_random([7; 16]);
    raised.fields.project = Some("Apollo".to_owned());
    raised.fields.requirement_ref = Some("REQ-12".to_owned());
    raised.fields.supersedes = None;
    let message = MessageId::parse(&message).unwrap();
    let mut sent = store.message(&message).unwrap().expect("stored").record;
    sent.id = MessageId::from_random([9; 16]);
    sent.class = Some(MessageClass::Info);
    sent.corrects = Some(message);
    sent.decision = Some(decision);
    sent.in_reply_to = None;
    sent.request = None;
    let Sender::Agent(agent) = sent.from.clone() else {
        panic!("the message chosen is from an agent")
    };
    let counted = RefusalCount {
        refused: RefusalRecord {
            business: Some(sent.business.clone()),
            agent: Some(agent),
            verb: Some("message.send".to_owned()),
            refusal: Refusal::NotAuthorized,
        },
        since: store.last_write().unwrap().expect("written"),
        count: 3,
    };
    let last = store.last_write().unwrap().expect("written");
    let at = |k: i64| Timestamp::from_unix_ms(last.unix_ms() + k).unwrap();
    store
        .commit(&[
            Stamped {
                at: at(1),
                evidence: Evidence::Launch(LaunchEvidence::Launched(launch)),
            },
            Stamped {
                at: at(2),
                evidence: Evidence::Decision(DecisionEvidence::Raised(Box::new(raised))),
            },
            Stamped {
                at: at(3),
                evidence: Evidence::Message(MessageEvidence::Sent(Box::new(sent))),
            },
            Stamped {
                at: at(4),
                evidence: Evidence::RefusalsCounted(counted),
            },
            Stamped {
                at: at(5),
                evidence: Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                    business: end_business,
                    agent: end_agent,
                    ending: Ending::of_exit(None, Some(9)).unwrap(),
                    vacated: false,
                })),
            },
        ])
        .expect("commits");
}

#[test]
fn a_changed_body_question_note_option_recipient_or_time_is_named_by_its_seq() {
    let cases = [
        (
            "SELECT min(seq) FROM messages",
            behind(
                "messages_no_update",
                "UPDATE messages SET body = body || '.' WHERE seq = (SELECT min(seq) FROM messages)",
            ),
        ),
        (
            "SELECT min(seq) FROM decisions",
            behind(
                "decisions_no_update",
                "UPDATE decisions SET question = 'Another question?' \
                 WHERE seq = (SELECT min(seq) FROM decisions)",
            ),
        ),
        (
            "SELECT max(seq) FROM decision_events",
            behind(
                "decision_events_no_update",
                "UPDATE decision_events SET note = coalesce(note, '') || ' (edited)' \
                 WHERE seq = (SELECT max(seq) FROM decision_events)",
            ),
        ),
        (
            "SELECT min(seq) FROM decisions",
            behind(
                "decisions_no_update",
                "UPDATE decisions SET options = json_replace(options, '$[0].text', 'something else') \
                 WHERE seq = (SELECT min(seq) FROM decisions)",
            ),
        ),
        (
            "SELECT min(seq) FROM messages WHERE to_role IS NOT NULL",
            behind(
                "messages_no_update",
                "UPDATE messages SET to_role = 'intruder' \
                 WHERE seq = (SELECT min(seq) FROM messages WHERE to_role IS NOT NULL)",
            ),
        ),
        (
            "SELECT max(seq) FROM ledger",
            behind(
                "ledger_no_update",
                "UPDATE ledger SET at = strftime('%Y-%m-%dT%H:%M:%fZ', at, '+1 second') \
                 WHERE seq = (SELECT max(seq) FROM ledger)",
            ),
        ),
    ];
    for (seq, tamper) in &cases {
        assert_chain_breaks_at(seq, tamper);
    }
}

/// A message that carries its send's `action.allowed` (`mosaic-bus/5`):
/// a changed recipient, grant or sender, or the grant dropped, breaks the
/// grant's link first, the record before the message; a grant given to a
/// message that carried none breaks at that message.
#[test]
fn a_carried_grant_changed_or_dropped_is_named_by_the_grant() {
    let carried = "SELECT min(seq) FROM messages WHERE allowed IS NOT NULL";
    let grant = format!("SELECT seq - 1 FROM messages WHERE seq = ({carried})");
    for change in [
        "to_role = 'intruder'",
        "allowed = NULL",
        "from_role = 'ops'",
        "from_run = 'd1'",
    ] {
        let tamper = format!("UPDATE messages SET {change} WHERE seq = ({carried})");
        assert_chain_breaks_at(&grant, &behind("messages_no_update", &tamper));
    }
    // The human's message, given a sender and a grant: no grant stands
    // before it.
    let human = "SELECT min(seq) FROM messages WHERE from_run IS NULL";
    let tamper = format!(
        "UPDATE messages SET from_role = 'lead', from_run = 'l0', allowed = 'within-role' \
         WHERE seq = ({human})"
    );
    assert_chain_breaks_at(human, &behind("messages_no_update", &tamper));
}

/// Two messages exchange every column but their `seq`: each row is
/// well-formed where it now stands, but the chain breaks at the first.
#[test]
fn a_swapped_pair_of_rows_is_named_by_the_first() {
    let columns =
        "id, business, from_role, from_run, to_role, class, body, in_reply_to, corrects, \
                   decision, request, allowed";
    let swap = format!(
        "PRAGMA foreign_keys = OFF; CREATE TEMP TABLE pair AS SELECT * FROM messages ORDER BY seq LIMIT 2; \
         UPDATE messages SET id = '00000000-0000-4000-8000-000000000000' \
           WHERE seq = (SELECT min(seq) FROM pair); \
         UPDATE messages SET ({columns}) = (SELECT {columns} FROM pair WHERE seq = (SELECT min(seq) FROM pair)) \
           WHERE seq = (SELECT max(seq) FROM pair); \
         UPDATE messages SET ({columns}) = (SELECT {columns} FROM pair WHERE seq = (SELECT max(seq) FROM pair)) \
           WHERE seq = (SELECT min(seq) FROM pair)"
    );
    assert_chain_breaks_at(
        "SELECT min(seq) FROM messages",
        &behind("messages_no_update", &swap),
    );
}

#[test]
fn a_changed_store_id_breaks_the_first_record() {
    assert_chain_breaks_at(
        "SELECT 1",
        &behind(
            "meta_no_update",
            "UPDATE meta SET value = '00000000000000000000000000000000' WHERE key = 'store_id'",
        ),
    );
}

/// A refused request's record, `ms` milliseconds after `last`.
fn refusal_after(last: Timestamp, ms: i64, verb: &str) -> Stamped {
    Stamped {
        at: Timestamp::from_unix_ms(last.unix_ms() + ms).unwrap(),
        evidence: Evidence::Refused(RefusalRecord {
            business: None,
            agent: None,
            verb: Some(verb.to_owned()),
            refusal: Refusal::BadRequest,
        }),
    }
}

/// `n` refusals committed after the store's last write.
fn grow(path: &Path, n: i64, verb: &str) {
    let mut store = SqliteStore::open(path).expect("opens");
    let last = store.last_write().unwrap().expect("a written store");
    for k in 1..=n {
        store
            .commit(&[refusal_after(last, k, verb)])
            .expect("commits");
    }
}

/// The writer links each row to the one before without reading it back;
/// batches abandoned, stages refused (a batch's first and a later one) and
/// stages after them must still link to what was committed.
#[test]
fn the_chain_holds_across_abandoned_batches_and_refused_stages() {
    let (_dir, path) = populated();
    let mut store = SqliteStore::open(&path).expect("opens");
    let last = store.last_write().unwrap().expect("a written store");
    let mut k = 0;
    let mut refusal = |verb: &str| {
        k += 1;
        refusal_after(last, k, verb)
    };
    let stale = Stamped {
        at: last,
        ..refusal("stale")
    };
    // Staged, then abandoned.
    store.stage(&[refusal("abandoned")]).expect("stages");
    store.abandon();
    store
        .commit(&[refusal("after an abandon")])
        .expect("commits");
    // A batch's first stage refused, then a stage that commits.
    store.stage(&[refusal("kept"), stale.clone()]).unwrap_err();
    store.stage(&[refusal("first")]).expect("stages");
    // A later stage refused, then one more.
    store.stage(&[refusal("dropped"), stale]).unwrap_err();
    store.stage(&[refusal("second")]).expect("stages");
    store.commit_staged().expect("commits");
    let head = store.head().unwrap();
    drop(store);
    let found = verified(&path).expect("the chain holds");
    assert_eq!(found.size, head);
}

#[track_caller]
fn against(path: &Path, note: &StoreHead) -> Option<NoteMismatch> {
    verify_file(path)
        .expect("the store verifies on its own")
        .check(note)
        .expect("reads")
}

#[test]
fn deleting_the_newest_records_boots_but_a_later_note_says_truncated() {
    let (_dir, path) = populated();
    grow(&path, 3, "newest");
    let note = verified(&path).unwrap();
    let conn = raw(&path);
    conn.execute_batch(&behind(
        "ledger_no_delete",
        &behind(
            "refusals_no_delete",
            "DELETE FROM refusals WHERE seq > (SELECT max(seq) - 3 FROM ledger); \
             DELETE FROM ledger WHERE seq > (SELECT max(seq) - 3 FROM ledger)",
        ),
    ))
    .expect("the deletion applies");
    drop(conn);
    let store = SqliteStore::open(&path).expect("a shorter store is self-consistent");
    assert_eq!(store.head().unwrap(), note.size - 3);
    drop(store);
    let now = verified(&path).expect("verifies on its own");
    assert_eq!(now.size, note.size - 3);
    assert_eq!(against(&path, &note), Some(NoteMismatch::Truncated));
    assert_eq!(against(&path, &now), None);
}

#[test]
fn an_older_copy_in_place_of_the_file_says_truncated_against_a_later_note() {
    let (dir, path) = populated();
    let older = dir.path().join("older.sqlite");
    std::fs::copy(&path, &older).unwrap();
    let old_note = verified(&path).unwrap();
    grow(&path, 3, "later");
    let note = verified(&path).unwrap();
    assert_eq!(note.size, old_note.size + 3);
    assert_eq!(
        against(&path, &old_note),
        None,
        "a store extends its earlier notes"
    );
    std::fs::rename(&older, &path).unwrap();
    SqliteStore::open(&path).expect("the older copy boots");
    assert_eq!(against(&path, &note), Some(NoteMismatch::Truncated));
}

#[test]
fn two_stores_grown_from_one_copy_are_forked_against_each_other() {
    let (dir, path) = populated();
    let other = dir.path().join("other.sqlite");
    std::fs::copy(&path, &other).unwrap();
    let common = verified(&path).unwrap();
    grow(&path, 2, "here");
    grow(&other, 2, "there");
    let (here, there) = (verified(&path).unwrap(), verified(&other).unwrap());
    assert_eq!(
        (here.size, here.store_id.as_str()),
        (there.size, there.store_id.as_str())
    );
    assert_eq!(against(&path, &there), Some(NoteMismatch::Forked));
    assert_eq!(against(&other, &here), Some(NoteMismatch::Forked));
    assert_eq!(against(&path, &common), None);
    assert_eq!(against(&other, &common), None);
}

#[test]
fn a_note_round_trips_through_its_text() {
    let (_dir, path) = populated();
    let head = verified(&path).unwrap();
    let note = head.note();
    assert!(note.starts_with(&format!("mosaic-bus/{}\n{}\n", head.store_id, head.size)));
    assert_eq!(StoreHead::parse_note(&note), Some(head.clone()));
    for broken in [
        &note[..note.len() - 1],
        &note.replacen('\n', "\n\n", 1),
        "mosaic-bus/x\n1\n",
    ] {
        assert_eq!(StoreHead::parse_note(broken), None, "{broken:?}");
    }
}

#[test]
fn a_missing_file_is_wrong_state_for_the_verifier() {
    let dir = tempfile::tempdir().unwrap();
    let missing = verify_file(&dir.path().join("none.sqlite")).unwrap_err();
    assert!(matches!(missing.error, OpenError::WrongState));
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}
