//! Soak of the change feed's waits, black box: a real
//! `mosaic-bus broker` child, 10 000 `changes` waits opened over real
//! sockets, in waves; each run's last [`WAITS_PER_RUN`] are dropped
//! mid-wait, and the rest answered at once as each run's newer waits take
//! their seats.
//!
//! A wave opens its connections, each with one `changes {since: cursor}`
//! line of an agent holding its role, with nothing after the cursor, so
//! each one waits, until a newer wait of its run answers it. The wave is
//! dropped only once its waits are open: the broker holds the connections
//! of the waits left waiting, it is quiet (every one of its threads
//! asleep, twice in a row with the same CPU time: it has read and handled
//! every line), and exactly the waits beyond each run's
//! [`WAITS_PER_RUN`] have an answer to read. Then every client closes its
//! connection, and the next
//! wave starts once the broker has closed its side of every one: a client
//! that disconnects ends its wait (the contract), instead of holding a
//! connection slot, a task and its buffers until `timeoutMs`.
//!
//! Afterwards the broker still serves: a normal verb is answered, and a
//! fresh wait still wakes on a message, with exactly that message; its
//! resident set grew by less than 16 MiB over the 10 000 waits.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use serde_json::{json, Value};

use mosaic_app::runtime::feed::WAITS_PER_RUN;
use mosaic_app::runtime::DEFAULT_CONNECTIONS;
use support::{acme, acme_launches, config, data_root, wait_for, Agent, Broker, WAIT};

/// Waits per wave: well under the connections the broker serves at once
/// (`MAX_CONNECTIONS`), under the common soft limit of 1024 open files of
/// this test process, and, shared by the runs that wait, under each run's
/// cap of connections (`DEFAULT_CONNECTIONS`).
const WAVE: usize = 250;

/// Waves: 10 000 dropped waits in all.
const WAVES: usize = 40;

/// The longest a wait may ask for; none of them is ever answered.
const TIMEOUT_MS: u64 = 120_000;

/// The request line of one `changes` wait of `agent` from `since`.
fn wait_line(agent: &Agent, since: u64) -> Vec<u8> {
    let mut line = json!({
        "cap": agent.cap,
        "verb": "changes",
        "args": {"since": since, "timeoutMs": TIMEOUT_MS},
    })
    .to_string()
    .into_bytes();
    line.push(b'\n');
    line
}

/// `agent`'s cursor now: `changes` without `since`, answered at once with
/// no changes.
#[track_caller]
fn cursor(agent: &Agent) -> u64 {
    let answer = agent.ok("changes", json!({}));
    assert_eq!(answer["changes"], json!([]), "{answer}");
    answer["cursor"].as_u64().expect("a cursor")
}

/// Whether an answer is waiting on `stream` (without waiting for one).
fn has_answer(stream: &UnixStream) -> bool {
    stream.set_nonblocking(true).expect("non-blocking");
    let mut byte = [0u8; 1];
    let answered = match (&*stream).read(&mut byte) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("a wait's connection failed: {e}"),
    };
    stream.set_nonblocking(false).expect("blocking");
    answered
}

/// Opens `lines.len()` waits at once, each on its own connection, checks
/// that `waiting` of them are open in the broker and unanswered, and the
/// others answered (their runs' newer waits took their seats), then drops
/// them all and waits until the broker has closed every connection.
#[track_caller]
fn wave(broker: &Broker, lines: &[Vec<u8>], waiting: usize) {
    // Quiet first: the connection of a call just answered may still be
    // open on the broker's side.
    broker.wait_quiet();
    let idle = broker.fd_count();
    let streams: Vec<UnixStream> = lines
        .iter()
        .map(|line| {
            let mut stream = UnixStream::connect(&broker.socket).expect("connect");
            stream.write_all(line).expect("write a wait");
            stream
        })
        .collect();
    // The answered waits' connections close, idle, 5 s after their
    // answer; the waiting ones stay.
    wait_for(
        "the broker holds every waiting connection of the wave",
        || broker.fd_count() >= idle + waiting,
    );
    broker.wait_quiet();
    let answered = streams.iter().filter(|s| has_answer(s)).count();
    assert_eq!(
        answered,
        lines.len() - waiting,
        "waits beyond their runs' seats were answered, and no other"
    );
    assert!(
        broker.fd_count() >= idle + waiting,
        "the broker closed a connection that was still waiting"
    );
    drop(streams);
    wait_for("the broker closes every dropped wait's connection", || {
        broker.fd_count() <= idle
    });
}

#[test]
fn ten_thousand_waits_dropped_mid_wait_leave_it_serving_in_bounded_memory() {
    let started = Instant::now();
    let root = data_root();
    let cfg = config(root.path(), &[acme()], &acme_launches(), &[]);
    let broker = Broker::boot(root.path(), &cfg);
    let (lead, qa, arch, dev, ops) = (
        broker.agent("lead-1"),
        broker.agent("qa-1"),
        broker.agent("arch-1"),
        broker.agent("dev-1"),
        broker.agent("ops-1"),
    );
    let waiters = [&qa, &arch, &dev, &ops];
    for agent in [&lead, &qa, &arch, &dev, &ops] {
        agent.claim();
    }
    let since: Vec<u64> = waiters.iter().map(|agent| cursor(agent)).collect();
    // Four agents' waits in turn, so the broker keeps more than one
    // agent's waits at once, each run within its cap of connections.
    let lines: Vec<Vec<u8>> = (0..WAVE)
        .map(|i| wait_line(waiters[i % waiters.len()], since[i % waiters.len()]))
        .collect();
    assert!(WAVE.div_ceil(waiters.len()) <= DEFAULT_CONNECTIONS);
    let qa_since = since[0];

    // Warm up the runtime's pools and the allocator with one wave, then
    // measure the waves themselves.
    // Each of the runs keeps its newest waits.
    let waiting = waiters.len() * WAITS_PER_RUN;
    wave(&broker, &lines, waiting);
    lead.ok("inbox", json!({}));
    let before = broker.rss_kib();
    let threads_before = broker.threads();
    for _ in 0..WAVES {
        wave(&broker, &lines, waiting);
    }
    let dropped = WAVES * WAVE;
    assert_eq!(dropped, 10_000);

    // Still serving: a normal verb, and a fresh wait that wakes on a message.
    assert_eq!(lead.ok("inbox", json!({})), json!([]));
    broker.wait_quiet();
    let idle = broker.fd_count();
    let mut fresh = UnixStream::connect(&broker.socket).expect("connect");
    fresh
        .write_all(&wait_line(&qa, qa_since))
        .expect("write the fresh wait");
    wait_for("the broker holds the fresh wait", || {
        broker.fd_count() > idle
    });
    broker.wait_quiet();
    assert!(!has_answer(&fresh), "the fresh wait was answered at once");
    let id = lead.send("qa", "after 10 000 dropped waits", json!({}));
    fresh.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut answer = String::new();
    BufReader::new(&fresh)
        .read_line(&mut answer)
        .expect("the fresh wait's answer");
    let answer: Value = serde_json::from_str(&answer).expect("a JSON answer");
    let seq = answer["result"]["changes"][0]["seq"].clone();
    assert!(
        seq.as_u64().is_some_and(|s| s > qa_since),
        "a change after the cursor: {answer}"
    );
    assert_eq!(
        answer,
        json!({"ok": true, "result": {
            "cursor": seq,
            "changes": [{"seq": seq, "kind": "message.sent", "message": id}],
        }}),
    );

    let after = broker.rss_kib();
    let threads_after = broker.threads();
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{}",
        json!({
            "test": "changes_soak",
            "dropped_waits": dropped,
            "waves": WAVES,
            "wave": WAVE,
            "rss_before_kib": before,
            "rss_after_kib": after,
            "threads_before": threads_before,
            "threads_after": threads_after,
            "seconds": (seconds * 10.0).round() / 10.0,
        })
    );
    assert!(
        after < before + 16 * 1024,
        "memory grew from {before} KiB to {after} KiB over {dropped} dropped waits"
    );
    broker.close();
}
