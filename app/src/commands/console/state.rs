//! The console's state, as a sans-IO machine like the domain's: the loop
//! feeds it keys ([`State::handle_key`]), the terminal's size
//! ([`State::handle_resize`]), pages of the human's `changes`
//! ([`State::handle_change`]), the broker's answers
//! ([`State::handle_reply`]) and whether the broker can be reached
//! ([`State::handle_link`]) or quiet ([`State::handle_quiet`]), and drains the [`Effect`]s it asks for
//! ([`State::poll_effect`]). Nothing here reads a clock, a socket or the
//! terminal; rendering reads the state and changes nothing.
//!
//! Answers are decoded once, here at the link, into the typed rows of
//! [`super::model`]; what a verb's answer does is one row of [`REPLIES`],
//! so a new verb the console does not send needs no line here.

use std::collections::{BTreeSet, VecDeque};

use mosaic_domain::evidence::EvidenceKind;
use mosaic_domain::{Refusal, Verb};
use serde_json::{json, Value};

use super::act::{typed, Typed};
pub use super::act::{Act, Effect, Key, Notice, Prompt, View, KEYS};
use super::grant::{self, Need, Raiser};
use super::lines::wrap;
use super::model::{Change, Decision, Inbox, Message, Record, Run, Shown};

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

/// The evidence's hash chain, as `head` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Records in the chain.
    pub size: u64,
    /// Its head hash.
    pub head: Shown,
}

/// What a verb's answer does to the state: one row per verb the console
/// sends. A verb it never sends has no row, and its answer (never asked
/// for) changes nothing.
type OnReply = fn(&mut State, &Value, &Value);

const REPLIES: &[(Verb, OnReply)] = &[
    (Verb::Inbox, State::on_inbox),
    (Verb::Agents, State::on_agents),
    (Verb::Trail, State::on_trail),
    (Verb::Head, State::on_head),
    (Verb::DecisionResolve, State::on_resolved),
    (Verb::DecisionSeen, State::on_seen),
    (Verb::DecisionWithdraw, State::on_withdrawn),
    (Verb::MessageSend, State::on_sent),
    (Verb::MessageRead, State::on_read),
    (Verb::LaunchRevoke, State::on_launch_off),
    (Verb::LaunchRestore, State::on_launch_on),
];

/// The console's state.
#[derive(Debug, Clone)]
pub struct State {
    /// The business.
    pub business: String,
    /// The broker's socket, for the banner when it cannot be reached.
    pub socket: String,
    /// The current view.
    pub view: View,
    /// Whether the help page is shown.
    pub help: bool,
    /// The selected row of the current list.
    pub selected: usize,
    /// How far the detail pane, the question or the message is scrolled,
    /// in drawn lines.
    pub scroll: usize,
    /// The human's inbox, in the broker's order.
    pub inbox: Inbox,
    /// The business's runs, as `agents` answered.
    pub agents: Vec<Run>,
    /// What the harness agents are doing, when `up --console` tells it.
    pub doing: Option<Vec<super::doing::Doing>>,
    /// The launch switch, as `agents` last carried it, or a change or an
    /// act told it since; unknown only while no run is bound.
    pub launching: Option<bool>,
    /// The evidence's hash chain, once read.
    pub head: Option<Head>,
    /// The decision view's decision.
    pub open: Option<Open>,
    /// The message view's message.
    pub message: Option<Message>,
    /// The trail view's subject and records.
    pub trail: Option<(String, Vec<Record>)>,
    /// The changes seen, newest last.
    pub activity: Vec<Change>,
    /// The bottom line's prompt.
    pub prompt: Prompt,
    /// The bottom line's last word: an outcome or a refusal.
    pub status: String,
    /// The terminal's size, columns and rows.
    pub size: (u16, u16),
    /// Whether the broker cannot be reached: the screen is read-only.
    pub offline: bool,
    /// The ids already seen in the inbox (a new one rings the bell).
    seen: BTreeSet<String>,
    /// Whether the first inbox has been read.
    loaded: bool,
    effects: VecDeque<Effect>,
}

/// The most activity lines kept.
const ACTIVITY: usize = 500;

impl State {
    /// A console over `business`, asking for its first reads. Its size is
    /// unknown (0×0, where nothing is resolvable) until the first
    /// [`State::handle_resize`].
    pub fn new(business: &str) -> Self {
        let mut state = Self {
            business: business.to_owned(),
            socket: String::new(),
            view: View::Inbox,
            help: false,
            selected: 0,
            scroll: 0,
            inbox: Inbox::default(),
            agents: Vec::new(),
            doing: None,
            launching: None,
            head: None,
            open: None,
            message: None,
            trail: None,
            activity: Vec::new(),
            prompt: Prompt::None,
            status: String::new(),
            size: (0, 0),
            offline: false,
            seen: BTreeSet::new(),
            loaded: false,
            effects: VecDeque::new(),
        };
        state.refresh();
        state
    }

    /// Whether the first inbox has been read: until then the inbox says
    /// so, rather than that nothing waits.
    pub fn is_loaded(&self) -> bool {
        self.loaded
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
        let mut order: Vec<(usize, &Decision)> = self.inbox.decisions.iter().enumerate().collect();
        order.sort_by_key(|(i, d)| (!d.blocking, d.raised_ms.unwrap_or(i64::MAX), *i));
        order.into_iter().map(|(_, d)| d).collect()
    }

    /// How many rows the current view lists.
    pub fn rows(&self) -> usize {
        match self.view {
            View::Inbox => self.inbox.decisions.len() + self.inbox.messages.len(),
            View::Decision | View::Message => 0,
            View::Agents => self.agents.len(),
            View::Trail => self.trail.as_ref().map_or(0, |(_, t)| t.len()),
            View::Activity => self.activity.len(),
        }
    }

    /// The raiser of the open decision, alive or not.
    pub fn raiser(&self) -> Option<Raiser> {
        self.open
            .as_ref()
            .map(|o| Raiser::of(&o.decision, &self.agents))
    }

    /// What the open decision needs of the terminal to be resolvable.
    pub fn need(&self) -> Option<Need> {
        let open = self.open.as_ref()?;
        Some(grant::need(
            &open.decision,
            &Raiser::of(&open.decision, &self.agents),
            self.offline,
        ))
    }

    /// Whether the open decision's view is on screen (no other view, no
    /// help over it) and its grant, options and longest prompt all fit
    /// whole at the current size: only then does anything resolve it.
    pub fn resolvable_on_screen(&self) -> bool {
        self.view == View::Decision
            && !self.help
            && self
                .need()
                .is_some_and(|need| need.fits(self.size.0, self.size.1))
    }

    fn too_small(&mut self) {
        let need = self.need().unwrap_or(Need {
            width: 0,
            height: 0,
        });
        self.status = format!(
            "the terminal is too small to show the grant and the prompt whole: make it at \
             least {}x{}; nothing was sent",
            need.width, need.height
        );
    }

    fn open_decision(&mut self, decision: Decision) {
        let id = decision.id.clone();
        // Opened again, a decision keeps what is known of it: one whose act
        // may have happened keeps its keys off.
        let standing = match &self.open {
            Some(open) if open.decision.id == id => open.standing.clone(),
            Some(_) | None => Standing::Waiting,
        };
        self.open = Some(Open {
            decision,
            chosen: None,
            standing,
        });
        self.view = View::Decision;
        self.selected = 0;
        self.scroll = 0;
        self.send(Verb::Trail, json!({"subject": id}));
        // Whether its raiser still runs, as of now: a process's exit is no
        // change of the feed.
        self.send(Verb::Agents, json!({}));
    }

    /// Whether the open decision still takes keys.
    fn live(&self) -> Option<&Open> {
        self.open
            .as_ref()
            .filter(|o| o.standing == Standing::Waiting)
    }

    /// How far the current view's scrolling pane (the inbox's detail, the
    /// question, the message) can scroll at the state's size: its drawn lines
    /// beyond its height. The state holds its scroll within it, so a key
    /// back up always moves the text.
    fn scroll_room(&self) -> usize {
        let state = self;
        let words = self
            .open
            .as_ref()
            .map(|open| grant::raisers_words(&open.decision));
        let (width, height) = state.size;
        let body = height.saturating_sub(2 + u16::from(state.offline));
        let inner_width = width.saturating_sub(2);
        let (text, pane): (Vec<&str>, u16) = match state.view {
            View::Inbox => {
                let decisions = state.inbox.decisions.len();
                let text = match state.inbox.decisions.get(state.selected) {
                    Some(d) => d.question.iter().map(Shown::as_str).collect(),
                    None => state
                        .selected
                        .checked_sub(decisions)
                        .and_then(|i| state.inbox.messages.get(i))
                        .map_or_else(Vec::new, |m| m.body.iter().map(Shown::as_str).collect()),
                };
                (text, body.saturating_sub((body * 2 / 5).max(3)))
            }
            View::Message => (
                state
                    .message
                    .as_ref()
                    .map_or_else(Vec::new, |m| m.body.iter().map(Shown::as_str).collect()),
                body,
            ),
            View::Decision => match (&state.open, &words) {
                (Some(open), Some(words)) => {
                    let options = u16::try_from(open.decision.options.len()).unwrap_or(u16::MAX);
                    let above = grant::GRANT_LINES + 2 + options.saturating_add(2);
                    (
                        words.iter().map(String::as_str).collect(),
                        body.saturating_sub(above),
                    )
                }
                (Some(_) | None, _) => (Vec::new(), body),
            },
            View::Agents | View::Trail | View::Activity => (Vec::new(), body),
        };
        // The inbox's decision detail draws its options below the question.
        let extra = match (state.view, state.inbox.decisions.get(state.selected)) {
            (View::Inbox, Some(d)) => d.options.len() + 1,
            (View::Inbox | View::Message | View::Decision | View::Agents, _)
            | (View::Trail | View::Activity, _) => 0,
        };
        let lines = wrap(text, inner_width).len() + extra;
        lines.saturating_sub(usize::from(pane.saturating_sub(2)))
    }

    /// The terminal's new size.
    pub fn handle_resize(&mut self, width: u16, height: u16) {
        self.size = (width, height);
    }

    /// Whether the broker can be reached: `false` shows the banner and
    /// makes the screen read-only; `true` after that reads everything
    /// again.
    pub fn handle_link(&mut self, up: bool) {
        if up && self.offline {
            self.offline = false;
            self.status = "the broker is back: the screen is read again".to_owned();
            self.refresh();
            self.reread_trails();
        } else if !up {
            self.offline = true;
        }
    }

    /// A wait on `changes` ended with none: the runs are read again, since
    /// a process's exit is no change of the feed, and the Agents view and
    /// the grant area say whether each is alive.
    pub fn handle_quiet(&mut self) {
        if !self.offline {
            self.send(Verb::Agents, json!({}));
        }
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
                            decision, index, ..
                        } => Prompt::Confirm(Act::Resolve {
                            decision,
                            index,
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
                if self.offline {
                    self.status = "the broker cannot be reached: nothing was sent".to_owned();
                    self.prompt = Prompt::Confirm(act);
                    return;
                }
                // The decision may have gone while the question was asked.
                if let Some(id) = act.decision() {
                    if self.live().is_none_or(|o| o.decision.id != id) {
                        self.status = "no longer waiting: nothing was sent".to_owned();
                        return;
                    }
                }
                if matches!(act, Act::Resolve { .. }) && !self.resolvable_on_screen() {
                    self.too_small();
                    self.prompt = Prompt::Confirm(act);
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
            Key::Char(_)
            | Key::Enter
            | Key::Tab
            | Key::Up
            | Key::Down
            | Key::PageUp
            | Key::PageDown
            | Key::Backspace => {
                self.prompt = Prompt::Confirm(act);
            }
        }
    }

    /// Whether the current view scrolls its text rather than moving a
    /// selection.
    fn scrolls(&self) -> bool {
        matches!(self.view, View::Decision | View::Message)
    }

    fn key_in_view(&mut self, key: Key) {
        match key {
            Key::Char('q') => self.effects.push_back(Effect::Quit),
            Key::Char('?') => self.help = true,
            Key::Char('j') | Key::Down if self.scrolls() => {
                self.scroll = (self.scroll + 1).min(self.scroll_room());
            }
            Key::Char('k') | Key::Up if self.scrolls() => {
                self.scroll = self.scroll.saturating_sub(1);
            }
            Key::Char('j') | Key::Down => {
                if self.selected + 1 < self.rows() {
                    self.selected += 1;
                    self.scroll = 0;
                }
            }
            Key::Char('k') | Key::Up => {
                self.selected = self.selected.saturating_sub(1);
                self.scroll = 0;
            }
            Key::PageDown => {
                self.scroll = (self.scroll + 10).min(self.scroll_room());
            }
            Key::PageUp => self.scroll = self.scroll.saturating_sub(10),
            Key::Tab => {
                let at = View::ALL.iter().position(|v| *v == self.view).unwrap_or(0);
                let mut next = View::ALL[(at + 1) % View::ALL.len()];
                if next == View::Decision && self.open.is_none() {
                    next = View::Message;
                }
                if next == View::Message && self.message.is_none() {
                    next = View::Agents;
                }
                self.view = next;
                self.selected = 0;
                self.scroll = 0;
                if next == View::Agents {
                    // Which runs exited, as of now (no change says so).
                    self.send(Verb::Agents, json!({}));
                }
            }
            Key::Esc => {
                self.view = View::Inbox;
                self.selected = 0;
                self.scroll = 0;
            }
            Key::Char(']') => {
                let current = self.open.as_ref().map(|o| o.decision.id.clone());
                let next = self
                    .waiting()
                    .into_iter()
                    .find(|d| Some(&d.id) != current.as_ref())
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
            Key::Enter if self.view == View::Inbox => self.open_selected(),
            Key::Char('r') if matches!(self.view, View::Inbox | View::Message) => {
                self.mark_read();
            }
            Key::Char(_) | Key::Enter | Key::Backspace if self.view == View::Decision => {
                self.key_in_decision(key);
            }
            Key::Char(_) | Key::Enter | Key::Backspace => {}
        }
    }

    /// `Enter` in the inbox: the selected decision or message, opened.
    fn open_selected(&mut self) {
        let decisions = self.inbox.decisions.len();
        if let Some(decision) = self.inbox.decisions.get(self.selected).cloned() {
            self.open_decision(decision);
        } else if let Some(message) = self
            .selected
            .checked_sub(decisions)
            .and_then(|i| self.inbox.messages.get(i))
            .cloned()
        {
            if message.cut {
                self.send(Verb::Trail, json!({"subject": message.id}));
            }
            self.message = Some(message);
            self.view = View::Message;
            self.scroll = 0;
        }
    }

    /// `r`: the open message, or the inbox's selected one, marked read.
    fn mark_read(&mut self) {
        let id = match self.view {
            View::Message => self.message.as_ref().map(|m| m.id.clone()),
            View::Inbox | View::Decision | View::Agents | View::Trail | View::Activity => self
                .selected
                .checked_sub(self.inbox.decisions.len())
                .and_then(|i| self.inbox.messages.get(i))
                .map(|m| m.id.clone()),
        };
        match id {
            Some(_) if self.offline => {
                self.status = "the broker cannot be reached: nothing was sent".to_owned();
            }
            Some(id) => self.send(Verb::MessageRead, json!({"id": id})),
            None => self.status = "r marks a message read: select one first".to_owned(),
        }
    }

    fn key_in_decision(&mut self, key: Key) {
        let Some(open) = self.live() else {
            if self.open.is_some() && key != Key::Backspace {
                self.status = "no longer waiting: its keys are disabled".to_owned();
            }
            return;
        };
        let id = open.decision.id.clone();
        match key {
            Key::Char(digit @ '1'..='9') => {
                let index = digit as usize - '1' as usize;
                if let Some(choice) = open.decision.options.get(index) {
                    self.status = format!("selected {}: Enter asks to resolve with it", choice.key);
                    if let Some(open) = self.open.as_mut() {
                        open.chosen = Some(index);
                    }
                }
            }
            Key::Enter => match open.chosen {
                Some(_) if !self.resolvable_on_screen() => self.too_small(),
                Some(index) => {
                    self.prompt = Prompt::Confirm(Act::Resolve {
                        decision: Box::new(open.decision.clone()),
                        index,
                        note: String::new(),
                    });
                }
                None => self.status = "select an option with its digit first".to_owned(),
            },
            Key::Char('s') => self.prompt = Prompt::Confirm(Act::Seen { id }),
            Key::Char('w') => self.prompt = Prompt::Confirm(Act::Withdraw { id }),
            Key::Char(_)
            | Key::Backspace
            | Key::Esc
            | Key::Tab
            | Key::Up
            | Key::Down
            | Key::PageUp
            | Key::PageDown => {}
        }
    }

    /// One page of the human's `changes` (`{cursor, changes}`).
    pub fn handle_change(&mut self, page: &Value) {
        let changes = Change::decode_page(page);
        if changes.is_empty() {
            return;
        }
        for change in changes {
            if change.kind.is(EvidenceKind::LaunchRevoked) {
                self.launching = Some(false);
            }
            if change.kind.is(EvidenceKind::LaunchRestored) {
                self.launching = Some(true);
            }
            let closes = [
                EvidenceKind::DecisionResolved,
                EvidenceKind::DecisionWithdrawn,
                EvidenceKind::DecisionSuperseded,
            ]
            .into_iter()
            .any(|k| change.kind.is(k));
            if let Some(open) = self.open.as_mut() {
                if closes && change.decision.as_deref() == Some(open.decision.id.as_str()) {
                    open.standing = Standing::Gone;
                }
            }
            self.activity.push(change);
        }
        if self.activity.len() > ACTIVITY {
            let extra = self.activity.len() - ACTIVITY;
            self.activity.drain(..extra);
        }
        self.refresh();
        self.reread_trails();
    }

    /// The trails on screen, read again.
    fn reread_trails(&mut self) {
        if let Some(open) = &self.open {
            let id = open.decision.id.clone();
            self.send(Verb::Trail, json!({"subject": id}));
        }
        if let Some((subject, _)) = &self.trail {
            if self.open.as_ref().map(|o| o.decision.id.as_str()) != Some(subject.as_str()) {
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
        // An answer is the broker reached again.
        self.handle_link(true);
        if let Some((_, on_reply)) = REPLIES.iter().find(|(v, _)| *v == verb) {
            on_reply(self, args, &reply);
        }
    }

    fn on_agents(&mut self, _: &Value, reply: &Value) {
        self.agents = Run::decode_all(reply);
        // Every row carries the business's switch, as the broker knows it
        // now.
        if let Some(on) = self.agents.first().and_then(|a| a.launching) {
            self.launching = Some(on);
        }
    }

    fn on_head(&mut self, _: &Value, reply: &Value) {
        self.head = Some(Head {
            size: reply["size"].as_u64().unwrap_or(0),
            head: Shown::of(reply["head"].as_str().unwrap_or("-")),
        });
    }

    fn on_resolved(&mut self, args: &Value, reply: &Value) {
        self.status = format!(
            "resolved with {}",
            Shown::of(reply["choice"].as_str().unwrap_or_default())
        );
        self.closed_by_me(args);
    }

    fn on_seen(&mut self, _: &Value, _: &Value) {
        self.status = "marked seen".to_owned();
    }

    fn on_withdrawn(&mut self, args: &Value, _: &Value) {
        self.status = "withdrawn".to_owned();
        self.closed_by_me(args);
    }

    fn on_sent(&mut self, _: &Value, _: &Value) {
        self.status = "message sent".to_owned();
    }

    fn on_read(&mut self, args: &Value, _: &Value) {
        self.status = "marked read".to_owned();
        if self.message.as_ref().map(|m| m.id.as_str()) == args["id"].as_str() {
            self.message = None;
            if self.view == View::Message {
                self.view = View::Inbox;
                self.scroll = 0;
            }
        }
        self.send(Verb::Inbox, json!({}));
    }

    fn on_launch_off(&mut self, _: &Value, _: &Value) {
        self.launching = Some(false);
        self.status = "launching is off".to_owned();
    }

    fn on_launch_on(&mut self, _: &Value, _: &Value) {
        self.launching = Some(true);
        self.status = "launching is on".to_owned();
    }

    /// The open decision was closed by the human's own act.
    fn closed_by_me(&mut self, args: &Value) {
        if let Some(open) = self.open.as_mut() {
            if args["id"].as_str() == Some(open.decision.id.as_str()) {
                open.standing = Standing::Gone;
            }
        }
    }

    fn refused(&mut self, verb: Verb, args: &Value, refusal: Refusal) {
        self.status = format!("{}: {}", refusal.code(), refusal.meaning());
        if refusal == Refusal::BrokerUnavailable {
            self.offline = true;
            self.status = format!("the broker cannot be reached: {verb} was not sent");
            return;
        }
        if refusal != Refusal::OutcomeUnknown {
            return;
        }
        let id = args["id"].as_str().map(str::to_owned);
        self.status = format!(
            "outcome-unknown: {verb} may have happened; its trail is shown, and nothing is resent"
        );
        if let Some(id) = id {
            if let Some(open) = self.open.as_mut() {
                if open.decision.id == id {
                    open.standing = Standing::Unknown;
                }
            }
            self.view = View::Trail;
            self.selected = 0;
            self.trail = Some((id.clone(), Vec::new()));
            self.send(Verb::Trail, json!({"subject": id}));
        }
    }

    fn on_inbox(&mut self, _: &Value, reply: &Value) {
        let mut inbox = Inbox::decode(reply);
        for decision in &mut inbox.decisions {
            decision.raised_ms = self
                .inbox
                .decisions
                .iter()
                .find(|d| d.id == decision.id)
                .and_then(|d| d.raised_ms);
        }
        inbox.keep_whole(&self.inbox);
        self.inbox = inbox;
        let fresh: Vec<Decision> = self
            .inbox
            .decisions
            .iter()
            .filter(|d| !self.seen.contains(&d.id))
            .cloned()
            .collect();
        for decision in &fresh {
            self.seen.insert(decision.id.clone());
            self.send(Verb::Trail, json!({"subject": decision.id}));
            if self.loaded {
                self.effects.push_back(Effect::Bell);
                self.effects.push_back(Effect::Notify(Notice {
                    decision: Shown::of(&decision.id).to_string(),
                    action: decision.grant.action.to_string(),
                    target: decision
                        .grant
                        .target
                        .as_ref()
                        .map(Shown::to_string)
                        .unwrap_or_default(),
                    raiser: decision.raiser.to_string(),
                }));
            }
        }
        self.loaded = true;
        if let Some(open) = self.open.as_mut() {
            match self
                .inbox
                .decisions
                .iter()
                .find(|d| d.id == open.decision.id)
            {
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

    fn on_trail(&mut self, args: &Value, reply: &Value) {
        let subject = args["subject"].as_str().unwrap_or_default().to_owned();
        self.inbox.fill(&subject, reply);
        if let Some(m) = self.message.as_mut() {
            m.fill(&subject, reply);
        }
        let records = Record::decode_all(reply);
        let raised = records
            .iter()
            .find(|r| r.kind.is(EvidenceKind::DecisionRaised))
            .and_then(|r| r.at_ms);
        for decision in &mut self.inbox.decisions {
            if decision.id == subject && raised.is_some() {
                decision.raised_ms = raised;
            }
        }
        let shows = |s: &str| {
            self.open.as_ref().is_some_and(|o| o.decision.id == s)
                || self.trail.as_ref().is_some_and(|(t, _)| t == s)
        };
        if !shows(&subject) {
            return;
        }
        if let Some(open) = self.open.as_mut() {
            if open.decision.id == subject {
                open.decision.fill(&subject, reply);
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

impl State {
    /// A line from `up`'s activity feed, read at `now_ms`: it replaces
    /// what the view knew. A line that is not one is dropped.
    pub fn handle_doing(&mut self, line: &str, now_ms: i64) {
        if let Some(rows) = super::doing::decode(line, now_ms) {
            self.doing = Some(rows);
        }
    }

    /// What `run` (as the broker names it) is doing, if `up` told it.
    pub fn doing_of(&self, run: &str) -> Option<&super::doing::Doing> {
        self.doing.as_ref()?.iter().find(|d| d.run == run)
    }
}
