//! The bus's verbs, one rule per test, with exact replies and exact evidence.

use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{BodyField, Bus, Caller, Command, EventBody, Reply, SendInput};
use mosaic_domain::business::{AuthoritySpec, RoleSpec};
use mosaic_domain::claims::{BindReply, ClaimReply};
use mosaic_domain::decisions::{RaiseInput, Status};
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, Evidence, Harness, HumanInput, LaunchEvidence, LaunchRecord, MessageEvidence,
    MessageRecord, OptionKey, RaiseFields, Recipient, Route, Sender, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
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
fn agent(r: &str, run: &str) -> AgentRef {
    AgentRef {
        role: role(r),
        run: RunId::parse(run).unwrap(),
    }
}
fn caller(r: &str, run: &str) -> Caller {
    Caller::Agent {
        business: acme(),
        agent: agent(r, run),
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
fn key(s: &str) -> OptionKey {
    OptionKey::parse(s).unwrap()
}

/// acme: `lead` (delivery and technical arbiter, launches), `dev` (sends
/// messages within role, merges cross-role), `ops` (nothing).
fn business(dev_within: &[&str], dev_cross: &[&str]) -> Business {
    business_with_technical(dev_within, dev_cross, "lead")
}

fn business_with_technical(dev_within: &[&str], dev_cross: &[&str], technical: &str) -> Business {
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
        technical_arbiter: role(technical),
        delivery_arbiter: role("lead"),
        roles: [
            (role("lead"), spec(&["message.send"], &["repo.merge"])),
            (role("dev"), spec(dev_within, dev_cross)),
            (role("ops"), spec(&[], &[])),
        ]
        .into_iter()
        .collect(),
        launch_by: vec![role("lead")],
    })
    .unwrap()
}

fn standard() -> Business {
    business(&["message.send", "repo.push"], &["repo.merge"])
}

/// A bus whose every verb commits at once, with a clock the test moves.
struct Fixture {
    bus: Bus,
    now: i64,
    committed: Vec<Stamped>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            bus: Bus::new([standard()], None),
            now: 1_000,
            committed: Vec::new(),
        }
    }

    /// Runs `command` and, when accepted, commits its evidence and returns it.
    fn run(
        &mut self,
        caller: &Caller,
        command: Command,
    ) -> (Result<Reply, Refusal>, Vec<Evidence>) {
        self.now += 10;
        let reply = self.bus.handle(t(self.now), caller, command);
        let mut evidence = Vec::new();
        while let Some(s) = self.bus.poll_effect() {
            evidence.push(s.evidence.clone());
            self.committed.push(s);
        }
        self.bus.handle_committed();
        (reply, evidence)
    }

    /// Asserts the exact reply and the exact evidence of one verb.
    #[track_caller]
    fn expect(
        &mut self,
        caller: &Caller,
        command: Command,
        reply: Result<Reply, Refusal>,
        evidence: &[Evidence],
    ) {
        let (got, got_evidence) = self.run(caller, command);
        assert_eq!(got, reply, "reply");
        assert_eq!(got_evidence, evidence, "evidence");
    }

    #[track_caller]
    fn refuse(&mut self, caller: &Caller, command: Command, refusal: Refusal) {
        self.expect(caller, command, Err(refusal), &[]);
    }

    #[track_caller]
    fn ok(&mut self, caller: &Caller, command: Command) -> Reply {
        let (reply, _) = self.run(caller, command);
        reply.unwrap()
    }

    fn claim(&mut self, r: &str, run: &str) {
        self.ok(&caller(r, run), Command::Claim);
    }

    /// Raises decision `did(id)` as `r/run` and returns it.
    #[track_caller]
    fn raise(
        &mut self,
        r: &str,
        run: &str,
        id: u8,
        input: RaiseInput,
    ) -> mosaic_domain::decisions::Decision {
        let reply = self.ok(&caller(r, run), raising(id, input));
        let Reply::Decision(d) = reply else {
            panic!("not a decision: {reply:?}")
        };
        *d
    }
}

/// `decision.raise` of `input` as decision `did(id)`.
fn raising(id: u8, input: RaiseInput) -> Command {
    Command::Raise {
        id: did(id),
        input: Box::new(input),
    }
}

fn raise(action: &str, target: Option<&str>) -> RaiseInput {
    RaiseInput {
        fields: RaiseFields {
            action: act(action),
            target: target.map(|s| Target::parse(s).unwrap()),
            question: "May I?".into(),
            options: vec![
                DecisionOption {
                    key: key("yes"),
                    text: "Yes".into(),
                },
                DecisionOption {
                    key: key("no"),
                    text: "No".into(),
                },
            ],
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
    }
}

fn resolve(id: u8, choice: &str) -> Command {
    Command::Resolve {
        id: did(id),
        choice: key(choice),
        note: None,
    }
}

fn send(n: u8, to: &str, decision: Option<DecisionId>) -> Command {
    Command::Send {
        id: MessageId::from_random([n; 16]),
        input: Box::new(SendInput {
            to: if to == "human" {
                Recipient::Human
            } else {
                Recipient::Role(role(to))
            },
            class: None,
            body: "hello".into(),
            in_reply_to: None,
            corrects: None,
            decision,
        }),
        known: Vec::new(),
    }
}

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
        ],
    );
    f.refuse(&caller("dev", "r1"), Command::Claim, Refusal::RunRevoked);
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
fn a_within_role_send_cites_its_decision_and_spends_nothing() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    let (reply, evidence) = f.run(&caller("dev", "r1"), send(1, "lead", Some(did(1))));
    let id = MessageId::from_random([1; 16]);
    assert_eq!(reply, Ok(Reply::Sent { id, request: None }));
    assert_eq!(
        evidence,
        [
            Evidence::Allowed(ActionAllowed {
                business: acme(),
                agent: agent("dev", "r1"),
                action: act("message.send"),
                target: Some(Target::parse("lead").unwrap()),
                decision: None,
                subject: Some(Subject::Role(role("lead"))),
            }),
            Evidence::Message(MessageEvidence::Sent(Box::new(MessageRecord {
                id,
                business: acme(),
                from: Sender::Agent(agent("dev", "r1")),
                to: Recipient::Role(role("lead")),
                class: None,
                body: "hello".into(),
                in_reply_to: None,
                corrects: None,
                decision: Some(did(1)),
                request: None,
            }))),
        ]
    );
    f.ok(&caller("dev", "r1"), send(2, "lead", Some(did(1))));
    assert!(!f.bus.authorizations().is_consumed(&did(1)));
    f.refuse(
        &caller("dev", "r1"),
        send(3, "lead", Some(did(99))),
        Refusal::UnknownReference,
    );
}

#[test]
fn a_send_outside_the_role_needs_a_matching_approval_and_spends_it() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    f.claim("lead", "l1");
    f.refuse(
        &caller("ops", "o1"),
        send(1, "lead", None),
        Refusal::NotAuthorized,
    );
    f.raise("ops", "o1", 1, raise("message.send", Some("lead")));
    f.ok(&human(3), resolve(1, "yes"));
    f.refuse(
        &caller("ops", "o1"),
        send(1, "dev", Some(did(1))),
        Refusal::NotAuthorized,
    );
    let (reply, evidence) = f.run(&caller("ops", "o1"), send(1, "lead", Some(did(1))));
    assert!(reply.is_ok());
    assert!(matches!(&evidence[0], Evidence::Consumed(c) if c.decision == did(1)));
    f.refuse(
        &caller("ops", "o1"),
        send(2, "lead", Some(did(1))),
        Refusal::DecisionConsumed,
    );
}

#[test]
fn a_human_instruction_carries_its_human_input_as_request() {
    let mut f = Fixture::new();
    let (reply, evidence) = f.run(&human(4), send(1, "dev", None));
    let input = EventId::from_random([4; 16]);
    assert_eq!(
        reply,
        Ok(Reply::Sent {
            id: MessageId::from_random([1; 16]),
            request: Some(input)
        })
    );
    assert!(
        matches!(&evidence[1], Evidence::Message(MessageEvidence::Sent(m)) if m.from == Sender::Human && m.request == Some(input))
    );
}

#[test]
fn delivery_and_acknowledgement_belong_to_the_receiving_run() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.ok(&caller("lead", "l1"), send(1, "dev", None));
    let last = &f.committed.last().unwrap().evidence;
    let Evidence::Message(MessageEvidence::Sent(m)) = last else {
        panic!("{last:?}")
    };
    let record = (**m).clone();
    let fresh = MessageFacts {
        record: record.clone(),
        delivered_to: None,
        read: false,
    };
    f.refuse(
        &caller("lead", "l1"),
        Command::Receive {
            batch: vec![fresh.clone()],
        },
        Refusal::BadRequest,
    );
    let delivered = Evidence::Message(MessageEvidence::Delivered {
        business: acme(),
        message: record.id,
        run: RunId::parse("r1").unwrap(),
    });
    f.expect(
        &caller("dev", "r1"),
        Command::Receive { batch: vec![fresh] },
        Ok(Reply::Received(vec![record.clone()])),
        &[delivered],
    );
    let to_r1 = MessageFacts {
        record: record.clone(),
        delivered_to: Some(RunId::parse("r1").unwrap()),
        read: false,
    };
    f.ok(&caller("dev", "r1"), Command::Release);
    f.claim("dev", "r2");
    let read = |facts: &MessageFacts| Command::Read {
        id: record.id,
        known: Some(facts.clone()),
    };
    f.refuse(&caller("dev", "r2"), read(&to_r1), Refusal::NotDelivered);
    f.refuse(&caller("dev", "r1"), read(&to_r1), Refusal::NotHolder);
    f.refuse(
        &caller("dev", "r2"),
        Command::Read {
            id: record.id,
            known: None,
        },
        Refusal::UnknownReference,
    );
}

#[test]
fn readers_and_agents_cannot_act_as_the_human() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    let reader = Caller::Reader { business: acme() };
    f.refuse(
        &caller("dev", "r1"),
        Command::LaunchRevoke,
        Refusal::HumanOnly,
    );
    f.refuse(&reader, Command::LaunchRestore, Refusal::HumanOnly);
    f.refuse(&reader, Command::Claim, Refusal::NotAuthorized);
    f.refuse(&reader, send(1, "dev", None), Refusal::NotAuthorized);
    f.refuse(&reader, resolve(1, "yes"), Refusal::NotAuthorized);
    f.refuse(&human(1), Command::Claim, Refusal::NotAuthorized);
    let other = Caller::Agent {
        business: BusinessId::parse("globex").unwrap(),
        agent: agent("dev", "r1"),
    };
    f.refuse(&other, Command::Claim, Refusal::BadCapability);
}

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

/// `record_event` of `kind` under `subject`, with `request` for `task.created`.
fn record(kind: &str, subject: Option<Subject>, request: Option<EventId>) -> Command {
    Command::RecordEvent {
        kind: act(kind),
        body: "{}".into(),
        subject,
        request,
    }
}

fn observed(kind: &str, subject: Option<Subject>, request: Option<EventId>) -> Evidence {
    Evidence::Observed(mosaic_domain::evidence::Observation {
        business: acme(),
        agent: agent("ops", "o1"),
        kind: kind.into(),
        body: "{}".into(),
        subject,
        request,
    })
}

#[test]
fn record_event_refuses_the_kinds_only_the_broker_or_the_human_produce() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    for kind in [
        "action.allowed",
        "human.input",
        "launch.revoked",
        "session.launched",
        "role.claimed",
        "decision.raised",
        "message.sent",
        "browser.completed",
    ] {
        f.refuse(&ops, record(kind, None, None), Refusal::NotAuthorized);
    }
    // Only the exact `action.allowed` kind is the bus's: other `action.`
    // kinds are an adapter's to record.
    f.expect(
        &ops,
        record("action.reviewed", None, None),
        Ok(Reply::Done),
        &[observed("action.reviewed", None, None)],
    );
}

#[test]
fn task_events_are_filed_under_their_task_and_only_a_created_task_names_its_request() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    let task = Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap()));
    let input = Some(EventId::from_random([7; 16]));
    f.refuse(
        &ops,
        record("task.updated", None, None),
        Refusal::BadRequest,
    );
    f.refuse(
        &ops,
        record("task.updated", Some(Subject::Role(role("dev"))), None),
        Refusal::BadRequest,
    );
    f.refuse(
        &ops,
        record("task.updated", task.clone(), input),
        Refusal::BadRequest,
    );
    f.refuse(
        &ops,
        record("task.created", task.clone(), None),
        Refusal::BadRequest,
    );
    f.refuse(&ops, record("ci.passed", None, input), Refusal::BadRequest);
    f.expect(
        &ops,
        record("task.updated", task.clone(), None),
        Ok(Reply::Done),
        &[observed("task.updated", task.clone(), None)],
    );
    f.expect(
        &ops,
        record("task.created", task.clone(), input),
        Ok(Reply::Done),
        &[observed("task.created", task.clone(), input)],
    );
    f.expect(
        &ops,
        record("ci.passed", task.clone(), None),
        Ok(Reply::Done),
        &[observed("ci.passed", task, None)],
    );
}

#[test]
fn an_event_is_filed_only_under_a_role_or_decision_of_its_business() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    let nobody = Some(Subject::Role(role("nobody")));
    let unknown = Some(Subject::Decision(did(9)));
    let routine = |subject: Option<Subject>| Command::EmitRoutine {
        target: None,
        subject,
    };
    f.refuse(&ops, routine(nobody.clone()), Refusal::UnknownRole);
    f.refuse(&ops, routine(unknown.clone()), Refusal::UnknownReference);
    f.refuse(
        &ops,
        record("ci.passed", nobody, None),
        Refusal::UnknownRole,
    );
    f.refuse(
        &ops,
        record("ci.passed", unknown, None),
        Refusal::UnknownReference,
    );
    let lead = Some(Subject::Role(role("lead")));
    f.expect(
        &ops,
        routine(lead.clone()),
        Ok(Reply::Done),
        &[Evidence::Allowed(ActionAllowed {
            business: acme(),
            agent: agent("ops", "o1"),
            action: act("routine"),
            target: None,
            decision: None,
            subject: lead.clone(),
        })],
    );
    f.raise("ops", "o1", 1, raise("repo.merge", None));
    let decision = Some(Subject::Decision(did(1)));
    f.expect(
        &ops,
        record("ci.passed", decision.clone(), None),
        Ok(Reply::Done),
        &[observed("ci.passed", decision, None)],
    );
}

/// A message of `business` as the store has it, for `known`.
fn stored(n: u8, business: &str) -> MessageFacts {
    MessageFacts {
        record: MessageRecord {
            id: MessageId::from_random([n; 16]),
            business: BusinessId::parse(business).unwrap(),
            from: Sender::Human,
            to: Recipient::Role(role("dev")),
            class: None,
            body: "earlier".into(),
            in_reply_to: None,
            corrects: None,
            decision: None,
            request: None,
        },
        delivered_to: None,
        read: false,
    }
}

#[test]
fn a_reply_or_correction_references_a_known_message_of_the_same_business() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    let dev = caller("dev", "r1");
    let referencing = |in_reply_to: Option<u8>, corrects: Option<u8>, known: Vec<MessageFacts>| {
        let Command::Send { id, mut input, .. } = send(10, "lead", None) else {
            unreachable!()
        };
        input.in_reply_to = in_reply_to.map(|n| MessageId::from_random([n; 16]));
        input.corrects = corrects.map(|n| MessageId::from_random([n; 16]));
        Command::Send { id, input, known }
    };
    f.refuse(
        &dev,
        referencing(Some(1), None, vec![stored(1, "globex")]),
        Refusal::CrossBusiness,
    );
    f.refuse(
        &dev,
        referencing(None, Some(2), vec![stored(1, "acme"), stored(2, "globex")]),
        Refusal::CrossBusiness,
    );
    f.refuse(
        &dev,
        referencing(Some(1), Some(2), vec![stored(1, "acme")]),
        Refusal::UnknownReference,
    );
    let (reply, evidence) = f.run(
        &dev,
        referencing(Some(1), Some(2), vec![stored(1, "acme"), stored(2, "acme")]),
    );
    assert_eq!(
        reply,
        Ok(Reply::Sent {
            id: MessageId::from_random([10; 16]),
            request: None
        })
    );
    let Some(Evidence::Message(MessageEvidence::Sent(m))) = evidence.last() else {
        panic!("{evidence:?}")
    };
    assert_eq!(
        (m.in_reply_to, m.corrects),
        (
            Some(MessageId::from_random([1; 16])),
            Some(MessageId::from_random([2; 16]))
        )
    );
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

#[test]
fn a_message_send_decision_targets_a_role_of_the_business_or_the_human() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    f.refuse(
        &ops,
        raising(1, raise("message.send", Some("nobody"))),
        Refusal::UnknownRole,
    );
    f.refuse(
        &ops,
        raising(1, raise("message.send", None)),
        Refusal::UnknownRole,
    );
    let to_human = f.raise("ops", "o1", 1, raise("message.send", Some("human")));
    assert_eq!(
        to_human.record.fields.target,
        Some(Target::parse("human").unwrap())
    );
    assert_eq!(to_human.record.holder, None);
    let to_lead = f.raise("ops", "o1", 2, raise("message.send", Some("lead")));
    assert_eq!(to_lead.record.route, Route::Human);
    // Other actions name any target they like.
    f.raise("ops", "o1", 3, raise("repo.merge", Some("nobody")));
}

#[test]
fn a_command_names_its_verb_and_the_messages_the_runtime_must_read_for_it() {
    let mut reply = send(1, "lead", None);
    if let Command::Send { input, .. } = &mut reply {
        input.in_reply_to = Some(MessageId::from_random([2; 16]));
        input.corrects = Some(MessageId::from_random([3; 16]));
    }
    assert_eq!(
        reply.references(),
        [
            MessageId::from_random([2; 16]),
            MessageId::from_random([3; 16])
        ]
    );
    assert_eq!(send(1, "lead", None).references(), []);
    let read = Command::Read {
        id: MessageId::from_random([4; 16]),
        known: None,
    };
    assert_eq!(read.references(), [MessageId::from_random([4; 16])]);
    assert_eq!(Command::Claim.references(), []);
    for (command, verb) in [
        (Command::Claim, "role.claim"),
        (Command::Release, "role.release"),
        (send(1, "lead", None), "message.send"),
        (read, "message.read"),
        (resolve(1, "yes"), "decision.resolve"),
        (Command::LaunchRevoke, "launch.revoke"),
        (
            Command::Authorize {
                action: act("repo.merge"),
                target: None,
                decision: None,
            },
            "authorize",
        ),
    ] {
        assert_eq!(command.verb(), verb);
    }
    assert_eq!(caller("dev", "r1").kind(), CallerKind::Agent);
    assert_eq!(human(1).kind(), CallerKind::Human);
    assert_eq!(
        Caller::Reader { business: acme() }.kind(),
        CallerKind::Reader
    );
}

#[test]
fn a_refusal_is_recorded_with_its_caller_and_verb_at_the_next_write_time() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    let last = f.committed.last().unwrap().at;
    f.bus.handle_refused(
        t(0),
        Some(&caller("dev", "r1")),
        Some("role.claim"),
        Refusal::RoleHeld,
    );
    f.bus
        .handle_refused(t(0), Some(&human(1)), None, Refusal::NotAuthorized);
    f.bus
        .handle_refused(t(0), None, None, Refusal::BadCapability);
    let records: Vec<Stamped> = std::iter::from_fn(|| f.bus.poll_effect()).collect();
    let refused = |business: Option<BusinessId>, agent, verb: Option<&str>, refusal| {
        Evidence::Refused(mosaic_domain::evidence::RefusalRecord {
            business,
            agent,
            verb: verb.map(str::to_owned),
            refusal,
        })
    };
    assert_eq!(
        records
            .iter()
            .map(|s| s.evidence.clone())
            .collect::<Vec<_>>(),
        [
            refused(
                Some(acme()),
                Some(agent("dev", "r1")),
                Some("role.claim"),
                Refusal::RoleHeld
            ),
            refused(Some(acme()), None, None, Refusal::NotAuthorized),
            refused(None, None, None, Refusal::BadCapability),
        ]
    );
    let times: Vec<Timestamp> = records.iter().map(|s| s.at).collect();
    assert_eq!(
        times,
        [1, 2, 3].map(|n| Timestamp::from_unix_ms(last.unix_ms() + n).unwrap())
    );
    assert_eq!(f.bus.business(&acme()).map(|b| b.id()), Some(&acme()));
    assert!(f
        .bus
        .business(&BusinessId::parse("globex").unwrap())
        .is_none());
}

/// A bus where each verb has something to act on, for the caller test:
/// dev/r1, lead/l1 and ops/o1 hold their roles; decision 1 (dev's merge)
/// is routed to lead; decision 2 (lead's merge) to the human; decision 3
/// (revoking ops) is approved by the human.
fn callers_fixture() -> Fixture {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.claim("ops", "o1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.raise("lead", "l1", 2, raise("repo.merge", None));
    f.raise("lead", "l1", 3, raise("role.revoke", Some("ops")));
    f.ok(&human(3), resolve(3, "yes"));
    f
}

/// The commands that serve `verb`, from a caller of `kind`, each valid in
/// [`callers_fixture`]: a caller the table lists can only be refused by
/// the bus disagreeing with the table. Reads never reach the bus.
fn serving(verb: Verb, kind: CallerKind) -> Vec<(Caller, Command)> {
    let dev = caller("dev", "r1");
    let by = match kind {
        CallerKind::Agent => dev.clone(),
        CallerKind::Reader => Caller::Reader { business: acme() },
        CallerKind::Human => human(50),
    };
    // An agent resolves as lead and withdraws as dev, the raiser, the
    // decision routed to lead; the others act on the human's. An agent
    // writes to another role, the others to dev.
    let (decision, to) = match kind {
        CallerKind::Agent => (1, "lead"),
        CallerKind::Reader | CallerKind::Human => (2, "dev"),
    };
    let as_lead = |command| match kind {
        CallerKind::Agent => vec![(caller("lead", "l1"), command)],
        CallerKind::Reader | CallerKind::Human => vec![(by.clone(), command)],
    };
    let note = None;
    let command = match verb {
        Verb::RoleClaim => Command::Claim,
        Verb::RoleRelease => Command::Release,
        Verb::RoleRevoke => {
            return as_lead(Command::Revoke {
                role: role("ops"),
                decision: did(3),
            })
        }
        Verb::DecisionRaise => raising(9, raise("repo.merge", None)),
        Verb::DecisionResolve => return as_lead(resolve(decision, "yes")),
        Verb::DecisionSeen => {
            return as_lead(Command::Seen {
                id: did(decision),
                note,
            })
        }
        Verb::DecisionWithdraw => Command::Withdraw {
            id: did(decision),
            note,
        },
        Verb::MessageSend => send(5, to, None),
        Verb::MessageReceive => Command::Receive { batch: Vec::new() },
        // An agent reads what was delivered to it; the others a message to
        // the human.
        Verb::MessageRead => {
            let mut facts = stored(6, "acme");
            match kind {
                CallerKind::Agent => facts.delivered_to = Some(RunId::parse("r1").unwrap()),
                CallerKind::Reader | CallerKind::Human => facts.record.to = Recipient::Human,
            }
            Command::Read {
                id: facts.record.id,
                known: Some(facts),
            }
        }
        Verb::EventEmit => Command::EmitRoutine {
            target: None,
            subject: None,
        },
        Verb::LaunchRevoke => Command::LaunchRevoke,
        Verb::LaunchRestore => Command::LaunchRestore,
        Verb::BrowserRequest => Command::RecordBrowserOutcome { body: "{}".into() },
        Verb::Inbox | Verb::Tasks | Verb::Agents | Verb::Trail | Verb::Head | Verb::Changes => {
            return Vec::new()
        }
    };
    vec![(by, command)]
}

/// What a caller of `kind` gets from a bus that agrees with `callers`.
#[track_caller]
fn assert_agrees(callers: &[CallerKind], kind: CallerKind, got: Result<(), Refusal>, what: &str) {
    if callers.contains(&kind) {
        assert_eq!(
            got,
            Ok(()),
            "{what} from {kind:?}: the table lists the caller"
        );
    } else if callers == [CallerKind::Human] {
        assert_eq!(got, Err(Refusal::HumanOnly), "{what} from {kind:?}");
    } else {
        assert_eq!(got, Err(Refusal::NotAuthorized), "{what} from {kind:?}");
    }
}

#[test]
fn the_bus_and_the_change_feed_serve_exactly_the_callers_the_verb_table_lists() {
    for &verb in Verb::ALL {
        for kind in CallerKind::ALL {
            let commands = serving(verb, kind);
            // A write is tested here, through the bus; a read never reaches
            // the bus and is tested against the same table where the runtime
            // admits it (app/tests/human/,
            // `every_read_answers_exactly_the_callers_the_verb_table_lists`).
            assert_eq!(commands.is_empty(), verb.is_read(), "{verb} is tested");
            for (caller, command) in commands {
                let got = callers_fixture().run(&caller, command).0;
                assert_agrees(verb.callers(), kind, got.map(|_| ()), verb.as_str());
            }
        }
    }
    let trusted = [
        Command::Authorize {
            action: act("repo.push"),
            target: None,
            decision: None,
        },
        record("review.noted", None, None),
    ];
    for command in trusted {
        for (kind, caller) in [
            (CallerKind::Agent, caller("dev", "r1")),
            (CallerKind::Reader, Caller::Reader { business: acme() }),
            (CallerKind::Human, human(50)),
        ] {
            let got = callers_fixture().run(&caller, command.clone()).0;
            let trusted = mosaic_domain::verb::TRUSTED_CALLERS;
            assert_agrees(trusted, kind, got.map(|_| ()), command.verb());
        }
    }
    for (kind, caller) in [
        (CallerKind::Agent, caller("dev", "r1")),
        (CallerKind::Reader, Caller::Reader { business: acme() }),
        (CallerKind::Human, human(50)),
    ] {
        let watcher = mosaic_domain::changes::Watcher::of(&caller, |_, _| true);
        assert_agrees(
            Verb::Changes.callers(),
            kind,
            watcher.map(|_| ()),
            "changes",
        );
    }
}

/// A `record_event` body with these fields, the text standing for them.
fn body<'a>(
    task_ref: BodyField<'a>,
    requirement: BodyField<'a>,
    request: BodyField<'a>,
) -> EventBody<'a> {
    EventBody {
        text: "{}".into(),
        task_ref,
        requirement,
        request,
    }
}

#[test]
fn a_task_ref_in_a_body_is_text_naming_the_task_the_event_is_filed_under() {
    use BodyField::{Absent, NotText, Text};
    let task = Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap()));
    let event = |task_ref, subject| {
        Command::record_event(act("task.updated"), body(task_ref, Absent, Absent), subject)
    };
    assert_eq!(
        event(Text("vikunja:3/41"), task.clone()),
        Ok(Command::RecordEvent {
            kind: act("task.updated"),
            body: "{}".into(),
            subject: task.clone(),
            request: None,
        })
    );
    assert_eq!(event(Absent, task.clone()).map(|_| ()), Ok(()));
    assert_eq!(event(NotText, task.clone()), Err(Refusal::BadRequest));
    assert_eq!(
        event(Text("vikunja:3/42"), task.clone()),
        Err(Refusal::BadRequest)
    );
    assert_eq!(event(Text("vikunja:3/41"), None), Err(Refusal::BadRequest));
    assert_eq!(
        event(Text("no task"), task),
        Err(TaskRef::parse("no task").unwrap_err())
    );
}

#[test]
fn a_created_task_names_a_requirement_and_the_human_input_that_asked_for_it() {
    use BodyField::{Absent, NotText, Text};
    let task = Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap()));
    let input = EventId::from_random([7; 16]).to_string();
    let created = |kind: &str, requirement, request| {
        Command::record_event(act(kind), body(Absent, requirement, request), task.clone())
    };
    assert_eq!(
        created("task.created", Text("R-1"), Text(&input)),
        Ok(Command::RecordEvent {
            kind: act("task.created"),
            body: "{}".into(),
            subject: task.clone(),
            request: Some(EventId::from_random([7; 16])),
        })
    );
    for requirement in [Absent, NotText, Text("")] {
        assert_eq!(
            created("task.created", requirement, Text(&input)),
            Err(Refusal::BadRequest),
            "{requirement:?}"
        );
    }
    for request in [Absent, NotText] {
        assert_eq!(
            created("task.created", Text("R-1"), request),
            Err(Refusal::BadRequest),
            "{request:?}"
        );
    }
    assert_eq!(
        created("task.created", Text("R-1"), Text("not an id")),
        Err(EventId::parse("not an id").unwrap_err())
    );
    // Other kinds name no request, whatever their body holds.
    assert_eq!(
        created("task.updated", Absent, Text(&input)),
        Ok(record("task.updated", task.clone(), None))
    );
}
