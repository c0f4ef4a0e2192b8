//! The line `up --console` writes its console, once at the start and once
//! per change, about what each harness agent is doing:
//!
//! ```json
//! {"runs":[{"run":"dev-0badc0de","doing":"working","forMs":1200,"tool":"Edit","toolMs":300},
//!          {"run":"lead-12345678","doing":"exited","forMs":50,"code":0,"signal":null}]}
//! ```
//!
//! `doing` is `working`, `waiting` (on the agent's feed) or `exited` (with
//! the exit's `code` and `signal`, each `null` where unknown); `forMs` is
//! how long before the line was written it started doing that; `tool` and
//! `toolMs` are its last tool and how long ago it called it, when it
//! called one. Ages travel in milliseconds before the line was written,
//! since an instant means nothing in another process.
//!
//! The same line carries `lives`, each run's life: see [`super::life`].
//!
//! `up` encodes [`ActivityLine`] and the console decodes the same type: a
//! line that does not match it is not one. A tool's name is a [`Tool`],
//! checked against its short pattern at both ends.

use serde::{Deserialize, Serialize};

use super::life::RunLife;

/// The longest tool name kept.
const TOOL_MAX: usize = 64;

/// One line: every run `up` has seen a harness line of, by run; and every
/// run `up` launched, with its life ([`super::life`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityLine {
    /// The runs, in `up`'s order.
    pub runs: Vec<RunActivity>,
    /// Every run's life, in launch order (absent from a line of an `up`
    /// that writes none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lives: Vec<RunLife>,
}

/// One run's activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunActivity {
    /// The run, as `up` and the broker name it.
    pub run: String,
    /// What it is doing.
    #[serde(flatten)]
    pub doing: Doing,
    /// How long it has been doing it, in ms before the line was written.
    pub for_ms: u64,
    /// Its last tool, when it called one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Tool>,
    /// How long ago it called that tool, in ms before the line was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ms: Option<u64>,
}

/// What a run is doing (`doing` on the line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "doing", rename_all = "lowercase")]
pub enum Doing {
    /// The model or a tool is at work.
    Working,
    /// The loop waits on the agent's feed.
    Waiting,
    /// Its process ended.
    Exited {
        /// Its exit code, where known.
        code: Option<i32>,
        /// The signal that killed it, where known.
        signal: Option<i32>,
    },
}

/// A tool's name as the model called it: `[A-Za-z0-9_.-]{1,64}`, or `?`
/// for anything else, so a name can carry neither a control character
/// nor a sentence. Decoding applies the same check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Tool(String);

impl Tool {
    /// `name` if it matches the pattern, else `?`.
    pub fn of(name: &str) -> Tool {
        let ok = (1..=TOOL_MAX).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        Tool(if ok { name.to_owned() } else { "?".to_owned() })
    }

    /// The name, or `?`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for Tool {
    fn from(name: String) -> Tool {
        Tool::of(&name)
    }
}

impl From<Tool> for String {
    fn from(tool: Tool) -> String {
        tool.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_is_written_as_documented_and_read_back_whole() {
        let line = ActivityLine {
            runs: vec![
                RunActivity {
                    run: "dev-0badc0de".to_owned(),
                    doing: Doing::Working,
                    for_ms: 1200,
                    tool: Some(Tool::of("Edit")),
                    tool_ms: Some(300),
                },
                RunActivity {
                    run: "lead-12345678".to_owned(),
                    doing: Doing::Exited {
                        code: Some(0),
                        signal: None,
                    },
                    for_ms: 50,
                    tool: None,
                    tool_ms: None,
                },
                RunActivity {
                    run: "qa-87654321".to_owned(),
                    doing: Doing::Waiting,
                    for_ms: 0,
                    tool: None,
                    tool_ms: None,
                },
            ],
            lives: Vec::new(),
        };
        let value = serde_json::to_value(&line).expect("a line encodes");
        assert_eq!(
            value,
            json!({"runs": [
                {"run": "dev-0badc0de", "doing": "working", "forMs": 1200,
                 "tool": "Edit", "toolMs": 300},
                {"run": "lead-12345678", "doing": "exited", "forMs": 50,
                 "code": 0, "signal": null},
                {"run": "qa-87654321", "doing": "waiting", "forMs": 0},
            ]})
        );
        let text = serde_json::to_string(&line).expect("a line encodes");
        assert_eq!(serde_json::from_str::<ActivityLine>(&text).ok(), Some(line));
    }

    #[test]
    fn a_line_of_another_shape_is_not_one() {
        for bad in [
            r#"{"runs":[{"run":"a","doing":"sleeping","forMs":1}]}"#,
            r#"{"runs":[{"run":"a","doing":"working"}]}"#,
            r#"{"runs":[{"run":"a","forMs":1}]}"#,
            r#"{"runs":[{"doing":"working","forMs":1}]}"#,
            r#"{"runs":[{"run":"a","doing":"working","forMs":-1}]}"#,
            r#"{"run":"a"}"#,
            "not json",
        ] {
            assert!(serde_json::from_str::<ActivityLine>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tool_name_is_checked_at_both_ends() {
        assert_eq!(Tool::of("mcp_x.y-z").as_str(), "mcp_x.y-z");
        for bad in ["", "a b", "x\u{1b}[2J", &"a".repeat(65)] {
            assert_eq!(Tool::of(bad).as_str(), "?", "{bad:?}");
        }
        assert_eq!(Tool::of(&"a".repeat(64)).as_str(), "a".repeat(64));
        let read: RunActivity = serde_json::from_str(
            r#"{"run":"a","doing":"working","forMs":1,"tool":"rm -rf \u001b","toolMs":2}"#,
        )
        .expect("a row");
        assert_eq!(read.tool, Some(Tool::of("?")));
    }
}
