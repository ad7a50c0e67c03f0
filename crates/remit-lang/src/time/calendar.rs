//! Calendars: weekly opening intervals in a zone's local wall-clock time, optionally closed on holidays
//! (`calendar business_hours in "Europe/Berlin" { mon..fri 09:00-17:00 }`), and whether an instant is in one.
//!
//! **What a person means, and so what this means.** An interval is about the time the clocks on the wall show, and
//! an instant is in it when the zone's clocks read, at that instant, a weekday and a time inside it (start
//! included, end excluded: 17:00:00 is closed). Daylight-saving changes follow from that, with no special case:
//! - *the hour that does not exist* (spring forward, e.g. Berlin's 02:00-03:00 on the last Sunday of March): no
//!   instant reads 02:30 that day, so an interval `02:00-03:00` holds no instant that day and `01:00-04:00` holds
//!   two hours of real time, not three; nothing is shifted into the gap or out of it;
//! - *the hour that happens twice* (fall back, e.g. Berlin's 02:00-03:00 on the last Sunday of October): both
//!   instants that read 02:30 (one in summer time, one in winter time) are in an interval that holds 02:30, so
//!   `02:00-03:00` holds two hours of real time that day.
//!
//! So an interval's real length changes on the days the clocks change, as the opening hours of a shop do.
//!
//! **Midnight.** `24:00` may end an interval (`20:00-24:00`: until the end of the day); an interval whose end is
//! not after its start crosses midnight and is split there (`fri 22:00-02:00` is `fri 22:00-24:00` and `sat
//! 00:00-02:00`), so every interval lies within one local day. With [`Calendar::closed_on_holidays`], an instant
//! whose own local date is a holiday is outside the calendar: the part of `fri 22:00-02:00` after midnight is
//! closed when the Saturday is a holiday, whatever the Friday is.
//!
//! **Dates.** A calendar may also open on local dates (`2026-12-24 09:00-12:00`, `2026-12-27..2027-01-03
//! 10:00-14:00`: every date of the range, both ends included), read like a weekday line on those dates only, and
//! close on local dates (`closed on 2026-12-25, 2026-12-31..2027-01-01`). An instant is in the calendar when its
//! reading falls in a weekday line's or a dated line's hours and its own local date is neither closed nor a holiday:
//! a closure wins over every opening, dated or not. A dated line's hours that cross midnight go on into the day after
//! each of its dates, as a weekday line's do (`2026-12-31 22:00-02:00` holds 2027-01-01 01:00), and so a closure of
//! that next day closes them.
//!
//! Holidays are local dates (in the calendar's zone) supplied at decision time, as a data set: the module carries no
//! list. A calendar closed on holidays without that data is unevaluable, whatever the instant (the data's absence
//! is a configuration fault, reported the same way at every hour).

use std::fmt;

use super::{LocalDate, LocalParts, TimeError, Weekday, ZoneTable};

/// Minutes in a local day: an interval's end may be this (`24:00`).
pub const MINUTES_PER_DAY: u16 = 1440;

/// Minutes since midnight of a time a calendar writes, `HH:MM` (two digits each, `00:00` to `23:59`, and `24:00`
/// for the end of the day), or `None`.
pub fn parse_clock(text: &str) -> Option<u16> {
    let bytes = text.as_bytes();
    if bytes.len() != 5 || bytes[2] != b':' || ![0, 1, 3, 4].iter().all(|&i| bytes[i].is_ascii_digit()) {
        return None;
    }
    let digit = |i: usize| u16::from(bytes[i] - b'0');
    let (hours, minutes) = (digit(0) * 10 + digit(1), digit(3) * 10 + digit(4));
    match (hours, minutes) {
        (0..=23, 0..=59) | (24, 0) => Some(hours * 60 + minutes),
        _ => None,
    }
}

/// `[start_minute, end_minute)` on `weekday`, in minutes since local midnight; `start_minute < end_minute <=`
/// [`MINUTES_PER_DAY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WeeklyInterval {
    pub weekday: Weekday,
    pub start_minute: u16,
    pub end_minute: u16,
}

impl WeeklyInterval {
    fn holds(&self, weekday: Weekday, minute: u16) -> bool {
        self.weekday == weekday && self.start_minute <= minute && minute < self.end_minute
    }
}

impl fmt::Display for WeeklyInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hm = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
        write!(f, "{} {}-{}", self.weekday.short_name(), hm(self.start_minute), hm(self.end_minute))
    }
}

/// `[start_minute, end_minute)` on every local date from `first` to `last` (both included); `start_minute <
/// end_minute <=` [`MINUTES_PER_DAY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DatedInterval {
    pub first: LocalDate,
    pub last: LocalDate,
    pub start_minute: u16,
    pub end_minute: u16,
}

impl DatedInterval {
    fn holds(&self, date: LocalDate, minute: u16) -> bool {
        self.first <= date && date <= self.last && self.start_minute <= minute && minute < self.end_minute
    }
}

impl fmt::Display for DatedInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hm = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
        write!(
            f,
            "{} {}-{}",
            DateRange { first: self.first, last: self.last },
            hm(self.start_minute),
            hm(self.end_minute)
        )
    }
}

/// The local dates from `first` to `last`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateRange {
    pub first: LocalDate,
    pub last: LocalDate,
}

impl DateRange {
    fn holds(&self, date: LocalDate) -> bool {
        self.first <= date && date <= self.last
    }
}

impl fmt::Display for DateRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}..{}", self.first, self.last)
        }
    }
}

/// Why an interval cannot be added to a calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalendarError {
    /// A start past 23:59 or an end past 24:00.
    BadTime { minute: u16 },
    /// Start and end are the same time: empty, or a whole day? The policy says which (`00:00-24:00`).
    Empty { minute: u16 },
    /// A range of dates that ends before it starts.
    DatesReversed { first: LocalDate, last: LocalDate },
    /// A date past what the image encodes (day numbers of `i32`) or whose next day is not a date.
    DateOutOfRange { date: LocalDate },
}

impl fmt::Display for CalendarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hm = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
        match self {
            CalendarError::BadTime { minute } => write!(f, "`{}` is not a time of day (00:00 to 24:00)", hm(*minute)),
            CalendarError::Empty { minute } => write!(
                f,
                "an interval from `{0}` to `{0}` is ambiguous: write `00:00-24:00` for a whole day",
                hm(*minute)
            ),
            CalendarError::DatesReversed { first, last } => {
                write!(f, "the range of dates `{first}..{last}` ends before it starts")
            }
            CalendarError::DateOutOfRange { date } => write!(f, "`{date}` is outside the dates a calendar can hold"),
        }
    }
}

impl std::error::Error for CalendarError {}

/// A weekly calendar in a zone's local time; see the module's documentation for what membership means.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Calendar {
    zone: String,
    closed_on_holidays: bool,
    /// Sorted by weekday then start; on one weekday, disjoint and not touching (touching ones are merged), so that
    /// two calendars holding the same instants have the same intervals and the same bytes.
    intervals: Vec<WeeklyInterval>,
    /// The dated lines' intervals, split at midnight as the weekly ones; sorted, without duplicates (ranges of
    /// dates are kept as written, not merged).
    dated: Vec<DatedInterval>,
    /// The closed dates: sorted, disjoint and not touching (touching ranges are merged).
    closed: Vec<DateRange>,
}

impl Calendar {
    /// An empty calendar (no instant is in it) in the zone named `zone` (checked by [`ZoneTable::new`]).
    pub fn new(zone: &str, closed_on_holidays: bool) -> Calendar {
        Calendar {
            zone: zone.to_string(),
            closed_on_holidays,
            intervals: Vec::new(),
            dated: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// Adds `weekday start-end` (minutes since local midnight; `end` 1440 is `24:00`, and an `end` not after
    /// `start` crosses midnight into the next day, which is split off).
    pub fn add(&mut self, weekday: Weekday, start_minute: u16, end_minute: u16) -> Result<(), CalendarError> {
        check_hours(start_minute, end_minute)?;
        if start_minute < end_minute {
            self.intervals.push(WeeklyInterval { weekday, start_minute, end_minute });
        } else {
            self.intervals.push(WeeklyInterval { weekday, start_minute, end_minute: MINUTES_PER_DAY });
            if end_minute > 0 {
                self.intervals.push(WeeklyInterval { weekday: weekday.next(), start_minute: 0, end_minute });
            }
        }
        self.normalize();
        Ok(())
    }

    /// Adds `first..last start-end`: the hours on every date of the range (both included), read as
    /// [`Calendar::add`] reads them; hours that cross midnight go on into the day after each date.
    pub fn add_dated(
        &mut self,
        first: LocalDate,
        last: LocalDate,
        start_minute: u16,
        end_minute: u16,
    ) -> Result<(), CalendarError> {
        check_dates(first, last)?;
        check_hours(start_minute, end_minute)?;
        if start_minute < end_minute {
            self.dated.push(DatedInterval { first, last, start_minute, end_minute });
        } else {
            self.dated.push(DatedInterval { first, last, start_minute, end_minute: MINUTES_PER_DAY });
            if end_minute > 0 {
                // `check_dates` made sure the next days are dates.
                let next = |d: LocalDate| LocalDate::from_day_number(d.day_number() + 1).expect("checked");
                self.dated.push(DatedInterval { first: next(first), last: next(last), start_minute: 0, end_minute });
            }
        }
        self.dated.sort();
        self.dated.dedup();
        Ok(())
    }

    /// Closes the local dates `first..last` (both included), whatever opens them.
    pub fn close(&mut self, first: LocalDate, last: LocalDate) -> Result<(), CalendarError> {
        check_dates(first, last)?;
        self.closed.push(DateRange { first, last });
        self.closed.sort();
        let mut merged: Vec<DateRange> = Vec::with_capacity(self.closed.len());
        for range in self.closed.drain(..) {
            match merged.last_mut() {
                Some(previous) if range.first.day_number() <= previous.last.day_number() + 1 => {
                    previous.last = previous.last.max(range.last);
                }
                _ => merged.push(range),
            }
        }
        self.closed = merged;
        Ok(())
    }

    /// Sorts the intervals and merges those that overlap or touch on the same weekday.
    fn normalize(&mut self) {
        self.intervals.sort();
        let mut merged: Vec<WeeklyInterval> = Vec::with_capacity(self.intervals.len());
        for interval in self.intervals.drain(..) {
            match merged.last_mut() {
                Some(last) if last.weekday == interval.weekday && interval.start_minute <= last.end_minute => {
                    last.end_minute = last.end_minute.max(interval.end_minute);
                }
                _ => merged.push(interval),
            }
        }
        self.intervals = merged;
    }

    pub fn zone(&self) -> &str {
        &self.zone
    }

    pub fn closed_on_holidays(&self) -> bool {
        self.closed_on_holidays
    }

    pub fn intervals(&self) -> &[WeeklyInterval] {
        &self.intervals
    }

    pub fn dated(&self) -> &[DatedInterval] {
        &self.dated
    }

    pub fn closed(&self) -> &[DateRange] {
        &self.closed
    }

    /// Whether the instant (nanoseconds since the Unix epoch) is in the calendar, read through `table` (the
    /// calendar's zone). `holidays`: the holiday data set's local dates, sorted; needed only when the calendar is
    /// closed on holidays. Unevaluable (`Err`) outside the table's window, or without holidays it needs.
    pub fn contains(
        &self,
        table: &ZoneTable,
        instant_nanos: i128,
        holidays: Option<&[LocalDate]>,
    ) -> Result<bool, TimeError> {
        if table.name() != self.zone {
            return Err(TimeError::ZoneMismatch);
        }
        let parts = table.local_parts(instant_nanos).ok_or(TimeError::OutsideTable)?;
        let on_holiday = holidays.map(|dates| dates.binary_search(&parts.date).is_ok());
        self.contains_local(&parts, on_holiday)
    }

    /// [`Calendar::contains`] for a wall-clock reading already made; `on_holiday` is whether its local date is a
    /// holiday, `None` when no holiday data was supplied (unevaluable if the calendar needs it).
    pub fn contains_local(&self, parts: &LocalParts, on_holiday: Option<bool>) -> Result<bool, TimeError> {
        if self.closed_on_holidays {
            match on_holiday {
                None => return Err(TimeError::HolidaysMissing),
                Some(true) => return Ok(false),
                Some(false) => {}
            }
        }
        if self.closed.iter().any(|range| range.holds(parts.date)) {
            return Ok(false);
        }
        let minute = parts.minute_of_day();
        Ok(self.intervals.iter().any(|interval| interval.holds(parts.weekday, minute))
            || self.dated.iter().any(|interval| interval.holds(parts.date, minute)))
    }

    /// The calendar's canonical bytes, little-endian (the image format around them carries the version; the zone
    /// is the image's business, as a reference to the zone table it reads through):
    ///
    /// | bytes | what |
    /// |---|---|
    /// | `u8` | flags: bit 0 closed on holidays, bit 1 dates follow; the others 0 |
    /// | `u16` | `n`, the number of intervals |
    /// | `n` × (`u8`, `u16`, `u16`) | weekday (0 Monday … 6 Sunday), start and end minute |
    /// | with bit 1: `u16` | `d`, the number of dated intervals |
    /// | `d` × (`i32`, `i32`, `u16`, `u16`) | first and last date (days since 1970-01-01), start and end minute |
    /// | with bit 1: `u16` | `c`, the number of closed ranges |
    /// | `c` × (`i32`, `i32`) | first and last closed date (days since 1970-01-01) |
    ///
    /// Canonical: sorted by weekday then start; `start < end <= 1440`; on one weekday, each interval ends before the
    /// next starts; dated intervals with `first <= last` and `start < end <= 1440`, strictly increasing as (first,
    /// last, start, end); closed ranges with `first <= last`, each starting more than a day after the previous one
    /// ends; bit 1 set exactly when there are dated intervals or closed ranges (so a calendar without dates encodes
    /// as it did before dates existed). `remit_rt::time::Calendar::decode` reads it and refuses anything else.
    pub fn encode(&self) -> Vec<u8> {
        let with_dates = !self.dated.is_empty() || !self.closed.is_empty();
        let mut out = Vec::with_capacity(7 + 5 * self.intervals.len() + 12 * self.dated.len() + 8 * self.closed.len());
        out.push(u8::from(self.closed_on_holidays) | (u8::from(with_dates) << 1));
        out.extend_from_slice(&(self.intervals.len() as u16).to_le_bytes());
        for interval in &self.intervals {
            out.push(interval.weekday.index());
            out.extend_from_slice(&interval.start_minute.to_le_bytes());
            out.extend_from_slice(&interval.end_minute.to_le_bytes());
        }
        if with_dates {
            let day = |date: LocalDate| (date.day_number() as i32).to_le_bytes();
            out.extend_from_slice(&(self.dated.len() as u16).to_le_bytes());
            for interval in &self.dated {
                out.extend_from_slice(&day(interval.first));
                out.extend_from_slice(&day(interval.last));
                out.extend_from_slice(&interval.start_minute.to_le_bytes());
                out.extend_from_slice(&interval.end_minute.to_le_bytes());
            }
            out.extend_from_slice(&(self.closed.len() as u16).to_le_bytes());
            for range in &self.closed {
                out.extend_from_slice(&day(range.first));
                out.extend_from_slice(&day(range.last));
            }
        }
        out
    }
}

/// Whether `start-end` are hours of a calendar line: times of day (`end` may be 1440, `24:00`) that differ.
fn check_hours(start_minute: u16, end_minute: u16) -> Result<(), CalendarError> {
    if start_minute >= MINUTES_PER_DAY {
        return Err(CalendarError::BadTime { minute: start_minute });
    }
    if end_minute > MINUTES_PER_DAY {
        return Err(CalendarError::BadTime { minute: end_minute });
    }
    if start_minute == end_minute {
        return Err(CalendarError::Empty { minute: start_minute });
    }
    Ok(())
}

/// A range of dates a calendar can hold: in order, and each date and the day after it a day number of `i32` (the
/// encoding's; years 0000 to 9999 are far inside).
fn check_dates(first: LocalDate, last: LocalDate) -> Result<(), CalendarError> {
    for date in [first, last] {
        let day = date.day_number();
        if i32::try_from(day + 1).is_err() || i32::try_from(day).is_err() {
            return Err(CalendarError::DateOutOfRange { date });
        }
    }
    if last < first {
        return Err(CalendarError::DatesReversed { first, last });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NANOS_PER_SECOND;
    use Weekday::*;

    const H: u16 = 60;

    fn instant(text: &str) -> i128 {
        i128::from(crate::value::parse_timestamp(text).unwrap()) * NANOS_PER_SECOND
    }

    fn business_hours(closed_on_holidays: bool) -> Calendar {
        let mut calendar = Calendar::new("Europe/Berlin", closed_on_holidays);
        for day in [Monday, Tuesday, Wednesday, Thursday, Friday] {
            calendar.add(day, 9 * H, 17 * H).unwrap();
        }
        calendar
    }

    /// Seconds of real time, on the UTC day `date`, spent inside `calendar` (stepping by a minute).
    fn real_minutes_inside(calendar: &Calendar, table: &ZoneTable, from: &str, to: &str) -> u32 {
        let (mut t, end) = (instant(from), instant(to));
        let mut minutes = 0;
        while t < end {
            minutes += u32::from(calendar.contains(table, t, Some(&[])).unwrap());
            t += 60 * NANOS_PER_SECOND;
        }
        minutes
    }

    #[test]
    fn clock_times() {
        assert_eq!(parse_clock("09:00"), Some(540));
        assert_eq!(parse_clock("23:59"), Some(1439));
        assert_eq!(parse_clock("24:00"), Some(MINUTES_PER_DAY));
        for bad in ["24:01", "25:00", "09:60", "9:00", "09:00 ", "09-00", "+9:00", "０9:00"] {
            assert_eq!(parse_clock(bad), None, "{bad}");
        }
    }

    #[test]
    fn intervals_split_at_midnight_and_merge() {
        let mut calendar = Calendar::new("Europe/Berlin", false);
        calendar.add(Sunday, 22 * H, 2 * H).unwrap();
        calendar.add(Monday, H, 3 * H).unwrap();
        calendar.add(Friday, 20 * H, 0).unwrap();
        let shown: Vec<String> = calendar.intervals().iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["mon 00:00-03:00", "fri 20:00-24:00", "sun 22:00-24:00"]);
        assert_eq!(calendar.add(Monday, 9 * H, 9 * H), Err(CalendarError::Empty { minute: 9 * H }));
        assert_eq!(calendar.add(Monday, 1440, 10), Err(CalendarError::BadTime { minute: 1440 }));
        assert_eq!(calendar.add(Monday, 0, 1441), Err(CalendarError::BadTime { minute: 1441 }));
        assert_eq!(
            calendar.encode(),
            [0, 3, 0, 0, 0, 0, 180, 0, 4, 176, 4, 160, 5, 6, 40, 5, 160, 5],
            "flags, count, then (weekday, start, end) little-endian"
        );
    }

    #[test]
    fn business_hours_in_berlin() {
        let table = ZoneTable::new("Europe/Berlin", None, None).unwrap();
        let calendar = business_hours(true);
        let christmas = [LocalDate::new(2026, 12, 25).unwrap()];
        let at = |text: &str, holidays: Option<&[LocalDate]>| calendar.contains(&table, instant(text), holidays);
        // Thursday 2026-12-24, CET (+1): 08:00Z is 09:00 local, 16:00Z is 17:00 local.
        assert_eq!(at("2026-12-24T07:59:59Z", Some(&christmas)), Ok(false));
        assert_eq!(at("2026-12-24T08:00:00Z", Some(&christmas)), Ok(true));
        assert_eq!(at("2026-12-24T15:59:59Z", Some(&christmas)), Ok(true));
        assert_eq!(at("2026-12-24T16:00:00Z", Some(&christmas)), Ok(false));
        // Friday the 25th is a holiday.
        assert_eq!(at("2026-12-25T10:00:00Z", Some(&christmas)), Ok(false));
        assert_eq!(at("2026-12-25T10:00:00Z", Some(&[])), Ok(true));
        assert_eq!(at("2026-12-25T10:00:00Z", None), Err(TimeError::HolidaysMissing));
        assert_eq!(at("2026-12-26T10:00:00Z", None), Err(TimeError::HolidaysMissing), "whatever the hour");
        assert_eq!(business_hours(false).contains(&table, instant("2026-12-25T10:00:00Z"), None), Ok(true));
        assert_eq!(at("2100-01-01T00:00:00Z", Some(&[])), Err(TimeError::OutsideTable));
        let other = ZoneTable::new("Europe/Paris", None, None).unwrap();
        assert_eq!(calendar.contains(&other, 0, Some(&[])), Err(TimeError::ZoneMismatch));
    }

    #[test]
    fn the_skipped_hour_holds_nothing_and_the_repeated_hour_twice() {
        let table = ZoneTable::new("Europe/Berlin", None, None).unwrap();
        let mut night = Calendar::new("Europe/Berlin", false);
        night.add(Sunday, 2 * H, 3 * H).unwrap();
        let mut early = Calendar::new("Europe/Berlin", false);
        early.add(Sunday, H, 4 * H).unwrap();
        // Sunday 2021-03-28 (spring forward at 01:00Z): 02:00-03:00 never shows on the clocks.
        let (from, to) = ("2021-03-27T22:00:00Z", "2021-03-28T22:00:00Z");
        assert_eq!(real_minutes_inside(&night, &table, from, to), 0);
        assert_eq!(real_minutes_inside(&early, &table, from, to), 120);
        // Sunday 2021-10-31 (fall back at 01:00Z): 02:00-03:00 shows twice.
        let (from, to) = ("2021-10-30T22:00:00Z", "2021-10-31T23:00:00Z");
        assert_eq!(real_minutes_inside(&night, &table, from, to), 120);
        assert_eq!(real_minutes_inside(&early, &table, from, to), 240);
        // A whole ordinary Sunday: one hour each.
        let (from, to) = ("2021-06-05T22:00:00Z", "2021-06-06T22:00:00Z");
        assert_eq!(real_minutes_inside(&night, &table, from, to), 60);
    }

    #[test]
    fn holidays_close_by_the_instants_own_date() {
        let table = ZoneTable::new("Europe/Berlin", None, None).unwrap();
        let mut late = Calendar::new("Europe/Berlin", true);
        late.add(Friday, 22 * H, 2 * H).unwrap();
        let saturday = [LocalDate::new(2026, 6, 6).unwrap()];
        // Friday 2026-06-05 23:00 CEST and Saturday 01:00 CEST.
        assert_eq!(late.contains(&table, instant("2026-06-05T21:00:00Z"), Some(&saturday)), Ok(true));
        assert_eq!(late.contains(&table, instant("2026-06-05T23:00:00Z"), Some(&saturday)), Ok(false));
        assert_eq!(late.contains(&table, instant("2026-06-05T23:00:00Z"), Some(&[])), Ok(true));
    }

    #[test]
    fn dated_lines_and_closures() {
        let table = ZoneTable::new("Europe/Berlin", None, None).unwrap();
        let date = |text: &str| LocalDate::parse(text).unwrap();
        let mut calendar = business_hours(false);
        // Sunday 2026-12-27 to Sunday 2027-01-03, 10:00-14:00; Thursday 2026-12-31 also 22:00-02:00.
        calendar.add_dated(date("2026-12-27"), date("2027-01-03"), 10 * H, 14 * H).unwrap();
        calendar.add_dated(date("2026-12-31"), date("2026-12-31"), 22 * H, 2 * H).unwrap();
        calendar.close(date("2026-12-25"), date("2026-12-25")).unwrap();
        calendar.close(date("2026-12-31"), date("2027-01-01")).unwrap();
        calendar.close(date("2026-12-26"), date("2026-12-26")).unwrap();
        let shown: Vec<String> = calendar.dated().iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["2026-12-27..2027-01-03 10:00-14:00", "2026-12-31 22:00-24:00", "2027-01-01 00:00-02:00"]);
        let closed: Vec<String> = calendar.closed().iter().map(ToString::to_string).collect();
        assert_eq!(closed, ["2026-12-25..2026-12-26", "2026-12-31..2027-01-01"], "touching ranges merge");
        let at = |text: &str| calendar.contains(&table, instant(text), None);
        assert_eq!(at("2026-12-27T10:00:00Z"), Ok(true), "Sunday 11:00, a dated opening");
        assert_eq!(at("2026-12-27T13:00:00Z"), Ok(false), "Sunday 14:00: the end is excluded");
        assert_eq!(at("2026-12-20T10:00:00Z"), Ok(false), "another Sunday");
        assert_eq!(at("2026-12-28T08:30:00Z"), Ok(true), "Monday 09:30, the weekly hours");
        assert_eq!(at("2026-12-25T10:00:00Z"), Ok(false), "Friday, closed");
        assert_eq!(at("2026-12-31T10:00:00Z"), Ok(false), "a closure wins over both openings");
        assert_eq!(at("2026-12-31T22:00:00Z"), Ok(false), "past midnight into a closed day");
        assert_eq!(at("2027-01-02T10:00:00Z"), Ok(true), "Saturday in the range across the year end");
        assert_eq!(at("2027-01-04T10:00:00Z"), Ok(true), "Monday after it: the weekly hours");
        assert_eq!(at("2027-01-03T13:59:59Z"), Ok(false), "Sunday 14:59:59, past the range's hours");
        let bytes = calendar.encode();
        assert_eq!(bytes[0], 2, "bit 1: dates follow");
        assert_eq!(bytes.len(), 3 + 5 * 5 + 2 + 12 * 3 + 2 + 8 * 2);
        assert_eq!(business_hours(true).encode()[0], 1, "without dates, the encoding from before dates");
        assert_eq!(
            calendar.add_dated(date("2027-01-03"), date("2026-12-27"), 10 * H, 14 * H),
            Err(CalendarError::DatesReversed { first: date("2027-01-03"), last: date("2026-12-27") })
        );
        assert_eq!(
            calendar.close(date("2027-01-03"), date("2026-12-27")),
            Err(CalendarError::DatesReversed { first: date("2027-01-03"), last: date("2026-12-27") })
        );
        assert_eq!(
            calendar.add_dated(date("2026-12-24"), date("2026-12-24"), 9 * H, 9 * H),
            Err(CalendarError::Empty { minute: 9 * H })
        );
    }

    #[test]
    fn a_dated_line_in_the_skipped_hour_holds_nothing() {
        let table = ZoneTable::new("Europe/Berlin", None, None).unwrap();
        let mut calendar = Calendar::new("Europe/Berlin", false);
        let day = LocalDate::new(2026, 3, 29).unwrap();
        calendar.add_dated(day, day, 2 * H, 3 * H).unwrap();
        assert_eq!(real_minutes_inside(&calendar, &table, "2026-03-28T22:00:00Z", "2026-03-29T22:00:00Z"), 0);
        let day = LocalDate::new(2026, 10, 25).unwrap();
        calendar.add_dated(day, day, 2 * H, 3 * H).unwrap();
        assert_eq!(real_minutes_inside(&calendar, &table, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"), 120);
    }
}
