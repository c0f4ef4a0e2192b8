//! The sandbox `up` starts each agent in: bubblewrap (`bwrap`), with the
//! argument list built here, and inside it this binary's `sandbox-exec`,
//! which closes every inherited descriptor but stdio and the capability's
//! before it executes the agent's command.
//!
//! # What the sandbox is
//!
//! [`bwrap_args`] gives, in this order (bwrap applies its mounts in the
//! order given, so a later bind shows through an earlier tmpfs):
//!
//! - new user, PID, IPC, UTS and cgroup namespaces (and a network namespace
//!   with loopback only for `"network": "none"` and `"proxy"`); uid and gid [`SANDBOX_UID`] inside, never 0,
//!   no capabilities (`--cap-drop ALL`), and no further user namespaces
//!   (`--disable-userns`), so `unshare -Urm` cannot win back what was
//!   dropped;
//! - `--new-session`: the agent has no controlling terminal, so `TIOCSTI`
//!   cannot type into the human's; `--die-with-parent`: the sandbox dies
//!   with `up`;
//! - the system read-only (`--ro-bind / /`), a fresh `/proc` (only the
//!   sandbox's own processes: no other agent's `/proc/<pid>/fd` or
//!   `environ`, no `up`'s) and a minimal `/dev`;
//! - empty tmpfs over `/tmp`, `/run`, `/home`, the human's `HOME`, the data
//!   root and the secrets folder (unless one of the others hides it, so no
//!   mount point shows even its name): no `bus.sqlite`, no `writer.lock`, no
//!   `reader.cap`, no tmux or session-bus socket, no shell start-up file of
//!   the human's;
//! - this executable bound read-only at its own path (the agents call
//!   `mosaic-bus call`), the configuration's directory read-only (relative
//!   programs are there), the agent's `read` paths read-only, its `workdir`
//!   and `write` paths writable, then the configuration file read-only again
//!   (an agent must not change how the next `up` starts it), and last the
//!   one socket path inside the data root, after which the tmpfs over the
//!   data root and the secrets folder are made read-only; with a proxy,
//!   its socket at [`super::bridge::PROXY_SOCKET`];
//! - a home of its own, [`SANDBOX_HOME`] in the tmpfs, which `HOME` names.
//!
//! bwrap sets `no_new_privs` itself; `sandbox-exec` adds a seccomp
//! filter ([`seccomp_filters`]: no `ptrace`, `process_vm_*`, `TIOCSTI`,
//! `TIOCLINUX`, `io_uring_*`, `unshare`, `setns` or namespace `clone`)
//! and, where the kernel has them (Landlock ABI 6, Linux 6.12), Landlock's
//! scopes ([`restrict_scopes`]): no `connect` to an abstract Unix socket
//! and no signal outside the sandbox. Abstract sockets are named in the
//! network namespace, not in the files, so with `"network": "host"` and no
//! Landlock the host's stay in reach ([`AbstractSockets`]).
//!
//! [`check_paths`] refuses (`unsafe-path`) a bound path that lies in the
//! data root or the secrets folder, or holds either: the tmpfs hides them
//! only where they are not bound again.
//!
//! # Descriptors
//!
//! bwrap passes every descriptor it inherits on to the command, and `up`
//! may itself have inherited some from whoever started it (they are not
//! close-on-exec, or `up` would not have them). So the command bwrap runs
//! is `mosaic-bus sandbox-exec --keep-fd N -- PROGRAM ARGS…` ([`exec`]):
//! it closes every descriptor above 2 except `N`, the capability's memfd,
//! and only then executes the agent's program. The agent starts with
//! stdio and its capability, nothing else.
//!
//! # Which pid the launch record binds
//!
//! The process `up` spawns is bwrap itself, and its pid and start time are
//! what the launch record binds. Inside the PID namespace the agent has
//! other pids, which the broker (in the outer namespace) never sees; what
//! it sees, through `SO_PEERCRED` and `/proc`, are outer pids, and every
//! process of the sandbox, however it forks or detaches (`setsid -f`, a
//! double fork), descends from bwrap: an orphan is reparented to the
//! namespace's init, bwrap's own child. So the human proof's ancestry walk
//! meets the bound launch for anything started inside, and the broker's
//! namespace check ([`crate::runtime::human_proof`]) refuses it before
//! that. The broker checks the record against `/proc` as for any launch:
//! bwrap is `up`'s unreaped child, so its pid names nobody else.
//!
//! # Stopping
//!
//! `up` signals the process group it started; in a sandbox that is bwrap's
//! alone (the agent has its own session inside). So `up` also sends SIGKILL
//! to bwrap's child, the init of the sandbox's PID namespace, which ends
//! every process of the sandbox at once: a sandboxed agent gets no grace
//! period. (bwrap's `--die-with-parent` would end it too when bwrap ends,
//! but bwrap arms it only after its `clone`, so a bwrap stopped in its
//! first instants could leave its sandbox running.)

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mosaic_domain::Refusal;

use crate::commands::team::{AgentSpec, Network};

/// The uid and gid an agent has inside its sandbox: not 0, so no file of
/// the system is its own even where a mapping would allow it.
pub const SANDBOX_UID: u32 = 1000;

/// The agent's home inside the sandbox: an empty folder of its tmpfs.
pub const SANDBOX_HOME: &str = "/home/agent";

/// The subcommand bwrap runs inside the sandbox (hidden from the help).
pub(super) const EXEC_SUBCOMMAND: &str = "sandbox-exec";

/// A bubblewrap found on `PATH` that was seen to make a sandbox here.
#[derive(Debug, Clone)]
pub(super) struct Bwrap {
    path: PathBuf,
}

impl Bwrap {
    /// The first `bwrap` on `path` that starts `exe version` in the
    /// namespaces [`bwrap_args`] asks for; `None` when there is none, or
    /// when the kernel refuses them (user namespaces switched off, say).
    pub(super) fn find(path: Option<&OsStr>, exe: &Path) -> Option<Bwrap> {
        let found = std::env::split_paths(path?)
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| is_executable(candidate))?;
        let probe = Command::new(&found)
            .args(namespace_args(Network::Host))
            .args(["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"])
            .arg("--")
            .arg(exe)
            .arg("version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match probe {
            Ok(status) if status.success() => Some(Bwrap { path: found }),
            Ok(_) | Err(_) => None,
        }
    }

    /// The program `up` spawns for a sandboxed agent.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The namespaces and identity of a sandbox.
fn namespace_args(network: Network) -> Vec<OsString> {
    let uid = SANDBOX_UID.to_string();
    let mut args: Vec<OsString> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    match network {
        Network::Host => {}
        Network::None | Network::Proxy => args.push("--unshare-net".into()),
    }
    for arg in [
        "--uid",
        &uid,
        "--gid",
        &uid,
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--new-session",
        "--die-with-parent",
    ] {
        args.push(arg.into());
    }
    args
}

/// Where things are, for the sandbox of every agent of one `up`: all
/// absolute and, but for `human_home`, existing.
#[derive(Debug, Clone)]
pub(super) struct Places {
    /// This executable.
    pub(super) exe: PathBuf,
    /// The broker's socket, the one path of the data root bound in.
    pub(super) socket: PathBuf,
    /// The data root.
    pub(super) data_root: PathBuf,
    /// The secrets folder.
    pub(super) secrets: PathBuf,
    /// `up`'s own `HOME`, the human's, hidden too.
    pub(super) human_home: Option<PathBuf>,
    /// The configuration file.
    pub(super) config_file: Option<PathBuf>,
}

/// The paths `spec`'s sandbox binds, resolved (symbolic links followed),
/// each with whether it is writable: the configuration's directory, the
/// `read` paths, the `workdir`, the `write` paths.
///
/// # Errors
/// `bad-config` when one does not exist; `unsafe-path` when one lies in the
/// data root or the secrets folder, or holds either, or when it is the
/// human's home or holds it (the agent's home must be its own; a path
/// inside the human's home, a harness's folder say, may be bound).
pub(super) fn check_paths(
    spec: &AgentSpec,
    places: &Places,
) -> Result<Vec<(PathBuf, bool)>, Refusal> {
    let hidden = [&places.data_root, &places.secrets]
        .into_iter()
        .map(|p| std::fs::canonicalize(p).map_err(|_| Refusal::UnsafePath))
        .collect::<Result<Vec<_>, _>>()?;
    let wanted = std::iter::once((&spec.config_dir, false))
        .chain(spec.read.iter().map(|p| (p, false)))
        .chain(std::iter::once((&spec.dir, true)))
        .chain(spec.write.iter().map(|p| (p, true)));
    let mut binds = Vec::new();
    for (path, writable) in wanted {
        let resolved = std::fs::canonicalize(path).map_err(|_| {
            tracing::warn!(
                code = Refusal::BadConfig.code(),
                role = spec.role.as_str(),
                path = &*mosaic_adapters::fs::neutral_path(path),
                "a path the sandbox would bind does not exist"
            );
            Refusal::BadConfig
        })?;
        if hidden
            .iter()
            .any(|h| resolved.starts_with(h) || h.starts_with(&resolved))
        {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                role = spec.role.as_str(),
                path = &*mosaic_adapters::fs::neutral_path(&resolved),
                "a path the sandbox would bind shows the data root or the secrets folder"
            );
            return Err(Refusal::UnsafePath);
        }
        let home = places
            .human_home
            .as_deref()
            .and_then(|h| std::fs::canonicalize(h).ok());
        if home.is_some_and(|home| home.starts_with(&resolved)) {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                role = spec.role.as_str(),
                path = &*mosaic_adapters::fs::neutral_path(&resolved),
                "a path the sandbox would bind shows the human's home"
            );
            return Err(Refusal::UnsafePath);
        }
        binds.push((resolved, writable));
    }
    Ok(binds)
}

/// bwrap's arguments for one agent, up to and including `--`, given the
/// binds [`check_paths`] returned and its proxy's socket, if it has one:
/// see the module documentation for what each part does and why the order
/// matters.
pub(super) fn bwrap_args(
    spec: &AgentSpec,
    places: &Places,
    binds: &[(PathBuf, bool)],
    proxy: Option<&Path>,
) -> Vec<OsString> {
    let mut args = namespace_args(spec.network);
    let mut push = |words: &[&OsStr]| args.extend(words.iter().map(|w| w.to_os_string()));
    push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--proc".as_ref(), "/proc".as_ref()]);
    push(&["--dev".as_ref(), "/dev".as_ref()]);
    let mut empty: Vec<&Path> = vec![Path::new("/tmp"), Path::new("/run"), Path::new("/home")];
    empty.extend(
        places
            .human_home
            .as_deref()
            .filter(|h| h.is_absolute() && *h != Path::new("/")),
    );
    // The secrets folder gets a tmpfs of its own only where none of these
    // hides it already (the default one, under `/tmp`, say): a mount point
    // would show its name. Nothing bound later shows it again, since
    // `check_paths` refuses a bound path that holds it.
    let secrets_hidden = beneath_any(&places.secrets, &empty);
    empty.push(places.data_root.as_path());
    if !secrets_hidden {
        empty.push(places.secrets.as_path());
    }
    for path in &empty {
        push(&["--tmpfs".as_ref(), path.as_os_str()]);
    }
    push(&[
        "--ro-bind".as_ref(),
        places.exe.as_os_str(),
        places.exe.as_os_str(),
    ]);
    for (path, writable) in binds {
        let how: &OsStr = if *writable {
            "--bind".as_ref()
        } else {
            "--ro-bind".as_ref()
        };
        push(&[how, path.as_os_str(), path.as_os_str()]);
    }
    if let Some(file) = &places.config_file {
        push(&["--ro-bind".as_ref(), file.as_os_str(), file.as_os_str()]);
    }
    push(&[
        "--ro-bind".as_ref(),
        places.socket.as_os_str(),
        places.socket.as_os_str(),
    ]);
    // The tmpfs over the data root and the secrets folder stay empty: an
    // agent cannot even leave files where the broker's would be.
    push(&["--remount-ro".as_ref(), places.data_root.as_os_str()]);
    if !secrets_hidden {
        push(&["--remount-ro".as_ref(), places.secrets.as_os_str()]);
    }
    args.extend(super::bridge::bind_args(proxy));
    let mut push = |words: &[&OsStr]| args.extend(words.iter().map(|w| w.to_os_string()));
    push(&["--dir".as_ref(), SANDBOX_HOME.as_ref()]);
    let workdir = binds
        .iter()
        .find(|(_, writable)| *writable)
        .map_or(spec.dir.as_path(), |(path, _)| path.as_path());
    push(&["--chdir".as_ref(), workdir.as_os_str()]);
    push(&["--".as_ref()]);
    args
}

/// Whether the abstract Unix sockets outside an agent's sandbox (a desktop
/// session's, say: they are named in the network namespace, not in the
/// files) are out of its reach; `abstractSockets` in `up`'s first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AbstractSockets {
    /// Out of reach: a network namespace of its own, or a Landlock scope.
    Closed,
    /// In reach: no sandbox, or the host's network without Landlock's
    /// scopes.
    Open,
}

impl AbstractSockets {
    /// For an agent, sandboxed or not, with `network`, on a kernel that has
    /// Landlock's scopes (`scopes`, [`landlock_scopes`]) or not.
    pub(super) fn of(sandboxed: bool, network: Network, scopes: bool) -> Self {
        match (sandboxed, network) {
            (false, _) => AbstractSockets::Open,
            (true, Network::None | Network::Proxy) => AbstractSockets::Closed,
            (true, Network::Host) if scopes => AbstractSockets::Closed,
            (true, Network::Host) => AbstractSockets::Open,
        }
    }

    /// Its name on the first line.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            AbstractSockets::Closed => "closed",
            AbstractSockets::Open => "open",
        }
    }
}

/// The Landlock scopes `sandbox-exec --landlock` applies: no `connect` to
/// an abstract Unix socket, and no signal, to a process outside the
/// sandbox's Landlock domain. ABI 6 (Linux 6.12) has both.
fn scopes() -> landlock::BitFlags<landlock::Scope> {
    landlock::Scope::AbstractUnixSocket | landlock::Scope::Signal
}

/// Whether this kernel has the Landlock scopes [`scopes`] names. `up`
/// asks once, and then tells `sandbox-exec` to apply them (`--landlock`),
/// which refuses to start the agent when it cannot: an agent never starts
/// with less than `up`'s first line says.
pub(super) fn landlock_scopes() -> bool {
    use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr};
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(scopes())
        .is_ok()
}

/// Restricts this process, and so the agent it executes and everything
/// the agent starts, with the scopes [`scopes`] names, all of them or none
/// (an error).
fn restrict_scopes() -> Result<(), landlock::RulesetError> {
    use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr};
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(scopes())?
        .create()?
        .restrict_self()
        .map(drop)
}

/// Whether `path` lies in one of `folders`, all resolved (symbolic links
/// followed); `false` when `path` cannot be resolved.
fn beneath_any(path: &Path, folders: &[&Path]) -> bool {
    let Ok(path) = std::fs::canonicalize(path) else {
        return false;
    };
    folders
        .iter()
        .filter_map(|folder| std::fs::canonicalize(folder).ok())
        .any(|folder| path.starts_with(folder))
}

/// `sandbox-exec`: what bwrap runs inside an agent's sandbox. Not for
/// people; hidden from the help.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxExecArgs {
    /// The one descriptor above 2 kept open: the capability's.
    #[arg(long, value_name = "FD")]
    pub keep_fd: i32,
    /// Apply the Landlock scopes (abstract Unix sockets and signals), or
    /// refuse to execute the program.
    #[arg(long)]
    pub landlock: bool,
    /// The proxy's socket inside the sandbox: start the bridge to it and
    /// point the agent's proxy variables at it.
    #[arg(long, value_name = "PATH")]
    pub proxy_socket: Option<PathBuf>,
    /// A port of the host's loopback to reach at the same address inside,
    /// through the proxy (which must admit it).
    #[arg(long, value_name = "PORT", requires = "proxy_socket")]
    pub forward: Vec<u16>,
    /// The agent's program and its arguments.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Runs `sandbox-exec`; returns only when the program cannot be executed.
pub(super) fn exec_main(args: SandboxExecArgs) -> std::process::ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        return std::process::ExitCode::from(127);
    };
    let proxy = args.proxy_socket.as_deref().map(|s| (s, &args.forward[..]));
    std::process::ExitCode::from(exec(args.keep_fd, args.landlock, proxy, program, rest))
}

/// The namespace flags of `clone` that the filter refuses.
const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWTIME as u64,
];

/// The seccomp filters `sandbox-exec` installs before it executes the
/// agent, which its every descendant keeps. The first refuses with `EPERM`:
/// `ptrace`, `process_vm_readv` and `process_vm_writev` (reading or
/// steering another process), `ioctl` `TIOCSTI` and `TIOCLINUX` (typing
/// into a terminal), `io_uring_*` (system calls this filter could not
/// see), `unshare`, `setns` and a `clone` that asks for a new namespace.
/// The second answers `clone3` with `ENOSYS`: its flags lie in memory a
/// filter cannot read, and C libraries then fall back to `clone`, which
/// the first filter sees.
///
/// # Errors
/// When this architecture has no seccomp support in the crate, or a rule
/// does not compile: the sandbox then refuses to start the agent.
// `TIOCSTI`'s C type differs between architectures, so its cast to the
// argument's `u64` is needed on some and not on others.
#[allow(clippy::unnecessary_cast)]
fn seccomp_filters() -> Result<[seccompiler::BpfProgram; 2], seccompiler::Error> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    use std::collections::BTreeMap;
    let arch = std::env::consts::ARCH.try_into()?;
    let always = Vec::new;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_unshare,
        libc::SYS_setns,
    ]
    .into_iter()
    .map(|call| (call, always()))
    .collect();
    let ioctl = [libc::TIOCSTI, libc::TIOCLINUX]
        .into_iter()
        .map(|request| {
            SeccompRule::new(vec![SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                request as u64,
            )?])
        })
        .collect::<Result<_, _>>()?;
    denied.insert(libc::SYS_ioctl, ioctl);
    let clone = NAMESPACE_FLAGS
        .into_iter()
        .map(|flag| {
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<_, _>>()?;
    denied.insert(libc::SYS_clone, clone);
    let deny = SeccompFilter::new(
        denied,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, always())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    Ok([BpfProgram::try_from(deny)?, BpfProgram::try_from(clone3)?])
}

/// `sandbox-exec`, inside the sandbox: closes every descriptor above 2
/// except `keep`, applies the Landlock scopes when `landlock` asks for
/// them ([`restrict_scopes`]), installs the seccomp filters
/// ([`seccomp_filters`], with `no_new_privs`, which bwrap has set
/// already), starts the bridges to `proxy`'s socket, with its forwarded
/// ports, when there is one ([`super::bridge::start`]), then executes
/// `program` with `args`. Returns only when one of
/// these fails, with the exit code 127 (a shell's "cannot execute"): an
/// agent never starts with less of its sandbox than this.
pub(super) fn exec(
    keep: i32,
    landlock: bool,
    proxy: Option<(&Path, &[u16])>,
    program: &OsStr,
    args: &[OsString],
) -> u8 {
    use std::os::unix::process::CommandExt;
    // Listed first and closed after: closing while reading the folder
    // would close the folder's own descriptor under the reader.
    let open: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(e) => {
            eprintln!("mosaic-bus sandbox-exec: listing descriptors: {e}");
            return 127;
        }
    };
    for fd in open.into_iter().filter(|&fd| fd > 2 && fd != keep) {
        // Nothing in this process owns these descriptors: they were
        // inherited across `exec`. The folder's own is already closed, so
        // its number fails with EBADF, which is harmless.
        let _ = nix::unistd::close(fd);
    }
    if landlock {
        if let Err(e) = restrict_scopes() {
            eprintln!("mosaic-bus sandbox-exec: applying the Landlock scopes: {e}");
            return 127;
        }
    }
    let installed = seccomp_filters().and_then(|filters| {
        filters
            .iter()
            .try_for_each(|filter| seccompiler::apply_filter(filter))
    });
    if let Err(e) = installed {
        eprintln!("mosaic-bus sandbox-exec: installing the seccomp filter: {e}");
        return 127;
    }
    let bridges = proxy.map(|(socket, forwards)| super::bridge::start(socket, forwards));
    let proxy_env = match bridges.transpose() {
        Ok(env) => env.unwrap_or_default(),
        Err(e) => {
            eprintln!("mosaic-bus sandbox-exec: starting the bridge to the proxy: {e}");
            return 127;
        }
    };
    let error = Command::new(program).args(args).envs(proxy_env).exec();
    eprintln!(
        "mosaic-bus sandbox-exec: executing {}: {error}",
        program.to_string_lossy()
    );
    127
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_domain::evidence::Harness;
    use mosaic_domain::RoleInstance;

    fn spec(dir: &Path) -> AgentSpec {
        AgentSpec {
            role: RoleInstance::parse("lead").unwrap(),
            harness: Harness::Pi,
            program: PathBuf::from("sh"),
            args: Vec::new(),
            dir: dir.to_path_buf(),
            config_dir: dir.to_path_buf(),
            env: Vec::new(),
            network: Network::Host,
            allow: Vec::new(),
            read: Vec::new(),
            write: Vec::new(),
        }
    }

    fn places(root: &Path) -> Places {
        Places {
            exe: PathBuf::from("/usr/bin/mosaic-bus"),
            socket: root.join("data/bus/bus.sock"),
            data_root: root.join("data"),
            secrets: root.join("secrets"),
            human_home: Some(root.join("home")),
            config_file: Some(root.join("work/team.json")),
        }
    }

    fn tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for dir in ["data/bus", "secrets", "work", "other", "home/alice/tool"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        root
    }

    #[test]
    fn the_arguments_hide_first_and_bind_after() {
        let root = tree();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let mut agent = spec(&root.join("work"));
        agent.read = vec![root.join("other")];
        let places = places(&root);
        let binds = check_paths(&agent, &places).unwrap();
        let args = bwrap_args(&agent, &places, &binds, None);
        let text: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |words: &[&str]| {
            text.windows(words.len())
                .position(|w| w == words)
                .unwrap_or_else(|| panic!("{words:?} in {text:?}"))
        };
        let work = root.join("work").to_string_lossy().into_owned();
        let data = root.join("data").to_string_lossy().into_owned();
        let socket = root
            .join("data/bus/bus.sock")
            .to_string_lossy()
            .into_owned();
        let config = root.join("work/team.json").to_string_lossy().into_owned();
        for flag in [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup",
            "--disable-userns",
            "--new-session",
            "--die-with-parent",
        ] {
            at(&[flag]);
        }
        assert!(!text.iter().any(|a| a == "--unshare-net"));
        at(&["--uid", "1000", "--gid", "1000"]);
        at(&["--cap-drop", "ALL"]);
        let tmpfs_data = at(&["--tmpfs", &data]);
        let home = root.join("home").to_string_lossy().into_owned();
        at(&["--tmpfs", &home]);
        let workdir = at(&["--bind", &work, &work]);
        let config_ro = at(&["--ro-bind", &config, &config]);
        let socket_ro = at(&["--ro-bind", &socket, &socket]);
        let read_only = at(&["--remount-ro", &data]);
        assert!(tmpfs_data < workdir && workdir < config_ro && config_ro < socket_ro);
        assert!(socket_ro < read_only);
        at(&["--chdir", &work]);
        assert_eq!(text.last().map(String::as_str), Some("--"));
        // A secrets folder in the human's home is hidden by the home's
        // tmpfs: no mount point shows its name.
        let in_home = Places {
            secrets: root.join("home/alice"),
            ..places.clone()
        };
        let secrets = root.join("home/alice").to_string_lossy().into_owned();
        let text: Vec<String> = bwrap_args(&agent, &in_home, &binds, None)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!text.contains(&secrets), "{text:?}");
        agent.network = Network::None;
        let args = bwrap_args(&agent, &places, &binds, None);
        assert!(args.iter().any(|a| a == "--unshare-net"));
        // Elsewhere it gets a tmpfs of its own, read-only.
        let elsewhere = Places {
            secrets: PathBuf::from("/srv/mosaic-secrets"),
            ..places
        };
        let text: Vec<String> = bwrap_args(&agent, &elsewhere, &binds, None)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for flag in ["--tmpfs", "--remount-ro"] {
            assert!(
                text.windows(2).any(|w| w == [flag, "/srv/mosaic-secrets"]),
                "{flag} in {text:?}"
            );
        }
    }

    #[test]
    fn abstract_sockets_are_open_only_without_a_sandbox_or_a_scope_on_the_host_network() {
        use AbstractSockets::{Closed, Open};
        for (sandboxed, network, scopes, expected) in [
            (false, Network::Host, true, Open),
            (false, Network::None, true, Open),
            (true, Network::Host, true, Closed),
            (true, Network::Host, false, Open),
            (true, Network::None, false, Closed),
            (true, Network::None, true, Closed),
            (true, Network::Proxy, false, Closed),
            (false, Network::Proxy, true, Open),
        ] {
            assert_eq!(
                AbstractSockets::of(sandboxed, network, scopes),
                expected,
                "{sandboxed} {network:?} {scopes}"
            );
        }
        assert_eq!((Closed.as_str(), Open.as_str()), ("closed", "open"));
    }

    #[test]
    fn the_seccomp_filters_compile_for_this_architecture() {
        let [deny, clone3] = seccomp_filters().expect("the filters compile");
        assert!(!deny.is_empty() && !clone3.is_empty());
    }

    #[test]
    fn a_bind_that_shows_the_data_root_or_the_secrets_is_refused() {
        let root = tree();
        let root = root.path();
        let places = places(root);
        for (field, path) in [
            ("workdir", root.to_path_buf()),
            ("workdir", root.join("data")),
            ("read", root.join("data/bus")),
            ("write", root.join("secrets")),
            ("read", root.to_path_buf()),
            ("workdir", root.join("home")),
            ("read", root.join("home/alice/..")),
        ] {
            let mut agent = spec(&root.join("work"));
            match field {
                "workdir" => agent.dir = path.clone(),
                "read" => agent.read = vec![path.clone()],
                _ => agent.write = vec![path.clone()],
            }
            assert_eq!(
                check_paths(&agent, &places).err(),
                Some(Refusal::UnsafePath),
                "{field} {path:?}"
            );
        }
        // A folder inside the human's home may be bound: a harness's own.
        let mut agent = spec(&root.join("work"));
        agent.read = vec![root.join("home/alice/tool")];
        assert!(check_paths(&agent, &places).is_ok());
        let mut agent = spec(&root.join("work"));
        agent.read = vec![root.join("missing")];
        assert_eq!(check_paths(&agent, &places).err(), Some(Refusal::BadConfig));
        // A symbolic link into the data root is followed before the check.
        std::os::unix::fs::symlink(root.join("data"), root.join("work/link")).unwrap();
        let mut agent = spec(&root.join("work"));
        agent.write = vec![root.join("work/link")];
        assert_eq!(
            check_paths(&agent, &places).err(),
            Some(Refusal::UnsafePath)
        );
    }
}
