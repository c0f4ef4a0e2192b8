//! What opening or verifying a store concludes: why it failed
//! ([`OpenError`], and [`Broken`] with the record to blame) or the chain's
//! head it found ([`ChainHead`], the note kept outside). The open, the
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

/// A chain's head: what to keep outside the store, as a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    /// The store's random id (`meta`'s `store_id`).
    pub store_id: String,
    /// The number of ledger rows.
    pub size: u64,
    /// The hash of the newest row (the genesis hash when there is none).
    pub hash: [u8; 32],
}

impl ChainHead {
    /// The hash in base64 (standard, padded).
    pub fn hash_base64(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.hash)
    }

    /// The note: `mosaic-bus/<store id>\n<size>\n<base64 head>\n`.
    pub fn note(&self) -> String {
        format!(
            "mosaic-bus/{}\n{}\n{}\n",
            self.store_id,
            self.size,
            self.hash_base64()
        )
    }

    /// Parses a note (as [`ChainHead::note`] writes it); `None` when it is
    /// not one.
    pub fn parse_note(text: &str) -> Option<ChainHead> {
        use base64::Engine as _;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        let store_id = lines.next()?.strip_prefix("mosaic-bus/")?;
        let size = lines.next()?;
        let hash = base64::engine::general_purpose::STANDARD
            .decode(lines.next()?)
            .ok()?;
        if lines.next().is_some()
            || store_id.is_empty()
            || size.is_empty()
            || !size.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(ChainHead {
            store_id: store_id.to_owned(),
            size: size.parse().ok()?,
            hash: hash.try_into().ok()?,
        })
    }
}
