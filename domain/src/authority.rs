//! Single-use authorization: the one helper behind `authorize`,
//! `message.send` and `role.revoke`.
//!
//! An action is allowed when it is within-role for the agent, or when a
//! decision approves exactly it: raised by the same role and run, for the
//! same action and target, resolved with its `approvalChoice`, of the class
//! current policy gives, and not spent before. Spending it stages a
//! consumption; the caller commits consumption, `action.allowed` and its own
//! effect in one transaction, or none of them.

use std::collections::VecDeque;

use crate::business::ROLE_LAUNCH;
use crate::claims::LaunchSwitch;
use crate::decisions::{Decisions, Status};
use crate::evidence::{ActionAllowed, AgentRef, Consumption, Evidence, Subject};
use crate::journal::{Journaled, Mark};
use crate::{Action, ActionClass, Business, DecisionId, Refusal, Target};

/// Why an action is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The action is within-role for the agent; no decision was spent.
    WithinRole,
    /// This decision's approval was spent.
    Approval(DecisionId),
}

/// One authorization request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask<'a> {
    /// The acting agent (the caller checked it holds its role).
    pub agent: &'a AgentRef,
    /// The action.
    pub action: &'a Action,
    /// Its target.
    pub target: Option<&'a Target>,
    /// The approving decision, if the agent names one.
    pub decision: Option<DecisionId>,
}

/// The authorizations machine: which approvals have been spent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Authorizations {
    consumed: Journaled<DecisionId, ()>,
    outbox: VecDeque<Evidence>,
}

impl Authorizations {
    /// Whether the approval of `decision` was spent.
    pub fn is_consumed(&self, decision: &DecisionId) -> bool {
        self.consumed.get(decision).is_some()
    }

    /// Checks `ask` without changing anything.
    ///
    /// # Errors
    /// In this order:
    /// - `launch-revoked`: `role.launch` while launching is off;
    /// - `not-authorized`: no decision for an action that is not within-role;
    /// - `unknown-reference`, `cross-business`: the decision is not one of
    ///   this business;
    /// - `not-authorized`: a decision for another raiser, run, action or target;
    /// - `decision-consumed`: its approval was spent;
    /// - `decision-mismatch`: its recorded class differs from what current
    ///   policy gives its raiser for its action (policy changed since raise);
    /// - `decision-open`: it is not resolved yet;
    /// - `not-authorized`: resolved with another option, withdrawn or superseded.
    pub fn check(
        &self,
        business: &Business,
        decisions: &Decisions,
        launch: LaunchSwitch,
        ask: &Ask<'_>,
    ) -> Result<Grant, Refusal> {
        if ask.action.as_str() == ROLE_LAUNCH && launch == LaunchSwitch::Off {
            return Err(Refusal::LaunchRevoked);
        }
        let class = business.class_of(&ask.agent.role, ask.action);
        let Some(id) = ask.decision else {
            return match class {
                ActionClass::WithinRole => Ok(Grant::WithinRole),
                ActionClass::CrossRole | ActionClass::Gated => Err(Refusal::NotAuthorized),
            };
        };
        let d = decisions.lookup(business.id(), &id)?;
        // Identity first: a decision that is not this agent's, for this action
        // and target, authorizes nothing, and its state is none of its business.
        let r = &d.record;
        if &r.raiser != ask.agent
            || &r.fields.action != ask.action
            || r.fields.target.as_ref() != ask.target
        {
            return Err(Refusal::NotAuthorized);
        }
        if self.is_consumed(&id) {
            return Err(Refusal::DecisionConsumed);
        }
        if r.class != class {
            return Err(Refusal::DecisionMismatch);
        }
        match &d.status {
            Status::Open => Err(Refusal::DecisionOpen),
            Status::Resolved(choice) if choice == &r.approval_choice && d.offers(choice) => {
                Ok(Grant::Approval(id))
            }
            Status::Resolved(_) | Status::Withdrawn | Status::Superseded(_) => {
                Err(Refusal::NotAuthorized)
            }
        }
    }

    /// Checks `ask` and, when allowed, stages the consumption (if a decision
    /// was spent) and the `action.allowed` evidence filed under `subject`.
    ///
    /// # Errors
    /// As [`Authorizations::check`]; nothing is staged on error.
    pub fn handle_authorize(
        &mut self,
        business: &Business,
        decisions: &Decisions,
        launch: LaunchSwitch,
        ask: &Ask<'_>,
        subject: Option<Subject>,
    ) -> Result<Grant, Refusal> {
        let grant = self.check(business, decisions, launch, ask)?;
        let decision = match grant {
            Grant::WithinRole => None,
            Grant::Approval(id) => Some(id),
        };
        if let Some(id) = decision {
            self.stage(Evidence::Consumed(Consumption {
                business: business.id().clone(),
                decision: id,
                agent: ask.agent.clone(),
                action: ask.action.clone(),
                target: ask.target.cloned(),
            }));
        }
        self.stage(Evidence::Allowed(ActionAllowed {
            business: business.id().clone(),
            agent: ask.agent.clone(),
            action: ask.action.clone(),
            target: ask.target.cloned(),
            decision,
            subject,
        }));
        Ok(grant)
    }

    /// Applies committed or staged evidence.
    pub fn apply(&mut self, consumption: &Consumption) {
        self.consumed.insert(consumption.decision, ());
    }

    fn stage(&mut self, evidence: Evidence) {
        if let Evidence::Consumed(c) = &evidence {
            self.apply(c);
        }
        self.outbox.push_back(evidence);
    }

    /// The next piece of evidence to commit.
    pub fn poll_effect(&mut self) -> Option<Evidence> {
        self.outbox.pop_front()
    }

    /// A savepoint in the staged changes.
    pub fn mark(&self) -> Mark {
        self.consumed.mark()
    }

    /// Undoes staged changes after `mark` and drops unpolled evidence.
    pub fn rollback_to(&mut self, mark: Mark) {
        self.consumed.rollback_to(mark);
        self.outbox.clear();
    }

    /// The store committed everything staged: keep it.
    pub fn handle_committed(&mut self) {
        self.consumed.commit();
    }

    /// The store did not commit: restore the last committed state.
    pub fn handle_rolled_back(&mut self) {
        self.consumed.rollback();
        self.outbox.clear();
    }
}
