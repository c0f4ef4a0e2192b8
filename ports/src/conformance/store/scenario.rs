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
        StoreError::Full(source) => Err(format!("Full({source})")),
        StoreError::Unavailable(source) => Err(format!("Unavailable({source})")),
    }
}

/// A store under test with the list of everything committed to it and
/// everything staged in its open batch, which are the reference every read
/// is compared against.
pub(super) struct Scenario<'s, S> {
    pub(super) store: &'s mut S,
    pub(super) committed: Vec<Stamped>,
    /// The records of the open batch, in stage order.
    pub(super) staged: Vec<Stamped>,
    pub(super) next_ms: i64,
}

impl<'s, S: EvidenceStore> Scenario<'s, S> {
    pub(super) fn new(store: &'s mut S) -> Self {
        Self {
            store,
            committed: Vec::new(),
            staged: Vec::new(),
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

    /// Commits `batch`, which must succeed; with a batch open, `batch` joins
    /// it and the whole batch commits.
    #[track_caller]
    pub(super) fn commit_stamped(&mut self, batch: Vec<Stamped>) {
        if let Err(error) = self.store.commit(&batch) {
            fail(format_args!(
                "a valid batch of {} records was refused: {error:?}",
                batch.len()
            ));
        }
        self.committed.append(&mut self.staged);
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
        self.reads_unchanged(&before, &format!("a batch refused with {rule:?}"));
    }

    /// Stamps `evidence` and stages it, which must succeed.
    #[track_caller]
    pub(super) fn stage(&mut self, evidence: Vec<Evidence>) -> Vec<Stamped> {
        let stage = self.stamp(evidence);
        self.stage_stamped(stage.clone());
        stage
    }

    /// Stages `stage`, which must succeed.
    #[track_caller]
    pub(super) fn stage_stamped(&mut self, stage: Vec<Stamped>) {
        if let Err(error) = self.store.stage(&stage) {
            fail(format_args!(
                "a valid stage of {} records was refused: {error:?}",
                stage.len()
            ));
        }
        self.staged.extend(stage);
    }

    /// Stages `stage`, which must fail with `rule` and leave every read
    /// through the store exactly as it was (the earlier stages included).
    #[track_caller]
    pub(super) fn refuse_stage(&mut self, stage: &[Stamped], rule: Rule) {
        let before = self.snapshot();
        match self.store.stage(stage) {
            Ok(()) => fail(format_args!("a stage breaking {rule:?} was staged")),
            Err(error) => check_eq(
                "the stage's refusal",
                rule_of(&error),
                Ok::<Rule, String>(rule),
            ),
        }
        self.reads_unchanged(&before, &format!("a stage refused with {rule:?}"));
    }

    /// Commits the open batch, which must succeed and leave every read
    /// through the store as it was before (they saw the staged records
    /// already).
    #[track_caller]
    pub(super) fn commit_staged(&mut self) {
        let before = self.snapshot();
        if let Err(error) = self.store.commit_staged() {
            fail(format_args!(
                "a batch of {} valid staged records was not committed: {error:?}",
                self.staged.len()
            ));
        }
        self.reads_unchanged(&before, "commit_staged");
        self.committed.append(&mut self.staged);
    }

    /// Abandons the open batch: the staged records are forgotten.
    pub(super) fn abandon(&mut self) {
        self.store.abandon();
        self.staged.clear();
    }

    /// Fails naming every read whose text differs from `before`, which
    /// `what` should not have changed.
    #[track_caller]
    pub(super) fn reads_unchanged(&self, before: &BTreeMap<String, String>, what: &str) {
        let after = self.snapshot();
        let changed: Vec<String> = before
            .iter()
            .filter(|(read, value)| after.get(*read) != Some(value))
            .map(|(read, value)| {
                let now = after.get(read).map_or("(missing)", String::as_str);
                format!("{read} was {value}, is {now}")
            })
            .collect();
        if !changed.is_empty() {
            fail(format_args!("{what} left a trace: {}", changed.join("; ")));
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
            put(
                format!("closings({b})"),
                format!("{:?}", self.store.closings(&b, None, usize::MAX)),
            );
            for r in ROLES {
                let undelivered = self.store.undelivered(&b, &role(r), 1000);
                put(format!("undelivered({b}, {r})"), format!("{undelivered:?}"));
                put(
                    format!("unread({b}, {r})"),
                    format!("{:?}", self.store.unread(&b, &to(r), usize::MAX)),
                );
            }
            let human = self.store.unread(&b, &Recipient::Human, usize::MAX);
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
        self.unread_limited(b, recipient, usize::MAX)
    }

    #[track_caller]
    pub(super) fn unread_limited(
        &self,
        b: &BusinessId,
        recipient: &Recipient,
        limit: usize,
    ) -> Vec<MessageFacts> {
        self.store
            .unread(b, recipient, limit)
            .unwrap_or_else(|e| fail(format_args!("unread failed: {e:?}")))
    }

    #[track_caller]
    pub(super) fn unread_count(&self, b: &BusinessId, recipient: &Recipient) -> u64 {
        self.store
            .unread_count(b, recipient)
            .unwrap_or_else(|e| fail(format_args!("unread_count failed: {e:?}")))
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

    /// The records this handle sees (the committed ones, then the staged
    /// ones) that `keep` selects, in order.
    pub(super) fn visible_where(&self, keep: impl Fn(&Stamped) -> bool) -> Vec<Stamped> {
        self.committed
            .iter()
            .chain(&self.staged)
            .filter(|r| keep(r))
            .cloned()
            .collect()
    }
}
