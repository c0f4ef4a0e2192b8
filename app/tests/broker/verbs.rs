//! Every verb of the spec's table, its rules and its refusals, through the
//! socket of a real broker.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{
    acme, acme_launches, config, data_root, decision, globex, launch, launch_pid, message,
    raise_args, start_time, Agent, Broker,
};

/// A UUID that names nothing.
const NOBODY: &str = "00000000-0000-4000-8000-000000000000";

/// acme with every run of [`acme_launches`] and one reader.
fn acme_broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

fn by(role: &str, run: &str) -> Value {
    json!({"role": role, "run": run})
}

/// Agents of `broker` that claimed their roles, in the order given.
fn claimed<const N: usize>(broker: &Broker, runs: [&str; N]) -> [Agent; N] {
    runs.map(|run| {
        let agent = broker.agent(run);
        agent.claim();
        agent
    })
}

/// The `message.sent` trail record of a message as `message.receive` shows it.
fn sent(message: &Value) -> Value {
    let mut record = json!({"kind": "message.sent", "business": "acme"});
    crate::support::merge(&mut record, message.clone());
    record
}

/// The trail records of `kind`.
#[track_caller]
fn of_kind(agent: &Agent, subject: &str, kind: &str) -> Vec<Value> {
    agent
        .trail(subject)
        .into_iter()
        .filter(|r| r["kind"] == kind)
        .collect()
}

// ---- role.claim, role.release ------------------------------------------------

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

// ---- decision.raise: routing ---------------------------------------------------

#[test]
fn a_within_role_decision_closes_at_raise_with_its_choice() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead] = claimed(&b, ["lead-1"]);
    let d = lead.raise("repo.push", Some("main"), json!({"choice": "yes"}));
    let id = d["id"].clone();
    assert_eq!(
        d,
        decision(
            &id,
            "repo.push",
            Some("main"),
            json!({
            "class": "within-role", "route": "lead", "raisedBy": by("lead", "lead-1"),
            "status": "resolved", "choice": "yes"})
        )
    );
    let trail = lead.trail(id.as_str().expect("an id"));
    assert_eq!(trail.len(), 2);
    assert_eq!(trail[0]["kind"], "decision.raised");
    assert_eq!(
        trail[1],
        json!({"kind": "decision.resolved", "business": "acme", "id": id, "choice": "yes",
               "by": "lead", "by_run": "lead-1", "note": null})
    );
    lead.refused(
        "decision.resolve",
        json!({"id": id, "choice": "no"}),
        "decision-closed",
    );
    lead.refused(
        "decision.raise",
        raise_args("repo.push", Some("main"), json!({})),
        "choice-required",
    );
    lead.refused(
        "decision.raise",
        raise_args("repo.push", Some("main"), json!({"choice": "maybe"})),
        "unknown-option",
    );
    b.close();
}

#[test]
fn a_cross_role_decision_routes_to_the_delivery_or_the_technical_arbiter() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [_lead, dev, arch] = claimed(&b, ["lead-1", "dev-1", "arch-1"]);
    let delivery = dev.raise("repo.merge", Some("main"), json!({}));
    assert_eq!(
        delivery,
        decision(
            &delivery["id"],
            "repo.merge",
            Some("main"),
            json!({
            "class": "cross-role", "route": "lead", "raisedBy": by("dev", "dev-1")})
        )
    );
    let explicit = dev.raise("repo.merge", Some("main"), json!({"domain": "delivery"}));
    assert_eq!(explicit["route"], "lead");
    let technical = dev.raise("repo.merge", Some("main"), json!({"domain": "technical"}));
    assert_eq!(
        technical,
        decision(
            &technical["id"],
            "repo.merge",
            Some("main"),
            json!({
            "class": "cross-role", "route": "arch", "domain": "technical",
            "raisedBy": by("dev", "dev-1")})
        )
    );
    // Routing is fixed at raise: only the routed role resolves.
    b.agent("lead-1").refused(
        "decision.resolve",
        json!({"id": technical["id"], "choice": "yes"}),
        "not-resolver",
    );
    assert_eq!(arch.resolve(&technical["id"], "yes")["status"], "resolved");
    b.close();
}

#[test]
fn a_cross_role_decision_raised_by_its_own_arbiter_routes_to_the_human() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, arch] = claimed(&b, ["lead-1", "arch-1"]);
    let own = lead.raise("repo.merge", Some("main"), json!({}));
    assert_eq!(
        own,
        decision(
            &own["id"],
            "repo.merge",
            Some("main"),
            json!({
            "class": "cross-role", "route": "human", "raisedBy": by("lead", "lead-1")})
        )
    );
    let technical = arch.raise("repo.merge", Some("main"), json!({"domain": "technical"}));
    assert_eq!(
        (&technical["class"], &technical["route"]),
        (&json!("cross-role"), &json!("human"))
    );
    // The technical arbiter raising in the delivery domain goes to the delivery arbiter.
    assert_eq!(
        arch.raise("repo.merge", Some("main"), json!({}))["route"],
        "lead"
    );
    lead.refused(
        "decision.resolve",
        json!({"id": own["id"], "choice": "yes"}),
        "not-resolver",
    );
    b.close();
}

#[test]
fn gated_and_unlisted_actions_route_to_the_human() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [dev, qa, ops] = claimed(&b, ["dev-1", "qa-1", "ops-1"]);
    let cases = [
        (&dev, "repo.delete", "dev"),     // gated-only
        (&dev, "release.publish", "dev"), // gated-only
        (&dev, "deploy.prod", "dev"),     // listed nowhere
        (&qa, "repo.merge", "qa"),        // not in qa's maps
        (&ops, "repo.push", "ops"),       // empty maps grant nothing
    ];
    let mut ids = Vec::new();
    for (agent, action, role) in cases {
        let d = agent.raise(action, Some("main"), json!({}));
        assert_eq!(
            d,
            decision(
                &d["id"],
                action,
                Some("main"),
                json!({
                "class": "gated", "route": "human", "raisedBy": by(role, &format!("{role}-1"))})
            )
        );
        ids.push(d["id"].clone());
    }
    // The human's inbox (a reader's) lists them, with their authorization.
    let mut inbox: Vec<Value> = b
        .reader(0)
        .ok("inbox", json!({}))
        .as_array()
        .expect("items")
        .clone();
    inbox.sort_by_key(|item| item["id"].as_str().unwrap_or("").to_owned());
    ids.sort_by_key(|id| id.as_str().unwrap_or("").to_owned());
    assert_eq!(
        inbox.iter().map(|i| i["id"].clone()).collect::<Vec<_>>(),
        ids
    );
    assert!(inbox
        .iter()
        .all(|i| i["type"] == "decision" && i["route"] == "human"));
    b.close();
}

#[test]
fn role_launch_is_within_role_only_for_the_role_the_launch_block_names() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let own = lead.raise("role.launch", Some("qa"), json!({"choice": "yes"}));
    assert_eq!(
        (&own["class"], &own["route"], &own["status"]),
        (&json!("within-role"), &json!("lead"), &json!("resolved"))
    );
    let other = dev.raise("role.launch", Some("qa"), json!({}));
    assert_eq!(
        (&other["class"], &other["route"]),
        (&json!("gated"), &json!("human"))
    );
    dev.refused(
        "decision.raise",
        raise_args("role.launch", Some("qa"), json!({"choice": "yes"})),
        "bad-request",
    );
    b.close();
}

#[test]
fn a_blocking_decision_needs_a_strict_task_ref() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [dev] = claimed(&b, ["dev-1"]);
    let blocking = |extra: Value| {
        let mut args = json!({"blocking": true});
        crate::support::merge(&mut args, extra);
        raise_args("repo.merge", Some("main"), args)
    };
    dev.refused("decision.raise", blocking(json!({})), "task-ref-required");
    dev.refused(
        "decision.raise",
        blocking(json!({"task_ref": null})),
        "task-ref-required",
    );
    for bad in [
        "vikunja:01/2",
        "vikunja:3/0",
        "vikunja:3",
        "jira:3/41",
        "vikunja:-3/41",
        "vikunja:3/41/5",
    ] {
        dev.refused(
            "decision.raise",
            blocking(json!({"task_ref": bad})),
            "bad-task-ref",
        );
    }
    let d = dev.ok(
        "decision.raise",
        blocking(json!({"task_ref": "vikunja:3/41", "project": "web", "requirement_ref": "REQ-7"})),
    );
    assert_eq!(
        d,
        decision(
            &d["id"],
            "repo.merge",
            Some("main"),
            json!({
            "class": "cross-role", "route": "lead", "raisedBy": by("dev", "dev-1"),
            "blocking": true, "task_ref": "vikunja:3/41", "project": "web",
            "requirement_ref": "REQ-7"})
        )
    );
    let trail = dev.trail("vikunja:3/41");
    assert_eq!(trail.len(), 1);
    assert_eq!(
        (&trail[0]["kind"], &trail[0]["id"]),
        (&json!("decision.raised"), &d["id"])
    );
    // Non-blocking decisions may carry a task ref too, but it must be strict.
    dev.refused(
        "decision.raise",
        raise_args("repo.merge", None, json!({"task_ref": "vikunja:0/1"})),
        "bad-task-ref",
    );
    b.close();
}

#[test]
fn decision_raise_refuses_bad_options_and_choices() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [dev] = claimed(&b, ["dev-1"]);
    let raise = |extra: Value| raise_args("repo.merge", Some("main"), extra);
    let cases = [
        (raise(json!({"options": []})), "bad-request"),
        (
            raise(json!({"options": [{"key": "a", "text": "A"}, {"key": "a", "text": "B"}]})),
            "bad-request",
        ),
        (
            raise(json!({"options": [{"key": "a b", "text": "A"}]})),
            "bad-request",
        ),
        (raise(json!({"options": [{"key": "a"}]})), "bad-request"),
        (
            raise(json!({"options": [{"key": "a", "text": "A", "why": "?"}]})),
            "unknown-key",
        ),
        (raise(json!({"choice": "yes"})), "bad-request"),
        (raise(json!({"approvalChoice": "ship"})), "unknown-option"),
        (raise(json!({"domain": "legal"})), "bad-request"),
        (raise(json!({"target": ""})), "bad-request"),
        (raise(json!({"action": "Repo.Merge"})), "unknown-action"),
        (raise(json!({"action": "repo..merge"})), "unknown-action"),
        (
            raise_args("message.send", Some("ghost"), json!({})),
            "unknown-role",
        ),
        (raise_args("message.send", None, json!({})), "unknown-role"),
    ];
    for (args, code) in cases {
        dev.refused("decision.raise", args, code);
    }
    // approvalChoice names the authorizing option and shows in the context.
    let d = dev.raise(
        "repo.merge",
        Some("main"),
        json!({"options": [{"key": "ship", "text": "Ship it"}, {"key": "hold", "text": "Wait"}],
               "approvalChoice": "ship"}),
    );
    assert_eq!(
        d["authorization"],
        json!({"action": "repo.merge", "target": "main", "approvalChoice": "ship"})
    );
    b.close();
}

#[test]
fn supersedes_replaces_an_open_decision_of_the_same_role() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let old = dev.raise("repo.merge", Some("main"), json!({}));
    let new = dev.raise("repo.merge", Some("main"), json!({"supersedes": old["id"]}));
    assert_eq!(
        new,
        decision(
            &new["id"],
            "repo.merge",
            Some("main"),
            json!({
            "class": "cross-role", "route": "lead", "raisedBy": by("dev", "dev-1"),
            "supersedes": old["id"]})
        )
    );
    let old_id = old["id"].as_str().expect("an id");
    assert_eq!(
        dev.trail_kinds(old_id),
        ["decision.raised", "decision.raised", "decision.superseded"]
    );
    assert_eq!(
        of_kind(&dev, old_id, "decision.superseded"),
        [
            json!({"kind": "decision.superseded", "business": "acme", "id": old["id"],
                "superseded_by": new["id"]})
        ]
    );
    // The replaced decision is closed; the lead's inbox offers only the new one.
    lead.refused(
        "decision.resolve",
        json!({"id": old["id"], "choice": "yes"}),
        "decision-closed",
    );
    let inbox = lead.ok("inbox", json!({}));
    let ids: Vec<&Value> = inbox
        .as_array()
        .expect("items")
        .iter()
        .map(|i| &i["id"])
        .collect();
    assert_eq!(ids, [&new["id"]]);
    dev.refused(
        "decision.raise",
        raise_args("repo.merge", Some("main"), json!({"supersedes": old["id"]})),
        "decision-closed",
    );
    lead.refused(
        "decision.raise",
        raise_args("repo.merge", Some("main"), json!({"supersedes": new["id"]})),
        "not-raiser",
    );
    dev.refused(
        "decision.raise",
        raise_args("repo.merge", Some("main"), json!({"supersedes": NOBODY})),
        "unknown-reference",
    );
    b.close();
}

// ---- decision.resolve, decision.seen, decision.withdraw -------------------------

#[test]
fn decision_resolve_is_for_the_routed_role_with_an_offered_option() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev, arch] = claimed(&b, ["lead-1", "dev-1", "arch-1"]);
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    let id = &d["id"];
    arch.refused(
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
        "not-resolver",
    );
    dev.refused(
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
        "not-resolver",
    );
    lead.refused(
        "decision.resolve",
        json!({"id": id, "choice": "maybe"}),
        "unknown-option",
    );
    lead.refused(
        "decision.resolve",
        json!({"id": NOBODY, "choice": "yes"}),
        "unknown-reference",
    );
    lead.refused(
        "decision.resolve",
        json!({"id": id.as_str().expect("an id").to_uppercase(), "choice": "yes"}),
        "bad-id",
    );
    lead.refused("decision.resolve", json!({"id": id}), "bad-request");
    let resolved = lead.ok(
        "decision.resolve",
        json!({"id": id, "choice": "no", "note": "not yet"}),
    );
    assert_eq!(
        resolved,
        decision(
            id,
            "repo.merge",
            Some("main"),
            json!({
            "class": "cross-role", "route": "lead", "raisedBy": by("dev", "dev-1"),
            "status": "resolved", "choice": "no"})
        )
    );
    assert_eq!(
        of_kind(&lead, id.as_str().expect("an id"), "decision.resolved"),
        [
            json!({"kind": "decision.resolved", "business": "acme", "id": id, "choice": "no",
                "by": "lead", "by_run": "lead-1", "note": "not yet"})
        ]
    );
    lead.refused(
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
        "decision-closed",
    );
    b.close();
}

#[test]
fn decision_seen_is_the_resolvers_acknowledgement_not_a_resolution() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev, arch] = claimed(&b, ["lead-1", "dev-1", "arch-1"]);
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    let id = &d["id"];
    assert_eq!(
        lead.ok("decision.seen", json!({"id": id, "note": "looking"})),
        d
    );
    arch.refused("decision.seen", json!({"id": id}), "not-resolver");
    dev.refused("decision.seen", json!({"id": id}), "not-resolver");
    dev.refused("decision.seen", json!({"id": NOBODY}), "unknown-reference");
    assert_eq!(
        of_kind(&lead, id.as_str().expect("an id"), "decision.seen"),
        [
            json!({"kind": "decision.seen", "business": "acme", "id": id, "by": "lead",
                "by_run": "lead-1", "note": "looking"})
        ]
    );
    // Still open, still in the resolver's inbox.
    assert_eq!(lead.ok("inbox", json!({}))[0]["id"], *id);
    assert_eq!(lead.resolve(id, "yes")["status"], "resolved");
    b.close();
}

#[test]
fn decision_withdraw_is_for_the_raiser_and_never_rewrites_the_decision() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    let (id, text) = (&d["id"], d["id"].as_str().expect("an id"));
    let raised = dev.trail(text);
    lead.refused("decision.withdraw", json!({"id": id}), "not-raiser");
    let withdrawn = dev.ok("decision.withdraw", json!({"id": id, "note": "moot"}));
    let mut expected = d.clone();
    expected["status"] = json!("withdrawn");
    assert_eq!(withdrawn, expected);
    dev.refused("decision.withdraw", json!({"id": id}), "decision-closed");
    lead.refused(
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
        "decision-closed",
    );
    let trail = dev.trail(text);
    assert_eq!(trail[0], raised[0], "the raised record is unchanged");
    assert_eq!(
        trail[1..],
        [
            json!({"kind": "decision.withdrawn", "business": "acme", "id": id, "by": "dev",
                "by_run": "dev-1", "note": "moot"})
        ]
    );
    // A human-routed decision is withdrawn by its raiser too.
    let gated = dev.raise("repo.delete", Some("main"), json!({}));
    assert_eq!(
        dev.ok("decision.withdraw", json!({"id": gated["id"]}))["status"],
        "withdrawn"
    );
    b.close();
}

// ---- message.send --------------------------------------------------------------

#[test]
fn a_within_role_send_writes_action_allowed_and_waits_for_the_holder() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead] = claimed(&b, ["lead-1"]);
    // qa is vacant: the message waits for whoever holds it.
    let id = lead.send("qa", "hello", json!({"class": "INFO"}));
    let qa = b.agent("qa-1");
    qa.claim();
    assert_eq!(
        qa.ok("message.receive", json!({})),
        json!([message(
            &id,
            ("lead", "lead-1"),
            "qa",
            "hello",
            json!({"class": "INFO"})
        )])
    );
    assert_eq!(
        of_kind(&lead, "qa", "action.allowed"),
        [
            json!({"kind": "action.allowed", "business": "acme", "role": "lead", "run": "lead-1",
                "action": "message.send", "target": "qa", "decision": null,
                "subject": "qa", "subject_kind": "role"})
        ]
    );
    assert_eq!(
        lead.trail(id.as_str().expect("an id")),
        [
            sent(&message(
                &id,
                ("lead", "lead-1"),
                "qa",
                "hello",
                json!({"class": "INFO"})
            )),
            json!({"kind": "message.delivered", "business": "acme", "message": id, "run": "qa-1"}),
        ]
    );
    lead.refused(
        "message.send",
        json!({"to": "ghost", "body": "?"}),
        "unknown-role",
    );
    lead.refused("message.send", json!({"to": "qa"}), "bad-request");
    lead.refused("message.send", json!({"body": "?"}), "bad-request");
    b.close();
}

#[test]
fn every_message_class_is_accepted_and_nothing_else() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa] = claimed(&b, ["lead-1", "qa-1"]);
    let classes = [
        "REQUEST",
        "ASSIGNMENT",
        "REVIEW-REQUEST",
        "REVIEW-RESULT",
        "RESULT",
        "INFO",
        "DECISION",
        "REACTION",
    ];
    for class in classes {
        lead.send("qa", class, json!({"class": class}));
    }
    lead.send("qa", "plain", json!({"class": null}));
    let received = qa.ok("message.receive", json!({}));
    let got: Vec<(Value, Value)> = received
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| (m["class"].clone(), m["body"].clone()))
        .collect();
    let mut expected: Vec<(Value, Value)> = classes.iter().map(|c| (json!(c), json!(c))).collect();
    expected.push((Value::Null, json!("plain")));
    assert_eq!(got, expected);
    for bad in ["info", "Request", "", "REVIEW"] {
        lead.refused(
            "message.send",
            json!({"to": "qa", "body": "x", "class": bad}),
            "bad-request",
        );
    }
    b.close();
}

#[test]
fn in_reply_to_and_corrects_must_name_known_messages() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa] = claimed(&b, ["lead-1", "qa-1"]);
    let first = lead.send("qa", "build is red", json!({}));
    let reply = qa.send(
        "lead",
        "looking",
        json!({"in_reply_to": first, "class": "REACTION"}),
    );
    let fix = lead.send("qa", "build is green", json!({"corrects": first}));
    let text = first.as_str().expect("an id");
    let related: Vec<Value> = lead
        .trail(text)
        .into_iter()
        .map(|r| json!([r["kind"], r["id"]]))
        .collect();
    assert_eq!(
        related,
        [
            json!(["message.sent", first]),
            json!(["message.sent", reply]),
            json!(["message.sent", fix])
        ]
    );
    for key in ["in_reply_to", "corrects"] {
        lead.refused(
            "message.send",
            json!({"to": "qa", "body": "x", key: NOBODY}),
            "unknown-reference",
        );
        lead.refused(
            "message.send",
            json!({"to": "qa", "body": "x", key: "m-1"}),
            "bad-id",
        );
        lead.refused(
            "message.send",
            json!({"to": "qa", "body": "x", key: 7}),
            "bad-request",
        );
    }
    b.close();
}

#[test]
fn a_within_role_send_cites_its_decision_without_spending_it() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let open = dev.raise("message.send", Some("qa"), json!({}));
    let (id, text) = (&open["id"], open["id"].as_str().expect("an id"));
    // lead's sending is within-role: the decision (open, dev's, for another
    // target) is a citation, and can be cited again and again.
    let m1 = lead.send("qa", "see the decision", json!({"decision": id}));
    let m2 = lead.send("arch", "see it too", json!({"decision": id}));
    lead.resolve(id, "yes");
    let m3 = lead.send("qa", "and again", json!({"decision": id}));
    assert_eq!(
        lead.trail(text)
            .iter()
            .map(|r| json!([r["kind"], r["id"], r["decision"]]))
            .collect::<Vec<_>>(),
        [
            json!(["decision.raised", id, null]),
            json!(["message.sent", m1, id]),
            json!(["message.sent", m2, id]),
            json!(["decision.resolved", id, null]),
            json!(["message.sent", m3, id]),
        ]
    );
    // Nothing was spent: the citation appears in no action.allowed, and dev
    // can still use its approval.
    let allowed = of_kind(&lead, "qa", "action.allowed");
    assert_eq!(allowed.len(), 2, "one per send to qa");
    assert!(allowed.iter().all(|a| a["decision"].is_null()));
    dev.send("qa", "approved send", json!({"decision": id}));
    lead.refused(
        "message.send",
        json!({"to": "qa", "body": "x", "decision": NOBODY}),
        "unknown-reference",
    );
    b.close();
}

#[test]
fn a_cross_role_send_spends_one_matching_approval() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev, _qa] = claimed(&b, ["lead-1", "dev-1", "qa-1"]);
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "hi"}),
        "not-authorized",
    );
    let d = dev.raise("message.send", Some("qa"), json!({}));
    let (id, text) = (&d["id"], d["id"].as_str().expect("an id"));
    assert_eq!(
        (&d["class"], &d["route"]),
        (&json!("cross-role"), &json!("lead"))
    );
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "hi", "decision": id}),
        "decision-open",
    );
    lead.resolve(id, "yes");
    dev.refused(
        "message.send",
        json!({"to": "arch", "body": "hi", "decision": id}),
        "not-authorized",
    );
    let m = dev.send("qa", "hi", json!({"decision": id}));
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "again", "decision": id}),
        "decision-consumed",
    );
    let trail = dev.trail(text);
    assert_eq!(
        trail.iter().map(|r| r["kind"].clone()).collect::<Vec<_>>(),
        [
            "decision.raised",
            "decision.resolved",
            "approval.consumed",
            "action.allowed",
            "message.sent"
        ]
    );
    assert_eq!(
        trail[2..4],
        [
            json!({"kind": "approval.consumed", "business": "acme", "decision": id, "role": "dev",
                   "run": "dev-1", "action": "message.send", "target": "qa"}),
            json!({"kind": "action.allowed", "business": "acme", "role": "dev", "run": "dev-1",
                   "action": "message.send", "target": "qa", "decision": id,
                   "subject": "qa", "subject_kind": "role"}),
        ]
    );
    assert_eq!((&trail[4]["id"], &trail[4]["decision"]), (&m, id));

    // Resolved with another option than the approving one.
    let no = dev.raise("message.send", Some("qa"), json!({}));
    lead.resolve(&no["id"], "no");
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "x", "decision": no["id"]}),
        "not-authorized",
    );
    // A named approval option.
    let named = dev.raise(
        "message.send",
        Some("qa"),
        json!({"options": [{"key": "ship", "text": "Send"}, {"key": "hold", "text": "Wait"}],
               "approvalChoice": "ship"}),
    );
    lead.resolve(&named["id"], "ship");
    dev.send("qa", "shipped", json!({"decision": named["id"]}));
    // A decision about another action authorizes nothing here.
    let merge = dev.raise("repo.merge", Some("qa"), json!({}));
    lead.resolve(&merge["id"], "yes");
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "x", "decision": merge["id"]}),
        "not-authorized",
    );
    // A withdrawn or superseded decision authorizes nothing.
    let withdrawn = dev.raise("message.send", Some("qa"), json!({}));
    dev.ok("decision.withdraw", json!({"id": withdrawn["id"]}));
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "x", "decision": withdrawn["id"]}),
        "not-authorized",
    );
    let replaced = dev.raise("message.send", Some("qa"), json!({}));
    dev.raise(
        "message.send",
        Some("qa"),
        json!({"supersedes": replaced["id"]}),
    );
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "x", "decision": replaced["id"]}),
        "not-authorized",
    );
    // Another run of the same role may not spend dev-1's approval.
    let mine = dev.raise("message.send", Some("qa"), json!({}));
    lead.resolve(&mine["id"], "yes");
    dev.ok("role.release", json!({}));
    let dev2 = b.agent("dev-2");
    dev2.claim();
    dev2.refused(
        "message.send",
        json!({"to": "qa", "body": "x", "decision": mine["id"]}),
        "not-authorized",
    );
    b.close();
}

#[test]
fn a_gated_send_needs_the_humans_approval() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops] = claimed(&b, ["ops-1"]);
    ops.refused(
        "message.send",
        json!({"to": "qa", "body": "hi"}),
        "not-authorized",
    );
    let d = ops.raise("message.send", Some("qa"), json!({}));
    assert_eq!(
        d,
        decision(
            &d["id"],
            "message.send",
            Some("qa"),
            json!({
            "class": "gated", "route": "human", "raisedBy": by("ops", "ops-1")})
        )
    );
    ops.refused(
        "message.send",
        json!({"to": "qa", "body": "hi", "decision": d["id"]}),
        "decision-open",
    );
    let mut item = d.clone();
    item["type"] = json!("decision");
    assert_eq!(b.reader(0).ok("inbox", json!({})), json!([item]));
    b.close();
}

#[test]
fn human_is_the_reserved_recipient() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let note = lead.send("human", "status: green", json!({"class": "RESULT"}));
    dev.refused(
        "message.send",
        json!({"to": "human", "body": "hi"}),
        "not-authorized",
    );
    let d = dev.raise("message.send", Some("human"), json!({}));
    assert_eq!(d["route"], "lead");
    lead.resolve(&d["id"], "yes");
    let ask = dev.send("human", "may I?", json!({"decision": d["id"]}));
    let inbox = b.reader(0).ok("inbox", json!({}));
    let fields = |id: &Value, from: (&str, &str), body: &str, class: Value| {
        let mut m = message(id, from, "human", body, json!({"class": class}));
        if from.0 == "dev" {
            m["decision"] = d["id"].clone();
        }
        crate::support::merge(
            &mut m,
            json!({"type": "message", "delivered_to": null, "read": false}),
        );
        m
    };
    assert_eq!(
        inbox,
        json!([
            fields(&note, ("lead", "lead-1"), "status: green", json!("RESULT")),
            fields(&ask, ("dev", "dev-1"), "may I?", Value::Null),
        ])
    );
    // A send to the human names no role, so its action.allowed has no
    // subject; the spent approval's trail shows it.
    let allowed = of_kind(&dev, d["id"].as_str().expect("an id"), "action.allowed");
    assert_eq!(
        allowed,
        [
            json!({"kind": "action.allowed", "business": "acme", "role": "dev", "run": "dev-1",
                "action": "message.send", "target": "human", "decision": d["id"],
                "subject": null, "subject_kind": null})
        ]
    );
    lead.refused(
        "message.send",
        json!({"to": "Human", "body": "x"}),
        "unknown-role",
    );
    b.close();
}

// ---- message.receive, message.read -----------------------------------------------

#[test]
fn message_receive_hands_out_at_most_100_in_order() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa] = claimed(&b, ["lead-1", "qa-1"]);
    let ids: Vec<Value> = (0..101)
        .map(|i| lead.send("qa", &format!("m{i}"), json!({})))
        .collect();
    let first = qa.ok("message.receive", json!({}));
    let first = first.as_array().expect("messages");
    assert_eq!(first.len(), 100);
    for (i, m) in first.iter().enumerate() {
        assert_eq!(
            *m,
            message(
                &ids[i],
                ("lead", "lead-1"),
                "qa",
                &format!("m{i}"),
                json!({})
            )
        );
    }
    assert_eq!(
        qa.ok("message.receive", json!({})),
        json!([message(
            &ids[100],
            ("lead", "lead-1"),
            "qa",
            "m100",
            json!({})
        )])
    );
    assert_eq!(qa.ok("message.receive", json!({})), json!([]));
    qa.refused("message.receive", json!({"limit": 5}), "unknown-key");
    b.close();
}

#[test]
fn message_receive_hands_out_a_bounded_reply_so_no_delivery_is_lost() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa] = claimed(&b, ["lead-1", "qa-1"]);
    // 70 bodies of 60 KB: 4.2 MB, over the client's 4 MiB reply limit in
    // one batch.
    let body = |i: usize| format!("{i:03}{}", "x".repeat(60_000 - 3));
    let ids: Vec<Value> = (0..70)
        .map(|i| lead.send("qa", &body(i), json!({})))
        .collect();
    let mut received = Vec::new();
    loop {
        let batch = qa.ok("message.receive", json!({}));
        let batch = batch.as_array().expect("messages").clone();
        if batch.is_empty() {
            break;
        }
        assert!(batch.len() < 70, "the reply is bounded, not all at once");
        received.extend(batch.into_iter().map(|m| m["id"].clone()));
    }
    assert_eq!(received, ids, "every message handed over once, in order");
    b.close();
}

#[test]
fn a_delivery_is_never_replayed_to_a_new_holder() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa1] = claimed(&b, ["lead-1", "qa-1"]);
    let old = lead.send("qa", "for qa-1", json!({}));
    assert_eq!(
        qa1.ok("message.receive", json!({}))
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    qa1.ok("role.release", json!({}));
    let qa2 = b.agent("qa-2");
    qa2.claim();
    let new = lead.send("qa", "for qa-2", json!({}));
    assert_eq!(
        qa2.ok("message.receive", json!({})),
        json!([message(
            &new,
            ("lead", "lead-1"),
            "qa",
            "for qa-2",
            json!({})
        )])
    );
    qa2.refused("message.read", json!({"id": old}), "not-delivered");
    assert_eq!(qa2.ok("message.read", json!({"id": new})), json!({}));
    assert_eq!(qa2.ok("message.receive", json!({})), json!([]));
    assert_eq!(
        lead.trail(old.as_str().expect("an id"))[1..],
        [json!({"kind": "message.delivered", "business": "acme", "message": old, "run": "qa-1"})]
    );
    // The old holder no longer holds the role and cannot acknowledge either.
    qa1.refused("message.read", json!({"id": old}), "not-holder");
    b.close();
}

#[test]
fn message_read_is_the_delivered_runs_acknowledgement() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa, dev] = claimed(&b, ["lead-1", "qa-1", "dev-1"]);
    let m = lead.send("qa", "please review", json!({"class": "REVIEW-REQUEST"}));
    qa.refused("message.read", json!({"id": m}), "not-delivered");
    qa.ok("message.receive", json!({}));
    dev.refused("message.read", json!({"id": m}), "not-holder");
    assert_eq!(qa.ok("message.read", json!({"id": m})), json!({}));
    assert_eq!(
        qa.ok("message.read", json!({"id": m})),
        json!({}),
        "idempotent"
    );
    assert_eq!(
        lead.trail(m.as_str().expect("an id"))[1..],
        [
            json!({"kind": "message.delivered", "business": "acme", "message": m, "run": "qa-1"}),
            json!({"kind": "message.read", "business": "acme", "message": m, "run": "qa-1"}),
        ]
    );
    qa.refused("message.read", json!({"id": NOBODY}), "unknown-reference");
    qa.refused("message.read", json!({}), "bad-request");
    b.close();
}

// ---- event.emit, launch switch ---------------------------------------------------

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
    let agent = |role: &str, run: &str, holding: bool| {
        json!({"role": role, "run": run, "harness": "pi", "address": null,
               "pid": launch_pid(), "start_time": start_time(),
               "holding": holding, "revoked": false,
               "launching": true, "waitsOn": [], "exited": null})
    };
    let expected = json!([agent("dev", "dev-1", false), agent("lead", "lead-1", true)]);
    assert_eq!(lead.ok("agents", json!({})), expected);
    assert_eq!(b.reader(0).ok("agents", json!({})), expected);
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

// ---- unknown things, businesses, readers ---------------------------------------

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
