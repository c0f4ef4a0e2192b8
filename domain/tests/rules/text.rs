//! The text rules: a decision's words refuse hidden characters, the
//! neutraliser leaves nothing a terminal would act on or draw at another
//! width than the console, and the grant rule draws two different grants
//! differently. (That the width table is both the console's and the
//! terminal's is proved in `app/tests/widths.rs`, which links them.)

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

#[test]
fn the_tricks_draw_as_tokens() {
    // Hexagrams: one column to the console, two to the terminal.
    let hexagrams = "\u{4DC0}".repeat(50);
    let message = format!("{hexagrams}reviewed by lead: safe");
    assert_eq!(
        text::neutralise(&message),
        format!("{}reviewed by lead: safe", "⟨U+4DC0⟩".repeat(50))
    );
    assert_eq!(text::neutralise("\u{3248}"), "⟨U+3248⟩");
    // Drawn as nothing, or dropped by tmux: a target that ends in one
    // draws as another.
    assert_eq!(text::neutralise("acme/main\u{3164}"), "acme/main⟨U+3164⟩");
    assert_eq!(text::neutralise("acme/main\u{FFA0}"), "acme/main⟨U+FFA0⟩");
    assert_eq!(text::neutralise("acme/main\u{FFFF}"), "acme/main⟨U+FFFF⟩");
    assert_eq!(text::neutralise("acme/main\u{0378}"), "acme/main⟨U+0378⟩");
    assert_eq!(text::neutralise("acme/ma\u{034F}in"), "acme/ma⟨U+034F⟩in");
    assert_eq!(text::neutralise("private\u{E000}"), "private⟨U+E000⟩");
    assert_eq!(
        text::neutralise("\u{1100}\u{1161}\u{11A8}"),
        "\u{1100}⟨U+1161⟩⟨U+11A8⟩"
    );
    // A variation selector outside an emoji sequence.
    assert_eq!(text::neutralise("main\u{FE0F}"), "main⟨U+FE0F⟩");
    assert_eq!(text::neutralise("\u{2764}\u{FE0F}"), "\u{2764}⟨U+FE0F⟩");
}

#[test]
fn two_combining_marks_draw_on_a_character_and_a_third_is_a_token() {
    assert_eq!(text::neutralise("e\u{301}\u{302}"), "e\u{301}\u{302}");
    assert_eq!(
        text::neutralise("e\u{301}\u{302}\u{303}\u{304}x\u{301}"),
        "e\u{301}\u{302}⟨U+0303⟩⟨U+0304⟩x\u{301}"
    );
    // A mark with nothing of its own to sit on would sit on whatever the
    // terminal drew before: the start of a field, or a token.
    assert_eq!(text::neutralise("\u{301}a"), "⟨U+0301⟩a");
    assert_eq!(text::neutralise("\u{1b}\u{301}"), "⟨ESC⟩⟨U+0301⟩");
}

#[test]
fn sequences_the_console_counts_narrower_keep_their_first_character_only() {
    // An emoji with its variation selector, where both are two columns.
    assert_eq!(text::neutralise("\u{2614}\u{FE0F}"), "\u{2614}\u{FE0F}");
    assert_eq!(text::neutralise("\u{1F44D}\u{1F3FB}"), "\u{1F44D}⟨U+1F3FB⟩");
    assert_eq!(text::neutralise("\u{644}\u{627}"), "\u{644}⟨U+0627⟩");
    assert_eq!(
        text::neutralise("\u{644}\u{64E}\u{627}"),
        "\u{644}\u{64E}⟨U+0627⟩"
    );
    assert_eq!(
        text::neutralise("\u{1780}\u{17D2}\u{1780}"),
        "\u{1780}\u{17D2}⟨U+1780⟩"
    );
    assert_eq!(text::neutralise("\u{A4F8}\u{A4FC}"), "\u{A4F8}⟨U+A4FC⟩");
    // Joiners are format characters: no joined sequence survives.
    assert_eq!(
        text::neutralise("\u{1F468}\u{200D}\u{1F469}"),
        "\u{1F468}⟨U+200D⟩\u{1F469}"
    );
}

#[test]
fn width_and_cut_measure_neutralised_text() {
    assert_eq!(text::width("ab日本"), 6);
    assert_eq!(text::width("e\u{301}"), 1);
    assert_eq!(text::width("\u{2614}\u{FE0F}"), 2);
    assert_eq!(text::cut("ab日本", 5), ("ab日", true));
    assert_eq!(text::cut("ab日本", 6), ("ab日本", false));
    assert_eq!(text::cut("ae\u{301}b", 2), ("ae\u{301}", true));
    assert_eq!(text::cut("", 0), ("", false));
}

#[test]
fn a_grant_draws_printable_ascii_only() {
    // A Cyrillic і (U+0456) in a target draws like a Latin i elsewhere.
    assert_eq!(text::neutralise("acme/ma\u{456}n"), "acme/ma\u{456}n");
    assert_eq!(
        text::neutralise_grant("acme/ma\u{456}n"),
        "acme/ma⟨U+0456⟩n"
    );
    assert_eq!(
        text::neutralise_grant("acme/main\u{3164}"),
        "acme/main⟨U+3164⟩"
    );
    assert_eq!(
        text::neutralise_grant("main\u{4DC0}\u{4DC0}"),
        "main⟨U+4DC0⟩⟨U+4DC0⟩"
    );
    assert_eq!(text::neutralise_grant("café"), "caf⟨U+00E9⟩");
    assert_eq!(text::neutralise_grant("a\u{1b}[2J"), "a⟨ESC⟩[2J");
    // A space only between two printable characters.
    assert!(matches!(
        text::neutralise_grant("my file"),
        std::borrow::Cow::Borrowed("my file")
    ));
    assert_eq!(text::neutralise_grant(" main"), "⟨U+0020⟩main");
    assert_eq!(text::neutralise_grant("main "), "main⟨U+0020⟩");
    assert_eq!(text::neutralise_grant("a  b"), "a⟨U+0020⟩⟨U+0020⟩b");
    // A token's brackets in the text are themselves tokens.
    assert_eq!(text::neutralise_grant("⟨ESC⟩"), "⟨U+27E8⟩ESC⟨U+27E9⟩");
}

/// Strings that meet the rules of context and the tricks often.
fn hostile() -> impl Strategy<Value = String> {
    const TRICKY: &[char] = &[
        'a',
        ' ',
        '\u{301}',
        '\u{302}',
        '\u{303}',
        '\u{644}',
        '\u{627}',
        '\u{64E}',
        '\u{17D2}',
        '\u{1780}',
        '\u{A4F8}',
        '\u{A4FC}',
        '\u{1F44D}',
        '\u{1F3FB}',
        '\u{FE0F}',
        '\u{2614}',
        '\u{200D}',
        '\u{3164}',
        '\u{4DC0}',
        '\u{FFFF}',
        '\u{378}',
        '\u{34F}',
        '\u{456}',
        '\u{1b}',
        '⟨',
        '⟩',
        '\n',
    ];
    proptest::collection::vec(
        prop_oneof![any::<char>(), proptest::sample::select(TRICKY)],
        0..32,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// The characters of `input`, each either as itself (then drawn) or as
/// its token, in order, exactly making up `out`.
fn each_kept_or_token(input: &str, out: &str) -> Result<(), TestCaseError> {
    let mut rest = out;
    for c in input.chars() {
        if let Some(after) = rest.strip_prefix(c) {
            prop_assert!(
                text::drawn_width(c).is_some() || c == '\u{FE0F}',
                "{c:?} in {out:?}"
            );
            rest = after;
        } else {
            let token = text::token(c);
            prop_assert!(rest.starts_with(token.as_str()), "{c:?} lost in {out:?}");
            rest = &rest[token.len()..];
        }
    }
    prop_assert_eq!(rest, "");
    Ok(())
}

proptest! {
    #[test]
    fn neutralised_text_holds_no_hidden_character_and_shows_each_one(input in hostile()) {
        let out = text::neutralise(&input);
        prop_assert!(!out.chars().any(text::is_hidden), "{out:?}");
        prop_assert!(!out.chars().any(text::is_control_or_format), "{out:?}");
        // The output is the input with characters replaced by their tokens,
        // and every character that never draws alone is among them.
        each_kept_or_token(&input, &out)?;
        for c in input.chars().filter(|&c| text::drawn_width(c).is_none() && c != '\u{FE0F}') {
            prop_assert!(out.contains(text::token(c).as_str()), "{c:?} in {out:?}");
        }
        // Neutralising twice changes nothing more.
        let again = text::neutralise(&out);
        prop_assert_eq!(again.as_ref(), out.as_ref());
    }

    #[test]
    fn neutralised_lines_hold_no_hidden_character(input in hostile()) {
        for line in text::neutralise_lines(&input) {
            prop_assert!(!line.chars().any(text::is_hidden), "{line:?}");
        }
    }

    #[test]
    fn two_different_grants_never_draw_alike(a in hostile(), b in hostile()) {
        let (da, db) = (text::neutralise_grant(&a), text::neutralise_grant(&b));
        prop_assert!(da.chars().all(|c| c.is_ascii_graphic() || c == ' ' || c == '⟨' || c == '⟩'));
        prop_assert_eq!(a == b, da == db, "{:?} and {:?} draw as {:?} and {:?}", a, b, da, db);
        prop_assert_eq!(decode_grant(&da), a);
    }

    #[test]
    fn a_grant_one_character_apart_draws_apart(a in hostile(), at in any::<prop::sample::Index>(), c in any::<char>()) {
        let mut chars: Vec<char> = a.chars().collect();
        if chars.is_empty() { chars.push('a'); }
        let i = at.index(chars.len());
        let other: String = chars.iter().enumerate().map(|(j, &d)| if j == i { c } else { d }).collect();
        let same: String = chars.iter().collect();
        prop_assert_eq!(same == other, text::neutralise_grant(&same) == text::neutralise_grant(&other));
    }
}

/// The one text a grant's drawn form can come from: printable ASCII as
/// itself, each token its character.
fn decode_grant(drawn: &str) -> String {
    let mut out = String::new();
    let mut rest = drawn;
    while let Some(c) = rest.chars().next() {
        if c == '⟨' {
            let end = rest.find('⟩').expect("a closed token");
            let name = &rest['⟨'.len_utf8()..end];
            let decoded = match name {
                "NUL" => '\0',
                "BEL" => '\u{7}',
                "BS" => '\u{8}',
                "TAB" => '\t',
                "LF" => '\n',
                "CR" => '\r',
                "ESC" => '\u{1b}',
                "DEL" => '\u{7f}',
                hex => {
                    let code = u32::from_str_radix(hex.trim_start_matches("U+"), 16).expect("hex");
                    char::from_u32(code).expect("a code point")
                }
            };
            out.push(decoded);
            rest = &rest[end + '⟩'.len_utf8()..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}
