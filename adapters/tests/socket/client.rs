//! The client and the session, against scripted fake brokers and the real
//! server.

use super::*;

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
