//! The process-table port: what the human-proof check reads about processes.

use std::path::PathBuf;

/// A process as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The process id.
    pub pid: u32,
    /// The parent's process id (0 for the root of the tree).
    pub ppid: u32,
    /// The owning real user id.
    pub uid: u32,
    /// Field 22 of `/proc/<pid>/stat`: start time in clock ticks since boot.
    pub start_time: u64,
    /// The resolved executable path (`/proc/<pid>/exe`), when readable.
    pub exe: Option<PathBuf>,
}

/// A process environment: `(name, value)` pairs of raw bytes, in kernel
/// order.
pub type Environ = Vec<(Vec<u8>, Vec<u8>)>;

/// Why a process could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// No such process (it never existed or has exited).
    #[error("no such process")]
    Gone,
    /// The kernel refused to show this part (`EACCES`).
    #[error("permission denied")]
    Denied,
    /// Anything else, including text that could not be parsed.
    #[error("process table unreadable")]
    Unreadable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Read access to the process table.
///
/// Implementations: `mosaic-adapters` `/proc` reader and
/// `fakes::FakeProcessTable` (synthetic ancestries).
pub trait ProcessTable: Send + Sync {
    /// The process `pid`.
    ///
    /// The start time MUST come from the kernel's `stat` line parsed after
    /// its last `)`, so a command name containing `)` cannot shift fields.
    ///
    /// # Errors
    /// [`ProcessError::Gone`] when there is no such process;
    /// [`ProcessError::Unreadable`] otherwise.
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError>;

    /// The environment of `pid` as `(name, value)` pairs, in kernel order.
    ///
    /// # Errors
    /// [`ProcessError::Denied`] when the kernel refuses (`EACCES`), which
    /// callers treat differently from every other failure;
    /// [`ProcessError::Gone`]; [`ProcessError::Unreadable`].
    fn environ(&self, pid: u32) -> Result<Environ, ProcessError>;
}
