//! The whole screen drawn again on every view or selection change: a
//! terminal that drew a character wider than ratatui counted holds text
//! where ratatui believes the screen blank, and ratatui's diff alone
//! would leave it there.

use ratatui::backend::{Backend, CrosstermBackend, TestBackend};
use ratatui::buffer::Cell;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::render;
use super::state::{Key, State};
use super::tests::{decision, loaded, NOW_MS};

/// Text the terminal holds from an earlier view in cells ratatui took
/// for blank: the bottom rows of the body, which neither view draws on.
const STALE: &str = "reviewed by lead: safe";

/// Writes [`STALE`] on `terminal`'s screen behind ratatui's back, on
/// row `y`.
fn smear(terminal: &mut Terminal<TestBackend>, y: u16) {
    let cells: Vec<(u16, u16, Cell)> = STALE
        .chars()
        .zip(2u16..)
        .map(|(c, x)| {
            let mut cell = Cell::default();
            cell.set_char(c);
            (x, y, cell)
        })
        .collect();
    terminal
        .backend_mut()
        .draw(cells.iter().map(|(x, y, c)| (*x, *y, c)))
        .expect("draws");
}

/// The screen's text, row by row.
fn text(terminal: &Terminal<TestBackend>) -> String {
    let buffer = terminal.backend().buffer();
    let area = buffer.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn console() -> State {
    loaded(vec![
        decision(super::tests::ID, "release.publish", true),
        decision("0190a2b4-0000-7000-8000-000000000002", "repo.merge", false),
    ])
}

#[test]
fn after_a_view_or_selection_change_no_cell_holds_text_of_the_earlier_screen() {
    for change in [Key::Tab, Key::Char('j'), Key::Char('?'), Key::Char(']')] {
        let mut state = console();
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("a terminal");
        let mut last = None;
        render::redraw(&mut terminal, &state, &mut last, NOW_MS).expect("draws");
        smear(&mut terminal, 20);
        // Nothing changed: ratatui draws no cell it believes unchanged.
        render::redraw(&mut terminal, &state, &mut last, NOW_MS).expect("draws");
        assert!(
            text(&terminal).contains(STALE),
            "the smear stands for a wide character"
        );
        state.handle_key(change);
        render::redraw(&mut terminal, &state, &mut last, NOW_MS).expect("draws");
        assert!(
            !text(&terminal).contains(STALE),
            "after {change:?} a cell kept the earlier screen:\n{}",
            text(&terminal)
        );
    }
}

/// A `Write` the test reads back after the terminal has written to it.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn at_byte_level_a_view_change_erases_the_screen_before_its_frame_and_no_other_draw_does() {
    let mut state = console();
    let out = Shared::default();
    let viewport = Viewport::Fixed(Rect::new(0, 0, 80, 24));
    let mut terminal = Terminal::with_options(
        CrosstermBackend::new(out.clone()),
        TerminalOptions { viewport },
    )
    .expect("a terminal");
    let mut last = None;
    render::redraw(&mut terminal, &state, &mut last, NOW_MS).expect("draws");
    out.0.borrow_mut().clear();
    render::redraw(&mut terminal, &state, &mut last, NOW_MS).expect("draws");
    let same = out.0.borrow().clone();
    assert!(
        !same.windows(4).any(|w| w == b"\x1b[2J"),
        "an unchanged screen is not erased"
    );
    state.handle_key(Key::Tab);
    out.0.borrow_mut().clear();
    render::redraw(&mut terminal, &state, &mut last, NOW_MS).expect("draws");
    let bytes = out.0.borrow().clone();
    let erase = bytes
        .windows(4)
        .position(|w| w == b"\x1b[2J")
        .expect("the view change erases the screen");
    let tab = bytes
        .windows(b"Agents".len())
        .rposition(|w| w == b"Agents")
        .expect("the new view is drawn");
    assert!(erase < tab, "erased before the new frame is drawn");
}
