//! One trail record: `{at, kind, business, …fields}`, the fields being
//! those of its kind of evidence ([`Fact`]), one shape per kind.
//!
//! `business` is `null` only for a refusal of an unknown caller. Where a
//! record names a subject, `subject` is its text form and `subject_kind`
//! says which it is (`task`, `decision`, `message` or `role`), both `null`
//! when there is none. A record of a kind this client does not know (a
//! newer broker's) reads as [`Fact::Other`]; a known kind with a missing
//! field is an error.

use std::borrow::Cow;

use mosaic_domain::evidence::{EndCause, EvidenceKind, Harness, OptionKey};
use mosaic_domain::{
    Action, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId, Target,
    Timestamp,
};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::ser::{Error as _, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::decision::{AgentView, Raised};
use super::listed::Listable;
use super::message::MessageView;
use super::text::{self, KindName, Party};

/// One record: when it was written, the business it belongs to, and the
/// fact, written together in sorted key order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// When the broker wrote it.
    pub at: Timestamp,
    /// Its business (`None` only for a refusal of an unknown caller).
    pub business: Option<BusinessId>,
    /// What it records.
    pub fact: Fact<'a>,
}

impl Listable for Record<'_> {
    const MORE: &'static str = "records";
}

/// The keys every record has.
#[derive(Serialize, Deserialize)]
struct Stamp {
    #[serde(with = "text")]
    at: Timestamp,
    #[serde(with = "text::opt")]
    business: Option<BusinessId>,
    kind: KindName,
}

impl Serialize for Record<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let stamp = Stamp {
            at: self.at,
            business: self.business.clone(),
            kind: self.fact.kind(),
        };
        super::merged(serializer, &stamp, &self.fact)
    }
}

impl<'de> Deserialize<'de> for Record<'_> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let stamp = Stamp::deserialize(&value).map_err(D::Error::custom)?;
        let fact = match stamp.kind {
            KindName::Known(kind) => Fact::read(kind, value).map_err(D::Error::custom)?,
            KindName::Other(name) => Fact::Other(name),
        };
        Ok(Record {
            at: stamp.at,
            business: stamp.business,
            fact,
        })
    }
}

/// What a record records, one variant per kind of evidence, with the
/// fields that kind's record carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact<'a> {
    /// `session.launched`.
    SessionLaunched(Launched),
    /// `launch.revoked`: no fields.
    LaunchRevoked,
    /// `launch.restored`: no fields.
    LaunchRestored,
    /// `role.claimed`.
    RoleClaimed(AgentView),
    /// `role.released`.
    RoleReleased(AgentView),
    /// `role.revoked`.
    RoleRevoked(Revoked),
    /// `session.ended`.
    SessionEnded(SessionEnded),
    /// `decision.raised`: the fields fixed at raise (no status).
    DecisionRaised(Raised<'a>),
    /// `decision.resolved`.
    DecisionResolved(Resolved<'a>),
    /// `decision.seen`.
    DecisionSeen(Acted<'a>),
    /// `decision.withdrawn`.
    DecisionWithdrawn(Acted<'a>),
    /// `decision.superseded`.
    DecisionSuperseded(Superseded),
    /// `approval.consumed`.
    ApprovalConsumed(Consumed),
    /// `action.allowed`.
    ActionAllowed(Allowed),
    /// `message.sent`: the message as sent.
    MessageSent(MessageView<'a>),
    /// `message.delivered`.
    MessageDelivered(Delivery),
    /// `message.read`.
    MessageRead(Delivery),
    /// `human.input`.
    HumanInput(HumanInput<'a>),
    /// `event.observed`.
    EventObserved(Observed<'a>),
    /// `request.refused`.
    RequestRefused(Refused<'a>),
    /// `refusals.counted`.
    RefusalsCounted(Counted<'a>),
    /// A kind this client does not know, by its name.
    Other(String),
}

fn read<T: DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(value)
}

impl Fact<'_> {
    /// Its kind's name.
    pub fn kind(&self) -> KindName {
        let kind = match self {
            Fact::SessionLaunched(_) => EvidenceKind::SessionLaunched,
            Fact::LaunchRevoked => EvidenceKind::LaunchRevoked,
            Fact::LaunchRestored => EvidenceKind::LaunchRestored,
            Fact::RoleClaimed(_) => EvidenceKind::RoleClaimed,
            Fact::RoleReleased(_) => EvidenceKind::RoleReleased,
            Fact::RoleRevoked(_) => EvidenceKind::RoleRevoked,
            Fact::SessionEnded(_) => EvidenceKind::SessionEnded,
            Fact::DecisionRaised(_) => EvidenceKind::DecisionRaised,
            Fact::DecisionResolved(_) => EvidenceKind::DecisionResolved,
            Fact::DecisionSeen(_) => EvidenceKind::DecisionSeen,
            Fact::DecisionWithdrawn(_) => EvidenceKind::DecisionWithdrawn,
            Fact::DecisionSuperseded(_) => EvidenceKind::DecisionSuperseded,
            Fact::ApprovalConsumed(_) => EvidenceKind::ApprovalConsumed,
            Fact::ActionAllowed(_) => EvidenceKind::ActionAllowed,
            Fact::MessageSent(_) => EvidenceKind::MessageSent,
            Fact::MessageDelivered(_) => EvidenceKind::MessageDelivered,
            Fact::MessageRead(_) => EvidenceKind::MessageRead,
            Fact::HumanInput(_) => EvidenceKind::HumanInput,
            Fact::EventObserved(_) => EvidenceKind::EventObserved,
            Fact::RequestRefused(_) => EvidenceKind::RequestRefused,
            Fact::RefusalsCounted(_) => EvidenceKind::RefusalsCounted,
            Fact::Other(name) => return KindName::Other(name.clone()),
        };
        KindName::Known(kind)
    }

    /// The fact of a `kind` record, from the record's fields.
    fn read(kind: EvidenceKind, value: Value) -> Result<Fact<'static>, serde_json::Error> {
        Ok(match kind {
            EvidenceKind::SessionLaunched => Fact::SessionLaunched(read(value)?),
            EvidenceKind::LaunchRevoked => Fact::LaunchRevoked,
            EvidenceKind::LaunchRestored => Fact::LaunchRestored,
            EvidenceKind::RoleClaimed => Fact::RoleClaimed(read(value)?),
            EvidenceKind::RoleReleased => Fact::RoleReleased(read(value)?),
            EvidenceKind::RoleRevoked => Fact::RoleRevoked(read(value)?),
            EvidenceKind::SessionEnded => Fact::SessionEnded(read(value)?),
            EvidenceKind::DecisionRaised => Fact::DecisionRaised(read(value)?),
            EvidenceKind::DecisionResolved => Fact::DecisionResolved(read(value)?),
            EvidenceKind::DecisionSeen => Fact::DecisionSeen(read(value)?),
            EvidenceKind::DecisionWithdrawn => Fact::DecisionWithdrawn(read(value)?),
            EvidenceKind::DecisionSuperseded => Fact::DecisionSuperseded(read(value)?),
            EvidenceKind::ApprovalConsumed => Fact::ApprovalConsumed(read(value)?),
            EvidenceKind::ActionAllowed => Fact::ActionAllowed(read(value)?),
            EvidenceKind::MessageSent => Fact::MessageSent(read(value)?),
            EvidenceKind::MessageDelivered => Fact::MessageDelivered(read(value)?),
            EvidenceKind::MessageRead => Fact::MessageRead(read(value)?),
            EvidenceKind::HumanInput => Fact::HumanInput(read(value)?),
            EvidenceKind::EventObserved => Fact::EventObserved(read(value)?),
            EvidenceKind::RequestRefused => Fact::RequestRefused(read(value)?),
            EvidenceKind::RefusalsCounted => Fact::RefusalsCounted(read(value)?),
        })
    }
}

/// The fact's own fields (no `at`, `kind` or `business`).
impl Serialize for Fact<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Fact::SessionLaunched(f) => f.serialize(serializer),
            Fact::LaunchRevoked | Fact::LaunchRestored => Map::new().serialize(serializer),
            Fact::RoleClaimed(f) | Fact::RoleReleased(f) => f.serialize(serializer),
            Fact::RoleRevoked(f) => f.serialize(serializer),
            Fact::SessionEnded(f) => f.serialize(serializer),
            Fact::DecisionRaised(f) => f.serialize(serializer),
            Fact::DecisionResolved(f) => f.serialize(serializer),
            Fact::DecisionSeen(f) | Fact::DecisionWithdrawn(f) => f.serialize(serializer),
            Fact::DecisionSuperseded(f) => f.serialize(serializer),
            Fact::ApprovalConsumed(f) => f.serialize(serializer),
            Fact::ActionAllowed(f) => f.serialize(serializer),
            Fact::MessageSent(f) => f.serialize(serializer),
            Fact::MessageDelivered(f) | Fact::MessageRead(f) => f.serialize(serializer),
            Fact::HumanInput(f) => f.serialize(serializer),
            Fact::EventObserved(f) => f.serialize(serializer),
            Fact::RequestRefused(f) => f.serialize(serializer),
            Fact::RefusalsCounted(f) => f.serialize(serializer),
            Fact::Other(_) => Err(S::Error::custom(
                "a record of an unknown kind is read, never written",
            )),
        }
    }
}

/// `session.launched`: `role, run, harness, address, pid, start_time`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launched {
    /// The address the launch record gives, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub address: Option<String>,
    /// Its harness.
    #[serde(with = "text")]
    pub harness: Harness,
    /// Its process.
    pub pid: u32,
    /// Its role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// Its run.
    #[serde(with = "text")]
    pub run: RunId,
    /// Its process's start time (clock ticks since boot).
    pub start_time: u64,
}

/// `role.revoked`: `role, run, decision` (the approving decision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoked {
    /// The decision that approved the revoke.
    #[serde(with = "text")]
    pub decision: DecisionId,
    /// The role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// The revoked run.
    #[serde(with = "text")]
    pub run: RunId,
}

/// `session.ended`: `role, run, cause, status, signal, vacated` (`status`
/// and `signal` `null` where unknown or not the way the process ended;
/// `vacated`: whether the end freed the role).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEnded {
    /// Why it ended.
    #[serde(with = "text")]
    pub cause: EndCause,
    /// Its role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// The run.
    #[serde(with = "text")]
    pub run: RunId,
    /// The signal that killed its process.
    #[serde(deserialize_with = "Option::deserialize")]
    pub signal: Option<i32>,
    /// Its process's exit status.
    #[serde(deserialize_with = "Option::deserialize")]
    pub status: Option<i32>,
    /// Whether the end freed the role.
    pub vacated: bool,
}

/// `decision.seen` and `decision.withdrawn`: `id, by, by_run, note` (`by`
/// is the acting role or `human`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acted<'a> {
    /// Who acted.
    pub by: Party,
    /// The acting run (`None` for the human).
    #[serde(with = "text::opt")]
    pub by_run: Option<RunId>,
    /// The decision.
    #[serde(with = "text")]
    pub id: DecisionId,
    /// The actor's note, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub note: Option<Cow<'a, str>>,
}

/// `decision.resolved`: `id, choice, by, by_run, note`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved<'a> {
    /// Who resolved it.
    pub by: Party,
    /// The resolving run (`None` for the human).
    #[serde(with = "text::opt")]
    pub by_run: Option<RunId>,
    /// The option chosen.
    #[serde(with = "text")]
    pub choice: OptionKey,
    /// The decision.
    #[serde(with = "text")]
    pub id: DecisionId,
    /// The resolver's note, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub note: Option<Cow<'a, str>>,
}

/// `decision.superseded`: `id, superseded_by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superseded {
    /// The replaced decision.
    #[serde(with = "text")]
    pub id: DecisionId,
    /// The decision that replaced it.
    #[serde(with = "text")]
    pub superseded_by: DecisionId,
}

/// `approval.consumed`: `decision, role, run, action, target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumed {
    /// The action it was spent on.
    #[serde(with = "text")]
    pub action: Action,
    /// The approving decision.
    #[serde(with = "text")]
    pub decision: DecisionId,
    /// The spending role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// The spending run.
    #[serde(with = "text")]
    pub run: RunId,
    /// The target it was spent on.
    #[serde(with = "text::opt")]
    pub target: Option<Target>,
}

/// What a record is filed under: `task`, `decision`, `message` or `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubjectKind {
    /// A task ref.
    Task,
    /// A decision id.
    Decision,
    /// A message id.
    Message,
    /// A role instance.
    Role,
}

/// `action.allowed`: `role, run, action, target, decision, subject,
/// subject_kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowed {
    /// The action.
    #[serde(with = "text")]
    pub action: Action,
    /// The decision that approved it, if one did.
    #[serde(with = "text::opt")]
    pub decision: Option<DecisionId>,
    /// The allowed role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// The allowed run.
    #[serde(with = "text")]
    pub run: RunId,
    /// What it is filed under, in its text form.
    #[serde(deserialize_with = "Option::deserialize")]
    pub subject: Option<String>,
    /// Which kind of subject that is.
    #[serde(deserialize_with = "Option::deserialize")]
    pub subject_kind: Option<SubjectKind>,
    /// Its target.
    #[serde(with = "text::opt")]
    pub target: Option<Target>,
}

/// `message.delivered` and `message.read`: `message, run`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The message.
    #[serde(with = "text")]
    pub message: MessageId,
    /// The receiving run.
    #[serde(with = "text")]
    pub run: RunId,
}

/// `human.input`: `id, verb, subject, subject_kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanInput<'a> {
    /// The input's id (a human instruction's `request`).
    #[serde(with = "text")]
    pub id: EventId,
    /// What it is filed under, in its text form.
    #[serde(deserialize_with = "Option::deserialize")]
    pub subject: Option<String>,
    /// Which kind of subject that is.
    #[serde(deserialize_with = "Option::deserialize")]
    pub subject_kind: Option<SubjectKind>,
    /// The verb the human called.
    pub verb: Cow<'a, str>,
}

/// `event.observed`: `role, run, event` (the observation's own kind),
/// `body` (its JSON), `subject, subject_kind, request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed<'a> {
    /// The observation's body: JSON of the observation's own shape (text
    /// that is not JSON, which the store never holds, as a string).
    pub body: Value,
    /// The observation's kind, for example `task.created`.
    pub event: Cow<'a, str>,
    /// The human input that asked for it.
    #[serde(with = "text::opt")]
    pub request: Option<EventId>,
    /// The recording role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// The recording run.
    #[serde(with = "text")]
    pub run: RunId,
    /// What it is filed under, in its text form.
    #[serde(deserialize_with = "Option::deserialize")]
    pub subject: Option<String>,
    /// Which kind of subject that is.
    #[serde(deserialize_with = "Option::deserialize")]
    pub subject_kind: Option<SubjectKind>,
}

/// `request.refused`: `role, run, verb, code` (the static code only; the
/// role, run and verb `null` for a caller or verb not known).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused<'a> {
    /// The refusal.
    #[serde(with = "text")]
    pub code: Refusal,
    /// The refused role.
    #[serde(with = "text::opt")]
    pub role: Option<RoleInstance>,
    /// The refused run.
    #[serde(with = "text::opt")]
    pub run: Option<RunId>,
    /// The verb refused.
    #[serde(deserialize_with = "Option::deserialize")]
    pub verb: Option<Cow<'a, str>>,
}

/// `refusals.counted`: a refusal's fields, and `since` and `count`:
/// refusals past their window's rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted<'a> {
    /// The refusal.
    #[serde(with = "text")]
    pub code: Refusal,
    /// How many.
    pub count: u64,
    /// The refused role.
    #[serde(with = "text::opt")]
    pub role: Option<RoleInstance>,
    /// The refused run.
    #[serde(with = "text::opt")]
    pub run: Option<RunId>,
    /// Since when.
    #[serde(with = "text")]
    pub since: Timestamp,
    /// The verb refused.
    #[serde(deserialize_with = "Option::deserialize")]
    pub verb: Option<Cow<'a, str>>,
}
