//! The time bounds of one response: no progress for the idle timeout, the total
//! deadline, and the grace after a finish reason, kept by one timer.

use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::error::{ModelError, ModelErrorKind};

/// The time bounds of one response, kept by one timer: no progress for `idle`, the
/// total deadline, and the grace after a finish reason. The timer moves only when it
/// fires: arming a fresh one for every chunk costs more than the chunk.
pub(crate) struct Clock {
    idle: Duration,
    last_progress: Instant,
    /// Bytes arrived since the last progress (keep-alive comments, empty chunks, status
    /// events, part of an event).
    quiet_bytes: bool,
    deadline: Instant,
    grace: Option<Instant>,
    sleep: Pin<Box<Sleep>>,
}

/// Which bound a response reached.
pub(crate) enum Alarm {
    Idle,
    Deadline,
    Grace,
}

impl Clock {
    pub fn new(idle: Duration, deadline: Instant) -> Self {
        let now = Instant::now();
        let first = (now + idle).min(deadline);
        Clock {
            idle,
            last_progress: now,
            quiet_bytes: false,
            deadline,
            grace: None,
            sleep: Box::pin(tokio::time::sleep_until(first)),
        }
    }

    /// Output arrived.
    pub fn progress(&mut self) {
        self.last_progress = Instant::now();
        self.quiet_bytes = false;
    }

    /// Bytes arrived that made no output.
    pub fn quiet(&mut self) {
        self.quiet_bytes = true;
    }

    /// A finish reason arrived: the message completes at most `grace` from now.
    pub fn start_grace(&mut self, grace: Duration) {
        if self.grace.is_some() {
            return;
        }
        let at = Instant::now() + grace;
        self.grace = Some(at);
        if at < self.sleep.deadline() {
            self.sleep.as_mut().reset(at);
        }
    }

    /// Resolves when a bound is reached. A reached grace wins: the reply is whole.
    pub async fn alarm(&mut self) -> Alarm {
        loop {
            (&mut self.sleep).await;
            let now = Instant::now();
            let idle_at = self.last_progress + self.idle;
            if self.grace.is_some_and(|at| now >= at) {
                return Alarm::Grace;
            }
            if now >= self.deadline {
                return Alarm::Deadline;
            }
            if now >= idle_at {
                return Alarm::Idle;
            }
            let next = self.grace.map_or(idle_at, |at| at.min(idle_at)).min(self.deadline);
            self.sleep.as_mut().reset(next);
        }
    }

    pub fn idle_error(&self) -> ModelError {
        let secs = self.idle.as_secs();
        let message = if self.quiet_bytes {
            format!(
                "the stream stalled: no output for {secs} s, only keep-alive comments, empty chunks, status events or part of a line"
            )
        } else {
            format!("the stream stalled: no data for {secs} s")
        };
        ModelError::new(ModelErrorKind::Idle, message)
    }
}

/// `90 s`, `30 min`, `2 h`.
fn human(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        _ => format!("{} h", secs / 3600),
    }
}

/// The error once a response has taken longer than `limit`.
pub(crate) fn deadline_error(limit: Duration) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!(
            "the response took longer than the {} allowed for one response (response_deadline); it was stopped",
            human(limit)
        ),
    )
}
