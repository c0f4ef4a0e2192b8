//! What the human's inbox rests on: the order decisions were raised in
//! (their ids are random, so "oldest first" needs it), and the human's own
//! acknowledgement of a message sent to the human.

use mosaic_domain::changes::Change;
use mosaic_domain::messages::acknowledge_human;

use super::*;

/// A message of `business` to `to` as the store has it (never delivered:
/// a message to the human never is).
fn to(n: u8, business: &str, to: Recipient) -> MessageFacts {
    let mut facts = stored(n, business);
    facts.record.to = to;
    facts
}

fn read(facts: MessageFacts) -> Command {
    Command::Read {
        id: facts.record.id,
        known: Some(facts),
    }
}

#[test]
fn decisions_are_numbered_in_raise_order_whatever_their_ids() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    // Ids that sort against the order they are raised in.
    for id in [9, 4, 7] {
        f.raise("dev", "r1", id, raise("repo.merge", None));
    }
    let order = |f: &Fixture, id| f.bus.decisions().raise_order(&did(id));
    assert_eq!(
        [order(&f, 9), order(&f, 4), order(&f, 7)],
        [Some(0), Some(1), Some(2)]
    );
    assert_eq!(order(&f, 1), None, "never raised");
    // Closing a decision keeps its place.
    f.ok(&caller("lead", "l1"), resolve(4, "yes"));
    assert_eq!(order(&f, 4), Some(1));
    // A raise the store did not commit gives its number back.
    let reply = f.bus.handle(
        t(5_000),
        &caller("dev", "r1"),
        raising(2, raise("repo.merge", None)),
    );
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(order(&f, 2), Some(3), "staged");
    f.bus.handle_rolled_back();
    assert_eq!(order(&f, 2), None);
    f.raise("dev", "r1", 3, raise("repo.merge", None));
    assert_eq!(order(&f, 3), Some(3));
    // A rebuild from the stored records numbers every decision the same.
    let mut rebuilt = Bus::new([standard()], None);
    for record in &f.committed {
        rebuilt.replay(record);
    }
    for id in [9, 4, 7, 3] {
        assert_eq!(
            rebuilt.decisions().raise_order(&did(id)),
            order(&f, id),
            "decision {id}"
        );
    }
}

#[test]
fn the_human_acknowledges_only_a_message_of_its_business_sent_to_the_human() {
    let acme = acme();
    assert_eq!(
        acknowledge_human(&acme, &to(1, "acme", Recipient::Human)),
        Ok(())
    );
    assert_eq!(
        acknowledge_human(&acme, &to(2, "acme", Recipient::Role(role("dev")))),
        Err(Refusal::NotHolder),
        "a message to a role is its holder's to acknowledge"
    );
    assert_eq!(
        acknowledge_human(&acme, &to(3, "globex", Recipient::Human)),
        Err(Refusal::CrossBusiness)
    );
    // Acknowledging twice is not an error.
    let mut again = to(4, "acme", Recipient::Human);
    again.read = true;
    assert_eq!(acknowledge_human(&acme, &again), Ok(()));
}

#[test]
fn the_human_s_message_read_is_recorded_as_its_human_input_only() {
    let mut f = Fixture::new();
    let message = to(1, "acme", Recipient::Human);
    let id = message.record.id;
    f.expect(
        &human(7),
        read(message),
        Ok(Reply::Done),
        &[Evidence::Human(HumanInput {
            id: EventId::from_random([7; 16]),
            business: acme(),
            verb: "message.read".into(),
            subject: Some(Subject::Message(id)),
        })],
    );
    f.refuse(
        &human(8),
        read(to(2, "acme", Recipient::Role(role("dev")))),
        Refusal::NotHolder,
    );
    f.refuse(
        &human(9),
        read(to(3, "globex", Recipient::Human)),
        Refusal::CrossBusiness,
    );
    // The store has no such message, or answered for another one.
    f.refuse(
        &human(10),
        Command::Read {
            id: MessageId::from_random([4; 16]),
            known: None,
        },
        Refusal::UnknownReference,
    );
    f.refuse(
        &human(11),
        Command::Read {
            id: MessageId::from_random([5; 16]),
            known: Some(to(6, "acme", Recipient::Human)),
        },
        Refusal::UnknownReference,
    );
}

#[test]
fn only_the_human_s_message_read_names_a_message_read() {
    let input = |verb: &str, subject| HumanInput {
        id: EventId::from_random([1; 16]),
        business: acme(),
        verb: verb.into(),
        subject,
    };
    let id = MessageId::from_random([2; 16]);
    let message = Some(Subject::Message(id));
    assert_eq!(
        input("message.read", message.clone()).read_message(),
        Some(id)
    );
    // The human's send is filed under the message it sent, which it did not
    // read.
    assert_eq!(input("message.send", message.clone()).read_message(), None);
    assert_eq!(
        input("message.read", Some(Subject::Decision(did(3)))).read_message(),
        None
    );
    assert_eq!(input("message.read", None).read_message(), None);
    assert_eq!(
        input("decision.resolve", Some(Subject::Decision(did(3)))).read_message(),
        None
    );
    // So only the read changes the human's inbox.
    let change = |verb: &str| Change::of(&Evidence::Human(input(verb, message.clone())), None);
    let read = change("message.read").expect("the human's inbox changed");
    assert_eq!((read.kind, read.message), ("human.input", Some(id)));
    assert_eq!(change("message.send"), None);
}

#[test]
fn a_send_by_the_human_records_its_input_under_the_new_message() {
    let mut f = Fixture::new();
    let (reply, evidence) = f.run(&human(3), send(1, "dev", None));
    assert!(reply.is_ok(), "{reply:?}");
    let Some(Evidence::Human(input)) = evidence.first() else {
        panic!("the human input first: {evidence:?}")
    };
    assert_eq!(
        (input.verb.as_str(), &input.subject),
        (
            "message.send",
            &Some(Subject::Message(MessageId::from_random([1; 16])))
        )
    );
    assert_eq!(input.read_message(), None, "a send reads nothing");
}
