//! Evidence: the facts the broker appends to its store, as typed values.
//!
//! Evidence is grouped by the machine that owns it, so each machine matches
//! exhaustively over its own group and the bus dispatches on the outer enum.
//! The store keeps every record forever; machines rebuild from it on start.

use std::fmt;

pub use crate::caller::AgentRef;
pub use crate::ending::{EndCause, Ending, RunEnd};

use crate::{
    Action, ActionClass, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId,
    Target, TaskRef, Timestamp, Verb,
};

/// A record as committed: its broker write time and the fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// The broker write time, strictly increasing across all writes.
    pub at: Timestamp,
    /// The fact.
    pub evidence: Evidence,
}

/// Who resolved, acknowledged or withdrew a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionActor {
    /// An agent, through its capability.
    Agent(AgentRef),
    /// The business's human, through the proven human CLI.
    Human,
}

/// The harness of a managed agent process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Harness {
    /// The `pi` harness.
    Pi,
    /// The `claude-code` harness.
    ClaudeCode,
}

impl Harness {
    /// Parses `pi` or `claude-code`.
    ///
    /// # Errors
    /// `bad-config` for any other name.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        match text {
            "pi" => Ok(Harness::Pi),
            "claude-code" => Ok(Harness::ClaudeCode),
            _ => Err(Refusal::BadConfig),
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Pi => "pi",
            Harness::ClaudeCode => "claude-code",
        }
    }
}

/// A launch the trusted host performed: which process runs which role.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaunchRecord {
    /// The business.
    pub business: BusinessId,
    /// The role instance the process works as.
    pub role: RoleInstance,
    /// The run id, also in the process's `MOSAIC_RUN_ID`.
    pub run: RunId,
    /// The harness.
    pub harness: Harness,
    /// The harness's address, if it has one.
    pub address: Option<String>,
    /// The process id.
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: clock ticks since boot.
    pub start_time: u64,
}

/// Launch evidence: bindings and the human's launch switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchEvidence {
    /// `session.launched`: a capability was issued for this launch.
    Launched(LaunchRecord),
    /// The human switched launching off for the business.
    Revoked {
        /// The business.
        business: BusinessId,
    },
    /// The human switched launching back on.
    Restored {
        /// The business.
        business: BusinessId,
    },
}

/// Role-claim evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimEvidence {
    /// A run took a vacant role.
    Claimed {
        /// The business.
        business: BusinessId,
        /// The run and role.
        agent: AgentRef,
    },
    /// The holder gave the role up.
    Released {
        /// The business.
        business: BusinessId,
        /// The run and role.
        agent: AgentRef,
    },
    /// The holder was revoked by a human-approved decision; this run can
    /// never hold the role again.
    Revoked {
        /// The business.
        business: BusinessId,
        /// The revoked run and its role.
        agent: AgentRef,
        /// The approving decision.
        decision: DecisionId,
    },
    /// `session.ended`: the run ended, and freed its role if it held it.
    Ended(RunEnd),
}

/// A decision option key, for example `yes` (same charset as names).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OptionKey(String);

impl OptionKey {
    /// Parses an option key: 1 to 64 ASCII letters, digits, `.`, `_`, `-`.
    ///
    /// # Errors
    /// `bad-request` for anything else.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        let b = text.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= 64
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(Refusal::BadRequest)
        }
    }

    /// `yes`, the default approval choice.
    pub fn yes() -> Self {
        Self("yes".to_owned())
    }

    /// The text form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OptionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One option of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionOption {
    /// The key a resolver picks.
    pub key: OptionKey,
    /// What the option means.
    pub text: String,
}

/// Who resolves a decision. Fixed at raise, never changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Route {
    /// The holder of this role instance (the raiser itself for within-role).
    Role(RoleInstance),
    /// The business's human.
    Human,
}

/// What the raiser of a decision gives and the record keeps as given:
/// declared once, held by both `decisions::RaiseInput` (the verb's
/// arguments) and [`DecisionRecord`] (the evidence), so the two cannot
/// drift.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaiseFields {
    /// The action the decision is about.
    pub action: Action,
    /// What the action is aimed at.
    pub target: Option<Target>,
    /// The question put to the resolver.
    pub question: String,
    /// The options, keys unique, in the raiser's order.
    pub options: Vec<DecisionOption>,
    /// The raiser's recommendation (free text).
    pub recommendation: String,
    /// Whether work is blocked on this decision (then `task_ref` is set).
    pub blocking: bool,
    /// Whether the decision is in the technical domain (routes to the technical arbiter).
    pub technical: bool,
    /// The project the decision belongs to, if any.
    pub project: Option<String>,
    /// The task the decision belongs to, if any.
    pub task_ref: Option<TaskRef>,
    /// The requirement the decision traces to, if any.
    pub requirement_ref: Option<String>,
    /// The open decision this one replaces, if any.
    pub supersedes: Option<DecisionId>,
}

/// A raised decision as recorded: everything fixed at raise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord {
    /// The decision id.
    pub id: DecisionId,
    /// The business.
    pub business: BusinessId,
    /// The raising run and role.
    pub raiser: AgentRef,
    /// The raiser's words and choices, as given.
    pub fields: RaiseFields,
    /// The option whose resolution authorizes the action.
    pub approval_choice: OptionKey,
    /// The action's class for the raiser when raised.
    pub class: ActionClass,
    /// Who resolves.
    pub route: Route,
    /// For `role.revoke`: the run that held the target role when raised.
    pub holder: Option<RunId>,
}

/// Decision evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionEvidence {
    /// A decision was raised (routed once, immutably).
    Raised(Box<DecisionRecord>),
    /// The resolver picked an option.
    Resolved {
        /// The business.
        business: BusinessId,
        /// The decision.
        id: DecisionId,
        /// The picked option.
        choice: OptionKey,
        /// Who resolved.
        by: DecisionActor,
        /// An optional note.
        note: Option<String>,
    },
    /// The resolver acknowledged the decision without resolving it.
    Seen {
        /// The business.
        business: BusinessId,
        /// The decision.
        id: DecisionId,
        /// Who acknowledged.
        by: DecisionActor,
        /// An optional note.
        note: Option<String>,
    },
    /// The raiser or the human withdrew the open decision.
    Withdrawn {
        /// The business.
        business: BusinessId,
        /// The decision.
        id: DecisionId,
        /// Who withdrew.
        by: DecisionActor,
        /// An optional note.
        note: Option<String>,
    },
    /// A newer decision replaced this open one.
    Superseded {
        /// The business.
        business: BusinessId,
        /// The replaced decision.
        id: DecisionId,
        /// The replacing decision.
        by: DecisionId,
    },
}

/// A single-use approval was spent. The store keeps one per decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumption {
    /// The business.
    pub business: BusinessId,
    /// The approving decision.
    pub decision: DecisionId,
    /// Who spent it.
    pub agent: AgentRef,
    /// The authorized action.
    pub action: Action,
    /// The authorized target.
    pub target: Option<Target>,
}

/// `action.allowed`: an agent was allowed an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionAllowed {
    /// The business.
    pub business: BusinessId,
    /// Who was allowed.
    pub agent: AgentRef,
    /// The action.
    pub action: Action,
    /// The action's target.
    pub target: Option<Target>,
    /// The decision whose approval was consumed, if any.
    pub decision: Option<DecisionId>,
    /// What the trail files this under.
    pub subject: Option<Subject>,
}

/// What a trail is asked about, and what evidence is filed under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A task.
    Task(TaskRef),
    /// A decision.
    Decision(DecisionId),
    /// A message.
    Message(MessageId),
    /// A role instance.
    Role(RoleInstance),
}

/// The eight message classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageClass {
    /// `REQUEST`
    Request,
    /// `ASSIGNMENT`
    Assignment,
    /// `REVIEW-REQUEST`
    ReviewRequest,
    /// `REVIEW-RESULT`
    ReviewResult,
    /// `RESULT`
    Result,
    /// `INFO`
    Info,
    /// `DECISION`
    Decision,
    /// `REACTION`
    Reaction,
}

impl MessageClass {
    /// Every class, in the spec's order.
    pub const ALL: [MessageClass; 8] = [
        MessageClass::Request,
        MessageClass::Assignment,
        MessageClass::ReviewRequest,
        MessageClass::ReviewResult,
        MessageClass::Result,
        MessageClass::Info,
        MessageClass::Decision,
        MessageClass::Reaction,
    ];

    /// The wire name, for example `REVIEW-REQUEST`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageClass::Request => "REQUEST",
            MessageClass::Assignment => "ASSIGNMENT",
            MessageClass::ReviewRequest => "REVIEW-REQUEST",
            MessageClass::ReviewResult => "REVIEW-RESULT",
            MessageClass::Result => "RESULT",
            MessageClass::Info => "INFO",
            MessageClass::Decision => "DECISION",
            MessageClass::Reaction => "REACTION",
        }
    }

    /// Parses a wire name.
    ///
    /// # Errors
    /// `bad-request` for anything else.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or(Refusal::BadRequest)
    }
}

/// A message's sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// An agent.
    Agent(AgentRef),
    /// The human (the send is a `human.input`).
    Human,
}

/// A message's recipient.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Recipient {
    /// Whoever holds this role when they receive.
    Role(RoleInstance),
    /// The reserved recipient `human`.
    Human,
}

/// A sent message as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRecord {
    /// The message id.
    pub id: MessageId,
    /// The business.
    pub business: BusinessId,
    /// Who sent it.
    pub from: Sender,
    /// Who it is for.
    pub to: Recipient,
    /// Its class, if given.
    pub class: Option<MessageClass>,
    /// Its body (plain text).
    pub body: String,
    /// The message it answers.
    pub in_reply_to: Option<MessageId>,
    /// The message it corrects.
    pub corrects: Option<MessageId>,
    /// The decision it cites or spends.
    pub decision: Option<DecisionId>,
    /// The originating human input, for human instructions.
    pub request: Option<EventId>,
}

/// Message evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageEvidence {
    /// A message was sent.
    Sent(Box<MessageRecord>),
    /// The broker handed the message to this run (at most once, ever).
    Delivered {
        /// The business.
        business: BusinessId,
        /// The message.
        message: MessageId,
        /// The receiving run.
        run: RunId,
    },
    /// The receiving run acknowledged the message.
    Read {
        /// The business.
        business: BusinessId,
        /// The message.
        message: MessageId,
        /// The run that received it.
        run: RunId,
    },
}

/// `human.input`: something the proven human did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanInput {
    /// The event id (a human instruction's `request`).
    pub id: EventId,
    /// The business.
    pub business: BusinessId,
    /// The verb the human used, for example `decision.resolve`.
    pub verb: String,
    /// What it concerned.
    pub subject: Option<Subject>,
}

impl HumanInput {
    /// The message this input acknowledges, when it is the human's
    /// `message.read`: the one record of that act (a message to the human
    /// is never delivered to a run, so no `message.read` record names it).
    pub fn read_message(&self) -> Option<MessageId> {
        match self.subject {
            Some(Subject::Message(id)) if self.verb == Verb::MessageRead.as_str() => Some(id),
            Some(
                Subject::Message(_) | Subject::Task(_) | Subject::Decision(_) | Subject::Role(_),
            )
            | None => None,
        }
    }
}

/// A routine observation or a trusted adapter's event (`event.emit`,
/// `record_event`). The body is opaque JSON text checked by the adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The business.
    pub business: BusinessId,
    /// Who recorded it.
    pub agent: AgentRef,
    /// The event kind, for example `action.allowed` or `task.created`.
    pub kind: String,
    /// The JSON body, as text.
    pub body: String,
    /// What the trail files it under.
    pub subject: Option<Subject>,
    /// For `task.created`: the same-business human input that asked for the
    /// task (`Command::record_event` takes it from the body's `request`).
    pub request: Option<EventId>,
}

/// A refusal, recorded in its own transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefusalRecord {
    /// The caller's business, when the capability identified one.
    pub business: Option<BusinessId>,
    /// The caller, when an agent.
    pub agent: Option<AgentRef>,
    /// The verb, when it was a known one.
    pub verb: Option<String>,
    /// The refusal.
    pub refusal: Refusal,
}

/// Refusals counted in a window rather than written a row each
/// ([`crate::refusal_counts`]): `count` more refusals like `refused`, from
/// `since` until the window closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalCount {
    /// What each of them was.
    pub refused: RefusalRecord,
    /// The start of the window (the time of its first refusal).
    pub since: Timestamp,
    /// How many, past the window's rows of their own; at least one.
    pub count: u64,
}

/// Every kind of fact the broker records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// Launch bindings and the launch switch.
    Launch(LaunchEvidence),
    /// Role claims.
    Claim(ClaimEvidence),
    /// Decision lifecycle.
    Decision(DecisionEvidence),
    /// A spent approval.
    Consumed(Consumption),
    /// `action.allowed`.
    Allowed(ActionAllowed),
    /// Messages, deliveries, reads.
    Message(MessageEvidence),
    /// `human.input`.
    Human(HumanInput),
    /// Routine observations and adapter events.
    Observed(Observation),
    /// A refusal.
    Refused(RefusalRecord),
    /// Refusals counted in a window.
    RefusalsCounted(RefusalCount),
}

/// Declares [`EvidenceKind`] from one row per kind of record: its name in
/// the ledger, whether a restart replays it, and whether it can make a
/// change of the feed. The store's kind lists and its decoding come from
/// these rows, so a new kind cannot be stored yet left out of them.
macro_rules! evidence_kinds {
    ($($name:ident => $wire:expr, $replay:ident, $feed:ident, $meaning:literal;)*) => {
        /// The kind of a record: the name the ledger, the trail and the
        /// human-facing output use, one per shape of [`Evidence`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EvidenceKind {
            $(#[doc = $meaning] $name,)*
        }

        impl EvidenceKind {
            /// Every kind, in the table's order.
            pub const ALL: &'static [EvidenceKind] = &[$(EvidenceKind::$name,)*];

            /// The ledger name, for example `"message.sent"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EvidenceKind::$name => $wire,)*
                }
            }

            /// Whether a machine's state depends on records of this kind, so
            /// a restart must replay them. Messages, observations and
            /// refusals are read from the store on demand instead, which
            /// keeps memory flat as the record grows.
            pub const fn is_machine_state(self) -> bool {
                match self {
                    $(EvidenceKind::$name => evidence_kinds!(@replay $replay),)*
                }
            }

            /// Whether a record of this kind can make a change of the feed
            /// ([`crate::changes::Change::of`]); the feed reads no other kind.
            pub const fn can_be_change(self) -> bool {
                match self {
                    $(EvidenceKind::$name => evidence_kinds!(@feed $feed),)*
                }
            }
        }
    };
    (@replay replayed) => { true };
    (@replay on_demand) => { false };
    (@feed feed) => { true };
    (@feed quiet) => { false };
}

evidence_kinds! {
    SessionLaunched => "session.launched", replayed, feed, "A launch was bound.";
    LaunchRevoked => "launch.revoked", replayed, feed, "The human switched launching off.";
    LaunchRestored => "launch.restored", replayed, feed, "The human switched launching back on.";
    RoleClaimed => "role.claimed", replayed, feed, "A run took a vacant role.";
    RoleReleased => "role.released", replayed, feed, "The holder gave its role up.";
    RoleRevoked => "role.revoked", replayed, feed, "The holder was revoked.";
    SessionEnded => "session.ended", replayed, feed,
        "A run ended, and freed the role it held.";
    DecisionRaised => "decision.raised", replayed, feed, "A decision was raised.";
    DecisionResolved => "decision.resolved", replayed, feed, "A decision was resolved.";
    DecisionSeen => Verb::DecisionSeen.as_str(), replayed, feed,
        "A decision was acknowledged; named after its verb.";
    DecisionWithdrawn => "decision.withdrawn", replayed, feed, "A decision was withdrawn.";
    DecisionSuperseded => "decision.superseded", replayed, feed, "A decision was replaced.";
    ApprovalConsumed => "approval.consumed", replayed, quiet, "An approval was spent.";
    ActionAllowed => "action.allowed", on_demand, quiet, "An agent was allowed an action.";
    MessageSent => "message.sent", on_demand, feed, "A message was sent.";
    MessageDelivered => "message.delivered", on_demand, quiet, "A message was handed to a run.";
    MessageRead => Verb::MessageRead.as_str(), on_demand, quiet,
        "A message was acknowledged; named after its verb.";
    HumanInput => "human.input", on_demand, feed,
        "The proven human did something (its `message.read` changes the human's inbox).";
    EventObserved => "event.observed", on_demand, feed, "An observation or an adapter's event.";
    RequestRefused => "request.refused", on_demand, quiet, "A request was refused.";
    RefusalsCounted => "refusals.counted", on_demand, quiet,
        "Refusals past their window's rows, counted.";
}

impl EvidenceKind {
    /// The kind with this ledger name, if there is one.
    pub fn parse(text: &str) -> Option<EvidenceKind> {
        EvidenceKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == text)
    }
}

impl fmt::Display for EvidenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Evidence {
    /// The decision this record closes: a resolve's, a withdraw's or a
    /// supersede's (a `seen` closes nothing).
    pub fn closes(&self) -> Option<&DecisionId> {
        match self {
            Evidence::Decision(
                DecisionEvidence::Resolved { id, .. }
                | DecisionEvidence::Withdrawn { id, .. }
                | DecisionEvidence::Superseded { id, .. },
            ) => Some(id),
            Evidence::Decision(DecisionEvidence::Raised(_) | DecisionEvidence::Seen { .. })
            | Evidence::Launch(_)
            | Evidence::Claim(_)
            | Evidence::Consumed(_)
            | Evidence::Allowed(_)
            | Evidence::Message(_)
            | Evidence::Human(_)
            | Evidence::Observed(_)
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => None,
        }
    }

    /// The fact's kind, for example `message.sent`.
    pub fn kind(&self) -> EvidenceKind {
        match self {
            Evidence::Launch(LaunchEvidence::Launched(_)) => EvidenceKind::SessionLaunched,
            Evidence::Launch(LaunchEvidence::Revoked { .. }) => EvidenceKind::LaunchRevoked,
            Evidence::Launch(LaunchEvidence::Restored { .. }) => EvidenceKind::LaunchRestored,
            Evidence::Claim(ClaimEvidence::Claimed { .. }) => EvidenceKind::RoleClaimed,
            Evidence::Claim(ClaimEvidence::Released { .. }) => EvidenceKind::RoleReleased,
            Evidence::Claim(ClaimEvidence::Revoked { .. }) => EvidenceKind::RoleRevoked,
            Evidence::Claim(ClaimEvidence::Ended(_)) => EvidenceKind::SessionEnded,
            Evidence::Decision(DecisionEvidence::Raised(_)) => EvidenceKind::DecisionRaised,
            Evidence::Decision(DecisionEvidence::Resolved { .. }) => EvidenceKind::DecisionResolved,
            Evidence::Decision(DecisionEvidence::Seen { .. }) => EvidenceKind::DecisionSeen,
            Evidence::Decision(DecisionEvidence::Withdrawn { .. }) => {
                EvidenceKind::DecisionWithdrawn
            }
            Evidence::Decision(DecisionEvidence::Superseded { .. }) => {
                EvidenceKind::DecisionSuperseded
            }
            Evidence::Consumed(_) => EvidenceKind::ApprovalConsumed,
            Evidence::Allowed(_) => EvidenceKind::ActionAllowed,
            Evidence::Message(MessageEvidence::Sent(_)) => EvidenceKind::MessageSent,
            Evidence::Message(MessageEvidence::Delivered { .. }) => EvidenceKind::MessageDelivered,
            Evidence::Message(MessageEvidence::Read { .. }) => EvidenceKind::MessageRead,
            Evidence::Human(_) => EvidenceKind::HumanInput,
            Evidence::Observed(_) => EvidenceKind::EventObserved,
            Evidence::Refused(_) => EvidenceKind::RequestRefused,
            Evidence::RefusalsCounted(_) => EvidenceKind::RefusalsCounted,
        }
    }

    /// The business the fact belongs to (none for refusals of unknown callers).
    pub fn business(&self) -> Option<&BusinessId> {
        match self {
            Evidence::Launch(LaunchEvidence::Launched(r)) => Some(&r.business),
            Evidence::Launch(LaunchEvidence::Revoked { business })
            | Evidence::Launch(LaunchEvidence::Restored { business })
            | Evidence::Claim(ClaimEvidence::Claimed { business, .. })
            | Evidence::Claim(ClaimEvidence::Released { business, .. })
            | Evidence::Claim(ClaimEvidence::Revoked { business, .. })
            | Evidence::Claim(ClaimEvidence::Ended(RunEnd { business, .. }))
            | Evidence::Decision(DecisionEvidence::Resolved { business, .. })
            | Evidence::Decision(DecisionEvidence::Seen { business, .. })
            | Evidence::Decision(DecisionEvidence::Withdrawn { business, .. })
            | Evidence::Decision(DecisionEvidence::Superseded { business, .. })
            | Evidence::Message(MessageEvidence::Delivered { business, .. })
            | Evidence::Message(MessageEvidence::Read { business, .. }) => Some(business),
            Evidence::Decision(DecisionEvidence::Raised(d)) => Some(&d.business),
            Evidence::Consumed(c) => Some(&c.business),
            Evidence::Allowed(a) => Some(&a.business),
            Evidence::Message(MessageEvidence::Sent(m)) => Some(&m.business),
            Evidence::Human(h) => Some(&h.business),
            Evidence::Observed(o) => Some(&o.business),
            Evidence::Refused(r) => r.business.as_ref(),
            Evidence::RefusalsCounted(c) => c.refused.business.as_ref(),
        }
    }

    /// Whether a machine's state depends on this fact, so a restart must
    /// replay it ([`EvidenceKind::is_machine_state`]).
    pub fn is_machine_state(&self) -> bool {
        self.kind().is_machine_state()
    }
}

impl Evidence {
    /// Whether this record belongs on `subject`'s trail: it names the
    /// subject in one of its own fields. The store's `trail` read is defined
    /// by this function; the SQLite adapter's indexed query is tested
    /// against it.
    pub fn concerns(&self, subject: &Subject) -> bool {
        let decision = |id: &DecisionId| subject == &Subject::Decision(*id);
        let message = |id: &MessageId| subject == &Subject::Message(*id);
        let role = |r: &RoleInstance| subject == &Subject::Role(r.clone());
        let filed = |s: &Option<Subject>| s.as_ref() == Some(subject);
        match self {
            Evidence::Launch(LaunchEvidence::Launched(r)) => role(&r.role),
            Evidence::Launch(LaunchEvidence::Revoked { .. })
            | Evidence::Launch(LaunchEvidence::Restored { .. }) => false,
            Evidence::Claim(ClaimEvidence::Claimed { agent, .. })
            | Evidence::Claim(ClaimEvidence::Released { agent, .. })
            | Evidence::Claim(ClaimEvidence::Ended(RunEnd { agent, .. })) => role(&agent.role),
            Evidence::Claim(ClaimEvidence::Revoked {
                agent, decision: d, ..
            }) => role(&agent.role) || decision(d),
            Evidence::Decision(DecisionEvidence::Raised(d)) => {
                decision(&d.id)
                    || d.fields.supersedes.as_ref().is_some_and(decision)
                    || d.fields
                        .task_ref
                        .is_some_and(|t| subject == &Subject::Task(t))
            }
            Evidence::Decision(DecisionEvidence::Resolved { id, .. })
            | Evidence::Decision(DecisionEvidence::Seen { id, .. })
            | Evidence::Decision(DecisionEvidence::Withdrawn { id, .. }) => decision(id),
            Evidence::Decision(DecisionEvidence::Superseded { id, by, .. }) => {
                decision(id) || decision(by)
            }
            Evidence::Consumed(c) => decision(&c.decision),
            Evidence::Allowed(a) => a.decision.as_ref().is_some_and(decision) || filed(&a.subject),
            Evidence::Message(MessageEvidence::Sent(m)) => {
                message(&m.id)
                    || m.in_reply_to.as_ref().is_some_and(message)
                    || m.corrects.as_ref().is_some_and(message)
                    || m.decision.as_ref().is_some_and(decision)
            }
            Evidence::Message(MessageEvidence::Delivered { message: id, .. })
            | Evidence::Message(MessageEvidence::Read { message: id, .. }) => message(id),
            Evidence::Human(h) => filed(&h.subject),
            Evidence::Observed(o) => filed(&o.subject),
            Evidence::Refused(_) | Evidence::RefusalsCounted(_) => false,
        }
    }
}

impl Evidence {
    /// Calls `f` with every text the record holds: each string and each
    /// name (business, role, run, action, target, option key), whoever gave
    /// it. Numbers, broker-drawn ids and our own static names (harnesses,
    /// classes, refusal codes) hold no text a caller chose and are skipped.
    /// The writer's leak guard looks for credential tokens in exactly these,
    /// so every struct is taken apart field by field: a new field does not
    /// compile until it is visited or skipped here.
    pub fn texts(&self, mut f: impl FnMut(&str)) {
        let f = &mut f;
        match self {
            Evidence::Launch(LaunchEvidence::Launched(LaunchRecord {
                business,
                role,
                run,
                harness: _,
                address,
                pid: _,
                start_time: _,
            })) => {
                f(business.as_str());
                f(role.as_str());
                f(run.as_str());
                address.iter().for_each(|a| f(a));
            }
            Evidence::Launch(
                LaunchEvidence::Revoked { business } | LaunchEvidence::Restored { business },
            ) => f(business.as_str()),
            Evidence::Claim(
                ClaimEvidence::Claimed { business, agent }
                | ClaimEvidence::Released { business, agent }
                | ClaimEvidence::Revoked {
                    business,
                    agent,
                    decision: _,
                }
                | ClaimEvidence::Ended(RunEnd {
                    business,
                    agent,
                    ending: _,
                    vacated: _,
                }),
            ) => {
                f(business.as_str());
                agent_texts(agent, f);
            }
            Evidence::Decision(DecisionEvidence::Raised(record)) => decision_texts(record, f),
            Evidence::Decision(DecisionEvidence::Resolved {
                business,
                id: _,
                choice,
                by,
                note,
            }) => {
                f(business.as_str());
                f(choice.as_str());
                actor_texts(by, f);
                note.iter().for_each(|n| f(n));
            }
            Evidence::Decision(
                DecisionEvidence::Seen {
                    business,
                    id: _,
                    by,
                    note,
                }
                | DecisionEvidence::Withdrawn {
                    business,
                    id: _,
                    by,
                    note,
                },
            ) => {
                f(business.as_str());
                actor_texts(by, f);
                note.iter().for_each(|n| f(n));
            }
            Evidence::Decision(DecisionEvidence::Superseded {
                business,
                id: _,
                by: _,
            }) => f(business.as_str()),
            Evidence::Consumed(Consumption {
                business,
                decision: _,
                agent,
                action,
                target,
            }) => {
                f(business.as_str());
                agent_texts(agent, f);
                f(action.as_str());
                target.iter().for_each(|t| f(t.as_str()));
            }
            Evidence::Allowed(ActionAllowed {
                business,
                agent,
                action,
                target,
                decision: _,
                subject,
            }) => {
                f(business.as_str());
                agent_texts(agent, f);
                f(action.as_str());
                target.iter().for_each(|t| f(t.as_str()));
                subject_texts(subject.as_ref(), f);
            }
            Evidence::Message(MessageEvidence::Sent(record)) => message_texts(record, f),
            Evidence::Message(
                MessageEvidence::Delivered {
                    business,
                    message: _,
                    run,
                }
                | MessageEvidence::Read {
                    business,
                    message: _,
                    run,
                },
            ) => {
                f(business.as_str());
                f(run.as_str());
            }
            Evidence::Human(HumanInput {
                id: _,
                business,
                verb,
                subject,
            }) => {
                f(business.as_str());
                f(verb);
                subject_texts(subject.as_ref(), f);
            }
            Evidence::Observed(Observation {
                business,
                agent,
                kind,
                body,
                subject,
                request: _,
            }) => {
                f(business.as_str());
                agent_texts(agent, f);
                f(kind);
                f(body);
                subject_texts(subject.as_ref(), f);
            }
            Evidence::Refused(RefusalRecord {
                business,
                agent,
                verb,
                refusal: _,
            })
            | Evidence::RefusalsCounted(RefusalCount {
                refused:
                    RefusalRecord {
                        business,
                        agent,
                        verb,
                        refusal: _,
                    },
                since: _,
                count: _,
            }) => {
                business.iter().for_each(|b| f(b.as_str()));
                agent.iter().for_each(|a| agent_texts(a, f));
                verb.iter().for_each(|v| f(v));
            }
        }
    }
}

fn agent_texts(agent: &AgentRef, f: &mut impl FnMut(&str)) {
    let AgentRef { role, run } = agent;
    f(role.as_str());
    f(run.as_str());
}

fn actor_texts(actor: &DecisionActor, f: &mut impl FnMut(&str)) {
    match actor {
        DecisionActor::Agent(agent) => agent_texts(agent, f),
        DecisionActor::Human => {}
    }
}

fn subject_texts(subject: Option<&Subject>, f: &mut impl FnMut(&str)) {
    match subject {
        Some(Subject::Role(role)) => f(role.as_str()),
        Some(Subject::Task(_) | Subject::Decision(_) | Subject::Message(_)) | None => {}
    }
}

fn decision_texts(record: &DecisionRecord, f: &mut impl FnMut(&str)) {
    let DecisionRecord {
        id: _,
        business,
        raiser,
        fields:
            RaiseFields {
                action,
                target,
                question,
                options,
                recommendation,
                blocking: _,
                technical: _,
                project,
                task_ref: _,
                requirement_ref,
                supersedes: _,
            },
        approval_choice,
        class: _,
        route,
        holder,
    } = record;
    f(business.as_str());
    agent_texts(raiser, f);
    f(action.as_str());
    target.iter().for_each(|t| f(t.as_str()));
    f(question);
    for DecisionOption { key, text } in options {
        f(key.as_str());
        f(text);
    }
    f(recommendation);
    project.iter().for_each(|p| f(p));
    requirement_ref.iter().for_each(|r| f(r));
    f(approval_choice.as_str());
    match route {
        Route::Role(role) => f(role.as_str()),
        Route::Human => {}
    }
    holder.iter().for_each(|h| f(h.as_str()));
}

fn message_texts(record: &MessageRecord, f: &mut impl FnMut(&str)) {
    let MessageRecord {
        id: _,
        business,
        from,
        to,
        class: _,
        body,
        in_reply_to: _,
        corrects: _,
        decision: _,
        request: _,
    } = record;
    f(business.as_str());
    match from {
        Sender::Agent(agent) => agent_texts(agent, f),
        Sender::Human => {}
    }
    match to {
        Recipient::Role(role) => f(role.as_str()),
        Recipient::Human => {}
    }
    f(body);
}
