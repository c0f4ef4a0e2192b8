//! [`SeededEntropy`] and [`FailingEntropy`]: predictable and broken entropy
//! sources, for tests only.

use crate::entropy::{Entropy, EntropyError};

use super::InjectedFailure;

/// A deterministic [`Entropy`] source: splitmix64 from a `u64` seed.
///
/// **Test-only.** Its output is predictable from the seed, so a capability it
/// makes is no secret at all; the real adapter uses the operating system's
/// generator. It exists so a test can rerun a scenario with the very same ids
/// and capabilities.
///
/// Different seeds give unrelated streams; one stream does not repeat within
/// 2^64 draws of 8 bytes. A non-empty [`Entropy::fill`] never returns all
/// zero bytes (it draws again), so no capability or token it makes is the
/// all-zero value that a forgotten initialization would also produce.
#[derive(Debug)]
pub struct SeededEntropy {
    state: u64,
}

impl SeededEntropy {
    /// A source whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next splitmix64 output (Steele, Lea and Flood, 2014).
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Entropy for SeededEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        loop {
            for chunk in buf.chunks_mut(8) {
                let bytes = self.next_u64().to_le_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
            if buf.is_empty() || buf.iter().any(|&b| b != 0) {
                return Ok(());
            }
        }
    }
}

/// An [`Entropy`] source whose generator cannot be read: every draw fails
/// with an [`EntropyError`] whose source is [`InjectedFailure`]. For testing
/// that callers refuse instead of falling back to weaker randomness.
#[derive(Debug, Clone, Copy, Default)]
pub struct FailingEntropy;

impl Entropy for FailingEntropy {
    fn fill(&mut self, _buf: &mut [u8]) -> Result<(), EntropyError> {
        Err(EntropyError(Box::new(InjectedFailure)))
    }
}
