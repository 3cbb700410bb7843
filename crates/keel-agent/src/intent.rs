//! What a task asks for, read by the model itself: whether doing it changes the project,
//! whether it asks to be told something (so a change, an answer or both), whether it
//! names a check to run, whether it is about layout.
//!
//! keel asks the model at the start of a turn, beside the conversation, to call one tool,
//! `classify`, whose arguments are booleans (a small model asked to pick one of "change",
//! "answer" and "both" read "Can you fix it?" as a question). On the routes keel samples
//! itself the call is grammar-constrained at temperature 0; elsewhere the API's required
//! tool choice holds it to the shape. A 1.5B model answers the call's first field `true`
//! far more often than the later ones, so keel asks twice and keeps only what both
//! readings say (a part they disagree on is unknown): once with `change` first, once
//! with a restatement of the request first (a field with no yes or no in it) and
//! `question` before `change`. The task may be in any language and any phrasing; no list
//! of words decides. Both requests and their replies are logged (`model/aside`), the
//! result too (`turn/intent`), so the rules that act on it can be read and replayed from
//! the log. Every rule that needs a part leaves the turn alone
//! while that part is unknown.

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

/// The questions, each a boolean property of the `classify` call: (name, description).
const QUESTIONS: [(&str, &str); 4] = [
    (
        "change",
        "true when doing what the request asks changes the project: a file edited, created, deleted or renamed, a commit, an install (also when it is asked politely, as a question)",
    ),
    ("question", "true when the request asks for information the user wants to be told in the reply"),
    ("check", "true when the request asks to run tests, a script or a command to check the result"),
    (
        "layout",
        "true when the request asks to add, remove or change blank (empty) lines, spaces, indentation or line endings",
    ),
];

/// The field that restates the request, written before the questions in a reading that
/// has it.
const RESTATEMENT: (&str, &str) = ("request", "the request in a few English words");

/// One way of asking: the questions' order, and whether the request is restated first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The indices of the questions (change, question, check, layout) in the order they
    /// are asked.
    pub order: [usize; 4],
    /// Whether the call starts by restating the request.
    pub restated: bool,
}

/// The readings, one request each. On 45 requests written for this (11 not in English,
/// polite, terse, with typos; none from the real-task suite) the 1.5B model's reading
/// with `question` first said `question: true` for 17 changes; asked with `change` first
/// it was right 43 times and wrong twice (a French question read as a change). These two
/// agreed on 35 and never on a wrong answer; the pair before (change first, question
/// first) agreed on 27 (issue 29 notes).
pub const READINGS: [Reading; 2] =
    [Reading { order: [0, 1, 2, 3], restated: false }, Reading { order: [1, 0, 2, 3], restated: true }];

/// The `classify` tool for `reading` (`None` only if its schema were not JSON: a unit
/// test holds it to be).
fn definition(reading: Reading) -> Option<ToolDefinition> {
    let field = |(name, description): (&str, &str), kind: &str| {
        format!("{}:{{\"type\":\"{kind}\",\"description\":{}}}", Value::from(name), Value::from(description))
    };
    let restatement = reading.restated.then_some(RESTATEMENT);
    let properties: Vec<String> = restatement
        .map(|r| field(r, "string"))
        .into_iter()
        .chain(reading.order.iter().map(|&i| field(QUESTIONS[i], "boolean")))
        .collect();
    let required: Vec<Value> = restatement
        .map(|r| r.0)
        .into_iter()
        .chain(reading.order.iter().map(|&i| QUESTIONS[i].0))
        .map(Value::from)
        .collect();
    // Written as text: a JSON object keeps the order its properties were written in.
    let parameters = format!(
        "{{\"type\":\"object\",\"properties\":{{{}}},\"required\":{}}}",
        properties.join(","),
        Value::from(required)
    );
    let parameters = serde_json::value::RawValue::from_string(parameters).ok()?;
    Some(ToolDefinition {
        name: TOOL.to_owned(),
        description: "Classify the request.".to_owned(),
        parameters,
    })
}

/// Most tokens a reading's reply may take: the call is a few dozen; a model that runs on
/// past it (llama-server let a 1.5B model write thousands) is cut off.
const MAX_REPLY_TOKENS: u32 = 256;

/// The request for `reading`, as logged: everything needed to send it again.
pub fn request_record(task: &str, reading: Reading) -> ModelAside {
    let task: String = task.chars().take(MAX_TASK_CHARS).collect();
    ModelAside {
        purpose: "intent".to_owned(),
        call_id: None,
        system: SYSTEM.to_owned(),
        prompt: format!("The request:\n<<<\n{task}\n>>>\n\nClassify it."),
        tools: definition(reading).into_iter().collect(),
        tool_choice: ToolChoice::Required,
        temperature: serde_json::Number::from_f64(0.0),
        max_tokens: Some(MAX_REPLY_TOKENS),
        reply: None,
        error: None,
    }
}

/// Asks `model` what `task` wants, once per [`READINGS`], and keeps what the readings
/// agree on. Returns the intent (unknown where they disagree or do not say), the
/// exchanges to log, and their usage.
pub async fn read(
    model: &dyn ModelClient,
    task: &str,
    cancel: CancellationToken,
) -> (TaskIntent, Vec<ModelAside>, Usage) {
    let mut readings = Vec::new();
    let mut records = Vec::new();
    let mut usage = Usage::default();
    for reading in READINGS {
        let (intent, record, spent) = read_once(model, task, reading, cancel.clone()).await;
        readings.push(intent);
        records.push(record);
        usage += spent;
    }
    (agreed(&readings), records, usage)
}

/// What every reading says alike; a part they differ on (or one leaves out) is unknown.
pub fn agreed(readings: &[TaskIntent]) -> TaskIntent {
    fn same<T: PartialEq + Copy>(parts: impl Iterator<Item = Option<T>>) -> Option<T> {
        let mut parts = parts;
        let first = parts.next()??;
        parts.all(|part| part == Some(first)).then_some(first)
    }
    TaskIntent {
        wants: same(readings.iter().map(|r| r.wants)),
        check: same(readings.iter().map(|r| r.check)),
        layout: same(readings.iter().map(|r| r.layout)),
    }
}

async fn read_once(
    model: &dyn ModelClient,
    task: &str,
    reading: Reading,
    cancel: CancellationToken,
) -> (TaskIntent, ModelAside, Usage) {
    let mut record = request_record(task, reading);
    let (system, tools) = (record.system.clone(), record.tools.clone());
    let messages = [Message::User(UserMessage::text(record.prompt.clone()))];
    let request = ModelRequest::new(&system, &messages, &tools)
        .tool_choice(ToolChoice::Required)
        .temperature(0.0)
        .max_tokens(MAX_REPLY_TOKENS);
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

/// The two answers, `change` and `question`, decide what the task wants; a reply that
/// leaves either out leaves it unknown. A request that changes nothing wants an answer,
/// whatever `question` says: "Summarize the last commit.", "list the TODOs" and "how big
/// is the data/ folder" were read `question: false` (they are not worded as questions),
/// and on 90 labelled requests (evals/intent) every one that both readings said changes
/// nothing wanted an answer (right 35 → 43 of 45 held-out, 36 → 39 of the suite's 45,
/// none wrong more).
fn from_arguments(value: &Value) -> TaskIntent {
    let flag = |name: &str| value.get(name).and_then(Value::as_bool);
    let wants = match (flag("change"), flag("question")) {
        (Some(true), Some(false)) => Some(Wants::Change),
        (Some(false), Some(_)) => Some(Wants::Answer),
        (Some(true), Some(true)) => Some(Wants::Both),
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
        let read = |args: &str| parse_reply(&called(args));
        assert_eq!(
            read(r#"{"change": false, "question": true, "check": false, "layout": false}"#),
            TaskIntent { wants: Some(Wants::Answer), check: Some(false), layout: Some(false) }
        );
        assert_eq!(read(r#"{"change": true, "question": false, "check": true}"#).wants, Some(Wants::Change));
        assert_eq!(read(r#"{"change": true, "question": true}"#).wants, Some(Wants::Both));
        assert_eq!(
            read(r#"{"change": false, "question": false}"#).wants,
            Some(Wants::Answer),
            "a request that changes nothing is answered"
        );
        assert_eq!(read(r#"{"change": true}"#).wants, None, "half an answer: unknown");
        let text = AssistantMessage {
            content: vec![ContentBlock::Text {
                text: "Sure: {\"change\": true, \"question\": false}".into(),
            }],
            ..AssistantMessage::default()
        };
        assert_eq!(parse_reply(&text).wants, Some(Wants::Change));
        assert_eq!(read(r#"{"change": "maybe"}"#), TaskIntent::default());
        assert_eq!(read("not json"), TaskIntent::default());
        assert_eq!(parse_reply(&AssistantMessage::default()), TaskIntent::default());
    }

    #[test]
    fn the_request_holds_the_task_and_the_one_tool() {
        let record = request_record("哪个文件定义了 parse_header？", READINGS[1]);
        assert!(record.prompt.contains("哪个文件定义了 parse_header？"), "{}", record.prompt);
        assert_eq!(record.tools.len(), 1);
        assert_eq!(record.tool_choice, ToolChoice::Required);
        assert_eq!(record.purpose, "intent");
        let schema: Value = serde_json::from_str(record.tools[0].parameters.get()).unwrap();
        assert_eq!(
            schema["required"],
            serde_json::json!(["request", "question", "change", "check", "layout"])
        );
        assert_eq!(schema["properties"]["request"]["type"], "string");
        assert_eq!(schema["properties"]["change"]["type"], "boolean");
        let text = record.tools[0].parameters.get();
        assert!(text.find("\"request\"") < text.find("\"question\""), "restated first: {text}");
        assert!(text.find("\"question\"") < text.find("\"change\""), "asked in its order: {text}");
        let first = request_record("x", READINGS[0]);
        let schema: Value = serde_json::from_str(first.tools[0].parameters.get()).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["change", "question", "check", "layout"]));
    }

    /// evals/intent/intent.py measures the reading offline with keel's own words: every
    /// text of the request is in it as written here.
    #[test]
    fn the_offline_measurement_asks_in_keels_words() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../evals/intent/intent.py");
        let script = std::fs::read_to_string(path).unwrap();
        let quoted = |text: &str| format!("\"{text}\"");
        for text in [SYSTEM, RESTATEMENT.0, RESTATEMENT.1]
            .into_iter()
            .chain(QUESTIONS.iter().flat_map(|(n, d)| [*n, *d]))
        {
            assert!(script.contains(&quoted(text)), "intent.py lacks {text:?}");
        }
        let prompt = request_record("TASK", READINGS[0]).prompt;
        assert_eq!(prompt, "The request:\n<<<\nTASK\n>>>\n\nClassify it.");
        assert!(script.contains(r#"f"The request:\n<<<\n{task}\n>>>\n\nClassify it.""#));
    }

    /// A 1.5B model read "Kannst du … setzen?" as a change with one order of the
    /// questions and as a question with the other: what they disagree on is unknown.
    #[test]
    fn only_what_the_readings_agree_on_is_kept() {
        let read = |wants, check| TaskIntent { wants, check, layout: Some(false) };
        let agreed =
            agreed(&[read(Some(Wants::Change), Some(false)), read(Some(Wants::Answer), Some(false))]);
        assert_eq!(agreed, TaskIntent { wants: None, check: Some(false), layout: Some(false) });
        let same = read(Some(Wants::Answer), Some(true));
        assert_eq!(super::agreed(&[same, same]), same);
        assert_eq!(super::agreed(&[read(None, None), read(None, None)]).wants, None);
        assert_eq!(super::agreed(&[]), TaskIntent::default());
    }
}
