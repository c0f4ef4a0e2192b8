//! The writer thread: the one place that writes the store.
//!
//! Group commit, in this order: wait for a [`Job`]; stage it and every job
//! queued behind it by the time the last one is staged (at most
//! [`MAX_BATCH`], in arrival order), each undone alone if it breaks a rule;
//! commit the batch with one sync; publish the view if machine state
//! changed, and the batch's changes to the feed; only then send the
//! answers. Alone, a request commits at once; requests that arrive while a
//! commit syncs form the next batch. Each batch also writes the counts of
//! the refusal windows that are over; while one is open the writer comes
//! back within a window even when no job arrives, and at the end it writes
//! every window's count before the store closes.
//!
//! A batch that fails for lack of space is rolled back whole, the disk
//! reserve is released, and the same jobs are staged again under the
//! policy of a short disk ([`super::disk`]): the human's are served, the
//! rest refused and counted. While short, the writer tries to take the
//! reserve again before each batch. A launch is bound, and the host told
//! that it may start a run, only after the room on the disk was measured
//! in that batch.

use std::sync::{mpsc, Arc};

use mosaic_domain::bus::Reply;
use mosaic_domain::refusal_counts::WINDOW;
use mosaic_domain::Refusal;
use mosaic_ports::StoreReaders;
use serde_json::Value;

use super::disk::{self, DiskSpace, WhenShort};
use super::driver::Driver;
use super::job::Job;
use super::pipeline::{commit_batch, stage_request, Writer, WriterWorld};
use super::reads::Reads;

/// The writer thread's name (its `comm`, as `/proc` shows it).
pub const WRITER_THREAD: &str = "mosaic-writer";

/// The most requests one group commit takes.
const MAX_BATCH: usize = 256;

/// The writer thread's loop, until every job sender is gone.
pub(super) fn write_loop<S: StoreReaders>(
    mut driver: Driver<S>,
    queue: mpsc::Receiver<Job>,
    mut world: WriterWorld,
    reads: Arc<Reads<S>>,
) {
    let mut space = DiskSpace::boot(&mut driver, world.time.now());
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    let mut outcomes = Vec::with_capacity(MAX_BATCH);
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
        jobs.extend(first);
        space.try_return(&mut driver);
        let mut batch = Batch {
            driver: &mut driver,
            world: &mut world,
            reads: &reads,
            space: &mut space,
            queue: &queue,
        };
        let mut durable = batch.stage_and_commit(&mut jobs, &mut outcomes);
        // Nothing of a failed batch is kept, so the retry starts clean.
        if durable.is_err()
            && batch.driver.take_out_of_space()
            && batch.space.ran_out(batch.driver, batch.world.time.now())
        {
            durable = batch.stage_and_commit(&mut jobs, &mut outcomes);
        }
        for (job, outcome) in jobs.drain(..).zip(outcomes.drain(..)) {
            send(job, outcome, durable);
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

/// What one batch is staged and committed with.
struct Batch<'a, S> {
    driver: &'a mut Driver<S>,
    world: &'a mut WriterWorld,
    reads: &'a Reads<S>,
    space: &'a mut DiskSpace,
    /// Where jobs that arrive while the batch is staged join it.
    queue: &'a mpsc::Receiver<Job>,
}

impl<S: StoreReaders> Batch<'_, S> {
    /// Stages every job (under the short policy while the disk is short),
    /// with the refusal counts that are due, and commits; `outcomes` gets
    /// each job's provisional answer, in order. Returns what every answer
    /// is joined with.
    ///
    /// Jobs queued meanwhile join `jobs` until the last one is staged (up
    /// to [`MAX_BATCH`]): a request that arrives while the batch is staged
    /// shares its sync instead of waiting for it to end.
    fn stage_and_commit(
        &mut self,
        jobs: &mut Vec<Job>,
        outcomes: &mut Vec<Outcome>,
    ) -> Result<(), Refusal> {
        outcomes.clear();
        let mut short = self.space.is_short();
        let mut refused = 0;
        let mut next = 0;
        loop {
            if next == jobs.len() {
                self.join_queued(jobs);
            }
            let Some(job) = jobs.get_mut(next) else {
                break;
            };
            next += 1;
            // A launch is bound, and the host told it may start a run,
            // only with room on the disk, measured now.
            if !short && matches!(job, Job::Bind { .. } | Job::Room { .. }) {
                short = !self.space.check(self.driver, self.world.time.now());
            }
            let writer = Writer {
                driver: self.driver,
                world: self.world,
                reads: self.reads,
            };
            let outcome = match short.then(|| disk::when_short(job)) {
                None | Some(WhenShort::Serve) => stage_job(writer, job),
                Some(WhenShort::Count {
                    caller,
                    verb,
                    refusal,
                }) => {
                    refused += 1;
                    let now = writer.world.time.now();
                    let refusal = writer.driver.count_refusal(now, caller, verb, refusal);
                    Outcome::refused(job, refusal)
                }
                Some(WhenShort::Refuse) => {
                    refused += 1;
                    Outcome::refused(job, Refusal::StorageUnavailable)
                }
            };
            outcomes.push(outcome);
        }
        self.space.refused(refused);
        self.driver
            .stage_refusal_counts(self.world.time.now(), false);
        // The view is published before any answer goes out.
        commit_batch(self.driver, self.reads)
    }

    /// Moves the jobs queued now into `jobs`, up to [`MAX_BATCH`].
    fn join_queued(&self, jobs: &mut Vec<Job>) {
        while jobs.len() < MAX_BATCH {
            match self.queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(mpsc::TryRecvError::Empty | mpsc::TryRecvError::Disconnected) => break,
            }
        }
    }
}

/// The kinds of answer a job gets.
#[derive(Clone, Copy)]
enum Kind {
    Value,
    Unit,
    Reply,
}

/// A job's provisional answer, of its job's kind, held until its batch is
/// durable.
enum Outcome {
    /// A request's or a read refusal's.
    Value(Result<Value, Refusal>),
    /// A binding's or an end's.
    Unit(Result<(), Refusal>),
    /// A command's.
    Reply(Result<Reply, Refusal>),
}

impl Outcome {
    /// `refusal`, as `job`'s answer.
    fn refused(job: &Job, refusal: Refusal) -> Self {
        let kind = match job {
            Job::Request { .. } | Job::Refuse { .. } => Kind::Value,
            Job::Bind { .. } | Job::End { .. } | Job::Room { .. } => Kind::Unit,
            Job::Command { .. } => Kind::Reply,
        };
        match kind {
            Kind::Value => Outcome::Value(Err(refusal)),
            Kind::Unit => Outcome::Unit(Err(refusal)),
            Kind::Reply => Outcome::Reply(Err(refusal)),
        }
    }

    // Each job's outcome is built of its own kind (`stage_job`,
    // `Outcome::refused`), so the other arms below are never taken; they
    // answer `broker-unavailable` rather than panic on the writer thread.

    fn value(self) -> Result<Value, Refusal> {
        match self {
            Outcome::Value(answer) => answer,
            Outcome::Unit(_) | Outcome::Reply(_) => Err(Refusal::BrokerUnavailable),
        }
    }

    fn unit(self) -> Result<(), Refusal> {
        match self {
            Outcome::Unit(answer) => answer,
            Outcome::Value(_) | Outcome::Reply(_) => Err(Refusal::BrokerUnavailable),
        }
    }

    fn reply(self) -> Result<Reply, Refusal> {
        match self {
            Outcome::Reply(answer) => answer,
            Outcome::Value(_) | Outcome::Unit(_) => Err(Refusal::BrokerUnavailable),
        }
    }
}

/// Sends `job`'s answer: its outcome, or `storage-unavailable` when its
/// batch failed.
fn send(job: Job, outcome: Outcome, durable: Result<(), Refusal>) {
    match job {
        Job::Request { reply, early, .. } => {
            let answer = durable.and(outcome.value());
            if let Some(early) = early {
                early.durable.send_replace(Some(answer.is_ok()));
            }
            reply.send(answer);
        }
        Job::Refuse { reply, .. } => reply.send(durable.and(outcome.value())),
        Job::Bind { reply, .. } | Job::End { reply, .. } | Job::Room { reply } => {
            reply.send(durable.and(outcome.unit()));
        }
        Job::Command { reply, .. } => reply.send(durable.and(outcome.reply())),
    }
}

/// Stages one job in the open batch and returns its provisional answer.
/// The job is kept whole (its parts are cloned), so a batch that failed
/// for lack of space can be staged again.
fn stage_job<S: StoreReaders>(writer: Writer<'_, S>, job: &mut Job) -> Outcome {
    let now = writer.world.time.now();
    match job {
        Job::Request {
            who,
            verb,
            call,
            early,
            ..
        } => {
            let result = stage_request(writer, who.clone(), verb, call.clone());
            if let (Ok(_), Some(early)) = (&result, early) {
                early.tell_staged();
            }
            Outcome::Value(result)
        }
        Job::Refuse {
            caller,
            verb,
            refusal,
            ..
        } => Outcome::Value(Err(writer.driver.stage_refusal(
            now,
            Some(caller),
            verb,
            *refusal,
        ))),
        Job::Bind { record, .. } => {
            Outcome::Unit(writer.driver.stage_bind(now, record.clone()).map(|_| ()))
        }
        Job::End { run, ending, .. } => Outcome::Unit(writer.driver.stage_end(now, run, *ending)),
        Job::Room { .. } => Outcome::Unit(Ok(())),
        Job::Command {
            caller, command, ..
        } => {
            let verb = command.verb();
            Outcome::Reply(writer.driver.stage_call(now, caller, verb, command.clone()))
        }
    }
}
