//! The harnesses' figures in docs/performance.md, inside `up`: per
//! harness, launch to `role.claimed`, peak RSS and the time a stop adds
//! beyond its wait. Not a test: it measures, prints, and fails only when
//! it cannot measure.
//!
//! ```sh
//! cargo build -p mosaic-app --bin mosaic-bus
//! cargo run -p mosaic-app --example harness_figures [-- RUNS]
//! ```
//!
//! Each run is `mosaic-bus up` over `examples/claude-team.json` (lead on
//! Claude Code, dev on pi, sandboxed when bubblewrap is there, `"network":
//! "proxy"`), with the model's `baseUrl` at the scripted model of
//! `app/tests/support/model.rs` and a key per agent, the real programs
//! from `tests/node_modules/.bin` (`.ci/harness-deps`) on `PATH`, and
//! `MOSAIC_HOOK_WAIT_MS=2000` passed to both (`"env"`). Each agent claims
//! its role, ends its turn, and its loop (Claude Code's Stop hook, pi's
//! extension) waits 2 s for a change, gets none, and the harness exits:
//! its run sleeps (`"idle": "exit"`), and once both do, `up` is stopped.
//! - launch: from `up`'s first line (its runs bound and started) to the
//!   model's receiving the `role_claim` result;
//! - RSS: the largest VmHWM among the agent's processes but the sandbox's
//!   own (`bwrap`, `mosaic-bus`), read while it waits at its stop;
//! - stop: from the model's answer that ends the turn to `up`'s logging
//!   that the agent's program ended, less the 2 s wait: for Claude Code the Stop hook
//!   (`sh`, `mosaic-bus call inbox`, then `changes`), for pi the
//!   extension's `changes`, then the harness's exit.

#[path = "../tests/support/model.rs"]
mod model;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use model::{Model, Step};
use serde_json::{json, Value};

/// How long a stop waits for a change.
const WAIT_MS: u64 = 2000;

/// The bound on each run.
const WITHIN: Duration = Duration::from_secs(120);

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(3, |n| n.parse().expect("RUNS is a number"));
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
    for run in 1..=runs {
        for line in measure(&bin, &harnesses, app) {
            println!("run {run}: {line}");
        }
    }
}

/// One run of `up`: a line of figures per harness.
fn measure(bin: &Path, harnesses: &Path, app: &Path) -> Vec<String> {
    let script = |prefix: &str| {
        vec![
            Step::tool(&format!("{prefix}role_claim"), json!({})),
            Step::text("Claimed."),
        ]
    };
    let model = Model::start(vec![
        ("lead", "key-lead", script("mcp__mosaic-bus__")),
        ("dev", "key-dev", script("")),
    ]);
    let dir = tempfile::tempdir().expect("a folder");
    let root = tempfile::tempdir().expect("a data root");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let home = tempfile::tempdir().expect("a home");
    let text = std::fs::read_to_string(app.join("../examples/claude-team.json")).expect("example");
    let mut config: Value = serde_json::from_str(&text).expect("JSON");
    for agent in config["agents"].as_array_mut().expect("agents") {
        let role = agent["role"].as_str().expect("a role").to_uppercase();
        agent["model"]["baseUrl"] = json!(model.base_url());
        agent["model"]["keyEnv"] = json!(format!("FIGURES_{role}_KEY"));
        agent["env"] = json!(["MOSAIC_HOOK_WAIT_MS"]);
    }
    let path = dir.path().join("team.json");
    std::fs::write(&path, config.to_string()).expect("write the config");
    let mut search = harnesses.as_os_str().to_owned();
    search.push(":");
    search.push(std::env::var_os("PATH").unwrap_or_default());
    let mut up = Command::new(bin)
        .arg("up")
        .arg("--config")
        .arg(&path)
        .arg("--data-root")
        .arg(root.path())
        .env("PATH", search)
        .env("HOME", home.path())
        .env("FIGURES_LEAD_KEY", "key-lead")
        .env("FIGURES_DEV_KEY", "key-dev")
        .env("MOSAIC_HOOK_WAIT_MS", WAIT_MS.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start up");
    // up's log lines, each with when it arrived: the agents' exits.
    let stderr = up.stderr.take().expect("stderr");
    let (send, exits) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            let ended = line.contains("the agent's program ended");
            if let Some(run) = line
                .split("run=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .filter(|_| ended)
            {
                let _ = send.send((run.to_owned(), Instant::now(), line.clone()));
            }
        }
    });
    let mut first = String::new();
    BufReader::new(up.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("up's first line");
    let launched = Instant::now();
    let summary: Value = serde_json::from_str(&first).expect("up's first line is JSON");
    let agents: Vec<(String, String, String, u32)> = summary["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| {
            let text = |k: &str| a[k].as_str().expect("a text").to_owned();
            let pid = a["pid"].as_u64().expect("a pid");
            (
                text("role"),
                text("run"),
                text("harness"),
                u32::try_from(pid).expect("a pid"),
            )
        })
        .collect();
    // Each agent's turn ended (its second request); its processes then
    // wait at the stop, at their peak.
    let requests = model.wait("both turns ended", WITHIN, |requests| {
        ["lead", "dev"].iter().all(|agent| {
            requests
                .iter()
                .filter(|r| r.is_message() && r.agent.as_deref() == Some(*agent))
                .any(|r| r.body["messages"].as_array().map_or(0, Vec::len) >= 3)
        })
    });
    let rss: HashMap<String, u64> = agents
        .iter()
        .map(|(_, run, _, pid)| (run.clone(), peak_rss_kib(*pid)))
        .collect();
    let mut exited = HashMap::new();
    while exited.len() < agents.len() {
        let (run, at, _) = exits.recv_timeout(WITHIN).expect("the agents exit");
        exited.insert(run, at);
    }
    // Both sleep: nothing is left to measure.
    let _ = Command::new("kill")
        .args(["-TERM", &up.id().to_string()])
        .status();
    let status = up.wait().expect("up's exit");
    assert!(status.success(), "up: {status}");
    agents
        .iter()
        .map(|(role, run, harness, _)| {
            let mine: Vec<_> = requests
                .iter()
                .filter(|r| r.is_message() && r.agent.as_deref() == Some(role.as_str()))
                .collect();
            let claimed = mine
                .iter()
                .find(|r| r.body["messages"].as_array().map_or(0, Vec::len) >= 3)
                .expect("the claim's result")
                .at;
            let last = mine.last().expect("a request").at;
            let stop = exited[run]
                .duration_since(last)
                .saturating_sub(Duration::from_millis(WAIT_MS));
            format!(
                "{harness}: launch to role claimed {} ms; peak RSS {} MiB; a stop {} ms beyond its {WAIT_MS} ms wait",
                claimed.duration_since(launched).as_millis(),
                rss[run] / 1024,
                stop.as_millis()
            )
        })
        .collect()
}

/// The largest VmHWM (KiB) among `pid`'s descendants, the sandbox's own
/// processes left out.
fn peak_rss_kib(pid: u32) -> u64 {
    let mut peak = 0;
    let mut pending = vec![pid];
    while let Some(pid) = pending.pop() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_owned()
        };
        let name = field("Name:");
        let hwm: u64 = field("VmHWM:")
            .trim_end_matches(" kB")
            .trim()
            .parse()
            .unwrap_or(0);
        if !["bwrap", "mosaic-bus"].contains(&name.as_str()) {
            peak = peak.max(hwm);
        }
        pending.extend(children(pid));
    }
    peak
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
