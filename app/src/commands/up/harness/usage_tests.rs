//! The usage parser over lines shaped as the harnesses write them (Claude
//! Code's `stream-json --verbose`, pi's RPC events as its `docs/rpc.md`
//! shows them), and the run's sum over restarts.

use proptest::prelude::*;

use super::{read, Counted, Read, Said, Stream, Tally, Used};

const CLAUDE_TEXT: &str = r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Reading."}],"usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":2}},"session_id":"716b"}"#;
const CLAUDE_TOOL: &str = r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__mosaic-bus__inbox","input":{}}],"usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":40}},"session_id":"716b"}"#;
const CLAUDE_NEXT: &str = r#"{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":5,"output_tokens":7}},"session_id":"716b"}"#;
const CLAUDE_DONE: &str = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"total_cost_usd":0.0125,"result":"done","session_id":"716b"}"#;
const CLAUDE_FAILED: &str = r#"{"type":"result","subtype":"success","is_error":true,"total_cost_usd":0.5,"result":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}","session_id":"716b"}"#;
const CLAUDE_FAILED_BARE: &str =
    r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"716b"}"#;

const PI_ANSWER: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Hello"}],"usage":{"input":100,"output":50,"cacheRead":30,"cacheWrite":20,"cost":{"input":0.0003,"output":0.00075,"cacheRead":0,"cacheWrite":0,"total":0.00105}},"stopReason":"stop","timestamp":1733234567890}}"#;
const PI_USER: &str = r#"{"type":"message_end","message":{"role":"user","content":"Hello!","timestamp":1733234567890}}"#;
const PI_ERROR: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[],"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"total":0}},"stopReason":"error","errorMessage":"529 overloaded_error: Overloaded","timestamp":1}}"#;
const PI_RETRIES_SPENT: &str = r#"{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"529 overloaded_error: Overloaded"}"#;
const PI_RETRY_OK: &str = r#"{"type":"auto_retry_end","success":true,"attempt":2}"#;

fn answer(id: Option<&str>, input: u64, output: u64, cost_usd: f64) -> Counted {
    Counted::Answer {
        id: id.map(str::to_owned),
        input,
        output,
        cost_usd,
    }
}

#[test]
fn claude_code_counts_a_message_once_and_its_cost_from_the_result() {
    let read_all: Vec<Read> = [
        CLAUDE_TEXT,
        CLAUDE_TOOL,
        CLAUDE_NEXT,
        CLAUDE_DONE,
        "not json",
    ]
    .iter()
    .map(|l| read(Stream::ClaudeCode, l))
    .collect();
    assert_eq!(
        read_all[0].counted,
        Some(answer(Some("msg_1"), 1210, 2, 0.0))
    );
    assert_eq!(read_all[3].said, Some(Said::Fine));
    assert_eq!(read_all[4], Read::default());
    let mut used = Used::default();
    for r in read_all {
        if let Some(counted) = r.counted {
            used.add(counted);
        }
    }
    assert_eq!(
        used.total(),
        Tally {
            turns: 2,
            input_tokens: 1215,
            output_tokens: 47,
            cost_usd: 0.0125
        }
    );
}

#[test]
fn claude_code_says_the_error_its_result_ends_in() {
    assert_eq!(
        read(Stream::ClaudeCode, CLAUDE_FAILED).said,
        Some(Said::Error(
            r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}"#.to_owned()
        ))
    );
    assert_eq!(
        read(Stream::ClaudeCode, CLAUDE_FAILED_BARE).said,
        Some(Said::Error("error_during_execution".to_owned()))
    );
}

#[test]
fn pi_counts_each_assistant_message_and_says_its_error() {
    assert_eq!(
        read(Stream::Pi, PI_ANSWER),
        Read {
            counted: Some(answer(None, 150, 50, 0.00105)),
            said: Some(Said::Fine)
        }
    );
    assert_eq!(read(Stream::Pi, PI_USER), Read::default());
    assert_eq!(
        read(Stream::Pi, PI_ERROR).said,
        Some(Said::Error("529 overloaded_error: Overloaded".to_owned()))
    );
    assert_eq!(
        read(Stream::Pi, PI_RETRIES_SPENT),
        Read {
            counted: None,
            said: Some(Said::Error("529 overloaded_error: Overloaded".to_owned()))
        }
    );
    assert_eq!(read(Stream::Pi, PI_RETRY_OK), Read::default());
}

#[test]
fn a_restart_keeps_what_the_ended_process_used() {
    let mut used = Used::default();
    assert!(used.add(answer(Some("m"), 10, 1, 0.0)));
    assert!(used.add(Counted::Total { cost_usd: 0.5 }));
    used.restarted();
    // The new process's stream starts from zero, its ids too.
    assert!(used.add(answer(Some("m"), 3, 2, 0.0)));
    assert!(used.add(Counted::Total { cost_usd: 0.25 }));
    assert!(!used.add(Counted::Total { cost_usd: 0.25 }), "nothing new");
    assert_eq!(
        used.total(),
        Tally {
            turns: 2,
            input_tokens: 13,
            output_tokens: 3,
            cost_usd: 0.75
        }
    );
}

proptest! {
    /// However a stream splits its messages over lines, a run's turns are
    /// its messages, its tokens each message's last count, and its totals
    /// never go down.
    #[test]
    fn the_totals_count_each_message_once_and_never_go_down(
        messages in proptest::collection::vec(
            (proptest::collection::vec((0u64..1000, 0u64..1000), 1..4), any::<bool>()),
            0..20,
        ),
        restart_at in proptest::option::of(0usize..20),
    ) {
        let mut used = Used::default();
        let mut last = Tally::default();
        let (mut turns, mut input, mut output) = (0u64, 0u64, 0u64);
        for (i, (lines, with_id)) in messages.iter().enumerate() {
            if restart_at == Some(i) {
                used.restarted();
            }
            let id = with_id.then(|| format!("msg_{i}"));
            // Counts grow within a message, as a stream reports them.
            let mut grown = (0, 0);
            for &(a, b) in lines.iter().take(if *with_id { lines.len() } else { 1 }) {
                grown = (grown.0 + a, grown.1 + b);
                used.add(answer(id.as_deref(), grown.0, grown.1, 0.0));
                let now = used.total();
                prop_assert!(now.turns >= last.turns && now.input_tokens >= last.input_tokens);
                prop_assert!(now.output_tokens >= last.output_tokens);
                last = now;
            }
            turns += 1;
            input += grown.0;
            output += grown.1;
        }
        prop_assert_eq!(used.total().turns, turns);
        prop_assert_eq!(used.total().input_tokens, input);
        prop_assert_eq!(used.total().output_tokens, output);
    }
}
