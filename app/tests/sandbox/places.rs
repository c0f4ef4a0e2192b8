//! One budget of places: `up` runs with a low open-file limit, and an
//! agent with `"network": "proxy"` opens connections through the proxy
//! without end and holds them. Each takes places of its run's budget
//! (`"connections"`) and of the broker's, so it is refused once its own
//! are spent, while another agent's calls get through and the human's
//! answer comes within a generous bound.

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::probe::Layout;
use crate::BIN;

/// `up`'s open-file limit in this test.
const FILES: u32 = 256;

/// The most connections the probe tries.
const TRIES: usize = 200;

/// How long the human's answer may take: generous, far beyond a normal
/// answer, far below a starved one.
const HUMAN_BOUND: Duration = Duration::from_secs(10);

/// Opens connections to the proxy's bridge with a `CONNECT` to the target
/// in its first argument until one is refused (or `TRIES`), holding every
/// one; writes the count of established ones and the last status to the
/// fifo in its second, then waits until killed.
const HOLD_PY: &str = r#"
import signal, socket, sys
held, last = [], "none"
for _ in range(int(sys.argv[3])):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[1], sys.argv[1])).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    last = head.split(b"\r\n")[0].decode(errors="replace")
    if " 200 " not in last:
        break
    held.append(s)
with open(sys.argv[2], "w") as f:
    f.write("%d %s\n" % (len(held), last.replace(" ", "_")))
signal.pause()
"#;

#[test]
fn an_agent_that_opens_proxy_connections_without_end_starves_nobody() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    // The target outside: accepts and holds every connection.
    let target = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = target.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let held: Vec<_> = target.incoming().collect();
        drop(held);
    });
    let hold = layout.conf.join("hold.py");
    std::fs::write(&hold, HOLD_PY).expect("write the prober");
    for fifo in ["count", "go", "b-done", "human-go", "human-done"] {
        crate::support::up::mkfifo(&layout.team.join(fifo));
    }
    let a = format!(
        r#"/usr/bin/python3 '{hold}' 127.0.0.1:{port} ./count {TRIES} &
read -r held <./count
say held "$held"
echo >./go
cat ./b-done >/dev/null
echo >./human-go
cat ./human-done >/dev/null
say done yes"#,
        hold = hold.display()
    );
    let b = r#"cat ./go >/dev/null
mosaic-bus call role.claim >/dev/null
n=0
for i in 1 2 3 4 5; do mosaic-bus call inbox '{}' | grep -q '"ok":true' && n=$((n + 1)); done
say b_calls "$n"
echo >./b-done"#;
    let mut prober = layout.agent("a", &a);
    prober["network"] = json!("proxy");
    prober["read"] = json!([hold]);
    prober["allow"] = json!([format!("127.0.0.1:{port}")]);
    prober["shared"] = json!(true);
    let mut other = layout.agent("b", b);
    other["shared"] = json!(true);
    let config = layout.config("required", json!({}), vec![prober, other]);
    let mut layout = layout;
    layout.wrapper = ["prlimit", &format!("--nofile={FILES}:{FILES}"), "--"]
        .map(Into::into)
        .to_vec();
    // The human, while the prober holds its connections: when it says so,
    // and it holds them until the human has the answer.
    let (told, heard) = std::sync::mpsc::channel();
    let (team, socket) = (layout.team.clone(), layout.data.join("bus/bus.sock"));
    std::thread::spawn(move || {
        let _ = std::fs::read(team.join("human-go"));
        let started = Instant::now();
        let mut human = Command::new(BIN)
            .arg("human")
            .arg(&socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the human CLI");
        human
            .stdin
            .take()
            .expect("stdin")
            .write_all(
                br#"{"business":"x","verb":"message.send","args":{"to":"human","body":"served"}}"#,
            )
            .expect("the request");
        let out = human.wait_with_output().expect("the answer");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let _ = told.send((answer, started.elapsed()));
        let _ = std::fs::write(team.join("human-done"), "\n");
    });
    let run = layout.stay(&config, &[], |_| ());
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    // The prober was refused by its own budget: 64 places, two a
    // connection, well before its tries ran out.
    let (held, last) = r["held"].split_once(' ').expect("COUNT STATUS");
    let held: usize = held.parse().expect("a count");
    assert!(held <= 32, "{r:?}");
    assert_eq!(
        last, "HTTP/1.1_503_Service_Unavailable",
        "{r:?}\n{}",
        run.log
    );
    assert_eq!(r["b_calls"], "5", "{r:?}\n{}", run.log);
    let (answer, took) = heard
        .recv_timeout(Duration::from_secs(60))
        .expect("the human's answer");
    assert_eq!(answer["ok"], true, "{answer}\n{}", run.log);
    assert!(took < HUMAN_BOUND, "{took:?}");
}
