//! A short working day of `acme` that leaves every kind of evidence behind:
//! launches, claims, a revoke, decisions in every terminal state, a spent
//! approval, messages delivered and read, human input, the launch switch, a
//! task observation, a refusal, and runs that ended (by the revoke, by the
//! host, by the human). Tests that need a populated store (every table
//! non-empty, tamper tests, restarts) play it through a [`Driver`].

use mosaic_domain::bus::{Command, SendInput};
use mosaic_domain::evidence::{Ending, Harness, LaunchRecord, Recipient, Subject};
use mosaic_domain::{Action, EventId, MessageId, Refusal, RunId, Target, TaskRef};
use mosaic_ports::EvidenceStore;

use crate::fixture::{acme, action, caller, decision_id, human, key, raise, role, t};
use crate::Driver;

fn message_id(n: u8) -> MessageId {
    MessageId::from_random([n; 16])
}

/// Plays the day; `now` is the wall clock in Unix ms, advanced per step.
///
/// # Panics
/// When any step is answered differently than the rules say: the scenario
/// doubles as an end-to-end check of the verbs it uses.
pub fn working_day<S: EvidenceStore>(driver: &mut Driver<S>, now: &mut i64) {
    let mut at = || {
        *now += 7;
        t(*now)
    };
    for (r, run, pid) in [
        ("lead", "l0", 100),
        ("dev", "d0", 101),
        ("ops", "o0", 102),
        ("dev", "d1", 103),
    ] {
        let record = LaunchRecord {
            business: acme(),
            role: role(r),
            run: RunId::parse(run).expect("valid run"),
            harness: if r == "dev" {
                Harness::ClaudeCode
            } else {
                Harness::Pi
            },
            address: None,
            pid,
            start_time: 4_000 + u64::from(pid),
        };
        driver
            .bind(at(), record)
            .expect("the host binds its launches");
    }
    let (lead, dev, ops) = (
        caller("lead", "l0"),
        caller("dev", "d0"),
        caller("ops", "o0"),
    );
    let ok = |r: Result<_, Refusal>| r.expect("the scenario step is allowed");
    ok(driver.call(at(), &lead, Command::Claim));
    ok(driver.call(at(), &dev, Command::Claim));
    ok(driver.call(at(), &ops, Command::Claim));

    // A cross-role merge approved by the arbiter and spent once.
    ok(driver.call(at(), &dev, raise(1, "repo.merge", Some("main"))));
    ok(driver.call(
        at(),
        &lead,
        Command::Seen {
            id: decision_id(1),
            note: Some("reading".into()),
        },
    ));
    ok(driver.call(
        at(),
        &lead,
        Command::Resolve {
            id: decision_id(1),
            choice: key("yes"),
            note: None,
        },
    ));
    let spend = Command::Authorize {
        action: action("repo.merge"),
        target: Some(Target::parse("main").expect("valid target")),
        decision: Some(decision_id(1)),
    };
    ok(driver.call(at(), &dev, spend.clone()));
    assert_eq!(
        driver.call(at(), &dev, spend),
        Err(Refusal::DecisionConsumed)
    );

    // A withdrawn decision and a superseded one.
    ok(driver.call(at(), &ops, raise(2, "deploy", None)));
    ok(driver.call(
        at(),
        &ops,
        Command::Withdraw {
            id: decision_id(2),
            note: None,
        },
    ));
    ok(driver.call(at(), &ops, raise(3, "deploy", Some("staging"))));
    let Command::Raise {
        id,
        input: mut newer,
    } = raise(4, "deploy", Some("production"))
    else {
        unreachable!()
    };
    newer.fields.supersedes = Some(decision_id(3));
    newer.fields.task_ref = Some(TaskRef::parse("vikunja:3/41").expect("valid ref"));
    newer.fields.blocking = true;
    ok(driver.call(at(), &ops, Command::Raise { id, input: newer }));

    // Messages: a human instruction, a reply, delivery and acknowledgement.
    let send = |n: u8, to: Recipient, in_reply_to: Option<MessageId>| Command::Send {
        id: message_id(n),
        input: Box::new(SendInput {
            to,
            class: None,
            body: format!("message {n}"),
            in_reply_to,
            corrects: None,
            decision: None,
        }),
        known: Vec::new(),
    };
    ok(driver.call(at(), &human(1), send(1, Recipient::Role(role("dev")), None)));
    ok(driver.call(at(), &dev, Command::Receive { batch: Vec::new() }));
    ok(driver.call(
        at(),
        &dev,
        Command::Read {
            id: message_id(1),
            known: None,
        },
    ));
    ok(driver.call(at(), &dev, send(2, Recipient::Human, Some(message_id(1)))));

    // A task observed on the human's request, and a routine observation.
    let mut input = [0u8; 16];
    input[..8].copy_from_slice(&1u64.to_be_bytes());
    let task = Subject::Task(TaskRef::parse("vikunja:3/41").expect("valid ref"));
    let record = Command::RecordEvent {
        kind: Action::parse("task.created").expect("valid kind"),
        body: r#"{"requirement":"R-1"}"#.into(),
        subject: Some(task.clone()),
        request: Some(EventId::from_random(input)),
    };
    ok(driver.call(at(), &dev, record));
    ok(driver.call(
        at(),
        &dev,
        Command::EmitRoutine {
            target: None,
            subject: Some(task),
        },
    ));

    // The launch switch, and a revoke approved by the human.
    ok(driver.call(at(), &human(2), Command::LaunchRevoke));
    ok(driver.call(at(), &human(3), Command::LaunchRestore));
    ok(driver.call(at(), &lead, raise(5, "role.revoke", Some("ops"))));
    ok(driver.call(
        at(),
        &human(4),
        Command::Resolve {
            id: decision_id(5),
            choice: key("yes"),
            note: None,
        },
    ));
    ok(driver.call(
        at(),
        &lead,
        Command::Revoke {
            role: role("ops"),
            decision: decision_id(5),
        },
    ));
    assert_eq!(
        driver.call(at(), &ops, Command::Claim),
        Err(Refusal::RunRevoked)
    );
    ok(driver.call(at(), &dev, Command::Release));

    // The host reports d1's process gone, failed; the human ends lead's
    // run, which frees its role.
    let failed = Ending::of_exit(Some(3), None).expect("a valid ending");
    driver
        .end(at(), &RunId::parse("d1").expect("valid run"), failed)
        .expect("the host ends a bound run");
    let end = Command::EndRun {
        run: RunId::parse("l0").expect("valid run"),
    };
    ok(driver.call(at(), &human(5), end));
    assert_eq!(
        driver.call(at(), &lead, Command::Release),
        Err(Refusal::RunEnded)
    );
}
