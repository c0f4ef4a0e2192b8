//! Every answer's shape: written in sorted key order (its text is that of
//! its `serde_json::Value`), read back whole, and refused when a key it
//! always carries is missing; over samples of every shape and every kind
//! of record, and over generated messages and decisions.

use std::borrow::Cow;
use std::fmt::Debug;

use mosaic_domain::evidence::{EndCause, EvidenceKind, Harness, MessageClass, OptionKey};
use mosaic_domain::{
    Action, ActionClass, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId,
    Target, TaskRef, Timestamp,
};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::agent::{AgentRow, Ended, Exited, Usage, WaitsOn};
use super::decision::{
    AgentView, Authorization, Choice, DecisionStatus, DecisionView, Domain, Raised, Standing,
};
use super::history::{ClosedRow, Closing};
use super::inbox::{Inbox, InboxMore, More};
use super::listed::{ItemType, Listed};
use super::message::MessageView;
use super::reads::{Change, ChangePage, Head, TaskRow};
use super::record::{
    Acted, Allowed, Consumed, Counted, Delivery, Fact, HumanInput, Launched, Observed, Record,
    Refused, Resolved, Revoked, SessionEnded, SubjectKind, Superseded,
};
use super::reply::{Authorized, ClaimStatus, Claimed, Done, GrantKind, Sent};
use super::text::{KindName, Party};

const D1: &str = "0190a2b4-0000-7000-8000-000000000001";
const D2: &str = "0190a2b4-0000-7000-8000-000000000002";
const M1: &str = "0190a2b4-0000-7000-8000-0000000000a1";
const E1: &str = "0190a2b4-0000-7000-8000-0000000000e1";
const AT: &str = "2026-01-01T10:00:00.000Z";

fn did(text: &str) -> DecisionId {
    DecisionId::parse(text).unwrap()
}
fn role(text: &str) -> RoleInstance {
    RoleInstance::parse(text).unwrap()
}
fn run(text: &str) -> RunId {
    RunId::parse(text).unwrap()
}
fn key(text: &str) -> OptionKey {
    OptionKey::parse(text).unwrap()
}
fn at() -> Timestamp {
    Timestamp::parse(AT).unwrap()
}
fn agent() -> AgentView {
    AgentView {
        role: role("dev"),
        run: run("dev-1"),
    }
}

/// Fails unless `value` is written in sorted key order, reads back as
/// itself, and is refused without any key but those in `optional`, at
/// its top level.
#[track_caller]
fn sound<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T, optional: &[&str]) {
    let text = serde_json::to_string(value).expect("it writes");
    let tree = serde_json::to_value(value).expect("it writes");
    assert_eq!(text, tree.to_string(), "its keys in sorted order");
    let read: T = serde_json::from_str(&text).expect("it reads back");
    assert_eq!(&read, value);
    if let Value::Object(map) = &tree {
        for key in map.keys() {
            let mut without = map.clone();
            without.remove(key);
            let decoded = serde_json::from_value::<T>(Value::Object(without));
            assert_eq!(
                decoded.is_ok(),
                optional.contains(&key.as_str()),
                "without {key:?}: {decoded:?}"
            );
        }
    }
}

fn raised<'a>(question: &'a str, options: usize) -> Raised<'a> {
    Raised {
        action: Action::parse("repo.merge").unwrap(),
        authorization: Authorization {
            action: Action::parse("repo.merge").unwrap(),
            approval_choice: key("yes"),
            target: Some(Target::parse("gitea:acme/bus").unwrap()),
        },
        blocking: true,
        class: ActionClass::Gated,
        domain: Domain::Technical,
        holder: None,
        id: did(D1),
        options: (0..options)
            .map(|i| Choice {
                key: key(if i == 0 { "yes" } else { "no" }),
                text: Cow::Owned(format!("option {i}")),
            })
            .collect(),
        project: Some(Cow::Borrowed("bus")),
        question: Cow::Borrowed(question),
        raised_by: agent(),
        recommendation: Cow::Borrowed("yes"),
        requirement_ref: None,
        route: Party::Human,
        supersedes: Some(did(D2)),
        target: Some(Target::parse("gitea:acme/bus").unwrap()),
        task_ref: Some(TaskRef::parse("vikunja:3/41").unwrap()),
    }
}

fn decision<'a>(question: &'a str, options: usize) -> DecisionView<'a> {
    DecisionView {
        raised: raised(question, options),
        standing: Standing {
            choice: Some(key("no")),
            cut: false,
            item: None,
            status: DecisionStatus::Resolved,
            superseded_by: None,
        },
    }
}

fn message(body: &str) -> MessageView<'_> {
    MessageView {
        body: Cow::Borrowed(body),
        class: Some(MessageClass::Info),
        corrects: None,
        cut: false,
        decision: Some(did(D1)),
        delivered_to: None,
        from: Party::Role(role("qa")),
        from_run: Some(run("qa-1")),
        id: MessageId::parse(M1).unwrap(),
        in_reply_to: None,
        read: None,
        request: None,
        to: Party::Human,
        item: None,
    }
}

#[test]
fn a_decision_is_its_raise_and_its_standing_in_one_sorted_object() {
    let view = decision("Merge?", 2);
    sound(&view, &[]);
    let value = serde_json::to_value(&view).unwrap();
    assert_eq!(value["raisedBy"], json!({"role": "dev", "run": "dev-1"}));
    assert_eq!(
        value["authorization"],
        json!({"action": "repo.merge", "approvalChoice": "yes", "target": "gitea:acme/bus"})
    );
    assert_eq!(
        (&value["status"], &value["choice"], &value["route"]),
        (&json!("resolved"), &json!("no"), &json!("human"))
    );
    // In the human's inbox, short and tagged: two more keys, each optional.
    let short = DecisionView {
        standing: Standing {
            cut: true,
            item: Some(ItemType::Decision),
            ..view.standing.clone()
        },
        ..view.clone()
    };
    sound(&short, &["cut", "type"]);
    sound(&raised("Merge?", 1), &[]);
    // A choice that is no option key, a route that is no role: refused.
    for (key, bad) in [("choice", json!("y s")), ("route", json!("a b"))] {
        let mut broken = value.clone();
        broken[key] = bad;
        assert!(
            serde_json::from_value::<DecisionView>(broken).is_err(),
            "{key}"
        );
    }
}

#[test]
fn a_message_is_written_straight_in_sorted_order_with_its_facts_optional() {
    sound(&message("tests are green"), &[]);
    let item = MessageView {
        cut: true,
        delivered_to: Some(None),
        read: Some(false),
        item: Some(ItemType::Message),
        ..message("cut")
    };
    sound(&item, &["cut", "delivered_to", "read", "type"]);
    let value = serde_json::to_value(&item).unwrap();
    assert_eq!(
        (&value["delivered_to"], &value["read"], &value["type"]),
        (&Value::Null, &json!(false), &json!("message"))
    );
}

#[test]
fn an_inbox_is_decisions_then_messages_then_more_and_skips_a_type_it_does_not_know() {
    let inbox = Inbox::new(vec![decision("Merge?", 2)], vec![message("hi")], 3, 1);
    let value = serde_json::to_value(&inbox).unwrap();
    let types: Vec<&Value> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["type"])
        .collect();
    assert_eq!(
        types,
        [&json!("decision"), &json!("message"), &json!("more")]
    );
    assert_eq!(
        value[2],
        json!({"type": "more", "unread": 3, "decisions": 1})
    );
    assert_eq!(
        serde_json::to_string(&inbox).unwrap(),
        value.to_string(),
        "sorted"
    );
    let read: Inbox = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(read, inbox);
    let mut newer = value.clone();
    newer
        .as_array_mut()
        .unwrap()
        .insert(1, json!({"type": "reminder", "text": "x"}));
    assert_eq!(serde_json::from_value::<Inbox>(newer).unwrap(), inbox);
    // Nothing left out: no `more` item.
    let whole = Inbox::new(vec![], vec![message("hi")], 0, 0);
    assert_eq!(whole.more, None);
    assert_eq!(
        serde_json::to_value(&whole)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // An item without its type, or a known item missing a key: refused.
    let mut untyped = value.clone();
    untyped[1].as_object_mut().unwrap().remove("type");
    assert!(serde_json::from_value::<Inbox>(untyped).is_err());
    let mut broken = value;
    broken[0].as_object_mut().unwrap().remove("authorization");
    let error = serde_json::from_value::<Inbox>(broken).unwrap_err();
    assert!(error.to_string().contains("authorization"), "{error}");
    sound(
        &InboxMore {
            decisions: None,
            item: More::More,
            unread: 4,
        },
        &["decisions"],
    );
}

fn row() -> AgentRow {
    AgentRow {
        address: None,
        ended: Some(Ended {
            at: at(),
            cause: EndCause::Failed,
            signal: Some(9),
            status: None,
        }),
        exited: Some(Exited {
            signal: Some(9),
            status: None,
        }),
        harness: Harness::ClaudeCode,
        holding: false,
        last_at: Some(at()),
        last_verb: Some("changes".to_owned()),
        launching: true,
        pid: 4242,
        restarts: 2,
        revoked: false,
        role: role("dev"),
        run: run("dev-1"),
        start_time: 17,
        usage: Some(Usage {
            cost_usd: 0.25,
            input_tokens: 1200,
            output_tokens: 80,
            turns: 3,
        }),
        waiting: true,
        waits_on: vec![WaitsOn {
            action: Action::parse("repo.merge").unwrap(),
            blocking: false,
            id: did(D1),
            route: Party::Role(role("lead")),
            target: None,
        }],
        waits_on_more: 0,
    }
}

#[test]
fn an_agents_row_and_its_parts_are_sound_and_its_list_counts_the_rest() {
    let row = row();
    sound(&row, &[]);
    sound(
        &AgentRow {
            waits_on_more: 5,
            ..row.clone()
        },
        &["waitsOnMore"],
    );
    sound(&row.ended.unwrap(), &["signal", "status"]);
    sound(&row.exited.unwrap(), &[]);
    sound(&row.usage.unwrap(), &[]);
    sound(&row.waits_on[0], &[]);
    let listed = Listed {
        items: vec![row.clone(), row.clone()],
        more: 7,
    };
    let value = serde_json::to_value(&listed).unwrap();
    assert_eq!(value[2], json!({"type": "more", "agents": 7}));
    assert_eq!(serde_json::to_string(&listed).unwrap(), value.to_string());
    assert_eq!(
        serde_json::from_value::<Listed<AgentRow>>(value).unwrap(),
        listed
    );
    let all = Listed {
        items: vec![row],
        more: 0,
    };
    let value = serde_json::to_value(&all).unwrap();
    assert_eq!(value.as_array().unwrap().len(), 1);
    assert_eq!(
        serde_json::from_value::<Listed<AgentRow>>(value).unwrap(),
        all
    );
    // A `more` item that is not last, or without its count: refused.
    let early =
        json!([{"type": "more", "agents": 1}, serde_json::to_value(&all.items[0]).unwrap()]);
    assert!(serde_json::from_value::<Listed<AgentRow>>(early).is_err());
    let uncounted = json!([{"type": "more", "records": 1}]);
    assert!(serde_json::from_value::<Listed<AgentRow>>(uncounted).is_err());
}

fn closed(status: Closing) -> ClosedRow {
    let resolved = status == Closing::Resolved;
    let superseded = status == Closing::Superseded;
    ClosedRow {
        action: Action::parse("repo.push").unwrap(),
        at: at(),
        blocking: true,
        by: (!superseded).then(|| Party::Role(role("lead"))),
        by_run: (!superseded).then(|| run("lead-1")),
        choice: resolved.then(|| key("yes")),
        id: did(D1),
        note: resolved.then(|| "ship it\nnow".to_owned()),
        raiser: role("dev"),
        raiser_run: run("dev-1"),
        route: Party::Human,
        seq: 1207,
        status,
        superseded_by: superseded.then(|| did(D2)),
        target: Some(Target::parse("acme/main").unwrap()),
    }
}

#[test]
fn a_closed_row_writes_every_key_null_where_absent_and_its_list_counts_the_older() {
    for status in [Closing::Resolved, Closing::Withdrawn, Closing::Superseded] {
        sound(&closed(status), &[]);
    }
    let row = closed(Closing::Superseded);
    assert_eq!(
        serde_json::to_value(&row).unwrap(),
        json!({
            "action": "repo.push", "at": AT, "blocking": true, "by": null, "byRun": null,
            "choice": null, "id": D1, "note": null, "raiser": "dev", "raiserRun": "dev-1",
            "route": "human", "seq": 1207, "status": "superseded", "supersededBy": D2,
            "target": "acme/main",
        })
    );
    let human = ClosedRow {
        by: Some(Party::Human),
        by_run: None,
        ..closed(Closing::Withdrawn)
    };
    assert_eq!(serde_json::to_value(&human).unwrap()["by"], json!("human"));
    sound(&human, &[]);
    let listed = Listed {
        items: vec![closed(Closing::Resolved), human],
        more: 3,
    };
    let value = serde_json::to_value(&listed).unwrap();
    assert_eq!(value[2], json!({"type": "more", "closed": 3}));
    assert_eq!(serde_json::to_string(&listed).unwrap(), value.to_string());
    assert_eq!(
        serde_json::from_value::<Listed<ClosedRow>>(value).unwrap(),
        listed
    );
    let mut unknown = serde_json::to_value(closed(Closing::Resolved)).unwrap();
    unknown["status"] = json!("seen");
    assert!(serde_json::from_value::<ClosedRow>(unknown).is_err());
}

/// A record of every kind.
fn facts() -> Vec<Fact<'static>> {
    let message = MessageView {
        body: Cow::Borrowed("hello"),
        ..message("")
    };
    let acted = Acted {
        by: Party::Human,
        by_run: None,
        id: did(D1),
        note: Some(Cow::Borrowed("fine")),
    };
    let delivery = Delivery {
        message: MessageId::parse(M1).unwrap(),
        run: run("dev-1"),
    };
    vec![
        Fact::SessionLaunched(Launched {
            address: Some("127.0.0.1:9".to_owned()),
            harness: Harness::Pi,
            pid: 7,
            role: role("dev"),
            run: run("dev-1"),
            start_time: 3,
        }),
        Fact::LaunchRevoked,
        Fact::LaunchRestored,
        Fact::RoleClaimed(agent()),
        Fact::RoleReleased(agent()),
        Fact::RoleRevoked(Revoked {
            decision: did(D1),
            role: role("dev"),
            run: run("dev-1"),
        }),
        Fact::SessionEnded(SessionEnded {
            cause: EndCause::Exited,
            role: role("dev"),
            run: run("dev-1"),
            signal: None,
            status: Some(0),
            vacated: true,
        }),
        Fact::DecisionRaised(raised("Merge?", 2)),
        Fact::DecisionResolved(Resolved {
            by: Party::Role(role("lead")),
            by_run: Some(run("lead-1")),
            choice: key("yes"),
            id: did(D1),
            note: None,
        }),
        Fact::DecisionSeen(acted.clone()),
        Fact::DecisionWithdrawn(acted),
        Fact::DecisionSuperseded(Superseded {
            id: did(D1),
            superseded_by: did(D2),
        }),
        Fact::ApprovalConsumed(Consumed {
            action: Action::parse("repo.merge").unwrap(),
            decision: did(D1),
            role: role("dev"),
            run: run("dev-1"),
            target: None,
        }),
        Fact::ActionAllowed(Allowed {
            action: Action::parse("routine").unwrap(),
            decision: None,
            role: role("dev"),
            run: run("dev-1"),
            subject: Some("vikunja:3/41".to_owned()),
            subject_kind: Some(SubjectKind::Task),
            target: None,
        }),
        Fact::MessageSent(message),
        Fact::MessageDelivered(delivery.clone()),
        Fact::MessageRead(delivery),
        Fact::HumanInput(HumanInput {
            id: EventId::parse(E1).unwrap(),
            subject: None,
            subject_kind: None,
            verb: Cow::Borrowed("decision.resolve"),
        }),
        Fact::EventObserved(Observed {
            body: json!({"title": "x"}),
            event: Cow::Borrowed("task.created"),
            request: Some(EventId::parse(E1).unwrap()),
            role: role("dev"),
            run: run("dev-1"),
            subject: Some(D1.to_owned()),
            subject_kind: Some(SubjectKind::Decision),
        }),
        Fact::RequestRefused(Refused {
            code: Refusal::NotHolder,
            role: None,
            run: None,
            verb: None,
        }),
        Fact::RefusalsCounted(Counted {
            code: Refusal::NotAuthorized,
            count: 7,
            role: Some(role("dev")),
            run: Some(run("dev-1")),
            since: at(),
            verb: Some(Cow::Borrowed("role.revoke")),
        }),
    ]
}

#[test]
fn a_record_of_every_kind_is_its_stamp_and_its_fields_in_one_sorted_object() {
    let mut kinds = std::collections::BTreeSet::new();
    for fact in facts() {
        let KindName::Known(kind) = fact.kind() else {
            panic!("a known kind");
        };
        kinds.insert(kind.as_str());
        let record = Record {
            at: at(),
            business: Some(BusinessId::parse("acme").unwrap()),
            fact,
        };
        sound(&record, &[]);
        let value = serde_json::to_value(&record).unwrap();
        assert_eq!(value["kind"], kind.as_str());
        assert_eq!(
            (&value["at"], &value["business"]),
            (&json!(AT), &json!("acme"))
        );
    }
    assert_eq!(kinds.len(), EvidenceKind::ALL.len(), "every kind");
    let anonymous = Record {
        at: at(),
        business: None,
        fact: facts().swap_remove(19),
    };
    sound(&anonymous, &[]);
    // A newer broker's kind reads as itself, with nothing else.
    let newer: Record = serde_json::from_value(
        json!({"at": AT, "business": "acme", "kind": "run.slept", "run": "dev-1"}),
    )
    .unwrap();
    assert_eq!(newer.fact, Fact::Other("run.slept".to_owned()));
    let list = Listed {
        items: vec![anonymous],
        more: 2,
    };
    let value = serde_json::to_value(&list).unwrap();
    assert_eq!(value[1], json!({"type": "more", "records": 2}));
    assert_eq!(
        serde_json::from_value::<Listed<Record>>(value).unwrap(),
        list
    );
}

#[test]
fn the_other_reads_and_replies_are_sound() {
    sound(
        &Head {
            head: "q5Yk".to_owned(),
            note: "mosaic-bus/x\n3\nq5Yk\n".to_owned(),
            size: 3,
        },
        &[],
    );
    let task = TaskRow {
        at: at(),
        body: json!({"title": "t"}),
        kind: "task.updated".to_owned(),
        task_ref: TaskRef::parse("vikunja:3/41").unwrap(),
        tombstone: false,
    };
    sound(&task, &[]);
    let tasks = Listed {
        items: vec![task],
        more: 1,
    };
    let value = serde_json::to_value(&tasks).unwrap();
    assert_eq!(value[1], json!({"type": "more", "tasks": 1}));
    let change = Change {
        decision: Some(did(D1)),
        kind: KindName::Known(EvidenceKind::DecisionRaised),
        message: None,
        role: Some(role("dev")),
        seq: 9,
        task: None,
    };
    sound(&change, &["decision", "message", "role", "task"]);
    let page = ChangePage {
        changes: vec![change],
        cursor: 9,
    };
    sound(&page, &[]);
    assert_eq!(
        serde_json::to_value(&page).unwrap(),
        json!({"cursor": 9, "changes": [{"seq": 9, "kind": "decision.raised",
                                          "decision": D1, "role": "dev"}]})
    );
    sound(
        &Claimed {
            status: ClaimStatus::Held,
        },
        &[],
    );
    assert_eq!(serde_json::to_value(Done {}).unwrap(), json!({}));
    sound(
        &Sent {
            id: MessageId::parse(M1).unwrap(),
            request: None,
        },
        &[],
    );
    sound(
        &Authorized {
            decision: None,
            grant: GrantKind::WithinRole,
        },
        &[],
    );
    assert_eq!(
        serde_json::to_value(GrantKind::WithinRole).unwrap(),
        json!("within-role")
    );
}

/// Text of any characters, escapes and all.
fn any_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..40).prop_map(|c| c.into_iter().collect())
}

proptest! {
    #[test]
    fn a_generated_message_is_sound(
        body in any_text(),
        class in proptest::option::of(0..MessageClass::ALL.len()),
        cut in any::<bool>(),
        facts in proptest::option::of((proptest::option::of("[a-z][a-z0-9-]{0,20}"), any::<bool>())),
        human in any::<bool>(),
    ) {
        let item = facts.as_ref().map(|_| ItemType::Message);
        let (delivered_to, read) = match facts {
            Some((to, read)) => (Some(to.map(|r| run(&r))), Some(read)),
            None => (None, None),
        };
        let view = MessageView {
            body: Cow::Owned(body),
            class: class.map(|c| MessageClass::ALL[c]),
            cut,
            delivered_to,
            read,
            from: if human { Party::Human } else { Party::Role(role("qa")) },
            from_run: (!human).then(|| run("qa-1")),
            item,
            ..message("")
        };
        sound(&view, &["cut", "delivered_to", "read", "type"]);
    }

    #[test]
    fn a_generated_decision_is_sound(
        question in any_text(),
        recommendation in any_text(),
        options in 0_usize..4,
        status in 0_usize..4,
        cut in any::<bool>(),
    ) {
        let mut view = decision(&question, options);
        view.raised.recommendation = Cow::Owned(recommendation);
        view.standing.status = [
            DecisionStatus::Open,
            DecisionStatus::Resolved,
            DecisionStatus::Withdrawn,
            DecisionStatus::Superseded,
        ][status];
        view.standing.cut = cut;
        let view = view;
        let optional: &[&str] = if cut { &["cut"] } else { &[] };
        sound(&view, optional);
    }
}
