//! What the tests of the real `up` share (`sandbox`, `network`,
//! `up_reserve`, `disk_full`): its private folders, its first line, its
//! stop and exit, the reader capability's calls and the fifos its agents
//! report through. `.ci/run` also runs these binaries as uid 65534 from
//! `/tmp`, so nothing here needs root or a path of the source tree.
//!
//! Every wait is bounded by [`UP_WAIT`], longer than the broker's own
//! [`super::WAIT`]: `up` starts sandboxed agents, which is slow on a loaded
//! machine.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use super::BIN;

/// The longest `up` may take to print its first line or to exit, and an
/// agent to report: sandboxed starts are slow on two shared cores.
pub const UP_WAIT: Duration = Duration::from_secs(60);

/// The interpreter of the agents' probes.
pub const PYTHON: &str = "/usr/bin/python3";

/// A new folder of mode 0700, as the data root and the secrets folder
/// must be; its path.
pub fn private_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir(dir).expect("mkdir");
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    dir.to_owned()
}

/// A new fifo at `path`.
#[track_caller]
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Whether something opened the fifo at `path` for writing (and closed
/// it) within [`UP_WAIT`]: how an agent says it is done.
pub fn written_within(path: PathBuf) -> bool {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(std::fs::read_to_string(path));
    });
    receive.recv_timeout(UP_WAIT).is_ok()
}

/// `mosaic-bus call VERB ARGS` with the reader capability in the file
/// `cap`; its answer's `result`.
#[track_caller]
pub fn reader_call(socket: &str, cap: &Path, verb: &str, args: Value) -> Value {
    let out = Command::new(BIN)
        .args([
            "call",
            verb,
            &args.to_string(),
            "--socket",
            socket,
            "--cap-file",
        ])
        .arg(cap)
        .stdin(Stdio::null())
        .output()
        .expect("mosaic-bus call");
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{verb}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(answer["ok"], true, "{verb}: {answer}");
    answer["result"].clone()
}

/// The first stdout line of `child`, within [`UP_WAIT`]; stdout is then
/// read to its end on a thread, so `up` never blocks on it.
pub fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = send.send(first);
        lines.for_each(drop);
    });
    receive.recv_timeout(UP_WAIT).expect("a first line from up")
}

/// `up`'s first line, which must be its JSON summary: otherwise `up` is
/// killed and the test fails with the log at `log`.
#[track_caller]
pub fn summary(child: &mut Child, log: &Path) -> Value {
    let first = first_line(child);
    serde_json::from_str(&first).unwrap_or_else(|e| {
        let _ = child.kill();
        let log = std::fs::read_to_string(log).unwrap_or_default();
        panic!("a JSON first line: {e}: {first:?}\n{log}")
    })
}

/// Waits for `child`, killing it after [`UP_WAIT`].
pub fn wait(mut child: Child) -> ExitStatus {
    let pid = rustix::process::Pid::from_child(&child);
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait().expect("wait"));
    });
    receive.recv_timeout(UP_WAIT).unwrap_or_else(|_| {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        panic!("up did not exit within {UP_WAIT:?}");
    })
}

/// Stops `up` (`SIGTERM`, which it answers by stopping its agents and
/// its broker) and waits for its exit as [`wait`] does.
pub fn stop(child: Child) -> ExitStatus {
    // Never reaped yet, so the pid is still `child`'s: the signal cannot
    // miss it, even when it has exited already.
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .expect("stop up");
    wait(child)
}
