//! Each verb's argument type against the strict parser: the schema's
//! `required` set is exactly the keys whose absence the parser refuses
//! with `bad-request`, and every key of the type is one the parser takes.

use mosaic_adapters::wire::{Call, Verb};
use mosaic_client::wire::args::VerbArgs;
use mosaic_domain::Refusal;
use serde_json::{json, Value};

const ID: &str = "0b7f8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";

/// Arguments of `verb` that parse, with every key it defines.
fn full(verb: Verb) -> Value {
    match verb {
        Verb::RoleClaim
        | Verb::RoleRelease
        | Verb::MessageReceive
        | Verb::LaunchRevoke
        | Verb::LaunchRestore
        | Verb::Tasks
        | Verb::Agents
        | Verb::Head => json!({}),
        Verb::RoleRevoke => json!({"role": "dev", "decision": ID}),
        Verb::DecisionRaise => json!({
            "action": "repo.merge", "question": "q", "options": [{"key": "yes", "text": "y"}],
            "recommendation": "r", "blocking": false, "domain": "technical", "target": "main",
            "project": "p", "task_ref": "vikunja:1/2", "requirement_ref": "r", "supersedes": ID,
            "choice": "yes", "approvalChoice": "yes"}),
        Verb::DecisionResolve => json!({"id": ID, "choice": "yes", "note": "n"}),
        Verb::DecisionSeen | Verb::DecisionWithdraw => json!({"id": ID, "note": "n"}),
        Verb::MessageSend => json!({"to": "dev", "body": "b", "class": "INFO",
            "in_reply_to": ID, "corrects": ID, "decision": ID}),
        Verb::MessageRead => json!({"id": ID}),
        Verb::EventEmit => json!({"kind": "action.allowed",
            "body": {"action": "routine", "target": "t"}, "subject": "dev"}),
        Verb::Inbox => json!({"after": ID}),
        Verb::Trail => json!({"subject": "dev"}),
        Verb::RunEnd => json!({"run": "dev-1"}),
        Verb::Changes => json!({"since": 7, "timeoutMs": 2000}),
        Verb::History => json!({"before": 7}),
        Verb::BrowserRequest => {
            json!({"action": "back", "parameters": {}, "timeoutMs": 2000, "decision": ID})
        }
    }
}

#[test]
fn the_schema_requires_exactly_what_the_parser_requires() {
    for &verb in Verb::ALL {
        let args = full(verb);
        let keys: Vec<&str> = args
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut defined = verb.arg_keys().to_vec();
        defined.sort_unstable();
        let mut given = keys.clone();
        given.sort_unstable();
        assert_eq!(given, defined, "{verb}: the sample names every key");
        assert!(Call::parse(verb, Some(args.clone())).is_ok(), "{verb}");
        let schema = verb.input_schema().to_value();
        for key in keys {
            let mut without = args.clone();
            without.as_object_mut().expect("an object").remove(key);
            let required = schema["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|k| k == key));
            let refused = Call::parse(verb, Some(without)) == Err(Refusal::BadRequest);
            assert_eq!(
                refused, required,
                "{verb}: {key} required by the parser {refused}"
            );
        }
    }
}
