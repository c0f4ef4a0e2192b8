//! The message reads' checks: `message`, `undelivered` and `unread`
//! (with `unread_count`) against their contracts.

use mosaic_domain::evidence::Recipient;
use mosaic_domain::messages::MessageFacts;

use super::evidence::*;
use super::scenario::Scenario;
use crate::conformance::check_eq;
use crate::store::EvidenceStore;

pub(super) fn message_facts<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    sc.commit(vec![sent(&a, 1, to("dev"))]);
    let record = message(&a, 1, to("dev"));
    check_eq(
        "facts after send",
        sc.message(1),
        Some(facts(record.clone(), None, false)),
    );
    sc.commit(vec![delivered(&a, 1, "run-1")]);
    check_eq(
        "facts after delivery",
        sc.message(1),
        Some(facts(record.clone(), Some("run-1"), false)),
    );
    sc.commit(vec![read(&a, 1, "run-1")]);
    check_eq(
        "facts after read",
        sc.message(1),
        Some(facts(record, Some("run-1"), true)),
    );
    check_eq("an unknown message", sc.message(2), None::<MessageFacts>);
    sc.commit(vec![sent(&b, 3, Recipient::Human)]);
    check_eq(
        "a message of another business, as it is",
        sc.message(3),
        Some(facts(message(&b, 3, Recipient::Human), None, false)),
    );
}

pub(super) fn undelivered_order_and_limit<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    for batch in inbox_history() {
        sc.commit(batch);
    }
    check_eq(
        "undelivered, limit 3",
        sc.undelivered(&a, "dev", 3),
        fresh(&[1, 2, 3]),
    );
    check_eq(
        "undelivered, limit 100",
        sc.undelivered(&a, "dev", 100),
        fresh(&[1, 2, 3, 4, 5]),
    );
    check_eq("undelivered, limit 0", sc.undelivered(&a, "dev", 0), vec![]);
    check_eq(
        "undelivered to another role",
        sc.undelivered(&a, "ops", 100),
        vec![facts(message(&a, 6, to("ops")), None, false)],
    );
    check_eq(
        "undelivered in another business",
        sc.undelivered(&b, "dev", 100),
        vec![facts(message(&b, 7, to("dev")), None, false)],
    );
    check_eq(
        "undelivered to a role without messages",
        sc.undelivered(&a, "lead", 100),
        vec![],
    );
    sc.commit(vec![delivered(&a, 1, "run-1"), delivered(&a, 3, "run-1")]);
    check_eq(
        "undelivered after two deliveries",
        sc.undelivered(&a, "dev", 100),
        fresh(&[2, 4, 5]),
    );
    check_eq(
        "undelivered after two deliveries, limit 2",
        sc.undelivered(&a, "dev", 2),
        fresh(&[2, 4]),
    );
    // Neither a read nor a new holder brings a delivered message back.
    sc.commit(vec![read(&a, 1, "run-1"), delivered(&a, 2, "run-7")]);
    check_eq(
        "undelivered after a new holder's delivery",
        sc.undelivered(&a, "dev", 100),
        fresh(&[4, 5]),
    );
}

pub(super) fn unread<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    for batch in inbox_history() {
        sc.commit(batch);
    }
    check_eq(
        "unread, nothing delivered",
        sc.unread(&a, &to("dev")),
        fresh(&[1, 2, 3, 4, 5]),
    );
    sc.commit(vec![
        delivered(&a, 1, "run-1"),
        delivered(&a, 2, "run-1"),
        read(&a, 1, "run-1"),
    ]);
    let mut expected = vec![facts(message(&a, 2, to("dev")), Some("run-1"), false)];
    expected.extend(fresh(&[3, 4, 5]));
    check_eq(
        "unread after one read of two deliveries",
        sc.unread(&a, &to("dev")),
        expected.clone(),
    );
    check_eq(
        "unread limited to 2: the oldest two",
        sc.unread_limited(&a, &to("dev"), 2),
        expected[..2].to_vec(),
    );
    check_eq(
        "unread limited to 0",
        sc.unread_limited(&a, &to("dev"), 0),
        vec![],
    );
    check_eq(
        "unread for the human",
        sc.unread(&a, &Recipient::Human),
        vec![facts(message(&a, 8, Recipient::Human), None, false)],
    );
    check_eq(
        "unread in another business",
        sc.unread(&b, &to("dev")),
        vec![facts(message(&b, 7, to("dev")), None, false)],
    );
    check_eq(
        "unread for a role without messages",
        sc.unread(&a, &to("lead")),
        vec![],
    );
    check_eq(
        "unread for the human of another business",
        sc.unread(&b, &Recipient::Human),
        vec![],
    );
    check_eq("unread_count", sc.unread_count(&a, &to("dev")), 4);
    check_eq(
        "unread_count, human",
        sc.unread_count(&a, &Recipient::Human),
        1,
    );
    check_eq("unread_count, none", sc.unread_count(&a, &to("lead")), 0);
    // The human's `message.read` is its `human.input`; one naming a
    // message to a role (which the bus refuses) reads nothing.
    sc.commit(vec![human_read(&a, 40, 3)]);
    check_eq(
        "a human read of a role's message",
        sc.unread_count(&a, &to("dev")),
        4,
    );
    sc.commit(vec![human_read(&a, 41, 8)]);
    check_eq(
        "unread after the human read",
        sc.unread(&a, &Recipient::Human),
        vec![],
    );
    check_eq(
        "unread_count after it",
        sc.unread_count(&a, &Recipient::Human),
        0,
    );
    check_eq(
        "a message the human read",
        sc.message(8),
        Some(facts(message(&a, 8, Recipient::Human), None, true)),
    );
}
