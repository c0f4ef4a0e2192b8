//! The runs `up` launched and the agents they belong to, and what the
//! threads tell the supervising loop ([`Event`]); what the loop does with
//! each is [`super::act`]'s.
//!
//! An agent is one entry of the configuration ([`Member`]); each of its
//! runs is one launch ([`Agent`]: its bwrap or its process, its control
//! channel, its pipes). A run that ended stays listed, so its process is
//! reaped and the console still shows how it ended.

use std::path::PathBuf;
use std::process::{Child, ChildStdin};

use mosaic_client::wire::life::{self as line, Order};
use mosaic_domain::evidence::{Ending, Harness};
use mosaic_domain::{Capability, RoleInstance, RunId};

use super::control::Control;
use super::harness::usage::Tally;
use super::harness::Input;
use super::life::{Exit, Life, Why};
use super::output::TranscriptEnd;
use super::sandbox::bwrap::AbstractSockets;
use super::sandbox::cgroup;
use super::sandbox::control::Report;
use crate::commands::team::{AgentSpec, Network};

/// What a thread tells the supervising loop.
#[derive(Debug)]
pub(super) enum Event {
    /// A sandbox's supervisor reported.
    Report { run: RunId, report: Report },
    /// A sandbox's control channel ended: its supervisor is gone.
    ControlClosed { run: RunId },
    /// The console sent an order.
    Order(Order),
    /// The human switched launching back on.
    LaunchRestored,
    /// Work arrived for a sleeping run.
    Work { run: RunId, work: Work },
    /// A sleeping run can never be woken: its agent released its role.
    Released { run: RunId },
}

/// Work that arrived for a sleeping run ([`super::wake`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Work {
    /// The feed's cursor after it.
    pub(super) cursor: u64,
    /// What the agent is told: each change, and which tool to call.
    pub(super) prompt: String,
}

/// One agent of the configuration: how it lives, and its current run.
#[derive(Debug)]
pub(super) struct Member {
    pub(super) spec: AgentSpec,
    pub(super) life: Life,
    /// Its current (or last) run, an index of the session's runs.
    pub(super) run: Option<usize>,
    /// Whether it waits for launching to be switched on.
    pub(super) held: bool,
}

/// One launched run.
#[derive(Debug)]
pub(super) struct Agent {
    /// The index of its [`Member`].
    pub(super) member: usize,
    pub(super) role: RoleInstance,
    pub(super) run: RunId,
    pub(super) harness: Harness,
    /// For a harness `up` starts, its program's version, as read.
    pub(super) version: Option<String>,
    /// Whether it runs in a sandbox (then `child` is its bwrap).
    pub(super) sandboxed: bool,
    /// Its network: the configuration's in a sandbox, else the host's.
    pub(super) network: Network,
    /// Whether abstract Unix sockets outside are in its reach.
    pub(super) abstract_sockets: AbstractSockets,
    pub(super) child: Child,
    /// Unsandboxed, its standard input until `ready` is written.
    pub(super) stdin: Option<ChildStdin>,
    /// For a harness `up` starts, what its stdin gets after `ready`.
    pub(super) input: Option<Input>,
    /// For a harness `up` starts, its arguments when woken, its
    /// conversation resumed (see [`super::wake`]).
    pub(super) resume: Option<Vec<String>>,
    /// For a run that may sleep, its capability, with which `up` waits on
    /// its feed while it sleeps.
    pub(super) cap: Option<Capability>,
    /// The feed's cursor its program was last started from
    /// (`MOSAIC_BUS_SINCE`).
    pub(super) since: u64,
    /// Work that arrived for it asleep, until it wakes with it.
    pub(super) work: Option<Work>,
    /// For a harness `up` starts, its transcript.
    pub(super) transcript: Option<PathBuf>,
    /// For a harness `up` starts, its state folder.
    pub(super) state: Option<PathBuf>,
    /// For a harness `up` starts, what appends its end to its transcript.
    pub(super) transcript_end: Option<std::sync::Arc<TranscriptEnd>>,
    /// For a harness `up` starts in a sandbox with `"userConfig"`, the
    /// human's files bound read-only into its configuration.
    pub(super) user_config: Vec<PathBuf>,
    /// Its output's file: its transcript, or the file of its lines.
    pub(super) output: PathBuf,
    /// For a harness `up` starts without a sandbox, its capability's file
    /// in the run's folder: removed when `up` closes, so no capability is
    /// left on disk.
    pub(super) cap_file: Option<PathBuf>,
    /// Sandboxed, the channel to its supervisor.
    pub(super) control: Option<Control>,
    /// Whether `child` was reaped.
    pub(super) exited: bool,
    /// How its program last exited (in a sandbox, as reported).
    pub(super) program_exit: Option<Exit>,
    /// How often its program started again inside it.
    pub(super) restarts: u64,
    /// Its end, once recorded (by `up` or anyone), and why `up` ended it.
    pub(super) ending: Option<(Ending, Option<Why>)>,
    /// The usage last noted with the broker.
    pub(super) noted: Option<Tally>,
    /// Its sandbox's cgroup, where there is one: removed when dropped,
    /// after `child`'s sandbox is killed.
    pub(super) cgroup: Option<cgroup::RunCgroup>,
}

/// How a process ended, for the log: `exited with status 3`, `killed by
/// SIGKILL`.
pub(super) fn describe(exit: Exit) -> String {
    match exit {
        Exit::Status(code) => format!("exited with status {code}"),
        Exit::Signal(signal) => format!("killed by {}", line::signal_name(signal)),
        Exit::Unknown => "ended; how is unknown".to_owned(),
    }
}
