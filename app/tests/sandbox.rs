//! The sandbox of `up`, with the real bwrap, the real `up` and the real
//! broker: an agent script tries the detours an agent of the human's user
//! has, and reports what happened; the test reads the broker's evidence
//! through the reader capability while `up --stay` still serves. The same
//! probes with `"sandbox": "off"` are the negative control: they get
//! through, so the probes can see an escape.
//!
//! Outside the sandbox the test plays the human: a private tmux server
//! with a session of its shell (its own `-L` name and `TMUX_TMPDIR`), an
//! abstract Unix socket it serves, a process of its own (the target of
//! `kill` and `ptrace`), and a terminal (a pty) that `up` runs in as its
//! controlling terminal.
//!
//! Run as root by `cargo test -p mosaic-app --test sandbox`, and
//! unprivileged with the same binaries:
//! `setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp
//! TMPDIR=/tmp target/debug/deps/sandbox-<hash>` (docs/host.md). Needs
//! bwrap, tmux and python3 (`.ci/sandbox-deps`).
//!
//! Nothing sleeps: every wait is for a line, a fifo, the end of a process
//! or the answer of a detached CLI, each bounded
//! ([`support::up::UP_WAIT`], or `timeout` in the script).

#[path = "sandbox/config.rs"]
mod config;
#[path = "sandbox/detours.rs"]
mod detours;
#[path = "sandbox/environment.rs"]
mod environment;
#[path = "sandbox/files.rs"]
mod files;
#[path = "sandbox/identity.rs"]
mod identity;
#[path = "sandbox/kernel.rs"]
mod kernel;
#[path = "sandbox/landlock.rs"]
mod landlock;
#[path = "sandbox/mandatory.rs"]
mod mandatory;
#[path = "sandbox/outside.rs"]
mod outside;
#[path = "sandbox/places.rs"]
mod places;
#[path = "sandbox/probe.rs"]
mod probe;
#[path = "sandbox/reach.rs"]
mod reach;
#[path = "sandbox/resources.rs"]
mod resources;
#[path = "sandbox/sockets.rs"]
mod sockets;
#[path = "sandbox/terminal.rs"]
mod terminal;

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use support::up::{first_line, private_dir, reader_call, stop, wait, PYTHON};
use support::BIN;

#[test]
fn a_human_cli_in_another_pid_namespace_is_refused_with_its_reason_logged() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let config = json!({
        "sandbox": "off",
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _"]}],
    });
    let path = work.join("up.json");
    std::fs::write(&path, config.to_string()).expect("write");
    let log_path = work.join("up.log");
    private_dir(&work.join("data"));
    let mut up = Command::new(BIN)
        .args(["up", "--stay", "--config"])
        .arg(&path)
        .arg("--data-root")
        .arg(work.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("spawn up");
    let summary: Value = serde_json::from_str(&first_line(&mut up)).expect("JSON");
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    // The human's own CLI, run from a terminal-less shell of the broker's
    // user, but in a PID namespace of its own (and, for bwrap to make one
    // unprivileged, a user namespace too).
    let mut human = Command::new("bwrap")
        .args(["--unshare-user", "--unshare-pid", "--die-with-parent"])
        .args([
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--",
        ])
        .args([BIN, "human", &socket])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn bwrap");
    std::io::Write::write_all(
        &mut human.stdin.take().expect("stdin"),
        br#"{"business":"x","verb":"message.send","args":{"to":"human","body":"probe"}}"#,
    )
    .expect("write the request");
    let answer = first_line(&mut human);
    let human_status = wait(human);
    // Read with the reader capability while the broker runs: no message
    // reached the human's inbox.
    let reader_cap = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let inbox = reader_call(&socket, &reader_cap, "inbox", json!({}));
    let status = stop(up);
    let log = std::fs::read_to_string(&log_path).expect("log");
    assert_eq!(
        answer, r#"{"error":"human-proof-failed","ok":false}"#,
        "{log}"
    );
    assert_eq!(human_status.code(), Some(1));
    assert_eq!(status.code(), Some(0), "{log}");
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("human proof refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains("reason=\"the peer is in another pid namespace than the broker\""),
        "{log}"
    );
    assert_eq!(inbox, json!([]), "{log}");
}

/// `up` with `config` and `path` as its `PATH`, to its end: exit code,
/// first line, log.
fn run_with_path(config: &Path, work: &Path, path: &str) -> (Option<i32>, String, String) {
    let log_path = work.join("up.log");
    let mut up = Command::new(BIN)
        .args(["up", "--config"])
        .arg(config)
        .arg("--data-root")
        .arg(work.join("data"))
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("spawn up");
    let first = first_line(&mut up);
    let status = wait(up);
    let log = std::fs::read_to_string(&log_path).expect("log");
    (status.code(), first, log)
}

#[test]
fn without_bwrap_required_refuses_and_auto_warns_once_and_runs_unsandboxed() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    private_dir(&work.join("data"));
    let write = |sandbox: &str| {
        let config = json!({
            "sandbox": sandbox,
            "business": {"id": "x", "human": "alice",
                         "arbiters": {"technical": "a", "delivery": "a"},
                         "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
            "agents": [{"role": "a", "harness": "pi", "command": ["/bin/sh", "-c", "read _"]}],
        });
        let path = work.join(format!("{sandbox}.json"));
        std::fs::write(&path, config.to_string()).expect("write");
        path
    };
    // A PATH without bwrap (and without anything else).
    let (code, first, log) = run_with_path(&write("required"), work, "/nonexistent");
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        first, r#"{"error":"sandbox-unavailable","ok":false}"#,
        "{log}"
    );
    let (code, first, log) = run_with_path(&write("auto"), work, "/nonexistent");
    assert_eq!(code, Some(0), "{log}");
    let summary: Value = serde_json::from_str(&first).expect("JSON");
    assert_eq!(summary["agents"][0]["sandboxed"], false);
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("an agent can then act as the human"),
        "{log}"
    );
}

#[test]
fn a_bound_path_that_would_show_the_data_root_is_refused() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    private_dir(&work.join("data"));
    for (key, path) in [
        ("read", work.join("data")),
        ("write", work.to_path_buf()),
        ("workdir", work.join("data")),
    ] {
        let mut agent =
            json!({"role": "a", "harness": "pi", "command": ["/bin/sh", "-c", "read _"]});
        agent[key] = if key == "workdir" {
            json!(path)
        } else {
            json!([path])
        };
        let config = json!({
            "sandbox": "required",
            "business": {"id": "x", "human": "alice",
                         "arbiters": {"technical": "a", "delivery": "a"},
                         "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
            "agents": [agent],
        });
        let dir = work.join(format!("team-{key}"));
        std::fs::create_dir(&dir).expect("mkdir");
        let file = dir.join("up.json");
        std::fs::write(&file, config.to_string()).expect("write");
        let path = std::env::var("PATH").expect("PATH");
        let (code, first, log) = run_with_path(&file, work, &path);
        assert_eq!(code, Some(2), "{key}: {log}");
        assert_eq!(
            first, r#"{"error":"unsafe-path","ok":false,"role":"a"}"#,
            "{key}: {log}"
        );
    }
}
