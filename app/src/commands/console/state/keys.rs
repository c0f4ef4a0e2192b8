//! The human's keys: in a view (a row opened whole among them), in the
//! decision view, and in the bottom line's prompts (a confirmation, or
//! the one-line editor of a note, a role, a body, a subject or a filter).

use super::super::act::{typed, Typed};
use super::super::detail::{Detail, Opens};
use super::super::model::Shown;
use super::{
    Act, Decision, DecisionState, Effect, Key, MessageId, Need, Open, Pick, Prompt, Request, State,
    View,
};

impl State {
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
                        | Act::Launch { .. }
                        | Act::End { .. }
                        | Act::Start { .. }
                        | Act::ReadAll { .. }) => Prompt::Confirm(other),
                    },
                    Typed::Cancelled => Prompt::Confirm(act),
                }
            }
            Prompt::Role(role) => {
                self.prompt = match typed(key, role) {
                    Typed::Editing(role) => Prompt::Role(role),
                    Typed::Done(role) if role == "human" => {
                        self.status =
                            "\"human\" is you: m sends to an agent's role; nothing was sent"
                                .to_owned();
                        Prompt::None
                    }
                    Typed::Done(role) if !role.is_empty() => Prompt::Body(role, String::new()),
                    Typed::Done(_) | Typed::Cancelled => Prompt::None,
                }
            }
            Prompt::Body(to, body) => {
                self.prompt = match typed(key, body) {
                    Typed::Editing(body) => Prompt::Body(to, body),
                    Typed::Done(body) if !body.is_empty() => {
                        let held = self
                            .agents
                            .iter()
                            .any(|a| a.who.role.as_str() == to && a.holding && a.ended.is_none());
                        Prompt::Confirm(Act::Message { to, body, held })
                    }
                    Typed::Done(_) | Typed::Cancelled => Prompt::None,
                }
            }
            Prompt::Subject(subject) => match typed(key, subject) {
                Typed::Editing(subject) => self.prompt = Prompt::Subject(subject),
                Typed::Done(subject) if !subject.is_empty() => {
                    self.detail = None;
                    self.trail = Some((subject.clone(), Vec::new()));
                    self.selected = 0;
                    self.send(Request::Trail(subject));
                }
                Typed::Done(_) | Typed::Cancelled => {}
            },
            Prompt::Filter(text) => self.key_in_filter(key, text),
        }
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

    pub(super) fn open_decision(&mut self, decision: Decision) {
        let id = decision.id;
        // Opened again, a decision keeps what is known of it: one whose act
        // may have happened keeps its keys off.
        let state = match &self.open {
            Some(open) if open.decision.id == id => open.state.clone(),
            Some(_) | None => DecisionState::Waiting,
        };
        self.open = Some(Open {
            decision,
            chosen: None,
            state,
        });
        self.view = View::Decision;
        self.selected = 0;
        self.scroll = 0;
        // Back in the inbox, the selection is on the decision last opened.
        if self.row_of(Pick::Decision(id)).is_some() {
            self.picked = Some(Pick::Decision(id));
        }
        self.send(Request::trail(&id));
        // Whether its raiser still runs, as of now: a process's exit is no
        // change of the feed.
        self.send(Request::Agents);
    }

    /// Whether the open decision still takes keys.
    fn live(&self) -> Option<&Open> {
        self.open
            .as_ref()
            .filter(|o| o.state == DecisionState::Waiting)
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
                if let Act::ReadAll { .. } = act {
                    self.read_all = Some(0);
                    self.read_page();
                    return;
                }
                if let Act::Start { run, who } = act {
                    self.status = format!("asked up to start the agent of {who} again");
                    self.effects.push_back(Effect::Order(run));
                    return;
                }
                match act.request() {
                    Some(request) => {
                        self.status = format!("sending {}…", request.verb());
                        self.send(request);
                    }
                    None => self.status = "no such option: nothing was sent".to_owned(),
                }
            }
            Key::Char('e') if matches!(act, Act::Resolve { .. }) => {
                let note = match &act {
                    Act::Resolve { note, .. } => note.clone(),
                    Act::Seen { .. }
                    | Act::Withdraw { .. }
                    | Act::Message { .. }
                    | Act::Launch { .. }
                    | Act::End { .. }
                    | Act::Start { .. }
                    | Act::ReadAll { .. } => String::new(),
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
        matches!(self.view, View::Decision | View::Message) || self.detail().is_some()
    }

    fn key_in_view(&mut self, key: Key) {
        let on_row = matches!(key, Key::Enter | Key::Char('x' | 'S' | 'r' | 'R'));
        if on_row && self.detail().is_none() && self.selection_hidden() {
            self.status = "the filter shows no row: Esc clears it".to_owned();
            return;
        }
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
                self.step(true);
                if self.view == View::History {
                    self.page_history();
                }
            }
            Key::Char('k') | Key::Up => self.step(false),
            Key::PageDown => {
                self.scroll = (self.scroll + 10).min(self.scroll_room());
            }
            Key::PageUp => self.scroll = self.scroll.saturating_sub(10),
            Key::Tab => {
                let tabs = self.tabs();
                let at = tabs.iter().position(|v| *v == self.view).unwrap_or(0);
                let next = tabs[(at + 1) % tabs.len()];
                self.go(next);
                if next == View::Agents {
                    // Which runs exited, as of now (no change says so).
                    self.send(Request::Agents);
                }
                if next == View::History {
                    self.open_history();
                }
            }
            Key::Esc if self.detail().is_some() => {
                // Back to the list, on the row it opened.
                self.detail = None;
                self.scroll = 0;
            }
            Key::Esc if self.filter().is_some() => {
                self.set_filter(String::new());
                self.status = "the filter was cleared: the whole list shows".to_owned();
            }
            Key::Esc => self.go(View::Inbox),
            Key::Char('/') if self.detail().is_none() => self.start_filter(),
            Key::Char(']') => self.next_waiting(),
            Key::Char('m') => self.prompt = Prompt::Role(String::new()),
            Key::Char('R') if matches!(self.view, View::Inbox | View::Message) => self.reply(),
            Key::Char('L') => {
                self.prompt = Prompt::Confirm(Act::Launch {
                    off: self.launching != Some(false),
                });
            }
            Key::Char('t') if self.view == View::Trail => {
                self.prompt = Prompt::Subject(String::new());
            }
            Key::Enter if self.view == View::Inbox => self.open_selected(),
            Key::Enter if self.view == View::Agents => {
                if let Some(run) = self.agents.get(self.selected) {
                    self.run = Some(run.who.run_raw.clone());
                    self.go(View::Run);
                    self.send(Request::Agents);
                }
            }
            Key::Enter if self.view == View::Run => self.open_wait(),
            Key::Enter if self.view == View::History => self.open_past(),
            Key::Enter if self.view == View::Message => {
                match self.message.as_ref().and_then(|m| m.cites) {
                    Some(id) => self.open_or_trail(id),
                    None => self.status = "this message cites no decision".to_owned(),
                }
            }
            Key::Enter if self.detail().is_some() => self.open_from_detail(),
            Key::Enter if self.view == View::Trail => {
                if let Some((subject, records)) = &self.trail {
                    if let Some(record) = records.get(self.selected) {
                        self.detail = Some(Detail::Record {
                            subject: Shown::of(subject),
                            record: Box::new(record.clone()),
                        });
                        self.scroll = 0;
                    }
                }
            }
            Key::Enter if self.view == View::Activity => {
                // The Activity view lists the newest change first.
                let change = self
                    .activity
                    .len()
                    .checked_sub(self.selected + 1)
                    .and_then(|i| self.activity.get(i));
                if let Some(change) = change {
                    self.detail = Some(Detail::Change(change.clone()));
                    self.scroll = 0;
                }
            }
            Key::Char('x') if matches!(self.view, View::Agents | View::Run) => self.ask_end(),
            Key::Char('S') if matches!(self.view, View::Agents | View::Run) => self.ask_start(),
            Key::Char('r') if matches!(self.view, View::Inbox | View::Message) => {
                self.mark_read();
            }
            Key::Char('A') if self.view == View::Inbox => self.ask_read_all(),
            Key::Char(_) | Key::Enter | Key::Backspace if self.view == View::Decision => {
                self.key_in_decision(key);
            }
            Key::Char(_) | Key::Enter | Key::Backspace => {}
        }
    }

    /// `Enter` in the inbox: the selected decision or message, opened.
    fn open_selected(&mut self) {
        if let Some(decision) = self.inbox.decisions.get(self.selected).cloned() {
            self.open_decision(decision);
        } else if let Some(message) = self.selected_message().cloned() {
            self.open_message(message);
        }
    }

    /// The message view on `message`, read whole from its trail when the
    /// inbox cut it.
    fn open_message(&mut self, message: super::Message) {
        if message.cut {
            self.send(Request::trail(&message.id));
        }
        self.message = Some(message);
        self.view = View::Message;
        self.scroll = 0;
    }

    /// `Enter` in a row opened whole: the decision or message it names,
    /// opened as the inbox opens one; else its trail.
    fn open_from_detail(&mut self) {
        match self.detail().and_then(Detail::opens) {
            Some(Opens::Decision(id)) => self.open_or_trail(id),
            Some(Opens::Message(id)) => {
                match self.inbox.messages.iter().find(|m| m.id == id).cloned() {
                    Some(message) => self.open_message(message),
                    None => {
                        self.trail = Some((id.to_string(), Vec::new()));
                        self.go(View::Trail);
                        self.send(Request::trail(&id));
                    }
                }
            }
            None => {}
        }
    }

    /// The run `x` and `S` act on: the Agents view's selected one, or the
    /// run view's.
    fn acted_run(&self) -> Option<&super::Run> {
        match self.view {
            View::Run => self.run_open(),
            View::Agents => self.agents.get(self.selected),
            View::Inbox
            | View::Decision
            | View::Message
            | View::Trail
            | View::Activity
            | View::History => None,
        }
    }

    /// `x`: asks to end the run, naming its role and run.
    fn ask_end(&mut self) {
        let Some(run) = self.acted_run() else {
            self.status = "x ends a run: select one first".to_owned();
            return;
        };
        if run.ended.is_some() {
            self.status = format!("the run {} has ended already", run.who);
            return;
        }
        self.prompt = Prompt::Confirm(Act::End {
            run: run.who.run_raw.clone(),
            who: run.who.to_string(),
        });
    }

    /// `S`: asks to start the agent of an ended run again, which only
    /// `up --console` can.
    fn ask_start(&mut self) {
        let Some(run) = self.acted_run() else {
            self.status = "S starts an ended agent again: select one first".to_owned();
            return;
        };
        let ended = run.ended.is_some()
            || self
                .life_of(run.who.run_raw.as_str())
                .is_some_and(|l| l.ended);
        let act = Act::Start {
            run: run.who.run_raw.clone(),
            who: run.who.to_string(),
        };
        if !self.orders {
            self.status =
                "S works under up --console only: this console was not started by up".to_owned();
        } else if !ended {
            self.status = format!("the run {} still runs: x ends it", run.who);
        } else {
            self.prompt = Prompt::Confirm(act);
        }
    }

    /// `Enter` in the run view: the decision the run waits on, opened; one
    /// routed to another role shows its trail.
    fn open_wait(&mut self) {
        let Some(id) = self
            .run_open()
            .and_then(|r| r.waits.get(self.selected))
            .map(|w| w.id)
        else {
            return;
        };
        self.open_or_trail(id);
    }

    /// Decision `id` opened when it waits on the human; else its trail.
    fn open_or_trail(&mut self, id: mosaic_domain::DecisionId) {
        match self.inbox.decisions.iter().find(|d| d.id == id).cloned() {
            Some(decision) => self.open_decision(decision),
            None => self.show_trail(id),
        }
    }

    /// The trail view, with decision `id`'s trail asked for.
    pub(super) fn show_trail(&mut self, id: mosaic_domain::DecisionId) {
        self.trail = Some((id.to_string(), Vec::new()));
        self.go(View::Trail);
        self.send(Request::trail(&id));
    }

    /// `R`: a reply to the open message's (or the inbox's selected
    /// message's) sender, typed as `m`'s body.
    fn reply(&mut self) {
        let message = match self.view {
            View::Message => self.message.as_ref(),
            View::Inbox
            | View::Decision
            | View::Agents
            | View::Run
            | View::Trail
            | View::Activity
            | View::History => self.selected_message(),
        };
        match message.map(|m| m.from_role.clone()) {
            Some(Some(role)) => self.prompt = Prompt::Body(role, String::new()),
            Some(None) => self.status = "this message has no agent to reply to".to_owned(),
            None => self.status = "R replies to a message: select one first".to_owned(),
        }
    }

    /// `A`: asks to mark every unread message read, naming how many.
    fn ask_read_all(&mut self) {
        let count = u64::try_from(self.inbox.messages.len())
            .unwrap_or(u64::MAX)
            .saturating_add(self.inbox.more);
        if count == 0 {
            self.status = "no message is unread".to_owned();
            return;
        }
        self.prompt = Prompt::Confirm(Act::ReadAll { count });
    }

    /// Sends `message.read` for each message the inbox lists now; the
    /// inbox is read again once every one is answered, and the next page
    /// follows from there.
    pub(super) fn read_page(&mut self) {
        let ids: Vec<MessageId> = self.inbox.messages.iter().map(|m| m.id).collect();
        if ids.is_empty() {
            let done = self.read_all.take().unwrap_or(0);
            self.status = format!("marked {done} messages read");
            return;
        }
        self.reading = ids.len();
        for id in ids {
            self.send(Request::Read(id));
        }
    }

    /// `r`: the open message, or the inbox's selected one, marked read.
    fn mark_read(&mut self) {
        let id = match self.view {
            View::Message => self.message.as_ref().map(|m| m.id),
            View::Inbox
            | View::Decision
            | View::Agents
            | View::Run
            | View::Trail
            | View::Activity
            | View::History => self.selected_message().map(|m| m.id),
        };
        match id {
            Some(_) if self.offline => {
                self.status = "the broker cannot be reached: nothing was sent".to_owned();
            }
            Some(id) => self.send(Request::Read(id)),
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
        let id = open.decision.id;
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
}
