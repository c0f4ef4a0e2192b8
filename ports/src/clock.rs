//! The clock port: the only way the core learns the time.

use mosaic_domain::Timestamp;

/// A source of wall-clock time.
///
/// Implementations: `mosaic-adapters` system clock and `fakes::ManualClock`.
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    ///
    /// It MAY step backwards (the broker clock rule keeps write times
    /// monotonic); it MUST NOT block or fail. A clock before 1970 or after
    /// 9999 MUST saturate to the nearest representable instant.
    fn now(&self) -> Timestamp;

    /// Registers `moved`, to be called after every change of the time that
    /// is not the passing of real time: a test setting or advancing its
    /// clock. The runtime waits for its deadlines in real time and wakes
    /// early on `moved`, so a clock that jumps MUST call every registered
    /// `moved` after each jump (outside any lock of its own), and a clock
    /// that only follows real time MAY never call it (the default).
    fn on_jump(&self, moved: Box<dyn Fn() + Send + Sync>) {
        drop(moved);
    }
}
