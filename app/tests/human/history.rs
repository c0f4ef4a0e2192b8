//! `history`: the business's closed decisions, newest closing first, for
//! the human and readers only, a page at a time.

use super::*;

/// The `at` of the record that closed `id`, from its trail.
#[track_caller]
fn closed_at(reader: &Agent, id: &Value) -> Value {
    let trail = reader.ok("trail", json!({"subject": id}));
    let closing = trail
        .as_array()
        .expect("an array")
        .iter()
        .find(|r| {
            matches!(
                r["kind"].as_str(),
                Some("decision.resolved" | "decision.withdrawn" | "decision.superseded")
            )
        })
        .unwrap_or_else(|| panic!("{id} closed: {trail}"));
    closing["at"].clone()
}

/// The position of the change `kind` about decision `id` after `cursor`.
#[track_caller]
fn position(reader: &Agent, cursor: &Value, kind: &str, id: &Value) -> Value {
    let page = reader.ok("changes", json!({"since": cursor, "timeoutMs": 1000}));
    let change = page["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["kind"] == json!(kind) && &c["decision"] == id)
        .unwrap_or_else(|| panic!("{kind} of {id} after {cursor}: {page}"));
    change["seq"].clone()
}

/// A row of `history`.
#[allow(clippy::too_many_arguments)]
fn row(
    decision: &Value,
    status: &str,
    by: (Value, Value),
    choice: Value,
    note: Value,
    superseded_by: Value,
    at: Value,
    seq: Value,
) -> Value {
    json!({
        "action": decision["action"], "at": at, "blocking": decision["blocking"],
        "by": by.0, "byRun": by.1, "choice": choice, "id": decision["id"], "note": note,
        "raiser": decision["raisedBy"]["role"], "raiserRun": decision["raisedBy"]["run"],
        "route": decision["route"], "seq": seq, "status": status,
        "supersededBy": superseded_by, "target": decision["target"],
    })
}

/// Raises and closes decisions every way one closes, and marks one seen:
/// the human (through the CLI) and a reader read them newest closing
/// first, every key written; the seen one is not there; 100 rows to a
/// page, the rest counted and read with `before`; an agent is refused.
#[test]
fn the_human_reads_closed_decisions_newest_first_a_page_at_a_time() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops, dev, lead] = claimed(&b, ["ops-1", "dev-1", "lead-1"]);
    let reader = b.reader(0);
    let history = |args: Value| human(&b.socket, &acme_request("history", args)).ok();
    assert_eq!(history(json!({})), json!([]));

    // 101 withdrawn ones, the oldest closings.
    let early: Vec<Value> = (0..101)
        .map(|i| {
            let d = dev.raise("repo.merge", Some(&format!("acme/pr-{i}")), json!({}));
            dev.ok("decision.withdraw", json!({"id": d["id"]}));
            d["id"].clone()
        })
        .collect();

    let cursor = reader.ok("changes", json!({}))["cursor"].clone();
    let gated = gated_send(&ops);
    let merge = dev.raise("repo.merge", Some("acme/main"), json!({}));
    let dropped = dev.raise("repo.merge", Some("acme/dev"), json!({}));
    let replaced = dev.raise("repo.merge", Some("acme/old"), json!({}));
    let open = gated_send(&ops);
    dev.ok(
        "decision.withdraw",
        json!({"id": dropped["id"], "note": "not needed"}),
    );
    lead.ok(
        "decision.resolve",
        json!({"id": merge["id"], "choice": "no", "note": "after the freeze"}),
    );
    let newer = dev.raise(
        "repo.merge",
        Some("acme/new"),
        json!({"supersedes": replaced["id"]}),
    );
    human(
        &b.socket,
        &acme_request("decision.seen", json!({"id": open["id"]})),
    )
    .ok();
    human(
        &b.socket,
        &acme_request(
            "decision.resolve",
            json!({"id": gated["id"], "choice": "yes", "note": "ship it"}),
        ),
    )
    .ok();
    lead.ok("decision.seen", json!({"id": newer["id"]}));

    let at = |d: &Value| closed_at(&reader, &d["id"]);
    let seq = |kind: &str, d: &Value| position(&reader, &cursor, kind, &d["id"]);
    let null = || Value::Null;
    let newest = [
        row(
            &gated,
            "resolved",
            (json!("human"), null()),
            json!("yes"),
            json!("ship it"),
            null(),
            at(&gated),
            seq("decision.resolved", &gated),
        ),
        row(
            &replaced,
            "superseded",
            (null(), null()),
            null(),
            null(),
            newer["id"].clone(),
            at(&replaced),
            seq("decision.superseded", &replaced),
        ),
        row(
            &merge,
            "resolved",
            (json!("lead"), json!("lead-1")),
            json!("no"),
            json!("after the freeze"),
            null(),
            at(&merge),
            seq("decision.resolved", &merge),
        ),
        row(
            &dropped,
            "withdrawn",
            (json!("dev"), json!("dev-1")),
            null(),
            json!("not needed"),
            null(),
            at(&dropped),
            seq("decision.withdrawn", &dropped),
        ),
    ];
    assert_eq!(newest[0]["route"], json!("human"));
    assert_eq!(newest[2]["route"], json!("lead"));

    let first = history(json!({}));
    assert_eq!(first, reader.ok("history", json!({})));
    let rows = first.as_array().expect("an array");
    assert_eq!(rows.len(), 101, "100 rows and the count of the rest");
    assert_eq!(rows[..4], newest);
    assert_eq!(rows[100], json!({"type": "more", "closed": 5}));
    // Then the withdrawn ones, newest first, each by its raiser.
    let listed: Vec<&Value> = rows[4..100].iter().map(|r| &r["id"]).collect();
    let expected: Vec<&Value> = early.iter().rev().take(96).collect();
    assert_eq!(listed, expected);
    assert!(rows[4..100]
        .iter()
        .all(|r| r["status"] == json!("withdrawn") && r["by"] == json!("dev")));
    let seqs: Vec<u64> = rows[..100]
        .iter()
        .map(|r| r["seq"].as_u64().expect("a seq"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{seqs:?}");
    assert!(
        rows[..100].iter().all(|r| r["id"] != open["id"]),
        "seen is no closing"
    );

    let second = history(json!({"before": rows[99]["seq"]}));
    let second = second.as_array().expect("an array");
    let ids: Vec<&Value> = second.iter().map(|r| &r["id"]).collect();
    let expected: Vec<&Value> = early[..5].iter().rev().collect();
    assert_eq!(ids, expected, "the older five, and no more item");
    assert_eq!(
        reader
            .ok("history", json!({"before": rows[1]["seq"]}))
            .as_array()
            .map(|r| r[..2].to_vec()),
        Some(newest[2..].to_vec())
    );
    assert_eq!(history(json!({"before": 1})), json!([]));

    agent_refused(&dev);
    agent_refused(&lead);
    let bad = human(&b.socket, &acme_request("history", json!({"before": "7"})));
    bad.refused("bad-request", 1);
    let unknown = human(&b.socket, &acme_request("history", json!({"after": 7})));
    unknown.refused("unknown-key", 1);
    b.close();
}

#[track_caller]
fn agent_refused(agent: &Agent) {
    agent.refused("history", json!({}), "not-authorized");
}
