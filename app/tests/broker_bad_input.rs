//! Bad input on the broker's socket: every malformed,
//! oversized, slow, half-closed or foreign request gets one static code, the
//! broker keeps serving, and nothing is half-written.
//!
//! Raw lines go through `Client::call_line` (which adds the newline) or a
//! plain `UnixStream` where the framing itself is the point.

#[path = "support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use mosaic_client::socket::Client;
use mosaic_domain::{Refusal, Verb};
use serde_json::{json, Value};

use support::{
    acme, assert_store_intact, config, data_root, globex, launch, raw, raw_refused, Broker, WAIT,
};

/// The socket's request limit, in bytes before the newline.
const LIMIT: usize = 64 * 1024;

/// acme's lead and qa (both claimed), globex's lead, and an acme reader.
fn broker(root: &Path) -> Broker {
    let b = Broker::boot(
        root,
        &config(
            root,
            &[acme(), globex()],
            &[
                launch("acme", "lead", "lead-1"),
                launch("acme", "qa", "qa-1"),
                launch("globex", "lead", "g-lead-1"),
            ],
            &["acme"],
        ),
    );
    for run in ["lead-1", "qa-1"] {
        // `held` after a restart, when the role was still held at close.
        let status = b.agent(run).ok("role.claim", json!({}))["status"].clone();
        assert!(status == "claimed" || status == "held", "{status}");
    }
    b
}

/// `{"cap":cap,"verb":verb,"args":args}` as bytes.
fn line(cap: &str, verb: &str, args: &str) -> Vec<u8> {
    format!(r#"{{"cap":"{cap}","verb":"{verb}","args":{args}}}"#).into_bytes()
}

/// A connection with a read timeout, so a silent broker fails the test.
fn connect(socket: &Path) -> UnixStream {
    let stream = UnixStream::connect(socket).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream
}

/// Everything the broker writes until it closes the connection.
#[track_caller]
fn answer(mut stream: UnixStream) -> Value {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read the answer");
    assert_eq!(bytes.last(), Some(&b'\n'), "{bytes:?}");
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
    serde_json::from_slice(&bytes).expect("JSON")
}

/// Every line the broker writes until it closes the connection, each
/// parsed.
#[track_caller]
fn answers(mut stream: UnixStream) -> Vec<Value> {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read the answers");
    assert_eq!(bytes.last(), Some(&b'\n'), "{bytes:?}");
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("JSON"))
        .collect()
}

#[test]
fn malformed_requests_get_static_codes_and_the_broker_keeps_serving() {
    let root = data_root();
    let b = broker(root.path());
    let lead = b.agent("lead-1");
    let cap = lead.cap.clone();
    let decision = lead.raise("repo.push", Some("main"), json!({"choice": "yes"}));
    let deep = |open: &str, close: &str| {
        let mut text = format!(r#"{{"cap":"{cap}","verb":"inbox","args":{{"x":"#);
        text.push_str(&open.repeat(10_000));
        text.push_str(&close.repeat(10_000));
        text.push_str("}}");
        text.into_bytes()
    };
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        // Not JSON, or not one JSON object.
        (b"".to_vec(), "bad-request"),
        (b"   ".to_vec(), "bad-request"),
        (b"{".to_vec(), "bad-request"),
        (b"{\"cap\":}".to_vec(), "bad-request"),
        (b"{'cap':'x'}".to_vec(), "bad-request"),
        (
            format!(r#"{{"cap":"{cap}","verb":"inbox",}}"#).into_bytes(),
            "bad-request",
        ),
        (
            format!(r#"{{"cap":"{cap}","verb":"inbox"}} {{}}"#).into_bytes(),
            "bad-request",
        ),
        (b"[]".to_vec(), "bad-request"),
        (b"\"inbox\"".to_vec(), "bad-request"),
        (b"42".to_vec(), "bad-request"),
        (b"null".to_vec(), "bad-request"),
        (b"true".to_vec(), "bad-request"),
        (
            format!(r#"[{{"cap":"{cap}","verb":"inbox"}}]"#).into_bytes(),
            "bad-request",
        ),
        (
            format!(r#"{{"cap":"{cap}","cap":"{cap}","verb":"inbox"}}"#).into_bytes(),
            "bad-request",
        ),
        (
            line(
                &cap,
                "message.send",
                r#"{"to":"qa","to":"lead","body":"x"}"#,
            ),
            "bad-request",
        ),
        // Invalid UTF-8, in a value and in a key.
        (
            line(&cap, "message.send", "{\"to\":\"qa\",\"body\":\"\u{0}\"}")
                .into_iter()
                .map(|c| if c == 0 { 0xff } else { c })
                .collect(),
            "bad-request",
        ),
        (
            [
                &line(&cap, "inbox", "{}")[..5],
                b"\xc3\x28",
                &line(&cap, "inbox", "{}")[5..],
            ]
            .concat(),
            "bad-request",
        ),
        (b"{\"cap\":\"\xed\xa0\x80\"}".to_vec(), "bad-request"),
        // 10 000-deep nesting.
        (deep("[", "]"), "bad-request"),
        (deep("{\"a\":", "}"), "bad-request"),
        ("[".repeat(10_000).into_bytes(), "bad-request"),
        // Numbers beyond f64, and numbers where text belongs.
        (line(&cap, "message.read", r#"{"id":1e400}"#), "bad-request"),
        (
            line(&cap, "message.read", r#"{"id":-1e99999}"#),
            "bad-request",
        ),
        (
            line(
                &cap,
                "message.read",
                r#"{"id":123456789012345678901234567890}"#,
            ),
            "bad-request",
        ),
        (br#"{"cap":1e400,"verb":"inbox"}"#.to_vec(), "bad-request"),
        // Wrong types.
        (br#"{"cap":7,"verb":"inbox"}"#.to_vec(), "bad-request"),
        (
            format!(r#"{{"cap":"{cap}","verb":7}}"#).into_bytes(),
            "bad-request",
        ),
        (
            format!(r#"{{"cap":"{cap}","verb":["inbox"]}}"#).into_bytes(),
            "bad-request",
        ),
        (line(&cap, "inbox", "[]"), "bad-request"),
        (line(&cap, "inbox", "\"all\""), "bad-request"),
        (line(&cap, "inbox", "null"), "bad-request"),
        (
            line(&cap, "message.send", r#"{"to":7,"body":"x"}"#),
            "bad-request",
        ),
        (
            line(&cap, "message.send", r#"{"to":"qa","body":{"text":"x"}}"#),
            "bad-request",
        ),
        (
            line(
                &cap,
                "decision.raise",
                r#"{"action":"repo.push","question":"q","options":{"yes":"Yes"},"recommendation":"r","blocking":false,"choice":"yes"}"#,
            ),
            "bad-request",
        ),
        (
            line(
                &cap,
                "decision.raise",
                r#"{"action":"repo.push","question":"q","options":["yes"],"recommendation":"r","blocking":false,"choice":"yes"}"#,
            ),
            "bad-request",
        ),
        (
            line(
                &cap,
                "decision.raise",
                r#"{"action":"repo.push","question":"q","options":[{"key":"yes","text":"Y"}],"recommendation":"r","blocking":"no","choice":"yes"}"#,
            ),
            "bad-request",
        ),
        (
            line(
                &cap,
                "decision.seen",
                &format!(
                    r#"{{"id":"{}","note":5}}"#,
                    decision["id"].as_str().expect("id")
                ),
            ),
            "bad-request",
        ),
        // Missing keys.
        (br#"{"verb":"inbox"}"#.to_vec(), "bad-request"),
        (format!(r#"{{"cap":"{cap}"}}"#).into_bytes(), "bad-request"),
        (b"{}".to_vec(), "bad-request"),
        (line(&cap, "message.send", r#"{"to":"qa"}"#), "bad-request"),
        (
            line(
                &cap,
                "decision.resolve",
                &format!(r#"{{"id":"{}"}}"#, decision["id"].as_str().expect("id")),
            ),
            "bad-request",
        ),
        (
            line(
                &cap,
                "decision.raise",
                r#"{"action":"repo.push","question":"q","options":[{"key":"yes","text":"Y"}],"recommendation":"r","choice":"yes"}"#,
            ),
            "bad-request",
        ),
        // Extra keys.
        (
            format!(r#"{{"cap":"{cap}","verb":"inbox","as":"human"}}"#).into_bytes(),
            "unknown-key",
        ),
        (
            format!(r#"{{"cap":"{cap}","verb":"inbox","business":"globex"}}"#).into_bytes(),
            "unknown-key",
        ),
        (
            line(&cap, "role.claim", r#"{"run":"dev-1"}"#),
            "unknown-key",
        ),
        (
            line(
                &cap,
                "message.send",
                r#"{"to":"qa","body":"x","from":"human"}"#,
            ),
            "unknown-key",
        ),
        // Capabilities that are malformed or were never issued.
        (line("", "inbox", "{}"), "bad-capability"),
        (line(&cap.to_uppercase(), "inbox", "{}"), "bad-capability"),
        (line(&cap[..63], "inbox", "{}"), "bad-capability"),
        (line(&format!("{cap}0"), "inbox", "{}"), "bad-capability"),
        (line(&"0".repeat(64), "inbox", "{}"), "bad-capability"),
        (
            line(&format!("{}g", &cap[..63]), "inbox", "{}"),
            "bad-capability",
        ),
        // Verbs.
        (
            line(&cap, "sql", r#"{"query":"DROP TABLE ledger"}"#),
            "unknown-verb",
        ),
        (line(&cap, "inbox ", "{}"), "unknown-verb"),
    ];
    // A capability of another business on this business's decision.
    let other = b.agent("g-lead-1");
    other.claim();
    cases.push((
        line(
            &other.cap,
            "decision.seen",
            &format!(r#"{{"id":"{}"}}"#, decision["id"].as_str().expect("id")),
        ),
        "cross-business",
    ));
    for (bytes, code) in &cases {
        raw_refused(&b.socket, bytes, code);
    }
    // Still serving, and nothing the refusals carried took effect.
    assert_eq!(lead.ok("inbox", json!({})), json!([]));
    assert_eq!(
        lead.trail_kinds(decision["id"].as_str().expect("id")),
        ["decision.raised", "decision.resolved"]
    );
    assert_eq!(b.agent("qa-1").ok("message.receive", json!({})), json!([]));
    b.close();
    assert_store_intact(root.path());
}

#[test]
fn a_64_kib_line_is_accepted_and_one_byte_more_is_request_too_large() {
    let root = data_root();
    let b = broker(root.path());
    let cap = b.agent("lead-1").cap;
    let padded = |len: usize| {
        let empty = line(&cap, "message.send", r#"{"to":"qa","body":""}"#).len();
        let body = "x".repeat(len - empty);
        let bytes = line(
            &cap,
            "message.send",
            &format!(r#"{{"to":"qa","body":"{body}"}}"#),
        );
        assert_eq!(bytes.len(), len);
        (bytes, body)
    };
    let (exact, body) = padded(LIMIT);
    let accepted = raw(&b.socket, &exact);
    assert_eq!(accepted["ok"], json!(true), "{accepted}");
    let (over, _) = padded(LIMIT + 1);
    raw_refused(&b.socket, &over, "request-too-large");
    // Far beyond the limit, the broker stops reading and still answers.
    raw_refused(&b.socket, &vec![b'x'; 8 * LIMIT], "request-too-large");
    let received = b.agent("qa-1").ok("message.receive", json!({}));
    let received = received.as_array().expect("messages");
    assert_eq!(received.len(), 1, "only the 64 KiB request took effect");
    assert_eq!(received[0]["body"], json!(body));
    assert_eq!(received[0]["id"], accepted["result"]["id"]);
    // The client refuses an oversized request itself, sending nothing.
    let client = Client::new(&b.socket, cap);
    assert_eq!(
        client.call(
            "message.send",
            json!({"to": "qa", "body": "x".repeat(LIMIT)})
        ),
        Err(Refusal::RequestTooLarge)
    );
    b.close();
}

/// A client that writes its whole over-long line before it
/// reads must read the refusal. Without the drain, the broker closed with
/// the line's rest still queued, the kernel reset the connection and the
/// client's write failed: 0 of 20 answers arrived at 300 KB and at 1 MB.
#[test]
fn an_oversized_line_written_whole_before_reading_is_answered_every_time() {
    let root = data_root();
    let b = broker(root.path());
    let cap = b.agent("lead-1").cap;
    for size in [70_000, 300_000, 1_000_000, 8_000_000] {
        let empty = line(&cap, "message.send", r#"{"to":"qa","body":""}"#).len();
        let body = "x".repeat(size - empty);
        let mut request = line(
            &cap,
            "message.send",
            &format!(r#"{{"to":"qa","body":"{body}"}}"#),
        );
        assert_eq!(request.len(), size);
        request.push(b'\n');
        for attempt in 1..=20 {
            let mut stream = connect(&b.socket);
            // A broker that stops reading and never closes would block this
            // write forever: the timeout turns that into a failure.
            stream.set_write_timeout(Some(WAIT)).expect("timeout");
            if let Err(e) = stream.write_all(&request) {
                panic!("{size} bytes, try {attempt}: the write failed ({e}) before any answer");
            }
            let mut bytes = Vec::new();
            if let Err(e) = stream.read_to_end(&mut bytes) {
                panic!("{size} bytes, try {attempt}: the read failed ({e})");
            }
            assert_eq!(
                bytes,
                b"{\"ok\":false,\"error\":\"request-too-large\"}\n",
                "{size} bytes, try {attempt}: {:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    // None of them took effect, and the broker still serves.
    assert_eq!(b.agent("qa-1").ok("message.receive", json!({})), json!([]));
    b.close();
    assert_store_intact(root.path());
}

#[test]
fn silence_after_a_partial_line_times_out_while_other_clients_are_served() {
    let root = data_root();
    let b = broker(root.path());
    let cap = b.agent("lead-1").cap;
    // The one slow client: half a request, then nothing, for the real 1 s
    // a connection has for its first line.
    let socket = b.socket.clone();
    let silent = std::thread::spawn(move || {
        let started = Instant::now();
        let mut stream = connect(&socket);
        stream.write_all(br#"{"cap":""#).expect("write");
        (answer(stream), started.elapsed())
    });

    // Meanwhile everybody else is served.
    let inbox = line(&cap, "inbox", "{}");
    // A half-closed connection: part of a line, then the end of the stream.
    let mut half = connect(&b.socket);
    half.write_all(&inbox[..10]).expect("write");
    half.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(answer(half), json!({"ok": false, "error": "bad-request"}));
    // Nothing at all, then the end of the stream.
    let empty = connect(&b.socket);
    empty.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(answer(empty), json!({"ok": false, "error": "bad-request"}));
    // A whole line, then half-closed: still answered.
    let mut whole = connect(&b.socket);
    whole
        .write_all(&[&inbox[..], b"\n"].concat())
        .expect("write");
    whole.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(answer(whole), json!({"ok": true, "result": []}));
    // A whole line and the start of another, then the end of the stream:
    // the first is answered, the one cut off is `bad-request`.
    let mut two = connect(&b.socket);
    two.write_all(&[&inbox[..], b"\n", &inbox[..10]].concat())
        .expect("write");
    two.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(
        answers(two),
        [
            json!({"ok": true, "result": []}),
            json!({"ok": false, "error": "bad-request"})
        ]
    );
    // A client that vanishes before its answer costs the broker nothing.
    let mut gone = connect(&b.socket);
    gone.write_all(
        &[
            &line(&cap, "message.send", r#"{"to":"qa","body":"bye"}"#)[..],
            b"\n",
        ]
        .concat(),
    )
    .expect("write");
    drop(gone);
    let lead = b.agent("lead-1");
    assert_eq!(lead.ok("role.claim", json!({})), json!({"status": "held"}));

    let (timed_out, waited) = silent.join().expect("the silent client");
    assert_eq!(timed_out, json!({"ok": false, "error": "request-timeout"}));
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(15),
        "answered after {waited:?}"
    );
    assert_eq!(lead.ok("role.claim", json!({})), json!({"status": "held"}));
    b.close();
    assert_store_intact(root.path());
}

/// A small deterministic generator (xorshift64*), so the lines are the same
/// on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A byte that is anything but the line's end.
    fn byte(&mut self) -> u8 {
        const INTERESTING: &[u8] = b"{}[]\":,\\ -.0123456789eEtrufalsn\x00\x7f\xff\xc3\xed\r\t";
        if self.below(2) == 0 {
            *self.pick(INTERESTING)
        } else {
            match (self.next() & 0xff) as u8 {
                b'\n' => b'?',
                other => other,
            }
        }
    }
}

/// A random JSON value, at most `depth` deep.
fn value(rng: &mut Rng, depth: usize, caps: &[String]) -> Value {
    const WORDS: &[&str] = &[
        "cap",
        "verb",
        "args",
        "to",
        "body",
        "id",
        "choice",
        "role",
        "decision",
        "subject",
        "kind",
        "action",
        "qa",
        "lead",
        "human",
        "yes",
        "vikunja:3/41",
        "INFO",
        "routine",
        "00000000-0000-4000-8000-000000000000",
        "",
    ];
    match rng.below(if depth == 0 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!((rng.next() as i64) >> rng.below(64)),
        3 => json!(*rng.pick(WORDS)),
        4 => json!(rng.pick(caps)),
        5 => Value::Array(
            (0..rng.below(4))
                .map(|_| value(rng, depth - 1, caps))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(5))
                .map(|_| ((*rng.pick(WORDS)).to_owned(), value(rng, depth - 1, caps)))
                .collect(),
        ),
    }
}

/// One generated line and whether it can only be refused.
fn generate(rng: &mut Rng, templates: &[Vec<u8>], caps: &[String]) -> (Vec<u8>, bool) {
    // Every verb of the domain's table, so a new verb is in the campaign
    // by itself, and two names that are none.
    let verbs: Vec<&str> = Verb::ALL
        .iter()
        .map(|verb| verb.as_str())
        .chain(["sql", "Inbox"])
        .collect();
    match rng.below(10) {
        // Printable garbage.
        0 => (
            (0..rng.below(120))
                .map(|_| 0x20 + (rng.below(95) as u8))
                .collect(),
            true,
        ),
        // Arbitrary bytes.
        1 => ((0..rng.below(120)).map(|_| rng.byte()).collect(), true),
        // A valid request cut short.
        2 => {
            let t = rng.pick(templates);
            (t[..rng.below(t.len())].to_vec(), true)
        }
        // Deep nesting or huge numbers inside a valid request.
        3 => {
            let t = rng.pick(templates);
            let inner = match rng.below(3) {
                0 => {
                    let depth = 129 + rng.below(3_000);
                    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
                }
                1 => format!("{}e{}", rng.below(9) + 1, 309 + rng.below(100_000)),
                _ => format!("-{}e{}", rng.below(9) + 1, 309 + rng.below(100_000)),
            };
            let mut bytes = t[..t.len() - 1].to_vec();
            bytes.extend_from_slice(format!(r#","x":{inner}}}"#).as_bytes());
            (bytes, true)
        }
        // Now and then, more than 64 KiB.
        4 if rng.below(10) == 0 => (vec![b' '; LIMIT + 1 + rng.below(100)], true),
        // A valid request with a few bytes changed, deleted or inserted.
        4..=6 => {
            let mut bytes = rng.pick(templates).clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                match rng.below(3) {
                    0 => bytes[at] = rng.byte(),
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at, rng.byte()),
                }
                if bytes.is_empty() {
                    break;
                }
            }
            (bytes, false)
        }
        // Well-formed JSON of random shape.
        _ => {
            let mut request = serde_json::Map::new();
            if rng.below(8) != 0 {
                request.insert("cap".into(), json!(rng.pick(caps)));
            }
            if rng.below(8) != 0 {
                request.insert("verb".into(), json!(*rng.pick(&verbs)));
            }
            if rng.below(3) != 0 {
                request.insert("args".into(), value(rng, 3, caps));
            }
            if rng.below(10) == 0 {
                request.insert("extra".into(), value(rng, 1, caps));
            }
            (Value::Object(request).to_string().into_bytes(), false)
        }
    }
}

#[test]
fn a_thousand_random_lines_get_static_codes_and_nothing_is_half_written() {
    let root = data_root();
    let b = broker(root.path());
    let (lead, qa) = (b.agent("lead-1").cap, b.agent("qa-1").cap);
    let reader = b.reader(0).cap;
    let other = b.agent("g-lead-1").cap;
    let caps = vec![
        lead.clone(),
        qa.clone(),
        reader.clone(),
        other,
        "f".repeat(64),
        "cap".into(),
    ];
    let templates: Vec<Vec<u8>> = vec![
        line(&lead, "inbox", "{}"),
        line(
            &lead,
            "message.send",
            r#"{"to":"qa","body":"fuzz","class":"INFO"}"#,
        ),
        line(
            &lead,
            "decision.raise",
            r#"{"action":"repo.merge","question":"q","options":[{"key":"yes","text":"Y"},{"key":"no","text":"N"}],"recommendation":"yes","blocking":true,"task_ref":"vikunja:3/41"}"#,
        ),
        line(&lead, "trail", r#"{"subject":"vikunja:3/41"}"#),
        line(
            &lead,
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine","target":"ci"},"subject":"qa"}"#,
        ),
        line(&qa, "message.receive", "{}"),
        line(
            &qa,
            "message.read",
            r#"{"id":"00000000-0000-4000-8000-000000000000"}"#,
        ),
        line(&reader, "agents", "{}"),
        line(&lead, "role.release", "{}"),
    ];
    let mut rng = Rng(0x5eed_0000_0000_0004);
    let lines: Vec<(Vec<u8>, bool)> = (0..1_000)
        .map(|_| generate(&mut rng, &templates, &caps))
        .collect();
    assert!(lines.iter().all(|(l, _)| !l.contains(&b'\n')));

    // Four clients at once, each its share of the lines.
    let answers: Vec<(usize, Value)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|k| {
                let (lines, socket) = (&lines, &b.socket);
                scope.spawn(move || {
                    (k..lines.len())
                        .step_by(4)
                        .map(|i| (i, raw(socket, &lines[i].0)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a client"))
            .collect()
    });
    assert_eq!(answers.len(), 1_000);
    let mut refused = 0;
    for (i, answer) in &answers {
        let object = answer.as_object().expect("an object");
        match object.get("ok") {
            Some(Value::Bool(false)) => {
                let code = object.get("error").and_then(Value::as_str).unwrap_or("");
                assert!(Refusal::from_code(code).is_some(), "line {i}: {answer}");
                assert_eq!(object.len(), 2, "line {i}: {answer}");
                refused += 1;
            }
            Some(Value::Bool(true)) => {
                assert!(!lines[*i].1, "line {i} must be refused: {answer}");
                assert!(
                    object.contains_key("result") && object.len() == 2,
                    "{answer}"
                );
            }
            other => panic!("line {i}: no ok flag ({other:?}) in {answer}"),
        }
    }
    assert!(refused >= 700, "{refused} refusals");

    // Still up and consistent.
    let lead = b.agent("lead-1");
    lead.ok("inbox", json!({}));
    lead.ok("role.claim", json!({}));
    b.close();
    assert_store_intact(root.path());
    // The store opens again with every check passing.
    let again = broker(root.path());
    assert_eq!(
        again
            .reader(0)
            .ok("agents", json!({}))
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    again.close();
}

#[test]
fn thousands_of_connections_opened_and_dropped_leave_it_serving_in_bounded_memory() {
    let root = data_root();
    let b = broker(root.path());
    let lead = b.agent("lead-1");
    let churn = |rounds: usize| {
        for i in 0..rounds {
            let mut stream = UnixStream::connect(&b.socket).expect("connect");
            // Dropped at every stage: before a byte, mid-line, and after a
            // whole line without reading the answer.
            match i % 3 {
                0 => {}
                1 => {
                    let _ = stream.write_all(br#"{"cap":"#);
                }
                _ => {
                    let _ = stream.write_all(&line(&lead.cap, "inbox", "{}"));
                    let _ = stream.write_all(b"\n");
                }
            }
            drop(stream);
        }
    };
    // Warm up the runtime's pools, then measure the churn itself.
    churn(500);
    lead.ok("inbox", json!({}));
    let before = b.rss_kib();
    churn(3000);
    // Still serving, and every dropped request was answered or forgotten.
    lead.ok("inbox", json!({}));
    let sent = lead.send("qa", "after the churn", json!({}));
    assert!(sent.is_string(), "{sent}");
    let after = b.rss_kib();
    assert!(
        after < before + 16 * 1024,
        "memory grew from {before} KiB to {after} KiB over 3000 dropped connections"
    );
    assert_store_intact(root.path());
    b.close();
}
