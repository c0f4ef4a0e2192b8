//! `up --dry-run`: everything `up` decides before it starts anything, and
//! nothing it does. It reads and checks the configuration, decides the
//! sandbox, finds each program (and a harness program's version), builds
//! and checks each agent's plan with the very function `up` uses
//! (`plans::plan_all`), and prints the plans as one JSON document:
//!
//! ```json
//! {"ok": true, "dryRun": true, "business": "acme", "dataRoot": "…",
//!  "socket": "…", "agents": [PLAN…]}
//! ```
//!
//! Each `PLAN` is the plan's view (`sandbox::plan::view`), which `up`
//! logs at debug before each launch too. It boots no broker, writes no
//! data root, secrets folder, run folder or cgroup, and starts no proxy:
//! a data root or secrets folder it is given but that does not exist is
//! only checked to be one `up` would make, and without one it shows where
//! `up` would make it (the `XXXXXX` are random letters then). Run ids are
//! drawn as `up` draws them; `up` draws new ones.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use mosaic_adapters::cause::logged;
use mosaic_adapters::fs::DataRoot;
use mosaic_domain::Refusal;
use serde::Serialize;

use super::failure::Failure;
use super::folders;
use super::launch::{child_path, run_id};
use super::plans::{self, Team};
use super::sandbox::plan::view::PlanView;
use crate::commands::team::UpConfig;

/// What `--dry-run` is given of `up`'s options.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked<'a> {
    pub(super) config: &'a Path,
    pub(super) data_root: Option<&'a Path>,
    pub(super) secrets_dir: Option<&'a Path>,
    pub(super) console: bool,
}

/// The document `--dry-run` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DryRun {
    ok: bool,
    dry_run: bool,
    business: String,
    data_root: String,
    socket: String,
    agents: Vec<PlanView>,
}

/// Prints the plans, or the failure line, on `out`; returns 0, or 2 when
/// `up` could not start.
pub(super) fn run(asked: Asked<'_>, out: &mut impl Write) -> u8 {
    let (text, code) = match plan(asked) {
        Ok(document) => match serde_json::to_string_pretty(&document) {
            Ok(text) => (text, 0),
            Err(_) => (
                Failure::from(Refusal::StorageUnavailable)
                    .line()
                    .to_string(),
                2,
            ),
        },
        Err(failure) => (failure.line().to_string(), 2),
    };
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => code,
        Err(_) => 2,
    }
}

/// Where a folder `up` would make under the temporary directory is.
fn would_make(prefix: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{prefix}XXXXXX"))
}

/// The folder given as `flag`, checked, or where `up` would make one.
fn folder(given: Option<&Path>, flag: &str, prefix: &str) -> Result<PathBuf, Failure> {
    match given {
        Some(path) => {
            let path = std::path::absolute(path).map_err(|_| Refusal::UnsafePath)?;
            folders::check(&path, flag)?;
            Ok(path)
        }
        None => Ok(would_make(prefix)),
    }
}

fn plan(asked: Asked<'_>) -> Result<DryRun, Failure> {
    let config = UpConfig::load(asked.config)?;
    let exe = std::env::current_exe()
        .map_err(logged(Refusal::LaunchFailed, "finding this executable"))?;
    let bwrap = plans::find_bwrap(&config, &exe)?;
    let data_root = folder(asked.data_root, "--data-root", "mosaic-up-")?;
    let secrets = folder(asked.secrets_dir, "--secrets-dir", "mosaic-up-secrets-")?;
    let socket = DataRoot::socket_path_of(&data_root);
    let path = child_path()?;
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut team = Team {
        config: &config,
        data_root: &data_root,
        socket: &socket,
        exe: &exe,
        path: &path,
        vars: &vars,
        console: asked.console,
        sandbox: None,
    };
    let sandbox = bwrap.map(|bwrap| plans::sandbox(&bwrap, &team, &secrets));
    team.sandbox = sandbox.as_ref();
    let runs = config
        .agents
        .iter()
        .map(|spec| run_id(&spec.role).map_err(|r| Failure::of(&spec.role, r)))
        .collect::<Result<Vec<_>, _>>()?;
    let planned = plans::plan_all(&team, &runs)?;
    Ok(DryRun {
        ok: true,
        dry_run: true,
        business: config.business.id().as_str().to_owned(),
        data_root: data_root.to_string_lossy().into_owned(),
        socket: socket.to_string_lossy().into_owned(),
        agents: planned.iter().map(|p| p.plan.view()).collect(),
    })
}
