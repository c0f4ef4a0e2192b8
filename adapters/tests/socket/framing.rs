//! The bound socket and request framing: its mode, line limits and deadlines.

use super::*;

#[test]
fn the_bound_socket_is_0600_and_the_umask_is_restored() {
    let dir = private_dir();
    let path = dir.path().join("bus.sock");
    let _fs = fs_lock();
    let before = current_umask();
    let _listener = bind_private(&path).expect("bind");
    assert_eq!(current_umask(), before);
    let meta = std::fs::symlink_metadata(&path).expect("metadata");
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_eq!(check_private_socket(&path), Ok(()));
}

/// `bind_private` narrows the process's umask to 0177 for a moment; a
/// private folder made by another thread meanwhile must still be 0700 (the
/// data root's `bus/`, made while another broker in the same process binds).
#[test]
fn private_folders_made_while_another_thread_binds_are_0700() {
    const ROUNDS: usize = 400;
    let dir = private_dir();
    let _fs = fs_lock();
    let start = Arc::new(std::sync::Barrier::new(2));
    let binder = {
        let (start, sockets) = (Arc::clone(&start), dir.path().to_owned());
        std::thread::spawn(move || {
            start.wait();
            for i in 0..ROUNDS {
                drop(bind_private(&sockets.join(format!("s{i}"))).expect("bind"));
            }
        })
    };
    start.wait();
    let folders: Vec<PathBuf> = (0..ROUNDS)
        .map(|i| {
            let folder = dir.path().join(format!("d{i}"));
            create_private_dir(&folder, false).expect("mkdir");
            folder
        })
        .collect();
    binder.join().expect("the binds");
    for folder in folders {
        let mode = std::fs::metadata(&folder).expect("metadata").mode() & 0o7777;
        assert_eq!(mode, 0o700, "{}", folder.display());
    }
}

#[test]
fn binding_refuses_anything_already_at_the_path() {
    let dir = private_dir();
    let _fs = fs_lock();

    let file = dir.path().join("file");
    std::fs::write(&file, b"keep me").expect("file");
    assert_eq!(bind_private(&file).err(), Some(Refusal::UnsafePath));
    assert_eq!(std::fs::read(&file).expect("still there"), b"keep me");

    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).expect("symlink");
    assert_eq!(bind_private(&link).err(), Some(Refusal::UnsafePath));
    assert!(!dir.path().join("nowhere").exists());

    // A socket left behind by a broker that is gone: only `unlock` clears it.
    let stale = dir.path().join("stale.sock");
    drop(bind_private(&stale).expect("first bind"));
    assert_eq!(bind_private(&stale).err(), Some(Refusal::UnsafePath));

    let orphan = dir.path().join("missing").join("bus.sock");
    assert_eq!(bind_private(&orphan).err(), Some(Refusal::UnsafePath));

    let too_long = dir.path().join("x".repeat(200));
    assert_eq!(bind_private(&too_long).err(), Some(Refusal::UnsafePath));
}

// ---------------------------------------------------------------- framing

#[test]
fn one_line_in_one_line_out_with_the_kernels_peer() {
    let server = Running::start(
        |peer: Peer, line: Vec<u8>, _gone: Disconnect| async move {
            let mut reply = format!("{} {:?} ", peer.uid, peer.pid).into_bytes();
            reply.extend_from_slice(&line);
            reply
        },
        Limits::default(),
    );
    let reply = server.client().call_line(b"hello").expect("reply");
    let expected = format!("{} Some({}) hello", own_uid(), std::process::id());
    assert_line(&reply, expected.as_bytes());

    // On the wire: exactly one line back; once the client has said it is
    // done (here by shutting down its writing side), the server closes.
    let mut stream = server.raw();
    stream.write_all(b"again\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let expected = format!("{} Some({}) again\n", own_uid(), std::process::id());
    assert_line(&read_all(&stream), expected.as_bytes());
}

#[test]
fn the_client_sends_the_wire_request_and_returns_the_result() {
    // The handler wraps whatever it got as the result, so the test sees the
    // request line exactly as the server handed it over.
    let server = Running::start(
        |_peer: Peer, line: Vec<u8>, _gone: Disconnect| async move {
            let mut reply = br#"{"ok":true,"result":"#.to_vec();
            reply.extend_from_slice(&line);
            reply.push(b'}');
            reply
        },
        Limits::default(),
    );
    let result = server
        .client()
        .call("inbox", json!({"limit": 3}))
        .expect("result");
    assert_eq!(
        result,
        json!({"cap": "cap", "verb": "inbox", "args": {"limit": 3}})
    );
}

#[test]
fn a_request_of_exactly_64_kib_is_accepted() {
    let server = Running::start(echo(), Limits::default());
    let line = vec![b'a'; MAX_REQUEST];
    let reply = server.client().call_line(&line).expect("reply");
    assert_eq!(reply.len(), MAX_REQUEST);
    assert_line(&reply, &line);
}

#[test]
fn one_byte_more_is_too_large_and_the_rest_never_reaches_the_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let server = Running::start(
        move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { line }
        },
        Limits::default(),
    );
    let client = server.client();
    let reply = client
        .call_line(&vec![b'a'; MAX_REQUEST + 1])
        .expect("reply");
    assert_line(&reply, &error_line(Refusal::RequestTooLarge));

    // Sixteen times the limit: the broker answers after 64 KiB + 1 and
    // closes while the client is still writing; the client reads the answer.
    let reply = client
        .call_line(&vec![b'b'; 16 * MAX_REQUEST])
        .expect("reply");
    assert_line(&reply, &error_line(Refusal::RequestTooLarge));
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // The client does not even connect with a request it knows is too big.
    let big = json!({"text": "x".repeat(MAX_REQUEST)});
    assert_eq!(
        client.call("message.send", big.clone()),
        Err(Refusal::RequestTooLarge)
    );
    let nowhere = Client::new(server.path.with_file_name("absent.sock"), "cap");
    assert_eq!(
        nowhere.call("message.send", big),
        Err(Refusal::RequestTooLarge)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// Writes `chunk` again and again until the server stops taking it, and
/// returns how many bytes it took and how long that lasted. Each write is
/// bounded by [`SAFETY_NET`], so a server that neither reads nor closes
/// fails the test.
fn write_until_refused(stream: &mut UnixStream, chunk: &[u8]) -> (usize, Duration) {
    stream.set_write_timeout(Some(SAFETY_NET)).expect("timeout");
    let started = std::time::Instant::now();
    let mut written = 0;
    loop {
        match stream.write(chunk) {
            Ok(n) => written += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                return (written, started.elapsed())
            }
            Err(e) => panic!("write failed after {written} bytes: {e}"),
        }
    }
}

/// The server answers, stops writing and drains, so a
/// client that writes its whole over-long line first and reads after gets
/// the answer and a clean end of stream, not a reset.
#[test]
fn an_oversized_line_written_whole_before_reading_is_answered() {
    let server = Running::start(echo(), Limits::default());
    for size in [300_000, 8 * 1024 * 1024] {
        let mut line = vec![b'z'; size];
        line.push(b'\n');
        for attempt in 1..=5 {
            let mut stream = server.raw();
            stream.set_write_timeout(Some(SAFETY_NET)).expect("timeout");
            if let Err(e) = stream.write_all(&line) {
                panic!("{size} bytes, try {attempt}: the write failed: {e}");
            }
            let mut answer = Vec::new();
            if let Err(e) = stream.read_to_end(&mut answer) {
                panic!("{size} bytes, try {attempt}: the read failed: {e}");
            }
            assert_line(&answer, &wire_refusal(Refusal::RequestTooLarge));
        }
    }
}

#[test]
fn a_refused_client_that_never_stops_writing_is_cut_off_after_the_drain_limit() {
    let server = Running::start(echo(), Limits::default());
    let mut stream = server.raw();
    let (written, _) = write_until_refused(&mut stream, &vec![b'z'; 1024 * 1024]);
    // What the server read (the line's first 64 KiB + 1, then the drain),
    // plus at most what the two socket buffers held when it closed.
    assert!(
        written > MAX_DRAIN && written < MAX_DRAIN + 8 * 1024 * 1024,
        "{written} bytes taken"
    );
    // The answer was queued before the close, and is still there to read.
    assert_line(&read_all(&stream), &wire_refusal(Refusal::RequestTooLarge));
}

#[test]
fn a_refused_client_that_never_stops_writing_is_cut_off_after_the_drain_deadline() {
    let deadline = Duration::from_millis(300);
    let server = Running::start(
        echo(),
        Limits {
            drain_limit: usize::MAX,
            drain_deadline: deadline,
            ..Limits::default()
        },
    );
    let mut stream = server.raw();
    let (_, took) = write_until_refused(&mut stream, &vec![b'z'; 1024 * 1024]);
    assert!(
        took >= deadline && took < SAFETY_NET,
        "cut off after {took:?}"
    );
    assert_line(&read_all(&stream), &wire_refusal(Refusal::RequestTooLarge));
}

#[test]
fn silence_gets_request_timeout() {
    let server = Running::start(echo(), short_read_deadline());
    let stream = server.raw();
    assert_line(&read_all(&stream), &wire_refusal(Refusal::RequestTimeout));
}

#[test]
fn a_partial_line_then_silence_gets_request_timeout() {
    let server = Running::start(echo(), short_read_deadline());
    let mut stream = server.raw();
    stream.write_all(br#"{"cap":"#).expect("write");
    assert_line(&read_all(&stream), &wire_refusal(Refusal::RequestTimeout));
}

#[test]
fn end_of_stream_before_the_newline_is_bad_request() {
    let server = Running::start(echo(), Limits::default());
    let mut stream = server.raw();
    stream.write_all(b"no newline").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), &wire_refusal(Refusal::BadRequest));

    let stream = server.raw();
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), &wire_refusal(Refusal::BadRequest));
}

#[test]
fn a_half_closed_client_still_gets_its_answer() {
    let server = Running::start(echo(), Limits::default());
    let mut stream = server.raw();
    stream.write_all(b"ping\n").expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert_line(&read_all(&stream), b"ping\n");
}
