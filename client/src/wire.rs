//! The shapes both ends of a connection read and write, each defined once
//! with serde, so a field renamed on one side fails to compile or to
//! decode on the other instead of showing as nothing:
//!
//! - [`args`]: each verb's argument type, whose keys the broker's strict
//!   parser allows (`mosaic_adapters::wire`) and whose schema the MCP tools
//!   publish ([`crate::mcp`]); the console sends the ones it needs;
//! - the answers, which the broker encodes (`mosaic_adapters::wire`) and
//!   a client decodes: [`decision`] (every decision verb and the inbox),
//!   [`message`], [`inbox`], [`agent`] (a row of `agents`), [`history`] (a
//!   row of `history`, a closed decision), [`record`] (a trail record, one
//!   shape per kind of evidence), [`listed`] (an array read with the count
//!   of what it left out), [`reads`] (`head`, `tasks`, `changes`) and
//!   [`reply`] (the other verbs' answers);
//! - [`activity`]: the line `up` writes its console about what each
//!   harness agent is doing;
//! - [`life`]: on the same line, each run's life (running, restarting,
//!   ended and why, what it used), and the orders the console sends `up`
//!   back;
//! - [`text`]: a domain value in its one text form.
//!
//! # Decoding fails loudly
//!
//! Every key an answer always carries is required, a `null` one too: a
//! missing or renamed key, an id, name or kind that does not parse, is a
//! decode error, never a default. A key present only in some answers
//! (`cut`, `waitsOnMore`, a change's ids) says so on its field. Keys an
//! answer gains are ignored by an older client.
//!
//! # Key order
//!
//! Each shape writes its keys in sorted order, as a `serde_json::Value`
//! (whose maps sort) would, so the broker's text of an answer is the same
//! whether it was written straight or through a `Value`: the fields of a
//! struct are declared in that order, and a shape made of two parts (a
//! decision's fixed fields and its standing, a record's stamp and its
//! fact) is written through one sorted map ([`merged`]). `tests.rs`
//! checks that each shape round-trips and requires every key it always
//! writes.

pub mod activity;
pub mod agent;
pub mod args;
pub mod decision;
pub mod history;
pub mod inbox;
pub mod life;
pub mod listed;
pub mod message;
pub mod reads;
pub mod record;
pub mod reply;
pub mod text;

#[cfg(test)]
mod tests;

use serde::ser::{Error as _, Serialize, Serializer};
use serde_json::Value;

/// Writes the keys of `first` and `second` (each an object) as one
/// object, in sorted order.
fn merged<S: Serializer>(
    serializer: S,
    first: &impl Serialize,
    second: &impl Serialize,
) -> Result<S::Ok, S::Error> {
    let object = |part: Result<Value, serde_json::Error>| match part {
        Ok(Value::Object(map)) => Ok(map),
        Ok(
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_),
        ) => Err(S::Error::custom("a part of an object that is no object")),
        Err(e) => Err(S::Error::custom(e)),
    };
    let mut map = object(serde_json::to_value(first))?;
    map.extend(object(serde_json::to_value(second))?);
    map.serialize(serializer)
}
