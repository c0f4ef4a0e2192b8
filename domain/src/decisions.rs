//! Decisions: raise with immutable routing, then resolve, acknowledge,
//! withdraw or supersede.
//!
//! Routing happens once, at raise, from the action's class for the raiser
//! (`Business::class_of`): within-role closes at once with the raiser's `choice`;
//! cross-role goes to the delivery arbiter (the technical one for the
//! technical domain), or to the human when that arbiter is the raiser;
//! gated goes to the human. Nothing later changes a decision's record; its
//! status moves from open to exactly one of resolved, withdrawn or
//! superseded.

use std::collections::{BTreeSet, VecDeque};

use crate::claims::{Claims, LaunchSwitch};
use crate::evidence::{
    AgentRef, DecisionActor, DecisionEvidence, DecisionRecord, OptionKey, RaiseFields, Route,
};
use crate::journal::{Journaled, Mark};
use crate::text::{self, Lines, MAX_NOTE, MAX_OPTION_TEXT, MAX_QUESTION, MAX_RECOMMENDATION};
use crate::verb::Verb;
use crate::{ActionClass, Business, BusinessId, DecisionId, Refusal, RoleInstance, Target};

/// Where a decision stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Waiting for its resolver.
    Open,
    /// Resolved with this option.
    Resolved(OptionKey),
    /// Withdrawn by its raiser or the human.
    Withdrawn,
    /// Replaced by a newer decision.
    Superseded(DecisionId),
}

impl Status {
    /// The wire name: `open`, `resolved`, `withdrawn` or `superseded`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Resolved(_) => "resolved",
            Status::Withdrawn => "withdrawn",
            Status::Superseded(_) => "superseded",
        }
    }
}

/// A decision: its immutable record and its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Everything fixed at raise.
    pub record: DecisionRecord,
    /// Where it stands now.
    pub status: Status,
}

impl Decision {
    /// Whether `key` is one of the options.
    pub fn offers(&self, key: &OptionKey) -> bool {
        self.record.fields.options.iter().any(|o| &o.key == key)
    }

    /// Whether `actor` resolves this decision: the human always may; an
    /// agent only through the routed role (the caller checks it holds it).
    pub fn is_resolver(&self, actor: &DecisionActor) -> bool {
        match (actor, &self.record.route) {
            (DecisionActor::Human, Route::Role(_) | Route::Human) => true,
            (DecisionActor::Agent(agent), Route::Role(role)) => &agent.role == role,
            (DecisionActor::Agent(_), Route::Human) => false,
        }
    }
}

/// The arguments of `decision.raise`, already parsed, as the caller gave
/// them. The new decision's id is a runtime input and travels beside it in
/// [`Command::Raise`](crate::bus::Command::Raise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaiseInput {
    /// The fields the record keeps as given.
    pub fields: RaiseFields,
    /// The within-role choice, given at raise.
    pub choice: Option<OptionKey>,
    /// The option that authorizes; `yes` when absent.
    pub approval_choice: Option<OptionKey>,
}

/// The decision text rule over a raise's
/// words: no control or format character in any of them (a newline only in
/// the question), and the question, each option's text and the
/// recommendation within their caps. The action, option keys, task ref and
/// domain cannot hold such a character once parsed (their parsers allow
/// ASCII only); they are checked all the same, so this one function states
/// the whole rule.
///
/// # Errors
/// `bad-request` for the first field that breaks it.
pub fn check_raise_text(fields: &RaiseFields) -> Result<(), Refusal> {
    text::check(fields.action.as_str(), Lines::One, None)?;
    if let Some(target) = &fields.target {
        text::check(target.as_str(), Lines::One, None)?;
    }
    text::check(&fields.question, Lines::Many, Some(MAX_QUESTION))?;
    for option in &fields.options {
        text::check(option.key.as_str(), Lines::One, None)?;
        text::check(&option.text, Lines::One, Some(MAX_OPTION_TEXT))?;
    }
    text::check(&fields.recommendation, Lines::One, Some(MAX_RECOMMENDATION))?;
    if let Some(task) = &fields.task_ref {
        text::check(&task.to_string(), Lines::One, None)?;
    }
    if let Some(requirement) = &fields.requirement_ref {
        text::check(requirement, Lines::One, None)?;
    }
    Ok(())
}

/// The decision text rule over the `note` of `decision.resolve`,
/// `decision.seen` or `decision.withdraw`: lines like a question's (a
/// newline allowed, no other control or format character), at most
/// [`MAX_NOTE`] characters.
///
/// # Errors
/// `bad-request` when the note breaks it.
pub fn check_note(note: Option<&str>) -> Result<(), Refusal> {
    note.map_or(Ok(()), |note| {
        text::check(note, Lines::Many, Some(MAX_NOTE))
    })
}

/// A decision and its place in raise order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    decision: Decision,
    /// How many decisions were raised before it, in any business: the
    /// count of the map when it was applied, so a replay gives every
    /// decision the same number, and a rolled back raise gives its number
    /// back.
    raised: usize,
}

/// The decisions machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    decisions: Journaled<DecisionId, Entry>,
    outbox: VecDeque<DecisionEvidence>,
}

impl Decisions {
    /// The decision with this id, in any business.
    pub fn get(&self, id: &DecisionId) -> Option<&Decision> {
        self.decisions.get(id).map(|e| &e.decision)
    }

    /// Every decision, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Decision> {
        self.decisions.iter().map(|(_, e)| &e.decision)
    }

    /// The decision's place in raise order (0 for the first one ever
    /// raised, in any business): what "oldest first" means for decisions,
    /// whose ids are random.
    pub fn raise_order(&self, id: &DecisionId) -> Option<usize> {
        self.decisions.get(id).map(|e| e.raised)
    }

    /// The decision `id` of `business`.
    ///
    /// # Errors
    /// `unknown-reference` when no decision has this id; `cross-business`
    /// when it belongs to another business.
    pub fn lookup(&self, business: &BusinessId, id: &DecisionId) -> Result<&Decision, Refusal> {
        let d = self.get(id).ok_or(Refusal::UnknownReference)?;
        if &d.record.business != business {
            return Err(Refusal::CrossBusiness);
        }
        Ok(d)
    }

    /// `decision.raise` by `raiser` (the caller checked it holds its role),
    /// as decision `id` (drawn by the runtime, not given by the caller).
    ///
    /// # Errors
    /// - `bad-request`: no options, repeated option keys, a reused id, a
    ///   `choice` on a decision that is not within-role, or words that break
    ///   the decision text rule ([`check_raise_text`]);
    /// - `unknown-option`: an `approvalChoice` (default `yes`) or a `choice`
    ///   that is not an option;
    /// - `task-ref-required`: blocking without a task ref;
    /// - `choice-required`: within-role without a `choice`;
    /// - `launch-revoked`: `role.launch` while launching is off;
    /// - `unknown-role`: a `role.revoke` or `message.send` target that is not
    ///   a role of the business (or `human`, for `message.send`);
    /// - supersedes: `unknown-reference`, `cross-business`, `not-raiser`
    ///   (another role raised it) or `decision-closed`.
    pub fn handle_raise(
        &mut self,
        business: &Business,
        claims: &Claims,
        launch: LaunchSwitch,
        raiser: &AgentRef,
        id: DecisionId,
        input: RaiseInput,
    ) -> Result<Decision, Refusal> {
        check_raise_text(&input.fields)?;
        let keys: BTreeSet<&OptionKey> = input.fields.options.iter().map(|o| &o.key).collect();
        if input.fields.options.is_empty()
            || keys.len() != input.fields.options.len()
            || self.get(&id).is_some()
        {
            return Err(Refusal::BadRequest);
        }
        // The approving option (default `yes`) must be one of the options, so
        // the authorization context a resolver is shown names a real choice.
        let yes = OptionKey::yes();
        if !keys.contains(input.approval_choice.as_ref().unwrap_or(&yes)) {
            return Err(Refusal::UnknownOption);
        }
        if input.fields.blocking && input.fields.task_ref.is_none() {
            return Err(Refusal::TaskRefRequired);
        }
        if input.fields.action.as_str() == crate::business::ROLE_LAUNCH
            && launch == LaunchSwitch::Off
        {
            return Err(Refusal::LaunchRevoked);
        }
        let class = business.class_of(&raiser.role, &input.fields.action);
        let route = match class {
            ActionClass::WithinRole => {
                let choice = input.choice.as_ref().ok_or(Refusal::ChoiceRequired)?;
                if !keys.contains(choice) {
                    return Err(Refusal::UnknownOption);
                }
                Route::Role(raiser.role.clone())
            }
            ActionClass::CrossRole | ActionClass::Gated if input.choice.is_some() => {
                return Err(Refusal::BadRequest)
            }
            ActionClass::CrossRole => {
                let arbiter = business.arbiter(input.fields.technical);
                if arbiter == &raiser.role {
                    Route::Human
                } else {
                    Route::Role(arbiter.clone())
                }
            }
            ActionClass::Gated => Route::Human,
        };
        // The two actions named after the verbs they authorize check their
        // target; `role.revoke` also records the holder it is meant for.
        let action = input.fields.action.as_str();
        let holder = if action == Verb::RoleRevoke.as_str() {
            let role = target_role(business, input.fields.target.as_ref())?;
            claims.holder(business.id(), &role).cloned()
        } else {
            if action == Verb::MessageSend.as_str()
                && input.fields.target.as_ref().map(Target::as_str) != Some("human")
            {
                target_role(business, input.fields.target.as_ref())?;
            }
            None
        };
        if let Some(old) = &input.fields.supersedes {
            let old = self.lookup(business.id(), old)?;
            if old.record.raiser.role != raiser.role {
                return Err(Refusal::NotRaiser);
            }
            if old.status != Status::Open {
                return Err(Refusal::DecisionClosed);
            }
        }
        let record = DecisionRecord {
            id,
            business: business.id().clone(),
            raiser: raiser.clone(),
            fields: input.fields,
            approval_choice: input.approval_choice.unwrap_or_else(OptionKey::yes),
            class,
            route,
            holder,
        };
        let (id, raiser) = (record.id, record.raiser.clone());
        let supersedes = record.fields.supersedes;
        self.stage(DecisionEvidence::Raised(Box::new(record)));
        if let Some(old) = supersedes {
            self.stage(DecisionEvidence::Superseded {
                business: business.id().clone(),
                id: old,
                by: id,
            });
        }
        if let Some(choice) = input.choice {
            self.stage(DecisionEvidence::Resolved {
                business: business.id().clone(),
                id,
                choice,
                by: DecisionActor::Agent(raiser),
                note: None,
            });
        }
        self.get(&id).cloned().ok_or(Refusal::UnknownReference)
    }

    /// `decision.resolve`. An agent caller must hold its role (checked by
    /// the caller); this checks it is the routed one.
    ///
    /// # Errors
    /// `bad-request` (a note that breaks the text rule, [`check_note`]),
    /// `unknown-reference`, `cross-business`, `not-resolver`,
    /// `decision-closed` (not open), `unknown-option`.
    pub fn handle_resolve(
        &mut self,
        business: &BusinessId,
        by: DecisionActor,
        id: &DecisionId,
        choice: OptionKey,
        note: Option<String>,
    ) -> Result<Decision, Refusal> {
        check_note(note.as_deref())?;
        let d = self.lookup(business, id)?;
        if !d.is_resolver(&by) {
            return Err(Refusal::NotResolver);
        }
        if d.status != Status::Open {
            return Err(Refusal::DecisionClosed);
        }
        if !d.offers(&choice) {
            return Err(Refusal::UnknownOption);
        }
        self.stage(DecisionEvidence::Resolved {
            business: business.clone(),
            id: *id,
            choice,
            by,
            note,
        });
        self.lookup(business, id).cloned()
    }

    /// `decision.seen`: the resolver acknowledges without resolving.
    ///
    /// # Errors
    /// `bad-request` (the note, [`check_note`]), `unknown-reference`,
    /// `cross-business`, `not-resolver`.
    pub fn handle_seen(
        &mut self,
        business: &BusinessId,
        by: DecisionActor,
        id: &DecisionId,
        note: Option<String>,
    ) -> Result<Decision, Refusal> {
        check_note(note.as_deref())?;
        let d = self.lookup(business, id)?;
        if !d.is_resolver(&by) {
            return Err(Refusal::NotResolver);
        }
        self.stage(DecisionEvidence::Seen {
            business: business.clone(),
            id: *id,
            by,
            note,
        });
        self.lookup(business, id).cloned()
    }

    /// `decision.withdraw`: the raising role or the human closes an open
    /// decision. The record itself is never rewritten.
    ///
    /// # Errors
    /// `bad-request` (the note, [`check_note`]), `unknown-reference`,
    /// `cross-business`, `not-raiser`, `decision-closed`.
    pub fn handle_withdraw(
        &mut self,
        business: &BusinessId,
        by: DecisionActor,
        id: &DecisionId,
        note: Option<String>,
    ) -> Result<Decision, Refusal> {
        check_note(note.as_deref())?;
        let d = self.lookup(business, id)?;
        let raiser = match &by {
            DecisionActor::Human => true,
            DecisionActor::Agent(agent) => agent.role == d.record.raiser.role,
        };
        if !raiser {
            return Err(Refusal::NotRaiser);
        }
        if d.status != Status::Open {
            return Err(Refusal::DecisionClosed);
        }
        self.stage(DecisionEvidence::Withdrawn {
            business: business.clone(),
            id: *id,
            by,
            note,
        });
        self.lookup(business, id).cloned()
    }

    /// Applies committed or staged evidence.
    pub fn apply(&mut self, evidence: &DecisionEvidence) {
        let set = |this: &mut Self, id: &DecisionId, status: Status| {
            if let Some(mut e) = this.decisions.get(id).cloned() {
                e.decision.status = status;
                this.decisions.insert(*id, e);
            }
        };
        match evidence {
            DecisionEvidence::Raised(record) => {
                let decision = Decision {
                    record: (**record).clone(),
                    status: Status::Open,
                };
                let raised = self.decisions.len();
                self.decisions.insert(record.id, Entry { decision, raised });
            }
            DecisionEvidence::Resolved { id, choice, .. } => {
                set(self, id, Status::Resolved(choice.clone()))
            }
            DecisionEvidence::Withdrawn { id, .. } => set(self, id, Status::Withdrawn),
            DecisionEvidence::Superseded { id, by, .. } => set(self, id, Status::Superseded(*by)),
            DecisionEvidence::Seen { .. } => {}
        }
    }

    fn stage(&mut self, evidence: DecisionEvidence) {
        self.apply(&evidence);
        self.outbox.push_back(evidence);
    }

    /// The next piece of evidence to commit.
    pub fn poll_effect(&mut self) -> Option<DecisionEvidence> {
        self.outbox.pop_front()
    }

    /// A savepoint in the staged changes.
    pub fn mark(&self) -> Mark {
        self.decisions.mark()
    }

    /// Undoes staged changes after `mark` and drops unpolled evidence.
    pub fn rollback_to(&mut self, mark: Mark) {
        self.decisions.rollback_to(mark);
        self.outbox.clear();
    }

    /// The store committed everything staged: keep it.
    pub fn handle_committed(&mut self) {
        self.decisions.commit();
    }

    /// The store did not commit: restore the last committed state.
    pub fn handle_rolled_back(&mut self) {
        self.decisions.rollback();
        self.outbox.clear();
    }
}

/// The role a `role.revoke` or `message.send` decision targets.
fn target_role(business: &Business, target: Option<&Target>) -> Result<RoleInstance, Refusal> {
    let role = target
        .and_then(|t| RoleInstance::parse(t.as_str()).ok())
        .ok_or(Refusal::UnknownRole)?;
    business.role(&role).ok_or(Refusal::UnknownRole)?;
    Ok(role)
}
