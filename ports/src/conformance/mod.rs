//! One conformance suite per port, generic over the trait, so the fakes and
//! the real adapters are held to the same contract.
//!
//! Each suite is a `run` function that takes a constructor (and, where only
//! the harness can set things up, a fixture or a harness): [`store::run`],
//! [`clock::run`], [`entropy::run`], [`process::run`], [`credentials::run`],
//! [`browser::run`]. It runs every named check on a fresh instance, keeps
//! going after a failure, and then panics with one message that names every
//! failing check and what it saw. A passing suite returns normally.
//!
//! ```text
//! #[test]
//! fn the_sqlite_store_passes_the_store_suite() {
//!     // `TempSqlite` (mosaic-tests): a `SqliteStore` in its own temporary directory.
//!     mosaic_ports::conformance::store::run(TempSqlite::fresh);
//! }
//! ```

pub mod browser;
pub mod clock;
pub mod credentials;
pub mod entropy;
pub mod process;
pub mod store;

use std::fmt::Debug;
use std::panic::{self, AssertUnwindSafe, Location};

/// One named check over a freshly made `T`.
struct Check<'a, T> {
    name: String,
    run: Box<dyn Fn(&mut T) + 'a>,
}

impl<'a, T> Check<'a, T> {
    fn new(name: impl Into<String>, run: impl Fn(&mut T) + 'a) -> Self {
        Self {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

/// Runs every check of `suite` on a value from `make`, then panics naming
/// every check that panicked, with its message.
fn run_checks<T>(suite: &str, checks: Vec<Check<'_, T>>, mut make: impl FnMut() -> T) {
    let total = checks.len();
    let mut failures = Vec::new();
    for check in checks {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            let mut port = make();
            (check.run)(&mut port);
        }));
        if let Err(payload) = outcome {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(a panic without a message)");
            failures.push(format!("  - {}: {message}", check.name));
        }
    }
    if !failures.is_empty() {
        panic!(
            "{suite} conformance: {} of {total} checks failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Fails the current check with `what`, naming the line of the check that
/// called the helper (helpers are `#[track_caller]` all the way up).
#[track_caller]
fn fail(what: std::fmt::Arguments<'_>) -> ! {
    panic!("{what} (at {})", Location::caller())
}

/// Checks `actual == expected`, describing both on failure.
#[track_caller]
fn check_eq<A: PartialEq<E> + Debug, E: Debug>(what: &str, actual: A, expected: E) {
    if actual != expected {
        fail(format_args!(
            "{what}: expected {expected:?}, got {actual:?}"
        ));
    }
}

/// Checks `condition`, failing with `what` otherwise.
#[track_caller]
fn check(what: &str, condition: bool) {
    if !condition {
        fail(format_args!("{what}"));
    }
}
