//! Tool calls that a model wrote as text instead of using the tool-call field.
//!
//! Small local models often answer with the call as text. When a message has no native
//! tool call, these become real calls:
//!
//! - calls inside tags, anywhere in the text: `<tool_call>…</tool_call>` (Qwen's format;
//!   one or more), also `<tools>`, `<function_call>` and (a small-model slip)
//!   `<tool_response>`; the prose around them is kept;
//! - calls that *open* the message: fenced blocks (```` ```json {…} ``` ````), bare
//!   objects (also `{{doubled}}` or with stray closing braces), a list of call objects,
//!   or XML-ish elements (`<function name="x" arguments='{…}'/>`, `<shell command="ls"/>`).
//!   Text after them is dropped: the model cannot know a result it has not been sent, so
//!   what it writes there is invented.
//!
//! A call object says `name` plus `arguments` or `parameters` (an object, or a string of
//! JSON), possibly wrapped as `{"function": {…}}`; Python-style literals and single
//! quotes are read too (see [`crate::lenient`]). A call to a tool that is not offered is
//! still a call when its shape is unmistakable (tags, or `name` with `arguments`): the
//! loop answers it with the list of real tools. A call shown after prose, outside tags,
//! is an example in an explanation and stays text.

use serde_json::Value;

mod cut;
mod guard;

pub use guard::CallTextGuard;

use crate::lenient;
use crate::message::{AssistantMessage, ContentBlock, FinishReason, ToolCall};

/// Tags whose body is read as calls.
const TAGS: [&str; 4] = ["tool_call", "tools", "function_call", "tool_response"];

/// Rewrites a finished message whose text holds tool calls for `tools` (see
/// [`extract_text_tool_calls`]); a natural stop becomes `tool_use` when calls were
/// found. Returns true when calls were extracted. The same for every wire API.
///
/// A reply that stopped at the output limit inside a call it wrote as text (see
/// [`cut`]) gets that call with its arguments as far as they got, and keeps its
/// `length` finish, so the loop answers it as a native call cut off.
pub fn apply_text_tool_calls(message: &mut AssistantMessage, tools: &[&str]) -> bool {
    let found = extract_text_tool_calls(&mut message.content, tools);
    if found && message.finish_reason == FinishReason::Stop {
        message.finish_reason = FinishReason::ToolUse;
    }
    if !found && message.finish_reason == FinishReason::Length {
        return read_cut_call(&mut message.content, tools);
    }
    found
}

/// The text blocks of `content`, joined.
fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Replaces the text of `content` by the call it opened and never closed, if any.
fn read_cut_call(content: &mut Vec<ContentBlock>, tools: &[&str]) -> bool {
    if content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_))) {
        return false;
    }
    let text = text_of(content);
    let Some((prose, call)) = cut::cut_call(&text, tools) else { return false };
    content.retain(|b| !matches!(b, ContentBlock::Text { .. }));
    if !prose.is_empty() {
        content.push(ContentBlock::Text { text: prose });
    }
    content.push(ContentBlock::ToolCall(call));
    true
}

/// Rewrites `content` when its text holds tool calls (see the module docs) for `tools`.
/// Returns true when calls were extracted. Reasoning blocks are kept.
pub fn extract_text_tool_calls(content: &mut Vec<ContentBlock>, tools: &[&str]) -> bool {
    if content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_))) {
        return false;
    }
    let text = text_of(content);
    let Some((prose, calls)) = parse(&text, tools) else { return false };
    content.retain(|b| !matches!(b, ContentBlock::Text { .. }));
    if !prose.trim().is_empty() {
        content.push(ContentBlock::Text { text: prose.trim().to_owned() });
    }
    content.extend(calls.into_iter().enumerate().map(|(n, mut call)| {
        call.id = format!("call_text_{n}");
        ContentBlock::ToolCall(call)
    }));
    true
}

/// Parses `text` into (prose to keep, calls), or `None` when it holds no call.
fn parse(text: &str, tools: &[&str]) -> Option<(String, Vec<ToolCall>)> {
    let trimmed = text.trim();
    for tag in TAGS {
        if trimmed.contains(&format!("<{tag}>")) {
            return parse_tags(trimmed, tag, tools);
        }
    }
    leading_calls(trimmed, tools).map(|(calls, _rest)| (String::new(), calls))
}

/// Calls at the start of `text`, one after another, and the text after the last one.
fn leading_calls<'t>(text: &'t str, tools: &[&str]) -> Option<(Vec<ToolCall>, &'t str)> {
    let mut calls = Vec::new();
    let mut rest = text.trim_start();
    loop {
        let next = if rest.starts_with("```") {
            fenced_calls(rest, tools)
        } else if rest.starts_with('{') || rest.starts_with('[') {
            object_calls(rest, tools)
        } else if rest.starts_with('<') {
            element_calls(rest, tools)
        } else {
            None
        };
        let Some((found, consumed)) = next else { break };
        calls.extend(found);
        rest = rest[consumed..].trim_start();
    }
    (!calls.is_empty()).then_some((calls, rest))
}

/// A fenced block at the start of `text` whose body is only calls.
fn fenced_calls(text: &str, tools: &[&str]) -> Option<(Vec<ToolCall>, usize)> {
    let after_open = text.strip_prefix("```")?;
    let newline = after_open.find('\n')?;
    let info = after_open[..newline].trim();
    if info.contains(['{', ' ']) {
        return None;
    }
    let body_start = 3 + newline + 1;
    let close = text[body_start..].find("```")?;
    let body = &text[body_start..body_start + close];
    Some((only_calls(body, tools)?, body_start + close + 3))
}

/// `text` holds calls and nothing else.
fn only_calls(text: &str, tools: &[&str]) -> Option<Vec<ToolCall>> {
    let (calls, rest) = leading_calls(text, tools)?;
    rest.trim().is_empty().then_some(calls)
}

/// A call object (or a list of them) at the start of `text`, read leniently: extra
/// opening braces must be matched by closing ones, and stray closing braces after the
/// object are skipped.
fn object_calls(text: &str, tools: &[&str]) -> Option<(Vec<ToolCall>, usize)> {
    let start = text.bytes().take_while(|b| *b == b'{').count().saturating_sub(1);
    let (value, consumed) = lenient::parse_prefix(&text[start..])?;
    let mut end = start + consumed;
    // Stray closing braces after the object: `{{…}}`, `{…}}}`.
    loop {
        let after = &text[end..];
        let trimmed = after.trim_start();
        if !trimmed.starts_with('}') {
            break;
        }
        end += after.len() - trimmed.len() + 1;
    }
    let calls = match &value {
        Value::Array(items) => items.iter().map(|v| call_from(v, tools)).collect::<Option<Vec<_>>>()?,
        single => vec![call_from(single, tools)?],
    };
    (!calls.is_empty()).then_some((calls, end))
}

fn parse_tags(text: &str, tag: &str, tools: &[&str]) -> Option<(String, Vec<ToolCall>)> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut prose = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        prose.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        // A missing closing tag (generation stopped) still ends the call at the text's end.
        let (body, next) = match after.find(&close) {
            Some(end) => (&after[..end], &after[end + close.len()..]),
            None => (after, ""),
        };
        calls.extend(only_calls(body, tools)?);
        rest = next;
    }
    prose.push_str(rest);
    (!calls.is_empty()).then_some((prose, calls))
}

/// XML-ish elements at the start of `text`: `<function name="shell" arguments='{…}'/>`,
/// or an offered tool as the element with its arguments as attributes,
/// `<shell command="ls" timeout_secs="5"/>`.
fn element_calls(text: &str, tools: &[&str]) -> Option<(Vec<ToolCall>, usize)> {
    let mut rest = text.strip_prefix('<')?;
    let name_end = rest.find(|c: char| c.is_whitespace() || c == '/' || c == '>')?;
    let element = &rest[..name_end];
    if element != "function" && !tools.contains(&element) {
        return None;
    }
    rest = &rest[name_end..];
    let mut attributes: Vec<(String, String)> = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("/>") {
            rest = after;
            break;
        }
        if let Some(after) = rest.strip_prefix('>') {
            rest = after.trim_start().strip_prefix(&format!("</{element}>"))?;
            break;
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_owned();
        rest = rest[eq + 1..].trim_start();
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        rest = &rest[1..];
        let end = rest.find(quote)?;
        attributes.push((key, unescape_xml(&rest[..end])));
        rest = &rest[end + 1..];
    }
    let value = if element == "function" {
        let name = attributes.iter().find(|(k, _)| k == "name").map(|(_, v)| v.clone())?;
        let arguments = match attributes.iter().find(|(k, _)| k == "arguments") {
            Some((_, raw)) => lenient::parse(raw)?,
            None => Value::Object(serde_json::Map::new()),
        };
        serde_json::json!({"name": name, "arguments": arguments})
    } else {
        let arguments: serde_json::Map<String, Value> = attributes
            .into_iter()
            .map(|(k, v)| {
                // Numbers and booleans written as attribute text keep their type.
                let typed = match serde_json::from_str::<Value>(&v) {
                    Ok(scalar @ (Value::Number(_) | Value::Bool(_))) => scalar,
                    _ => Value::String(v),
                };
                (k, typed)
            })
            .collect();
        serde_json::json!({"name": element, "arguments": arguments})
    };
    Some((vec![call_from(&value, tools)?], text.len() - rest.len()))
}

fn unescape_xml(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A call from a call object: `{"name", "arguments" | "parameters"}`, possibly wrapped in
/// `{"function": …}`. An unknown tool counts only when the arguments are there too.
fn call_from(value: &Value, tools: &[&str]) -> Option<ToolCall> {
    let object = value.as_object()?;
    let object = match object.get("function").and_then(Value::as_object) {
        Some(function) => function,
        None => object,
    };
    let name = object.get("name")?.as_str()?.trim();
    let arguments = object.get("arguments").or_else(|| object.get("parameters"));
    if name.is_empty() || (!tools.contains(&name) && !matches!(arguments, Some(Value::Object(_)))) {
        return None;
    }
    let arguments = match arguments {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(raw)) => match lenient::parse(raw) {
            Some(parsed @ Value::Object(_)) => parsed.to_string(),
            _ => raw.clone(),
        },
        Some(other) => other.to_string(),
    };
    Some(ToolCall::new(String::new(), name, arguments))
}

/// Turns the text before a reply's first call into reasoning. That text is the model's
/// note to itself ("line 3 prints Hello; I change it to Hi"), not an answer, and
/// reasoning is not sent back to local servers (nor by the embedded model's template):
/// a small model shown its own earlier notes copies them, and they come to narrate
/// steps it never took. A reply without a call is left alone (its text is the answer).
pub fn thoughts_as_reasoning(content: &mut [ContentBlock]) {
    let Some(first_call) = content.iter().position(|b| matches!(b, ContentBlock::ToolCall(_))) else {
        return;
    };
    for block in &mut content[..first_call] {
        if let ContentBlock::Text { text } = block {
            let text = std::mem::take(text).trim().to_owned();
            *block = ContentBlock::Thinking { text, signature: None };
        }
    }
}

#[cfg(test)]
mod tests;
