//! One row of `history`: a decision of the business that stopped waiting
//! (resolved, withdrawn or superseded), with who closed it and when.

use mosaic_domain::evidence::OptionKey;
use mosaic_domain::{Action, DecisionId, RoleInstance, RunId, Target, Timestamp};
use serde::{Deserialize, Serialize};

use super::listed::Listable;
use super::text::{self, Party};

/// How a decision closed: its `status` in `history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Closing {
    /// `decision.resolved`.
    Resolved,
    /// `decision.withdrawn`.
    Withdrawn,
    /// `decision.superseded`.
    Superseded,
}

/// A closed decision: `{action, at, blocking, by, byRun, choice, id, note,
/// raiser, raiserRun, route, seq, status, supersededBy, target}`, every
/// key always written (`null` where it has no value).
///
/// `seq` is the closing record's position in the write order: the next
/// page is asked for with `{"before": seq}` of the last row. The keys are
/// declared in sorted order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedRow {
    /// Its action.
    #[serde(with = "text")]
    pub action: Action,
    /// When it closed.
    #[serde(with = "text")]
    pub at: Timestamp,
    /// Whether it blocked a task.
    pub blocking: bool,
    /// Who closed it: the human or a role; `None` for a supersede (the
    /// newer decision, `supersededBy`, closed it).
    #[serde(deserialize_with = "Option::deserialize")]
    pub by: Option<Party>,
    /// The run that closed it, when a role's run did.
    #[serde(rename = "byRun", with = "text::opt")]
    pub by_run: Option<RunId>,
    /// The option it was resolved with.
    #[serde(with = "text::opt")]
    pub choice: Option<OptionKey>,
    /// Its id.
    #[serde(with = "text")]
    pub id: DecisionId,
    /// The note given with the resolve or the withdraw, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub note: Option<String>,
    /// The role that raised it.
    #[serde(with = "text")]
    pub raiser: RoleInstance,
    /// The run that raised it.
    #[serde(rename = "raiserRun", with = "text")]
    pub raiser_run: RunId,
    /// Who had it: the human or the arbiter role.
    pub route: Party,
    /// The closing record's position in the write order.
    pub seq: u64,
    /// How it closed.
    pub status: Closing,
    /// The decision that superseded it.
    #[serde(rename = "supersededBy", with = "text::opt")]
    pub superseded_by: Option<DecisionId>,
    /// Its target.
    #[serde(with = "text::opt")]
    pub target: Option<Target>,
}

impl Listable for ClosedRow {
    const MORE: &'static str = "closed";
}
