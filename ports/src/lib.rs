//! The ports of mosaic-bus: the traits the core needs from the outside world.
//!
//! Layout: one module per port ([`store`], [`clock`], [`entropy`],
//! [`process`], [`credentials`], [`browser`]), each a trait whose methods
//! state their contract with MUST wording and an `# Errors` section.
//! Feature `fakes` adds hand-written in-memory implementations ([`fakes`])
//! that other teams can swap in for their integration tests; feature
//! `conformance` adds one suite per port ([`conformance`]) that the fakes pass
//! here and the real adapters pass in `mosaic-adapters`' tests.
//!
//! Ports are synchronous where the backend is (SQLite, `/proc`, files);
//! the runtime decides where to block.
#![warn(missing_docs, unreachable_pub)]

pub mod browser;
pub mod clock;
pub mod credentials;
pub mod entropy;
pub mod process;
pub mod store;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "fakes")]
pub mod fakes;

pub use browser::{BrowserControl, BrowserTransport, Claimed, PaneEvent, TransportError};
pub use clock::Clock;
pub use credentials::{CredentialError, Credentials};
pub use entropy::{Entropy, EntropyError};
pub use process::{ExeIdentity, NamespaceId, Namespaces, ProcessError, ProcessInfo, ProcessTable};
pub use store::{Closed, Closings, EvidenceStore, StoreError, StoreHead, StoreReaders, TaskView};
