//! The first probes: one prober tries every detour an agent of the
//! human's user had (the human CLI detached, the human's tmux, an
//! abstract socket, TIOCSTI, ptrace, other processes' descriptors and
//! environment, the data root, the secrets), a victim asks the change feed
//! whether launching was switched off; and the same without a sandbox, the
//! negative control.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use serde_json::{json, Value};

use crate::outside::Outside;
use crate::support::up::{mkfifo, private_dir, reader_call, stop, summary, written_within};
use crate::BIN;

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
say connector "${MOSAIC_BUS_CONNECTOR_FD:-none}"
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

/// The business of the probes, `a` probing and `b` the victim, both on
/// the host's network (the abstract socket probe needs it): the
/// configuration in a new folder `conf` of `work`, the agents' workdir
/// `team` beside it, the data root and the secrets folder, never holding
/// them.
pub fn config(work: &Path, sandbox: &str) -> PathBuf {
    let dir = &work.join("team");
    let conf = &work.join("conf");
    for d in [dir, conf] {
        std::fs::create_dir(d).expect("mkdir");
    }
    // The probe's script lies in the configuration's folder, which no
    // agent may write (a workdir may not hold a file a command names).
    let probe = conf.join("probe.sh");
    std::fs::write(&probe, PROBE).expect("write the probe");
    std::fs::write(dir.join("probe.py"), PROBE_PY).expect("write the probe");
    for fifo in ["gate", "finished"] {
        mkfifo(&dir.join(fifo));
    }
    let env = ["OUTSIDE_PID", "HUMAN_TMP", "TMUX_SOCKET", "ABSTRACT_NAME"];
    let config = json!({
        "sandbox": sandbox,
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}},
                               "b": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [
            {"role": "b", "harness": "pi", "workdir": dir, "network": "host",
             "shared": true, "command": ["sh", "-c", VICTIM]},
            {"role": "a", "harness": "pi", "env": env, "workdir": dir, "network": "host",
             "shared": true, "command": ["sh", probe]},
        ],
    });
    let path = conf.join("up.json");
    std::fs::write(&path, config.to_string()).expect("write the configuration");
    path
}

/// A run of `up --stay` with the probes: its first line, the prober's
/// report, the victim's view of the change feed, what the reader
/// capability showed while the broker ran, then `up`'s exit and log.
pub struct Run {
    pub summary: Value,
    pub report: HashMap<String, String>,
    /// The change feed's answer to the victim.
    pub switch: Value,
    /// The human's inbox, read with the reader capability.
    pub inbox: Value,
    /// The trail of every message the probes sent as the human, by route.
    pub trails: HashMap<String, Value>,
    pub status: ExitStatus,
    pub log: String,
}

impl Run {
    /// The bodies of the messages to the human that the probes sent.
    pub fn probe_messages(&self) -> Vec<String> {
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
pub fn run_up(config: &Path, work: &Path, outside: &Outside, wrapper: &[&str]) -> Run {
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
    let summary = summary(&mut child, &log_path);
    // The victim writes `finished` once the prober is done and it has
    // asked the change feed.
    let done = written_within(work.join("team/finished"));
    let reader_cap = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    let reader = |verb: &str, args: Value| reader_call(&socket, &reader_cap, verb, args);
    let report = if done { report(work) } else { HashMap::new() };
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
    let status = stop(child);
    let log = std::fs::read_to_string(&log_path).expect("the log");
    assert!(done, "the probes finished\n{log}");
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
pub const HUMAN_PROBES: [&str; 6] = [
    "human_detached_launch.revoke",
    "human_detached_message.send",
    "human_clean_launch.revoke",
    "human_clean_message.send",
    "human_unmarked_launch.revoke",
    "human_unmarked_message.send",
];

pub const REFUSED: &str = r#"{"error":"human-proof-failed","ok":false}"#;

/// The answer of a human CLI that cannot reach the broker at all.
pub const UNREACHED: &str = r#"{"ok":false,"error":"broker-unavailable"}"#;

/// What a human CLI started inside the sandbox gets: with `env -i` it has
/// lost the connector's variable and tries the socket's path, which no
/// Unix socket of the sandbox reaches; with its environment it reaches the
/// broker through the connector, which refuses its proof.
pub fn human_answer(probe: &str) -> &'static str {
    if probe.starts_with("human_unmarked_") {
        REFUSED
    } else {
        UNREACHED
    }
}

#[test]
fn every_detour_fails_in_the_sandbox_and_launching_stays_on() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let mut outside = Outside::start(work);
    let config = config(work, "required");
    let run = run_up(&config, work, &outside, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], true, "{}", run.summary);
        assert_eq!(agent["abstractSockets"], "closed", "{}", run.summary);
    }
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}");
    // The issue's one line, and the double forks without the run marker,
    // each as a launch.revoke and a message.send.
    for probe in HUMAN_PROBES {
        assert_eq!(r[probe], human_answer(probe), "{probe}: {r:?}");
    }
    // The human's tmux is out of reach, its keys and its server.
    assert_eq!(r["tmux_keys"], "failed", "{r:?}");
    assert_eq!(r["tmux_run"], "failed", "{r:?}");
    // The abstract socket the human serves: no Unix socket can be made.
    assert_eq!(r["abstract"], "failed:EPERM", "{r:?}");
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
    // And the connector's, a socket, named by its variable.
    let connector = &r["connector"];
    let extra = extra_fds(fds, &cap_fd(fds));
    assert_eq!(extra.len(), 1, "{fds}");
    assert!(
        extra[0].starts_with(&format!("{connector}->socket:")),
        "{fds}"
    );
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
    // The prober and the victim share their workdir, both saying so: one
    // warning says each can steer the other.
    let shared: Vec<&str> = run
        .log
        .lines()
        .filter(|l| l.contains("share writable paths"))
        .collect();
    assert_eq!(shared.len(), 1, "{}", run.log);
    assert!(shared[0].contains(" WARN ") && shared[0].contains("agents=\"b and a\""));
    let reached = HUMAN_PROBES
        .iter()
        .filter(|p| human_answer(p) == REFUSED)
        .count();
    assert_eq!(logged + summed, reached, "{}", run.log);
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
