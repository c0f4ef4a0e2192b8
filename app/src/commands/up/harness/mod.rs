//! The harnesses `up` starts itself: an agent with `"harness":
//! "claude-code"` or `"pi"` and no `"command"`. [`prepare`] says, before
//! anything is launched, what its run needs and what its sandbox must
//! grant, writing nothing (so `up --dry-run` prepares the same), and
//! [`Prepared::write`] makes it:
//!
//! - the run's private folder (0700, new), `<data root>/agents/runs/<run>/`,
//!   bound read-only into the sandbox at the same path: for Claude Code an
//!   MCP configuration naming `mosaic-bus mcp` (`mcp.json`), a settings file
//!   with the Stop hook (`settings.json`) and the hook itself
//!   (`stop-hook.sh`, embedded from `harness/claude-code/`); for pi the
//!   extension (`mosaic-bus.ts`, embedded from `harness/pi/`). Unsandboxed,
//!   the capability's file goes there too (`cap`, see [`capfile`]);
//! - its transcript, `<data root>/agents/runs/<run>.jsonl` (0600): the
//!   harness's standard output, its event stream, as it came;
//! - a state folder per role and harness that lasts between runs,
//!   `<data root>/agents/state/<role>.<harness>/` (0700), writable in the
//!   sandbox: Claude Code's `CLAUDE_CONFIG_DIR`, pi's `PI_CODING_AGENT_DIR`.
//!   It is data, never code (`state.rs`, tested in `state_tests.rs`): at
//!   each launch `up` repairs its modes, keeps only the harness's sessions,
//!   and writes the harness's `settings.json` (and pi's `models.json`, from
//!   `"model"`) afresh, bound read-only in the sandbox;
//! - its install folder read-only: the `node_modules` folder that holds the
//!   program's real file (npm's `bin` entries are links into it), or the
//!   real file alone;
//! - the model's `host:port` admitted by the proxy, and a loopback
//!   `baseUrl`'s port forwarded into the sandbox.
//!
//! The data root's tmpfs in the sandbox shows the broker's socket and these
//! two folders of the agent's, nothing else of it.
//!
//! An idle agent (`"idle"`): with `exit` in a sandbox, the Stop hook or the
//! extension waits [`IDLE_WAIT_MS`] for work, then lets the program end
//! (`MOSAIC_BUS_IDLE=exit`); `up` starts it again when work arrives with
//! [`Prepared::resume`]'s arguments: Claude Code's `--continue` (the most
//! recent conversation of its working folder, in its own state folder),
//! pi's `--continue` in the run's own session folder,
//! `<state>/sessions/<run>/` (so pi keeps its session, never
//! `--no-session`). With `wait`, and in every unsandboxed run (whose
//! program is the run), they wait for work with no cap
//! (`MOSAIC_BUS_IDLE=wait`), Claude Code's hook below its timeout.
//!
//! Claude Code is allowed the bus's tools (`--allowedTools
//! mcp__mosaic-bus`, every tool of that server). With `"tools": "all"`
//! in a sandbox it runs its own tools without asking
//! (`--permission-mode bypassPermissions`: the sandbox is the wall);
//! without one, only its file edits in its `workdir`
//! (`--permission-mode acceptEdits`), and in `-p` mode anything else is
//! denied, not asked. With `"bus"` its own tools are gone (`--tools ""`),
//! as pi's built-in ones are (`--no-builtin-tools`). `"args"` come after
//! `up`'s own arguments (a later flag wins), and the prompt last, after
//! `--`. pi gets its prompt as one RPC command on stdin after `ready`, and
//! stdin stays open until it exits (its extension ends the session).
//!
//! `activity.rs` reads a harness's event stream into what the agent is
//! doing (a pure parser of one line, and the table per run the console is
//! fed from); `activity_tests.rs` feeds it recorded lines of both
//! harnesses. `usage.rs` reads from the same stream the harness's usage
//! (turns, tokens, cost) and the error its model's last answer ended in
//! (tested in `usage_tests.rs`). `capfile.rs`: the capability as a private
//! file for a harness that does not pass descriptors on.

pub mod activity;
pub(crate) mod capfile;
pub(crate) mod state;
pub mod usage;

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};

use mosaic_adapters::fs::{check_private_dir, create_private_file, neutral_path};
use mosaic_client::cap::{CAP_FILE_ENV, SOCKET_ENV};
use mosaic_domain::evidence::Harness;
use mosaic_domain::{Refusal, RunId};
use serde_json::json;

use super::launch::{find_program, RUN_ID_ENV};
use super::sandbox::plan::mandatory;
use crate::commands::team::{AgentSpec, Allow, HarnessRun, Idle, Tools};
use capfile::SANDBOX_CAP_FILE;

/// The Stop hook `up` writes into a Claude Code run's folder.
const STOP_HOOK: &str = include_str!("../../../../../harness/claude-code/stop-hook.sh");

/// The pi extension `up` writes into a pi run's folder.
const PI_EXTENSION: &str = include_str!("../../../../../harness/pi/mosaic-bus.ts");

/// The MCP server's name: Claude Code calls its tools
/// `mcp__mosaic-bus__<verb>`.
pub(super) const MCP_SERVER: &str = "mosaic-bus";

/// How long Claude Code lets the Stop hook run, in seconds: above the
/// hook's default 60 s wait plus the client's 5 s.
const HOOK_TIMEOUT_S: u32 = 90;

/// How long Claude Code lets the Stop hook run when it waits with no cap,
/// in seconds: a day.
const WAIT_HOOK_TIMEOUT_S: u32 = 86_400;

/// How long the waiting hook waits in all before it keeps the agent for
/// one turn and waits again, in seconds: an hour below its timeout.
const WAIT_HOOK_LIMIT_S: u32 = 82_800;

/// How long an idle agent that may sleep waits for work before its
/// program ends, in milliseconds: an answer that comes quickly still
/// reaches the running program.
pub(super) const IDLE_WAIT_MS: u32 = 10_000;

/// The variable that says how long one wait of the hook and the
/// extension lasts.
const WAIT_ENV: &str = "MOSAIC_HOOK_WAIT_MS";

/// The variable that tells the hook and the extension what idling does.
const IDLE_ENV: &str = "MOSAIC_BUS_IDLE";

/// What the sandbox of a harness agent grants beyond its plan's usual.
#[derive(Debug, Clone)]
pub(super) struct Grants {
    /// The install folder, read-only (`None` when the program's folder is
    /// bound anyway).
    pub(super) install: Option<PathBuf>,
    /// The state folder, writable.
    pub(super) state: PathBuf,
    /// The configuration files in it that `up` writes at each launch,
    /// bound read-only over themselves ([`state::configuration`]).
    pub(super) fixed: Vec<PathBuf>,
    /// The run's folder, read-only.
    pub(super) run_dir: PathBuf,
    /// With `"userConfig"`, the human's own harness files (each its real
    /// path) and where in the state folder each is bound, read-only.
    pub(super) user: Vec<(PathBuf, PathBuf)>,
}

/// How `up` feeds the harness's standard input after `ready`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Input {
    /// Nothing: Claude Code gets `/dev/null`.
    Null,
    /// One line, then the pipe stays open (pi's RPC prompt).
    Line(String),
}

/// One folder or file [`Prepared::write`] makes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Made {
    /// A private folder: made when missing, or when `new` made now and
    /// never one that was there.
    Folder { path: PathBuf, new: bool },
    /// A new private file.
    File { path: PathBuf, bytes: Vec<u8> },
    /// A private file written anew in a folder the agent can write.
    Replaced { path: PathBuf, bytes: Vec<u8> },
    /// The state folder, made `up`'s again ([`state::own`]).
    State {
        path: PathBuf,
        harness: Harness,
        cap: state::Cap,
    },
    /// Whatever link or file the agent left where a folder or file of the
    /// human's is bound, removed, never followed: bwrap would make its
    /// mount point through a link.
    Cleared { path: PathBuf },
}

/// One harness agent's launch, ready before anything starts.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(super) harness: Harness,
    /// The program's real file, which runs.
    pub(super) program: PathBuf,
    /// Its arguments, `"args"` included.
    pub(super) args: Vec<OsString>,
    /// Its environment beyond the allow-list's and `up`'s `MOSAIC_*`.
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) input: Input,
    pub(super) grants: Grants,
    /// Its transcript (0600, created).
    pub(super) transcript: PathBuf,
    /// Where the agent reads its capability's file.
    pub(super) cap_file: PathBuf,
    /// The model's `host:port`, which the proxy admits.
    pub(super) endpoint: Allow,
    /// A loopback port to forward into the sandbox.
    pub(super) forward: Option<u16>,
    /// Its arguments when it starts again in its run with its
    /// conversation resumed, before the prompt (`None` when one is not
    /// text, and it cannot be sent to the sandbox).
    pub(crate) resume: Option<Vec<String>>,
    /// What [`Prepared::write`] makes.
    made: Vec<Made>,
}

/// Where `up` looks for things when it prepares a harness agent.
#[derive(Debug)]
pub(super) struct Where<'a> {
    pub(super) data_root: &'a Path,
    /// This executable, at the same path inside the sandbox.
    pub(super) exe: &'a Path,
    pub(super) socket: &'a Path,
    /// The agents' `PATH`, where a bare program name is found.
    pub(super) path: &'a OsStr,
    /// `up`'s own environment, where the model's key is read.
    pub(super) vars: &'a [(OsString, OsString)],
    pub(super) sandboxed: bool,
}

/// Says how `spec`'s harness starts as `run`, and what its run folder,
/// transcript and state folder hold: see the module documentation.
/// Nothing is written until [`Prepared::write`].
///
/// # Errors
/// `launch-failed` when its program is not an executable file.
pub(super) fn prepare(
    spec: &AgentSpec,
    harnessed: &HarnessRun,
    run: &RunId,
    at: &Where<'_>,
) -> Result<Prepared, Refusal> {
    let found = find_program(&spec.program, at.path)
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(|| {
            tracing::warn!(
                code = Refusal::LaunchFailed.code(),
                role = spec.role.as_str(),
                program = &*neutral_path(&spec.program),
                "the harness's program is not an executable file (install it, or name it \
                 with \"program\")"
            );
            Refusal::LaunchFailed
        })?;
    let agents = at.data_root.join("agents");
    let runs = agents.join("runs");
    let run_dir = runs.join(run.as_str());
    let states = agents.join("state");
    let state = states.join(format!("{}.{}", spec.role.as_str(), spec.harness.as_str()));
    let transcript = runs.join(format!("{}.jsonl", run.as_str()));
    let mut made = vec![
        Made::Folder {
            path: agents,
            new: false,
        },
        Made::Folder {
            path: runs,
            new: false,
        },
        // The state folder first: what a run left there past its cap (a
        // disk or its files filled) goes before anything new is made.
        Made::Folder {
            path: states,
            new: false,
        },
        Made::State {
            path: state.clone(),
            harness: spec.harness,
            cap: state::Cap::of_mib(spec.state_mib),
        },
        Made::Folder {
            path: run_dir.clone(),
            new: true,
        },
        Made::File {
            path: transcript.clone(),
            bytes: Vec::new(),
        },
    ];
    let cap_file = if at.sandboxed {
        PathBuf::from(SANDBOX_CAP_FILE)
    } else {
        run_dir.join("cap")
    };
    let model = &harnessed.model;
    let key = at
        .vars
        .iter()
        .find(|(name, _)| name.to_str() == Some(&model.key_env))
        .map(|(_, value)| value.clone());
    if key.is_none() {
        tracing::warn!(
            role = spec.role.as_str(),
            variable = model.key_env.as_str(),
            "the variable that holds the model's key is not set: the agent will reach its \
             model without one"
        );
    }
    if spec.work.tools == Tools::All && !at.sandboxed {
        tracing::warn!(
            role = spec.role.as_str(),
            "without a sandbox a harness's shell runs as this user with nothing around it: \
             Claude Code's own tools are limited to file edits in its workdir, and pi's run as \
             they are (\"tools\": \"bus\" leaves the bus's alone)"
        );
    }
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut args: Vec<OsString> = Vec::new();
    // An unsandboxed run is its program: it cannot sleep, so it waits.
    let sleeps = at.sandboxed && spec.life.idle == Idle::Exit;
    env.push((IDLE_ENV.into(), if sleeps { "exit" } else { "wait" }.into()));
    // A wait the configuration passes on (`"env"`) is the user's choice.
    if sleeps && !spec.env.iter().any(|name| name == WAIT_ENV) {
        env.push((WAIT_ENV.into(), IDLE_WAIT_MS.to_string().into()));
    }
    // Where a listed configuration file is missing, the sandbox binds a
    // placeholder that is not a regular file, and `git add -A` refuses
    // it: the agent's git ignores those names, through its environment,
    // never through a file of the repository's.
    if at.sandboxed && !spec.env.iter().any(|name| name.starts_with("GIT_CONFIG_")) {
        let ignored = run_dir.join("git-ignored");
        made.push(Made::File {
            path: ignored.clone(),
            bytes: git_ignored(),
        });
        env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
        env.push(("GIT_CONFIG_KEY_0".into(), "core.excludesFile".into()));
        env.push(("GIT_CONFIG_VALUE_0".into(), ignored.into()));
    }
    // The continued conversation: the flag that resumes it.
    let mut resume_flags: Vec<OsString> = vec!["--continue".into()];
    let input = match spec.harness {
        Harness::ClaudeCode => {
            let mcp = run_dir.join("mcp.json");
            let settings = run_dir.join("settings.json");
            let hook = run_dir.join("stop-hook.sh");
            made.push(Made::File {
                path: hook.clone(),
                bytes: STOP_HOOK.into(),
            });
            let server_env = json!({
                SOCKET_ENV: at.socket.to_string_lossy(),
                CAP_FILE_ENV: cap_file.to_string_lossy(),
                RUN_ID_ENV: run.as_str(),
            });
            let servers = json!({"mcpServers": {MCP_SERVER: {
                "type": "stdio",
                "command": at.exe.to_string_lossy(),
                "args": ["mcp"],
                "env": server_env,
            }}});
            made.push(Made::File {
                path: mcp.clone(),
                bytes: servers.to_string().into(),
            });
            let timeout = if sleeps {
                HOOK_TIMEOUT_S
            } else {
                env.push((
                    "MOSAIC_HOOK_LIMIT_S".into(),
                    WAIT_HOOK_LIMIT_S.to_string().into(),
                ));
                WAIT_HOOK_TIMEOUT_S
            };
            let hooks = json!({"hooks": {"Stop": [{"hooks": [{
                "type": "command",
                "command": format!("sh {}", shell_quote(&hook.to_string_lossy())),
                "timeout": timeout,
            }]}]}});
            made.push(Made::File {
                path: settings.clone(),
                bytes: hooks.to_string().into(),
            });
            for arg in [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                // The Stop hook's start in the stream: the console's
                // "waiting on the feed" (`activity.rs`).
                "--include-hook-events",
                "--strict-mcp-config",
            ] {
                args.push(arg.into());
            }
            args.push(flag("--mcp-config", mcp.as_os_str()));
            args.push(flag("--settings", settings.as_os_str()));
            args.push(format!("--allowedTools=mcp__{MCP_SERVER}").into());
            match (spec.work.tools, at.sandboxed) {
                // The sandbox is the wall: nothing the tools do reaches
                // past it, so asking would only stop the work.
                (Tools::All, true) => args.push("--permission-mode=bypassPermissions".into()),
                // Outside a sandbox nothing walls the shell in: its file
                // edits in the workdir run, anything else is denied.
                (Tools::All, false) => {
                    if spec.workdir.is_some() {
                        args.push("--permission-mode=acceptEdits".into());
                    }
                }
                (Tools::Bus, _) => args.push("--tools=".into()),
            }
            if let Some(id) = &model.id {
                args.push(format!("--model={id}").into());
                env.push(("ANTHROPIC_MODEL".into(), id.into()));
            }
            env.push(("CLAUDE_CONFIG_DIR".into(), state.clone().into()));
            for name in [
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "DISABLE_AUTOUPDATER",
                "DISABLE_TELEMETRY",
            ] {
                env.push((name.into(), "1".into()));
            }
            // With tool search on, Claude Code defers MCP tools behind a
            // search tool; the bus's tools are few and always needed.
            env.push(("ENABLE_TOOL_SEARCH".into(), "false".into()));
            if let Some(url) = &model.base_url {
                env.push(("ANTHROPIC_BASE_URL".into(), url.text.clone().into()));
            }
            // Claude Code reads its key from this name only.
            if let Some(key) = &key {
                env.push(("ANTHROPIC_API_KEY".into(), key.clone()));
            }
            Input::Null
        }
        Harness::Pi => {
            let extension = run_dir.join("mosaic-bus.ts");
            made.push(Made::File {
                path: extension.clone(),
                bytes: PI_EXTENSION.into(),
            });
            let mut provider = json!({
                "api": "anthropic-messages",
                "apiKey": model.key_env,
            });
            if let Some(url) = &model.base_url {
                provider["baseUrl"] = json!(url.text);
            }
            if let Some(id) = &model.id {
                provider["models"] = json!([{"id": id}]);
            }
            let models = json!({"providers": {"anthropic": provider}});
            made.push(Made::Replaced {
                path: state.join("models.json"),
                bytes: models.to_string().into(),
            });
            // Its session is kept in the run's own folder of sessions, so a
            // wake continues this run's and no other.
            let sessions = state.join("sessions");
            let session = sessions.join(run.as_str());
            made.push(Made::Folder {
                path: sessions,
                new: false,
            });
            made.push(Made::Folder {
                path: session.clone(),
                new: true,
            });
            for arg in ["--mode", "rpc", "--provider", "anthropic"] {
                args.push(arg.into());
            }
            // pi takes a flag's value as the next word only.
            args.push("--session-dir".into());
            args.push(session.into());
            match spec.work.tools {
                Tools::All => {}
                // The extension's tools stay: they are the bus's.
                Tools::Bus => args.push("--no-builtin-tools".into()),
            }
            if let Some(id) = &model.id {
                args.push("--model".into());
                args.push(id.into());
            }
            args.push("-e".into());
            args.push(extension.into());
            env.push(("PI_CODING_AGENT_DIR".into(), state.clone().into()));
            // The extension runs `mosaic-bus call`: this binary, bound
            // read-only in the sandbox as for Claude Code's MCP server.
            env.push(("MOSAIC_BUS_BIN".into(), at.exe.as_os_str().to_owned()));
            env.push(("PI_OFFLINE".into(), "1".into()));
            env.push(("PI_SKIP_VERSION_CHECK".into(), "1".into()));
            env.push(("PI_TELEMETRY".into(), "0".into()));
            if let Some(key) = &key {
                env.push((model.key_env.clone().into(), key.clone()));
            }
            Input::Line(json!({"type": "prompt", "message": harnessed.prompt}).to_string())
        }
    };
    // The harness's own settings in its state folder: written afresh, so
    // what a run left there is never read by the next.
    made.push(Made::Replaced {
        path: state.join("settings.json"),
        bytes: b"{}".to_vec(),
    });
    let fixed = state::configuration(spec.harness)
        .iter()
        .map(|name| state.join(name))
        .collect();
    let user = match (spec.work.user_config, at.sandboxed) {
        (true, true) => user_config(spec, at.vars, &state),
        (true, false) => {
            tracing::warn!(
                role = spec.role.as_str(),
                "\"userConfig\" binds the human's setup into a sandbox, and this agent has \
                 none: nothing is bound"
            );
            Vec::new()
        }
        (false, _) => Vec::new(),
    };
    for (_, dest) in &user {
        made.push(Made::Cleared { path: dest.clone() });
    }
    args.extend(spec.args.iter().map(OsString::from));
    resume_flags.splice(0..0, args.iter().cloned());
    let resume = resume_flags
        .into_iter()
        .map(OsString::into_string)
        .collect::<Result<Vec<_>, _>>()
        .ok();
    if let Input::Null = input {
        args.push("--".into());
        args.push(harnessed.prompt.clone().into());
    }
    Ok(Prepared {
        harness: spec.harness,
        grants: Grants {
            install: install_folder(&found),
            state,
            fixed,
            run_dir,
            user,
        },
        program: found,
        args,
        env,
        input,
        transcript,
        cap_file,
        endpoint: model.endpoint.clone(),
        forward: model.loopback_port(),
        resume,
        made,
    })
}

/// The names the agent's git ignores: the file placeholders among the
/// mandatory read-only paths, one a line.
fn git_ignored() -> Vec<u8> {
    mandatory::GIT
        .iter()
        .filter(|name| !name.contains('/'))
        .chain(mandatory::PROJECT_FILES.iter())
        .map(|name| format!("{name}\n"))
        .collect::<String>()
        .into_bytes()
}

impl Prepared {
    /// Makes its run folder (new), its state folder, its transcript and
    /// the files of its run, in the data root.
    ///
    /// # Errors
    /// `unsafe-path` when a folder of `up`'s is not private, or a file the
    /// agent left in its state folder cannot be removed;
    /// `storage-unavailable` when a folder or file cannot be made.
    pub(super) fn write(&self) -> Result<(), Refusal> {
        for made in &self.made {
            match made {
                Made::Folder { path, new } => private_dir(path, *new)?,
                Made::File { path, bytes } => write_new(path, bytes)?,
                Made::Replaced { path, bytes } => replace(path, bytes)?,
                Made::State { path, harness, cap } => state::own(path, *harness, *cap)?,
                Made::Cleared { path } => clear(path)?,
            }
        }
        Ok(())
    }
}

/// The files of the human's own setup a harness reads from its
/// configuration folder and `"userConfig"` shares: instructions, skills,
/// subagents and commands (Claude Code, from `~/.claude`), instructions,
/// system prompts, skills and prompt templates (pi, from `~/.pi/agent`).
/// Never credentials, settings, hooks, MCP servers or extensions: those
/// hold secrets or run code.
fn user_files(harness: Harness) -> (&'static str, &'static [&'static str]) {
    match harness {
        Harness::ClaudeCode => (".claude", &["CLAUDE.md", "skills", "agents", "commands"]),
        Harness::Pi => (
            ".pi/agent",
            &[
                "AGENTS.md",
                "SYSTEM.md",
                "APPEND_SYSTEM.md",
                "skills",
                "prompts",
            ],
        ),
    }
}

/// The human's files of [`user_files`] that exist under `HOME` (of
/// `vars`, `up`'s environment), each by its real path, with where it is
/// bound in `state`. A link is followed (a setup kept elsewhere is
/// common); what is neither a file nor a folder is left out.
fn user_config(
    spec: &AgentSpec,
    vars: &[(OsString, OsString)],
    state: &Path,
) -> Vec<(PathBuf, PathBuf)> {
    let Some(home) = vars
        .iter()
        .find(|(name, _)| name == "HOME")
        .map(|(_, home)| PathBuf::from(home))
        .filter(|home| home.is_absolute())
    else {
        tracing::warn!(
            role = spec.role.as_str(),
            "\"userConfig\" is set and HOME is not an absolute path: nothing of the human's \
             setup is bound"
        );
        return Vec::new();
    };
    let (folder, names) = user_files(spec.harness);
    names
        .iter()
        .filter_map(|name| {
            let real = std::fs::canonicalize(home.join(folder).join(name)).ok()?;
            let meta = std::fs::metadata(&real).ok()?;
            (meta.is_file() || meta.is_dir()).then(|| (real, state.join(name)))
        })
        .collect()
}

/// Removes the link or file at `path`, never following it; a folder
/// stays (a bind covers it).
fn clear(path: &Path) -> Result<(), Refusal> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => std::fs::remove_file(path).map_err(|_| Refusal::UnsafePath),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) => Err(Refusal::UnsafePath),
    }
}

/// `--name=value`, one word, so a flag that takes several values takes
/// this one alone.
fn flag(name: &str, value: &OsStr) -> OsString {
    let mut word = OsString::from(format!("{name}="));
    word.push(value);
    word
}

/// `text` quoted for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The folder to grant read-only for the program's real file `program`:
/// the `node_modules` folder that holds it (a package's dependencies lie
/// beside it or within it), else none (the plan binds the file itself).
fn install_folder(program: &Path) -> Option<PathBuf> {
    program
        .ancestors()
        .find(|dir| dir.file_name() == Some(OsStr::new("node_modules")))
        .map(Path::to_path_buf)
}

/// `path` as a private folder (0700) of ours: made when missing, or when
/// `new`, made now and never one that was there.
///
/// # Errors
/// `unsafe-path` when it is not a private folder of ours (a link, another
/// mode); `storage-unavailable` when it cannot be made.
fn private_dir(path: &Path, new: bool) -> Result<(), Refusal> {
    match mosaic_adapters::fs::create_private_dir(path, false) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !new => {}
        Err(e) => {
            mosaic_adapters::cause::log(
                Refusal::StorageUnavailable,
                "making a harness agent's folder",
                &e,
            );
            return Err(Refusal::StorageUnavailable);
        }
    }
    check_private_dir(path)
}

/// Writes a new private file at `path`.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), Refusal> {
    create_private_file(path)?
        .write_all(bytes)
        .map_err(|_| Refusal::StorageUnavailable)
}

/// Writes `path` anew in a folder the agent can write: what is there
/// (a file, or a link the agent left) is removed first, never followed.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), Refusal> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return Err(Refusal::UnsafePath),
    }
    write_new(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_folder_is_the_node_modules_that_holds_the_program() {
        assert_eq!(
            install_folder(Path::new(
                "/opt/h/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
            )),
            Some(PathBuf::from("/opt/h/lib/node_modules"))
        );
        assert_eq!(install_folder(Path::new("/srv/bin/fake-claude")), None);
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }

    #[test]
    fn the_human_s_setup_is_its_named_files_alone_and_a_link_left_for_it_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let claude = home.join(".claude");
        std::fs::create_dir_all(claude.join("skills")).unwrap();
        std::fs::create_dir_all(dir.path().join("kept/agents")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("kept/agents"), claude.join("agents")).unwrap();
        for file in ["CLAUDE.md", ".credentials.json", "settings.json"] {
            std::fs::write(claude.join(file), "x").unwrap();
        }
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let config = r#"{"business":{"id":"acme","human":"alice",
            "arbiters":{"technical":"lead","delivery":"lead"},
            "roles":{"lead":{"authority":{"withinRole":[],"crossRole":[]}}}},
            "agents":[{"role":"lead","harness":"claude-code","prompt":"go","userConfig":true}]}"#;
        let spec = &crate::commands::team::UpConfig::parse(config, dir.path())
            .unwrap()
            .agents[0];
        let vars = [(OsString::from("HOME"), home.clone().into_os_string())];
        let mut bound = user_config(spec, &vars, &state);
        bound.sort();
        let real = |p: &Path| std::fs::canonicalize(p).unwrap();
        let mut expected = vec![
            (real(&claude.join("CLAUDE.md")), state.join("CLAUDE.md")),
            (real(&dir.path().join("kept/agents")), state.join("agents")),
            (real(&claude.join("skills")), state.join("skills")),
        ];
        expected.sort();
        assert_eq!(bound, expected);
        assert!(user_config(spec, &[], &state).is_empty());
        // A link the agent left where a bind goes is removed, not
        // followed; a folder stays.
        let target = dir.path().join("target");
        std::fs::write(&target, "mine").unwrap();
        std::os::unix::fs::symlink(&target, state.join("CLAUDE.md")).unwrap();
        std::fs::create_dir(state.join("skills")).unwrap();
        clear(&state.join("CLAUDE.md")).unwrap();
        clear(&state.join("skills")).unwrap();
        clear(&state.join("commands")).unwrap();
        assert!(std::fs::symlink_metadata(state.join("CLAUDE.md")).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");
        assert!(state.join("skills").is_dir());
    }

    #[test]
    fn a_file_the_agent_left_in_its_state_folder_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "mine").unwrap();
        let models = dir.path().join("models.json");
        std::os::unix::fs::symlink(&target, &models).unwrap();
        replace(&models, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");
        assert_eq!(std::fs::read_to_string(&models).unwrap(), "{}");
        assert!(!std::fs::symlink_metadata(&models)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
