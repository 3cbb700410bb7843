#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Log format versions: a version 1 log (written before thinking signatures, redacted
//! thinking, provider items and message origins) still loads and derives the same
//! messages; new logs are the newest version.

use keel_llm::{
    AssistantMessage, ContentBlock, FinishReason, Message, ModelInfo, ToolCall, ToolResultMessage, Usage,
    UserMessage,
};
use keel_session::{
    EventKind, FORMAT_VERSION, JsonlStore, SessionStore, StepEnd, StepStart, TurnEnd, TurnEndReason,
    TurnStart, UserInput,
};
use pretty_assertions::assert_eq;

const V1_ID: &str = "20261102-091403-a1b2c3";

fn store_with_v1_log() -> (tempfile::TempDir, JsonlStore) {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        std::fs::read(format!("{}/tests/fixtures/v1_session.jsonl", env!("CARGO_MANIFEST_DIR"))).unwrap();
    std::fs::write(dir.path().join(format!("{V1_ID}.jsonl")), fixture).unwrap();
    let store = JsonlStore::new(dir.path());
    (dir, store)
}

fn v1_messages() -> Vec<Message> {
    vec![
        Message::User(UserMessage {
            content:
                "<environment>\nProject folder: /home/u/proj\n</environment>\n\nWhat does hello.py print?"
                    .into(),
            images: Vec::new(),
        }),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: "I should read the file first.".into(), signature: None },
                ContentBlock::Text { text: "Reading it.".into() },
                ContentBlock::ToolCall(ToolCall::new("call_00_a", "read_file", r#"{"path":"hello.py"}"#)),
                ContentBlock::ToolCall(ToolCall::new(
                    "call_01_b",
                    "shell",
                    r#"{"command":"python3 hello.py"}"#,
                )),
            ],
            finish_reason: FinishReason::ToolUse,
            raw_finish_reason: Some("tool_calls".into()),
            usage: Usage {
                input_tokens: 900,
                output_tokens: 61,
                cached_tokens: 768,
                reasoning_tokens: 12,
                cache_write_tokens: 0,
            },
            interrupted: false,
            origin: None,
        }),
        Message::ToolResult(ToolResultMessage {
            call_id: "call_00_a".into(),
            name: "read_file".into(),
            content: "print('hello from keel')".into(),
            is_error: false,
            images: Vec::new(),
        }),
        Message::ToolResult(ToolResultMessage {
            call_id: "call_01_b".into(),
            name: "shell".into(),
            content: "hello from keel\n[exit code: 0]".into(),
            is_error: false,
            images: Vec::new(),
        }),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: "The output is clear.".into(), signature: None },
                ContentBlock::Text { text: "It prints: hello from keel".into() },
            ],
            finish_reason: FinishReason::Stop,
            raw_finish_reason: Some("stop".into()),
            usage: Usage { input_tokens: 1020, output_tokens: 18, cached_tokens: 896, ..Usage::default() },
            interrupted: false,
            origin: None,
        }),
        Message::User(UserMessage::text("Now run it twice.")),
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::Thinking { text: "Run it".into(), signature: None }],
            finish_reason: FinishReason::Aborted,
            interrupted: true,
            ..AssistantMessage::default()
        }),
    ]
}

#[test]
fn a_version_1_log_loads_and_derives_the_same_messages() {
    let (_dir, store) = store_with_v1_log();
    let session = store.open(V1_ID).unwrap();
    assert_eq!(session.messages(), v1_messages().as_slice());
    assert_eq!(session.projection().header().map(|h| h.version), Some(1));
    assert_eq!(session.projection().turns(), 2);
    let events = store.read(V1_ID).unwrap();
    assert_eq!(keel_session::derive_messages(&events).unwrap(), v1_messages());
}

#[test]
fn a_version_1_log_takes_version_2_and_3_events_and_loads_again() {
    let (_dir, store) = store_with_v1_log();
    let mut session = store.open(V1_ID).unwrap();
    let reply = AssistantMessage {
        content: vec![
            ContentBlock::Thinking { text: "Twice.".into(), signature: Some("c2lnbmVk".into()) },
            ContentBlock::RedactedThinking { data: "ZW5jcnlwdGVk".into() },
            ContentBlock::Text { text: "Done twice.".into() },
        ],
        usage: Usage { input_tokens: 50, cache_write_tokens: 40, ..Usage::default() },
        origin: Some(ModelInfo { provider: "anthropic".into(), model: "claude-sonnet-4-6".into() }),
        ..AssistantMessage::default()
    };
    for kind in [
        EventKind::TurnStart(TurnStart { turn: 3 }),
        EventKind::UserMessage(UserInput {
            text: "Again.".into(),
            source: Default::default(),
            reason: None,
            images: Vec::new(),
        }),
        // Version 3: the intent and its request, beside the conversation.
        EventKind::ModelAside(keel_session::ModelAside {
            purpose: "intent".into(),
            call_id: None,
            system: "Classify.".into(),
            prompt: "Again.".into(),
            tools: Vec::new(),
            tool_choice: keel_llm::ToolChoice::Required,
            temperature: None,
            max_tokens: None,
            reply: Some(AssistantMessage {
                usage: Usage { input_tokens: 7, ..Usage::default() },
                ..AssistantMessage::default()
            }),
            error: None,
        }),
        EventKind::TurnIntent(keel_session::TaskIntent {
            wants: Some(keel_session::Wants::Answer),
            check: Some(false),
            layout: Some(false),
        }),
        EventKind::StepStart(StepStart { step: 1 }),
        EventKind::AssistantMessage(reply.clone()),
        EventKind::StepEnd(StepEnd { step: 1, interrupted: false }),
        EventKind::TurnEnd(TurnEnd {
            turn: 3,
            reason: TurnEndReason::Completed,
            message: None,
            usage: reply.usage,
        }),
    ] {
        session.append(kind).unwrap();
    }
    drop(session);
    let reopened = store.open(V1_ID).unwrap();
    let mut expected = v1_messages();
    expected.push(Message::User(UserMessage::text("Again.")));
    expected.push(Message::Assistant(reply));
    assert_eq!(reopened.messages(), expected.as_slice());
}

#[test]
fn new_sessions_are_written_as_version_5() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let session = store.create("/w").unwrap();
    assert_eq!(FORMAT_VERSION, 5);
    let first_line = std::fs::read_to_string(store.path_of(session.id())).unwrap();
    let header: serde_json::Value = serde_json::from_str(first_line.lines().next().unwrap()).unwrap();
    assert_eq!(header["data"]["version"], 5);
}

/// Version 5: `images/withdrawn` turns the images it names into notes in the messages
/// so far, in the live session and when the log is read again; images attached later
/// are sent.
#[test]
fn a_withdrawal_is_folded_into_the_messages_and_survives_reopening() {
    let (_dir, store) = store_with_v1_log();
    let image = keel_llm::Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
    let mut session = store.open(V1_ID).unwrap();
    let with_image = |text: &str| {
        EventKind::UserMessage(UserInput {
            text: text.into(),
            source: Default::default(),
            reason: None,
            images: vec![image.clone()],
        })
    };
    session.append(EventKind::TurnStart(TurnStart { turn: 3 })).unwrap();
    session.append(with_image("Look.")).unwrap();
    session
        .append(EventKind::ImagesWithdrawn(keel_session::ImagesWithdrawn {
            sha256: vec![image.sha256.clone()],
            reason: "custom rejected the request (HTTP 400): bad image".into(),
        }))
        .unwrap();
    session.append(with_image("Again.")).unwrap();
    let note = format!("[an image (image/png, {}) withdrawn: the provider refused it]", image.describe());
    let expected = Message::User(UserMessage {
        content: format!("Look.\n{note}\n\nAgain."),
        images: vec![image.clone()],
    });
    assert_eq!(session.messages().last(), Some(&expected));
    drop(session);
    let reopened = store.open(V1_ID).unwrap();
    assert_eq!(reopened.messages().last(), Some(&expected));
}
