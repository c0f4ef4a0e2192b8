//! The History view: read when it opens and again when a change closes a
//! decision, the selection kept on its row, the next page asked with the
//! last row's position when the selection reaches it, a row's trail
//! opened with `Enter`, and each row drawn with the agents' words
//! neutralised.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::history::{History, How, Page, Past};
use super::model::Shown;
use super::request::Request;
use super::state::{Effect, Key, State, View};
use super::tests::{answer, changes, drain, keys, loaded, screen};

/// The decision id numbered `n`.
fn nth(n: u64) -> String {
    format!("0190a2b4-0000-7000-8000-{n:012}")
}

/// A `history` row of decision `n`, closed at position `n`, resolved
/// with `yes` by the human, with `fields` over it.
fn row(n: u64, fields: Value) -> Value {
    let mut row = json!({
        "action": "release.publish", "at": "2026-01-01T10:05:00.000Z", "blocking": false,
        "by": "human", "byRun": null, "choice": "yes", "id": nth(n), "note": null,
        "raiser": "dev", "raiserRun": "dev-1", "route": "human", "seq": n,
        "status": "resolved", "supersededBy": null, "target": "fix-42",
    });
    for (key, value) in fields.as_object().expect("an object") {
        row[key] = value.clone();
    }
    row
}

/// A page of rows `ns` (newest first), with `more` older ones left out.
fn page(ns: &[u64], more: u64) -> Value {
    let mut rows: Vec<Value> = ns.iter().map(|n| row(*n, json!({}))).collect();
    if more > 0 {
        rows.push(json!({"type": "more", "closed": more}));
    }
    Value::Array(rows)
}

fn newest() -> Request {
    Request::History { before: None }
}

/// A loaded console moved to the History view with `Tab`: the last
/// `Tab` asks for exactly the newest page, which answers `first`.
fn in_history(first: Value) -> State {
    let mut state = loaded(Vec::new());
    keys(&mut state, &[Key::Tab, Key::Tab, Key::Tab]);
    assert_eq!(state.view(), View::Activity);
    drain(&mut state);
    state.handle_key(Key::Tab);
    assert_eq!(state.view(), View::History);
    assert_eq!(drain(&mut state), [Effect::Send(newest())]);
    answer(&mut state, newest(), Ok(first));
    state
}

/// The id of the History view's selected row.
fn selected(state: &State) -> String {
    state.selected_past().expect("a row").id.to_string()
}

#[test]
fn the_view_reads_the_newest_closings_and_enter_opens_a_rows_trail() {
    let mut state = in_history(page(&[30, 20, 10], 0));
    assert_eq!(state.rows(), 3);
    assert_eq!(selected(&state), nth(30));
    assert_eq!(drain(&mut state), [], "a full list asks for no next page");
    state.handle_key(Key::Char('j'));
    assert_eq!(selected(&state), nth(20));
    assert_eq!(drain(&mut state), []);
    state.handle_key(Key::Enter);
    assert_eq!(state.view(), View::Trail);
    assert_eq!(state.trail().map(|(subject, _)| subject), Some(&*nth(20)));
    assert_eq!(drain(&mut state), [Effect::Send(Request::Trail(nth(20)))]);
}

#[test]
fn the_next_page_is_asked_once_at_the_last_row_and_added_below() {
    let mut state = in_history(page(&[30, 20, 10], 5));
    keys(&mut state, &[Key::Char('j')]);
    assert_eq!(drain(&mut state), []);
    state.handle_key(Key::Char('j'));
    let next = Request::History { before: Some(10) };
    assert_eq!(drain(&mut state), [Effect::Send(next.clone())]);
    // Asked once: the last row again asks nothing more.
    keys(&mut state, &[Key::Char('j'), Key::Down]);
    assert_eq!(drain(&mut state), []);
    // An answer to another question changes nothing.
    answer(
        &mut state,
        Request::History { before: Some(99) },
        Ok(page(&[98], 0)),
    );
    assert_eq!(state.rows(), 3);
    answer(&mut state, next, Ok(page(&[8, 6], 0)));
    assert_eq!(state.rows(), 5);
    assert_eq!(selected(&state), nth(10), "the selection stays");
    keys(
        &mut state,
        &[Key::Char('j'), Key::Char('j'), Key::Char('j')],
    );
    assert_eq!(selected(&state), nth(6));
    assert_eq!(drain(&mut state), [], "no older one is left");
}

#[test]
fn a_next_page_refused_is_asked_again_from_the_last_row() {
    let mut state = in_history(page(&[30, 20], 4));
    state.handle_key(Key::Char('j'));
    let next = Request::History { before: Some(20) };
    assert_eq!(drain(&mut state), [Effect::Send(next.clone())]);
    answer(
        &mut state,
        next.clone(),
        Err(mosaic_domain::Refusal::StorageUnavailable),
    );
    assert!(state.status().starts_with("storage-unavailable"));
    state.handle_key(Key::Char('j'));
    assert_eq!(drain(&mut state), [Effect::Send(next)]);
}

#[test]
fn a_change_that_closes_a_decision_reads_the_newest_again_and_the_selection_keeps_its_row() {
    let mut state = in_history(page(&[30, 20, 10], 5));
    state.handle_key(Key::Char('j'));
    drain(&mut state);
    changes(
        &mut state,
        json!({"cursor": 41, "changes": [{"seq": 41, "kind": "decision.raised", "decision": nth(41)}]}),
    );
    assert!(
        !drain(&mut state).contains(&Effect::Send(newest())),
        "a raise closes nothing"
    );
    changes(
        &mut state,
        json!({"cursor": 42, "changes": [
            {"seq": 42, "kind": "decision.withdrawn", "decision": nth(42)}]}),
    );
    let asked: Vec<Effect> = drain(&mut state)
        .into_iter()
        .filter(|e| matches!(e, Effect::Send(Request::History { .. })))
        .collect();
    assert_eq!(asked, [Effect::Send(newest())]);
    answer(&mut state, newest(), Ok(page(&[42, 30, 20], 6)));
    let seqs: Vec<u64> = state
        .history()
        .expect("read")
        .rows
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(seqs, [42, 30, 20, 10], "the older row read before stays");
    assert_eq!(state.history().map(|h| h.more), Some(5));
    assert_eq!(selected(&state), nth(20), "the selection stays on its row");
}

#[test]
fn before_the_view_opens_a_closing_change_reads_no_history() {
    let mut state = loaded(Vec::new());
    changes(
        &mut state,
        json!({"cursor": 9, "changes": [{"seq": 9, "kind": "decision.resolved", "decision": nth(9)}]}),
    );
    assert!(drain(&mut state)
        .iter()
        .all(|e| !matches!(e, Effect::Send(Request::History { .. }))));
    assert!(state.history().is_none());
}

#[test]
fn a_resolve_without_its_choice_is_a_bad_response() {
    let mut state = in_history(page(&[30], 0));
    answer(
        &mut state,
        newest(),
        Ok(json!([row(31, json!({"choice": null}))])),
    );
    assert!(
        state.status().starts_with("bad-response"),
        "{}",
        state.status()
    );
    assert_eq!(state.rows(), 1);
}

#[test]
fn each_row_says_when_how_by_whom_the_raiser_and_the_grant_neutralised() {
    let state = in_history(Value::Array(vec![
        row(
            30,
            json!({"target": "acme/ma\u{456}n\u{3164}", "blocking": true, "note": "\u{1b}[2J"}),
        ),
        row(
            20,
            json!({"status": "withdrawn", "by": "dev", "byRun": "dev-1", "choice": null}),
        ),
        row(
            10,
            json!({"status": "superseded", "by": null, "choice": null,
                   "supersededBy": nth(11), "action": "repo.merge", "target": null}),
        ),
        json!({"type": "more", "closed": 7}),
    ]));
    let text = screen(&state, 120, 40);
    let lines: Vec<&str> = text.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in\n{text}"))
    };
    let first = at("> 5m ago · resolved with yes by human · dev/dev-1 · release.publish on acme/ma⟨U+0456⟩n⟨U+3164⟩ · BLOCKED");
    let second = at("  5m ago · withdrawn by dev · dev/dev-1 · release.publish on fix-42");
    let third = at("  5m ago · superseded · dev/dev-1 · repo.merge on -");
    let more = at("7 older: the selection at the last row reads them");
    assert!(first < second && second < third && third < more, "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{3164}'),
        "{text}"
    );
    assert!(text.contains("History"), "{text}");
}

/// How the pages of a history are read, in any order.
#[derive(Debug, Clone)]
enum Step {
    /// A decision closes.
    Close(u64),
    /// The newest page is read again.
    Newest,
    /// The next page is asked for, if the list would ask for one.
    Ask,
    /// The page asked for is answered, as the closings stand now.
    Answer,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1_u64..4).prop_map(Step::Close),
        Just(Step::Newest),
        Just(Step::Ask),
        Just(Step::Answer),
    ]
}

/// The broker's page: the closings before `before`, newest first, at
/// most `limit`, and how many older ones it leaves out.
fn broker(closings: &[u64], before: Option<u64>, limit: usize) -> Page {
    let older: Vec<u64> = closings
        .iter()
        .rev()
        .copied()
        .filter(|seq| before.is_none_or(|b| *seq < b))
        .collect();
    let rows: Vec<Past> = older
        .iter()
        .take(limit)
        .map(|seq| Past {
            id: mosaic_domain::DecisionId::from_random([*seq as u8; 16]),
            seq: *seq,
            at_ms: 0,
            how: How::Withdrawn,
            by: None,
            raiser: Shown::of("dev/dev-1"),
            action: Shown::grant("repo.merge"),
            target: None,
            blocking: false,
        })
        .collect();
    Page {
        more: (older.len() - rows.len()) as u64,
        rows,
    }
}

proptest! {
    /// However closings, re-reads, asks and answers interleave, the list
    /// holds every closing between its newest and its oldest row, newest
    /// first and each once, and counts exactly the closings older than
    /// its last row.
    #[test]
    fn the_pages_read_make_one_run_of_closings_and_count_the_rest(
        first in proptest::collection::vec(1_u64..4, 0..12),
        limit in 1_usize..4,
        steps in proptest::collection::vec(step(), 0..30),
    ) {
        let mut closings: Vec<u64> = first
            .iter()
            .scan(0, |seq, gap| {
                *seq += gap;
                Some(*seq)
            })
            .collect();
        let mut history = History::default();
        history.newest(broker(&closings, None, limit));
        let mut pending = None;
        for step in steps {
            match step {
                Step::Close(gap) => {
                    closings.push(closings.last().copied().unwrap_or(0) + gap);
                }
                Step::Newest => history.newest(broker(&closings, None, limit)),
                Step::Ask => {
                    if let Some(before) = history.next_page(true) {
                        history.asking = Some(before);
                        pending = Some(before);
                    }
                }
                Step::Answer => {
                    if let Some(before) = pending.take() {
                        history.older(before, broker(&closings, Some(before), limit));
                    }
                }
            }
            let seqs: Vec<u64> = history.rows.iter().map(|r| r.seq).collect();
            prop_assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{:?}", seqs);
            if let (Some(newest), Some(oldest)) = (seqs.first(), seqs.last()) {
                let between: Vec<u64> = closings
                    .iter()
                    .rev()
                    .copied()
                    .filter(|s| s <= newest && s >= oldest)
                    .collect();
                prop_assert_eq!(&seqs, &between);
                let older = closings.iter().filter(|s| *s < oldest).count() as u64;
                prop_assert_eq!(history.more, older);
            } else {
                prop_assert_eq!(history.more, 0);
            }
        }
    }
}

#[test]
fn a_filter_keeps_the_rows_whose_words_hold_it_and_pages_from_the_last_row_kept() {
    let mut state = in_history(Value::Array(vec![
        row(30, json!({})),
        row(
            20,
            json!({"status": "withdrawn", "by": "dev", "byRun": "dev-1", "choice": null}),
        ),
        row(10, json!({})),
        json!({"type": "more", "closed": 4}),
    ]));
    state.handle_key(Key::Char('/'));
    keys(
        &mut state,
        &"WITHDRAWN".chars().map(Key::Char).collect::<Vec<_>>(),
    );
    state.handle_key(Key::Enter);
    assert_eq!(state.kept(), Some((vec![1], 3)));
    assert_eq!(selected(&state), nth(20));
    drain(&mut state);
    // The last row kept is the end: the next page is asked from the
    // whole list's last row.
    state.handle_key(Key::Char('j'));
    assert_eq!(
        drain(&mut state),
        [Effect::Send(Request::History { before: Some(10) })]
    );
    let text = screen(&state, 120, 40);
    assert!(text.contains("withdrawn by dev"), "{text}");
    assert!(!text.contains("resolved with yes"), "{text}");
    // A filter that keeps nothing asks for no page.
    let mut state = in_history(page(&[30, 20], 4));
    state.handle_key(Key::Char('/'));
    keys(&mut state, &[Key::Char('z'), Key::Char('z'), Key::Enter]);
    state.handle_key(Key::Char('j'));
    assert_eq!(drain(&mut state), []);
}
