//! One agent's launch as one value, a [`Plan`]: its program and arguments,
//! its environment whole ([`env`]), its network and what the proxy admits for it,
//! how its capability reaches it, and in a sandbox its walls ([`Walls`]:
//! the ordered mounts, the seccomp list and Landlock that `sandbox-exec`
//! applies, the process and memory caps). [`build`] makes it from the
//! configuration, in one place, for sandboxed and unsandboxed agents alike,
//! and checks it; [`Plan::command`] renders it to the command `up` spawns
//! (bwrap, `sandbox-exec`, the program; or the program alone), in one
//! place ([`render`]); [`Plan::view`] is what `up --dry-run` prints and
//! `up` logs at debug before each launch ([`view`]), rendered by the same
//! code. Tests assert on the plan and on its whole command line.
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
//!    `/dev`, read-only;
//! 4. a private `/dev/shm`, `/tmp` and a home of its own,
//!    [`SANDBOX_HOME`], each an empty tmpfs capped at the agent's
//!    `tmpMiB`;
//! 5. this executable, read-only at its own path (agents call
//!    `mosaic-bus call`), and the agent's program, when no other bind holds
//!    it already;
//! 6. the `read` paths read-only, the `workdir` and the `write` paths
//!    writable, then inside each writable folder its mandatory read-only
//!    paths ([`mandatory`]: git's configuration and hooks, tool, editor and
//!    harness settings, start-up files; an empty read-only placeholder for
//!    one that is missing), then each file of the configuration's folder
//!    that the agent's arguments name, and the configuration file, each
//!    read-only by itself: never the configuration's folder, so nothing
//!    else beside the configuration (a `.env`, say) is there;
//! 7. the data root as an empty tmpfs holding only the broker's socket
//!    (and a harness's run folder read-only, its state folder writable
//!    but for the configuration files `up` writes there, read-only), then
//!    made read-only, so an agent cannot leave a file where the broker's
//!    would be;
//! 8. with `"network": "proxy"`, the socket of `up`'s forward proxy for the
//!    run at [`PROXY_SOCKET`](super::network::PROXY_SOCKET)
//!    (`sandbox-exec`'s bridge serves it on the sandbox's loopback:
//!    [`super::bridge_main`]);
//! 9. the root made read-only: nothing but the tmpfs of 4 and the writable
//!    binds of 6 takes a write.
//!
//! Nothing else of the host is there: no `/var`, `/opt`, `/srv`, `/mnt`,
//! `/root`, `/run` (but the proxy's socket), `/home` (no other home, the
//! human's neither), no `/sys`, no tmux or session-bus socket.
//!
//! # What [`build`] refuses
//!
//! `launch-failed` for a program that is not an executable file;
//! `bad-config` for a bound path that does not exist; `unsafe-path` for one
//! that lies in the data root or the secrets folder or holds either, one
//! that is the human's home or holds it, and for any bound path (the system
//! folders included) that holds a file of a service credential the broker
//! reads (`{"file": …}` in the business): agents never hold a service
//! token.
//!
//! # What only a launch knows
//!
//! A plan is whole before anything starts, but for four values a launch
//! makes: the feed's cursor (`MOSAIC_BUS_SINCE`), the capability's
//! descriptor (its number), the run's proxy socket and its cgroup. The
//! command takes them at its render ([`render::Launch`]); the view shows
//! each as a placeholder (`<since>`, `<cap-fd>`, `<proxy-socket>`, and
//! `<fd>` for a checked path's descriptor), and leaves out the cgroup's
//! `sandbox-cgroup --cgroup DIR… --` prefix, which `up` adds where it
//! made one.

pub(crate) mod env;
pub(crate) mod mandatory;
pub(crate) mod render;
pub(crate) mod view;

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use mosaic_domain::evidence::Harness;
use mosaic_domain::{Refusal, RoleInstance, RunId};

use super::bwrap::SANDBOX_HOME;
use super::exec_main::DENIED_CALLS;
use super::paths::{check_writable, open_granted, Guard, Opened};
use crate::commands::team::{AgentSpec, Allow, Network};
use crate::commands::up::console::CONSOLE_ENV;
use crate::commands::up::harness::{Grants, Input, Prepared};
use crate::commands::up::launch::{find_program, RUN_ID_ENV, SINCE_ENV};
use env::Env;
use mandatory::Kept;
use mosaic_client::cap::{CAP_FD_ENV, CAP_FILE_ENV, SOCKET_ENV};

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
/// absolute and, but for `human_home` and (before `up` makes them, and
/// under `--dry-run`) the data root, its socket and the secrets folder,
/// existing.
#[derive(Debug, Clone)]
pub(crate) struct HostPaths {
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

/// A working bubblewrap and where things are for it: what the sandboxed
/// plans of one `up` share.
#[derive(Debug)]
pub(crate) struct Sandbox {
    /// The `bwrap` that was seen to make a sandbox here.
    pub(crate) bwrap: PathBuf,
    /// Whether the kernel has Landlock's scopes, which `sandbox-exec` then
    /// applies (`--landlock`).
    pub(crate) landlock: bool,
    pub(crate) places: HostPaths,
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
    /// at [`PROXY_SOCKET`](super::network::PROXY_SOCKET) (an agent with
    /// `"network": "proxy"`): the socket is made per run, at launch, so the
    /// plan names its place and the launch gives the socket
    /// ([`render::Launch`]).
    ProxySocket,
    /// A mount made read-only once everything under it is in place.
    RemountRo(PathBuf),
}

/// How the capability reaches the agent's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// On the inherited descriptor `MOSAIC_BUS_CAP_FD` names: an agent
    /// `up` runs as a command, which reads the `ready` line itself.
    Descriptor,
    /// As a private file at `path`, which `MOSAIC_BUS_CAP_FILE` names: a
    /// harness `up` starts, which would not pass a descriptor on. In a
    /// sandbox `sandbox-exec` waits for `ready` and copies the descriptor
    /// into its `/tmp` (`--cap-file`); without one `up` writes the run's
    /// file once the launch is bound, and `sh` waits for `ready` before it
    /// becomes the program. `stdin_null`: the program's standard input is
    /// `/dev/null` (Claude Code, which would read a pipe as more prompt).
    File { path: PathBuf, stdin_null: bool },
}

/// The walls of a sandboxed agent: see the module documentation.
#[derive(Debug)]
pub(crate) struct Walls {
    /// The `bwrap` `up` runs.
    pub(crate) bwrap: PathBuf,
    /// This executable, at the same path inside: `sandbox-exec` and
    /// `sandbox-cgroup`.
    pub(crate) exe: PathBuf,
    /// Its mounts, in the order bwrap applies them.
    pub(crate) mounts: Vec<Mount>,
    /// Whether `sandbox-exec` applies the Landlock scopes.
    pub(crate) landlock: bool,
    /// The system calls `sandbox-exec`'s seccomp filter refuses outright
    /// (`--deny`; beyond its argument rules, see
    /// `exec_main::seccomp_filters`): every one it knows.
    pub(crate) seccomp: Vec<&'static str>,
    /// The `RLIMIT_NPROC` `sandbox-exec` sets, and the cgroup's
    /// `pids.max`: the most processes and threads of the sandbox.
    pub(crate) processes: u32,
    /// The cgroup's memory cap, in MiB, where `up` makes one.
    pub(crate) memory_mib: u32,
    /// The descriptors of the [`Mount::Granted`] paths, open until bwrap
    /// is spawned with them.
    pub(crate) held: Vec<OwnedFd>,
    /// The broker's socket, at the same path inside, which the
    /// supervisor's connector reaches for the agent (`--bus-socket`).
    pub(crate) socket: PathBuf,
}

/// One agent's launch: see the module documentation.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) role: RoleInstance,
    pub(crate) run: RunId,
    pub(crate) harness: Harness,
    /// The program, as found (absolute).
    pub(crate) program: PathBuf,
    /// Its arguments: the command's, or the harness's as `up` prepared
    /// them (`"args"` included).
    pub(crate) args: Vec<OsString>,
    /// For a harness `up` starts, the first line `--version` printed.
    pub(crate) version: Option<String>,
    /// Where the program runs: its `workdir` (inside a sandbox, the
    /// kernel's name of the granted one), else the configuration's folder,
    /// or inside a sandbox its own empty home.
    pub(crate) cwd: PathBuf,
    /// The environment the command gets, whole.
    pub(crate) env: Env,
    /// Its network: the configuration's in a sandbox, else the host's.
    pub(crate) network: Network,
    /// What the proxy admits for it (`"network": "proxy"` in a sandbox):
    /// its `"allow"` list and a harness's model endpoint.
    pub(crate) allow: Vec<Allow>,
    /// The loopback ports `sandbox-exec` forwards through the proxy: a
    /// harness's loopback model endpoint.
    pub(crate) forwards: Vec<u16>,
    pub(crate) handoff: Handoff,
    /// Its sandbox, unless it runs without one.
    pub(crate) walls: Option<Walls>,
}

/// What one agent's plan is made from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Making<'a> {
    pub(crate) spec: &'a AgentSpec,
    pub(crate) run: &'a RunId,
    /// Its harness's launch, when `up` starts one.
    pub(crate) prepared: Option<&'a Prepared>,
    /// Its harness program's version, when one was read.
    pub(crate) version: Option<&'a str>,
    /// The agents' `PATH`: where a bare program name is found, and the
    /// `PATH` they get.
    pub(crate) path: &'a OsStr,
    /// `up`'s own environment, of which the allow-list passes.
    pub(crate) vars: &'a [(OsString, OsString)],
    /// The variables that hold the business's service tokens: never
    /// passed.
    pub(crate) secret_env: &'a [String],
    /// The broker's socket.
    pub(crate) socket: &'a Path,
    /// Whether `up --console` opens the human's console
    /// (`MOSAIC_CONSOLE=1`).
    pub(crate) console: bool,
    /// The sandbox, unless the agents run without one.
    pub(crate) sandbox: Option<&'a Sandbox>,
}

/// The plan of one agent, made from `making` and checked: see the module
/// documentation for what it grants and refuses.
///
/// # Errors
/// `launch-failed` for a program that is not an executable file;
/// `bad-config` and `unsafe-path` for a path the sandbox would bind.
pub(crate) fn build(making: &Making<'_>) -> Result<Plan, Refusal> {
    let spec = making.spec;
    let found = match making.prepared {
        Some(prepared) => Some(prepared.program.clone()),
        None => find_program(&spec.program, making.path),
    };
    let program = found
        .and_then(|program| std::path::absolute(program).ok())
        .ok_or_else(|| {
            tracing::warn!(
                code = Refusal::LaunchFailed.code(),
                role = spec.role.as_str(),
                program = &*mosaic_adapters::fs::neutral_path(&spec.program),
                "the agent's program is not an executable file"
            );
            Refusal::LaunchFailed
        })?;
    let (args, handoff) = match making.prepared {
        Some(prepared) => {
            let stdin_null = match prepared.input {
                Input::Null => true,
                Input::Line(_) => false,
            };
            let path = prepared.cap_file.clone();
            (prepared.args.clone(), Handoff::File { path, stdin_null })
        }
        None => (
            spec.args.iter().map(OsString::from).collect(),
            Handoff::Descriptor,
        ),
    };
    let walls = making
        .sandbox
        .map(|sandbox| walls(spec, sandbox, &program, making.prepared.map(|p| &p.grants)))
        .transpose()?;
    let (cwd, network) = match &walls {
        Some((_, chdir)) => (chdir.clone(), spec.network),
        None => (spec.cwd().to_path_buf(), Network::Host),
    };
    let proxied = network == Network::Proxy;
    let allow = match (proxied, making.prepared) {
        (false, _) => Vec::new(),
        (true, prepared) => spec
            .allow
            .iter()
            .chain(prepared.map(|p| &p.endpoint))
            .cloned()
            .collect(),
    };
    let forwards = match (proxied, making.prepared) {
        (true, Some(prepared)) => prepared.forward.into_iter().collect(),
        (true, None) | (false, _) => Vec::new(),
    };
    let env = env_of(making, walls.is_some(), &handoff);
    Ok(Plan {
        role: spec.role.clone(),
        run: making.run.clone(),
        harness: spec.harness,
        program,
        args,
        version: making.version.map(str::to_owned),
        cwd,
        env,
        network,
        allow,
        forwards,
        handoff,
        walls: walls.map(|(walls, _)| walls),
    })
}

/// The walls of `spec`'s sandbox and the folder it runs in: `program` is
/// its program as found (absolute), `grants` what a harness `up` starts
/// needs beyond it (its install folder read-only beside the system's, its
/// run folder read-only and its state folder writable in the data root's
/// tmpfs, with the human's own setup read-only in it under
/// `"userConfig"`).
fn walls(
    spec: &AgentSpec,
    sandbox: &Sandbox,
    program: &Path,
    grants: Option<&Grants>,
) -> Result<(Walls, PathBuf), Refusal> {
    let places = &sandbox.places;
    let (chdir, binds) = resolve(spec, places)?;
    let mut mounts = system_mounts(&places.host_root);
    mounts.push(Mount::Proc("/proc".into()));
    mounts.push(Mount::Dev("/dev".into()));
    // Nothing is written in `/dev` but shared memory, which is capped as
    // `/tmp` is: bwrap's `/dev` is a tmpfs with no cap of its own.
    mounts.push(Mount::RemountRo("/dev".into()));
    let bytes = u64::from(spec.tmp_mib) * 1024 * 1024;
    for dest in ["/dev/shm", "/tmp", SANDBOX_HOME] {
        mounts.push(Mount::Scratch {
            dest: dest.into(),
            bytes,
        });
    }
    mounts.push(Mount::ReadOnly {
        source: places.exe.clone(),
        dest: places.exe.clone(),
    });
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
    if !covered(program, &places.host_root, &folders) {
        mounts.push(Mount::ReadOnly {
            source: program.to_path_buf(),
            dest: program.to_path_buf(),
        });
    }
    let mut held = Vec::new();
    let mut protected = Vec::new();
    for (opened, writable) in &binds {
        if *writable {
            for kept in mandatory::inside(spec, &opened.path)? {
                match kept {
                    Kept::Existing(opened) => {
                        protected.push(Mount::Granted {
                            fd: opened.fd.as_raw_fd(),
                            dest: opened.path.clone(),
                            path: opened.path,
                            writable: false,
                        });
                        held.push(opened.fd);
                    }
                    Kept::File(dest) => protected.push(Mount::ReadOnly {
                        source: "/dev/null".into(),
                        dest,
                    }),
                    Kept::Folder(dest) => {
                        protected.push(Mount::Tmpfs(dest.clone()));
                        protected.push(Mount::RemountRo(dest));
                    }
                }
            }
        }
    }
    for (opened, writable) in binds {
        mounts.push(Mount::Granted {
            fd: opened.fd.as_raw_fd(),
            dest: opened.path.clone(),
            path: opened.path,
            writable,
        });
        held.push(opened.fd);
    }
    mounts.extend(protected);
    for opened in named_files(spec)? {
        mounts.push(Mount::Granted {
            fd: opened.fd.as_raw_fd(),
            dest: opened.path.clone(),
            path: opened.path,
            writable: false,
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
        for file in &grants.fixed {
            mounts.push(Mount::ReadOnly {
                source: file.clone(),
                dest: file.clone(),
            });
        }
        for (source, dest) in &grants.user {
            mounts.push(Mount::ReadOnly {
                source: source.clone(),
                dest: dest.clone(),
            });
        }
    }
    mounts.push(Mount::RemountRo(places.data_root.clone()));
    if spec.network == Network::Proxy {
        mounts.push(Mount::ProxySocket);
    }
    mounts.push(Mount::RemountRo("/".into()));
    check_credentials(spec, &mounts, &places.credentials)?;
    let walls = Walls {
        bwrap: sandbox.bwrap.clone(),
        exe: places.exe.clone(),
        mounts,
        landlock: sandbox.landlock,
        seccomp: DENIED_CALLS.iter().map(|(name, _)| *name).collect(),
        processes: spec.processes,
        memory_mib: spec.memory_mib,
        held,
        socket: places.socket.clone(),
    };
    Ok((walls, chdir))
}

impl Walls {
    /// The configuration's paths these walls bind writable (`workdir`,
    /// `write`), each where the kernel says it is.
    pub(crate) fn writable_grants(&self) -> impl Iterator<Item = &Path> {
        self.mounts.iter().filter_map(|mount| match mount {
            Mount::Granted { path, writable, .. } => writable.then_some(path.as_path()),
            Mount::ReadOnly { .. }
            | Mount::Writable { .. }
            | Mount::Symlink { .. }
            | Mount::Tmpfs(_)
            | Mount::Scratch { .. }
            | Mount::Proc(_)
            | Mount::Dev(_)
            | Mount::ProxySocket
            | Mount::RemountRo(_) => None,
        })
    }
}

/// The host paths `mounts` binds, each with whether it is writable.
fn binds(mounts: &[Mount]) -> impl Iterator<Item = (&Path, bool)> {
    mounts.iter().filter_map(|mount| match mount {
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

/// `path` with links resolved as far as it exists, the rest as written: a
/// data root or secrets folder `up` has not made yet (or under
/// `--dry-run`, will not make) is compared where it would be.
fn resolved_so_far(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return Some(rest.iter().rev().fold(real, |p, name| p.join(name)));
        }
        rest.push(at.file_name()?.to_owned());
        at = at.parent()?;
    }
}

/// The environment of `making`'s agent, whole: the allow-list's
/// variables of `up`'s own ([`env::allowed`]), in a sandbox with `HOME` and
/// `TMPDIR` its own; `MOSAIC_RUN_ID`, `MOSAIC_BUS_SINCE` (the feed's
/// cursor at the launch), `MOSAIC_BUS_SOCKET` and the agents' `PATH`; the
/// identity its git commits carry (`GIT_AUTHOR_*`, `GIT_COMMITTER_*`); the
/// capability's descriptor (`MOSAIC_BUS_CAP_FD`, its number at the launch)
/// or, for a harness without a sandbox, its file (`MOSAIC_BUS_CAP_FILE`:
/// in a sandbox `sandbox-exec` sets it); a harness's own variables; and
/// with the console, `MOSAIC_CONSOLE=1`. A later one of the same name
/// wins, as `up`'s own do over the allow-list's.
fn env_of(making: &Making<'_>, sandboxed: bool, handoff: &Handoff) -> Env {
    let mut env = Env::default();
    for (name, value) in env::allowed(making.spec, making.vars, making.secret_env) {
        env.set(name, value);
    }
    if sandboxed {
        env.set("HOME".into(), SANDBOX_HOME.into());
        env.set("TMPDIR".into(), "/tmp".into());
    }
    env.set(RUN_ID_ENV.into(), making.run.as_str().into());
    env.set_at_launch(SINCE_ENV.into(), env::AtLaunch::Since);
    env.set(SOCKET_ENV.into(), making.socket.into());
    env.set("PATH".into(), making.path.into());
    for (name, value) in making.spec.work.git.env() {
        env.set(name.into(), value.into());
    }
    match (handoff, sandboxed) {
        (Handoff::File { path, .. }, false) => env.set(CAP_FILE_ENV.into(), path.into()),
        (Handoff::Descriptor, _) | (Handoff::File { .. }, true) => {
            env.set_at_launch(CAP_FD_ENV.into(), env::AtLaunch::CapFd);
        }
    }
    for (name, value) in making.prepared.iter().flat_map(|p| &p.env) {
        env.set(name.clone(), value.clone());
    }
    if making.console {
        env.set(CONSOLE_ENV.into(), "1".into());
    }
    env
}

/// The system part of a plan, read from the host at `root`: [`SYSTEM`]
/// and [`ETC`], what the host has of them.
pub(crate) fn system_mounts(root: &Path) -> Vec<Mount> {
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
/// `read` paths read-only, then `workdir` and `write` paths writable.
///
/// Sorted by depth, stable: a folder is bound before a path inside it, so
/// the inner bind shows through (a `write` path inside a `read` one stays
/// writable). The working directory comes first in the returned pair: the
/// `workdir` resolved, or else the agent's own empty home
/// ([`SANDBOX_HOME`]), never the configuration's folder.
fn resolve(
    spec: &AgentSpec,
    places: &HostPaths,
) -> Result<(PathBuf, Vec<(Opened, bool)>), Refusal> {
    let hidden = [&places.data_root, &places.secrets]
        .into_iter()
        .map(|p| resolved_so_far(p).ok_or(Refusal::UnsafePath))
        .collect::<Result<Vec<_>, _>>()?;
    let home = places
        .human_home
        .as_deref()
        .and_then(|h| std::fs::canonicalize(h).ok());
    let wanted = spec
        .read
        .iter()
        .map(|p| (p, false))
        .chain(spec.workdir.iter().map(|p| (p, true)))
        .chain(spec.write.iter().map(|p| (p, true)));
    let mut binds = Vec::new();
    let mut cwd = None;
    for (path, writable) in wanted {
        let opened = open_granted(spec, path)?;
        if spec.workdir.as_ref() == Some(path) {
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
    let cwd = cwd.unwrap_or_else(|| PathBuf::from(SANDBOX_HOME));
    Ok((cwd, binds))
}

/// The files in the configuration's folder that `spec`'s arguments name
/// (a script, a harness's extension: the configuration made them absolute
/// when the agent has no `workdir`), each opened and checked, to be bound
/// read-only by itself: nothing else of that folder is in the sandbox.
fn named_files(spec: &AgentSpec) -> Result<Vec<Opened>, Refusal> {
    let Ok(folder) = std::fs::canonicalize(&spec.config_dir) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for arg in &spec.args {
        let path = Path::new(arg);
        let inside = std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(&folder));
        if path.is_absolute() && path.is_file() && inside {
            let opened = open_granted(spec, path)?;
            if !files.iter().any(|o: &Opened| o.path == opened.path) {
                files.push(opened);
            }
        }
    }
    Ok(files)
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

/// `unsafe-path` when a path `mounts` binds holds one of the credential
/// files (both resolved).
fn check_credentials(
    spec: &AgentSpec,
    mounts: &[Mount],
    credentials: &[PathBuf],
) -> Result<(), Refusal> {
    let files: Vec<PathBuf> = credentials
        .iter()
        .filter_map(|f| std::fs::canonicalize(f).ok())
        .collect();
    for (source, _) in binds(mounts) {
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
