//! Role claims against a deliberately dumb reference model.
//!
//! Six runs, two per role of `acme`, claim, release and revoke each other
//! (a revoke is the whole path: raise a `role.revoke` decision, the human
//! answers, the revoke is spent), with failed commits and restarts mixed in.
//! After every step: one holder per role, exactly the model's; a revoked run
//! never holds that role again, also after a restart rebuilt from evidence.

use std::collections::{BTreeMap, BTreeSet};

use mosaic_domain::bus::{Command, Reply};
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::{Refusal, RunId};
use mosaic_ports::fakes::MemoryStore;
use mosaic_tests::fixture::{
    acme, caller, decision_id, human, key, policy_a, raise, role, t, ROLES,
};
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
    Restart,
}

#[derive(Clone, Debug, Default)]
struct Model {
    holder: BTreeMap<usize, usize>,
    revoked: BTreeSet<usize>,
    /// What the last step must have answered.
    expect: Option<Result<(), Refusal>>,
}

impl Model {
    fn claim(&self, run: usize) -> Result<bool, Refusal> {
        if self.revoked.contains(&run) {
            return Err(Refusal::RunRevoked);
        }
        match self.holder.get(&role_of(run)) {
            Some(&h) if h == run => Ok(false),
            Some(_) => Err(Refusal::RoleHeld),
            None => Ok(true),
        }
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
            1 => run.prop_map(Step::FailedClaim),
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
            Step::Release(run) => Some(if m.holder.get(&role_of(run)) == Some(&run) {
                m.holder.remove(&role_of(run));
                Ok(())
            } else {
                Err(Refusal::NotHolder)
            }),
            Step::Revoke {
                by,
                target,
                approve,
            } => Some(if m.holder.get(&role_of(by)) != Some(&by) {
                Err(Refusal::NotHolder)
            } else if !approve {
                Err(Refusal::NotAuthorized)
            } else if let Some(h) = m.holder.remove(&target) {
                m.revoked.insert(h);
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
            Step::Restart => None,
        };
        m
    }
}

struct Sut<S> {
    driver: Option<Driver<S>>,
    now: i64,
    decisions: u64,
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
        let driver = Driver::open(policy_a(), S::fresh()).expect("an empty store opens");
        Sut {
            driver: Some(driver),
            now: 1_000,
            decisions: 0,
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
            assert!(
                seat.is_revoked(&RunId::parse(RUNS[run]).expect("valid run")),
                "{} stays revoked",
                RUNS[run]
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
