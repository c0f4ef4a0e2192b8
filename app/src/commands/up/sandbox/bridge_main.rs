//! `sandbox-bridge`: the hidden program that carries a sandboxed agent's
//! connections to `up`'s proxy, in one process inside the sandbox, beside
//! the agent. Everything in this file runs in that process.
//!
//! The bridge of a sandbox with `"network": "proxy"` is a TCP listener on
//! the sandbox's own loopback,
//! `127.0.0.1:`[`PROXY_PORT`](super::network::PROXY_PORT), whose every
//! connection goes on, byte for byte, to the proxy's Unix socket that `up`
//! binds at [`PROXY_SOCKET`](super::network::PROXY_SOCKET)
//! ([`super::proxy`]). Clients find it through `HTTPS_PROXY` and
//! `HTTP_PROXY`, which `sandbox-exec` sets.
//!
//! `sandbox-exec` binds the listener itself, before the agent starts, so
//! the port is ready when the agent's first request comes. It then starts
//! `mosaic-bus sandbox-bridge` with the listener as its standard input,
//! after the seccomp filter and the Landlock scopes are in force (the
//! bridge keeps them too), waits for its `ready` line, which the bridge
//! writes once it has made itself not dumpable (its own `exec` made it
//! dumpable again), and only then executes the agent: the agent, of the
//! same user, never opens the memory of this process, which may make the
//! Unix sockets the agent may not. The bridge is
//! thus the agent's child, inside the sandbox's PID namespace: it ends with
//! the sandbox, when its init ends with the agent or when `up` kills it.
//!
//! The proxy's socket names the run, so the bridge adds nothing to what
//! passes and holds no secret. A bridge can also forward a port: with
//! `sandbox-exec --forward PORT`, `127.0.0.1:PORT` inside reaches
//! `127.0.0.1:PORT` outside, through the proxy (each connection opens with
//! a `CONNECT` to it), so a client that expects a service of the user's
//! loopback (a model endpoint, say) finds it at the same address, and the
//! proxy still decides whether it is admitted.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustix::process::DumpableBehavior;

/// The subcommand that runs the bridge (hidden from the help).
pub(crate) const BRIDGE_SUBCOMMAND: &str = "sandbox-bridge";

/// What the bridge writes on its standard output, the only thing it ever
/// writes there, once it is no longer dumpable.
pub(crate) const BRIDGE_READY: &str = "ready\n";

/// The most connections the bridge carries at once; the proxy outside has
/// its own, smaller cap, and answers past it.
const MAX_CONNECTIONS: usize = 256;

/// `sandbox-bridge`: what `sandbox-exec` starts inside a sandbox with a
/// proxy. Not for people; hidden from the help.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxBridgeArgs {
    /// The proxy's Unix socket, inside the sandbox.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Open each connection with a `CONNECT` to this `host:port`: the port
    /// then forwards there, through the proxy.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
}

/// `sandbox-bridge`, started by `sandbox-exec` for an agent with a proxy:
/// runs the bridge on the listener that is its standard input, until the
/// sandbox ends; returns only when the listener fails.
pub fn main(args: SandboxBridgeArgs) -> ExitCode {
    // The bridge needs only its listener (standard input), and must not
    // hold the capability's descriptor that `sandbox-exec` keeps for the
    // agent: every inherited descriptor above 2 closes as it is dropped.
    if let Err(e) = mosaic_adapters::sys::take_inherited() {
        eprintln!("mosaic-bus sandbox-bridge: closing the inherited descriptors: {e}");
        return ExitCode::from(2);
    }
    // Out of the agent's reach before the agent starts, which
    // `sandbox-exec` holds back until the line below: see
    // `sandbox-exec`'s own.
    let ready = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable)
        .map_err(io::Error::from)
        .and_then(|()| io::stdout().write_all(BRIDGE_READY.as_bytes()))
        .and_then(|()| std::fs::File::open("/dev/null"))
        .and_then(|null| rustix::stdio::dup2_stdout(&null).map_err(io::Error::from));
    if let Err(e) = ready {
        eprintln!("mosaic-bus sandbox-bridge: making itself not dumpable: {e}");
        return ExitCode::from(2);
    }
    let listener = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => TcpListener::from(fd),
        Err(e) => {
            eprintln!("mosaic-bus sandbox-bridge: taking the listener: {e}");
            return ExitCode::from(2);
        }
    };
    let socket: Arc<Path> = args.socket.into();
    let connect: Option<Arc<str>> = args.connect.map(Into::into);
    let open = Arc::new(AtomicUsize::new(0));
    for client in listener.incoming() {
        let client = match client {
            Ok(client) => client,
            Err(e) => {
                eprintln!("mosaic-bus sandbox-bridge: accepting: {e}");
                continue;
            }
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (socket, connect, open) = (socket.clone(), connect.clone(), open.clone());
        std::thread::spawn(move || {
            if let Err(e) = join(client, &socket, connect.as_deref()) {
                eprintln!("mosaic-bus sandbox-bridge: reaching the proxy: {e}");
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    ExitCode::from(2)
}

/// The largest answer head read from the proxy for a forwarded port.
const MAX_ANSWER: usize = 16 * 1024;

/// Carries one client's bytes to the proxy and back, each way on its own
/// thread, each end shut for writing when the other side's reading ends;
/// for a forwarded port, after a `CONNECT` to `connect` that the proxy
/// answered 200 (any other answer closes the client's connection).
fn join(client: TcpStream, socket: &Path, connect: Option<&str>) -> io::Result<()> {
    let mut proxy = UnixStream::connect(socket)?;
    if let Some(target) = connect {
        write!(proxy, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")?;
        // Byte by byte, so nothing after the head is taken from the tunnel.
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") && head.len() < MAX_ANSWER {
            if proxy.read(&mut byte)? == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let established = head.starts_with(b"HTTP/1.1 200 ") && head.ends_with(b"\r\n\r\n");
        if !established {
            return Err(io::Error::other("the proxy refused the forwarded port"));
        }
    }
    let (client_in, proxy_out) = (client.try_clone()?, proxy.try_clone()?);
    let up =
        std::thread::spawn(move || pipe(client_in, proxy_out, |p| p.shutdown(Shutdown::Write)));
    pipe(proxy, client, |c| c.shutdown(Shutdown::Write));
    let _ = up.join();
    Ok(())
}

/// Copies `from` into `to` until `from` ends or either fails, then shuts
/// `to` for writing so the far side sees the end.
fn pipe<R: Read, W: Write>(mut from: R, mut to: W, shut: impl FnOnce(&W) -> io::Result<()>) {
    // An error ends this direction as an end of input does; the other
    // direction ends on its own when its peer closes.
    let _ = io::copy(&mut from, &mut to);
    let _ = shut(&to);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forwarded port, as `sandbox-bridge --connect` runs it: the bridge's
    /// side of each connection against the real proxy, admitted or not.
    #[test]
    fn a_forwarded_port_reaches_its_target_through_the_proxy_when_admitted() {
        use super::super::proxy::{Limits, Proxy};
        use crate::commands::team::Allow;
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = echo.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in echo.incoming().flatten() {
                let mut out = stream.try_clone().unwrap();
                let _ = io::copy(&mut &stream, &mut out);
            }
        });
        let proxy = Proxy::start(Limits::default()).unwrap();
        let allow = [Allow::parse(&format!("127.0.0.1:{port}")).unwrap()];
        let socket = proxy.listen("lead-0badc0de", &allow, None).unwrap();
        let inside = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = inside.local_addr().unwrap();
        let bridge = |target: String| {
            let (inside, socket) = (inside.try_clone().unwrap(), socket.clone());
            std::thread::spawn(move || {
                let (client, _) = inside.accept().unwrap();
                join(client, &socket, Some(&target)).is_ok()
            })
        };
        let admitted = bridge(format!("127.0.0.1:{port}"));
        let mut client = TcpStream::connect(at).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        client.write_all(b"through the bridge\n").unwrap();
        let mut echoed = [0u8; 19];
        client.read_exact(&mut echoed).unwrap();
        assert_eq!(&echoed, b"through the bridge\n");
        client.shutdown(Shutdown::Write).unwrap();
        assert!(admitted.join().unwrap());
        // A target the proxy does not admit: the client's connection ends.
        let refused = bridge("127.0.0.1:1".to_owned());
        let mut client = TcpStream::connect(at).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        assert!(!refused.join().unwrap());
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).unwrap(), 0);
    }
}
