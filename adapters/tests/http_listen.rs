//! Browser control's listener queues a burst. Over TCP a full accept queue
//! drops the SYN and the client sends it again only a second later, so the
//! queue must hold more connections than the port ever holds at once.

use std::net::TcpStream;
use std::time::Duration;

use mosaic_adapters::http::{bind, MAX_HTTP_CONNECTIONS};

/// Well under the second a dropped SYN costs.
const CONNECT_WITHIN: Duration = Duration::from_millis(500);

#[test]
fn a_burst_of_more_connections_than_the_port_holds_is_queued_not_dropped() {
    let listener = bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    // Nothing accepts: every connection waits in the kernel's queue.
    let queued: Vec<TcpStream> = (0..=MAX_HTTP_CONNECTIONS)
        .map(|i| {
            TcpStream::connect_timeout(&address, CONNECT_WITHIN)
                .unwrap_or_else(|e| panic!("connection {i} was not queued: {e}"))
        })
        .collect();
    assert_eq!(queued.len(), MAX_HTTP_CONNECTIONS + 1);
}
