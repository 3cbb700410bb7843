//! Anthropic Messages requests: the history as alternating user and assistant messages.
//!
//! - `system` is its own field; `max_tokens` is always set.
//! - Consecutive user input is one user message; the results of one assistant message
//!   are the `tool_result` blocks (first, in call order) of the one user message that
//!   follows it. Every `tool_use` gets exactly one `tool_result`: a call without a
//!   recorded result is answered "no result was recorded", and a result whose call is
//!   not in the message before it becomes text — so a history of any shape (repaired,
//!   forked, switched between models) is a valid request.
//! - Thinking, its signature and redacted thinking go back byte for byte, and only to
//!   the model that wrote them ([`AssistantMessage::is_from`]); a thinking block without
//!   a signature (an aborted stream, another API's reasoning) never does. When the reply
//!   being continued (the assistant message whose tool results end the request) does
//!   not begin with thinking, thinking is off for that request: the API refuses a tool
//!   loop whose last assistant message does not start with a thinking block.
//! - Prompt caching: `cache_control` breakpoints on the last tool, the system prompt
//!   and the last block of the last user message, whatever its kind (text, image, tool
//!   result): three of the four allowed.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::client::{ModelRequest, ToolChoice, ToolDefinition};
use crate::config::{ProviderConfig, Thinking};
use crate::image::Image;
use crate::message::ModelInfo;
use crate::message::{AssistantMessage, ContentBlock, Message, ToolCall, ToolResultMessage};

/// `{"type": "ephemeral"}`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub(crate) struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    stream: bool,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// One message of the request.
#[derive(Debug, Serialize)]
pub(crate) struct Turn<'a> {
    pub role: Role,
    pub content: Vec<Block<'a>>,
}

/// Who speaks.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Assistant,
}

/// A tool's input: the call's own arguments when they are a JSON object, else made one.
#[derive(Debug)]
pub(crate) enum Input<'a> {
    Borrowed(&'a RawValue),
    Owned(Box<RawValue>),
}

impl Serialize for Input<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Input::Borrowed(raw) => raw.serialize(serializer),
            Input::Owned(raw) => raw.serialize(serializer),
        }
    }
}

/// One content block of the request.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        input: Input<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: ResultContent<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

/// An image block's bytes.
#[derive(Debug, Serialize)]
pub(crate) struct ImageSource {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'static str,
    data: String,
}

/// A tool result's content: its text, or text and images.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum ResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

/// The largest image the API takes, measured on its base64 text (`image exceeds 5 MB
/// maximum: 6275800 bytes > 5242880 bytes` for a 4.7 MB file): 3.75 MB of bytes, below
/// keel's own limit ([`crate::MAX_IMAGE_BYTES`]).
pub(crate) const MAX_IMAGE_BASE64: usize = 5 * 1024 * 1024;

/// The length of `bytes` bytes once base64-encoded (padded).
fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3).saturating_mul(4)
}

/// What the model is told in place of an image too large for the API.
fn too_large_note(image: &Image, encoded: usize) -> String {
    format!(
        "[an image ({}, {}) left out: this API takes images of at most {MAX_IMAGE_BASE64} bytes once base64-encoded, and it is {encoded}]",
        image.media_type.media_type(),
        image.describe(),
    )
}

/// Each image as an image block, or the note that stands for one whose bytes are gone or
/// that is too large for the API (which would refuse the request, and every later one).
fn image_blocks<'a>(images: &[Image]) -> impl Iterator<Item = Block<'a>> + use<'a, '_> {
    images.iter().map(|image| {
        let note = |text: String| Block::Text { text: Cow::Owned(text), cache_control: None };
        let encoded = image.data.as_ref().map_or(0, |data| base64_len(data.len()));
        if encoded > MAX_IMAGE_BASE64 {
            return note(too_large_note(image, encoded));
        }
        match image.base64() {
            Some(data) => Block::Image {
                source: ImageSource { kind: "base64", media_type: image.media_type.media_type(), data },
                cache_control: None,
            },
            None => note(image.missing_note()),
        }
    })
}

/// A tool result's content: a string, or blocks when it carries images.
fn result_content(result: &ToolResultMessage) -> ResultContent<'_> {
    if result.images.is_empty() {
        return ResultContent::Text(Cow::Borrowed(&result.content));
    }
    let mut blocks: Vec<Block<'_>> = text_block(&result.content).into_iter().collect();
    blocks.extend(image_blocks(&result.images));
    ResultContent::Blocks(blocks)
}

impl Block<'_> {
    fn is_thinking(&self) -> bool {
        matches!(self, Block::Thinking { .. } | Block::RedactedThinking { .. })
    }

    /// Makes this block a cache breakpoint. Every kind takes one but thinking (which is
    /// never the last block of a user message, where breakpoints go).
    fn set_cache_control(&mut self) -> bool {
        match self {
            Block::Text { cache_control, .. }
            | Block::Image { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => {
                *cache_control = Some(EPHEMERAL);
                true
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => false,
        }
    }
}

/// A tool-use id the API accepts (`^[a-zA-Z0-9_-]+$`): ids from other providers are
/// rewritten the same way on the call and on its result, so the pair still matches.
pub(crate) fn wire_id(id: &str) -> Cow<'_, str> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(valid) {
        return Cow::Borrowed(id);
    }
    let fixed: String = id.chars().map(|c| if valid(c) { c } else { '_' }).collect();
    Cow::Owned(if fixed.is_empty() { "call".to_owned() } else { fixed })
}

/// The call's arguments as an input object ([`ToolCall::object_arguments`]), borrowed
/// when they are one.
fn input(call: &ToolCall) -> Input<'_> {
    match call.object_arguments() {
        Cow::Borrowed(text) => match serde_json::from_str::<&RawValue>(text.trim()) {
            Ok(raw) => Input::Borrowed(raw),
            Err(_) => Input::Owned(empty_object()),
        },
        Cow::Owned(text) => Input::Owned(RawValue::from_string(text).unwrap_or_else(|_| empty_object())),
    }
}

/// `{}`.
fn empty_object() -> Box<RawValue> {
    serde_json::value::to_raw_value(&Map::new()).unwrap_or_default()
}

/// A text block, unless the text is blank (the API refuses those).
fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.trim().is_empty()).then_some(Block::Text { text: Cow::Borrowed(text), cache_control: None })
}

/// The blocks of an assistant message that may go back to `me`; thinking only when
/// `thinking` (the request has it on).
fn assistant_blocks<'a>(message: &'a AssistantMessage, me: &ModelInfo, thinking: bool) -> Vec<Block<'a>> {
    let own = thinking && message.is_from(me);
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => text_block(text),
            ContentBlock::Thinking { text, signature: Some(signature) } if own => {
                Some(Block::Thinking { thinking: text, signature })
            }
            ContentBlock::RedactedThinking { data } if own => Some(Block::RedactedThinking { data }),
            ContentBlock::ToolCall(call) => Some(Block::ToolUse {
                id: wire_id(&call.id),
                name: &call.name,
                input: input(call),
                cache_control: None,
            }),
            _ => None,
        })
        .collect()
}

/// The user message answering an assistant message's `calls` with `results`: one
/// `tool_result` per call in call order, then the results no call asked for, as text.
fn answer<'a>(calls: &[(Cow<'a, str>, &'a str)], results: &[&'a ToolResultMessage]) -> Vec<Block<'a>> {
    let mut used = vec![false; results.len()];
    let mut blocks = Vec::with_capacity(calls.len());
    for (id, original) in calls {
        let found = results.iter().enumerate().position(|(n, r)| !used[n] && r.call_id == *original);
        let block = match found {
            Some(n) => {
                used[n] = true;
                Block::ToolResult {
                    tool_use_id: id.clone(),
                    content: result_content(results[n]),
                    is_error: results[n].is_error,
                    cache_control: None,
                }
            }
            None => Block::ToolResult {
                tool_use_id: id.clone(),
                content: ResultContent::Text(Cow::Borrowed("no result was recorded for this call")),
                is_error: true,
                cache_control: None,
            },
        };
        blocks.push(block);
    }
    let orphans = results.iter().zip(&used).filter(|(_, used)| !**used);
    blocks.extend(orphans.flat_map(|(result, _)| orphan_result(result)));
    blocks
}

/// A result whose call is not in the message before it, as text.
fn orphan_result(result: &ToolResultMessage) -> Vec<Block<'_>> {
    let text = format!("[result of the {} call {}]\n{}", result.name, result.call_id, result.content);
    let mut blocks = vec![Block::Text { text: Cow::Owned(text), cache_control: None }];
    blocks.extend(image_blocks(&result.images));
    blocks
}

/// Appends `blocks` as a message of `role`, joining the message before when it has the
/// same role (the API wants turns to alternate).
fn push<'a>(turns: &mut Vec<Turn<'a>>, role: Role, blocks: Vec<Block<'a>>) {
    if blocks.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => turns.push(Turn { role, content: blocks }),
    }
}

/// The conversation as alternating messages for the model `me`, with its thinking when
/// `thinking`.
pub(crate) fn turns<'a>(messages: &'a [Message], me: &ModelInfo, thinking: bool) -> Vec<Turn<'a>> {
    let mut turns = Vec::with_capacity(messages.len());
    let mut i = 0;
    while let Some(message) = messages.get(i) {
        i += 1;
        match message {
            Message::User(user) => {
                let mut blocks: Vec<Block<'a>> = text_block(&user.content).into_iter().collect();
                blocks.extend(image_blocks(&user.images));
                push(&mut turns, Role::User, blocks)
            }
            Message::ToolResult(result) => push(&mut turns, Role::User, orphan_result(result)),
            Message::Assistant(assistant) => {
                let mut results = Vec::new();
                while let Some(Message::ToolResult(result)) = messages.get(i) {
                    results.push(result);
                    i += 1;
                }
                let calls: Vec<(Cow<'a, str>, &'a str)> =
                    assistant.tool_calls().map(|call| (wire_id(&call.id), call.id.as_str())).collect();
                // With calls the assistant message is there, so the results open the
                // user message after it; without, they are text and join the input.
                push(&mut turns, Role::Assistant, assistant_blocks(assistant, me, thinking));
                push(&mut turns, Role::User, answer(&calls, &results));
            }
        }
    }
    if turns.first().is_some_and(|t| t.role == Role::Assistant) {
        let start = Block::Text { text: Cow::Borrowed("(conversation continues)"), cache_control: None };
        turns.insert(0, Turn { role: Role::User, content: vec![start] });
    }
    turns
}

/// Whether the request continues a tool loop whose last assistant message does not
/// begin with thinking (then thinking must be off for it).
fn continues_without_thinking(turns: &[Turn<'_>]) -> bool {
    let [.., assistant, user] = turns else { return false };
    let continues =
        user.role == Role::User && user.content.iter().any(|b| matches!(b, Block::ToolResult { .. }));
    continues
        && assistant.role == Role::Assistant
        && !assistant.content.first().is_some_and(Block::is_thinking)
}

/// The `thinking` parameter for `config`, if on: a budget is kept below `max_tokens`
/// with room for the answer, and dropped when there is none.
fn thinking_param(config: &ProviderConfig) -> Option<Value> {
    match config.anthropic.thinking {
        Thinking::Off => None,
        Thinking::Adaptive => Some(serde_json::json!({"type": "adaptive"})),
        Thinking::Budget(budget) => {
            let budget = budget.min(config.max_tokens.saturating_sub(1024));
            (budget >= 1024).then(|| serde_json::json!({"type": "enabled", "budget_tokens": budget}))
        }
    }
}

/// The `tools` array, the last tool a cache breakpoint. Kept by the client while the
/// tools stay the same.
pub(crate) fn encode_tools(tools: &[ToolDefinition]) -> serde_json::Result<Box<RawValue>> {
    #[derive(Serialize)]
    struct Tool<'a> {
        name: &'a str,
        description: &'a str,
        input_schema: &'a RawValue,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    }
    let last = tools.len().saturating_sub(1);
    let tools: Vec<Tool<'_>> = tools
        .iter()
        .enumerate()
        .map(|(n, tool)| Tool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.parameters,
            cache_control: (n == last).then_some(EPHEMERAL),
        })
        .collect();
    serde_json::value::to_raw_value(&tools)
}

/// Encodes a request body for the model `me`; `tools` is [`encode_tools`] of
/// `request.tools`.
pub(crate) fn encode(
    request: &ModelRequest<'_>,
    config: &ProviderConfig,
    me: &ModelInfo,
    tools: &RawValue,
) -> serde_json::Result<Vec<u8>> {
    // A request capped below the configured reply (a few words) does not think.
    let capped = request.token_cap(config.max_tokens) < config.max_tokens;
    let mut thinking = thinking_param(config).filter(|_| !capped);
    let mut messages = turns(request.messages, me, thinking.is_some());
    if thinking.is_some() && continues_without_thinking(&messages) {
        // Without thinking in the request, no thinking goes with it either.
        thinking = None;
        messages = turns(request.messages, me, false);
    }
    if let Some(last_user) = messages.iter_mut().rev().find(|t| t.role == Role::User)
        && let Some(block) = last_user.content.last_mut()
    {
        block.set_cache_control();
    }
    let has_tools = !request.tools.is_empty();
    let tool_choice = match request.tool_choice {
        _ if !has_tools => None,
        ToolChoice::Required if thinking.is_none() => Some(serde_json::json!({"type": "any"})),
        ToolChoice::None => Some(serde_json::json!({"type": "none"})),
        _ => None,
    };
    let system = match request.system.trim().is_empty() {
        true => Vec::new(),
        false => vec![Block::Text { text: Cow::Borrowed(request.system), cache_control: Some(EPHEMERAL) }],
    };
    let body = Request {
        model: &config.model,
        max_tokens: request.token_cap(config.max_tokens),
        system,
        messages,
        tools: has_tools.then_some(tools),
        tool_choice,
        temperature: request.temperature.or(config.temperature).filter(|_| thinking.is_none()),
        thinking,
        stream: config.stream,
        extra: &config.extra_body,
    };
    serde_json::to_vec(&body)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
