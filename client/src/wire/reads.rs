//! The other reads' answers: `head`, a `tasks` row, and a page of
//! `changes`.

use mosaic_domain::{DecisionId, MessageId, RoleInstance, TaskRef, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::listed::Listable;
use super::text::{self, KindName};

/// `head`: `{size, head, note}`, the note being
/// `mosaic-bus/<store id>\n<size>\n<base64 head>\n`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The newest record's hash, base64.
    pub head: String,
    /// The note to keep outside the store.
    pub note: String,
    /// Records in the chain.
    pub size: u64,
}

/// One row of `tasks`: the newest observation of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    /// When it was recorded.
    #[serde(with = "text")]
    pub at: Timestamp,
    /// Its body: JSON of the observation's own shape (text that is not
    /// JSON, which the store never holds, as a string).
    pub body: Value,
    /// The observation's kind, for example `task.updated`.
    pub kind: String,
    /// The task.
    #[serde(with = "text")]
    pub task_ref: TaskRef,
    /// Whether it is a `task.deleted` tombstone.
    pub tombstone: bool,
}

impl Listable for TaskRow {
    const MORE: &'static str = "tasks";
}

/// A page of `changes`: `{cursor, changes}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangePage {
    /// The changes, oldest first.
    pub changes: Vec<Change>,
    /// Where the next wait starts.
    pub cursor: u64,
}

/// One change: a pointer `{seq, kind, ...ids}` carrying only the ids it
/// has, never a body, a question or a note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The decision it is about.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "text::opt")]
    pub decision: Option<DecisionId>,
    /// Its record's kind.
    pub kind: KindName,
    /// The message it is about.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "text::opt")]
    pub message: Option<MessageId>,
    /// The role it is about.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "text::opt")]
    pub role: Option<RoleInstance>,
    /// Its position in the global write order.
    pub seq: u64,
    /// The task it is about.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "text::opt")]
    pub task: Option<TaskRef>,
}
