//! The synchronous session: a [`Client`] whose calls share connections
//! kept open between them, so a long-lived caller (the MCP server, `views`)
//! pays for one connect instead of one per call.

use std::fmt;
use std::mem::MaybeUninit;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use mosaic_domain::Refusal;
use serde_json::Value;
use socket2::Socket;

use super::client::{connect, deadline_after, read_line, send_all, time_left, with_newline};
use super::{parse_response, Client, READ_DEADLINE};

/// How long a kept connection may have been idle and still carry the next
/// call: a second short of the broker's idle deadline ([`READ_DEADLINE`],
/// counted from the moment it wrote the answer, which is before this side
/// read it), so the broker does not close it while the request is on its
/// way. An older one is closed and a new one made.
const REUSE_WITHIN: Duration = READ_DEADLINE.saturating_sub(Duration::from_secs(1));

/// How many idle connections a session keeps. Calls that overlap (an MCP
/// client may run a `changes` wait beside other tools) each need their own;
/// one caller calling in turn only ever uses one.
const KEEP_AT_MOST: usize = 4;

/// The refusals after which the broker may close the connection (or has
/// already): `request-too-large` and `request-timeout` end it, and
/// `broker-unavailable` (no free slot) and `bad-capability` (a peer of
/// another uid) are said to a connection that is closed unread. After one
/// of them the connection is not kept; for any other answer it stays open.
const ENDS_CONNECTION: [Refusal; 4] = [
    Refusal::RequestTooLarge,
    Refusal::RequestTimeout,
    Refusal::BrokerUnavailable,
    Refusal::BadCapability,
];

/// A client of the broker's socket that keeps its connections open between
/// calls: one request line after another on the same connection, one
/// answer each, as the wire allows.
///
/// Every call has the timeouts, limits and codes of [`Client`] (whose
/// capability it presents on every request line, since nothing is bound
/// to a connection). What differs is where a call goes:
///
/// - to the connection the previous call left open, if the broker has not
///   closed it (checked without waiting before it is used) and it has been
///   idle for less than the broker's idle deadline less a second;
///   otherwise to a new connection;
/// - when the broker closed a kept connection before the request line was
///   sent whole, the broker cannot have read it, so it goes to a new
///   connection instead: a transparent reconnect;
/// - once the whole line was sent, nothing is ever sent again: a
///   connection that then ends, fails or times out before the answer is
///   `outcome-unknown`, exactly as with [`Client`], and is closed.
///
/// A connection is kept only after a whole answer with nothing after it
/// and not one of the refusals after which the broker closes. Calls from
/// several threads at once each take a connection of their own; at most
/// four idle ones are kept. Its `Debug` form never shows the capability.
pub struct Session {
    client: Client,
    kept: Mutex<Vec<Kept>>,
}

/// An idle connection and since when it is idle.
struct Kept {
    socket: Socket,
    since: Instant,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// How sending a request on a kept connection went.
enum Sent {
    /// The whole line, `\n` included, is on its way.
    Whole,
    /// The connection failed before the whole line was sent: the broker
    /// closed it. It cannot have read the request.
    Closed,
    /// The call's time ran out before the whole line was sent.
    TimedOut,
}

impl Session {
    /// A session of `client`'s socket and capability, with its timeout.
    /// Connects nowhere yet.
    pub fn new(client: Client) -> Session {
        Session {
            client,
            kept: Mutex::new(Vec::new()),
        }
    }

    /// The client whose socket, capability and timeout this session uses.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// As [`Client::call`], over a kept connection where one is open.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal> {
        parse_response(&self.call_verbatim(verb, args)?)
    }

    /// As [`Client::call_verbatim`], over a kept connection where one is
    /// open.
    ///
    /// # Errors
    /// As [`Client::call_verbatim`].
    pub fn call_verbatim(&self, verb: &str, args: Value) -> Result<Vec<u8>, Refusal> {
        let line = self.client.request_line(verb, &args)?;
        self.exchange(&line, self.client.timeout_for(verb, &args))
    }

    /// As [`Client::call_line`], over a kept connection where one is open.
    ///
    /// # Errors
    /// As [`Client::call_line`].
    pub fn call_line(&self, line: &[u8]) -> Result<Vec<u8>, Refusal> {
        self.exchange(line, self.client.timeout())
    }

    /// Sends `line` and reads its answer within `timeout`.
    fn exchange(&self, line: &[u8], timeout: Duration) -> Result<Vec<u8>, Refusal> {
        let deadline = deadline_after(timeout);
        let request = with_newline(line);
        while let Some(socket) = self.take() {
            match send_kept(&socket, &request, deadline) {
                Sent::Whole => return self.answer(socket, deadline),
                Sent::Closed => {}
                Sent::TimedOut => return Err(Refusal::OutcomeUnknown),
            }
        }
        let socket = connect(self.client.path(), deadline)?;
        // As in `Client::call_line`: a broker that refuses a new
        // connection answers while we may still write.
        let _sent = send_all(&socket, &request, deadline);
        self.answer(socket, deadline)
    }

    /// Reads the answer on `socket`, and keeps the connection if it can
    /// carry another request.
    fn answer(&self, socket: Socket, deadline: Instant) -> Result<Vec<u8>, Refusal> {
        // On any error the connection is dropped here, closed: a late
        // answer must never be read as the next call's.
        let (line, clean) = read_line(&socket, deadline)?;
        if clean && stays_open(&line) {
            self.keep(socket);
        }
        Ok(line)
    }

    /// The most recently kept connection that may still be used; the ones
    /// that may not are closed.
    fn take(&self) -> Option<Socket> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(Kept { socket, since }) = kept.pop() {
            if since.elapsed() < REUSE_WITHIN && still_open(&socket) {
                return Some(socket);
            }
        }
        None
    }

    /// Keeps `socket` for a later call, closing those too old to be used.
    fn keep(&self, socket: Socket) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|k| k.since.elapsed() < REUSE_WITHIN);
        if kept.len() < KEEP_AT_MOST {
            kept.push(Kept {
                socket,
                since: Instant::now(),
            });
        }
    }
}

/// Whether the broker's answer leaves the connection open for another
/// request: any answer but one of [`ENDS_CONNECTION`] (and one that cannot
/// be read, which nothing should follow).
fn stays_open(line: &[u8]) -> bool {
    // Results can be large; only a refusal needs reading.
    line.starts_with(br#"{"ok":true,"#)
        || match parse_response(line) {
            Ok(_) => true,
            Err(refusal) => {
                refusal != Refusal::OutcomeUnknown && !ENDS_CONNECTION.contains(&refusal)
            }
        }
}

/// Whether a kept connection is still open and quiet, without waiting: the
/// broker closed it if a read would see the end of the stream (or fail),
/// and a connection with unread bytes on it is not one to send on.
fn still_open(socket: &Socket) -> bool {
    let mut probe = [MaybeUninit::<u8>::uninit(); 1];
    matches!(
        socket.recv_with_flags(&mut probe, libc::MSG_PEEK | libc::MSG_DONTWAIT),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    )
}

/// Sends `bytes` on a kept connection before `deadline`, telling a
/// connection the broker closed (nothing of this request can have been
/// read as a line: its `\n` is its last byte) from a call out of time.
fn send_kept(socket: &Socket, bytes: &[u8], deadline: Instant) -> Sent {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    // A request line (at most 64 KiB) nearly always fits the socket's
    // buffer at once, so the first try waits for nothing and needs no
    // timeout set.
    let mut rest = bytes;
    match socket.send_with_flags(rest, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) {
        Ok(sent) => rest = rest.get(sent..).unwrap_or_default(),
        Err(e) if matches!(e.kind(), WouldBlock | Interrupted) => {}
        Err(_) => return Sent::Closed,
    }
    while !rest.is_empty() {
        let Some(left) = time_left(deadline) else {
            return Sent::TimedOut;
        };
        if socket.set_write_timeout(Some(left)).is_err() {
            return Sent::Closed;
        }
        match socket.send_with_flags(rest, libc::MSG_NOSIGNAL) {
            Ok(0) => return Sent::Closed,
            Ok(sent) => rest = rest.get(sent..).unwrap_or_default(),
            Err(e) if e.kind() == Interrupted => {}
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => return Sent::TimedOut,
            Err(_) => return Sent::Closed,
        }
    }
    Sent::Whole
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::mpsc;

    use serde_json::json;

    use super::*;

    #[test]
    fn only_answers_that_leave_the_connection_open_keep_it() {
        assert!(stays_open(br#"{"ok":true,"result":[]}"#));
        assert!(stays_open(br#"{"ok":false,"error":"not-holder"}"#));
        assert!(stays_open(br#"{"ok":false,"error":"bad-request"}"#));
        for refusal in ENDS_CONNECTION {
            assert!(!stays_open(&super::super::error_line(refusal)), "{refusal}");
        }
        assert!(!stays_open(b"garbage"));
        assert!(!stays_open(b""));
    }

    /// A fake broker on `path` that answers every request line with an
    /// empty result, after telling `lines` which of its connections (0
    /// for the first accepted) the line came on.
    fn counting_broker(path: &std::path::Path) -> mpsc::Receiver<usize> {
        let listener = std::os::unix::net::UnixListener::bind(path).expect("bind");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let (Ok(stream), tx) = (stream, tx.clone()) else {
                    return;
                };
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(&stream);
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|read| read > 0) {
                        line.clear();
                        let answer = (&stream).write_all(b"{\"ok\":true,\"result\":null}\n");
                        if tx.send(n).is_err() || answer.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        lines
    }

    /// Makes every connection `session` keeps look idle for `idle`.
    fn idle_for(session: &Session, idle: Duration) {
        let since = Instant::now().checked_sub(idle).expect("the clock");
        for kept in session.kept.lock().expect("kept").iter_mut() {
            kept.since = since;
        }
    }

    #[test]
    fn a_kept_connection_is_reused_until_a_second_short_of_the_broker_s_idle_deadline() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("bus.sock");
        let lines = counting_broker(&path);
        let session = Session::new(Client::new(&path, "cap"));
        let connection = || {
            assert_eq!(session.call("head", json!({})), Ok(Value::Null));
            lines
                .recv_timeout(Duration::from_secs(30))
                .expect("a request line")
        };
        assert_eq!(connection(), 0);
        assert_eq!(connection(), 0, "kept");
        idle_for(&session, READ_DEADLINE - Duration::from_secs(2));
        assert_eq!(connection(), 0, "idle for less than a second short");
        // The broker may close it while the request is on its way: a new
        // one carries the request instead.
        idle_for(&session, READ_DEADLINE - Duration::from_secs(1));
        assert_eq!(connection(), 1, "idle for a second short");
        assert_eq!(connection(), 1, "the new one is kept");
        idle_for(&session, READ_DEADLINE);
        assert_eq!(connection(), 2, "idle for as long as the broker waits");
    }

    #[test]
    fn debug_never_shows_the_capability() {
        let session = Session::new(Client::new("/x/bus.sock", "secret-cap-text"));
        let shown = format!("{session:?}");
        assert!(!shown.contains("secret-cap-text"), "{shown}");
    }
}
