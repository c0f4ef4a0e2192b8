//! A row opened whole: `Enter` on a trail record or a change shows every
//! field of it, one to a line, wrapped to the pane and scrolled like a
//! message ([`super::lines::wrap`], so the drawing and the state's scroll
//! limit count the same lines). Every line is made of shown text, already
//! neutralised.

use mosaic_domain::{DecisionId, MessageId};

use super::model::{Change, Shown};
use super::rows::change_row;
use super::sentence::said;
use super::trail::Record;

/// The row opened whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// A record of the trail of `subject`.
    Record {
        /// The trail's subject, shown.
        subject: Shown,
        /// The record.
        record: Box<Record>,
    },
    /// A change of the Activity view.
    Change(Change),
}

impl Detail {
    /// The lines it shows, before wrapping: its sentence, then each field
    /// on a line of its own (a record's note among them, whole).
    pub fn lines(&self) -> Vec<String> {
        match self {
            Detail::Record { subject, record } => {
                let mut lines = vec![
                    said(record),
                    String::new(),
                    format!("kind: {}", record.kind),
                    format!("at: {}", record.at),
                    format!("actor: {}", record.who),
                ];
                lines.extend(record.raiser.as_ref().map(|r| format!("raiser: {r}")));
                lines.push(format!("trail of: {subject}"));
                lines.extend(
                    record
                        .fields()
                        .map(|(name, value)| format!("{name}: {value}")),
                );
                lines
            }
            Detail::Change(change) => {
                let mut lines = vec![
                    change_row(change),
                    String::new(),
                    format!("kind: {}", change.kind),
                ];
                lines.extend(change.about.iter().map(ToString::to_string));
                lines.push(String::new());
                lines.push(
                    match (change.decision, change.message) {
                        (Some(_), _) => "Enter opens the decision it names.",
                        (None, Some(_)) => "Enter opens the message it names.",
                        (None, None) => "It names no decision and no message.",
                    }
                    .to_owned(),
                );
                lines
            }
        }
    }

    /// The decision or message `Enter` opens from it: a change's.
    pub fn opens(&self) -> Option<Opens> {
        match self {
            Detail::Record { .. } => None,
            Detail::Change(change) => change
                .decision
                .map(Opens::Decision)
                .or(change.message.map(Opens::Message)),
        }
    }
}

/// What a detail's `Enter` opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opens {
    /// A decision.
    Decision(DecisionId),
    /// A message.
    Message(MessageId),
}
