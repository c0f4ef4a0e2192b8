//! Test support shared by the cross-crate tests in `tests/tests/`.
//!
//! [`Driver`] (from `mosaic-app`) is the runtime loop the tests drive;
//! [`FreshStore`] makes an empty store of either kind, and [`Restart`]
//! reopens it and rebuilds the bus from it alone, as a broker restart does.
//! `fixture.rs` is the shared business; `scenario.rs` a working day that
//! leaves every kind of evidence; `sqlite.rs` a real SQLite store in a
//! private temporary directory; `bin/hold_lock.rs` a child that holds the
//! writer lock until its standard input closes.

pub mod fixture;
pub mod scenario;
pub mod sqlite;

pub use mosaic_app::runtime::Driver;
use mosaic_domain::{Business, Refusal};
use mosaic_ports::EvidenceStore;

/// A store the reference-model tests can make empty, once per case, and
/// make fail on purpose.
pub trait FreshStore: EvidenceStore + Sized {
    /// A new, empty store.
    fn fresh() -> Self;

    /// While `on`, every commit fails with `StoreError::Unavailable` and
    /// commits nothing.
    fn set_unavailable(&mut self, on: bool);

    /// The same store as a restarted broker finds it: a file store is closed
    /// and opened again through every open-time check.
    fn reopen(self) -> Self;
}

impl FreshStore for mosaic_ports::fakes::MemoryStore {
    fn fresh() -> Self {
        Self::new()
    }

    fn set_unavailable(&mut self, on: bool) {
        mosaic_ports::fakes::MemoryStore::set_unavailable(self, on);
    }

    fn reopen(self) -> Self {
        self
    }
}

/// Restarting a driver over a [`FreshStore`].
pub trait Restart: Sized {
    /// Reopens the store and rebuilds the bus from it alone, possibly under
    /// a changed policy.
    ///
    /// # Errors
    /// `storage-unavailable` when the store cannot be read.
    fn restart(self, businesses: Vec<Business>) -> Result<Self, Refusal>;
}

impl<S: FreshStore> Restart for Driver<S> {
    fn restart(self, businesses: Vec<Business>) -> Result<Self, Refusal> {
        Driver::open(businesses, self.into_store().reopen())
    }
}
