//! The `decisions` and `decision_events` tables: a decision raised, and
//! what happened to it after (resolved, seen, withdrawn, superseded).

use mosaic_domain::business::ActionClass;
use mosaic_domain::evidence::{
    DecisionEvidence, DecisionOption, DecisionRecord, OptionKey, RaiseFields, Route,
};
use mosaic_domain::{Action, BusinessId, DecisionId, RoleInstance, RunId, Target, TaskRef};
use rusqlite::{params, Connection, Row};

use super::super::chain::Hash;
use super::ledger::{
    actor_cols, agent, bad, business, one, opt, parse, parse_opt, Ledger, ReadError, Undecodable,
};

/// Writes a raised decision, or one of the events that follow it.
pub(super) fn insert(ledger: &Ledger<'_>, e: &DecisionEvidence) -> rusqlite::Result<Hash> {
    match e {
        DecisionEvidence::Raised(d) => insert_decision(ledger, d),
        DecisionEvidence::Resolved {
            business,
            id,
            choice,
            by,
            note,
        } => {
            let event = DecisionEventRow {
                event: "resolved",
                choice: Some(choice.as_str()),
                by: actor_cols(by),
                note: note.as_deref(),
                superseded_by: None,
            };
            insert_decision_event(ledger, business, id, event)
        }
        DecisionEvidence::Seen {
            business,
            id,
            by,
            note,
        } => {
            let event = DecisionEventRow {
                event: "seen",
                choice: None,
                by: actor_cols(by),
                note: note.as_deref(),
                superseded_by: None,
            };
            insert_decision_event(ledger, business, id, event)
        }
        DecisionEvidence::Withdrawn {
            business,
            id,
            by,
            note,
        } => {
            let event = DecisionEventRow {
                event: "withdrawn",
                choice: None,
                by: actor_cols(by),
                note: note.as_deref(),
                superseded_by: None,
            };
            insert_decision_event(ledger, business, id, event)
        }
        DecisionEvidence::Superseded { business, id, by } => {
            let event = DecisionEventRow {
                event: "superseded",
                choice: None,
                by: (None, None),
                note: None,
                superseded_by: Some(by),
            };
            insert_decision_event(ledger, business, id, event)
        }
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
        "INSERT INTO decision_events (seq, decision, business, event, choice, by_role, by_run, \
         note, superseded_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        ],
    )
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
        "INSERT INTO decisions (seq, id, business, raiser_role, raiser_run, action, target, \
         question, options, recommendation, blocking, technical, project, task_ref, \
         requirement_ref, supersedes, approval_choice, class, route_role, holder) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
         ?18, ?19, ?20)",
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
        ],
    )
}

/// A `decision_events` row, its keys decoded; each kind decodes the
/// columns it uses.
pub(super) struct DecisionEventColumns {
    pub(super) business: BusinessId,
    pub(super) id: DecisionId,
    pub(super) choice: Option<String>,
    pub(super) by_role: Option<String>,
    pub(super) by_run: Option<String>,
    pub(super) note: Option<String>,
    pub(super) superseded_by: Option<String>,
}

pub(super) fn load_decision_event(
    conn: &Connection,
    seq: i64,
) -> Result<DecisionEventColumns, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, decision, choice, by_role, by_run, note, superseded_by \
         FROM decision_events WHERE seq = ?1",
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

/// The record of the raised decision `id`, if there is one.
pub(crate) fn decision_by_id(
    conn: &Connection,
    id: &str,
) -> Result<Option<DecisionRecord>, ReadError> {
    let mut st = conn.prepare_cached(
        "SELECT id, business, raiser_role, raiser_run, action, target, question, options, \
         recommendation, blocking, technical, project, task_ref, requirement_ref, supersedes, \
         approval_choice, class, route_role, holder FROM decisions WHERE id = ?1",
    )?;
    let mut rows = st.query([id])?;
    match rows.next()? {
        Some(r) => Ok(Some(decision_row(r)?)),
        None => Ok(None),
    }
}

pub(super) fn load_decision(conn: &Connection, seq: i64) -> Result<DecisionRecord, ReadError> {
    let mut st = conn.prepare_cached(
        "SELECT id, business, raiser_role, raiser_run, action, target, question, options, \
         recommendation, blocking, technical, project, task_ref, requirement_ref, supersedes, \
         approval_choice, class, route_role, holder FROM decisions WHERE seq = ?1",
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
