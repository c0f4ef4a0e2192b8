//! The [`EvidenceStore`] suite.
//!
//! Every check starts from an empty store and writes evidence over a small
//! fixed universe (two businesses, three roles, a few decisions, messages and
//! tasks), so a snapshot of every read over that universe shows whether a
//! refused batch left any trace.
//!
//! - `scenario.rs`: the driver of one check (stamping, committing,
//!   refusing, snapshotting every read); `evidence.rs` the fixed universe
//!   and builders of its evidence;
//! - `rules.rs`: batches that break a rule, each refused whole;
//!   `group_commit.rs`: stages of one batch; `messages.rs`: the message
//!   reads; `closings.rs`: the closed decisions; `reserve.rs`: the disk
//!   reserve.

mod closings;
mod evidence;
mod group_commit;
mod messages;
mod reserve;
mod rules;
mod scenario;

use std::collections::HashMap;

use mosaic_domain::evidence::{
    Evidence, LaunchRecord, MessageRecord, Observation, Recipient, Sender, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, Timestamp};

use self::closings::*;
use self::evidence::*;
use self::group_commit::*;
use self::messages::*;
use self::reserve::*;
use self::rules::*;
use self::scenario::Scenario;
use super::{check, check_eq, fail, run_checks, Check};
use crate::store::{EvidenceStore, StoreReaders, TaskView};
use mosaic_domain::changes::{Change, Routing};

/// Runs every store check, each on a fresh, empty store from `make`.
///
/// Covers: round trip and commit order; every timestamp, shape, unique,
/// reference and cross-business rule of [`EvidenceStore::commit`], against
/// committed records and within one batch, each showing that the whole
/// refused batch stays invisible (its valid records can be committed
/// afterwards); what the rules allow on purpose (references to earlier
/// records of the same batch, `Seen` after a decision closed, an identical
/// launch binding, observations of other kinds); `replay`, `last_write`,
/// `message`, `undelivered`, `unread` (in `messages.rs`), `tasks`, `trail`
/// and `closings` (in `closings.rs`) against their contracts.
///
/// Group commit (`group_commit.*`, one handle per check): stages committed
/// together by [`EvidenceStore::commit_staged`], in stage order; reads and
/// `last_write` through the staging handle seeing the staged records, and a
/// stage referring to records of earlier stages; a stage that breaks a rule
/// (against an earlier stage: a repeated unique fact, a reference into
/// another business, a timestamp not after the last staged one) refused as a
/// whole while the earlier stages stay; [`EvidenceStore::abandon`] dropping
/// every stage, whose ids and times are then free again; `commit_staged` and
/// `abandon` with no batch open (none yet, or after a commit, an abandon or
/// a refused commit) changing nothing; empty stages; a `commit` joining the
/// open batch. What other handles see of an open batch (nothing) needs a
/// second handle, so each store tests it on its own.
///
/// The disk reserve (`reserve.*`): taken, taken again, released (saying
/// whether it was held) and taken again, with and without a batch open,
/// never changing what the store holds.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<S: EvidenceStore>(make: impl FnMut() -> S) {
    let mut checks: Vec<Check<'_, S>> = vec![
        Check::new("empty_store_reads_nothing", empty_store_reads_nothing::<S>),
        Check::new(
            "chain_head_follows_commits",
            chain_head_follows_commits::<S>,
        ),
        Check::new(
            "empty_batch_commits_nothing",
            empty_batch_commits_nothing::<S>,
        ),
        Check::new(
            "round_trip_in_commit_order",
            round_trip_in_commit_order::<S>,
        ),
        Check::new(
            "replay_is_exactly_machine_state",
            replay_is_exactly_machine_state::<S>,
        ),
        Check::new(
            "last_write_follows_commits",
            last_write_follows_commits::<S>,
        ),
        Check::new("same_batch_references", same_batch_references::<S>),
        Check::new(
            "seen_repeats_around_terminal_events",
            seen_repeats_around_terminal_events::<S>,
        ),
        Check::new(
            "identical_launch_binding_commits",
            identical_launch_binding_commits::<S>,
        ),
        Check::new(
            "observations_of_other_shapes_commit",
            observations_of_other_shapes_commit::<S>,
        ),
        Check::new("message_facts", message_facts::<S>),
        Check::new(
            "undelivered_order_and_limit",
            undelivered_order_and_limit::<S>,
        ),
        Check::new("unread", unread::<S>),
        Check::new(
            "tasks_newest_and_tombstones",
            tasks_newest_and_tombstones::<S>,
        ),
        Check::new("trail_equals_concerns", trail_equals_concerns::<S>),
        Check::new(
            "closings_match_the_committed_history",
            closings_match_the_committed_history::<S>,
        ),
        Check::new(
            "closings_page_newest_first",
            closings_page_newest_first::<S>,
        ),
        Check::new(
            "ledger_positions_count_commits",
            ledger_positions_count_commits::<S>,
        ),
        Check::new("ledger_windows_and_limits", ledger_windows_and_limits::<S>),
        Check::new("decision_records", decision_records::<S>),
        Check::new(
            "non_monotonic.equal_in_batch",
            non_monotonic_equal_in_batch::<S>,
        ),
        Check::new(
            "non_monotonic.backwards_in_batch",
            non_monotonic_backwards_in_batch::<S>,
        ),
        Check::new(
            "non_monotonic.equal_to_last_write",
            non_monotonic_equal_to_last::<S>,
        ),
        Check::new(
            "non_monotonic.before_last_write",
            non_monotonic_before_last::<S>,
        ),
        Check::new(
            "group_commit.stages_commit_together",
            stages_commit_together::<S>,
        ),
        Check::new(
            "group_commit.later_stage_sees_earlier",
            later_stage_sees_earlier::<S>,
        ),
        Check::new(
            "group_commit.failing_stage_rolls_back_only_itself",
            failing_stage_rolls_back_only_itself::<S>,
        ),
        Check::new(
            "group_commit.refused_first_stage_leaves_room_for_the_next",
            refused_first_stage_leaves_room_for_the_next::<S>,
        ),
        Check::new(
            "group_commit.abandon_drops_everything",
            abandon_drops_everything::<S>,
        ),
        Check::new(
            "group_commit.nothing_open_is_a_no_op",
            nothing_open_is_a_no_op::<S>,
        ),
        Check::new(
            "group_commit.empty_stages_commit_nothing",
            empty_stages_commit_nothing::<S>,
        ),
        Check::new(
            "group_commit.commit_joins_the_open_batch",
            commit_joins_the_open_batch::<S>,
        ),
        Check::new(
            "reserve.taken_released_and_taken_again",
            taken_released_and_taken_again::<S>,
        ),
        Check::new(
            "reserve.an_open_batch_survives_the_reserve",
            an_open_batch_survives_the_reserve::<S>,
        ),
    ];
    for case in rule_cases() {
        let name = format!("refuses.{}", case.name);
        checks.push(Check::new(name, move |store: &mut S| {
            refuse_case(store, &case)
        }));
    }
    run_checks("store", checks, make);
}

/// Runs the [`StoreReaders`] checks, each on a fresh, empty store from
/// `make`: a reader sees every batch committed before and after it was
/// opened, and nothing of a batch that is staged and not committed.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn readers<S: StoreReaders>(make: impl FnMut() -> S) {
    let checks: Vec<Check<'_, S>> = vec![Check::new(
        "readers.see_commits_not_open_batches",
        readers_see_commits_not_open_batches::<S>,
    )];
    run_checks("store readers", checks, make);
}

fn readers_see_commits_not_open_batches<S: StoreReaders>(store: &mut S) {
    let a = acme();
    let mut sc = Scenario::new(store);
    let before = sc.commit(vec![raised(&a, 1)]);
    let reader = sc
        .store
        .reader()
        .unwrap_or_else(|e| fail(format_args!("reader: {e}")));
    let trail = |reader: &S, id| reader.trail(&a, &Subject::Decision(did(id))).ok();
    check_eq(
        "a commit before the reader",
        trail(&reader, 1),
        Some(before),
    );
    let staged = sc.stamp(vec![raised(&a, 2)]);
    if let Err(e) = sc.store.stage(&staged) {
        fail(format_args!("stage: {e}"));
    }
    check_eq("an open batch", trail(&reader, 2), Some(Vec::new()));
    if let Err(e) = sc.store.commit_staged() {
        fail(format_args!("commit_staged: {e}"));
    }
    check_eq("a commit after the reader", trail(&reader, 2), Some(staged));
}

// --- Checks -------------------------------------------------------------------

/// `chain_head` reads the committed chain: its size is `head`'s, its store
/// id stays, and its hash changes with every record committed and with
/// nothing else.
fn chain_head_follows_commits<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let chain = |sc: &Scenario<'_, S>| {
        let head = sc
            .store
            .chain_head()
            .unwrap_or_else(|e| fail(format_args!("chain_head failed: {e:?}")));
        let size = sc
            .store
            .head()
            .unwrap_or_else(|e| fail(format_args!("head failed: {e:?}")));
        check_eq("chain_head's size is head's", head.size, size);
        head
    };
    let empty = chain(&sc);
    check_eq("the size of an empty chain", empty.size, 0);
    check("an empty chain has a store id", !empty.store_id.is_empty());
    sc.commit(vec![raised(&acme(), 1)]);
    let one = chain(&sc);
    check_eq("the size after one record", one.size, 1);
    check_eq("the store id stays", &one.store_id, &empty.store_id);
    check("a record changes the hash", one.hash != empty.hash);
    check_eq("chain_head read again", chain(&sc), one.clone());
    sc.commit(vec![]);
    check_eq("chain_head after an empty batch", chain(&sc), one.clone());
    sc.commit(vec![raised(&acme(), 2)]);
    let two = chain(&sc);
    check_eq("the size after two records", two.size, 2);
    check(
        "each record changes the hash",
        two.hash != one.hash && two.hash != empty.hash,
    );
}

fn empty_store_reads_nothing<S: EvidenceStore>(store: &mut S) {
    let sc = Scenario::new(store);
    check_eq(
        "last_write of an empty store",
        sc.last_write(),
        None::<Timestamp>,
    );
    check_eq(
        "replay of an empty store",
        sc.replayed(),
        Vec::<Stamped>::new(),
    );
    check_eq(
        "message(1) of an empty store",
        sc.message(1),
        None::<MessageFacts>,
    );
    check_eq(
        "undelivered of an empty store",
        sc.undelivered(&acme(), "dev", 100),
        vec![],
    );
    check_eq(
        "unread of an empty store",
        sc.unread(&acme(), &Recipient::Human),
        vec![],
    );
    check_eq("tasks of an empty store", sc.tasks(&acme()), vec![]);
    check_eq(
        "trail of an empty store",
        sc.trail(&acme(), &Subject::Decision(did(1))),
        vec![],
    );
}

fn empty_batch_commits_nothing<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    sc.commit(vec![]);
    check_eq(
        "last_write after an empty batch",
        sc.last_write(),
        None::<Timestamp>,
    );
    let batch = sc.commit(vec![raised(&acme(), 1)]);
    sc.commit(vec![]);
    check_eq(
        "last_write after a later empty batch",
        sc.last_write(),
        Some(batch[0].at),
    );
    check_eq("replay after an empty batch", sc.replayed(), batch);
}

fn round_trip_in_commit_order<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    let first = sc.commit(vec![raised(&a, 1), raised(&b, 2), sent(&a, 1, to("dev"))]);
    let second = sc.commit(vec![
        resolved(&b, 2),
        seen(&a, 1),
        delivered(&a, 1, "run-1"),
    ]);
    let third = sc.commit(vec![withdrawn(&a, 1), read(&a, 1, "run-1")]);
    check_eq(
        "trail of decision 1 (records of two batches, in commit order)",
        sc.trail(&a, &Subject::Decision(did(1))),
        vec![first[0].clone(), second[1].clone(), third[0].clone()],
    );
    check_eq(
        "trail of message 1",
        sc.trail(&a, &Subject::Message(mid(1))),
        vec![first[2].clone(), second[2].clone(), third[1].clone()],
    );
    check_eq(
        "replay over three batches",
        sc.replayed(),
        vec![
            first[0].clone(),
            first[1].clone(),
            second[0].clone(),
            second[1].clone(),
            third[0].clone(),
        ],
    );
    check_eq(
        "message 1 as sent",
        sc.message(1).map(|m| m.record),
        Some(message(&a, 1, to("dev"))),
    );
}

fn replay_is_exactly_machine_state<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        sc.commit(batch);
    }
    let expected = sc.committed_where(|r| r.evidence.is_machine_state());
    check(
        "the history has machine state to replay",
        expected.len() > 10,
    );
    check_eq("replay", sc.replayed(), expected);
}

fn last_write_follows_commits<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        let committed = sc.commit(batch);
        let newest = committed.last().map(|r| r.at);
        check_eq("last_write after a commit", sc.last_write(), newest);
    }
    // A later clock reading that jumps ahead is kept exactly.
    sc.next_ms += 86_400_000;
    let jump = sc.commit(vec![refused(None)]);
    check_eq("last_write after a jump", sc.last_write(), Some(jump[0].at));
}

fn same_batch_references<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    sc.commit(vec![
        raised(&a, 1),
        raised_superseding(&a, 2, 1),
        superseded(&a, 1, 2),
        seen(&a, 2),
        resolved(&a, 2),
        consumed(&a, 2),
        claim_revoked(&a, 2),
        raised(&a, 3),
        withdrawn(&a, 3),
        send(MessageRecord {
            decision: Some(did(2)),
            ..message(&a, 1, to("dev"))
        }),
        delivered(&a, 1, "run-1"),
        read(&a, 1, "run-1"),
        send(MessageRecord {
            in_reply_to: Some(mid(1)),
            corrects: Some(mid(1)),
            ..message(&a, 2, to("lead"))
        }),
    ]);
    check_eq(
        "message 1 after send, delivery and read in one batch",
        sc.message(1),
        Some(facts(
            MessageRecord {
                decision: Some(did(2)),
                ..message(&a, 1, to("dev"))
            },
            Some("run-1"),
            true,
        )),
    );
    check_eq("records committed", sc.replayed().len(), 9);
    // A human input and what it asked for, in one batch.
    sc.commit(vec![
        human(&a, 1, None),
        task_created(&a, 3, 41, 1),
        send(MessageRecord {
            from: Sender::Human,
            request: Some(eid(1)),
            ..message(&a, 3, to("dev"))
        }),
        raised(&a, 4),
        allowed(&a, Some(4), None),
    ]);
    check_eq(
        "message 3, asked for by a human input of the same batch",
        sc.message(3).and_then(|m| m.record.request),
        Some(eid(1)),
    );
    check_eq("tasks after a same-batch request", sc.tasks(&a).len(), 1);
}

fn seen_repeats_around_terminal_events<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    sc.commit(vec![raised(&a, 1), seen(&a, 1), seen(&a, 1)]);
    sc.commit(vec![seen(&a, 1), resolved(&a, 1), seen(&a, 1), seen(&a, 1)]);
    sc.commit(vec![seen(&a, 1)]);
    sc.commit(vec![
        raised(&a, 2),
        withdrawn(&a, 2),
        seen(&a, 2),
        raised(&a, 3),
        raised(&a, 4),
        superseded(&a, 3, 4),
        seen(&a, 3),
        // The replacing decision is still open.
        seen(&a, 4),
        resolved(&a, 4),
    ]);
    sc.commit(vec![seen(&a, 2), seen(&a, 3), seen(&a, 4)]);
    check_eq(
        "replay keeps every seen record",
        sc.replayed(),
        sc.committed_where(|_| true),
    );
    check_eq(
        "trail of decision 1",
        sc.trail(&a, &Subject::Decision(did(1))).len(),
        8,
    );
}

fn identical_launch_binding_commits<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let a = acme();
    let with_address = LaunchRecord {
        address: Some("pi://lead".to_owned()),
        ..launch_record(&a, "lead", "run-2", 200)
    };
    sc.commit(vec![
        launched(&a, "dev", "run-1", 100),
        launch(with_address.clone()),
    ]);
    sc.commit(vec![launched(&a, "dev", "run-1", 100)]);
    sc.commit(vec![
        launch(with_address.clone()),
        launch(with_address),
        launched(&a, "dev", "run-1", 100),
        // The rule is per run: a role may be bound to a new run, and two
        // runs may name the same process.
        launched(&a, "dev", "run-3", 100),
    ]);
    check_eq(
        "replay keeps every binding, repeated ones included",
        sc.replayed(),
        sc.committed_where(|_| true),
    );
    check_eq(
        "trail of role dev",
        sc.trail(&a, &Subject::Role(role("dev"))).len(),
        4,
    );
}

fn observations_of_other_shapes_commit<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    let requested = |b: &BusinessId, kind: &str, subject, input| {
        observe(Observation {
            request: Some(eid(input)),
            ..observation(b, kind, subject)
        })
    };
    let on_task = || Some(Subject::Task(task(3, 41)));
    let batch = sc.commit(vec![
        human(&a, 1, None),
        human(&b, 2, None),
        // Only `task.` in these letters starts a task event.
        observed(&a, "Task.updated", None),
        observed(&a, "TASK.DELETED", Some(Subject::Role(role("dev")))),
        observed(&a, "tasks.created", None),
        observed(&a, "task", Some(Subject::Decision(did(1)))),
        observed(&a, "note", None),
        observed(&a, "routine", on_task()),
        // Every `task.*` kind under a task, without a request.
        observed(&a, "task.updated", on_task()),
        observed(&a, "task.", on_task()),
        observed(&a, "task.created.again", on_task()),
        // `task.created` with a request, also in another business.
        requested(&a, "task.created", on_task(), 1),
        requested(&b, "task.created", on_task(), 2),
        Evidence::Observed(Observation {
            body: "{\"x\":1}".to_owned(),
            ..observation(&a, "task.updated", on_task())
        }),
    ]);
    check_eq("last_write", sc.last_write(), batch.last().map(|r| r.at));
    check_eq(
        "the newest task observation is the task's view",
        sc.tasks(&a).into_iter().map(|v| v.kind).collect::<Vec<_>>(),
        vec!["task.updated".to_owned()],
    );
    check_eq(
        "the other business's view",
        sc.tasks(&b).into_iter().map(|v| v.kind).collect::<Vec<_>>(),
        vec!["task.created".to_owned()],
    );
}

fn tasks_newest_and_tombstones<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    let on = |p, t| Some(Subject::Task(task(p, t)));
    let batches = [
        vec![
            human(&a, 1, None),
            human(&b, 2, None),
            task_created(&a, 10, 1, 1),
            task_created(&a, 2, 1, 1),
            task_created(&a, 3, 41, 1),
        ],
        vec![
            observed(&a, "task.updated", on(3, 41)),
            // None of these is a `task.*` observation: `task.` is matched
            // exactly, case included.
            observed(&a, "tasks.created", on(3, 41)),
            observed(&a, "note", on(3, 41)),
            observed(&a, "TASK.updated", on(3, 41)),
            observed(&a, "task.deleted", on(2, 1)),
            observed(&a, "Task.created", on(2, 1)),
            task_created(&b, 5, 5, 2),
        ],
        vec![
            observed(&a, "task.deleted", on(10, 1)),
            observed(&a, "task.undeleted", on(10, 1)),
        ],
    ];
    // What each observation would look like as a task view, keyed by
    // (business, kind, subject).
    let mut views = HashMap::new();
    for batch in batches {
        for record in sc.commit(batch) {
            if let Evidence::Observed(o) = &record.evidence {
                let key = (o.business.clone(), o.kind.clone(), o.subject.clone());
                views.insert(key, (o.body.clone(), record.at));
            }
        }
    }
    let view = |b: &BusinessId, kind: &str, p, t| {
        let (body, at) = views[&(b.clone(), kind.to_owned(), on(p, t))].clone();
        TaskView {
            task: task(p, t),
            kind: kind.to_owned(),
            body,
            tombstone: kind == "task.deleted",
            at,
        }
    };
    check_eq(
        "tasks, ordered by task ref (project, then task, as numbers)",
        sc.tasks(&a),
        vec![
            view(&a, "task.deleted", 2, 1),
            view(&a, "task.updated", 3, 41),
            view(&a, "task.undeleted", 10, 1),
        ],
    );
    check(
        "a task.deleted view is a tombstone",
        sc.tasks(&a)[0].tombstone,
    );
    check_eq(
        "tasks of another business",
        sc.tasks(&b),
        vec![view(&b, "task.created", 5, 5)],
    );
}

fn trail_equals_concerns<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        sc.commit(batch);
    }
    let mut subjects: Vec<Subject> = DECISIONS.map(|n| Subject::Decision(did(n))).collect();
    subjects.extend(MESSAGES.map(|n| Subject::Message(mid(n))));
    subjects.extend(TASKS.iter().map(|&(p, t)| Subject::Task(task(p, t))));
    subjects.extend(ROLES.iter().map(|r| Subject::Role(role(r))));
    let mut non_empty = 0;
    for b in [acme(), globex()] {
        for subject in &subjects {
            let expected = sc.committed_where(|r| {
                r.evidence.business() == Some(&b) && r.evidence.concerns(subject)
            });
            non_empty += usize::from(!expected.is_empty());
            check_eq(
                &format!("trail({b}, {subject:?})"),
                sc.trail(&b, subject),
                expected,
            );
        }
    }
    check("the history gives many non-empty trails", non_empty >= 15);
}

/// Every committed record of `b`, at its position (the n-th committed is at
/// position n).
fn positioned(sc: &Scenario<'_, impl EvidenceStore>, b: &BusinessId) -> Vec<(u64, Stamped)> {
    (1..)
        .zip(&sc.committed)
        .filter(|(_, r)| r.evidence.business() == Some(b))
        .map(|(seq, r)| (seq, r.clone()))
        .collect()
}

/// Whether a store must list `record` in `ledger`: it makes a change of
/// the feed (given any routing for a decision event).
fn makes_a_change(record: &Stamped) -> bool {
    let routing = Routing {
        route: mosaic_domain::evidence::Route::Human,
        raiser: agent("dev", "dev-1"),
    };
    Change::of(&record.evidence, Some(routing)).is_some()
}

#[track_caller]
fn ledger_of<S: EvidenceStore>(
    sc: &Scenario<'_, S>,
    b: &BusinessId,
    after: u64,
    upto: u64,
    limit: usize,
) -> Vec<(u64, Stamped)> {
    sc.store
        .ledger(b, after, upto, limit)
        .unwrap_or_else(|e| fail(format_args!("ledger failed: {e:?}")))
}

#[track_caller]
fn head_of(store: &impl EvidenceStore) -> u64 {
    store
        .head()
        .unwrap_or_else(|e| fail(format_args!("head failed: {e:?}")))
}

fn ledger_positions_count_commits<S: EvidenceStore>(store: &mut S) {
    check_eq("the head of an empty store", head_of(store), 0);
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        sc.commit(batch);
        check_eq(
            "the head counts committed records",
            head_of(sc.store),
            sc.committed.len() as u64,
        );
    }
    let head = head_of(sc.store);
    let mut listed = 0;
    for b in [acme(), globex()] {
        let all = positioned(&sc, &b);
        let got = ledger_of(&sc, &b, 0, head, usize::MAX);
        check(
            &format!("ledger({b}) lists records of {b} at their positions, in order"),
            got.iter().all(|entry| all.contains(entry)) && got.windows(2).all(|w| w[0].0 < w[1].0),
        );
        let required: Vec<_> = all.into_iter().filter(|(_, r)| makes_a_change(r)).collect();
        listed += required.len();
        check(
            &format!("ledger({b}) lists every record that makes a change"),
            required.iter().all(|entry| got.contains(entry)),
        );
    }
    check(
        "the history has many records that make a change",
        listed >= 15,
    );
}

fn ledger_windows_and_limits<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        sc.commit(batch);
    }
    let a = acme();
    let head = head_of(sc.store);
    let full = ledger_of(&sc, &a, 0, head, usize::MAX);
    check("acme has a long ledger", full.len() >= 6);
    let cut = full[full.len() / 2].0;
    for (after, upto, limit) in [
        (0, head, 3),
        (cut, head, usize::MAX),
        (0, cut, usize::MAX),
        (cut, cut, usize::MAX),
        (head, head + 10, usize::MAX),
        (cut - 1, cut + 2, 1),
        (0, head, 0),
    ] {
        let expected: Vec<_> = full
            .iter()
            .filter(|(seq, _)| *seq > after && *seq <= upto)
            .take(limit)
            .cloned()
            .collect();
        check_eq(
            &format!("ledger(acme, {after}, {upto}, {limit})"),
            ledger_of(&sc, &a, after, upto, limit),
            expected,
        );
    }
}

fn decision_records<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        sc.commit(batch);
    }
    let mut found = 0;
    for n in DECISIONS {
        let raised = sc.committed.iter().find_map(|r| match &r.evidence {
            Evidence::Decision(mosaic_domain::evidence::DecisionEvidence::Raised(d))
                if d.id == did(n) =>
            {
                Some((**d).clone())
            }
            Evidence::Launch(_)
            | Evidence::Claim(_)
            | Evidence::Decision(_)
            | Evidence::Consumed(_)
            | Evidence::Allowed(_)
            | Evidence::Message(_)
            | Evidence::Human(_)
            | Evidence::Observed(_)
            | Evidence::Refused(_)
            | Evidence::RefusalsCounted(_) => None,
        });
        found += usize::from(raised.is_some());
        let got = sc
            .store
            .decision(&did(n))
            .unwrap_or_else(|e| fail(format_args!("decision failed: {e:?}")));
        check_eq(&format!("decision({n})"), got, raised);
    }
    check("the history raises several decisions", found >= 3);
}
