//! The console's requests and the decoding of their answers: each
//! request's arguments are its verb's argument type, keys the broker's
//! parser allows, over generated requests; and an answer missing any key
//! the broker always writes fails to decode (`bad-response`), key by key,
//! rather than showing a default.

use mosaic_client::wire::args::VerbArgs;
use mosaic_domain::evidence::OptionKey;
use mosaic_domain::{DecisionId, MessageId, Refusal};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::request::{self, Reply, Request};
use super::tests::{decision, raised, team, ID};

fn requests() -> impl Strategy<Value = Request> {
    let id = any::<[u8; 16]>().prop_map(DecisionId::from_random);
    let message = any::<[u8; 16]>().prop_map(MessageId::from_random);
    let key = "[a-z0-9._-]{1,64}".prop_map(|k| OptionKey::parse(&k).expect("a key"));
    prop_oneof![
        Just(Request::Inbox),
        Just(Request::Agents),
        Just(Request::Head),
        ".{0,40}".prop_map(Request::Trail),
        proptest::option::of(any::<u64>()).prop_map(|before| Request::History { before }),
        (id.clone(), key, ".{0,40}").prop_map(|(id, choice, note)| Request::Resolve {
            id,
            choice,
            note
        }),
        id.clone().prop_map(Request::Seen),
        id.clone().prop_map(Request::Beyond),
        id.prop_map(Request::Withdraw),
        (".{0,20}", ".{0,40}").prop_map(|(to, body)| Request::Send { to, body }),
        message.prop_map(Request::Read),
        any::<bool>().prop_map(|off| Request::Launch { off }),
        "[a-z][a-z0-9-]{0,20}"
            .prop_map(|run| Request::EndRun(mosaic_domain::RunId::parse(&run).expect("a run id"))),
    ]
}

proptest! {
    #[test]
    fn each_request_s_arguments_are_its_verb_s_keys_with_its_values(request in requests()) {
        let args = request.args();
        let object = args.as_object().expect("an object");
        let allowed = request.verb().arg_keys();
        for key in object.keys() {
            prop_assert!(allowed.contains(&key.as_str()), "{key} for {}", request.verb());
        }
        let expected = match &request {
            Request::Inbox | Request::Agents | Request::Head | Request::Launch { .. } => json!({}),
            Request::Beyond(after) => json!({"after": after.to_string()}),
            Request::Trail(subject) => json!({"subject": subject}),
            Request::History { before: None } => json!({}),
            Request::History { before: Some(before) } => json!({"before": before}),
            Request::Resolve { id, choice, note } if note.is_empty() => {
                json!({"id": id.to_string(), "choice": choice.as_str()})
            }
            Request::Resolve { id, choice, note } => {
                json!({"id": id.to_string(), "choice": choice.as_str(), "note": note})
            }
            Request::Seen(id) | Request::Withdraw(id) => json!({"id": id.to_string()}),
            Request::Send { to, body } => json!({"to": to, "body": body}),
            Request::Read(id) => json!({"id": id.to_string()}),
            Request::EndRun(run) => json!({"run": run.to_string()}),
        };
        prop_assert_eq!(args, expected);
    }
}

/// `value` with its key `key` taken out.
fn without(value: &Value, key: &str) -> Value {
    let mut value = value.clone();
    value.as_object_mut().expect("an object").remove(key);
    value
}

/// Every key of `item` that, taken out, still decodes as `request`'s
/// answer `wrap(item)`.
fn optional_keys(request: &Request, item: &Value, wrap: impl Fn(Value) -> Value) -> Vec<String> {
    assert!(request.decode(wrap(item.clone())).is_ok(), "{item}");
    item.as_object()
        .expect("an object")
        .keys()
        .filter(|key| match request.decode(wrap(without(item, key))) {
            Ok(_) => true,
            Err(refusal) => {
                assert_eq!(refusal, Refusal::BadResponse, "{key}");
                false
            }
        })
        .cloned()
        .collect()
}

#[test]
fn an_answer_missing_any_key_the_broker_always_writes_is_bad_response() {
    let inbox = optional_keys(
        &Request::Inbox,
        &decision(ID, "release.publish", true),
        |d| json!([d]),
    );
    assert_eq!(inbox, Vec::<String>::new());
    let agents = optional_keys(&Request::Agents, &team(true)[1], |row| json!([row]));
    assert_eq!(agents, Vec::<String>::new());
    let trail = optional_keys(&Request::trail(&ID), &raised(ID), |r| json!([r]));
    assert_eq!(trail, Vec::<String>::new());
    let head = optional_keys(
        &Request::Head,
        &json!({"size": 3, "head": "q5Yk", "note": "n"}),
        |h| h,
    );
    assert_eq!(head, Vec::<String>::new());
    let closed = json!({
        "action": "repo.merge", "at": "2026-01-01T10:05:00.000Z", "blocking": false,
        "by": "lead", "byRun": "lead-1", "choice": "yes", "id": ID, "note": "ok",
        "raiser": "dev", "raiserRun": "dev-1", "route": "lead", "seq": 7,
        "status": "resolved", "supersededBy": null, "target": null,
    });
    let history = optional_keys(&Request::History { before: None }, &closed, |r| json!([r]));
    assert_eq!(history, Vec::<String>::new());
}

#[test]
fn a_page_of_changes_decodes_to_its_cursor_and_rows_or_is_bad_response() {
    assert_eq!(request::changes_args(None, None), json!({}));
    assert_eq!(
        request::changes_args(Some(5), Some(10_000)),
        json!({"since": 5, "timeoutMs": 10_000})
    );
    assert_eq!(
        mosaic_domain::Verb::Changes.arg_keys(),
        ["since", "timeoutMs"]
    );
    let page = json!({"cursor": 9, "changes": [
        {"seq": 9, "kind": "decision.withdrawn", "decision": ID}]});
    let (cursor, changes) = request::changes(page.clone()).expect("a page");
    assert_eq!(cursor, 9);
    assert_eq!(changes.len(), 1);
    assert_eq!(
        changes[0].decision,
        Some(DecisionId::parse(ID).expect("an id"))
    );
    for key in ["cursor", "changes"] {
        assert_eq!(
            request::changes(without(&page, key)),
            Err(Refusal::BadResponse)
        );
    }
    let unknown = json!({"cursor": 9, "changes": [{"seq": 9, "kind": "decision.withdrawn",
                                                 "decision": "not-an-id"}]});
    assert_eq!(request::changes(unknown), Err(Refusal::BadResponse));
}

#[test]
fn a_resolve_s_answer_names_the_choice_it_resolved_with() {
    let request = Request::Resolve {
        id: DecisionId::parse(ID).expect("an id"),
        choice: OptionKey::parse("yes").expect("a key"),
        note: String::new(),
    };
    let mut resolved = decision(ID, "release.publish", true);
    resolved["status"] = json!("resolved");
    resolved["choice"] = json!("yes");
    let Ok(Reply::Resolved(choice)) = request.decode(resolved.clone()) else {
        panic!("a resolve's reply");
    };
    assert_eq!(choice.as_str(), "yes");
    // An open decision is no resolve's answer: it names no choice.
    resolved["choice"] = Value::Null;
    assert_eq!(request.decode(resolved), Err(Refusal::BadResponse));
}
