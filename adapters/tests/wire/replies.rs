//! Exact JSON for every encoder: replies, records and refusals.

use super::*;

#[test]
fn response_lines_are_exact_and_single_line() {
    assert_eq!(wire::ok(json!({})), r#"{"ok":true,"result":{}}"#);
    assert_eq!(
        wire::ok(json!(["a\nb"])),
        r#"{"ok":true,"result":["a\nb"]}"#
    );
    assert_eq!(
        wire::err(Refusal::BadRequest),
        r#"{"ok":false,"error":"bad-request"}"#
    );
    assert_eq!(wire::response(Ok(json!(1))), r#"{"ok":true,"result":1}"#);
    assert_eq!(
        wire::response(Err(Refusal::DecisionConsumed)),
        r#"{"ok":false,"error":"decision-consumed"}"#
    );
    for &r in Refusal::ALL {
        let line = wire::err(r);
        assert!(!line.contains('\n'));
        assert_eq!(
            serde_json::from_str::<Value>(&line).unwrap(),
            json!({"ok": false, "error": r.code()})
        );
    }
}

fn record() -> DecisionRecord {
    DecisionRecord {
        id: did(D1),
        business: acme(),
        raiser: lead(),
        fields: RaiseFields {
            action: Action::parse("repo.merge").unwrap(),
            target: Some(Target::parse("gitea:acme/bus").unwrap()),
            question: "Merge?".into(),
            options: vec![
                DecisionOption {
                    key: key("yes"),
                    text: "Merge".into(),
                },
                DecisionOption {
                    key: key("no"),
                    text: "Wait".into(),
                },
            ],
            recommendation: "yes".into(),
            blocking: true,
            technical: true,
            project: Some("bus".into()),
            task_ref: Some(TaskRef::parse("vikunja:3/41").unwrap()),
            requirement_ref: None,
            supersedes: Some(did(D2)),
        },
        approval_choice: key("yes"),
        class: ActionClass::CrossRole,
        route: Route::Role(role("arch")),
        holder: None,
    }
}

fn record_fields() -> Value {
    json!({
        "id": D1,
        "action": "repo.merge",
        "target": "gitea:acme/bus",
        "question": "Merge?",
        "options": [{"key": "yes", "text": "Merge"}, {"key": "no", "text": "Wait"}],
        "recommendation": "yes",
        "blocking": true,
        "domain": "technical",
        "project": "bus",
        "task_ref": "vikunja:3/41",
        "requirement_ref": null,
        "supersedes": D2,
        "class": "cross-role",
        "route": "arch",
        "holder": null,
        "raisedBy": {"role": "lead", "run": "run-1"},
        "authorization": {"action": "repo.merge", "target": "gitea:acme/bus", "approvalChoice": "yes"},
    })
}

fn with(mut base: Value, extra: Value) -> Value {
    let (Value::Object(b), Value::Object(e)) = (&mut base, extra) else {
        panic!("objects only");
    };
    b.extend(e);
    base
}

#[test]
fn decisions_encode_with_status_choice_and_authorization_context() {
    let open = Decision {
        record: record(),
        status: Status::Open,
    };
    assert_eq!(
        decision_json(&open),
        with(
            record_fields(),
            json!({"status": "open", "choice": null, "superseded_by": null})
        )
    );
    let resolved = Decision {
        status: Status::Resolved(key("no")),
        ..open.clone()
    };
    assert_eq!(
        decision_json(&resolved),
        with(
            record_fields(),
            json!({"status": "resolved", "choice": "no", "superseded_by": null})
        )
    );
    let superseded = Decision {
        status: Status::Superseded(did(D2)),
        ..open.clone()
    };
    assert_eq!(decision_json(&superseded)["superseded_by"], json!(D2));
    assert_eq!(
        decision_json(&Decision {
            status: Status::Withdrawn,
            ..open
        })["status"],
        json!("withdrawn")
    );
    // A gated revoke routed to the human, in the delivery domain.
    let revoke = Decision {
        record: {
            let mut r = DecisionRecord {
                class: ActionClass::Gated,
                route: Route::Human,
                holder: Some(RunId::parse("run-9").unwrap()),
                approval_choice: key("revoke"),
                ..record()
            };
            r.fields.action = Action::parse("role.revoke").unwrap();
            r.fields.target = Some(Target::parse("dev").unwrap());
            r.fields.technical = false;
            r
        },
        status: Status::Open,
    };
    let v = decision_json(&revoke);
    assert_eq!(
        (&v["route"], &v["class"], &v["domain"], &v["holder"]),
        (
            &json!("human"),
            &json!("gated"),
            &json!("delivery"),
            &json!("run-9")
        )
    );
    assert_eq!(
        v["authorization"],
        json!({"action": "role.revoke", "target": "dev", "approvalChoice": "revoke"})
    );
}

#[test]
fn the_inbox_written_straight_to_text_is_its_value_byte_for_byte() {
    let open = Decision {
        record: record(),
        status: Status::Open,
    };
    let delivered = MessageFacts {
        record: message(),
        delivered_to: Some(RunId::parse("run-2").unwrap()),
        read: false,
    };
    let human = MessageFacts {
        record: MessageRecord {
            id: mid(M2),
            from: Sender::Human,
            to: Recipient::Human,
            class: None,
            body: "quote \" slash \\ tab \t nul \u{0} bell \u{7} é 🦀 \u{2028}".into(),
            in_reply_to: None,
            corrects: Some(mid(M1)),
            decision: None,
            request: Some(EventId::parse(E1).unwrap()),
            ..message()
        },
        delivered_to: None,
        read: false,
    };
    let messages = [delivered, human];
    for (decisions, messages) in [
        (vec![], &messages[..0]),
        (vec![&open], &messages[..0]),
        (vec![], &messages[..]),
        (vec![&open, &open], &messages[..]),
    ] {
        let value = inbox_json(&decisions, messages, 0);
        assert_eq!(inbox_text(&decisions, messages, 0), value.to_string());
        assert_eq!(
            value.as_array().map(Vec::len),
            Some(decisions.len() + messages.len())
        );
    }
    let value = inbox_json(&[&open], &messages, 0);
    assert_eq!(value[0]["type"], "decision");
    assert_eq!(value[0]["id"], record_fields()["id"]);
    assert_eq!(
        value[1],
        with(
            message_fields(),
            json!({"delivered_to": "run-2", "read": false, "type": "message"})
        )
    );
    assert_eq!(value[2]["from"], "human");
    assert_eq!(value[2]["corrects"], M1);
    assert_eq!(
        wire::ok_text(&inbox_text(&[], &messages, 0)),
        wire::ok(inbox_json(&[], &messages, 0))
    );
}

fn message() -> MessageRecord {
    MessageRecord {
        id: mid(M1),
        business: acme(),
        from: Sender::Agent(lead()),
        to: Recipient::Role(role("dev")),
        class: Some(MessageClass::ReviewResult),
        body: "done\n".into(),
        in_reply_to: Some(mid(M2)),
        corrects: None,
        decision: Some(did(D1)),
        request: None,
    }
}

fn message_fields() -> Value {
    json!({
        "id": M1,
        "from": "lead",
        "from_run": "run-1",
        "to": "dev",
        "class": "REVIEW-RESULT",
        "body": "done\n",
        "in_reply_to": M2,
        "corrects": null,
        "decision": D1,
        "request": null,
    })
}

#[test]
fn messages_encode_with_and_without_delivery_facts() {
    assert_eq!(message_json(&message()), message_fields());
    let human = MessageRecord {
        from: Sender::Human,
        to: Recipient::Human,
        class: None,
        request: Some(EventId::parse(E1).unwrap()),
        ..message()
    };
    let v = message_json(&human);
    assert_eq!(
        (
            &v["from"],
            &v["from_run"],
            &v["to"],
            &v["class"],
            &v["request"]
        ),
        (
            &json!("human"),
            &Value::Null,
            &json!("human"),
            &Value::Null,
            &json!(E1)
        )
    );
    let facts = MessageFacts {
        record: message(),
        delivered_to: Some(RunId::parse("run-2").unwrap()),
        read: true,
    };
    assert_eq!(
        message_facts_json(&facts),
        with(
            message_fields(),
            json!({"delivered_to": "run-2", "read": true})
        )
    );
    let undelivered = MessageFacts {
        delivered_to: None,
        read: false,
        ..facts
    };
    assert_eq!(
        message_facts_json(&undelivered),
        with(
            message_fields(),
            json!({"delivered_to": null, "read": false})
        )
    );
}

#[test]
fn every_reply_variant_encodes() {
    let cases = [
        (
            Reply::Claimed(ClaimReply::Claimed),
            json!({"status": "claimed"}),
        ),
        (
            Reply::Claimed(ClaimReply::AlreadyHeld),
            json!({"status": "held"}),
        ),
        (Reply::Done, json!({})),
        (
            Reply::Decision(Box::new(Decision {
                record: record(),
                status: Status::Open,
            })),
            with(
                record_fields(),
                json!({"status": "open", "choice": null, "superseded_by": null}),
            ),
        ),
        (
            Reply::Sent {
                id: mid(M1),
                request: None,
            },
            json!({"id": M1, "request": null}),
        ),
        (
            Reply::Sent {
                id: mid(M1),
                request: Some(EventId::parse(E1).unwrap()),
            },
            json!({"id": M1, "request": E1}),
        ),
        (Reply::Received(vec![]), json!([])),
        (Reply::Received(vec![message()]), json!([message_fields()])),
        (
            Reply::Authorized(Grant::WithinRole),
            json!({"grant": "within-role", "decision": null}),
        ),
        (
            Reply::Authorized(Grant::Approval(did(D1))),
            json!({"grant": "approval", "decision": D1}),
        ),
    ];
    for (reply, expected) in cases {
        assert_eq!(reply_json(&reply), expected, "{reply:?}");
    }
    // `message.send` answers exactly `{id, request}`.
    let sent = reply_json(&Reply::Sent {
        id: mid(M1),
        request: None,
    });
    assert_eq!(sent.as_object().unwrap().len(), 2);
}

#[test]
fn tasks_encode_with_their_body_parsed() {
    let view = TaskView {
        task: TaskRef::parse("vikunja:3/41").unwrap(),
        kind: "task.updated".into(),
        body: r#"{"title":"Ship","done":false}"#.into(),
        tombstone: false,
        at: at("2026-01-02T03:04:05.006Z"),
    };
    assert_eq!(
        task_json(&view),
        json!({
            "task_ref": "vikunja:3/41",
            "kind": "task.updated",
            "body": {"title": "Ship", "done": false},
            "tombstone": false,
            "at": "2026-01-02T03:04:05.006Z",
        })
    );
    let odd = TaskView {
        body: "not json".into(),
        tombstone: true,
        kind: "task.deleted".into(),
        ..view
    };
    let v = task_json(&odd);
    assert_eq!(
        (&v["body"], &v["tombstone"]),
        (&json!("not json"), &json!(true))
    );
}

#[test]
fn every_evidence_kind_encodes_as_a_trail_record() {
    let acme = acme();
    let run = |t: &str| RunId::parse(t).unwrap();
    let cases: Vec<(Evidence, Value)> = vec![
        (
            Evidence::Launch(LaunchEvidence::Launched(LaunchRecord {
                business: acme.clone(),
                role: role("lead"),
                run: run("run-1"),
                harness: Harness::ClaudeCode,
                address: None,
                pid: 4242,
                start_time: 123_456,
            })),
            json!({"role": "lead", "run": "run-1", "harness": "claude-code", "address": null,
                   "pid": 4242, "start_time": 123_456}),
        ),
        (
            Evidence::Launch(LaunchEvidence::Revoked {
                business: acme.clone(),
            }),
            json!({}),
        ),
        (
            Evidence::Launch(LaunchEvidence::Restored {
                business: acme.clone(),
            }),
            json!({}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Claimed {
                business: acme.clone(),
                agent: lead(),
            }),
            json!({"role": "lead", "run": "run-1"}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Released {
                business: acme.clone(),
                agent: lead(),
            }),
            json!({"role": "lead", "run": "run-1"}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Revoked {
                business: acme.clone(),
                agent: lead(),
                decision: did(D1),
            }),
            json!({"role": "lead", "run": "run-1", "decision": D1}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: acme.clone(),
                agent: lead(),
                ending: Ending::of_exit(Some(3), None).unwrap(),
                vacated: true,
            })),
            json!({"role": "lead", "run": "run-1", "cause": "failed", "status": 3,
                   "signal": null, "vacated": true}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Raised(Box::new(record()))),
            record_fields(),
        ),
        (
            Evidence::Decision(DecisionEvidence::Resolved {
                business: acme.clone(),
                id: did(D1),
                choice: key("yes"),
                by: DecisionActor::Human,
                note: Some("ok".into()),
            }),
            json!({"id": D1, "choice": "yes", "by": "human", "by_run": null, "note": "ok"}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Seen {
                business: acme.clone(),
                id: did(D1),
                by: DecisionActor::Agent(lead()),
                note: None,
            }),
            json!({"id": D1, "by": "lead", "by_run": "run-1", "note": null}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Withdrawn {
                business: acme.clone(),
                id: did(D1),
                by: DecisionActor::Agent(lead()),
                note: Some("moot".into()),
            }),
            json!({"id": D1, "by": "lead", "by_run": "run-1", "note": "moot"}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Superseded {
                business: acme.clone(),
                id: did(D2),
                by: did(D1),
            }),
            json!({"id": D2, "superseded_by": D1}),
        ),
        (
            Evidence::Consumed(Consumption {
                business: acme.clone(),
                decision: did(D1),
                agent: lead(),
                action: Action::parse("role.revoke").unwrap(),
                target: Some(Target::parse("dev").unwrap()),
            }),
            json!({"decision": D1, "role": "lead", "run": "run-1", "action": "role.revoke",
                   "target": "dev"}),
        ),
        (
            Evidence::Allowed(ActionAllowed {
                business: acme.clone(),
                agent: lead(),
                action: Action::parse("message.send").unwrap(),
                target: Some(Target::parse("dev").unwrap()),
                decision: None,
                subject: Some(Subject::Role(role("dev"))),
            }),
            json!({"role": "lead", "run": "run-1", "action": "message.send", "target": "dev",
                   "decision": null, "subject": "dev", "subject_kind": "role"}),
        ),
        (
            Evidence::Message(MessageEvidence::Sent(Box::new(message()))),
            message_fields(),
        ),
        (
            Evidence::Message(MessageEvidence::Delivered {
                business: acme.clone(),
                message: mid(M1),
                run: run("run-2"),
            }),
            json!({"message": M1, "run": "run-2"}),
        ),
        (
            Evidence::Message(MessageEvidence::Read {
                business: acme.clone(),
                message: mid(M1),
                run: run("run-2"),
            }),
            json!({"message": M1, "run": "run-2"}),
        ),
        (
            Evidence::Human(HumanInput {
                id: EventId::parse(E1).unwrap(),
                business: acme.clone(),
                verb: "decision.resolve".into(),
                subject: Some(Subject::Decision(did(D1))),
            }),
            json!({"id": E1, "verb": "decision.resolve", "subject": D1,
                   "subject_kind": "decision"}),
        ),
        (
            Evidence::Observed(Observation {
                business: acme.clone(),
                agent: lead(),
                kind: "task.created".into(),
                body: r#"{"request":"x","n":[1,2]}"#.into(),
                subject: Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap())),
                request: Some(EventId::parse(E1).unwrap()),
            }),
            json!({"role": "lead", "run": "run-1", "event": "task.created",
                   "body": {"request": "x", "n": [1, 2]}, "subject": "vikunja:3/41",
                   "subject_kind": "task", "request": E1}),
        ),
        (
            Evidence::Observed(Observation {
                business: acme.clone(),
                agent: lead(),
                kind: "action.allowed".into(),
                body: "{}".into(),
                subject: Some(Subject::Message(mid(M1))),
                request: None,
            }),
            json!({"role": "lead", "run": "run-1", "event": "action.allowed", "body": {},
                   "subject": M1, "subject_kind": "message", "request": null}),
        ),
        (
            Evidence::Refused(RefusalRecord {
                business: Some(acme.clone()),
                agent: Some(lead()),
                verb: Some("role.revoke".into()),
                refusal: Refusal::DecisionConsumed,
            }),
            json!({"role": "lead", "run": "run-1", "verb": "role.revoke",
                   "code": "decision-consumed"}),
        ),
        (
            Evidence::RefusalsCounted(RefusalCount {
                refused: RefusalRecord {
                    business: Some(acme.clone()),
                    agent: Some(lead()),
                    verb: Some("role.revoke".into()),
                    refusal: Refusal::NotAuthorized,
                },
                since: at("2026-01-01T00:00:00.000Z"),
                count: 7,
            }),
            json!({"role": "lead", "run": "run-1", "verb": "role.revoke",
                   "code": "not-authorized", "since": "2026-01-01T00:00:00.000Z", "count": 7}),
        ),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for (i, (evidence, fields)) in cases.into_iter().enumerate() {
        let stamp = Timestamp::from_unix_ms(1_767_225_600_000 + i as i64).unwrap();
        let kind = evidence.kind().as_str();
        kinds.insert(kind);
        let got = record_json(&Stamped {
            at: stamp,
            evidence,
        });
        let expected = with(
            json!({"at": stamp.to_string(), "kind": kind, "business": "acme"}),
            fields,
        );
        assert_eq!(got, expected, "{kind}");
    }
    assert_eq!(
        kinds.len(),
        EvidenceKind::ALL.len(),
        "every kind of Evidence::kind is covered"
    );
    // A refusal of an unknown caller has no business, role, run or verb.
    let anonymous = record_json(&Stamped {
        at: at("2026-01-01T00:00:00.000Z"),
        evidence: Evidence::Refused(RefusalRecord {
            business: None,
            agent: None,
            verb: None,
            refusal: Refusal::BadCapability,
        }),
    });
    assert_eq!(
        anonymous,
        json!({"at": "2026-01-01T00:00:00.000Z", "kind": "request.refused", "business": null,
               "role": null, "run": null, "verb": null, "code": "bad-capability"})
    );
}

#[test]
fn an_agents_row_says_what_the_broker_saw_the_run_ask() {
    use mosaic_adapters::wire::{with_calls, LastCall};
    let record = LaunchRecord {
        business: acme(),
        role: role("dev"),
        run: RunId::parse("dev-1").unwrap(),
        harness: Harness::Pi,
        address: None,
        pid: 4242,
        start_time: 17,
    };
    let mut row = wire::agent_row(
        &record,
        true,
        false,
        true,
        &[],
        None,
        wire::RunLife::default(),
    );
    let seen = |row: &mosaic_client::wire::agent::AgentRow| {
        let row = wire::value_of(row);
        (
            row["lastVerb"].clone(),
            row["lastAt"].clone(),
            row["waiting"].clone(),
        )
    };
    with_calls(&mut row, None, false);
    assert_eq!(seen(&row), (Value::Null, Value::Null, json!(false)));
    with_calls(
        &mut row,
        Some(LastCall {
            verb: "changes",
            at: at("2026-01-01T00:00:00.123Z"),
        }),
        true,
    );
    assert_eq!(
        seen(&row),
        (
            json!("changes"),
            json!("2026-01-01T00:00:00.123Z"),
            json!(true)
        )
    );
}

#[test]
fn an_agents_row_says_how_its_run_ended_and_what_the_host_noted() {
    let record = LaunchRecord {
        business: acme(),
        role: role("lead"),
        run: RunId::parse("run-1").unwrap(),
        harness: Harness::Pi,
        address: None,
        pid: 4242,
        start_time: 17,
    };
    let row = |exited, life| wire::agent_json(&record, false, false, true, &[], exited, life);
    let living = row(None, wire::RunLife::default());
    assert_eq!(
        (&living["ended"], &living["restarts"], &living["usage"]),
        (&Value::Null, &json!(0), &Value::Null)
    );
    let killed = wire::RunLife {
        ended: Some((
            at("2026-01-01T00:00:01.000Z"),
            Ending::of_exit(None, Some(9)).unwrap(),
        )),
        restarts: 2,
        usage: Some(wire::Usage {
            turns: 3,
            input_tokens: 1200,
            output_tokens: 80,
            cost_usd: 0.25,
        }),
    };
    let exited = wire::Exited {
        status: None,
        signal: Some(9),
    };
    let shown = row(Some(exited), killed);
    assert_eq!(
        shown["ended"],
        json!({"at": "2026-01-01T00:00:01.000Z", "cause": "failed", "signal": 9})
    );
    assert_eq!(shown["exited"], json!({"status": null, "signal": 9}));
    assert_eq!(shown["restarts"], 2);
    assert_eq!(
        shown["usage"],
        json!({"turns": 3, "inputTokens": 1200, "outputTokens": 80, "costUsd": 0.25})
    );
    // Without a status or signal, neither key is there.
    let human = wire::RunLife {
        ended: Some((
            at("2026-01-01T00:00:02.000Z"),
            Ending::of_cause(EndCause::Human),
        )),
        ..wire::RunLife::default()
    };
    assert_eq!(
        row(None, human)["ended"],
        json!({"at": "2026-01-01T00:00:02.000Z", "cause": "human"})
    );
    // The existing keys stay as they were.
    let keys: Vec<&String> = shown.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "address",
            "ended",
            "exited",
            "harness",
            "holding",
            "lastAt",
            "lastVerb",
            "launching",
            "pid",
            "restarts",
            "revoked",
            "role",
            "run",
            "start_time",
            "usage",
            "waiting",
            "waitsOn"
        ]
    );
}
