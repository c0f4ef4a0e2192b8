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
//! or the answer of a detached CLI, each bounded ([`WAIT`], or `timeout` in
//! the script).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic-bus");
const WAIT: Duration = Duration::from_secs(60);
const PYTHON: &str = "/usr/bin/python3";

/// What the prober tries, one `name=result` line each, into `report` in
/// its workdir; it ends by writing `finished`. The victim (role `b`) holds
/// its capability until the prober opens the `gate` fifo, then asks the
/// change feed whether launching was switched off.
const PROBE: &str = r#"
read _
R=./report
BIN=$(command -v mosaic-bus)
PY=/usr/bin/python3
say() { printf '%s=%s\n' "$1" "$2" >>"$R"; }
# The descriptors the agent holds, before this script opens any: each as
# `N->target`; ls's own folder descriptor shows as /proc/<pid>/fd.
say fds "$(ls -l /proc/self/fd | awk 'NR>1 {printf "%s->%s ", $9, $11}')"
say capeff "$(awk '/^CapEff/ {print $2}' /proc/self/status)"
say seccomp "$(awk '/^Seccomp:/ {print $2}' /proc/self/status)"
own=$(cat "/proc/self/fd/$MOSAIC_BUS_CAP_FD")
# Every answer comes back through one fifo, bounded by `timeout`.
mkfifo ./answers
exec 3<>./answers
answer() { say "$1" "$(timeout 20 head -n 1 <&3)"; }
request() { # VERB ROUTE: a request of the human's, into ./request.json
  case $1 in
    launch.revoke) args='{}' ;;
    *) args="{\"to\":\"human\",\"body\":\"probe $2\"}" ;;
  esac
  printf '{"business":"x","verb":"%s","args":%s}\n' "$1" "$args" >./request.json
}
# The human CLI detached (`setsid -f env -i`, the issue's one line), and
# double-forked with `env -i` and with `env -u MOSAIC_RUN_ID`, each with a
# launch.revoke and a message.send to the human naming its route.
for verb in launch.revoke message.send; do
  request $verb detached
  setsid -f env -i "$BIN" human "$MOSAIC_BUS_SOCKET" <./request.json >./answers 2>/dev/null
  answer "human_detached_$verb"
  request $verb clean
  ( env -i "$BIN" human "$MOSAIC_BUS_SOCKET" <./request.json >./answers 2>/dev/null & )
  answer "human_clean_$verb"
  request $verb unmarked
  ( env -u MOSAIC_RUN_ID "$BIN" human "$MOSAIC_BUS_SOCKET" <./request.json >./answers 2>/dev/null & )
  answer "human_unmarked_$verb"
done
# The human's tmux: keys typed into its shell, and its server asked to run
# the CLI; each answer comes back through the fifo, which lies in the
# workdir (the same path outside).
request message.send tmux-keys; cp ./request.json ./keys.json
if tmux -S "$TMUX_SOCKET" send-keys -t human "$BIN human $MOSAIC_BUS_SOCKET <$PWD/keys.json >$PWD/answers" Enter 2>/dev/null
then answer tmux_keys; else say tmux_keys failed; fi
request message.send tmux-run; cp ./request.json ./run.json
if tmux -S "$TMUX_SOCKET" run-shell "$BIN human $MOSAIC_BUS_SOCKET <$PWD/run.json >$PWD/answers" 2>/dev/null
then answer tmux_run; else say tmux_run failed; fi
# An abstract Unix socket the human serves; typing into its terminal, and
# TIOCSTI at all (on stdin, a pipe); tracing and killing its process.
say abstract "$($PY ./probe.py abstract "$ABSTRACT_NAME")"
say tiocsti_tty "$($PY ./probe.py tiocsti /dev/tty)"
say tiocsti_filter "$($PY ./probe.py tiocsti 0)"
say ptrace "$($PY ./probe.py ptrace "$OUTSIDE_PID")"
kill -TERM "$OUTSIDE_PID" 2>/dev/null && say kill_outside ok || say kill_outside failed
# Other processes: another agent's capability through /proc/<pid>/fd, and
# up's environment (it holds X_PROBE_SECRET).
foreign=0
for f in /proc/[0-9]*/fd/*; do
  case "$(readlink "$f" 2>/dev/null)" in
    *mosaic-bus-cap*) c=$(cat "$f" 2>/dev/null) && [ -n "$c" ] && [ "$c" != "$own" ] && foreign=$((foreign + 1)) ;;
  esac
done
say foreign_caps "$foreign"
secret=0
for e in /proc/[0-9]*/environ; do
  grep -aqs X_PROBE_SECRET "$e" && secret=$((secret + 1))
done
say up_environ "$secret"
# The data root beside the socket, and the secrets folder by glob.
root=$(dirname "$(dirname "$MOSAIC_BUS_SOCKET")")
[ -e "$root/bus/bus.sqlite" ] && say db_visible yes || say db_visible no
head -c 16 "$root/bus/bus.sqlite" >/dev/null 2>&1 && say db_read ok || say db_read failed
cat "$root/bus/writer.lock" >/dev/null 2>&1 && say writer_lock ok || say writer_lock failed
touch "$root/bus/probe-written" 2>/dev/null && say data_root_write ok || say data_root_write failed
seen=0
for d in "$HUMAN_TMP"/mosaic-up-secrets-* /tmp/mosaic-up-secrets-*; do [ -e "$d" ] && seen=$((seen + 1)); done
say secrets_glob "$seen"
cat "$HUMAN_TMP"/mosaic-up-secrets-*/reader.cap >/dev/null 2>&1 && say reader_cap ok || say reader_cap failed
cat "$HUMAN_TMP"/mosaic-up-secrets-*/ui.token >/dev/null 2>&1 && say ui_token ok || say ui_token failed
# Its home's shell start-up file.
echo 'echo probed' >>"$HOME/.bashrc" 2>/dev/null && say home_write ok || say home_write failed
say home "$HOME"
# A nested user namespace.
unshare -Urm true 2>/dev/null && say unshare ok || say unshare failed
say done yes
echo >./gate
"#;

/// The victim's script: it holds its capability until the gate opens,
/// then claims its role and asks the change feed (since its start) whether
/// launching was switched off: `switch` holds the answer.
const VICTIM: &str = r#"read _ && cat ./gate >/dev/null &&
mosaic-bus call role.claim >/dev/null &&
mosaic-bus call changes '{"since":0,"timeoutMs":1000}' >./switch; echo >./finished"#;

/// The probes that need a system call the shell has no command for; each
/// prints `ok` or `failed:<errno name>`.
const PROBE_PY: &str = r##"
import ctypes, errno, fcntl, os, socket, sys, termios

def abstract(name):
    socket.socket(socket.AF_UNIX).connect("\0" + name)

def tiocsti(target):
    fd = int(target) if target.isdigit() else os.open(target, os.O_RDWR | os.O_NOCTTY)
    fcntl.ioctl(fd, termios.TIOCSTI, b"#")

def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    # PTRACE_SEIZE: attached without stopping it, detached at our exit.
    if libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(int(pid)), None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")

try:
    {"abstract": abstract, "tiocsti": tiocsti, "ptrace": ptrace}[sys.argv[1]](*sys.argv[2:])
    print("ok")
except OSError as e:
    print("failed:" + errno.errorcode.get(e.errno, str(e.errno)))
"##;

/// What the human has outside the sandbox: a private tmux server with a
/// session `human` running its shell, an abstract socket, a process of its
/// own, and the terminal `up` runs in. Dropped, it stops them.
struct Outside {
    tmux_dir: PathBuf,
    tmux_socket: PathBuf,
    abstract_name: String,
    _abstract: UnixListener,
    /// The human's process, for `kill` and `ptrace`.
    victim: Child,
    /// The terminal's master side, held while `up` runs.
    _master: std::os::fd::OwnedFd,
    /// The terminal's other side: `up`'s standard input and controlling
    /// terminal.
    terminal: std::fs::File,
}

impl Outside {
    fn start(work: &Path) -> Outside {
        let tmux_dir = work.join("tmux");
        private_dir(&tmux_dir);
        let name = "mosaic-sandbox-probe";
        let started = Command::new("tmux")
            .args([
                "-L",
                name,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "human",
                "sh",
            ])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            // The shell of the human's panes (nobody's login shell is
            // nologin).
            .env("SHELL", "/bin/sh")
            .env("HOME", work)
            .env("TMUX_TMPDIR", &tmux_dir)
            .status()
            .expect("tmux");
        assert!(started.success(), "the human's tmux server started");
        let uid = rustix::process::getuid().as_raw();
        let tmux_socket = tmux_dir.join(format!("tmux-{uid}")).join(name);
        assert!(tmux_socket.exists(), "{tmux_socket:?}");
        // Tests of this file run at once: each serves a name of its own.
        static SERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SERVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let abstract_name = format!("mosaic-sandbox-probe-{}-{n}", std::process::id());
        let address =
            SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("an abstract name");
        let listener = UnixListener::bind_addr(&address).expect("an abstract socket");
        let victim = Command::new("sh")
            .args(["-c", "read _"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("the human's process");
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let slave = ptsname(&master, Vec::new()).expect("ptsname");
        let terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(slave.to_str().expect("a path"))
            .expect("the terminal");
        Outside {
            tmux_dir,
            tmux_socket,
            abstract_name,
            _abstract: listener,
            victim,
            _master: master,
            terminal,
        }
    }

    /// Whether the human's process is still running.
    fn victim_alive(&mut self) -> bool {
        self.victim.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", "mosaic-sandbox-probe", "kill-server"])
            .env_clear()
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .status();
        let _ = self.victim.kill();
        let _ = self.victim.wait();
    }
}

/// The business of the probes, `a` probing and `b` the victim, in a new
/// folder `team` of `work`: the agents' workdir, beside the data root and
/// the secrets folder, never holding them.
fn config(work: &Path, sandbox: &str) -> PathBuf {
    let dir = &work.join("team");
    std::fs::create_dir(dir).expect("mkdir team");
    std::fs::write(dir.join("probe.sh"), PROBE).expect("write the probe");
    std::fs::write(dir.join("probe.py"), PROBE_PY).expect("write the probe");
    for fifo in ["gate", "finished"] {
        let made = Command::new("mkfifo")
            .arg(dir.join(fifo))
            .status()
            .expect("mkfifo");
        assert!(made.success());
    }
    let env = ["OUTSIDE_PID", "HUMAN_TMP", "TMUX_SOCKET", "ABSTRACT_NAME"];
    let config = json!({
        "sandbox": sandbox,
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}},
                               "b": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [
            {"role": "b", "harness": "pi", "command": ["sh", "-c", VICTIM]},
            {"role": "a", "harness": "pi", "env": env, "command": ["sh", "./probe.sh"]},
        ],
    });
    let path = dir.join("up.json");
    std::fs::write(&path, config.to_string()).expect("write the configuration");
    path
}

/// A new folder of mode 0700, as the data root and the secrets folder
/// must be.
fn private_dir(dir: &Path) {
    std::fs::create_dir(dir).expect("mkdir");
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
}

/// A run of `up --stay` with the probes: its first line, the prober's
/// report, the victim's view of the change feed, what the reader
/// capability showed while the broker ran, then `up`'s exit and log.
struct Run {
    summary: Value,
    report: HashMap<String, String>,
    /// The change feed's answer to the victim.
    switch: Value,
    /// The human's inbox, read with the reader capability.
    inbox: Value,
    /// The trail of every message the probes sent as the human, by route.
    trails: HashMap<String, Value>,
    status: ExitStatus,
    log: String,
}

impl Run {
    /// The bodies of the messages to the human that the probes sent.
    fn probe_messages(&self) -> Vec<String> {
        self.inbox
            .as_array()
            .expect("an inbox")
            .iter()
            .filter_map(|item| item["body"].as_str())
            .filter(|body| body.starts_with("probe "))
            .map(str::to_owned)
            .collect()
    }
}

/// Runs `up --stay --browser` with `config`, in `outside`'s terminal,
/// through `wrapper` (a program and its arguments that execute the rest,
/// or nothing), until the probes are done; reads the evidence with the
/// reader capability, then stops `up`. `up` is started through `sh`
/// holding descriptor 7 open, not close-on-exec, as a caller could leave
/// one: only a sandbox keeps it from the agents.
fn run_up(config: &Path, work: &Path, outside: &Outside, wrapper: &[&str]) -> Run {
    let root = work.join("data");
    let human_tmp = work.join("tmp");
    let human_home = work.join("human-home");
    for dir in [&root, &human_tmp, &human_home] {
        private_dir(dir);
    }
    let log_path = work.join("up.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut child = Command::new("setsid")
        .args(["--ctty", "sh", "-c", r#"exec 7</dev/null; exec "$@""#, "sh"])
        .args(wrapper)
        .args([BIN, "up", "--stay", "--browser", "127.0.0.1:0", "--config"])
        .arg(config)
        .arg("--data-root")
        .arg(&root)
        .env("HOME", &human_home)
        .env("TMPDIR", &human_tmp)
        .env("HUMAN_TMP", &human_tmp)
        .env("X_PROBE_SECRET", "up-only")
        .env("OUTSIDE_PID", outside.victim.id().to_string())
        .env("TMUX_SOCKET", &outside.tmux_socket)
        .env("ABSTRACT_NAME", &outside.abstract_name)
        .env_remove("TMUX")
        .stdin(outside.terminal.try_clone().expect("the terminal"))
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn up");
    let first = first_line(&mut child);
    let summary: Value = serde_json::from_str(&first).unwrap_or_else(|e| {
        let _ = child.kill();
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!("a JSON first line: {e}: {first:?}\n{log}")
    });
    // The victim writes `finished` once the prober is done and it has
    // asked the change feed.
    let finished = work.join("team/finished");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(std::fs::read_to_string(finished));
    });
    let done = receive.recv_timeout(WAIT);
    let reader_cap = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    let reader = |verb: &str, args: Value| reader_call(&socket, &reader_cap, verb, args);
    let report = match done {
        Ok(_) => report(work),
        Err(_) => HashMap::new(),
    };
    let inbox = reader("inbox", json!({}));
    let mut trails = HashMap::new();
    for (name, answer) in &report {
        let id = serde_json::from_str::<Value>(answer)
            .ok()
            .and_then(|a| a["result"]["id"].as_str().map(str::to_owned));
        if let Some(id) = id {
            trails.insert(name.clone(), reader("trail", json!({"subject": id})));
        }
    }
    let switch = std::fs::read_to_string(work.join("team/switch"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .map_or(Value::Null, |answer| answer["result"].clone());
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .expect("stop up");
    let status = wait(child);
    let log = std::fs::read_to_string(&log_path).expect("the log");
    assert!(done.is_ok(), "the probes finished\n{log}");
    Run {
        summary,
        report,
        switch,
        inbox,
        trails,
        status,
        log,
    }
}

/// `mosaic-bus call VERB ARGS` with the reader capability; its answer's
/// `result`.
fn reader_call(socket: &str, cap: &Path, verb: &str, args: Value) -> Value {
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

/// The first stdout line of `child`, within [`WAIT`]; stdout is then read
/// to its end on a thread, so `up` never blocks on it.
fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = send.send(first);
        lines.for_each(drop);
    });
    receive.recv_timeout(WAIT).expect("a first line from up")
}

/// Waits for `child`, killing it after [`WAIT`].
fn wait(mut child: Child) -> ExitStatus {
    let pid = rustix::process::Pid::from_child(&child);
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait().expect("wait"));
    });
    receive.recv_timeout(WAIT).unwrap_or_else(|_| {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        panic!("up did not exit within {WAIT:?}");
    })
}

/// The prober's report as `name → result`.
fn report(work: &Path) -> HashMap<String, String> {
    let text = std::fs::read_to_string(work.join("team/report")).expect("the prober's report");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The descriptors the report lists, but stdio, the capability's and ls's
/// own folder.
fn extra_fds(fds: &str, cap_fd: &str) -> Vec<String> {
    fds.split_whitespace()
        .filter(|entry| {
            let (n, target) = entry.split_once("->").unwrap_or((entry, ""));
            let listing = target.starts_with("/proc/") && target.ends_with("/fd");
            !["0", "1", "2", cap_fd].contains(&n) && !listing
        })
        .map(str::to_owned)
        .collect()
}

/// The capability's descriptor number, from the prober's view of its fds.
fn cap_fd(fds: &str) -> String {
    fds.split_whitespace()
        .find(|e| e.contains("mosaic-bus-cap"))
        .and_then(|e| e.split_once("->"))
        .map(|(n, _)| n.to_owned())
        .unwrap_or_else(|| panic!("a capability descriptor in {fds}"))
}

/// The Landlock ABI this kernel reports, asked directly
/// (`landlock_create_ruleset` with `LANDLOCK_CREATE_RULESET_VERSION`): an
/// oracle apart from the `landlock` crate that `up` uses. Scopes came with 6.
fn landlock_abi() -> i64 {
    let out = Command::new(PYTHON)
        .args([
            "-c",
            "import ctypes; print(ctypes.CDLL(None).syscall(444, None, 0, 1))",
        ])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a number")
}

/// The kinds of the changes in a `changes` answer.
fn change_kinds(answer: &Value) -> Vec<String> {
    answer["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("changes in {answer}"))
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The routes of the human CLI the prober tries, each with both verbs.
const HUMAN_PROBES: [&str; 6] = [
    "human_detached_launch.revoke",
    "human_detached_message.send",
    "human_clean_launch.revoke",
    "human_clean_message.send",
    "human_unmarked_launch.revoke",
    "human_unmarked_message.send",
];

const REFUSED: &str = r#"{"error":"human-proof-failed","ok":false}"#;

#[test]
fn every_detour_fails_in_the_sandbox_and_launching_stays_on() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let mut outside = Outside::start(work);
    let config = config(work, "required");
    let run = run_up(&config, work, &outside, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let scoped = landlock_abi() >= 6;
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], true, "{}", run.summary);
        let expected = if scoped { "closed" } else { "open" };
        assert_eq!(agent["abstractSockets"], expected, "{}", run.summary);
    }
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}");
    // The issue's one line, and the double forks without the run marker,
    // each as a launch.revoke and a message.send.
    for probe in HUMAN_PROBES {
        assert_eq!(r[probe], REFUSED, "{probe}: {r:?}");
    }
    // The human's tmux is out of reach, its keys and its server.
    assert_eq!(r["tmux_keys"], "failed", "{r:?}");
    assert_eq!(r["tmux_run"], "failed", "{r:?}");
    // The abstract socket the human serves, where Landlock has scopes
    // (and reachable, as the first line says, where it has none).
    let abstract_expected = if scoped { "failed:EPERM" } else { "ok" };
    assert_eq!(r["abstract"], abstract_expected, "{r:?}");
    // No terminal to type into (a new session), and TIOCSTI refused by the
    // filter before the kernel sees that stdin is no terminal.
    assert_eq!(r["tiocsti_tty"], "failed:ENXIO", "{r:?}");
    assert_eq!(r["tiocsti_filter"], "failed:EPERM", "{r:?}");
    // Nothing outside the sandbox can be traced, signalled or seen.
    assert_eq!(r["ptrace"], "failed:EPERM", "{r:?}");
    assert_eq!(r["kill_outside"], "failed", "{r:?}");
    assert!(outside.victim_alive(), "the human's process survived");
    assert_eq!(r["foreign_caps"], "0", "{r:?}");
    assert_eq!(r["up_environ"], "0", "{r:?}");
    // The data root is absent but for the socket, the secrets too.
    assert_eq!(r["db_visible"], "no", "{r:?}");
    assert_eq!(r["db_read"], "failed", "{r:?}");
    assert_eq!(r["writer_lock"], "failed", "{r:?}");
    assert_eq!(r["data_root_write"], "failed", "{r:?}");
    assert_eq!(r["secrets_glob"], "0", "{r:?}");
    assert_eq!(r["reader_cap"], "failed", "{r:?}");
    assert_eq!(r["ui_token"], "failed", "{r:?}");
    assert!(!work.join("data/bus/probe-written").exists());
    // Its home is its own: what it wrote there is not the human's.
    assert_eq!(r["home"], "/home/agent", "{r:?}");
    assert!(!work.join("human-home/.bashrc").exists());
    // No nested user namespace, no capabilities, only stdio and the
    // capability's descriptor (not the 7 that `up` inherited).
    assert_eq!(r["unshare"], "failed", "{r:?}");
    assert_eq!(r["capeff"], "0000000000000000", "{r:?}");
    // A seccomp filter (mode 2) is in force.
    assert_eq!(r["seccomp"], "2", "{r:?}");
    let fds = &r["fds"];
    assert_eq!(extra_fds(fds, &cap_fd(fds)), Vec::<String>::new(), "{fds}");
    // The evidence, through the reader capability while the broker ran:
    // no message of the probes reached the human's inbox, and the victim's
    // change feed shows no launch switch: launching stays on.
    assert_eq!(run.probe_messages(), Vec::<String>::new(), "{}", run.inbox);
    assert!(run.trails.is_empty(), "{:?}", run.trails);
    assert_eq!(
        change_kinds(&run.switch),
        Vec::<String>::new(),
        "{}",
        run.switch
    );
    // Every CLI that reached the broker was refused, and the log says why:
    // the first of a second with its reason, the rest in the second's
    // summary line, with their count (the log is bounded per cause).
    let logged = run
        .log
        .lines()
        .filter(|l| {
            l.contains("human proof refused")
                && l.contains("reason=\"the peer is in another pid namespace than the broker\"")
        })
        .count();
    let summed: usize = run
        .log
        .lines()
        .filter(|l| {
            l.contains("human proofs refused and not logged one by one")
                && l.contains("cause=\"other-namespace\" detail=\"pid\"")
        })
        .map(|l| {
            let (_, count) = l.split_once("suppressed=").expect("a count");
            let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<usize>().expect("a count")
        })
        .sum();
    assert!(logged >= 1, "{}", run.log);
    assert_eq!(logged + summed, HUMAN_PROBES.len(), "{}", run.log);
}

/// Whether this process may type into its own controlling terminal with
/// `TIOCSTI`: as root always, otherwise only where the kernel keeps the
/// legacy behaviour (`dev.tty.legacy_tiocsti`, absent before Linux 6.2).
fn may_tiocsti() -> bool {
    rustix::process::getuid().is_root()
        || std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
            .map_or(true, |v| v.trim() != "0")
}

/// Whether this process may trace another of its user's that is not its
/// descendant: as root, or without Yama's restriction.
fn may_ptrace() -> bool {
    rustix::process::getuid().is_root()
        || std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
            .map_or(true, |v| v.trim() == "0")
}

#[test]
fn without_the_sandbox_the_same_probes_get_through() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let mut outside = Outside::start(work);
    let config = config(work, "off");
    let run = run_up(&config, work, &outside, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], false, "{}", run.summary);
        assert_eq!(agent["abstractSockets"], "open", "{}", run.summary);
    }
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}");
    // The escape the sandbox closes: a detached CLI acts as the human.
    assert_eq!(
        r["human_detached_launch.revoke"], r#"{"ok":true,"result":{}}"#,
        "{r:?}"
    );
    let ok = |name: &str| {
        let answer: Value = serde_json::from_str(&r[name]).unwrap_or(Value::Null);
        assert_eq!(answer["ok"], true, "{name}: {r:?}");
    };
    for name in ["human_detached_message.send", "tmux_keys", "tmux_run"] {
        ok(name);
    }
    // Seen through the reader capability: the messages in the human's
    // inbox, each with its human input on its trail.
    let mut messages = run.probe_messages();
    messages.sort();
    for body in ["probe detached", "probe tmux-keys", "probe tmux-run"] {
        assert!(messages.iter().any(|m| m == body), "{body}: {}", run.inbox);
    }
    for name in ["human_detached_message.send", "tmux_keys", "tmux_run"] {
        let answer: Value = serde_json::from_str(&r[name]).expect("an answer");
        let request = &answer["result"]["request"];
        let trail = run.trails[name].as_array().expect("a trail");
        assert!(
            trail
                .iter()
                .any(|e| e["kind"] == "human.input" && &e["id"] == request),
            "{name}: {trail:?}"
        );
    }
    // And the switch, in the victim's change feed.
    assert!(
        change_kinds(&run.switch).contains(&"launch.revoked".to_owned()),
        "{}",
        run.switch
    );
    // The rest is in reach: the abstract socket, the terminal, the human's
    // process, the victim's capability, up's environment, the store, the
    // secrets, the descriptor up inherited.
    assert_eq!(r["abstract"], "ok", "{r:?}");
    let tty = if may_tiocsti() { "ok" } else { "failed:EIO" };
    assert_eq!(r["tiocsti_tty"], tty, "{r:?}");
    assert_eq!(r["tiocsti_filter"], "failed:ENOTTY", "{r:?}");
    let traced = if may_ptrace() { "ok" } else { "failed:EPERM" };
    assert_eq!(r["ptrace"], traced, "{r:?}");
    assert_eq!(r["kill_outside"], "ok", "{r:?}");
    assert!(!outside.victim_alive(), "the human's process was killed");
    assert_ne!(r["foreign_caps"], "0", "{r:?}");
    assert_ne!(r["up_environ"], "0", "{r:?}");
    assert_eq!(r["db_read"], "ok", "{r:?}");
    assert_eq!(r["writer_lock"], "ok", "{r:?}");
    assert_ne!(r["secrets_glob"], "0", "{r:?}");
    assert_eq!(r["reader_cap"], "ok", "{r:?}");
    assert_eq!(r["ui_token"], "ok", "{r:?}");
    assert_eq!(r["seccomp"], "0", "{r:?}");
    let fds = &r["fds"];
    assert!(
        extra_fds(fds, &cap_fd(fds))
            .iter()
            .any(|e| e.starts_with("7->")),
        "{fds}"
    );
}

/// A seccomp filter that answers Landlock's system calls with `ENOSYS`, as
/// a kernel without Landlock does, written to `path` as the raw BPF
/// program `prctl(PR_SET_SECCOMP)` takes.
fn no_landlock_filter(path: &Path) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    let filter = SeccompFilter::new(
        [
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ]
        .into_iter()
        .map(|call| (call, Vec::new()))
        .collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        std::env::consts::ARCH.try_into().expect("an architecture"),
    )
    .expect("a filter");
    let program = BpfProgram::try_from(filter).expect("a program");
    let bytes: Vec<u8> = program
        .iter()
        .flat_map(|i| {
            let mut b = i.code.to_ne_bytes().to_vec();
            b.extend([i.jt, i.jf]);
            b.extend(i.k.to_ne_bytes());
            b
        })
        .collect();
    std::fs::write(path, bytes).expect("write the filter");
}

/// Installs the filter in its first argument (with `no_new_privs`) and
/// executes the rest: `up` and everything it starts then run as on a
/// kernel without Landlock.
const WITHOUT_LANDLOCK_PY: &str = r#"
import ctypes, os, sys
prog = open(sys.argv[1], "rb").read()
buf = ctypes.create_string_buffer(prog, len(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog) // 8, ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
ul = ctypes.c_ulong
if libc.prctl(ul(38), ul(1), ul(0), ul(0), ul(0)) != 0 or libc.prctl(ul(22), ul(2), ctypes.byref(fprog), ul(0), ul(0)) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[2], sys.argv[2:])
"#;

#[test]
fn without_landlock_the_first_line_and_one_warning_say_abstract_sockets_stay_open() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let outside = Outside::start(work);
    let config = config(work, "required");
    let filter = work.join("no-landlock.bpf");
    no_landlock_filter(&filter);
    let wrapper = work.join("without-landlock.py");
    std::fs::write(&wrapper, WITHOUT_LANDLOCK_PY).expect("write the wrapper");
    let (wrapper, filter) = (wrapper.to_string_lossy(), filter.to_string_lossy());
    let run = run_up(&config, work, &outside, &[PYTHON, &wrapper, &filter]);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], true, "{}", run.summary);
        assert_eq!(agent["abstractSockets"], "open", "{}", run.summary);
    }
    let warnings: Vec<&str> = run
        .log
        .lines()
        .filter(|l| l.contains("no Landlock scopes"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.log);
    assert!(warnings[0].contains(" WARN ") && warnings[0].contains("agents=2"));
    // What the first line says is so: the abstract socket is in reach; the
    // rest of the sandbox holds.
    let r = &run.report;
    assert_eq!(r["abstract"], "ok", "{r:?}");
    for probe in HUMAN_PROBES {
        assert_eq!(r[probe], REFUSED, "{probe}: {r:?}");
    }
    assert_eq!(r["tmux_keys"], "failed", "{r:?}");
    assert_eq!(run.probe_messages(), Vec::<String>::new(), "{}", run.inbox);
}

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
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&up),
        rustix::process::Signal::TERM,
    )
    .expect("stop up");
    let status = wait(up);
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
