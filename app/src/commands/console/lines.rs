//! Text as a terminal draws it: its width in columns, and its lines cut
//! to a pane's width. The drawing wraps with it, and the state measures
//! with it how far a pane can scroll, so both count the same lines.

/// The display width of `text`, as the terminal draws it.
pub fn width(text: &str) -> usize {
    ratatui::text::Span::raw(text).width()
}

/// `lines`, each cut into pieces of at most `columns` columns, at a space
/// where there is one: the lines a pane of that many columns draws.
pub fn wrap<'a>(lines: impl IntoIterator<Item = &'a str>, columns: u16) -> Vec<String> {
    let columns = usize::from(columns.max(1));
    let mut out = Vec::new();
    for line in lines {
        let mut piece = String::new();
        for c in line.chars() {
            piece.push(c);
            if width(&piece) <= columns {
                continue;
            }
            // Too wide: cut after the last space, or else before `c`.
            let before = piece.len() - c.len_utf8();
            let cut = piece[..before]
                .rfind(' ')
                .filter(|at| *at > 0)
                .map_or(before, |at| at + 1);
            let rest = piece.split_off(cut);
            out.push(std::mem::replace(&mut piece, rest));
        }
        out.push(piece);
    }
    out
}
