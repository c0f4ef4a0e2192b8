//! `mosaic-bus backup --data-root D --to FILE`: a consistent copy of the
//! store while the broker runs, through SQLite's online backup API
//! (`mosaic_adapters::sqlite::backup`), verified as `verify` does; prints
//! the copy's note.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_adapters::fs::DataRoot;
use mosaic_adapters::sqlite::{self, OpenError};

use super::args::{code_on_stderr, non_empty_path};

pub(crate) const ABOUT: &str = "\
Copies the store of a data root into a new file, while the broker runs: one \
consistent snapshot, read a step at a time through SQLite's online backup \
API, which never blocks the broker's writes. The new file gets mode 0600; \
an existing FILE is refused. The copy is then verified as `verify` does \
(every open-time check, the whole hash chain) and its note is printed on \
stdout: keep it where the broker's user cannot write, and verify later with \
`mosaic-bus verify --db FILE --head NOTE_FILE`.";

pub(crate) const AFTER: &str = "\
Output and exit codes:
  the copy's note on stdout (mosaic-bus/<store id>, size, base64 head;
  three lines)                                             exit 0
  the static code alone on the last line of stderr:
    integrity-failed, schema-mismatch  the copy does not verify (it is kept
                         for inspection); `seq N` follows a record to blame
                                                           exit 1
    unsafe-path          FILE exists, or the data root or its store is unsafe
                         or missing
    storage-unavailable  the store or FILE cannot be read or written
    bad-request          a usage error                     exit 2

Example:
  mosaic-bus backup --data-root /srv/bus --to /backups/bus-2026-12-03.sqlite \\
    > /safe/bus-2026-12-03.note

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
}

/// Runs `backup`.
pub fn main(args: BackupArgs) -> ExitCode {
    let root = match DataRoot::open(&args.data_root) {
        Ok(root) => root,
        Err(refusal) => return code_on_stderr(refusal),
    };
    match sqlite::backup(&root.db_path(), &args.to) {
        Ok(copy) => {
            print!("{}", copy.head().note());
            ExitCode::SUCCESS
        }
        Err(broken) => {
            let exit = match broken.error {
                OpenError::IntegrityFailed | OpenError::SchemaMismatch => 1,
                OpenError::WrongState | OpenError::Unavailable(_) => 2,
            };
            let mut stderr = std::io::stderr().lock();
            if let Some(seq) = broken.seq {
                let _ = writeln!(stderr, "seq {seq}");
            }
            let _ = writeln!(stderr, "{}", broken.error.refusal().code());
            ExitCode::from(exit)
        }
    }
}
