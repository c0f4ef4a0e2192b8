//! How `up` starts one agent process: its program found, its run id, the
//! capability's memfd (inheritable for exactly one spawn, then sealed), and
//! signals to its process group. Its command and environment are its
//! plan's (`sandbox::plan`). See the module documentation of `up` for
//! the order of a launch and why the capability reaches only its agent.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Child, Command};

use mosaic_adapters::cause::logged;
use mosaic_adapters::system::OsEntropy;
use mosaic_domain::{Capability, Refusal, RoleInstance, RunId};
use mosaic_ports::Entropy;

/// The name memfds carry (shown in `/proc/<pid>/fd`, never the secret).
const MEMFD_NAME: &str = "mosaic-bus-cap";

/// `PATH` for the agents: this executable's directory first, then ours.
pub(super) fn child_path() -> Result<OsString, Refusal> {
    let exe = std::env::current_exe().map_err(logged(
        Refusal::StorageUnavailable,
        "finding this executable",
    ))?;
    let mut dirs = vec![exe
        .parent()
        .ok_or(Refusal::StorageUnavailable)?
        .to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    // Fails only when the directory holds a `:`, which PATH cannot express.
    std::env::join_paths(dirs).map_err(|_| Refusal::UnsafePath)
}

/// The environment variable naming an agent's run.
pub const RUN_ID_ENV: &str = "MOSAIC_RUN_ID";

/// The environment variable holding the change feed's cursor when the run
/// was launched: an agent's loop waits from it at its first stop, so a
/// change between the launch and that stop still wakes it.
pub const SINCE_ENV: &str = "MOSAIC_BUS_SINCE";

/// Sends `signal` to the process group `child` leads (every agent is
/// started as the leader of its own group). Only for a child not yet
/// reaped: its pid, and so its group id, cannot name anyone else then.
pub(super) fn signal_group(child: &Child, signal: rustix::process::Signal) {
    let _ = rustix::process::kill_process_group(rustix::process::Pid::from_child(child), signal);
}

/// Ends the sandbox whose bwrap is `child`: SIGKILL to bwrap's children,
/// the init of its PID namespace, which takes every process of the
/// namespace with it. bwrap's `--die-with-parent` would do the same when
/// bwrap ends, but it arms that in the child after the `clone`, so a bwrap
/// killed during its first instants could leave the sandbox behind. Only
/// for a child not yet reaped: while bwrap lives, its children are its own.
pub(super) fn kill_sandbox(child: &Child) {
    let pid = child.id();
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) else {
        return;
    };
    for init in text
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .filter_map(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(init, rustix::process::Signal::KILL);
    }
}

/// The program `spec` names, as `exec` would find it: a path with a `/`
/// as it is, a bare name in the directories of `path`. `None` when it is
/// not an executable file. A sandboxed agent's program is looked up here,
/// before bwrap starts, so a missing one fails the launch
/// (`launch-failed`) as it does without a sandbox.
pub(super) fn find_program(program: &std::path::Path, path: &OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return executable(program).then(|| program.to_path_buf());
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}

/// `<role>-<8 random hex digits>` (the role cut to fit the 64 characters).
pub(super) fn run_id(role: &RoleInstance) -> Result<RunId, Refusal> {
    let bytes = OsEntropy
        .uuid_bytes()
        .map_err(logged(Refusal::StorageUnavailable, "drawing a run id"))?;
    let role = role.as_str();
    let hex: String = bytes[..4].iter().map(|b| format!("{b:02x}")).collect();
    // Role names are ASCII, so any byte index is a character boundary.
    RunId::parse(&format!("{}-{hex}", &role[..role.len().min(55)]))
}

/// A new memfd for one capability: close-on-exec, sealable, empty.
pub(super) fn cap_memfd() -> io::Result<File> {
    use rustix::fs::{memfd_create, MemfdFlags};
    let fd = memfd_create(MEMFD_NAME, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    Ok(File::from(fd))
}

/// Sets or clears `FD_CLOEXEC` on `fd`.
fn set_cloexec(fd: BorrowedFd<'_>, cloexec: bool) -> io::Result<()> {
    use rustix::io::{fcntl_setfd, FdFlags};
    let flags = if cloexec {
        FdFlags::CLOEXEC
    } else {
        FdFlags::empty()
    };
    Ok(fcntl_setfd(fd, flags)?)
}

/// Spawns `command` with `fds` inheritable for this one spawn only: the
/// capability's memfd, and for a sandbox the descriptors of the paths its
/// plan checked, which bwrap binds.
///
/// Safe because every spawn of this process happens on this one thread:
/// while the flag is clear no other `fork` can happen (see the module
/// documentation).
pub(super) fn spawn_inheriting(command: &mut Command, fds: &[BorrowedFd<'_>]) -> io::Result<Child> {
    let cleared = fds.iter().try_for_each(|fd| set_cloexec(*fd, false));
    let spawned = cleared.and_then(|()| command.spawn());
    let restored = fds.iter().try_for_each(|fd| set_cloexec(*fd, true));
    let mut child = spawned?;
    if let Err(e) = restored {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(child)
}

/// Writes `cap` and a newline into the memfd, seals it for good and checks
/// what it holds: the agent has a copy of the descriptor and could have
/// written into it before the seals; after them nobody can.
pub(super) fn fill_and_seal(file: &File, cap: &Capability) -> io::Result<()> {
    use rustix::fs::{fcntl_add_seals, SealFlags};
    let text = format!("{}\n", cap.expose());
    file.write_all_at(text.as_bytes(), 0)?;
    file.set_len(text.len() as u64)?;
    fcntl_add_seals(
        file,
        SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
    )?;
    let mut back = vec![0; text.len() + 1];
    let mut read = 0;
    while read < back.len() {
        match file.read_at(&mut back[read..], read as u64)? {
            0 => break,
            n => read += n,
        }
    }
    if &back[..read] == text.as_bytes() {
        Ok(())
    } else {
        Err(io::Error::other("the capability descriptor was changed"))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn run_ids_are_valid_and_fresh() {
        let long = RoleInstance::parse(&"a".repeat(64)).unwrap();
        for role in [RoleInstance::parse("lead").unwrap(), long] {
            let (a, b) = (run_id(&role).unwrap(), run_id(&role).unwrap());
            assert_ne!(a, b);
            assert!(a.as_str().starts_with(&role.as_str()[..4]));
        }
    }

    #[test]
    fn a_sealed_capability_descriptor_cannot_change_and_reads_again() {
        let file = cap_memfd().unwrap();
        let cap = Capability::from_random([9; 32]);
        fill_and_seal(&file, &cap).unwrap();
        assert!(file.write_at(b"x", 0).is_err(), "sealed against writes");
        assert!(file.set_len(0).is_err(), "sealed against shrinking");
        assert!(file.set_len(100).is_err(), "sealed against growing");
        // Reopened through /proc, as `mosaic-bus call` does: from the start.
        let mut text = String::new();
        File::open(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, format!("{}\n", cap.expose()));
        let flags = rustix::io::fcntl_getfd(&file).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    }

    #[test]
    fn a_descriptor_written_by_someone_else_is_refused() {
        let file = cap_memfd().unwrap();
        file.write_all_at(&[b'x'; 200], 0).unwrap();
        rustix::fs::fcntl_add_seals(&file, rustix::fs::SealFlags::WRITE).unwrap();
        assert!(fill_and_seal(&file, &Capability::from_random([1; 32])).is_err());
    }
}
