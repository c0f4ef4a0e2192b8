//! The socket adapter over real Unix sockets in private temporary folders:
//! the bound socket's mode, request framing and limits, deadlines, several
//! requests on one connection (order, limits per line, the idle deadline,
//! the cap), many and hostile connections, the disconnect signal,
//! shutdown, the places of connections that have not authenticated and
//! the human reserve, the client and the session against the real server and
//! against scripted fake brokers, and a peer of another uid (a child
//! process that drops to uid 65534).
//!
//! `bind_private` changes the process-wide umask for a moment, and test
//! threads run in parallel; every test therefore creates folders, files and
//! sockets only while holding [`fs_lock`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use mosaic_adapters::fs::check_private_socket;
use mosaic_adapters::socket::{
    bind_private, error_line, serve_with, Client, Disconnect, Handler, Limits, Peer, Session,
    Standing, MAX_DRAIN, MAX_REQUEST, MAX_RESPONSE, READ_DEADLINE,
};
use mosaic_domain::Refusal;
use serde_json::json;
use tempfile::TempDir;

/// A bound on every blocking wait in these tests, so a bug fails a test
/// instead of hanging it. Never used to wait for something to happen.
const SAFETY_NET: Duration = Duration::from_secs(20);

/// Held while creating anything in the file system (see the file's doc).
fn fs_lock() -> MutexGuard<'static, ()> {
    static FS: Mutex<()> = Mutex::new(());
    FS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn private_dir() -> TempDir {
    let _fs = fs_lock();
    tempfile::tempdir().expect("temporary folder")
}

fn bind_in(dir: &TempDir) -> (PathBuf, UnixListener) {
    let path = dir.path().join("bus.sock");
    let listener = {
        let _fs = fs_lock();
        bind_private(&path).expect("bind")
    };
    (path, listener)
}

/// The uid this test process runs as: the owner of a folder it created.
fn own_uid() -> u32 {
    let dir = private_dir();
    std::fs::metadata(dir.path()).expect("metadata").uid()
}

/// The process's current umask, as the kernel reports it.
fn current_umask() -> String {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))
        .expect("Umask line")
        .trim()
        .to_owned()
}

#[track_caller]
fn assert_line(actual: &[u8], expected: &[u8]) {
    assert!(
        actual == expected,
        "got {:?}, expected {:?}",
        String::from_utf8_lossy(&actual[..actual.len().min(200)]),
        String::from_utf8_lossy(&expected[..expected.len().min(200)])
    );
}

/// An error reply as it appears on the wire, with its `\n`.
fn wire_refusal(refusal: Refusal) -> Vec<u8> {
    let mut line = error_line(refusal);
    line.push(b'\n');
    line
}

fn echo() -> impl Handler {
    |_peer: Peer, line: Vec<u8>, _gone: Disconnect| async move { line }
}

fn short_read_deadline() -> Limits {
    Limits {
        read_deadline: Duration::from_millis(200),
        ..Limits::default()
    }
}

/// A server on its own thread and tokio runtime, stopped when dropped.
struct Running {
    path: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), Refusal>>>,
    _dir: Option<TempDir>,
}

impl Running {
    fn start(handler: impl Handler, limits: Limits) -> Running {
        let dir = private_dir();
        let (path, listener) = bind_in(&dir);
        Running::start_on(listener, path, Some(dir), handler, limits)
    }

    fn start_on(
        listener: UnixListener,
        path: PathBuf,
        dir: Option<TempDir>,
        handler: impl Handler,
        limits: Limits,
    ) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(serve_with(listener, handler, limits, async {
                let _ = stopped.await;
            }))
        });
        Running {
            path,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn client(&self) -> Client {
        Client::new(&self.path, "cap").with_timeout(SAFETY_NET)
    }

    fn raw(&self) -> UnixStream {
        raw(&self.path)
    }

    /// Asks the server to stop, without waiting for it.
    fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Stops the server and returns what `serve_with` returned.
    fn stop(mut self) -> Result<(), Refusal> {
        self.signal_stop();
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("server thread")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.signal_stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn raw(path: &Path) -> UnixStream {
    let stream = UnixStream::connect(path).expect("connect");
    stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    stream
}

/// Everything the server sends until it closes. A reset after the data
/// (the server closed with our bytes unread) ends the reading like EOF.
fn read_all(mut stream: &UnixStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

// ---------------------------------------------------------------- binding

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

/// Issue 22 item 4: the server answers, stops writing and drains, so a
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

// ---------------------------------------------------------------- several requests on one connection

/// Reads one line (with its `\n`) through `reader`.
#[track_caller]
fn next_answer(reader: &mut BufReader<&UnixStream>) -> Vec<u8> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).expect("an answer");
    line
}

/// A handler that counts the lines it was given.
fn counting_echo(calls: &Arc<AtomicUsize>) -> impl Handler {
    let counted = Arc::clone(calls);
    move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move { line }
    }
}

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
                    let _ = seen.send(Seen::Started);
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
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Seen::Started));

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

// ---------------------------------------------------------------- many clients

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
    fn standing(&self, _peer: Peer, line: &[u8]) -> Standing {
        if line.starts_with(b"cap") {
            Standing::Caller
        } else if line.starts_with(b"human") {
            Standing::Human
        } else {
            Standing::Nobody
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
    fn standing(&self, peer: Peer, line: &[u8]) -> Standing {
        Standings.standing(peer, line)
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

#[derive(Debug, PartialEq)]
enum Seen {
    Started,
    Gone(bool),
}

#[test]
fn the_disconnect_signal_fires_when_the_client_closes_after_sending() {
    let (seen, events) = mpsc::channel();
    let server = Running::start(
        move |_peer: Peer, _line: Vec<u8>, gone: Disconnect| {
            let seen = seen.clone();
            async move {
                let _ = seen.send(Seen::Started);
                gone.disconnected().await;
                let _ = seen.send(Seen::Gone(gone.is_disconnected()));
                b"too late".to_vec()
            }
        },
        Limits::default(),
    );
    let mut stream = server.raw();
    stream.write_all(b"browser.click\n").expect("write");
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Seen::Started));
    drop(stream);
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Seen::Gone(true)));
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
                let _ = seen.send(Seen::Started);
                go.notified().await;
                gone.is_disconnected().to_string().into_bytes()
            }
        },
        Limits::default(),
    );
    let client = server.client();
    let caller = std::thread::spawn(move || client.call_line(b"wait"));
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Seen::Started));
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
                let _ = seen.send(Seen::Started);
                go.notified().await;
                line
            }
        },
        Limits::default(),
    );
    let client = server.client();
    let caller = std::thread::spawn(move || client.call_line(b"in flight"));
    assert_eq!(events.recv_timeout(SAFETY_NET), Ok(Seen::Started));
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

// ---------------------------------------------------------------- the client against fake brokers

/// A fake broker that accepts one connection and runs `script` on it.
fn fake_broker(
    script: impl FnOnce(UnixStream) + Send + 'static,
) -> (TempDir, PathBuf, JoinHandle<()>) {
    let dir = private_dir();
    let path = dir.path().join("fake.sock");
    let listener = {
        let _fs = fs_lock();
        UnixListener::bind(&path).expect("bind")
    };
    let thread = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
        script(stream);
    });
    (dir, path, thread)
}

/// Reads the request line, `\n` included.
fn request_of(stream: &UnixStream) -> Vec<u8> {
    let mut line = Vec::new();
    BufReader::new(stream)
        .read_until(b'\n', &mut line)
        .expect("request");
    line
}

#[test]
fn an_absent_broker_is_broker_unavailable() {
    let dir = private_dir();
    let absent = Client::new(dir.path().join("bus.sock"), "cap");
    assert_eq!(
        absent.call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );

    // A socket file nobody listens on any more, and a file that is no socket.
    let (path, listener) = bind_in(&dir);
    drop(listener);
    let closed = Client::new(&path, "cap");
    assert_eq!(
        closed.call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );
    let file = dir.path().join("plain");
    {
        let _fs = fs_lock();
        std::fs::write(&file, b"").expect("file");
    }
    assert_eq!(
        Client::new(&file, "cap").call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );
}

#[test]
fn a_broker_whose_accept_queue_is_full_is_unavailable_at_once() {
    let dir = private_dir();
    let path = dir.path().join("stuck.sock");
    let listener =
        socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).expect("socket");
    {
        let _fs = fs_lock();
        listener
            .bind(&socket2::SockAddr::unix(&path).expect("address"))
            .expect("bind");
    }
    // Backlog 0: one connection waits in the queue, the next finds it full.
    listener.listen(0).expect("listen");
    let _queued = UnixStream::connect(&path).expect("first connect");
    // A blocking connect would wait here for as long as the broker is stuck.
    assert_eq!(
        Client::new(&path, "cap").call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );
}

#[test]
fn a_broker_that_closes_without_answering_is_outcome_unknown() {
    let (_dir, path, broker) = fake_broker(|stream| {
        let _ = request_of(&stream);
    });
    assert_eq!(
        Client::new(&path, "cap").call("message.send", json!({})),
        Err(Refusal::OutcomeUnknown)
    );
    broker.join().expect("broker");
}

#[test]
fn a_broker_that_never_answers_is_outcome_unknown_after_the_timeout() {
    let (done, finished) = mpsc::channel::<()>();
    let (_dir, path, broker) = fake_broker(move |stream| {
        let _ = request_of(&stream);
        // Keep the connection open, silent, until the client has given up.
        let _ = finished.recv_timeout(SAFETY_NET);
        drop(stream);
    });
    let client = Client::new(&path, "cap").with_timeout(Duration::from_millis(200));
    assert_eq!(
        client.call("message.send", json!({})),
        Err(Refusal::OutcomeUnknown)
    );
    done.send(()).expect("broker waiting");
    broker.join().expect("broker");
}

fn answer_of_len(len: usize) -> Result<Vec<u8>, Refusal> {
    let (_dir, path, broker) = fake_broker(move |mut stream| {
        let _ = request_of(&stream);
        let mut answer = vec![b'a'; len];
        answer.push(b'\n');
        // The client stops reading past its limit; the rest has nowhere to go.
        let _ = stream.write_all(&answer);
    });
    let reply = Client::new(&path, "cap")
        .with_timeout(SAFETY_NET)
        .call_line(b"{}");
    broker.join().expect("broker");
    reply
}

#[test]
fn responses_are_capped_at_4_mib() {
    assert_eq!(
        answer_of_len(MAX_RESPONSE).map(|r| r.len()),
        Ok(MAX_RESPONSE)
    );
    assert_eq!(
        answer_of_len(MAX_RESPONSE + 1),
        Err(Refusal::ResponseTooLarge)
    );
    assert_eq!(
        answer_of_len(5 * 1024 * 1024),
        Err(Refusal::ResponseTooLarge)
    );
}

fn call_fake(answer: &'static [u8]) -> (Vec<u8>, Result<serde_json::Value, Refusal>) {
    let (request, requests) = mpsc::channel();
    let (_dir, path, broker) = fake_broker(move |mut stream| {
        request.send(request_of(&stream)).expect("test waiting");
        stream.write_all(answer).expect("answer");
    });
    let result = Client::new(&path, "secret-cap").call("role.claim", json!({"role": "dev"}));
    broker.join().expect("broker");
    (requests.recv().expect("request"), result)
}

#[test]
fn answers_become_results_and_refusals() {
    let (request, result) = call_fake(b"{\"ok\":false,\"error\":\"role-held\"}\n");
    assert_line(
        &request,
        b"{\"cap\":\"secret-cap\",\"verb\":\"role.claim\",\"args\":{\"role\":\"dev\"}}\n",
    );
    assert_eq!(result, Err(Refusal::RoleHeld));

    let (_, result) = call_fake(b"{\"ok\":false,\"error\":\"from-a-newer-broker\"}\n");
    assert_eq!(result, Err(Refusal::BadRequest));

    let (_, result) = call_fake(b"{\"ok\":true,\"result\":{\"role\":\"dev\"}}\n");
    assert_eq!(result, Ok(json!({"role": "dev"})));

    let (_, result) = call_fake(b"garbage\n");
    assert_eq!(result, Err(Refusal::OutcomeUnknown));
}

// ---------------------------------------------------------------- the session

/// What a [`scripted_broker`] does next on a connection.
enum Step {
    /// Reads a request line and writes this answer and a `\n`.
    Answer(Vec<u8>),
    /// Reads a request line, waits for the test's go, then writes this
    /// answer and a `\n`.
    Late(&'static str),
    /// Reads a request line and closes the connection unanswered.
    Vanish,
    /// Leaves the connection open until the fake broker ends.
    Keep,
}

fn answer(text: &str) -> Step {
    Step::Answer(text.as_bytes().to_vec())
}

/// A fake broker on its own thread that serves one connection after
/// another, each by its script; a connection whose script ends without
/// [`Step::Keep`] is closed, and its index sent on `closed`.
struct Scripted {
    path: PathBuf,
    go: mpsc::Sender<()>,
    closed: mpsc::Receiver<usize>,
    thread: JoinHandle<Vec<(usize, String)>>,
    _dir: TempDir,
}

impl Scripted {
    fn session(&self) -> Session {
        Session::new(Client::new(&self.path, "cap").with_timeout(SAFETY_NET))
    }

    /// Waits until the fake broker has closed connection `n`.
    #[track_caller]
    fn wait_closed(&self, n: usize) {
        assert_eq!(self.closed.recv_timeout(SAFETY_NET), Ok(n));
    }

    /// Every request line the fake broker read, with its connection's
    /// index, once every script has run.
    fn requests(self) -> Vec<(usize, String)> {
        self.thread.join().expect("the fake broker")
    }
}

fn scripted_broker(scripts: Vec<Vec<Step>>) -> Scripted {
    let dir = private_dir();
    let path = dir.path().join("fake.sock");
    let listener = {
        let _fs = fs_lock();
        UnixListener::bind(&path).expect("bind")
    };
    let (go, went) = mpsc::channel();
    let (closing, closed) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let mut requests = Vec::new();
        let mut kept = Vec::new();
        for (n, script) in scripts.into_iter().enumerate() {
            let (stream, _) = listener.accept().expect("accept");
            stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
            let mut reader = BufReader::new(&stream);
            let mut keep = false;
            for step in script {
                let mut line = String::new();
                if !matches!(step, Step::Keep) {
                    reader.read_line(&mut line).expect("a request line");
                    requests.push((n, line.trim_end().to_owned()));
                }
                let reply = match step {
                    Step::Answer(reply) => reply,
                    Step::Late(reply) => {
                        went.recv_timeout(SAFETY_NET).expect("the test's go");
                        reply.as_bytes().to_vec()
                    }
                    Step::Vanish => break,
                    Step::Keep => {
                        keep = true;
                        break;
                    }
                };
                // The client may have given up and closed already.
                let _ = (&stream).write_all(&[&reply[..], b"\n"].concat());
            }
            drop(reader);
            if keep {
                kept.push(stream);
            } else {
                drop(stream);
                let _ = closing.send(n);
            }
        }
        requests
    });
    Scripted {
        path,
        go,
        closed,
        thread,
        _dir: dir,
    }
}

const OK: &str = r#"{"ok":true,"result":{}}"#;

/// The request line a session with capability `cap` sends for `verb`
/// without arguments.
fn request(verb: &str) -> String {
    format!(r#"{{"cap":"cap","verb":"{verb}","args":{{}}}}"#)
}

#[test]
fn a_session_s_calls_in_turn_share_one_connection() {
    let broker = scripted_broker(vec![vec![
        answer(r#"{"ok":true,"result":{"status":"claimed"}}"#),
        answer(r#"{"ok":false,"error":"not-holder"}"#),
        answer(r#"{"ok":true,"result":[]}"#),
        Step::Keep,
    ]]);
    let session = broker.session();
    assert_eq!(
        session.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );
    // A refusal the broker answers like any other line keeps it too.
    assert_eq!(
        session.call("message.receive", json!({})),
        Err(Refusal::NotHolder)
    );
    assert_eq!(session.call("inbox", json!({})), Ok(json!([])));
    assert_eq!(
        broker.requests(),
        vec![
            (0, request("role.claim")),
            (0, request("message.receive")),
            (0, request("inbox")),
        ]
    );
}

#[test]
fn a_connection_the_broker_closed_is_replaced_and_the_call_goes_through() {
    let broker = scripted_broker(vec![vec![answer(OK)], vec![answer(OK), Step::Keep]]);
    let session = broker.session();
    assert_eq!(session.call("agents", json!({})), Ok(json!({})));
    // The broker closed the connection (as it does with an idle one): the
    // next call goes, once, over a new one.
    broker.wait_closed(0);
    assert_eq!(session.call("message.send", json!({})), Ok(json!({})));
    assert_eq!(
        broker.requests(),
        vec![(0, request("agents")), (1, request("message.send"))]
    );
}

#[test]
fn a_request_sent_whole_is_never_sent_again() {
    let broker = scripted_broker(vec![
        vec![answer(OK), Step::Vanish],
        vec![answer(OK), Step::Keep],
    ]);
    let session = broker.session();
    assert_eq!(session.call("role.claim", json!({})), Ok(json!({})));
    // The connection breaks after the whole line went out: the broker may
    // have acted, so the call is outcome-unknown and is not resent.
    assert_eq!(
        session.call("message.send", json!({})),
        Err(Refusal::OutcomeUnknown)
    );
    assert_eq!(session.call("inbox", json!({})), Ok(json!({})));
    assert_eq!(
        broker.requests(),
        vec![
            (0, request("role.claim")),
            (0, request("message.send")),
            (1, request("inbox")),
        ]
    );
}

#[test]
fn after_a_refusal_that_ends_the_connection_a_new_one_is_made() {
    for ending in [
        Refusal::RequestTooLarge,
        Refusal::RequestTimeout,
        Refusal::BrokerUnavailable,
        Refusal::BadCapability,
    ] {
        // The fake keeps the first connection open: only the session's own
        // rule sends the next call elsewhere.
        let broker = scripted_broker(vec![
            vec![Step::Answer(error_line(ending)), Step::Keep],
            vec![answer(OK), Step::Keep],
        ]);
        let session = broker.session();
        assert_eq!(session.call("inbox", json!({})), Err(ending));
        assert_eq!(session.call("inbox", json!({})), Ok(json!({})));
        assert_eq!(
            broker.requests(),
            vec![(0, request("inbox")), (1, request("inbox"))],
            "{ending}"
        );
    }
}

#[test]
fn a_late_answer_is_never_read_as_the_next_call_s() {
    let broker = scripted_broker(vec![
        vec![Step::Late(r#"{"ok":true,"result":"late"}"#), Step::Keep],
        vec![answer(OK), Step::Keep],
    ]);
    let session =
        Session::new(Client::new(&broker.path, "cap").with_timeout(Duration::from_millis(200)));
    assert_eq!(
        session.call("message.send", json!({})),
        Err(Refusal::OutcomeUnknown)
    );
    // The answer arrives after the call gave up, on a connection the
    // session has closed; the next call gets its own.
    broker.go.send(()).expect("the fake broker waits");
    let patient = Session::new(session.client().clone().with_timeout(SAFETY_NET));
    assert_eq!(patient.call("inbox", json!({})), Ok(json!({})));
    drop(session);
    assert_eq!(
        broker.requests(),
        vec![(0, request("message.send")), (1, request("inbox"))]
    );
}

#[test]
fn an_answer_too_large_closes_the_connection() {
    let mut huge = br#"{"ok":true,"result":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', MAX_RESPONSE));
    huge.extend_from_slice(br#""}"#);
    let broker = scripted_broker(vec![
        vec![Step::Answer(huge), Step::Keep],
        vec![answer(OK), Step::Keep],
    ]);
    let session = broker.session();
    assert_eq!(
        session.call("inbox", json!({})),
        Err(Refusal::ResponseTooLarge)
    );
    assert_eq!(session.call("inbox", json!({})), Ok(json!({})));
    assert_eq!(
        broker.requests(),
        vec![(0, request("inbox")), (1, request("inbox"))]
    );
}

#[test]
fn a_session_against_the_real_server_pipelines_and_overlapping_calls_get_their_own() {
    // Two calls must be in the handler at once before either is answered:
    // calls sharing one connection would wait for each other forever.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let server = Running::start(
        move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
            let barrier = Arc::clone(&barrier);
            async move {
                if line.starts_with(b"together") {
                    barrier.wait().await;
                }
                line
            }
        },
        Limits::default(),
    );
    let session = Arc::new(Session::new(server.client()));
    for i in 0..5 {
        let line = format!("in turn {i}");
        assert_line(
            &session.call_line(line.as_bytes()).expect("reply"),
            line.as_bytes(),
        );
    }
    let callers: Vec<_> = (0..2)
        .map(|i| {
            let session = Arc::clone(&session);
            std::thread::spawn(move || session.call_line(format!("together {i}").as_bytes()))
        })
        .collect();
    for (i, caller) in callers.into_iter().enumerate() {
        let reply = caller.join().expect("caller").expect("reply");
        assert_line(&reply, format!("together {i}").as_bytes());
    }
    // An oversized line ends its connection; the session goes on.
    let refused = session
        .call_line(&vec![b'x'; MAX_REQUEST + 1])
        .expect("reply");
    assert_line(&refused, &error_line(Refusal::RequestTooLarge));
    assert_line(&session.call_line(b"after").expect("reply"), b"after");
}

// ---------------------------------------------------------------- a peer of another uid

/// Names the abstract socket that [`foreign_uid_child`] connects to; set
/// only in the child process.
const CHILD_ENV: &str = "MOSAIC_SOCKET_TEST_FOREIGN_CHILD";
const CHILD_UID: u32 = 65_534;

/// Not a test of its own: the client half of
/// [`a_peer_of_another_uid_is_refused_unread`], run in a child process under
/// uid 65534. In a normal run it has nothing to do.
#[test]
fn foreign_uid_child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let mut stream = UnixStream::connect_addr(&address).expect("connect");
    stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    // The broker may close before this is written; the answer still waits.
    let _ = stream.write_all(b"{\"cap\":\"stolen\",\"verb\":\"inbox\",\"args\":{}}\n");
    let reply = read_all(&stream);
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let uids = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .expect("Uid line");
    // Real, effective, saved and file-system uid: all must be the foreign one.
    let uids: Vec<&str> = uids.split_whitespace().collect();
    println!(
        "CHILD-UID:{} CHILD-REPLY:{}",
        uids.join(","),
        String::from_utf8_lossy(&reply).trim_end()
    );
}

/// The server admits the peers of one uid only. As root (as CI runs) the
/// foreign peer is a real process of another uid; without root, which
/// cannot start one, this process is the foreign peer of a server told to
/// admit another uid.
#[test]
fn a_peer_of_another_uid_is_refused_unread() {
    if own_uid() == 0 {
        a_process_of_another_uid_is_refused_unread();
    } else {
        this_process_is_refused_by_a_server_for_another_uid();
    }
}

/// A [`counting_echo`] server on the abstract socket `name` with
/// `limits`, and the count of the requests its handler was called for.
fn counting_on(name: &str, limits: Limits) -> (SocketAddr, Arc<AtomicUsize>, Running) {
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let listener = UnixListener::bind_addr(&address).expect("bind");
    let calls = Arc::new(AtomicUsize::new(0));
    let server = Running::start_on(
        listener,
        PathBuf::new(),
        None,
        counting_echo(&calls),
        limits,
    );
    (address, calls, server)
}

fn this_process_is_refused_by_a_server_for_another_uid() {
    let name = format!("mosaic-socket-test-{}-other", std::process::id());
    let limits = Limits {
        peer_uid: own_uid() ^ 1,
        ..Limits::default()
    };
    let (address, calls, _server) = counting_on(&name, limits);
    let mut stream = UnixStream::connect_addr(&address).expect("connect");
    stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    stream.write_all(b"mine\n").expect("write");
    assert_line(&read_all(&stream), &wire_refusal(Refusal::BadCapability));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

fn a_process_of_another_uid_is_refused_unread() {
    // An abstract socket has no file permissions, so the foreign process
    // can reach it and only the server's uid check stands in its way.
    let name = format!("mosaic-socket-test-{}", std::process::id());
    let (address, calls, _server) = counting_on(&name, Limits::default());

    // A copy of this test binary that uid 65534 may run, wherever the
    // build folder is.
    let dir = private_dir();
    let exe = dir.path().join("socket-test");
    {
        let _fs = fs_lock();
        std::fs::copy(std::env::current_exe().expect("exe"), &exe).expect("copy");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let output = Command::new(&exe)
        .args([
            "--exact",
            "foreign_uid_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &name)
        .uid(CHILD_UID)
        .gid(CHILD_UID)
        .stdin(Stdio::null())
        .output()
        .expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = format!(
        "CHILD-UID:{CHILD_UID},{CHILD_UID},{CHILD_UID},{CHILD_UID} CHILD-REPLY:{}",
        String::from_utf8_lossy(&error_line(Refusal::BadCapability))
    );
    // The harness prints the test name on the same line.
    assert!(stdout.contains(&expected), "{stdout}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // Our own uid is still served on the same socket.
    let mut own = UnixStream::connect_addr(&address).expect("connect");
    own.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    own.write_all(b"mine\n").expect("write");
    assert_line(&read_all(&own), b"mine\n");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
