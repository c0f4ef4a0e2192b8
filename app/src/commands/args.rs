//! What the subcommands share on their command lines: the log options,
//! the help's shared lines, path arguments and the verb lists that the
//! help of `call`, `human` and `mcp` prints from the verb table.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::{Args, ValueEnum};
use mosaic_domain::{CallerKind, Refusal, Verb};

/// The variable that filters the logs.
pub(super) const LOG_ENV: &str = "MOSAIC_LOG";
/// The variable that picks the log format.
pub(super) const LOG_FORMAT_ENV: &str = "MOSAIC_LOG_FORMAT";

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line of text per event: time, level, target, message, fields.
    Text,
    /// One JSON object per line, its fields at the top level.
    Json,
}

/// The log options of the subcommands that log.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// The format of the log lines on stderr: text (one line per event:
    /// time, level, target, message, fields) or json (one object per line).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value_t = LogFormat::Text,
        env = LOG_FORMAT_ENV,
        hide_possible_values = true
    )]
    pub log_format: LogFormat,
    /// More detail: -v logs at debug (one line per request), -vv at trace.
    /// Overrides the default level of MOSAIC_LOG.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

pub(crate) const LOG_ENV_HELP: &str =
    "  MOSAIC_LOG         the log filter (tracing's EnvFilter syntax: `info`,
                     `debug`, `mosaic_app=debug,warn`); default `info`
  MOSAIC_LOG_FORMAT  `text` or `json`, as --log-format";

/// The contract of `mcp` and `demo` when they cannot run: the static code
/// alone on a line of stderr (after any log line), exit 2.
pub(crate) fn code_on_stderr(refusal: Refusal) -> std::process::ExitCode {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{}", refusal.code());
    std::process::ExitCode::from(2)
}

/// `text` with the log variables' lines in place of `{log_env}`.
pub(crate) fn with_log_env(text: &str) -> String {
    text.replace("{log_env}", LOG_ENV_HELP)
}

/// A path argument that is not empty (an empty one was always a usage
/// error). Not text: any path the OS allows.
pub(crate) fn non_empty_path() -> impl TypedValueParser<Value = PathBuf> {
    OsStringValueParser::new().try_map(|value: OsString| {
        if value.is_empty() {
            Err("an empty path")
        } else {
            Ok(PathBuf::from(value))
        }
    })
}

/// The verbs `caller` may use, comma-separated and wrapped at 78 columns,
/// each line indented by two spaces.
pub(super) fn verb_list(caller: CallerKind) -> String {
    let mut lines = vec![String::from(" ")];
    for name in Verb::ALL
        .iter()
        .filter(|v| v.serves(caller))
        .map(|v| v.as_str())
    {
        let line = lines.last_mut().expect("one line at least");
        if line.len() > 2 && line.len() + name.len() + 2 > 78 {
            line.push(',');
            lines.push(format!("  {name}"));
        } else {
            if line.len() > 2 {
                line.push(',');
            }
            line.push(' ');
            line.push_str(name);
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verb_lists_are_the_verb_table() {
        for caller in [CallerKind::Agent, CallerKind::Reader, CallerKind::Human] {
            let listed: Vec<String> = verb_list(caller)
                .split(',')
                .map(|v| v.trim().to_owned())
                .collect();
            let table: Vec<&str> = Verb::ALL
                .iter()
                .filter(|v| v.serves(caller))
                .map(|v| v.as_str())
                .collect();
            assert_eq!(listed, table);
            assert!(verb_list(caller).lines().all(|l| l.len() <= 78));
        }
    }
}
