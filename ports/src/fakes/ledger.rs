//! The memory store's state (its records and the indexes its rules and
//! reads need) and the rules a stage is checked against before it is
//! applied: the same unique and reference rules as the SQLite store's.

use std::collections::{BTreeMap, HashMap, HashSet};

use mosaic_domain::evidence::{
    ClaimEvidence, DecisionEvidence, Evidence, LaunchEvidence, LaunchRecord, MessageEvidence,
    Observation, Recipient, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, DecisionId, EventId, MessageId, RunId, TaskRef, Timestamp};

use crate::store::{StoreError, TaskView};

/// The records and the indexes the rules and reads need, all updated
/// together: the committed state, or a batch's copy of it.
#[derive(Debug, Clone, Default)]
pub(super) struct State {
    /// Every record, in commit order.
    pub(super) records: Vec<Stamped>,
    /// The business of every raised decision.
    pub(super) decisions: HashMap<DecisionId, BusinessId>,
    /// Decisions that were resolved, withdrawn or superseded.
    pub(super) terminal: HashSet<DecisionId>,
    /// Decisions whose approval was consumed.
    pub(super) consumed: HashSet<DecisionId>,
    /// The business of every human input.
    pub(super) human_inputs: HashMap<EventId, BusinessId>,
    /// The launch record every bound run is bound by.
    pub(super) launches: HashMap<RunId, LaunchRecord>,
    /// Every run that ended.
    pub(super) ended: HashSet<RunId>,
    /// The position of every sent message in `messages`.
    pub(super) message_index: HashMap<MessageId, usize>,
    /// Every sent message with its delivery facts, in send order.
    pub(super) messages: Vec<MessageFacts>,
    /// The newest `task.*` observation per business and task.
    pub(super) tasks: HashMap<BusinessId, BTreeMap<TaskRef, TaskView>>,
}

impl State {
    /// Adds one checked record to the log and every index.
    pub(super) fn apply(&mut self, record: &Stamped) {
        match &record.evidence {
            Evidence::Decision(DecisionEvidence::Raised(d)) => {
                self.decisions.insert(d.id, d.business.clone());
            }
            Evidence::Decision(DecisionEvidence::Resolved { id, .. })
            | Evidence::Decision(DecisionEvidence::Withdrawn { id, .. })
            | Evidence::Decision(DecisionEvidence::Superseded { id, .. }) => {
                self.terminal.insert(*id);
            }
            Evidence::Consumed(c) => {
                self.consumed.insert(c.decision);
            }
            Evidence::Launch(LaunchEvidence::Launched(r)) => {
                self.launches.insert(r.run.clone(), r.clone());
            }
            Evidence::Claim(ClaimEvidence::Ended(end)) => {
                self.ended.insert(end.agent.run.clone());
            }
            Evidence::Human(h) => {
                self.human_inputs.insert(h.id, h.business.clone());
                // The human's `message.read` is its only record of that act.
                if let Some(&i) = h.read_message().and_then(|m| self.message_index.get(&m)) {
                    let facts = &mut self.messages[i];
                    facts.read |= facts.record.to == Recipient::Human;
                }
            }
            Evidence::Message(MessageEvidence::Sent(m)) => {
                self.message_index.insert(m.id, self.messages.len());
                self.messages.push(MessageFacts {
                    record: (**m).clone(),
                    delivered_to: None,
                    read: false,
                });
            }
            Evidence::Message(MessageEvidence::Delivered { message, run, .. }) => {
                if let Some(&i) = self.message_index.get(message) {
                    self.messages[i].delivered_to = Some(run.clone());
                }
            }
            Evidence::Message(MessageEvidence::Read { message, .. }) => {
                if let Some(&i) = self.message_index.get(message) {
                    self.messages[i].read = true;
                }
            }
            Evidence::Observed(o) => {
                if let (true, Some(Subject::Task(task))) = (o.kind.starts_with("task."), &o.subject)
                {
                    self.tasks.entry(o.business.clone()).or_default().insert(
                        *task,
                        TaskView {
                            task: *task,
                            kind: o.kind.clone(),
                            body: o.body.clone(),
                            tombstone: o.kind == "task.deleted",
                            at: record.at,
                        },
                    );
                }
            }
            // These carry no unique fact and nothing a read indexes; they are
            // found by scanning the log.
            Evidence::Launch(LaunchEvidence::Revoked { .. })
            | Evidence::Launch(LaunchEvidence::Restored { .. })
            | Evidence::Claim(ClaimEvidence::Claimed { .. })
            | Evidence::Claim(ClaimEvidence::Released { .. })
            | Evidence::Claim(ClaimEvidence::Revoked { .. })
            | Evidence::Decision(DecisionEvidence::Seen { .. })
            | Evidence::Allowed(_)
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => {}
        }
        self.records.push(record.clone());
    }
}

/// A stage being checked: the state it joins (the committed state with the
/// earlier stages of its batch) plus what the records checked so far in this
/// stage add, so later records may refer to earlier ones.
pub(super) struct Staged<'a> {
    pub(super) base: &'a State,
    pub(super) last: Option<Timestamp>,
    pub(super) decisions: HashMap<DecisionId, BusinessId>,
    pub(super) terminal: HashSet<DecisionId>,
    pub(super) consumed: HashSet<DecisionId>,
    pub(super) human_inputs: HashMap<EventId, BusinessId>,
    pub(super) launches: HashMap<RunId, LaunchRecord>,
    pub(super) ended: HashSet<RunId>,
    pub(super) messages: HashMap<MessageId, BusinessId>,
    pub(super) delivered: HashMap<MessageId, RunId>,
    pub(super) read: HashSet<MessageId>,
}

impl<'a> Staged<'a> {
    pub(super) fn new(base: &'a State) -> Self {
        Self {
            base,
            last: base.records.last().map(|r| r.at),
            decisions: HashMap::new(),
            terminal: HashSet::new(),
            consumed: HashSet::new(),
            human_inputs: HashMap::new(),
            launches: HashMap::new(),
            ended: HashSet::new(),
            messages: HashMap::new(),
            delivered: HashMap::new(),
            read: HashSet::new(),
        }
    }

    pub(super) fn decision(&self, id: &DecisionId) -> Option<&BusinessId> {
        self.decisions
            .get(id)
            .or_else(|| self.base.decisions.get(id))
    }

    pub(super) fn message(&self, id: &MessageId) -> Option<&BusinessId> {
        self.messages.get(id).or_else(|| {
            self.base
                .message_index
                .get(id)
                .map(|&i| &self.base.messages[i].record.business)
        })
    }

    pub(super) fn delivered_to(&self, id: &MessageId) -> Option<&RunId> {
        self.delivered.get(id).or_else(|| {
            self.base
                .message_index
                .get(id)
                .and_then(|&i| self.base.messages[i].delivered_to.as_ref())
        })
    }

    pub(super) fn is_read(&self, id: &MessageId) -> bool {
        self.read.contains(id)
            || self
                .base
                .message_index
                .get(id)
                .is_some_and(|&i| self.base.messages[i].read)
    }

    pub(super) fn is_consumed(&self, id: &DecisionId) -> bool {
        self.consumed.contains(id) || self.base.consumed.contains(id)
    }

    pub(super) fn is_terminal(&self, id: &DecisionId) -> bool {
        self.terminal.contains(id) || self.base.terminal.contains(id)
    }

    pub(super) fn human_input(&self, id: &EventId) -> Option<&BusinessId> {
        self.human_inputs
            .get(id)
            .or_else(|| self.base.human_inputs.get(id))
    }

    pub(super) fn is_ended(&self, run: &RunId) -> bool {
        self.ended.contains(run) || self.base.ended.contains(run)
    }

    pub(super) fn launch(&self, run: &RunId) -> Option<&LaunchRecord> {
        self.launches
            .get(run)
            .or_else(|| self.base.launches.get(run))
    }

    /// A reference from a record of `own` to a decision.
    pub(super) fn decision_ref(&self, own: &BusinessId, id: &DecisionId) -> Result<(), StoreError> {
        same_business(own, self.decision(id))
    }

    /// A reference from a record of `own` to a message.
    pub(super) fn message_ref(&self, own: &BusinessId, id: &MessageId) -> Result<(), StoreError> {
        same_business(own, self.message(id))
    }

    /// A reference from a record of `own` to a human input.
    pub(super) fn human_ref(&self, own: &BusinessId, id: &EventId) -> Result<(), StoreError> {
        same_business(own, self.human_input(id))
    }

    /// Stages the terminal event of decision `id`, which must be its first.
    pub(super) fn terminate(&mut self, id: &DecisionId) -> Result<(), StoreError> {
        if self.is_terminal(id) {
            return Err(StoreError::Duplicate);
        }
        self.terminal.insert(*id);
        Ok(())
    }

    /// Checks one record against everything before it, then stages it.
    ///
    /// Within a record the timestamp is checked first, then its shape, then
    /// its references (dangling before cross-business), then uniqueness. The
    /// contract leaves this order open; it only fixes which error each rule
    /// reports.
    pub(super) fn check(&mut self, record: &Stamped) -> Result<(), StoreError> {
        if self.last.is_some_and(|last| record.at <= last) {
            return Err(StoreError::NonMonotonic);
        }
        match &record.evidence {
            Evidence::Launch(LaunchEvidence::Launched(r)) => {
                // A run is bound once; repeating the same binding is harmless
                // and is recorded again.
                if self.launch(&r.run).is_some_and(|bound| bound != r) {
                    return Err(StoreError::Duplicate);
                }
                self.launches.insert(r.run.clone(), r.clone());
            }
            Evidence::Decision(DecisionEvidence::Raised(d)) => {
                if let Some(old) = &d.fields.supersedes {
                    self.decision_ref(&d.business, old)?;
                }
                if self.decision(&d.id).is_some() {
                    return Err(StoreError::Duplicate);
                }
                self.decisions.insert(d.id, d.business.clone());
            }
            // Seen may repeat, also after the decision closed.
            Evidence::Decision(DecisionEvidence::Seen { business, id, .. }) => {
                self.decision_ref(business, id)?;
            }
            Evidence::Decision(DecisionEvidence::Resolved { business, id, .. })
            | Evidence::Decision(DecisionEvidence::Withdrawn { business, id, .. }) => {
                self.decision_ref(business, id)?;
                self.terminate(id)?;
            }
            Evidence::Decision(DecisionEvidence::Superseded { business, id, by }) => {
                self.decision_ref(business, id)?;
                self.decision_ref(business, by)?;
                // Only the replaced decision closes; the replacing one is open.
                self.terminate(id)?;
            }
            Evidence::Claim(ClaimEvidence::Revoked {
                business, decision, ..
            }) => {
                self.decision_ref(business, decision)?;
            }
            // A run ends once, whichever business names it.
            Evidence::Claim(ClaimEvidence::Ended(end)) => {
                if self.is_ended(&end.agent.run) {
                    return Err(StoreError::Duplicate);
                }
                self.ended.insert(end.agent.run.clone());
            }
            Evidence::Consumed(c) => {
                self.decision_ref(&c.business, &c.decision)?;
                if self.is_consumed(&c.decision) {
                    return Err(StoreError::Duplicate);
                }
                self.consumed.insert(c.decision);
            }
            Evidence::Allowed(a) => {
                if let Some(decision) = &a.decision {
                    self.decision_ref(&a.business, decision)?;
                }
            }
            Evidence::Human(h) => {
                if self.human_input(&h.id).is_some() {
                    return Err(StoreError::Duplicate);
                }
                self.human_inputs.insert(h.id, h.business.clone());
            }
            Evidence::Observed(o) => {
                shape(o)?;
                if let Some(request) = &o.request {
                    self.human_ref(&o.business, request)?;
                }
            }
            Evidence::Message(MessageEvidence::Sent(m)) => {
                for cited in [&m.in_reply_to, &m.corrects].into_iter().flatten() {
                    self.message_ref(&m.business, cited)?;
                }
                if let Some(decision) = &m.decision {
                    self.decision_ref(&m.business, decision)?;
                }
                if let Some(request) = &m.request {
                    self.human_ref(&m.business, request)?;
                }
                if self.message(&m.id).is_some() {
                    return Err(StoreError::Duplicate);
                }
                self.messages.insert(m.id, m.business.clone());
            }
            Evidence::Message(MessageEvidence::Delivered {
                business,
                message,
                run,
            }) => {
                self.message_ref(business, message)?;
                if self.delivered_to(message).is_some() {
                    return Err(StoreError::Duplicate);
                }
                self.delivered.insert(*message, run.clone());
            }
            Evidence::Message(MessageEvidence::Read {
                business,
                message,
                run,
            }) => {
                self.message_ref(business, message)?;
                if self.delivered_to(message) != Some(run) {
                    return Err(StoreError::Dangling);
                }
                if self.is_read(message) {
                    return Err(StoreError::Duplicate);
                }
                self.read.insert(*message);
            }
            // No unique fact and no checked reference.
            Evidence::Launch(LaunchEvidence::Revoked { .. })
            | Evidence::Launch(LaunchEvidence::Restored { .. })
            | Evidence::Claim(ClaimEvidence::Claimed { .. })
            | Evidence::Claim(ClaimEvidence::Released { .. })
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => {}
        }
        self.last = Some(record.at);
        Ok(())
    }
}

/// The shape rules of an observation: a `task.*` event is filed under its
/// task, and exactly a `task.created` event names the human input that asked
/// for the task.
fn shape(o: &Observation) -> Result<(), StoreError> {
    let filed_under_task = matches!(o.subject, Some(Subject::Task(_)));
    let task_event = o.kind.starts_with("task.");
    let created = o.kind == "task.created";
    if (task_event && !filed_under_task) || created != o.request.is_some() {
        return Err(StoreError::Malformed);
    }
    Ok(())
}

/// `Dangling` when the referenced record does not exist, `CrossBusiness`
/// when it belongs to another business than the referring record.
fn same_business(own: &BusinessId, found: Option<&BusinessId>) -> Result<(), StoreError> {
    match found {
        None => Err(StoreError::Dangling),
        Some(theirs) if theirs != own => Err(StoreError::CrossBusiness),
        Some(_) => Ok(()),
    }
}
