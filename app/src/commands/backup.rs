//! `mosaic-bus backup --data-root D --to FILE [--note NOTE_FILE]`: a
//! consistent copy of the store while the broker runs, through SQLite's
//! online backup API (`mosaic_adapters::sqlite::backup`), verified as
//! `verify` does; prints `verify`'s JSON line, and with `--note` also
//! writes the copy's note alone.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use mosaic_adapters::fs::DataRoot;
use mosaic_adapters::sqlite::{self, OpenError};
use mosaic_domain::Refusal;

use super::args::non_empty_path;
use super::verify::Line;

pub(crate) const ABOUT: &str = "\
Copies the store of a data root into a new file, while the broker runs: one \
consistent snapshot, read a step at a time through SQLite's online backup \
API, which never blocks the broker's writes. The new file gets mode 0600; \
an existing FILE is refused. The copy is then verified as `verify` does \
(every open-time check, the whole hash chain) and `verify`'s JSON line is \
printed on stdout, the copy's note in it. With --note, the note alone also \
goes to a new file (mode 0600, an existing one refused): keep it where the \
broker's user cannot write, and verify later with \
`mosaic-bus verify --db FILE --head NOTE_FILE`.";

pub(crate) const AFTER: &str = "\
Output and exit codes: one JSON line on stdout, as `verify` prints it.
  {\"ok\":true,\"size\":N,\"head\":\"<base64>\",\"note\":\"<note>\"}   exit 0
  {\"ok\":false,\"error\":\"<code>\",\"seq\":N}   exit 1, where the code is
    integrity-failed, schema-mismatch  the copy does not verify (it is kept
                      for inspection); `seq` names a record to blame
  {\"ok\":false,\"error\":\"<code>\"}   exit 2, where the code is
    unsafe-path          FILE or NOTE_FILE exists, or the data root or its
                         store is unsafe or missing
    storage-unavailable  the store, FILE or NOTE_FILE cannot be read or
                         written
    bad-request          a usage error

Example:
  mosaic-bus backup --data-root /srv/bus --to /backups/bus-2026-12-03.sqlite \\
    --note /safe/bus-2026-12-03.note

Reference: docs/operations.md.";

/// `backup`.
#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// The data root of the broker whose store is copied.
    #[arg(long, value_name = "D", value_parser = non_empty_path())]
    pub data_root: PathBuf,
    /// The new file to write (must not exist).
    #[arg(long, value_name = "FILE", value_parser = non_empty_path())]
    pub to: PathBuf,
    /// A new file for the copy's note alone (must not exist).
    #[arg(long, value_name = "NOTE_FILE", value_parser = non_empty_path())]
    pub note: Option<PathBuf>,
}

/// Runs `backup` and prints its one line.
pub fn main(args: BackupArgs) -> ExitCode {
    let (line, code) = run(&args);
    line.print();
    code
}

fn run(args: &BackupArgs) -> (Line, ExitCode) {
    let refused = |refusal: Refusal| (Line::failed(refusal.code(), None), ExitCode::from(2));
    // A note file that is there already is refused before any copy is made.
    if args
        .note
        .as_deref()
        .is_some_and(|note| note.symlink_metadata().is_ok())
    {
        return refused(Refusal::UnsafePath);
    }
    let root = match DataRoot::open(&args.data_root) {
        Ok(root) => root,
        Err(refusal) => return refused(refusal),
    };
    let copy = match sqlite::backup(&root.db_path(), &args.to) {
        Ok(copy) => copy,
        Err(broken) => {
            let exit = match broken.error {
                OpenError::IntegrityFailed | OpenError::SchemaMismatch => 1,
                OpenError::WrongState | OpenError::Unavailable(_) => 2,
            };
            let line = Line::failed(broken.error.refusal().code(), broken.seq);
            return (line, ExitCode::from(exit));
        }
    };
    let head = copy.head();
    if let Some(note) = &args.note {
        if let Err(refusal) = write_note(note, &head.note()) {
            return refused(refusal);
        }
    }
    (Line::verified(head), ExitCode::SUCCESS)
}

/// Writes `text` to the new file `path`, mode 0600.
///
/// # Errors
/// `unsafe-path` when `path` exists, `storage-unavailable` when it cannot
/// be written.
fn write_note(path: &Path, text: &str) -> Result<(), Refusal> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Refusal::UnsafePath
            } else {
                Refusal::StorageUnavailable
            }
        })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|_| Refusal::StorageUnavailable)
}
