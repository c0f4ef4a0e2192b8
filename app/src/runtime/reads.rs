//! The read path: `inbox`, `tasks`, `agents`, `trail`, `head` and
//! `history` answered beside the writer, never behind it, each bounded so
//! that its answer fits what a client takes whatever agents send
//! ([`bounded`]: the human's inbox cut, the array reads listed while they
//! fit).
//!
//! A read needs two things: store facts (messages, tasks, trails), which it
//! takes from a reader connection of its own (in WAL mode a reader sees the
//! last commit and never waits for a commit or its sync), and bus state
//! (open decisions, who holds which role), which only the writer thread
//! has. The writer therefore publishes a [`View`] of the bus after every
//! batch that changed machine state, before it answers that batch, so a
//! caller always reads at least its own acknowledged writes. A read may see
//! store facts a little newer than the view (a commit between the two
//! lookups); it never sees anything uncommitted.
//!
//! `changes` is not a read here: it waits on the change feed
//! ([`super::changes`]), which `Reads` holds, and uses the view only to
//! know who is waiting ([`View::watcher`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use mosaic_adapters::wire::{self, bounded, Query, RunLife, UuidKind, UuidRef};
use mosaic_client::wire::reads::Head;
use mosaic_domain::bus::{Bus, Caller};
use mosaic_domain::changes::Watcher;
use mosaic_domain::claims::{Ended, LaunchSwitch, Occupancy};
use mosaic_domain::decisions::{Decision, Status};
use mosaic_domain::evidence::{LaunchRecord, Recipient, Route, Subject};
use mosaic_domain::messages::{MessageFacts, INBOX_LIMIT};
use mosaic_domain::{BusinessId, DecisionId, Refusal, RoleInstance, RunId};
use mosaic_ports::{EvidenceStore, StoreReaders};

use super::calls::Calls;
use super::exits::Exits;
use super::feed::Feed;
use serde_json::Value;

/// The bus state reads need, as of one committed batch.
#[derive(Debug, Clone)]
pub(crate) struct View {
    /// Every open decision, blocking ones first, then in raise order.
    open: Vec<Decision>,
    /// Every bound run's record, whether it holds its role, whether it
    /// was revoked from it, and its end, ordered by business, role and run.
    agents: Vec<(LaunchRecord, bool, bool, Option<Ended>)>,
    /// Every role of every business (fixed for a broker's life).
    roles: Arc<BTreeSet<(BusinessId, RoleInstance)>>,
    /// The businesses whose launching is switched off.
    off: BTreeSet<BusinessId>,
    /// What each run that ended is answered from then on.
    ended: BTreeMap<RunId, Refusal>,
    /// Which runs' processes exited (fixed for a broker's life, shared by
    /// every view).
    exits: Arc<Exits>,
    /// What each run last asked, and whether it waits (shared by every
    /// view).
    calls: Arc<Calls>,
}

impl View {
    /// The view of `bus`, sharing the role list of an earlier view.
    pub(crate) fn of(
        bus: &Bus,
        roles: Arc<BTreeSet<(BusinessId, RoleInstance)>>,
        exits: Arc<Exits>,
        calls: Arc<Calls>,
    ) -> Self {
        let mut open: Vec<Decision> = bus
            .decisions()
            .iter()
            .filter(|d| d.status == Status::Open)
            .cloned()
            .collect();
        // The inbox's order (docs/human.md): blocking decisions first, then
        // the oldest; raise order, since decision ids are random.
        let decisions = bus.decisions();
        open.sort_by_key(|d| {
            let raised = decisions.raise_order(&d.record.id).unwrap_or(usize::MAX);
            (!d.record.fields.blocking, raised)
        });
        let claims = bus.claims();
        let mut agents: Vec<_> = bus
            .launches()
            .records()
            .map(|r| {
                let seat = claims.seat(&r.business, &r.role);
                let holding =
                    seat.is_some_and(|s| s.occupancy() == &Occupancy::Held(r.run.clone()));
                let revoked = seat.is_some_and(|s| s.is_revoked(&r.run));
                (r.clone(), holding, revoked, claims.ended(&r.run).cloned())
            })
            .collect();
        agents.sort_by(|(a, ..), (b, ..)| {
            (&a.business, &a.role, &a.run).cmp(&(&b.business, &b.role, &b.run))
        });
        let off = roles
            .iter()
            .map(|(business, _)| business)
            .filter(|b| bus.launches().switch(b) == LaunchSwitch::Off)
            .cloned()
            .collect();
        let ended = claims
            .ends()
            .map(|(run, end)| (run.clone(), end.ending().refusal()))
            .collect();
        Self {
            open,
            agents,
            roles,
            off,
            ended,
            exits,
            calls,
        }
    }

    /// The view of `bus`, with its own role list, `exits` and `calls`.
    pub(crate) fn first(
        bus: &Bus,
        businesses: &[BusinessId],
        exits: Arc<Exits>,
        calls: Arc<Calls>,
    ) -> Self {
        let roles = businesses
            .iter()
            .filter_map(|id| bus.business(id))
            .flat_map(|b| b.roles().map(|(role, _)| (b.id().clone(), role.clone())))
            .collect();
        Self::of(bus, Arc::new(roles), exits, calls)
    }

    /// Whether `business` is one of the broker's.
    pub(crate) fn knows(&self, business: &BusinessId) -> bool {
        self.roles.iter().any(|(b, _)| b == business)
    }

    /// Whether the process `pid` started at `start_time` is a bound launch.
    pub(crate) fn is_launch(&self, pid: u32, start_time: u64) -> bool {
        self.agents
            .iter()
            .any(|(r, ..)| r.pid == pid && r.start_time == start_time)
    }

    /// Who `caller` waits for changes as: an agent that holds its role, or
    /// a reader. Whether a caller kind may wait at all is the verb table's
    /// ([`Watcher::of`] asks it).
    ///
    /// # Errors
    /// `not-holder` for an agent that does not hold its role now;
    /// `not-authorized` for a caller kind the table does not serve.
    pub(crate) fn watcher(&self, caller: &Caller) -> Result<Watcher, Refusal> {
        self.check_live(caller)?;
        Watcher::of(caller, |business, agent| {
            self.agents
                .iter()
                .any(|(r, holding, ..)| *holding && &r.business == business && r.run == agent.run)
        })
    }

    /// Refuses an agent whose run ended, as the bus refuses its writes.
    ///
    /// # Errors
    /// `run-ended`, or `run-revoked` for a run that ended by a revoke.
    pub(crate) fn check_live(&self, caller: &Caller) -> Result<(), Refusal> {
        let run = match caller {
            Caller::Agent { agent, .. } => &agent.run,
            Caller::Reader { .. } | Caller::Human { .. } => return Ok(()),
        };
        match self.ended.get(run) {
            Some(refusal) => Err(*refusal),
            None => Ok(()),
        }
    }

    /// The role list, for the next view.
    pub(crate) fn roles(&self) -> Arc<BTreeSet<(BusinessId, RoleInstance)>> {
        Arc::clone(&self.roles)
    }

    /// The exits, for the next view.
    pub(crate) fn exits(&self) -> Arc<Exits> {
        Arc::clone(&self.exits)
    }

    /// The runs' calls, for the next view and for the connections.
    pub(crate) fn calls(&self) -> Arc<Calls> {
        Arc::clone(&self.calls)
    }
}

/// Whether a UUID subject names a decision or a message of `business`.
///
/// # Errors
/// `cross-business`, `unknown-reference`, `storage-unavailable`.
pub(crate) fn kind_of<S: EvidenceStore>(
    store: &S,
    business: &BusinessId,
    uuid: &UuidRef,
) -> Result<UuidKind, Refusal> {
    let storage = |e| mosaic_adapters::cause::logged(Refusal::StorageUnavailable, "a read")(e);
    if let Some(owner) = store.decision_business(&uuid.decision()).map_err(storage)? {
        return if &owner == business {
            Ok(UuidKind::Decision)
        } else {
            Err(Refusal::CrossBusiness)
        };
    }
    match store.message(&uuid.message()).map_err(storage)? {
        Some(m) if &m.record.business == business => Ok(UuidKind::Message),
        Some(_) => Err(Refusal::CrossBusiness),
        None => Err(Refusal::UnknownReference),
    }
}

/// The read projections, scoped to the caller's business. An agent's inbox
/// is its role's; a reader's (and the human's) is the human's.
///
/// # Errors
/// `unknown-role` for a trail of a role the business lacks;
/// `storage-unavailable`.
pub(crate) fn read<S: EvidenceStore>(
    view: &View,
    store: &S,
    caller: &Caller,
    query: Query,
) -> Result<Value, Refusal> {
    let business = caller.business();
    let storage = |e| mosaic_adapters::cause::logged(Refusal::StorageUnavailable, "a read")(e);
    Ok(match query {
        Query::Inbox { after } => {
            let (decisions, messages, more) = inbox(view, store, caller, after.as_ref())?;
            match caller {
                Caller::Agent { .. } => wire::inbox_json(&decisions, &messages, more),
                Caller::Reader { .. } | Caller::Human { .. } => {
                    wire::value_of(&bounded::human_inbox(&decisions, &messages, more))
                }
            }
        }
        Query::Tasks => wire::value_of(&bounded::listed(
            store
                .tasks(business)
                .map_err(storage)?
                .iter()
                .map(wire::task_row),
        )),
        Query::Agents => {
            let launching = !view.off.contains(business);
            wire::value_of(&bounded::listed(
                view.agents
                    .iter()
                    .filter(|(r, ..)| &r.business == business)
                    .map(|(r, holding, revoked, ended)| {
                        let mut waits: Vec<&Decision> = view
                            .open
                            .iter()
                            .filter(|d| {
                                &d.record.business == business && d.record.raiser.run == r.run
                            })
                            .collect();
                        let more = waits.len().saturating_sub(bounded::WAITS_ON);
                        waits.truncate(bounded::WAITS_ON);
                        let exited = view.exits.of(r, ended.as_ref().map(Ended::ending));
                        let (restarts, usage) = view.exits.life(&r.run);
                        let life = RunLife {
                            ended: ended
                                .as_ref()
                                .and_then(|e| e.at().map(|at| (at, *e.ending()))),
                            restarts,
                            usage,
                        };
                        let mut row =
                            wire::agent_row(r, *holding, *revoked, launching, &waits, exited, life);
                        let (last, waiting) = view.calls.of(&r.run);
                        wire::with_calls(&mut row, last, waiting);
                        row.waits_on_more = u64::try_from(more).unwrap_or(u64::MAX);
                        row
                    }),
            ))
        }
        Query::Trail(subject) => {
            // A role subject must name a role of this business, as everywhere.
            if let Subject::Role(role) = &subject {
                if !view.roles.contains(&(business.clone(), role.clone())) {
                    return Err(Refusal::UnknownRole);
                }
            }
            let records = store.trail(business, &subject).map_err(storage)?;
            wire::value_of(&bounded::listed(records.iter().map(wire::record)))
        }
        Query::Head => {
            let head = store.chain_head().map_err(storage)?;
            wire::value_of(&Head {
                head: head.hash_base64(),
                note: head.note(),
                size: head.size,
            })
        }
        Query::History { before } => {
            let page = store
                .closings(business, before, bounded::HISTORY_ROWS)
                .map_err(storage)?;
            let mut listed = bounded::listed(page.rows.iter().filter_map(wire::closed_row));
            listed.more = listed.more.saturating_add(page.older);
            wire::value_of(&listed)
        }
        // `changes` has one way in, `super::changes::page`, which every
        // caller of the runtime takes before a read.
        // A caller the verb table does not serve is refused as everywhere.
        Query::Changes { .. } => {
            view.watcher(caller)?;
            return Err(Refusal::BadRequest);
        }
    })
}

/// [`read`]'s result as JSON text: the inbox, the read agents make most,
/// is written straight to text without building a `Value`.
///
/// # Errors
/// As [`read`].
pub(crate) fn read_text<S: EvidenceStore>(
    view: &View,
    store: &S,
    caller: &Caller,
    query: Query,
) -> Result<String, Refusal> {
    match query {
        Query::Inbox { after } => {
            let (decisions, messages, more) = inbox(view, store, caller, after.as_ref())?;
            Ok(match caller {
                Caller::Agent { .. } => wire::inbox_text(&decisions, &messages, more),
                Caller::Reader { .. } | Caller::Human { .. } => {
                    wire::text_of(&bounded::human_inbox(&decisions, &messages, more))
                }
            })
        }
        Query::Tasks
        | Query::Agents
        | Query::Trail(_)
        | Query::Head
        | Query::History { .. }
        | Query::Changes { .. } => read(view, store, caller, query).map(|value| value.to_string()),
    }
}

/// The caller's inbox: the open decisions routed to it (blocking ones
/// first, then oldest, as the view keeps them) and its oldest
/// [`INBOX_LIMIT`] unread messages. An agent's inbox is its role's; a
/// reader's (and the human's) is the human's, which also says how many
/// unread messages lie beyond those (the third value; 0 for an agent,
/// whose inbox never said it). With `after`, the decisions start after
/// that one, wherever it stands in that order: the next page of a human's
/// inbox that could not list them all.
///
/// # Errors
/// For an `after` that is not one of the caller's open decisions:
/// `decision-closed` when it no longer waits, `cross-business` for another
/// business's, else `unknown-reference`; `storage-unavailable`.
fn inbox<'v, S: EvidenceStore>(
    view: &'v View,
    store: &S,
    caller: &Caller,
    after: Option<&DecisionId>,
) -> Result<(Vec<&'v Decision>, Vec<MessageFacts>, u64), Refusal> {
    let business = caller.business();
    let (route, recipient) = match caller {
        Caller::Agent { agent, .. } => (
            Route::Role(agent.role.clone()),
            Recipient::Role(agent.role.clone()),
        ),
        Caller::Reader { .. } | Caller::Human { .. } => (Route::Human, Recipient::Human),
    };
    let mut decisions: Vec<&Decision> = view
        .open
        .iter()
        .filter(|d| &d.record.business == business && d.record.route == route)
        .collect();
    let failed = || mosaic_adapters::cause::logged(Refusal::StorageUnavailable, "a read");
    if let Some(after) = after {
        let Some(at) = decisions.iter().position(|d| &d.record.id == after) else {
            return Err(match store.decision_business(after).map_err(failed())? {
                Some(owner) if &owner != business => Refusal::CrossBusiness,
                Some(_) if !view.open.iter().any(|d| &d.record.id == after) => {
                    Refusal::DecisionClosed
                }
                Some(_) | None => Refusal::UnknownReference,
            });
        };
        decisions.drain(..=at);
    }
    let messages = store
        .unread(business, &recipient, INBOX_LIMIT)
        .map_err(failed())?;
    // Counting costs a walk over every unread message, so only a full page
    // of the human's inbox asks.
    let more = match caller {
        Caller::Reader { .. } | Caller::Human { .. } if messages.len() == INBOX_LIMIT => store
            .unread_count(business, &recipient)
            .map_err(failed())?
            .saturating_sub(INBOX_LIMIT as u64),
        Caller::Agent { .. } | Caller::Reader { .. } | Caller::Human { .. } => 0,
    };
    Ok((decisions, messages, more))
}

/// Reader connections per broker: enough for both cores and a read or two
/// waiting on a page fault.
pub(crate) const READERS: usize = 4;

/// The broker's read side: the latest view and a fixed pool of reader
/// connections.
///
/// The pool is opened at boot and never grows: a connection opened later
/// would create a new WAL file if an operator deleted the one the broker
/// writes (see `SqliteStore`'s deleted-WAL guard), and then read another
/// file than the writer writes. A read waits for a free connection.
/// [`Reads::close`] drops them all before the writer's own connection
/// closes, so the writer's close is the last and checkpoints the WAL.
#[derive(Debug)]
pub(crate) struct Reads<S> {
    view: RwLock<Arc<View>>,
    pool: Mutex<Option<Vec<S>>>,
    free: Condvar,
    /// One permit per connection: a read waits for one as a task, before
    /// it takes a blocking thread (see [`Reads::permit`]).
    permits: Arc<tokio::sync::Semaphore>,
    /// The change feed `changes` waits on.
    feed: Arc<Feed>,
}

impl<S: StoreReaders> Reads<S> {
    /// The read side of `store` ([`READERS`] handles of its own), starting
    /// from `view`, with a change feed whose newest record is at `head`.
    ///
    /// # Errors
    /// `storage-unavailable` when a reader handle cannot be opened.
    pub(crate) fn open(store: &S, view: View, head: u64) -> Result<Self, Refusal> {
        let pool = (0..READERS)
            .map(|_| {
                store.reader().map_err(mosaic_adapters::cause::logged(
                    Refusal::StorageUnavailable,
                    "opening a reader",
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            view: RwLock::new(Arc::new(view)),
            pool: Mutex::new(Some(pool)),
            free: Condvar::new(),
            permits: Arc::new(tokio::sync::Semaphore::new(READERS)),
            feed: Arc::new(Feed::new(head)),
        })
    }

    /// The change feed.
    pub(crate) fn feed(&self) -> &Arc<Feed> {
        &self.feed
    }

    /// Replaces the view (the writer, after a batch changed machine state).
    pub(crate) fn publish(&self, view: View) {
        if let Ok(mut current) = self.view.write() {
            *current = Arc::new(view);
        }
    }

    /// The latest view.
    pub(crate) fn view(&self) -> Option<Arc<View>> {
        self.view.read().ok().map(|v| Arc::clone(&v))
    }

    /// Waits (as a task, holding no thread) until a reader connection is
    /// free for the caller; hold the permit across [`Reads::with_store`], so
    /// at most [`READERS`] blocking threads ever run reads.
    ///
    /// # Errors
    /// `broker-unavailable` once the pool is closed.
    pub(crate) async fn permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Refusal> {
        Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| Refusal::BrokerUnavailable)
    }

    /// Runs `read` on a reader connection, waiting for a free one.
    /// Blocking: call it where blocking is allowed.
    ///
    /// # Errors
    /// `broker-unavailable` once the pool is closed; what `read` returns.
    pub(crate) fn with_store<T>(
        &self,
        read: impl FnOnce(&View, &S) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let view = self.view().ok_or(Refusal::BrokerUnavailable)?;
        let store = {
            let mut pool = self.pool.lock().map_err(|_| Refusal::BrokerUnavailable)?;
            loop {
                match pool.as_mut() {
                    None => return Err(Refusal::BrokerUnavailable),
                    Some(free) => {
                        if let Some(store) = free.pop() {
                            break store;
                        }
                    }
                }
                pool = self
                    .free
                    .wait(pool)
                    .map_err(|_| Refusal::BrokerUnavailable)?;
            }
        };
        let lease = Lease {
            reads: self,
            store: Some(store),
        };
        match &lease.store {
            Some(store) => read(&view, store),
            None => Err(Refusal::BrokerUnavailable),
        }
    }

    /// Takes `store` back into the pool, or drops it after `close`.
    fn give_back(&self, store: S) {
        if let Ok(mut pool) = self.pool.lock() {
            if let Some(free) = pool.as_mut() {
                free.push(store);
                self.free.notify_one();
            }
        }
    }

    /// Closes every idle reader connection; later reads are refused, and
    /// every wait for changes ends.
    pub(crate) fn close(&self) {
        self.feed.close();
        self.permits.close();
        if let Ok(mut pool) = self.pool.lock() {
            *pool = None;
        }
        self.free.notify_all();
    }
}

/// A reader connection out of the pool; it goes back on drop, so a read that
/// panics cannot shrink the pool.
struct Lease<'a, S: StoreReaders> {
    reads: &'a Reads<S>,
    store: Option<S>,
}

impl<S: StoreReaders> Drop for Lease<'_, S> {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            self.reads.give_back(store);
        }
    }
}
