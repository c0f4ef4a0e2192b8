//! The tokio server: the accept loop and the per-connection task described in
//! the parent module.

use std::future::Future;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use mosaic_domain::Refusal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::{
    effective_uid, error_line, DRAIN_DEADLINE, MAX_CONNECTIONS, MAX_DRAIN, MAX_REQUEST,
    READ_DEADLINE, WRITE_DEADLINE,
};

/// How long the accept loop pauses after a failed `accept` (for example
/// `EMFILE`), so a persistent error does not spin; shutdown still ends the
/// pause at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Stands in for a deadline too far away to represent.
const FAR_FUTURE: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// The size of the buffer a request is read through.
const READ_CHUNK: usize = 8 * 1024;

/// Who is on the other end of a connection, as the kernel reported it at
/// accept (`SO_PEERCRED`), never as the client claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The peer's uid; always the broker's own effective uid, since other
    /// peers are refused before any handler sees them.
    pub uid: u32,
    /// The pid of the process that connected, or `None` when the kernel
    /// could not name it (a process in another pid namespace shows as 0).
    pub pid: Option<u32>,
}

/// The server's limits. [`Limits::default`] gives the wire contract's
/// values; tests shorten the deadlines instead of waiting seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection has, from its accept, to deliver its whole
    /// request line ([`READ_DEADLINE`], 5 s). A slow or silent client gets
    /// `request-timeout` and cannot hold its slot longer.
    pub read_deadline: Duration,
    /// How long the server waits for a client to take its response
    /// ([`WRITE_DEADLINE`], 5 s), so a client that never reads cannot hold
    /// its slot either. The handler's own time is not limited here.
    pub write_deadline: Duration,
    /// How many connections are served at once ([`MAX_CONNECTIONS`], 512).
    /// Beyond it a new connection is answered `broker-unavailable` and
    /// closed unread.
    pub max_connections: usize,
    /// How many bytes of a refused request are still read and discarded
    /// after the answer ([`MAX_DRAIN`], 16 MiB), so the client can finish
    /// writing and read the answer.
    pub drain_limit: usize,
    /// How long that draining may take ([`DRAIN_DEADLINE`], 2 s).
    pub drain_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_deadline: READ_DEADLINE,
            write_deadline: WRITE_DEADLINE,
            max_connections: MAX_CONNECTIONS,
            drain_limit: MAX_DRAIN,
            drain_deadline: DRAIN_DEADLINE,
        }
    }
}

/// Fires when the client goes away before its reply was written.
///
/// The server keeps reading a connection while its handler works; the
/// request is complete, so what it can still see is the end of the stream
/// (the client closed, or shut down its writing side) or an error (the
/// connection was reset). Either fires the signal. A client therefore keeps
/// its connection open, both ways, until it has its answer; our [`Client`]
/// does. A handler that ignores the signal still gets its reply written, so
/// a client that only half-closed still reads it.
///
/// If the reply is written first the signal never fires.
///
/// [`Client`]: super::Client
#[derive(Debug, Clone)]
pub struct Disconnect {
    gone: watch::Receiver<bool>,
}

impl Disconnect {
    /// A signal that never fires, for handlers called without a socket (an
    /// in-process host, a test).
    pub fn never() -> Disconnect {
        let (_sender, gone) = watch::channel(false);
        Disconnect { gone }
    }

    /// Whether the client has gone away.
    pub fn is_disconnected(&self) -> bool {
        *self.gone.borrow()
    }

    /// Completes when the client has gone away; never completes for a
    /// connection that ends normally.
    pub async fn disconnected(&self) {
        let mut gone = self.gone.clone();
        if gone.wait_for(|gone| *gone).await.is_err() {
            // The connection ended with its reply written: no disconnect
            // will ever come.
            std::future::pending::<()>().await;
        }
    }
}

/// Answers one request line. One handler serves every connection, each on
/// its own task, so it is shared (`Send + Sync + 'static`).
///
/// Any `Fn(Peer, Vec<u8>, Disconnect) -> impl Future<Output = Vec<u8>>`
/// closure is a handler.
pub trait Handler: Send + Sync + 'static {
    /// Answers the request `line` (its bytes before the `\n`, which are not
    /// checked in any way) from `peer`.
    ///
    /// The returned bytes MUST NOT contain `\n`: the server appends one and
    /// the client reads up to the first. `disconnect` fires when the client
    /// goes away before the answer is written; a handler whose work can be
    /// abandoned (a browser request) SHOULD watch it, and one that commits
    /// something MAY ignore it.
    fn handle(
        &self,
        peer: Peer,
        line: Vec<u8>,
        disconnect: Disconnect,
    ) -> impl Future<Output = Vec<u8>> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Peer, Vec<u8>, Disconnect) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<u8>> + Send,
{
    fn handle(
        &self,
        peer: Peer,
        line: Vec<u8>,
        disconnect: Disconnect,
    ) -> impl Future<Output = Vec<u8>> + Send {
        self(peer, line, disconnect)
    }
}

/// [`serve_with`] with [`Limits::default`].
///
/// # Errors
/// As [`serve_with`].
pub async fn serve<H: Handler>(
    listener: std::os::unix::net::UnixListener,
    handler: H,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Refusal> {
    serve_with(listener, handler, Limits::default(), shutdown).await
}

/// Serves `listener` (from [`bind_private`]) with `handler` until `shutdown`
/// completes, then stops accepting, waits for the connections in flight to
/// finish, and returns.
///
/// See the parent module for what happens to each connection. Errors of one
/// connection end that connection only; a failed `accept` is retried after
/// a short pause. Dropping the listener when accepting stops makes new
/// clients fail to connect (`broker-unavailable`); the socket file stays,
/// for the broker's close to remove.
///
/// # Errors
/// `broker-unavailable` when the listener cannot be put into non-blocking
/// mode or registered with the runtime; nothing is served then.
///
/// # Panics
/// When polled outside a tokio runtime with I/O and time enabled (tokio's
/// own rule for its sockets and timers).
///
/// [`bind_private`]: super::bind_private
pub async fn serve_with<H: Handler>(
    listener: std::os::unix::net::UnixListener,
    handler: H,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Refusal> {
    listener
        .set_nonblocking(true)
        .map_err(|_| Refusal::BrokerUnavailable)?;
    let listener = UnixListener::from_std(listener).map_err(|_| Refusal::BrokerUnavailable)?;
    // Capped so that `acquire_many` below can name every slot at once.
    let slots_total = limits
        .max_connections
        .min(Semaphore::MAX_PERMITS)
        .min(usize::try_from(u32::MAX).unwrap_or(usize::MAX));
    let server = Server {
        handler: Arc::new(handler),
        slots: Arc::new(Semaphore::new(slots_total)),
        limits,
        broker_uid: effective_uid(),
    };
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        if let Ok((stream, _address)) = accepted {
            server.admit(stream);
        } else {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
            }
        }
    }
    drop(listener);
    // Every connection task holds one slot until it is done, so holding all
    // of them means none is left in flight.
    let all = u32::try_from(slots_total).unwrap_or(u32::MAX);
    let _in_flight_done = server.slots.acquire_many(all).await;
    Ok(())
}

/// What the accept loop shares with every connection task.
struct Server<H> {
    handler: Arc<H>,
    slots: Arc<Semaphore>,
    limits: Limits,
    broker_uid: u32,
}

impl<H: Handler> Server<H> {
    /// Decides about a freshly accepted connection without waiting: refuse
    /// it on the spot, or give it a slot and a task.
    fn admit(&self, stream: UnixStream) {
        let accepted = Instant::now();
        let read_until = accepted
            .checked_add(self.limits.read_deadline)
            .unwrap_or_else(|| accepted + FAR_FUTURE);
        let Ok(credentials) = stream.peer_cred() else {
            // Without the kernel's word on who this is, it is nobody we serve.
            refuse(stream, Refusal::BadCapability);
            return;
        };
        if credentials.uid() != self.broker_uid {
            refuse(stream, Refusal::BadCapability);
            return;
        }
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            // Busy. The request was not read, so nothing happened: exactly
            // what `broker-unavailable` tells a client.
            refuse(stream, Refusal::BrokerUnavailable);
            return;
        };
        let peer = Peer {
            uid: credentials.uid(),
            pid: credentials
                .pid()
                .and_then(|pid| u32::try_from(pid).ok())
                .filter(|&pid| pid != 0),
        };
        let handler = Arc::clone(&self.handler);
        let limits = self.limits;
        tokio::spawn(async move {
            let stream = connection(stream, peer, &*handler, limits, read_until).await;
            release(slot, stream);
        });
    }
}

/// Frees the slot before closing the connection, so a client that has seen
/// its connection end can count on the slot being free again.
fn release(slot: OwnedSemaphorePermit, stream: UnixStream) {
    drop(slot);
    drop(stream);
}

/// Writes one error line to a connection that gets no task, and closes it.
///
/// The write never waits: the line is far smaller than an empty socket
/// buffer, and a peer whose buffer is somehow full loses nothing but the
/// explanation. The request is never read.
fn refuse(stream: UnixStream, refusal: Refusal) {
    if let Ok(stream) = stream.into_std() {
        let mut line = error_line(refusal);
        line.push(b'\n');
        let _ = (&stream).write(&line);
    }
}

/// Why no request line could be read.
enum Unreadable {
    /// More than [`MAX_REQUEST`] bytes without a `\n`.
    TooLarge,
    /// The stream ended before the `\n`.
    Ended,
    /// The connection failed; nobody is left to answer.
    Broken,
}

/// Serves one admitted connection and gives it back for closing.
async fn connection<H: Handler>(
    mut stream: UnixStream,
    peer: Peer,
    handler: &H,
    limits: Limits,
    read_until: Instant,
) -> UnixStream {
    let line = match tokio::time::timeout_at(read_until, read_request(&mut stream)).await {
        Ok(Ok(line)) => line,
        Ok(Err(Unreadable::TooLarge)) => {
            refuse_unread(&mut stream, Refusal::RequestTooLarge, limits).await;
            return stream;
        }
        Ok(Err(Unreadable::Ended)) => {
            reply(&mut stream, error_line(Refusal::BadRequest), limits).await;
            return stream;
        }
        Ok(Err(Unreadable::Broken)) => return stream,
        Err(_elapsed) => {
            refuse_unread(&mut stream, Refusal::RequestTimeout, limits).await;
            return stream;
        }
    };

    let (gone_sender, gone) = watch::channel(false);
    let answer = handler.handle(peer, line, Disconnect { gone });
    let mut answer = std::pin::pin!(answer);
    let mut scratch = [0u8; 512];
    let mut watching = true;
    let response = loop {
        tokio::select! {
            response = &mut answer => break response,
            read = stream.read(&mut scratch), if watching => {
                // Bytes after the request line mean nothing and are
                // dropped; the end of the stream or an error means the
                // client is gone.
                if !matches!(read, Ok(n) if n > 0) {
                    watching = false;
                    gone_sender.send_replace(true);
                }
            }
        }
    };
    reply(&mut stream, response, limits).await;
    stream
}

/// Reads one request line: its bytes before the first `\n`, at most
/// [`MAX_REQUEST`] of them. Never reads more than `MAX_REQUEST + 1` bytes,
/// so an oversized line is refused without buffering its rest.
async fn read_request(stream: &mut UnixStream) -> Result<Vec<u8>, Unreadable> {
    let mut line = Vec::new();
    // On the heap, not in the future: a connection's task keeps the size of
    // its largest state while its handler waits (a `changes` wait holds a
    // connection for up to 120 s).
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        // At most one byte past the limit: enough to know it was exceeded.
        let room = (MAX_REQUEST + 1 - line.len()).min(READ_CHUNK);
        let read = match stream.read(&mut chunk[..room]).await {
            Ok(0) => return Err(Unreadable::Ended),
            Ok(read) => read,
            Err(_) => return Err(Unreadable::Broken),
        };
        let got = &chunk[..read];
        if let Some(end) = got.iter().position(|&byte| byte == b'\n') {
            line.extend_from_slice(&got[..end]);
            return Ok(line);
        }
        line.extend_from_slice(got);
        if line.len() > MAX_REQUEST {
            return Err(Unreadable::TooLarge);
        }
    }
}

/// Answers a request refused before its line was read to the end, so that
/// the answer survives the close.
///
/// Closing a connection whose input is still queued makes the kernel reset
/// it: a client still writing its line then fails to write (`ECONNRESET`,
/// `EPIPE`) before it ever reads, and cannot tell "refused" from "lost". So
/// the answer goes out first, then our writing side is shut down (the
/// client reads the answer and then the end of the stream), and what the
/// client still sends is read and thrown away, never parsed, until it
/// closes, or [`Limits::drain_limit`] bytes or [`Limits::drain_deadline`]
/// have passed. The connection keeps its slot while it drains; the bounds
/// keep that cheap.
async fn refuse_unread(stream: &mut UnixStream, refusal: Refusal, limits: Limits) {
    reply(stream, error_line(refusal), limits).await;
    if stream.shutdown().await.is_err() {
        // The client is gone already; there is nobody to drain for.
        return;
    }
    let _ = tokio::time::timeout(limits.drain_deadline, drain(stream, limits.drain_limit)).await;
}

/// Reads and discards up to `limit` bytes, until the end of the stream or
/// an error.
async fn drain(stream: &mut UnixStream, limit: usize) {
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut left = limit;
    while left > 0 {
        match stream.read(&mut chunk[..left.min(READ_CHUNK)]).await {
            Ok(0) | Err(_) => return,
            Ok(read) => left = left.saturating_sub(read),
        }
    }
}

/// Writes `line` and its `\n`. A client that is gone or does not read
/// within the write deadline only loses its answer.
async fn reply(stream: &mut UnixStream, mut line: Vec<u8>, limits: Limits) {
    line.push(b'\n');
    let _ = tokio::time::timeout(limits.write_deadline, stream.write_all(&line)).await;
}
