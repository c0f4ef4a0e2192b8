//! [`FakeBrowserTransport`]: browser clients that a test connects and
//! disconnects, with every event they were sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mosaic_domain::browser::ClientInfo;
use mosaic_domain::ClientId;

use super::lock;
use crate::browser::{BrowserTransport, PaneEvent, TransportError};

/// A [`BrowserTransport`] whose clients exist because a test said so.
///
/// [`FakeBrowserTransport::connect`] opens a connection with or without the
/// `browser=1` capability; the capability belongs to that connection and
/// dies with it, so a client that reconnects declares it again.
/// [`BrowserTransport::send`] records events per client in order and fails
/// with [`TransportError::Gone`] for a client that is not connected.
/// The record of a client survives its disconnection, so a test can still
/// see what it was sent; [`FakeBrowserTransport::take_events`] drains it.
///
/// Clones share one set of connections: the broker gets one clone, the test
/// plays the panes through another.
///
/// ```
/// use mosaic_domain::{BrowserRequestId, ClientId};
/// use mosaic_ports::fakes::FakeBrowserTransport;
/// use mosaic_ports::{BrowserTransport, PaneEvent, TransportError};
///
/// let panes = FakeBrowserTransport::new();
/// let pane = ClientId::parse("pane-1").unwrap();
/// panes.connect(pane.clone(), true);
/// let cancel = PaneEvent::Cancel { request: BrowserRequestId::from_random([1; 16]) };
/// panes.send(&pane, cancel.clone()).unwrap();
/// assert_eq!(panes.take_events(&pane), vec![cancel.clone()]);
/// panes.disconnect(&pane);
/// assert_eq!(panes.send(&pane, cancel), Err(TransportError::Gone));
/// ```
#[derive(Debug, Clone, Default)]
pub struct FakeBrowserTransport {
    inner: Arc<Mutex<Panes>>,
}

/// The connections, in connection order, and every client's events.
#[derive(Debug, Default)]
struct Panes {
    connected: Vec<ClientInfo>,
    events: HashMap<ClientId, Vec<PaneEvent>>,
}

impl FakeBrowserTransport {
    /// A transport with no clients.
    pub fn new() -> Self {
        Self::default()
    }

    /// Connects `client`, declaring the browser capability when `capable`.
    /// A client that is already connected is reconnected: its old connection
    /// and the capability it declared are dropped first.
    pub fn connect(&self, client: ClientId, capable: bool) {
        let mut panes = lock(&self.inner);
        panes.connected.retain(|c| c.id != client);
        panes.connected.push(ClientInfo {
            id: client,
            capable,
        });
    }

    /// Disconnects `client`; whether it was connected.
    pub fn disconnect(&self, client: &ClientId) -> bool {
        let mut panes = lock(&self.inner);
        let before = panes.connected.len();
        panes.connected.retain(|c| &c.id != client);
        panes.connected.len() != before
    }

    /// Whether `client` is connected now.
    pub fn is_connected(&self, client: &ClientId) -> bool {
        lock(&self.inner).connected.iter().any(|c| &c.id == client)
    }

    /// Every event sent to `client` since the last call, in send order,
    /// across its connections.
    pub fn take_events(&self, client: &ClientId) -> Vec<PaneEvent> {
        lock(&self.inner).events.remove(client).unwrap_or_default()
    }

    /// Every event sent to `client` and not yet taken, without taking them.
    pub fn events(&self, client: &ClientId) -> Vec<PaneEvent> {
        lock(&self.inner)
            .events
            .get(client)
            .cloned()
            .unwrap_or_default()
    }
}

impl BrowserTransport for FakeBrowserTransport {
    /// The connected clients, in the order they connected.
    fn clients(&self) -> Vec<ClientInfo> {
        lock(&self.inner).connected.clone()
    }

    fn send(&self, client: &ClientId, event: PaneEvent) -> Result<(), TransportError> {
        let mut panes = lock(&self.inner);
        if !panes.connected.iter().any(|c| &c.id == client) {
            return Err(TransportError::Gone);
        }
        panes.events.entry(client.clone()).or_default().push(event);
        Ok(())
    }
}
