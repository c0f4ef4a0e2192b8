//! The server's [`Limits`]: deadlines and places, the wire contract's by
//! default.

use std::time::Duration;

use super::{
    effective_uid, DRAIN_DEADLINE, FIRST_LINE_DEADLINE, HUMAN_RESERVE, MAX_CONNECTIONS, MAX_DRAIN,
    MAX_UNAUTHENTICATED, READ_DEADLINE, WRITE_DEADLINE,
};

/// The server's limits. [`Limits::default`] gives the wire contract's
/// values; tests shorten the deadlines instead of waiting seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection has to deliver each whole request line
    /// ([`READ_DEADLINE`], 5 s): the first from its accept, each next one
    /// from the previous answer. A slow or silent client gets
    /// `request-timeout` and cannot hold its slot longer; between requests
    /// it is also the idle deadline: a connection that sent nothing of a
    /// next line by then is closed without an answer.
    pub read_deadline: Duration,
    /// How long the server waits for a client to take its response
    /// ([`WRITE_DEADLINE`], 5 s), so a client that never reads cannot hold
    /// its slot either. The handler's own time is not limited here.
    pub write_deadline: Duration,
    /// How many authenticated connections are served at once
    /// ([`MAX_CONNECTIONS`], 4096), idle ones between requests included: a
    /// connection is authenticated once its first line named a caller
    /// ([`Sender::Caller`](super::Sender::Caller) or
    /// [`Sender::Human`](super::Sender::Human)). A line that would
    /// authenticate one more is answered `broker-unavailable`, unhandled,
    /// and its connection closed (a human line first tries the reserve,
    /// [`Limits::human_reserve`]).
    pub max_connections: usize,
    /// How many connections may wait for their first line at once
    /// ([`MAX_UNAUTHENTICATED`], 1024; never more than
    /// [`Limits::max_connections`]), apart from the authenticated ones.
    /// When they are all taken, a new connection takes the place of the
    /// oldest one still waiting of the peer process (`SO_PEERCRED` pid)
    /// that holds the most, if that is more than the newcomer's process
    /// holds; otherwise the newcomer is answered `broker-unavailable` and
    /// closed unread. So one process, or many, flooding the socket cannot
    /// keep a process that holds none (the human CLI) out.
    pub max_unauthenticated: usize,
    /// How long a new connection has to deliver its first line whole
    /// ([`FIRST_LINE_DEADLINE`], 1 s; never longer than
    /// [`Limits::read_deadline`]): a client that connects sends at once,
    /// and a connection nobody has vouched for should not hold its place.
    pub first_line_deadline: Duration,
    /// How many connections whose first line is a human line are served
    /// beyond [`Limits::max_connections`] when those are all taken
    /// ([`HUMAN_RESERVE`], 16), each from a peer that
    /// [`Handler::may_use_reserve`](super::Handler::may_use_reserve)
    /// admits; each carries its one request and closes.
    pub human_reserve: usize,
    /// How many bytes of a refused request are still read and discarded
    /// after the answer ([`MAX_DRAIN`], 16 MiB), so the client can finish
    /// writing and read the answer.
    pub drain_limit: usize,
    /// How long that draining may take ([`DRAIN_DEADLINE`], 2 s).
    pub drain_deadline: Duration,
    /// The only uid whose peers are admitted: this process's effective
    /// uid. Any other peer is answered `bad-capability`, unread.
    pub peer_uid: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_deadline: READ_DEADLINE,
            write_deadline: WRITE_DEADLINE,
            max_connections: MAX_CONNECTIONS,
            max_unauthenticated: MAX_UNAUTHENTICATED,
            first_line_deadline: FIRST_LINE_DEADLINE,
            human_reserve: HUMAN_RESERVE,
            drain_limit: MAX_DRAIN,
            drain_deadline: DRAIN_DEADLINE,
            peer_uid: effective_uid(),
        }
    }
}
