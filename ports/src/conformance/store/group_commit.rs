//! The group-commit checks: stages of one batch, seen through the staging
//! handle, committed together, refused one stage at a time, or abandoned.
//!
//! The suite has one handle per check, so what other handles see of an open
//! batch (nothing) is left to each store's own tests. What one handle can
//! show: a batch is committed when abandoning afterwards changes nothing.

use mosaic_domain::evidence::{Evidence, MessageRecord, Stamped, Subject};
use mosaic_domain::Timestamp;

use super::evidence::*;
use super::scenario::{Rule, Scenario};
use crate::conformance::{check, check_eq, fail};
use crate::store::EvidenceStore;

/// Whether `record` is one `replay` visits.
fn machine(record: &Stamped) -> bool {
    record.evidence.is_machine_state()
}

/// `commit_staged` with no batch open, which must succeed and change
/// nothing.
#[track_caller]
fn commit_nothing<S: EvidenceStore>(sc: &mut Scenario<'_, S>, when: &str) {
    let before = sc.snapshot();
    if let Err(error) = sc.store.commit_staged() {
        fail(format_args!(
            "commit_staged with no batch open ({when}) failed: {error:?}"
        ));
    }
    sc.reads_unchanged(
        &before,
        &format!("commit_staged with no batch open ({when})"),
    );
}

/// `abandon` with no batch open (the batch before was committed, or there
/// was none), which must change nothing.
#[track_caller]
fn abandon_nothing<S: EvidenceStore>(sc: &mut Scenario<'_, S>, when: &str) {
    let before = sc.snapshot();
    sc.store.abandon();
    sc.reads_unchanged(&before, &format!("abandon with no batch open ({when})"));
}

pub(super) fn stages_commit_together<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    let setup = sc.commit(vec![launched(&a, "dev", "run-1", 100)]);
    let first = sc.stage(vec![raised(&a, 1), sent(&a, 1, to("dev"))]);
    let second = sc.stage(vec![raised(&b, 2), seen(&a, 1), delivered(&a, 1, "run-1")]);
    let third = sc.stage(vec![
        resolved(&a, 1),
        read(&a, 1, "run-1"),
        claimed(&a, "dev", "run-1"),
        refused(None),
    ]);
    sc.commit_staged();
    // The batch is committed: nothing is left to abandon.
    abandon_nothing(&mut sc, "after commit_staged");
    check_eq(
        "trail of decision 1 (records of three stages, in stage order)",
        sc.trail(&a, &Subject::Decision(did(1))),
        vec![first[0].clone(), second[1].clone(), third[0].clone()],
    );
    check_eq(
        "trail of message 1",
        sc.trail(&a, &Subject::Message(mid(1))),
        vec![first[1].clone(), second[2].clone(), third[1].clone()],
    );
    check_eq(
        "replay after the batch",
        sc.replayed(),
        vec![
            setup[0].clone(),
            first[0].clone(),
            second[0].clone(),
            second[1].clone(),
            third[0].clone(),
            third[2].clone(),
        ],
    );
    check_eq(
        "last_write is the batch's last record",
        sc.last_write(),
        Some(third[3].at),
    );
    check_eq(
        "message 1 after send, delivery and read in three stages",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), Some("run-1"), true)),
    );
    // The store goes on after a group commit.
    let after = sc.commit(vec![withdrawn(&b, 2)]);
    check_eq(
        "last_write after a later commit",
        sc.last_write(),
        Some(after[0].at),
    );
    check_eq(
        "replay after a later commit",
        sc.replayed(),
        sc.committed_where(machine),
    );
}

pub(super) fn later_stage_sees_earlier<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    sc.commit(vec![sent(&a, 2, to("dev"))]);
    let first = sc.stage(vec![
        raised(&a, 1),
        sent(&a, 1, to("dev")),
        human(&a, 1, None),
    ]);
    // Every read through the staging handle sees the stage.
    check_eq(
        "last_write sees the first stage",
        sc.last_write(),
        Some(first[2].at),
    );
    check_eq(
        "message 1, staged",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), None, false)),
    );
    check_eq(
        "undelivered sees the staged message after the committed one",
        sc.undelivered(&a, "dev", 100),
        fresh(&[2, 1]),
    );
    check_eq(
        "unread sees the staged message after the committed one",
        sc.unread(&a, &to("dev")),
        fresh(&[2, 1]),
    );
    check_eq(
        "trail of decision 1, staged",
        sc.trail(&a, &Subject::Decision(did(1))),
        vec![first[0].clone()],
    );
    check_eq(
        "replay sees the staged decision",
        sc.replayed(),
        sc.visible_where(machine),
    );
    // A stage whose every record refers to a record of the first stage.
    let second = sc.stage(vec![
        resolved(&a, 1),
        consumed(&a, 1),
        delivered(&a, 1, "run-1"),
        task_created(&a, 3, 41, 1),
        send(MessageRecord {
            in_reply_to: Some(mid(1)),
            ..message(&a, 3, to("lead"))
        }),
        allowed(&a, Some(1), None),
    ]);
    check_eq(
        "last_write sees the second stage",
        sc.last_write(),
        Some(second[5].at),
    );
    check_eq(
        "message 1, delivered in the second stage",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), Some("run-1"), false)),
    );
    check_eq(
        "undelivered after a staged delivery",
        sc.undelivered(&a, "dev", 100),
        fresh(&[2]),
    );
    let mut unread = fresh(&[2]);
    unread.push(facts(message(&a, 1, to("dev")), Some("run-1"), false));
    check_eq(
        "unread after a staged delivery",
        sc.unread(&a, &to("dev")),
        unread,
    );
    check_eq(
        "message 3, replying to a staged message",
        sc.message(3).and_then(|m| m.record.in_reply_to),
        Some(mid(1)),
    );
    check_eq(
        "tasks see a staged task.created",
        sc.tasks(&a).into_iter().map(|v| v.task).collect::<Vec<_>>(),
        vec![task(3, 41)],
    );
    // A third stage: the read of the message delivered in the second, a
    // decision seen after its staged resolution.
    let third = sc.stage(vec![read(&a, 1, "run-1"), seen(&a, 1)]);
    check_eq(
        "message 1, read in the third stage",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), Some("run-1"), true)),
    );
    check_eq(
        "unread after a staged read",
        sc.unread(&a, &to("dev")),
        fresh(&[2]),
    );
    check_eq(
        "trail of message 1 over three stages (the reply included)",
        sc.trail(&a, &Subject::Message(mid(1))),
        vec![
            first[1].clone(),
            second[2].clone(),
            second[4].clone(),
            third[0].clone(),
        ],
    );
    sc.commit_staged();
    check_eq(
        "replay after commit_staged",
        sc.replayed(),
        sc.committed_where(machine),
    );
    check_eq(
        "last_write after commit_staged",
        sc.last_write(),
        Some(third[1].at),
    );
}

pub(super) fn failing_stage_rolls_back_only_itself<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    sc.commit(vec![raised(&a, 5)]);
    let first = sc.stage(vec![raised(&a, 1), sent(&a, 1, to("dev"))]);
    // Records valid on their own that a refused stage starts with; they
    // would break a unique rule if any of them stayed staged, because the
    // last stage stages them again.
    let valid = || vec![raised(&a, 2), sent(&a, 2, to("dev")), human(&a, 2, None)];
    let then = |bad: Evidence| {
        let mut stage = valid();
        stage.push(bad);
        stage
    };
    use Rule::{CrossBusiness, Dangling, Duplicate, Malformed, NonMonotonic};
    // Unique facts of the earlier stage count as committed.
    let stage = sc.stamp(then(raised(&a, 1)));
    sc.refuse_stage(&stage, Duplicate);
    let stage = sc.stamp(then(sent(&b, 1, to("dev"))));
    sc.refuse_stage(&stage, Duplicate);
    // A reference to nothing, and one into another business's staged record.
    let stage = sc.stamp(then(delivered(&a, 3, "run-1")));
    sc.refuse_stage(&stage, Dangling);
    let stage = sc.stamp(then(resolved(&b, 1)));
    sc.refuse_stage(&stage, CrossBusiness);
    let stage = sc.stamp(then(read(&a, 1, "run-1")));
    sc.refuse_stage(&stage, Dangling);
    let stage = sc.stamp(then(observed(&a, "task.updated", None)));
    sc.refuse_stage(&stage, Malformed);
    // Timestamps: the staged records count as written.
    let last_staged = first[1].at;
    let at_last = vec![Stamped {
        at: last_staged,
        evidence: raised(&a, 2),
    }];
    sc.refuse_stage(&at_last, NonMonotonic);
    // Later than everything committed, not than everything staged.
    let between = vec![Stamped {
        at: first[0].at,
        evidence: raised(&a, 2),
    }];
    sc.refuse_stage(&between, NonMonotonic);
    let mut backwards = sc.stamp(valid());
    backwards.push(Stamped {
        at: last_staged,
        evidence: refused(None),
    });
    sc.refuse_stage(&backwards, NonMonotonic);
    // The first stage is still staged, and a valid stage joins it: with the
    // refused stages' valid records, which shows none of them stayed.
    let mut last = valid();
    last.extend([resolved(&a, 1), delivered(&a, 1, "run-1")]);
    let last = sc.stage(last);
    sc.commit_staged();
    check_eq(
        "replay of the committed batch",
        sc.replayed(),
        sc.committed_where(machine),
    );
    check_eq(
        "trail of decision 1: the first and the last stage",
        sc.trail(&a, &Subject::Decision(did(1))),
        vec![first[0].clone(), last[3].clone()],
    );
    check_eq(
        "trail of decision 2: only the last stage",
        sc.trail(&a, &Subject::Decision(did(2))),
        vec![last[0].clone()],
    );
    check_eq(
        "message 2, staged once",
        sc.message(2),
        Some(facts(message(&a, 2, to("dev")), None, false)),
    );
    check_eq(
        "message 1, delivered in the last stage",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), Some("run-1"), false)),
    );
    check_eq(
        "last_write is the last stage's last record",
        sc.last_write(),
        Some(last[4].at),
    );
}

pub(super) fn refused_first_stage_leaves_room_for_the_next<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    let setup = sc.commit(vec![raised(&a, 1), sent(&a, 1, to("dev"))]);
    // The batch's first stage is refused, with valid records before the
    // bad one; a refused first stage after it, then a valid one.
    let valid = || vec![raised(&a, 2), sent(&a, 2, to("dev"))];
    let mut stage = sc.stamp(valid());
    stage.push(Stamped {
        at: setup[1].at,
        evidence: refused(None),
    });
    sc.refuse_stage(&stage, Rule::NonMonotonic);
    let stage = sc.stamp(vec![raised(&a, 3), delivered(&a, 9, "run-1")]);
    sc.refuse_stage(&stage, Rule::Dangling);
    let last = sc.stage(valid());
    sc.commit_staged();
    abandon_nothing(&mut sc, "after a batch that began with a refused stage");
    check_eq(
        "trail of decision 2: the valid stage, once",
        sc.trail(&a, &Subject::Decision(did(2))),
        vec![last[0].clone()],
    );
    check_eq(
        "trail of decision 3: nothing",
        sc.trail(&a, &Subject::Decision(did(3))),
        vec![],
    );
    check_eq(
        "last_write is the valid stage's last record",
        sc.last_write(),
        Some(last[1].at),
    );
    // And the next batch chains on from it.
    let next = sc.commit(vec![raised(&a, 3)]);
    check_eq(
        "trail of decision 3, committed next",
        sc.trail(&a, &Subject::Decision(did(3))),
        vec![next[0].clone()],
    );
}

pub(super) fn abandon_drops_everything<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    let setup = sc.commit(vec![raised(&a, 1), sent(&a, 1, to("dev"))]);
    let before = sc.snapshot();
    let first = sc.stage(vec![
        raised(&a, 2),
        resolved(&a, 1),
        delivered(&a, 1, "run-1"),
    ]);
    let second = sc.stage(vec![
        human(&a, 1, None),
        task_created(&a, 3, 41, 1),
        read(&a, 1, "run-1"),
        sent(&a, 2, to("dev")),
        launched(&a, "dev", "run-1", 100),
    ]);
    check(
        "the stages are seen before abandon",
        sc.message(2).is_some(),
    );
    sc.abandon();
    sc.reads_unchanged(&before, "abandon");
    check_eq(
        "last_write after abandon",
        sc.last_write(),
        Some(setup[1].at),
    );
    // Nothing stays open: a commit_staged now commits nothing.
    commit_nothing(&mut sc, "after abandon");
    // The abandoned records, at the same times (so the abandoned times are
    // free again too) and with the same ids, stage and commit again.
    sc.stage_stamped(first);
    sc.stage_stamped(second);
    sc.commit_staged();
    check_eq(
        "replay after the abandoned stages are committed",
        sc.replayed(),
        sc.committed_where(machine),
    );
    check_eq(
        "message 1, delivered and read",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), Some("run-1"), true)),
    );
    // A batch abandoned after a refused stage; then a plain commit reuses it.
    let third = sc.stage(vec![raised(&a, 3), withdrawn(&a, 2)]);
    let refused_stage = sc.stamp(vec![sent(&a, 3, to("dev")), raised(&a, 3)]);
    sc.refuse_stage(&refused_stage, Rule::Duplicate);
    sc.abandon();
    let mut again = third;
    again.extend(refused_stage.into_iter().take(1));
    sc.commit_stamped(again);
    check_eq(
        "replay after a plain commit of abandoned records",
        sc.replayed(),
        sc.committed_where(machine),
    );
    check_eq(
        "message 3",
        sc.message(3),
        Some(facts(message(&a, 3, to("dev")), None, false)),
    );
}

pub(super) fn nothing_open_is_a_no_op<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    commit_nothing(&mut sc, "on an empty store");
    abandon_nothing(&mut sc, "on an empty store");
    check_eq(
        "last_write of an empty store",
        sc.last_write(),
        None::<Timestamp>,
    );
    sc.commit(vec![raised(&a, 1), sent(&a, 1, to("dev"))]);
    commit_nothing(&mut sc, "after a commit");
    abandon_nothing(&mut sc, "after a commit");
    abandon_nothing(&mut sc, "twice");
    commit_nothing(&mut sc, "after abandon");
    sc.stage(vec![resolved(&a, 1)]);
    sc.commit_staged();
    commit_nothing(&mut sc, "after commit_staged");
    abandon_nothing(&mut sc, "after commit_staged");
    // A refused commit leaves no batch open either.
    let batch = sc.stamp(vec![raised(&a, 2), raised(&a, 1)]);
    sc.refuse(&batch, Rule::Duplicate);
    commit_nothing(&mut sc, "after a refused commit");
    abandon_nothing(&mut sc, "after a refused commit");
    // The store still writes, and has kept exactly what was committed.
    sc.commit(vec![raised(&a, 2), seen(&a, 1)]);
    check_eq("replay", sc.replayed(), sc.committed_where(machine));
}

pub(super) fn empty_stages_commit_nothing<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    let empty = sc.snapshot();
    sc.stage(vec![]);
    sc.stage(vec![]);
    sc.commit_staged();
    sc.reads_unchanged(&empty, "a batch of empty stages");
    check_eq(
        "last_write after a batch of empty stages",
        sc.last_write(),
        None::<Timestamp>,
    );
    let setup = sc.commit(vec![raised(&a, 1)]);
    let before = sc.snapshot();
    sc.stage(vec![]);
    sc.abandon();
    sc.reads_unchanged(&before, "an abandoned empty stage");
    // Empty stages between others add nothing and break nothing.
    sc.stage(vec![]);
    let staged = sc.stage(vec![resolved(&a, 1)]);
    sc.stage(vec![]);
    check_eq(
        "last_write after an empty stage",
        sc.last_write(),
        Some(staged[0].at),
    );
    sc.commit_staged();
    check_eq(
        "replay",
        sc.replayed(),
        vec![setup[0].clone(), staged[0].clone()],
    );
}

pub(super) fn commit_joins_the_open_batch<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    let staged = sc.stage(vec![raised(&a, 1), sent(&a, 1, to("dev"))]);
    // The committed batch refers to the staged records.
    let batch = sc.stamp(vec![resolved(&a, 1), delivered(&a, 1, "run-1")]);
    sc.commit_stamped(batch.clone());
    // Both are committed: nothing is left to abandon.
    abandon_nothing(&mut sc, "after a commit joined the open batch");
    commit_nothing(&mut sc, "after a commit joined the open batch");
    check_eq(
        "trail of decision 1",
        sc.trail(&a, &Subject::Decision(did(1))),
        vec![staged[0].clone(), batch[0].clone()],
    );
    check_eq(
        "message 1",
        sc.message(1),
        Some(facts(message(&a, 1, to("dev")), Some("run-1"), false)),
    );
    check_eq("last_write", sc.last_write(), Some(batch[1].at));
}
