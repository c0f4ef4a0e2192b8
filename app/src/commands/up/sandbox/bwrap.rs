//! bubblewrap as `up` starts it: finding a working `bwrap`, the
//! namespaces and identity of every sandbox ([`namespace_args`]), and what
//! `up`'s first line says of an agent's reach ([`AbstractSockets`], and
//! whether this kernel has Landlock's scopes, [`landlock_scopes`]). Runs in
//! `up`; see the room's documentation for what the sandbox is.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::commands::team::Network;

/// The uid and gid an agent has inside its sandbox: not 0, so no file of
/// the system is its own even where a mapping would allow it.
pub const SANDBOX_UID: u32 = 1000;

/// The agent's home inside the sandbox: an empty folder of its tmpfs.
pub const SANDBOX_HOME: &str = "/home/agent";

/// A bubblewrap found on `PATH` that was seen to make a sandbox here.
#[derive(Debug, Clone)]
pub(crate) struct Bwrap {
    path: PathBuf,
}

impl Bwrap {
    /// The first `bwrap` on `path` that starts `exe version` in the
    /// namespaces [`namespace_args`] asks for; `None` when there is none, or
    /// when the kernel refuses them (user namespaces switched off, say).
    pub(crate) fn find(path: Option<&OsStr>, exe: &Path) -> Option<Bwrap> {
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
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The namespaces and identity of a sandbox.
pub(crate) fn namespace_args(network: Network) -> Vec<OsString> {
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

/// Whether the abstract Unix sockets outside an agent's sandbox (a desktop
/// session's, say: they are named in the network namespace, not in the
/// files) are out of its reach; `abstractSockets` in `up`'s first line.
/// A sandboxed agent makes no Unix socket at all (`sandbox-exec`'s socket
/// filter), so they are out of reach whatever its network; the network
/// namespace and the Landlock scope stay as walls behind that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AbstractSockets {
    /// Out of reach: a sandbox.
    Closed,
    /// In reach: no sandbox.
    Open,
}

impl AbstractSockets {
    /// For an agent, sandboxed or not.
    pub(crate) fn of(sandboxed: bool) -> Self {
        if sandboxed {
            AbstractSockets::Closed
        } else {
            AbstractSockets::Open
        }
    }

    /// Its name on the first line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AbstractSockets::Closed => "closed",
            AbstractSockets::Open => "open",
        }
    }
}

/// The Landlock scopes `sandbox-exec --landlock` applies: no `connect` to
/// an abstract Unix socket, and no signal, to a process outside the
/// sandbox's Landlock domain. ABI 6 (Linux 6.12) has both.
pub(crate) fn scopes() -> landlock::BitFlags<landlock::Scope> {
    landlock::Scope::AbstractUnixSocket | landlock::Scope::Signal
}

/// Whether this kernel has the Landlock scopes [`scopes`] names. `up`
/// asks once, and then tells `sandbox-exec` to apply them (`--landlock`),
/// which refuses to start the agent when it cannot: an agent never starts
/// with less than `up`'s first line says.
pub(crate) fn landlock_scopes() -> bool {
    use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr};
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(scopes())
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_sockets_are_open_only_without_a_sandbox() {
        use AbstractSockets::{Closed, Open};
        assert_eq!(AbstractSockets::of(true), Closed);
        assert_eq!(AbstractSockets::of(false), Open);
        assert_eq!((Closed.as_str(), Open.as_str()), ("closed", "open"));
    }
}
