//! Tool calls that a model wrote as text instead of using the tool-call field.
//!
//! Small local models often answer with the call as text. Recognized, when the message
//! has no native tool call:
//!
//! - `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (one or more; Qwen's format),
//!   also `<tools>`, `<function_call>` or (a small-model slip) `<tool_response>` tags
//!   holding one or more call objects, or XML-ish elements
//!   (`<function name="x" arguments='{…}'/>`, `<shell command="ls"/>`);
//! - fenced blocks, ```` ```json {"name": …, "arguments": …} ``` ````, as the whole text;
//! - bare objects as the whole text, also wrapped in doubled braces `{{…}}`.
//!
//! The object may say `arguments` or `parameters` (an object, or a string of JSON), and
//! may be wrapped as `{"function": {…}}`. Every object must name an offered tool, and
//! nothing but whitespace may surround fenced or bare calls; otherwise the text stays
//! text.

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
    // Small models also wrap calls in the tags their template uses for other things.
    for tag in ["tool_call", "tools", "function_call", "tool_response"] {
        if trimmed.contains(&format!("<{tag}>")) {
            return parse_tags(trimmed, tag, tools);
        }
    }
    // Bare XML-ish elements: `<shell command="ls"/>` or `<function name=… />`.
    if trimmed.starts_with('<')
        && let Some(calls) = parse_function_elements(trimmed, tools)
    {
        return Some((String::new(), calls.into_iter().enumerate().map(|(n, c)| numbered(c, n)).collect()));
    }
    parse_segments(trimmed, tools).map(|calls| (String::new(), calls))
}

/// The whole text as fenced blocks and bare JSON objects, each a call; whitespace only
/// between them.
fn parse_segments(text: &str, tools: &[&str]) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if rest.starts_with("```") {
            let after_open = &rest[3..];
            let close = after_open.find("```")?;
            let block = &rest[..3 + close + 3];
            let body = strip_fence(block)?;
            calls.extend(parse_stream(body, tools)?);
            rest = after_open[close + 3..].trim_start();
        } else if let Some((value, consumed)) = doubled_braces(rest) {
            calls.push(call_from(&value, tools)?);
            rest = rest[consumed..].trim_start();
        } else {
            let (values, consumed) = json_prefix(rest)?;
            for value in values {
                calls.push(call_from(&value, tools)?);
            }
            rest = rest[consumed..].trim_start();
        }
    }
    if calls.is_empty() {
        return None;
    }
    Some(calls.into_iter().enumerate().map(|(n, c)| numbered(c, n)).collect())
}

/// One object written with doubled braces, `{{"name": …}}`, at the start of `text`.
fn doubled_braces(text: &str) -> Option<(Value, usize)> {
    let inner = text.strip_prefix('{')?;
    if !inner.starts_with('{') {
        return None;
    }
    let mut stream = serde_json::Deserializer::from_str(inner).into_iter::<Value>();
    let value = stream.next()?.ok()?;
    let after = &inner[stream.byte_offset()..];
    let close = after.len() - after.trim_start().len();
    after.trim_start().starts_with('}').then_some((value, 1 + stream.byte_offset() + close + 1))
}

/// JSON values at the start of `text`, stopping before anything that is not JSON.
fn json_prefix(text: &str) -> Option<(Vec<Value>, usize)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut values = Vec::new();
    let mut consumed = 0;
    while let Some(Ok(value)) = stream.next() {
        values.push(value);
        consumed = stream.byte_offset();
    }
    (!values.is_empty()).then_some((values, consumed))
}

/// Every JSON value in `text` (nothing else allowed), each a call.
fn parse_stream(text: &str, tools: &[&str]) -> Option<Vec<ToolCall>> {
    let (values, consumed) = json_prefix(text)?;
    if !text[consumed..].trim().is_empty() {
        return None;
    }
    values.iter().map(|v| call_from(v, tools)).collect()
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
        let body = body.trim();
        let body = strip_fence(body).unwrap_or(body);
        calls.extend(parse_stream(body, tools).or_else(|| parse_function_elements(body, tools))?);
        rest = next;
    }
    prose.push_str(rest);
    if calls.is_empty() {
        return None;
    }
    let calls = calls.into_iter().enumerate().map(|(n, c)| numbered(c, n)).collect();
    Some((prose, calls))
}

/// XML-ish elements, one or more, with nothing else between them:
/// `<function name="shell" arguments='{"command": "ls"}'/>`, or the tool as the element
/// with its arguments as attributes, `<shell command="ls" timeout_secs="5"/>`.
fn parse_function_elements(text: &str, tools: &[&str]) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        rest = rest.strip_prefix('<')?;
        let name_end = rest.find(|c: char| c.is_whitespace() || c == '/' || c == '>')?;
        let element = &rest[..name_end];
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
        rest = rest.trim_start();
        let value = if element == "function" {
            let name = attributes.iter().find(|(k, _)| k == "name").map(|(_, v)| v.clone())?;
            let arguments = match attributes.iter().find(|(k, _)| k == "arguments") {
                Some((_, raw)) => serde_json::from_str::<Value>(raw).ok()?,
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
        calls.push(call_from(&value, tools)?);
    }
    (!calls.is_empty()).then_some(calls)
}

fn unescape_xml(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
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

fn call_from(value: &Value, tools: &[&str]) -> Option<ToolCall> {
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
    fn several_calls_in_fences_lines_or_a_tools_block() {
        let two =
            Some(vec![call("shell", r#"{"command":"ls"}"#, 0), call("read_file", r#"{"path":"a"}"#, 1)]);
        assert_eq!(
            extract(
                "```json\n{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}\n```\n\n```json\n{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}\n```"
            ),
            two
        );
        assert_eq!(
            extract(
                "{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}\n{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}"
            ),
            two
        );
        assert_eq!(
            extract(
                "<tools>\n{\"function\": {\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}}\n{\"function\": {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}}\n</tools>"
            ),
            Some(vec![call("shell", r#"{"command":"ls"}"#, 0), call("read_file", r#"{"path":"a"}"#, 1)])
        );
        assert_eq!(
            extract(
                "{{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}}\n{{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}}"
            ),
            two
        );
        assert_eq!(
            extract(
                "<tools>\n  <function name=\"shell\" arguments='{\"command\": \"ls\"}'/>\n  <function name=\"read_file\" arguments='{\"path\": \"a\"}'/>\n</tools>"
            ),
            two
        );
        assert_eq!(
            extract(
                "<tools>\n    <shell command=\"ls\" timeout_secs=\"120\"/>\n    <read_file path=\"a\"></read_file>\n</tools>"
            ),
            Some(vec![
                call("shell", r#"{"command":"ls","timeout_secs":120}"#, 0),
                call("read_file", r#"{"path":"a"}"#, 1)
            ])
        );
        assert_eq!(
            extract("<shell command=\"python3 hello.py\" timeout_secs=\"30\"></shell>"),
            Some(vec![call("shell", r#"{"command":"python3 hello.py","timeout_secs":30}"#, 0)])
        );
        assert_eq!(extract("<b>bold</b> text"), None);
        // One call to an unknown tool spoils the lot.
        assert_eq!(
            extract("{\"name\":\"shell\",\"arguments\":{}}\n{\"name\":\"nope\",\"arguments\":{}}"),
            None
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
