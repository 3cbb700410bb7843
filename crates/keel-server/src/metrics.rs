//! The server's counters, shared by the manager, the hubs and `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since the server started.
#[derive(Debug, Default)]
pub struct Metrics {
    /// HTTP requests answered.
    pub requests: AtomicU64,
    /// Requests answered with a 5xx status.
    pub server_errors: AtomicU64,
    /// Turns started.
    pub turns_started: AtomicU64,
    /// Turns whose log could not be written to the end (the store failed).
    pub turns_failed: AtomicU64,
    /// Turns that waited in line before running.
    pub turns_queued: AtomicU64,
    /// Sum of the turns' durations in milliseconds.
    pub turn_ms: AtomicU64,
    /// Steps ended.
    pub steps: AtomicU64,
    /// Sum of the steps' durations (request, reply, tools) in microseconds.
    pub step_us: AtomicU64,
    /// Turns ended by a model error (retries exhausted, auth, …).
    pub model_errors: AtomicU64,
    /// Model requests retried.
    pub model_retries: AtomicU64,
}

impl Metrics {
    /// Counts one more.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
