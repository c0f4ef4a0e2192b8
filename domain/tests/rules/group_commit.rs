//! Group commit's promises, for every machine at once: a change staged after
//! a mark vanishes when the batch rolls back to that mark, changes staged
//! before it stay, and a committed change survives every later rollback.

use mosaic_domain::bus::{Bus, Caller, Command, Reply};
use mosaic_domain::business::{AuthoritySpec, RoleSpec};
use mosaic_domain::claims::{BindReply, LaunchSwitch, Occupancy};
use mosaic_domain::decisions::{RaiseInput, Status};
use mosaic_domain::evidence::{
    AgentRef, DecisionOption, Harness, LaunchRecord, OptionKey, RaiseFields,
};
use mosaic_domain::*;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms).unwrap()
}
fn role(s: &str) -> RoleInstance {
    RoleInstance::parse(s).unwrap()
}
fn act(s: &str) -> Action {
    Action::parse(s).unwrap()
}
fn acme() -> BusinessId {
    BusinessId::parse("acme").unwrap()
}
fn run(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}
fn caller(r: &str, run_id: &str) -> Caller {
    Caller::Agent {
        business: acme(),
        agent: AgentRef {
            role: role(r),
            run: run(run_id),
        },
    }
}
fn human(n: u8) -> Caller {
    Caller::Human {
        business: acme(),
        input: EventId::from_random([n; 16]),
    }
}
fn did(n: u8) -> DecisionId {
    DecisionId::from_random([n; 16])
}

/// acme: `lead` arbitrates and launches, `dev` merges cross-role, `ops`
/// does nothing on its own.
fn business() -> Business {
    let spec = |within: &[&str], cross: &[&str]| RoleSpec {
        authority: AuthoritySpec {
            within_role: Some(within.iter().map(|a| act(a)).collect()),
            cross_role: Some(cross.iter().map(|a| act(a)).collect()),
        },
        credentials: Default::default(),
    };
    Business::validate(BusinessSpec {
        id: acme(),
        human: HumanName::parse("alice").unwrap(),
        technical_arbiter: role("lead"),
        delivery_arbiter: role("lead"),
        roles: [
            (role("lead"), spec(&["message.send"], &[])),
            (role("dev"), spec(&["message.send"], &["repo.merge"])),
            (role("ops"), spec(&[], &[])),
        ]
        .into_iter()
        .collect(),
        launch_by: vec![role("lead")],
    })
    .unwrap()
}

fn merge_decision(id: u8) -> Command {
    Command::Raise {
        id: did(id),
        input: Box::new(RaiseInput {
            fields: RaiseFields {
                action: act("repo.merge"),
                target: None,
                question: "May I merge?".into(),
                options: vec![DecisionOption {
                    key: OptionKey::yes(),
                    text: "Yes".into(),
                }],
                recommendation: "yes".into(),
                blocking: false,
                technical: false,
                project: None,
                task_ref: None,
                requirement_ref: None,
                supersedes: None,
            },
            choice: None,
            approval_choice: None,
        }),
    }
}

fn launch(run_id: &str) -> LaunchRecord {
    LaunchRecord {
        business: acme(),
        role: role("ops"),
        run: run(run_id),
        harness: Harness::Pi,
        address: None,
        pid: 42,
        start_time: 7,
    }
}

#[track_caller]
fn ok(bus: &mut Bus, now: i64, caller: &Caller, command: Command) -> Reply {
    bus.handle(t(now), caller, command).unwrap()
}

/// Drains the outbox and commits it, as the runtime does.
fn commit(bus: &mut Bus) {
    while bus.poll_effect().is_some() {}
    bus.handle_committed();
}

/// `dev` and `lead` hold their roles, and `lead` approved `dev`'s merge
/// decision 1: committed.
fn committed_setup() -> Bus {
    let mut bus = Bus::new([business()], None);
    ok(&mut bus, 10, &caller("dev", "r1"), Command::Claim);
    ok(&mut bus, 11, &caller("lead", "l1"), Command::Claim);
    ok(&mut bus, 12, &caller("dev", "r1"), merge_decision(1));
    ok(
        &mut bus,
        13,
        &caller("lead", "l1"),
        Command::Resolve {
            id: did(1),
            choice: OptionKey::yes(),
            note: None,
        },
    );
    commit(&mut bus);
    bus
}

/// The first request of a batch: a launch of `ops` bound and claimed.
fn first_request(bus: &mut Bus) {
    assert_eq!(bus.handle_bind(t(20), launch("o1")), Ok(BindReply::New));
    ok(bus, 21, &caller("ops", "o1"), Command::Claim);
}

/// A later request of the batch that touches every machine: the launch
/// switch goes off, `lead` releases its role, `dev` raises decision 2 and
/// spends decision 1's approval.
fn later_request(bus: &mut Bus) {
    ok(bus, 30, &human(1), Command::LaunchRevoke);
    ok(bus, 31, &caller("lead", "l1"), Command::Release);
    ok(bus, 32, &caller("dev", "r1"), merge_decision(2));
    ok(
        bus,
        33,
        &caller("dev", "r1"),
        Command::Authorize {
            action: act("repo.merge"),
            target: None,
            decision: Some(did(1)),
        },
    );
}

/// What the later request changes, as seen through every machine.
#[track_caller]
fn assert_later_request_absent(bus: &Bus) {
    assert_eq!(bus.launches().switch(&acme()), LaunchSwitch::On);
    assert_eq!(
        bus.claims().holder(&acme(), &role("lead")),
        Some(&run("l1"))
    );
    assert_eq!(bus.decisions().get(&did(2)), None);
    assert!(!bus.authorizations().is_consumed(&did(1)));
}

#[track_caller]
fn assert_first_request_present(bus: &Bus) {
    assert_eq!(bus.launches().record(&run("o1")), Some(&launch("o1")));
    assert_eq!(
        bus.claims()
            .seat(&acme(), &role("ops"))
            .map(|s| s.occupancy()),
        Some(&Occupancy::Held(run("o1")))
    );
}

#[test]
fn the_later_request_really_touches_every_machine() {
    let mut bus = committed_setup();
    first_request(&mut bus);
    later_request(&mut bus);
    assert_eq!(bus.launches().switch(&acme()), LaunchSwitch::Off);
    assert_eq!(bus.claims().holder(&acme(), &role("lead")), None);
    assert_eq!(
        bus.decisions().get(&did(2)).map(|d| &d.status),
        Some(&Status::Open)
    );
    assert!(bus.authorizations().is_consumed(&did(1)));
    let records: Vec<&LaunchRecord> = bus.launches().records().collect();
    assert_eq!(records, [&launch("o1")]);
    let mut ids: Vec<DecisionId> = bus.decisions().iter().map(|d| d.record.id).collect();
    ids.sort();
    let mut want = vec![did(1), did(2)];
    want.sort();
    assert_eq!(ids, want);
}

#[test]
fn a_status_has_one_wire_name() {
    let names = [
        Status::Open,
        Status::Resolved(OptionKey::yes()),
        Status::Withdrawn,
        Status::Superseded(did(1)),
    ]
    .map(|s| s.as_str());
    assert_eq!(names, ["open", "resolved", "withdrawn", "superseded"]);
}

#[test]
fn a_request_rolled_back_to_its_mark_vanishes_and_earlier_ones_stay() {
    let mut bus = committed_setup();
    first_request(&mut bus);
    let reference = bus.clone();
    let mark = bus.mark();
    later_request(&mut bus);
    bus.rollback_to(mark);
    assert_later_request_absent(&bus);
    assert_first_request_present(&bus);
    assert!(bus == reference, "the rollback left a trace");

    // The batch then commits what is left, and the store sees exactly it.
    let mut records = Vec::new();
    while let Some(s) = bus.poll_effect() {
        records.push(s.evidence.kind().as_str());
    }
    assert_eq!(records, ["session.launched", "role.claimed"]);
}

#[test]
fn a_committed_batch_survives_a_later_failed_commit() {
    let mut bus = committed_setup();
    first_request(&mut bus);
    commit(&mut bus);
    let reference = bus.clone();
    later_request(&mut bus);
    bus.handle_rolled_back();
    assert_later_request_absent(&bus);
    assert_first_request_present(&bus);
    assert!(bus == reference, "the failed commit left a trace");
    assert_eq!(bus.poll_effect(), None);
}

#[test]
fn a_failed_commit_drops_every_staged_change_of_every_machine() {
    let mut bus = committed_setup();
    let reference = bus.clone();
    first_request(&mut bus);
    later_request(&mut bus);
    bus.handle_rolled_back();
    assert_later_request_absent(&bus);
    assert_eq!(bus.launches().record(&run("o1")), None);
    assert_eq!(bus.claims().holder(&acme(), &role("ops")), None);
    assert!(bus == reference, "the failed commit left a trace");
}

#[test]
fn a_committed_later_request_survives_the_next_failed_commit() {
    let mut bus = committed_setup();
    first_request(&mut bus);
    later_request(&mut bus);
    commit(&mut bus);
    ok(&mut bus, 40, &caller("ops", "o1"), Command::Release);
    bus.handle_rolled_back();
    assert_eq!(bus.launches().switch(&acme()), LaunchSwitch::Off);
    assert_eq!(bus.claims().holder(&acme(), &role("lead")), None);
    assert_eq!(bus.claims().holder(&acme(), &role("ops")), Some(&run("o1")));
    assert!(bus.decisions().get(&did(2)).is_some());
    assert!(bus.authorizations().is_consumed(&did(1)));
}

/// A window's count of refusals is queued like any other fact, stamped, and
/// a refusal of nobody is recorded without a caller.
#[test]
fn a_windows_count_of_refusals_is_queued_as_evidence() {
    use mosaic_domain::evidence::{Evidence, RefusalCount, RefusalRecord};
    let mut bus = Bus::new([business()], None);
    let count = RefusalCount {
        refused: RefusalRecord::of(None, Some("inbox"), Refusal::HumanProofFailed),
        since: t(20),
        count: 41,
    };
    bus.handle_refusals_counted(t(21), count.clone());
    let stamped = bus.poll_effect().expect("the count is queued");
    assert_eq!(stamped.evidence, Evidence::RefusalsCounted(count));
    assert_eq!(stamped.at, t(21));
    assert!(bus.poll_effect().is_none(), "one record");
}
