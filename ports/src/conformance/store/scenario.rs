//! The driver of one store check: stamping, committing, refusing and
//! snapshotting every read.

use std::collections::BTreeMap;

use mosaic_domain::evidence::{Evidence, Recipient, Stamped, Subject};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{BusinessId, Timestamp};

use super::evidence::{
    acme, did, globex, mid, role, task, to, DECISIONS, MESSAGES, ROLES, START_MS, TASKS,
};
use crate::conformance::{check_eq, fail};
use crate::store::{EvidenceStore, StoreError, TaskView};

/// The rule a refused batch breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    Duplicate,
    Dangling,
    CrossBusiness,
    NonMonotonic,
    Malformed,
}

/// The rule an error reports, or the error's text when it is no rule.
pub(super) fn rule_of(error: &StoreError) -> Result<Rule, String> {
    match error {
        StoreError::Duplicate => Ok(Rule::Duplicate),
        StoreError::Dangling => Ok(Rule::Dangling),
        StoreError::CrossBusiness => Ok(Rule::CrossBusiness),
        StoreError::NonMonotonic => Ok(Rule::NonMonotonic),
        StoreError::Malformed => Ok(Rule::Malformed),
        StoreError::Unavailable(source) => Err(format!("Unavailable({source})")),
    }
}

/// A store under test with the list of everything committed to it, which is
/// the reference every read is compared against.
pub(super) struct Scenario<'s, S> {
    pub(super) store: &'s mut S,
    pub(super) committed: Vec<Stamped>,
    pub(super) next_ms: i64,
}

impl<'s, S: EvidenceStore> Scenario<'s, S> {
    pub(super) fn new(store: &'s mut S) -> Self {
        Self {
            store,
            committed: Vec::new(),
            next_ms: START_MS,
        }
    }

    pub(super) fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(ms).expect("representable test time")
    }

    /// Stamps `evidence` with consecutive milliseconds after everything
    /// stamped so far.
    pub(super) fn stamp(&mut self, evidence: Vec<Evidence>) -> Vec<Stamped> {
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
    pub(super) fn commit(&mut self, evidence: Vec<Evidence>) -> Vec<Stamped> {
        let batch = self.stamp(evidence);
        self.commit_stamped(batch.clone());
        batch
    }

    #[track_caller]
    pub(super) fn commit_stamped(&mut self, batch: Vec<Stamped>) {
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
    pub(super) fn refuse(&mut self, batch: &[Stamped], rule: Rule) {
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
    pub(super) fn snapshot(&self) -> BTreeMap<String, String> {
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

    pub(super) fn replay(&self) -> Result<Vec<Stamped>, StoreError> {
        let mut seen = Vec::new();
        self.store.replay(&mut |r| seen.push(r))?;
        Ok(seen)
    }

    /// `replay`, which must succeed.
    #[track_caller]
    pub(super) fn replayed(&self) -> Vec<Stamped> {
        self.replay()
            .unwrap_or_else(|e| fail(format_args!("replay failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn message(&self, n: u8) -> Option<MessageFacts> {
        self.store
            .message(&mid(n))
            .unwrap_or_else(|e| fail(format_args!("message({n}) failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn undelivered(&self, b: &BusinessId, r: &str, limit: usize) -> Vec<MessageFacts> {
        self.store
            .undelivered(b, &role(r), limit)
            .unwrap_or_else(|e| fail(format_args!("undelivered failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn unread(&self, b: &BusinessId, recipient: &Recipient) -> Vec<MessageFacts> {
        self.store
            .unread(b, recipient)
            .unwrap_or_else(|e| fail(format_args!("unread failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn tasks(&self, b: &BusinessId) -> Vec<TaskView> {
        self.store
            .tasks(b)
            .unwrap_or_else(|e| fail(format_args!("tasks failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn trail(&self, b: &BusinessId, subject: &Subject) -> Vec<Stamped> {
        self.store
            .trail(b, subject)
            .unwrap_or_else(|e| fail(format_args!("trail failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn last_write(&self) -> Option<Timestamp> {
        self.store
            .last_write()
            .unwrap_or_else(|e| fail(format_args!("last_write failed: {e:?}")))
    }

    /// The committed records that `keep` selects, in commit order.
    pub(super) fn committed_where(&self, keep: impl Fn(&Stamped) -> bool) -> Vec<Stamped> {
        self.committed.iter().filter(|r| keep(r)).cloned().collect()
    }
}
