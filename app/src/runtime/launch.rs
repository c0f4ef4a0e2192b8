//! Launches and capabilities: what each capability stands for (a bound
//! run, or a reader), the registry the connections look callers up in, and
//! the process check every launch record passes before it is bound, at
//! boot and in [`super::Broker::bind_launch`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use mosaic_domain::bus::Caller;
use mosaic_domain::evidence::{AgentRef, LaunchRecord};
use mosaic_domain::{BusinessId, Capability, Refusal, RunId};
use mosaic_ports::ProcessTable;

/// Every capability this broker issued, and what it stands for. Kept only
/// in this process's memory.
pub(super) type Registry = RwLock<HashMap<Capability, Binding>>;

/// What a capability stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Binding {
    /// A bound run working as its role.
    Agent {
        business: BusinessId,
        agent: AgentRef,
    },
    /// A read-only capability of one business.
    Reader { business: BusinessId },
}

impl Binding {
    pub(super) fn caller(&self) -> Caller {
        match self {
            Binding::Agent { business, agent } => Caller::Agent {
                business: business.clone(),
                agent: agent.clone(),
            },
            Binding::Reader { business } => Caller::Reader {
                business: business.clone(),
            },
        }
    }
}

pub(super) fn agent_binding(record: &LaunchRecord) -> Binding {
    Binding::Agent {
        business: record.business.clone(),
        agent: AgentRef {
            role: record.role.clone(),
            run: record.run.clone(),
        },
    }
}

/// A launch record must describe a process that runs now, as this broker's
/// user, started when the record says: the pid and the kernel's start time
/// are what identifies a managed process (and what the human proof matches
/// ancestors against), so a record that names no such process is refused
/// before it is bound.
pub(super) struct LaunchCheck {
    pub(super) processes: Arc<dyn ProcessTable>,
    pub(super) uid: u32,
}

impl LaunchCheck {
    /// # Errors
    /// `launch-not-running` (no such process, or it cannot be read),
    /// `launch-start-mismatch`, `launch-foreign-user`.
    pub(super) fn check(&self, record: &LaunchRecord) -> Result<(), Refusal> {
        let process = self.processes.process(record.pid).map_err(|e| {
            tracing::warn!(
                code = Refusal::LaunchNotRunning.code(),
                run = record.run.as_str(),
                pid = record.pid,
                cause = e.to_string().as_str(),
                "the launch's process cannot be read"
            );
            Refusal::LaunchNotRunning
        })?;
        if process.start_time != record.start_time {
            return Err(Refusal::LaunchStartMismatch);
        }
        if process.uid != self.uid {
            return Err(Refusal::LaunchForeignUser);
        }
        Ok(())
    }
}

/// A capability issued for a launch.
#[derive(Debug, Clone)]
pub struct IssuedLaunch {
    /// The launch's business.
    pub business: BusinessId,
    /// The launch's run.
    pub run: RunId,
    /// The capability; hand it only to that run, on a private channel.
    pub cap: Capability,
}

/// A capability issued for a reader.
#[derive(Debug, Clone)]
pub struct IssuedReader {
    /// The business it reads.
    pub business: BusinessId,
    /// The capability.
    pub cap: Capability,
}
