//! What goes into the console's machine and what comes out, beside it:
//! the keys and the key map the help is built from, the views, the effects
//! the loop runs, the acts the human confirms with `y`, the bottom line's
//! prompts, and the one-line editor that types a note, a role, a body, a
//! subject or a filter.

use mosaic_domain::{DecisionId, RunId};

use super::grant;
use super::model::Decision;
use super::request::Request;

/// An act the human is asked to confirm with `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// `decision.resolve` with an option's key and a note.
    Resolve {
        /// The decision, as it was when asked (its grant and raiser).
        decision: Box<Decision>,
        /// The option's index.
        index: usize,
        /// The note, if any.
        note: String,
    },
    /// `decision.seen`.
    Seen {
        /// The decision.
        id: DecisionId,
    },
    /// `decision.withdraw`.
    Withdraw {
        /// The decision.
        id: DecisionId,
    },
    /// `message.send` to a role.
    Message {
        /// The role.
        to: String,
        /// The body.
        body: String,
        /// Whether a live run holds the role now (else the message waits
        /// for one, and the question says so).
        held: bool,
    },
    /// `launch.revoke` (off) or `launch.restore`.
    Launch {
        /// Whether launching goes off.
        off: bool,
    },
    /// `run.end` of a run.
    End {
        /// The run.
        run: RunId,
        /// Its role and run, shown.
        who: String,
    },
    /// `message.read` of every unread message, page by page.
    ReadAll {
        /// How many are unread, as the inbox last counted them.
        count: u64,
    },
    /// The order to `up` to start the agent of an ended run again.
    Start {
        /// The run that ended.
        run: RunId,
        /// Its role and run, shown.
        who: String,
    },
}

impl Act {
    /// The question on the bottom line. A resolve's names the grant, never
    /// the decision's question.
    pub fn question(&self) -> String {
        match self {
            Act::Resolve {
                decision, index, ..
            } => grant::prompt(decision, *index),
            Act::Seen { .. } => "Mark this decision seen? y/n".to_owned(),
            Act::Withdraw { .. } => "Withdraw this decision? y/n".to_owned(),
            Act::Message {
                to,
                body,
                held: true,
            } => format!("Send {to:?} the message {body:?}? y/n"),
            Act::Message {
                to,
                body,
                held: false,
            } => format!(
                "Nobody holds {to:?} now: it waits until a run claims the role. Send it the \
                 message {body:?}? y/n"
            ),
            Act::Launch { off: true } => {
                "Switch launching off? It stops new launches and ends no running agent. y/n"
                    .to_owned()
            }
            Act::Launch { off: false } => {
                "Switch launching back on? New launches may start again. y/n".to_owned()
            }
            Act::End { who, .. } => {
                format!("End the run {who}? Its program is stopped and its role freed. y/n")
            }
            Act::Start { who, .. } => {
                format!("Start the agent of {who} again, as a new run? y/n")
            }
            Act::ReadAll { count: 1 } => "Mark the 1 unread message read? y/n".to_owned(),
            Act::ReadAll { count } => format!("Mark all {count} unread messages read? y/n"),
        }
    }

    /// The decision it acts on, if any.
    pub fn decision(&self) -> Option<DecisionId> {
        match self {
            Act::Resolve { decision, .. } => Some(decision.id),
            Act::Seen { id } | Act::Withdraw { id } => Some(*id),
            Act::Message { .. }
            | Act::Launch { .. }
            | Act::End { .. }
            | Act::Start { .. }
            | Act::ReadAll { .. } => None,
        }
    }

    /// The request it sends; a resolve's option is one of the decision's
    /// (the digit that chose it was checked against them).
    pub fn request(&self) -> Option<Request> {
        Some(match self {
            Act::Resolve {
                decision,
                index,
                note,
            } => Request::Resolve {
                id: decision.id,
                choice: decision.options.get(*index)?.key_raw.clone(),
                note: note.clone(),
            },
            Act::Seen { id } => Request::Seen(*id),
            Act::Withdraw { id } => Request::Withdraw(*id),
            Act::Message { to, body, .. } => Request::Send {
                to: to.clone(),
                body: body.clone(),
            },
            Act::Launch { off } => Request::Launch { off: *off },
            Act::End { run, .. } => Request::EndRun(run.clone()),
            Act::Start { .. } | Act::ReadAll { .. } => return None,
        })
    }
}

/// What the bottom line is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Nothing: it shows the status.
    None,
    /// Asking `y/n` for an act.
    Confirm(Act),
    /// Typing the note of a resolve; `Enter` returns to its question.
    Note(Act, String),
    /// Typing the role of a message.
    Role(String),
    /// Typing the body of a message to a role.
    Body(String, String),
    /// Typing the subject of a trail.
    Subject(String),
    /// Typing the current list's filter: each key narrows the list at
    /// once.
    Filter(String),
}

/// A line being typed, after one key.
pub(super) enum Typed {
    /// Still typing.
    Editing(String),
    /// `Enter`: the line, trimmed.
    Done(String),
    /// `Esc`.
    Cancelled,
}

/// A key, as the loop decodes it from the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// `Enter`.
    Enter,
    /// `Esc`.
    Esc,
    /// `Tab`.
    Tab,
    /// The up arrow.
    Up,
    /// The down arrow.
    Down,
    /// `Page Up`.
    PageUp,
    /// `Page Down`.
    PageDown,
    /// `Backspace`.
    Backspace,
}

/// A one-line editor: characters append (the human's own, but a control
/// character is never kept), `Backspace` removes, `Enter` ends, `Esc`
/// cancels.
pub(super) fn typed(key: Key, mut line: String) -> Typed {
    match key {
        Key::Char(c) => {
            if line.chars().count() < 500 && !mosaic_domain::text::is_hidden(c) {
                line.push(c);
            }
            Typed::Editing(line)
        }
        Key::Backspace => {
            line.pop();
            Typed::Editing(line)
        }
        Key::Enter => Typed::Done(line.trim().to_owned()),
        Key::Esc => Typed::Cancelled,
        Key::Tab | Key::Up | Key::Down | Key::PageUp | Key::PageDown => Typed::Editing(line),
    }
}

/// The fixed key map: each key and what it does, in the help's order. The
/// help page is generated from it.
pub const KEYS: &[(&str, &str)] = &[
    (
        "j / Down",
        "move down (in a decision, a message or a row opened: scroll)",
    ),
    (
        "k / Up",
        "move up (in a decision, a message or a row opened: scroll)",
    ),
    (
        "PgDn/PgUp",
        "scroll the detail pane, the question or the message",
    ),
    (
        "Tab",
        "next view, in the tabs' order (History: the closed decisions)",
    ),
    (
        "Enter",
        "open the selected row whole; in a decision, ask to resolve",
    ),
    ("Esc", "go back, clear the filter, or cancel the question"),
    (
        "/",
        "filter the list by its text (role, kind...); Enter keeps",
    ),
    (
        "]",
        "open the next waiting decision: each in turn, blocking first",
    ),
    ("1-9", "in a decision: select that option (nothing is sent)"),
    ("y / n", "answer the question on the bottom line"),
    ("e", "while asked to resolve: add a one-line note"),
    (
        "r / A",
        "mark the message read / every message read (asks the count)",
    ),
    (
        "s / w",
        "in a decision: mark it seen / withdraw it (asks y/n)",
    ),
    ("m", "send a message to a role: role, then body (asks y/n)"),
    ("R", "on a message: reply to its sender's role (asks y/n)"),
    ("L", "switch launching off or on (asks y/n)"),
    ("x", "in Agents or a run: end that run (asks y/n)"),
    (
        "S",
        "in Agents or a run: start an ended agent again (up --console)",
    ),
    ("t", "in the trail view: show the trail of a subject"),
    ("?", "this help"),
    ("q", "quit"),
];

/// What the loop does for the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send one request through the proven link, off the UI thread; its
    /// answer comes back, decoded, through
    /// [`State::handle_reply`](super::state::State::handle_reply) with the
    /// same request.
    Send(Request),
    /// Ring the terminal bell.
    Bell,
    /// Run the `--notify` command for a new decision.
    Notify(Notice),
    /// Send `up` the order to start the agent of this ended run again.
    Order(RunId),
    /// Stop the console.
    Quit,
}

/// What `--notify` is told of a new decision: no capability, no token,
/// and each agent-chosen word neutralised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The decision's id.
    pub decision: String,
    /// Its action.
    pub action: String,
    /// Its target, or empty.
    pub target: String,
    /// The raiser, `role/run`.
    pub raiser: String,
}

/// The views `Tab` cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Open decisions routed to the human, then unread messages.
    Inbox,
    /// One decision.
    Decision,
    /// One message.
    Message,
    /// The business's runs.
    Agents,
    /// One run, opened from the Agents view.
    Run,
    /// The trail of one subject.
    Trail,
    /// The changes as they arrived.
    Activity,
    /// The closed decisions, newest closing first.
    History,
}

impl View {
    /// Every view, in `Tab`'s order.
    pub const ALL: [View; 8] = [
        View::Inbox,
        View::Decision,
        View::Message,
        View::Agents,
        View::Run,
        View::Trail,
        View::Activity,
        View::History,
    ];

    /// Its tab's name.
    pub fn name(self) -> &'static str {
        match self {
            View::Inbox => "Inbox",
            View::Decision => "Decision",
            View::Message => "Message",
            View::Agents => "Agents",
            View::Run => "Run",
            View::Trail => "Trail",
            View::Activity => "Activity",
            View::History => "History",
        }
    }
}
