//! Responses: the one response line, and the answers verbs give, built as
//! the client crate's wire shapes (`mosaic_client::wire`), which every
//! client decodes with the same types.
//!
//! Keys are snake_case like the spec's arguments, except where the spec
//! spells them in camelCase (`approvalChoice`) and the two nested objects
//! the decision brief names that way (`raisedBy`, `authorization`). Ids,
//! task refs and timestamps are their domain text forms; an absent optional
//! field is `null`, so every object of one kind has the same keys. Each
//! shape writes its keys in sorted order, so an answer's text is the same
//! written straight (`inbox_text`) or through a `Value` (the `*_json`
//! functions).
//!
//! Nothing here can carry driver or OS text: a refusal is only ever its
//! static code, and the types encoded have no free-form error field.

use std::borrow::Cow;

use mosaic_client::wire::agent::{AgentRow, Ended, WaitsOn};
use mosaic_client::wire::decision::{
    AgentView, Authorization, Choice, DecisionStatus, DecisionView, Domain, Raised, Standing,
};
use mosaic_client::wire::history::{ClosedRow, Closing};
use mosaic_client::wire::inbox::Inbox;
use mosaic_client::wire::message::MessageView;
use mosaic_client::wire::reads::{Change as ChangeView, ChangePage, TaskRow};
use mosaic_client::wire::record::{
    Acted, Allowed, Consumed, Counted, Delivery, Fact, HumanInput, Launched, Observed, Record,
    Refused, Resolved, Revoked, SessionEnded, SubjectKind, Superseded,
};
use mosaic_client::wire::reply::{Authorized, ClaimStatus, Claimed, Done, GrantKind, Sent};
use mosaic_client::wire::text::{KindName, Party};
use mosaic_domain::authority::Grant;
use mosaic_domain::bus::Reply;
use mosaic_domain::changes::Change;
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::decisions::{Decision, Status};
use mosaic_domain::evidence::{
    AgentRef, ClaimEvidence, DecisionActor, DecisionEvidence, DecisionRecord, Evidence,
    LaunchEvidence, LaunchRecord, MessageEvidence, MessageRecord, RefusalRecord, Route, Sender,
    Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{Refusal, Timestamp};
use mosaic_ports::store::{Closed, TaskView};
use serde::Serialize;
use serde_json::Value;

pub use mosaic_client::wire::agent::{Exited, Usage};

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

/// The `Value` of a wire shape. Every shape serializes (string keys, no
/// record of an unknown kind is ever built here), so the `null` is never
/// written.
pub fn value_of<T: Serialize + ?Sized>(shape: &T) -> Value {
    serde_json::to_value(shape).unwrap_or(Value::Null)
}

/// The text of a wire shape, as [`value_of`]'s `Value` would write it.
pub fn text_of<T: Serialize + ?Sized>(shape: &T) -> String {
    serde_json::to_string(shape).unwrap_or_else(|_| "null".to_owned())
}

/// A decision with its status ([`DecisionView`]): `id, action, target,
/// question, options: [{key,text}], recommendation, blocking, domain,
/// project, task_ref, requirement_ref, supersedes, class, route, holder,
/// raisedBy:{role,run}, authorization:{action,target,approvalChoice},
/// status, choice, superseded_by`.
///
/// `route` is `"human"` or the resolving role; `domain` is `"technical"`
/// or `"delivery"`; `holder` is the run a `role.revoke` decision would
/// revoke (else `null`); `choice` is the resolved option (else `null`);
/// `superseded_by` the replacing decision (else `null`). `authorization`
/// is the context a resolver must be shown: the option named by
/// `approvalChoice` authorizes exactly `action` on `target`, nothing else.
pub fn decision_view(decision: &Decision) -> DecisionView<'_> {
    let (status, choice, superseded_by) = match &decision.status {
        Status::Open => (DecisionStatus::Open, None, None),
        Status::Resolved(choice) => (DecisionStatus::Resolved, Some(choice.clone()), None),
        Status::Withdrawn => (DecisionStatus::Withdrawn, None, None),
        Status::Superseded(by) => (DecisionStatus::Superseded, None, Some(*by)),
    };
    DecisionView {
        raised: raised(&decision.record),
        standing: Standing {
            choice,
            cut: false,
            item: None,
            status,
            superseded_by,
        },
    }
}

/// [`decision_view`]'s `Value`.
pub fn decision_json(decision: &Decision) -> Value {
    value_of(&decision_view(decision))
}

/// The fields fixed at raise, shared by [`decision_view`] and the
/// `decision.raised` trail record.
pub fn raised(r: &DecisionRecord) -> Raised<'_> {
    Raised {
        action: r.fields.action.clone(),
        authorization: Authorization {
            action: r.fields.action.clone(),
            approval_choice: r.approval_choice.clone(),
            target: r.fields.target.clone(),
        },
        blocking: r.fields.blocking,
        class: r.class,
        domain: if r.fields.technical {
            Domain::Technical
        } else {
            Domain::Delivery
        },
        holder: r.holder.clone(),
        id: r.id,
        options: r
            .fields
            .options
            .iter()
            .map(|o| Choice {
                key: o.key.clone(),
                text: Cow::Borrowed(&o.text),
            })
            .collect(),
        project: r.fields.project.as_deref().map(Cow::Borrowed),
        question: Cow::Borrowed(&r.fields.question),
        raised_by: agent(&r.raiser),
        recommendation: Cow::Borrowed(&r.fields.recommendation),
        requirement_ref: r.fields.requirement_ref.as_deref().map(Cow::Borrowed),
        route: route(&r.route),
        supersedes: r.fields.supersedes,
        target: r.fields.target.clone(),
        task_ref: r.fields.task_ref,
    }
}

/// Who has a decision: the human or the resolving role.
fn route(route: &Route) -> Party {
    match route {
        Route::Human => Party::Human,
        Route::Role(role) => Party::Role(role.clone()),
    }
}

/// A message as sent ([`MessageView`]): `id, from, from_run, to, class,
/// body, in_reply_to, corrects, decision, request`.
///
/// `from` and `to` use the same names as `message.send`'s `to` (a role
/// instance or `"human"`), so a reply is `{to: m.from, in_reply_to: m.id}`;
/// `from_run` is the sending run (`null` from the human); `request` is the
/// human input a human instruction carries.
pub fn message_view(m: &MessageRecord) -> MessageView<'_> {
    let (from, from_run) = match &m.from {
        Sender::Agent(a) => (Party::Role(a.role.clone()), Some(a.run.clone())),
        Sender::Human => (Party::Human, None),
    };
    MessageView {
        body: Cow::Borrowed(&m.body),
        class: m.class,
        corrects: m.corrects,
        cut: false,
        decision: m.decision,
        delivered_to: None,
        from,
        from_run,
        id: m.id,
        in_reply_to: m.in_reply_to,
        read: None,
        request: m.request,
        to: match &m.to {
            mosaic_domain::evidence::Recipient::Role(role) => Party::Role(role.clone()),
            mosaic_domain::evidence::Recipient::Human => Party::Human,
        },
        item: None,
    }
}

/// [`message_view`]'s `Value`.
pub fn message_json(m: &MessageRecord) -> Value {
    value_of(&message_view(m))
}

/// [`message_view`] plus what the store knows of its delivery:
/// `delivered_to` (the run, or `null`) and `read`.
pub fn message_facts_view(facts: &MessageFacts) -> MessageView<'_> {
    MessageView {
        delivered_to: Some(facts.delivered_to.clone()),
        read: Some(facts.read),
        ..message_view(&facts.record)
    }
}

/// [`message_facts_view`]'s `Value`.
pub fn message_facts_json(facts: &MessageFacts) -> Value {
    value_of(&message_facts_view(facts))
}

/// A message as an item of the human's inbox ([`super::bounded`]): with
/// its facts, and its body cut to `body` when that is shorter (then
/// `cut: true`); [`Inbox::new`] tags it.
pub(super) fn inbox_message<'a>(facts: &'a MessageFacts, body: &'a str) -> MessageView<'a> {
    MessageView {
        body: Cow::Borrowed(body),
        cut: body.len() < facts.record.body.len(),
        ..message_facts_view(facts)
    }
}

/// The result of an accepted bus verb, as its wire shape's `Value`:
/// - `role.claim`: `{status: "claimed"}`, or `{status: "held"}` when the
///   run already held the role ([`Claimed`]);
/// - `role.release`, `role.revoke`, `message.read`, `event.emit`, the
///   launch switch: `{}` ([`Done`]);
/// - decision verbs: [`decision_view`];
/// - `message.send`: exactly `{id, request}` (`request` is `null` for an
///   agent's message; [`Sent`]);
/// - `message.receive`: an array of [`message_view`];
/// - the trusted `authorize`: `{grant: "within-role", decision: null}` or
///   `{grant: "approval", decision: ID}` ([`Authorized`]).
pub fn reply_json(reply: &Reply) -> Value {
    match reply {
        Reply::Claimed(ClaimReply::Claimed) => value_of(&Claimed {
            status: ClaimStatus::Claimed,
        }),
        Reply::Claimed(ClaimReply::AlreadyHeld) => value_of(&Claimed {
            status: ClaimStatus::Held,
        }),
        Reply::Done => value_of(&Done {}),
        Reply::Decision(d) => decision_json(d),
        Reply::Sent { id, request } => value_of(&Sent {
            id: *id,
            request: *request,
        }),
        Reply::Received(messages) => {
            value_of(&messages.iter().map(message_view).collect::<Vec<_>>())
        }
        Reply::Authorized(Grant::WithinRole) => value_of(&Authorized {
            decision: None,
            grant: GrantKind::WithinRole,
        }),
        Reply::Authorized(Grant::Approval(id)) => value_of(&Authorized {
            decision: Some(*id),
            grant: GrantKind::Approval,
        }),
    }
}

/// One row of the tasks projection ([`TaskRow`]): `task_ref, kind, body,
/// tombstone, at`, with `body` parsed back to JSON.
pub fn task_row(task: &TaskView) -> TaskRow {
    TaskRow {
        at: task.at,
        body: body_json(&task.body),
        kind: task.kind.clone(),
        task_ref: task.task,
        tombstone: task.tombstone,
    }
}

/// [`task_row`]'s `Value`.
pub fn task_json(task: &TaskView) -> Value {
    value_of(&task_row(task))
}

/// One trail entry ([`Record`]): `{at, kind, business, …fields}`, `kind`
/// being [`Evidence::kind`]. The fields per kind:
/// - `session.launched`: `role, run, harness, address, pid, start_time`;
/// - `launch.revoked`, `launch.restored`: none;
/// - `role.claimed`, `role.released`: `role, run`; `role.revoked`: `role,
///   run, decision`; `session.ended`: `role, run, cause, status, signal,
///   vacated` (`status` and `signal` `null` where unknown or not the way
///   the process ended; `vacated`: whether the end freed the role);
/// - `decision.raised`: the fixed fields of [`decision_view`] (no status);
/// - `decision.resolved`: `id, choice, by, by_run, note`;
///   `decision.seen`, `decision.withdrawn`: `id, by, by_run, note`
///   (`by` is the acting role or `"human"`);
///   `decision.superseded`: `id, superseded_by`;
/// - `approval.consumed`: `decision, role, run, action, target`;
/// - `action.allowed`: `role, run, action, target, decision, subject,
///   subject_kind`;
/// - `message.sent`: the fields of [`message_view`];
///   `message.delivered`, `message.read`: `message, run`;
/// - `human.input`: `id, verb, subject, subject_kind`;
/// - `event.observed`: `role, run, event` (the observation's own kind),
///   `body` (parsed JSON), `subject, subject_kind, request`;
/// - `request.refused`: `role, run, verb, code` (the static code only).
///
/// `subject_kind` is `task`, `decision`, `message` or `role`, as in the
/// schema; `business` is `null` only for a refusal of an unknown caller.
pub fn record(record: &Stamped) -> Record<'_> {
    let e = &record.evidence;
    let fact = match e {
        Evidence::Launch(LaunchEvidence::Launched(l)) => Fact::SessionLaunched(launched(l)),
        Evidence::Launch(LaunchEvidence::Revoked { .. }) => Fact::LaunchRevoked,
        Evidence::Launch(LaunchEvidence::Restored { .. }) => Fact::LaunchRestored,
        Evidence::Claim(ClaimEvidence::Claimed { agent: a, .. }) => Fact::RoleClaimed(agent(a)),
        Evidence::Claim(ClaimEvidence::Released { agent: a, .. }) => Fact::RoleReleased(agent(a)),
        Evidence::Claim(ClaimEvidence::Revoked {
            agent: a, decision, ..
        }) => Fact::RoleRevoked(Revoked {
            decision: *decision,
            role: a.role.clone(),
            run: a.run.clone(),
        }),
        Evidence::Claim(ClaimEvidence::Ended(end)) => Fact::SessionEnded(SessionEnded {
            cause: end.ending.cause(),
            role: end.agent.role.clone(),
            run: end.agent.run.clone(),
            signal: end.ending.signal(),
            status: end.ending.status(),
            vacated: end.vacated,
        }),
        Evidence::Decision(DecisionEvidence::Raised(r)) => Fact::DecisionRaised(raised(r)),
        Evidence::Decision(DecisionEvidence::Resolved {
            id,
            choice,
            by,
            note,
            ..
        }) => {
            let Acted {
                by, by_run, note, ..
            } = acted(*id, by, note.as_deref());
            Fact::DecisionResolved(Resolved {
                by,
                by_run,
                choice: choice.clone(),
                id: *id,
                note,
            })
        }
        Evidence::Decision(DecisionEvidence::Seen { id, by, note, .. }) => {
            Fact::DecisionSeen(acted(*id, by, note.as_deref()))
        }
        Evidence::Decision(DecisionEvidence::Withdrawn { id, by, note, .. }) => {
            Fact::DecisionWithdrawn(acted(*id, by, note.as_deref()))
        }
        Evidence::Decision(DecisionEvidence::Superseded { id, by, .. }) => {
            Fact::DecisionSuperseded(Superseded {
                id: *id,
                superseded_by: *by,
            })
        }
        Evidence::Consumed(c) => Fact::ApprovalConsumed(Consumed {
            action: c.action.clone(),
            decision: c.decision,
            role: c.agent.role.clone(),
            run: c.agent.run.clone(),
            target: c.target.clone(),
        }),
        Evidence::Allowed(a) => {
            let (subject, subject_kind) = subject(a.subject.as_ref());
            Fact::ActionAllowed(Allowed {
                action: a.action.clone(),
                decision: a.decision,
                role: a.agent.role.clone(),
                run: a.agent.run.clone(),
                subject,
                subject_kind,
                target: a.target.clone(),
            })
        }
        Evidence::Message(MessageEvidence::Sent(m)) => Fact::MessageSent(message_view(m)),
        Evidence::Message(MessageEvidence::Delivered { message, run, .. }) => {
            Fact::MessageDelivered(Delivery {
                message: *message,
                run: run.clone(),
            })
        }
        Evidence::Message(MessageEvidence::Read { message, run, .. }) => {
            Fact::MessageRead(Delivery {
                message: *message,
                run: run.clone(),
            })
        }
        Evidence::Human(h) => {
            let (subject, subject_kind) = subject(h.subject.as_ref());
            Fact::HumanInput(HumanInput {
                id: h.id,
                subject,
                subject_kind,
                verb: Cow::Borrowed(&h.verb),
            })
        }
        Evidence::Observed(o) => {
            let (subject, subject_kind) = subject(o.subject.as_ref());
            Fact::EventObserved(Observed {
                body: body_json(&o.body),
                event: Cow::Borrowed(&o.kind),
                request: o.request,
                role: o.agent.role.clone(),
                run: o.agent.run.clone(),
                subject,
                subject_kind,
            })
        }
        Evidence::Refused(r) => Fact::RequestRefused(refused(r)),
        Evidence::RefusalsCounted(c) => {
            let Refused {
                code,
                role,
                run,
                verb,
            } = refused(&c.refused);
            Fact::RefusalsCounted(Counted {
                code,
                count: c.count,
                role,
                run,
                since: c.since,
                verb,
            })
        }
    };
    Record {
        at: record.at,
        business: e.business().cloned(),
        fact,
    }
}

/// [`record`]'s `Value`.
pub fn record_json(stamped: &Stamped) -> Value {
    value_of(&record(stamped))
}

/// A launch's fields, as its record and its `agents` row give them.
fn launched(l: &LaunchRecord) -> Launched {
    Launched {
        address: l.address.clone(),
        harness: l.harness,
        pid: l.pid,
        role: l.role.clone(),
        run: l.run.clone(),
        start_time: l.start_time,
    }
}

/// `{role, run}`.
fn agent(a: &AgentRef) -> AgentView {
    AgentView {
        role: a.role.clone(),
        run: a.run.clone(),
    }
}

/// The fields of a decision event by an actor.
fn acted<'a>(
    id: mosaic_domain::DecisionId,
    by: &DecisionActor,
    note: Option<&'a str>,
) -> Acted<'a> {
    let (by, by_run) = match by {
        DecisionActor::Agent(a) => (Party::Role(a.role.clone()), Some(a.run.clone())),
        DecisionActor::Human => (Party::Human, None),
    };
    Acted {
        by,
        by_run,
        id,
        note: note.map(Cow::Borrowed),
    }
}

/// A refusal's fields: its caller and verb where known, and its code.
fn refused(r: &RefusalRecord) -> Refused<'_> {
    Refused {
        code: r.refusal,
        role: r.agent.as_ref().map(|a| a.role.clone()),
        run: r.agent.as_ref().map(|a| a.run.clone()),
        verb: r.verb.as_deref().map(Cow::Borrowed),
    }
}

/// `(subject, subject_kind)`, both `None` when there is none.
fn subject(s: Option<&Subject>) -> (Option<String>, Option<SubjectKind>) {
    match s {
        None => (None, None),
        Some(Subject::Task(t)) => (Some(t.to_string()), Some(SubjectKind::Task)),
        Some(Subject::Decision(d)) => (Some(d.to_string()), Some(SubjectKind::Decision)),
        Some(Subject::Message(m)) => (Some(m.to_string()), Some(SubjectKind::Message)),
        Some(Subject::Role(r)) => (Some(r.to_string()), Some(SubjectKind::Role)),
    }
}

/// A stored JSON body, parsed; text that is not JSON stays a string.
fn body_json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()))
}

/// A run's life beyond its launch, for the `agents` projection: its end
/// (the evidence), and what its host noted (restarts, usage).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunLife {
    /// When and how the run ended, if it did.
    pub ended: Option<(Timestamp, mosaic_domain::evidence::Ending)>,
    /// How often its program started again inside the run.
    pub restarts: u64,
    /// What it used, if the host ever said.
    pub usage: Option<Usage>,
}

/// One bound run for the `agents` projection ([`AgentRow`]): `role, run,
/// harness, address, pid, start_time, holding, revoked`, then `launching`
/// (the business's launch switch, the same on every row), `waitsOn`: the
/// open decisions this run raised, each `{id, action, target, route,
/// blocking}` (`route` being who has it: `"human"` or the arbiter role),
/// `exited`: `null` while the process runs, else `{status, signal}` (each
/// `null` where unknown or not the way it ended), `ended`: `null` while
/// the run lives, else `{at, cause, status?, signal?}` (`status` and
/// `signal` only where known), `restarts` (a count) and `usage`: `null`
/// until the host noted it, else `{turns, inputTokens, outputTokens,
/// costUsd}`. `waitsOnMore` (absent here) is the caller's to set when it
/// left decisions out of `waitsOn`.
pub fn agent_row(
    record: &LaunchRecord,
    holding: bool,
    revoked: bool,
    launching: bool,
    waits_on: &[&Decision],
    exited: Option<Exited>,
    life: RunLife,
) -> AgentRow {
    let l = launched(record);
    AgentRow {
        address: l.address,
        ended: life.ended.map(|(at, ending)| Ended {
            at,
            cause: ending.cause(),
            signal: ending.signal(),
            status: ending.status(),
        }),
        exited,
        harness: l.harness,
        holding,
        last_at: None,
        last_verb: None,
        launching,
        pid: l.pid,
        restarts: life.restarts,
        revoked,
        role: l.role,
        run: l.run,
        start_time: l.start_time,
        usage: life.usage,
        waiting: false,
        waits_on: waits_on
            .iter()
            .map(|d| WaitsOn {
                action: d.record.fields.action.clone(),
                blocking: d.record.fields.blocking,
                id: d.record.id,
                route: route(&d.record.route),
                target: d.record.fields.target.clone(),
            })
            .collect(),
        waits_on_more: 0,
    }
}

/// [`agent_row`]'s `Value`.
pub fn agent_json(
    record: &LaunchRecord,
    holding: bool,
    revoked: bool,
    launching: bool,
    waits_on: &[&Decision],
    exited: Option<Exited>,
    life: RunLife,
) -> Value {
    value_of(&agent_row(
        record, holding, revoked, launching, waits_on, exited, life,
    ))
}

/// What the broker saw a run ask last: the verb and when it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastCall {
    /// The verb's wire name.
    pub verb: &'static str,
    /// When the broker read the request.
    pub at: mosaic_domain::Timestamp,
}

/// Adds to an `agents` row what the broker itself saw of the run:
/// `lastVerb` and `lastAt` (the verb of its last request and when, each
/// `null` before its first), and `waiting` (whether a `changes` wait of the
/// run is open now).
pub fn with_calls(row: &mut AgentRow, last: Option<LastCall>, waiting: bool) {
    row.last_verb = last.map(|l| l.verb.to_owned());
    row.last_at = last.map(|l| l.at);
    row.waiting = waiting;
}

/// The `inbox` answer ([`Inbox`]): each open decision ([`decision_view`],
/// with its `authorization` context) and then each unread message
/// ([`message_facts_view`]), every item tagged `type: "decision"|"message"`,
/// in the order given; then, when `more` unread messages lie beyond those
/// (`more > 0`), one last item `{"type":"more","unread":more}`.
pub fn inbox<'a>(decisions: &[&'a Decision], messages: &'a [MessageFacts], more: u64) -> Inbox<'a> {
    Inbox::new(
        decisions.iter().map(|d| decision_view(d)).collect(),
        messages.iter().map(message_facts_view).collect(),
        more,
        0,
    )
}

/// [`inbox`]'s `Value`.
pub fn inbox_json(decisions: &[&Decision], messages: &[MessageFacts], more: u64) -> Value {
    value_of(&inbox(decisions, messages, more))
}

/// [`inbox_json`]'s text, byte for byte, written without building the
/// `Value`: the inbox is the read agents make most, and its messages are
/// most of its cost.
pub fn inbox_text(decisions: &[&Decision], messages: &[MessageFacts], more: u64) -> String {
    text_of(&inbox(decisions, messages, more))
}

/// `changes`' answer ([`ChangePage`]): `{"cursor", "changes": [{"seq",
/// "kind", ...ids}]}`. A change carries only the ids it has (`message`,
/// `decision`, `role`, `task`): a pointer, never a body, a question or a
/// note.
pub fn change_page(cursor: u64, changes: &[(u64, Change)]) -> ChangePage {
    ChangePage {
        changes: changes
            .iter()
            .map(|(seq, change)| ChangeView {
                decision: change.decision,
                kind: KindName::of(change.kind),
                message: change.message,
                role: change.role.clone(),
                seq: *seq,
                task: change.task,
            })
            .collect(),
        cursor,
    }
}

/// [`change_page`]'s `Value`.
pub fn changes_json(cursor: u64, changes: &[(u64, Change)]) -> Value {
    value_of(&change_page(cursor, changes))
}

/// A row of `history` ([`ClosedRow`]), or `None` for a record that closes
/// no decision (the store lists none such).
pub fn closed_row(closed: &Closed) -> Option<ClosedRow> {
    let actor = |by: &DecisionActor| match by {
        DecisionActor::Agent(a) => (Some(Party::Role(a.role.clone())), Some(a.run.clone())),
        DecisionActor::Human => (Some(Party::Human), None),
    };
    let (status, (by, by_run), choice, note, superseded_by) = match &closed.closing.evidence {
        Evidence::Decision(DecisionEvidence::Resolved {
            by, choice, note, ..
        }) => (
            Closing::Resolved,
            actor(by),
            Some(choice.clone()),
            note.clone(),
            None,
        ),
        Evidence::Decision(DecisionEvidence::Withdrawn { by, note, .. }) => {
            (Closing::Withdrawn, actor(by), None, note.clone(), None)
        }
        Evidence::Decision(DecisionEvidence::Superseded { by, .. }) => {
            (Closing::Superseded, (None, None), None, None, Some(*by))
        }
        Evidence::Decision(DecisionEvidence::Raised(_) | DecisionEvidence::Seen { .. })
        | Evidence::Launch(_)
        | Evidence::Claim(_)
        | Evidence::Consumed(_)
        | Evidence::Allowed(_)
        | Evidence::Message(_)
        | Evidence::Human(_)
        | Evidence::Observed(_)
        | Evidence::Refused(_)
        | Evidence::RefusalsCounted(_) => return None,
    };
    let d = &closed.decision;
    Some(ClosedRow {
        action: d.fields.action.clone(),
        at: closed.closing.at,
        blocking: d.fields.blocking,
        by,
        by_run,
        choice,
        id: d.id,
        note,
        raiser: d.raiser.role.clone(),
        raiser_run: d.raiser.run.clone(),
        route: route(&d.route),
        seq: closed.seq,
        status,
        superseded_by,
        target: d.fields.target.clone(),
    })
}
