//! The browser-transport port: how browser requests reach connected panes.

use mosaic_domain::browser::{BrowserAction, ClientInfo};
use mosaic_domain::{BrowserRequestId, ClientId, Timestamp};

/// An event for one connected client. Adapters serialize it as the SSE
/// `{type, properties}` JSON of DESIGN.md §4.
#[derive(Debug, Clone, PartialEq)]
pub enum PaneEvent {
    /// `browser-control-request`.
    Request {
        /// The request id.
        request: BrowserRequestId,
        /// The validated action with its parameters.
        action: BrowserAction,
        /// When an unclaimed request fails.
        claim_by: Timestamp,
    },
    /// `browser-control-cancel`: stop, or do not start, this request.
    Cancel {
        /// The request id.
        request: BrowserRequestId,
    },
}

/// Why an event could not be handed to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The client is not connected (any more).
    #[error("client gone")]
    Gone,
}

/// The set of connected browser clients and a way to send them events.
///
/// Implementations: `mosaic-adapters` SSE server and
/// `fakes::FakeBrowserTransport`.
pub trait BrowserTransport: Send + Sync {
    /// The clients connected now, each with the capability its connection
    /// declared (`browser=1`). A capability MUST die with its connection.
    fn clients(&self) -> Vec<ClientInfo>;

    /// Queues `event` for `client` without blocking. Events to one client
    /// MUST arrive in the order they were sent.
    ///
    /// # Errors
    /// [`TransportError::Gone`] when the client is not connected.
    fn send(&self, client: &ClientId, event: PaneEvent) -> Result<(), TransportError>;
}
