//! Containment of one calendar in another, for the theory (`theory`): whether every instant a child's calendar
//! holds, its parent's calendar holds too, so that `t in CHILD` implies `t in PARENT` for the same instant `t`.
//!
//! Holidays are data (`context.holidays.NAME`, one list per calendar, unknown at compile time), so they are read
//! as the adversary would: a child closed on holidays is at its widest with none (holidays only remove hours),
//! and a parent closed on holidays is never implied by another calendar (a request may list any date as the
//! parent's holiday and none as the child's). Calendars are compared
//! - **in one zone, over all time**, by their local readings: both read the same wall clock at every instant,
//!   so checking every weekday and every date a dated line or closure names, at every minute where either
//!   calendar's hours start or end, decides containment (transitions skip or repeat readings for both alike);
//! - **over actual instants** otherwise, when the instant is bounded (a validity window, a literal test) to at most
//!   [`MAX_DAYS`] days: the instants where either calendar may change — each start and end of hours in its zone's
//!   local time, each offset change of either zone, the window's start — are all checked, and the answer between
//!   two of them is the same.
//!
//! Anything else (two zones over an unbounded or longer window) is not decided: no lemma, and the witness search
//! looks for an instant as before. Depends on the time library only; never on the interpreter.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use crate::ir::CalendarDef;
use crate::time::{LocalDate, LocalParts};
use crate::value::NANOS_PER_SECOND;

/// The longest window compared instant by instant.
pub const MAX_DAYS: i64 = 400;

/// The most dates compared one by one in one zone (long dated ranges are not enumerated past it).
const MAX_DATES: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containment {
    /// Every instant (of the window, when one was needed) the child holds, the parent holds.
    Contained { needs_window: bool },
    /// An instant the child holds and the parent does not, both without holidays.
    Outside(i128),
    /// Not decided (two zones over too long a window, a parent closed on holidays, too many dates).
    Unknown,
}

type Key = (crate::time::Calendar, crate::time::Calendar, Option<(i128, i128)>);

thread_local! {
    /// Answers already computed: a proof asks the same pair again for every question of a sub-mandate.
    static CACHE: RefCell<HashMap<Key, Containment>> = RefCell::new(HashMap::new());
}

/// Whether `child` is contained in `parent` for every instant in `[lo, hi]` (nanoseconds; an open end is the
/// tables' own).
pub fn containment(child: &CalendarDef, parent: &CalendarDef, lo: Option<i128>, hi: Option<i128>) -> Containment {
    if parent.calendar.closed_on_holidays() {
        return Containment::Unknown;
    }
    let same_zone = child.calendar.zone() == parent.calendar.zone();
    let key_all = (child.calendar.clone(), parent.calendar.clone(), None);
    if same_zone {
        let answer = cached(key_all, || local_containment(child, parent));
        if answer == (Containment::Contained { needs_window: false }) {
            return answer;
        }
    }
    let second = NANOS_PER_SECOND;
    let from = [lo.map(|l| l.div_euclid(second)), Some(child.table.from().into()), Some(parent.table.from().into())]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
    let until =
        [hi.map(|h| h.div_euclid(second) + 1), Some(child.table.until().into()), Some(parent.table.until().into())]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(0);
    if until - from > i128::from(MAX_DAYS) * 86_400 {
        return Containment::Unknown;
    }
    let (Ok(from), Ok(until)) = (i64::try_from(from), i64::try_from(until)) else { return Containment::Unknown };
    let key = (child.calendar.clone(), parent.calendar.clone(), Some((from.into(), until.into())));
    cached(key, || instant_containment(child, parent, from, until))
}

fn cached(key: Key, compute: impl FnOnce() -> Containment) -> Containment {
    if let Some(found) = CACHE.with(|c| c.borrow().get(&key).copied()) {
        return found;
    }
    let answer = compute();
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        // A bound on what a long-running process keeps.
        if cache.len() > 4096 {
            cache.clear();
        }
        cache.insert(key, answer);
    });
    answer
}

/// The minutes of the day where a calendar's hours may start or stop holding (midnight included: dates change).
fn boundaries(def: &CalendarDef) -> BTreeSet<u16> {
    let mut out: BTreeSet<u16> = BTreeSet::from([0]);
    for i in def.calendar.intervals() {
        out.extend([i.start_minute, i.end_minute % 1440]);
    }
    for i in def.calendar.dated() {
        out.extend([i.start_minute, i.end_minute % 1440]);
    }
    out
}

/// One zone: every local reading the child holds, the parent holds. The answer is for all time, so a failure says
/// nothing about a window (`Unknown`, and the instant comparison may still decide).
fn local_containment(child: &CalendarDef, parent: &CalendarDef) -> Containment {
    let mut dates: BTreeSet<i64> = BTreeSet::new();
    let mut mentioned = 0usize;
    for def in [child, parent] {
        let ranges = def
            .calendar
            .dated()
            .iter()
            .map(|d| (d.first, d.last))
            .chain(def.calendar.closed().iter().map(|c| (c.first, c.last)));
        for (first, last) in ranges {
            mentioned += (last.day_number() - first.day_number() + 1) as usize;
            if mentioned > MAX_DATES {
                return Containment::Unknown;
            }
            dates.extend(first.day_number()..=last.day_number());
        }
    }
    // A date of every weekday that no line names: after the last named date (or from 2026 on when none is).
    let after = dates.last().map_or(20_454, |d| d + 1);
    let generic: Vec<i64> = (after..after + 7).collect();
    let minutes: BTreeSet<u16> = boundaries(child).union(&boundaries(parent)).copied().collect();
    for day in dates.into_iter().chain(generic) {
        let Some(date) = LocalDate::from_day_number(day) else { return Containment::Unknown };
        for &minute in &minutes {
            let parts =
                LocalParts { date, weekday: date.weekday(), second_of_day: u32::from(minute) * 60, offset_seconds: 0 };
            let inside = |def: &CalendarDef| def.calendar.contains_local(&parts, Some(false)) == Ok(true);
            if inside(child) && !inside(parent) {
                return Containment::Unknown;
            }
        }
    }
    Containment::Contained { needs_window: false }
}

/// Every instant in `[from, until)` (Unix seconds) where either calendar may change, compared.
fn instant_containment(child: &CalendarDef, parent: &CalendarDef, from: i64, until: i64) -> Containment {
    if from >= until {
        return Containment::Contained { needs_window: true };
    }
    let mut candidates: BTreeSet<i64> = BTreeSet::from([from]);
    for def in [child, parent] {
        let minutes = boundaries(def);
        let segments = def.table.segments();
        for (i, segment) in segments.iter().enumerate() {
            let end = segments.get(i + 1).map_or(def.table.until(), |next| next.utc_start).min(until);
            let start = segment.utc_start.max(from);
            if start >= end {
                continue;
            }
            candidates.insert(start);
            let offset = i64::from(segment.offset_seconds);
            // The local days this piece covers, and each boundary minute of each, back in UTC.
            let (first_day, last_day) = ((start + offset).div_euclid(86_400), (end + offset).div_euclid(86_400));
            for day in first_day..=last_day {
                for &minute in &minutes {
                    let at = day * 86_400 + i64::from(minute) * 60 - offset;
                    if (start..end).contains(&at) {
                        candidates.insert(at);
                    }
                }
            }
        }
    }
    let none: &[LocalDate] = &[];
    for at in candidates {
        let instant = i128::from(at) * NANOS_PER_SECOND;
        let child_holds = child.calendar.contains(&child.table, instant, Some(none)) == Ok(true);
        if child_holds && parent.calendar.contains(&parent.table, instant, Some(none)) == Ok(false) {
            return Containment::Outside(instant);
        }
    }
    Containment::Contained { needs_window: true }
}

/// An instant in the five weeks from `near` that `child` holds and `parent` does not (without holidays): a witness
/// for a pair not decided for all time.
pub fn outside_near(child: &CalendarDef, parent: &CalendarDef, near: i128) -> Option<i128> {
    let from = i64::try_from(near.div_euclid(NANOS_PER_SECOND)).ok()?;
    let key = (child.calendar.clone(), parent.calendar.clone(), Some((from.into(), i128::from(from) + 35 * 86_400)));
    match cached(key, || instant_containment(child, parent, from, from + 35 * 86_400)) {
        Containment::Outside(at) => Some(at),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{Calendar, Weekday, ZoneTable};

    fn weekdays(name: &str, zone: &str, start: u16, end: u16) -> CalendarDef {
        let mut calendar = Calendar::new(zone, false);
        for day in Weekday::Monday.through(Weekday::Friday) {
            calendar.add(day, start, end).unwrap();
        }
        let table = ZoneTable::new(zone, None, None).unwrap();
        CalendarDef { name: name.into(), calendar, table, span: Default::default() }
    }

    const NOV_2026: i128 = 1_793_491_200 * NANOS_PER_SECOND;
    const FEB_2027: i128 = 1_801_440_000 * NANOS_PER_SECOND;

    #[test]
    fn one_zone_is_decided_for_all_time() {
        let office = weekdays("office", "Europe/Berlin", 9 * 60, 17 * 60);
        let mornings = weekdays("mornings", "Europe/Berlin", 9 * 60, 12 * 60);
        let early = weekdays("early", "Europe/Berlin", 8 * 60 + 30, 12 * 60);
        assert_eq!(containment(&mornings, &office, None, None), Containment::Contained { needs_window: false });
        assert_eq!(containment(&early, &office, None, None), Containment::Unknown);
        // Over a window, the instant found is inside `early` and outside `office`: 08:30 Berlin on a weekday.
        let Containment::Outside(at) = containment(&early, &office, Some(NOV_2026), Some(FEB_2027)) else {
            panic!("expected an instant outside the office's hours");
        };
        assert_eq!(early.calendar.contains(&early.table, at, Some(&[])), Ok(true));
        assert_eq!(office.calendar.contains(&office.table, at, Some(&[])), Ok(false));
    }

    #[test]
    fn two_zones_are_compared_over_the_instants_of_a_window() {
        let office = weekdays("office", "Europe/Berlin", 8 * 60, 17 * 60);
        let london = weekdays("london", "Europe/London", 9 * 60, 12 * 60);
        let new_york = weekdays("new_york", "America/New_York", 9 * 60, 12 * 60);
        let window = (Some(NOV_2026), Some(FEB_2027));
        assert_eq!(containment(&london, &office, window.0, window.1), Containment::Contained { needs_window: true });
        // Without a window, two zones are not decided.
        assert_eq!(containment(&london, &office, None, None), Containment::Unknown);
        let Containment::Outside(at) = containment(&new_york, &office, window.0, window.1) else {
            panic!("expected an instant outside the office's hours");
        };
        assert_eq!(office.calendar.contains(&office.table, at, Some(&[])), Ok(false));
        assert_eq!(new_york.calendar.contains(&new_york.table, at, Some(&[])), Ok(true));
    }

    #[test]
    fn a_parent_closed_on_holidays_is_not_implied_by_another_calendar() {
        let mut office = weekdays("office", "Europe/Berlin", 9 * 60, 17 * 60);
        office.calendar = {
            let mut c = Calendar::new("Europe/Berlin", true);
            for day in Weekday::Monday.through(Weekday::Friday) {
                c.add(day, 9 * 60, 17 * 60).unwrap();
            }
            c
        };
        let mornings = weekdays("mornings", "Europe/Berlin", 9 * 60, 12 * 60);
        assert_eq!(containment(&mornings, &office, None, None), Containment::Unknown);
    }
}
