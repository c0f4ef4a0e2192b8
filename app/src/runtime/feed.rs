//! The change feed's runtime side: `changes` waits here, beside the writer.
//!
//! A change's position (its cursor) is its record's position in the
//! store's write order, so it means the same after a restart. The writer
//! derives each committed record's [`Change`] as it stages it (the driver
//! has the bus, and with it every decision's routing) and, after the
//! batch is durable and before any of its answers goes out,
//! [`Feed::publish`]es them: the feed keeps the newest ones in memory
//! and wakes only the waiters a change may concern (its [`Topic`]s).
//! What lies below the memory (after a restart, or a cursor far behind)
//! is read back from the store ([`history`]) and derived by the same
//! [`Change::of`]; a test checks that both give the same changes.
//!
//! A waiter costs a task and nothing else while idle: no thread, no
//! reader connection, no timer but its deadline.
//!
//! Beside the changes, the feed announces the ends of runs to the
//! process that started the broker ([`Feed::subscribe_ends`]): every end a
//! committed batch recorded, whoever asked for it.
//!
//! An agent run holds at most [`WAITS_PER_RUN`] waits at once (its
//! [`Seat`]s): a newer wait of a run that holds them all answers the
//! run's oldest at once, with its cursor and no changes, as its timeout
//! would. So a run cannot hold the broker's connection places with waits
//! (each wait holds its connection's place), and the human's way in stays
//! open. An agent needs one wait, or a few; one that asks for more loses
//! nothing, since the answered wait's cursor is where its next begins.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mosaic_adapters::cause::logged;
use mosaic_domain::changes::{Change, Routing, Topic, Watcher, CHANGES_LIMIT};
use mosaic_domain::evidence::RunEnd;
use mosaic_domain::{BusinessId, DecisionId, Refusal, RunId};
use mosaic_ports::EvidenceStore;
use tokio::sync::{broadcast, oneshot, watch, Notify};

use super::world::{until, Time};

/// How many changes the feed keeps in memory. A waiter further behind
/// reads the rest from the store.
const KEPT: usize = 4096;

/// How many ends of runs a subscriber may fall behind before it misses
/// some ([`broadcast::error::RecvError::Lagged`]).
pub const ENDS_KEPT: usize = 1024;

/// How many records one read of the store's ledger takes, so a wait far
/// behind holds a reader connection only briefly at a time.
const HISTORY_PAGE: usize = 1000;

/// How many `changes` waits one agent run holds at once: past it, the
/// run's oldest wait is answered at once with its cursor (see the module
/// documentation). Enough for an agent's one wait and a few of its tools
/// or restarts beside it; 4,096 connections' worth of waits is not.
pub const WAITS_PER_RUN: usize = 8;

/// Changes after a cursor, and the cursor to wait after next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The position of the last change listed, or later: every change
    /// concerning the watcher up to it is in this page or an earlier one.
    pub cursor: u64,
    /// The changes, oldest first, at most [`CHANGES_LIMIT`].
    pub changes: Vec<(u64, Change)>,
}

/// The newest committed changes and the waiters' signals.
#[derive(Debug)]
pub struct Feed {
    kept: Mutex<Kept>,
    topics: Mutex<HashMap<Topic, Arc<Notify>>>,
    closed: watch::Sender<bool>,
    /// Each run's waits, oldest first, with the signal that answers one
    /// early.
    seats: Mutex<HashMap<Run, Seats>>,
    /// The number of the next seat.
    next_seat: AtomicU64,
    /// The ends of runs, to whoever subscribed.
    ends: broadcast::Sender<RunEnd>,
}

/// An agent run: its business and its run id.
pub(super) type Run = (BusinessId, RunId);

/// A run's taken seats, oldest first: each seat's number and the signal
/// that answers its wait early.
type Seats = VecDeque<(u64, oneshot::Sender<()>)>;

/// A wait's place among its run's [`WAITS_PER_RUN`]; given back when
/// dropped.
pub(super) struct Seat<'a> {
    feed: &'a Feed,
    run: Run,
    number: u64,
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        let mut seats = self.feed.seats();
        if let Some(held) = seats.get_mut(&self.run) {
            held.retain(|(number, _)| *number != self.number);
            if held.is_empty() {
                seats.remove(&self.run);
            }
        }
    }
}

/// The changes in memory: every change at a position after `start` and up
/// to `head`, and none other.
#[derive(Debug)]
struct Kept {
    start: u64,
    head: u64,
    changes: VecDeque<(u64, Change)>,
}

/// What the memory says about the changes after a cursor.
enum Scan {
    /// The memory holds everything after the cursor.
    Page(Page),
    /// The positions after the cursor up to this one are only in the store.
    Below(u64),
}

impl Feed {
    /// A feed whose store's newest record is at `head`.
    pub fn new(head: u64) -> Self {
        Self {
            kept: Mutex::new(Kept {
                start: head,
                head,
                changes: VecDeque::new(),
            }),
            topics: Mutex::new(HashMap::new()),
            closed: watch::channel(false).0,
            seats: Mutex::new(HashMap::new()),
            next_seat: AtomicU64::new(0),
            ends: broadcast::channel(ENDS_KEPT).0,
        }
    }

    /// Every end of a run committed from now on, in commit order.
    pub fn subscribe_ends(&self) -> broadcast::Receiver<RunEnd> {
        self.ends.subscribe()
    }

    /// Announces the ends of runs a committed batch recorded.
    pub fn publish_ends(&self, ends: Vec<RunEnd>) {
        for end in ends {
            // Nobody subscribed is nobody to tell.
            let _ = self.ends.send(end);
        }
    }

    /// A seat for a new wait of `run`, and the signal that answers the
    /// wait early: when the run holds [`WAITS_PER_RUN`] already, its oldest
    /// is signalled and loses its seat. The seat is held until dropped.
    pub(super) fn seat(&self, run: &Run) -> (Seat<'_>, oneshot::Receiver<()>) {
        let (signal, superseded) = oneshot::channel();
        let number = self.next_seat.fetch_add(1, Ordering::Relaxed);
        let mut seats = self.seats();
        let held = seats.entry(run.clone()).or_default();
        while held.len() >= WAITS_PER_RUN {
            if let Some((_, oldest)) = held.pop_front() {
                // A wait that has just ended by itself has nobody to tell.
                let _ = oldest.send(());
            }
        }
        held.push_back((number, signal));
        let seat = Seat {
            feed: self,
            run: run.clone(),
            number,
        };
        (seat, superseded)
    }

    /// How many waits `run` holds now.
    #[cfg(test)]
    fn seats_of(&self, run: &Run) -> usize {
        self.seats().get(run).map_or(0, VecDeque::len)
    }

    fn seats(&self) -> std::sync::MutexGuard<'_, HashMap<Run, Seats>> {
        self.seats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The position of the newest committed record.
    pub fn head(&self) -> u64 {
        self.kept().head
    }

    /// Adds a committed batch: its `changes` (positions after the current
    /// head, ascending) and the store's new `head`; then wakes the waiters
    /// of their topics.
    pub fn publish(&self, head: u64, changes: Vec<(u64, Change)>) {
        let topics: Vec<Topic> = changes.iter().flat_map(|(_, c)| c.topics()).collect();
        {
            let mut kept = self.kept();
            kept.changes.extend(changes);
            while kept.changes.len() > KEPT {
                if let Some((seq, _)) = kept.changes.pop_front() {
                    kept.start = seq;
                }
            }
            kept.head = kept.head.max(head);
        }
        let signals = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        for topic in topics {
            if let Some(signal) = signals.get(&topic) {
                signal.notify_waiters();
            }
        }
    }

    /// Ends every wait: each answers what it has. Later waits answer at
    /// once.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn signal(&self, topic: Topic) -> Arc<Notify> {
        let mut signals = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(signals.entry(topic).or_default())
    }

    /// The changes concerning `watcher` after `after` that memory holds.
    fn scan(&self, watcher: &Watcher, after: u64) -> Scan {
        let kept = self.kept();
        if after < kept.start {
            return Scan::Below(kept.start);
        }
        let first = kept.changes.partition_point(|(seq, _)| *seq <= after);
        let changes: Vec<(u64, Change)> = kept
            .changes
            .range(first..)
            .filter(|(_, change)| watcher.concerns(change))
            .take(CHANGES_LIMIT)
            .cloned()
            .collect();
        let cursor = match changes.last() {
            Some((seq, _)) if changes.len() == CHANGES_LIMIT => *seq,
            Some(_) | None => kept.head.max(after),
        };
        Scan::Page(Page { cursor, changes })
    }
}

/// The changes concerning `watcher` at positions after `after` and up to
/// `upto`, read from `store`: one page of at most [`HISTORY_PAGE`] records
/// of its business. An empty page whose cursor is below `upto` means there
/// is more to read.
///
/// # Errors
/// `storage-unavailable`.
pub fn history<S: EvidenceStore>(
    store: &S,
    watcher: &Watcher,
    after: u64,
    upto: u64,
) -> Result<Page, Refusal> {
    let storage = logged(Refusal::StorageUnavailable, "reading the change feed");
    let records = store
        .ledger(watcher.business(), after, upto, HISTORY_PAGE)
        .map_err(storage)?;
    let complete = records.len() < HISTORY_PAGE;
    let mut routings: HashMap<DecisionId, Option<Routing>> = HashMap::new();
    let mut changes = Vec::new();
    let mut cursor = after;
    for (seq, record) in records {
        cursor = seq;
        let routing = match Change::routing_needed(&record.evidence) {
            Some(id) => match routings.get(id) {
                Some(routing) => routing.clone(),
                None => {
                    let routing = store
                        .decision(id)
                        .map_err(logged(
                            Refusal::StorageUnavailable,
                            "reading the change feed",
                        ))?
                        .map(|d| Routing::of(&d));
                    routings.insert(*id, routing.clone());
                    routing
                }
            },
            None => None,
        };
        let Some(change) = Change::of(&record.evidence, routing) else {
            continue;
        };
        if watcher.concerns(&change) {
            changes.push((seq, change));
            if changes.len() == CHANGES_LIMIT {
                return Ok(Page { cursor, changes });
            }
        }
    }
    if complete {
        cursor = upto.max(after);
    }
    Ok(Page { cursor, changes })
}

/// What may end a wait before its time: the caller going away, or a
/// newer wait of its run taking its [`Seat`].
pub(super) enum Ended {
    /// The caller disconnected: nobody is answered.
    Gone,
    /// A newer wait of the run took the seat: answered like a timeout.
    Superseded,
}

/// How a wait ended.
pub(super) enum Waited {
    /// With changes, at its timeout, or because the broker closes.
    Page(Page),
    /// The caller went away; nobody is answered.
    Gone,
}

/// `changes {since, timeoutMs}`: the changes concerning `watcher` after
/// `since`, as soon as there is one, else an empty page at `wait`'s end
/// (on the clock), when the broker closes, or when `ended` says
/// [`Ended::Superseded`] (a newer wait of the same run took its
/// [`Seat`]). [`Ended::Gone`] ends the wait when the caller disconnects. `below(after, upto)` reads one page of
/// [`history`] from the store, for a cursor below the memory.
///
/// # Errors
/// What `below` returns: `storage-unavailable` when the store cannot be
/// read, `broker-unavailable` once the read side is closed.
pub(super) async fn wait<B, F>(
    feed: &Feed,
    time: &Time,
    watcher: &Watcher,
    since: u64,
    wait: Duration,
    ended: impl std::future::Future<Output = Ended>,
    mut below: B,
) -> Result<Waited, Refusal>
where
    B: FnMut(u64, u64) -> F,
    F: std::future::Future<Output = Result<Page, Refusal>>,
{
    let deadline = time.now().saturating_add(wait);
    let signals: Vec<Arc<Notify>> = watcher
        .topics()
        .into_iter()
        .map(|t| feed.signal(t))
        .collect();
    let mut closed = feed.closed.subscribe();
    tokio::pin!(ended);
    let mut after = since;
    loop {
        // Enabled before the memory is read, so no publish falls between.
        let mut notified: Vec<_> = signals.iter().map(|s| Box::pin(s.notified())).collect();
        for n in &mut notified {
            n.as_mut().enable();
        }
        match feed.scan(watcher, after) {
            Scan::Page(page) if !page.changes.is_empty() || *closed.borrow_and_update() => {
                return Ok(Waited::Page(page));
            }
            Scan::Page(page) => after = page.cursor,
            Scan::Below(start) => {
                // A long way below: one page at a time, each bounded, and
                // the caller's disconnect and deadline heard between them.
                let page = tokio::select! {
                    page = below(after, start) => page?,
                    end = &mut ended => return Ok(end.waited(after)),
                };
                let over = time.now() >= deadline || *closed.borrow_and_update();
                if !page.changes.is_empty() || over {
                    return Ok(Waited::Page(page));
                }
                after = page.cursor;
                continue;
            }
        }
        tokio::select! {
            () = futures_any(notified) => {}
            _ = closed.changed() => {}
            () = until(time, deadline) => {
                return Ok(Waited::Page(Page { cursor: after, changes: Vec::new() }));
            }
            end = &mut ended => return Ok(end.waited(after)),
        }
    }
}

impl Ended {
    /// How a wait that had reached `after` ends this way.
    fn waited(self, after: u64) -> Waited {
        match self {
            Ended::Gone => Waited::Gone,
            Ended::Superseded => Waited::Page(Page {
                cursor: after,
                changes: Vec::new(),
            }),
        }
    }
}

/// Completes when any of `waits` does.
async fn futures_any<F: std::future::Future<Output = ()> + Unpin>(mut waits: Vec<F>) {
    std::future::poll_fn(|cx| {
        for wait in &mut waits {
            if std::pin::Pin::new(&mut *wait).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str) -> Run {
        (
            BusinessId::parse("acme").expect("a business"),
            RunId::parse(name).expect("a run"),
        )
    }

    #[test]
    fn a_run_holds_at_most_its_seats_and_a_new_wait_answers_its_oldest() {
        let feed = Feed::new(0);
        let (a, b) = (run("dev-1"), run("qa-1"));
        let mut held: Vec<_> = (0..WAITS_PER_RUN).map(|_| feed.seat(&a)).collect();
        let other = feed.seat(&b);
        assert_eq!(feed.seats_of(&a), WAITS_PER_RUN);
        for (_, superseded) in &mut held {
            assert_eq!(
                superseded.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            );
        }
        // One more: the oldest is told, and only it; the other run's wait
        // is not touched.
        held.push(feed.seat(&a));
        assert_eq!(feed.seats_of(&a), WAITS_PER_RUN);
        assert_eq!(held[0].1.try_recv(), Ok(()));
        for (_, superseded) in &mut held[1..] {
            assert_eq!(
                superseded.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            );
        }
        let (_other_seat, mut other_signal) = other;
        assert_eq!(
            other_signal.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        );
        // A wait that ends gives its seat back: a new one then takes no
        // other's.
        held.remove(3);
        assert_eq!(feed.seats_of(&a), WAITS_PER_RUN - 1);
        held.push(feed.seat(&a));
        for (_, superseded) in &mut held[1..] {
            assert_eq!(
                superseded.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            );
        }
        held.clear();
        assert_eq!(feed.seats_of(&a), 0);
    }
}
