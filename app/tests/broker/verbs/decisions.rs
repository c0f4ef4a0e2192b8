//! `decision.raise` and its routing; `decision.resolve`, `decision.seen` and
//! `decision.withdraw`.

use super::*;

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
