//! `sandbox-exec`: the hidden program bwrap runs inside an agent's
//! sandbox, in one process that confines itself and then becomes the
//! agent. Everything in this file runs in that process; `up`'s plan
//! renders its arguments ([`SandboxExecArgs`]), the system calls it denies
//! among them (`--deny`, names of [`DENIED_CALLS`]).
//!
//! # What it applies
//!
//! bwrap sets `no_new_privs` itself; `sandbox-exec` adds a seccomp
//! filter ([`seccomp_filters`]: the calls its `--deny` names, which the
//! plan makes every one of [`DENIED_CALLS`], and always `TIOCSTI`,
//! `TIOCLINUX` and a namespace `clone`)
//! and, where the kernel has them (Landlock ABI 6, Linux 6.12), Landlock's
//! scopes ([`restrict_scopes`]): no `connect` to an abstract Unix socket
//! and no signal outside the sandbox.
//!
//! # No Unix socket
//!
//! Last, once the proxy's bridge and the connector's thread have started,
//! the thread that starts the program takes one more filter
//! ([`socket_filter`]): `socket(AF_UNIX, …)` is refused, `socketpair`
//! allowed. A filter binds the thread that installs it and what it starts
//! from then on, so the program and everything it starts make no Unix
//! socket: no socket file in any path it sees (its workdir, the config's
//! folder, `/tmp`, a `read` path), made by anyone at any time, and no
//! abstract socket is in its reach, whatever its network. What it reaches
//! is what was opened before: the broker through the connector, which the
//! supervisor serves ([`super::connector`]: a descriptor passed down, and
//! for a program that lost it a loopback bridge that checks its peer's
//! user), and the proxy through the proxy's bridge.
//!
//! The supervisor and the bridges run as the program's user, without that
//! filter, so each makes itself not dumpable before the program starts:
//! the program then neither opens their memory (`/proc/<pid>/mem`) nor
//! takes their descriptors (`pidfd_getfd`, which its filter refuses too),
//! either of which would make a Unix socket through them. The program
//! starts dumpable as before, since executing a readable binary resets the
//! flag.
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
//! # Supervising
//!
//! With `--control-fd C` (what `up` passes), it also keeps `C`, `up`'s
//! control channel, and once confined it does not become the program: it
//! stays as its supervisor ([`super::supervisor`]), starting the program
//! each time `up` orders it, so a run outlives its program's exits.

use std::ffi::{OsStr, OsString};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::process::DumpableBehavior;

use super::bridge_main::{BRIDGE_READY, BRIDGE_SUBCOMMAND};
use super::bwrap::scopes;
use super::connector;
use super::network::PROXY_PORT;
use super::supervisor;
use crate::commands::up::harness::capfile;
use mosaic_client::socket::connector::BRIDGE_ENV;

/// The subcommand bwrap runs inside the sandbox (hidden from the help).
pub(crate) const EXEC_SUBCOMMAND: &str = "sandbox-exec";

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
    /// The `RLIMIT_NPROC` to set: the most processes and threads.
    #[arg(long, value_name = "N")]
    pub processes: u64,
    /// The system calls the seccomp filter refuses whatever their
    /// arguments, by name (comma-separated, from the list it knows), or
    /// refuse to execute the program when one is unknown.
    #[arg(long, value_name = "CALLS", value_delimiter = ',', required = true)]
    pub deny: Vec<String>,
    /// The broker's socket inside the sandbox: serve the agent's
    /// connections to it through the connector (with `--control-fd`).
    #[arg(long, value_name = "PATH")]
    pub bus_socket: Option<PathBuf>,
    /// Also serve a bridge to the broker's socket on the loopback, for
    /// programs that lose the connector.
    #[arg(long, requires = "bus_socket")]
    pub bus_bridge: bool,
    /// The proxy's socket inside the sandbox: start the bridge to it and
    /// point the agent's proxy variables at it.
    #[arg(long, value_name = "PATH")]
    pub proxy_socket: Option<PathBuf>,
    /// A port of the host's loopback to reach at the same address inside,
    /// through the proxy (which must admit it).
    #[arg(long, value_name = "PORT", requires = "proxy_socket")]
    pub forward: Vec<u16>,
    /// Wait for the `ready` line on stdin, then copy the capability into
    /// a private file of the sandbox's `/tmp`, named to the program by
    /// `MOSAIC_BUS_CAP_FILE`, and close the descriptor (a harness agent:
    /// see `capfile`).
    #[arg(long)]
    pub cap_file: bool,
    /// Give the program `/dev/null` as its standard input.
    #[arg(long)]
    pub stdin_null: bool,
    /// Stay as the program's supervisor, taking `up`'s orders on this
    /// inherited descriptor (`supervisor`), instead of becoming the
    /// program.
    #[arg(long, value_name = "FD")]
    pub control_fd: Option<i32>,
    /// The agent's program and its arguments.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// How `sandbox-exec` confines itself before it executes the program.
#[derive(Debug, Clone, Copy)]
struct Walls<'a> {
    /// `--landlock`.
    landlock: bool,
    /// `--processes`.
    processes: u64,
    /// `--deny`, as numbers.
    denied: &'a [i64],
}

/// What `sandbox-exec` does with the capability and stdin before it
/// executes the program.
#[derive(Debug, Clone)]
struct Handoff {
    /// `--cap-file`.
    cap_file: bool,
    /// `--stdin-null`.
    stdin_null: bool,
    /// `--control-fd`: supervise the program rather than become it.
    control: Option<i32>,
    /// `--bus-socket`: the broker's socket, which the supervisor connects
    /// to for the program.
    bus: Option<PathBuf>,
    /// `--bus-bridge`.
    bridge: bool,
}

/// Runs `sandbox-exec`; returns only when the program cannot be executed.
pub fn main(args: SandboxExecArgs) -> std::process::ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        return std::process::ExitCode::from(127);
    };
    let denied = match denied_numbers(&args.deny) {
        Ok(denied) => denied,
        Err(name) => {
            eprintln!("mosaic-bus sandbox-exec: no system call {name:?} to deny");
            return std::process::ExitCode::from(127);
        }
    };
    let proxy = args.proxy_socket.as_deref().map(|s| (s, &args.forward[..]));
    let handoff = Handoff {
        cap_file: args.cap_file,
        stdin_null: args.stdin_null,
        control: args.control_fd,
        bus: args.bus_socket,
        bridge: args.bus_bridge,
    };
    let walls = Walls {
        landlock: args.landlock,
        processes: args.processes,
        denied: &denied,
    };
    std::process::ExitCode::from(exec(args.keep_fd, &walls, proxy, &handoff, program, rest))
}

/// The system calls `sandbox-exec` knows how to refuse whatever their
/// arguments, by name and number; the plan denies every one
/// (docs/host.md says why each):
/// - reading or steering another process: `ptrace`, `process_vm_readv`,
///   `process_vm_writev`, `process_madvise`, `pidfd_getfd` (another
///   process's descriptor), `kcmp` (comparing another's descriptors);
/// - system calls the filter could not see: `io_uring_*`;
/// - new or joined namespaces: `unshare`, `setns`;
/// - mounts, even in its own namespaces: `mount`, `umount2`,
///   `pivot_root`, `open_tree`, `move_mount`, `fsopen`, `fsconfig`,
///   `fsmount`, `fspick`, `mount_setattr`;
/// - the kernel's keyrings, which the sandbox would otherwise share with
///   whoever started `up`: `keyctl`, `add_key`, `request_key`;
/// - kernel state beyond its own processes: `bpf`, `perf_event_open`,
///   `userfaultfd` (stalling the kernel at will), `open_by_handle_at`
///   (opening a file by handle, around every mount), `kexec_load`,
///   `kexec_file_load`, `init_module`, `finit_module`, `delete_module`,
///   `acct`, `swapon`, `swapoff`, `reboot`, `syslog`, `quotactl`.
pub(crate) const DENIED_CALLS: [(&str, i64); 39] = [
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("process_madvise", libc::SYS_process_madvise),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("acct", libc::SYS_acct),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
];

/// The numbers of the calls `names` names, in [`DENIED_CALLS`]; the first
/// name it does not hold, else.
fn denied_numbers(names: &[String]) -> Result<Vec<i64>, String> {
    names
        .iter()
        .map(|name| {
            DENIED_CALLS
                .iter()
                .find(|(known, _)| known == name)
                .map(|(_, number)| *number)
                .ok_or_else(|| name.clone())
        })
        .collect()
}

/// `personality` with any value but the two harmless ones: a query
/// (`0xffffffff`) and plain Linux (`0`); the rest (turning address
/// randomisation off, say) is refused.
const PERSONALITY_ALLOWED: [u64; 2] = [0, 0xffff_ffff];

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
/// every call of `denied` (numbers of [`DENIED_CALLS`]), `ioctl` `TIOCSTI` and `TIOCLINUX`
/// (typing into a terminal), `personality` but a query or plain Linux,
/// and a `clone` that asks for a new namespace.
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
fn seccomp_filters(denied: &[i64]) -> Result<[seccompiler::BpfProgram; 2], seccompiler::Error> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    use std::collections::BTreeMap;
    let arch = std::env::consts::ARCH.try_into()?;
    let always = Vec::new;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        denied.iter().map(|&call| (call, always())).collect();
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
    let personality = PERSONALITY_ALLOWED
        .into_iter()
        .map(|value| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value))
        .collect::<Result<Vec<_>, _>>()?;
    denied.insert(libc::SYS_personality, vec![SeccompRule::new(personality)?]);
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

/// The filter that refuses the program `socket(AF_UNIX, …)` with `EPERM`
/// (`socketpair` stays allowed): a socket file anywhere in its view, made
/// by anyone at any time, is then out of its reach, and it reaches the
/// broker only through the connector ([`super::connector`]) and the proxy
/// only through its bridge. Installed on the thread that starts the
/// program, after the bridge and the connector's thread have started, so
/// they alone keep the call.
///
/// # Errors
/// As [`seccomp_filters`].
fn socket_filter() -> Result<seccompiler::BpfProgram, seccompiler::Error> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    use std::collections::BTreeMap;
    let unix = SeccompRule::new(vec![SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        u64::from(libc::AF_UNIX.unsigned_abs()),
    )?])?;
    let filter = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_socket, vec![unix])]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        std::env::consts::ARCH.try_into()?,
    )?;
    Ok(BpfProgram::try_from(filter)?)
}

/// `sandbox-exec`, inside the sandbox: closes every descriptor above 2
/// except `keep`, and within the [`Walls`]: caps the processes and threads
/// at `processes` (`RLIMIT_NPROC`), joins a new anonymous session keyring,
/// applies the Landlock scopes when `landlock` asks for them
/// ([`restrict_scopes`]), installs the seccomp filters refusing `denied`
/// and the argument rules
/// ([`seccomp_filters`], with `no_new_privs`, which bwrap has set
/// already), starts the bridges to `proxy`'s socket, with its forwarded
/// ports, when there is one ([`start`]), hands the
/// capability over as a file and stdin as [`Handoff`] says, then executes
/// `program` with `args`. Returns only when one of
/// these fails, with the exit code 127 (a shell's "cannot execute"): an
/// agent never starts with less of its sandbox than this.
fn exec(
    keep: i32,
    walls: &Walls<'_>,
    proxy: Option<(&Path, &[u16])>,
    handoff: &Handoff,
    program: &OsStr,
    args: &[OsString],
) -> u8 {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    // Nothing in this process owns the descriptors it inherited across
    // `exec`; taken, every one but the capability's closes here.
    let inherited = match mosaic_adapters::sys::take_inherited() {
        Ok(inherited) => inherited,
        Err(e) => {
            eprintln!("mosaic-bus sandbox-exec: taking the inherited descriptors: {e}");
            return 127;
        }
    };
    let (mut capability, mut control) = (None, None);
    for fd in inherited {
        match fd.as_raw_fd() {
            n if n == keep => capability = Some(fd),
            n if Some(n) == handoff.control => control = Some(fd),
            _ => drop(fd),
        }
    }
    // Out of the program's reach from here on, though it runs as the same
    // user: a process that is not dumpable opens its memory
    // (`/proc/<pid>/mem`) and its descriptors (`pidfd_getfd`) only to one
    // with `CAP_SYS_PTRACE`, and this one keeps what the program's filters
    // do not bind (the connector's thread, which makes Unix sockets). The
    // program is dumpable as before: executing a readable binary makes a
    // process dumpable again.
    if let Err(e) = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable) {
        eprintln!("mosaic-bus sandbox-exec: making itself not dumpable: {e}");
        return 127;
    }
    // The process cap, counted in the sandbox's own user namespace.
    let cap = rustix::process::Rlimit {
        current: Some(walls.processes),
        maximum: Some(walls.processes),
    };
    if let Err(e) = rustix::process::setrlimit(rustix::process::Resource::Nproc, cap) {
        eprintln!("mosaic-bus sandbox-exec: capping the processes: {e}");
        return 127;
    }
    // A keyring of its own, before the filter denies every key call: the
    // one it inherited is `up`'s caller's, which can hold the human's
    // tokens.
    if let Err(e) = mosaic_adapters::sys::join_anonymous_session_keyring() {
        eprintln!("mosaic-bus sandbox-exec: joining a new session keyring: {e}");
        return 127;
    }
    if walls.landlock {
        if let Err(e) = restrict_scopes() {
            eprintln!("mosaic-bus sandbox-exec: applying the Landlock scopes: {e}");
            return 127;
        }
    }
    let installed = seccomp_filters(walls.denied).and_then(|filters| {
        filters
            .iter()
            .try_for_each(|filter| seccompiler::apply_filter(filter))
    });
    if let Err(e) = installed {
        eprintln!("mosaic-bus sandbox-exec: installing the seccomp filter: {e}");
        return 127;
    }
    let bridges = proxy.map(|(socket, forwards)| start(socket, forwards));
    let mut env = match bridges.transpose() {
        Ok(env) => env.unwrap_or_default(),
        Err(e) => {
            eprintln!("mosaic-bus sandbox-exec: starting the bridge to the proxy: {e}");
            return 127;
        }
    };
    let connector = match (handoff.control, handoff.bus.clone()) {
        (Some(_), Some(bus)) => match connector::start(bus) {
            Ok(connector) => Some(connector),
            Err(e) => {
                eprintln!("mosaic-bus sandbox-exec: starting the connector: {e}");
                return 127;
            }
        },
        (None, _) | (_, None) => None,
    };
    if let (true, Some(bus)) = (handoff.bridge, handoff.bus.clone()) {
        match connector::bridge(bus) {
            Ok(address) => env.push((BRIDGE_ENV, address.to_string())),
            Err(e) => {
                eprintln!("mosaic-bus sandbox-exec: starting the bridge to the broker: {e}");
                return 127;
            }
        }
    }
    // From here on this thread, and so the program it starts, makes no
    // Unix socket.
    let sealed = socket_filter().and_then(|filter| seccompiler::apply_filter(&filter));
    if let Err(e) = sealed {
        eprintln!("mosaic-bus sandbox-exec: installing the socket filter: {e}");
        return 127;
    }
    if handoff.control.is_some() {
        let Some(control) = control else {
            eprintln!("mosaic-bus sandbox-exec: the control descriptor was not inherited");
            return 127;
        };
        let program = supervisor::Program {
            path: program.to_owned(),
            args: args.to_vec(),
            env,
            cap_file: handoff.cap_file,
            capability,
            connector,
        };
        return supervisor::run(control, program);
    }
    let mut command = Command::new(program);
    command.args(args).envs(env);
    if handoff.cap_file {
        let copied = capfile::wait_ready()
            .map_err(|e| e.to_string())
            .and_then(|()| {
                let capability = capability.as_ref().map(std::os::fd::AsFd::as_fd);
                capability
                    .ok_or(mosaic_domain::Refusal::BadCapability)
                    .and_then(|fd| capfile::copy_cap(fd, Path::new(capfile::SANDBOX_CAP_FILE)))
                    .map_err(|r| r.code().to_owned())
            });
        if let Err(why) = copied {
            eprintln!("mosaic-bus sandbox-exec: handing the capability over as a file: {why}");
            return 127;
        }
        // The file replaces the descriptor: a harness that would not pass
        // it on finds the file, and nothing reads the descriptor again.
        drop(capability);
        command
            .env_remove(mosaic_client::cap::CAP_FD_ENV)
            .env(mosaic_client::cap::CAP_FILE_ENV, capfile::SANDBOX_CAP_FILE);
    }
    if handoff.stdin_null {
        if let Err(e) = capfile::null_stdin() {
            eprintln!("mosaic-bus sandbox-exec: giving the program /dev/null as stdin: {e}");
            return 127;
        }
    }
    let error = command.exec();
    eprintln!(
        "mosaic-bus sandbox-exec: executing {}: {error}",
        program.to_string_lossy()
    );
    127
}

/// Binds the bridge's port, and each port of
/// `forwards`, starts a bridge on each toward `socket`, and returns the
/// environment the agent gets.
fn start(socket: &Path, forwards: &[u16]) -> io::Result<Vec<(&'static str, String)>> {
    spawn(socket, PROXY_PORT, None)?;
    for &port in forwards {
        spawn(socket, port, Some(format!("127.0.0.1:{port}")))?;
    }
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    // Loopback stays direct: it is the sandbox's own.
    let local = "localhost,127.0.0.1,::1".to_owned();
    Ok(vec![
        ("HTTPS_PROXY", url.clone()),
        ("https_proxy", url.clone()),
        ("HTTP_PROXY", url.clone()),
        ("http_proxy", url),
        ("NO_PROXY", local.clone()),
        ("no_proxy", local),
    ])
}

/// Binds `127.0.0.1:port` and starts a bridge on it toward `socket`,
/// opening each connection with a `CONNECT` to `connect` when given;
/// returns once the bridge says it is out of the program's reach (no
/// longer dumpable), which its `exec` had undone.
fn spawn(socket: &Path, port: u16, connect: Option<String>) -> io::Result<()> {
    use std::io::Read as _;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    let exe = std::env::current_exe()?;
    let mut bridge = Command::new(exe)
        .arg(BRIDGE_SUBCOMMAND)
        .arg("--socket")
        .arg(socket)
        .args(connect.iter().flat_map(|target| ["--connect", target]))
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
        .stdout(Stdio::piped())
        .spawn()?;
    // The bridge writes its line, then lets go of the pipe.
    let mut said = Vec::new();
    if let Some(out) = bridge.stdout.take() {
        out.take(64).read_to_end(&mut said)?;
    }
    if said == BRIDGE_READY.as_bytes() {
        Ok(())
    } else {
        Err(io::Error::other("the bridge did not start"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seccomp_filters_compile_for_this_architecture() {
        let every: Vec<i64> = DENIED_CALLS.iter().map(|(_, n)| *n).collect();
        let [deny, clone3] = seccomp_filters(&every).expect("the filters compile");
        let [fewer, _] = seccomp_filters(&every[..1]).expect("the filters compile");
        assert!(!clone3.is_empty());
        // Each refused call is one more comparison in the program.
        assert!(deny.len() > fewer.len(), "{} {}", deny.len(), fewer.len());
    }

    #[test]
    fn the_denied_calls_are_named_and_an_unknown_name_is_refused() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            denied_numbers(&names(&["ptrace", "keyctl"])),
            Ok(vec![libc::SYS_ptrace, libc::SYS_keyctl])
        );
        assert_eq!(
            denied_numbers(&names(&["ptrace", "fork"])),
            Err("fork".to_owned())
        );
        assert_eq!(denied_numbers(&[]), Ok(Vec::new()));
    }
}
