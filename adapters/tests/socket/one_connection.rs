//! Several requests on one connection: order, limits per line, the idle
//! deadline and the cap.

use super::*;

#[test]
fn several_lines_on_one_connection_are_answered_in_order() {
    // The first line takes longest to answer; its answer still comes first.
    let server = Running::start(
        |_peer: Peer, line: Vec<u8>, _gone: Disconnect| async move {
            if line == b"slow" {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            line
        },
        Limits::default(),
    );

    // All at once, then the end of the stream: every line is answered, in
    // order, then the server closes.
    let mut stream = server.raw();
    stream.write_all(b"slow\nfast\nthird\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), b"slow\nfast\nthird\n");

    // One at a time, each after the previous answer, on one connection;
    // lines may arrive in pieces, and a piece may end one line and start
    // the next.
    let stream = server.raw();
    let mut reader = BufReader::new(&stream);
    (&stream).write_all(b"one\n").expect("write");
    assert_line(&next_answer(&mut reader), b"one\n");
    (&stream).write_all(b"tw").expect("write");
    (&stream).write_all(b"o\nthr").expect("write");
    assert_line(&next_answer(&mut reader), b"two\n");
    (&stream).write_all(b"ee\n").expect("write");
    assert_line(&next_answer(&mut reader), b"three\n");
    drop(reader);
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), b"");
}

#[test]
fn each_line_of_a_connection_may_be_64_kib() {
    let server = Running::start(echo(), Limits::default());
    let stream = server.raw();
    let mut lines = Vec::new();
    for byte in [b'a', b'b', b'c'] {
        lines.extend(std::iter::repeat_n(byte, MAX_REQUEST));
        lines.push(b'\n');
    }
    // Written from another thread: three answers of 64 KiB may fill the
    // socket's buffers before the last line is written.
    let mut writer = stream.try_clone().expect("clone");
    let written = lines.clone();
    let writing = std::thread::spawn(move || {
        writer.write_all(&written).expect("write");
        writer
            .shutdown(std::net::Shutdown::Write)
            .expect("half-close");
    });
    let answers = read_all(&stream);
    writing.join().expect("writer");
    assert_eq!(answers.len(), lines.len());
    assert_line(&answers, &lines);
}

#[test]
fn an_oversized_line_after_others_is_refused_and_ends_the_connection() {
    let calls = Arc::new(AtomicUsize::new(0));
    let server = Running::start(counting_echo(&calls), Limits::default());
    let mut stream = server.raw();
    let mut request = b"first\n".to_vec();
    request.extend(std::iter::repeat_n(b'x', MAX_REQUEST + 1));
    request.extend_from_slice(b"\nnever\n");
    stream.set_write_timeout(Some(SAFETY_NET)).expect("timeout");
    stream.write_all(&request).expect("write");
    let mut expected = b"first\n".to_vec();
    expected.extend(wire_refusal(Refusal::RequestTooLarge));
    assert_line(&read_all(&stream), &expected);
    // Where the line after an oversized one would begin is unknown: it is
    // never handled.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let reply = server.client().call_line(b"still serving").expect("reply");
    assert_line(&reply, b"still serving");
}

#[test]
fn after_an_answer_silence_closes_the_connection_without_a_word() {
    let deadline = Duration::from_millis(200);
    let server = Running::start(
        echo(),
        Limits {
            read_deadline: deadline,
            ..Limits::default()
        },
    );
    let stream = server.raw();
    let mut reader = BufReader::new(&stream);
    (&stream).write_all(b"ping\n").expect("write");
    assert_line(&next_answer(&mut reader), b"ping\n");
    let answered = std::time::Instant::now();
    // Idle: no `request-timeout` (no request was begun), just the end.
    let mut rest = Vec::new();
    reader
        .read_to_end(&mut rest)
        .expect("the end of the stream");
    let idle = answered.elapsed();
    assert_line(&rest, b"");
    assert!(
        idle >= deadline && idle < SAFETY_NET,
        "closed after {idle:?}"
    );
}

#[test]
fn a_partial_next_line_then_silence_gets_request_timeout() {
    let server = Running::start(echo(), short_read_deadline());
    let mut stream = server.raw();
    stream.write_all(b"ping\n{\"cap\":").expect("write");
    let mut expected = b"ping\n".to_vec();
    expected.extend(wire_refusal(Refusal::RequestTimeout));
    assert_line(&read_all(&stream), &expected);
}

#[test]
fn the_read_deadline_of_a_next_line_counts_from_the_previous_answer() {
    let deadline = Duration::from_millis(300);
    // The first request outlasts the deadline at the server, so the
    // connection is older than the deadline when its next line begins.
    let server = Running::start(
        move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| async move {
            if line == b"slow" {
                tokio::time::sleep(2 * deadline).await;
            }
            line
        },
        Limits {
            read_deadline: deadline,
            ..Limits::default()
        },
    );
    let stream = server.raw();
    let mut reader = BufReader::new(&stream);
    let connected = std::time::Instant::now();
    (&stream).write_all(b"slow\n").expect("write");
    assert_line(&next_answer(&mut reader), b"slow\n");
    assert!(connected.elapsed() > deadline);
    (&stream).write_all(b"next\n").expect("write");
    assert_line(&next_answer(&mut reader), b"next\n");
}

#[test]
fn a_client_that_half_closes_after_several_lines_gets_every_answer() {
    // Each handler waits until the client has gone: the end of the stream
    // fires the signal for the line in flight, and the later lines start
    // with it fired. None is lost.
    let server = Running::start(
        |_peer: Peer, line: Vec<u8>, gone: Disconnect| async move {
            gone.disconnected().await;
            let mut reply = line;
            reply.extend_from_slice(b" after the end");
            reply
        },
        Limits::default(),
    );
    let mut stream = server.raw();
    stream.write_all(b"a\nb\nc\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(
        &read_all(&stream),
        b"a after the end\nb after the end\nc after the end\n",
    );
}

#[test]
fn connections_idle_between_requests_count_against_the_cap() {
    let server = Running::start(
        echo(),
        Limits {
            max_connections: 2,
            ..Limits::default()
        },
    );
    // Both slots held by connections that were answered and stay open.
    let held: Vec<UnixStream> = (0..2)
        .map(|i| {
            let stream = server.raw();
            let line = format!("hold {i}\n");
            (&stream).write_all(line.as_bytes()).expect("write");
            let mut reader = BufReader::new(&stream);
            assert_line(&next_answer(&mut reader), line.as_bytes());
            stream
        })
        .collect();
    assert_eq!(
        server.client().call_line(b"third"),
        Ok(error_line(Refusal::BrokerUnavailable))
    );
    // One says it is done; once it sees the end, its slot is free.
    held[0]
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&held[0]), b"");
    let reply = server.client().call_line(b"served").expect("reply");
    assert_line(&reply, b"served");
}

#[test]
fn shutdown_closes_idle_connections_at_once_and_answers_the_request_in_flight() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let (seen, events) = mpsc::channel();
    let go = Arc::new(tokio::sync::Notify::new());
    let go_handler = Arc::clone(&go);
    // The default limits: an idle connection would wait 5 s for its next
    // line if shutdown did not close it.
    let mut server = Running::start(
        move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
            counted.fetch_add(1, Ordering::SeqCst);
            let seen = seen.clone();
            let go = Arc::clone(&go_handler);
            async move {
                if line == b"held" {
                    let _ = seen.send(Happened::Started);
                    go.notified().await;
                }
                line
            }
        },
        Limits::default(),
    );
    let started = std::time::Instant::now();
    let idle = server.raw();
    let mut idle_reader = BufReader::new(&idle);
    (&idle).write_all(b"idle\n").expect("write");
    assert_line(&next_answer(&mut idle_reader), b"idle\n");

    // A request in flight with another line queued behind it.
    let busy = server.raw();
    (&busy).write_all(b"held\nqueued\n").expect("write");
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Happened::Started));

    server.signal_stop();
    let mut rest = Vec::new();
    idle_reader
        .read_to_end(&mut rest)
        .expect("the idle connection ends");
    assert_line(&rest, b"");
    go.notify_one();
    // The request in flight is answered; the line behind it is not
    // started, and the connection closes.
    assert_line(&read_all(&busy), b"held\n");
    let path = server.path.clone();
    let dir = server._dir.take();
    assert_eq!(server.stop(), Ok(()));
    let took = started.elapsed();
    assert!(took < READ_DEADLINE, "shutdown took {took:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        Client::new(&path, "cap").call_line(b"after"),
        Err(Refusal::BrokerUnavailable)
    );
    drop(dir);
}

#[test]
fn an_answer_written_through_the_lent_connection_arrives_once_whole_and_in_order() {
    // The answer comes from a thread of its own, as the broker's writer's
    // does: 3 MiB, more than the socket takes at once, so the server
    // writes the rest; then a small one, written whole.
    let big = vec![b'x'; 3 * 1024 * 1024];
    let answer = big.clone();
    let server = Running::start(
        move |_peer: Peer, line: Vec<u8>, gone: Disconnect| {
            let answer = if line == b"big" { answer.clone() } else { line };
            async move {
                let direct = gone.direct().expect("a lent connection").clone();
                let (sent, written) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    direct.write_now(std::str::from_utf8(&answer).expect("text"));
                    let _ = sent.send(answer);
                });
                written.await.expect("the writing thread answers")
            }
        },
        Limits::default(),
    );
    let mut stream = server.raw();
    stream.write_all(b"big\nsmall\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let mut expected = big;
    expected.extend_from_slice(b"\nsmall\n");
    assert_line(&read_all(&stream), &expected);
}

#[test]
fn a_lent_connection_writes_nothing_once_its_handler_returned() {
    // The first request's loan is kept, and used while the second request
    // is handled: too late, it writes nothing.
    let kept: Arc<Mutex<Option<mosaic_adapters::socket::DirectReply>>> = Arc::default();
    let keeper = Arc::clone(&kept);
    let server = Running::start(
        move |_peer: Peer, line: Vec<u8>, gone: Disconnect| {
            let keeper = Arc::clone(&keeper);
            async move {
                let mut kept = keeper.lock().unwrap_or_else(PoisonError::into_inner);
                match kept.take() {
                    None => *kept = gone.direct().cloned(),
                    Some(late) => late.write_now("late"),
                }
                line
            }
        },
        Limits::default(),
    );
    let mut stream = server.raw();
    stream.write_all(b"first\nsecond\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), b"first\nsecond\n");
    assert!(kept
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_none());
}
