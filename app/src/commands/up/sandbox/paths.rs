//! The paths a configuration grants an agent, opened and checked before
//! anything is bound: each is opened without following a symbolic link in
//! any of its components (`openat2` with `RESOLVE_NO_SYMLINKS`, or where
//! the kernel lacks it one `O_PATH | O_NOFOLLOW` component at a time), and
//! what is bound is the descriptor that was checked (bwrap's `--bind-fd`,
//! which mounts `/proc/self/fd/N`), never a path that could be swapped
//! between the check and the bind.
//!
//! # What a writable path may not touch
//!
//! Nothing that is later run or read as configuration is writable from
//! any sandbox. A `workdir` or `write` path is refused (`unsafe-path`)
//! when it is, or holds, one of the [`Guard`]s `up` collects
//! ([`guards`]): the configuration file, every program a command of the
//! configuration names and every existing file its arguments name, the
//! `mosaic-bus` binary, a service credential's file, the human's home and
//! its start-up files ([`STARTUP`], and `~/.config`); and when it lies in
//! the configuration's folder, the data root, the secrets folder or one
//! of the home's start-up folders ([`STARTUP_DIRS`]), or holds one.
//!
//! Files are compared by identity too, device and inode: a writable path
//! that holds another name (a hard link) of a guarded file is refused, with
//! a log line naming both; and two agents' writable paths that overlap or
//! nest are found by the identity of their folders ([`overlapping`]).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use mosaic_adapters::fs::neutral_path;
use mosaic_domain::Refusal;

use crate::commands::team::AgentSpec;

/// The files of a home that a shell, git or a desktop session read or
/// run at start: no writable bind may be or hold one (nor `~/.config`
/// itself).
pub(crate) const STARTUP: [&str; 13] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".inputrc",
    ".gitconfig",
    ".pam_environment",
];

/// The folders of a home whose every file is run, trusted or read at
/// start: no writable bind may be, hold or lie in one (a harness's own
/// folder elsewhere in `~/.config` may be bound).
pub(crate) const STARTUP_DIRS: [&str; 9] = [
    ".ssh",
    ".gnupg",
    ".local/bin",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".config/git",
    ".config/fish",
    ".config/mosaic-bus",
];

/// A path no writable bind may be or hold (and, when `whole`, lie in):
/// resolved, with what it is for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Guard {
    pub(crate) path: PathBuf,
    pub(crate) what: &'static str,
    pub(crate) whole: bool,
    /// The file's identity, when it is a regular file with more than one
    /// name: another name of it in a writable path is a way to change it.
    pub(crate) linked: Option<FileId>,
}

/// A file by identity: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of `meta`'s file.
    fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// The identity of what `path` names, links not followed.
    pub(crate) fn at(path: &Path) -> Option<FileId> {
        std::fs::symlink_metadata(path).ok().map(|m| FileId::of(&m))
    }
}

impl Guard {
    /// `path` resolved (links followed: these are the broker's own and
    /// the system's paths); `None` when it does not exist.
    pub(crate) fn new(path: &Path, what: &'static str, whole: bool) -> Option<Guard> {
        use std::os::unix::fs::MetadataExt;
        let path = std::fs::canonicalize(path).ok()?;
        let linked = std::fs::symlink_metadata(&path)
            .ok()
            .filter(|meta| meta.is_file() && meta.nlink() > 1)
            .map(|meta| FileId::of(&meta));
        Some(Guard {
            path,
            what,
            whole,
            linked,
        })
    }

    /// Whether a writable bind of `bound` (resolved) would let an agent
    /// change it.
    fn touched_by(&self, bound: &Path) -> bool {
        self.path.starts_with(bound) || (self.whole && bound.starts_with(&self.path))
    }
}

/// A granted path, opened: its descriptor (`O_PATH`, close-on-exec) and
/// where the kernel says it is.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) fd: OwnedFd,
    pub(crate) path: PathBuf,
}

/// Opens `path` (absolute, without `..`) following no symbolic link in
/// any component: `ELOOP` when one is.
pub(crate) fn open_nofollow(path: &Path) -> io::Result<Opened> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, CWD};
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let fd = match openat2(CWD, path, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOSYS) => walk_nofollow(path)?,
        Err(e) => return Err(e.into()),
    };
    let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    Ok(Opened { fd, path })
}

/// [`open_nofollow`] for a kernel without `openat2` (before Linux 5.6):
/// one component at a time, each opened `O_PATH | O_NOFOLLOW` from the
/// last, and refused when it is a link.
fn walk_nofollow(path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{fstat, openat, FileType, Mode, OFlags, CWD};
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = openat(CWD, "/", flags, Mode::empty())?;
    for component in path.components() {
        let name = match component {
            Component::RootDir | Component::CurDir => continue,
            Component::Normal(name) => name,
            Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
        };
        let next = openat(&fd, name, flags, Mode::empty())?;
        if FileType::from_raw_mode(fstat(&next)?.st_mode) == FileType::Symlink {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        fd = next;
    }
    Ok(fd)
}

/// Opens `path`, one of `spec`'s granted paths, for a bind.
///
/// # Errors
/// `unsafe-path` when a component is a symbolic link; `bad-config` when it
/// does not exist or cannot be opened.
pub(crate) fn open_granted(spec: &AgentSpec, path: &Path) -> Result<Opened, Refusal> {
    open_nofollow(path).map_err(|e| {
        let (code, why) = if e.raw_os_error() == Some(libc::ELOOP) {
            (
                Refusal::UnsafePath,
                "a path the sandbox would bind goes through a symbolic link, which is never \
                 followed (name the real path)",
            )
        } else {
            (
                Refusal::BadConfig,
                "a path the sandbox would bind does not exist",
            )
        };
        tracing::warn!(
            code = code.code(),
            role = spec.role.as_str(),
            path = &*neutral_path(path),
            cause = e.to_string().as_str(),
            "{why}"
        );
        code
    })
}

/// `unsafe-path` when `bound`, a writable path of `spec`, is, holds or
/// (for a whole guard) lies in one of `guards`; the log names what it
/// would let the agent change, and for the configuration file says to
/// move it out.
pub(crate) fn check_writable(
    spec: &AgentSpec,
    bound: &Path,
    guards: &[Guard],
) -> Result<(), Refusal> {
    let Some(guard) = guards.iter().find(|g| g.touched_by(bound)) else {
        if let Some((link, guard)) = hard_link_in(bound, guards) {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                role = spec.role.as_str(),
                path = &*neutral_path(&link),
                guarded = &*neutral_path(&guard.path),
                "a file in a writable path of the sandbox is a hard link of {}, the same file \
                 under another name, so the agent could change it: remove the link or copy the \
                 file instead",
                guard.what
            );
            return Err(Refusal::UnsafePath);
        }
        return Ok(());
    };
    let advice = if guard.what == CONFIG_FILE {
        ": move the configuration out of the folders its agents may write (a config kept in \
         the repository its agents work in can be rewritten by them)"
    } else {
        ""
    };
    tracing::warn!(
        code = Refusal::UnsafePath.code(),
        role = spec.role.as_str(),
        path = &*neutral_path(bound),
        guarded = &*neutral_path(&guard.path),
        "a writable path of the sandbox would let the agent change {}{advice}",
        guard.what
    );
    Err(Refusal::UnsafePath)
}

/// A file in `bound` (a writable path, resolved) that is another name of
/// a guarded file, compared by device and inode, and that guard. Only a
/// guarded file with more than one name on `bound`'s device is looked for,
/// so a walk is rare; the walk follows no symbolic link.
fn hard_link_in<'g>(bound: &Path, guards: &'g [Guard]) -> Option<(PathBuf, &'g Guard)> {
    let root = FileId::at(bound)?;
    let wanted: Vec<(FileId, &Guard)> = guards
        .iter()
        .filter_map(|g| g.linked.map(|id| (id, g)))
        .filter(|(id, _)| id.dev == root.dev)
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let find = |path: &Path, meta: &std::fs::Metadata| {
        let id = FileId::of(meta);
        wanted
            .iter()
            .find(|(wanted, _)| *wanted == id)
            .map(|(_, guard)| (path.to_path_buf(), *guard))
    };
    let meta = std::fs::symlink_metadata(bound).ok()?;
    if meta.is_file() {
        return find(bound, &meta);
    }
    let mut folders = vec![bound.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                folders.push(entry.path());
            } else if kind.is_file() {
                let found = entry
                    .metadata()
                    .ok()
                    .and_then(|meta| find(&entry.path(), &meta));
                if found.is_some() {
                    return found;
                }
            }
        }
    }
    None
}

/// Whether two writable paths (resolved) of two agents overlap: one is,
/// holds or lies in the other, compared by identity along each one's
/// folders (a folder bound or linked under two names is one folder).
pub(crate) fn overlapping(a: &Path, b: &Path) -> bool {
    let (Some(id_a), Some(id_b)) = (FileId::at(a), FileId::at(b)) else {
        return a.starts_with(b) || b.starts_with(a);
    };
    let holds = |path: &Path, id: FileId| path.ancestors().any(|p| FileId::at(p) == Some(id));
    holds(a, id_b) || holds(b, id_a)
}

/// What the configuration file is called in the log.
const CONFIG_FILE: &str = "the configuration file";

/// The guards of one `up` (see the module documentation): `programs` are
/// the agents' programs as found on `PATH`.
pub(crate) fn guards(
    agents: &[AgentSpec],
    programs: &[PathBuf],
    config_file: Option<&Path>,
    exe: &Path,
    credentials: &[PathBuf],
    human_home: Option<&Path>,
) -> Vec<Guard> {
    let mut guards = Vec::new();
    let mut add = |path: &Path, what: &'static str, whole: bool| {
        guards.extend(Guard::new(path, what, whole));
    };
    if let Some(file) = config_file {
        add(file, CONFIG_FILE, false);
    }
    for agent in agents {
        add(&agent.config_dir, "the configuration's folder", true);
        for arg in &agent.args {
            let named = agent.cwd().join(arg);
            if named.is_file() {
                add(&named, "a file a command of the configuration names", false);
            }
        }
    }
    for program in programs {
        add(program, "a program the configuration runs", false);
    }
    add(exe, "the mosaic-bus binary", false);
    for file in credentials {
        add(file, "a service credential's file", false);
    }
    if let Some(home) = human_home {
        add(home, "the human's home", false);
        for name in STARTUP.iter().chain(&[".config"]) {
            add(
                &home.join(name),
                "a start-up file of the human's home",
                false,
            );
        }
        for name in STARTUP_DIRS {
            add(
                &home.join(name),
                "a start-up folder of the human's home",
                true,
            );
        }
    }
    guards
}
