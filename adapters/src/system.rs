//! The operating system's clock and entropy, as the `Clock` and `Entropy`
//! ports.

use std::time::{SystemTime, UNIX_EPOCH};

use mosaic_domain::Timestamp;
use mosaic_ports::{Clock, Entropy, EntropyError};

/// The wall clock. Readings outside 1970–9999 saturate, as the port asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let nearest = if ms < 0 {
            Timestamp::EPOCH
        } else {
            Timestamp::MAX
        };
        Timestamp::from_unix_ms(ms).unwrap_or(nearest)
    }
}

/// The kernel's cryptographic random generator (`getrandom(2)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        getrandom::fill(buf).map_err(|e| EntropyError(Box::new(e)))
    }
}
