//! Broker time: millisecond UTC timestamps, calendar dates and the clock rule.
//!
//! The domain never reads a clock. `now` arrives as an input and
//! [`BrokerClock::stamp`] turns it into a write time that is strictly later
//! than every earlier write, also across a reopen (the last stored timestamp is
//! an input too).

use std::fmt;
use std::time::Duration;

use crate::Refusal;

/// Milliseconds per day.
const DAY_MS: i64 = 86_400_000;
/// The last millisecond of 9999-12-31, the largest time the text form holds.
const MAX_MS: i64 = 253_402_300_799_999;

/// A UTC instant with millisecond precision, between 1970-01-01 and 9999-12-31.
///
/// Its only text form is `YYYY-MM-DDTHH:mm:ss.sssZ`, SQLite's canonical
/// millisecond form; [`Timestamp::parse`] accepts nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch, 1970-01-01T00:00:00.000Z.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The last representable instant, 9999-12-31T23:59:59.999Z.
    pub const MAX: Timestamp = Timestamp(MAX_MS);

    /// Builds a timestamp from milliseconds since the Unix epoch.
    ///
    /// # Errors
    /// `bad-timestamp` when the instant is before 1970 or after 9999.
    pub fn from_unix_ms(ms: i64) -> Result<Self, Refusal> {
        if (0..=MAX_MS).contains(&ms) {
            Ok(Self(ms))
        } else {
            Err(Refusal::BadTimestamp)
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_ms(self) -> i64 {
        self.0
    }

    /// This instant plus `d`, saturating at the largest representable time.
    pub fn saturating_add(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(ms).min(MAX_MS))
    }

    /// The calendar date (UTC) this instant falls on.
    pub fn date(self) -> Date {
        Date(self.0.div_euclid(DAY_MS))
    }

    /// Parses the canonical form `YYYY-MM-DDTHH:mm:ss.sssZ` and nothing else.
    ///
    /// # Errors
    /// `bad-timestamp` for any other text, including out-of-range fields.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        let b = text.as_bytes();
        if b.len() != 24
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'.'
            || b[23] != b'Z'
        {
            return Err(Refusal::BadTimestamp);
        }
        let date = Date::parse(&text[..10]).map_err(|_| Refusal::BadTimestamp)?;
        let hour = digits(&b[11..13]).ok_or(Refusal::BadTimestamp)?;
        let minute = digits(&b[14..16]).ok_or(Refusal::BadTimestamp)?;
        let second = digits(&b[17..19]).ok_or(Refusal::BadTimestamp)?;
        let milli = digits(&b[20..23]).ok_or(Refusal::BadTimestamp)?;
        if hour > 23 || minute > 59 || second > 59 {
            return Err(Refusal::BadTimestamp);
        }
        let ms = date.0 * DAY_MS + ((hour * 60 + minute) * 60 + second) * 1000 + milli;
        Self::from_unix_ms(ms)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let in_day = self.0.rem_euclid(DAY_MS);
        let (h, m) = (in_day / 3_600_000, in_day / 60_000 % 60);
        let (s, ms) = (in_day / 1000 % 60, in_day % 1000);
        write!(f, "{}T{h:02}:{m:02}:{s:02}.{ms:03}Z", self.date())
    }
}

/// A UTC calendar date between 1970-01-01 and 9999-12-31, text form `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(i64);

impl Date {
    /// Parses strict `YYYY-MM-DD` with a real calendar day.
    ///
    /// # Errors
    /// `bad-date` for any other text.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        let b = text.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(Refusal::BadDate);
        }
        let year = digits(&b[0..4]).ok_or(Refusal::BadDate)?;
        let month = digits(&b[5..7]).ok_or(Refusal::BadDate)?;
        let day = digits(&b[8..10]).ok_or(Refusal::BadDate)?;
        if year < 1970 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month)
        {
            return Err(Refusal::BadDate);
        }
        Ok(Self(days_from_civil(year, month, day)))
    }

    /// The first millisecond of this date, midnight UTC.
    pub fn midnight(self) -> Timestamp {
        Timestamp(self.0 * DAY_MS)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days(self.0);
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// The broker clock rule: every write gets `max(now, last + 1 ms)`.
///
/// `last` starts as the newest timestamp already stored, so write times stay
/// strictly increasing across every write and every reopen, even when the wall
/// clock steps back. During bursts they may run slightly ahead of wall time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerClock {
    last: Option<Timestamp>,
}

impl BrokerClock {
    /// A clock that continues after `last`, the newest stored write time.
    pub fn resume(last: Option<Timestamp>) -> Self {
        Self { last }
    }

    /// The newest write time handed out.
    pub fn last(&self) -> Option<Timestamp> {
        self.last
    }

    /// The write time for the next write, given the wall clock's `now`.
    pub fn stamp(&mut self, now: Timestamp) -> Timestamp {
        let at = match self.last {
            Some(last) => now.max(Timestamp((last.0 + 1).min(MAX_MS))),
            None => now,
        };
        self.last = Some(at);
        at
    }
}

fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_round_trips() {
        for text in [
            "1970-01-01T00:00:00.000Z",
            "2000-02-29T23:59:59.999Z",
            "2026-11-30T04:18:47.120Z",
            "9999-12-31T23:59:59.999Z",
        ] {
            assert_eq!(Timestamp::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn non_canonical_text_is_refused() {
        for text in [
            "2026-11-30T04:18:47.12Z",
            "2026-11-30T04:18:47.120",
            "2026-11-30 04:18:47.120Z",
            "2026-11-30T04:18:47.120+00:00",
            "2026-02-29T00:00:00.000Z",
            "2026-13-01T00:00:00.000Z",
            "2026-11-31T00:00:00.000Z",
            "2026-11-30T24:00:00.000Z",
            "2026-11-30T23:60:00.000Z",
            "2026-11-30T23:59:60.000Z",
            "1969-12-31T23:59:59.999Z",
            "+026-11-30T04:18:47.120Z",
            "2026-11-30T04:18:47.1٢0Z",
        ] {
            assert_eq!(Timestamp::parse(text), Err(Refusal::BadTimestamp), "{text}");
        }
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        let start = Date::parse("1970-01-01").unwrap().0;
        let end = Date::parse("2400-03-01").unwrap().0;
        for day in start..=end {
            let text = Date(day).to_string();
            assert_eq!(Date::parse(&text), Ok(Date(day)), "{text}");
        }
    }

    #[test]
    fn clock_is_strictly_monotonic_when_the_wall_clock_steps_back() {
        let t = |ms| Timestamp::from_unix_ms(ms).unwrap();
        let mut clock = BrokerClock::resume(Some(t(1_000)));
        assert_eq!(clock.stamp(t(500)), t(1_001));
        assert_eq!(clock.stamp(t(1_001)), t(1_002));
        assert_eq!(clock.stamp(t(5_000)), t(5_000));
        assert_eq!(clock.stamp(t(5_000)), t(5_001));
        assert_eq!(BrokerClock::resume(None).stamp(t(7)), t(7));
    }

    #[test]
    fn every_separator_and_digit_is_checked_on_its_own() {
        for text in [
            "2026-11-30X04:18:47.120Z",
            "2026-11-30T04-18:47.120Z",
            "2026-11-30T04:18-47.120Z",
            "2026-11-30T04:18:47,120Z",
            "2026-11-30T04:18:47.120z",
            "2026/11-30T04:18:47.120Z",
            "2026-11/30T04:18:47.120Z",
            "20a6-11-30T04:18:47.120Z",
            "2026-1a-30T04:18:47.120Z",
            "2026-11-3aT04:18:47.120Z",
            "2026-11-30T0a:18:47.120Z",
            "2026-11-30T04:1a:47.120Z",
            "2026-11-30T04:18:4a.120Z",
            "2026-11-30T04:18:47.12aZ",
        ] {
            assert_eq!(Timestamp::parse(text), Err(Refusal::BadTimestamp), "{text}");
        }
    }

    #[test]
    fn a_timestamp_counts_milliseconds_from_the_epoch() {
        let parse = |text| Timestamp::parse(text).unwrap().unix_ms();
        assert_eq!(parse("1970-01-01T00:00:00.000Z"), 0);
        assert_eq!(parse("1970-01-01T00:00:00.001Z"), 1);
        assert_eq!(parse("1970-01-01T00:00:01.000Z"), 1_000);
        assert_eq!(parse("1970-01-01T00:01:00.000Z"), 60_000);
        assert_eq!(parse("1970-01-01T01:00:00.000Z"), 3_600_000);
        assert_eq!(parse("1970-01-02T00:00:00.000Z"), DAY_MS);
        assert_eq!(parse("1970-01-02T03:04:05.006Z"), DAY_MS + 11_045_006);
        assert_eq!(parse("2000-03-01T00:00:00.000Z"), 11_017 * DAY_MS);
        assert_eq!(parse("9999-12-31T23:59:59.999Z"), MAX_MS);
        let text = |ms| Timestamp::from_unix_ms(ms).unwrap().to_string();
        assert_eq!(text(DAY_MS + 11_045_006), "1970-01-02T03:04:05.006Z");
        assert_eq!(text(DAY_MS - 1), "1970-01-01T23:59:59.999Z");
        assert_eq!(text(1_764_476_327_120), "2025-11-30T04:18:47.120Z");
    }

    #[test]
    fn only_1970_to_9999_is_representable() {
        assert_eq!(Timestamp::from_unix_ms(-1), Err(Refusal::BadTimestamp));
        assert_eq!(Timestamp::from_unix_ms(0), Ok(Timestamp::EPOCH));
        assert_eq!(Timestamp::from_unix_ms(MAX_MS), Ok(Timestamp::MAX));
        assert_eq!(
            Timestamp::from_unix_ms(MAX_MS + 1),
            Err(Refusal::BadTimestamp)
        );
        assert_eq!(Timestamp::MAX.unix_ms(), MAX_MS);
        let second = Duration::from_millis(1_500);
        assert_eq!(Timestamp::EPOCH.saturating_add(second).unix_ms(), 1_500);
        assert_eq!(Timestamp::MAX.saturating_add(second), Timestamp::MAX);
        assert_eq!(
            Timestamp::EPOCH.saturating_add(Duration::MAX),
            Timestamp::MAX
        );
    }

    #[test]
    fn an_instant_falls_on_its_utc_date_and_a_date_starts_at_midnight() {
        let at = |ms| Timestamp::from_unix_ms(ms).unwrap();
        let date = |text| Date::parse(text).unwrap();
        assert_eq!(at(0).date(), date("1970-01-01"));
        assert_eq!(at(DAY_MS - 1).date(), date("1970-01-01"));
        assert_eq!(at(DAY_MS).date(), date("1970-01-02"));
        assert_eq!(at(MAX_MS).date(), date("9999-12-31"));
        assert_eq!(date("1970-01-02").midnight(), at(DAY_MS));
        assert_eq!(date("2000-03-01").midnight(), at(11_017 * DAY_MS));
        assert_eq!(date("9999-12-31").midnight(), at(MAX_MS + 1 - DAY_MS));
        assert_eq!(date("2000-03-01").to_string(), "2000-03-01");
    }

    #[test]
    fn months_have_their_calendar_length_and_february_follows_the_leap_rule() {
        for month in [1, 3, 5, 7, 8, 10, 12] {
            assert_eq!(days_in_month(2026, month), 31, "{month}");
        }
        for month in [4, 6, 9, 11] {
            assert_eq!(days_in_month(2026, month), 30, "{month}");
        }
        for (year, days) in [
            (2026, 28),
            (2024, 29),
            (2000, 29),
            (2100, 28),
            (1900, 28),
            (2400, 29),
        ] {
            assert_eq!(days_in_month(year, 2), days, "{year}");
        }
        for text in [
            "2026-04-31",
            "2026-06-31",
            "2026-09-31",
            "2026-11-31",
            "2026-01-32",
            "2026-12-32",
            "2026-02-29",
            "2100-02-29",
            "2024-02-30",
            "2026-01-00",
            "2026-00-10",
            "2026-13-10",
            "1969-12-31",
            "2026-1-30",
            "2026/01-30",
            "2026-01/30",
            "20a6-01-30",
            "2026-0a-30",
            "2026-01-3a",
        ] {
            assert_eq!(Date::parse(text), Err(Refusal::BadDate), "{text}");
        }
        for text in [
            "2024-02-29",
            "2000-02-29",
            "2400-02-29",
            "2026-12-31",
            "2026-04-30",
        ] {
            assert_eq!(
                Date::parse(text).map(|d| d.to_string()).as_deref(),
                Ok(text)
            );
        }
    }

    #[test]
    fn the_clock_never_passes_the_last_representable_instant() {
        let mut clock = BrokerClock::resume(Some(Timestamp::MAX));
        assert_eq!(clock.stamp(Timestamp::EPOCH), Timestamp::MAX);
        assert_eq!(clock.last(), Some(Timestamp::MAX));
        let mut fresh = BrokerClock::resume(None);
        assert_eq!(fresh.last(), None);
        let t = Timestamp::from_unix_ms(9).unwrap();
        fresh.stamp(t);
        assert_eq!(fresh.last(), Some(t));
    }
}
