//! A cgroup per sandboxed agent run, where `up` can make one: the caps
//! that hold whoever `up` runs as, root included, which `RLIMIT_NPROC`
//! does not bind.
//!
//! [`Cgroups::open`] looks once, at start, in this order:
//!
//! 1. cgroup v2 delegated to `up`: the cgroup `up` is in (`0::/PATH` in
//!    `/proc/self/cgroup`, under `/sys/fs/cgroup` or, on a hybrid host,
//!    `/sys/fs/cgroup/unified`) lists `pids` in its `cgroup.controllers`
//!    and its `cgroup.subtree_control` is writable. v2 lets a cgroup with
//!    controllers enabled for its children hold no process of its own, so
//!    `up` first moves itself into a leaf, `mosaic-bus-<pid>-up`, then
//!    enables `+pids` (and `+memory` where listed) for the children. Each
//!    run gets `pids.max`, `memory.max` and `memory.swap.max` 0 (so the
//!    memory cap is not a swap allowance);
//! 2. else cgroup v1 with a writable `pids` hierarchy (root, on a host
//!    that mounts v1): a child of `up`'s own `pids` cgroup with
//!    `pids.max`, and of its `memory` cgroup, where that one is mounted
//!    and writable, with `memory.limit_in_bytes` (and
//!    `memory.memsw.limit_in_bytes` where the kernel counts swap);
//! 3. else none: the process cap is `RLIMIT_NPROC` alone, which
//!    `sandbox-exec` sets in every case.
//!
//! The log says once which caps hold. A run's cgroup that cannot be made
//! is not fatal: one warning, and that run has `RLIMIT_NPROC` alone, as on
//! a host without cgroups.
//!
//! A run's cgroup is `mosaic-bus-<up's pid>-<run id>`, unique per run. The
//! sandboxed child joins it before it runs anything of the agent: `up`
//! spawns `mosaic-bus sandbox-cgroup --cgroup DIR... -- bwrap ...`
//! ([`super::cgroup_main`]), which writes `0` (itself) to each `DIR/cgroup.procs` and then executes bwrap,
//! so bwrap and everything it starts are in the cgroup from their first
//! instruction. (This crate has no `unsafe`, so no `pre_exec`; an `exec`
//! keeps the pid and the start time the launch record binds.) The cgroup
//! is removed when its agent is dropped, once `up` has killed the sandbox,
//! and a leftover of an `up` that is gone (its pid no longer alive) is
//! removed by the next `up` when it is empty.
//!
//! Everything takes the cgroup root as a parameter, so the tests run it
//! against a fake tree in a temporary folder; `up` passes [`ROOT`].

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the host mounts its cgroups.
pub(crate) const ROOT: &str = "/sys/fs/cgroup";

/// The prefix of every cgroup `up` makes.
const PREFIX: &str = "mosaic-bus-";

/// How long dropping a run's cgroup waits for its last process to go.
const REMOVE_WITHIN: Duration = Duration::from_secs(5);

/// Where each run's cgroup is made, as found at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// cgroup v2, delegated: runs are children of `parent`, with the
    /// `memory` controller too when `memory`.
    V2 { parent: PathBuf, memory: bool },
    /// cgroup v1: runs are children of `up`'s `pids` cgroup, and of its
    /// `memory` cgroup when there is a writable one.
    V1 {
        pids: PathBuf,
        memory: Option<PathBuf>,
    },
    /// No cgroup: `RLIMIT_NPROC` alone.
    None,
}

impl Kind {
    /// Which caps hold, for the log.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Kind::V2 { memory: true, .. } => "cgroup v2 pids.max and memory.max",
            Kind::V2 { memory: false, .. } => "cgroup v2 pids.max (no memory controller)",
            Kind::V1 {
                memory: Some(_), ..
            } => "cgroup v1 pids.max and memory.limit_in_bytes",
            Kind::V1 { memory: None, .. } => "cgroup v1 pids.max (no writable memory hierarchy)",
            Kind::None => "RLIMIT_NPROC only (no delegated cgroup)",
        }
    }
}

/// Where `up`'s agent runs get their cgroups.
#[derive(Debug)]
pub(crate) struct Cgroups {
    kind: Kind,
    /// `up`'s pid, in every name it makes.
    pid: u32,
    /// Whether a run's cgroup already failed (one warning says so).
    warned: Cell<bool>,
}

impl Cgroups {
    /// Looks at the host once, for this process: [`ROOT`] and
    /// `/proc/self/cgroup`. Logs which caps hold.
    pub(crate) fn for_this_process() -> Cgroups {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let cgroups = Cgroups::open(Path::new(ROOT), &text, std::process::id());
        tracing::info!(caps = cgroups.kind.describe(), "process caps");
        cgroups
    }

    /// Finds where runs go under `root`, for the process `pid` whose
    /// `/proc/PID/cgroup` is `self_cgroup`, setting v2's delegation up
    /// (see the module documentation), and removes the empty leftovers of
    /// `up`s that are gone.
    pub(crate) fn open(root: &Path, self_cgroup: &str, pid: u32) -> Cgroups {
        let own = CgroupPaths::parse(self_cgroup);
        let kind = match own.v2.as_deref().map(|path| v2(root, path, pid)) {
            Some(Ok(kind)) => kind,
            Some(Err(why)) => {
                tracing::debug!(cause = why.as_str(), "no delegated cgroup v2");
                v1(root, &own)
            }
            None => v1(root, &own),
        };
        let cgroups = Cgroups {
            kind,
            pid,
            warned: Cell::new(false),
        };
        cgroups.remove_leftovers();
        cgroups
    }

    /// Where runs go.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The cgroup of the run `run`, with at most `processes` processes and
    /// `memory_mib` MiB; `None` without cgroups, or when it cannot be made
    /// (one warning, the first time).
    pub(crate) fn make(&self, run: &str, processes: u32, memory_mib: u32) -> Option<RunCgroup> {
        let name = format!("{PREFIX}{}-{run}", self.pid);
        let bytes = (u64::from(memory_mib) << 20).to_string();
        let processes = processes.to_string();
        let mut made = RunCgroup { dirs: Vec::new() };
        let result = match &self.kind {
            Kind::None => return None,
            Kind::V2 { parent, memory } => made.add(parent, &name).and_then(|dir| {
                write(&dir.join("pids.max"), &processes)?;
                if *memory {
                    write(&dir.join("memory.max"), &bytes)?;
                    // Absent without swap accounting: then nothing swaps.
                    if dir.join("memory.swap.max").exists() {
                        write(&dir.join("memory.swap.max"), "0")?;
                    }
                }
                Ok(())
            }),
            Kind::V1 { pids, memory } => made.add(pids, &name).and_then(|dir| {
                write(&dir.join("pids.max"), &processes)?;
                if let Some(memory) = memory {
                    let dir = made.add(memory, &name)?;
                    write(&dir.join("memory.limit_in_bytes"), &bytes)?;
                    // Present where the kernel counts swap; the limit on
                    // memory and swap together must not be below the
                    // other, which it now equals.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        write(&dir.join("memory.memsw.limit_in_bytes"), &bytes)?;
                    }
                }
                Ok(())
            }),
        };
        match result {
            Ok(()) => Some(made),
            Err(e) => {
                if !self.warned.replace(true) {
                    tracing::warn!(
                        run,
                        cause = e.to_string().as_str(),
                        "making an agent's cgroup failed; its processes are capped by \
                         RLIMIT_NPROC alone (none under root)"
                    );
                }
                None
            }
        }
    }

    /// Removes the empty cgroups of ours whose `up` is gone: a crashed
    /// `up` leaves its own, and they must not pile up.
    fn remove_leftovers(&self) {
        let parents: Vec<&Path> = match &self.kind {
            Kind::None => Vec::new(),
            Kind::V2 { parent, .. } => vec![parent],
            Kind::V1 { pids, memory } => std::iter::once(pids.as_path())
                .chain(memory.as_deref())
                .collect(),
        };
        for parent in parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(owner) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix(PREFIX))
                    .and_then(|rest| rest.split_once('-'))
                    .and_then(|(pid, _)| pid.parse::<u32>().ok())
                else {
                    continue;
                };
                if owner != self.pid && !Path::new(&format!("/proc/{owner}")).exists() {
                    // One still in use is not empty: the kernel refuses it.
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    }
}

/// The cgroup paths of one process, from its `/proc/PID/cgroup`.
#[derive(Debug, Default)]
struct CgroupPaths {
    v2: Option<String>,
    pids: Option<String>,
    memory: Option<String>,
}

impl CgroupPaths {
    fn parse(text: &str) -> CgroupPaths {
        let mut own = CgroupPaths::default();
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            // Outside the root of its cgroup namespace a path starts with
            // `/..`: not one this process can reach by name.
            if path.split('/').any(|c| c == "..") {
                continue;
            }
            if id == "0" && controllers.is_empty() {
                own.v2 = Some(path.to_owned());
            }
            for controller in controllers.split(',') {
                match controller {
                    "pids" => own.pids = Some(path.to_owned()),
                    "memory" => own.memory = Some(path.to_owned()),
                    _ => {}
                }
            }
        }
        own
    }
}

/// `base` joined with a cgroup path (`/` is `base` itself).
fn under(base: &Path, path: &str) -> PathBuf {
    base.join(path.trim_start_matches('/'))
}

/// The v2 tree's mount: the root on a v2-only host, `unified` on a hybrid.
fn v2_mount(root: &Path) -> Option<PathBuf> {
    [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|m| m.join("cgroup.controllers").is_file())
}

/// Whether this process may write `path`.
fn writable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// The words of a file of cgroupfs (empty when it cannot be read).
fn words(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The delegated v2 cgroup at `path`, set up for children; why not, else.
fn v2(root: &Path, path: &str, pid: u32) -> Result<Kind, String> {
    let own = under(&v2_mount(root).ok_or("no cgroup v2 mount")?, path);
    let controllers = words(&own.join("cgroup.controllers"));
    if !controllers.iter().any(|c| c == "pids") {
        return Err("the pids controller is not delegated".into());
    }
    let subtree = own.join("cgroup.subtree_control");
    if !writable(&own) || !writable(&subtree) {
        return Err("the cgroup is not writable".into());
    }
    let memory = controllers.iter().any(|c| c == "memory");
    let wanted: Vec<&str> = std::iter::once("pids")
        .chain(memory.then_some("memory"))
        .collect();
    let enabled = words(&subtree);
    if wanted.iter().all(|w| enabled.iter().any(|e| e == w)) {
        return Ok(Kind::V2 {
            parent: own,
            memory,
        });
    }
    // No process may stay in a cgroup that enables controllers for its
    // children (the root excepted): `up` moves into a leaf of its own.
    if path != "/" {
        let others = words(&own.join("cgroup.procs"))
            .iter()
            .any(|p| *p != pid.to_string());
        if others {
            return Err("the cgroup holds other processes than up".into());
        }
        let leaf = own.join(format!("{PREFIX}{pid}-up"));
        mkdir(&leaf).map_err(|e| format!("making up's own leaf: {e}"))?;
        write(&leaf.join("cgroup.procs"), &pid.to_string())
            .map_err(|e| format!("moving up into its own leaf: {e}"))?;
    }
    let plus: Vec<String> = wanted.iter().map(|w| format!("+{w}")).collect();
    write(&subtree, &plus.join(" "))
        .map_err(|e| format!("enabling {} for the children: {e}", plus.join(" ")))?;
    Ok(Kind::V2 {
        parent: own,
        memory,
    })
}

/// The writable v1 `pids` hierarchy and, where there is one, `memory`.
fn v1(root: &Path, own: &CgroupPaths) -> Kind {
    let usable = |controller: &str, path: &Option<String>, file: &str| {
        let dir = under(&root.join(controller), path.as_deref()?);
        (dir.join(file).is_file() && writable(&dir)).then_some(dir)
    };
    match usable("pids", &own.pids, "cgroup.procs") {
        Some(pids) => Kind::V1 {
            pids,
            memory: usable("memory", &own.memory, "memory.limit_in_bytes"),
        },
        None => Kind::None,
    }
}

/// Makes `dir`; one that exists already is fine.
fn mkdir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        Ok(()) | Err(_) => Ok(()),
    }
}

/// Writes `value` to the cgroupfs file `path` in one `write`, as cgroupfs
/// expects; a regular file (the tests' fake tree) is created.
fn write(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?
        .write_all(value.as_bytes())
}

/// The cgroups of one run: one per hierarchy (v1 has two). Dropped, it
/// removes them once their last process is gone.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    dirs: Vec<PathBuf>,
}

impl RunCgroup {
    /// Makes `parent/name` (and keeps it to remove).
    fn add(&mut self, parent: &Path, name: &str) -> io::Result<PathBuf> {
        let dir = parent.join(name);
        std::fs::create_dir(&dir)?;
        self.dirs.push(dir.clone());
        Ok(dir)
    }

    /// The folders, one per hierarchy.
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        for dir in self.dirs.drain(..).rev() {
            // v2 can end every process in it at once; `up` has killed the
            // sandbox's init already, which ends the rest on v1.
            let kill = dir.join("cgroup.kill");
            if kill.is_file() {
                let _ = write(&kill, "1");
            }
            // A dying process stays counted for a moment: the kernel
            // refuses the removal (EBUSY) until it is gone.
            let deadline = Instant::now() + REMOVE_WITHIN;
            loop {
                match std::fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => {
                        tracing::warn!(
                            cgroup = &*mosaic_adapters::fs::neutral_path(&dir),
                            cause = e.to_string().as_str(),
                            "removing an agent's cgroup failed; the next up removes it"
                        );
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
