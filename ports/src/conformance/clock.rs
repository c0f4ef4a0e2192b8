//! The [`Clock`] suite.

use mosaic_domain::Timestamp;

use super::{check, check_eq, run_checks, Check};
use crate::clock::Clock;

/// Runs every clock check, each on a fresh clock from `make`.
///
/// A clock may step backwards, so the suite checks what the contract does
/// promise: `now` never panics, always gives a representable instant (one
/// that survives the canonical text form), and can be read from many threads
/// at once.
///
/// [`jumps`] checks, for a clock a test moves, that every jump calls the
/// hooks of [`Clock::on_jump`].
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<C: Clock>(make: impl FnMut() -> C) {
    let checks: Vec<Check<'_, C>> = vec![
        Check::new("now_is_representable", now_is_representable::<C>),
        Check::new("now_many_times", now_many_times::<C>),
        Check::new("now_from_many_threads", now_from_many_threads::<C>),
    ];
    run_checks("clock", checks, make);
}

/// Checks that `t` survives both of `Timestamp`'s checked constructors.
#[track_caller]
fn check_representable(t: Timestamp) {
    check_eq(
        "now through from_unix_ms",
        Timestamp::from_unix_ms(t.unix_ms()),
        Ok(t),
    );
    check_eq(
        "now through its text form",
        Timestamp::parse(&t.to_string()),
        Ok(t),
    );
}

fn now_is_representable<C: Clock>(clock: &mut C) {
    check_representable(clock.now());
}

fn now_many_times<C: Clock>(clock: &mut C) {
    let readings: Vec<Timestamp> = (0..10_000).map(|_| clock.now()).collect();
    readings.into_iter().for_each(check_representable);
}

fn now_from_many_threads<C: Clock>(clock: &mut C) {
    let clock: &C = clock;
    let readings: Vec<Vec<Timestamp>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| (0..1000).map(|_| clock.now()).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    check_eq("threads that read the clock", readings.len(), 4);
    for reading in readings {
        check(
            "every thread read the clock 1000 times without panicking",
            reading.len() == 1000,
        );
        reading.into_iter().for_each(check_representable);
    }
}

/// Checks a clock that a test moves: `jump` moves `clock` (forwards or
/// backwards, however the clock is moved), and every hook registered with
/// [`Clock::on_jump`] is called once after each jump.
///
/// # Panics
/// When a hook is not called, or called more than once for one jump.
pub fn jumps<C: Clock>(clock: &C, mut jump: impl FnMut(&C)) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let calls = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let calls = Arc::clone(&calls);
        clock.on_jump(Box::new(move || {
            calls.fetch_add(1, Ordering::SeqCst);
        }));
    }
    for round in 1..=3 {
        let before = clock.now();
        jump(clock);
        check("the jump moved the clock", clock.now() != before);
        check_eq(
            "hook calls after each jump, two hooks",
            calls.load(Ordering::SeqCst),
            2 * round,
        );
    }
}
