//! Time as people state it: the local date, weekday and time of day of an instant in a named IANA time zone, weekly
//! calendars in local wall-clock time with holidays, and the duration between two timestamps.
//!
//! The compiler looks a zone up once, in the IANA time zone database compiled into it ([`zone`]), and cuts from it a
//! [`ZoneTable`]: the zone's UTC offsets over a window of instants (the mandate's validity). The decision module
//! carries that table ([`ZoneTable::encode`]; crates/remit-rt/src/time.rs decodes it) and reads local time from it
//! with integer arithmetic: no clock, no time zone import, and the same answer in every runtime. An instant outside
//! the table's window has no local time here: whatever needs it is unevaluable, and the decision fails closed.
//!
//! Everything below works on whole seconds of local time: a fraction of a second never changes a date, a weekday,
//! or a comparison with a calendar's whole minutes.
//!
//! Must not depend on: the machine's zone files (/usr/share/zoneinfo), its clock or its time zone setting; the
//! language's syntax, checker or interpreter (they depend on this, not the other way round).

mod calendar;
mod zone;

pub use calendar::{parse_clock, Calendar, CalendarError, DateRange, DatedInterval, WeeklyInterval, MINUTES_PER_DAY};
pub use zone::{
    tzdb_version, zone_names, Segment, ZoneError, ZoneTable, DEFAULT_FROM, DEFAULT_UNTIL, MAX_OFFSET_SECONDS,
};

use std::fmt;

/// Nanoseconds in a second (`ir::Value::Timestamp` counts nanoseconds since the Unix epoch).
pub const NANOS_PER_SECOND: i128 = 1_000_000_000;
/// Seconds in a day of local wall-clock time (zones in the tzdb have no leap seconds: POSIX time).
pub const SECONDS_PER_DAY: i64 = 86_400;

/// Why a time condition cannot be decided; the decision fails closed and names the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeError {
    /// The instant lies outside the window the zone table carries, so its local time is unknown here.
    OutsideTable,
    /// The calendar is closed on holidays and no holiday data was supplied.
    HolidaysMissing,
    /// The zone table is for another zone than the calendar's (a compiler bug, not a request's fault).
    ZoneMismatch,
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeError::OutsideTable => "the instant is outside the time zone window the policy carries",
            TimeError::HolidaysMissing => "the calendar is closed on holidays and no holidays were supplied",
            TimeError::ZoneMismatch => "the zone table is not the calendar's zone",
        })
    }
}

impl std::error::Error for TimeError {}

/// A day of the week, Monday first (ISO 8601): the order of `mon..fri`, and the byte in the encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Weekday {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Weekday {
    pub const ALL: [Weekday; 7] = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];

    /// 0 for Monday … 6 for Sunday.
    pub fn index(self) -> u8 {
        self as u8
    }

    pub fn from_index(index: u8) -> Option<Weekday> {
        Weekday::ALL.get(usize::from(index)).copied()
    }

    /// The weekday of a day number (days since 1970-01-01, a Thursday).
    pub fn of_day(day_number: i64) -> Weekday {
        // 1970-01-01 is index 3; the index is in 0..=6, and nothing overflows.
        Weekday::ALL[((day_number.rem_euclid(7) + 3) % 7) as usize]
    }

    /// The next day, Sunday followed by Monday.
    pub fn next(self) -> Weekday {
        Weekday::ALL[(usize::from(self.index()) + 1) % 7]
    }

    /// The days from `self` to `last`, both included, wrapping past Sunday: `mon..fri` is five days, `fri..mon`
    /// four, `wed..wed` one.
    pub fn through(self, last: Weekday) -> Vec<Weekday> {
        let mut days = vec![self];
        let mut day = self;
        while day != last {
            day = day.next();
            days.push(day);
        }
        days
    }

    /// The three-letter name a policy writes: `mon` … `sun`.
    pub fn short_name(self) -> &'static str {
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][usize::from(self.index())]
    }

    pub fn from_short_name(name: &str) -> Option<Weekday> {
        Weekday::ALL.into_iter().find(|d| d.short_name() == name)
    }
}

/// A date on the proleptic Gregorian calendar, without a zone: a holiday, or the local date of an instant.
/// Ordered chronologically (year, then month, then day), so a sorted list of holidays can be searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalDate {
    pub year: i32,
    pub month: u8,
    pub day: u8,
}

impl LocalDate {
    /// A real calendar date, or `None`.
    pub fn new(year: i32, month: u8, day: u8) -> Option<LocalDate> {
        let valid = (1..=12).contains(&month) && day >= 1 && i64::from(day) <= days_in_month(year.into(), month.into());
        valid.then_some(LocalDate { year, month, day })
    }

    /// `YYYY-MM-DD` (four-digit year), as holiday data sets write dates; the twin is `remit_rt::time::parse_date`.
    pub fn parse(text: &str) -> Option<LocalDate> {
        let bytes = text.as_bytes();
        if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
            return None;
        }
        let number = |range: std::ops::Range<usize>| -> Option<u32> {
            let digits = &bytes[range];
            digits.iter().all(u8::is_ascii_digit).then(|| digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
        };
        LocalDate::new(number(0..4)? as i32, number(5..7)? as u8, number(8..10)? as u8)
    }

    /// Days since 1970-01-01 (negative before it): the form the runtime compares holidays in.
    pub fn day_number(self) -> i64 {
        days_from_civil(self.year.into(), self.month.into(), self.day.into())
    }

    /// The date `day_number` days after 1970-01-01, or `None` when its year is past `i32`.
    pub fn from_day_number(day_number: i64) -> Option<LocalDate> {
        // Past ±2^40 days the year is far past i32; below, civil_from_days cannot overflow.
        if day_number.unsigned_abs() > 1 << 40 {
            return None;
        }
        let (year, month, day) = civil_from_days(day_number);
        Some(LocalDate { year: i32::try_from(year).ok()?, month: month as u8, day: day as u8 })
    }

    pub fn weekday(self) -> Weekday {
        Weekday::of_day(self.day_number())
    }
}

impl fmt::Display for LocalDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// What an instant reads on the wall clocks of a zone: its local date, weekday and second of the day (0..86_399),
/// and the UTC offset in force. During a repeated hour (fall back) two instants read the same; a skipped hour
/// (spring forward) is read by none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocalParts {
    pub date: LocalDate,
    pub weekday: Weekday,
    pub second_of_day: u32,
    pub offset_seconds: i32,
}

impl LocalParts {
    /// The local wall-clock reading of `unix_seconds` under `offset_seconds`.
    pub fn at(unix_seconds: i64, offset_seconds: i32) -> Option<LocalParts> {
        let local = unix_seconds.checked_add(offset_seconds.into())?;
        let day_number = local.div_euclid(SECONDS_PER_DAY);
        Some(LocalParts {
            date: LocalDate::from_day_number(day_number)?,
            weekday: Weekday::of_day(day_number),
            second_of_day: local.rem_euclid(SECONDS_PER_DAY) as u32,
            offset_seconds,
        })
    }

    /// Minutes since local midnight (0..1439): what a calendar's intervals are written in.
    pub fn minute_of_day(&self) -> u16 {
        (self.second_of_day / 60) as u16
    }
}

/// Whole seconds since the Unix epoch of an instant in nanoseconds (rounded down, so an instant a fraction before a
/// second reads the second before), or `None` past `i64`.
pub fn unix_seconds(instant_nanos: i128) -> Option<i64> {
    i64::try_from(instant_nanos.div_euclid(NANOS_PER_SECOND)).ok()
}

/// `end - start` in nanoseconds (the duration a policy compares with `<= 1h`), or `None` when it does not fit in an
/// `i64` (about ±292 years): the comparison is then unevaluable and fails closed, never wraps or saturates into a
/// plausible answer. The twin is `remit_rt::time::nanos_between`.
pub fn nanos_between(start: i128, end: i128) -> Option<i64> {
    i64::try_from(end.checked_sub(start)?).ok()
}

/// How a duration in nanoseconds compares with a policy's duration in whole seconds (`ir::Value::Duration`),
/// exactly: `nanos_between` keeps fractions, so `end - start <= 1h` is false for one hour and one nanosecond.
pub fn compare_nanos_to_seconds(nanos: i64, seconds: i64) -> std::cmp::Ordering {
    i128::from(nanos).cmp(&(i128::from(seconds) * NANOS_PER_SECOND))
}

// The civil calendar (Howard Hinnant's algorithms over the proleptic Gregorian calendar) is the one
// `value.rs` parses and prints timestamps with: one implementation, so a date here and a timestamp there agree.
use crate::value::{civil_from_days, days_from_civil, days_in_month};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_weekdays() {
        assert_eq!(Weekday::of_day(0), Weekday::Thursday);
        assert_eq!(Weekday::of_day(-1), Weekday::Wednesday);
        assert_eq!(Weekday::of_day(4), Weekday::Monday);
        assert_eq!(Weekday::of_day(i64::MAX), Weekday::of_day(i64::MAX % 7));
        let christmas = LocalDate::parse("2026-12-25").unwrap();
        assert_eq!(christmas.weekday(), Weekday::Friday);
        assert_eq!(LocalDate::from_day_number(christmas.day_number()), Some(christmas));
        assert_eq!(christmas.to_string(), "2026-12-25");
        for bad in ["2026-02-29", "2026-13-01", "2026-00-10", "2026-1-01", "20261-01-0", "2026-12-25 ", "+026-12-25"] {
            assert_eq!(LocalDate::parse(bad), None, "{bad}");
        }
        assert_eq!(LocalDate::parse("2024-02-29").map(|d| d.day), Some(29));
        for day in -800_000..800_000 {
            let date = LocalDate::from_day_number(day).unwrap();
            assert_eq!(date.day_number(), day);
        }
        assert_eq!(LocalDate::from_day_number(i64::MAX), None);
        assert_eq!(LocalDate::from_day_number(i64::MIN), None);
        assert_eq!(Weekday::from_short_name("sat"), Some(Weekday::Saturday));
        assert_eq!(Weekday::Sunday.next(), Weekday::Monday);
        assert_eq!(Weekday::Monday.through(Weekday::Friday).len(), 5);
        assert_eq!(
            Weekday::Friday.through(Weekday::Monday),
            [Weekday::Friday, Weekday::Saturday, Weekday::Sunday, Weekday::Monday]
        );
        assert_eq!(Weekday::Wednesday.through(Weekday::Wednesday), [Weekday::Wednesday]);
    }

    #[test]
    fn local_parts_read_the_wall_clock() {
        // 2021-03-28T01:30:00Z in Berlin (CEST, +2): 03:30 on a Sunday.
        let parts = LocalParts::at(1_616_895_000, 7200).unwrap();
        assert_eq!(parts.date, LocalDate::new(2021, 3, 28).unwrap());
        assert_eq!((parts.weekday, parts.second_of_day), (Weekday::Sunday, 3 * 3600 + 30 * 60));
        assert_eq!(LocalParts::at(i64::MAX, 1), None);
    }

    #[test]
    fn durations_fail_closed() {
        assert_eq!(nanos_between(10, 3), Some(-7));
        assert_eq!(nanos_between(0, i128::from(i64::MAX) + 1), None);
        assert_eq!(nanos_between(i128::MIN, 1), None);
        let hour = 3_600 * 1_000_000_000;
        assert_eq!(compare_nanos_to_seconds(hour, 3600), std::cmp::Ordering::Equal);
        assert_eq!(compare_nanos_to_seconds(hour + 1, 3600), std::cmp::Ordering::Greater);
        assert_eq!(unix_seconds(-1), Some(-1));
        assert_eq!(unix_seconds(i128::MAX), None);
    }
}
