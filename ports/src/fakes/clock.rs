//! [`ManualClock`]: a clock that only moves when a test moves it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mosaic_domain::Timestamp;

use super::lock;
use crate::clock::Clock;

/// A [`Clock`] that reads whatever the test last set.
///
/// Clones share one time, so a test keeps a clone and moves the time of the
/// runtime that owns the other; it is `Send + Sync` like every clock. It never
/// moves by itself, which is what lets tests reach deadlines without sleeping.
///
/// ```
/// use std::time::Duration;
/// use mosaic_domain::Timestamp;
/// use mosaic_ports::fakes::ManualClock;
/// use mosaic_ports::Clock;
///
/// let clock = ManualClock::new(Timestamp::EPOCH);
/// let runtime_clock = clock.clone();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(runtime_clock.now().unix_ms(), 1500);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<Timestamp>>,
}

impl ManualClock {
    /// A clock that reads `start` until it is set or advanced.
    pub fn new(start: Timestamp) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// Sets the time, also backwards: the wall clock may step back and the
    /// broker must cope.
    pub fn set(&self, now: Timestamp) {
        *lock(&self.now) = now;
    }

    /// Moves the time forward by `by`, saturating at the largest
    /// representable instant (9999-12-31T23:59:59.999Z).
    pub fn advance(&self, by: Duration) {
        let mut now = lock(&self.now);
        *now = now.saturating_add(by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *lock(&self.now)
    }
}
