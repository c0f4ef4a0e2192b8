//! The forward proxy `up` runs, outside the sandboxes, for the agents with
//! `"network": "proxy"`: their one way out of a loopback-only network
//! namespace.
//!
//! Each such agent gets a Unix socket of its own, `<run>.sock` in a private
//! folder of `up`'s (mode 0700, removed on close), bound into its sandbox
//! at [`network::PROXY_SOCKET`](super::network::PROXY_SOCKET); inside,
//! `sandbox-exec` bridges it to `127.0.0.1:`[`network::PROXY_PORT`](super::network::PROXY_PORT)
//! and sets `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` ([`super::bridge_main`]).
//! The socket's path names the run, so every connection on it is the
//! run's: the proxy needs no credential from the agent.
//!
//! It speaks the two forms a client sends to a forward proxy:
//! `CONNECT host:port` (a tunnel, for HTTPS) and a plain HTTP request in
//! absolute form (`GET http://host[:port]/path`), which goes on in origin
//! form with `Connection: close`, so one connection carries one host.
//! Either way the target must pass the agent's [`Policy`]: a name that an
//! `"allow"` entry admits, with its port, resolved once here and connected
//! to at an address that passed the address rules ([`admit::is_public`], or
//! listed exactly); an address literal only when listed exactly. The proxy
//! never resolves the name twice, so a name cannot change its answer
//! between the check and the connection.
//!
//! Each connection is logged when it ends (run, host, port, bytes each
//! way), and each refusal with its static reason ([`Reason`]), which the
//! client also gets as an HTTP status and a one-line body. Bounded: the
//! request's head is capped ([`Limits::head`]) and must arrive before a
//! deadline ([`Limits::head_deadline`]), and each agent has at most
//! [`Limits::connections`] at once; a client that sends half a request
//! and leaves frees its place as it goes.
//!
//! The proxy runs on a tokio runtime of its own (one worker thread), apart
//! from `up`'s, which only turns while `up` waits for signals.

mod admit;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::commands::team::Allow;
use admit::{Host, Policy, Reason, Target};

/// The bounds of one agent's proxy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The largest request head (request line and headers) read.
    pub(crate) head: usize,
    /// How long a client has to send its whole request head.
    pub(crate) head_deadline: Duration,
    /// The most connections carried for one agent at once.
    pub(crate) connections: usize,
    /// How long resolving a name, and then connecting, may each take.
    pub(crate) upstream_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head: 16 * 1024,
            head_deadline: Duration::from_secs(10),
            connections: 64,
            upstream_deadline: Duration::from_secs(10),
        }
    }
}

/// The proxy: its runtime and its private folder of sockets. Dropped, it
/// stops every listener and connection and removes the folder.
#[derive(Debug)]
pub(crate) struct Proxy {
    runtime: Option<tokio::runtime::Runtime>,
    dir: tempfile::TempDir,
    limits: Limits,
}

impl Proxy {
    /// Starts the runtime and makes the private folder (under the
    /// temporary directory, mode 0700).
    pub(crate) fn start(limits: Limits) -> std::io::Result<Proxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mosaic-proxy")
            .enable_io()
            .enable_time()
            .build()?;
        // Created 0700, not left to the umask: whoever reaches a socket in
        // it speaks as the run it names.
        let dir = tempfile::Builder::new()
            .prefix("mosaic-up-proxy-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()?;
        Ok(Proxy {
            runtime: Some(runtime),
            dir,
            limits,
        })
    }

    /// Listens for `run` on a new socket of the folder, admitting what
    /// `allow` lists; returns the socket's path, for the sandbox to bind.
    pub(crate) fn listen(&self, run: &str, allow: &[Allow]) -> std::io::Result<PathBuf> {
        let runtime = self.runtime.as_ref().ok_or(std::io::ErrorKind::NotFound)?;
        let path = self.dir.path().join(format!("{run}.sock"));
        let listener = {
            let _entered = runtime.enter();
            UnixListener::bind(&path)?
        };
        let agent = Arc::new(Agent {
            run: run.into(),
            policy: Policy::new(allow.to_vec()),
            limits: self.limits,
        });
        runtime.spawn(serve(listener, agent));
        Ok(path)
    }

    /// The private folder of the sockets.
    #[cfg(test)]
    fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // A resolution may be blocked in the C library: nothing waits for it.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// What one agent's listener serves with.
#[derive(Debug)]
struct Agent {
    run: Box<str>,
    policy: Policy,
    limits: Limits,
}

/// How long the accept loop pauses after a failed `accept` (out of
/// descriptors, say), so the failure does not spin: a back-off, not a
/// wait for an event.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts the agent's connections for as long as the proxy lives.
async fn serve(listener: UnixListener, agent: Arc<Agent>) {
    let places = Arc::new(Semaphore::new(agent.limits.connections));
    loop {
        let mut client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(e) => {
                tracing::warn!(
                    run = &*agent.run,
                    cause = e.to_string().as_str(),
                    "the proxy could not accept a connection"
                );
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            refuse(&agent, None, Reason::TooManyConnections);
            // A refusal's few bytes fit the socket's buffer: never waited on.
            let _ = client.try_write(response(Reason::TooManyConnections).as_bytes());
            continue;
        };
        let agent = agent.clone();
        tokio::spawn(async move {
            carry(&mut client, &agent).await;
            drop(place);
        });
    }
}

/// Logs a refusal: the run, the target when it is known, the reason.
fn refuse(agent: &Agent, target: Option<&Target>, reason: Reason) {
    tracing::warn!(
        run = &*agent.run,
        host = target.map(Target::host_text).as_deref(),
        port = target.map(|t| t.port),
        reason = reason.as_str(),
        "the proxy refused a connection"
    );
}

/// The refusal the client gets.
fn response(reason: Reason) -> String {
    let body = format!("mosaic-bus proxy: {}\n", reason.as_str());
    format!(
        "HTTP/1.1 {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason.status(),
        body.len()
    )
}

/// One client connection: its request head, the checks, the upstream
/// connection, then bytes both ways until either side ends.
async fn carry(client: &mut UnixStream, agent: &Agent) {
    let limits = agent.limits;
    let read = tokio::time::timeout(limits.head_deadline, read_head(client, limits.head)).await;
    let (head, rest) = match read {
        Ok(Head::Whole(head, rest)) => (head, rest),
        // It left before its request was whole: nothing to answer.
        Ok(Head::Left) => return,
        Ok(Head::Refused(reason)) => return answer(client, agent, None, reason).await,
        Err(_) => return answer(client, agent, None, Reason::HeadTimeout).await,
    };
    let request = match Request::parse(&head) {
        Ok(request) => request,
        Err(reason) => return answer(client, agent, None, reason).await,
    };
    let target = request.target;
    let mut upstream = match open(agent, &target).await {
        Ok(upstream) => upstream,
        Err(reason) => return answer(client, agent, Some(&target), reason).await,
    };
    // What the client sent with its head goes on first: for plain HTTP the
    // rewritten head, then whatever followed it in the same reads.
    let tunnel = request.forward.is_none();
    let mut first = request.forward.unwrap_or_default().into_bytes();
    first.extend_from_slice(&rest);
    let opened = if tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
    } else {
        Ok(())
    };
    let opened = match opened {
        Ok(()) => upstream.write_all(&first).await,
        Err(e) => Err(e),
    };
    let (sent, received) = match opened {
        Ok(()) => {
            let (client_in, client_out) = client.split();
            let (upstream_in, upstream_out) = upstream.split();
            tokio::join!(pump(client_in, upstream_out), pump(upstream_in, client_out))
        }
        Err(_) => (0, 0),
    };
    tracing::info!(
        run = &*agent.run,
        host = target.host_text().as_str(),
        port = target.port,
        sent = sent + first.len() as u64,
        received,
        "the proxy carried a connection"
    );
}

/// Copies `from` into `to` until `from` ends or either side fails, then
/// shuts `to` for writing, so its reader sees the end; the bytes copied.
async fn pump(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: impl tokio::io::AsyncWrite + Unpin,
) -> u64 {
    let mut buf = vec![0u8; 16 * 1024];
    let mut copied = 0u64;
    // A failure ends this direction as its end does: the log counts what
    // went through, and the other direction ends on its own.
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        copied += n as u64;
    }
    let _ = to.shutdown().await;
    copied
}

/// Sends the refusal for `reason` and logs it.
async fn answer(client: &mut UnixStream, agent: &Agent, target: Option<&Target>, reason: Reason) {
    refuse(agent, target, reason);
    // The client may be gone already; the log says what it was refused.
    let _ = client.write_all(response(reason).as_bytes()).await;
    let _ = client.shutdown().await;
}

/// What reading a request head gave.
enum Head {
    /// The head (up to its blank line), and what came after it in the same
    /// reads.
    Whole(String, Vec<u8>),
    /// The client left, or its connection failed, before the head was whole.
    Left,
    /// A head past the cap, or not text.
    Refused(Reason),
}

/// Reads a request head up to its blank line, at most `cap` bytes.
async fn read_head(client: &mut UnixStream, cap: usize) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return match String::from_utf8(buf) {
                Ok(head) => Head::Whole(head, rest),
                Err(_) => Head::Refused(Reason::BadRequest),
            };
        }
        if buf.len() > cap {
            return Head::Refused(Reason::HeadTooLarge);
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Head::Left,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A request the proxy understood.
#[derive(Debug)]
struct Request {
    target: Target,
    /// For plain HTTP, the head to send on (origin form, no `Proxy-*`,
    /// `Connection: close`); `None` for `CONNECT`.
    forward: Option<String>,
}

/// The request headers that concern the proxy or the one connection, not
/// the host: dropped before a plain request goes on.
const HOP_HEADERS: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
];

impl Request {
    fn parse(head: &str) -> Result<Request, Reason> {
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let mut words = first.split(' ');
        let (Some(method), Some(uri), Some(version), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(Reason::BadRequest);
        };
        if !matches!(version, "HTTP/1.1" | "HTTP/1.0")
            || method.is_empty()
            || !method.bytes().all(|b| b.is_ascii_uppercase())
        {
            return Err(Reason::BadRequest);
        }
        if method == "CONNECT" {
            let target = Target::parse(uri, None).ok_or(Reason::BadRequest)?;
            return Ok(Request {
                target,
                forward: None,
            });
        }
        let rest = uri.strip_prefix("http://").ok_or(Reason::BadRequest)?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => rest.split_at(at),
            None => (rest, "/"),
        };
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_owned()
        };
        if authority.contains('@') {
            return Err(Reason::BadRequest);
        }
        let target = Target::parse(authority, Some(80)).ok_or(Reason::BadRequest)?;
        let mut forward = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            if !HOP_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)) {
                forward.push_str(line);
                forward.push_str("\r\n");
            }
        }
        forward.push_str("Connection: close\r\n\r\n");
        Ok(Request {
            target,
            forward: Some(forward),
        })
    }
}

/// The upstream connection for `target`, if the agent's policy admits it:
/// an address literal as listed, a name resolved once and connected to at
/// an address that passed the rules.
async fn open(agent: &Agent, target: &Target) -> Result<TcpStream, Reason> {
    let deadline = agent.limits.upstream_deadline;
    let addresses = match (agent.policy.check(target)?, &target.host) {
        (Some(address), _) => vec![address],
        (None, Host::Name(name)) => {
            let resolved = tokio::time::timeout(
                deadline,
                tokio::net::lookup_host((name.as_str(), target.port)),
            )
            .await
            .map_err(|_| Reason::Unresolved)?
            .map_err(|_| Reason::Unresolved)?;
            agent.policy.addresses(resolved)?
        }
        (None, Host::Address(_)) => return Err(Reason::AddressLiteral),
    };
    for address in addresses {
        if let Ok(Ok(stream)) = tokio::time::timeout(deadline, TcpStream::connect(address)).await {
            return Ok(stream);
        }
    }
    Err(Reason::ConnectFailed)
}
