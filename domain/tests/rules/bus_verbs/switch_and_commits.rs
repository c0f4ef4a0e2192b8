//! The launch switch, failed commits and the write times.

use super::*;

#[test]
fn the_launch_switch_stops_role_launch_and_new_bindings_until_restored() {
    let mut f = Fixture::new();
    f.claim("lead", "l1");
    let launch = |run: &str, pid| LaunchRecord {
        business: acme(),
        role: role("dev"),
        run: RunId::parse(run).unwrap(),
        harness: Harness::Pi,
        address: None,
        pid,
        start_time: 42,
    };
    assert_eq!(
        f.bus.handle_bind(t(2_000), launch("r1", 10)),
        Ok(BindReply::New)
    );
    assert!(matches!(
        f.bus.poll_effect().map(|s| s.evidence),
        Some(Evidence::Launch(LaunchEvidence::Launched(_)))
    ));
    f.bus.handle_committed();
    assert_eq!(
        f.bus.handle_bind(t(2_001), launch("r1", 10)),
        Ok(BindReply::Rebound)
    );
    assert_eq!(
        f.bus.handle_bind(t(2_002), launch("r1", 11)),
        Err(Refusal::LaunchMismatch)
    );
    while f.bus.poll_effect().is_some() {}
    f.bus.handle_committed();

    f.ok(&human(1), Command::LaunchRevoke);
    assert_eq!(
        f.bus.handle_bind(t(3_000), launch("r2", 12)),
        Err(Refusal::LaunchRevoked)
    );
    let mut launch_decision = raise("role.launch", None);
    launch_decision.choice = Some(key("yes"));
    f.refuse(
        &caller("lead", "l1"),
        raising(1, launch_decision.clone()),
        Refusal::LaunchRevoked,
    );
    let ask = Command::Authorize {
        action: act("role.launch"),
        target: None,
        decision: None,
    };
    f.refuse(&caller("lead", "l1"), ask.clone(), Refusal::LaunchRevoked);
    f.ok(&human(2), Command::LaunchRestore);
    assert_eq!(
        f.bus.handle_bind(t(4_000), launch("r2", 12)),
        Ok(BindReply::New)
    );
    while f.bus.poll_effect().is_some() {}
    f.bus.handle_committed();
    assert_eq!(
        f.ok(&caller("lead", "l1"), ask),
        Reply::Authorized(Grant::WithinRole)
    );
}

#[test]
fn a_failed_commit_leaves_every_machine_and_the_clock_as_they_were() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.ok(&caller("lead", "l1"), resolve(1, "yes"));
    let before = f.bus.clone();

    let spend = Command::Authorize {
        action: act("repo.merge"),
        target: None,
        decision: Some(did(1)),
    };
    for command in [
        spend.clone(),
        Command::Release,
        raising(2, raise("repo.merge", None)),
    ] {
        assert!(f
            .bus
            .handle(t(f.now + 1), &caller("dev", "r1"), command)
            .is_ok());
        f.bus.handle_rolled_back();
        assert!(f.bus == before, "a rolled-back verb left a trace");
    }
    assert_eq!(
        f.ok(&caller("dev", "r1"), spend),
        Reply::Authorized(Grant::Approval(did(1)))
    );
}

#[test]
fn write_times_strictly_increase_across_verbs_and_a_rebuild() {
    let mut f = Fixture::new();
    f.now = 50_000;
    f.claim("dev", "r1");
    f.now = 10; // the wall clock steps back
    f.claim("lead", "l1");
    f.ok(&caller("dev", "r1"), send(1, "lead", None));
    let times: Vec<Timestamp> = f.committed.iter().map(|s| s.at).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    let mut bus = Bus::new([standard()], times.last().copied());
    assert!(bus
        .handle(t(5), &caller("ops", "o1"), Command::Claim)
        .is_ok());
    assert!(bus.poll_effect().unwrap().at > *times.last().unwrap());
}

#[test]
fn only_a_role_launch_decision_waits_for_launching_to_be_restored() {
    let mut f = Fixture::new();
    f.claim("lead", "l1");
    let mut launch = raise("role.launch", None);
    launch.choice = Some(key("yes"));
    let on = f.raise("lead", "l1", 1, launch.clone());
    assert_eq!(on.status, Status::Resolved(key("yes")));
    f.ok(&human(1), Command::LaunchRevoke);
    f.refuse(
        &caller("lead", "l1"),
        raising(2, launch),
        Refusal::LaunchRevoked,
    );
    let merge = f.raise("lead", "l1", 3, raise("repo.merge", None));
    assert_eq!(merge.status, Status::Open);
}
