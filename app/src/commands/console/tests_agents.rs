//! The Agents view's acts: `Enter` opens a run whole (its state, what it
//! used, what the broker saw of it, the decisions it waits on, each
//! opened with `Enter`); `x` ends it after a prompt naming it; `S` orders
//! `up --console` to start an ended one again; a failed run is drawn in
//! red (bold under `NO_COLOR`) with its cause, and rings the bell once.

use ratatui::backend::TestBackend;
use ratatui::style::Color;
use ratatui::Terminal;
use serde_json::{json, Value};

use mosaic_domain::RunId;

use super::doing;
use super::render;
use super::request::Request;
use super::state::{Effect, Key, Prompt, State, View};
use super::tests::{answer, decision, drain, id, keys, loaded, screen, team, ID, NOW_MS};

fn run_id(run: &str) -> RunId {
    RunId::parse(run).expect("a run id")
}

/// `team`'s runs, with `dev-1`'s usage and restarts, and `qa-1` ended as
/// `ended` says.
fn team_with(ended: Value) -> Value {
    let mut team = team(true);
    let rows = team.as_array_mut().expect("rows");
    rows[1]["usage"] =
        json!({"turns": 4, "inputTokens": 5120, "outputTokens": 380, "costUsd": 0.0125});
    rows[1]["restarts"] = json!(2);
    rows[3]["ended"] = ended;
    rows[3]["holding"] = json!(false);
    team
}

fn console(ended: Value) -> State {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    answer(&mut state, Request::Agents, Ok(team_with(ended)));
    drain(&mut state);
    state.handle_key(Key::Tab);
    assert_eq!(state.view(), View::Agents);
    drain(&mut state);
    state
}

#[test]
fn enter_opens_a_run_whole_and_enter_on_its_decision_opens_that_decision() {
    let mut state = console(Value::Null);
    keys(&mut state, &[Key::Char('j'), Key::Enter]);
    assert_eq!(state.view(), View::Run);
    assert_eq!(drain(&mut state), [Effect::Send(Request::Agents)]);
    let text = screen(&state, 120, 40);
    for expected in [
        "Run dev/dev-1 · pi · pid 4242",
        "State: WAITING ON YOU",
        "the broker saw: last call changes",
        "Restarts inside the run: 2",
        "Used: 4 turns, 5120 tokens in, 380 out, $0.0125",
        "> release.publish on fix-42 · routed to human · BLOCKS a task",
    ] {
        assert!(text.contains(expected), "{expected:?} not in\n{text}");
    }
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Decision);
    assert_eq!(state.open().unwrap().decision.id, id(ID));
}

#[test]
fn x_asks_naming_the_role_and_the_run_and_y_sends_run_end_once() {
    let mut state = console(Value::Null);
    keys(&mut state, &[Key::Char('j'), Key::Char('x')]);
    let Prompt::Confirm(act) = state.prompt() else {
        panic!("asks: {:?}", state.prompt());
    };
    assert_eq!(
        act.question(),
        "End the run dev/dev-1? Its program is stopped and its role freed. y/n"
    );
    assert_eq!(drain(&mut state), [], "x only asks");
    state.handle_key(Key::Char('y'));
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::EndRun(run_id("dev-1")))]
    );
    answer(&mut state, Request::EndRun(run_id("dev-1")), Ok(json!({})));
    assert_eq!(
        state.status(),
        "the run is ended: its program is being stopped"
    );
    assert_eq!(drain(&mut state), [Effect::Send(Request::Agents)]);
}

fn failed() -> Value {
    json!({"at": "2026-01-01T10:05:00.000Z", "cause": "failed", "signal": 9})
}

#[test]
fn s_orders_up_to_start_an_ended_agent_again_only_under_up_console() {
    // A plain console: S says why it cannot.
    let mut state = console(failed());
    keys(
        &mut state,
        &[Key::Char('j'), Key::Char('j'), Key::Char('j')],
    );
    state.handle_key(Key::Char('S'));
    assert_eq!(*state.prompt(), Prompt::None);
    assert_eq!(
        state.status(),
        "S works under up --console only: this console was not started by up"
    );
    // Under up --console: S asks, and y hands the loop the order.
    let mut state = state.with_orders();
    state.handle_key(Key::Char('S'));
    let Prompt::Confirm(act) = state.prompt() else {
        panic!("asks: {:?}", state.prompt());
    };
    assert_eq!(
        act.question(),
        "Start the agent of qa/qa-1 again, as a new run? y/n"
    );
    state.handle_key(Key::Char('y'));
    assert_eq!(drain(&mut state), [Effect::Order(run_id("qa-1"))]);
    // A run that still runs is not started again: x ends it first.
    keys(&mut state, &[Key::Char('k'), Key::Char('S')]);
    assert_eq!(*state.prompt(), Prompt::None);
    assert_eq!(state.status(), "the run lead/lead-1 still runs: x ends it");
}

/// The foreground colour of the cells of the screen row holding `text`.
fn colour_of(state: &State, text: &str) -> Vec<Color> {
    let mut state = state.clone();
    state.handle_resize(120, 40);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("a terminal");
    terminal
        .draw(|frame| render::draw(frame, &state, NOW_MS))
        .expect("draws");
    let buffer = terminal.backend().buffer();
    let row = (0..40u16)
        .find(|y| {
            (0..120u16)
                .map(|x| buffer[(x, *y)].symbol())
                .collect::<String>()
                .contains(text)
        })
        .expect("the row is drawn");
    (0..120u16)
        .map(|x| buffer[(x, row)].fg)
        .filter(|c| *c != Color::Reset)
        .collect()
}

#[test]
fn a_failed_run_is_red_with_its_cause_rings_once_and_is_bold_only_without_colour() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]).with_colour(true);
    answer(&mut state, Request::Agents, Ok(team_with(failed())));
    assert_eq!(drain(&mut state), [Effect::Bell], "the failure rings");
    answer(&mut state, Request::Agents, Ok(team_with(failed())));
    assert_eq!(drain(&mut state), [], "once");
    state.handle_key(Key::Tab);
    let row = "qa · run qa-1 · ENDED (FAILED, killed by SIGKILL)";
    assert!(screen(&state, 120, 40).contains(row));
    let red = colour_of(&state, row);
    assert!(
        !red.is_empty() && red.iter().all(|c| *c == Color::Red),
        "{red:?}"
    );
    assert!(
        colour_of(&state, "lead · run lead-1").is_empty(),
        "a live run is plain"
    );
    let mono = state.clone().with_colour(false);
    assert!(colour_of(&mono, row).is_empty(), "NO_COLOR draws no colour");
}

#[test]
fn up_s_lives_say_which_budget_limit_the_signal_and_the_harness_s_error() {
    let line = json!({"runs": [], "lives": [
        {"run": "qa-1", "role": "qa", "state": "ended", "cause": "budget", "status": null,
         "signal": null, "signalName": null, "why": "budget", "limit": "turns", "restarts": 0},
        {"run": "lead-1", "role": "lead", "state": "ended", "cause": "failed", "status": 1,
         "signal": null, "signalName": null, "why": "restart-limit", "restarts": 5,
         "error": "529 overloaded_error\u{1b}[2J"},
        {"run": "dev-1", "role": "dev", "state": "restarting", "inMs": 1800, "restarts": 2}]})
    .to_string();
    let lives = doing::lives(&line).expect("a line");
    let words: Vec<(&str, bool)> = lives.iter().map(|l| (l.words.as_str(), l.failed)).collect();
    assert_eq!(
        words,
        [
            ("ENDED (budget: its turns limit was reached)", true),
            (
                "ENDED (failed, status 1; its restarts were spent; the harness said: \
                 529 overloaded_error⟨ESC⟩[2J)",
                true
            ),
            ("restarting in 2s", false),
        ]
    );
    let mut state = loaded(Vec::new());
    state.handle_lives(lives);
    assert_eq!(
        drain(&mut state),
        [Effect::Bell, Effect::Bell],
        "each failed run rings"
    );
    state.handle_key(Key::Tab);
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("qa · run qa-1 · ENDED (budget: its turns limit was reached)"),
        "{text}"
    );
}

#[test]
fn a_blocking_decision_is_yellow_in_the_inbox_and_plain_without_colour() {
    let state = loaded(vec![
        decision(ID, "release.publish", true),
        decision("0190a2b4-0000-7000-8000-000000000002", "repo.merge", false),
    ])
    .with_colour(true);
    let blocking = colour_of(&state, "release.publish on fix-42 · BLOCKS");
    assert!(
        !blocking.is_empty() && blocking.iter().all(|c| *c == Color::Yellow),
        "{blocking:?}"
    );
    assert!(colour_of(&state, "repo.merge on fix-42").is_empty());
    assert!(colour_of(
        &state.with_colour(false),
        "release.publish on fix-42 · BLOCKS"
    )
    .is_empty());
}
