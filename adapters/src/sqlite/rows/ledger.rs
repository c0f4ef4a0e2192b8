//! What every typed table shares: the ledger row each record has beside
//! its typed row ([`Ledger`], which also feeds both to the hash chain), the
//! typed tables themselves ([`Table`]), and the codecs of the columns many
//! tables hold (subjects, actors, agents, ids), each way.

use mosaic_domain::evidence::{AgentRef, DecisionActor, EvidenceKind, Subject};
use mosaic_domain::{BusinessId, DecisionId, MessageId, Refusal, RoleInstance, RunId, TaskRef};
use rusqlite::{params, CachedStatement, Connection, ToSql};

use super::super::carry::Carry;
use super::super::chain::{Hash, Link};

/// A stored row that does not decode into a domain value: the file was
/// changed behind the store's back.
#[derive(Debug, thiserror::Error)]
#[error("stored row does not decode: {0}")]
pub(crate) struct Undecodable(pub(crate) &'static str);

/// Errors while reading rows.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error(transparent)]
    Undecodable(#[from] Undecodable),
}

/// The typed tables, one per family of ledger kinds ([`Table::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Launches,
    LaunchSwitches,
    Claims,
    Decisions,
    DecisionEvents,
    Consumptions,
    ActionsAllowed,
    Messages,
    Deliveries,
    Reads,
    HumanInputs,
    Observations,
    Refusals,
    RefusalCounts,
    RunEnds,
}

impl Table {
    /// Every typed table, in the order of the enum.
    pub(crate) const ALL: [Table; 15] = [
        Table::Launches,
        Table::LaunchSwitches,
        Table::Claims,
        Table::Decisions,
        Table::DecisionEvents,
        Table::Consumptions,
        Table::ActionsAllowed,
        Table::Messages,
        Table::Deliveries,
        Table::Reads,
        Table::HumanInputs,
        Table::Observations,
        Table::Refusals,
        Table::RefusalCounts,
        Table::RunEnds,
    ];

    /// The table's SQL name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Table::Launches => "launches",
            Table::LaunchSwitches => "launch_switches",
            Table::Claims => "claims",
            Table::Decisions => "decisions",
            Table::DecisionEvents => "decision_events",
            Table::Consumptions => "consumptions",
            Table::ActionsAllowed => "actions_allowed",
            Table::Messages => "messages",
            Table::Deliveries => "deliveries",
            Table::Reads => "reads",
            Table::HumanInputs => "human_inputs",
            Table::Observations => "observations",
            Table::Refusals => "refusals",
            Table::RefusalCounts => "refusal_counts",
            Table::RunEnds => "run_ends",
        }
    }
}

impl Table {
    /// The table that stores the rows: the name, but for the
    /// `action.allowed` records no message carries, which `mosaic-bus/5`
    /// keeps in `allowances` (the view `actions_allowed` shows them all).
    pub(crate) fn stored(self) -> &'static str {
        match self {
            Table::ActionsAllowed => "allowances",
            Table::Launches
            | Table::LaunchSwitches
            | Table::Claims
            | Table::Decisions
            | Table::DecisionEvents
            | Table::Consumptions
            | Table::Messages
            | Table::Deliveries
            | Table::Reads
            | Table::HumanInputs
            | Table::Observations
            | Table::Refusals
            | Table::RefusalCounts
            | Table::RunEnds => self.name(),
        }
    }

    /// The typed table a kind's rows live in.
    pub(crate) fn of(kind: EvidenceKind) -> Table {
        match kind {
            EvidenceKind::SessionLaunched => Table::Launches,
            EvidenceKind::LaunchRevoked | EvidenceKind::LaunchRestored => Table::LaunchSwitches,
            EvidenceKind::RoleClaimed | EvidenceKind::RoleReleased | EvidenceKind::RoleRevoked => {
                Table::Claims
            }
            EvidenceKind::DecisionRaised => Table::Decisions,
            EvidenceKind::DecisionResolved
            | EvidenceKind::DecisionSeen
            | EvidenceKind::DecisionWithdrawn
            | EvidenceKind::DecisionSuperseded => Table::DecisionEvents,
            EvidenceKind::ApprovalConsumed => Table::Consumptions,
            EvidenceKind::ActionAllowed => Table::ActionsAllowed,
            EvidenceKind::MessageSent => Table::Messages,
            EvidenceKind::MessageDelivered => Table::Deliveries,
            EvidenceKind::MessageRead => Table::Reads,
            EvidenceKind::HumanInput => Table::HumanInputs,
            EvidenceKind::EventObserved => Table::Observations,
            EvidenceKind::RequestRefused => Table::Refusals,
            EvidenceKind::RefusalsCounted => Table::RefusalCounts,
            EvidenceKind::SessionEnded => Table::RunEnds,
        }
    }
}

pub(super) fn subject_cols(subject: Option<&Subject>) -> (Option<&'static str>, Option<String>) {
    match subject {
        None => (None, None),
        Some(Subject::Task(t)) => (Some("task"), Some(t.to_string())),
        Some(Subject::Decision(d)) => (Some("decision"), Some(d.to_string())),
        Some(Subject::Message(m)) => (Some("message"), Some(m.to_string())),
        Some(Subject::Role(r)) => (Some("role"), Some(r.to_string())),
    }
}

/// The `subject_kind` and `subject` columns for a subject.
pub(crate) fn subject_key(subject: &Subject) -> (&'static str, String) {
    let (kind, text) = subject_cols(Some(subject));
    (kind.unwrap_or_default(), text.unwrap_or_default())
}

pub(super) fn actor_cols(by: &DecisionActor) -> (Option<String>, Option<String>) {
    match by {
        DecisionActor::Agent(a) => (Some(a.role.to_string()), Some(a.run.to_string())),
        DecisionActor::Human => (None, None),
    }
}

pub(super) fn opt<T: ToString>(v: Option<&T>) -> Option<String> {
    v.map(ToString::to_string)
}

/// A record's ledger row, written with its typed row by [`Ledger::typed`].
pub(crate) struct Ledger<'a> {
    pub(super) conn: &'a Connection,
    pub(super) seq: i64,
    pub(super) at: String,
    pub(super) kind: EvidenceKind,
    pub(super) business: Option<String>,
    pub(super) prev: &'a Hash,
    /// How this record's row is shared with its neighbour (`mosaic-bus/5`).
    pub(super) carry: Carry,
}

impl Ledger<'_> {
    /// Writes the ledger row, its hash computed from the values bound here
    /// and in `params` (the typed row, every column in the table's order),
    /// then the typed row with `sql`, unless the next record's row carries
    /// this one ([`Carry::ByNext`]).
    pub(super) fn typed(&self, sql: &str, params: &[&dyn ToSql]) -> rusqlite::Result<Hash> {
        let kind = self.kind.as_str();
        let mut link = Link::after(self.prev);
        link.bound("ledger", &[&self.seq, &self.at, &kind, &self.business])?;
        link.bound(Table::of(self.kind).name(), params)?;
        let hash = link.finish();
        self.conn
            .prepare_cached(
                "INSERT INTO ledger (seq, at, kind, business, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                self.seq,
                self.at,
                kind,
                self.business,
                hash.as_slice()
            ])?;
        if self.carry != Carry::ByNext {
            self.conn.prepare_cached(sql)?.execute(params)?;
        }
        Ok(hash)
    }
}

pub(super) fn bad(what: &'static str) -> Undecodable {
    Undecodable(what)
}

pub(super) fn parse<T>(
    text: &str,
    f: impl Fn(&str) -> Result<T, Refusal>,
    what: &'static str,
) -> Result<T, Undecodable> {
    f(text).map_err(|_| bad(what))
}

pub(super) fn parse_opt<T>(
    text: Option<String>,
    f: impl Fn(&str) -> Result<T, Refusal>,
    what: &'static str,
) -> Result<Option<T>, Undecodable> {
    text.map(|t| parse(&t, f, what)).transpose()
}

pub(super) fn business(text: &str) -> Result<BusinessId, Undecodable> {
    parse(text, BusinessId::parse, "business")
}

pub(super) fn agent(role: &str, run: &str) -> Result<AgentRef, Undecodable> {
    Ok(AgentRef {
        role: parse(role, RoleInstance::parse, "role")?,
        run: parse(run, RunId::parse, "run")?,
    })
}

pub(super) fn actor(
    role: Option<String>,
    run: Option<String>,
) -> Result<DecisionActor, Undecodable> {
    match (role, run) {
        (Some(role), Some(run)) => Ok(DecisionActor::Agent(agent(&role, &run)?)),
        (None, None) => Ok(DecisionActor::Human),
        (Some(_), None) | (None, Some(_)) => Err(bad("actor")),
    }
}

/// Decodes `subject_kind` + `subject` columns.
pub(super) fn subject(
    kind: Option<String>,
    text: Option<String>,
) -> Result<Option<Subject>, Undecodable> {
    let (Some(kind), Some(text)) = (kind, text) else {
        return Ok(None);
    };
    Ok(Some(match kind.as_str() {
        "task" => Subject::Task(parse(&text, TaskRef::parse, "subject")?),
        "decision" => Subject::Decision(parse(&text, DecisionId::parse, "subject")?),
        "message" => Subject::Message(parse(&text, MessageId::parse, "subject")?),
        "role" => Subject::Role(parse(&text, RoleInstance::parse, "subject")?),
        _ => return Err(bad("subject kind")),
    }))
}

pub(super) fn one<'c>(conn: &'c Connection, sql: &str) -> rusqlite::Result<CachedStatement<'c>> {
    conn.prepare_cached(sql)
}
