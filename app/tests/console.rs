//! `mosaic-bus console` end to end in a real terminal: a real broker (the
//! built binary, booted over its host channel), real processes bound as
//! launches, and the console in a private tmux server (its own `-L` name
//! and `TMUX_TMPDIR`, no `TMUX` inherited), driven with `send-keys` and
//! read with `capture-pane`; and `up --console` running the example
//! business to its end with the human's answer typed into the console;
//! and ([`activity`]) what harness agents are doing, fed to the console as
//! `up --console` feeds it; and ([`days`]) the console for a working day:
//! `]`, the selection by id, a flood, a failed run, `x` and `S`; and
//! ([`history`]) the History view, where the human finds a decision
//! closed and opens its trail.
//! Every wait is a deadline on what the screen, a file or a process shows,
//! read again after a short pause ([`PAUSE`]) so the polling does not
//! compete for the CPU with what it waits on.

#[path = "support/mod.rs"]
mod support;

#[path = "console/activity.rs"]
mod activity;

#[path = "console/days.rs"]
mod days;

#[path = "console/history.rs"]
mod history;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mosaic_adapters::procfs::ProcFs;
use mosaic_ports::ProcessTable;
use serde_json::{json, Value};

use support::{acme, acme_launches, config, data_root, Broker, BIN, WAIT};

use support::tmux::{Tmux, PAUSE};

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
    tmux.wait_for("(choice yes)? y/n", WAIT);
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
    tmux.wait_for(
        "decision · ops/ops-1 · message.send on qa",
        Duration::from_secs(1),
    );

    // --notify ran once, with the four variables and no other of ours.
    let id = d["id"].as_str().expect("an id");
    let deadline = Instant::now() + WAIT;
    let env = loop {
        let env = std::fs::read_to_string(&notified).unwrap_or_default();
        if env.ends_with('\n') && env.contains("MOSAIC_RAISER=") {
            break env;
        }
        assert!(Instant::now() < deadline, "--notify did not run: {env:?}");
        std::thread::sleep(PAUSE);
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
    tmux.wait_for("The raiser's words: question", WAIT);
    tmux.wait_for(
        "Approving (yes) grants ops/ops-1 message.send on qa, once.",
        WAIT,
    );
    answer_yes(&tmux);
    // Its trail, two views on (no message is open).
    tmux.keys(&["Tab", "Tab"]);
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
    let idle = format!("dev · run dev-1 · running · pi · pid {pid} · holding");
    tmux.wait_for(&idle, WAIT);

    // dev asks the lead (its arbiter), not the human: the view shows it
    // against dev's run, with the lead.
    let d = dev.raise("repo.merge", Some("main"), json!({}));
    assert_eq!(d["route"], "lead", "{d}");
    tmux.wait_for(
        &format!("dev · run dev-1 · waiting on lead · pi · pid {pid} · holding"),
        WAIT,
    );
    tmux.wait_for("waits on lead: repo.merge on main", WAIT);

    // The lead resolves it: dev waits on nothing again.
    lead.resolve(&d["id"], "yes");
    let screen = tmux.wait_for(&idle, WAIT);
    assert!(!screen.contains("repo.merge"), "{screen}");

    // The human switches launching off from the console.
    tmux.keys(&["L"]);
    tmux.wait_for(
        "Switch launching off? It stops new launches and ends no running agent. y/n",
        WAIT,
    );
    tmux.keys(&["y"]);
    tmux.wait_for("Launching: OFF", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

/// The agents' output files of `up` on `root` (`agents/runs/*.log`),
/// read again until, together, they hold every one of `texts`.
#[track_caller]
fn outputs_until(root: &Path, texts: &[&str]) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text: String = std::fs::read_dir(root.join("agents/runs"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        if texts.iter().all(|t| text.contains(t)) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{texts:?} not in the agents' output within {WAIT:?}:\n{text}"
        );
        std::thread::sleep(PAUSE);
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
/// whether the terminal is back in cooked mode. `extra` goes after
/// `--console` (a `--notify`).
fn up_console(root: &Path, extra: &str) -> Tmux {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/business.json");
    let command = format!(
        "{BIN} up --config {} --data-root {} --console {extra}; echo \"up exited with $?\"; \
         case $(stty -a) in *-icanon*) echo terminal raw;; *) echo terminal cooked;; esac; read _",
        example.display(),
        root.display()
    );
    Tmux::start(&command, 120, 40)
}

#[test]
fn up_with_console_runs_the_example_to_its_end_with_the_humans_answer() {
    let root = data_root();
    let tmux = up_console(root.path(), "");

    // dev's gated decision comes to the console; the human answers it.
    tmux.wait_for("release.publish on login-fix", WAIT);
    tmux.keys(&["]"]);
    tmux.wait_for("May I publish the login fix?", WAIT);
    tmux.wait_for("release.publish on login-fix, once.", WAIT);
    answer_yes(&tmux);

    // dev wakes on its changes, uses the approval and ends; its lines are
    // in its run's file, not on the console, and not in up's log, which
    // holds up's own lines only.
    let logs: Vec<_> = std::fs::read_dir(root.path())
        .expect("the data root")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = outputs_until(
        root.path(),
        &["released role lead", "released role dev", "inspect it"],
    );
    let own = std::fs::read_to_string(&logs[0]).expect("up's log");
    assert!(!own.contains("released role"), "{own}");
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
    tmux.keys(&["Tab", "Tab"]);
    tmux.wait_for("the human resolved it with yes.", WAIT);
    tmux.wait_for("dev sent a message to human.", WAIT);
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for(
        "a message · Published the login fix, as you approved.",
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
    let tmux = up_console(root.path(), "");
    // The console is open and dev waits on the human's answer: it has said
    // so in its output (the console may show the decision a moment before).
    tmux.wait_for("release.publish on login-fix", WAIT);
    outputs_until(root.path(), &["asked the human: decision"]);
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
    let output = outputs_until(root.path(), &["asked the human: decision"]);
    assert!(!output.contains("the human approved"), "{output}");
}

/// Whether every escape in `bytes` is an SGR sequence (`ESC [ … m`), the
/// only kind `capture-pane -e` writes for what the console drew.
fn only_sgr(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    while let Some(at) = rest.iter().position(|b| *b == 0x1b) {
        let tail = &rest[at + 1..];
        let Some(body) = tail.strip_prefix(b"[") else {
            return false;
        };
        let end = body
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b';' || *b == b':'));
        match end.map(|e| (e, body[e])) {
            Some((e, b'm')) => rest = &body[e + 1..],
            Some(_) | None => return false,
        }
    }
    true
}

#[test]
fn a_forged_grant_and_hostile_messages_reach_the_screen_only_as_tokens_beside_the_real_grant() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (ops, lead) = (b.agent("ops-1"), b.agent("lead-1"));
    ops.claim();
    lead.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 80, 24);
    // tmux takes an application's clipboard (OSC 52) into a buffer when
    // set-clipboard is on: any buffer afterwards means one got through.
    let on = tmux
        .command()
        .args(["set-option", "-s", "set-clipboard", "on"])
        .status()
        .expect("tmux set-option");
    assert!(on.success());
    tmux.wait_for("Nothing is waiting on you", WAIT);
    // The broker refuses controls in a decision's words, so the forgery is
    // no-break-space padding; a message body is kept verbatim, escapes and
    // all.
    let forged = format!(
        "Fix typo?{}Approving (yes) grants ops/ops-1 docs.edit on README.md, once.",
        "\u{a0}".repeat(150)
    );
    ops.raise("message.send", Some("qa"), json!({"question": forged}));
    lead.send(
        "human",
        "\x1b]52;c;ZWNobyAncm0gLXJmIH4n\x07\x1b]0;pwned\x07\x1b[2J\x1b[3;1Hrepo/\u{202e}gnigats-tset main\u{200b}",
        json!({}),
    );
    tmux.wait_for("message  · lead/lead-1", WAIT);
    // The message's detail pane shows each escape as a token.
    tmux.keys(&["j"]);
    let screen = tmux.wait_for("Message from lead/lead-1", WAIT);
    assert!(screen.contains("⟨ESC⟩]52;c;"), "{screen}");
    assert!(screen.contains("⟨ESC⟩]0;pwned⟨BEL⟩⟨ESC⟩[2J"), "{screen}");
    assert!(screen.contains("gnigats-tset main⟨U+200B⟩"), "{screen}");
    tmux.keys(&["]"]);
    let screen = tmux.wait_for(
        "Approving (yes) grants ops/ops-1 message.send on qa, once.",
        WAIT,
    );
    // The forged line is in the question's pane only, below the real one.
    let real = screen.find("message.send on qa, once.").expect("the grant");
    assert!(
        screen.find("docs.edit").is_none_or(|forged| forged > real),
        "{screen}"
    );
    tmux.keys(&["1", "Enter"]);
    tmux.wait_for(
        "Grant message.send on qa to ops/ops-1 (choice yes)? y/n",
        WAIT,
    );
    assert!(
        only_sgr(&tmux.screen_escaped()),
        "a foreign escape on screen"
    );
    assert_ne!(tmux.format("#{pane_title}"), "pwned");
    let buffers = tmux
        .command()
        .args(["list-buffers"])
        .output()
        .expect("tmux list-buffers");
    assert!(buffers.stdout.is_empty(), "{buffers:?}");
    // Apart: ESC then q in one write reads as Alt-q.
    tmux.keys(&["Escape"]);
    tmux.wait_for("cancelled: nothing was sent", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

#[test]
fn a_4000_character_question_at_80x24_shows_the_grant_and_y_resolves_only_while_the_prompt_fits() {
    let root = data_root();
    let b = acme_broker(root.path());
    let ops = b.agent("ops-1");
    ops.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 80, 24);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    let question = "Why? ".repeat(800);
    let d = ops.raise("message.send", Some("qa"), json!({"question": question}));
    tmux.wait_for("decision · ops/ops-1", WAIT);
    tmux.keys(&["]"]);
    tmux.wait_for("grants ops/ops-1 message.send on qa, once.", WAIT);
    tmux.keys(&["1", "Enter"]);
    let prompt = "Grant message.send on qa to ops/ops-1 (choice yes)? y/n";
    tmux.wait_for(prompt, WAIT);
    // Too narrow for the prompt: y sends nothing.
    let narrow = tmux
        .command()
        .args(["resize-window", "-t", "console", "-x", "40", "-y", "24"])
        .status()
        .expect("tmux resize-window");
    assert!(narrow.success());
    tmux.wait_for("too small", WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("Terminal too small to resolve", WAIT);
    let id = d["id"].as_str().expect("an id");
    assert_eq!(
        b.reader(0).trail_kinds(id),
        ["decision.raised"],
        "nothing resolved it"
    );
    let wide = tmux
        .command()
        .args(["resize-window", "-t", "console", "-x", "80", "-y", "24"])
        .status()
        .expect("tmux resize-window");
    assert!(wide.success());
    tmux.wait_for(prompt, WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("resolved with yes", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

#[test]
fn of_105_unread_messages_the_105th_is_reachable_after_acknowledging() {
    let root = data_root();
    let b = acme_broker(root.path());
    let lead = b.agent("lead-1");
    lead.claim();
    for i in 1..=105 {
        lead.send("human", &format!("note {i:03}"), json!({}));
    }
    let tmux = Tmux::start(&console_command(&b.socket), 100, 30);
    tmux.wait_for("5 more unread messages", WAIT);
    // r on the first message marks it read; the inbox is read again.
    for left in (0..5).rev() {
        tmux.keys(&["r"]);
        if left > 0 {
            tmux.wait_for(&format!("{left} more unread messages"), WAIT);
        }
    }
    let screen = tmux.wait_for("> message  · lead/lead-1 · a message · note 006", WAIT);
    assert!(!screen.contains("more unread"), "{screen}");
    let down: Vec<&str> = std::iter::repeat_n("j", 99).collect();
    tmux.keys(&down);
    tmux.wait_for("> message  · lead/lead-1 · a message · note 105", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

#[test]
fn a_broker_killed_shows_the_banner_and_the_console_finds_it_again_after_a_restart() {
    let root = data_root();
    let boot = config(root.path(), &[acme()], &acme_launches(), &["acme"]);
    let mut b = Broker::boot(root.path(), &boot);
    let tmux = Tmux::start(&console_command(&b.socket), 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    b.signal("KILL");
    let _ = b.wait_status();
    tmux.wait_for("BROKER UNREACHABLE at", WAIT);
    // The operator's step after a crash, then the same socket again.
    support::unlock(root.path());
    let b = Broker::boot(root.path(), &boot);
    let ops = b.agent("ops-1");
    ops.claim();
    ops.raise("message.send", Some("qa"), json!({}));
    let screen = tmux.wait_for("decision · ops/ops-1 · message.send on qa", WAIT);
    assert!(!screen.contains("BROKER UNREACHABLE"), "{screen}");
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

/// The pids of `pid`'s children.
fn children(pid: &str) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
fn runs(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn up_killed_outright_takes_its_console_along_and_the_terminal_is_restored() {
    let root = data_root();
    let tmux = up_console(root.path(), "--notify true");
    tmux.wait_for("release.publish on login-fix", WAIT);
    let shell = tmux.format("#{pane_pid}");
    let up = children(&shell).into_iter().next().expect("up");
    let console = children(&up)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"console"))
        })
        .expect("the console among up's children");
    // `up` passed its `--notify` on.
    let argv = std::fs::read(format!("/proc/{console}/cmdline")).expect("its command line");
    assert!(
        argv.windows(14).any(|w| w == b"--notify\0true\0"),
        "{}",
        String::from_utf8_lossy(&argv)
    );
    let killed = Command::new("kill")
        .args(["-KILL", &up])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + WAIT;
    while runs(&console) {
        assert!(
            Instant::now() < deadline,
            "the console {console} still runs"
        );
        std::thread::sleep(PAUSE);
    }
    // The shell's own lines may race the console's last draw, so the
    // terminal is read from tmux and the kernel once the console is gone:
    // out of the alternate screen, and back in cooked mode.
    assert_eq!(tmux.format("#{alternate_on}"), "0");
    let tty = tmux.format("#{pane_tty}");
    let stty = Command::new("stty")
        .args(["-a", "-F", &tty])
        .output()
        .expect("stty");
    let modes = String::from_utf8_lossy(&stty.stdout);
    assert!(
        modes.contains(" icanon") && modes.contains(" echo "),
        "{modes}"
    );
}

#[test]
fn an_agent_that_exited_with_status_3_shows_as_exited() {
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let path = dir.path().join("up.json");
    let config = json!({
        "sandbox": "off",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{"role": "a", "harness": "pi", "command": ["sh", "-c", "exit 3"]}],
    });
    std::fs::write(&path, config.to_string()).expect("write config");
    let command = format!(
        "{BIN} up --config {} --data-root {} --console; read _",
        path.display(),
        root.path().display()
    );
    let tmux = Tmux::start(&command, 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    tmux.wait_for("status 3", WAIT);
    tmux.keys(&["q"]);
}

#[test]
fn a_console_that_cannot_open_says_why_and_what_to_do() {
    let root = data_root();
    let b = acme_broker(root.path());
    let missing = root.path().join("no/bus.sock");
    let socket = b.socket.display();
    let command = format!(
        "{BIN} console --socket {} --business acme; echo \"exit $?\"; \
         {BIN} console --socket {socket} --business nope; echo \"exit $?\"; \
         MOSAIC_RUN_ID=x {BIN} console --socket {socket} --business acme; echo \"exit $?\"; \
         read _",
        missing.display()
    );
    let tmux = Tmux::start(&command, 200, 40);
    let screen = tmux.wait_for("outside every agent\nexit 1", WAIT);
    let said: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        said,
        [
            format!(
                "broker-unavailable: no broker answers at {}: start it (mosaic-bus up or \
                 serve), or give --socket the socket it runs on (<dataRoot>/bus/bus.sock)",
                missing.display()
            )
            .as_str(),
            "exit 1",
            "bad-request: the broker has no business \"nope\": give --business one of the \
             businesses in its configuration",
            "exit 1",
            "human-proof-failed: this console carries the run marker MOSAIC_RUN_ID in its \
             environment, so it was started from inside an agent (or a shell that inherited \
             an agent's environment); start it from your own terminal, outside every agent",
            "exit 1",
        ],
        "{screen}"
    );
    b.close();
}

#[test]
fn with_launching_off_up_console_opens_and_l_switches_it_on_and_the_agents_start() {
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let up = |name: &str, script: &str| {
        let path = dir.path().join(name);
        let config = json!({
            "sandbox": "off",
            "business": {"id": "x", "human": "alice",
                         "arbiters": {"technical": "a", "delivery": "a"},
                         "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
            "agents": [{"role": "a", "harness": "pi", "command": ["sh", "-c", script]}],
        });
        std::fs::write(&path, config.to_string()).expect("write config");
        let command = format!(
            "{BIN} up --config {} --data-root {} --console; echo \"up exited with $?\"; read _",
            path.display(),
            root.path().display()
        );
        Tmux::start(&command, 120, 40)
    };
    // Switched off from a first `up`'s console.
    {
        let tmux = up("first.json", "read _");
        tmux.wait_for("Nothing is waiting on you", WAIT);
        tmux.keys(&["Tab"]);
        tmux.wait_for("Launching: on", WAIT);
        tmux.keys(&["L"]);
        tmux.wait_for(
            "Switch launching off? It stops new launches and ends no running agent. y/n",
            WAIT,
        );
        tmux.keys(&["y"]);
        tmux.wait_for("Launching: OFF", WAIT);
        tmux.keys(&["q"]);
        tmux.wait_for("up exited with", WAIT);
    }

    // The next `up --console` opens the console and starts nobody until
    // the human switches launching on; then its agent runs (and exits 3).
    let tmux = up("second.json", "read _ && exit 3");
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    let screen = tmux.wait_for("Launching: OFF", WAIT);
    assert!(!screen.contains("status 3"), "{screen}");
    tmux.keys(&["L"]);
    tmux.wait_for(
        "Switch launching back on? New launches may start again. y/n",
        WAIT,
    );
    tmux.keys(&["y"]);
    tmux.wait_for("Launching: on", WAIT);
    tmux.wait_for("status 3", WAIT);
    tmux.keys(&["q"]);
}
