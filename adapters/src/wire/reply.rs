//! Responses: the one response line, and the plain JSON objects verbs
//! answer with.
//!
//! Keys are snake_case like the spec's arguments, except where the spec
//! spells them in camelCase (`approvalChoice`) and the two nested objects
//! the decision brief names that way (`raisedBy`, `authorization`). Ids,
//! task refs and timestamps are their domain text forms; an absent optional
//! field is `null`, so every object of one kind has the same keys.
//!
//! Nothing here can carry driver or OS text: a refusal is only ever its
//! static code, and the types encoded have no free-form error field.

use mosaic_domain::authority::Grant;
use mosaic_domain::bus::Reply;
use mosaic_domain::changes::Change;
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::decisions::{Decision, Status};
use mosaic_domain::evidence::{
    AgentRef, ClaimEvidence, DecisionActor, DecisionEvidence, DecisionRecord, Evidence,
    LaunchEvidence, MessageEvidence, MessageRecord, Recipient, Route, Sender, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::Refusal;
use mosaic_ports::store::TaskView;
use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The success line, `{"ok":true,"result":RESULT}`: one line, no newline.
pub fn ok(result: Value) -> String {
    // `to_string` writes bytes; `Display` (`format!("{result}")`) takes
    // nearly three times as long. A `Value` always serializes.
    match serde_json::to_string(&result) {
        Ok(text) => ok_text(&text),
        Err(_) => err(Refusal::OutcomeUnknown),
    }
}

/// The refusal line, `{"ok":false,"error":CODE}`: one line, no newline.
pub fn err(refusal: Refusal) -> String {
    // Codes are kebab-case ASCII, so they need no escaping.
    format!("{{\"ok\":false,\"error\":\"{}\"}}", refusal.code())
}

/// [`ok`] for a result already written as JSON text: one compact value as
/// `serde_json` writes it, which escapes every control character, so the
/// line holds no newline of its own.
pub fn ok_text(result: &str) -> String {
    format!("{{\"ok\":true,\"result\":{result}}}")
}

/// [`ok`] or [`err`], whichever `result` is.
pub fn response(result: Result<Value, Refusal>) -> String {
    match result {
        Ok(value) => ok(value),
        Err(refusal) => err(refusal),
    }
}

/// A decision with its status: `id, action, target, question, options:
/// [{key,text}], recommendation, blocking, domain, project, task_ref,
/// requirement_ref, supersedes, class, route, holder, raisedBy:{role,run},
/// authorization:{action,target,approvalChoice}, status, choice,
/// superseded_by`.
///
/// `route` is `"human"` or the resolving role; `domain` is `"technical"`
/// or `"delivery"`; `holder` is the run a `role.revoke` decision would
/// revoke (else `null`); `choice` is the resolved option (else `null`);
/// `superseded_by` the replacing decision (else `null`). `authorization`
/// is the context a resolver must be shown: the option named by
/// `approvalChoice` authorizes exactly `action` on `target`, nothing else.
pub fn decision_json(decision: &Decision) -> Value {
    let mut fields = decision_fields(&decision.record);
    let (choice, superseded_by) = match &decision.status {
        Status::Resolved(choice) => (json!(choice.as_str()), Value::Null),
        Status::Superseded(by) => (Value::Null, json!(by.to_string())),
        Status::Open | Status::Withdrawn => (Value::Null, Value::Null),
    };
    fields.insert("status".into(), json!(decision.status.as_str()));
    fields.insert("choice".into(), choice);
    fields.insert("superseded_by".into(), superseded_by);
    Value::Object(fields)
}

/// The fields fixed at raise, shared by [`decision_json`] and the
/// `decision.raised` trail record.
fn decision_fields(r: &DecisionRecord) -> Map<String, Value> {
    let options: Vec<Value> = r
        .fields
        .options
        .iter()
        .map(|o| json!({"key": o.key.as_str(), "text": o.text}))
        .collect();
    let route = match &r.route {
        Route::Human => "human".to_owned(),
        Route::Role(role) => role.to_string(),
    };
    let fields = json!({
        "id": r.id.to_string(),
        "action": r.fields.action.as_str(),
        "target": text(r.fields.target.as_ref()),
        "question": r.fields.question,
        "options": options,
        "recommendation": r.fields.recommendation,
        "blocking": r.fields.blocking,
        "domain": if r.fields.technical { "technical" } else { "delivery" },
        "project": r.fields.project,
        "task_ref": text(r.fields.task_ref.as_ref()),
        "requirement_ref": r.fields.requirement_ref,
        "supersedes": text(r.fields.supersedes.as_ref()),
        "class": r.class.as_str(),
        "route": route,
        "holder": text(r.holder.as_ref()),
        "raisedBy": agent(&r.raiser),
        "authorization": {
            "action": r.fields.action.as_str(),
            "target": text(r.fields.target.as_ref()),
            "approvalChoice": r.approval_choice.as_str(),
        },
    });
    // `json!` of an object literal is always an object.
    let Value::Object(map) = fields else {
        return Map::new();
    };
    map
}

/// A message as sent: `id, from, from_run, to, class, body, in_reply_to,
/// corrects, decision, request`.
///
/// `from` and `to` use the same names as `message.send`'s `to` (a role
/// instance or `"human"`), so a reply is `{to: m.from, in_reply_to: m.id}`;
/// `from_run` is the sending run (`null` from the human); `request` is the
/// human input a human instruction carries.
pub fn message_json(m: &MessageRecord) -> Value {
    value_of(&MessageOut::of(m))
}

/// [`message_json`] plus what the store knows of its delivery:
/// `delivered_to` (the run, or `null`) and `read`.
pub fn message_facts_json(facts: &MessageFacts) -> Value {
    value_of(&MessageOut::of_facts(facts))
}

/// One message as the wire shows it, written straight to text or to a
/// `Value` from the same fields. The fields are in key order, so the text
/// is byte for byte that of the `Value` (whose maps sort their keys).
#[derive(Serialize)]
struct MessageOut<'a> {
    body: &'a str,
    class: Option<&'static str>,
    corrects: Option<Shown<'a>>,
    /// Only as the human's inbox item of a body cut there: `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    cut: Option<bool>,
    decision: Option<Shown<'a>>,
    /// Only with the store's facts: `Some(None)` is `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    delivered_to: Option<Option<&'a str>>,
    from: &'a str,
    from_run: Option<&'a str>,
    id: Shown<'a>,
    in_reply_to: Option<Shown<'a>>,
    /// Only with the store's facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    read: Option<bool>,
    request: Option<Shown<'a>>,
    to: &'a str,
    /// Only as an inbox item: `"message"`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    item: Option<&'static str>,
}

impl<'a> MessageOut<'a> {
    fn of(m: &'a MessageRecord) -> Self {
        let (from, from_run) = match &m.from {
            Sender::Agent(a) => (a.role.as_str(), Some(a.run.as_str())),
            Sender::Human => ("human", None),
        };
        Self {
            body: &m.body,
            class: m.class.map(|c| c.as_str()),
            corrects: m.corrects.as_ref().map(|id| Shown(id)),
            cut: None,
            decision: m.decision.as_ref().map(|id| Shown(id)),
            delivered_to: None,
            from,
            from_run,
            id: Shown(&m.id),
            in_reply_to: m.in_reply_to.as_ref().map(|id| Shown(id)),
            read: None,
            request: m.request.as_ref().map(|id| Shown(id)),
            to: match &m.to {
                Recipient::Role(role) => role.as_str(),
                Recipient::Human => "human",
            },
            item: None,
        }
    }

    fn of_facts(facts: &'a MessageFacts) -> Self {
        Self {
            delivered_to: Some(facts.delivered_to.as_ref().map(|run| run.as_str())),
            read: Some(facts.read),
            ..Self::of(&facts.record)
        }
    }
}

/// A message as an item of the human's inbox ([`super::bounded`]): with
/// its facts and `type: "message"`, and its body cut to `body` when that is
/// shorter (then `cut: true`).
pub(super) fn inbox_message_json(facts: &MessageFacts, body: &str) -> Value {
    let cut = body.len() < facts.record.body.len();
    value_of(&MessageOut {
        item: Some("message"),
        body,
        cut: cut.then_some(true),
        ..MessageOut::of_facts(facts)
    })
}

/// An id (or anything else) written in its `Display` form, with no
/// `String` in between.
struct Shown<'a>(&'a dyn std::fmt::Display);

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self.0)
    }
}

/// The `Value` of something that always serializes (string keys only).
fn value_of(item: &impl Serialize) -> Value {
    serde_json::to_value(item).unwrap_or(Value::Null)
}

/// The result of an accepted bus verb:
/// - `role.claim`: `{status: "claimed"}`, or `{status: "held"}` when the
///   run already held the role;
/// - `role.release`, `role.revoke`, `message.read`, `event.emit`, the
///   launch switch: `{}`;
/// - decision verbs: [`decision_json`];
/// - `message.send`: exactly `{id, request}` (`request` is `null` for an
///   agent's message);
/// - `message.receive`: an array of [`message_json`];
/// - the trusted `authorize`: `{grant: "within-role", decision: null}` or
///   `{grant: "approval", decision: ID}`.
pub fn reply_json(reply: &Reply) -> Value {
    match reply {
        Reply::Claimed(ClaimReply::Claimed) => json!({"status": "claimed"}),
        Reply::Claimed(ClaimReply::AlreadyHeld) => json!({"status": "held"}),
        Reply::Done => json!({}),
        Reply::Decision(d) => decision_json(d),
        Reply::Sent { id, request } => json!({
            "id": id.to_string(),
            "request": text(request.as_ref()),
        }),
        Reply::Received(messages) => Value::Array(messages.iter().map(message_json).collect()),
        Reply::Authorized(Grant::WithinRole) => {
            json!({"grant": "within-role", "decision": null})
        }
        Reply::Authorized(Grant::Approval(id)) => {
            json!({"grant": "approval", "decision": id.to_string()})
        }
    }
}

/// One row of the tasks projection: `task_ref, kind, body, tombstone, at`,
/// with `body` parsed back to JSON (text that is not JSON, which the store
/// never holds, is kept as a string rather than dropped).
pub fn task_json(task: &TaskView) -> Value {
    json!({
        "task_ref": task.task.to_string(),
        "kind": task.kind,
        "body": body_json(&task.body),
        "tombstone": task.tombstone,
        "at": task.at.to_string(),
    })
}

/// One trail entry: `{at, kind, business, …fields}`, `kind` being
/// [`Evidence::kind`]. The fields per kind:
/// - `session.launched`: `role, run, harness, address, pid, start_time`;
/// - `launch.revoked`, `launch.restored`: none;
/// - `role.claimed`, `role.released`: `role, run`; `role.revoked`: `role,
///   run, decision`; `session.ended`: `role, run, cause, status, signal,
///   vacated` (`status` and `signal` `null` where unknown or not the way
///   the process ended; `vacated`: whether the end freed the role);
/// - `decision.raised`: the fixed fields of [`decision_json`] (no status);
/// - `decision.resolved`: `id, choice, by, by_run, note`;
///   `decision.seen`, `decision.withdrawn`: `id, by, by_run, note`
///   (`by` is the acting role or `"human"`);
///   `decision.superseded`: `id, superseded_by`;
/// - `approval.consumed`: `decision, role, run, action, target`;
/// - `action.allowed`: `role, run, action, target, decision, subject,
///   subject_kind`;
/// - `message.sent`: the fields of [`message_json`];
///   `message.delivered`, `message.read`: `message, run`;
/// - `human.input`: `id, verb, subject, subject_kind`;
/// - `event.observed`: `role, run, event` (the observation's own kind),
///   `body` (parsed JSON), `subject, subject_kind, request`;
/// - `request.refused`: `role, run, verb, code` (the static code only).
///
/// `subject_kind` is `task`, `decision`, `message` or `role`, as in the
/// schema; `business` is `null` only for a refusal of an unknown caller.
pub fn record_json(record: &Stamped) -> Value {
    let e = &record.evidence;
    let fields = match e {
        Evidence::Launch(LaunchEvidence::Launched(l)) => json!({
            "role": l.role.as_str(),
            "run": l.run.as_str(),
            "harness": l.harness.as_str(),
            "address": l.address,
            "pid": l.pid,
            "start_time": l.start_time,
        }),
        Evidence::Launch(LaunchEvidence::Revoked { .. } | LaunchEvidence::Restored { .. }) => {
            json!({})
        }
        Evidence::Claim(
            ClaimEvidence::Claimed { agent: a, .. } | ClaimEvidence::Released { agent: a, .. },
        ) => agent(a),
        Evidence::Claim(ClaimEvidence::Revoked {
            agent: a, decision, ..
        }) => json!({
            "role": a.role.as_str(),
            "run": a.run.as_str(),
            "decision": decision.to_string(),
        }),
        Evidence::Claim(ClaimEvidence::Ended(end)) => json!({
            "role": end.agent.role.as_str(),
            "run": end.agent.run.as_str(),
            "cause": end.ending.cause().as_str(),
            "status": end.ending.status(),
            "signal": end.ending.signal(),
            "vacated": end.vacated,
        }),
        Evidence::Decision(DecisionEvidence::Raised(r)) => Value::Object(decision_fields(r)),
        Evidence::Decision(DecisionEvidence::Resolved {
            id,
            choice,
            by,
            note,
            ..
        }) => {
            let mut v = actor(id, by, note.as_deref());
            if let Value::Object(map) = &mut v {
                map.insert("choice".into(), json!(choice.as_str()));
            }
            v
        }
        Evidence::Decision(
            DecisionEvidence::Seen { id, by, note, .. }
            | DecisionEvidence::Withdrawn { id, by, note, .. },
        ) => actor(id, by, note.as_deref()),
        Evidence::Decision(DecisionEvidence::Superseded { id, by, .. }) => json!({
            "id": id.to_string(),
            "superseded_by": by.to_string(),
        }),
        Evidence::Consumed(c) => json!({
            "decision": c.decision.to_string(),
            "role": c.agent.role.as_str(),
            "run": c.agent.run.as_str(),
            "action": c.action.as_str(),
            "target": text(c.target.as_ref()),
        }),
        Evidence::Allowed(a) => {
            let (subject, subject_kind) = subject(a.subject.as_ref());
            json!({
                "role": a.agent.role.as_str(),
                "run": a.agent.run.as_str(),
                "action": a.action.as_str(),
                "target": text(a.target.as_ref()),
                "decision": text(a.decision.as_ref()),
                "subject": subject,
                "subject_kind": subject_kind,
            })
        }
        Evidence::Message(MessageEvidence::Sent(m)) => message_json(m),
        Evidence::Message(
            MessageEvidence::Delivered { message, run, .. }
            | MessageEvidence::Read { message, run, .. },
        ) => json!({
            "message": message.to_string(),
            "run": run.as_str(),
        }),
        Evidence::Human(h) => {
            let (subject, subject_kind) = subject(h.subject.as_ref());
            json!({
                "id": h.id.to_string(),
                "verb": h.verb,
                "subject": subject,
                "subject_kind": subject_kind,
            })
        }
        Evidence::Observed(o) => {
            let (subject, subject_kind) = subject(o.subject.as_ref());
            json!({
                "role": o.agent.role.as_str(),
                "run": o.agent.run.as_str(),
                "event": o.kind,
                "body": body_json(&o.body),
                "subject": subject,
                "subject_kind": subject_kind,
                "request": text(o.request.as_ref()),
            })
        }
        Evidence::Refused(r) => json!({
            "role": r.agent.as_ref().map(|a| a.role.as_str()),
            "run": r.agent.as_ref().map(|a| a.run.as_str()),
            "verb": r.verb,
            "code": r.refusal.code(),
        }),
        Evidence::RefusalsCounted(c) => json!({
            "role": c.refused.agent.as_ref().map(|a| a.role.as_str()),
            "run": c.refused.agent.as_ref().map(|a| a.run.as_str()),
            "verb": c.refused.verb,
            "code": c.refused.refusal.code(),
            "since": c.since.to_string(),
            "count": c.count,
        }),
    };
    let mut out = Map::new();
    out.insert("at".into(), json!(record.at.to_string()));
    out.insert("kind".into(), json!(e.kind().as_str()));
    out.insert("business".into(), text(e.business()));
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    Value::Object(out)
}

/// `{role, run}`.
fn agent(a: &AgentRef) -> Value {
    json!({"role": a.role.as_str(), "run": a.run.as_str()})
}

/// The fields of a decision event by an actor.
fn actor(id: &impl ToString, by: &DecisionActor, note: Option<&str>) -> Value {
    let (by, by_run) = match by {
        DecisionActor::Agent(a) => (json!(a.role.as_str()), json!(a.run.as_str())),
        DecisionActor::Human => (json!("human"), Value::Null),
    };
    json!({"id": id.to_string(), "by": by, "by_run": by_run, "note": note})
}

/// `(subject, subject_kind)`, both `null` when there is none.
fn subject(s: Option<&Subject>) -> (Value, Value) {
    let (text, kind) = match s {
        None => return (Value::Null, Value::Null),
        Some(Subject::Task(t)) => (t.to_string(), "task"),
        Some(Subject::Decision(d)) => (d.to_string(), "decision"),
        Some(Subject::Message(m)) => (m.to_string(), "message"),
        Some(Subject::Role(r)) => (r.to_string(), "role"),
    };
    (json!(text), json!(kind))
}

/// An optional value's text form, or `null`.
fn text(value: Option<&impl ToString>) -> Value {
    value.map_or(Value::Null, |v| Value::String(v.to_string()))
}

/// A stored JSON body, parsed; text that is not JSON stays a string.
fn body_json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()))
}

/// How a run's process ended, as far as the broker knows: the host that
/// reaped it said so, or the process is gone from the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exited {
    /// The exit code, when the process exited and the host said with what.
    pub status: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

impl Exited {
    /// A process known only to be gone: neither code nor signal.
    pub const GONE: Exited = Exited {
        status: None,
        signal: None,
    };
}

/// What a harness run used, as its own event stream reports it (the host
/// notes it: `Broker::note_usage`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// Turns (model requests answered).
    pub turns: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
}

/// A run's life beyond its launch, for the `agents` projection: its end
/// (the evidence), and what its host noted (restarts, usage).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunLife {
    /// When and how the run ended, if it did.
    pub ended: Option<(mosaic_domain::Timestamp, mosaic_domain::evidence::Ending)>,
    /// How often its program started again inside the run.
    pub restarts: u64,
    /// What it used, if the host ever said.
    pub usage: Option<Usage>,
}

/// One bound run for the `agents` projection: `role, run, harness, address,
/// pid, start_time, holding, revoked`, then `launching` (the business's
/// launch switch, the same on every row), `waitsOn`: the open decisions
/// this run raised, each `{id, action, target, route, blocking}` (`route`
/// being who has it: `"human"` or the arbiter role), `exited`: `null`
/// while the process runs, else `{status, signal}` (each `null` where
/// unknown or not the way it ended), `ended`: `null` while the run lives,
/// else `{at, cause, status?, signal?}` (`status` and `signal` only where
/// known), `restarts` (a count) and `usage`: `null` until the host noted
/// it, else `{turns, inputTokens, outputTokens, costUsd}`.
pub fn agent_json(
    record: &mosaic_domain::evidence::LaunchRecord,
    holding: bool,
    revoked: bool,
    launching: bool,
    waits_on: &[&Decision],
    exited: Option<Exited>,
    life: RunLife,
) -> Value {
    let waits_on: Vec<Value> = waits_on
        .iter()
        .map(|d| {
            let r = &d.record;
            let route = match &r.route {
                Route::Human => "human".to_owned(),
                Route::Role(role) => role.to_string(),
            };
            json!({
                "id": r.id.to_string(),
                "action": r.fields.action.as_str(),
                "target": text(r.fields.target.as_ref()),
                "route": route,
                "blocking": r.fields.blocking,
            })
        })
        .collect();
    json!({
        "role": record.role.as_str(),
        "run": record.run.as_str(),
        "harness": record.harness.as_str(),
        "address": record.address,
        "pid": record.pid,
        "start_time": record.start_time,
        "holding": holding,
        "revoked": revoked,
        "launching": launching,
        "waitsOn": waits_on,
        "exited": exited.map(|e| json!({"status": e.status, "signal": e.signal})),
        "ended": life.ended.map(|(at, ending)| {
            let mut ended = json!({"at": at.to_string(), "cause": ending.cause().as_str()});
            if let Some(status) = ending.status() {
                ended["status"] = status.into();
            }
            if let Some(signal) = ending.signal() {
                ended["signal"] = signal.into();
            }
            ended
        }),
        "restarts": life.restarts,
        "usage": life.usage.map(|u| json!({
            "turns": u.turns,
            "inputTokens": u.input_tokens,
            "outputTokens": u.output_tokens,
            "costUsd": u.cost_usd,
        })),
    })
}

/// What the broker saw a run ask last: the verb and when it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastCall {
    /// The verb's wire name.
    pub verb: &'static str,
    /// When the broker read the request.
    pub at: mosaic_domain::Timestamp,
}

/// Adds to an `agents` row (an object of [`agent_json`]) what the broker
/// itself saw of the run: `lastVerb` and `lastAt` (the verb of its last
/// request and when, each `null` before its first), and `waiting`
/// (whether a `changes` wait of the run is open now). A row that is not an
/// object is left as it is.
pub fn with_calls(row: &mut Value, last: Option<LastCall>, waiting: bool) {
    if let Value::Object(row) = row {
        row.insert(
            "lastVerb".to_owned(),
            last.map_or(Value::Null, |l| l.verb.into()),
        );
        row.insert(
            "lastAt".to_owned(),
            last.map_or(Value::Null, |l| l.at.to_string().into()),
        );
        row.insert("waiting".to_owned(), waiting.into());
    }
}

/// The `inbox` answer: each open decision ([`decision_json`], with its
/// `authorization` context) and then each unread message
/// ([`message_facts_json`]), every item tagged `type: "decision"|"message"`,
/// in the order given; then, when `more` unread messages lie beyond those
/// (`more > 0`), one last item `{"type":"more","unread":more}`.
pub fn inbox_json(decisions: &[&Decision], messages: &[MessageFacts], more: u64) -> Value {
    value_of(&Inbox {
        decisions,
        messages,
        more,
    })
}

/// [`inbox_json`]'s text, byte for byte, written without building the
/// `Value`: the inbox is the read agents make most, and its messages are
/// most of its cost.
pub fn inbox_text(decisions: &[&Decision], messages: &[MessageFacts], more: u64) -> String {
    let inbox = Inbox {
        decisions,
        messages,
        more,
    };
    // Unreachable fallback: every key is a string, and a `String` never fails.
    serde_json::to_string(&inbox)
        .unwrap_or_else(|_| inbox_json(decisions, messages, more).to_string())
}

struct Inbox<'a> {
    decisions: &'a [&'a Decision],
    messages: &'a [MessageFacts],
    more: u64,
}

impl Serialize for Inbox<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let more = usize::from(self.more > 0);
        let mut items =
            serializer.serialize_seq(Some(self.decisions.len() + self.messages.len() + more))?;
        for decision in self.decisions {
            let mut value = decision_json(decision);
            if let Value::Object(map) = &mut value {
                map.insert("type".to_owned(), json!("decision"));
            }
            items.serialize_element(&value)?;
        }
        for facts in self.messages {
            items.serialize_element(&MessageOut {
                item: Some("message"),
                ..MessageOut::of_facts(facts)
            })?;
        }
        if self.more > 0 {
            items.serialize_element(&json!({"type": "more", "unread": self.more}))?;
        }
        items.end()
    }
}

/// `changes`' answer: `{"cursor", "changes": [{"seq", "kind", ...ids}]}`.
/// A change carries only the ids it has (`message`, `decision`, `role`,
/// `task`): a pointer, never a body, a question or a note.
pub fn changes_json(cursor: u64, changes: &[(u64, Change)]) -> Value {
    let changes = changes
        .iter()
        .map(|(seq, change)| {
            let mut object = Map::new();
            object.insert("seq".to_owned(), json!(seq));
            object.insert("kind".to_owned(), json!(change.kind));
            let ids = [
                ("message", change.message.map(|id| id.to_string())),
                ("decision", change.decision.map(|id| id.to_string())),
                ("role", change.role.as_ref().map(ToString::to_string)),
                ("task", change.task.map(|task| task.to_string())),
            ];
            for (key, id) in ids {
                if let Some(id) = id {
                    object.insert(key.to_owned(), Value::String(id));
                }
            }
            Value::Object(object)
        })
        .collect();
    json!({"cursor": cursor, "changes": Value::Array(changes)})
}
