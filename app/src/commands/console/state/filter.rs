//! The filter: `/` narrows the current list, at each key typed, to the
//! rows whose words as drawn ([`super::super::rows`], a trail record's
//! sentence) hold the typed text, case-insensitively; a row with a kind
//! of evidence (a trail record, a change) matches its kind's name too,
//! so `decision.raised` keeps the raises. The words are the neutralised
//! text the human reads, never an agent's raw bytes, so a hidden
//! character can neither make a row match nor keep it out of view.
//!
//! Each list keeps its own filter until `Esc` clears it. The selection
//! stays an index into the whole list, so every act on the selected row
//! is unchanged; it only ever rests on a row shown, and a filter that
//! hides it moves it to the first row shown. `]` reads the inbox itself,
//! never the filtered list: no filter hides a waiting decision from it.

use super::super::act::{typed, Typed};
use super::super::rows::{agent_row, change_row, decision_row, message_row, past_row, wait_line};
use super::super::sentence::sentence;
use super::{Prompt, State, View};

/// Whether a row's `words` hold `filter`, case-insensitively.
fn matches(words: &str, filter: &str) -> bool {
    words.to_lowercase().contains(&filter.to_lowercase())
}

impl State {
    /// The words of each row `view` lists, in its order, as a filter
    /// matches them; `None` for a view that lists nothing to filter.
    pub fn row_words(&self, view: View) -> Option<Vec<String>> {
        Some(match view {
            View::Inbox => self
                .inbox
                .decisions
                .iter()
                .map(|d| decision_row(d, ""))
                .chain(self.inbox.messages.iter().map(message_row))
                .collect(),
            View::Agents => self
                .agents
                .iter()
                .map(|a| {
                    let run = a.who.run_raw.as_str();
                    let mut words = agent_row(a, self.life_of(run), self.doing_of(run));
                    for w in &a.waits {
                        words.push('\n');
                        words.push_str(&wait_line(w));
                    }
                    words
                })
                .collect(),
            View::Trail => self.trail.as_ref().map_or_else(Vec::new, |(_, records)| {
                records
                    .iter()
                    .map(|r| format!("{}\n{}", sentence(r), r.kind))
                    .collect()
            }),
            // The Activity view lists the newest change first.
            View::Activity => self
                .activity
                .iter()
                .rev()
                .map(|c| format!("{}\n{}", change_row(c), c.kind))
                .collect(),
            // An age changes with the clock: no filter matches it.
            View::History => self.history.as_ref().map_or_else(Vec::new, |h| {
                h.rows.iter().map(|p| past_row(p, "")).collect()
            }),
            View::Decision | View::Message | View::Run => return None,
        })
    }

    /// The current list's filter, as typed so far or kept.
    pub fn filter(&self) -> Option<&str> {
        self.filters
            .iter()
            .find(|(view, _)| *view == self.view)
            .map(|(_, text)| text.as_str())
    }

    /// The rows of the current list its filter keeps, each by its index
    /// in the whole list, and how many rows the whole list has; `None`
    /// when no filter narrows it.
    pub fn kept(&self) -> Option<(Vec<usize>, usize)> {
        let filter = self.filter()?;
        let words = self.row_words(self.view)?;
        let kept = words
            .iter()
            .enumerate()
            .filter(|(_, words)| matches(words, filter))
            .map(|(row, _)| row)
            .collect();
        Some((kept, words.len()))
    }

    /// Whether the current list draws its row `row`.
    pub fn is_shown(&self, row: usize) -> bool {
        self.kept().is_none_or(|(kept, _)| kept.contains(&row))
    }

    /// `/`: the bottom line types the current list's filter, from the one
    /// it keeps.
    pub(super) fn start_filter(&mut self) {
        if self.row_words(self.view).is_none() {
            self.status = "/ filters a list: the inbox, Agents, Trail or Activity".to_owned();
            return;
        }
        self.prompt = Prompt::Filter(self.filter().unwrap_or_default().to_owned());
    }

    /// One key typed into the filter: the list narrows at once; `Enter`
    /// keeps the filter and `Esc` clears it.
    pub(super) fn key_in_filter(&mut self, key: super::Key, text: String) {
        match typed(key, text) {
            Typed::Editing(text) => {
                self.set_filter(text.clone());
                self.prompt = Prompt::Filter(text);
            }
            Typed::Done(text) => self.set_filter(text),
            Typed::Cancelled => self.set_filter(String::new()),
        }
    }

    /// The current list's filter is `text` (none when empty).
    pub(super) fn set_filter(&mut self, text: String) {
        let view = self.view;
        self.filters.retain(|(of, _)| *of != view);
        if !text.is_empty() {
            self.filters.push((view, text));
        }
        self.keep_selection_shown();
    }

    /// After the list or its filter changed: a selected row the filter
    /// hides gives the selection to the first row shown.
    pub(super) fn keep_selection_shown(&mut self) {
        let Some((kept, _)) = self.kept() else {
            return;
        };
        if !kept.contains(&self.selected) {
            if let Some(first) = kept.first() {
                self.select(*first);
            }
        }
    }

    /// Whether the selected row is hidden: the filter shows no row, and
    /// nothing is selected that an act could take.
    pub(super) fn selection_hidden(&self) -> bool {
        !self.is_shown(self.selected)
    }

    /// `j` (`down`) or `k`: the selection moves to the next or the
    /// previous row shown.
    pub(super) fn step(&mut self, down: bool) {
        let rows = self
            .kept()
            .map_or_else(|| (0..self.rows()).collect(), |(kept, _)| kept);
        let next = if down {
            rows.iter().find(|row| **row > self.selected).copied()
        } else {
            rows.iter().rev().find(|row| **row < self.selected).copied()
        };
        if let Some(row) = next {
            self.select(row);
        }
    }
}
