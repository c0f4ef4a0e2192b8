//! Bounded places: what each run may hold of the broker at once.
//!
//! The socket serves a fixed number of authenticated connections (the
//! broker's budget of descriptors for them, sized by the open-file limit).
//! One agent holding them all would starve the other agents and the
//! readers: so each run also has a budget of its own, [`RunPlaces`]
//! (default [`DEFAULT_CONNECTIONS`], which the host may change per run),
//! and an agent's connection takes a slot of its run's budget and one of
//! the broker's. The human's reserve stays apart (the socket's own).
//!
//! The host counts in the same budgets what else a run holds of the
//! broker's process, a proxy's descriptors for it: [`RunPlaces::try_take`]
//! takes a slot of the run's budget and one of the broker's at once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use mosaic_adapters::socket::{Budget, Slot};
use mosaic_domain::RunId;

/// How many places a run holds at once unless its host says otherwise:
/// room for a harness's calls, its `changes` waits and its MCP session
/// beside a proxy's connections, far below the broker's total.
pub const DEFAULT_CONNECTIONS: usize = 64;

/// One run's places and the broker's: a handle the host keeps to count
/// what the run holds beyond its socket connections, and to set its cap.
#[derive(Debug, Clone)]
pub struct RunPlaces {
    run: Budget,
    all: Budget,
}

/// A place taken with [`RunPlaces::try_take`]: one of the run's and one of
/// the broker's, both given back when dropped.
#[derive(Debug)]
pub struct RunPlace {
    _run: Slot,
    _all: Slot,
}

impl RunPlaces {
    /// The places of a run counted in `run`, and in `all`, the broker's:
    /// what [`crate::runtime::Broker::run_places`] gives, made by hand for
    /// a part that counts in budgets of its own (a proxy under test).
    pub fn new(run: Budget, all: Budget) -> Self {
        Self { run, all }
    }

    /// Takes a place of the run's and one of the broker's, or none when
    /// either budget is spent.
    pub fn try_take(&self) -> Option<RunPlace> {
        let run = self.run.try_take()?;
        let all = self.all.try_take()?;
        Some(RunPlace {
            _run: run,
            _all: all,
        })
    }

    /// Sets how many places the run may hold at once, its connections to
    /// the broker included. Places held beyond a lowered cap stay until
    /// they are given back.
    pub fn set_cap(&self, cap: usize) {
        self.run.set_cap(cap);
    }

    /// The run's cap.
    pub fn cap(&self) -> usize {
        self.run.cap()
    }

    /// How many places the run holds now, its connections included.
    pub fn held(&self) -> usize {
        self.run.held()
    }
}

/// Every run's budget, made when the run is first seen, and the broker's.
pub(super) struct Places {
    all: Budget,
    runs: Mutex<HashMap<RunId, Budget>>,
}

impl Places {
    /// The places of a broker whose socket counts its connections in `all`.
    pub(super) fn new(all: Budget) -> Self {
        Self {
            all,
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// `run`'s budget (made with [`DEFAULT_CONNECTIONS`] the first time),
    /// as the socket counts its connections in it.
    pub(super) fn budget(&self, run: &RunId) -> Budget {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.entry(run.clone())
            .or_insert_with(|| Budget::new(DEFAULT_CONNECTIONS))
            .clone()
    }

    /// `run`'s places, for its host.
    pub(super) fn of(&self, run: &RunId) -> RunPlaces {
        RunPlaces {
            run: self.budget(run),
            all: self.all.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use mosaic_adapters::socket::Budget;
    use mosaic_domain::RunId;

    use super::{Places, DEFAULT_CONNECTIONS};

    fn run(name: &str) -> RunId {
        RunId::parse(name).expect("a run")
    }

    #[test]
    fn a_place_counts_in_the_run_and_in_the_broker_and_runs_apart() {
        let places = Places::new(Budget::new(3));
        let dev = places.of(&run("dev-1"));
        assert_eq!(dev.cap(), DEFAULT_CONNECTIONS);
        dev.set_cap(2);
        let lead = places.of(&run("lead-1"));
        let first = dev.try_take().expect("one of two");
        let second = dev.try_take().expect("two of two");
        assert!(dev.try_take().is_none(), "the run's cap");
        assert_eq!(places.budget(&run("dev-1")).held(), 2, "one budget a run");
        let third = lead.try_take().expect("another run");
        assert!(lead.try_take().is_none(), "the broker's budget is spent");
        drop(first);
        assert!(dev.try_take().is_some(), "given back");
        drop((second, third));
        assert_eq!((dev.held(), lead.held()), (0, 0));
        // A place the run cannot take takes none of the broker's.
        let all = Budget::new(5);
        let places = Places::new(all.clone());
        let ops = places.of(&run("ops-1"));
        ops.set_cap(0);
        assert!(ops.try_take().is_none());
        assert_eq!(all.held(), 0);
    }
}
