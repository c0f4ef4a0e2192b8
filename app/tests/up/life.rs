//! A run's life under `up`, with `sh` agents in real bwrap sandboxes: an
//! end frees the role, a failed program starts again inside its run, the
//! restart limit and the budget end runs, the human's `run.end` stops the
//! sandbox, and launching switched off starts no agent until the human
//! switches it on. The human's verbs go through the real human CLI, from
//! a clean session.

use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use super::support::detached::{detached, Outcome, Pending};
use super::*;

/// One human verb on business `x`, through `mosaic-bus human SOCKET`.
#[track_caller]
fn human(root: &Path, verb: &str, args: Value) -> Outcome {
    let mut command = detached();
    command.arg(BIN).arg("human").arg(root.join("bus/bus.sock"));
    let input = json!({"business": "x", "verb": verb, "args": args});
    Pending::start(&mut command).finish(format!("{input}\n").as_bytes())
}

/// `up` on `config` and `root`, with these extra arguments; its summary.
fn start_up(config: &Path, root: &Path, extra: &[&str]) -> (Up, Value) {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--config".as_ref(),
        config.as_os_str(),
        "--data-root".as_ref(),
        root.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let up = Up::start(&args, None);
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line is JSON");
    (up, summary)
}

/// The one line of `log` that says `needle`.
#[track_caller]
fn the_line<'a>(log: &'a str, needle: &str) -> &'a str {
    let found: Vec<&str> = log.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(found.len(), 1, "{needle:?} once in {log}");
    found[0]
}

#[test]
fn an_agent_that_exits_3_after_claiming_frees_its_role_for_the_next_up() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi",
                "command": ["sh", "-c", "read _ && mosaic-bus call role.claim >/dev/null && exit 3"]}]),
    );
    let (status, _, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(1), "{stderr}");
    let ended = the_line(&stderr, "an agent failed");
    assert!(
        ended.contains(" status=\"exited with status 3\""),
        "{stderr}"
    );
    // The next `up` on the data root claims the role at once.
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && mosaic-bus call role.claim"]}]),
    );
    let (status, _, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("an agent failed"), "{stderr}");
}

#[test]
fn a_program_that_fails_once_runs_again_in_the_same_run() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    // Writable, so outside the configuration's folder.
    let outside = tempfile::tempdir().expect("out");
    let out = outside.path().to_owned();
    // The first start claims and fails; the second, in the same run, still
    // holds the capability and its claim: its inbox answers.
    let script = format!(
        "read _ && echo \"$MOSAIC_RUN_ID\" >> {out}/runs && \
         if [ ! -e {out}/failed ]; then : > {out}/failed; \
           mosaic-bus call role.claim >/dev/null && exit 3; fi; \
         mosaic-bus call inbox >/dev/null",
        out = out.display()
    );
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "restart": "on-failure", "write": [out],
                "command": ["sh", "-c", script]}]),
    );
    let (status, stdout, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(0), "{stderr}");
    let summary: Value =
        serde_json::from_str(stdout.lines().next().expect("summary")).expect("JSON");
    let run = summary["agents"][0]["run"].as_str().expect("run");
    let runs = std::fs::read_to_string(out.join("runs")).expect("the runs it saw");
    assert_eq!(runs, format!("{run}\n{run}\n"), "{stderr}");
    let again = the_line(&stderr, "starts again in its run");
    assert!(again.contains(" restarts=1"), "{stderr}");
    assert!(!stderr.contains("an agent failed"), "{stderr}");
}

#[test]
fn past_its_restart_limit_a_run_ends_failed() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "restart": "on-failure",
                "restartLimit": {"count": 1, "withinS": 600},
                "command": ["sh", "-c", "read _ && exit 4"]}]),
    );
    let (status, _, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(1), "{stderr}");
    the_line(&stderr, "starts again in its run");
    let failed = the_line(&stderr, "an agent failed");
    assert!(failed.contains("restartLimit"), "{stderr}");
    assert!(failed.contains("exited with status 4"), "{stderr}");
}

#[test]
fn the_humans_run_end_stops_the_sandbox_within_its_stop_grace() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    // The program ignores SIGTERM: only the SIGKILL after the grace ends it.
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "stopGraceS": 2,
                "command": ["sh", "-c", "trap '' TERM; read _ && echo armed && exec sleep 600"]}]),
    );
    let (up, summary) = start_up(&config, root.path(), &[]);
    let run = summary["agents"][0]["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let bwrap = summary["agents"][0]["pid"].as_u64().expect("pid");
    up.stderr_until("a: armed");
    human(root.path(), "run.end", json!({"run": run})).ok();
    let asked = Instant::now();
    let (status, _, stderr) = up.finish();
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(3),
        "{took:?}: {stderr}"
    );
    assert!(!Path::new(&format!("/proc/{bwrap}")).exists());
    assert!(
        stderr.contains("the run was ended, and its sandbox is stopped"),
        "{stderr}"
    );
}

#[test]
fn a_wall_budget_ends_the_run() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "budget": {"wallS": 3},
                "command": ["sh", "-c", "read _ && exec sleep 600"]}]),
    );
    let started = Instant::now();
    let (status, _, stderr) = run_to_end(&config, root.path());
    assert!(started.elapsed() >= Duration::from_secs(3), "{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    let spent = the_line(&stderr, "reached its budget's limit");
    assert!(spent.contains(" limit=\"wallS\""), "{stderr}");
}

#[test]
fn with_launching_off_up_starts_no_agent_until_the_human_switches_it_on() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && echo started"]}]),
    );
    // Switched off while a first `up` serves.
    let (up, _) = start_up(&config, root.path(), &["--stay"]);
    up.stderr_until("serving until stopped");
    human(root.path(), "launch.revoke", json!({})).ok();
    up.signal(rustix::process::Signal::TERM);
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");

    // The next `up` starts nobody, says how to switch it on, and serves.
    let (up, summary) = start_up(&config, root.path(), &[]);
    assert_eq!(summary["launching"], false, "{summary}");
    up.stderr_until("launch.restore");
    human(root.path(), "launch.restore", json!({})).ok();
    up.stderr_until("launching is switched on");
    up.stderr_until("a: started");
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
}

#[test]
fn after_up_is_killed_outright_and_unlocked_the_dead_runs_role_is_claimable() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi",
                "command": ["sh", "-c",
                            "read _ && mosaic-bus call role.claim >/dev/null && echo claimed && exec sleep 600"]}]),
    );
    let (up, summary) = start_up(&config, root.path(), &[]);
    let bwrap = summary["agents"][0]["pid"].as_u64().expect("pid");
    up.stderr_until("a: claimed");
    up.signal(rustix::process::Signal::KILL);
    let (status, _, _) = up.finish();
    assert_eq!(status.signal(), Some(9), "{status}");
    // Its sandbox dies with it.
    let gone = Instant::now() + WAIT;
    while Path::new(&format!("/proc/{bwrap}")).exists() {
        assert!(Instant::now() < gone, "the sandbox outlived up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let unlock = Command::new(BIN)
        .args(["unlock", "--data-root"])
        .arg(root.path())
        .output()
        .expect("unlock");
    assert!(
        unlock.status.success(),
        "{}",
        String::from_utf8_lossy(&unlock.stderr)
    );
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && mosaic-bus call role.claim"]}]),
    );
    let (status, _, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("the run's process is gone: the run ended"),
        "{stderr}"
    );
}
