//! Delivery ownership: which batch one `message.receive` hands out, who may
//! receive it, and who may acknowledge a delivery.

use mosaic_domain::evidence::{AgentRef, MessageEvidence, MessageRecord, Recipient, Sender};
use mosaic_domain::messages::{
    acknowledge, deliver, receive_batch, MessageFacts, RECEIVE_BODY_BYTES, RECEIVE_LIMIT,
};
use mosaic_domain::*;

fn acme() -> BusinessId {
    BusinessId::parse("acme").unwrap()
}
fn role(s: &str) -> RoleInstance {
    RoleInstance::parse(s).unwrap()
}
fn run(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}
fn dev(run_id: &str) -> AgentRef {
    AgentRef {
        role: role("dev"),
        run: run(run_id),
    }
}
fn mid(n: usize) -> MessageId {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&(n as u64 + 1).to_be_bytes());
    MessageId::from_random(bytes)
}

/// Undelivered message `n` to `dev` of acme with a body of `bytes` bytes.
fn message(n: usize, bytes: usize) -> MessageFacts {
    MessageFacts {
        record: MessageRecord {
            id: mid(n),
            business: acme(),
            from: Sender::Human,
            to: Recipient::Role(role("dev")),
            class: None,
            body: "x".repeat(bytes),
            in_reply_to: None,
            corrects: None,
            decision: None,
            request: None,
        },
        delivered_to: None,
        read: false,
    }
}

fn ids(batch: &[MessageFacts]) -> Vec<MessageId> {
    batch.iter().map(|m| m.record.id).collect()
}

#[test]
fn a_receive_hands_out_at_most_100_messages_oldest_first() {
    assert_eq!(RECEIVE_LIMIT, 100);
    let waiting: Vec<MessageFacts> = (0..150).map(|n| message(n, 10)).collect();
    let batch = receive_batch(waiting.clone());
    assert_eq!(ids(&batch), ids(&waiting[..100]));
    assert_eq!(receive_batch(Vec::new()), Vec::new());
    assert_eq!(
        ids(&receive_batch(waiting[..3].to_vec())),
        ids(&waiting[..3])
    );
}

#[test]
fn a_receive_stops_at_512_kib_of_bodies_unless_the_first_message_is_alone_larger() {
    assert_eq!(RECEIVE_BODY_BYTES, 524_288);
    let half = RECEIVE_BODY_BYTES / 2;
    // Exactly the limit fits.
    let exact = vec![message(0, half), message(1, half), message(2, 0)];
    assert_eq!(ids(&receive_batch(exact.clone())), ids(&exact));
    // One byte more does not: the batch ends before the message that overflows.
    let over = vec![message(0, half), message(1, half + 1), message(2, 1)];
    assert_eq!(ids(&receive_batch(over.clone())), ids(&over[..1]));
    let thirds = vec![
        message(0, 200_000),
        message(1, 200_000),
        message(2, 200_000),
    ];
    assert_eq!(ids(&receive_batch(thirds.clone())), ids(&thirds[..2]));
    // A first message larger than the limit goes out alone.
    let large = vec![message(0, RECEIVE_BODY_BYTES + 1), message(1, 1)];
    assert_eq!(ids(&receive_batch(large.clone())), ids(&large[..1]));
}

#[test]
fn delivery_records_each_message_for_the_receiving_run() {
    let batch = vec![message(0, 5), message(1, 5)];
    assert_eq!(
        deliver(&acme(), &dev("r1"), &batch),
        Ok(batch
            .iter()
            .map(|m| MessageEvidence::Delivered {
                business: acme(),
                message: m.record.id,
                run: run("r1"),
            })
            .collect())
    );
    assert_eq!(deliver(&acme(), &dev("r1"), &[]), Ok(Vec::new()));
}

#[test]
fn delivery_refuses_a_batch_the_receive_rules_would_not_hand_out() {
    let full: Vec<MessageFacts> = (0..100).map(|n| message(n, 1)).collect();
    assert_eq!(
        deliver(&acme(), &dev("r1"), &full).map(|e| e.len()),
        Ok(100)
    );
    let too_many: Vec<MessageFacts> = (0..101).map(|n| message(n, 1)).collect();
    assert_eq!(
        deliver(&acme(), &dev("r1"), &too_many),
        Err(Refusal::BadRequest)
    );
    let half = RECEIVE_BODY_BYTES / 2;
    let exact = [message(0, half), message(1, half)];
    assert_eq!(deliver(&acme(), &dev("r1"), &exact).map(|e| e.len()), Ok(2));
    let over = [message(0, half), message(1, half + 1)];
    assert_eq!(
        deliver(&acme(), &dev("r1"), &over),
        Err(Refusal::BadRequest)
    );
    let thirds = [
        message(0, 200_000),
        message(1, 200_000),
        message(2, 200_000),
    ];
    assert_eq!(
        deliver(&acme(), &dev("r1"), &thirds),
        Err(Refusal::BadRequest)
    );
    let alone = [message(0, RECEIVE_BODY_BYTES + 1)];
    assert_eq!(deliver(&acme(), &dev("r1"), &alone).map(|e| e.len()), Ok(1));
}

#[test]
fn delivery_refuses_a_message_of_another_business_role_or_earlier_delivery() {
    let mut other_business = message(1, 1);
    other_business.record.business = BusinessId::parse("globex").unwrap();
    let mut other_role = message(1, 1);
    other_role.record.to = Recipient::Role(role("lead"));
    let mut to_human = message(1, 1);
    to_human.record.to = Recipient::Human;
    let mut delivered = message(1, 1);
    delivered.delivered_to = Some(run("r0"));
    for wrong in [other_business, other_role, to_human, delivered] {
        assert_eq!(
            deliver(&acme(), &dev("r1"), &[message(0, 1), wrong.clone()]),
            Err(Refusal::BadRequest),
            "{wrong:?}"
        );
    }
}

#[test]
fn only_the_run_a_message_was_delivered_to_acknowledges_it_once() {
    let mut to_r1 = message(0, 1);
    to_r1.delivered_to = Some(run("r1"));
    assert_eq!(
        acknowledge(&acme(), &dev("r1"), &to_r1),
        Ok(Some(MessageEvidence::Read {
            business: acme(),
            message: mid(0),
            run: run("r1"),
        }))
    );
    let mut read = to_r1.clone();
    read.read = true;
    assert_eq!(acknowledge(&acme(), &dev("r1"), &read), Ok(None));
    assert_eq!(
        acknowledge(&acme(), &dev("r2"), &to_r1),
        Err(Refusal::NotDelivered)
    );
    assert_eq!(
        acknowledge(&acme(), &dev("r1"), &message(0, 1)),
        Err(Refusal::NotDelivered)
    );
    let mut to_lead = to_r1.clone();
    to_lead.record.to = Recipient::Role(role("lead"));
    assert_eq!(
        acknowledge(&acme(), &dev("r1"), &to_lead),
        Err(Refusal::NotHolder)
    );
    let mut globex = to_r1;
    globex.record.business = BusinessId::parse("globex").unwrap();
    assert_eq!(
        acknowledge(&acme(), &dev("r1"), &globex),
        Err(Refusal::CrossBusiness)
    );
}
