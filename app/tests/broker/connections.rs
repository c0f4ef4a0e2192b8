//! Several request lines on one socket connection: answered in order, one
//! line each, whoever's capability each line carries; a refused or
//! malformed line is answered and the connection goes on, an oversized
//! one ends it; the idle deadline between requests and the read deadline
//! of each line; a `changes` wait holding the lines behind it; clients of
//! one request per connection served as before; and a close that does not
//! wait for idle connections.
//!
//! Lines go out on plain `UnixStream`s, since the framing is the point.
//! Nothing sleeps: every wait is for an answer or the end of a stream,
//! bounded by [`WAIT`]; the deadline tests wait out the real 5 s.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{acme, acme_launches, config, data_root, message, Agent, Broker, WAIT};

/// The broker's read deadline, which is also its idle deadline.
const DEADLINE: Duration = Duration::from_secs(5);

/// A little less than [`DEADLINE`], for "not before the deadline".
const NEARLY: Duration = Duration::from_millis(4_900);

/// acme with every run of `acme_launches` and one reader.
fn broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

/// `{"cap":cap,"verb":verb,"args":args}` and its newline.
fn line(cap: &str, verb: &str, args: Value) -> Vec<u8> {
    let mut line = json!({"cap": cap, "verb": verb, "args": args})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// `lead-1` and `qa-1`, each holding its role.
fn lead_and_qa(b: &Broker) -> (Agent, Agent) {
    let (lead, qa) = (b.agent("lead-1"), b.agent("qa-1"));
    lead.claim();
    qa.claim();
    (lead, qa)
}

/// Two request lines of `cap`: a `changes` wait from `cursor`, then `verb`
/// with no arguments.
fn wait_then(cap: &str, cursor: &Value, timeout_ms: u64, verb: &str) -> Vec<u8> {
    [
        line(
            cap,
            "changes",
            json!({"since": cursor, "timeoutMs": timeout_ms}),
        ),
        line(cap, verb, json!({})),
    ]
    .concat()
}

/// A connection with a read timeout, so a silent broker fails the test.
fn connect(socket: &Path) -> UnixStream {
    let stream = UnixStream::connect(socket).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream.set_write_timeout(Some(WAIT)).expect("timeout");
    stream
}

/// Every answer line until the broker closes the connection, parsed.
#[track_caller]
fn answers_until_closed(mut stream: &UnixStream) -> Vec<Value> {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("the answers");
    assert!(
        bytes.is_empty() || bytes.last() == Some(&b'\n'),
        "{bytes:?}"
    );
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("a JSON answer"))
        .collect()
}

/// The next answer line, parsed.
#[track_caller]
fn next_answer(reader: &mut BufReader<&UnixStream>) -> Value {
    let mut text = String::new();
    reader.read_line(&mut text).expect("an answer");
    assert!(text.ends_with('\n'), "a whole line: {text:?}");
    serde_json::from_str(&text).expect("a JSON answer")
}

fn refused(code: &str) -> Value {
    json!({"ok": false, "error": code})
}

fn ok(result: Value) -> Value {
    json!({"ok": true, "result": result})
}

#[test]
fn lines_of_several_callers_on_one_connection_are_answered_in_order_one_each() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa, dev) = (b.cap("lead-1"), b.cap("qa-1"), b.cap("dev-1"));
    let reader = b.boot["readers"][0]["cap"]
        .as_str()
        .expect("a reader cap")
        .to_owned();
    let stranger = "0".repeat(64);
    let requests: Vec<Vec<u8>> = vec![
        line(&lead, "role.claim", json!({})),
        line(&qa, "role.claim", json!({})),
        line(&lead, "message.send", json!({"to": "qa", "body": "one"})),
        // Refused by the bus: answered, and the connection goes on.
        line(&dev, "message.receive", json!({})),
        // Not JSON at all, an unknown verb, an unknown capability.
        b"{\n".to_vec(),
        line(&lead, "role.dance", json!({})),
        line(&stranger, "inbox", json!({})),
        line(&lead, "message.send", json!({"to": "qa", "body": "two"})),
        line(&qa, "message.receive", json!({})),
        line(&qa, "message.receive", json!({})),
        line(&reader, "tasks", json!({})),
    ];
    let mut stream = connect(&b.socket);
    stream.write_all(&requests.concat()).expect("write");
    stream.shutdown(Shutdown::Write).expect("half-close");
    let answers = answers_until_closed(&stream);
    assert_eq!(answers.len(), requests.len(), "{answers:?}");
    let one = answers[2]["result"]["id"].clone();
    let two = answers[7]["result"]["id"].clone();
    assert_eq!(
        answers,
        [
            ok(json!({"status": "claimed"})),
            ok(json!({"status": "claimed"})),
            ok(json!({"id": one, "request": null})),
            refused("not-holder"),
            refused("bad-request"),
            refused("unknown-verb"),
            refused("bad-capability"),
            ok(json!({"id": two, "request": null})),
            ok(json!([
                message(&one, ("lead", "lead-1"), "qa", "one", json!({})),
                message(&two, ("lead", "lead-1"), "qa", "two", json!({})),
            ])),
            ok(json!([])),
            ok(json!([])),
        ]
    );
    // Each line acted as its own caller: lead sent (`from_run` above), qa's
    // line took delivery, and the record says so.
    let trail = b.agent("lead-1").trail(one.as_str().expect("an id"));
    assert_eq!(
        trail.last(),
        Some(
            &json!({"kind": "message.delivered", "business": "acme", "message": one, "run": "qa-1"})
        ),
        "{trail:?}"
    );
    b.close();
}

#[test]
fn an_oversized_line_ends_its_connection_and_what_follows_it_never_runs() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa) = lead_and_qa(&b);
    let big = "x".repeat(70_000);
    let requests = [
        line(
            &lead.cap,
            "message.send",
            json!({"to": "qa", "body": "before"}),
        ),
        line(&lead.cap, "message.send", json!({"to": "qa", "body": big})),
        line(
            &lead.cap,
            "message.send",
            json!({"to": "qa", "body": "after"}),
        ),
    ];
    let mut stream = connect(&b.socket);
    stream.write_all(&requests.concat()).expect("write");
    let answers = answers_until_closed(&stream);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["ok"], true, "{answers:?}");
    assert_eq!(answers[1], refused("request-too-large"));
    let received = qa.ok("message.receive", json!({}));
    let bodies: Vec<&Value> = received
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["body"])
        .collect();
    assert_eq!(bodies, [&json!("before")]);
    b.close();
}

#[test]
fn a_changes_wait_holds_the_lines_behind_it_until_it_is_answered() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa) = lead_and_qa(&b);
    let cursor = qa.ok("changes", json!({}))["cursor"].clone();
    let stream = connect(&b.socket);
    (&stream)
        .write_all(&wait_then(&qa.cap, &cursor, 20_000, "message.receive"))
        .expect("write");
    // Whether or not the wait has begun, a message after its cursor wakes
    // it; `message.receive` runs only after the wait's answer, so it gets
    // that message.
    let id = lead.send("qa", "wake up", json!({}));
    let mut reader = BufReader::new(&stream);
    let woke = next_answer(&mut reader);
    assert_eq!(woke["ok"], true, "{woke}");
    let changes = woke["result"]["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{woke}");
    assert_eq!(changes[0]["message"], id, "{woke}");
    assert_eq!(
        next_answer(&mut reader),
        ok(json!([message(
            &id,
            ("lead", "lead-1"),
            "qa",
            "wake up",
            json!({})
        )]))
    );
    drop(reader);
    drop(stream);
    b.close();
}

#[test]
fn a_quiet_connection_is_closed_after_the_deadline_and_each_line_has_a_deadline_of_its_own() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa) = lead_and_qa(&b);
    let cursor = qa.ok("changes", json!({}))["cursor"].clone();
    let socket = b.socket.clone();
    let inbox = line(&lead.cap, "inbox", json!({}));

    // Answered, then silent: closed after the deadline, without a word.
    let idle = std::thread::spawn({
        let (socket, inbox) = (socket.clone(), inbox.clone());
        move || {
            let stream = connect(&socket);
            (&stream).write_all(&inbox).expect("write");
            let mut reader = BufReader::new(&stream);
            let first = next_answer(&mut reader);
            let answered = Instant::now();
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).expect("the end");
            (first, rest, answered.elapsed())
        }
    });
    // Answered, then part of a line and silence: `request-timeout`.
    let partial = std::thread::spawn({
        let (socket, inbox) = (socket.clone(), inbox.clone());
        move || {
            let stream = connect(&socket);
            (&stream).write_all(&inbox).expect("write");
            let mut reader = BufReader::new(&stream);
            let first = next_answer(&mut reader);
            (&stream).write_all(&inbox[..10]).expect("write");
            let begun = Instant::now();
            let rest = next_answer(&mut reader);
            (first, rest, begun.elapsed())
        }
    });
    // A wait longer than the deadline, then one more line: the deadline
    // counts from the previous answer, not from the connection's start.
    let long = std::thread::spawn({
        let qa_cap = qa.cap.clone();
        move || {
            let stream = connect(&socket);
            let connected = Instant::now();
            (&stream)
                .write_all(&line(
                    &qa_cap,
                    "changes",
                    json!({"since": cursor, "timeoutMs": 6_000}),
                ))
                .expect("write");
            let mut reader = BufReader::new(&stream);
            let waited = next_answer(&mut reader);
            let age = connected.elapsed();
            (&stream)
                .write_all(&line(&qa_cap, "message.receive", json!({})))
                .expect("write");
            (waited, age, next_answer(&mut reader))
        }
    });

    let (first, rest, quiet) = idle.join().expect("the idle client");
    assert_eq!(first, ok(json!([])));
    assert_eq!(rest, b"", "an idle connection is closed without an answer");
    assert!(quiet >= NEARLY && quiet < WAIT, "closed after {quiet:?}");

    let (first, timed_out, silent) = partial.join().expect("the partial client");
    assert_eq!(first, ok(json!([])));
    assert_eq!(timed_out, refused("request-timeout"));
    assert!(
        silent >= NEARLY && silent < WAIT,
        "answered after {silent:?}"
    );

    let (waited, age, after) = long.join().expect("the long wait");
    assert_eq!(waited["result"]["changes"], json!([]), "{waited}");
    assert!(age > DEADLINE, "the connection was {age:?} old");
    assert_eq!(after, ok(json!([])));
    b.close();
}

#[test]
fn clients_of_one_request_per_connection_are_served_as_before() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa) = lead_and_qa(&b);

    // One line, then the end of its stream: one answer, then the end at
    // once, without waiting for the idle deadline.
    let mut stream = connect(&b.socket);
    let started = Instant::now();
    stream
        .write_all(&line(
            &lead.cap,
            "message.send",
            json!({"to": "qa", "body": "a"}),
        ))
        .expect("write");
    stream.shutdown(Shutdown::Write).expect("half-close");
    let answers = answers_until_closed(&stream);
    assert!(started.elapsed() < NEARLY, "{:?}", started.elapsed());
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["ok"], true, "{answers:?}");

    // One line, one answer read, then closed by the client.
    let stream = connect(&b.socket);
    (&stream)
        .write_all(&line(
            &lead.cap,
            "message.send",
            json!({"to": "qa", "body": "b"}),
        ))
        .expect("write");
    assert_eq!(next_answer(&mut BufReader::new(&stream))["ok"], true);
    drop(stream);

    // The socket client of one connection per call.
    lead.send("qa", "c", json!({}));
    let received = qa.ok("message.receive", json!({}));
    let bodies: Vec<&Value> = received
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["body"])
        .collect();
    assert_eq!(bodies, [&json!("a"), &json!("b"), &json!("c")]);
    b.close();
}

#[test]
fn a_close_does_not_wait_for_idle_connections_and_answers_the_wait_in_flight() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa) = lead_and_qa(&b);
    let cursor = qa.ok("changes", json!({}))["cursor"].clone();
    // Three connections answered once and left open, idle.
    let idle: Vec<UnixStream> = (0..3)
        .map(|_| {
            let stream = connect(&b.socket);
            (&stream)
                .write_all(&line(&lead.cap, "inbox", json!({})))
                .expect("write");
            assert_eq!(next_answer(&mut BufReader::new(&stream)), ok(json!([])));
            stream
        })
        .collect();
    // And a wait in flight.
    let waiting = connect(&b.socket);
    (&waiting)
        .write_all(&line(
            &qa.cap,
            "changes",
            json!({"since": cursor, "timeoutMs": 120_000}),
        ))
        .expect("write");
    // Once the broker is quiet it has read the line and parked the wait.
    b.wait_quiet();

    let started = Instant::now();
    b.close();
    let took = started.elapsed();
    assert!(took < NEARLY, "the close took {took:?}");
    for stream in &idle {
        assert_eq!(answers_until_closed(stream), Vec::<Value>::new());
    }
    // The wait is answered, empty, as the broker closes, then its
    // connection ends too.
    let answers = answers_until_closed(&waiting);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"]["changes"], json!([]), "{answers:?}");
}

#[test]
fn a_connection_half_closed_behind_a_wait_gets_a_json_answer_for_every_line() {
    let root = data_root();
    let b = broker(root.path());
    let qa = b.agent("qa-1");
    qa.claim();
    let cursor = qa.ok("changes", json!({}))["cursor"].clone();
    let mut stream = connect(&b.socket);
    let started = Instant::now();
    stream
        .write_all(&wait_then(&qa.cap, &cursor, 120_000, "inbox"))
        .expect("write");
    // The end of the stream is the client's disconnect: the wait ends at
    // once, with nothing after its cursor, and the line behind it runs.
    stream.shutdown(Shutdown::Write).expect("half-close");
    assert_eq!(
        answers_until_closed(&stream),
        [ok(json!({"cursor": cursor, "changes": []})), ok(json!([]))]
    );
    assert!(started.elapsed() < NEARLY, "{:?}", started.elapsed());
    b.close();
}
