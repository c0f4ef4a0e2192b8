//! The pane routes' bodies (docs/browser.md): a claim `{requestId, clientId}`
//! and a result `{requestId, claimToken, ok, data?, error?}`.
//!
//! Only a body that is not a JSON object of the route's keys, with the
//! required ones of the right JSON types, is `bad-request` (HTTP 400). Ids
//! and tokens of another form are well-formed bodies that name nothing the
//! broker issued: the route answers them `granted:false` or
//! `matched:false`, as it answers an unknown request.

use mosaic_adapters::wire::browser::{claim_body, result_body, TOO_LARGE_ERROR};
use mosaic_domain::browser::PaneOutcome;
use mosaic_domain::Refusal;
use serde_json::{json, Value};

const ID: &str = "0b5f2c1e-3a4d-4e6f-8a9b-0c1d2e3f4a5b";

fn token() -> String {
    "ab".repeat(32)
}

/// How a result body parsed: refused, or its outcome and whether it names
/// a request and token of the broker's forms.
#[derive(Debug, PartialEq)]
enum Parsed {
    Refused(Refusal),
    Addressed(PaneOutcome<Value>),
    Unaddressed(PaneOutcome<Value>),
}

fn parse_result(body: &Value) -> Parsed {
    match result_body(body.to_string().as_bytes()) {
        Err(refusal) => Parsed::Refused(refusal),
        Ok(parsed) => match parsed.claim {
            Some((request, held)) => {
                assert_eq!(request.to_string(), body["requestId"].as_str().unwrap());
                assert_eq!(held.expose(), body["claimToken"].as_str().unwrap());
                Parsed::Addressed(parsed.outcome)
            }
            None => Parsed::Unaddressed(parsed.outcome),
        },
    }
}

#[track_caller]
fn assert_result(body: Value, expected: Parsed) {
    assert_eq!(parse_result(&body), expected, "{body}");
}

#[test]
fn an_ok_result_without_data_is_done_with_null() {
    let bare = json!({"requestId": ID, "claimToken": token(), "ok": true});
    assert_result(bare, Parsed::Addressed(PaneOutcome::Done(Value::Null)));
    // The same as sending `null`: the two cannot be told apart.
    let null = json!({"requestId": ID, "claimToken": token(), "ok": true, "data": null});
    assert_result(null, Parsed::Addressed(PaneOutcome::Done(Value::Null)));
    let data = json!({"requestId": ID, "claimToken": token(), "ok": true, "data": {"title": "t"}});
    assert_result(
        data,
        Parsed::Addressed(PaneOutcome::Done(json!({"title": "t"}))),
    );
}

#[test]
fn ok_alone_decides_the_outcome() {
    let with = |extra: Value| {
        let mut body = json!({"requestId": ID, "claimToken": token()});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };
    assert_result(
        with(json!({"ok": false, "error": TOO_LARGE_ERROR})),
        Parsed::Addressed(PaneOutcome::TooLarge),
    );
    assert_result(
        with(json!({"ok": false, "error": "element-not-found"})),
        Parsed::Addressed(PaneOutcome::Failed),
    );
    assert_result(
        with(json!({"ok": false})),
        Parsed::Addressed(PaneOutcome::Failed),
    );
    assert_result(
        with(json!({"ok": false, "data": {"x": 1}})),
        Parsed::Addressed(PaneOutcome::Failed),
    );
    assert_result(
        with(json!({"ok": true, "data": 1, "error": "x"})),
        Parsed::Addressed(PaneOutcome::Done(json!(1))),
    );
}

#[test]
fn ids_and_tokens_of_another_form_name_no_request() {
    let cases = [
        json!({"requestId": "forged", "claimToken": token(), "ok": true, "data": 1}),
        json!({"requestId": ID, "claimToken": "forged", "ok": true, "data": 1}),
        json!({"requestId": "", "claimToken": "", "ok": true, "data": 1}),
        json!({"requestId": ID.to_uppercase(), "claimToken": token(), "ok": true, "data": 1}),
        json!({"requestId": ID, "claimToken": "AB".repeat(32), "ok": true, "data": 1}),
    ];
    for body in cases {
        assert_result(body, Parsed::Unaddressed(PaneOutcome::Done(json!(1))));
    }
    assert_result(
        json!({"requestId": "forged", "claimToken": "forged", "ok": false}),
        Parsed::Unaddressed(PaneOutcome::Failed),
    );
}

#[test]
fn only_a_body_of_the_wrong_shape_is_a_bad_request() {
    let cases = [
        json!([ID, token(), true]),
        json!("forged"),
        json!({"claimToken": token(), "ok": true}),
        json!({"requestId": ID, "ok": true}),
        json!({"requestId": ID, "claimToken": token()}),
        json!({"requestId": 7, "claimToken": token(), "ok": true}),
        json!({"requestId": ID, "claimToken": null, "ok": true}),
        json!({"requestId": ID, "claimToken": token(), "ok": "true"}),
        json!({"requestId": ID, "claimToken": token(), "ok": false, "error": 7}),
        json!({"requestId": ID, "claimToken": token(), "ok": true, "extra": 1}),
    ];
    for body in cases {
        assert_result(body, Parsed::Refused(Refusal::BadRequest));
    }
    assert_eq!(result_body(b"requestId=x").err(), Some(Refusal::BadRequest));
}

#[test]
fn a_claim_with_ids_of_another_form_is_no_claim() {
    let claim = |body: Value| claim_body(body.to_string().as_bytes());
    let (request, client) = claim(json!({"requestId": ID, "clientId": "pane-1"}))
        .expect("well-formed")
        .expect("addressed");
    assert_eq!(
        (request.to_string().as_str(), client.as_str()),
        (ID, "pane-1")
    );
    for body in [
        json!({"requestId": "forged", "clientId": "pane-1"}),
        json!({"requestId": ID.to_uppercase(), "clientId": "pane-1"}),
        json!({"requestId": ID, "clientId": "-bad"}),
    ] {
        assert!(matches!(claim(body.clone()), Ok(None)), "{body}");
    }
    for body in [
        json!({"requestId": ID}),
        json!({"requestId": 7, "clientId": "pane-1"}),
        json!({"requestId": ID, "clientId": null}),
        json!({"requestId": ID, "clientId": "pane-1", "x": 1}),
        json!([ID, "pane-1"]),
    ] {
        assert!(
            matches!(claim(body.clone()), Err(Refusal::BadRequest)),
            "{body}"
        );
    }
}
