//! One request line to a typed [`WireRequest`], and a [`Call`] to the
//! domain [`Command`] or the read [`Query`] the runtime serves.
//!
//! A request is checked in a fixed order, and the first failing check
//! decides the code, so every input has exactly one answer:
//!
//! 1. the line: longer than [`MAX_REQUEST_BYTES`] → `request-too-large`;
//!    not strict JSON ([`parse_json`]) or not an object → `bad-request`;
//! 2. top-level keys other than `cap`, `verb`, `args` → `unknown-key`;
//! 3. `cap` missing or not a string → `bad-request`; not 64 lowercase hex →
//!    `bad-capability`;
//! 4. `verb` missing or not a string → `bad-request`; not a verb of the
//!    table ([`Verb`], the domain's) → `unknown-verb`;
//! 5. `args` present but not an object → `bad-request` (absent is `{}`);
//!    a key the verb's argument type does not define
//!    ([`VerbArgs::arg_keys`]), or a key other
//!    than `key`/`text` in a `decision.raise` option → `unknown-key`;
//! 6. each argument in the spec's order: missing when required, or of the
//!    wrong JSON type → `bad-request`; text the domain parser refuses →
//!    that parser's code (`bad-id`, `bad-task-ref`, `unknown-action`,
//!    `bad-request` for option keys, targets and message classes).
//!
//! An optional argument given as `null` counts as absent, as in the
//! config parser's serde `Option`s; a required one given as `null` is
//! missing.
//!
//! New ids are not in the wire: [`Call::into_dispatch`] draws them (one
//! for `decision.raise`, one for `message.send`) when it builds the
//! command, and resolves UUID subjects through the runtime.

use std::fmt;

use mosaic_client::wire::args::VerbArgs;
use mosaic_domain::bus::{Command, SendInput};
use mosaic_domain::changes;
use mosaic_domain::decisions::RaiseInput;
use mosaic_domain::evidence::{
    DecisionOption, MessageClass, OptionKey, RaiseFields, Recipient, Subject,
};
use mosaic_domain::{
    Action, BusinessId, Capability, DecisionId, MessageId, Refusal, RoleInstance, RunId, Target,
    TaskRef,
};
use serde_json::{Map, Value};

pub use mosaic_domain::Verb;

use super::browser::{browser_call, BrowserCall};
use super::json::parse_json;

/// The longest request line the broker reads, without its newline: 64 KiB
/// (65 536 bytes is accepted, one more is `request-too-large`), the limit
/// the socket frames lines with (`mosaic_client::socket::MAX_REQUEST`);
/// checked here too so a line from any other transport meets the same rule.
pub const MAX_REQUEST_BYTES: usize = mosaic_client::socket::MAX_REQUEST;

/// A UUID that names a decision or a message; which one, only the runtime
/// knows ([`SubjectRef::resolve`]). Its text form is the lowercase
/// hyphenated one the domain ids use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UuidRef {
    decision: DecisionId,
    message: MessageId,
}

impl UuidRef {
    /// Parses lowercase hyphenated `8-4-4-4-12` hex.
    ///
    /// # Errors
    /// `bad-id` for any other text.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        Ok(Self {
            decision: DecisionId::parse(text)?,
            message: MessageId::parse(text)?,
        })
    }

    /// The UUID read as a decision id.
    pub fn decision(&self) -> DecisionId {
        self.decision
    }

    /// The UUID read as a message id.
    pub fn message(&self) -> MessageId {
        self.message
    }
}

impl fmt::Display for UuidRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.decision.fmt(f)
    }
}

/// What a UUID names, as the runtime found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UuidKind {
    /// A decision of the caller's business.
    Decision,
    /// A message of the caller's business.
    Message,
}

/// A subject as the wire names it (`event.emit`'s and `trail`'s `subject`):
/// one string, read in this order:
/// - starting with `vikunja:` → a strict task ref (else `bad-task-ref`);
/// - in UUID form (36 characters, hex digits, hyphens at 8, 13, 18, 23)
///   → a decision or message id, resolved by the runtime (uppercase hex
///   is `bad-id`: ids have one text form, lowercase);
/// - anything else → a role instance name (else `bad-id`).
///
/// A role instance whose name has UUID form is therefore never reachable as
/// a subject; business definitions should not use such names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SubjectRef {
    /// `vikunja:<project>/<task>`.
    Task(TaskRef),
    /// A decision or message id.
    Uuid(UuidRef),
    /// A role instance.
    Role(RoleInstance),
}

impl SubjectRef {
    /// Parses a subject string.
    ///
    /// # Errors
    /// `bad-task-ref` for a malformed `vikunja:` ref; `bad-id` for text that
    /// is neither a UUID nor a role instance name (`human` included).
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        if text.starts_with("vikunja:") {
            return TaskRef::parse(text).map(SubjectRef::Task);
        }
        if uuid_shaped(text) {
            return UuidRef::parse(text).map(SubjectRef::Uuid);
        }
        RoleInstance::parse(text).map(SubjectRef::Role)
    }

    /// The domain subject; a UUID's kind comes from `kind_of`, called at
    /// most once and only for a UUID.
    ///
    /// # Errors
    /// Whatever `kind_of` refuses with (it MUST refuse `unknown-reference`
    /// when the UUID names neither a decision nor a message).
    pub fn resolve(
        self,
        kind_of: impl FnOnce(&UuidRef) -> Result<UuidKind, Refusal>,
    ) -> Result<Subject, Refusal> {
        Ok(match self {
            SubjectRef::Task(task) => Subject::Task(task),
            SubjectRef::Role(role) => Subject::Role(role),
            SubjectRef::Uuid(uuid) => match kind_of(&uuid)? {
                UuidKind::Decision => Subject::Decision(uuid.decision()),
                UuidKind::Message => Subject::Message(uuid.message()),
            },
        })
    }
}

impl fmt::Display for SubjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubjectRef::Task(task) => task.fmt(f),
            SubjectRef::Uuid(uuid) => uuid.fmt(f),
            SubjectRef::Role(role) => role.fmt(f),
        }
    }
}

/// One verb with its parsed, domain-typed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `role.claim`.
    RoleClaim,
    /// `role.release`.
    RoleRelease,
    /// `role.revoke {role, decision}`.
    RoleRevoke {
        /// The role to revoke its holder from.
        role: RoleInstance,
        /// The approving decision.
        decision: DecisionId,
    },
    /// `decision.raise` (the new id is drawn in [`Call::into_dispatch`]).
    DecisionRaise(Box<RaiseInput>),
    /// `decision.resolve {id, choice, note?}`.
    DecisionResolve {
        /// The decision.
        id: DecisionId,
        /// The picked option.
        choice: OptionKey,
        /// A note.
        note: Option<String>,
    },
    /// `decision.seen {id, note?}`.
    DecisionSeen {
        /// The decision.
        id: DecisionId,
        /// A note.
        note: Option<String>,
    },
    /// `decision.withdraw {id, note?}`.
    DecisionWithdraw {
        /// The decision.
        id: DecisionId,
        /// A note.
        note: Option<String>,
    },
    /// `message.send` (the new id is drawn in [`Call::into_dispatch`]).
    MessageSend(Box<SendInput>),
    /// `message.receive`.
    MessageReceive,
    /// `message.read {id}`.
    MessageRead {
        /// The message.
        id: MessageId,
    },
    /// `event.emit`: a routine `action.allowed` observation.
    EventEmit {
        /// `body.target`.
        target: Option<Target>,
        /// `subject`.
        subject: Option<SubjectRef>,
    },
    /// `launch.revoke`.
    LaunchRevoke,
    /// `launch.restore`.
    LaunchRestore,
    /// `run.end {run}`.
    RunEnd {
        /// The run to end.
        run: RunId,
    },
    /// `inbox {after?}`.
    Inbox {
        /// The decision the listed decisions start after.
        after: Option<DecisionId>,
    },
    /// `tasks`.
    Tasks,
    /// `agents`.
    Agents,
    /// `trail {subject}`.
    Trail {
        /// Whose trail.
        subject: SubjectRef,
    },
    /// `head`.
    Head,
    /// `history {before?}`.
    History {
        /// The position to list the closings before; `None` for the newest.
        before: Option<u64>,
    },
    /// `changes {since?, timeoutMs?}`.
    Changes {
        /// The cursor to wait after; `None` asks for the current one.
        since: Option<u64>,
        /// The caller's timeout, before the clamp.
        timeout_ms: Option<u64>,
    },
    /// `browser.request {action, parameters, timeoutMs?, decision?}`.
    BrowserRequest(Box<BrowserCall>),
}

/// What the runtime does with a [`Call`].
// A `Dispatch` lives for one request and is moved once, straight into the
// driver; boxing the command would only add an allocation per request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// A verb of the bus: hand it to the driver, which fills in the store
    /// facts it references (`message.receive`'s batch, `message.read`'s and
    /// `message.send`'s `known`, all empty here) and commits its evidence.
    Command(Command),
    /// A read projection: answered from the bus and the store, scoped to
    /// the caller's business, without evidence. Who may read is the
    /// runtime's check.
    Query(Query),
}

/// A read projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// `inbox`: its decisions from the one after `after` when given.
    Inbox {
        /// The decision the listed decisions start after.
        after: Option<DecisionId>,
    },
    /// `tasks`.
    Tasks,
    /// `agents`.
    Agents,
    /// `trail`, with its subject resolved.
    Trail(Subject),
    /// `head`.
    Head,
    /// `history`: the closings before `before` (the newest when `None`).
    History {
        /// The position to list the closings before.
        before: Option<u64>,
    },
    /// `changes`: the changes after `since` (the current cursor when
    /// `None`), waiting at most `wait` for one.
    Changes {
        /// The cursor to wait after.
        since: Option<u64>,
        /// How long to wait, clamped.
        wait: std::time::Duration,
    },
}

impl Call {
    /// Parses a verb's arguments; `None` is an absent `args`.
    ///
    /// # Errors
    /// Steps 5 and 6 of the module's order.
    pub fn parse(verb: Verb, args: Option<Value>) -> Result<Call, Refusal> {
        let map = match args {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(
                Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::String(_)
                | Value::Array(_),
            ) => return Err(Refusal::BadRequest),
        };
        let keys = verb.arg_keys();
        if map.keys().any(|k| !keys.contains(&k.as_str())) {
            return Err(Refusal::UnknownKey);
        }
        let mut args = Args(map);
        Ok(match verb {
            Verb::RoleClaim => Call::RoleClaim,
            Verb::RoleRelease => Call::RoleRelease,
            Verb::RoleRevoke => Call::RoleRevoke {
                role: args.parsed("role", RoleInstance::parse)?,
                decision: args.parsed("decision", DecisionId::parse)?,
            },
            Verb::DecisionRaise => Call::DecisionRaise(Box::new(raise(args)?)),
            Verb::DecisionResolve => Call::DecisionResolve {
                id: args.parsed("id", DecisionId::parse)?,
                choice: args.parsed("choice", OptionKey::parse)?,
                note: args.opt_text("note")?,
            },
            Verb::DecisionSeen => Call::DecisionSeen {
                id: args.parsed("id", DecisionId::parse)?,
                note: args.opt_text("note")?,
            },
            Verb::DecisionWithdraw => Call::DecisionWithdraw {
                id: args.parsed("id", DecisionId::parse)?,
                note: args.opt_text("note")?,
            },
            Verb::MessageSend => Call::MessageSend(Box::new(SendInput {
                to: args.parsed("to", recipient)?,
                body: args.text("body")?,
                class: args.opt_parsed("class", MessageClass::parse)?,
                in_reply_to: args.opt_parsed("in_reply_to", MessageId::parse)?,
                corrects: args.opt_parsed("corrects", MessageId::parse)?,
                decision: args.opt_parsed("decision", DecisionId::parse)?,
            })),
            Verb::MessageReceive => Call::MessageReceive,
            Verb::MessageRead => Call::MessageRead {
                id: args.parsed("id", MessageId::parse)?,
            },
            Verb::EventEmit => emit(args)?,
            Verb::LaunchRevoke => Call::LaunchRevoke,
            Verb::LaunchRestore => Call::LaunchRestore,
            Verb::RunEnd => Call::RunEnd {
                run: args.parsed("run", RunId::parse)?,
            },
            Verb::Inbox => Call::Inbox {
                after: args.opt_parsed("after", DecisionId::parse)?,
            },
            Verb::Tasks => Call::Tasks,
            Verb::Agents => Call::Agents,
            Verb::Trail => Call::Trail {
                subject: args.parsed("subject", SubjectRef::parse)?,
            },
            Verb::Head => Call::Head,
            Verb::History => Call::History {
                before: args.count("before")?,
            },
            Verb::Changes => Call::Changes {
                since: args.count("since")?,
                timeout_ms: args.count("timeoutMs")?,
            },
            Verb::BrowserRequest => Call::BrowserRequest(Box::new(browser_call(args.0)?)),
        })
    }

    /// The verb.
    pub fn verb(&self) -> Verb {
        match self {
            Call::RoleClaim => Verb::RoleClaim,
            Call::RoleRelease => Verb::RoleRelease,
            Call::RoleRevoke { .. } => Verb::RoleRevoke,
            Call::DecisionRaise(_) => Verb::DecisionRaise,
            Call::DecisionResolve { .. } => Verb::DecisionResolve,
            Call::DecisionSeen { .. } => Verb::DecisionSeen,
            Call::DecisionWithdraw { .. } => Verb::DecisionWithdraw,
            Call::MessageSend(_) => Verb::MessageSend,
            Call::MessageReceive => Verb::MessageReceive,
            Call::MessageRead { .. } => Verb::MessageRead,
            Call::EventEmit { .. } => Verb::EventEmit,
            Call::LaunchRevoke => Verb::LaunchRevoke,
            Call::LaunchRestore => Verb::LaunchRestore,
            Call::RunEnd { .. } => Verb::RunEnd,
            Call::Inbox { .. } => Verb::Inbox,
            Call::Tasks => Verb::Tasks,
            Call::Agents => Verb::Agents,
            Call::Trail { .. } => Verb::Trail,
            Call::Head => Verb::Head,
            Call::History { .. } => Verb::History,
            Call::Changes { .. } => Verb::Changes,
            Call::BrowserRequest(_) => Verb::BrowserRequest,
        }
    }

    /// Whether this call only reads (`inbox`, `tasks`, `agents`, `trail`,
    /// `head`, `history`, `changes`):
    /// it dispatches to a [`Query`] and draws no fresh id.
    pub fn is_read(&self) -> bool {
        self.verb().is_read()
    }

    /// What the runtime does with the call.
    ///
    /// Contract:
    /// - `fresh_id` is called exactly once for `decision.raise` and
    ///   `message.send` (16 random bytes from the entropy port, made a v4
    ///   UUID here), and never for any other verb;
    /// - `kind_of` is called exactly once when `event.emit` or `trail`
    ///   names a UUID subject, and never otherwise; it says whether the UUID
    ///   is a decision or a message of the caller's business and MUST
    ///   refuse `unknown-reference` when it is neither (and may refuse
    ///   `cross-business` or `storage-unavailable`);
    /// - the result is a [`Command`] for the bus, with store facts still
    ///   empty, or a [`Query`] for the read side.
    ///
    /// # Errors
    /// Only what `kind_of` returns.
    pub fn into_dispatch(
        self,
        fresh_id: impl FnOnce() -> [u8; 16],
        kind_of: impl FnOnce(&UuidRef) -> Result<UuidKind, Refusal>,
    ) -> Result<Dispatch, Refusal> {
        let command = match self {
            Call::RoleClaim => Command::Claim,
            Call::RoleRelease => Command::Release,
            Call::RoleRevoke { role, decision } => Command::Revoke { role, decision },
            Call::DecisionRaise(input) => Command::Raise {
                id: DecisionId::from_random(fresh_id()),
                input,
            },
            Call::DecisionResolve { id, choice, note } => Command::Resolve { id, choice, note },
            Call::DecisionSeen { id, note } => Command::Seen { id, note },
            Call::DecisionWithdraw { id, note } => Command::Withdraw { id, note },
            Call::MessageSend(input) => Command::Send {
                id: MessageId::from_random(fresh_id()),
                input,
                known: Vec::new(),
            },
            Call::MessageReceive => Command::Receive { batch: Vec::new() },
            Call::MessageRead { id } => Command::Read { id, known: None },
            Call::EventEmit { target, subject } => Command::EmitRoutine {
                target,
                subject: subject.map(|s| s.resolve(kind_of)).transpose()?,
            },
            Call::LaunchRevoke => Command::LaunchRevoke,
            Call::LaunchRestore => Command::LaunchRestore,
            Call::RunEnd { run } => Command::EndRun { run },
            Call::Inbox { after } => return Ok(Dispatch::Query(Query::Inbox { after })),
            Call::Tasks => return Ok(Dispatch::Query(Query::Tasks)),
            Call::Agents => return Ok(Dispatch::Query(Query::Agents)),
            Call::Trail { subject } => {
                return Ok(Dispatch::Query(Query::Trail(subject.resolve(kind_of)?)))
            }
            Call::Head => return Ok(Dispatch::Query(Query::Head)),
            Call::History { before } => return Ok(Dispatch::Query(Query::History { before })),
            Call::Changes { since, timeout_ms } => {
                return Ok(Dispatch::Query(Query::Changes {
                    since,
                    wait: changes::wait(timeout_ms),
                }))
            }
            // Authorized like any action; the runtime then carries it to a pane.
            Call::BrowserRequest(call) => Command::Authorize {
                action: call.action.action(),
                target: call.action.target(),
                decision: call.decision,
            },
        };
        Ok(Dispatch::Command(command))
    }
}

/// A request line whose envelope (`cap`, `verb`, the shape of `args`) is
/// checked but whose arguments are not parsed yet, so the runtime can find
/// the caller before it parses them and attribute an argument refusal to
/// that caller and verb.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    who: Presenter,
    verb: Verb,
    args: Option<Value>,
}

/// Who a request line says it comes from. Neither is taken on trust: a
/// capability must be one the broker issued, and a human request must pass
/// the broker's process proof for the connection it arrived on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presenter {
    /// `{"cap":CAP,…}`: an agent or reader capability.
    Capability(Capability),
    /// `{"human":{"nonce":N},"business":B,…}`: the human CLI, with the
    /// nonce it placed in its own environment, addressing business `B`.
    Human {
        /// The nonce the CLI's environment must carry.
        nonce: String,
        /// The business the human addresses.
        business: BusinessId,
    },
}

impl Envelope {
    /// Checks steps 1 to 4 of the module's order.
    ///
    /// # Errors
    /// `request-too-large`, `bad-request`, `unknown-key`, `bad-capability`,
    /// `unknown-verb`.
    pub fn parse(line: &[u8]) -> Result<Envelope, Refusal> {
        if line.len() > MAX_REQUEST_BYTES {
            return Err(Refusal::RequestTooLarge);
        }
        let Value::Object(mut top) = parse_json(line)? else {
            return Err(Refusal::BadRequest);
        };
        let human = top.contains_key("human");
        let allowed = |k: &str| {
            if human {
                matches!(k, "human" | "business" | "verb" | "args")
            } else {
                matches!(k, "cap" | "verb" | "args")
            }
        };
        if top.keys().any(|k| !allowed(k)) {
            return Err(Refusal::UnknownKey);
        }
        let who = if human {
            let Some(Value::Object(mut proof)) = top.remove("human") else {
                return Err(Refusal::BadRequest);
            };
            let Some(Value::String(nonce)) = proof.remove("nonce") else {
                return Err(Refusal::BadRequest);
            };
            if !proof.is_empty() {
                return Err(Refusal::UnknownKey);
            }
            let Some(Value::String(business)) = top.remove("business") else {
                return Err(Refusal::BadRequest);
            };
            Presenter::Human {
                nonce,
                business: BusinessId::parse(&business)?,
            }
        } else {
            let Some(Value::String(cap)) = top.remove("cap") else {
                return Err(Refusal::BadRequest);
            };
            Presenter::Capability(Capability::parse(&cap)?)
        };
        let Some(Value::String(verb)) = top.remove("verb") else {
            return Err(Refusal::BadRequest);
        };
        let verb = Verb::parse(&verb)?;
        Ok(Envelope {
            who,
            verb,
            args: top.remove("args"),
        })
    }

    /// Who the request says it comes from.
    pub fn presenter(&self) -> &Presenter {
        &self.who
    }

    /// The capability the request presents, if it presents one.
    pub fn cap(&self) -> Option<&Capability> {
        match &self.who {
            Presenter::Capability(cap) => Some(cap),
            Presenter::Human { .. } => None,
        }
    }

    /// The verb.
    pub fn verb(&self) -> Verb {
        self.verb
    }

    /// The arguments as decoded (JSON escapes resolved), before their
    /// per-verb checks; `None` when absent.
    pub fn args(&self) -> Option<&Value> {
        self.args.as_ref()
    }

    /// Parses the arguments.
    ///
    /// # Errors
    /// As [`Call::parse`].
    pub fn into_call(self) -> Result<Call, Refusal> {
        Call::parse(self.verb, self.args)
    }
}

/// A parsed request: who presents what, for which call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRequest {
    /// The capability or the human claim (a capability's `Debug` form is
    /// redacted).
    pub who: Presenter,
    /// The verb and its arguments.
    pub call: Call,
}

/// Parses one request line, `{"cap":CAP,"verb":VERB,"args":{...}}`,
/// without its newline.
///
/// # Errors
/// The first failing check of the module's order, always a static code.
pub fn parse_request(line: &[u8]) -> Result<WireRequest, Refusal> {
    let Envelope { who, verb, args } = Envelope::parse(line)?;
    Ok(WireRequest {
        who,
        call: Call::parse(verb, args)?,
    })
}

/// 36 characters, hex digits of either case, hyphens where a UUID has
/// them: meant as a UUID, so an uppercase one is `bad-id` rather than an
/// unknown role.
fn uuid_shaped(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// `to`: the reserved `human`, else a role instance name.
fn recipient(text: &str) -> Result<Recipient, Refusal> {
    if text == "human" {
        Ok(Recipient::Human)
    } else {
        RoleInstance::parse(text).map(Recipient::Role)
    }
}

/// The arguments of `decision.raise`, in the spec's order.
fn raise(mut args: Args) -> Result<RaiseInput, Refusal> {
    // Keys first, as for the top level: a stray key inside an option is
    // `unknown-key` whatever else is wrong.
    if let Some(Value::Array(options)) = args.0.get("options") {
        for option in options {
            if let Value::Object(option) = option {
                if option.keys().any(|k| k != "key" && k != "text") {
                    return Err(Refusal::UnknownKey);
                }
            }
        }
    }
    // The decision text rule refuses a control or format
    // character with `bad-request`, before the action's and the task ref's
    // own parsers could call it `unknown-action` or `bad-task-ref`; the
    // domain (`decisions::check_raise_text`) checks every other field.
    let action = args.parsed("action", |t| one_line(t).and_then(|()| Action::parse(t)))?;
    let question = args.text("question")?;
    let Some(Value::Array(items)) = args.take("options") else {
        return Err(Refusal::BadRequest);
    };
    let options = items
        .into_iter()
        .map(|item| {
            let Value::Object(item) = item else {
                return Err(Refusal::BadRequest);
            };
            let mut item = Args(item);
            Ok(DecisionOption {
                key: item.parsed("key", OptionKey::parse)?,
                text: item.text("text")?,
            })
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    let recommendation = args.text("recommendation")?;
    let blocking = args.flag("blocking")?;
    let technical = match args.opt_text("domain")?.as_deref() {
        None | Some("delivery") => false,
        Some("technical") => true,
        Some(_) => return Err(Refusal::BadRequest),
    };
    Ok(RaiseInput {
        fields: RaiseFields {
            action,
            question,
            options,
            recommendation,
            blocking,
            technical,
            target: args.opt_parsed("target", Target::parse)?,
            project: args.opt_text("project")?,
            task_ref: args
                .opt_parsed("task_ref", |t| one_line(t).and_then(|()| TaskRef::parse(t)))?,
            requirement_ref: args.opt_text("requirement_ref")?,
            supersedes: args.opt_parsed("supersedes", DecisionId::parse)?,
        },
        choice: args.opt_parsed("choice", OptionKey::parse)?,
        approval_choice: args.opt_parsed("approvalChoice", OptionKey::parse)?,
    })
}

/// One line of a decision's words: no control or format character.
fn one_line(text: &str) -> Result<(), Refusal> {
    mosaic_domain::text::check(text, mosaic_domain::text::Lines::One, None)
}

/// The arguments of `event.emit`: routine observations only, so `kind` and
/// `body` have exactly one accepted shape and anything else is
/// `bad-request`.
fn emit(mut args: Args) -> Result<Call, Refusal> {
    if args.text("kind")? != "action.allowed" {
        return Err(Refusal::BadRequest);
    }
    let Some(Value::Object(body)) = args.take("body") else {
        return Err(Refusal::BadRequest);
    };
    if body.keys().any(|k| k != "action" && k != "target") {
        return Err(Refusal::BadRequest);
    }
    let mut body = Args(body);
    if body.text("action")? != "routine" {
        return Err(Refusal::BadRequest);
    }
    Ok(Call::EventEmit {
        target: body.opt_parsed("target", Target::parse)?,
        subject: args.opt_parsed("subject", SubjectRef::parse)?,
    })
}

/// An argument object whose keys were already checked.
struct Args(Map<String, Value>);

impl Args {
    /// The value under `key`, unless absent or `null`.
    fn take(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key).filter(|v| !v.is_null())
    }

    /// An optional string.
    fn opt_text(&mut self, key: &str) -> Result<Option<String>, Refusal> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(
                Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::Array(_)
                | Value::Object(_),
            ) => Err(Refusal::BadRequest),
        }
    }

    /// A required string.
    fn text(&mut self, key: &str) -> Result<String, Refusal> {
        self.opt_text(key)?.ok_or(Refusal::BadRequest)
    }

    /// A required boolean.
    fn flag(&mut self, key: &str) -> Result<bool, Refusal> {
        let Some(Value::Bool(flag)) = self.take(key) else {
            return Err(Refusal::BadRequest);
        };
        Ok(flag)
    }

    /// An optional non-negative integer.
    fn count(&mut self, key: &str) -> Result<Option<u64>, Refusal> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(Some).ok_or(Refusal::BadRequest),
            Some(
                Value::Null
                | Value::Bool(_)
                | Value::String(_)
                | Value::Array(_)
                | Value::Object(_),
            ) => Err(Refusal::BadRequest),
        }
    }

    /// A required string, parsed by a domain parser.
    fn parsed<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        parse(&self.text(key)?)
    }

    /// An optional string, parsed by a domain parser.
    fn opt_parsed<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, Refusal>,
    ) -> Result<Option<T>, Refusal> {
        self.opt_text(key)?.map(|text| parse(&text)).transpose()
    }
}
