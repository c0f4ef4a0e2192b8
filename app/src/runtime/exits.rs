//! [`Exits`]: what the host noted about each bound run's process, and
//! whether it still runs, for `agents`.
//!
//! The host's word is kept in memory only, as it is not evidence: how a
//! process it reaped ended ([`super::Broker::note_exit`]), how often the
//! run's program started again inside the run
//! ([`super::Broker::note_restart`]) and what a harness run used
//! ([`super::Broker::note_usage`]). A run's end is evidence and is the
//! bus's; an end that says how the process ended answers `exited` too.
//! Otherwise, at read time, a run whose recorded pid no longer runs with
//! its recorded start time is gone (read through the [`ProcessTable`]
//! port, so the fakes answer too; the boot ends such runs, [`gone`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mosaic_adapters::wire::{Exited, Usage};
use mosaic_domain::evidence::{Ending, LaunchRecord};
use mosaic_domain::RunId;
use mosaic_ports::{ProcessError, ProcessTable};

/// What the host said of one run.
#[derive(Debug, Clone, Copy, Default)]
struct Noted {
    exited: Option<Exited>,
    restarts: u64,
    usage: Option<Usage>,
}

/// The host's notes, and the process table to ask about the rest.
#[derive(Default)]
pub(crate) struct Exits {
    processes: Option<Arc<dyn ProcessTable>>,
    noted: Mutex<HashMap<RunId, Noted>>,
}

impl std::fmt::Debug for Exits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exits").finish_non_exhaustive()
    }
}

/// Whether `record`'s process is gone: its pid runs no process, or one
/// with another start time. A process the table cannot read (denied,
/// unreadable) is not known to be gone.
pub(crate) fn gone(processes: &dyn ProcessTable, record: &LaunchRecord) -> bool {
    match processes.process(record.pid) {
        Ok(info) => info.start_time != record.start_time,
        Err(ProcessError::Gone) => true,
        Err(ProcessError::Denied | ProcessError::Unreadable(_)) => false,
    }
}

impl Exits {
    /// Exits read from `processes`, none noted yet.
    pub(crate) fn new(processes: Arc<dyn ProcessTable>) -> Self {
        Self {
            processes: Some(processes),
            noted: Mutex::new(HashMap::new()),
        }
    }

    fn noted(&self) -> MutexGuard<'_, HashMap<RunId, Noted>> {
        self.noted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The host reaped `run`'s process, which ended so.
    pub(crate) fn note(&self, run: RunId, exited: Exited) {
        self.noted().entry(run).or_default().exited = Some(exited);
    }

    /// The host started `run`'s program again inside the run.
    pub(crate) fn note_restart(&self, run: RunId) {
        let mut noted = self.noted();
        let restarts = &mut noted.entry(run).or_default().restarts;
        *restarts = restarts.saturating_add(1);
    }

    /// What `run` has used so far, as its harness reports it.
    pub(crate) fn note_usage(&self, run: RunId, usage: Usage) {
        self.noted().entry(run).or_default().usage = Some(usage);
    }

    /// How often `run`'s program started again, and what it used, as the
    /// host noted them.
    pub(crate) fn life(&self, run: &RunId) -> (u64, Option<Usage>) {
        let noted = self.noted().get(run).copied().unwrap_or_default();
        (noted.restarts, noted.usage)
    }

    /// How `record`'s process ended, or `None` while it runs: what the
    /// host noted, else what the run's end says of it (`ending`, when it
    /// carries a status or a signal), else the process table (only a
    /// process known to be gone is said to have exited).
    pub(crate) fn of(&self, record: &LaunchRecord, ending: Option<&Ending>) -> Option<Exited> {
        let noted = self.noted().get(&record.run).and_then(|n| n.exited);
        if noted.is_some() {
            return noted;
        }
        let told = ending.filter(|e| e.status().is_some() || e.signal().is_some());
        if let Some(ending) = told {
            return Some(Exited {
                status: ending.status(),
                signal: ending.signal(),
            });
        }
        gone(&**self.processes.as_ref()?, record).then_some(Exited::GONE)
    }
}
