//! The tokio server: the accept loop and the per-connection task described in
//! the parent module.

use std::future::Future;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mosaic_domain::Refusal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::answer::{DirectReply, Disconnect};
pub use super::limits::Limits;
use super::slots::{Budget, Slot};
use super::waiting::{Place, Waiting};

use super::{error_line, MAX_REQUEST};

/// How long the accept loop pauses after a failed `accept` (for example
/// `EMFILE`), so a persistent error does not spin; shutdown still ends the
/// pause at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How many connections the kernel keeps waiting for `accept`. The accept
/// loop takes them in order, so a client that connects behind a flood
/// waits for every connection queued before it: with the kernel's usual
/// 4096 that was most of a second. A short queue keeps that wait short;
/// a client finding it full waits in `connect` for room (our client does,
/// within its timeout) beside the flood, not behind it.
const ACCEPT_BACKLOG: i32 = 128;

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

/// What a connection's first line shows of who sent it, as the handler
/// tells the server ([`Handler::sender`]) before it handles the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// The handler will refuse the line before it knows a caller: not a
    /// request (`bad-request`), or a capability it never issued
    /// (`bad-capability`). The line is answered, then the connection
    /// closes.
    Nobody,
    /// The line presents a capability the handler issued. The connection
    /// is authenticated and stays open for more lines.
    Caller,
    /// As [`Sender::Caller`], for a holder whose connections are also
    /// counted in a [`Budget`] of its own (an agent's run): the connection
    /// takes a slot of it as well, and holds it until it closes. With none
    /// free, the line is answered `broker-unavailable`, unhandled, and the
    /// connection closed, so one holder cannot take every place.
    Counted(Budget),
    /// The line is a human line (its proof is the handler's business).
    /// The connection is authenticated; when every authenticated place is
    /// taken, it is served from the human reserve, for this one line, if
    /// [`Handler::may_use_reserve`] admits its peer.
    Human,
}

/// Answers one request line. One handler serves every connection, each on
/// its own task, so it is shared (`Send + Sync + 'static`); a connection's
/// lines reach it one at a time, each after the previous answer was
/// written, with the same [`Peer`].
///
/// Any `Fn(Peer, Vec<u8>, Disconnect) -> impl Future<Output = Vec<u8>>`
/// closure is a handler, whose every line is [`Sender::Caller`].
pub trait Handler: Send + Sync + 'static {
    /// Says who sent the first line of a connection, before
    /// [`Handler::handle`] gets it; the server asks only for a connection's
    /// first line, and places the connection by the answer (see
    /// [`Sender`] and [`Limits`]).
    ///
    /// It MUST answer [`Sender::Nobody`] for every line the handler will
    /// refuse without naming a caller, MUST NOT answer it for a line whose
    /// caller the handler will name, and MUST answer [`Sender::Human`]
    /// only for a human line. It MUST be cheap and MUST NOT wait: it runs
    /// on the connection's task before the line is handled, and no
    /// refusal is recorded here. The default is [`Sender::Caller`], for
    /// handlers that have no notion of a caller.
    fn sender(&self, peer: Peer, line: &[u8]) -> Sender {
        let _ = (peer, line);
        Sender::Caller
    }

    /// Says whether a human line from `peer` may take a place in the human
    /// reserve ([`Limits::human_reserve`]) when every authenticated place
    /// is taken: the checks that need no proof, such as the peer's
    /// namespaces. A line from a peer that fails them is answered
    /// `broker-unavailable`, so a flood of lines that only claim to be
    /// human (from a sandbox, say) cannot hold the reserve. Asked only
    /// then, on the connection's task: it MUST be cheap and MUST NOT wait.
    /// The default is `false`: a handler that checks nothing gives no
    /// reserve.
    fn may_use_reserve(&self, peer: Peer) -> bool {
        let _ = peer;
        false
    }

    /// Answers the request `line` (its bytes before the `\n`, which are not
    /// checked in any way) from `peer`.
    ///
    /// The returned bytes MUST NOT contain `\n`: the server appends one and
    /// the client reads up to the first. `disconnect` fires when the client
    /// goes away before the answer is written; a handler whose work can be
    /// abandoned (a browser request) SHOULD watch it, and one that commits
    /// something MAY ignore it. A handler whose answer comes from another
    /// thread MAY have that thread write it through
    /// [`Disconnect::direct`]; it MUST then return the same bytes.
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
/// completes, then stops accepting, closes the connections that wait
/// between requests, waits for the requests in flight to be answered (each
/// of those connections then closes too) and returns.
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
    let authenticated = Budget::new(limits.max_connections);
    serve_in(listener, handler, limits, authenticated, shutdown).await
}

/// [`serve_with`], its authenticated connections counted in
/// `authenticated` (whose cap stands for [`Limits::max_connections`]),
/// which the caller keeps a clone of: what else it holds in the same
/// budget (a proxy's descriptors) leaves that many fewer connections.
///
/// # Errors
/// As [`serve_with`].
///
/// # Panics
/// As [`serve_with`].
pub async fn serve_in<H: Handler>(
    listener: std::os::unix::net::UnixListener,
    handler: H,
    limits: Limits,
    authenticated: Budget,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Refusal> {
    // Listening again only sets the accept queue's length (see
    // `ACCEPT_BACKLOG`).
    socket2::SockRef::from(&listener)
        .listen(ACCEPT_BACKLOG)
        .and_then(|()| listener.set_nonblocking(true))
        .map_err(|_| Refusal::BrokerUnavailable)?;
    let listener = UnixListener::from_std(listener).map_err(|_| Refusal::BrokerUnavailable)?;
    let permits = |wanted: usize| wanted.min(Semaphore::MAX_PERMITS);
    let (closing, closing_seen) = watch::channel(false);
    // Every connection task holds a clone of `live` until it is done, so
    // the channel closes when none is left in flight.
    let (live, mut all_done) = mpsc::channel::<()>(1);
    let server = Server {
        handler: Arc::new(handler),
        authenticated,
        reserve: Arc::new(Semaphore::new(permits(limits.human_reserve))),
        waiting: Arc::new(Mutex::new(Waiting::new(
            limits.max_unauthenticated.min(limits.max_connections),
        ))),
        limits,
        closing: closing_seen,
        live,
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
            // Let the new connection's task run before the next accept: on
            // one worker, a backlog accepted in one go would fill the
            // unauthenticated places with tasks that have not read yet.
            tokio::task::yield_now().await;
        } else {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
            }
        }
    }
    drop(listener);
    // Idle connections close now; one whose request is in flight closes
    // once its answer is written.
    closing.send_replace(true);
    let Server { live, .. } = server;
    drop(live);
    let _in_flight_done = all_done.recv().await;
    Ok(())
}

/// What the accept loop shares with every connection task.
struct Server<H> {
    handler: Arc<H>,
    /// The places of authenticated connections ([`Limits::max_connections`]).
    authenticated: Budget,
    /// The human reserve ([`Limits::human_reserve`]).
    reserve: Arc<Semaphore>,
    /// The connections that have not authenticated yet.
    waiting: Arc<Mutex<Waiting>>,
    limits: Limits,
    /// Turns true when the server stops accepting.
    closing: watch::Receiver<bool>,
    /// Cloned into every connection task (see [`serve_with`]).
    live: mpsc::Sender<()>,
}

impl<H: Handler> Server<H> {
    /// Decides about a freshly accepted connection without waiting: refuse
    /// it on the spot, or give it a place among the unauthenticated
    /// connections (perhaps another's) and a task.
    fn admit(&self, stream: UnixStream) {
        let accepted = Instant::now();
        let Ok(credentials) = stream.peer_cred() else {
            // Without the kernel's word on who this is, it is nobody we serve.
            refuse(stream, Refusal::BadCapability);
            return;
        };
        if credentials.uid() != self.limits.peer_uid {
            refuse(stream, Refusal::BadCapability);
            return;
        }
        let peer = Peer {
            uid: credentials.uid(),
            pid: credentials
                .pid()
                .and_then(|pid| u32::try_from(pid).ok())
                .filter(|&pid| pid != 0),
        };
        let Some((place, evicted)) = Waiting::enter(&self.waiting, peer.pid) else {
            // Busy. The request was not read, so nothing happened: exactly
            // what `broker-unavailable` tells a client.
            refuse(stream, Refusal::BrokerUnavailable);
            return;
        };
        let pools = Pools {
            authenticated: self.authenticated.clone(),
            reserve: Arc::clone(&self.reserve),
        };
        let handler = Arc::clone(&self.handler);
        let limits = self.limits;
        let closing = self.closing.clone();
        let live = self.live.clone();
        tokio::spawn(async move {
            let first = First {
                accepted,
                place,
                evicted,
                pools,
            };
            let (stream, held) = connection(stream, peer, &*handler, limits, first, closing).await;
            release(held, stream);
            drop(live);
        });
    }
}

/// The pools a connection moves to once its first line authenticated it.
struct Pools {
    authenticated: Budget,
    reserve: Arc<Semaphore>,
}

/// What a new connection brings to its task.
struct First {
    accepted: Instant,
    place: Place,
    evicted: oneshot::Receiver<()>,
    pools: Pools,
}

/// The place a connection holds, given back when it is dropped.
enum Held {
    /// Among the unauthenticated ones.
    Unauthenticated(#[expect(dead_code, reason = "held for its drop")] Place),
    /// Among the authenticated ones, and its holder's own when it has a
    /// budget.
    Authenticated(
        #[expect(dead_code, reason = "held for its drop")] Slot,
        #[expect(dead_code, reason = "held for its drop")] Option<Slot>,
    ),
    /// In the human reserve.
    Reserve(#[expect(dead_code, reason = "held for its drop")] OwnedSemaphorePermit),
    /// None: the connection was evicted, which freed its place.
    Nothing,
}

/// Frees the place before closing the connection, so a client that has seen
/// its connection end can count on the place being free again.
fn release(held: Held, stream: Option<UnixStream>) {
    drop(held);
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

/// Why no next request line is coming.
enum Unreadable {
    /// More than [`MAX_REQUEST`] bytes without a `\n`.
    TooLarge,
    /// The deadline passed before the line was whole.
    TimedOut,
    /// The stream ended before the `\n`: in the middle of a line, or before
    /// the first line began.
    Ended,
    /// Between requests, nothing of a next line arrived: the stream ended,
    /// the connection stayed silent until the deadline, or the server is
    /// shutting down. The connection is closed without an answer.
    Idle,
    /// The connection failed; nobody is left to answer.
    Broken,
}

/// What a connection has read and not yet handled: the start of its next
/// request line, or more than that, since a client may write several lines
/// before it reads any answer.
#[derive(Default)]
struct Input {
    /// Bytes read and not yet handed to the handler.
    pending: Vec<u8>,
    /// How many of `pending`'s first bytes are known to hold no `\n`, so
    /// a line that arrives a byte at a time is scanned once, not once per
    /// byte.
    scanned: usize,
    /// The client shut down its writing side or closed: nothing follows
    /// `pending`.
    ended: bool,
    /// Reading failed: the connection is broken.
    broken: bool,
}

impl Input {
    /// Takes the next whole line out of `pending` (without its `\n`), if
    /// one is there. `Err` when its first [`MAX_REQUEST`] + 1 bytes hold no
    /// `\n`.
    fn take_line(&mut self) -> Result<Option<Vec<u8>>, Unreadable> {
        let window = self.pending.len().min(MAX_REQUEST + 1);
        let found = self.pending[self.scanned.min(window)..window]
            .iter()
            .position(|&byte| byte == b'\n');
        let Some(offset) = found else {
            if self.pending.len() > MAX_REQUEST {
                return Err(Unreadable::TooLarge);
            }
            self.scanned = window;
            return Ok(None);
        };
        let end = self.scanned.min(window) + offset;
        // The line keeps the buffer's allocation and goes to the handler;
        // what follows it (usually nothing, so no allocation) stays.
        let rest = self.pending.split_off(end + 1);
        let mut line = std::mem::replace(&mut self.pending, rest);
        line.truncate(end);
        self.scanned = 0;
        Ok(Some(line))
    }
}

/// Serves one admitted connection, one request line after another, and
/// gives it back for closing, with the place it holds.
///
/// The first line must be whole by the accept plus the first-line deadline
/// (the shorter of [`Limits::first_line_deadline`] and
/// [`Limits::read_deadline`]); until then the connection may be evicted
/// (answered `broker-unavailable`). The first line's [`Sender`] places
/// the connection: among the authenticated ones, in the human reserve for
/// that one line, or nowhere (answered, then closed). Each next line must
/// be whole by the read deadline counted from the previous answer. A
/// connection that, by then, has sent nothing of a next line is idle and is
/// closed without an answer, as it is when the server shuts down; one that
/// sent part of a line is answered `request-timeout`.
async fn connection<H: Handler>(
    mut stream: UnixStream,
    peer: Peer,
    handler: &H,
    limits: Limits,
    first: First,
    mut closing: watch::Receiver<bool>,
) -> (Option<UnixStream>, Held) {
    let First {
        accepted,
        place,
        mut evicted,
        pools,
    } = first;
    let mut input = Input::default();
    let first_deadline = limits.first_line_deadline.min(limits.read_deadline);
    let mut read_until = accepted
        .checked_add(first_deadline)
        .unwrap_or_else(|| accepted + FAR_FUTURE);
    let first_line = tokio::select! {
        biased;
        Ok(()) = &mut evicted => {
            reply(&mut stream, error_line(Refusal::BrokerUnavailable), limits).await;
            return (Some(stream), Held::Nothing);
        }
        line = read_line(&mut stream, &mut input, read_until, true, &mut closing, limits) => line,
    };
    let Some(line) = first_line else {
        return (Some(stream), Held::Unauthenticated(place));
    };
    place.line_read();
    // Authenticated connections go on after their answer; the others (and
    // the human reserve) carry this one line.
    let (held, mut last) = match handler.sender(peer, &line) {
        Sender::Nobody => (Held::Unauthenticated(place), true),
        sender @ (Sender::Caller | Sender::Counted(_)) => {
            let own = match &sender {
                Sender::Counted(budget) => budget.try_take().map(Some),
                Sender::Caller | Sender::Nobody | Sender::Human => Some(None),
            };
            match (own, pools.authenticated.try_take()) {
                (Some(own), Some(slot)) => {
                    drop(place);
                    (Held::Authenticated(slot, own), false)
                }
                (Some(_) | None, Some(_) | None) => {
                    reply(&mut stream, error_line(Refusal::BrokerUnavailable), limits).await;
                    return (Some(stream), Held::Unauthenticated(place));
                }
            }
        }
        Sender::Human => match pools.authenticated.try_take() {
            Some(slot) => {
                drop(place);
                (Held::Authenticated(slot, None), false)
            }
            None => match reserve(handler, peer, &pools.reserve) {
                Some(slot) => {
                    drop(place);
                    (Held::Reserve(slot), true)
                }
                None => {
                    reply(&mut stream, error_line(Refusal::BrokerUnavailable), limits).await;
                    return (Some(stream), Held::Unauthenticated(place));
                }
            },
        },
    };
    let mut line = Some(line);
    loop {
        let request = match line.take() {
            Some(request) => request,
            None => {
                let next = read_line(
                    &mut stream,
                    &mut input,
                    read_until,
                    false,
                    &mut closing,
                    limits,
                )
                .await;
                let Some(request) = next else {
                    return (Some(stream), held);
                };
                request
            }
        };
        let (back, response, written) = handle(stream, &mut input, peer, handler, request).await;
        let Some(back) = back else {
            return (None, held);
        };
        stream = back;
        if !reply_rest(&mut stream, response, written, limits).await
            || last
            || input.broken
            || *closing.borrow()
        {
            return (Some(stream), held);
        }
        last = false;
        let answered = Instant::now();
        read_until = answered
            .checked_add(limits.read_deadline)
            .unwrap_or_else(|| answered + FAR_FUTURE);
    }
}

/// A place in the human's reserve for a human line from `peer`, if one is
/// free and the handler says the peer may take one
/// ([`Handler::may_use_reserve`]); asked only once every authenticated
/// place is taken, so the handler's checks cost nothing otherwise.
fn reserve<H: Handler>(
    handler: &H,
    peer: Peer,
    reserve: &Arc<Semaphore>,
) -> Option<OwnedSemaphorePermit> {
    if reserve.available_permits() == 0 || !handler.may_use_reserve(peer) {
        return None;
    }
    Arc::clone(reserve).try_acquire_owned().ok()
}

/// Reads the next request line, or answers why there is none (as
/// [`next_line`] reports it) and returns `None`: the connection ends.
async fn read_line(
    stream: &mut UnixStream,
    input: &mut Input,
    until: Instant,
    first: bool,
    closing: &mut watch::Receiver<bool>,
    limits: Limits,
) -> Option<Vec<u8>> {
    match next_line(stream, input, until, first, closing).await {
        Ok(line) => Some(line),
        Err(Unreadable::TooLarge) => {
            refuse_unread(stream, Refusal::RequestTooLarge, limits).await;
            None
        }
        Err(Unreadable::TimedOut) => {
            refuse_unread(stream, Refusal::RequestTimeout, limits).await;
            None
        }
        Err(Unreadable::Ended) => {
            reply(stream, error_line(Refusal::BadRequest), limits).await;
            None
        }
        Err(Unreadable::Idle | Unreadable::Broken) => None,
    }
}

/// Reads until `input` holds a whole request line, and takes it out.
///
/// Never buffers more than [`MAX_REQUEST`] + 1 bytes of one line, so an
/// oversized line is refused without reading its rest. Between requests
/// (`first` false) and with nothing of the next line read yet, the end of
/// the stream, the deadline and the server's shutdown all mean the client
/// is done: [`Unreadable::Idle`].
async fn next_line(
    stream: &mut UnixStream,
    input: &mut Input,
    until: Instant,
    first: bool,
    closing: &mut watch::Receiver<bool>,
) -> Result<Vec<u8>, Unreadable> {
    // On the heap, not in the future, and only while a line is being read:
    // a connection's task keeps the size of its largest state while its
    // handler waits (a `changes` wait holds a connection for up to 120 s).
    let mut chunk = Vec::new();
    loop {
        if let Some(line) = input.take_line()? {
            return Ok(line);
        }
        let idle = !first && input.pending.is_empty();
        if input.ended {
            return Err(if idle {
                Unreadable::Idle
            } else {
                Unreadable::Ended
            });
        }
        if chunk.is_empty() {
            chunk = vec![0u8; READ_CHUNK];
        }
        // At most one byte past the limit: enough to know it was exceeded.
        let room = (MAX_REQUEST + 1 - input.pending.len()).min(READ_CHUNK);
        let read = tokio::time::timeout_at(until, stream.read(&mut chunk[..room]));
        let read = if idle {
            tokio::select! {
                biased;
                _ = closing.wait_for(|closing| *closing) => return Err(Unreadable::Idle),
                read = read => read,
            }
        } else {
            read.await
        };
        match read {
            Ok(Ok(0)) => input.ended = true,
            Ok(Ok(read)) => input.pending.extend_from_slice(&chunk[..read]),
            Ok(Err(_)) => return Err(Unreadable::Broken),
            Err(_elapsed) if idle => return Err(Unreadable::Idle),
            Err(_elapsed) => return Err(Unreadable::TimedOut),
        }
    }
}

/// Runs the handler on `line` and returns its answer, reading the
/// connection meanwhile: bytes are the client's next lines, kept in
/// `input` (at most [`MAX_REQUEST`] + 1 of them ahead, then reading pauses
/// until they are handled); the end of the stream or an error fires the
/// [`Disconnect`] signal, at once when it was seen before. Returns the
/// answer and how much of it (and its `\n`) went straight to the socket
/// through the request's [`DirectReply`], with the connection given back
/// (`None` only if the loan had kept a handle on it, which it never does).
async fn handle<H: Handler>(
    stream: UnixStream,
    input: &mut Input,
    peer: Peer,
    handler: &H,
    line: Vec<u8>,
) -> (Option<UnixStream>, Vec<u8>, usize) {
    let (gone_sender, gone) = watch::channel(input.ended || input.broken);
    let stream = Arc::new(stream);
    // The loan ends, and lets go of its handle, before `stream` is given
    // back or closed: when the handler returns, or when this future is
    // dropped.
    let (direct, loan) = DirectReply::lend(Arc::clone(&stream));
    let direct = Some(direct);
    let answer = handler.handle(peer, line, Disconnect { gone, direct });
    let mut answer = std::pin::pin!(answer);
    let mut scratch = [0u8; 512];
    let mut watching = !input.ended && !input.broken && input.pending.len() <= MAX_REQUEST;
    loop {
        tokio::select! {
            response = &mut answer => {
                let written = loan.end();
                return (Arc::into_inner(stream), response, written);
            }
            read = read_shared(&stream, &mut scratch), if watching => match read {
                Ok(0) => {
                    input.ended = true;
                    watching = false;
                    gone_sender.send_replace(true);
                }
                Ok(read) => {
                    input.pending.extend_from_slice(&scratch[..read]);
                    watching = input.pending.len() <= MAX_REQUEST;
                }
                Err(_) => {
                    input.broken = true;
                    watching = false;
                    gone_sender.send_replace(true);
                }
            },
        }
    }
}

/// One read of a connection that a [`DirectReply`] shares, as
/// `AsyncReadExt::read` is of one that nothing shares.
async fn read_shared(stream: &UnixStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            read => return read,
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

/// Writes `line` and its `\n`; whether it was written whole. A client that
/// is gone or does not read within the write deadline only loses its
/// answer, and its connection.
async fn reply(stream: &mut UnixStream, line: Vec<u8>, limits: Limits) -> bool {
    reply_rest(stream, line, 0, limits).await
}

/// As [`reply`], past the first `written` bytes, which went already.
async fn reply_rest(
    stream: &mut UnixStream,
    mut line: Vec<u8>,
    written: usize,
    limits: Limits,
) -> bool {
    line.push(b'\n');
    let rest = line.get(written..).unwrap_or_default();
    matches!(
        tokio::time::timeout(limits.write_deadline, stream.write_all(rest)).await,
        Ok(Ok(()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of `cap` places and the places taken in it, each with its
    /// eviction signal, kept alive as a connection task would keep them.
    struct Pool {
        waiting: Arc<Mutex<Waiting>>,
        taken: Vec<(Option<u32>, Place, oneshot::Receiver<()>)>,
    }

    impl Pool {
        fn new(cap: usize) -> Pool {
            Pool {
                waiting: Arc::new(Mutex::new(Waiting::new(cap))),
                taken: Vec::new(),
            }
        }

        /// Whether a connection of `pid` got a place.
        fn enter(&mut self, pid: u32) -> bool {
            match Waiting::enter(&self.waiting, Some(pid)) {
                Some((place, evicted)) => {
                    self.taken.push((Some(pid), place, evicted));
                    true
                }
                None => false,
            }
        }

        /// The pids of the places evicted since the last call, in the order
        /// taken.
        fn evicted(&mut self) -> Vec<Option<u32>> {
            self.taken
                .iter_mut()
                .filter_map(|(pid, _, evicted)| evicted.try_recv().is_ok().then_some(*pid))
                .collect()
        }
    }

    #[test]
    fn one_process_cannot_take_more_than_the_pool_and_another_still_gets_in() {
        let mut pool = Pool::new(3);
        assert!((0..3).all(|_| pool.enter(7)));
        // The flooding process is refused once it holds every place.
        assert!(!pool.enter(7));
        assert_eq!(pool.evicted(), []);
        // A process holding none takes the oldest place of the flood.
        assert!(pool.enter(8));
        assert_eq!(pool.evicted(), [Some(7)]);
        // The pool balances: a process gives way to one that holds less,
        // never to one that holds as much.
        assert!(pool.enter(8));
        assert_eq!(pool.evicted(), [Some(7)]);
        assert!(!pool.enter(8));
        assert!(pool.enter(7));
        assert_eq!(pool.evicted(), [Some(8)]);
    }

    #[test]
    fn a_connection_whose_line_was_read_is_never_evicted() {
        let mut pool = Pool::new(2);
        assert!(pool.enter(7) && pool.enter(7));
        for (_, place, _) in &pool.taken {
            place.line_read();
        }
        assert!(!pool.enter(8));
        assert_eq!(pool.evicted(), []);
    }

    #[test]
    fn a_place_given_back_is_free_again() {
        let mut pool = Pool::new(1);
        assert!(pool.enter(7));
        pool.taken.clear();
        assert!(pool.enter(7));
    }
}
