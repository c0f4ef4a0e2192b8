//! Untrusted text: what the broker accepts where the human decides, and
//! what a person is shown of anything an agent wrote.
//!
//! Two rules, one character class. A *hidden* character is one that a
//! terminal acts on or a renderer drops instead of drawing: a control
//! (Unicode `Cc`, which holds ESC, BEL and DEL), a format character (`Cf`:
//! bidi overrides, zero-width characters, tag characters) or a line or
//! paragraph separator (`Zl`, `Zp`).
//!
//! - [`check`]: a decision's words are refused (`bad-request`) when they
//!   hold a control or format character (a newline only where
//!   [`Lines::Many`] allows it) or exceed their cap, so what the human
//!   approves is what the agent wrote, with nothing hidden in it.
//! - [`neutralise`]: everything else an agent wrote (a message body is
//!   evidence and is stored verbatim) is turned into drawable text before
//!   any terminal, log or notifier sees it. Each hidden character becomes a
//!   visible token such as `⟨ESC⟩` or `⟨U+202E⟩`; nothing is dropped.

use std::borrow::Cow;
use std::fmt::Write as _;

use unicode_general_category::{get_general_category, GeneralCategory};

use crate::Refusal;

/// The most characters a decision's `question` may hold.
pub const MAX_QUESTION: usize = 4_000;
/// The most characters an option's `text` may hold.
pub const MAX_OPTION_TEXT: usize = 500;
/// The most characters a `recommendation` may hold.
pub const MAX_RECOMMENDATION: usize = 2_000;
/// The most characters a decision's `note` (resolve, seen, withdraw) may hold.
pub const MAX_NOTE: usize = 2_000;

/// Whether a field of a decision may span lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// One line: no newline.
    One,
    /// Several lines: `\n` is allowed, and no other control.
    Many,
}

/// Whether `c` is a control or format character (`Cc`, `Cf`): what a
/// decision's words may not hold.
pub fn is_control_or_format(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::Control | GeneralCategory::Format
    )
}

/// Whether `c` is hidden: a control or format character, or a line or
/// paragraph separator. [`neutralise`] makes each one visible.
pub fn is_hidden(c: char) -> bool {
    is_control_or_format(c)
        || matches!(
            get_general_category(c),
            GeneralCategory::LineSeparator | GeneralCategory::ParagraphSeparator
        )
}

/// Checks one field of a decision: at most `max_chars` characters (when
/// given), and no control or format character except `\n` where `lines`
/// is [`Lines::Many`].
///
/// # Errors
/// [`Refusal::BadRequest`] when the text is too long or holds a character
/// it may not.
pub fn check(text: &str, lines: Lines, max_chars: Option<usize>) -> Result<(), Refusal> {
    let allowed = |c: char| c == '\n' && lines == Lines::Many;
    if text.chars().any(|c| is_control_or_format(c) && !allowed(c)) {
        return Err(Refusal::BadRequest);
    }
    match max_chars {
        Some(max) if text.chars().count() > max => Err(Refusal::BadRequest),
        Some(_) | None => Ok(()),
    }
}

/// The drawable form of untrusted text: every hidden character replaced by
/// its visible token, everything else kept. Borrows when nothing is hidden.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hidden(c) {
            push_token(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The drawable lines of untrusted text that may span lines (a question, a
/// message body): split at `\n` (a `\r` before it goes with it), each line
/// then [`neutralise`]d, so no hidden character survives, but a text's own
/// line breaks stay line breaks.
pub fn neutralise_lines(text: &str) -> impl Iterator<Item = Cow<'_, str>> {
    text.split('\n')
        .map(|line| neutralise(line.strip_suffix('\r').unwrap_or(line)))
}

/// The visible token of one hidden character: a short name for the
/// controls a person knows, else the code point.
pub fn token(c: char) -> String {
    let mut out = String::new();
    push_token(&mut out, c);
    out
}

fn push_token(out: &mut String, c: char) {
    let name = match c {
        '\0' => "NUL",
        '\u{7}' => "BEL",
        '\u{8}' => "BS",
        '\t' => "TAB",
        '\n' => "LF",
        '\r' => "CR",
        '\u{1b}' => "ESC",
        '\u{7f}' => "DEL",
        _ => "",
    };
    if name.is_empty() {
        // Writing into a String cannot fail.
        let _ = write!(out, "⟨U+{:04X}⟩", u32::from(c));
    } else {
        out.push('⟨');
        out.push_str(name);
        out.push('⟩');
    }
}
