//! A row opened whole: `Enter` on a trail record or a change shows every
//! field of it, wrapped and scrolled; `Esc` goes back to the list on the
//! same row; a change's `Enter` opens the message it names; the Run view
//! wraps its lines rather than cutting them.

use serde_json::{json, Value};

use super::doing::Life;
use super::model::Shown;
use super::request::Request;
use super::state::{Key, State, View};
use super::tests::{answer, changes, decision, drain, keys, loaded, raised, screen, ID};

/// A note of numbered words, `count` of them: each word read on screen
/// is one of them, and all of them is the note whole.
fn note(count: usize) -> String {
    (0..count)
        .map(|i| format!("w{i:04}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The human's resolve of `ID`, with `note`.
fn resolved(note: &str) -> Value {
    json!({"kind": "decision.resolved", "at": "2026-01-01T10:05:00.000Z",
           "business": "acme", "id": ID, "choice": "yes", "by": "human",
           "by_run": null, "note": note})
}

/// The Trail view over `ID`'s trail: its raise, then a resolve with
/// `note`; the resolve selected.
fn trail_with(note: &str) -> State {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    state.handle_key(Key::Char(']'));
    drain(&mut state);
    answer(
        &mut state,
        Request::Trail(ID.to_owned()),
        Ok(json!([raised(ID), resolved(note)])),
    );
    while state.view() != View::Trail {
        state.handle_key(Key::Tab);
    }
    drain(&mut state);
    state.handle_key(Key::Char('j'));
    assert_eq!(state.selected(), 1);
    state
}

/// The words `w0000`... on the screen's body.
fn words_on(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() == 5 && w.starts_with('w'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_trail_record_with_a_long_note_reads_whole_by_scrolling() {
    let long = note(500);
    assert!(long.len() >= 2_999);
    let mut state = trail_with(&long);
    state.handle_key(Key::Enter);
    assert!(state.detail().is_some());
    assert_eq!(state.view(), View::Trail);
    let first = screen(&state, 80, 24);
    assert!(first.contains("the human resolved it with yes"), "{first}");
    assert!(first.contains("kind: decision.resolved"), "{first}");
    assert!(first.contains("actor: the human"), "{first}");
    assert!(first.contains(&format!("trail of: {ID}")), "{first}");
    assert!(first.contains("choice: yes"), "{first}");
    let mut seen: Vec<String> = words_on(&first);
    // j and PgDn scroll until the scroll stops; every word passes by.
    loop {
        let before = state.scroll();
        state.handle_key(Key::PageDown);
        state.handle_key(Key::Char('j'));
        if state.scroll() == before {
            break;
        }
        seen.extend(words_on(&screen(&state, 80, 24)));
    }
    let expected: Vec<String> = (0..500).map(|i| format!("w{i:04}")).collect();
    for word in &expected {
        assert!(seen.contains(word), "{word} never shown");
    }
    let last = screen(&state, 80, 24);
    assert!(
        last.contains("w0499"),
        "the end of the note is on screen: {last}"
    );
    state.handle_key(Key::PageUp);
    assert!(state.scroll() > 0);
    state.handle_key(Key::Char('k'));
    // Esc: the list again, on the same row.
    state.handle_key(Key::Esc);
    assert!(state.detail().is_none());
    assert_eq!(state.view(), View::Trail);
    assert_eq!(state.selected(), 1);
    assert_eq!(state.scroll(), 0);
}

#[test]
fn opening_a_row_whole_changes_what_the_screen_shows() {
    let mut state = trail_with("short");
    let list = state.shows();
    state.handle_key(Key::Enter);
    assert_ne!(state.shows(), list, "the whole screen is drawn again");
    state.handle_key(Key::Esc);
    assert_eq!(state.shows(), list);
}

#[test]
fn agent_text_in_a_record_is_drawn_neutralised() {
    let mut state = trail_with("safe\u{1b}[2Jreviewed\u{3164}");
    state.handle_key(Key::Enter);
    let text = screen(&state, 80, 24);
    assert!(
        text.contains("note: safe⟨ESC⟩[2Jreviewed⟨U+3164⟩"),
        "{text}"
    );
}

#[test]
fn a_change_opens_whole_and_enter_opens_the_message_it_names() {
    let message = "0190a2b4-0000-7000-8000-000000000009";
    let mut state = loaded(vec![json!({"type": "message", "id": message, "from": "qa",
        "from_run": "qa-1", "to": "human", "class": null, "body": "the tests pass",
        "corrects": null, "decision": null, "in_reply_to": null, "request": null})]);
    changes(
        &mut state,
        json!({"cursor": 2, "changes": [
            {"seq": 1, "kind": "decision.raised", "decision": ID},
            {"seq": 2, "kind": "message.sent", "message": message, "role": "qa"}]}),
    );
    drain(&mut state);
    while state.view() != View::Activity {
        state.handle_key(Key::Tab);
    }
    drain(&mut state);
    state.handle_key(Key::Enter);
    let text = screen(&state, 80, 24);
    assert!(text.contains("kind: message.sent"), "{text}");
    assert!(text.contains(&format!("message {message}")), "{text}");
    assert!(text.contains("role qa"), "{text}");
    assert!(text.contains("Enter opens the message it names."), "{text}");
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Message);
    assert_eq!(
        state.message().map(|m| m.id.to_string()),
        Some(message.to_owned())
    );
    // Back in Activity: the list.
    while state.view() != View::Activity {
        state.handle_key(Key::Tab);
    }
    assert!(state.detail().is_none());
}

#[test]
fn the_run_view_wraps_every_line_whole() {
    let mut state = loaded(Vec::new());
    let error = format!("harness said: {}", note(40));
    state.handle_lives(vec![Life {
        run: "dev-1".to_owned(),
        role: Shown::of("dev"),
        words: "running".to_owned(),
        running: true,
        sleeping: false,
        ended: false,
        failed: false,
        restarts: 0,
        usage: None,
        error: Some(Shown::of(&error)),
        output: None,
    }]);
    state.handle_key(Key::Tab);
    assert_eq!(state.view(), View::Agents);
    keys(&mut state, &[Key::Char('j'), Key::Enter]);
    assert_eq!(state.view(), View::Run);
    let text = screen(&state, 80, 24);
    let words = words_on(&text);
    for i in 0..40 {
        assert!(words.contains(&format!("w{i:04}")), "w{i:04} cut: {text}");
    }
}

#[test]
fn another_subject_typed_with_t_closes_the_record_opened() {
    let mut state = trail_with("short");
    state.handle_key(Key::Enter);
    assert!(state.detail().is_some());
    // `t` asks for a subject, here the same one: its trail is read again
    // and shown from its top, as a list.
    state.handle_key(Key::Char('t'));
    for c in ID.chars() {
        state.handle_key(Key::Char(c));
    }
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Trail);
    assert!(state.detail().is_none());
    assert_eq!(state.selected(), 0);
}

/// Scrolls the open record down with `j` until the scroll stops, and
/// returns every numbered word the screen showed on the way.
fn scrolled_words(state: &mut State, width: u16, height: u16) -> Vec<String> {
    let mut seen = words_on(&screen(state, width, height));
    loop {
        let before = state.scroll();
        state.handle_key(Key::Char('j'));
        if state.scroll() == before {
            return seen;
        }
        seen.extend(words_on(&screen(state, width, height)));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// At any size, a record's note of any length reads whole by
    /// scrolling, and the scroll stops with its last word on screen.
    #[test]
    fn any_note_reads_whole_by_scrolling_at_any_size(
        count in 1usize..400,
        width in 40u16..140,
        height in 14u16..50,
    ) {
        let mut state = trail_with(&note(count));
        state.handle_resize(width, height);
        state.handle_key(Key::Enter);
        let seen = scrolled_words(&mut state, width, height);
        for i in 0..count {
            let word = format!("w{i:04}");
            proptest::prop_assert!(seen.contains(&word), "{} never shown", word);
        }
        let last = format!("w{:04}", count - 1);
        proptest::prop_assert!(
            words_on(&screen(&state, width, height)).contains(&last),
            "the scroll stops before the end"
        );
    }
}

#[test]
fn a_trail_filtered_by_kind_opens_the_record_it_keeps() {
    let mut state = trail_with("short");
    state.handle_key(Key::Char('k'));
    assert_eq!(state.selected(), 0);
    state.handle_key(Key::Char('/'));
    for c in "decision.RESOLVED".chars() {
        state.handle_key(Key::Char(c));
    }
    state.handle_key(Key::Enter);
    assert_eq!(state.kept(), Some((vec![1], 2)));
    assert_eq!(state.selected(), 1);
    state.handle_key(Key::Enter);
    let text = screen(&state, 80, 24);
    assert!(text.contains("kind: decision.resolved"), "{text}");
    // Esc closes the record first, then clears the filter.
    state.handle_key(Key::Esc);
    assert!(state.detail().is_none());
    assert_eq!(state.filter(), Some("decision.RESOLVED"));
    state.handle_key(Key::Esc);
    assert_eq!(state.filter(), None);
    assert_eq!(state.view(), View::Trail);
}
