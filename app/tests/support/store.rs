//! The store of a closed data root, read directly: its integrity, its
//! write times, and whether every transaction is whole.

use std::path::Path;

/// Opens `bus/bus.sqlite` read-only (after the broker closed).
pub fn open_db(root: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        root.join("bus").join("bus.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the store read-only")
}

/// `PRAGMA quick_check` and `PRAGMA foreign_key_check` of a closed data root.
#[track_caller]
pub fn assert_store_intact(root: &Path) {
    let db = open_db(root);
    let check: String = db
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .expect("quick_check");
    assert_eq!(check, "ok");
    let mut fk = db.prepare("PRAGMA foreign_key_check").expect("prepare");
    let dangling = fk.query_map([], |_| Ok(())).expect("query").count();
    assert_eq!(dangling, 0, "dangling references");
}

/// Every broker write time of a closed data root, in write (`seq`) order.
pub fn ledger_times(root: &Path) -> Vec<String> {
    let db = open_db(root);
    let mut rows = db
        .prepare("SELECT at FROM ledger ORDER BY seq")
        .expect("prepare");
    rows.query_map([], |r| r.get::<_, String>(0))
        .expect("query")
        .map(|r| r.expect("a row"))
        .collect()
}

/// One `SELECT count(*) …` (or any single-integer query) on `db`.
#[track_caller]
pub fn count(db: &rusqlite::Connection, sql: &str, params: impl rusqlite::Params) -> i64 {
    db.query_row(sql, params, |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Every typed table of the schema with the condition its ledger row `l`
/// meets for a typed row `t`: the kind the row records.
pub const TYPED_TABLES: [(&str, &str); 14] = [
    ("launches", "l.kind = 'session.launched'"),
    (
        "launch_switches",
        "l.kind = CASE t.state WHEN 'off' THEN 'launch.revoked' ELSE 'launch.restored' END",
    ),
    ("claims", "l.kind = 'role.' || t.event"),
    ("decisions", "l.kind = 'decision.raised'"),
    ("decision_events", "l.kind = 'decision.' || t.event"),
    ("consumptions", "l.kind = 'approval.consumed'"),
    ("actions_allowed", "l.kind = 'action.allowed'"),
    ("human_inputs", "l.kind = 'human.input'"),
    ("messages", "l.kind = 'message.sent'"),
    ("deliveries", "l.kind = 'message.delivered'"),
    ("reads", "l.kind = 'message.read'"),
    ("observations", "l.kind = 'event.observed'"),
    ("refusals", "l.kind = 'request.refused'"),
    ("refusal_counts", "l.kind = 'refusals.counted'"),
];

/// Checks, on a closed data root, that no transaction is half-applied:
/// `quick_check` and `foreign_key_check` pass; the ledger has no gap; each
/// ledger row has exactly one typed row, of its kind; and every message an
/// agent sent sits right after the `action.allowed` of the same send (one
/// transaction writes both), and every such `action.allowed` has its
/// message. Returns the number of ledger rows.
#[track_caller]
pub fn assert_whole_transactions(root: &Path) -> i64 {
    assert_store_intact(root);
    let db = open_db(root);
    let rows = count(&db, "SELECT count(*) FROM ledger", []);
    let max = count(&db, "SELECT coalesce(max(seq), 0) FROM ledger", []);
    assert_eq!(rows, max, "the ledger has gaps");
    let mut typed = 0;
    for (table, kind) in TYPED_TABLES {
        typed += count(&db, &format!("SELECT count(*) FROM {table}"), []);
        let wrong = count(
            &db,
            &format!(
                "SELECT count(*) FROM {table} t LEFT JOIN ledger l ON l.seq = t.seq \
                 WHERE l.seq IS NULL OR NOT ({kind})"
            ),
            [],
        );
        assert_eq!(wrong, 0, "{table} rows without their ledger row");
    }
    assert_eq!(typed, rows, "ledger rows and typed rows differ");
    let union = TYPED_TABLES
        .iter()
        .map(|(table, _)| format!("SELECT seq FROM {table}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let shared = count(
        &db,
        &format!(
            "SELECT count(*) FROM (SELECT seq FROM ({union}) GROUP BY seq HAVING count(*) <> 1)"
        ),
        [],
    );
    assert_eq!(shared, 0, "a ledger seq with more than one typed row");
    let unpaired_messages = count(
        &db,
        "SELECT count(*) FROM messages m WHERE m.from_run IS NOT NULL AND NOT EXISTS \
         (SELECT 1 FROM actions_allowed a WHERE a.seq = m.seq - 1 AND a.action = 'message.send' \
          AND a.run = m.from_run AND a.business = m.business AND a.target IS coalesce(m.to_role, 'human'))",
        [],
    );
    assert_eq!(unpaired_messages, 0, "a message without its action.allowed");
    let unpaired_allowed = count(
        &db,
        "SELECT count(*) FROM actions_allowed a WHERE a.action = 'message.send' AND NOT EXISTS \
         (SELECT 1 FROM messages m WHERE m.seq = a.seq + 1 AND m.from_run = a.run)",
        [],
    );
    assert_eq!(unpaired_allowed, 0, "an action.allowed without its message");
    rows
}
