//! The selection by id: `]` visits every waiting decision, blocking ones
//! first, and wraps; the inbox's selection stays on the row the human
//! reads when rows arrive above it or leave, and a line says what
//! changed.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::request::Request;
use super::state::{Key, Pick, State, View};
use super::tests::{answer, changes, decision, drain, id, loaded};

/// The decision id numbered `n`.
fn nth(n: usize) -> String {
    format!("0190a2b4-0000-7000-8000-{n:012}")
}

/// An inbox of decisions `ns`, each blocking as its flag says, in that
/// order.
fn inbox_of(ns: &[(usize, bool)]) -> Vec<Value> {
    ns.iter()
        .map(|(n, blocking)| decision(&nth(*n), "release.publish", *blocking))
        .collect()
}

/// Presses `]` and returns the decision it opened.
fn bracket(state: &mut State) -> String {
    state.handle_key(Key::Char(']'));
    drain(state);
    state
        .open()
        .expect("a decision opened")
        .decision
        .id
        .to_string()
}

#[test]
fn bracket_reaches_a_third_decision_past_two_blocking_ones_and_wraps() {
    let mut state = loaded(inbox_of(&[(1, true), (2, true), (3, false)]));
    let visits: Vec<String> = (0..4).map(|_| bracket(&mut state)).collect();
    assert_eq!(visits, [nth(1), nth(2), nth(3), nth(1)]);
}

#[test]
fn bracket_with_one_decision_open_says_nothing_else_waits() {
    let mut state = loaded(inbox_of(&[(1, true)]));
    assert_eq!(bracket(&mut state), nth(1));
    state.handle_key(Key::Char(']'));
    assert_eq!(state.status(), "nothing else is waiting on you");
}

proptest! {
    /// Over any inbox, as many `]` as there are decisions open each one
    /// once, every blocking one before any other, and the next wraps to
    /// the first.
    #[test]
    fn bracket_visits_every_waiting_decision_once_blocking_first(
        flags in proptest::collection::vec(any::<bool>(), 1..8)
    ) {
        let ns: Vec<(usize, bool)> = flags.iter().copied().enumerate().collect();
        let mut state = loaded(inbox_of(&ns));
        let visits: Vec<String> = (0..ns.len()).map(|_| bracket(&mut state)).collect();
        let mut expected: Vec<&(usize, bool)> = ns.iter().collect();
        expected.sort_by_key(|(_, blocking)| !blocking);
        let expected: Vec<String> = expected.iter().map(|(n, _)| nth(*n)).collect();
        prop_assert_eq!(&visits, &expected);
        if ns.len() > 1 {
            prop_assert_eq!(bracket(&mut state), expected[0].clone());
        }
    }
}

#[test]
fn a_twin_raised_above_the_selection_does_not_move_it_and_a_line_says_so() {
    let mut state = loaded(inbox_of(&[(1, true), (2, false)]));
    state.handle_key(Key::Char('j'));
    assert_eq!(state.picked(), Some(Pick::Decision(id(&nth(2)))));
    // A twin of the second arrives above both.
    answer(
        &mut state,
        Request::Inbox,
        Ok(Value::Array(inbox_of(&[(3, true), (1, true), (2, false)]))),
    );
    drain(&mut state);
    assert_eq!(
        state.selected(),
        2,
        "the selection follows the id to its row"
    );
    assert_eq!(state.picked(), Some(Pick::Decision(id(&nth(2)))));
    assert_eq!(
        state.status(),
        "1 new decision above the one you are reading: the selection stays on it"
    );
    // Enter opens the decision read, not the row's new holder.
    state.handle_key(Key::Enter);
    assert_eq!(state.open().unwrap().decision.id, id(&nth(2)));
}

#[test]
fn a_decision_withdrawn_under_the_reader_is_named_and_the_selection_moves_by_row() {
    let mut state = loaded(inbox_of(&[(1, true), (2, false), (3, false)]));
    state.handle_key(Key::Char('j'));
    changes(
        &mut state,
        json!({"cursor": 9, "changes": [
            {"seq": 9, "kind": "decision.withdrawn", "decision": nth(2)}]}),
    );
    drain(&mut state);
    answer(
        &mut state,
        Request::Inbox,
        Ok(Value::Array(inbox_of(&[(1, true), (3, false)]))),
    );
    assert_eq!(
        state.status(),
        "the decision you were reading (from dev/dev-1: release.publish) was withdrawn"
    );
    assert_eq!(state.selected(), 1);
    assert_eq!(state.picked(), Some(Pick::Decision(id(&nth(3)))));
}

#[test]
fn back_in_the_inbox_the_selection_is_on_the_row_read_wherever_it_moved() {
    let mut state = loaded(inbox_of(&[(1, true), (2, false)]));
    state.handle_key(Key::Char('j'));
    state.handle_key(Key::Tab);
    assert_eq!(state.view(), View::Agents);
    answer(
        &mut state,
        Request::Inbox,
        Ok(Value::Array(inbox_of(&[
            (4, true),
            (5, true),
            (1, true),
            (2, false),
        ]))),
    );
    state.handle_key(Key::Esc);
    assert_eq!(state.view(), View::Inbox);
    assert_eq!(state.selected(), 3);
}

/// Presses `]` and returns the request it sent for the decisions beyond
/// the listed ones, if it sent one.
fn bracket_asks(state: &mut State) -> Option<Request> {
    state.handle_key(Key::Char(']'));
    drain(state).into_iter().find_map(|effect| match effect {
        super::act::Effect::Send(request @ Request::Beyond(_)) => Some(request),
        super::act::Effect::Send(_)
        | super::act::Effect::Bell
        | super::act::Effect::Notify(_)
        | super::act::Effect::Order(_)
        | super::act::Effect::Quit => None,
    })
}

/// An inbox of decisions `ns` (none blocking) that left `left` out.
fn flooded(ns: &[usize], left: u64) -> State {
    let mut items = inbox_of(&ns.iter().map(|n| (*n, false)).collect::<Vec<_>>());
    items.push(json!({"type": "more", "unread": 0, "decisions": left}));
    loaded(items)
}

#[test]
fn past_the_last_listed_decision_bracket_asks_for_the_next_page_and_opens_it() {
    let mut state = flooded(&[1, 2], 2);
    let screen = super::tests::screen(&state, 120, 40);
    assert!(
        screen.contains("Inbox · 2 more decisions beyond these"),
        "{screen}"
    );
    assert!(
        screen.contains("2 more waiting decisions beyond these: ] reaches each in turn"),
        "{screen}"
    );
    assert_eq!(bracket(&mut state), nth(1));
    assert_eq!(bracket(&mut state), nth(2));
    // The last one listed: the broker is asked for those after it.
    let ask = bracket_asks(&mut state).expect("a page asked for");
    assert_eq!(ask, Request::Beyond(id(&nth(2))));
    answer(
        &mut state,
        ask,
        Ok(Value::Array(inbox_of(&[(3, false), (4, false)]))),
    );
    drain(&mut state);
    let open = state.open().expect("the page's first");
    assert_eq!(open.decision.id.to_string(), nth(3));
    // An inbox read again does not take it for gone: it waits beyond.
    let mut again = inbox_of(&[(1, false), (2, false)]);
    again.push(json!({"type": "more", "unread": 0, "decisions": 2}));
    answer(&mut state, Request::Inbox, Ok(Value::Array(again)));
    assert_eq!(
        state.open().expect("open").state,
        super::state::DecisionState::Waiting
    );
    // From it, the next page again; past the last of all, the first.
    let ask = bracket_asks(&mut state).expect("a page asked for");
    assert_eq!(ask, Request::Beyond(id(&nth(3))));
    answer(&mut state, ask, Ok(Value::Array(inbox_of(&[(4, false)]))));
    let ask = bracket_asks(&mut state).expect("a page asked for");
    assert_eq!(ask, Request::Beyond(id(&nth(4))));
    answer(&mut state, ask, Ok(json!([])));
    assert_eq!(state.open().expect("open").decision.id.to_string(), nth(1));
}

#[test]
fn a_page_after_a_decision_that_closed_starts_again_at_the_first() {
    let mut state = flooded(&[1, 2], 5);
    bracket(&mut state);
    bracket(&mut state);
    let ask = bracket_asks(&mut state).expect("a page asked for");
    answer(&mut state, ask, Err(mosaic_domain::Refusal::DecisionClosed));
    assert_eq!(state.open().expect("open").decision.id.to_string(), nth(1));
    // One that is none of the human's (a role's, opened from a citation)
    // is not in the human's inbox either.
    bracket(&mut state);
    let ask = bracket_asks(&mut state).expect("a page asked for");
    answer(
        &mut state,
        ask,
        Err(mosaic_domain::Refusal::UnknownReference),
    );
    assert_eq!(state.open().expect("open").decision.id.to_string(), nth(1));
}

#[test]
fn an_inbox_that_lists_every_decision_never_asks_for_more() {
    let mut state = flooded(&[1, 2], 0);
    bracket(&mut state);
    bracket(&mut state);
    assert_eq!(bracket_asks(&mut state), None);
    assert_eq!(state.open().expect("open").decision.id.to_string(), nth(1));
}
