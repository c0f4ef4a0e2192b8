//! The human cannot be locked out: black-box floods against the real
//! broker over real sockets, each scaled to run in seconds, while the
//! human CLI and an agent (`mosaic-bus call`, a process of its own) are
//! timed. Every flood loop is bounded in count and in time; nothing
//! sleeps in place of waiting for an event.
//!
//! The human CLI runs detached (`support::detached`), so it passes the
//! proof wherever the test runs: its answer is `ok`, never
//! `broker-unavailable` or `outcome-unknown`, and it comes within
//! [`ANSWER_WITHIN`] of its request. The agent is `mosaic-bus mcp`, a
//! process of its own. Both are timed from their request, once their
//! process has started: a loaded machine took up to 3.1 s to start the
//! human CLI's processes, which the broker does not promise.
//!
//! After a flood the broker holds no more threads and open files than
//! before it, and its peak memory does not grow over three floods in a row.

#[path = "siege/flood.rs"]
mod flood;
#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use flood::*;
use mosaic_app::runtime::DEFAULT_CONNECTIONS;
use support::pane::Ui;
use support::{acme, acme_launches, config, data_root, open_db, Broker, BIN, WAIT};

#[test]
fn the_human_and_an_agent_are_answered_within_a_second_under_4200_junk_socket_connections() {
    let q = quiet_broker();

    q.without_growth("junk socket flood", || {
        let flood = Flood::start(junk_socket_flood(q.broker.socket.clone()));
        q.both_answered("junk socket flood");
        let opened = flood.stop();
        assert!(opened >= JUNK_CONNECTIONS, "{opened} junk connections");
        q.back_to_baseline(Instant::now(), "junk socket flood");
    });
    q.broker.close();
}

/// A junk connection that sent `x` is answered `bad-request` and closed at
/// once, and a silent one is answered `request-timeout` within about a
/// second, far before the 5 s idle limit.
#[test]
fn a_connection_that_has_not_authenticated_is_answered_and_closed_quickly() {
    let root = data_root();
    let broker = Broker::boot(
        root.path(),
        &config(root.path(), &[acme()], &acme_launches(), &["acme"]),
    );
    let read_to_end = |stream: &mut UnixStream| {
        stream.set_read_timeout(Some(WAIT)).expect("timeout");
        let started = Instant::now();
        let mut all = Vec::new();
        stream.read_to_end(&mut all).expect("the end of the stream");
        (String::from_utf8(all).expect("UTF-8"), started.elapsed())
    };

    let mut junk = UnixStream::connect(&broker.socket).expect("connect");
    junk.write_all(b"x\n").expect("write");
    let (said, took) = read_to_end(&mut junk);
    assert_eq!(said, "{\"ok\":false,\"error\":\"bad-request\"}\n");
    assert!(took < ANSWER_WITHIN, "closed after {took:?}");

    let mut forged = UnixStream::connect(&broker.socket).expect("connect");
    let line = format!(
        "{}\n",
        json!({"cap": "0".repeat(64), "verb": "inbox", "args": {}})
    );
    forged.write_all(line.as_bytes()).expect("write");
    let (said, took) = read_to_end(&mut forged);
    assert_eq!(said, "{\"ok\":false,\"error\":\"bad-capability\"}\n");
    assert!(took < ANSWER_WITHIN, "closed after {took:?}");

    let mut silent = UnixStream::connect(&broker.socket).expect("connect");
    let (said, took) = read_to_end(&mut silent);
    assert_eq!(said, "{\"ok\":false,\"error\":\"request-timeout\"}\n");
    assert!(
        took < Duration::from_secs(2),
        "a silent connection was answered after {took:?}"
    );

    // An agent's connection stays open after a refused line: it is
    // authenticated by its first.
    let agent = broker.agent("dev-1");
    let mut open = UnixStream::connect(&broker.socket).expect("connect");
    let claim = json!({"cap": agent.cap, "verb": "role.claim", "args": {}});
    open.write_all(format!("{claim}\nx\n{claim}\n").as_bytes())
        .expect("write");
    open.shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let (said, _) = read_to_end(&mut open);
    assert_eq!(
        said,
        "{\"ok\":true,\"result\":{\"status\":\"claimed\"}}\n\
         {\"ok\":false,\"error\":\"bad-request\"}\n\
         {\"ok\":true,\"result\":{\"status\":\"held\"}}\n"
    );
    broker.close();
}

/// Partial HTTP requests (`GET / HTTP/1.1` and no more), [`PARTIAL_REQUESTS`]
/// held open at once, each one the broker answers or closes replaced at
/// once. Says "in full swing" once that many were opened and the broker
/// has turned one away (503 `broker-unavailable`). Runs until stopped, or
/// [`FLOOD_LIMIT`].
fn partial_http_flood(address: String) -> impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> usize {
    move |stop, full| {
        let started = Instant::now();
        let mut opened = 0usize;
        let open = |opened: &mut usize| loop {
            assert!(
                started.elapsed() < FLOOD_LIMIT,
                "the HTTP flood ran out of time"
            );
            if let Ok(mut stream) = TcpStream::connect(&address) {
                let _ = stream.write_all(b"GET / HTTP/1.1\r\n");
                let _ = stream.set_nonblocking(true);
                *opened += 1;
                return stream;
            }
        };
        let mut held: Vec<TcpStream> = (0..PARTIAL_REQUESTS).map(|_| open(&mut opened)).collect();
        let mut said = false;
        while !stop.load(Ordering::SeqCst) && started.elapsed() < FLOOD_LIMIT {
            for stream in &mut held {
                let mut answer = [0u8; 256];
                let busy = match (&*stream).read(&mut answer) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Ok(read) => {
                        let text = String::from_utf8_lossy(&answer[..read]);
                        text.starts_with("HTTP/1.1 503 ") && text.contains("broker-unavailable")
                    }
                    Err(_) => false,
                };
                if busy && !said {
                    said = true;
                    let _ = full.send(());
                }
                *stream = open(&mut opened);
            }
        }
        opened
    }
}

#[test]
fn the_human_and_an_agent_are_answered_within_a_second_under_5000_partial_http_requests() {
    let q = quiet_broker();
    let quiet_files = q.baseline.files;

    let ui = Ui::of(&q.broker);
    q.without_growth("partial HTTP flood", || {
        let flood = Flood::start(partial_http_flood(ui.address.clone()));
        q.both_answered("partial HTTP flood");
        // The port holds what its cap allows, not what the flood opened.
        let files = q.broker.fd_count();
        let opened = flood.stop();
        eprintln!(
            "partial HTTP flood: {opened} opened, the broker held {files} files (quiet: {quiet_files})"
        );
        assert!(opened >= PARTIAL_REQUESTS, "{opened} partial requests");
        assert!(
            files <= quiet_files + HTTP_CONNECTIONS + 16,
            "the broker held {files} files under the flood, {quiet_files} before"
        );
        q.back_to_baseline(Instant::now(), "partial HTTP flood");
    });
    q.broker.close();
}

/// A connection that sends only the start of a header is closed once the
/// header deadline (5 s) has passed, not held for ever.
#[test]
fn a_partial_http_header_is_closed_at_the_header_deadline() {
    let root = data_root();
    let scratch = tempfile::tempdir().expect("scratch");
    let (broker, _cap) = broker_with_agent(root.path(), scratch.path());
    let ui = Ui::of(&broker);
    let started = Instant::now();
    let mut stream = TcpStream::connect(&ui.address).expect("connect");
    stream.write_all(b"GET / HTTP/1.1\r\n").expect("write");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    let mut rest = Vec::new();
    let ended = match stream.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    let took = started.elapsed();
    assert!(ended, "the connection was still open after {took:?}");
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(10),
        "closed after {took:?}"
    );
    broker.close();
}

/// Event streams have their own cap: with that many open, one more is
/// refused 503 `broker-unavailable`.
#[test]
fn event_streams_beyond_their_cap_are_refused() {
    let root = data_root();
    let scratch = tempfile::tempdir().expect("scratch");
    let (broker, _cap) = broker_with_agent(root.path(), scratch.path());
    let ui = Ui::of(&broker);
    let streams: Vec<_> = (0..EVENT_STREAMS)
        .map(|i| ui.listen(&format!("pane-{i}"), true))
        .collect();
    // One more, read as far as its head and body (a stream that was let in
    // would never end, so the read is bounded by its length and WAIT).
    let mut one_more = TcpStream::connect(&ui.address).expect("connect");
    write!(
        one_more,
        "GET /api/events?browser=1&clientId=one-more&token={} HTTP/1.1\r\nHost: {}\r\n\r\n",
        ui.token, ui.address
    )
    .expect("request");
    one_more.set_read_timeout(Some(WAIT)).expect("timeout");
    let mut reader = BufReader::new(one_more);
    let mut status = String::new();
    reader.read_line(&mut status).expect("a status line");
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a header line");
        if line.trim_end().is_empty() {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().expect("a length");
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).expect("the body");
    assert_eq!(
        (status.trim_end(), String::from_utf8_lossy(&body).as_ref()),
        (
            "HTTP/1.1 503 Service Unavailable",
            r#"{"error":"broker-unavailable"}"#
        )
    );
    drop(streams);
    broker.close();
}

/// How deep the chain of shells under the forged human lines is.
const CHAIN_DEPTH: usize = 100;

/// How many forged human lines the deepest shell sends, one after another.
const FORGED_LINES: usize = 10;

/// Bytes this process's files have read so far (`rchar` of
/// `/proc/<pid>/io`): every `/proc` read of a proof counts.
fn bytes_read(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .expect("the broker's /proc io")
        .lines()
        .find_map(|line| line.strip_prefix("rchar:"))
        .and_then(|value| value.trim().parse().ok())
        .expect("rchar")
}

/// Forged human lines from under a chain of [`CHAIN_DEPTH`] shells, each
/// with 600 KiB of environment (more than the 256 KiB a proof reads of
/// one): each is refused `human-proof-failed` having read little, the
/// human meanwhile is answered within a second, and once the broker is
/// quiet no proof is still reading.
#[test]
fn forged_human_lines_under_a_deep_chain_of_large_environments_cost_little_and_leave_no_work() {
    let q = quiet_broker();
    let before = bytes_read(q.broker.pid());

    // `$1` levels of shells, each the parent of the next (`exit $?` keeps
    // it from exec-ing its last command); the deepest sends the lines with
    // a clean environment of its own, so only its ancestors are large.
    let script = r#"
        depth=$1
        if [ "$depth" -gt 0 ]; then sh -c "$0" "$0" "$((depth - 1))" "$2" "$3" "$4"; exit $?; fi
        i=0
        while [ "$i" -lt "$4" ]; do
            echo '{"business":"acme","verb":"inbox","args":{}}' | env -i "$2" human "$3"
            i=$((i + 1))
        done
        exit 0
    "#;
    let big = "y".repeat(120 * 1024);
    let mut chain = Command::new("sh");
    chain
        .arg("-c")
        .arg(script)
        .arg(script)
        .arg(CHAIN_DEPTH.to_string())
        .arg(BIN)
        .arg(&q.broker.socket)
        .arg(FORGED_LINES.to_string())
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        );
    for i in 0..5 {
        chain.env(format!("BIG{i}"), &big);
    }
    let chain = chain
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the chain");
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(chain.wait_with_output());
    });

    q.both_answered("forged human lines");
    let output = finished
        .recv_timeout(WAIT)
        .expect("the chain finished")
        .expect("the chain's output");
    let stopped = Instant::now();
    let replies: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(
        replies,
        vec![json!({"ok": false, "error": "human-proof-failed"}); FORGED_LINES]
    );

    q.broker.wait_quiet();
    let read = bytes_read(q.broker.pid()) - before;
    eprintln!("forged human lines: the broker read {read} bytes for {FORGED_LINES} lines");
    // The peer's own small environment and one capped ancestor's, about
    // 0.3 MiB, per line; walking every ancestor would be 60 MB a line.
    let bound = u64::try_from(FORGED_LINES).expect("a count") * 1024 * 1024;
    assert!(read < bound, "the broker read {read} bytes");
    // Quiet: no proof is still reading; nothing more is read from here on.
    q.broker.wait_quiet();
    assert_eq!(
        bytes_read(q.broker.pid()) - before,
        read,
        "proof work went on"
    );
    q.back_to_baseline(stopped, "forged human lines");
    q.broker.close();
}

/// A forged human line: no capability, a nonce no process of the broker's
/// executable carries.
fn forged_human_line() -> String {
    let line = json!({
        "human": {"nonce": "0".repeat(64)},
        "business": "acme",
        "verb": "inbox",
        "args": {},
    });
    format!("{line}\n")
}

/// [`REFUSAL_LINES`] forged human lines over [`REFUSAL_CONNECTIONS`]
/// connections, each answered `human-proof-failed`: [`line_flood`].
fn refusal_flood(socket: PathBuf) -> impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> usize {
    line_flood(
        socket,
        forged_human_line(),
        r#"{"ok":false,"error":"human-proof-failed"}"#,
        REFUSAL_LINES,
    )
}

/// `total` copies of `line` over [`REFUSAL_CONNECTIONS`] connections, each
/// answer read and checked to be `expected`. Says "in full swing" once the
/// first run of lines is answered. Ends when every line is answered, when
/// stopped, or at [`REFUSAL_LIMIT`]; returns how many were answered.
fn line_flood(
    socket: PathBuf,
    line: String,
    expected: &'static str,
    total: usize,
) -> impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> usize {
    move |stop, full| {
        let started = Instant::now();
        let run = line.repeat(REFUSAL_RUN);
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..REFUSAL_CONNECTIONS)
                .map(|n| {
                    let (socket, run, full) = (&socket, &run, full.clone());
                    scope.spawn(move || {
                        let stream = UnixStream::connect(socket).expect("connect");
                        stream.set_read_timeout(Some(WAIT)).expect("timeout");
                        let mut lines = BufReader::new(stream.try_clone().expect("clone"));
                        let mut stream = stream;
                        let share = total / REFUSAL_CONNECTIONS;
                        let mut answered = 0;
                        while answered < share
                            && !stop.load(Ordering::SeqCst)
                            && started.elapsed() < REFUSAL_LIMIT
                        {
                            let now = REFUSAL_RUN.min(share - answered);
                            let bytes = &run.as_bytes()[..now * (run.len() / REFUSAL_RUN)];
                            stream.write_all(bytes).expect("write a run");
                            for _ in 0..now {
                                let mut answer = String::new();
                                lines.read_line(&mut answer).expect("an answer");
                                assert_eq!(answer.trim_end(), expected);
                            }
                            answered += now;
                            if n == 0 && answered == now {
                                let _ = full.send(());
                            }
                        }
                        answered
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("a flood connection"))
                .sum()
        })
    }
}

/// The store's size in bytes, as its pages (`page_count` times
/// `page_size`, the write-ahead log's committed pages included): what it
/// holds, however the log was checkpointed.
fn store_bytes(root: &Path) -> u64 {
    let db = open_db(root);
    let pages: i64 = db
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("page_count");
    let size: i64 = db
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page_size");
    u64::try_from(pages * size).expect("a size")
}

/// 100,000 forged human lines, with no capability, each refused
/// `human-proof-failed`: the human and an agent are answered within a
/// second meanwhile, the store grows by at most 1 MB, every one of the
/// refusals is in the evidence (`refusal_tally` counts them all, in a few
/// rows), and the broker is back at its baseline afterwards.
#[test]
fn a_flood_of_100000_refusals_of_nobody_is_counted_in_windows_and_grows_the_store_little() {
    let q = quiet_broker();
    let before = store_bytes(q.root.path());

    let started = Instant::now();
    let flood = Flood::start(refusal_flood(q.broker.socket.clone()));
    q.both_answered("refusal flood");
    let answered = flood.finish();
    let stopped = Instant::now();
    let flooded = stopped - started;
    eprintln!("refusal flood: {answered} lines answered in {flooded:?}");
    assert_eq!(answered, REFUSAL_LINES, "within {REFUSAL_LIMIT:?}");
    q.back_to_baseline(stopped, "refusal flood");
    let log = q.broker.close();

    let grown = store_bytes(q.root.path()).saturating_sub(before);
    eprintln!("refusal flood: the store grew by {grown} bytes");
    assert!(grown <= REFUSAL_GROWTH, "the store grew by {grown} bytes");
    let db = open_db(q.root.path());
    let (counted, rows): (i64, i64) = db
        .query_row(
            "SELECT sum(count), count(*) FROM refusal_tally \
             WHERE business IS NULL AND verb = 'inbox' AND code = 'human-proof-failed'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the refusal tally");
    let sent = i64::try_from(answered).expect("a count");
    assert_eq!(counted, sent, "every refusal answered is in the evidence");
    // One row and one count a window, windows of a second.
    let windows = i64::try_from(flooded.as_secs()).expect("seconds") + 2;
    assert!(rows <= 2 * windows, "{rows} rows for {sent} refusals");

    // The log is bounded the same way: per cause and window, the first
    // refused proof is logged with its reason, and one line sums up the
    // rest; together they account for every refused proof.
    let (logged, summaries) = proof_log(&log);
    let suppressed: u64 = summaries.iter().sum();
    eprintln!(
        "refusal flood: {logged} refused proofs logged, {} summaries of {suppressed} more",
        summaries.len()
    );
    let lines = logged + summaries.len();
    // The forged lines fail as `exe-mismatch`; on a loaded machine some
    // may also meet `proof-limit`, `abandoned` or `gone`.
    let causes = 4;
    assert!(
        lines <= 2 * causes * usize::try_from(windows).expect("a count"),
        "{lines} log lines for {sent} refused proofs in {flooded:?}"
    );
    assert!(
        logged as u64 + suppressed >= answered as u64,
        "{logged} logged and {suppressed} summed up of {answered} refused proofs"
    );
}

/// The broker's log lines of refused human proofs: how many were logged
/// one by one, and the count each summary line gives.
fn proof_log(log: &str) -> (usize, Vec<u64>) {
    let logged = log
        .lines()
        .filter(|line| line.contains("human proof refused"))
        .count();
    let summaries = log
        .lines()
        .filter(|line| line.contains("human proofs refused and not logged"))
        .map(|line| {
            let (_, count) = line.split_once("suppressed=").expect("a count");
            let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().expect("a count")
        })
        .collect();
    (logged, summaries)
}

/// How many refused requests the agent's flood sends.
const CALLER_REFUSALS: usize = 20_000;

/// How much the store may grow under [`CALLER_REFUSALS`] refusals of one
/// known caller.
const CALLER_GROWTH: u64 = 1024 * 1024;

/// 20,000 requests from an agent with a valid capability, each refused
/// (`head`, which is not an agent's: `not-authorized`): the human is
/// answered within a second meanwhile, the store grows by a bounded
/// amount, each window's first ten refusals are rows of their own and the
/// rest its count, and the evidence (`refusal_tally`) counts every one.
#[test]
fn a_flood_of_20000_refusals_of_a_known_caller_keeps_ten_rows_a_window_and_counts_the_rest() {
    let root = data_root();
    let scratch = tempfile::tempdir().expect("scratch");
    let (broker, cap) = broker_with_agent(root.path(), scratch.path());
    let human_expected = expected_human_inbox();
    let before = store_bytes(root.path());

    let line = format!(
        "{}\n",
        json!({"cap": broker.cap("dev-1"), "verb": "head", "args": {}})
    );
    let started = Instant::now();
    let flood = Flood::start(line_flood(
        broker.socket.clone(),
        line,
        r#"{"ok":false,"error":"not-authorized"}"#,
        CALLER_REFUSALS,
    ));
    both_answered_in_time(
        &broker.socket,
        &cap,
        &human_expected,
        "caller refusal flood",
    );
    let answered = flood.finish();
    let flooded = started.elapsed();
    eprintln!("caller refusal flood: {answered} refusals answered in {flooded:?}");
    assert_eq!(answered, CALLER_REFUSALS, "within {REFUSAL_LIMIT:?}");
    broker.close();

    let grown = store_bytes(root.path()).saturating_sub(before);
    eprintln!("caller refusal flood: the store grew by {grown} bytes");
    assert!(grown <= CALLER_GROWTH, "the store grew by {grown} bytes");
    let db = open_db(root.path());
    let tally = |table: &str| -> (i64, i64) {
        db.query_row(
            &format!(
                "SELECT coalesce(sum({}), 0), count(*) FROM {table} \
                 WHERE business = 'acme' AND run = 'dev-1' AND verb = 'head' \
                 AND code = 'not-authorized'",
                if table == "refusals" { "1" } else { "count" }
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the refusals")
    };
    let (counted, records) = tally("refusal_tally");
    let (rows, _) = tally("refusals");
    let (in_counts, counts) = tally("refusal_counts");
    let sent = i64::try_from(answered).expect("a count");
    assert_eq!(counted, sent, "every refusal answered is in the evidence");
    assert_eq!(rows + in_counts, sent);
    // Ten rows a window, and one count, in windows of a second: the first
    // window's ten rows are the flood's first ten refusals.
    let windows = i64::try_from(flooded.as_secs()).expect("seconds") + 2;
    assert!(counts <= windows, "{counts} counts in {flooded:?}");
    assert!(
        rows >= 10 && rows <= 10 * windows,
        "{rows} rows in {flooded:?}"
    );
    assert_eq!(records, rows + counts);
    let first: Vec<(String, String)> = db
        .prepare(
            "SELECT kind, since FROM refusal_tally JOIN ledger USING (seq) \
             WHERE run = 'dev-1' AND code = 'not-authorized' ORDER BY seq LIMIT 10",
        )
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("a row"))
        .collect();
    let kinds: Vec<&str> = first.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, vec!["request.refused"; 10], "the first ten are rows");
    let first_count: String = db
        .query_row(
            "SELECT since FROM refusal_counts WHERE run = 'dev-1' ORDER BY seq LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("a count");
    assert_eq!(
        first_count, first[0].1,
        "the first count is of the first rows' window"
    );
}

/// The open-file limit the descriptor test gives the broker: far below
/// what its default places need.
const FEW_FILES: u64 = 400;

/// With only [`FEW_FILES`] open files, the broker sizes its places to fit
/// (`mosaic_adapters::socket::budget`): more agent connections than fit
/// are refused `broker-unavailable`, more junk connections than fit are
/// turned away, its open files stay below the limit, and the human and an
/// agent are still answered within a second.
#[test]
fn with_few_open_files_the_places_fit_and_the_human_is_answered() {
    let root = data_root();
    let scratch = tempfile::tempdir().expect("scratch");
    let config = config(root.path(), &[acme()], &acme_launches(), &["acme"]);
    let broker = Broker::boot_with_open_files(root.path(), &config, FEW_FILES);
    broker.agent("dev-1").claim();
    let cap = cap_file(scratch.path(), &broker.cap("dev-1"));
    let human_expected = expected_human_inbox();
    both_answered_in_time(&broker.socket, &cap, &human_expected, "quiet, few files");

    // Reader connections (a reader is no run: only the broker's places
    // count them), each authenticated by an `inbox` and then held, more
    // than the limit allows: the last are refused, none breaks.
    let limits = mosaic_adapters::socket::budget(Some(FEW_FILES), 0);
    let line = format!(
        "{}\n",
        json!({"cap": broker.reader(0).cap, "verb": "inbox", "args": {}})
    );
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..usize::try_from(FEW_FILES).expect("a count") {
        let stream = UnixStream::connect(&broker.socket).expect("connect");
        (&stream).write_all(line.as_bytes()).expect("write");
        stream.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut answer = String::new();
        BufReader::new(&stream)
            .read_line(&mut answer)
            .expect("an answer");
        if answer.trim_end() == r#"{"ok":false,"error":"broker-unavailable"}"# {
            refused += 1;
        } else {
            assert!(answer.starts_with(r#"{"ok":true,"#), "{answer}");
            held.push(stream);
        }
    }
    eprintln!(
        "few files: {} reader connections held, {refused} refused; places {} + {}",
        held.len(),
        limits.max_connections,
        limits.max_unauthenticated
    );
    assert_eq!(held.len(), limits.max_connections, "{refused} refused");
    // Every place is taken: the human is served from its reserve.
    for round in 0..3 {
        let (human, took) = human_inbox(&broker.socket);
        assert_eq!(human, human_expected, "round {round}");
        assert!(took < ANSWER_WITHIN, "the human took {took:?}");
    }
    let files = broker.fd_count();
    assert!(
        (files as u64) < FEW_FILES,
        "{files} files open of {FEW_FILES}"
    );
    drop(held);

    // Junk connections, more than fit in the files: turned away as busy.
    let flood = Flood::start(junk_socket_flood(broker.socket.clone()));
    let files = broker.fd_count();
    both_answered_in_time(&broker.socket, &cap, &human_expected, "junk, few files");
    flood.stop();
    assert!(
        (files as u64) < FEW_FILES,
        "{files} files open of {FEW_FILES}"
    );
    broker.close();
}

/// How many connections the flooding agent opens: every authenticated
/// place of a broker with the default limits, as the probe of the issue
/// held them.
const AGENT_FLOOD: usize = 4096;

/// Raises this process's open-file limit to hold `files` at once.
fn allow_open_files(files: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|soft| soft < files) {
        limit.current = Some(files.min(limit.maximum.unwrap_or(files)));
        setrlimit(Resource::Nofile, limit).expect("raise the open-file limit");
    }
    let soft = getrlimit(Resource::Nofile).current;
    assert!(
        soft.is_none_or(|soft| soft >= files),
        "this test needs {files} open files; the hard limit allows {soft:?}"
    );
}

/// One agent (`dev-1`) opens 4,096 connections at once, each
/// authenticated by an `inbox`, and holds them: its run gets at most its
/// cap of places (64), the rest are refused `broker-unavailable`, and the
/// broker holds no more of its connections than that. Meanwhile another
/// agent gets 10 calls of 10 through, and the reader 5 of 5.
#[test]
fn an_agent_holding_4096_connections_gets_its_cap_and_the_others_their_calls() {
    allow_open_files(AGENT_FLOOD as u64 + 256);
    let root = data_root();
    let config = config(root.path(), &[acme()], &acme_launches(), &["acme"]);
    let broker = Broker::boot(root.path(), &config);
    let (dev, lead, reader) = (
        broker.agent("dev-1"),
        broker.agent("lead-1"),
        broker.reader(0),
    );
    dev.claim();
    lead.claim();
    broker.wait_quiet();
    let idle = broker.fd_count();

    let line = format!("{}\n", json!({"cap": dev.cap, "verb": "inbox", "args": {}}));
    let flood: Vec<UnixStream> = (0..AGENT_FLOOD)
        .map(|_| {
            let stream = UnixStream::connect(&broker.socket).expect("connect");
            // The answer comes later: every line is written before any is read.
            (&stream).write_all(line.as_bytes()).expect("write");
            stream
        })
        .collect();
    let mut served = 0;
    let mut busy = 0;
    for stream in &flood {
        stream.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut answer = String::new();
        BufReader::new(stream)
            .read_line(&mut answer)
            .expect("an answer");
        match answer.trim_end() {
            r#"{"ok":true,"result":[]}"# => served += 1,
            r#"{"ok":false,"error":"broker-unavailable"}"# => busy += 1,
            other => panic!("an answer of the flood: {other}"),
        }
    }
    eprintln!("the flooding agent: {served} served, {busy} refused busy");
    assert_eq!(served + busy, AGENT_FLOOD);
    assert!(
        (1..=DEFAULT_CONNECTIONS).contains(&served),
        "{served} served at once"
    );

    // While the flood holds what it got: the others are served.
    for call in 0..10 {
        assert_eq!(lead.call("inbox", json!({})), Ok(json!([])), "call {call}");
    }
    for call in 0..5 {
        let inbox = reader.call("inbox", json!({}));
        assert!(inbox.is_ok(), "call {call}: {inbox:?}");
    }
    // The broker holds at most the run's cap of the flood's connections.
    broker.wait_quiet();
    let held = broker.fd_count().saturating_sub(idle);
    assert!(
        held <= DEFAULT_CONNECTIONS,
        "the broker holds {held} more files than before the flood"
    );
    drop(flood);
    broker.close();
}
