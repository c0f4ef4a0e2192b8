//! Idle costs nothing: under the real `up`, in real bwrap sandboxes, a
//! harness agent (the real Claude Code or pi, against the scripted model
//! of `support/model.rs`) with nothing left ends its program, and a
//! message to its role starts it again in the same run, its conversation
//! resumed and the message as its prompt. The message comes from dev, an
//! `sh` agent that sends it when the test writes to a fifo, once `up` has
//! said lead sleeps.
//!
//! Nothing sleeps to synchronise: the test waits on `up`'s log lines, on
//! the requests the model records and on the fifo, each bounded.

#[path = "support/mod.rs"]
mod support;

#[path = "support/model.rs"]
mod model;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use model::{harness_bin, Model, Request, Step};
use serde_json::{json, Value};
use support::procs::descendants_named;
use support::{data_root, BIN};

/// The bound on each wait: a harness starts in seconds, idles for the
/// hook's 10 s, and a loaded 2-core machine is slow.
const FLOW: Duration = Duration::from_secs(120);

/// A running `up`, its stderr read line by line on a thread.
struct Up {
    child: Child,
    summary: Value,
    stderr: mpsc::Receiver<String>,
    /// Every stderr line read so far.
    log: Vec<String>,
}

impl Up {
    /// `up` on `config` and `root`, with `bin` first on `PATH` and the
    /// model's key `key`.
    fn start(config: &Path, root: &Path, bin: &Path, home: &Path, key: &str) -> Up {
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = Command::new(BIN)
            .arg("up")
            .arg("--config")
            .arg(config)
            .arg("--data-root")
            .arg(root)
            .env("PATH", path)
            .env("HOME", home)
            .env("ANTHROPIC_API_KEY", key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn up");
        let (first, stderr) = (mpsc::channel(), mpsc::channel());
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = first
                .0
                .send(lines.next().and_then(Result::ok).unwrap_or_default());
            lines.for_each(drop);
        });
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if stderr.0.send(line).is_err() {
                    return;
                }
            }
        });
        let line = first.1.recv_timeout(FLOW).expect("up's first line");
        let summary = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        Up {
            child,
            summary,
            stderr: stderr.1,
            log: Vec::new(),
        }
    }

    /// The run of `role`.
    fn run_of(&self, role: &str) -> String {
        self.summary["agents"]
            .as_array()
            .unwrap_or_else(|| panic!("agents in {}", self.summary))
            .iter()
            .find(|a| a["role"] == role)
            .and_then(|a| a["run"].as_str())
            .unwrap_or_else(|| panic!("{role} in {}", self.summary))
            .to_owned()
    }

    /// Waits for the `n`th stderr line (counting those read before) that
    /// holds every one of `needles`; that line.
    #[track_caller]
    fn nth_line(&mut self, n: usize, needles: &[&str]) -> String {
        let holds = |line: &String| needles.iter().all(|needle| line.contains(needle));
        let deadline = Instant::now() + FLOW;
        while self.log.iter().filter(|l| holds(l)).count() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => self.log.push(line),
                Err(_) => panic!(
                    "{needles:?} #{n} not within {FLOW:?}:\n{}",
                    self.log.join("\n")
                ),
            }
        }
        self.log
            .iter()
            .filter(|l| holds(l))
            .nth(n - 1)
            .cloned()
            .unwrap_or_default()
    }

    /// Stops `up` and waits for it.
    fn stop(mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("stop up");
        let (done, exited) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(self.child.wait());
        });
        if exited.recv_timeout(FLOW).is_err() {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("up did not stop within {FLOW:?}");
        }
    }
}

/// A new fifo at `path`.
fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Writes one line to the fifo at `path`, within [`FLOW`] (once dev holds
/// it open): each line is one message dev sends to lead.
fn poke(path: &Path) {
    let (done, written) = mpsc::channel();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let _ = done.send(std::fs::write(&path, "go\n"));
    });
    written
        .recv_timeout(FLOW)
        .expect("dev read its fifo")
        .expect("write the fifo");
}

/// The team: lead on `harness` (the real program on `PATH`) with the model
/// at `base_url`, and dev, an `sh` agent that claims and then, for each
/// line it reads from the fifo `go` (held open for reading and writing, so
/// no line is lost between two writers), sends lead a message numbered by
/// the line's count, recording each answer in `out/sent`.
fn team(dir: &Path, harness: &str, base_url: &str, out: &Path) -> PathBuf {
    let go = out.join("go");
    mkfifo(&go);
    let dev = format!(
        "read _ && mosaic-bus call role.claim >/dev/null && n=0 && exec 3<> {go} && \
         while read _ <&3; do n=$((n + 1)); \
           mosaic-bus call message.send \"{{\\\"to\\\":\\\"lead\\\",\\\"body\\\":\\\"Wake up, $n.\\\"}}\" \
             >> {out}/sent; done",
        go = go.display(),
        out = out.display()
    );
    let roles = json!({"authority": {"withinRole": ["message.send"], "crossRole": []}});
    let config = json!({"sandbox": "required",
    "business": {"id": "x", "human": "alice",
                 "arbiters": {"technical": "lead", "delivery": "lead"},
                 "roles": {"lead": roles, "dev": roles}},
    "agents": [
        {"role": "lead", "harness": harness, "prompt": "Claim your role, then wait.",
         "model": {"api": "anthropic", "baseUrl": base_url, "keyEnv": "ANTHROPIC_API_KEY"}},
        {"role": "dev", "harness": "pi", "write": [out], "command": ["sh", "-c", dev]}
    ]});
    let path = dir.join("team.json");
    std::fs::write(&path, config.to_string()).expect("write the config");
    path
}

/// lead's script: claim, wait for a message, take delivery, then end its
/// turns; `tool` is how its harness names a bus tool.
fn lead_script(tool: fn(&str) -> String) -> Vec<Step> {
    vec![
        Step::tool(&tool("role_claim"), json!({})),
        Step::wait_for("message.sent"),
        Step::tool(&tool("message_receive"), json!({})),
        Step::text("Received."),
    ]
}

/// Whether a request of lead's holds its whole conversation: the claim's
/// result, the wake-up that named the message, and the delivery's result.
fn resumed(request: &Request) -> bool {
    let messages = request.body["messages"].as_array().map_or(&[][..], |m| m);
    let results = model::tool_results(messages);
    let text = request.body["messages"].to_string();
    request.agent.as_deref() == Some("lead")
        && results.first().is_some_and(|r| r["status"] == "claimed")
        && results.len() >= 2
        && text.contains("while you were idle: message.sent")
}

/// lead sleeps with no harness process, dev's message wakes it in the same
/// run with its conversation, and it sleeps again.
fn sleeps_and_wakes(harness: &str, comm: &str, tool: fn(&str) -> String) {
    let bin = harness_bin();
    let model = Model::start_shared(
        "sk-wake-test",
        vec![("lead", &tool("role_claim"), lead_script(tool))],
    );
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    let home = tempfile::tempdir().expect("home");
    let root = data_root();
    let config = team(dir.path(), harness, &model.base_url(), out.path());
    let mut up = Up::start(&config, root.path(), &bin, home.path(), "sk-wake-test");
    let lead = up.run_of("lead");
    let run = format!("run=\"{lead}\"");
    // lead claims, finds nothing, and its program ends: the run sleeps.
    up.nth_line(1, &["the agent is idle", &run]);
    let claimed = model.requests();
    assert!(
        claimed.iter().any(|r| r.agent.as_deref() == Some("lead")),
        "lead asked its model"
    );
    let pid = up.child.id();
    assert_eq!(
        descendants_named(pid, comm),
        Vec::<u32>::new(),
        "no {harness} process while lead sleeps"
    );
    // dev's message wakes it in the same run, its conversation resumed.
    poke(&out.path().join("go"));
    let woke = up.nth_line(1, &["work arrived", &run]);
    assert!(woke.contains("conversation resumed"), "{woke}");
    let requests = model.wait("lead resumed and took delivery", FLOW, |requests| {
        requests.iter().any(resumed)
    });
    let delivered = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some("lead"))
        .find_map(|r| {
            let messages = r.body["messages"].as_array()?;
            model::tool_results(messages).get(1).cloned()
        })
        .expect("the delivery's result");
    let sent = std::fs::read_to_string(out.path().join("sent")).expect("dev's send");
    let sent: Value = serde_json::from_str(sent.lines().next().expect("a line")).expect("JSON");
    let id = sent["result"]["id"].as_str().expect("the message's id");
    assert!(delivered.to_string().contains(id), "{id} in {delivered}");
    // Nothing left again: it sleeps again, in the same run, with no new
    // launch.
    up.nth_line(2, &["the agent is idle", &run]);
    assert!(
        !up.log.iter().any(|l| l.contains("a new run starts")),
        "{}",
        up.log.join("\n")
    );
    up.stop();
}

#[test]
fn an_idle_claude_code_ends_and_a_message_wakes_it_in_its_run_with_its_conversation() {
    sleeps_and_wakes("claude-code", "claude.exe", |verb| {
        format!("mcp__mosaic-bus__{verb}")
    });
}

#[test]
fn an_idle_pi_ends_and_a_message_wakes_it_in_its_run_with_its_session() {
    sleeps_and_wakes("pi", "node", str::to_owned);
}

/// A stand-in for Claude Code that runs the real Stop hook `up` wrote
/// for it, as Claude Code does: at its first start it claims its role;
/// each start records its prompt (its last argument) into `OUT/prompts`,
/// then calls the hook (each wait 1 s) until it lets the agent stop,
/// recording each reason the hook blocked with, and exits 0.
const FAKE_CLAUDE: &str = r#"#!/bin/sh
set -u
[ "${1:-}" = --version ] && { echo "9.9.9 (Fake)"; exit 0; }
settings=''
resumed=no
last=''
for a in "$@"; do
  case $a in
    --settings=*) settings=${a#--settings=} ;;
    --continue) resumed=yes ;;
  esac
  last=$a
done
[ $resumed = yes ] || mosaic-bus call role.claim >/dev/null || exit 3
printf 'start %s\n' "$last" >> "$OUT/prompts"
hook=$(sed -n 's/.*"command":"sh '"'"'\([^'"'"']*\)'"'"'".*/\1/p' "$settings")
while :; do
  reason=$(printf '%s' '{"hook_event_name":"Stop"}' | MOSAIC_HOOK_WAIT_MS=1000 sh "$hook") || exit 4
  [ -n "$reason" ] || exit 0
  printf 'hook %s\n' "$reason" >> "$OUT/prompts"
done
"#;

#[test]
fn across_twenty_sleeps_and_wakes_every_message_reaches_the_agent_exactly_once() {
    const CYCLES: usize = 20;
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    // lead's own, apart from dev's: writable grants may not overlap.
    let records = tempfile::tempdir().expect("records");
    let home = tempfile::tempdir().expect("home");
    let root = data_root();
    let fake = dir.path().join("fake-claude");
    std::fs::write(
        &fake,
        FAKE_CLAUDE.replace("$OUT", &records.path().to_string_lossy()),
    )
    .expect("write the fake");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let config = team(
        dir.path(),
        "claude-code",
        "http://127.0.0.1:47321",
        out.path(),
    );
    // lead is the stand-in, which may write its records.
    let mut team_config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("the config")).expect("JSON");
    team_config["agents"][0]["program"] = json!(fake);
    team_config["agents"][0]["write"] = json!([records.path()]);
    std::fs::write(&config, team_config.to_string()).expect("write the config");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir bin");
    let mut up = Up::start(&config, root.path(), &bin, home.path(), "sk-unused");
    let run = format!("run=\"{}\"", up.run_of("lead"));
    let go = out.path().join("go");
    // Each cycle: lead asleep, one message wakes it; a second comes while
    // it is awake or asleep again, whichever the race gives.
    for cycle in 1..=CYCLES {
        up.nth_line(cycle, &["the agent is idle", &run]);
        poke(&go);
        poke(&go);
    }
    let sent = |text: String| -> Vec<String> {
        text.lines()
            .map(|l| {
                let answer: Value = serde_json::from_str(l).expect("JSON");
                answer["result"]["id"].as_str().expect("an id").to_owned()
            })
            .collect()
    };
    // Polled with a short pause, bounded: dev's last sends and lead's last
    // deliveries are lines of files they write.
    let started = Instant::now();
    let (sent, prompts) = loop {
        let ids = sent(std::fs::read_to_string(out.path().join("sent")).unwrap_or_default());
        let text = std::fs::read_to_string(records.path().join("prompts")).unwrap_or_default();
        if ids.len() == 2 * CYCLES && ids.iter().all(|id| text.contains(id.as_str())) {
            break (ids, text);
        }
        assert!(
            started.elapsed() < FLOW,
            "not every message sent and delivered within {FLOW:?}: {} sent\n{text}",
            ids.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Then lead sleeps once more: nothing is left to deliver twice.
    up.nth_line(CYCLES + 1, &["the agent is idle", &run]);
    let prompts = std::fs::read_to_string(records.path().join("prompts")).unwrap_or(prompts);
    assert_eq!(sent.len(), 2 * CYCLES, "{prompts}");
    for id in &sent {
        assert_eq!(
            prompts.matches(id.as_str()).count(),
            1,
            "{id} once in:\n{prompts}"
        );
    }
    let woken = prompts
        .lines()
        .filter(|l| l.starts_with("start mosaic-bus: work arrived for run "))
        .count();
    assert!(woken >= CYCLES, "{woken} wakes:\n{prompts}");
    assert!(
        !up.log.iter().any(|l| l.contains("a new run starts")),
        "{}",
        up.log.join("\n")
    );
    up.stop();
}
