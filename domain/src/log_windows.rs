//! Log lines, bounded under a flood, on the model of
//! [`crate::refusal_counts`].
//!
//! Something that can happen as often as a hostile peer likes (a refused
//! human proof) is logged per cause (any small, fixed set of keys: the
//! runtime's are static names) and window of [`WINDOW`]: the first of
//! a cause in a window is logged ([`LogWindows::note`] says so), the rest
//! are only counted, and a window that suppressed any ends in one summary
//! line with its count ([`Suppressed`]), taken by [`LogWindows::close`]
//! once the window is over, or by [`LogWindows::close_all`] at shutdown.
//! So a flood logs at most two lines a second per cause, whatever its rate.

use std::collections::HashMap;
use std::hash::Hash;

use crate::refusal_counts::WINDOW;
use crate::Timestamp;

/// The lines of a window not logged: `count` more of `cause`, from `since`
/// until the window closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppressed<K> {
    /// The cause.
    pub cause: K,
    /// The start of the window (the time of the line logged).
    pub since: Timestamp,
    /// How many were not logged; at least one.
    pub count: u64,
}

/// The open windows, one per cause, and the summaries of closed windows
/// not yet taken.
#[derive(Debug)]
pub struct LogWindows<K> {
    open: HashMap<K, (Timestamp, u64)>,
    ended: Vec<Suppressed<K>>,
}

impl<K> Default for LogWindows<K> {
    fn default() -> Self {
        Self {
            open: HashMap::new(),
            ended: Vec::new(),
        }
    }
}

impl<K: Copy + Eq + Hash> LogWindows<K> {
    /// Whether a line of `cause` at `now` is logged (the first of its
    /// window) or only counted. A window that is over is closed first.
    pub fn note(&mut self, now: Timestamp, cause: K) -> bool {
        if let Some(&(since, count)) = self.open.get(&cause) {
            if !over(since, now) {
                self.open.insert(cause, (since, count + 1));
                return false;
            }
            self.open.remove(&cause);
            self.end(cause, since, count);
        }
        self.open.insert(cause, (now, 0));
        true
    }

    /// The summaries to log at `now`: of every window that is over and
    /// suppressed any line, and of those closed before.
    pub fn close(&mut self, now: Timestamp) -> Vec<Suppressed<K>> {
        let over: Vec<K> = self
            .open
            .iter()
            .filter(|(_, (since, _))| over(*since, now))
            .map(|(cause, _)| *cause)
            .collect();
        for cause in over {
            if let Some((since, count)) = self.open.remove(&cause) {
                self.end(cause, since, count);
            }
        }
        std::mem::take(&mut self.ended)
    }

    /// The summaries of every window, over or not: at shutdown.
    pub fn close_all(&mut self) -> Vec<Suppressed<K>> {
        let open = std::mem::take(&mut self.open);
        for (cause, (since, count)) in open {
            self.end(cause, since, count);
        }
        std::mem::take(&mut self.ended)
    }

    fn end(&mut self, cause: K, since: Timestamp, count: u64) {
        if count > 0 {
            self.ended.push(Suppressed {
                cause,
                since,
                count,
            });
        }
    }
}

/// Whether a window opened at `since` is over at `now` (or the clock went
/// back past it).
fn over(since: Timestamp, now: Timestamp) -> bool {
    now < since || now >= since.saturating_add(WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_700_000_000_000 + ms).expect("a time")
    }

    #[test]
    fn the_first_line_of_a_window_is_logged_and_the_rest_summed_up_once() {
        let mut logs: LogWindows<&str> = LogWindows::default();
        let logged = (0..5000)
            .filter(|i| logs.note(at(i / 10), "nonce-mismatch"))
            .count();
        assert_eq!(logged, 1, "500 ms of lines: one window");
        assert_eq!(logs.close(at(999)), vec![], "the window is not over");
        assert_eq!(
            logs.close(at(1000)),
            vec![Suppressed {
                cause: "nonce-mismatch",
                since: at(0),
                count: 4999
            }]
        );
        assert_eq!(logs.close(at(5000)), vec![], "summed up once");
        // The next window logs its first line again.
        assert!(logs.note(at(5000), "nonce-mismatch"));
        assert_eq!(logs.close_all(), vec![], "nothing suppressed since");
    }

    #[test]
    fn causes_have_windows_of_their_own_and_a_late_line_closes_its_window() {
        let mut logs: LogWindows<&str> = LogWindows::default();
        assert!(logs.note(at(0), "proof-limit"));
        assert!(logs.note(at(1), "nonce-mismatch"));
        assert!(!logs.note(at(2), "proof-limit"));
        assert!(!logs.note(at(3), "proof-limit"));
        // A line after the window opens the next one, logged; the old
        // window's summary waits to be taken.
        assert!(logs.note(at(1500), "proof-limit"));
        assert!(!logs.note(at(1501), "proof-limit"));
        assert_eq!(
            logs.close(at(1502)),
            vec![Suppressed {
                cause: "proof-limit",
                since: at(0),
                count: 2
            }],
            "nonce-mismatch suppressed nothing"
        );
        assert_eq!(
            logs.close_all(),
            vec![Suppressed {
                cause: "proof-limit",
                since: at(1500),
                count: 1
            }]
        );
    }

    #[test]
    fn a_clock_that_goes_back_closes_the_window() {
        let mut logs: LogWindows<&str> = LogWindows::default();
        assert!(logs.note(at(1000), "proof-limit"));
        assert!(!logs.note(at(1001), "proof-limit"));
        assert!(logs.note(at(0), "proof-limit"));
        assert_eq!(logs.close(at(0)).len(), 1);
    }
}
