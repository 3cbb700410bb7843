//! Builders for OpenAI Responses streams, shaped like the API's output: output items
//! from `added` to `done` with their deltas, ending with `response.completed`.

use serde_json::{Value, json};

use crate::chat::split;
use crate::http::MockResponse;

/// Builds one streamed Responses reply item by item.
#[derive(Debug, Clone)]
pub struct ResponsesStream {
    events: Vec<Value>,
    items: usize,
}

impl Default for ResponsesStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponsesStream {
    /// A stream that opens with `response.created` and `response.in_progress`.
    pub fn new() -> Self {
        let response =
            json!({"id": "resp_mock", "object": "response", "status": "in_progress", "output": []});
        ResponsesStream {
            events: vec![
                json!({"type": "response.created", "response": response}),
                json!({"type": "response.in_progress", "response": response}),
            ],
            items: 0,
        }
    }

    fn item(&mut self, added: Value, deltas: Vec<Value>, done: Value) {
        let index = self.items;
        self.items += 1;
        self.events.push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
        for mut delta in deltas {
            delta["output_index"] = json!(index);
            self.events.push(delta);
        }
        self.events.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
    }

    /// A reasoning item: its summary in `pieces` deltas, `encrypted_content` in its done
    /// item.
    pub fn reasoning(mut self, id: &str, summary: &str, encrypted: &str, pieces: usize) -> Self {
        let deltas = split(summary, pieces)
            .into_iter()
            .map(|p| json!({"type": "response.reasoning_summary_text.delta", "item_id": id, "summary_index": 0, "delta": p}))
            .collect();
        let done = json!({"id": id, "type": "reasoning", "encrypted_content": encrypted,
                          "summary": [{"type": "summary_text", "text": summary}]});
        self.item(json!({"id": id, "type": "reasoning", "summary": []}), deltas, done);
        self
    }

    /// An assistant message in `pieces` deltas.
    pub fn text(mut self, id: &str, text: &str, pieces: usize) -> Self {
        let deltas = split(text, pieces)
            .into_iter()
            .map(|p| json!({"type": "response.output_text.delta", "item_id": id, "content_index": 0, "delta": p}))
            .collect();
        let done = json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": text, "annotations": []}]});
        self.item(
            json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}),
            deltas,
            done,
        );
        self
    }

    /// A function call item, its arguments in `pieces` deltas.
    pub fn function_call(
        mut self,
        id: &str,
        call_id: &str,
        name: &str,
        arguments: &str,
        pieces: usize,
    ) -> Self {
        let deltas = split(arguments, pieces)
            .into_iter()
            .map(|p| json!({"type": "response.function_call_arguments.delta", "item_id": id, "delta": p}))
            .collect();
        let item = |arguments: &str, status: &str| json!({"id": id, "type": "function_call", "status": status, "arguments": arguments, "call_id": call_id, "name": name});
        self.item(item("", "in_progress"), deltas, item(arguments, "completed"));
        self
    }

    /// `response.completed` with usage.
    pub fn completed(mut self, input: u64, cached: u64, output: u64, reasoning: u64) -> Self {
        self.events.push(
            json!({"type": "response.completed", "response": {"id": "resp_mock", "object": "response",
            "status": "completed", "output": [],
            "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
                      "total_tokens": input + output}}}),
        );
        self
    }

    /// The stream's bytes, one event per chunk, each with its `event:` line.
    pub fn chunks(&self) -> Vec<Vec<u8>> {
        self.events
            .iter()
            .map(|event| {
                let kind = event["type"].as_str().unwrap_or_default();
                format!("event: {kind}\ndata: {event}\n\n").into_bytes()
            })
            .collect()
    }

    /// The whole stream as a response.
    pub fn response(&self) -> MockResponse {
        MockResponse::chunks(self.chunks())
    }
}
