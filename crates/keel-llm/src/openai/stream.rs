//! Decoding a Chat Completions reply from bytes, whatever the transport.

use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::AssistantMessage;
use crate::sse::{SseEvent, SseParser};

/// Output keel accepts per token of `max_tokens`: far more than any tokenizer's
/// average (about 4 bytes), so only a server that ignores the cap reaches it.
const BYTES_PER_TOKEN: u64 = 32;
/// Output accepted beyond `BYTES_PER_TOKEN * max_tokens`.
const OUTPUT_SLACK: u64 = 1 << 20;
/// The smallest bound on one event or a whole body.
const MIN_EVENT_BYTES: u64 = 16 << 20;

/// The size bounds of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Text, reasoning and tool-call bytes (names, ids, arguments) one reply may carry;
    /// past it the reply fails with [`ModelErrorKind::LimitExceeded`].
    pub max_output_bytes: u64,
    /// The longest single event, and the largest whole (non-streamed) body.
    pub max_event_bytes: usize,
}

impl DecodeLimits {
    /// Bounds for a request capped at `max_tokens`: 32 bytes per token plus 1 MiB of
    /// output; events and bodies up to eight times that (JSON escaping, logprobs), and
    /// at least 16 MiB.
    pub fn for_max_tokens(max_tokens: u32) -> Self {
        let output = u64::from(max_tokens) * BYTES_PER_TOKEN + OUTPUT_SLACK;
        let event = (output * 8).max(MIN_EVENT_BYTES);
        DecodeLimits {
            max_output_bytes: output,
            max_event_bytes: usize::try_from(event).unwrap_or(usize::MAX),
        }
    }
}

impl Default for DecodeLimits {
    /// The bounds for `max_tokens` = 8192, the default cap.
    fn default() -> Self {
        Self::for_max_tokens(8192)
    }
}

use super::decode::Decoder;
use super::wire;

/// Turns the bytes of a streamed (SSE) or whole Chat Completions reply into deltas and
/// one assistant message. The HTTP client uses it; so can anything with its own
/// transport, or a benchmark replaying a recorded stream.
#[derive(Debug)]
pub struct StreamDecoder {
    limits: DecodeLimits,
    sse: SseParser,
    decoder: Decoder,
    events: Vec<SseEvent>,
    /// Data events decoded so far.
    event_count: u64,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::with_limits(DecodeLimits::default())
    }
}

impl StreamDecoder {
    /// A decoder for one reply, with [`DecodeLimits::default`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder for one reply within `limits`.
    pub fn with_limits(limits: DecodeLimits) -> Self {
        StreamDecoder {
            limits,
            sse: SseParser::with_max_event_bytes(limits.max_event_bytes),
            decoder: Decoder::with_output_limit(limits.max_output_bytes),
            events: Vec::new(),
            event_count: 0,
        }
    }

    /// The bounds this decoder enforces.
    pub fn limits(&self) -> DecodeLimits {
        self.limits
    }

    /// Feeds streamed bytes (any split); deltas go to `out`. Returns `Ok(true)` once the
    /// stream said `[DONE]`. An error chunk from the server is an `Err`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let fed = self.sse.feed(bytes, &mut self.events);
        let done = self.dispatch(out)?;
        fed.map_err(|e| {
            ModelError::new(
                ModelErrorKind::LimitExceeded,
                format!("the server sent {e} (no line end within it); the reply was stopped there"),
            )
        })?;
        Ok(done)
    }

    /// The body ended: a last event without its blank line is delivered.
    pub fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        self.sse.finish(&mut self.events);
        self.dispatch(out)
    }

    /// Decodes a whole (non-streamed) response body. Its size is the caller's to bound
    /// ([`DecodeLimits::max_event_bytes`]).
    pub fn whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let chunk = wire::parse_chunk_bytes(body).map_err(|e| {
            ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable response: {e}"))
        })?;
        self.decoder.on_chunk(chunk, out)
    }

    fn dispatch(&mut self, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let mut done = false;
        let mut result = Ok(());
        for event in self.events.drain(..) {
            let data = event.data.trim();
            if data == "[DONE]" {
                done = true;
                break;
            }
            if data.is_empty() {
                continue;
            }
            self.event_count += 1;
            match wire::parse_chunk(data) {
                Ok(chunk) => {
                    if let Err(error) = self.decoder.on_chunk(chunk, out) {
                        result = Err(error);
                        break;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable stream chunk"),
            }
        }
        self.events.clear();
        result.map(|()| done)
    }

    /// True once any text, reasoning or tool-call delta was produced.
    pub fn has_output(&self) -> bool {
        self.decoder.emitted
    }

    /// How many data events have arrived. Keep-alive comments and blank events are
    /// not events: bytes that produce none are no sign of progress.
    pub fn event_count(&self) -> u64 {
        self.event_count
    }

    /// True once a finish reason arrived: the reply is complete in substance.
    pub fn has_finish_reason(&self) -> bool {
        self.decoder.has_finish_reason()
    }

    /// True once usage arrived after the finish reason: nothing more is expected, the
    /// message can complete without waiting for `[DONE]` or the body's end.
    pub fn is_settled(&self) -> bool {
        self.decoder.is_settled()
    }

    /// True when nothing at all arrived (no delta, finish reason or usage).
    pub fn is_blank(&self) -> bool {
        self.decoder.is_blank()
    }

    /// The assembled message. With `text_tools`, a tool call written as text to one of
    /// those tools becomes a real call.
    pub fn finish(self, text_tools: Option<&[&str]>) -> AssistantMessage {
        self.decoder.finish(text_tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_stream_and_a_whole_body_alike() {
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let mut decoder = StreamDecoder::new();
        let mut out = Vec::new();
        assert!(!decoder.feed(&stream[..30], &mut out).unwrap());
        assert!(decoder.feed(&stream[30..], &mut out).unwrap());
        assert_eq!(out.len(), 2);
        assert_eq!(decoder.finish(None).text(), "Hello");
        let mut whole = StreamDecoder::new();
        whole
            .whole(br#"{"choices":[{"message":{"content":"Hello"},"finish_reason":"stop"}]}"#, &mut out)
            .unwrap();
        assert_eq!(whole.finish(None).text(), "Hello");
    }

    #[test]
    fn a_whole_body_with_a_lone_surrogate_keeps_its_text() {
        let mut decoder = StreamDecoder::new();
        let mut out = Vec::new();
        decoder
            .whole(
                br#"{"choices":[{"message":{"content":"caf\u00e9 \ud83d"},"finish_reason":"stop"}]}"#,
                &mut out,
            )
            .unwrap();
        assert_eq!(decoder.finish(None).text(), "caf\u{e9} \u{fffd}");
    }
}
