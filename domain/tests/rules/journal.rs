//! The undo journal (`mosaic_domain::journal::Journaled`): over any
//! sequence of writes, marks, rollbacks and commits it holds exactly what a
//! plain map would after the same writes with each undone stretch taken
//! back, and its size and emptiness say so at every step.

use std::collections::HashMap;

use mosaic_domain::journal::{Journaled, Mark};
use proptest::prelude::*;

/// One step of a machine's life over its journal.
#[derive(Debug, Clone)]
enum Step {
    Insert(u8, u16),
    /// Adds to the value at the key (from 0 when absent).
    Update(u8, u16),
    Mark,
    /// Rolls back to the mark with this index among those taken since the
    /// last commit (none taken: no step).
    RollbackTo(usize),
    Rollback,
    Commit,
}

fn step() -> impl Strategy<Value = Step> {
    // Few keys, so writes overwrite each other and rollbacks restore.
    prop_oneof![
        4 => (0u8..6, any::<u16>()).prop_map(|(k, v)| Step::Insert(k, v)),
        3 => (0u8..6, 1u16..100).prop_map(|(k, v)| Step::Update(k, v)),
        2 => Just(Step::Mark),
        2 => any::<usize>().prop_map(Step::RollbackTo),
        1 => Just(Step::Rollback),
        1 => Just(Step::Commit),
    ]
}

/// The journal's contents as a map: what `iter` and `get` show.
fn contents(j: &Journaled<u8, u16>) -> HashMap<u8, u16> {
    j.iter().map(|(k, v)| (*k, *v)).collect()
}

#[test]
fn an_empty_journal_has_no_entries_and_one_write_makes_one() {
    let mut j: Journaled<u8, u16> = Journaled::default();
    assert_eq!((j.len(), j.is_empty()), (0, true));
    j.insert(1, 10);
    assert_eq!((j.len(), j.is_empty()), (1, false));
    // An overwrite is still one entry.
    j.insert(1, 11);
    assert_eq!((j.len(), j.is_empty()), (1, false));
    j.insert(2, 20);
    assert_eq!((j.len(), j.is_empty()), (2, false));
    // Staged writes undone: nothing left.
    j.rollback();
    assert_eq!((j.len(), j.is_empty()), (0, true));
}

proptest! {
    #[test]
    fn a_journal_holds_what_a_map_with_snapshots_holds(
        steps in proptest::collection::vec(step(), 0..60)
    ) {
        let mut j: Journaled<u8, u16> = Journaled::default();
        // The model: the map itself, its state at the last commit, and its
        // state at each mark taken since.
        let mut model: HashMap<u8, u16> = HashMap::new();
        let mut committed = model.clone();
        let mut marks: Vec<(Mark, HashMap<u8, u16>)> = Vec::new();
        for step in steps {
            match step {
                Step::Insert(k, v) => {
                    j.insert(k, v);
                    model.insert(k, v);
                }
                Step::Update(k, v) => {
                    j.update(k, || 0, |x| *x = x.wrapping_add(v));
                    let x = model.entry(k).or_insert(0);
                    *x = x.wrapping_add(v);
                }
                Step::Mark => marks.push((j.mark(), model.clone())),
                Step::RollbackTo(n) => {
                    if !marks.is_empty() {
                        let n = n % marks.len();
                        let (mark, at_mark) = marks[n].clone();
                        j.rollback_to(mark);
                        model = at_mark;
                        // Marks after this one point past the journal's end.
                        marks.truncate(n + 1);
                    }
                }
                Step::Rollback => {
                    j.rollback();
                    model = committed.clone();
                    marks.clear();
                }
                Step::Commit => {
                    j.commit();
                    committed = model.clone();
                    marks.clear();
                }
            }
            prop_assert_eq!(contents(&j), model.clone());
            prop_assert_eq!(j.len(), model.len());
            prop_assert_eq!(j.is_empty(), model.is_empty());
            for k in 0u8..6 {
                prop_assert_eq!(j.get(&k), model.get(&k));
            }
        }
    }
}
