//! Wall-clock time as Unix seconds, milliseconds or microseconds: what protocol fields
//! (`expires_at`, event-log stamps, member records) carry. The engines never read it; a clock
//! before 1970 reads as 0 rather than failing a call.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

pub fn now_secs() -> u64 {
    since_epoch().as_secs()
}

pub fn now_ms() -> u64 {
    since_epoch().as_millis() as u64
}

pub fn now_us() -> u64 {
    since_epoch().as_micros() as u64
}

pub fn now_secs_f64() -> f64 {
    since_epoch().as_secs_f64()
}
