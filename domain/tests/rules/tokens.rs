//! The neutraliser's tokens: each control a person knows by name is drawn
//! as that name, every other hidden character as its code point, and the
//! two never mix.

use mosaic_domain::text;

#[test]
fn each_named_control_is_drawn_as_its_own_name() {
    for (c, drawn) in [
        ('\0', "⟨NUL⟩"),
        ('\u{7}', "⟨BEL⟩"),
        ('\u{8}', "⟨BS⟩"),
        ('\t', "⟨TAB⟩"),
        ('\n', "⟨LF⟩"),
        ('\r', "⟨CR⟩"),
        ('\u{1b}', "⟨ESC⟩"),
        ('\u{7f}', "⟨DEL⟩"),
    ] {
        assert_eq!(text::neutralise(&format!("a{c}b")), format!("a{drawn}b"));
    }
}

#[test]
fn a_line_overwritten_by_backspace_or_carriage_return_shows_both_texts() {
    // A terminal would show "rm -rf /" over "ls": drawn, both stay visible.
    assert_eq!(
        text::neutralise("ls\rrm -rf /"),
        "ls⟨CR⟩rm -rf /",
        "carriage return"
    );
    assert_eq!(
        text::neutralise("yes\u{8}\u{8}\u{8}no "),
        "yes⟨BS⟩⟨BS⟩⟨BS⟩no ",
        "backspaces"
    );
    // One line of a message, a line feed inside it: drawn, not broken.
    assert_eq!(
        text::neutralise("approved\nby alice"),
        "approved⟨LF⟩by alice"
    );
}

#[test]
fn controls_without_a_name_are_drawn_as_their_code_point() {
    for (c, drawn) in [
        ('\u{1}', "⟨U+0001⟩"),
        ('\u{b}', "⟨U+000B⟩"),
        ('\u{c}', "⟨U+000C⟩"),
        ('\u{1a}', "⟨U+001A⟩"),
        ('\u{1c}', "⟨U+001C⟩"),
        ('\u{85}', "⟨U+0085⟩"),
        ('\u{9b}', "⟨U+009B⟩"),
    ] {
        assert_eq!(text::neutralise(&c.to_string()), drawn, "{c:?}");
        assert_eq!(text::token(c), drawn, "{c:?}");
    }
}
