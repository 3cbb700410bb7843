//! Turning Chat Completions chunks into keel's deltas and one assistant message.

use crate::assemble::MessageBuilder;
use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::{AssistantMessage, FinishReason, Usage};
use crate::text_calls::extract_text_tool_calls;

use super::errors::classify_error_object;
use super::wire::{Chunk, Delta};

/// Maps a provider finish reason to keel's.
pub(crate) fn map_finish_reason(raw: &str) -> FinishReason {
    match raw {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolUse,
        "content_filter" | "error" => FinishReason::Error,
        _ => FinishReason::Unknown,
    }
}

/// Accumulates one reply.
#[derive(Debug)]
pub(crate) struct Decoder {
    builder: MessageBuilder,
    finish: Option<String>,
    usage: Option<Usage>,
    /// Whether any content delta was produced (retries stop once output has streamed).
    pub emitted: bool,
    /// Usage arrived in a chunk after the one with the finish reason: the reply is
    /// whole, whatever the connection does next.
    settled: bool,
    last_index: Option<usize>,
    last_id: Option<String>,
    calls_seen: usize,
    /// Output bytes so far, and the most accepted.
    output: u64,
    max_output: u64,
}

impl Default for Decoder {
    /// A decoder without an output limit.
    fn default() -> Self {
        Decoder::with_output_limit(u64::MAX)
    }
}

impl Decoder {
    /// A decoder accepting at most `max_output` bytes of output.
    pub fn with_output_limit(max_output: u64) -> Self {
        Decoder {
            builder: MessageBuilder::new(),
            finish: None,
            usage: None,
            emitted: false,
            settled: false,
            last_index: None,
            last_id: None,
            calls_seen: 0,
            output: 0,
            max_output,
        }
    }

    /// Counts `bytes` of output against the limit.
    fn charge(&mut self, bytes: usize) -> Result<(), ModelError> {
        self.output = self.output.saturating_add(bytes as u64);
        if self.output > self.max_output {
            return Err(output_limit_error(self.max_output));
        }
        Ok(())
    }

    /// Applies one chunk, pushing the deltas it carried to `out`.
    pub fn on_chunk(&mut self, chunk: Chunk, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(classify_error_object(&error, None));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.to_usage());
            self.settled |= self.finish.is_some();
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta.or(choice.message) {
                self.on_delta(delta, out)?;
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
            }
        }
        Ok(())
    }

    fn on_delta(&mut self, delta: Delta, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        for thinking in [delta.reasoning_content, delta.reasoning].into_iter().flatten() {
            if !thinking.is_empty() {
                self.charge(thinking.len())?;
                self.builder.push_thinking(&thinking);
                self.emitted = true;
                out.push(ModelEvent::ThinkingDelta(thinking));
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.charge(text.len())?;
            self.builder.push_text(&text);
            self.emitted = true;
            out.push(ModelEvent::TextDelta(text));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let index = self.call_index(call.index, call.id.as_deref());
            let (name, arguments) = match call.function {
                Some(function) => (function.name, function.arguments.unwrap_or_default()),
                None => (None, String::new()),
            };
            let id_len = call.id.as_ref().map_or(0, String::len);
            self.charge(id_len + name.as_ref().map_or(0, String::len) + arguments.len())?;
            self.builder.push_tool_call(index, call.id.as_deref(), name.as_deref(), &arguments);
            self.emitted = true;
            out.push(ModelEvent::ToolCallDelta { index, id: call.id, name, arguments });
        }
        Ok(())
    }

    /// Some servers omit `index`: a new id starts a new call, otherwise it continues the last.
    fn call_index(&mut self, index: Option<usize>, id: Option<&str>) -> usize {
        let index = match index {
            Some(index) => index,
            None => match (id, self.last_index) {
                (Some(id), Some(last)) if self.last_id.as_deref() == Some(id) => last,
                (None, Some(last)) => last,
                _ => self.calls_seen,
            },
        };
        if self.last_index != Some(index) {
            self.calls_seen += 1;
        }
        self.last_index = Some(index);
        if let Some(id) = id {
            self.last_id = Some(id.to_owned());
        }
        index
    }

    /// True once a finish reason arrived.
    pub fn has_finish_reason(&self) -> bool {
        self.finish.is_some()
    }

    /// True once usage arrived after the finish reason: nothing more is expected.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// True when nothing at all arrived: no delta, no finish reason, no usage.
    pub fn is_blank(&self) -> bool {
        !self.emitted && self.finish.is_none() && self.usage.is_none()
    }

    /// The finished message. With `text_tools`, a tool call written as text is turned
    /// into a real call.
    pub fn finish(self, text_tools: Option<&[&str]>) -> AssistantMessage {
        let reason = match self.finish.as_deref() {
            Some(raw) => map_finish_reason(raw),
            None => FinishReason::Stop,
        };
        let mut message = self.builder.finish(reason, self.finish, self.usage.unwrap_or_default());
        if let Some(tools) = text_tools
            && extract_text_tool_calls(&mut message.content, tools)
            && message.finish_reason == FinishReason::Stop
        {
            message.finish_reason = FinishReason::ToolUse;
        }
        if message.finish_reason == FinishReason::Stop
            && message.has_tool_calls()
            && message.raw_finish_reason.is_none()
        {
            message.finish_reason = FinishReason::ToolUse;
        }
        message
    }
}

/// The reply carried more output than its cap allows.
fn output_limit_error(limit: u64) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!(
            "the reply passed {} of output, far more than max_tokens allows: the server does not stop \
             where it should, so keel cut the reply there",
            human_bytes(limit)
        ),
    )
}

/// `512 bytes`, `64 KiB`, `1.3 MiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{} KiB", bytes / 1024),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// A stream that ended with no message at all is an error, not an empty answer.
pub(crate) fn empty_reply_error() -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, "the server ended the reply without sending anything")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentBlock, ToolCall};
    use pretty_assertions::assert_eq;

    fn feed(decoder: &mut Decoder, chunks: &[&str]) -> Vec<ModelEvent> {
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.on_chunk(serde_json::from_str(chunk).unwrap(), &mut out).unwrap();
        }
        out
    }

    #[test]
    fn missing_indexes_follow_ids() {
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"p\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            ],
        );
        let message = decoder.finish(None);
        assert_eq!(
            message.content,
            vec![
                ContentBlock::ToolCall(ToolCall {
                    id: "a".into(),
                    name: "x".into(),
                    arguments: "{\"p\":1}".into()
                }),
                ContentBlock::ToolCall(ToolCall { id: "b".into(), name: "y".into(), arguments: "{}".into() }),
            ]
        );
        assert_eq!(message.finish_reason, FinishReason::ToolUse);
    }

    #[test]
    fn finish_reasons_map_and_keep_raw() {
        assert_eq!(map_finish_reason("tool_calls"), FinishReason::ToolUse);
        assert_eq!(map_finish_reason("content_filter"), FinishReason::Error);
        assert_eq!(map_finish_reason("length"), FinishReason::Length);
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"insufficient_system_resource"}]}"#],
        );
        let message = decoder.finish(None);
        assert_eq!(message.finish_reason, FinishReason::Unknown);
        assert_eq!(message.raw_finish_reason.as_deref(), Some("insufficient_system_resource"));
    }

    #[test]
    fn error_chunk_is_an_error() {
        let mut decoder = Decoder::default();
        let chunk =
            serde_json::from_str(r#"{"error":{"message":"upstream overloaded","code":502}}"#).unwrap();
        let err = decoder.on_chunk(chunk, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind, ModelErrorKind::Server);
        assert!(err.message.contains("upstream overloaded"));
    }
}
