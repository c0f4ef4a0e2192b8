//! What each harness agent is doing, in a real terminal: the real console
//! in tmux over a real broker, fed by the same table and feed `up
//! --console` uses ([`Activities`]), through a real FIFO named by
//! `--activity`. The table takes lines shaped as Claude Code's and pi's
//! streams; the screen shows each agent's last tool, "waiting on the
//! feed", an exit, and ages that move while nothing else happens. Then the
//! same under the real `up --console`, with a harness agent played by a
//! fake Claude Code (a `#!/bin/sh` script as `"program"`) that writes its
//! stream.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Instant;

use mosaic_app::commands::up::harness::activity::Activities;
use mosaic_app::commands::up::harness::usage::Stream;

use crate::support::{data_root, up::mkfifo, WAIT};
use crate::{acme_broker, console_command, Tmux, PAUSE};

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/work","session_id":"fc1b","tools":["mcp__mosaic-bus__inbox"],"mcp_servers":[{"name":"mosaic-bus","status":"connected"}],"model":"claude-x","uuid":"c188"}"#;
const TOOL_USE: &str = r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__mosaic-bus__inbox","input":{}}],"stop_reason":null},"session_id":"716b","uuid":"ca98"}"#;
const HOOK_STARTED: &str = r#"{"type":"system","subtype":"hook_started","hook_id":"7bb7","hook_name":"Stop","hook_event":"Stop","uuid":"2eaa","session_id":"716b"}"#;
const PI_START: &str = r#"{"type":"agent_start"}"#;
const PI_TOOL: &str = r#"{"type":"tool_execution_start","toolCallId":"call_1","toolName":"message_send","args":{"to":"lead","body":"hello"}}"#;
const PI_HOSTILE: &str = r#"{"type":"tool_execution_start","toolCallId":"call_2","toolName":"send\u001b[2J\u001b]0;pwned\u0007","args":{}}"#;

#[test]
fn the_console_shows_each_agent_s_last_tool_waiting_on_the_feed_and_its_exit() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (lead, dev) = (b.agent("lead-1"), b.agent("dev-1"));
    lead.claim();
    dev.claim();
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("activity");
    mkfifo(&fifo);
    let activities = Activities::new();
    let feeding = activities.clone();
    let end = fifo.clone();
    let feed = std::thread::spawn(move || {
        let end = std::fs::OpenOptions::new().write(true).open(end)?;
        feeding.feed(end)
    });
    let command = format!(
        "{} --activity {}",
        console_command(&b.socket),
        fifo.display()
    );
    let tmux = Tmux::start(&command, 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    tmux.wait_for("dev · run dev-1 · running", WAIT);

    // lead on Claude Code: a bus tool, then its Stop hook waits.
    activities.observe("lead-1", Stream::ClaudeCode, INIT, Instant::now());
    activities.observe("lead-1", Stream::ClaudeCode, TOOL_USE, Instant::now());
    activities.observe("lead-1", Stream::ClaudeCode, HOOK_STARTED, Instant::now());
    // dev on pi: at work in a tool.
    activities.observe("dev-1", Stream::Pi, PI_START, Instant::now());
    activities.observe("dev-1", Stream::Pi, PI_TOOL, Instant::now());
    tmux.wait_for("lead · run lead-1 · waiting on the feed · pi", WAIT);
    let screen = tmux.wait_for("dev · run dev-1 · working · pi", WAIT);
    assert!(
        screen.contains("the agent's own word: last tool inbox, "),
        "{screen}"
    );
    assert!(
        screen.contains("the agent's own word: last tool message_send, "),
        "{screen}"
    );

    // Nothing else happens, and still the ages move.
    let deadline = Instant::now() + WAIT;
    while tmux
        .screen()
        .unwrap_or_default()
        .contains("waiting on the feed for 0s")
    {
        assert!(Instant::now() < deadline, "the age stays at 0s");
        std::thread::sleep(PAUSE);
    }
    tmux.wait_for("waiting on the feed for ", WAIT);

    // A tool name with escape sequences is a `?`; then dev exits.
    activities.observe("dev-1", Stream::Pi, PI_HOSTILE, Instant::now());
    tmux.wait_for("the agent's own word: last tool ?, ", WAIT);
    activities.exited("dev-1", Some(ExitStatus::from_raw(0)), Instant::now());
    let screen = tmux.wait_for("dev · run dev-1 · EXITED with status 0 · pi", WAIT);
    assert!(screen.contains("· exited "), "{screen}");
    assert!(!screen.contains("pwned"), "{screen}");
    tmux.keys(&["q"]);
    tmux.wait_gone();

    // The console gone, the feed ends at its next write.
    activities.observe("lead-1", Stream::ClaudeCode, TOOL_USE, Instant::now());
    let ended = feed.join().expect("the feed's thread");
    assert_eq!(
        ended.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::BrokenPipe)
    );
    b.close();
}

/// The fake Claude Code of [`up_console_shows_a_harness_agent_s_last_tool_waiting_and_exit`]:
/// its stream says it started, called the bus's `inbox` and entered its
/// Stop hook; it then waits for the test (the FIFO `go` beside it opened
/// and closed), at most 120 s so a failed test leaves nothing behind, and
/// exits 0. Asked its `--version`, it says it and exits.
const FAKE_CLAUDE: &str = r#"#!/bin/sh
[ "${1:-}" = --version ] && { echo "0.0.1 (Fake Code)"; exit 0; }
go=$(dirname "$0")/go
printf '%s\n' '{"type":"system","subtype":"init","cwd":"/","session_id":"s","tools":[],"mcp_servers":[{"name":"mosaic-bus","status":"connected"}]}'
printf '%s\n' '{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__mosaic-bus__inbox","input":{}}]},"session_id":"s"}'
printf '%s\n' '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"[]"}]},"session_id":"s"}'
printf '%s\n' '{"type":"system","subtype":"hook_started","hook_id":"h","hook_name":"Stop","hook_event":"Stop","session_id":"s"}'
timeout 120 cat "$go" > /dev/null
exit 0
"#;

#[test]
fn up_console_shows_a_harness_agent_s_last_tool_waiting_and_exit() {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let program = dir.path().join("fake-claude");
    std::fs::write(&program, FAKE_CLAUDE).expect("write the fake");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let go = dir.path().join("go");
    mkfifo(&go);
    let config = dir.path().join("up.json");
    let text = serde_json::json!({
        "sandbox": "off",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{"role": "a", "harness": "claude-code", "program": program,
                    "prompt": "Claim your role."}],
    });
    std::fs::write(&config, text.to_string()).expect("write config");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir tmp");
    let command = format!(
        "TMPDIR={} {} up --config {} --data-root {} --console; read _",
        tmp.display(),
        crate::support::BIN,
        config.display(),
        root.path().display()
    );
    let tmux = Tmux::start(&command, 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    let screen = tmux.wait_for("· waiting on the feed · claude-code ·", WAIT);
    assert!(
        screen.contains("the agent's own word: last tool inbox, "),
        "{screen}"
    );
    assert!(screen.contains("· waiting on the feed for "), "{screen}");
    // Both ends of the feed open, its FIFO's folder is gone.
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("tmp")
        .map(|e| e.expect("an entry").file_name())
        .filter(|name| name.to_string_lossy().starts_with("up-console-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // Let it go: it exits 0, which the view says at once. The FIFO opened
    // without blocking, again until the fake's `cat` has its end (it may
    // not yet, just after the line), so a fake that is gone fails the
    // test instead of hanging it.
    let deadline = Instant::now() + WAIT;
    let opened = loop {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&go);
        if opened.is_ok() || Instant::now() > deadline {
            break opened;
        }
        std::thread::sleep(PAUSE);
    };
    drop(opened.expect("the fake waits on its FIFO"));
    // Its row says how it ended: its exit, or its run's end once `up`
    // reported it.
    let screen = tmux.wait_for("· claude-code · was pid", WAIT);
    assert!(screen.contains("status 0"), "{screen}");
    assert!(screen.contains("last tool inbox, "), "{screen}");
    tmux.keys(&["q"]);
}
