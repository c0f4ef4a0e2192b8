//! The sandbox of `up`, with the real bwrap, the real `up` and the real
//! broker: an agent script tries the detours an agent of the human's user
//! has, and reports what happened; the test then reads the broker's
//! evidence from its store. The same probes with `"sandbox": "off"` are the
//! negative control: they get through, so the probes can see an escape.
//!
//! Run as root by `cargo test -p mosaic-app --test sandbox`, and
//! unprivileged with the same binaries:
//! `setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp
//! target/debug/deps/sandbox-<hash>` (docs/host.md).
//!
//! Nothing sleeps: every wait is for a line, the end of a process or the
//! answer of a detached CLI, each bounded ([`WAIT`], or `timeout` in the
//! script).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic-bus");
const WAIT: Duration = Duration::from_secs(60);

/// What the prober tries, one `name=result` line each, into `report` in
/// its workdir. The victim (role `b`) holds its capability until the
/// prober opens the `gate` fifo.
const PROBE: &str = r#"
read _
R=./report
BIN=$(command -v mosaic-bus)
say() { printf '%s=%s\n' "$1" "$2" >>"$R"; }
# The descriptors the agent holds, before this script opens any: each as
# `N->target`; ls's own folder descriptor shows as /proc/<pid>/fd.
say fds "$(ls -l /proc/self/fd | awk 'NR>1 {printf "%s->%s ", $9, $11}')"
say capeff "$(awk '/^CapEff/ {print $2}' /proc/self/status)"
say seccomp "$(awk '/^Seccomp:/ {print $2}' /proc/self/status)"
own=$(cat "/proc/self/fd/$MOSAIC_BUS_CAP_FD")
# The human CLI, detached (`setsid -f env -i`) and double-forked without
# the run marker; each answer is read from a fifo, bounded by `timeout`.
printf '%s\n' '{"business":"x","verb":"launch.revoke","args":{}}' >./revoke.json
mkfifo ./detached.out ./forked.out
exec 3<>./detached.out 4<>./forked.out
setsid -f env -i "$BIN" human "$MOSAIC_BUS_SOCKET" <./revoke.json >./detached.out 2>/dev/null
say human_detached "$(timeout 20 head -n 1 <&3)"
( env -u MOSAIC_RUN_ID "$BIN" human "$MOSAIC_BUS_SOCKET" <./revoke.json >./forked.out 2>/dev/null & )
say human_forked "$(timeout 20 head -n 1 <&4)"
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
kill -0 "$OUTSIDE_PID" 2>/dev/null && say kill_outside ok || say kill_outside failed
# The data root beside the socket, and the secrets folder by glob.
root=$(dirname "$(dirname "$MOSAIC_BUS_SOCKET")")
[ -e "$root/bus/bus.sqlite" ] && say db_visible yes || say db_visible no
head -c 16 "$root/bus/bus.sqlite" >/dev/null 2>&1 && say db_read ok || say db_read failed
touch "$root/bus/probe-written" 2>/dev/null && say data_root_write ok || say data_root_write failed
cat "$SECRETS"/reader.cap >/dev/null 2>&1 && say reader_cap ok || say reader_cap failed
# Its home's shell start-up file.
echo 'echo probed' >>"$HOME/.bashrc" 2>/dev/null && say home_write ok || say home_write failed
say home "$HOME"
# A nested user namespace.
unshare -Urm true 2>/dev/null && say unshare ok || say unshare failed
say done yes
echo >./gate
"#;

/// The business of the probes, `a` probing and `b` the victim, in a new
/// folder `team` of `work`: the agents' workdir, beside the data root and
/// the secrets folder, never holding them.
fn config(work: &Path, sandbox: &str) -> PathBuf {
    let dir = &work.join("team");
    std::fs::create_dir(dir).expect("mkdir team");
    std::fs::write(dir.join("probe.sh"), PROBE).expect("write the probe");
    let fifo = Command::new("mkfifo")
        .arg(dir.join("gate"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    let env = ["OUTSIDE_PID", "SECRETS"];
    let config = json!({
        "sandbox": sandbox,
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}},
                               "b": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [
            {"role": "b", "harness": "pi", "command": ["sh", "-c", "read _ && cat ./gate"]},
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

/// A run of `up` to its end: its first line, its exit and its log.
struct Run {
    summary: Value,
    status: ExitStatus,
    log: String,
}

/// Runs `up` with `config` until its agents are done. `up` is started
/// through `sh` holding descriptor 7 open, not close-on-exec, as a caller
/// could leave one: only a sandbox keeps it from the agents.
fn run_up(config: &Path, work: &Path) -> Run {
    let root = work.join("data");
    let secrets = work.join("secrets");
    let human_home = work.join("human-home");
    for dir in [&root, &secrets, &human_home] {
        private_dir(dir);
    }
    let log_path = work.join("up.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut child = Command::new("sh")
        .args(["-c", r#"exec 7</dev/null; exec "$0" "$@""#, BIN, "up"])
        .arg("--config")
        .arg(config)
        .arg("--data-root")
        .arg(&root)
        .arg("--secrets-dir")
        .arg(&secrets)
        .env("HOME", &human_home)
        .env("X_PROBE_SECRET", "up-only")
        .env("OUTSIDE_PID", std::process::id().to_string())
        .env("SECRETS", &secrets)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn up");
    let first = first_line(&mut child);
    let status = wait(child);
    let log = std::fs::read_to_string(&log_path).expect("the log");
    let summary = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("a JSON first line: {e}: {first:?}\n{log}"));
    Run {
        summary,
        status,
        log,
    }
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
fn report(work: &Path) -> std::collections::HashMap<String, String> {
    let text = std::fs::read_to_string(work.join("team/report")).expect("the prober's report");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Counts from the store `up` left: human inputs, launch switches, and
/// refused human proofs.
fn evidence(work: &Path) -> (i64, i64, i64) {
    let db = rusqlite::Connection::open_with_flags(
        work.join("data/bus/bus.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the store");
    let count = |sql: &str| db.query_row(sql, [], |r| r.get(0)).expect(sql);
    (
        count("SELECT count(*) FROM human_inputs"),
        count("SELECT count(*) FROM launch_switches"),
        count(
            "SELECT coalesce(sum(count), 0) FROM refusal_tally WHERE code = 'human-proof-failed'",
        ),
    )
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

#[test]
fn every_detour_fails_in_the_sandbox_and_launching_stays_on() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let config = config(work, "required");
    let run = run_up(&config, work);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], true, "{}", run.summary);
    }
    let r = report(work);
    assert_eq!(r["done"], "yes", "{r:?}");
    let refused = r#"{"error":"human-proof-failed","ok":false}"#;
    // The issue's one line, and a double fork without the run marker.
    assert_eq!(r["human_detached"], refused, "{r:?}");
    assert_eq!(r["human_forked"], refused, "{r:?}");
    // Nothing outside the sandbox can be seen or signalled.
    assert_eq!(r["foreign_caps"], "0", "{r:?}");
    assert_eq!(r["up_environ"], "0", "{r:?}");
    assert_eq!(r["kill_outside"], "failed", "{r:?}");
    // The data root is absent but for the socket, the secrets too.
    assert_eq!(r["db_visible"], "no", "{r:?}");
    assert_eq!(r["db_read"], "failed", "{r:?}");
    assert_eq!(r["data_root_write"], "failed", "{r:?}");
    assert_eq!(r["reader_cap"], "failed", "{r:?}");
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
    // Launching stays on: no human input, no switch; both proofs refused,
    // and the log says why.
    let (inputs, switches, proofs) = evidence(work);
    assert_eq!((inputs, switches), (0, 0), "{}", run.log);
    assert!(proofs >= 2, "{proofs} refused proofs\n{}", run.log);
    assert!(
        run.log
            .contains("reason=\"the peer is in another pid namespace than the broker\""),
        "{}",
        run.log
    );
}

#[test]
fn without_the_sandbox_the_same_probes_get_through() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let config = config(work, "off");
    let run = run_up(&config, work);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], false, "{}", run.summary);
    }
    let r = report(work);
    assert_eq!(r["done"], "yes", "{r:?}");
    // The escape the sandbox closes: a detached CLI acts as the human.
    assert_eq!(r["human_detached"], r#"{"ok":true,"result":{}}"#, "{r:?}");
    let (inputs, switches, _) = evidence(work);
    assert!(inputs >= 1 && switches >= 1, "{inputs} {switches}");
    // And the rest is in reach: the victim's capability, up's environment,
    // the store, the reader capability, the descriptor up inherited.
    assert_ne!(r["foreign_caps"], "0", "{r:?}");
    assert_ne!(r["up_environ"], "0", "{r:?}");
    assert_eq!(r["kill_outside"], "ok", "{r:?}");
    assert_eq!(r["db_read"], "ok", "{r:?}");
    assert_eq!(r["reader_cap"], "ok", "{r:?}");
    assert_eq!(r["seccomp"], "0", "{r:?}");
    let fds = &r["fds"];
    assert!(
        extra_fds(fds, &cap_fd(fds))
            .iter()
            .any(|e| e.starts_with("7->")),
        "{fds}"
    );
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
        br#"{"business":"x","verb":"launch.revoke","args":{}}"#,
    )
    .expect("write the request");
    let answer = first_line(&mut human);
    let human_status = wait(human);
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
    let (inputs, switches, proofs) = evidence(work);
    assert_eq!((inputs, switches, proofs), (0, 0, 1), "{log}");
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
