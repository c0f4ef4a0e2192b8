//! `inbox`'s answer: each open decision, then each unread message, every
//! item tagged `type`, then, when more unread messages lie beyond those,
//! one last item `{"type":"more","unread":N}` (the human's also
//! `"decisions": M` when it left decisions out).
//!
//! An item of a type this client does not know (a newer broker's) is left
//! out as it is read, as the protocol asks of clients; a known item with a
//! missing field is an error.

use serde::de::{Deserializer, Error as _};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decision::DecisionView;
use super::listed::ItemType;
use super::message::MessageView;

/// The `type` of a list's last item, `"more"`: it counts what one answer
/// left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum More {
    /// `"more"`.
    #[serde(rename = "more")]
    More,
}

/// The inbox's `more` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxMore {
    /// Open decisions the human's inbox left out, when it left any out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<u64>,
    /// `"more"`.
    #[serde(rename = "type")]
    pub item: More,
    /// Unread messages beyond those listed.
    pub unread: u64,
}

/// `inbox`'s answer, in its order: decisions, messages, `more`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inbox<'a> {
    /// The open decisions.
    pub decisions: Vec<DecisionView<'a>>,
    /// The unread messages.
    pub messages: Vec<MessageView<'a>>,
    /// What lies beyond them, if anything.
    pub more: Option<InboxMore>,
}

impl<'a> Inbox<'a> {
    /// An inbox of these items, each tagged with its `type`, and a `more`
    /// item only when something was left out.
    pub fn new(
        mut decisions: Vec<DecisionView<'a>>,
        mut messages: Vec<MessageView<'a>>,
        unread: u64,
        decisions_left: u64,
    ) -> Self {
        for decision in &mut decisions {
            decision.standing.item = Some(ItemType::Decision);
        }
        for message in &mut messages {
            message.item = Some(ItemType::Message);
        }
        let more = (unread > 0 || decisions_left > 0).then_some(InboxMore {
            decisions: (decisions_left > 0).then_some(decisions_left),
            item: More::More,
            unread,
        });
        Inbox {
            decisions,
            messages,
            more,
        }
    }
}

impl Serialize for Inbox<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = self.decisions.len() + self.messages.len() + usize::from(self.more.is_some());
        let mut items = serializer.serialize_seq(Some(len))?;
        for decision in &self.decisions {
            items.serialize_element(decision)?;
        }
        for message in &self.messages {
            items.serialize_element(message)?;
        }
        if let Some(more) = &self.more {
            items.serialize_element(more)?;
        }
        items.end()
    }
}

impl<'de> Deserialize<'de> for Inbox<'_> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut inbox = Inbox::default();
        for item in Vec::<Value>::deserialize(deserializer)? {
            let kind = item.get("type").and_then(Value::as_str).map(str::to_owned);
            match kind.as_deref() {
                Some("decision") => inbox
                    .decisions
                    .push(DecisionView::deserialize(item).map_err(D::Error::custom)?),
                Some("message") => inbox
                    .messages
                    .push(MessageView::deserialize(item).map_err(D::Error::custom)?),
                Some("more") => {
                    inbox.more = Some(InboxMore::deserialize(item).map_err(D::Error::custom)?);
                }
                Some(_) => {}
                None => return Err(D::Error::missing_field("type")),
            }
        }
        Ok(inbox)
    }
}
