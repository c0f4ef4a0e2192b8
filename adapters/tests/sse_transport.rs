//! The SSE transport of the HTTP adapter passes the browser-transport
//! conformance suite, as the fake does. A client is played the way the
//! `/api/events` route plays it: `connect` opens its stream, dropping the
//! stream and `disconnect` close it, and what it receives is the stream's
//! data lines, parsed back into events.

use std::collections::HashMap;
use std::sync::Arc;

use mosaic_adapters::http::SseTransport;
use mosaic_adapters::wire::browser::browser_action;
use mosaic_domain::{BrowserRequestId, ClientId, Timestamp};
use mosaic_ports::conformance::browser::{self, BrowserHarness};
use mosaic_ports::PaneEvent;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

#[derive(Default)]
struct Streams {
    transport: SseTransport,
    open: HashMap<ClientId, (u64, UnboundedReceiver<Arc<str>>)>,
    /// What closed streams had received and the harness had not read yet.
    left: HashMap<ClientId, Vec<PaneEvent>>,
}

/// One data line back into the event it encodes; `None` for a heartbeat.
fn parse(line: &str) -> Option<PaneEvent> {
    let event: Value = serde_json::from_str(line).expect("an event is JSON");
    let properties = &event["properties"];
    let request = || {
        BrowserRequestId::parse(properties["requestId"].as_str().expect("requestId"))
            .expect("a request id")
    };
    match event["type"].as_str().expect("a type") {
        "heartbeat" => None,
        "browser-control-cancel" => Some(PaneEvent::Cancel { request: request() }),
        "browser-control-request" => {
            let parameters = properties["parameters"]
                .as_object()
                .expect("parameters")
                .clone();
            let action = browser_action(properties["action"].as_str().expect("action"), parameters)
                .expect("a valid action");
            let claim_by = Timestamp::parse(properties["claimBy"].as_str().expect("claimBy"))
                .expect("a timestamp");
            Some(PaneEvent::Request {
                request: request(),
                action,
                claim_by,
            })
        }
        other => panic!("an unknown event type {other}"),
    }
}

fn drain(stream: &mut UnboundedReceiver<Arc<str>>) -> Vec<PaneEvent> {
    std::iter::from_fn(|| stream.try_recv().ok())
        .filter_map(|line| parse(&line))
        .collect()
}

impl BrowserHarness for Streams {
    type Transport = SseTransport;

    fn transport(&self) -> &SseTransport {
        &self.transport
    }

    fn connect(&mut self, client: &ClientId, capable: bool) {
        let opened = self.transport.connect(client.clone(), capable);
        if let Some((_, mut old)) = self.open.insert(client.clone(), opened) {
            let events = drain(&mut old);
            self.left.entry(client.clone()).or_default().extend(events);
        }
    }

    fn disconnect(&mut self, client: &ClientId) {
        if let Some((connection, mut stream)) = self.open.remove(client) {
            let events = drain(&mut stream);
            self.left.entry(client.clone()).or_default().extend(events);
            drop(stream);
            self.transport.disconnect(client, connection);
        }
    }

    fn received(&mut self, client: &ClientId) -> Vec<PaneEvent> {
        // Events go into a stream's channel as they are sent: all there now.
        let mut events = self.left.remove(client).unwrap_or_default();
        if let Some((_, stream)) = self.open.get_mut(client) {
            events.extend(drain(stream));
        }
        events
    }
}

#[test]
fn the_sse_transport_passes_the_browser_transport_suite() {
    browser::run(Streams::default);
}
