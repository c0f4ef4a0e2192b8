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

/// The file a process executes, named by the kernel's device and inode
/// numbers rather than by a path: a path can come to name another file
/// (renamed or copied over it) while the process keeps running the one it
/// started with, but two identities are equal only for the very same file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExeIdentity {
    /// The device holding the file (`st_dev`).
    pub dev: u64,
    /// The file's inode number on that device (`st_ino`).
    pub ino: u64,
}

/// One namespace, named by the kernel's device and inode numbers of its
/// `/proc/<pid>/ns/<kind>` file: two processes are in the same namespace of
/// a kind exactly when these are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NamespaceId {
    /// The namespace file system's device (`st_dev`).
    pub dev: u64,
    /// The namespace's inode number (`st_ino`).
    pub ino: u64,
}

/// The namespaces of a process that decide what it can see and who it is:
/// a peer in another of them than the broker's is not the human's own
/// process, whatever its ancestry looks like from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Namespaces {
    /// Its PID namespace (`ns/pid`: the one the process itself is in, not
    /// `pid_for_children`).
    pub pid: NamespaceId,
    /// Its mount namespace (`ns/mnt`).
    pub mnt: NamespaceId,
    /// Its user namespace (`ns/user`).
    pub user: NamespaceId,
}

/// A process environment: `(name, value)` pairs of raw bytes, in kernel
/// order.
pub type Environ = Vec<(Vec<u8>, Vec<u8>)>;

/// The most bytes of one environment a [`ProcessTable`] reads: 256 KiB,
/// many times a developer's environment, and a bound on what one request
/// can make the broker read (an environment may be megabytes).
pub const MAX_ENVIRON: usize = 256 * 1024;

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
    /// It MUST NOT read more than [`MAX_ENVIRON`] + 1 bytes of it: an
    /// environment larger than [`MAX_ENVIRON`] is unreadable, never cut
    /// short (a marker past the cut would go unseen).
    ///
    /// # Errors
    /// [`ProcessError::Denied`] when the kernel refuses (`EACCES`), which
    /// callers treat differently from every other failure;
    /// [`ProcessError::Gone`]; [`ProcessError::Unreadable`], also for an
    /// environment larger than [`MAX_ENVIRON`].
    fn environ(&self, pid: u32) -> Result<Environ, ProcessError>;

    /// The device and inode of the file `pid` executes.
    ///
    /// The identity MUST be that of the image the process runs, the file
    /// its last `exec` opened (on Linux: `stat`, following the link, of
    /// `/proc/<pid>/exe`), never of whatever its path names now: when
    /// another file has been renamed or copied over that path, or the file
    /// was deleted, the process still reports its own file. The answer MUST
    /// belong to the process `pid` named when the call began: a pid reused
    /// during the read is [`ProcessError::Gone`], not another process's
    /// file.
    ///
    /// # Errors
    /// [`ProcessError::Gone`] when there is no such process;
    /// [`ProcessError::Denied`] when the kernel refuses to show the
    /// executable (`EACCES`, `EPERM`: another user's process);
    /// [`ProcessError::Unreadable`] otherwise, including a process that has
    /// no executable (a kernel thread).
    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError>;

    /// The PID, mount and user namespaces of `pid`.
    ///
    /// Each MUST be the namespace the process is in (on Linux: `stat`,
    /// following the link, of `/proc/<pid>/ns/pid`, `ns/mnt` and
    /// `ns/user`), so two processes report equal [`Namespaces`] exactly
    /// when they share all three. The answer MUST belong to the process
    /// `pid` named when the call began: a pid reused during the read is
    /// [`ProcessError::Gone`], not another process's namespaces. It MUST
    /// NOT be guessed: when one of the three cannot be read, the call
    /// fails.
    ///
    /// # Errors
    /// [`ProcessError::Gone`] when there is no such process;
    /// [`ProcessError::Denied`] when the kernel refuses to show them
    /// (`EACCES`, `EPERM`: a process it will not let us inspect);
    /// [`ProcessError::Unreadable`] otherwise.
    fn namespaces(&self, pid: u32) -> Result<Namespaces, ProcessError>;
}
