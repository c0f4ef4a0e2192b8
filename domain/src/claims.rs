//! Role claims, ended runs and launch bindings.
//!
//! [`Claims`] keeps one seat per (business, role instance): vacant or held by
//! one run, plus the runs revoked from it, which can never hold it again;
//! and the runs that ended ([`Ended`]): a run ends once, its end frees the
//! seat it held in the same record, and from then on every call of its
//! capability is refused ([`Claims::check_live`]).
//! [`Launches`] keeps the launch records the trusted host bound (which process
//! runs which role) and each business's launch switch.
//!
//! Both follow the crate's driving loop: `handle_*` validates, stages through
//! `apply` and queues evidence; `poll_effect` drains it; `handle_committed`
//! or `handle_rolled_back` settles the staged change.

use std::collections::{BTreeSet, VecDeque};

use crate::ending::{EndCause, Ending, RunEnd};
use crate::evidence::{AgentRef, ClaimEvidence, LaunchEvidence, LaunchRecord};
use crate::journal::{Journaled, Mark};
use crate::{Business, BusinessId, DecisionId, Refusal, RoleInstance, RunId, Timestamp};

/// Who sits in a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Occupancy {
    /// Nobody holds the role.
    Vacant,
    /// This run holds the role.
    Held(RunId),
}

/// One role instance's seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seat {
    occupancy: Occupancy,
    revoked: BTreeSet<RunId>,
}

impl Seat {
    fn vacant() -> Self {
        Self {
            occupancy: Occupancy::Vacant,
            revoked: BTreeSet::new(),
        }
    }

    /// Who holds the role.
    pub fn occupancy(&self) -> &Occupancy {
        &self.occupancy
    }

    /// Whether `run` was revoked from this role.
    pub fn is_revoked(&self, run: &RunId) -> bool {
        self.revoked.contains(run)
    }
}

/// What a successful claim did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimReply {
    /// The run took the vacant role.
    Claimed,
    /// The run already held the role; nothing was recorded.
    AlreadyHeld,
}

type SeatKey = (BusinessId, RoleInstance);

/// A run that ended: the role it was launched for, why and how it ended,
/// and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    role: RoleInstance,
    ending: Ending,
    /// The end's broker write time; `None` only while the end is staged
    /// and the bus has not stamped it yet ([`Claims::handle_end_stamped`]).
    at: Option<Timestamp>,
}

impl Ended {
    /// The role the run was launched for.
    pub fn role(&self) -> &RoleInstance {
        &self.role
    }

    /// Why and how it ended.
    pub fn ending(&self) -> &Ending {
        &self.ending
    }

    /// When the end was recorded (every committed end has its time).
    pub fn at(&self) -> Option<Timestamp> {
        self.at
    }
}

/// The role-claims machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    seats: Journaled<SeatKey, Seat>,
    ended: Journaled<RunId, Ended>,
    outbox: VecDeque<ClaimEvidence>,
}

impl Claims {
    /// The seat of `role`, if anything ever happened to it.
    pub fn seat(&self, business: &BusinessId, role: &RoleInstance) -> Option<&Seat> {
        self.seats.get(&(business.clone(), role.clone()))
    }

    /// The run holding `role`, if any.
    pub fn holder(&self, business: &BusinessId, role: &RoleInstance) -> Option<&RunId> {
        match self.seat(business, role).map(Seat::occupancy) {
            Some(Occupancy::Held(run)) => Some(run),
            Some(Occupancy::Vacant) | None => None,
        }
    }

    /// Whether `agent` is the current holder of its role.
    pub fn holds(&self, business: &BusinessId, agent: &AgentRef) -> bool {
        self.holder(business, &agent.role) == Some(&agent.run)
    }

    /// How `run` ended, if it did.
    pub fn ended(&self, run: &RunId) -> Option<&Ended> {
        self.ended.get(run)
    }

    /// Every ended run, in no particular order.
    pub fn ends(&self) -> impl Iterator<Item = (&RunId, &Ended)> {
        self.ended.iter()
    }

    /// Refuses every call of a run that ended.
    ///
    /// # Errors
    /// `run-revoked` for a run that ended by a revoke, `run-ended` for
    /// every other end ([`Ending::refusal`]).
    pub fn check_live(&self, run: &RunId) -> Result<(), Refusal> {
        match self.ended(run) {
            Some(ended) => Err(ended.ending.refusal()),
            None => Ok(()),
        }
    }

    /// `role.claim`: `agent` takes its role.
    ///
    /// # Errors
    /// `run-revoked` if this run was revoked from the role; `run-ended` if
    /// it ended; `role-held` if another run holds it.
    pub fn handle_claim(
        &mut self,
        business: &BusinessId,
        agent: &AgentRef,
    ) -> Result<ClaimReply, Refusal> {
        self.check_live(&agent.run)?;
        let seat = self.seat(business, &agent.role);
        if seat.is_some_and(|s| s.is_revoked(&agent.run)) {
            return Err(Refusal::RunRevoked);
        }
        match seat.map(Seat::occupancy) {
            Some(Occupancy::Held(run)) if run == &agent.run => Ok(ClaimReply::AlreadyHeld),
            Some(Occupancy::Held(_)) => Err(Refusal::RoleHeld),
            Some(Occupancy::Vacant) | None => {
                self.stage(ClaimEvidence::Claimed {
                    business: business.clone(),
                    agent: agent.clone(),
                });
                Ok(ClaimReply::Claimed)
            }
        }
    }

    /// `role.release`: the holder gives its role up.
    ///
    /// # Errors
    /// `not-holder` unless `agent` holds its role.
    pub fn handle_release(
        &mut self,
        business: &BusinessId,
        agent: &AgentRef,
    ) -> Result<(), Refusal> {
        if !self.holds(business, agent) {
            return Err(Refusal::NotHolder);
        }
        self.stage(ClaimEvidence::Released {
            business: business.clone(),
            agent: agent.clone(),
        });
        Ok(())
    }

    /// Revokes `holder` from `role`, as an approved `role.revoke` decision
    /// allows, and ends the run (cause `revoked`), so whoever runs it
    /// stops it. The caller has checked and spends the approval.
    ///
    /// # Errors
    /// `holder-changed` unless `holder` (the decision's recorded holder
    /// incarnation) holds the role now.
    pub fn handle_revoke(
        &mut self,
        business: &BusinessId,
        role: &RoleInstance,
        holder: &RunId,
        decision: DecisionId,
    ) -> Result<(), Refusal> {
        if self.holder(business, role) != Some(holder) {
            return Err(Refusal::HolderChanged);
        }
        let agent = AgentRef {
            role: role.clone(),
            run: holder.clone(),
        };
        self.stage(ClaimEvidence::Revoked {
            business: business.clone(),
            agent: agent.clone(),
            decision,
        });
        // The revoke freed the seat; the end records that the run is over.
        self.stage(ClaimEvidence::Ended(RunEnd {
            business: business.clone(),
            agent,
            ending: Ending::of_cause(EndCause::Revoked),
            vacated: false,
        }));
        Ok(())
    }

    /// Ends `agent`'s run: records `session.ended` with `ending`, which
    /// frees the role if the run holds it, in the same record.
    ///
    /// # Errors
    /// `run-ended` if the run ended already.
    pub fn handle_end(
        &mut self,
        business: &BusinessId,
        agent: &AgentRef,
        ending: Ending,
    ) -> Result<(), Refusal> {
        if self.ended(&agent.run).is_some() {
            return Err(Refusal::RunEnded);
        }
        let vacated = self.holds(business, agent);
        self.stage(ClaimEvidence::Ended(RunEnd {
            business: business.clone(),
            agent: agent.clone(),
            ending,
            vacated,
        }));
        Ok(())
    }

    /// The bus stamped the end of `run` with its write time `at` (live, as
    /// it queues the record; on replay, from the store), which `agents`
    /// shows.
    pub fn handle_end_stamped(&mut self, run: &RunId, at: Timestamp) {
        if let Some(ended) = self.ended.get(run) {
            let stamped = Ended {
                at: Some(at),
                ..ended.clone()
            };
            self.ended.insert(run.clone(), stamped);
        }
    }

    /// Applies committed or staged evidence. Replaying stored evidence
    /// through this rebuilds the machine.
    pub fn apply(&mut self, evidence: &ClaimEvidence) {
        match evidence {
            ClaimEvidence::Claimed { business, agent } => {
                self.seats.update(key(business, agent), Seat::vacant, |s| {
                    s.occupancy = Occupancy::Held(agent.run.clone());
                });
            }
            ClaimEvidence::Released { business, agent } => {
                self.seats.update(key(business, agent), Seat::vacant, |s| {
                    s.occupancy = Occupancy::Vacant;
                });
            }
            ClaimEvidence::Revoked {
                business, agent, ..
            } => {
                self.seats.update(key(business, agent), Seat::vacant, |s| {
                    s.occupancy = Occupancy::Vacant;
                    s.revoked.insert(agent.run.clone());
                });
            }
            ClaimEvidence::Ended(RunEnd {
                business,
                agent,
                ending,
                vacated,
            }) => {
                if *vacated {
                    self.seats.update(key(business, agent), Seat::vacant, |s| {
                        s.occupancy = Occupancy::Vacant;
                    });
                }
                let ended = Ended {
                    role: agent.role.clone(),
                    ending: *ending,
                    at: None,
                };
                self.ended.insert(agent.run.clone(), ended);
            }
        }
    }

    fn stage(&mut self, evidence: ClaimEvidence) {
        self.apply(&evidence);
        self.outbox.push_back(evidence);
    }

    /// The next piece of evidence to commit.
    pub fn poll_effect(&mut self) -> Option<ClaimEvidence> {
        self.outbox.pop_front()
    }

    /// A savepoint in the staged changes.
    pub fn mark(&self) -> (Mark, Mark) {
        (self.seats.mark(), self.ended.mark())
    }

    /// Undoes staged changes after `mark` and drops unpolled evidence.
    pub fn rollback_to(&mut self, mark: (Mark, Mark)) {
        self.seats.rollback_to(mark.0);
        self.ended.rollback_to(mark.1);
        self.outbox.clear();
    }

    /// The store committed everything staged: keep it.
    pub fn handle_committed(&mut self) {
        self.seats.commit();
        self.ended.commit();
    }

    /// The store did not commit: restore the last committed state.
    pub fn handle_rolled_back(&mut self) {
        self.seats.rollback();
        self.ended.rollback();
        self.outbox.clear();
    }
}

fn key(business: &BusinessId, agent: &AgentRef) -> SeatKey {
    (business.clone(), agent.role.clone())
}

/// Whether a business accepts launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchSwitch {
    /// Launches and new bindings are allowed.
    On,
    /// The human switched launching off.
    Off,
}

/// What a successful binding did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindReply {
    /// A run the broker had not seen.
    New,
    /// A run bound before (for example before a restart), with the identical record.
    Rebound,
}

/// Launch bindings and the launch switch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launches {
    runs: Journaled<RunId, LaunchRecord>,
    switches: Journaled<BusinessId, LaunchSwitch>,
    outbox: VecDeque<LaunchEvidence>,
}

impl Launches {
    /// The record bound for `run`.
    pub fn record(&self, run: &RunId) -> Option<&LaunchRecord> {
        self.runs.get(run)
    }

    /// Every bound launch, in no particular order (the human-proof registry).
    pub fn records(&self) -> impl Iterator<Item = &LaunchRecord> {
        self.runs.iter().map(|(_, r)| r)
    }

    /// The business's launch switch.
    pub fn switch(&self, business: &BusinessId) -> LaunchSwitch {
        self.switches
            .get(business)
            .copied()
            .unwrap_or(LaunchSwitch::On)
    }

    /// Binds a launch the trusted host performed. Every binding is recorded
    /// as `session.launched`, because each one issues a new capability.
    ///
    /// # Errors
    /// - `cross-business`: `business` is not the record's business;
    /// - `unknown-role`: the business has no such role;
    /// - `launch-mismatch`: the run was bound before with any other field;
    /// - `launch-revoked`: a new run while the business's launching is off.
    pub fn handle_bind(
        &mut self,
        business: &Business,
        record: LaunchRecord,
    ) -> Result<BindReply, Refusal> {
        if business.id() != &record.business {
            return Err(Refusal::CrossBusiness);
        }
        if business.role(&record.role).is_none() {
            return Err(Refusal::UnknownRole);
        }
        let reply = match self.runs.get(&record.run) {
            Some(known) if known == &record => BindReply::Rebound,
            Some(_) => return Err(Refusal::LaunchMismatch),
            None if self.switch(&record.business) == LaunchSwitch::Off => {
                return Err(Refusal::LaunchRevoked)
            }
            None => BindReply::New,
        };
        self.stage(LaunchEvidence::Launched(record));
        Ok(reply)
    }

    /// The human's `launch.revoke` (`on = false`) or `launch.restore` (`on = true`).
    pub fn handle_switch(&mut self, business: &BusinessId, on: bool) {
        let business = business.clone();
        self.stage(if on {
            LaunchEvidence::Restored { business }
        } else {
            LaunchEvidence::Revoked { business }
        });
    }

    /// Applies committed or staged evidence.
    pub fn apply(&mut self, evidence: &LaunchEvidence) {
        match evidence {
            LaunchEvidence::Launched(record) => {
                self.runs.insert(record.run.clone(), record.clone())
            }
            LaunchEvidence::Revoked { business } => {
                self.switches.insert(business.clone(), LaunchSwitch::Off)
            }
            LaunchEvidence::Restored { business } => {
                self.switches.insert(business.clone(), LaunchSwitch::On)
            }
        }
    }

    fn stage(&mut self, evidence: LaunchEvidence) {
        self.apply(&evidence);
        self.outbox.push_back(evidence);
    }

    /// The next piece of evidence to commit.
    pub fn poll_effect(&mut self) -> Option<LaunchEvidence> {
        self.outbox.pop_front()
    }

    /// A savepoint in the staged changes.
    pub fn mark(&self) -> (Mark, Mark) {
        (self.runs.mark(), self.switches.mark())
    }

    /// Undoes staged changes after `mark` and drops unpolled evidence.
    pub fn rollback_to(&mut self, mark: (Mark, Mark)) {
        self.runs.rollback_to(mark.0);
        self.switches.rollback_to(mark.1);
        self.outbox.clear();
    }

    /// The store committed everything staged: keep it.
    pub fn handle_committed(&mut self) {
        self.runs.commit();
        self.switches.commit();
    }

    /// The store did not commit: restore the last committed state.
    pub fn handle_rolled_back(&mut self) {
        self.runs.rollback();
        self.switches.rollback();
        self.outbox.clear();
    }
}
