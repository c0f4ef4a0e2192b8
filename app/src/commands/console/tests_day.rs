//! A working day's details: NO LONGER WAITING says what happened, a
//! question about a decision that went is taken away, `m` refuses the
//! human and warns of a role nobody holds, `R` replies to a message's
//! sender, Activity lists the newest change first in words, and marking
//! every message read asks first, naming the count.

use serde_json::json;

use super::request::Request;
use super::state::{Effect, Key, Prompt, State, View};
use super::tests::{answer, changes, decision, drain, keys, loaded, screen, ID};

fn typed(state: &mut State, text: &str) {
    keys(state, &text.chars().map(Key::Char).collect::<Vec<_>>());
}

fn opened() -> State {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    state.handle_key(Key::Char(']'));
    drain(&mut state);
    state
}

fn withdrawn(state: &mut State) {
    changes(
        state,
        json!({"cursor": 9, "changes": [
            {"seq": 9, "kind": "decision.withdrawn", "decision": ID}]}),
    );
    drain(state);
}

#[test]
fn no_longer_waiting_says_what_happened() {
    let mut state = opened();
    withdrawn(&mut state);
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("NO LONGER WAITING: withdrawn. Its keys are off."),
        "{text}"
    );
}

#[test]
fn the_question_about_a_decision_that_went_is_taken_away() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    assert!(matches!(state.prompt(), Prompt::Confirm(_)));
    withdrawn(&mut state);
    assert_eq!(*state.prompt(), Prompt::None);
    assert_eq!(
        state.status(),
        "no longer waiting: the question was taken away, nothing was sent"
    );
    state.handle_key(Key::Char('y'));
    assert_eq!(drain(&mut state), [], "y asks nothing any more");
}

#[test]
fn m_refuses_the_human_and_names_a_role_nobody_holds() {
    let mut state = loaded(Vec::new());
    state.handle_key(Key::Char('m'));
    typed(&mut state, "human");
    state.handle_key(Key::Enter);
    assert_eq!(*state.prompt(), Prompt::None);
    assert_eq!(
        state.status(),
        "\"human\" is you: m sends to an agent's role; nothing was sent"
    );
    state.handle_key(Key::Char('m'));
    typed(&mut state, "ops");
    state.handle_key(Key::Enter);
    typed(&mut state, "hi");
    state.handle_key(Key::Enter);
    let Prompt::Confirm(act) = state.prompt() else {
        panic!("asks: {:?}", state.prompt());
    };
    assert_eq!(
        act.question(),
        "Nobody holds \"ops\" now: it waits until a run claims the role. Send it the message \
         \"hi\"? y/n"
    );
    state.handle_key(Key::Esc);
    state.handle_key(Key::Char('m'));
    typed(&mut state, "lead");
    state.handle_key(Key::Enter);
    typed(&mut state, "hi");
    state.handle_key(Key::Enter);
    let Prompt::Confirm(act) = state.prompt() else {
        panic!("asks: {:?}", state.prompt());
    };
    assert_eq!(act.question(), "Send \"lead\" the message \"hi\"? y/n");
}

#[test]
fn r_replies_to_the_sender_s_role() {
    let mut state = loaded(Vec::new());
    answer(
        &mut state,
        Request::Inbox,
        Ok(
            json!([{"type": "message", "id": "0190a2b4-0000-7000-8000-000000000009",
                   "from": "qa", "from_run": "qa-1", "to": "human", "class": null,
                   "body": "tests are green", "corrects": null, "decision": null,
                   "in_reply_to": null, "request": null}]),
        ),
    );
    drain(&mut state);
    state.handle_key(Key::Char('R'));
    assert_eq!(
        *state.prompt(),
        Prompt::Body("qa".to_owned(), String::new())
    );
}

#[test]
fn activity_lists_the_newest_change_first_in_words() {
    let mut state = loaded(Vec::new());
    changes(
        &mut state,
        json!({"cursor": 9, "changes": [
            {"seq": 8, "kind": "role.claimed", "role": "dev"},
            {"seq": 9, "kind": "decision.raised", "decision": ID}]}),
    );
    drain(&mut state);
    state.show(View::Activity);
    let text = screen(&state, 120, 40);
    let raised = text.find("> decision raised: decision").expect(&text);
    let claimed = text.find("role claimed: role dev").expect(&text);
    assert!(raised < claimed, "{text}");
}

#[test]
fn the_help_shows_every_key_at_80x24() {
    let mut state = loaded(Vec::new());
    state.handle_key(Key::Char('?'));
    let text = screen(&state, 80, 24);
    for (key, what) in super::state::KEYS {
        assert!(
            text.contains(&format!("{key:>9}  {what}")),
            "{key} not in\n{text}"
        );
    }
}

#[test]
fn a_message_citing_a_decision_opens_it_and_so_does_a_change() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    answer(
        &mut state,
        Request::Inbox,
        Ok(json!([decision(ID, "release.publish", true),
                  {"type": "message", "id": "0190a2b4-0000-7000-8000-000000000009",
                   "from": "qa", "from_run": "qa-1", "to": "human", "class": null,
                   "body": "see the decision", "corrects": null, "decision": ID,
                   "in_reply_to": null, "request": null}])),
    );
    drain(&mut state);
    keys(&mut state, &[Key::Char('j'), Key::Enter]);
    assert_eq!(state.view(), View::Message);
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Decision);
    assert_eq!(state.open().unwrap().decision.id.to_string(), ID);
    // A change naming a decision that waits on nobody here opens its trail.
    let other = "0190a2b4-0000-7000-8000-000000000077";
    changes(
        &mut state,
        json!({"cursor": 9, "changes": [
            {"seq": 9, "kind": "decision.raised", "decision": other}]}),
    );
    drain(&mut state);
    state.show(View::Activity);
    // Enter opens the change whole; Enter there opens what it names.
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Activity);
    assert!(state.detail().is_some());
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Trail);
    assert_eq!(state.trail().map(|(s, _)| s), Some(other));
    assert_eq!(
        drain(&mut state),
        [super::state::Effect::Send(Request::Trail(other.to_owned()))]
    );
}

fn message(i: usize) -> serde_json::Value {
    json!({"type": "message", "id": format!("0190a2b4-0000-7000-8000-{i:012}"), "from": "qa",
           "from_run": "qa-1", "class": "INFO", "body": format!("note {i}"), "to": "human",
           "corrects": null, "decision": null, "in_reply_to": null, "request": null})
}

fn read_of(i: usize) -> Request {
    Request::Read(
        format!("0190a2b4-0000-7000-8000-{i:012}")
            .parse()
            .expect("a message id"),
    )
}

#[test]
fn marking_every_message_read_asks_naming_the_count_then_reads_page_by_page() {
    let mut first = (0..3).map(message).collect::<Vec<_>>();
    first.push(json!({"type": "more", "unread": 2}));
    let mut state = loaded(first);
    state.handle_key(Key::Char('A'));
    let Prompt::Confirm(act) = state.prompt() else {
        panic!("asks: {:?}", state.prompt());
    };
    assert_eq!(act.question(), "Mark all 5 unread messages read? y/n");
    assert_eq!(drain(&mut state), [], "A only asks");
    state.handle_key(Key::Char('n'));
    assert_eq!(drain(&mut state), [], "n sends nothing");

    keys(&mut state, &[Key::Char('A'), Key::Char('y')]);
    let page: Vec<Effect> = (0..3).map(|i| Effect::Send(read_of(i))).collect();
    assert_eq!(drain(&mut state), page);
    for i in 0..3 {
        answer(&mut state, read_of(i), Ok(json!({})));
        let expected = if i == 2 {
            vec![Effect::Send(Request::Inbox)]
        } else {
            Vec::new()
        };
        assert_eq!(
            drain(&mut state),
            expected,
            "the inbox once the page is read"
        );
    }
    answer(
        &mut state,
        Request::Inbox,
        Ok(json!([message(3), message(4)])),
    );
    let page: Vec<Effect> = (3..5).map(|i| Effect::Send(read_of(i))).collect();
    assert_eq!(drain(&mut state), page, "the next page");
    for i in 3..5 {
        answer(&mut state, read_of(i), Ok(json!({})));
    }
    assert_eq!(drain(&mut state), [Effect::Send(Request::Inbox)]);
    answer(&mut state, Request::Inbox, Ok(json!([])));
    assert_eq!(drain(&mut state), []);
    assert_eq!(state.status(), "marked 5 messages read");

    state.handle_key(Key::Char('A'));
    assert_eq!(*state.prompt(), Prompt::None);
    assert_eq!(state.status(), "no message is unread");
}

#[test]
fn marking_every_message_read_stops_at_a_refusal() {
    let mut state = loaded((0..2).map(message).collect());
    keys(&mut state, &[Key::Char('A'), Key::Char('y')]);
    drain(&mut state);
    answer(&mut state, read_of(0), Ok(json!({})));
    answer(
        &mut state,
        read_of(1),
        Err(mosaic_domain::Refusal::NotHolder),
    );
    assert!(
        state
            .status()
            .ends_with("; 1 marked read, the rest left unread"),
        "{}",
        state.status()
    );
    assert_eq!(drain(&mut state), [], "nothing more is sent");
    answer(&mut state, Request::Inbox, Ok(json!([message(1)])));
    assert_eq!(drain(&mut state), [], "a later inbox starts nothing");
}
