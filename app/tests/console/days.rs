//! The console for a working day, in a real terminal: `]` reaches every
//! waiting decision, a decision raised above the one being read does not
//! move the selection, agent text never reaches the grant's frame (and
//! `/` with a role narrows the inbox to that role's rows), a flood of
//! large messages hides no decision; and, under the real `up
//! --console`, a failed run in red with its cause, `x` ending a run and
//! `S` starting its agent again, and the Run view showing the last lines
//! the agent printed.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{data_root, BIN, WAIT};
use crate::{acme_broker, console_command, Tmux, PAUSE};

/// The grant line of ops's `message.send` decision on `target`.
fn grant(target: &str) -> String {
    format!("Approving (yes) grants ops/ops-1 message.send on {target}, once.")
}

#[test]
fn bracket_reaches_a_third_decision_past_two_blocking_ones_and_wraps() {
    let root = data_root();
    let b = acme_broker(root.path());
    let ops = b.agent("ops-1");
    ops.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    ops.raise(
        "message.send",
        Some("qa"),
        json!({"blocking": true, "task_ref": "vikunja:3/41"}),
    );
    ops.raise(
        "message.send",
        Some("dev"),
        json!({"blocking": true, "task_ref": "vikunja:3/41"}),
    );
    ops.raise("message.send", Some("lead"), json!({}));
    tmux.wait_for("message.send on lead", WAIT);
    for target in ["qa", "dev", "lead", "qa"] {
        tmux.keys(&["]"]);
        tmux.wait_for(&grant(target), WAIT);
    }
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

/// The selected inbox row (drawn `> …`), without its frame.
fn selected_row(tmux: &Tmux) -> String {
    tmux.rows()
        .into_iter()
        .find(|row| row.trim_start_matches('│').starts_with("> "))
        .unwrap_or_default()
}

#[test]
fn a_twin_raised_above_the_selection_does_not_move_it() {
    let root = data_root();
    let b = acme_broker(root.path());
    let ops = b.agent("ops-1");
    ops.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    ops.raise("message.send", Some("qa"), json!({}));
    tmux.wait_for("message.send on qa", WAIT);
    assert!(selected_row(&tmux).contains("message.send on qa"));
    // Its twin, blocking, is listed above it.
    ops.raise(
        "message.send",
        Some("dev"),
        json!({"blocking": true, "task_ref": "vikunja:3/41"}),
    );
    tmux.wait_for(
        "1 new decision above the one you are reading: the selection stays on it",
        WAIT,
    );
    let row = selected_row(&tmux);
    assert!(row.contains("message.send on qa"), "{row}");
    tmux.keys(&["Enter"]);
    tmux.wait_for(&grant("qa"), WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

#[test]
fn the_grant_frame_holds_no_message_text_after_fifty_hexagrams() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (ops, lead) = (b.agent("ops-1"), b.agent("lead-1"));
    ops.claim();
    lead.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 80, 24);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    let body = format!("{}reviewed by lead: safe", "\u{4dc0}".repeat(50));
    lead.send("human", &body, json!({}));
    tmux.wait_for("message  · lead/lead-1", WAIT);
    tmux.wait_for("reviewed by lead", WAIT);
    ops.raise(
        "repo.force-push",
        Some("main"),
        json!({"blocking": true, "task_ref": "vikunja:3/41"}),
    );
    tmux.wait_for("repo.force-push on main", WAIT);
    tmux.keys(&["]"]);
    tmux.wait_for("grants ops/ops-1 repo.force-push on main", WAIT);
    tmux.keys(&["1", "Enter"]);
    let screen = tmux.wait_for("(choice yes)? y/n", WAIT);
    assert!(!screen.contains("reviewed by lead"), "{screen}");
    assert!(!screen.contains("safe"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("cancelled: nothing was sent", WAIT);
    // Back in the inbox, `/` and a role narrow it to that role's rows.
    tmux.keys(&["Escape"]);
    tmux.wait_for("decision · ops/ops-1", WAIT);
    tmux.keys(&["/", "lead"]);
    let screen = tmux.wait_for("filter: lead (1 of 2)", WAIT);
    assert!(!screen.contains("decision · ops/ops-1"), "{screen}");
    tmux.keys(&["Enter"]);
    let row = selected_row(&tmux);
    assert!(row.contains("message  · lead/lead-1"), "{row}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("the filter was cleared", WAIT);
    tmux.wait_for("decision · ops/ops-1", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

#[test]
fn under_80_messages_of_60_kb_the_humans_inbox_lists_a_later_gated_decision() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (ops, lead) = (b.agent("ops-1"), b.agent("lead-1"));
    ops.claim();
    lead.claim();
    let body = "flood ".repeat(10_000);
    for _ in 0..80 {
        lead.send("human", &body, json!({}));
    }
    ops.raise(
        "repo.force-push",
        Some("prod-db"),
        json!({"question": "rotate prod-db", "blocking": false}),
    );
    let tmux = Tmux::start(&console_command(&b.socket), 120, 40);
    tmux.wait_for("repo.force-push on prod-db", WAIT);
    // Open now, the console lists the next decision within a second of
    // its raise: the change, the inbox read and the drawing, measured
    // from outside through tmux.
    ops.raise("repo.force-push", Some("prod-db-2"), json!({}));
    let raised = Instant::now();
    tmux.wait_for("repo.force-push on prod-db-2", WAIT);
    let shown = raised.elapsed();
    eprintln!("listed on screen {shown:?} after its raise");
    assert!(shown < Duration::from_secs(1), "{shown:?}");
    tmux.keys(&["]"]);
    tmux.wait_for("grants ops/ops-1 repo.force-push on prod-db", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}

/// `up --console` of one agent `a` running `script`, on its own data
/// root, in tmux at 120x40.
fn up_one(dir: &std::path::Path, root: &std::path::Path, script: &str, restart: &str) -> Tmux {
    let path = dir.join("up.json");
    let config = json!({
        "sandbox": "off",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{"role": "a", "harness": "pi", "command": ["sh", "-c", script],
                    "restart": restart}],
    });
    std::fs::write(&path, config.to_string()).expect("write config");
    let command = format!(
        "{BIN} up --config {} --data-root {} --console; read _",
        path.display(),
        root.display()
    );
    Tmux::start(&command, 120, 40)
}

#[test]
fn the_agents_view_shows_a_failed_run_in_red_with_its_cause() {
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let tmux = up_one(dir.path(), root.path(), "exit 3", "no");
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    tmux.wait_for("status 3", WAIT);
    let screen = tmux.wait_for("ENDED (failed", WAIT);
    let row = screen
        .lines()
        .find(|l| l.contains("ENDED (failed"))
        .expect("the row");
    assert!(row.contains("status 3"), "{row}");
    // The row's text is drawn red: tmux keeps the colour it was drawn in.
    let escaped = String::from_utf8_lossy(&tmux.screen_escaped()).into_owned();
    let line = escaped
        .lines()
        .find(|l| l.contains("ENDED (failed"))
        .expect("the row, escaped");
    let red = ["\x1b[31m", "\x1b[1m\x1b[31m", ";31m", "38;5;1m"];
    assert!(red.iter().any(|sgr| line.contains(sgr)), "{line:?}");
    tmux.keys(&["q"]);
}

#[test]
fn x_ends_a_run_and_s_starts_its_agent_again() {
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let tmux = up_one(dir.path(), root.path(), "sleep 600", "no");
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    tmux.wait_for("a · run a-", WAIT);
    tmux.keys(&["j", "x"]);
    tmux.wait_for("End the run a/a-", WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("the run is ended", WAIT);
    tmux.wait_for("ENDED (", WAIT);
    tmux.keys(&["S"]);
    tmux.wait_for("Start the agent of a/a-", WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("asked up to start the agent of a/a-", WAIT);
    // A second run of `a`, alive.
    let deadline = Instant::now() + WAIT;
    loop {
        let screen = tmux.screen().unwrap_or_default();
        let rows: Vec<&str> = screen
            .lines()
            .filter(|l| l.contains("a · run a-"))
            .collect();
        if rows.len() >= 2 && rows.iter().any(|r| r.contains("· pid ")) {
            break;
        }
        assert!(Instant::now() < deadline, "no second run:\n{screen}");
        std::thread::sleep(PAUSE);
    }
    tmux.keys(&["q"]);
}

#[test]
fn the_run_view_shows_the_last_lines_the_agent_printed_with_an_escape_neutralised() {
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let script = r"printf 'early line\n'; printf 'the agent says \033[2J hello\n'; exec sleep 600";
    let tmux = up_one(dir.path(), root.path(), script, "no");
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab"]);
    tmux.wait_for("a · run a-", WAIT);
    tmux.keys(&["j", "Enter"]);
    tmux.wait_for("Its output, the last lines of ", WAIT);
    // Read again each second: the line arrives however late it is written.
    let screen = tmux.wait_for("the agent says ⟨ESC⟩[2J hello", WAIT);
    assert!(screen.contains("early line"), "{screen}");
    tmux.keys(&["q"]);
}
