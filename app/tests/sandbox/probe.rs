//! A probe as an agent: a config of its own, `up --stay` run with it, the
//! agent's `name=value` report, and what the reader capability shows while
//! the broker still serves. A probe is a shell script, the body of
//! [`Layout::agent`]; it reports with `say NAME VALUE`.
//!
//! The layout keeps the configuration's folder apart from the agents'
//! `workdir`, as a config must be kept: `conf/` holds the configuration
//! (read-only in a sandbox), `team/` is the agents' `workdir`, where the
//! report and the `finished` fifo are; the data root, the human's home and
//! temporary folder are private folders beside them.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use serde_json::{json, Value};

use crate::support::up::{
    first_line, mkfifo, private_dir, reader_call, stop, summary, wait, written_within,
};
use crate::BIN;

/// Where a probe's files are (see the module documentation).
pub struct Layout {
    /// The configuration's folder.
    pub conf: PathBuf,
    /// The agents' `workdir`.
    pub team: PathBuf,
    /// The data root.
    pub data: PathBuf,
    /// The human's home, `up`'s `HOME`.
    pub home: PathBuf,
    /// The human's temporary folder, `up`'s `TMPDIR`.
    pub tmp: PathBuf,
    /// A program and its arguments that execute `up` (the rest of the
    /// command line), or nothing.
    pub wrapper: Vec<std::ffi::OsString>,
    /// `up`'s standard input (a terminal, say), or else `/dev/null`.
    pub stdin: Option<std::fs::File>,
}

/// A run of `up --stay` with a probe: its first line, the report, what
/// `during` returned while the broker served, `up`'s exit and log.
pub struct Stayed<T> {
    pub summary: Value,
    pub report: HashMap<String, String>,
    pub during: T,
    pub status: ExitStatus,
    pub log: String,
}

/// The reader capability of a running `up`.
pub struct Live {
    socket: String,
    cap: PathBuf,
}

impl Live {
    /// The broker's socket.
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// `mosaic-bus call VERB ARGS` with the reader capability: its result.
    pub fn reader(&self, verb: &str, args: Value) -> Value {
        reader_call(&self.socket, &self.cap, verb, args)
    }
}

impl Layout {
    /// The folders, made in `work`.
    pub fn new(work: &Path) -> Layout {
        let layout = Layout {
            conf: work.join("conf"),
            team: work.join("team"),
            data: work.join("data"),
            home: work.join("human-home"),
            tmp: work.join("human-tmp"),
            wrapper: Vec::new(),
            stdin: None,
        };
        for dir in [&layout.conf, &layout.team] {
            std::fs::create_dir(dir).expect("mkdir");
        }
        for dir in [&layout.data, &layout.home, &layout.tmp] {
            private_dir(dir);
        }
        mkfifo(&layout.team.join("finished"));
        layout
    }

    /// An agent of `role` in `team` that runs `body` once `up` says
    /// `ready`, with `say NAME VALUE` appending to the report; the agent
    /// of role `a` ends by opening the `finished` fifo, which the run
    /// waits for.
    pub fn agent(&self, role: &str, body: &str) -> Value {
        let report = self.team.join("report");
        let finished = self.team.join("finished");
        let end = if role == "a" {
            format!("echo >'{}'\n", finished.display())
        } else {
            String::new()
        };
        let script = format!(
            "read _\nR='{}'\nsay() {{ printf '%s=%s\\n' \"$1\" \"$2\" >>\"$R\"; }}\n{body}\n{end}",
            report.display()
        );
        json!({"role": role, "harness": "pi", "workdir": self.team,
               "command": ["sh", "-c", script]})
    }

    /// Writes `conf/up.json`: business `x` with roles `a` and `b`,
    /// `business` merged into it (credentials, say), and `agents`.
    pub fn config(&self, sandbox: &str, business: Value, agents: Vec<Value>) -> PathBuf {
        let mut base = json!({"id": "x", "human": "alice",
            "arbiters": {"technical": "a", "delivery": "a"},
            "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}},
                      "b": {"authority": {"withinRole": [], "crossRole": []}}}});
        merge(&mut base, business);
        let config = json!({"sandbox": sandbox, "business": base, "agents": agents});
        let path = self.conf.join("up.json");
        std::fs::write(&path, config.to_string()).expect("write the configuration");
        path
    }

    /// Runs `up --stay` with `config` and `env` added, until the agent of
    /// role `a` finishes; calls `during` while the broker serves, then
    /// stops `up` with SIGTERM.
    pub fn stay<T>(
        &self,
        config: &Path,
        env: &[(&str, &OsStr)],
        during: impl FnOnce(&Live) -> T,
    ) -> Stayed<T> {
        let log_path = self.home.join("up.log");
        let (program, rest) = match self.wrapper.split_first() {
            Some((program, rest)) => (program.as_os_str(), rest),
            None => (OsStr::new(BIN), &[][..]),
        };
        let mut child = Command::new(program)
            .args(rest)
            .args(self.wrapper.first().map(|_| BIN))
            .args(["up", "--stay", "--config"])
            .arg(config)
            .arg("--data-root")
            .arg(&self.data)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .envs(env.iter().copied())
            .stdin(match &self.stdin {
                Some(file) => Stdio::from(file.try_clone().expect("stdin")),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_path).expect("the log"))
            .spawn()
            .expect("spawn up");
        let summary = summary(&mut child, &log_path);
        let done = written_within(self.team.join("finished"));
        let live = Live {
            socket: summary["socket"].as_str().unwrap_or_default().to_owned(),
            cap: PathBuf::from(summary["readerCap"].as_str().unwrap_or_default()),
        };
        let during = done.then(|| during(&live));
        let status = stop(child);
        let log = std::fs::read_to_string(&log_path).expect("the log");
        let (true, Some(during)) = (done, during) else {
            panic!("the probe finished\n{summary}\n{log}");
        };
        let report = std::fs::read_to_string(self.team.join("report"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Stayed {
            summary,
            report,
            during,
            status,
            log,
        }
    }

    /// Runs `up` with `config`, which must refuse to start: its exit code,
    /// first line and log.
    pub fn refused(&self, config: &Path) -> (Option<i32>, String, String) {
        let log_path = self.home.join("refused.log");
        let mut child = Command::new(BIN)
            .args(["up", "--config"])
            .arg(config)
            .arg("--data-root")
            .arg(&self.data)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_path).expect("the log"))
            .spawn()
            .expect("spawn up");
        let first = first_line(&mut child);
        let status = wait(child);
        let log = std::fs::read_to_string(&log_path).expect("the log");
        (status.code(), first, log)
    }
}

/// Merges `extra`'s keys into `base`, objects recursively.
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, extra) => *base = extra,
    }
}
