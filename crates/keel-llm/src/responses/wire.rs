//! OpenAI Responses requests: the history as input items, nothing stored server-side.
//!
//! - `store: false`, `include: ["reasoning.encrypted_content"]`, `instructions` = the
//!   system prompt, `prompt_cache_key` = the session, `parallel_tool_calls: true`.
//! - Items, in the order the model produced them: `message` (user `input_text`,
//!   assistant `output_text`), `reasoning` (the item as received, verbatim),
//!   `function_call` (`call_id`, and its `fc_` id), `function_call_output`.
//! - A reasoning item goes back only to the model that wrote it and only with its
//!   `encrypted_content` (without it the API cannot use it, and a server other than
//!   OpenAI's refuses it). A function call carries its item id only when the reasoning
//!   item before it went back too: the API refuses an `fc_` item without its reasoning
//!   item, and takes one without an id as a plain call.
//! - Every function call gets exactly one `function_call_output` right after its
//!   message's items (a missing one is answered "no result was recorded"); a result
//!   whose call is not in the message before it becomes user text.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::client::{ModelRequest, ToolChoice, ToolDefinition};
use crate::config::ProviderConfig;
use crate::image::Image;
use crate::message::ModelInfo;
use crate::message::{AssistantMessage, ContentBlock, Message, ToolResultMessage};

/// The API name a provider item of this API carries.
pub(crate) const API: &str = "responses";

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    stream: bool,
    store: bool,
    include: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

#[derive(Serialize)]
struct Reasoning<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
}

/// One part of a message's content: text, or an image as a `data:` URL.
#[derive(Debug, Serialize)]
pub(crate) struct Part<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_url: Option<String>,
}

impl<'a> Part<'a> {
    fn text(kind: &'static str, text: Cow<'a, str>) -> Self {
        Part { kind, text: Some(text), image_url: None }
    }
}

/// Text then images (an image whose bytes are gone as the note that stands for it).
fn parts<'a>(text: Cow<'a, str>, images: &[Image]) -> Vec<Part<'a>> {
    let mut parts = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() || images.is_empty() {
        parts.push(Part::text("input_text", text));
    }
    for image in images {
        parts.push(match image.data_url() {
            Some(url) => Part { kind: "input_image", text: None, image_url: Some(url) },
            None => Part::text("input_text", Cow::Owned(image.missing_note())),
        });
    }
    parts
}

/// A function call's output: its text, or text and images.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Output<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

/// One input item.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Item<'a> {
    Message {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
    FunctionCall {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
        call_id: &'a str,
        name: &'a str,
        arguments: Cow<'a, str>,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Output<'a>,
    },
    /// An item as the provider sent it (a reasoning item), its own `type` inside.
    #[serde(untagged)]
    Verbatim(&'a Value),
}

fn user_text(text: Cow<'_, str>) -> Item<'_> {
    Item::Message { role: "user", content: vec![Part::text("input_text", text)] }
}

/// Whether `item` is a reasoning item that can go back: it has encrypted content.
fn replayable_reasoning(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("reasoning")
        && item.get("encrypted_content").and_then(Value::as_str).is_some_and(|c| !c.is_empty())
}

/// The items of one assistant message for the model `me`, in order.
fn assistant_items<'a>(message: &'a AssistantMessage, me: &ModelInfo, items: &mut Vec<Item<'a>>) {
    let own = message.is_from(me);
    // Whether the last reasoning item of this message went back (a call after it may
    // then carry its id).
    let mut reasoning_sent = false;
    let mut text: Vec<Part<'a>> = Vec::new();
    let flush = |text: &mut Vec<Part<'a>>, items: &mut Vec<Item<'a>>| {
        if !text.is_empty() {
            items.push(Item::Message { role: "assistant", content: std::mem::take(text) });
        }
    };
    for block in &message.content {
        match block {
            ContentBlock::Text { text: t } if !t.is_empty() => {
                text.push(Part::text("output_text", Cow::Borrowed(t)))
            }
            ContentBlock::ProviderItem { api, item }
                if api == API && item.get("type").and_then(Value::as_str) == Some("reasoning") =>
            {
                reasoning_sent = own && replayable_reasoning(item);
                if reasoning_sent {
                    flush(&mut text, items);
                    items.push(Item::Verbatim(item));
                }
            }
            ContentBlock::ToolCall(call) => {
                flush(&mut text, items);
                items.push(Item::FunctionCall {
                    id: call.item_id.as_deref().filter(|_| reasoning_sent),
                    call_id: &call.id,
                    name: &call.name,
                    arguments: call.object_arguments(),
                });
            }
            _ => {}
        }
    }
    flush(&mut text, items);
}

/// The outputs answering `calls`, one each in call order, then the strays as text.
fn outputs<'a>(calls: &[&'a str], results: &[&'a ToolResultMessage], items: &mut Vec<Item<'a>>) {
    let mut used = vec![false; results.len()];
    for call_id in calls {
        let found = results.iter().enumerate().position(|(n, r)| !used[n] && r.call_id == *call_id);
        let output = match found {
            Some(n) if results[n].images.is_empty() => {
                used[n] = true;
                Output::Text(Cow::Borrowed(results[n].content.as_str()))
            }
            Some(n) => {
                used[n] = true;
                Output::Parts(parts(Cow::Borrowed(results[n].content.as_str()), &results[n].images))
            }
            None => Output::Text(Cow::Borrowed("no result was recorded for this call")),
        };
        items.push(Item::FunctionCallOutput { call_id, output });
    }
    for (result, _) in results.iter().zip(&used).filter(|(_, used)| !**used) {
        items.push(stray(result));
    }
}

/// A result whose call is not in the message before it, as user text.
fn stray(result: &ToolResultMessage) -> Item<'_> {
    let text = format!("[result of the {} call {}]\n{}", result.name, result.call_id, result.content);
    Item::Message { role: "user", content: parts(Cow::Owned(text), &result.images) }
}

/// The conversation as input items for the model `me`.
pub(crate) fn input<'a>(messages: &'a [Message], me: &ModelInfo) -> Vec<Item<'a>> {
    let mut items = Vec::with_capacity(messages.len() + 4);
    let mut i = 0;
    while let Some(message) = messages.get(i) {
        i += 1;
        match message {
            Message::User(user) if user.images.is_empty() => {
                items.push(user_text(Cow::Borrowed(&user.content)))
            }
            Message::User(user) => items.push(Item::Message {
                role: "user",
                content: parts(Cow::Borrowed(&user.content), &user.images),
            }),
            Message::ToolResult(result) => items.push(stray(result)),
            Message::Assistant(assistant) => {
                let mut results = Vec::new();
                while let Some(Message::ToolResult(result)) = messages.get(i) {
                    results.push(result);
                    i += 1;
                }
                assistant_items(assistant, me, &mut items);
                let calls: Vec<&str> = assistant.tool_calls().map(|c| c.id.as_str()).collect();
                outputs(&calls, &results, &mut items);
            }
        }
    }
    items
}

/// The `tools` array: function tools, not strict (keel's schemas have optional fields).
pub(crate) fn encode_tools(tools: &[ToolDefinition]) -> serde_json::Result<Box<RawValue>> {
    #[derive(Serialize)]
    struct Tool<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'a str,
        description: &'a str,
        parameters: &'a RawValue,
        strict: bool,
    }
    let tools: Vec<Tool<'_>> = tools
        .iter()
        .map(|tool| Tool {
            kind: "function",
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
            strict: false,
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
    let has_tools = !request.tools.is_empty();
    let tool_choice = match request.tool_choice {
        _ if !has_tools => None,
        ToolChoice::Required => Some("required"),
        ToolChoice::None => Some("none"),
        _ => Some("auto"),
    };
    let reasoning = (config.responses.reasoning_effort.is_some()
        || config.responses.reasoning_summary.is_some())
    .then_some(Reasoning {
        effort: config.responses.reasoning_effort.as_deref(),
        summary: config.responses.reasoning_summary.as_deref(),
    });
    let body = Request {
        model: &config.model,
        instructions: Some(request.system).filter(|s| !s.trim().is_empty()),
        input: input(request.messages, me),
        tools: has_tools.then_some(tools),
        tool_choice,
        parallel_tool_calls: has_tools.then_some(true),
        stream: config.stream,
        store: false,
        include: ["reasoning.encrypted_content"],
        prompt_cache_key: request.cache_key,
        max_output_tokens: request.token_cap(config.max_tokens),
        reasoning,
        temperature: request.temperature.or(config.temperature),
        extra: &config.extra_body,
    };
    serde_json::to_vec(&body)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
