//! Evidence to rows and back. One function writes each kind of fact into the
//! ledger and its typed table ([`insert`]); one function reads a ledger
//! entry back ([`load`]). Both dispatch on the kind and hand the typed
//! row to the file of its table (`rows/`: `launches.rs`, `claims.rs`,
//! `decisions.rs`, `ends.rs`, `grants.rs`, `messages.rs`, `observations.rs`,
//! `refusals.rs`), which writes and reads its columns; what every table
//! shares, the ledger row, the table list and the column codecs, is
//! `rows/ledger.rs`.

mod claims;
mod decisions;
mod ends;
mod grants;
mod launches;
mod ledger;
mod messages;
mod observations;
mod refusals;

use super::carry::Carry;
use super::chain::Hash;
use mosaic_domain::evidence::{
    ClaimEvidence, DecisionEvidence, Evidence, EvidenceKind, LaunchEvidence, MessageEvidence,
    OptionKey, Stamped,
};
use mosaic_domain::{DecisionId, Timestamp};
use rusqlite::Connection;
use std::sync::LazyLock;

use claims::load_claim;
pub(crate) use decisions::decision_by_id;
use decisions::{load_decision, load_decision_event};
use ends::load_end;
use grants::{load_allowed, load_consumption};
use launches::{load_launch, load_switch};
use ledger::{actor, bad, parse, parse_opt, Ledger};
pub(crate) use ledger::{subject_key, ReadError, Table, Undecodable};
pub(crate) use messages::message_row;
use messages::{load_hand_off, load_message};
use observations::{load_human_input, load_observation};
use refusals::{load_refusal, load_refusal_count};

/// `'a', 'b', …`: the ledger names of the kinds `pick` keeps, for a
/// `kind IN (…)` clause.
fn kinds_where(pick: fn(EvidenceKind) -> bool) -> String {
    let names: Vec<String> = EvidenceKind::ALL
        .iter()
        .filter(|k| pick(**k))
        .map(|k| format!("'{k}'"))
        .collect();
    names.join(", ")
}

/// The ledger kinds a restart replays ([`EvidenceKind::is_machine_state`]).
pub(crate) static MACHINE_KINDS: LazyLock<String> =
    LazyLock::new(|| kinds_where(EvidenceKind::is_machine_state));

/// The ledger kinds that can make a change of the feed
/// ([`EvidenceKind::can_be_change`]).
pub(crate) static CHANGE_KINDS: LazyLock<String> =
    LazyLock::new(|| kinds_where(EvidenceKind::can_be_change));

/// Writes one fact as ledger row `seq` plus its typed row, chained after
/// `prev`; returns the new row's hash. `carry` says whether the row is
/// shared with a neighbour ([`Carry`]).
pub(crate) fn insert(
    conn: &Connection,
    seq: i64,
    record: &Stamped,
    prev: &Hash,
    carry: Carry,
) -> rusqlite::Result<Hash> {
    let e = &record.evidence;
    let ledger = &Ledger {
        conn,
        seq,
        at: record.at.to_string(),
        kind: e.kind(),
        business: e.business().map(ToString::to_string),
        prev,
        carry,
    };
    match e {
        Evidence::Launch(l) => launches::insert(ledger, l),
        Evidence::Claim(c) => claims::insert(ledger, c),
        Evidence::Decision(d) => decisions::insert(ledger, d),
        Evidence::Consumed(c) => grants::insert_consumed(ledger, c),
        Evidence::Allowed(a) => grants::insert_allowed(ledger, a),
        Evidence::Message(m) => messages::insert(ledger, m),
        Evidence::Human(h) => observations::insert_human(ledger, h),
        Evidence::Observed(o) => observations::insert_observed(ledger, o),
        Evidence::Refused(r) => refusals::insert_refused(ledger, r),
        Evidence::RefusalsCounted(c) => refusals::insert_counted(ledger, c),
    }
}

/// Reads the fact stored under ledger row `seq` of kind `kind`: the kind
/// names the typed table and the shape, one arm per kind.
pub(crate) fn load(
    conn: &Connection,
    seq: i64,
    at: &str,
    kind: &str,
) -> Result<Stamped, ReadError> {
    let at = parse(at, Timestamp::parse, "at")?;
    let kind = EvidenceKind::parse(kind).ok_or(bad("ledger kind"))?;
    let evidence = match kind {
        EvidenceKind::SessionLaunched => {
            Evidence::Launch(LaunchEvidence::Launched(load_launch(conn, seq)?))
        }
        EvidenceKind::LaunchRevoked => Evidence::Launch(LaunchEvidence::Revoked {
            business: load_switch(conn, seq)?,
        }),
        EvidenceKind::LaunchRestored => Evidence::Launch(LaunchEvidence::Restored {
            business: load_switch(conn, seq)?,
        }),
        EvidenceKind::RoleClaimed => {
            let (business, agent, _) = load_claim(conn, seq)?;
            Evidence::Claim(ClaimEvidence::Claimed { business, agent })
        }
        EvidenceKind::RoleReleased => {
            let (business, agent, _) = load_claim(conn, seq)?;
            Evidence::Claim(ClaimEvidence::Released { business, agent })
        }
        EvidenceKind::RoleRevoked => {
            let (business, agent, decision) = load_claim(conn, seq)?;
            let decision = decision.ok_or(bad("decision"))?;
            Evidence::Claim(ClaimEvidence::Revoked {
                business,
                agent,
                decision,
            })
        }
        EvidenceKind::SessionEnded => Evidence::Claim(ClaimEvidence::Ended(load_end(conn, seq)?)),
        EvidenceKind::DecisionRaised => Evidence::Decision(DecisionEvidence::Raised(Box::new(
            load_decision(conn, seq)?,
        ))),
        EvidenceKind::DecisionResolved => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Resolved {
                choice: parse_opt(e.choice, OptionKey::parse, "choice")?.ok_or(bad("choice"))?,
                by: actor(e.by_role, e.by_run)?,
                business: e.business,
                id: e.id,
                note: e.note,
            })
        }
        EvidenceKind::DecisionSeen => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Seen {
                by: actor(e.by_role, e.by_run)?,
                business: e.business,
                id: e.id,
                note: e.note,
            })
        }
        EvidenceKind::DecisionWithdrawn => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Withdrawn {
                by: actor(e.by_role, e.by_run)?,
                business: e.business,
                id: e.id,
                note: e.note,
            })
        }
        EvidenceKind::DecisionSuperseded => {
            let e = load_decision_event(conn, seq)?;
            Evidence::Decision(DecisionEvidence::Superseded {
                by: parse_opt(e.superseded_by, DecisionId::parse, "superseded by")?
                    .ok_or(bad("superseded by"))?,
                business: e.business,
                id: e.id,
            })
        }
        EvidenceKind::ApprovalConsumed => Evidence::Consumed(load_consumption(conn, seq)?),
        EvidenceKind::ActionAllowed => Evidence::Allowed(load_allowed(conn, seq)?),
        EvidenceKind::MessageSent => {
            Evidence::Message(MessageEvidence::Sent(Box::new(load_message(conn, seq)?)))
        }
        EvidenceKind::MessageDelivered => {
            let (business, message, run) = load_hand_off(conn, seq, Table::Deliveries)?;
            Evidence::Message(MessageEvidence::Delivered {
                business,
                message,
                run,
            })
        }
        EvidenceKind::MessageRead => {
            let (business, message, run) = load_hand_off(conn, seq, Table::Reads)?;
            Evidence::Message(MessageEvidence::Read {
                business,
                message,
                run,
            })
        }
        EvidenceKind::HumanInput => Evidence::Human(load_human_input(conn, seq)?),
        EvidenceKind::EventObserved => Evidence::Observed(load_observation(conn, seq)?),
        EvidenceKind::RequestRefused => Evidence::Refused(load_refusal(conn, seq)?),
        EvidenceKind::RefusalsCounted => Evidence::RefusalsCounted(load_refusal_count(conn, seq)?),
    };
    Ok(Stamped { at, evidence })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The names in a `'a', 'b'` list or in `kind = 'a' OR …` text.
    fn quoted(text: &str) -> BTreeSet<&str> {
        text.split('\'').skip(1).step_by(2).collect()
    }

    fn kinds(pick: fn(EvidenceKind) -> bool) -> BTreeSet<&'static str> {
        EvidenceKind::ALL
            .iter()
            .filter(|k| pick(**k))
            .map(|k| k.as_str())
            .collect()
    }

    #[test]
    fn the_schema_and_the_store_lists_name_exactly_the_domain_kinds() {
        // The ledger's insert trigger lists the kinds the schema stores.
        let sql = mosaic_schema::SCHEMA_SQL;
        let trigger = &sql[sql.find("CREATE TRIGGER ledger_insert").unwrap()..];
        let known = &trigger[trigger.find("NOT (NEW.kind").unwrap()..trigger.find("END;").unwrap()];
        assert_eq!(quoted(known), kinds(|_| true), "the schema's ledger kinds");
        assert_eq!(
            quoted(&MACHINE_KINDS),
            kinds(EvidenceKind::is_machine_state),
            "the kinds a restart replays"
        );
        assert_eq!(
            quoted(&CHANGE_KINDS),
            kinds(EvidenceKind::can_be_change),
            "the kinds the feed reads"
        );
        // Each table's insert trigger names its kinds, whole or as their
        // family followed by the row's event (`'role.' || NEW.event`).
        for &kind in EvidenceKind::ALL {
            let table = Table::of(kind).stored();
            let head = format!("CREATE TRIGGER {table}_insert BEFORE INSERT ON {table} BEGIN");
            let body = &sql[sql.find(&head).unwrap_or_else(|| panic!("{head}"))..];
            let body = &body[..body.find("END;").unwrap()];
            let (family, _) = kind.as_str().split_once('.').unwrap();
            assert!(
                body.contains(&format!("'{kind}'"))
                    || body.contains(&format!("'{family}.' || NEW.event")),
                "{table} is where {kind} is stored"
            );
        }
    }
}
