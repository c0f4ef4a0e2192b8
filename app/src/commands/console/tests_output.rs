//! The Run view's output and a sleeping run: the last lines of the file
//! `up` names, read bounded from its end and neutralised (a transcript's
//! events by their text); where the output is when no `up` names it; a
//! sleeping run said to sleep in the Agents and the Run views.

use std::io::Write;

use proptest::prelude::*;
use serde_json::json;

use super::doing;
use super::request::Request;
use super::state::{Key, State, View};
use super::tail::{self, LINE_CHARS, TAIL_BYTES, TAIL_LINES};
use super::tests::{answer, decision, drain, keys, loaded, screen, team, ID};

/// A console with `team`'s runs in which `lead-1`'s program exited, and
/// `up`'s lives: `lead-1` in `state`, with its output at `output`.
fn console_with(state: &str, output: Option<&str>) -> State {
    let mut console = loaded(vec![decision(ID, "release.publish", true)]);
    let mut team = team(true);
    team[2]["exited"] = json!({"status": 0, "signal": null});
    answer(&mut console, Request::Agents, Ok(team));
    let mut life = json!({"run": "lead-1", "role": "lead", "state": state, "restarts": 1});
    if let Some(output) = output {
        life["output"] = json!(output);
    }
    let line = json!({"runs": [], "lives": [life]}).to_string();
    console.handle_lives(doing::lives(&line).expect("a line"));
    drain(&mut console);
    console
}

/// The Run view of `lead-1` (the third Agents row).
fn open_lead(console: &mut State) {
    console.handle_key(Key::Tab);
    assert_eq!(console.view(), View::Agents);
    keys(console, &[Key::Char('j'), Key::Char('j'), Key::Enter]);
    assert_eq!(console.view(), View::Run);
    drain(console);
}

#[test]
fn a_sleeping_run_sleeps_in_the_agents_view_and_the_run_view_though_its_program_exited() {
    let mut console = console_with("sleeping", None);
    console.handle_key(Key::Tab);
    let agents = screen(&console, 120, 40);
    assert!(
        agents.contains("lead · run lead-1 · sleeping until work arrives · pi"),
        "{agents}"
    );
    keys(&mut console, &[Key::Char('j'), Key::Char('j'), Key::Enter]);
    assert_eq!(console.view(), View::Run);
    let run = screen(&console, 120, 40);
    assert!(run.contains("State: sleeping until work arrives"), "{run}");
    assert!(!run.contains("State: exited"), "{run}");

    let running = console_with("running", None);
    let mut running = running;
    running.handle_key(Key::Tab);
    let agents = screen(&running, 120, 40);
    assert!(!agents.contains("sleeping"), "{agents}");
}

#[test]
fn without_up_s_path_the_run_view_says_where_the_output_is_and_reads_nothing() {
    let mut console = console_with("running", None);
    open_lead(&mut console);
    assert_eq!(console.output_to_read(), None);
    let text = screen(&console, 120, 40);
    assert!(
        text.contains("Its output: in the file up's first line names for this run"),
        "{text}"
    );
}

#[test]
fn the_run_view_shows_the_last_lines_of_the_file_up_names_neutralised() {
    let folder = tempfile::tempdir().expect("a folder");
    let path = folder.path().join("lead-1.log");
    let mut file = std::fs::File::create(&path).expect("the output");
    for n in 0..30 {
        writeln!(file, "line {n}").expect("written");
    }
    writeln!(file, "the agent printed \u{1b}[2Jcleared").expect("written");
    drop(file);
    let shown = path.to_str().expect("a UTF-8 path");
    let mut console = console_with("running", Some(shown));

    assert_eq!(console.output_to_read(), None, "read only for the Run view");
    open_lead(&mut console);
    let (run, to_read) = console.output_to_read().expect("the Run view reads it");
    assert_eq!(
        (run.as_str(), to_read.as_path()),
        ("lead-1", path.as_path())
    );
    console.handle_output(run, tail::read(&to_read).ok());
    let text = screen(&console, 120, 50);
    assert!(
        text.contains(&format!("Its output, the last lines of {shown}:")),
        "{text}"
    );
    assert!(text.contains("the agent printed ⟨ESC⟩[2Jcleared"), "{text}");
    assert!(
        text.contains("line 11") && text.contains("line 29"),
        "{text}"
    );
    assert!(!text.contains("line 10"), "only the last lines: {text}");

    console.handle_output("lead-1".to_owned(), None);
    let text = screen(&console, 120, 40);
    assert!(text.contains("(not readable now)"), "{text}");
}

#[test]
fn a_tail_is_read_from_the_end_of_a_large_file_and_its_first_cut_line_dropped() {
    let folder = tempfile::tempdir().expect("a folder");
    let path = folder.path().join("out.log");
    let mut file = std::fs::File::create(&path).expect("the output");
    // Far more than the bound, each line long enough that the bound
    // starts inside one.
    for n in 0..5000 {
        writeln!(file, "line {n:05} {}", "x".repeat(93)).expect("written");
    }
    drop(file);
    assert!(std::fs::metadata(&path).expect("its size").len() > 10 * TAIL_BYTES);
    let lines = tail::read(&path).expect("read");
    let texts: Vec<String> = lines.iter().map(|l| l.as_str()[..10].to_owned()).collect();
    let expected: Vec<String> = (5000 - TAIL_LINES..5000)
        .map(|n| format!("line {n:05}"))
        .collect();
    assert_eq!(texts, expected);

    let cut = tail::lines(b"ne 7\nline 8\nline 9\n", true);
    let cut: Vec<&str> = cut.iter().map(|l| l.as_str()).collect();
    assert_eq!(cut, ["line 8", "line 9"], "the line cut at its start goes");
    let whole = tail::lines(b"line 7\nline 8\n", false);
    assert_eq!(whole.len(), 2, "a file read whole keeps its first line");
}

#[test]
fn a_transcript_s_events_show_their_text_or_their_type() {
    let events = [
        json!({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "I fixed the \u{1b}]0;title\u{7} test"}]}}),
        json!({"type": "system", "subtype": "init", "session_id": "s"}),
        json!({"type": "result", "result": "done"}),
    ];
    let mut bytes = Vec::new();
    for event in &events {
        bytes.extend_from_slice(event.to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(b"not json\n");
    let lines = tail::lines(&bytes, false);
    let lines: Vec<&str> = lines.iter().map(|l| l.as_str()).collect();
    assert_eq!(
        lines,
        [
            "[assistant] I fixed the ⟨ESC⟩]0;title⟨BEL⟩ test",
            "[system]",
            "[result] done",
            "not json",
        ]
    );
}

proptest! {
    /// Whatever a run wrote, what is shown is at most the last lines, one
    /// line each, bounded, with no character that draws as anything else.
    #[test]
    fn whatever_the_output_holds_the_tail_is_bounded_and_inert(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        cut_in in any::<bool>(),
    ) {
        let lines = tail::lines(&bytes, cut_in);
        prop_assert!(lines.len() <= TAIL_LINES);
        for line in &lines {
            prop_assert!(!line.as_str().chars().any(char::is_control), "{:?}", line);
            // Each kept character is one token at most.
            prop_assert!(line.as_str().chars().count() <= LINE_CHARS * 16);
        }
    }
}
