//! The human's reads and acknowledgements: `message.read` of a message to
//! the human, the inbox's `more`, and every read answering exactly the
//! callers the verb table lists.

use super::*;
use std::time::{Duration, Instant};

#[test]
fn the_human_reads_messages_to_the_human_and_the_inbox_says_how_many_more_wait() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead] = claimed(&b, ["lead-1"]);
    let reader = b.reader(0);
    let ids: Vec<Value> = (0..103)
        .map(|i| lead.send("human", &format!("m{i}"), json!({})))
        .collect();
    let to_qa = lead.send("qa", "for qa", json!({}));
    // The human's inbox, through the CLI and through a reader: the oldest
    // 100, then how many more.
    let inbox = |from: usize, more: Option<u64>| {
        let mut items: Vec<Value> = (from..from + 100)
            .map(|i| {
                let mut m = message(
                    &ids[i],
                    ("lead", "lead-1"),
                    "human",
                    &format!("m{i}"),
                    json!({}),
                );
                merge(
                    &mut m,
                    json!({"type": "message", "delivered_to": null, "read": false}),
                );
                m
            })
            .collect();
        items.extend(more.map(|n| json!({"type": "more", "unread": n})));
        Value::Array(items)
    };
    assert_eq!(
        human(&b.socket, &acme_request("inbox", json!({}))).ok(),
        inbox(0, Some(3))
    );
    assert_eq!(reader.ok("inbox", json!({})), inbox(0, Some(3)));

    let read = |id: &Value| human(&b.socket, &acme_request("message.read", json!({"id": id})));
    let cursor = reader.ok("changes", json!({}))["cursor"].clone();
    assert_eq!(read(&ids[0]).ok(), json!({}));
    // It changes the human's inbox, so the readers hear of it.
    let heard = reader.ok("changes", json!({"since": cursor, "timeoutMs": 1000}));
    let changes = heard["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{heard}");
    assert_eq!(
        (&changes[0]["kind"], &changes[0]["message"]),
        (&json!("human.input"), &ids[0])
    );
    assert_eq!(reader.ok("inbox", json!({})), inbox(1, Some(2)));
    // Twice is not an error, and it changes nothing more.
    assert_eq!(read(&ids[0]).ok(), json!({}));
    assert_eq!(reader.ok("inbox", json!({})), inbox(1, Some(2)));
    // A message to a role is not the human's to acknowledge; an unknown one
    // is unknown.
    read(&to_qa).refused("not-holder", 1);
    read(&json!("00000000-0000-4000-8000-000000000000")).refused("unknown-reference", 1);
    // The reader may not acknowledge for the human.
    assert_eq!(
        reader
            .call("message.read", json!({"id": ids[1]}))
            .map_err(|r| r.code()),
        Err("not-authorized")
    );
    // The last of those beyond: no `more` element once none waits beyond.
    for id in &ids[1..3] {
        assert_eq!(read(id).ok(), json!({}));
    }
    assert_eq!(reader.ok("inbox", json!({})), inbox(3, None));

    // The acknowledgement is the human's act, on the message's trail.
    let trail = trail_of(&reader, &ids[0]);
    assert_eq!(
        kinds(&trail),
        ["message.sent", "human.input", "human.input"]
    );
    let input = trail[1]["id"].clone();
    assert_eq!(
        trail[1],
        human_input(&input, "message.read", &ids[0], "message")
    );
    b.close();
    let reads: Vec<_> = human_inputs(root.path())
        .into_iter()
        .filter(|(verb, ..)| verb == "message.read")
        .collect();
    assert_eq!(reads.len(), 4);
    assert!(
        ledger(root.path())
            .iter()
            .all(|(kind, _)| kind != "message.read"),
        "no run's read is recorded for the human's"
    );
}

/// Every read verb, from an agent, a reader and the human, answers exactly
/// the callers the verb table lists, `human-only` or `not-authorized` the
/// others: the runtime admits reads from the table as it admits writes.
#[test]
fn every_read_answers_exactly_the_callers_the_verb_table_lists() {
    let root = data_root();
    let broker = acme_broker(root.path());
    let [agent] = claimed(&broker, ["dev-1"]);
    let reader = broker.reader(0);
    for &verb in Verb::ALL.iter().filter(|verb| verb.is_read()) {
        // `trail` is the one read that needs an argument.
        let args = if verb == Verb::Trail {
            json!({"subject": "vikunja:3/41"})
        } else {
            json!({})
        };
        let expected = |kind: CallerKind| -> Result<(), &str> {
            if verb.callers().contains(&kind) {
                Ok(())
            } else if verb.callers() == [CallerKind::Human] {
                Err("human-only")
            } else {
                Err("not-authorized")
            }
        };
        let code =
            |answer: Result<Value, mosaic_domain::Refusal>| answer.map(drop).map_err(|r| r.code());
        assert_eq!(
            code(agent.call(verb.as_str(), args.clone())),
            expected(CallerKind::Agent),
            "{verb} from an agent"
        );
        assert_eq!(
            code(reader.call(verb.as_str(), args.clone())),
            expected(CallerKind::Reader),
            "{verb} from a reader"
        );
        let human = human(broker.socket.as_path(), &acme_request(verb.as_str(), args));
        let got = match human.reply["error"].as_str() {
            Some(refused) => Err(refused.to_owned()),
            None => Ok(()),
        };
        assert_eq!(
            got,
            expected(CallerKind::Human).map_err(str::to_owned),
            "{verb} from the human: {human:?}"
        );
    }
    broker.close();
}

/// 80 messages of 60 KB to the human would make an inbox larger than any
/// client takes. The human's inbox (through the CLI, and a reader's) still
/// answers, within a second (the proof of the human included), listing first the gated decision
/// raised after them, then each message cut to its first 2,000
/// characters; the trail holds each whole.
#[test]
fn under_80_messages_of_60_kb_the_humans_inbox_answers_and_lists_the_decision_first() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, ops] = claimed(&b, ["lead-1", "ops-1"]);
    let reader = b.reader(0);
    let body = format!("{}\u{1b}[2J{}", "x".repeat(1_990), "y".repeat(58_000));
    let ids: Vec<Value> = (0..80)
        .map(|_| lead.send("human", &body, json!({})))
        .collect();
    let decision = gated_send(&ops);
    let asked = Instant::now();
    let cli = human(&b.socket, &acme_request("inbox", json!({}))).ok();
    let answered = asked.elapsed();
    eprintln!("the human's inbox answered in {answered:?}");
    assert!(answered < Duration::from_secs(1), "{answered:?}");
    for inbox in [cli, reader.ok("inbox", json!({}))] {
        let items = inbox.as_array().expect("an array");
        assert_eq!(items.len(), 81);
        assert_eq!(
            (&items[0]["type"], &items[0]["id"]),
            (&json!("decision"), &decision["id"])
        );
        for (item, id) in items[1..].iter().zip(&ids) {
            assert_eq!(
                (&item["type"], &item["id"], &item["cut"]),
                (&json!("message"), id, &json!(true))
            );
            let cut: String = body.chars().take(2_000).collect();
            assert_eq!(item["body"], json!(cut));
        }
    }
    let trail = trail_of(&reader, &ids[79]);
    assert_eq!(trail[0]["body"], json!(body));
}

/// The listed decisions of an inbox answer, and how many it left out.
fn decisions_of(inbox: &Value) -> (Vec<Value>, u64) {
    let items = inbox.as_array().expect("an array");
    let ids = items
        .iter()
        .filter(|i| i["type"] == "decision")
        .map(|i| i["id"].clone())
        .collect();
    let left = items
        .iter()
        .find(|i| i["type"] == "more")
        .and_then(|more| more["decisions"].as_u64())
        .unwrap_or(0);
    (ids, left)
}

/// More decisions than one answer holds, all of the largest size: the
/// human's inbox lists what fits and counts the rest, and `after` pages
/// through every one, each once, in the inbox's order, to a gated decision
/// raised last. A page after a decision that closed is `decision-closed`.
#[test]
fn the_humans_inbox_pages_through_every_waiting_decision_under_a_flood() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops] = claimed(&b, ["ops-1"]);
    let reader = b.reader(0);
    let options: Vec<Value> = ["yes", "no", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]
        .iter()
        .map(|key| json!({"key": key, "text": "o".repeat(500)}))
        .collect();
    let big = json!({"question": "q".repeat(4_000), "recommendation": "yes",
                     "options": options, "blocking": true, "task_ref": "vikunja:3/41"});
    let flood: Vec<Value> = (0..1_500)
        .map(|_| ops.raise("message.send", Some("dev"), big.clone())["id"].clone())
        .collect();
    let last = gated_send(&ops)["id"].clone();
    let first = human(&b.socket, &acme_request("inbox", json!({}))).ok();
    let (mut seen, mut left) = decisions_of(&first);
    assert!(left > 0, "the flood fits one answer: make it larger");
    assert_eq!(seen.len() as u64 + left, 1_501);
    while left > 0 {
        let after = seen.last().expect("a listed decision").clone();
        let (page, rest) = decisions_of(&reader.ok("inbox", json!({"after": after})));
        assert!(
            !page.is_empty() && rest < left,
            "{} then {rest}",
            page.len()
        );
        seen.extend(page);
        left = rest;
    }
    let mut expected = flood.clone();
    expected.push(last.clone());
    assert_eq!(seen, expected);
    // Past the last, nothing; after one that closed, its refusal.
    assert_eq!(
        decisions_of(&reader.ok("inbox", json!({"after": last}))),
        (vec![], 0)
    );
    ops.ok("decision.withdraw", json!({"id": flood[0]}));
    reader.refused("inbox", json!({"after": flood[0]}), "decision-closed");
    reader.refused(
        "inbox",
        json!({"after": "0b7f8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"}),
        "unknown-reference",
    );
}
