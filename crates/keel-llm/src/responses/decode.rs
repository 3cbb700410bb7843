//! OpenAI Responses replies: streamed events or a whole response object, into keel's
//! deltas and one assistant message.
//!
//! Output items are followed from `response.output_item.added` to
//! `response.output_item.done`, which is authoritative: a message's text, a call's
//! arguments and a reasoning item (kept verbatim, `encrypted_content` and all) are taken
//! from it. Deltas (`output_text`, `function_call_arguments`, `reasoning_summary_text`,
//! `reasoning_text`) stream in between. `response.completed` ends the reply with usage
//! (cached and reasoning tokens); `response.incomplete` ends it cut (`max_output_tokens`
//! is a length stop); `response.failed` and `error` end it with an error (a context
//! overflow, a rate limit, …). A stream that ends without `response.completed` is a
//! retryable error. Events name items by `item_id` and, at OpenAI, by `output_index`;
//! llama.cpp sends only the id.

use serde::Deserialize;
use serde_json::Value;

use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::{AssistantMessage, ContentBlock, FinishReason, ToolCall, Usage};
use crate::sse::SseEvent;
use crate::transport::errors::classify_error_object;
use crate::transport::escapes::parse_json;
use crate::transport::{CALL_COST, Events, OutputMeter};

use super::wire::API;

/// One streamed event (or, with `object: "response"`, a whole response).
#[derive(Debug, Default, Deserialize)]
struct WireEvent {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    response: Option<WireResponse>,
    // `error` events carry these at the top level.
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireResponse {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Option<Vec<Value>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    incomplete_details: Option<Value>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<Details>,
    #[serde(default)]
    output_tokens_details: Option<Details>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    reasoning_tokens: u64,
}

/// What an output item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Call { ordinal: usize },
    Reasoning,
    Other,
}

/// An output item being received.
#[derive(Debug)]
struct Slot {
    id: Option<String>,
    kind: Kind,
    /// Text, arguments or reasoning text so far.
    text: String,
    /// Which reasoning summary part the text is in.
    part: Option<u64>,
    /// The item as `output_item.done` gave it (or as added, until then).
    item: Value,
    done: bool,
}

/// Accumulates one reply.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    slots: Vec<Slot>,
    /// The last slot with each item id and output index (lookups stay O(1) however many
    /// items a stream holds).
    by_id: std::collections::HashMap<String, usize>,
    by_index: std::collections::HashMap<u64, usize>,
    calls: usize,
    usage: Option<WireUsage>,
    /// `completed`, or `incomplete` with its reason.
    status: Option<String>,
    started: bool,
    emitted: bool,
    meter: OutputMeter,
}

fn text_of(item: &Value, field: &str) -> String {
    item.get(field).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The text of a message item's `output_text` parts, or of a reasoning item's summary
/// parts (or, without a summary, its `reasoning_text` content) joined by blank lines.
fn item_text(item: &Value, kind: Kind) -> Option<String> {
    let parts = |field: &str| -> Vec<String> {
        item.get(field)
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    match kind {
        Kind::Message => Some(parts("content").concat()),
        Kind::Reasoning => {
            let summary = parts("summary");
            Some(if summary.is_empty() { parts("content").join("\n\n") } else { summary.join("\n\n") })
        }
        Kind::Call { .. } => Some(text_of(item, "arguments")),
        Kind::Other => None,
    }
}

impl Decoder {
    /// A decoder accepting at most `max_output` bytes of output.
    pub fn with_output_limit(max_output: u64) -> Self {
        Decoder { meter: OutputMeter::new(max_output), ..Decoder::default() }
    }

    /// The slot an event names: by item id, else by output index; an event that names
    /// neither is for the latest item.
    fn find(&self, id: Option<&str>, index: Option<u64>) -> Option<usize> {
        if let Some(at) = id.and_then(|id| self.by_id.get(id)) {
            return Some(*at);
        }
        match (id, index) {
            (_, Some(index)) => self.by_index.get(&index).copied(),
            (None, None) => self.slots.len().checked_sub(1),
            (Some(_), None) => None,
        }
    }

    fn added(
        &mut self,
        item: Value,
        output_index: Option<u64>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<usize, ModelError> {
        let kind = match item.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message" => Kind::Message,
            "reasoning" => Kind::Reasoning,
            "function_call" => {
                let ordinal = self.calls;
                self.calls += 1;
                let (call_id, name) = (text_of(&item, "call_id"), text_of(&item, "name"));
                self.meter.charge(CALL_COST + call_id.len() + name.len())?;
                self.emitted = true;
                out.push(ModelEvent::ToolCallDelta {
                    index: ordinal,
                    id: Some(call_id),
                    name: Some(name),
                    arguments: String::new(),
                });
                Kind::Call { ordinal }
            }
            _ => Kind::Other,
        };
        let id = item.get("id").and_then(Value::as_str).map(str::to_owned);
        // An item keel does not know is not kept: it is never sent back.
        let item = if kind == Kind::Other { Value::Null } else { item };
        let at = self.slots.len();
        if let Some(id) = &id {
            self.by_id.insert(id.clone(), at);
        }
        if let Some(index) = output_index {
            self.by_index.insert(index, at);
        }
        self.slots.push(Slot { id, kind, text: String::new(), part: None, item, done: false });
        Ok(at)
    }

    /// A delta of text, arguments or reasoning for the slot the event names.
    fn delta(&mut self, event: &WireEvent, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let Some(delta) = event.delta.as_deref().filter(|d| !d.is_empty()) else { return Ok(()) };
        let Some(at) = self.find(event.item_id.as_deref(), event.output_index) else { return Ok(()) };
        self.meter.charge(delta.len())?;
        let slot = &mut self.slots[at];
        let event = match (slot.kind, event.kind.as_str()) {
            (Kind::Message, "response.output_text.delta") => ModelEvent::TextDelta(delta.to_owned()),
            (Kind::Call { ordinal }, "response.function_call_arguments.delta") => ModelEvent::ToolCallDelta {
                index: ordinal,
                id: None,
                name: None,
                arguments: delta.to_owned(),
            },
            (Kind::Reasoning, "response.reasoning_summary_text.delta" | "response.reasoning_text.delta") => {
                let part = event.summary_index;
                let mut piece = delta.to_owned();
                if slot.part.is_some() && slot.part != part && !slot.text.is_empty() {
                    piece.insert_str(0, "\n\n");
                }
                slot.part = part;
                ModelEvent::ThinkingDelta(piece)
            }
            _ => return Ok(()),
        };
        match &event {
            ModelEvent::TextDelta(text) | ModelEvent::ThinkingDelta(text) => slot.text.push_str(text),
            ModelEvent::ToolCallDelta { arguments, .. } => slot.text.push_str(arguments),
            _ => {}
        }
        self.emitted = true;
        out.push(event);
        Ok(())
    }

    /// `output_item.done`: the item is final. What its deltas did not show is shown
    /// now (a server that sends no deltas).
    fn done(
        &mut self,
        item: Value,
        output_index: Option<u64>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let id = item.get("id").and_then(Value::as_str).map(str::to_owned);
        let at = match self.find(id.as_deref(), output_index) {
            Some(at) => at,
            None => self.added(item.clone(), output_index, out)?,
        };
        let slot = &mut self.slots[at];
        let full = item_text(&item, slot.kind).unwrap_or_default();
        if slot.text.is_empty() && !full.is_empty() {
            self.meter.charge(full.len())?;
            out.push(match slot.kind {
                Kind::Message => ModelEvent::TextDelta(full.clone()),
                Kind::Reasoning => ModelEvent::ThinkingDelta(full.clone()),
                Kind::Call { ordinal } => ModelEvent::ToolCallDelta {
                    index: ordinal,
                    id: None,
                    name: None,
                    arguments: full.clone(),
                },
                Kind::Other => return Ok(()),
            });
            self.emitted = true;
        }
        slot.text = full;
        if slot.kind != Kind::Other {
            slot.item = item;
        }
        slot.done = true;
        Ok(())
    }

    /// The reply ended (`response.completed` or `response.incomplete`).
    fn ended(&mut self, response: WireResponse, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        // The response's own output counts when no item came as events (a whole
        // reply, or a server that sends only the end).
        if self.slots.is_empty() {
            for item in response.output.unwrap_or_default() {
                self.done(item, None, out)?;
            }
        }
        self.usage = response.usage.or(self.usage);
        let status = response.status.unwrap_or_else(|| "completed".to_owned());
        let reason =
            response.incomplete_details.as_ref().and_then(|d| d.get("reason")).and_then(Value::as_str);
        self.status = Some(match reason {
            Some(reason) if status == "incomplete" => format!("incomplete:{reason}"),
            _ => status,
        });
        Ok(())
    }

    /// Applies one event; `Ok(true)` once the reply ended.
    fn on_wire(&mut self, event: WireEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        match event.kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => self.started = true,
            "response.output_item.added" => {
                if let Some(item) = event.item {
                    self.added(item, event.output_index, out)?;
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.item {
                    self.done(item, event.output_index, out)?;
                }
            }
            "response.output_text.delta"
            | "response.function_call_arguments.delta"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta" => self.delta(&event, out)?,
            "response.completed" | "response.incomplete" => {
                self.ended(event.response.unwrap_or_default(), out)?;
                return Ok(true);
            }
            "response.failed" => {
                let error = event.response.and_then(|r| r.error).unwrap_or(Value::Null);
                return Err(classify_error_object(&error, None));
            }
            "error" => {
                let error = serde_json::json!({"code": event.code, "message": event.message});
                return Err(classify_error_object(&error, None));
            }
            _ => {}
        }
        Ok(false)
    }

    fn content(slots: Vec<Slot>) -> Vec<ContentBlock> {
        let mut content = Vec::with_capacity(slots.len());
        for slot in slots {
            match slot.kind {
                Kind::Message if !slot.text.is_empty() => {
                    content.push(ContentBlock::Text { text: slot.text })
                }
                Kind::Reasoning => {
                    if !slot.text.is_empty() {
                        content.push(ContentBlock::Thinking { text: slot.text, signature: None });
                    }
                    content.push(ContentBlock::ProviderItem { api: API.to_owned(), item: slot.item });
                }
                Kind::Call { ordinal } => {
                    let mut call_id = text_of(&slot.item, "call_id");
                    if call_id.is_empty() {
                        call_id = slot.id.clone().unwrap_or_else(|| format!("call_{ordinal}"));
                    }
                    let name = text_of(&slot.item, "name");
                    let call = ToolCall { item_id: slot.id, ..ToolCall::new(call_id, name, slot.text) };
                    content.push(ContentBlock::ToolCall(call));
                }
                _ => {}
            }
        }
        content
    }
}

/// Maps an end status to keel's finish reason.
fn finish_reason(status: &str, calls: bool) -> FinishReason {
    match status {
        "completed" if calls => FinishReason::ToolUse,
        "completed" => FinishReason::Stop,
        "incomplete:max_output_tokens" => FinishReason::Length,
        "incomplete:content_filter" | "failed" => FinishReason::Error,
        _ => FinishReason::Unknown,
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
        let value: Value = parse_json(body).map_err(|e| {
            ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable response: {e}"))
        })?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(classify_error_object(error, None));
        }
        if value.get("object").and_then(Value::as_str) != Some("response") {
            // Not a response: the transport names the body.
            return Ok(());
        }
        let response: WireResponse = serde_json::from_value(value).map_err(|e| {
            ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable response: {e}"))
        })?;
        self.started = true;
        self.ended(response, out)
    }

    fn has_output(&self) -> bool {
        self.emitted
    }

    fn has_finish_reason(&self) -> bool {
        false
    }

    fn is_settled(&self) -> bool {
        self.status.is_some()
    }

    fn is_blank(&self) -> bool {
        !self.started && !self.emitted && self.status.is_none()
    }

    fn finish(self) -> Result<AssistantMessage, ModelError> {
        let Some(status) = self.status else {
            return Err(ModelError::new(
                ModelErrorKind::Network,
                "the stream ended before the response did (no response.completed)",
            ));
        };
        let usage = self.usage.unwrap_or_default();
        let details = |d: Option<Details>| d.unwrap_or_default();
        let usage = Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_tokens: details(usage.input_tokens_details).cached_tokens,
            reasoning_tokens: details(usage.output_tokens_details).reasoning_tokens,
            cache_write_tokens: 0,
        };
        let content = Decoder::content(self.slots);
        let calls = content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_)));
        Ok(AssistantMessage {
            finish_reason: finish_reason(&status, calls),
            raw_finish_reason: Some(status),
            content,
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

    fn decode(events: &[serde_json::Value]) -> (Vec<ModelEvent>, Result<AssistantMessage, ModelError>) {
        let mut decoder = EventStream::new(DecodeLimits::default(), Decoder::default());
        let mut out = Vec::new();
        let mut fed = Ok(false);
        for event in events {
            fed = fed.and_then(|_| decoder.feed(format!("data: {event}\n\n").as_bytes(), &mut out));
        }
        let result = fed.and_then(|_| Box::new(decoder).finish());
        (out, result)
    }

    /// Issue 28, item 6: unknown output items were kept whole (2,500 items of 1 MB took
    /// 2.5 GB). They are not kept, and every byte of a stream counts against a bound.
    #[test]
    fn unknown_items_are_not_kept_and_a_stream_has_a_size_bound() {
        let big = "x".repeat(64 * 1024);
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for n in 0..50 {
            let item = serde_json::json!({"id": format!("u{n}"), "type": "x_future_item", "payload": big});
            decoder.added(item.clone(), Some(n), &mut out).unwrap();
            decoder.done(item, Some(n), &mut out).unwrap();
        }
        assert!(decoder.slots.iter().all(|slot| slot.item.is_null()), "unknown items dropped");
        let limits = DecodeLimits { max_stream_bytes: 1 << 20, ..DecodeLimits::default() };
        let mut stream = EventStream::new(limits, Decoder::default());
        let event = serde_json::json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "x_future_item", "payload": big}});
        let line = format!("data: {event}\n\n");
        let error = (0..40).find_map(|_| stream.feed(line.as_bytes(), &mut out).err()).expect("stopped");
        assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
        assert!(error.message.contains("more than 1.0 MiB for one reply"), "{}", error.message);
    }

    #[test]
    fn summary_parts_are_separated_and_raw_reasoning_text_counts_too() {
        let events = [
            serde_json::json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
            serde_json::json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 0, "delta": "One."}),
            serde_json::json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 1, "delta": "Two."}),
            serde_json::json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "rs_2", "type": "reasoning", "summary": []}}),
            serde_json::json!({"type": "response.reasoning_text.delta", "item_id": "rs_2", "delta": "raw thoughts"}),
            serde_json::json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "rs_2", "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "raw thoughts"}]}}),
            serde_json::json!({"type": "response.completed", "response": {"status": "completed"}}),
        ];
        let (events, result) = decode(&events);
        assert_eq!(
            events,
            vec![
                ModelEvent::ThinkingDelta("One.".into()),
                ModelEvent::ThinkingDelta("\n\nTwo.".into()),
                ModelEvent::ThinkingDelta("raw thoughts".into()),
            ]
        );
        let content = result.unwrap().content;
        assert_eq!(content[0], ContentBlock::Thinking { text: "One.\n\nTwo.".into(), signature: None });
        assert_eq!(content[2], ContentBlock::Thinking { text: "raw thoughts".into(), signature: None });
        assert_eq!(content.len(), 4);
    }

    #[test]
    fn a_done_item_without_deltas_is_shown_whole() {
        let events = [
            serde_json::json!({"type": "response.created", "response": {}}),
            serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}}),
            serde_json::json!({"type": "response.completed", "response": {"status": "completed"}}),
        ];
        let (events, result) = decode(&events);
        assert_eq!(
            events,
            vec![
                ModelEvent::ToolCallDelta {
                    index: 0,
                    id: Some("c1".into()),
                    name: Some("ls".into()),
                    arguments: String::new()
                },
                ModelEvent::ToolCallDelta { index: 0, id: None, name: None, arguments: "{}".into() },
            ]
        );
        let message = result.unwrap();
        assert_eq!(message.finish_reason, FinishReason::ToolUse);
        assert_eq!(
            message.content,
            vec![ContentBlock::ToolCall(ToolCall {
                item_id: Some("fc_1".into()),
                ..ToolCall::new("c1", "ls", "{}")
            })]
        );
    }
}
