//! Decisions against a deliberately dumb reference model.
//!
//! The three roles of `acme`, each held by one run from the start, raise
//! decisions about a small pool of actions, and resolve, acknowledge,
//! withdraw and supersede them, with restarts mixed in. The model knows
//! each action's class from a table written out by hand from the fixture's
//! policy (it never asks `Business::class_of`), routes each class as the
//! decisions machine says it must (within-role, cross-role, gated) and
//! predicts every reply exactly, refusals in the order the checks run.
//!
//! After every step: the bus holds exactly the model's decisions, each with
//! the record fixed at raise (so class and route never change) and the
//! model's status; the store holds exactly one `Raised` record per decision
//! (it was routed once), exactly one `Resolved` record per resolved one and
//! exactly one closing record per withdrawn or superseded one.

use mosaic_domain::bus::{Caller, Command, Reply};
use mosaic_domain::decisions::{Decision, RaiseInput, Status};
use mosaic_domain::evidence::{
    DecisionEvidence, DecisionRecord, Evidence, RaiseFields, Route, Stamped, Subject,
};
use mosaic_domain::{ActionClass, DecisionId, Refusal, Target, TaskRef};
use mosaic_ports::fakes::MemoryStore;
use mosaic_tests::fixture::{
    acme, action, agent, caller, decision_id, human, key, policy_a, t, yes_no, ROLES,
};
use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::{Driver, FreshStore, Restart};
use proptest::prelude::*;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

/// The run holding `ROLES[i]` is `RUNS[i]`, for the whole test.
const RUNS: [&str; 3] = ["l0", "d0", "o0"];
/// `lead` is both arbiters of `acme`.
const LEAD: usize = 0;
const DELIVERY_ARBITER: usize = LEAD;
const TECHNICAL_ARBITER: usize = LEAD;

/// The action pool. `message.send` decisions need a role target.
const ACTIONS: [&str; 6] = [
    "message.send",
    "repo.push",
    "repo.merge",
    "repo.delete",
    "deploy",
    "role.launch",
];
const SEND: usize = 0;

/// The class of an action for a role, in the model's own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Within,
    Cross,
    Gated,
}

use Class::{Cross as C, Gated as G, Within as W};

/// `CLASS[role][action]` under the fixture's policy A, by hand: `lead` sends
/// within role, merges cross-role and is the launch block's `by`; `dev`
/// sends and pushes within role and merges cross-role; `ops` has nothing;
/// `repo.delete` is gated-only and `deploy` is listed nowhere.
const CLASS: [[Class; 6]; 3] = [
    // message.send, repo.push, repo.merge, repo.delete, deploy, role.launch
    [W, G, C, G, G, W], // lead
    [W, W, C, G, G, G], // dev
    [G, G, G, G, G, G], // ops
];

impl Class {
    fn domain(self) -> ActionClass {
        match self {
            Class::Within => ActionClass::WithinRole,
            Class::Cross => ActionClass::CrossRole,
            Class::Gated => ActionClass::Gated,
        }
    }
}

/// An agent role (by index into `ROLES`) or the human: a route or an actor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Role(usize),
    Human,
}

impl Who {
    fn route(self) -> Route {
        match self {
            Who::Role(r) => Route::Role(mosaic_tests::fixture::role(ROLES[r])),
            Who::Human => Route::Human,
        }
    }
}

/// What a resolver picks; `bogus` is not an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    Yes,
    No,
    Bogus,
}

impl Choice {
    fn key(self) -> &'static str {
        match self {
            Choice::Yes => "yes",
            Choice::No => "no",
            Choice::Bogus => "bogus",
        }
    }
}

#[derive(Clone, Debug)]
struct Raise {
    by: usize,
    action: usize,
    technical: bool,
    /// Give `choice: yes` at raise.
    with_choice: bool,
    blocking: bool,
    with_task_ref: bool,
    /// An index into the model's decisions; past the end is an unknown id.
    supersedes: Option<usize>,
}

#[derive(Clone, Debug)]
enum Step {
    Raise(Raise),
    Resolve {
        idx: usize,
        actor: Who,
        choice: Choice,
    },
    Seen {
        idx: usize,
        actor: Who,
    },
    Withdraw {
        idx: usize,
        actor: Who,
    },
    Restart,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ModelStatus {
    Open,
    Resolved(Choice),
    Withdrawn,
    /// By the decision with this number.
    Superseded(u64),
}

/// A decision the bus accepted, as the model sees it.
#[derive(Clone, Debug)]
struct Known {
    /// The id is `decision_id(n)`.
    n: u64,
    by: usize,
    action: usize,
    technical: bool,
    blocking: bool,
    with_task_ref: bool,
    /// The number of the decision it replaced.
    supersedes: Option<u64>,
    class: Class,
    route: Who,
    status: ModelStatus,
}

impl Known {
    fn id(&self) -> DecisionId {
        decision_id(self.n)
    }

    fn resolves(&self, actor: Who) -> bool {
        match actor {
            Who::Human => true,
            Who::Role(r) => self.route == Who::Role(r),
        }
    }

    /// The decision the bus must report.
    fn decision(&self) -> Decision {
        let record = DecisionRecord {
            id: self.id(),
            business: acme(),
            raiser: agent(ROLES[self.by], RUNS[self.by]),
            fields: RaiseFields {
                action: action(ACTIONS[self.action]),
                target: target_of(self.action),
                question: QUESTION.into(),
                options: yes_no(),
                recommendation: "yes".into(),
                blocking: self.blocking,
                technical: self.technical,
                project: None,
                task_ref: task_ref(self.with_task_ref),
                requirement_ref: None,
                supersedes: self.supersedes.map(decision_id),
            },
            approval_choice: key("yes"),
            class: self.class.domain(),
            route: self.route.route(),
            holder: None,
        };
        let status = match self.status {
            ModelStatus::Open => Status::Open,
            ModelStatus::Resolved(c) => Status::Resolved(key(c.key())),
            ModelStatus::Withdrawn => Status::Withdrawn,
            ModelStatus::Superseded(n) => Status::Superseded(decision_id(n)),
        };
        Decision { record, status }
    }
}

const QUESTION: &str = "Go ahead?";

fn target_of(action: usize) -> Option<Target> {
    (action == SEND).then(|| Target::parse("ops").expect("valid target"))
}

fn task_ref(with: bool) -> Option<TaskRef> {
    with.then(|| TaskRef::parse("vikunja:1/2").expect("valid task ref"))
}

/// The id no decision ever has: numbering starts at 1.
fn unknown_id() -> DecisionId {
    decision_id(0)
}

/// The arguments the harness sends for a raise.
fn raise_input(raise: &Raise, supersedes: Option<DecisionId>) -> RaiseInput {
    RaiseInput {
        fields: RaiseFields {
            action: action(ACTIONS[raise.action]),
            target: target_of(raise.action),
            question: QUESTION.into(),
            options: yes_no(),
            recommendation: "yes".into(),
            blocking: raise.blocking,
            technical: raise.technical,
            project: None,
            task_ref: task_ref(raise.with_task_ref),
            requirement_ref: None,
            supersedes,
        },
        choice: raise.with_choice.then(|| key("yes")),
        approval_choice: None,
    }
}

#[derive(Clone, Debug, Default)]
struct Model {
    decisions: Vec<Known>,
    /// Raise attempts so far; attempt `n` uses id `decision_id(n)`.
    raises: u64,
    /// What the last step must have answered.
    expect: Option<Result<Reply, Refusal>>,
}

impl Model {
    fn reply(d: &Known) -> Result<Reply, Refusal> {
        Ok(Reply::Decision(Box::new(d.decision())))
    }

    /// `decision.raise`, checks in the order of `Decisions::handle_raise`.
    fn raise(&mut self, s: &Raise) -> Result<Reply, Refusal> {
        self.raises += 1;
        let n = self.raises;
        if s.blocking && !s.with_task_ref {
            return Err(Refusal::TaskRefRequired);
        }
        let class = CLASS[s.by][s.action];
        let route = match (class, s.with_choice) {
            (Class::Within, true) => Who::Role(s.by),
            (Class::Within, false) => return Err(Refusal::ChoiceRequired),
            (Class::Cross | Class::Gated, true) => return Err(Refusal::BadRequest),
            (Class::Cross, false) => {
                let arbiter = if s.technical {
                    TECHNICAL_ARBITER
                } else {
                    DELIVERY_ARBITER
                };
                if arbiter == s.by {
                    Who::Human
                } else {
                    Who::Role(arbiter)
                }
            }
            (Class::Gated, false) => Who::Human,
        };
        // The only `message.send` target in the pool is the role `ops`, which exists.
        let supersedes = match s.supersedes {
            None => None,
            Some(idx) => {
                let old = self
                    .decisions
                    .get_mut(idx)
                    .ok_or(Refusal::UnknownReference)?;
                if old.by != s.by {
                    return Err(Refusal::NotRaiser);
                }
                if old.status != ModelStatus::Open {
                    return Err(Refusal::DecisionClosed);
                }
                old.status = ModelStatus::Superseded(n);
                Some(old.n)
            }
        };
        let status = if class == Class::Within {
            ModelStatus::Resolved(Choice::Yes)
        } else {
            ModelStatus::Open
        };
        let d = Known {
            n,
            by: s.by,
            action: s.action,
            technical: s.technical,
            blocking: s.blocking,
            with_task_ref: s.with_task_ref,
            supersedes,
            class,
            route,
            status,
        };
        let reply = Self::reply(&d);
        self.decisions.push(d);
        reply
    }

    /// `decision.resolve`, checks in the order of `Decisions::handle_resolve`.
    fn resolve(&mut self, idx: usize, actor: Who, choice: Choice) -> Result<Reply, Refusal> {
        let d = self
            .decisions
            .get_mut(idx)
            .ok_or(Refusal::UnknownReference)?;
        if !d.resolves(actor) {
            return Err(Refusal::NotResolver);
        }
        if d.status != ModelStatus::Open {
            return Err(Refusal::DecisionClosed);
        }
        match choice {
            Choice::Yes | Choice::No => d.status = ModelStatus::Resolved(choice),
            Choice::Bogus => return Err(Refusal::UnknownOption),
        }
        Self::reply(d)
    }

    /// `decision.seen`: only the resolver, whatever the status.
    fn seen(&self, idx: usize, actor: Who) -> Result<Reply, Refusal> {
        let d = self.decisions.get(idx).ok_or(Refusal::UnknownReference)?;
        if !d.resolves(actor) {
            return Err(Refusal::NotResolver);
        }
        Self::reply(d)
    }

    /// `decision.withdraw`: the raising role or the human, while open.
    fn withdraw(&mut self, idx: usize, actor: Who) -> Result<Reply, Refusal> {
        let d = self
            .decisions
            .get_mut(idx)
            .ok_or(Refusal::UnknownReference)?;
        let raiser = match actor {
            Who::Human => true,
            Who::Role(r) => r == d.by,
        };
        if !raiser {
            return Err(Refusal::NotRaiser);
        }
        if d.status != ModelStatus::Open {
            return Err(Refusal::DecisionClosed);
        }
        d.status = ModelStatus::Withdrawn;
        Self::reply(d)
    }
}

struct Reference;

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Step> {
        let roles = 0..ROLES.len();
        // Mostly a decision the model knows, an open one more often than not;
        // one past the end is an unknown id.
        let len = state.decisions.len();
        let open: Vec<usize> = state
            .decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.status == ModelStatus::Open)
            .map(|(i, _)| i)
            .collect();
        let idx: BoxedStrategy<usize> = if len == 0 {
            Just(0).boxed()
        } else if open.is_empty() {
            prop_oneof![1 => Just(len), 4 => 0..len].boxed()
        } else {
            prop_oneof![1 => Just(len), 2 => 0..len, 3 => prop::sample::select(open)].boxed()
        };
        let actor = prop_oneof![3 => roles.clone().prop_map(Who::Role), 2 => Just(Who::Human)];
        let choice =
            prop_oneof![2 => Just(Choice::Yes), 1 => Just(Choice::No), 1 => Just(Choice::Bogus)];
        let raise = (
            roles,
            0..ACTIONS.len(),
            any::<bool>(),
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.25),
            prop::bool::weighted(0.75),
            prop::option::weighted(0.3, idx.clone()),
        )
            .prop_map(
                |(by, action, technical, with_choice, blocking, with_task_ref, supersedes)| {
                    Step::Raise(Raise {
                        by,
                        action,
                        technical,
                        with_choice,
                        blocking,
                        with_task_ref,
                        supersedes,
                    })
                },
            );
        prop_oneof![
            4 => raise,
            3 => (idx.clone(), actor.clone(), choice)
                .prop_map(|(idx, actor, choice)| Step::Resolve { idx, actor, choice }),
            1 => (idx.clone(), actor.clone()).prop_map(|(idx, actor)| Step::Seen { idx, actor }),
            1 => (idx, actor).prop_map(|(idx, actor)| Step::Withdraw { idx, actor }),
            1 => Just(Step::Restart),
        ]
        .boxed()
    }

    fn apply(mut m: Model, step: &Step) -> Model {
        m.expect = match step {
            Step::Raise(raise) => Some(m.raise(raise)),
            Step::Resolve { idx, actor, choice } => Some(m.resolve(*idx, *actor, *choice)),
            Step::Seen { idx, actor } => Some(m.seen(*idx, *actor)),
            Step::Withdraw { idx, actor } => Some(m.withdraw(*idx, *actor)),
            Step::Restart => None,
        };
        m
    }
}

struct Sut<S> {
    driver: Option<Driver<S>>,
    now: i64,
    raises: u64,
    humans: u64,
}

impl<S: FreshStore> Sut<S> {
    fn driver(&self) -> &Driver<S> {
        self.driver.as_ref().expect("driver present between steps")
    }

    fn call(&mut self, who: Who, command: Command) -> Result<Reply, Refusal> {
        self.now += 1;
        let caller: Caller = match who {
            Who::Role(r) => caller(ROLES[r], RUNS[r]),
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
}

/// The id the model's decision `idx` has, or an unknown one past the end.
fn id_at(model: &Model, idx: usize) -> DecisionId {
    model.decisions.get(idx).map_or_else(unknown_id, Known::id)
}

/// How many records of each decision kind name `id` itself.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    raised: usize,
    resolved: usize,
    withdrawn: usize,
    superseded: usize,
}

fn count(records: &[Stamped], id: DecisionId) -> Counts {
    let mut c = Counts::default();
    for record in records {
        let Evidence::Decision(e) = &record.evidence else {
            continue;
        };
        match e {
            DecisionEvidence::Raised(r) => c.raised += usize::from(r.id == id),
            DecisionEvidence::Resolved { id: of, .. } => c.resolved += usize::from(*of == id),
            DecisionEvidence::Withdrawn { id: of, .. } => c.withdrawn += usize::from(*of == id),
            DecisionEvidence::Superseded { id: of, .. } => c.superseded += usize::from(*of == id),
            DecisionEvidence::Seen { .. } => {}
        }
    }
    c
}

struct DecisionsTest<S>(std::marker::PhantomData<S>);

impl<S: FreshStore> StateMachineTest for DecisionsTest<S> {
    type SystemUnderTest = Sut<S>;
    type Reference = Reference;

    fn init_test(_: &Model) -> Sut<S> {
        let driver = Driver::open(policy_a(), S::fresh()).expect("an empty store opens");
        let mut sut = Sut {
            driver: Some(driver),
            now: 1_000,
            raises: 0,
            humans: 0,
        };
        for r in 0..ROLES.len() {
            sut.call(Who::Role(r), Command::Claim)
                .expect("a vacant role is claimed");
        }
        sut
    }

    fn apply(mut sut: Sut<S>, model: &Model, step: Step) -> Sut<S> {
        let got = match &step {
            Step::Raise(raise) => {
                sut.raises += 1;
                let command = Command::Raise {
                    id: decision_id(sut.raises),
                    input: Box::new(raise_input(
                        raise,
                        raise.supersedes.map(|i| id_at(model, i)),
                    )),
                };
                Some(sut.call(Who::Role(raise.by), command))
            }
            Step::Resolve { idx, actor, choice } => {
                let command = Command::Resolve {
                    id: id_at(model, *idx),
                    choice: key(choice.key()),
                    note: None,
                };
                Some(sut.call(*actor, command))
            }
            Step::Seen { idx, actor } => Some(sut.call(
                *actor,
                Command::Seen {
                    id: id_at(model, *idx),
                    note: None,
                },
            )),
            Step::Withdraw { idx, actor } => Some(sut.call(
                *actor,
                Command::Withdraw {
                    id: id_at(model, *idx),
                    note: None,
                },
            )),
            Step::Restart => {
                let driver = sut.driver.take().expect("driver present");
                sut.driver = Some(driver.restart(policy_a()).expect("the store replays"));
                None
            }
        };
        assert_eq!(got, model.expect, "reply to {step:?}");
        sut
    }

    fn check_invariants(sut: &Sut<S>, model: &Model) {
        let driver = sut.driver();
        let decisions = driver.bus().decisions();
        assert_eq!(
            decisions.iter().count(),
            model.decisions.len(),
            "the bus knows exactly the model's decisions"
        );
        let mut all = Vec::new();
        driver
            .store()
            .replay(&mut |record| all.push(record))
            .expect("the store replays");
        let raised = all
            .iter()
            .filter(|r| matches!(&r.evidence, Evidence::Decision(DecisionEvidence::Raised(_))))
            .count();
        assert_eq!(
            raised,
            model.decisions.len(),
            "one raise record per accepted raise, none for refused ones"
        );
        for d in &model.decisions {
            let id = d.id();
            let want = d.decision();
            let got = decisions
                .get(&id)
                .unwrap_or_else(|| panic!("decision {} is on the bus", d.n));
            assert_eq!(
                got.record.class, want.record.class,
                "class of decision {}",
                d.n
            );
            assert_eq!(
                got.record.route, want.record.route,
                "route of decision {}",
                d.n
            );
            assert_eq!(
                got.record, want.record,
                "the record of decision {} never changes",
                d.n
            );
            assert_eq!(got.status, want.status, "status of decision {}", d.n);
            let trail = driver
                .store()
                .trail(&acme(), &Subject::Decision(id))
                .expect("the trail reads");
            let want = Counts {
                raised: 1,
                resolved: usize::from(matches!(d.status, ModelStatus::Resolved(_))),
                withdrawn: usize::from(d.status == ModelStatus::Withdrawn),
                superseded: usize::from(matches!(d.status, ModelStatus::Superseded(_))),
            };
            assert_eq!(
                count(&trail, id),
                want,
                "records of decision {} on its trail",
                d.n
            );
        }
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn decisions_follow_the_reference_model_in_memory(sequential 1..40 => DecisionsTest<MemoryStore>);
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn decisions_follow_the_reference_model_in_sqlite(sequential 1..40 => DecisionsTest<TempSqlite>);
}
