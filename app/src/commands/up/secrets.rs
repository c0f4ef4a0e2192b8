//! The folder the human's secrets go to: never the data root.

use std::path::{Path, PathBuf};

use mosaic_adapters::cause::logged;
use mosaic_adapters::fs;
use mosaic_domain::Refusal;

/// The folder the human's secrets are written to: the operator's
/// `--secrets-dir`, or a new private folder under the temporary directory.
/// Never the data root or anything under it: every agent is told the
/// socket's path, and so where the data root is.
#[derive(Debug)]
pub(super) struct Secrets {
    pub(super) dir: PathBuf,
    /// Whether `up` made the folder (and so removes it on close).
    made: bool,
}

impl Secrets {
    /// # Errors
    /// `unsafe-path` for a folder under the data root, one that is not a
    /// directory of ours with mode 0700, or one that cannot be made.
    pub(super) fn open(given: Option<PathBuf>, data_root: &Path) -> Result<Secrets, Refusal> {
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
            return Err(Refusal::UnsafePath);
        }
        fs::check_private_dir(&dir)?;
        Ok(Secrets { dir, made: false })
    }

    pub(super) fn remove_if_made(&mut self) {
        if std::mem::take(&mut self.made) {
            // Empty by now; a folder someone filled is left for them.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}
