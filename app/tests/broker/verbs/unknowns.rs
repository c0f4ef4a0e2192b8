//! Unknown things, businesses and readers.

use super::*;

#[test]
fn unknown_verbs_keys_roles_references_and_actions_refuse() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead] = claimed(&b, ["lead-1"]);
    let cases = [
        ("role.steal", json!({}), "unknown-verb"),
        ("Role.Claim", json!({}), "unknown-verb"),
        ("browser.click", json!({}), "unknown-verb"),
        ("authorize", json!({}), "unknown-verb"),
        ("", json!({}), "unknown-verb"),
        ("role.claim", json!({"role": "qa"}), "unknown-key"),
        (
            "message.send",
            json!({"to": "qa", "body": "x", "cc": "dev"}),
            "unknown-key",
        ),
        (
            "message.send",
            json!({"to": "auditor", "body": "x"}),
            "unknown-role",
        ),
        (
            "role.revoke",
            json!({"role": "auditor", "decision": NOBODY}),
            "unknown-role",
        ),
        (
            "decision.resolve",
            json!({"id": NOBODY, "choice": "yes"}),
            "unknown-reference",
        ),
        ("message.read", json!({"id": NOBODY}), "unknown-reference"),
        (
            "decision.raise",
            raise_args("Merge!", None, json!({})),
            "unknown-action",
        ),
        (
            "decision.raise",
            raise_args("", None, json!({})),
            "unknown-action",
        ),
    ];
    for (verb, args, code) in cases {
        lead.refused(verb, args, code);
    }
    b.close();
}

#[test]
fn references_cannot_cross_businesses() {
    let root = data_root();
    let b = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme(), globex()],
            &[
                launch("acme", "lead", "lead-1"),
                launch("acme", "dev", "dev-1"),
                launch("globex", "lead", "g-lead-1"),
            ],
            &["globex"],
        ),
    );
    let (lead, dev, other) = (b.agent("lead-1"), b.agent("dev-1"), b.agent("g-lead-1"));
    for agent in [&lead, &dev, &other] {
        agent.claim();
    }
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    let m = lead.send("dev", "hello", json!({}));
    dev.ok("message.receive", json!({}));
    let (d, m) = (&d["id"], &m);
    let cases = [
        ("decision.resolve", json!({"id": d, "choice": "yes"})),
        ("decision.seen", json!({"id": d})),
        ("decision.withdraw", json!({"id": d})),
        (
            "decision.raise",
            raise_args("repo.merge", None, json!({"supersedes": d})),
        ),
        ("role.revoke", json!({"role": "dev", "decision": d})),
        (
            "message.send",
            json!({"to": "dev", "body": "x", "decision": d}),
        ),
        (
            "message.send",
            json!({"to": "dev", "body": "x", "in_reply_to": m}),
        ),
        (
            "message.send",
            json!({"to": "dev", "body": "x", "corrects": m}),
        ),
        ("message.read", json!({"id": m})),
        (
            "event.emit",
            json!({"kind": "action.allowed", "body": {"action": "routine"}, "subject": d}),
        ),
        ("trail", json!({"subject": d})),
        ("trail", json!({"subject": m})),
    ];
    for (verb, args) in cases {
        other.refused(verb, args, "cross-business");
    }
    let reader = b.reader(0);
    reader.refused("trail", json!({"subject": d}), "cross-business");
    reader.refused("trail", json!({"subject": m}), "cross-business");
    assert_eq!(reader.ok("inbox", json!({})), json!([]));
    // acme's decision is untouched.
    assert_eq!(lead.resolve(d, "yes")["status"], "resolved");
    b.close();
}

#[test]
fn a_reader_reads_but_never_mutates() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let d = dev.raise("repo.delete", Some("main"), json!({}));
    let m = lead.send("human", "fyi", json!({}));
    let reader = b.reader(0);
    assert_eq!(
        reader.ok("inbox", json!({})).as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(reader.ok("tasks", json!({})), json!([]));
    assert_eq!(
        reader.ok("agents", json!({})).as_array().map(Vec::len),
        Some(7)
    );
    assert_eq!(
        reader.trail_kinds(d["id"].as_str().expect("an id")),
        ["decision.raised"]
    );
    assert_eq!(
        reader.trail_kinds(m.as_str().expect("an id")),
        ["message.sent"]
    );
    let mutations = [
        ("role.claim", json!({})),
        ("role.release", json!({})),
        ("role.revoke", json!({"role": "dev", "decision": d["id"]})),
        (
            "decision.raise",
            raise_args("repo.merge", Some("main"), json!({})),
        ),
        ("decision.resolve", json!({"id": d["id"], "choice": "yes"})),
        ("decision.seen", json!({"id": d["id"]})),
        ("decision.withdraw", json!({"id": d["id"]})),
        ("message.send", json!({"to": "lead", "body": "x"})),
        ("message.receive", json!({})),
        ("message.read", json!({"id": m})),
        (
            "event.emit",
            json!({"kind": "action.allowed", "body": {"action": "routine"}}),
        ),
    ];
    for (verb, args) in mutations {
        reader.refused(verb, args, "not-authorized");
    }
    reader.refused("launch.revoke", json!({}), "human-only");
    reader.refused("launch.restore", json!({}), "human-only");
    // Nothing changed.
    assert_eq!(
        reader.trail_kinds(d["id"].as_str().expect("an id")),
        ["decision.raised"]
    );
    assert_eq!(
        reader.trail_kinds(m.as_str().expect("an id")),
        ["message.sent"]
    );
    assert_eq!(
        reader.ok("inbox", json!({})).as_array().map(Vec::len),
        Some(2)
    );
    b.close();
}

/// "Unknown keys, roles, references, actions and verbs refuse": a role
/// subject the business does not define refuses in `trail` as in
/// `event.emit`, for agents and readers alike.
#[test]
fn trail_of_an_unknown_role_refuses_unknown_role() {
    let root = crate::support::data_root();
    let b = crate::support::Broker::boot(
        root.path(),
        &crate::support::config(
            root.path(),
            &[crate::support::acme()],
            &crate::support::acme_launches(),
            &["acme"],
        ),
    );
    let lead = b.agent("lead-1");
    lead.claim();
    lead.refused(
        "event.emit",
        json!({"kind": "action.allowed", "body": {"action": "routine"}, "subject": "ghost"}),
        "unknown-role",
    );
    lead.refused("trail", json!({"subject": "ghost"}), "unknown-role");
    b.reader(0)
        .refused("trail", json!({"subject": "ghost"}), "unknown-role");
    b.close();
}
