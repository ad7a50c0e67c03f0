//! Values the runtime reads from a request, the twin of the parts of `crates/remit-lang/src/value.rs` it needs: timestamps
//! (RFC 3339 `date-time`, nanoseconds since the Unix epoch), exact decimals (`Decimal::parse`), money
//! (`Money::parse`) and durations (`parse_duration`), each read from bytes exactly as the interpreter reads the same
//! text (tests/rt_cond.rs compares them on generated strings).

/// Fractional digits of an exact decimal: a decimal is an `i128` counting units of 10^-9 (`remit_lang::value::Decimal`).
pub const DECIMAL_SCALE: u32 = 9;

/// Most bytes of a valid decimal (`-`, 24 integer digits, `.`, 9 fractional digits) or money text (a decimal, a
/// space, three letters): a longer text is not one, so callers may copy a value into a buffer of this size first.
pub const MAX_NUMBER_TEXT: usize = 40;

/// An exact decimal (units of 10^-9) written `-?digits(.digits)?` with at most 24 integer and [`DECIMAL_SCALE`]
/// fractional digits, as `remit_lang::value::Decimal::parse` reads it (`-0` is 0; `1.`, `.5`, `+1`, `1e3` are not
/// decimals); `None` for anything else.
pub fn parse_decimal(text: &[u8]) -> Option<i128> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    // One pass over the bytes (a money argument or attribute is read on every decision that tests it): the whole
    // part's digits in `u64` (exact up to 19 of them), one dot, the fraction's digits (at most nine: below 10^9).
    let (mut whole, mut whole_len) = (0u64, 0usize);
    let (mut units, mut frac_len) = (0u64, 0usize);
    let mut dot = false;
    for &b in digits {
        let d = u32::from(b).wrapping_sub(u32::from(b'0'));
        if d < 10 {
            if dot {
                frac_len += 1;
                if frac_len > DECIMAL_SCALE as usize {
                    return None;
                }
                units = units * 10 + u64::from(d);
            } else {
                whole_len += 1;
                whole = whole.wrapping_mul(10).wrapping_add(u64::from(d));
            }
        } else if b == b'.' && !dot {
            dot = true;
        } else {
            return None;
        }
    }
    // `1.`, `.5` and `-` are not decimals.
    if whole_len == 0 || whole_len > 24 || (dot && frac_len == 0) {
        return None;
    }
    // The fraction in units of 10^-9.
    const SCALE: [u64; 10] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    units *= SCALE.get(DECIMAL_SCALE as usize - frac_len).copied().unwrap_or(1);
    // The usual case in `u64` arithmetic (`i128` multiplications are calls on wasm32): up to 19 digits fit, and
    // times 10^9 plus the fraction as long as that fits too. Whether the product fits is a comparison with a
    // constant: `u64::checked_mul` is a 128-bit multiplication on wasm32, a call (`__multi3`) on every money value.
    const UNIT: u64 = 10u64.pow(DECIMAL_SCALE);
    let wide = || i128::from(whole) * 10i128.pow(DECIMAL_SCALE) + i128::from(units);
    let value = if whole_len <= 19 && whole <= u64::MAX / UNIT {
        whole.wrapping_mul(UNIT).checked_add(units).map_or_else(wide, i128::from)
    } else if whole_len <= 19 {
        wide()
    } else {
        // At most 24 digits, read again in `i128`, times 10^9: below 10^33, far inside `i128`.
        let digits = digits.get(..whole_len)?;
        digits.iter().fold(0i128, |w, &d| w * 10 + i128::from(d - b'0')) * 10i128.pow(DECIMAL_SCALE) + i128::from(units)
    };
    Some(if negative { -value } else { value })
}

/// Money written `"12.50 USD"`: a decimal ([`parse_decimal`]), one space, a currency of three ASCII capitals, as
/// `remit_lang::value::Money::parse` reads it (the text splits at its first space); the amount and the currency.
/// The first space is the fourth byte from the end or the text is no money (the currency would not be three
/// bytes), and an amount with a space before it is no decimal: so the text splits there without a search.
pub fn parse_money(text: &[u8]) -> Option<(i128, [u8; 3])> {
    let split = text.len().checked_sub(4)?;
    let (amount, rest) = (text.get(..split)?, text.get(split..)?);
    let (space, currency) = rest.split_first()?;
    let currency: [u8; 3] = currency.try_into().ok()?;
    if *space != b' ' || !currency.iter().all(|b| b.is_ascii_uppercase()) {
        return None;
    }
    Some((parse_decimal(amount)?, currency))
}

/// Seconds of a duration written `900s`, `15m`, `24h`, `7d`, as `remit_lang::value::parse_duration` reads it: a `u64` as
/// Rust's `u64::from_str` reads it (ASCII digits, an optional leading `+`, leading zeros allowed), then the unit;
/// `None` when it overflows `u64`.
pub fn parse_duration(text: &[u8]) -> Option<u64> {
    duration_of(text.iter().copied())
}

/// [`parse_duration`] over bytes as they come (a duration may be any length: leading zeros), so a request's string
/// can be read without copying it.
pub fn duration_of(bytes: impl Iterator<Item = u8>) -> Option<u64> {
    // Every byte but the last is part of the number; the last is the unit. A non-ASCII last character fails either
    // way: its leading bytes are no digits, and its last byte is no unit.
    let mut last: Option<u8> = None;
    let mut number: u64 = 0;
    let mut digits = 0usize;
    let mut first = true;
    for b in bytes {
        if let Some(d) = last {
            if first && d == b'+' {
                // `u64::from_str` takes one leading `+` (not alone: then there are no digits).
            } else if d.is_ascii_digit() {
                number = number.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
                digits += 1;
            } else {
                return None;
            }
            first = false;
        }
        last = Some(b);
    }
    if digits == 0 {
        return None;
    }
    let factor = match last? {
        b's' => 1,
        b'm' => 60,
        b'h' => 3600,
        b'd' => 86_400,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// Nanoseconds in a second (`remit_lang::value::NANOS_PER_SECOND`): timestamps count nanoseconds since the Unix epoch.
pub const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// Most bytes of a valid timestamp: `YYYY-MM-DDTHH:MM:SS`, a `.` and nine digits, an offset `+HH:MM`.
pub const MAX_TIMESTAMP_TEXT: usize = 35;

/// Nanoseconds since the Unix epoch of an RFC 3339 `date-time` as `remit_lang::value::parse_instant` reads it:
/// `YYYY-MM-DDTHH:MM:SS` (a real calendar date, hours 0-23, minutes and seconds 0-59; `T` or `t`), an optional
/// fraction of 1 to 9 digits, then `Z` / `z` or an offset `+HH:MM` / `-HH:MM` (hours 0-23, minutes 0-59) taken off
/// to give UTC; `None` for anything else.
pub fn parse_timestamp(text: &[u8]) -> Option<i128> {
    let digits = |from: usize, to: usize| -> Option<i64> {
        let mut value = 0i64;
        for &c in text.get(from..to)? {
            if !c.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(c - b'0');
        }
        Some(value)
    };
    let sep = |at: usize, c: u8| text.get(at) == Some(&c);
    if !sep(4, b'-') || !sep(7, b'-') || !matches!(text.get(10), Some(b'T' | b't')) || !sep(13, b':') || !sep(16, b':')
    {
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
    let mut nanos: i64 = 0;
    if sep(at, b'.') {
        // Up to nine digits, each worth a tenth of the one before: the fraction in nanoseconds.
        let mut unit = 100_000_000;
        let mut count = 0;
        while let Some(&c) = text.get(at + 1 + count) {
            if !c.is_ascii_digit() {
                break;
            }
            if count == 9 {
                return None;
            }
            nanos += i64::from(c - b'0') * unit;
            unit /= 10;
            count += 1;
        }
        if count == 0 {
            return None;
        }
        at += 1 + count;
    }
    let offset = match text.get(at..)? {
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
    Some(i128::from(seconds) * NANOS_PER_SECOND + i128::from(nanos))
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

/// Days since 1970-01-01 (Howard Hinnant's civil calendar algorithm). The year has four digits here, so nothing
/// overflows and every division is by a non-zero constant.
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
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
    fn decimals_money_durations() {
        assert_eq!(parse_decimal(b"12.50"), Some(12_500_000_000));
        assert_eq!(parse_decimal(b"12.5"), parse_decimal(b"12.50"));
        assert_eq!(parse_decimal(b"-0"), Some(0));
        assert_eq!(parse_decimal(b"-3.25"), Some(-3_250_000_000));
        assert_eq!(parse_decimal(b"0.000000001"), Some(1));
        assert_eq!(parse_decimal(&[b'9'; 24]), Some(999_999_999_999_999_999_999_999 * 1_000_000_000));
        for bad in ["", "-", "1.", ".5", "+1", "1e3", "1.5.3", "0.1234567891", "1 ", "--1", "\\u0031"] {
            assert_eq!(parse_decimal(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(parse_decimal(&[b'1'; 25]), None);
        assert_eq!(parse_money(b"25.00 USD"), Some((25_000_000_000, *b"USD")));
        assert_eq!(parse_money(b"-1000.00 USD"), Some((-1_000_000_000_000, *b"USD")));
        for bad in ["25 usd", "25 USDX", "25  USD", "25USD", " USD", "25 US", "1e3 USD", "25 ÉUR"] {
            assert_eq!(parse_money(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(parse_duration(b"15m"), Some(900));
        assert_eq!(parse_duration(b"+15m"), Some(900));
        assert_eq!(parse_duration(b"00000000000000000000000015m"), Some(900));
        assert_eq!(parse_duration(b"7d"), Some(604_800));
        assert_eq!(parse_duration(b"18446744073709551615s"), Some(u64::MAX));
        for bad in ["", "s", "+s", "++1s", "-1s", "1", "1é", "1 s", "18446744073709551616s", "18446744073709551615m"] {
            assert_eq!(parse_duration(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn timestamps() {
        const S: i128 = NANOS_PER_SECOND;
        assert_eq!(parse_timestamp(b"1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp(b"2000-02-29T23:59:59Z"), Some(951_868_799 * S));
        assert_eq!(parse_timestamp(b"2000-02-29t23:59:59.5z"), Some(951_868_799 * S + S / 2));
        assert_eq!(parse_timestamp(b"1970-01-01T00:00:00.000000001Z"), Some(1));
        assert_eq!(parse_timestamp(b"1970-01-01T01:00:00.123+01:00"), Some(123_000_000));
        assert_eq!(parse_timestamp(b"1969-12-31T23:30:00-00:30"), Some(0));
        for bad in [
            "2026-02-29T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T12:00:00",
            "2026-11-30 12:00:00Z",
            "2026-11-30T12:00:60Z",
            "2026-11-30T12:00:00.Z",
            "2026-11-30T12:00:00.1234567891Z",
            "2026-11-30T12:00:00+0100",
            "2026-11-30T12:00:00+01:60",
            "2026-11-30T12:00:00+24:00",
            "2026-11-30T12:00:00.5",
        ] {
            assert_eq!(parse_timestamp(bad.as_bytes()), None, "{bad}");
        }
    }
}
