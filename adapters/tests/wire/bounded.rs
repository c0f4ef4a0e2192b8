//! No read answers more than a client takes, whatever agents send: the
//! human's inbox lists every open decision first, whole or short, then
//! messages cut to their first 2,000 characters; an array read lists its
//! items while they fit and counts the rest.

use mosaic_adapters::wire::bounded::{self, ANSWER_BYTES, CUT_CHARS, INBOX_BODY_CHARS};
use proptest::prelude::*;

use super::*;

/// The socket client's cap on an answer.
const MAX_RESPONSE: usize = 4 * 1024 * 1024;

/// A decision of `index`, its question `question_chars` long, with
/// `options` options of 500 characters: up to what one raise may carry.
fn big_decision(index: u32, question_chars: usize, options: usize) -> Decision {
    let id = format!("{index:08x}-1111-4111-8111-111111111111");
    Decision {
        record: DecisionRecord {
            id: did(&id),
            business: acme(),
            raiser: lead(),
            fields: RaiseFields {
                action: Action::parse("repo.force-push").unwrap(),
                target: Some(Target::parse("acme/main").unwrap()),
                question: "q\u{e9}".repeat(question_chars / 2),
                options: (0..options)
                    .map(|i| DecisionOption {
                        key: key(&format!("k{i}")),
                        text: "\"".repeat(500),
                    })
                    .collect(),
                recommendation: "r".repeat(2_000),
                blocking: index.is_multiple_of(2),
                technical: false,
                project: Some("p".repeat(1_000)),
                task_ref: None,
                requirement_ref: None,
                supersedes: None,
            },
            approval_choice: key("k0"),
            class: ActionClass::Gated,
            route: Route::Human,
            holder: None,
        },
        status: Status::Open,
    }
}

/// An unread message to the human of `index`, with `body`.
fn to_human(index: u32, body: String) -> MessageFacts {
    let id = format!("{index:08x}-3333-4333-8333-333333333333");
    MessageFacts {
        record: MessageRecord {
            id: mid(&id),
            to: Recipient::Human,
            body,
            ..message_record()
        },
        delivered_to: None,
        read: false,
    }
}

fn message_record() -> MessageRecord {
    MessageRecord {
        id: mid(M1),
        business: acme(),
        from: Sender::Agent(lead()),
        to: Recipient::Human,
        class: Some(MessageClass::Info),
        body: String::new(),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    }
}

/// The response line's bytes for `result`, as the broker writes it.
fn line_bytes(result: &Value) -> usize {
    wire::ok(result.clone()).len() + 1
}

#[test]
fn eighty_messages_of_60_kb_leave_the_inbox_small_and_the_decision_first() {
    let messages: Vec<MessageFacts> = (0..80)
        .map(|i| to_human(i, "\u{1b}x".repeat(30_000)))
        .collect();
    let decision = big_decision(1, 20, 2);
    let inbox = wire::value_of(&bounded::human_inbox(&[&decision], &messages, 0));
    assert!(
        line_bytes(&inbox) < MAX_RESPONSE / 2,
        "{}",
        line_bytes(&inbox)
    );
    let items = inbox.as_array().expect("an array");
    assert_eq!(items.len(), 81);
    assert_eq!(items[0]["type"], "decision");
    assert_eq!(items[0].get("cut"), None);
    for item in &items[1..] {
        assert_eq!(item["type"], "message");
        assert_eq!(item["cut"], true);
        assert_eq!(
            item["body"].as_str().map(|b| b.chars().count()),
            Some(INBOX_BODY_CHARS)
        );
    }
}

#[test]
fn a_short_body_is_whole_and_not_marked() {
    let messages = [to_human(1, "a".repeat(INBOX_BODY_CHARS))];
    let inbox = wire::value_of(&bounded::human_inbox(&[], &messages, 3));
    assert_eq!(
        inbox[0]["body"].as_str().map(str::len),
        Some(INBOX_BODY_CHARS)
    );
    assert_eq!(inbox[0].get("cut"), None);
    assert_eq!(inbox[1], json!({"type": "more", "unread": 3}));
}

#[test]
fn decisions_past_the_whole_budget_are_listed_short_and_every_one_is_listed() {
    // Each about 60 KB, as big as one raise carries.
    let decisions: Vec<Decision> = (0..120).map(|i| big_decision(i, 4_000, 100)).collect();
    let refs: Vec<&Decision> = decisions.iter().collect();
    let messages: Vec<MessageFacts> = (0..100)
        .map(|i| to_human(i, "\u{1}".repeat(10_000)))
        .collect();
    let inbox = wire::value_of(&bounded::human_inbox(&refs, &messages, 0));
    assert!(line_bytes(&inbox) < MAX_RESPONSE, "{}", line_bytes(&inbox));
    let items = inbox.as_array().expect("an array");
    let listed: Vec<&Value> = items.iter().filter(|i| i["type"] == "decision").collect();
    assert_eq!(listed.len(), 120);
    // In the broker's order, before any message.
    for (i, item) in listed.iter().enumerate() {
        assert_eq!(item["id"], json!(decisions[i].record.id.to_string()));
        assert_eq!(items[i], **item);
    }
    let short: Vec<&&Value> = listed.iter().filter(|i| i["cut"] == true).collect();
    assert!(!short.is_empty() && short.len() < 120);
    for item in short {
        assert_eq!(item["options"], json!([]));
        assert_eq!(
            item["question"].as_str().map(|q| q.chars().count()),
            Some(CUT_CHARS)
        );
        assert_eq!(
            item["authorization"],
            json!({"action": "repo.force-push", "target": "acme/main", "approvalChoice": "k0"})
        );
    }
    // What no longer fits is counted, never dropped silently.
    let listed_messages = items.iter().filter(|i| i["type"] == "message").count();
    let last = items.last().expect("a last item");
    let counted = last["unread"].as_u64().unwrap_or(0);
    assert_eq!(listed_messages as u64 + counted, 100, "{last}");
}

/// An item of an array read, as big as a record may be.
#[derive(Clone, serde::Serialize)]
struct Big {
    body: String,
}

impl mosaic_client::wire::listed::Listable for Big {
    const MORE: &'static str = "records";
}

#[test]
fn an_array_read_lists_what_fits_and_counts_the_rest() {
    let item = Big {
        body: "\u{1}".repeat(60_000),
    };
    let all = vec![item; 20];
    let answer = wire::value_of(&bounded::listed(all.clone()));
    assert!(
        line_bytes(&answer) < MAX_RESPONSE,
        "{}",
        line_bytes(&answer)
    );
    let items = answer.as_array().expect("an array");
    let kept = items.len() - 1;
    assert!(kept < 20 && kept > 0);
    assert_eq!(
        items[kept],
        json!({"type": "more", "records": 20 - kept as u64})
    );
    let small = wire::value_of(&bounded::listed(all[..2].to_vec()));
    assert_eq!(small, wire::value_of(&all[..2]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever agents send, the human's inbox fits the client's cap, lists
    /// decisions before messages in their order, and counts what it left
    /// out.
    #[test]
    fn the_human_inbox_always_fits_and_counts_what_it_leaves_out(
        decisions in proptest::collection::vec((0usize..4_000, 0usize..110), 0..90),
        messages in proptest::collection::vec((0usize..70_000, any::<bool>()), 0..100),
        more in 0u64..1_000,
    ) {
        let decisions: Vec<Decision> = decisions
            .iter()
            .enumerate()
            .map(|(i, &(q, o))| big_decision(i as u32, q, o))
            .collect();
        let refs: Vec<&Decision> = decisions.iter().collect();
        let messages: Vec<MessageFacts> = messages
            .iter()
            .enumerate()
            .map(|(i, &(n, control))| to_human(i as u32, if control { "\u{7}" } else { "é" }.repeat(n)))
            .collect();
        let inbox = wire::value_of(&bounded::human_inbox(&refs, &messages, more));
        prop_assert!(line_bytes(&inbox) <= ANSWER_BYTES + 128 * 1024, "{}", line_bytes(&inbox));
        let items = inbox.as_array().expect("an array");
        let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap_or("?")).collect();
        let first_message = kinds.iter().position(|k| *k != "decision").unwrap_or(kinds.len());
        prop_assert!(kinds[first_message..].iter().all(|k| *k != "decision"));
        let (listed_d, listed_m) = (first_message, kinds.iter().filter(|k| **k == "message").count());
        let last = items.last().filter(|i| i["type"] == "more");
        let counted_d = last.and_then(|l| l["decisions"].as_u64()).unwrap_or(0);
        let counted_m = last.and_then(|l| l["unread"].as_u64()).unwrap_or(0);
        prop_assert_eq!(listed_d as u64 + counted_d, decisions.len() as u64);
        prop_assert_eq!(listed_m as u64 + counted_m, messages.len() as u64 + more);
        for (i, item) in items[..listed_d].iter().enumerate() {
            prop_assert_eq!(&item["id"], &json!(decisions[i].record.id.to_string()));
        }
    }
}

/// A closing of the largest decision a row can show: every name at its
/// cap, a target of 512 bytes that JSON spells twice as long, and a note of
/// `MAX_NOTE` characters that JSON spells in six bytes each (more than the
/// note rule lets through).
fn largest_closing(index: u32) -> mosaic_ports::store::Closed {
    let id = format!("{index:08x}-2222-4222-8222-222222222222");
    let name = |first: char, len: usize| format!("{first}{}", "x".repeat(len - 1));
    let agent = AgentRef {
        role: role(&name('r', 64)),
        run: RunId::parse(&name('u', 128)).unwrap(),
    };
    let mut decision = big_decision(index, 4_000, 20).record;
    decision.id = did(&id);
    decision.raiser = agent.clone();
    decision.route = Route::Role(role(&name('a', 64)));
    decision.fields.action = Action::parse(&format!("a.{}", "b".repeat(62))).unwrap();
    decision.fields.target = Some(Target::parse(&"\"".repeat(512)).unwrap());
    mosaic_ports::store::Closed {
        seq: u64::MAX - u64::from(index),
        closing: Stamped {
            at: at("2026-01-01T10:00:00.000Z"),
            evidence: Evidence::Decision(DecisionEvidence::Resolved {
                business: acme(),
                id: did(&id),
                choice: key(&name('k', 64)),
                by: DecisionActor::Agent(agent),
                note: Some("\u{1}".repeat(mosaic_domain::text::MAX_NOTE)),
            }),
        },
        decision,
    }
}

#[test]
fn a_page_of_history_of_the_largest_rows_lists_them_all_within_the_bound() {
    let page: Vec<_> = (0..bounded::HISTORY_ROWS as u32)
        .map(largest_closing)
        .collect();
    let rows: Vec<_> = page.iter().filter_map(wire::closed_row).collect();
    assert_eq!(rows.len(), bounded::HISTORY_ROWS);
    let listed = bounded::listed(rows);
    assert_eq!(
        (listed.items.len(), listed.more),
        (bounded::HISTORY_ROWS, 0)
    );
    let answer = wire::value_of(&listed);
    let bytes = line_bytes(&answer);
    assert!(bytes < ANSWER_BYTES / 2, "{bytes} bytes");
    assert!(bytes < MAX_RESPONSE);
    assert_eq!(
        answer[0]["note"].as_str().map(|n| n.chars().count()),
        Some(mosaic_domain::text::MAX_NOTE)
    );
}

#[test]
fn a_history_row_says_how_its_decision_closed_and_a_record_closing_none_is_no_row() {
    let closing = largest_closing(1);
    let row = wire::closed_row(&closing).expect("a resolve closes");
    assert_eq!(
        (row.status, row.choice.map(|c| c.to_string().len()), row.seq),
        (
            mosaic_client::wire::history::Closing::Resolved,
            Some(64),
            u64::MAX - 1
        )
    );
    let id = closing.decision.id;
    let with = |evidence| mosaic_ports::store::Closed {
        closing: Stamped {
            evidence,
            ..closing.closing.clone()
        },
        ..closing.clone()
    };
    let withdrawn = wire::closed_row(&with(Evidence::Decision(DecisionEvidence::Withdrawn {
        business: acme(),
        id,
        by: DecisionActor::Human,
        note: None,
    })))
    .expect("a withdraw closes");
    assert_eq!(
        serde_json::to_value(&withdrawn).unwrap()["by"],
        json!("human")
    );
    assert_eq!((withdrawn.by_run, withdrawn.choice), (None, None));
    let superseded = wire::closed_row(&with(Evidence::Decision(DecisionEvidence::Superseded {
        business: acme(),
        id,
        by: did(D2),
    })))
    .expect("a supersede closes");
    assert_eq!(
        (superseded.by, superseded.superseded_by),
        (None, Some(did(D2)))
    );
    let seen = with(Evidence::Decision(DecisionEvidence::Seen {
        business: acme(),
        id,
        by: DecisionActor::Human,
        note: None,
    }));
    assert_eq!(wire::closed_row(&seen), None);
}
