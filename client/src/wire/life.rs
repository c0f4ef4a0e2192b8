//! The private channel between `up --console` and the console it starts,
//! beside the activity of each harness agent ([`super::activity`]): each
//! run's life, which `up` writes, and the orders the console sends back.
//!
//! # `up` → console: `lives` on each activity line
//!
//! ```json
//! {"runs":[…],"lives":[
//!   {"run":"dev-0badc0de","role":"dev","state":"running","restarts":1,
//!    "usage":{"turns":4,"inputTokens":5120,"outputTokens":380,"costUsd":0.0125},
//!    "output":"/data/runs/dev-0badc0de/transcript.jsonl"},
//!   {"run":"lead-12345678","role":"lead","state":"restarting","inMs":1800,"restarts":2,
//!    "error":"529 overloaded_error: Overloaded"},
//!   {"run":"qa-87654321","role":"qa","state":"ended","cause":"failed","status":null,
//!    "signal":9,"signalName":"SIGKILL","why":"restart-limit","restarts":5}]}
//! ```
//!
//! Every run `up` launched, in launch order, and its `state` ([`State`]):
//! `running`; `restarting` (its program exited, and starts again in
//! `inMs` ms after the line was written); `sleeping` (its program exited
//! with nothing left to do, and starts again when work arrives);
//! `stopping` (it ended, and its sandbox is being stopped); `ended`, with
//! the run's `cause` (`exited`, `failed`, `human`, `revoked`, `budget`),
//! its program's exit `status` or `signal` and that signal's name, and
//! when `up` ended it, `why` ([`Why`]: with `limit` for a budget).
//! `restarts` counts the starts again inside the run; `usage` is what a
//! harness run used, as its event stream said; `error` is the error its
//! model's last answer ended in (text from the model's side, which the
//! console neutralises like any agent text); `output` is the path of the
//! run's output file (a harness run's transcript, or the file of its
//! lines), whose tail the console reads, bounded, and neutralises.
//!
//! # Console → `up`: orders
//!
//! A FIFO named `orders` beside the activity FIFO (in the same private
//! folder), which the console opens for writing before it opens
//! `activity`: `up` removes the folder once the activity FIFO is open.
//! One JSON object per line ([`Order`]):
//!
//! ```json
//! {"order":"start","run":"qa-87654321"}
//! ```
//!
//! `start`: start the agent whose run this was again, as a new run, when
//! it is down (its run ended and nothing is planned for it). `up` logs
//! what it did with each order; a line that is no order is ignored.

use serde::{Deserialize, Serialize};

/// The longest order line `up` reads.
pub const MAX_ORDER_LINE: usize = 4096;

/// The FIFO of orders, beside the activity FIFO.
pub const ORDERS_FIFO: &str = "orders";

/// One run's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLife {
    /// The run.
    pub run: String,
    /// Its role.
    pub role: String,
    /// Where its life is.
    #[serde(flatten)]
    pub state: State,
    /// How often its program started again inside it.
    pub restarts: u64,
    /// What it used, for a harness run that said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The error its model's last answer ended in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The path of its output's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// Where a run's life is (`state` on the line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum State {
    /// Its program runs.
    Running,
    /// Its program exited and starts again.
    Restarting {
        /// In how many ms after the line was written.
        #[serde(rename = "inMs")]
        in_ms: u64,
    },
    /// Its program exited with nothing left to do; work wakes it.
    Sleeping,
    /// It ended; its sandbox is being stopped.
    Stopping,
    /// It ended.
    Ended {
        /// The end's cause, as the broker records it.
        cause: String,
        /// Its program's exit status, where it exited.
        status: Option<i32>,
        /// The signal that killed it, where one did.
        signal: Option<i32>,
        /// That signal's name (`SIGKILL`).
        #[serde(rename = "signalName")]
        signal_name: Option<String>,
        /// Why `up` ended it, when `up` did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<Why>,
        /// For a budget: which limit (`turns`, `tokens`, `costUsd`, `wallS`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
    },
}

/// Why `up` ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    /// Its program ended and does not start again in it.
    Exited,
    /// Its sandbox was gone before its program ended.
    SandboxGone,
    /// Its program failed more often than `restartLimit` allows.
    RestartLimit,
    /// It reached a limit of its budget.
    Budget,
    /// `up` itself stopped.
    Stopped,
}

/// What a run used (the `agents` row's `usage` has the same keys).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Turns.
    pub turns: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
}

/// An order from the console to `up`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "order", rename_all = "lowercase", deny_unknown_fields)]
pub enum Order {
    /// Start the agent of this (ended) run again, as a new run.
    Start {
        /// The run that ended.
        run: String,
    },
}

/// A signal's name, `SIGKILL` for 9; `SIGRTMIN+n` past the standard ones;
/// `signal N` for a number no Linux signal has.
pub fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(signal) {
        Ok(n @ 1..=31) => NAMES[n - 1].to_owned(),
        Ok(n @ 32..=64) => format!("SIGRTMIN+{}", n - 32),
        Ok(_) | Err(_) => format!("signal {signal}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lives_are_written_as_documented_and_read_back_whole() {
        let lives = vec![
            RunLife {
                run: "dev-0badc0de".to_owned(),
                role: "dev".to_owned(),
                state: State::Running,
                restarts: 1,
                usage: Some(Usage {
                    turns: 4,
                    input_tokens: 5120,
                    output_tokens: 380,
                    cost_usd: 0.0125,
                }),
                error: None,
                output: Some("/data/runs/dev-0badc0de/transcript.jsonl".to_owned()),
            },
            RunLife {
                run: "lead-12345678".to_owned(),
                role: "lead".to_owned(),
                state: State::Restarting { in_ms: 1800 },
                restarts: 2,
                usage: None,
                error: Some("529 overloaded_error: Overloaded".to_owned()),
                output: None,
            },
            RunLife {
                run: "qa-87654321".to_owned(),
                role: "qa".to_owned(),
                state: State::Ended {
                    cause: "failed".to_owned(),
                    status: None,
                    signal: Some(9),
                    signal_name: Some(signal_name(9)),
                    why: Some(Why::RestartLimit),
                    limit: None,
                },
                restarts: 5,
                usage: None,
                error: None,
                output: None,
            },
        ];
        let value = serde_json::to_value(&lives).expect("encodes");
        assert_eq!(
            value,
            json!([
                {"run":"dev-0badc0de","role":"dev","state":"running","restarts":1,
                 "usage":{"turns":4,"inputTokens":5120,"outputTokens":380,"costUsd":0.0125},
                 "output":"/data/runs/dev-0badc0de/transcript.jsonl"},
                {"run":"lead-12345678","role":"lead","state":"restarting","inMs":1800,"restarts":2,
                 "error":"529 overloaded_error: Overloaded"},
                {"run":"qa-87654321","role":"qa","state":"ended","cause":"failed","status":null,
                 "signal":9,"signalName":"SIGKILL","why":"restart-limit","restarts":5},
            ])
        );
        let back: Vec<RunLife> = serde_json::from_value(value).expect("decodes");
        assert_eq!(back, lives);
    }

    #[test]
    fn an_order_is_one_documented_line_and_nothing_else_is() {
        assert_eq!(
            serde_json::from_str::<Order>(r#"{"order":"start","run":"qa-87654321"}"#).ok(),
            Some(Order::Start {
                run: "qa-87654321".to_owned()
            })
        );
        for bad in [
            r#"{"order":"stop","run":"a"}"#,
            r#"{"order":"start"}"#,
            r#"{"order":"start","run":"a","now":true}"#,
            "start a",
        ] {
            assert!(serde_json::from_str::<Order>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn signals_have_their_names() {
        let names: Vec<String> = [1, 9, 15, 31, 34, 64, 0, 65, -1]
            .into_iter()
            .map(signal_name)
            .collect();
        assert_eq!(
            names,
            [
                "SIGHUP",
                "SIGKILL",
                "SIGTERM",
                "SIGSYS",
                "SIGRTMIN+2",
                "SIGRTMIN+32",
                "signal 0",
                "signal 65",
                "signal -1"
            ]
        );
    }
}
