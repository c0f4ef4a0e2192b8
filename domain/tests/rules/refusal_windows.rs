//! Refusal windows (`mosaic_domain::refusal_counts`) as the runtime drives
//! them: a broker that writes no refusal rows counts every refusal, and a
//! window's count is every refusal it counted, whichever batch counted it.

use mosaic_domain::evidence::{RefusalCount, RefusalRecord};
use mosaic_domain::refusal_counts::{RefusalWindows, Tally, CALLER_ROWS_PER_WINDOW, WINDOW};
use mosaic_domain::*;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(1_700_000_000_000 + ms).unwrap()
}

/// A failed human proof: nobody is known.
fn nobody() -> RefusalRecord {
    RefusalRecord {
        business: None,
        agent: None,
        verb: Some("inbox".into()),
        refusal: Refusal::HumanProofFailed,
    }
}

/// A reader of acme refused a write.
fn reader() -> RefusalRecord {
    RefusalRecord {
        business: Some(BusinessId::parse("acme").unwrap()),
        agent: None,
        verb: Some("message.send".into()),
        refusal: Refusal::NotAuthorized,
    }
}

fn counted(refused: RefusalRecord, since: i64, count: u64) -> RefusalCount {
    RefusalCount {
        refused,
        since: at(since),
        count,
    }
}

/// The window's length in milliseconds.
fn window_ms() -> i64 {
    i64::try_from(WINDOW.as_millis()).unwrap()
}

#[test]
fn a_broker_writing_no_rows_counts_even_the_first_refusal_of_a_window() {
    let mut windows = RefusalWindows::default();
    for ms in [0, 1, 2] {
        windows.count(at(ms), &nobody());
    }
    for ms in 0..5 {
        windows.count(at(ms), &reader());
    }
    windows.committed(true);
    assert!(!windows.is_idle(), "counts wait to be written");
    assert_eq!(windows.close(at(window_ms() - 1)), vec![], "not over yet");
    let mut counts = windows.close(at(window_ms() + 4));
    counts.sort_by_key(|c| c.count);
    assert_eq!(
        counts,
        vec![counted(nobody(), 0, 3), counted(reader(), 0, 5)]
    );
    assert!(windows.is_idle());
}

#[test]
fn counting_without_a_row_leaves_the_window_s_rows_to_the_refusals_written() {
    let mut windows = RefusalWindows::default();
    // Rows were not written while the disk was full; once it has room
    // again, the same window still writes its first refusals as rows.
    for _ in 0..25 {
        windows.count(at(0), &reader());
    }
    let rows = (0..25)
        .filter(|_| windows.tally(at(10), &reader()) == Tally::Row)
        .count();
    assert_eq!(rows, CALLER_ROWS_PER_WINDOW as usize);
    windows.committed(true);
    assert_eq!(
        windows.close_all(),
        vec![counted(
            reader(),
            0,
            25 + 25 - u64::from(CALLER_ROWS_PER_WINDOW)
        )]
    );
}

#[test]
fn a_counted_refusal_of_a_failed_batch_is_forgotten() {
    let mut windows = RefusalWindows::default();
    windows.count(at(0), &nobody());
    windows.committed(true);
    windows.count(at(1), &nobody());
    windows.count(at(2), &nobody());
    windows.committed(false);
    assert_eq!(windows.close(at(3)), vec![counted(nobody(), 0, 1)]);
    assert!(windows.is_idle());
}

#[test]
fn a_window_closed_by_a_late_refusal_counts_its_committed_and_its_batch_s_refusals() {
    let mut windows = RefusalWindows::default();
    assert_eq!(windows.tally(at(0), &nobody()), Tally::Row);
    assert_eq!(windows.tally(at(1), &nobody()), Tally::Counted);
    windows.committed(true);
    // One batch counts one more in the window and then meets a refusal
    // past it: the window closes with both of its counts.
    assert_eq!(windows.tally(at(2), &nobody()), Tally::Counted);
    let late = window_ms() + 500;
    assert_eq!(windows.tally(at(late), &nobody()), Tally::Row);
    windows.committed(true);
    assert_eq!(windows.close(at(late)), vec![counted(nobody(), 0, 2)]);
    // The new window holds one row and no count: nothing to write.
    assert_eq!(windows.close_all(), vec![]);
    assert!(windows.is_idle());
}

#[test]
fn a_window_of_rows_only_writes_no_count() {
    let mut windows = RefusalWindows::default();
    for ms in 0..i64::from(CALLER_ROWS_PER_WINDOW) {
        assert_eq!(windows.tally(at(ms), &reader()), Tally::Row);
    }
    windows.committed(true);
    assert_eq!(windows.close(at(window_ms() * 3)), vec![]);
    assert!(windows.is_idle(), "the window closed without a count");
}
