//! The filter: `/` narrows a list at each key to the rows whose drawn
//! words hold the typed text, case-insensitively, by role or by kind;
//! `Enter` keeps it, `Esc` clears it; the selection only rests on a row
//! shown; `]` still reaches every waiting decision; the screen says that
//! the list is shortened.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::request::Request;
use super::rows::message_row;
use super::state::{Key, Prompt, State, View};
use super::tests::{answer, changes, decision, drain, keys, loaded, screen, ID};

/// The message numbered `n`, from `role`, saying `body`.
fn message(n: usize, role: &str, body: &str) -> Value {
    json!({"type": "message", "id": format!("0190a2b4-0000-7000-8000-{:012}", 100 + n),
           "from": role, "from_run": format!("{role}-1"), "class": "INFO", "body": body,
           "to": "human", "corrects": null, "decision": null, "in_reply_to": null,
           "request": null})
}

/// An inbox: the decision `ID` raised by dev (row 0), then messages from
/// qa (rows 1 and 2) and lead (row 3).
fn day() -> State {
    loaded(vec![
        decision(ID, "release.publish", true),
        message(1, "qa", "the tests pass"),
        message(2, "qa", "one flaky test"),
        message(3, "lead", "plan for Monday"),
    ])
}

fn typed(state: &mut State, text: &str) {
    keys(state, &text.chars().map(Key::Char).collect::<Vec<_>>());
}

fn kept(state: &State) -> Vec<usize> {
    state.kept().expect("a filter narrows the list").0
}

#[test]
fn each_key_narrows_the_inbox_by_role_case_insensitively() {
    let mut state = day();
    state.handle_key(Key::Char('/'));
    assert_eq!(*state.prompt(), Prompt::Filter(String::new()));
    typed(&mut state, "L");
    assert_eq!(kept(&state), [0, 2, 3], "release, flaky, lead");
    typed(&mut state, "EA");
    assert_eq!(kept(&state), [0, 3], "release, lead");
    typed(&mut state, "d");
    assert_eq!(kept(&state), [3]);
    for _ in 0..4 {
        state.handle_key(Key::Backspace);
    }
    typed(&mut state, "QA/");
    assert_eq!(kept(&state), [1, 2]);
    assert_eq!(state.kept().map(|(_, all)| all), Some(4));
}

#[test]
fn enter_keeps_the_filter_and_esc_clears_it() {
    let mut state = day();
    state.handle_key(Key::Char('/'));
    typed(&mut state, "qa");
    state.handle_key(Key::Enter);
    assert_eq!(*state.prompt(), Prompt::None);
    assert_eq!(state.filter(), Some("qa"));
    assert_eq!(kept(&state), [1, 2]);
    // `/` again starts from the kept filter; Esc there clears it.
    state.handle_key(Key::Char('/'));
    assert_eq!(*state.prompt(), Prompt::Filter("qa".to_owned()));
    state.handle_key(Key::Esc);
    assert_eq!(state.filter(), None);
    assert_eq!(state.kept(), None);
    assert_eq!(state.view(), View::Inbox);
    // A kept filter is cleared by Esc in the list, which stays on screen.
    state.handle_key(Key::Char('/'));
    typed(&mut state, "lead");
    state.handle_key(Key::Enter);
    state.handle_key(Key::Esc);
    assert_eq!(state.filter(), None);
    assert_eq!(state.view(), View::Inbox);
    assert_eq!(
        state.status(),
        "the filter was cleared: the whole list shows"
    );
}

#[test]
fn a_hidden_selection_moves_to_the_first_row_shown_and_j_skips_hidden_rows() {
    let mut state = day();
    keys(
        &mut state,
        &[Key::Char('j'), Key::Char('j'), Key::Char('j')],
    );
    assert_eq!(state.selected(), 3);
    state.handle_key(Key::Char('/'));
    typed(&mut state, "l");
    // Row 3 ("lead", "plan") is still shown: the selection stays.
    assert_eq!(kept(&state), [0, 2, 3]);
    assert_eq!(state.selected(), 3);
    state.handle_key(Key::Backspace);
    typed(&mut state, "t");
    // Row 3 has no "t": the selection goes to the first row shown.
    assert_eq!(kept(&state), [0, 1, 2]);
    assert_eq!(state.selected(), 0);
    state.handle_key(Key::Enter);
    state.handle_key(Key::Char('j'));
    state.handle_key(Key::Char('j'));
    assert_eq!(state.selected(), 2);
    state.handle_key(Key::Char('j'));
    assert_eq!(state.selected(), 2, "no row below is shown");
    state.handle_key(Key::Char('/'));
    state.handle_key(Key::Backspace);
    typed(&mut state, "the");
    state.handle_key(Key::Enter);
    // "the tests pass" and the decision's "Publish the fix?".
    assert_eq!(kept(&state), [0, 1]);
    assert_eq!(state.selected(), 0);
    state.handle_key(Key::Char('j'));
    assert_eq!(state.selected(), 1);
    state.handle_key(Key::Char('k'));
    assert_eq!(state.selected(), 0);
}

#[test]
fn a_filter_never_hides_a_waiting_decision_from_bracket() {
    let mut state = day();
    state.handle_key(Key::Char('/'));
    typed(&mut state, "lead");
    state.handle_key(Key::Enter);
    assert_eq!(kept(&state), [3]);
    state.handle_key(Key::Char(']'));
    assert_eq!(state.view(), View::Decision);
    assert_eq!(
        state.open().map(|o| o.decision.id.to_string()),
        Some(ID.to_owned())
    );
    // Back in the inbox, the decision's row is filtered out: the
    // selection rests on the row shown.
    drain(&mut state);
    state.handle_key(Key::Esc);
    assert_eq!(state.view(), View::Inbox);
    assert_eq!(state.selected(), 3);
}

#[test]
fn with_no_row_shown_enter_opens_nothing() {
    let mut state = day();
    state.handle_key(Key::Char('/'));
    typed(&mut state, "nobody says this");
    state.handle_key(Key::Enter);
    assert_eq!(kept(&state), Vec::<usize>::new());
    drain(&mut state);
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Inbox);
    assert_eq!(state.status(), "the filter shows no row: Esc clears it");
    assert_eq!(drain(&mut state), []);
}

#[test]
fn a_hidden_character_neither_makes_a_row_match_nor_hides_it() {
    let mut state = loaded(vec![
        message(1, "qa", "de\u{200b}ploy now"),
        message(2, "qa", "deploy now"),
    ]);
    state.handle_key(Key::Char('/'));
    typed(&mut state, "deploy");
    assert_eq!(
        kept(&state),
        [1],
        "the row with the hidden character drew a token"
    );
    state.handle_key(Key::Esc);
    state.handle_key(Key::Char('/'));
    typed(&mut state, "u+200b");
    assert_eq!(kept(&state), [0], "the token is what the human reads");
}

#[test]
fn activity_filters_by_kind() {
    let mut state = loaded(Vec::new());
    changes(
        &mut state,
        json!({"cursor": 3, "changes": [
            {"seq": 1, "kind": "decision.raised", "decision": ID},
            {"seq": 2, "kind": "message.sent", "role": "dev"},
            {"seq": 3, "kind": "decision.resolved", "decision": ID}]}),
    );
    drain(&mut state);
    state.handle_key(Key::Tab);
    while state.view() != View::Activity {
        state.handle_key(Key::Tab);
    }
    state.handle_key(Key::Char('/'));
    typed(&mut state, "decision.raised");
    // Newest first: the raise is the last row.
    assert_eq!(kept(&state), [2]);
    assert_eq!(state.selected(), 2);
    state.handle_key(Key::Esc);
    state.handle_key(Key::Char('/'));
    typed(&mut state, "DEV");
    assert_eq!(kept(&state), [1], "by role");
}

#[test]
fn each_list_keeps_its_own_filter() {
    let mut state = day();
    state.handle_key(Key::Char('/'));
    typed(&mut state, "qa");
    state.handle_key(Key::Enter);
    state.handle_key(Key::Tab);
    assert_eq!(state.view(), View::Agents);
    assert_eq!(state.filter(), None);
    state.handle_key(Key::Char('/'));
    typed(&mut state, "lead");
    state.handle_key(Key::Enter);
    // qa-1 waits on lead: its waits line holds "lead" too.
    assert_eq!(
        kept(&state),
        [2, 3],
        "lead-1 and qa-1 of dev-0, dev-1, lead-1, qa-1"
    );
    state.handle_key(Key::Char('/'));
    typed(&mut state, "-1");
    state.handle_key(Key::Enter);
    assert_eq!(kept(&state), [2]);
    state.handle_key(Key::Char('/'));
    for _ in 0.."lead-1".len() {
        state.handle_key(Key::Backspace);
    }
    typed(&mut state, "waits on lead");
    state.handle_key(Key::Enter);
    assert_eq!(kept(&state), [3]);
    answer(&mut state, Request::Agents, Ok(super::tests::team(true)));
    assert_eq!(state.selected(), 3);
}

#[test]
fn the_screen_says_the_list_is_filtered() {
    let mut state = day();
    state.handle_key(Key::Char('/'));
    typed(&mut state, "qa");
    let text = screen(&state, 80, 24);
    assert!(text.contains("filter: qa (2 of 4)"), "{text}");
    assert!(
        text.contains("Filter (Enter keeps, Esc clears): qa_"),
        "{text}"
    );
    assert!(text.contains("the tests pass"), "{text}");
    assert!(text.contains("one flaky test"), "{text}");
    assert!(!text.contains("plan for Monday"), "{text}");
    assert!(!text.contains("decision · dev/dev-1"), "{text}");
    state.handle_key(Key::Enter);
    let text = screen(&state, 80, 24);
    assert!(text.contains("filter: qa (2 of 4)"), "kept: {text}");
}

proptest! {
    /// Over any inbox of messages and any filter typed, the rows kept
    /// are exactly those whose drawn row holds the filter (trimmed, as
    /// `Enter` keeps it), case-insensitively, and the screen draws
    /// exactly that many rows.
    #[test]
    fn any_filter_keeps_exactly_the_rows_whose_drawn_text_holds_it(
        rows in proptest::collection::vec(
            (prop::sample::select(vec!["qa", "dev", "lead", "devops"]),
             "[a-zA-Z éİ.·\u{200b}\u{3164}]{0,12}"),
            0..8),
        filter in "[a-zA-Z éİ.·]{0,4}",
    ) {
        let inbox: Vec<Value> = rows
            .iter()
            .enumerate()
            .map(|(n, (role, body))| message(n, role, body))
            .collect();
        let mut state = loaded(inbox);
        state.handle_key(Key::Char('/'));
        typed(&mut state, &filter);
        state.handle_key(Key::Enter);
        let needle = filter.trim().to_lowercase();
        let expected: Vec<usize> = state
            .inbox()
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| message_row(m).to_lowercase().contains(&needle))
            .map(|(row, _)| row)
            .collect();
        let all: Vec<usize> = (0..rows.len()).collect();
        let kept = state.kept().map_or(all, |(kept, _)| kept);
        prop_assert_eq!(&kept, &expected);
        let text = screen(&state, 200, 30);
        let drawn = text
            .lines()
            .filter(|line| line.starts_with("│> message") || line.starts_with("│  message"))
            .count();
        prop_assert_eq!(drawn, expected.len(), "{}", text);
        if !expected.is_empty() {
            prop_assert!(kept.contains(&state.selected()), "the selection rests on a row shown");
        }
    }
}
