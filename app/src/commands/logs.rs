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

use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;

use super::args::{LogArgs, LogFormat, LOG_ENV};

/// The filter when `MOSAIC_LOG` is unset or empty.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

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
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    // A second subscriber cannot be installed; the first one stays.
    let _ = match args.log_format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
}
