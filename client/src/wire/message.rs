//! A message on the wire: as sent (`message.receive`, the `message.sent`
//! record), and as an inbox lists it, with what the store knows of its
//! delivery.

use std::borrow::Cow;

use mosaic_domain::evidence::MessageClass;
use mosaic_domain::{DecisionId, EventId, MessageId, RunId};
use serde::{Deserialize, Serialize};

use super::listed::ItemType;
use super::text::{self, Party};

/// A message: `id, from, from_run, to, class, body, in_reply_to, corrects,
/// decision, request`, and in an inbox also `delivered_to`, `read` and
/// `type` (and `cut` where the human's inbox cut its body).
///
/// `from` and `to` use the same names as `message.send`'s `to` (a role
/// instance or `human`), so a reply is `{to: m.from, in_reply_to: m.id}`;
/// `from_run` is the sending run (`null` from the human); `request` is the
/// human input a human instruction carries. The keys are declared in
/// sorted order, so a message is written straight to text, with the same
/// bytes as through a `serde_json::Value`: the inbox, the read agents make
/// most, is mostly messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageView<'a> {
    /// The body, plain text (cut where `cut` says so).
    pub body: Cow<'a, str>,
    /// Its class, if given.
    #[serde(with = "text::opt")]
    pub class: Option<MessageClass>,
    /// The message it corrects.
    #[serde(with = "text::opt")]
    pub corrects: Option<MessageId>,
    /// Only as an item of the human's inbox whose body was cut there:
    /// `true`; its trail holds it whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// The decision it cites or spends.
    #[serde(with = "text::opt")]
    pub decision: Option<DecisionId>,
    /// Only with the store's facts (an inbox): the run it was delivered to,
    /// `Some(None)` before any was.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "text::present"
    )]
    pub delivered_to: Option<Option<RunId>>,
    /// Who sent it.
    pub from: Party,
    /// The sending run (`None` from the human).
    #[serde(with = "text::opt")]
    pub from_run: Option<RunId>,
    /// Its id.
    #[serde(with = "text")]
    pub id: MessageId,
    /// The message it answers.
    #[serde(with = "text::opt")]
    pub in_reply_to: Option<MessageId>,
    /// Only with the store's facts: whether it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<bool>,
    /// The human input a human instruction carries.
    #[serde(with = "text::opt")]
    pub request: Option<EventId>,
    /// Who it is for.
    pub to: Party,
    /// Only as an inbox item: `"message"`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemType>,
}
