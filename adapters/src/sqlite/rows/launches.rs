//! The `launches` and `launch_switches` tables: a bound launch, and the
//! human switching launching off and on.

use mosaic_domain::evidence::{Harness, LaunchEvidence, LaunchRecord};
use mosaic_domain::{BusinessId, RoleInstance, RunId};
use rusqlite::{params, Connection};

use super::super::chain::Hash;
use super::ledger::{bad, business, one, parse, Ledger, ReadError};

/// Writes a launch or a switch.
pub(super) fn insert(ledger: &Ledger<'_>, e: &LaunchEvidence) -> rusqlite::Result<Hash> {
    let (business, state) = match e {
        LaunchEvidence::Launched(l) => {
            return ledger.typed(
                "INSERT INTO launches (seq, business, role, run, harness, address, pid, \
                 start_time) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    ledger.seq,
                    l.business.as_str(),
                    l.role.as_str(),
                    l.run.as_str(),
                    l.harness.as_str(),
                    l.address,
                    l.pid,
                    i64::try_from(l.start_time).unwrap_or(-1)
                ],
            )
        }
        LaunchEvidence::Revoked { business } => (business, "off"),
        LaunchEvidence::Restored { business } => (business, "on"),
    };
    ledger.typed(
        "INSERT INTO launch_switches (seq, business, state) VALUES (?1, ?2, ?3)",
        params![ledger.seq, business.as_str(), state],
    )
}

pub(super) fn load_launch(conn: &Connection, seq: i64) -> Result<LaunchRecord, ReadError> {
    let mut st = one(
        conn,
        "SELECT business, role, run, harness, address, pid, start_time FROM launches \
         WHERE seq = ?1",
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
pub(super) fn load_switch(conn: &Connection, seq: i64) -> Result<BusinessId, ReadError> {
    let b: String = one(conn, "SELECT business FROM launch_switches WHERE seq = ?1")?
        .query_row([seq], |r| r.get(0))?;
    Ok(business(&b)?)
}
