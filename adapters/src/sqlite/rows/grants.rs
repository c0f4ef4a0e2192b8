//! The `consumptions` and `allowances` tables: an approval spent, and an
//! action allowed (the view `actions_allowed` adds the ones a message
//! carries, `mosaic-bus/5`).

use mosaic_domain::evidence::{ActionAllowed, Consumption};
use mosaic_domain::{Action, DecisionId, Target};
use rusqlite::{params, Connection};

use super::super::chain::Hash;
use super::ledger::{
    agent, business, one, opt, parse, parse_opt, subject, subject_cols, Ledger, ReadError,
};

/// Writes a spent approval.
pub(super) fn insert_consumed(ledger: &Ledger<'_>, c: &Consumption) -> rusqlite::Result<Hash> {
    ledger.typed(
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
        ],
    )
}

/// Writes an allowed action.
pub(super) fn insert_allowed(ledger: &Ledger<'_>, a: &ActionAllowed) -> rusqlite::Result<Hash> {
    let (sk, s) = subject_cols(a.subject.as_ref());
    ledger.typed(
        "INSERT INTO allowances (seq, business, role, run, action, target, decision, \
         subject_kind, subject) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        ],
    )
}

pub(super) fn load_consumption(conn: &Connection, seq: i64) -> Result<Consumption, ReadError> {
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

pub(super) fn load_allowed(conn: &Connection, seq: i64) -> Result<ActionAllowed, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, action, target, decision, subject_kind, subject \
         FROM allowances WHERE seq = ?1 \
         UNION ALL SELECT business, from_role, from_run, 'message.send', \
         coalesce(to_role, 'human'), CASE allowed WHEN 'approved' THEN decision END, \
         CASE WHEN to_role IS NOT NULL THEN 'role' END, to_role \
         FROM messages WHERE seq = ?1 + 1 AND allowed IS NOT NULL",
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
