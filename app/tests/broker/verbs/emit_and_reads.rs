//! `event.emit`, the launch switch, and the reads.

use super::*;

#[test]
fn event_emit_records_routine_observations_only() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let emit = |body: Value, subject: Value| json!({"kind": "action.allowed", "body": body, "subject": subject});
    assert_eq!(
        lead.ok(
            "event.emit",
            emit(
                json!({"action": "routine", "target": "ci"}),
                json!("vikunja:3/41")
            )
        ),
        json!({})
    );
    assert_eq!(
        lead.trail("vikunja:3/41"),
        [
            json!({"kind": "action.allowed", "business": "acme", "role": "lead", "run": "lead-1",
                "action": "routine", "target": "ci", "decision": null,
                "subject": "vikunja:3/41", "subject_kind": "task"})
        ]
    );
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    lead.ok(
        "event.emit",
        emit(json!({"action": "routine"}), d["id"].clone()),
    );
    assert_eq!(
        of_kind(&lead, d["id"].as_str().expect("an id"), "action.allowed")[0]["subject_kind"],
        "decision"
    );
    lead.ok(
        "event.emit",
        emit(json!({"action": "routine"}), json!("qa")),
    );
    lead.ok(
        "event.emit",
        json!({"kind": "action.allowed", "body": {"action": "routine"}}),
    );
    let refusals = [
        (
            emit(json!({"action": "routine"}), json!("ghost")),
            "unknown-role",
        ),
        (
            emit(json!({"action": "routine"}), json!(NOBODY)),
            "unknown-reference",
        ),
        (
            emit(json!({"action": "routine"}), json!("vikunja:0/1")),
            "bad-task-ref",
        ),
        (emit(json!({"action": "routine"}), json!("human")), "bad-id"),
        (
            emit(json!({"action": "repo.push"}), Value::Null),
            "bad-request",
        ),
        (
            emit(json!({"action": "routine", "why": "x"}), Value::Null),
            "bad-request",
        ),
        (emit(json!("routine"), Value::Null), "bad-request"),
        (
            json!({"kind": "task.created", "body": {"action": "routine"}}),
            "bad-request",
        ),
        (json!({"kind": "action.allowed"}), "bad-request"),
        (
            json!({"kind": "action.allowed", "body": {"action": "routine"}, "at": "now"}),
            "unknown-key",
        ),
    ];
    for (args, code) in refusals {
        lead.refused("event.emit", args, code);
    }
    b.close();
}

#[test]
fn the_launch_switch_is_human_only() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead] = claimed(&b, ["lead-1"]);
    for agent in [&lead, &b.agent("dev-1"), &b.reader(0)] {
        agent.refused("launch.revoke", json!({}), "human-only");
        agent.refused("launch.restore", json!({}), "human-only");
    }
    lead.refused("launch.revoke", json!({"business": "acme"}), "unknown-key");
    // Launching is still on.
    let mut b = b;
    b.bind_ok(&launch("acme", "qa", "qa-9"));
    b.close();
}

// ---- reads ---------------------------------------------------------------------

#[test]
fn inbox_shows_open_decisions_with_their_authorization_and_unread_messages() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev, qa, arch] = claimed(&b, ["lead-1", "dev-1", "qa-1", "arch-1"]);
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    let technical = dev.raise("repo.merge", Some("main"), json!({"domain": "technical"}));
    let m = qa.send("lead", "hi", json!({}));
    let mut decision_item = d.clone();
    decision_item["type"] = json!("decision");
    let message_item = |delivered: Value, read: bool| {
        let mut item = message(&m, ("qa", "qa-1"), "lead", "hi", json!({}));
        crate::support::merge(
            &mut item,
            json!({"type": "message", "delivered_to": delivered, "read": read}),
        );
        item
    };
    assert_eq!(
        lead.ok("inbox", json!({})),
        json!([decision_item, message_item(Value::Null, false)])
    );
    assert_eq!(
        decision_item["authorization"],
        json!({"action": "repo.merge", "target": "main", "approvalChoice": "yes"})
    );
    assert_eq!(arch.ok("inbox", json!({}))[0]["id"], technical["id"]);
    assert_eq!(
        arch.ok("inbox", json!({})).as_array().map(Vec::len),
        Some(1)
    );
    lead.ok("message.receive", json!({}));
    assert_eq!(
        lead.ok("inbox", json!({})),
        json!([decision_item, message_item(json!("lead-1"), false)])
    );
    lead.ok("message.read", json!({"id": m}));
    lead.resolve(&d["id"], "yes");
    assert_eq!(lead.ok("inbox", json!({})), json!([]));
    lead.refused("inbox", json!({"all": true}), "unknown-key");
    b.close();
}

#[test]
fn tasks_and_agents_are_projections_of_the_callers_business() {
    let root = data_root();
    let b = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme(), globex()],
            &[
                launch("acme", "lead", "lead-1"),
                launch("acme", "dev", "dev-1"),
                launch("globex", "dev", "g-dev-1"),
            ],
            &["acme"],
        ),
    );
    let lead = b.agent("lead-1");
    lead.claim();
    let agent = |role: &str, run: &str, holding: bool, last: Value| {
        json!({"role": role, "run": run, "harness": "pi", "address": null,
               "pid": launch_pid(), "start_time": start_time(),
               "holding": holding, "revoked": false,
               "launching": true, "waitsOn": [], "exited": null,
               "ended": null, "restarts": 0, "usage": null,
               "lastVerb": last, "waiting": false})
    };
    // The lead's row says what it asked last: this very read.
    let expected = json!([
        agent("dev", "dev-1", false, Value::Null),
        agent("lead", "lead-1", true, json!("agents"))
    ]);
    assert_eq!(without_last_at(lead.ok("agents", json!({}))), expected);
    assert_eq!(
        without_last_at(b.reader(0).ok("agents", json!({}))),
        expected
    );
    assert_eq!(lead.ok("tasks", json!({})), json!([]));
    lead.refused("tasks", json!({"open": true}), "unknown-key");
    lead.refused("agents", json!({"role": "dev"}), "unknown-key");
    b.close();
}

#[test]
fn trail_takes_a_task_ref_a_decision_or_a_message() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let d = dev.raise(
        "repo.merge",
        Some("main"),
        json!({"task_ref": "vikunja:7/1"}),
    );
    let m = lead.send("dev", "about the merge", json!({}));
    assert_eq!(dev.trail_kinds("vikunja:7/1"), ["decision.raised"]);
    assert_eq!(
        dev.trail_kinds(d["id"].as_str().expect("an id")),
        ["decision.raised"]
    );
    dev.ok("message.receive", json!({}));
    dev.ok("message.read", json!({"id": m}));
    assert_eq!(
        dev.trail_kinds(m.as_str().expect("an id")),
        ["message.sent", "message.delivered", "message.read"]
    );
    assert_eq!(lead.trail_kinds("vikunja:7/2"), Vec::<String>::new());
    lead.refused("trail", json!({"subject": NOBODY}), "unknown-reference");
    lead.refused("trail", json!({"subject": "vikunja:7"}), "bad-task-ref");
    lead.refused("trail", json!({"subject": "human"}), "bad-id");
    lead.refused(
        "trail",
        json!({"subject": d["id"].as_str().expect("an id").to_uppercase()}),
        "bad-id",
    );
    lead.refused("trail", json!({}), "bad-request");
    lead.refused("trail", json!({"subject": 7}), "bad-request");
    lead.refused(
        "trail",
        json!({"subject": "vikunja:7/1", "since": 0}),
        "unknown-key",
    );
    b.close();
}
