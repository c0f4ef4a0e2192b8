//! The socket's JSON: one test per request rule with its exact code, round
//! trips into `Call`, the dispatch contract, exact JSON for every encoder,
//! and a randomized check that no input panics or yields a foreign code.
//!
//! One file of `wire/` per subject: [`envelope`] (the line, its keys, the
//! capability and the verb), [`arguments`] (each verb's arguments),
//! [`round_trips`] (a line into its `Call`), [`dispatch`] (a `Call` to its
//! `Command` or `Query`), [`replies`] (every encoder's exact JSON),
//! [`bounded`] (no read answers more than a client takes) and
//! [`randomized`] (the property); the helpers they share are here.

#[path = "wire/arguments.rs"]
mod arguments;
#[path = "wire/bounded.rs"]
mod bounded;
#[path = "wire/dispatch.rs"]
mod dispatch;
#[path = "wire/envelope.rs"]
mod envelope;
#[path = "wire/randomized.rs"]
mod randomized;
#[path = "wire/replies.rs"]
mod replies;
#[path = "wire/round_trips.rs"]
mod round_trips;

use std::cell::Cell;

use mosaic_adapters::wire::{
    self, decision_json, inbox_json, inbox_text, message_facts_json, message_json, parse_json,
    parse_request, record_json, reply_json, task_json, Call, Dispatch, Envelope, Presenter, Query,
    SubjectRef, UuidKind, UuidRef, Verb, MAX_REQUEST_BYTES,
};
use mosaic_client::wire::args::VerbArgs;
use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{Command, Reply, SendInput};
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::decisions::{Decision, RaiseInput, Status};
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, DecisionRecord, EndCause, Ending, Evidence, EvidenceKind, Harness, HumanInput,
    LaunchEvidence, LaunchRecord, MessageClass, MessageEvidence, MessageRecord, Observation,
    OptionKey, RaiseFields, Recipient, RefusalCount, RefusalRecord, Route, RunEnd, Sender, Stamped,
    Subject,
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
