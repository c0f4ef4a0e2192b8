//! What the writer thread is asked: a [`Job`], with where its answer goes
//! ([`ReplyTo`]), and the two ways to ask, as a task ([`ask`]) or as a
//! thread ([`ask_blocking`]). Apart from the writer, so the policies that
//! look at a job (the short disk's, [`super::disk`]) need not import the
//! writer that applies them.

use std::sync::mpsc;

use mosaic_adapters::socket::DirectReply;
use mosaic_adapters::wire::{self, Call};
use mosaic_domain::bus::{Caller, Command, Reply};
use mosaic_domain::evidence::{Ending, LaunchRecord};
use mosaic_domain::{Refusal, RunId};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use super::pipeline::Proven;

/// One unit of work for the writer thread, with where its answer goes.
pub(super) enum Job {
    /// A parsed request (or its argument refusal) from a known caller.
    Request {
        who: Proven,
        verb: &'static str,
        call: Result<Call, Refusal>,
        reply: ReplyTo<Value>,
        /// For a `browser.request`: told early (see [`Early`]).
        early: Option<Early>,
    },
    /// A launch to bind.
    Bind {
        record: LaunchRecord,
        reply: ReplyTo<()>,
    },
    /// A run its host ends.
    End {
        run: RunId,
        ending: Ending,
        reply: ReplyTo<()>,
    },
    /// The host asks whether agents may be served now, before it starts a
    /// run: the disk's room, measured (see [`super::disk`]). Records
    /// nothing.
    Room { reply: ReplyTo<()> },
    /// A command that no wire line carries: the trusted in-process API
    /// (`authorize`, `record_event`) and the broker's own record of a
    /// browser request's outcome.
    Command {
        caller: Caller,
        command: Command,
        reply: ReplyTo<Reply>,
    },
    /// A refusal of a read to record (reads run beside the writer).
    Refuse {
        caller: Caller,
        verb: &'static str,
        refusal: Refusal,
        reply: ReplyTo<Value>,
    },
}

/// Where a job's answer goes: to an async task (a connection), to a
/// thread that blocks for it (the trusted in-process API, `bind_launch`,
/// `end_run`),
/// or straight to a socket connection's client ([`Line`]).
pub(super) enum ReplyTo<T> {
    Task(oneshot::Sender<Result<T, Refusal>>),
    Thread(mpsc::Sender<Result<T, Refusal>>),
    Line(Line<T>),
}

/// An answer the thread that has it renders to its wire line and writes to
/// the client itself, then hands to the connection's task (which writes
/// what the socket did not take, and reads the next line). The client
/// hears its answer without waiting for that task to wake.
pub(super) struct Line<T> {
    pub(super) render: Box<dyn FnOnce(Result<T, Refusal>) -> String + Send>,
    pub(super) socket: DirectReply,
    pub(super) to: oneshot::Sender<String>,
}

impl<T> ReplyTo<T> {
    /// Sends the answer; a caller that stopped waiting has nobody to tell.
    pub(super) fn send(self, answer: Result<T, Refusal>) {
        match self {
            ReplyTo::Task(to) => drop(to.send(answer)),
            ReplyTo::Thread(to) => drop(to.send(answer)),
            ReplyTo::Line(Line { render, socket, to }) => {
                let line = render(answer);
                socket.write_now(&line);
                drop(to.send(line));
            }
        }
    }
}

/// How a `browser.request` hears of its authorization before its answer:
/// `staged` once it is staged without a refusal, before its batch commits
/// (the request is delivered to the panes meanwhile), then `durable` as
/// soon as the batch has synced, before any answer goes out (the panes'
/// claims wait for it).
pub(super) struct Early {
    pub(super) staged: oneshot::Sender<()>,
    pub(super) durable: watch::Sender<Option<bool>>,
}

impl Early {
    /// Says `staged`, once: a batch staged again after a full disk has
    /// said it already, so a spent sender takes this one's place.
    pub(super) fn tell_staged(&mut self) {
        let (spent, _) = oneshot::channel();
        // A browser request whose caller went away has nobody to tell.
        let _ = std::mem::replace(&mut self.staged, spent).send(());
    }
}

/// Hands the writer the job `make` builds around a reply channel and waits,
/// as a task, for its answer; a writer that is gone is `broker-unavailable`.
pub(super) async fn ask<T>(
    jobs: &mpsc::Sender<Job>,
    make: impl FnOnce(ReplyTo<T>) -> Job,
) -> Result<T, Refusal> {
    let (reply, answered) = oneshot::channel();
    jobs.send(make(ReplyTo::Task(reply)))
        .map_err(|_| Refusal::BrokerUnavailable)?;
    answered.await.unwrap_or(Err(Refusal::BrokerUnavailable))
}

/// As [`ask`], with the answer rendered by `render` and written to the
/// client by the writer itself through `socket`; returns the line.
pub(super) async fn ask_line(
    jobs: &mpsc::Sender<Job>,
    socket: DirectReply,
    render: Box<dyn FnOnce(Result<Value, Refusal>) -> String + Send>,
    make: impl FnOnce(ReplyTo<Value>) -> Job,
) -> String {
    let (to, answered) = oneshot::channel();
    let sent = jobs.send(make(ReplyTo::Line(Line { render, socket, to })));
    match (sent, answered.await) {
        (Ok(()), Ok(line)) => line,
        (Err(_), _) | (Ok(()), Err(_)) => wire::err(Refusal::BrokerUnavailable),
    }
}

/// As [`ask`], blocking this thread: for the broker's synchronous API,
/// which is never called on the runtime's own threads.
pub(super) fn ask_blocking<T>(
    jobs: Option<&mpsc::Sender<Job>>,
    make: impl FnOnce(ReplyTo<T>) -> Job,
) -> Result<T, Refusal> {
    let jobs = jobs.ok_or(Refusal::BrokerUnavailable)?;
    let (reply, answered) = mpsc::channel();
    jobs.send(make(ReplyTo::Thread(reply)))
        .map_err(|_| Refusal::BrokerUnavailable)?;
    answered.recv().map_err(|_| Refusal::BrokerUnavailable)?
}
