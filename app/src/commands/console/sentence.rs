//! One trail record in one sentence. What each kind of evidence says is
//! one row of [`SENTENCES`], keyed by the domain's own [`EvidenceKind`]:
//! no kind is spelt here, and a kind without a row (a new one) still
//! reads as "KIND by WHO".

use mosaic_domain::evidence::EvidenceKind;

use super::model::Kind;
use super::trail::Record;

/// What a record of one kind says, after its time.
type Says = fn(&Record) -> String;

const SENTENCES: &[(EvidenceKind, Says)] = &[
    (EvidenceKind::DecisionRaised, |r| {
        let by = r
            .raiser
            .as_ref()
            .map_or_else(|| r.who.to_string(), ToString::to_string);
        format!(
            "{by} raised \"{}\" ({} on {})",
            r.field("question"),
            r.field("action"),
            r.field("target")
        )
    }),
    (EvidenceKind::DecisionResolved, |r| {
        format!("{} resolved it with {}", r.who, r.field("choice"))
    }),
    (EvidenceKind::DecisionSeen, |r| {
        format!("{} marked it seen", r.who)
    }),
    (EvidenceKind::DecisionWithdrawn, |r| {
        format!("{} withdrew it", r.who)
    }),
    (EvidenceKind::DecisionSuperseded, |_| {
        "it was superseded".to_owned()
    }),
    (EvidenceKind::HumanInput, |r| {
        format!("the human asked {}", r.field("verb"))
    }),
    (EvidenceKind::MessageSent, |r| {
        let class = if r.has("class") {
            r.field("class")
        } else {
            "a message"
        };
        format!("{} sent {class} to {}", r.field("from"), r.field("to"))
    }),
    (EvidenceKind::ApprovalConsumed, |_| {
        "the approval was spent".to_owned()
    }),
    (EvidenceKind::ActionAllowed, |r| {
        format!("{} was allowed {}", r.who, r.field("action"))
    }),
    (EvidenceKind::RequestRefused, |r| {
        format!(
            "{} was refused {}: {}",
            r.who,
            r.field("verb"),
            r.field("code")
        )
    }),
];

/// `r` in one sentence: its time, what happened, and its note if any.
pub(super) fn sentence(r: &Record) -> String {
    let note = if r.has("note") {
        format!(" (note: {})", r.field("note"))
    } else {
        String::new()
    };
    format!("{} {}{note}.", r.at, says(r))
}

/// `r` in one sentence without its note, which a record opened whole
/// shows on a line of its own.
pub(super) fn said(r: &Record) -> String {
    format!("{} {}.", r.at, says(r))
}

/// What happened, in words.
fn says(r: &Record) -> String {
    let says = match &r.kind {
        Kind::Known(kind) => SENTENCES.iter().find(|(k, _)| k == kind).map(|(_, s)| s),
        Kind::Other(_) => None,
    };
    says.map_or_else(|| format!("{} by {}", r.kind, r.who), |says| says(r))
}
