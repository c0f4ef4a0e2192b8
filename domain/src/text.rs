//! Untrusted text: what the broker accepts where the human decides, and
//! what a person is shown of anything an agent wrote.
//!
//! A *hidden* character is one that a terminal acts on or a renderer
//! drops instead of drawing: a control (Unicode `Cc`, which holds ESC, BEL
//! and DEL), a format character (`Cf`: bidi overrides, zero-width
//! characters, tag characters) or a line or paragraph separator (`Zl`,
//! `Zp`).
//!
//! - [`check`]: a decision's words are refused (`bad-request`) when they
//!   hold a control or format character (a newline only where
//!   [`Lines::Many`] allows it) or exceed their cap, so what the human
//!   approves is what the agent wrote, with nothing hidden in it.
//! - [`neutralise`]: everything else an agent wrote (a message body is
//!   evidence and is stored verbatim) is turned into drawable text before
//!   any terminal, log or notifier sees it. A character is drawn as itself
//!   only where the console (ratatui, whose widths are `unicode-width`'s)
//!   and the terminal (libc `wcwidth` in a UTF-8 locale, and tmux) give it
//!   the same width, and where it draws as something at all; every other
//!   one becomes a visible token such as `⟨ESC⟩` or `⟨U+3164⟩`. Nothing is
//!   dropped. So every row drawn from neutralised text is exactly as wide
//!   on the terminal as the console laid it out, and no text of an earlier
//!   screen can be left over beside it.
//! - [`neutralise_grant`]: the stricter rule for what a grant names (its
//!   action, its target, the approving choice): every character outside
//!   printable ASCII is a token, so two different grants never draw alike.
//!
//! Which characters draw as themselves, and how wide, is one static table
//! of code point ranges (`widths.rs`), generated from both widths over
//! every code point; a test of the app (`app/tests/widths.rs`), which
//! links ratatui and libc, proves it against both and regenerates it. On
//! top of the table, [`neutralise`] keeps a few rules of context, where a
//! sequence of characters is narrower to the console than the sum of its
//! characters (emoji sequences, ligatures), and the rule of at most two
//! combining marks on one character.

mod widths;

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
/// The most combining marks drawn on one character; a further one is a
/// token, so marks cannot pile up into a tall smear over other rows.
pub const MAX_MARKS: usize = 2;

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

/// The columns `c` takes where it is drawn as itself (0, 1 or 2), or
/// `None` where it is always drawn as its token: a hidden character, an
/// unassigned, private-use or noncharacter code point, a default
/// ignorable (the Hangul fillers, the grapheme joiner, the variation
/// selectors), a Hangul vowel or final jamo, or a character whose width
/// the console and the terminal disagree on. The table's width is both.
pub fn drawn_width(c: char) -> Option<usize> {
    let cp = u32::from(c);
    let at = widths::DRAWN.partition_point(|&(first, _, _)| first <= cp);
    let (first, last, columns) = *widths::DRAWN.get(at.checked_sub(1)?)?;
    (first..=last).contains(&cp).then_some(usize::from(columns))
}

/// The columns text that [`neutralise`] (or [`neutralise_grant`]) returned
/// takes on a terminal, and in the console: the sum of its characters'
/// widths. A character outside the table counts as its token would.
pub fn width(text: &str) -> usize {
    text.chars().map(columns).sum()
}

/// The columns of one character of neutralised text: its table width, no
/// width for the emoji variation selector [`neutralise`] keeps, and its
/// token's width for anything else.
fn columns(c: char) -> usize {
    match drawn_width(c) {
        Some(columns) => columns,
        None if c == EMOJI_PRESENTATION => 0,
        None => token(c).chars().count(),
    }
}

/// The longest start of `text` (text [`neutralise`] returned) that takes
/// at most `max` columns, with the marks on its last character; the
/// second value says whether anything was left out.
pub fn cut(text: &str, max: usize) -> (&str, bool) {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let w = columns(c);
        if used + w > max {
            return (&text[..at], true);
        }
        used += w;
    }
    (text, false)
}

/// What precedes a character in the text being neutralised, as far as
/// the rules of context need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    /// The start of the text, or a token: a combining mark here would sit
    /// on whatever the terminal drew before, so it is a token too.
    Nothing,
    /// A character drawn as itself, and the marks drawn on it so far.
    Drawn {
        /// The last character drawn that takes columns.
        base: char,
        /// The last character drawn: the base, or the last mark on it.
        last: char,
        /// How many marks (characters of no width) are drawn on `base`.
        marks: usize,
    },
}

/// Arabic letters of the joining group Lam: a Lam, then an Alef, is one
/// column to `unicode-width` (a ligature) and two to the terminal.
fn is_lam(c: char) -> bool {
    matches!(
        c,
        '\u{644}' | '\u{6B5}'..='\u{6B8}' | '\u{76A}' | '\u{8A6}' | '\u{8C7}'
    )
}

/// Arabic letters of the joining group Alef.
fn is_alef(c: char) -> bool {
    matches!(
        c,
        '\u{622}' | '\u{623}' | '\u{625}' | '\u{627}' | '\u{671}'
            ..='\u{673}' | '\u{675}' | '\u{773}' | '\u{774}'
    )
}

/// Khmer letters that, after the coeng sign U+17D2, `unicode-width`
/// counts as a subscript of no width, and the terminal as one column.
fn is_coeng_letter(c: char) -> bool {
    matches!(
        c,
        '\u{1780}'..='\u{1782}'
            | '\u{1784}'..='\u{1787}'
            | '\u{1789}'..='\u{178C}'
            | '\u{178E}'..='\u{1793}'
            | '\u{1795}'..='\u{1798}'
            | '\u{179B}'..='\u{179D}'
            | '\u{17A0}'
            | '\u{17A2}'
            | '\u{17A7}'
            | '\u{17AB}'
            | '\u{17AC}'
            | '\u{17AF}'
    )
}

/// The emoji skin-tone modifiers: after an emoji (a symbol, `So`) they
/// make one two-column sequence to `unicode-width`, and add two columns
/// on the terminal.
fn is_emoji_modifier(c: char) -> bool {
    ('\u{1F3FB}'..='\u{1F3FF}').contains(&c)
}

/// The variation selector that asks for an emoji's picture form.
const EMOJI_PRESENTATION: char = '\u{FE0F}';

/// Whether `c`, coming after `before`, draws as itself: it is in the
/// table, and no rule of context makes the console and the terminal
/// measure it apart there.
fn drawn_after(before: Before, c: char) -> bool {
    let Before::Drawn { base, last, marks } = before else {
        // At the start, or after a token, a mark would sit on whatever the
        // terminal drew before it.
        return drawn_width(c).is_some_and(|columns| columns > 0);
    };
    if c == EMOJI_PRESENTATION {
        // Kept only right after an emoji already two columns wide, so
        // that the sequence is two columns to both; anywhere else it is a
        // variation selector outside an emoji sequence.
        return marks == 0
            && drawn_width(base) == Some(2)
            && get_general_category(base) == GeneralCategory::OtherSymbol;
    }
    match drawn_width(c) {
        None => false,
        Some(0) => marks < MAX_MARKS,
        // The ligatures and sequences `unicode-width` counts narrower than
        // their characters. A rule looks back at the base, past the marks
        // on it, where a mark between could still join them.
        Some(_) => {
            !((is_alef(c) && is_lam(base))
                || (is_coeng_letter(c) && last == '\u{17D2}')
                || (('\u{A4FC}'..='\u{A4FD}').contains(&c)
                    && ('\u{A4F8}'..='\u{A4FB}').contains(&base))
                || (is_emoji_modifier(c)
                    && get_general_category(last) == GeneralCategory::OtherSymbol))
        }
    }
}

/// What precedes the character after `c`, which [`drawn_after`] judged
/// `drawn` after `before`.
fn after(before: Before, c: char, drawn: bool) -> Before {
    if !drawn {
        return Before::Nothing;
    }
    match before {
        Before::Drawn { base, marks, .. }
            if c == EMOJI_PRESENTATION || drawn_width(c) == Some(0) =>
        {
            Before::Drawn {
                base,
                last: c,
                marks: marks + 1,
            }
        }
        Before::Nothing | Before::Drawn { .. } => Before::Drawn {
            base: c,
            last: c,
            marks: 0,
        },
    }
}

/// The drawable form of untrusted text: every character that does not
/// draw as itself, with the same width on the console and the terminal,
/// replaced by its visible token; everything else kept. Borrows when
/// nothing is replaced.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    let mut before = Before::Nothing;
    let mut out: Option<String> = None;
    for (at, c) in text.char_indices() {
        let drawn = drawn_after(before, c);
        before = after(before, c, drawn);
        match (&mut out, drawn) {
            (Some(out), true) => out.push(c),
            (Some(out), false) => push_token(out, c),
            (None, true) => {}
            (None, false) => {
                let mut owned = String::with_capacity(text.len() + 16);
                owned.push_str(&text[..at]);
                push_token(&mut owned, c);
                out = Some(owned);
            }
        }
    }
    out.map_or(Cow::Borrowed(text), Cow::Owned)
}

/// The drawable lines of untrusted text that may span lines (a question, a
/// message body): split at `\n` (a `\r` before it goes with it), each line
/// then [`neutralise`]d, so no hidden character survives, but a text's own
/// line breaks stay line breaks.
pub fn neutralise_lines(text: &str) -> impl Iterator<Item = Cow<'_, str>> {
    text.split('\n')
        .map(|line| neutralise(line.strip_suffix('\r').unwrap_or(line)))
}

/// The drawable form of what a grant names (an action, a target, an
/// option's key): printable ASCII as itself, every other character a
/// token, and a space as itself only between two other printable
/// characters (a leading, trailing or doubled space is a token). So the
/// drawn form maps back to exactly one text: two different grants never
/// draw alike, whatever look-alike letters, invisible characters or
/// spacing they hold.
pub fn neutralise_grant(text: &str) -> Cow<'_, str> {
    let chars: Vec<char> = text.chars().collect();
    let printable = |c: Option<&char>| c.is_some_and(|c| c.is_ascii_graphic());
    let kept = |i: usize| {
        let c = chars[i];
        c.is_ascii_graphic()
            || (c == ' ' && i > 0 && printable(chars.get(i - 1)) && printable(chars.get(i + 1)))
    };
    if (0..chars.len()).all(kept) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, &c) in chars.iter().enumerate() {
        if kept(i) {
            out.push(c);
        } else {
            push_token(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// The visible token of one character: a short name for the controls a
/// person knows, else the code point.
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
