//! [`Exits`]: whether each bound run's process still runs, for `agents`.
//!
//! The broker knows it two ways. A host that reaps an agent says how it
//! ended ([`super::Broker::note_exit`]: `up` does), kept in memory only, as
//! it is the host's word and not evidence. Otherwise, at read time, a run
//! whose recorded pid no longer runs with its recorded start time is gone
//! (read through the [`ProcessTable`] port, so the fakes answer too).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use mosaic_adapters::wire::Exited;
use mosaic_domain::evidence::LaunchRecord;
use mosaic_domain::RunId;
use mosaic_ports::{ProcessError, ProcessTable};

/// The exits the host noted, and the process table to ask about the rest.
#[derive(Default)]
pub(crate) struct Exits {
    processes: Option<Arc<dyn ProcessTable>>,
    noted: Mutex<HashMap<RunId, Exited>>,
}

impl std::fmt::Debug for Exits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exits").finish_non_exhaustive()
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

    /// The host reaped `run`'s process, which ended so.
    pub(crate) fn note(&self, run: RunId, exited: Exited) {
        self.noted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run, exited);
    }

    /// How `record`'s process ended, or `None` while it runs. A process
    /// the table cannot read (denied, unreadable) counts as running: only
    /// a process known to be gone is said to have exited.
    pub(crate) fn of(&self, record: &LaunchRecord) -> Option<Exited> {
        let noted = self
            .noted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&record.run)
            .copied();
        if noted.is_some() {
            return noted;
        }
        match self.processes.as_ref()?.process(record.pid) {
            Ok(info) if info.start_time == record.start_time => None,
            // The pid now names another process: ours is gone.
            Ok(_) | Err(ProcessError::Gone) => Some(Exited::GONE),
            Err(ProcessError::Denied | ProcessError::Unreadable(_)) => None,
        }
    }
}
