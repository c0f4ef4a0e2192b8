//! A run's life under `up`, with `sh` agents in real bwrap sandboxes: an
//! end frees the role, a failed program starts again inside its run, the
//! restart limit and the budget end runs, the human's `run.end` and a
//! human-approved `role.revoke` stop the sandbox, and launching switched
//! off starts no agent until the human switches it on. The human's verbs go through the real human CLI, from
//! a clean session.

use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use super::support::detached::{detached, Outcome, Pending};
use super::support::procs::descendants_named;
use super::support::POLL;
use super::*;

/// One human verb on business `x`, through `mosaic-bus human SOCKET`.
#[track_caller]
fn human(root: &Path, verb: &str, args: Value) -> Outcome {
    human_of(root, "x", verb, args)
}

/// One human verb on `business`, through `mosaic-bus human SOCKET`.
#[track_caller]
fn human_of(root: &Path, business: &str, verb: &str, args: Value) -> Outcome {
    let mut command = detached();
    command.arg(BIN).arg("human").arg(root.join("bus/bus.sock"));
    let input = json!({"business": business, "verb": verb, "args": args});
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

#[test]
fn killed_at_random_moments_a_run_restarts_in_place_or_ends_and_frees_its_role() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    // The sandbox's /tmp outlives a program: a start again in the same run
    // finds its claim there and says `again`.
    let script = "read _; if [ -e /tmp/claimed ]; then echo \"again $MOSAIC_RUN_ID\"; \
                  elif mosaic-bus call role.claim >/dev/null; then : > /tmp/claimed; \
                  echo \"claimed $MOSAIC_RUN_ID\"; else echo \"refused $MOSAIC_RUN_ID\"; fi; \
                  exec sleep 600";
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "restart": "on-failure",
                "restartLimit": {"count": 5, "withinS": 600}, "stopGraceS": 1,
                "command": ["sh", "-c", script]}]),
    );
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
    let mut random = seed;
    eprintln!("crash campaign seed {seed}");
    for round in 0..20 {
        let (up, summary) = start_up(&config, root.path(), &["--stay"]);
        let bwrap = u32::try_from(summary["agents"][0]["pid"].as_u64().expect("pid")).expect("pid");
        let run = summary["agents"][0]["run"]
            .as_str()
            .expect("run")
            .to_owned();
        let reader = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
        up.stderr_until(&format!("a: claimed {run}"));
        random = random
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // A random moment of the run: up to 300 ms into its program.
        std::thread::sleep(Duration::from_millis((random >> 33) % 300));
        let program = round % 2 == 0;
        let target = if program {
            let found = descendants_named(bwrap, "sleep");
            assert_eq!(found.len(), 1, "round {round}: {found:?}");
            found[0]
        } else {
            bwrap
        };
        let pid = rustix::process::Pid::from_raw(i32::try_from(target).expect("pid")).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill -9");
        if program {
            // Started again inside its sandbox, in the same run.
            up.stderr_until(&format!("a: again {run}"));
        } else {
            // The sandbox is gone: the run ended and a new run claims the
            // role it freed.
            up.stderr_until("a: claimed ");
        }
        // No role is held by a run that ended.
        let agents = Command::new(BIN)
            .args(["call", "agents", "--cap-file"])
            .arg(&reader)
            .arg("--socket")
            .arg(root.path().join("bus/bus.sock"))
            .output()
            .expect("agents");
        let rows: Value = serde_json::from_slice(&agents.stdout).expect("agents' JSON");
        let rows = rows["result"].as_array().expect("rows");
        let held: Vec<&Value> = rows.iter().filter(|r| r["holding"] == true).collect();
        assert_eq!(held.len(), 1, "round {round}: {rows:?}");
        assert_eq!(held[0]["ended"], Value::Null, "round {round}: {rows:?}");
        up.signal(rustix::process::Signal::TERM);
        let (_, _, stderr) = up.finish();
        assert!(!stderr.contains("a: refused"), "round {round}: {stderr}");
    }
}

/// dev's program: the first start claims, raises a gated decision, waits
/// for its resolution and fails; the start again, in the same run (its
/// sandbox's /tmp says so), uses the approval.
const USES_AN_APPROVAL: &str = r#"set -u
if [ -e /tmp/decision ]; then
  d=$(cat /tmp/decision)
  mosaic-bus call message.send "{\"to\":\"human\",\"body\":\"Published.\",\"decision\":\"$d\"}" >/dev/null || exit 5
  echo "used $d in $MOSAIC_RUN_ID"
  exit 0
fi
read _
mosaic-bus call role.claim >/dev/null || exit 6
answer=$(mosaic-bus call decision.raise '{"action":"release.publish","target":"login-fix","question":"May I publish?","options":[{"key":"yes","text":"Publish it"},{"key":"no","text":"Not now"}],"recommendation":"yes","blocking":false}') || exit 7
d=$(printf '%s\n' "$answer" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
cursor=$(mosaic-bus call changes | sed -n 's/.*"cursor":\([0-9]*\).*/\1/p')
echo "$d" > /tmp/decision
echo "raised $d in $MOSAIC_RUN_ID"
answer=
until printf '%s\n' "${answer:-}" | grep -q '"decision.resolved"'; do
  answer=$(mosaic-bus call changes "{\"since\":$cursor,\"timeoutMs\":60000}") || exit 9
  cursor=$(printf '%s\n' "$answer" | sed -n 's/.*"cursor":\([0-9]*\).*/\1/p')
done
exit 3
"#;

#[test]
fn a_program_restarted_in_its_run_uses_an_approval_it_raised_before_it_failed() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let script = dir.path().join("dev.sh");
    std::fs::write(&script, USES_AN_APPROVAL).expect("write the script");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(example()).expect("the example"))
            .expect("JSON");
    config["agents"] = json!([{"role": "dev", "harness": "pi", "restart": "on-failure",
        "restartLimit": {"count": 1, "withinS": 600}, "command": ["sh", script]}]);
    let file = dir.path().join("up.json");
    std::fs::write(&file, config.to_string()).expect("write the configuration");
    let (up, summary) = start_up(&file, root.path(), &[]);
    let run = summary["agents"][0]["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let raised = loop {
        let line = up.stderr.recv_timeout(WAIT).expect("a line on stderr");
        if let Some(rest) = line.strip_prefix("dev: raised ") {
            break rest.to_owned();
        }
    };
    let id = raised.split(' ').next().expect("an id").to_owned();
    assert!(raised.ends_with(&format!(" in {run}")), "{raised}");
    human_of(
        root.path(),
        "acme",
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    )
    .ok();
    up.stderr_until(&format!("dev: used {id} in {run}"));
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("an agent failed"), "{stderr}");
}

/// lead's program: once dev says it holds its role, raises the gated
/// `role.revoke` of dev's role, waits for the human's answer on its change
/// feed, and spends the approval.
const REVOKES_DEV: &str = r#"set -u
read _
mosaic-bus call role.claim >/dev/null || exit 6
cursor=$MOSAIC_BUS_SINCE
until mosaic-bus call message.receive | grep -q '"id":"'; do
  answer=$(mosaic-bus call changes "{\"since\":$cursor,\"timeoutMs\":60000}") || exit 7
  cursor=$(printf '%s\n' "$answer" | sed -n 's/.*"cursor":\([0-9]*\).*/\1/p')
done
answer=$(mosaic-bus call decision.raise '{"action":"role.revoke","target":"dev","question":"May I stop dev?","options":[{"key":"yes","text":"Stop it"},{"key":"no","text":"Let it run"}],"recommendation":"yes","blocking":false}') || exit 8
d=$(printf '%s\n' "$answer" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
echo "raised $d"
answer=
until printf '%s\n' "${answer:-}" | grep -q '"decision.resolved"'; do
  answer=$(mosaic-bus call changes "{\"since\":$cursor,\"timeoutMs\":60000}") || exit 9
  cursor=$(printf '%s\n' "$answer" | sed -n 's/.*"cursor":\([0-9]*\).*/\1/p')
done
mosaic-bus call role.revoke "{\"role\":\"dev\",\"decision\":\"$d\"}" >/dev/null || exit 10
echo "revoked dev"
"#;

/// dev's program, a runaway: it claims and then loops without end,
/// ignoring SIGTERM and every refusal. Each turn makes a bus call (a
/// `changes` wait, so a quiet turn takes a second) and appends how it was
/// answered to `TURNS`; after its first turn it tells lead, so a turn
/// answered while it held its role comes before any revoke.
const RUNS_AWAY: &str = r#"set -u
trap '' TERM
read _
mosaic-bus call role.claim >/dev/null || exit 6
cursor=$MOSAIC_BUS_SINCE
told=
while :; do
  if answer=$(mosaic-bus call changes "{\"since\":$cursor,\"timeoutMs\":1000}" 2>&1); then
    cursor=$(printf '%s\n' "$answer" | sed -n 's/.*"cursor":\([0-9]*\).*/\1/p')
    echo ok >> "TURNS"
    if [ -z "$told" ]; then
      told=yes
      echo claimed
      mosaic-bus call message.send '{"to":"lead","body":"I hold dev."}' >/dev/null || exit 7
    fi
  else
    echo "refused $answer" >> "TURNS"
  fi
done
"#;

/// A process by its pid and its start time (so a reused pid is not it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    pid: u32,
    start: u64,
}

impl Process {
    /// The process `pid` now, if it runs (a zombie does not).
    fn of(pid: u32) -> Option<Process> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let close = stat.rfind(')')?;
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        if fields.first() == Some(&"Z") {
            return None;
        }
        let start = fields.get(19)?.parse().ok()?;
        Some(Process { pid, start })
    }

    fn alive(self) -> bool {
        Process::of(self.pid) == Some(self)
    }
}

/// One call of `verb` as the reader whose capability is in `cap`.
fn read_as(root: &Path, cap: &Path, verb: &str, args: Value) -> Value {
    let out = Command::new(BIN)
        .args(["call", verb])
        .arg(args.to_string())
        .arg("--cap-file")
        .arg(cap)
        .arg("--socket")
        .arg(root.join("bus/bus.sock"))
        .output()
        .expect("mosaic-bus call");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("the call's JSON");
    assert_eq!(answer["ok"], true, "{answer}");
    answer["result"].clone()
}

#[test]
fn a_revoked_run_is_stopped_and_its_capability_refused() {
    const GRACE: Duration = Duration::from_secs(3);
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    // Writable, so outside the configuration's folder.
    let work = tempfile::tempdir().expect("dev's workdir");
    let turns = work.path().join("turns");
    let runs_away = RUNS_AWAY.replace("TURNS", &turns.display().to_string());
    let path = dir.path().join("up.json");
    let nobody = json!({"withinRole": ["message.send"], "crossRole": []});
    let config = json!({
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "lead", "delivery": "lead"},
                     "roles": {"lead": {"authority": nobody}, "dev": {"authority": nobody}}},
        "agents": [
            {"role": "lead", "harness": "pi", "command": ["sh", "-c", REVOKES_DEV]},
            {"role": "dev", "harness": "pi", "workdir": work.path(),
             "stopGraceS": GRACE.as_secs(), "command": ["sh", "-c", runs_away]},
        ],
    });
    std::fs::write(&path, config.to_string()).expect("write config");
    let (up, summary) = start_up(&path, root.path(), &[]);
    let reader = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let dev = &summary["agents"][1];
    assert_eq!(dev["role"], "dev", "{summary}");
    let run = dev["run"].as_str().expect("run").to_owned();
    let bwrap = u32::try_from(dev["pid"].as_u64().expect("pid")).expect("pid");
    let bwrap = Process::of(bwrap).expect("dev's sandbox runs");

    // dev claims (its program then runs) and lead raises the revoke; their
    // lines may come in either order.
    let mut seen = Vec::new();
    let (mut claimed, mut raised) = (None, None);
    while claimed.is_none() || raised.is_none() {
        let line = up.stderr.recv_timeout(WAIT).expect("a line on stderr");
        seen.push(line.clone());
        if line == "dev: claimed" {
            let programs: Vec<Process> = descendants_named(bwrap.pid, "sh")
                .into_iter()
                .filter_map(Process::of)
                .collect();
            assert!(!programs.is_empty(), "dev's program runs");
            claimed = Some(programs);
        } else if let Some(id) = line.strip_prefix("lead: raised ") {
            raised = Some(id.to_owned());
        }
    }
    let (programs, id) = (claimed.expect("claimed"), raised.expect("raised"));
    human(
        root.path(),
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    )
    .ok();

    // The revoke ends dev's run, and up hears of it and stops the sandbox.
    let ended = loop {
        let line = up.stderr.recv_timeout(WAIT).expect("a line on stderr");
        seen.push(line.clone());
        if line.contains("the run was ended, and its sandbox is stopped")
            && line.contains(&format!("run=\"{run}\""))
        {
            break line;
        }
    };
    let heard = Instant::now();
    assert!(ended.contains("cause=\"revoked\""), "{ended}");
    let trail = read_as(root.path(), &reader, "trail", json!({"subject": id}));
    assert_eq!(entry(&trail, "role.revoked")["run"], run, "{trail}");
    let agents = read_as(root.path(), &reader, "agents", json!({}));
    let row = agents
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["run"] == run)
        .unwrap_or_else(|| panic!("{run} in {agents}"));
    assert_eq!(row["ended"]["cause"], "revoked", "{row}");
    assert_eq!(row["holding"], false, "{row}");

    // dev's program ignores SIGTERM: the sandbox is killed whole after
    // its grace, and nothing of it runs, well within a generous bound.
    let deadline = heard + GRACE + Duration::from_secs(30);
    while bwrap.alive() || programs.iter().any(|p| p.alive()) {
        assert!(
            Instant::now() < deadline,
            "dev's sandbox outlived its grace"
        );
        std::thread::sleep(POLL);
    }
    let written = std::fs::metadata(&turns).expect("dev's turns").len();

    let (status, _, rest) = up.finish();
    seen.push(rest);
    let stderr = seen.join("\n");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("lead: revoked dev"), "{stderr}");
    assert!(!stderr.contains("an agent failed"), "{stderr}");
    // Once its sandbox is gone, dev's file stops growing.
    let after = std::fs::read_to_string(&turns).expect("dev's turns");
    assert_eq!(after.len() as u64, written, "{after}");
    // dev worked while it held its role, and from its end on every call of
    // its capability was refused.
    let lines: Vec<&str> = after.lines().collect();
    let first_refused = lines
        .iter()
        .position(|l| l.starts_with("refused"))
        .unwrap_or_else(|| panic!("no refusal in {after}"));
    assert!(lines[..first_refused].iter().all(|l| *l == "ok"), "{after}");
    assert!(first_refused > 0, "{after}");
    for line in &lines[first_refused..] {
        assert!(line.contains("run-revoked"), "{after}");
    }
}
