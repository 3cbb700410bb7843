//! Provider-neutral conversation messages.
//!
//! These are the shapes keel stores in its session log and sends to every provider.
//! Their serde form is part of the on-disk format: change it only compatibly.

use serde::{Deserialize, Serialize};

use crate::image::Image;

/// Identifies a model: for the session's `request/header`, and as the origin of an
/// assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Provider name, e.g. `deepseek`, `openai`, `scripted`.
    pub provider: String,
    /// Model name as sent to the provider.
    pub model: String,
}

/// One message of the conversation, as a model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Input from the user (typed, steered, or injected by a hook).
    User(UserMessage),
    /// A reply from the model.
    Assistant(AssistantMessage),
    /// The result of one tool call, answering the call with the same id.
    ToolResult(ToolResultMessage),
}

/// Text the user (or the harness on the user's behalf) sent, with any images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The text of the message.
    pub content: String,
    /// Images the user attached, after the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

impl UserMessage {
    /// A message of text alone.
    pub fn text(content: impl Into<String>) -> Self {
        UserMessage { content: content.into(), images: Vec::new() }
    }
}

/// A model reply: content blocks in the order the model produced them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Text, reasoning and tool calls, in generation order.
    pub content: Vec<ContentBlock>,
    /// Why generation stopped, mapped to keel's vocabulary.
    #[serde(default)]
    pub finish_reason: FinishReason,
    /// The provider's own finish reason string, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_finish_reason: Option<String>,
    /// Tokens used by the request that produced this message.
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
    /// True when the stream was cut (abort, error) and this message is partial.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The provider and model that wrote it, when a provider said so (format 2). What
    /// only that model can read (thinking signatures, redacted thinking, encrypted
    /// reasoning items) is sent back to it alone; every encoder compares this with
    /// itself before replaying such blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<ModelInfo>,
}

impl AssistantMessage {
    /// The tool calls in this message, in the model's order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// True when the message asks for at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls().next().is_some()
    }

    /// All text blocks joined, without reasoning.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// True when there is nothing a provider could be sent back.
    pub fn is_empty(&self) -> bool {
        self.content.iter().all(ContentBlock::is_empty)
    }

    /// True when this message was written by `model` (same provider and model name), so
    /// its signed or encrypted blocks may be sent back to it.
    pub fn is_from(&self, model: &ModelInfo) -> bool {
        self.origin.as_ref() == Some(model)
    }
}

/// One piece of assistant output.
///
/// New kinds of block arrive with new provider features, so matches outside this crate
/// need a wildcard arm; an encoder that does not know a block leaves it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Visible answer text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning ("thinking") text, with the provider's signature when it gives one.
    /// A signed block is valid only for the model that wrote it (see
    /// [`AssistantMessage::origin`]); one without a signature (an aborted stream, a
    /// provider that signs nothing) is never sent back as signed thinking.
    Thinking {
        /// The reasoning text.
        text: String,
        /// Opaque provider signature that must be returned verbatim, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted (Anthropic's `redacted_thinking`): nothing to
    /// show, returned verbatim to the model that wrote it.
    RedactedThinking {
        /// The encrypted data, byte for byte as received.
        data: String,
    },
    /// A request to run a tool.
    ToolCall(ToolCall),
    /// An output item keel does not interpret but must keep, such as an OpenAI
    /// Responses reasoning item with its `encrypted_content`: stored as received and
    /// sent back only by the API named in `api`, to the model that wrote it.
    ProviderItem {
        /// The wire API the item belongs to (`responses`).
        api: String,
        /// The item as the provider sent it.
        item: serde_json::Value,
    },
}

impl ContentBlock {
    fn is_empty(&self) -> bool {
        match self {
            ContentBlock::Text { text } => text.is_empty(),
            ContentBlock::Thinking { text, signature } => text.is_empty() && signature.is_none(),
            ContentBlock::RedactedThinking { data } => data.is_empty(),
            ContentBlock::ToolCall(_) | ContentBlock::ProviderItem { .. } => false,
        }
    }
}

/// A tool call as the model wrote it. Arguments stay the raw string the model produced,
/// so a malformed call can be reported back exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned call id; results cite it.
    pub id: String,
    /// Name of the tool to run.
    pub name: String,
    /// Raw JSON argument text (may be invalid JSON).
    pub arguments: String,
    /// The provider's own id of the output item that carried the call, when it differs
    /// from the call id (OpenAI Responses: `fc_…`, beside the `call_…` results cite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
}

impl ToolCall {
    /// A call with `id`, `name` and raw `arguments`, and no provider item id.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments: arguments.into(), item_id: None }
    }

    /// The arguments as the text of one JSON object, for sending the call back: the
    /// arguments themselves when they are one, `{}` when empty, otherwise
    /// `{"invalid_arguments": "<raw>"}`, so strict servers (which parse arguments to
    /// render a chat template) accept the history and the model still sees what it
    /// wrote. A deterministic rendering of the log.
    pub fn object_arguments(&self) -> std::borrow::Cow<'_, str> {
        let trimmed = self.arguments.trim();
        if trimmed.is_empty() {
            return std::borrow::Cow::Borrowed("{}");
        }
        if trimmed.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok() {
            return std::borrow::Cow::Borrowed(&self.arguments);
        }
        std::borrow::Cow::Owned(serde_json::json!({ "invalid_arguments": self.arguments }).to_string())
    }
}

/// The result of a tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name (some providers need it; it also helps display).
    pub name: String,
    /// Plain-text result for the model.
    pub content: String,
    /// True when the call failed; the content says why.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Images the tool returned (an MCP tool's screenshot), after the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// Why a model stopped generating, in keel's vocabulary. The provider's raw value is kept
/// beside it. Control flow never depends on this: tool calls present are always run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// Natural end of the reply.
    #[default]
    Stop,
    /// The output token limit was hit.
    Length,
    /// The model asked for tools.
    ToolUse,
    /// The provider reported an error or filtered content.
    Error,
    /// keel stopped the stream (user abort).
    Aborted,
    /// Anything else; see the raw value.
    #[serde(other)]
    Unknown,
}

impl FinishReason {
    /// The snake_case name used in logs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolUse => "tool_use",
            FinishReason::Error => "error",
            FinishReason::Aborted => "aborted",
            FinishReason::Unknown => "unknown",
        }
    }
}

/// Token counts for one request, or summed over many.
///
/// `input_tokens` counts the whole prompt, cached tokens and tokens written to the cache
/// included; `cached_tokens` is the part of it read from a provider cache and
/// `cache_write_tokens` the part written to one (Anthropic bills writes apart).
/// `reasoning_tokens` is part of `output_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens served from cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Generated tokens spent on reasoning.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Prompt tokens written to a provider cache (format 2).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Usage {
    /// True when every count is zero (nothing was reported).
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;
    fn add(mut self, other: Usage) -> Usage {
        self += other;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn assistant_message_round_trips_compactly() {
        let message = AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: "hmm".into(), signature: None },
                ContentBlock::Text { text: "ok".into() },
                ContentBlock::ToolCall(ToolCall::new("c1", "read_file", r#"{"path":"a"}"#)),
            ],
            finish_reason: FinishReason::ToolUse,
            raw_finish_reason: Some("tool_calls".into()),
            usage: Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() },
            interrupted: false,
            origin: None,
        };
        let json = serde_json::to_string(&message).unwrap();
        assert_eq!(
            json,
            r#"{"content":[{"type":"thinking","text":"hmm"},{"type":"text","text":"ok"},{"type":"tool_call","id":"c1","name":"read_file","arguments":"{\"path\":\"a\"}"}],"finish_reason":"tool_use","raw_finish_reason":"tool_calls","usage":{"input_tokens":10,"output_tokens":2}}"#
        );
        let back: AssistantMessage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn unknown_finish_reason_is_not_a_parse_failure() {
        let reason: FinishReason = serde_json::from_str(r#""something_new""#).unwrap();
        assert_eq!(reason, FinishReason::Unknown);
    }

    #[test]
    fn format_2_blocks_round_trip_byte_for_byte() {
        let message = AssistantMessage {
            content: vec![
                ContentBlock::Thinking {
                    text: "plan \u{e9}".into(),
                    signature: Some("EqQBCkYIARgCIkB+/=".into()),
                },
                ContentBlock::RedactedThinking { data: "EmwKAhgBEgy3va3pzix/LafPsn4a".into() },
                ContentBlock::ProviderItem {
                    api: "responses".into(),
                    item: serde_json::json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA=="}),
                },
                ContentBlock::ToolCall(ToolCall {
                    item_id: Some("fc_1".into()),
                    ..ToolCall::new("call_1", "ls", "{}")
                }),
            ],
            finish_reason: FinishReason::ToolUse,
            usage: Usage { input_tokens: 30, cached_tokens: 10, cache_write_tokens: 20, ..Usage::default() },
            origin: Some(ModelInfo { provider: "anthropic".into(), model: "claude".into() }),
            ..AssistantMessage::default()
        };
        let json = serde_json::to_string(&message).unwrap();
        assert_eq!(
            json,
            r#"{"content":[{"type":"thinking","text":"plan é","signature":"EqQBCkYIARgCIkB+/="},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"},{"type":"provider_item","api":"responses","item":{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAA=="}},{"type":"tool_call","id":"call_1","name":"ls","arguments":"{}","item_id":"fc_1"}],"finish_reason":"tool_use","usage":{"input_tokens":30,"output_tokens":0,"cached_tokens":10,"cache_write_tokens":20},"origin":{"provider":"anthropic","model":"claude"}}"#
        );
        let back: AssistantMessage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, message);
        assert!(back.is_from(&ModelInfo { provider: "anthropic".into(), model: "claude".into() }));
        assert!(!back.is_from(&ModelInfo { provider: "anthropic".into(), model: "other".into() }));
    }

    #[test]
    fn usage_sums() {
        let a = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cached_tokens: 3,
            reasoning_tokens: 4,
            cache_write_tokens: 5,
        };
        assert_eq!(
            a + a,
            Usage {
                input_tokens: 2,
                output_tokens: 4,
                cached_tokens: 6,
                reasoning_tokens: 8,
                cache_write_tokens: 10
            }
        );
    }
}
