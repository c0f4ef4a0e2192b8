//! The console's state, as a sans-IO machine like the domain's: the loop
//! feeds it keys ([`State::handle_key`]), the terminal's size
//! ([`State::handle_resize`]), the human's changes
//! ([`State::handle_change`]), the broker's answers
//! ([`State::handle_reply`]), what the harness agents are doing
//! ([`State::handle_doing`]) and whether the broker can be reached
//! ([`State::handle_link`]) or quiet ([`State::handle_quiet`]), and drains
//! the [`Effect`]s it asks for ([`State::poll_effect`]). Nothing here reads
//! a clock, a socket or the terminal; rendering reads the state through
//! its accessors and changes nothing.
//!
//! Every input is typed: a request is a [`Request`], and its answer was
//! decoded off the state, with the client crate's wire shapes, into the
//! rows of [`super::model`] ([`Reply`]); an answer that is not its verb's
//! shape arrives as the refusal `bad-response`. The keys are handled in
//! [`keys`], the answers in [`replies`], the selection in [`select`], the
//! filter `/` types in [`filter`], the History view's pages in [`past`].

mod filter;
mod keys;
mod past;
mod replies;
mod select;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;

use mosaic_domain::evidence::EvidenceKind;
use mosaic_domain::{DecisionId, MessageId, RunId};

pub use super::act::{Act, Effect, Key, Notice, Prompt, View, KEYS};
use super::detail::Detail;
use super::doing::{Doing, Life};
use super::grant::{self, Need, Raiser};
use super::history::History;
use super::layout;
use super::lines::wrap;
use super::model::{Change, Decision, Inbox, Message, Run, Shown};
pub use super::request::{Head, Reply, Request};
use super::trail::Record;
pub use select::Pick;

/// Why an open decision no longer waits, if it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionState {
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
    pub state: DecisionState,
}

/// How a decision stopped waiting, as a change told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// `decision.resolved`.
    Resolved,
    /// `decision.withdrawn`.
    Withdrawn,
    /// `decision.superseded`.
    Superseded,
}

impl Closed {
    /// The closing kind of a change, if it is one.
    pub fn of(kind: EvidenceKind) -> Option<Closed> {
        if kind == EvidenceKind::DecisionResolved {
            Some(Closed::Resolved)
        } else if kind == EvidenceKind::DecisionWithdrawn {
            Some(Closed::Withdrawn)
        } else if kind == EvidenceKind::DecisionSuperseded {
            Some(Closed::Superseded)
        } else {
            None
        }
    }

    /// In words, after "was".
    pub fn words(self) -> &'static str {
        match self {
            Closed::Resolved => "resolved",
            Closed::Withdrawn => "withdrawn",
            Closed::Superseded => "superseded by a newer decision",
        }
    }
}

/// What the screen shows, as far as a change of it must redraw every
/// cell: the view, the help, the selection, the scroll, and which
/// decision, message or trail is open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shows {
    view: View,
    help: bool,
    selected: usize,
    scroll: usize,
    open: Option<DecisionId>,
    message: Option<MessageId>,
    trail: Option<String>,
    filter: Option<String>,
    detail: bool,
}

/// The console's state.
#[derive(Debug, Clone)]
pub struct State {
    /// The business.
    business: String,
    /// The broker's socket, for the banner when it cannot be reached.
    socket: String,
    /// The current view.
    view: View,
    /// Whether the help page is shown.
    help: bool,
    /// The selected row of the current list.
    selected: usize,
    /// The inbox's selected row, by id.
    picked: Option<Pick>,
    /// The row the human's own last act (a resolve, a withdraw, a read)
    /// took from the inbox: its going needs no word.
    mine: Option<Pick>,
    /// How each decision closed, as the changes told it, newest ids kept.
    closed: BTreeMap<DecisionId, Closed>,
    /// How far the detail pane, the question or the message is scrolled,
    /// in drawn lines.
    scroll: usize,
    /// The human's inbox, in the broker's order.
    inbox: Inbox,
    /// The business's runs, as `agents` answered.
    agents: Vec<Run>,
    /// What the harness agents are doing, when `up --console` tells it.
    doing: Option<Vec<Doing>>,
    /// Each run's life, as `up --console` last told it.
    lives: Vec<Life>,
    /// Whether `up --console` takes orders from this console (`S`).
    orders: bool,
    /// Whether alarms are drawn in colour (`NO_COLOR` unset).
    colour: bool,
    /// The runs already known to have failed (a new one rings the bell).
    failed: BTreeSet<String>,
    /// The run view's run.
    run: Option<RunId>,
    /// While every message is being marked read: how many are so far.
    read_all: Option<u64>,
    /// The reads of that page not answered yet.
    reading: usize,
    /// The last lines of a run's output, as last read, and the run.
    output: Option<(String, Vec<Shown>)>,
    /// The launch switch, as `agents` last carried it, or a change or an
    /// act told it since; unknown only while no run is bound.
    launching: Option<bool>,
    /// The evidence's hash chain, once read.
    head: Option<Head>,
    /// The decision view's decision.
    open: Option<Open>,
    /// The message view's message.
    message: Option<Message>,
    /// The trail view's subject and records.
    trail: Option<(String, Vec<Record>)>,
    /// The closed decisions, once the History view was opened.
    history: Option<History>,
    /// Each list's filter, by its view.
    filters: Vec<(View, String)>,
    /// The Trail's or the Activity view's row opened whole.
    detail: Option<Detail>,
    /// The changes seen, newest last.
    activity: Vec<Change>,
    /// The bottom line's prompt.
    prompt: Prompt,
    /// The bottom line's last word: an outcome or a refusal.
    status: String,
    /// The terminal's size, columns and rows.
    size: (u16, u16),
    /// Whether the broker cannot be reached: the screen is read-only.
    offline: bool,
    /// The decisions already seen in the inbox (a new one rings the bell).
    seen: BTreeSet<DecisionId>,
    /// Whether the first inbox has been read.
    loaded: bool,
    effects: VecDeque<Effect>,
}

/// The most activity lines kept.
const ACTIVITY: usize = 500;

/// The most closed decisions remembered, to say how one closed.
const CLOSED: usize = 1000;

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
            picked: None,
            mine: None,
            closed: BTreeMap::new(),
            scroll: 0,
            inbox: Inbox::default(),
            agents: Vec::new(),
            doing: None,
            lives: Vec::new(),
            orders: false,
            colour: false,
            failed: BTreeSet::new(),
            run: None,
            output: None,
            read_all: None,
            reading: 0,
            launching: None,
            head: None,
            open: None,
            message: None,
            trail: None,
            history: None,
            filters: Vec::new(),
            detail: None,
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

    /// The same console, naming `socket` in its banner when the broker
    /// cannot be reached.
    pub fn with_socket(mut self, socket: &str) -> Self {
        socket.clone_into(&mut self.socket);
        self
    }

    /// The same console, able to send `up` orders (`S` starts an ended
    /// agent again): `up --console` started it with its private channel.
    pub fn with_orders(mut self) -> Self {
        self.orders = true;
        self
    }

    /// The same console, drawing alarms in colour or, with `false`, in
    /// bold only (`NO_COLOR`).
    pub fn with_colour(mut self, colour: bool) -> Self {
        self.colour = colour;
        self
    }

    /// Whether alarms are drawn in colour.
    pub fn colour(&self) -> bool {
        self.colour
    }

    /// Whether `S` can send `up` its order.
    pub fn takes_orders(&self) -> bool {
        self.orders
    }

    /// `run`'s life, as `up` last told it.
    pub fn life_of(&self, run: &str) -> Option<&Life> {
        self.lives.iter().find(|l| l.run == run)
    }

    /// The open Run view's run and its output's file, when `up` named
    /// one: the file whose end the loop reads before each draw.
    pub fn output_to_read(&self) -> Option<(String, PathBuf)> {
        if self.view != View::Run {
            return None;
        }
        let run = self.run.as_ref()?.as_str();
        let path = self.life_of(run)?.output.clone()?;
        Some((run.to_owned(), path))
    }

    /// The last lines of `run`'s output, as read just now (`None` when
    /// its file could not be read).
    pub fn handle_output(&mut self, run: String, lines: Option<Vec<Shown>>) {
        self.output = lines.map(|lines| (run, lines));
    }

    /// The last lines of `run`'s output, as last read.
    pub fn output_of(&self, run: &str) -> Option<&[Shown]> {
        self.output
            .as_ref()
            .filter(|(of, _)| of == run)
            .map(|(_, lines)| lines.as_slice())
    }

    /// The run view's run, as `agents` last listed it.
    pub fn run_open(&self) -> Option<&Run> {
        let run = self.run.as_ref()?;
        self.agents.iter().find(|a| &a.who.run_raw == run)
    }

    /// Whether `run` failed, as the broker's end or `up`'s life says.
    pub fn run_failed(&self, run: &Run) -> bool {
        run.ended.is_some_and(|e| e.failed())
            || self
                .life_of(run.who.run_raw.as_str())
                .is_some_and(|l| l.failed)
    }

    /// The business.
    pub fn business(&self) -> &str {
        &self.business
    }

    /// The broker's socket, as the banner names it.
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// The current view.
    pub fn view(&self) -> View {
        self.view
    }

    /// Whether the help page is shown.
    pub fn help(&self) -> bool {
        self.help
    }

    /// How far the current view's scrolling pane is scrolled, in drawn
    /// lines.
    pub fn scroll(&self) -> usize {
        self.scroll
    }

    /// The human's inbox, in the broker's order.
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// The business's runs, as `agents` last answered.
    pub fn agents(&self) -> &[Run] {
        &self.agents
    }

    /// Whether `up --console` told what the harness agents are doing.
    pub fn tells_doing(&self) -> bool {
        self.doing.is_some()
    }

    /// What `run` (as the broker names it) is doing, if `up` told it.
    pub fn doing_of(&self, run: &str) -> Option<&Doing> {
        self.doing.as_ref()?.iter().find(|d| d.run == run)
    }

    /// The launch switch, where known.
    pub fn launching(&self) -> Option<bool> {
        self.launching
    }

    /// The evidence's hash chain, once read.
    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    /// The decision view's decision.
    pub fn open(&self) -> Option<&Open> {
        self.open.as_ref()
    }

    /// The message view's message.
    pub fn message(&self) -> Option<&Message> {
        self.message.as_ref()
    }

    /// The trail view's subject and records.
    pub fn trail(&self) -> Option<(&str, &[Record])> {
        self.trail.as_ref().map(|(s, r)| (s.as_str(), r.as_slice()))
    }

    /// The row opened whole, when its view is on screen (a record, while
    /// its trail is the one shown).
    pub fn detail(&self) -> Option<&Detail> {
        self.detail.as_ref().filter(|detail| match detail {
            Detail::Record { subject, .. } => {
                self.view == View::Trail
                    && self
                        .trail
                        .as_ref()
                        .is_some_and(|(shown, _)| Shown::of(shown) == *subject)
            }
            Detail::Change(_) => self.view == View::Activity,
        })
    }

    /// The changes seen, newest last.
    pub fn activity(&self) -> &[Change] {
        &self.activity
    }

    /// The bottom line's prompt.
    pub fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    /// The bottom line's last word.
    pub fn status(&self) -> &str {
        &self.status
    }

    /// Whether the broker cannot be reached.
    pub fn offline(&self) -> bool {
        self.offline
    }

    /// Whether the first inbox has been read: until then the inbox says
    /// so, rather than that nothing waits.
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// What the screen shows: when it differs from the last frame's, the
    /// whole screen is drawn again ([`super::render::redraw`]).
    pub fn shows(&self) -> Shows {
        Shows {
            view: self.view,
            help: self.help,
            selected: self.selected,
            scroll: self.scroll,
            open: self.open.as_ref().map(|o| o.decision.id),
            message: self.message.as_ref().map(|m| m.id),
            trail: self.trail.as_ref().map(|(subject, _)| subject.clone()),
            filter: self.filter().map(str::to_owned),
            detail: self.detail().is_some(),
        }
    }

    /// The next effect for the loop, oldest first.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    fn send(&mut self, request: Request) {
        self.effects.push_back(Effect::Send(request));
    }

    /// Reads the inbox, the agents and the evidence's head again.
    fn refresh(&mut self) {
        self.send(Request::Inbox);
        self.send(Request::Agents);
        self.send(Request::Head);
    }

    /// How decision `id` closed, in words, as the changes told it.
    pub fn how_closed(&self, id: DecisionId) -> &'static str {
        self.closed.get(&id).map_or("closed", |c| c.words())
    }

    /// What happened to the open decision, once it no longer waits: from
    /// its trail (resolved by whom and with what, withdrawn by whom,
    /// superseded by which decision) once read, else from the change
    /// that closed it.
    pub fn what_happened(&self) -> Option<String> {
        let open = self.open.as_ref()?;
        let id = open.decision.id;
        let records = self
            .trail
            .as_ref()
            .filter(|(subject, _)| *subject == id.to_string())
            .map_or(&[][..], |(_, records)| records.as_slice());
        let said = records.iter().rev().find_map(|r| {
            if r.kind.is(EvidenceKind::DecisionResolved) {
                Some(format!("resolved by {} with {}", r.who, r.field("choice")))
            } else if r.kind.is(EvidenceKind::DecisionWithdrawn) {
                Some(format!("withdrawn by {}", r.who))
            } else if r.kind.is(EvidenceKind::DecisionSuperseded) {
                Some(format!("superseded by the decision {}", r.field("by")))
            } else {
                None
            }
        });
        said.or_else(|| {
            self.closed
                .contains_key(&id)
                .then(|| self.how_closed(id).to_owned())
        })
    }

    /// The bottom line's question about decision `id`, if one is asked,
    /// taken away: the decision no longer waits.
    fn clear_prompt_of(&mut self, id: DecisionId) {
        let asks = match &self.prompt {
            Prompt::Confirm(act) | Prompt::Note(act, _) => act.decision() == Some(id),
            Prompt::None
            | Prompt::Role(_)
            | Prompt::Body(..)
            | Prompt::Subject(_)
            | Prompt::Filter(_) => false,
        };
        if asks {
            self.prompt = Prompt::None;
            self.status =
                "no longer waiting: the question was taken away, nothing was sent".to_owned();
        }
    }

    /// Remembers how decision `id` closed.
    fn remember_closed(&mut self, id: DecisionId, kind: Closed) {
        self.closed.insert(id, kind);
        while self.closed.len() > CLOSED {
            self.closed.pop_first();
        }
    }

    /// The views the tab line shows, in `Tab`'s order: a decision's, a
    /// message's or a run's only while one is open.
    pub fn tabs(&self) -> Vec<View> {
        View::ALL
            .into_iter()
            .filter(|view| match view {
                View::Decision => self.open.is_some(),
                View::Message => self.message.is_some(),
                View::Run => self.run.is_some(),
                View::Inbox | View::Agents | View::Trail | View::Activity | View::History => true,
            })
            .collect()
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

    /// How far the current view's scrolling pane (the inbox's detail, the
    /// question, the message) can scroll at the state's size: its drawn
    /// lines beyond its height, in the panes the layout gives the drawing.
    /// The state holds its scroll within it, so a key back up always moves
    /// the text.
    fn scroll_room(&self) -> usize {
        let body = layout::screen(self.size.0, self.size.1, self.offline).body;
        let words = self
            .open
            .as_ref()
            .map(|open| grant::raisers_words(&open.decision));
        let detail = self.detail().map(Detail::lines);
        let (text, pane): (Vec<&str>, _) = match self.view {
            View::Inbox => {
                let [_, detail] = layout::inbox(body);
                let text = match self.inbox.decisions.get(self.selected) {
                    Some(d) => d.question.iter().map(Shown::as_str).collect(),
                    None => self
                        .selected_message()
                        .map_or_else(Vec::new, |m| m.body.iter().map(Shown::as_str).collect()),
                };
                (text, detail)
            }
            View::Message => (
                self.message
                    .as_ref()
                    .map_or_else(Vec::new, |m| m.body.iter().map(Shown::as_str).collect()),
                body,
            ),
            View::Decision => match (&self.open, &words) {
                (Some(open), Some(words)) => {
                    let [_, _, question] = layout::decision(body, open.decision.options.len());
                    (words.iter().map(String::as_str).collect(), question)
                }
                (Some(_) | None, _) => (Vec::new(), body),
            },
            View::Trail | View::Activity => (
                detail
                    .as_ref()
                    .map_or_else(Vec::new, |d| d.iter().map(String::as_str).collect()),
                body,
            ),
            View::Agents | View::Run | View::History => (Vec::new(), body),
        };
        // The inbox's decision detail draws its options below the question.
        let extra = match (self.view, self.inbox.decisions.get(self.selected)) {
            (View::Inbox, Some(d)) => d.options.len() + 1,
            (View::Inbox | View::Message | View::Decision | View::Agents, _)
            | (View::Run | View::Trail | View::Activity | View::History, _) => 0,
        };
        let inner = layout::inner(pane);
        let lines = wrap(text, inner.width).len() + extra;
        lines.saturating_sub(usize::from(inner.height))
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
            self.reread_history();
        } else if !up {
            self.offline = true;
        }
    }

    /// A wait on `changes` ended with none: the runs are read again, since
    /// a process's exit is no change of the feed, and the Agents view and
    /// the grant area say whether each is alive.
    pub fn handle_quiet(&mut self) {
        if !self.offline {
            self.send(Request::Agents);
        }
    }

    /// What the harness agents are doing, as `up`'s activity feed last
    /// told it: it replaces what the view knew.
    pub fn handle_doing(&mut self, rows: Vec<Doing>) {
        self.doing = Some(rows);
        self.keep_selection_shown();
    }

    /// An order for `up` could not be written: `up` is gone or never
    /// gave this console its channel.
    pub fn handle_order_lost(&mut self) {
        self.status = "up could not be told: nothing was started".to_owned();
    }

    /// Each run's life, as `up`'s line last told it: it replaces what the
    /// view knew, and a run newly failed rings the bell.
    pub fn handle_lives(&mut self, lives: Vec<Life>) {
        self.lives = lives;
        self.ring_for_failures();
        self.keep_selection_shown();
    }

    /// Rings the bell, once per run, for each run that failed, and says
    /// which on the status line.
    fn ring_for_failures(&mut self) {
        let failed: Vec<(String, String)> = self
            .agents
            .iter()
            .filter(|a| self.run_failed(a))
            .map(|a| (a.who.run_raw.to_string(), a.who.to_string()))
            .chain(
                self.lives
                    .iter()
                    .filter(|l| l.failed)
                    .map(|l| (l.run.clone(), format!("{}/{}", l.role, Shown::of(&l.run)))),
            )
            .collect();
        for (run, who) in failed {
            if self.failed.insert(run) {
                self.effects.push_back(Effect::Bell);
                self.status = format!("the run {who} FAILED: the Agents view says why");
            }
        }
    }

    /// The trails on screen, read again.
    fn reread_trails(&mut self) {
        if let Some(open) = &self.open {
            let id = open.decision.id;
            self.send(Request::trail(&id));
        }
        if let Some((subject, _)) = &self.trail {
            if self.open.as_ref().map(|o| o.decision.id.to_string()) != Some(subject.clone()) {
                let subject = subject.clone();
                self.send(Request::Trail(subject));
            }
        }
    }
}

#[cfg(test)]
impl State {
    /// The same state showing `view`, as if the human had moved there: the
    /// screen tests draw every view of one state.
    pub(super) fn show(&mut self, view: View) {
        self.view = view;
    }
}
