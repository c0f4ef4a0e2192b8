//! The fixed universe of the store checks and builders for its evidence.

use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, DecisionRecord, EndCause, Ending, Evidence, Harness, HumanInput,
    LaunchEvidence, LaunchRecord, MessageClass, MessageEvidence, MessageRecord, Observation,
    OptionKey, RaiseFields, Recipient, RefusalCount, RefusalRecord, Route, RunEnd, Sender, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{
    Action, ActionClass, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId,
    TaskRef, Timestamp,
};

// --- The universe -----------------------------------------------------------

/// 2026-01-01T00:00:00.000Z, where every check's clock starts.
pub(super) const START_MS: i64 = 1_767_225_600_000;
/// Decision numbers the snapshots look at.
pub(super) const DECISIONS: std::ops::RangeInclusive<u8> = 1..=9;
/// Message numbers the snapshots look at.
pub(super) const MESSAGES: std::ops::RangeInclusive<u8> = 1..=12;
/// Tasks the snapshots look at, as (project, task).
pub(super) const TASKS: [(u64, u64); 5] = [(2, 1), (3, 41), (5, 5), (10, 1), (7, 7)];
/// Roles the snapshots look at.
pub(super) const ROLES: [&str; 3] = ["dev", "ops", "lead"];

pub(super) fn acme() -> BusinessId {
    BusinessId::parse("acme").expect("valid business id")
}

pub(super) fn globex() -> BusinessId {
    BusinessId::parse("globex").expect("valid business id")
}

pub(super) fn role(name: &str) -> RoleInstance {
    RoleInstance::parse(name).expect("valid role")
}

pub(super) fn run_id(name: &str) -> RunId {
    RunId::parse(name).expect("valid run id")
}

pub(super) fn agent(role_name: &str, run: &str) -> AgentRef {
    AgentRef {
        role: role(role_name),
        run: run_id(run),
    }
}

pub(super) fn did(n: u8) -> DecisionId {
    DecisionId::from_random([n; 16])
}

pub(super) fn mid(n: u8) -> MessageId {
    MessageId::from_random([n; 16])
}

pub(super) fn eid(n: u8) -> EventId {
    EventId::from_random([n; 16])
}

pub(super) fn task(project: u64, number: u64) -> TaskRef {
    TaskRef::parse(&format!("vikunja:{project}/{number}")).expect("valid task ref")
}

pub(super) fn to(role_name: &str) -> Recipient {
    Recipient::Role(role(role_name))
}

// --- Evidence builders --------------------------------------------------------

pub(super) fn decision(b: &BusinessId, n: u8) -> DecisionRecord {
    DecisionRecord {
        id: did(n),
        business: b.clone(),
        raiser: agent("dev", "run-1"),
        fields: RaiseFields {
            action: Action::parse("repo.merge").expect("valid action"),
            target: None,
            question: format!("Merge change {n}?"),
            options: vec![
                DecisionOption {
                    key: OptionKey::yes(),
                    text: "Merge it".to_owned(),
                },
                DecisionOption {
                    key: OptionKey::parse("no").expect("valid key"),
                    text: "Leave it".to_owned(),
                },
            ],
            recommendation: "yes".to_owned(),
            blocking: false,
            technical: false,
            project: None,
            task_ref: None,
            requirement_ref: None,
            supersedes: None,
        },
        approval_choice: OptionKey::yes(),
        class: ActionClass::CrossRole,
        route: Route::Role(role("lead")),
        holder: None,
    }
}

/// `record` with its raise fields changed by `change`.
fn with_fields(
    mut record: DecisionRecord,
    change: impl FnOnce(&mut RaiseFields),
) -> DecisionRecord {
    change(&mut record.fields);
    record
}

pub(super) fn raise(record: DecisionRecord) -> Evidence {
    Evidence::Decision(DecisionEvidence::Raised(Box::new(record)))
}

pub(super) fn raised(b: &BusinessId, n: u8) -> Evidence {
    raise(decision(b, n))
}

pub(super) fn raised_superseding(b: &BusinessId, n: u8, old: u8) -> Evidence {
    let base = decision(b, n);
    raise(DecisionRecord {
        fields: RaiseFields {
            supersedes: Some(did(old)),
            ..base.fields
        },
        ..base
    })
}

pub(super) fn lead() -> DecisionActor {
    DecisionActor::Agent(agent("lead", "run-2"))
}

pub(super) fn resolved(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Resolved {
        business: b.clone(),
        id: did(n),
        choice: OptionKey::yes(),
        by: lead(),
        note: None,
    })
}

pub(super) fn seen(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Seen {
        business: b.clone(),
        id: did(n),
        by: lead(),
        note: Some("looking".to_owned()),
    })
}

pub(super) fn withdrawn(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Withdrawn {
        business: b.clone(),
        id: did(n),
        by: DecisionActor::Human,
        note: None,
    })
}

pub(super) fn superseded(b: &BusinessId, n: u8, by: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Superseded {
        business: b.clone(),
        id: did(n),
        by: did(by),
    })
}

pub(super) fn consumed(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Consumed(Consumption {
        business: b.clone(),
        decision: did(n),
        agent: agent("dev", "run-1"),
        action: Action::parse("repo.merge").expect("valid action"),
        target: None,
    })
}

pub(super) fn claim_revoked(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Claim(ClaimEvidence::Revoked {
        business: b.clone(),
        agent: agent("ops", "run-3"),
        decision: did(n),
    })
}

pub(super) fn claimed(b: &BusinessId, role_name: &str, run: &str) -> Evidence {
    Evidence::Claim(ClaimEvidence::Claimed {
        business: b.clone(),
        agent: agent(role_name, run),
    })
}

pub(super) fn released(b: &BusinessId, role_name: &str, run: &str) -> Evidence {
    Evidence::Claim(ClaimEvidence::Released {
        business: b.clone(),
        agent: agent(role_name, run),
    })
}

/// `session.ended` of `run` (of `role_name`): killed by a signal when
/// `vacated` (it held its role), else found gone.
pub(super) fn ended(b: &BusinessId, role_name: &str, run: &str, vacated: bool) -> Evidence {
    let ending = if vacated {
        Ending::new(EndCause::Failed, None, Some(9)).expect("a valid ending")
    } else {
        Ending::of_cause(EndCause::ProcessGone)
    };
    Evidence::Claim(ClaimEvidence::Ended(RunEnd {
        business: b.clone(),
        agent: agent(role_name, run),
        ending,
        vacated,
    }))
}

pub(super) fn launch_record(b: &BusinessId, role_name: &str, run: &str, pid: u32) -> LaunchRecord {
    LaunchRecord {
        business: b.clone(),
        role: role(role_name),
        run: run_id(run),
        harness: Harness::Pi,
        address: None,
        pid,
        start_time: u64::from(pid) * 10,
    }
}

pub(super) fn launch(record: LaunchRecord) -> Evidence {
    Evidence::Launch(LaunchEvidence::Launched(record))
}

pub(super) fn launched(b: &BusinessId, role_name: &str, run: &str, pid: u32) -> Evidence {
    launch(launch_record(b, role_name, run, pid))
}

pub(super) fn message(b: &BusinessId, n: u8, recipient: Recipient) -> MessageRecord {
    MessageRecord {
        id: mid(n),
        business: b.clone(),
        from: Sender::Agent(agent("lead", "run-2")),
        to: recipient,
        class: Some(MessageClass::Info),
        body: format!("message {n}"),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    }
}

pub(super) fn send(record: MessageRecord) -> Evidence {
    Evidence::Message(MessageEvidence::Sent(Box::new(record)))
}

pub(super) fn sent(b: &BusinessId, n: u8, recipient: Recipient) -> Evidence {
    send(message(b, n, recipient))
}

pub(super) fn delivered(b: &BusinessId, n: u8, run: &str) -> Evidence {
    Evidence::Message(MessageEvidence::Delivered {
        business: b.clone(),
        message: mid(n),
        run: run_id(run),
    })
}

pub(super) fn read(b: &BusinessId, n: u8, run: &str) -> Evidence {
    Evidence::Message(MessageEvidence::Read {
        business: b.clone(),
        message: mid(n),
        run: run_id(run),
    })
}

/// An observation without a request, with a JSON body (`kind` must need no
/// escaping). Valid unless `kind` is `task.created` or starts with `task.`
/// while `subject` is no task.
pub(super) fn observation(b: &BusinessId, kind: &str, subject: Option<Subject>) -> Observation {
    Observation {
        business: b.clone(),
        agent: agent("dev", "run-1"),
        kind: kind.to_owned(),
        body: format!("{{\"kind\":\"{kind}\"}}"),
        subject,
        request: None,
    }
}

pub(super) fn observe(record: Observation) -> Evidence {
    Evidence::Observed(record)
}

pub(super) fn observed(b: &BusinessId, kind: &str, subject: Option<Subject>) -> Evidence {
    observe(observation(b, kind, subject))
}

/// `task.created` for task `project`/`number`, requested by the human input
/// `input` (see [`human`]).
pub(super) fn task_created(b: &BusinessId, project: u64, number: u64, input: u8) -> Evidence {
    observe(Observation {
        request: Some(eid(input)),
        ..observation(
            b,
            "task.created",
            Some(Subject::Task(task(project, number))),
        )
    })
}

pub(super) fn allowed(
    b: &BusinessId,
    decision_n: Option<u8>,
    subject: Option<Subject>,
) -> Evidence {
    Evidence::Allowed(ActionAllowed {
        business: b.clone(),
        agent: agent("dev", "run-1"),
        action: Action::parse("message.send").expect("valid action"),
        target: None,
        decision: decision_n.map(did),
        subject,
    })
}

pub(super) fn human(b: &BusinessId, n: u8, subject: Option<Subject>) -> Evidence {
    Evidence::Human(HumanInput {
        id: eid(n),
        business: b.clone(),
        verb: "decision.resolve".to_owned(),
        subject,
    })
}

/// The human's `message.read` of message `n`: its `human.input` is the
/// whole record.
pub(super) fn human_read(b: &BusinessId, n: u8, message: u8) -> Evidence {
    Evidence::Human(HumanInput {
        id: eid(n),
        business: b.clone(),
        verb: "message.read".to_owned(),
        subject: Some(Subject::Message(mid(message))),
    })
}

pub(super) fn refused(b: Option<BusinessId>) -> Evidence {
    Evidence::Refused(RefusalRecord {
        business: b,
        agent: None,
        verb: Some("message.send".to_owned()),
        refusal: Refusal::NotAuthorized,
    })
}

pub(super) fn counted(b: Option<BusinessId>) -> Evidence {
    Evidence::RefusalsCounted(RefusalCount {
        refused: RefusalRecord {
            business: b,
            agent: Some(agent("dev", "run-1")),
            verb: Some("message.send".to_owned()),
            refusal: Refusal::NotAuthorized,
        },
        since: Timestamp::from_unix_ms(1_767_225_600_000).expect("a time"),
        count: 41,
    })
}

pub(super) fn facts(record: MessageRecord, delivered_to: Option<&str>, read: bool) -> MessageFacts {
    MessageFacts {
        record,
        delivered_to: delivered_to.map(run_id),
        read,
    }
}

/// Records of every kind over both businesses, in several batches, with
/// subjects shared between businesses, using every optional reference.
pub(super) fn varied_history() -> Vec<Vec<Evidence>> {
    let (a, b) = (acme(), globex());
    let human_message = MessageRecord {
        from: Sender::Human,
        request: Some(eid(40)),
        ..message(&a, 4, to("dev"))
    };
    vec![
        vec![
            launched(&a, "dev", "run-1", 100),
            launched(&a, "lead", "run-2", 200),
            launched(&b, "dev", "run-9", 900),
            // Binding a run again with the same record is no new fact.
            launched(&a, "dev", "run-1", 100),
            claimed(&a, "dev", "run-1"),
            claimed(&a, "lead", "run-2"),
            claimed(&a, "ops", "run-3"),
            claimed(&b, "dev", "run-9"),
            Evidence::Launch(LaunchEvidence::Revoked {
                business: a.clone(),
            }),
            Evidence::Launch(LaunchEvidence::Restored {
                business: a.clone(),
            }),
            refused(None),
            counted(None),
            refused(Some(a.clone())),
        ],
        vec![
            raise(with_fields(decision(&a, 1), |f| {
                f.task_ref = Some(task(3, 41));
                f.blocking = true;
            })),
            seen(&a, 1),
            resolved(&a, 1),
            seen(&a, 1),
            raised(&a, 2),
            raised_superseding(&a, 3, 2),
            superseded(&a, 2, 3),
            withdrawn(&a, 3),
            raise(with_fields(decision(&b, 4), |f| {
                f.task_ref = Some(task(3, 41))
            })),
        ],
        vec![
            consumed(&a, 1),
            allowed(&a, Some(1), Some(Subject::Role(role("ops")))),
            allowed(&a, None, Some(Subject::Task(task(2, 1)))),
            raised(&a, 5),
            resolved(&a, 5),
            consumed(&a, 5),
            claim_revoked(&a, 5),
            ended(&a, "ops", "run-3", false),
            released(&a, "lead", "run-2"),
            ended(&b, "dev", "run-9", true),
            // A run that was never bound ends too (the store keeps it).
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: a.clone(),
                agent: agent("lead", "run-7"),
                ending: Ending::new(EndCause::Exited, Some(0), None).expect("a valid ending"),
                vacated: false,
            })),
        ],
        vec![
            send(MessageRecord {
                decision: Some(did(1)),
                ..message(&a, 1, to("dev"))
            }),
            send(MessageRecord {
                in_reply_to: Some(mid(1)),
                ..message(&a, 2, Recipient::Human)
            }),
            send(MessageRecord {
                corrects: Some(mid(1)),
                ..message(&a, 3, to("lead"))
            }),
            human(&a, 40, None),
            send(human_message),
            delivered(&a, 1, "run-1"),
            read(&a, 1, "run-1"),
            sent(&b, 5, to("dev")),
            delivered(&b, 5, "run-9"),
            human(&a, 1, Some(Subject::Decision(did(1)))),
            human(&a, 2, Some(Subject::Message(mid(2)))),
            human(&b, 3, None),
        ],
        vec![
            task_created(&a, 3, 41, 40),
            observed(&a, "task.updated", Some(Subject::Task(task(3, 41)))),
            observed(&a, "note", Some(Subject::Decision(did(1)))),
            task_created(&a, 2, 1, 1),
            observed(&a, "task.deleted", Some(Subject::Task(task(2, 1)))),
            task_created(&b, 3, 41, 3),
            observed(&a, "routine", None),
            observed(&a, "review", Some(Subject::Role(role("dev")))),
            allowed(&a, None, Some(Subject::Message(mid(3)))),
            refused(Some(b.clone())),
            counted(Some(b.clone())),
        ],
    ]
}

/// Messages 1 to 5 to `dev` of acme, interleaved with messages to others.
pub(super) fn inbox_history() -> Vec<Vec<Evidence>> {
    let (a, b) = (acme(), globex());
    vec![
        vec![
            sent(&a, 1, to("dev")),
            sent(&a, 6, to("ops")),
            sent(&a, 2, to("dev")),
        ],
        vec![
            sent(&b, 7, to("dev")),
            sent(&a, 3, to("dev")),
            sent(&a, 8, Recipient::Human),
        ],
        vec![sent(&a, 4, to("dev")), sent(&a, 5, to("dev"))],
    ]
}

/// Facts of acme's messages numbered `ns`, to `dev`, undelivered and unread.
pub(super) fn fresh(ns: &[u8]) -> Vec<MessageFacts> {
    ns.iter()
        .map(|&n| facts(message(&acme(), n, to("dev")), None, false))
        .collect()
}
