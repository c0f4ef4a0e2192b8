//! The entropy port: the only source of capabilities, claim tokens and ids.

use mosaic_domain::{BrowserRequestId, Capability, ClaimToken, DecisionId, EventId, MessageId};

/// Why entropy could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("entropy unavailable")]
pub struct EntropyError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// A source of random bytes.
///
/// Implementations: `mosaic-adapters` OS entropy and `fakes::SeededEntropy`
/// (deterministic, for tests only).
pub trait Entropy: Send {
    /// Fills `buf` with random bytes.
    ///
    /// The real adapter MUST use the operating system's cryptographic
    /// generator, because capabilities are bearer secrets. Outputs MUST NOT
    /// repeat in practice.
    ///
    /// # Errors
    /// [`EntropyError`] when the generator cannot be read; the caller MUST
    /// refuse rather than fall back to weaker randomness.
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError>;

    /// A fresh 256-bit capability.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn capability(&mut self) -> Result<Capability, EntropyError> {
        let mut b = [0u8; 32];
        self.fill(&mut b)?;
        Ok(Capability::from_random(b))
    }

    /// A fresh browser claim token.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn claim_token(&mut self) -> Result<ClaimToken, EntropyError> {
        let mut b = [0u8; 32];
        self.fill(&mut b)?;
        Ok(ClaimToken::from_random(b))
    }

    /// Sixteen fresh random bytes for a UUID-shaped id.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn uuid_bytes(&mut self) -> Result<[u8; 16], EntropyError> {
        let mut b = [0u8; 16];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// A fresh decision id.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn decision_id(&mut self) -> Result<DecisionId, EntropyError> {
        self.uuid_bytes().map(DecisionId::from_random)
    }

    /// A fresh message id.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn message_id(&mut self) -> Result<MessageId, EntropyError> {
        self.uuid_bytes().map(MessageId::from_random)
    }

    /// A fresh event id.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn event_id(&mut self) -> Result<EventId, EntropyError> {
        self.uuid_bytes().map(EventId::from_random)
    }

    /// A fresh browser request id.
    ///
    /// # Errors
    /// As [`Entropy::fill`].
    fn browser_request_id(&mut self) -> Result<BrowserRequestId, EntropyError> {
        self.uuid_bytes().map(BrowserRequestId::from_random)
    }
}
