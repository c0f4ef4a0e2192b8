//! `hold_lock DATA_ROOT`: takes the writer lock of `DATA_ROOT` as a broker
//! would (its own pid and `/proc` start time), prints `locked PID START`,
//! and holds the lock until its standard input closes, then releases it
//! cleanly. The data-root tests kill it with SIGKILL instead, to leave the
//! lock behind exactly as a crashed broker does.
//!
//! On a refusal it prints `refused CODE` and exits 2.

use std::io::{Read, Write};
use std::process::ExitCode;

use mosaic_adapters::fs::{DataRoot, WriterLock};
use mosaic_adapters::procfs::ProcFs;
use mosaic_domain::Refusal;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(refusal) => {
            println!("refused {refusal}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), Refusal> {
    let path = std::env::args_os().nth(1).ok_or(Refusal::BadRequest)?;
    let root = DataRoot::open(path)?;
    let me = ProcFs::new()
        .current()
        .map_err(|_| Refusal::StorageUnavailable)?;
    let lock = WriterLock::acquire(&root, me.pid, me.start_time)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "locked {} {}", me.pid, me.start_time)
        .and_then(|()| out.flush())
        .map_err(|_| Refusal::StorageUnavailable)?;
    // Block until the test closes our stdin (or kills us).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    lock.release()
}
