//! The connector's serving end, in `sandbox-exec`'s supervisor: the one way
//! an agent's program reaches the broker, since it may not make a Unix
//! socket (its seccomp filter refuses `socket(AF_UNIX, …)`; see
//! [`super::exec_main`]). Everything in this file runs in the supervisor's
//! process, on a thread started before the supervisor's own main thread
//! takes that filter, so this thread alone may connect.
//!
//! [`start`] makes a `SOCK_SEQPACKET` socket pair: the agent's end is
//! inheritable, at a number of 100 or more (Node, which both harnesses
//! run on, takes the low numbers for itself and passes the others on to
//! the programs it starts: Claude Code's MCP server and hook, pi's tools),
//! and named to the program by `MOSAIC_BUS_CONNECTOR_FD`. Each request
//! ([`mosaic_client::socket::connector`] is the protocol) carries a socket
//! to answer on; the thread connects to the broker's socket, the one path
//! it knows, and sends the connection back. Nothing else is reached: an
//! agent that asks gets a connection to the broker, which still checks the
//! capability on its first line, and a socket file anywhere else (a
//! workdir's, the config's folder's, `/tmp`'s) stays out of reach. A
//! request waits at most [`CONNECT_TIMEOUT`], and at most
//! [`MAX_PENDING`] wait at once (beyond that the answer is at once that
//! the broker is unavailable), so a flood of requests costs the supervisor
//! a bounded number of threads.
//!
//! Claude Code closes every inherited descriptor above 2 for the programs
//! it starts (its hooks, its MCP servers), so they lose the connector.
//! [`bridge`] also listens on the loopback, at an address
//! `MOSAIC_BUS_BRIDGE` names, and carries each connection's bytes to the
//! broker's socket. In a sandbox with a network namespace of its own
//! (`"network": "none"` or `"proxy"`) only the sandbox's processes reach
//! that loopback. With `"network": "host"` the port is the host's, so
//! the bridge carries a connection only when the kernel's table of TCP
//! sockets says its other end belongs to this sandbox's user ([`ours`]):
//! another user's process, which the broker's own peer check would refuse,
//! is closed unread. (A process of the human's own user outside could
//! connect to the broker's socket directly anyway; through the bridge the
//! broker sees the sandbox's supervisor, never the human.)

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mosaic_client::socket::connector::{answer, next_request};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

/// The lowest number the agent's end of the connector takes.
const AGENT_FD_FLOOR: i32 = 100;

/// The longest one connection to the broker may take (a full accept queue
/// makes a Unix `connect` wait).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most requests served at once.
const MAX_PENDING: usize = 64;

/// Starts serving the connector toward the broker's socket at `bus`;
/// returns the agent's end, inheritable.
///
/// # Errors
/// The kernel's, when the pair or the thread cannot be made.
pub(super) fn start(bus: PathBuf) -> io::Result<OwnedFd> {
    let (agent, supervisor) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let agent = rustix::io::fcntl_dupfd_cloexec(&agent, AGENT_FD_FLOOR)?;
    rustix::io::fcntl_setfd(&agent, rustix::io::FdFlags::empty())?;
    std::thread::Builder::new()
        .name("sandbox-connector".into())
        .spawn(move || serve(&supervisor, &bus))?;
    Ok(agent)
}

/// Serves requests on `connector` until it fails.
fn serve(connector: &OwnedFd, bus: &Path) {
    let pending = Arc::new(AtomicUsize::new(0));
    loop {
        let reply = match next_request(connector) {
            Ok(Some(reply)) => reply,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("mosaic-bus sandbox-exec: the connector failed: {e}");
                return;
            }
        };
        if pending.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
            pending.fetch_sub(1, Ordering::AcqRel);
            let _ = answer(&reply, None);
            continue;
        }
        let (bus, done) = (bus.to_path_buf(), pending.clone());
        let spawned = std::thread::Builder::new()
            .name("sandbox-connect".into())
            .spawn(move || {
                // An asker that gave up is gone with its end: nothing to do.
                let _ = answer(&reply, connect(&bus).ok());
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Binds a port on the sandbox's own loopback and starts carrying each
/// connection to it to the broker's socket at `bus`; returns its address.
///
/// # Errors
/// The kernel's, when the port or the thread cannot be made.
pub(super) fn bridge(bus: PathBuf) -> io::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let address = listener.local_addr()?;
    std::thread::Builder::new()
        .name("sandbox-bus-bridge".into())
        .spawn(move || carry(&listener, &bus))?;
    Ok(address)
}

/// Accepts on `listener` until it fails, carrying each connection.
fn carry(listener: &std::net::TcpListener, bus: &Path) {
    let pending = Arc::new(AtomicUsize::new(0));
    for client in listener.incoming() {
        let Ok(client) = client else {
            continue;
        };
        if !ours(&client) {
            continue;
        }
        if pending.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
            pending.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let (bus, done) = (bus.to_path_buf(), pending.clone());
        let spawned = std::thread::Builder::new()
            .name("sandbox-bus-carry".into())
            .spawn(move || {
                if let Ok(broker) = connect(&bus) {
                    join(client, std::os::unix::net::UnixStream::from(broker));
                }
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Whether the other end of `client`, a loopback TCP connection, is a
/// socket of this process's user: its row in `/proc/net/tcp` (or
/// `tcp6`), the far end's local address being `client`'s peer address,
/// shows this user (another user's shows as the overflow user inside the
/// sandbox's user namespace).
fn ours(client: &std::net::TcpStream) -> bool {
    let (Ok(peer), Ok(local)) = (client.peer_addr(), client.local_addr()) else {
        return false;
    };
    let uid = rustix::process::getuid().as_raw();
    let (table, peer_hex, local_hex) = match (peer, local) {
        (std::net::SocketAddr::V4(peer), std::net::SocketAddr::V4(local)) => {
            ("/proc/net/tcp", v4_hex(peer), v4_hex(local))
        }
        (std::net::SocketAddr::V4(_) | std::net::SocketAddr::V6(_), _) => return false,
    };
    let Ok(text) = std::fs::read_to_string(table) else {
        return false;
    };
    text.lines().skip(1).any(|row| {
        let fields: Vec<&str> = row.split_whitespace().collect();
        matches!(
            fields.as_slice(),
            [_, l, r, _, _, _, _, owner, ..]
                if *l == peer_hex && *r == local_hex && owner.parse::<u32>() == Ok(uid)
        )
    })
}

/// An IPv4 address and port as `/proc/net/tcp` writes them: the address's
/// four bytes as one number in this machine's byte order, in hexadecimal,
/// then the port.
fn v4_hex(address: std::net::SocketAddrV4) -> String {
    let number = u32::from_ne_bytes(address.ip().octets());
    format!("{number:08X}:{:04X}", address.port())
}

/// Copies bytes both ways between `client` and `broker` until both ends
/// are done, each direction shut for writing when its reading ends.
fn join(client: std::net::TcpStream, broker: std::os::unix::net::UnixStream) {
    use std::net::Shutdown;
    let (Ok(mut client_in), Ok(mut broker_out)) = (client.try_clone(), broker.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut client_in, &mut broker_out);
        let _ = broker_out.shutdown(Shutdown::Write);
    });
    let (mut broker_in, mut client_out) = (broker, client);
    let _ = io::copy(&mut broker_in, &mut client_out);
    let _ = client_out.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// One connection to the broker's socket at `bus`, within
/// [`CONNECT_TIMEOUT`].
fn connect(bus: &Path) -> io::Result<OwnedFd> {
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_timeout(
        &socket,
        rustix::net::sockopt::Timeout::Send,
        Some(CONNECT_TIMEOUT),
    )?;
    rustix::net::connect(socket.as_fd(), &SocketAddrUnix::new(bus)?)?;
    Ok(socket)
}
