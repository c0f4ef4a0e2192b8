//! [`Budget`]: how many of something (connections, descriptors) may be
//! held at once, under a cap that may change, each held one a [`Slot`]
//! given back when dropped.
//!
//! The server counts its authenticated connections in one (the broker's
//! overall budget of descriptors for them), and a connection whose first
//! line names a holder with a budget of its own ([`super::Sender::Counted`],
//! an agent's run) takes a slot of that one too, so no holder can take
//! every place. The host that started the server may count what else it
//! holds (a proxy's descriptors) in the same budgets, through clones.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A count of held slots under a cap. Clones share the count.
#[derive(Clone)]
pub struct Budget(Arc<Count>);

struct Count {
    cap: AtomicUsize,
    held: AtomicUsize,
}

impl Budget {
    /// A budget of `cap` slots, none held.
    pub fn new(cap: usize) -> Self {
        Self(Arc::new(Count {
            cap: AtomicUsize::new(cap),
            held: AtomicUsize::new(0),
        }))
    }

    /// Takes a slot, if fewer than the cap are held.
    pub fn try_take(&self) -> Option<Slot> {
        let count = &self.0;
        let mut held = count.held.load(Ordering::Acquire);
        loop {
            if held >= count.cap.load(Ordering::Acquire) {
                return None;
            }
            match count.held.compare_exchange_weak(
                held,
                held + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(Slot(self.clone())),
                Err(now) => held = now,
            }
        }
    }

    /// Sets the cap. Slots held beyond a lowered cap stay held; no new one
    /// is given until fewer than the cap are.
    pub fn set_cap(&self, cap: usize) {
        self.0.cap.store(cap, Ordering::Release);
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.0.cap.load(Ordering::Acquire)
    }

    /// How many slots are held now.
    pub fn held(&self) -> usize {
        self.0.held.load(Ordering::Acquire)
    }

    /// Whether `self` and `other` are the same budget (clones of one).
    pub fn is(&self, other: &Budget) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("cap", &self.cap())
            .field("held", &self.held())
            .finish()
    }
}

impl PartialEq for Budget {
    fn eq(&self, other: &Budget) -> bool {
        self.is(other)
    }
}

impl Eq for Budget {}

/// One held slot of a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Slot(Budget);

impl Drop for Slot {
    fn drop(&mut self) {
        (self.0).0.held.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Budget;

    /// One step of a holder: take a slot, give one back, or change the cap.
    #[derive(Debug, Clone)]
    enum Step {
        Take,
        Give(usize),
        Cap(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => Just(Step::Take),
            2 => any::<usize>().prop_map(Step::Give),
            1 => (0_usize..8).prop_map(Step::Cap),
        ]
    }

    proptest! {
        /// Against a plain count: a take succeeds exactly when fewer than
        /// the cap are held, and `held` is the number of live slots.
        #[test]
        fn a_budget_behaves_as_a_count_under_its_cap(
            cap in 0_usize..8,
            steps in proptest::collection::vec(step(), 0..64),
        ) {
            let budget = Budget::new(cap);
            let mut model_cap = cap;
            let mut live = Vec::new();
            for step in steps {
                match step {
                    Step::Take => {
                        let taken = budget.try_take();
                        prop_assert_eq!(taken.is_some(), live.len() < model_cap);
                        live.extend(taken);
                    }
                    Step::Give(n) => {
                        if !live.is_empty() {
                            live.swap_remove(n % live.len());
                        }
                    }
                    Step::Cap(new) => {
                        budget.set_cap(new);
                        model_cap = new;
                    }
                }
                prop_assert_eq!(budget.held(), live.len());
                prop_assert_eq!(budget.cap(), model_cap);
            }
        }
    }

    #[test]
    fn slots_are_taken_up_to_the_cap_and_given_back_when_dropped() {
        let budget = Budget::new(2);
        let a = budget.try_take().expect("one");
        let b = budget.try_take().expect("two");
        assert!(budget.try_take().is_none(), "the cap is reached");
        assert_eq!(budget.held(), 2);
        drop(a);
        let c = budget.clone().try_take().expect("one given back");
        assert_eq!(budget.held(), 2);
        // A lowered cap keeps what is held and gives nothing more.
        budget.set_cap(1);
        assert!(budget.try_take().is_none());
        drop(b);
        assert!(budget.try_take().is_none(), "still one held of one");
        drop(c);
        let d = budget.try_take().expect("under the cap again");
        budget.set_cap(3);
        let e = budget.try_take().expect("a raised cap");
        assert_eq!((budget.held(), budget.cap()), (2, 3));
        drop((d, e));
        assert_eq!(budget.held(), 0);
        assert!(budget.is(&budget.clone()) && !budget.is(&Budget::new(3)));
    }

    #[test]
    fn no_more_than_the_cap_is_held_when_many_threads_take_at_once() {
        let budget = Budget::new(5);
        let taken: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    scope.spawn(|| {
                        (0..100)
                            .filter_map(|_| budget.try_take())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a thread"))
                .collect()
        });
        assert_eq!(taken.len(), 5);
        assert_eq!(budget.held(), 5);
        drop(taken);
        assert_eq!(budget.held(), 0);
    }
}
