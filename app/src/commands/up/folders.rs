//! The folders `up` is given, `--data-root` and `--secrets-dir`, when they
//! do not exist yet: one whose parent is a folder of the user's own that
//! no one else may write is made, private (0700) from its `mkdir` on, as a
//! folder `up` makes itself is; for any other, `up` makes nothing and its
//! failure line says what to make and how (`"why"`). A folder that exists
//! is checked where it is used (the data root by the broker, the secrets
//! folder by `Secrets`).
//!
//! Only the parent is judged, not the whole path: whoever may write the
//! parent may replace the folder, so a parent of another user's, or one
//! others may write (`/tmp`), is left for the user to decide on.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use mosaic_adapters::fs::{create_private_dir, neutral_path};
use mosaic_domain::Refusal;

use super::failure::Failure;

/// What [`check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// It exists.
    There,
    /// It does not, and its parent is safe: [`make`] makes it.
    ToMake,
}

/// Whether the folder `path` (absolute), given as `flag`, exists or can
/// be made: see the module documentation.
///
/// # Errors
/// `unsafe-path` with a sentence of what to make and how, for a missing
/// folder whose parent is missing, not a folder, another user's, or
/// writable by others, or for one that cannot be examined.
pub(super) fn check(path: &Path, flag: &str) -> Result<Found, Failure> {
    let shown = neutral_path(path);
    let cannot = |e: io::Error| {
        mosaic_adapters::cause::log(Refusal::UnsafePath, "examining a folder up was given", &e);
        Failure::because(
            Refusal::UnsafePath,
            format!("{flag} {shown} cannot be examined: name a folder of yours that up may read"),
        )
    };
    match std::fs::symlink_metadata(path) {
        Ok(_) => return Ok(Found::There),
        // Under a file, it cannot exist either: its parent says why.
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) => {}
        Err(e) => return Err(cannot(e)),
    }
    let make_it = |reason: &str| {
        Failure::because(
            Refusal::UnsafePath,
            format!(
                "{flag} {shown} does not exist, and {reason}, so up does not make it: make it \
                 yourself with `mkdir -p -m 700 {shown}`, or name a folder under one only you \
                 can write"
            ),
        )
    };
    let Some(parent) = path.parent() else {
        return Err(make_it("it has no parent folder"));
    };
    let meta = match std::fs::metadata(parent) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(make_it("neither does the folder it would be in"));
        }
        Err(e) => return Err(cannot(e)),
    };
    let ours = meta.uid() == rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        Err(make_it("what it would be in is not a folder"))
    } else if !ours {
        Err(make_it("the folder it would be in belongs to another user"))
    } else if meta.mode() & 0o022 != 0 {
        Err(make_it("others may write the folder it would be in"))
    } else {
        Ok(Found::ToMake)
    }
}

/// Makes the folder `path`, given as `flag`, when [`check`] says so.
///
/// # Errors
/// Those of [`check`]; `storage-unavailable` when it cannot be made.
pub(super) fn make(path: &Path, flag: &str) -> Result<(), Failure> {
    match check(path, flag)? {
        Found::There => Ok(()),
        Found::ToMake => {
            create_private_dir(path, false).map_err(|e| {
                mosaic_adapters::cause::log(
                    Refusal::StorageUnavailable,
                    "making a folder up was given",
                    &e,
                );
                Failure::because(
                    Refusal::StorageUnavailable,
                    format!("{flag} {} could not be made", neutral_path(path)),
                )
            })?;
            tracing::info!(
                path = &*neutral_path(path),
                flag,
                "made the missing folder, private (0700)"
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_missing_folder_under_a_private_parent_is_made_private_and_one_there_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("mine");
        std::fs::create_dir(&parent).unwrap();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = parent.join("data");
        assert_eq!(check(&root, "--data-root").unwrap(), Found::ToMake);
        assert!(!root.exists(), "check makes nothing");
        make(&root, "--data-root").unwrap();
        assert_eq!(mode(&root), 0o700);
        // One that is there is left as it is, for its user to check.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(check(&root, "--data-root").unwrap(), Found::There);
        make(&root, "--data-root").unwrap();
        assert_eq!(mode(&root), 0o750);
    }

    #[test]
    fn a_missing_folder_under_a_parent_others_may_write_or_none_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        for (path, reason) in [
            (shared.join("data"), "others may write"),
            (dir.path().join("none/data"), "neither does the folder"),
            (file.join("data"), "is not a folder"),
        ] {
            let failure = make(&path, "--secrets-dir").unwrap_err();
            assert_eq!(failure.code, Refusal::UnsafePath);
            let why = failure.why.unwrap_or_default();
            let shown = path.to_string_lossy();
            assert!(why.starts_with(&format!("--secrets-dir {shown} does not exist")));
            assert!(why.contains(reason), "{why}");
            assert!(why.contains(&format!("`mkdir -p -m 700 {shown}`")), "{why}");
            assert!(!path.exists());
        }
    }
}
