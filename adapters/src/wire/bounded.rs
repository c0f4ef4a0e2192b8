//! The bounds of a read's answer: whatever agents send, no read answers
//! more than a client takes (4 MiB, the socket client's cap), so no read
//! of the human's is ever refused `response-too-large`.
//!
//! - [`listed`]: an array read (`tasks`, `agents`, `trail`) lists its items
//!   in order while the answer stays within [`ANSWER_BYTES`]; the items
//!   left out are counted in one last item `{"type":"more", NAME: N}`. A
//!   trail thus keeps its first records (a decision's raise, a message's
//!   send) and each record whole. An `agents` row lists at most
//!   [`WAITS_ON`] of the decisions its run waits on, and counts the rest
//!   in `waitsOnMore`.
//! - [`human_inbox`]: the human's inbox (and a reader's): every open
//!   decision first, whole while the decisions take at most
//!   [`WHOLE_DECISION_BYTES`], then in a short form (`"cut": true`: no
//!   options, each text cut to [`CUT_CHARS`] characters; the trail holds
//!   it whole) while they take at most [`DECISION_BYTES`]; then the unread
//!   messages, each body cut to [`INBOX_BODY_CHARS`] characters (`"cut":
//!   true`), while the answer stays within [`ANSWER_BYTES`]. What is left
//!   out is counted in the last item, `{"type":"more","unread":N}` with
//!   `"decisions": M` when decisions were.
//!
//! A size is the item's JSON text as it is written, so the bound holds
//! even for text that JSON spells in six bytes a character.

use std::io;

use mosaic_domain::decisions::Decision;
use mosaic_domain::messages::MessageFacts;
pub use mosaic_domain::messages::INBOX_BODY_CHARS;
use serde_json::{json, Map, Value};

use super::reply::{decision_json, inbox_message_json};

/// The most bytes of items one read's answer holds: half a MiB under the
/// client's 4 MiB, for the envelope and the largest single item.
pub const ANSWER_BYTES: usize = 3_584 * 1024;
/// The most bytes of whole decisions in the human's inbox.
pub const WHOLE_DECISION_BYTES: usize = 2 * 1024 * 1024;
/// The most bytes of decisions, whole or short, in the human's inbox.
pub const DECISION_BYTES: usize = 2_560 * 1024;
/// The most characters of each text of a decision in its short form.
pub const CUT_CHARS: usize = 200;
/// The most open decisions one `agents` row lists in `waitsOn`; the row
/// counts the rest in `waitsOnMore`.
pub const WAITS_ON: usize = 20;

/// Counts the bytes written to it.
struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The bytes of `value`'s JSON text, and its separating comma.
fn size(value: &Value) -> usize {
    let mut count = Count(1);
    // Writing a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `items`, in order, while the answer stays within [`ANSWER_BYTES`]; when
/// any are left out, a last item `{"type":"more", name: N}` counts them.
pub fn listed(items: impl IntoIterator<Item = Value>, name: &str) -> Value {
    let mut used = 0;
    let mut out = Vec::new();
    let mut left = 0_u64;
    for item in items {
        let bytes = size(&item);
        if left == 0 && used + bytes <= ANSWER_BYTES {
            used += bytes;
            out.push(item);
        } else {
            left += 1;
        }
    }
    if left > 0 {
        let mut more = Map::new();
        more.insert("type".to_owned(), json!("more"));
        more.insert(name.to_owned(), json!(left));
        out.push(Value::Object(more));
    }
    Value::Array(out)
}

/// `text`'s first `chars` characters.
fn first_chars(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(at, _)| &text[..at])
}

/// Every string of `value` cut to [`CUT_CHARS`] characters, but its grant
/// (`authorization`, `target`) and its ids, which are short and which a
/// resolver must see whole.
fn cut_texts(value: &mut Value) {
    match value {
        Value::String(text) => {
            let cut = first_chars(text, CUT_CHARS).len();
            text.truncate(cut);
        }
        Value::Array(items) => items.iter_mut().for_each(cut_texts),
        Value::Object(map) => map
            .iter_mut()
            .filter(|(key, _)| !matches!(key.as_str(), "authorization" | "target" | "id"))
            .for_each(|(_, v)| cut_texts(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A decision as the human's inbox lists it: whole, or short.
fn decision_item(decision: &Decision, short: bool) -> Value {
    let mut value = decision_json(decision);
    if let Value::Object(map) = &mut value {
        if short {
            map.insert("options".to_owned(), json!([]));
            map.insert("cut".to_owned(), json!(true));
        }
        map.insert("type".to_owned(), json!("decision"));
    }
    if short {
        cut_texts(&mut value);
    }
    value
}

/// The human's inbox (and a reader's), bounded as the module says:
/// `decisions` (every open one routed to the human, in inbox order),
/// `messages` (the oldest unread ones), and `more` unread ones beyond
/// them.
pub fn human_inbox(decisions: &[&Decision], messages: &[MessageFacts], more: u64) -> Value {
    let mut items = Vec::new();
    let mut used = 0;
    let mut decisions_left = 0_u64;
    for decision in decisions {
        let whole = decision_item(decision, false);
        let bytes = size(&whole);
        if decisions_left == 0 && used + bytes <= WHOLE_DECISION_BYTES {
            used += bytes;
            items.push(whole);
            continue;
        }
        let short = decision_item(decision, true);
        let bytes = size(&short);
        if decisions_left == 0 && used + bytes <= DECISION_BYTES {
            used += bytes;
            items.push(short);
        } else {
            decisions_left += 1;
        }
    }
    let mut unread = more;
    let mut full = false;
    for facts in messages {
        let item = inbox_message_json(facts, first_chars(&facts.record.body, INBOX_BODY_CHARS));
        let bytes = size(&item);
        full = full || used + bytes > ANSWER_BYTES;
        if full {
            unread += 1;
        } else {
            used += bytes;
            items.push(item);
        }
    }
    if unread > 0 || decisions_left > 0 {
        let mut last = json!({"type": "more", "unread": unread});
        if decisions_left > 0 {
            last["decisions"] = json!(decisions_left);
        }
        items.push(last);
    }
    Value::Array(items)
}
