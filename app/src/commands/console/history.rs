//! The History view's rows: each closed decision `history` lists, made
//! once from the client crate's wire row ([`ClosedRow`]) with every string
//! an agent chose neutralised, and the list the pages read so far make
//! ([`History`]), newest closing first.

use mosaic_client::wire::history::{ClosedRow, Closing};
use mosaic_client::wire::listed::Listed;
use mosaic_domain::DecisionId;

use super::model::Shown;

/// How a decision closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// Resolved, with the option chosen (shown by the grant rule).
    Resolved(Shown),
    /// Withdrawn.
    Withdrawn,
    /// Superseded by a newer decision.
    Superseded,
}

/// One closed decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Past {
    /// Its id, as the broker gave it: the subject of its trail.
    pub id: DecisionId,
    /// The closing record's position: the next page is asked before it.
    pub seq: u64,
    /// When it closed.
    pub at_ms: i64,
    /// How it closed.
    pub how: How,
    /// Who closed it (`human` or a role), shown; none for a supersede.
    pub by: Option<Shown>,
    /// The raiser, `role/run`, shown.
    pub raiser: Shown,
    /// Its action, shown by the grant rule.
    pub action: Shown,
    /// Its target, shown by the grant rule.
    pub target: Option<Shown>,
    /// Whether it blocked a task.
    pub blocking: bool,
}

impl Past {
    /// The row of `row`; `None` for a resolve without its choice, which
    /// the broker never writes.
    pub fn of(row: &ClosedRow) -> Option<Past> {
        let how = match row.status {
            Closing::Resolved => How::Resolved(Shown::grant(row.choice.as_ref()?.as_str())),
            Closing::Withdrawn => How::Withdrawn,
            Closing::Superseded => How::Superseded,
        };
        Some(Past {
            id: row.id,
            seq: row.seq,
            at_ms: row.at.unix_ms(),
            how,
            by: row.by.as_ref().map(Shown::text),
            raiser: Shown::of(&format!("{}/{}", row.raiser, row.raiser_run)),
            action: Shown::grant(row.action.as_str()),
            target: row.target.as_ref().map(|t| Shown::grant(t.as_str())),
            blocking: row.blocking,
        })
    }

    /// How and by whom, in words: `resolved with yes by human`,
    /// `withdrawn by dev`, `superseded`.
    pub fn how_words(&self) -> String {
        let by = self
            .by
            .as_ref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        match &self.how {
            How::Resolved(choice) => format!("resolved with {choice}{by}"),
            How::Withdrawn => format!("withdrawn{by}"),
            How::Superseded => format!("superseded{by}"),
        }
    }
}

/// One page of `history`: its rows, newest first, and how many older
/// closings it left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    /// The rows.
    pub rows: Vec<Past>,
    /// How many older closings are not listed.
    pub more: u64,
}

impl Page {
    /// The page of `listed`; `None` when a row is not one ([`Past::of`]).
    pub fn of(listed: &Listed<ClosedRow>) -> Option<Page> {
        Some(Page {
            rows: listed.items.iter().map(Past::of).collect::<Option<_>>()?,
            more: listed.more,
        })
    }
}

/// The closed decisions read so far, newest closing first, and how many
/// older ones the last page left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct History {
    /// The rows, newest closing first.
    pub rows: Vec<Past>,
    /// How many older closings are not read yet.
    pub more: u64,
    /// The `before` of a next page asked for and not answered yet.
    pub asking: Option<u64>,
}

impl History {
    /// The newest page read again: its rows in place of the newest ones,
    /// and the older rows read before kept below them when the page
    /// reaches down to them (more closings than a page since the last read
    /// would leave a gap, so then the page alone is the list). Closings
    /// are never undone, so those older rows, and the count beyond them,
    /// still hold.
    pub fn newest(&mut self, page: Page) {
        let reaches = match (page.rows.last(), self.rows.first()) {
            (Some(oldest_new), Some(newest_old)) => oldest_new.seq <= newest_old.seq,
            (Some(_) | None, None) | (None, Some(_)) => false,
        };
        let kept: Vec<Past> = match page.rows.last() {
            Some(oldest) if reaches => {
                let oldest = oldest.seq;
                self.rows.drain(..).filter(|r| r.seq < oldest).collect()
            }
            Some(_) | None => Vec::new(),
        };
        if kept.is_empty() {
            self.more = page.more;
        }
        self.rows = page.rows;
        self.rows.extend(kept);
    }

    /// A next page, asked for `before`: added below the rows when they
    /// still end there (else it is an answer to an older question).
    pub fn older(&mut self, before: u64, page: Page) {
        if self.asking == Some(before) {
            self.asking = None;
        }
        if self.rows.last().map(|r| r.seq) == Some(before) {
            self.rows.extend(page.rows);
            self.more = page.more;
        }
    }

    /// The `before` of the next page, when the selection is on the last
    /// row shown (`at_end`), older closings remain, and none is asked for
    /// yet.
    pub fn next_page(&self, at_end: bool) -> Option<u64> {
        let last = self.rows.last()?;
        (at_end && self.more > 0 && self.asking.is_none()).then_some(last.seq)
    }
}
