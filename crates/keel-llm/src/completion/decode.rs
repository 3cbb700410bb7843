//! Reading llama-server's `/completion` reply: streamed, one event per piece of text
//! (`{"content": "…", "stop": false}`) and a last one with `"stop": true`, why it
//! stopped and what it cost; whole, one document of the same fields.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::{AssistantMessage, FinishReason};
use crate::repeats::Repeats;
use crate::sse::SseEvent;
use crate::transport::errors::classify_error_object;
use crate::transport::escapes::parse_json;
use crate::transport::{Decode, DecodeLimits, EventStream, Events, OutputMeter};

use super::{CompletionReply, FinishReply};

/// One event of the stream, or the whole reply.
#[derive(Debug, Deserialize)]
struct Chunk {
    /// Text generated since the last event (the whole text in a whole reply; empty in
    /// the last event of a stream).
    content: Option<String>,
    /// True in the last event.
    #[serde(default)]
    stop: bool,
    /// `eos`, `word`, `limit` (cut at `n_predict`), `none`.
    stop_type: Option<String>,
    /// Older servers: true when cut at `n_predict`.
    stopped_limit: Option<bool>,
    /// Prompt tokens of this request.
    tokens_evaluated: Option<u64>,
    /// Tokens generated.
    tokens_predicted: Option<u64>,
    timings: Option<Timings>,
    /// An error instead of a reply.
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Timings {
    /// Prompt tokens reused from the slot's cache.
    cache_n: Option<u64>,
}

/// How the reply ended, from its last event.
#[derive(Debug, Clone)]
struct Stop {
    finish: FinishReason,
    raw: Option<String>,
    prompt_tokens: u64,
    generated_tokens: u64,
    cached_tokens: u64,
}

/// Accumulates one reply; its message is made by the caller's [`FinishReply`].
pub(super) struct Reading {
    text: String,
    stop: Option<Stop>,
    meter: OutputMeter,
    /// A model stuck repeating itself (one line, a few sentences or a few characters) is
    /// stopped.
    repeats: Repeats,
    finish: Arc<dyn FinishReply>,
}

impl Reading {
    fn new(limits: DecodeLimits, finish: Arc<dyn FinishReply>) -> Self {
        Reading {
            text: String::new(),
            stop: None,
            meter: OutputMeter::new(limits.max_output_bytes),
            repeats: Repeats::new(),
            finish,
        }
    }

    fn on_chunk(&mut self, chunk: Chunk, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(classify_error_object(&error, None));
        }
        if let Some(text) = chunk.content.filter(|t| !t.is_empty()) {
            self.meter.charge(text.len())?;
            let stuck = self.repeats.push(text.as_bytes());
            self.text.push_str(&text);
            out.push(ModelEvent::TextDelta(text));
            // Stopped here: dropping the stream closes the connection, which ends
            // llama-server's generation instead of letting it run to `n_predict`.
            if stuck && !chunk.stop {
                return Err(ModelError::new(
                    ModelErrorKind::Repeating,
                    "the model kept repeating itself (one line, a few sentences or a few characters, over \
                     and over); its reply was stopped there",
                ));
            }
        }
        if chunk.stop {
            let cut = chunk.stop_type.as_deref() == Some("limit") || chunk.stopped_limit == Some(true);
            self.stop = Some(Stop {
                finish: if cut { FinishReason::Length } else { FinishReason::Stop },
                raw: chunk.stop_type,
                prompt_tokens: chunk.tokens_evaluated.unwrap_or(0),
                generated_tokens: chunk.tokens_predicted.unwrap_or(0),
                cached_tokens: chunk.timings.and_then(|t| t.cache_n).unwrap_or(0),
            });
        }
        Ok(())
    }
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading").field("text", &self.text).field("stop", &self.stop).finish_non_exhaustive()
    }
}

fn unreadable(what: &str, error: &serde_json::Error) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable {what} from llama-server: {error}"))
}

impl Events for Reading {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let chunk: Chunk = parse_json(event.data.trim().as_bytes()).map_err(|e| unreadable("event", &e))?;
        self.on_chunk(chunk, out)?;
        Ok(self.stop.is_some())
    }

    fn on_whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let mut chunk: Chunk = parse_json(body).map_err(|e| unreadable("reply", &e))?;
        if chunk.content.is_none() && chunk.error.is_none() {
            let start: String = String::from_utf8_lossy(body).chars().take(160).collect();
            return Err(ModelError::new(
                ModelErrorKind::InvalidResponse,
                format!(
                    "the server answered with JSON that is not a llama.cpp completion (no content): “{start}”"
                ),
            ));
        }
        // A whole reply is complete whatever it says of stopping.
        chunk.stop = true;
        self.on_chunk(chunk, out)
    }

    fn has_output(&self) -> bool {
        !self.text.is_empty()
    }

    fn has_finish_reason(&self) -> bool {
        self.stop.is_some()
    }

    fn is_settled(&self) -> bool {
        // The last event carries the usage too: nothing more is expected.
        self.stop.is_some()
    }

    fn is_blank(&self) -> bool {
        self.text.is_empty() && self.stop.is_none()
    }

    fn finish(self) -> Result<AssistantMessage, ModelError> {
        let Some(stop) = self.stop else {
            return Err(ModelError::new(
                ModelErrorKind::Network,
                "llama-server's stream ended before its last event (`\"stop\": true`): the reply is incomplete",
            ));
        };
        let reply = CompletionReply {
            text: self.text,
            finish: stop.finish,
            stop_type: stop.raw,
            prompt_tokens: stop.prompt_tokens,
            generated_tokens: stop.generated_tokens,
            cached_tokens: stop.cached_tokens,
        };
        Ok(self.finish.finish(reply))
    }
}

/// A fresh decoder as the transport uses it, one per attempt.
pub(super) fn decoder(limits: DecodeLimits, finish: Arc<dyn FinishReply>) -> Box<dyn Decode> {
    Box::new(EventStream::new(limits, Reading::new(limits, finish)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentBlock, Usage};

    fn plain(reply: CompletionReply) -> AssistantMessage {
        AssistantMessage {
            content: vec![ContentBlock::Text { text: reply.text }],
            finish_reason: reply.finish,
            raw_finish_reason: reply.stop_type,
            usage: Usage {
                input_tokens: reply.prompt_tokens,
                output_tokens: reply.generated_tokens,
                cached_tokens: reply.cached_tokens,
                ..Usage::default()
            },
            ..AssistantMessage::default()
        }
    }

    #[test]
    fn a_stream_gives_deltas_then_a_message_with_the_last_events_usage() {
        let mut decoder = decoder(DecodeLimits::default(), Arc::new(plain));
        let mut out = Vec::new();
        let stream = concat!(
            "data: {\"content\":\"Hel\",\"stop\":false}\n\n",
            "data: {\"content\":\"lo\",\"stop\":false}\n\n",
            "data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"limit\",\"tokens_evaluated\":12,",
            "\"tokens_predicted\":2,\"timings\":{\"cache_n\":10}}\n\n",
        );
        let done = decoder.feed(&stream.as_bytes()[..45], &mut out).unwrap();
        assert!(!done && decoder.has_output() && !decoder.has_finish_reason());
        assert!(decoder.feed(&stream.as_bytes()[45..], &mut out).unwrap());
        assert_eq!(out, vec![ModelEvent::TextDelta("Hel".into()), ModelEvent::TextDelta("lo".into())]);
        assert!(decoder.is_settled());
        let message = decoder.finish().unwrap();
        assert_eq!(message.text(), "Hello");
        assert_eq!(message.finish_reason, FinishReason::Length);
        assert_eq!(
            (message.usage.input_tokens, message.usage.output_tokens, message.usage.cached_tokens),
            (12, 2, 10)
        );
    }

    #[test]
    fn a_stream_without_its_last_event_is_incomplete() {
        let mut decoder = decoder(DecodeLimits::default(), Arc::new(plain));
        let mut out = Vec::new();
        decoder.feed(b"data: {\"content\":\"Hel\",\"stop\":false}\n\n", &mut out).unwrap();
        decoder.end(&mut out).unwrap();
        let error = decoder.finish().unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Network);
    }

    #[test]
    fn errors_in_the_stream_are_classified_by_their_type() {
        let mut decoder = decoder(DecodeLimits::default(), Arc::new(plain));
        let mut out = Vec::new();
        let event = b"data: {\"error\":{\"code\":400,\"type\":\"exceed_context_size_error\",\"message\":\"request (9000 tokens) exceeds the available context size (8192 tokens)\",\"n_prompt_tokens\":9000,\"n_ctx\":8192}}\n\n";
        let error = decoder.feed(event, &mut out).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::ContextOverflow, "{}", error.message);
    }

    #[test]
    fn a_whole_reply_is_one_delta_and_a_message() {
        let mut decoder = decoder(DecodeLimits::default(), Arc::new(plain));
        let mut out = Vec::new();
        decoder.whole(br#"{"content":"caf\u00e9 \ud83d","stop":true,"stop_type":"eos"}"#, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        let message = decoder.finish().unwrap();
        assert_eq!(
            (message.text().as_str(), message.finish_reason),
            ("caf\u{e9} \u{fffd}", FinishReason::Stop)
        );
        let mut other = super::decoder(DecodeLimits::default(), Arc::new(plain));
        let error = other.whole(br#"{"choices":[]}"#, &mut out).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
        assert!(error.message.contains("not a llama.cpp completion"), "{}", error.message);
    }

    #[test]
    fn output_past_the_limit_fails() {
        let limits = DecodeLimits { max_output_bytes: 4, ..DecodeLimits::default() };
        let mut decoder = decoder(limits, Arc::new(plain));
        let mut out = Vec::new();
        let error = decoder.feed(b"data: {\"content\":\"Hello\",\"stop\":false}\n\n", &mut out).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    }

    /// A model stuck writing one line (here inside a call's JSON argument, where lines
    /// end at `\n` escapes) is stopped at the line that makes it stuck, not left to run
    /// to `n_predict`; lines that differ go on.
    #[test]
    fn a_reply_stuck_on_one_line_is_stopped() {
        let mut decoder = decoder(DecodeLimits::default(), Arc::new(plain));
        let mut out = Vec::new();
        let line = r#"data: {"content":"pip install tasker\\n","stop":false}"#;
        let mut fed = 0;
        let error = loop {
            fed += 1;
            match decoder.feed(format!("{line}\n\n").as_bytes(), &mut out) {
                Ok(done) => assert!(!done && fed < 100),
                Err(error) => break error,
            }
        };
        assert_eq!((error.kind, fed), (ModelErrorKind::Repeating, crate::repeats::STUCK_LINES as usize));
        assert!(error.message.contains("kept repeating itself"), "{}", error.message);

        let mut decoder = super::decoder(DecodeLimits::default(), Arc::new(plain));
        for n in 0..100 {
            let event = format!("data: {{\"content\":\"value = compute({n})\\n\",\"stop\":false}}\n\n");
            decoder.feed(event.as_bytes(), &mut out).unwrap();
        }
    }
}
