//! A harness agent's state folder, `<data root>/agents/state/<role>.<harness>/`,
//! which its runs write and which lasts between them: data, never code.
//!
//! `up` owns it. At each launch, before the harness starts, [`own`]:
//!
//! - repairs its modes instead of refusing: the folder back to 0700, and
//!   every folder inside it to at least `rwx` for `up` (an agent that
//!   took them away would keep `up` from clearing what it left), with a
//!   log line naming the folder and what was repaired;
//! - keeps only the harness's session data ([`keep`]: Claude Code's
//!   `projects` and `todos`, pi's `sessions`) and removes everything else
//!   the agent left there, links included and never followed, with a log
//!   line naming what was removed: settings, hooks, extensions, plugins,
//!   skills, commands, credentials and caches never carry from one run to
//!   the next;
//! - and then `up` writes the harness's configuration files there afresh
//!   ([`configuration`]: Claude Code's `settings.json`, pi's `settings.json`
//!   and `models.json`), which the sandbox binds read-only over
//!   themselves, so the run cannot change them either.
//!
//! So an extension or a hook planted in the state folder by one run never
//! loads in the next, whatever that run's network.
//!
//! It is capped too ([`Cap`]: `"stateMiB"` bytes, [`STATE_FILES`] files,
//! together with the run's transcript): `up` [`measure`]s it while the run
//! lives and ends the run (`budget`) when it reaches the cap; and sessions
//! a run left beyond the cap (a run that filled the disk) are removed at
//! the next launch, with a log line, so they never starve the next run;
//! so are sessions on a disk short of room (space or files) then, and
//! before the broker boots ([`relieve`]), so the store can open.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use mosaic_adapters::fs::neutral_path;
use mosaic_domain::evidence::Harness;
use mosaic_domain::Refusal;

use crate::commands::team::AgentSpec;

/// The most files (folders and links included) one run's state folder
/// may hold: past it the run ends, as past `"stateMiB"`.
pub(crate) const STATE_FILES: u64 = 10_000;

/// What a run may leave outside its grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cap {
    /// Bytes on disk (`"stateMiB"`).
    pub(crate) bytes: u64,
    /// Files ([`STATE_FILES`]).
    pub(crate) files: u64,
}

impl Cap {
    /// The cap of `state_mib` MiB and [`STATE_FILES`] files.
    pub(crate) fn of_mib(state_mib: u32) -> Cap {
        Cap {
            bytes: u64::from(state_mib) << 20,
            files: STATE_FILES,
        }
    }

    /// Whether `used` reached it.
    pub(crate) fn reached(self, used: Used) -> bool {
        used.bytes >= self.bytes || used.files >= self.files
    }
}

/// What a folder or file takes: bytes ([`taken`]) and files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Used {
    pub(crate) bytes: u64,
    pub(crate) files: u64,
}

impl Used {
    fn add(self, other: Used) -> Used {
        Used {
            bytes: self.bytes.saturating_add(other.bytes),
            files: self.files.saturating_add(other.files),
        }
    }
}

/// What one file takes: its blocks, or its length where that is more (a
/// file whose blocks the file system has not counted yet; a sparse one,
/// counted as if whole).
fn taken(meta: &std::fs::Metadata) -> u64 {
    meta.blocks().saturating_mul(512).max(meta.len())
}

/// What `path` takes, links never followed, counting up to `stop` and no
/// further (so a folder of millions of files is not walked whole); what
/// cannot be read counts nothing.
pub(crate) fn measure(path: &Path, stop: Cap) -> Used {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Used::default();
    };
    let mut used = Used {
        bytes: taken(&meta),
        files: 1,
    };
    if !meta.file_type().is_dir() || stop.reached(used) {
        return used;
    }
    let mut folders = vec![path.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            used = used.add(Used {
                bytes: taken(&meta),
                files: 1,
            });
            if stop.reached(used) {
                return used;
            }
            if meta.file_type().is_dir() {
                folders.push(entry.path());
            }
        }
    }
    used
}

/// What of `harness`'s state folder is session data, kept between runs:
/// every other entry is removed at each launch.
pub(crate) fn keep(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::ClaudeCode => &["projects", "todos"],
        Harness::Pi => &["sessions"],
    }
}

/// The files of `harness`'s state folder that `up` writes afresh at each
/// launch and the sandbox binds read-only: the harness's own settings
/// (Claude Code's user settings, where hooks would be; pi's, where
/// extensions and packages would be) and pi's `models.json`, which `up`
/// writes from `"model"`.
pub(crate) fn configuration(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::ClaudeCode => &["settings.json"],
        Harness::Pi => &["settings.json", "models.json"],
    }
}

/// Makes `state` `up`'s again, for a launch of `harness`: see the module
/// documentation. A missing folder is made (0700).
///
/// # Errors
/// `unsafe-path` when it is not a folder of ours (a link, a file, another
/// user's), which no agent can make it; `storage-unavailable` when it
/// cannot be made, repaired or cleared.
pub(crate) fn own(state: &Path, harness: Harness, cap: Cap) -> Result<(), Refusal> {
    let shown = neutral_path(state);
    match mosaic_adapters::fs::create_private_dir(state, false) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            mosaic_adapters::cause::log(
                Refusal::StorageUnavailable,
                "making a harness agent's state folder",
                &e,
            );
            return Err(Refusal::StorageUnavailable);
        }
    }
    let meta = std::fs::symlink_metadata(state).map_err(|_| Refusal::UnsafePath)?;
    if !meta.file_type().is_dir() || meta.uid() != rustix::process::geteuid().as_raw() {
        tracing::warn!(
            code = Refusal::UnsafePath.code(),
            path = &*shown,
            "a harness agent's state folder is not a folder of up's own"
        );
        return Err(Refusal::UnsafePath);
    }
    let failed = |e: io::Error| {
        mosaic_adapters::cause::log(
            Refusal::StorageUnavailable,
            "repairing or clearing a harness agent's state folder",
            &e,
        );
        Refusal::StorageUnavailable
    };
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
        tracing::warn!(
            path = &*shown,
            mode = format!("{mode:o}").as_str(),
            "up repaired the mode of a harness agent's state folder to 700"
        );
    }
    let repaired = repair_inside(state).map_err(failed)?;
    if repaired > 0 {
        tracing::warn!(
            path = &*shown,
            folders = repaired,
            "up gave itself back the folders in a harness agent's state folder that an \
             agent had closed to it"
        );
    }
    // Sessions that reached the cap (a run that filled the disk) go too:
    // they would end the next run at once, or leave it no room.
    // So do sessions on a disk short of room (space or files): they would
    // keep the broker from retaking the human's reserve.
    let used = measure(state, cap);
    let short = short_of_room(state);
    let over = cap.reached(used) || short;
    if over {
        tracing::warn!(
            path = &*shown,
            bytes = used.bytes,
            files = used.files,
            disk_short = short,
            "up removed a harness agent's sessions, which reached the state folder's cap \
             (stateMiB, or its files) or left the disk short of room: the next run starts \
             without them"
        );
    }
    let kept = keep(harness);
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(state).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let name = entry.file_name();
        let kind = entry.file_type().map_err(failed)?;
        let session = !over && kind.is_dir() && name.to_str().is_some_and(|n| kept.contains(&n));
        if session {
            continue;
        }
        let path = entry.path();
        if kind.is_dir() {
            std::fs::remove_dir_all(&path).map_err(failed)?;
        } else {
            std::fs::remove_file(&path).map_err(failed)?;
        }
        removed.push(name.to_string_lossy().into_owned());
    }
    if !removed.is_empty() {
        removed.sort();
        tracing::info!(
            path = &*shown,
            removed = &*neutral_path(Path::new(&removed.join(", "))),
            "up removed what a harness agent's state folder held beyond its sessions: \
             settings, extensions and hooks are up's to write at each launch"
        );
    }
    Ok(())
}

/// Before the broker boots on `data_root`: when its disk is short of room
/// ([`short_of_room`]), the existing state folder of each harness agent
/// of `agents` is made `up`'s again ([`own`]), which removes its sessions
/// with a log line. What cannot be done is left to the launch, which
/// says why.
pub(crate) fn relieve(data_root: &Path, agents: &[AgentSpec]) {
    if !short_of_room(data_root) {
        return;
    }
    for spec in agents.iter().filter(|s| s.harnessed.is_some()) {
        let state = data_root.join("agents/state").join(format!(
            "{}.{}",
            spec.role.as_str(),
            spec.harness.as_str()
        ));
        if std::fs::symlink_metadata(&state).is_ok() {
            // Refused or failed, the launch will say so.
            let _relieved = own(&state, spec.harness, Cap::of_mib(spec.state_mib));
        }
    }
}

/// Whether the filesystem of `path` is short of room for the broker and
/// `up`: less free space than twice the disk reserve
/// (`mosaic_adapters::sqlite::RESERVE_BYTES`, or a sixteenth of a small
/// disk), or fewer free files than it keeps to spare
/// (`mosaic_adapters::sqlite::FILES_SPARE`, or a sixteenth). What cannot
/// be measured is not short.
fn short_of_room(path: &Path) -> bool {
    use mosaic_adapters::sqlite::{FILES_SPARE, RESERVE_BYTES};
    let Ok(stats) = rustix::fs::statvfs(path) else {
        return false;
    };
    let bytes = |blocks: u64| blocks.saturating_mul(stats.f_frsize);
    let reserve = RESERVE_BYTES.min(bytes(stats.f_blocks) / 16);
    let files = FILES_SPARE.min(stats.f_files / 16);
    bytes(stats.f_bavail) < reserve.saturating_mul(2) || stats.f_favail < files
}

/// Gives every folder under `dir` (links never followed) `rwx` for its
/// owner, `up`, where an agent took it away: the count of folders
/// repaired.
fn repair_inside(dir: &Path) -> io::Result<usize> {
    let mut repaired = 0;
    // Read whole before going down, so one descriptor is open at a time.
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            folders.push(entry.path());
        }
    }
    for path in folders {
        let mode = std::fs::symlink_metadata(&path)?.mode() & 0o7777;
        if mode & 0o700 != 0o700 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o700))?;
            repaired += 1;
        }
        repaired += repair_inside(&path)?;
    }
    Ok(repaired)
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
