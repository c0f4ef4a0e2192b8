//! [`FakeCredentials`]: a map from credential references to their contents.

use std::path::Path;
use std::sync::{Arc, Mutex};

use mosaic_domain::business::CredentialSource;

use super::lock;
use crate::credentials::{CredentialError, Credentials};

/// The largest credential the real adapter reads, in bytes.
const MAX_LEN: usize = 16 * 1024;

/// A [`Credentials`] source that answers from a map instead of files and
/// environment variables.
///
/// It applies the rules of the contract that do not depend on a file system,
/// so a test cannot get from the fake what the real adapter would refuse: a
/// [`CredentialSource::File`] path that is not absolute is
/// [`CredentialError::UnsafePath`] before the map is consulted; mapped
/// content larger than 16 KiB is [`CredentialError::TooLarge`]; a source that
/// is not in the map is [`CredentialError::Missing`]. Rules about owners,
/// modes and symlinks are the real adapter's; map a source to
/// [`CredentialError::UnsafePermissions`] or
/// [`CredentialError::UnsafePath`] to stand for them.
///
/// Every call of [`Credentials::read`] is logged; [`FakeCredentials::reads`]
/// returns the log, so a test can check that tokens are read once at
/// startup. Clones share the log.
///
/// ```
/// use mosaic_domain::business::CredentialSource;
/// use mosaic_ports::fakes::FakeCredentials;
/// use mosaic_ports::{CredentialError, Credentials};
///
/// let creds = FakeCredentials::new()
///     .with_file("/secrets/gitea", b"token-0123456789abcdef".to_vec())
///     .with_error(CredentialSource::Env("VIKUNJA".into()), CredentialError::Unreadable);
/// assert!(creds.read(&CredentialSource::File("/secrets/gitea".into())).is_ok());
/// assert_eq!(creds.read(&CredentialSource::File("/secrets/none".into())), Err(CredentialError::Missing));
/// assert_eq!(creds.reads().len(), 2);
/// ```
#[derive(Debug, Clone, Default)]
pub struct FakeCredentials {
    entries: Vec<(CredentialSource, Result<Vec<u8>, CredentialError>)>,
    reads: Arc<Mutex<Vec<CredentialSource>>>,
}

impl FakeCredentials {
    /// A source where every reference is [`CredentialError::Missing`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `source` to `result`, replacing an earlier mapping of it.
    pub fn with(
        mut self,
        source: CredentialSource,
        result: Result<Vec<u8>, CredentialError>,
    ) -> Self {
        self.entries.retain(|(s, _)| s != &source);
        self.entries.push((source, result));
        self
    }

    /// Maps the file at `path` to `content`.
    pub fn with_file(self, path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        self.with(CredentialSource::File(path.into()), Ok(content.into()))
    }

    /// Maps the environment variable `name` to `content`.
    pub fn with_env(self, name: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        self.with(CredentialSource::Env(name.into()), Ok(content.into()))
    }

    /// Makes reading `source` fail with `error`.
    pub fn with_error(self, source: CredentialSource, error: CredentialError) -> Self {
        self.with(source, Err(error))
    }

    /// Every source read so far, in call order, including failed reads.
    pub fn reads(&self) -> Vec<CredentialSource> {
        lock(&self.reads).clone()
    }
}

impl Credentials for FakeCredentials {
    fn read(&self, source: &CredentialSource) -> Result<Vec<u8>, CredentialError> {
        lock(&self.reads).push(source.clone());
        match source {
            CredentialSource::File(path) if !Path::new(path).is_absolute() => {
                return Err(CredentialError::UnsafePath);
            }
            CredentialSource::File(_) | CredentialSource::Env(_) => {}
        }
        match self.entries.iter().find(|(s, _)| s == source) {
            None => Err(CredentialError::Missing),
            Some((_, Ok(content))) if content.len() > MAX_LEN => Err(CredentialError::TooLarge),
            Some((_, result)) => result.clone(),
        }
    }
}
