//! The bounds of a read's answer: whatever agents send, no read answers
//! more than a client takes (4 MiB, the socket client's cap), so no read
//! of the human's is ever refused `response-too-large`.
//!
//! - [`listed`]: an array read (`tasks`, `agents`, `trail`, `history`, of
//!   at most [`HISTORY_ROWS`] closed decisions) lists its items
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

use std::borrow::Cow;
use std::io;

use mosaic_client::wire::decision::DecisionView;
use mosaic_client::wire::inbox::Inbox;
use mosaic_client::wire::listed::{Listable, Listed};
use mosaic_domain::decisions::Decision;
use mosaic_domain::messages::MessageFacts;
pub use mosaic_domain::messages::INBOX_BODY_CHARS;
use serde::Serialize;

use super::reply::{decision_view, inbox_message};

/// The most bytes of items one read's answer holds: half a MiB under the
/// client's 4 MiB, for the envelope and the largest single item.
pub const ANSWER_BYTES: usize = 3_584 * 1024;
/// The most bytes of whole decisions in the human's inbox.
pub const WHOLE_DECISION_BYTES: usize = 2 * 1024 * 1024;
/// The most bytes of decisions, whole or short, in the human's inbox.
pub const DECISION_BYTES: usize = 2_560 * 1024;
/// The most characters of each text of a decision in its short form.
pub const CUT_CHARS: usize = 200;
/// The most closed decisions one `history` page lists. A row holds no
/// question, option or recommendation, only names, a target and a note
/// of at most `MAX_NOTE` characters, so a hundred rows of the largest stay
/// far within [`ANSWER_BYTES`]; [`listed`] bounds them all the same.
pub const HISTORY_ROWS: usize = 100;
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

/// The bytes of `item`'s JSON text, and its separating comma.
fn size(item: &impl Serialize) -> usize {
    let mut count = Count(1);
    // Writing a wire shape into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, item);
    count.0
}

/// `items`, in order, while the answer stays within [`ANSWER_BYTES`]; when
/// any are left out, the answer's last item `{"type":"more", NAME: N}`
/// counts them.
pub fn listed<T: Serialize + Listable>(items: impl IntoIterator<Item = T>) -> Listed<T> {
    let mut used = 0;
    let mut listed = Listed::default();
    for item in items {
        let bytes = size(&item);
        if listed.more == 0 && used + bytes <= ANSWER_BYTES {
            used += bytes;
            listed.items.push(item);
        } else {
            listed.more += 1;
        }
    }
    listed
}

/// `text`'s first `chars` characters.
fn first_chars(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(at, _)| &text[..at])
}

/// A text cut to [`CUT_CHARS`] characters.
fn cut<'a>(text: &Cow<'a, str>) -> Cow<'a, str> {
    match text {
        Cow::Borrowed(text) => Cow::Borrowed(first_chars(text, CUT_CHARS)),
        Cow::Owned(text) => Cow::Owned(first_chars(text, CUT_CHARS).to_owned()),
    }
}

/// A decision in its short form: no options, its free texts cut to
/// [`CUT_CHARS`] characters, `cut: true`. Its grant (`authorization`,
/// `target`) and its ids are left whole: a resolver must see them, and
/// every other text of a decision is a name of at most 128 characters.
fn short(view: DecisionView<'_>) -> DecisionView<'_> {
    let mut short = view;
    let raised = &mut short.raised;
    raised.options.clear();
    raised.question = cut(&raised.question);
    raised.recommendation = cut(&raised.recommendation);
    raised.project = raised.project.as_ref().map(cut);
    raised.requirement_ref = raised.requirement_ref.as_ref().map(cut);
    short.standing.cut = true;
    short
}

/// A decision as the human's inbox lists it: whole, or short; tagged, so
/// its size is the item's.
fn decision_item(decision: &Decision, is_short: bool) -> DecisionView<'_> {
    let mut view = decision_view(decision);
    view.standing.item = Some(mosaic_client::wire::listed::ItemType::Decision);
    if is_short {
        short(view)
    } else {
        view
    }
}

/// The human's inbox (and a reader's), bounded as the module says:
/// `decisions` (every open one routed to the human, in inbox order),
/// `messages` (the oldest unread ones), and `more` unread ones beyond
/// them.
pub fn human_inbox<'a>(
    decisions: &[&'a Decision],
    messages: &'a [MessageFacts],
    more: u64,
) -> Inbox<'a> {
    let mut listed = Vec::new();
    let mut used = 0;
    let mut decisions_left = 0_u64;
    for decision in decisions {
        let whole = decision_item(decision, false);
        let bytes = size(&whole);
        if decisions_left == 0 && used + bytes <= WHOLE_DECISION_BYTES {
            used += bytes;
            listed.push(whole);
            continue;
        }
        let short = decision_item(decision, true);
        let bytes = size(&short);
        if decisions_left == 0 && used + bytes <= DECISION_BYTES {
            used += bytes;
            listed.push(short);
        } else {
            decisions_left += 1;
        }
    }
    let mut unread = more;
    let mut full = false;
    let mut kept = Vec::new();
    for facts in messages {
        let mut item = inbox_message(facts, first_chars(&facts.record.body, INBOX_BODY_CHARS));
        item.item = Some(mosaic_client::wire::listed::ItemType::Message);
        let bytes = size(&item);
        full = full || used + bytes > ANSWER_BYTES;
        if full {
            unread += 1;
        } else {
            used += bytes;
            kept.push(item);
        }
    }
    Inbox::new(listed, kept, unread, decisions_left)
}
