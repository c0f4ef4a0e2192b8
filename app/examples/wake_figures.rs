//! The figures of idle agents in docs/performance.md: five harness
//! agents under `mosaic-bus up` that end their programs when idle, the
//! memory the idle team holds, and how fast a message wakes each. Not a
//! test: it measures, prints, and fails only when it cannot measure.
//!
//! ```sh
//! cargo build -p mosaic-app --bin mosaic-bus
//! cargo run -p mosaic-app --example wake_figures
//! ```
//!
//! The team: `a1`..`a5` alternately on Claude Code and pi (the real
//! programs from `tests/node_modules/.bin`, `.ci/harness-deps`), sandboxed,
//! `"idle": "exit"` (the default), each against the scripted model of
//! `app/tests/support/model.rs` with a key of its own; and `boss`, an `sh`
//! agent that sends a message to the role named by each line it reads
//! from a fifo. Each agent claims its role, ends its turn, and its
//! program ends 10 s later: the run sleeps.
//! - idle team: once all five sleep, the harness processes left (none),
//!   and the resident memory (VmRSS) of `up` and of every process below
//!   it (the sandboxes' `bwrap` and `sandbox-exec` supervisors, the
//!   proxy's bridge, `boss`);
//! - then, one role at a time: from the line written to the fifo to `up`'s
//!   `work arrived` (the wake: the feed, then the start order), to the
//!   model's first request of the woken program (a restart's cost: the
//!   harness starting with its conversation resumed), and to the request
//!   that carries the result of its first tool call (`message_receive`).

#[path = "../tests/support/model.rs"]
mod model;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use model::{Model, Request, Step};
use serde_json::{json, Value};

/// The bound on each wait.
const WITHIN: Duration = Duration::from_secs(180);

/// The agents and their harnesses.
const AGENTS: [(&str, &str); 5] = [
    ("a1", "claude-code"),
    ("a2", "pi"),
    ("a3", "claude-code"),
    ("a4", "pi"),
    ("a5", "claude-code"),
];

fn main() {
    let app = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().expect("this example's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("the target folder")
        .join("mosaic-bus");
    assert!(
        bin.exists(),
        "{} is missing: cargo build -p mosaic-app --bin mosaic-bus",
        bin.display()
    );
    let harnesses = app.join("../tests/node_modules/.bin");
    assert!(
        harnesses.join("claude").exists() && harnesses.join("pi").exists(),
        "the real harnesses are missing: run .ci/harness-deps"
    );
    let tool = |harness: &str, verb: &str| match harness {
        "claude-code" => format!("mcp__mosaic-bus__{verb}"),
        _ => verb.to_owned(),
    };
    let model = Model::start(
        AGENTS
            .iter()
            .map(|(role, harness)| {
                (
                    *role,
                    *role,
                    vec![
                        Step::tool(&tool(harness, "role_claim"), json!({})),
                        Step::wait_for("message.sent"),
                        Step::tool(&tool(harness, "message_receive"), json!({})),
                        Step::text("Received."),
                    ],
                )
            })
            .collect(),
    );
    let dir = tempfile::tempdir().expect("a folder");
    let root = tempfile::tempdir().expect("a data root");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let home = tempfile::tempdir().expect("a home");
    let out = tempfile::tempdir().expect("boss's folder");
    let go = out.path().join("go");
    let made = Command::new("mkfifo").arg(&go).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let boss = format!(
        "read _ && mosaic-bus call role.claim >/dev/null && exec 3<> {go} && \
         while read to <&3; do mosaic-bus call message.send \
           \"{{\\\"to\\\":\\\"$to\\\",\\\"body\\\":\\\"Wake up.\\\"}}\" >/dev/null; done",
        go = go.display()
    );
    let authority = json!({"authority": {"withinRole": ["message.send"], "crossRole": []}});
    let mut roles = serde_json::Map::new();
    let mut agents = Vec::new();
    for (role, harness) in AGENTS {
        roles.insert(role.to_owned(), authority.clone());
        agents.push(
            json!({"role": role, "harness": harness, "prompt": "Claim your role.",
            "model": {"api": "anthropic", "baseUrl": model.base_url(),
                      "keyEnv": format!("FIGURES_{}_KEY", role.to_uppercase())}}),
        );
    }
    roles.insert("boss".to_owned(), authority);
    agents.push(
        json!({"role": "boss", "harness": "pi", "write": [out.path()],
        "command": ["sh", "-c", boss]}),
    );
    let config = json!({"sandbox": "required",
        "business": {"id": "figures", "human": "alice",
                     "arbiters": {"technical": "boss", "delivery": "boss"}, "roles": roles},
        "agents": agents});
    let path = dir.path().join("team.json");
    std::fs::write(&path, config.to_string()).expect("write the config");
    let mut search = harnesses.as_os_str().to_owned();
    search.push(":");
    search.push(std::env::var_os("PATH").unwrap_or_default());
    let mut command = Command::new(&bin);
    command
        .arg("up")
        .arg("--config")
        .arg(&path)
        .arg("--data-root")
        .arg(root.path())
        .env("PATH", search)
        .env("HOME", home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (role, _) in AGENTS {
        command.env(format!("FIGURES_{}_KEY", role.to_uppercase()), role);
    }
    let mut up = command.spawn().expect("start up");
    // up's log lines, each with when it arrived.
    let stderr = up.stderr.take().expect("stderr");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            let _ = send.send((Instant::now(), line));
        }
    });
    let mut first = String::new();
    BufReader::new(up.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("up's first line");
    let summary: Value = serde_json::from_str(&first).expect("up's first line is JSON");
    let run_of = |role: &str| {
        summary["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .find(|a| a["role"] == role)
            .and_then(|a| a["run"].as_str())
            .expect("a run")
            .to_owned()
    };
    let mut log = Log {
        lines,
        seen: Vec::new(),
    };
    for (role, _) in AGENTS {
        log.wait(&["the agent is idle", &format!("run=\"{}\"", run_of(role))]);
    }
    let pid = up.id();
    let below = descendants(pid);
    let harness_left = below
        .iter()
        .filter(|p| ["claude.exe", "node"].contains(&name(**p).as_str()))
        .count();
    let own = rss_kib(pid);
    let theirs: u64 = below.iter().map(|p| rss_kib(*p)).sum();
    println!(
        "idle team of {}: {harness_left} harness processes; RSS up {} MiB, the {} processes below it {} MiB, {} MiB in all",
        AGENTS.len(),
        own / 1024,
        below.len(),
        theirs / 1024,
        (own + theirs) / 1024
    );
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .expect("boss's fifo");
    for (role, harness) in AGENTS {
        let run = format!("run=\"{}\"", run_of(role));
        let before = model.requests().len();
        let sent = Instant::now();
        writeln!(fifo, "{role}").expect("write the fifo");
        let woke = log.wait(&["work arrived", &run]);
        let requests = model.wait("the woken agent's tool result", WITHIN, |requests| {
            requests[before..]
                .iter()
                .any(|r| r.agent.as_deref() == Some(role) && results(r) >= 2)
        });
        let mine: Vec<&Request> = requests[before..]
            .iter()
            .filter(|r| r.is_message() && r.agent.as_deref() == Some(role))
            .collect();
        let asked = mine.first().expect("a request").at;
        let tool = mine
            .iter()
            .find(|r| results(r) >= 2)
            .expect("the tool's result")
            .at;
        println!(
            "{role} ({harness}): message to wake {} ms; wake to its first model request (the restart) {} ms; message to its first tool call's result {} ms",
            woke.duration_since(sent).as_millis(),
            asked.duration_since(woke).as_millis(),
            tool.duration_since(sent).as_millis(),
        );
    }
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = up.wait();
}

/// The tool results in a request's conversation.
fn results(request: &Request) -> usize {
    model::tool_results(request.body["messages"].as_array().map_or(&[][..], |m| m)).len()
}

/// `up`'s log, read as it comes.
struct Log {
    lines: mpsc::Receiver<(Instant, String)>,
    seen: Vec<(Instant, String)>,
}

impl Log {
    /// When the first line not waited for before that holds every one of
    /// `needles` arrived.
    fn wait(&mut self, needles: &[&str]) -> Instant {
        let holds = |line: &str| needles.iter().all(|n| line.contains(n));
        if let Some(i) = self.seen.iter().position(|(_, l)| holds(l)) {
            return self.seen.remove(i).0;
        }
        let deadline = Instant::now() + WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, line) = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {needles:?} in up's log"));
            if holds(&line) {
                return at;
            }
            self.seen.push((at, line));
        }
    }
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut pending = children(pid);
    while let Some(p) = pending.pop() {
        found.push(p);
        pending.extend(children(p));
    }
    found
}

/// The children of `pid`, from every thread's list.
fn children(pid: u32) -> Vec<u32> {
    let tasks = PathBuf::from(format!("/proc/{pid}/task"));
    std::fs::read_dir(tasks)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| std::fs::read_to_string(e.path().join("children")).ok())
                .flat_map(|text| {
                    text.split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .collect::<Vec<u32>>()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A field of `/proc/PID/status`.
fn status_field(pid: u32, name: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_default()
        .to_owned()
}

/// The process's name.
fn name(pid: u32) -> String {
    status_field(pid, "Name:")
}

/// Its resident memory now, in KiB.
fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap_or(0)
}
