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
//! `business` is the normalized business of `spec/bus-broker.md`
//! ([`business_from_value`]); `agents` lists at least one agent, each with a
//! role of that business, a harness (`pi` or `claude-code`), a non-empty
//! command (program and arguments, no shell) and optionally `env`, the
//! names of `up`'s environment variables it also needs (an API key of its
//! harness, say; a name holding a service token is refused). Parsing is
//! strict: unknown
//! keys, wrong types and bad names refuse with `bad-config` (or the
//! business's own codes, `unknown-role` for an agent of no such role). Every
//! agent runs in the configuration file's directory, and a relative program
//! path (one with a `/`) is resolved against that directory too; a bare
//! program name is looked up in the agent's `PATH`.
//!
//! # One launch, in order
//!
//! All launches happen on the calling thread, one after the other:
//!
//! 1. draw a run id (`<role>-<8 hex>`) and create a memfd, close-on-exec and
//!    sealable, still empty;
//! 2. clear the memfd's close-on-exec flag, spawn the command, set the flag
//!    again. The child's environment is built from an allow-list, never
//!    inherited whole: of `up`'s own variables it gets only [`BASE_ENV`],
//!    `LC_*` and those its configuration names in `env`, and never one that
//!    a credential reference of the business names (`{"env": NAME}`: the
//!    broker in this process reads service tokens from there, and agents
//!    never hold one). It also gets `MOSAIC_RUN_ID`, `MOSAIC_BUS_SOCKET`,
//!    `MOSAIC_BUS_CAP_FD` (the descriptor's number) and a `PATH` that starts
//!    with the directory of this `mosaic-bus` executable, so scripts can run
//!    `mosaic-bus call`; its standard input is a pipe from this process, its
//!    standard output and error are this process's (nothing is relayed); it
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
//! "readerCap","agents":[{role,run,harness,pid}]}` (never a capability), or
//! on a startup failure `{"ok":false,"error":CODE}` (plus `"role"` when one
//! agent's launch failed) with exit 2. An agent that exits non-zero on its
//! own is reported on stderr and makes the exit code 1. SIGINT or SIGTERM
//! (a terminal's Ctrl-C reaches `up` alone, the agents being in groups of
//! their own) sends SIGTERM to the process groups of the agents still
//! running, waits for them (5 s, or until a second signal, then SIGKILL)
//! and closes; so does the exit of the last agent, unless `--stay`
//! asks to keep serving (for inspection with the reader capability) until a
//! signal. Closing closes the broker cleanly (socket and writer lock
//! removed) and removes `reader.cap`; a failed close exits 2.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mosaic_adapters::cause::{self, logged};
use mosaic_adapters::config::{business_from_value, BootConfig, ConfigError};
use mosaic_adapters::fs;
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::system::OsEntropy;
use mosaic_domain::evidence::{Harness, LaunchRecord};
use mosaic_domain::{Business, BusinessId, Capability, Refusal, RoleInstance, RunId};
use mosaic_ports::{Entropy, ProcessTable};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::broker::{start_broker, BootFailure, Broker};
use crate::call::{CAP_FD_ENV, SOCKET_ENV};

/// The environment variable naming an agent's run.
pub const RUN_ID_ENV: &str = "MOSAIC_RUN_ID";
/// The line an agent reads on its standard input once its capability is ready.
pub const READY_LINE: &str = "ready\n";
/// The reader capability's file, relative to the data root.
pub const READER_CAP_FILE: &str = "reader.cap";
/// The browser UI token's file (with `--browser`), relative to the data
/// root. `<url>/pane?token=<it>` opens the pane.
pub const UI_TOKEN_FILE: &str = "ui.token";

/// The largest configuration file read.
const MAX_CONFIG: u64 = 1024 * 1024;
/// How long stopping agents get between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The name memfds carry (shown in `/proc/<pid>/fd`, never the secret).
const MEMFD_NAME: &str = "mosaic-bus-cap";

/// A parsed `up` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpConfig {
    /// The business the broker serves.
    pub business: Business,
    /// The agents to launch, in this order.
    pub agents: Vec<AgentSpec>,
}

/// One agent to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// Its role instance.
    pub role: RoleInstance,
    /// Its harness.
    pub harness: Harness,
    /// The program: absolute, or a bare name looked up in `PATH`.
    pub program: PathBuf,
    /// The program's arguments.
    pub args: Vec<String>,
    /// The working directory: the configuration file's directory.
    pub dir: PathBuf,
    /// The names of `up`'s environment variables the agent also gets,
    /// beyond [`BASE_ENV`] (`env` in the configuration).
    pub env: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigJson {
    business: Value,
    agents: Vec<AgentJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentJson {
    role: String,
    harness: String,
    command: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
}

impl UpConfig {
    /// Parses a configuration whose file lives in `dir` (an absolute path:
    /// relative programs and every agent's working directory are there).
    ///
    /// # Errors
    /// `bad-config` for any other shape, an empty `agents` or command, an
    /// empty or NUL-holding command word, a bad harness or role name, or an
    /// `env` entry that is not a variable name or that names a credential
    /// reference of the business (a service token never reaches an agent);
    /// `unknown-role` for an agent whose role the business lacks; and the
    /// codes of [`business_from_value`], with the reference it names.
    pub fn parse(text: &str, dir: &Path) -> Result<Self, ConfigError> {
        let json: ConfigJson = serde_json::from_str(text)
            .map_err(logged(Refusal::BadConfig, "parsing the configuration"))?;
        let business = business_from_value(json.business)?;
        let secret = credential_env_names(&business);
        if json.agents.is_empty() {
            return Err(Refusal::BadConfig.into());
        }
        let agents = json
            .agents
            .into_iter()
            .map(|agent| {
                let role = RoleInstance::parse(&agent.role).map_err(|_| Refusal::BadConfig)?;
                business.role(&role).ok_or(Refusal::UnknownRole)?;
                let harness = Harness::parse(&agent.harness)?;
                if agent
                    .env
                    .iter()
                    .any(|name| !is_env_name(name) || secret.contains(name))
                {
                    return Err(Refusal::BadConfig);
                }
                if agent
                    .command
                    .iter()
                    .any(|w| w.is_empty() || w.contains('\0'))
                {
                    return Err(Refusal::BadConfig);
                }
                let mut words = agent.command.into_iter();
                let program = PathBuf::from(words.next().ok_or(Refusal::BadConfig)?);
                let program = if program.is_relative() && program.components().count() > 1 {
                    dir.join(program)
                } else {
                    program
                };
                Ok(AgentSpec {
                    role,
                    harness,
                    program,
                    args: words.collect(),
                    dir: dir.to_path_buf(),
                    env: agent.env,
                })
            })
            .collect::<Result<_, Refusal>>()?;
        Ok(Self { business, agents })
    }

    /// The names of the environment variables that hold this business's
    /// service tokens (`{"env": NAME}` references): never passed to an agent.
    pub fn credential_env(&self) -> Vec<String> {
        credential_env_names(&self.business)
    }

    /// Reads and parses the configuration file at `path`.
    ///
    /// # Errors
    /// `bad-config` when it cannot be read, is larger than 1 MiB or is not
    /// UTF-8; and the codes of [`UpConfig::parse`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let path = std::path::absolute(path).map_err(|_| Refusal::BadConfig)?;
        let dir = path.parent().ok_or(Refusal::BadConfig)?;
        let mut text = String::new();
        File::open(&path)
            .and_then(|f| f.take(MAX_CONFIG + 1).read_to_string(&mut text))
            .map_err(logged(Refusal::BadConfig, "reading the configuration"))?;
        if text.len() as u64 > MAX_CONFIG {
            return Err(Refusal::BadConfig.into());
        }
        Self::parse(&text, dir)
    }
}

/// The command line of `up`, as the binary parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--config FILE`.
    pub config: PathBuf,
    /// `--data-root DIR`.
    pub data_root: Option<PathBuf>,
    /// `--stay`: keep serving after every agent has exited.
    pub stay: bool,
    /// `--browser ADDR`: serve browser control on this loopback address
    /// (`127.0.0.1:7420`; port 0 picks a free one).
    pub browser: Option<String>,
    /// `--secrets-dir DIR`: where the human's reader capability and UI
    /// token are written; outside the data root.
    pub secrets_dir: Option<PathBuf>,
}

/// Runs `up` with these options: prints its one JSON line on `out`,
/// returns the exit code (0, 1 when an agent failed, 2 when `up` could not
/// start or close).
pub fn run(options: Options, out: &mut impl Write) -> u8 {
    let mut session = match start(options) {
        Ok(session) => session,
        Err(failure) => {
            tracing::error!(
                code = failure.code.code(),
                role = failure.role.as_ref().map(RoleInstance::as_str),
                reference = failure.reference.as_deref(),
                "up could not start"
            );
            let mut line = json!({"ok": false, "error": failure.code.code()});
            if let Some(role) = failure.role {
                line["role"] = json!(role.as_str());
            }
            if let Some(reference) = failure.reference {
                line["reference"] = json!(reference);
            }
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
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
    session.release();
    let code = session.supervise();
    session.close(code)
}

/// Why `up` could not start: a static code, and the agent or the
/// credential or role reference it concerns.
#[derive(Debug)]
struct Failure {
    code: Refusal,
    role: Option<RoleInstance>,
    reference: Option<String>,
}

impl From<Refusal> for Failure {
    fn from(refusal: Refusal) -> Self {
        Failure {
            code: refusal,
            role: None,
            reference: None,
        }
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Self {
        Failure {
            code: error.refusal,
            role: None,
            reference: error.reference,
        }
    }
}

impl From<BootFailure> for Failure {
    fn from(failure: BootFailure) -> Self {
        Failure {
            code: failure.refusal,
            role: None,
            reference: failure.reference,
        }
    }
}

impl Failure {
    fn of(role: &RoleInstance, code: Refusal) -> Self {
        Failure {
            code,
            role: Some(role.clone()),
            reference: None,
        }
    }
}

/// Parses, boots, writes the reader capability and launches every agent.
fn start(options: Options) -> Result<Session, Failure> {
    let config = UpConfig::load(&options.config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|_| Refusal::BrokerUnavailable)?;
    // Registered before any child exists, so no exit and no signal is missed.
    let signals = Signals::register(&runtime).map_err(|_| Refusal::BrokerUnavailable)?;
    let data_root = match options.data_root {
        Some(path) => std::path::absolute(path).map_err(|_| Refusal::UnsafePath)?,
        None => tempfile::Builder::new()
            .prefix("mosaic-up-")
            .tempdir()
            .map_err(logged(Refusal::StorageUnavailable, "creating a data root"))?
            .keep(),
    };
    let business = config.business.id().clone();
    let secret_env = config.credential_env();
    let (broker, booted) = start_broker(BootConfig {
        data_root: data_root.clone(),
        businesses: vec![config.business],
        launches: Vec::new(),
        readers: vec![business.clone()],
        repo_roots: Vec::new(),
        project_roots: Vec::new(),
        sync: Vec::new(),
        browser_listen: options.browser.clone(),
    })?;
    let secrets = Secrets::open(options.secrets_dir, &data_root)?;
    let mut session = Session {
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
        stay: options.stay,
        secret_env,
    };
    let reader = booted
        .readers
        .into_iter()
        .next()
        .ok_or(Refusal::BrokerUnavailable)?;
    session.reader_cap = Some(session.write_secret(READER_CAP_FILE, &reader.cap)?);
    if let Some(browser) = &booted.browser {
        session.ui_token = Some(session.write_secret(UI_TOKEN_FILE, &browser.token)?);
    }
    let path = child_path()?;
    for spec in &config.agents {
        session.launch(spec, &path)?;
    }
    Ok(session)
}

/// `PATH` for the agents: this executable's directory first, then ours.
fn child_path() -> Result<OsString, Failure> {
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
    std::env::join_paths(dirs).map_err(|_| Refusal::UnsafePath.into())
}

/// The variables of `up`'s environment every agent gets, when set: who and
/// where it is, and how text is shown. Nothing else of `up`'s environment
/// reaches an agent unless its configuration names it in `env`; `PATH` is
/// [`child_path`], and `LC_*` pass too.
pub const BASE_ENV: [&str; 9] = [
    "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR",
];

/// The environment `spec`'s agent starts with (before `up`'s own
/// `MOSAIC_*` and `PATH`): the variables of `from` that [`BASE_ENV`], `LC_*`
/// or its `env` name, except any that holds a service token (`secret`).
fn agent_env(
    spec: &AgentSpec,
    from: impl Iterator<Item = (OsString, OsString)>,
    secret: &[String],
) -> Vec<(OsString, OsString)> {
    from.filter(|(name, _)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        let wanted = BASE_ENV.contains(&name)
            || name.starts_with("LC_")
            || spec.env.iter().any(|n| n == name);
        wanted && !secret.iter().any(|s| s == name)
    })
    .collect()
}

fn credential_env_names(business: &Business) -> Vec<String> {
    use mosaic_domain::business::CredentialSource;
    business
        .roles()
        .flat_map(|(_, role)| {
            let credentials = role.credentials();
            [
                credentials.gitea.as_ref().map(|c| &c.source),
                credentials.vikunja.as_ref().map(|c| &c.source),
            ]
        })
        .filter_map(|source| match source {
            Some(CredentialSource::Env(name)) => Some(name.clone()),
            Some(CredentialSource::File(_)) | None => None,
        })
        .collect()
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One launched agent.
#[derive(Debug)]
struct Agent {
    role: RoleInstance,
    run: RunId,
    harness: Harness,
    child: Child,
    stdin: Option<ChildStdin>,
    exited: bool,
    failed: bool,
}

/// The running host: the broker, the agents, the reader capability file.
/// Dropped without [`Session::close`] (a startup failure), it kills the
/// agents it started, closes the broker and removes `reader.cap`.
struct Session {
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
    agents: Vec<Agent>,
    stay: bool,
    /// The environment variables holding service tokens: never passed on.
    secret_env: Vec<String>,
}

impl Session {
    /// Writes a secret (a capability or the UI token) to a new private file
    /// of the secrets folder; the caller records the path so close removes
    /// it.
    fn write_secret(&self, name: &str, secret: &Capability) -> Result<PathBuf, Failure> {
        let path = self.secrets.dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            // We hold the writer lock: whoever wrote it is gone.
            fs::check_private_file(&path)?;
            std::fs::remove_file(&path).map_err(logged(
                Refusal::StorageUnavailable,
                "removing a secret's file left by an earlier run",
            ))?;
        }
        let mut file = fs::create_private_file(&path)?;
        let written = file
            .write_all(format!("{}\n", secret.expose()).as_bytes())
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            cause::log(Refusal::StorageUnavailable, "writing a secret's file", &e);
            let _ = std::fs::remove_file(&path);
            return Err(Refusal::StorageUnavailable.into());
        }
        Ok(path)
    }

    /// One launch, steps 1 to 4 of the module documentation.
    fn launch(&mut self, spec: &AgentSpec, path: &OsStr) -> Result<(), Failure> {
        let failed = |e: io::Error| {
            cause::log(Refusal::LaunchFailed, "launching an agent", &e);
            Failure::of(&spec.role, Refusal::LaunchFailed)
        };
        let run = run_id(&spec.role).map_err(|r| Failure::of(&spec.role, r))?;
        let memfd = cap_memfd().map_err(failed)?;
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .current_dir(&spec.dir)
            .env_clear()
            .envs(agent_env(spec, std::env::vars_os(), &self.secret_env))
            .env(RUN_ID_ENV, run.as_str())
            .env(SOCKET_ENV, &self.socket)
            .env(CAP_FD_ENV, memfd.as_raw_fd().to_string())
            .env("PATH", path)
            .stdin(Stdio::piped())
            .process_group(0);
        let mut child = spawn_inheriting(&mut command, &memfd).map_err(failed)?;
        let pid = child.id();
        self.agents.push(Agent {
            role: spec.role.clone(),
            run: run.clone(),
            harness: spec.harness,
            stdin: child.stdin.take(),
            child,
            exited: false,
            failed: false,
        });
        // Our child, not yet reaped: the pid names it and nobody else.
        let start_time = ProcFs::new()
            .process(pid)
            .map_err(|_| Failure::of(&spec.role, Refusal::LaunchFailed))?
            .start_time;
        let broker = self.broker.as_ref().ok_or(Refusal::BrokerUnavailable)?;
        let issued = broker
            .bind_launch(LaunchRecord {
                business: self.business.clone(),
                role: spec.role.clone(),
                run,
                harness: spec.harness,
                address: None,
                pid,
                start_time,
            })
            .map_err(|r| Failure::of(&spec.role, r))?;
        fill_and_seal(&memfd, &issued.cap).map_err(failed)?;
        // This process's copy is closed here, before the next launch.
        drop(memfd);
        Ok(())
    }

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
            "agents": self.agents.iter().map(|a| json!({
                "role": a.role.as_str(),
                "run": a.run.as_str(),
                "harness": a.harness.as_str(),
                "pid": a.child.id(),
            })).collect::<Vec<_>>(),
        })
    }

    /// Lets every agent proceed: one `ready` line, then end of input.
    fn release(&mut self) {
        for agent in &mut self.agents {
            if let Some(mut stdin) = agent.stdin.take() {
                // An agent that already exited cannot read it; its exit is
                // reported like any other.
                let _ = stdin.write_all(READY_LINE.as_bytes());
            }
        }
    }

    /// Waits for the agents and the signals; returns 0, or 1 when an agent
    /// exited non-zero on its own.
    fn supervise(&mut self) -> u8 {
        let mut announced = false;
        loop {
            self.reap(false);
            if self.agents.iter().all(|a| a.exited) {
                if !self.stay {
                    break;
                }
                if !announced {
                    tracing::info!("every agent has exited; serving until SIGINT or SIGTERM");
                    announced = true;
                }
            }
            match self.runtime.block_on(self.signals.next()) {
                Event::ChildExited => {}
                Event::Stop => {
                    self.stop_agents();
                    break;
                }
            }
        }
        u8::from(self.agents.iter().any(|a| a.failed))
    }

    /// Collects the agents that exited; reports non-zero exits unless they
    /// are the ones `up` is stopping.
    fn reap(&mut self, stopping: bool) {
        for agent in self.agents.iter_mut().filter(|a| !a.exited) {
            let status = match agent.child.try_wait() {
                Ok(None) => continue,
                Ok(Some(status)) => Some(status),
                Err(_) => None,
            };
            agent.exited = true;
            if stopping || status.is_some_and(|s| s.success()) {
                continue;
            }
            agent.failed = true;
            tracing::warn!(
                role = agent.role.as_str(),
                run = agent.run.as_str(),
                pid = agent.child.id(),
                status = describe(status).as_str(),
                "an agent failed"
            );
        }
    }

    /// SIGTERM to every agent still running, a grace period, then SIGKILL.
    fn stop_agents(&mut self) {
        let running: Vec<&Agent> = self.agents.iter().filter(|a| !a.exited).collect();
        if running.is_empty() {
            return;
        }
        tracing::info!(agents = running.len(), "stopping the agents");
        for agent in running {
            signal_group(&agent.child, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            self.reap(true);
            let left = deadline.saturating_duration_since(Instant::now());
            if self.agents.iter().all(|a| a.exited) || left.is_zero() {
                break;
            }
            let signals = &mut self.signals;
            // Built inside the runtime: a timer needs its context.
            let next = self
                .runtime
                .block_on(async move { tokio::time::timeout(left, signals.next()).await });
            match next {
                Ok(Event::ChildExited) => {}
                // A second signal, or the grace period is over.
                Ok(Event::Stop) | Err(_) => break,
            }
        }
        self.kill_agents();
    }

    /// SIGKILL every agent still running, with its process group, and reap
    /// it. Killed before its input closes: an agent released by the end of
    /// its input could otherwise still start something.
    fn kill_agents(&mut self) {
        for agent in self.agents.iter_mut().filter(|a| !a.exited) {
            signal_group(&agent.child, rustix::process::Signal::KILL);
            let _ = agent.child.kill();
            let _ = agent.child.wait();
            agent.stdin = None;
            agent.exited = true;
        }
    }

    /// Closes the broker and removes `reader.cap`; returns `code`, or 2 when
    /// the close failed.
    fn close(mut self, code: u8) -> u8 {
        self.kill_agents();
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
                    path = &*path.to_string_lossy(),
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

impl Drop for Session {
    fn drop(&mut self) {
        self.kill_agents();
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

/// The folder the human's secrets are written to: the operator's
/// `--secrets-dir`, or a new private folder under the temporary directory.
/// Never the data root or anything under it: every agent is told the
/// socket's path, and so where the data root is.
#[derive(Debug)]
struct Secrets {
    dir: PathBuf,
    /// Whether `up` made the folder (and so removes it on close).
    made: bool,
}

impl Secrets {
    /// # Errors
    /// `unsafe-path` for a folder under the data root, one that is not a
    /// directory of ours with mode 0700, or one that cannot be made.
    fn open(given: Option<PathBuf>, data_root: &Path) -> Result<Secrets, Failure> {
        let Some(dir) = given else {
            let dir = tempfile::Builder::new()
                .prefix("mosaic-up-secrets-")
                .tempdir()
                .map_err(logged(
                    Refusal::StorageUnavailable,
                    "creating the secrets folder",
                ))?
                .keep();
            return Ok(Secrets { dir, made: true });
        };
        let dir = std::fs::canonicalize(&dir).map_err(|_| Refusal::UnsafePath)?;
        let root = std::fs::canonicalize(data_root).map_err(|_| Refusal::UnsafePath)?;
        if dir.starts_with(&root) {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                path = &*dir.to_string_lossy(),
                "the secrets folder is under the data root"
            );
            return Err(Refusal::UnsafePath.into());
        }
        fs::check_private_dir(&dir)?;
        Ok(Secrets { dir, made: false })
    }

    fn remove_if_made(&mut self) {
        if std::mem::take(&mut self.made) {
            // Empty by now; a folder someone filled is left for them.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => format!("exited with {status}"),
        None => "exited; its status is unknown".to_owned(),
    }
}

/// Sends `signal` to the process group `child` leads (every agent is
/// started as the leader of its own group). Only for a child not yet
/// reaped: its pid, and so its group id, cannot name anyone else then.
fn signal_group(child: &Child, signal: rustix::process::Signal) {
    let _ = rustix::process::kill_process_group(rustix::process::Pid::from_child(child), signal);
}

/// `<role>-<8 random hex digits>` (the role cut to fit the 64 characters).
fn run_id(role: &RoleInstance) -> Result<RunId, Refusal> {
    let bytes = OsEntropy
        .uuid_bytes()
        .map_err(logged(Refusal::StorageUnavailable, "drawing a run id"))?;
    let role = role.as_str();
    let hex: String = bytes[..4].iter().map(|b| format!("{b:02x}")).collect();
    // Role names are ASCII, so any byte index is a character boundary.
    RunId::parse(&format!("{}-{hex}", &role[..role.len().min(55)]))
}

/// What the main loop waits for.
enum Event {
    /// SIGINT or SIGTERM.
    Stop,
    /// SIGCHLD: some child changed state.
    ChildExited,
}

/// SIGINT, SIGTERM and SIGCHLD as streams on `up`'s own small runtime.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    child: tokio::signal::unix::Signal,
}

impl Signals {
    fn register(runtime: &tokio::runtime::Runtime) -> io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let _context = runtime.enter();
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            child: signal(SignalKind::child())?,
        })
    }

    async fn next(&mut self) -> Event {
        tokio::select! {
            _ = self.term.recv() => Event::Stop,
            _ = self.int.recv() => Event::Stop,
            some = self.child.recv() => match some {
                Some(()) => Event::ChildExited,
                None => Event::Stop,
            },
        }
    }
}

/// A new memfd for one capability: close-on-exec, sealable, empty.
fn cap_memfd() -> io::Result<File> {
    use rustix::fs::{memfd_create, MemfdFlags};
    let fd = memfd_create(MEMFD_NAME, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    Ok(File::from(fd))
}

/// Sets or clears `FD_CLOEXEC` on `file`.
fn set_cloexec(file: &File, cloexec: bool) -> io::Result<()> {
    use rustix::io::{fcntl_setfd, FdFlags};
    let flags = if cloexec {
        FdFlags::CLOEXEC
    } else {
        FdFlags::empty()
    };
    Ok(fcntl_setfd(file, flags)?)
}

/// Spawns `command` with `fd` inheritable for this one spawn only.
///
/// Safe because every spawn of this process happens on this one thread:
/// while the flag is clear no other `fork` can happen (see the module
/// documentation).
fn spawn_inheriting(command: &mut Command, fd: &File) -> io::Result<Child> {
    set_cloexec(fd, false)?;
    let spawned = command.spawn();
    let restored = set_cloexec(fd, true);
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
fn fill_and_seal(file: &File, cap: &Capability) -> io::Result<()> {
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
    use super::*;

    const BUSINESS: &str = r#"{"id":"acme","human":"alice","arbiters":{"technical":"lead","delivery":"lead"},
        "roles":{"lead":{"authority":{"withinRole":[],"crossRole":[]}}}}"#;

    fn config(agents: &str) -> String {
        format!(r#"{{"business":{BUSINESS},"agents":{agents}}}"#)
    }

    #[test]
    fn a_configuration_parses_and_resolves_relative_programs() {
        let text = config(
            r#"[{"role":"lead","harness":"pi","command":["agents/lead.sh","x"]},
                {"role":"lead","harness":"claude-code","command":["sh","-c","true"]}]"#,
        );
        let parsed = UpConfig::parse(&text, Path::new("/etc/demo")).unwrap();
        assert_eq!(parsed.business.id().as_str(), "acme");
        assert_eq!(
            parsed.agents[0].program,
            PathBuf::from("/etc/demo/agents/lead.sh")
        );
        assert_eq!(parsed.agents[0].args, ["x"]);
        assert_eq!(parsed.agents[0].dir, PathBuf::from("/etc/demo"));
        assert_eq!(parsed.agents[1].program, PathBuf::from("sh"));
        assert_eq!(parsed.agents[1].harness, Harness::ClaudeCode);
    }

    #[test]
    fn bad_configurations_refuse_with_static_codes() {
        let agent = r#"{"role":"lead","harness":"pi","command":["sh"]}"#;
        let cases = [
            (config("[]"), Refusal::BadConfig),
            (
                config(&format!("[{agent}]")).replace(r#""agents""#, r#""extra":1,"agents""#),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","cwd":"/""#)
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace("lead", "ghost"))),
                Refusal::UnknownRole,
            ),
            (
                config(&format!("[{}]", agent.replace("lead", "A B"))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace("pi", "codex"))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace(r#"["sh"]"#, "[]"))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace(r#"["sh"]"#, r#"["sh",""]"#))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace(r#"["sh"]"#, r#""sh""#))),
                Refusal::BadConfig,
            ),
            (format!(r#"{{"agents":[{agent}]}}"#), Refusal::BadConfig),
            (
                config(&format!("[{agent}]"))
                    .replace(r#""delivery":"lead""#, r#""delivery":"ghost""#),
                Refusal::UnknownRole,
            ),
            ("[]".to_owned(), Refusal::BadConfig),
        ];
        for (text, code) in cases {
            assert_eq!(
                UpConfig::parse(&text, Path::new("/"))
                    .map_err(Refusal::from)
                    .err(),
                Some(code),
                "{text}"
            );
        }
    }

    #[test]
    fn the_example_configuration_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let parsed = UpConfig::load(&dir.join("business.json")).unwrap();
        let roles: Vec<&str> = parsed.agents.iter().map(|a| a.role.as_str()).collect();
        assert_eq!(roles, ["lead", "dev"]);
        for agent in &parsed.agents {
            let script = agent.dir.join(&agent.args[0]);
            assert!(script.is_file(), "{}", script.display());
        }
    }

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
