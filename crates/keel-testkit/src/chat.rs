//! Builders for Chat Completions stream chunks, shaped like real servers' output.

use serde_json::{Value, json};

use crate::http::MockResponse;

/// Builds one streamed reply chunk by chunk.
#[derive(Debug, Clone, Default)]
pub struct ChatStream {
    chunks: Vec<Value>,
    calls: usize,
}

fn delta(delta: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock",
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

/// Splits `text` into `pieces` parts on char boundaries.
pub fn split(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(pieces.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

impl ChatStream {
    /// A new stream that opens with the assistant role, as OpenAI does.
    pub fn new() -> Self {
        ChatStream { chunks: vec![delta(json!({"role": "assistant", "content": ""}))], calls: 0 }
    }

    /// Answer text in `pieces` chunks.
    pub fn text(mut self, text: &str, pieces: usize) -> Self {
        for piece in split(text, pieces) {
            self.chunks.push(delta(json!({"content": piece})));
        }
        self
    }

    /// DeepSeek-style `reasoning_content` in `pieces` chunks.
    pub fn reasoning(mut self, text: &str, pieces: usize) -> Self {
        for piece in split(text, pieces) {
            self.chunks.push(delta(json!({"content": null, "reasoning_content": piece})));
        }
        self
    }

    /// A tool call: id and name in the first chunk, arguments in `pieces` fragments.
    pub fn tool_call(mut self, id: &str, name: &str, arguments: &str, pieces: usize) -> Self {
        let index = self.calls;
        self.calls += 1;
        self.chunks.push(delta(json!({"tool_calls": [{"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]})));
        for piece in split(arguments, pieces) {
            self.chunks
                .push(delta(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})));
        }
        self
    }

    /// The closing chunk with a finish reason.
    pub fn finish(mut self, reason: &str) -> Self {
        self.chunks.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "mock",
            "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}));
        self
    }

    /// The usage chunk (`stream_options.include_usage`).
    pub fn usage(mut self, prompt: u64, completion: u64) -> Self {
        self.chunks.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "mock",
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}}));
        self
    }

    /// The chunks as JSON strings.
    pub fn events(&self) -> Vec<String> {
        self.chunks.iter().map(Value::to_string).collect()
    }

    /// The whole stream as a response, `[DONE]` included.
    pub fn response(&self) -> MockResponse {
        MockResponse::sse(self.events())
    }
}

/// A non-streaming Chat Completions response.
pub fn completion(content: Option<&str>, tool_calls: &[(&str, &str, &str)], finish: &str) -> MockResponse {
    let calls: Vec<Value> = tool_calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    MockResponse::json(
        200,
        &json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "mock",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}),
    )
}
