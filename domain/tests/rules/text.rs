//! The text rules: a decision's words refuse hidden characters, and the
//! neutraliser leaves nothing a terminal would act on.

use mosaic_domain::text::{self, Lines};
use mosaic_domain::Refusal;
use proptest::prelude::*;

#[test]
fn every_hostile_character_class_is_refused_in_one_line_fields() {
    for hostile in [
        "\u{1b}]52;c;ZWNobw==\u{7}",
        "a\u{1b}[2Jb",
        "main\u{200b}",
        "repo/\u{202e}gnigats-tset",
        "tag\u{e0041}",
        "soft\u{ad}hyphen",
        "nul\0",
        "del\u{7f}",
        "c1\u{9b}31m",
        "line\nbreak",
        "cr\r",
        "tab\t",
    ] {
        assert_eq!(
            text::check(hostile, Lines::One, None),
            Err(Refusal::BadRequest),
            "{hostile:?}"
        );
    }
}

#[test]
fn a_question_may_span_lines_and_nothing_else() {
    assert_eq!(
        text::check("Merge?\nIt is green.", Lines::Many, Some(10_000)),
        Ok(())
    );
    assert_eq!(
        text::check("Merge?\r\nIt is green.", Lines::Many, None),
        Err(Refusal::BadRequest)
    );
    assert_eq!(
        text::check("Merge?\u{2066}", Lines::Many, None),
        Err(Refusal::BadRequest)
    );
}

#[test]
fn caps_count_characters_not_bytes() {
    let at_cap = "é".repeat(text::MAX_QUESTION);
    assert_eq!(
        text::check(&at_cap, Lines::Many, Some(text::MAX_QUESTION)),
        Ok(())
    );
    let over = "a".repeat(text::MAX_QUESTION + 1);
    assert_eq!(
        text::check(&over, Lines::Many, Some(text::MAX_QUESTION)),
        Err(Refusal::BadRequest)
    );
}

#[test]
fn ordinary_text_passes_and_is_borrowed_unchanged() {
    let plain = "Publish login-fix? ✓ café 日本語 \u{a0}padded";
    assert_eq!(text::check(plain, Lines::One, Some(100)), Ok(()));
    assert!(matches!(text::neutralise(plain), std::borrow::Cow::Borrowed(p) if p == plain));
}

#[test]
fn neutralise_names_each_hidden_character() {
    assert_eq!(
        text::neutralise("\u{1b}]0;pwned\u{7}x\u{202e}y\u{200b}\u{2028}\t\0\u{7f}"),
        "⟨ESC⟩]0;pwned⟨BEL⟩x⟨U+202E⟩y⟨U+200B⟩⟨U+2028⟩⟨TAB⟩⟨NUL⟩⟨DEL⟩"
    );
    assert_eq!(text::token('\u{e0041}'), "⟨U+E0041⟩");
}

#[test]
fn neutralise_lines_keeps_line_breaks_and_nothing_hidden() {
    let lines: Vec<_> = text::neutralise_lines("one\r\ntwo\u{1b}[H\nthree").collect();
    assert_eq!(lines, ["one", "two⟨ESC⟩[H", "three"]);
}

proptest! {
    #[test]
    fn neutralised_text_holds_no_hidden_character_and_shows_each_one(input in any::<String>()) {
        let out = text::neutralise(&input);
        prop_assert!(!out.chars().any(text::is_hidden), "{out:?}");
        prop_assert!(!out.chars().any(text::is_control_or_format), "{out:?}");
        // Each hidden character of the input appears as its token, in order:
        // the output is the input with each hidden character replaced.
        let mut expected = String::new();
        for c in input.chars() {
            if text::is_hidden(c) { expected.push_str(&text::token(c)); } else { expected.push(c); }
        }
        prop_assert_eq!(out.as_ref(), expected.as_str());
        let hidden = input.chars().filter(|&c| text::is_hidden(c)).count();
        prop_assert!(out.matches('⟨').count() >= hidden);
    }

    #[test]
    fn neutralised_lines_hold_no_hidden_character(input in any::<String>()) {
        for line in text::neutralise_lines(&input) {
            prop_assert!(!line.chars().any(text::is_hidden), "{line:?}");
        }
    }
}
