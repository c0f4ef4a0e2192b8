//! The console's typed rows, made once from the client crate's wire
//! shapes (`mosaic_client::wire`), which the broker encodes with too: an
//! answer missing a field the console reads never gets this far
//! ([`super::request`] refuses it `bad-response`).
//!
//! Every string an agent could have chosen (a question, an option, a
//! body, a target, a role or run name, a note) is held as [`Shown`]:
//! text that went through the domain's one neutraliser
//! ([`mosaic_domain::text`]) when the row was made, so nothing the console
//! draws or hands on can carry a control or format character. The few
//! values sent back to the broker or matched against another answer (a
//! decision's or message's id, an option's key, a run) are kept typed, as
//! the broker gave them, beside their shown form.

use std::fmt;

use mosaic_client::wire::agent::{AgentRow, Ended, Exited, Usage, WaitsOn};
use mosaic_client::wire::decision::{AgentView, DecisionView, Raised};
use mosaic_client::wire::inbox::Inbox as WireInbox;
use mosaic_client::wire::message::MessageView;
use mosaic_client::wire::reads::Change as WireChange;
use mosaic_client::wire::text::{KindName, Party};
use mosaic_domain::evidence::{EndCause, EvidenceKind, OptionKey};
use mosaic_domain::text::{neutralise, neutralise_grant, neutralise_lines};
use mosaic_domain::{DecisionId, MessageId, RunId};

/// Untrusted text made drawable: each hidden character is a visible
/// token. The only way to make one is [`Shown::of`] (or
/// [`Shown::lines`]), so a `Shown` never holds a hidden character.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shown(String);

impl Shown {
    /// `text`, neutralised: one line, every hidden character (a newline
    /// too) a token.
    pub fn of(text: &str) -> Shown {
        Shown(neutralise(text).into_owned())
    }

    /// `text` as a grant names it (an action, a target, an option's key):
    /// printable ASCII only, every other character a token, so two
    /// different grants never draw alike.
    pub fn grant(text: &str) -> Shown {
        Shown(neutralise_grant(text).into_owned())
    }

    /// `text`'s lines, each neutralised: its own line breaks stay breaks.
    pub fn lines(text: &str) -> Vec<Shown> {
        neutralise_lines(text)
            .map(|line| Shown(line.into_owned()))
            .collect()
    }

    /// A value's text form, neutralised.
    pub fn text(value: &impl fmt::Display) -> Shown {
        Shown::of(&value.to_string())
    }

    /// The drawable text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `role/run`, both shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    /// The role.
    pub role: Shown,
    /// The run, as the broker named it (to find its row in `agents`).
    pub run_raw: RunId,
    /// The run, shown.
    pub run: Shown,
}

impl From<&AgentView> for Who {
    fn from(agent: &AgentView) -> Who {
        Who {
            role: Shown::text(&agent.role),
            run: Shown::text(&agent.run),
            run_raw: agent.run.clone(),
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.role, self.run)
    }
}

/// One option of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Its key, as sent back in `decision.resolve`.
    pub key_raw: OptionKey,
    /// Its key, shown.
    pub key: Shown,
    /// Its text, shown on one line.
    pub text: Shown,
}

/// What approving a decision authorizes, as the broker computed it; each
/// word the raiser chose is shown by the grant rule ([`Shown::grant`]),
/// wherever the console draws it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The action.
    pub action: Shown,
    /// The target, if any.
    pub target: Option<Shown>,
    /// The choice that approves, as the broker names it.
    pub choice_raw: OptionKey,
    /// The choice that approves, shown.
    pub choice: Shown,
}

/// An open decision of the human's inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Its id, as the broker gave it.
    pub id: DecisionId,
    /// The raiser.
    pub raiser: Who,
    /// Who has it: `human` or the arbiter role.
    pub route: Shown,
    /// Its class (`gated`, `cross-role`...).
    pub class: Shown,
    /// Whether it blocks a task.
    pub blocking: bool,
    /// The question's lines.
    pub question: Vec<Shown>,
    /// The options, in the raiser's order.
    pub options: Vec<Choice>,
    /// The raiser's recommendation, on one line.
    pub recommendation: Option<Shown>,
    /// What approving it authorizes.
    pub grant: Grant,
    /// The decision it replaces, if any.
    pub supersedes: Option<Shown>,
    /// When it was raised (ms since the epoch), once its trail was read.
    pub raised_ms: Option<i64>,
    /// Whether the inbox listed it short (no options, its texts cut),
    /// until its trail's raise fills it in
    /// ([`Trail::fill_decision`](super::trail::Trail::fill_decision)).
    pub cut: bool,
}

impl From<&Raised<'_>> for Decision {
    fn from(r: &Raised<'_>) -> Decision {
        let auth = &r.authorization;
        Decision {
            id: r.id,
            raiser: Who::from(&r.raised_by),
            route: Shown::text(&r.route),
            class: Shown::of(r.class.as_str()),
            blocking: r.blocking,
            question: Shown::lines(&r.question),
            options: r
                .options
                .iter()
                .map(|o| Choice {
                    key: Shown::text(&o.key),
                    key_raw: o.key.clone(),
                    text: Shown::of(&o.text),
                })
                .collect(),
            recommendation: Some(Shown::of(&r.recommendation)),
            grant: Grant {
                action: Shown::grant(auth.action.as_str()),
                target: auth.target.as_ref().map(|t| Shown::grant(t.as_str())),
                choice: Shown::grant(auth.approval_choice.as_str()),
                choice_raw: auth.approval_choice.clone(),
            },
            supersedes: r.supersedes.as_ref().map(Shown::text),
            raised_ms: None,
            cut: false,
        }
    }
}

impl From<&DecisionView<'_>> for Decision {
    fn from(view: &DecisionView<'_>) -> Decision {
        Decision {
            cut: view.standing.cut,
            ..Decision::from(&view.raised)
        }
    }
}

impl Decision {
    /// The question's first line.
    pub fn first_words(&self) -> &str {
        self.question.first().map_or("", Shown::as_str)
    }
}

/// An unread message to the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its id, as the broker gave it.
    pub id: MessageId,
    /// The sender: `role/run`, or `human`.
    pub from: Shown,
    /// The sender's role, as the broker named it, when an agent sent it
    /// (`R` replies to it).
    pub from_role: Option<String>,
    /// Its class, if any.
    pub class: Option<Shown>,
    /// The body's lines.
    pub body: Vec<Shown>,
    /// The decision it cites, if any (`Enter` opens it).
    pub cites: Option<DecisionId>,
    /// Whether the inbox cut its body, until its trail fills it in
    /// ([`Trail::fill_message`](super::trail::Trail::fill_message)).
    pub cut: bool,
}

impl From<&MessageView<'_>> for Message {
    fn from(m: &MessageView<'_>) -> Message {
        let from = match (&m.from, &m.from_run) {
            (Party::Role(role), Some(run)) => Shown::of(&format!("{role}/{run}")),
            (from, Some(_) | None) => Shown::text(from),
        };
        Message {
            id: m.id,
            from,
            from_role: match &m.from {
                Party::Role(role) => Some(role.to_string()),
                Party::Human => None,
            },
            class: m.class.map(|c| Shown::of(c.as_str())),
            body: Shown::lines(&m.body),
            cites: m.decision,
            cut: m.cut,
        }
    }
}

impl Message {
    /// Its class, or `"a message"` when it has none.
    pub fn class_word(&self) -> &str {
        self.class.as_ref().map_or("a message", Shown::as_str)
    }

    /// The body's first line.
    pub fn first_words(&self) -> &str {
        self.body.first().map_or("", Shown::as_str)
    }
}

/// The human's inbox: open decisions, unread messages, and how many more
/// unread messages lie beyond those.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inbox {
    /// The decisions, blocking first, then oldest.
    pub decisions: Vec<Decision>,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
    /// Unread messages beyond `messages` (the `more` item's `unread`).
    pub more: u64,
    /// Waiting decisions beyond `decisions` (the `more` item's
    /// `decisions`): `]` reaches them a page at a time.
    pub left: u64,
}

impl From<&WireInbox<'_>> for Inbox {
    fn from(inbox: &WireInbox<'_>) -> Inbox {
        Inbox {
            decisions: inbox.decisions.iter().map(Decision::from).collect(),
            messages: inbox.messages.iter().map(Message::from).collect(),
            more: inbox.more.map_or(0, |more| more.unread),
            left: inbox.more.and_then(|more| more.decisions).unwrap_or(0),
        }
    }
}

impl Inbox {
    /// Each decision and message cut in this inbox, but filled in `old`
    /// (the inbox read before), taken whole from there.
    pub fn keep_whole(&mut self, old: &Inbox) {
        for d in self.decisions.iter_mut().filter(|d| d.cut) {
            if let Some(whole) = old.decisions.iter().find(|o| o.id == d.id && !o.cut) {
                *d = whole.clone();
            }
        }
        for m in self.messages.iter_mut().filter(|m| m.cut) {
            if let Some(whole) = old.messages.iter().find(|o| o.id == m.id && !o.cut) {
                *m = whole.clone();
            }
        }
    }
}

/// How a run's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, where known.
    pub status: Option<i32>,
    /// The signal that killed it, where known.
    pub signal: Option<i32>,
}

impl From<Exited> for Exit {
    fn from(exited: Exited) -> Exit {
        Exit {
            status: exited.status,
            signal: exited.signal,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.status, self.signal) {
            (_, Some(signal)) => write!(f, "KILLED by signal {signal} (crashed)"),
            (Some(0), None) => f.write_str("EXITED with status 0"),
            (Some(status), None) => write!(f, "EXITED with status {status} (crashed)"),
            (None, None) => f.write_str("EXITED (its status is unknown)"),
        }
    }
}

/// An open decision a run raised and waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Its id, as the broker gave it.
    pub id: DecisionId,
    /// Who has it: `human` or the arbiter role.
    pub route: Shown,
    /// Whether the route is the human.
    pub on_human: bool,
    /// Its action.
    pub action: Shown,
    /// Its target.
    pub target: Option<Shown>,
    /// Whether it blocks a task.
    pub blocking: bool,
}

impl From<&WaitsOn> for Wait {
    fn from(w: &WaitsOn) -> Wait {
        Wait {
            id: w.id,
            route: Shown::text(&w.route),
            on_human: w.route == Party::Human,
            action: Shown::text(&w.action),
            target: w.target.as_ref().map(Shown::text),
            blocking: w.blocking,
        }
    }
}

/// One bound run, as `agents` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Its role and run.
    pub who: Who,
    /// Its harness.
    pub harness: Shown,
    /// Its pid.
    pub pid: u32,
    /// Whether it holds its role.
    pub holding: bool,
    /// Whether its role was revoked.
    pub revoked: bool,
    /// The business's launch switch, as this row carries it.
    pub launching: bool,
    /// How its process ended, or `None` while it runs.
    pub exited: Option<Exit>,
    /// What it waits on.
    pub waits: Vec<Wait>,
    /// How the run ended, or `None` while it lives.
    pub ended: Option<RunEnded>,
    /// How often its program started again inside the run.
    pub restarts: u64,
    /// What it used, once its host said.
    pub usage: Option<Spent>,
    /// The broker's record of it: the verb of its last request, shown,
    /// and when (ms since the epoch).
    pub last: Option<(Shown, Option<i64>)>,
    /// The broker's record of it: whether a `changes` wait of it is open.
    pub waiting: bool,
}

/// What a harness run used, as its event stream reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spent {
    /// Turns.
    pub turns: u64,
    /// Input and output tokens.
    pub tokens: (u64, u64),
    /// Its cost, in US dollars, to four places.
    pub cost: String,
}

impl From<Usage> for Spent {
    fn from(usage: Usage) -> Spent {
        Spent {
            turns: usage.turns,
            tokens: (usage.input_tokens, usage.output_tokens),
            cost: format!("{:.4}", usage.cost_usd),
        }
    }
}

impl fmt::Display for Spent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} turns, {} tokens in, {} out, ${}",
            self.turns, self.tokens.0, self.tokens.1, self.cost
        )
    }
}

/// How a run ended, as the broker recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnded {
    /// When (ms since the epoch).
    pub at_ms: i64,
    /// Why.
    pub cause: EndCause,
    /// Its process's exit status, where known.
    pub status: Option<i32>,
    /// The signal that killed its process, where known.
    pub signal: Option<i32>,
}

impl From<Ended> for RunEnded {
    fn from(ended: Ended) -> RunEnded {
        RunEnded {
            at_ms: ended.at.unix_ms(),
            cause: ended.cause,
            status: ended.status,
            signal: ended.signal,
        }
    }
}

impl RunEnded {
    /// Whether it ended in a failure: the cause `failed` or `budget`, or a
    /// process killed by a signal or exiting non-zero.
    pub fn failed(&self) -> bool {
        let cause = match self.cause {
            EndCause::Failed | EndCause::Budget => true,
            EndCause::Exited | EndCause::Human | EndCause::Revoked | EndCause::ProcessGone => false,
        };
        cause || self.signal.is_some() || self.status.is_some_and(|s| s != 0)
    }
}

impl fmt::Display for RunEnded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match (self.status, self.signal) {
            (_, Some(signal)) => format!(
                ", killed by {}",
                mosaic_client::wire::life::signal_name(signal)
            ),
            (Some(status), None) => format!(", status {status}"),
            (None, None) => String::new(),
        };
        let cause = match self.cause {
            EndCause::Exited => "exited",
            EndCause::Failed => "FAILED",
            EndCause::Human => "ended by you",
            EndCause::Revoked => "revoked",
            EndCause::Budget => "FAILED: its budget ran out",
            EndCause::ProcessGone => "its process was gone at the broker's start",
        };
        write!(f, "ENDED ({cause}{how})")
    }
}

impl From<&AgentRow> for Run {
    fn from(row: &AgentRow) -> Run {
        Run {
            who: Who {
                role: Shown::text(&row.role),
                run: Shown::text(&row.run),
                run_raw: row.run.clone(),
            },
            harness: Shown::of(row.harness.as_str()),
            pid: row.pid,
            holding: row.holding,
            revoked: row.revoked,
            launching: row.launching,
            exited: row.exited.map(Exit::from),
            waits: row.waits_on.iter().map(Wait::from).collect(),
            ended: row.ended.map(RunEnded::from),
            restarts: row.restarts,
            usage: row.usage.map(Spent::from),
            last: row
                .last_verb
                .as_ref()
                .map(|verb| (Shown::of(verb), row.last_at.map(|at| at.unix_ms()))),
            waiting: row.waiting,
        }
    }
}

/// A kind of evidence: one of the domain's, or a name it does not know
/// (from a newer broker), shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A kind of the domain's table.
    Known(EvidenceKind),
    /// Another name.
    Other(Shown),
}

impl From<&KindName> for Kind {
    fn from(name: &KindName) -> Kind {
        match name {
            KindName::Known(kind) => Kind::Known(*kind),
            KindName::Other(name) => Kind::Other(Shown::of(name)),
        }
    }
}

impl Kind {
    /// Whether it is `kind`.
    pub fn is(&self, kind: EvidenceKind) -> bool {
        self == &Kind::Known(kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Known(kind) => kind.fmt(f),
            Kind::Other(name) => name.fmt(f),
        }
    }
}

/// One change of the human's feed: a pointer, never content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its kind.
    pub kind: Kind,
    /// The decision it concerns, as the broker named it.
    pub decision: Option<DecisionId>,
    /// The message it concerns, as the broker named it.
    pub message: Option<MessageId>,
    /// What it concerns, shown: `decision ID`, `role dev`...
    pub about: Vec<Shown>,
}

impl From<&WireChange> for Change {
    fn from(c: &WireChange) -> Change {
        let about = [
            ("decision", c.decision.map(|d| d.to_string())),
            ("message", c.message.map(|m| m.to_string())),
            ("role", c.role.as_ref().map(ToString::to_string)),
            ("task", c.task.map(|t| t.to_string())),
        ];
        Change {
            kind: Kind::from(&c.kind),
            decision: c.decision,
            message: c.message,
            about: about
                .into_iter()
                .filter_map(|(name, id)| id.map(|id| Shown::of(&format!("{name} {id}"))))
                .collect(),
        }
    }
}
