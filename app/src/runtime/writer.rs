//! The writer thread: the one place that writes the store.
//!
//! Group commit, in this order: wait for a [`Job`]; stage it and every job
//! already queued behind it (at most [`MAX_BATCH`], in arrival order), each
//! in its own savepoint; commit the batch with one sync; publish the view
//! if machine state changed, and the batch's changes to the feed; only then
//! send the answers. Alone, a request commits at once; requests that
//! arrive while a commit syncs form the next batch. Each batch also writes
//! the counts of the refusal windows that are over; while one is open the
//! writer comes back within a window even when no job arrives, and at the
//! end it writes every window's count before the store closes.

use std::sync::{mpsc, Arc};

use mosaic_adapters::wire::Call;
use mosaic_domain::bus::{Caller, Command, Reply};
use mosaic_domain::evidence::LaunchRecord;
use mosaic_domain::refusal_counts::WINDOW;
use mosaic_domain::Refusal;
use mosaic_ports::StoreReaders;
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use super::driver::Driver;
use super::pipeline::{commit_batch, stage_request, Proven, Writer, WriterWorld};
use super::reads::Reads;

/// The writer thread's name (its `comm`, as `/proc` shows it).
pub const WRITER_THREAD: &str = "mosaic-writer";

/// The most requests one group commit takes.
const MAX_BATCH: usize = 256;

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

/// Where a job's answer goes: to an async task (a connection), or to a
/// thread that blocks for it (the trusted in-process API, `bind_launch`).
pub(super) enum ReplyTo<T> {
    Task(oneshot::Sender<Result<T, Refusal>>),
    Thread(mpsc::Sender<Result<T, Refusal>>),
}

impl<T> ReplyTo<T> {
    /// Sends the answer; a caller that stopped waiting has nobody to tell.
    fn send(self, answer: Result<T, Refusal>) {
        match self {
            ReplyTo::Task(to) => drop(to.send(answer)),
            ReplyTo::Thread(to) => drop(to.send(answer)),
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

/// The writer thread's loop, until every job sender is gone.
pub(super) fn write_loop<S: StoreReaders>(
    mut driver: Driver<S>,
    queue: mpsc::Receiver<Job>,
    mut world: WriterWorld,
    reads: Arc<Reads<S>>,
) {
    let mut answers = Vec::with_capacity(MAX_BATCH);
    loop {
        // With a refusal window open, come back when it may be over even
        // if nothing arrives, to write its count.
        let first = if driver.refusal_counts_idle() {
            match queue.recv() {
                Ok(job) => Some(job),
                Err(mpsc::RecvError) => break,
            }
        } else {
            match queue.recv_timeout(WINDOW) {
                Ok(job) => Some(job),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        };
        let mut next = first;
        while let Some(job) = next {
            let writer = Writer {
                driver: &mut driver,
                world: &mut world,
                reads: &reads,
            };
            answers.push(stage_job(writer, job));
            next = if answers.len() < MAX_BATCH {
                queue.try_recv().ok()
            } else {
                None
            };
        }
        driver.stage_refusal_counts(world.time.now(), false);
        // The view is published before any answer goes out.
        let durable = commit_batch(&mut driver, &reads);
        for answer in answers.drain(..) {
            answer.send(durable);
        }
    }
    // The windows still open are written before the store closes.
    driver.stage_refusal_counts(world.time.now(), true);
    if let Err(refusal) = commit_batch(&mut driver, &reads) {
        tracing::error!(
            code = refusal.code(),
            "the refusal counts of the last windows were not written"
        );
    }
    // The writer's connection must close last: its close checkpoints.
    reads.close();
    drop(driver);
}

/// An answer held until its batch is durable.
enum Answer {
    /// A request's answer, and its [`Early`] `durable` signal.
    Request(
        ReplyTo<Value>,
        Result<Value, Refusal>,
        Option<watch::Sender<Option<bool>>>,
    ),
    Bind(ReplyTo<()>, Result<(), Refusal>),
    Command(ReplyTo<Reply>, Result<Reply, Refusal>),
}

impl Answer {
    /// Sends the answer, or `storage-unavailable` when its batch failed.
    fn send(self, durable: Result<(), Refusal>) {
        match self {
            Answer::Request(to, answer, early) => {
                let answer = durable.and(answer);
                if let Some(early) = early {
                    early.send_replace(Some(answer.is_ok()));
                }
                to.send(answer);
            }
            Answer::Bind(to, answer) => to.send(durable.and(answer)),
            Answer::Command(to, answer) => to.send(durable.and(answer)),
        }
    }
}

/// Stages one job in the open batch and returns its provisional answer.
fn stage_job<S: StoreReaders>(writer: Writer<'_, S>, job: Job) -> Answer {
    let now = writer.world.time.now();
    match job {
        Job::Request {
            who,
            verb,
            call,
            reply,
            early,
        } => {
            let result = stage_request(writer, who, verb, call);
            let durable = early.map(|Early { staged, durable }| {
                if result.is_ok() {
                    let _ = staged.send(());
                }
                durable
            });
            Answer::Request(reply, result, durable)
        }
        Job::Refuse {
            caller,
            verb,
            refusal,
            reply,
        } => {
            let result = writer
                .driver
                .stage_refusal(now, Some(&caller), verb, refusal);
            Answer::Request(reply, Err(result), None)
        }
        Job::Bind { record, reply } => {
            let result = writer.driver.stage_bind(now, record).map(|_| ());
            Answer::Bind(reply, result)
        }
        Job::Command {
            caller,
            command,
            reply,
        } => {
            let verb = command.verb();
            let result = writer.driver.stage_call(now, &caller, verb, command);
            Answer::Command(reply, result)
        }
    }
}
