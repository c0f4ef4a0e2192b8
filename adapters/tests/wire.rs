//! The socket's JSON: one test per request rule with its exact code, round
//! trips into `Call`, the dispatch contract, exact JSON for every encoder,
//! and a randomized check that no input panics or yields a foreign code.

use std::cell::Cell;

use mosaic_adapters::wire::{
    self, decision_json, inbox_json, inbox_text, message_facts_json, message_json, parse_json,
    parse_request, record_json, reply_json, task_json, Call, Dispatch, Envelope, Presenter, Query,
    SubjectRef, UuidKind, UuidRef, Verb, VerbArgs, MAX_REQUEST_BYTES,
};
use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{Command, Reply, SendInput};
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::decisions::{Decision, RaiseInput, Status};
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, DecisionRecord, Evidence, Harness, HumanInput, LaunchEvidence, LaunchRecord,
    MessageClass, MessageEvidence, MessageRecord, Observation, OptionKey, RaiseFields, Recipient,
    RefusalCount, RefusalRecord, Route, Sender, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{
    Action, ActionClass, BusinessId, Capability, DecisionId, EventId, MessageId, Refusal,
    RoleInstance, RunId, Target, TaskRef, Timestamp,
};
use mosaic_ports::store::TaskView;
use serde_json::{json, Value};

const CAP: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const D1: &str = "11111111-1111-4111-8111-111111111111";
const D2: &str = "22222222-2222-4222-8222-222222222222";
const M1: &str = "33333333-3333-4333-8333-333333333333";
const M2: &str = "44444444-4444-4444-8444-444444444444";
const E1: &str = "55555555-5555-4555-8555-555555555555";

/// A request line for `verb` with `args` (JSON text).
fn req(verb: &str, args: &str) -> String {
    format!(r#"{{"cap":"{CAP}","verb":"{verb}","args":{args}}}"#)
}

#[track_caller]
fn refuses(line: &str, code: &str) {
    refuses_bytes(line.as_bytes(), code);
}

#[track_caller]
fn refuses_bytes(line: &[u8], code: &str) {
    let got = parse_request(line).map(|r| r.call);
    assert_eq!(
        got.as_ref().err().map(|r| r.code()),
        Some(code),
        "{}: {got:?}",
        String::from_utf8_lossy(&line[..line.len().min(200)])
    );
}

#[track_caller]
fn call(line: &str) -> Call {
    match parse_request(line.as_bytes()) {
        Ok(request) => {
            assert_eq!(
                request.who,
                Presenter::Capability(Capability::parse(CAP).unwrap())
            );
            request.call
        }
        Err(r) => panic!("{line}: refused {r}"),
    }
}

fn role(text: &str) -> RoleInstance {
    RoleInstance::parse(text).unwrap()
}

fn did(text: &str) -> DecisionId {
    DecisionId::parse(text).unwrap()
}

fn mid(text: &str) -> MessageId {
    MessageId::parse(text).unwrap()
}

fn key(text: &str) -> OptionKey {
    OptionKey::parse(text).unwrap()
}

fn acme() -> BusinessId {
    BusinessId::parse("acme").unwrap()
}

fn lead() -> AgentRef {
    AgentRef {
        role: role("lead"),
        run: RunId::parse("run-1").unwrap(),
    }
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

// ---------------------------------------------------------------- envelope

#[test]
fn invalid_utf8_is_bad_request() {
    let mut line = req("role.claim", "{}").into_bytes();
    line[2] = 0xff;
    refuses_bytes(&line, "bad-request");
    let line = format!(r#"{{"cap":"{CAP}","verb":"trail","args":{{"subject":"a"#);
    let mut bytes = line.into_bytes();
    bytes.extend_from_slice(b"\xc3\x28\"}}");
    refuses_bytes(&bytes, "bad-request");
}

#[test]
fn text_that_is_not_one_json_value_is_bad_request() {
    for line in [
        "",
        " ",
        "{",
        "nul",
        "{'cap':1}",
        "\u{feff}{}",
        &format!("{} {{}}", req("role.claim", "{}")),
        &format!("{}x", req("role.claim", "{}")),
        &req("trail", r#"{"subject":"\ud800"}"#),
    ] {
        refuses(line, "bad-request");
    }
    // Surrounding whitespace is not a second value.
    assert_eq!(
        call(&format!(" \t{}\r ", req("role.claim", "{}"))),
        Call::RoleClaim
    );
}

#[test]
fn a_non_object_is_bad_request() {
    for line in [
        "[]",
        "1",
        "\"x\"",
        "null",
        "true",
        &format!("[{}]", req("agents", "{}")),
    ] {
        refuses(line, "bad-request");
    }
}

#[test]
fn a_repeated_key_is_bad_request_at_every_depth() {
    refuses(
        &format!(r#"{{"cap":"{CAP}","cap":"{CAP}","verb":"agents"}}"#),
        "bad-request",
    );
    refuses(
        &req("trail", r#"{"subject":"lead","subject":"dev"}"#),
        "bad-request",
    );
    refuses(
        &req(
            "decision.raise",
            r#"{"action":"repo.merge","question":"q","options":[{"key":"yes","key":"no","text":"t"}],
               "recommendation":"r","blocking":false}"#,
        ),
        "bad-request",
    );
}

#[test]
fn an_unknown_top_level_key_is_unknown_key_before_anything_else() {
    refuses(
        &format!(r#"{{"cap":"{CAP}","verb":"agents","id":1}}"#),
        "unknown-key",
    );
    refuses(r#"{"cap":5,"verb":7,"business":"acme"}"#, "unknown-key");
    refuses(r#"{"Cap":"x"}"#, "unknown-key");
}

#[test]
fn a_missing_or_mistyped_cap_or_verb_is_bad_request() {
    for line in [
        r#"{}"#.to_owned(),
        r#"{"verb":"agents"}"#.to_owned(),
        format!(r#"{{"cap":"{CAP}"}}"#),
        format!(r#"{{"cap":["{CAP}"],"verb":"agents"}}"#),
        r#"{"cap":null,"verb":"agents"}"#.to_owned(),
        format!(r#"{{"cap":"{CAP}","verb":null}}"#),
        format!(r#"{{"cap":"{CAP}","verb":{{"name":"agents"}}}}"#),
    ] {
        refuses(&line, "bad-request");
    }
}

#[test]
fn a_cap_that_is_not_64_lowercase_hex_is_bad_capability() {
    for cap in [
        String::new(),
        CAP[..63].to_owned(),
        format!("{CAP}0"),
        CAP.to_uppercase(),
        format!("g{}", &CAP[1..]),
        format!(" {}", &CAP[1..]),
    ] {
        refuses(
            &format!(r#"{{"cap":"{cap}","verb":"agents"}}"#),
            "bad-capability",
        );
    }
    // The capability is checked before the verb.
    refuses(r#"{"cap":"x","verb":"nope"}"#, "bad-capability");
}

#[test]
fn an_unknown_verb_is_unknown_verb() {
    for verb in [
        "",
        "Role.claim",
        "role.claim ",
        "role",
        "authorize",
        "record_event",
        "recordEvent",
        "browser.open",
        "bindLaunch",
    ] {
        refuses(&req(verb, "{}"), "unknown-verb");
    }
    // The verb is checked before its arguments.
    refuses(
        &req("browser.click", r#"{"action":"open"}"#),
        "unknown-verb",
    );
    refuses(
        &req("browser.request", r#"{"action":"open","url":"x"}"#),
        "unknown-key",
    );
}

#[test]
fn args_that_are_not_an_object_are_bad_request() {
    for args in ["null", "[]", "\"\"", "0", "true"] {
        refuses(&req("role.claim", args), "bad-request");
    }
}

#[test]
fn oversized_lines_are_request_too_large_before_parsing() {
    // The socket frames lines with the same limit.
    assert_eq!(MAX_REQUEST_BYTES, mosaic_adapters::socket::MAX_REQUEST);
    let base = req("role.claim", "{}");
    let exact = format!("{base}{}", " ".repeat(MAX_REQUEST_BYTES - base.len()));
    assert_eq!(exact.len(), MAX_REQUEST_BYTES);
    assert_eq!(call(&exact), Call::RoleClaim);
    refuses(&format!("{exact} "), "request-too-large");
    refuses_bytes(&vec![0xff; MAX_REQUEST_BYTES + 1], "request-too-large");
}

#[test]
fn deep_nesting_and_huge_numbers_are_bad_request_without_panicking() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    refuses(
        &req("trail", &format!(r#"{{"subject":{deep}}}"#)),
        "bad-request",
    );
    refuses(&deep, "bad-request");
    let objects = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    refuses(&objects, "bad-request");
    // Far past the line limit, the JSON parser alone still stops early.
    assert_eq!(
        parse_json("[".repeat(1_000_000).as_bytes()),
        Err(Refusal::BadRequest)
    );
    // Just inside serde_json's limit is fine JSON, and the wrong type.
    let ok_depth = format!("{}{}", "[".repeat(100), "]".repeat(100));
    refuses(
        &req("trail", &format!(r#"{{"subject":{ok_depth}}}"#)),
        "bad-request",
    );
    for number in [
        "1e999999999".to_owned(),
        "-1e400".to_owned(),
        format!("1{}", "0".repeat(60_000)),
        "123456789012345678901234567890".to_owned(),
        "0.000000000000000000000000000001e-999999".to_owned(),
    ] {
        refuses(
            &req("trail", &format!(r#"{{"subject":{number}}}"#)),
            "bad-request",
        );
    }
}

// -------------------------------------------------------------- arguments

#[test]
fn verbs_without_arguments_take_no_args_or_an_empty_object() {
    let none = [
        (Verb::RoleClaim, Call::RoleClaim),
        (Verb::RoleRelease, Call::RoleRelease),
        (Verb::MessageReceive, Call::MessageReceive),
        (Verb::LaunchRevoke, Call::LaunchRevoke),
        (Verb::LaunchRestore, Call::LaunchRestore),
        (Verb::Inbox, Call::Inbox),
        (Verb::Tasks, Call::Tasks),
        (Verb::Agents, Call::Agents),
        (Verb::Head, Call::Head),
    ];
    for (verb, expected) in none {
        let v = verb.as_str();
        assert_eq!(call(&req(v, "{}")), expected);
        assert_eq!(
            call(&format!(r#"{{"verb":"{v}","cap":"{CAP}"}}"#)),
            expected
        );
        assert!(verb.arg_keys().is_empty());
        refuses(&req(v, r#"{"id":"x"}"#), "unknown-key");
    }
}

#[test]
fn every_verb_refuses_a_key_it_does_not_define_as_unknown_key() {
    for &verb in Verb::ALL {
        // Even when the defined arguments are missing or wrong.
        refuses(&req(verb.as_str(), r#"{"zzz":1}"#), "unknown-key");
        refuses(&req(verb.as_str(), r#"{"id":5,"cap":"x"}"#), "unknown-key");
    }
    // The spec spells `approvalChoice` in camelCase and the rest in snake_case.
    refuses(
        &req("decision.raise", r#"{"approval_choice":"yes"}"#),
        "unknown-key",
    );
    refuses(&req("message.send", r#"{"inReplyTo":"x"}"#), "unknown-key");
    refuses(
        &req("decision.raise", r#"{"taskRef":"vikunja:1/1"}"#),
        "unknown-key",
    );
    // A stray key in an option is unknown too, whatever else is wrong.
    refuses(
        &req(
            "decision.raise",
            r#"{"action":"Bad","options":[{"key":"yes","text":"t","default":true}]}"#,
        ),
        "unknown-key",
    );
}

#[test]
fn the_verb_table_is_exactly_the_specs() {
    let names: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(
        names,
        [
            "role.claim",
            "role.release",
            "role.revoke",
            "decision.raise",
            "decision.resolve",
            "decision.seen",
            "decision.withdraw",
            "message.send",
            "message.receive",
            "message.read",
            "event.emit",
            "launch.revoke",
            "launch.restore",
            "inbox",
            "tasks",
            "agents",
            "trail",
            "head",
            "changes",
            "browser.request",
        ]
    );
    for &verb in Verb::ALL {
        assert_eq!(Verb::parse(verb.as_str()), Ok(verb));
        assert_eq!(verb.to_string(), verb.as_str());
    }
    assert_eq!(Verb::RoleRevoke.arg_keys(), ["role", "decision"]);
    assert_eq!(
        Verb::DecisionRaise.arg_keys(),
        [
            "action",
            "question",
            "options",
            "recommendation",
            "blocking",
            "domain",
            "target",
            "project",
            "task_ref",
            "requirement_ref",
            "supersedes",
            "choice",
            "approvalChoice"
        ]
    );
    assert_eq!(Verb::DecisionResolve.arg_keys(), ["id", "choice", "note"]);
    assert_eq!(Verb::DecisionSeen.arg_keys(), ["id", "note"]);
    assert_eq!(Verb::DecisionWithdraw.arg_keys(), ["id", "note"]);
    assert_eq!(
        Verb::MessageSend.arg_keys(),
        ["to", "body", "class", "in_reply_to", "corrects", "decision"]
    );
    assert_eq!(Verb::MessageRead.arg_keys(), ["id"]);
    assert_eq!(Verb::EventEmit.arg_keys(), ["kind", "body", "subject"]);
    assert_eq!(Verb::Trail.arg_keys(), ["subject"]);
}

#[test]
fn a_missing_required_argument_is_bad_request() {
    let cases = [
        ("role.revoke", r#"{"role":"dev"}"#.to_owned()),
        ("role.revoke", format!(r#"{{"decision":"{D1}"}}"#)),
        ("decision.resolve", format!(r#"{{"id":"{D1}"}}"#)),
        ("decision.resolve", r#"{"choice":"yes"}"#.to_owned()),
        ("decision.seen", "{}".to_owned()),
        ("decision.withdraw", r#"{"note":"n"}"#.to_owned()),
        ("message.send", r#"{"to":"dev"}"#.to_owned()),
        ("message.send", r#"{"body":"hi"}"#.to_owned()),
        ("message.read", "{}".to_owned()),
        ("event.emit", r#"{"kind":"action.allowed"}"#.to_owned()),
        ("event.emit", r#"{"body":{"action":"routine"}}"#.to_owned()),
        ("trail", "{}".to_owned()),
        ("trail", r#"{"subject":null}"#.to_owned()),
    ];
    for (verb, args) in cases {
        refuses(&req(verb, &args), "bad-request");
    }
    let full = raise_args();
    for required in [
        "action",
        "question",
        "options",
        "recommendation",
        "blocking",
    ] {
        let mut args = full.clone();
        args.as_object_mut().unwrap().remove(required);
        refuses(&req("decision.raise", &args.to_string()), "bad-request");
        args[required] = Value::Null;
        refuses(&req("decision.raise", &args.to_string()), "bad-request");
    }
    refuses(
        &req(
            "decision.raise",
            &raise_with("options", json!([{"key": "yes"}])),
        ),
        "bad-request",
    );
}

#[test]
fn a_wrongly_typed_argument_is_bad_request() {
    let cases = [
        ("role.revoke", format!(r#"{{"role":1,"decision":"{D1}"}}"#)),
        (
            "decision.resolve",
            format!(r#"{{"id":"{D1}","choice":true}}"#),
        ),
        ("decision.seen", format!(r#"{{"id":"{D1}","note":5}}"#)),
        ("decision.withdraw", format!(r#"{{"id":["{D1}"]}}"#)),
        (
            "message.send",
            r#"{"to":"dev","body":{"text":"hi"}}"#.to_owned(),
        ),
        (
            "message.send",
            r#"{"to":"dev","body":"hi","class":1}"#.to_owned(),
        ),
        ("message.read", r#"{"id":1}"#.to_owned()),
        ("trail", r#"{"subject":["lead"]}"#.to_owned()),
        (
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine"},"subject":1}"#.to_owned(),
        ),
    ];
    for (verb, args) in cases {
        refuses(&req(verb, &args), "bad-request");
    }
    for (field, value) in [
        ("action", json!(1)),
        ("question", json!(["q"])),
        ("options", json!({"key": "yes", "text": "t"})),
        ("options", json!([["yes", "Yes"]])),
        ("options", json!(["yes"])),
        ("options", json!([{"key": "yes", "text": 1}])),
        ("recommendation", json!(false)),
        ("blocking", json!("true")),
        ("blocking", json!(1)),
        ("domain", json!(1)),
        ("target", json!(1)),
        ("project", json!(1)),
        ("task_ref", json!(3)),
        ("requirement_ref", json!({})),
        ("supersedes", json!(1)),
        ("choice", json!(1)),
        ("approvalChoice", json!(["yes"])),
    ] {
        refuses(
            &req("decision.raise", &raise_with(field, value)),
            "bad-request",
        );
    }
}

#[test]
fn malformed_ids_refuse_with_the_domain_parsers_code() {
    let upper = "ABCDEF12-1111-4111-8111-111111111111";
    let cases = [
        (
            "role.revoke",
            format!(r#"{{"role":"a/b","decision":"{D1}"}}"#),
            "bad-id",
        ),
        (
            "role.revoke",
            format!(r#"{{"role":"human","decision":"{D1}"}}"#),
            "bad-id",
        ),
        (
            "role.revoke",
            format!(r#"{{"role":"dev","decision":"{upper}"}}"#),
            "bad-id",
        ),
        (
            "decision.resolve",
            r#"{"id":"1","choice":"yes"}"#.to_owned(),
            "bad-id",
        ),
        (
            "decision.resolve",
            format!(r#"{{"id":"{D1}","choice":"a b"}}"#),
            "bad-request",
        ),
        (
            "decision.resolve",
            format!(r#"{{"id":"{D1}","choice":""}}"#),
            "bad-request",
        ),
        ("decision.seen", format!(r#"{{"id":"{{{D1}}}"}}"#), "bad-id"),
        (
            "message.send",
            r#"{"to":"dev/1","body":"hi"}"#.to_owned(),
            "bad-id",
        ),
        (
            "message.send",
            r#"{"to":"Human ","body":"hi"}"#.to_owned(),
            "bad-id",
        ),
        (
            "message.send",
            r#"{"to":"dev","body":"hi","class":"info"}"#.to_owned(),
            "bad-request",
        ),
        (
            "message.send",
            r#"{"to":"dev","body":"hi","class":"REVIEW_REQUEST"}"#.to_owned(),
            "bad-request",
        ),
        (
            "message.send",
            r#"{"to":"dev","body":"hi","in_reply_to":"x"}"#.to_owned(),
            "bad-id",
        ),
        (
            "message.send",
            r#"{"to":"dev","body":"hi","corrects":"x"}"#.to_owned(),
            "bad-id",
        ),
        (
            "message.send",
            r#"{"to":"dev","body":"hi","decision":"x"}"#.to_owned(),
            "bad-id",
        ),
        ("message.read", format!(r#"{{"id":"{upper}"}}"#), "bad-id"),
        (
            "trail",
            r#"{"subject":"vikunja:01/2"}"#.to_owned(),
            "bad-task-ref",
        ),
        (
            "trail",
            r#"{"subject":"vikunja:1"}"#.to_owned(),
            "bad-task-ref",
        ),
        ("trail", r#"{"subject":"human"}"#.to_owned(), "bad-id"),
        ("trail", format!(r#"{{"subject":"{upper}"}}"#), "bad-id"),
        ("trail", r#"{"subject":""}"#.to_owned(), "bad-id"),
    ];
    for (verb, args, code) in cases {
        refuses(&req(verb, &args), code);
    }
    for (field, value, code) in [
        ("action", "Repo.Merge", "unknown-action"),
        ("action", "", "unknown-action"),
        ("target", "", "bad-request"),
        ("target", "a\nb", "bad-request"),
        ("task_ref", "vikunja:0/1", "bad-task-ref"),
        ("supersedes", "nope", "bad-id"),
        ("choice", "not ok", "bad-request"),
        ("approvalChoice", "", "bad-request"),
    ] {
        refuses(
            &req("decision.raise", &raise_with(field, json!(value))),
            code,
        );
    }
    refuses(
        &req(
            "decision.raise",
            &raise_with("options", json!([{"key": "y es", "text": "t"}])),
        ),
        "bad-request",
    );
    // The first failing argument in the spec's order decides.
    refuses(
        &req("message.send", r#"{"decision":"x","to":"a/b","body":1}"#),
        "bad-id",
    );
    refuses(
        &req("decision.raise", &raise_with("action", json!("BAD"))),
        "unknown-action",
    );
}

#[test]
fn domain_is_technical_or_delivery_and_nothing_else() {
    let technical = |value: Value| {
        let Call::DecisionRaise(args) = call(&req("decision.raise", &raise_with("domain", value)))
        else {
            panic!("not a raise");
        };
        args.fields.technical
    };
    assert!(technical(json!("technical")));
    assert!(!technical(json!("delivery")));
    assert!(!technical(Value::Null));
    let mut args = raise_args();
    args.as_object_mut().unwrap().remove("domain");
    assert!(matches!(
        call(&req("decision.raise", &args.to_string())),
        Call::DecisionRaise(a) if !a.fields.technical
    ));
    for bad in ["Technical", "", "technical ", "other"] {
        refuses(
            &req("decision.raise", &raise_with("domain", json!(bad))),
            "bad-request",
        );
    }
}

#[test]
fn message_classes_are_the_eight_in_exact_case() {
    for class in MessageClass::ALL {
        let line = req(
            "message.send",
            &json!({"to": "dev", "body": "b", "class": class.as_str()}).to_string(),
        );
        assert!(matches!(call(&line), Call::MessageSend(a) if a.class == Some(class)));
        let lower = req(
            "message.send",
            &json!({"to": "dev", "body": "b", "class": class.as_str().to_lowercase()}).to_string(),
        );
        refuses(&lower, "bad-request");
    }
}

#[test]
fn event_emit_accepts_only_routine_action_allowed() {
    let good = call(&req(
        "event.emit",
        r#"{"kind":"action.allowed","body":{"action":"routine","target":"gitea:acme/bus"},"subject":"vikunja:3/41"}"#,
    ));
    assert_eq!(
        good,
        Call::EventEmit {
            target: Some(Target::parse("gitea:acme/bus").unwrap()),
            subject: Some(SubjectRef::Task(TaskRef::parse("vikunja:3/41").unwrap())),
        }
    );
    assert_eq!(
        call(&req(
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine"}}"#
        )),
        Call::EventEmit {
            target: None,
            subject: None
        }
    );
    for args in [
        r#"{"kind":"task.created","body":{"action":"routine"}}"#,
        r#"{"kind":"Action.allowed","body":{"action":"routine"}}"#,
        r#"{"kind":"action.allowed","body":{"action":"message.send"}}"#,
        r#"{"kind":"action.allowed","body":{"action":"routine","extra":1}}"#,
        r#"{"kind":"action.allowed","body":{"action":"routine","decision":"x"}}"#,
        r#"{"kind":"action.allowed","body":{}}"#,
        r#"{"kind":"action.allowed","body":["routine"]}"#,
        r#"{"kind":"action.allowed","body":"{\"action\":\"routine\"}"}"#,
        r#"{"kind":"action.allowed","body":null}"#,
        r#"{"kind":"action.allowed","body":{"action":"routine","target":""}}"#,
        r#"{"kind":"action.allowed","body":{"action":"routine","target":5}}"#,
    ] {
        refuses(&req("event.emit", args), "bad-request");
    }
    refuses(
        &req(
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine"},"subject":"vikunja:0/0"}"#,
        ),
        "bad-task-ref",
    );
}

#[test]
fn subjects_are_task_refs_uuids_or_role_instances() {
    let subject = |text: &str| {
        let Call::Trail { subject } = call(&req("trail", &json!({ "subject": text }).to_string()))
        else {
            panic!("not a trail");
        };
        subject
    };
    assert_eq!(
        subject("vikunja:3/41"),
        SubjectRef::Task(TaskRef::parse("vikunja:3/41").unwrap())
    );
    let uuid = subject(D1);
    assert_eq!(uuid, SubjectRef::Uuid(UuidRef::parse(D1).unwrap()));
    assert_eq!(uuid.to_string(), D1);
    assert_eq!(subject("dev-1"), SubjectRef::Role(role("dev-1")));
    // A UUID-shaped name is read as a UUID, never as a role.
    assert!(matches!(subject(M1), SubjectRef::Uuid(_)));
    let u = UuidRef::parse(D1).unwrap();
    assert_eq!((u.decision(), u.message()), (did(D1), mid(D1)));
}

#[test]
fn optional_arguments_given_as_null_are_absent() {
    let mut args = raise_args();
    for optional in [
        "domain",
        "target",
        "project",
        "task_ref",
        "requirement_ref",
        "supersedes",
        "choice",
        "approvalChoice",
    ] {
        args[optional] = Value::Null;
    }
    args["blocking"] = json!(false);
    let Call::DecisionRaise(raise) = call(&req("decision.raise", &args.to_string())) else {
        panic!("not a raise");
    };
    assert_eq!(
        (
            raise.fields.target,
            raise.fields.project,
            raise.fields.task_ref,
            raise.fields.supersedes,
            raise.choice
        ),
        (None, None, None, None, None)
    );
    assert_eq!(
        call(&req(
            "decision.seen",
            &format!(r#"{{"id":"{D1}","note":null}}"#)
        )),
        Call::DecisionSeen {
            id: did(D1),
            note: None
        }
    );
}

// ------------------------------------------------------------- round trips

fn raise_args() -> Value {
    json!({
        "action": "repo.merge",
        "question": "Merge the branch?",
        "options": [{"key": "yes", "text": "Merge it"}, {"key": "no", "text": "Wait"}],
        "recommendation": "yes",
        "blocking": true,
        "domain": "technical",
        "target": "gitea:acme/bus",
        "project": "bus",
        "task_ref": "vikunja:3/41",
        "requirement_ref": "R-7",
        "supersedes": D2,
        "choice": "yes",
        "approvalChoice": "yes",
    })
}

fn raise_with(field: &str, value: Value) -> String {
    let mut args = raise_args();
    args[field] = value;
    args.to_string()
}

fn expected_raise() -> RaiseInput {
    RaiseInput {
        fields: RaiseFields {
            action: Action::parse("repo.merge").unwrap(),
            target: Some(Target::parse("gitea:acme/bus").unwrap()),
            question: "Merge the branch?".into(),
            options: vec![
                DecisionOption {
                    key: key("yes"),
                    text: "Merge it".into(),
                },
                DecisionOption {
                    key: key("no"),
                    text: "Wait".into(),
                },
            ],
            recommendation: "yes".into(),
            blocking: true,
            technical: true,
            project: Some("bus".into()),
            task_ref: Some(TaskRef::parse("vikunja:3/41").unwrap()),
            requirement_ref: Some("R-7".into()),
            supersedes: Some(did(D2)),
        },
        choice: Some(key("yes")),
        approval_choice: Some(key("yes")),
    }
}

#[test]
fn representative_requests_parse_into_their_calls() {
    let cases = [
        (
            req(
                "role.revoke",
                &format!(r#"{{"role":"dev-1","decision":"{D1}"}}"#),
            ),
            Call::RoleRevoke {
                role: role("dev-1"),
                decision: did(D1),
            },
        ),
        (
            req("decision.raise", &raise_args().to_string()),
            Call::DecisionRaise(Box::new(expected_raise())),
        ),
        (
            req(
                "decision.raise",
                r#"{"action":"role.revoke","question":"q","options":[{"key":"yes","text":""}],"recommendation":"","blocking":false}"#,
            ),
            Call::DecisionRaise(Box::new(RaiseInput {
                fields: RaiseFields {
                    action: Action::parse("role.revoke").unwrap(),
                    target: None,
                    question: "q".into(),
                    options: vec![DecisionOption {
                        key: key("yes"),
                        text: String::new(),
                    }],
                    recommendation: String::new(),
                    blocking: false,
                    technical: false,
                    project: None,
                    task_ref: None,
                    requirement_ref: None,
                    supersedes: None,
                },
                choice: None,
                approval_choice: None,
            })),
        ),
        (
            req(
                "decision.resolve",
                &format!(r#"{{"id":"{D1}","choice":"no","note":"later"}}"#),
            ),
            Call::DecisionResolve {
                id: did(D1),
                choice: key("no"),
                note: Some("later".into()),
            },
        ),
        (
            req("decision.seen", &format!(r#"{{"id":"{D1}"}}"#)),
            Call::DecisionSeen {
                id: did(D1),
                note: None,
            },
        ),
        (
            req(
                "decision.withdraw",
                &format!(r#"{{"id":"{D1}","note":""}}"#),
            ),
            Call::DecisionWithdraw {
                id: did(D1),
                note: Some(String::new()),
            },
        ),
        (
            req(
                "message.send",
                &format!(
                    r#"{{"to":"dev-1","body":"line 1\nline 2 ü","class":"REVIEW-REQUEST","in_reply_to":"{M1}","corrects":"{M2}","decision":"{D1}"}}"#
                ),
            ),
            Call::MessageSend(Box::new(SendInput {
                to: Recipient::Role(role("dev-1")),
                body: "line 1\nline 2 ü".into(),
                class: Some(MessageClass::ReviewRequest),
                in_reply_to: Some(mid(M1)),
                corrects: Some(mid(M2)),
                decision: Some(did(D1)),
            })),
        ),
        (
            req("message.send", r#"{"to":"human","body":""}"#),
            Call::MessageSend(Box::new(SendInput {
                to: Recipient::Human,
                body: String::new(),
                class: None,
                in_reply_to: None,
                corrects: None,
                decision: None,
            })),
        ),
        (
            req("message.read", &format!(r#"{{"id":"{M1}"}}"#)),
            Call::MessageRead { id: mid(M1) },
        ),
        (
            req(
                "event.emit",
                r#"{"kind":"action.allowed","body":{"action":"routine"},"subject":"lead"}"#,
            ),
            Call::EventEmit {
                target: None,
                subject: Some(SubjectRef::Role(role("lead"))),
            },
        ),
        (
            req("trail", &format!(r#"{{"subject":"{M1}"}}"#)),
            Call::Trail {
                subject: SubjectRef::Uuid(UuidRef::parse(M1).unwrap()),
            },
        ),
    ];
    for (line, expected) in cases {
        let got = call(&line);
        assert_eq!(got.verb(), expected.verb());
        assert_eq!(got, expected, "{line}");
    }
}

#[test]
fn the_envelope_gives_cap_and_verb_before_the_arguments_are_parsed() {
    let line = req("message.read", r#"{"id":"nope"}"#);
    let envelope = Envelope::parse(line.as_bytes()).unwrap();
    assert_eq!(envelope.cap(), Some(&Capability::parse(CAP).unwrap()));
    assert_eq!(envelope.verb(), Verb::MessageRead);
    assert_eq!(envelope.into_call(), Err(Refusal::BadId));
    // The human CLI's `{business, verb, args}` reuses the argument parser.
    assert_eq!(
        Call::parse(Verb::DecisionSeen, Some(json!({"id": D1}))),
        Ok(Call::DecisionSeen {
            id: did(D1),
            note: None
        })
    );
    assert_eq!(
        Call::parse(Verb::LaunchRevoke, None),
        Ok(Call::LaunchRevoke)
    );
    assert_eq!(
        Call::parse(Verb::LaunchRevoke, Some(Value::Null)),
        Err(Refusal::BadRequest)
    );
    // The capability never shows in debug output.
    assert!(!format!("{:?}", parse_request(line.as_bytes())).contains("0123456789abcdef"));
}

// ---------------------------------------------------------------- dispatch

/// Dispatches `call` with counting closures: `(dispatch, ids drawn, kinds asked)`.
fn dispatch(call: Call, kind: Result<UuidKind, Refusal>) -> (Result<Dispatch, Refusal>, u32, u32) {
    let (ids, kinds) = (Cell::new(0), Cell::new(0));
    let d = call.into_dispatch(
        || {
            ids.set(ids.get() + 1);
            [0xab; 16]
        },
        |_| {
            kinds.set(kinds.get() + 1);
            kind
        },
    );
    (d, ids.get(), kinds.get())
}

#[test]
fn raise_and_send_draw_exactly_one_fresh_id_and_nothing_else_does() {
    let fresh = "abababab-abab-4bab-abab-abababababab";
    let (d, ids, kinds) = dispatch(
        Call::DecisionRaise(Box::new(expected_raise())),
        Err(Refusal::BadRequest),
    );
    assert_eq!((ids, kinds), (1, 0));
    let input = Box::new(expected_raise());
    let raise = Command::Raise {
        id: did(fresh),
        input,
    };
    assert_eq!(d, Ok(Dispatch::Command(raise)));

    let send = SendInput {
        to: Recipient::Human,
        body: "b".into(),
        class: None,
        in_reply_to: Some(mid(M1)),
        corrects: None,
        decision: None,
    };
    let (d, ids, kinds) = dispatch(
        Call::MessageSend(Box::new(send.clone())),
        Err(Refusal::BadRequest),
    );
    assert_eq!((ids, kinds), (1, 0));
    let input = Box::new(send);
    assert!(matches!(&d, Ok(Dispatch::Command(Command::Send { known, .. })) if known.is_empty()));
    let send = Command::Send {
        id: mid(fresh),
        input,
        known: Vec::new(),
    };
    assert_eq!(d, Ok(Dispatch::Command(send)));

    let plain = [
        (Call::RoleClaim, Command::Claim),
        (Call::RoleRelease, Command::Release),
        (
            Call::RoleRevoke {
                role: role("dev"),
                decision: did(D1),
            },
            Command::Revoke {
                role: role("dev"),
                decision: did(D1),
            },
        ),
        (
            Call::DecisionResolve {
                id: did(D1),
                choice: key("yes"),
                note: None,
            },
            Command::Resolve {
                id: did(D1),
                choice: key("yes"),
                note: None,
            },
        ),
        (
            Call::DecisionSeen {
                id: did(D1),
                note: Some("n".into()),
            },
            Command::Seen {
                id: did(D1),
                note: Some("n".into()),
            },
        ),
        (
            Call::DecisionWithdraw {
                id: did(D1),
                note: None,
            },
            Command::Withdraw {
                id: did(D1),
                note: None,
            },
        ),
        (Call::MessageReceive, Command::Receive { batch: Vec::new() }),
        (
            Call::MessageRead { id: mid(M1) },
            Command::Read {
                id: mid(M1),
                known: None,
            },
        ),
        (
            Call::EventEmit {
                target: None,
                subject: Some(SubjectRef::Role(role("lead"))),
            },
            Command::EmitRoutine {
                target: None,
                subject: Some(Subject::Role(role("lead"))),
            },
        ),
        (Call::LaunchRevoke, Command::LaunchRevoke),
        (Call::LaunchRestore, Command::LaunchRestore),
    ];
    for (c, expected) in plain {
        assert_eq!(c.verb().as_str(), expected.verb());
        assert_eq!(
            dispatch(c, Err(Refusal::BadRequest)),
            (Ok(Dispatch::Command(expected)), 0, 0)
        );
    }
}

#[test]
fn read_verbs_become_queries_and_uuid_subjects_are_resolved_by_the_runtime() {
    for (c, q) in [
        (Call::Inbox, Query::Inbox),
        (Call::Tasks, Query::Tasks),
        (Call::Agents, Query::Agents),
        (
            Call::Trail {
                subject: SubjectRef::Task(TaskRef::parse("vikunja:3/41").unwrap()),
            },
            Query::Trail(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap())),
        ),
    ] {
        assert_eq!(
            dispatch(c, Err(Refusal::BadRequest)),
            (Ok(Dispatch::Query(q)), 0, 0)
        );
    }
    let trail = || Call::Trail {
        subject: SubjectRef::Uuid(UuidRef::parse(D1).unwrap()),
    };
    assert_eq!(
        dispatch(trail(), Ok(UuidKind::Decision)),
        (
            Ok(Dispatch::Query(Query::Trail(Subject::Decision(did(D1))))),
            0,
            1
        )
    );
    assert_eq!(
        dispatch(trail(), Ok(UuidKind::Message)),
        (
            Ok(Dispatch::Query(Query::Trail(Subject::Message(mid(D1))))),
            0,
            1
        )
    );
    assert_eq!(
        dispatch(trail(), Err(Refusal::UnknownReference)),
        (Err(Refusal::UnknownReference), 0, 1)
    );
    let emit = Call::EventEmit {
        target: Some(Target::parse("x").unwrap()),
        subject: Some(SubjectRef::Uuid(UuidRef::parse(M1).unwrap())),
    };
    assert_eq!(
        dispatch(emit.clone(), Ok(UuidKind::Message)),
        (
            Ok(Dispatch::Command(Command::EmitRoutine {
                target: Some(Target::parse("x").unwrap()),
                subject: Some(Subject::Message(mid(M1))),
            })),
            0,
            1
        )
    );
    assert_eq!(
        dispatch(emit, Err(Refusal::CrossBusiness)),
        (Err(Refusal::CrossBusiness), 0, 1)
    );
}

// ---------------------------------------------------------------- replies

#[test]
fn response_lines_are_exact_and_single_line() {
    assert_eq!(wire::ok(json!({})), r#"{"ok":true,"result":{}}"#);
    assert_eq!(
        wire::ok(json!(["a\nb"])),
        r#"{"ok":true,"result":["a\nb"]}"#
    );
    assert_eq!(
        wire::err(Refusal::BadRequest),
        r#"{"ok":false,"error":"bad-request"}"#
    );
    assert_eq!(wire::response(Ok(json!(1))), r#"{"ok":true,"result":1}"#);
    assert_eq!(
        wire::response(Err(Refusal::DecisionConsumed)),
        r#"{"ok":false,"error":"decision-consumed"}"#
    );
    for &r in Refusal::ALL {
        let line = wire::err(r);
        assert!(!line.contains('\n'));
        assert_eq!(
            serde_json::from_str::<Value>(&line).unwrap(),
            json!({"ok": false, "error": r.code()})
        );
    }
}

fn record() -> DecisionRecord {
    DecisionRecord {
        id: did(D1),
        business: acme(),
        raiser: lead(),
        fields: RaiseFields {
            action: Action::parse("repo.merge").unwrap(),
            target: Some(Target::parse("gitea:acme/bus").unwrap()),
            question: "Merge?".into(),
            options: vec![
                DecisionOption {
                    key: key("yes"),
                    text: "Merge".into(),
                },
                DecisionOption {
                    key: key("no"),
                    text: "Wait".into(),
                },
            ],
            recommendation: "yes".into(),
            blocking: true,
            technical: true,
            project: Some("bus".into()),
            task_ref: Some(TaskRef::parse("vikunja:3/41").unwrap()),
            requirement_ref: None,
            supersedes: Some(did(D2)),
        },
        approval_choice: key("yes"),
        class: ActionClass::CrossRole,
        route: Route::Role(role("arch")),
        holder: None,
    }
}

fn record_fields() -> Value {
    json!({
        "id": D1,
        "action": "repo.merge",
        "target": "gitea:acme/bus",
        "question": "Merge?",
        "options": [{"key": "yes", "text": "Merge"}, {"key": "no", "text": "Wait"}],
        "recommendation": "yes",
        "blocking": true,
        "domain": "technical",
        "project": "bus",
        "task_ref": "vikunja:3/41",
        "requirement_ref": null,
        "supersedes": D2,
        "class": "cross-role",
        "route": "arch",
        "holder": null,
        "raisedBy": {"role": "lead", "run": "run-1"},
        "authorization": {"action": "repo.merge", "target": "gitea:acme/bus", "approvalChoice": "yes"},
    })
}

fn with(mut base: Value, extra: Value) -> Value {
    let (Value::Object(b), Value::Object(e)) = (&mut base, extra) else {
        panic!("objects only");
    };
    b.extend(e);
    base
}

#[test]
fn decisions_encode_with_status_choice_and_authorization_context() {
    let open = Decision {
        record: record(),
        status: Status::Open,
    };
    assert_eq!(
        decision_json(&open),
        with(
            record_fields(),
            json!({"status": "open", "choice": null, "superseded_by": null})
        )
    );
    let resolved = Decision {
        status: Status::Resolved(key("no")),
        ..open.clone()
    };
    assert_eq!(
        decision_json(&resolved),
        with(
            record_fields(),
            json!({"status": "resolved", "choice": "no", "superseded_by": null})
        )
    );
    let superseded = Decision {
        status: Status::Superseded(did(D2)),
        ..open.clone()
    };
    assert_eq!(decision_json(&superseded)["superseded_by"], json!(D2));
    assert_eq!(
        decision_json(&Decision {
            status: Status::Withdrawn,
            ..open
        })["status"],
        json!("withdrawn")
    );
    // A gated revoke routed to the human, in the delivery domain.
    let revoke = Decision {
        record: {
            let mut r = DecisionRecord {
                class: ActionClass::Gated,
                route: Route::Human,
                holder: Some(RunId::parse("run-9").unwrap()),
                approval_choice: key("revoke"),
                ..record()
            };
            r.fields.action = Action::parse("role.revoke").unwrap();
            r.fields.target = Some(Target::parse("dev").unwrap());
            r.fields.technical = false;
            r
        },
        status: Status::Open,
    };
    let v = decision_json(&revoke);
    assert_eq!(
        (&v["route"], &v["class"], &v["domain"], &v["holder"]),
        (
            &json!("human"),
            &json!("gated"),
            &json!("delivery"),
            &json!("run-9")
        )
    );
    assert_eq!(
        v["authorization"],
        json!({"action": "role.revoke", "target": "dev", "approvalChoice": "revoke"})
    );
}

#[test]
fn the_inbox_written_straight_to_text_is_its_value_byte_for_byte() {
    let open = Decision {
        record: record(),
        status: Status::Open,
    };
    let delivered = MessageFacts {
        record: message(),
        delivered_to: Some(RunId::parse("run-2").unwrap()),
        read: false,
    };
    let human = MessageFacts {
        record: MessageRecord {
            id: mid(M2),
            from: Sender::Human,
            to: Recipient::Human,
            class: None,
            body: "quote \" slash \\ tab \t nul \u{0} bell \u{7} é 🦀 \u{2028}".into(),
            in_reply_to: None,
            corrects: Some(mid(M1)),
            decision: None,
            request: Some(EventId::parse(E1).unwrap()),
            ..message()
        },
        delivered_to: None,
        read: false,
    };
    let messages = [delivered, human];
    for (decisions, messages) in [
        (vec![], &messages[..0]),
        (vec![&open], &messages[..0]),
        (vec![], &messages[..]),
        (vec![&open, &open], &messages[..]),
    ] {
        let value = inbox_json(&decisions, messages, 0);
        assert_eq!(inbox_text(&decisions, messages, 0), value.to_string());
        assert_eq!(
            value.as_array().map(Vec::len),
            Some(decisions.len() + messages.len())
        );
    }
    let value = inbox_json(&[&open], &messages, 0);
    assert_eq!(value[0]["type"], "decision");
    assert_eq!(value[0]["id"], record_fields()["id"]);
    assert_eq!(
        value[1],
        with(
            message_fields(),
            json!({"delivered_to": "run-2", "read": false, "type": "message"})
        )
    );
    assert_eq!(value[2]["from"], "human");
    assert_eq!(value[2]["corrects"], M1);
    assert_eq!(
        wire::ok_text(&inbox_text(&[], &messages, 0)),
        wire::ok(inbox_json(&[], &messages, 0))
    );
}

fn message() -> MessageRecord {
    MessageRecord {
        id: mid(M1),
        business: acme(),
        from: Sender::Agent(lead()),
        to: Recipient::Role(role("dev")),
        class: Some(MessageClass::ReviewResult),
        body: "done\n".into(),
        in_reply_to: Some(mid(M2)),
        corrects: None,
        decision: Some(did(D1)),
        request: None,
    }
}

fn message_fields() -> Value {
    json!({
        "id": M1,
        "from": "lead",
        "from_run": "run-1",
        "to": "dev",
        "class": "REVIEW-RESULT",
        "body": "done\n",
        "in_reply_to": M2,
        "corrects": null,
        "decision": D1,
        "request": null,
    })
}

#[test]
fn messages_encode_with_and_without_delivery_facts() {
    assert_eq!(message_json(&message()), message_fields());
    let human = MessageRecord {
        from: Sender::Human,
        to: Recipient::Human,
        class: None,
        request: Some(EventId::parse(E1).unwrap()),
        ..message()
    };
    let v = message_json(&human);
    assert_eq!(
        (
            &v["from"],
            &v["from_run"],
            &v["to"],
            &v["class"],
            &v["request"]
        ),
        (
            &json!("human"),
            &Value::Null,
            &json!("human"),
            &Value::Null,
            &json!(E1)
        )
    );
    let facts = MessageFacts {
        record: message(),
        delivered_to: Some(RunId::parse("run-2").unwrap()),
        read: true,
    };
    assert_eq!(
        message_facts_json(&facts),
        with(
            message_fields(),
            json!({"delivered_to": "run-2", "read": true})
        )
    );
    let undelivered = MessageFacts {
        delivered_to: None,
        read: false,
        ..facts
    };
    assert_eq!(
        message_facts_json(&undelivered),
        with(
            message_fields(),
            json!({"delivered_to": null, "read": false})
        )
    );
}

#[test]
fn every_reply_variant_encodes() {
    let cases = [
        (
            Reply::Claimed(ClaimReply::Claimed),
            json!({"status": "claimed"}),
        ),
        (
            Reply::Claimed(ClaimReply::AlreadyHeld),
            json!({"status": "held"}),
        ),
        (Reply::Done, json!({})),
        (
            Reply::Decision(Box::new(Decision {
                record: record(),
                status: Status::Open,
            })),
            with(
                record_fields(),
                json!({"status": "open", "choice": null, "superseded_by": null}),
            ),
        ),
        (
            Reply::Sent {
                id: mid(M1),
                request: None,
            },
            json!({"id": M1, "request": null}),
        ),
        (
            Reply::Sent {
                id: mid(M1),
                request: Some(EventId::parse(E1).unwrap()),
            },
            json!({"id": M1, "request": E1}),
        ),
        (Reply::Received(vec![]), json!([])),
        (Reply::Received(vec![message()]), json!([message_fields()])),
        (
            Reply::Authorized(Grant::WithinRole),
            json!({"grant": "within-role", "decision": null}),
        ),
        (
            Reply::Authorized(Grant::Approval(did(D1))),
            json!({"grant": "approval", "decision": D1}),
        ),
    ];
    for (reply, expected) in cases {
        assert_eq!(reply_json(&reply), expected, "{reply:?}");
    }
    // `message.send` answers exactly `{id, request}`.
    let sent = reply_json(&Reply::Sent {
        id: mid(M1),
        request: None,
    });
    assert_eq!(sent.as_object().unwrap().len(), 2);
}

#[test]
fn tasks_encode_with_their_body_parsed() {
    let view = TaskView {
        task: TaskRef::parse("vikunja:3/41").unwrap(),
        kind: "task.updated".into(),
        body: r#"{"title":"Ship","done":false}"#.into(),
        tombstone: false,
        at: at("2026-01-02T03:04:05.006Z"),
    };
    assert_eq!(
        task_json(&view),
        json!({
            "task_ref": "vikunja:3/41",
            "kind": "task.updated",
            "body": {"title": "Ship", "done": false},
            "tombstone": false,
            "at": "2026-01-02T03:04:05.006Z",
        })
    );
    let odd = TaskView {
        body: "not json".into(),
        tombstone: true,
        kind: "task.deleted".into(),
        ..view
    };
    let v = task_json(&odd);
    assert_eq!(
        (&v["body"], &v["tombstone"]),
        (&json!("not json"), &json!(true))
    );
}

#[test]
fn every_evidence_kind_encodes_as_a_trail_record() {
    let acme = acme();
    let run = |t: &str| RunId::parse(t).unwrap();
    let cases: Vec<(Evidence, Value)> = vec![
        (
            Evidence::Launch(LaunchEvidence::Launched(LaunchRecord {
                business: acme.clone(),
                role: role("lead"),
                run: run("run-1"),
                harness: Harness::ClaudeCode,
                address: None,
                pid: 4242,
                start_time: 123_456,
            })),
            json!({"role": "lead", "run": "run-1", "harness": "claude-code", "address": null,
                   "pid": 4242, "start_time": 123_456}),
        ),
        (
            Evidence::Launch(LaunchEvidence::Revoked {
                business: acme.clone(),
            }),
            json!({}),
        ),
        (
            Evidence::Launch(LaunchEvidence::Restored {
                business: acme.clone(),
            }),
            json!({}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Claimed {
                business: acme.clone(),
                agent: lead(),
            }),
            json!({"role": "lead", "run": "run-1"}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Released {
                business: acme.clone(),
                agent: lead(),
            }),
            json!({"role": "lead", "run": "run-1"}),
        ),
        (
            Evidence::Claim(ClaimEvidence::Revoked {
                business: acme.clone(),
                agent: lead(),
                decision: did(D1),
            }),
            json!({"role": "lead", "run": "run-1", "decision": D1}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Raised(Box::new(record()))),
            record_fields(),
        ),
        (
            Evidence::Decision(DecisionEvidence::Resolved {
                business: acme.clone(),
                id: did(D1),
                choice: key("yes"),
                by: DecisionActor::Human,
                note: Some("ok".into()),
            }),
            json!({"id": D1, "choice": "yes", "by": "human", "by_run": null, "note": "ok"}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Seen {
                business: acme.clone(),
                id: did(D1),
                by: DecisionActor::Agent(lead()),
                note: None,
            }),
            json!({"id": D1, "by": "lead", "by_run": "run-1", "note": null}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Withdrawn {
                business: acme.clone(),
                id: did(D1),
                by: DecisionActor::Agent(lead()),
                note: Some("moot".into()),
            }),
            json!({"id": D1, "by": "lead", "by_run": "run-1", "note": "moot"}),
        ),
        (
            Evidence::Decision(DecisionEvidence::Superseded {
                business: acme.clone(),
                id: did(D2),
                by: did(D1),
            }),
            json!({"id": D2, "superseded_by": D1}),
        ),
        (
            Evidence::Consumed(Consumption {
                business: acme.clone(),
                decision: did(D1),
                agent: lead(),
                action: Action::parse("role.revoke").unwrap(),
                target: Some(Target::parse("dev").unwrap()),
            }),
            json!({"decision": D1, "role": "lead", "run": "run-1", "action": "role.revoke",
                   "target": "dev"}),
        ),
        (
            Evidence::Allowed(ActionAllowed {
                business: acme.clone(),
                agent: lead(),
                action: Action::parse("message.send").unwrap(),
                target: Some(Target::parse("dev").unwrap()),
                decision: None,
                subject: Some(Subject::Role(role("dev"))),
            }),
            json!({"role": "lead", "run": "run-1", "action": "message.send", "target": "dev",
                   "decision": null, "subject": "dev", "subject_kind": "role"}),
        ),
        (
            Evidence::Message(MessageEvidence::Sent(Box::new(message()))),
            message_fields(),
        ),
        (
            Evidence::Message(MessageEvidence::Delivered {
                business: acme.clone(),
                message: mid(M1),
                run: run("run-2"),
            }),
            json!({"message": M1, "run": "run-2"}),
        ),
        (
            Evidence::Message(MessageEvidence::Read {
                business: acme.clone(),
                message: mid(M1),
                run: run("run-2"),
            }),
            json!({"message": M1, "run": "run-2"}),
        ),
        (
            Evidence::Human(HumanInput {
                id: EventId::parse(E1).unwrap(),
                business: acme.clone(),
                verb: "decision.resolve".into(),
                subject: Some(Subject::Decision(did(D1))),
            }),
            json!({"id": E1, "verb": "decision.resolve", "subject": D1,
                   "subject_kind": "decision"}),
        ),
        (
            Evidence::Observed(Observation {
                business: acme.clone(),
                agent: lead(),
                kind: "task.created".into(),
                body: r#"{"request":"x","n":[1,2]}"#.into(),
                subject: Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap())),
                request: Some(EventId::parse(E1).unwrap()),
            }),
            json!({"role": "lead", "run": "run-1", "event": "task.created",
                   "body": {"request": "x", "n": [1, 2]}, "subject": "vikunja:3/41",
                   "subject_kind": "task", "request": E1}),
        ),
        (
            Evidence::Observed(Observation {
                business: acme.clone(),
                agent: lead(),
                kind: "action.allowed".into(),
                body: "{}".into(),
                subject: Some(Subject::Message(mid(M1))),
                request: None,
            }),
            json!({"role": "lead", "run": "run-1", "event": "action.allowed", "body": {},
                   "subject": M1, "subject_kind": "message", "request": null}),
        ),
        (
            Evidence::Refused(RefusalRecord {
                business: Some(acme.clone()),
                agent: Some(lead()),
                verb: Some("role.revoke".into()),
                refusal: Refusal::DecisionConsumed,
            }),
            json!({"role": "lead", "run": "run-1", "verb": "role.revoke",
                   "code": "decision-consumed"}),
        ),
        (
            Evidence::RefusalsCounted(RefusalCount {
                refused: RefusalRecord {
                    business: Some(acme.clone()),
                    agent: Some(lead()),
                    verb: Some("role.revoke".into()),
                    refusal: Refusal::NotAuthorized,
                },
                since: at("2026-01-01T00:00:00.000Z"),
                count: 7,
            }),
            json!({"role": "lead", "run": "run-1", "verb": "role.revoke",
                   "code": "not-authorized", "since": "2026-01-01T00:00:00.000Z", "count": 7}),
        ),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for (i, (evidence, fields)) in cases.into_iter().enumerate() {
        let stamp = Timestamp::from_unix_ms(1_767_225_600_000 + i as i64).unwrap();
        let kind = evidence.kind().as_str();
        kinds.insert(kind);
        let got = record_json(&Stamped {
            at: stamp,
            evidence,
        });
        let expected = with(
            json!({"at": stamp.to_string(), "kind": kind, "business": "acme"}),
            fields,
        );
        assert_eq!(got, expected, "{kind}");
    }
    assert_eq!(kinds.len(), 20, "every kind of Evidence::kind is covered");
    // A refusal of an unknown caller has no business, role, run or verb.
    let anonymous = record_json(&Stamped {
        at: at("2026-01-01T00:00:00.000Z"),
        evidence: Evidence::Refused(RefusalRecord {
            business: None,
            agent: None,
            verb: None,
            refusal: Refusal::BadCapability,
        }),
    });
    assert_eq!(
        anonymous,
        json!({"at": "2026-01-01T00:00:00.000Z", "kind": "request.refused", "business": null,
               "role": null, "run": null, "verb": null, "code": "bad-capability"})
    );
}

// ----------------------------------------------------- randomized property

/// SplitMix64: a tiny deterministic generator, so a failure names its seed
/// and case and replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Every code `parse_request` may answer with.
const PARSE_CODES: [&str; 8] = [
    "bad-request",
    "request-too-large",
    "unknown-verb",
    "unknown-key",
    "bad-capability",
    "bad-id",
    "bad-task-ref",
    "unknown-action",
];

fn valid_requests() -> Vec<String> {
    vec![
        req("role.claim", "{}"),
        format!(r#"{{"cap":"{CAP}","verb":"agents"}}"#),
        req(
            "role.revoke",
            &format!(r#"{{"role":"dev-1","decision":"{D1}"}}"#),
        ),
        req("decision.raise", &raise_args().to_string()),
        req(
            "decision.resolve",
            &format!(r#"{{"id":"{D1}","choice":"no","note":"n"}}"#),
        ),
        req("decision.withdraw", &format!(r#"{{"id":"{D1}"}}"#)),
        req(
            "message.send",
            &format!(
                r#"{{"to":"dev","body":"hi","class":"INFO","in_reply_to":"{M1}","decision":"{D2}"}}"#
            ),
        ),
        req("message.read", &format!(r#"{{"id":"{M1}"}}"#)),
        req(
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine","target":"t"},"subject":"vikunja:3/41"}"#,
        ),
        req("trail", &format!(r#"{{"subject":"{D1}"}}"#)),
    ]
}

const TRICKY_STRINGS: [&str; 24] = [
    "",
    "human",
    "lead",
    "a/b",
    "vikunja:3/41",
    "vikunja:0/1",
    "vikunja:01/1",
    D1,
    "11111111-1111-4111-8111-11111111111G",
    "ABABABAB-abab-4bab-abab-abababababab",
    CAP,
    "action.allowed",
    "routine",
    "technical",
    "delivery",
    "REQUEST",
    "request",
    "yes",
    "y e s",
    "browser.request",
    "role.claim",
    "approvalChoice",
    "\u{0}",
    "\u{feff}",
];

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(rng.next() as i64),
        3 => json!(f64::from_bits(rng.next() & 0x7fef_ffff_ffff_ffff)),
        4 => json!(*rng.pick(&TRICKY_STRINGS)),
        5 => Value::Array(
            (0..rng.below(3))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        6 => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(3) {
                map.insert(random_key(rng), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
        _ => {
            let n = rng.below(300);
            let mut v = Value::Null;
            for _ in 0..n {
                v = json!([v]);
            }
            v
        }
    }
}

fn random_key(rng: &mut Rng) -> String {
    let keys: Vec<&str> = Verb::ALL
        .iter()
        .flat_map(|v| v.arg_keys().iter().copied())
        .chain(["cap", "verb", "args", "key", "text", "action", "zzz", "Cap"])
        .collect();
    (*rng.pick(&keys)).to_owned()
}

/// Applies one structural change somewhere in `node`: here, or (two times
/// in three) in a random child.
fn mutate_value(rng: &mut Rng, node: &mut Value) {
    let len = match &*node {
        Value::Object(map) => map.len(),
        Value::Array(items) => items.len(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => 0,
    };
    if len > 0 && rng.below(3) != 0 {
        let i = rng.below(len);
        let child = match node {
            Value::Object(map) => map.values_mut().nth(i),
            Value::Array(items) => items.get_mut(i),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
        };
        if let Some(child) = child {
            mutate_value(rng, child);
        }
        return;
    }
    match rng.below(6) {
        0 => *node = random_value(rng, 0),
        1 => *node = json!(*rng.pick(&TRICKY_STRINGS)),
        2 => {
            if let Value::Object(map) = node {
                let k = random_key(rng);
                map.insert(k, random_value(rng, 1));
            }
        }
        3 => {
            if let Value::Object(map) = node {
                if let Some(k) = map.keys().nth(rng.below(map.len())).cloned() {
                    map.remove(&k);
                }
            }
        }
        4 => *node = json!([node.take()]),
        _ => *node = Value::Null,
    }
}

/// Applies one byte-level change.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    const ALPHABET: &[u8] = b"{}[]\":,\\ 0123456789eE+-.truefalsn\xff\xc3\x80";
    let at = rng.below(bytes.len() + 1);
    match rng.below(5) {
        0 if at < bytes.len() => {
            bytes.remove(at);
        }
        1 => bytes.insert(at, *rng.pick(ALPHABET)),
        2 if at < bytes.len() => bytes[at] = rng.next() as u8,
        3 => bytes.truncate(at),
        _ => {
            let end = (at + rng.below(16)).min(bytes.len());
            let slice = bytes[at..end].to_vec();
            let to = rng.below(bytes.len() + 1);
            bytes.splice(to..to, slice);
        }
    }
}

#[track_caller]
fn check_input(bytes: &[u8], tally: &mut (u32, u32)) {
    let first = parse_request(bytes);
    assert_eq!(first, parse_request(bytes), "deterministic");
    match first {
        Ok(request) => {
            tally.0 += 1;
            assert!(Verb::ALL.contains(&request.call.verb()));
            // Dispatch never panics either, whatever the runtime answers.
            let _ = request
                .call
                .into_dispatch(|| [1; 16], |_| Err(Refusal::UnknownReference));
        }
        Err(refusal) => {
            tally.1 += 1;
            assert!(Refusal::ALL.contains(&refusal));
            assert!(
                PARSE_CODES.contains(&refusal.code()),
                "unexpected {refusal} for {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

#[test]
fn random_bytes_and_mutated_requests_give_a_request_or_a_static_code() {
    const CASES: u64 = 512;
    let seeds = valid_requests();
    for line in &seeds {
        parse_request(line.as_bytes()).unwrap_or_else(|r| panic!("{line}: {r}"));
    }
    let mut tally = (0, 0);
    for case in 0..CASES {
        let mut rng = Rng(0x5eed_0000 + case);
        // Random bytes, biased towards JSON punctuation.
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(2) == 0 {
                    *rng.pick(b"{}[]\":, \"capverbargs0123456789abcdef")
                } else {
                    rng.next() as u8
                }
            })
            .collect();
        check_input(&bytes, &mut tally);
        // JSON-level mutations of a valid request, then maybe byte-level ones.
        let seed: &String = rng.pick(&seeds);
        let mut value: Value = serde_json::from_str(seed).unwrap();
        for _ in 0..=rng.below(3) {
            mutate_value(&mut rng, &mut value);
        }
        let mut bytes = value.to_string().into_bytes();
        check_input(&bytes, &mut tally);
        for _ in 0..rng.below(4) {
            mutate_bytes(&mut rng, &mut bytes);
        }
        check_input(&bytes, &mut tally);
        // Byte-level mutations of a valid request alone.
        let mut bytes = rng.pick(&seeds).clone().into_bytes();
        for _ in 0..=rng.below(3) {
            mutate_bytes(&mut rng, &mut bytes);
        }
        check_input(&bytes, &mut tally);
    }
    assert!(
        tally.0 > 50 && tally.1 > 500,
        "both outcomes exercised: {tally:?}"
    );
}

#[test]
fn changes_takes_a_non_negative_integer_cursor_and_a_clamped_timeout() {
    use mosaic_adapters::wire::{Call, Dispatch, Query};
    let dispatch = |args: serde_json::Value| {
        Call::parse(Verb::Changes, Some(args)).and_then(|call| {
            call.into_dispatch(
                || unreachable!("changes draws no id"),
                |_| unreachable!("changes names no subject"),
            )
        })
    };
    let query = |since, ms| {
        Ok(Dispatch::Query(Query::Changes {
            since,
            wait: std::time::Duration::from_millis(ms),
        }))
    };
    assert_eq!(dispatch(serde_json::json!({})), query(None, 30_000));
    assert_eq!(
        dispatch(serde_json::json!({"since": 0, "timeoutMs": 999_999})),
        query(Some(0), 120_000)
    );
    assert_eq!(
        dispatch(serde_json::json!({"since": u64::MAX, "timeoutMs": 5})),
        query(Some(u64::MAX), 1_000)
    );
    for bad in [
        r#"{"since":"3"}"#,
        r#"{"since":-1}"#,
        r#"{"since":2.5}"#,
        r#"{"timeoutMs":"1"}"#,
    ] {
        refuses(&req("changes", bad), "bad-request");
    }
}
