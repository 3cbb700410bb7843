//! Decoding a reply's body, whatever its API: server-sent events handed one at a time
//! to the API's handler, or a whole JSON document (a server that does not stream).

use crate::client::ModelEvent;
use crate::error::ModelError;
use crate::message::AssistantMessage;
use crate::sse::{SseEvent, SseParser};

use super::limits::{DecodeLimits, event_too_large};

/// What the request's life needs of a decoder: bytes in, deltas out, and enough state
/// to decide on retries, idle time and the finish grace. One decoder per attempt.
pub(crate) trait Decode: Send {
    /// The bounds this decoder enforces.
    fn limits(&self) -> DecodeLimits;
    /// Streamed bytes (any split); deltas go to `out`. `Ok(true)` once the reply said
    /// it is complete (`[DONE]`, `message_stop`, `response.completed`).
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, ModelError>;
    /// The body ended: a last event without its blank line is delivered.
    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError>;
    /// A whole JSON body. Its size is the caller's to bound.
    fn whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError>;
    /// True once any text, reasoning or tool-call delta was produced (no retry after).
    fn has_output(&self) -> bool;
    /// Data events so far; bytes that make none (comments, partial lines) are not
    /// progress.
    fn event_count(&self) -> u64;
    /// True once the reply said why it stopped: it completes at most a grace later.
    fn has_finish_reason(&self) -> bool;
    /// True once nothing more is expected: the message completes now.
    fn is_settled(&self) -> bool;
    /// True when nothing at all arrived.
    fn is_blank(&self) -> bool;
    /// The assembled message, or why the reply is not one.
    fn finish(self: Box<Self>) -> Result<AssistantMessage, ModelError>;
}

/// One API's reading of events: what [`EventStream`] hands each data event to.
pub(crate) trait Events: Send {
    /// One event with data. `Ok(true)` once the reply is complete.
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError>;
    /// A whole (non-streamed) reply document.
    fn on_whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError>;
    /// See [`Decode::has_output`].
    fn has_output(&self) -> bool;
    /// See [`Decode::has_finish_reason`].
    fn has_finish_reason(&self) -> bool;
    /// See [`Decode::is_settled`].
    fn is_settled(&self) -> bool;
    /// See [`Decode::is_blank`].
    fn is_blank(&self) -> bool;
    /// See [`Decode::finish`].
    fn finish(self) -> Result<AssistantMessage, ModelError>;
    /// Whether `event` only keeps the connection alive (Anthropic's `ping`): it is
    /// handled, but it is no progress for the idle timer.
    fn is_keep_alive(&self, _event: &SseEvent) -> bool {
        false
    }
}

/// An SSE body decoded by `H`: the parser, the event count and the `[DONE]` sentinel
/// of OpenAI-style streams are here, the meaning of each event is `H`'s.
#[derive(Debug)]
pub(crate) struct EventStream<H> {
    limits: DecodeLimits,
    sse: SseParser,
    events: Vec<SseEvent>,
    count: u64,
    /// Bytes fed so far.
    read: u64,
    handler: H,
}

impl<H: Events> EventStream<H> {
    /// A decoder for one reply within `limits`.
    pub fn new(limits: DecodeLimits, handler: H) -> Self {
        EventStream {
            limits,
            sse: SseParser::with_max_event_bytes(limits.max_event_bytes),
            events: Vec::new(),
            count: 0,
            read: 0,
            handler,
        }
    }

    /// The handler, for its own finishing.
    pub fn into_handler(self) -> H {
        self.handler
    }

    fn dispatch(&mut self, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let mut result = Ok(false);
        for event in self.events.drain(..) {
            let data = event.data.trim();
            if data == "[DONE]" {
                result = Ok(true);
                break;
            }
            if data.is_empty() {
                continue;
            }
            if !self.handler.is_keep_alive(&event) {
                self.count += 1;
            }
            match self.handler.on_event(&event, out) {
                Ok(false) => {}
                done_or_error => {
                    result = done_or_error;
                    break;
                }
            }
        }
        self.events.clear();
        result
    }
}

impl<H: Events> Decode for EventStream<H> {
    fn limits(&self) -> DecodeLimits {
        self.limits
    }

    fn feed(&mut self, bytes: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        self.read = self.read.saturating_add(bytes.len() as u64);
        if self.read > self.limits.max_stream_bytes {
            return Err(super::limits::stream_too_large(self.limits.max_stream_bytes));
        }
        let fed = self.sse.feed(bytes, &mut self.events);
        let done = self.dispatch(out)?;
        fed.map_err(event_too_large)?;
        Ok(done)
    }

    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        self.sse.finish(&mut self.events);
        self.dispatch(out).map(drop)
    }

    fn whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        self.handler.on_whole(body, out)
    }

    fn has_output(&self) -> bool {
        self.handler.has_output()
    }

    fn event_count(&self) -> u64 {
        self.count
    }

    fn has_finish_reason(&self) -> bool {
        self.handler.has_finish_reason()
    }

    fn is_settled(&self) -> bool {
        self.handler.is_settled()
    }

    fn is_blank(&self) -> bool {
        self.handler.is_blank()
    }

    fn finish(self: Box<Self>) -> Result<AssistantMessage, ModelError> {
        self.handler.finish()
    }
}
