//! Chat Completions wire types: borrowed for the request, lenient for the response.
//! Unknown fields are ignored and unknown values kept raw; nothing here fails on a
//! server's extension.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::client::{ModelRequest, ToolChoice, ToolDefinition};
use crate::config::{MaxTokensField, ProviderConfig, ReasoningReplay};
use crate::image::Image;
use crate::message::ModelInfo;
use crate::message::{ContentBlock, Message, ToolResultMessage, Usage};
use crate::transport::escapes::parse_json;

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: ChatContent<'a>,
    },
    Assistant {
        content: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A user message's content: a string, or parts when it carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum ChatContent<'a> {
    Text(&'a str),
    Parts(Vec<ChatPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ChatPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

/// Text then images, each image as a `data:` URL (or the note that stands for one whose
/// bytes are gone).
fn parts<'a>(text: Cow<'a, str>, images: &[Image]) -> Vec<ChatPart<'a>> {
    let mut parts = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        parts.push(ChatPart::Text { text });
    }
    for image in images {
        parts.push(match image.data_url() {
            Some(url) => ChatPart::ImageUrl { image_url: ImageUrl { url } },
            None => ChatPart::Text { text: Cow::Owned(image.missing_note()) },
        });
    }
    parts
}

/// Chat Completions takes no images in a tool message: a tool's images follow its run of
/// tool messages as one user message, which names the call they came from.
fn tool_images<'a>(results: &[&'a ToolResultMessage]) -> Option<WireMessage<'a>> {
    let mut all = Vec::new();
    for result in results.iter().filter(|r| !r.images.is_empty()) {
        let intro = format!("Images returned by the `{}` call {}:", result.name, result.call_id);
        all.extend(parts(Cow::Owned(intro), &result.images));
    }
    (!all.is_empty()).then_some(WireMessage::User { content: ChatContent::Parts(all) })
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolSpec<'a>,
}

#[derive(Serialize)]
struct WireToolSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a RawValue,
}

/// Joins the blocks of one kind; borrows when there is only one.
fn joined<'a>(blocks: &'a [ContentBlock], thinking: bool) -> Option<Cow<'a, str>> {
    let mut parts = blocks.iter().filter_map(|b| match (b, thinking) {
        (ContentBlock::Text { text }, false) | (ContentBlock::Thinking { text, .. }, true) => {
            Some(text.as_str())
        }
        _ => None,
    });
    let first = parts.next()?;
    match parts.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut all = String::from(first);
            all.push_str(second);
            parts.for_each(|p| all.push_str(p));
            Some(Cow::Owned(all))
        }
    }
}

/// The `tools` array of a request, serialized. The same tools go out with every request,
/// so the client keeps this and re-encodes only when the definitions change.
pub(crate) fn encode_tools(tools: &[ToolDefinition]) -> serde_json::Result<Box<RawValue>> {
    let tools: Vec<WireTool<'_>> = tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            function: WireToolSpec {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        })
        .collect();
    serde_json::value::to_raw_value(&tools)
}

/// Encodes a request body for the model `me`; `tools` is [`encode_tools`] of
/// `request.tools`. Reasoning goes back (per `reasoning_replay`) only on messages `me`
/// wrote, or that name no writer (logs of format 1).
pub(crate) fn encode(
    request: &ModelRequest<'_>,
    config: &ProviderConfig,
    me: &ModelInfo,
    tools: Option<&RawValue>,
) -> serde_json::Result<Vec<u8>> {
    let stream = config.stream;
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::System { content: request.system });
    }
    let mut with_images: Vec<&ToolResultMessage> = Vec::new();
    for message in request.messages {
        if !matches!(message, Message::ToolResult(_)) {
            messages.extend(tool_images(&std::mem::take(&mut with_images)));
        }
        messages.push(match message {
            Message::User(user) if user.images.is_empty() => {
                WireMessage::User { content: ChatContent::Text(&user.content) }
            }
            Message::User(user) => WireMessage::User {
                content: ChatContent::Parts(parts(Cow::Borrowed(&user.content), &user.images)),
            },
            Message::ToolResult(result) => {
                if !result.images.is_empty() {
                    with_images.push(result);
                }
                WireMessage::Tool { tool_call_id: &result.call_id, content: &result.content }
            }
            Message::Assistant(assistant) => {
                let tool_calls: Vec<WireToolCall<'_>> = assistant
                    .tool_calls()
                    .map(|call| WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunction { name: &call.name, arguments: call.object_arguments() },
                    })
                    .collect();
                let own = assistant.origin.is_none() || assistant.is_from(me);
                let replay = own
                    && match config.chat.reasoning_replay {
                        ReasoningReplay::Never => false,
                        ReasoningReplay::ToolTurns => !tool_calls.is_empty(),
                        ReasoningReplay::Always => true,
                    };
                WireMessage::Assistant {
                    content: joined(&assistant.content, false).unwrap_or(Cow::Borrowed("")),
                    reasoning_content: if replay { joined(&assistant.content, true) } else { None },
                    tool_calls,
                }
            }
        });
    }
    messages.extend(tool_images(&with_images));
    let tools = tools.filter(|_| !request.tools.is_empty());
    let tool_choice = match (tools.is_none(), request.tool_choice) {
        (true, _) => None,
        (false, ToolChoice::Auto) => None,
        (false, ToolChoice::None) => Some("none"),
        (false, ToolChoice::Required) => Some("required"),
    };
    let cap = request.token_cap(config.max_tokens);
    let (max_tokens, max_completion_tokens) = match config.chat.max_tokens_field {
        MaxTokensField::MaxTokens => (Some(cap), None),
        MaxTokensField::MaxCompletionTokens => (None, Some(cap)),
    };
    let body = ChatRequest {
        model: &config.model,
        messages,
        tools,
        tool_choice,
        stream,
        stream_options: stream.then_some(StreamOptions { include_usage: true }),
        max_tokens,
        max_completion_tokens,
        temperature: request.temperature.or(config.temperature),
        extra: &config.extra_body,
    };
    serde_json::to_vec(&body)
}

/// Parses one chunk (or a whole response), a lone surrogate costing one character, not
/// the chunk (see [`parse_json`]).
pub(crate) fn parse_chunk(data: &[u8]) -> serde_json::Result<Chunk> {
    parse_json(data)
}

/// One streamed chunk, or a whole non-streamed response.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub choices: Option<Vec<Choice>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub delta: Option<Delta>,
    #[serde(default)]
    pub message: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// The changing part of a choice (`delta` when streaming, `message` otherwise).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    #[serde(default, deserialize_with = "lenient_text")]
    pub content: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub reasoning_content: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub index: Option<usize>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient_arguments")]
    pub arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    pub fn to_usage(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
            cached_tokens: self
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .or(self.prompt_cache_hit_tokens)
                .unwrap_or(0),
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cache_write_tokens: 0,
        }
    }
}

/// Text as a string, `null`, or an array of `{"type": "text", "text": …}` parts. Parsed
/// without an intermediate `Value`: this runs for every streamed chunk.
fn lenient_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_any(TextVisitor { objects_as_json: false })
}

/// Arguments as a string (the standard) or an object (some servers).
fn lenient_arguments<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_any(TextVisitor { objects_as_json: true })
}

struct TextVisitor {
    /// An object becomes its JSON text (arguments); otherwise it is ignored.
    objects_as_json: bool,
}

impl<'de> serde::de::Visitor<'de> for TextVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("text, null, or an array of text parts")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(self.objects_as_json.then(|| v.to_string()))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(self.objects_as_json.then(|| v.to_string()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(self.objects_as_json.then(|| v.to_string()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(self.objects_as_json.then(|| v.to_string()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if self.objects_as_json {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element::<Value>()? {
                items.push(item);
            }
            return Ok(Some(Value::Array(items).to_string()));
        }
        let mut text = String::new();
        while let Some(part) = seq.next_element::<Value>()? {
            if let Some(piece) = part.get("text").and_then(Value::as_str).or_else(|| part.as_str()) {
                text.push_str(piece);
            }
        }
        Ok(Some(text))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let value = Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(self.objects_as_json.then(|| value.to_string()))
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
