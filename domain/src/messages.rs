//! Message delivery ownership, as pure rules over facts the store supplies.
//!
//! Messages are not machine state: there can be millions, and each verb needs
//! only a few. The runtime reads the facts it needs ([`MessageFacts`]) and
//! these functions decide, returning the evidence to append.
//!
//! The rules: only the current holder of the recipient role receives; a
//! message is delivered at most once, ever, at the moment the broker hands it
//! to a connection (never replayed to a new holder); only the run it was
//! delivered to acknowledges it, and only while it still holds the role.

use crate::evidence::{AgentRef, MessageEvidence, MessageRecord, Recipient};
use crate::{BusinessId, Refusal, RunId};

/// The most messages one `message.receive` hands out.
pub const RECEIVE_LIMIT: usize = 100;

/// The most unread messages one `inbox` lists (the oldest ones), so a read
/// costs the same however many are waiting, and its reply stays far below
/// the client's 4 MiB cap. Reading (acknowledging) them brings the next
/// ones into view, as receiving does.
pub const INBOX_LIMIT: usize = 100;

/// The most characters of a message's body the human's inbox (and a
/// reader's) shows; a longer body is cut there, marked `"cut": true`, and
/// read whole from the message's trail. So an inbox stays small whatever
/// agents send.
pub const INBOX_BODY_CHARS: usize = 2_000;

/// The most body bytes one `message.receive` hands out (one message more
/// than this only when it is alone). A delivery is recorded before the
/// reply is written, so a reply the client must refuse (over its 4 MiB
/// limit) would lose the batch; 512 KiB of bodies stays under that limit
/// even when every byte is a control character JSON spells in six.
pub const RECEIVE_BODY_BYTES: usize = 512 * 1024;

/// The batch one `message.receive` hands out from the oldest undelivered
/// messages: at most [`RECEIVE_LIMIT`] of them, and no more body bytes
/// than [`RECEIVE_BODY_BYTES`], except a first message larger than that on
/// its own.
pub fn receive_batch(oldest_first: Vec<MessageFacts>) -> Vec<MessageFacts> {
    let mut bytes = 0;
    let mut batch = Vec::new();
    for message in oldest_first.into_iter().take(RECEIVE_LIMIT) {
        bytes += message.record.body.len();
        if bytes > RECEIVE_BODY_BYTES && !batch.is_empty() {
            break;
        }
        batch.push(message);
    }
    batch
}

/// What the store knows about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageFacts {
    /// The message as sent.
    pub record: MessageRecord,
    /// The run it was delivered to, if any.
    pub delivered_to: Option<RunId>,
    /// Whether that run acknowledged it.
    pub read: bool,
}

/// Delivery of a batch of undelivered messages to `agent`, the verified
/// current holder of its role.
///
/// # Errors
/// `bad-request` when a message is not an undelivered message of this
/// business addressed to the agent's role: the store returned the wrong batch,
/// and delivering it would hand a message to the wrong run.
pub fn deliver(
    business: &BusinessId,
    agent: &AgentRef,
    batch: &[MessageFacts],
) -> Result<Vec<MessageEvidence>, Refusal> {
    let mine = |m: &MessageFacts| {
        &m.record.business == business
            && m.record.to == Recipient::Role(agent.role.clone())
            && m.delivered_to.is_none()
    };
    let bytes: usize = batch.iter().map(|m| m.record.body.len()).sum();
    let too_big = batch.len() > 1 && bytes > RECEIVE_BODY_BYTES;
    if batch.len() > RECEIVE_LIMIT || too_big || !batch.iter().all(mine) {
        return Err(Refusal::BadRequest);
    }
    Ok(batch
        .iter()
        .map(|m| MessageEvidence::Delivered {
            business: business.clone(),
            message: m.record.id,
            run: agent.run.clone(),
        })
        .collect())
}

/// The human's acknowledgement of `message`. It is recorded as the human's
/// act (`human.input` with the verb `message.read` and the message as its
/// subject), since a message to the human is never delivered to a run and
/// the `message.read` record names one. Acknowledging twice is not an error.
///
/// # Errors
/// - `cross-business`: the message belongs to another business;
/// - `not-holder`: the message is addressed to a role, which the human
///   never holds.
pub fn acknowledge_human(business: &BusinessId, message: &MessageFacts) -> Result<(), Refusal> {
    if &message.record.business != business {
        return Err(Refusal::CrossBusiness);
    }
    match message.record.to {
        Recipient::Human => Ok(()),
        Recipient::Role(_) => Err(Refusal::NotHolder),
    }
}

/// The acknowledgement of `message` by `agent`, the verified current holder
/// of its role. Acknowledging twice is not an error and records nothing new.
///
/// # Errors
/// - `cross-business`: the message belongs to another business;
/// - `not-holder`: the message is not addressed to the agent's role;
/// - `not-delivered`: it was never delivered, or delivered to another run
///   (a new holder cannot acknowledge an old holder's delivery).
pub fn acknowledge(
    business: &BusinessId,
    agent: &AgentRef,
    message: &MessageFacts,
) -> Result<Option<MessageEvidence>, Refusal> {
    if &message.record.business != business {
        return Err(Refusal::CrossBusiness);
    }
    if message.record.to != Recipient::Role(agent.role.clone()) {
        return Err(Refusal::NotHolder);
    }
    if message.delivered_to.as_ref() != Some(&agent.run) {
        return Err(Refusal::NotDelivered);
    }
    if message.read {
        return Ok(None);
    }
    Ok(Some(MessageEvidence::Read {
        business: business.clone(),
        message: message.record.id,
        run: agent.run.clone(),
    }))
}
