//! The life machine over made-up times: the examples of each rule, then
//! the rules over generated sequences of exits, ends, usage and time.

use std::time::{Duration, Instant};

use mosaic_domain::evidence::{EndCause, Ending};
use proptest::prelude::*;

use super::{backoff, Effect, Exit, Life, Limit, Phase, Spent, Why, FIRST_BACKOFF};
use crate::commands::team::{Budget, Idle, LifeSpec, Restart, RestartLimit};

fn spec(restart: Restart, count: u32, within_s: u64) -> LifeSpec {
    LifeSpec {
        restart,
        limit: RestartLimit {
            count,
            within: Duration::from_secs(within_s),
        },
        budget: Budget::default(),
        stop_grace: Duration::from_secs(10),
        idle: Idle::Exit,
    }
}

fn effects(life: &mut Life) -> Vec<Effect> {
    std::iter::from_fn(|| life.poll_effect()).collect()
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn the_backoff_doubles_from_one_second_to_a_minute() {
    let waits: Vec<u64> = (0..9).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert_eq!(backoff(usize::MAX), s(60));
}

#[test]
fn a_failed_program_starts_again_in_its_sandbox_until_the_limit_ends_the_run() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 2, 600), true);
    life.handle_launched(t0);
    assert!(life.live());
    assert_eq!(life.next_deadline(), None);
    // The first failure: back in 1 s, in the same run.
    life.handle_program_exit(t0 + s(5), Exit::Status(3));
    assert_eq!(effects(&mut life), []);
    assert_eq!(life.next_deadline(), Some(t0 + s(6)));
    life.handle_tick(t0 + s(5) + Duration::from_millis(999));
    assert_eq!(effects(&mut life), [], "not before its backoff");
    life.handle_tick(t0 + s(6));
    assert_eq!(effects(&mut life), [Effect::Restart]);
    assert_eq!(life.phase(), Phase::Running { launched: t0 });
    // The second: 2 s, a signal counts as a failure.
    life.handle_program_exit(t0 + s(7), Exit::Signal(9));
    assert_eq!(life.next_deadline(), Some(t0 + s(9)));
    life.handle_tick(t0 + s(9));
    assert_eq!(effects(&mut life), [Effect::Restart]);
    // The third, within the window: the limit ends the run, failed.
    life.handle_program_exit(t0 + s(10), Exit::Status(1));
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(Ending::of_exit(Some(1), None).unwrap(), Why::RestartLimit),
            Effect::Kill
        ]
    );
    assert!(!life.live());
    life.handle_gone(t0 + s(10), Exit::Signal(9));
    assert!(life.down());
    assert_eq!(effects(&mut life), [], "ended once");
}

#[test]
fn restarts_older_than_the_window_no_longer_count() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 1, 60), true);
    life.handle_launched(t0);
    life.handle_program_exit(t0, Exit::Status(1));
    life.handle_tick(t0 + s(1));
    assert_eq!(effects(&mut life), [Effect::Restart]);
    // A minute after the first restart, the window is empty again: 1 s.
    life.handle_program_exit(t0 + s(60), Exit::Status(1));
    assert_eq!(life.next_deadline(), Some(t0 + s(61)));
}

#[test]
fn a_clean_exit_ends_the_run_unless_restart_is_always() {
    let t0 = Instant::now();
    for (restart, ended) in [
        (Restart::No, true),
        (Restart::OnFailure, true),
        (Restart::Always, false),
    ] {
        let mut life = Life::new(spec(restart, 5, 600), true);
        life.handle_launched(t0);
        life.handle_program_exit(t0 + s(1), Exit::Status(0));
        let expected = if ended {
            vec![
                Effect::End(Ending::of_exit(Some(0), None).unwrap(), Why::Exited),
                Effect::Kill,
            ]
        } else {
            vec![]
        };
        assert_eq!(effects(&mut life), expected, "{restart:?}");
    }
    // `no` ends a failed run too, with its status.
    let mut life = Life::new(spec(Restart::No, 5, 600), true);
    life.handle_launched(t0);
    life.handle_program_exit(t0, Exit::Status(3));
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(Ending::of_exit(Some(3), None).unwrap(), Why::Exited),
            Effect::Kill
        ]
    );
    // `always` past its limit after a clean exit: failed, no status.
    let mut life = Life::new(spec(Restart::Always, 0, 600), true);
    life.handle_launched(t0);
    life.handle_program_exit(t0, Exit::Status(0));
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(Ending::of_cause(EndCause::Failed), Why::RestartLimit),
            Effect::Kill
        ]
    );
}

#[test]
fn an_unsandboxed_run_ends_with_its_process_and_restarts_as_a_new_run() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 5, 600), false);
    life.handle_launched(t0);
    life.handle_gone(t0 + s(2), Exit::Status(3));
    assert_eq!(
        effects(&mut life),
        [Effect::End(
            Ending::of_exit(Some(3), None).unwrap(),
            Why::Exited
        )]
    );
    assert_eq!(life.phase(), Phase::Relaunching { at: t0 + s(3) });
    life.handle_tick(t0 + s(3));
    assert_eq!(effects(&mut life), [Effect::Launch]);
    life.handle_launched(t0 + s(3));
    assert!(life.live());
    // A clean exit ends it for good.
    life.handle_gone(t0 + s(4), Exit::Status(0));
    assert_eq!(
        effects(&mut life),
        [Effect::End(
            Ending::of_exit(Some(0), None).unwrap(),
            Why::Exited
        )]
    );
    assert!(life.down());
}

#[test]
fn a_sandbox_killed_from_outside_ends_its_run_and_a_new_one_follows() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 5, 600), true);
    life.handle_launched(t0);
    life.handle_gone(t0, Exit::Signal(9));
    assert_eq!(
        effects(&mut life),
        [Effect::End(
            Ending::of_exit(None, Some(9)).unwrap(),
            Why::SandboxGone
        )]
    );
    assert_eq!(life.phase(), Phase::Relaunching { at: t0 + s(1) });
    // With `no`, it is down.
    let mut life = Life::new(spec(Restart::No, 5, 600), true);
    life.handle_launched(t0);
    life.handle_gone(t0, Exit::Signal(9));
    assert!(life.down());
}

#[test]
fn an_end_made_elsewhere_stops_the_program_then_kills_the_sandbox_after_the_grace() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::Always, 5, 600), true);
    life.handle_launched(t0);
    life.handle_ended(t0 + s(1));
    assert_eq!(effects(&mut life), [Effect::Term], "no second end");
    assert_eq!(life.next_deadline(), Some(t0 + s(11)));
    life.handle_tick(t0 + s(10));
    assert_eq!(effects(&mut life), []);
    life.handle_tick(t0 + s(11));
    assert_eq!(effects(&mut life), [Effect::Kill]);
    life.handle_gone(t0 + s(11), Exit::Signal(9));
    assert!(life.down(), "never started again after the human's end");
    // A program that obeys SIGTERM: the sandbox goes at once.
    let mut life = Life::new(spec(Restart::Always, 5, 600), true);
    life.handle_launched(t0);
    life.handle_ended(t0);
    life.handle_program_exit(t0 + s(1), Exit::Signal(15));
    assert_eq!(effects(&mut life), [Effect::Term, Effect::Kill]);
    assert_eq!(life.phase(), Phase::Closing);
    // Between two starts there is no program: the sandbox goes at once.
    let mut life = Life::new(spec(Restart::Always, 5, 600), true);
    life.handle_launched(t0);
    life.handle_program_exit(t0, Exit::Status(0));
    life.handle_ended(t0);
    assert_eq!(effects(&mut life), [Effect::Kill]);
}

#[test]
fn each_budget_limit_ends_the_run_with_budget_and_stops_it() {
    let t0 = Instant::now();
    let budget = Budget {
        turns: Some(3),
        tokens: Some(1000),
        cost_micro_usd: Some(500_000),
        wall: Some(s(3)),
    };
    let spent = |turns, tokens, cost_usd| Spent {
        turns,
        tokens,
        cost_usd,
    };
    for (usage, limit) in [
        (spent(3, 0, 0.0), Limit::Turns),
        (spent(0, 1000, 0.0), Limit::Tokens),
        (spent(0, 0, 0.5), Limit::Cost),
    ] {
        let mut life = Life::new(
            crate::commands::team::LifeSpec {
                budget,
                ..spec(Restart::OnFailure, 5, 600)
            },
            true,
        );
        life.handle_launched(t0);
        life.handle_usage(t0, spent(2, 999, 0.499));
        assert_eq!(effects(&mut life), [], "below every limit");
        life.handle_usage(t0 + s(1), usage);
        assert_eq!(
            effects(&mut life),
            [
                Effect::End(Ending::of_cause(EndCause::Budget), Why::Budget(limit)),
                Effect::Term
            ]
        );
        assert_eq!(life.next_deadline(), Some(t0 + s(11)));
    }
    let mut life = Life::new(
        LifeSpec {
            budget,
            ..spec(Restart::OnFailure, 5, 600)
        },
        true,
    );
    life.handle_launched(t0);
    assert_eq!(life.next_deadline(), Some(t0 + s(3)));
    // Counted over the run's life, restarts included.
    life.handle_program_exit(t0 + s(2), Exit::Status(1));
    assert_eq!(life.next_deadline(), Some(t0 + s(3)));
    life.handle_tick(t0 + s(3));
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(Ending::of_cause(EndCause::Budget), Why::Budget(Limit::Wall)),
            Effect::Kill
        ]
    );
}

#[test]
fn a_run_whose_state_reached_its_cap_ends_for_its_budget_once_and_only_while_live() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::Always, 5, 600), true);
    // Before its launch, nothing.
    life.handle_state_full(t0);
    assert_eq!(effects(&mut life), []);
    life.handle_launched(t0);
    life.handle_state_full(t0 + s(1));
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(
                Ending::of_cause(EndCause::Budget),
                Why::Budget(Limit::State)
            ),
            Effect::Term
        ]
    );
    assert_eq!(Limit::State.key(), "stateMiB");
    // Ended: told again, it asks nothing more.
    life.handle_state_full(t0 + s(2));
    assert_eq!(effects(&mut life), []);
}

#[test]
fn the_human_starts_an_agent_that_is_down_and_nothing_else() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::No, 5, 600), true);
    assert!(life.handle_start());
    assert_eq!(effects(&mut life), [Effect::Launch]);
    life.handle_launched(t0);
    assert!(!life.handle_start(), "a live run is not started twice");
    assert_eq!(effects(&mut life), []);
    life.handle_launch_failed();
    assert!(life.down());
}

#[test]
fn shutting_down_ends_the_live_run_once_and_plans_nothing() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::Always, 5, 600), false);
    life.handle_launched(t0);
    life.handle_shutdown(t0);
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(Ending::of_cause(EndCause::Exited), Why::Stopped),
            Effect::Term
        ]
    );
    life.handle_gone(t0, Exit::Signal(15));
    assert!(life.down());
    assert_eq!(effects(&mut life), []);
}

/// What happens to an agent, for the generated sequences.
#[derive(Debug, Clone)]
enum Step {
    /// Its program exits so (sandboxed) or its process does.
    Exit(Exit),
    /// Its sandbox is gone.
    Gone(Exit),
    /// Someone else ended the run.
    Ended,
    /// Its harness reports this many turns.
    Turns(u64),
    /// Time passes to the next deadline, or by this many ms.
    Wait(Option<u64>),
    /// The human starts it again.
    Start,
    /// Work arrives for its run.
    Work,
}

fn exit() -> impl Strategy<Value = Exit> {
    prop_oneof![
        (0..4i32).prop_map(Exit::Status),
        prop_oneof![Just(9), Just(15)].prop_map(Exit::Signal),
        Just(Exit::Unknown),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => exit().prop_map(Step::Exit),
        1 => exit().prop_map(Step::Gone),
        1 => Just(Step::Ended),
        1 => (0..8u64).prop_map(Step::Turns),
        4 => proptest::option::of(0..90_000u64).prop_map(Step::Wait),
        1 => Just(Step::Start),
        2 => Just(Step::Work),
    ]
}

fn restart() -> impl Strategy<Value = Restart> {
    prop_oneof![
        Just(Restart::No),
        Just(Restart::OnFailure),
        Just(Restart::Always)
    ]
}

proptest! {
    /// Over any sequence: a run ends at most once; the exits that led to
    /// an automatic start again (in place or as a new run) are never more
    /// than the limit's count in any window; each such start waits at
    /// least the first backoff after its exit; nothing starts again by
    /// itself after an end the agent did not make, until the human starts
    /// it; a down agent wants no waking; a run sleeps only after its
    /// program exited 0, and wakes only for work while asleep.
    #[test]
    fn the_rules_hold_over_any_sequence(
        steps in proptest::collection::vec(step(), 1..60),
        restart in restart(),
        count in 0u32..6,
        within_s in 1u64..300,
        sandboxed in any::<bool>(),
        turns in proptest::option::of(1u64..6),
        sleeps in any::<bool>(),
    ) {
        let t0 = Instant::now();
        let within = s(within_s);
        let mut life = Life::new(
            LifeSpec {
                budget: Budget { turns, ..Budget::default() },
                ..spec(restart, count, within_s)
            },
            sandboxed,
        )
        .sleeping_when_idle(sleeps);
        let mut now = t0;
        life.handle_launched(now);
        let mut ends_this_run = 0u32;
        let mut last_exit_status: Option<Exit> = None;
        // The exit each automatic start followed.
        let mut restart_exits: Vec<Instant> = Vec::new();
        let mut last_exit: Option<Instant> = None;
        let mut stopped_by_others = false;
        for step in steps {
            let mut by_human = false;
            let mut woken = false;
            match step {
                Step::Exit(exit) if sandboxed => {
                    if matches!(life.phase(), Phase::Running { .. }) {
                        last_exit = Some(now);
                        last_exit_status = Some(exit);
                    }
                    life.handle_program_exit(now, exit);
                }
                Step::Exit(exit) | Step::Gone(exit) => {
                    if life.live() {
                        last_exit = Some(now);
                    }
                    life.handle_gone(now, exit);
                }
                Step::Ended => {
                    if life.live() {
                        stopped_by_others = true;
                    }
                    life.handle_ended(now);
                }
                Step::Turns(n) => life.handle_usage(now, Spent { turns: n, ..Spent::default() }),
                Step::Wait(ms) => {
                    now = match (ms, life.next_deadline()) {
                        (None, Some(at)) => at.max(now),
                        (Some(ms), _) => now + Duration::from_millis(ms),
                        (None, None) => now + Duration::from_millis(1),
                    };
                    life.handle_tick(now);
                }
                Step::Work => {
                    let asleep = matches!(life.phase(), Phase::Sleeping { .. });
                    woken = life.handle_work();
                    prop_assert_eq!(woken, asleep);
                }
                Step::Start => {
                    by_human = life.handle_start();
                    if by_human {
                        stopped_by_others = false;
                        restart_exits.clear();
                    }
                }
            }
            while let Some(effect) = life.poll_effect() {
                match effect {
                    Effect::End(ending, why) => {
                        ends_this_run += 1;
                        prop_assert_eq!(ends_this_run, 1, "one end per run");
                        match why {
                            Why::RestartLimit => prop_assert_eq!(ending.cause(), EndCause::Failed),
                            Why::Budget(_) => prop_assert_eq!(ending.cause(), EndCause::Budget),
                            Why::Exited | Why::SandboxGone | Why::Stopped => {}
                        }
                    }
                    Effect::Restart | Effect::Launch if by_human => {
                        prop_assert_eq!(effect, Effect::Launch);
                        ends_this_run = 0;
                        life.handle_launched(now);
                    }
                    Effect::Restart | Effect::Launch => {
                        prop_assert!(!stopped_by_others, "started again after an end made elsewhere");
                        let exit = last_exit.expect("a start again follows an exit");
                        prop_assert!(now >= exit + FIRST_BACKOFF);
                        restart_exits.push(exit);
                        let recent = restart_exits
                            .iter()
                            .filter(|&&at| exit.saturating_duration_since(at) < within)
                            .count();
                        prop_assert!(recent <= count as usize, "{} restarts within {:?}", recent, within);
                        if effect == Effect::Launch {
                            ends_this_run = 0;
                            life.handle_launched(now);
                        }
                    }
                    Effect::Sleep => {
                        prop_assert!(sleeps && sandboxed, "only a harness run that may sleep");
                        prop_assert_eq!(last_exit_status, Some(Exit::Status(0)));
                        prop_assert_eq!(ends_this_run, 0, "a sleeping run lives");
                        prop_assert!(life.live());
                    }
                    Effect::Wake => prop_assert!(woken, "woken only by work"),
                    Effect::Term | Effect::Kill => {}
                }
            }
            if life.down() {
                prop_assert_eq!(life.next_deadline(), None);
            }
        }
    }
}

#[test]
fn an_idle_harness_run_sleeps_until_work_wakes_it_and_counts_no_restart() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 0, 600), true).sleeping_when_idle(true);
    life.handle_launched(t0);
    assert!(
        !life.handle_work(),
        "a running program hears of work itself"
    );
    life.handle_program_exit(t0 + s(5), Exit::Status(0));
    assert_eq!(effects(&mut life), [Effect::Sleep]);
    assert_eq!(life.phase(), Phase::Sleeping { launched: t0 });
    assert!(life.live());
    assert_eq!(life.next_deadline(), None, "asleep until work arrives");
    // Twenty sleeps and wakes, with a restart limit of none: no wake is
    // a restart.
    for n in 0..20 {
        assert!(life.handle_work());
        assert_eq!(effects(&mut life), [Effect::Wake]);
        assert_eq!(life.phase(), Phase::Running { launched: t0 });
        life.handle_program_exit(t0 + s(10 + n), Exit::Status(0));
        assert_eq!(effects(&mut life), [Effect::Sleep]);
    }
    // Ended by someone else while asleep: no program to stop, the sandbox
    // goes at once, and later work wakes nothing.
    life.handle_ended(t0 + s(40));
    assert_eq!(effects(&mut life), [Effect::Kill]);
    assert!(!life.handle_work());
    assert_eq!(effects(&mut life), []);
}

#[test]
fn a_failure_restarts_and_an_unsandboxed_or_waiting_run_never_sleeps() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 5, 600), true).sleeping_when_idle(true);
    life.handle_launched(t0);
    life.handle_program_exit(t0, Exit::Status(2));
    assert_eq!(
        life.phase(),
        Phase::Restarting {
            launched: t0,
            at: t0 + s(1)
        }
    );
    for sandboxed in [false, true] {
        let mut life =
            Life::new(spec(Restart::OnFailure, 5, 600), sandboxed).sleeping_when_idle(!sandboxed);
        life.handle_launched(t0);
        if sandboxed {
            life.handle_program_exit(t0, Exit::Status(0));
        } else {
            life.handle_gone(t0, Exit::Status(0));
        }
        assert!(
            !effects(&mut life).contains(&Effect::Sleep),
            "sandboxed {sandboxed}"
        );
        assert!(!life.live());
    }
}

#[test]
fn a_sleeping_run_that_released_its_role_ends_as_its_program_did() {
    let t0 = Instant::now();
    let mut life = Life::new(spec(Restart::OnFailure, 5, 600), true).sleeping_when_idle(true);
    life.handle_launched(t0);
    life.handle_done();
    assert_eq!(effects(&mut life), [], "a running program is not done");
    life.handle_program_exit(t0 + s(1), Exit::Status(0));
    assert_eq!(effects(&mut life), [Effect::Sleep]);
    life.handle_done();
    assert_eq!(
        effects(&mut life),
        [
            Effect::End(Exit::Status(0).ending(), Why::Exited),
            Effect::Kill
        ]
    );
    assert!(!life.live());
    life.handle_gone(t0 + s(2), Exit::Signal(9));
    assert!(life.down());
}

#[test]
fn a_sleeping_run_still_ends_at_its_wall_budget() {
    let t0 = Instant::now();
    let mut life = Life::new(
        LifeSpec {
            budget: Budget {
                wall: Some(s(30)),
                ..Budget::default()
            },
            ..spec(Restart::OnFailure, 5, 600)
        },
        true,
    )
    .sleeping_when_idle(true);
    life.handle_launched(t0);
    life.handle_program_exit(t0 + s(1), Exit::Status(0));
    assert_eq!(effects(&mut life), [Effect::Sleep]);
    assert_eq!(life.next_deadline(), Some(t0 + s(30)));
    life.handle_tick(t0 + s(30));
    let ended = effects(&mut life);
    assert!(
        matches!(
            ended.as_slice(),
            [Effect::End(_, Why::Budget(Limit::Wall)), Effect::Kill]
        ),
        "{ended:?}"
    );
}
