//! The commands: one verb with its parsed arguments ([`Command`]), the row
//! of the verb table each serves (`Row`), and the trusted `record_event`
//! body's rules. The bus drives them; the runtime builds them.

use crate::decisions::RaiseInput;
use crate::evidence::{MessageClass, Recipient, Subject};
use crate::messages::MessageFacts;
use crate::verb::{CallerKind, Verb, AUTHORIZE, RECORD_EVENT, TRUSTED_CALLERS};
use crate::{Action, DecisionId, EventId, MessageId, Refusal, RunId, Target, TaskRef};

/// The arguments of `message.send`, as the caller gave them. The new id
/// and the store facts are runtime inputs and travel beside it in
/// [`Command::Send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendInput {
    /// The recipient.
    pub to: Recipient,
    /// The class, if given.
    pub class: Option<MessageClass>,
    /// The body.
    pub body: String,
    /// The message answered.
    pub in_reply_to: Option<MessageId>,
    /// The message corrected.
    pub corrects: Option<MessageId>,
    /// The decision cited (within-role) or spent (otherwise).
    pub decision: Option<DecisionId>,
}

/// One verb with parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `role.claim`.
    Claim,
    /// `role.release`.
    Release,
    /// `role.revoke {role, decision}`.
    Revoke {
        /// The role to revoke its holder from.
        role: crate::RoleInstance,
        /// The approving decision.
        decision: DecisionId,
    },
    /// `decision.raise`.
    Raise {
        /// The new decision's id (drawn by the runtime from the entropy
        /// port, never given by the caller).
        id: DecisionId,
        /// What the caller asked for.
        input: Box<RaiseInput>,
    },
    /// `decision.resolve {id, choice, note?}`.
    Resolve {
        /// The decision.
        id: DecisionId,
        /// The picked option.
        choice: crate::evidence::OptionKey,
        /// A note.
        note: Option<String>,
    },
    /// `decision.seen {id, note?}`.
    Seen {
        /// The decision.
        id: DecisionId,
        /// A note.
        note: Option<String>,
    },
    /// `decision.withdraw {id, note?}`.
    Withdraw {
        /// The decision.
        id: DecisionId,
        /// A note.
        note: Option<String>,
    },
    /// `message.send`, with referenced messages already read.
    Send {
        /// The new message's id (drawn by the runtime from the entropy
        /// port, never given by the caller).
        id: MessageId,
        /// What the caller asked for.
        input: Box<SendInput>,
        /// What the store has for `in_reply_to` and `corrects` (filled in by
        /// the runtime from [`Command::references`]; an id without facts is
        /// unknown).
        known: Vec<MessageFacts>,
    },
    /// `message.receive`, with the undelivered batch already read.
    Receive {
        /// Up to 100 undelivered messages for the caller's role.
        batch: Vec<MessageFacts>,
    },
    /// `message.read {id}`, with the message already read.
    Read {
        /// The message id.
        id: MessageId,
        /// What the store has under this id (filled in by the runtime).
        known: Option<MessageFacts>,
    },
    /// `event.emit {kind:'action.allowed', body:{action:'routine', target?}, subject?}`.
    EmitRoutine {
        /// What the routine action was aimed at.
        target: Option<Target>,
        /// What to file it under.
        subject: Option<Subject>,
    },
    /// `launch.revoke`.
    LaunchRevoke,
    /// `launch.restore`.
    LaunchRestore,
    /// `run.end {run}`: the human ends a run.
    EndRun {
        /// The run to end.
        run: RunId,
    },
    /// The trusted adapter API `authorize(cap, action, {decision, target})`.
    Authorize {
        /// The action.
        action: Action,
        /// Its target.
        target: Option<Target>,
        /// The approving decision, if any.
        decision: Option<DecisionId>,
    },
    /// The trusted adapter API `record_event(cap, {kind, body, subject})`,
    /// as [`Command::record_event`] builds it.
    RecordEvent {
        /// The event kind; human input, launch control, the bus's own and
        /// `browser.` kinds refuse.
        kind: Action,
        /// The JSON body as text (its rules checked by
        /// [`Command::record_event`]).
        body: String,
        /// What to file it under; `task.*` kinds must name their task.
        subject: Option<Subject>,
        /// For `task.created`: the human input that requested the task.
        request: Option<EventId>,
    },
    /// The broker's own record of a `browser.request` outcome
    /// (`browser.completed`, filed under the agent's role). No adapter can
    /// send it: `record_event` refuses every `browser.` kind.
    RecordBrowserOutcome {
        /// The JSON body as text (built by the broker: action, request id,
        /// outcome, answer size and digest, never the payload).
        body: String,
    },
}

impl Command {
    /// The messages whose store facts the runtime must put into the command
    /// (`Command::Send::known`, `Command::Read::known`) before handing it
    /// over.
    pub fn references(&self) -> Vec<MessageId> {
        match self {
            Command::Send { input, .. } => input
                .in_reply_to
                .iter()
                .chain(input.corrects.iter())
                .copied()
                .collect(),
            Command::Read { id, .. } => vec![*id],
            Command::Claim
            | Command::Release
            | Command::Revoke { .. }
            | Command::Raise { .. }
            | Command::Resolve { .. }
            | Command::Seen { .. }
            | Command::Withdraw { .. }
            | Command::Receive { .. }
            | Command::EmitRoutine { .. }
            | Command::LaunchRevoke
            | Command::LaunchRestore
            | Command::EndRun { .. }
            | Command::Authorize { .. }
            | Command::RecordEvent { .. }
            | Command::RecordBrowserOutcome { .. } => Vec::new(),
        }
    }

    /// Whether the command carries the caller's undelivered messages
    /// (`message.receive`): the runtime reads them for an agent's, and
    /// hands every other caller's over empty.
    pub fn wants_batch(&self) -> bool {
        matches!(self, Command::Receive { .. })
    }

    /// The command with the store facts the runtime read for it: what the
    /// store has for [`Command::references`], or the batch when
    /// [`Command::wants_batch`]. The one place a command's facts are put in,
    /// for the runtime and the machine fuzzer alike; a command that carries
    /// none comes back as it was.
    pub fn with_facts(self, mut facts: Vec<MessageFacts>) -> Command {
        match self {
            Command::Send { id, input, .. } => Command::Send {
                id,
                input,
                known: facts,
            },
            Command::Read { id, .. } => Command::Read {
                id,
                known: facts.pop(),
            },
            Command::Receive { .. } => Command::Receive { batch: facts },
            command @ (Command::Claim
            | Command::Release
            | Command::Revoke { .. }
            | Command::Raise { .. }
            | Command::Resolve { .. }
            | Command::Seen { .. }
            | Command::Withdraw { .. }
            | Command::EmitRoutine { .. }
            | Command::LaunchRevoke
            | Command::LaunchRestore
            | Command::EndRun { .. }
            | Command::Authorize { .. }
            | Command::RecordEvent { .. }
            | Command::RecordBrowserOutcome { .. }) => command,
        }
    }

    /// The name of the verb this command serves, for refusal records: the
    /// verb table's wire name, or the trusted call's own name.
    pub fn verb(&self) -> &'static str {
        match self.row() {
            Row::Verb(verb) => verb.as_str(),
            Row::Trusted(name) => name,
        }
    }

    /// Who may send this command: its verb's callers in the verb table, or
    /// those of the trusted calls.
    pub fn callers(&self) -> &'static [CallerKind] {
        match self.row() {
            Row::Verb(verb) => verb.callers(),
            Row::Trusted(_) => TRUSTED_CALLERS,
        }
    }

    /// Refuses a caller kind that may not send this command.
    ///
    /// # Errors
    /// `human-only` or `not-authorized`, as [`crate::verb::admit`].
    pub fn admit(&self, caller: CallerKind) -> Result<(), Refusal> {
        crate::verb::admit(self.callers(), caller)
    }

    /// The row of the verb table this command serves, or the trusted call
    /// it is: the one place a command is tied to its verb.
    fn row(&self) -> Row {
        match self {
            Command::Claim => Row::Verb(Verb::RoleClaim),
            Command::Release => Row::Verb(Verb::RoleRelease),
            Command::Revoke { .. } => Row::Verb(Verb::RoleRevoke),
            Command::Raise { .. } => Row::Verb(Verb::DecisionRaise),
            Command::Resolve { .. } => Row::Verb(Verb::DecisionResolve),
            Command::Seen { .. } => Row::Verb(Verb::DecisionSeen),
            Command::Withdraw { .. } => Row::Verb(Verb::DecisionWithdraw),
            Command::Send { .. } => Row::Verb(Verb::MessageSend),
            Command::Receive { .. } => Row::Verb(Verb::MessageReceive),
            Command::Read { .. } => Row::Verb(Verb::MessageRead),
            Command::EmitRoutine { .. } => Row::Verb(Verb::EventEmit),
            Command::LaunchRevoke => Row::Verb(Verb::LaunchRevoke),
            Command::LaunchRestore => Row::Verb(Verb::LaunchRestore),
            Command::EndRun { .. } => Row::Verb(Verb::RunEnd),
            Command::Authorize { .. } => Row::Trusted(AUTHORIZE),
            Command::RecordEvent { .. } => Row::Trusted(RECORD_EVENT),
            Command::RecordBrowserOutcome { .. } => Row::Verb(Verb::BrowserRequest),
        }
    }
}

/// What a command serves: a row of the verb table or a trusted call.
enum Row {
    Verb(Verb),
    Trusted(&'static str),
}

/// The kind of the event that files a task. It names the human input that
/// asked for the task, and only it does.
pub const TASK_CREATED: &str = "task.created";

/// A field of a `record_event` body, as the adapter found it in the JSON
/// object: the domain parses no JSON, but the body's rules read three fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyField<'a> {
    /// The object has no such key.
    Absent,
    /// A JSON string.
    Text(&'a str),
    /// Any other JSON value.
    NotText,
}

/// A `record_event` body: the JSON object as text, and the fields its
/// rules read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBody<'a> {
    /// The JSON object, as text; the store keeps it as given.
    pub text: String,
    /// `task_ref`.
    pub task_ref: BodyField<'a>,
    /// `requirement`.
    pub requirement: BodyField<'a>,
    /// `request`.
    pub request: BodyField<'a>,
}

impl Command {
    /// The trusted `record_event` call as a command, once its body keeps
    /// its rules: a `task_ref` is text naming the task the event is filed
    /// under; a [`TASK_CREATED`] event has a non-empty `requirement` and, in
    /// `request`, the id of the human input that asked for the task. These
    /// refuse before the caller is known; the bus then checks the caller,
    /// the kind and the subject, and the store that `request` is a human
    /// input of the caller's business.
    ///
    /// # Errors
    /// `bad-request` for a body breaking the rules, or the refusal of
    /// parsing `task_ref` or `request`.
    pub fn record_event(
        kind: Action,
        body: EventBody<'_>,
        subject: Option<Subject>,
    ) -> Result<Command, Refusal> {
        match body.task_ref {
            BodyField::Absent => {}
            BodyField::Text(task) => {
                if subject != Some(Subject::Task(TaskRef::parse(task)?)) {
                    return Err(Refusal::BadRequest);
                }
            }
            BodyField::NotText => return Err(Refusal::BadRequest),
        }
        let request = if kind.as_str() == TASK_CREATED {
            match body.requirement {
                BodyField::Text(requirement) if !requirement.is_empty() => {}
                BodyField::Text(_) | BodyField::Absent | BodyField::NotText => {
                    return Err(Refusal::BadRequest)
                }
            }
            match body.request {
                BodyField::Text(request) => Some(EventId::parse(request)?),
                BodyField::Absent | BodyField::NotText => return Err(Refusal::BadRequest),
            }
        } else {
            None
        };
        Ok(Command::RecordEvent {
            kind,
            body: body.text,
            subject,
            request,
        })
    }
}

/// What the machine fuzzer (`fuzzing::machines`) draws a verb's arguments
/// from: its names and ids, decoded from the fuzzer's bytes.
#[cfg(feature = "fuzzing")]
pub trait Draw {
    /// A role name, of the business or not.
    fn role(&mut self) -> arbitrary::Result<crate::RoleInstance>;
    /// A message's recipient: a role or the human.
    fn recipient(&mut self) -> arbitrary::Result<Recipient>;
    /// A decision raised earlier, or one never raised.
    fn decision(&mut self) -> arbitrary::Result<DecisionId>;
    /// The id of a decision being raised now.
    fn new_decision(&mut self) -> DecisionId;
    /// A message sent earlier, or one never sent.
    fn message(&mut self) -> arbitrary::Result<MessageId>;
    /// A run bound earlier, or one never bound.
    fn run(&mut self) -> arbitrary::Result<RunId>;
    /// The id of a message being sent now.
    fn new_message(&mut self) -> MessageId;
    /// An option key.
    fn key(&mut self) -> arbitrary::Result<crate::evidence::OptionKey>;
    /// A target, or none.
    fn target(&mut self) -> arbitrary::Result<Option<Target>>;
    /// A subject, or none.
    fn subject(&mut self) -> arbitrary::Result<Option<Subject>>;
    /// An action to decide on.
    fn action(&mut self) -> arbitrary::Result<Action>;
    /// A `browser.` action.
    fn browser_action(&mut self) -> arbitrary::Result<Action>;
    /// A task ref.
    fn task_ref(&mut self) -> arbitrary::Result<TaskRef>;
    /// A yes or no.
    fn flag(&mut self) -> arbitrary::Result<bool>;
    /// A count from 0 to `max`.
    fn up_to(&mut self, max: u8) -> arbitrary::Result<u8>;
}

#[cfg(feature = "fuzzing")]
impl Command {
    /// A command of `verb` as the machine fuzzer sends it, its store facts
    /// still empty (the fuzzer puts them in with [`Command::with_facts`], as
    /// the runtime does); `None` for a read, which never reaches the bus.
    /// It sits beside the commands so that a new verb's command and its
    /// drawing are one edit: the match names every verb, so a new one does
    /// not compile until the fuzzer draws it.
    ///
    /// # Errors
    /// When the fuzzer's bytes run out.
    pub fn drawn(verb: Verb, d: &mut impl Draw) -> arbitrary::Result<Option<Command>> {
        use crate::evidence::{DecisionOption, RaiseFields};
        fn maybe<D: Draw + ?Sized, T>(
            d: &mut D,
            value: impl FnOnce(&mut D) -> arbitrary::Result<T>,
        ) -> arbitrary::Result<Option<T>> {
            if d.flag()? {
                value(d).map(Some)
            } else {
                Ok(None)
            }
        }
        Ok(Some(match verb {
            Verb::RoleClaim => Command::Claim,
            Verb::RoleRelease => Command::Release,
            Verb::RoleRevoke => Command::Revoke {
                role: d.role()?,
                decision: d.decision()?,
            },
            Verb::DecisionRaise => {
                let mut options = Vec::new();
                for _ in 0..d.up_to(3)? {
                    options.push(DecisionOption {
                        key: d.key()?,
                        text: "an option".to_owned(),
                    });
                }
                let input = RaiseInput {
                    fields: RaiseFields {
                        action: d.action()?,
                        target: d.target()?,
                        question: "shall we?".to_owned(),
                        options,
                        recommendation: "yes".to_owned(),
                        blocking: d.flag()?,
                        technical: d.flag()?,
                        project: None,
                        task_ref: maybe(d, |d| d.task_ref())?,
                        requirement_ref: None,
                        supersedes: maybe(d, |d| d.decision())?,
                    },
                    choice: maybe(d, |d| d.key())?,
                    approval_choice: maybe(d, |d| d.key())?,
                };
                Command::Raise {
                    id: d.new_decision(),
                    input: Box::new(input),
                }
            }
            Verb::DecisionResolve => Command::Resolve {
                id: d.decision()?,
                choice: d.key()?,
                note: None,
            },
            Verb::DecisionSeen => Command::Seen {
                id: d.decision()?,
                note: Some("seen".to_owned()),
            },
            Verb::DecisionWithdraw => Command::Withdraw {
                id: d.decision()?,
                note: None,
            },
            Verb::MessageSend => {
                let input = SendInput {
                    to: d.recipient()?,
                    class: None,
                    body: "hello".to_owned(),
                    in_reply_to: maybe(d, |d| d.message())?,
                    corrects: maybe(d, |d| d.message())?,
                    decision: maybe(d, |d| d.decision())?,
                };
                Command::Send {
                    id: d.new_message(),
                    input: Box::new(input),
                    known: Vec::new(),
                }
            }
            Verb::MessageReceive => Command::Receive { batch: Vec::new() },
            Verb::MessageRead => Command::Read {
                id: d.message()?,
                known: None,
            },
            Verb::EventEmit => Command::EmitRoutine {
                target: d.target()?,
                subject: d.subject()?,
            },
            Verb::LaunchRevoke => Command::LaunchRevoke,
            Verb::LaunchRestore => Command::LaunchRestore,
            Verb::RunEnd => Command::EndRun { run: d.run()? },
            // Authorized like any action; the runtime then carries it to a pane.
            Verb::BrowserRequest => Command::Authorize {
                action: d.browser_action()?,
                target: d.target()?,
                decision: maybe(d, |d| d.decision())?,
            },
            Verb::Inbox
            | Verb::Tasks
            | Verb::Agents
            | Verb::Trail
            | Verb::Head
            | Verb::History
            | Verb::Changes => return Ok(None),
        }))
    }
}
