//! The connector: how a client reaches the broker where it may not make a
//! Unix socket (inside `up`'s sandbox, whose seccomp filter refuses
//! `socket(AF_UNIX, …)`). The sandbox's supervisor, which may, holds one
//! end of a `SOCK_SEQPACKET` socket pair and leaves the other, inheritable,
//! to the agent's program, its number in [`CONNECTOR_FD_ENV`]. A client
//! asks for a connection by sending one message on it ([`ask`]) that
//! carries one end of a socket pair of its own making (`socketpair` stays
//! allowed); the supervisor connects to the broker's socket itself and
//! sends the connected descriptor back on that end ([`answer`]). Each
//! request has its own answering pair, so clients that ask at once (several
//! `mosaic-bus call`s of one harness) never take each other's answers, and
//! an answer nobody waits for any more is dropped with its pair.
//!
//! The broker then sees the supervisor's credentials on the connection: a
//! process of the same sandbox, so its checks hold as before.
//!
//! A program that does not pass an inherited descriptor on to what it
//! starts (Claude Code closes every descriptor above 2 for its hooks and
//! MCP servers) loses the connector; in a sandbox with a network namespace
//! of its own the supervisor also serves a bridge on the sandbox's own
//! loopback, named by [`BRIDGE_ENV`], which carries each connection's bytes
//! to the broker's socket ([`adopt_bridge`]). A process with both uses the
//! connector.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Instant;

use mosaic_domain::Refusal;
use rustix::net::{
    recvmsg, sendmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage,
    RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use socket2::Socket;

/// The time left until `deadline`, or `None` when it has (all but)
/// passed: a zero timeout would mean "wait forever" to the kernel.
fn time_left(deadline: Instant) -> Option<std::time::Duration> {
    Some(deadline.saturating_duration_since(Instant::now()))
        .filter(|left| *left >= std::time::Duration::from_millis(1))
}

/// The variable that names the inherited descriptor of the connector.
pub const CONNECTOR_FD_ENV: &str = "MOSAIC_BUS_CONNECTOR_FD";

/// The variable that names the bridge's address on the sandbox's own
/// loopback, `127.0.0.1:PORT`.
pub const BRIDGE_ENV: &str = "MOSAIC_BUS_BRIDGE";

/// The one byte of a request.
const REQUEST: u8 = b'c';
/// The one byte of an answer that carries a connection.
const CONNECTED: u8 = b'k';
/// The one byte of an answer without one: the broker could not be reached.
const UNAVAILABLE: u8 = b'u';

/// The connector of this process, once adopted: every [`super::Client`] and
/// [`super::Session`] then connects through it instead of by path.
static CONNECTOR: OnceLock<OwnedFd> = OnceLock::new();

/// Makes every client of this process connect through `connector`, the
/// agent's end of a sandbox's connector. The first one adopted stays;
/// `false` when one was already.
pub fn adopt(connector: OwnedFd) -> bool {
    CONNECTOR.set(connector).is_ok()
}

/// The adopted connector, if any.
pub(super) fn adopted() -> Option<&'static OwnedFd> {
    CONNECTOR.get()
}

/// The bridge of this process, once adopted.
static BRIDGE: OnceLock<std::net::SocketAddr> = OnceLock::new();

/// Makes every client of this process without a connector connect to the
/// bridge at `address` (a loopback address of the sandbox's own network).
/// The first one adopted stays; `false` when one was already, or when
/// `address` is not a loopback address.
pub fn adopt_bridge(address: std::net::SocketAddr) -> bool {
    address.ip().is_loopback() && BRIDGE.set(address).is_ok()
}

/// Connects to the adopted bridge, if any, until `deadline`.
pub(super) fn through_bridge(deadline: Instant) -> Option<Result<Socket, Refusal>> {
    let address = BRIDGE.get()?;
    let connected = time_left(deadline)
        .ok_or(Refusal::BrokerUnavailable)
        .and_then(|wait| {
            std::net::TcpStream::connect_timeout(address, wait)
                .map_err(|_| Refusal::BrokerUnavailable)
        });
    Some(connected.map(Socket::from))
}

/// Whether `fd` is a connector's end: a `SOCK_SEQPACKET` Unix socket.
pub fn is_connector(fd: impl AsFd) -> bool {
    let fd = fd.as_fd();
    matches!(
        (
            rustix::net::sockopt::socket_domain(fd),
            rustix::net::sockopt::socket_type(fd)
        ),
        (Ok(AddressFamily::UNIX), Ok(SocketType::SEQPACKET))
    )
}

/// Asks the supervisor at the far end of `connector` for a connection to
/// the broker, and waits for it until `deadline`.
///
/// # Errors
/// `broker-unavailable` when the request cannot be sent, the supervisor
/// answers that it could not connect, or no answer comes in time: nothing
/// was sent to the broker either way.
pub fn ask(connector: impl AsFd, deadline: Instant) -> Result<Socket, Refusal> {
    let unavailable = |_| Refusal::BrokerUnavailable;
    let (mine, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(unavailable)?;
    send_one(connector, REQUEST, Some(theirs)).map_err(|_| Refusal::BrokerUnavailable)?;
    let wait = time_left(deadline).ok_or(Refusal::BrokerUnavailable)?;
    rustix::net::sockopt::set_socket_timeout(
        &mine,
        rustix::net::sockopt::Timeout::Recv,
        Some(wait),
    )
    .map_err(unavailable)?;
    match receive_one(&mine) {
        Ok((CONNECTED, Some(connection))) => Ok(Socket::from(connection)),
        Ok(_) | Err(_) => Err(Refusal::BrokerUnavailable),
    }
}

/// Takes the next request on `connector` (the supervisor's end): the end
/// to answer on, or `None` for a message that carried none (ignored).
///
/// # Errors
/// The kernel's, when the connector cannot be read.
pub fn next_request(connector: impl AsFd) -> io::Result<Option<OwnedFd>> {
    let (_, reply) = receive_one(connector)?;
    Ok(reply)
}

/// Answers one request on `reply`: `connection` when the supervisor made
/// one, else that it could not.
///
/// # Errors
/// The kernel's, when the asker is gone.
pub fn answer(reply: impl AsFd, connection: Option<OwnedFd>) -> io::Result<()> {
    let byte = if connection.is_some() {
        CONNECTED
    } else {
        UNAVAILABLE
    };
    send_one(reply, byte, connection)
}

/// Sends `byte` with `fd`, if any, as one message.
fn send_one(to: impl AsFd, byte: u8, fd: Option<OwnedFd>) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    let fds = fd.as_ref().map(AsFd::as_fd);
    let fds = fds.as_slice();
    if !fds.is_empty() && !ancillary.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    let sent = sendmsg(
        to,
        &[IoSlice::new(&[byte])],
        &mut ancillary,
        SendFlags::NOSIGNAL,
    )?;
    if sent == 1 {
        Ok(())
    } else {
        Err(io::Error::other("the message was not sent whole"))
    }
}

/// Receives one message of one byte and at most one descriptor (more are
/// closed), close-on-exec.
fn receive_one(from: impl AsFd) -> io::Result<(u8, Option<OwnedFd>)> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let received = recvmsg(
        from,
        &mut [IoSliceMut::new(&mut byte)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fd = None;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for received in fds {
                fd.get_or_insert(received);
            }
        }
    }
    if received.bytes == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok((byte[0], fd))
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use super::*;

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap()
    }

    #[test]
    fn each_asker_gets_a_connection_of_its_own_and_a_refusal_is_unavailable() {
        let (agent, supervisor) = pair();
        let served = std::thread::spawn(move || {
            // The first request is answered with a connection whose far
            // end says who it is; the second that the broker is away.
            let reply = next_request(&supervisor).unwrap().unwrap();
            let (near, mut far) = UnixStream::pair().unwrap();
            answer(&reply, Some(OwnedFd::from(near))).unwrap();
            far.write_all(b"first\n").unwrap();
            let reply = next_request(&supervisor).unwrap().unwrap();
            answer(&reply, None).unwrap();
            far
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let connection = ask(&agent, deadline).expect("a connection");
        let mut text = [0u8; 6];
        UnixStream::from(OwnedFd::from(connection))
            .read_exact(&mut text)
            .unwrap();
        assert_eq!(&text, b"first\n");
        assert_eq!(
            ask(&agent, deadline).map(drop),
            Err(Refusal::BrokerUnavailable)
        );
        drop(served.join().unwrap());
    }

    #[test]
    fn no_answer_in_time_is_unavailable() {
        let (agent, _supervisor) = pair();
        let deadline = Instant::now() + Duration::from_millis(200);
        assert_eq!(
            ask(&agent, deadline).map(drop),
            Err(Refusal::BrokerUnavailable)
        );
    }
}
