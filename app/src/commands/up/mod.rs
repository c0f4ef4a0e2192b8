//! `mosaic-bus up --config FILE [--data-root DIR] [--stay]`: the standalone
//! host. It boots the broker in this process, launches the agent commands
//! the configuration lists (so every launch record is one it really
//! performed), hands each agent its capability on an inherited descriptor,
//! and runs until SIGINT/SIGTERM or until every agent has exited.
//!
//! # The configuration
//!
//! ```json
//! {"business": {"id": "acme", "human": "alice", "arbiters": {…}, "roles": {…}},
//!  "agents": [{"role": "lead", "harness": "pi", "command": ["sh", "agents/lead.sh"]},
//!             {"role": "dev",  "harness": "pi", "command": ["sh", "agents/dev.sh"]}]}
//! ```
//!
//! `business` is the normalized business definition
//! ([`business_from_value`]); `agents` lists at least one agent, each with a
//! role of that business, a harness (`pi` or `claude-code`), a non-empty
//! command (program and arguments, no shell) and optionally `env`, the
//! names of `up`'s environment variables it also needs (an API key of its
//! harness, say; a name holding a service token is refused). An agent
//! with a harness and no command is started by `up` itself ([`harness`]:
//! `prompt`, `model`, `program`, `args`). Parsing is
//! strict: unknown
//! keys, wrong types and bad names refuse with `bad-config` (or the
//! business's own codes, `unknown-role` for an agent of no such role). Every
//! agent runs in its `workdir` (by default the configuration file's
//! directory, or in a sandbox its own empty home), and a relative program
//! path (one with a `/`) is resolved against the configuration's
//! directory, as is, for an agent without a `workdir`, an argument that
//! names a file there; a bare program name is looked up in the agent's
//! `PATH`.
//!
//! # The sandbox
//!
//! `"sandbox"` at the top (`required`, `auto`, the default, or `off`)
//! decides whether each agent starts in a bubblewrap sandbox
//! ([`sandbox`]), configured per agent by `workdir`, `network` and `allow`
//! ([`network`]), the extra paths `read` and `write`, the cap `stateMiB` on
//! what a run writes outside its grants, and the caps `tmpMiB`,
//! `processes` and `memoryMiB` (the last two in a cgroup per agent where
//! `up` can make one, [`cgroup`]); each agent's sandbox is one
//! [`plan::Plan`], built (and so checked) for every agent before the first launch. A working `bwrap`
//! on `PATH` is checked once, before the broker boots: without one,
//! `required` refuses with `sandbox-unavailable` and `auto` logs one
//! warning and starts the agents as before. Every agent's bound paths are
//! checked (`unsafe-path` when one would show the data root, the secrets,
//! the human's home or a credential file) before the first launch. In a sandbox, step 2 below spawns
//! bwrap (through `mosaic-bus sandbox-cgroup`, which joins the agent's
//! cgroup and executes bwrap in its place, where there is a cgroup), which
//! runs `mosaic-bus sandbox-exec` and then the command, and steps 3 and 4
//! bind bwrap's pid and start time (an `exec` keeps both): see [`sandbox`]
//! for why that pid is the one to bind.
//!
//! # The host's files
//!
//! `launch.rs` and `spawn.rs` start one agent; `output.rs` relays what it
//! writes; `supervise.rs` waits for the agents, the console and the
//! signals, and stops them; `secrets.rs` is the folder the human's secrets
//! go to; `console.rs` is the console `up --console` opens. A run's life:
//! `life.rs` is one agent's life as a machine without I/O over injected
//! times (tested in `life_tests.rs`); `runs.rs` holds the runs, the agents
//! they belong to and what the threads tell the loop; `act.rs` carries out
//! the life's effects; `control.rs` is `up`'s end of a sandbox's control
//! channel; `switch.rs` hears launching switched back on; `wake.rs` waits
//! on a sleeping run's feed and wakes it with its work; `prepare.rs`
//! plans each later run.
//!
//! # One launch, in order
//!
//! All launches happen on the calling thread, one after the other:
//!
//! 1. draw a run id (`<role>-<8 hex>`) and create a memfd, close-on-exec and
//!    sealable, still empty;
//! 2. clear the memfd's close-on-exec flag, spawn the command its plan
//!    renders (`spawn.rs`), set the flag again. The child's environment is
//!    its plan's, built from an allow-list, never
//!    inherited whole: of `up`'s own variables it gets only [`BASE_ENV`]
//!    and those its configuration names in `env`, and never one that
//!    a credential reference of the business names (`{"env": NAME}`: the
//!    broker in this process reads service tokens from there, and agents
//!    never hold one). It also gets `MOSAIC_RUN_ID`, `MOSAIC_BUS_SOCKET`,
//!    `MOSAIC_BUS_CAP_FD` (the descriptor's number) and a `PATH` that starts
//!    with the directory of this `mosaic-bus` executable, so scripts can run
//!    `mosaic-bus call`; its standard input, output and error are pipes
//!    from and to this process, which relays the output ([`output`]); it
//!    leads a process group of its own, so what it starts can be stopped
//!    with it;
//! 3. read the child's start time (field 22 of `/proc/<pid>/stat`) while it
//!    is still our unreaped child, so the pid cannot name anyone else, and
//!    bind the launch `{business, role, run, harness, pid, startTime}` with
//!    [`Broker::bind_launch`], which issues the capability;
//! 4. write the capability (64 hex digits and a newline) into the memfd,
//!    seal it against writing, shrinking and growing (and further seals),
//!    read it back to check it, and close this process's copy.
//!
//! Only after every agent is bound does `up` print its one JSON line, and
//! then it writes the line `ready` to each agent's standard input and closes
//! it. An agent must read that line before its first call: until then its
//! descriptor may still be empty. (A command that cannot wait on its input
//! is wrapped: `["sh", "-c", "read _ && exec my-harness"]`.) This order is
//! the simplest one that binds the child's real pid and start time before
//! the capability exists, without any code running between `fork` and
//! `exec`.
//!
//! # Why the capability reaches only its own agent
//!
//! It is never in an environment variable or an argument (both are readable
//! through `/proc` by other processes of the user): only the descriptor's
//! number is. Each memfd is created close-on-exec, so no `exec` inherits it,
//! except during step 2 of its own launch, when the flag is cleared for the
//! one `spawn` of its agent. That window is safe because every process this
//! program starts is started by this one thread, sequentially: the broker's
//! threads (the writer, the socket runtime) and the signal handling never
//! spawn anything, so no other child can be forked while the flag is clear.
//! By the next launch this process has already closed its copy. The sealed
//! memfd is readable again by anything the agent starts (`mosaic-bus call`
//! reopens `/proc/self/fd/N`, so it always reads from the start) and
//! writable by nobody.
//!
//! The memfd calls come from `rustix` (`memfd_create`, `fcntl` seals and
//! `FD_CLOEXEC`, `kill`): already in the dependency graph through
//! `tempfile`, well kept, and it keeps this crate free of `unsafe`.
//!
//! # Files, output and exit
//!
//! Without `--data-root` the data root is a new private folder (mode 0700)
//! under the temporary directory, kept afterwards so the store can be
//! inspected. The human's secrets, the reader capability of the business
//! (`reader.cap`) and with `--browser` the UI token (`ui.token`), are
//! written (created exclusively, mode 0600) to the secrets folder and
//! removed again on close: `--secrets-dir DIR` (a folder of ours, mode
//! 0700, not under the data root), or else a new private folder under the
//! temporary directory, removed on close too. Never under the data root:
//! every agent is told the socket's path, and so where the data root is. A
//! `reader.cap` found at start in `--secrets-dir` belongs to an `up` that
//! is gone; it is removed when it is a private file of ours, and refused
//! (`unsafe-path`) otherwise.
//!
//! On stdout, exactly one line: `{"ok":true,"business","dataRoot","socket",
//! "readerCap","log","agents":[{role,run,harness,pid,sandboxed,network,abstractSockets,output,transcript?,version?,userConfig?}]}`
//! (never a capability), or on a startup failure
//! `{"ok":false,"error":CODE}` (plus `"role"` when one agent is at fault,
//! and `"why"`, a sentence of what to change, where `up` has one:
//! `failure.rs`) with exit 2. A `--data-root` or `--secrets-dir` that does
//! not exist is made 0700 when its parent is ours and no one else may
//! write it, else refused saying how to make it (`folders.rs`). An agent that exits non-zero on its own is
//! reported on stderr and makes the exit code 1. SIGINT or SIGTERM
//! (a terminal's Ctrl-C reaches `up` alone, the agents being in groups of
//! their own) sends SIGTERM to the process groups of the agents still
//! running, waits for them (5 s, or until a second signal, then SIGKILL)
//! and closes; so does the exit of the last agent, unless `--stay`
//! asks to keep serving (for inspection with the reader capability) until a
//! signal. Each line an agent writes is kept, neutralised, in the file
//! its `output` names, and without `--console` relayed to stderr ([`output`]:
//! on a terminal dim, after `ROLE │ ` and cut to one row); with `--console`
//! ([`console`]) `up`'s own lines go to the file `log` names while the
//! console is open; the console's quitting stops `up` as a signal does. Closing closes the broker cleanly (socket and writer lock
//! removed) and removes `reader.cap`; a failed close exits 2.
//!
//! # Plans, and `--dry-run`
//!
//! Every agent's plan is made by one function for `up` and `up --dry-run`
//! alike (`plans.rs`): the sandbox decided, each harness prepared and its
//! program's version read, each plan built and checked before anything
//! starts. `up` logs each plan at debug before its launch; `--dry-run`
//! (`dry_run.rs`) prints them as JSON and starts, boots and writes
//! nothing.

mod act;
mod console;
mod control;
mod dry_run;
mod failure;
mod folders;
pub mod harness;
mod launch;
mod life;
mod output;
mod plans;
mod prepare;
mod runs;
mod sandbox;
mod secrets;
mod spawn;
mod supervise;
mod switch;
mod wake;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::builder::NonEmptyStringValueParser;
use clap::Args;
use mosaic_adapters::cause::logged;
use mosaic_adapters::config::BootConfig;
use mosaic_adapters::fs;
use mosaic_domain::evidence::RunEnd;
use mosaic_domain::{BusinessId, Refusal};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::args::{non_empty_path, LogArgs};
use super::logs;
use super::signals::Signals;
use super::team::{Idle, UpConfig};
use crate::runtime::{start_broker, Broker};
use console::Console;
pub use console::CONSOLE_ENV;
use failure::Failure;
use harness::activity;
use launch::{child_path, run_id};
pub use launch::{RUN_ID_ENV, SINCE_ENV};
use life::Life;
use output::Relays;
use plans::Team;
use runs::{Agent, Event, Member};
pub use sandbox::bridge_main::{main as sandbox_bridge, SandboxBridgeArgs};
pub use sandbox::bwrap::{SANDBOX_HOME, SANDBOX_UID};
pub use sandbox::cgroup_main::{main as sandbox_cgroup, SandboxCgroupArgs};
pub use sandbox::exec_main::{main as sandbox_exec, SandboxExecArgs};
pub use sandbox::plan::env::BASE_ENV;
pub use sandbox::plan::ETC as SANDBOX_ETC;
use sandbox::{cgroup, network, plan};
use secrets::Secrets;

/// The line an agent reads on its standard input once its capability is ready.
pub const READY_LINE: &str = "ready\n";
/// The reader capability's file, relative to the data root.
pub const READER_CAP_FILE: &str = "reader.cap";
/// The browser UI token's file (with `--browser`), relative to the data
/// root. `<url>/pane?token=<it>` opens the pane.
pub const UI_TOKEN_FILE: &str = "ui.token";

/// How long stopping agents get between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

pub(crate) const ABOUT: &str = "\
The standalone host: boot a broker in this process, launch the agents the \
configuration lists, and run until SIGINT or SIGTERM, or until every agent \
has exited.

The configuration is {\"sandbox\"?, \"business\":{id, human, arbiters, roles, \
launch?}, \"agents\":[{role, harness, command, env?, workdir?, network?, allow?, \
read?, write?, tmpMiB?, processes?, memoryMiB?, stateMiB?, connections?, shared?, \
restart?, restartLimit?, budget?, stopGraceS?}]}: harness is pi or claude-code, command a program and its \
arguments (no shell), env the names of this process's variables the agent \
also needs. Without a command, up starts the harness itself: {role, harness, \
prompt, model?: {api: \"anthropic\", baseUrl?, id?, keyEnv?}, program?, args?, \
tools?, userConfig?, ...}, its network proxy by default with the model's host admitted; \
tools all (the default with a workdir: its own tools without asking, in the \
sandbox) or bus (the bus's alone); userConfig true binds the human's own \
instructions, skills, agents and commands read-only, never credentials or \
settings. Every agent commits as ROLE (BUSINESS) <ROLE@BUSINESS.invalid>, or \
git {name, email}. A harness's \
capability is in the file MOSAIC_BUS_CAP_FILE names, its event stream in the \
transcript the first line names, which ends with its end \
{\"type\":\"mosaic-bus.ended\", cause, status?, signal?}; see docs/agents.md. sandbox is auto (the default: a bubblewrap sandbox per agent \
when bwrap works, else one warning), required (else sandbox-unavailable) \
or off. In its sandbox an agent sees an empty root and only what is \
granted: the system's program folders and a named list of /etc read-only, \
mosaic-bus and its program, the configuration file and the files its \
arguments name read-only, each by itself (never the configuration's \
directory; an agent without a workdir runs in its own empty home), its read \
paths, its workdir and \
write paths writable (never one that is, holds or lies in the \
configuration, its folder, a program or file a command names, mosaic-bus, \
a credential file, the data root, the secrets or the human's home: \
unsafe-path; no symbolic link is followed; nor a hard link of a program or \
file it names; nor another agent's writable path, overlapping or nested, \
unless both say shared: true, which one warning names), inside each writable \
path git's config and hooks, tool, editor and harness settings and start-up \
files read-only (docs/host.md), a private /tmp, /dev/shm and home (each a \
tmpfs of tmpMiB, default 256; the rest of /dev read-only), no Unix socket \
of its own making (the bus through its supervisor); at most connections \
(default 64) broker connections and proxy descriptors per run at once; \
at most processes (default 1024) \
processes (RLIMIT_NPROC, which binds no root), and where up can make a cgroup \
(v2 delegated, or v1 as root) also pids.max and memoryMiB (default 4096) of \
memory; nothing of the data root, the secrets, /var, /opt, /run \
or any home. network is none (the default: loopback only), proxy (loopback \
and up's forward proxy, at HTTPS_PROXY, which admits only the host:port \
names in allow, exact or *.domain) or host (every loopback service of the \
user in reach, with a warning). Each agent runs in its workdir with \
MOSAIC_RUN_ID, MOSAIC_BUS_SOCKET, MOSAIC_BUS_SINCE (the change feed's \
cursor at its launch) and \
MOSAIC_BUS_CAP_FD, the number of an inherited sealed descriptor that holds \
its capability (never an environment value); it must read one line, \
\"ready\", on stdin before its first call.

A run is its sandbox, not its program: restart (no, on-failure or always; \
default on-failure for a harness up starts, no for a command) starts the \
program again in the same run after a backoff of 1 s doubling to 60 s, at \
most restartLimit {count, withinS} (default 5 in 600) times, then the run \
ends failed; unsandboxed, a restart is a new run. budget {turns?, tokens?, \
costUsd?, wallS?} ends the run with cause budget, and so does stateMiB \
(default 512): what the run writes outside its grants (its output or \
transcript, cut there, and a harness's state folder, of at most 10000 \
files). A harness's state folder is data: at each launch up repairs its \
modes, keeps only sessions (removed too past the cap) and writes its \
settings afresh, read-only. A run ended elsewhere (the \
human's run.end, a revoke) is stopped: SIGTERM to its program, SIGKILL to \
its sandbox after stopGraceS (default 10). With launching switched off, up \
starts no agent until the human switches it on (L in the console, or \
launch.restore).

Stdout gets exactly one line: {\"ok\":true, business, dataRoot, socket, \
readerCap, browser?, log?, launching, agents:[{role, run, harness, pid, sandboxed, \
network, abstractSockets, output, transcript?, version?, userConfig?}]}, never a capability; abstractSockets is closed when the \
agent cannot reach abstract Unix sockets outside its sandbox (network none or \
proxy, or a Landlock scope), open otherwise. The human's reader capability \
(reader.cap) and, with --browser, the UI token (ui.token) are written to the secrets folder (mode 0600) and \
removed on close. Each line an agent writes (stdout or stderr) is kept in \
the file output names (0600: the run's lines, or a harness's transcript), \
every character a terminal would act on, or draw at another width, shown \
as a token such as ⟨ESC⟩; without --console it is also relayed to stderr: \
on a terminal dim, after ROLE │ and cut to one row, else as ROLE: LINE.

With --console, the human's console (as `mosaic-bus console`) opens on this \
terminal over the business; quitting it (q) stops up as SIGINT does. The \
agents get MOSAIC_CONSOLE=1, and up serves until the console quits.";

pub(crate) const AFTER: &str = "\
Environment:
{log_env}
  An agent gets PATH (this binary's folder first), HOME, LANG, TERM and
  the variables its `env` names, nothing else of up's environment (no
  LC_*, SSH_AUTH_SOCK or DISPLAY), never one that a credential reference
  of the business names; in a sandbox HOME is /home/agent and TMPDIR /tmp.
  PATH also decides where bwrap is found.

Exit codes:
  0  every agent exited 0, or SIGINT/SIGTERM stopped them (SIGTERM to each
     agent's process group, 5 s, then SIGKILL; a second signal kills at once)
  1  an agent exited non-zero on its own (named in the log), or the
     --console could not open (human-proof-failed, no terminal)
  2  it could not start ({\"ok\":false,\"error\":CODE} on stdout, with \"role\"
     when an agent's launch failed), a usage error (bad-request), or the
     close failed

Examples:
  mosaic-bus up --config business.json --browser 127.0.0.1:0
  mosaic-bus up --config business.json --console

Reference: docs/agents.md, docs/browser.md, docs/operations.md.";

/// `up`.
#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// The configuration file: {"business":{...},"agents":[...]}.
    #[arg(long, value_name = "FILE", value_parser = non_empty_path())]
    pub config: PathBuf,
    /// The data root (a private folder, mode 0700). Default: a new private
    /// folder under the temporary directory, kept after the run.
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub data_root: Option<PathBuf>,
    /// Where the human's reader capability and UI token are written: a
    /// private folder of ours, not under the data root. Default: a new
    /// private folder under the temporary directory, removed on close.
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub secrets_dir: Option<PathBuf>,
    /// Also serve browser control on this loopback address (port 0: any free
    /// port); the summary line names its url, pane and token file.
    #[arg(long, value_name = "ADDR", value_parser = NonEmptyStringValueParser::new())]
    pub browser: Option<String>,
    /// Keep serving after every agent has exited, until SIGINT or SIGTERM.
    #[arg(long)]
    pub stay: bool,
    /// Open the human's console on this terminal, over the business
    /// launched; quitting it stops up. The agents' output goes to a log
    /// file the first line names (log), and they get MOSAIC_CONSOLE=1.
    #[arg(long)]
    pub console: bool,
    /// With --console: a shell command the console runs once per new
    /// decision routed to you, as `console --notify` does.
    #[arg(long, value_name = "CMD", requires = "console")]
    pub notify: Option<String>,
    /// Check the configuration, find each program (and a harness's
    /// version) and print each agent's plan as JSON: its mounts, network
    /// and allow list, environment names and command line. Starts
    /// nothing, boots no broker and writes no folder.
    #[arg(long)]
    pub dry_run: bool,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

/// Runs `up` and returns its exit code.
pub fn main(args: UpArgs) -> ExitCode {
    logs::init(&args.log);
    ExitCode::from(run(args, &mut std::io::stdout()))
}

/// Runs `up` with these options: prints its one JSON line on `out`,
/// returns the exit code (0, 1 when an agent failed, 2 when `up` could not
/// start or close).
pub fn run(options: UpArgs, out: &mut impl Write) -> u8 {
    if options.dry_run {
        let asked = dry_run::Asked {
            config: &options.config,
            data_root: options.data_root.as_deref(),
            secrets_dir: options.secrets_dir.as_deref(),
            console: options.console,
        };
        return dry_run::run(asked, out);
    }
    let notify = options.notify.clone();
    let mut session = match start(options) {
        Ok(session) => session,
        Err(failure) => {
            let _ = writeln!(out, "{}", failure.line()).and_then(|()| out.flush());
            return 2;
        }
    };
    if writeln!(out, "{}", session.summary())
        .and_then(|()| out.flush())
        .is_err()
    {
        // Nobody learns where the broker is: stop rather than run unseen.
        return session.close(2);
    }
    if let Some((log, _)) = &session.log {
        match Console::open(
            &session.socket,
            &session.business,
            log,
            notify.as_deref(),
            &session.activities,
            {
                let events = session.events.0.clone();
                move |order| events.send(Event::Order(order)).is_ok()
            },
        ) {
            Some(console) => session.console = Some(console),
            None => return session.close(2),
        }
    }
    for i in 0..session.agents.len() {
        session.release(i);
    }
    let code = session.supervise();
    session.close(code)
}

/// Parses, boots, writes the reader capability and launches every agent.
fn start(options: UpArgs) -> Result<RunningHost, Failure> {
    let config = UpConfig::load(&options.config)?;
    let exe = std::env::current_exe()
        .map_err(logged(Refusal::LaunchFailed, "finding this executable"))?;
    let bwrap = plans::find_bwrap(&config, &exe)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|_| Refusal::BrokerUnavailable)?;
    // Registered before any child exists, so no exit and no signal is missed.
    let signals = Signals::register(&runtime, true).map_err(|_| Refusal::BrokerUnavailable)?;
    let data_root = match options.data_root {
        Some(path) => {
            let path = std::path::absolute(path).map_err(|_| Refusal::UnsafePath)?;
            folders::make(&path, "--data-root")?;
            path
        }
        None => fs::create_private_temp_dir("mosaic-up-")?,
    };
    let secrets_dir = options
        .secrets_dir
        .map(|dir| {
            let dir = std::path::absolute(dir).map_err(|_| Refusal::UnsafePath)?;
            folders::make(&dir, "--secrets-dir")?;
            Ok::<_, Failure>(dir)
        })
        .transpose()?;
    // Before the broker boots: sessions a run left on a disk now short of
    // room (space or files) would keep the store from opening.
    harness::state::relieve(&data_root, &config.agents);
    let business = config.business.id().clone();
    let (broker, booted) = start_broker(BootConfig {
        data_root: data_root.clone(),
        businesses: vec![config.business.clone()],
        launches: Vec::new(),
        readers: vec![business.clone()],
        repo_roots: Vec::new(),
        project_roots: Vec::new(),
        sync: Vec::new(),
        browser_listen: options.browser.clone(),
        browser_allow_private: Vec::new(),
    })?;
    let secrets = Secrets::open(secrets_dir, &data_root)?;
    let log = options
        .console
        .then(|| console::open_log(&data_root))
        .transpose()?;
    let path = child_path()?;
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut team = Team {
        config: &config,
        data_root: &data_root,
        socket: &booted.socket,
        exe: &exe,
        path: &path,
        vars: &vars,
        console: log.is_some(),
        sandbox: None,
    };
    let sandbox = bwrap
        .as_ref()
        .map(|bwrap| plans::sandbox(bwrap, &team, &secrets.dir));
    team.sandbox = sandbox.as_ref();
    let cgroups = sandbox
        .as_ref()
        .map(|_| cgroup::Cgroups::for_this_process());
    let proxy = network::proxy(&config.agents, sandbox.is_some())?;
    let runs = config
        .agents
        .iter()
        .map(|spec| run_id(&spec.role).map_err(|r| Failure::of(&spec.role, r)))
        .collect::<Result<Vec<_>, _>>()?;
    // Every agent's plan is built, and so checked, before the first
    // launch, so a refused path starts nobody; then the harnesses' files
    // are written.
    let planned = plans::plan_all(&team, &runs)?;
    for planned in &planned {
        if let Some(prepared) = &planned.prepared {
            prepared
                .write()
                .map_err(|r| Failure::of(&planned.plan.role, r))?;
        }
    }
    let sandboxed = sandbox.is_some();
    // Subscribed before the first launch: no end of a run of ours is
    // missed.
    let ends = broker.ended_runs();
    let mut session = RunningHost {
        runtime,
        signals,
        broker: Some(broker),
        business,
        secrets,
        reader_cap: None,
        ui_token: None,
        browser_url: booted.browser.as_ref().map(|b| b.url.clone()),
        socket: booted.socket,
        data_root,
        agents: Vec::new(),
        members: config
            .agents
            .iter()
            .map(|spec| Member {
                spec: spec.clone(),
                life: Life::new(spec.life, sandboxed)
                    .sleeping_when_idle(spec.harnessed.is_some() && spec.life.idle == Idle::Exit),
                run: None,
                held: false,
            })
            .collect(),
        events: mpsc::unbounded_channel(),
        ends: Some(ends),
        launching: true,
        state_watch: std::time::Instant::now(),
        failed: false,
        stay: options.stay,
        relays: Relays::to(log.is_some()),
        log,
        console: None,
        activities: activity::Activities::new(),
        cgroups,
        proxy,
        config,
        exe,
        path,
        vars,
        sandbox,
    };
    let reader = booted
        .readers
        .into_iter()
        .next()
        .ok_or(Refusal::BrokerUnavailable)?;
    session.reader_cap = Some(session.secrets.write(READER_CAP_FILE, &reader.cap)?);
    if let Some(browser) = &booted.browser {
        session.ui_token = Some(session.secrets.write(UI_TOKEN_FILE, &browser.token)?);
    }
    // Asked before the first launch.
    let (on, _) = switch::launching(&session.socket, &reader.cap.expose())?;
    if on == Some(false) {
        session.switched_off();
    }
    let now = Instant::now();
    for (m, planned) in planned.into_iter().enumerate() {
        if !session.launching {
            session.members[m].held = true;
            continue;
        }
        // Without room on the data root's disk the agent waits, held, and
        // `up` still serves the human.
        if !session.disk_room(&session.members[m].spec.role) {
            session.members[m].held = true;
            continue;
        }
        match session.launch(m, planned) {
            Ok(i) => {
                session.members[m].run = Some(i);
                session.members[m].life.handle_launched(now);
            }
            // Switched off before the first run was bound: no agent
            // starts.
            Err(failure) if failure.code == Refusal::LaunchRevoked => {
                session.discard_last(m);
                session.members[m].held = true;
                session.switched_off();
            }
            Err(failure) => return Err(failure),
        }
    }
    Ok(session)
}

/// The running host: the broker, the agents, the reader capability file.
/// Dropped without [`RunningHost::close`] (a startup failure), it kills the
/// agents it started, closes the broker and removes `reader.cap`.
struct RunningHost {
    runtime: tokio::runtime::Runtime,
    signals: Signals,
    broker: Option<Broker>,
    business: BusinessId,
    data_root: PathBuf,
    socket: PathBuf,
    /// Where the human's secrets go: never under the data root.
    secrets: Secrets,
    /// `Some` once this process created the file (and so must remove it).
    reader_cap: Option<PathBuf>,
    /// The same for the browser UI token's file.
    ui_token: Option<PathBuf>,
    /// Where browser control listens, when it does.
    browser_url: Option<String>,
    /// Every run launched, in launch order (those that ended too).
    agents: Vec<Agent>,
    /// Every agent of the configuration, in its order.
    members: Vec<Member>,
    /// What the threads tell the supervising loop.
    events: (mpsc::UnboundedSender<Event>, mpsc::UnboundedReceiver<Event>),
    /// Every end of a run the broker records, until it closes.
    ends: Option<broadcast::Receiver<RunEnd>>,
    /// Whether the business's launching is on.
    launching: bool,
    /// When `up` next measures what each run wrote outside its grants.
    state_watch: std::time::Instant,
    /// Whether a run failed on its own (the exit code is then 1).
    failed: bool,
    stay: bool,
    /// The agents' output, kept in each run's file and relayed to `up`'s
    /// stderr without the console.
    relays: Relays,
    /// With `--console`: `up`'s log file and where it is.
    log: Option<(std::fs::File, PathBuf)>,
    /// With `--console`, once it is open.
    console: Option<Console>,
    /// What each harness agent is doing, which the console shows.
    activities: activity::Activities,
    /// Where each sandboxed run's cgroup is made, when the agents have a
    /// sandbox ([`cgroup`]).
    cgroups: Option<cgroup::Cgroups>,
    /// The forward proxy, when a sandboxed agent has `"network": "proxy"`.
    proxy: Option<sandbox::proxy::Proxy>,
    /// What a later run's plan is made from (`RunningHost::prepare_run`): the
    /// configuration, this executable, the agents' `PATH`, `up`'s own
    /// environment and the sandbox, as the first runs' were.
    config: UpConfig,
    exe: PathBuf,
    path: OsString,
    vars: Vec<(OsString, OsString)>,
    sandbox: Option<plan::Sandbox>,
}

impl RunningHost {
    /// The one line printed on stdout: where everything is, no capability.
    fn summary(&self) -> Value {
        json!({
            "ok": true,
            "business": self.business.as_str(),
            "dataRoot": self.data_root.to_string_lossy(),
            "socket": self.socket.to_string_lossy(),
            "readerCap": self.reader_cap.as_ref().map(|p| p.to_string_lossy()),
            "browser": self.browser_url.as_ref().map(|url| json!({
                "url": url,
                "pane": format!("{url}/pane"),
                "tokenFile": self.ui_token.as_ref().map(|p| p.to_string_lossy()),
            })),
            "log": self.log.as_ref().map(|(_, path)| path.to_string_lossy()),
            "launching": self.launching,
            "agents": self.agents.iter().map(|a| {
                let mut agent = json!({
                    "role": a.role.as_str(),
                    "run": a.run.as_str(),
                    "harness": a.harness.as_str(),
                    "pid": a.child.id(),
                    "sandboxed": a.sandboxed,
                    "network": a.network.as_str(),
                    "abstractSockets": a.abstract_sockets.as_str(),
                    "output": a.output.to_string_lossy(),
                });
                // Only a harness `up` starts has a transcript and a version.
                if let Some(path) = &a.transcript {
                    agent["transcript"] = json!(path.to_string_lossy());
                    agent["version"] = json!(a.version);
                    agent["userConfig"] = json!(a
                        .user_config
                        .iter()
                        .map(|p| p.to_string_lossy())
                        .collect::<Vec<_>>());
                }
                agent
            }).collect::<Vec<_>>(),
        })
    }

    /// Removes the capability files `up` wrote for its unsandboxed
    /// harnesses, once their agents are gone.
    fn remove_cap_files(&mut self) {
        for path in self.agents.iter_mut().filter_map(|a| a.cap_file.take()) {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(
                    path = &*fs::neutral_path(&path),
                    cause = e.to_string().as_str(),
                    "removing an agent's capability file failed"
                );
            }
        }
    }

    /// Closes the broker and removes `reader.cap`; returns `code`, or 2 when
    /// the close failed.
    fn close(mut self, code: u8) -> u8 {
        self.kill_agents();
        self.remove_cap_files();
        self.relays.finish(STOP_GRACE);
        for agent in &self.agents {
            if let (Some(end), Some((ending, _))) = (&agent.transcript_end, &agent.ending) {
                end.handle_closing(*ending);
            }
        }
        let mut code = code;
        if let Some(broker) = self.broker.take() {
            // The broker logs a failed close.
            if broker.close().is_err() {
                code = 2;
            }
        }
        for path in [self.reader_cap.take(), self.ui_token.take()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::error!(
                    path = &*fs::neutral_path(&path),
                    cause = e.to_string().as_str(),
                    "removing a secret's file failed"
                );
                code = 2;
            }
        }
        self.secrets.remove_if_made();
        code
    }
}

impl Drop for RunningHost {
    fn drop(&mut self) {
        self.kill_agents();
        self.remove_cap_files();
        if let Some(broker) = self.broker.take() {
            let _ = broker.close();
        }
        for path in [self.reader_cap.take(), self.ui_token.take()]
            .into_iter()
            .flatten()
        {
            let _ = std::fs::remove_file(path);
        }
        self.secrets.remove_if_made();
    }
}
