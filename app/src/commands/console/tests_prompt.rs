//! The confirm prompt of a resolve: the note typed with `e` is shown
//! before `y/n`, cut to the terminal's width so that `y/n` stays; and it
//! warns first when the raiser's process is gone.

use serde_json::json;

use super::request::Request;
use super::state::{Key, Prompt, State};
use super::tests::{answer, decision, drain, keys, loaded, screen, team, ID};

/// The decision open, option 1 chosen, and asked to confirm.
fn asked(team: serde_json::Value) -> State {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    answer(&mut state, Request::Agents, Ok(team));
    drain(&mut state);
    state.handle_key(Key::Char(']'));
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    assert!(
        matches!(state.prompt(), Prompt::Confirm(_)),
        "{:?}",
        state.prompt()
    );
    drain(&mut state);
    state
}

fn noted(state: &mut State, note: &str) {
    state.handle_key(Key::Char('e'));
    keys(state, &note.chars().map(Key::Char).collect::<Vec<_>>());
    state.handle_key(Key::Enter);
    assert!(
        matches!(state.prompt(), Prompt::Confirm(_)),
        "{:?}",
        state.prompt()
    );
}

/// The screen's bottom line, inside no frame.
fn bottom(state: &State, width: u16, height: u16) -> String {
    let text = screen(state, width, height);
    text.lines()
        .last()
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

#[test]
fn the_note_is_shown_before_y_and_a_long_one_is_cut_so_y_n_stays() {
    let mut state = asked(team(true));
    let plain = bottom(&state, 120, 40);
    assert!(
        plain.ends_with("? y/n") && !plain.contains("Note"),
        "{plain}"
    );
    noted(&mut state, "ship it");
    let line = bottom(&state, 120, 40);
    assert!(line.ends_with("? Note: \"ship it\". y/n"), "{line}");
    assert!(line.starts_with(plain.trim_end_matches(" y/n")), "{line}");

    noted(&mut state, &" and then some more words".repeat(8));
    let line = bottom(&state, 100, 40);
    assert!(line.ends_with("…\". y/n"), "{line}");
    assert!(line.contains("Note: \"ship it and then"), "{line}");
}

#[test]
fn the_prompt_warns_first_when_the_raiser_is_gone() {
    let state = asked(team(true));
    assert!(!bottom(&state, 120, 40).contains("GONE"));

    let mut gone = team(true);
    gone[1]["exited"] = json!({"status": 1, "signal": null});
    // Asked at 80x24: the warning still leaves the prompt resolvable there.
    let state = asked(gone);
    let line = bottom(&state, 80, 24);
    assert!(line.starts_with("Raiser GONE: "), "{line}");
    assert!(
        line.contains("Grant release.publish on fix-42 to dev/dev-1"),
        "{line}"
    );
    assert!(line.ends_with("? y/n"), "{line}");
}

proptest::proptest! {
    /// Whatever note the human typed and however wide the terminal is
    /// (from the decision's need up), the prompt fits on one line and
    /// ends in `y/n`, the note neutralised.
    #[test]
    fn any_note_leaves_a_prompt_that_fits_and_ends_in_y_n(
        note in "\\PC{0,120}|[\\x00-\\x1f]{1,8}",
        extra in 0usize..80,
    ) {
        use super::grant::{need, prompt_with, Raiser};
        use super::lines::width;
        let state = asked(team(true));
        let open = state.open().expect("open");
        let raiser = Raiser::of(&open.decision, state.agents());
        let columns = usize::from(need(&open.decision, &raiser, false).width) + extra;
        let line = prompt_with(&open.decision, 0, &raiser, &note, columns);
        proptest::prop_assert!(width(&line) <= columns, "{} > {}: {}", width(&line), columns, line);
        proptest::prop_assert!(line.ends_with("y/n"), "{}", line);
        proptest::prop_assert!(!line.chars().any(char::is_control), "{}", line);
    }
}
