//! [`MemoryStore`]: the evidence store in memory, with the SQLite store's rules.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use mosaic_domain::evidence::{
    DecisionEvidence, DecisionRecord, Evidence, Recipient, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, DecisionId, MessageId, RoleInstance, Timestamp};

use super::ledger::{Staged, State};
use super::{lock, InjectedFailure};
use crate::store::{
    Closed, Closings, EvidenceStore, StoreError, StoreHead, StoreReaders, TaskView,
};

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
/// [`MemoryStore::set_full`] fills the imaginary disk the store and its
/// reserve live on; the source of those errors is [`InjectedFailure`].
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
    /// Whether the imaginary disk is full ([`MemoryStore::set_full`]).
    full: bool,
    /// Whether the disk reserve is held.
    reserve: bool,
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

    /// While `full` is true the store's imaginary disk has no space left:
    /// a commit of a batch fails with [`StoreError::Full`] and drops the
    /// batch while the disk reserve is held, and succeeds once it is
    /// released (the writes take the reserve's space); taking the reserve
    /// fails with [`StoreError::Full`], and so does checking the room
    /// beside it. Cleared, space has returned.
    pub fn set_full(&self, full: bool) {
        lock(&self.shared).full = full;
    }

    /// Whether the disk reserve is held, on any handle.
    pub fn holds_reserve(&self) -> bool {
        lock(&self.shared).reserve
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

/// The memory store's id, the same for every memory store.
const MEMORY_STORE_ID: &str = "memory";

/// One link of the memory store's chain: `text` after `before`, hashed
/// with std's SipHash under four keys for 32 bytes. The fake keeps the
/// chain's shape (a size, and a hash that follows every record), not a
/// cryptographic chain's strength, which is the SQLite store's.
fn link(before: &[u8; 32], text: &str) -> [u8; 32] {
    use std::hash::{Hash as _, Hasher as _};
    let mut hash = [0_u8; 32];
    for (key, part) in hash.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (key, before, text).hash(&mut hasher);
        part.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    hash
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
        if shared.full && shared.reserve {
            return Err(StoreError::Full(Box::new(InjectedFailure)));
        }
        shared.state = *batch;
        Ok(())
    }

    fn abandon(&mut self) {
        if self.batch.take().is_some() {
            lock(&self.shared).writing = false;
        }
    }

    fn take_reserve(&mut self) -> Result<(), StoreError> {
        let mut shared = self.available()?;
        if shared.reserve {
            return Ok(());
        }
        if shared.full {
            return Err(StoreError::Full(Box::new(InjectedFailure)));
        }
        shared.reserve = true;
        Ok(())
    }

    fn release_reserve(&mut self) -> Result<bool, StoreError> {
        let mut shared = self.available()?;
        Ok(std::mem::take(&mut shared.reserve))
    }

    fn check_room(&self) -> Result<(), StoreError> {
        if self.available()?.full {
            return Err(StoreError::Full(Box::new(InjectedFailure)));
        }
        Ok(())
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

    /// The memory store's chain: each link hashes the one before it and
    /// the record ([`link`]), from a first link of the store's id.
    fn chain_head(&self) -> Result<StoreHead, StoreError> {
        self.view(|state| {
            let first = link(&[0; 32], MEMORY_STORE_ID);
            let hash = state
                .records
                .iter()
                .fold(first, |hash, record| link(&hash, &format!("{record:?}")));
            StoreHead {
                store_id: MEMORY_STORE_ID.to_owned(),
                size: state.records.len() as u64,
                hash,
            }
        })
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

    fn closings(
        &self,
        business: &BusinessId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Closings, StoreError> {
        self.view(|state| {
            let raised = |id: &DecisionId| {
                state.records.iter().find_map(|r| {
                    let Evidence::Decision(DecisionEvidence::Raised(d)) = &r.evidence else {
                        return None;
                    };
                    (&d.id == id).then(|| (**d).clone())
                })
            };
            let mut closings: Vec<(u64, &Stamped, &DecisionId)> = (1..)
                .zip(&state.records)
                .take_while(|(seq, _)| before.is_none_or(|before| *seq < before))
                .filter(|(_, r)| r.evidence.business() == Some(business))
                .filter_map(|(seq, r)| r.evidence.closes().map(|id| (seq, r, id)))
                .collect();
            let shown = closings.len().saturating_sub(limit);
            let rows = closings
                .drain(shown..)
                .rev()
                .filter_map(|(seq, closing, id)| {
                    raised(id).map(|decision| Closed {
                        seq,
                        closing: closing.clone(),
                        decision,
                    })
                })
                .collect();
            Closings {
                rows,
                older: u64::try_from(closings.len()).unwrap_or(u64::MAX),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use mosaic_domain::evidence::{
        HumanInput, MessageEvidence, MessageRecord, RefusalRecord, Sender,
    };
    use mosaic_domain::{EventId, Refusal};

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
            StoreError::Full(_)
            | StoreError::Duplicate
            | StoreError::Dangling
            | StoreError::CrossBusiness
            | StoreError::NonMonotonic
            | StoreError::Malformed => false,
        }
    }

    fn is_busy(error: &StoreError) -> bool {
        match error {
            StoreError::Unavailable(source) => source.downcast_ref::<Busy>().is_some(),
            StoreError::Full(_)
            | StoreError::Duplicate
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
    fn a_full_disk_fails_commits_until_the_reserve_is_released() {
        let mut store = MemoryStore::new();
        store.take_reserve().expect("room");
        store.set_full(true);
        match store.commit(&[human(1, 1)]) {
            Err(StoreError::Full(_)) => {}
            other => panic!("a full disk with the reserve held: {other:?}"),
        }
        assert!(store.records().is_empty());
        assert!(matches!(store.take_reserve(), Ok(())), "held already");
        assert!(store.release_reserve().expect("released"));
        store.commit(&[human(1, 1)]).expect("the reserve's room");
        assert!(matches!(store.take_reserve(), Err(StoreError::Full(_))));
        store.set_full(false);
        store.take_reserve().expect("space returned");
        assert!(store.holds_reserve());
        assert_eq!(store.records(), vec![human(1, 1)]);
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
