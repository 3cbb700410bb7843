//! What a task asks for, read by the model itself: a change, an answer or both, whether
//! it names a check to run, whether it is about layout.
//!
//! keel asks the model once at the start of a turn, beside the conversation, to call one
//! tool, `classify`, whose arguments are enums and booleans: on the routes keel samples
//! itself the call is grammar-constrained, elsewhere the API's required tool choice
//! holds it to the shape. The task may be in any language and any phrasing; no list of
//! words decides. The request and its reply are logged (`model/aside`), the result too
//! (`turn/intent`), so the rules that act on it can be read and replayed from the log.
//! A reply that does not say leaves each part unknown, and the rules that need certainty
//! then leave the turn alone.

use futures::StreamExt;
use keel_llm::{
    Message, ModelClient, ModelEvent, ModelRequest, ToolChoice, ToolDefinition, Usage, UserMessage,
};
use keel_session::{ModelAside, TaskIntent, Wants};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The system prompt of the request.
const SYSTEM: &str = "You read a request that a user wrote to a coding assistant working in a project \
folder, and classify it by calling `classify`. You do not carry out the request.";

/// The name of the one tool of the request.
pub const TOOL: &str = "classify";

/// Most characters of the task put in the request.
const MAX_TASK_CHARS: usize = 4_000;

/// The `classify` tool (`None` only if its schema text were not JSON: a unit test
/// holds it to be).
fn definition() -> Option<ToolDefinition> {
    // Written as text, so it needs no fallible conversion.
    const PARAMETERS: &str = r#"{"type":"object","properties":{"wants":{"type":"string","enum":["change","answer","both"],"description":"change: the request asks to change the project (edit, create, delete, rename, fix, commit, install, run something that changes files); answer: it asks only for information and nothing should change; both: a change and an answer"},"check":{"type":"boolean","description":"true when the request asks to run tests, a script or a command to check the result"},"layout":{"type":"boolean","description":"true when the request is about blank lines, spaces, indentation or line endings"}},"required":["wants","check","layout"]}"#;
    let parameters = serde_json::value::RawValue::from_string(PARAMETERS.to_owned()).ok()?;
    Some(ToolDefinition {
        name: TOOL.to_owned(),
        description: "Classify the request.".to_owned(),
        parameters,
    })
}

/// The request as logged: everything needed to send it again.
pub fn request_record(task: &str) -> ModelAside {
    let task: String = task.chars().take(MAX_TASK_CHARS).collect();
    ModelAside {
        purpose: "intent".to_owned(),
        call_id: None,
        system: SYSTEM.to_owned(),
        prompt: format!("The request:\n<<<\n{task}\n>>>\n\nClassify it."),
        tools: definition().into_iter().collect(),
        tool_choice: ToolChoice::Required,
        temperature: serde_json::Number::from_f64(0.0),
        reply: None,
        error: None,
    }
}

/// Asks `model` what `task` wants. Returns the intent (unknown parts where the reply
/// does not say), the exchange to log, and its usage.
pub async fn read(
    model: &dyn ModelClient,
    task: &str,
    cancel: CancellationToken,
) -> (TaskIntent, ModelAside, Usage) {
    let mut record = request_record(task);
    let (system, tools) = (record.system.clone(), record.tools.clone());
    let messages = [Message::User(UserMessage { content: record.prompt.clone() })];
    let request =
        ModelRequest::new(&system, &messages, &tools).tool_choice(ToolChoice::Required).temperature(0.0);
    let mut stream = model.stream(request, cancel);
    let mut reply = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelEvent::Completed(message)) => {
                reply = Some(message);
                break;
            }
            Ok(_) => {}
            Err(e) => {
                record.error = Some(e.to_string());
                break;
            }
        }
    }
    drop(stream);
    let intent = reply.as_ref().map(parse_reply).unwrap_or_default();
    let usage = reply.as_ref().map(|r| r.usage).unwrap_or_default();
    record.reply = reply;
    (intent, record, usage)
}

/// The intent in a reply: the `classify` call's arguments, or a JSON object written as
/// text by a model that did not call.
pub fn parse_reply(reply: &keel_llm::AssistantMessage) -> TaskIntent {
    let arguments = reply.tool_calls().find(|call| call.name == TOOL).map(|call| call.arguments.clone());
    let text = arguments.unwrap_or_else(|| reply.text());
    let start = text.find('{');
    let end = text.rfind('}');
    let Some(object) = start.zip(end).filter(|(s, e)| s < e).map(|(s, e)| &text[s..=e]) else {
        return TaskIntent::default();
    };
    match serde_json::from_str::<Value>(object) {
        Ok(value) => from_arguments(&value),
        Err(_) => TaskIntent::default(),
    }
}

fn from_arguments(value: &Value) -> TaskIntent {
    let wants = match value.get("wants").and_then(Value::as_str) {
        Some("change") => Some(Wants::Change),
        Some("answer") => Some(Wants::Answer),
        Some("both") => Some(Wants::Both),
        _ => None,
    };
    TaskIntent {
        wants,
        check: value.get("check").and_then(Value::as_bool),
        layout: value.get("layout").and_then(Value::as_bool),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::{AssistantMessage, ContentBlock, ToolCall};

    fn called(arguments: &str) -> AssistantMessage {
        AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new("c", TOOL, arguments))],
            ..AssistantMessage::default()
        }
    }

    #[test]
    fn the_classify_call_is_read_and_anything_else_is_unknown() {
        assert_eq!(
            parse_reply(&called(r#"{"wants": "answer", "check": false, "layout": false}"#)),
            TaskIntent { wants: Some(Wants::Answer), check: Some(false), layout: Some(false) }
        );
        assert_eq!(
            parse_reply(&called(r#"{"wants": "both", "check": true}"#)),
            TaskIntent { wants: Some(Wants::Both), check: Some(true), layout: None }
        );
        let text = AssistantMessage {
            content: vec![ContentBlock::Text { text: "Sure: {\"wants\": \"change\"}".into() }],
            ..AssistantMessage::default()
        };
        assert_eq!(parse_reply(&text).wants, Some(Wants::Change));
        assert_eq!(parse_reply(&called(r#"{"wants": "maybe"}"#)), TaskIntent::default());
        assert_eq!(parse_reply(&called("not json")), TaskIntent::default());
        assert_eq!(parse_reply(&AssistantMessage::default()), TaskIntent::default());
    }

    #[test]
    fn the_request_holds_the_task_and_the_one_tool() {
        let record = request_record("哪个文件定义了 parse_header？");
        assert!(record.prompt.contains("哪个文件定义了 parse_header？"), "{}", record.prompt);
        assert_eq!(record.tools.len(), 1);
        assert_eq!(record.tool_choice, ToolChoice::Required);
        assert_eq!(record.purpose, "intent");
    }
}
