//! What the broker's answers and the human's changes do to the state: each
//! answer arrives decoded ([`Reply`]) beside the request it answers, so
//! what it does is one arm of [`State::handle_reply`]'s match.

use mosaic_domain::evidence::EvidenceKind;
use mosaic_domain::{DecisionId, MessageId, Refusal};

use super::{
    Change, Closed, Decision, DecisionState, Effect, Inbox, Notice, Pick, Reply, Request, Run,
    Shown, State,
};
use super::{View, ACTIVITY};
use crate::commands::console::model::Kind;
use crate::commands::console::trail::Trail;

impl State {
    /// The human's new changes, from one page of `changes`, or the
    /// refusal `bad-response` for a page that was not one.
    pub fn handle_change(&mut self, changes: Result<Vec<Change>, Refusal>) {
        let changes = match changes {
            Ok(changes) if changes.is_empty() => return,
            Ok(changes) => changes,
            Err(refusal) => {
                self.status = format!(
                    "{}: {} (the changes you wait on)",
                    refusal.code(),
                    refusal.meaning()
                );
                return;
            }
        };
        let mut closed_any = false;
        for change in changes {
            if change.kind.is(EvidenceKind::LaunchRevoked) {
                self.launching = Some(false);
            }
            if change.kind.is(EvidenceKind::LaunchRestored) {
                self.launching = Some(true);
            }
            let closes = match (&change.kind, change.decision) {
                (Kind::Known(kind), Some(id)) => Closed::of(*kind).inspect(|how| {
                    self.remember_closed(id, *how);
                }),
                (Kind::Known(_) | Kind::Other(_), _) => None,
            }
            .is_some();
            if let Some(open) = self.open.as_mut() {
                if closes && change.decision == Some(open.decision.id) {
                    open.state = DecisionState::Gone;
                    let id = open.decision.id;
                    self.clear_prompt_of(id);
                }
            }
            self.activity.push(change);
            closed_any |= closes;
        }
        if self.activity.len() > ACTIVITY {
            let extra = self.activity.len() - ACTIVITY;
            self.activity.drain(..extra);
        }
        self.refresh();
        self.reread_trails();
        if closed_any {
            self.reread_history();
        }
        self.keep_selection_shown();
    }

    /// The broker's answer to `request`, sent for an [`Effect::Send`],
    /// decoded ([`Request::decode`]).
    pub fn handle_reply(&mut self, request: &Request, reply: Result<Reply, Refusal>) {
        let reply = match reply {
            Ok(reply) => reply,
            Err(refusal) => return self.refused(request, refusal),
        };
        // An answer is the broker reached again.
        self.handle_link(true);
        match (request, reply) {
            (_, Reply::Inbox(inbox)) => self.on_inbox(inbox),
            (_, Reply::Beyond(page)) => self.on_beyond(page),
            (_, Reply::Agents(runs)) => self.on_agents(runs),
            (_, Reply::Trail(subject, trail)) => self.on_trail(&subject, &trail),
            (_, Reply::History(before, page)) => self.on_history(before, page),
            (_, Reply::Head(head)) => self.head = Some(head),
            (_, Reply::Resolved(choice)) => {
                self.status = format!("resolved with {choice}");
                self.closed_by_me(request.decision());
            }
            (Request::Seen(_), Reply::Done) => self.status = "marked seen".to_owned(),
            (Request::Withdraw(id), Reply::Done) => {
                self.status = "withdrawn".to_owned();
                self.closed_by_me(Some(*id));
            }
            (Request::Send { .. }, Reply::Done) => self.status = "message sent".to_owned(),
            (Request::Read(_), Reply::Done) if self.read_all.is_some() => self.on_read_of_all(),
            (Request::Read(id), Reply::Done) => self.on_read(*id),
            (Request::EndRun(_), Reply::Done) => {
                self.status = "the run is ended: its program is being stopped".to_owned();
                self.send(Request::Agents);
            }
            (Request::Launch { off }, Reply::Done) => {
                self.launching = Some(!off);
                self.status = if *off {
                    "launching is off"
                } else {
                    "launching is on"
                }
                .to_owned();
            }
            // Each request decodes to its own reply; these pairs are never
            // made (the other replies carry what they answer).
            (
                Request::Inbox
                | Request::Beyond(_)
                | Request::Agents
                | Request::Head
                | Request::Trail(_)
                | Request::History { .. }
                | Request::Resolve { .. },
                Reply::Done,
            ) => {}
        }
        self.keep_selection_shown();
    }

    fn on_agents(&mut self, runs: Vec<Run>) {
        self.agents = runs;
        // Every row carries the business's switch, as the broker knows it
        // now.
        if let Some(run) = self.agents.first() {
            self.launching = Some(run.launching);
        }
        self.ring_for_failures();
    }

    fn on_read(&mut self, id: MessageId) {
        self.mine = Some(Pick::Message(id));
        self.status = "marked read".to_owned();
        if self.message.as_ref().map(|m| m.id) == Some(id) {
            self.message = None;
            if self.view == View::Message {
                self.view = View::Inbox;
                self.scroll = 0;
            }
        }
        self.send(Request::Inbox);
    }

    /// One read of a page of "every message" answered: the inbox is read
    /// again once the whole page is.
    fn on_read_of_all(&mut self) {
        let done = self.read_all.get_or_insert(0);
        *done += 1;
        let done = *done;
        self.reading = self.reading.saturating_sub(1);
        self.status = format!("marking every message read: {done} so far");
        if self.reading == 0 {
            self.send(Request::Inbox);
        }
    }

    /// The open decision was closed by the human's own act.
    fn closed_by_me(&mut self, id: Option<DecisionId>) {
        self.mine = id.map(Pick::Decision);
        if let Some(open) = self.open.as_mut() {
            if id == Some(open.decision.id) {
                open.state = DecisionState::Gone;
            }
        }
    }

    fn refused(&mut self, request: &Request, refusal: Refusal) {
        let verb = request.verb();
        self.status = format!("{}: {}", refusal.code(), refusal.meaning());
        // A next page refused may be asked again from the last row.
        if let (Request::History { before: Some(_) }, Some(history)) =
            (request, self.history.as_mut())
        {
            history.asking = None;
        }
        // Marking every message read stops at the first refusal.
        if matches!(request, Request::Read(_)) {
            if let Some(done) = self.read_all.take() {
                self.reading = 0;
                self.status = format!(
                    "{}: {}; {done} marked read, the rest left unread",
                    refusal.code(),
                    refusal.meaning()
                );
            }
        }
        // The decision `]` stood on closed meanwhile, or is none of the
        // human's (opened from a message citing it): `]` starts again at
        // the first.
        if matches!(request, Request::Beyond(_))
            && matches!(refusal, Refusal::DecisionClosed | Refusal::UnknownReference)
        {
            return self.on_beyond(Vec::new());
        }
        if refusal == Refusal::BrokerUnavailable {
            self.offline = true;
            self.status = format!("the broker cannot be reached: {verb} was not sent");
            return;
        }
        if refusal != Refusal::OutcomeUnknown {
            return;
        }
        self.status = format!(
            "outcome-unknown: {verb} may have happened; its trail is shown, and nothing is resent"
        );
        if let Some(id) = request.decision() {
            if let Some(open) = self.open.as_mut() {
                if open.decision.id == id {
                    open.state = DecisionState::Unknown;
                }
            }
            self.view = View::Trail;
            self.selected = 0;
            self.trail = Some((id.to_string(), Vec::new()));
            self.send(Request::trail(&id));
        }
    }

    fn on_inbox(&mut self, mut inbox: Inbox) {
        for decision in &mut inbox.decisions {
            decision.raised_ms = self
                .inbox
                .decisions
                .iter()
                .find(|d| d.id == decision.id)
                .and_then(|d| d.raised_ms);
        }
        inbox.keep_whole(&self.inbox);
        let old = std::mem::replace(&mut self.inbox, inbox);
        let fresh: Vec<Decision> = self
            .inbox
            .decisions
            .iter()
            .filter(|d| !self.seen.contains(&d.id))
            .cloned()
            .collect();
        for decision in &fresh {
            self.seen.insert(decision.id);
            self.send(Request::trail(&decision.id));
            if self.loaded {
                self.effects.push_back(Effect::Bell);
                self.effects.push_back(Effect::Notify(Notice {
                    decision: decision.id.to_string(),
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
                // Absent from an inbox that left decisions out, it may
                // still wait beyond them: its close is a change.
                None if self.inbox.left > 0 => {}
                None => {
                    if open.state == DecisionState::Waiting {
                        open.state = DecisionState::Gone;
                        let id = open.decision.id;
                        self.clear_prompt_of(id);
                    }
                }
            }
        }
        self.follow_pick(&old);
        if self.read_all.is_some() && self.reading == 0 {
            self.read_page();
        }
    }

    fn on_trail(&mut self, subject: &str, trail: &Trail) {
        trail.fill_inbox(subject, &mut self.inbox);
        if let Some(m) = self.message.as_mut() {
            trail.fill_message(subject, m);
        }
        let raised = trail
            .records
            .iter()
            .find(|r| r.kind.is(EvidenceKind::DecisionRaised))
            .and_then(|r| r.at_ms);
        for decision in &mut self.inbox.decisions {
            if decision.id.to_string() == subject && raised.is_some() {
                decision.raised_ms = raised;
            }
        }
        let shows = |s: &str| {
            self.open
                .as_ref()
                .is_some_and(|o| o.decision.id.to_string() == s)
                || self.trail.as_ref().is_some_and(|(t, _)| t == s)
        };
        if !shows(subject) {
            return;
        }
        if let Some(open) = self.open.as_mut() {
            if open.decision.id.to_string() == subject {
                trail.fill_decision(subject, &mut open.decision);
                open.decision.raised_ms = raised.or(open.decision.raised_ms);
            }
        }
        let replace =
            self.trail.as_ref().is_none_or(|(t, _)| t == subject) || self.view != View::Trail;
        if replace {
            self.trail = Some((subject.to_owned(), trail.records.clone()));
        }
    }
}
