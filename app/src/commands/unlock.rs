//! `mosaic-bus unlock --data-root D`: after a crash, prove the recorded
//! broker gone, copy the evidence aside, and remove only the lock and the
//! socket (`mosaic_adapters::fs::unlock`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_adapters::fs::{self, DataRoot};
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::system::SystemClock;
use mosaic_ports::Clock;

use super::args::non_empty_path;

pub(crate) const ABOUT: &str = "\
After a broker crash its writer lock (<D>/bus/writer.lock) is left behind, \
and a new broker refuses to start with stale-lock. `unlock` proves that the \
broker recorded in the lock (its pid and start time) is gone, copies \
bus.sqlite, bus.sqlite-wal and bus.sqlite-shm into a new \
<D>/bus/evidence-<time>/ folder, then removes only the lock and the socket. \
Evidence is never deleted. Prints one JSON line on stdout.";

pub(crate) const AFTER: &str = "\
Output and exit codes:
  {\"ok\":true,\"evidence\":\"<folder>\"}   exit 0
  {\"ok\":false,\"error\":\"<code>\"}       exit 2, where the code is
    lock-held            the broker may still run: the lock is held, or its
                         pid lives with the recorded start time, or /proc
                         cannot tell
    no-lock              there is no writer.lock
    stale-lock           the lock does not hold \"pid start_time\": nothing is
                         touched; inspect it and remove it by hand
    unsafe-path          a symlink, a foreign owner or unsafe permissions
    storage-unavailable  the evidence could not be written, or a removal failed
    bad-request          a usage error
Nothing else is written, on stdout or stderr.

Example:
  mosaic-bus unlock --data-root /srv/bus

Reference: docs/operations.md.";

/// `unlock`.
#[derive(Debug, Clone, Args)]
pub struct UnlockArgs {
    /// The data root of the crashed broker.
    #[arg(long, value_name = "D", value_parser = non_empty_path())]
    pub data_root: PathBuf,
}

/// Runs `unlock` and prints its one line.
pub fn main(args: UnlockArgs) -> ExitCode {
    let outcome = DataRoot::open(&args.data_root)
        .and_then(|root| fs::unlock(&root, &ProcFs::new(), SystemClock.now()));
    let (line, code) = match outcome {
        Ok(evidence) => (
            serde_json::json!({"ok": true, "evidence": evidence.to_string_lossy()}),
            ExitCode::SUCCESS,
        ),
        Err(refusal) => (
            serde_json::json!({"ok": false, "error": refusal.code()}),
            ExitCode::from(2),
        ),
    };
    println!("{line}");
    code
}
