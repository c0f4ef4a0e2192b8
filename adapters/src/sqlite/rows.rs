//! Evidence to rows and back. One function writes each kind of fact into the
//! ledger and its typed table; one function reads a ledger entry back.

use super::carry::Carry;
use super::chain::{Hash, Link};
use super::ends;
use mosaic_domain::business::ActionClass;
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, DecisionRecord, Evidence, EvidenceKind, Harness, HumanInput, LaunchEvidence,
    LaunchRecord, MessageClass, MessageEvidence, MessageRecord, Observation, OptionKey,
    RaiseFields, Recipient, RefusalCount, RefusalRecord, Route, Sender, Stamped, Subject,
};
use mosaic_domain::{
    Action, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId, Target,
    TaskRef, Timestamp,
};
use rusqlite::{params, CachedStatement, Connection, OptionalExtension, Row, ToSql};
use std::sync::LazyLock;

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

/// `'a', 'b', …`: the ledger names of the kinds `pick` keeps, for a
/// `kind IN (…)` clause.
fn kinds_where(pick: fn(EvidenceKind) -> bool) -> String {
    let names: Vec<String> = EvidenceKind::ALL
        .iter()
        .filter(|k| pick(**k))
        .map(|k| format!("'{k}'"))
        .collect();
    names.join(", ")
}

/// The ledger kinds a restart replays ([`EvidenceKind::is_machine_state`]).
pub(crate) static MACHINE_KINDS: LazyLock<String> =
    LazyLock::new(|| kinds_where(EvidenceKind::is_machine_state));

/// The ledger kinds that can make a change of the feed
/// ([`EvidenceKind::can_be_change`]).
pub(crate) static CHANGE_KINDS: LazyLock<String> =
    LazyLock::new(|| kinds_where(EvidenceKind::can_be_change));

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

fn subject_cols(subject: Option<&Subject>) -> (Option<&'static str>, Option<String>) {
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

fn actor_cols(by: &DecisionActor) -> (Option<String>, Option<String>) {
    match by {
        DecisionActor::Agent(a) => (Some(a.role.to_string()), Some(a.run.to_string())),
        DecisionActor::Human => (None, None),
    }
}

fn opt<T: ToString>(v: Option<&T>) -> Option<String> {
    v.map(ToString::to_string)
}

/// A record's ledger row, written with its typed row by [`Ledger::typed`].
pub(crate) struct Ledger<'a> {
    conn: &'a Connection,
    seq: i64,
    at: String,
    kind: EvidenceKind,
    business: Option<String>,
    prev: &'a Hash,
    /// How this record's row is shared with its neighbour (`mosaic-bus/5`).
    carry: Carry,
}

impl Ledger<'_> {
    /// Writes the ledger row, its hash computed from the values bound here
    /// and in `params` (the typed row, every column in the table's order),
    /// then the typed row with `sql`, unless the next record's row carries
    /// this one ([`Carry::ByNext`]).
    fn typed(&self, sql: &str, params: &[&dyn ToSql]) -> rusqlite::Result<Hash> {
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

/// Writes one fact as ledger row `seq` plus its typed row, chained after
/// `prev`; returns the new row's hash. `carry` says whether the row is
/// shared with a neighbour ([`Carry`]).
pub(crate) fn insert(
    conn: &Connection,
    seq: i64,
    record: &Stamped,
    prev: &Hash,
    carry: Carry,
) -> rusqlite::Result<Hash> {
    let e = &record.evidence;
    let ledger = &Ledger {
        conn,
        seq,
        at: record.at.to_string(),
        kind: e.kind(),
        business: e.business().map(ToString::to_string),
        prev,
        carry,
    };
    match e {
        Evidence::Launch(LaunchEvidence::Launched(l)) => ledger.typed(
                "INSERT INTO launches (seq, business, role, run, harness, address, pid, start_time) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                ledger.seq,
                l.business.as_str(),
                l.role.as_str(),
                l.run.as_str(),
                l.harness.as_str(),
                l.address,
                l.pid,
                i64::try_from(l.start_time).unwrap_or(-1)
            ]),
        Evidence::Launch(LaunchEvidence::Revoked { business } | LaunchEvidence::Restored { business }) => {
            let state = if matches!(e, Evidence::Launch(LaunchEvidence::Revoked { .. })) { "off" } else { "on" };
            ledger.typed("INSERT INTO launch_switches (seq, business, state) VALUES (?1, ?2, ?3)", params![
                ledger.seq, business.as_str(), state])
        }
        Evidence::Claim(c) => {
            let (business, agent, event, decision) = match c {
                ClaimEvidence::Claimed { business, agent } => (business, agent, "claimed", None),
                ClaimEvidence::Released { business, agent } => (business, agent, "released", None),
                ClaimEvidence::Revoked { business, agent, decision } => (business, agent, "revoked", Some(decision)),
                // A row of `run_ends` (mosaic-bus/6), not of `claims`.
                ClaimEvidence::Ended(end) => {
                    return ends::insert(end, ledger.seq, |sql, params| ledger.typed(sql, params))
                }
            };
            ledger.typed(
                "INSERT INTO claims (seq, business, role, run, event, decision) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                ledger.seq, business.as_str(), agent.role.as_str(), agent.run.as_str(), event, opt(decision)])
        }
        Evidence::Decision(DecisionEvidence::Raised(d)) => insert_decision(ledger, d),
        Evidence::Decision(DecisionEvidence::Resolved { business, id, choice, by, note }) => {
            let event = DecisionEventRow { event: "resolved", choice: Some(choice.as_str()), by: actor_cols(by), note: note.as_deref(), superseded_by: None };
            insert_decision_event(ledger, business, id, event)
        }
        Evidence::Decision(DecisionEvidence::Seen { business, id, by, note }) => {
            let event = DecisionEventRow { event: "seen", choice: None, by: actor_cols(by), note: note.as_deref(), superseded_by: None };
            insert_decision_event(ledger, business, id, event)
        }
        Evidence::Decision(DecisionEvidence::Withdrawn { business, id, by, note }) => {
            let event = DecisionEventRow { event: "withdrawn", choice: None, by: actor_cols(by), note: note.as_deref(), superseded_by: None };
            insert_decision_event(ledger, business, id, event)
        }
        Evidence::Decision(DecisionEvidence::Superseded { business, id, by }) => {
            let event = DecisionEventRow { event: "superseded", choice: None, by: (None, None), note: None, superseded_by: Some(by) };
            insert_decision_event(ledger, business, id, event)
        }
        Evidence::Consumed(c) => ledger.typed(
                "INSERT INTO consumptions (seq, decision, business, role, run, action, target) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                ledger.seq,
                c.decision.to_string(),
                c.business.as_str(),
                c.agent.role.as_str(),
                c.agent.run.as_str(),
                c.action.as_str(),
                opt(c.target.as_ref())
            ]),
        Evidence::Allowed(a) => {
            let (sk, s) = subject_cols(a.subject.as_ref());
            ledger.typed(
                "INSERT INTO allowances (seq, business, role, run, action, target, decision, subject_kind, \
                 subject) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                ledger.seq,
                a.business.as_str(),
                a.agent.role.as_str(),
                a.agent.run.as_str(),
                a.action.as_str(),
                opt(a.target.as_ref()),
                opt(a.decision.as_ref()),
                sk,
                s
            ])
        }
        Evidence::Message(MessageEvidence::Sent(m)) => {
            let (from_role, from_run) = match &m.from {
                Sender::Agent(a) => (Some(a.role.as_str()), Some(a.run.as_str())),
                Sender::Human => (None, None),
            };
            let to_role = match &m.to {
                Recipient::Role(r) => Some(r.as_str()),
                Recipient::Human => None,
            };
            let allowed = match carry {
                Carry::Previous(grant) => Some(grant),
                Carry::Alone | Carry::ByNext => None,
            };
            ledger.typed(
                "INSERT INTO messages (seq, id, business, from_role, from_run, to_role, class, body, in_reply_to, \
                 corrects, decision, request, allowed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                ledger.seq,
                m.id.to_string(),
                m.business.as_str(),
                from_role,
                from_run,
                to_role,
                m.class.map(MessageClass::as_str),
                m.body,
                opt(m.in_reply_to.as_ref()),
                opt(m.corrects.as_ref()),
                opt(m.decision.as_ref()),
                opt(m.request.as_ref()),
                allowed
            ])
        }
        Evidence::Message(MessageEvidence::Delivered { business, message, run }) => ledger.typed("INSERT INTO deliveries (seq, message, business, run) VALUES (?1, ?2, ?3, ?4)", params![
                ledger.seq, message.to_string(), business.as_str(), run.as_str()]),
        Evidence::Message(MessageEvidence::Read { business, message, run }) => ledger.typed("INSERT INTO reads (seq, message, business, run) VALUES (?1, ?2, ?3, ?4)", params![
                ledger.seq, message.to_string(), business.as_str(), run.as_str()]),
        Evidence::Human(h) => {
            let (sk, s) = subject_cols(h.subject.as_ref());
            ledger.typed(
                "INSERT INTO human_inputs (seq, id, business, verb, subject_kind, subject) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                ledger.seq, h.id.to_string(), h.business.as_str(), h.verb, sk, s])
        }
        Evidence::Observed(o) => {
            let (sk, s) = subject_cols(o.subject.as_ref());
            ledger.typed(
                "INSERT INTO observations (seq, business, role, run, kind, body, subject_kind, subject, request) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                ledger.seq,
                o.business.as_str(),
                o.agent.role.as_str(),
                o.agent.run.as_str(),
                o.kind,
                o.body,
                sk,
                s,
                opt(o.request.as_ref())
            ])
        }
        Evidence::Refused(r) => ledger.typed(
                "INSERT INTO refusals (seq, business, role, run, verb, code) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                ledger.seq,
                opt(r.business.as_ref()),
                r.agent.as_ref().map(|a| a.role.as_str()),
                r.agent.as_ref().map(|a| a.run.as_str()),
                r.verb,
                r.refusal.code()
            ]),
        Evidence::RefusalsCounted(c) => ledger.typed(
            "INSERT INTO refusal_counts (seq, business, role, run, verb, code, since, count) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                ledger.seq,
                opt(c.refused.business.as_ref()),
                c.refused.agent.as_ref().map(|a| a.role.as_str()),
                c.refused.agent.as_ref().map(|a| a.run.as_str()),
                c.refused.verb,
                c.refused.refusal.code(),
                c.since.to_string(),
                i64::try_from(c.count).unwrap_or(i64::MAX)
            ],
        ),
    }
}

/// The columns of a `decision_events` row besides its keys.
struct DecisionEventRow<'a> {
    event: &'static str,
    choice: Option<&'a str>,
    by: (Option<String>, Option<String>),
    note: Option<&'a str>,
    superseded_by: Option<&'a DecisionId>,
}

fn insert_decision_event(
    ledger: &Ledger<'_>,
    business: &BusinessId,
    id: &DecisionId,
    row: DecisionEventRow<'_>,
) -> rusqlite::Result<Hash> {
    ledger.typed(
        "INSERT INTO decision_events (seq, decision, business, event, choice, by_role, by_run, note, \
         superseded_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    params![
                ledger.seq,
        id.to_string(),
        business.as_str(),
        row.event,
        row.choice,
        row.by.0,
        row.by.1,
        row.note,
        opt(row.superseded_by)
    ])
}

fn insert_decision(ledger: &Ledger<'_>, d: &DecisionRecord) -> rusqlite::Result<Hash> {
    let options: Vec<serde_json::Value> = d
        .fields
        .options
        .iter()
        .map(|o| serde_json::json!({"key": o.key.as_str(), "text": o.text}))
        .collect();
    let route_role = match &d.route {
        Route::Role(r) => Some(r.as_str()),
        Route::Human => None,
    };
    ledger.typed(
        "INSERT INTO decisions (seq, id, business, raiser_role, raiser_run, action, target, question, options, \
         recommendation, blocking, technical, project, task_ref, requirement_ref, supersedes, approval_choice, \
         class, route_role, holder) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, \
         ?17, ?18, ?19, ?20)",
    params![
                ledger.seq,
        d.id.to_string(),
        d.business.as_str(),
        d.raiser.role.as_str(),
        d.raiser.run.as_str(),
        d.fields.action.as_str(),
        opt(d.fields.target.as_ref()),
        d.fields.question,
        serde_json::Value::Array(options).to_string(),
        d.fields.recommendation,
        d.fields.blocking,
        d.fields.technical,
        d.fields.project,
        opt(d.fields.task_ref.as_ref()),
        d.fields.requirement_ref,
        opt(d.fields.supersedes.as_ref()),
        d.approval_choice.as_str(),
        d.class.as_str(),
        route_role,
        opt(d.holder.as_ref())
    ])
}

// --- reading back ---

fn bad(what: &'static str) -> Undecodable {
    Undecodable(what)
}

fn parse<T>(
    text: &str,
    f: impl Fn(&str) -> Result<T, Refusal>,
    what: &'static str,
) -> Result<T, Undecodable> {
    f(text).map_err(|_| bad(what))
}

fn parse_opt<T>(
    text: Option<String>,
    f: impl Fn(&str) -> Result<T, Refusal>,
    what: &'static str,
) -> Result<Option<T>, Undecodable> {
    text.map(|t| parse(&t, f, what)).transpose()
}

fn business(text: &str) -> Result<BusinessId, Undecodable> {
    parse(text, BusinessId::parse, "business")
}

fn agent(role: &str, run: &str) -> Result<AgentRef, Undecodable> {
    Ok(AgentRef {
        role: parse(role, RoleInstance::parse, "role")?,
        run: parse(run, RunId::parse, "run")?,
    })
}

fn actor(role: Option<String>, run: Option<String>) -> Result<DecisionActor, Undecodable> {
    match (role, run) {
        (Some(role), Some(run)) => Ok(DecisionActor::Agent(agent(&role, &run)?)),
        (None, None) => Ok(DecisionActor::Human),
        (Some(_), None) | (None, Some(_)) => Err(bad("actor")),
    }
}

/// Decodes `subject_kind` + `subject` columns.
pub(crate) fn subject(
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

/// Reads the fact stored under ledger row `seq` of kind `kind`: the kind
/// names the typed table and the shape, one arm per kind.
pub(crate) fn load(
    conn: &Connection,
    seq: i64,
    at: &str,
    kind: &str,
) -> Result<Stamped, ReadError> {
    let at = parse(at, Timestamp::parse, "at")?;
    let kind = EvidenceKind::parse(kind).ok_or(bad("ledger kind"))?;
    let evidence = match kind {
        EvidenceKind::SessionLaunched => {
            Evidence::Launch(LaunchEvidence::Launched(load_launch(conn, seq)?))
        }
        EvidenceKind::LaunchRevoked => Evidence::Launch(LaunchEvidence::Revoked {
            business: load_switch(conn, seq)?,
        }),
        EvidenceKind::LaunchRestored => Evidence::Launch(LaunchEvidence::Restored {
            business: load_switch(conn, seq)?,
        }),
        EvidenceKind::RoleClaimed => {
            let (business, agent, _) = load_claim(conn, seq)?;
            Evidence::Claim(ClaimEvidence::Claimed { business, agent })
        }
        EvidenceKind::RoleReleased => {
            let (business, agent, _) = load_claim(conn, seq)?;
            Evidence::Claim(ClaimEvidence::Released { business, agent })
        }
        EvidenceKind::RoleRevoked => {
            let (business, agent, decision) = load_claim(conn, seq)?;
            let decision = decision.ok_or(bad("decision"))?;
            Evidence::Claim(ClaimEvidence::Revoked {
                business,
                agent,
                decision,
            })
        }
        EvidenceKind::SessionEnded => {
            Evidence::Claim(ClaimEvidence::Ended(ends::load(conn, seq)?.map_err(bad)?))
        }
        EvidenceKind::DecisionRaised => Evidence::Decision(DecisionEvidence::Raised(Box::new(
            load_decision(conn, seq)?,
        ))),
        EvidenceKind::DecisionResolved => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Resolved {
                choice: parse_opt(e.choice, OptionKey::parse, "choice")?.ok_or(bad("choice"))?,
                by: actor(e.by_role, e.by_run)?,
                business: e.business,
                id: e.id,
                note: e.note,
            })
        }
        EvidenceKind::DecisionSeen => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Seen {
                by: actor(e.by_role, e.by_run)?,
                business: e.business,
                id: e.id,
                note: e.note,
            })
        }
        EvidenceKind::DecisionWithdrawn => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Withdrawn {
                by: actor(e.by_role, e.by_run)?,
                business: e.business,
                id: e.id,
                note: e.note,
            })
        }
        EvidenceKind::DecisionSuperseded => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Superseded {
                by: parse_opt(e.superseded_by, DecisionId::parse, "superseded by")?
                    .ok_or(bad("superseded by"))?,
                business: e.business,
                id: e.id,
            })
        }
        EvidenceKind::ApprovalConsumed => Evidence::Consumed(load_consumption(conn, seq)?),
        EvidenceKind::ActionAllowed => Evidence::Allowed(load_allowed(conn, seq)?),
        EvidenceKind::MessageSent => {
            let mut st = one(
                conn,
                &format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq = ?1"),
            )?;
            let record = st
                .query_row([seq], |r| Ok(message_row(r)))
                .optional()?
                .ok_or(bad("message"))??;
            Evidence::Message(MessageEvidence::Sent(Box::new(record)))
        }
        EvidenceKind::MessageDelivered => {
            let (business, message, run) = load_hand_off(conn, seq, Table::Deliveries)?;
            Evidence::Message(MessageEvidence::Delivered {
                business,
                message,
                run,
            })
        }
        EvidenceKind::MessageRead => {
            let (business, message, run) = load_hand_off(conn, seq, Table::Reads)?;
            Evidence::Message(MessageEvidence::Read {
                business,
                message,
                run,
            })
        }
        EvidenceKind::HumanInput => Evidence::Human(load_human_input(conn, seq)?),
        EvidenceKind::EventObserved => Evidence::Observed(load_observation(conn, seq)?),
        EvidenceKind::RequestRefused => Evidence::Refused(load_refusal(conn, seq)?),
        EvidenceKind::RefusalsCounted => Evidence::RefusalsCounted(load_refusal_count(conn, seq)?),
    };
    Ok(Stamped { at, evidence })
}

fn one<'c>(conn: &'c Connection, sql: &str) -> rusqlite::Result<CachedStatement<'c>> {
    conn.prepare_cached(sql)
}

fn load_launch(conn: &Connection, seq: i64) -> Result<LaunchRecord, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, harness, address, pid, start_time FROM launches WHERE seq = ?1",
    )?;
    let (b, role, run, harness, address, pid, start) = st.query_row([seq], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, i64>(6)?,
        ))
    })?;
    Ok(LaunchRecord {
        business: business(&b)?,
        role: parse(&role, RoleInstance::parse, "role")?,
        run: parse(&run, RunId::parse, "run")?,
        harness: parse(&harness, Harness::parse, "harness")?,
        address,
        pid: u32::try_from(pid).map_err(|_| bad("pid"))?,
        start_time: u64::try_from(start).map_err(|_| bad("start time"))?,
    })
}

/// The business of a `launch_switches` row.
fn load_switch(conn: &Connection, seq: i64) -> Result<BusinessId, ReadError> {
    let b: String = one(conn, "SELECT business FROM launch_switches WHERE seq = ?1")?
        .query_row([seq], |r| r.get(0))?;
    Ok(business(&b)?)
}

/// A `claims` row: its business, agent and (for a revocation) decision.
fn load_claim(
    conn: &Connection,
    seq: i64,
) -> Result<(BusinessId, AgentRef, Option<DecisionId>), ReadError> {
    let (b, role, run, decision): (String, String, String, Option<String>) = one(
        conn,
        "SELECT business, role, run, decision FROM claims WHERE seq = ?1",
    )?
    .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    Ok((
        business(&b)?,
        agent(&role, &run)?,
        parse_opt(decision, DecisionId::parse, "decision")?,
    ))
}

/// A `decision_events` row, its keys decoded; each kind decodes the
/// columns it uses.
struct DecisionEventColumns {
    business: BusinessId,
    id: DecisionId,
    choice: Option<String>,
    by_role: Option<String>,
    by_run: Option<String>,
    note: Option<String>,
    superseded_by: Option<String>,
}

fn load_decision_event(conn: &Connection, seq: i64) -> Result<DecisionEventColumns, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, decision, choice, by_role, by_run, note, superseded_by FROM decision_events \
         WHERE seq = ?1",
    )?;
    let (b, id, choice, by_role, by_run, note, superseded_by) = st.query_row([seq], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ))
    })?;
    Ok(DecisionEventColumns {
        business: business(&b)?,
        id: parse(&id, DecisionId::parse, "decision")?,
        choice,
        by_role,
        by_run,
        note,
        superseded_by,
    })
}

fn load_consumption(conn: &Connection, seq: i64) -> Result<Consumption, ReadError> {
    let mut st = one(
        conn,
        "SELECT decision, business, role, run, action, target FROM consumptions WHERE seq = ?1",
    )?;
    let (d, b, role, run, action, target) = st.query_row([seq], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, Option<String>>(5)?,
        ))
    })?;
    Ok(Consumption {
        business: business(&b)?,
        decision: parse(&d, DecisionId::parse, "decision")?,
        agent: agent(&role, &run)?,
        action: parse(&action, Action::parse, "action")?,
        target: parse_opt(target, Target::parse, "target")?,
    })
}

fn load_allowed(conn: &Connection, seq: i64) -> Result<ActionAllowed, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, action, target, decision, subject_kind, subject FROM allowances \
         WHERE seq = ?1 \
         UNION ALL SELECT business, from_role, from_run, 'message.send', coalesce(to_role, 'human'), \
         CASE allowed WHEN 'approved' THEN decision END, CASE WHEN to_role IS NOT NULL THEN 'role' END, \
         to_role FROM messages WHERE seq = ?1 + 1 AND allowed IS NOT NULL",
    )?;
    let (b, role, run, action, target, decision, sk, s) = st.query_row([seq], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, Option<String>>(5)?,
            r.get::<_, Option<String>>(6)?,
            r.get::<_, Option<String>>(7)?,
        ))
    })?;
    Ok(ActionAllowed {
        business: business(&b)?,
        agent: agent(&role, &run)?,
        action: parse(&action, Action::parse, "action")?,
        target: parse_opt(target, Target::parse, "target")?,
        decision: parse_opt(decision, DecisionId::parse, "decision")?,
        subject: subject(sk, s)?,
    })
}

/// A `deliveries` or `reads` row: the business, the message and the run.
fn load_hand_off(
    conn: &Connection,
    seq: i64,
    table: Table,
) -> Result<(BusinessId, MessageId, RunId), ReadError> {
    let sql = format!(
        "SELECT message, business, run FROM {} WHERE seq = ?1",
        table.name()
    );
    let (m, b, run): (String, String, String) =
        one(conn, &sql)?.query_row([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok((
        business(&b)?,
        parse(&m, MessageId::parse, "message")?,
        parse(&run, RunId::parse, "run")?,
    ))
}

fn load_human_input(conn: &Connection, seq: i64) -> Result<HumanInput, ReadError> {
    let mut st = one(
        conn,
        "SELECT id, business, verb, subject_kind, subject FROM human_inputs WHERE seq = ?1",
    )?;
    let (id, b, verb, sk, s) = st.query_row([seq], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, Option<String>>(3)?,
            r.get::<_, Option<String>>(4)?,
        ))
    })?;
    Ok(HumanInput {
        id: parse(&id, EventId::parse, "input id")?,
        business: business(&b)?,
        verb,
        subject: subject(sk, s)?,
    })
}

fn load_observation(conn: &Connection, seq: i64) -> Result<Observation, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, kind, body, subject_kind, subject, request FROM observations \
         WHERE seq = ?1",
    )?;
    let (b, role, run, kind, body, sk, s, request) = st.query_row([seq], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, Option<String>>(5)?,
            r.get::<_, Option<String>>(6)?,
            r.get::<_, Option<String>>(7)?,
        ))
    })?;
    Ok(Observation {
        business: business(&b)?,
        agent: agent(&role, &run)?,
        kind,
        body,
        subject: subject(sk, s)?,
        request: parse_opt(request, EventId::parse, "request")?,
    })
}

fn load_refusal(conn: &Connection, seq: i64) -> Result<RefusalRecord, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, verb, code FROM refusals WHERE seq = ?1",
    )?;
    let columns = st.query_row([seq], refusal_columns)?;
    Ok(refusal_record(columns)?)
}

fn load_refusal_count(conn: &Connection, seq: i64) -> Result<RefusalCount, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, verb, code, since, count FROM refusal_counts WHERE seq = ?1",
    )?;
    let (columns, since, count) = st.query_row([seq], |r| {
        Ok((
            refusal_columns(r)?,
            r.get::<_, String>(5)?,
            r.get::<_, i64>(6)?,
        ))
    })?;
    Ok(RefusalCount {
        refused: refusal_record(columns)?,
        since: parse(&since, Timestamp::parse, "since")?,
        count: u64::try_from(count).map_err(|_| bad("count"))?,
    })
}

/// A refusal's `business, role, run, verb, code` columns, first in a row.
type RefusalColumns = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

fn refusal_columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<RefusalColumns> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn refusal_record(
    (b, role, run, verb, code): RefusalColumns,
) -> Result<RefusalRecord, Undecodable> {
    let agent = match (role, run) {
        (Some(role), Some(run)) => Some(agent(&role, &run)?),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => return Err(bad("refused agent")),
    };
    Ok(RefusalRecord {
        business: b.as_deref().map(business).transpose()?,
        agent,
        verb,
        refusal: Refusal::from_code(&code).ok_or(bad("refusal code"))?,
    })
}

/// The record of the raised decision `id`, if there is one.
pub(crate) fn decision_by_id(
    conn: &Connection,
    id: &str,
) -> Result<Option<DecisionRecord>, ReadError> {
    let mut st = conn.prepare_cached(
        "SELECT id, business, raiser_role, raiser_run, action, target, question, options, recommendation, \
         blocking, technical, project, task_ref, requirement_ref, supersedes, approval_choice, class, route_role, \
         holder FROM decisions WHERE id = ?1",
    )?;
    let mut rows = st.query([id])?;
    match rows.next()? {
        Some(r) => Ok(Some(decision_row(r)?)),
        None => Ok(None),
    }
}

fn load_decision(conn: &Connection, seq: i64) -> Result<DecisionRecord, ReadError> {
    let mut st = conn.prepare_cached(
        "SELECT id, business, raiser_role, raiser_run, action, target, question, options, recommendation, \
         blocking, technical, project, task_ref, requirement_ref, supersedes, approval_choice, class, route_role, \
         holder FROM decisions WHERE seq = ?1",
    )?;
    let record = st.query_row([seq], |r| Ok(decision_row(r)))??;
    Ok(record)
}

fn decision_row(r: &Row<'_>) -> Result<DecisionRecord, ReadError> {
    let options: String = r.get(7)?;
    let options: Vec<serde_json::Value> =
        serde_json::from_str(&options).map_err(|_| bad("options"))?;
    let options = options
        .iter()
        .map(|o| {
            let key = o
                .get("key")
                .and_then(serde_json::Value::as_str)
                .ok_or(bad("option key"))?;
            let text = o
                .get("text")
                .and_then(serde_json::Value::as_str)
                .ok_or(bad("option text"))?;
            Ok(DecisionOption {
                key: parse(key, OptionKey::parse, "option key")?,
                text: text.to_owned(),
            })
        })
        .collect::<Result<Vec<_>, Undecodable>>()?;
    let class = match r.get::<_, String>(16)?.as_str() {
        "within-role" => ActionClass::WithinRole,
        "cross-role" => ActionClass::CrossRole,
        "gated" => ActionClass::Gated,
        _ => return Err(bad("class").into()),
    };
    let route = match r.get::<_, Option<String>>(17)? {
        Some(role) => Route::Role(parse(&role, RoleInstance::parse, "route")?),
        None => Route::Human,
    };
    Ok(DecisionRecord {
        id: parse(&r.get::<_, String>(0)?, DecisionId::parse, "decision id")?,
        business: business(&r.get::<_, String>(1)?)?,
        raiser: agent(&r.get::<_, String>(2)?, &r.get::<_, String>(3)?)?,
        fields: RaiseFields {
            action: parse(&r.get::<_, String>(4)?, Action::parse, "action")?,
            target: parse_opt(r.get(5)?, Target::parse, "target")?,
            question: r.get(6)?,
            options,
            recommendation: r.get(8)?,
            blocking: r.get(9)?,
            technical: r.get(10)?,
            project: r.get(11)?,
            task_ref: parse_opt(r.get(12)?, TaskRef::parse, "task ref")?,
            requirement_ref: r.get(13)?,
            supersedes: parse_opt(r.get(14)?, DecisionId::parse, "supersedes")?,
        },
        approval_choice: parse(
            &r.get::<_, String>(15)?,
            OptionKey::parse,
            "approval choice",
        )?,
        class,
        route,
        holder: parse_opt(r.get(18)?, RunId::parse, "holder")?,
    })
}

/// The `messages m` columns [`message_row`] reads, in order.
pub(crate) const MESSAGE_COLUMNS: &str =
    "m.id, m.business, m.from_role, m.from_run, m.to_role, m.class, m.body, m.in_reply_to, m.corrects, \
     m.decision, m.request";

/// Decodes the [`MESSAGE_COLUMNS`] at the start of a row.
pub(crate) fn message_row(r: &Row<'_>) -> Result<MessageRecord, ReadError> {
    let from = actor(r.get(2)?, r.get(3)?)?;
    let class = match r.get::<_, Option<String>>(5)? {
        Some(c) => Some(parse(&c, MessageClass::parse, "class")?),
        None => None,
    };
    Ok(MessageRecord {
        id: parse(&r.get::<_, String>(0)?, MessageId::parse, "message id")?,
        business: business(&r.get::<_, String>(1)?)?,
        from: match from {
            DecisionActor::Agent(a) => Sender::Agent(a),
            DecisionActor::Human => Sender::Human,
        },
        to: match r.get::<_, Option<String>>(4)? {
            Some(role) => Recipient::Role(parse(&role, RoleInstance::parse, "recipient")?),
            None => Recipient::Human,
        },
        class,
        body: r.get(6)?,
        in_reply_to: parse_opt(r.get(7)?, MessageId::parse, "in reply to")?,
        corrects: parse_opt(r.get(8)?, MessageId::parse, "corrects")?,
        decision: parse_opt(r.get(9)?, DecisionId::parse, "decision")?,
        request: parse_opt(r.get(10)?, EventId::parse, "request")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The names in a `'a', 'b'` list or in `kind = 'a' OR …` text.
    fn quoted(text: &str) -> BTreeSet<&str> {
        text.split('\'').skip(1).step_by(2).collect()
    }

    fn kinds(pick: fn(EvidenceKind) -> bool) -> BTreeSet<&'static str> {
        EvidenceKind::ALL
            .iter()
            .filter(|k| pick(**k))
            .map(|k| k.as_str())
            .collect()
    }

    #[test]
    fn the_schema_and_the_store_lists_name_exactly_the_domain_kinds() {
        // The ledger's insert trigger lists the kinds the schema stores.
        let sql = mosaic_schema::SCHEMA_SQL;
        let trigger = &sql[sql.find("CREATE TRIGGER ledger_insert").unwrap()..];
        let known = &trigger[trigger.find("NOT (NEW.kind").unwrap()..trigger.find("END;").unwrap()];
        assert_eq!(quoted(known), kinds(|_| true), "the schema's ledger kinds");
        assert_eq!(
            quoted(&MACHINE_KINDS),
            kinds(EvidenceKind::is_machine_state),
            "the kinds a restart replays"
        );
        assert_eq!(
            quoted(&CHANGE_KINDS),
            kinds(EvidenceKind::can_be_change),
            "the kinds the feed reads"
        );
        // Each table's insert trigger names its kinds, whole or as their
        // family followed by the row's event (`'role.' || NEW.event`).
        for &kind in EvidenceKind::ALL {
            let table = Table::of(kind).stored();
            let head = format!("CREATE TRIGGER {table}_insert BEFORE INSERT ON {table} BEGIN");
            let body = &sql[sql.find(&head).unwrap_or_else(|| panic!("{head}"))..];
            let body = &body[..body.find("END;").unwrap()];
            let (family, _) = kind.as_str().split_once('.').unwrap();
            assert!(
                body.contains(&format!("'{kind}'"))
                    || body.contains(&format!("'{family}.' || NEW.event")),
                "{table} is where {kind} is stored"
            );
        }
    }
}
