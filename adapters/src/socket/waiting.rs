//! The connections that have not sent their first line yet: a pool of
//! places, each with the peer process it came from, where a full pool
//! evicts the oldest connection of the process that holds the most for a
//! newcomer of a process that holds less.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// The connections that have not authenticated yet, with the peer process
/// each came from, so that a full pool gives way to a process that holds
/// less of it (see `Limits::max_unauthenticated`).
pub(super) struct Waiting {
    cap: usize,
    next: u64,
    /// Every unauthenticated connection by its age (the order of accept).
    members: BTreeMap<u64, Member>,
    /// How many of `members` each peer process holds.
    held: HashMap<Option<u32>, usize>,
}

struct Member {
    pid: Option<u32>,
    /// Present while the connection still waits for its first line, the
    /// only time it may be evicted; firing it tells its task.
    evict: Option<oneshot::Sender<()>>,
}

impl Waiting {
    pub(super) fn new(cap: usize) -> Waiting {
        Waiting {
            cap,
            next: 0,
            members: BTreeMap::new(),
            held: HashMap::new(),
        }
    }

    /// A place for a new connection of `pid`, evicting another if the pool
    /// is full and the newcomer's process holds less than the process that
    /// holds the most; `None` when there is none for it.
    pub(super) fn enter(
        waiting: &Arc<Mutex<Waiting>>,
        pid: Option<u32>,
    ) -> Option<(Place, oneshot::Receiver<()>)> {
        let mut pool = waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.members.len() >= pool.cap && !pool.evict_for(pid) {
            return None;
        }
        let id = pool.next;
        pool.next += 1;
        let (evict, evicted) = oneshot::channel();
        pool.members.insert(
            id,
            Member {
                pid,
                evict: Some(evict),
            },
        );
        *pool.held.entry(pid).or_insert(0) += 1;
        let place = Place {
            waiting: Arc::clone(waiting),
            id,
        };
        Some((place, evicted))
    }

    /// Evicts the oldest connection still waiting for its first line of
    /// the process that holds the most, if that is more than `pid` holds.
    /// The victim's place is freed at once; its task answers it
    /// `broker-unavailable` and closes it.
    fn evict_for(&mut self, pid: Option<u32>) -> bool {
        let mine = self.held.get(&pid).copied().unwrap_or(0);
        let mut victim: Option<(u64, usize)> = None;
        for (&id, member) in &self.members {
            if member.evict.is_none() {
                continue;
            }
            let holds = self.held.get(&member.pid).copied().unwrap_or(0);
            if victim.is_none_or(|(_, most)| holds > most) {
                victim = Some((id, holds));
            }
        }
        let Some((id, _most)) = victim.filter(|&(_, most)| most > mine) else {
            return false;
        };
        if let Some(evict) = self.leave(id).and_then(|member| member.evict) {
            // A task already gone has nothing left to close.
            let _ = evict.send(());
        }
        true
    }

    /// Takes `id` out of the pool.
    fn leave(&mut self, id: u64) -> Option<Member> {
        let member = self.members.remove(&id)?;
        if let Some(count) = self.held.get_mut(&member.pid) {
            *count -= 1;
            if *count == 0 {
                self.held.remove(&member.pid);
            }
        }
        Some(member)
    }
}

/// A connection's place among the unauthenticated ones, given back when
/// dropped (unless it was evicted, which gave it back already).
pub(super) struct Place {
    waiting: Arc<Mutex<Waiting>>,
    id: u64,
}

impl Place {
    /// The first line was read whole: from now on the connection is no
    /// longer evicted (its answer is on its way).
    pub(super) fn line_read(&self) {
        let mut pool = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(member) = pool.members.get_mut(&self.id) {
            member.evict = None;
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut pool = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        pool.leave(self.id);
    }
}
