//! Grammars (llama.cpp GBNF) that make a small model's tool calls valid by construction:
//! once the model starts a call, its name is one of the offered tools and its arguments
//! are JSON matching that tool's schema. Free text is left alone; the engine switches the
//! grammar on only when a call begins.
//!
//! The grammar is built from the tools' JSON schemas: objects (properties in schema
//! order, optional ones may be left out, no others), strings, integers, numbers,
//! booleans, `enum`/`const`, arrays, `anyOf`/`oneOf`, type lists, references into the
//! schema's own `$defs`/`definitions`; anything else is any JSON value.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use keel_llm::ToolDefinition;
use serde_json::Value;

/// How the model's chat template writes calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStyle {
    /// `<tool_call>{"name": …, "arguments": …}</tool_call>`, one or more (Qwen, Hermes).
    Tagged,
    /// `{"name": …, "arguments": …}` objects, one or more.
    Bare,
}

impl CallStyle {
    /// The style a chat template uses: tagged when it mentions `<tool_call>`.
    pub fn of_template(template: &str) -> CallStyle {
        if template.contains("<tool_call>") { CallStyle::Tagged } else { CallStyle::Bare }
    }

    /// The text that opens a call in this style.
    pub fn opener(self) -> &'static str {
        match self {
            CallStyle::Tagged => "<tool_call>",
            CallStyle::Bare => "{",
        }
    }
}

/// What the start of a reply looks like, read as it is generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Too little text to tell.
    Undecided,
    /// The reply is opening a tool call (in any of the shapes small models use).
    Call,
    /// The reply is text.
    Text,
}

/// Tags a call may open with.
const CALL_TAGS: [&str; 5] = ["<tool_call>", "<tools>", "<function", "<tool_response>", "<function_call>"];

/// Longest start kept undecided; past it the reply is text.
const MAX_UNDECIDED: usize = 48;

/// Reads the start of a reply: a call tag, or a call object (`{"name"`, possibly inside a
/// fence, a list or doubled braces), or anything else.
pub fn opening(reply: &str) -> Opening {
    let text = reply.trim_start();
    if text.is_empty() {
        return Opening::Undecided;
    }
    let verdict = opening_of(text);
    if verdict == Opening::Undecided && text.len() > MAX_UNDECIDED { Opening::Text } else { verdict }
}

fn opening_of(text: &str) -> Opening {
    if text.starts_with('<') {
        for tag in CALL_TAGS {
            if text.starts_with(tag) {
                return Opening::Call;
            }
            if tag.starts_with(text) {
                return Opening::Undecided;
            }
        }
        return Opening::Text;
    }
    let mut rest = text;
    if rest.starts_with('`') {
        if "```".starts_with(rest) {
            return Opening::Undecided;
        }
        let Some(after) = rest.strip_prefix("```") else { return Opening::Text };
        let Some(newline) = after.find('\n') else {
            return if after.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                Opening::Undecided
            } else {
                Opening::Text
            };
        };
        if !after[..newline].trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Opening::Text;
        }
        rest = after[newline + 1..].trim_start();
    }
    if let Some(after) = rest.strip_prefix('[') {
        rest = after.trim_start();
    }
    if rest.is_empty() {
        return Opening::Undecided;
    }
    if !rest.starts_with('{') {
        return Opening::Text;
    }
    let rest = rest.trim_start_matches(|c: char| c == '{' || c.is_whitespace());
    if rest.is_empty() {
        return Opening::Undecided;
    }
    for key in ["\"name\"", "'name'", "\"function\""] {
        if rest.starts_with(key) {
            return Opening::Call;
        }
        if key.starts_with(rest) {
            return Opening::Undecided;
        }
    }
    Opening::Text
}

/// Deepest schema nesting turned into rules; deeper parts accept any JSON value.
const MAX_DEPTH: usize = 12;

/// The grammar (root rule `root`) for one to `max_calls` calls to `tools` in `style`,
/// after an optional short thought (one line of up to `thought` characters, without `<`
/// or `{`; 0 for none); after the last call only the end of the reply is allowed. `None` when
/// there are no tools.
pub fn tool_calls(
    tools: &[ToolDefinition],
    style: CallStyle,
    max_calls: usize,
    thought: usize,
) -> Option<String> {
    if tools.is_empty() {
        return None;
    }
    let mut builder = Builder::default();
    let mut alternatives = Vec::new();
    for tool in tools {
        builder.root = serde_json::from_str(tool.parameters.get()).unwrap_or(Value::Null);
        builder.refs.clear();
        builder.ref_prefix = format!("{}-def", sanitize(&tool.name));
        let schema = builder.root.clone();
        let args = builder.value(&schema, &format!("{}-args", sanitize(&tool.name)), 0);
        // Arguments are always an object.
        let args = if args == "value" { "object".to_owned() } else { args };
        let rule = format!("call-{}", sanitize(&tool.name));
        builder.add(
            &rule,
            format!(
                "{} ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws {args}",
                literal(&format!("\"{}\"", escape_json(&tool.name)))
            ),
        );
        alternatives.push(rule);
    }
    builder.add(
        "call",
        format!("\"{{\" ws \"\\\"name\\\"\" ws \":\" ws ({}) ws \"}}\"", alternatives.join(" | ")),
    );
    let one = match style {
        CallStyle::Tagged => "\"<tool_call>\" ws call ws \"</tool_call>\"",
        CallStyle::Bare => "call",
    };
    let more = max_calls.max(1) - 1;
    let calls = if more == 0 { format!("{one} ws") } else { format!("{one} (ws {one}){{0,{more}}} ws") };
    let root = if thought > 0 {
        // A thought is one line: it starts with a letter (not a call's `<` or `{`) and
        // holds no `<`, `{` or line break (a small model's multi-line "plan" narrates
        // steps it has not taken).
        builder.add("thought", format!("[a-zA-Z] [^<{{\\n]{{0,{}}} ws", thought.saturating_sub(1)));
        format!("thought? {calls}")
    } else {
        calls
    };
    builder.add("root", root);
    Some(builder.finish())
}

/// Rule names are `[a-z0-9-]`.
fn sanitize(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    if out.is_empty() {
        out.push('x');
    }
    out
}

fn escape_json(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted[1..quoted.len().saturating_sub(1)].to_owned()
}

/// A GBNF string literal for `text`.
fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const BASE_RULES: &str = r#"ws ::= | " " | "\n" [ \t]{0,16}
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? [0-9]{1,18}
number ::= "-"? [0-9]{1,18} ("." [0-9]{1,18})? ([eE] [-+]? [0-9]{1,4})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"
"#;

#[derive(Default)]
struct Builder {
    rules: BTreeMap<String, String>,
    /// The schema of the tool being built, for `$ref`.
    root: Value,
    /// The rule made for each `$ref` of that tool: built once, so a schema that refers
    /// to itself makes a recursive rule, not an expansion that grows with every level.
    refs: BTreeMap<String, String>,
    /// The prefix of those rules' names (the tool's).
    ref_prefix: String,
}

impl Builder {
    fn add(&mut self, name: &str, body: String) {
        self.rules.insert(name.to_owned(), body);
    }

    fn finish(self) -> String {
        let mut out = String::from(BASE_RULES);
        for (name, body) in &self.rules {
            let _ = writeln!(out, "{name} ::= {body}");
        }
        out
    }

    /// The rule (name or inline expression) for values matching `schema`.
    fn value(&mut self, schema: &Value, name: &str, depth: usize) -> String {
        let Value::Object(schema) = schema else { return "value".into() };
        if depth > MAX_DEPTH {
            return "value".into();
        }
        if let Some(Value::String(reference)) = schema.get("$ref") {
            return self.reference(reference, depth);
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            let literals: Vec<String> = options.iter().map(|v| literal(&v.to_string())).collect();
            return if literals.is_empty() { "value".into() } else { format!("({})", literals.join(" | ")) };
        }
        if let Some(constant) = schema.get("const") {
            return literal(&constant.to_string());
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = schema.get(key) {
                let parts: Vec<String> = options
                    .iter()
                    .enumerate()
                    .map(|(n, option)| self.value(option, &format!("{name}-{n}"), depth + 1))
                    .collect();
                return if parts.is_empty() { "value".into() } else { format!("({})", parts.join(" | ")) };
            }
        }
        match schema.get("type") {
            Some(Value::String(kind)) => self.typed(kind, schema, name, depth),
            Some(Value::Array(kinds)) => {
                let parts: Vec<String> = kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .enumerate()
                    .map(|(n, kind)| self.typed(kind, schema, &format!("{name}-{n}"), depth))
                    .collect();
                if parts.is_empty() { "value".into() } else { format!("({})", parts.join(" | ")) }
            }
            _ if schema.contains_key("properties") => self.typed("object", schema, name, depth),
            _ => "value".into(),
        }
    }

    /// The rule for the schema `reference` names inside the tool's own schema
    /// (`#/$defs/X`, `#/definitions/X`, any local JSON pointer); any value for other
    /// documents or a pointer to nothing.
    fn reference(&mut self, reference: &str, depth: usize) -> String {
        if let Some(rule) = self.refs.get(reference) {
            return rule.clone();
        }
        let Some(pointer) = reference.strip_prefix('#') else { return "value".into() };
        let target = if pointer.is_empty() { Some(&self.root) } else { self.root.pointer(pointer) };
        let Some(target) = target.cloned() else { return "value".into() };
        let rule = format!("{}{}", self.ref_prefix, self.refs.len());
        self.refs.insert(reference.to_owned(), rule.clone());
        let body = self.value(&target, &format!("{rule}-v"), depth + 1);
        self.add(&rule, body);
        rule
    }

    fn typed(
        &mut self,
        kind: &str,
        schema: &serde_json::Map<String, Value>,
        name: &str,
        depth: usize,
    ) -> String {
        match kind {
            "string" => "string".into(),
            "integer" => "integer".into(),
            "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match schema.get("items") {
                Some(items) => {
                    let item = self.value(items, &format!("{name}-item"), depth + 1);
                    let rule = name.to_owned();
                    self.add(&rule, format!("\"[\" ws ({item} (ws \",\" ws {item})*)? ws \"]\""));
                    rule
                }
                None => "array".into(),
            },
            "object" => self.object(schema, name, depth),
            _ => "value".into(),
        }
    }

    /// An object with the schema's properties in order; required ones must appear,
    /// optional ones may be left out; no other keys.
    fn object(&mut self, schema: &serde_json::Map<String, Value>, name: &str, depth: usize) -> String {
        let Some(Value::Object(properties)) = schema.get("properties") else { return "object".into() };
        if properties.is_empty() {
            return "object".into();
        }
        let required: Vec<&str> = match schema.get("required") {
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let fields: Vec<(String, bool)> = properties
            .iter()
            .enumerate()
            .map(|(n, (key, property))| {
                let value = self.value(property, &format!("{name}-{n}"), depth + 1);
                let pair = format!("{} ws \":\" ws {value}", literal(&format!("\"{}\"", escape_json(key))));
                (pair, required.contains(&key.as_str()))
            })
            .collect();
        // rest(i, first): the fields from i on; `first` when nothing was written yet.
        let rest = |i: usize, first: bool| format!("{name}-f{i}{}", if first { "a" } else { "b" });
        for i in (0..fields.len()).rev() {
            for first in [true, false] {
                let separator = if first { "" } else { "ws \",\" ws " };
                let next =
                    if i + 1 < fields.len() { format!(" {}", rest(i + 1, false)) } else { String::new() };
                let with = format!("{separator}{}{next}", fields[i].0);
                let body = if fields[i].1 {
                    with
                } else {
                    let without = if i + 1 < fields.len() { rest(i + 1, first) } else { "\"\"".to_owned() };
                    format!("({with}) | {without}")
                };
                self.add(&rest(i, first), body);
            }
        }
        self.add(name, format!("\"{{\" ws {} ws \"}}\"", rest(0, true)));
        name.to_owned()
    }
}

#[cfg(test)]
mod tests;
