//! The bridge inside a sandbox with `"network": "proxy"`: a TCP listener on
//! the sandbox's own loopback, `127.0.0.1:`[`PROXY_PORT`], whose every
//! connection goes on, byte for byte, to the proxy's Unix socket that `up`
//! binds at [`PROXY_SOCKET`] ([`super::proxy`]). Clients find it through
//! `HTTPS_PROXY` and `HTTP_PROXY`, which `sandbox-exec` sets.
//!
//! `sandbox-exec` binds the listener itself, before the agent starts, so
//! the port is ready when the agent's first request comes. It then starts
//! `mosaic-bus sandbox-bridge` with the listener as its standard input,
//! after the seccomp filter and the Landlock scopes are in force (the
//! bridge keeps them too), and only then executes the agent. The bridge is
//! thus the agent's child, inside the sandbox's PID namespace: it ends with
//! the sandbox, when its init ends with the agent or when `up` kills it.
//!
//! The proxy's socket names the run, so the bridge adds nothing to what
//! passes and holds no secret. Issue 43's loopback model endpoint is one
//! more bridge of this kind on that endpoint's port, whose connections
//! start with a `CONNECT` to the endpoint.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Where the proxy's socket is inside the sandbox: under the sandbox's own
/// `/run`, a tmpfs.
pub(super) const PROXY_SOCKET: &str = "/run/mosaic-bus/proxy.sock";

/// The port the bridge listens on, on the sandbox's loopback (squid's, and
/// free in a namespace of the agent's own).
pub(super) const PROXY_PORT: u16 = 3128;

/// The subcommand that runs the bridge (hidden from the help).
pub(super) const BRIDGE_SUBCOMMAND: &str = "sandbox-bridge";

/// The most connections the bridge carries at once; the proxy outside has
/// its own, smaller cap, and answers past it.
const MAX_CONNECTIONS: usize = 256;

/// bwrap's arguments that bind the proxy's socket `outside` into the
/// sandbox, after its tmpfs over `/run`.
pub(super) fn bind_args(outside: Option<&Path>) -> Vec<OsString> {
    outside
        .map(|path| vec!["--ro-bind".into(), path.into(), PROXY_SOCKET.into()])
        .unwrap_or_default()
}

/// `sandbox-exec`'s arguments that start the bridge, for an agent with a
/// proxy.
pub(super) fn exec_args(proxied: bool) -> Vec<OsString> {
    if proxied {
        vec!["--proxy-socket".into(), PROXY_SOCKET.into()]
    } else {
        Vec::new()
    }
}

/// In `sandbox-exec`: binds the bridge's port, starts the bridge on it
/// toward `socket`, and returns the environment the agent gets.
pub(super) fn start(socket: &Path) -> io::Result<Vec<(&'static str, String)>> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, PROXY_PORT))?;
    let exe = std::env::current_exe()?;
    Command::new(exe)
        .arg(BRIDGE_SUBCOMMAND)
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .spawn()?;
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    // Loopback stays direct: it is the sandbox's own.
    let local = "localhost,127.0.0.1,::1".to_owned();
    Ok(vec![
        ("HTTPS_PROXY", url.clone()),
        ("https_proxy", url.clone()),
        ("HTTP_PROXY", url.clone()),
        ("http_proxy", url),
        ("NO_PROXY", local.clone()),
        ("no_proxy", local),
    ])
}

/// `sandbox-bridge`: what `sandbox-exec` starts inside a sandbox with a
/// proxy. Not for people; hidden from the help.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxBridgeArgs {
    /// The proxy's Unix socket, inside the sandbox.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
}

/// `sandbox-bridge`, started by `sandbox-exec` for an agent with a proxy:
/// runs the bridge on the listener that is its standard input, until the
/// sandbox ends; returns only when the listener fails.
pub fn main(args: SandboxBridgeArgs) -> ExitCode {
    close_inherited();
    let listener = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => TcpListener::from(fd),
        Err(e) => {
            eprintln!("mosaic-bus sandbox-bridge: taking the listener: {e}");
            return ExitCode::from(2);
        }
    };
    let socket: Arc<Path> = args.socket.into();
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
        let (socket, open) = (socket.clone(), open.clone());
        std::thread::spawn(move || {
            if let Err(e) = join(client, &socket) {
                eprintln!("mosaic-bus sandbox-bridge: reaching the proxy: {e}");
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    ExitCode::from(2)
}

/// Closes every descriptor above 2: the bridge needs only its listener
/// (standard input), and must not hold the capability's descriptor that
/// `sandbox-exec` keeps for the agent.
fn close_inherited() {
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|&fd| fd > 2) {
        // Inherited across `exec`, owned by nothing here; the folder's own
        // descriptor is already closed and fails with EBADF, harmlessly.
        let _ = nix::unistd::close(fd);
    }
}

/// Carries one client's bytes to the proxy and back, each way on its own
/// thread, each end shut for writing when the other side's reading ends.
fn join(client: TcpStream, socket: &Path) -> io::Result<()> {
    let proxy = UnixStream::connect(socket)?;
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
    use crate::commands::team::{AgentSpec, Network};
    use crate::commands::up::sandbox::{bwrap_args, Places};
    use mosaic_domain::evidence::Harness;
    use mosaic_domain::RoleInstance;

    #[test]
    fn a_proxied_agent_gets_loopback_only_and_the_socket_after_the_run_tmpfs() {
        let root = Path::new("/srv/up");
        let mut spec = AgentSpec {
            role: RoleInstance::parse("lead").unwrap(),
            harness: Harness::Pi,
            program: PathBuf::from("sh"),
            args: Vec::new(),
            dir: root.join("work"),
            config_dir: root.join("work"),
            env: Vec::new(),
            network: Network::Proxy,
            allow: Vec::new(),
            read: Vec::new(),
            write: Vec::new(),
        };
        let places = Places {
            exe: PathBuf::from("/usr/bin/mosaic-bus"),
            socket: root.join("data/bus/bus.sock"),
            data_root: root.join("data"),
            secrets: root.join("secrets"),
            human_home: None,
            config_file: None,
        };
        let binds = [(root.join("work"), true)];
        let socket = Path::new("/tmp/mosaic-up-proxy-x/lead-1.sock");
        let text = |spec: &AgentSpec, proxy| -> Vec<String> {
            bwrap_args(spec, &places, &binds, proxy)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let args = text(&spec, Some(socket));
        let at = |words: &[&str]| args.windows(words.len()).position(|w| w == words);
        assert!(at(&["--unshare-net"]).is_some(), "{args:?}");
        let run = at(&["--tmpfs", "/run"]).expect("a tmpfs over /run");
        let bound = at(&["--ro-bind", &socket.to_string_lossy(), PROXY_SOCKET])
            .unwrap_or_else(|| panic!("the proxy's socket in {args:?}"));
        assert!(run < bound);
        assert_eq!(args.last().map(String::as_str), Some("--"));
        // Without a proxy, no socket; with the host's network, no namespace.
        spec.network = Network::Host;
        let args = text(&spec, None);
        assert!(!args
            .iter()
            .any(|a| a == PROXY_SOCKET || a == "--unshare-net"));
        assert_eq!(
            exec_args(true),
            [OsString::from("--proxy-socket"), PROXY_SOCKET.into()]
        );
        assert!(exec_args(false).is_empty());
    }
}
