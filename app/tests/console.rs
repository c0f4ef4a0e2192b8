//! `mosaic-bus console` end to end in a real terminal: a real broker (the
//! built binary, booted over its host channel), real processes bound as
//! launches, and the console in a private tmux server (its own `-L` name
//! and `TMUX_TMPDIR`, no `TMUX` inherited), driven with `send-keys` and
//! read with `capture-pane`; and `up --console` running the example
//! business to its end with the human's answer typed into the console.
//! Every wait is a deadline on what the screen, a file or a process shows;
//! nothing sleeps.

#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mosaic_adapters::procfs::ProcFs;
use mosaic_ports::ProcessTable;
use serde_json::{json, Value};

use support::{acme, acme_launches, config, data_root, Broker, BIN, WAIT};

/// A private tmux server running one session, `console`.
struct Tmux {
    name: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    /// A detached session of `width`×`height` running `command`, started
    /// with an empty environment but `PATH`, `TERM` and `SHELL`: the tmux server
    /// detaches, so the test process is not among the console's ancestors.
    fn start(command: &str, width: u16, height: u16) -> Tmux {
        let dir = tempfile::tempdir().expect("a tmux folder");
        let tmux = Tmux {
            name: format!("mosaic-console-{}", std::process::id()),
            dir,
        };
        let started = tmux
            .command()
            .args(["new-session", "-d", "-s", "console", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .arg(command)
            .status()
            .expect("tmux");
        assert!(started.success(), "tmux new-session: {started}");
        tmux
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command
            .arg("-L")
            .arg(&self.name)
            .arg("-f")
            .arg("/dev/null")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TERM", "xterm-256color")
            // Else tmux runs commands with the user's login shell, which
            // for an unprivileged uid such as nobody is `nologin`.
            .env("SHELL", "/bin/sh")
            .env("TMUX_TMPDIR", self.dir.path())
            .stdin(Stdio::null());
        command
    }

    /// `send-keys` of tmux key names (`Enter`, `]`, `y`).
    fn keys(&self, keys: &[&str]) {
        let sent = self
            .command()
            .args(["send-keys", "-t", "console"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(sent.success(), "send-keys {keys:?}");
    }

    /// The screen's text (wrapped lines joined), or `None` once the
    /// session is gone.
    fn screen(&self) -> Option<String> {
        let Output { status, stdout, .. } = self
            .command()
            .args(["capture-pane", "-p", "-J", "-t", "console"])
            .output()
            .expect("tmux capture-pane");
        status
            .success()
            .then(|| String::from_utf8_lossy(&stdout).into_owned())
    }

    /// Reads the screen until it shows `text`, within `within`.
    #[track_caller]
    fn wait_for(&self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen().unwrap_or_default();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{text:?} not on screen within {within:?}:\n{screen}"
            );
        }
    }

    /// Reads the screen until the session has ended, within [`WAIT`].
    #[track_caller]
    fn wait_gone(&self) {
        let deadline = Instant::now() + WAIT;
        while let Some(screen) = self.screen() {
            assert!(Instant::now() < deadline, "still running:\n{screen}");
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

fn acme_broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

fn console_command(socket: &Path) -> String {
    format!(
        "{BIN} console --socket {} --business acme",
        socket.display()
    )
}

/// On an open decision: `1`, `Enter`, `y`, each waited on until the
/// screen shows it took.
#[track_caller]
fn answer_yes(tmux: &Tmux) {
    tmux.keys(&["1"]);
    tmux.wait_for("selected yes", WAIT);
    tmux.keys(&["Enter"]);
    tmux.wait_for("with yes? y/n, e adds a note", WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("resolved with yes", WAIT);
}

#[test]
fn a_gated_decision_appears_within_a_second_and_the_keys_resolve_it() {
    let root = data_root();
    let b = acme_broker(root.path());
    let ops = b.agent("ops-1");
    ops.claim();
    let notified = root.path().join("notified.env");
    let command = format!(
        "{} --notify 'env >>{}'",
        console_command(&b.socket),
        notified.display()
    );
    let tmux = Tmux::start(&command, 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);

    // ops' gated send to qa goes to the human.
    let d = ops.raise("message.send", Some("qa"), json!({}));
    assert_eq!(
        (&d["class"], &d["route"]),
        (&json!("gated"), &json!("human"))
    );
    tmux.wait_for("ops/ops-1 asks message.send on qa", Duration::from_secs(1));

    // --notify ran once, with the four variables and no other of ours.
    let id = d["id"].as_str().expect("an id");
    let deadline = Instant::now() + WAIT;
    let env = loop {
        let env = std::fs::read_to_string(&notified).unwrap_or_default();
        if env.ends_with('\n') && env.contains("MOSAIC_RAISER=") {
            break env;
        }
        assert!(Instant::now() < deadline, "--notify did not run: {env:?}");
    };
    let mut ours: Vec<&str> = env.lines().filter(|l| l.starts_with("MOSAIC_")).collect();
    ours.sort_unstable();
    let expected = [
        "MOSAIC_ACTION=message.send".to_owned(),
        format!("MOSAIC_DECISION_ID={id}"),
        "MOSAIC_RAISER=ops/ops-1".to_owned(),
        "MOSAIC_TARGET=qa".to_owned(),
    ];
    assert_eq!(ours, expected, "{env}");

    // The raiser waits on its changes for the answer.
    let cursor = ops.ok("changes", json!({}))["cursor"].clone();
    let waiter = b.agent("ops-1");
    let (done, answered) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(waiter.call("changes", json!({"since": cursor, "timeoutMs": 60_000})));
    });

    tmux.keys(&["]"]);
    tmux.wait_for("Question: ", WAIT);
    tmux.wait_for("grants one use of message.send on qa to ops/ops-1", WAIT);
    answer_yes(&tmux);
    tmux.wait_for("the human resolved it with yes", WAIT);

    let page = answered
        .recv_timeout(WAIT)
        .expect("the raiser's changes answers")
        .expect("ok");
    let changes = page["changes"].as_array().expect("changes");
    assert!(
        changes
            .iter()
            .any(|c| c["kind"] == "decision.resolved" && c["decision"] == d["id"]),
        "{page}"
    );
    let trail = b.reader(0).trail(d["id"].as_str().expect("an id"));
    let kinds: Vec<&Value> = trail.iter().map(|r| &r["kind"]).collect();
    assert_eq!(
        kinds,
        ["decision.raised", "human.input", "decision.resolved"]
    );
    assert_eq!(
        (&trail[2]["by"], &trail[2]["choice"]),
        (&json!("human"), &json!("yes"))
    );
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

#[test]
fn a_console_inside_a_launched_agents_ancestry_does_not_open() {
    let root = data_root();
    let mut b = acme_broker(root.path());
    // A shell that waits for one line, then runs the console as its child.
    let script = r#"read _; "$0" console --socket "$1" --business acme; exit $?"#;
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(BIN)
        .arg(&b.socket)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh");
    let pid = shell.id();
    let start_time = ProcFs::new().process(pid).expect("the shell").start_time;
    b.bind_ok(&json!({"business": "acme", "role": "dev", "run": "dev-8",
                      "harness": "pi", "pid": pid, "startTime": start_time}));
    shell
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(shell.wait_with_output());
    });
    let output = finished
        .recv_timeout(WAIT)
        .expect("the console exits")
        .expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("human-proof-failed: the broker could not prove"),
        "{stdout:?}"
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let stderr = b.close();
    let line = format!("reason=\"ancestor {pid} is a bound launch\"\n");
    assert!(stderr.contains(&line), "{line:?} in {stderr}");
}

#[test]
fn help_exits_0_and_shows_the_keys() {
    let output = Command::new(BIN)
        .args(["console", "--help"])
        .output()
        .expect("help");
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    for key in ["j / Down", "Enter", "Esc", "]", "1-9", "?", "q", "--notify"] {
        assert!(help.contains(key), "{key} in {help}");
    }
}

#[test]
fn the_agents_view_shows_the_switch_at_start_and_a_decision_against_its_raiser_with_its_arbiter() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (lead, dev) = (b.agent("lead-1"), b.agent("dev-1"));
    lead.claim();
    dev.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    // The broker's switch, from the first screen of the view.
    tmux.wait_for("Launching: on", WAIT);
    let pid = support::launch_pid();
    let idle = format!("dev · run dev-1 · pi · pid {pid} · holding · running");
    tmux.wait_for(&idle, WAIT);

    // dev asks the lead (its arbiter), not the human: the view shows it
    // against dev's run, with the lead.
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    assert_eq!(d["route"], "lead", "{d}");
    tmux.wait_for(
        &format!("dev · run dev-1 · pi · pid {pid} · holding · waiting on lead"),
        WAIT,
    );
    tmux.wait_for("waits on lead: repo.merge on main", WAIT);

    // The lead resolves it: dev waits on nothing again.
    lead.resolve(&d["id"], "yes");
    let screen = tmux.wait_for(&idle, WAIT);
    assert!(!screen.contains("repo.merge"), "{screen}");

    // The human switches launching off from the console.
    tmux.keys(&["L"]);
    tmux.wait_for("Switch launching off for the business? y/n", WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("Launching: OFF", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

/// Reads `file` until it holds every one of `texts`, within [`WAIT`].
#[track_caller]
fn file_until(file: &Path, texts: &[&str]) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if texts.iter().all(|t| text.contains(t)) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{texts:?} not in {} within {WAIT:?}:\n{text}",
            file.display()
        );
    }
}

/// The text after `prefix` in `text`, up to the next space.
fn word_after<'a>(text: &'a str, prefix: &str) -> &'a str {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix:?} in {text}"));
    let rest = &text[at + prefix.len()..];
    rest.split([' ', '\n']).next().unwrap_or(rest)
}

/// `up --config examples/business.json --console` on `root` in tmux. The
/// shell stays after `up` to show its first line, its exit code and
/// whether the terminal is back in cooked mode.
fn up_console(root: &Path) -> Tmux {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/business.json");
    let command = format!(
        "{BIN} up --config {} --data-root {} --console; echo \"up exited with $?\"; \
         case $(stty -a) in *-icanon*) echo terminal raw;; *) echo terminal cooked;; esac; read _",
        example.display(),
        root.display()
    );
    Tmux::start(&command, 120, 40)
}

#[test]
fn up_with_console_runs_the_example_to_its_end_with_the_humans_answer() {
    let root = data_root();
    let tmux = up_console(root.path());

    // dev's gated decision comes to the console; the human answers it.
    tmux.wait_for("asks release.publish on login-fix", WAIT);
    tmux.keys(&["]"]);
    tmux.wait_for("Question: May I publish the login fix?", WAIT);
    tmux.wait_for(
        "grants one use of release.publish on login-fix to dev/dev-",
        WAIT,
    );
    answer_yes(&tmux);

    // dev wakes on its changes, uses the approval and ends; its lines are
    // in the log file, not on the console.
    let logs: Vec<_> = std::fs::read_dir(root.path())
        .expect("the data root")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = file_until(
        &logs[0],
        &["released role lead", "released role dev", "inspect it"],
    );
    let release = word_after(&log, "the human approved decision ").trim_end_matches(':');
    let after = &log[log.find("the human approved decision").expect("approved")..];
    let message = word_after(after, "sent message ");
    assert!(
        log.contains(&format!(
            "sent message {message} to the human, citing decision {release}"
        )),
        "{log}"
    );

    // Everyone is done; up serves on until the console quits. dev's
    // message is in the inbox, and the trail shows the human's answer.
    tmux.wait_for("the human resolved it with yes.", WAIT);
    tmux.wait_for("dev sent a message to human.", WAIT);
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for(
        "message from dev (a message): Published the login fix, as you approved.",
        WAIT,
    );
    assert!(!screen.contains("claimed role"), "{screen}");
    tmux.keys(&["q"]);
    tmux.wait_for("up exited with 0", WAIT);
    let screen = tmux.wait_for("terminal cooked", WAIT);
    let first: Value = screen
        .lines()
        .find_map(|l| serde_json::from_str(l.trim_end()).ok())
        .unwrap_or_else(|| panic!("up's first line on\n{screen}"));
    assert_eq!(first["log"], json!(logs[0]), "{first}");
    assert!(!screen.contains("claimed role"), "{screen}");
    assert!(!root.path().join("bus/bus.sock").exists(), "closed");

    // The evidence: the human resolved it, and dev cited the approval.
    let business: Value =
        serde_json::from_str(mosaic_app::commands::demo::EXAMPLE_BUSINESS).expect("JSON");
    let b = Broker::boot(
        root.path(),
        &config(root.path(), &[business["business"].clone()], &[], &["acme"]),
    );
    let trail = b.reader(0).trail(release);
    let kinds: Vec<&Value> = trail.iter().map(|r| &r["kind"]).collect();
    assert_eq!(
        kinds,
        [
            "decision.raised",
            "human.input",
            "decision.resolved",
            "message.sent"
        ]
    );
    assert_eq!(
        (&trail[0]["class"], &trail[0]["route"]),
        (&json!("gated"), &json!("human"))
    );
    assert_eq!(trail[0]["action"], "release.publish");
    assert_eq!(trail[1]["verb"], "decision.resolve");
    assert_eq!(
        (&trail[2]["by"], &trail[2]["choice"]),
        (&json!("human"), &json!("yes"))
    );
    assert_eq!(trail[3]["id"], json!(message));
    assert_eq!(trail[3]["to"], "human");
    assert_eq!(
        trail[3]["from_run"], trail[0]["raisedBy"]["run"],
        "{trail:?}"
    );
    b.close();
}

#[test]
fn a_signal_to_up_closes_the_console_first_then_the_agents() {
    let root = data_root();
    let tmux = up_console(root.path());
    // The console is open and dev waits on the human's answer.
    tmux.wait_for("asks release.publish on login-fix", WAIT);
    let shell = tmux
        .command()
        .args(["display-message", "-p", "-t", "console", "#{pane_pid}"])
        .output()
        .expect("tmux display-message");
    let shell = String::from_utf8_lossy(&shell.stdout).trim().to_owned();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .expect("the shell's children");
    let up: i32 = children
        .split_whitespace()
        .next()
        .expect("up")
        .parse()
        .expect("a pid");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(up).expect("a pid"),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM to up");
    // The console restored the terminal, the agents were stopped (dev did
    // not get its answer) and up closed cleanly.
    tmux.wait_for("up exited with 0", WAIT);
    let screen = tmux.wait_for("terminal cooked", WAIT);
    assert!(screen.contains(r#""ok":true"#), "{screen}");
    assert!(!root.path().join("bus/bus.sock").exists(), "closed");
    let log = std::fs::read_dir(root.path())
        .expect("the data root")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("the log file");
    let log = std::fs::read_to_string(log).expect("the log");
    assert!(log.contains("asked the human: decision"), "{log}");
    assert!(!log.contains("the human approved"), "{log}");
}
