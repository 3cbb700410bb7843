//! Rendering a model's own chat template (from its GGUF) with minijinja, the way the
//! Hugging Face tokenizer renders it in Python, tools included.

use keel_llm::{ContentBlock, Message, ToolDefinition};
use minijinja::value::{Kwargs, Value as JinjaValue};
use minijinja::{Environment, Error, ErrorKind};
use serde_json::{Value, json};

use crate::LocalError;

/// `json.dumps` spacing: `{"a": 1, "b": [1, 2]}`, and with `indent` Python's layout.
struct PythonFormatter {
    indent: Option<usize>,
    /// One entry per open container: whether it has had a value yet.
    open: Vec<bool>,
}

impl PythonFormatter {
    fn newline<W: ?Sized + std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        if let Some(width) = self.indent {
            out.write_all(b"\n")?;
            for _ in 0..self.open.len() * width {
                out.write_all(b" ")?;
            }
        }
        Ok(())
    }

    fn separator<W: ?Sized + std::io::Write>(&mut self, out: &mut W, first: bool) -> std::io::Result<()> {
        if let Some(last) = self.open.last_mut() {
            *last = true;
        }
        if !first {
            out.write_all(if self.indent.is_some() { b"," } else { b", " })?;
        }
        self.newline(out)
    }

    fn close<W: ?Sized + std::io::Write>(&mut self, out: &mut W, bracket: &[u8]) -> std::io::Result<()> {
        let had_values = self.open.pop().unwrap_or(false);
        if had_values {
            self.newline(out)?;
        }
        out.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.open.push(false);
        out.write_all(b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.close(out, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        out: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.separator(out, first)
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.open.push(false);
        out.write_all(b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        self.close(out, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        out: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.separator(out, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        out.write_all(b": ")
    }
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`.
pub fn python_json(value: &Value, indent: Option<usize>) -> String {
    let mut out = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut out, PythonFormatter { indent, open: Vec::new() });
    if serde::Serialize::serialize(value, &mut serializer).is_err() {
        return value.to_string();
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn tojson(value: JinjaValue, kwargs: Kwargs) -> Result<String, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(python_json(&json, indent))
}

fn raise_exception(message: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

/// Arguments as the template expects them: an object, or the raw text when they are
/// not valid JSON.
fn arguments_value(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::String(raw.to_owned()),
    }
}

/// Text, then a note for each image: the templated routes send text alone (keel refuses
/// a prompt with images for them; a tool's images reach the model as these notes).
fn with_notes<'a>(text: &'a str, images: &[keel_llm::Image]) -> std::borrow::Cow<'a, str> {
    if images.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for image in images {
        out.push('\n');
        out.push_str(&image.omitted_note());
    }
    std::borrow::Cow::Owned(out)
}

/// The conversation in Hugging Face's message format.
pub fn hf_messages(system: &str, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in messages {
        out.push(match message {
            Message::User(user) => json!({"role": "user", "content": with_notes(&user.content, &user.images)}),
            Message::ToolResult(result) => json!({
                "role": "tool", "content": with_notes(&result.content, &result.images),
                "tool_call_id": result.call_id, "name": result.name
            }),
            Message::Assistant(assistant) => {
                let text: String = assistant
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = assistant
                    .tool_calls()
                    .map(|call| {
                        json!({"id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": arguments_value(&call.arguments)}})
                    })
                    .collect();
                let mut value = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    value["tool_calls"] = Value::Array(calls);
                }
                value
            }
        });
    }
    out
}

/// The tools in Hugging Face's format.
pub fn hf_tools(tools: &[ToolDefinition]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let parameters: Value = serde_json::from_str(tool.parameters.get()).unwrap_or(json!({}));
            json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": parameters}})
        })
        .collect()
}

/// Known slips in published chat templates, mended before compiling (see [`mend`]):
/// (the text in the template's source, its replacement).
const MENDS: &[(&str, &str)] = &[(
    // Qwen2.5's template shows the call format with doubled braces (the braces sit inside
    // a string literal, so Jinja prints both), while the calls in the history it renders
    // have single ones. The 1.5B model wrote `{{"name": "reverse_words", "arguments": {}}}`
    // as a file's content and doubled braces in calls written as text.
    r#"{{\"name\": <function-name>, \"arguments\": <args-json-object>}}"#,
    r#"{\"name\": <function-name>, \"arguments\": <args-json-object>}"#,
)];

/// `source` with the known slips of published templates mended ([`MENDS`]); other
/// templates are returned as they are.
pub fn mend(source: &str) -> std::borrow::Cow<'_, str> {
    let mut mended = std::borrow::Cow::Borrowed(source);
    for (slip, fix) in MENDS {
        if mended.contains(slip) {
            mended = std::borrow::Cow::Owned(mended.replace(slip, fix));
        }
    }
    mended
}

impl ChatTemplate {
    /// Compiles `source`. `bos`/`eos` are the tokenizer's special token texts.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<ChatTemplate, LocalError> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", |format: String| -> String {
            // Only the common date format is supported; templates use it for "today".
            let _ = format;
            keel_date()
        });
        // Hugging Face renders chat templates with trim_blocks and lstrip_blocks on.
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| LocalError::Template(format!("template syntax: {e}")))?;
        env.set_syntax(syntax);
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| LocalError::Template(format!("the model's chat template does not compile: {e}")))?;
        Ok(ChatTemplate { env, bos: bos.to_owned(), eos: eos.to_owned() })
    }

    /// Renders the prompt for `messages` with `tools`, ending with the generation prompt.
    pub fn render(
        &self,
        system: &str,
        messages: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<String, LocalError> {
        let template =
            self.env.get_template("chat").map_err(|e| LocalError::Template(format!("chat template: {e}")))?;
        let tools = hf_tools(tools);
        let context = json!({
            "messages": hf_messages(system, messages),
            "tools": if tools.is_empty() { Value::Null } else { Value::Array(tools) },
            "add_generation_prompt": true,
            "bos_token": self.bos,
            "eos_token": self.eos,
        });
        template
            .render(JinjaValue::from(minijinja::value::Serde(&context)))
            .map_err(|e| LocalError::Template(format!("rendering the chat template failed: {e}")))
    }
}

/// Today as `26 Nov 2026`, for templates that print the date.
fn keel_date() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    let (year, month, day) = keel_session::time::civil_from_days(days);
    const NAMES: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!("{day:02} {} {year}", NAMES[(month as usize).clamp(1, 12) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn python_json_spacing() {
        let value = json!({"name": "shell", "arguments": {"command": "ls", "n": [1, 2]}, "empty": []});
        assert_eq!(
            python_json(&value, None),
            r#"{"name": "shell", "arguments": {"command": "ls", "n": [1, 2]}, "empty": []}"#
        );
        assert_eq!(
            python_json(&json!({"a": [1], "b": {}}), Some(2)),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}"
        );
        assert_eq!(python_json(&json!("<b>é</b>"), None), "\"<b>é</b>\"");
    }
}
