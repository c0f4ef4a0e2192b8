//! The console's state machine with exact effects, its link's interactions
//! (mocked with `mockall`), and its drawing as `insta` snapshots of
//! ratatui's `TestBackend`.

use mockall::predicate::eq;
use mosaic_domain::{Refusal, Verb};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::{json, Value};

use mosaic_domain::evidence::OptionKey;
use mosaic_domain::DecisionId;

use super::render;
use super::request::{self, Request};
use super::state::{DecisionState, Effect, Key, Notice, State, View};
use super::{pump, MockLink};

pub(super) const ID: &str = "0190a2b4-0000-7000-8000-000000000001";
const OTHER: &str = "0190a2b4-0000-7000-8000-000000000002";
/// 2026-01-01T10:00:00Z, and ten minutes later.
const RAISED_AT: &str = "2026-01-01T10:00:00.000Z";
pub(super) const NOW_MS: i64 = 1_767_261_600_000 + 600_000;

pub(super) fn decision(id: &str, action: &str, blocking: bool) -> Value {
    json!({
        "type": "decision", "id": id, "action": action, "target": "fix-42",
        "question": "Publish the fix?", "options": [
            {"key": "yes", "text": "publish it"},
            {"key": "no", "text": "hold it back"}],
        "recommendation": "yes", "blocking": blocking, "domain": "delivery",
        "project": null, "task_ref": null, "requirement_ref": null, "supersedes": null,
        "class": "gated", "route": "human", "holder": null,
        "raisedBy": {"role": "dev", "run": "dev-1"},
        "authorization": {"action": action, "target": "fix-42", "approvalChoice": "yes"},
        "status": "open", "choice": null, "superseded_by": null
    })
}

pub(super) fn raised(id: &str) -> Value {
    let mut record = decision(id, "release.publish", true);
    record["kind"] = json!("decision.raised");
    record["at"] = json!(RAISED_AT);
    record["business"] = json!("acme");
    // A raise's record holds what was fixed when it was raised, and no
    // standing.
    let fields = record.as_object_mut().expect("an object");
    for standing in ["type", "status", "choice", "superseded_by"] {
        fields.remove(standing);
    }
    record
}

/// The broker's answer `result` to `request`, decoded with its verb's
/// wire shape as the loop decodes it, handed to the state.
pub(super) fn answer(state: &mut State, request: Request, result: Result<Value, Refusal>) {
    let reply = result.and_then(|result| request.decode(result));
    state.handle_reply(&request, reply);
}

/// A page of the human's `changes`, decoded as the loop decodes it,
/// handed to the state.
pub(super) fn changes(state: &mut State, page: Value) {
    state.handle_change(request::changes(page).map(|(_, changes)| changes));
}

/// Each request among `effects` as the link sends it: its verb and its
/// arguments; the other effects are left out.
pub(super) fn wire(effects: Vec<Effect>) -> Vec<(Verb, Value)> {
    effects
        .into_iter()
        .filter_map(|effect| match effect {
            Effect::Send(request) => Some((request.verb(), request.args())),
            Effect::Bell | Effect::Notify(_) | Effect::Order(_) | Effect::Quit => None,
        })
        .collect()
}

/// A decision id the tests name.
pub(super) fn id(text: &str) -> DecisionId {
    DecisionId::parse(text).expect("a decision id")
}

/// Every effect the state asks for now.
pub(super) fn drain(state: &mut State) -> Vec<Effect> {
    std::iter::from_fn(|| state.poll_effect()).collect()
}

pub(super) fn keys(state: &mut State, keys: &[Key]) {
    for key in keys {
        state.handle_key(*key);
    }
}

/// An `agents` answer: `dev-1` waits on the human, `qa-1` on the lead
/// (the arbiter its decision was routed to), `lead-1` on nothing, and
/// `dev-0` was revoked; launching is `on` or off.
pub(super) fn team(on: bool) -> Value {
    let run = |role: &str, run: &str, pid: u32, waits: Value| {
        json!({"role": role, "run": run, "harness": "pi", "address": null, "pid": pid,
               "start_time": 1, "holding": run != "dev-0", "revoked": run == "dev-0",
               "launching": on, "waitsOn": waits, "ended": null, "exited": null,
               "restarts": 0, "usage": null, "lastVerb": "changes",
               "lastAt": "2026-01-01T00:00:00.000Z", "waiting": true})
    };
    json!([
        run("dev", "dev-0", 4240, json!([])),
        run(
            "dev",
            "dev-1",
            4242,
            json!([{"id": ID, "action": "release.publish",
            "target": "fix-42", "route": "human", "blocking": true}])
        ),
        run("lead", "lead-1", 4243, json!([])),
        run(
            "qa",
            "qa-1",
            4244,
            json!([{"id": OTHER, "action": "repo.merge",
            "target": "main", "route": "lead", "blocking": false}])
        ),
    ])
}

/// A console whose first reads answered: one decision waiting, `dev-1`.
pub(super) fn loaded(inbox: Vec<Value>) -> State {
    let mut state = State::new("acme");
    state.handle_resize(80, 24);
    assert_eq!(
        drain(&mut state),
        [
            Effect::Send(Request::Inbox),
            Effect::Send(Request::Agents),
            Effect::Send(Request::Head)
        ]
    );
    answer(&mut state, Request::Inbox, Ok(Value::Array(inbox)));
    answer(&mut state, Request::Agents, Ok(team(true)));
    for effect in drain(&mut state) {
        let Effect::Send(Request::Trail(id)) = effect else {
            panic!("only trails after the first inbox: {effect:?}");
        };
        answer(
            &mut state,
            Request::Trail(id.clone()),
            Ok(json!([raised(&id)])),
        );
    }
    state
}

/// `]` opened the first decision; its trail read.
fn opened() -> State {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    state.handle_key(Key::Char(']'));
    assert_eq!(state.view(), View::Decision);
    let effects = drain(&mut state);
    assert_eq!(
        effects,
        [
            Effect::Send(Request::Trail(ID.to_string())),
            Effect::Send(Request::Agents)
        ]
    );
    answer(
        &mut state,
        Request::Trail(ID.to_string()),
        Ok(json!([raised(ID)])),
    );
    state
}

#[test]
fn a_digit_alone_sends_nothing() {
    let mut state = opened();
    state.handle_key(Key::Char('1'));
    assert_eq!(drain(&mut state), []);
    assert_eq!(state.open().unwrap().chosen, Some(0));
    state.handle_key(Key::Enter);
    assert_eq!(drain(&mut state), [], "Enter only asks");
}

#[test]
fn digit_enter_y_sends_exactly_one_resolve_with_the_key_and_the_note() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('2'), Key::Enter]);
    let super::state::Prompt::Confirm(act) = &state.prompt() else {
        panic!("asks: {:?}", state.prompt());
    };
    assert_eq!(
        act.question(),
        "Resolve with no, granting nothing to dev/dev-1? y/n"
    );
    keys(&mut state, &[Key::Char('e')]);
    keys(
        &mut state,
        &"not yet".chars().map(Key::Char).collect::<Vec<_>>(),
    );
    keys(&mut state, &[Key::Enter, Key::Char('y')]);
    assert_eq!(
        wire(drain(&mut state)),
        [(
            Verb::DecisionResolve,
            json!({"id": ID, "choice": "no", "note": "not yet"})
        )]
    );
    // A second y is no second resolve: the question is gone.
    state.handle_key(Key::Char('y'));
    assert_eq!(drain(&mut state), []);
}

#[test]
fn n_or_esc_cancels_and_sends_nothing() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('1'), Key::Enter, Key::Char('n')]);
    keys(&mut state, &[Key::Enter, Key::Esc]);
    assert_eq!(drain(&mut state), []);
    assert_eq!(state.status(), "cancelled: nothing was sent");
}

#[test]
fn nothing_resolves_from_the_inbox_view() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    keys(
        &mut state,
        &[
            Key::Char('1'),
            Key::Char('y'),
            Key::Char('s'),
            Key::Char('w'),
        ],
    );
    assert_eq!(state.view(), View::Inbox);
    assert_eq!(drain(&mut state), []);
    // Enter opens it; only then do digits count.
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Decision);
}

#[test]
fn a_decision_closed_while_on_screen_is_no_longer_waiting_and_cannot_be_resolved() {
    let mut state = opened();
    state.handle_key(Key::Char('1'));
    changes(
        &mut state,
        json!({"cursor": 9, "changes": [
        {"seq": 9, "kind": "decision.withdrawn", "decision": ID}]}),
    );
    assert_eq!(state.open().unwrap().state, DecisionState::Gone);
    let refreshed = drain(&mut state);
    assert!(refreshed.iter().all(|e| matches!(
        e,
        Effect::Send(Request::Inbox | Request::Agents | Request::Head | Request::Trail(_))
    )));
    keys(&mut state, &[Key::Enter, Key::Char('y'), Key::Char('s')]);
    assert_eq!(drain(&mut state), []);
    assert_eq!(state.status(), "no longer waiting: its keys are disabled");
}

#[test]
fn a_decision_gone_from_the_inbox_goes_stale_even_while_asked() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    answer(&mut state, Request::Inbox, Ok(json!([])));
    // The question goes with its decision: y answers nothing.
    assert_eq!(*state.prompt(), super::state::Prompt::None);
    state.handle_key(Key::Char('y'));
    assert_eq!(drain(&mut state), []);
    assert_eq!(state.status(), "no longer waiting: its keys are disabled");
}

#[test]
fn outcome_unknown_opens_the_trail_and_nothing_is_resent() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('1'), Key::Enter, Key::Char('y')]);
    let effects: [Effect; 1] = drain(&mut state).try_into().expect("one effect");
    let [Effect::Send(request)] = effects else {
        panic!("one send");
    };
    answer(&mut state, request, Err(Refusal::OutcomeUnknown));
    assert_eq!(state.view(), View::Trail);
    assert_eq!(state.open().unwrap().state, DecisionState::Unknown);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Trail(ID.to_string()))]
    );
    assert!(
        state.status().starts_with("outcome-unknown: "),
        "{}",
        state.status()
    );
}

#[test]
fn a_refusal_shows_its_code_and_one_sentence() {
    let mut state = opened();
    answer(
        &mut state,
        Request::Resolve {
            id: id(ID),
            choice: OptionKey::parse("yes").expect("an option key"),
            note: String::new(),
        },
        Err(Refusal::DecisionClosed),
    );
    assert_eq!(
        state.status(),
        format!("decision-closed: {}", Refusal::DecisionClosed.meaning())
    );
}

#[test]
fn a_new_decision_rings_the_bell_and_notifies_once_and_the_first_load_does_not() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    changes(
        &mut state,
        json!({"cursor": 3, "changes": [
        {"seq": 3, "kind": "decision.raised", "decision": OTHER}]}),
    );
    assert_eq!(
        drain(&mut state),
        [
            Effect::Send(Request::Inbox),
            Effect::Send(Request::Agents),
            Effect::Send(Request::Head)
        ]
    );
    let inbox = json!([
        decision(ID, "release.publish", true),
        decision(OTHER, "repo.merge", false)
    ]);
    answer(&mut state, Request::Inbox, Ok(inbox.clone()));
    assert_eq!(
        drain(&mut state),
        [
            Effect::Send(Request::Trail(OTHER.to_string())),
            Effect::Bell,
            Effect::Notify(Notice {
                decision: OTHER.to_owned(),
                action: "repo.merge".to_owned(),
                target: "fix-42".to_owned(),
                raiser: "dev/dev-1".to_owned(),
            })
        ]
    );
    answer(&mut state, Request::Inbox, Ok(inbox));
    assert_eq!(drain(&mut state), [], "no second bell");
}

#[test]
fn bracket_opens_the_oldest_blocking_decision_first() {
    let mut state = loaded(vec![
        decision(OTHER, "repo.merge", false),
        decision(ID, "release.publish", true),
    ]);
    state.handle_key(Key::Char(']'));
    assert_eq!(state.open().unwrap().decision.id, id(ID));
    drain(&mut state);
    state.handle_key(Key::Char(']'));
    assert_eq!(state.open().unwrap().decision.id, id(OTHER));
}

#[test]
fn the_other_acts_each_ask_first() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('s')]);
    assert_eq!(drain(&mut state), []);
    keys(&mut state, &[Key::Char('y')]);
    assert_eq!(drain(&mut state), [Effect::Send(Request::Seen(id(ID)))]);
    keys(&mut state, &[Key::Char('w'), Key::Char('y')]);
    assert_eq!(drain(&mut state), [Effect::Send(Request::Withdraw(id(ID)))]);
    keys(&mut state, &[Key::Char('m')]);
    keys(&mut state, &"qa".chars().map(Key::Char).collect::<Vec<_>>());
    keys(
        &mut state,
        &[Key::Enter, Key::Char('h'), Key::Char('i'), Key::Enter],
    );
    assert_eq!(drain(&mut state), []);
    keys(&mut state, &[Key::Char('y')]);
    assert_eq!(
        wire(drain(&mut state)),
        [(Verb::MessageSend, json!({"to": "qa", "body": "hi"}))]
    );
    keys(&mut state, &[Key::Char('L'), Key::Char('y')]);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Launch { off: true })]
    );
    answer(&mut state, Request::Launch { off: true }, Ok(json!({})));
    keys(&mut state, &[Key::Char('L'), Key::Char('y')]);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Launch { off: false })]
    );
}

#[test]
fn q_quits_and_help_comes_from_the_key_map() {
    let mut state = loaded(Vec::new());
    state.handle_key(Key::Char('?'));
    assert!(state.help());
    state.handle_key(Key::Char('x'));
    assert!(!state.help());
    state.handle_key(Key::Char('q'));
    assert_eq!(drain(&mut state), [Effect::Quit]);
    let help = super::after();
    for (key, what) in super::state::KEYS {
        assert!(help.contains(&format!("{key:<9} {what}")), "{key}");
    }
}

// ---------------------------------------------------------------------------
// The link's interactions, mocked.

/// The inbox, agents and head a mock answers with, and trails.
fn answering(link: &mut MockLink, inbox: Value) {
    link.expect_call()
        .with(eq(Verb::Inbox), eq(json!({})))
        .returning(move |_, _| Ok(inbox.clone()));
    link.expect_call()
        .with(eq(Verb::Agents), eq(json!({})))
        .returning(|_, _| Ok(json!([])));
    link.expect_call()
        .with(eq(Verb::Head), eq(json!({})))
        .returning(|_, _| Ok(json!({"size": 3, "head": "q5Yk", "note": "n"})));
    link.expect_call()
        .withf(|verb, _| *verb == Verb::Trail)
        .returning(|_, args| Ok(json!([raised(args["subject"].as_str().unwrap())])));
}

#[test]
fn one_resolve_goes_over_the_link_exactly_once() {
    let mut link = MockLink::new();
    answering(&mut link, json!([decision(ID, "release.publish", true)]));
    link.expect_call()
        .with(
            eq(Verb::DecisionResolve),
            eq(json!({"id": ID, "choice": "yes"})),
        )
        .times(1)
        .returning(|_, _| {
            let mut resolved = decision(ID, "release.publish", true);
            resolved["status"] = json!("resolved");
            resolved["choice"] = json!("yes");
            Ok(resolved)
        });
    let mut state = State::new("acme");
    state.handle_resize(80, 24);
    let mut other = Vec::new();
    pump(&mut state, &link, &mut |e| other.push(e));
    for key in [Key::Char(']'), Key::Char('1'), Key::Enter, Key::Char('y')] {
        state.handle_key(key);
        pump(&mut state, &link, &mut |e| other.push(e));
    }
    assert_eq!(state.status(), "resolved with yes");
    assert_eq!(state.open().unwrap().state, DecisionState::Gone);
    // Again: the decision's keys are off; the mock allows one resolve.
    for key in [Key::Char('1'), Key::Enter, Key::Char('y')] {
        state.handle_key(key);
        pump(&mut state, &link, &mut |e| other.push(e));
    }
    assert_eq!(other, []);
    link.checkpoint();
}

#[test]
fn nothing_is_sent_after_outcome_unknown() {
    let mut link = MockLink::new();
    answering(&mut link, json!([decision(ID, "release.publish", true)]));
    link.expect_call()
        .withf(|verb, _| *verb == Verb::DecisionResolve)
        .times(1)
        .returning(|_, _| Err(Refusal::OutcomeUnknown));
    let mut state = State::new("acme");
    state.handle_resize(80, 24);
    pump(&mut state, &link, &mut |_| {});
    for key in [Key::Char(']'), Key::Char('1'), Key::Enter, Key::Char('y')] {
        state.handle_key(key);
        pump(&mut state, &link, &mut |_| {});
    }
    // Every key again: the decision's keys are off, nothing goes out.
    for key in [
        Key::Esc,
        Key::Char(']'),
        Key::Char('1'),
        Key::Enter,
        Key::Char('y'),
    ] {
        state.handle_key(key);
        pump(&mut state, &link, &mut |_| {});
    }
    assert_eq!(state.open().unwrap().state, DecisionState::Unknown);
}

#[test]
fn no_send_on_a_stale_decision() {
    let mut link = MockLink::new();
    answering(&mut link, json!([decision(ID, "release.publish", true)]));
    link.expect_call()
        .withf(|verb, _| *verb == Verb::DecisionResolve)
        .never();
    let mut state = State::new("acme");
    state.handle_resize(80, 24);
    pump(&mut state, &link, &mut |_| {});
    for key in [Key::Char(']'), Key::Char('1'), Key::Enter] {
        state.handle_key(key);
        pump(&mut state, &link, &mut |_| {});
    }
    changes(
        &mut state,
        json!({"cursor": 5, "changes": [
        {"seq": 5, "kind": "decision.resolved", "decision": ID}]}),
    );
    pump(&mut state, &link, &mut |_| {});
    assert_eq!(*state.prompt(), super::state::Prompt::None);
    state.handle_key(Key::Char('y'));
    pump(&mut state, &link, &mut |_| {});
    assert_eq!(state.status(), "no longer waiting: its keys are disabled");
}

// ---------------------------------------------------------------------------
// Drawing.

/// The screen as text, one line per row.
pub(super) fn screen(state: &State, width: u16, height: u16) -> String {
    let mut state = state.clone();
    state.handle_resize(width, height);
    let state = &state;
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("a terminal");
    terminal
        .draw(|frame| render::draw(frame, state, NOW_MS))
        .expect("draws");
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Snapshots `state` at 80×24 and 120×40, ids and times filtered out.
pub(super) fn snapshots(name: &str, state: &State) {
    insta::with_settings!({filters => vec![
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[id]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[time]"),
        (r"\b\d+[smhd]\b", "[age]"),
    ]}, {
        insta::assert_snapshot!(format!("{name}_80x24"), screen(state, 80, 24));
        insta::assert_snapshot!(format!("{name}_120x40"), screen(state, 120, 40));
    });
}

#[test]
fn the_inbox_draws() {
    let mut state = loaded(vec![
        decision(ID, "release.publish", true),
        decision(OTHER, "repo.merge", false),
    ]);
    answer(
        &mut state,
        Request::Inbox,
        Ok(json!([decision(ID, "release.publish", true),
                  {"type": "message", "id": OTHER, "from": "qa", "from_run": null,
                   "to": "human", "class": "INFO", "body": "tests are green",
                   "corrects": null, "decision": null, "in_reply_to": null,
                   "request": null}])),
    );
    snapshots("inbox", &state);
}

#[test]
fn a_decision_draws_with_its_authorization_and_asks() {
    let mut state = opened();
    keys(&mut state, &[Key::Char('1'), Key::Enter]);
    snapshots("decision_asking", &state);
}

#[test]
fn a_stale_decision_draws_as_no_longer_waiting() {
    let mut state = opened();
    changes(
        &mut state,
        json!({"cursor": 9, "changes": [
        {"seq": 9, "kind": "decision.resolved", "decision": ID}]}),
    );
    drain(&mut state);
    snapshots("decision_stale", &state);
}

#[test]
fn the_agents_and_the_help_draw() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    keys(&mut state, &[Key::Tab]);
    assert_eq!(state.view(), View::Agents);
    snapshots("agents", &state);
    state.handle_key(Key::Char('?'));
    snapshots("help", &state);
}

#[test]
fn the_agents_view_shows_the_evidence_head_once_read() {
    let mut state = State::new("acme");
    answer(
        &mut state,
        Request::Head,
        Ok(json!({"size": 42, "head": "q5Yk", "note": "mosaic-bus/x\n42\nq5Yk\n"})),
    );
    keys(&mut state, &[Key::Tab]);
    assert_eq!(state.view(), View::Agents);
    let text = screen(&state, 120, 40);
    assert!(text.contains("Evidence: 42 records, head q5Yk"), "{text}");
}

// ---------------------------------------------------------------------------
// The Agents view: what each run waits on, and the launch switch.

/// The refresh a change asks for, exactly.
fn refresh() -> [Effect; 3] {
    [
        Effect::Send(Request::Inbox),
        Effect::Send(Request::Agents),
        Effect::Send(Request::Head),
    ]
}

#[test]
fn the_switch_is_read_from_the_first_agents_answer_and_l_then_asks_the_other_way() {
    let mut state = State::new("acme");
    drain(&mut state);
    assert_eq!(state.launching(), None);
    // No run bound: no row carries the switch, and it stays unknown.
    answer(&mut state, Request::Agents, Ok(json!([])));
    assert_eq!(state.launching(), None);
    answer(&mut state, Request::Agents, Ok(team(false)));
    assert_eq!(state.launching(), Some(false));
    keys(&mut state, &[Key::Tab]);
    assert_eq!(state.view(), View::Agents);
    // Shown, the runs are read again: an exit is no change of the feed.
    assert_eq!(drain(&mut state), [Effect::Send(Request::Agents)]);
    let text = screen(&state, 80, 24);
    assert!(text.contains("Launching: OFF"), "{text}");
    keys(&mut state, &[Key::Char('L'), Key::Char('y')]);
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::Launch { off: false })]
    );
    // A later answer, after the switch moved, wins.
    answer(&mut state, Request::Agents, Ok(team(true)));
    assert_eq!(state.launching(), Some(true));
}

#[test]
fn each_change_to_what_a_run_waits_on_refreshes_the_agents_view() {
    let mut state = loaded(vec![decision(ID, "release.publish", true)]);
    keys(&mut state, &[Key::Tab]);
    assert_eq!(state.view(), View::Agents);
    assert_eq!(drain(&mut state), [Effect::Send(Request::Agents)]);
    let text = screen(&state, 120, 40);
    assert!(
        text.contains("qa · run qa-1 · waiting on lead · pi · pid 4244 · holding"),
        "{text}"
    );
    assert!(text.contains("waits on lead: repo.merge on main"), "{text}");
    assert!(
        text.contains("waits on you: release.publish on fix-42 · BLOCKS a task"),
        "{text}"
    );
    // A raise to an arbiter, its resolution, a release and the switch each
    // read the agents again, and nothing else.
    for (kind, about) in [
        ("decision.raised", json!({"decision": OTHER})),
        ("decision.resolved", json!({"decision": OTHER})),
        ("role.released", json!({"role": "qa"})),
        ("role.revoked", json!({"role": "dev"})),
        ("launch.revoked", json!({})),
    ] {
        let mut change = json!({"seq": 7, "kind": kind});
        change
            .as_object_mut()
            .unwrap()
            .extend(about.as_object().unwrap().clone());
        changes(&mut state, json!({"cursor": 7, "changes": [change]}));
        assert_eq!(drain(&mut state), refresh(), "{kind}");
    }
    assert_eq!(state.launching(), Some(false), "the change said so");
    // The agents answer after the resolution: qa waits on nothing.
    let mut now = team(false);
    now[3]["waitsOn"] = json!([]);
    answer(&mut state, Request::Agents, Ok(now));
    let text = screen(&state, 120, 40);
    assert!(!text.contains("repo.merge"), "{text}");
    assert!(
        text.contains("qa · run qa-1 · running · pi · pid 4244 · holding"),
        "{text}"
    );
    assert!(text.contains("Launching: OFF"), "{text}");
}

#[test]
fn the_switch_reads_from_the_broker_at_start_with_one_agents_read() {
    let mut link = MockLink::new();
    link.expect_call()
        .with(eq(Verb::Inbox), eq(json!({})))
        .times(1)
        .returning(|_, _| Ok(json!([])));
    link.expect_call()
        .with(eq(Verb::Agents), eq(json!({})))
        .times(1)
        .returning(|_, _| Ok(team(true)));
    link.expect_call()
        .with(eq(Verb::Head), eq(json!({})))
        .times(1)
        .returning(|_, _| Ok(json!({"size": 3, "head": "q5Yk", "note": "n"})));
    let mut state = State::new("acme");
    pump(&mut state, &link, &mut |_| {});
    link.checkpoint();
    assert_eq!(state.launching(), Some(true));
    state.handle_key(Key::Tab);
    let text = screen(&state, 80, 24);
    assert!(text.contains("Launching: on"), "{text}");
}

#[test]
fn the_selected_run_stays_on_screen_below_the_lines_of_what_others_wait_on() {
    let mut state = State::new("acme");
    drain(&mut state);
    let runs: Vec<Value> = (0..12)
        .map(|i| {
            json!({"role": "qa", "run": format!("qa-{i}"), "harness": "pi", "pid": i,
                   "address": null, "start_time": 1, "ended": null, "exited": null,
                   "restarts": 0, "usage": null, "holding": true, "revoked": false, "launching": true,
                   "lastVerb": null, "lastAt": null, "waiting": false,
                   "waitsOn": [{"id": ID, "action": "repo.merge", "target": "main",
                                "route": "lead", "blocking": false}]})
        })
        .collect();
    answer(&mut state, Request::Agents, Ok(Value::Array(runs)));
    state.handle_key(Key::Tab);
    keys(&mut state, &[Key::Char('j'); 11]);
    assert_eq!(state.selected(), 11);
    let text = screen(&state, 80, 24);
    assert!(text.contains("> qa · run qa-11 "), "{text}");
}
