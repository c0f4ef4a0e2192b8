//! Hand-written in-memory implementations of every port, for tests.
//!
//! Each fake keeps the contract of its trait (every fake passes the matching
//! suite of the `conformance` module, behind the feature of that name) and
//! adds what a test needs to steer or inspect it: failure injection on the
//! store, a settable clock, a seeded entropy source, synthetic process
//! ancestries, a credential map, and a browser transport whose clients a
//! test connects and disconnects.
//!
//! Fakes that a test keeps a handle on while the runtime owns another
//! ([`MemoryStore`], [`ManualClock`], [`FakeProcessTable`],
//! [`FakeCredentials`], [`FakeBrowserTransport`]) share their state between
//! clones, like two handles on one database or one kernel: clone the fake,
//! give one clone to the code under test, and inspect or steer through the
//! other. Build a new value (`new()`) for an independent instance.
//!
//! None of these may be used outside tests: [`SeededEntropy`] in particular
//! hands out predictable capabilities.

mod browser;
mod clock;
mod credentials;
mod entropy;
mod ledger;
mod process;
mod store;

use std::fmt;

pub use self::browser::FakeBrowserTransport;
pub use self::clock::ManualClock;
pub use self::credentials::FakeCredentials;
pub use self::entropy::{FailingEntropy, SeededEntropy};
pub use self::process::{FakeEnviron, FakeProcess, FakeProcessTable, HOST_NAMESPACES};
pub use self::store::MemoryStore;

/// The source error of every failure a fake reports because a test asked it
/// to, so a test can tell an injected failure from a real one by downcasting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectedFailure;

impl fmt::Display for InjectedFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("failure injected by a test")
    }
}

impl std::error::Error for InjectedFailure {}

/// Locks `mutex`, ignoring poisoning: a test that panicked while holding a
/// fake's lock has already failed, and the fake's state is still consistent
/// because every update is made under the lock in one step.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
