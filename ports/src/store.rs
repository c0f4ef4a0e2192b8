//! The evidence store port: an append-only record with atomic, durable
//! commits and the few reads the verbs need.

use mosaic_domain::evidence::{Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, MessageId, RoleInstance, TaskRef, Timestamp};

/// Why the store refused or failed. Adapters map driver errors onto these;
/// the runtime turns every one of them into a static refusal code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A record repeats a unique fact: a decision or message id, a second
    /// consumption of one decision, a second delivery or read of one message.
    #[error("duplicate fact")]
    Duplicate,
    /// A record refers to a decision, message or launch that does not exist.
    #[error("dangling reference")]
    Dangling,
    /// A record refers to a decision or message of another business.
    #[error("cross-business reference")]
    CrossBusiness,
    /// A record's timestamp is not later than the newest stored one.
    #[error("non-monotonic timestamp")]
    NonMonotonic,
    /// The store cannot be read or written (disk full, read-only, I/O error).
    #[error("store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The current state of a task, from the newest `task.*` observation filed
/// under it. A `task.deleted` observation is a tombstone, reported as such.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskView {
    /// The task.
    pub task: TaskRef,
    /// The kind of the newest observation, for example `task.updated`.
    pub kind: String,
    /// Its JSON body, as text.
    pub body: String,
    /// Whether the newest observation is a `task.deleted` tombstone.
    pub tombstone: bool,
    /// When it was recorded.
    pub at: Timestamp,
}

/// The append-only evidence store.
///
/// Implementations: the SQLite adapter (`mosaic-adapters::sqlite`) and the
/// in-memory fake (`fakes::MemoryStore`); both pass
/// `conformance::store::run`.
pub trait EvidenceStore {
    /// Appends `records` in order as one transaction.
    ///
    /// On `Ok` every record MUST be durable and visible to every read; on
    /// `Err` none of them MAY be visible, ever. Timestamps MUST be strictly
    /// increasing within the batch and after [`EvidenceStore::last_write`].
    /// The store MUST enforce the unique and reference rules of
    /// [`StoreError`] itself, whatever the caller checked.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`], [`StoreError::Dangling`],
    /// [`StoreError::CrossBusiness`], [`StoreError::NonMonotonic`] for a
    /// batch that breaks a rule; [`StoreError::Unavailable`] when the
    /// commit could not be made durable.
    fn commit(&mut self, records: &[Stamped]) -> Result<(), StoreError>;

    /// The newest committed write time, so the broker clock resumes after it.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn last_write(&self) -> Result<Option<Timestamp>, StoreError>;

    /// Calls `visit` with every committed record for which
    /// `Evidence::is_machine_state` holds, in commit order. It MAY skip
    /// other records.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn replay(&self, visit: &mut dyn FnMut(Stamped)) -> Result<(), StoreError>;

    /// The facts about one message of `business`, or `None` when no message
    /// has this id in any business. A message of another business MUST be
    /// returned as it is (the caller refuses with `cross-business`).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn message(&self, id: &MessageId) -> Result<Option<MessageFacts>, StoreError>;

    /// Up to `limit` messages of `business` addressed to `role` and never
    /// delivered to anyone, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn undelivered(
        &self,
        business: &BusinessId,
        role: &RoleInstance,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError>;

    /// Every message of `business` addressed to `recipient` that has not been
    /// read, oldest first: the message half of an inbox.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn unread(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
    ) -> Result<Vec<MessageFacts>, StoreError>;

    /// The current state of every task of `business` with a `task.*`
    /// observation, tombstones included, ordered by task ref.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn tasks(&self, business: &BusinessId) -> Result<Vec<TaskView>, StoreError>;

    /// Every record of `business` for which `Evidence::concerns(subject)`
    /// holds, in commit order.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn trail(&self, business: &BusinessId, subject: &Subject) -> Result<Vec<Stamped>, StoreError>;
}

