//! Decisions: routing, raising, superseding, resolving, and the approvals
//! they grant.

use super::*;

#[test]
fn routing_follows_the_class_and_the_arbiters() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    let cross = f.raise("dev", "r1", 1, raise("repo.merge", None));
    assert_eq!(
        (cross.record.class, cross.record.route),
        (ActionClass::CrossRole, Route::Role(role("lead")))
    );
    let gated = f.raise("dev", "r1", 2, raise("repo.delete", None));
    assert_eq!(
        (gated.record.class, gated.record.route),
        (ActionClass::Gated, Route::Human)
    );
    let own = f.raise("lead", "l1", 3, raise("repo.merge", None));
    assert_eq!(
        (own.record.class, own.record.route),
        (ActionClass::CrossRole, Route::Human),
        "arbiter raising goes to the human"
    );
    let mut within = raise("repo.push", None);
    within.choice = Some(key("yes"));
    let within = f.raise("dev", "r1", 4, within);
    assert_eq!(
        (within.record.class, within.status),
        (ActionClass::WithinRole, Status::Resolved(key("yes")))
    );
}

#[test]
fn raise_validates_its_arguments() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    let dev = caller("dev", "r1");
    let mut blocking = raise("repo.merge", None);
    blocking.fields.blocking = true;
    f.refuse(&dev, raising(1, blocking), Refusal::TaskRefRequired);
    f.refuse(
        &dev,
        raising(1, raise("repo.push", None)),
        Refusal::ChoiceRequired,
    );
    let mut choice = raise("repo.merge", None);
    choice.choice = Some(key("yes"));
    f.refuse(&dev, raising(1, choice), Refusal::BadRequest);
    let mut approval = raise("repo.merge", None);
    approval.approval_choice = Some(key("maybe"));
    f.refuse(&dev, raising(1, approval), Refusal::UnknownOption);
    let mut empty = raise("repo.merge", None);
    empty.fields.options.clear();
    f.refuse(&dev, raising(1, empty), Refusal::BadRequest);
    f.refuse(
        &dev,
        raising(1, raise("role.revoke", Some("nobody"))),
        Refusal::UnknownRole,
    );
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.refuse(
        &dev,
        raising(1, raise("repo.merge", None)),
        Refusal::BadRequest,
    );
}

#[test]
fn supersede_closes_the_old_decision_in_the_same_transaction() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    let mut newer = raise("repo.merge", None);
    newer.fields.supersedes = Some(did(1));
    let (_, evidence) = f.run(&caller("dev", "r1"), raising(2, newer.clone()));
    assert_eq!(evidence.len(), 2);
    assert_eq!(
        evidence[1],
        Evidence::Decision(DecisionEvidence::Superseded {
            business: acme(),
            id: did(1),
            by: did(2)
        })
    );
    assert_eq!(
        f.bus.decisions().get(&did(1)).unwrap().status,
        Status::Superseded(did(2))
    );
    f.refuse(
        &caller("dev", "r1"),
        raising(3, newer.clone()),
        Refusal::DecisionClosed,
    );
    let mut other = raise("repo.merge", None);
    other.fields.supersedes = Some(did(2));
    f.refuse(&caller("lead", "l1"), raising(4, other), Refusal::NotRaiser);
}

#[test]
fn resolution_needs_the_routed_resolver_an_open_decision_and_a_real_option() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.claim("ops", "o1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.refuse(
        &caller("ops", "o1"),
        resolve(1, "yes"),
        Refusal::NotResolver,
    );
    f.refuse(
        &caller("dev", "r1"),
        resolve(1, "yes"),
        Refusal::NotResolver,
    );
    f.refuse(
        &caller("lead", "l1"),
        resolve(1, "maybe"),
        Refusal::UnknownOption,
    );
    let resolved = Evidence::Decision(DecisionEvidence::Resolved {
        business: acme(),
        id: did(1),
        choice: key("yes"),
        by: DecisionActor::Agent(agent("lead", "l1")),
        note: None,
    });
    let (reply, evidence) = f.run(&caller("lead", "l1"), resolve(1, "yes"));
    assert!(matches!(reply, Ok(Reply::Decision(d)) if d.status == Status::Resolved(key("yes"))));
    assert_eq!(evidence, [resolved]);
    f.refuse(
        &caller("lead", "l1"),
        resolve(1, "no"),
        Refusal::DecisionClosed,
    );
    f.refuse(
        &caller("lead", "l1"),
        resolve(77, "no"),
        Refusal::UnknownReference,
    );
}

#[test]
fn gated_decisions_are_resolved_by_the_human_only_with_human_input_first() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.delete", None));
    f.refuse(
        &caller("lead", "l1"),
        resolve(1, "yes"),
        Refusal::NotResolver,
    );
    let (reply, evidence) = f.run(&human(5), resolve(1, "yes"));
    assert!(reply.is_ok());
    assert_eq!(
        evidence[0],
        Evidence::Human(HumanInput {
            id: EventId::from_random([5; 16]),
            business: acme(),
            verb: "decision.resolve".into(),
            subject: Some(Subject::Decision(did(1))),
        })
    );
    assert_eq!(evidence.len(), 2);
}

#[test]
fn seen_and_withdraw_belong_to_resolver_and_raiser() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.refuse(
        &caller("dev", "r1"),
        Command::Seen {
            id: did(1),
            note: None,
        },
        Refusal::NotResolver,
    );
    f.ok(
        &caller("lead", "l1"),
        Command::Seen {
            id: did(1),
            note: Some("looking".into()),
        },
    );
    assert_eq!(
        f.bus.decisions().get(&did(1)).unwrap().status,
        Status::Open,
        "seen is not a resolution"
    );
    f.refuse(
        &caller("lead", "l1"),
        Command::Withdraw {
            id: did(1),
            note: None,
        },
        Refusal::NotRaiser,
    );
    f.ok(
        &caller("dev", "r1"),
        Command::Withdraw {
            id: did(1),
            note: None,
        },
    );
    f.refuse(
        &caller("dev", "r1"),
        Command::Withdraw {
            id: did(1),
            note: None,
        },
        Refusal::DecisionClosed,
    );
    f.refuse(
        &caller("lead", "l1"),
        resolve(1, "yes"),
        Refusal::DecisionClosed,
    );
}

#[test]
fn an_approval_is_spent_once_and_only_for_its_exact_action_target_and_run() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.claim("ops", "o1");
    f.raise("dev", "r1", 1, raise("repo.merge", Some("main")));
    let auth = |decision, target: &str, action: &str| Command::Authorize {
        action: act(action),
        target: Some(Target::parse(target).unwrap()),
        decision: Some(decision),
    };
    f.refuse(
        &caller("dev", "r1"),
        auth(did(1), "main", "repo.merge"),
        Refusal::DecisionOpen,
    );
    f.ok(&caller("lead", "l1"), resolve(1, "yes"));
    f.refuse(
        &caller("dev", "r1"),
        auth(did(1), "dev", "repo.merge"),
        Refusal::NotAuthorized,
    );
    f.refuse(
        &caller("dev", "r1"),
        auth(did(1), "main", "repo.push"),
        Refusal::NotAuthorized,
    );
    f.refuse(
        &caller("ops", "o1"),
        auth(did(1), "main", "repo.merge"),
        Refusal::NotAuthorized,
    );
    f.refuse(
        &caller("dev", "r1"),
        auth(did(9), "main", "repo.merge"),
        Refusal::UnknownReference,
    );
    f.ok(&caller("dev", "r1"), Command::Release);
    f.claim("dev", "r2");
    f.refuse(
        &caller("dev", "r2"),
        auth(did(1), "main", "repo.merge"),
        Refusal::NotAuthorized,
    );
    f.ok(&caller("dev", "r2"), Command::Release);
    f.claim("dev", "r1");
    let reply = f.ok(&caller("dev", "r1"), auth(did(1), "main", "repo.merge"));
    assert_eq!(reply, Reply::Authorized(Grant::Approval(did(1))));
    f.refuse(
        &caller("dev", "r1"),
        auth(did(1), "main", "repo.merge"),
        Refusal::DecisionConsumed,
    );
}

#[test]
fn an_approval_resolved_with_another_option_authorizes_nothing() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.ok(&caller("lead", "l1"), resolve(1, "no"));
    let ask = Command::Authorize {
        action: act("repo.merge"),
        target: None,
        decision: Some(did(1)),
    };
    f.refuse(&caller("dev", "r1"), ask, Refusal::NotAuthorized);
}

#[test]
fn class_drift_after_a_policy_change_refuses_with_decision_mismatch() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.ok(&caller("lead", "l1"), resolve(1, "yes"));
    // Restart with a policy that makes repo.merge gated for dev.
    let mut bus = Bus::new(
        [business(&["message.send"], &[])],
        f.committed.last().map(|s| s.at),
    );
    for s in &f.committed {
        bus.replay(s);
    }
    f.bus = bus;
    let ask = Command::Authorize {
        action: act("repo.merge"),
        target: None,
        decision: Some(did(1)),
    };
    f.refuse(&caller("dev", "r1"), ask, Refusal::DecisionMismatch);
}

#[test]
fn the_technical_domain_routes_to_the_technical_arbiter() {
    let mut f = Fixture::new();
    f.bus = Bus::new(
        [business_with_technical(
            &["message.send"],
            &["repo.merge"],
            "ops",
        )],
        None,
    );
    f.claim("dev", "r1");
    f.claim("ops", "o1");
    let mut technical = raise("repo.merge", None);
    technical.fields.technical = true;
    assert_eq!(
        f.raise("dev", "r1", 1, technical).record.route,
        Route::Role(role("ops"))
    );
    assert_eq!(
        f.raise("dev", "r1", 2, raise("repo.merge", None))
            .record
            .route,
        Route::Role(role("lead"))
    );
    f.claim("lead", "l1");
    let mut lead_technical = raise("repo.merge", None);
    lead_technical.fields.technical = true;
    assert_eq!(
        f.raise("lead", "l1", 3, lead_technical).record.route,
        Route::Role(role("ops"))
    );
    let lead_delivery = f.raise("lead", "l1", 4, raise("repo.merge", None));
    assert_eq!(
        lead_delivery.record.route,
        Route::Human,
        "the delivery arbiter raising goes to the human"
    );
}
