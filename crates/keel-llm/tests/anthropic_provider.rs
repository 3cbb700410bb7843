#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The Anthropic Messages provider against the mock server: recorded-shape streams
//! (thinking with signatures, redacted thinking, parallel tool calls, an error event
//! mid-stream, llama.cpp's shape) in every chunking, the request it sends, retries and
//! errors.

mod common;

use std::time::Duration;

use common::*;
use keel_llm::{
    Api, AssistantMessage, ContentBlock, FinishReason, Message, ModelErrorKind, ModelEvent, ModelInfo,
    Thinking, ToolCall, ToolResultMessage, Usage,
};
use keel_testkit::{MockResponse, MockServer};
use pretty_assertions::assert_eq;

const ANTHROPIC: Api = Api::Anthropic;

fn origin() -> Option<ModelInfo> {
    Some(ModelInfo { provider: "test".into(), model: "test-model".into() })
}

const SIGNATURE: &str = "EqQBCkgIARABGAIiQL2aBmJ0vRl+kUm/ZfP1s8N2xQ==/sig+part/2==";

#[tokio::test]
async fn thinking_with_its_signature_then_a_tool_call() {
    let message = through_splits("anthropic_thinking_tool.sse", ANTHROPIC, |_| {}).await;
    assert_eq!(
        message,
        AssistantMessage {
            content: vec![
                ContentBlock::Thinking {
                    text: "The user wants the README. I should read it — “README.md” — first.".into(),
                    signature: Some(SIGNATURE.into()),
                },
                ContentBlock::Text { text: "Let me read the README.".into() },
                ContentBlock::ToolCall(ToolCall::new(
                    "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "read_file",
                    r#"{"path": "README.md"}"#
                )),
            ],
            finish_reason: FinishReason::ToolUse,
            raw_finish_reason: Some("tool_use".into()),
            usage: Usage {
                input_tokens: 12 + 1450 + 2048,
                output_tokens: 89,
                cached_tokens: 2048,
                cache_write_tokens: 1450,
                reasoning_tokens: 0,
            },
            interrupted: false,
            origin: origin(),
        }
    );
}

#[tokio::test]
async fn parallel_tool_calls_and_an_empty_input() {
    let message = through_splits("anthropic_parallel_tools.sse", ANTHROPIC, |_| {}).await;
    assert_eq!(
        message.content,
        vec![
            ContentBlock::Text { text: "Checking both.".into() },
            ContentBlock::ToolCall(ToolCall::new(
                "toolu_01A09q90qw90lq917835lq9",
                "get_weather",
                r#"{"city": "Oslo"}"#
            )),
            ContentBlock::ToolCall(ToolCall::new("toolu_01B19r01rx01mr028946mr0", "shell", "{}")),
        ]
    );
    assert_eq!(message.usage, Usage { input_tokens: 472, output_tokens: 71, ..Usage::default() });
}

#[tokio::test]
async fn redacted_thinking_is_kept_byte_for_byte() {
    let message = through_splits("anthropic_redacted_thinking.sse", ANTHROPIC, |_| {}).await;
    assert_eq!(
        message.content,
        vec![
            ContentBlock::RedactedThinking {
                data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pabxWXMaT/W4KnsCDBhn6Hg==".into()
            },
            ContentBlock::Thinking { text: "Nothing left to do.".into(), signature: Some("ErUBCkYIBxgCIkB0=".into()) },
            ContentBlock::Text { text: "Done: the tests pass.".into() },
        ]
    );
    assert_eq!(message.finish_reason, FinishReason::Stop);
    assert_eq!(message.raw_finish_reason.as_deref(), Some("end_turn"));
}

#[tokio::test]
async fn llama_cpp_shape_with_a_call_written_as_text() {
    let message =
        through_splits("llamacpp_anthropic_text_call.sse", ANTHROPIC, |c| c.text_tool_calls = true).await;
    assert_eq!(
        message.content,
        vec![ContentBlock::ToolCall(ToolCall::new("call_text_0", "read_file", r#"{"path":"hello.py"}"#))]
    );
    assert_eq!(message.finish_reason, FinishReason::ToolUse);
    assert_eq!(
        message.usage,
        Usage { input_tokens: 160, output_tokens: 30, cached_tokens: 159, ..Usage::default() }
    );
}

#[tokio::test]
async fn the_signature_goes_back_verbatim_with_headers_and_caching() {
    let server = MockServer::start().await;
    server.push(MockResponse::chunks(split(&fixture("anthropic_thinking_tool.sse"), 64)));
    server.push(MockResponse::chunks(split(&fixture("anthropic_redacted_thinking.sse"), 64)));
    let mut config = config(&server, ANTHROPIC);
    config.anthropic.thinking = Thinking::Adaptive;
    let client = config.client().unwrap();
    let first = run(&*client, &user("Summarize the README")).await.result.unwrap();
    let mut history = user("Summarize the README");
    history.push(Message::Assistant(first));
    history.push(Message::ToolResult(ToolResultMessage {
        call_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
        name: "read_file".into(),
        content: "# Demo".into(),
        is_error: false,
        images: Vec::new(),
    }));
    run(&*client, &history).await.result.unwrap();
    let requests = server.requests();
    let second = &requests[1];
    assert_eq!(second.path, "/v1/messages");
    assert_eq!(second.header("x-api-key"), Some("sk-test"));
    assert_eq!(second.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(second.header("authorization"), None);
    let body = second.json();
    assert_eq!(body["messages"][1]["content"][0]["signature"], SIGNATURE);
    assert_eq!(
        body["messages"][2],
        serde_json::json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": "# Demo", "cache_control": {"type": "ephemeral"}}]})
    );
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    assert_eq!(body["thinking"], serde_json::json!({"type": "adaptive"}));
    // The raw bytes of the signature are those of the stream (its escapes decoded once).
    assert!(String::from_utf8_lossy(&second.body).contains(SIGNATURE));
}

#[tokio::test]
async fn an_error_event_after_output_ends_the_step_without_a_retry() {
    let (error, events) = error_through_splits("anthropic_overloaded_midstream.sse", ANTHROPIC).await;
    assert_eq!(error.kind, ModelErrorKind::Server);
    assert!(error.message.contains("Overloaded"), "{}", error.message);
    assert_eq!(events, vec![ModelEvent::TextDelta("Half an ans".into())]);
    // With retries allowed it is still not sent again: output was shown.
    let server = MockServer::start().await;
    server.push(MockResponse::chunks(split(&fixture("anthropic_overloaded_midstream.sse"), 7)));
    let client = config(&server, ANTHROPIC).client().unwrap();
    assert!(run(&*client, &user("go")).await.result.is_err());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn an_error_event_before_output_is_retried() {
    let server = MockServer::start().await;
    server.push(MockResponse::chunks(vec![
        b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n".to_vec(),
        b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".to_vec(),
    ]));
    server.push(MockResponse::chunks(split(&fixture("anthropic_parallel_tools.sse"), 64)));
    let client = config(&server, ANTHROPIC).client().unwrap();
    let outcome = run(&*client, &user("go")).await;
    assert_eq!(outcome.result.unwrap().tool_calls().count(), 2);
    assert_eq!(retries(&outcome.events).len(), 1);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn overloaded_529_and_429_are_retried_honouring_retry_after() {
    let server = MockServer::start().await;
    let overloaded =
        serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    server.push(MockResponse::json(529, &overloaded).header("retry-after", "0.02"));
    let limited =
        serde_json::json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}});
    server.push(MockResponse::json(429, &limited).header("retry-after", "0.01"));
    server.push(MockResponse::chunks(split(&fixture("anthropic_redacted_thinking.sse"), 64)));
    let client = config(&server, ANTHROPIC).client().unwrap();
    let outcome = run(&*client, &user("go")).await;
    assert!(outcome.result.is_ok());
    assert_eq!(
        retries(&outcome.events),
        vec![(1, Duration::from_millis(20)), (2, Duration::from_millis(10))]
    );
}

#[tokio::test]
async fn auth_and_wrong_urls_say_what_to_do() {
    let server = MockServer::start().await;
    let denied = serde_json::json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    server.push(MockResponse::json(401, &denied));
    server.push(MockResponse::body(404, "text/html", b"<html><title>Not Found</title></html>".to_vec()));
    let mut config = config(&server, ANTHROPIC);
    config.api_key_env = Some("ANTHROPIC_API_KEY".into());
    let client = config.client().unwrap();
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Auth);
    assert!(
        error.message.contains("ANTHROPIC_API_KEY") && error.message.contains("invalid x-api-key"),
        "{}",
        error.message
    );
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::InvalidRequest);
    assert!(
        error.message.contains("not an Anthropic Messages API") && error.message.contains("/v1"),
        "{}",
        error.message
    );
    assert_eq!(server.request_count(), 2, "neither is retried");
}

#[tokio::test]
async fn a_prompt_too_long_is_a_context_overflow() {
    let server = MockServer::start().await;
    let long = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 215000 tokens > 200000 maximum"}});
    server.push(MockResponse::json(400, &long));
    let client = config(&server, ANTHROPIC).client().unwrap();
    assert_eq!(run(&*client, &user("go")).await.result.unwrap_err().kind, ModelErrorKind::ContextOverflow);
}

#[tokio::test]
async fn a_whole_message_when_not_streaming() {
    let server = MockServer::start().await;
    let message = serde_json::json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [
            {"type": "thinking", "thinking": "Short.", "signature": "c2lnbg=="},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_9", "name": "list_files", "input": {"path": "."}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 20}
    });
    server.push(MockResponse::json(200, &message));
    let mut config = config(&server, ANTHROPIC);
    config.stream = false;
    let client = config.client().unwrap();
    let message = run(&*client, &user("go")).await.result.unwrap();
    assert_eq!(
        message.content,
        vec![
            ContentBlock::Thinking { text: "Short.".into(), signature: Some("c2lnbg==".into()) },
            ContentBlock::Text { text: "Listing.".into() },
            ContentBlock::ToolCall(ToolCall::new("toolu_9", "list_files", r#"{"path":"."}"#)),
        ]
    );
    assert_eq!(
        message.usage,
        Usage { input_tokens: 100, output_tokens: 20, cached_tokens: 90, ..Usage::default() }
    );
    assert_eq!(server.requests()[0].json()["stream"], false);
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_retried_when_nothing_was_shown() {
    let server = MockServer::start().await;
    server.push(MockResponse::chunks(vec![
        b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n".to_vec(),
    ]));
    server.push(MockResponse::chunks(split(&fixture("anthropic_redacted_thinking.sse"), 64)));
    let client = config(&server, ANTHROPIC).client().unwrap();
    let outcome = run(&*client, &user("go")).await;
    assert_eq!(outcome.result.unwrap().text(), "Done: the tests pass.");
    assert_eq!(retries(&outcome.events).len(), 1);
}

#[tokio::test]
async fn pings_are_not_progress() {
    let server = MockServer::start().await;
    let start = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n".to_vec();
    let ping = b"event: ping\ndata: {\"type\": \"ping\"}\n\n".to_vec();
    let mut chunks = vec![start];
    chunks.extend(std::iter::repeat_n(ping, 40));
    server.push(MockResponse::chunks(chunks).delay_each(Duration::from_millis(50)));
    let mut config = config(&server, ANTHROPIC);
    config.life.idle_timeout = Duration::from_millis(400);
    config.life.max_retries = 0;
    let client = config.client().unwrap();
    let started = std::time::Instant::now();
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Idle);
    assert!(started.elapsed() < Duration::from_millis(1500), "{:?}", started.elapsed());
}
