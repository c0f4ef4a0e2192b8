//! The [`BrowserTransport`] suite.

use mosaic_domain::browser::{BrowserAction, ClientInfo};
use mosaic_domain::{BrowserRequestId, ClientId, Timestamp};

use super::{check_eq, run_checks, Check};
use crate::browser::{BrowserTransport, PaneEvent, TransportError};

/// What the suite needs besides the transport: a way to play browser
/// clients. The SSE adapter implements it with real event-stream
/// connections, the fake with its `connect`/`disconnect`/`take_events`.
pub trait BrowserHarness {
    /// The transport under test.
    type Transport: BrowserTransport;

    /// The transport, as the broker sees it.
    fn transport(&self) -> &Self::Transport;

    /// Opens a connection for `client`, with `browser=1` when `capable`.
    /// When it returns, [`BrowserTransport::clients`] MUST list the client.
    fn connect(&mut self, client: &ClientId, capable: bool);

    /// Closes `client`'s connection. When it returns,
    /// [`BrowserTransport::clients`] MUST no longer list it.
    fn disconnect(&mut self, client: &ClientId);

    /// Every event `client` received since the last call, in arrival order,
    /// over any of its connections. A harness over real connections MUST
    /// first wait until every event the transport accepted before this call
    /// has arrived (or been lost with a closed connection).
    fn received(&mut self, client: &ClientId) -> Vec<PaneEvent>;
}

/// Runs every transport check, each on a fresh harness from `make`.
///
/// Covers: the client list and each connection's capability (which dies
/// with the connection), delivery to exactly the addressed client, order,
/// [`TransportError::Gone`] for clients never or no longer connected, and no
/// event reaching a connection opened after it was refused.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<H: BrowserHarness>(make: impl FnMut() -> H) {
    let checks: Vec<Check<'_, H>> = vec![
        Check::new("no_clients_at_start", no_clients_at_start::<H>),
        Check::new(
            "clients_with_their_capability",
            clients_with_their_capability::<H>,
        ),
        Check::new(
            "send_reaches_only_its_client",
            send_reaches_only_its_client::<H>,
        ),
        Check::new("events_arrive_in_order", events_arrive_in_order::<H>),
        Check::new(
            "send_to_unknown_client_is_gone",
            send_to_unknown_client_is_gone::<H>,
        ),
        Check::new("disconnect_removes_client", disconnect_removes_client::<H>),
        Check::new(
            "capability_dies_with_connection",
            capability_dies_with_connection::<H>,
        ),
        Check::new(
            "reconnection_gets_only_new_events",
            reconnection_gets_only_new_events::<H>,
        ),
        Check::new("many_clients", many_clients::<H>),
    ];
    run_checks("browser transport", checks, make);
}

fn client(name: &str) -> ClientId {
    ClientId::parse(name).expect("valid client id")
}

fn info(name: &str, capable: bool) -> ClientInfo {
    ClientInfo {
        id: client(name),
        capable,
    }
}

fn cancel(n: u8) -> PaneEvent {
    PaneEvent::Cancel {
        request: BrowserRequestId::from_random([n; 16]),
    }
}

fn request(n: u8, action: BrowserAction) -> PaneEvent {
    PaneEvent::Request {
        request: BrowserRequestId::from_random([n; 16]),
        action,
        claim_by: Timestamp::from_unix_ms(1_767_225_600_000 + i64::from(n))
            .expect("representable test time"),
    }
}

/// The connected clients, in id order (the contract fixes no order).
fn clients<H: BrowserHarness>(h: &H) -> Vec<ClientInfo> {
    let mut clients = h.transport().clients();
    clients.sort_by(|x, y| x.id.cmp(&y.id));
    clients
}

fn send<H: BrowserHarness>(h: &H, name: &str, event: PaneEvent) -> Result<(), TransportError> {
    h.transport().send(&client(name), event)
}

fn no_clients_at_start<H: BrowserHarness>(h: &mut H) {
    check_eq("clients of a fresh transport", clients(h), vec![]);
}

fn clients_with_their_capability<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    h.connect(&client("pane-b"), false);
    check_eq(
        "clients",
        clients(h),
        vec![info("pane-a", true), info("pane-b", false)],
    );
}

fn send_reaches_only_its_client<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    h.connect(&client("pane-b"), true);
    check_eq("send to pane-a", send(h, "pane-a", cancel(1)), Ok(()));
    check_eq(
        "received by pane-a",
        h.received(&client("pane-a")),
        vec![cancel(1)],
    );
    check_eq("received by pane-b", h.received(&client("pane-b")), vec![]);
}

fn events_arrive_in_order<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    let events = vec![
        request(1, BrowserAction::Back),
        request(2, BrowserAction::Forward),
        cancel(1),
        request(3, BrowserAction::Back),
        cancel(3),
        cancel(2),
    ];
    for event in &events {
        check_eq("send to pane-a", send(h, "pane-a", event.clone()), Ok(()));
    }
    check_eq(
        "received by pane-a, in send order",
        h.received(&client("pane-a")),
        events,
    );
}

fn send_to_unknown_client_is_gone<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    check_eq(
        "send to a client never connected",
        send(h, "pane-x", cancel(1)),
        Err(TransportError::Gone),
    );
    check_eq("clients", clients(h), vec![info("pane-a", true)]);
    check_eq("received by pane-a", h.received(&client("pane-a")), vec![]);
}

fn disconnect_removes_client<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    h.connect(&client("pane-b"), false);
    h.disconnect(&client("pane-a"));
    check_eq(
        "clients after a disconnect",
        clients(h),
        vec![info("pane-b", false)],
    );
    check_eq(
        "send to a disconnected client",
        send(h, "pane-a", cancel(1)),
        Err(TransportError::Gone),
    );
    check_eq(
        "send to the remaining client",
        send(h, "pane-b", cancel(2)),
        Ok(()),
    );
    check_eq(
        "received by pane-b",
        h.received(&client("pane-b")),
        vec![cancel(2)],
    );
}

fn capability_dies_with_connection<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    h.disconnect(&client("pane-a"));
    h.connect(&client("pane-a"), false);
    check_eq(
        "a reconnection without browser=1",
        clients(h),
        vec![info("pane-a", false)],
    );
    h.disconnect(&client("pane-a"));
    h.connect(&client("pane-a"), true);
    check_eq(
        "a reconnection with browser=1",
        clients(h),
        vec![info("pane-a", true)],
    );
}

fn reconnection_gets_only_new_events<H: BrowserHarness>(h: &mut H) {
    h.connect(&client("pane-a"), true);
    check_eq("first send", send(h, "pane-a", cancel(1)), Ok(()));
    check_eq(
        "received on the first connection",
        h.received(&client("pane-a")),
        vec![cancel(1)],
    );
    h.disconnect(&client("pane-a"));
    check_eq(
        "send while disconnected",
        send(h, "pane-a", cancel(2)),
        Err(TransportError::Gone),
    );
    h.connect(&client("pane-a"), true);
    check_eq(
        "send after reconnecting",
        send(h, "pane-a", cancel(3)),
        Ok(()),
    );
    check_eq(
        "received on the second connection",
        h.received(&client("pane-a")),
        vec![cancel(3)],
    );
}

fn many_clients<H: BrowserHarness>(h: &mut H) {
    let names: Vec<String> = (0..100).map(|n| format!("pane-{n:03}")).collect();
    for (n, name) in names.iter().enumerate() {
        h.connect(&client(name), n == 42);
    }
    let expected: Vec<ClientInfo> = names
        .iter()
        .enumerate()
        .map(|(n, name)| info(name, n == 42))
        .collect();
    check_eq("100 clients, one capable", clients(h), expected);
    check_eq(
        "send to the capable one",
        send(h, "pane-042", cancel(9)),
        Ok(()),
    );
    check_eq(
        "received by the capable one",
        h.received(&client("pane-042")),
        vec![cancel(9)],
    );
    check_eq(
        "received by another",
        h.received(&client("pane-041")),
        vec![],
    );
}
