//! Tool calls that a model wrote as text instead of using the tool-call field.
//!
//! Small local models often answer with the call as text. Recognized, when the message
//! has no native tool call:
//!
//! - `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (one or more; Qwen's format);
//! - a fenced block, ```` ```json {"name": …, "arguments": …} ``` ````, as the whole text;
//! - the bare object as the whole text, also wrapped in doubled braces `{{…}}`.
//!
//! The object may say `arguments` or `parameters` (an object, or a string of JSON). The
//! name must be one of the offered tools; anything else stays text.

use serde_json::Value;

use crate::message::{ContentBlock, ToolCall};

/// Rewrites `content` when its text is a tool call to one of `tools`. Returns true when
/// calls were extracted. Reasoning blocks are kept; text around `<tool_call>` tags is kept.
pub fn extract_text_tool_calls(content: &mut Vec<ContentBlock>, tools: &[&str]) -> bool {
    if content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_))) {
        return false;
    }
    let text: String = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let Some((prose, calls)) = parse(&text, tools) else { return false };
    content.retain(|b| !matches!(b, ContentBlock::Text { .. }));
    if !prose.trim().is_empty() {
        content.push(ContentBlock::Text { text: prose.trim().to_owned() });
    }
    content.extend(calls.into_iter().map(ContentBlock::ToolCall));
    true
}

/// Parses `text` into (remaining prose, calls), or `None` when it is not a tool call.
fn parse(text: &str, tools: &[&str]) -> Option<(String, Vec<ToolCall>)> {
    let trimmed = text.trim();
    if trimmed.contains("<tool_call>") {
        return parse_tags(trimmed, tools);
    }
    let body = strip_fence(trimmed).unwrap_or(trimmed);
    let call = parse_object(body, tools).or_else(|| {
        let inner = body.strip_prefix('{')?.strip_suffix('}')?.trim();
        parse_object(inner, tools)
    })?;
    Some((String::new(), vec![numbered(call, 0)]))
}

fn parse_tags(text: &str, tools: &[&str]) -> Option<(String, Vec<ToolCall>)> {
    let mut prose = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<tool_call>") {
        prose.push_str(&rest[..start]);
        let after = &rest[start + "<tool_call>".len()..];
        // A missing closing tag (generation stopped) still ends the call at the text's end.
        let (body, next) = match after.find("</tool_call>") {
            Some(end) => (&after[..end], &after[end + "</tool_call>".len()..]),
            None => (after, ""),
        };
        let body = body.trim();
        let body = strip_fence(body).unwrap_or(body);
        let call = parse_object(body, tools)?;
        calls.push(numbered(call, calls.len()));
        rest = next;
    }
    prose.push_str(rest);
    (!calls.is_empty()).then_some((prose, calls))
}

fn strip_fence(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("```")?.strip_suffix("```")?;
    // Drop the info string (json, tool_call, …) on the opening line.
    let newline = inner.find('\n')?;
    let info = inner[..newline].trim();
    if info.contains(['{', ' ']) {
        return None;
    }
    Some(inner[newline + 1..].trim())
}

fn parse_object(text: &str, tools: &[&str]) -> Option<ToolCall> {
    let value: Value = serde_json::from_str(text).ok()?;
    let object = value.as_object()?;
    let object = match object.get("function").and_then(Value::as_object) {
        Some(function) => function,
        None => object,
    };
    let name = object.get("name")?.as_str()?;
    if !tools.contains(&name) {
        return None;
    }
    let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(raw)) => raw.clone(),
        Some(other) => other.to_string(),
    };
    Some(ToolCall { id: String::new(), name: name.to_owned(), arguments })
}

fn numbered(mut call: ToolCall, n: usize) -> ToolCall {
    call.id = format!("call_text_{n}");
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const TOOLS: &[&str] = &["read_file", "shell"];

    fn text(t: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::Text { text: t.into() }]
    }

    fn call(name: &str, args: &str, n: usize) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall {
            id: format!("call_text_{n}"),
            name: name.into(),
            arguments: args.into(),
        })
    }

    fn extract(t: &str) -> Option<Vec<ContentBlock>> {
        let mut content = text(t);
        extract_text_tool_calls(&mut content, TOOLS).then_some(content)
    }

    #[test]
    fn qwen_tags_one_or_several() {
        assert_eq!(
            extract(
                "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>"
            ),
            Some(vec![call("read_file", r#"{"path":"a.rs"}"#, 0)])
        );
        assert_eq!(
            extract(
                "<tool_call>{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}</tool_call>\n<tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"b\"}}</tool_call>"
            ),
            Some(vec![call("shell", r#"{"command":"ls"}"#, 0), call("read_file", r#"{"path":"b"}"#, 1)])
        );
    }

    #[test]
    fn prose_around_tags_is_kept_as_text() {
        assert_eq!(
            extract(
                "I'll list it.\n<tool_call>{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}</tool_call>"
            ),
            Some(vec![
                ContentBlock::Text { text: "I'll list it.".into() },
                call("shell", r#"{"command":"ls"}"#, 0)
            ])
        );
    }

    #[test]
    fn fenced_bare_and_doubled_braces() {
        let expected = Some(vec![call("shell", r#"{"command":"ls -la"}"#, 0)]);
        assert_eq!(
            extract("```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}\n```"),
            expected
        );
        assert_eq!(extract("{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}"), expected);
        assert_eq!(extract("{{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}}"), expected);
        assert_eq!(
            extract("```\n{\"name\":\"shell\",\"parameters\":{\"command\":\"ls -la\"}}\n```"),
            expected
        );
        assert_eq!(
            extract("{\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}"),
            Some(vec![call("shell", r#"{"command":"ls -la"}"#, 0)])
        );
    }

    #[test]
    fn anything_else_stays_text() {
        // Unknown tool.
        assert_eq!(extract("{\"name\": \"rm_everything\", \"arguments\": {}}"), None);
        // Prose around a fenced block.
        assert_eq!(extract("Run this:\n```json\n{\"name\": \"shell\", \"arguments\": {}}\n```"), None);
        // Ordinary JSON that is not a call.
        assert_eq!(extract("{\"path\": \"a\"}"), None);
        // A broken tag body.
        assert_eq!(extract("<tool_call>{\"name\": \"shell\", </tool_call>"), None);
        assert_eq!(extract("The answer is 42."), None);
    }

    #[test]
    fn native_calls_win() {
        let mut content = vec![
            ContentBlock::Text { text: "{\"name\":\"shell\",\"arguments\":{}}".into() },
            call("read_file", "{}", 0),
        ];
        assert!(!extract_text_tool_calls(&mut content, TOOLS));
    }

    #[test]
    fn unclosed_tag_at_the_end_still_parses() {
        assert_eq!(
            extract("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}"),
            Some(vec![call("read_file", r#"{"path":"x"}"#, 0)])
        );
    }
}
