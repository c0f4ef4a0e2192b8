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
//! form with `Connection: close`, so one connection carries one host, and
//! with a `Host` made from its target in place of the client's, so an
//! admitted request never names another host. Heads are parsed with
//! `httparse`; a tunnel's bytes are copied by
//! `tokio::io::copy_bidirectional`.
//! Either way the target must pass the agent's [`Policy`]: a name that an
//! `"allow"` entry admits, with its port, resolved once here and connected
//! to at an address that passed the address rules ([`admit::is_public`],
//! the domain's one rule, or listed exactly); an address literal only when listed exactly. The proxy
//! never resolves the name twice, so a name cannot change its answer
//! between the check and the connection.
//!
//! Each connection is logged when it ends (run, host, port, bytes each
//! way), and each refusal with its static reason ([`Reason`]), which the
//! client also gets as an HTTP status and a one-line body. Bounded: the
//! request's head is capped ([`Limits::head`], and [`MAX_HEADERS`] fields)
//! and must arrive before a deadline ([`Limits::head_deadline`]), and each
//! agent has at most
//! [`Limits::connections`] at once; a client that sends half a request
//! and leaves frees its place as it goes. Each connection also takes two
//! places of the run's budget and the broker's ([`RunPlaces`]: its
//! client's descriptor and its upstream's), the budget its connections to
//! the broker count in, so an agent that opens proxy connections without
//! end runs out of its own places, never the broker's descriptors for the
//! other agents, the reader or the human.
//!
//! The proxy runs on a tokio runtime of its own (one worker thread), apart
//! from `up`'s, which only turns while `up` waits for signals.
//!
//! [`admit`] holds the address rules; `proxy/tests.rs` runs the proxy on
//! real sockets.

mod admit;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::commands::team::Allow;
use crate::runtime::RunPlaces;
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
    /// `allow` lists, each connection taking two of `places` (its client's
    /// descriptor and its upstream's) while it lasts, when given; returns
    /// the socket's path, for the sandbox to bind.
    pub(crate) fn listen(
        &self,
        run: &str,
        allow: &[Allow],
        places: Option<RunPlaces>,
    ) -> std::io::Result<PathBuf> {
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
            places,
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
    /// The run's places and the broker's, which its connections take.
    places: Option<RunPlaces>,
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
        let taken = places
            .clone()
            .try_acquire_owned()
            .ok()
            .and_then(|place| match &agent.places {
                Some(budget) => {
                    let both = (budget.try_take()?, budget.try_take()?);
                    Some((place, Some(both)))
                }
                None => Some((place, None)),
            });
        let Some(held) = taken else {
            refuse(&agent, None, Reason::TooManyConnections);
            // A refusal's few bytes fit the socket's buffer: never waited on.
            let _ = client.try_write(response(Reason::TooManyConnections).as_bytes());
            continue;
        };
        let agent = agent.clone();
        tokio::spawn(async move {
            carry(&mut client, &agent).await;
            drop(held);
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
    let (request, rest) = match read {
        Ok(Head::Whole(request, rest)) => (request, rest),
        // It left before its request was whole: nothing to answer.
        Ok(Head::Left) => return,
        Ok(Head::Refused(reason)) => return answer(client, agent, None, reason).await,
        Err(_) => return answer(client, agent, None, Reason::HeadTimeout).await,
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
    let mut client = Counted::new(client);
    let mut upstream = Counted::new(&mut upstream);
    if opened.is_ok() {
        // Each side's end shuts the other's writing side; a failure of
        // either ends both, and the log counts what went through.
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
    tracing::info!(
        run = &*agent.run,
        host = target.host_text().as_str(),
        port = target.port,
        sent = upstream.written + first.len() as u64,
        received = client.written,
        "the proxy carried a connection"
    );
}

/// A stream that counts the bytes written to it, so a copy that fails
/// still tells how much went through.
struct Counted<'a, S> {
    stream: &'a mut S,
    written: u64,
}

impl<'a, S> Counted<'a, S> {
    fn new(stream: &'a mut S) -> Self {
        Counted { stream, written: 0 }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut *self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            self.written += n as u64;
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.stream).poll_shutdown(cx)
    }
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
    /// The request, and what came after its head in the same reads.
    Whole(Request, Vec<u8>),
    /// The client left, or its connection failed, before the head was whole.
    Left,
    /// A head past the cap, not text, or not a request the proxy serves.
    Refused(Reason),
}

/// Reads a request head up to its blank line, at most `cap` bytes, and
/// parses it.
async fn read_head(client: &mut UnixStream, cap: usize) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        match Request::parse(&buf) {
            Ok(Some((request, len))) => return Head::Whole(request, buf.split_off(len)),
            Ok(None) => {}
            Err(reason) => return Head::Refused(reason),
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
    /// For plain HTTP, the head to send on (origin form, the target's
    /// `Host`, no `Proxy-*`, `Connection: close`); `None` for `CONNECT`.
    forward: Option<String>,
}

/// The most header fields a request head may have; more is refused as a
/// head too large.
const MAX_HEADERS: usize = 128;

/// The request headers that concern the proxy or the one connection, not
/// the host, and the client's `Host`, which the target replaces: dropped
/// before a plain request goes on.
const DROPPED_HEADERS: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
];

impl Request {
    /// The request whose head `buf` begins with, and the head's length;
    /// `None` while the head is not whole.
    fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, Reason> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut head = httparse::Request::new(&mut headers);
        let len = match head.parse(buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Reason::HeadTooLarge),
            Err(_) => return Err(Reason::BadRequest),
        };
        let text = |bytes| std::str::from_utf8(bytes).map_err(|_| Reason::BadRequest);
        text(&buf[..len])?;
        let (Some(method), Some(uri), Some(version)) = (head.method, head.path, head.version)
        else {
            return Err(Reason::BadRequest);
        };
        let version = match version {
            0 => "HTTP/1.0",
            1 => "HTTP/1.1",
            _ => return Err(Reason::BadRequest),
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(Reason::BadRequest);
        }
        if method == "CONNECT" {
            let target = Target::parse(uri, None).ok_or(Reason::BadRequest)?;
            let request = Request {
                target,
                forward: None,
            };
            return Ok(Some((request, len)));
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
        // The target names the host (RFC 9112 §3.2.2): the client's `Host`
        // is not sent on, whatever it said.
        let mut forward = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
        for header in head.headers.iter() {
            if DROPPED_HEADERS
                .iter()
                .any(|dropped| header.name.eq_ignore_ascii_case(dropped))
            {
                continue;
            }
            forward.push_str(header.name);
            forward.push_str(": ");
            forward.push_str(text(header.value)?);
            forward.push_str("\r\n");
        }
        forward.push_str("Connection: close\r\n\r\n");
        Ok(Some((
            Request {
                target,
                forward: Some(forward),
            },
            len,
        )))
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
