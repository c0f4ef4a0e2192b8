//! The folder the human's secrets go to: never the data root.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use mosaic_adapters::cause::{self, logged};
use mosaic_adapters::fs;
use mosaic_domain::{Capability, Refusal};

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
            let dir = fs::create_private_temp_dir("mosaic-up-secrets-")?;
            return Ok(Secrets { dir, made: true });
        };
        let dir = std::fs::canonicalize(&dir).map_err(|_| Refusal::UnsafePath)?;
        let root = std::fs::canonicalize(data_root).map_err(|_| Refusal::UnsafePath)?;
        if dir.starts_with(&root) {
            tracing::warn!(
                code = Refusal::UnsafePath.code(),
                path = &*fs::neutral_path(&dir),
                "the secrets folder is under the data root"
            );
            return Err(Refusal::UnsafePath);
        }
        fs::check_private_dir(&dir)?;
        Ok(Secrets { dir, made: false })
    }

    /// Writes a secret (a capability or the UI token) to a new private file
    /// of the folder; the caller records the path so close removes it.
    ///
    /// # Errors
    /// `unsafe-path` for a file left there that is not a private file of
    /// ours; `storage-unavailable` when it cannot be written.
    pub(super) fn write(&self, name: &str, secret: &Capability) -> Result<PathBuf, Refusal> {
        let path = self.dir.join(name);
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
            return Err(Refusal::StorageUnavailable);
        }
        Ok(path)
    }

    pub(super) fn remove_if_made(&mut self) {
        if std::mem::take(&mut self.made) {
            // Empty by now; a folder someone filled is left for them.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// A start that fails before the session owns the folder (a refused path,
/// a missing program) still removes the folder it made.
impl Drop for Secrets {
    fn drop(&mut self) {
        self.remove_if_made();
    }
}
