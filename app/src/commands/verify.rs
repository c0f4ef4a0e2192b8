//! `mosaic-bus verify --db FILE [--head NOTE_FILE]...`: every open-time
//! check of the store, and its whole hash chain recomputed, offline and
//! read-only (`mosaic_adapters::sqlite::verify_file`); then each note kept
//! outside, which the store must extend.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_adapters::sqlite::{self, OpenError};
use mosaic_domain::Refusal;
use mosaic_ports::StoreHead;
use serde::Serialize;

use super::args::non_empty_path;

pub(crate) const ABOUT: &str = "\
Verifies a store file offline: runs every check a broker runs when it opens \
the store (integrity, the pinned schema, the ledger's order, times and \
kinds) and recomputes the whole hash chain over every record. Then, for \
each note given with --head (as `backup --note` wrote it), checks that \
the store extends it: at least the note's size, and the same hash there. \
The file is opened read-only and never written; with no WAL beside it \
(a stopped broker's store, a backup), no WAL or SHM is created either. \
Prints one JSON line on stdout.";

pub(crate) const AFTER: &str = "\
Output and exit codes:
  {\"ok\":true,\"size\":N,\"head\":\"<base64>\",\"note\":\"<note>\"}   exit 0
  {\"ok\":false,\"error\":\"<code>\",\"seq\":N}   exit 1, where the code is
    integrity-failed  a check failed; `seq` names the first record that
                      does not match its hash, when one is to blame
    schema-mismatch   the file is not a store of this schema version
    truncated         the store is shorter than a note's size
    forked            the store's hash at a note's size differs, or the
                      note is of another store
  {\"ok\":false,\"error\":\"<code>\"}   exit 2: the file or a note cannot be
    read (unsafe-path: no such file; storage-unavailable; bad-request: a
    note that is not one, or a usage error)

Example:
  mosaic-bus backup --data-root /srv/bus --to /backups/bus-1.sqlite --note /safe/bus-1.note
  mosaic-bus verify --db /srv/bus/bus/bus.sqlite --head /safe/bus-1.note

Reference: docs/operations.md.";

/// `verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The store file (a broker's `bus/bus.sqlite`, or a backup).
    #[arg(long, value_name = "FILE", value_parser = non_empty_path())]
    pub db: PathBuf,
    /// A note the store must extend; repeat for several.
    #[arg(long = "head", value_name = "NOTE_FILE", value_parser = non_empty_path())]
    pub heads: Vec<PathBuf>,
}

/// `verify`'s one line, its keys in the documented order; `backup` prints
/// the same.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Line {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    head: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl Line {
    pub(crate) fn failed(error: &'static str, seq: Option<u64>) -> Line {
        Line {
            error: Some(error),
            seq,
            ..Line::default()
        }
    }

    /// `{"ok":true,"size":N,"head":…,"note":…}` for a verified head.
    pub(crate) fn verified(head: &StoreHead) -> Line {
        Line {
            ok: true,
            size: Some(head.size),
            head: Some(head.hash_base64()),
            note: Some(head.note()),
            ..Line::default()
        }
    }

    /// Prints the line on stdout.
    pub(crate) fn print(&self) {
        println!(
            "{}",
            serde_json::to_string(self).unwrap_or_else(|_| String::from("{\"ok\":false}"))
        );
    }
}

/// Runs `verify` and prints its one line.
pub fn main(args: VerifyArgs) -> ExitCode {
    let (line, code) = run(&args);
    line.print();
    code
}

fn run(args: &VerifyArgs) -> (Line, ExitCode) {
    let fail = |code: &'static str, exit: u8| (Line::failed(code, None), ExitCode::from(exit));
    let mut notes = Vec::new();
    for file in &args.heads {
        let Ok(text) = std::fs::read_to_string(file) else {
            return fail(Refusal::StorageUnavailable.code(), 2);
        };
        let Some(note) = StoreHead::parse_note(&text) else {
            return fail(Refusal::BadRequest.code(), 2);
        };
        notes.push(note);
    }
    let verified = match sqlite::verify_file(&args.db) {
        Ok(verified) => verified,
        Err(broken) => {
            let exit = match broken.error {
                OpenError::IntegrityFailed | OpenError::SchemaMismatch => 1,
                OpenError::WrongState | OpenError::Unavailable(_) => 2,
            };
            let line = Line::failed(broken.error.refusal().code(), broken.seq);
            return (line, ExitCode::from(exit));
        }
    };
    for note in &notes {
        match verified.check(note) {
            Ok(None) => {}
            Ok(Some(mismatch)) => return fail(mismatch.code(), 1),
            Err(e) => return fail(e.refusal().code(), 2),
        }
    }
    (Line::verified(verified.head()), ExitCode::SUCCESS)
}
