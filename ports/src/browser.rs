//! The browser ports: how browser requests reach connected panes
//! ([`BrowserTransport`], implemented by the SSE adapter), and how the
//! panes' claims and results reach the runtime ([`BrowserControl`], the seam
//! the HTTP adapter calls and the runtime's hub implements).

use std::future::Future;
use std::pin::Pin;

use mosaic_domain::browser::{BrowserAction, ClientInfo, PaneOutcome};
use mosaic_domain::{BrowserRequestId, ClaimToken, ClientId, Timestamp};

/// An event for one connected client. Adapters serialize it as the SSE
/// `{type, properties}` JSON of docs/browser.md.
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
    /// `heartbeat`: nothing to do; it keeps the stream alive, and a client
    /// whose stream is gone shows up as [`TransportError::Gone`].
    Heartbeat,
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

    /// Whether `client` is connected now: [`BrowserTransport::clients`]
    /// holds it. A transport MAY answer without listing every client (each
    /// of a hundred panes' claims asks).
    fn is_connected(&self, client: &ClientId) -> bool {
        self.clients().iter().any(|c| c.id == *client)
    }

    /// Queues `event` for `client` without blocking. Events to one client
    /// MUST arrive in the order they were sent.
    ///
    /// # Errors
    /// [`TransportError::Gone`] when the client is not connected.
    fn send(&self, client: &ClientId, event: PaneEvent) -> Result<(), TransportError>;

    /// Queues `event` for each of `to`, as [`BrowserTransport::send`] does
    /// one by one; a transport MAY encode the event once for all of them.
    /// Returns the clients that were gone.
    fn send_all(&self, to: &[ClientId], event: &PaneEvent) -> Vec<ClientId> {
        to.iter()
            .filter(|client| self.send(client, event.clone()).is_err())
            .cloned()
            .collect()
    }
}

/// A claim's answer, still to come: the runtime first waits until the
/// request's authorization is durable.
pub type Claimed<'a> = Pin<Box<dyn Future<Output = Option<ClaimToken>> + Send + 'a>>;

/// What browser clients ask of the runtime: the seam the HTTP transport
/// calls, which the runtime's browser hub implements. `R` is the data of a
/// result.
pub trait BrowserControl<R>: Send + Sync {
    /// `client` claims `request`: the winner's fresh claim token, or `None`.
    /// It MUST grant only a client the request was delivered to and whose
    /// stream is still connected, only the first such claim, and only once
    /// the request's authorization is durable (waiting for that at most
    /// until the request's deadline); a request that is settled, unknown or
    /// whose authorization failed MUST be refused.
    fn claim(&self, request: BrowserRequestId, client: ClientId) -> Claimed<'_>;

    /// A result for `request` posted with `token`: whether it settled the
    /// request. An unknown, expired or settled request, or another token,
    /// MUST answer `false` and settle nothing.
    fn result(
        &self,
        request: BrowserRequestId,
        token: &ClaimToken,
        outcome: PaneOutcome<R>,
    ) -> bool;
}
