//! Anthropic Messages replies: streamed events (`message_start`, `content_block_start`
//! / `_delta` / `_stop`, `message_delta`, `message_stop`, `ping`, `error`) or a whole
//! message, into keel's deltas and one assistant message.
//!
//! Blocks are kept by the index the API gives them: text, thinking (its text from
//! `thinking_delta`, its signature from `signature_delta`, both byte for byte),
//! `redacted_thinking` (its `data` as received), and `tool_use` (its input from
//! `input_json_delta` fragments; empty input is `{}`). A block of a kind keel does not
//! know is skipped. An `error` event ends the reply with that error: the transport
//! retries it only if nothing was emitted yet.

use serde::Deserialize;
use serde_json::Value;

use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::{AssistantMessage, ContentBlock, FinishReason, ToolCall, Usage};
use crate::sse::SseEvent;
use crate::transport::errors::classify_error_object;
use crate::transport::escapes::parse_json;
use crate::transport::{CALL_COST, Events, OutputMeter};

/// One streamed event, or a whole message (`type: "message"`).
#[derive(Debug, Default, Deserialize)]
struct WireEvent {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    // A whole message has these at the top level.
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct WireDelta {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Token counts. `input_tokens` excludes what was read from or written to the cache.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

/// A block being received.
#[derive(Debug)]
enum Slot {
    Text(String),
    Thinking { text: String, signature: String },
    Redacted(String),
    Tool { ordinal: usize, id: String, name: String, input: String, initial: Option<String>, closed: bool },
    Skipped,
}

/// Accumulates one reply.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// (API index, block), in arrival order.
    slots: Vec<(usize, Slot)>,
    /// The last slot for each API index: a delta finds its block in O(1), however many
    /// blocks the stream opened (a linear search made 100k blocks and 500k deltas cost
    /// minutes of CPU).
    by_index: std::collections::HashMap<usize, usize>,
    calls: usize,
    usage: WireUsage,
    stop_reason: Option<String>,
    started: bool,
    stopped: bool,
    emitted: bool,
    meter: OutputMeter,
}

/// Maps a stop reason to keel's.
fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolUse,
        "refusal" => FinishReason::Error,
        _ => FinishReason::Unknown,
    }
}

impl Decoder {
    /// A decoder accepting at most `max_output` bytes of output.
    pub fn with_output_limit(max_output: u64) -> Self {
        Decoder { meter: OutputMeter::new(max_output), ..Decoder::default() }
    }

    fn slot(&mut self, index: usize) -> Option<&mut Slot> {
        let at = *self.by_index.get(&index)?;
        self.slots.get_mut(at).map(|(_, slot)| slot)
    }

    fn merge_usage(&mut self, usage: WireUsage) {
        let old = self.usage;
        self.usage = WireUsage {
            input_tokens: usage.input_tokens.or(old.input_tokens),
            output_tokens: usage.output_tokens.or(old.output_tokens),
            cache_read_input_tokens: usage.cache_read_input_tokens.or(old.cache_read_input_tokens),
            cache_creation_input_tokens: usage
                .cache_creation_input_tokens
                .or(old.cache_creation_input_tokens),
        };
    }

    /// Applies one event; `Ok(true)` at `message_stop`.
    fn on_wire(&mut self, event: WireEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        match event.kind.as_str() {
            "message_start" => {
                self.started = true;
                if let Some(usage) = event.message.and_then(|m| m.usage) {
                    self.merge_usage(usage);
                }
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or(Value::Null);
                self.start_block(event.index.unwrap_or(self.slots.len()), &block, out)?;
            }
            "content_block_delta" => {
                if let (Some(index), Some(delta)) = (event.index, event.delta) {
                    self.delta(index, delta, out)?;
                }
            }
            "content_block_stop" => {
                if let Some(index) = event.index {
                    self.stop_block(index, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = event.usage {
                    self.merge_usage(usage);
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => return Err(classify_error_object(&event.error.unwrap_or(Value::Null), None)),
            "message" => self.on_message(event, out)?,
            _ => {}
        }
        Ok(false)
    }

    /// A whole message: its blocks as if streamed, then its end.
    fn on_message(&mut self, event: WireEvent, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        self.started = true;
        for (index, block) in event.content.unwrap_or_default().iter().enumerate() {
            self.start_block(index, block, out)?;
            self.stop_block(index, out);
        }
        self.stop_reason = event.stop_reason;
        if let Some(usage) = event.usage {
            self.merge_usage(usage);
        }
        self.stopped = true;
        Ok(())
    }

    fn start_block(
        &mut self,
        index: usize,
        block: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let text = |field: &str| block.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        let slot = match block.get("type").and_then(Value::as_str).unwrap_or_default() {
            "text" => Slot::Text(String::new()),
            "thinking" => Slot::Thinking { text: String::new(), signature: text("signature") },
            "redacted_thinking" => {
                let data = text("data");
                self.meter.charge(data.len())?;
                Slot::Redacted(data)
            }
            "tool_use" => {
                let (id, name) = (text("id"), text("name"));
                self.meter.charge(CALL_COST + id.len() + name.len())?;
                let initial = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string);
                let ordinal = self.calls;
                self.calls += 1;
                self.emitted = true;
                out.push(ModelEvent::ToolCallDelta {
                    index: ordinal,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    arguments: String::new(),
                });
                Slot::Tool { ordinal, id, name, input: String::new(), initial, closed: false }
            }
            _ => Slot::Skipped,
        };
        self.by_index.insert(index, self.slots.len());
        self.slots.push((index, slot));
        // Text a block starts with (a whole message carries it all here).
        let first = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                WireDelta { kind: "text_delta".into(), text: Some(text("text")), ..WireDelta::default() }
            }
            Some("thinking") => WireDelta {
                kind: "thinking_delta".into(),
                thinking: Some(text("thinking")),
                ..WireDelta::default()
            },
            _ => return Ok(()),
        };
        self.delta(index, first, out)
    }

    fn delta(&mut self, index: usize, delta: WireDelta, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let piece = match delta.kind.as_str() {
            "text_delta" => delta.text,
            "thinking_delta" => delta.thinking,
            "signature_delta" => delta.signature,
            "input_json_delta" => delta.partial_json,
            _ => None,
        };
        let Some(piece) = piece.filter(|p| !p.is_empty()) else { return Ok(()) };
        self.meter.charge(piece.len())?;
        let Some(slot) = self.slot(index) else { return Ok(()) };
        let event = match (slot, delta.kind.as_str()) {
            (Slot::Text(text), "text_delta") => {
                text.push_str(&piece);
                ModelEvent::TextDelta(piece)
            }
            (Slot::Thinking { text, .. }, "thinking_delta") => {
                text.push_str(&piece);
                ModelEvent::ThinkingDelta(piece)
            }
            (Slot::Thinking { signature, .. }, "signature_delta") => {
                signature.push_str(&piece);
                return Ok(());
            }
            (Slot::Tool { ordinal, input, .. }, "input_json_delta") => {
                input.push_str(&piece);
                ModelEvent::ToolCallDelta { index: *ordinal, id: None, name: None, arguments: piece }
            }
            _ => return Ok(()),
        };
        self.emitted = true;
        out.push(event);
        Ok(())
    }

    /// A block ended: a tool's input is whole. Empty input is `{}` (or the input the
    /// block started with).
    fn stop_block(&mut self, index: usize, out: &mut Vec<ModelEvent>) {
        if let Some(Slot::Tool { ordinal, input, initial, closed, .. }) = self.slot(index) {
            *closed = true;
            if input.trim().is_empty() {
                *input = initial.take().unwrap_or_else(|| "{}".to_owned());
                out.push(ModelEvent::ToolCallDelta {
                    index: *ordinal,
                    id: None,
                    name: None,
                    arguments: input.clone(),
                });
            } else if serde_json::from_str::<serde::de::IgnoredAny>(input).is_err() {
                tracing::warn!(input = %input, "a tool_use block closed with input that is not JSON");
            }
        }
    }

    fn usage(&self) -> Usage {
        let read = self.usage.cache_read_input_tokens.unwrap_or(0);
        let written = self.usage.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: self.usage.input_tokens.unwrap_or(0) + read + written,
            output_tokens: self.usage.output_tokens.unwrap_or(0),
            cached_tokens: read,
            cache_write_tokens: written,
            reasoning_tokens: 0,
        }
    }

    fn content(slots: Vec<(usize, Slot)>) -> Vec<ContentBlock> {
        let mut slots = slots;
        slots.sort_by_key(|(index, _)| *index);
        slots
            .into_iter()
            .filter_map(|(_, slot)| match slot {
                Slot::Text(text) if !text.is_empty() => Some(ContentBlock::Text { text }),
                Slot::Thinking { text, signature } => {
                    let signature = (!signature.is_empty()).then_some(signature);
                    (!text.is_empty() || signature.is_some())
                        .then_some(ContentBlock::Thinking { text, signature })
                }
                Slot::Redacted(data) => Some(ContentBlock::RedactedThinking { data }),
                Slot::Tool { id, name, input, .. } => {
                    Some(ContentBlock::ToolCall(ToolCall::new(id, name, input)))
                }
                _ => None,
            })
            .collect()
    }
}

impl Events for Decoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        match parse_json::<WireEvent>(event.data.trim().as_bytes()) {
            Ok(mut wire) => {
                if wire.kind.is_empty() {
                    wire.kind = event.event.clone();
                }
                self.on_wire(wire, out)
            }
            Err(e) => {
                tracing::warn!(error = %e, event = %event.event, "skipping an unreadable stream event");
                Ok(false)
            }
        }
    }

    fn on_whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let wire: WireEvent = parse_json(body).map_err(|e| {
            ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable response: {e}"))
        })?;
        match wire.kind.as_str() {
            "error" => Err(classify_error_object(&wire.error.unwrap_or(Value::Null), None)),
            "message" => self.on_message(wire, out),
            // Not a message: the transport names the body.
            _ => Ok(()),
        }
    }

    fn has_output(&self) -> bool {
        self.emitted
    }

    fn has_finish_reason(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn is_settled(&self) -> bool {
        self.stopped
    }

    fn is_blank(&self) -> bool {
        !self.started && !self.emitted
    }

    fn is_keep_alive(&self, event: &SseEvent) -> bool {
        event.event == "ping" || matches!(event.data.trim(), r#"{"type": "ping"}"# | r#"{"type":"ping"}"#)
    }

    fn finish(self) -> Result<AssistantMessage, ModelError> {
        if !self.stopped && self.stop_reason.is_none() {
            return Err(ModelError::new(
                ModelErrorKind::Network,
                "the stream ended before the message did (no stop reason, no message_stop)",
            ));
        }
        let usage = self.usage();
        let mut reason = self.stop_reason.as_deref().map_or(FinishReason::Stop, finish_reason);
        let content = Decoder::content(self.slots);
        if reason == FinishReason::Stop && content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_))) {
            reason = FinishReason::ToolUse;
        }
        Ok(AssistantMessage {
            content,
            finish_reason: reason,
            raw_finish_reason: self.stop_reason,
            usage,
            interrupted: false,
            origin: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Decode, DecodeLimits, EventStream};
    use pretty_assertions::assert_eq;

    fn decode(stream: &str) -> (Vec<ModelEvent>, Result<AssistantMessage, ModelError>) {
        let mut decoder = EventStream::new(DecodeLimits::default(), Decoder::default());
        let mut out = Vec::new();
        let fed = decoder.feed(stream.as_bytes(), &mut out).and_then(|_| decoder.end(&mut out));
        let result = fed.and_then(|()| Box::new(decoder).finish());
        (out, result)
    }

    #[test]
    fn a_signed_thinking_block_and_a_tool_call_with_empty_input() {
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":20,\"output_tokens\":1}}}\n\n\
            data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"List it.\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"c2ln\"}}\n\n\
            data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
            data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"list_files\",\"input\":{}}}\n\n\
            data: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
            data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":30}}\n\n\
            data: {\"type\":\"message_stop\"}\n\n";
        let (events, result) = decode(stream);
        let message = result.unwrap();
        assert_eq!(
            message.content,
            vec![
                ContentBlock::Thinking { text: "List it.".into(), signature: Some("c2ln".into()) },
                ContentBlock::ToolCall(ToolCall::new("toolu_1", "list_files", "{}")),
            ]
        );
        assert_eq!(
            message.usage,
            Usage {
                input_tokens: 125,
                output_tokens: 30,
                cached_tokens: 100,
                cache_write_tokens: 20,
                reasoning_tokens: 0
            }
        );
        assert_eq!(message.finish_reason, FinishReason::ToolUse);
        assert_eq!(events.len(), 3, "{events:?}");
    }

    /// Issue 28, item 10: 100k unknown blocks, then one-byte deltas to the first block:
    /// each delta searched the blocks from the end (167 s of CPU at 500k deltas). It is a
    /// lookup now; a quadratic search here would make this test take minutes.
    #[test]
    fn deltas_find_their_block_directly_however_many_blocks_came() {
        let mut stream = String::from(
            "data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        );
        for index in 1..=100_000 {
            stream.push_str(&format!(
                "data: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"x_unknown\"}}}}\n\n"
            ));
        }
        for _ in 0..100_000 {
            stream.push_str("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n");
        }
        stream.push_str("data: {\"type\":\"message_stop\"}\n\n");
        let mut decoder = EventStream::new(DecodeLimits::for_max_tokens(200_000), Decoder::default());
        let mut out = Vec::new();
        decoder.feed(stream.as_bytes(), &mut out).unwrap();
        let message = Box::new(decoder).finish().unwrap();
        assert_eq!(message.text().len(), 100_000);
    }

    #[test]
    fn a_stream_cut_before_its_end_is_a_retryable_error() {
        let stream = "data: {\"type\":\"message_start\",\"message\":{}}\n\n\
            data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
        let error = decode(stream).1.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Network);
        assert!(error.kind.is_retryable());
    }

    #[test]
    fn an_error_event_is_classified() {
        let stream = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let error = decode(stream).1.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Server);
        assert!(error.message.contains("Overloaded"));
    }
}
