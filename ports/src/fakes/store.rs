//! [`MemoryStore`]: the evidence store in memory, with the SQLite store's rules.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use mosaic_domain::evidence::{
    ClaimEvidence, DecisionEvidence, Evidence, LaunchEvidence, LaunchRecord, MessageEvidence,
    Observation, Recipient, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{
    BusinessId, DecisionId, EventId, MessageId, RoleInstance, RunId, TaskRef, Timestamp,
};

use super::{lock, InjectedFailure};
use crate::store::{EvidenceStore, StoreError, TaskView};

/// An in-memory [`EvidenceStore`] that enforces the same rules as the SQLite
/// store: all-or-nothing batches, strictly increasing timestamps, the shape
/// rules of observations, unique facts and references that exist in the
/// same business (every rule listed by [`EvidenceStore::commit`]). It passes
/// `conformance::store::run`. Like the contract allows, it does not check
/// the caller's obligations there (it keeps an observation body that is not
/// JSON).
///
/// Clones share one store, the way two connections share one database file:
/// hand a clone to the runtime and inspect what it committed through
/// [`MemoryStore::records`] or the trait's reads on the other. Use
/// [`MemoryStore::new`] for an independent store.
///
/// For failure paths, [`MemoryStore::fail_next_commit`] makes the next
/// commit fail with [`StoreError::Unavailable`] and
/// [`MemoryStore::set_unavailable`] makes every operation fail until cleared;
/// the source of those errors is [`InjectedFailure`].
///
/// ```
/// use mosaic_ports::fakes::MemoryStore;
/// use mosaic_ports::EvidenceStore;
///
/// let store = MemoryStore::new();
/// let mut runtime_handle = store.clone();
/// runtime_handle.fail_next_commit();
/// assert!(runtime_handle.commit(&[]).is_err());
/// assert!(store.records().is_empty());
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

/// The shared state: the committed records and the indexes the rules and
/// reads need, all updated together under one lock.
#[derive(Debug, Default)]
struct Inner {
    /// Every committed record, in commit order.
    records: Vec<Stamped>,
    /// The business of every raised decision.
    decisions: HashMap<DecisionId, BusinessId>,
    /// Decisions that were resolved, withdrawn or superseded.
    terminal: HashSet<DecisionId>,
    /// Decisions whose approval was consumed.
    consumed: HashSet<DecisionId>,
    /// The business of every human input.
    human_inputs: HashMap<EventId, BusinessId>,
    /// The launch record every bound run is bound by.
    launches: HashMap<RunId, LaunchRecord>,
    /// The position of every sent message in `messages`.
    message_index: HashMap<MessageId, usize>,
    /// Every sent message with its delivery facts, in send order.
    messages: Vec<MessageFacts>,
    /// The newest `task.*` observation per business and task.
    tasks: HashMap<BusinessId, BTreeMap<TaskRef, TaskView>>,
    /// How many of the next commits fail on purpose.
    failing_commits: usize,
    /// Whether every operation fails on purpose.
    unavailable: bool,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next call to [`EvidenceStore::commit`] return
    /// [`StoreError::Unavailable`] and commit nothing, whatever its batch.
    /// Each call arms one more failing commit.
    pub fn fail_next_commit(&self) {
        lock(&self.inner).failing_commits += 1;
    }

    /// While `unavailable` is true, every commit and every read returns
    /// [`StoreError::Unavailable`], as a store on a failed disk would.
    pub fn set_unavailable(&self, unavailable: bool) {
        lock(&self.inner).unavailable = unavailable;
    }

    /// Every committed record, in commit order, regardless of injected
    /// failures: what a test inspects after the code under test ran.
    pub fn records(&self) -> Vec<Stamped> {
        lock(&self.inner).records.clone()
    }

    /// Locks the state for a read, failing when a test made the store
    /// unavailable.
    fn read(&self) -> Result<std::sync::MutexGuard<'_, Inner>, StoreError> {
        let inner = lock(&self.inner);
        if inner.unavailable {
            return Err(injected());
        }
        Ok(inner)
    }
}

/// The error of an injected failure.
fn injected() -> StoreError {
    StoreError::Unavailable(Box::new(InjectedFailure))
}

impl EvidenceStore for MemoryStore {
    fn commit(&mut self, records: &[Stamped]) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        if inner.unavailable {
            return Err(injected());
        }
        if inner.failing_commits > 0 {
            inner.failing_commits -= 1;
            return Err(injected());
        }
        // Check the whole batch against the committed state plus the records
        // before it in the batch, and only then apply it, so a refused batch
        // leaves no trace.
        let mut staged = Staged::new(&inner);
        for record in records {
            staged.check(record)?;
        }
        for record in records {
            inner.apply(record);
        }
        Ok(())
    }

    fn last_write(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.read()?.records.last().map(|r| r.at))
    }

    fn replay(&self, visit: &mut dyn FnMut(Stamped)) -> Result<(), StoreError> {
        // Copy first so `visit` runs without the lock and may use a clone of
        // this store.
        let records: Vec<Stamped> = self
            .read()?
            .records
            .iter()
            .filter(|r| r.evidence.is_machine_state())
            .cloned()
            .collect();
        records.into_iter().for_each(visit);
        Ok(())
    }

    fn message(&self, id: &MessageId) -> Result<Option<MessageFacts>, StoreError> {
        let inner = self.read()?;
        Ok(inner
            .message_index
            .get(id)
            .map(|&i| inner.messages[i].clone()))
    }

    fn undelivered(
        &self,
        business: &BusinessId,
        role: &RoleInstance,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        let to = Recipient::Role(role.clone());
        Ok(self
            .read()?
            .messages
            .iter()
            .filter(|m| {
                &m.record.business == business && m.record.to == to && m.delivered_to.is_none()
            })
            .take(limit)
            .cloned()
            .collect())
    }

    fn unread(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        Ok(self
            .read()?
            .messages
            .iter()
            .filter(|m| &m.record.business == business && &m.record.to == recipient && !m.read)
            .cloned()
            .collect())
    }

    fn tasks(&self, business: &BusinessId) -> Result<Vec<TaskView>, StoreError> {
        Ok(self
            .read()?
            .tasks
            .get(business)
            .map(|tasks| tasks.values().cloned().collect())
            .unwrap_or_default())
    }

    fn trail(&self, business: &BusinessId, subject: &Subject) -> Result<Vec<Stamped>, StoreError> {
        Ok(self
            .read()?
            .records
            .iter()
            .filter(|r| r.evidence.business() == Some(business) && r.evidence.concerns(subject))
            .cloned()
            .collect())
    }
}

impl Inner {
    /// Adds one checked record to the log and every index.
    fn apply(&mut self, record: &Stamped) {
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
            Evidence::Human(h) => {
                self.human_inputs.insert(h.id, h.business.clone());
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
            | Evidence::Claim(_)
            | Evidence::Decision(DecisionEvidence::Seen { .. })
            | Evidence::Allowed(_)
            | Evidence::Refused(_) => {}
        }
        self.records.push(record.clone());
    }
}

/// A batch being checked: the committed state plus what the records checked
/// so far in this batch add, so later records may refer to earlier ones.
struct Staged<'a> {
    base: &'a Inner,
    last: Option<Timestamp>,
    decisions: HashMap<DecisionId, BusinessId>,
    terminal: HashSet<DecisionId>,
    consumed: HashSet<DecisionId>,
    human_inputs: HashMap<EventId, BusinessId>,
    launches: HashMap<RunId, LaunchRecord>,
    messages: HashMap<MessageId, BusinessId>,
    delivered: HashMap<MessageId, RunId>,
    read: HashSet<MessageId>,
}

impl<'a> Staged<'a> {
    fn new(base: &'a Inner) -> Self {
        Self {
            base,
            last: base.records.last().map(|r| r.at),
            decisions: HashMap::new(),
            terminal: HashSet::new(),
            consumed: HashSet::new(),
            human_inputs: HashMap::new(),
            launches: HashMap::new(),
            messages: HashMap::new(),
            delivered: HashMap::new(),
            read: HashSet::new(),
        }
    }

    fn decision(&self, id: &DecisionId) -> Option<&BusinessId> {
        self.decisions
            .get(id)
            .or_else(|| self.base.decisions.get(id))
    }

    fn message(&self, id: &MessageId) -> Option<&BusinessId> {
        self.messages.get(id).or_else(|| {
            self.base
                .message_index
                .get(id)
                .map(|&i| &self.base.messages[i].record.business)
        })
    }

    fn delivered_to(&self, id: &MessageId) -> Option<&RunId> {
        self.delivered.get(id).or_else(|| {
            self.base
                .message_index
                .get(id)
                .and_then(|&i| self.base.messages[i].delivered_to.as_ref())
        })
    }

    fn is_read(&self, id: &MessageId) -> bool {
        self.read.contains(id)
            || self
                .base
                .message_index
                .get(id)
                .is_some_and(|&i| self.base.messages[i].read)
    }

    fn is_consumed(&self, id: &DecisionId) -> bool {
        self.consumed.contains(id) || self.base.consumed.contains(id)
    }

    fn is_terminal(&self, id: &DecisionId) -> bool {
        self.terminal.contains(id) || self.base.terminal.contains(id)
    }

    fn human_input(&self, id: &EventId) -> Option<&BusinessId> {
        self.human_inputs
            .get(id)
            .or_else(|| self.base.human_inputs.get(id))
    }

    fn launch(&self, run: &RunId) -> Option<&LaunchRecord> {
        self.launches
            .get(run)
            .or_else(|| self.base.launches.get(run))
    }

    /// A reference from a record of `own` to a decision.
    fn decision_ref(&self, own: &BusinessId, id: &DecisionId) -> Result<(), StoreError> {
        same_business(own, self.decision(id))
    }

    /// A reference from a record of `own` to a message.
    fn message_ref(&self, own: &BusinessId, id: &MessageId) -> Result<(), StoreError> {
        same_business(own, self.message(id))
    }

    /// A reference from a record of `own` to a human input.
    fn human_ref(&self, own: &BusinessId, id: &EventId) -> Result<(), StoreError> {
        same_business(own, self.human_input(id))
    }

    /// Stages the terminal event of decision `id`, which must be its first.
    fn terminate(&mut self, id: &DecisionId) -> Result<(), StoreError> {
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
    fn check(&mut self, record: &Stamped) -> Result<(), StoreError> {
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
                if let Some(old) = &d.supersedes {
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
            | Evidence::Refused(_) => {}
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
