//! One row of `agents`: a bound run, whether it holds its role, what it
//! waits on, how its process ended and how the run did.

use mosaic_domain::evidence::{EndCause, Harness};
use mosaic_domain::{Action, DecisionId, RoleInstance, RunId, Target, Timestamp};
use serde::{Deserialize, Serialize};

use super::listed::Listable;
use super::text::{self, Party};

/// One bound run: `role, run, harness, address, pid, start_time, holding,
/// revoked, launching, waitsOn, exited, ended, restarts, usage, lastVerb,
/// lastAt, waiting`, and `waitsOnMore` when `waitsOn` left decisions out.
///
/// `launching` is the business's launch switch, the same on every row.
/// The keys are declared in sorted order (a key the row gains goes in its
/// sorted place).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRow {
    /// The address the launch record gives, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub address: Option<String>,
    /// `None` while the run lives.
    #[serde(deserialize_with = "Option::deserialize")]
    pub ended: Option<Ended>,
    /// `None` while its process runs.
    #[serde(deserialize_with = "Option::deserialize")]
    pub exited: Option<Exited>,
    /// Its harness.
    #[serde(with = "text")]
    pub harness: Harness,
    /// Whether it holds its role.
    pub holding: bool,
    /// When the broker read its last request; `None` before its first.
    #[serde(rename = "lastAt", with = "text::opt")]
    pub last_at: Option<Timestamp>,
    /// The verb of its last request, as the broker saw it; `None` before
    /// its first.
    #[serde(rename = "lastVerb", deserialize_with = "Option::deserialize")]
    pub last_verb: Option<String>,
    /// The business's launch switch.
    pub launching: bool,
    /// Its process.
    pub pid: u32,
    /// How often its program started again inside the run.
    pub restarts: u64,
    /// Whether its role was revoked.
    pub revoked: bool,
    /// Its role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// Its run.
    #[serde(with = "text")]
    pub run: RunId,
    /// Its process's start time (clock ticks since boot).
    pub start_time: u64,
    /// What it used, once its host said (a harness run).
    #[serde(deserialize_with = "Option::deserialize")]
    pub usage: Option<Usage>,
    /// Whether a `changes` wait of it is open now.
    pub waiting: bool,
    /// The open decisions it raised, at most twenty.
    #[serde(rename = "waitsOn")]
    pub waits_on: Vec<WaitsOn>,
    /// The open decisions it raised beyond `waitsOn`.
    #[serde(rename = "waitsOnMore", default, skip_serializing_if = "is_zero")]
    pub waits_on_more: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Listable for AgentRow {
    const MORE: &'static str = "agents";
}

/// An open decision a run raised: `{id, action, target, route, blocking}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitsOn {
    /// Its action.
    #[serde(with = "text")]
    pub action: Action,
    /// Whether it blocks a task.
    pub blocking: bool,
    /// Its id.
    #[serde(with = "text")]
    pub id: DecisionId,
    /// Who has it: the human or the arbiter role.
    pub route: Party,
    /// Its target.
    #[serde(with = "text::opt")]
    pub target: Option<Target>,
}

/// How a run's process ended, as far as the broker knows (the host that
/// reaped it said so, or the process is gone from the process table):
/// `{status, signal}`, each `null` where unknown or not the way it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exited {
    /// The signal that killed it.
    #[serde(deserialize_with = "Option::deserialize")]
    pub signal: Option<i32>,
    /// Its exit status.
    #[serde(deserialize_with = "Option::deserialize")]
    pub status: Option<i32>,
}

impl Exited {
    /// A process known only to be gone: neither status nor signal.
    pub const GONE: Exited = Exited {
        signal: None,
        status: None,
    };
}

/// How the run ended: `{at, cause, status?, signal?}`, `status` and
/// `signal` only where known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    /// When.
    #[serde(with = "text")]
    pub at: Timestamp,
    /// Why.
    #[serde(with = "text")]
    pub cause: EndCause,
    /// The signal that killed its process, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Its process's exit status, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
}

/// What a harness run used, as its own event stream reports it (the host
/// notes it: `Broker::note_usage`): `{turns, inputTokens, outputTokens,
/// costUsd}`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Cost in US dollars.
    #[serde(rename = "costUsd")]
    pub cost_usd: f64,
    /// Input tokens.
    #[serde(rename = "inputTokens")]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(rename = "outputTokens")]
    pub output_tokens: u64,
    /// Turns (model requests answered).
    pub turns: u64,
}
