//! Reading an HTTP request body under a size limit without losing the
//! refusal: [`BoundedBody`], a sans-IO reader that keeps a body up to its
//! limit and, past it, keeps reading and discards a bounded rest, and
//! [`read_bounded`], its driving loop over an axum body.
//!
//! A server that answers 413 and closes while the client is still sending
//! its body closes with unread input queued, and the kernel answers that
//! with a reset: the client's write fails before it has read anything, and
//! the 413 is lost (axum's `DefaultBodyLimit` does exactly this once the
//! rest of a refused body no longer fits in the kernel's buffers). So the
//! route reads what is left, bounded, and answers after it, as the socket
//! server does.
//!
//! # The driving loop
//!
//! [`read_bounded`] feeds each chunk to [`BoundedBody::handle_chunk`]
//! until it says [`Step::Stop`] or the body ends
//! ([`BoundedBody::handle_end`]); once [`BoundedBody::is_draining`], the
//! rest of the reading is bounded by [`DRAIN_DEADLINE`]. Then
//! [`BoundedBody::finish`] says what to answer: the whole body, 413 (with
//! `Connection: close` when the rest was not read to its end), or 400 for
//! a body cut short. The route needs no `DefaultBodyLimit` layer (it never
//! applied to a raw body). Draining keeps one connection's task for at
//! most [`DRAIN_DEADLINE`] and reads at most [`MAX_DRAIN`] bytes more than
//! the limit; a client that sends more than that still gets its connection
//! closed, bounded.

use std::time::Duration;

/// How much of a refused body is still read and discarded past the limit:
/// 16 MiB. Enough that a pane posting a capture a little or a lot over the
/// 16 MiB result limit finishes its write and reads the 413; bounded, so a
/// client that never stops sending cannot keep the server reading.
pub const MAX_DRAIN: usize = 16 * 1024 * 1024;

/// How long the rest of a refused body may take to arrive: 2 s, ample for
/// [`MAX_DRAIN`] over loopback, short enough that a slow sender cannot hold
/// a connection's task.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

/// Whether to read another chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read the next chunk.
    More,
    /// Stop reading: the drain bound is reached.
    Stop,
}

/// What a body read through [`BoundedBody`] turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The whole body, within the limit.
    Whole(Vec<u8>),
    /// More than the limit: answer 413. `to_the_end` says whether the body
    /// was read to its end, so the connection may be kept; otherwise answer
    /// with `Connection: close`.
    TooLarge {
        /// Whether the rest was read to the body's end.
        to_the_end: bool,
    },
    /// The body ended before [`BoundedBody::handle_end`] (the stream
    /// failed or the reading was abandoned) while still within the limit.
    Cut,
}

/// A body being read: kept up to `limit` bytes, then drained.
#[derive(Debug)]
pub struct BoundedBody {
    phase: Phase,
}

/// Each phase carries what it needs and nothing else.
#[derive(Debug)]
enum Phase {
    /// Within the limit so far.
    Keeping {
        kept: Vec<u8>,
        limit: usize,
        drain_limit: usize,
    },
    /// Past the limit; `left` more bytes may still be discarded.
    Draining { left: usize },
    /// Past the limit, and the drain bound is reached.
    DrainFull,
    /// The whole body is in, within the limit.
    Ended { kept: Vec<u8> },
    /// Past the limit, and the rest was drained to the body's end.
    DrainedToEnd,
}

impl BoundedBody {
    /// A reader that keeps at most `limit` bytes and, past it, discards at
    /// most `drain_limit` more.
    pub fn new(limit: usize, drain_limit: usize) -> BoundedBody {
        BoundedBody {
            phase: Phase::Keeping {
                kept: Vec::new(),
                limit,
                drain_limit,
            },
        }
    }

    /// Takes the next chunk of the body.
    pub fn handle_chunk(&mut self, chunk: &[u8]) -> Step {
        let phase = std::mem::replace(&mut self.phase, Phase::DrainFull);
        self.phase = match phase {
            Phase::Keeping {
                mut kept,
                limit,
                drain_limit,
            } => {
                let room = limit - kept.len();
                if chunk.len() <= room {
                    kept.extend_from_slice(chunk);
                    Phase::Keeping {
                        kept,
                        limit,
                        drain_limit,
                    }
                } else {
                    // The body is refused: what was kept is never used.
                    drop(kept);
                    drain(drain_limit, chunk.len() - room)
                }
            }
            Phase::Draining { left } => drain(left, chunk.len()),
            // Nothing follows the end; a chunk after the drain bound is
            // not counted, the caller was told to stop.
            done @ (Phase::DrainFull | Phase::Ended { .. } | Phase::DrainedToEnd) => done,
        };
        match self.phase {
            Phase::DrainFull => Step::Stop,
            Phase::Keeping { .. }
            | Phase::Draining { .. }
            | Phase::Ended { .. }
            | Phase::DrainedToEnd => Step::More,
        }
    }

    /// The body has ended.
    pub fn handle_end(&mut self) {
        let phase = std::mem::replace(&mut self.phase, Phase::DrainFull);
        self.phase = match phase {
            Phase::Keeping { kept, .. } => Phase::Ended { kept },
            Phase::Draining { .. } => Phase::DrainedToEnd,
            done @ (Phase::DrainFull | Phase::Ended { .. } | Phase::DrainedToEnd) => done,
        };
    }

    /// Whether the body is past its limit and the rest is being discarded:
    /// from then on the reading is bounded by [`DRAIN_DEADLINE`].
    pub fn is_draining(&self) -> bool {
        match self.phase {
            Phase::Draining { .. } | Phase::DrainFull | Phase::DrainedToEnd => true,
            Phase::Keeping { .. } | Phase::Ended { .. } => false,
        }
    }

    /// What the body was.
    pub fn finish(self) -> Body {
        match self.phase {
            Phase::Ended { kept } => Body::Whole(kept),
            Phase::DrainedToEnd => Body::TooLarge { to_the_end: true },
            Phase::Draining { .. } | Phase::DrainFull => Body::TooLarge { to_the_end: false },
            Phase::Keeping { .. } => Body::Cut,
        }
    }
}

/// Discards `taken` bytes of the `left` the drain may still take.
fn drain(left: usize, taken: usize) -> Phase {
    match left.checked_sub(taken) {
        Some(left) if left > 0 => Phase::Draining { left },
        Some(_) | None => Phase::DrainFull,
    }
}

/// Reads `body` up to `limit` bytes; past it, reads and discards the rest,
/// at most [`MAX_DRAIN`] bytes within [`DRAIN_DEADLINE`].
pub async fn read_bounded(body: axum::body::Body, limit: usize) -> Body {
    use tokio_stream::StreamExt;
    let mut bounded = BoundedBody::new(limit, MAX_DRAIN);
    let mut data = body.into_data_stream();
    let mut drain_until = None;
    loop {
        let next = match drain_until {
            None => data.next().await,
            Some(until) => match tokio::time::timeout_at(until, data.next()).await {
                Ok(next) => next,
                Err(_elapsed) => break,
            },
        };
        match next {
            Some(Ok(chunk)) => {
                if bounded.handle_chunk(&chunk) == Step::Stop {
                    break;
                }
            }
            Some(Err(_)) => break,
            None => {
                bounded.handle_end();
                break;
            }
        }
        if drain_until.is_none() && bounded.is_draining() {
            drain_until = Some(tokio::time::Instant::now() + DRAIN_DEADLINE);
        }
    }
    bounded.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn feed(limit: usize, drain_limit: usize, chunks: &[&[u8]], end: bool) -> (Vec<Step>, Body) {
        let mut body = BoundedBody::new(limit, drain_limit);
        let steps = chunks.iter().map(|c| body.handle_chunk(c)).collect();
        if end {
            body.handle_end();
        }
        (steps, body.finish())
    }

    #[test]
    fn a_body_within_the_limit_is_kept_whole() {
        assert_eq!(
            feed(4, 8, &[b"ab", b"cd"], true),
            (vec![Step::More, Step::More], Body::Whole(b"abcd".to_vec()))
        );
        assert_eq!(feed(4, 8, &[], true), (vec![], Body::Whole(Vec::new())));
    }

    #[test]
    fn one_byte_over_is_too_large_and_the_rest_is_drained_to_the_end() {
        assert_eq!(
            feed(4, 8, &[b"abcde", b"fgh"], true),
            (
                vec![Step::More, Step::More],
                Body::TooLarge { to_the_end: true }
            )
        );
    }

    #[test]
    fn the_drain_stops_at_its_bound() {
        // One over the limit, then seven more: eight discarded, the bound.
        let mut body = BoundedBody::new(4, 8);
        assert_eq!(body.handle_chunk(b"abcde"), Step::More);
        assert!(body.is_draining());
        assert_eq!(body.handle_chunk(b"1234567"), Step::Stop);
        assert_eq!(body.finish(), Body::TooLarge { to_the_end: false });
        // A chunk far over the limit stops at once.
        assert_eq!(
            feed(4, 8, &[&[b'x'; 100]], false),
            (vec![Step::Stop], Body::TooLarge { to_the_end: false })
        );
    }

    #[test]
    fn a_drain_cut_short_by_its_deadline_closes_the_connection() {
        assert_eq!(
            feed(4, 8, &[b"abcdef"], false),
            (vec![Step::More], Body::TooLarge { to_the_end: false })
        );
    }

    #[test]
    fn a_body_that_never_ended_within_the_limit_is_cut() {
        assert_eq!(feed(4, 8, &[b"ab"], false), (vec![Step::More], Body::Cut));
    }

    /// The driving loop over an axum body: a body within the limit is
    /// kept whole, one past it is refused after being read to its end.
    #[test]
    fn the_loop_reads_an_axum_body_whole_or_refuses_it_past_the_limit() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let read = |bytes: &'static [u8], limit| {
            runtime.block_on(read_bounded(axum::body::Body::from(bytes), limit))
        };
        assert_eq!(read(b"abcd", 4), Body::Whole(b"abcd".to_vec()));
        assert_eq!(read(b"abcde", 4), Body::TooLarge { to_the_end: true });
        assert_eq!(read(b"", 4), Body::Whole(Vec::new()));
    }

    /// The point of it all, over real TCP: a client that writes its whole
    /// 64 MiB body before it reads gets the refusal when the server drains,
    /// and gets a failed write when it does not. A tiny hand-written server
    /// stands in for hyper: it reads a fixed head, then the body through
    /// [`BoundedBody`], answers and closes.
    #[test]
    fn over_tcp_the_refusal_survives_only_with_the_drain() {
        use std::io::{Read, Write};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        const LIMIT: usize = 16 * 1024 * 1024;
        const SENT: usize = 64 * 1024 * 1024;
        const ANSWER: &[u8] =
            b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

        let outcome = |drain_limit: usize| -> Result<Vec<u8>, std::io::Error> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.set_nonblocking(true).expect("nonblocking");
            let address = listener.local_addr().expect("address");
            let server = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    let (mut stream, _) = listener.accept().await.expect("accept");
                    let mut body = BoundedBody::new(LIMIT, drain_limit);
                    let mut chunk = vec![0u8; 64 * 1024];
                    let reading = async {
                        loop {
                            match stream.read(&mut chunk).await {
                                Ok(0) | Err(_) => {
                                    body.handle_end();
                                    return;
                                }
                                Ok(n) => {
                                    if body.handle_chunk(&chunk[..n]) == Step::Stop {
                                        return;
                                    }
                                }
                            }
                        }
                    };
                    let _ = tokio::time::timeout(Duration::from_secs(20), reading).await;
                    assert!(body.is_draining());
                    let _ = stream.write_all(ANSWER).await;
                    let _ = stream.shutdown().await;
                    // Dropped here: closed with whatever is still unread.
                })
            });
            let mut client = std::net::TcpStream::connect(address).expect("connect");
            client
                .set_write_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            client
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            let sent = client.write_all(&vec![b'x'; SENT]);
            // The client has sent all it means to; the server's drain ends
            // at the end of the stream.
            let result = sent
                .and_then(|()| client.shutdown(std::net::Shutdown::Write))
                .and_then(|()| {
                    let mut answer = Vec::new();
                    client.read_to_end(&mut answer).map(|_| answer)
                });
            server.join().expect("server");
            result
        };

        let drained = outcome(SENT).expect("the refusal is read");
        assert_eq!(drained, ANSWER);
        // Without the drain (a bound of one byte), the same client fails.
        assert!(outcome(1).is_err(), "the write or the read fails");
    }
}
