//! What each harness agent is doing, as `up --console` tells its console:
//! working, waiting on the feed, or exited; its last tool, and how long
//! ago.
//!
//! `up` keeps the table ([`crate::commands::up::harness::activity`]) and writes it
//! whole, one JSON line per change, into a FIFO it names with the hidden
//! `--activity PATH`. A plain `mosaic-bus console` has none, and its
//! Agents view is as it was. Ages travel as milliseconds before the
//! line was written and are anchored to the console's clock when the line
//! is read, so the view ages them at each draw. A run is named by its id
//! and matched to the broker's `agents` row; how it exited is the
//! broker's, when the broker knows it.
//!
//! The line comes from `up`, not from an agent, but its texts are still
//! held as [`Shown`], and a tool's name is checked again against the
//! parser's pattern, so nothing the console draws from it can carry a
//! control character or more than a short name.

use serde::Deserialize;

use super::model::{Exit, Shown};
use crate::commands::up::harness::activity::Tool;

/// The longest tool name drawn; a longer one ends in `…`.
const TOOL_WIDTH: usize = 32;

/// What a run is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
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
    pub now: Now,
    /// Since when (ms since the epoch, on the console's clock).
    pub since_ms: i64,
    /// Its last tool's name, shown, and when it called it.
    pub tool: Option<(Shown, i64)>,
}

/// The line's shape; anything else in it is ignored.
#[derive(Deserialize)]
struct Line {
    runs: Vec<Row>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    run: String,
    doing: String,
    for_ms: u64,
    code: Option<i64>,
    signal: Option<i64>,
    tool: Option<String>,
    tool_ms: Option<u64>,
}

/// Decodes one line read at `now_ms`; `None` when it is not one.
pub fn decode(line: &str, now_ms: i64) -> Option<Vec<Doing>> {
    let line: Line = serde_json::from_str(line).ok()?;
    let before = |ms: u64| now_ms.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX));
    let rows = line
        .runs
        .into_iter()
        .filter_map(|row| {
            let now = match row.doing.as_str() {
                "working" => Now::Working,
                "waiting" => Now::WaitingOnFeed,
                "exited" => Now::Exited(Exit {
                    status: row.code,
                    signal: row.signal,
                }),
                _ => return None,
            };
            let tool = row.tool.map(|name| {
                let name = Tool::of(&name);
                let shown = if name.as_str().len() > TOOL_WIDTH {
                    format!("{}…", &name.as_str()[..TOOL_WIDTH - 1])
                } else {
                    name.as_str().to_owned()
                };
                (Shown::of(&shown), before(row.tool_ms.unwrap_or(0)))
            });
            Some(Doing {
                run: row.run,
                now,
                since_ms: before(row.for_ms),
                tool,
            })
        })
        .collect();
    Some(rows)
}

/// The Agents row's word for `doing`, when neither the broker's exit nor
/// an open decision says more.
pub fn word(doing: &Doing) -> String {
    match doing.now {
        Now::Working => "working".to_owned(),
        Now::WaitingOnFeed => "waiting on the feed".to_owned(),
        Now::Exited(exit) => exit.to_string(),
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
        Now::Working => format!("working for {}", age(doing.since_ms)),
        Now::WaitingOnFeed => format!("waiting on the feed for {}", age(doing.since_ms)),
        Now::Exited(_) => format!("exited {} ago", age(doing.since_ms)),
    };
    format!("      {tool} · {since}")
}
