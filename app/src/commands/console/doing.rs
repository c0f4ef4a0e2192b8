//! What each harness agent is doing, as `up --console` tells its console:
//! working, waiting on the feed, or exited; its last tool, and how long
//! ago.
//!
//! `up` keeps the table and writes it whole, one line per change (an
//! [`ActivityLine`], the wire shape both ends use), into a FIFO it names
//! with the hidden `--activity PATH`. A plain `mosaic-bus console` has none, and its
//! Agents view is as it was. Ages travel as milliseconds before the
//! line was written and are anchored to the console's clock when the line
//! is read, so the view ages them at each draw. A run is named by its id
//! and matched to the broker's `agents` row; how it exited is the
//! broker's, when the broker knows it.
//!
//! The line comes from `up`, not from an agent, but its texts are still
//! held as [`Shown`], and a tool's name is checked again as it is decoded
//! ([`Tool`](mosaic_client::wire::activity::Tool)), so nothing the console
//! draws from it can carry a control character or more than a short name.
//! A line that is not an [`ActivityLine`] is none.
//!
//! The same line carries each run's life ([`Life`], from its `lives`):
//! running, restarting, sleeping, stopping or ended, and for an ended one
//! its cause in words (which budget limit, the signal's name, the
//! harness's error line, neutralised).

use std::path::PathBuf;

use mosaic_client::wire::activity::{self as line, ActivityLine};
use mosaic_client::wire::life::{self, RunLife};

use super::model::{Exit, Shown, Spent};

/// The longest tool name drawn; a longer one ends in `…`.
const TOOL_WIDTH: usize = 32;

/// What a run is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Working.
    Working,
    /// Waiting on the feed.
    WaitingOnFeed,
    /// Its process ended, as `up` saw it.
    Exited(Exit),
}

/// One run's activity, as `up` told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doing {
    /// The run, as `up` and the broker name it.
    pub run: String,
    /// What it is doing.
    pub now: RunState,
    /// Since when (ms since the epoch, on the console's clock).
    pub since_ms: i64,
    /// Its last tool's name, shown, and when it called it.
    pub tool: Option<(Shown, i64)>,
}

/// Decodes one line read at `now_ms`; `None` when it is not one.
pub fn decode(line: &str, now_ms: i64) -> Option<Vec<Doing>> {
    let line: ActivityLine = serde_json::from_str(line).ok()?;
    let before = |ms: u64| now_ms.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX));
    let rows = line
        .runs
        .into_iter()
        .map(|row| {
            let now = match row.doing {
                line::Doing::Working => RunState::Working,
                line::Doing::Waiting => RunState::WaitingOnFeed,
                line::Doing::Exited { code, signal } => RunState::Exited(Exit {
                    status: code,
                    signal,
                }),
            };
            let tool = row.tool.map(|name| {
                let name = name.as_str();
                let shown = if name.len() > TOOL_WIDTH {
                    format!("{}…", &name[..TOOL_WIDTH - 1])
                } else {
                    name.to_owned()
                };
                (Shown::of(&shown), before(row.tool_ms.unwrap_or(0)))
            });
            Doing {
                run: row.run,
                now,
                since_ms: before(row.for_ms),
                tool,
            }
        })
        .collect();
    Some(rows)
}

/// The Agents row's word for `doing`, when neither the broker's exit nor
/// an open decision says more.
pub fn word(doing: &Doing) -> String {
    match doing.now {
        RunState::Working => "working".to_owned(),
        RunState::WaitingOnFeed => "waiting on the feed".to_owned(),
        RunState::Exited(exit) => exit.to_string(),
    }
}

/// The line under an Agents row: the last tool and how long ago, then
/// for how long it has been doing what it does. `age` says how long ago a
/// time was (`"12s"`).
pub fn detail(doing: &Doing, age: impl Fn(i64) -> String) -> String {
    let tool = match &doing.tool {
        Some((name, at)) => format!("last tool {name}, {} ago", age(*at)),
        None => "no tool called yet".to_owned(),
    };
    let since = match doing.now {
        RunState::Working => format!("working for {}", age(doing.since_ms)),
        RunState::WaitingOnFeed => format!("waiting on the feed for {}", age(doing.since_ms)),
        RunState::Exited(_) => format!("exited {} ago", age(doing.since_ms)),
    };
    format!("      the agent's own word: {tool} · {since}")
}

/// One run's life, as `up` told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Life {
    /// The run, as `up` and the broker name it.
    pub run: String,
    /// Its role, shown.
    pub role: Shown,
    /// Where its life is, in words, with the cause of an end.
    pub words: String,
    /// Whether its program runs (then what the agent says it does says
    /// more).
    pub running: bool,
    /// Whether it sleeps: its program exited with nothing left to do, and
    /// work wakes it.
    pub sleeping: bool,
    /// Whether it ended.
    pub ended: bool,
    /// Whether it ended in a failure (`failed`, `budget`, a signal, a
    /// non-zero status).
    pub failed: bool,
    /// How often its program started again inside it.
    pub restarts: u64,
    /// What it used, when its harness said.
    pub usage: Option<Spent>,
    /// The error its model's last answer ended in, shown.
    pub error: Option<Shown>,
    /// Its output's file, which the Run view reads the end of.
    pub output: Option<PathBuf>,
}

/// Decodes the lives of one line; `None` when it is not one.
pub fn lives(line: &str) -> Option<Vec<Life>> {
    let line: ActivityLine = serde_json::from_str(line).ok()?;
    Some(line.lives.iter().map(Life::from).collect())
}

impl From<&RunLife> for Life {
    fn from(row: &RunLife) -> Life {
        let error = row.error.as_deref().map(Shown::of);
        let (words, ended, failed) = match &row.state {
            life::State::Running => ("running".to_owned(), false, false),
            life::State::Restarting { in_ms } => (
                format!("restarting in {}s", in_ms.div_ceil(1000)),
                false,
                false,
            ),
            life::State::Sleeping => ("sleeping until work arrives".to_owned(), false, false),
            life::State::Stopping => ("stopping".to_owned(), false, false),
            life::State::Ended {
                cause,
                status,
                signal,
                signal_name,
                why,
                limit,
            } => {
                let failed = matches!(cause.as_str(), "failed" | "budget")
                    || signal.is_some()
                    || status.is_some_and(|s| s != 0);
                let mut words = format!("ENDED ({}", Shown::of(cause));
                if let Some(limit) = limit {
                    words.push_str(&format!(": its {} limit was reached", Shown::of(limit)));
                }
                match (status, signal) {
                    (_, Some(signal)) => {
                        let name = signal_name.as_deref().map_or_else(
                            || life::signal_name(*signal),
                            |n| Shown::of(n).to_string(),
                        );
                        words.push_str(&format!(", killed by {name}"));
                    }
                    (Some(status), None) => words.push_str(&format!(", status {status}")),
                    (None, None) => {}
                }
                if let Some(why) = why {
                    words.push_str(match why {
                        life::Why::Exited => "",
                        life::Why::SandboxGone => "; its sandbox was gone",
                        life::Why::RestartLimit => "; its restarts were spent",
                        life::Why::Budget => "",
                        life::Why::Stopped => "; up stopped",
                    });
                }
                if let Some(error) = &error {
                    words.push_str(&format!("; the harness said: {error}"));
                }
                words.push(')');
                (words, true, failed)
            }
        };
        Life {
            run: row.run.clone(),
            role: Shown::of(&row.role),
            running: row.state == life::State::Running,
            sleeping: row.state == life::State::Sleeping,
            words,
            ended,
            failed,
            restarts: row.restarts,
            usage: row.usage.map(|u| Spent {
                turns: u.turns,
                tokens: (u.input_tokens, u.output_tokens),
                cost: format!("{:.4}", u.cost_usd),
            }),
            error,
            output: row.output.as_deref().map(PathBuf::from),
        }
    }
}
