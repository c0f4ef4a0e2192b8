//! The rule checks: batches that break a timestamp, shape, unique,
//! reference or cross-business rule, each refused as a whole.

use mosaic_domain::evidence::{
    Evidence, Harness, LaunchRecord, MessageRecord, Observation, Stamped, Subject,
};

use super::evidence::*;
use super::scenario::{Rule, Scenario};
use crate::store::EvidenceStore;

/// The valid records of [`valid_head`] at consecutive times from `scenario`'s clock, followed
/// by `tail`, which sets its own times.
pub(super) fn with_valid_head<S: EvidenceStore>(
    sc: &mut Scenario<'_, S>,
    tail: Vec<Stamped>,
) -> Vec<Stamped> {
    let mut batch = sc.stamp(valid_head());
    batch.extend(tail);
    batch
}

/// Records that are valid on their own in any check, using ids the rule cases
/// leave alone (message 12, decision 9, human input 12, task 7/7, run-12).
/// Each of them would break a unique rule if committed twice, so a batch that
/// recommits them after a refusal shows nothing of the refused batch stayed.
pub(super) fn valid_head() -> Vec<Evidence> {
    let a = acme();
    vec![
        sent(&a, 12, to("dev")),
        raised(&a, 9),
        human(&a, 12, None),
        task_created(&a, 7, 7, 12),
        launched(&a, "dev", "run-12", 1200),
        claimed(&a, "dev", "run-12"),
    ]
}

pub(super) fn non_monotonic_equal_in_batch<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    sc.commit(vec![raised(&acme(), 1)]);
    let same = Scenario::<S>::at(sc.next_ms + 10);
    let tail = vec![
        Stamped {
            at: same,
            evidence: refused(None),
        },
        Stamped {
            at: same,
            evidence: refused(None),
        },
    ];
    let batch = with_valid_head(&mut sc, tail);
    sc.refuse(&batch, Rule::NonMonotonic);
    sc.commit(valid_head());
}

pub(super) fn non_monotonic_backwards_in_batch<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    sc.commit(vec![raised(&acme(), 1)]);
    let later = Scenario::<S>::at(sc.next_ms + 10);
    let earlier = Scenario::<S>::at(sc.next_ms + 9);
    let tail = vec![
        Stamped {
            at: later,
            evidence: refused(None),
        },
        Stamped {
            at: earlier,
            evidence: refused(None),
        },
    ];
    let batch = with_valid_head(&mut sc, tail);
    sc.refuse(&batch, Rule::NonMonotonic);
    sc.commit(valid_head());
}

pub(super) fn non_monotonic_equal_to_last<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let last = sc.commit(vec![raised(&acme(), 1)])[0].at;
    let mut batch = vec![Stamped {
        at: last,
        evidence: sent(&acme(), 12, to("dev")),
    }];
    batch.extend(sc.stamp(vec![raised(&acme(), 9)]));
    sc.refuse(&batch, Rule::NonMonotonic);
    sc.commit(valid_head());
}

pub(super) fn non_monotonic_before_last<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let last = sc.commit(vec![raised(&acme(), 1), raised(&acme(), 2)])[1].at;
    let before = Scenario::<S>::at(last.unix_ms() - 5);
    let mut batch = vec![Stamped {
        at: before,
        evidence: sent(&acme(), 12, to("dev")),
    }];
    batch.extend(sc.stamp(vec![raised(&acme(), 9)]));
    sc.refuse(&batch, Rule::NonMonotonic);
    sc.commit(valid_head());
}

/// A batch that breaks one rule: after `setup` is committed, the batch
/// [valid head, `good`, `bad`, `later`] must be refused with `rule`, and then
/// [valid head, `good`, `later`] must commit, which shows none of it was
/// kept. `later` is what `bad` refers to when the point is that a reference
/// to a later record of the batch dangles.
#[derive(Debug, Clone)]
pub(super) struct RuleCase {
    pub(super) name: &'static str,
    setup: Vec<Evidence>,
    good: Vec<Evidence>,
    bad: Evidence,
    later: Vec<Evidence>,
    rule: Rule,
}

impl RuleCase {
    /// The same case with `later` after the bad record.
    fn followed_by(self, later: Vec<Evidence>) -> Self {
        Self { later, ..self }
    }
}

pub(super) fn refuse_case<S: EvidenceStore>(store: &mut S, case: &RuleCase) {
    let mut sc = Scenario::new(store);
    if !case.setup.is_empty() {
        sc.commit(case.setup.clone());
    }
    let mut batch = valid_head();
    batch.extend(case.good.iter().cloned());
    batch.push(case.bad.clone());
    batch.extend(case.later.iter().cloned());
    let batch = sc.stamp(batch);
    sc.refuse(&batch, case.rule);
    let mut valid = valid_head();
    valid.extend(case.good.iter().cloned());
    valid.extend(case.later.iter().cloned());
    sc.commit(valid);
}

/// Every shape, unique, reference and cross-business rule, against committed
/// records and within one batch.
pub(super) fn rule_cases() -> Vec<RuleCase> {
    let (a, b) = (acme(), globex());
    let case = |name, setup, good, bad, rule| RuleCase {
        name,
        setup,
        good,
        bad,
        later: vec![],
        rule,
    };
    let resolvable = || vec![raised(&a, 1), resolved(&a, 1)];
    let delivered_1 = || vec![sent(&a, 1, to("dev")), delivered(&a, 1, "run-1")];
    // Globex's decision 1 and its delivered message 1.
    let theirs = || {
        vec![
            raised(&b, 1),
            sent(&b, 1, to("dev")),
            delivered(&b, 1, "run-1"),
        ]
    };
    let theirs_plus = |more: Evidence| {
        let mut setup = theirs();
        setup.push(more);
        setup
    };
    let reply_to = |field: fn(&mut MessageRecord)| {
        let mut record = message(&a, 2, to("dev"));
        field(&mut record);
        send(record)
    };
    // Acme's message 2, asked for by human input 1.
    let requested = || reply_to(|m| m.request = Some(eid(1)));
    // An acme observation of `kind` under `subject`, asked for by human input 1.
    let requesting = |kind: &str, subject: Option<Subject>| {
        observe(Observation {
            request: Some(eid(1)),
            ..observation(&a, kind, subject)
        })
    };
    let on_task = || Some(Subject::Task(task(3, 41)));
    // Acme's human input 1.
    let input = || vec![human(&a, 1, None)];
    let dev_1 = || launch_record(&a, "dev", "run-1", 100);
    use Rule::{CrossBusiness as Cross, Dangling, Duplicate, Malformed};
    let mut cases = vec![
        // Shapes. Where an observation names a request, the request exists
        // in its business, so the shape is the only rule it breaks.
        case(
            "malformed.task_kind_without_subject",
            vec![],
            vec![],
            observed(&a, "task.updated", None),
            Malformed,
        ),
        case(
            "malformed.task_kind_under_a_role",
            vec![],
            vec![],
            observed(&a, "task.deleted", Some(Subject::Role(role("dev")))),
            Malformed,
        ),
        case(
            "malformed.task_kind_under_a_decision",
            vec![raised(&a, 1)],
            vec![],
            observed(&a, "task.note", Some(Subject::Decision(did(1)))),
            Malformed,
        ),
        case(
            "malformed.task_created_without_request",
            vec![],
            vec![],
            observed(&a, "task.created", on_task()),
            Malformed,
        ),
        case(
            "malformed.task_created_with_request_without_subject",
            input(),
            vec![],
            requesting("task.created", None),
            Malformed,
        ),
        case(
            "malformed.request_on_task_updated",
            input(),
            vec![],
            requesting("task.updated", on_task()),
            Malformed,
        ),
        case(
            "malformed.request_on_task_updated_in_batch",
            vec![],
            input(),
            requesting("task.updated", on_task()),
            Malformed,
        ),
        case(
            "malformed.request_on_another_kind",
            input(),
            vec![],
            requesting("note", None),
            Malformed,
        ),
        case(
            // `task.created` is matched exactly, case included.
            "malformed.request_on_task_created_in_capitals",
            vec![],
            input(),
            requesting("TASK.CREATED", on_task()),
            Malformed,
        ),
        // Duplicates.
        case(
            "duplicate.human_input",
            input(),
            vec![],
            human(&a, 1, Some(Subject::Role(role("dev")))),
            Duplicate,
        ),
        case(
            "duplicate.human_input_in_batch",
            vec![],
            input(),
            human(&a, 1, None),
            Duplicate,
        ),
        case(
            "duplicate.human_input_other_business",
            input(),
            vec![],
            human(&b, 1, None),
            Duplicate,
        ),
        case(
            "duplicate.terminal.resolved_twice",
            resolvable(),
            vec![],
            resolved(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.terminal.withdrawn_after_resolved",
            resolvable(),
            vec![],
            withdrawn(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.terminal.superseded_after_withdrawn",
            vec![raised(&a, 1), withdrawn(&a, 1), raised(&a, 2)],
            vec![],
            superseded(&a, 1, 2),
            Duplicate,
        ),
        case(
            "duplicate.terminal.resolved_after_superseded",
            vec![raised(&a, 1), raised(&a, 2), superseded(&a, 1, 2)],
            vec![],
            resolved(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.terminal.resolved_twice_in_batch",
            vec![raised(&a, 1)],
            vec![resolved(&a, 1)],
            resolved(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.terminal.withdrawn_after_seen_resolved_seen_in_batch",
            vec![raised(&a, 1)],
            vec![seen(&a, 1), resolved(&a, 1), seen(&a, 1)],
            withdrawn(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.terminal.superseded_after_superseded_in_batch",
            vec![raised(&a, 1), raised(&a, 2)],
            vec![raised(&a, 3), superseded(&a, 1, 2)],
            superseded(&a, 1, 3),
            Duplicate,
        ),
        case(
            "duplicate.launch.other_pid",
            vec![launch(dev_1())],
            vec![],
            launched(&a, "dev", "run-1", 101),
            Duplicate,
        ),
        case(
            "duplicate.launch.other_start_time",
            vec![launch(dev_1())],
            vec![],
            launch(LaunchRecord {
                start_time: 1001,
                ..dev_1()
            }),
            Duplicate,
        ),
        case(
            "duplicate.launch.other_address",
            vec![launch(dev_1())],
            vec![],
            launch(LaunchRecord {
                address: Some("pi://dev".to_owned()),
                ..dev_1()
            }),
            Duplicate,
        ),
        case(
            "duplicate.launch.other_harness",
            vec![launch(dev_1())],
            vec![],
            launch(LaunchRecord {
                harness: Harness::ClaudeCode,
                ..dev_1()
            }),
            Duplicate,
        ),
        case(
            "duplicate.launch.other_business",
            vec![launch(dev_1())],
            vec![],
            launched(&b, "dev", "run-1", 100),
            Duplicate,
        ),
        case(
            "duplicate.launch.other_role_in_batch",
            vec![],
            vec![launch(dev_1())],
            launched(&a, "ops", "run-1", 100),
            Duplicate,
        ),
        case(
            "duplicate.run_ended",
            vec![ended(&a, "dev", "run-1", true)],
            vec![],
            ended(&a, "dev", "run-1", false),
            Duplicate,
        ),
        case(
            "duplicate.run_ended_in_batch",
            vec![launch(dev_1())],
            vec![ended(&a, "dev", "run-1", false)],
            ended(&a, "dev", "run-1", false),
            Duplicate,
        ),
        case(
            "duplicate.run_ended_other_business",
            vec![ended(&a, "dev", "run-1", false)],
            vec![],
            ended(&b, "dev", "run-1", false),
            Duplicate,
        ),
        case(
            "duplicate.launch.address_dropped_in_batch",
            vec![],
            vec![launch(LaunchRecord {
                address: Some("pi://dev".to_owned()),
                ..dev_1()
            })],
            launch(dev_1()),
            Duplicate,
        ),
        // Duplicates.
        case(
            "duplicate.raised",
            vec![raised(&a, 1)],
            vec![],
            raised(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.raised_in_batch",
            vec![],
            vec![raised(&a, 1)],
            raised(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.raised_other_business",
            vec![raised(&a, 1)],
            vec![],
            raised(&b, 1),
            Duplicate,
        ),
        case(
            "duplicate.sent",
            vec![sent(&a, 1, to("dev"))],
            vec![],
            sent(&a, 1, to("ops")),
            Duplicate,
        ),
        case(
            "duplicate.sent_in_batch",
            vec![],
            vec![sent(&a, 1, to("dev"))],
            sent(&a, 1, to("dev")),
            Duplicate,
        ),
        case(
            "duplicate.sent_other_business",
            vec![sent(&a, 1, to("dev"))],
            vec![],
            sent(&b, 1, to("dev")),
            Duplicate,
        ),
        case(
            "duplicate.consumed",
            [resolvable(), vec![consumed(&a, 1)]].concat(),
            vec![],
            consumed(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.consumed_in_batch",
            resolvable(),
            vec![consumed(&a, 1)],
            consumed(&a, 1),
            Duplicate,
        ),
        case(
            "duplicate.delivered",
            delivered_1(),
            vec![],
            delivered(&a, 1, "run-1"),
            Duplicate,
        ),
        case(
            "duplicate.delivered_to_another_run",
            delivered_1(),
            vec![],
            delivered(&a, 1, "run-7"),
            Duplicate,
        ),
        case(
            "duplicate.delivered_in_batch",
            vec![sent(&a, 1, to("dev"))],
            vec![delivered(&a, 1, "run-1")],
            delivered(&a, 1, "run-7"),
            Duplicate,
        ),
        case(
            "duplicate.read",
            [delivered_1(), vec![read(&a, 1, "run-1")]].concat(),
            vec![],
            read(&a, 1, "run-1"),
            Duplicate,
        ),
        case(
            "duplicate.read_in_batch",
            delivered_1(),
            vec![read(&a, 1, "run-1")],
            read(&a, 1, "run-1"),
            Duplicate,
        ),
        // Dangling references.
        case(
            "dangling.resolved",
            vec![],
            vec![],
            resolved(&a, 1),
            Dangling,
        ),
        case(
            "dangling.seen",
            vec![raised(&a, 2)],
            vec![],
            seen(&a, 1),
            Dangling,
        ),
        case(
            "dangling.withdrawn",
            vec![],
            vec![],
            withdrawn(&a, 1),
            Dangling,
        ),
        case(
            "dangling.superseded_id",
            vec![raised(&a, 2)],
            vec![],
            superseded(&a, 1, 2),
            Dangling,
        ),
        case(
            "dangling.superseded_by",
            vec![raised(&a, 1)],
            vec![],
            superseded(&a, 1, 2),
            Dangling,
        ),
        case(
            "dangling.consumed",
            vec![],
            vec![],
            consumed(&a, 1),
            Dangling,
        ),
        case(
            "dangling.claim_revoked",
            vec![],
            vec![],
            claim_revoked(&a, 1),
            Dangling,
        ),
        case(
            "dangling.raised_supersedes",
            vec![],
            vec![],
            raised_superseding(&a, 2, 1),
            Dangling,
        ),
        case(
            "dangling.delivered",
            vec![],
            vec![],
            delivered(&a, 1, "run-1"),
            Dangling,
        ),
        case(
            "dangling.read_unknown_message",
            vec![],
            vec![],
            read(&a, 1, "run-1"),
            Dangling,
        ),
        case(
            "dangling.read_undelivered",
            vec![sent(&a, 1, to("dev"))],
            vec![],
            read(&a, 1, "run-1"),
            Dangling,
        ),
        case(
            "dangling.read_by_another_run",
            delivered_1(),
            vec![],
            read(&a, 1, "run-7"),
            Dangling,
        ),
        case(
            "dangling.read_delivered_to_another_run_in_batch",
            vec![sent(&a, 1, to("dev"))],
            vec![delivered(&a, 1, "run-1")],
            read(&a, 1, "run-7"),
            Dangling,
        ),
        case(
            "dangling.sent_in_reply_to",
            vec![],
            vec![],
            reply_to(|m| m.in_reply_to = Some(mid(1))),
            Dangling,
        ),
        case(
            "dangling.sent_corrects",
            vec![],
            vec![],
            reply_to(|m| m.corrects = Some(mid(1))),
            Dangling,
        ),
        case(
            "dangling.sent_decision",
            vec![],
            vec![],
            reply_to(|m| m.decision = Some(did(1))),
            Dangling,
        ),
        case(
            "dangling.allowed_decision",
            vec![raised(&a, 2)],
            vec![],
            allowed(&a, Some(1), None),
            Dangling,
        ),
        case(
            "dangling.sent_request",
            vec![human(&a, 2, None)],
            vec![],
            requested(),
            Dangling,
        ),
        case(
            "dangling.observed_request",
            vec![human(&a, 2, None)],
            vec![],
            task_created(&a, 3, 41, 1),
            Dangling,
        ),
        // References into another business.
        case(
            "cross_business.resolved",
            theirs(),
            vec![],
            resolved(&a, 1),
            Cross,
        ),
        case("cross_business.seen", theirs(), vec![], seen(&a, 1), Cross),
        case(
            "cross_business.withdrawn",
            theirs(),
            vec![],
            withdrawn(&a, 1),
            Cross,
        ),
        case(
            "cross_business.superseded_id",
            theirs_plus(raised(&a, 2)),
            vec![],
            superseded(&a, 1, 2),
            Cross,
        ),
        case(
            "cross_business.superseded_by",
            theirs_plus(raised(&a, 2)),
            vec![],
            superseded(&a, 2, 1),
            Cross,
        ),
        case(
            "cross_business.consumed",
            theirs_plus(resolved(&b, 1)),
            vec![],
            consumed(&a, 1),
            Cross,
        ),
        case(
            "cross_business.claim_revoked",
            theirs(),
            vec![],
            claim_revoked(&a, 1),
            Cross,
        ),
        case(
            "cross_business.raised_supersedes",
            theirs(),
            vec![],
            raised_superseding(&a, 2, 1),
            Cross,
        ),
        case(
            "cross_business.delivered",
            vec![sent(&b, 1, to("dev"))],
            vec![],
            delivered(&a, 1, "run-1"),
            Cross,
        ),
        case(
            "cross_business.read",
            theirs(),
            vec![],
            read(&a, 1, "run-1"),
            Cross,
        ),
        case(
            "cross_business.sent_in_reply_to",
            theirs(),
            vec![],
            reply_to(|m| m.in_reply_to = Some(mid(1))),
            Cross,
        ),
        case(
            "cross_business.sent_corrects",
            theirs(),
            vec![],
            reply_to(|m| m.corrects = Some(mid(1))),
            Cross,
        ),
        case(
            "cross_business.sent_decision",
            theirs(),
            vec![],
            reply_to(|m| m.decision = Some(did(1))),
            Cross,
        ),
        case(
            "cross_business.allowed_decision",
            theirs(),
            vec![],
            allowed(&a, Some(1), None),
            Cross,
        ),
        case(
            "cross_business.allowed_decision_in_batch",
            vec![],
            vec![raised(&b, 1)],
            allowed(&a, Some(1), Some(Subject::Decision(did(1)))),
            Cross,
        ),
        case(
            "cross_business.sent_request",
            vec![human(&b, 1, None)],
            vec![],
            requested(),
            Cross,
        ),
        case(
            "cross_business.sent_request_in_batch",
            vec![],
            vec![human(&b, 1, None)],
            requested(),
            Cross,
        ),
        case(
            "cross_business.observed_request",
            vec![human(&b, 1, None)],
            vec![],
            task_created(&a, 3, 41, 1),
            Cross,
        ),
        case(
            "cross_business.observed_request_in_batch",
            vec![],
            vec![human(&b, 1, None)],
            task_created(&a, 3, 41, 1),
            Cross,
        ),
    ];
    // A reference is satisfied only by a record before it: the same batch
    // with the referred record after the referring one dangles.
    cases.extend([
        case(
            "dangling.allowed_decision_raised_later_in_batch",
            vec![],
            vec![],
            allowed(&a, Some(1), None),
            Dangling,
        )
        .followed_by(vec![raised(&a, 1)]),
        case(
            "dangling.sent_request_input_later_in_batch",
            vec![],
            vec![],
            requested(),
            Dangling,
        )
        .followed_by(input()),
        case(
            "dangling.observed_request_input_later_in_batch",
            vec![],
            vec![],
            task_created(&a, 3, 41, 1),
            Dangling,
        )
        .followed_by(input()),
    ]);
    cases
}
