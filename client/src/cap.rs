//! Where a client process finds its capability and the socket: the
//! inherited descriptor named by [`CAP_FD_ENV`] (read through
//! `/proc/self/fd/N`, so every process sharing the descriptor reads it from
//! the start) or a private 0600 file (`--cap-file`, or else the one
//! [`CAP_FILE_ENV`] names: a harness such as Claude Code does not pass
//! inherited descriptors on to the processes it starts, so `up` gives its
//! harness agents a file in their sandbox's private `/tmp`), and the
//! socket named by [`SOCKET_ENV`]. Shared by `mosaic-bus call` and the MCP server; a
//! capability is never an argument or an environment value, both of which
//! other processes of the user can read.

use std::io::Read;
use std::path::Path;

use mosaic_domain::{Capability, Refusal};

/// The environment variable naming the capability descriptor.
pub const CAP_FD_ENV: &str = "MOSAIC_BUS_CAP_FD";
/// The environment variable naming a private file that holds the
/// capability, read when neither `--cap-file` nor [`CAP_FD_ENV`] is given.
pub const CAP_FILE_ENV: &str = "MOSAIC_BUS_CAP_FILE";
/// The environment variable naming the socket.
pub const SOCKET_ENV: &str = "MOSAIC_BUS_SOCKET";

/// The capability on the descriptor named by [`CAP_FD_ENV`].
///
/// # Errors
/// `bad-capability` when the variable, the descriptor or its text is bad.
pub fn cap_from_fd() -> Result<Capability, Refusal> {
    let fd: u32 = std::env::var(CAP_FD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(Refusal::BadCapability)?;
    read_cap(
        std::fs::File::open(format!("/proc/self/fd/{fd}")).map_err(|_| Refusal::BadCapability)?,
    )
}

/// The capability a client was given: in `file` (`--cap-file`) when there
/// is one, else on the descriptor [`CAP_FD_ENV`] names when it is set,
/// else in the file [`CAP_FILE_ENV`] names.
///
/// # Errors
/// As [`cap_from_file`] and [`cap_from_fd`]; `bad-capability` when none
/// of the three is given.
pub fn cap_from(file: Option<&Path>) -> Result<Capability, Refusal> {
    if let Some(path) = file {
        return cap_from_file(path);
    }
    if std::env::var_os(CAP_FD_ENV).is_some() {
        return cap_from_fd();
    }
    match std::env::var_os(CAP_FILE_ENV) {
        Some(path) if !path.is_empty() => cap_from_file(Path::new(&path)),
        Some(_) | None => Err(Refusal::BadCapability),
    }
}

/// The capability in the private file `path`.
///
/// # Errors
/// `bad-capability` when there is no file at `path` (a capability that is
/// not there, not a storage failure), it cannot be read or its text is
/// bad; as [`crate::fs::check_private_file`] otherwise (`unsafe-path`,
/// `storage-unavailable`).
pub fn cap_from_file(path: &Path) -> Result<Capability, Refusal> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(
                code = Refusal::BadCapability.code(),
                path = &*crate::fs::neutral_path(path),
                "the capability file does not exist"
            );
            return Err(Refusal::BadCapability);
        }
        Ok(_) | Err(_) => {}
    }
    crate::fs::check_private_file(path)?;
    read_cap(std::fs::File::open(path).map_err(|_| Refusal::BadCapability)?)
}

fn read_cap(file: std::fs::File) -> Result<Capability, Refusal> {
    let mut text = String::new();
    file.take(130)
        .read_to_string(&mut text)
        .map_err(|_| Refusal::BadCapability)?;
    Capability::parse(text.trim_end_matches('\n'))
}
