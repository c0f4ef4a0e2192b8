//! `mosaic-bus head --socket PATH --cap-file F`: the `head` read verb, for a
//! reader (or the human's console): prints the note of the evidence's hash
//! chain, to keep outside the store and give `verify --head` later.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_client::cap::cap_from;
use mosaic_client::socket::Client;
use mosaic_domain::Refusal;
use serde_json::json;

use super::args::non_empty_path;

pub(crate) const ABOUT: &str = "\
Asks the broker for the head of the evidence's hash chain (the `head` read \
verb, for readers) and prints its note on stdout: the store id, the number \
of records and the base64 hash of the newest, three lines. Keep the note \
where the broker's user cannot write; `mosaic-bus verify --db FILE --head \
NOTE_FILE` later proves the store still extends it. The capability comes \
from --cap-file (mode 0600) or the descriptor named by MOSAIC_BUS_CAP_FD. \
Nothing is read from stdin.";

pub(crate) const AFTER: &str = "\
Environment:
  MOSAIC_BUS_CAP_FD      the descriptor holding the capability (without
                         --cap-file)
  MOSAIC_BUS_CAP_FILE    a private 0600 file holding it (without --cap-file
                         or MOSAIC_BUS_CAP_FD)
  MOSAIC_BUS_SOCKET      the socket (without --socket)

Output and exit codes:
  the note on stdout                                       exit 0
  the static code alone on the last line of stderr:
    the broker's refusal (not-authorized for an agent), broker-unavailable,
    bad-capability, unsafe-path (the capability file)      exit 1
    bad-request          a usage error                     exit 2

Example:
  mosaic-bus head --socket /srv/bus/bus/bus.sock --cap-file reader.cap > /safe/bus.note

Reference: docs/operations.md.";

/// `head`.
#[derive(Debug, Clone, Args)]
pub struct HeadArgs {
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(long, value_name = "PATH", env = "MOSAIC_BUS_SOCKET", value_parser = non_empty_path())]
    pub socket: PathBuf,
    /// Read the capability from this private file (mode 0600) instead of the
    /// descriptor named by MOSAIC_BUS_CAP_FD.
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub cap_file: Option<PathBuf>,
}

/// Runs `head`.
pub fn main(args: HeadArgs) -> ExitCode {
    let cap = cap_from(args.cap_file.as_deref());
    let answer =
        cap.and_then(|cap| Client::new(&args.socket, cap.expose()).call("head", json!({})));
    let refusal = match answer {
        Ok(result) => match result.get("note").and_then(serde_json::Value::as_str) {
            Some(note) => {
                print!("{note}");
                return ExitCode::SUCCESS;
            }
            None => Refusal::OutcomeUnknown,
        },
        Err(refusal) => refusal,
    };
    let _ = writeln!(std::io::stderr().lock(), "{}", refusal.code());
    ExitCode::from(1)
}
