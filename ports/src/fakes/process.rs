//! [`FakeProcessTable`]: synthetic process ancestries for the human-proof
//! checks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{lock, InjectedFailure};
use crate::process::{
    Environ, ExeIdentity, NamespaceId, Namespaces, ProcessError, ProcessInfo, ProcessTable,
};

/// The namespaces every [`FakeProcess`] is in unless it is given others:
/// those of the host, which a fake broker shares.
pub const HOST_NAMESPACES: Namespaces = Namespaces {
    pid: NamespaceId { dev: 4, ino: 1 },
    mnt: NamespaceId { dev: 4, ino: 2 },
    user: NamespaceId { dev: 4, ino: 3 },
};

/// What [`ProcessTable::environ`] reports for a [`FakeProcess`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeEnviron {
    /// These variables, in this order.
    Vars(Environ),
    /// [`ProcessError::Denied`], as `EACCES` on another user's process.
    Denied,
    /// [`ProcessError::Gone`], as when the process exits between reading its
    /// `stat` and its `environ`.
    Gone,
    /// [`ProcessError::Unreadable`].
    Unreadable,
}

/// One synthetic process, built with chained setters and added to a
/// [`FakeProcessTable`].
///
/// Defaults: uid 1000, start time 1, no readable executable (neither its
/// path nor its [`ExeIdentity`]), an empty environment, readable `stat`,
/// never vanishes, the [`HOST_NAMESPACES`].
///
/// ```
/// use mosaic_ports::fakes::{FakeEnviron, FakeProcess, FakeProcessTable};
/// use mosaic_ports::{ProcessError, ProcessTable};
///
/// // A shell (pid 10) whose environment is not ours to read, running the
/// // human CLI (pid 20), which vanishes after its first read.
/// let table = FakeProcessTable::new()
///     .with(FakeProcess::new(10, 1).start_time(100).environ(FakeEnviron::Denied))
///     .with(FakeProcess::new(20, 10).start_time(200).exe("/usr/bin/mosaic-bus").gone_after(1));
/// assert!(matches!(table.environ(10), Err(ProcessError::Denied)));
/// assert_eq!(table.process(20).unwrap().ppid, 10);
/// assert!(matches!(table.process(20), Err(ProcessError::Gone)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProcess {
    info: ProcessInfo,
    exe_identity: Option<ExeIdentity>,
    environ: FakeEnviron,
    stat_unreadable: bool,
    gone_after: Option<usize>,
    /// `None`: denied.
    namespaces: Option<Namespaces>,
}

impl FakeProcess {
    /// Process `pid`, child of `ppid` (0 for the root of a tree), with the
    /// defaults above.
    pub fn new(pid: u32, ppid: u32) -> Self {
        Self {
            info: ProcessInfo {
                pid,
                ppid,
                uid: 1000,
                start_time: 1,
                exe: None,
            },
            exe_identity: None,
            environ: FakeEnviron::Vars(Vec::new()),
            stat_unreadable: false,
            gone_after: None,
            namespaces: Some(HOST_NAMESPACES),
        }
    }

    /// Sets the namespaces [`ProcessTable::namespaces`] reports, as for a
    /// process in a sandbox.
    pub fn namespaces(mut self, namespaces: Namespaces) -> Self {
        self.namespaces = Some(namespaces);
        self
    }

    /// Makes [`ProcessTable::namespaces`] fail with
    /// [`ProcessError::Denied`], as for a process the kernel will not let
    /// us inspect.
    pub fn namespaces_denied(mut self) -> Self {
        self.namespaces = None;
        self
    }

    /// Sets the owning real user id.
    pub fn uid(mut self, uid: u32) -> Self {
        self.info.uid = uid;
        self
    }

    /// Sets the start time in clock ticks since boot. A parent with a later
    /// start time than its child is how a reused pid looks.
    pub fn start_time(mut self, ticks: u64) -> Self {
        self.info.start_time = ticks;
        self
    }

    /// Sets the resolved executable path.
    pub fn exe(mut self, path: impl Into<PathBuf>) -> Self {
        self.info.exe = Some(path.into());
        self
    }

    /// Sets the device and inode of the file the process executes, which
    /// [`ProcessTable::exe_identity`] reports; without it that read is
    /// [`ProcessError::Unreadable`], as for a kernel thread. Independent of
    /// [`FakeProcess::exe`], so a test can give the right path with another
    /// file, as when a binary was replaced at its path.
    pub fn exe_identity(mut self, dev: u64, ino: u64) -> Self {
        self.exe_identity = Some(ExeIdentity { dev, ino });
        self
    }

    /// Sets a readable environment of these `(name, value)` pairs, in order.
    pub fn env<N, V>(self, vars: impl IntoIterator<Item = (N, V)>) -> Self
    where
        N: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let vars = vars
            .into_iter()
            .map(|(n, v)| (n.as_ref().to_vec(), v.as_ref().to_vec()))
            .collect();
        self.environ(FakeEnviron::Vars(vars))
    }

    /// Sets what reading the environment reports.
    pub fn environ(mut self, environ: FakeEnviron) -> Self {
        self.environ = environ;
        self
    }

    /// Makes [`ProcessTable::process`] fail with
    /// [`ProcessError::Unreadable`], as for a `stat` line that cannot be
    /// parsed.
    pub fn stat_unreadable(mut self) -> Self {
        self.stat_unreadable = true;
        self
    }

    /// Makes the process exit after `reads` calls of
    /// [`ProcessTable::process`]: from then on both reads report
    /// [`ProcessError::Gone`]. With `gone_after(1)` a walker that reads the
    /// process and comes back to it (say, to re-check its start time after
    /// reading its parent) sees it vanish mid-walk.
    pub fn gone_after(mut self, reads: usize) -> Self {
        self.gone_after = Some(reads);
        self
    }
}

/// A [`ProcessTable`] of [`FakeProcess`]es. An unknown pid is
/// [`ProcessError::Gone`].
///
/// Clones share one table, so a test can [`FakeProcessTable::remove`] or
/// [`FakeProcessTable::insert`] processes while the code under test holds
/// another clone.
#[derive(Debug, Clone, Default)]
pub struct FakeProcessTable {
    inner: Arc<Mutex<BTreeMap<u32, Entry>>>,
}

/// A process and how often it has been read.
#[derive(Debug)]
struct Entry {
    process: FakeProcess,
    reads: usize,
}

impl Entry {
    fn gone(&self) -> bool {
        self.process.gone_after.is_some_and(|n| self.reads >= n)
    }
}

impl FakeProcessTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `process` (replacing any process with its pid) and returns the
    /// table, for building a table in one expression.
    pub fn with(self, process: FakeProcess) -> Self {
        self.insert(process);
        self
    }

    /// Adds `process`, replacing any process with its pid, as a pid reuse
    /// would. Its read count starts at zero.
    pub fn insert(&self, process: FakeProcess) {
        lock(&self.inner).insert(process.info.pid, Entry { process, reads: 0 });
    }

    /// Removes process `pid`, as if it exited; whether it was there.
    pub fn remove(&self, pid: u32) -> bool {
        lock(&self.inner).remove(&pid).is_some()
    }

    /// How many times [`ProcessTable::process`] was called for `pid` since it
    /// was inserted, including failed calls.
    pub fn reads(&self, pid: u32) -> usize {
        lock(&self.inner).get(&pid).map_or(0, |e| e.reads)
    }
}

impl ProcessTable for FakeProcessTable {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        let mut table = lock(&self.inner);
        let entry = table.get_mut(&pid).ok_or(ProcessError::Gone)?;
        let gone = entry.gone();
        entry.reads += 1;
        if gone {
            return Err(ProcessError::Gone);
        }
        if entry.process.stat_unreadable {
            return Err(ProcessError::Unreadable(Box::new(InjectedFailure)));
        }
        Ok(entry.process.info.clone())
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        let table = lock(&self.inner);
        let entry = table.get(&pid).ok_or(ProcessError::Gone)?;
        if entry.gone() {
            return Err(ProcessError::Gone);
        }
        match &entry.process.environ {
            // As the kernel lays it out: `NAME=VALUE\0` per entry.
            FakeEnviron::Vars(vars)
                if vars
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 2)
                    .sum::<usize>()
                    > super::super::process::MAX_ENVIRON =>
            {
                Err(ProcessError::Unreadable(Box::new(InjectedFailure)))
            }
            FakeEnviron::Vars(vars) => Ok(vars.clone()),
            FakeEnviron::Denied => Err(ProcessError::Denied),
            FakeEnviron::Gone => Err(ProcessError::Gone),
            FakeEnviron::Unreadable => Err(ProcessError::Unreadable(Box::new(InjectedFailure))),
        }
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        let table = lock(&self.inner);
        let entry = table.get(&pid).ok_or(ProcessError::Gone)?;
        if entry.gone() {
            return Err(ProcessError::Gone);
        }
        entry
            .process
            .exe_identity
            .ok_or_else(|| ProcessError::Unreadable(Box::new(InjectedFailure)))
    }

    fn namespaces(&self, pid: u32) -> Result<Namespaces, ProcessError> {
        let table = lock(&self.inner);
        let entry = table.get(&pid).ok_or(ProcessError::Gone)?;
        if entry.gone() {
            return Err(ProcessError::Gone);
        }
        entry.process.namespaces.ok_or(ProcessError::Denied)
    }
}
