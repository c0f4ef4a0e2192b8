//! `role.claim`, `role.release` and `role.revoke`.

use super::*;

#[test]
fn role_claim_takes_a_vacant_role_and_refuses_role_held() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (dev1, dev2) = (b.agent("dev-1"), b.agent("dev-2"));
    assert_eq!(
        dev1.ok("role.claim", json!({})),
        json!({"status": "claimed"})
    );
    assert_eq!(dev1.ok("role.claim", json!({})), json!({"status": "held"}));
    dev2.refused("role.claim", json!({}), "role-held");
    // Seats are per role instance: another role is unaffected.
    b.agent("qa-1").claim();
    assert_eq!(
        dev1.trail("dev"),
        [
            json!({"kind": "session.launched", "business": "acme", "role": "dev", "run": "dev-1",
                   "harness": "pi", "address": null, "pid": launch_pid(), "start_time": start_time()}),
            json!({"kind": "session.launched", "business": "acme", "role": "dev", "run": "dev-2",
                   "harness": "pi", "address": null, "pid": launch_pid(), "start_time": start_time()}),
            json!({"kind": "role.claimed", "business": "acme", "role": "dev", "run": "dev-1"}),
        ]
    );
    b.close();
}

#[test]
fn role_release_is_for_the_current_holder_only() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (dev1, dev2) = (b.agent("dev-1"), b.agent("dev-2"));
    dev1.claim();
    dev2.refused("role.release", json!({}), "not-holder");
    assert_eq!(dev1.ok("role.release", json!({})), json!({}));
    dev1.refused("role.release", json!({}), "not-holder");
    dev2.claim();
    dev1.refused("role.claim", json!({}), "role-held");
    let kinds: Vec<Value> = dev1.trail("dev")[2..]
        .iter()
        .map(|r| json!([r["kind"], r["run"]]))
        .collect();
    assert_eq!(
        kinds,
        [
            json!(["role.claimed", "dev-1"]),
            json!(["role.released", "dev-1"]),
            json!(["role.claimed", "dev-2"]),
        ]
    );
    b.close();
}

#[test]
fn every_verb_but_claim_and_the_reads_needs_the_role_held() {
    let root = data_root();
    let b = acme_broker(root.path());
    let dev = b.agent("dev-1");
    let calls = [
        ("role.release", json!({})),
        ("role.revoke", json!({"role": "qa", "decision": NOBODY})),
        (
            "decision.raise",
            raise_args("repo.merge", Some("main"), json!({})),
        ),
        ("decision.resolve", json!({"id": NOBODY, "choice": "yes"})),
        ("decision.seen", json!({"id": NOBODY})),
        ("decision.withdraw", json!({"id": NOBODY})),
        ("message.send", json!({"to": "qa", "body": "hi"})),
        ("message.receive", json!({})),
        ("message.read", json!({"id": NOBODY})),
        (
            "event.emit",
            json!({"kind": "action.allowed", "body": {"action": "routine"}}),
        ),
    ];
    for (verb, args) in calls {
        dev.refused(verb, args, "not-holder");
    }
    assert_eq!(dev.ok("inbox", json!({})), json!([]));
    assert_eq!(dev.ok("tasks", json!({})), json!([]));
    b.close();
}

// ---- role.revoke ---------------------------------------------------------------

#[test]
fn role_revoke_needs_a_resolved_human_decision_for_exactly_this_target() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let d = lead.raise("role.revoke", Some("dev"), json!({}));
    let id = d["id"].clone();
    assert_eq!(
        d,
        decision(
            &id,
            "role.revoke",
            Some("dev"),
            json!({
            "class": "gated", "route": "human", "holder": "dev-1",
            "raisedBy": by("lead", "lead-1")})
        )
    );
    // Only the human resolves it.
    lead.refused(
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
        "not-resolver",
    );
    lead.refused(
        "role.revoke",
        json!({"role": "dev", "decision": id}),
        "decision-open",
    );
    dev.refused(
        "role.revoke",
        json!({"role": "dev", "decision": id}),
        "not-authorized",
    );
    lead.refused(
        "role.revoke",
        json!({"role": "qa", "decision": id}),
        "not-authorized",
    );
    lead.refused(
        "role.revoke",
        json!({"role": "ghost", "decision": id}),
        "unknown-role",
    );
    lead.refused(
        "role.revoke",
        json!({"role": "dev", "decision": NOBODY}),
        "unknown-reference",
    );
    lead.refused("role.revoke", json!({"role": "dev"}), "bad-request");
    // Without any decision nothing is revoked.
    let merge = lead.raise("repo.merge", Some("dev"), json!({}));
    lead.refused(
        "role.revoke",
        json!({"role": "dev", "decision": merge["id"]}),
        "not-authorized",
    );
    // The raise itself checks its target and takes no choice.
    lead.refused(
        "decision.raise",
        raise_args("role.revoke", Some("ghost"), json!({})),
        "unknown-role",
    );
    lead.refused(
        "decision.raise",
        raise_args("role.revoke", None, json!({})),
        "unknown-role",
    );
    lead.refused(
        "decision.raise",
        raise_args("role.revoke", Some("dev"), json!({"choice": "yes"})),
        "bad-request",
    );
    // A vacant role has no holder incarnation to record.
    let vacant = lead.raise("role.revoke", Some("qa"), json!({}));
    assert_eq!(vacant["holder"], Value::Null);
    // dev still holds its role.
    assert_eq!(dev.ok("role.claim", json!({})), json!({"status": "held"}));
    b.close();
}
