//! What a handler gets beside its request line: the [`Disconnect`] signal,
//! and a [`DirectReply`], the connection lent to whichever thread ends up
//! holding the answer, so it can write the answer itself instead of waking
//! the connection's task to do it.

use std::io::IoSlice;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::UnixStream;
use tokio::sync::watch;

/// Fires when the client goes away before its reply was written.
///
/// The server keeps reading a connection while its handler works; the
/// request is complete, so what it can still see is the client's next
/// lines (kept for later), the end of the stream (the client closed, or
/// shut down its writing side) or an error (the connection was reset).
/// The end or an error fires the signal, and it has fired already for a
/// line handled after the end was seen (a client that wrote several lines
/// and then half-closed). A client therefore keeps its connection open,
/// both ways, until it has its answer; our [`Client`] and [`Session`] do.
/// A handler that ignores the signal still gets its reply written, so a
/// client that only half-closed still reads it. While more than
/// [`MAX_REQUEST`] bytes of later lines wait unhandled, the server stops
/// reading, and so does not see the client leave until it reads again.
///
/// If the reply is written first the signal never fires.
///
/// It also carries the request's [`DirectReply`] ([`Disconnect::direct`]).
///
/// [`Client`]: mosaic_client::socket::Client
/// [`Session`]: mosaic_client::socket::Session
/// [`MAX_REQUEST`]: super::MAX_REQUEST
#[derive(Debug, Clone)]
pub struct Disconnect {
    pub(super) gone: watch::Receiver<bool>,
    pub(super) direct: Option<DirectReply>,
}

impl Disconnect {
    /// A signal that never fires, for handlers called without a socket (an
    /// in-process host, a test); it lends no connection.
    pub fn never() -> Disconnect {
        let (_sender, gone) = watch::channel(false);
        Disconnect { gone, direct: None }
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

    /// The request's connection, lent for its answer; `None` without a
    /// socket.
    pub fn direct(&self) -> Option<&DirectReply> {
        self.direct.as_ref()
    }
}

/// One request's connection, lent until its handler returns, so the thread
/// that has the answer writes it straight to the socket (one `sendmsg`,
/// never blocking) and the client need not wait for the connection's task
/// to wake first.
///
/// The handler MUST still return the very bytes it wrote: the server writes
/// whatever of them (and of their `\n`) the socket did not take at once,
/// and the whole line when nothing was written. Only the first
/// [`DirectReply::write_now`] of a request writes. Once the handler has
/// returned (or was dropped) the loan is over and a late write does
/// nothing: the loan's handle on the connection is gone with it, so a
/// late holder of a [`DirectReply`] never keeps the connection open.
#[derive(Debug, Clone)]
pub struct DirectReply {
    lease: Arc<Mutex<Lease>>,
}

#[derive(Debug)]
struct Lease {
    /// The connection while it is lent.
    stream: Option<Arc<UnixStream>>,
    /// Whether this request's one direct write happened.
    used: bool,
    /// How many bytes of the line and its `\n` the socket took.
    written: usize,
}

impl DirectReply {
    /// Lends `stream` for one request; the [`Loan`] ends it.
    pub(super) fn lend(stream: Arc<UnixStream>) -> (DirectReply, Loan) {
        let lease = Arc::new(Mutex::new(Lease {
            stream: Some(stream),
            used: false,
            written: 0,
        }));
        (
            DirectReply {
                lease: Arc::clone(&lease),
            },
            Loan { lease },
        )
    }

    /// Writes `line` and its `\n`, as much as the socket takes now without
    /// blocking; the server writes the rest once the handler returns the
    /// same `line`. Does nothing after the first call, or once the loan is
    /// over.
    pub fn write_now(&self, line: &str) {
        let mut lease = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        if lease.used {
            return;
        }
        let written = match &lease.stream {
            Some(stream) => send_line(stream, line.as_bytes()),
            None => return,
        };
        lease.used = true;
        lease.written = written;
    }
}

/// The server's side of a [`DirectReply`]: ends the loan when dropped.
pub(super) struct Loan {
    lease: Arc<Mutex<Lease>>,
}

impl Loan {
    /// Ends the loan; how many bytes of the line and its `\n` were written.
    pub(super) fn end(self) -> usize {
        let mut lease = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        lease.stream = None;
        lease.written
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stream = None;
    }
}

/// One non-blocking `sendmsg` of `line` and `\n` to `stream`; how many
/// bytes went (0 on any error: the server then tries, and sees the error
/// itself).
fn send_line(stream: &UnixStream, line: &[u8]) -> usize {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendFlags};
    let parts = [IoSlice::new(line), IoSlice::new(b"\n")];
    sendmsg(
        stream,
        &parts,
        &mut SendAncillaryBuffer::default(),
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
    )
    .unwrap_or(0)
}
