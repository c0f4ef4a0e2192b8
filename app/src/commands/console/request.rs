//! What the console asks the broker ([`Request`], the state's
//! `Effect::Send`) and what the answer is ([`Reply`]), decoded once, off
//! the state, with the client crate's wire shapes: the verb's arguments
//! are its argument type (`mosaic_client::wire::args`, whose keys the
//! broker's parser allows) and its answer the shape the broker encodes
//! with. An answer missing a field the console reads, or with one of
//! another type, is `bad-response`: the status line says so, and nothing
//! shows a default in its place.

use mosaic_client::wire::agent::AgentRow;
use mosaic_client::wire::args::{
    ChangesArgs, DecisionNoteArgs, DecisionResolveArgs, HistoryArgs, InboxArgs, MessageReadArgs,
    MessageSendArgs, NoArgs, RunEndArgs, TrailArgs,
};
use mosaic_client::wire::decision::DecisionView;
use mosaic_client::wire::history::ClosedRow;
use mosaic_client::wire::inbox::Inbox as WireInbox;
use mosaic_client::wire::listed::Listed;
use mosaic_client::wire::reads::{ChangePage, Head as WireHead};
use mosaic_client::wire::record::Record as WireRecord;
use mosaic_client::wire::reply::{Done, Sent};
use mosaic_domain::evidence::OptionKey;
use mosaic_domain::{DecisionId, MessageId, Refusal, RunId, Verb};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::history::Page;
use super::model::{Change, Decision, Inbox, Run, Shown};
use super::trail::Trail;

/// A request the console sends, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `inbox`.
    Inbox,
    /// `inbox {after}`: the waiting decisions after this one, past those
    /// the inbox could list.
    Beyond(DecisionId),
    /// `agents`.
    Agents,
    /// `head`.
    Head,
    /// `trail` of a subject: a decision's or message's id, or what the
    /// human typed.
    Trail(String),
    /// `history`: the newest closed decisions, or those before a
    /// closing's position.
    History {
        /// The position to list before; `None` for the newest.
        before: Option<u64>,
    },
    /// `decision.resolve` with an option's key and a note (none when
    /// empty).
    Resolve {
        /// The decision.
        id: DecisionId,
        /// The option.
        choice: OptionKey,
        /// The note.
        note: String,
    },
    /// `decision.seen`.
    Seen(DecisionId),
    /// `decision.withdraw`.
    Withdraw(DecisionId),
    /// `message.send` to a role.
    Send {
        /// The role, as typed.
        to: String,
        /// The body.
        body: String,
    },
    /// `message.read`.
    Read(MessageId),
    /// `launch.revoke` (off) or `launch.restore`.
    Launch {
        /// Whether launching goes off.
        off: bool,
    },
    /// `run.end`.
    EndRun(RunId),
}

/// The broker's answer to a [`Request`], made into the console's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The human's inbox.
    Inbox(Inbox),
    /// The waiting decisions after one, in the inbox's order.
    Beyond(Vec<Decision>),
    /// The business's runs (those one answer holds).
    Agents(Vec<Run>),
    /// A trail.
    Trail(String, Trail),
    /// A page of closed decisions.
    History(Option<u64>, Page),
    /// The evidence's hash chain.
    Head(Head),
    /// A resolve, with the option it resolved with.
    Resolved(Shown),
    /// Any other act: done.
    Done,
}

/// The evidence's hash chain, as `head` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Records in the chain.
    pub size: u64,
    /// Its head hash.
    pub head: Shown,
}

/// `args`' JSON object.
fn args(args: &impl Serialize) -> Value {
    // An argument type always serializes to an object.
    serde_json::to_value(args).unwrap_or_default()
}

/// `value` as `T`, or `bad-response`.
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, Refusal> {
    serde_json::from_value(value).map_err(|_| Refusal::BadResponse)
}

impl Request {
    /// `trail` of an id.
    pub fn trail(subject: &impl ToString) -> Request {
        Request::Trail(subject.to_string())
    }

    /// Its verb.
    pub fn verb(&self) -> Verb {
        match self {
            Request::Inbox | Request::Beyond(_) => Verb::Inbox,
            Request::Agents => Verb::Agents,
            Request::Head => Verb::Head,
            Request::Trail(_) => Verb::Trail,
            Request::History { .. } => Verb::History,
            Request::Resolve { .. } => Verb::DecisionResolve,
            Request::Seen(_) => Verb::DecisionSeen,
            Request::Withdraw(_) => Verb::DecisionWithdraw,
            Request::Send { .. } => Verb::MessageSend,
            Request::Read(_) => Verb::MessageRead,
            Request::Launch { off: true } => Verb::LaunchRevoke,
            Request::Launch { off: false } => Verb::LaunchRestore,
            Request::EndRun(_) => Verb::RunEnd,
        }
    }

    /// Its arguments, as its verb's argument type writes them.
    pub fn args(&self) -> Value {
        match self {
            Request::Inbox | Request::Agents | Request::Head | Request::Launch { .. } => {
                args(&NoArgs {})
            }
            Request::Beyond(after) => args(&InboxArgs {
                after: Some(after.to_string()),
            }),
            Request::Trail(subject) => args(&TrailArgs {
                subject: subject.clone(),
            }),
            Request::History { before } => args(&HistoryArgs { before: *before }),
            Request::Resolve { id, choice, note } => args(&DecisionResolveArgs {
                id: id.to_string(),
                choice: choice.to_string(),
                note: (!note.is_empty()).then(|| note.clone()),
            }),
            Request::Seen(id) | Request::Withdraw(id) => args(&DecisionNoteArgs {
                id: id.to_string(),
                note: None,
            }),
            Request::Send { to, body } => args(&MessageSendArgs {
                to: to.clone(),
                body: body.clone(),
                ..MessageSendArgs::default()
            }),
            Request::Read(id) => args(&MessageReadArgs { id: id.to_string() }),
            Request::EndRun(run) => args(&RunEndArgs {
                run: run.to_string(),
            }),
        }
    }

    /// The decision it acts on, if any.
    pub fn decision(&self) -> Option<DecisionId> {
        match self {
            Request::Resolve { id, .. } | Request::Seen(id) | Request::Withdraw(id) => Some(*id),
            Request::Inbox
            | Request::Beyond(_)
            | Request::Agents
            | Request::Head
            | Request::Trail(_)
            | Request::History { .. }
            | Request::Send { .. }
            | Request::Read(_)
            | Request::Launch { .. }
            | Request::EndRun(_) => None,
        }
    }

    /// The broker's result for it, decoded: the shape its verb answers
    /// with, made into the console's rows.
    ///
    /// # Errors
    /// `bad-response` for a result that is not that shape.
    pub fn decode(&self, result: Value) -> Result<Reply, Refusal> {
        Ok(match self {
            Request::Inbox => Reply::Inbox(Inbox::from(&decode::<WireInbox>(result)?)),
            Request::Beyond(_) => {
                Reply::Beyond(Inbox::from(&decode::<WireInbox>(result)?).decisions)
            }
            Request::Agents => Reply::Agents(
                decode::<Listed<AgentRow>>(result)?
                    .items
                    .iter()
                    .map(Run::from)
                    .collect(),
            ),
            Request::Trail(subject) => Reply::Trail(
                subject.clone(),
                Trail::from(&decode::<Listed<WireRecord>>(result)?),
            ),
            Request::History { before } => Reply::History(
                *before,
                Page::of(&decode::<Listed<ClosedRow>>(result)?).ok_or(Refusal::BadResponse)?,
            ),
            Request::Head => {
                let head = decode::<WireHead>(result)?;
                Reply::Head(Head {
                    size: head.size,
                    head: Shown::of(&head.head),
                })
            }
            Request::Resolve { .. } => {
                let decision = decode::<DecisionView>(result)?;
                let choice = decision.standing.choice.ok_or(Refusal::BadResponse)?;
                Reply::Resolved(Shown::text(&choice))
            }
            Request::Seen(_) | Request::Withdraw(_) => {
                decode::<DecisionView>(result)?;
                Reply::Done
            }
            Request::Send { .. } => {
                decode::<Sent>(result)?;
                Reply::Done
            }
            Request::Read(_) | Request::Launch { .. } | Request::EndRun(_) => {
                decode::<Done>(result)?;
                Reply::Done
            }
        })
    }
}

/// The arguments of a wait on the human's `changes`: after `since`, for
/// at most `timeout_ms`; with no cursor, the current one at once.
pub fn changes_args(since: Option<u64>, timeout_ms: Option<u64>) -> Value {
    args(&ChangesArgs { since, timeout_ms })
}

/// A page of the human's `changes`, decoded: its cursor and its changes.
///
/// # Errors
/// `bad-response` for a page that is not one.
pub fn changes(page: Value) -> Result<(u64, Vec<Change>), Refusal> {
    let page = decode::<ChangePage>(page)?;
    Ok((page.cursor, page.changes.iter().map(Change::from).collect()))
}
