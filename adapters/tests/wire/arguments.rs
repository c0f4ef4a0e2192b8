//! Each verb's arguments: required and optional keys, their JSON types and
//! the domain parsers' codes, in the spec's order.

use super::*;

#[test]
fn verbs_without_arguments_take_no_args_or_an_empty_object() {
    let none = [
        (Verb::RoleClaim, Call::RoleClaim),
        (Verb::RoleRelease, Call::RoleRelease),
        (Verb::MessageReceive, Call::MessageReceive),
        (Verb::LaunchRevoke, Call::LaunchRevoke),
        (Verb::LaunchRestore, Call::LaunchRestore),
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
fn inbox_takes_the_decision_its_page_starts_after() {
    assert_eq!(call(&req("inbox", "{}")), Call::Inbox { after: None });
    let id = "0c0ffee0-0000-4000-8000-000000000001";
    assert_eq!(
        call(&req("inbox", &format!(r#"{{"after":"{id}"}}"#))),
        Call::Inbox {
            after: Some(DecisionId::parse(id).expect("an id"))
        }
    );
    refuses(&req("inbox", r#"{"after":"nope"}"#), "bad-id");
    refuses(&req("inbox", r#"{"after":7}"#), "bad-request");
    refuses(&req("inbox", r#"{"id":"x"}"#), "unknown-key");
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
            "run.end",
            "inbox",
            "tasks",
            "agents",
            "trail",
            "head",
            "history",
            "changes",
            "browser.request",
        ]
    );
    for &verb in Verb::ALL {
        assert_eq!(Verb::parse(verb.as_str()), Ok(verb));
        assert_eq!(verb.to_string(), verb.as_str());
    }
    assert_eq!(Verb::RoleRevoke.arg_keys(), ["role", "decision"]);
    assert_eq!(Verb::RunEnd.arg_keys(), ["run"]);
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
    assert_eq!(Verb::History.arg_keys(), ["before"]);
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

#[test]
fn run_end_takes_one_run_id() {
    assert_eq!(
        call(&req("run.end", r#"{"run":"dev-1"}"#)),
        Call::RunEnd {
            run: RunId::parse("dev-1").unwrap()
        }
    );
    refuses(&req("run.end", "{}"), "bad-request");
    refuses(&req("run.end", r#"{"run":null}"#), "bad-request");
    refuses(&req("run.end", r#"{"run":7}"#), "bad-request");
    refuses(&req("run.end", r#"{"run":"-dev"}"#), "bad-id");
    refuses(&req("run.end", r#"{"run":"dev","why":"x"}"#), "unknown-key");
}

#[test]
fn history_takes_an_optional_position_to_list_before() {
    let history = |args: &str| call(&req("history", args));
    assert_eq!(history("{}"), Call::History { before: None });
    assert_eq!(
        call(&format!(r#"{{"verb":"history","cap":"{CAP}"}}"#)),
        Call::History { before: None }
    );
    assert_eq!(
        history(r#"{"before":null}"#),
        Call::History { before: None }
    );
    assert_eq!(
        history(r#"{"before":0}"#),
        Call::History { before: Some(0) }
    );
    assert_eq!(
        history(r#"{"before":18446744073709551615}"#),
        Call::History {
            before: Some(u64::MAX)
        }
    );
    for bad in [
        r#"{"before":"7"}"#,
        r#"{"before":-1}"#,
        r#"{"before":1.5}"#,
        r#"{"before":true}"#,
        r#"{"before":[7]}"#,
    ] {
        refuses(&req("history", bad), "bad-request");
    }
    refuses(&req("history", r#"{"before":7,"after":1}"#), "unknown-key");
    refuses(&req("history", r#"{"limit":10}"#), "unknown-key");
}
