#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The OpenAI Responses provider against the mock server: recorded-shape streams
//! (reasoning items with encrypted content, parallel calls, an incomplete reply, a
//! failed response, an error event, llama.cpp's shape) in every chunking, the request
//! it sends and the replay of reasoning on the next one.

mod common;

use common::*;
use keel_llm::{
    Api, AssistantMessage, ContentBlock, FinishReason, Message, ModelErrorKind, ModelInfo, ToolCall,
    ToolResultMessage, Usage,
};
use keel_testkit::{MockResponse, MockServer};
use pretty_assertions::assert_eq;
use serde_json::json;

const RESPONSES: Api = Api::Responses;

const ENCRYPTED: &str = "gAAAAABpLr3Q9x-EXAMPLE_encrypted_reasoning_blob_w/slashes+plus==";
const SUMMARY: &str = "**Reading the README**\n\nThe user wants a summary; I'll read it first.";

fn reasoning_item() -> serde_json::Value {
    json!({"id": "rs_68af01", "type": "reasoning", "encrypted_content": ENCRYPTED,
           "summary": [{"type": "summary_text", "text": SUMMARY}]})
}

#[tokio::test]
async fn a_reasoning_item_kept_verbatim_then_a_call() {
    let message = through_splits("responses_reasoning_tool.sse", RESPONSES, |_| {}).await;
    assert_eq!(
        message,
        AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: SUMMARY.into(), signature: None },
                ContentBlock::ProviderItem { api: "responses".into(), item: reasoning_item() },
                ContentBlock::ToolCall(ToolCall {
                    item_id: Some("fc_68af02".into()),
                    ..ToolCall::new("call_Qx7bZ2", "read_file", r#"{"path":"README.md"}"#)
                }),
            ],
            finish_reason: FinishReason::ToolUse,
            raw_finish_reason: Some("completed".into()),
            usage: Usage {
                input_tokens: 1840,
                output_tokens: 212,
                cached_tokens: 1536,
                reasoning_tokens: 192,
                cache_write_tokens: 0
            },
            interrupted: false,
            origin: Some(ModelInfo { provider: "test".into(), model: "test-model".into() }),
        }
    );
}

#[tokio::test]
async fn parallel_calls_with_interleaved_arguments() {
    let message = through_splits("responses_parallel_tools.sse", RESPONSES, |_| {}).await;
    let call = |id: &str, item: &str, args: &str| {
        ContentBlock::ToolCall(ToolCall {
            item_id: Some(item.into()),
            ..ToolCall::new(id, "get_weather", args)
        })
    };
    assert_eq!(
        message.content,
        vec![
            ContentBlock::Text { text: "Checking both cities.".into() },
            call("call_Oslo", "fc_7c01", r#"{"city":"Oslo"}"#),
            call("call_Lima", "fc_7c02", r#"{"city":"Lima"}"#),
        ]
    );
    assert_eq!(message.usage, Usage { input_tokens: 310, output_tokens: 58, ..Usage::default() });
}

#[tokio::test]
async fn an_incomplete_response_is_a_length_stop() {
    let message = through_splits("responses_incomplete.sse", RESPONSES, |_| {}).await;
    assert_eq!(message.text(), "The answer is very lo");
    assert_eq!(message.finish_reason, FinishReason::Length);
    assert_eq!(message.raw_finish_reason.as_deref(), Some("incomplete:max_output_tokens"));
}

#[tokio::test]
async fn llama_cpp_shape_with_a_call_written_as_text() {
    let message =
        through_splits("llamacpp_responses_text_call.sse", RESPONSES, |c| c.text_tool_calls = true).await;
    assert_eq!(
        message.content,
        vec![ContentBlock::ToolCall(ToolCall::new("call_text_0", "read_file", r#"{"path":"hello.py"}"#))]
    );
    assert_eq!(message.usage.cached_tokens, 159);
}

#[tokio::test]
async fn reasoning_goes_back_verbatim_before_its_call() {
    let server = MockServer::start().await;
    server.push(MockResponse::chunks(split(&fixture("responses_reasoning_tool.sse"), 64)));
    server.push(MockResponse::chunks(split(&fixture("responses_parallel_tools.sse"), 64)));
    let mut config = config(&server, RESPONSES);
    config.responses.reasoning_summary = Some("auto".into());
    let client = config.client().unwrap();
    let first = run(&*client, &user("Summarize the README")).await.result.unwrap();
    let mut history = user("Summarize the README");
    history.push(Message::Assistant(first));
    history.push(Message::ToolResult(ToolResultMessage {
        call_id: "call_Qx7bZ2".into(),
        name: "read_file".into(),
        content: "# Demo".into(),
        is_error: false,
        images: Vec::new(),
    }));
    run(&*client, &history).await.result.unwrap();
    let second = &server.requests()[1];
    assert_eq!(second.path, "/v1/responses");
    assert_eq!(second.header("authorization"), Some("Bearer sk-test"));
    let body = second.json();
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Summarize the README"}]},
            reasoning_item(),
            {"type": "function_call", "id": "fc_68af02", "call_id": "call_Qx7bZ2", "name": "read_file",
             "arguments": "{\"path\":\"README.md\"}"},
            {"type": "function_call_output", "call_id": "call_Qx7bZ2", "output": "# Demo"}
        ])
    );
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["prompt_cache_key"], "session-1");
    assert_eq!(body["instructions"], "You are terse.");
    assert_eq!(body["parallel_tool_calls"], true);
    assert_eq!(body["reasoning"], json!({"summary": "auto"}));
}

#[tokio::test]
async fn a_failed_response_for_context_is_a_context_overflow() {
    let (error, _) = error_through_splits("responses_context_failed.sse", RESPONSES).await;
    assert_eq!(error.kind, ModelErrorKind::ContextOverflow);
    assert!(error.message.contains("exceeds the context window"), "{}", error.message);
}

#[tokio::test]
async fn a_rate_limit_event_before_output_is_retried() {
    let (error, _) = error_through_splits("responses_rate_limited.sse", RESPONSES).await;
    assert_eq!(error.kind, ModelErrorKind::RateLimited);
    let server = MockServer::start().await;
    server.push(MockResponse::chunks(split(&fixture("responses_rate_limited.sse"), 7)));
    server.push(MockResponse::chunks(split(&fixture("responses_parallel_tools.sse"), 64)));
    let client = config(&server, RESPONSES).client().unwrap();
    let outcome = run(&*client, &user("go")).await;
    assert_eq!(outcome.result.unwrap().tool_calls().count(), 2);
    assert_eq!(retries(&outcome.events).len(), 1);
}

#[tokio::test]
async fn a_stream_without_completed_is_retried_when_nothing_was_shown_and_an_error_otherwise() {
    let server = MockServer::start().await;
    let bytes = fixture("responses_parallel_tools.sse");
    let text = String::from_utf8(bytes.clone()).unwrap();
    let cut = text.find("event: response.output_text.delta").unwrap();
    server.push(MockResponse::chunks(vec![bytes[..cut].to_vec()]));
    server.push(MockResponse::chunks(split(&bytes, 64)));
    let client = config(&server, RESPONSES).client().unwrap();
    let outcome = run(&*client, &user("go")).await;
    assert!(outcome.result.is_ok());
    assert_eq!(retries(&outcome.events).len(), 1);
    // Cut after text was shown: not sent again (the user saw it), the step fails.
    let completed = text.find("event: response.completed").unwrap();
    server.push(MockResponse::chunks(vec![bytes[..completed].to_vec()]));
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Network);
    assert!(error.message.contains("response.completed"), "{}", error.message);
}

#[tokio::test]
async fn a_whole_response_when_not_streaming() {
    let server = MockServer::start().await;
    let response = json!({
        "id": "resp_w", "object": "response", "status": "completed", "model": "gpt-5-mini",
        "output": [
            reasoning_item(),
            {"id": "msg_w", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "All read.", "annotations": []}]}
        ],
        "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9,
                  "output_tokens_details": {"reasoning_tokens": 4}}
    });
    server.push(MockResponse::json(200, &response));
    let mut config = config(&server, RESPONSES);
    config.stream = false;
    let client = config.client().unwrap();
    let message = run(&*client, &user("go")).await.result.unwrap();
    assert_eq!(
        message.content,
        vec![
            ContentBlock::Thinking { text: SUMMARY.into(), signature: None },
            ContentBlock::ProviderItem { api: "responses".into(), item: reasoning_item() },
            ContentBlock::Text { text: "All read.".into() },
        ]
    );
    assert_eq!(message.finish_reason, FinishReason::Stop);
    assert_eq!(message.usage.reasoning_tokens, 4);
}

#[tokio::test]
async fn auth_and_a_wrong_url_name_what_to_fix() {
    let server = MockServer::start().await;
    server.push(MockResponse::json(
        401,
        &json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
    ));
    server.push(MockResponse::body(404, "text/html", b"<html><title>404</title></html>".to_vec()));
    let mut config = config(&server, RESPONSES);
    config.api_key_env = Some("OPENAI_API_KEY".into());
    let client = config.client().unwrap();
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Auth);
    assert!(error.message.contains("OPENAI_API_KEY"), "{}", error.message);
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert!(error.message.contains("not an OpenAI Responses API"), "{}", error.message);
}

/// Issue 28, item 9: `response.in_progress` every few seconds kept a stream that never
/// produced anything alive until the response deadline. Only output is progress.
#[tokio::test]
async fn status_events_are_not_progress() {
    let server = MockServer::start().await;
    let created = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\"}}\n\n";
    let beat = "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\"}}\n\n";
    let mut chunks = vec![created.as_bytes().to_vec()];
    chunks.extend((0..100).map(|_| beat.as_bytes().to_vec()));
    server.push(MockResponse::chunks(chunks).delay_each(std::time::Duration::from_millis(100)));
    let mut config = config(&server, RESPONSES);
    config.life.idle_timeout = std::time::Duration::from_millis(400);
    config.life.max_retries = 0;
    let client = config.client().unwrap();
    let started = std::time::Instant::now();
    let error = run(&*client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Idle);
    assert!(error.message.contains("no output for"), "{}", error.message);
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
}
