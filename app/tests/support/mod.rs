//! What the broker's black-box tests share: a private data root, the real
//! `mosaic-bus broker` child spoken to over its stdin/stdout (the host
//! channel), socket clients holding the capabilities it issued,
//! and exact-assertion helpers.
//!
//! Nothing here sleeps to synchronise: every wait is for a line, the end of
//! the child's stdout or its exit, each bounded by [`WAIT`] so a hung broker
//! fails the test instead of hanging it. A broker still running when its
//! [`Broker`] is dropped (a failed assertion) is killed.
//!
//! Tests of the broker's own rules make a human decision (a gated
//! resolution, the launch switch) with [`human_offline`]: the product's own
//! runtime loop ([`Driver`]) over the data root's store, with the writer
//! lock held, while no broker runs. The human CLI and its proof have their
//! own suite (`app/tests/human/`).
#![allow(dead_code)]

pub mod crash;
pub mod detached;
pub mod pane;
pub mod procs;
pub mod store;
pub mod tmpfs;
pub mod tmux;
pub mod up;

// Every test binary names a few of these, none all of them.
#[allow(unused_imports)]
pub use store::{
    assert_store_intact, assert_whole_transactions, count, ledger_times, open_db, TYPED_TABLES,
};

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use mosaic_app::runtime::Driver;
use mosaic_client::socket::Client;
use mosaic_domain::bus::{Caller, Command as BusCommand, Reply};
use mosaic_domain::{BusinessId, Refusal};
use serde_json::{json, Map, Value};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_mosaic-bus");

/// The longest any single wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(20);

/// A live process that stands in for the agents these tests launch: the
/// broker binds only launch records of running processes of its own user
/// with their real start time. It lives as long as the test binary (it
/// waits on a pipe only this process writes), and it is never an ancestor
/// of a human CLI a test starts.
#[derive(Debug)]
pub struct StandIn {
    /// Its pid.
    pub pid: u32,
    /// Its start time, field 22 of `/proc/<pid>/stat`.
    pub start_time: u64,
    _input: std::process::ChildStdin,
}

/// The `n`-th of two stand-ins (0 or 1): launch records use the first; a
/// test that needs another live process uses the second.
pub fn stand_in(n: usize) -> &'static StandIn {
    static STAND_INS: std::sync::OnceLock<[StandIn; 2]> = std::sync::OnceLock::new();
    let spawn = || {
        use mosaic_ports::ProcessTable as _;
        // Never waited for: it exits with the test binary, when its input
        // closes, and init reaps it.
        #[allow(clippy::zombie_processes)]
        let mut child = Command::new("sh")
            .args(["-c", "read _"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn a stand-in");
        let pid = child.id();
        let start_time = mosaic_adapters::procfs::ProcFs::new()
            .process(pid)
            .expect("the stand-in's stat")
            .start_time;
        StandIn {
            pid,
            start_time,
            _input: child.stdin.take().expect("its input"),
        }
    };
    &STAND_INS.get_or_init(|| [spawn(), spawn()])[n]
}

/// The start time every launch record of these tests carries: the first
/// stand-in's.
pub fn start_time() -> u64 {
    stand_in(0).start_time
}

/// The pid every launch record of these tests carries: the first
/// stand-in's.
pub fn launch_pid() -> u32 {
    stand_in(0).pid
}

/// A new private data root (mode 0700), removed when dropped.
pub fn data_root() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("mosaic-broker-")
        .tempdir()
        .expect("a temporary data root");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod 0700");
    dir
}

/// `acme`: `lead` is the delivery arbiter and launches roles, `arch` the
/// technical arbiter. Sending is within-role for lead, arch and qa,
/// cross-role for dev and gated for ops (empty maps grant nothing).
pub fn acme() -> Value {
    json!({
        "id": "acme",
        "human": "alice",
        "arbiters": {"technical": "arch", "delivery": "lead"},
        "roles": {
            "lead": {"authority": {"withinRole": ["message.send", "repo.push"], "crossRole": ["repo.merge"]}},
            "dev": {"authority": {"withinRole": ["repo.push"], "crossRole": ["repo.merge", "message.send"]}},
            "arch": {"authority": {"withinRole": ["message.send"], "crossRole": ["repo.merge"]}},
            "qa": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
            "ops": {"authority": {"withinRole": [], "crossRole": []}}
        },
        "launch": {"by": "lead"}
    })
}

/// `globex`: a second business with the same role names as acme's.
pub fn globex() -> Value {
    json!({
        "id": "globex",
        "human": "bob",
        "arbiters": {"technical": "lead", "delivery": "lead"},
        "roles": {
            "lead": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
            "dev": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
        }
    })
}

/// A launch record run by the first stand-in ([`stand_in`]).
pub fn launch(business: &str, role: &str, run: &str) -> Value {
    json!({
        "business": business,
        "role": role,
        "run": run,
        "harness": "pi",
        "pid": launch_pid(),
        "startTime": start_time(),
    })
}

/// The acme runs most tests use: one per role, two for dev and qa.
pub fn acme_launches() -> Vec<Value> {
    [
        ("lead", "lead-1"),
        ("dev", "dev-1"),
        ("dev", "dev-2"),
        ("arch", "arch-1"),
        ("qa", "qa-1"),
        ("qa", "qa-2"),
        ("ops", "ops-1"),
    ]
    .into_iter()
    .map(|(role, run)| launch("acme", role, run))
    .collect()
}

/// A boot configuration.
pub fn config(root: &Path, businesses: &[Value], launches: &[Value], readers: &[&str]) -> Value {
    let map: Map<String, Value> = businesses
        .iter()
        .map(|b| (b["id"].as_str().expect("an id").to_owned(), b.clone()))
        .collect();
    json!({
        "dataRoot": root.to_str().expect("a UTF-8 path"),
        "businesses": map,
        "launches": launches,
        "readers": readers,
        "repoRoots": [],
    })
}

/// `agents` rows (an array of them, or one) without their `lastAt` times,
/// after checking each: `null` exactly when `lastVerb` is, else a
/// canonical time. What is left can be compared exactly.
#[track_caller]
pub fn without_last_at(mut rows: Value) -> Value {
    let mut check = |row: &mut Value| {
        let at = row
            .as_object_mut()
            .and_then(|o| o.remove("lastAt"))
            .unwrap_or_else(|| panic!("no lastAt in {row}"));
        match (&row["lastVerb"], &at) {
            (Value::Null, Value::Null) => {}
            (Value::String(_), Value::String(at)) => assert!(
                mosaic_domain::Timestamp::parse(at).is_ok(),
                "lastAt {at} of {row}"
            ),
            (verb, at) => panic!("lastVerb {verb} with lastAt {at}"),
        }
    };
    if let Value::Array(all) = &mut rows {
        all.iter_mut().for_each(&mut check);
    } else {
        check(&mut rows);
    }
    rows
}

/// `{"op":"boot","config":config}`.
pub fn boot_line(config: &Value) -> Value {
    json!({"op": "boot", "config": config})
}

/// Whether `text` is a capability as the wire spells it: 64 lowercase hex.
pub fn is_cap(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// One `mosaic-bus broker` child process and its host channel.
pub struct Broker {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// The boot reply (`null` until a boot succeeded).
    pub boot: Value,
    /// The socket the boot reply named.
    pub socket: PathBuf,
    /// The data root.
    pub root: PathBuf,
}

impl Broker {
    /// Starts `mosaic-bus broker` without sending anything yet.
    pub fn spawn(root: &Path) -> Broker {
        Broker::spawn_with_env(root, &[])
    }

    /// As [`Broker::spawn`], with extra environment variables.
    pub fn spawn_with_env(root: &Path, env: &[(&str, &str)]) -> Broker {
        Broker::spawn_with_stderr(root, env, None)
    }

    /// As [`Broker::spawn_with_env`], its stderr going to `stderr` (a
    /// closed pipe, a file on a full disk) instead of to this test, when
    /// given: [`Broker::stderr`] then says nothing.
    pub fn spawn_with_stderr(root: &Path, env: &[(&str, &str)], stderr: Option<Stdio>) -> Broker {
        let captured = stderr.is_none();
        let mut child = Command::new(BIN)
            .arg("broker")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.unwrap_or_else(Stdio::piped))
            .spawn()
            .expect("spawn mosaic-bus broker");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = child.stderr.take().filter(|_| captured).map(|mut err| {
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = err.read_to_end(&mut all);
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(all);
            })
        });
        Broker {
            stdin: child.stdin.take(),
            child: Some(child),
            lines,
            stderr,
            stderr_reader,
            boot: Value::Null,
            socket: root.join("bus").join("bus.sock"),
            root: root.to_owned(),
        }
    }

    /// Boots a broker with `config` and checks that it answered `ok`.
    #[track_caller]
    pub fn boot(root: &Path, config: &Value) -> Broker {
        Broker::boot_with_env(root, config, &[])
    }

    /// As [`Broker::boot`], with extra environment variables.
    #[track_caller]
    pub fn boot_with_env(root: &Path, config: &Value, env: &[(&str, &str)]) -> Broker {
        let mut broker = Broker::spawn_with_env(root, env);
        let reply = broker.host(&boot_line(config));
        assert_eq!(reply["ok"], json!(true), "boot refused: {reply}");
        broker.socket = PathBuf::from(reply["path"].as_str().expect("a path"));
        broker.boot = reply;
        broker
    }

    /// As [`Broker::boot_with_env`], its stderr going to `stderr` (see
    /// [`Broker::spawn_with_stderr`]).
    #[track_caller]
    pub fn boot_with_stderr(
        root: &Path,
        config: &Value,
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Broker {
        let mut broker = Broker::spawn_with_stderr(root, env, Some(stderr));
        let reply = broker.host(&boot_line(config));
        assert_eq!(reply["ok"], json!(true), "boot refused: {reply}");
        broker.socket = PathBuf::from(reply["path"].as_str().expect("a path"));
        broker.boot = reply;
        broker
    }

    /// As [`Broker::boot`], with the broker's open-file limit (soft and
    /// hard) set to `files` before it boots (`prlimit --pid`), so it can
    /// raise it no further.
    #[track_caller]
    pub fn boot_with_open_files(root: &Path, config: &Value, files: u64) -> Broker {
        let mut broker = Broker::spawn(root);
        let status = Command::new("prlimit")
            .arg("--pid")
            .arg(broker.pid().to_string())
            .arg(format!("--nofile={files}:{files}"))
            .status()
            .expect("run prlimit");
        assert!(status.success(), "prlimit: {status}");
        let reply = broker.host(&boot_line(config));
        assert_eq!(reply["ok"], json!(true), "boot refused: {reply}");
        broker.socket = PathBuf::from(reply["path"].as_str().expect("a path"));
        broker.boot = reply;
        broker
    }

    /// Boots with `config`, expecting the refusal line `{"ok":false,"error":
    /// code}` and exit 2 with nothing else on stdout.
    #[track_caller]
    pub fn boot_refused(root: &Path, config: &Value, code: &str) {
        let mut broker = Broker::spawn(root);
        broker.send(&boot_line(config).to_string());
        broker.expect_failure(code);
    }

    /// Boots with `config`, expecting the refusal of the boot launch `run`:
    /// `{"ok":false,"error":code,"run":run}` and exit 2.
    #[track_caller]
    pub fn boot_refused_run(root: &Path, config: &Value, code: &str, run: &str) {
        let mut broker = Broker::spawn(root);
        broker.send(&boot_line(config).to_string());
        broker.expect_line(&json!({"ok": false, "error": code, "run": run}));
    }

    /// Expects the one refusal line `{"ok":false,"error":code}`, then exit 2
    /// with nothing more on stdout, and no lock or socket left behind.
    #[track_caller]
    pub fn expect_failure(self, code: &str) {
        self.expect_line(&json!({"ok": false, "error": code}));
    }

    /// Expects the one refusal line `expected`, then exit 2 with nothing
    /// more on stdout, and no lock or socket left behind.
    #[track_caller]
    pub fn expect_line(mut self, expected: &Value) {
        let line = self.line().expect("a refusal line");
        assert_eq!(
            &serde_json::from_str::<Value>(&line).expect("JSON"),
            expected,
            "{line}"
        );
        assert_eq!(self.wait(), 2, "exit code");
        assert_gone(&self.root);
    }

    /// The capability the boot reply issued to `run`.
    #[track_caller]
    pub fn cap(&self, run: &str) -> String {
        let launches = self.boot["launches"].as_array().expect("launches");
        let found: Vec<&Value> = launches.iter().filter(|l| l["run"] == run).collect();
        assert_eq!(found.len(), 1, "one launch for {run}");
        found[0]["cap"].as_str().expect("a cap").to_owned()
    }

    /// A socket client of `run`, with its boot capability.
    #[track_caller]
    pub fn agent(&self, run: &str) -> Agent {
        Agent::new(&self.socket, &self.cap(run), run)
    }

    /// A socket client with the boot reply's `index`-th reader capability.
    #[track_caller]
    pub fn reader(&self, index: usize) -> Agent {
        let cap = self.boot["readers"][index]["cap"]
            .as_str()
            .expect("a reader cap");
        Agent::new(&self.socket, cap, "reader")
    }

    /// Writes one raw host line (and its newline).
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("write to the broker");
    }

    /// The next stdout line, or `None` once stdout ended.
    #[track_caller]
    pub fn line(&self) -> Option<String> {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => Some(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("no line from the broker; stderr: {}", self.stderr())
            }
        }
    }

    /// Sends one host message and returns its one-line JSON reply.
    #[track_caller]
    pub fn host(&mut self, message: &Value) -> Value {
        self.send(&message.to_string());
        let line = self.line().expect("a reply line");
        serde_json::from_str(&line).expect("a JSON reply")
    }

    /// `{"op":"bindLaunch","record":record}` and its reply.
    #[track_caller]
    pub fn bind_launch(&mut self, record: &Value) -> Value {
        self.host(&json!({"op": "bindLaunch", "record": record}))
    }

    /// Binds `record`, checks the exact `ok` reply and returns a client
    /// with the new capability.
    #[track_caller]
    pub fn bind_ok(&mut self, record: &Value) -> Agent {
        let reply = self.bind_launch(record);
        let cap = reply["launch"]["cap"].as_str().unwrap_or("").to_owned();
        assert!(is_cap(&cap), "{reply}");
        assert_eq!(
            reply,
            json!({"ok": true, "launch": {
                "business": record["business"], "run": record["run"], "cap": cap}}),
        );
        Agent::new(&self.socket, &cap, record["run"].as_str().expect("a run"))
    }

    /// Closes the host channel (end of stdin).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Sends a signal by name (`TERM`, `INT`) with `kill(1)`.
    #[track_caller]
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .args(["-s", name, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {name} {pid}");
    }

    /// Waits for stdout to end (asserting it carries no further line), for
    /// the exit and for the end of stderr; returns how the process ended.
    #[track_caller]
    pub fn wait_status(&mut self) -> std::process::ExitStatus {
        let extra = self.line();
        assert_eq!(extra, None, "an unexpected line from the broker");
        let status = self.child.take().expect("running").wait().expect("wait");
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().expect("the stderr reader");
        }
        status
    }

    /// As [`Broker::wait_status`], for a process that exited: its code.
    #[track_caller]
    pub fn wait(&mut self) -> i32 {
        let status = self.wait_status();
        status
            .code()
            .unwrap_or_else(|| panic!("killed by a signal: {status}"))
    }

    /// `{"op":"close"}`: exit 0, nothing more on stdout, socket and lock
    /// gone. Returns what the broker logged on stderr.
    #[track_caller]
    pub fn close(mut self) -> String {
        self.send(r#"{"op":"close"}"#);
        assert_eq!(self.wait(), 0, "close exits 0; stderr: {}", self.stderr());
        assert_gone(&self.root);
        self.stderr()
    }

    /// SIGTERM: a clean close with exit 0, socket and lock gone, as an
    /// operator or a service manager stops a broker.
    #[track_caller]
    pub fn terminate(mut self) {
        self.signal("TERM");
        assert_eq!(self.wait(), 0, "SIGTERM exits 0; stderr: {}", self.stderr());
        assert_gone(&self.root);
    }

    /// The broker process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a running broker").id()
    }

    /// What the broker wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Checks that no broker's socket or writer lock is left in `root`.
#[track_caller]
pub fn assert_gone(root: &Path) {
    let bus = root.join("bus");
    assert!(!bus.join("bus.sock").exists(), "the socket is removed");
    assert!(
        !bus.join("writer.lock").exists(),
        "the writer lock is removed"
    );
}

/// The permission bits and whether the path is a socket.
pub fn mode_of(path: &Path) -> (u32, bool) {
    let meta = std::fs::symlink_metadata(path).expect("lstat");
    (meta.mode() & 0o7777, meta.file_type().is_socket())
}

/// A socket client holding one capability.
#[derive(Clone)]
pub struct Agent {
    /// The client.
    pub client: Client,
    /// The capability it presents.
    pub cap: String,
    /// A name for failure messages.
    pub name: String,
}

impl Agent {
    /// A client of `socket` presenting `cap`.
    pub fn new(socket: &Path, cap: &str, name: &str) -> Agent {
        Agent {
            client: Client::new(socket, cap),
            cap: cap.to_owned(),
            name: name.to_owned(),
        }
    }

    /// One call.
    pub fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal> {
        self.client.call(verb, args)
    }

    /// One call that must succeed; its result.
    #[track_caller]
    pub fn ok(&self, verb: &str, args: Value) -> Value {
        match self.call(verb, args.clone()) {
            Ok(result) => result,
            Err(refusal) => panic!("{} {verb} {args}: refused {refusal}", self.name),
        }
    }

    /// One call that must be refused with exactly `code`.
    #[track_caller]
    pub fn refused(&self, verb: &str, args: Value, code: &str) {
        let got = self.call(verb, args.clone());
        assert_eq!(
            got.as_ref().map_err(|r| r.code()),
            Err(code),
            "{} {verb} {args}",
            self.name
        );
    }

    /// `role.claim`, expecting `{"status":"claimed"}`.
    #[track_caller]
    pub fn claim(&self) {
        assert_eq!(
            self.ok("role.claim", json!({})),
            json!({"status": "claimed"})
        );
    }

    /// `decision.raise` with the default question and yes/no options, plus
    /// `extra` arguments; returns the decision.
    #[track_caller]
    pub fn raise(&self, action: &str, target: Option<&str>, extra: Value) -> Value {
        self.ok("decision.raise", raise_args(action, target, extra))
    }

    /// `decision.resolve {id, choice}`; returns the decision.
    #[track_caller]
    pub fn resolve(&self, id: &Value, choice: &str) -> Value {
        self.ok("decision.resolve", json!({"id": id, "choice": choice}))
    }

    /// `message.send {to, body}` plus `extra`; returns the message id.
    #[track_caller]
    pub fn send(&self, to: &str, body: &str, extra: Value) -> Value {
        let mut args = json!({"to": to, "body": body});
        merge(&mut args, extra);
        let result = self.ok("message.send", args);
        assert_eq!(result["request"], Value::Null, "{result}");
        assert_eq!(result.as_object().map(Map::len), Some(2), "{result}");
        result["id"].clone()
    }

    /// `trail {subject}` without the `at` fields, after checking that they
    /// strictly increase.
    #[track_caller]
    pub fn trail(&self, subject: &str) -> Vec<Value> {
        let records = self.ok("trail", json!({"subject": subject}));
        let records = records.as_array().expect("an array").clone();
        assert_increasing(&records);
        records.into_iter().map(without_at).collect()
    }

    /// The kinds of `trail {subject}`, in order.
    #[track_caller]
    pub fn trail_kinds(&self, subject: &str) -> Vec<String> {
        self.trail(subject)
            .iter()
            .map(|r| r["kind"].as_str().expect("a kind").to_owned())
            .collect()
    }
}

/// The arguments of a plain yes/no `decision.raise`, plus `extra`.
pub fn raise_args(action: &str, target: Option<&str>, extra: Value) -> Value {
    let mut args = json!({
        "action": action,
        "question": "Proceed?",
        "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
        "recommendation": "yes",
        "blocking": false,
    });
    if let Some(target) = target {
        args["target"] = json!(target);
    }
    merge(&mut args, extra);
    args
}

/// The decision a plain [`raise_args`] raise answers, with `fields` over it.
pub fn decision(id: &Value, action: &str, target: Option<&str>, fields: Value) -> Value {
    let mut d = json!({
        "id": id,
        "action": action,
        "target": target,
        "question": "Proceed?",
        "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
        "recommendation": "yes",
        "blocking": false,
        "domain": "delivery",
        "project": null,
        "task_ref": null,
        "requirement_ref": null,
        "supersedes": null,
        "holder": null,
        "authorization": {"action": action, "target": target, "approvalChoice": "yes"},
        "status": "open",
        "choice": null,
        "superseded_by": null,
    });
    merge(&mut d, fields);
    d
}

/// A message as `message.receive` answers it, with `fields` over the
/// defaults of an agent's plain message.
pub fn message(id: &Value, from: (&str, &str), to: &str, body: &str, fields: Value) -> Value {
    let mut m = json!({
        "id": id,
        "from": from.0,
        "from_run": from.1,
        "to": to,
        "class": null,
        "body": body,
        "in_reply_to": null,
        "corrects": null,
        "decision": null,
        "request": null,
    });
    merge(&mut m, fields);
    m
}

/// Sets every key of the object `extra` on the object `base`.
pub fn merge(base: &mut Value, extra: Value) {
    let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) else {
        panic!("merge objects only");
    };
    base.extend(extra);
}

/// The record without its `at`.
pub fn without_at(mut record: Value) -> Value {
    record.as_object_mut().expect("an object").remove("at");
    record
}

/// Checks that the records' `at` fields (canonical UTC text, which sorts
/// as it counts) strictly increase.
#[track_caller]
pub fn assert_increasing(records: &[Value]) {
    let times: Vec<&str> = records
        .iter()
        .map(|r| r["at"].as_str().expect("an at"))
        .collect();
    for pair in times.windows(2) {
        assert!(pair[0] < pair[1], "timestamps not increasing: {times:?}");
    }
}

/// One raw request line (a newline is added) and the broker's answer, parsed.
#[track_caller]
pub fn raw(socket: &Path, line: &[u8]) -> Value {
    let answer = Client::new(socket, "")
        .call_line(line)
        .unwrap_or_else(|r| panic!("no answer ({r}) to {:?}", String::from_utf8_lossy(line)));
    serde_json::from_slice(&answer).expect("a JSON answer")
}

/// Checks that a raw line is answered `{"ok":false,"error":code}` exactly.
#[track_caller]
pub fn raw_refused(socket: &Path, line: &[u8], code: &str) {
    assert_eq!(
        raw(socket, line),
        json!({"ok": false, "error": code}),
        "{:?}",
        String::from_utf8_lossy(&line[..line.len().min(200)])
    );
}

/// Acts as the business's human on a closed data root, through the
/// product's runtime loop: takes the writer lock, opens the verified store,
/// rebuilds the bus from it, runs `commands` as `Caller::Human` and
/// releases the lock. Keeps these tests independent of the human CLI's
/// process proof, which `app/tests/human/` covers.
#[track_caller]
pub fn human_offline(
    root: &Path,
    businesses: &[Value],
    business: &str,
    commands: Vec<BusCommand>,
) -> Vec<Result<Reply, Refusal>> {
    use mosaic_adapters::fs::{DataRoot, WriterLock};
    use mosaic_adapters::procfs::ProcFs;
    use mosaic_adapters::sqlite::SqliteStore;
    use mosaic_adapters::system::{OsEntropy, SystemClock};
    use mosaic_ports::{Clock, Entropy};

    let data = DataRoot::open(root).expect("data root");
    let me = ProcFs::new().current().expect("this process");
    let lock = WriterLock::acquire(&data, me.pid, me.start_time).expect("the writer lock");
    let store = SqliteStore::open(&data.db_path()).expect("the store");
    let defs = businesses
        .iter()
        .map(|b| mosaic_adapters::config::business_from_value(b.clone()).expect("a business"))
        .collect();
    let mut driver = Driver::open(defs, store).expect("replay");
    let mut entropy = OsEntropy;
    let business = BusinessId::parse(business).expect("a business id");
    let replies = commands
        .into_iter()
        .map(|command| {
            let caller = Caller::Human {
                business: business.clone(),
                input: entropy.event_id().expect("entropy"),
            };
            driver.call(SystemClock.now(), &caller, command)
        })
        .collect();
    drop(driver);
    lock.release().expect("release the lock");
    replies
}

/// The human resolves decision `id` with `choice`, offline.
#[track_caller]
pub fn human_resolve_offline(
    root: &Path,
    businesses: &[Value],
    business: &str,
    id: &Value,
    choice: &str,
) {
    use mosaic_domain::evidence::OptionKey;
    use mosaic_domain::DecisionId;
    let command = BusCommand::Resolve {
        id: DecisionId::parse(id.as_str().expect("an id")).expect("a decision id"),
        choice: OptionKey::parse(choice).expect("an option key"),
        note: None,
    };
    let replies = human_offline(root, businesses, business, vec![command]);
    assert!(
        matches!(replies.as_slice(), [Ok(Reply::Decision(_))]),
        "{replies:?}"
    );
}

impl Broker {
    /// SIGKILL: a crash. Waits for the exit and checks that the signal
    /// ended it; the socket file and the writer lock stay behind, as after
    /// any crash.
    #[track_caller]
    pub fn kill(mut self) {
        use std::os::unix::process::ExitStatusExt;
        self.signal("KILL");
        let status = self.wait_status();
        assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status}");
        assert!(
            self.root.join("bus").join("writer.lock").exists(),
            "a crash leaves the writer lock"
        );
    }

    /// The capabilities the boot reply issued, keyed by run.
    pub fn caps(&self) -> std::collections::HashMap<String, String> {
        self.boot["launches"]
            .as_array()
            .map(|launches| {
                launches
                    .iter()
                    .map(|l| {
                        (
                            l["run"].as_str().unwrap_or_default().to_owned(),
                            l["cap"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The operator's recovery after a crash: `mosaic-bus unlock --data-root
/// root` must print `{"ok":true,"evidence":FOLDER}` (exit 0) with a copy of
/// the database in FOLDER. Returns FOLDER.
#[track_caller]
pub fn unlock(root: &Path) -> PathBuf {
    let out = Command::new(BIN)
        .arg("unlock")
        .arg("--data-root")
        .arg(root)
        .output()
        .expect("run mosaic-bus unlock");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let reply: Value = serde_json::from_str(stdout.trim_end()).expect("one JSON line");
    assert_eq!(out.status.code(), Some(0), "unlock: {stdout}");
    let evidence = PathBuf::from(reply["evidence"].as_str().expect("an evidence folder"));
    assert_eq!(
        reply,
        json!({"ok": true, "evidence": evidence.to_str().expect("UTF-8")}),
    );
    assert!(
        evidence.join("bus.sqlite").is_file(),
        "the database was copied"
    );
    assert!(
        !root.join("bus").join("writer.lock").exists(),
        "unlock removes the lock"
    );
    evidence
}

/// The number in the environment variable `name`, or `default` when it is
/// not set (the crash campaigns' rounds and seeds).
///
/// # Panics
/// When it is set to anything but a number.
pub fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number")),
        Err(_) => default,
    }
}

/// Polls `condition` until it holds; fails the test, naming `what`, when it
/// still does not after [`WAIT`]. For conditions that only the broker's
/// own pace decides (it has seen a disconnect, closed a connection), which
/// no line or exit announces.
#[track_caller]
pub fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "not within {WAIT:?}: {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// The pause between two looks at something a test waits for: short
/// against every deadline, long enough that the wait leaves the CPU to
/// what it waits for.
pub const POLL: Duration = Duration::from_millis(1);
