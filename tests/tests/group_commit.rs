//! Group commit against one-request-at-a-time execution.
//!
//! Batches of requests, each staged by [`Driver::stage_call`] in a savepoint
//! of its own and committed together by [`Driver::finish`], must answer
//! exactly as the same requests do one at a time, leave the same evidence
//! and the same bus, and rebuild the same bus after a restart. Requests that
//! fail inside a batch (refused by the domain, or refused only by the store:
//! a `task.created` naming no human input) undo only themselves. A batch
//! whose commit fails answers `storage-unavailable` to every request and
//! leaves the bus and the store exactly as before it. Both stores, the
//! in-memory fake and SQLite on a real file, run the same cases.

use mosaic_domain::bus::{Caller, Command, Reply, SendInput};
use mosaic_domain::evidence::{Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{Action, EventId, MessageId, Refusal, TaskRef};
use mosaic_ports::fakes::MemoryStore;
use mosaic_ports::EvidenceStore;
use mosaic_tests::fixture::{
    acme, caller, decision_id, human, key, policy_a, raise, role, t, ROLES,
};
use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::{Driver, FreshStore, Restart};
use proptest::prelude::*;

const RUNS: [&str; 3] = ["l0", "d0", "o0"];

/// One request of a batch. Indexes into `ROLES` are taken modulo its length;
/// `n` picks an earlier request's id (a decision or message that may or may
/// not exist).
#[derive(Debug, Clone)]
enum Op {
    /// An agent writes to the human.
    Send { from: usize },
    /// The human writes to a role.
    HumanSend { to: usize },
    /// An agent takes its undelivered messages.
    Receive { by: usize },
    /// An agent acknowledges the message of request `n`.
    Read { by: usize, n: usize },
    /// An agent raises a cross-role decision.
    Raise { by: usize },
    /// A role, or the human (`by` out of range), resolves decision `n`.
    Resolve { by: usize, n: usize },
    /// An agent records a `task.created` naming a human input that does not
    /// exist: only the store can refuse it.
    DanglingTask { by: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize).prop_map(|from| Op::Send { from }),
        (0..3usize).prop_map(|to| Op::HumanSend { to }),
        (0..3usize).prop_map(|by| Op::Receive { by }),
        (0..3usize, 0..64usize).prop_map(|(by, n)| Op::Read { by, n }),
        (0..3usize).prop_map(|by| Op::Raise { by }),
        (0..4usize, 0..64usize).prop_map(|(by, n)| Op::Resolve { by, n }),
        (0..3usize).prop_map(|by| Op::DanglingTask { by }),
    ]
}

/// Batches of requests, each with whether its commit fails.
fn batches() -> impl Strategy<Value = Vec<(Vec<Op>, bool)>> {
    prop::collection::vec(
        (prop::collection::vec(op(), 1..8), prop::bool::weighted(0.2)),
        1..8,
    )
}

fn message_id(n: usize) -> MessageId {
    let mut b = [0x3e; 16];
    b[..8].copy_from_slice(&(n as u64).to_be_bytes());
    MessageId::from_random(b)
}

fn agent(r: usize) -> Caller {
    caller(ROLES[r % ROLES.len()], RUNS[r % RUNS.len()])
}

/// The caller and command of request number `i`.
fn request(i: usize, op: &Op) -> (Caller, Command) {
    let send = |to: Recipient| Command::Send {
        id: message_id(i),
        input: Box::new(SendInput {
            to,
            class: None,
            body: format!("message {i}"),
            in_reply_to: None,
            corrects: None,
            decision: None,
        }),
        known: Vec::new(),
    };
    match *op {
        Op::Send { from } => (agent(from), send(Recipient::Human)),
        Op::HumanSend { to } => (
            human(i as u64 + 1),
            send(Recipient::Role(role(ROLES[to % ROLES.len()]))),
        ),
        Op::Receive { by } => (agent(by), Command::Receive { batch: Vec::new() }),
        Op::Read { by, n } => (
            agent(by),
            Command::Read {
                id: message_id(n % (i + 1)),
                known: None,
            },
        ),
        Op::Raise { by } => (agent(by), raise(i as u64, "repo.merge", Some("main"))),
        Op::Resolve { by, n } => (
            if by < ROLES.len() {
                agent(by)
            } else {
                human(i as u64 + 1)
            },
            Command::Resolve {
                id: decision_id((n % (i + 1)) as u64),
                choice: key("yes"),
                note: None,
            },
        ),
        Op::DanglingTask { by } => (
            agent(by),
            Command::RecordEvent {
                kind: Action::parse("task.created").expect("valid kind"),
                body: r#"{"requirement":"R-1"}"#.into(),
                subject: Some(Subject::Task(
                    TaskRef::parse("vikunja:1/1").expect("valid ref"),
                )),
                request: Some(EventId::from_random([0xee; 16])),
            },
        ),
    }
}

/// A driver whose three roles are held.
fn ready<S: FreshStore>() -> Driver<S> {
    let mut driver = Driver::open(policy_a(), S::fresh()).expect("an empty store opens");
    for r in 0..ROLES.len() {
        driver
            .call(t(1_000 + r as i64), &agent(r), Command::Claim)
            .expect("a vacant role is claimed");
    }
    driver
}

/// Everything the reads show about the requests `0..requests`.
fn evidence<S: EvidenceStore>(store: &S, requests: usize) -> Vec<String> {
    let business = acme();
    let mut seen = vec![format!("{:?}", store.last_write())];
    let mut replayed: Vec<Stamped> = Vec::new();
    store.replay(&mut |r| replayed.push(r)).expect("replay");
    seen.push(format!("{replayed:?}"));
    let mut subjects: Vec<Subject> = ROLES.iter().map(|r| Subject::Role(role(r))).collect();
    subjects.push(Subject::Task(
        TaskRef::parse("vikunja:1/1").expect("valid ref"),
    ));
    for i in 0..requests {
        subjects.push(Subject::Decision(decision_id(i as u64)));
        subjects.push(Subject::Message(message_id(i)));
        let facts: Option<MessageFacts> = store.message(&message_id(i)).expect("message");
        seen.push(format!("{facts:?}"));
    }
    for subject in &subjects {
        seen.push(format!(
            "{:?}",
            store.trail(&business, subject).expect("trail")
        ));
    }
    for recipient in ROLES
        .iter()
        .map(|r| Recipient::Role(role(r)))
        .chain([Recipient::Human])
    {
        seen.push(format!(
            "{:?}",
            store
                .unread(&business, &recipient, usize::MAX)
                .expect("unread")
        ));
    }
    seen
}

/// Plays `batches` grouped on one driver and one request at a time on
/// another, and checks that they agree after every batch.
fn grouped_equals_serial<S: FreshStore>(batches: &[(Vec<Op>, bool)]) {
    let mut grouped: Driver<S> = ready();
    let mut serial: Driver<S> = ready();
    let mut i = 0;
    let mut now = 2_000;
    for (ops, fails) in batches {
        let before = grouped.bus().clone();
        let first = i;
        let mut provisional = Vec::new();
        let mut times = Vec::new();
        for op in ops {
            now += 1;
            times.push(now);
            let (caller, command) = request(i, op);
            let verb = command.verb();
            provisional.push(grouped.stage_call(t(now), &caller, verb, command));
            i += 1;
        }
        if *fails {
            grouped.store_mut().set_unavailable(true);
        }
        let durable = grouped.finish();
        grouped.store_mut().set_unavailable(false);
        if let Err(refusal) = durable {
            assert!(fails, "only an injected failure fails a batch: {refusal:?}");
            assert_eq!(refusal, Refusal::StorageUnavailable);
            assert_eq!(
                grouped.bus(),
                &before,
                "a failed batch leaves the bus as it was"
            );
            continue;
        }
        if *fails {
            // A store may commit an empty batch whatever its state.
            assert_eq!(
                grouped.bus(),
                &before,
                "only a batch that staged nothing commits"
            );
        }
        for (k, op) in ops.iter().enumerate() {
            let (caller, command) = request(first + k, op);
            let alone: Result<Reply, Refusal> = serial.call(t(times[k]), &caller, command);
            assert_eq!(
                provisional[k],
                alone,
                "request {} ({op:?}) of the batch",
                first + k
            );
        }
        assert_eq!(grouped.bus(), serial.bus());
        assert_eq!(evidence(grouped.store(), i), evidence(serial.store(), i));
    }
    let live = grouped.bus().clone();
    let restarted = grouped.restart(policy_a()).expect("the store reopens");
    assert_eq!(restarted.bus(), &live, "a restart rebuilds the grouped bus");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn grouped_requests_answer_and_record_as_serial_ones_in_memory(batches in batches()) {
        grouped_equals_serial::<MemoryStore>(&batches);
    }

    #[test]
    fn grouped_requests_answer_and_record_as_serial_ones_in_sqlite(batches in batches()) {
        grouped_equals_serial::<TempSqlite>(&batches);
    }
}

/// One batch with a request the store refuses between two that succeed:
/// only the failing one is undone, and the others commit in one
/// transaction. (That its refusal is recorded, as one at a time, the
/// comparison with serial execution above shows.)
fn a_failing_request_inside_a_batch_undoes_only_itself<S: FreshStore>() {
    let mut driver: Driver<S> = ready();
    let ops = [
        Op::Send { from: 1 },
        Op::DanglingTask { by: 1 },
        Op::Raise { by: 1 },
        Op::Resolve { by: 2, n: 0 },
        Op::Send { from: 0 },
    ];
    let answers: Vec<_> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let (caller, command) = request(i, op);
            let verb = command.verb();
            driver.stage_call(t(3_000 + i as i64), &caller, verb, command)
        })
        .collect();
    assert_eq!(driver.finish(), Ok(()));
    assert!(
        matches!(answers[0], Ok(Reply::Sent { .. })),
        "{:?}",
        answers[0]
    );
    assert_eq!(answers[1], Err(Refusal::UnknownReference));
    assert!(
        matches!(answers[2], Ok(Reply::Decision(_))),
        "{:?}",
        answers[2]
    );
    // Decision 0 does not exist: request 0 sent a message.
    assert_eq!(answers[3], Err(Refusal::UnknownReference));
    assert!(
        matches!(answers[4], Ok(Reply::Sent { .. })),
        "{:?}",
        answers[4]
    );
    let store = driver.store();
    assert!(store.message(&message_id(0)).expect("read").is_some());
    assert!(store.message(&message_id(4)).expect("read").is_some());
    let task = Subject::Task(TaskRef::parse("vikunja:1/1").expect("valid ref"));
    assert_eq!(store.trail(&acme(), &task).expect("trail"), vec![]);
    assert!(
        driver.bus().decisions().get(&decision_id(2)).is_some(),
        "the decision raised after the failed request stands"
    );
}

#[test]
fn a_failing_request_inside_a_batch_undoes_only_itself_in_memory() {
    a_failing_request_inside_a_batch_undoes_only_itself::<MemoryStore>();
}

#[test]
fn a_failing_request_inside_a_batch_undoes_only_itself_in_sqlite() {
    a_failing_request_inside_a_batch_undoes_only_itself::<TempSqlite>();
}
