//! Decoding a Chat Completions reply from bytes, whatever the transport.

use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::AssistantMessage;
use crate::sse::{SseEvent, SseParser};

use super::decode::Decoder;
use super::wire::Chunk;

/// Turns the bytes of a streamed (SSE) or whole Chat Completions reply into deltas and
/// one assistant message. The HTTP client uses it; so can anything with its own
/// transport, or a benchmark replaying a recorded stream.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    sse: SseParser,
    decoder: Decoder,
    events: Vec<SseEvent>,
    /// Data events decoded so far.
    event_count: u64,
}

impl StreamDecoder {
    /// A decoder for one reply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds streamed bytes (any split); deltas go to `out`. Returns `Ok(true)` once the
    /// stream said `[DONE]`. An error chunk from the server is an `Err`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        self.sse.feed(bytes, &mut self.events);
        self.dispatch(out)
    }

    /// The body ended: a last event without its blank line is delivered.
    pub fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        self.sse.finish(&mut self.events);
        self.dispatch(out)
    }

    /// Decodes a whole (non-streamed) response body.
    pub fn whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let chunk: Chunk = serde_json::from_slice(body).map_err(|e| {
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
            match serde_json::from_str::<Chunk>(data) {
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
}
