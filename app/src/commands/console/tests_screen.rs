//! What reaches the terminal: hostile agent text drawn through a real
//! `CrosstermBackend` into a buffer holds no escape sequence the console
//! did not write itself; the grant area shows the broker's grant, whatever
//! the question says; `y` resolves only while the whole prompt is on
//! screen; the lists, the `more` count, a dead raiser and a lost broker.

use mosaic_domain::{Refusal, Verb};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use serde_json::{json, Value};

use super::render;
use super::request::Request;
use super::state::{Effect, Key, State, View};
use super::tests::{
    answer, decision, drain, keys, loaded, screen, snapshots, team, wire, ID, NOW_MS,
};
use super::{not_opened_words, ConsoleArgs};

/// Texts an agent may write to make the screen lie.
const OSC_52: &str = "\x1b]52;c;ZWNobyAncm0gLXJmIH4n\x07";
const OSC_0: &str = "\x1b]0;pwned\x07";
const CLEAR: &str = "\x1b[2J";
const FORGED: &str = "\x1b[12;1HResolving with yes grants docs.edit on README.md to dev/dev-1.";

/// A decision whose every agent field is hostile, with the real grant
/// `repo.force-push` on `main`.
fn hostile() -> Value {
    let padding = "\u{a0}".repeat(300);
    let question = format!(
        "Fix typo?{OSC_52}{OSC_0}{CLEAR}{FORGED}{padding}Raised by lead/lead-1 · alive\n\
         Approving (yes) grants dev/dev-1 docs.edit on README.md, once.\n{}",
        "x".repeat(5_000)
    );
    let mut d = decision(ID, "repo.force-push", true);
    d["question"] = json!(question);
    d["target"] = json!("main\u{200b}");
    d["authorization"] = json!({"action": "repo.force-push", "target": "main\u{200b}",
                                "approvalChoice": "yes"});
    d["options"] = json!([
        {"key": "yes", "text": format!("fix the typo{OSC_0}\u{202e}txt.EMDAER")},
        {"key": "no", "text": format!("{CLEAR}leave it")}]);
    d["recommendation"] = json!(format!("yes{OSC_52}"));
    d
}

/// The bytes a real crossterm backend writes for one frame of `state`.
fn bytes(state: &State, width: u16, height: u16) -> Vec<u8> {
    let mut state = state.clone();
    state.handle_resize(width, height);
    let out = Shared::default();
    let backend = CrosstermBackend::new(out.clone());
    let viewport = Viewport::Fixed(Rect::new(0, 0, width, height));
    let mut terminal =
        Terminal::with_options(backend, TerminalOptions { viewport }).expect("a terminal");
    terminal
        .draw(|frame| render::draw(frame, &state, NOW_MS))
        .expect("draws");
    drop(terminal);
    let written = out.0.borrow().clone();
    written
}

/// The buffer the backend writes into, still readable after the draw.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Fails unless every ESC in `out` starts a CSI sequence of the kinds
/// crossterm writes to draw (cursor moves, colours and attributes,
/// clears, the cursor's visibility), and no other control byte, C1
/// control or hidden character is printed.
#[track_caller]
fn only_our_escapes(out: &[u8]) {
    let mut i = 0;
    while i < out.len() {
        let b = out[i];
        if b == 0x1b {
            assert_eq!(out.get(i + 1), Some(&b'['), "a non-CSI escape at {i}");
            let mut j = i + 2;
            while out
                .get(j)
                .is_some_and(|c| c.is_ascii_digit() || *c == b';' || *c == b'?')
            {
                j += 1;
            }
            let last = out.get(j).copied().unwrap_or(0);
            assert!(
                b"HmJKhl".contains(&last),
                "a foreign sequence {:?}",
                String::from_utf8_lossy(&out[i..=j.min(out.len() - 1)])
            );
            i = j + 1;
            continue;
        }
        assert!(b >= 0x20 && b != 0x7f, "a control byte {b:#x} at {i}");
        i += 1;
    }
    let text = String::from_utf8(out.to_vec()).expect("UTF-8");
    for c in text.chars() {
        assert!(
            !('\u{80}'..='\u{9f}').contains(&c)
                && (c == '\u{1b}' || !mosaic_domain::text::is_hidden(c)),
            "a hidden character {c:?}"
        );
    }
}

/// The open hostile decision, option 1 selected and asked.
fn asked_hostile(width: u16, height: u16) -> State {
    let mut state = loaded(vec![hostile()]);
    state.handle_resize(width, height);
    state.handle_key(Key::Char(']'));
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    drain(&mut state);
    state
}

#[test]
fn hostile_text_reaches_the_terminal_only_as_tokens_in_every_view() {
    let mut state = asked_hostile(120, 40);
    answer(
        &mut state,
        Request::Inbox,
        Ok(
            json!([hostile(), {"type": "message", "id": message_id(1), "from": "qa", "from_run": "qa-1",
            "to": "human", "corrects": null, "decision": null, "in_reply_to": null, "request": null,
            "class": null, "body": format!("{OSC_52}{OSC_0}{CLEAR}{FORGED}\u{202e}\u{200b}")}]),
        ),
    );
    for view in View::ALL {
        state.show(view);
        for (w, h) in [(80, 24), (120, 40), (40, 10)] {
            only_our_escapes(&bytes(&state, w, h));
        }
    }
    let text = screen(&state, 120, 40);
    assert!(text.contains("⟨ESC⟩") || !text.contains("pwned"), "{text}");
}

#[test]
fn the_grant_area_shows_the_brokers_grant_at_80x24_and_120x40_and_the_prompt_names_it() {
    for (w, h) in [(80, 24), (120, 40)] {
        let state = asked_hostile(w, h);
        let text = screen(&state, w, h);
        assert!(
            text.contains(
                "Approving (yes) grants dev/dev-1 repo.force-push on main⟨U+200B⟩, once."
            ),
            "{w}x{h}:\n{text}"
        );
        assert!(
            text.contains("Raiser dev/dev-1: alive (pid 4242)."),
            "{text}"
        );
        let bottom = text.lines().last().unwrap_or_default();
        assert_eq!(
            bottom,
            "Grant repo.force-push on main⟨U+200B⟩ to dev/dev-1 (choice yes)? y/n"
        );
        // The question's forged lines stay in its pane, below the grant
        // and the options: never on the grant area's rows.
        let grant_rows: Vec<&str> = text.lines().skip(1).take(7).collect();
        assert!(
            grant_rows.iter().all(|l| !l.contains("docs.edit")),
            "{grant_rows:#?}"
        );
        assert!(text.contains("⟨ESC⟩"), "{text}");
    }
    let mut state = asked_hostile(120, 40);
    snapshots("decision_hostile", &state);
    // The prompt stays while another view is drawn (an answer may move
    // the view), but y resolves only from the decision's own view.
    state.show(View::Inbox);
    snapshots("inbox_hostile", &state);
    state.handle_key(Key::Char('y'));
    assert_eq!(drain(&mut state), []);
}

#[test]
fn y_resolves_only_when_the_grant_the_options_and_the_whole_prompt_are_on_screen() {
    let need = asked_hostile(120, 40).need().expect("an open decision");
    let prompt = "Grant repo.force-push on main⟨U+200B⟩ to dev/dev-1 (choice yes)? y/n";
    for w in [need.width - 1, need.width, 100, 30] {
        for h in [need.height - 1, need.height, 24, 12] {
            let mut state = asked_hostile(120, 40);
            state.handle_resize(w, h);
            let text = screen(&state, w, h);
            let whole = text.lines().any(|l| l == prompt)
                && text.contains("Approving (yes) grants dev/dev-1 repo.force-push")
                && text.contains("[ ] 2 no:");
            assert_eq!(state.resolvable_on_screen(), whole, "{w}x{h}:\n{text}");
            if !whole {
                assert!(text.contains("too small"), "{w}x{h}:\n{text}");
            }
            state.handle_key(Key::Char('y'));
            let sent = drain(&mut state);
            assert_eq!(
                sent.iter()
                    .any(|e| matches!(e, Effect::Send(Request::Resolve { .. }))),
                whole,
                "{w}x{h}: {sent:?}"
            );
        }
    }
}

#[test]
fn too_small_a_terminal_asks_for_a_larger_one_and_enter_asks_nothing() {
    let mut state = loaded(vec![hostile()]);
    state.handle_resize(60, 15);
    keys(&mut state, &[Key::Char(']'), Key::Char('1'), Key::Enter]);
    assert_eq!(*state.prompt(), super::state::Prompt::None);
    assert!(
        state.status().starts_with("the terminal is too small"),
        "{}",
        state.status()
    );
    let text = screen(&state, 60, 15);
    assert!(text.contains("Make it at least"), "{text}");
}

/// The id of the tests' message `i`.
fn message_id(i: usize) -> String {
    format!("0190a2b4-0000-7000-8000-{i:012}")
}

fn message(i: usize, body: &str) -> Value {
    json!({"type": "message", "id": message_id(i), "from": "qa", "from_run": "qa-1",
           "class": "INFO", "body": body, "to": "human", "corrects": null, "decision": null,
           "in_reply_to": null, "request": null})
}

#[test]
fn each_row_is_one_line_and_the_selection_stays_on_screen_past_a_long_message() {
    let mut items = vec![message(0, &"long ".repeat(1_000))];
    items.extend((1..40).map(|i| message(i, &format!("note {i}\nsecond line"))));
    items.push(json!({"type": "more", "unread": 65}));
    let mut state = loaded(items);
    assert_eq!(state.inbox().more, 65);
    keys(&mut state, &[Key::Char('j'); 39]);
    let text = screen(&state, 80, 24);
    assert!(
        text.contains("> message  · qa/qa-1 · INFO · note 39"),
        "{text}"
    );
    assert!(
        text.contains("Inbox · 65 more unread messages beyond these"),
        "{text}"
    );
    assert!(
        text.contains("second line"),
        "the detail pane shows it whole:\n{text}"
    );
}

#[test]
fn enter_opens_a_message_and_r_marks_it_read_and_reads_the_inbox_again() {
    let mut state = loaded(vec![
        decision(ID, "release.publish", true),
        message(7, "hello\nworld"),
    ]);
    keys(&mut state, &[Key::Char('j'), Key::Enter]);
    assert_eq!(state.view(), View::Message);
    let text = screen(&state, 80, 24);
    assert!(text.contains("world"), "{text}");
    state.handle_key(Key::Char('r'));
    assert_eq!(
        wire(drain(&mut state)),
        [(Verb::MessageRead, json!({"id": message_id(7)}))]
    );
    let read = Request::Read(message_id(7).parse().expect("a message id"));
    answer(&mut state, read, Ok(json!({})));
    assert_eq!(state.view(), View::Inbox);
    assert_eq!(drain(&mut state), [Effect::Send(Request::Inbox)]);
    // From the inbox too, on the selected message.
    state.handle_key(Key::Char('r'));
    assert_eq!(
        wire(drain(&mut state)),
        [(Verb::MessageRead, json!({"id": message_id(7)}))]
    );
}

#[test]
fn an_exited_run_shows_as_exited_and_its_decision_flags_the_raiser_gone() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    let mut runs = team(true);
    runs[1]["exited"] = json!({"status": 3, "signal": null});
    answer(&mut state, Request::Agents, Ok(runs));
    state.handle_key(Key::Tab);
    let text = screen(&state, 120, 40);
    assert!(
        text.contains(
            "dev · run dev-1 · EXITED with status 3 (crashed) · pi · was pid 4242 · holding"
        ),
        "{text}"
    );
    state.handle_key(Key::Char(']'));
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("Raiser dev/dev-1: GONE, EXITED with status 3 (crashed)."),
        "{text}"
    );
}

#[test]
fn a_lost_broker_shows_the_banner_keeps_the_screen_read_only_and_is_read_again_when_back() {
    let mut state = asked_hostile(120, 40).with_socket("/srv/bus/bus.sock");
    state.handle_link(false);
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("BROKER UNREACHABLE at /srv/bus/bus.sock"),
        "{text}"
    );
    state.handle_key(Key::Char('y'));
    assert_eq!(drain(&mut state), []);
    assert_eq!(
        state.status(),
        "the broker cannot be reached: nothing was sent"
    );
    state.handle_link(true);
    assert!(!state.offline());
    let effects = drain(&mut state);
    assert_eq!(
        effects[..3],
        [
            Effect::Send(Request::Inbox),
            Effect::Send(Request::Agents),
            Effect::Send(Request::Head)
        ]
    );
    // A request that finds no broker shows the banner too.
    answer(&mut state, Request::Inbox, Err(Refusal::BrokerUnavailable));
    assert!(state.offline());
}

#[test]
fn the_trail_reads_a_refused_request_with_the_domains_kind() {
    let mut state = loaded(Vec::new());
    state.show(View::Trail);
    keys(&mut state, &[Key::Char('t')]);
    keys(&mut state, &ID.chars().map(Key::Char).collect::<Vec<_>>());
    keys(&mut state, &[Key::Enter]);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Trail(ID.to_owned()))]
    );
    answer(
        &mut state,
        Request::Trail(ID.to_string()),
        Ok(
            json!([{"kind": "request.refused", "at": "2026-01-01T10:00:00.000Z", "business": "acme",
                   "role": "dev", "run": "dev-1", "verb": "decision.resolve",
                   "code": "not-holder"}]),
        ),
    );
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("dev/dev-1 was refused decision.resolve: not-holder."),
        "{text}"
    );
}

#[test]
fn a_console_that_did_not_open_says_why_and_what_to_do() {
    let args = ConsoleArgs {
        socket: "/srv/bus/bus.sock".into(),
        business: "nope".to_owned(),
        notify: None,
        parent: None,
        activity: None,
    };
    let none = |_: &str| false;
    assert_eq!(
        not_opened_words(Refusal::BadRequest, &args, none),
        "bad-request: the broker has no business \"nope\": give --business one of the \
         businesses in its configuration"
    );
    assert!(not_opened_words(Refusal::BrokerUnavailable, &args, none)
        .starts_with("broker-unavailable: no broker answers at /srv/bus/bus.sock: "));
    assert!(
        not_opened_words(Refusal::HumanProofFailed, &args, |n| n == "MOSAIC_RUN_ID")
            .contains("carries the run marker MOSAIC_RUN_ID"),
    );
    assert!(not_opened_words(Refusal::HumanProofFailed, &args, none)
        .contains("outside every agent's process tree"));
}

#[test]
fn a_notice_carries_each_agent_word_neutralised() {
    let mut state = loaded(Vec::new());
    let mut d = hostile();
    d["id"] = json!("0190a2b4-0000-7000-8000-0000000000ff");
    answer(&mut state, Request::Inbox, Ok(json!([d])));
    let notice = drain(&mut state)
        .into_iter()
        .find_map(|e| match e {
            Effect::Notify(n) => Some(n),
            Effect::Send(..) | Effect::Bell | Effect::Order(_) | Effect::Quit => None,
        })
        .expect("a notice");
    assert_eq!(notice.target, "main⟨U+200B⟩");
}

#[test]
fn a_long_message_scrolls_to_its_end_and_back_by_drawn_lines() {
    let body: String = (1..=60).map(|i| format!("line {i}\n")).collect();
    let mut state = loaded(vec![message(1, body.trim_end())]);
    keys(&mut state, &[Key::Enter]);
    assert_eq!(state.view(), View::Message);
    keys(&mut state, &[Key::PageDown; 20]);
    let text = screen(&state, 80, 24);
    assert!(text.contains("line 60"), "{text}");
    // 60 lines in a pane of 20: 40 down is the end, and one up shows
    // `line 40` again at the top.
    assert_eq!(state.scroll(), 40);
    keys(&mut state, &[Key::Up]);
    let text = screen(&state, 80, 24);
    assert!(
        text.contains("│line 40 ") && !text.contains("line 60"),
        "{text}"
    );
}

/// A decision with `options` options, whose approving one is the first,
/// raised by `run` for `action` on `target`.
fn sized(run: &str, action: &str, target: &str, options: usize) -> Value {
    let mut d = decision(ID, action, true);
    d["raisedBy"] = json!({"role": "dev", "run": run});
    d["authorization"] = json!({"action": action, "target": target, "approvalChoice": "k0"});
    d["options"] = Value::Array(
        (0..options)
            .map(|i| json!({"key": format!("k{i}"), "text": format!("option {i}")}))
            .collect(),
    );
    d
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// At any size, for any decision, `y` resolves exactly when the drawn
    /// screen holds the whole prompt, the grant's first line and every
    /// option: the state's rule and the drawing agree.
    #[test]
    fn y_resolves_exactly_when_the_screen_shows_the_grant_the_options_and_the_prompt(
        width in 10u16..160,
        height in 5u16..45,
        run in "[a-z0-9-]{1,40}",
        action in "[a-z]{1,12}\\.[a-z]{1,30}",
        target in "[a-z0-9/._-]{1,60}",
        options in 1usize..7,
        offline: bool,
    ) {
        let mut state = loaded(vec![sized(&run, &action, &target, options)]);
        state.handle_resize(width, height);
        state.handle_key(Key::Char(']'));
        keys(&mut state, &[Key::Char('1'), Key::Enter]);
        // Enter may have been refused as too small: ask as it would.
        if *state.prompt() == super::state::Prompt::None {
            state.handle_resize(200, 60);
            state.handle_key(Key::Enter);
            state.handle_resize(width, height);
        }
        if offline {
            state.handle_link(false);
        }
        drain(&mut state);
        let text = screen(&state, width, height);
        let prompt = format!("Grant {action} on {target} to dev/{run} (choice k0)? y/n");
        let grant = format!("Approving (k0) grants dev/{run} {action} on {target}, once.");
        let whole = text.lines().any(|l| l == prompt)
            && text.contains(&grant)
            && (0..options).all(|i| text.contains(&format!("] {} k{i}: option {i}", i + 1)));
        proptest::prop_assert_eq!(state.resolvable_on_screen(), whole, "{}x{}:\n{}", width, height, text);
        state.handle_key(Key::Char('y'));
        let sent = drain(&mut state)
            .iter()
            .any(|e| matches!(e, Effect::Send(Request::Resolve { .. })));
        proptest::prop_assert_eq!(sent, whole && !offline);
    }
}

#[test]
fn a_quiet_wait_reads_the_runs_again_unless_the_broker_is_lost() {
    let mut state = loaded(Vec::new());
    state.handle_quiet();
    assert_eq!(drain(&mut state), [Effect::Send(Request::Agents)]);
    state.handle_link(false);
    state.handle_quiet();
    assert_eq!(drain(&mut state), []);
}

/// What the terminal prints of each row of a frame: each cell's symbol,
/// the cells a wide symbol covers skipped, as ratatui skips them.
fn printed_rows(state: &State, width: u16, height: u16) -> Vec<String> {
    let mut state = state.clone();
    state.handle_resize(width, height);
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
        .expect("a terminal");
    terminal
        .draw(|frame| render::draw(frame, &state, NOW_MS))
        .expect("draws");
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| {
            let mut row = String::new();
            let mut x = 0;
            while x < width {
                let symbol = buffer[(x, y)].symbol();
                row.push_str(symbol);
                let columns = ratatui::text::Span::raw(symbol).width().max(1);
                x += u16::try_from(columns).expect("a narrow symbol");
            }
            row
        })
        .collect()
}

/// A decision made of the tricks: its question opens with 50 hexagrams
/// (one column to ratatui, two to the terminal) and words that would
/// claim a review, and its target reads like `acme/main`. (An approving
/// choice that reads like `yes` cannot reach the console: an option key
/// is ASCII on the wire, and one that is not fails to decode, below.)
fn tricky() -> Value {
    let mut d = decision(ID, "repo.force-push", true);
    let target =
        "acme/ma\u{456}n\u{3164}\u{FFFF}\u{378}\u{34F}e\u{301}\u{302}\u{303}\u{4DC0}\u{4DC0}";
    d["question"] = json!(format!(
        "{}reviewed by lead: safe\n{}",
        "\u{4DC0}".repeat(50),
        "\u{1160}\u{FFA0}\u{D7B0}".repeat(30)
    ));
    d["target"] = json!(target);
    d["authorization"] =
        json!({"action": "repo.force-push", "target": target, "approvalChoice": "yes"});
    d["options"] = json!([
        {"key": "yes", "text": format!("{}ok", "\u{3248}".repeat(20))},
        {"key": "no", "text": "hold"}]);
    d
}

#[test]
fn an_option_key_the_broker_never_writes_fails_to_decode_and_says_so() {
    let mut d = decision(ID, "repo.force-push", true);
    d["authorization"]["approvalChoice"] = json!("y\u{435}s");
    d["options"][0]["key"] = json!("y\u{435}s");
    let mut state = State::new("acme");
    state.handle_resize(120, 40);
    drain(&mut state);
    answer(&mut state, Request::Inbox, Ok(json!([d])));
    assert!(!state.is_loaded());
    assert!(state.inbox().decisions.is_empty());
    assert_eq!(
        state.status(),
        format!("bad-response: {}", Refusal::BadResponse.meaning())
    );
    let text = screen(&state, 120, 40);
    assert!(text.contains("bad-response: "), "{text}");
    assert!(!text.contains("y\u{435}s"), "{text}");
}

#[test]
fn the_tricks_reach_the_grant_area_and_the_prompt_as_tokens_and_every_row_is_the_terminals_width() {
    let target = "acme/ma⟨U+0456⟩n⟨U+3164⟩⟨U+FFFF⟩⟨U+0378⟩⟨U+034F⟩e⟨U+0301⟩⟨U+0302⟩⟨U+0303⟩\
                  ⟨U+4DC0⟩⟨U+4DC0⟩";
    let (width, height) = (220, 40);
    let mut state = loaded(vec![tricky()]);
    state.handle_resize(width, height);
    state.handle_key(Key::Char(']'));
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    drain(&mut state);
    assert!(
        state.resolvable_on_screen(),
        "{}",
        screen(&state, width, height)
    );
    let rows = printed_rows(&state, width, height);
    for row in &rows {
        // Every character drawn is one whose width the terminal agrees on,
        // and the row fills the terminal exactly: nothing shifted.
        assert!(
            row.chars()
                .all(|c| mosaic_domain::text::drawn_width(c).is_some()),
            "{row:?}"
        );
        assert_eq!(
            mosaic_domain::text::width(row),
            usize::from(width),
            "{row:?}"
        );
    }
    let grant: Vec<&str> = rows[1..8].iter().map(|r| r.trim_end()).collect();
    assert!(
        grant[1].contains(&format!(
            "Approving (yes) grants dev/dev-1 repo.force-push on {target}, once."
        )),
        "{grant:#?}"
    );
    assert!(
        grant[5].contains("Selected 1 yes: resolving with it GRANTS the above."),
        "{grant:#?}"
    );
    assert!(
        grant
            .iter()
            .all(|r| !r.contains("reviewed") && !r.contains('\u{4DC0}')),
        "{grant:#?}"
    );
    assert_eq!(
        rows.last().map(|r| r.trim_end()),
        Some(format!("Grant repo.force-push on {target} to dev/dev-1 (choice yes)? y/n").as_str())
    );
    // The raiser's own panes draw the same characters as tokens too.
    let text = rows.join("\n");
    assert!(text.contains(&"⟨U+4DC0⟩".repeat(10)), "{text}");
    assert!(text.contains(&"⟨U+3248⟩".repeat(5)), "{text}");
    assert!(text.contains("⟨U+1160⟩⟨U+FFA0⟩⟨U+D7B0⟩"), "{text}");
}

#[test]
fn a_target_with_a_look_alike_letter_draws_apart_from_the_real_one() {
    let drawn = |target: &str| {
        let mut d = decision(ID, "repo.force-push", true);
        d["authorization"] =
            json!({"action": "repo.force-push", "target": target, "approvalChoice": "yes"});
        let mut state = loaded(vec![d]);
        state.handle_resize(120, 40);
        state.handle_key(Key::Char(']'));
        keys(&mut state, &[Key::Char('1'), Key::Enter]);
        drain(&mut state);
        printed_rows(&state, 120, 40)
    };
    let real = drawn("acme/main");
    let fake = drawn("acme/ma\u{456}n");
    assert_ne!(real[2], fake[2]);
    assert_ne!(real.last(), fake.last());
    assert!(fake[2].contains("acme/ma⟨U+0456⟩n"), "{:?}", fake[2]);
}

#[test]
fn a_cut_message_opens_whole_from_its_trail() {
    let mut cut = message(3, &"a".repeat(2_000));
    cut["cut"] = json!(true);
    let mut state = loaded(vec![cut]);
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Message);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Trail(message_id(3)))]
    );
    let whole = format!("{}the end", "a".repeat(2_000));
    answer(
        &mut state,
        Request::Trail(message_id(3)),
        Ok(
            json!([{"kind": "message.sent", "at": "2026-01-01T10:00:00.000Z", "id": message_id(3),
                   "business": "acme", "corrects": null, "decision": null, "in_reply_to": null,
                   "request": null, "from": "qa", "from_run": "qa-1", "to": "human", "class": "INFO",
                   "body": whole}]),
        ),
    );
    let shown = state.message().expect("the open message");
    assert!(!shown.cut);
    assert_eq!(shown.body[0].as_str(), whole);
    // Read again, the inbox's cut copy does not take the whole one's place.
    let mut again = message(3, &"a".repeat(2_000));
    again["cut"] = json!(true);
    answer(&mut state, Request::Inbox, Ok(json!([again])));
    assert!(!state.inbox().messages[0].cut);
}

#[test]
fn a_short_decision_has_no_options_until_its_trail_fills_it() {
    let whole = decision(ID, "release.publish", true);
    let mut short = whole.clone();
    short["options"] = json!([]);
    short["question"] = json!("Publish");
    short["cut"] = json!(true);
    // Its trail not read yet.
    let mut state = State::new("acme");
    state.handle_resize(120, 40);
    drain(&mut state);
    answer(&mut state, Request::Inbox, Ok(json!([short])));
    drain(&mut state);
    state.handle_key(Key::Char(']'));
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    assert_eq!(*state.prompt(), super::state::Prompt::None);
    let mut raised = whole;
    raised["kind"] = json!("decision.raised");
    raised["at"] = json!("2026-01-01T10:00:00.000Z");
    raised["business"] = json!("acme");
    answer(
        &mut state,
        Request::Trail(ID.to_string()),
        Ok(json!([raised])),
    );
    assert!(!state.inbox().decisions[0].cut);
    assert_eq!(
        state.open().as_ref().map(|o| o.decision.options.len()),
        Some(2)
    );
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    assert_ne!(*state.prompt(), super::state::Prompt::None);
}

#[test]
fn a_trail_past_one_answer_says_how_many_records_it_left_out() {
    let mut state = loaded(Vec::new());
    state.show(View::Trail);
    keys(&mut state, &[Key::Char('t')]);
    keys(&mut state, &ID.chars().map(Key::Char).collect::<Vec<_>>());
    keys(&mut state, &[Key::Enter]);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Trail(ID.to_owned()))]
    );
    answer(
        &mut state,
        Request::Trail(ID.to_string()),
        Ok(
            json!([{"kind": "decision.seen", "at": "2026-01-01T10:00:00.000Z", "business": "acme",
                   "id": ID, "by": "dev", "by_run": "dev-1", "note": null},
                  {"type": "more", "records": 41}]),
        ),
    );
    state.show(View::Trail);
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("41 more records, past what one answer holds, by the broker."),
        "{text}"
    );
}

/// With every tab shown (a decision, a message and a run open), the tab
/// line names each tab `Tab` visits and ends with `? help` at any width
/// from 72 columns, a long business's name cut first.
#[test]
fn the_tab_line_names_every_tab_and_the_help_at_any_width() {
    let long = "a".repeat(60);
    for business in ["acme", long.as_str()] {
        let mut state = State::new(business);
        state.handle_resize(120, 40);
        drain(&mut state);
        let message = json!({"type": "message", "id": "0190a2b4-0000-7000-8000-000000000009",
            "from": "qa", "from_run": "qa-1", "to": "human", "class": null,
            "body": "tests are green", "corrects": null, "decision": null,
            "in_reply_to": null, "request": null});
        let inbox = json!([decision(ID, "release.publish", true), message]);
        answer(&mut state, Request::Inbox, Ok(inbox));
        answer(&mut state, Request::Agents, Ok(team(true)));
        keys(&mut state, &[Key::Char('j'), Key::Enter, Key::Char(']')]);
        while state.view() != View::Agents {
            state.handle_key(Key::Tab);
        }
        state.handle_key(Key::Enter);
        drain(&mut state);
        assert_eq!(state.tabs().len(), View::ALL.len(), "{:?}", state.tabs());
        for width in 72..=130 {
            state.handle_resize(width, 30);
            let screen = screen(&state, width, 30);
            let first = screen.lines().next().expect("a tab line").trim_end();
            assert!(first.ends_with("· ? help"), "{width}: {first:?}");
            for view in state.tabs() {
                let short: String = view.name().chars().take(3).collect();
                assert!(first.contains(&format!(" {short}")), "{width}: {first:?}");
            }
        }
    }
}
