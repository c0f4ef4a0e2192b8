//! A domain value on the wire, in its one text form: written with its
//! `Display`, read back with the domain's own parser, so an id, a name or
//! a kind that does not parse fails to decode instead of reaching a
//! client as text.
//!
//! The domain depends on std alone, so its types carry no serde; a field
//! of one names this module (`#[serde(with = "text")]`, or
//! [`text::opt`](opt) for one that is `null` when absent, which makes the
//! key required all the same). [`Party`] and [`KindName`] are the two
//! text forms the wire adds: "the human or a role", and an evidence kind
//! that a newer broker may name.

use std::borrow::Cow;
use std::fmt;

use mosaic_domain::evidence::{EndCause, EvidenceKind, Harness, MessageClass, OptionKey};
use mosaic_domain::{
    Action, ActionClass, BusinessId, DecisionId, EventId, MessageId, Refusal, RoleInstance, RunId,
    Target, TaskRef, Timestamp,
};
use serde::de::{Deserialize, Deserializer, Unexpected};
use serde::ser::{Serialize, Serializer};

/// A value with one text form on the wire.
pub trait Text: Sized {
    /// What the text names, for a decode error.
    const WHAT: &'static str;

    /// The value `text` is the text form of, if it is one.
    fn from_text(text: &str) -> Option<Self>;

    /// Writes the text form.
    ///
    /// # Errors
    /// The formatter's.
    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// A [`Text`]'s text form, for `collect_str`.
struct Written<'a, T>(&'a T);

impl<T: Text> fmt::Display for Written<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_text(f)
    }
}

/// Each domain type whose parser reads its text form: written with its
/// `Display` (`shown`) or its `as_str` (`named`).
macro_rules! parsed {
    ($($how:ident $name:ty => $what:literal,)*) => {
        $(impl Text for $name {
            const WHAT: &'static str = $what;

            fn from_text(text: &str) -> Option<Self> {
                <$name>::parse(text).ok()
            }

            fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                parsed!(@write $how self f)
            }
        })*
    };
    (@write shown $value:ident $f:ident) => { fmt::Display::fmt($value, $f) };
    (@write named $value:ident $f:ident) => { $f.write_str($value.as_str()) };
}

parsed! {
    shown BusinessId => "a business id",
    shown RoleInstance => "a role instance",
    shown RunId => "a run id",
    shown DecisionId => "a decision id",
    shown MessageId => "a message id",
    shown EventId => "an event id",
    shown TaskRef => "a task ref",
    shown Action => "an action",
    shown Target => "a target",
    shown OptionKey => "an option key",
    shown Timestamp => "a timestamp",
    named Harness => "a harness",
    named MessageClass => "a message class",
    shown EndCause => "an end's cause",
    named ActionClass => "an action class",
}

impl Text for EvidenceKind {
    const WHAT: &'static str = "an evidence kind";

    fn from_text(text: &str) -> Option<Self> {
        EvidenceKind::parse(text)
    }

    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Text for Refusal {
    const WHAT: &'static str = "a refusal code";

    fn from_text(text: &str) -> Option<Self> {
        Refusal::from_code(text)
    }

    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Writes `value`'s text form.
///
/// # Errors
/// The serializer's.
pub fn serialize<T: Text, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&Written(value))
}

/// Reads a string and parses it.
///
/// # Errors
/// A string that is not a `T`, or no string.
pub fn deserialize<'de, T: Text, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    let text = Cow::<str>::deserialize(deserializer)?;
    parse(&text)
}

fn parse<T: Text, E: serde::de::Error>(text: &str) -> Result<T, E> {
    T::from_text(text).ok_or_else(|| E::invalid_value(Unexpected::Str(text), &T::WHAT))
}

/// A value that is `null` when absent; its key is required all the same.
pub mod opt {
    use super::*;

    /// Writes the text form, or `null`.
    ///
    /// # Errors
    /// The serializer's.
    pub fn serialize<T: Text, S: Serializer>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.collect_str(&Written(value)),
            None => serializer.serialize_none(),
        }
    }

    /// Reads `null` or a string that parses.
    ///
    /// # Errors
    /// Anything else.
    pub fn deserialize<'de, T: Text, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<T>, D::Error> {
        match Option::<Cow<str>>::deserialize(deserializer)? {
            Some(text) => parse(&text).map(Some),
            None => Ok(None),
        }
    }
}

/// A key present only in some answers (so `None` is its absence), whose
/// value is itself a text form or `null`: `Some(None)` is the `null`.
pub mod present {
    use super::*;

    /// Writes the inner value (the key is skipped for `None`).
    ///
    /// # Errors
    /// The serializer's.
    pub fn serialize<T: Text, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => opt::serialize(inner, serializer),
            None => serializer.serialize_none(),
        }
    }

    /// Reads the present key's value.
    ///
    /// # Errors
    /// As [`opt::deserialize`].
    pub fn deserialize<'de, T: Text, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        opt::deserialize(deserializer).map(Some)
    }
}

/// Serde for a type of this crate that has a text form.
macro_rules! serde_by_text {
    ($($name:ty),*) => {
        $(impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serialize(self, serializer)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserialize(deserializer)
            }
        })*
    };
}

/// The human or a role: a message's sender or recipient, a decision's
/// route, who acted on a decision. `human` is never a role's name, so the
/// text form is one or the other.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Party {
    /// The business's human.
    Human,
    /// A role instance.
    Role(RoleInstance),
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Party::Human => f.write_str("human"),
            Party::Role(role) => role.fmt(f),
        }
    }
}

impl Text for Party {
    const WHAT: &'static str = "`human` or a role instance";

    fn from_text(text: &str) -> Option<Self> {
        match text {
            "human" => Some(Party::Human),
            role => RoleInstance::parse(role).ok().map(Party::Role),
        }
    }

    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An evidence kind as a change or a record names it: one of the
/// domain's, or a name this client does not know (a newer broker's),
/// kept as it came.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KindName {
    /// A kind of the domain's table.
    Known(EvidenceKind),
    /// Another name.
    Other(String),
}

impl KindName {
    /// The name `text`: the domain's kind if it is one.
    pub fn of(text: &str) -> KindName {
        EvidenceKind::parse(text).map_or_else(|| KindName::Other(text.to_owned()), KindName::Known)
    }

    /// Whether it is `kind`.
    pub fn is(&self, kind: EvidenceKind) -> bool {
        self == &KindName::Known(kind)
    }
}

impl fmt::Display for KindName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KindName::Known(kind) => kind.fmt(f),
            KindName::Other(name) => f.write_str(name),
        }
    }
}

impl Text for KindName {
    const WHAT: &'static str = "an evidence kind's name";

    fn from_text(text: &str) -> Option<Self> {
        Some(KindName::of(text))
    }

    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

serde_by_text!(Party, KindName);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_party_is_the_human_or_a_role_and_nothing_else() {
        let dev = Party::Role(RoleInstance::parse("dev").unwrap());
        assert_eq!(serde_json::to_value(&Party::Human).unwrap(), json!("human"));
        assert_eq!(serde_json::to_value(&dev).unwrap(), json!("dev"));
        assert_eq!(
            serde_json::from_value::<Party>(json!("human")).unwrap(),
            Party::Human
        );
        assert_eq!(serde_json::from_value::<Party>(json!("dev")).unwrap(), dev);
        for bad in [json!(""), json!("a b"), json!(3), json!(null)] {
            assert!(
                serde_json::from_value::<Party>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_kind_name_keeps_a_name_it_does_not_know() {
        for kind in EvidenceKind::ALL {
            let name: KindName = serde_json::from_value(json!(kind.as_str())).unwrap();
            assert!(name.is(*kind));
            assert_eq!(name.to_string(), kind.as_str());
        }
        let newer: KindName = serde_json::from_value(json!("run.slept")).unwrap();
        assert_eq!(newer, KindName::Other("run.slept".to_owned()));
        assert_eq!(serde_json::to_value(&newer).unwrap(), json!("run.slept"));
        assert!(serde_json::from_value::<KindName>(json!(7)).is_err());
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Sample {
        #[serde(with = "super")]
        id: DecisionId,
        #[serde(with = "opt")]
        holder: Option<RunId>,
        #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
        delivered_to: Option<Option<RunId>>,
    }

    #[test]
    fn a_text_form_is_parsed_and_an_optional_key_is_still_required() {
        let id = "0190a2b4-0000-7000-8000-000000000001";
        let read: Sample =
            serde_json::from_value(json!({"id": id, "holder": null, "delivered_to": null}))
                .unwrap();
        assert_eq!(
            read,
            Sample {
                id: DecisionId::parse(id).unwrap(),
                holder: None,
                delivered_to: Some(None),
            }
        );
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            json!({"id": id, "holder": null, "delivered_to": null})
        );
        let absent: Sample = serde_json::from_value(json!({"id": id, "holder": "r-1"})).unwrap();
        assert_eq!(absent.delivered_to, None);
        assert_eq!(
            serde_json::to_value(&absent).unwrap(),
            json!({"id": id, "holder": "r-1"})
        );
        // A missing `null` key, an id that is not one, a run of another
        // shape: each fails, naming what it expected.
        for (bad, says) in [
            (json!({"id": id}), "missing field `holder`"),
            (json!({"id": "d1", "holder": null}), "a decision id"),
            (json!({"id": id, "holder": "a b"}), "a run id"),
            (json!({"id": id, "holder": 3}), "invalid type"),
        ] {
            let error = serde_json::from_value::<Sample>(bad.clone()).unwrap_err();
            assert!(error.to_string().contains(says), "{bad}: {error}");
        }
    }
}
