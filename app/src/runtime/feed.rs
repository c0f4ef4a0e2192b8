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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mosaic_adapters::cause::logged;
use mosaic_domain::changes::{Change, Routing, Topic, Watcher, CHANGES_LIMIT};
use mosaic_domain::{DecisionId, Refusal};
use mosaic_ports::EvidenceStore;
use tokio::sync::{watch, Notify};

use super::world::{until, Time};

/// How many changes the feed keeps in memory. A waiter further behind
/// reads the rest from the store.
const KEPT: usize = 4096;

/// How many records one read of the store's ledger takes, so a wait far
/// behind holds a reader connection only briefly at a time.
const HISTORY_PAGE: usize = 1000;

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
        }
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

/// How a wait ended.
pub(super) enum Waited {
    /// With changes, at its timeout, or because the broker closes.
    Page(Page),
    /// The caller went away; nobody is answered.
    Gone,
}

/// `changes {since, timeoutMs}`: the changes concerning `watcher` after
/// `since`, as soon as there is one, else an empty page at `wait`'s end
/// (on the clock) or when the broker closes. `gone` ends the wait when
/// the caller disconnects. `below(after, upto)` reads one page of
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
    gone: impl std::future::Future<Output = ()>,
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
    tokio::pin!(gone);
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
                    () = &mut gone => return Ok(Waited::Gone),
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
            () = &mut gone => return Ok(Waited::Gone),
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
