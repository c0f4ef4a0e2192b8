//! Claims, releases and revokes.

use super::*;

#[test]
fn claim_records_once_and_a_second_claim_of_the_same_run_records_nothing() {
    let mut f = Fixture::new();
    let claimed = Evidence::Claim(ClaimEvidence::Claimed {
        business: acme(),
        agent: agent("dev", "r1"),
    });
    f.expect(
        &caller("dev", "r1"),
        Command::Claim,
        Ok(Reply::Claimed(ClaimReply::Claimed)),
        &[claimed],
    );
    f.expect(
        &caller("dev", "r1"),
        Command::Claim,
        Ok(Reply::Claimed(ClaimReply::AlreadyHeld)),
        &[],
    );
    f.refuse(&caller("dev", "r2"), Command::Claim, Refusal::RoleHeld);
}

#[test]
fn only_the_holder_releases_and_acts() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.refuse(&caller("dev", "r2"), Command::Release, Refusal::NotHolder);
    f.refuse(
        &caller("dev", "r2"),
        send(1, "lead", None),
        Refusal::NotHolder,
    );
    let released = Evidence::Claim(ClaimEvidence::Released {
        business: acme(),
        agent: agent("dev", "r1"),
    });
    f.expect(
        &caller("dev", "r1"),
        Command::Release,
        Ok(Reply::Done),
        &[released],
    );
    f.claim("dev", "r2");
}

#[test]
fn a_revoked_run_never_reclaims_also_after_a_rebuild() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    let d = f.raise("lead", "l1", 1, raise("role.revoke", Some("dev")));
    assert_eq!(
        (d.record.route.clone(), d.record.holder.clone()),
        (Route::Human, Some(RunId::parse("r1").unwrap()))
    );
    f.ok(&human(9), resolve(1, "yes"));
    let revoke = Command::Revoke {
        role: role("dev"),
        decision: did(1),
    };
    f.expect(
        &caller("lead", "l1"),
        revoke.clone(),
        Ok(Reply::Done),
        &[
            Evidence::Consumed(Consumption {
                business: acme(),
                decision: did(1),
                agent: agent("lead", "l1"),
                action: act("role.revoke"),
                target: Some(Target::parse("dev").unwrap()),
            }),
            Evidence::Allowed(ActionAllowed {
                business: acme(),
                agent: agent("lead", "l1"),
                action: act("role.revoke"),
                target: Some(Target::parse("dev").unwrap()),
                decision: Some(did(1)),
                subject: Some(Subject::Role(role("dev"))),
            }),
            Evidence::Claim(ClaimEvidence::Revoked {
                business: acme(),
                agent: agent("dev", "r1"),
                decision: did(1),
            }),
            // The revoke also ends the run, so whoever runs it stops it.
            Evidence::Claim(ClaimEvidence::Ended(RunEnd {
                business: acme(),
                agent: agent("dev", "r1"),
                ending: Ending::of_cause(EndCause::Revoked),
                vacated: false,
            })),
        ],
    );
    f.refuse(&caller("dev", "r1"), Command::Claim, Refusal::RunRevoked);
    f.refuse(
        &caller("dev", "r1"),
        send(2, "lead", None),
        Refusal::RunRevoked,
    );
    f.refuse(&caller("lead", "l1"), revoke, Refusal::DecisionConsumed);

    let mut rebuilt = Bus::new([standard()], f.committed.last().map(|s| s.at));
    for s in &f.committed {
        rebuilt.replay(s);
    }
    f.bus = rebuilt;
    f.refuse(&caller("dev", "r1"), Command::Claim, Refusal::RunRevoked);
    f.refuse(
        &caller("lead", "l1"),
        Command::Revoke {
            role: role("dev"),
            decision: did(1),
        },
        Refusal::DecisionConsumed,
    );
    f.claim("dev", "r2");
}

#[test]
fn a_revoke_after_the_holder_changed_refuses() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("lead", "l1", 1, raise("role.revoke", Some("dev")));
    f.ok(&human(9), resolve(1, "yes"));
    f.ok(&caller("dev", "r1"), Command::Release);
    f.claim("dev", "r2");
    f.refuse(
        &caller("lead", "l1"),
        Command::Revoke {
            role: role("dev"),
            decision: did(1),
        },
        Refusal::HolderChanged,
    );
    assert!(
        !f.bus.authorizations().is_consumed(&did(1)),
        "a refused revoke spends nothing"
    );
}
