//! The `messages`, `deliveries` and `reads` tables: a message sent (with
//! the grant it carries, `mosaic-bus/5`), handed to a run, and read.

use mosaic_domain::evidence::{
    DecisionActor, MessageClass, MessageEvidence, MessageRecord, Recipient, Sender,
};
use mosaic_domain::{BusinessId, DecisionId, EventId, MessageId, RoleInstance, RunId};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::super::carry::Carry;
use super::super::chain::Hash;
use super::ledger::{actor, bad, business, one, opt, parse, parse_opt, Ledger, ReadError, Table};

/// Writes a message, a delivery or a read.
pub(super) fn insert(ledger: &Ledger<'_>, e: &MessageEvidence) -> rusqlite::Result<Hash> {
    let (sql, business, message, run) = match e {
        MessageEvidence::Sent(m) => return insert_message(ledger, m),
        MessageEvidence::Delivered {
            business,
            message,
            run,
        } => (
            "INSERT INTO deliveries (seq, message, business, run) VALUES (?1, ?2, ?3, ?4)",
            business,
            message,
            run,
        ),
        MessageEvidence::Read {
            business,
            message,
            run,
        } => (
            "INSERT INTO reads (seq, message, business, run) VALUES (?1, ?2, ?3, ?4)",
            business,
            message,
            run,
        ),
    };
    ledger.typed(
        sql,
        params![
            ledger.seq,
            message.to_string(),
            business.as_str(),
            run.as_str()
        ],
    )
}

fn insert_message(ledger: &Ledger<'_>, m: &MessageRecord) -> rusqlite::Result<Hash> {
    let (from_role, from_run) = match &m.from {
        Sender::Agent(a) => (Some(a.role.as_str()), Some(a.run.as_str())),
        Sender::Human => (None, None),
    };
    let to_role = match &m.to {
        Recipient::Role(r) => Some(r.as_str()),
        Recipient::Human => None,
    };
    let allowed = match ledger.carry {
        Carry::Previous(grant) => Some(grant),
        Carry::Alone | Carry::ByNext => None,
    };
    ledger.typed(
        "INSERT INTO messages (seq, id, business, from_role, from_run, to_role, class, body, \
         in_reply_to, corrects, decision, request, allowed) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
        ],
    )
}

/// The message stored under ledger row `seq`.
pub(super) fn load_message(conn: &Connection, seq: i64) -> Result<MessageRecord, ReadError> {
    let mut st = one(
        conn,
        &format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq = ?1"),
    )?;
    st.query_row([seq], |r| Ok(message_row(r)))
        .optional()?
        .ok_or(bad("message"))?
}

/// A `deliveries` or `reads` row: the business, the message and the run.
pub(super) fn load_hand_off(
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

/// The `messages m` columns [`message_row`] reads, in order.
pub(crate) const MESSAGE_COLUMNS: &str =
    "m.id, m.business, m.from_role, m.from_run, m.to_role, m.class, m.body, m.in_reply_to, \
     m.corrects, m.decision, m.request";

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
