//! A trail as the console shows it: each record with the words its
//! sentence names ([`super::sentence`]), made from the record's typed fact
//! (one shape per kind of evidence, `mosaic_client::wire::record`), and
//! what the trail holds whole that an inbox may have cut (a decision's
//! raise, a message's body).

use mosaic_client::wire::listed::Listed;
use mosaic_client::wire::record::{Fact, Record as WireRecord};
use mosaic_client::wire::text::Party;
use mosaic_domain::{MessageId, RoleInstance, RunId};

use super::model::{Decision, Inbox, Kind, Message, Shown, Who};

/// A trail's answer, made once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trail {
    /// Its records, in write order; the last may say how many more one
    /// answer could not hold.
    pub records: Vec<Record>,
    /// Each decision raised in it, whole.
    pub raised: Vec<Decision>,
    /// Each message sent in it, by id, with its whole body.
    pub sent: Vec<(MessageId, Vec<Shown>)>,
}

impl Trail {
    /// A short decision made whole from this trail, the trail of
    /// `subject`, when that is the decision and the trail holds its raise.
    pub fn fill_decision(&self, subject: &str, decision: &mut Decision) {
        let raised = self.raised.iter().find(|d| d.id == decision.id);
        if let (true, true, Some(raised)) =
            (decision.cut, decision.id.to_string() == subject, raised)
        {
            *decision = Decision {
                raised_ms: decision.raised_ms,
                ..raised.clone()
            };
        }
    }

    /// A cut message made whole from this trail, the trail of `subject`,
    /// when that is the message and the trail holds its send.
    pub fn fill_message(&self, subject: &str, message: &mut Message) {
        let sent = self.sent.iter().find(|(id, _)| *id == message.id);
        if let (true, true, Some((_, body))) =
            (message.cut, message.id.to_string() == subject, sent)
        {
            message.body.clone_from(body);
            message.cut = false;
        }
    }

    /// Each cut decision and message of `inbox` that is `subject`, filled
    /// from this trail.
    pub fn fill_inbox(&self, subject: &str, inbox: &mut Inbox) {
        for d in &mut inbox.decisions {
            self.fill_decision(subject, d);
        }
        for m in &mut inbox.messages {
            self.fill_message(subject, m);
        }
    }
}

impl From<&Listed<WireRecord<'_>>> for Trail {
    fn from(listed: &Listed<WireRecord<'_>>) -> Trail {
        let mut trail = Trail::default();
        for record in &listed.items {
            let (raised, sent) = fills(record);
            trail.raised.extend(raised);
            trail.sent.extend(sent);
            trail.records.push(Record::from(record));
        }
        if listed.more > 0 {
            trail.records.push(Record {
                kind: Kind::Other(Shown::of(&format!(
                    "{} more records, past what one answer holds,",
                    listed.more
                ))),
                at: Shown::of("…"),
                at_ms: None,
                who: Shown::of("the broker"),
                raiser: None,
                fields: Vec::new(),
            });
        }
        trail
    }
}

/// One record of a trail, with the fields its sentence may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its kind.
    pub kind: Kind,
    /// When it was written, as the broker wrote it.
    pub at: Shown,
    /// When it was written (ms since the epoch).
    pub at_ms: Option<i64>,
    /// Who did it: `role/run`, `the human`, or `someone`.
    pub who: Shown,
    /// A raised decision's raiser.
    pub raiser: Option<Who>,
    /// Named fields: `question`, `action`, `target`, `choice`, `verb`,
    /// `code`, `from`, `to`, `class`, `note`, `by` (a superseding
    /// decision), each shown on one line.
    fields: Vec<(&'static str, Shown)>,
}

/// `role/run`.
fn agent(role: &RoleInstance, run: &RunId) -> String {
    format!("{role}/{run}")
}

/// Who acted on a decision: `the human`, or `role/run`.
fn actor(by: &Party, by_run: Option<&RunId>) -> String {
    match (by, by_run) {
        (Party::Human, _) => "the human".to_owned(),
        (Party::Role(role), Some(run)) => agent(role, run),
        (Party::Role(role), None) => format!("{role}/-"),
    }
}

impl From<&WireRecord<'_>> for Record {
    fn from(record: &WireRecord<'_>) -> Record {
        let someone = || "someone".to_owned();
        let mut fields: Vec<(&'static str, String)> = Vec::new();
        let mut raiser = None;
        let who = match &record.fact {
            Fact::SessionLaunched(l) => agent(&l.role, &l.run),
            Fact::RoleClaimed(a) | Fact::RoleReleased(a) => agent(&a.role, &a.run),
            Fact::RoleRevoked(r) => agent(&r.role, &r.run),
            Fact::SessionEnded(e) => agent(&e.role, &e.run),
            Fact::DecisionRaised(r) => {
                raiser = Some(Who::from(&r.raised_by));
                fields.push(("question", r.question.to_string()));
                fields.push(("action", r.action.to_string()));
                fields.extend(r.target.as_ref().map(|t| ("target", t.to_string())));
                fields.push(("class", r.class.as_str().to_owned()));
                someone()
            }
            Fact::DecisionResolved(r) => {
                fields.push(("choice", r.choice.to_string()));
                fields.extend(r.note.as_ref().map(|n| ("note", n.to_string())));
                actor(&r.by, r.by_run.as_ref())
            }
            Fact::DecisionSeen(a) | Fact::DecisionWithdrawn(a) => {
                fields.extend(a.note.as_ref().map(|n| ("note", n.to_string())));
                actor(&a.by, a.by_run.as_ref())
            }
            Fact::ApprovalConsumed(c) => {
                fields.push(("action", c.action.to_string()));
                fields.extend(c.target.as_ref().map(|t| ("target", t.to_string())));
                agent(&c.role, &c.run)
            }
            Fact::ActionAllowed(a) => {
                fields.push(("action", a.action.to_string()));
                fields.extend(a.target.as_ref().map(|t| ("target", t.to_string())));
                agent(&a.role, &a.run)
            }
            Fact::MessageSent(m) => {
                fields.push(("from", m.from.to_string()));
                fields.push(("to", m.to.to_string()));
                fields.extend(m.class.map(|c| ("class", c.as_str().to_owned())));
                someone()
            }
            Fact::HumanInput(h) => {
                fields.push(("verb", h.verb.to_string()));
                someone()
            }
            Fact::EventObserved(o) => agent(&o.role, &o.run),
            Fact::RequestRefused(r) => {
                fields.extend(r.verb.as_ref().map(|v| ("verb", v.to_string())));
                fields.push(("code", r.code.code().to_owned()));
                match (&r.role, &r.run) {
                    (Some(role), Some(run)) => agent(role, run),
                    (Some(_) | None, _) => someone(),
                }
            }
            Fact::RefusalsCounted(c) => {
                fields.extend(c.verb.as_ref().map(|v| ("verb", v.to_string())));
                fields.push(("code", c.code.code().to_owned()));
                match (&c.role, &c.run) {
                    (Some(role), Some(run)) => agent(role, run),
                    (Some(_) | None, _) => someone(),
                }
            }
            Fact::DecisionSuperseded(s) => {
                fields.push(("by", s.superseded_by.to_string()));
                someone()
            }
            Fact::LaunchRevoked
            | Fact::LaunchRestored
            | Fact::MessageDelivered(_)
            | Fact::MessageRead(_)
            | Fact::Other(_) => someone(),
        };
        Record {
            kind: Kind::from(&record.fact.kind()),
            at: Shown::text(&record.at),
            at_ms: Some(record.at.unix_ms()),
            who: Shown::of(&who),
            raiser,
            fields: fields
                .into_iter()
                .map(|(name, text)| (name, Shown::of(&text)))
                .collect(),
        }
    }
}

impl Record {
    /// The field `key`, or `-`.
    pub fn field(&self, key: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("-", |(_, v)| v.as_str())
    }

    /// Its named fields, each with its shown value, in the record's order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Whether it has the field `key`.
    pub fn has(&self, key: &str) -> bool {
        self.fields.iter().any(|(k, _)| *k == key)
    }
}

/// The raise a `decision.raised` record carries, whole, and the body a
/// `message.sent` record carries: what fills a decision or message an
/// inbox cut.
fn fills(record: &WireRecord<'_>) -> (Option<Decision>, Option<(MessageId, Vec<Shown>)>) {
    match &record.fact {
        Fact::DecisionRaised(raised) => (Some(Decision::from(raised)), None),
        Fact::MessageSent(sent) => (None, Some((sent.id, Shown::lines(&sent.body)))),
        Fact::SessionLaunched(_)
        | Fact::LaunchRevoked
        | Fact::LaunchRestored
        | Fact::RoleClaimed(_)
        | Fact::RoleReleased(_)
        | Fact::RoleRevoked(_)
        | Fact::SessionEnded(_)
        | Fact::DecisionResolved(_)
        | Fact::DecisionSeen(_)
        | Fact::DecisionWithdrawn(_)
        | Fact::DecisionSuperseded(_)
        | Fact::ApprovalConsumed(_)
        | Fact::ActionAllowed(_)
        | Fact::MessageDelivered(_)
        | Fact::MessageRead(_)
        | Fact::HumanInput(_)
        | Fact::EventObserved(_)
        | Fact::RequestRefused(_)
        | Fact::RefusalsCounted(_)
        | Fact::Other(_) => (None, None),
    }
}
