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

use mosaic_domain::{text, Capability, Refusal};

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

/// The capability in the private file `path`: a regular file of this
/// process's effective uid with mode exactly 0600, opened without following
/// a link and checked on the descriptor it is then read from, so the file
/// checked is the file read.
///
/// # Errors
/// `bad-capability` when there is no file at `path` (a capability that is
/// not there, not a storage failure), it cannot be read or its text is
/// bad; `unsafe-path` when it is a link, another kind of file, another
/// user's or of another mode, or cannot be opened for lack of permission;
/// `storage-unavailable` when it cannot be examined otherwise.
pub fn cap_from_file(path: &Path) -> Result<Capability, Refusal> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let shown = || text::neutralise(&path.to_string_lossy()).into_owned();
    let opened = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO must not block the open: it is refused below, unread.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(
                code = Refusal::BadCapability.code(),
                path = &*shown(),
                "the capability file does not exist"
            );
            return Err(Refusal::BadCapability);
        }
        Err(e) => {
            let code = match e.raw_os_error() {
                Some(libc::ELOOP | libc::EACCES | libc::EPERM | libc::ENOTDIR | libc::EISDIR) => {
                    Refusal::UnsafePath
                }
                Some(_) | None => Refusal::StorageUnavailable,
            };
            tracing::warn!(
                code = code.code(),
                path = &*shown(),
                cause = &*text::neutralise(&e.to_string()),
                "the capability file cannot be opened"
            );
            return Err(code);
        }
    };
    let meta = file.metadata().map_err(|_| Refusal::StorageUnavailable)?;
    let private = meta.file_type().is_file()
        && meta.uid() == rustix::process::geteuid().as_raw()
        && meta.mode() & 0o7777 == 0o600;
    if !private {
        tracing::warn!(
            code = Refusal::UnsafePath.code(),
            path = &*shown(),
            why = "not ours, of mode 0600, a regular file",
            "refused a path"
        );
        return Err(Refusal::UnsafePath);
    }
    read_cap(file)
}

fn read_cap(file: std::fs::File) -> Result<Capability, Refusal> {
    let mut text = String::new();
    file.take(130)
        .read_to_string(&mut text)
        .map_err(|_| Refusal::BadCapability)?;
    Capability::parse(text.trim_end_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const CAP: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn private(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).expect("a file");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("its mode");
    }

    #[test]
    fn a_private_file_of_ours_gives_its_capability() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("cap");
        private(&path, &format!("{CAP}\n"), 0o600);
        let cap = cap_from_file(&path).expect("the capability");
        assert_eq!(cap.expose(), CAP);
        private(&path, "not a capability\n", 0o600);
        assert_eq!(cap_from_file(&path).err(), Some(Refusal::BadCapability));
    }

    #[test]
    fn anything_but_a_private_regular_file_is_refused() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("cap");
        assert_eq!(cap_from_file(&path).err(), Some(Refusal::BadCapability));
        private(&path, CAP, 0o644);
        assert_eq!(cap_from_file(&path).err(), Some(Refusal::UnsafePath));
        private(&path, CAP, 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).expect("a link");
        assert_eq!(cap_from_file(&link).err(), Some(Refusal::UnsafePath));
        assert_eq!(cap_from_file(dir.path()).err(), Some(Refusal::UnsafePath));
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("a FIFO");
        assert_eq!(cap_from_file(&fifo).err(), Some(Refusal::UnsafePath));
    }
}
