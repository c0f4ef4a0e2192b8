//! The open-time ledger pass: the ledger rules, over the ledger and every
//! typed table in `seq` order, each a walk along its own B-tree with
//! nothing looked up:
//! - `seq` runs 1, 2, 3… with no gap;
//! - every timestamp is canonical and later than the one before;
//! - every row's kind is one the schema has, and its typed table holds a
//!   row at its `seq`;
//! - no typed row stands at the `seq` of another kind, or past the ledger;
//! - every row's `hash` is the chain's link over the row before, this
//!   ledger row and its typed row, as SQLite returns their columns
//!   ([`chain`]).
//!
//! The schema refuses the first four at insert; this pass finds a file
//! changed behind its triggers, and names the first record that does not
//! check. It returns the ledger's head, the chain there, and the rows a
//! restart replays, so the replay need not walk the ledger again.
//!
//! The pass reads and hashes every record: about one and a half times the
//! CPU time of `quick_check` and `foreign_key_check`, which run beside it.
//! So it is cut into ranges of `seq` ([`Cut`]), taken in order by whichever
//! thread is free: the pass's own threads from the start, and the checks'
//! thread once the checks have passed. On two CPUs that keeps both busy to
//! the end; a fixed split into one part per CPU made three threads share
//! two CPUs, and the checks then finished alone, after the parts.
//!
//! Each range starts after the row before it, taking that row's stored hash
//! and time as its previous ones; the range before checks that very row.
//! So every link is checked against the stored hash before it, and the
//! whole chain holds when every range holds. Each thread walks on its own
//! connection inside one read transaction. Ledger rows are never changed,
//! only appended, so connections that began a moment apart see the same
//! rows in every range; the last range is open-ended. The first range that
//! fails names the record, and no range after it is taken.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use mosaic_domain::evidence::EvidenceKind;
use mosaic_domain::Timestamp;
use rusqlite::fallible_streaming_iterator::FallibleStreamingIterator;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, Rows};

use super::chain::{self, Hash, Link};
use super::rows::Table;
use super::verdict::{open_failure, Broken, OpenError, Replayable};
use mosaic_ports::StoreHead;

/// How the pass is cut: into ranges of `rows` ledger rows, walked by
/// `workers` threads of its own and by the checks' thread once it is free.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    workers: usize,
    rows: i64,
}

impl Cut {
    /// Ranges of `rows` rows (at least one), walked by `workers` threads
    /// (at least one) beside the checks.
    pub fn new(workers: usize, rows: i64) -> Cut {
        Cut {
            workers: workers.max(1),
            rows: rows.max(1),
        }
    }

    /// How many threads of its own the pass starts.
    pub(super) fn workers(self) -> usize {
        self.workers
    }

    /// This machine's: a thread per CPU but the one the checks take (one
    /// at least, seven at most), over ranges of [`RANGE_ROWS`].
    pub(super) fn here() -> Cut {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Cut::new(cpus.clamp(2, 8) - 1, RANGE_ROWS)
    }
}

/// Rows per range: about 50 ms of one CPU's work, so the last range to
/// finish holds up little, while its setup (a lookup per typed table) costs
/// nothing that shows. A smaller ledger is one range.
const RANGE_ROWS: i64 = 1 << 16;

/// What the whole pass found.
pub(super) struct Walked {
    /// The newest ledger row's sequence number (0: an empty ledger).
    pub(super) head: i64,
    /// The chain's head there.
    pub(super) chain: StoreHead,
    /// The rows a restart replays, `(seq, at, kind)`, oldest first, until
    /// the first `EvidenceStore::replay` takes them.
    pub(super) replayable: Replayable,
}

/// A pass under way: the ranges not yet taken, and what the taken ones
/// found.
pub(super) struct Pass {
    store_id: String,
    ranges: usize,
    state: Mutex<State>,
}

/// One range: its place in the ledger's order, where it starts, and its
/// last row (`None`: the ledger's end).
type Range = (usize, After, Option<i64>);

struct State {
    todo: VecDeque<Range>,
    found: Vec<(usize, Result<Part, Broken>)>,
    /// When the last range so far was walked.
    ended: Option<Instant>,
}

impl Pass {
    /// Cuts the ledger on `conn` into ranges of `cut`'s size: the store id,
    /// the ledger's size and the row before each range, read in one read
    /// transaction. When a row at a cut is missing or its hash is not a
    /// hash, the pass is one range from the start, which finds why.
    pub(super) fn plan(conn: &Connection, cut: Cut) -> Result<Pass, Broken> {
        let snapshot = conn.unchecked_transaction().map_err(open_failure)?;
        let store_id = store_id(conn)?;
        let size: i64 = conn
            .query_row("SELECT coalesce(max(seq), 0) FROM ledger", [], |r| r.get(0))
            .map_err(open_failure)?;
        let cuts: Option<Vec<After>> = (1..)
            .map(|k| k * cut.rows)
            .take_while(|&seq| seq < size)
            .map(|seq| After::row(conn, seq))
            .collect::<Result<Vec<_>, _>>()
            .map_err(open_failure)?
            .into_iter()
            .collect();
        snapshot.commit().map_err(open_failure)?;
        let starts: Vec<After> = std::iter::once(After::genesis(&store_id))
            .chain(cuts.unwrap_or_default())
            .collect();
        let ends: Vec<Option<i64>> = starts
            .iter()
            .skip(1)
            .map(|start| Some(start.head))
            .chain([None])
            .collect();
        let todo: VecDeque<Range> = starts
            .into_iter()
            .zip(ends)
            .enumerate()
            .map(|(place, (start, end))| (place, start, end))
            .collect();
        Ok(Pass {
            store_id,
            ranges: todo.len(),
            state: Mutex::new(State {
                todo,
                found: Vec::new(),
                ended: None,
            }),
        })
    }

    /// How many ranges the ledger is cut into.
    pub(super) fn ranges(&self) -> usize {
        self.ranges
    }

    /// Walks ranges, in order, until none is left: on one connection from
    /// `connect`, inside one read transaction. A thread that finds none
    /// left opens no connection.
    pub(super) fn work(&self, connect: &(dyn Fn() -> Result<Connection, OpenError> + Sync)) {
        let Some(first) = self.take() else {
            return;
        };
        let reader = connect().and_then(|conn| {
            conn.execute_batch("BEGIN").map_err(open_failure)?;
            Ok(conn)
        });
        let conn = match reader {
            Ok(conn) => conn,
            Err(error) => return self.record(first.0, Err(error.into())),
        };
        let mut next = Some(first);
        while let Some((place, from, end)) = next {
            self.record(place, walk_ledger(&conn, from, end));
            next = self.take();
        }
        // Closing the connection ends its read transaction.
    }

    /// Takes no more ranges: the checks beside the pass failed.
    pub(super) fn stop(&self) {
        self.lock().todo.clear();
    }

    /// The whole pass, once every range is walked, and when its last range
    /// was; the first range that failed names the record.
    pub(super) fn finish(self) -> Result<(Walked, Option<Instant>), Broken> {
        let State {
            mut found, ended, ..
        } = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        found.sort_unstable_by_key(|(place, _)| *place);
        let walked = found.len();
        let mut whole: Option<Part> = None;
        for (_, part) in found {
            let part = part?;
            whole = Some(match whole {
                None => part,
                Some(before) => before.then(part),
            });
        }
        match whole {
            Some(whole) if walked == self.ranges => Ok((whole.walked(self.store_id), ended)),
            _ => Err(
                OpenError::Unavailable("a range of the ledger pass was not walked".into()).into(),
            ),
        }
    }

    fn take(&self) -> Option<Range> {
        self.lock().todo.pop_front()
    }

    /// What the range at `place` found; a failure leaves the ranges after
    /// it untaken.
    fn record(&self, place: usize, part: Result<Part, Broken>) {
        let mut state = self.lock();
        if part.is_err() {
            state.todo.clear();
        }
        state.found.push((place, part));
        state.ended = Some(Instant::now());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Held only to push and pop, so a poisoned state is still whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The store's id, from `meta`: the chain's genesis.
fn store_id(conn: &Connection) -> Result<String, Broken> {
    Ok(conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [mosaic_schema::STORE_ID_KEY],
            |r| r.get(0),
        )
        .optional()
        .map_err(open_failure)?
        .ok_or(OpenError::IntegrityFailed)?)
}

/// Where a walk begins: after the row `head` (0: before the first), whose
/// stored hash and time are `prev` and `at`; `carried` when that row is an
/// `action.allowed` with no row of its own, which the message at the
/// walk's first row carries (the walk before checked that it does).
struct After {
    head: i64,
    prev: Hash,
    at: String,
    carried: bool,
}

impl After {
    fn genesis(store_id: &str) -> After {
        After {
            head: 0,
            prev: chain::genesis(store_id),
            at: String::new(),
            carried: false,
        }
    }

    /// After the ledger row `seq`, as stored; `None` when it is missing or
    /// its hash is not a hash (a walk from the start finds why).
    fn row(conn: &Connection, seq: i64) -> rusqlite::Result<Option<After>> {
        let row = conn
            .query_row(
                "SELECT at, hash, kind = 'action.allowed' AND NOT EXISTS \
                 (SELECT 1 FROM allowances a WHERE a.seq = ledger.seq) FROM ledger WHERE seq = ?1",
                [seq],
                |r| {
                    Ok((
                        r.get::<_, String>(0),
                        r.get::<_, Vec<u8>>(1),
                        r.get::<_, bool>(2),
                    ))
                },
            )
            .optional()?;
        Ok(match row {
            Some((Ok(at), Ok(hash), Ok(carried))) => hash.try_into().ok().map(|prev| After {
                head: seq,
                prev,
                at,
                carried,
            }),
            _ => None,
        })
    }
}

/// What one walk found: its last row, that row's hash, and the rows a
/// restart replays.
struct Part {
    head: i64,
    prev: Hash,
    replayable: Replayable,
}

impl Part {
    /// This part, then `next`, the part just after it.
    fn then(mut self, next: Part) -> Part {
        self.replayable.extend(next.replayable);
        Part {
            head: next.head,
            prev: next.prev,
            replayable: self.replayable,
        }
    }

    fn walked(self, store_id: String) -> Walked {
        Walked {
            head: self.head,
            chain: StoreHead {
                store_id,
                size: u64::try_from(self.head).unwrap_or(0),
                hash: self.prev,
            },
            replayable: self.replayable,
        }
    }
}

/// A walk along one typed table that can look at its next row before
/// taking it: a send's `action.allowed` may be carried by the message
/// after it, so the walk looks at both tables' next rows.
struct Cursor<'s> {
    rows: Rows<'s>,
    /// The row at hand was looked at but not taken.
    held: bool,
}

impl<'s> Cursor<'s> {
    /// The next row, left in place.
    fn peek(&mut self) -> rusqlite::Result<Option<&Row<'s>>> {
        if !self.held {
            self.rows.advance()?;
            self.held = true;
        }
        Ok(self.rows.get())
    }

    /// The next row, taken.
    fn take(&mut self) -> rusqlite::Result<Option<&Row<'s>>> {
        self.peek()?;
        self.held = false;
        Ok(self.rows.get())
    }
}

/// The column of `messages` that says the row carries the `action.allowed`
/// before it, and with which grant.
const ALLOWED_COLUMN: usize = 12;

/// Adds to `link` the `action.allowed` at `seq` that the message `row`
/// carries, as the view `actions_allowed` shows it: every column follows
/// from the message.
fn carried(link: &mut Link, seq: i64, row: &Row<'_>) -> rusqlite::Result<()> {
    let column = |i: usize| row.get_ref(i);
    let to_role = column(5)?;
    let approved = column(ALLOWED_COLUMN)? == ValueRef::Text(b"approved");
    let recipient = to_role != ValueRef::Null;
    link.values(
        Table::ActionsAllowed.name(),
        &[
            ValueRef::Integer(seq),
            column(2)?,
            column(3)?,
            column(4)?,
            ValueRef::Text(b"message.send"),
            if recipient {
                to_role
            } else {
                ValueRef::Text(b"human")
            },
            if approved {
                column(10)?
            } else {
                ValueRef::Null
            },
            if recipient {
                ValueRef::Text(b"role")
            } else {
                ValueRef::Null
            },
            to_role,
        ],
    );
    Ok(())
}

/// The ledger rules over the rows after `from.head`, up to `end`
/// (inclusive; the ledger's end when `None`), inside the caller's read
/// transaction.
fn walk_ledger(conn: &Connection, from: After, end: Option<i64>) -> Result<Part, Broken> {
    let (lo, hi) = (from.head, end.unwrap_or(i64::MAX));
    let range = "WHERE seq > ?1 AND seq <= ?2 ORDER BY seq";
    let mut walks = Table::ALL
        .iter()
        .map(|t| conn.prepare(&format!("SELECT * FROM {} {range}", t.stored())))
        .collect::<Result<Vec<_>, _>>()
        .map_err(open_failure)?;
    // The messages go one row further: an `action.allowed` at the end of
    // the range may be carried by the message just past it.
    let mut typed = walks
        .iter_mut()
        .zip(Table::ALL)
        .map(|(st, table)| {
            let last = match table {
                Table::Messages => hi.saturating_add(1),
                Table::Launches
                | Table::LaunchSwitches
                | Table::Claims
                | Table::Decisions
                | Table::DecisionEvents
                | Table::Consumptions
                | Table::ActionsAllowed
                | Table::Deliveries
                | Table::Reads
                | Table::HumanInputs
                | Table::Observations
                | Table::Refusals
                | Table::RefusalCounts
                | Table::RunEnds => hi,
            };
            st.query([lo, last])
                .map(|rows| Cursor { rows, held: false })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(open_failure)?;
    let mut ledger = conn
        .prepare(&format!(
            "SELECT {}, hash FROM ledger {range}",
            chain::LEDGER_COLUMNS.join(", ")
        ))
        .map_err(open_failure)?;
    let hash_column = chain::LEDGER_COLUMNS.len();
    let mut rows = ledger.query([lo, hi]).map_err(open_failure)?;
    let (mut head, mut last_at, mut prev) = (from.head, from.at, from.prev);
    let mut link = Link::after(&prev);
    let mut replayable = Vec::new();
    // The message that carries the `action.allowed` just walked.
    let mut carrier: Option<i64> = from.carried.then_some(from.head + 1);
    while let Some(row) = rows.next().map_err(open_failure)? {
        let broken = |_| Broken::at(head + 1);
        let seq: i64 = row.get(0).map_err(broken)?;
        let at = row
            .get_ref(1)
            .and_then(|v| Ok(v.as_str()?))
            .map_err(broken)?;
        let kind = row
            .get_ref(2)
            .and_then(|v| Ok(v.as_str()?))
            .map_err(broken)?;
        let kind = EvidenceKind::parse(kind).ok_or(Broken::at(seq))?;
        let table = Table::of(kind);
        if seq != head + 1 || Timestamp::parse(at).is_err() || at <= last_at.as_str() {
            return Err(Broken::at(seq));
        }
        link.restart(&prev);
        link.stored("ledger", row, hash_column).map_err(broken)?;
        let carried_here = carrier.take() == Some(seq);
        let own = typed[table as usize].peek().map_err(open_failure)?;
        if own
            .map(|r| r.get::<_, i64>(0))
            .transpose()
            .map_err(broken)?
            == Some(seq)
        {
            let typed_row = typed[table as usize]
                .take()
                .map_err(open_failure)?
                .ok_or(Broken::at(seq))?;
            let carries = kind == EvidenceKind::MessageSent
                && typed_row.get_ref(ALLOWED_COLUMN).map_err(broken)? != ValueRef::Null;
            if carries != carried_here {
                return Err(Broken::at(seq));
            }
            let columns = typed_row.as_ref().column_count();
            link.stored(table.name(), typed_row, columns)
                .map_err(broken)?;
        } else if kind == EvidenceKind::ActionAllowed && !carried_here {
            // No row of its own: the message right after it must carry it.
            let message = typed[Table::Messages as usize]
                .peek()
                .map_err(open_failure)?
                .ok_or(Broken::at(seq))?;
            let next: i64 = message.get(0).map_err(broken)?;
            if next != seq + 1 || message.get_ref(ALLOWED_COLUMN).map_err(broken)? == ValueRef::Null
            {
                return Err(Broken::at(seq));
            }
            carried(&mut link, seq, message).map_err(broken)?;
            carrier = Some(next);
        } else {
            return Err(Broken::at(seq));
        }
        let hash = link.finish();
        if row.get_ref(hash_column).map_err(broken)? != ValueRef::Blob(&hash) {
            return Err(Broken::at(seq));
        }
        prev = hash;
        if kind.is_machine_state() {
            replayable.push((seq, at.to_owned(), kind.as_str().to_owned()));
        }
        at.clone_into(&mut last_at);
        head = seq;
    }
    // A range that ends before its end misses the row after its head; a
    // carried record at the ledger's end misses its message. One at the
    // range's end was checked against the message after it, which the next
    // range walks.
    if end.is_some_and(|end| head != end) || (end.is_none() && carrier.is_some()) {
        return Err(Broken::at(head + 1));
    }
    if let Some(next) = carrier {
        typed[Table::Messages as usize]
            .take()
            .map_err(open_failure)?
            .filter(|row| row.get::<_, i64>(0).ok() == Some(next))
            .ok_or(Broken::at(head))?;
    }
    // A typed row left over stands past the ledger or at another kind's place.
    for (rows, table) in typed.iter_mut().zip(Table::ALL) {
        if let Some(row) = rows.peek().map_err(open_failure)? {
            let seq = row.get(0).unwrap_or(head + 1);
            // The message past a range's end is the next range's.
            if !(table == Table::Messages && end.is_some_and(|end| seq == end + 1)) {
                return Err(Broken::at(seq));
            }
        }
    }
    Ok(Part {
        head,
        prev,
        replayable,
    })
}
