//! Role claims and the ends of runs against a deliberately dumb reference
//! model.
//!
//! Six bound runs, two per role of `acme`, claim, release and revoke each
//! other (a revoke is the whole path: raise a `role.revoke` decision, the
//! human answers, the revoke is spent), and end: by their host, by the
//! human's `run.end`, or by a revoke; with failed commits and restarts
//! mixed in. After every step: one holder per role, exactly the model's;
//! exactly the model's runs have ended, each with its cause; a revoked or
//! ended run never holds a role again and is refused every verb, also
//! after a restart rebuilt from evidence.

use std::collections::{BTreeMap, BTreeSet};

use mosaic_domain::bus::{Command, Reply};
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::evidence::{EndCause, Ending, Harness, LaunchRecord};
use mosaic_domain::{Refusal, RunId};
use mosaic_ports::fakes::MemoryStore;
use mosaic_tests::fixture::{
    acme, caller, decision_id, human, key, policy_a, raise, role, t, ROLES,
};

/// The causes a host may end a run with.
const HOST_CAUSES: [EndCause; 4] = [
    EndCause::Exited,
    EndCause::Failed,
    EndCause::Budget,
    EndCause::ProcessGone,
];
use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::{Driver, FreshStore, Restart};
use proptest::prelude::*;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

/// Run `i` is `RUNS[i]`, working as role `ROLES[i / 2]`.
const RUNS: [&str; 6] = ["l0", "l1", "d0", "d1", "o0", "o1"];

fn role_of(run: usize) -> usize {
    run / 2
}

#[derive(Clone, Debug)]
enum Step {
    Claim(usize),
    Release(usize),
    /// `by` raises a revoke of `target`'s holder; the human approves or not;
    /// `by` then spends it.
    Revoke {
        by: usize,
        target: usize,
        approve: bool,
    },
    /// A claim whose commit fails.
    FailedClaim(usize),
    /// The host ends the run with this cause.
    End(usize, EndCause),
    /// The human ends the run (`run.end`).
    HumanEnd(usize),
    /// The host ends the run and the commit fails.
    FailedEnd(usize),
    Restart,
}

#[derive(Clone, Debug, Default)]
struct Model {
    holder: BTreeMap<usize, usize>,
    revoked: BTreeSet<usize>,
    /// Every run that ended, with its cause.
    ended: BTreeMap<usize, EndCause>,
    /// What the last step must have answered.
    expect: Option<Result<(), Refusal>>,
}

impl Model {
    /// What every verb of an ended run answers.
    fn live(&self, run: usize) -> Result<(), Refusal> {
        match self.ended.get(&run) {
            Some(EndCause::Revoked) => Err(Refusal::RunRevoked),
            Some(_) => Err(Refusal::RunEnded),
            None => Ok(()),
        }
    }

    fn claim(&self, run: usize) -> Result<bool, Refusal> {
        self.live(run)?;
        match self.holder.get(&role_of(run)) {
            Some(&h) if h == run => Ok(false),
            Some(_) => Err(Refusal::RoleHeld),
            None => Ok(true),
        }
    }

    /// The run ends with `cause`, freeing its role if it holds it.
    fn end(&mut self, run: usize, cause: EndCause) -> Result<(), Refusal> {
        if self.ended.contains_key(&run) {
            return Err(Refusal::RunEnded);
        }
        if self.holder.get(&role_of(run)) == Some(&run) {
            self.holder.remove(&role_of(run));
        }
        self.ended.insert(run, cause);
        Ok(())
    }
}

struct Reference;

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(_: &Model) -> BoxedStrategy<Step> {
        let run = 0..RUNS.len();
        prop_oneof![
            4 => run.clone().prop_map(Step::Claim),
            2 => run.clone().prop_map(Step::Release),
            2 => (run.clone(), 0..ROLES.len(), any::<bool>())
                .prop_map(|(by, target, approve)| Step::Revoke { by, target, approve }),
            1 => run.clone().prop_map(Step::FailedClaim),
            1 => (run.clone(), proptest::sample::select(HOST_CAUSES.to_vec()))
                .prop_map(|(run, cause)| Step::End(run, cause)),
            1 => run.clone().prop_map(Step::HumanEnd),
            1 => run.prop_map(Step::FailedEnd),
            1 => Just(Step::Restart),
        ]
        .boxed()
    }

    fn apply(mut m: Model, step: &Step) -> Model {
        m.expect = match *step {
            Step::Claim(run) => Some(m.claim(run).map(|took| {
                if took {
                    m.holder.insert(role_of(run), run);
                }
            })),
            Step::Release(run) => Some(m.live(run).and_then(|()| {
                if m.holder.get(&role_of(run)) == Some(&run) {
                    m.holder.remove(&role_of(run));
                    Ok(())
                } else {
                    Err(Refusal::NotHolder)
                }
            })),
            Step::Revoke {
                by,
                target,
                approve,
            } => Some(if let Err(ended) = m.live(by) {
                Err(ended)
            } else if m.holder.get(&role_of(by)) != Some(&by) {
                Err(Refusal::NotHolder)
            } else if !approve {
                Err(Refusal::NotAuthorized)
            } else if let Some(h) = m.holder.remove(&target) {
                // A revoke also ends the run it revokes.
                m.revoked.insert(h);
                m.ended.insert(h, EndCause::Revoked);
                Ok(())
            } else {
                Err(Refusal::HolderChanged)
            }),
            // Only a claim that records nothing can answer without the store;
            // a refusal is recorded too, so it fails like a success would.
            Step::FailedClaim(run) => Some(match m.claim(run) {
                Ok(false) => Ok(()),
                Ok(true) | Err(_) => Err(Refusal::StorageUnavailable),
            }),
            Step::End(run, cause) => Some(m.end(run, cause)),
            Step::HumanEnd(run) => Some(m.end(run, EndCause::Human)),
            // A refused end records nothing, so it needs no commit.
            Step::FailedEnd(run) => Some(if m.ended.contains_key(&run) {
                Err(Refusal::RunEnded)
            } else {
                Err(Refusal::StorageUnavailable)
            }),
            Step::Restart => None,
        };
        m
    }
}

struct Sut<S> {
    driver: Option<Driver<S>>,
    now: i64,
    decisions: u64,
    inputs: u64,
}

fn run_id(run: usize) -> RunId {
    RunId::parse(RUNS[run]).expect("valid run")
}

impl<S: FreshStore> Sut<S> {
    fn driver(&mut self) -> &mut Driver<S> {
        self.driver.as_mut().expect("driver present between steps")
    }

    fn call(&mut self, run: usize, command: Command) -> Result<Reply, Refusal> {
        self.now += 1;
        let now = t(self.now);
        self.driver()
            .call(now, &caller(ROLES[role_of(run)], RUNS[run]), command)
    }

    /// The host ends `run`.
    fn end(&mut self, run: usize, cause: EndCause) -> Result<(), Refusal> {
        self.now += 1;
        let now = t(self.now);
        let ending = Ending::new(cause, None, None).expect("a cause alone is a valid ending");
        self.driver().end(now, &run_id(run), ending)
    }

    /// The human ends `run`.
    fn human_end(&mut self, run: usize) -> Result<(), Refusal> {
        self.now += 1;
        self.inputs += 1;
        let (now, human) = (t(self.now), human(1_000 + self.inputs));
        let end = Command::EndRun { run: run_id(run) };
        self.driver().call(now, &human, end).map(|_| ())
    }

    fn revoke(&mut self, by: usize, target: usize, approve: bool) -> Result<(), Refusal> {
        self.decisions += 1;
        let id = decision_id(self.decisions);
        self.call(
            by,
            raise(self.decisions, "role.revoke", Some(ROLES[target])),
        )?;
        self.now += 1;
        let (now, answer) = (t(self.now), key(if approve { "yes" } else { "no" }));
        let resolve = Command::Resolve {
            id,
            choice: answer,
            note: None,
        };
        let human = human(self.decisions);
        self.driver()
            .call(now, &human, resolve)
            .expect("the human resolves");
        let spend = Command::Revoke {
            role: role(ROLES[target]),
            decision: id,
        };
        self.call(by, spend.clone())?;
        if approve && by / 2 != target {
            assert_eq!(
                self.call(by, spend),
                Err(Refusal::DecisionConsumed),
                "an approval is spent once"
            );
        }
        Ok(())
    }
}

struct ClaimsTest<S>(std::marker::PhantomData<S>);

impl<S: FreshStore> StateMachineTest for ClaimsTest<S> {
    type SystemUnderTest = Sut<S>;
    type Reference = Reference;

    fn init_test(_: &Model) -> Sut<S> {
        let mut driver = Driver::open(policy_a(), S::fresh()).expect("an empty store opens");
        // Every run is bound, so the host and the human can end it.
        for (i, run) in RUNS.iter().enumerate() {
            let record = LaunchRecord {
                business: acme(),
                role: role(ROLES[role_of(i)]),
                run: RunId::parse(run).expect("valid run"),
                harness: Harness::Pi,
                address: None,
                pid: 100 + u32::try_from(i).expect("six runs"),
                start_time: 7,
            };
            driver.bind(t(500), record).expect("a run binds");
        }
        Sut {
            driver: Some(driver),
            now: 1_000,
            decisions: 0,
            inputs: 0,
        }
    }

    fn apply(mut sut: Sut<S>, model: &Model, step: Step) -> Sut<S> {
        let got = match step {
            Step::Claim(run) => Some(sut.call(run, Command::Claim).map(|_| ())),
            Step::Release(run) => Some(sut.call(run, Command::Release).map(|_| ())),
            Step::Revoke {
                by,
                target,
                approve,
            } => Some(sut.revoke(by, target, approve)),
            Step::FailedClaim(run) => {
                sut.driver().store_mut().set_unavailable(true);
                let got = sut.call(run, Command::Claim);
                sut.driver().store_mut().set_unavailable(false);
                if let Ok(reply) = &got {
                    assert_eq!(
                        reply,
                        &Reply::Claimed(ClaimReply::AlreadyHeld),
                        "only a no-op claim needs no commit"
                    );
                }
                Some(got.map(|_| ()))
            }
            Step::End(run, cause) => Some(sut.end(run, cause)),
            Step::HumanEnd(run) => Some(sut.human_end(run)),
            Step::FailedEnd(run) => {
                sut.driver().store_mut().set_unavailable(true);
                let got = sut.end(run, EndCause::Failed);
                sut.driver().store_mut().set_unavailable(false);
                Some(got)
            }
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
        let bus = sut.driver.as_ref().expect("driver present").bus();
        for (r, name) in ROLES.iter().enumerate() {
            let holder = bus.claims().holder(&acme(), &role(name)).map(RunId::as_str);
            assert_eq!(
                holder,
                model.holder.get(&r).map(|&run| RUNS[run]),
                "holder of {name}"
            );
        }
        for &run in &model.revoked {
            let seat = bus
                .claims()
                .seat(&acme(), &role(ROLES[role_of(run)]))
                .expect("a revoked run had a seat");
            assert!(seat.is_revoked(&run_id(run)), "{} stays revoked", RUNS[run]);
        }
        for (i, name) in RUNS.iter().enumerate() {
            let ended = bus.claims().ended(&run_id(i));
            assert_eq!(
                ended.map(|e| e.ending().cause()),
                model.ended.get(&i).copied(),
                "how {name} ended"
            );
            assert!(
                ended.is_none_or(|e| e.at().is_some()),
                "{name}'s end has its time"
            );
            assert_eq!(
                bus.claims().check_live(&run_id(i)),
                model.live(i),
                "what {name} is answered"
            );
        }
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn claims_follow_the_reference_model_in_memory(sequential 1..40 => ClaimsTest<MemoryStore>);
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn claims_follow_the_reference_model_in_sqlite(sequential 1..40 => ClaimsTest<TempSqlite>);
}
