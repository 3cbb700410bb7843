//! RFC 3339 timestamps without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_rfc3339() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    format_unix_millis(since.as_millis() as i64)
}

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds. Written
/// digit by digit: it runs for every appended event.
pub fn format_unix_millis(millis: i64) -> String {
    let secs = millis.div_euclid(1000);
    let ms = millis.rem_euclid(1000) as u32;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60
        );
    }
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, value: u32, width: usize| {
        let mut v = value;
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, year as u32, 4);
    put(5, month, 2);
    put(8, day, 2);
    put(11, rem / 3600, 2);
    put(14, (rem % 3600) / 60, 2);
    put(17, rem % 60, 2);
    put(20, ms, 3);
    String::from_utf8_lossy(&out).into_owned()
}

/// The (year, month, day) of `days` since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_unix_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_unix_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_unix_millis(1_796_015_966_000), "2026-11-30T05:19:26.000Z");
    }
}
