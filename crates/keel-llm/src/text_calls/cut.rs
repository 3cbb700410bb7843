//! A text-written call cut off by the output limit.
//!
//! A small model caught in a loop writes a call's argument until the reply reaches the
//! output token limit (an `answer` whose text repeated one sentence for 2,048 tokens).
//! The JSON never closes, so no call is read from it, and the turn ended with the broken
//! text as its answer. Read as a call with its arguments as far as they got, it is
//! answered as a native call cut off is: not run, "send it again, shorter".

use crate::message::ToolCall;

use super::TAGS;

/// Longest tool name read.
const MAX_NAME: usize = 64;

/// `(prose before it, the call)` when `text`, from a reply that stopped at the output
/// limit, opens a call to one of `tools` and never closes it: a tag with no end tag, or
/// a message that starts with a call object. `None` when the arguments as written
/// parse (they would run as if whole).
pub(super) fn cut_call(text: &str, tools: &[&str]) -> Option<(String, ToolCall)> {
    let text = text.trim();
    let (prose, body) = opened_call(text)?;
    let name = string_after(body, "\"name\"")?;
    if !tools.contains(&name) {
        return None;
    }
    let arguments = ["\"arguments\"", "\"parameters\""]
        .iter()
        .find_map(|key| value_after(body, key))
        .unwrap_or("")
        .trim_end();
    if serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok() {
        return None;
    }
    Some((prose.trim().to_owned(), ToolCall::new("call_text_0", name, arguments)))
}

/// The prose before an unclosed call and the call's text.
fn opened_call(text: &str) -> Option<(&str, &str)> {
    for tag in TAGS {
        let open = format!("<{tag}>");
        if let Some(start) = text.find(&open) {
            let body = &text[start + open.len()..];
            return (!body.contains(&format!("</{tag}>"))).then_some((&text[..start], body));
        }
    }
    let body = match text.strip_prefix("```") {
        Some(fenced) => fenced.split_once('\n')?.1,
        None => text,
    };
    body.trim_start().starts_with('{').then_some(("", body))
}

/// The JSON value after `key` and its colon, as written (to the end of `text`).
fn value_after<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let after = &text[text.find(key)? + key.len()..];
    Some(after.trim_start().strip_prefix(':')?.trim_start())
}

/// The string value after `key`: `"name": "answer"` gives `answer`.
fn string_after<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let value = value_after(text, key)?.strip_prefix('"')?;
    let name = &value[..value.find('"')?];
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    (!name.is_empty() && name.len() <= MAX_NAME && name.chars().all(plain)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: &[&str] = &["answer", "shell"];

    #[test]
    fn an_unclosed_call_is_read_with_its_arguments_as_far_as_they_got() {
        let looping = format!(
            "<tool_call>\n{{\"name\": \"answer\", \"arguments\": {{\"text\": \"{}",
            "The script was fixed. ".repeat(50)
        );
        let (prose, call) = cut_call(&looping, TOOLS).unwrap();
        assert_eq!(prose, "");
        assert_eq!(call.name, "answer");
        assert!(call.arguments.starts_with("{\"text\": \"The script was fixed."), "{}", call.arguments);
        let (prose, call) =
            cut_call("Let me check.\n<tool_call>{\"name\": \"shell\", \"arguments\": {\"comm", TOOLS)
                .unwrap();
        assert_eq!(
            (prose.as_str(), call.name.as_str(), call.arguments.as_str()),
            ("Let me check.", "shell", "{\"comm")
        );
        let (_, call) = cut_call("{\"name\": \"shell\", \"parameters\": {\"command\": \"ls", TOOLS).unwrap();
        assert_eq!(call.arguments, "{\"command\": \"ls");
        let (_, call) = cut_call("```json\n{\"name\": \"shell\", \"arguments\"", TOOLS).unwrap();
        assert_eq!(call.arguments, "");
    }

    #[test]
    fn prose_closed_calls_unknown_tools_and_whole_arguments_are_left_alone() {
        for text in [
            "The answer is long and was cut off in the middle of a sente",
            "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}</tool_call> and then",
            "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {\"x",
            "{\"name\": \"John\", \"age\": 3",
            // Whole arguments would run as if the call were complete.
            "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}",
            "Run it like this: {\"name\": \"shell\", \"arguments\": {\"command\": \"ls",
        ] {
            assert!(cut_call(text, TOOLS).is_none(), "{text}");
        }
    }
}
