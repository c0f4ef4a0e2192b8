//! The process's logs: `tracing` events written to stderr by
//! `tracing-subscriber`, as text lines or JSON lines.
//!
//! The filter is `MOSAIC_LOG` (EnvFilter directives; when unset or
//! empty, `info`, with the MCP SDK's own events at `warn`); `-v` makes its
//! default level `debug`, `-vv` `trace`. Only the
//! subcommands that run for a while or that an operator reads afterwards
//! install it (`broker`, `up`, `mcp`, `demo`); `call`, `human` and
//! `unlock` print their answer line and nothing else. Stdout is never
//! written: it is the host's channel for `broker` and the MCP channel for
//! `mcp`.
//!
//! What a line may hold is decided where an event is emitted: codes, paths,
//! ids, counts and error sources, never a capability, a token or a message
//! body (`app/tests/logs.rs` checks a whole run's stderr for them).
//!
//! A line that cannot be written is dropped and counted, never a panic:
//! the events of the writer thread and of the socket runtime are logged on
//! those threads, and stderr may be a full disk (`up --console` points it
//! at a file in the data root), a closed pipe or a broken terminal, while
//! `tracing-subscriber`'s own fallback, `eprintln!`, panics when stderr
//! fails. The writer here, [`Sink`], swallows every error and counts it;
//! the first line it writes after a run of failures is preceded by one
//! summary line saying how many were dropped ([`DROPPED_MESSAGE`]), in the
//! log's own format.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::level_filters::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use super::args::{LogArgs, LogFormat, LOG_ENV};

/// The filter when `MOSAIC_LOG` is unset or empty.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// The summary line's message, once lines were dropped.
const DROPPED_MESSAGE: &str = "log lines could not be written and were dropped";

/// The summary line's target, as an event of this module would have.
const TARGET: &str = "mosaic_app::commands::logs";

/// Installs the stderr subscriber for this process.
pub(crate) fn init(args: &LogArgs) {
    // The MCP SDK logs each session at info; ours are the lines that count.
    let spec = std::env::var(LOG_ENV)
        .ok()
        .filter(|spec| !spec.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_FILTER.to_owned());
    let mut filter = EnvFilter::builder().parse_lossy(spec);
    let louder = match args.verbose {
        0 => None,
        1 => Some(LevelFilter::DEBUG),
        _ => Some(LevelFilter::TRACE),
    };
    if let Some(level) = louder {
        filter = filter.add_directive(level.into());
    }
    let sink = Sink::new(io::stderr, args.log_format);
    let logs = tracing_subscriber::fmt()
        .with_writer(sink)
        .log_internal_errors(false)
        .with_env_filter(filter);
    // A second subscriber cannot be installed; the first one stays.
    let _ = match args.log_format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
}

/// Lines dropped: in all, and since the last summary line.
#[derive(Debug, Default)]
struct Counts {
    dropped: AtomicU64,
    unreported: AtomicU64,
}

/// The log's writer: every line goes to `open()`'s writer whole or not at
/// all, and a failure is counted, never returned, so nothing above it ever
/// reaches a fallback that could panic. Lines are written one at a time,
/// so a summary line stays right before the line that follows it.
pub(crate) struct Sink<F> {
    open: F,
    format: LogFormat,
    counts: Arc<Counts>,
    one_at_a_time: Mutex<()>,
}

impl<F, W> Sink<F>
where
    F: Fn() -> W,
    W: Write,
{
    /// A sink writing through `open` in `format`.
    pub(crate) fn new(open: F, format: LogFormat) -> Self {
        Self {
            open,
            format,
            counts: Arc::default(),
            one_at_a_time: Mutex::new(()),
        }
    }

    /// How many lines were dropped so far.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.counts.dropped.load(Ordering::Relaxed)
    }

    /// Writes one formatted line (with its `\n`), after the summary of
    /// the lines dropped before it, if any.
    fn put(&self, line: &[u8]) {
        let _turn = self
            .one_at_a_time
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut out = (self.open)();
        let unreported = self.counts.unreported.load(Ordering::Relaxed);
        if unreported > 0 {
            let summary = summary_line(self.format, unreported);
            if out.write_all(summary.as_bytes()).is_err() {
                self.drop_line();
                return;
            }
            self.counts
                .unreported
                .fetch_sub(unreported, Ordering::Relaxed);
        }
        if out.write_all(line).and_then(|()| out.flush()).is_err() {
            self.drop_line();
        }
    }

    fn drop_line(&self) {
        self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        self.counts.unreported.fetch_add(1, Ordering::Relaxed);
    }
}

/// The line saying that `count` lines were dropped, in `format`, as an
/// event at `WARN` of this module would look.
fn summary_line(format: LogFormat, count: u64) -> String {
    let mut now = String::new();
    // Formatting a time into a `String` does not fail.
    let _ = SystemTime.format_time(&mut Writer::new(&mut now));
    match format {
        LogFormat::Text => {
            format!("{now}  WARN {TARGET}: {DROPPED_MESSAGE} dropped={count}\n")
        }
        LogFormat::Json => {
            let line = serde_json::json!({
                "timestamp": now,
                "level": "WARN",
                "message": DROPPED_MESSAGE,
                "dropped": count,
                "target": TARGET,
            });
            format!("{line}\n")
        }
    }
}

impl<'a, F, W> MakeWriter<'a> for Sink<F>
where
    F: Fn() -> W + 'a,
    W: Write,
{
    type Writer = Line<'a, F>;

    fn make_writer(&'a self) -> Self::Writer {
        Line(self)
    }
}

/// One event's writer: what `tracing-subscriber` writes into it goes to
/// the [`Sink`], and it never reports a failure.
pub(crate) struct Line<'a, F>(&'a Sink<F>);

impl<F, W> Write for Line<'_, F>
where
    F: Fn() -> W,
    W: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter hands over a whole event in one `write_all`.
        self.0.put(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "logs_tests.rs"]
mod tests;
