//! Builders for Anthropic Messages streams, shaped like the API's output: `event:`
//! lines, `message_start` with usage, blocks with their deltas, `message_delta` with
//! the stop reason, `message_stop`.

use serde_json::{Value, json};

use crate::chat::split;
use crate::http::MockResponse;

/// Builds one streamed Messages reply block by block.
#[derive(Debug, Clone)]
pub struct AnthropicStream {
    events: Vec<(String, Value)>,
    blocks: usize,
    calls: bool,
}

impl Default for AnthropicStream {
    fn default() -> Self {
        Self::new()
    }
}

impl AnthropicStream {
    /// A stream that opens with `message_start` (100 input tokens, 2000 read from the
    /// cache).
    pub fn new() -> Self {
        let start = json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message",
            "role": "assistant", "content": [], "model": "mock", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 0,
                      "output_tokens": 1}}});
        AnthropicStream { events: vec![("message_start".into(), start)], blocks: 0, calls: false }
    }

    fn push(&mut self, kind: &str, event: Value) {
        self.events.push((kind.to_owned(), event));
    }

    fn block(&mut self, start: Value, deltas: Vec<Value>) {
        let index = self.blocks;
        self.blocks += 1;
        self.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        for delta in deltas {
            self.push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
        self.push("content_block_stop", json!({"type": "content_block_stop", "index": index}));
    }

    /// A thinking block in `pieces` deltas, then its signature.
    pub fn thinking(mut self, text: &str, signature: &str, pieces: usize) -> Self {
        let mut deltas: Vec<Value> = split(text, pieces)
            .into_iter()
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": signature}));
        self.block(json!({"type": "thinking", "thinking": "", "signature": ""}), deltas);
        self
    }

    /// A redacted thinking block.
    pub fn redacted(mut self, data: &str) -> Self {
        self.block(json!({"type": "redacted_thinking", "data": data}), Vec::new());
        self
    }

    /// A text block in `pieces` deltas.
    pub fn text(mut self, text: &str, pieces: usize) -> Self {
        let deltas =
            split(text, pieces).into_iter().map(|p| json!({"type": "text_delta", "text": p})).collect();
        self.block(json!({"type": "text", "text": ""}), deltas);
        self
    }

    /// A tool_use block, its input in `pieces` fragments.
    pub fn tool_use(mut self, id: &str, name: &str, input: &str, pieces: usize) -> Self {
        let deltas = split(input, pieces)
            .into_iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect();
        self.block(json!({"type": "tool_use", "id": id, "name": name, "input": {}}), deltas);
        self.calls = true;
        self
    }

    /// `message_delta` (stop reason `tool_use` after calls, else `end_turn`, and
    /// `output` tokens), then `message_stop`.
    pub fn stop(mut self, output: u64) -> Self {
        let reason = if self.calls { "tool_use" } else { "end_turn" };
        self.push(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
                   "usage": {"output_tokens": output}}),
        );
        self.push("message_stop", json!({"type": "message_stop"}));
        self
    }

    /// The stream's bytes, one event per chunk.
    pub fn chunks(&self) -> Vec<Vec<u8>> {
        self.events
            .iter()
            .map(|(kind, data)| format!("event: {kind}\ndata: {data}\n\n").into_bytes())
            .collect()
    }

    /// The whole stream as a response.
    pub fn response(&self) -> MockResponse {
        MockResponse::chunks(self.chunks())
    }
}
