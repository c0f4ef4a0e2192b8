//! The dispatch contract: a `Call` to the domain `Command` or the read
//! `Query`, with its fresh ids and resolved subjects.

use super::*;

/// Dispatches `call` with counting closures: `(dispatch, ids drawn, kinds asked)`.
fn dispatch(call: Call, kind: Result<UuidKind, Refusal>) -> (Result<Dispatch, Refusal>, u32, u32) {
    let (ids, kinds) = (Cell::new(0), Cell::new(0));
    let d = call.into_dispatch(
        || {
            ids.set(ids.get() + 1);
            [0xab; 16]
        },
        |_| {
            kinds.set(kinds.get() + 1);
            kind
        },
    );
    (d, ids.get(), kinds.get())
}

#[test]
fn raise_and_send_draw_exactly_one_fresh_id_and_nothing_else_does() {
    let fresh = "abababab-abab-4bab-abab-abababababab";
    let (d, ids, kinds) = dispatch(
        Call::DecisionRaise(Box::new(expected_raise())),
        Err(Refusal::BadRequest),
    );
    assert_eq!((ids, kinds), (1, 0));
    let input = Box::new(expected_raise());
    let raise = Command::Raise {
        id: did(fresh),
        input,
    };
    assert_eq!(d, Ok(Dispatch::Command(raise)));

    let send = SendInput {
        to: Recipient::Human,
        body: "b".into(),
        class: None,
        in_reply_to: Some(mid(M1)),
        corrects: None,
        decision: None,
    };
    let (d, ids, kinds) = dispatch(
        Call::MessageSend(Box::new(send.clone())),
        Err(Refusal::BadRequest),
    );
    assert_eq!((ids, kinds), (1, 0));
    let input = Box::new(send);
    assert!(matches!(&d, Ok(Dispatch::Command(Command::Send { known, .. })) if known.is_empty()));
    let send = Command::Send {
        id: mid(fresh),
        input,
        known: Vec::new(),
    };
    assert_eq!(d, Ok(Dispatch::Command(send)));

    let plain = [
        (Call::RoleClaim, Command::Claim),
        (Call::RoleRelease, Command::Release),
        (
            Call::RoleRevoke {
                role: role("dev"),
                decision: did(D1),
            },
            Command::Revoke {
                role: role("dev"),
                decision: did(D1),
            },
        ),
        (
            Call::DecisionResolve {
                id: did(D1),
                choice: key("yes"),
                note: None,
            },
            Command::Resolve {
                id: did(D1),
                choice: key("yes"),
                note: None,
            },
        ),
        (
            Call::DecisionSeen {
                id: did(D1),
                note: Some("n".into()),
            },
            Command::Seen {
                id: did(D1),
                note: Some("n".into()),
            },
        ),
        (
            Call::DecisionWithdraw {
                id: did(D1),
                note: None,
            },
            Command::Withdraw {
                id: did(D1),
                note: None,
            },
        ),
        (Call::MessageReceive, Command::Receive { batch: Vec::new() }),
        (
            Call::MessageRead { id: mid(M1) },
            Command::Read {
                id: mid(M1),
                known: None,
            },
        ),
        (
            Call::EventEmit {
                target: None,
                subject: Some(SubjectRef::Role(role("lead"))),
            },
            Command::EmitRoutine {
                target: None,
                subject: Some(Subject::Role(role("lead"))),
            },
        ),
        (Call::LaunchRevoke, Command::LaunchRevoke),
        (Call::LaunchRestore, Command::LaunchRestore),
        (
            Call::RunEnd {
                run: RunId::parse("dev-1").unwrap(),
            },
            Command::EndRun {
                run: RunId::parse("dev-1").unwrap(),
            },
        ),
    ];
    for (c, expected) in plain {
        assert_eq!(c.verb().as_str(), expected.verb());
        assert_eq!(
            dispatch(c, Err(Refusal::BadRequest)),
            (Ok(Dispatch::Command(expected)), 0, 0)
        );
    }
}

#[test]
fn read_verbs_become_queries_and_uuid_subjects_are_resolved_by_the_runtime() {
    for (c, q) in [
        (Call::Inbox { after: None }, Query::Inbox { after: None }),
        (Call::Tasks, Query::Tasks),
        (Call::Agents, Query::Agents),
        (
            Call::Trail {
                subject: SubjectRef::Task(TaskRef::parse("vikunja:3/41").unwrap()),
            },
            Query::Trail(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap())),
        ),
    ] {
        assert_eq!(
            dispatch(c, Err(Refusal::BadRequest)),
            (Ok(Dispatch::Query(q)), 0, 0)
        );
    }
    let trail = || Call::Trail {
        subject: SubjectRef::Uuid(UuidRef::parse(D1).unwrap()),
    };
    assert_eq!(
        dispatch(trail(), Ok(UuidKind::Decision)),
        (
            Ok(Dispatch::Query(Query::Trail(Subject::Decision(did(D1))))),
            0,
            1
        )
    );
    assert_eq!(
        dispatch(trail(), Ok(UuidKind::Message)),
        (
            Ok(Dispatch::Query(Query::Trail(Subject::Message(mid(D1))))),
            0,
            1
        )
    );
    assert_eq!(
        dispatch(trail(), Err(Refusal::UnknownReference)),
        (Err(Refusal::UnknownReference), 0, 1)
    );
    let emit = Call::EventEmit {
        target: Some(Target::parse("x").unwrap()),
        subject: Some(SubjectRef::Uuid(UuidRef::parse(M1).unwrap())),
    };
    assert_eq!(
        dispatch(emit.clone(), Ok(UuidKind::Message)),
        (
            Ok(Dispatch::Command(Command::EmitRoutine {
                target: Some(Target::parse("x").unwrap()),
                subject: Some(Subject::Message(mid(M1))),
            })),
            0,
            1
        )
    );
    assert_eq!(
        dispatch(emit, Err(Refusal::CrossBusiness)),
        (Err(Refusal::CrossBusiness), 0, 1)
    );
}
