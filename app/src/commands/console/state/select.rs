//! The selection: the row each list has selected, the inbox's by id
//! ([`Pick`]) so that it follows its row when rows arrive above it or
//! leave, how many rows each view lists, and the order `]` visits the
//! waiting decisions in.

use super::{Decision, DecisionId, DecisionState, Inbox, Message, MessageId, Request, State, View};

/// The inbox row the human reads, by its id: the selection follows it
/// when rows arrive above it or leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// A decision.
    Decision(DecisionId),
    /// A message.
    Message(MessageId),
}

impl State {
    /// The selected row of the current list.
    pub fn selected(&self) -> usize {
        self.selected
    }

    /// The decisions waiting on the human, blocking ones first, each
    /// group in the inbox's order (the broker's: oldest first), the order
    /// `]` visits them in.
    pub fn waiting(&self) -> Vec<&Decision> {
        let mut order: Vec<&Decision> = self.inbox.decisions.iter().collect();
        order.sort_by_key(|d| !d.blocking);
        order
    }

    /// What `]` does: open the decision after the open one in
    /// [`State::waiting`]'s order, wrapping to the first; the first when
    /// none is open or the open one no longer waits. Past the last one
    /// listed, when the inbox left decisions out, the broker is asked for
    /// the one after it ([`Request::Beyond`]), so every waiting decision
    /// is reached whatever the flood.
    pub(super) fn next_waiting(&mut self) {
        let order = self.waiting();
        let open = self
            .open
            .as_ref()
            .filter(|o| o.state == DecisionState::Waiting)
            .map(|o| o.decision.id);
        let at = open.and_then(|id| order.iter().position(|d| d.id == id));
        let next = match (open, at) {
            (Some(_), Some(at)) => order.get(at + 1),
            (Some(_), None) | (None, _) if self.inbox.left == 0 => order.first(),
            // The open decision lies beyond the listed ones.
            (Some(_), None) => None,
            (None, _) => order.first(),
        }
        .map(|d| (*d).clone());
        let beyond = open.filter(|_| self.inbox.left > 0);
        match (next, beyond) {
            (Some(decision), _) => self.open_decision(decision),
            (None, Some(after)) => self.send(Request::Beyond(after)),
            (None, None) => self.on_beyond(Vec::new()),
        }
    }

    /// The waiting decisions after the one `]` stood on, as the broker
    /// listed them: the first is opened; none (or that one closed), and
    /// `]` wraps to the first listed.
    pub(super) fn on_beyond(&mut self, page: Vec<Decision>) {
        let first = page
            .into_iter()
            .next()
            .or_else(|| self.waiting().first().map(|d| (*d).clone()));
        let open = self
            .open
            .as_ref()
            .filter(|o| o.state == DecisionState::Waiting)
            .map(|o| o.decision.id);
        match first {
            Some(decision) if Some(decision.id) != open => self.open_decision(decision),
            Some(_) | None => self.status = "nothing else is waiting on you".to_owned(),
        }
    }

    /// The inbox's row `row`, by id.
    fn pick_at(&self, row: usize) -> Option<Pick> {
        match self.inbox.decisions.get(row) {
            Some(d) => Some(Pick::Decision(d.id)),
            None => row
                .checked_sub(self.inbox.decisions.len())
                .and_then(|i| self.inbox.messages.get(i))
                .map(|m| Pick::Message(m.id)),
        }
    }

    /// The row of the inbox that holds `pick`, if it still does.
    pub(super) fn row_of(&self, pick: Pick) -> Option<usize> {
        match pick {
            Pick::Decision(id) => self.inbox.decisions.iter().position(|d| d.id == id),
            Pick::Message(id) => self
                .inbox
                .messages
                .iter()
                .position(|m| m.id == id)
                .map(|i| i + self.inbox.decisions.len()),
        }
    }

    /// The inbox's selected row, by id.
    pub fn picked(&self) -> Option<Pick> {
        self.picked
    }

    /// Shows `view`, its selection at its top; the inbox's at the row it
    /// was reading, found by id.
    pub(super) fn go(&mut self, view: View) {
        self.view = view;
        self.scroll = 0;
        self.selected = match view {
            View::Inbox => self.picked.and_then(|p| self.row_of(p)).unwrap_or(0),
            View::Decision
            | View::Message
            | View::Agents
            | View::Run
            | View::Trail
            | View::Activity
            | View::History => 0,
        };
        if view == View::Inbox {
            self.picked = self.pick_at(self.selected);
        }
        self.detail = None;
        self.keep_selection_shown();
    }

    /// Moves the current list's selection to `row`.
    pub(super) fn select(&mut self, row: usize) {
        self.selected = row;
        self.scroll = 0;
        if self.view == View::Inbox {
            self.picked = self.pick_at(row);
        }
    }

    /// After a new inbox (`old` the one before): the selection stays on
    /// the row it was reading, wherever that row now is, and the status
    /// line says what changed under it: new decisions above it, or the
    /// row gone and how.
    pub(super) fn follow_pick(&mut self, old: &Inbox) {
        let before = self.picked;
        let Some(pick) = before else {
            if self.view == View::Inbox {
                self.select(self.selected.min(self.rows().saturating_sub(1)));
            }
            return;
        };
        match self.row_of(pick) {
            Some(row) => {
                let above = self.inbox.decisions[..row.min(self.inbox.decisions.len())]
                    .iter()
                    .filter(|d| old.decisions.iter().all(|o| o.id != d.id))
                    .count();
                if above > 0 {
                    let s = if above == 1 { "" } else { "s" };
                    self.status = format!(
                        "{above} new decision{s} above the one you are reading: the selection \
                         stays on it"
                    );
                }
                if self.view == View::Inbox {
                    self.selected = row;
                }
            }
            None => {
                if self.mine != Some(pick) {
                    self.status = self.gone_words(pick, old);
                }
                let row = old
                    .decisions
                    .iter()
                    .position(|d| Pick::Decision(d.id) == pick)
                    .or_else(|| {
                        old.messages
                            .iter()
                            .position(|m| Pick::Message(m.id) == pick)
                            .map(|i| i + self.inbox.decisions.len())
                    })
                    .unwrap_or(0);
                let row = row.min(self.inbox_rows().saturating_sub(1));
                self.picked = self.pick_at(row);
                if self.view == View::Inbox {
                    self.selected = row;
                    self.scroll = 0;
                }
            }
        }
    }

    /// How many rows the inbox lists.
    fn inbox_rows(&self) -> usize {
        self.inbox.decisions.len() + self.inbox.messages.len()
    }

    /// What happened to `pick`, which left the inbox (`old` held it).
    fn gone_words(&self, pick: Pick, old: &Inbox) -> String {
        match pick {
            Pick::Decision(id) => {
                let who = old
                    .decisions
                    .iter()
                    .find(|d| d.id == id)
                    .map(|d| format!(" (from {}: {})", d.raiser, d.grant.action))
                    .unwrap_or_default();
                format!(
                    "the decision you were reading{who} was {}",
                    self.how_closed(id)
                )
            }
            Pick::Message(_) => "the message you were reading was marked read".to_owned(),
        }
    }

    /// How many rows the current view lists.
    pub fn rows(&self) -> usize {
        match self.view {
            View::Inbox => self.inbox_rows(),
            View::Decision | View::Message => 0,
            View::Agents => self.agents.len(),
            View::Run => self.run_open().map_or(0, |r| r.waits.len()),
            View::Trail => self.trail.as_ref().map_or(0, |(_, t)| t.len()),
            View::Activity => self.activity.len(),
            View::History => self.history.as_ref().map_or(0, |h| h.rows.len()),
        }
    }

    /// The inbox's selected message, if a message is selected.
    pub(super) fn selected_message(&self) -> Option<&Message> {
        self.selected
            .checked_sub(self.inbox.decisions.len())
            .and_then(|i| self.inbox.messages.get(i))
    }
}
