//! The console's state, as a sans-IO machine like the domain's: the loop
//! feeds it keys ([`State::handle_key`]), pages of the human's `changes`
//! ([`State::handle_change`]) and the broker's answers
//! ([`State::handle_reply`]), and drains the [`Effect`]s it asks for
//! ([`State::poll_effect`]). Nothing here reads a clock, a socket or the
//! terminal; rendering reads the state and changes nothing.

use std::collections::{BTreeSet, VecDeque};

use mosaic_domain::{Refusal, Verb};
use serde_json::{json, Value};

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
    /// `Backspace`.
    Backspace,
}

/// The fixed key map: each key and what it does, in the help's order. The
/// help page is generated from it.
pub const KEYS: &[(&str, &str)] = &[
    ("j / Down", "move down"),
    ("k / Up", "move up"),
    ("Tab", "next view: inbox, decision, agents, trail, activity"),
    (
        "Enter",
        "open the selected decision; in a decision, ask to resolve",
    ),
    ("Esc", "go back, or cancel the question"),
    (
        "]",
        "open the next decision waiting on you (oldest blocking first)",
    ),
    ("1-9", "in a decision: select that option (nothing is sent)"),
    ("y / n", "answer the question on the bottom line"),
    ("e", "while asked to resolve: add a one-line note"),
    ("s", "in a decision: mark it seen (asks y/n)"),
    ("w", "in a decision: withdraw it (asks y/n)"),
    ("m", "send a message to a role: role, then body (asks y/n)"),
    ("L", "switch launching off or on (asks y/n)"),
    ("t", "in the trail view: show the trail of a subject"),
    ("?", "this help"),
    ("q", "quit"),
];

/// What the loop does for the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send one request through the proven link; its answer comes back
    /// through [`State::handle_reply`] with the same verb and arguments.
    Send(Verb, Value),
    /// Ring the terminal bell.
    Bell,
    /// Run the `--notify` command for a new decision.
    Notify(Notice),
    /// Stop the console.
    Quit,
}

/// What `--notify` is told of a new decision: no capability, no token.
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
    /// The business's runs.
    Agents,
    /// The trail of one subject.
    Trail,
    /// The changes as they arrived.
    Activity,
}

impl View {
    /// Every view, in `Tab`'s order.
    pub const ALL: [View; 5] = [
        View::Inbox,
        View::Decision,
        View::Agents,
        View::Trail,
        View::Activity,
    ];

    /// Its tab's name.
    pub fn name(self) -> &'static str {
        match self {
            View::Inbox => "Inbox",
            View::Decision => "Decision",
            View::Agents => "Agents",
            View::Trail => "Trail",
            View::Activity => "Activity",
        }
    }
}

/// An act the human is asked to confirm with `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// `decision.resolve` with an option's key and a note.
    Resolve {
        /// The decision.
        id: String,
        /// Its question.
        question: String,
        /// The option's key.
        key: String,
        /// The note, if any.
        note: String,
    },
    /// `decision.seen`.
    Seen {
        /// The decision.
        id: String,
    },
    /// `decision.withdraw`.
    Withdraw {
        /// The decision.
        id: String,
    },
    /// `message.send` to a role.
    Message {
        /// The role.
        to: String,
        /// The body.
        body: String,
    },
    /// `launch.revoke` (off) or `launch.restore`.
    Launch {
        /// Whether launching goes off.
        off: bool,
    },
}

impl Act {
    /// The question on the bottom line.
    pub fn question(&self) -> String {
        match self {
            Act::Resolve {
                question,
                key,
                note,
                ..
            } => {
                let note = if note.is_empty() {
                    String::new()
                } else {
                    format!(" (note: {note})")
                };
                format!("Resolve {question} with {key}?{note} y/n, e adds a note")
            }
            Act::Seen { .. } => "Mark this decision seen? y/n".to_owned(),
            Act::Withdraw { .. } => "Withdraw this decision? y/n".to_owned(),
            Act::Message { to, body } => format!("Send {to:?} the message {body:?}? y/n"),
            Act::Launch { off: true } => "Switch launching off for the business? y/n".to_owned(),
            Act::Launch { off: false } => "Switch launching back on? y/n".to_owned(),
        }
    }

    /// The request it sends.
    fn request(&self) -> (Verb, Value) {
        let note = |note: &str| (!note.is_empty()).then(|| note.to_owned());
        match self {
            Act::Resolve {
                id, key, note: n, ..
            } => {
                let mut args = json!({"id": id, "choice": key});
                if let Some(n) = note(n) {
                    args["note"] = json!(n);
                }
                (Verb::DecisionResolve, args)
            }
            Act::Seen { id } => (Verb::DecisionSeen, json!({"id": id})),
            Act::Withdraw { id } => (Verb::DecisionWithdraw, json!({"id": id})),
            Act::Message { to, body } => (Verb::MessageSend, json!({"to": to, "body": body})),
            Act::Launch { off: true } => (Verb::LaunchRevoke, json!({})),
            Act::Launch { off: false } => (Verb::LaunchRestore, json!({})),
        }
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
}

/// A decision as the inbox shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Its JSON, as `inbox` answered it.
    pub json: Value,
    /// When it was raised (ms since the epoch), once its trail was read.
    pub raised_ms: Option<i64>,
}

impl Decision {
    /// The decision's id.
    pub fn id(&self) -> &str {
        self.json["id"].as_str().unwrap_or_default()
    }

    /// Whether it blocks a task.
    pub fn blocking(&self) -> bool {
        self.json["blocking"].as_bool().unwrap_or(false)
    }

    /// Its question.
    pub fn question(&self) -> &str {
        self.json["question"].as_str().unwrap_or_default()
    }

    /// Its options, `(key, text)`.
    pub fn options(&self) -> Vec<(String, String)> {
        self.json["options"]
            .as_array()
            .map(|options| {
                options
                    .iter()
                    .map(|o| {
                        let s = |k: &str| o[k].as_str().unwrap_or_default().to_owned();
                        (s("key"), s("text"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `role/run` of its raiser.
    pub fn raiser(&self) -> String {
        let by = &self.json["raisedBy"];
        format!(
            "{}/{}",
            by["role"].as_str().unwrap_or("?"),
            by["run"].as_str().unwrap_or("?")
        )
    }
}

/// Why an open decision no longer waits, if it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Still waiting on the human.
    Waiting,
    /// Resolved, withdrawn or superseded (by anyone) while on screen.
    Gone,
    /// The act sent on it may have happened (`outcome-unknown`).
    Unknown,
}

/// The open decision of the decision view.
#[derive(Debug, Clone, PartialEq)]
pub struct Open {
    /// The decision, as last seen.
    pub decision: Decision,
    /// The option selected with a digit, if any (never preselected).
    pub chosen: Option<usize>,
    /// Whether it still waits.
    pub standing: Standing,
}

/// The console's state.
#[derive(Debug, Clone)]
pub struct State {
    /// The business.
    pub business: String,
    /// The current view.
    pub view: View,
    /// Whether the help page is shown.
    pub help: bool,
    /// The selected row of the current list.
    pub selected: usize,
    /// The human's open decisions, in `inbox` order.
    pub decisions: Vec<Decision>,
    /// The human's unread messages.
    pub messages: Vec<Value>,
    /// The business's runs, as `agents` answered, each with the open
    /// decisions it raised (`waitsOn`).
    pub agents: Vec<Value>,
    /// The launch switch, as `agents` last carried it, or a change or an
    /// act told it since; unknown only while no run is bound.
    pub launching: Option<bool>,
    /// The evidence's hash chain, as `head` answered: `{size, head, note}`.
    pub head: Option<Value>,
    /// The decision view's decision.
    pub open: Option<Open>,
    /// The trail view's subject and records.
    pub trail: Option<(String, Vec<Value>)>,
    /// The changes seen, newest last.
    pub activity: Vec<Value>,
    /// The bottom line's prompt.
    pub prompt: Prompt,
    /// The bottom line's last word: an outcome or a refusal.
    pub status: String,
    /// The ids already seen in the inbox (a new one rings the bell).
    seen: BTreeSet<String>,
    /// Whether the first inbox has been read.
    loaded: bool,
    effects: VecDeque<Effect>,
}

/// The most activity lines kept.
const ACTIVITY: usize = 500;

impl State {
    /// A console over `business`, asking for its first reads.
    pub fn new(business: &str) -> Self {
        let mut state = Self {
            business: business.to_owned(),
            view: View::Inbox,
            help: false,
            selected: 0,
            decisions: Vec::new(),
            messages: Vec::new(),
            agents: Vec::new(),
            launching: None,
            head: None,
            open: None,
            trail: None,
            activity: Vec::new(),
            prompt: Prompt::None,
            status: String::new(),
            seen: BTreeSet::new(),
            loaded: false,
            effects: VecDeque::new(),
        };
        state.refresh();
        state
    }

    /// The next effect for the loop, oldest first.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    fn send(&mut self, verb: Verb, args: Value) {
        self.effects.push_back(Effect::Send(verb, args));
    }

    /// Reads the inbox, the agents and the evidence's head again.
    fn refresh(&mut self) {
        self.send(Verb::Inbox, json!({}));
        self.send(Verb::Agents, json!({}));
        self.send(Verb::Head, json!({}));
    }

    /// The decisions waiting on the human, blocking ones first, then
    /// oldest (by raise time once known, else by the inbox's order).
    pub fn waiting(&self) -> Vec<&Decision> {
        let mut order: Vec<(usize, &Decision)> = self.decisions.iter().enumerate().collect();
        order.sort_by_key(|(i, d)| (!d.blocking(), d.raised_ms.unwrap_or(i64::MAX), *i));
        order.into_iter().map(|(_, d)| d).collect()
    }

    /// How many rows the current view lists.
    fn rows(&self) -> usize {
        match self.view {
            View::Inbox => self.decisions.len() + self.messages.len(),
            View::Decision => self.open.as_ref().map_or(0, |o| o.decision.options().len()),
            View::Agents => self.agents.len(),
            View::Trail => self.trail.as_ref().map_or(0, |(_, t)| t.len()),
            View::Activity => self.activity.len(),
        }
    }

    fn open_decision(&mut self, decision: Decision) {
        let id = decision.id().to_owned();
        // Opened again, a decision keeps what is known of it: one whose act
        // may have happened keeps its keys off.
        let standing = match &self.open {
            Some(open) if open.decision.id() == id => open.standing.clone(),
            Some(_) | None => Standing::Waiting,
        };
        self.open = Some(Open {
            decision,
            chosen: None,
            standing,
        });
        self.view = View::Decision;
        self.selected = 0;
        self.send(Verb::Trail, json!({"subject": id}));
    }

    /// Whether the open decision still takes keys.
    fn live(&self) -> Option<&Open> {
        self.open
            .as_ref()
            .filter(|o| o.standing == Standing::Waiting)
    }

    /// One key.
    pub fn handle_key(&mut self, key: Key) {
        if self.help {
            if matches!(key, Key::Char('q')) {
                self.effects.push_back(Effect::Quit);
            }
            self.help = false;
            return;
        }
        match std::mem::replace(&mut self.prompt, Prompt::None) {
            Prompt::None => self.key_in_view(key),
            Prompt::Confirm(act) => self.key_in_confirm(act, key),
            Prompt::Note(act, note) => {
                self.prompt = match typed(key, note) {
                    Typed::Editing(note) => Prompt::Note(act, note),
                    Typed::Done(note) => match act {
                        Act::Resolve {
                            id, question, key, ..
                        } => Prompt::Confirm(Act::Resolve {
                            id,
                            question,
                            key,
                            note,
                        }),
                        other @ (Act::Seen { .. }
                        | Act::Withdraw { .. }
                        | Act::Message { .. }
                        | Act::Launch { .. }) => Prompt::Confirm(other),
                    },
                    Typed::Cancelled => Prompt::Confirm(act),
                }
            }
            Prompt::Role(role) => {
                self.prompt = match typed(key, role) {
                    Typed::Editing(role) => Prompt::Role(role),
                    Typed::Done(role) if !role.is_empty() => Prompt::Body(role, String::new()),
                    Typed::Done(_) | Typed::Cancelled => Prompt::None,
                }
            }
            Prompt::Body(to, body) => {
                self.prompt = match typed(key, body) {
                    Typed::Editing(body) => Prompt::Body(to, body),
                    Typed::Done(body) if !body.is_empty() => {
                        Prompt::Confirm(Act::Message { to, body })
                    }
                    Typed::Done(_) | Typed::Cancelled => Prompt::None,
                }
            }
            Prompt::Subject(subject) => match typed(key, subject) {
                Typed::Editing(subject) => self.prompt = Prompt::Subject(subject),
                Typed::Done(subject) if !subject.is_empty() => {
                    self.trail = Some((subject.clone(), Vec::new()));
                    self.selected = 0;
                    self.send(Verb::Trail, json!({"subject": subject}));
                }
                Typed::Done(_) | Typed::Cancelled => {}
            },
        }
    }

    fn key_in_confirm(&mut self, act: Act, key: Key) {
        match key {
            Key::Char('y') => {
                // The decision may have gone while the question was asked.
                let gone = matches!(
                    act,
                    Act::Resolve { .. } | Act::Seen { .. } | Act::Withdraw { .. }
                ) && self.live().is_none();
                if gone {
                    self.status = "no longer waiting: nothing was sent".to_owned();
                    return;
                }
                let (verb, args) = act.request();
                self.status = format!("sending {verb}…");
                self.send(verb, args);
            }
            Key::Char('e') if matches!(act, Act::Resolve { .. }) => {
                let note = match &act {
                    Act::Resolve { note, .. } => note.clone(),
                    Act::Seen { .. }
                    | Act::Withdraw { .. }
                    | Act::Message { .. }
                    | Act::Launch { .. } => String::new(),
                };
                self.prompt = Prompt::Note(act, note);
            }
            Key::Char('n') | Key::Esc => self.status = "cancelled: nothing was sent".to_owned(),
            Key::Char(_) | Key::Enter | Key::Tab | Key::Up | Key::Down | Key::Backspace => {
                self.prompt = Prompt::Confirm(act);
            }
        }
    }

    fn key_in_view(&mut self, key: Key) {
        match key {
            Key::Char('q') => self.effects.push_back(Effect::Quit),
            Key::Char('?') => self.help = true,
            Key::Char('j') | Key::Down => {
                if self.selected + 1 < self.rows() {
                    self.selected += 1;
                }
            }
            Key::Char('k') | Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Tab => {
                let at = View::ALL.iter().position(|v| *v == self.view).unwrap_or(0);
                let mut next = View::ALL[(at + 1) % View::ALL.len()];
                if next == View::Decision && self.open.is_none() {
                    next = View::Agents;
                }
                self.view = next;
                self.selected = 0;
            }
            Key::Esc => {
                self.view = View::Inbox;
                self.selected = 0;
            }
            Key::Char(']') => {
                let current = self.open.as_ref().map(|o| o.decision.id().to_owned());
                let next = self
                    .waiting()
                    .into_iter()
                    .find(|d| Some(d.id()) != current.as_deref())
                    .cloned();
                match next {
                    Some(decision) => self.open_decision(decision),
                    None => self.status = "nothing else is waiting on you".to_owned(),
                }
            }
            Key::Char('m') => self.prompt = Prompt::Role(String::new()),
            Key::Char('L') => {
                self.prompt = Prompt::Confirm(Act::Launch {
                    off: self.launching != Some(false),
                });
            }
            Key::Char('t') if self.view == View::Trail => {
                self.prompt = Prompt::Subject(String::new());
            }
            Key::Enter if self.view == View::Inbox => {
                if let Some(decision) = self.decisions.get(self.selected).cloned() {
                    self.open_decision(decision);
                }
            }
            Key::Char(_) | Key::Enter | Key::Backspace if self.view == View::Decision => {
                self.key_in_decision(key);
            }
            Key::Char(_) | Key::Enter | Key::Backspace => {}
        }
    }

    fn key_in_decision(&mut self, key: Key) {
        let Some(open) = self.live() else {
            if self.open.is_some() && key != Key::Backspace {
                self.status = "no longer waiting: its keys are disabled".to_owned();
            }
            return;
        };
        let id = open.decision.id().to_owned();
        match key {
            Key::Char(digit @ '1'..='9') => {
                let index = digit as usize - '1' as usize;
                let options = open.decision.options();
                if let (Some((key, _)), Some(open)) = (options.get(index), self.open.as_mut()) {
                    open.chosen = Some(index);
                    self.selected = index;
                    self.status = format!("selected {key}: Enter asks to resolve with it");
                }
            }
            Key::Enter => match open.chosen {
                Some(index) => {
                    let (key, _) = open.decision.options()[index].clone();
                    let question = open.decision.question().to_owned();
                    self.prompt = Prompt::Confirm(Act::Resolve {
                        id,
                        question,
                        key,
                        note: String::new(),
                    });
                }
                None => self.status = "select an option with its digit first".to_owned(),
            },
            Key::Char('s') => self.prompt = Prompt::Confirm(Act::Seen { id }),
            Key::Char('w') => self.prompt = Prompt::Confirm(Act::Withdraw { id }),
            Key::Char(_) | Key::Backspace | Key::Esc | Key::Tab | Key::Up | Key::Down => {}
        }
    }

    /// One page of the human's `changes` (`{cursor, changes}`).
    pub fn handle_change(&mut self, page: &Value) {
        let Some(changes) = page["changes"].as_array() else {
            return;
        };
        if changes.is_empty() {
            return;
        }
        for change in changes {
            let kind = change["kind"].as_str().unwrap_or_default();
            match kind {
                "launch.revoked" => self.launching = Some(false),
                "launch.restored" => self.launching = Some(true),
                _ => {}
            }
            let closes = matches!(
                kind,
                "decision.resolved" | "decision.withdrawn" | "decision.superseded"
            );
            if let Some(open) = self.open.as_mut() {
                if closes && change["decision"].as_str() == Some(open.decision.id()) {
                    open.standing = Standing::Gone;
                }
            }
            self.activity.push(change.clone());
        }
        if self.activity.len() > ACTIVITY {
            let extra = self.activity.len() - ACTIVITY;
            self.activity.drain(..extra);
        }
        self.refresh();
        if let Some(open) = &self.open {
            let id = open.decision.id().to_owned();
            self.send(Verb::Trail, json!({"subject": id}));
        }
        if let Some((subject, _)) = &self.trail {
            if self.open.as_ref().map(|o| o.decision.id()) != Some(subject.as_str()) {
                let subject = subject.clone();
                self.send(Verb::Trail, json!({"subject": subject}));
            }
        }
    }

    /// The broker's answer to a request sent for an [`Effect::Send`].
    pub fn handle_reply(&mut self, verb: Verb, args: &Value, reply: Result<Value, Refusal>) {
        let reply = match reply {
            Ok(reply) => reply,
            Err(refusal) => return self.refused(verb, args, refusal),
        };
        match verb {
            Verb::Inbox => self.inbox(&reply),
            Verb::Agents => {
                self.agents = reply.as_array().cloned().unwrap_or_default();
                // Every row carries the business's switch, as the broker
                // knows it now.
                if let Some(on) = self.agents.first().and_then(|a| a["launching"].as_bool()) {
                    self.launching = Some(on);
                }
            }
            Verb::Trail => self.trail_read(args, reply),
            Verb::Head => self.head = Some(reply),
            Verb::DecisionResolve => {
                self.status = format!(
                    "resolved with {}",
                    reply["choice"].as_str().unwrap_or_default()
                );
                self.closed_by_me(args);
            }
            Verb::DecisionSeen => self.status = "marked seen".to_owned(),
            Verb::DecisionWithdraw => {
                self.status = "withdrawn".to_owned();
                self.closed_by_me(args);
            }
            Verb::MessageSend => self.status = "message sent".to_owned(),
            Verb::LaunchRevoke => {
                self.launching = Some(false);
                self.status = "launching is off".to_owned();
            }
            Verb::LaunchRestore => {
                self.launching = Some(true);
                self.status = "launching is on".to_owned();
            }
            Verb::RoleClaim
            | Verb::RoleRelease
            | Verb::RoleRevoke
            | Verb::DecisionRaise
            | Verb::MessageReceive
            | Verb::MessageRead
            | Verb::EventEmit
            | Verb::Tasks
            | Verb::Changes
            | Verb::BrowserRequest => {}
        }
    }

    /// The open decision was closed by the human's own act.
    fn closed_by_me(&mut self, args: &Value) {
        if let Some(open) = self.open.as_mut() {
            if args["id"].as_str() == Some(open.decision.id()) {
                open.standing = Standing::Gone;
            }
        }
    }

    fn refused(&mut self, verb: Verb, args: &Value, refusal: Refusal) {
        self.status = format!("{}: {}", refusal.code(), refusal.meaning());
        if refusal != Refusal::OutcomeUnknown {
            return;
        }
        let id = args["id"].as_str().map(str::to_owned);
        self.status = format!(
            "outcome-unknown: {verb} may have happened; its trail is shown, and nothing is resent"
        );
        if let Some(id) = id {
            if let Some(open) = self.open.as_mut() {
                if open.decision.id() == id {
                    open.standing = Standing::Unknown;
                }
            }
            self.view = View::Trail;
            self.selected = 0;
            self.trail = Some((id.clone(), Vec::new()));
            self.send(Verb::Trail, json!({"subject": id}));
        }
    }

    fn inbox(&mut self, reply: &Value) {
        let items = reply.as_array().cloned().unwrap_or_default();
        let (decisions, messages): (Vec<Value>, Vec<Value>) =
            items.into_iter().partition(|i| i["type"] == "decision");
        let known: Vec<(String, Option<i64>)> = self
            .decisions
            .iter()
            .map(|d| (d.id().to_owned(), d.raised_ms))
            .collect();
        self.decisions = decisions
            .into_iter()
            .map(|json| {
                let id = json["id"].as_str().unwrap_or_default();
                let raised_ms = known.iter().find(|(k, _)| k == id).and_then(|(_, t)| *t);
                Decision { json, raised_ms }
            })
            .collect();
        self.messages = messages;
        let fresh: Vec<Decision> = self
            .decisions
            .iter()
            .filter(|d| !self.seen.contains(d.id()))
            .cloned()
            .collect();
        for decision in &fresh {
            self.seen.insert(decision.id().to_owned());
            self.send(Verb::Trail, json!({"subject": decision.id()}));
            if self.loaded {
                self.effects.push_back(Effect::Bell);
                self.effects.push_back(Effect::Notify(Notice {
                    decision: decision.id().to_owned(),
                    action: decision.json["action"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    target: decision.json["target"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    raiser: decision.raiser(),
                }));
            }
        }
        self.loaded = true;
        if let Some(open) = self.open.as_mut() {
            match self.decisions.iter().find(|d| d.id() == open.decision.id()) {
                Some(now) => open.decision = now.clone(),
                None => {
                    if open.standing == Standing::Waiting {
                        open.standing = Standing::Gone;
                    }
                }
            }
        }
        if self.view == View::Inbox {
            self.selected = self.selected.min(self.rows().saturating_sub(1));
        }
    }

    fn trail_read(&mut self, args: &Value, reply: Value) {
        let subject = args["subject"].as_str().unwrap_or_default().to_owned();
        let records = reply.as_array().cloned().unwrap_or_default();
        let raised = records
            .iter()
            .find(|r| r["kind"] == "decision.raised")
            .and_then(|r| r["at"].as_str())
            .and_then(|at| mosaic_domain::Timestamp::parse(at).ok())
            .map(|at| at.unix_ms());
        for decision in &mut self.decisions {
            if decision.id() == subject && raised.is_some() {
                decision.raised_ms = raised;
            }
        }
        let shows = |s: &str| {
            self.open.as_ref().is_some_and(|o| o.decision.id() == s)
                || self.trail.as_ref().is_some_and(|(t, _)| t == s)
        };
        if !shows(&subject) {
            return;
        }
        if let Some(open) = self.open.as_mut() {
            if open.decision.id() == subject {
                open.decision.raised_ms = raised.or(open.decision.raised_ms);
            }
        }
        let replace =
            self.trail.as_ref().is_none_or(|(t, _)| *t == subject) || self.view != View::Trail;
        if replace {
            self.trail = Some((subject, records));
        }
    }
}

/// A line being typed, after one key.
enum Typed {
    Editing(String),
    Done(String),
    Cancelled,
}

/// A one-line editor: characters append, `Backspace` removes, `Enter`
/// ends, `Esc` cancels.
fn typed(key: Key, mut line: String) -> Typed {
    match key {
        Key::Char(c) => {
            if line.chars().count() < 500 {
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
        Key::Tab | Key::Up | Key::Down => Typed::Editing(line),
    }
}
