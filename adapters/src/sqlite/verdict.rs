//! What opening or verifying a store concludes: why it failed
//! ([`OpenError`], and [`Broken`] with the record to blame) or the chain's
//! head it found (the port's `StoreHead`, whose note is kept outside). The open, the
//! verification and the ledger pass all speak in these terms.

use mosaic_domain::Refusal;
use rusqlite::ErrorCode;

/// Why a store could not be opened or created. Each maps to one static code.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The schema differs from the pinned one, metadata is missing, or the
    /// file is not in WAL mode: `schema-mismatch`.
    #[error("{}", Refusal::SchemaMismatch.code())]
    SchemaMismatch,
    /// The file failed an integrity check: `integrity-failed`.
    #[error("{}", Refusal::IntegrityFailed.code())]
    IntegrityFailed,
    /// `create` found a file already there, or `open` found none:
    /// `unsafe-path` (the caller chose the wrong operation for this path).
    #[error("{}", Refusal::UnsafePath.code())]
    WrongState,
    /// The file could not be read or written: `storage-unavailable`.
    #[error("{}", Refusal::StorageUnavailable.code())]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl OpenError {
    /// The static refusal for this failure.
    pub fn refusal(&self) -> Refusal {
        match self {
            OpenError::SchemaMismatch => Refusal::SchemaMismatch,
            OpenError::IntegrityFailed => Refusal::IntegrityFailed,
            OpenError::WrongState => Refusal::UnsafePath,
            OpenError::Unavailable(_) => Refusal::StorageUnavailable,
        }
    }
}

pub(super) fn open_failure(e: rusqlite::Error) -> OpenError {
    let code = e.sqlite_error_code();
    if code == Some(ErrorCode::DatabaseCorrupt) || code == Some(ErrorCode::NotADatabase) {
        OpenError::IntegrityFailed
    } else {
        OpenError::Unavailable(Box::new(e))
    }
}

/// The ledger rows a restart replays, `(seq, at, kind)`, oldest first.
pub(super) type Replayable = Vec<(i64, String, String)>;

/// Why a verification failed, and at which record when one is to blame.
#[derive(Debug)]
pub struct Broken {
    /// The refusal.
    pub error: OpenError,
    /// The ledger `seq` of the first record that does not check.
    pub seq: Option<u64>,
}

impl From<OpenError> for Broken {
    fn from(error: OpenError) -> Self {
        Broken { error, seq: None }
    }
}

impl Broken {
    /// `integrity-failed` at ledger row `seq`.
    pub(super) fn at(seq: i64) -> Broken {
        Broken {
            error: OpenError::IntegrityFailed,
            seq: u64::try_from(seq).ok(),
        }
    }
}
