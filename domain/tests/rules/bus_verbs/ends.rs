//! A run's end: the host's (`endRun`), the human's (`run.end`) and a
//! revoke's. The end frees the role the run held, in the same record, and
//! from then on the run is refused every verb.

use super::*;

fn ended(r: &str, run: &str, ending: Ending, vacated: bool) -> Evidence {
    Evidence::Claim(ClaimEvidence::Ended(RunEnd {
        business: acme(),
        agent: agent(r, run),
        ending,
        vacated,
    }))
}

fn run_id(run: &str) -> RunId {
    RunId::parse(run).unwrap()
}

/// Every verb an agent may send, one of each, for the refusals of an
/// ended run.
fn agent_verbs() -> Vec<Command> {
    vec![
        Command::Claim,
        Command::Release,
        send(1, "lead", None),
        raising(7, raise("repo.merge", None)),
        Command::Receive { batch: Vec::new() },
        Command::EmitRoutine {
            target: None,
            subject: None,
        },
        Command::Authorize {
            action: act("repo.push"),
            target: None,
            decision: None,
        },
    ]
}

#[test]
fn the_hosts_end_frees_the_role_in_the_same_record_and_the_run_is_refused_from_then_on() {
    let mut f = Fixture::new();
    f.bind("dev", "r1");
    f.claim("dev", "r1");
    let failed = Ending::of_exit(Some(3), None).unwrap();
    assert_eq!(failed.cause(), EndCause::Failed);
    assert_eq!(
        f.end("r1", failed),
        (Ok(()), vec![ended("dev", "r1", failed, true)])
    );
    assert_eq!(f.bus.claims().holder(&acme(), &role("dev")), None);
    for command in agent_verbs() {
        f.refuse(&caller("dev", "r1"), command, Refusal::RunEnded);
    }
    // The next run takes the role at once.
    f.bind("dev", "r2");
    f.claim("dev", "r2");
    assert_eq!(
        f.bus.claims().holder(&acme(), &role("dev")),
        Some(&run_id("r2"))
    );
}

#[test]
fn an_end_of_a_run_that_holds_nothing_vacates_nothing() {
    let mut f = Fixture::new();
    f.bind("dev", "r1");
    f.bind("dev", "r2");
    f.claim("dev", "r2");
    let exited = Ending::of_exit(Some(0), None).unwrap();
    assert_eq!(exited.cause(), EndCause::Exited);
    assert_eq!(
        f.end("r1", exited),
        (Ok(()), vec![ended("dev", "r1", exited, false)])
    );
    assert_eq!(
        f.bus.claims().holder(&acme(), &role("dev")),
        Some(&run_id("r2")),
        "the holder keeps its role"
    );
    f.ok(&caller("dev", "r2"), Command::Release);
}

#[test]
fn the_host_ends_a_bound_run_once_and_never_for_the_human_or_a_revoke() {
    let mut f = Fixture::new();
    f.bind("dev", "r1");
    let none = (Err(Refusal::UnknownReference), vec![]);
    assert_eq!(f.end("r9", Ending::of_cause(EndCause::Budget)), none);
    for cause in [EndCause::Human, EndCause::Revoked] {
        assert_eq!(
            f.end("r1", Ending::of_cause(cause)),
            (Err(Refusal::BadRequest), vec![]),
            "{cause}"
        );
    }
    let budget = Ending::of_cause(EndCause::Budget);
    assert_eq!(
        f.end("r1", budget),
        (Ok(()), vec![ended("dev", "r1", budget, false)])
    );
    assert_eq!(
        f.end("r1", Ending::of_cause(EndCause::ProcessGone)),
        (Err(Refusal::RunEnded), vec![])
    );
}

#[test]
fn the_human_ends_a_run_recorded_as_its_input_filed_under_the_role() {
    let mut f = Fixture::new();
    f.bind("dev", "r1");
    f.claim("dev", "r1");
    let end = Command::EndRun { run: run_id("r1") };
    f.expect(
        &human(5),
        end.clone(),
        Ok(Reply::Done),
        &[
            Evidence::Human(HumanInput {
                id: EventId::from_random([5; 16]),
                business: acme(),
                verb: "run.end".into(),
                subject: Some(Subject::Role(role("dev"))),
            }),
            ended("dev", "r1", Ending::of_cause(EndCause::Human), true),
        ],
    );
    f.refuse(&human(6), end, Refusal::RunEnded);
    f.refuse(
        &human(7),
        Command::EndRun { run: run_id("r9") },
        Refusal::UnknownReference,
    );
    f.refuse(&caller("dev", "r1"), Command::Claim, Refusal::RunEnded);
    // Only the human ends a run by this verb.
    f.bind("dev", "r2");
    f.claim("dev", "r2");
    f.refuse(
        &caller("dev", "r2"),
        Command::EndRun { run: run_id("r2") },
        Refusal::HumanOnly,
    );
}

#[test]
fn the_human_cannot_end_a_run_of_another_business() {
    let mut other = BusinessSpec {
        id: BusinessId::parse("globex").unwrap(),
        human: HumanName::parse("bob").unwrap(),
        technical_arbiter: role("solo"),
        delivery_arbiter: role("solo"),
        roles: Default::default(),
        launch_by: vec![],
    };
    other.roles.insert(
        role("solo"),
        RoleSpec {
            authority: AuthoritySpec {
                within_role: Some(vec![]),
                cross_role: Some(vec![]),
            },
            credentials: Default::default(),
        },
    );
    let globex = Business::validate(other).unwrap();
    let mut f = Fixture::new();
    f.bus = Bus::new([standard(), globex], None);
    let record = LaunchRecord {
        business: BusinessId::parse("globex").unwrap(),
        role: role("solo"),
        run: run_id("g1"),
        harness: Harness::ClaudeCode,
        address: None,
        pid: 9,
        start_time: 9,
    };
    f.bus.handle_bind(t(5), record).unwrap();
    f.commit();
    f.refuse(
        &human(5),
        Command::EndRun { run: run_id("g1") },
        Refusal::CrossBusiness,
    );
    assert!(f.bus.claims().ended(&run_id("g1")).is_none());
}

#[test]
fn an_end_is_stamped_with_its_records_time_and_a_rebuild_agrees_with_the_live_bus() {
    let mut f = Fixture::new();
    f.bind("dev", "r1");
    f.bind("lead", "l1");
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.end("r1", Ending::of_exit(None, Some(9)).unwrap())
        .0
        .unwrap();
    f.ok(&human(3), Command::EndRun { run: run_id("l1") });
    let at = |run: &str| {
        f.committed
            .iter()
            .find(|s| {
                matches!(&s.evidence, Evidence::Claim(ClaimEvidence::Ended(end))
                    if end.agent.run.as_str() == run)
            })
            .map(|s| s.at)
    };
    for run in ["r1", "l1"] {
        let ended = f.bus.claims().ended(&run_id(run)).unwrap();
        assert_eq!(ended.at(), at(run), "{run}");
        assert!(ended.at().is_some(), "{run}");
    }
    let killed = f.bus.claims().ended(&run_id("r1")).unwrap().ending();
    assert_eq!(
        (killed.cause(), killed.status(), killed.signal()),
        (EndCause::Failed, None, Some(9))
    );
    let mut rebuilt = Bus::new([standard()], f.committed.last().map(|s| s.at));
    for s in &f.committed {
        rebuilt.replay(s);
    }
    assert_eq!(rebuilt, f.bus, "replay agrees with the live bus");
    f.bus = rebuilt;
    f.refuse(&caller("dev", "r1"), Command::Claim, Refusal::RunEnded);
    f.claim("dev", "r2");
}

#[test]
fn a_refused_or_rolled_back_end_leaves_the_run_alive() {
    let mut f = Fixture::new();
    f.bind("dev", "r1");
    f.claim("dev", "r1");
    let before = f.bus.clone();
    f.now += 10;
    f.bus
        .handle_end(t(f.now), &run_id("r1"), Ending::of_cause(EndCause::Budget))
        .unwrap();
    while f.bus.poll_effect().is_some() {}
    f.bus.handle_rolled_back();
    assert_eq!(
        f.bus, before,
        "a failed commit restores the run and its seat"
    );
    f.ok(&caller("dev", "r1"), Command::Release);
}

/// The endings the rules allow, as a plain model: at most one of a status
/// (0 to 255) and a signal (1 to 64); `exited` is status 0 or none and no
/// signal; `failed` is anything but status 0.
fn allowed(cause: EndCause, status: Option<i32>, signal: Option<i32>) -> bool {
    let in_range = status.is_none_or(|s| (0..=255).contains(&s))
        && signal.is_none_or(|s| (1..=64).contains(&s));
    let one = status.is_none() || signal.is_none();
    let agrees = match cause {
        EndCause::Exited => signal.is_none() && matches!(status, None | Some(0)),
        EndCause::Failed => status != Some(0),
        EndCause::Human | EndCause::Revoked | EndCause::Budget | EndCause::ProcessGone => true,
    };
    in_range && one && agrees
}

proptest::proptest! {
    #[test]
    fn an_ending_is_accepted_exactly_when_its_cause_and_process_agree(
        cause in proptest::sample::select(EndCause::ALL.to_vec()),
        status in proptest::option::of(-2..300i32),
        signal in proptest::option::of(-2..70i32),
    ) {
        let got = Ending::new(cause, status, signal);
        proptest::prop_assert_eq!(got.is_ok(), allowed(cause, status, signal));
        if let Ok(ending) = got {
            proptest::prop_assert_eq!(
                (ending.cause(), ending.status(), ending.signal()),
                (cause, status, signal)
            );
        }
        // The host's exit: exited for status 0 or nothing known, failed
        // for anything else.
        let exit = Ending::of_exit(status, signal);
        let failed = signal.is_some() || status.is_some_and(|s| s != 0);
        let cause_of_exit = if failed { EndCause::Failed } else { EndCause::Exited };
        proptest::prop_assert_eq!(
            exit.map(|e| e.cause()),
            if allowed(cause_of_exit, status, signal) { Ok(cause_of_exit) } else { Err(Refusal::BadRequest) }
        );
    }
}

#[test]
fn causes_have_one_wire_name_each_and_only_a_revoke_answers_run_revoked() {
    for cause in EndCause::ALL {
        assert_eq!(EndCause::parse(cause.as_str()), Ok(cause));
        let refusal = Ending::of_cause(cause).refusal();
        assert_eq!(
            refusal == Refusal::RunRevoked,
            cause == EndCause::Revoked,
            "{cause}"
        );
        assert!(matches!(refusal, Refusal::RunRevoked | Refusal::RunEnded));
    }
    assert_eq!(
        EndCause::ALL.map(EndCause::as_str),
        [
            "exited",
            "failed",
            "human",
            "revoked",
            "budget",
            "process-gone"
        ]
    );
    assert_eq!(EndCause::parse("Exited"), Err(Refusal::BadRequest));
}
