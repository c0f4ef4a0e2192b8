//! The `refusals` and `refusal_counts` tables: a refused request, and the
//! refusals past their window's rows, counted.

use mosaic_domain::evidence::{RefusalCount, RefusalRecord};
use mosaic_domain::{Refusal, Timestamp};
use rusqlite::{params, Connection};

use super::super::chain::Hash;
use super::ledger::{agent, bad, business, one, opt, parse, Ledger, ReadError, Undecodable};

/// Writes a refused request.
pub(super) fn insert_refused(ledger: &Ledger<'_>, r: &RefusalRecord) -> rusqlite::Result<Hash> {
    ledger.typed(
        "INSERT INTO refusals (seq, business, role, run, verb, code) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            ledger.seq,
            opt(r.business.as_ref()),
            r.agent.as_ref().map(|a| a.role.as_str()),
            r.agent.as_ref().map(|a| a.run.as_str()),
            r.verb,
            r.refusal.code()
        ],
    )
}

/// Writes a count of refusals.
pub(super) fn insert_counted(ledger: &Ledger<'_>, c: &RefusalCount) -> rusqlite::Result<Hash> {
    ledger.typed(
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
    )
}

pub(super) fn load_refusal(conn: &Connection, seq: i64) -> Result<RefusalRecord, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, verb, code FROM refusals WHERE seq = ?1",
    )?;
    let columns = st.query_row([seq], refusal_columns)?;
    Ok(refusal_record(columns)?)
}

pub(super) fn load_refusal_count(conn: &Connection, seq: i64) -> Result<RefusalCount, ReadError> {
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
