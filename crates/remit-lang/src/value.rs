//! Typed values shared by the checker and the interpreter: exact decimals, money, timestamps, durations.

use std::fmt;

/// Fractional digits kept by [`Decimal`]; more digits are rejected rather than rounded.
pub const DECIMAL_SCALE: u32 = 9;

/// An exact decimal number, stored as an integer count of 10^-9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Decimal(pub i128);

impl Decimal {
    /// Parses `-12`, `12.50`; `None` on anything else or more than 9 fractional digits.
    pub fn parse(text: &str) -> Option<Decimal> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, frac) = match digits.split_once('.') {
            Some((w, f)) => (w, f),
            None => (digits, ""),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !all_digits(whole) || !all_digits(frac) || digits.ends_with('.') {
            return None;
        }
        if frac.len() > DECIMAL_SCALE as usize || whole.len() > 24 {
            return None;
        }
        let mut value: i128 = whole.parse().ok()?;
        value = value.checked_mul(10i128.pow(DECIMAL_SCALE))?;
        if !frac.is_empty() {
            let padded = format!("{frac:0<9}");
            value = value.checked_add(padded.parse::<i128>().ok()?)?;
        }
        Some(Decimal(if negative { -value } else { value }))
    }

    pub fn from_int(value: i64) -> Decimal {
        Decimal(value as i128 * 10i128.pow(DECIMAL_SCALE))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scale = 10i128.pow(DECIMAL_SCALE);
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let whole = abs / scale as u128;
        let frac = abs % scale as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let frac = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

/// An amount of money in one currency (ISO 4217 code).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Money {
    pub amount: Decimal,
    pub currency: String,
}

impl Money {
    /// Parses `"12.50 USD"`.
    pub fn parse(text: &str) -> Option<Money> {
        let (amount, currency) = text.split_once(' ')?;
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return None;
        }
        Some(Money { amount: Decimal::parse(amount)?, currency: currency.to_string() })
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.amount, self.currency)
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SSZ` into seconds since the Unix epoch.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let s = &text[from..to];
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_timestamp(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rem = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A length of time as people say it, rounded down to its largest unit: `25 days`, `1 hour`, `0 seconds`.
pub fn duration_in_words(seconds: u64) -> String {
    let (count, unit) = match seconds {
        s if s >= 86_400 => (s / 86_400, "day"),
        s if s >= 3600 => (s / 3600, "hour"),
        s if s >= 60 => (s / 60, "minute"),
        s => (s, "second"),
    };
    format!("{count} {unit}{}", if count == 1 { "" } else { "s" })
}

/// Nanoseconds in a second: a request's timestamp ([`parse_instant`]) and a condition's timestamp value
/// (`ir::Value::Timestamp`) count nanoseconds since the Unix epoch.
pub const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// Parses a request's timestamp into nanoseconds since the Unix epoch (docs/requests.md): an RFC 3339 `date-time`
/// `YYYY-MM-DDTHH:MM:SS`, an optional fraction of 1 to 9 digits (`.5`, `.123`), then `Z` or a numeric offset
/// `+HH:MM` / `-HH:MM` (hours 00-23, minutes 00-59), which is taken off to give UTC. `T` and `Z` may be lowercase
/// (RFC 3339 allows it); nothing else is accepted: no space for `T`, no leap second (`:60`, which POSIX time does
/// not count), no tenth fractional digit (never rounded), no offset without its colon.
pub fn parse_instant(text: &str) -> Option<i128> {
    let b = text.as_bytes();
    let digits = |from: usize, to: usize| -> Option<i64> {
        let s = b.get(from..to)?;
        if s.iter().all(u8::is_ascii_digit) {
            Some(s.iter().fold(0, |n, &c| n * 10 + i64::from(c - b'0')))
        } else {
            None
        }
    };
    let sep = |at: usize, c: u8| b.get(at) == Some(&c);
    if !sep(4, b'-') || !sep(7, b'-') || !matches!(b.get(10), Some(b'T' | b't')) || !sep(13, b':') || !sep(16, b':') {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 7)?, digits(8, 10)?);
    let (hour, minute, second) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut at = 19;
    let mut nanos: i128 = 0;
    if sep(at, b'.') {
        let count = b.get(at + 1..)?.iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&count) {
            return None;
        }
        let fraction = digits(at + 1, at + 1 + count)?;
        nanos = i128::from(fraction) * 10i128.pow(9 - count as u32);
        at += 1 + count;
    }
    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (digits(at + 1, at + 3)?, digits(at + 4, at + 6)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = hours * 3600 + minutes * 60;
            if *sign == b'-' {
                -offset
            } else {
                offset
            }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(i128::from(seconds) * NANOS_PER_SECOND + nanos)
}

/// Formats nanoseconds since the Unix epoch in UTC: `YYYY-MM-DDTHH:MM:SSZ` for a whole second, else with the
/// fraction's digits up to the last non-zero one (`2026-11-30T12:00:00.5Z`).
pub fn format_instant(nanos: i128) -> String {
    let seconds = nanos.div_euclid(NANOS_PER_SECOND);
    let fraction = nanos.rem_euclid(NANOS_PER_SECOND);
    let whole = format_timestamp(i64::try_from(seconds).unwrap_or(if seconds < 0 { i64::MIN } else { i64::MAX }));
    if fraction == 0 {
        return whole;
    }
    let digits = format!("{fraction:09}");
    format!("{}.{}Z", &whole[..whole.len() - 1], digits.trim_end_matches('0'))
}

/// Parses `900s`, `15m`, `24h`, `7d` into seconds.
pub fn parse_duration(text: &str) -> Option<u64> {
    let unit = text.chars().last()?;
    let number: u64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
    let factor = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    number.checked_mul(factor)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's civil calendar algorithms (also `time`'s local dates).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

/// Empty or only white space (Unicode `White_Space`): such an identifier counts as absent.
pub(crate) fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for text in ["1970-01-01T00:00:00Z", "2026-11-30T12:00:00Z", "2000-02-29T23:59:59Z"] {
            assert_eq!(format_timestamp(parse_timestamp(text).unwrap()), text);
        }
        assert_eq!(parse_timestamp("1970-01-02T00:00:00Z"), Some(86_400));
        assert_eq!(parse_timestamp("2026-02-29T00:00:00Z"), None);
        assert_eq!(parse_timestamp("2026-11-30 12:00:00Z"), None);
    }

    #[test]
    fn instants_take_fractions_and_offsets() {
        let noon = i128::from(parse_timestamp("2026-11-30T12:00:00Z").unwrap()) * NANOS_PER_SECOND;
        for (text, nanos) in [
            ("2026-11-30T12:00:00Z", 0),
            ("2026-11-30t12:00:00z", 0),
            ("2026-11-30T12:00:00.5Z", 500_000_000),
            ("2026-11-30T12:00:00.123Z", 123_000_000),
            ("2026-11-30T12:00:00.000000001Z", 1),
            ("2026-11-30T12:00:00.999999999Z", 999_999_999),
            ("2026-11-30T14:00:00+02:00", 0),
            ("2026-11-30T14:00:00.25+02:00", 250_000_000),
            ("2026-11-30T06:30:00-05:30", 0),
            ("2026-11-30T12:00:00-00:00", 0),
            ("2026-12-01T00:00:00+12:00", 0),
        ] {
            assert_eq!(parse_instant(text), Some(noon + nanos), "{text}");
        }
        assert_eq!(parse_instant("1970-01-01T00:30:00+01:00"), Some(-1800 * NANOS_PER_SECOND));
        for bad in [
            "2026-11-30T12:00:00",
            "2026-11-30T12:00:00.Z",
            "2026-11-30T12:00:00.1234567891Z",
            "2026-11-30T12:00:60Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30 12:00:00Z",
            "2026-11-30T12:00:00+0200",
            "2026-11-30T12:00:00+24:00",
            "2026-11-30T12:00:00+02:60",
            "2026-11-30T12:00:00+02:00Z",
            "2026-11-30T12:00:00Z ",
            "2026-11-30T12:00:00,5Z",
            "2026-02-29T12:00:00Z",
            "+2026-11-30T12:00:00Z",
            "2026-11-30T12:00:00.5",
            "2026-11-30T12:00:00.+1Z",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
        assert_eq!(format_instant(noon), "2026-11-30T12:00:00Z");
        assert_eq!(format_instant(noon + 500_000_000), "2026-11-30T12:00:00.5Z");
        assert_eq!(format_instant(noon + 1), "2026-11-30T12:00:00.000000001Z");
        assert_eq!(format_instant(-1), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(Decimal::parse("12.50"), Decimal::parse("12.5"));
        assert!(Decimal::parse("0.1").unwrap() < Decimal::parse("0.10000001").unwrap());
        assert_eq!(Decimal::parse("1."), None);
        assert_eq!(Decimal::parse("-3.25").unwrap().to_string(), "-3.25");
        assert_eq!(Money::parse("100 USD").unwrap().to_string(), "100 USD");
        assert_eq!(Money::parse("100 usd"), None);
        assert_eq!(parse_duration("15m"), Some(900));
        assert_eq!(parse_duration("1é"), None);
    }
}
