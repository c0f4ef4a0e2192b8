//! The Agents view with `up`'s activity feed: each harness agent's state
//! (working, waiting on the feed, exited), its last tool and how long ago,
//! at an injected time; the broker's exit and an open decision say more
//! than the feed; a hostile line draws nothing raw; a plain console shows
//! what it showed before.

use serde_json::json;

use super::doing::{decode, Doing, RunState};
use super::model::{Exit, Shown};
use super::request::Request;
use super::state::{Key, State, View};
use super::tests::{answer, loaded, screen, NOW_MS};

/// A feed line, as `up` writes it: `lead-1` waits on the feed (its last
/// tool `inbox` 12 s before, waiting for 5 s), `qa-1` works (nothing
/// called yet), `dev-0` exited with status 0.
fn feed() -> String {
    json!({"runs": [
        {"run": "lead-1", "doing": "waiting", "forMs": 5_000, "tool": "inbox", "toolMs": 12_000},
        {"run": "qa-1", "doing": "working", "forMs": 1_000},
        {"run": "dev-0", "doing": "exited", "code": 0, "signal": null, "forMs": 61_000,
         "tool": "message_send", "toolMs": 62_000},
    ]})
    .to_string()
}

/// `line` handed to `state` as the loop hands it: decoded at `NOW_MS`,
/// dropped when it is not an activity line.
fn feed_line(state: &mut State, line: &str) {
    if let Some(rows) = decode(line, NOW_MS) {
        state.handle_doing(rows);
    }
}

/// The loaded console on its Agents view, fed `line` at `NOW_MS`.
fn agents_with(line: &str) -> State {
    let mut state = loaded(vec![]);
    state.handle_key(Key::Tab);
    assert_eq!(state.view(), View::Agents);
    feed_line(&mut state, line);
    state
}

#[test]
fn a_line_decodes_to_each_run_anchored_at_the_time_it_was_read() {
    let rows = decode(&feed(), NOW_MS).expect("a line");
    assert_eq!(
        rows,
        [
            Doing {
                run: "lead-1".to_owned(),
                now: RunState::WaitingOnFeed,
                since_ms: NOW_MS - 5_000,
                tool: Some((Shown::of("inbox"), NOW_MS - 12_000)),
            },
            Doing {
                run: "qa-1".to_owned(),
                now: RunState::Working,
                since_ms: NOW_MS - 1_000,
                tool: None,
            },
            Doing {
                run: "dev-0".to_owned(),
                now: RunState::Exited(Exit {
                    status: Some(0),
                    signal: None
                }),
                since_ms: NOW_MS - 61_000,
                tool: Some((Shown::of("message_send"), NOW_MS - 62_000)),
            },
        ]
    );
    for bad in ["", "{", "[]", r#"{"runs":3}"#, r#"{"runs":[{"run":"x"}]}"#] {
        assert_eq!(decode(bad, NOW_MS), None, "{bad:?}");
    }
    // A state it does not know makes the line none: `up` writes the same
    // shape the console reads.
    let other = r#"{"runs":[{"run":"x","doing":"dreaming","forMs":0}]}"#;
    assert_eq!(decode(other, NOW_MS), None);
    assert_eq!(decode(r#"{"runs":[]}"#, NOW_MS), Some(vec![]));
}

#[test]
fn the_agents_view_shows_each_agent_s_state_last_tool_and_how_long_ago() {
    let state = agents_with(&feed());
    let screen = screen(&state, 120, 40);
    let lines: Vec<&str> = screen
        .lines()
        .map(|l| l.trim_matches('│').trim_end())
        .collect();
    // dev-1 waits on the human: the decision says more than the feed.
    // dev-0's exit is the feed's: the broker has not said it.
    for expected in [
        "> dev · run dev-0 · EXITED with status 0 · pi · pid 4240 · revoked",
        "      the agent's own word: last tool message_send, 1m ago · exited 1m ago",
        "  dev · run dev-1 · WAITING ON YOU · pi · pid 4242 · holding",
        "  lead · run lead-1 · waiting on the feed · pi · pid 4243 · holding",
        "      the agent's own word: last tool inbox, 12s ago · waiting on the feed for 5s",
        "  qa · run qa-1 · waiting on lead · pi · pid 4244 · holding",
        "      the agent's own word: no tool called yet · working for 1s",
    ] {
        assert!(lines.contains(&expected), "{expected:?} not in\n{screen}");
    }
    // Each detail line under its own run.
    let at = |text: &str| lines.iter().position(|l| l.contains(text)).expect(text);
    assert_eq!(at("last tool inbox") - 2, at("run lead-1"));
    assert_eq!(at("no tool called yet") - 2, at("run qa-1"));
    // The same feed, 60 s later: only the ages moved.
    let later = state.clone();
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 40)).expect("a terminal");
    terminal
        .draw(|frame| super::render::draw(frame, &later, NOW_MS + 60_000))
        .expect("draws");
    let text: String = terminal
        .backend()
        .buffer()
        .content()
        .iter()
        .map(ratatui::buffer::Cell::symbol)
        .collect();
    assert!(
        text.contains("last tool inbox, 1m ago · waiting on the feed for 1m"),
        "{text}"
    );
}

#[test]
fn the_broker_s_exit_wins_over_the_feed_s_state() {
    let mut state = loaded(vec![]);
    state.handle_key(Key::Tab);
    let mut team = super::tests::team(true);
    team[2]["exited"] = json!({"status": 3, "signal": null});
    answer(&mut state, Request::Agents, Ok(team));
    feed_line(&mut state, &feed());
    let screen = screen(&state, 120, 40);
    assert!(
        screen.contains("lead · run lead-1 · EXITED with status 3 (crashed) · pi · was pid 4243"),
        "{screen}"
    );
    assert!(screen.contains("last tool inbox, 12s ago"), "{screen}");
}

#[test]
fn a_hostile_feed_draws_no_control_character_and_stays_in_its_row() {
    let long = "t".repeat(64);
    let line = json!({"runs": [
        {"run": "lead-1", "doing": "working", "forMs": 0, "tool": "in\u{1b}[2Jbox", "toolMs": 0},
        {"run": "qa-1", "doing": "working", "forMs": 0, "tool": long, "toolMs": 0},
    ]})
    .to_string();
    let state = agents_with(&line);
    let screen = screen(&state, 80, 24);
    assert!(
        screen.contains("last tool ?, 0s ago · working for 0s"),
        "{screen}"
    );
    let cut = format!("last tool {}…, 0s ago", "t".repeat(31));
    assert!(screen.contains(&cut), "{screen}");
    assert!(!screen.contains('\u{1b}'), "{screen}");
}

#[test]
fn a_plain_console_or_a_bad_line_shows_the_view_as_before() {
    let plain = agents_with("not a line");
    assert!(!plain.tells_doing());
    let mut before = loaded(vec![]);
    before.handle_key(Key::Tab);
    assert_eq!(screen(&plain, 120, 40), screen(&before, 120, 40));
    assert!(screen(&plain, 120, 40).contains("lead · run lead-1 · running"));
    // A bad line after a good one keeps what the good one said.
    let mut fed = agents_with(&feed());
    feed_line(&mut fed, "{");
    assert!(fed.doing_of("lead-1").is_some());
    assert_eq!(fed.doing_of("nobody"), None);
}
