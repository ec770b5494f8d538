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
    }
}
