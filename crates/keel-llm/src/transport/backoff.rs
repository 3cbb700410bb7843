//! Retry delays: exponential backoff with jitter.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// The wait before retry number `attempt + 1`: 0.5 s doubling per attempt, capped at
/// 30 s, with ±25 % jitter so many clients do not retry in lockstep.
pub fn backoff_delay(attempt: u32) -> Duration {
    let base = 0.5 * 2f64.powi(attempt.min(10) as i32);
    let capped = base.min(30.0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(attempt);
    let unit = (hasher.finish() % 10_000) as f64 / 10_000.0; // [0, 1)
    Duration::from_secs_f64(capped * (0.75 + 0.5 * unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_stays_bounded() {
        for attempt in 0..20 {
            let d = backoff_delay(attempt).as_secs_f64();
            let base = (0.5 * 2f64.powi(attempt as i32)).min(30.0);
            assert!(d >= base * 0.75 && d <= base * 1.25, "attempt {attempt}: {d}");
        }
    }
}
