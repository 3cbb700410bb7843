#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The loop with the real Chat Completions provider against the mock HTTP server.

mod common;

use std::time::Duration;

use common::*;
use keel_agent::{Agent, RecordedEvent, RecordingSink, SessionContext};
use keel_llm::{CancellationToken, ContentBlock, Message, ModelEvent};
use keel_llm::{HttpClient, ProviderConfig};
use keel_session::{EventKind, JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ChatStream, MockResponse, MockServer};
use pretty_assertions::assert_eq;

fn client(server: &MockServer) -> HttpClient {
    let mut config = ProviderConfig::new(server.base_url(), "mock-model");
    config.life.max_retry_delay = Duration::from_millis(20);
    HttpClient::new(config).unwrap()
}

#[tokio::test]
async fn multi_step_turn_over_http_sends_the_derived_history() {
    let server = MockServer::start().await;
    server.push(
        ChatStream::new()
            .text("Reading both.", 2)
            .tool_call("c1", "read_file", r#"{"path":"a.txt"}"#, 3)
            .tool_call("c2", "read_file", r#"{"path":"b.txt"}"#, 2)
            .finish("tool_calls")
            .usage(100, 20)
            .response(),
    );
    server.push(ChatStream::new().text("Both files read.", 3).finish("stop").usage(180, 8).response());
    let agent = Agent::builder(client(&server)).system_prompt("sys").tool(FakeRead).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "read a and b",
            &keel_agent::NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.final_text, "Both files read.");
    assert_eq!(outcome.usage.input_tokens, 280);

    let second = server.requests()[1].json();
    assert_eq!(
        second["messages"],
        serde_json::json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "read a and b"},
            {"role": "assistant", "content": "Reading both.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"b.txt\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "contents of a.txt"},
            {"role": "tool", "tool_call_id": "c2", "content": "contents of b.txt"}
        ])
    );
    let logged = store.read(session.id()).unwrap();
    let header = logged.iter().find_map(|e| match &e.kind {
        EventKind::RequestHeader(h) => Some(h.clone()),
        _ => None,
    });
    assert_eq!(header.map(|h| (h.provider, h.model)), Some(("custom".to_owned(), "mock-model".to_owned())));
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_fails_the_step_cleanly() {
    let server = MockServer::start().await;
    let cut = ChatStream::new()
        .text("Writing the notes now.", 1)
        .tool_call("w1", "read_file", r#"{"path":"NOTES.md"}"#, 4)
        .finish("tool_calls")
        .response()
        .drop_after(4);
    server.push(cut);
    server.push(ChatStream::new().text("Recovered.", 1).finish("stop").response());
    let agent = Agent::builder(client(&server)).tool(FakeRead).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let sink = RecordingSink::new();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "write notes", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Error);
    assert!(outcome.message.as_deref().unwrap().contains("network"), "{:?}", outcome.message);
    assert_eq!(server.request_count(), 1, "no retry after output");
    let assistant: Vec<_> = store
        .read(session.id())
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::AssistantMessage(m) => Some(m),
            _ => None,
        })
        .collect();
    assert_eq!(assistant.len(), 1, "exactly one assistant/message, no duplicates");
    assert!(assistant[0].interrupted);
    assert_eq!(assistant[0].content, vec![ContentBlock::Text { text: "Writing the notes now.".into() }]);
    assert!(!sink.events().iter().any(|e| matches!(e, RecordedEvent::Model(ModelEvent::Retrying { .. }))));

    let next = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "try again",
            &keel_agent::NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(next.final_text, "Recovered.");
    assert_provider_valid(session.messages());
    assert!(matches!(session.messages()[1], Message::Assistant(_)));
}

#[tokio::test]
async fn retries_are_visible_to_the_sink() {
    let server = MockServer::start().await;
    server.push(
        MockResponse::json(429, &serde_json::json!({"error": {"message": "busy"}}))
            .header("retry-after", "0"),
    );
    server.push(ChatStream::new().text("ok", 1).finish("stop").response());
    let agent = Agent::builder(client(&server)).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let sink = RecordingSink::new();
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &sink, &CancellationToken::new())
        .await
        .unwrap();
    let retries: Vec<_> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            RecordedEvent::Model(ModelEvent::Retrying { attempt, reason, .. }) => Some((attempt, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 1);
    assert!(retries[0].1.contains("busy"));
}

#[tokio::test]
async fn abort_drops_the_http_stream() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("thinking aloud", 1).finish("stop").response().stall_after(2));
    server.push(ChatStream::new().text("after", 1).finish("stop").response());
    let agent = Agent::builder(client(&server)).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &keel_agent::NullSink, &cancel)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    match &session.messages()[1] {
        Message::Assistant(m) => assert_eq!(m.text(), "thinking aloud"),
        other => panic!("{other:?}"),
    }
    let next = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "again",
            &keel_agent::NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(next.final_text, "after");
}

#[tokio::test]
async fn two_calls_sharing_an_id_without_index_run_as_two() {
    // Attack: both calls carry `id: "call_0"` and no index; they used to become one
    // call `read_fileread_file` with arguments `{…}{…}`.
    let server = MockServer::start().await;
    let call = |path: &str| {
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "call_0", "type": "function",
            "function": {"name": "read_file", "arguments": format!("{{\"path\":\"{path}\"}}")}}]}}]})
        .to_string()
    };
    let finish = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#.to_owned();
    server.push(MockResponse::sse([call("a.txt"), call("b.txt"), finish]));
    server.push(ChatStream::new().text("Both read.", 1).finish("stop").response());
    let agent = Agent::builder(client(&server)).tool(FakeRead).build();
    let mut session = keel_session::Session::in_memory("/w");
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "read",
            &keel_agent::NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().unwrap();
    let calls = messages[1]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["function"]["arguments"], r#"{"path":"a.txt"}"#);
    assert_eq!(calls[1]["function"]["arguments"], r#"{"path":"b.txt"}"#);
    assert_ne!(calls[0]["id"], calls[1]["id"], "ids are made unique");
    assert_eq!(messages[2]["content"], "contents of a.txt");
    assert_eq!(messages[3]["content"], "contents of b.txt");
    assert_eq!(messages[3]["tool_call_id"], calls[1]["id"]);
}
