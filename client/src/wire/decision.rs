//! A decision on the wire: what every decision verb and the inbox answer
//! ([`DecisionView`]), and the fields fixed when it was raised
//! ([`Raised`]), which the `decision.raised` record carries alone.
//!
//! `authorization` is the context a resolver must be shown: the option
//! named by `approvalChoice` authorizes exactly `action` on `target`,
//! nothing else.

use std::borrow::Cow;

use mosaic_domain::evidence::OptionKey;
use mosaic_domain::{Action, ActionClass, DecisionId, RoleInstance, RunId, Target, TaskRef};
use serde::{Deserialize, Serialize, Serializer};

use super::listed::ItemType;
use super::text::{self, Party};

/// The fields fixed at raise, shared by [`DecisionView`] and the
/// `decision.raised` record: `id, action, target, question, options,
/// recommendation, blocking, domain, project, task_ref, requirement_ref,
/// supersedes, class, route, holder, raisedBy, authorization`.
///
/// `holder` is the run a `role.revoke` decision would revoke (else
/// `null`). Keys are in sorted order, as every shape of the wire writes
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Raised<'a> {
    /// The action it is about.
    #[serde(with = "text")]
    pub action: Action,
    /// What approving authorizes.
    pub authorization: Authorization,
    /// Whether it blocks a task.
    pub blocking: bool,
    /// The action's class for the raiser's role.
    #[serde(with = "text")]
    pub class: ActionClass,
    /// Which arbiter a cross-role decision goes to.
    pub domain: Domain,
    /// The run a `role.revoke` decision would revoke.
    #[serde(with = "text::opt")]
    pub holder: Option<RunId>,
    /// Its id.
    #[serde(with = "text")]
    pub id: DecisionId,
    /// The options, in the raiser's order.
    pub options: Vec<Choice<'a>>,
    /// The raiser's project, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub project: Option<Cow<'a, str>>,
    /// The question, plain text.
    pub question: Cow<'a, str>,
    /// Who raised it.
    #[serde(rename = "raisedBy")]
    pub raised_by: AgentView,
    /// The raiser's recommendation, plain text.
    pub recommendation: Cow<'a, str>,
    /// The raiser's requirement reference, if any.
    #[serde(deserialize_with = "Option::deserialize")]
    pub requirement_ref: Option<Cow<'a, str>>,
    /// Who has it: the human or the resolving role.
    pub route: Party,
    /// The decision it replaces, if any.
    #[serde(with = "text::opt")]
    pub supersedes: Option<DecisionId>,
    /// What the action is aimed at, if anything.
    #[serde(with = "text::opt")]
    pub target: Option<Target>,
    /// The task it is about, if any.
    #[serde(with = "text::opt")]
    pub task_ref: Option<TaskRef>,
}

/// One option: `{key, text}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice<'a> {
    /// What a resolver picks.
    #[serde(with = "text")]
    pub key: OptionKey,
    /// What it means, plain text.
    pub text: Cow<'a, str>,
}

/// An agent: `{role, run}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AgentView {
    /// Its role.
    #[serde(with = "text")]
    pub role: RoleInstance,
    /// Its run.
    #[serde(with = "text")]
    pub run: RunId,
}

/// `authorization`: `{action, target, approvalChoice}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authorization {
    /// The action approving authorizes.
    #[serde(with = "text")]
    pub action: Action,
    /// The option that approves.
    #[serde(rename = "approvalChoice", with = "text")]
    pub approval_choice: OptionKey,
    /// What the action is aimed at.
    #[serde(with = "text::opt")]
    pub target: Option<Target>,
}

/// `domain`: which arbiter a cross-role decision goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    /// The delivery arbiter.
    Delivery,
    /// The technical arbiter.
    Technical,
}

/// `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionStatus {
    /// Waiting for its resolver.
    Open,
    /// Resolved (`choice` names the option).
    Resolved,
    /// Withdrawn.
    Withdrawn,
    /// Replaced (`superseded_by` names the decision).
    Superseded,
}

/// Where a decision stands, and how an inbox lists it: the keys a
/// [`DecisionView`] adds to [`Raised`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    /// The option it was resolved with.
    #[serde(with = "text::opt")]
    pub choice: Option<OptionKey>,
    /// Only in the human's inbox, for a decision listed short (no
    /// options, each text cut): `true`; its trail holds it whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Only as an inbox item: `"decision"`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemType>,
    /// Its status.
    pub status: DecisionStatus,
    /// The decision that replaced it.
    #[serde(with = "text::opt")]
    pub superseded_by: Option<DecisionId>,
}

/// A decision with its status: [`Raised`]'s keys and [`Standing`]'s,
/// written together in sorted order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DecisionView<'a> {
    /// The fields fixed at raise.
    #[serde(flatten)]
    pub raised: Raised<'a>,
    /// Where it stands.
    #[serde(flatten)]
    pub standing: Standing,
}

impl Serialize for DecisionView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        super::merged(serializer, &self.raised, &self.standing)
    }
}
