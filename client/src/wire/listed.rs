//! An array read's answer (`agents`, `trail`, `tasks`, `history`): its
//! items in order, and, when one answer could not hold them all (or, for
//! `history`, older ones lie beyond its page), one last item
//! `{"type":"more", NAME: N}` counting those left out (`NAME` being
//! `agents`, `records`, `tasks` or `closed`). Beside it, the `type` a listed
//! decision or message carries in the inbox ([`ItemType`]), here so that
//! the decision, the message and the inbox that lists them all read it
//! from one room below them.

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An inbox item's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemType {
    /// An open decision.
    Decision,
    /// An unread message.
    Message,
}

/// An item of an array read.
pub trait Listable {
    /// The key of the `more` item that counts items of this kind; it
    /// sorts before `type`, so the `more` item is written in sorted order.
    const MORE: &'static str;
}

/// An array read's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    /// The items listed, in order.
    pub items: Vec<T>,
    /// How many more there were.
    pub more: u64,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Listed {
            items: Vec::new(),
            more: 0,
        }
    }
}

/// The `more` item of a list of `T`.
struct MoreItem<T>(u64, std::marker::PhantomData<T>);

impl<T: Listable> Serialize for MoreItem<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry(T::MORE, &self.0)?;
        map.serialize_entry("type", "more")?;
        map.end()
    }
}

impl<T: Serialize + Listable> Serialize for Listed<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let more = usize::from(self.more > 0);
        let mut items = serializer.serialize_seq(Some(self.items.len() + more))?;
        for item in &self.items {
            items.serialize_element(item)?;
        }
        if self.more > 0 {
            items.serialize_element(&MoreItem::<T>(self.more, std::marker::PhantomData))?;
        }
        items.end()
    }
}

impl<'de, T: DeserializeOwned + Listable> Deserialize<'de> for Listed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let values = Vec::<Value>::deserialize(deserializer)?;
        let last = values.len().saturating_sub(1);
        let mut listed = Listed::default();
        for (at, value) in values.into_iter().enumerate() {
            if value.get("type").and_then(Value::as_str) == Some("more") {
                if at != last {
                    return Err(D::Error::custom("a `more` item before the last"));
                }
                listed.more = value
                    .get(T::MORE)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| D::Error::missing_field(T::MORE))?;
            } else {
                listed
                    .items
                    .push(T::deserialize(value).map_err(D::Error::custom)?);
            }
        }
        Ok(listed)
    }
}
