//! The `human_inputs` and `observations` tables: what the proven human
//! did, and what an agent or an adapter observed.

use mosaic_domain::evidence::{HumanInput, Observation};
use mosaic_domain::EventId;
use rusqlite::{params, Connection};

use super::super::chain::Hash;
use super::ledger::{
    agent, business, one, opt, parse, parse_opt, subject, subject_cols, Ledger, ReadError,
};

/// Writes what the human did.
pub(super) fn insert_human(ledger: &Ledger<'_>, h: &HumanInput) -> rusqlite::Result<Hash> {
    let (sk, s) = subject_cols(h.subject.as_ref());
    ledger.typed(
        "INSERT INTO human_inputs (seq, id, business, verb, subject_kind, subject) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            ledger.seq,
            h.id.to_string(),
            h.business.as_str(),
            h.verb,
            sk,
            s
        ],
    )
}

/// Writes an observation.
pub(super) fn insert_observed(ledger: &Ledger<'_>, o: &Observation) -> rusqlite::Result<Hash> {
    let (sk, s) = subject_cols(o.subject.as_ref());
    ledger.typed(
        "INSERT INTO observations (seq, business, role, run, kind, body, subject_kind, subject, \
         request) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        ],
    )
}

pub(super) fn load_human_input(conn: &Connection, seq: i64) -> Result<HumanInput, ReadError> {
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

pub(super) fn load_observation(conn: &Connection, seq: i64) -> Result<Observation, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, kind, body, subject_kind, subject, request \
         FROM observations WHERE seq = ?1",
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
