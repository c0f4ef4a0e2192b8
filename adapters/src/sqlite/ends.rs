//! The ends of runs (`mosaic-bus/6`): each `session.ended` record is a row
//! of `run_ends`, whose columns are bound and decoded here. The ledger row
//! beside it is `rows.rs`'s, which hands in the way to write both.

use mosaic_domain::evidence::AgentRef;
use mosaic_domain::evidence::{EndCause, Ending, RunEnd};
use mosaic_domain::{BusinessId, RoleInstance, RunId};
use rusqlite::{params, Connection, ToSql};

use super::chain::Hash;

/// Writes `end` as the `run_ends` row at `seq` through `typed`, which
/// writes the ledger row and then the typed row from `sql` and its values
/// (and hashes both).
pub(super) fn insert(
    end: &RunEnd,
    seq: i64,
    typed: impl FnOnce(&str, &[&dyn ToSql]) -> rusqlite::Result<Hash>,
) -> rusqlite::Result<Hash> {
    let ending = &end.ending;
    typed(
        "INSERT INTO run_ends (seq, business, role, run, cause, status, signal, vacated) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            seq,
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

/// The `run_ends` row of ledger row `seq`: the end, or the name of the
/// column that does not decode. A row whose cause and process disagree
/// does not decode, whatever the schema let in.
///
/// # Errors
/// SQLite's, when the row cannot be read.
pub(super) fn load(conn: &Connection, seq: i64) -> rusqlite::Result<Result<RunEnd, &'static str>> {
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
    Ok(
        decode(&business, &role, &run, &cause, status, signal).map(|(business, agent, ending)| {
            RunEnd {
                business,
                agent,
                ending,
                vacated,
            }
        }),
    )
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
