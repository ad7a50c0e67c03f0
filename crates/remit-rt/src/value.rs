//! Values the runtime reads from a request, the twin of the parts of `src/value.rs` it needs: timestamps
//! (`YYYY-MM-DDTHH:MM:SSZ`, seconds since the Unix epoch) and the scale of exact decimals.

/// Fractional digits of an exact decimal: a decimal is an `i128` counting units of 10^-9 (`remit::value::Decimal`).
pub const DECIMAL_SCALE: u32 = 9;

/// Seconds since the Unix epoch of a UTC timestamp written exactly `YYYY-MM-DDTHH:MM:SSZ` (a real calendar date, hours
/// 0-23, minutes and seconds 0-59), as `remit::value::parse_timestamp` reads it; `None` for anything else.
pub fn parse_timestamp(text: &[u8]) -> Option<i64> {
    let b: &[u8; 20] = text.try_into().ok()?;
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let mut value = 0i64;
        for &c in b.get(from..to)? {
            if !c.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(c - b'0');
        }
        Some(value)
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

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's civil calendar algorithm). The year has four digits here, so nothing
/// overflows and every division is by a non-zero constant.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp(b"1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp(b"2000-02-29T23:59:59Z"), Some(951_868_799));
        for bad in ["2026-02-29T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T12:00:00", "2026-11-30 12:00:00Z"] {
            assert_eq!(parse_timestamp(bad.as_bytes()), None, "{bad}");
        }
    }
}
