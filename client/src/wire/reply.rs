//! What a bus verb answers, besides a decision ([`super::decision`]) and
//! the messages `message.receive` hands over ([`super::message`]).

use mosaic_domain::{DecisionId, EventId, MessageId};
use serde::{Deserialize, Serialize};

use super::text;

/// `role.claim`: `{status}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// Whether the role was taken now or already held by the run.
    pub status: ClaimStatus,
}

/// `role.claim`'s `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimStatus {
    /// The run took the vacant role.
    Claimed,
    /// The run already held it.
    Held,
}

/// The answer of a verb that answers nothing more: `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Done {}

/// `message.send`: exactly `{id, request}` (`request` is `null` for an
/// agent's message, the human input for the human's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// The message's id.
    #[serde(with = "text")]
    pub id: MessageId,
    /// The human input it carries.
    #[serde(with = "text::opt")]
    pub request: Option<EventId>,
}

/// The trusted `authorize`: `{grant: "within-role", decision: null}` or
/// `{grant: "approval", decision: ID}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authorized {
    /// The approving decision, spent by the action.
    #[serde(with = "text::opt")]
    pub decision: Option<DecisionId>,
    /// How it was authorized.
    pub grant: GrantKind,
}

/// `authorize`'s `grant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GrantKind {
    /// Within the role's own authority.
    WithinRole,
    /// By an approved decision.
    Approval,
}
