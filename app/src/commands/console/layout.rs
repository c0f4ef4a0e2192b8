//! Where each part of the console goes on the screen, computed in this
//! one place: the drawing ([`super::render`]) puts each pane in the
//! rectangle named here, and the state ([`super::state`]) measures with
//! the same rectangles how far a pane scrolls and whether a decision's
//! grant, options and prompt fit whole ([`decision_height`]).
//!
//! From the top: the tabs (one line), the banner when the broker cannot
//! be reached (one line), the body, and the bottom line (the status or
//! the prompt). The inbox's body is its list (two fifths, at least three
//! lines) above the selected row's detail; a decision's body is the grant
//! area, the options (one line each) and the raiser's words, which get
//! what is left and at least [`QUESTION_MIN_HEIGHT`] lines. Every pane has
//! a frame ([`inner`] is what is inside it).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Block, Borders};

/// Lines of the grant area, inside its frame.
pub const GRANT_LINES: u16 = 5;
/// The fewest lines of the question's pane, with its frame.
pub const QUESTION_MIN_HEIGHT: u16 = 3;
/// A frame's borders across it: top and bottom, or left and right.
const FRAME: u16 = 2;
/// The widest the help is drawn.
const HELP_WIDTH: u16 = 80;

/// The screen's four bands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screen {
    /// The tabs.
    pub tabs: Rect,
    /// The banner (no lines unless the broker cannot be reached).
    pub banner: Rect,
    /// The current view.
    pub body: Rect,
    /// The status or the prompt.
    pub bottom: Rect,
}

/// The bands of a `width`×`height` screen, with the banner or not.
pub fn screen(width: u16, height: u16, banner: bool) -> Screen {
    let [tabs, banner, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(banner)),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(Rect::new(0, 0, width, height));
    Screen {
        tabs,
        banner,
        body,
        bottom,
    }
}

/// The inbox's list and, below it, the selected row's detail.
pub fn inbox(body: Rect) -> [Rect; 2] {
    let list = (body.height * 2 / 5).max(3);
    Layout::vertical([Constraint::Length(list), Constraint::Min(0)]).areas(body)
}

/// A decision's grant area, its options' pane and its raiser's words.
pub fn decision(body: Rect, options: usize) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(GRANT_LINES + FRAME),
        Constraint::Length(options_height(options)),
        Constraint::Min(QUESTION_MIN_HEIGHT),
    ])
    .areas(body)
}

/// The options' pane: a line per option, in its frame.
fn options_height(options: usize) -> u16 {
    u16::try_from(options)
        .unwrap_or(u16::MAX)
        .saturating_add(FRAME)
}

/// The fewest rows on which a decision with `options` options shows its
/// grant area, its options and a line of its question whole, with the
/// tabs, the banner or not, and the bottom line.
pub fn decision_height(options: usize, banner: bool) -> u16 {
    1 + u16::from(banner) + GRANT_LINES + FRAME + options_height(options) + QUESTION_MIN_HEIGHT + 1
}

/// The columns a pane needs to show a line `inner` columns wide inside
/// its frame (a border on either side).
pub fn framed_width(inner: usize) -> usize {
    inner + usize::from(FRAME)
}

/// The inside of a pane's frame.
pub fn inner(area: Rect) -> Rect {
    Block::default().borders(Borders::ALL).inner(area)
}

/// The help's box over the body, for `lines` lines of keys: centred, at
/// most [`HELP_WIDTH`] wide, from the body's top.
pub fn help(body: Rect, lines: usize) -> Rect {
    let height = u16::try_from(lines)
        .unwrap_or(u16::MAX)
        .saturating_add(FRAME)
        .min(body.height);
    let width = body.width.min(HELP_WIDTH);
    Rect {
        x: body.x + (body.width - width) / 2,
        y: body.y,
        width,
        height,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bands_and_panes_fill_the_screen_and_the_decision_s_height_is_its_panes() {
        for banner in [false, true] {
            let s = screen(80, 24, banner);
            assert_eq!(
                (s.tabs.height, s.banner.height, s.bottom.height),
                (1, u16::from(banner), 1)
            );
            assert_eq!(s.body.height, 22 - u16::from(banner));
            assert_eq!(s.bottom.y, 23);
            for options in [0, 2, 9] {
                let height = decision_height(options, banner);
                let fitted = screen(80, height, banner);
                let [grant, opts, words] = decision(fitted.body, options);
                assert_eq!(grant.height, GRANT_LINES + 2);
                assert_eq!(usize::from(opts.height), options + 2);
                assert_eq!(words.height, QUESTION_MIN_HEIGHT, "{options} {banner}");
                let short = screen(80, height - 1, banner);
                let panes: u16 = decision(short.body, options).iter().map(|r| r.height).sum();
                assert!(
                    panes < GRANT_LINES + 2 + opts.height + QUESTION_MIN_HEIGHT,
                    "{options} {banner}"
                );
            }
        }
        let [list, detail] = inbox(Rect::new(0, 1, 80, 22));
        assert_eq!((list.height, detail.height, detail.y), (8, 14, 9));
        let [list, detail] = inbox(Rect::new(0, 1, 80, 5));
        assert_eq!((list.height, detail.height), (3, 2));
        assert_eq!(inner(Rect::new(0, 0, 10, 4)), Rect::new(1, 1, 8, 2));
        // A line as wide as a frame's inside needs the frame's width.
        let inside = usize::from(inner(Rect::new(0, 0, 10, 4)).width);
        assert_eq!(framed_width(inside), 10);
        assert_eq!(help(Rect::new(0, 1, 120, 30), 20), Rect::new(20, 1, 80, 22));
        assert_eq!(help(Rect::new(0, 1, 60, 10), 20), Rect::new(0, 1, 60, 10));
    }
}
