//! A real SQLite store in a private temporary directory, for tests.

use mosaic_adapters::sqlite::SqliteStore;
use mosaic_domain::evidence::{Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, MessageId, RoleInstance, Timestamp};
use mosaic_ports::fakes::InjectedFailure;
use mosaic_ports::{EvidenceStore, StoreError, TaskView};

use crate::FreshStore;

/// A [`SqliteStore`] on a real file in its own temporary directory, removed
/// on drop. While marked unavailable, commits fail as a full disk would,
/// before reaching SQLite.
#[derive(Debug)]
pub struct TempSqlite {
    store: SqliteStore,
    unavailable: bool,
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
        } = self;
        let path = store.path().to_owned();
        drop(store);
        Self {
            store: SqliteStore::open(&path).expect("a store the tests wrote reopens"),
            unavailable,
            dir,
        }
    }
}

impl EvidenceStore for TempSqlite {
    fn commit(&mut self, records: &[Stamped]) -> Result<(), StoreError> {
        if self.unavailable {
            return Err(StoreError::Unavailable(Box::new(InjectedFailure)));
        }
        self.store.commit(records)
    }

    fn last_write(&self) -> Result<Option<Timestamp>, StoreError> {
        self.store.last_write()
    }

    fn replay(&self, visit: &mut dyn FnMut(Stamped)) -> Result<(), StoreError> {
        self.store.replay(visit)
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
    ) -> Result<Vec<MessageFacts>, StoreError> {
        self.store.unread(business, recipient)
    }

    fn tasks(&self, business: &BusinessId) -> Result<Vec<TaskView>, StoreError> {
        self.store.tasks(business)
    }

    fn trail(&self, business: &BusinessId, subject: &Subject) -> Result<Vec<Stamped>, StoreError> {
        self.store.trail(business, subject)
    }
}
