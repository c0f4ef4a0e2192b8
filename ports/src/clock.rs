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
}
