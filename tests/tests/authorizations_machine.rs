//! Single-use authorizations against a deliberately dumb reference model.
//!
//! The three roles of `acme`, each held by one run from the start, raise
//! decisions that their resolver then answers (or leaves open), spend them
//! through `authorize` and `message.send`, hand their role to a new run
//! (whose asks on the old run's approvals refuse), and live through
//! restarts that may switch the policy (policy B makes `repo.merge` gated
//! for `dev`, so its earlier cross-role approvals drift). The model knows
//! each action's class from tables written out by hand (it never asks
//! `Business::class_of`) and predicts every reply exactly, refusals in the
//! order of `Authorizations::check` and `Bus::send`.
//!
//! After every step: the bus's spent approvals are exactly the model's; the
//! store holds at most one consumption per decision, exactly the model's,
//! each with its `action.allowed`; and every consumption matches its
//! decision: the same raiser role and run, action and target, resolved with
//! the approval choice. A mismatched approval is never spent.

use std::collections::BTreeMap;

use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{Caller, Command, Reply, SendInput};
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::decisions::{Decision, RaiseInput, Status};
use mosaic_domain::evidence::{DecisionRecord, Evidence, RaiseFields, Recipient, Route, Subject};
use mosaic_domain::{ActionClass, DecisionId, MessageId, Refusal, Target};
use mosaic_ports::fakes::MemoryStore;
use mosaic_tests::fixture::{
    acme, action, agent, caller, decision_id, human, key, policy_a, policy_b, role, t, yes_no,
    ROLES,
};
use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::{Driver, FreshStore, Restart};
use proptest::prelude::*;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

/// Run `g` of `ROLES[i]` is `RUN_PREFIX[i]` followed by `g`; run 0 holds
/// each role at the start, and a rerun hands the role to the next run.
const RUN_PREFIX: [&str; 3] = ["l", "d", "o"];
const LEAD: usize = 0;
const DEV: usize = 1;
const OPS: usize = 2;

/// The action pool.
const ACTIONS: [&str; 4] = ["repo.merge", "repo.push", "repo.delete", "message.send"];
const SEND: usize = 3;

/// The target pool; a `message.send` decision needs a role target.
const TARGETS: [Option<&str>; 4] = [None, Some("main"), Some("ops"), Some("lead")];
const TO_OPS: usize = 2;
const TO_LEAD: usize = 3;

/// The class of an action for a role, in the model's own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Within,
    Cross,
    Gated,
}

use Class::{Cross as C, Gated as G, Within as W};

impl Class {
    fn domain(self) -> ActionClass {
        match self {
            Class::Within => ActionClass::WithinRole,
            Class::Cross => ActionClass::CrossRole,
            Class::Gated => ActionClass::Gated,
        }
    }
}

/// `POLICY_A[role][action]`, by hand from the fixture: `lead` merges
/// cross-role and sends within role; `dev` merges cross-role, pushes and
/// sends within role; `ops` has nothing; `repo.delete` is gated-only.
const POLICY_A: [[Class; 4]; 3] = [
    // repo.merge, repo.push, repo.delete, message.send
    [C, G, G, W], // lead
    [C, W, G, W], // dev
    [G, G, G, G], // ops
];

/// Policy B: the same, except that `repo.merge` is gated for `dev`.
const POLICY_B: [[Class; 4]; 3] = [
    [C, G, G, W], // lead
    [G, W, G, W], // dev
    [G, G, G, G], // ops
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    A,
    B,
}

impl Policy {
    fn class(self, role: usize, action: usize) -> Class {
        match self {
            Policy::A => POLICY_A[role][action],
            Policy::B => POLICY_B[role][action],
        }
    }

    fn businesses(self) -> Vec<mosaic_domain::Business> {
        match self {
            Policy::A => policy_a(),
            Policy::B => policy_b(),
        }
    }
}

/// How the resolver answers right after the raise (within-role: the
/// raiser's `choice`; `Unanswered` then gives none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Yes,
    No,
    Unanswered,
}

impl Answer {
    fn key(self) -> Option<&'static str> {
        match self {
            Answer::Yes => Some("yes"),
            Answer::No => Some("no"),
            Answer::Unanswered => None,
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Raise {
        by: usize,
        action: usize,
        target: usize,
        answer: Answer,
    },
    /// `decision` indexes the model's decisions; past the end is unknown.
    Authorize {
        by: usize,
        decision: Option<usize>,
        action: usize,
        target: usize,
    },
    /// `by` sends to `lead`, citing or spending `decision`.
    Send {
        by: usize,
        decision: Option<usize>,
    },
    /// The holder of `role` releases it and its next run claims it.
    Rerun(usize),
    Restart(Policy),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Role(usize),
    Human,
}

/// A decision the bus accepted, as the model sees it.
#[derive(Clone, Debug)]
struct Known {
    /// The id is `decision_id(n)`.
    n: u64,
    by: usize,
    /// The raiser's run generation.
    run: u32,
    action: usize,
    target: usize,
    /// The class when raised.
    class: Class,
    route: Who,
    /// `None` while open, else whether it was resolved with `yes`.
    approved: Option<bool>,
    consumed: bool,
}

impl Known {
    fn id(&self) -> DecisionId {
        decision_id(self.n)
    }

    fn decision(&self) -> Decision {
        let record = DecisionRecord {
            id: self.id(),
            business: acme(),
            raiser: agent(ROLES[self.by], &run(self.by, self.run)),
            fields: RaiseFields {
                action: action(ACTIONS[self.action]),
                target: target(self.target),
                question: QUESTION.into(),
                options: yes_no(),
                recommendation: "yes".into(),
                blocking: false,
                technical: false,
                project: None,
                task_ref: None,
                requirement_ref: None,
                supersedes: None,
            },
            approval_choice: key("yes"),
            class: self.class.domain(),
            route: match self.route {
                Who::Role(r) => Route::Role(role(ROLES[r])),
                Who::Human => Route::Human,
            },
            holder: None,
        };
        let status = match self.approved {
            None => Status::Open,
            Some(true) => Status::Resolved(key("yes")),
            Some(false) => Status::Resolved(key("no")),
        };
        Decision { record, status }
    }
}

const QUESTION: &str = "May I?";

fn target(i: usize) -> Option<Target> {
    TARGETS[i].map(|t| Target::parse(t).expect("valid target"))
}

fn run(role: usize, generation: u32) -> String {
    format!("{}{generation}", RUN_PREFIX[role])
}

fn message_id(n: u64) -> MessageId {
    let mut b = [0x5e; 16];
    b[..8].copy_from_slice(&n.to_be_bytes());
    MessageId::from_random(b)
}

/// The id no decision ever has: numbering starts at 1.
fn unknown_id() -> DecisionId {
    decision_id(0)
}

#[derive(Clone, Debug)]
struct Model {
    policy: Policy,
    /// The run generation holding each role.
    runs: [u32; 3],
    decisions: Vec<Known>,
    /// Raise attempts so far; attempt `n` uses id `decision_id(n)`.
    raises: u64,
    /// Send attempts so far; attempt `n` uses id `message_id(n)`.
    sends: u64,
    /// What the last step must have answered.
    expect: Option<Result<Reply, Refusal>>,
}

impl Model {
    /// `decision.raise`, then the resolver's answer.
    fn raise(
        &mut self,
        by: usize,
        action: usize,
        target: usize,
        answer: Answer,
    ) -> Result<Reply, Refusal> {
        self.raises += 1;
        let n = self.raises;
        let class = self.policy.class(by, action);
        // Within-role needs the raiser's `choice`; the harness gives one
        // unless the step leaves the decision unanswered.
        let route = match (class, answer) {
            (Class::Within, Answer::Unanswered) => return Err(Refusal::ChoiceRequired),
            (Class::Within, Answer::Yes | Answer::No) => Who::Role(by),
            (Class::Cross, Answer::Yes | Answer::No | Answer::Unanswered) => {
                if by == LEAD {
                    Who::Human
                } else {
                    Who::Role(LEAD)
                }
            }
            (Class::Gated, Answer::Yes | Answer::No | Answer::Unanswered) => Who::Human,
        };
        if action == SEND && target != TO_OPS && target != TO_LEAD {
            return Err(Refusal::UnknownRole);
        }
        // Closed at raise (within-role) or answered at once by the routed resolver.
        let approved = match answer {
            Answer::Yes => Some(true),
            Answer::No => Some(false),
            Answer::Unanswered => None,
        };
        let d = Known {
            n,
            by,
            run: self.runs[by],
            action,
            target,
            class,
            route,
            approved,
            consumed: false,
        };
        let reply = Ok(Reply::Decision(Box::new(d.decision())));
        self.decisions.push(d);
        reply
    }

    /// The one authorization helper, checks in the order of `Authorizations::check`.
    fn authorize(
        &mut self,
        by: usize,
        decision: Option<usize>,
        action: usize,
        target: usize,
    ) -> Result<Grant, Refusal> {
        let now = self.policy.class(by, action);
        let Some(idx) = decision else {
            return if now == Class::Within {
                Ok(Grant::WithinRole)
            } else {
                Err(Refusal::NotAuthorized)
            };
        };
        let d = self
            .decisions
            .get_mut(idx)
            .ok_or(Refusal::UnknownReference)?;
        if d.by != by || d.run != self.runs[by] || d.action != action || d.target != target {
            return Err(Refusal::NotAuthorized);
        }
        if d.consumed {
            return Err(Refusal::DecisionConsumed);
        }
        if d.class != now {
            return Err(Refusal::DecisionMismatch);
        }
        match d.approved {
            None => Err(Refusal::DecisionOpen),
            Some(false) => Err(Refusal::NotAuthorized),
            Some(true) => {
                d.consumed = true;
                Ok(Grant::Approval(d.id()))
            }
        }
    }

    /// `message.send` to `lead`, in the order of `Bus::send`: within role the
    /// decision is only a citation that must exist; otherwise it is spent.
    fn send(&mut self, by: usize, decision: Option<usize>) -> Result<Reply, Refusal> {
        self.sends += 1;
        let id = message_id(self.sends);
        if self.policy.class(by, SEND) == Class::Within {
            if let Some(idx) = decision {
                self.decisions.get(idx).ok_or(Refusal::UnknownReference)?;
            }
        } else {
            self.authorize(by, decision, SEND, TO_LEAD)?;
        }
        Ok(Reply::Sent { id, request: None })
    }
}

struct Reference;

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model {
            policy: Policy::A,
            runs: [0; 3],
            decisions: Vec::new(),
            raises: 0,
            sends: 0,
            expect: None,
        })
        .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Step> {
        let len = state.decisions.len();
        let answer = prop_oneof![2 => Just(Answer::Yes), 1 => Just(Answer::No), 1 => Just(Answer::Unanswered)];
        let raise = prop_oneof![
            3 => (0..ROLES.len(), 0..ACTIONS.len(), 0..TARGETS.len(), answer.clone())
                .prop_map(|(by, action, target, answer)| Step::Raise { by, action, target, answer }),
            // The one way to a non-within-role send: ops asks the human to message lead.
            1 => answer.prop_map(|answer| Step::Raise { by: OPS, action: SEND, target: TO_LEAD, answer }),
        ];
        // A decision of the model, an unknown one, or none.
        let any_decision = prop_oneof![
            1 => Just(None),
            1 => Just(Some(len)),
            3 => (0..=len).prop_map(Some),
        ];
        let random_authorize = (
            0..ROLES.len(),
            any_decision.clone(),
            0..ACTIONS.len(),
            0..TARGETS.len(),
        )
            .prop_map(|(by, decision, action, target)| Step::Authorize {
                by,
                decision,
                action,
                target,
            });
        // Mostly ask exactly for what a decision is about, so approvals get spent (and spent again).
        let asks: Vec<(usize, usize, usize, usize)> = state
            .decisions
            .iter()
            .enumerate()
            .map(|(i, d)| (i, d.by, d.action, d.target))
            .collect();
        let authorize = if asks.is_empty() {
            random_authorize.boxed()
        } else {
            prop_oneof![
                2 => random_authorize,
                3 => prop::sample::select(asks).prop_map(|(i, by, action, target)| Step::Authorize {
                    by,
                    decision: Some(i),
                    action,
                    target,
                }),
            ]
            .boxed()
        };
        let sends: Vec<usize> = state
            .decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.action == SEND)
            .map(|(i, _)| i)
            .collect();
        let send_decision = if sends.is_empty() {
            any_decision.boxed()
        } else {
            prop_oneof![2 => any_decision, 3 => prop::sample::select(sends).prop_map(Some)].boxed()
        };
        let send = (prop_oneof![Just(DEV), Just(OPS)], send_decision)
            .prop_map(|(by, decision)| Step::Send { by, decision });
        prop_oneof![
            4 => raise,
            4 => authorize,
            2 => send,
            1 => (0..ROLES.len()).prop_map(Step::Rerun),
            1 => prop_oneof![Just(Policy::A), Just(Policy::B)].prop_map(Step::Restart),
        ]
        .boxed()
    }

    fn apply(mut m: Model, step: &Step) -> Model {
        m.expect = match *step {
            Step::Raise {
                by,
                action,
                target,
                answer,
            } => Some(m.raise(by, action, target, answer)),
            Step::Authorize {
                by,
                decision,
                action,
                target,
            } => Some(
                m.authorize(by, decision, action, target)
                    .map(Reply::Authorized),
            ),
            Step::Send { by, decision } => Some(m.send(by, decision)),
            Step::Rerun(role) => {
                m.runs[role] += 1;
                Some(Ok(Reply::Claimed(ClaimReply::Claimed)))
            }
            Step::Restart(policy) => {
                m.policy = policy;
                None
            }
        };
        m
    }
}

struct Sut<S> {
    driver: Option<Driver<S>>,
    now: i64,
    raises: u64,
    sends: u64,
    humans: u64,
    /// The run generation holding each role.
    runs: [u32; 3],
}

impl<S: FreshStore> Sut<S> {
    fn driver(&self) -> &Driver<S> {
        self.driver.as_ref().expect("driver present between steps")
    }

    fn call(&mut self, who: Who, command: Command) -> Result<Reply, Refusal> {
        self.now += 1;
        let caller: Caller = match who {
            Who::Role(r) => caller(ROLES[r], &run(r, self.runs[r])),
            Who::Human => {
                self.humans += 1;
                human(self.humans)
            }
        };
        let now = t(self.now);
        self.driver
            .as_mut()
            .expect("driver present between steps")
            .call(now, &caller, command)
    }

    /// Raises; then the decision's routed resolver answers, unless it is
    /// within-role (closed at raise with `choice`) or left unanswered.
    fn raise(
        &mut self,
        within: bool,
        by: usize,
        action_: usize,
        target_: usize,
        answer: Answer,
    ) -> Result<Reply, Refusal> {
        self.raises += 1;
        let id = decision_id(self.raises);
        let input = RaiseInput {
            fields: RaiseFields {
                action: action(ACTIONS[action_]),
                target: target(target_),
                question: QUESTION.into(),
                options: yes_no(),
                recommendation: "yes".into(),
                blocking: false,
                technical: false,
                project: None,
                task_ref: None,
                requirement_ref: None,
                supersedes: None,
            },
            choice: if within { answer.key().map(key) } else { None },
            approval_choice: None,
        };
        let raise = Command::Raise {
            id,
            input: Box::new(input),
        };
        let reply = self.call(Who::Role(by), raise)?;
        let (Some(choice), false) = (answer.key(), within) else {
            return Ok(reply);
        };
        let Reply::Decision(d) = &reply else {
            panic!("decision.raise answered {reply:?}")
        };
        let resolver = match &d.record.route {
            Route::Human => Who::Human,
            Route::Role(r) => Who::Role(
                ROLES
                    .iter()
                    .position(|n| *n == r.as_str())
                    .expect("a role of acme"),
            ),
        };
        self.call(
            resolver,
            Command::Resolve {
                id,
                choice: key(choice),
                note: None,
            },
        )
    }

    /// The holder releases `role`; the next run claims it.
    fn rerun(&mut self, role: usize) -> Result<Reply, Refusal> {
        let released = self.call(Who::Role(role), Command::Release);
        assert_eq!(released, Ok(Reply::Done), "the holder releases");
        self.runs[role] += 1;
        self.call(Who::Role(role), Command::Claim)
    }

    fn send(&mut self, by: usize, decision: Option<DecisionId>) -> Result<Reply, Refusal> {
        self.sends += 1;
        let input = SendInput {
            to: Recipient::Role(role("lead")),
            class: None,
            body: "hello".into(),
            in_reply_to: None,
            corrects: None,
            decision,
        };
        let send = Command::Send {
            id: message_id(self.sends),
            input: Box::new(input),
            known: Vec::new(),
        };
        self.call(Who::Role(by), send)
    }
}

/// The id the model's decision `idx` has, or an unknown one past the end.
fn id_at(model: &Model, idx: usize) -> DecisionId {
    model.decisions.get(idx).map_or_else(unknown_id, Known::id)
}

struct AuthorizationsTest<S>(std::marker::PhantomData<S>);

impl<S: FreshStore> StateMachineTest for AuthorizationsTest<S> {
    type SystemUnderTest = Sut<S>;
    type Reference = Reference;

    fn init_test(_: &Model) -> Sut<S> {
        let driver = Driver::open(policy_a(), S::fresh()).expect("an empty store opens");
        let mut sut = Sut {
            driver: Some(driver),
            now: 1_000,
            raises: 0,
            sends: 0,
            humans: 0,
            runs: [0; 3],
        };
        for r in 0..ROLES.len() {
            sut.call(Who::Role(r), Command::Claim)
                .expect("a vacant role is claimed");
        }
        sut
    }

    fn apply(mut sut: Sut<S>, model: &Model, step: Step) -> Sut<S> {
        let got = match step {
            Step::Raise {
                by,
                action,
                target,
                answer,
            } => {
                // The harness gives `choice` exactly when the model says within-role;
                // a bus that classes differently refuses and the replies differ.
                let within = model.policy.class(by, action) == Class::Within;
                Some(sut.raise(within, by, action, target, answer))
            }
            Step::Authorize {
                by,
                decision,
                action: a,
                target: tg,
            } => {
                let command = Command::Authorize {
                    action: action(ACTIONS[a]),
                    target: target(tg),
                    decision: decision.map(|i| id_at(model, i)),
                };
                Some(sut.call(Who::Role(by), command))
            }
            Step::Send { by, decision } => Some(sut.send(by, decision.map(|i| id_at(model, i)))),
            Step::Rerun(role) => Some(sut.rerun(role)),
            Step::Restart(policy) => {
                let driver = sut.driver.take().expect("driver present");
                sut.driver = Some(
                    driver
                        .restart(policy.businesses())
                        .expect("the store replays"),
                );
                None
            }
        };
        assert_eq!(got, model.expect, "reply to {step:?}");
        sut
    }

    fn check_invariants(sut: &Sut<S>, model: &Model) {
        let driver = sut.driver();
        let bus = driver.bus();
        assert!(
            !bus.authorizations().is_consumed(&unknown_id()),
            "an unknown decision is never spent"
        );
        let mut consumed: BTreeMap<DecisionId, usize> = BTreeMap::new();
        driver
            .store()
            .replay(&mut |record| {
                if let Evidence::Consumed(c) = &record.evidence {
                    *consumed.entry(c.decision).or_default() += 1;
                }
            })
            .expect("the store replays");
        let spent = model.decisions.iter().filter(|d| d.consumed).count();
        assert_eq!(
            consumed.values().sum::<usize>(),
            spent,
            "one consumption per spent approval, no other"
        );
        for d in &model.decisions {
            let id = d.id();
            assert_eq!(
                bus.authorizations().is_consumed(&id),
                d.consumed,
                "decision {} spent",
                d.n
            );
            let got = bus
                .decisions()
                .get(&id)
                .unwrap_or_else(|| panic!("decision {} is on the bus", d.n));
            assert_eq!(got, &d.decision(), "decision {} as recorded", d.n);
            let trail = driver
                .store()
                .trail(&acme(), &Subject::Decision(id))
                .expect("the trail reads");
            let mut consumptions = 0;
            let mut allowed = 0;
            for record in &trail {
                if let Evidence::Consumed(c) = &record.evidence {
                    consumptions += 1;
                    assert_eq!(
                        c.decision, id,
                        "a consumption on the trail of {} is its own",
                        d.n
                    );
                    assert_eq!(
                        c.agent,
                        agent(ROLES[d.by], &run(d.by, d.run)),
                        "spent by its raiser role and run"
                    );
                    assert_eq!(c.action, action(ACTIONS[d.action]), "spent for its action");
                    assert_eq!(c.target, target(d.target), "spent for its target");
                    assert_eq!(
                        d.approved,
                        Some(true),
                        "spent only when resolved with the approval choice"
                    );
                    assert_eq!(
                        got.status,
                        Status::Resolved(got.record.approval_choice.clone()),
                        "resolved to approve"
                    );
                }
                if let Evidence::Allowed(a) = &record.evidence {
                    allowed += usize::from(a.decision == Some(id));
                }
            }
            assert!(
                consumptions <= 1,
                "decision {} consumed {consumptions} times",
                d.n
            );
            assert_eq!(
                consumptions,
                usize::from(d.consumed),
                "consumptions of decision {}",
                d.n
            );
            assert_eq!(
                allowed,
                usize::from(d.consumed),
                "action.allowed spending decision {}",
                d.n
            );
            assert_eq!(
                consumed.get(&id).copied().unwrap_or(0),
                usize::from(d.consumed),
                "replayed consumptions of {}",
                d.n
            );
        }
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn authorizations_follow_the_reference_model_in_memory(sequential 1..40 => AuthorizationsTest<MemoryStore>);
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn authorizations_follow_the_reference_model_in_sqlite(sequential 1..40 => AuthorizationsTest<TempSqlite>);
}
