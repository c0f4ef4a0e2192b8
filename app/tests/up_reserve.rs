//! The human's reserve under the real `up --stay`, the real bwrap and the
//! real broker ("the human's reserve" in ARCHITECTURE.md): a sandboxed
//! agent asks for 4,096 `changes` waits and keeps asking, and sends lines
//! that claim to be the human's, while the human CLI outside is answered
//! `ok` within a second, several times.
//!
//! The agent takes every place it can: a connection the broker closes is
//! opened again at once. Its run holds at most its cap of places (64), so
//! the rest are refused `broker-unavailable` and the agent's loop spins on
//! them; of those it holds, at most `feed::WAITS_PER_RUN` wait and the
//! others are answered early. Its forged human lines come from the
//! sandbox's namespaces: they find places (the agent cannot take them all)
//! and fail their proof, or find none and are turned away busy, and never
//! take a reserve place or pass. The human CLI, started detached outside,
//! is served.
//!
//! Run as root by `cargo test -p mosaic-app --test up_reserve`, and
//! unprivileged with the same binaries, as `.ci/run` runs the sandbox
//! tests: `setpriv --reuid=65534 --regid=65534 --clear-groups env
//! HOME=/tmp TMPDIR=/tmp target/debug/deps/up_reserve-<hash>` from `/tmp`.
//! Needs bwrap and python3 (`.ci/sandbox-deps`).
//!
//! Nothing sleeps in place of an event: the test polls for the agent's
//! files with a short pause ([`POLL`]) and a bound ([`WAIT`]).

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mosaic_app::runtime::DEFAULT_CONNECTIONS;
use serde_json::{json, Value};
use support::detached::{detached, Pending};
use support::up::{first_line, private_dir, stop, PYTHON};
use support::{BIN, POLL, WAIT};

/// The product's promise: the human is answered within a second, whatever
/// an agent holds. The worst observed: 219 ms over 60 calls (six runs)
/// with `stress-ng --cpu 2` beside the test, in the test's own session, on
/// two cores other builds shared. Without the namespace check before the
/// reserve, the human's first call was refused `broker-unavailable` in
/// three runs of three.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// How many times the human asks while the agent floods.
const HUMAN_CALLS: usize = 10;

/// How many `changes` waits the agent asks for at once: the broker's
/// places, as the probe of the issue held them.
const WAITS: usize = 4096;

/// How many forged human lines the agent keeps in flight at once: more
/// than the reserve's 16 places, as the issue's probe sent.
const FORGERS: usize = 64;

/// The agent: Python, inline, so it needs no file of the config's folder.
/// It makes each connection through its sandbox's connector (it may make
/// no Unix socket itself). It raises its open-file limit, claims its role, takes its cursor and
/// opens [`WAITS`] connections, each with a `changes` wait. Then, until
/// `stop` appears in its workdir, it keeps them: an answered one holds its
/// place until the broker closes it, idle, 5 s later, and one the broker
/// closed is opened again with a new wait. Meanwhile it keeps [`FORGERS`]
/// forged human lines in flight, each on a fresh connection, counting
/// each answer's code. It writes `ready` once every wait was asked for,
/// some were refused busy (its run's cap) and a forged line was answered,
/// and `report` (the counts, as JSON) when it stops.
const AGENT: &str = r#"
import json, os, resource, selectors, socket, sys, time
WAITS, FORGERS = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
connector = socket.socket(fileno=int(os.environ["MOSAIC_BUS_CONNECTOR_FD"]))
with open("/proc/self/fd/" + os.environ["MOSAIC_BUS_CAP_FD"]) as f:
    cap = f.read().strip()
def line(value):
    return (json.dumps(value) + "\n").encode()
def wait_line(cursor):
    return line({"cap": cap, "verb": "changes", "args": {"since": cursor, "timeoutMs": 120000}})
forged = line({"human": {"nonce": "0" * 64}, "business": "x", "verb": "inbox", "args": {}})
def connect():
    # No Unix socket can be made in the sandbox: each connection comes from
    # the supervisor, through the connector, on a socket pair of our own.
    # It waits for room in a full accept queue as a `connect` does.
    mine, theirs = socket.socketpair()
    socket.send_fds(connector, [b"c"], [theirs.fileno()])
    theirs.close()
    msg, fds, _, _ = socket.recv_fds(mine, 1, 1)
    mine.close()
    if msg != b"k" or not fds:
        raise OSError("broker-unavailable")
    s = socket.socket(fileno=fds[0])
    s.settimeout(20)
    return s
def call(request):
    s = connect()
    try:
        s.sendall(request)
        return json.loads(s.makefile("rb").readline() or b"null")
    except (OSError, ValueError):
        return None
    finally:
        s.close()
claimed = call(line({"cap": cap, "verb": "role.claim", "args": {}}))
assert claimed and claimed.get("ok"), claimed
cursor = call(line({"cap": cap, "verb": "changes", "args": {}}))["result"]["cursor"]
counts = {"nofile": hard, "opened": 0, "reopened": 0, "early": 0, "changes": 0, "refused": {},
          "forged": {}}
sel = selectors.DefaultSelector()
held = {"wait": 0, "forger": 0}
def open_one(kind, request):
    s = connect()
    s.sendall(request)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, (kind, bytearray()))
    held[kind] += 1
def close(s, kind):
    sel.unregister(s)
    s.close()
    held[kind] -= 1
def count(table, code):
    table[code] = table.get(code, 0) + 1
def answered(s, kind, answer):
    if kind == "forger":
        count(counts["forged"], "ok" if answer.get("ok") else answer.get("error"))
        close(s, kind)
        return
    if not answer.get("ok"):
        count(counts["refused"], answer.get("error"))
    elif answer["result"]["changes"]:
        counts["changes"] += 1
    else:
        counts["early"] += 1
def service(timeout):
    for key, _ in sel.select(timeout):
        s, (kind, buf) = key.fileobj, key.data
        try:
            data = s.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            close(s, kind)
            continue
        buf += data
        while b"\n" in buf and s.fileno() >= 0:
            answer, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            answered(s, kind, json.loads(answer))
def note(name):
    with open(name + ".tmp", "w") as f:
        json.dump(counts, f)
    os.rename(name + ".tmp", name)
for i in range(WAITS):
    open_one("wait", wait_line(cursor))
    counts["opened"] += 1
    if i % 64 == 0:
        service(0)
        note("progress")
ready = False
while not os.path.exists("stop"):
    service(0.01)
    while held["wait"] < WAITS:
        open_one("wait", wait_line(cursor))
        counts["reopened"] += 1
    while held["forger"] < FORGERS:
        open_one("forger", forged)
    note("progress")
    if not ready and counts["refused"].get("broker-unavailable") and counts["forged"]:
        ready = True
        note("ready")
note("report")
"#;

/// The configuration: business `x` of the human `alice`, one sandboxed
/// agent (role `a`) running [`AGENT`] in `agent_dir`.
fn config(work: &Path, agent_dir: &Path) -> PathBuf {
    let dir = work.join("team");
    std::fs::create_dir(&dir).expect("mkdir team");
    let config = json!({
        "sandbox": "required",
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{
            "role": "a",
            "harness": "pi",
            "workdir": agent_dir,
            "command": [PYTHON, "-c", AGENT, WAITS.to_string(), FORGERS.to_string()],
        }],
    });
    let path = dir.join("up.json");
    std::fs::write(&path, config.to_string()).expect("write the configuration");
    path
}

/// `up`, stopped (`SIGTERM`) and reaped when dropped, so a failed
/// assertion leaves no agent flooding.
struct Up {
    child: Option<Child>,
    log: PathBuf,
}

impl Up {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops `up` and waits (at most [`support::up::UP_WAIT`]) for its exit.
    fn stop(mut self) -> ExitStatus {
        let child = self.child.take().expect("running");
        stop(child)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let _ = stop(child);
        }
    }
}

/// The JSON the agent wrote to `name` in its workdir, once it is there.
fn agent_file(agent_dir: &Path, name: &str, up: &Up) -> Value {
    let path = agent_dir.join(name);
    let deadline = Instant::now() + WAIT;
    while !path.exists() && !up_exited(up) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        let progress = std::fs::read_to_string(agent_dir.join("progress")).unwrap_or_default();
        panic!(
            "no {name} from the agent within {WAIT:?} (it wrote {progress:?})\n{}",
            up.log()
        )
    });
    serde_json::from_str(&text).expect("the agent's JSON")
}

/// Whether `up` has exited already (then no file will come).
fn up_exited(up: &Up) -> bool {
    let pid = up.child.as_ref().map_or(0, Child::id);
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat.contains(") Z "))
}

/// The human CLI's `inbox` of `x`, detached from this test, and how long
/// its answer took from the request (the CLI's start is not the promise).
fn human_inbox(socket: &str) -> (Value, i32, Duration) {
    let mut command = detached();
    command.arg(BIN).arg("human").arg(socket);
    let pending = Pending::start(&mut command);
    pending.wait_for_request();
    let (outcome, took) = pending.timed(br#"{"business":"x","verb":"inbox","args":{}}"#);
    (outcome.reply, outcome.code, took)
}

#[test]
fn a_sandboxed_agent_asking_for_4096_waits_and_forging_human_lines_cannot_keep_the_human_out() {
    let work = tempfile::tempdir().expect("a work folder");
    let agent_dir = work.path().join("agent");
    std::fs::create_dir(&agent_dir).expect("mkdir agent");
    let config = config(work.path(), &agent_dir);
    let root = work.path().join("data");
    private_dir(&root);
    let log = work.path().join("up.log");
    let mut child = Command::new(BIN)
        .args(["up", "--stay", "--config"])
        .arg(&config)
        .arg("--data-root")
        .arg(&root)
        .env("TMPDIR", work.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("the log"))
        .spawn()
        .expect("spawn up");
    let first = first_line(&mut child);
    let up = Up {
        child: Some(child),
        log,
    };
    let summary: Value = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("a JSON first line: {e}: {first:?}\n{}", up.log()));
    assert_eq!(summary["agents"][0]["sandboxed"], json!(true), "{summary}");
    let socket = summary["socket"].as_str().expect("socket").to_owned();

    let ready = agent_file(&agent_dir, "ready", &up);
    eprintln!("the agent in full swing: {ready}");
    assert_eq!(ready["opened"], json!(WAITS), "{ready}");

    for call in 0..HUMAN_CALLS {
        let (reply, code, took) = human_inbox(&socket);
        eprintln!("the human answered in {took:?}");
        assert_eq!(
            (code, &reply["ok"]),
            (0, &json!(true)),
            "call {call}: {reply}"
        );
        assert!(
            took < ANSWER_WITHIN,
            "the human took {took:?} in call {call}"
        );
    }

    std::fs::write(agent_dir.join("stop"), "").expect("stop the agent");
    let report = agent_file(&agent_dir, "report", &up);
    eprintln!("the agent's report: {report}");
    let forged = report["forged"].as_object().expect("forged counts");
    assert!(
        !forged.contains_key("ok"),
        "a forged line was served: {report}"
    );
    // Every forged line failed its proof or was turned away busy.
    assert!(
        forged
            .keys()
            .all(|code| code == "human-proof-failed" || code == "broker-unavailable"),
        "{report}"
    );
    // The run's cap turned most waits away busy; of those it held, it got
    // no change, and all but the run's 8 were answered early.
    let busy = report["refused"]["broker-unavailable"]
        .as_u64()
        .unwrap_or(0);
    assert!(busy >= (WAITS - DEFAULT_CONNECTIONS) as u64, "{report}");
    assert_eq!(report["changes"], json!(0), "{report}");
    // The agent is stopped with `up`; the broker's evidence of it is not
    // this test's business.
    let _status = up.stop();
}
