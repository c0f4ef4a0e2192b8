//! [`MemoryStore`]: the evidence store in memory, with the SQLite store's rules.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use mosaic_domain::evidence::{
    ClaimEvidence, DecisionEvidence, DecisionRecord, Evidence, LaunchEvidence, LaunchRecord,
    MessageEvidence, Observation, Recipient, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{
    BusinessId, DecisionId, EventId, MessageId, RoleInstance, RunId, TaskRef, Timestamp,
};

use super::{lock, InjectedFailure};
use crate::store::{EvidenceStore, StoreError, StoreHead, StoreReaders, TaskView};

/// An in-memory [`EvidenceStore`] that enforces the same rules as the SQLite
/// store: all-or-nothing batches and stages, strictly increasing timestamps,
/// the shape rules of observations, unique facts and references that exist
/// in the same business (every rule listed by [`EvidenceStore::commit`]). It
/// passes `conformance::store::run`. Like the contract allows, it does not
/// check the caller's obligations there (it keeps an observation body that
/// is not JSON).
///
/// Clones share one store, the way two connections share one database file:
/// hand a clone to the runtime and inspect what it committed through
/// [`MemoryStore::records`] or the trait's reads on the other. Use
/// [`MemoryStore::new`] for an independent store.
///
/// Each handle has its own group commit, as each connection has its own
/// transaction: the batch that [`EvidenceStore::stage`] opens is a private
/// copy of the store, which the reads through that handle see and which
/// [`EvidenceStore::commit_staged`] puts in place of the shared state. Other
/// handles see nothing of it until then; a clone starts without a batch,
/// and dropping a handle abandons its batch. One handle at a time may
/// write, like the SQLite store's single writer: while one handle has a
/// batch open, a stage through any other (so also its
/// [`EvidenceStore::commit`]) fails with [`StoreError::Unavailable`] (busy,
/// and not an [`InjectedFailure`]) until that batch is committed or
/// abandoned.
///
/// For failure paths, [`MemoryStore::fail_next_commit`] makes the next
/// commit of a batch fail with [`StoreError::Unavailable`] and
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
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// The state every handle shares.
    shared: Arc<Mutex<Shared>>,
    /// This handle's open batch: a copy of the committed state when the
    /// batch opened, with every staged record applied.
    batch: Option<Box<State>>,
}

/// What the handles of one store share, under one lock.
#[derive(Debug, Default)]
struct Shared {
    /// The committed state.
    state: State,
    /// Whether some handle has a batch open: the single writer's lock.
    writing: bool,
    /// How many of the next commits of a batch fail on purpose.
    failing_commits: usize,
    /// Whether every operation fails on purpose.
    unavailable: bool,
}

/// The records and the indexes the rules and reads need, all updated
/// together: the committed state, or a batch's copy of it.
#[derive(Debug, Clone, Default)]
struct State {
    /// Every record, in commit order.
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
}

impl Clone for MemoryStore {
    /// Another handle on the same store, without this handle's open batch
    /// (a second connection, not a copy of this one's transaction).
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            batch: None,
        }
    }
}

impl Drop for MemoryStore {
    /// Abandons the open batch, as closing a connection rolls back its
    /// transaction, so the other handles may write again.
    fn drop(&mut self) {
        self.abandon();
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next [`EvidenceStore::commit_staged`] of an open batch, on
    /// any handle of this store, return [`StoreError::Unavailable`] and drop
    /// the batch, so that none of it is committed. [`EvidenceStore::commit`]
    /// goes through it (and opens a batch even for no records), so the next
    /// commit fails too, whatever its records, unless a rule refuses them
    /// first. Each call arms one more failing commit; a `commit_staged` with
    /// no batch open does nothing and uses none.
    pub fn fail_next_commit(&self) {
        lock(&self.shared).failing_commits += 1;
    }

    /// While `unavailable` is true, every stage, every commit of an open
    /// batch and every read returns [`StoreError::Unavailable`], as a store
    /// on a failed disk would; a failing stage or commit drops the open
    /// batch, so none of it is ever committed.
    pub fn set_unavailable(&self, unavailable: bool) {
        lock(&self.shared).unavailable = unavailable;
    }

    /// Every committed record, in commit order, regardless of injected
    /// failures and of open batches: what a test inspects after the code
    /// under test ran.
    pub fn records(&self) -> Vec<Stamped> {
        lock(&self.shared).state.records.clone()
    }

    /// Locks the shared state, failing when a test made the store
    /// unavailable.
    fn available(&self) -> Result<MutexGuard<'_, Shared>, StoreError> {
        let shared = lock(&self.shared);
        if shared.unavailable {
            return Err(injected());
        }
        Ok(shared)
    }

    /// Reads what this handle sees: its open batch, or else the committed
    /// state.
    fn view<T>(&self, read: impl FnOnce(&State) -> T) -> Result<T, StoreError> {
        let shared = self.available()?;
        Ok(read(self.batch.as_deref().unwrap_or(&shared.state)))
    }
}

/// The error of an injected failure.
fn injected() -> StoreError {
    StoreError::Unavailable(Box::new(InjectedFailure))
}

/// The source of the error of a stage while another handle of the same
/// store has a batch open.
#[derive(Debug)]
struct Busy;

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("another handle of this store has a batch open")
    }
}

impl std::error::Error for Busy {}

impl StoreReaders for MemoryStore {
    /// Another handle (a clone): it sees what is committed, never another
    /// handle's open batch.
    fn reader(&self) -> Result<Self, StoreError> {
        if lock(&self.shared).unavailable {
            return Err(injected());
        }
        Ok(self.clone())
    }
}

impl EvidenceStore for MemoryStore {
    fn stage(&mut self, records: &[Stamped]) -> Result<(), StoreError> {
        let mut shared = lock(&self.shared);
        if shared.unavailable {
            // The open batch is lost with the store.
            if self.batch.take().is_some() {
                shared.writing = false;
            }
            return Err(injected());
        }
        if self.batch.is_none() {
            if shared.writing {
                return Err(StoreError::Unavailable(Box::new(Busy)));
            }
            shared.writing = true;
        }
        let batch = self
            .batch
            .get_or_insert_with(|| Box::new(shared.state.clone()));
        // Check the whole stage against the batch so far, and only then
        // apply it, so a refused stage leaves no trace and the earlier
        // stages stay.
        let mut staged = Staged::new(batch);
        for record in records {
            staged.check(record)?;
        }
        for record in records {
            batch.apply(record);
        }
        Ok(())
    }

    fn commit_staged(&mut self) -> Result<(), StoreError> {
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        let mut shared = lock(&self.shared);
        shared.writing = false;
        if shared.unavailable {
            return Err(injected());
        }
        if shared.failing_commits > 0 {
            shared.failing_commits -= 1;
            return Err(injected());
        }
        shared.state = *batch;
        Ok(())
    }

    fn abandon(&mut self) {
        if self.batch.take().is_some() {
            lock(&self.shared).writing = false;
        }
    }

    fn last_write(&self) -> Result<Option<Timestamp>, StoreError> {
        self.view(|state| state.records.last().map(|r| r.at))
    }

    fn replay(&self, visit: &mut dyn FnMut(Stamped)) -> Result<(), StoreError> {
        // Copy first so `visit` runs without the lock and may use a clone of
        // this store.
        let records: Vec<Stamped> = self.view(|state| {
            state
                .records
                .iter()
                .filter(|r| r.evidence.is_machine_state())
                .cloned()
                .collect()
        })?;
        records.into_iter().for_each(visit);
        Ok(())
    }

    fn head(&self) -> Result<u64, StoreError> {
        self.view(|state| state.records.len() as u64)
    }

    /// The memory store keeps no hash chain: only the SQLite store does.
    fn chain_head(&self) -> Result<StoreHead, StoreError> {
        Err(StoreError::Unavailable(
            "the memory store keeps no hash chain".into(),
        ))
    }

    fn ledger(
        &self,
        business: &BusinessId,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Stamped)>, StoreError> {
        self.view(|state| {
            (1..)
                .zip(&state.records)
                .skip(usize::try_from(after).unwrap_or(usize::MAX))
                .take_while(|(seq, _)| *seq <= upto)
                .filter(|(_, r)| r.evidence.business() == Some(business))
                .take(limit)
                .map(|(seq, r)| (seq, r.clone()))
                .collect()
        })
    }

    fn decision(&self, id: &DecisionId) -> Result<Option<DecisionRecord>, StoreError> {
        self.view(|state| {
            state.records.iter().find_map(|r| {
                let Evidence::Decision(DecisionEvidence::Raised(d)) = &r.evidence else {
                    return None;
                };
                (&d.id == id).then(|| (**d).clone())
            })
        })
    }

    fn decision_business(&self, id: &DecisionId) -> Result<Option<BusinessId>, StoreError> {
        self.view(|state| state.decisions.get(id).cloned())
    }

    fn message(&self, id: &MessageId) -> Result<Option<MessageFacts>, StoreError> {
        self.view(|state| {
            state
                .message_index
                .get(id)
                .map(|&i| state.messages[i].clone())
        })
    }

    fn undelivered(
        &self,
        business: &BusinessId,
        role: &RoleInstance,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        let to = Recipient::Role(role.clone());
        self.view(|state| {
            state
                .messages
                .iter()
                .filter(|m| {
                    &m.record.business == business && m.record.to == to && m.delivered_to.is_none()
                })
                .take(limit)
                .cloned()
                .collect()
        })
    }

    fn unread(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        self.view(|state| {
            state
                .messages
                .iter()
                .filter(|m| &m.record.business == business && &m.record.to == recipient && !m.read)
                .take(limit)
                .cloned()
                .collect()
        })
    }

    fn unread_count(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
    ) -> Result<u64, StoreError> {
        self.view(|state| {
            let unread = state
                .messages
                .iter()
                .filter(|m| &m.record.business == business && &m.record.to == recipient && !m.read);
            u64::try_from(unread.count()).unwrap_or(u64::MAX)
        })
    }

    fn tasks(&self, business: &BusinessId) -> Result<Vec<TaskView>, StoreError> {
        self.view(|state| {
            state
                .tasks
                .get(business)
                .map(|tasks| tasks.values().cloned().collect())
                .unwrap_or_default()
        })
    }

    fn trail(&self, business: &BusinessId, subject: &Subject) -> Result<Vec<Stamped>, StoreError> {
        self.view(|state| {
            state
                .records
                .iter()
                .filter(|r| r.evidence.business() == Some(business) && r.evidence.concerns(subject))
                .cloned()
                .collect()
        })
    }
}

impl State {
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
            | Evidence::Claim(_)
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
struct Staged<'a> {
    base: &'a State,
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
    fn new(base: &'a State) -> Self {
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

#[cfg(test)]
mod tests {
    use mosaic_domain::evidence::{HumanInput, MessageRecord, RefusalRecord, Sender};
    use mosaic_domain::Refusal;

    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(ms).expect("representable test time")
    }

    fn acme() -> BusinessId {
        BusinessId::parse("acme").expect("valid business id")
    }

    fn dev() -> RoleInstance {
        RoleInstance::parse("dev").expect("valid role")
    }

    /// A human input `n`: a unique fact, so a batch that repeats it is
    /// refused.
    fn human(ms: i64, n: u8) -> Stamped {
        Stamped {
            at: at(ms),
            evidence: Evidence::Human(HumanInput {
                id: EventId::from_random([n; 16]),
                business: acme(),
                verb: "decision.resolve".to_owned(),
                subject: None,
            }),
        }
    }

    /// A message `n` from the human to `dev`.
    fn sent(ms: i64, n: u8) -> Stamped {
        Stamped {
            at: at(ms),
            evidence: Evidence::Message(MessageEvidence::Sent(Box::new(MessageRecord {
                id: MessageId::from_random([n; 16]),
                business: acme(),
                from: Sender::Human,
                to: Recipient::Role(dev()),
                class: None,
                body: format!("message {n}"),
                in_reply_to: None,
                corrects: None,
                decision: None,
                request: None,
            }))),
        }
    }

    /// A refusal: machine state for nobody, but a record.
    fn refusal(ms: i64) -> Stamped {
        Stamped {
            at: at(ms),
            evidence: Evidence::Refused(RefusalRecord {
                business: None,
                agent: None,
                verb: None,
                refusal: Refusal::NotAuthorized,
            }),
        }
    }

    fn is_injected(error: &StoreError) -> bool {
        match error {
            StoreError::Unavailable(source) => source.downcast_ref::<InjectedFailure>().is_some(),
            StoreError::Duplicate
            | StoreError::Dangling
            | StoreError::CrossBusiness
            | StoreError::NonMonotonic
            | StoreError::Malformed => false,
        }
    }

    fn is_busy(error: &StoreError) -> bool {
        match error {
            StoreError::Unavailable(source) => source.downcast_ref::<Busy>().is_some(),
            StoreError::Duplicate
            | StoreError::Dangling
            | StoreError::CrossBusiness
            | StoreError::NonMonotonic
            | StoreError::Malformed => false,
        }
    }

    /// What a handle reads of message 1 and of the newest write.
    fn reads(store: &MemoryStore) -> (Option<Timestamp>, Option<MessageFacts>, usize) {
        (
            store.last_write().expect("last_write"),
            store
                .message(&MessageId::from_random([1; 16]))
                .expect("message"),
            store
                .undelivered(&acme(), &dev(), 100)
                .expect("undelivered")
                .len(),
        )
    }

    #[cfg(feature = "conformance")]
    #[test]
    fn memory_store_conforms() {
        crate::conformance::store::run(MemoryStore::new);
    }

    #[test]
    fn a_clone_sees_nothing_staged_until_commit_staged() {
        let mut writer = MemoryStore::new();
        let reader = writer.clone();
        writer.commit(&[human(1, 9)]).expect("commit");
        writer.stage(&[sent(2, 1)]).expect("first stage");
        writer.stage(&[human(3, 2)]).expect("second stage");
        assert_eq!(reads(&writer).0, Some(at(3)));
        assert!(reads(&writer).1.is_some());
        // The other handle sees only what was committed.
        assert_eq!(reads(&reader), (Some(at(1)), None, 0));
        assert_eq!(reader.records(), vec![human(1, 9)]);
        assert_eq!(writer.records(), vec![human(1, 9)]);
        let mut replayed = Vec::new();
        reader.replay(&mut |r| replayed.push(r)).expect("replay");
        assert_eq!(replayed, vec![]);
        // A clone of the writer is another handle, without its batch.
        assert_eq!(reads(&writer.clone()), (Some(at(1)), None, 0));
        writer.commit_staged().expect("commit_staged");
        assert_eq!(reads(&reader), reads(&writer));
        assert_eq!(reads(&reader).0, Some(at(3)));
        assert_eq!(reader.records(), vec![human(1, 9), sent(2, 1), human(3, 2)]);
    }

    #[test]
    fn a_refused_stage_keeps_the_earlier_stages() {
        let mut store = MemoryStore::new();
        store.stage(&[sent(1, 1)]).expect("first stage");
        let error = store.stage(&[human(2, 2), sent(3, 1)]).unwrap_err();
        assert!(matches!(error, StoreError::Duplicate), "{error:?}");
        let error = store.stage(&[human(1, 3)]).unwrap_err();
        assert!(matches!(error, StoreError::NonMonotonic), "{error:?}");
        // Human input 2 was not kept; it stages now.
        store.stage(&[human(2, 2)]).expect("third stage");
        store.commit_staged().expect("commit_staged");
        assert_eq!(store.records(), vec![sent(1, 1), human(2, 2)]);
    }

    #[test]
    fn an_injected_failure_of_commit_staged_commits_nothing() {
        let mut store = MemoryStore::new();
        let inspector = store.clone();
        store.commit(&[human(1, 9)]).expect("commit");
        store.stage(&[sent(2, 1)]).expect("first stage");
        store
            .stage(&[human(3, 2), refusal(4)])
            .expect("second stage");
        inspector.fail_next_commit();
        let error = store.commit_staged().unwrap_err();
        assert!(is_injected(&error), "{error:?}");
        // Nothing of the batch, through either handle, and no batch open.
        assert_eq!(store.records(), vec![human(1, 9)]);
        assert_eq!(reads(&store), (Some(at(1)), None, 0));
        assert_eq!(reads(&inspector), (Some(at(1)), None, 0));
        store.abandon();
        store.commit_staged().expect("nothing to commit");
        assert_eq!(store.records(), vec![human(1, 9)]);
        // The other handle may write: the writer's lock was released.
        let mut other = inspector.clone();
        other
            .commit(&[refusal(5)])
            .expect("the other handle commits");
        // The failure was used up, and the batch's records (at later times)
        // commit again, which they could not if any had been kept.
        store
            .commit(&[sent(6, 1), human(7, 2)])
            .expect("the same ids commit");
        assert_eq!(
            inspector.records(),
            vec![human(1, 9), refusal(5), sent(6, 1), human(7, 2)]
        );
    }

    #[test]
    fn an_armed_failure_waits_for_a_batch() {
        let mut store = MemoryStore::new();
        store.fail_next_commit();
        // No batch open: nothing to commit, and the failure stays armed.
        store.commit_staged().expect("nothing to commit");
        // A stage refused by a rule reaches no commit either.
        let error = store.commit(&[human(1, 1), human(2, 1)]).unwrap_err();
        assert!(matches!(error, StoreError::Duplicate), "{error:?}");
        let error = store.commit(&[human(3, 1)]).unwrap_err();
        assert!(is_injected(&error), "{error:?}");
        store
            .commit(&[human(4, 1)])
            .expect("the failure was used up");
        assert_eq!(store.records(), vec![human(4, 1)]);
    }

    #[test]
    fn an_unavailable_store_loses_the_open_batch() {
        let mut store = MemoryStore::new();
        store.stage(&[sent(1, 1)]).expect("first stage");
        store.set_unavailable(true);
        assert!(is_injected(&store.last_write().unwrap_err()));
        let error = store.stage(&[human(2, 2)]).unwrap_err();
        assert!(is_injected(&error), "{error:?}");
        store.abandon();
        store.set_unavailable(false);
        assert_eq!(reads(&store), (None, None, 0));
        store.commit_staged().expect("no batch is open");
        assert_eq!(store.records(), vec![]);
        // The same at commit_staged.
        store.stage(&[sent(3, 1)]).expect("stage");
        store.set_unavailable(true);
        let error = store.commit_staged().unwrap_err();
        assert!(is_injected(&error), "{error:?}");
        store.set_unavailable(false);
        assert_eq!(reads(&store), (None, None, 0));
        store.commit(&[sent(4, 1)]).expect("message 1 is free");
        assert_eq!(store.records(), vec![sent(4, 1)]);
    }

    #[test]
    fn one_handle_at_a_time_writes() {
        let mut first = MemoryStore::new();
        let mut second = first.clone();
        first.stage(&[human(1, 1)]).expect("first stage");
        let error = second.commit(&[human(2, 2)]).unwrap_err();
        assert!(is_busy(&error), "{error:?}");
        let error = second.stage(&[]).unwrap_err();
        assert!(is_busy(&error), "{error:?}");
        // The busy handle has no batch, so it has nothing to drop.
        second.abandon();
        first.stage(&[human(3, 3)]).expect("the writer goes on");
        first.commit_staged().expect("commit_staged");
        second
            .commit(&[human(4, 2)])
            .expect("free after commit_staged");
        second.stage(&[human(5, 5)]).expect("second stage");
        second.abandon();
        first.stage(&[human(6, 6)]).expect("free after abandon");
        drop(first);
        second.commit(&[human(7, 7)]).expect("free after drop");
        assert_eq!(
            second.records(),
            vec![human(1, 1), human(3, 3), human(4, 2), human(7, 7)]
        );
    }
}
