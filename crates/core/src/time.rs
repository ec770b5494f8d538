//! Timestamps without a date crate: RFC 3339 in UTC.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as `2026-11-21T22:09:15.123Z`.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `time` as RFC 3339 with milliseconds, UTC.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Whether `text` is a time written as [`rfc3339`] writes them
/// (`2026-11-21T22:09:15.123Z`): such times compare as text.
pub fn is_canonical(text: &str) -> bool {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    text.len() == SHAPE.len()
        && text.bytes().zip(SHAPE).all(|(b, want)| match want {
            b'd' => b.is_ascii_digit(),
            other => b == *other,
        })
}

/// Milliseconds since 1970 of a time [`rfc3339`] wrote (None: another
/// shape).
pub fn millis_of(text: &str) -> Option<u64> {
    if !is_canonical(text) {
        return None;
    }
    let n = |at: std::ops::Range<usize>| text[at].parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, min, s, ms) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    let days = days_from_civil(y, m, d);
    let secs = days * 86_400 + h * 3600 + min * 60 + s;
    u64::try_from(secs * 1000 + ms).ok()
}

/// (year, month, day) to days since 1970-01-01 (Howard Hinnant's
/// algorithm, the inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Today's date as `YYYY-MM-DD` (UTC).
pub fn today() -> String {
    now_rfc3339()[..10].to_string()
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(784_111_777_250)),
            "1994-11-06T08:49:37.250Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
        assert!(is_canonical("2026-11-21T22:09:15.123Z"));
        assert!(!is_canonical("2026-11-21T22:09:15Z"));
        assert!(!is_canonical("9999-99-99T99:99:99.999Z "));
        for ms in [0, 784_111_777_250, 951_782_400_000, 1_795_000_000_123] {
            let text = rfc3339(UNIX_EPOCH + Duration::from_millis(ms));
            assert_eq!(millis_of(&text), Some(ms), "{text}");
        }
        assert_eq!(millis_of("yesterday"), None);
    }
}
