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
/// Every jump calls the hooks registered with [`Clock::on_jump`], so a
/// runtime waiting for a deadline wakes when the test reaches it.
#[derive(Clone)]
pub struct ManualClock {
    now: Arc<Mutex<Timestamp>>,
    hooks: Arc<Mutex<Vec<Hook>>>,
}

type Hook = Arc<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &*lock(&self.now))
            .finish_non_exhaustive()
    }
}

impl ManualClock {
    /// A clock that reads `start` until it is set or advanced.
    pub fn new(start: Timestamp) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
            hooks: Arc::default(),
        }
    }

    /// Sets the time, also backwards: the wall clock may step back and the
    /// broker must cope.
    pub fn set(&self, now: Timestamp) {
        *lock(&self.now) = now;
        self.jumped();
    }

    /// Moves the time forward by `by`, saturating at the largest
    /// representable instant (9999-12-31T23:59:59.999Z).
    pub fn advance(&self, by: Duration) {
        {
            let mut now = lock(&self.now);
            *now = now.saturating_add(by);
        }
        self.jumped();
    }

    /// Calls every hook, holding no lock of the clock's (a hook may read it).
    fn jumped(&self) {
        let hooks: Vec<Hook> = lock(&self.hooks).clone();
        for hook in hooks {
            hook();
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *lock(&self.now)
    }

    fn on_jump(&self, moved: Box<dyn Fn() + Send + Sync>) {
        lock(&self.hooks).push(Arc::from(moved));
    }
}
