//! The sandbox of one agent as one value, a [`Plan`]: its namespaces (the
//! network mode), an ordered list of mounts, its working directory, its
//! environment, and the seccomp and Landlock rules `sandbox-exec` applies.
//! [`build`] makes it from the configuration, in one place, and checks it;
//! [`Plan::bwrap_args`] renders it to bwrap's arguments, in one place.
//! Tests assert on the plan itself.
//!
//! # What a plan grants
//!
//! The agent's root is bwrap's fresh tmpfs, read-only at the end. Into it,
//! in this order (bwrap applies its mounts in the order given, so a later
//! one shows through an earlier one):
//!
//! 1. the system's program folders, read-only, as the host has them: a
//!    folder is bound, a symbolic link (merged `/usr`: `/bin -> usr/bin`)
//!    stays a link ([`SYSTEM`]);
//! 2. a short list of `/etc` ([`ETC`]): users and groups, name service,
//!    hosts and DNS, TLS certificates, the time zone, the loader's cache,
//!    Debian's alternatives (so `awk` resolves); nothing else of `/etc`, so
//!    no `shadow`, no `sudoers`, no ssh keys;
//! 3. a fresh `/proc` (the sandbox's own processes only) and a minimal
//!    `/dev`;
//! 4. a private `/tmp` and a home of its own, [`SANDBOX_HOME`], each an
//!    empty tmpfs capped at the agent's `tmpMiB`;
//! 5. this executable, read-only at its own path (agents call
//!    `mosaic-bus call`), and the agent's program, when no other bind holds
//!    it already;
//! 6. the configuration's folder and the `read` paths read-only, the
//!    `workdir` and the `write` paths writable, then the configuration file
//!    read-only again;
//! 7. the data root as an empty tmpfs holding only the broker's socket,
//!    then made read-only, so an agent cannot leave a file where the
//!    broker's would be;
//! 8. with `"network": "proxy"`, the socket of `up`'s forward proxy for the
//!    run at [`PROXY_SOCKET`] (`sandbox-exec`'s bridge serves it on the
//!    sandbox's loopback: [`super::bridge_main`]);
//! 9. the root made read-only: nothing but the tmpfs of 4 and the writable
//!    binds of 6 takes a write.
//!
//! Nothing else of the host is there: no `/var`, `/opt`, `/srv`, `/mnt`,
//! `/root`, `/run` (but the proxy's socket), `/home` (no other home, the human's neither), no
//! `/sys`, no tmux or session-bus socket.
//!
//! # What [`build`] refuses
//!
//! `bad-config` for a bound path that does not exist; `unsafe-path` for one
//! that lies in the data root or the secrets folder or holds either, one
//! that is the human's home or holds it, and for any bound path (the system
//! folders included) that holds a file of a service credential the broker
//! reads (`{"file": …}` in the business): agents never hold a service
//! token.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use mosaic_domain::Refusal;

use super::bwrap::{namespace_args, SANDBOX_HOME};
use super::exec_main::DENIED_CALLS;
use super::network::PROXY_SOCKET;
use super::paths::{check_writable, open_granted, Guard, Opened};
use crate::commands::team::{AgentSpec, Network};
use crate::commands::up::harness::Grants;

/// The system's program folders, bound read-only where the host has
/// folders and made links where it has links.
pub(crate) const SYSTEM: [&str; 7] = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// What of `/etc` an agent sees, where the host has it: users and groups
/// (`passwd`, `group`: the names `ls` and `id` show), the name service
/// (`nsswitch.conf`, `host.conf`, `gai.conf`, `services`, `protocols`),
/// hosts and DNS (`hosts`, `resolv.conf`), TLS certificates (`ssl`,
/// `ca-certificates`, `ca-certificates.conf`, `pki`), the time zone
/// (`localtime`, `timezone`), the loader (`ld.so.cache`, `ld.so.conf`,
/// `ld.so.conf.d`) and Debian's `alternatives` (links such as `awk` go
/// through it). A symbolic link among them is followed on the host: what
/// is bound is the file it names.
pub const ETC: [&str; 19] = [
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "services",
    "protocols",
    "hosts",
    "resolv.conf",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
];

/// Where things are, for the sandbox of every agent of one `up`: all
/// absolute and, but for `human_home`, existing.
#[derive(Debug, Clone)]
pub(crate) struct Places {
    /// The host's root, `/` but in tests: the system folders and `/etc`
    /// are read from here.
    pub(crate) host_root: PathBuf,
    /// This executable.
    pub(crate) exe: PathBuf,
    /// The broker's socket, the one path of the data root bound in.
    pub(crate) socket: PathBuf,
    /// The data root.
    pub(crate) data_root: PathBuf,
    /// The secrets folder.
    pub(crate) secrets: PathBuf,
    /// `up`'s own `HOME`, the human's.
    pub(crate) human_home: Option<PathBuf>,
    /// The configuration file.
    pub(crate) config_file: Option<PathBuf>,
    /// The files of the business's service credentials, which the broker
    /// reads and no agent may.
    pub(crate) credentials: Vec<PathBuf>,
    /// What no writable path may be or hold (`paths::guards`).
    pub(crate) guards: Vec<Guard>,
}

/// One mount of a sandbox, in bwrap's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mount {
    /// A host path, read-only, at `dest`.
    ReadOnly { source: PathBuf, dest: PathBuf },
    /// A folder of `up`'s own making, writable, at `dest`: a harness
    /// agent's state folder (`crate::commands::up::harness`).
    Writable { source: PathBuf, dest: PathBuf },
    /// A path of the configuration, checked and held open (`fd`, this
    /// process's descriptor, passed on to bwrap): bound from the
    /// descriptor, so what is bound is what was checked. `path` is where
    /// the kernel says it is.
    Granted {
        fd: i32,
        path: PathBuf,
        dest: PathBuf,
        writable: bool,
    },
    /// A symbolic link at `dest` to `target`.
    Symlink { target: PathBuf, dest: PathBuf },
    /// An empty tmpfs.
    Tmpfs(PathBuf),
    /// An empty tmpfs the agent writes, capped at `bytes`: its `/tmp` and
    /// its home.
    Scratch { dest: PathBuf, bytes: u64 },
    /// The sandbox's own `/proc`.
    Proc(PathBuf),
    /// A minimal `/dev`.
    Dev(PathBuf),
    /// The socket of `up`'s forward proxy for this run, bound read-only
    /// at [`PROXY_SOCKET`] (an agent with `"network": "proxy"`): the
    /// socket is made per run, at launch, so the plan names its place and
    /// [`Plan::bwrap_args`] is given the socket.
    ProxySocket,
    /// A mount made read-only once everything under it is in place.
    RemountRo(PathBuf),
}

/// One agent's sandbox: see the module documentation.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Its network: `none` adds a network namespace of its own.
    pub(crate) network: Network,
    /// Its mounts, in the order bwrap applies them.
    pub(crate) mounts: Vec<Mount>,
    /// Its working directory inside.
    pub(crate) chdir: PathBuf,
    /// The program bwrap's `sandbox-exec` executes, as found on `PATH`.
    pub(crate) program: PathBuf,
    /// Its environment before `up`'s `MOSAIC_*` and `PATH`: the
    /// allow-list's variables, with `HOME` and `TMPDIR` its own.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Whether `sandbox-exec` applies the Landlock scopes.
    pub(crate) landlock: bool,
    /// The `RLIMIT_NPROC` `sandbox-exec` sets: the most processes and
    /// threads of the sandbox (where the kernel counts them: not for
    /// root, docs/host.md).
    pub(crate) processes: u32,
    /// The system calls `sandbox-exec`'s seccomp filter refuses outright
    /// (beyond its argument rules: see `exec_main::seccomp_filters`).
    pub(crate) seccomp: &'static [(&'static str, i64)],
    /// The descriptors of the [`Mount::Granted`] paths, open until bwrap
    /// is spawned with them.
    pub(crate) held: Vec<OwnedFd>,
}

impl Plan {
    /// bwrap's arguments, up to and including `--`; `proxy` is the proxy's
    /// socket for this run, for a [`Mount::ProxySocket`].
    pub(crate) fn bwrap_args(&self, proxy: Option<&Path>) -> Vec<OsString> {
        let mut args = namespace_args(self.network);
        let mut push = |words: &[&OsStr]| args.extend(words.iter().map(|w| w.to_os_string()));
        for mount in &self.mounts {
            match mount {
                Mount::ReadOnly { source, dest } => {
                    push(&["--ro-bind".as_ref(), source.as_os_str(), dest.as_os_str()]);
                }
                Mount::Writable { source, dest } => {
                    push(&["--bind".as_ref(), source.as_os_str(), dest.as_os_str()]);
                }
                Mount::Granted {
                    fd, dest, writable, ..
                } => {
                    let how = if *writable {
                        "--bind-fd"
                    } else {
                        "--ro-bind-fd"
                    };
                    let fd = OsString::from(fd.to_string());
                    push(&[how.as_ref(), &fd, dest.as_os_str()]);
                }
                Mount::Symlink { target, dest } => {
                    push(&["--symlink".as_ref(), target.as_os_str(), dest.as_os_str()]);
                }
                Mount::Tmpfs(dest) => push(&["--tmpfs".as_ref(), dest.as_os_str()]),
                Mount::Scratch { dest, bytes } => {
                    let bytes = OsString::from(bytes.to_string());
                    push(&[
                        "--size".as_ref(),
                        &bytes,
                        "--tmpfs".as_ref(),
                        dest.as_os_str(),
                    ]);
                }
                Mount::Proc(dest) => push(&["--proc".as_ref(), dest.as_os_str()]),
                Mount::Dev(dest) => push(&["--dev".as_ref(), dest.as_os_str()]),
                Mount::ProxySocket => {
                    if let Some(socket) = proxy {
                        push(&[
                            "--ro-bind".as_ref(),
                            socket.as_os_str(),
                            PROXY_SOCKET.as_ref(),
                        ]);
                    }
                }
                Mount::RemountRo(dest) => push(&["--remount-ro".as_ref(), dest.as_os_str()]),
            }
        }
        push(&["--chdir".as_ref(), self.chdir.as_os_str()]);
        push(&["--".as_ref()]);
        args
    }

    /// The host paths it binds, each with whether it is writable.
    fn binds(&self) -> impl Iterator<Item = (&Path, bool)> {
        self.mounts.iter().filter_map(|mount| match mount {
            Mount::ReadOnly { source, .. } => Some((source.as_path(), false)),
            Mount::Writable { source, .. } => Some((source.as_path(), true)),
            Mount::Granted { path, writable, .. } => Some((path.as_path(), *writable)),
            Mount::Symlink { .. }
            | Mount::Tmpfs(_)
            | Mount::Scratch { .. }
            | Mount::Proc(_)
            | Mount::Dev(_)
            | Mount::ProxySocket
            | Mount::RemountRo(_) => None,
        })
    }
}

/// The system part of a plan, read from the host at `root`: [`SYSTEM`]
/// and [`ETC`], what the host has of them.
fn system_mounts(root: &Path) -> Vec<Mount> {
    let mut mounts = Vec::new();
    for name in SYSTEM {
        let source = root.join(name);
        let dest = Path::new("/").join(name);
        match std::fs::symlink_metadata(&source) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&source) {
                    mounts.push(Mount::Symlink { target, dest });
                }
            }
            Ok(meta) if meta.is_dir() => mounts.push(Mount::ReadOnly { source, dest }),
            Ok(_) | Err(_) => {}
        }
    }
    for name in ETC {
        let source = root.join("etc").join(name);
        // `exists` follows links: a dangling one is left out.
        if source.exists() {
            let dest = Path::new("/etc").join(name);
            mounts.push(Mount::ReadOnly { source, dest });
        }
    }
    mounts
}

/// The granted paths of `spec`'s sandbox, opened and checked: the
/// configuration's folder and `read` paths read-only, then `workdir` and
/// `write` paths writable.
///
/// Sorted by depth, stable: a folder is bound before a path inside it, so
/// the inner bind shows through (a `write` path inside a `read` one stays
/// writable). The working directory comes first in the returned pair: the
/// `workdir` resolved, or else the configuration's folder.
fn resolve(spec: &AgentSpec, places: &Places) -> Result<(PathBuf, Vec<(Opened, bool)>), Refusal> {
    let hidden = [&places.data_root, &places.secrets]
        .into_iter()
        .map(|p| std::fs::canonicalize(p).map_err(|_| Refusal::UnsafePath))
        .collect::<Result<Vec<_>, _>>()?;
    let home = places
        .human_home
        .as_deref()
        .and_then(|h| std::fs::canonicalize(h).ok());
    let wanted = std::iter::once((&spec.config_dir, false))
        .chain(spec.read.iter().map(|p| (p, false)))
        .chain(spec.workdir.iter().map(|p| (p, true)))
        .chain(spec.write.iter().map(|p| (p, true)));
    let mut binds = Vec::new();
    let mut cwd = None;
    for (path, writable) in wanted {
        let opened = open_granted(spec, path)?;
        if spec.workdir.as_ref() == Some(path) || (cwd.is_none() && path == &spec.config_dir) {
            cwd = Some(opened.path.clone());
        }
        let resolved = &opened.path;
        let shows = |h: &PathBuf| resolved.starts_with(h) || h.starts_with(resolved);
        let why = if hidden.iter().any(shows) {
            Some("a path the sandbox would bind shows the data root or the secrets folder")
        } else if home.as_ref().is_some_and(|home| home.starts_with(resolved)) {
            // A folder inside the human's home (a harness's own, say) may
            // be bound; the home itself, or what holds it, may not.
            Some("a path the sandbox would bind shows the human's home")
        } else {
            None
        };
        if let Some(why) = why {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                role = spec.role.as_str(),
                path = &*mosaic_adapters::fs::neutral_path(resolved),
                "{why}"
            );
            return Err(Refusal::UnsafePath);
        }
        if writable {
            check_writable(spec, resolved, &places.guards)?;
        }
        binds.push((opened, writable));
    }
    binds.sort_by_key(|(opened, _)| opened.path.components().count());
    let cwd = cwd.unwrap_or_else(|| spec.cwd().to_path_buf());
    Ok((cwd, binds))
}

/// `spec`'s plan: `program` is its program as found (absolute), `grants`
/// what a harness `up` starts needs beyond it (its install folder
/// read-only beside the system's, its run folder read-only and its state
/// folder writable in the data root's tmpfs), `env` its environment from
/// the allow-list, `landlock` whether the kernel has the scopes. See the
/// module documentation for what it grants and refuses.
pub(crate) fn build(
    spec: &AgentSpec,
    places: &Places,
    program: &Path,
    grants: Option<&Grants>,
    landlock: bool,
    mut env: Vec<(OsString, OsString)>,
) -> Result<Plan, Refusal> {
    let (chdir, binds) = resolve(spec, places)?;
    let mut mounts = system_mounts(&places.host_root);
    mounts.push(Mount::Proc("/proc".into()));
    mounts.push(Mount::Dev("/dev".into()));
    let bytes = u64::from(spec.tmp_mib) * 1024 * 1024;
    for dest in ["/tmp", SANDBOX_HOME] {
        mounts.push(Mount::Scratch {
            dest: dest.into(),
            bytes,
        });
    }
    mounts.push(Mount::ReadOnly {
        source: places.exe.clone(),
        dest: places.exe.clone(),
    });
    let program = std::path::absolute(program).map_err(|_| Refusal::LaunchFailed)?;
    let mut folders: Vec<PathBuf> = binds.iter().map(|(o, _)| o.path.clone()).collect();
    if let Some(install) = grants.and_then(|g| g.install.as_ref()) {
        if !covered(install, &places.host_root, &folders) {
            mounts.push(Mount::ReadOnly {
                source: install.clone(),
                dest: install.clone(),
            });
            folders.push(install.clone());
        }
    }
    if !covered(&program, &places.host_root, &folders) {
        mounts.push(Mount::ReadOnly {
            source: program.clone(),
            dest: program.clone(),
        });
    }
    let mut held = Vec::new();
    for (opened, writable) in binds {
        mounts.push(Mount::Granted {
            fd: opened.fd.as_raw_fd(),
            dest: opened.path.clone(),
            path: opened.path,
            writable,
        });
        held.push(opened.fd);
    }
    if let Some(file) = &places.config_file {
        let opened = open_granted(spec, file)?;
        mounts.push(Mount::Granted {
            fd: opened.fd.as_raw_fd(),
            dest: opened.path.clone(),
            path: opened.path,
            writable: false,
        });
        held.push(opened.fd);
    }
    mounts.push(Mount::Tmpfs(places.data_root.clone()));
    mounts.push(Mount::ReadOnly {
        source: places.socket.clone(),
        dest: places.socket.clone(),
    });
    if let Some(grants) = grants {
        mounts.push(Mount::ReadOnly {
            source: grants.run_dir.clone(),
            dest: grants.run_dir.clone(),
        });
        mounts.push(Mount::Writable {
            source: grants.state.clone(),
            dest: grants.state.clone(),
        });
    }
    mounts.push(Mount::RemountRo(places.data_root.clone()));
    if spec.network == Network::Proxy {
        mounts.push(Mount::ProxySocket);
    }
    mounts.push(Mount::RemountRo("/".into()));
    env.retain(|(name, _)| name != "HOME" && name != "TMPDIR");
    env.push(("HOME".into(), SANDBOX_HOME.into()));
    env.push(("TMPDIR".into(), "/tmp".into()));
    let plan = Plan {
        network: spec.network,
        mounts,
        chdir,
        program,
        env,
        landlock,
        processes: spec.processes,
        seccomp: &DENIED_CALLS,
        held,
    };
    check_credentials(spec, &plan, &places.credentials)?;
    Ok(plan)
}

/// Whether `program` lies in a system folder or a folder already bound,
/// both resolved: then it needs no bind of its own.
fn covered(program: &Path, host_root: &Path, folders: &[PathBuf]) -> bool {
    let Ok(program) = std::fs::canonicalize(program) else {
        return false;
    };
    SYSTEM
        .iter()
        .filter_map(|name| std::fs::canonicalize(host_root.join(name)).ok())
        .chain(folders.iter().cloned())
        .any(|folder| program.starts_with(folder))
}

/// `unsafe-path` when a path `plan` binds holds one of the credential
/// files (both resolved).
fn check_credentials(
    spec: &AgentSpec,
    plan: &Plan,
    credentials: &[PathBuf],
) -> Result<(), Refusal> {
    let files: Vec<PathBuf> = credentials
        .iter()
        .filter_map(|f| std::fs::canonicalize(f).ok())
        .collect();
    for (source, _) in plan.binds() {
        let Ok(source) = std::fs::canonicalize(source) else {
            continue;
        };
        if files.iter().any(|file| file.starts_with(&source)) {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                role = spec.role.as_str(),
                path = &*mosaic_adapters::fs::neutral_path(&source),
                "a path the sandbox would bind holds a service credential's file, which no \
                 agent may read"
            );
            return Err(Refusal::UnsafePath);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
