//! The size bounds of one reply, whatever its API: how much output it may carry, how
//! long one event or a whole body may be.

use crate::error::{ModelError, ModelErrorKind};

/// Output keel accepts per token of `max_tokens`: far more than any tokenizer's
/// average (about 4 bytes), so only a server that ignores the cap reaches it.
const BYTES_PER_TOKEN: u64 = 32;
/// Output accepted beyond `BYTES_PER_TOKEN * max_tokens`.
const OUTPUT_SLACK: u64 = 1 << 20;
/// The smallest bound on one event or a whole body.
const MIN_EVENT_BYTES: u64 = 16 << 20;

/// Output charged for each tool call, whatever it carries: a call is at least a few
/// tokens (id, name, braces), and a flood of empty calls must meet the limit too.
pub(crate) const CALL_COST: usize = 256;

/// The size bounds of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Text, reasoning and tool-call bytes (names, ids, arguments) one reply may carry;
    /// past it the reply fails with [`ModelErrorKind::LimitExceeded`].
    pub max_output_bytes: u64,
    /// The longest single event, and the largest whole (non-streamed) body.
    pub max_event_bytes: usize,
    /// Every byte of one streamed reply, whatever the events carry (unknown items,
    /// keep-alives, metadata): a peer that streams without end is stopped here.
    pub max_stream_bytes: u64,
}

impl DecodeLimits {
    /// Bounds for a request capped at `max_tokens`: 32 bytes per token plus 1 MiB of
    /// output; events and bodies up to eight times that (JSON escaping, logprobs,
    /// signatures), and at least 16 MiB; a whole stream four times an event.
    pub fn for_max_tokens(max_tokens: u32) -> Self {
        let output = u64::from(max_tokens) * BYTES_PER_TOKEN + OUTPUT_SLACK;
        let event = (output * 8).max(MIN_EVENT_BYTES);
        DecodeLimits {
            max_output_bytes: output,
            max_event_bytes: usize::try_from(event).unwrap_or(usize::MAX),
            max_stream_bytes: event.saturating_mul(4),
        }
    }
}

impl Default for DecodeLimits {
    /// The bounds for `max_tokens` = 8192, the default cap.
    fn default() -> Self {
        Self::for_max_tokens(8192)
    }
}

/// Counts a reply's output against [`DecodeLimits::max_output_bytes`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputMeter {
    used: u64,
    max: u64,
}

impl Default for OutputMeter {
    /// A meter without a limit.
    fn default() -> Self {
        OutputMeter::new(u64::MAX)
    }
}

impl OutputMeter {
    /// A meter accepting at most `max` bytes.
    pub fn new(max: u64) -> Self {
        OutputMeter { used: 0, max }
    }

    /// Counts `bytes` of output; past the limit the reply fails.
    pub fn charge(&mut self, bytes: usize) -> Result<(), ModelError> {
        self.used = self.used.saturating_add(bytes as u64);
        if self.used > self.max {
            return Err(output_limit_error(self.max));
        }
        Ok(())
    }
}

/// The reply carried more output than its cap allows.
fn output_limit_error(limit: u64) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!(
            "the reply passed {} of output, far more than max_tokens allows: the server does not stop \
             where it should, so keel cut the reply there",
            human_bytes(limit)
        ),
    )
}

/// One SSE event or line went past the bound.
pub(crate) fn event_too_large(error: crate::sse::EventTooLarge) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!("the server sent {error} (no line end within it); the reply was stopped there"),
    )
}

/// The stream went past [`DecodeLimits::max_stream_bytes`].
pub(crate) fn stream_too_large(limit: u64) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!("the server streamed more than {} for one reply; it was stopped there", human_bytes(limit)),
    )
}

/// `512 bytes`, `64 KiB`, `1.3 MiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{} KiB", bytes / 1024),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// A stream that ended with no message at all is an error, not an empty answer.
pub(crate) fn empty_reply_error() -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, "the server ended the reply without sending anything")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_fails_past_its_bound() {
        let mut meter = OutputMeter::new(10);
        assert!(meter.charge(10).is_ok());
        let error = meter.charge(1).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
        assert!(error.message.contains("10 bytes"), "{}", error.message);
    }
}
