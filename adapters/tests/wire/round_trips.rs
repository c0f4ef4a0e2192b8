//! Round trips: a request line into its typed `Call`.

use super::*;

#[test]
fn representative_requests_parse_into_their_calls() {
    let cases = [
        (
            req(
                "role.revoke",
                &format!(r#"{{"role":"dev-1","decision":"{D1}"}}"#),
            ),
            Call::RoleRevoke {
                role: role("dev-1"),
                decision: did(D1),
            },
        ),
        (
            req("decision.raise", &raise_args().to_string()),
            Call::DecisionRaise(Box::new(expected_raise())),
        ),
        (
            req(
                "decision.raise",
                r#"{"action":"role.revoke","question":"q","options":[{"key":"yes","text":""}],"recommendation":"","blocking":false}"#,
            ),
            Call::DecisionRaise(Box::new(RaiseInput {
                fields: RaiseFields {
                    action: Action::parse("role.revoke").unwrap(),
                    target: None,
                    question: "q".into(),
                    options: vec![DecisionOption {
                        key: key("yes"),
                        text: String::new(),
                    }],
                    recommendation: String::new(),
                    blocking: false,
                    technical: false,
                    project: None,
                    task_ref: None,
                    requirement_ref: None,
                    supersedes: None,
                },
                choice: None,
                approval_choice: None,
            })),
        ),
        (
            req(
                "decision.resolve",
                &format!(r#"{{"id":"{D1}","choice":"no","note":"later"}}"#),
            ),
            Call::DecisionResolve {
                id: did(D1),
                choice: key("no"),
                note: Some("later".into()),
            },
        ),
        (
            req("decision.seen", &format!(r#"{{"id":"{D1}"}}"#)),
            Call::DecisionSeen {
                id: did(D1),
                note: None,
            },
        ),
        (
            req(
                "decision.withdraw",
                &format!(r#"{{"id":"{D1}","note":""}}"#),
            ),
            Call::DecisionWithdraw {
                id: did(D1),
                note: Some(String::new()),
            },
        ),
        (
            req(
                "message.send",
                &format!(
                    r#"{{"to":"dev-1","body":"line 1\nline 2 ü","class":"REVIEW-REQUEST","in_reply_to":"{M1}","corrects":"{M2}","decision":"{D1}"}}"#
                ),
            ),
            Call::MessageSend(Box::new(SendInput {
                to: Recipient::Role(role("dev-1")),
                body: "line 1\nline 2 ü".into(),
                class: Some(MessageClass::ReviewRequest),
                in_reply_to: Some(mid(M1)),
                corrects: Some(mid(M2)),
                decision: Some(did(D1)),
            })),
        ),
        (
            req("message.send", r#"{"to":"human","body":""}"#),
            Call::MessageSend(Box::new(SendInput {
                to: Recipient::Human,
                body: String::new(),
                class: None,
                in_reply_to: None,
                corrects: None,
                decision: None,
            })),
        ),
        (
            req("message.read", &format!(r#"{{"id":"{M1}"}}"#)),
            Call::MessageRead { id: mid(M1) },
        ),
        (
            req(
                "event.emit",
                r#"{"kind":"action.allowed","body":{"action":"routine"},"subject":"lead"}"#,
            ),
            Call::EventEmit {
                target: None,
                subject: Some(SubjectRef::Role(role("lead"))),
            },
        ),
        (
            req("trail", &format!(r#"{{"subject":"{M1}"}}"#)),
            Call::Trail {
                subject: SubjectRef::Uuid(UuidRef::parse(M1).unwrap()),
            },
        ),
    ];
    for (line, expected) in cases {
        let got = call(&line);
        assert_eq!(got.verb(), expected.verb());
        assert_eq!(got, expected, "{line}");
    }
}

#[test]
fn the_envelope_gives_cap_and_verb_before_the_arguments_are_parsed() {
    let line = req("message.read", r#"{"id":"nope"}"#);
    let envelope = Envelope::parse(line.as_bytes()).unwrap();
    assert_eq!(envelope.cap(), Some(&Capability::parse(CAP).unwrap()));
    assert_eq!(envelope.verb(), Verb::MessageRead);
    assert_eq!(envelope.into_call(), Err(Refusal::BadId));
    // The human CLI's `{business, verb, args}` reuses the argument parser.
    assert_eq!(
        Call::parse(Verb::DecisionSeen, Some(json!({"id": D1}))),
        Ok(Call::DecisionSeen {
            id: did(D1),
            note: None
        })
    );
    assert_eq!(
        Call::parse(Verb::LaunchRevoke, None),
        Ok(Call::LaunchRevoke)
    );
    assert_eq!(
        Call::parse(Verb::LaunchRevoke, Some(Value::Null)),
        Err(Refusal::BadRequest)
    );
    // The capability never shows in debug output.
    assert!(!format!("{:?}", parse_request(line.as_bytes())).contains("0123456789abcdef"));
}
