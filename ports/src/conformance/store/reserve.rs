//! The disk-reserve checks: taking and releasing the reserve, and checking
//! the room beside it, answer as the contract says and never change what
//! the store holds, with or without a batch open. What a full filesystem does is each store's own
//! test (the fake's `set_full`, the SQLite store's page cap).

use super::evidence::*;
use super::scenario::Scenario;
use crate::conformance::{check_eq, fail};
use crate::store::EvidenceStore;

/// `take_reserve`, which must succeed on a store with room and change
/// nothing it holds.
#[track_caller]
fn take<S: EvidenceStore>(sc: &mut Scenario<'_, S>, when: &str) {
    let before = sc.snapshot();
    if let Err(error) = sc.store.take_reserve() {
        fail(format_args!("take_reserve ({when}) failed: {error:?}"));
    }
    sc.reads_unchanged(&before, &format!("take_reserve ({when})"));
}

/// `release_reserve`, which must say whether a reserve was held and change
/// nothing the store holds.
#[track_caller]
fn release<S: EvidenceStore>(sc: &mut Scenario<'_, S>, held: bool, when: &str) {
    let before = sc.snapshot();
    match sc.store.release_reserve() {
        Ok(was) => check_eq(&format!("release_reserve ({when}) says held"), was, held),
        Err(error) => fail(format_args!("release_reserve ({when}) failed: {error:?}")),
    }
    sc.reads_unchanged(&before, &format!("release_reserve ({when})"));
}

/// `check_room`, which must find room on a store with room, whether its
/// reserve is held or not, and change nothing it holds.
#[track_caller]
fn room<S: EvidenceStore>(sc: &mut Scenario<'_, S>, when: &str) {
    let before = sc.snapshot();
    if let Err(error) = sc.store.check_room() {
        fail(format_args!("check_room ({when}) failed: {error:?}"));
    }
    sc.reads_unchanged(&before, &format!("check_room ({when})"));
}

pub(super) fn taken_released_and_taken_again<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    room(&mut sc, "none taken yet");
    release(&mut sc, false, "none taken yet");
    sc.commit(vec![launched(&a, "dev", "run-1", 100)]);
    take(&mut sc, "the first time");
    room(&mut sc, "while held");
    take(&mut sc, "again, while held");
    release(&mut sc, true, "held");
    room(&mut sc, "released");
    release(&mut sc, false, "already released");
    // The store writes on without its reserve, and takes it again.
    sc.commit(vec![raised(&a, 1)]);
    take(&mut sc, "after a release");
    sc.commit(vec![resolved(&a, 1)]);
    release(&mut sc, true, "taken again");
}

pub(super) fn an_open_batch_survives_the_reserve<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    take(&mut sc, "before the batch");
    sc.stage(vec![launched(&a, "dev", "run-1", 100), raised(&a, 1)]);
    room(&mut sc, "with a batch open");
    release(&mut sc, true, "with a batch open");
    take(&mut sc, "with a batch open");
    sc.commit_staged();
    // The staged records are committed: abandoning now drops nothing.
    let before = sc.snapshot();
    sc.store.abandon();
    sc.reads_unchanged(&before, "abandon after the batch committed");
}
