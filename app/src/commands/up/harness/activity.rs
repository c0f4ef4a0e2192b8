//! What each harness agent is doing, read from its event stream: working,
//! waiting on the feed, or exited; the last tool it called, and when.
//!
//! [`read`] is a pure parser of one line of a harness's standard output
//! (Claude Code's `--output-format stream-json --verbose`, pi's `--mode
//! rpc` events) into what that line says ([`LineActivity`]). [`Activities`] is
//! the table `up` keeps per run: the reader of a harness agent's standard
//! output (`output.rs`, which also writes the transcript) calls
//! [`Activities::observe`] for each line, the supervisor
//! [`Activities::exited`] when the run's process ends, and the console
//! `up --console` opens reads it through [`Activities::feed`] (one line
//! per change, an [`ActivityLine`]: the wire shape the console decodes). Every time is an
//! [`Instant`] the caller passes, so the parser and the table hold no
//! clock and the tests pass times.
//!
//! Nothing an agent wrote reaches the console but a tool's name, and only
//! when it matches [`Tool`]'s short pattern: arguments, results, text and
//! anything else on the line are dropped here. What a run used and the
//! error its model last answered are read from the same lines
//! ([`super::usage`]); the error is text from the model's side, kept
//! neutralised and cut to [`usage::MAX_ERROR`] characters.
//!
//! The table also holds each run's life, as the supervisor sets it
//! ([`Activities::set_life`]), which the same line carries to the console
//! (`lives`, `mosaic_client::wire::life`), and it wakes the supervisor
//! when a run's usage changed ([`Activities::usage_changed`]), so a
//! budget is weighed as soon as a line spends it.
//!
//! # What marks waiting and working again
//!
//! - **Claude Code** waits on the feed in its Stop hook, which runs when a
//!   turn ends without a tool call and blocks on `changes`. With
//!   `--include-hook-events` the stream says so: `{"type":"system",
//!   "subtype":"hook_started","hook_event":"Stop"}` marks waiting, and the
//!   hook's `hook_response` marks the wait's end (the agent goes on with
//!   what arrived, or stops and exits). `init`, every `assistant` line (a
//!   `tool_use` block names the tool) and every `user` line (a tool's
//!   result, or the hook's feedback) mark working. A text-only
//!   `assistant` line is not taken as the turn's end: a message with text
//!   before a tool call arrives as two lines, and only the hook knows.
//!   Without `--include-hook-events` no line says "waiting".
//! - **pi** waits at `agent_end`, where the shipped extension waits on
//!   `changes` and sends what arrived as a follow-up, which starts the
//!   agent again: `agent_end` marks waiting; `agent_start`, `turn_start`
//!   and `tool_execution_start` (with `toolName`) mark working. The
//!   streaming events (`message_update`, `tool_execution_update`...) say
//!   nothing new and are skipped.
//!
//! Bad JSON, another kind of line, a missing field: the line says nothing.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mosaic_client::wire::activity::{self as line, ActivityLine, RunActivity, Tool};
use mosaic_client::wire::life::{RunLife, State};
use mosaic_domain::text;
use serde::Deserialize;
use tokio::sync::Notify;

use super::usage::{self, Said, Stream, Tally, Used};

/// The prefix Claude Code puts before the bus's MCP tools.
const BUS_MCP_PREFIX: &str = "mcp__mosaic-bus__";

/// A phase a line can mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The model or a tool is at work.
    Working,
    /// The loop waits on the agent's feed (Claude Code's Stop hook, pi's
    /// extension at `agent_end`).
    WaitingOnFeed,
}

/// What one line says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LineActivity {
    /// The phase it marks, if any.
    pub phase: Option<Phase>,
    /// The tool it calls, if any.
    pub tool: Option<Tool>,
}

impl LineActivity {
    fn phase(phase: Phase) -> LineActivity {
        LineActivity {
            phase: Some(phase),
            tool: None,
        }
    }
}

/// Reads one line of `stream`. Never fails: a line it cannot read says
/// nothing.
pub fn read(stream: Stream, line: &str) -> LineActivity {
    match stream {
        Stream::ClaudeCode => read_claude(line),
        Stream::Pi => read_pi(line),
    }
}

/// A Claude Code line, with only the fields read; the rest (results and
/// text among them) is skipped unread.
#[derive(Deserialize)]
struct ClaudeLine {
    #[serde(rename = "type")]
    kind: String,
    subtype: Option<String>,
    hook_event: Option<String>,
}

/// An `assistant` line's content blocks.
#[derive(Deserialize)]
struct ClaudeAssistant {
    message: ClaudeMessage,
}

#[derive(Deserialize)]
struct ClaudeMessage {
    content: Vec<ClaudeBlock>,
}

#[derive(Deserialize)]
struct ClaudeBlock {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
}

fn read_claude(line: &str) -> LineActivity {
    let Ok(head) = serde_json::from_str::<ClaudeLine>(line) else {
        return LineActivity::default();
    };
    let stop_hook = head.hook_event.as_deref() == Some("Stop");
    match (head.kind.as_str(), head.subtype.as_deref()) {
        ("system", Some("init")) => LineActivity::phase(Phase::Working),
        ("system", Some("hook_started")) if stop_hook => LineActivity::phase(Phase::WaitingOnFeed),
        ("system", Some("hook_response")) if stop_hook => LineActivity::phase(Phase::Working),
        ("assistant", _) => {
            let tool = serde_json::from_str::<ClaudeAssistant>(line)
                .ok()
                .and_then(|a| {
                    a.message
                        .content
                        .into_iter()
                        .rfind(|b| b.kind == "tool_use")
                })
                .map(|b| {
                    let name = b.name.unwrap_or_default();
                    Tool::of(name.strip_prefix(BUS_MCP_PREFIX).unwrap_or(&name))
                });
            LineActivity {
                phase: Some(Phase::Working),
                tool,
            }
        }
        ("user", _) => LineActivity::phase(Phase::Working),
        _ => LineActivity::default(),
    }
}

/// A pi RPC event, with only the fields read.
#[derive(Deserialize)]
struct PiLine {
    #[serde(rename = "type")]
    kind: String,
    #[serde(rename = "toolName")]
    tool_name: Option<String>,
}

fn read_pi(line: &str) -> LineActivity {
    let Ok(event) = serde_json::from_str::<PiLine>(line) else {
        return LineActivity::default();
    };
    match event.kind.as_str() {
        "agent_start" | "turn_start" => LineActivity::phase(Phase::Working),
        "agent_end" => LineActivity::phase(Phase::WaitingOnFeed),
        "tool_execution_start" => LineActivity {
            phase: Some(Phase::Working),
            tool: Some(Tool::of(event.tool_name.as_deref().unwrap_or_default())),
        },
        _ => LineActivity::default(),
    }
}

/// How a run's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Its exit code, where known.
    pub code: Option<i32>,
    /// The signal that killed it, where known.
    pub signal: Option<i32>,
}

impl Ended {
    /// From what `wait` said (`None`: it could not be waited for).
    pub fn of(status: Option<ExitStatus>) -> Ended {
        Ended {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
        }
    }
}

/// What a run is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// Working.
    Working,
    /// Waiting on the feed.
    WaitingOnFeed,
    /// Its process ended.
    Exited(Ended),
}

/// One run's activity.
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    /// What it is doing.
    pub doing: Doing,
    /// Since when.
    pub since: Instant,
    /// The last tool it called, and when.
    pub tool: Option<(Tool, Instant)>,
    /// What it used over its life.
    pub used: Used,
    /// The error its model's last answer ended in, neutralised and cut.
    pub error: Option<String>,
}

impl Activity {
    /// Takes in what a line said; whether anything shown changed. After
    /// the exit nothing does: a late line cannot revive the run.
    fn apply(&mut self, seen: LineActivity, now: Instant) -> bool {
        if matches!(self.doing, Doing::Exited(_)) {
            return false;
        }
        let mut changed = false;
        if let Some(tool) = seen.tool {
            self.tool = Some((tool, now));
            changed = true;
        }
        let doing = match seen.phase {
            Some(Phase::Working) => Doing::Working,
            Some(Phase::WaitingOnFeed) => Doing::WaitingOnFeed,
            None => return changed,
        };
        if doing != self.doing {
            self.doing = doing;
            self.since = now;
            changed = true;
        }
        changed
    }
}

/// One run's life, as the supervisor set it last.
#[derive(Debug, Clone, PartialEq)]
pub struct LifeEntry {
    /// Its role.
    pub role: String,
    /// Where its life is; for `restarting`, its `inMs` is taken from
    /// `restart_at` when the line is written.
    pub state: State,
    /// When its program starts again, while it is `restarting`.
    pub restart_at: Option<Instant>,
    /// How often its program started again inside it.
    pub restarts: u64,
    /// The path of its output's file, as the console is told it.
    pub output: Option<String>,
}

/// The runs' activities and lives, and a count of changes the console
/// waits on.
#[derive(Debug, Default)]
struct Table {
    runs: BTreeMap<String, Activity>,
    /// Every run's life, in launch order.
    lives: Vec<(String, LifeEntry)>,
    version: u64,
}

/// The table of activities, shared between the line readers, the
/// supervisor and the console's feed.
#[derive(Debug, Clone, Default)]
pub struct Activities {
    inner: Arc<(Mutex<Table>, Condvar)>,
    /// Woken when a run's usage changed.
    usage: Arc<Notify>,
}

impl Activities {
    /// A table that knows no run.
    pub fn new() -> Activities {
        Activities::default()
    }

    /// A poisoned lock only means a reader panicked mid-update of a
    /// plain table: its data is still whole.
    fn table(&self) -> MutexGuard<'_, Table> {
        self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in one line of `run`'s stream, read at `now`. A run is
    /// known from its first line that says something.
    pub fn observe(&self, run: &str, stream: Stream, line: &str, now: Instant) {
        let seen = read(stream, line);
        let counted = usage::read(stream, line);
        if seen == LineActivity::default() && counted == usage::Read::default() {
            return;
        }
        let mut table = self.table();
        let mut changed = false;
        let activity = table.runs.entry(run.to_owned()).or_insert_with(|| {
            changed = true;
            Activity {
                doing: Doing::Working,
                since: now,
                tool: None,
                used: Used::default(),
                error: None,
            }
        });
        changed |= activity.apply(seen, now);
        let mut spent = false;
        if let Some(counted) = counted.counted {
            spent = activity.used.add(counted);
        }
        let error = match counted.said {
            Some(Said::Error(error)) => Some(Some(shown_error(&error))),
            Some(Said::Fine) => Some(None),
            None => None,
        };
        if let Some(error) = error {
            spent |= activity.error != error;
            activity.error = error;
        }
        if changed || spent {
            self.changed(table);
        }
        if spent {
            self.usage.notify_one();
        }
    }

    /// The signal woken when a run's usage or error changed: the
    /// supervisor weighs the budgets then.
    pub fn usage_changed(&self) -> Arc<Notify> {
        Arc::clone(&self.usage)
    }

    /// What `run` used so far, and the error its model last answered, if
    /// any line of it said.
    pub fn used(&self, run: &str) -> Option<(Tally, Option<String>)> {
        self.table()
            .runs
            .get(run)
            .map(|a| (a.used.total(), a.error.clone()))
    }

    /// `run`'s program started again at `now`: it works again, and what
    /// its last process used is kept.
    pub fn restarted(&self, run: &str, now: Instant) {
        let mut table = self.table();
        let Some(activity) = table.runs.get_mut(run) else {
            return;
        };
        activity.doing = Doing::Working;
        activity.since = now;
        activity.used.restarted();
        self.changed(table);
    }

    /// Sets `run`'s life (see [`LifeEntry`]); a run not yet known is
    /// added after the others.
    pub fn set_life(&self, run: &str, life: LifeEntry) {
        let mut table = self.table();
        match table.lives.iter_mut().find(|(r, _)| r == run) {
            Some((_, entry)) if *entry == life => return,
            Some((_, entry)) => *entry = life,
            None => table.lives.push((run.to_owned(), life)),
        }
        self.changed(table);
    }

    /// `run`'s process ended at `now`, as `wait` said (`None`: it could
    /// not be waited for). A run no line was seen of stays unknown: it is
    /// no harness agent, or it said nothing, and the broker's `agents`
    /// tells its exit either way.
    pub fn exited(&self, run: &str, status: Option<ExitStatus>, now: Instant) {
        let mut table = self.table();
        let Some(activity) = table.runs.get_mut(run) else {
            return;
        };
        if matches!(activity.doing, Doing::Exited(_)) {
            return;
        }
        activity.doing = Doing::Exited(Ended::of(status));
        activity.since = now;
        self.changed(table);
    }

    fn changed(&self, mut table: MutexGuard<'_, Table>) {
        table.version += 1;
        drop(table);
        self.inner.1.notify_all();
    }

    /// Every known run's activity, by run.
    pub fn snapshot(&self) -> Vec<(String, Activity)> {
        self.table()
            .runs
            .iter()
            .map(|(run, activity)| (run.clone(), activity.clone()))
            .collect()
    }

    /// The table as the console reads it, at `now`, and its version: one
    /// [`ActivityLine`] and its newline, ages in ms before `now` (an
    /// `Instant` means nothing in another process).
    fn line_at(&self, now: Instant) -> (u64, String) {
        let table = self.table();
        let ms = |at: Instant| {
            u64::try_from(now.saturating_duration_since(at).as_millis()).unwrap_or(u64::MAX)
        };
        let runs = table
            .runs
            .iter()
            .map(|(run, a)| RunActivity {
                run: run.clone(),
                doing: match a.doing {
                    Doing::Working => line::Doing::Working,
                    Doing::WaitingOnFeed => line::Doing::Waiting,
                    Doing::Exited(ended) => line::Doing::Exited {
                        code: ended.code,
                        signal: ended.signal,
                    },
                },
                for_ms: ms(a.since),
                tool: a.tool.as_ref().map(|(tool, _)| tool.clone()),
                tool_ms: a.tool.as_ref().map(|&(_, at)| ms(at)),
            })
            .collect();
        let lives = table
            .lives
            .iter()
            .map(|(run, life)| {
                let state = match (&life.state, life.restart_at) {
                    (State::Restarting { .. }, Some(at)) => State::Restarting {
                        in_ms: u64::try_from(at.saturating_duration_since(now).as_millis())
                            .unwrap_or(u64::MAX),
                    },
                    (state, _) => state.clone(),
                };
                let activity = table.runs.get(run);
                let usage = activity.map(|a| a.used.total()).map(|t| line_usage(&t));
                RunLife {
                    run: run.clone(),
                    role: life.role.clone(),
                    state,
                    restarts: life.restarts,
                    usage,
                    error: activity.and_then(|a| a.error.clone()),
                    output: life.output.clone(),
                }
            })
            .collect();
        // Strings and numbers under string keys always encode.
        let text = serde_json::to_string(&ActivityLine { runs, lives }).unwrap_or_default();
        (table.version, format!("{text}\n"))
    }

    /// Waits until the version is past `seen`, at most `within`.
    fn wait_past(&self, seen: u64, within: Duration) {
        let table = self.table();
        let _ = self
            .inner
            .1
            .wait_timeout_while(table, within, |t| t.version == seen)
            .unwrap_or_else(PoisonError::into_inner);
    }

    /// Writes the table to `out` (the console's end) now and after each
    /// change, one line each, until a write fails (the console is gone).
    /// The ages are read from the system's clock at each write.
    ///
    /// # Errors
    /// The write's error.
    pub fn feed(&self, mut out: impl Write) -> io::Result<()> {
        // A bound on each wait, so a feed whose console is gone but that
        // sees no change still learns it: its next write fails.
        const RECHECK: Duration = Duration::from_secs(30);
        loop {
            let (version, line) = self.line_at(Instant::now());
            out.write_all(line.as_bytes())?;
            out.flush()?;
            // Until a change, or at most the bound: then the same table
            // again, which also tells whether the console still reads.
            self.wait_past(version, RECHECK);
        }
    }
}

/// A run's usage as the line carries it.
fn line_usage(tally: &Tally) -> mosaic_client::wire::life::Usage {
    mosaic_client::wire::life::Usage {
        turns: tally.turns,
        input_tokens: tally.input_tokens,
        output_tokens: tally.output_tokens,
        cost_usd: tally.cost_usd,
    }
}

/// An error line as it is kept: every character that does not draw as
/// itself a token, cut to [`usage::MAX_ERROR`] columns.
fn shown_error(error: &str) -> String {
    let shown = text::neutralise(error);
    match text::cut(&shown, usage::MAX_ERROR) {
        (whole, false) => whole.to_owned(),
        (cut, true) => format!("{cut}…"),
    }
}

#[cfg(test)]
#[path = "activity_tests.rs"]
mod tests;
