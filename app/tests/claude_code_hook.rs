//! The Claude Code Stop hook `harness/claude-code/stop-hook.sh` (which
//! `up` writes into a Claude Code agent's run folder), run as the
//! real script with real hook input (the JSON Claude Code writes on its
//! stdin) against a real `mosaic-bus broker` child over its socket.
//!
//! Nothing sleeps to synchronise: the hook saves its cursor in one run and
//! the next run waits from it, so a message sent between two runs, or while
//! a run waits, lies after the saved cursor either way. Every hook run is
//! bounded by [`WAIT`]; a run that waits 120 s for a message must end well
//! before that, woken by the message.

#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{acme, config, data_root, launch, Agent, Broker, BIN, WAIT};

/// The hook as `up` embeds it.
fn hook_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../harness/claude-code/stop-hook.sh")
}

/// How the hook finds its capability.
#[derive(Clone, Copy)]
enum Cap {
    /// On descriptor 3, named by `MOSAIC_BUS_CAP_FD`, as `mosaic-bus up`
    /// hands it to an agent (and so to the hooks its harness runs).
    Fd,
    /// In the private file named by `MOSAIC_BUS_CAP_FILE`.
    File,
}

/// One agent run with the hook installed: its broker, its capability in a
/// private file and the hook's state folder.
struct HookedRun {
    run: String,
    socket: PathBuf,
    cap_file: PathBuf,
    state: PathBuf,
    /// Holds the capability file, the state folder and the transcript.
    home: tempfile::TempDir,
    /// The feed's cursor at launch, as `up` gives it (`MOSAIC_BUS_SINCE`).
    since: Option<String>,
    /// What idling does (`MOSAIC_BUS_IDLE`), when set.
    idle: Option<&'static str>,
}

impl HookedRun {
    fn new(broker: &Broker, run: &str) -> HookedRun {
        let home = tempfile::tempdir().expect("a home");
        let cap_file = home.path().join("cap");
        std::fs::write(&cap_file, format!("{}\n", broker.cap(run))).expect("write the cap");
        std::fs::set_permissions(&cap_file, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 0600");
        HookedRun {
            run: run.to_owned(),
            socket: broker.socket.clone(),
            cap_file,
            state: home.path().join("state/mosaic-bus/stop-hook"),
            home,
            since: None,
            idle: None,
        }
    }

    fn cursor_file(&self) -> PathBuf {
        self.state.join(format!("{}.cursor", self.run))
    }

    /// The saved cursor.
    #[track_caller]
    fn saved_cursor(&self) -> u64 {
        let text = std::fs::read_to_string(self.cursor_file()).expect("a saved cursor");
        text.strip_suffix('\n')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a cursor line: {text:?}"))
    }

    /// The Stop input Claude Code writes on the hook's stdin.
    fn input(&self, event: &str, stop_hook_active: bool) -> Value {
        json!({
            "session_id": "2f6d1c1e-5b8a-4a8e-9a43-6b2f1a7c0d11",
            "transcript_path": self.home.path().join("transcript.jsonl"),
            "cwd": self.home.path(),
            "permission_mode": "default",
            "hook_event_name": event,
            "stop_hook_active": stop_hook_active,
            "last_assistant_message": "I have pushed the \"login\" fix; nothing else to do.",
        })
    }

    /// Starts the hook with `input` on its stdin, waiting `wait_ms` for a
    /// change; `wait` collects it.
    fn start(&self, input: &Value, wait_ms: u64, cap: Cap) -> Running {
        let bin_dir = Path::new(BIN).parent().expect("the binary's folder");
        let mut command = Command::new("sh");
        command
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
            .env("HOME", self.home.path())
            .env("MOSAIC_RUN_ID", &self.run)
            .env("MOSAIC_BUS_SOCKET", &self.socket)
            .env("MOSAIC_HOOK_WAIT_MS", wait_ms.to_string())
            .env("MOSAIC_HOOK_STATE_DIR", &self.state)
            .current_dir(self.home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(since) = &self.since {
            command.env("MOSAIC_BUS_SINCE", since);
        }
        if let Some(idle) = self.idle {
            command.env("MOSAIC_BUS_IDLE", idle);
        }
        match cap {
            // The shell opens the file on descriptor 3 for the hook only.
            Cap::Fd => command
                .args(["-c", r#"exec sh "$0" 3<"$1""#])
                .arg(hook_script())
                .arg(&self.cap_file)
                .env("MOSAIC_BUS_CAP_FD", "3"),
            Cap::File => command
                .arg(hook_script())
                .env("MOSAIC_BUS_CAP_FILE", &self.cap_file),
        };
        let mut child = command.spawn().expect("spawn the hook");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(input.to_string().as_bytes())
            .expect("write the hook input");
        drop(stdin);
        let pid = child.id();
        let (send, output) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(child.wait_with_output().expect("wait for the hook"));
        });
        Running {
            pid,
            output,
            started: Instant::now(),
        }
    }

    /// Runs the hook to its end.
    fn stop(&self, input: &Value, wait_ms: u64, cap: Cap) -> Ended {
        self.start(input, wait_ms, cap).wait()
    }
}

/// A hook run under way.
struct Running {
    pid: u32,
    output: mpsc::Receiver<Output>,
    started: Instant,
}

/// How a hook run ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Running {
    /// Its exit, within [`WAIT`] (killed and failed after that).
    fn wait(self) -> Ended {
        match self.output.recv_timeout(WAIT) {
            Ok(out) => Ended {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                took: self.started.elapsed(),
            },
            Err(_) => {
                let _ = Command::new("kill")
                    .args(["-KILL", &self.pid.to_string()])
                    .status();
                panic!("the hook did not end within {WAIT:?}");
            }
        }
    }
}

impl Ended {
    /// It let the agent stop: exit 0, nothing on stdout or stderr.
    #[track_caller]
    fn let_stop(&self) {
        assert_eq!(
            (self.code, self.stdout.as_str(), self.stderr.as_str()),
            (Some(0), "", ""),
            "the hook let the agent stop"
        );
    }

    /// It blocked the stop: exit 0 and exactly `{"decision":"block",
    /// "reason":...}` on stdout; returns the reason.
    #[track_caller]
    fn blocked(&self) -> String {
        assert_eq!(self.code, Some(0), "stderr: {}", self.stderr);
        assert_eq!(self.stderr, "");
        let line = self
            .stdout
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("one line: {:?}", self.stdout));
        assert!(!line.contains('\n'), "one line: {line}");
        let answer: Value = serde_json::from_str(line).expect("JSON on stdout");
        let reason = answer["reason"].as_str().expect("a reason").to_owned();
        assert_eq!(answer, json!({"decision": "block", "reason": reason}));
        reason
    }

    /// It failed with `code` on stderr, exit 1 and nothing on stdout, so
    /// the agent stops.
    #[track_caller]
    fn refused(&self, code: &str) {
        assert_eq!(
            (self.code, self.stdout.as_str(), self.stderr.as_str()),
            (
                Some(1),
                "",
                format!("mosaic-bus stop hook: {code}\n").as_str()
            ),
        );
    }
}

/// acme with a dev (the agent with the hook), a lead that writes to it and
/// a qa that is never claimed.
fn boot(root: &Path) -> (Broker, Agent, Agent) {
    let launches = [
        launch("acme", "dev", "dev-1"),
        launch("acme", "lead", "lead-1"),
        launch("acme", "qa", "qa-1"),
    ];
    let broker = Broker::boot(root, &config(root, &[acme()], &launches, &["acme"]));
    let (dev, lead) = (broker.agent("dev-1"), broker.agent("lead-1"));
    dev.claim();
    lead.claim();
    (broker, dev, lead)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn a_message_to_the_agents_role_after_its_saved_cursor_blocks_the_stop() {
    let root = data_root();
    let (broker, dev, lead) = boot(root.path());
    let agent = HookedRun::new(&broker, "dev-1");

    // The first stop has no saved cursor: it takes the current one, keeps
    // it in a private file of its own run, waits and lets the agent stop.
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::Fd)
        .let_stop();
    assert_eq!(mode(&agent.state), 0o700);
    assert_eq!(mode(&agent.cursor_file()), 0o600);
    let saved = agent.saved_cursor();

    // A stop that waits up to 120 s is woken by a message to its role.
    let waiting = agent.start(&agent.input("Stop", false), 120_000, Cap::Fd);
    let id = lead.send("dev", "Please rebase the login fix on main.", json!({}));
    let id = id.as_str().expect("a message id");
    // `wait` fails the test after WAIT (20 s): the message woke the hook.
    let reason = waiting.wait().blocked();
    assert_eq!(
        reason,
        format!(
            "mosaic-bus: work arrived for run dev-1: message.sent {id}. Call the mosaic-bus \
             tools: message_receive takes delivery of your new messages (then message_read \
             each one); then carry on. When you stop again, this hook waits for more."
        )
    );
    let after = agent.saved_cursor();
    assert!(after > saved, "{after} > {saved}");

    // The pointer leads to the message, through the tool the reason names.
    let received = dev.ok("message.receive", json!({}));
    assert_eq!(received[0]["id"], json!(id), "{received}");
    assert_eq!(received.as_array().map(Vec::len), Some(1), "{received}");

    // Three changes since: a message, and a within-role decision the agent
    // raised and resolved itself (routed to its own role, and its own).
    // Each is named, each kind with its tool.
    let second = lead.send("dev", "And bump the version.", json!({}));
    let raised = dev.raise("repo.push", Some("main"), json!({"choice": "yes"}));
    assert_eq!(raised["route"], "dev", "{raised}");
    let reason = agent
        .stop(&agent.input("Stop", true), 1000, Cap::File)
        .blocked();
    assert_eq!(
        reason,
        format!(
            "mosaic-bus: work arrived for run dev-1: message.sent {second}; decision.raised \
             {decision}; decision.resolved {decision}. Call the mosaic-bus tools: \
             message_receive takes delivery of your new messages (then message_read each one); \
             inbox lists the open decisions routed to you; trail with the decision id as subject \
             shows what happened to it; then carry on. When you stop again, this hook waits for \
             more.",
            second = second.as_str().expect("an id"),
            decision = raised["id"].as_str().expect("an id"),
        )
    );
    let after = agent.saved_cursor();

    // Claude Code continues, and at its next stop (stop_hook_active: true)
    // nothing is announced again: the hook lets the agent stop.
    agent
        .stop(&agent.input("Stop", true), 1000, Cap::File)
        .let_stop();
    assert!(agent.saved_cursor() >= after);
    broker.close();
}

#[test]
fn with_nothing_for_the_agent_the_hook_waits_then_lets_it_stop() {
    let root = data_root();
    let (broker, _dev, lead) = boot(root.path());
    let agent = HookedRun::new(&broker, "dev-1");
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .let_stop();
    let saved = agent.saved_cursor();

    // Work for another role is not the agent's: it lies after the cursor
    // but does not concern dev.
    lead.send("qa", "Please test the login fix.", json!({}));
    let ended = agent.stop(&agent.input("Stop", false), 1000, Cap::File);
    ended.let_stop();
    assert!(
        ended.took >= Duration::from_millis(1000),
        "{:?}",
        ended.took
    );
    assert!(agent.saved_cursor() >= saved);
    broker.close();
}

#[test]
fn at_its_first_stop_the_hook_takes_the_cursor_then_reads_the_inbox_once() {
    let root = data_root();
    let (broker, dev, lead) = boot(root.path());
    let agent = HookedRun::new(&broker, "dev-1");

    // Sent before the run's first stop, so before any cursor of its hook:
    // the inbox holds it, and the hook reads the inbox once.
    lead.send("dev", "Please rebase the login fix on main.", json!({}));
    let reason = agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .blocked();
    assert_eq!(
        reason,
        "mosaic-bus: the inbox of run dev-1 holds 0 open decision(s) and 1 unread message(s). \
         Call the mosaic-bus tools: inbox lists them; message_receive takes delivery of new \
         messages (then message_read each one); then carry on. When you stop again, this hook \
         waits for more."
    );
    let saved = agent.saved_cursor();

    // The agent has not read it yet, but the hook now waits from its
    // cursor: the message is not announced again.
    let ended = agent.stop(&agent.input("Stop", true), 1000, Cap::File);
    ended.let_stop();
    assert!(agent.saved_cursor() >= saved);
    let inbox = dev.ok("inbox", json!({}));
    assert_eq!(inbox.as_array().map(Vec::len), Some(1), "{inbox}");
    broker.close();
}

#[test]
fn the_hook_fails_with_a_static_code_and_never_blocks() {
    let root = data_root();
    let (broker, dev, _lead) = boot(root.path());

    // A run that does not hold its role: the broker's own code.
    let qa = HookedRun::new(&broker, "qa-1");
    qa.stop(&qa.input("Stop", false), 1000, Cap::File)
        .refused("not-holder");

    let agent = HookedRun::new(&broker, "dev-1");
    // Installed on another event: not a Stop.
    agent
        .stop(&agent.input("PreToolUse", false), 1000, Cap::File)
        .refused("bad-request");
    assert!(!agent.state.exists(), "nothing saved");

    // A state folder others can read is refused, and not repaired.
    std::fs::create_dir_all(&agent.state).expect("mkdir");
    std::fs::set_permissions(&agent.state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .refused("unsafe-path");
    assert_eq!(mode(&agent.state), 0o755);
    std::fs::set_permissions(&agent.state, std::fs::Permissions::from_mode(0o700)).expect("chmod");

    // A saved cursor that is not a number, or readable by others.
    std::fs::write(agent.cursor_file(), "12a\n").expect("write");
    std::fs::set_permissions(agent.cursor_file(), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .refused("integrity-failed");
    std::fs::write(agent.cursor_file(), "0\n").expect("write");
    std::fs::set_permissions(agent.cursor_file(), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .refused("unsafe-path");

    // Once the agent released its role, its stop hook lets it stop with
    // the broker's code.
    std::fs::remove_file(agent.cursor_file()).expect("rm");
    dev.ok("role.release", json!({}));
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .refused("not-holder");
    broker.close();
}

/// The cursor of the feed now, as `up` takes it when it binds a run.
fn cursor_now(agent: &Agent) -> u64 {
    agent.ok("changes", json!({}))["cursor"]
        .as_u64()
        .expect("a cursor")
}

#[test]
fn a_resolution_before_the_first_stop_still_wakes_the_agent_from_its_launch_cursor() {
    let root = data_root();
    let (broker, dev, lead) = boot(root.path());
    let mut agent = HookedRun::new(&broker, "dev-1");
    let launched = cursor_now(&dev);
    agent.since = Some(launched.to_string());

    // Between the launch and dev's first stop, dev raises a cross-role
    // merge and its arbiter approves it: nothing is left in dev's inbox.
    let raised = dev.raise("repo.merge", Some("main"), json!({}));
    assert_eq!(raised["route"], "lead", "{raised}");
    lead.resolve(&raised["id"], "yes");
    let inbox = dev.ok("inbox", json!({}));
    assert_eq!(inbox, json!([]), "{inbox}");

    // The first stop, delayed past the resolution, waits from the launch's
    // cursor: the resolution wakes it.
    let reason = agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .blocked();
    let id = raised["id"].as_str().expect("an id");
    assert!(
        reason.contains(&format!("decision.resolved {id}")),
        "{reason}"
    );
    assert!(agent.saved_cursor() > launched);

    // Without the launch's cursor the same first stop takes the current
    // one, and the resolution is lost: the wake-up this cursor keeps.
    let late = HookedRun::new(&broker, "dev-1");
    late.stop(&late.input("Stop", false), 1000, Cap::File)
        .let_stop();

    // A launch cursor that is not a number is refused, not guessed.
    let mut bad = HookedRun::new(&broker, "dev-1");
    bad.since = Some("12a".to_owned());
    bad.stop(&bad.input("Stop", false), 1000, Cap::File)
        .refused("bad-request");
    broker.close();
}

#[test]
fn a_missing_capability_file_is_refused_as_bad_capability() {
    let root = data_root();
    let (broker, _dev, _lead) = boot(root.path());
    let missing = root.path().join("no-such.cap");
    let out = Command::new(BIN)
        .args(["call", "inbox", "--cap-file"])
        .arg(&missing)
        .env_clear()
        .env("MOSAIC_BUS_SOCKET", &broker.socket)
        .output()
        .expect("run call");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"ok\":false,\"error\":\"bad-capability\"}\n"
    );
    // The same through MOSAIC_BUS_CAP_FILE, which `call` reads without a
    // descriptor or --cap-file.
    let out = Command::new(BIN)
        .args(["call", "inbox"])
        .env_clear()
        .env("MOSAIC_BUS_SOCKET", &broker.socket)
        .env("MOSAIC_BUS_CAP_FILE", &missing)
        .output()
        .expect("run call");
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(1), "{\"ok\":false,\"error\":\"bad-capability\"}\n")
    );
    broker.close();
}

#[test]
fn with_idle_wait_the_hook_waits_again_after_each_quiet_wait_until_work_arrives() {
    let root = data_root();
    let (broker, dev, lead) = boot(root.path());
    let mut agent = HookedRun::new(&broker, "dev-1");
    agent.since = Some(cursor_now(&dev).to_string());
    agent.idle = Some("wait");
    // Each wait lasts 1 s: four of them pass with nothing, and the hook is
    // still waiting, where `exit` would have let the agent stop after one
    // (the period shortened, as the 60 s cap it stands for).
    let running = agent.start(&agent.input("Stop", false), 1000, Cap::File);
    assert!(
        running.output.recv_timeout(Duration::from_secs(4)).is_err(),
        "the hook ended after a quiet wait"
    );
    let sent = lead.send("dev", "Here is work, at last.", json!({}));
    let ended = running.wait();
    assert!(ended.took >= Duration::from_secs(4), "{:?}", ended.took);
    let reason = ended.blocked();
    let id = sent.as_str().expect("an id");
    assert!(reason.contains(&format!("message.sent {id}")), "{reason}");
    // An idle mode it does not know is refused, not guessed.
    agent.idle = Some("sleep");
    agent
        .stop(&agent.input("Stop", true), 1000, Cap::File)
        .refused("bad-request");
    broker.close();
}

#[test]
fn a_first_stop_that_finds_the_inbox_full_moves_its_cursor_past_it_so_no_second_wake() {
    let root = data_root();
    let (broker, dev, lead) = boot(root.path());
    let mut agent = HookedRun::new(&broker, "dev-1");
    let launched = cursor_now(&dev);
    agent.since = Some(launched.to_string());
    // After the launch, before the first stop: in the inbox and in the
    // feed after the launch's cursor alike.
    let sent = lead.send("dev", "Please rebase the login fix on main.", json!({}));
    let id = sent.as_str().expect("an id");
    let reason = agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .blocked();
    assert!(
        reason.contains("holds 0 open decision(s) and 1 unread message(s)."),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("The feed also holds: message.sent {id}.")),
        "{reason}"
    );
    assert!(agent.saved_cursor() > launched);
    // The next stop does not wake the agent for it again.
    agent
        .stop(&agent.input("Stop", true), 1000, Cap::File)
        .let_stop();
    broker.close();
}

#[test]
fn started_again_in_its_run_the_hook_waits_from_the_later_of_its_cursor_and_the_launchs() {
    let root = data_root();
    let (broker, dev, lead) = boot(root.path());
    let mut agent = HookedRun::new(&broker, "dev-1");
    agent.since = Some(cursor_now(&dev).to_string());
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .let_stop();
    let saved = agent.saved_cursor();
    // Delivered by `up` as the woken program's prompt: the program starts
    // with the cursor after it, and its hook does not announce it again.
    lead.send("dev", "Delivered as the prompt.", json!({}));
    let after = cursor_now(&dev);
    assert!(after > saved);
    agent.since = Some(after.to_string());
    agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .let_stop();
    assert!(agent.saved_cursor() >= after);
    // A launch cursor behind the saved one does not take the hook back.
    let next = lead.send("dev", "After the wake.", json!({}));
    agent.since = Some(saved.to_string());
    let reason = agent
        .stop(&agent.input("Stop", false), 1000, Cap::File)
        .blocked();
    let id = next.as_str().expect("an id");
    assert!(
        reason.contains(&format!("work arrived for run dev-1: message.sent {id}.")),
        "{reason}"
    );
    broker.close();
}
