//! Every agent's plan, made by one function for `up` and `up --dry-run`
//! alike ([`plan_all`], each agent's by [`plan_one`], which plans each
//! later run too): the sandbox decided ([`find_bwrap`], [`sandbox`]),
//! each harness prepared and its program's version read, each plan built
//! and so checked, before anything starts. `up` then writes the harnesses'
//! files and launches the plans; `--dry-run` prints them.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use mosaic_adapters::fs;
use mosaic_domain::{Refusal, RunId};

use super::failure::Failure;
use super::harness::{self, Prepared};
use super::launch::find_program;
use super::sandbox::bwrap::{self, Bwrap};
use super::sandbox::plan::{self, HostPaths, Making, Plan, Sandbox, Walls};
use super::sandbox::{network, paths, version};
use crate::commands::team::{AgentSpec, SandboxMode, UpConfig};

/// One agent's plan, and its harness's launch when `up` starts one.
#[derive(Debug)]
pub(super) struct Planned {
    pub(super) plan: Plan,
    pub(super) prepared: Option<Prepared>,
}

/// What the plans of one `up` are made from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Team<'a> {
    pub(super) config: &'a UpConfig,
    pub(super) data_root: &'a Path,
    /// The broker's socket in the data root.
    pub(super) socket: &'a Path,
    /// This executable.
    pub(super) exe: &'a Path,
    /// The agents' `PATH`.
    pub(super) path: &'a OsStr,
    /// `up`'s own environment.
    pub(super) vars: &'a [(OsString, OsString)],
    /// Whether the console opens (`--console`).
    pub(super) console: bool,
    pub(super) sandbox: Option<&'a Sandbox>,
}

/// The bwrap the agents start in, decided once, before the broker boots:
/// `None` with `"sandbox": "off"`, or with `"auto"` where no bwrap on
/// `PATH` can make a sandbox (one warning says so).
///
/// # Errors
/// `sandbox-unavailable` with `"required"` and no working bwrap.
pub(super) fn find_bwrap(config: &UpConfig, exe: &Path) -> Result<Option<Bwrap>, Failure> {
    match config.sandbox {
        SandboxMode::Off => Ok(None),
        SandboxMode::Required | SandboxMode::Auto => {
            let found = Bwrap::find(std::env::var_os("PATH").as_deref(), exe);
            match (found, config.sandbox) {
                (Some(bwrap), _) => Ok(Some(bwrap)),
                (None, SandboxMode::Required) => {
                    tracing::error!(
                        code = Refusal::SandboxUnavailable.code(),
                        "the configuration requires a sandbox, and no bwrap on PATH can make one \
                         (install the bubblewrap package; user namespaces must be allowed)"
                    );
                    Err(Refusal::SandboxUnavailable.into())
                }
                (None, SandboxMode::Auto | SandboxMode::Off) => {
                    tracing::warn!(
                        "no bwrap on PATH can make a sandbox, so the agents run unsandboxed, \
                         as this user: an agent can then act as the human by detaching from \
                         its ancestry, read the data root and reach every loopback service of \
                         this user (their \"network\" is \"host\"); install the bubblewrap package \
                         (or set \"sandbox\": \"required\" to refuse to start without it)"
                    );
                    Ok(None)
                }
            }
        }
    }
}

/// The sandbox of `bwrap` for `team`'s agents, its secrets folder being
/// `secrets`: where everything is, the guards no writable path may touch,
/// and whether the kernel has Landlock's scopes. Warns once about the
/// agents' networks.
pub(super) fn sandbox(bwrap: &Bwrap, team: &Team<'_>, secrets: &Path) -> Sandbox {
    let config = team.config;
    let programs: Vec<PathBuf> = config
        .agents
        .iter()
        .filter_map(|spec| find_program(&spec.program, team.path))
        .collect();
    let human_home = team
        .vars
        .iter()
        .find(|(name, _)| name == "HOME")
        .map(|(_, home)| PathBuf::from(home));
    let credentials = config.credential_files();
    let guards = paths::guards(
        &config.agents,
        &programs,
        config.file.as_deref(),
        team.exe,
        &credentials,
        human_home.as_deref(),
    );
    let landlock = bwrap::landlock_scopes();
    network::warn(&config.agents);
    Sandbox {
        bwrap: bwrap.path().to_path_buf(),
        landlock,
        places: HostPaths {
            host_root: PathBuf::from("/"),
            exe: team.exe.to_path_buf(),
            socket: team.socket.to_path_buf(),
            data_root: team.data_root.to_path_buf(),
            secrets: secrets.to_path_buf(),
            human_home,
            config_file: config.file.clone(),
            credentials,
            guards,
        },
    }
}

/// Every agent's plan, as `runs`, in the configuration's order; nothing
/// is written. A refused path or a missing program starts nobody.
///
/// # Errors
/// The first agent's failure, naming it: `launch-failed` for a program
/// that is not an executable file, `bad-config` and `unsafe-path` for a
/// path its sandbox would bind.
pub(super) fn plan_all(team: &Team<'_>, runs: &[RunId]) -> Result<Vec<Planned>, Failure> {
    let planned = team
        .config
        .agents
        .iter()
        .zip(runs)
        .map(|(spec, run)| plan_one(team, spec, run))
        .collect::<Result<Vec<_>, _>>()?;
    check_shared(&planned, &team.config.agents)?;
    Ok(planned)
}

/// The plan of `spec`'s agent, one of `team`'s, as `run`: each of
/// [`plan_all`]'s, and each later run's (a run that ended cannot start
/// again, so a new one is planned); nothing is written.
///
/// # Errors
/// As [`plan_all`]'s, for this agent.
pub(super) fn plan_one(team: &Team<'_>, spec: &AgentSpec, run: &RunId) -> Result<Planned, Failure> {
    let secret_env = team.config.credential_env();
    let at = harness::Where {
        data_root: team.data_root,
        exe: team.exe,
        socket: team.socket,
        path: team.path,
        vars: team.vars,
        sandboxed: team.sandbox.is_some(),
    };
    let failed = |r: Refusal| Failure::of(&spec.role, r);
    let prepared = spec
        .harnessed
        .as_ref()
        .map(|h| harness::prepare(spec, h, run, &at))
        .transpose()
        .map_err(failed)?;
    let version = prepared.as_ref().and_then(|prepared| {
        let install = prepared.grants.install.as_deref();
        let found = version::probe(
            &prepared.program,
            install,
            team.path,
            team.sandbox,
            spec.processes,
        );
        if found.is_none() {
            tracing::warn!(
                role = spec.role.as_str(),
                program = &*fs::neutral_path(&prepared.program),
                "the harness's program did not say its version (--version)"
            );
        }
        found
    });
    let plan = plan::build(&Making {
        spec,
        run,
        prepared: prepared.as_ref(),
        version: version.as_deref(),
        path: team.path,
        vars: team.vars,
        secret_env: &secret_env,
        socket: team.socket,
        console: team.console,
        sandbox: team.sandbox,
    })
    .map_err(failed)?;
    Ok(Planned { plan, prepared })
}

/// Two sandboxed agents' writable paths (`workdir`, `write`) that
/// overlap or nest, compared by identity ([`paths::overlapping`]): each
/// could plant what the other runs or reads as settings, so they are
/// refused unless both agents say `"shared": true`; then one warning names
/// every pair that shares.
///
/// # Errors
/// `unsafe-path`, naming the later agent of the first pair found.
fn check_shared(planned: &[Planned], agents: &[AgentSpec]) -> Result<(), Failure> {
    let sandboxed: Vec<(&Walls, &AgentSpec)> = planned
        .iter()
        .zip(agents)
        .filter_map(|(planned, spec)| planned.plan.walls.as_ref().map(|w| (w, spec)))
        .collect();
    let mut shared = Vec::new();
    for (i, (walls_a, a)) in sandboxed.iter().enumerate() {
        for (walls_b, b) in sandboxed.iter().skip(i + 1) {
            let overlap = walls_a.writable_grants().find_map(|path_a| {
                walls_b
                    .writable_grants()
                    .find(|path_b| paths::overlapping(path_a, path_b))
                    .map(|path_b| (path_a, path_b))
            });
            let Some((path_a, path_b)) = overlap else {
                continue;
            };
            if a.shared && b.shared {
                shared.push(format!("{} and {}", a.role.as_str(), b.role.as_str()));
                continue;
            }
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                role = a.role.as_str(),
                path = &*fs::neutral_path(path_a),
                other_role = b.role.as_str(),
                other_path = &*fs::neutral_path(path_b),
                "two agents' writable paths overlap or nest, so each could plant what the \
                 other runs or reads as its settings: give each its own folder, or say \
                 \"shared\": true for both"
            );
            return Err(Failure::of(&b.role, Refusal::UnsafePath));
        }
    }
    if !shared.is_empty() {
        tracing::warn!(
            agents = shared.join("; ").as_str(),
            "these agents share writable paths (\"shared\": true), so each can steer the \
             other: change its files and scripts and plant what it reads"
        );
    }
    Ok(())
}
