//! `sandbox-cgroup`: the hidden program `up` starts for a sandboxed agent
//! with a cgroup, in one process outside the sandbox that joins the run's
//! cgroups and then becomes bwrap. Everything in this file runs in that
//! process; `up` makes the cgroups and renders its arguments
//! ([`super::cgroup`]).
//!
//! Joining in a process of its own, before bwrap, puts bwrap and
//! everything it starts in the cgroup from their first instruction, with
//! no code between `fork` and `exec` (this crate has no `unsafe`, so no
//! `pre_exec`); the `exec` keeps the pid and the start time the launch
//! record binds.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The subcommand that joins the cgroups, then executes bwrap (hidden from
/// the help).
pub(crate) const CGROUP_SUBCOMMAND: &str = "sandbox-cgroup";

/// `sandbox-cgroup`: what `up` runs for a sandboxed agent with a cgroup.
/// Not for people; hidden from the help.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxCgroupArgs {
    /// A cgroup to join (its folder), one per hierarchy.
    #[arg(long, value_name = "DIR", required = true)]
    pub cgroup: Vec<PathBuf>,
    /// The program (bwrap) and its arguments.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `sandbox-cgroup`: moves this process into each cgroup, then executes
/// the command; returns only when one of these fails, with 127: an agent
/// never starts outside the cgroup `up` made for it.
pub fn main(args: SandboxCgroupArgs) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let Some((program, rest)) = args.command.split_first() else {
        return ExitCode::from(127);
    };
    for dir in &args.cgroup {
        // `0` is the writer itself, on v1 and v2 alike.
        if let Err(e) = write_existing(&dir.join("cgroup.procs"), "0") {
            eprintln!(
                "mosaic-bus sandbox-cgroup: joining {}: {e}",
                dir.to_string_lossy()
            );
            return ExitCode::from(127);
        }
    }
    let error = Command::new(program).args(rest).exec();
    eprintln!(
        "mosaic-bus sandbox-cgroup: executing {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(127)
}

/// Writes `value` to an existing file, never creating one.
fn write_existing(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}
