//! Refusal evidence, bounded without losing it.
//!
//! Every refusal the broker records is kept, but not every one as a row
//! of its own. Refusals are grouped by what they say ([`RefusalRecord`]:
//! business, agent, verb and code) and by a window of [`WINDOW`] that the
//! first of them opens. In a window, the first refusals ([`rows_per_window`]:
//! one of nobody, [`CALLER_ROWS_PER_WINDOW`] of a known caller) are each
//! written as a row, as before, in the batch that answers them. Every
//! later one is counted, answered with its batch, and the window's count
//! is written as one `refusals.counted` record once the window is over
//! ([`RefusalWindows::close`]), or at shutdown
//! ([`RefusalWindows::close_all`]).
//!
//! So a flood costs at most a few rows per second and kind of refusal
//! (two of nobody, eleven of a known caller), whatever its rate, and what
//! a crash can lose is the counts of the windows still open (at most a
//! window's worth, past its first rows); never the first rows, which are
//! durable before their answers go out. The runtime counts every refusal
//! it records this way: of nobody (a failed human proof: no caller is
//! known) and of a known caller (an agent, a reader or the human, per
//! business, run, verb and code); see `app/src/runtime/driver.rs`.
//!
//! A count belongs to the batch that counted it until that batch commits
//! ([`RefusalWindows::committed`]); a batch that fails forgets its counts
//! (its callers were answered `storage-unavailable`) and closes every open
//! window, so the next refusal of each is written as a row again, and finds
//! out whether the store can take it.

use std::collections::HashMap;
use std::time::Duration;

use crate::evidence::{RefusalCount, RefusalRecord};
use crate::Timestamp;

/// How long a window of refusal counts lasts, from its first refusal.
pub const WINDOW: Duration = Duration::from_secs(1);

/// How many refusals of nobody of a kind, in one window, are written as
/// rows of their own.
pub const NOBODY_ROWS_PER_WINDOW: u32 = 1;

/// How many refusals of a known caller of a kind (the same business, run,
/// verb and code), in one window, are written as rows of their own: a
/// caller refused now and then keeps a row for each refusal.
pub const CALLER_ROWS_PER_WINDOW: u32 = 10;

/// How many refusals like `record`, in one window, are written as rows of
/// their own: [`NOBODY_ROWS_PER_WINDOW`] when no caller is known (no
/// business), else [`CALLER_ROWS_PER_WINDOW`].
pub fn rows_per_window(record: &RefusalRecord) -> u32 {
    if record.business.is_none() {
        NOBODY_ROWS_PER_WINDOW
    } else {
        CALLER_ROWS_PER_WINDOW
    }
}

/// What becomes of one refusal: a row of its own, or one more of its
/// window's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// Written as its own row.
    Row,
    /// Counted; the count is written when the window closes.
    Counted,
}

/// One open window.
#[derive(Debug, Clone, Copy)]
struct Window {
    since: Timestamp,
    rows: u32,
    /// Counted by committed batches.
    counted: u64,
    /// Counted by the open batch.
    staged: u64,
}

/// The open windows, one per kind of refusal, and the counts of closed
/// windows not yet written.
#[derive(Debug, Default)]
pub struct RefusalWindows {
    open: HashMap<RefusalRecord, Window>,
    ended: Vec<RefusalCount>,
}

impl RefusalWindows {
    /// Whether `record`, refused at `now`, is written as a row or counted.
    /// A window that is over is closed first (its count kept to write).
    pub fn tally(&mut self, now: Timestamp, record: &RefusalRecord) -> Tally {
        let window = self.window(now, record);
        if window.rows < rows_per_window(record) {
            window.rows += 1;
            Tally::Row
        } else {
            window.staged += 1;
            Tally::Counted
        }
    }

    /// Counts `record`, refused at `now`, in its window without a row of
    /// its own, whatever the window's rows: for a broker that writes no
    /// refusal rows for now (its disk is full, and what room is left is
    /// the human's). A window that is over is closed first.
    pub fn count(&mut self, now: Timestamp, record: &RefusalRecord) {
        let window = self.window(now, record);
        window.staged += 1;
    }

    /// The open window of `record` at `now`, a new one when there was none
    /// or the last is over (then closed first, its count kept to write).
    fn window(&mut self, now: Timestamp, record: &RefusalRecord) -> &mut Window {
        if let Some(window) = self.open.get(record) {
            if over(window, now) {
                let window = *window;
                self.open.remove(record);
                self.end(record.clone(), window);
            }
        }
        self.open.entry(record.clone()).or_insert(Window {
            since: now,
            rows: 0,
            counted: 0,
            staged: 0,
        })
    }

    /// The open batch committed (`true`): its counts are kept. It failed
    /// (`false`): its counts are forgotten, and every open window closes,
    /// its committed count kept to write, so the next refusal of each kind
    /// is written as a row again.
    pub fn committed(&mut self, durable: bool) {
        if durable {
            for window in self.open.values_mut() {
                window.counted += std::mem::take(&mut window.staged);
            }
            return;
        }
        let open = std::mem::take(&mut self.open);
        for (record, mut window) in open {
            window.staged = 0;
            self.end(record, window);
        }
    }

    /// The counts to write at `now`: of every window that is over, and of
    /// those closed before. Call it between batches (no count of the open
    /// batch is taken).
    pub fn close(&mut self, now: Timestamp) -> Vec<RefusalCount> {
        let over: Vec<RefusalRecord> = self
            .open
            .iter()
            .filter(|(_, window)| window.staged == 0 && over(window, now))
            .map(|(record, _)| record.clone())
            .collect();
        for record in over {
            if let Some(window) = self.open.remove(&record) {
                self.end(record, window);
            }
        }
        std::mem::take(&mut self.ended)
    }

    /// The counts of every window, over or not: at shutdown.
    pub fn close_all(&mut self) -> Vec<RefusalCount> {
        self.committed(true);
        let open = std::mem::take(&mut self.open);
        for (record, window) in open {
            self.end(record, window);
        }
        std::mem::take(&mut self.ended)
    }

    /// Counts taken by [`RefusalWindows::close`] whose batch failed: to
    /// write again with the next.
    pub fn unwritten(&mut self, counts: Vec<RefusalCount>) {
        self.ended.extend(counts);
    }

    /// Whether a window is open or a count waits to be written: the writer
    /// must come back by the end of [`WINDOW`] even when nothing arrives.
    pub fn is_idle(&self) -> bool {
        self.open.is_empty() && self.ended.is_empty()
    }

    fn end(&mut self, refused: RefusalRecord, window: Window) {
        let count = window.counted + window.staged;
        if count > 0 {
            self.ended.push(RefusalCount {
                refused,
                since: window.since,
                count,
            });
        }
    }
}

/// Whether `window` is over at `now` (or the clock went back past it).
fn over(window: &Window, now: Timestamp) -> bool {
    now < window.since || now >= window.since.saturating_add(WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::AgentRef;
    use crate::{BusinessId, Refusal, RoleInstance, RunId};

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_700_000_000_000 + ms).expect("a time")
    }

    fn nobody() -> RefusalRecord {
        RefusalRecord {
            business: None,
            agent: None,
            verb: Some("inbox".into()),
            refusal: Refusal::HumanProofFailed,
        }
    }

    fn other() -> RefusalRecord {
        RefusalRecord {
            business: Some(BusinessId::parse("acme").expect("an id")),
            ..nobody()
        }
    }

    #[test]
    fn the_first_refusal_of_nobody_in_a_window_is_a_row_and_the_rest_one_count() {
        let mut windows = RefusalWindows::default();
        assert_eq!(windows.tally(at(0), &nobody()), Tally::Row);
        for ms in 1..1000 {
            assert_eq!(windows.tally(at(ms), &nobody()), Tally::Counted);
        }
        windows.committed(true);
        assert_eq!(windows.close(at(999)), vec![], "the window is not over");
        let counts = windows.close(at(1000));
        assert_eq!(
            counts,
            vec![RefusalCount {
                refused: nobody(),
                since: at(0),
                count: 999
            }]
        );
        assert!(windows.is_idle());
        // The next window starts with a row again.
        assert_eq!(windows.tally(at(1500), &nobody()), Tally::Row);
    }

    /// A refusal of the agent `run` (role `dev-1`) of acme.
    fn of_run(run: &str) -> RefusalRecord {
        RefusalRecord {
            business: Some(BusinessId::parse("acme").expect("an id")),
            agent: Some(AgentRef {
                role: RoleInstance::parse("dev-1").expect("a role"),
                run: RunId::parse(run).expect("a run"),
            }),
            verb: Some("decision.resolve".into()),
            refusal: Refusal::NotAuthorized,
        }
    }

    #[test]
    fn a_known_caller_keeps_a_row_each_up_to_its_rate_then_counts_per_run() {
        let mut windows = RefusalWindows::default();
        let caller = of_run("dev-1-a");
        let tallies: Vec<Tally> = (0..2000)
            .map(|i| windows.tally(at(i / 4), &caller))
            .collect();
        let rows = tallies.iter().filter(|t| **t == Tally::Row).count();
        assert_eq!(rows, CALLER_ROWS_PER_WINDOW as usize);
        assert!(
            tallies[..CALLER_ROWS_PER_WINDOW as usize]
                .iter()
                .all(|t| *t == Tally::Row),
            "the first ones are rows: {:?}",
            &tallies[..12]
        );
        // Another run of the same role is counted apart: rows again.
        let other_run = of_run("dev-1-b");
        assert_eq!(windows.tally(at(400), &other_run), Tally::Row);
        windows.committed(true);
        assert_eq!(windows.close(at(999)), vec![], "no window is over");
        let counts = windows.close(at(1400));
        assert_eq!(
            counts,
            vec![RefusalCount {
                refused: caller.clone(),
                since: at(0),
                count: 2000 - u64::from(CALLER_ROWS_PER_WINDOW)
            }],
            "the other run's window had no count"
        );
        // The window after: rows again, up to the rate.
        let rows = (0..50)
            .filter(|_| windows.tally(at(1500), &caller) == Tally::Row)
            .count();
        assert_eq!(rows, CALLER_ROWS_PER_WINDOW as usize);
        windows.committed(true);
        let rest = windows.close_all();
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert_eq!(rest[0].count, 50 - u64::from(CALLER_ROWS_PER_WINDOW));
    }

    #[test]
    fn a_failed_batch_of_a_known_caller_forgets_its_counts_and_rows_resume() {
        let mut windows = RefusalWindows::default();
        let caller = of_run("dev-1-a");
        for _ in 0..CALLER_ROWS_PER_WINDOW {
            assert_eq!(windows.tally(at(0), &caller), Tally::Row);
        }
        assert_eq!(windows.tally(at(1), &caller), Tally::Counted);
        windows.committed(true);
        assert_eq!(windows.tally(at(2), &caller), Tally::Counted);
        windows.committed(false);
        // The store failed: the next one is written as a row, to find out
        // whether the store takes it now.
        assert_eq!(windows.tally(at(3), &caller), Tally::Row);
        windows.committed(true);
        let counts = windows.close_all();
        assert_eq!(counts.len(), 1, "{counts:?}");
        assert_eq!((counts[0].since, counts[0].count), (at(0), 1));
    }

    #[test]
    fn kinds_are_counted_apart_and_a_late_refusal_closes_its_window() {
        let mut windows = RefusalWindows::default();
        let rows = (0..25)
            .filter(|_| windows.tally(at(0), &other()) == Tally::Row)
            .count();
        assert_eq!(rows, CALLER_ROWS_PER_WINDOW as usize);
        assert_eq!(windows.tally(at(0), &nobody()), Tally::Row);
        windows.committed(true);
        // A refusal after the window closes it: its count is kept.
        assert_eq!(windows.tally(at(2000), &other()), Tally::Row);
        windows.committed(true);
        let counts = windows.close(at(2001));
        assert_eq!(counts.len(), 1, "{counts:?}");
        assert_eq!(
            (counts[0].since, counts[0].count),
            (at(0), 25 - u64::from(CALLER_ROWS_PER_WINDOW))
        );
        let rest = windows.close_all();
        assert_eq!(rest, vec![], "nothing counted since: {rest:?}");
    }

    #[test]
    fn a_failed_batch_forgets_its_counts_and_the_next_refusal_is_a_row() {
        let mut windows = RefusalWindows::default();
        assert_eq!(windows.tally(at(0), &nobody()), Tally::Row);
        assert_eq!(windows.tally(at(1), &nobody()), Tally::Counted);
        windows.committed(true);
        assert_eq!(windows.tally(at(2), &nobody()), Tally::Counted);
        windows.committed(false);
        assert_eq!(windows.tally(at(3), &nobody()), Tally::Row);
        windows.committed(true);
        let counts = windows.close_all();
        assert_eq!(
            counts,
            vec![RefusalCount {
                refused: nobody(),
                since: at(0),
                count: 1
            }]
        );
        windows.unwritten(counts);
        assert!(!windows.is_idle());
        assert_eq!(windows.close(at(4)).len(), 1);
    }
}
