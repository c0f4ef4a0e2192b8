//! The evidence store port: an append-only record with atomic, durable
//! commits and the few reads the verbs need.

use mosaic_domain::evidence::{DecisionRecord, Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, DecisionId, MessageId, RoleInstance, TaskRef, Timestamp};

/// Why the store refused or failed. Adapters map driver errors onto these;
/// the runtime turns every one of them into a static refusal code.
///
/// The first five variants are the rules of [`EvidenceStore::commit`], which
/// lists every case of each; [`StoreError::Full`] and
/// [`StoreError::Unavailable`] are no rule but a failed store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A record repeats a unique fact: a decision, message or human input
    /// id; a second consumption of one decision; a second terminal event
    /// (resolved, withdrawn, superseded) of one decision; a second delivery
    /// or read of one message; or a launch that binds an already bound run
    /// to a different record.
    #[error("duplicate fact")]
    Duplicate,
    /// A record refers to a decision, message or human input that does not
    /// exist (neither committed nor earlier in its batch), or acknowledges a
    /// message that was not delivered to the acknowledging run.
    #[error("dangling reference")]
    Dangling,
    /// A record refers to a decision, message or human input of another
    /// business.
    #[error("cross-business reference")]
    CrossBusiness,
    /// A record's timestamp is not later than the newest stored one.
    #[error("non-monotonic timestamp")]
    NonMonotonic,
    /// A record breaks a shape rule: a rule about the record alone, whatever
    /// else is stored (for example a `task.*` observation that is not filed
    /// under a task).
    #[error("malformed record")]
    Malformed,
    /// The store's filesystem has no space left for the write (SQLite's
    /// `SQLITE_FULL`, `ENOSPC`): what [`EvidenceStore::release_reserve`]
    /// may cure. Wherever the contract names [`StoreError::Unavailable`]
    /// for a failed write, this may come instead, with the same effect.
    #[error("store unavailable: no space left")]
    Full(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store cannot be read or written (read-only, I/O error).
    #[error("store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The head of the store's hash chain: what to keep outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHead {
    /// The store's random id.
    pub store_id: String,
    /// The number of committed records.
    pub size: u64,
    /// The hash of the newest record (of the store id, for an empty store).
    pub hash: [u8; 32],
}

impl StoreHead {
    /// The hash in base64 (standard, padded).
    pub fn hash_base64(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.hash)
    }

    /// The note to keep outside the store:
    /// `mosaic-bus/<store id>\n<size>\n<base64 head>\n`, which the `head`
    /// read answers and a verification checks.
    pub fn note(&self) -> String {
        format!(
            "mosaic-bus/{}\n{}\n{}\n",
            self.store_id,
            self.size,
            self.hash_base64()
        )
    }

    /// Parses a note (as [`StoreHead::note`] writes it); `None` when it is
    /// not one.
    pub fn parse_note(text: &str) -> Option<StoreHead> {
        use base64::Engine as _;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        let store_id = lines.next()?.strip_prefix("mosaic-bus/")?;
        let size = lines.next()?;
        let hash = base64::engine::general_purpose::STANDARD
            .decode(lines.next()?)
            .ok()?;
        if lines.next().is_some()
            || store_id.is_empty()
            || size.is_empty()
            || !size.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(StoreHead {
            store_id: store_id.to_owned(),
            size: size.parse().ok()?,
            hash: hash.try_into().ok()?,
        })
    }
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

/// A closed decision, as [`EvidenceStore::closings`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// The closing record's position in the write order.
    pub seq: u64,
    /// The closing record, with its time: a decision's `Resolved`,
    /// `Withdrawn` or `Superseded` record.
    pub closing: Stamped,
    /// The decision as raised.
    pub decision: DecisionRecord,
}

/// A page of closings, newest first, and how many lie before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Closings {
    /// The closings listed, newest first.
    pub rows: Vec<Closed>,
    /// How many closings of the business lie at positions before the last
    /// one listed (before the page's bound when none is listed).
    pub older: u64,
}

/// The append-only evidence store.
///
/// Implementations: the SQLite adapter (`mosaic-adapters::sqlite`) and the
/// in-memory fake (`fakes::MemoryStore`); both pass
/// `conformance::store::run`.
pub trait EvidenceStore {
    /// Appends `records` in order as one transaction: a group commit of one
    /// stage ([`EvidenceStore::stage`], then
    /// [`EvidenceStore::commit_staged`]; with a batch already open, the
    /// records join it and the whole batch commits).
    ///
    /// On `Ok` every record MUST be durable and visible to every read; on
    /// `Err` none of them MAY be visible, ever. The store MUST enforce every
    /// rule listed under `# Errors` itself, whatever the caller checked, and
    /// MUST commit a batch that breaks none of them unless it is
    /// unavailable.
    ///
    /// A reference is satisfied by a record committed earlier or by a record
    /// earlier in the same batch (a decision raised and resolved together; a
    /// message sent, delivered and read together; a human input and the
    /// message or task it requests), never by a later one. A `Superseded`
    /// record refers to both decisions, so the replacing decision's `Raised`
    /// comes first. Decision, message and human-input ids are each unique
    /// across all businesses, and a run id names one run in the whole store.
    ///
    /// What the rules allow on purpose: `Seen` any number of times, before
    /// and after the decision's terminal event; a `Launched` record that
    /// repeats a run's binding exactly (it is committed again); any number of
    /// claims, releases, launch switches, allowed actions, observations and
    /// refusals; an `Ended` record of a run never bound, and claims and
    /// launches of a run after its end (the domain refuses those; the store
    /// keeps what it is given).
    ///
    /// The caller MUST also keep these, which a store need not check: an
    /// observation's `body` is JSON text (RFC 8259); a `blocking` decision
    /// has a `task_ref`; a launch's `pid` is positive and its `start_time` at
    /// most `i64::MAX`. What a store does with a batch that breaks one is
    /// unspecified beyond all-or-nothing: the in-memory fake commits it, the
    /// SQLite store refuses it (its schema checks them).
    ///
    /// # Errors
    /// Each rule names the error of a batch that breaks it; when one batch
    /// breaks several rules, which of their errors is returned is
    /// unspecified.
    ///
    /// [`StoreError::NonMonotonic`]: a record's `at` is not strictly later
    /// than the record before it in the batch, or (for the first record)
    /// than [`EvidenceStore::last_write`].
    ///
    /// [`StoreError::Malformed`], the shape rules of an `Observed` record:
    /// - its `kind` starts with `task.` (case-sensitive) but its `subject`
    ///   is not `Some(Subject::Task(_))`;
    /// - its `kind` is exactly `task.created` but `request` is `None`, or
    ///   `request` is `Some` for any other kind.
    ///
    /// [`StoreError::Duplicate`]:
    /// - a `Raised` decision whose id is taken, in any business;
    /// - a `Sent` message whose id is taken, in any business;
    /// - a `HumanInput` whose id is taken, in any business;
    /// - a second `Consumed` record of one decision;
    /// - a second terminal event (`Resolved`, `Withdrawn` or `Superseded`,
    ///   the last counted for its `id`, not its `by`) of one decision;
    /// - a second `Delivered` record of one message, to any run;
    /// - a second `Read` record of one message;
    /// - a `Launched` record for a run already bound by a `Launched` record
    ///   that differs in any field (business, role, harness, address, pid,
    ///   start time);
    /// - a second `Ended` record (`session.ended`) of one run, in any
    ///   business.
    ///
    /// [`StoreError::Dangling`], a reference to nothing:
    /// - to a decision: the `id` of `Resolved`, `Seen`, `Withdrawn`; the `id`
    ///   and the `by` of `Superseded`; a `Raised` record's `supersedes`;
    ///   `Consumed.decision`; `ClaimEvidence::Revoked.decision`;
    ///   `ActionAllowed.decision`; `MessageRecord.decision`;
    /// - to a message: the `message` of `Delivered`; `MessageRecord`'s
    ///   `in_reply_to` and `corrects`;
    /// - to a human input: `MessageRecord.request`; `Observation.request`;
    /// - a `Read` record whose message was not delivered, or was delivered
    ///   to another run than the `Read` record's.
    ///
    /// [`StoreError::CrossBusiness`]: any reference listed under `Dangling`
    /// that finds its record in another business than the referring
    /// record's (for `Read`, the delivered message's business).
    ///
    /// [`StoreError::Unavailable`] when the commit could not be made
    /// durable; then, too, nothing of the batch is visible.
    fn commit(&mut self, records: &[Stamped]) -> Result<(), StoreError> {
        if let Err(e) = self.stage(records) {
            self.abandon();
            return Err(e);
        }
        self.commit_staged()
    }

    /// Group commit: adds `records`, in order, to the open batch (opening
    /// one if none is open) as one savepoint. The batch becomes durable at
    /// [`EvidenceStore::commit_staged`], with one sync for all its stages.
    ///
    /// Every rule of [`EvidenceStore::commit`] applies to each stage, with
    /// the records of earlier stages of the open batch counting as
    /// committed: a reference may name them, a unique fact may not repeat
    /// them, and the first record must be later than the last staged one.
    /// Reads through this handle (and [`EvidenceStore::last_write`]) see
    /// the staged records; other handles see nothing of the batch until it
    /// is committed.
    ///
    /// # Errors
    /// A rule's error, as [`EvidenceStore::commit`] lists them: then
    /// nothing of `records` stays staged, and the earlier stages do (the
    /// batch goes on). [`StoreError::Unavailable`]: the whole batch is lost;
    /// the caller MUST [`EvidenceStore::abandon`] it.
    fn stage(&mut self, records: &[Stamped]) -> Result<(), StoreError>;

    /// Makes every staged record durable and visible, in one transaction.
    /// With no batch open it does nothing.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the batch could not be made
    /// durable; then none of its records is visible, ever, and no batch is
    /// open.
    fn commit_staged(&mut self) -> Result<(), StoreError>;

    /// Drops the open batch: none of its records is ever visible. With no
    /// batch open it does nothing.
    fn abandon(&mut self);

    /// Takes the store's disk reserve: space set aside beside the store,
    /// which [`EvidenceStore::release_reserve`] gives back to the store's
    /// own writes when the filesystem is full. Taking a reserve already
    /// held does nothing. It never changes what the store holds, and a
    /// store that keeps no file holds an imaginary one.
    ///
    /// # Errors
    /// [`StoreError::Full`] when the filesystem has no room for the reserve
    /// and some to spare (then no reserve is held);
    /// [`StoreError::Unavailable`] when it cannot be made.
    fn take_reserve(&mut self) -> Result<(), StoreError>;

    /// Releases the disk reserve, so the next writes find its space.
    /// Returns whether one was held. It never changes what the store holds.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a held reserve cannot be released.
    fn release_reserve(&mut self) -> Result<bool, StoreError>;

    /// Checks the room beside the disk reserve, whether it is held or
    /// not: free space at least the reserve's size, and free files
    /// (inodes) to spare, so that what others write next cannot take the
    /// store's room at once. It MUST NOT change what the store holds nor
    /// whether the reserve is held; a store that keeps no file measures an
    /// imaginary disk.
    ///
    /// # Errors
    /// [`StoreError::Full`] without that room; [`StoreError::Unavailable`]
    /// when it cannot be measured.
    fn check_room(&self) -> Result<(), StoreError>;

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

    /// The position of the newest committed record in the store's write
    /// order, or 0 for an empty store. Positions count committed records:
    /// the n-th record ever committed is at position n, so a batch of k
    /// records committed at head p takes positions p + 1 to p + k, in
    /// order. A position never changes, also across a reopen.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn head(&self) -> Result<u64, StoreError>;

    /// The head of the store's hash chain, read in one snapshot: its size
    /// (as [`EvidenceStore::head`]) and the hash of the record there.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], also for a store that keeps no chain.
    fn chain_head(&self) -> Result<StoreHead, StoreError>;

    /// The committed records of `business` at positions after `after` and
    /// at most `upto`, each with its position, in commit order; at most
    /// `limit` of them. It MAY skip a record for which
    /// `Change::of` is `None` (deliveries, reads, spent approvals, allowed
    /// actions, human inputs, refusals), so a caller that got fewer than
    /// `limit` has seen every change up to `upto`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn ledger(
        &self,
        business: &BusinessId,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Stamped)>, StoreError>;

    /// The record of the raised decision `id`, or `None` when no decision
    /// has this id in any business.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn decision(&self, id: &DecisionId) -> Result<Option<DecisionRecord>, StoreError>;

    /// The business of the decision `id`, or `None` when no decision has
    /// this id in any business.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn decision_business(&self, id: &DecisionId) -> Result<Option<BusinessId>, StoreError>;

    /// The facts about the message `id`, whatever its business, or `None`
    /// when no message has this id in any business. A message of another
    /// business than the caller's MUST be returned as it is (the caller
    /// refuses with `cross-business`).
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

    /// Up to `limit` messages of `business` addressed to `recipient` that
    /// have not been read, oldest first: the message half of an inbox.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn unread(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError>;

    /// How many messages of `business` addressed to `recipient` have not
    /// been read: what the human's inbox, which lists only the oldest
    /// [`EvidenceStore::unread`], says of the rest.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn unread_count(&self, business: &BusinessId, recipient: &Recipient)
        -> Result<u64, StoreError>;

    /// The current state of every task of `business` with a `task.*`
    /// observation (all of which are filed under `Subject::Task`, see the
    /// shape rules of [`EvidenceStore::commit`]), tombstones included, ordered
    /// by [`TaskRef`]'s `Ord`: project number, then task number, as numbers
    /// (not by the text form, in which `vikunja:10/1` sorts before
    /// `vikunja:2/1`).
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

    /// Up to `limit` closings of `business`, newest first: its committed
    /// `Resolved`, `Withdrawn` and `Superseded` decision records (never a
    /// `Seen`) at positions before `before` (at any position when `None`),
    /// each with its position and the decision as raised; and in
    /// [`Closings::older`] how many of its closings lie at positions before
    /// the last one listed (before `before` when none is listed, every one
    /// when `before` is `None` too), so a page that lists none counts what
    /// a page from its bound would list.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    fn closings(
        &self,
        business: &BusinessId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Closings, StoreError>;
}

/// A store whose reads can be served beside its one writer: the runtime
/// answers reads on handles of their own, never behind a commit.
///
/// Implementations: the SQLite adapter (a connection in WAL mode, which
/// sees the last commit and never waits for one) and `fakes::MemoryStore`
/// (another handle on the same state); both pass
/// `conformance::store::readers`.
pub trait StoreReaders: EvidenceStore + Sized {
    /// Another handle on this store, for reads only. It MUST see every
    /// batch committed on any handle, before and after it was opened, and
    /// MUST NOT see a batch that is staged and not yet committed.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when no handle can be opened.
    fn reader(&self) -> Result<Self, StoreError>;
}
