//! [`Calls`]: what each run last asked of the broker, whether it waits on
//! `changes` now, and the furthest cursor its `changes` were answered
//! with, as the broker itself saw it.
//!
//! What the human reads about an agent comes from the broker: the console
//! shows an agent's last verb and whether it waits from this record of the
//! requests the broker served (the `agents` read: `lastVerb`, `lastAt`,
//! `waiting`), not from what the agent prints about itself, which a
//! harness may fake. Kept in memory only, as a broker's own observation,
//! not evidence: a restarted broker knows nothing of the runs' calls
//! before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mosaic_adapters::wire::LastCall;
use mosaic_domain::{RunId, Timestamp};

/// What one run last asked, and how many `changes` waits it has open.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    last: Option<LastCall>,
    waiting: usize,
    seen: Option<u64>,
}

/// Every run's calls, as the connections note them.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    runs: Mutex<HashMap<RunId, Run>>,
}

impl Calls {
    fn runs(&self) -> MutexGuard<'_, HashMap<RunId, Run>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `run` asked `verb` at `at`.
    pub(crate) fn note(&self, run: &RunId, verb: &'static str, at: Timestamp) {
        let mut runs = self.runs();
        runs.entry(run.clone()).or_default().last = Some(LastCall { verb, at });
    }

    /// `run` waits on `changes` until the returned guard is dropped.
    pub(crate) fn waiting(self: &Arc<Self>, run: &RunId) -> Waiting {
        let mut runs = self.runs();
        let entry = runs.entry(run.clone()).or_default();
        entry.waiting = entry.waiting.saturating_add(1);
        Waiting {
            calls: Arc::clone(self),
            run: run.clone(),
        }
    }

    /// `run`'s `changes`, asked with a `since`, were answered with
    /// `cursor`: everything concerning it up to there was handed to it.
    pub(crate) fn saw(&self, run: &RunId, cursor: u64) {
        let mut runs = self.runs();
        let entry = runs.entry(run.clone()).or_default();
        entry.seen = Some(entry.seen.map_or(cursor, |seen| seen.max(cursor)));
    }

    /// The furthest cursor `run`'s `changes` were answered with.
    pub(crate) fn seen(&self, run: &RunId) -> Option<u64> {
        self.runs().get(run).and_then(|r| r.seen)
    }

    /// What `run` last asked, if anything, and whether it waits now.
    pub(crate) fn of(&self, run: &RunId) -> (Option<LastCall>, bool) {
        let runs = self.runs();
        runs.get(run)
            .map_or((None, false), |r| (r.last, r.waiting > 0))
    }
}

/// A `changes` wait of a run, counted while it lasts.
#[derive(Debug)]
pub(crate) struct Waiting {
    calls: Arc<Calls>,
    run: RunId,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(run) = self.calls.runs().get_mut(&self.run) {
            run.waiting = run.waiting.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mosaic_domain::{RunId, Timestamp};

    use super::Calls;

    #[test]
    fn the_last_call_and_the_waits_of_each_run_apart() {
        let calls = Arc::new(Calls::default());
        let (dev, lead) = (
            RunId::parse("dev-1").unwrap(),
            RunId::parse("lead-1").unwrap(),
        );
        assert_eq!(calls.of(&dev), (None, false));
        let at = |ms| Timestamp::from_unix_ms(ms).unwrap();
        calls.note(&dev, "inbox", at(1_000));
        calls.note(&dev, "message.send", at(2_000));
        let (last, waiting) = calls.of(&dev);
        let last = last.expect("a call");
        assert_eq!(
            (last.verb, last.at, waiting),
            ("message.send", at(2_000), false)
        );
        let first = calls.waiting(&dev);
        let second = calls.waiting(&dev);
        assert!(calls.of(&dev).1);
        assert_eq!(calls.of(&lead), (None, false), "another run");
        drop(first);
        assert!(calls.of(&dev).1, "one wait left");
        drop(second);
        assert!(!calls.of(&dev).1);
        assert_eq!(calls.of(&dev).0.map(|l| l.verb), Some("message.send"));
    }

    #[test]
    fn the_cursor_seen_is_the_furthest_answered() {
        let calls = Calls::default();
        let (dev, lead) = (
            RunId::parse("dev-1").unwrap(),
            RunId::parse("lead-1").unwrap(),
        );
        assert_eq!(calls.seen(&dev), None);
        calls.saw(&dev, 7);
        calls.saw(&dev, 12);
        calls.saw(&dev, 9);
        assert_eq!(calls.seen(&dev), Some(12));
        assert_eq!(calls.seen(&lead), None, "another run");
    }
}
