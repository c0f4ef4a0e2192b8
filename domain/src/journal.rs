//! A map with an undo journal: the state of a persistent machine.
//!
//! A machine changes state as soon as it accepts an input, but that change is
//! only *staged*: every write records the entry's previous value. When the
//! store commits, [`Journaled::commit`] forgets the undo records; when it does
//! not, [`Journaled::rollback`] puts every touched entry back, so a failed
//! commit leaves the machine exactly as it was. Marks give savepoints inside
//! one staged batch (group commit: one request's failure undoes only itself).

use std::collections::HashMap;
use std::hash::Hash;

/// A position in the undo journal, returned by [`Journaled::mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(usize);

/// A `HashMap` whose writes can be undone back to the last commit or a mark.
/// Equality compares contents and staged undo records, not iteration order.
#[derive(Debug, Clone)]
pub struct Journaled<K, V> {
    map: HashMap<K, V>,
    undo: Vec<(K, Option<V>)>,
}

impl<K: Eq + Hash, V: PartialEq> PartialEq for Journaled<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map && self.undo == other.undo
    }
}

impl<K: Eq + Hash, V: Eq> Eq for Journaled<K, V> {}

impl<K: Eq + Hash + Clone, V: Clone> Default for Journaled<K, V> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            undo: Vec::new(),
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Journaled<K, V> {
    /// The value at `key`, staged writes included.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// Every entry, staged writes included, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter()
    }

    /// How many entries there are, staged writes included.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is no entry, staged writes included.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Stages `value` at `key`.
    pub fn insert(&mut self, key: K, value: V) {
        let previous = self.map.insert(key.clone(), value);
        self.undo.push((key, previous));
    }

    /// Stages a change of the value at `key` (or of `default` when absent).
    pub fn update(&mut self, key: K, default: impl FnOnce() -> V, change: impl FnOnce(&mut V)) {
        let mut value = self.map.get(&key).cloned().unwrap_or_else(default);
        change(&mut value);
        self.insert(key, value);
    }

    /// The current journal position.
    pub fn mark(&self) -> Mark {
        Mark(self.undo.len())
    }

    /// Undoes every write staged after `mark`.
    pub fn rollback_to(&mut self, mark: Mark) {
        while self.undo.len() > mark.0 {
            let Some((key, previous)) = self.undo.pop() else {
                break;
            };
            match previous {
                Some(v) => self.map.insert(key, v),
                None => self.map.remove(&key),
            };
        }
    }

    /// Undoes every write staged since the last commit.
    pub fn rollback(&mut self) {
        self.rollback_to(Mark(0));
    }

    /// Keeps every staged write: the store has made it durable.
    pub fn commit(&mut self) {
        self.undo.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journals_are_equal_when_their_contents_and_staged_undo_records_are() {
        let committed = |pairs: &[(u8, &'static str)]| {
            let mut j = Journaled::default();
            for &(k, v) in pairs {
                j.insert(k, v);
            }
            j.commit();
            j
        };
        // Insertion order does not matter; contents do.
        assert_eq!(
            committed(&[(1, "a"), (2, "b")]),
            committed(&[(2, "b"), (1, "a")])
        );
        assert_ne!(committed(&[(1, "a")]), committed(&[(1, "b")]));
        // The same contents, one with a write still staged: a rollback
        // would tell them apart.
        let mut staged = committed(&[]);
        staged.insert(1, "a");
        assert_ne!(staged, committed(&[(1, "a")]));
        // Different staged histories behind equal contents differ too.
        let mut other = committed(&[(1, "x")]);
        other.insert(1, "a");
        assert_eq!(staged.get(&1), other.get(&1));
        assert_ne!(staged, other);
    }

    #[test]
    fn rollback_restores_overwritten_and_removes_new_entries() {
        let mut j = Journaled::default();
        j.insert(1, "a");
        j.commit();
        j.insert(1, "b");
        j.insert(2, "c");
        j.insert(1, "d");
        j.rollback();
        assert_eq!(j.get(&1), Some(&"a"));
        assert_eq!(j.get(&2), None);
        // Nothing is staged any more: a second rollback keeps the commit.
        j.rollback();
        assert_eq!(j.get(&1), Some(&"a"));
    }

    #[test]
    fn rollback_to_a_mark_keeps_earlier_staged_writes() {
        let mut j = Journaled::default();
        j.insert(1, 10);
        let m = j.mark();
        j.update(1, || 0, |v| *v += 1);
        j.update(2, || 0, |v| *v += 1);
        j.rollback_to(m);
        assert_eq!((j.get(&1), j.get(&2)), (Some(&10), None));
        j.commit();
        j.rollback();
        assert_eq!(j.get(&1), Some(&10));
    }
}
