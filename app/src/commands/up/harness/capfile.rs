//! The capability as a private file, for the agents whose harness does not
//! pass inherited descriptors on: Claude Code starts its MCP servers, its
//! hooks and its shell without them, so `mosaic-bus mcp` there would find
//! no descriptor. Such an agent gets `MOSAIC_BUS_CAP_FILE` instead, which
//! `mosaic-bus call`, `mcp` and `head` read when no descriptor is given.
//!
//! - In a sandbox, `sandbox-exec --cap-file` waits for `up`'s `ready` line
//!   (the capability's memfd is empty until then), copies the capability
//!   into [`SANDBOX_CAP_FILE`], a 0600 file of the sandbox's private
//!   `/tmp` that nothing outside sees, created exclusively without
//!   following a link, and closes the descriptor.
//! - Without a sandbox, `up` writes it, the same way, into the run's
//!   private folder before it sends `ready`, and the agent's program is
//!   started behind a `sh` that waits for that line.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use mosaic_adapters::fs::create_private_file;
use mosaic_domain::{Capability, Refusal};

/// Where `sandbox-exec --cap-file` puts the capability, in the sandbox's
/// private `/tmp`.
pub(crate) const SANDBOX_CAP_FILE: &str = "/tmp/mosaic-bus.cap";

/// The most bytes of the `ready` line read: a longer line is not it.
const MAX_READY: usize = 64;

/// Reads standard input one byte at a time up to and including the first
/// newline, so nothing after the `ready` line is taken from the harness
/// (pi reads its prompt from the same pipe), and checks it is `ready`.
///
/// # Errors
/// When the input ends or fails before a newline, or the line is not
/// `ready`.
pub(crate) fn wait_ready() -> io::Result<()> {
    let stdin = io::stdin();
    let fd = stdin.as_fd();
    let mut line = Vec::new();
    loop {
        let mut byte = [0u8; 1];
        match rustix::io::read(fd, &mut byte) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if line.len() < MAX_READY => line.push(byte[0]),
            Ok(_) => return Err(io::Error::other("the ready line is too long")),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if line == b"ready" {
        Ok(())
    } else {
        Err(io::Error::other("the first line on stdin is not ready"))
    }
}

/// Copies the capability on `fd` (read from its start, at an offset, so
/// neither the descriptor's position nor `/proc/self`, which a process
/// that is not dumpable may not open, is involved) into a new private file
/// at `to`.
///
/// # Errors
/// `bad-capability` when the descriptor does not hold one; the codes of
/// [`write_cap`].
pub(crate) fn copy_cap(fd: BorrowedFd<'_>, to: &Path) -> Result<(), Refusal> {
    let mut bytes = [0u8; 130];
    let mut read = 0;
    while read < bytes.len() {
        let offset = u64::try_from(read).map_err(|_| Refusal::BadCapability)?;
        match rustix::io::pread(fd, &mut bytes[read..], offset) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Err(Refusal::BadCapability),
        }
    }
    let text = std::str::from_utf8(&bytes[..read]).map_err(|_| Refusal::BadCapability)?;
    let cap = Capability::parse(text.trim_end_matches('\n'))?;
    write_cap(&cap, to)
}

/// Writes `cap` and a newline into a new file at `to`: created
/// exclusively, mode 0600, never through a symbolic link.
///
/// # Errors
/// `unsafe-path` when something is at `to` already; `storage-unavailable`
/// when it cannot be written.
pub(crate) fn write_cap(cap: &Capability, to: &Path) -> Result<(), Refusal> {
    let mut file = create_private_file(to)?;
    file.write_all(format!("{}\n", cap.expose()).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|_| Refusal::StorageUnavailable)
}

/// Makes `/dev/null` this process's standard input: Claude Code in `-p`
/// mode reads a piped stdin as more prompt, and it has none to read.
///
/// # Errors
/// When `/dev/null` cannot be opened or duplicated.
pub(crate) fn null_stdin() -> io::Result<()> {
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_copied_capability_is_a_new_private_file_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let cap = Capability::from_random([7; 32]);
        let source = crate::commands::up::launch::cap_memfd().unwrap();
        crate::commands::up::launch::fill_and_seal(&source, &cap).unwrap();
        let to = dir.path().join("cap");
        copy_cap(source.as_fd(), &to).unwrap();
        assert_eq!(
            std::fs::read_to_string(&to).unwrap(),
            format!("{}\n", cap.expose())
        );
        let mode = std::fs::metadata(&to).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(copy_cap(source.as_fd(), &to), Err(Refusal::UnsafePath));
        // A link planted where the file goes is not followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        assert_eq!(write_cap(&cap, &link), Err(Refusal::UnsafePath));
        assert!(!dir.path().join("elsewhere").exists());
        // An empty descriptor (before `ready`) holds no capability.
        let empty = crate::commands::up::launch::cap_memfd().unwrap();
        let other = dir.path().join("other");
        assert_eq!(copy_cap(empty.as_fd(), &other), Err(Refusal::BadCapability));
    }
}
