//! The credential-source port: where service tokens are read from.

use mosaic_domain::business::CredentialSource;

/// Why a credential reference could not be read. Never carries the token or
/// any text from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The file or variable does not exist.
    #[error("credential missing")]
    Missing,
    /// The path is relative, a symlink, not a regular file, inside a
    /// protected root, or changed between check and open.
    #[error("credential path unsafe")]
    UnsafePath,
    /// The file's owner or mode (exactly 0600) is wrong.
    #[error("credential permissions unsafe")]
    UnsafePermissions,
    /// The content is larger than 16 KiB.
    #[error("credential too large")]
    TooLarge,
    /// The content could not be read.
    #[error("credential unreadable")]
    Unreadable,
}

/// Reads credential references.
pub trait Credentials: Send + Sync {
    /// The raw bytes behind `source`, read once.
    ///
    /// A file reference MUST be absolute, a regular non-symlink file owned by
    /// the broker's user with mode exactly 0600, at most 16 KiB, and opened
    /// with `O_NOFOLLOW` and checked against its earlier `stat` (inode and
    /// device). Nothing read MAY be logged or put into an error.
    ///
    /// # Errors
    /// See [`CredentialError`].
    fn read(&self, source: &CredentialSource) -> Result<Vec<u8>, CredentialError>;
}
