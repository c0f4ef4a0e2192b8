//! The reads that walk a business's history rather than one record: the
//! current state of each task, and the closings of its decisions, newest
//! first.

use mosaic_domain::{BusinessId, TaskRef, Timestamp};
use mosaic_ports::{Closed, Closings, TaskView};
use rusqlite::{params, Connection};

use super::rows::{self, ReadError, Undecodable};

/// Every task of `business` at its newest `task.*` observation, in
/// [`TaskRef`] order.
pub(super) fn tasks(conn: &Connection, business: &BusinessId) -> Result<Vec<TaskView>, ReadError> {
    let mut st = conn.prepare_cached(
        "SELECT task_ref, kind, body, tombstone, at FROM task_current WHERE business = ?1",
    )?;
    let rows: Vec<(String, String, String, bool, String)> = st
        .query_map([business.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<Result<_, _>>()?;
    let mut tasks = rows
        .into_iter()
        .map(|(task, kind, body, tombstone, at)| {
            Ok(TaskView {
                task: TaskRef::parse(&task).map_err(|_| Undecodable("task ref"))?,
                kind,
                body,
                tombstone,
                at: Timestamp::parse(&at).map_err(|_| Undecodable("at"))?,
            })
        })
        .collect::<Result<Vec<_>, ReadError>>()?;
    tasks.sort_by_key(|t| t.task);
    Ok(tasks)
}

/// Up to `limit` closings of `business` before position `before`, newest
/// first, and how many lie before the last one listed: the
/// `decision_events` rows other than `seen`, walked down their primary
/// key, each with its ledger row and its decision.
pub(super) fn closings(
    conn: &Connection,
    business: &BusinessId,
    before: Option<u64>,
    limit: usize,
) -> Result<Closings, ReadError> {
    let bound = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let before = before.map_or(i64::MAX, bound);
    let mut st = conn.prepare_cached(
        "SELECT e.seq, l.at, l.kind, e.decision FROM decision_events e \
         JOIN ledger l ON l.seq = e.seq \
         WHERE e.business = ?1 AND e.event <> 'seen' AND e.seq < ?2 \
         ORDER BY e.seq DESC LIMIT ?3",
    )?;
    let found: Vec<(i64, String, String, String)> = st
        .query_map(
            params![
                business.as_str(),
                before,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?
        .collect::<Result<_, _>>()?;
    let rows = found
        .iter()
        .map(|(seq, at, kind, decision)| {
            Ok(Closed {
                seq: u64::try_from(*seq).map_err(|_| Undecodable("seq"))?,
                closing: rows::load(conn, *seq, at, kind)?,
                decision: rows::decision_by_id(conn, decision)?
                    .ok_or(Undecodable("closed decision"))?,
            })
        })
        .collect::<Result<Vec<_>, ReadError>>()?;
    let last = found.last().map_or(before, |(seq, ..)| *seq);
    let older: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM decision_events \
             WHERE business = ?1 AND event <> 'seen' AND seq < ?2",
        )?
        .query_row(params![business.as_str(), last], |r| r.get(0))?;
    Ok(Closings {
        rows,
        older: u64::try_from(older).unwrap_or(0),
    })
}
