//! Many and hostile connections, the places of connections that have not
//! authenticated and the human reserve, the disconnect signal and shutdown.

use super::*;

#[test]
fn a_thousand_dropped_connections_leave_the_server_serving() {
    let server = Running::start(echo(), Limits::default());
    for i in 0..1_000 {
        let mut stream = UnixStream::connect(&server.path).expect("connect");
        // Nothing, a partial line, or a whole line whose answer nobody reads.
        match i % 3 {
            0 => {}
            1 => stream.write_all(b"{\"partial").expect("write"),
            _ => stream.write_all(b"whole\n").expect("write"),
        }
        drop(stream);
    }
    let reply = server.client().call_line(b"still here").expect("reply");
    assert_line(&reply, b"still here");
}

#[test]
fn connections_beyond_the_cap_are_refused_unread() {
    let server = Running::start(
        echo(),
        Limits {
            max_connections: 2,
            ..Limits::default()
        },
    );
    // Two silent connections hold both slots: the accept loop takes
    // connections in order, so both are admitted before the third.
    let mut first = server.raw();
    let _second = server.raw();
    let third = server.raw();
    assert_line(&read_all(&third), &wire_refusal(Refusal::BrokerUnavailable));
    assert_eq!(
        server.client().call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );

    // The first connection ends (bad request); its slot is free before the
    // server closes it, so the next client is served.
    first.write_all(b"x").expect("write");
    first
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&first), &wire_refusal(Refusal::BadRequest));
    let reply = server.client().call_line(b"served").expect("reply");
    assert_line(&reply, b"served");
}

#[test]
fn sixty_four_concurrent_clients_are_all_answered() {
    const CLIENTS: usize = 64;
    // No handler answers before all 64 are in it at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let server = Running::start(
        move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
            let barrier = Arc::clone(&barrier);
            async move {
                barrier.wait().await;
                line
            }
        },
        Limits::default(),
    );
    let callers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let client = server.client();
            std::thread::spawn(move || (i, client.call_line(format!("client {i}").as_bytes())))
        })
        .collect();
    for caller in callers {
        let (i, reply) = caller.join().expect("caller");
        assert_line(&reply.expect("reply"), format!("client {i}").as_bytes());
    }
}

// ---------------------------------------------------------------- connections that have not authenticated

/// Echoes every line; a line starting `cap` names a caller, one starting
/// `human` is a human line, any other is nobody's.
struct Standings;

impl Handler for Standings {
    fn sender(&self, _peer: Peer, line: &[u8]) -> Sender {
        if line.starts_with(b"cap") {
            Sender::Caller
        } else if line.starts_with(b"human") {
            Sender::Human
        } else {
            Sender::Nobody
        }
    }

    fn may_use_reserve(&self, _peer: Peer) -> bool {
        true
    }

    async fn handle(&self, _peer: Peer, line: Vec<u8>, _gone: Disconnect) -> Vec<u8> {
        line
    }
}

/// [`Standings`], whose human lines come from a peer that fails the checks
/// that need no proof (a sandboxed agent's, say).
struct Sandboxed;

impl Handler for Sandboxed {
    fn sender(&self, peer: Peer, line: &[u8]) -> Sender {
        Standings.sender(peer, line)
    }

    fn may_use_reserve(&self, _peer: Peer) -> bool {
        false
    }

    async fn handle(&self, _peer: Peer, line: Vec<u8>, _gone: Disconnect) -> Vec<u8> {
        line
    }
}

#[test]
fn a_first_line_of_nobody_is_answered_then_the_connection_closes() {
    let server = Running::start(Standings, Limits::default());
    let mut stream = server.raw();
    stream.write_all(b"junk\ncap after junk\n").expect("write");
    // The answer, then the end: the second line is never handled.
    assert_line(&read_all(&stream), b"junk\n");
}

#[test]
fn a_connection_authenticated_by_its_first_line_stays_open_after_a_line_of_nobody() {
    let server = Running::start(Standings, Limits::default());
    let mut stream = server.raw();
    stream.write_all(b"cap 1\njunk\ncap 2\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), b"cap 1\njunk\ncap 2\n");
}

#[test]
fn the_first_line_has_its_own_shorter_deadline() {
    let first = Duration::from_millis(150);
    let server = Running::start(
        Standings,
        Limits {
            first_line_deadline: first,
            ..Limits::default()
        },
    );
    let started = std::time::Instant::now();
    let stream = server.raw();
    assert_line(&read_all(&stream), &wire_refusal(Refusal::RequestTimeout));
    let took = started.elapsed();
    assert!(
        took >= first && took < READ_DEADLINE,
        "refused after {took:?}"
    );
}

#[test]
fn a_human_line_is_served_from_the_reserve_when_every_place_is_taken() {
    let server = Running::start(
        Standings,
        Limits {
            max_connections: 1,
            ..Limits::default()
        },
    );
    // A caller holds the one authenticated place.
    let held = server.raw();
    let mut reader = BufReader::new(&held);
    (&held).write_all(b"cap held\n").expect("write");
    assert_line(&next_answer(&mut reader), b"cap held\n");

    // Another caller is told the broker is busy, unhandled; its place
    // among the unauthenticated is free once it sees the end.
    let mut refused = server.raw();
    refused.write_all(b"cap refused\n").expect("write");
    assert_line(
        &read_all(&refused),
        &wire_refusal(Refusal::BrokerUnavailable),
    );
    // The human is served from the reserve, for its one line.
    let mut human = server.raw();
    human.write_all(b"human\nhuman again\n").expect("write");
    assert_line(&read_all(&human), b"human\n");
}

#[test]
fn a_human_line_of_a_peer_the_handler_does_not_admit_never_takes_the_reserve() {
    let server = Running::start(
        Sandboxed,
        Limits {
            max_connections: 1,
            ..Limits::default()
        },
    );
    let held = server.raw();
    let mut reader = BufReader::new(&held);
    (&held).write_all(b"cap held\n").expect("write");
    assert_line(&next_answer(&mut reader), b"cap held\n");
    // Every reserve place is free, and none is given.
    for _ in 0..3 {
        let mut human = server.raw();
        human.write_all(b"human\n").expect("write");
        assert_line(&read_all(&human), &wire_refusal(Refusal::BrokerUnavailable));
    }
    // The caller's place is still its own.
    (&held).write_all(b"cap again\n").expect("write");
    assert_line(&next_answer(&mut reader), b"cap again\n");
}

#[test]
fn without_a_reserve_the_human_is_refused_when_every_place_is_taken() {
    let server = Running::start(
        Standings,
        Limits {
            max_connections: 1,
            human_reserve: 0,
            ..Limits::default()
        },
    );
    let held = server.raw();
    let mut reader = BufReader::new(&held);
    (&held).write_all(b"cap held\n").expect("write");
    assert_line(&next_answer(&mut reader), b"cap held\n");
    assert_eq!(
        server.client().call_line(b"human"),
        Ok(error_line(Refusal::BrokerUnavailable))
    );
}

// ---------------------------------------------------------------- disconnect and shutdown

#[test]
fn the_disconnect_signal_fires_when_the_client_closes_after_sending() {
    let (seen, events) = mpsc::channel();
    let server = Running::start(
        move |_peer: Peer, _line: Vec<u8>, gone: Disconnect| {
            let seen = seen.clone();
            async move {
                let _ = seen.send(Happened::Started);
                gone.disconnected().await;
                let _ = seen.send(Happened::Gone(gone.is_disconnected()));
                b"too late".to_vec()
            }
        },
        Limits::default(),
    );
    let mut stream = server.raw();
    stream.write_all(b"browser.click\n").expect("write");
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Happened::Started));
    drop(stream);
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Happened::Gone(true)));
}

#[test]
fn the_disconnect_signal_stays_quiet_while_the_client_waits() {
    let (seen, events) = mpsc::channel();
    let go = Arc::new(tokio::sync::Notify::new());
    let go_handler = Arc::clone(&go);
    let server = Running::start(
        move |_peer: Peer, _line: Vec<u8>, gone: Disconnect| {
            let seen = seen.clone();
            let go = Arc::clone(&go_handler);
            async move {
                let _ = seen.send(Happened::Started);
                go.notified().await;
                gone.is_disconnected().to_string().into_bytes()
            }
        },
        Limits::default(),
    );
    let client = server.client();
    let caller = std::thread::spawn(move || client.call_line(b"wait"));
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Happened::Started));
    go.notify_one();
    assert_eq!(caller.join().expect("caller"), Ok(b"false".to_vec()));
    assert!(!Disconnect::never().is_disconnected());
}

#[test]
fn shutdown_lets_the_request_in_flight_finish_then_stops_serving() {
    let (seen, events) = mpsc::channel();
    let go = Arc::new(tokio::sync::Notify::new());
    let go_handler = Arc::clone(&go);
    let mut server = Running::start(
        move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
            let seen = seen.clone();
            let go = Arc::clone(&go_handler);
            async move {
                let _ = seen.send(Happened::Started);
                go.notified().await;
                line
            }
        },
        Limits::default(),
    );
    let client = server.client();
    let caller = std::thread::spawn(move || client.call_line(b"in flight"));
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Happened::Started));
    server.signal_stop();
    go.notify_one();
    assert_eq!(caller.join().expect("caller"), Ok(b"in flight".to_vec()));
    let path = server.path.clone();
    let dir = server._dir.take();
    assert_eq!(server.stop(), Ok(()));
    assert_eq!(
        Client::new(&path, "cap").call_line(b"after"),
        Err(Refusal::BrokerUnavailable)
    );
    drop(dir);
}
