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

use mosaic_client::wire::activity::{self as line, ActivityLine};

use super::model::{Exit, Shown};

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

/// Decodes one line read at `now_ms`; `None` when it is not one.
pub fn decode(line: &str, now_ms: i64) -> Option<Vec<Doing>> {
    let line: ActivityLine = serde_json::from_str(line).ok()?;
    let before = |ms: u64| now_ms.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX));
    let rows = line
        .runs
        .into_iter()
        .map(|row| {
            let now = match row.doing {
                line::Doing::Working => Now::Working,
                line::Doing::Waiting => Now::WaitingOnFeed,
                line::Doing::Exited { code, signal } => Now::Exited(Exit {
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
