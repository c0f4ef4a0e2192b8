//! What a harness run used, and the error its model last answered, read
//! from its event stream: a pure parser of one line ([`read`]) into what
//! it counts ([`Counted`]) and what error it says ([`Said`]), and the sum
//! over a run's life ([`Used`]), which `up` notes with the broker
//! (`agents`' `usage`), weighs against the run's budget and shows the
//! console.
//!
//! # What counts
//!
//! - **Claude Code** (`stream-json --verbose`): each `assistant` line
//!   carries its message's `id` and `usage`; one message may come as
//!   several lines (one per content block), each with the same id, so a
//!   turn is a new id, and its tokens are the last line's. Input tokens
//!   are `input_tokens` plus the cache's (`cache_creation_input_tokens`,
//!   `cache_read_input_tokens`): a loop against a cached prompt is still a
//!   loop. The cost comes on the `result` line only, as
//!   `total_cost_usd`, the process's total so far. A `result` with
//!   `is_error` says its error (its `result` text, else its `subtype`).
//! - **pi** (`--mode rpc`): each `message_end` of an `assistant` message
//!   is a turn, with `usage.input` (plus `cacheRead` and `cacheWrite`),
//!   `usage.output` and `usage.cost.total`. One whose `stopReason` is
//!   `error` says its `errorMessage`; `auto_retry_end` without `success`
//!   says its `finalError`.
//!
//! A turn that ends well clears the error said before it: the error shown
//! is the one the run's last turn ended in.
//!
//! # Across restarts
//!
//! A run's program may start again inside the run; each start is a new
//! process whose stream counts from zero. [`Used`] keeps what the ended
//! processes used apart from the current one's, and adds them.

use mosaic_domain::evidence::Harness;
use serde::Deserialize;

/// Which harness wrote a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Claude Code's `stream-json`.
    ClaudeCode,
    /// pi's RPC mode events.
    Pi,
}

impl Stream {
    /// The stream `harness` writes when `up` starts it.
    pub fn of(harness: Harness) -> Stream {
        match harness {
            Harness::ClaudeCode => Stream::ClaudeCode,
            Harness::Pi => Stream::Pi,
        }
    }
}

/// The longest error line kept, in characters.
pub const MAX_ERROR: usize = 300;

/// What one line counts.
#[derive(Debug, Clone, PartialEq)]
pub enum Counted {
    /// One model answer, a turn: its tokens and, where the harness says
    /// it per answer, its cost. `id` is the message's where one message
    /// comes over several lines.
    Answer {
        /// The message's id (Claude Code).
        id: Option<String>,
        /// Input tokens, the cache's included.
        input: u64,
        /// Output tokens.
        output: u64,
        /// Its cost in US dollars (pi), else 0.
        cost_usd: f64,
    },
    /// The process's own total cost so far (Claude Code's `result`).
    Total {
        /// In US dollars.
        cost_usd: f64,
    },
}

/// What one line says of the model's errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// The turn ended in this error.
    Error(String),
    /// A turn ended well.
    Fine,
}

/// What one line counts and says, each where it does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Read {
    /// Its count.
    pub counted: Option<Counted>,
    /// Its word on errors.
    pub said: Option<Said>,
}

/// Reads one line of `stream`. Never fails: a line it cannot read says
/// nothing.
pub fn read(stream: Stream, line: &str) -> Read {
    match stream {
        Stream::ClaudeCode => read_claude(line),
        Stream::Pi => read_pi(line),
    }
}

#[derive(Deserialize)]
struct ClaudeLine {
    #[serde(rename = "type")]
    kind: String,
    message: Option<ClaudeMessage>,
    subtype: Option<String>,
    is_error: Option<bool>,
    result: Option<serde_json::Value>,
    total_cost_usd: Option<f64>,
}

#[derive(Deserialize)]
struct ClaudeMessage {
    id: Option<String>,
    usage: Option<ClaudeUsage>,
}

#[derive(Deserialize, Default)]
struct ClaudeUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

fn read_claude(line: &str) -> Read {
    let Ok(head) = serde_json::from_str::<ClaudeLine>(line) else {
        return Read::default();
    };
    match head.kind.as_str() {
        "assistant" => {
            let Some(message) = head.message else {
                return Read::default();
            };
            let usage = message.usage.unwrap_or_default();
            Read {
                counted: Some(Counted::Answer {
                    id: message.id,
                    input: usage
                        .input_tokens
                        .saturating_add(usage.cache_creation_input_tokens)
                        .saturating_add(usage.cache_read_input_tokens),
                    output: usage.output_tokens,
                    cost_usd: 0.0,
                }),
                said: None,
            }
        }
        "result" => {
            let said = match head.is_error {
                Some(true) => {
                    let text = head
                        .result
                        .as_ref()
                        .and_then(serde_json::Value::as_str)
                        .filter(|t| !t.trim().is_empty())
                        .map(str::to_owned)
                        .or(head.subtype)
                        .unwrap_or_else(|| "error".to_owned());
                    Some(Said::Error(text))
                }
                Some(false) => Some(Said::Fine),
                None => None,
            };
            Read {
                counted: head
                    .total_cost_usd
                    .filter(|c| c.is_finite() && *c >= 0.0)
                    .map(|cost_usd| Counted::Total { cost_usd }),
                said,
            }
        }
        _ => Read::default(),
    }
}

#[derive(Deserialize)]
struct PiLine {
    #[serde(rename = "type")]
    kind: String,
    message: Option<PiMessage>,
    success: Option<bool>,
    #[serde(rename = "finalError")]
    final_error: Option<String>,
}

#[derive(Deserialize)]
struct PiMessage {
    role: Option<String>,
    usage: Option<PiUsage>,
    #[serde(rename = "stopReason")]
    stop_reason: Option<String>,
    #[serde(rename = "errorMessage")]
    error_message: Option<String>,
}

#[derive(Deserialize, Default)]
struct PiUsage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default, rename = "cacheRead")]
    cache_read: u64,
    #[serde(default, rename = "cacheWrite")]
    cache_write: u64,
    cost: Option<PiCost>,
}

#[derive(Deserialize)]
struct PiCost {
    total: Option<f64>,
}

fn read_pi(line: &str) -> Read {
    let Ok(event) = serde_json::from_str::<PiLine>(line) else {
        return Read::default();
    };
    match event.kind.as_str() {
        "message_end" => {
            let Some(message) = event.message else {
                return Read::default();
            };
            if message.role.as_deref() != Some("assistant") {
                return Read::default();
            }
            let usage = message.usage.unwrap_or_default();
            let cost_usd = usage
                .cost
                .and_then(|c| c.total)
                .filter(|c| c.is_finite() && *c >= 0.0)
                .unwrap_or(0.0);
            let said = if message.stop_reason.as_deref() == Some("error") {
                Said::Error(
                    message
                        .error_message
                        .unwrap_or_else(|| "the model answered an error".to_owned()),
                )
            } else {
                Said::Fine
            };
            Read {
                counted: Some(Counted::Answer {
                    id: None,
                    input: usage
                        .input
                        .saturating_add(usage.cache_read)
                        .saturating_add(usage.cache_write),
                    output: usage.output,
                    cost_usd,
                }),
                said: Some(said),
            }
        }
        "auto_retry_end" if event.success == Some(false) => Read {
            counted: None,
            said: Some(Said::Error(
                event
                    .final_error
                    .unwrap_or_else(|| "retries spent".to_owned()),
            )),
        },
        _ => Read::default(),
    }
}

/// What a run used: the sum of its ended processes' and its current one's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Used {
    /// What the ended processes used.
    before: Tally,
    /// What the current process used so far.
    now: Tally,
    /// The current process's last message id and its tokens, which a
    /// later line of the same message replaces.
    last: Option<(String, u64, u64)>,
}

/// Turns, tokens and cost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tally {
    /// Turns.
    pub turns: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
}

impl Tally {
    fn plus(self, other: Tally) -> Tally {
        Tally {
            turns: self.turns.saturating_add(other.turns),
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cost_usd: self.cost_usd + other.cost_usd,
        }
    }
}

impl Used {
    /// The whole run's.
    pub fn total(&self) -> Tally {
        self.before.plus(self.now)
    }

    /// Takes in what one line counted; whether the total changed.
    pub fn add(&mut self, counted: Counted) -> bool {
        let before = self.total();
        match counted {
            Counted::Answer {
                id,
                input,
                output,
                cost_usd,
            } => {
                let same = matches!((&self.last, &id), (Some((last, ..)), Some(id)) if last == id);
                if same {
                    if let Some((_, last_in, last_out)) = &mut self.last {
                        // The message's later line carries its whole count.
                        self.now.input_tokens = self
                            .now
                            .input_tokens
                            .saturating_sub(*last_in)
                            .saturating_add(input);
                        self.now.output_tokens = self
                            .now
                            .output_tokens
                            .saturating_sub(*last_out)
                            .saturating_add(output);
                        (*last_in, *last_out) = (input, output);
                    }
                } else {
                    self.now.turns = self.now.turns.saturating_add(1);
                    self.now.input_tokens = self.now.input_tokens.saturating_add(input);
                    self.now.output_tokens = self.now.output_tokens.saturating_add(output);
                    self.last = id.map(|id| (id, input, output));
                }
                self.now.cost_usd += cost_usd;
            }
            Counted::Total { cost_usd } => self.now.cost_usd = self.now.cost_usd.max(cost_usd),
        }
        self.total() != before
    }

    /// The program started again: what its last process used is kept, and
    /// the new one counts from zero.
    pub fn restarted(&mut self) {
        self.before = self.total();
        self.now = Tally::default();
        self.last = None;
    }
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
