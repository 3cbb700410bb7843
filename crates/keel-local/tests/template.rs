#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The model's own chat template, rendered as Hugging Face (Python Jinja2) renders it.
//! The expected text was produced by Python's jinja2 with transformers' settings
//! (trim_blocks, lstrip_blocks, json.dumps for tojson) from the same conversation.

use keel_llm::{
    AssistantMessage, ContentBlock, Message, ToolCall, ToolDefinition, ToolResultMessage, UserMessage,
};
use keel_local::template::ChatTemplate;
use pretty_assertions::assert_eq;
use serde_json::value::RawValue;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn qwen_template_matches_python_jinja_with_tools_calls_and_results() {
    let template = ChatTemplate::new(&fixture("qwen2.5-coder.jinja"), "", "<|im_end|>").unwrap();
    let messages = vec![
        Message::User(UserMessage::text("Read a.txt")),
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new("c1", "read_file", r#"{"path": "a.txt"}"#))],
            ..AssistantMessage::default()
        }),
        Message::ToolResult(ToolResultMessage {
            call_id: "c1".into(),
            name: "read_file".into(),
            content: "1\thello <b>".into(),
            is_error: false,
            images: Vec::new(),
        }),
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::Text { text: "It says hello.".into() }],
            ..AssistantMessage::default()
        }),
        Message::User(UserMessage::text("Thanks")),
    ];
    let tools = vec![ToolDefinition {
        name: "read_file".into(),
        description: "Read a file's text.".into(),
        parameters: RawValue::from_string(
            r#"{"type":"object","properties":{"path":{"type":"string","description":"File path."},"limit":{"type":"integer"}},"required":["path"]}"#
                .into(),
        )
        .unwrap(),
    }];
    let prompt = template.render("Be brief.", &messages, &tools).unwrap();
    assert_eq!(prompt, fixture("qwen2.5-coder.expected.txt"));
}

#[test]
fn without_tools_the_template_takes_its_plain_branch() {
    let template = ChatTemplate::new(&fixture("qwen2.5-coder.jinja"), "", "<|im_end|>").unwrap();
    let prompt = template.render("", &[Message::User(UserMessage::text("hi"))], &[]).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn broken_templates_and_raised_exceptions_are_clear_errors() {
    let err = ChatTemplate::new("{% if %}", "", "").unwrap_err().to_string();
    assert!(err.contains("does not compile"), "{err}");
    let raising = ChatTemplate::new("{{ raise_exception('System role not supported') }}", "", "").unwrap();
    let err = raising.render("", &[], &[]).unwrap_err().to_string();
    assert!(err.contains("System role not supported"), "{err}");
}

#[test]
fn the_mended_qwen_template_shows_the_call_format_with_single_braces_and_nothing_else_changes() {
    let source = fixture("qwen2.5-coder.jinja");
    let mended = keel_local::template::mend(&source);
    let render = |source: &str| {
        let template = ChatTemplate::new(source, "", "<|im_end|>").unwrap();
        let messages = [Message::User(UserMessage::text("hi"))];
        let tools = [ToolDefinition {
            name: "shell".into(),
            description: "Run a command.".into(),
            parameters: RawValue::from_string(r#"{"type":"object","properties":{}}"#.into()).unwrap(),
        }];
        template.render("Be brief.", &messages, &tools).unwrap()
    };
    let (faithful, fixed) = (render(&source), render(&mended));
    let slip = r#"{{"name": <function-name>, "arguments": <args-json-object>}}"#;
    assert!(faithful.contains(slip), "{faithful}");
    assert_eq!(
        fixed,
        faithful.replace(slip, r#"{"name": <function-name>, "arguments": <args-json-object>}"#)
    );
    // A template without the slip is not touched.
    assert!(matches!(keel_local::template::mend("{{ messages }}"), std::borrow::Cow::Borrowed(_)));
}
