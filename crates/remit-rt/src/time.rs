//! Local time inside the decision module, the twin of `crates/remit-lang/src/time/`: it reads the zone tables and
//! calendars the compiler encoded (`remit_lang::time::ZoneTable::encode`, `Calendar::encode`; the layouts are
//! documented there and checked again here), and answers what an instant reads on a zone's wall clocks and whether
//! it is in a calendar, exactly as the compiler's side does (tests/time_zones.rs compares them, natively and in the
//! wasm32 build).
//!
//! No clock, no time zone database and no import: the table is all the module knows of a zone, and an instant
//! outside its window has no local time here (unevaluable: the decision fails closed). Integer arithmetic only,
//! every read through `get`, nothing that can panic (the build refuses a surviving panic path; the cfg
//! `remit_rt_time_probe` builds test exports that reach every function below, tests/time_zones.rs builds it).
//!
//! The semantics, stated once on the compiler's side (`remit_lang::time::calendar`): an interval is about the time
//! the wall clocks show (start included, end excluded); in the hour that happens twice both instants read the same
//! time, in the hour that is skipped none does; a holiday closes the instants whose own local date it is.

use core::cmp::Ordering;

use crate::value::{days_from_civil, days_in_month, NANOS_PER_SECOND};

/// Seconds in a local day.
const SECONDS_PER_DAY: i64 = 86_400;
/// Minutes in a local day: an interval's end may be this (`24:00`).
pub const MINUTES_PER_DAY: u16 = 1440;
/// The largest UTC offset a table may carry (`remit_lang::time::MAX_OFFSET_SECONDS`).
pub const MAX_OFFSET_SECONDS: i32 = 93_599;

/// Bytes of a zone table's header (`u32` count, `i64` end) and of one segment (`i64` start, `i32` offset).
const TABLE_HEADER_LEN: usize = 12;
const SEGMENT_LEN: usize = 12;
/// Bytes of a calendar's header (`u8` flags, `u16` count) and of one interval (`u8` weekday, `u16` start, `u16` end).
const CALENDAR_HEADER_LEN: usize = 3;
const INTERVAL_LEN: usize = 5;
/// Bytes of a dated interval (`i32` first and last day, `u16` start, `u16` end) and of a closed range (`i32` first
/// and last day), after a `u16` count each, present with flag bit 1.
const DATED_LEN: usize = 12;
const CLOSED_LEN: usize = 8;
/// Flag bits of a calendar: closed on holidays; dated intervals and closed ranges follow the weekly intervals.
const FLAG_HOLIDAYS: u8 = 1;
const FLAG_DATES: u8 = 2;

/// Why a time condition cannot be decided (`remit_lang::time::TimeError`, less the compiler's own mistake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeError {
    /// The instant is outside the zone table's window.
    OutsideTable,
    /// The calendar is closed on holidays and no holiday data was supplied.
    HolidaysMissing,
}

/// What an instant reads on a zone's wall clocks (`remit_lang::time::LocalParts`): `weekday` 0 is Monday … 6
/// Sunday; `day_number` is the local date as days since 1970-01-01 (what holidays are compared in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalParts {
    pub year: i32,
    pub month: u8,
    pub day: u8,
    pub day_number: i64,
    pub weekday: u8,
    pub second_of_day: u32,
    pub offset_seconds: i32,
}

impl LocalParts {
    /// The wall-clock reading of `unix_seconds` under `offset_seconds`, or `None` past the arithmetic's range.
    pub fn at(unix_seconds: i64, offset_seconds: i32) -> Option<LocalParts> {
        let local = unix_seconds.checked_add(i64::from(offset_seconds))?;
        let day_number = local.div_euclid(SECONDS_PER_DAY);
        let (year, month, day) = civil_from_days(day_number)?;
        Some(LocalParts {
            year,
            month,
            day,
            day_number,
            // 1970-01-01 was a Thursday (3 with Monday 0); `local / 86_400` is far from overflowing when 3 is added.
            weekday: day_number.checked_add(3)?.rem_euclid(7) as u8,
            second_of_day: local.rem_euclid(SECONDS_PER_DAY) as u32,
            offset_seconds,
        })
    }

    /// Minutes since local midnight (0..1439).
    pub fn minute_of_day(&self) -> u16 {
        (self.second_of_day / 60) as u16
    }
}

fn read<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    let end = at.checked_add(N)?;
    bytes.get(at..end).and_then(|s| <[u8; N]>::try_from(s).ok())
}

/// A zone's offsets over a window of Unix seconds, read in place from its encoding.
#[derive(Debug, Clone, Copy)]
pub struct ZoneTable<'a> {
    from: i64,
    until: i64,
    count: usize,
    segments: &'a [u8],
}

impl<'a> ZoneTable<'a> {
    /// The table encoded in `bytes` (exactly: no byte before or after), or `None` unless the encoding is
    /// canonical: at least one segment, starts strictly increasing and before the end, neighbouring offsets
    /// different, every offset within ±[`MAX_OFFSET_SECONDS`].
    pub fn decode(bytes: &'a [u8]) -> Option<ZoneTable<'a>> {
        let table = ZoneTable::view(bytes)?;
        let mut previous: Option<(i64, i32)> = None;
        for index in 0..table.count {
            let (start, offset) = table.segment(index)?;
            if !(-MAX_OFFSET_SECONDS..=MAX_OFFSET_SECONDS).contains(&offset) {
                return None;
            }
            if let Some((previous_start, previous_offset)) = previous {
                if start <= previous_start || offset == previous_offset {
                    return None;
                }
            }
            previous = Some((start, offset));
        }
        match previous {
            Some((last_start, _)) if last_start < table.until => {}
            _ => return None,
        }
        Some(table)
    }

    /// The table encoded in `bytes` with its layout checked (a header, at least one segment, exactly the bytes its
    /// count says) but not its order, in constant time: how a decision reads the tables of the policy image, which
    /// the compiler wrote canonical ([`ZoneTable::decode`], which checks every segment, costs a table's length per
    /// read: about 270 segments for a zone with daylight saving from 1970 to 2100). A table that is not canonical
    /// (a corrupt image) reads wrongly but never traps, as every read of the image: each read is bounds-checked and
    /// the search takes at most `log2(count)` steps.
    pub fn view(bytes: &'a [u8]) -> Option<ZoneTable<'a>> {
        let count = usize::try_from(u32::from_le_bytes(read(bytes, 0)?)).ok()?;
        let until = i64::from_le_bytes(read(bytes, 4)?);
        let segments = bytes.get(TABLE_HEADER_LEN..)?;
        if count == 0 || segments.len() != count.checked_mul(SEGMENT_LEN)? {
            return None;
        }
        let table = ZoneTable { from: 0, until, count, segments };
        let (from, _) = table.segment(0)?;
        Some(ZoneTable { from, ..table })
    }

    /// The window's first second.
    pub fn from(&self) -> i64 {
        self.from
    }

    /// The window's end (exclusive).
    pub fn until(&self) -> i64 {
        self.until
    }

    /// Segment `index`: its first second and its UTC offset.
    fn segment(&self, index: usize) -> Option<(i64, i32)> {
        let at = index.checked_mul(SEGMENT_LEN)?;
        Some((i64::from_le_bytes(read(self.segments, at)?), i32::from_le_bytes(read(self.segments, at + 8)?)))
    }

    /// The UTC offset in force at `unix_seconds`, or `None` outside the window.
    pub fn offset_at(&self, unix_seconds: i64) -> Option<i32> {
        if unix_seconds < self.from || unix_seconds >= self.until {
            return None;
        }
        // The last segment starting at or before the instant. Invariant: segment `low` starts at or before it
        // (segment 0 starts at `from`), and `high` is the count or a segment starting after it.
        let (mut low, mut high) = (0, self.count);
        while high > low + 1 {
            let middle = low + (high - low) / 2;
            if self.segment(middle)?.0 <= unix_seconds {
                low = middle;
            } else {
                high = middle;
            }
        }
        Some(self.segment(low)?.1)
    }

    /// What the zone's wall clocks read at an instant (nanoseconds since the Unix epoch), to the second (a fraction
    /// is dropped); `None` outside the window.
    pub fn local_parts(&self, instant_nanos: i128) -> Option<LocalParts> {
        let seconds = i64::try_from(instant_nanos.div_euclid(NANOS_PER_SECOND)).ok()?;
        LocalParts::at(seconds, self.offset_at(seconds)?)
    }
}

/// A weekly calendar in local wall-clock time, read in place from its encoding.
#[derive(Debug, Clone, Copy)]
pub struct Calendar<'a> {
    closed_on_holidays: bool,
    count: usize,
    intervals: &'a [u8],
    dated_count: usize,
    dated: &'a [u8],
    closed_count: usize,
    closed: &'a [u8],
}

impl<'a> Calendar<'a> {
    /// The calendar encoded in `bytes` (exactly), or `None` unless the encoding is canonical: flags other than bits
    /// 0 and 1 clear; intervals sorted by weekday (0..=6) then start, `start < end <= 1440`, and on one weekday each
    /// ending before the next starts; with bit 1, dated intervals (`first <= last`, `start < end <= 1440`, strictly
    /// increasing) and closed ranges (`first <= last`, each starting more than a day after the previous one ends),
    /// not both empty.
    pub fn decode(bytes: &'a [u8]) -> Option<Calendar<'a>> {
        let flags = *bytes.first()?;
        if flags & !(FLAG_HOLIDAYS | FLAG_DATES) != 0 {
            return None;
        }
        let count = usize::from(u16::from_le_bytes(read(bytes, 1)?));
        let intervals_end = CALENDAR_HEADER_LEN.checked_add(count.checked_mul(INTERVAL_LEN)?)?;
        let intervals = bytes.get(CALENDAR_HEADER_LEN..intervals_end)?;
        let (mut dated_count, mut dated, mut closed_count, mut closed): (usize, &[u8], usize, &[u8]) = (0, &[], 0, &[]);
        if flags & FLAG_DATES == 0 {
            if bytes.len() != intervals_end {
                return None;
            }
        } else {
            dated_count = usize::from(u16::from_le_bytes(read(bytes, intervals_end)?));
            let dated_start = intervals_end + 2;
            let dated_end = dated_start.checked_add(dated_count.checked_mul(DATED_LEN)?)?;
            dated = bytes.get(dated_start..dated_end)?;
            closed_count = usize::from(u16::from_le_bytes(read(bytes, dated_end)?));
            let closed_start = dated_end + 2;
            closed = bytes.get(closed_start..)?;
            if closed.len() != closed_count.checked_mul(CLOSED_LEN)? || dated_count + closed_count == 0 {
                return None;
            }
        }
        let calendar = Calendar {
            closed_on_holidays: flags & FLAG_HOLIDAYS != 0,
            count,
            intervals,
            dated_count,
            dated,
            closed_count,
            closed,
        };
        let mut previous: Option<(u8, u16)> = None;
        for index in 0..count {
            let (weekday, start, end) = calendar.interval(index)?;
            if weekday > 6 || start >= end || end > MINUTES_PER_DAY {
                return None;
            }
            if let Some((previous_weekday, previous_end)) = previous {
                if weekday < previous_weekday || (weekday == previous_weekday && start <= previous_end) {
                    return None;
                }
            }
            previous = Some((weekday, end));
        }
        let mut previous: Option<(i32, i32, u16, u16)> = None;
        for index in 0..dated_count {
            let entry = calendar.dated_interval(index)?;
            let (first, last, start, end) = entry;
            if first > last || start >= end || end > MINUTES_PER_DAY || previous.map_or(false, |p| p >= entry) {
                return None;
            }
            previous = Some(entry);
        }
        let mut previous_last: Option<i32> = None;
        for index in 0..closed_count {
            let (first, last) = calendar.closed_range(index)?;
            if first > last || previous_last.map_or(false, |p| i64::from(first) <= i64::from(p) + 1) {
                return None;
            }
            previous_last = Some(last);
        }
        Some(calendar)
    }

    /// Dated interval `index`: first and last day number, start minute, end minute.
    fn dated_interval(&self, index: usize) -> Option<(i32, i32, u16, u16)> {
        let at = index.checked_mul(DATED_LEN)?;
        Some((
            i32::from_le_bytes(read(self.dated, at)?),
            i32::from_le_bytes(read(self.dated, at + 4)?),
            u16::from_le_bytes(read(self.dated, at + 8)?),
            u16::from_le_bytes(read(self.dated, at + 10)?),
        ))
    }

    /// Closed range `index`: first and last day number.
    fn closed_range(&self, index: usize) -> Option<(i32, i32)> {
        let at = index.checked_mul(CLOSED_LEN)?;
        Some((i32::from_le_bytes(read(self.closed, at)?), i32::from_le_bytes(read(self.closed, at + 4)?)))
    }

    pub fn closed_on_holidays(&self) -> bool {
        self.closed_on_holidays
    }

    /// Interval `index`: weekday, start minute, end minute.
    fn interval(&self, index: usize) -> Option<(u8, u16, u16)> {
        let at = index.checked_mul(INTERVAL_LEN)?;
        let weekday = *self.intervals.get(at)?;
        Some((
            weekday,
            u16::from_le_bytes(read(self.intervals, at + 1)?),
            u16::from_le_bytes(read(self.intervals, at + 3)?),
        ))
    }

    /// Whether the instant is in the calendar, read through `table` (the calendar's zone, as the image pairs
    /// them). `holidays`: the holiday data set as day numbers (days since 1970-01-01 of local dates, see
    /// [`parse_date`]), sorted ascending. Unevaluable outside the table's window, or without holidays it needs.
    pub fn contains(
        &self,
        table: &ZoneTable,
        instant_nanos: i128,
        holidays: Option<&[i64]>,
    ) -> Result<bool, TimeError> {
        let parts = match table.local_parts(instant_nanos) {
            Some(parts) => parts,
            None => return Err(TimeError::OutsideTable),
        };
        let on_holiday = holidays.map(|days| days.binary_search(&parts.day_number).is_ok());
        self.contains_local(&parts, on_holiday)
    }

    /// [`Calendar::contains`] for a reading already made; `on_holiday` is whether its local date is a holiday,
    /// `None` without holiday data (unevaluable when the calendar needs it, whatever the time).
    pub fn contains_local(&self, parts: &LocalParts, on_holiday: Option<bool>) -> Result<bool, TimeError> {
        if self.closed_on_holidays {
            match on_holiday {
                None => return Err(TimeError::HolidaysMissing),
                Some(true) => return Ok(false),
                Some(false) => {}
            }
        }
        // A closed date wins over every opening (the decode checked every record, so `None` never happens: it
        // would read as "not closed" and "not in").
        let day = parts.day_number;
        for index in 0..self.closed_count {
            if let Some((first, last)) = self.closed_range(index) {
                if i64::from(first) <= day && day <= i64::from(last) {
                    return Ok(false);
                }
            }
        }
        let minute = parts.minute_of_day();
        for index in 0..self.count {
            if let Some((weekday, start, end)) = self.interval(index) {
                if weekday == parts.weekday && start <= minute && minute < end {
                    return Ok(true);
                }
            }
        }
        for index in 0..self.dated_count {
            if let Some((first, last, start, end)) = self.dated_interval(index) {
                if i64::from(first) <= day && day <= i64::from(last) && start <= minute && minute < end {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// The day number (days since 1970-01-01) of a `YYYY-MM-DD` date with a four-digit year, as holiday data sets
/// write them (`remit_lang::time::LocalDate::parse`); `None` for anything else, or a date that does not exist.
pub fn parse_date(text: &[u8]) -> Option<i64> {
    if text.len() != 10 || text.get(4) != Some(&b'-') || text.get(7) != Some(&b'-') {
        return None;
    }
    let number = |from: usize, to: usize| -> Option<i64> {
        let mut value = 0i64;
        for &c in text.get(from..to)? {
            if !c.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(c - b'0');
        }
        Some(value)
    };
    let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// `end - start` in nanoseconds, or `None` when it does not fit in an `i64` (about ±292 years): unevaluable, never
/// wrapped or saturated (`remit_lang::time::nanos_between`).
pub fn nanos_between(start: i128, end: i128) -> Option<i64> {
    end.checked_sub(start).and_then(|d| i64::try_from(d).ok())
}

/// How a duration in nanoseconds compares with a policy's duration in whole seconds, exactly.
pub fn compare_nanos_to_seconds(nanos: i64, seconds: i64) -> Ordering {
    // Both fit in an i128 with room to spare: |seconds| * 10^9 < 2^93.
    i128::from(nanos).cmp(&(i128::from(seconds) * NANOS_PER_SECOND))
}

// The civil calendar (Howard Hinnant's algorithms) is value.rs's, which reads timestamps with it; only the way back
// from a day number, which local dates need, is here.

/// The date of a day number, or `None` when its year is past `i32` (a day number from Unix seconds in an `i64` is
/// at most about 1.1e14, so the arithmetic below stays far from overflowing).
pub(crate) fn civil_from_days(days: i64) -> Option<(i32, u8, u8)> {
    let z = days.checked_add(719_468)?;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe.checked_add(era.checked_mul(400)?)?.checked_add(if month <= 2 { 1 } else { 0 })?;
    Some((i32::try_from(year).ok()?, month as u8, day as u8))
}

/// Test exports over the functions above, built only with `--cfg remit_rt_time_probe` (tests/time_zones.rs runs
/// scripts/build-runtime.sh with it): the build then checks this file for panic paths, and the test compares the
/// wasm32 answers with the compiler's. The host writes inputs into [`probe::rt_time_buffer`].
#[cfg(all(target_arch = "wasm32", remit_rt_time_probe))]
#[allow(unsafe_code)]
mod probe {
    use core::ptr::{addr_of, addr_of_mut};

    use super::{nanos_between, parse_date, Calendar, LocalParts, TimeError, ZoneTable};

    const BUFFER_LEN: usize = 65_536;
    const MAX_HOLIDAYS: usize = 1024;
    static mut BUFFER: [u8; BUFFER_LEN] = [0; BUFFER_LEN];
    static mut HOLIDAYS: [i64; MAX_HOLIDAYS] = [0; MAX_HOLIDAYS];

    fn buffer() -> &'static [u8] {
        unsafe { &*addr_of!(BUFFER) }
    }

    fn at(from: usize, len: i32) -> Option<&'static [u8]> {
        buffer().get(from..from.checked_add(len as u32 as usize)?)
    }

    /// Year + 10_000 (15 bits), month (4), day (5), weekday (3), second of day (17), from the top down.
    fn pack(parts: LocalParts) -> i64 {
        (i64::from(parts.year) + 10_000) << 46
            | i64::from(parts.month) << 42
            | i64::from(parts.day) << 37
            | i64::from(parts.weekday) << 34
            | i64::from(parts.second_of_day) << 17
    }

    #[no_mangle]
    pub extern "C" fn rt_time_buffer() -> i32 {
        unsafe { addr_of!(BUFFER) as usize as i32 }
    }

    /// The table is the buffer's first `table_len` bytes: the packed local parts of `instant` (ns), -1 outside the
    /// window, -2 for a table that does not decode.
    #[no_mangle]
    pub extern "C" fn rt_time_local(table_len: i32, instant: i64) -> i64 {
        match at(0, table_len).and_then(ZoneTable::decode) {
            Some(table) => table.local_parts(i128::from(instant)).map_or(-1, pack),
            None => -2,
        }
    }

    /// The UTC offset at `seconds`, or `i64::MIN` (outside, or a table that does not decode).
    #[no_mangle]
    pub extern "C" fn rt_time_offset(table_len: i32, seconds: i64) -> i64 {
        at(0, table_len).and_then(ZoneTable::decode).and_then(|t| t.offset_at(seconds)).map_or(i64::MIN, i64::from)
    }

    /// The buffer holds the table, the calendar, then `holidays` little-endian `i64` day numbers (`holidays` < 0:
    /// no holiday data). 0 out, 1 in, 2 outside the table, 3 holidays missing, 4 an input that does not decode.
    #[no_mangle]
    pub extern "C" fn rt_time_member(table_len: i32, calendar_len: i32, holidays: i32, instant: i64) -> i32 {
        let table = at(0, table_len).and_then(ZoneTable::decode);
        let calendar = at(table_len as u32 as usize, calendar_len).and_then(Calendar::decode);
        let (table, calendar) = match (table, calendar) {
            (Some(table), Some(calendar)) => (table, calendar),
            _ => return 4,
        };
        let days = unsafe { &mut *addr_of_mut!(HOLIDAYS) };
        let list = if holidays < 0 {
            None
        } else {
            let from = (table_len as u32 as usize).saturating_add(calendar_len as u32 as usize);
            let count = holidays as u32 as usize;
            if count > MAX_HOLIDAYS {
                return 4;
            }
            for (index, slot) in days.iter_mut().take(count).enumerate() {
                match super::read::<8>(buffer(), from.saturating_add(index.saturating_mul(8))) {
                    Some(bytes) => *slot = i64::from_le_bytes(bytes),
                    None => return 4,
                }
            }
            days.get(..count)
        };
        match calendar.contains(&table, i128::from(instant), list) {
            Ok(inside) => i32::from(inside),
            Err(TimeError::OutsideTable) => 2,
            Err(TimeError::HolidaysMissing) => 3,
        }
    }

    /// `parse_date` of the buffer's first `len` bytes, `i64::MIN` for none.
    #[no_mangle]
    pub extern "C" fn rt_time_parse_date(len: i32) -> i64 {
        at(0, len).and_then(parse_date).unwrap_or(i64::MIN)
    }

    /// `nanos_between(start, end)` (nanoseconds), `i64::MIN` for none (the difference of two `i64`s may not fit).
    #[no_mangle]
    pub extern "C" fn rt_time_between(start: i64, end: i64) -> i64 {
        nanos_between(i128::from(start), i128::from(end)).unwrap_or(i64::MIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_refuses_what_is_not_canonical() {
        let table = |segments: &[(i64, i32)], until: i64| {
            let mut bytes = (segments.len() as u32).to_le_bytes().to_vec();
            bytes.extend_from_slice(&until.to_le_bytes());
            for (start, offset) in segments {
                bytes.extend_from_slice(&start.to_le_bytes());
                bytes.extend_from_slice(&offset.to_le_bytes());
            }
            bytes
        };
        let good = table(&[(0, 3600), (100, 7200)], 200);
        let decoded = ZoneTable::decode(&good).unwrap();
        assert_eq!((decoded.from(), decoded.until()), (0, 200));
        assert_eq!(
            [decoded.offset_at(-1), decoded.offset_at(0), decoded.offset_at(99)],
            [None, Some(3600), Some(3600)]
        );
        assert_eq!(
            [decoded.offset_at(100), decoded.offset_at(199), decoded.offset_at(200)],
            [Some(7200), Some(7200), None]
        );
        assert!(ZoneTable::decode(&good[..good.len() - 1]).is_none());
        assert!(ZoneTable::decode(&[good.as_slice(), &[0]].concat()).is_none());
        assert!(ZoneTable::decode(&table(&[], 200)).is_none());
        assert!(ZoneTable::decode(&table(&[(0, 3600), (0, 7200)], 200)).is_none(), "starts increase");
        assert!(ZoneTable::decode(&table(&[(0, 3600), (100, 3600)], 200)).is_none(), "offsets change");
        assert!(ZoneTable::decode(&table(&[(0, 3600), (200, 7200)], 200)).is_none(), "starts before the end");
        assert!(ZoneTable::decode(&table(&[(0, 93_600)], 200)).is_none(), "offsets within 25:59:59");
        assert!(ZoneTable::decode(&table(&[(i64::MAX - 1, 0)], i64::MAX)).is_some());

        let calendar = |flags: u8, intervals: &[(u8, u16, u16)]| {
            let mut bytes = vec![flags];
            bytes.extend_from_slice(&(intervals.len() as u16).to_le_bytes());
            for (weekday, start, end) in intervals {
                bytes.push(*weekday);
                bytes.extend_from_slice(&start.to_le_bytes());
                bytes.extend_from_slice(&end.to_le_bytes());
            }
            bytes
        };
        assert!(Calendar::decode(&calendar(1, &[(0, 540, 1020), (0, 1100, 1440), (6, 0, 60)])).is_some());
        assert!(Calendar::decode(&calendar(0, &[])).is_some());
        assert!(Calendar::decode(&calendar(4, &[])).is_none(), "unknown flag");
        assert!(Calendar::decode(&calendar(2, &[])).is_none(), "dates announced, none follow");
        let with_dates = |flags: u8, dated: &[(i32, i32, u16, u16)], closed: &[(i32, i32)]| {
            let mut bytes = calendar(flags, &[(0, 540, 1020)]);
            bytes.extend_from_slice(&(dated.len() as u16).to_le_bytes());
            for (first, last, start, end) in dated {
                bytes.extend_from_slice(&first.to_le_bytes());
                bytes.extend_from_slice(&last.to_le_bytes());
                bytes.extend_from_slice(&start.to_le_bytes());
                bytes.extend_from_slice(&end.to_le_bytes());
            }
            bytes.extend_from_slice(&(closed.len() as u16).to_le_bytes());
            for (first, last) in closed {
                bytes.extend_from_slice(&first.to_le_bytes());
                bytes.extend_from_slice(&last.to_le_bytes());
            }
            bytes
        };
        let good = with_dates(3, &[(10, 12, 600, 840), (10, 12, 900, 960), (11, 11, 0, 60)], &[(5, 6), (8, 8)]);
        assert!(Calendar::decode(&good).is_some());
        assert!(Calendar::decode(&good[..good.len() - 1]).is_none(), "short");
        assert!(Calendar::decode(&[good.as_slice(), &[0]].concat()).is_none(), "long");
        assert!(Calendar::decode(&with_dates(2, &[], &[(5, 6)])).is_some());
        assert!(Calendar::decode(&with_dates(0, &[], &[(5, 6)])).is_none(), "dates without the flag");
        assert!(Calendar::decode(&with_dates(2, &[], &[])).is_none(), "the flag without dates");
        assert!(Calendar::decode(&with_dates(2, &[(12, 10, 600, 840)], &[])).is_none(), "dates reversed");
        assert!(Calendar::decode(&with_dates(2, &[(10, 10, 600, 600)], &[])).is_none(), "empty");
        assert!(Calendar::decode(&with_dates(2, &[(10, 10, 600, 1441)], &[])).is_none(), "past 24:00");
        assert!(Calendar::decode(&with_dates(2, &[(11, 11, 0, 60), (10, 12, 0, 60)], &[])).is_none(), "unsorted");
        assert!(Calendar::decode(&with_dates(2, &[(10, 10, 0, 60), (10, 10, 0, 60)], &[])).is_none(), "repeated");
        assert!(Calendar::decode(&with_dates(2, &[], &[(6, 5)])).is_none(), "closure reversed");
        assert!(Calendar::decode(&with_dates(2, &[], &[(5, 6), (7, 8)])).is_none(), "touching, not merged");
        assert!(Calendar::decode(&with_dates(2, &[], &[(7, 8), (5, 5)])).is_none(), "closures unsorted");
        assert!(Calendar::decode(&calendar(0, &[(7, 0, 60)])).is_none(), "weekday");
        assert!(Calendar::decode(&calendar(0, &[(0, 60, 60)])).is_none(), "empty");
        assert!(Calendar::decode(&calendar(0, &[(0, 0, 1441)])).is_none(), "past 24:00");
        assert!(Calendar::decode(&calendar(0, &[(0, 0, 60), (0, 60, 120)])).is_none(), "touching, not merged");
        assert!(Calendar::decode(&calendar(0, &[(1, 0, 60), (0, 0, 60)])).is_none(), "unsorted");
    }

    #[test]
    fn local_parts_and_calendars() {
        // Berlin around the 2021 spring change: CET until 01:00Z on 2021-03-28, then CEST.
        let mut bytes = 2u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&1_640_995_200i64.to_le_bytes());
        for (start, offset) in [(1_609_459_200i64, 3600i32), (1_616_893_200, 7200)] {
            bytes.extend_from_slice(&start.to_le_bytes());
            bytes.extend_from_slice(&offset.to_le_bytes());
        }
        let table = ZoneTable::decode(&bytes).unwrap();
        let before = table.local_parts(1_616_893_199 * NANOS_PER_SECOND).unwrap();
        let after = table.local_parts(1_616_893_200 * NANOS_PER_SECOND).unwrap();
        assert_eq!((before.year, before.month, before.day, before.weekday), (2021, 3, 28, 6));
        assert_eq!((before.second_of_day, after.second_of_day), (2 * 3600 - 1, 3 * 3600));
        assert_eq!(Some(before.day_number), parse_date(b"2021-03-28"));
        assert_eq!(table.local_parts(1_640_995_200 * NANOS_PER_SECOND), None);
        // Sunday 01:00-04:00, closed on holidays.
        let calendar_bytes = [1, 1, 0, 6, 60, 0, 240, 0];
        let calendar = Calendar::decode(&calendar_bytes).unwrap();
        let sunday = Some(&[before.day_number][..]);
        assert_eq!(calendar.contains(&table, 1_616_893_200 * NANOS_PER_SECOND, Some(&[])), Ok(true));
        assert_eq!(calendar.contains(&table, 1_616_893_200 * NANOS_PER_SECOND, sunday), Ok(false));
        assert_eq!(calendar.contains(&table, 1_616_893_200 * NANOS_PER_SECOND, None), Err(TimeError::HolidaysMissing));
        assert_eq!(calendar.contains(&table, 0, Some(&[])), Err(TimeError::OutsideTable));
        // The same hours, Saturday 2021-03-27 opened 10:00-11:00 and Sunday 2021-03-28 closed.
        let (saturday, sunday_number) = (before.day_number as i32 - 1, before.day_number as i32);
        let mut dated_bytes = calendar_bytes.to_vec();
        dated_bytes[0] = 3;
        dated_bytes.extend_from_slice(&1u16.to_le_bytes());
        for word in [saturday, saturday] {
            dated_bytes.extend_from_slice(&word.to_le_bytes());
        }
        dated_bytes.extend_from_slice(&[88, 2, 148, 2]);
        dated_bytes.extend_from_slice(&1u16.to_le_bytes());
        for word in [sunday_number, sunday_number] {
            dated_bytes.extend_from_slice(&word.to_le_bytes());
        }
        let dated = Calendar::decode(&dated_bytes).unwrap();
        // Saturday 10:30 CET is 09:30Z; Sunday 03:00 CEST is the instant of the change.
        let saturday_10_30 = (1_616_893_200 - 15 * 3600 - 1800) * NANOS_PER_SECOND;
        assert_eq!(dated.contains(&table, saturday_10_30, Some(&[])), Ok(true));
        assert_eq!(calendar.contains(&table, saturday_10_30, Some(&[])), Ok(false));
        assert_eq!(dated.contains(&table, 1_616_893_200 * NANOS_PER_SECOND, Some(&[])), Ok(false), "closed");
        assert_eq!(parse_date(b"2021-02-29"), None);
        assert_eq!(parse_date(b"1970-01-01"), Some(0));
        assert_eq!(nanos_between(1, i128::from(i64::MAX) + 2), None);
        assert_eq!(compare_nanos_to_seconds(1_000_000_001, 1), Ordering::Greater);
    }
}
