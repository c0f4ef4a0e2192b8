//! The bus: the persistent machines composed into the broker's verbs.
//!
//! [`Bus::handle`] takes one verb from one caller. It checks who may use the
//! verb, drives the machines it needs, and stamps the evidence they queue with
//! the broker clock. A refusal anywhere undoes whatever the verb had staged,
//! so a verb is all-or-nothing before the store even sees it. The runtime then
//! drains [`Bus::poll_effect`] into one transaction and answers the caller
//! only after [`Bus::handle_committed`]; a failed commit calls
//! [`Bus::handle_rolled_back`], which restores every machine and the clock.
//!
//! Facts that live only in the store (messages) arrive already read, inside
//! the [`Command`]; the bus never asks for them.
//!
//! A run that ended is refused every verb ([`Claims::check_live`]); the
//! bus ends runs for the host ([`Bus::handle_end`]), for the human's
//! `run.end` and for a revoke.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::authority::{Ask, Authorizations, Grant};
pub use crate::caller::Caller;
use crate::claims::{BindReply, ClaimReply, Claims, Launches};
pub use crate::command::{BodyField, Command, EventBody, SendInput, TASK_CREATED};
use crate::decisions::{Decision, Decisions};
use crate::ending::{EndCause, Ending};
use crate::evidence::{
    AgentRef, ClaimEvidence, DecisionActor, Evidence, HumanInput, LaunchRecord, MessageEvidence,
    MessageRecord, Observation, Recipient, RefusalCount, RefusalRecord, Stamped, Subject,
};
use crate::journal::Mark;
use crate::messages::{self, MessageFacts};
use crate::verb::{CallerKind, Verb};
use crate::{
    Action, ActionClass, BrokerClock, Business, BusinessId, EventId, MessageId, Refusal, RunId,
    Target, Timestamp,
};

/// A refusal's record is made here, beside [`Bus::handle_refusal`] and the
/// runtime's driver, its callers: it needs the [`Caller`], which the
/// evidence does not.
impl RefusalRecord {
    /// The record of `refusal`, answered to `caller` (none: a caller not
    /// known, such as a failed human proof) for `verb`.
    pub fn of(caller: Option<&Caller>, verb: Option<&str>, refusal: Refusal) -> Self {
        let agent = match caller {
            Some(Caller::Agent { agent, .. }) => Some(agent.clone()),
            Some(Caller::Reader { .. } | Caller::Human { .. }) | None => None,
        };
        RefusalRecord {
            business: caller.map(|c| c.business().clone()),
            agent,
            verb: verb.map(str::to_owned),
            refusal,
        }
    }
}

/// What an accepted verb answers (sent only after the commit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `role.claim`.
    Claimed(ClaimReply),
    /// `role.release`, `role.revoke`, `message.read`, `event.emit`,
    /// `record_event`, and the launch switch.
    Done,
    /// The decision after a decision verb.
    Decision(Box<Decision>),
    /// `message.send`: the new id and the originating human input, if any.
    Sent {
        /// The message id.
        id: MessageId,
        /// The human input the message carries (a human instruction's own).
        request: Option<EventId>,
    },
    /// `message.receive`: the messages now delivered.
    Received(Vec<MessageRecord>),
    /// `authorize`.
    Authorized(Grant),
}

/// Who sends a message, with what the bus needs to record it.
enum Sender {
    Agent(AgentRef),
    /// The human, with this request's `human.input` id.
    Human(EventId),
}

/// The event kinds a trusted adapter may not record: only the human CLI
/// produces human input and launch control, only the host binds launches,
/// only the bus's own verbs speak for its machines, and only the broker
/// records what a browser request came to.
const RESERVED_KIND_PREFIXES: [&str; 7] = [
    "human.",
    "launch.",
    "session.",
    "role.",
    "decision.",
    "message.",
    "browser.",
];

/// The kind of [`Command::RecordBrowserOutcome`]'s observation.
pub const BROWSER_COMPLETED: &str = "browser.completed";

/// A savepoint across all machines, the outbox and the clock.
#[derive(Debug, Clone)]
pub struct BusMark {
    launches: (Mark, Mark),
    claims: (Mark, Mark),
    decisions: Mark,
    authorizations: Mark,
    outbox: usize,
    clock: BrokerClock,
}

/// The composed broker core. Equality compares every machine, the clock and
/// the queues, so tests can check that a rebuild or a rollback is exact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bus {
    businesses: BTreeMap<BusinessId, Arc<Business>>,
    launches: Launches,
    claims: Claims,
    decisions: Decisions,
    authorizations: Authorizations,
    clock: BrokerClock,
    committed_clock: BrokerClock,
    /// Evidence the current verb staged, in order, not yet stamped.
    pending: Vec<Evidence>,
    /// Stamped evidence of accepted verbs, waiting for the runtime's commit.
    outbox: VecDeque<Stamped>,
}

impl Bus {
    /// A bus over these businesses, resuming the clock after `last_write`.
    /// Replay stored evidence with [`Bus::replay`] before handling verbs.
    pub fn new(
        businesses: impl IntoIterator<Item = Business>,
        last_write: Option<Timestamp>,
    ) -> Self {
        let clock = BrokerClock::resume(last_write);
        Self {
            businesses: businesses
                .into_iter()
                .map(|b| (b.id().clone(), Arc::new(b)))
                .collect(),
            launches: Launches::default(),
            claims: Claims::default(),
            decisions: Decisions::default(),
            authorizations: Authorizations::default(),
            committed_clock: clock.clone(),
            clock,
            pending: Vec::new(),
            outbox: VecDeque::new(),
        }
    }

    /// Applies one stored record, as committed. Evidence that is not machine
    /// state is ignored.
    pub fn replay(&mut self, record: &Stamped) {
        self.apply(&record.evidence);
        self.note_stamped(record);
        self.launches.handle_committed();
        self.claims.handle_committed();
        self.decisions.handle_committed();
        self.authorizations.handle_committed();
    }

    fn apply(&mut self, evidence: &Evidence) {
        match evidence {
            Evidence::Launch(e) => self.launches.apply(e),
            Evidence::Claim(e) => self.claims.apply(e),
            Evidence::Decision(e) => self.decisions.apply(e),
            Evidence::Consumed(c) => self.authorizations.apply(c),
            Evidence::Allowed(_)
            | Evidence::Message(_)
            | Evidence::Human(_)
            | Evidence::Observed(_)
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => {}
        }
    }

    /// The business, if configured.
    pub fn business(&self, id: &BusinessId) -> Option<&Business> {
        self.businesses.get(id).map(|b| &**b)
    }

    /// The launch bindings.
    pub fn launches(&self) -> &Launches {
        &self.launches
    }

    /// The role claims.
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// The decisions.
    pub fn decisions(&self) -> &Decisions {
        &self.decisions
    }

    /// The spent approvals.
    pub fn authorizations(&self) -> &Authorizations {
        &self.authorizations
    }

    /// Ends `run` for the host that ran it (`endRun`, or `up` in process),
    /// or for the boot that found its process gone: records
    /// `session.ended`, which frees the role the run held.
    ///
    /// # Errors
    /// `bad-request` for the causes only the broker records (`human`,
    /// `revoked`); `unknown-reference` for a run never bound; `run-ended`
    /// for a run that ended already.
    pub fn handle_end(
        &mut self,
        now: Timestamp,
        run: &RunId,
        ending: Ending,
    ) -> Result<(), Refusal> {
        let mark = self.mark();
        let result = self.end_for_host(run, ending);
        self.drain();
        self.settle(now, mark, result)
    }

    fn end_for_host(&mut self, run: &RunId, ending: Ending) -> Result<(), Refusal> {
        match ending.cause() {
            EndCause::Exited | EndCause::Failed | EndCause::Budget | EndCause::ProcessGone => {}
            // The human's word and a revoke are recorded by their own verbs.
            EndCause::Human | EndCause::Revoked => return Err(Refusal::BadRequest),
        }
        let record = self.launches.record(run).ok_or(Refusal::UnknownReference)?;
        let agent = AgentRef {
            role: record.role.clone(),
            run: run.clone(),
        };
        let business = record.business.clone();
        self.claims.handle_end(&business, &agent, ending)
    }

    /// Binds a launch the trusted host performed (`bindLaunch`).
    ///
    /// # Errors
    /// `bad-config` for an unknown business, then as
    /// [`Launches::handle_bind`].
    pub fn handle_bind(
        &mut self,
        now: Timestamp,
        record: LaunchRecord,
    ) -> Result<BindReply, Refusal> {
        let mark = self.mark();
        let business = self
            .businesses
            .get(&record.business)
            .ok_or(Refusal::BadConfig)?;
        let result = self.launches.handle_bind(business, record);
        self.drain();
        self.settle(now, mark, result)
    }

    /// Handles one verb from `caller` at wall-clock time `now`.
    ///
    /// # Errors
    /// The verb's refusal; nothing stays staged after an error.
    pub fn handle(
        &mut self,
        now: Timestamp,
        caller: &Caller,
        command: Command,
    ) -> Result<Reply, Refusal> {
        let mark = self.mark();
        let result = self.dispatch(caller, command);
        self.settle(now, mark, result)
    }

    /// Stages the evidence of a refusal, for the runtime to commit in a
    /// transaction of its own.
    pub fn handle_refused(
        &mut self,
        now: Timestamp,
        caller: Option<&Caller>,
        verb: Option<&str>,
        refusal: Refusal,
    ) {
        let record = RefusalRecord::of(caller, verb, refusal);
        self.record(now, Evidence::Refused(record));
    }

    /// Stages the count of a window's refusals
    /// ([`crate::refusal_counts`]).
    pub fn handle_refusals_counted(&mut self, now: Timestamp, count: RefusalCount) {
        self.record(now, Evidence::RefusalsCounted(count));
    }

    /// Queues `evidence`, stamped by the clock.
    fn record(&mut self, now: Timestamp, evidence: Evidence) {
        let at = self.clock.stamp(now);
        self.outbox.push_back(Stamped { at, evidence });
    }

    /// Moves the machines' queued evidence to the outbox, stamped, or undoes
    /// everything since `mark` on a refusal.
    fn settle<T>(
        &mut self,
        now: Timestamp,
        mark: BusMark,
        result: Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        match result {
            Ok(reply) => {
                self.collect(now);
                Ok(reply)
            }
            Err(refusal) => {
                self.rollback_to(mark);
                Err(refusal)
            }
        }
    }

    /// Stamps and queues whatever the machines have queued, in the order the
    /// verb staged it: the bus drains each machine right after driving it.
    fn collect(&mut self, now: Timestamp) {
        let pending = std::mem::take(&mut self.pending);
        for evidence in pending {
            let at = self.clock.stamp(now);
            let record = Stamped { at, evidence };
            self.note_stamped(&record);
            self.outbox.push_back(record);
        }
    }

    /// Tells the machines a record's write time, which only the bus knows
    /// (it stamps after the machines staged): an end's, which `agents`
    /// shows. Live and on replay alike, so both states agree.
    fn note_stamped(&mut self, record: &Stamped) {
        if let Evidence::Claim(ClaimEvidence::Ended(end)) = &record.evidence {
            self.claims.handle_end_stamped(&end.agent.run, record.at);
        }
    }
}

impl Bus {
    /// Checks who may use the verb (the verb table decides, through
    /// [`Command::admit`]), then drives the machines.
    fn dispatch(&mut self, caller: &Caller, command: Command) -> Result<Reply, Refusal> {
        let business = self
            .businesses
            .get(caller.business())
            .cloned()
            .ok_or(Refusal::BadCapability)?;
        match caller {
            Caller::Agent { agent, .. } => {
                business.role(&agent.role).ok_or(Refusal::UnknownRole)?;
                command.admit(CallerKind::Agent)?;
                // A run that ended can do nothing any more.
                self.claims.check_live(&agent.run)?;
                // Everything but claiming needs the role held right now.
                if !self.claims.holds(business.id(), agent) && !matches!(command, Command::Claim) {
                    return Err(Refusal::NotHolder);
                }
                self.agent_verb(&business, agent, command)
            }
            Caller::Human { input, .. } => {
                command.admit(CallerKind::Human)?;
                self.human_verb(&business, *input, command)
            }
            Caller::Reader { .. } => {
                command.admit(CallerKind::Reader)?;
                // Readers only read, and reads never reach the bus: were the
                // table to give them a write, the bus would have nothing to
                // drive (the caller test in `tests/rules` fails first).
                Err(Refusal::NotAuthorized)
            }
        }
    }

    /// A verb of an agent that holds its role (or is claiming it).
    fn agent_verb(
        &mut self,
        business: &Business,
        agent: &AgentRef,
        command: Command,
    ) -> Result<Reply, Refusal> {
        let b = business.id();
        let by = || DecisionActor::Agent(agent.clone());
        let reply = match command {
            Command::Claim => Reply::Claimed(self.claims.handle_claim(b, agent)?),
            Command::Release => {
                self.claims.handle_release(b, agent)?;
                Reply::Done
            }
            Command::Revoke { role, decision } => {
                business.role(&role).ok_or(Refusal::UnknownRole)?;
                let action = Action::parse(Verb::RoleRevoke.as_str())?;
                let target = Target::from(&role);
                let ask = Ask {
                    agent,
                    action: &action,
                    target: Some(&target),
                    decision: Some(decision),
                };
                self.authorize(business, &ask, Some(Subject::Role(role.clone())))?;
                let holder = self.decisions.lookup(b, &decision)?.record.holder.clone();
                let holder = holder.ok_or(Refusal::HolderChanged)?;
                self.claims.handle_revoke(b, &role, &holder, decision)?;
                Reply::Done
            }
            Command::Raise { id, input } => {
                let switch = self.launches.switch(b);
                let d = self.decisions.handle_raise(
                    business,
                    &self.claims,
                    switch,
                    agent,
                    id,
                    *input,
                )?;
                Reply::Decision(Box::new(d))
            }
            Command::Resolve { id, choice, note } => Reply::Decision(Box::new(
                self.decisions.handle_resolve(b, by(), &id, choice, note)?,
            )),
            Command::Seen { id, note } => {
                Reply::Decision(Box::new(self.decisions.handle_seen(b, by(), &id, note)?))
            }
            Command::Withdraw { id, note } => Reply::Decision(Box::new(
                self.decisions.handle_withdraw(b, by(), &id, note)?,
            )),
            Command::Send { id, input, known } => {
                self.send(business, Sender::Agent(agent.clone()), id, *input, &known)?
            }
            Command::Receive { batch } => {
                let delivered = messages::deliver(b, agent, &batch)?;
                self.pending
                    .extend(delivered.into_iter().map(Evidence::Message));
                Reply::Received(batch.into_iter().map(|m| m.record).collect())
            }
            Command::Read { id, known } => {
                let facts = known
                    .filter(|f| f.record.id == id)
                    .ok_or(Refusal::UnknownReference)?;
                if let Some(read) = messages::acknowledge(b, agent, &facts)? {
                    self.pending.push(Evidence::Message(read));
                }
                Reply::Done
            }
            Command::EmitRoutine { target, subject } => {
                self.check_subject(business, subject.as_ref())?;
                let routine = Action::parse("routine")?;
                self.pending
                    .push(Evidence::Allowed(crate::evidence::ActionAllowed {
                        business: b.clone(),
                        agent: agent.clone(),
                        action: routine,
                        target,
                        decision: None,
                        subject,
                    }));
                Reply::Done
            }
            Command::Authorize {
                action,
                target,
                decision,
            } => {
                let ask = Ask {
                    agent,
                    action: &action,
                    target: target.as_ref(),
                    decision,
                };
                Reply::Authorized(self.authorize(business, &ask, None)?)
            }
            Command::RecordEvent {
                kind,
                body,
                subject,
                request,
            } => {
                let k = kind.as_str();
                if k == "action.allowed" || RESERVED_KIND_PREFIXES.iter().any(|p| k.starts_with(p))
                {
                    return Err(Refusal::NotAuthorized);
                }
                // Task events are filed under their task, and only a created
                // task names the human input that asked for it: what
                // `Command::record_event` builds, checked again for a
                // command built by hand.
                let task_subject = matches!(subject, Some(Subject::Task(_)));
                if (k.starts_with("task.") && !task_subject)
                    || ((k == TASK_CREATED) != request.is_some())
                {
                    return Err(Refusal::BadRequest);
                }
                self.check_subject(business, subject.as_ref())?;
                self.pending.push(Evidence::Observed(Observation {
                    business: b.clone(),
                    agent: agent.clone(),
                    kind: kind.as_str().to_owned(),
                    body,
                    subject,
                    request,
                }));
                Reply::Done
            }
            Command::RecordBrowserOutcome { body } => {
                self.pending.push(Evidence::Observed(Observation {
                    business: b.clone(),
                    agent: agent.clone(),
                    kind: BROWSER_COMPLETED.to_owned(),
                    body,
                    subject: Some(Subject::Role(agent.role.clone())),
                    request: None,
                }));
                Reply::Done
            }
            // The verb table gives the launch switch and `run.end` to the
            // human only, so `dispatch` refused them already.
            Command::LaunchRevoke | Command::LaunchRestore | Command::EndRun { .. } => {
                return Err(Refusal::HumanOnly)
            }
        };
        self.drain();
        Ok(reply)
    }

    /// A verb of the proven human. Every accepted one records `human.input`
    /// first, under the id the runtime drew for this request.
    fn human_verb(
        &mut self,
        business: &Business,
        input: EventId,
        command: Command,
    ) -> Result<Reply, Refusal> {
        let b = business.id();
        let verb = command.verb();
        let (subject, reply) = match command {
            Command::Resolve { id, choice, note } => {
                let d =
                    self.decisions
                        .handle_resolve(b, DecisionActor::Human, &id, choice, note)?;
                (Some(Subject::Decision(id)), Reply::Decision(Box::new(d)))
            }
            Command::Seen { id, note } => {
                let d = self
                    .decisions
                    .handle_seen(b, DecisionActor::Human, &id, note)?;
                (Some(Subject::Decision(id)), Reply::Decision(Box::new(d)))
            }
            Command::Withdraw { id, note } => {
                let d = self
                    .decisions
                    .handle_withdraw(b, DecisionActor::Human, &id, note)?;
                (Some(Subject::Decision(id)), Reply::Decision(Box::new(d)))
            }
            Command::Send {
                id,
                input: send,
                known,
            } => (
                Some(Subject::Message(id)),
                self.send(business, Sender::Human(input), id, *send, &known)?,
            ),
            Command::LaunchRevoke | Command::LaunchRestore => {
                self.launches
                    .handle_switch(b, matches!(command, Command::LaunchRestore));
                (None, Reply::Done)
            }
            // Filed under the run's role: the role's trail shows the
            // human's word and the end it made.
            Command::EndRun { run } => {
                let record = self
                    .launches
                    .record(&run)
                    .ok_or(Refusal::UnknownReference)?;
                if &record.business != b {
                    return Err(Refusal::CrossBusiness);
                }
                let agent = AgentRef {
                    role: record.role.clone(),
                    run,
                };
                self.claims
                    .handle_end(b, &agent, Ending::of_cause(EndCause::Human))?;
                (Some(Subject::Role(agent.role)), Reply::Done)
            }
            // The `human.input` below is the whole record of it: the store
            // reads a message to the human as read once one names it.
            Command::Read { id, known } => {
                let facts = known
                    .filter(|f| f.record.id == id)
                    .ok_or(Refusal::UnknownReference)?;
                messages::acknowledge_human(b, &facts)?;
                (Some(Subject::Message(id)), Reply::Done)
            }
            // The verb table serves these to agents only, so `dispatch`
            // refused them already.
            Command::Claim
            | Command::Release
            | Command::Revoke { .. }
            | Command::Raise { .. }
            | Command::Receive { .. }
            | Command::EmitRoutine { .. }
            | Command::Authorize { .. }
            | Command::RecordEvent { .. }
            | Command::RecordBrowserOutcome { .. } => return Err(Refusal::NotAuthorized),
        };
        let human = Evidence::Human(HumanInput {
            id: input,
            business: b.clone(),
            verb: verb.to_owned(),
            subject,
        });
        self.pending.insert(0, human);
        self.drain();
        Ok(reply)
    }

    /// `message.send` from an agent or the human, as message `id`; `known`
    /// is what the store has for the messages it references. A human
    /// instruction's `request` is its own `human.input` id.
    fn send(
        &mut self,
        business: &Business,
        from: Sender,
        id: MessageId,
        input: SendInput,
        known: &[MessageFacts],
    ) -> Result<Reply, Refusal> {
        let b = business.id();
        let target = match &input.to {
            Recipient::Role(role) => {
                business.role(role).ok_or(Refusal::UnknownRole)?;
                Target::from(role)
            }
            Recipient::Human => Target::parse("human")?,
        };
        for reference in input.in_reply_to.iter().chain(input.corrects.iter()) {
            let facts = known
                .iter()
                .find(|f| &f.record.id == reference)
                .ok_or(Refusal::UnknownReference)?;
            if &facts.record.business != b {
                return Err(Refusal::CrossBusiness);
            }
        }
        let request = match &from {
            Sender::Agent(agent) => {
                let action = Action::parse(Verb::MessageSend.as_str())?;
                let within = business.class_of(&agent.role, &action) == ActionClass::WithinRole;
                if within {
                    // A within-role send only cites its decision: it must exist here, nothing is spent.
                    if let Some(d) = &input.decision {
                        self.decisions.lookup(b, d)?;
                    }
                }
                let decision = if within { None } else { input.decision };
                let ask = Ask {
                    agent,
                    action: &action,
                    target: Some(&target),
                    decision,
                };
                let subject = match &input.to {
                    Recipient::Role(role) => Some(Subject::Role(role.clone())),
                    Recipient::Human => None,
                };
                self.authorize(business, &ask, subject)?;
                None
            }
            Sender::Human(input_id) => {
                if let Some(d) = &input.decision {
                    self.decisions.lookup(b, d)?;
                }
                Some(*input_id)
            }
        };
        let record = MessageRecord {
            id,
            business: b.clone(),
            from: match from {
                Sender::Agent(agent) => crate::evidence::Sender::Agent(agent),
                Sender::Human(_) => crate::evidence::Sender::Human,
            },
            to: input.to,
            class: input.class,
            body: input.body,
            in_reply_to: input.in_reply_to,
            corrects: input.corrects,
            decision: input.decision,
            request,
        };
        let id = record.id;
        self.pending
            .push(Evidence::Message(MessageEvidence::Sent(Box::new(record))));
        Ok(Reply::Sent { id, request })
    }

    fn authorize(
        &mut self,
        business: &Business,
        ask: &Ask<'_>,
        subject: Option<Subject>,
    ) -> Result<Grant, Refusal> {
        let switch = self.launches.switch(business.id());
        let grant = self.authorizations.handle_authorize(
            business,
            &self.decisions,
            switch,
            ask,
            subject,
        )?;
        self.drain();
        Ok(grant)
    }

    /// A subject naming a decision or role must name one of this business.
    fn check_subject(&self, business: &Business, subject: Option<&Subject>) -> Result<(), Refusal> {
        match subject {
            Some(Subject::Decision(id)) => self.decisions.lookup(business.id(), id).map(|_| ()),
            Some(Subject::Role(role)) => {
                business.role(role).map(|_| ()).ok_or(Refusal::UnknownRole)
            }
            Some(Subject::Task(_) | Subject::Message(_)) | None => Ok(()),
        }
    }

    /// Moves every machine's queued evidence to `pending`, in staging order.
    fn drain(&mut self) {
        while let Some(e) = self.launches.poll_effect() {
            self.pending.push(Evidence::Launch(e));
        }
        while let Some(e) = self.claims.poll_effect() {
            self.pending.push(Evidence::Claim(e));
        }
        while let Some(e) = self.decisions.poll_effect() {
            self.pending.push(Evidence::Decision(e));
        }
        while let Some(e) = self.authorizations.poll_effect() {
            self.pending.push(e);
        }
    }

    /// The next stamped record to commit. The runtime MUST drain the outbox
    /// into one transaction before calling [`Bus::handle_committed`].
    pub fn poll_effect(&mut self) -> Option<Stamped> {
        self.outbox.pop_front()
    }

    /// A savepoint across every machine, the outbox and the clock.
    pub fn mark(&self) -> BusMark {
        BusMark {
            launches: self.launches.mark(),
            claims: self.claims.mark(),
            decisions: self.decisions.mark(),
            authorizations: self.authorizations.mark(),
            outbox: self.outbox.len(),
            clock: self.clock.clone(),
        }
    }

    /// Undoes everything staged after `mark`: one request of a batch failed
    /// inside its savepoint.
    pub fn rollback_to(&mut self, mark: BusMark) {
        self.launches.rollback_to(mark.launches);
        self.claims.rollback_to(mark.claims);
        self.decisions.rollback_to(mark.decisions);
        self.authorizations.rollback_to(mark.authorizations);
        self.outbox.truncate(mark.outbox);
        self.pending.clear();
        self.clock = mark.clock;
    }

    /// The store committed everything polled: keep it.
    pub fn handle_committed(&mut self) {
        self.launches.handle_committed();
        self.claims.handle_committed();
        self.decisions.handle_committed();
        self.authorizations.handle_committed();
        self.committed_clock = self.clock.clone();
    }

    /// The store did not commit: restore every machine and the clock to the
    /// last commit, and drop whatever is still queued.
    pub fn handle_rolled_back(&mut self) {
        self.launches.handle_rolled_back();
        self.claims.handle_rolled_back();
        self.decisions.handle_rolled_back();
        self.authorizations.handle_rolled_back();
        self.outbox.clear();
        self.pending.clear();
        self.clock = self.committed_clock.clone();
    }
}
