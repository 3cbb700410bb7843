//! Decoding a Chat Completions reply from bytes, whatever the transport.

use crate::client::ModelEvent;
use crate::error::ModelError;
use crate::message::AssistantMessage;
use crate::transport::{Decode, DecodeLimits, EventStream};

use super::decode::Decoder;

/// Turns the bytes of a streamed (SSE) or whole Chat Completions reply into deltas and
/// one assistant message. The HTTP client uses it; so can anything with its own
/// transport, or a benchmark replaying a recorded stream.
#[derive(Debug)]
pub struct StreamDecoder {
    inner: EventStream<Decoder>,
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
        StreamDecoder { inner: EventStream::new(limits, Decoder::with_output_limit(limits.max_output_bytes)) }
    }

    /// The bounds this decoder enforces.
    pub fn limits(&self) -> DecodeLimits {
        self.inner.limits()
    }

    /// Feeds streamed bytes (any split); deltas go to `out`. Returns `Ok(true)` once the
    /// stream said `[DONE]`. An error chunk from the server is an `Err`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        self.inner.feed(bytes, out)
    }

    /// The body ended: a last event without its blank line is delivered.
    pub fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        self.inner.end(out)
    }

    /// Decodes a whole (non-streamed) response body. Its size is the caller's to bound
    /// ([`DecodeLimits::max_event_bytes`]).
    pub fn whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        self.inner.whole(body, out)
    }

    /// True once any text, reasoning or tool-call delta was produced.
    pub fn has_output(&self) -> bool {
        self.inner.has_output()
    }

    /// How many data events have arrived. Keep-alive comments and blank events are
    /// not events: bytes that produce none are no sign of progress.
    pub fn event_count(&self) -> u64 {
        self.inner.event_count()
    }

    /// True once a finish reason arrived: the reply is complete in substance.
    pub fn has_finish_reason(&self) -> bool {
        self.inner.has_finish_reason()
    }

    /// True once usage arrived after the finish reason: nothing more is expected, the
    /// message can complete without waiting for `[DONE]` or the body's end.
    pub fn is_settled(&self) -> bool {
        self.inner.is_settled()
    }

    /// True when nothing at all arrived (no delta, finish reason or usage).
    pub fn is_blank(&self) -> bool {
        self.inner.is_blank()
    }

    /// The assembled message. With `text_tools`, a tool call written as text to one of
    /// those tools becomes a real call.
    pub fn finish(self, text_tools: Option<&[&str]>) -> AssistantMessage {
        self.inner.into_handler().finish(text_tools)
    }
}

/// A fresh decoder as the transport uses it.
pub(crate) fn decoder(limits: DecodeLimits) -> Box<dyn Decode> {
    Box::new(EventStream::new(limits, Decoder::with_output_limit(limits.max_output_bytes)))
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
