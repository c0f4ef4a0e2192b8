//! `message.send`, `message.receive` and `message.read`.

use super::*;

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
