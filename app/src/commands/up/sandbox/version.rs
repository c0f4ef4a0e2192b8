//! A harness program's version: the first line `PROGRAM --version` prints
//! (Claude Code on its standard output, pi on its standard error), which
//! `up`'s first line and `up --dry-run` name per harness agent.
//!
//! The program is the one the agent will run, and a program an agent
//! could have changed must not run outside its walls. So where the agents
//! have a sandbox, the question is asked in one of its own: bwrap with a
//! network namespace of loopback alone, the system's folders and the
//! `/etc` list read-only ([`plan::system_mounts`]), the program's install
//! folder (or the program) and this executable read-only, a fresh `/proc`,
//! `/dev` and `/tmp`, the root read-only; inside, `sandbox-exec` with the
//! same seccomp list, Landlock scopes and process cap as an agent, keeping
//! no descriptor. It gets `PATH` and `HOME=/tmp`, nothing else of `up`'s
//! environment (no key). Without a sandbox, the program runs as `up`'s
//! user with that environment, as the agent will.
//!
//! It has [`VERSION_WAIT`] to answer, then it is killed; a version that
//! cannot be read is `None` (and `up` says so once), never a failure.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::bwrap::namespace_args;
use super::exec_main::{DENIED_CALLS, EXEC_SUBCOMMAND};
use super::plan::render::{mount_args, Launch};
use super::plan::{system_mounts, Mount, Sandbox};
use crate::commands::team::Network;

/// How long the program has to print its version and exit: a node program
/// starts in 1–3 s, and a loaded two-core machine takes ten times that.
pub(crate) const VERSION_WAIT: Duration = Duration::from_secs(30);

/// The most characters of the version kept.
const MAX_VERSION: usize = 100;

/// The most bytes read of the program's output.
const MAX_OUTPUT: u64 = 4096;

/// The version `program` prints, asked as the module documentation says:
/// `install` is its install folder, when it has one; `path` the agents'
/// `PATH`; `processes` the agent's process cap.
pub(crate) fn probe(
    program: &Path,
    install: Option<&Path>,
    path: &OsStr,
    sandbox: Option<&Sandbox>,
    processes: u32,
) -> Option<String> {
    let argv = argv(program, install, sandbox, processes);
    let (mut reader, writer) = std::io::pipe().ok()?;
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .current_dir("/")
        .env_clear()
        .env("PATH", path)
        .env("HOME", "/tmp")
        .stdin(Stdio::null())
        .stdout(writer.try_clone().ok()?)
        .stderr(writer)
        .process_group(0);
    let spawned = command.spawn();
    // The command holds this process's ends of the pipe: dropped, the
    // reader sees its end when the program's close.
    drop(command);
    let mut child = spawned.ok()?;
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = (&mut reader).take(MAX_OUTPUT).read_to_end(&mut out);
        let _ = send.send(read.map(|_| out));
    });
    let output = receive.recv_timeout(VERSION_WAIT);
    let group = rustix::process::Pid::from_child(&child);
    // Whatever it started goes with it.
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let status = child.wait().ok()?;
    let output = output.ok()?.ok()?;
    if !status.success() {
        return None;
    }
    first_line(&output)
}

/// The command line of the question: see the module documentation.
fn argv(
    program: &Path,
    install: Option<&Path>,
    sandbox: Option<&Sandbox>,
    processes: u32,
) -> Vec<OsString> {
    let mut argv = Vec::new();
    if let Some(sandbox) = sandbox {
        let exe = &sandbox.places.exe;
        let mut mounts = system_mounts(&sandbox.places.host_root);
        mounts.push(Mount::Proc("/proc".into()));
        mounts.push(Mount::Dev("/dev".into()));
        mounts.push(Mount::Tmpfs("/tmp".into()));
        for path in [install.unwrap_or(program), exe.as_path()] {
            mounts.push(Mount::ReadOnly {
                source: path.to_path_buf(),
                dest: path.to_path_buf(),
            });
        }
        mounts.push(Mount::RemountRo("/".into()));
        let denied: Vec<&str> = DENIED_CALLS.iter().map(|(name, _)| *name).collect();
        argv.push(sandbox.bwrap.clone().into());
        argv.extend(namespace_args(Network::None));
        argv.extend(mount_args(&mounts, &Launch::Described));
        argv.extend(["--chdir", "/", "--"].map(OsString::from));
        argv.extend([exe.clone().into(), EXEC_SUBCOMMAND.into()]);
        // No descriptor is kept: there is no capability here.
        argv.push("--keep-fd=-1".into());
        if sandbox.landlock {
            argv.push("--landlock".into());
        }
        argv.extend([
            "--processes".into(),
            processes.to_string().into(),
            "--deny".into(),
            denied.join(",").into(),
            "--".into(),
        ]);
    }
    argv.push(program.as_os_str().to_owned());
    argv.push("--version".into());
    argv
}

/// The first line of `output` that holds more than blanks, trimmed, every
/// character a terminal would act on made a token, cut to
/// [`MAX_VERSION`] characters.
fn first_line(output: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(output);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = mosaic_domain::text::neutralise(line);
    Some(line.chars().take(MAX_VERSION).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_first_line_that_holds_something_neutralised_and_cut() {
        assert_eq!(
            first_line(b"\n  2.1.3 (Claude Code)  \nmore\n").as_deref(),
            Some("2.1.3 (Claude Code)")
        );
        assert_eq!(
            first_line(b"0.7\x1b]0;x\x07").as_deref(),
            Some("0.7⟨ESC⟩]0;x⟨BEL⟩")
        );
        assert_eq!(first_line(b" \n\n"), None);
        let long = "9".repeat(500);
        assert_eq!(
            first_line(long.as_bytes()).map(|v| v.chars().count()),
            Some(MAX_VERSION)
        );
    }

    #[test]
    fn a_program_is_asked_for_its_version_and_one_that_fails_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        };
        let path = OsStr::new("/usr/bin:/bin");
        // pi answers on its standard error.
        let stderr = write(
            "on-stderr",
            "#!/bin/sh\n[ \"$1\" = --version ] && echo 0.73.1 >&2\n",
        );
        assert_eq!(
            probe(&stderr, None, path, None, 64).as_deref(),
            Some("0.73.1")
        );
        let failing = write("failing", "#!/bin/sh\necho 1.0\nexit 3\n");
        assert_eq!(probe(&failing, None, path, None, 64), None);
        assert_eq!(
            probe(&dir.path().join("missing"), None, path, None, 64),
            None
        );
    }
}
