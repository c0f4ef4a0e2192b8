//! The detached launcher: a command started by `setsid -f` under a small
//! wrapper, so neither the test process nor its ancestors are ever in the
//! command's ancestry, and whatever run markers they carry, the human
//! proof sees only what the test starts.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mosaic_app::runtime::human_proof::NONCE_ENV;
use serde_json::{json, Value};

use super::{wait_for, WAIT};

/// The wrapper [`detached`] runs: it starts `"$@"` in the background with
/// the wrapper's stdin (an explicit redirection, since a background command
/// of a non-interactive shell otherwise reads `/dev/null`), prints its pid
/// on stderr, waits for it and prints `exit N`.
const WRAPPER: &str = r#"exec 3<&0
"$@" <&3 3<&- 2>/dev/null &
echo "$!" >&2
exec 3<&-
wait "$!"
echo "exit $?" >&2"#;

/// `setsid -f` running [`WRAPPER`] with an empty environment: append the
/// command to run (its program, then its arguments). `setsid -f` forks
/// and its first process exits, so the wrapper is reparented to pid 1 (or
/// the nearest subreaper) and neither this test process nor its ancestors
/// are ever in the command's ancestry: whatever run markers they carry,
/// the proof sees only what the test starts.
pub fn detached() -> Command {
    let mut command = Command::new("setsid");
    command
        .args(["-f", "/bin/sh", "-c", WRAPPER, "detached"])
        .env_clear();
    command
}

/// What one CLI run printed and how it exited.
#[derive(Debug)]
pub struct Outcome {
    /// The exit code.
    pub code: i32,
    /// The one stdout line, parsed.
    pub reply: Value,
}

impl Outcome {
    /// Exit 0 and `{"ok":true,"result":…}`; the result.
    #[track_caller]
    pub fn ok(&self) -> Value {
        assert_eq!(self.code, 0, "{self:?}");
        assert_eq!(self.reply["ok"], json!(true), "{self:?}");
        let keys = self.reply.as_object().map(|o| o.len());
        assert_eq!(keys, Some(2), "{self:?}");
        self.reply["result"].clone()
    }

    /// Exactly `{"ok":false,"error":code}` with exit `exit`.
    #[track_caller]
    pub fn refused(&self, code: &str, exit: i32) {
        assert_eq!(
            (&self.reply, self.code),
            (&json!({"ok": false, "error": code}), exit),
            "{self:?}"
        );
    }
}

/// A started [`detached`] command that has not been given its stdin yet.
/// Killed when dropped unfinished (a failed assertion).
pub struct Pending {
    /// The command itself (not `setsid`, not the wrapper).
    pid: u32,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// The wrapper's stderr, after the pid line: `exit N` at the end.
    stderr: Option<BufReader<ChildStderr>>,
}

impl Pending {
    /// Starts `command` (made by [`detached`]) with piped stdin, stdout and
    /// stderr, and waits until `setsid` has left the chain and the command
    /// runs.
    #[track_caller]
    pub fn start(command: &mut Command) -> Pending {
        let mut setsid = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Taken first: `wait` would close stdin.
        let (stdin, stdout) = (setsid.stdin.take(), setsid.stdout.take());
        let mut stderr = BufReader::new(setsid.stderr.take().expect("stderr"));
        let status = setsid.wait().expect("setsid");
        assert!(status.success(), "setsid -f: {status}");
        let mut line = String::new();
        stderr.read_line(&mut line).expect("the pid line");
        let pid = line.trim().parse().expect("a pid");
        Pending {
            pid,
            stdin,
            stdout,
            stderr: Some(stderr),
        }
    }

    /// The command's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Writes `input`, closes stdin and waits (at most [`WAIT`]) for the
    /// exit; the one line printed on stdout and the exit code.
    #[track_caller]
    pub fn finish(self, input: &[u8]) -> Outcome {
        self.answered(input).0
    }

    /// As [`Pending::finish`], with when the first line came on stdout.
    #[track_caller]
    fn answered(mut self, input: &[u8]) -> (Outcome, Instant) {
        {
            let mut stdin = self.stdin.take().expect("stdin");
            // A command that exits before reading everything closes the pipe.
            let _ = stdin.write_all(input);
        }
        let (stdout, mut stderr) = (
            self.stdout.take().expect("stdout"),
            self.stderr.take().expect("stderr"),
        );
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let (mut out, mut err) = (String::new(), String::new());
            let mut stdout = BufReader::new(stdout);
            let read = stdout.read_line(&mut out).and_then(|_| {
                let first_line = Instant::now();
                stdout
                    .read_to_string(&mut out)
                    .and_then(|_| stderr.read_to_string(&mut err))
                    .map(|_| first_line)
            });
            let _ = done.send(read.map(|first_line| (out, err, first_line)));
        });
        let (stdout, stderr, first_line) = match finished.recv_timeout(WAIT) {
            Ok(read) => read.expect("UTF-8 output"),
            Err(_) => panic!("pid {} did not exit within {WAIT:?}", self.pid),
        };
        let code = stderr
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("exit "))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no exit code in {stderr:?}"));
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stdout: {stdout:?}");
        let outcome = Outcome {
            code,
            reply: serde_json::from_str(lines[0]).expect("a JSON line"),
        };
        (outcome, first_line)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.stdout.is_some() {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .status();
        }
    }
}

impl Pending {
    /// Waits until the command carries a human nonce in its environment
    /// and blocks reading its stdin: for the human CLI, until it has
    /// re-executed itself with its nonce and waits for its request. From
    /// here on, what [`Pending::timed`] measures is the request and its
    /// answer, not the start of three processes.
    #[track_caller]
    pub fn wait_for_request(&self) {
        let pid = self.pid;
        wait_for("the human CLI waits for its request", || {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let nonce = format!("{NONCE_ENV}=");
            let has_nonce = environ
                .split(|&byte| byte == 0)
                .any(|entry| entry.starts_with(nonce.as_bytes()));
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            has_nonce && wchan.ends_with("pipe_read")
        });
    }

    /// [`Pending::finish`], timed from the write of `input` to the first
    /// line on the command's stdout (its answer; not the exits after it).
    #[track_caller]
    pub fn timed(self, input: &[u8]) -> (Outcome, Duration) {
        let started = Instant::now();
        let (outcome, answered) = self.answered(input);
        (outcome, answered.duration_since(started))
    }
}
