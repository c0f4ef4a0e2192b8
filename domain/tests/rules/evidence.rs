//! Which records belong on a subject's trail, and which ones a restart
//! replays: one record of every kind, each with the exact set of subjects it
//! concerns.

use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, DecisionRecord, EndCause, Ending, Evidence, EvidenceKind, Harness, HumanInput,
    LaunchEvidence, LaunchRecord, MessageEvidence, MessageRecord, Observation, OptionKey,
    RaiseFields, Recipient, RefusalCount, RefusalRecord, Route, RunEnd, Sender, Subject,
};
use mosaic_domain::*;
use std::collections::HashSet;

fn acme() -> BusinessId {
    BusinessId::parse("acme").unwrap()
}
fn role(s: &str) -> RoleInstance {
    RoleInstance::parse(s).unwrap()
}
fn run(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}
fn dev() -> AgentRef {
    AgentRef {
        role: role("dev"),
        run: run("r1"),
    }
}
fn did(n: u8) -> DecisionId {
    DecisionId::from_random([n; 16])
}
fn mid(n: u8) -> MessageId {
    MessageId::from_random([n; 16])
}
fn task(n: u64) -> TaskRef {
    TaskRef::parse(&format!("vikunja:3/{n}")).unwrap()
}
fn act(s: &str) -> Action {
    Action::parse(s).unwrap()
}

/// Every subject the records below could name, and some they do not.
fn subjects() -> Vec<Subject> {
    vec![
        Subject::Decision(did(1)),
        Subject::Decision(did(2)),
        Subject::Decision(did(3)),
        Subject::Decision(did(9)),
        Subject::Message(mid(1)),
        Subject::Message(mid(2)),
        Subject::Message(mid(3)),
        Subject::Message(mid(9)),
        Subject::Role(role("dev")),
        Subject::Role(role("lead")),
        Subject::Task(task(1)),
        Subject::Task(task(2)),
        Subject::Task(task(9)),
    ]
}

fn raised(id: u8, supersedes: Option<u8>, task_ref: Option<TaskRef>) -> Evidence {
    Evidence::Decision(DecisionEvidence::Raised(Box::new(DecisionRecord {
        id: did(id),
        business: acme(),
        raiser: dev(),
        fields: RaiseFields {
            action: act("repo.merge"),
            target: Some(Target::parse("lead").unwrap()),
            question: "May I?".into(),
            options: vec![DecisionOption {
                key: OptionKey::yes(),
                text: "Yes".into(),
            }],
            recommendation: "yes".into(),
            blocking: false,
            technical: false,
            project: None,
            task_ref,
            requirement_ref: None,
            supersedes: supersedes.map(did),
        },
        approval_choice: OptionKey::yes(),
        class: ActionClass::CrossRole,
        route: Route::Role(role("lead")),
        holder: None,
    })))
}

fn sent(id: u8, in_reply_to: Option<u8>, corrects: Option<u8>, decision: Option<u8>) -> Evidence {
    Evidence::Message(MessageEvidence::Sent(Box::new(MessageRecord {
        id: mid(id),
        business: acme(),
        from: Sender::Agent(dev()),
        to: Recipient::Role(role("lead")),
        class: None,
        body: "hello".into(),
        in_reply_to: in_reply_to.map(mid),
        corrects: corrects.map(mid),
        decision: decision.map(did),
        request: None,
    })))
}

fn allowed(decision: Option<u8>, subject: Option<Subject>) -> Evidence {
    Evidence::Allowed(ActionAllowed {
        business: acme(),
        agent: dev(),
        action: act("repo.merge"),
        target: None,
        decision: decision.map(did),
        subject,
    })
}

/// One record of every kind (some kinds twice, with and without their
/// optional references), each with the subjects whose trail it is on.
fn records() -> Vec<(&'static str, Evidence, Vec<Subject>)> {
    let d = |n| Subject::Decision(did(n));
    let m = |n| Subject::Message(mid(n));
    let r = |s| Subject::Role(role(s));
    let t = |n| Subject::Task(task(n));
    vec![
        (
            "launched",
            Evidence::Launch(LaunchEvidence::Launched(LaunchRecord {
                business: acme(),
                role: role("dev"),
                run: run("r1"),
                harness: Harness::Pi,
                address: None,
                pid: 7,
                start_time: 1,
            })),
            vec![r("dev")],
        ),
        (
            "launch revoked",
            Evidence::Launch(LaunchEvidence::Revoked { business: acme() }),
            vec![],
        ),
        (
            "launch restored",
            Evidence::Launch(LaunchEvidence::Restored { business: acme() }),
            vec![],
        ),
        (
            "claimed",
            Evidence::Claim(ClaimEvidence::Claimed {
                business: acme(),
                agent: dev(),
            }),
            vec![r("dev")],
        ),
        (
            "released",
            Evidence::Claim(ClaimEvidence::Released {
                business: acme(),
                agent: dev(),
            }),
            vec![r("dev")],
        ),
        (
            "role revoked",
            Evidence::Claim(ClaimEvidence::Revoked {
                business: acme(),
                agent: dev(),
                decision: did(1),
            }),
            vec![r("dev"), d(1)],
        ),
        (
            "run ended",
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: acme(),
                agent: dev(),
                ending: Ending::new(EndCause::Failed, None, Some(9)).unwrap(),
                vacated: true,
            })),
            vec![r("dev")],
        ),
        (
            "run ended holding nothing",
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: acme(),
                agent: dev(),
                ending: Ending::of_cause(EndCause::ProcessGone),
                vacated: false,
            })),
            vec![r("dev")],
        ),
        (
            "raised with supersedes and task",
            raised(1, Some(2), Some(task(1))),
            vec![d(1), d(2), t(1)],
        ),
        ("raised alone", raised(3, None, None), vec![d(3)]),
        (
            "raised with a task only",
            raised(3, None, Some(task(2))),
            vec![d(3), t(2)],
        ),
        (
            "resolved",
            Evidence::Decision(DecisionEvidence::Resolved {
                business: acme(),
                id: did(1),
                choice: OptionKey::yes(),
                by: DecisionActor::Human,
                note: None,
            }),
            vec![d(1)],
        ),
        (
            "seen",
            Evidence::Decision(DecisionEvidence::Seen {
                business: acme(),
                id: did(2),
                by: DecisionActor::Human,
                note: None,
            }),
            vec![d(2)],
        ),
        (
            "withdrawn",
            Evidence::Decision(DecisionEvidence::Withdrawn {
                business: acme(),
                id: did(3),
                by: DecisionActor::Agent(dev()),
                note: None,
            }),
            vec![d(3)],
        ),
        (
            "superseded",
            Evidence::Decision(DecisionEvidence::Superseded {
                business: acme(),
                id: did(2),
                by: did(1),
            }),
            vec![d(2), d(1)],
        ),
        (
            "consumed",
            Evidence::Consumed(Consumption {
                business: acme(),
                decision: did(1),
                agent: dev(),
                action: act("repo.merge"),
                target: None,
            }),
            vec![d(1)],
        ),
        (
            "allowed with a decision and a subject",
            allowed(Some(1), Some(r("lead"))),
            vec![d(1), r("lead")],
        ),
        (
            "allowed with a subject only",
            allowed(None, Some(t(2))),
            vec![t(2)],
        ),
        ("allowed alone", allowed(None, None), vec![]),
        (
            "sent with every reference",
            sent(1, Some(2), Some(3), Some(1)),
            vec![m(1), m(2), m(3), d(1)],
        ),
        ("sent alone", sent(2, None, None, None), vec![m(2)]),
        (
            "sent correcting only",
            sent(1, None, Some(3), None),
            vec![m(1), m(3)],
        ),
        (
            "delivered",
            Evidence::Message(MessageEvidence::Delivered {
                business: acme(),
                message: mid(1),
                run: run("r1"),
            }),
            vec![m(1)],
        ),
        (
            "read",
            Evidence::Message(MessageEvidence::Read {
                business: acme(),
                message: mid(2),
                run: run("r1"),
            }),
            vec![m(2)],
        ),
        (
            "human input on a decision",
            Evidence::Human(HumanInput {
                id: EventId::from_random([1; 16]),
                business: acme(),
                verb: "decision.resolve".into(),
                subject: Some(d(2)),
            }),
            vec![d(2)],
        ),
        (
            "the human's read of a message to the human",
            Evidence::Human(HumanInput {
                id: EventId::from_random([3; 16]),
                business: acme(),
                verb: "message.read".into(),
                subject: Some(m(3)),
            }),
            vec![m(3)],
        ),
        (
            "human input on nothing",
            Evidence::Human(HumanInput {
                id: EventId::from_random([2; 16]),
                business: acme(),
                verb: "launch.revoke".into(),
                subject: None,
            }),
            vec![],
        ),
        (
            "observed on a task",
            Evidence::Observed(Observation {
                business: acme(),
                agent: dev(),
                kind: "task.updated".into(),
                body: "{}".into(),
                subject: Some(t(1)),
                request: None,
            }),
            vec![t(1)],
        ),
        (
            "observed on nothing",
            Evidence::Observed(Observation {
                business: acme(),
                agent: dev(),
                kind: "ci.passed".into(),
                body: "{}".into(),
                subject: None,
                request: None,
            }),
            vec![],
        ),
        (
            "refused",
            Evidence::Refused(RefusalRecord {
                business: Some(acme()),
                agent: Some(dev()),
                verb: Some("role.claim".into()),
                refusal: Refusal::RoleHeld,
            }),
            vec![],
        ),
        (
            "refusals counted",
            Evidence::RefusalsCounted(RefusalCount {
                refused: RefusalRecord {
                    business: Some(acme()),
                    agent: Some(dev()),
                    verb: Some("role.claim".into()),
                    refusal: Refusal::RoleHeld,
                },
                since: Timestamp::from_unix_ms(1_767_225_600_000).unwrap(),
                count: 12,
            }),
            vec![],
        ),
    ]
}

#[test]
fn a_record_is_on_the_trail_of_exactly_the_subjects_it_names() {
    for (name, record, on) in records() {
        let got: Vec<Subject> = subjects()
            .into_iter()
            .filter(|s| record.concerns(s))
            .collect();
        let want: Vec<Subject> = subjects().into_iter().filter(|s| on.contains(s)).collect();
        assert_eq!(got, want, "{name}");
    }
}

/// The kinds a restart replays: launch bindings and the switch, claims and
/// ends of runs, the decision lifecycle and spent approvals. Everything
/// else is read from the store on demand.
const REPLAYED: [&str; 13] = [
    "session.launched",
    "launch.revoked",
    "launch.restored",
    "role.claimed",
    "role.released",
    "role.revoked",
    "session.ended",
    "decision.raised",
    "decision.resolved",
    "decision.seen",
    "decision.withdrawn",
    "decision.superseded",
    "approval.consumed",
];

#[test]
fn a_restart_replays_launches_claims_ends_decisions_and_spent_approvals_only() {
    for (name, record, _) in records() {
        assert_eq!(
            record.is_machine_state(),
            REPLAYED.contains(&record.kind().as_str()),
            "{name}: {}",
            record.kind()
        );
    }
}

#[test]
fn every_record_names_its_kind_and_its_business() {
    let kinds: Vec<&str> = records()
        .iter()
        .map(|(_, r, _)| r.kind().as_str())
        .collect();
    for kind in REPLAYED.iter().chain(&[
        "action.allowed",
        "message.sent",
        "message.delivered",
        "message.read",
        "human.input",
        "event.observed",
        "request.refused",
        "refusals.counted",
    ]) {
        assert!(kinds.contains(kind), "no record of kind {kind}");
    }
    for (name, record, _) in records() {
        assert_eq!(record.business(), Some(&acme()), "{name}");
    }
    let anonymous = Evidence::Refused(RefusalRecord {
        business: None,
        agent: None,
        verb: None,
        refusal: Refusal::BadCapability,
    });
    assert_eq!(anonymous.business(), None);
}

#[test]
fn option_keys_are_1_to_64_letters_digits_dots_underscores_and_dashes() {
    for good in ["yes", "a", "Option_2.b-c", &"k".repeat(64)] {
        let key = OptionKey::parse(good).unwrap();
        assert_eq!((key.as_str(), key.to_string().as_str()), (good, good));
    }
    for bad in ["", &"k".repeat(65), "a b", "a/b", "ä", "a:b"] {
        assert_eq!(OptionKey::parse(bad), Err(Refusal::BadRequest), "{bad}");
    }
    assert_eq!(OptionKey::yes().as_str(), "yes");
}

#[test]
fn message_classes_and_harnesses_have_one_wire_name_each() {
    use mosaic_domain::evidence::MessageClass;
    let names: Vec<&str> = MessageClass::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        names,
        [
            "REQUEST",
            "ASSIGNMENT",
            "REVIEW-REQUEST",
            "REVIEW-RESULT",
            "RESULT",
            "INFO",
            "DECISION",
            "REACTION"
        ]
    );
    for class in MessageClass::ALL {
        assert_eq!(MessageClass::parse(class.as_str()), Ok(class));
    }
    for bad in ["", "request", "REVIEW", "INFO "] {
        assert_eq!(MessageClass::parse(bad), Err(Refusal::BadRequest), "{bad}");
    }
    for (text, harness) in [("pi", Harness::Pi), ("claude-code", Harness::ClaudeCode)] {
        assert_eq!(Harness::parse(text), Ok(harness));
        assert_eq!(harness.as_str(), text);
    }
    for bad in ["", "Pi", "claude"] {
        assert_eq!(Harness::parse(bad), Err(Refusal::BadConfig), "{bad}");
    }
}

#[test]
fn every_evidence_kind_has_one_name_that_parses_back_and_a_record_here() {
    let sampled: HashSet<EvidenceKind> = records().iter().map(|(_, r, _)| r.kind()).collect();
    let mut names = HashSet::new();
    for &kind in EvidenceKind::ALL {
        assert!(names.insert(kind.as_str()), "{kind} is named once");
        assert_eq!(EvidenceKind::parse(kind.as_str()), Some(kind));
        assert_eq!(
            kind.to_string(),
            kind.as_str(),
            "{kind:?} displays its name"
        );
        assert!(sampled.contains(&kind), "{kind} has a record in `records`");
    }
    assert_eq!(EvidenceKind::parse("Message.sent"), None);
    assert_eq!(
        EvidenceKind::DecisionSeen.as_str(),
        Verb::DecisionSeen.as_str()
    );
    assert_eq!(
        EvidenceKind::MessageRead.as_str(),
        Verb::MessageRead.as_str()
    );
}

#[test]
fn the_kinds_marked_as_changes_are_exactly_those_whose_records_make_one() {
    // Every decision event is given a routing, so each can make a change.
    let routing = || {
        Some(changes::Routing {
            route: Route::Human,
            raiser: dev(),
        })
    };
    let changing: HashSet<EvidenceKind> = records()
        .iter()
        .filter(|(_, r, _)| changes::Change::of(r, routing()).is_some())
        .map(|(_, r, _)| r.kind())
        .collect();
    let marked: HashSet<EvidenceKind> = EvidenceKind::ALL
        .iter()
        .copied()
        .filter(|k| k.can_be_change())
        .collect();
    assert_eq!(changing, marked);
}

/// Records whose every optional text is given, beside [`records`].
fn records_with_every_text() -> Vec<Evidence> {
    let note = Some("a note".to_owned());
    let by = DecisionActor::Agent(dev());
    let target = Some(Target::parse("https://example.com/t").unwrap());
    let Evidence::Decision(DecisionEvidence::Raised(decision)) = raised(1, Some(2), Some(task(1)))
    else {
        panic!("a raise")
    };
    let mut decision = *decision;
    decision.fields.project = Some("the project".into());
    decision.fields.requirement_ref = Some("REQ-1".into());
    decision.holder = Some(run("h1"));
    decision.fields.options.push(DecisionOption {
        key: OptionKey::parse("no").unwrap(),
        text: "No".into(),
    });
    vec![
        Evidence::Launch(LaunchEvidence::Launched(LaunchRecord {
            business: acme(),
            role: role("dev"),
            run: run("r1"),
            harness: Harness::ClaudeCode,
            address: Some("pane-7".into()),
            pid: 7,
            start_time: 1,
        })),
        Evidence::Decision(DecisionEvidence::Raised(Box::new(decision))),
        Evidence::Decision(DecisionEvidence::Resolved {
            business: acme(),
            id: did(1),
            choice: OptionKey::parse("no").unwrap(),
            by: by.clone(),
            note: note.clone(),
        }),
        Evidence::Decision(DecisionEvidence::Seen {
            business: acme(),
            id: did(1),
            by: by.clone(),
            note: note.clone(),
        }),
        Evidence::Decision(DecisionEvidence::Withdrawn {
            business: acme(),
            id: did(1),
            by,
            note,
        }),
        Evidence::Consumed(Consumption {
            business: acme(),
            decision: did(1),
            agent: dev(),
            action: act("repo.merge"),
            target: target.clone(),
        }),
        Evidence::Allowed(ActionAllowed {
            business: acme(),
            agent: dev(),
            action: act("repo.merge"),
            target,
            decision: Some(did(1)),
            subject: Some(Subject::Role(role("lead"))),
        }),
        Evidence::Human(HumanInput {
            id: EventId::from_random([4; 16]),
            business: acme(),
            verb: "message.send".into(),
            subject: Some(Subject::Role(role("ops"))),
        }),
        Evidence::Observed(Observation {
            business: acme(),
            agent: dev(),
            kind: "review.noted".into(),
            body: "{}".into(),
            subject: Some(Subject::Role(role("qa"))),
            request: None,
        }),
        Evidence::Refused(RefusalRecord {
            business: Some(acme()),
            agent: Some(dev()),
            verb: Some("role.claim".into()),
            refusal: Refusal::RunRevoked,
        }),
        Evidence::RefusalsCounted(RefusalCount {
            refused: RefusalRecord {
                business: Some(acme()),
                agent: Some(dev()),
                verb: Some("role.claim".into()),
                refusal: Refusal::RunRevoked,
            },
            since: Timestamp::from_unix_ms(1_767_225_600_000).unwrap(),
            count: 3,
        }),
    ]
}

#[test]
fn the_texts_of_a_record_are_every_text_field_it_shows() {
    // `Debug` quotes every string and name and nothing else, so the quoted
    // parts of a record's `Debug` are the texts the leak guard must see.
    let full = records_with_every_text();
    let every = records().into_iter().map(|(_, r, _)| r).chain(full);
    for record in every {
        let shown = format!("{record:?}");
        let mut quoted: Vec<String> = shown
            .split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        let mut visited = Vec::new();
        record.texts(|text| visited.push(text.to_owned()));
        quoted.sort();
        visited.sort();
        assert_eq!(visited, quoted, "{shown}");
    }
}
