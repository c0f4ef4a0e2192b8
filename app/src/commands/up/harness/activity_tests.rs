//! The parser over lines shaped as the real programs write them (Claude
//! Code 2.1's `stream-json --verbose --include-hook-events`, captured
//! against a scripted model, ids shortened; pi's RPC events as its
//! `docs/rpc.md` shows them), and the table over injected times.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{read, Activities, Doing, Ended, LineActivity, Phase, Tool};
use crate::commands::up::harness::usage::Stream;

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/work","session_id":"fc1b","tools":["Task","Bash","mcp__mosaic-bus__inbox"],"mcp_servers":[{"name":"mosaic-bus","status":"connected"}],"model":"claude-x","permissionMode":"default","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.332","uuid":"c188"}"#;
const TOOL_USE: &str = r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Reading my inbox."},{"type":"tool_use","id":"toolu_1","name":"mcp__mosaic-bus__inbox","input":{"limit":"\u001b[2J sneaky"}}],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"716b","uuid":"ca98"}"#;
const RESULT: &str = r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"{\"items\":[]}","is_error":false}]},"parent_tool_use_id":null,"session_id":"716b","uuid":"0b61","tool_use_result":{"stdout":"hi","stderr":""}}"#;
const TEXT: &str = r#"{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"done"}],"stop_reason":null},"session_id":"716b","uuid":"440e"}"#;
const HOOK_STARTED: &str = r#"{"type":"system","subtype":"hook_started","hook_id":"7bb7","hook_name":"Stop","hook_event":"Stop","uuid":"2eaa","session_id":"716b"}"#;
const HOOK_RESPONSE: &str = r#"{"type":"system","subtype":"hook_response","hook_id":"7bb7","hook_name":"Stop","hook_event":"Stop","output":"{\"decision\":\"block\",\"reason\":\"a new message arrived\"}\n","exit_code":0,"outcome":"success","uuid":"a8be","session_id":"716b"}"#;
const FEEDBACK: &str = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Stop hook feedback:\na new message arrived"}]},"session_id":"716b","uuid":"6661","isSynthetic":true}"#;
const RETRY: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":590,"error_status":null,"error":"unknown","session_id":"fc1b","uuid":"c590"}"#;
const DONE: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_api_ms":184,"stop_reason":"end_turn","session_id":"716b","result":"done"}"#;

const PI_START: &str = r#"{"type":"agent_start"}"#;
const PI_TOOL: &str = r#"{"type":"tool_execution_start","toolCallId":"call_abc123","toolName":"message_send","args":{"to":"lead","body":"\u001b]52;c;x\u0007"}}"#;
const PI_UPDATE: &str = r#"{"type":"tool_execution_update","toolCallId":"call_abc123","toolName":"bash","args":{},"partialResult":{"content":[{"type":"text","text":"partial"}]}}"#;
const PI_END: &str = r#"{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":"done"}]}]}"#;
const PI_DELTA: &str = r#"{"type":"message_update","message":{},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hello"}}"#;
const PI_RESPONSE: &str = r#"{"id":"req-1","type":"response","command":"prompt","success":true}"#;

fn working() -> LineActivity {
    LineActivity {
        phase: Some(Phase::Working),
        tool: None,
    }
}

fn tool(name: &str) -> LineActivity {
    LineActivity {
        phase: Some(Phase::Working),
        tool: Some(Tool::of(name)),
    }
}

fn waiting() -> LineActivity {
    LineActivity {
        phase: Some(Phase::WaitingOnFeed),
        tool: None,
    }
}

#[test]
fn claude_code_lines_say_working_the_tool_and_waiting_in_the_stop_hook() {
    let said: Vec<LineActivity> = [
        INIT,
        RETRY,
        TOOL_USE,
        RESULT,
        TEXT,
        HOOK_STARTED,
        HOOK_RESPONSE,
        FEEDBACK,
        DONE,
    ]
    .iter()
    .map(|line| read(Stream::ClaudeCode, line))
    .collect();
    assert_eq!(
        said,
        [
            working(),
            LineActivity::default(),
            tool("inbox"),
            working(),
            // Text alone is not the turn's end: the Stop hook is.
            working(),
            waiting(),
            working(),
            working(),
            LineActivity::default(),
        ]
    );
    // The name as the model called it: only the bus's prefix goes.
    assert_eq!(Tool::of("inbox").as_str(), "inbox");
    let other = TOOL_USE.replace("mcp__mosaic-bus__inbox", "mcp__other__fetch");
    assert_eq!(read(Stream::ClaudeCode, &other), tool("mcp__other__fetch"));
}

#[test]
fn pi_events_say_working_the_tool_and_waiting_at_agent_end() {
    let said: Vec<LineActivity> = [
        PI_RESPONSE,
        PI_START,
        PI_DELTA,
        PI_TOOL,
        PI_UPDATE,
        PI_END,
        PI_START,
    ]
    .iter()
    .map(|line| read(Stream::Pi, line))
    .collect();
    assert_eq!(
        said,
        [
            LineActivity::default(),
            working(),
            LineActivity::default(),
            tool("message_send"),
            LineActivity::default(),
            waiting(),
            working(),
        ]
    );
}

#[test]
fn garbage_and_the_other_stream_s_lines_say_nothing() {
    let garbage = [
        "",
        "not json",
        "{",
        "null",
        "[1,2]",
        r#"{"type":3}"#,
        r#"{"type":"assistant","message":"text"}"#,
        r#"{"type":"tool_execution_start","toolName":{"a":1}}"#,
        "\u{1b}[2J{\"type\":\"agent_start\"}",
    ];
    for line in garbage {
        let claude = read(Stream::ClaudeCode, line);
        let pi = read(Stream::Pi, line);
        // An assistant line is work even when its content cannot be read.
        if line.contains("assistant") {
            assert_eq!(claude, working(), "{line:?}");
        } else {
            assert_eq!(claude, LineActivity::default(), "{line:?}");
        }
        assert_eq!(pi, LineActivity::default(), "{line:?}");
    }
    assert_eq!(read(Stream::Pi, INIT), LineActivity::default());
    assert_eq!(read(Stream::ClaudeCode, PI_END), LineActivity::default());
}

#[test]
fn a_tool_name_outside_the_pattern_is_a_question_mark() {
    for name in [
        "inbox\u{1b}[2J",
        "\u{1b}]0;pwned\u{7}",
        "two words",
        "",
        "née",
        "x\u{202e}",
        &"a".repeat(65),
    ] {
        let line = TOOL_USE.replace(
            "mcp__mosaic-bus__inbox",
            &serde_json::to_string(name)
                .expect("a name")
                .replace('"', ""),
        );
        let seen = read(Stream::ClaudeCode, &line);
        assert_eq!(seen, tool("?"), "{name:?} in {line}");
        let pi = PI_TOOL.replace(
            "\"message_send\"",
            &serde_json::to_string(name).expect("a name"),
        );
        assert_eq!(read(Stream::Pi, &pi), tool("?"), "{name:?}");
    }
    assert_eq!(Tool::of(&"a".repeat(64)).as_str(), "a".repeat(64));
    assert_eq!(
        Tool::of("decision_raise.v2-x").as_str(),
        "decision_raise.v2-x"
    );
}

#[test]
fn the_table_keeps_the_last_tool_and_when_and_the_exit_ends_it() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let table = Activities::new();
    table.observe("dev-1", Stream::ClaudeCode, RETRY, at(0));
    assert!(table.snapshot().is_empty(), "a line that says nothing");
    table.observe("dev-1", Stream::ClaudeCode, INIT, at(1));
    table.observe("dev-1", Stream::ClaudeCode, TOOL_USE, at(2));
    table.observe("dev-1", Stream::ClaudeCode, RESULT, at(3));
    table.observe("dev-1", Stream::ClaudeCode, HOOK_STARTED, at(4));
    table.observe("pi-1", Stream::Pi, PI_START, at(5));
    let snapshot = table.snapshot();
    assert_eq!(snapshot.len(), 2);
    let (run, dev) = &snapshot[0];
    assert_eq!(run, "dev-1");
    assert_eq!(dev.doing, Doing::WaitingOnFeed);
    assert_eq!(dev.since, at(4));
    assert_eq!(dev.tool, Some((Tool::of("inbox"), at(2))));
    assert_eq!(snapshot[1].1.doing, Doing::Working);
    assert_eq!(snapshot[1].1.tool, None);

    // Working again, then the exit; nothing after it counts.
    table.observe("dev-1", Stream::ClaudeCode, HOOK_RESPONSE, at(6));
    assert_eq!(table.snapshot()[0].1.doing, Doing::Working);
    table.exited("dev-1", Some(ExitStatus::from_raw(3 << 8)), at(7));
    table.observe("dev-1", Stream::ClaudeCode, TOOL_USE, at(8));
    table.exited("dev-1", Some(ExitStatus::from_raw(0)), at(9));
    let dev = &table.snapshot()[0].1;
    let ended = Ended {
        code: Some(3),
        signal: None,
    };
    assert_eq!(dev.doing, Doing::Exited(ended));
    assert_eq!(dev.since, at(7));
    assert_eq!(dev.tool, Some((Tool::of("inbox"), at(2))));

    // A kill; a run never seen (a command agent) stays unknown.
    table.exited("pi-1", Some(ExitStatus::from_raw(9)), at(9));
    table.exited("x-1", None, at(9));
    let snapshot = table.snapshot();
    assert_eq!(snapshot.len(), 2);
    let killed = Ended {
        code: None,
        signal: Some(9),
    };
    assert_eq!(snapshot[1].1.doing, Doing::Exited(killed));
    table.observe("x-1", Stream::Pi, PI_START, at(10));
    table.exited("x-1", None, at(11));
    let unknown = Ended {
        code: None,
        signal: None,
    };
    assert_eq!(table.snapshot()[2].1.doing, Doing::Exited(unknown));
}

#[test]
fn the_console_s_line_carries_ages_before_now_and_only_the_tool_s_name() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let table = Activities::new();
    table.observe("dev-1", Stream::Pi, PI_TOOL, at(1_000));
    table.observe("dev-1", Stream::Pi, PI_END, at(4_000));
    table.observe("lead-1", Stream::ClaudeCode, INIT, at(0));
    table.exited("lead-1", Some(ExitStatus::from_raw(0)), at(2_000));
    let (version, line) = table.line_at(at(12_000));
    assert_eq!(version, 4);
    assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
    let value: Value = serde_json::from_str(&line).expect("json");
    assert_eq!(
        value,
        serde_json::json!({"runs": [
            {"run": "dev-1", "doing": "waiting", "forMs": 8_000,
             "tool": "message_send", "toolMs": 11_000},
            {"run": "lead-1", "doing": "exited", "code": 0, "signal": null, "forMs": 10_000},
        ]})
    );
    // Nothing of the tool's arguments.
    assert!(!line.contains("args") && !line.contains("52;c"), "{line}");
}

#[test]
fn the_feed_writes_the_table_then_each_change() {
    let table = Activities::new();
    let (reader, writer) = std::io::pipe().expect("a pipe");
    let feeding = table.clone();
    let feed = std::thread::spawn(move || feeding.feed(writer));
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(reader));
    let mut next = || lines.next().expect("a line").expect("read");
    assert_eq!(next(), r#"{"runs":[]}"#);
    table.observe("dev-1", Stream::Pi, PI_TOOL, Instant::now());
    let line = next();
    assert!(line.contains(r#""tool":"message_send""#), "{line}");
    table.exited("dev-1", None, Instant::now());
    let line = next();
    assert!(line.contains(r#""doing":"exited""#), "{line}");
    // The console gone, the feed ends at its next write.
    drop(lines);
    table.observe("dev-2", Stream::Pi, PI_START, Instant::now());
    let ended = feed.join().expect("the feed's thread");
    assert_eq!(
        ended.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::BrokenPipe)
    );
}
