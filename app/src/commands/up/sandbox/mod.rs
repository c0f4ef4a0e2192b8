//! The sandbox `up` starts each agent in: bubblewrap (`bwrap`), with the
//! argument list built here, and inside it this binary's `sandbox-exec`,
//! which closes every inherited descriptor but stdio and the capability's,
//! confines itself and then executes the agent's command.
//!
//! # Which code runs in which process
//!
//! The sandbox is a trust boundary, and each file of this room runs on one
//! side of it:
//!
//! - in `up`: the [`plan`] (an agent's launch whole, built, checked and
//!   rendered to its command line, with the mandatory read-only paths
//!   inside each writable grant), the [`paths`] it grants, [`bwrap`]
//!   (finding a working one, the namespaces, what the first line says
//!   about abstract sockets and Landlock), the [`cgroup`]s it makes per
//!   run, the [`network`] per agent, the forward [`proxy`], and a harness
//!   program's [`version`], asked in a sandbox of its own;
//! - in `sandbox-cgroup` ([`cgroup_main`]), outside the sandbox, between
//!   `up` and bwrap: joins the run's cgroups, then becomes bwrap;
//! - in `sandbox-exec` ([`exec_main`]), inside, between bwrap and the
//!   agent: closes, caps and confines itself, starts the bridges, then
//!   stays as the program's supervisor ([`supervisor`]), which starts the
//!   program on `up`'s orders over the [`control`] channel and reports its
//!   exits, and serves the program's connections to the broker over its
//!   [`connector`] (the program may make no Unix socket);
//! - in `sandbox-bridge` ([`bridge_main`]), inside, beside the agent: the
//!   loopback port that carries the agent's connections to the proxy.
//!
//! Each hidden program is its own file and its own process; `up`'s plan
//! renders their arguments (the seccomp list `sandbox-exec` applies
//! among them), and what they share with `up` is data (their subcommand's
//! name, the system calls `sandbox-exec` knows, the Landlock scopes, the
//! places inside).
//!
//! Their tests: `plan_tests.rs` asserts the example's exact plan and its
//! rendering; `cgroup_tests.rs` runs the cgroups on fake v2 and v1 trees;
//! the proxy's, on real sockets, are in `proxy/tests.rs`.
//!
//! # What the sandbox is
//!
//! What an agent sees, its mounts, working directory and environment, and
//! what confines it, is its [`Plan`](plan::Plan), built in `plan.rs` and
//! rendered to its command line in `plan/render.rs`. Around it,
//! [`bwrap::namespace_args`] gives:
//!
//! - new user, PID, IPC, UTS and cgroup namespaces (and a network namespace
//!   with loopback only for `"network": "none"` and `"proxy"`); uid and gid [`SANDBOX_UID`](bwrap::SANDBOX_UID) inside, never 0,
//!   no capabilities (`--cap-drop ALL`), and no further user namespaces
//!   (`--disable-userns`), so `unshare -Urm` cannot win back what was
//!   dropped;
//! - `--new-session`: the agent has no controlling terminal, so `TIOCSTI`
//!   cannot type into the human's; `--die-with-parent`: the sandbox dies
//!   with `up`.
//!
//! bwrap sets `no_new_privs` itself; `sandbox-exec` adds a seccomp filter
//! and, where the kernel has them, Landlock's scopes ([`exec_main`]).
//! Abstract sockets are named in the network namespace, not in the files,
//! so with `"network": "host"` and no Landlock the host's stay in reach
//! ([`bwrap::AbstractSockets`]).
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

pub(crate) mod bridge_main;
pub(crate) mod bwrap;
pub(crate) mod cgroup;
pub(crate) mod cgroup_main;
mod connector;
pub(crate) mod control;
pub(crate) mod exec_main;
pub(crate) mod network;
pub(crate) mod paths;
pub(crate) mod plan;
pub(crate) mod proxy;
mod supervisor;
pub(crate) mod version;
