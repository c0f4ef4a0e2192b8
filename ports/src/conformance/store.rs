//! The [`EvidenceStore`] suite.
//!
//! Every check starts from an empty store and writes evidence over a small
//! fixed universe (two businesses, three roles, a few decisions, messages and
//! tasks), so a snapshot of every read over that universe shows whether a
//! refused batch left any trace.

use std::collections::{BTreeMap, HashMap};

use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, DecisionRecord, Evidence, Harness, HumanInput, LaunchEvidence, LaunchRecord,
    MessageClass, MessageEvidence, MessageRecord, Observation, OptionKey, Recipient, RefusalRecord,
    Route, Sender, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{
    Action, ActionClass, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId,
    TaskRef, Timestamp,
};

use super::{check, check_eq, fail, run_checks, Check};
use crate::store::{EvidenceStore, StoreError, TaskView};

/// Runs every store check, each on a fresh, empty store from `make`.
///
/// Covers: round trip and commit order; every unique, reference,
/// cross-business and timestamp rule of [`EvidenceStore::commit`], each
/// showing that the whole refused batch stays invisible (its valid records
/// can be committed afterwards); references to earlier records of the same
/// batch; `replay`, `last_write`, `message`, `undelivered`, `unread`, `tasks`
/// and `trail` against their contracts.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<S: EvidenceStore>(make: impl FnMut() -> S) {
    let mut checks: Vec<Check<'_, S>> = vec![
        Check::new("empty_store_reads_nothing", empty_store_reads_nothing::<S>),
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
    ];
    for case in rule_cases() {
        let name = format!("refuses.{}", case.name);
        checks.push(Check::new(name, move |store: &mut S| {
            refuse_case(store, &case)
        }));
    }
    run_checks("store", checks, make);
}

// --- The universe -----------------------------------------------------------

/// 2026-01-01T00:00:00.000Z, where every check's clock starts.
const START_MS: i64 = 1_767_225_600_000;
/// Decision numbers the snapshots look at.
const DECISIONS: std::ops::RangeInclusive<u8> = 1..=9;
/// Message numbers the snapshots look at.
const MESSAGES: std::ops::RangeInclusive<u8> = 1..=12;
/// Tasks the snapshots look at, as (project, task).
const TASKS: [(u64, u64); 5] = [(2, 1), (3, 41), (5, 5), (10, 1), (7, 7)];
/// Roles the snapshots look at.
const ROLES: [&str; 3] = ["dev", "ops", "lead"];

fn acme() -> BusinessId {
    BusinessId::parse("acme").expect("valid business id")
}

fn globex() -> BusinessId {
    BusinessId::parse("globex").expect("valid business id")
}

fn role(name: &str) -> RoleInstance {
    RoleInstance::parse(name).expect("valid role")
}

fn run_id(name: &str) -> RunId {
    RunId::parse(name).expect("valid run id")
}

fn agent(role_name: &str, run: &str) -> AgentRef {
    AgentRef {
        role: role(role_name),
        run: run_id(run),
    }
}

fn did(n: u8) -> DecisionId {
    DecisionId::from_random([n; 16])
}

fn mid(n: u8) -> MessageId {
    MessageId::from_random([n; 16])
}

fn task(project: u64, number: u64) -> TaskRef {
    TaskRef::parse(&format!("vikunja:{project}/{number}")).expect("valid task ref")
}

fn to(role_name: &str) -> Recipient {
    Recipient::Role(role(role_name))
}

// --- Evidence builders --------------------------------------------------------

fn decision(b: &BusinessId, n: u8) -> DecisionRecord {
    DecisionRecord {
        id: did(n),
        business: b.clone(),
        raiser: agent("dev", "run-1"),
        action: Action::parse("repo.merge").expect("valid action"),
        target: None,
        question: format!("Merge change {n}?"),
        options: vec![
            DecisionOption {
                key: OptionKey::yes(),
                text: "Merge it".to_owned(),
            },
            DecisionOption {
                key: OptionKey::parse("no").expect("valid key"),
                text: "Leave it".to_owned(),
            },
        ],
        recommendation: "yes".to_owned(),
        blocking: false,
        technical: false,
        project: None,
        task_ref: None,
        requirement_ref: None,
        supersedes: None,
        approval_choice: OptionKey::yes(),
        class: ActionClass::CrossRole,
        route: Route::Role(role("lead")),
        holder: None,
    }
}

fn raise(record: DecisionRecord) -> Evidence {
    Evidence::Decision(DecisionEvidence::Raised(Box::new(record)))
}

fn raised(b: &BusinessId, n: u8) -> Evidence {
    raise(decision(b, n))
}

fn raised_superseding(b: &BusinessId, n: u8, old: u8) -> Evidence {
    raise(DecisionRecord {
        supersedes: Some(did(old)),
        ..decision(b, n)
    })
}

fn lead() -> DecisionActor {
    DecisionActor::Agent(agent("lead", "run-2"))
}

fn resolved(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Resolved {
        business: b.clone(),
        id: did(n),
        choice: OptionKey::yes(),
        by: lead(),
        note: None,
    })
}

fn seen(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Seen {
        business: b.clone(),
        id: did(n),
        by: lead(),
        note: Some("looking".to_owned()),
    })
}

fn withdrawn(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Withdrawn {
        business: b.clone(),
        id: did(n),
        by: DecisionActor::Human,
        note: None,
    })
}

fn superseded(b: &BusinessId, n: u8, by: u8) -> Evidence {
    Evidence::Decision(DecisionEvidence::Superseded {
        business: b.clone(),
        id: did(n),
        by: did(by),
    })
}

fn consumed(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Consumed(Consumption {
        business: b.clone(),
        decision: did(n),
        agent: agent("dev", "run-1"),
        action: Action::parse("repo.merge").expect("valid action"),
        target: None,
    })
}

fn claim_revoked(b: &BusinessId, n: u8) -> Evidence {
    Evidence::Claim(ClaimEvidence::Revoked {
        business: b.clone(),
        agent: agent("ops", "run-3"),
        decision: did(n),
    })
}

fn claimed(b: &BusinessId, role_name: &str, run: &str) -> Evidence {
    Evidence::Claim(ClaimEvidence::Claimed {
        business: b.clone(),
        agent: agent(role_name, run),
    })
}

fn released(b: &BusinessId, role_name: &str, run: &str) -> Evidence {
    Evidence::Claim(ClaimEvidence::Released {
        business: b.clone(),
        agent: agent(role_name, run),
    })
}

fn launched(b: &BusinessId, role_name: &str, run: &str, pid: u32) -> Evidence {
    Evidence::Launch(LaunchEvidence::Launched(LaunchRecord {
        business: b.clone(),
        role: role(role_name),
        run: run_id(run),
        harness: Harness::Pi,
        address: None,
        pid,
        start_time: u64::from(pid) * 10,
    }))
}

fn message(b: &BusinessId, n: u8, recipient: Recipient) -> MessageRecord {
    MessageRecord {
        id: mid(n),
        business: b.clone(),
        from: Sender::Agent(agent("lead", "run-2")),
        to: recipient,
        class: Some(MessageClass::Info),
        body: format!("message {n}"),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    }
}

fn send(record: MessageRecord) -> Evidence {
    Evidence::Message(MessageEvidence::Sent(Box::new(record)))
}

fn sent(b: &BusinessId, n: u8, recipient: Recipient) -> Evidence {
    send(message(b, n, recipient))
}

fn delivered(b: &BusinessId, n: u8, run: &str) -> Evidence {
    Evidence::Message(MessageEvidence::Delivered {
        business: b.clone(),
        message: mid(n),
        run: run_id(run),
    })
}

fn read(b: &BusinessId, n: u8, run: &str) -> Evidence {
    Evidence::Message(MessageEvidence::Read {
        business: b.clone(),
        message: mid(n),
        run: run_id(run),
    })
}

fn observed(b: &BusinessId, kind: &str, subject: Option<Subject>) -> Evidence {
    Evidence::Observed(Observation {
        business: b.clone(),
        agent: agent("dev", "run-1"),
        kind: kind.to_owned(),
        body: format!("{{\"kind\":\"{kind}\"}}"),
        subject,
    })
}

fn allowed(b: &BusinessId, decision_n: Option<u8>, subject: Option<Subject>) -> Evidence {
    Evidence::Allowed(ActionAllowed {
        business: b.clone(),
        agent: agent("dev", "run-1"),
        action: Action::parse("message.send").expect("valid action"),
        target: None,
        decision: decision_n.map(did),
        subject,
    })
}

fn human(b: &BusinessId, n: u8, subject: Option<Subject>) -> Evidence {
    Evidence::Human(HumanInput {
        id: EventId::from_random([n; 16]),
        business: b.clone(),
        verb: "decision.resolve".to_owned(),
        subject,
    })
}

fn refused(b: Option<BusinessId>) -> Evidence {
    Evidence::Refused(RefusalRecord {
        business: b,
        agent: None,
        verb: Some("message.send".to_owned()),
        refusal: Refusal::NotAuthorized,
    })
}

fn facts(record: MessageRecord, delivered_to: Option<&str>, read: bool) -> MessageFacts {
    MessageFacts {
        record,
        delivered_to: delivered_to.map(run_id),
        read,
    }
}

// --- The scenario driver ------------------------------------------------------

/// The rule a refused batch breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Duplicate,
    Dangling,
    CrossBusiness,
    NonMonotonic,
}

/// The rule an error reports, or the error's text when it is no rule.
fn rule_of(error: &StoreError) -> Result<Rule, String> {
    match error {
        StoreError::Duplicate => Ok(Rule::Duplicate),
        StoreError::Dangling => Ok(Rule::Dangling),
        StoreError::CrossBusiness => Ok(Rule::CrossBusiness),
        StoreError::NonMonotonic => Ok(Rule::NonMonotonic),
        StoreError::Unavailable(source) => Err(format!("Unavailable({source})")),
    }
}

/// A store under test with the list of everything committed to it, which is
/// the reference every read is compared against.
struct Scenario<'s, S> {
    store: &'s mut S,
    committed: Vec<Stamped>,
    next_ms: i64,
}

impl<'s, S: EvidenceStore> Scenario<'s, S> {
    fn new(store: &'s mut S) -> Self {
        Self {
            store,
            committed: Vec::new(),
            next_ms: START_MS,
        }
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(ms).expect("representable test time")
    }

    /// Stamps `evidence` with consecutive milliseconds after everything
    /// stamped so far.
    fn stamp(&mut self, evidence: Vec<Evidence>) -> Vec<Stamped> {
        evidence
            .into_iter()
            .map(|evidence| {
                self.next_ms += 1;
                Stamped {
                    at: Self::at(self.next_ms),
                    evidence,
                }
            })
            .collect()
    }

    /// Commits `evidence` as one batch, which must succeed.
    #[track_caller]
    fn commit(&mut self, evidence: Vec<Evidence>) -> Vec<Stamped> {
        let batch = self.stamp(evidence);
        self.commit_stamped(batch.clone());
        batch
    }

    #[track_caller]
    fn commit_stamped(&mut self, batch: Vec<Stamped>) {
        if let Err(error) = self.store.commit(&batch) {
            fail(format_args!(
                "a valid batch of {} records was refused: {error:?}",
                batch.len()
            ));
        }
        self.committed.extend(batch);
    }

    /// Commits `batch`, which must fail with `rule` and leave every read
    /// exactly as it was.
    #[track_caller]
    fn refuse(&mut self, batch: &[Stamped], rule: Rule) {
        let before = self.snapshot();
        match self.store.commit(batch) {
            Ok(()) => fail(format_args!("a batch breaking {rule:?} was committed")),
            Err(error) => check_eq("the refusal", rule_of(&error), Ok::<Rule, String>(rule)),
        }
        let after = self.snapshot();
        let changed: Vec<String> = before
            .iter()
            .filter(|(read, value)| after.get(*read) != Some(value))
            .map(|(read, value)| format!("{read} was {value}, is {}", after[read]))
            .collect();
        if !changed.is_empty() {
            fail(format_args!(
                "a batch refused with {rule:?} left a trace: {}",
                changed.join("; ")
            ));
        }
    }

    /// The text of every read over the universe, keyed by the read.
    fn snapshot(&self) -> BTreeMap<String, String> {
        let mut reads = BTreeMap::new();
        let mut put = |key: String, value: String| {
            reads.insert(key, value);
        };
        put(
            "last_write".to_owned(),
            format!("{:?}", self.store.last_write()),
        );
        put("replay".to_owned(), format!("{:?}", self.replay()));
        let mut subjects = Vec::new();
        for n in MESSAGES {
            put(
                format!("message({n})"),
                format!("{:?}", self.store.message(&mid(n))),
            );
            subjects.push(Subject::Message(mid(n)));
        }
        subjects.extend(DECISIONS.map(|n| Subject::Decision(did(n))));
        subjects.extend(TASKS.iter().map(|&(p, t)| Subject::Task(task(p, t))));
        subjects.extend(ROLES.iter().map(|r| Subject::Role(role(r))));
        for b in [acme(), globex()] {
            put(format!("tasks({b})"), format!("{:?}", self.store.tasks(&b)));
            for r in ROLES {
                let undelivered = self.store.undelivered(&b, &role(r), 1000);
                put(format!("undelivered({b}, {r})"), format!("{undelivered:?}"));
                put(
                    format!("unread({b}, {r})"),
                    format!("{:?}", self.store.unread(&b, &to(r))),
                );
            }
            let human = self.store.unread(&b, &Recipient::Human);
            put(format!("unread({b}, human)"), format!("{human:?}"));
            for s in &subjects {
                put(
                    format!("trail({b}, {s:?})"),
                    format!("{:?}", self.store.trail(&b, s)),
                );
            }
        }
        reads
    }

    fn replay(&self) -> Result<Vec<Stamped>, StoreError> {
        let mut seen = Vec::new();
        self.store.replay(&mut |r| seen.push(r))?;
        Ok(seen)
    }

    /// `replay`, which must succeed.
    #[track_caller]
    fn replayed(&self) -> Vec<Stamped> {
        self.replay()
            .unwrap_or_else(|e| fail(format_args!("replay failed: {e:?}")))
    }

    #[track_caller]
    fn message(&self, n: u8) -> Option<MessageFacts> {
        self.store
            .message(&mid(n))
            .unwrap_or_else(|e| fail(format_args!("message({n}) failed: {e:?}")))
    }

    #[track_caller]
    fn undelivered(&self, b: &BusinessId, r: &str, limit: usize) -> Vec<MessageFacts> {
        self.store
            .undelivered(b, &role(r), limit)
            .unwrap_or_else(|e| fail(format_args!("undelivered failed: {e:?}")))
    }

    #[track_caller]
    fn unread(&self, b: &BusinessId, recipient: &Recipient) -> Vec<MessageFacts> {
        self.store
            .unread(b, recipient)
            .unwrap_or_else(|e| fail(format_args!("unread failed: {e:?}")))
    }

    #[track_caller]
    fn tasks(&self, b: &BusinessId) -> Vec<TaskView> {
        self.store
            .tasks(b)
            .unwrap_or_else(|e| fail(format_args!("tasks failed: {e:?}")))
    }

    #[track_caller]
    fn trail(&self, b: &BusinessId, subject: &Subject) -> Vec<Stamped> {
        self.store
            .trail(b, subject)
            .unwrap_or_else(|e| fail(format_args!("trail failed: {e:?}")))
    }

    #[track_caller]
    fn last_write(&self) -> Option<Timestamp> {
        self.store
            .last_write()
            .unwrap_or_else(|e| fail(format_args!("last_write failed: {e:?}")))
    }

    /// The committed records that `keep` selects, in commit order.
    fn committed_where(&self, keep: impl Fn(&Stamped) -> bool) -> Vec<Stamped> {
        self.committed.iter().filter(|r| keep(r)).cloned().collect()
    }
}

/// Records of every kind over both businesses, in several batches, with
/// subjects shared between businesses.
fn varied_history() -> Vec<Vec<Evidence>> {
    let (a, b) = (acme(), globex());
    let human_message = MessageRecord {
        from: Sender::Human,
        request: Some(EventId::from_random([40; 16])),
        ..message(&a, 4, to("dev"))
    };
    vec![
        vec![
            launched(&a, "dev", "run-1", 100),
            launched(&a, "lead", "run-2", 200),
            launched(&b, "dev", "run-9", 900),
            claimed(&a, "dev", "run-1"),
            claimed(&a, "lead", "run-2"),
            claimed(&a, "ops", "run-3"),
            claimed(&b, "dev", "run-9"),
            Evidence::Launch(LaunchEvidence::Revoked {
                business: a.clone(),
            }),
            Evidence::Launch(LaunchEvidence::Restored {
                business: a.clone(),
            }),
            refused(None),
            refused(Some(a.clone())),
        ],
        vec![
            raise(DecisionRecord {
                task_ref: Some(task(3, 41)),
                blocking: true,
                ..decision(&a, 1)
            }),
            seen(&a, 1),
            resolved(&a, 1),
            raised(&a, 2),
            raised_superseding(&a, 3, 2),
            superseded(&a, 2, 3),
            withdrawn(&a, 3),
            raise(DecisionRecord {
                task_ref: Some(task(3, 41)),
                ..decision(&b, 4)
            }),
        ],
        vec![
            consumed(&a, 1),
            allowed(&a, Some(1), Some(Subject::Role(role("ops")))),
            allowed(&a, None, Some(Subject::Task(task(2, 1)))),
            raised(&a, 5),
            resolved(&a, 5),
            consumed(&a, 5),
            claim_revoked(&a, 5),
            released(&a, "lead", "run-2"),
        ],
        vec![
            send(MessageRecord {
                decision: Some(did(1)),
                ..message(&a, 1, to("dev"))
            }),
            send(MessageRecord {
                in_reply_to: Some(mid(1)),
                ..message(&a, 2, Recipient::Human)
            }),
            send(MessageRecord {
                corrects: Some(mid(1)),
                ..message(&a, 3, to("lead"))
            }),
            send(human_message),
            delivered(&a, 1, "run-1"),
            read(&a, 1, "run-1"),
            sent(&b, 5, to("dev")),
            delivered(&b, 5, "run-9"),
            human(&a, 1, Some(Subject::Decision(did(1)))),
            human(&a, 2, Some(Subject::Message(mid(2)))),
            human(&b, 3, None),
        ],
        vec![
            observed(&a, "task.created", Some(Subject::Task(task(3, 41)))),
            observed(&a, "task.updated", Some(Subject::Task(task(3, 41)))),
            observed(&a, "note", Some(Subject::Decision(did(1)))),
            observed(&a, "task.created", Some(Subject::Task(task(2, 1)))),
            observed(&a, "task.deleted", Some(Subject::Task(task(2, 1)))),
            observed(&b, "task.created", Some(Subject::Task(task(3, 41)))),
            observed(&a, "routine", None),
            observed(&a, "review", Some(Subject::Role(role("dev")))),
            allowed(&a, None, Some(Subject::Message(mid(3)))),
            refused(Some(b.clone())),
        ],
    ]
}

// --- Checks -------------------------------------------------------------------

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
}

fn message_facts<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    sc.commit(vec![sent(&a, 1, to("dev"))]);
    let record = message(&a, 1, to("dev"));
    check_eq(
        "facts after send",
        sc.message(1),
        Some(facts(record.clone(), None, false)),
    );
    sc.commit(vec![delivered(&a, 1, "run-1")]);
    check_eq(
        "facts after delivery",
        sc.message(1),
        Some(facts(record.clone(), Some("run-1"), false)),
    );
    sc.commit(vec![read(&a, 1, "run-1")]);
    check_eq(
        "facts after read",
        sc.message(1),
        Some(facts(record, Some("run-1"), true)),
    );
    check_eq("an unknown message", sc.message(2), None::<MessageFacts>);
    sc.commit(vec![sent(&b, 3, Recipient::Human)]);
    check_eq(
        "a message of another business, as it is",
        sc.message(3),
        Some(facts(message(&b, 3, Recipient::Human), None, false)),
    );
}

/// Messages 1 to 5 to `dev` of acme, interleaved with messages to others.
fn inbox_history() -> Vec<Vec<Evidence>> {
    let (a, b) = (acme(), globex());
    vec![
        vec![
            sent(&a, 1, to("dev")),
            sent(&a, 6, to("ops")),
            sent(&a, 2, to("dev")),
        ],
        vec![
            sent(&b, 7, to("dev")),
            sent(&a, 3, to("dev")),
            sent(&a, 8, Recipient::Human),
        ],
        vec![sent(&a, 4, to("dev")), sent(&a, 5, to("dev"))],
    ]
}

/// Facts of acme's messages numbered `ns`, to `dev`, undelivered and unread.
fn fresh(ns: &[u8]) -> Vec<MessageFacts> {
    ns.iter()
        .map(|&n| facts(message(&acme(), n, to("dev")), None, false))
        .collect()
}

fn undelivered_order_and_limit<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    for batch in inbox_history() {
        sc.commit(batch);
    }
    check_eq(
        "undelivered, limit 3",
        sc.undelivered(&a, "dev", 3),
        fresh(&[1, 2, 3]),
    );
    check_eq(
        "undelivered, limit 100",
        sc.undelivered(&a, "dev", 100),
        fresh(&[1, 2, 3, 4, 5]),
    );
    check_eq("undelivered, limit 0", sc.undelivered(&a, "dev", 0), vec![]);
    check_eq(
        "undelivered to another role",
        sc.undelivered(&a, "ops", 100),
        vec![facts(message(&a, 6, to("ops")), None, false)],
    );
    check_eq(
        "undelivered in another business",
        sc.undelivered(&b, "dev", 100),
        vec![facts(message(&b, 7, to("dev")), None, false)],
    );
    check_eq(
        "undelivered to a role without messages",
        sc.undelivered(&a, "lead", 100),
        vec![],
    );
    sc.commit(vec![delivered(&a, 1, "run-1"), delivered(&a, 3, "run-1")]);
    check_eq(
        "undelivered after two deliveries",
        sc.undelivered(&a, "dev", 100),
        fresh(&[2, 4, 5]),
    );
    check_eq(
        "undelivered after two deliveries, limit 2",
        sc.undelivered(&a, "dev", 2),
        fresh(&[2, 4]),
    );
    // Neither a read nor a new holder brings a delivered message back.
    sc.commit(vec![read(&a, 1, "run-1"), delivered(&a, 2, "run-7")]);
    check_eq(
        "undelivered after a new holder's delivery",
        sc.undelivered(&a, "dev", 100),
        fresh(&[4, 5]),
    );
}

fn unread<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    for batch in inbox_history() {
        sc.commit(batch);
    }
    check_eq(
        "unread, nothing delivered",
        sc.unread(&a, &to("dev")),
        fresh(&[1, 2, 3, 4, 5]),
    );
    sc.commit(vec![
        delivered(&a, 1, "run-1"),
        delivered(&a, 2, "run-1"),
        read(&a, 1, "run-1"),
    ]);
    let mut expected = vec![facts(message(&a, 2, to("dev")), Some("run-1"), false)];
    expected.extend(fresh(&[3, 4, 5]));
    check_eq(
        "unread after one read of two deliveries",
        sc.unread(&a, &to("dev")),
        expected,
    );
    check_eq(
        "unread for the human",
        sc.unread(&a, &Recipient::Human),
        vec![facts(message(&a, 8, Recipient::Human), None, false)],
    );
    check_eq(
        "unread in another business",
        sc.unread(&b, &to("dev")),
        vec![facts(message(&b, 7, to("dev")), None, false)],
    );
    check_eq(
        "unread for a role without messages",
        sc.unread(&a, &to("lead")),
        vec![],
    );
    check_eq(
        "unread for the human of another business",
        sc.unread(&b, &Recipient::Human),
        vec![],
    );
}

fn tasks_newest_and_tombstones<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    let on = |p, t| Some(Subject::Task(task(p, t)));
    let batches = [
        vec![
            observed(&a, "task.created", on(10, 1)),
            observed(&a, "task.created", on(2, 1)),
            observed(&a, "task.created", on(3, 41)),
        ],
        vec![
            observed(&a, "task.updated", on(3, 41)),
            // Neither of these is a `task.*` observation.
            observed(&a, "tasks.created", on(3, 41)),
            observed(&a, "note", on(3, 41)),
            observed(&a, "task.deleted", on(2, 1)),
            // Task observations not filed under a task are no task state.
            observed(&a, "task.created", None),
            observed(&a, "task.created", Some(Subject::Role(role("dev")))),
            observed(&b, "task.created", on(5, 5)),
        ],
        vec![
            observed(&a, "task.deleted", on(10, 1)),
            observed(&a, "task.restored", on(10, 1)),
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
            view(&a, "task.restored", 10, 1),
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

/// Four valid records at consecutive times from `scenario`'s clock, followed
/// by `tail`, which sets its own times.
fn with_valid_head<S: EvidenceStore>(sc: &mut Scenario<'_, S>, tail: Vec<Stamped>) -> Vec<Stamped> {
    let mut batch = sc.stamp(valid_head());
    batch.extend(tail);
    batch
}

/// Records that are valid on their own in any check, using ids the rule cases
/// leave alone.
fn valid_head() -> Vec<Evidence> {
    let a = acme();
    vec![
        sent(&a, 12, to("dev")),
        raised(&a, 9),
        observed(&a, "task.created", Some(Subject::Task(task(7, 7)))),
        claimed(&a, "dev", "run-1"),
    ]
}

fn non_monotonic_equal_in_batch<S: EvidenceStore>(store: &mut S) {
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

fn non_monotonic_backwards_in_batch<S: EvidenceStore>(store: &mut S) {
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

fn non_monotonic_equal_to_last<S: EvidenceStore>(store: &mut S) {
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

fn non_monotonic_before_last<S: EvidenceStore>(store: &mut S) {
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
/// [valid head, `good`, `bad`] must be refused with `rule`, and then
/// [valid head, `good`] must commit, which shows none of it was kept.
#[derive(Debug, Clone)]
struct RuleCase {
    name: &'static str,
    setup: Vec<Evidence>,
    good: Vec<Evidence>,
    bad: Evidence,
    rule: Rule,
}

fn refuse_case<S: EvidenceStore>(store: &mut S, case: &RuleCase) {
    let mut sc = Scenario::new(store);
    if !case.setup.is_empty() {
        sc.commit(case.setup.clone());
    }
    let mut batch = valid_head();
    batch.extend(case.good.iter().cloned());
    batch.push(case.bad.clone());
    let batch = sc.stamp(batch);
    sc.refuse(&batch, case.rule);
    let mut valid = valid_head();
    valid.extend(case.good.iter().cloned());
    sc.commit(valid);
}

/// Every unique, reference and cross-business rule, committed and within one
/// batch.
fn rule_cases() -> Vec<RuleCase> {
    let (a, b) = (acme(), globex());
    let case = |name, setup, good, bad, rule| RuleCase {
        name,
        setup,
        good,
        bad,
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
    use Rule::{CrossBusiness as Cross, Dangling, Duplicate};
    vec![
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
    ]
}
