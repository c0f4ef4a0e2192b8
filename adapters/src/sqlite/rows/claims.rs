//! The `claims` table: a role claimed, released or revoked.

use mosaic_domain::evidence::{AgentRef, ClaimEvidence};
use mosaic_domain::{BusinessId, DecisionId};
use rusqlite::{params, Connection};

use super::super::chain::Hash;
use super::ledger::{agent, business, one, opt, parse_opt, Ledger, ReadError};

/// Writes a claim, a release or a revocation.
pub(super) fn insert(ledger: &Ledger<'_>, c: &ClaimEvidence) -> rusqlite::Result<Hash> {
    let (business, agent, event, decision) = match c {
        ClaimEvidence::Claimed { business, agent } => (business, agent, "claimed", None),
        ClaimEvidence::Released { business, agent } => (business, agent, "released", None),
        ClaimEvidence::Revoked {
            business,
            agent,
            decision,
        } => (business, agent, "revoked", Some(decision)),
        // A row of `run_ends` (mosaic-bus/6), not of `claims`.
        ClaimEvidence::Ended(end) => return super::ends::insert(ledger, end),
    };
    ledger.typed(
        "INSERT INTO claims (seq, business, role, run, event, decision) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            ledger.seq,
            business.as_str(),
            agent.role.as_str(),
            agent.run.as_str(),
            event,
            opt(decision)
        ],
    )
}

/// A `claims` row: its business, agent and (for a revocation) decision.
pub(super) fn load_claim(
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
