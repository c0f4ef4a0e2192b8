//! Where a client process finds its capability and the socket: the
//! inherited descriptor named by [`CAP_FD_ENV`] (read through
//! `/proc/self/fd/N`, so every process sharing the descriptor reads it from
//! the start) or a private 0600 file, and the socket named by
//! [`SOCKET_ENV`]. Shared by `mosaic-bus call` and the MCP server; a
//! capability is never an argument or an environment value, both of which
//! other processes of the user can read.

use std::io::Read;
use std::path::Path;

use mosaic_domain::{Capability, Refusal};

/// The environment variable naming the capability descriptor.
pub const CAP_FD_ENV: &str = "MOSAIC_BUS_CAP_FD";
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

/// The capability in the private file `path`.
///
/// # Errors
/// As [`crate::fs::check_private_file`] (`unsafe-path`,
/// `storage-unavailable`); `bad-capability` when it cannot be read or its
/// text is bad.
pub fn cap_from_file(path: &Path) -> Result<Capability, Refusal> {
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
