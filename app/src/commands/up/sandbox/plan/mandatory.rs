//! The mandatory read-only paths inside every writable grant: what a tool,
//! the human's or another role's, runs or trusts as configuration when it
//! works in that folder. An agent may write its `workdir` and `write`
//! paths, but never these in them, so it cannot plant a hook, a start-up
//! file or a harness's settings for whoever works there next.
//!
//! Bound read-only over each writable folder's own, after it, in this order
//! ([`inside`]):
//!
//! - git: when `.git` is a folder, its `config` and `hooks` (objects,
//!   refs, the index and the logs stay writable, so commits work); when it
//!   is a file (a worktree's or a submodule's link), the file itself; when
//!   there is none, an empty read-only folder at `.git`, so no repository
//!   with a configuration of the agent's can be made at the grant's root;
//!   and `.gitmodules` ([`GIT`]);
//! - project tool and editor settings, and the harnesses' own
//!   configuration ([`PROJECT_FILES`], [`PROJECT_FOLDERS`]);
//! - the shell and tool start-up files a home holds ([`HOME_FILES`]),
//!   where they exist.
//!
//! A path of the first two lists that does not exist is bound as an empty
//! read-only placeholder (a folder as an empty read-only tmpfs, a file as
//! `/dev/null`), so it cannot be planted: bwrap makes the mount point, an
//! empty file or folder, in the grant, and `up` leaves it there after the
//! run. Removing it is not safe: unlinking a mount point in one mount
//! namespace detaches that mount in every other, so a removal while
//! another sandbox shares the grant would lift that sandbox's placeholder.
//! A start-up file of a home is read only from a home, which no grant is
//! (the human's is refused), so only one that exists is bound.
//!
//! A listed path that is a symbolic link is refused (`unsafe-path`): the
//! bind would protect what the link names while the agent could replace
//! the link.

use std::path::{Path, PathBuf};

use mosaic_adapters::fs::neutral_path;
use mosaic_domain::Refusal;

use crate::commands::team::AgentSpec;
use crate::commands::up::sandbox::paths::{open_nofollow, Opened};

/// Git's configuration at a grant's root: what `git` runs (hooks, the
/// configuration's `core.fsmonitor`, `core.sshCommand`, filters) for
/// whoever works there next. `.git` itself is special-cased (see the
/// module documentation).
pub(crate) const GIT: [&str; 3] = [".git/config", ".git/hooks", ".gitmodules"];

/// Files a tool reads as configuration from the folder it works in: direnv's
/// `.envrc` (run on entering), npm's `.npmrc` (its `script-shell`, its
/// registry) and the project's MCP servers (`.mcp.json`). A placeholder
/// when missing.
pub(crate) const PROJECT_FILES: [&str; 3] = [".envrc", ".npmrc", ".mcp.json"];

/// Folders a tool reads as configuration from the folder it works in:
/// editor settings (`.vscode`: tasks and settings run; `.idea`) and the
/// harnesses' own (`.claude`: settings, hooks, commands; `.pi`:
/// extensions, settings). A placeholder when missing.
pub(crate) const PROJECT_FOLDERS: [&str; 4] = [".vscode", ".idea", ".claude", ".pi"];

/// The shell and tool start-up files of a home, bound read-only where
/// they exist.
pub(crate) const HOME_FILES: [&str; 17] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".inputrc",
    ".gitconfig",
    ".pypirc",
    ".yarnrc",
    ".yarnrc.yml",
    ".curlrc",
    ".wgetrc",
];

/// How one mandatory path is kept read-only.
#[derive(Debug)]
pub(crate) enum Kept {
    /// An existing path, opened, bound read-only from its descriptor.
    Existing(Opened),
    /// A missing file: an empty read-only placeholder at this path.
    File(PathBuf),
    /// A missing folder: an empty read-only placeholder at this path.
    Folder(PathBuf),
}

/// What a listed path must be when it is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// An empty read-only file.
    File,
    /// An empty read-only folder.
    Folder,
    /// Nothing: it is left out.
    Absent,
}

/// The mandatory paths of `grant` (a writable grant of `spec`, resolved)
/// and how each is kept, in the order to bind them after it. A grant that
/// is a file has none.
///
/// # Errors
/// `unsafe-path` when a listed path is a symbolic link or cannot be
/// opened.
pub(crate) fn inside(spec: &AgentSpec, grant: &Path) -> Result<Vec<Kept>, Refusal> {
    let mut kept = Vec::new();
    if !std::fs::symlink_metadata(grant).is_ok_and(|m| m.is_dir()) {
        return Ok(kept);
    }
    let git = grant.join(".git");
    let mut wanted: Vec<(&str, Missing)> = Vec::new();
    match std::fs::symlink_metadata(&git) {
        Ok(meta) if meta.is_dir() => {
            wanted.push((GIT[0], Missing::File));
            wanted.push((GIT[1], Missing::Folder));
        }
        Ok(_) => wanted.push((".git", Missing::Absent)),
        Err(_) => wanted.push((".git", Missing::Folder)),
    }
    wanted.push((GIT[2], Missing::File));
    wanted.extend(PROJECT_FILES.iter().map(|name| (*name, Missing::File)));
    wanted.extend(PROJECT_FOLDERS.iter().map(|name| (*name, Missing::Folder)));
    wanted.extend(HOME_FILES.iter().map(|name| (*name, Missing::Absent)));
    for (name, missing) in wanted {
        let dest = grant.join(name);
        match std::fs::symlink_metadata(&dest) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match missing {
                Missing::File => kept.push(Kept::File(dest)),
                Missing::Folder => kept.push(Kept::Folder(dest)),
                Missing::Absent => {}
            },
            Ok(_) | Err(_) => {
                let opened = open_nofollow(&dest).map_err(|e| {
                    tracing::warn!(
                        code = Refusal::UnsafePath.code(),
                        role = spec.role.as_str(),
                        path = &*neutral_path(&dest),
                        cause = e.to_string().as_str(),
                        "a path that stays read-only inside a writable grant is a symbolic \
                         link or cannot be opened, so it cannot be kept read-only"
                    );
                    Refusal::UnsafePath
                })?;
                kept.push(Kept::Existing(opened));
            }
        }
    }
    Ok(kept)
}
