//! Messages: sends, their approvals and references, delivery and
//! acknowledgement, and who may act as the human.

use super::*;

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
