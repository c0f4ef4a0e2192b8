//! `mosaic-bus mcp` as a child process, driven over its stdin/stdout by a
//! real MCP client (rmcp's, over the child's pipes): against the real broker
//! (and the one connection a session keeps to it), against a fake broker
//! that vanishes mid-call, against one that closes kept connections, and
//! against a listener that counts connections.
//!
//! Nothing sleeps: every wait is for an MCP answer (bounded by
//! [`support::WAIT`], so a hung adapter fails the test) or for a fake
//! broker's thread.

#[path = "support/mod.rs"]
mod support;

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use support::pane::{boot_shop, Events, Ui};
use support::{acme, acme_launches, config, data_root, decision, message, raise_args, Broker};
use support::{BIN, WAIT};

/// An MCP client session with one `mosaic-bus mcp` child.
type Session = RunningService<RoleClient, ()>;

/// The guidance every `outcome-unknown` of a write carries.
const UNKNOWN: &str =
    "The action may have happened; inspect the trail before doing anything; do not retry blindly.";

/// Every tool, by name; the human's verbs are not among them.
const TOOLS: [&str; 17] = [
    "agents",
    "browser_request",
    "changes",
    "decision_raise",
    "decision_resolve",
    "decision_seen",
    "decision_withdraw",
    "event_emit",
    "inbox",
    "message_read",
    "message_receive",
    "message_send",
    "role_claim",
    "role_release",
    "role_revoke",
    "tasks",
    "trail",
];

/// `what`, or a failed test after [`WAIT`].
async fn bounded<T>(what: &str, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, work)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {WAIT:?}"))
}

/// Writes `cap` to a new private (0600) file in `dir`.
fn cap_file(dir: &Path, name: &str, cap: &str) -> PathBuf {
    let path = dir.join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("a capability file");
    writeln!(file, "{cap}").expect("write the capability");
    path
}

/// `mosaic-bus mcp --socket S --cap-file F`.
fn mcp_with_cap_file(socket: &Path, cap: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(BIN);
    command
        .arg("mcp")
        .arg("--socket")
        .arg(socket)
        .arg("--cap-file")
        .arg(cap)
        .env_remove("MOSAIC_BUS_CAP_FD")
        .env_remove("MOSAIC_BUS_SOCKET");
    command
}

/// `mosaic-bus mcp` as a harness starts it: the socket from
/// `MOSAIC_BUS_SOCKET` and the capability on the inherited descriptor 3
/// named by `MOSAIC_BUS_CAP_FD` (a shell opens it, then becomes the adapter).
fn mcp_with_cap_fd(socket: &Path, cap: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(r#"exec "$0" mcp 3<"$1""#)
        .arg(BIN)
        .arg(cap)
        .env("MOSAIC_BUS_SOCKET", socket)
        .env("MOSAIC_BUS_CAP_FD", "3");
    command
}

/// Starts the adapter and completes the MCP handshake.
async fn start(command: tokio::process::Command) -> Session {
    start_with_pid(command).await.0
}

/// As [`start`], also returning the adapter's pid.
///
/// The child is not killed when its session ends: closing the session
/// closes its stdin, and the adapter ends on its own, as under a harness
/// (tokio reaps it).
async fn start_with_pid(mut command: tokio::process::Command) -> (Session, u32) {
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mosaic-bus mcp");
    let pid = child.id().expect("the adapter's pid");
    let pipes = (
        child.stdout.take().expect("the adapter's stdout"),
        child.stdin.take().expect("the adapter's stdin"),
    );
    let session = bounded("initialize", ().serve(pipes))
        .await
        .expect("the MCP handshake");
    (session, pid)
}

/// The sockets process `pid` holds open: the inodes of its descriptors
/// that are sockets (`socket:[N]` in `/proc/<pid>/fd`).
fn sockets_of(pid: u32) -> Vec<String> {
    let mut sockets: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the adapter's descriptors")
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?.to_owned();
            target.starts_with("socket:").then_some(target)
        })
        .collect();
    sockets.sort();
    sockets
}

/// One `tools/call`.
async fn call(session: &Session, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    bounded(tool, session.call_tool(params))
        .await
        .unwrap_or_else(|e| panic!("{tool}: not a tool result: {e}"))
}

/// The one text block of a result.
#[track_caller]
fn text_of(result: &CallToolResult) -> &str {
    match result.content.as_slice() {
        [block] => &block.as_text().expect("a text block").text,
        other => panic!("one content block expected: {other:?}"),
    }
}

/// A call that must succeed; its JSON result.
async fn ok(session: &Session, tool: &str, args: Value) -> Value {
    let result = call(session, tool, args.clone()).await;
    assert_eq!(result.is_error, Some(false), "{tool} {args}: {result:?}");
    serde_json::from_str(text_of(&result)).expect("the result is JSON")
}

/// A call that must be a tool error starting with `code`; its text.
async fn refused(session: &Session, tool: &str, args: Value, code: &str) -> String {
    let result = call(session, tool, args.clone()).await;
    assert_eq!(result.is_error, Some(true), "{tool} {args}: {result:?}");
    let text = text_of(&result).to_owned();
    assert!(
        text.starts_with(&format!("{code}: ")),
        "{tool} {args}: expected {code}, got {text:?}"
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_work_through_mcp_tools_against_the_real_broker() {
    let root = data_root();
    let broker = Broker::boot(
        root.path(),
        &config(root.path(), &[acme()], &acme_launches(), &[]),
    );
    let caps = tempfile::tempdir().expect("a private folder");
    let dev_cap = cap_file(caps.path(), "dev.cap", &broker.cap("dev-1"));
    let lead_cap = cap_file(caps.path(), "lead.cap", &broker.cap("lead-1"));
    let dev = start(mcp_with_cap_fd(&broker.socket, &dev_cap)).await;
    let lead = start(mcp_with_cap_file(&broker.socket, &lead_cap)).await;

    // The tools: one per agent verb, no dots, every schema closed.
    let tools = bounded("tools/list", dev.list_all_tools())
        .await
        .expect("the tool list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    for tool in &tools {
        assert_eq!(
            tool.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}",
            tool.name
        );
    }
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).expect("listed");
        Value::Object((*tool.input_schema).clone())
    };
    let raise = schema("decision_raise");
    assert_eq!(
        raise["properties"]["task_ref"]["pattern"],
        "^vikunja:[1-9][0-9]*/[1-9][0-9]*$"
    );
    assert_eq!(
        schema("message_send")["properties"]["class"]["enum"],
        json!([
            "REQUEST",
            "ASSIGNMENT",
            "REVIEW-REQUEST",
            "REVIEW-RESULT",
            "RESULT",
            "INFO",
            "DECISION",
            "REACTION"
        ])
    );

    // Claims.
    assert_eq!(
        ok(&dev, "role_claim", json!({})).await,
        json!({"status": "claimed"})
    );
    assert_eq!(
        ok(&lead, "role_claim", json!({})).await,
        json!({"status": "claimed"})
    );

    // A message, sent within lead's authority, received and read by dev.
    let sent = ok(
        &lead,
        "message_send",
        json!({"to": "dev", "body": "hello dev", "class": "INFO"}),
    )
    .await;
    assert_eq!(sent["request"], Value::Null, "{sent}");
    let id = &sent["id"];
    assert_eq!(
        ok(&dev, "message_receive", json!({})).await,
        json!([message(
            id,
            ("lead", "lead-1"),
            "dev",
            "hello dev",
            json!({"class": "INFO"})
        )])
    );
    assert_eq!(ok(&dev, "message_read", json!({"id": id})).await, json!({}));

    // A cross-role decision (dev may message lead only with an approval),
    // routed to lead, resolved, and spent once.
    let raised = ok(
        &dev,
        "decision_raise",
        raise_args("message.send", Some("lead"), json!({})),
    )
    .await;
    let decision_id = raised["id"].clone();
    assert_eq!(
        raised,
        decision(
            &decision_id,
            "message.send",
            Some("lead"),
            json!({"class": "cross-role", "route": "lead",
                   "raisedBy": {"role": "dev", "run": "dev-1"}})
        )
    );
    let inbox = ok(&lead, "inbox", json!({})).await;
    assert!(
        inbox
            .as_array()
            .expect("an array")
            .iter()
            .any(|item| item["id"] == decision_id && item["type"] == "decision"),
        "{inbox}"
    );
    let resolved = ok(
        &lead,
        "decision_resolve",
        json!({"id": decision_id, "choice": "yes"}),
    )
    .await;
    assert_eq!(resolved["status"], "resolved", "{resolved}");

    // Refusals are tool errors carrying the static code and what to do.
    let text = refused(
        &dev,
        "message_send",
        json!({"to": "lead", "body": "merged?"}),
        "not-authorized",
    )
    .await;
    assert!(text.contains("decision_raise"), "{text}");
    let send = json!({"to": "lead", "body": "merged", "decision": decision_id});
    assert_eq!(
        ok(&dev, "message_send", send.clone()).await["request"],
        Value::Null
    );
    refused(&dev, "message_send", send, "decision-consumed").await;
    let text = refused(
        &dev,
        "decision_raise",
        raise_args(
            "repo.merge",
            Some("main"),
            json!({"blocking": true, "task_ref": "vikunja:03/17"}),
        ),
        "bad-task-ref",
    )
    .await;
    assert!(text.contains("vikunja:<project>/<task>"), "{text}");
    refused(&dev, "launch_revoke", json!({}), "unknown-verb").await;

    // The broker is gone (killed, its socket left behind): nothing can be
    // sent, and the adapter keeps serving.
    drop(broker);
    refused(&dev, "role_release", json!({}), "broker-unavailable").await;
    assert_eq!(
        bounded("tools/list", dev.list_all_tools())
            .await
            .expect("the tool list")
            .len(),
        TOOLS.len()
    );

    bounded("close", dev.cancel()).await.expect("close dev");
    bounded("close", lead.cancel()).await.expect("close lead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mcp_session_keeps_one_connection_to_the_broker() {
    let root = data_root();
    let broker = Broker::boot(
        root.path(),
        &config(root.path(), &[acme()], &acme_launches(), &[]),
    );
    let caps = tempfile::tempdir().expect("a private folder");
    let lead_cap = cap_file(caps.path(), "lead.cap", &broker.cap("lead-1"));
    let (lead, pid) = start_with_pid(mcp_with_cap_file(&broker.socket, &lead_cap)).await;
    // Its stdin and stdout may be sockets too (a socket pair): those it has
    // before any call.
    let stdio = sockets_of(pid);
    let connections = || -> Vec<String> {
        sockets_of(pid)
            .into_iter()
            .filter(|s| !stdio.contains(s))
            .collect()
    };
    assert_eq!(
        connections(),
        Vec::<String>::new(),
        "connected before a call"
    );
    assert_eq!(
        ok(&lead, "role_claim", json!({})).await,
        json!({"status": "claimed"})
    );
    let first = connections();
    assert_eq!(first.len(), 1, "{first:?}");
    // Reads, writes and a refusal, one after another: all over the same
    // connection, which stays open between them.
    let sent = ok(
        &lead,
        "message_send",
        json!({"to": "qa", "body": "over one connection"}),
    )
    .await;
    assert_eq!(sent["request"], Value::Null, "{sent}");
    assert_eq!(connections(), first);
    ok(&lead, "agents", json!({})).await;
    assert_eq!(connections(), first);
    refused(
        &lead,
        "message_send",
        json!({"to": "ghost", "body": "?"}),
        "unknown-role",
    )
    .await;
    assert_eq!(connections(), first);
    ok(&lead, "inbox", json!({})).await;
    ok(&lead, "changes", json!({})).await;
    assert_eq!(connections(), first);
    bounded("close", lead.cancel()).await.expect("close lead");
    broker.close();
}

/// What [`closing_broker`] does with its next request line.
enum Act {
    /// Answers it.
    Answer(&'static str),
    /// Closes the connection without an answer.
    Vanish,
}

/// A fake broker on `socket` that serves one connection after another,
/// each with its list of acts, and closes a connection once its acts are
/// done (sending its index on `closed`); returns every request line it
/// read with the index of its connection.
fn closing_broker(
    socket: &Path,
    connections: Vec<Vec<Act>>,
    closed: std::sync::mpsc::Sender<usize>,
) -> std::thread::JoinHandle<Vec<(usize, Value)>> {
    let listener = UnixListener::bind(socket).expect("bind the fake broker");
    std::thread::spawn(move || {
        let mut requests = Vec::new();
        for (n, acts) in connections.into_iter().enumerate() {
            let (connection, _) = listener.accept().expect("a connection");
            connection.set_read_timeout(Some(WAIT)).expect("timeout");
            let mut reader = BufReader::new(&connection);
            for act in acts {
                let mut line = String::new();
                reader.read_line(&mut line).expect("a request line");
                requests.push((n, serde_json::from_str(&line).expect("a JSON request")));
                match act {
                    Act::Answer(answer) => (&connection)
                        .write_all(format!("{answer}\n").as_bytes())
                        .expect("answer"),
                    Act::Vanish => break,
                }
            }
            drop(reader);
            drop(connection);
            let _ = closed.send(n);
        }
        requests
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_is_replaced_but_a_write_sent_whole_is_never_resent() {
    let dir = data_root();
    let socket = dir.path().join("bus.sock");
    let cap = "ef".repeat(32);
    let (closing, closed) = std::sync::mpsc::channel();
    let claimed = r#"{"ok":true,"result":{"status":"claimed"}}"#;
    let fake = closing_broker(
        &socket,
        vec![
            vec![
                Act::Answer(claimed),
                Act::Answer(r#"{"ok":true,"result":[]}"#),
            ],
            vec![Act::Answer(r#"{"ok":true,"result":[]}"#), Act::Vanish],
            vec![Act::Answer(claimed)],
        ],
        closing,
    );
    let adapter = start(mcp_with_cap_file(
        &socket,
        &cap_file(dir.path(), "agent.cap", &cap),
    ))
    .await;
    assert_eq!(
        ok(&adapter, "role_claim", json!({})).await,
        json!({"status": "claimed"})
    );
    assert_eq!(ok(&adapter, "inbox", json!({})).await, json!([]));
    // The broker closes the session's connection, as it does an idle one:
    // the next call goes over a new one, and nobody sees the difference.
    assert_eq!(closed.recv_timeout(WAIT), Ok(0));
    assert_eq!(ok(&adapter, "agents", json!({})).await, json!([]));
    // A write whose connection breaks once it was sent: outcome-unknown,
    // with what to inspect, and never sent again.
    let id = "0b7f8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
    let text = refused(
        &adapter,
        "decision_resolve",
        json!({"id": id, "choice": "yes"}),
        "outcome-unknown",
    )
    .await;
    assert!(text.contains(UNKNOWN), "{text}");
    assert_eq!(closed.recv_timeout(WAIT), Ok(1));
    assert_eq!(
        ok(&adapter, "role_claim", json!({})).await,
        json!({"status": "claimed"})
    );
    let request = |verb: &str, args: Value| json!({"cap": cap, "verb": verb, "args": args});
    assert_eq!(
        fake.join().expect("the fake broker"),
        [
            (0, request("role.claim", json!({}))),
            (0, request("inbox", json!({}))),
            (1, request("agents", json!({}))),
            (
                1,
                request("decision.resolve", json!({"id": id, "choice": "yes"}))
            ),
            (2, request("role.claim", json!({}))),
        ]
    );
    bounded("close", adapter.cancel()).await.expect("close");
}

/// A fake broker on `socket`: the first connection's request line is read
/// and the connection dropped unanswered, exactly what a broker killed
/// mid-call looks like to a client; the second is answered `answer`.
/// Returns both request lines.
fn vanishing_broker(socket: &Path, answer: &'static str) -> std::thread::JoinHandle<[Value; 2]> {
    let listener = UnixListener::bind(socket).expect("bind the fake broker");
    std::thread::spawn(move || {
        let request = |reply: Option<&str>| {
            let (connection, _) = listener.accept().expect("a connection");
            let mut line = String::new();
            let mut reader = BufReader::new(&connection);
            reader.read_line(&mut line).expect("a request line");
            if let Some(reply) = reply {
                (&connection)
                    .write_all(format!("{reply}\n").as_bytes())
                    .expect("answer");
            }
            serde_json::from_str::<Value>(&line).expect("a JSON request")
        };
        [request(None), request(Some(answer))]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_dying_mid_call_gives_outcome_unknown_guidance() {
    let dir = data_root();
    let socket = dir.path().join("bus.sock");
    let cap = "ab".repeat(32);
    let fake = vanishing_broker(&socket, r#"{"ok":true,"result":{"status":"claimed"}}"#);
    let adapter = start(mcp_with_cap_file(
        &socket,
        &cap_file(dir.path(), "agent.cap", &cap),
    ))
    .await;

    let id = "0b7f8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
    let text = refused(
        &adapter,
        "decision_resolve",
        json!({"id": id, "choice": "yes"}),
        "outcome-unknown",
    )
    .await;
    assert!(text.contains(UNKNOWN), "{text}");
    assert!(
        text.contains(&format!("Call trail with subject \"{id}\"")),
        "{text}"
    );

    // The adapter survived and serves the next call.
    assert_eq!(
        ok(&adapter, "role_claim", json!({})).await,
        json!({"status": "claimed"})
    );
    let [lost, answered] = fake.join().expect("the fake broker");
    assert_eq!(
        lost,
        json!({"cap": cap, "verb": "decision.resolve", "args": {"id": id, "choice": "yes"}})
    );
    assert_eq!(
        answered,
        json!({"cap": cap, "verb": "role.claim", "args": {}})
    );
    bounded("close", adapter.cancel()).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_argument_is_refused_before_reaching_the_broker() {
    let dir = data_root();
    let socket = dir.path().join("bus.sock");
    let listener = UnixListener::bind(&socket).expect("bind the counting listener");
    listener.set_nonblocking(true).expect("non-blocking");
    let adapter = start(mcp_with_cap_file(
        &socket,
        &cap_file(dir.path(), "agent.cap", &"cd".repeat(32)),
    ))
    .await;

    for (tool, args) in [
        ("message_receive", json!({"extra": 1})),
        (
            "message_send",
            json!({"to": "lead", "body": "hi", "priority": "high"}),
        ),
        (
            "role_revoke",
            json!({"role": "dev", "decision": "x", "reason": "y"}),
        ),
        (
            "browser_request",
            json!({"action": "back", "parameters": {}, "timeout": 5}),
        ),
    ] {
        let text = refused(&adapter, tool, args, "unknown-key").await;
        assert!(text.contains("Nothing was sent to the broker"), "{text}");
    }
    // A connection is queued by the time `connect` returns, before the
    // adapter could have answered: none was made.
    let connections = std::iter::from_fn(|| listener.accept().ok()).count();
    assert_eq!(connections, 0, "the adapter contacted the broker");

    // The same socket does reach a listener: a call without stray keys is
    // sent.
    listener.set_nonblocking(false).expect("blocking");
    let fake = std::thread::spawn(move || {
        let (connection, _) = listener.accept().expect("a connection");
        let mut line = String::new();
        BufReader::new(&connection)
            .read_line(&mut line)
            .expect("a request line");
        (&connection)
            .write_all(b"{\"ok\":true,\"result\":[]}\n")
            .expect("answer");
        serde_json::from_str::<Value>(&line).expect("a JSON request")
    });
    assert_eq!(ok(&adapter, "message_receive", json!({})).await, json!([]));
    assert_eq!(
        fake.join().expect("the listener")["verb"],
        "message.receive"
    );
    bounded("close", adapter.cancel()).await.expect("close");
}

/// Serves the next request on `events` as pane `pane-1` does: claims it and
/// posts `answer` (`{ok, data}` or `{ok, error}`); returns the request event.
fn serve_one(ui: &Ui, events: &mut Events, mut answer: Value) -> Value {
    let request = events.next_request();
    let id = request["properties"]["requestId"].clone();
    let granted = ui.post(
        "/api/browser-control/claim",
        &json!({"requestId": id, "clientId": "pane-1"}),
    );
    assert_eq!(granted["granted"], json!(true), "{granted}");
    answer["requestId"] = id;
    answer["claimToken"] = granted["claimToken"].clone();
    assert_eq!(
        ui.post("/api/browser-control/result", &answer),
        json!({"matched": true})
    );
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_request_reaches_a_live_pane_and_its_result_or_refusal_comes_back() {
    let root = data_root();
    let broker = boot_shop(root.path(), &["browser.snapshot"]);
    let caps = tempfile::tempdir().expect("a private folder");
    let cap = cap_file(caps.path(), "web.cap", &broker.cap("web-1"));
    let web = start(mcp_with_cap_file(&broker.socket, &cap)).await;
    let snapshot = json!({"action": "snapshot", "parameters": {}, "timeoutMs": 10_000});

    // Nobody connected: refused at once, with the broker's own sentence.
    let text = refused(
        &web,
        "browser_request",
        snapshot.clone(),
        "no-browser-client",
    )
    .await;
    assert!(
        text.contains("0 client(s) are connected, 0 of them browser-capable"),
        "the environment reaches the agent: {text}"
    );

    // A pane connects (the stream is registered before the request), and
    // answers twice: a result, then a failure.
    let ui = Ui::of(&broker);
    let (listening, registered) = tokio::sync::oneshot::channel();
    let pane = tokio::task::spawn_blocking(move || {
        let mut events = ui.listen("pane-1", true);
        let _ = listening.send(());
        let done = json!({"ok": true, "data": {"title": "Shop", "text": "one \"quoted\" line"}});
        let first = serve_one(&ui, &mut events, done);
        let second = serve_one(
            &ui,
            &mut events,
            json!({"ok": false, "error": "no such element"}),
        );
        [first, second]
    });
    bounded("the pane registers", registered)
        .await
        .expect("the pane thread");
    assert_eq!(
        ok(&web, "browser_request", snapshot.clone()).await,
        json!({"title": "Shop", "text": "one \"quoted\" line"})
    );
    refused(&web, "browser_request", snapshot, "browser-failed").await;
    let [first, second] = bounded("the pane", pane).await.expect("the pane thread");
    for request in [&first, &second] {
        assert_eq!(request["type"], json!("browser-control-request"));
        assert_eq!(request["properties"]["action"], json!("snapshot"));
    }
    assert_ne!(
        first["properties"]["requestId"],
        second["properties"]["requestId"]
    );
    // Each outcome is evidence, filed under the role: never the payload.
    let trail = broker.agent("web-1").trail("web");
    let outcomes: Vec<&Value> = trail
        .iter()
        .filter(|r| r["event"] == "browser.completed")
        .collect();
    assert_eq!(outcomes.len(), 3, "{trail:?}");
    assert!(
        !serde_json::to_string(&trail).unwrap().contains("quoted"),
        "no payload in the trail"
    );
}
