//! The control channel between `up` and the supervisor of a run's sandbox
//! (`sandbox-exec --control-fd N`, [`super::supervisor`]): data only,
//! which both ends share, one JSON object per line.
//!
//! `up` makes a connected pair of Unix stream sockets before it spawns
//! bwrap; one end stays in `up`, the other is inherited by bwrap and by
//! `sandbox-exec`, which keeps it as its descriptor `N` and never passes
//! it on to the program. Nothing else in the sandbox holds it, so only
//! `up` gives orders, and only the supervisor reports.
//!
//! `up` → supervisor ([`Order`]):
//!
//! ```json
//! {"op":"start","args":[],"env":[],"stdin":{"kind":"text","text":"ready\n","hold":false}}
//! {"op":"term"}
//! {"op":"kill"}
//! ```
//!
//! `start` runs the program once more (the first `start` also means the
//! capability is ready): its configured arguments then `args` (or, when
//! the order carries `"argv"`, those in place of the configured ones: a
//! harness woken with its conversation resumed and a new prompt), its
//! environment with `env` set over it, and on its standard input `stdin`
//! (`null`: `/dev/null`; `text`: a pipe that gets `text`, then is closed,
//! or held open until the program exits with `hold`). `term` sends
//! SIGTERM to the program's process group, `kill` SIGKILL.
//!
//! Supervisor → `up` ([`Report`]):
//!
//! ```json
//! {"event":"started","pid":2}
//! {"event":"exited","code":3,"signal":null}
//! ```
//!
//! `started` names the program's pid in the sandbox; `exited` says how it
//! ended (a program that could not be started exits `127`). Each `start`
//! is answered by `exited` in the end, and a `start` while the program
//! runs is refused (nothing is started; the supervisor says so on its
//! standard error). When `up`'s end closes, the supervisor kills the
//! program and exits, and the sandbox ends with it.

use serde::{Deserialize, Serialize};

/// The longest line either end reads; a longer one ends the channel.
pub(crate) const MAX_CONTROL_LINE: usize = 256 * 1024;

/// An order from `up` to the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub(crate) enum Order {
    /// Run the program (once more).
    Start {
        /// Arguments after the configured ones.
        #[serde(default)]
        args: Vec<String>,
        /// Arguments in place of the configured ones, when set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argv: Option<Vec<String>>,
        /// Variables set over the configured environment.
        #[serde(default)]
        env: Vec<(String, String)>,
        /// Its standard input.
        stdin: Stdin,
    },
    /// SIGTERM to the program's process group (a struct variant, so an
    /// unknown field is refused).
    Term {},
    /// SIGKILL to the program's process group.
    Kill {},
}

/// The program's standard input for one start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub(crate) enum Stdin {
    /// `/dev/null`.
    Null,
    /// A pipe that gets `text`; closed after it, or held open until the
    /// program exits with `hold`.
    Text {
        /// What it reads.
        text: String,
        /// Whether the pipe stays open.
        hold: bool,
    },
}

/// A report from the supervisor to `up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase", deny_unknown_fields)]
pub(crate) enum Report {
    /// The program started, with this pid in the sandbox.
    Started {
        /// Its pid inside.
        pid: u32,
    },
    /// The program ended: its exit code, or the signal that killed it.
    Exited {
        /// Its exit code, when it exited.
        code: Option<i32>,
        /// The signal that killed it, when one did.
        signal: Option<i32>,
    },
}

/// One value as its line, newline included.
pub(crate) fn line<T: Serialize>(value: &T) -> String {
    // Strings, numbers and lists of them always encode.
    let mut text = serde_json::to_string(value).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_and_reports_are_the_documented_lines() {
        let start = Order::Start {
            args: vec!["--resume".to_owned()],
            argv: None,
            env: vec![("MOSAIC_BUS_SINCE".to_owned(), "7".to_owned())],
            stdin: Stdin::Text {
                text: "ready\n".to_owned(),
                hold: false,
            },
        };
        assert_eq!(
            line(&start),
            "{\"op\":\"start\",\"args\":[\"--resume\"],\"env\":[[\"MOSAIC_BUS_SINCE\",\"7\"]],\
             \"stdin\":{\"kind\":\"text\",\"text\":\"ready\\n\",\"hold\":false}}\n"
        );
        assert_eq!(line(&Order::Term {}), "{\"op\":\"term\"}\n");
        let bare: Order =
            serde_json::from_str(r#"{"op":"start","stdin":{"kind":"null"}}"#).unwrap();
        assert_eq!(
            bare,
            Order::Start {
                args: Vec::new(),
                argv: None,
                env: Vec::new(),
                stdin: Stdin::Null
            }
        );
        let woken: Order = serde_json::from_str(
            r#"{"op":"start","argv":["-p","--continue","--","go"],"stdin":{"kind":"null"}}"#,
        )
        .unwrap();
        assert!(
            matches!(&woken, Order::Start { argv: Some(argv), .. } if argv.len() == 4),
            "{woken:?}"
        );
        let exited = Report::Exited {
            code: None,
            signal: Some(9),
        };
        assert_eq!(
            line(&exited),
            "{\"event\":\"exited\",\"code\":null,\"signal\":9}\n"
        );
        for bad in [
            r#"{"op":"start"}"#,
            r#"{"op":"stop"}"#,
            r#"{"op":"term","grace":1}"#,
            r#"{"event":"started"}"#,
        ] {
            assert!(serde_json::from_str::<Order>(bad).is_err(), "{bad}");
        }
    }
}
