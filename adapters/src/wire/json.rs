//! Strict JSON text: exactly one RFC 8259 value in UTF-8, with no object
//! that repeats a key.
//!
//! `serde_json::Value` keeps the last of two equal keys, so
//! `{"cap":A,"cap":B}` would mean whatever the last parser in a chain
//! decided. A repeated key is refused here instead, at every depth.
//! Nesting is bounded by `serde_json`'s recursion limit (128), so deep input
//! costs a static code and a bounded stack; numbers beyond `f64` are refused
//! by `serde_json` too. Every cost is linear in the input.

use std::fmt;

use mosaic_domain::Refusal;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `bytes` as one strict JSON value.
///
/// # Errors
/// `bad-request` for invalid UTF-8, text that is not exactly one JSON value
/// (surrounding whitespace aside), an object with a repeated key, nesting
/// deeper than 128, or a number outside `f64`.
pub fn parse_json(bytes: &[u8]) -> Result<Value, Refusal> {
    let text = std::str::from_utf8(bytes).map_err(|_| Refusal::BadRequest)?;
    serde_json::from_str::<Strict>(text)
        .map(|Strict(value)| value)
        .map_err(|_| Refusal::BadRequest)
}

/// A `Value` deserialized without accepting repeated keys.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom("repeated key"));
            }
            let Strict(value) = access.next_value()?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}
