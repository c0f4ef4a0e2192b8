//! The change feed: which committed records concern which caller.
//!
//! A [`Change`] is what one record changed, as a pointer (its kind and the
//! ids needed to act on it, never a body, a question or a note) plus who
//! it concerns. [`Change::of`] derives it from the record alone, with the
//! routing of the decision a decision event is about; [`Watcher::concerns`]
//! decides whether a caller hears of it. The runtime assigns each change
//! its position in the store's durable write order (the ledger), so a
//! cursor means the same after a restart.

use std::time::Duration;

use crate::caller::Caller;
use crate::evidence::{
    AgentRef, ClaimEvidence, DecisionEvidence, DecisionRecord, Evidence, LaunchEvidence,
    MessageEvidence, Recipient, Route, Subject,
};
use crate::{BusinessId, DecisionId, MessageId, Refusal, RoleInstance, RunId, TaskRef, Verb};

/// The most changes one answer carries; the answer's cursor is then the
/// position of the last one, and the caller asks again from there.
pub const CHANGES_LIMIT: usize = 100;

/// How long `changes` waits when `timeoutMs` is absent.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The shortest wait `timeoutMs` may ask for.
pub const MIN_WAIT: Duration = Duration::from_secs(1);
/// The longest wait `timeoutMs` may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(120);

/// The wait a `timeoutMs` asks for: [`DEFAULT_WAIT`] when absent, clamped
/// to [`MIN_WAIT`]..=[`MAX_WAIT`].
pub fn wait(timeout_ms: Option<u64>) -> Duration {
    timeout_ms
        .map_or(DEFAULT_WAIT, Duration::from_millis)
        .clamp(MIN_WAIT, MAX_WAIT)
}

/// Who waits for changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watcher {
    /// An agent: the run `run` holding `role` in `business`.
    Agent {
        /// The capability's business.
        business: BusinessId,
        /// The role it holds.
        role: RoleInstance,
        /// Its run.
        run: RunId,
    },
    /// A reader of `business`: the human-facing projections.
    Reader {
        /// The capability's business.
        business: BusinessId,
    },
}

/// A decision's routing, fixed at raise: what a decision event needs to
/// know about the decision it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    /// Who resolves it.
    pub route: Route,
    /// The run that raised it, and the role it held.
    pub raiser: AgentRef,
}

impl Routing {
    /// The routing of a raised decision.
    pub fn of(record: &DecisionRecord) -> Self {
        Self {
            route: record.route.clone(),
            raiser: record.raiser.clone(),
        }
    }
}

/// What kind of decision event a change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecisionEvent {
    Raised,
    Resolved,
    Seen,
    Withdrawn,
    Superseded,
}

/// Who a change concerns, as the record and its decision's routing say.
#[derive(Debug, Clone, PartialEq, Eq)]
enum About {
    /// A message to this recipient.
    Message(Recipient),
    /// An event of a decision with this routing.
    Decision(DecisionEvent, Routing),
    /// A claim event of this role; `vacated` for a release, a revocation
    /// or the end of the run that held it.
    Claim { role: RoleInstance, vacated: bool },
    /// A launch was bound.
    Launched,
    /// The business's launch switch moved.
    Switch,
    /// A task observation.
    Task,
}

/// One record's change: the pointer a caller gets and who it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The record's kind, for example `message.sent`.
    pub kind: &'static str,
    /// The business it belongs to.
    pub business: BusinessId,
    /// The message it is about, if any.
    pub message: Option<MessageId>,
    /// The decision it is about, if any.
    pub decision: Option<DecisionId>,
    /// The role it is about, if any.
    pub role: Option<RoleInstance>,
    /// The task it is about, if any.
    pub task: Option<TaskRef>,
    about: About,
}

impl Change {
    /// The decision whose [`Routing`] [`Change::of`] needs for `record`:
    /// the one a resolution, acknowledgement, withdrawal or supersession
    /// is about (a raise carries its own).
    pub fn routing_needed(record: &Evidence) -> Option<&DecisionId> {
        match record {
            Evidence::Decision(
                DecisionEvidence::Resolved { id, .. }
                | DecisionEvidence::Seen { id, .. }
                | DecisionEvidence::Withdrawn { id, .. }
                | DecisionEvidence::Superseded { id, .. },
            ) => Some(id),
            Evidence::Decision(DecisionEvidence::Raised(_))
            | Evidence::Launch(_)
            | Evidence::Claim(_)
            | Evidence::Consumed(_)
            | Evidence::Allowed(_)
            | Evidence::Message(_)
            | Evidence::Human(_)
            | Evidence::Observed(_)
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => None,
        }
    }

    /// The change `record` makes, or `None` when it concerns no watcher
    /// (deliveries, reads, spent approvals, allowed actions, human inputs,
    /// refusals, observations not filed under a task). `routing` is the
    /// routing of [`Change::routing_needed`]'s decision; without it a
    /// decision event concerns nobody.
    pub fn of(record: &Evidence, routing: Option<Routing>) -> Option<Change> {
        let business = record.business()?.clone();
        let mut change = Change {
            kind: record.kind().as_str(),
            business,
            message: None,
            decision: None,
            role: None,
            task: None,
            about: About::Switch,
        };
        let decision_event = |event, id: &DecisionId| Some((About::Decision(event, routing?), *id));
        change.about = match record {
            Evidence::Message(MessageEvidence::Sent(m)) => {
                change.message = Some(m.id);
                About::Message(m.to.clone())
            }
            Evidence::Decision(event) => {
                let (about, id) = match event {
                    DecisionEvidence::Raised(d) => {
                        (About::Decision(DecisionEvent::Raised, Routing::of(d)), d.id)
                    }
                    DecisionEvidence::Resolved { id, .. } => {
                        decision_event(DecisionEvent::Resolved, id)?
                    }
                    DecisionEvidence::Seen { id, .. } => decision_event(DecisionEvent::Seen, id)?,
                    DecisionEvidence::Withdrawn { id, .. } => {
                        decision_event(DecisionEvent::Withdrawn, id)?
                    }
                    DecisionEvidence::Superseded { id, .. } => {
                        decision_event(DecisionEvent::Superseded, id)?
                    }
                };
                change.decision = Some(id);
                about
            }
            Evidence::Claim(claim) => {
                let (agent, vacated) = match claim {
                    ClaimEvidence::Claimed { agent, .. } => (agent, false),
                    ClaimEvidence::Released { agent, .. }
                    | ClaimEvidence::Revoked { agent, .. } => (agent, true),
                    // An end frees the role only if the run held it; the
                    // readers hear of every end (`agents` shows it).
                    ClaimEvidence::Ended(end) => (&end.agent, end.vacated),
                };
                change.role = Some(agent.role.clone());
                About::Claim {
                    role: agent.role.clone(),
                    vacated,
                }
            }
            Evidence::Launch(LaunchEvidence::Launched(r)) => {
                change.role = Some(r.role.clone());
                About::Launched
            }
            Evidence::Launch(LaunchEvidence::Revoked { .. } | LaunchEvidence::Restored { .. }) => {
                About::Switch
            }
            Evidence::Observed(o) => match &o.subject {
                Some(Subject::Task(task)) if o.kind.starts_with("task.") => {
                    change.task = Some(*task);
                    About::Task
                }
                Some(Subject::Task(_) | Subject::Decision(_) | Subject::Message(_))
                | Some(Subject::Role(_))
                | None => return None,
            },
            // The human's `message.read` changes the human's inbox.
            Evidence::Human(h) => {
                change.message = Some(h.read_message()?);
                About::Message(Recipient::Human)
            }
            Evidence::Consumed(_)
            | Evidence::Allowed(_)
            | Evidence::Message(MessageEvidence::Delivered { .. } | MessageEvidence::Read { .. })
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => return None,
        };
        Some(change)
    }
}

/// What a waiter listens to, so that a change wakes only the waiters it
/// may concern: every watcher [`Watcher::concerns`] a change of shares a
/// topic with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Topic {
    /// The holder of a role.
    Role(BusinessId, RoleInstance),
    /// Every agent of a business.
    Agents(BusinessId),
    /// The readers of a business.
    Readers(BusinessId),
}

impl Change {
    /// The topics of the watchers this change may concern.
    pub fn topics(&self) -> Vec<Topic> {
        let business = || self.business.clone();
        let role = |r: &RoleInstance| Topic::Role(business(), r.clone());
        match &self.about {
            About::Message(Recipient::Role(r)) => vec![role(r)],
            About::Message(Recipient::Human) => vec![Topic::Readers(business())],
            // Every open decision shows in `agents` against its raiser,
            // so the readers hear of each one, whoever resolves it.
            About::Decision(_, routing) => match &routing.route {
                Route::Role(r) => vec![
                    role(r),
                    role(&routing.raiser.role),
                    Topic::Readers(business()),
                ],
                Route::Human => vec![Topic::Readers(business()), role(&routing.raiser.role)],
            },
            About::Claim { role: r, .. } => vec![role(r), Topic::Readers(business())],
            About::Launched | About::Task => vec![Topic::Readers(business())],
            About::Switch => vec![Topic::Agents(business()), Topic::Readers(business())],
        }
    }
}

impl Watcher {
    /// The watcher `caller` is on the change feed. The verb table decides
    /// who may wait for changes; an agent must also hold its role now,
    /// which `holds` answers from the runtime's view of the claims.
    ///
    /// # Errors
    /// `not-authorized` for a caller kind `changes` does not serve;
    /// `not-holder` for an agent whose run does not hold its role.
    pub fn of(
        caller: &Caller,
        holds: impl FnOnce(&BusinessId, &AgentRef) -> bool,
    ) -> Result<Watcher, Refusal> {
        Verb::Changes.admit(caller.kind())?;
        match caller {
            Caller::Agent { business, agent } => {
                if !holds(business, agent) {
                    return Err(Refusal::NotHolder);
                }
                Ok(Watcher::Agent {
                    business: business.clone(),
                    role: agent.role.clone(),
                    run: agent.run.clone(),
                })
            }
            // The human, wherever the table serves it the feed, waits with
            // a reader's audience: what changes its inbox.
            Caller::Reader { business } | Caller::Human { business, .. } => Ok(Watcher::Reader {
                business: business.clone(),
            }),
        }
    }

    /// The topics this watcher listens to.
    pub fn topics(&self) -> Vec<Topic> {
        match self {
            Watcher::Agent { business, role, .. } => vec![
                Topic::Role(business.clone(), role.clone()),
                Topic::Agents(business.clone()),
            ],
            Watcher::Reader { business } => vec![Topic::Readers(business.clone())],
        }
    }

    /// The watcher's business.
    pub fn business(&self) -> &BusinessId {
        match self {
            Watcher::Agent { business, .. } | Watcher::Reader { business } => business,
        }
    }

    /// Whether the watcher hears of `change`.
    ///
    /// An agent holding role R in run X hears of: messages to R; decisions
    /// routed to R being raised, superseded or withdrawn; the resolution,
    /// acknowledgement, withdrawal or supersession of a decision X raised;
    /// R being released, revoked or freed by the end of the run that held
    /// it; its business's launch switch. A reader
    /// hears of what changes its business's human inbox, `tasks` or
    /// `agents`: messages to the human, every decision being raised or
    /// closed (`agents` shows each open one against its raiser, and the
    /// inbox those routed to the human), every claim, launch and end of a
    /// run, the launch
    /// switch (`agents` carries it), task observations. Nobody hears of
    /// another business.
    pub fn concerns(&self, change: &Change) -> bool {
        if self.business() != &change.business {
            return false;
        }
        match (self, &change.about) {
            (Watcher::Agent { role, .. }, About::Message(to)) => {
                to == &Recipient::Role(role.clone())
            }
            (Watcher::Agent { role, run, .. }, About::Decision(event, routing)) => {
                let routed_here = routing.route == Route::Role(role.clone());
                let raised_here = &routing.raiser.run == run;
                match event {
                    DecisionEvent::Raised => routed_here,
                    DecisionEvent::Withdrawn | DecisionEvent::Superseded => {
                        routed_here || raised_here
                    }
                    DecisionEvent::Resolved | DecisionEvent::Seen => raised_here,
                }
            }
            (Watcher::Agent { role, .. }, About::Claim { role: of, vacated }) => {
                *vacated && of == role
            }
            (Watcher::Agent { .. }, About::Switch) => true,
            (Watcher::Agent { .. }, About::Launched | About::Task) => false,
            (Watcher::Reader { .. }, About::Message(to)) => to == &Recipient::Human,
            (Watcher::Reader { .. }, About::Decision(event, _)) => *event != DecisionEvent::Seen,
            (
                Watcher::Reader { .. },
                About::Claim { .. } | About::Launched | About::Task | About::Switch,
            ) => true,
        }
    }
}
