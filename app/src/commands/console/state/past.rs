//! The History view: the closed decisions read when the view opens and
//! again when a change closes one, a next page asked when the human moves
//! the selection onto the last row shown (only then, so a filter that
//! matches nothing never reads the whole history), and a row's trail
//! opened with `Enter`.

use super::super::history::{History, Page, Past};
use super::{Request, State, View};

impl State {
    /// The closed decisions read so far, once the view was opened.
    pub fn history(&self) -> Option<&History> {
        self.history.as_ref()
    }

    /// The History view's selected row.
    pub fn selected_past(&self) -> Option<&Past> {
        self.history.as_ref()?.rows.get(self.selected)
    }

    /// The History view opened: its newest page is read.
    pub(super) fn open_history(&mut self) {
        self.history.get_or_insert_with(History::default);
        self.send(Request::History { before: None });
    }

    /// A change closed a decision: the newest page is read again, once the
    /// view has been opened.
    pub(super) fn reread_history(&mut self) {
        if self.history.is_some() {
            self.send(Request::History { before: None });
        }
    }

    /// The selection moved in the History view: at the last row shown
    /// (the last row, or under a filter the last row it keeps), with older
    /// closings left, the next page is asked.
    pub(super) fn page_history(&mut self) {
        let at_end = match self.kept() {
            Some((kept, _)) => !kept.is_empty() && kept.iter().all(|row| *row <= self.selected),
            None => self.selected + 1 >= self.rows(),
        };
        let Some(history) = self.history.as_mut() else {
            return;
        };
        if let Some(before) = history.next_page(at_end) {
            history.asking = Some(before);
            self.send(Request::History {
                before: Some(before),
            });
        }
    }

    /// A page of `history` answered.
    pub(super) fn on_history(&mut self, before: Option<u64>, page: Page) {
        let history = self.history.get_or_insert_with(History::default);
        let picked = history.rows.get(self.selected).map(|r| r.seq);
        match before {
            None => history.newest(page),
            Some(before) => history.older(before, page),
        }
        if self.view != View::History {
            return;
        }
        // The selection stays on the row it was on, which newer closings
        // push down.
        let rows = &self.history.as_ref().map_or(&[][..], |h| h.rows.as_slice());
        let row = picked
            .and_then(|seq| rows.iter().position(|r| r.seq == seq))
            .unwrap_or_else(|| self.selected.min(rows.len().saturating_sub(1)));
        self.selected = row;
    }

    /// `Enter` in the History view: the selected decision's trail.
    pub(super) fn open_past(&mut self) {
        match self.selected_past().map(|p| p.id) {
            Some(id) => self.show_trail(id),
            None => self.status = "no closed decision is selected".to_owned(),
        }
    }
}
