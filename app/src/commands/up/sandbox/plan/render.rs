//! A plan rendered to its command, in one place: [`Plan::argv`] and
//! [`Plan::environment`] for a [`Launch`], and [`Plan::command`], the
//! process `up` spawns. The view `up --dry-run` prints is the same render
//! with [`Launch::Described`].
//!
//! A sandboxed agent's command line, in order:
//!
//! ```text
//! [mosaic-bus sandbox-cgroup --cgroup DIR… --]    where up made its cgroup
//! bwrap NAMESPACES MOUNTS --chdir CWD --
//! mosaic-bus sandbox-exec --keep-fd N [--control-fd N --bus-socket SOCKET] [--landlock]
//!   --processes N --deny CALL,…
//!   [--proxy-socket /run/mosaic-bus/proxy.sock [--forward PORT]…] [--bus-bridge]
//!   [--cap-file [--stdin-null]] --
//! PROGRAM ARGS…
//! ```
//!
//! `--control-fd` names `sandbox-exec`'s end of the run's control channel,
//! with which it stays in the sandbox as the run's supervisor; it is a
//! launch value, as the capability's descriptor is. `--bus-socket` names
//! the broker's socket, which the supervisor alone connects to for the
//! agent (its connector), and `--bus-bridge` has it serve a bridge to it
//! on the loopback too, for programs that lose the connector.
//!
//! An unsandboxed agent's is its program and arguments, run in its
//! `cwd`; for a harness, behind `sh -c` that waits for the `ready` line
//! (the capability's file is written only once the launch is bound).

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::env::{AtLaunch, Value};
use super::{Handoff, Mount, Plan, Walls};
use crate::commands::team::Network;
use crate::commands::up::sandbox::bwrap::namespace_args;
use crate::commands::up::sandbox::cgroup_main::CGROUP_SUBCOMMAND;
use crate::commands::up::sandbox::exec_main::EXEC_SUBCOMMAND;
use crate::commands::up::sandbox::network::PROXY_SOCKET;

/// The `sh` script that starts an unsandboxed harness once `up` has
/// written its capability's file: it reads the `ready` line (a shell reads
/// a pipe one byte at a time, so pi's prompt after it stays in the pipe),
/// then becomes the program, its arguments after the script's name.
pub(crate) const WAIT_READY: &str = r#"IFS= read -r line && [ "$line" = ready ] && exec "$@""#;

/// The same, for a harness that reads no input (Claude Code, which would
/// read a piped stdin as more prompt).
pub(crate) const WAIT_READY_NULL: &str =
    r#"IFS= read -r line && [ "$line" = ready ] && exec "$@" </dev/null"#;

/// What a launch gives the plan's command.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Launch<'a> {
    /// A launch, now.
    LaunchValues(LaunchValues<'a>),
    /// The plan as `up --dry-run` prints it and `up` logs it: each launch
    /// value a placeholder, and no cgroup.
    Described,
}

/// The values of one launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchValues<'a> {
    /// The change feed's cursor.
    pub(crate) since: u64,
    /// The capability's descriptor, inheritable for this spawn.
    pub(crate) cap_fd: RawFd,
    /// The supervisor's end of the run's control channel, inheritable for
    /// this spawn, when the run has one.
    pub(crate) control_fd: Option<RawFd>,
    /// The run's proxy socket (`"network": "proxy"`).
    pub(crate) proxy: Option<&'a Path>,
    /// The folders of the run's cgroup, one per hierarchy; empty without.
    pub(crate) cgroup: &'a [PathBuf],
}

impl Launch<'_> {
    /// The word for a descriptor `up` holds for a checked path.
    fn fd(&self, fd: RawFd) -> OsString {
        match self {
            Launch::LaunchValues(_) => fd.to_string().into(),
            Launch::Described => "<fd>".into(),
        }
    }

    /// The value of a variable the launch gives.
    fn value(&self, value: AtLaunch) -> OsString {
        match (self, value) {
            (Launch::LaunchValues(now), AtLaunch::Since) => now.since.to_string().into(),
            (Launch::LaunchValues(now), AtLaunch::CapFd) => now.cap_fd.to_string().into(),
            (Launch::Described, AtLaunch::Since) => "<since>".into(),
            (Launch::Described, AtLaunch::CapFd) => "<cap-fd>".into(),
        }
    }

    /// The word after `--control-fd`, when there is one.
    fn control_fd(&self) -> Option<OsString> {
        match self {
            Launch::LaunchValues(now) => now.control_fd.map(|fd| fd.to_string().into()),
            Launch::Described => Some("<control-fd>".into()),
        }
    }

    /// The run's proxy socket.
    fn proxy(&self) -> Option<OsString> {
        match self {
            Launch::LaunchValues(now) => now.proxy.map(|p| p.as_os_str().to_owned()),
            Launch::Described => Some("<proxy-socket>".into()),
        }
    }

    /// The run's cgroup.
    fn cgroup(&self) -> &[PathBuf] {
        match self {
            Launch::LaunchValues(now) => now.cgroup,
            Launch::Described => &[],
        }
    }
}

impl Plan {
    /// The command line: see the module documentation.
    pub(crate) fn argv(&self, launch: &Launch<'_>) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        let Some(walls) = &self.walls else {
            if let Handoff::File { stdin_null, .. } = &self.handoff {
                let script = if *stdin_null {
                    WAIT_READY_NULL
                } else {
                    WAIT_READY
                };
                argv.extend(["/bin/sh", "-c", script, "sh"].map(OsString::from));
            }
            argv.push(self.program.clone().into());
            argv.extend(self.args.iter().cloned());
            return argv;
        };
        let mut push = |words: &[&OsStr]| argv.extend(words.iter().map(|w| w.to_os_string()));
        let cgroup = launch.cgroup();
        if !cgroup.is_empty() {
            push(&[walls.exe.as_os_str(), CGROUP_SUBCOMMAND.as_ref()]);
            for dir in cgroup {
                push(&["--cgroup".as_ref(), dir.as_os_str()]);
            }
            push(&["--".as_ref()]);
        }
        push(&[walls.bwrap.as_os_str()]);
        argv.extend(namespace_args(self.network));
        argv.extend(mount_args(&walls.mounts, launch));
        argv.extend(["--chdir".into(), self.cwd.clone().into(), "--".into()]);
        argv.extend(self.exec_args(walls, launch));
        argv.push("--".into());
        argv.push(self.program.clone().into());
        argv.extend(self.args.iter().cloned());
        argv
    }

    /// `sandbox-exec` and its options, up to the `--` before the program.
    fn exec_args(&self, walls: &Walls, launch: &Launch<'_>) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            walls.exe.clone().into(),
            EXEC_SUBCOMMAND.into(),
            "--keep-fd".into(),
            launch.value(AtLaunch::CapFd),
        ];
        if let Some(fd) = launch.control_fd() {
            args.extend([
                "--control-fd".into(),
                fd,
                "--bus-socket".into(),
                walls.socket.clone().into(),
            ]);
        }
        if walls.landlock {
            args.push("--landlock".into());
        }
        args.extend([
            "--processes".into(),
            walls.processes.to_string().into(),
            "--deny".into(),
            walls.seccomp.join(",").into(),
        ]);
        match self.network {
            Network::Proxy => {
                args.extend(["--proxy-socket".into(), PROXY_SOCKET.into()]);
                for port in &self.forwards {
                    args.extend(["--forward".into(), port.to_string().into()]);
                }
            }
            Network::None | Network::Host => {}
        }
        if launch.control_fd().is_some() {
            args.push("--bus-bridge".into());
        }
        match &self.handoff {
            Handoff::Descriptor => {}
            Handoff::File { stdin_null, .. } => {
                args.push("--cap-file".into());
                if *stdin_null {
                    args.push("--stdin-null".into());
                }
            }
        }
        args
    }

    /// The environment, whole, with the launch's values.
    pub(crate) fn environment(&self, launch: &Launch<'_>) -> Vec<(OsString, OsString)> {
        self.env
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    Value::Set(value) => value.clone(),
                    Value::AtLaunch(at) => launch.value(*at),
                };
                (name.clone(), value)
            })
            .collect()
    }

    /// The process `up` spawns for `now`: the command line, its folder
    /// (bwrap's is `/`; the agent's is its `--chdir`) and its environment,
    /// nothing of `up`'s own but what the plan names. The caller adds the
    /// pipes and the process group.
    pub(crate) fn command(&self, now: LaunchValues<'_>) -> Command {
        let launch = Launch::LaunchValues(now);
        let argv = self.argv(&launch);
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]);
        match &self.walls {
            Some(_) => command.current_dir("/"),
            None => command.current_dir(&self.cwd),
        };
        command.env_clear().envs(self.environment(&launch));
        command
    }
}

/// bwrap's arguments for `mounts`, in order.
pub(crate) fn mount_args(mounts: &[Mount], launch: &Launch<'_>) -> Vec<OsString> {
    let mut args = Vec::new();
    let mut push = |words: &[&OsStr]| args.extend(words.iter().map(|w| w.to_os_string()));
    for mount in mounts {
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
                push(&[how.as_ref(), &launch.fd(*fd), dest.as_os_str()]);
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
                if let Some(socket) = launch.proxy() {
                    push(&["--ro-bind".as_ref(), &socket, PROXY_SOCKET.as_ref()]);
                }
            }
            Mount::RemountRo(dest) => push(&["--remount-ro".as_ref(), dest.as_os_str()]),
        }
    }
    args
}
