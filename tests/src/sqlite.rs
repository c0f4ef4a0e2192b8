//! A real SQLite store in a private temporary directory, for tests.

use mosaic_adapters::sqlite::SqliteStore;
use mosaic_domain::evidence::{DecisionRecord, Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, DecisionId, MessageId, RoleInstance, Timestamp};
use mosaic_ports::fakes::InjectedFailure;
use mosaic_ports::{Closings, EvidenceStore, StoreError, TaskView};

use crate::FreshStore;

/// A [`SqliteStore`] on a real file in its own temporary directory, removed
/// on drop. While marked unavailable, commits fail as a full disk would:
/// the staged batch is rolled back and nothing becomes durable.
#[derive(Debug)]
pub struct TempSqlite {
    store: SqliteStore,
    unavailable: bool,
    /// A stage succeeded since the last commit or abandon.
    staged: bool,
    // Declared last so the store closes before its directory goes.
    dir: tempfile::TempDir,
}

impl TempSqlite {
    /// The directory holding `bus.sqlite`.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl FreshStore for TempSqlite {
    fn fresh() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = SqliteStore::create(&dir.path().join("bus.sqlite")).expect("a new store");
        Self {
            store,
            unavailable: false,
            staged: false,
            dir,
        }
    }

    fn set_unavailable(&mut self, on: bool) {
        self.unavailable = on;
    }

    /// Closes the file and opens it again through every open-time check.
    ///
    /// # Panics
    /// When the file no longer opens: that is a test failure.
    fn reopen(self) -> Self {
        let Self {
            store,
            unavailable,
            dir,
            ..
        } = self;
        let path = store.path().to_owned();
        drop(store);
        Self {
            store: SqliteStore::open(&path).expect("a store the tests wrote reopens"),
            unavailable,
            staged: false,
            dir,
        }
    }
}

impl EvidenceStore for TempSqlite {
    fn stage(&mut self, records: &[Stamped]) -> Result<(), StoreError> {
        self.store.stage(records)?;
        self.staged = true;
        Ok(())
    }

    /// Fails while marked unavailable and a batch is open, dropping the
    /// batch SQLite holds.
    fn commit_staged(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.staged) && self.unavailable {
            self.store.abandon();
            return Err(StoreError::Unavailable(Box::new(InjectedFailure)));
        }
        self.store.commit_staged()
    }

    fn abandon(&mut self) {
        self.staged = false;
        self.store.abandon();
    }

    fn take_reserve(&mut self) -> Result<(), StoreError> {
        self.store.take_reserve()
    }

    fn release_reserve(&mut self) -> Result<bool, StoreError> {
        self.store.release_reserve()
    }

    fn check_room(&self) -> Result<(), StoreError> {
        self.store.check_room()
    }

    fn last_write(&self) -> Result<Option<Timestamp>, StoreError> {
        self.store.last_write()
    }

    fn replay(&self, visit: &mut dyn FnMut(Stamped)) -> Result<(), StoreError> {
        self.store.replay(visit)
    }

    fn head(&self) -> Result<u64, StoreError> {
        self.store.head()
    }

    fn chain_head(&self) -> Result<mosaic_ports::StoreHead, StoreError> {
        self.store.chain_head()
    }

    fn ledger(
        &self,
        business: &BusinessId,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Stamped)>, StoreError> {
        self.store.ledger(business, after, upto, limit)
    }

    fn decision(&self, id: &DecisionId) -> Result<Option<DecisionRecord>, StoreError> {
        self.store.decision(id)
    }

    fn decision_business(&self, id: &DecisionId) -> Result<Option<BusinessId>, StoreError> {
        self.store.decision_business(id)
    }

    fn message(&self, id: &MessageId) -> Result<Option<MessageFacts>, StoreError> {
        self.store.message(id)
    }

    fn undelivered(
        &self,
        business: &BusinessId,
        role: &RoleInstance,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        self.store.undelivered(business, role, limit)
    }

    fn unread(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
        limit: usize,
    ) -> Result<Vec<MessageFacts>, StoreError> {
        self.store.unread(business, recipient, limit)
    }

    fn unread_count(
        &self,
        business: &BusinessId,
        recipient: &Recipient,
    ) -> Result<u64, StoreError> {
        self.store.unread_count(business, recipient)
    }

    fn tasks(&self, business: &BusinessId) -> Result<Vec<TaskView>, StoreError> {
        self.store.tasks(business)
    }

    fn trail(&self, business: &BusinessId, subject: &Subject) -> Result<Vec<Stamped>, StoreError> {
        self.store.trail(business, subject)
    }

    fn closings(
        &self,
        business: &BusinessId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Closings, StoreError> {
        self.store.closings(business, before, limit)
    }
}

/// A store file holding the whole [`crate::scenario::working_day`], closed,
/// in its own temporary directory.
pub fn populated() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("bus.sqlite");
    let store = SqliteStore::create(&path).expect("new store");
    let mut driver = crate::Driver::open(crate::fixture::policy_a(), store).expect("opens");
    crate::scenario::working_day(&mut driver, &mut 1_000);
    drop(driver);
    (dir, path)
}
