//! An online copy of the store through SQLite's backup API.
//!
//! The copy reads the live file on a read-only connection that holds one
//! read transaction from the first page to the last, so every page comes
//! from one snapshot, whatever the broker commits meanwhile. In WAL mode a
//! reader never blocks the writer: the broker commits on while the copy is
//! taken, a step of [`PAGES_PER_STEP`] pages at a time (the one thing the
//! open snapshot holds back is a checkpoint past it, so the WAL grows until
//! the copy is done). The copy is then verified as `verify` does.

use std::path::Path;
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use super::create_private;
use super::verdict::{open_failure, Broken, OpenError};
use super::verify::{read_only, verify_file, Verification};

/// Pages copied per step (4 MiB at SQLite's default 4 KiB pages).
const PAGES_PER_STEP: i32 = 1024;

/// How long to wait before retrying a step that found the copy busy, and
/// how many such waits in a row end the attempt (the live file is never
/// locked against a reader; only another process opening the new copy
/// could make a step busy).
const BUSY_PAUSE: Duration = Duration::from_millis(5);
const BUSY_TRIES: u32 = 2_000;

/// Copies the store at `from` into a new file `to` (mode 0600), then
/// verifies the copy as [`verify_file`] does and returns its verification.
///
/// # Errors
/// [`OpenError::WrongState`] when something exists at `to` or nothing at
/// `from`; [`OpenError::Unavailable`] when either cannot be read or
/// written; `IntegrityFailed` or `SchemaMismatch` when the copy does not
/// verify (the copy stays, for inspection).
pub fn backup(from: &Path, to: &Path) -> Result<Verification, Broken> {
    match std::fs::symlink_metadata(from) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) | Err(_) => return Err(OpenError::WrongState.into()),
    }
    let (source, _) = read_only(from)?;
    let file = create_private(to)?;
    copy(&source, to)?;
    file.sync_all()
        .map_err(|e| OpenError::Unavailable(Box::new(e)))?;
    drop(source);
    verify_file(to)
}

/// The pages of `source`, from one read snapshot, into the empty file `to`.
fn copy(source: &Connection, to: &Path) -> Result<(), OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let mut target = Connection::open_with_flags(to, flags).map_err(open_failure)?;
    // The snapshot: a read transaction begun by its first read, held until
    // the last page is copied.
    let snapshot = source.unchecked_transaction().map_err(open_failure)?;
    snapshot
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(open_failure)?;
    {
        let backup = Backup::new(source, &mut target).map_err(open_failure)?;
        let mut busy = 0;
        loop {
            let step = backup.step(PAGES_PER_STEP).map_err(open_failure)?;
            if step == StepResult::Done {
                break;
            }
            if step == StepResult::More {
                busy = 0;
            } else if busy < BUSY_TRIES {
                busy += 1;
                std::thread::sleep(BUSY_PAUSE);
            } else {
                return Err(OpenError::Unavailable("the copy stayed busy".into()));
            }
        }
    }
    snapshot.commit().map_err(open_failure)?;
    target.close().map_err(|(_, e)| open_failure(e))
}
