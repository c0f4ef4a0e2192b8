//! A plan as JSON: what `up --dry-run` prints per agent and what `up` logs
//! at debug (`plan`) before it launches one, both [`Plan::view`]. The
//! environment shows its names only, never a value (a key may be one);
//! the command line is the plan's own render with the launch's values as
//! placeholders ([`Launch::Described`]).

use std::ffi::OsStr;
use std::path::Path;

use serde::Serialize;

use super::render::Launch;
use super::{Handoff, Mount, Plan, Walls};

/// One agent's plan, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanView {
    role: String,
    run: String,
    harness: &'static str,
    /// The program as found.
    program: String,
    /// For a harness `up` starts, what its `--version` printed (`null`
    /// when it could not be read, and for a command).
    version: Option<String>,
    sandboxed: bool,
    network: &'static str,
    /// What the proxy admits for it.
    allow: Vec<String>,
    /// The loopback ports forwarded into its sandbox.
    forwards: Vec<u16>,
    /// Where it runs.
    cwd: String,
    /// Its environment's names.
    env: Vec<String>,
    /// How its capability reaches it: `descriptor` or `file`.
    capability: &'static str,
    /// Its walls, unless it runs without a sandbox.
    sandbox: Option<WallsView>,
    /// The command `up` spawns, word by word.
    command: Vec<String>,
}

/// A sandbox's walls, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WallsView {
    mounts: Vec<MountView>,
    /// The system calls its seccomp filter refuses outright.
    seccomp: Vec<&'static str>,
    landlock: bool,
    processes: u32,
    #[serde(rename = "memoryMiB")]
    memory_mib: u32,
}

/// One mount, as printed: `kind` and its paths.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum MountView {
    ReadOnly {
        source: String,
        dest: String,
    },
    Writable {
        source: String,
        dest: String,
    },
    /// A configured path, bound from the descriptor that was checked.
    Granted {
        path: String,
        dest: String,
        writable: bool,
    },
    Symlink {
        target: String,
        dest: String,
    },
    Tmpfs {
        dest: String,
    },
    /// A tmpfs the agent writes, with its size cap.
    Scratch {
        dest: String,
        bytes: u64,
    },
    Proc {
        dest: String,
    },
    Dev {
        dest: String,
    },
    ProxySocket {
        dest: &'static str,
    },
    RemountRo {
        dest: String,
    },
}

fn text(word: &OsStr) -> String {
    word.to_string_lossy().into_owned()
}

fn path(path: &Path) -> String {
    text(path.as_os_str())
}

impl Plan {
    /// The plan as printed: see the module documentation.
    pub(crate) fn view(&self) -> PlanView {
        let described = Launch::Described;
        PlanView {
            role: self.role.as_str().to_owned(),
            run: self.run.as_str().to_owned(),
            harness: self.harness.as_str(),
            program: path(&self.program),
            version: self.version.clone(),
            sandboxed: self.walls.is_some(),
            network: self.network.as_str(),
            allow: self.allow.iter().map(ToString::to_string).collect(),
            forwards: self.forwards.clone(),
            cwd: path(&self.cwd),
            env: self.env.iter().map(|(name, _)| text(name)).collect(),
            capability: match self.handoff {
                Handoff::Descriptor => "descriptor",
                Handoff::File { .. } => "file",
            },
            sandbox: self.walls.as_ref().map(walls_view),
            command: self.argv(&described).iter().map(|w| text(w)).collect(),
        }
    }
}

fn walls_view(walls: &Walls) -> WallsView {
    WallsView {
        mounts: walls.mounts.iter().map(mount_view).collect(),
        seccomp: walls.seccomp.clone(),
        landlock: walls.landlock,
        processes: walls.processes,
        memory_mib: walls.memory_mib,
    }
}

fn mount_view(mount: &Mount) -> MountView {
    match mount {
        Mount::ReadOnly { source, dest } => MountView::ReadOnly {
            source: path(source),
            dest: path(dest),
        },
        Mount::Writable { source, dest } => MountView::Writable {
            source: path(source),
            dest: path(dest),
        },
        Mount::Granted {
            path: granted,
            dest,
            writable,
            ..
        } => MountView::Granted {
            path: path(granted),
            dest: path(dest),
            writable: *writable,
        },
        Mount::Symlink { target, dest } => MountView::Symlink {
            target: path(target),
            dest: path(dest),
        },
        Mount::Tmpfs(dest) => MountView::Tmpfs { dest: path(dest) },
        Mount::Scratch { dest, bytes } => MountView::Scratch {
            dest: path(dest),
            bytes: *bytes,
        },
        Mount::Proc(dest) => MountView::Proc { dest: path(dest) },
        Mount::Dev(dest) => MountView::Dev { dest: path(dest) },
        Mount::ProxySocket => MountView::ProxySocket {
            dest: crate::commands::up::sandbox::network::PROXY_SOCKET,
        },
        Mount::RemountRo(dest) => MountView::RemountRo { dest: path(dest) },
    }
}
