//! The `run_ends` table (`mosaic-bus/6`): each `session.ended` record is a
//! row of it, whose columns are bound and decoded here.

use mosaic_domain::evidence::AgentRef;
use mosaic_domain::evidence::{EndCause, Ending, RunEnd};
use mosaic_domain::{BusinessId, RoleInstance, RunId};
use rusqlite::{params, Connection};

use super::super::chain::Hash;
use super::ledger::{bad, Ledger, ReadError};

/// Writes `end` as the ledger row and its `run_ends` row.
pub(super) fn insert(ledger: &Ledger<'_>, end: &RunEnd) -> rusqlite::Result<Hash> {
    let ending = &end.ending;
    ledger.typed(
        "INSERT INTO run_ends (seq, business, role, run, cause, status, signal, vacated) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            ledger.seq,
            end.business.as_str(),
            end.agent.role.as_str(),
            end.agent.run.as_str(),
            ending.cause().as_str(),
            ending.status(),
            ending.signal(),
            end.vacated
        ],
    )
}

/// The `run_ends` row of ledger row `seq`. A row whose cause and process
/// disagree does not decode, whatever the schema let in.
pub(super) fn load_end(conn: &Connection, seq: i64) -> Result<RunEnd, ReadError> {
    type Columns = (
        String,
        String,
        String,
        String,
        Option<i32>,
        Option<i32>,
        bool,
    );
    let (business, role, run, cause, status, signal, vacated): Columns = conn
        .prepare_cached(
            "SELECT business, role, run, cause, status, signal, vacated FROM run_ends \
             WHERE seq = ?1",
        )?
        .query_row([seq], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })?;
    let (business, agent, ending) =
        decode(&business, &role, &run, &cause, status, signal).map_err(bad)?;
    Ok(RunEnd {
        business,
        agent,
        ending,
        vacated,
    })
}

fn decode(
    business: &str,
    role: &str,
    run: &str,
    cause: &str,
    status: Option<i32>,
    signal: Option<i32>,
) -> Result<(BusinessId, AgentRef, Ending), &'static str> {
    let cause = EndCause::parse(cause).map_err(|_| "end cause")?;
    Ok((
        BusinessId::parse(business).map_err(|_| "business")?,
        AgentRef {
            role: RoleInstance::parse(role).map_err(|_| "role")?,
            run: RunId::parse(run).map_err(|_| "run")?,
        },
        Ending::new(cause, status, signal).map_err(|_| "ending")?,
    ))
}
