//! The broker's Unix socket: request lines in, one response line out for
//! each, in order, over a connection that stays open until the client is
//! done. Transport only: bytes in, bytes out. What a line means (JSON,
//! capabilities, verbs) is the handler's business; this module only frames,
//! limits and delivers lines, and says "no" with static codes when a line
//! cannot be delivered.
//!
//! # Layout
//!
//! - this file: the server's limits (a line's own, [`MAX_REQUEST`] and
//!   [`READ_DEADLINE`], and the refusal line [`error_line`] are the client
//!   crate's, `mosaic_client::socket`, so both ends frame alike),
//!   [`bind_private`] and the two libc calls (`umask`, `geteuid`) that
//!   `std` does not offer;
//! - `server`: [`serve`] / [`serve_with`] / [`serve_in`], the [`Handler`]
//!   trait and its [`Sender`], [`Peer`] and [`Limits`] (tokio);
//! - `limits`: the server's [`Limits`];
//! - `slots`: the [`Budget`] of places a connection holds (the server's
//!   own, and a holder's: an agent's run), and its [`Slot`]s;
//! - `answer`: what a handler gets beside its line, the [`Disconnect`]
//!   signal and the [`DirectReply`] (the connection, lent so the thread
//!   that has the answer writes it);
//! - `waiting`: the pool of places of the connections that have not sent
//!   their first line, which evicts for a process holding less of it.
//!
//! [`budget`] sizes the places within the open-file limit (64 files kept
//! for the store, listeners, stdio and proofs, then the human's reserve
//! and the HTTP port's cap; a quarter of the rest at most for connections
//! before their first line), so running out refuses a connection, never
//! the store or the human.
//!
//! # The per-connection loop
//!
//! The accept loop takes each connection and, before spending anything on it:
//!
//! 1. reads the peer's credentials from the kernel (`SO_PEERCRED`); a peer
//!    whose uid is not the broker's effective uid gets
//!    `{"ok":false,"error":"bad-capability"}` and is closed unread;
//! 2. takes a place among the connections that have not authenticated yet
//!    ([`Limits::max_unauthenticated`], 1024). When all are taken it takes
//!    the place of the oldest connection still waiting for its first line
//!    of the peer process (`SO_PEERCRED` pid) that holds the most places,
//!    if that is more than the newcomer's process holds (the evicted one is
//!    answered `broker-unavailable`); otherwise it answers
//!    `{"ok":false,"error":"broker-unavailable"}` and closes unread, so a
//!    flood of connections costs neither tasks nor buffers, and cannot keep
//!    out a process that holds no place, such as the human CLI;
//! 3. spawns one task for the connection, which, line after line:
//!    - reads one line within [`Limits::read_deadline`] (the first within
//!      [`Limits::first_line_deadline`], 1 s, of the accept; each next one
//!      from the previous answer): at most
//!      [`MAX_REQUEST`] bytes before the `\n` (one byte more:
//!      `request-too-large`), silence or a partial line past the deadline:
//!      `request-timeout`, end of stream before the `\n`: `bad-request`.
//!      After an answer, a client that sends nothing of a next line before
//!      the deadline, or ends the stream, is done: the connection closes
//!      without another word;
//!    - after `request-too-large` or `request-timeout`, the two refusals
//!      that come before the client has finished writing, shuts down its
//!      writing side and reads and discards the rest (at most [`MAX_DRAIN`]
//!      bytes within [`DRAIN_DEADLINE`]) before it closes, so the kernel does
//!      not reset the connection and the client reads the answer; these
//!      end the connection, since where the next line would begin is
//!      unknown;
//!    - asks the handler the first line's [`Sender`]: a line of nobody
//!      (not a request, or a capability never issued) is answered and then
//!      the connection closes; a caller's or a human line moves the
//!      connection to the authenticated places ([`Limits::max_connections`],
//!      4096; none free: `broker-unavailable`, unhandled; a caller the
//!      handler counts apart, [`Sender::Counted`], also takes a slot of
//!      its own [`Budget`], an agent's run's, or is refused the same way),
//!      and a human line
//!      that finds none free is served from the human reserve
//!      ([`Limits::human_reserve`], 16) for that one line, if its peer
//!      passes the checks that need no proof ([`Handler::may_use_reserve`]:
//!      the broker's uid, PID, mount and user namespaces), so a sandboxed
//!      agent's lines that only claim to be human never take one;
//!    - hands the line (without `\n`), the [`Peer`] and a [`Disconnect`]
//!      signal to the [`Handler`], and while the handler works keeps reading
//!      the connection: bytes are the client's next lines, kept in order;
//!      end of stream or an error fires the signal, which is how an agent
//!      closing its connection aborts its request;
//!    - writes the handler's bytes plus `\n` within [`Limits::write_deadline`]
//!      (or what of them the [`DirectReply`] could not write at once)
//!      (a client that does not take it loses the connection), then goes
//!      on with the next line. On an authenticated connection a line the
//!      handler refuses (not JSON, an unknown verb) is answered like any
//!      other, and the connection goes on.
//!
//! Lines are handled one at a time, so answers come in the order of their
//! lines, and nothing is bound to the connection: each line carries its own
//! capability, as it would on a connection of its own. When the server
//! shuts down, connections waiting between requests close at once; one
//! whose request is in flight closes after its answer.
//!
//! Error replies are the literal lines `{"ok":false,"error":"<code>"}` made
//! from [`Refusal::code`] ([`error_line`]); no OS error text ever reaches a
//! client, and I/O errors end a connection, never the process.

mod answer;
mod limits;
mod server;
mod slots;
mod waiting;

use std::io;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::PoisonError;
use std::time::Duration;

use mosaic_client::socket::{error_line, MAX_REQUEST, READ_DEADLINE};
use mosaic_domain::Refusal;

use crate::fs;

pub use answer::{DirectReply, Disconnect};
pub use server::{serve, serve_in, serve_with, Handler, Limits, Peer, Sender};
pub use slots::{Budget, Slot};

/// How long the server waits for a client to take its response.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);

/// How much of a refused request the server still reads, and throws away,
/// after answering `request-too-large` or `request-timeout`: 16 MiB.
///
/// A connection closed with unread input is reset by the kernel, and a
/// client still writing its line then loses the answer (at 300 KB, none
/// of 20 answers arrived). Draining the rest lets the client finish
/// writing and read the answer; the bound keeps a client that never stops
/// from holding its slot and our time. Past it the connection is closed
/// anyway.
pub const MAX_DRAIN: usize = 16 * 1024 * 1024;

/// How long the server drains a refused request ([`MAX_DRAIN`]) before it
/// closes regardless: 2 s, ample for 16 MiB over a local socket, and short
/// enough that a slow writer cannot keep a slot for long.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

/// How many connections the server serves at once by default: enough for
/// every agent of a large team to hold a `changes` wait open, with room
/// for their other calls. Each needs an open file: see
/// [`raise_open_file_limit`].
pub const MAX_CONNECTIONS: usize = 4096;

/// How many connections may wait for their first line at once by default,
/// apart from the authenticated ones ([`Limits::max_unauthenticated`]):
/// a client sends its line as it connects, so a quarter of
/// [`MAX_CONNECTIONS`] is room for a burst of a whole team's waits opened
/// at once from one process, and each place is held for at most
/// [`FIRST_LINE_DEADLINE`] before its line is read.
pub const MAX_UNAUTHENTICATED: usize = 1024;

/// How long a new connection has to deliver its first line by default
/// ([`Limits::first_line_deadline`]): 1 s, well under [`READ_DEADLINE`],
/// since a client writes its request as it connects and a connection that
/// sends nothing has not earned a place.
pub const FIRST_LINE_DEADLINE: Duration = Duration::from_secs(1);

/// How many human lines are served beyond [`MAX_CONNECTIONS`] when every
/// authenticated place is taken ([`Limits::human_reserve`]), each for its
/// one request, so that agents holding every place cannot keep the human
/// out.
pub const HUMAN_RESERVE: usize = 16;

/// Raises this process's soft limit of open files to its hard limit, so
/// [`MAX_CONNECTIONS`] connections fit where the soft limit is the common
/// 1024. Returns the soft limit now in force, or `None` when it could not
/// be read (the process keeps whatever it had).
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    if limit.current != limit.maximum && setrlimit(Resource::Nofile, raised).is_ok() {
        return limit.maximum;
    }
    limit.current
}

/// The open files kept for everything but connections: the store (the
/// writer's and the readers' connections, each with its log and shared
/// memory), the listeners, stdio, the logs, the human proofs' reads of
/// `/proc` and the host channel, with room to spare.
pub const KEPT_FILES: usize = 64;

/// The open-file limit in force (the soft limit), if it can be read.
pub fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// The socket's [`Limits`] within a budget of `files` open files (`None`:
/// unknown, the defaults), of which `others` are taken by other
/// connections (the HTTP port's cap). [`KEPT_FILES`] and the human
/// reserve ([`HUMAN_RESERVE`]) come first, so the store, the listeners and
/// the human can always open; of what is left, a quarter at most goes to
/// connections that have not authenticated and the rest to those that
/// have, each within its default. So running out of places refuses that
/// connection (`broker-unavailable`) before the process runs out of
/// files, and never the human.
pub fn budget(files: Option<u64>, others: usize) -> Limits {
    let mut limits = Limits::default();
    let Some(files) = files else {
        return limits;
    };
    let files = usize::try_from(files).unwrap_or(usize::MAX);
    let spare = files.saturating_sub(KEPT_FILES + others + limits.human_reserve);
    limits.max_unauthenticated = limits.max_unauthenticated.min(spare / 4).max(1);
    limits.max_connections = limits
        .max_connections
        .min(spare.saturating_sub(limits.max_unauthenticated))
        .max(1);
    limits
}

/// Binds a new Unix socket at `path` that is created with mode 0600, and
/// listens on it.
///
/// The mode comes from a restrictive umask (`0177`) set around `bind` and
/// restored right after; the socket is never `chmod`-ed, so there is no
/// moment in which it exists with wider permissions. The umask is
/// process-wide: any file another thread creates during that moment gets
/// the same mask. Private folders ([`fs::create_private_dir`]) wait for
/// the moment to pass, under the same lock, and files the store makes are
/// 0600, which the mask leaves alone. The broker also binds its socket
/// before it starts other threads (the listener is a `std` one for this
/// reason: it can be made before the tokio runtime exists, and [`serve`]
/// adopts it later).
///
/// The result is checked with [`fs::check_private_socket`] (a socket, ours,
/// exactly 0600); a socket that fails the check is removed again.
///
/// # Errors
/// - `unsafe-path` when anything (file, socket, symlink) exists at `path`
///   already: a leftover socket is the operator's to clear with `unlock`;
///   also when the folder is missing or not ours, the path is too long for
///   a socket address, or the bound socket is not exactly 0600 and ours;
/// - `storage-unavailable` for other failures of the operating system.
pub fn bind_private(path: &Path) -> Result<UnixListener, Refusal> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => return Err(Refusal::UnsafePath),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) => return Err(Refusal::UnsafePath),
    }
    let bound = {
        let _only_us = fs::UMASK_LOCK
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let previous = set_umask(0o177);
        let bound = UnixListener::bind(path);
        set_umask(previous);
        bound
    };
    let listener = bound.map_err(|e| bind_refusal(&e))?;
    if let Err(refusal) = fs::check_private_socket(path) {
        drop(listener);
        // We created this socket a moment ago inside a folder that only we
        // may write, so removing it touches nothing else.
        let _ = std::fs::remove_file(path);
        return Err(refusal);
    }
    Ok(listener)
}

/// Maps a failed `bind` onto a static code: a path we cannot or may not use
/// is `unsafe-path`, everything else `storage-unavailable`.
fn bind_refusal(e: &io::Error) -> Refusal {
    match e.raw_os_error() {
        Some(
            libc::EADDRINUSE
            | libc::EEXIST
            | libc::EACCES
            | libc::EPERM
            | libc::ENOENT
            | libc::ENOTDIR
            | libc::ELOOP
            | libc::ENAMETOOLONG
            | libc::EROFS,
        ) => Refusal::UnsafePath,
        Some(_) => Refusal::StorageUnavailable,
        // `std` refuses a path too long for `sockaddr_un` itself, without
        // an OS error.
        None if e.kind() == io::ErrorKind::InvalidInput => Refusal::UnsafePath,
        None => Refusal::StorageUnavailable,
    }
}

/// Sets the process's umask and returns the previous one.
fn set_umask(mask: u32) -> u32 {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask)).as_raw_mode()
}

/// This process's effective uid: the only uid whose peers the server admits.
fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_errors_map_to_static_codes() {
        let os = |code| bind_refusal(&io::Error::from_raw_os_error(code));
        assert_eq!(os(libc::EADDRINUSE), Refusal::UnsafePath);
        assert_eq!(os(libc::ENOENT), Refusal::UnsafePath);
        assert_eq!(os(libc::ENOSPC), Refusal::StorageUnavailable);
        assert_eq!(
            bind_refusal(&io::Error::from(io::ErrorKind::InvalidInput)),
            Refusal::UnsafePath
        );
        assert_eq!(
            bind_refusal(&io::Error::from(io::ErrorKind::Other)),
            Refusal::StorageUnavailable
        );
    }
}
