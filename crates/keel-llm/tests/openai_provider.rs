#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The Chat Completions provider against the mock server: real servers' stream shapes,
//! both modes, retries, errors, cancellation, text tool calls, reasoning round trip.

use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_llm::{
    AssistantMessage, CancellationToken, ContentBlock, FinishReason, Message, ModelClient, ModelError,
    ModelErrorKind, ModelEvent, ModelInfo, ModelRequest, ToolCall, ToolDefinition, Usage, UserMessage,
};
use keel_llm::{HttpClient, ProviderConfig, ReasoningReplay};
use keel_testkit::{ChatStream, MockResponse, MockServer, chat};
use pretty_assertions::assert_eq;
use serde_json::value::RawValue;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn split(bytes: &[u8], size: usize) -> Vec<Vec<u8>> {
    bytes.chunks(size.max(1)).map(<[u8]>::to_vec).collect()
}

fn tools() -> Vec<ToolDefinition> {
    ["read_file", "shell", "get_weather", "write_file"]
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: format!("The {name} tool."),
            parameters: RawValue::from_string(r#"{"type":"object","properties":{}}"#.into()).unwrap(),
        })
        .collect()
}

fn config(server: &MockServer) -> ProviderConfig {
    let mut config = ProviderConfig::new(server.base_url(), "test-model");
    config.api_key = Some("sk-test".into());
    config.api_key_env = Some("TEST_API_KEY".into());
    config.life.max_retry_delay = Duration::from_millis(50);
    config
}

struct Outcome {
    events: Vec<ModelEvent>,
    result: Result<AssistantMessage, ModelError>,
}

async fn run(client: &HttpClient, messages: &[Message]) -> Outcome {
    let tools = tools();
    let request = ModelRequest::new("You are terse.", messages, &tools);
    let mut stream = client.stream(request, CancellationToken::new());
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelEvent::Completed(message)) => return Outcome { events, result: Ok(message) },
            Ok(event) => events.push(event),
            Err(error) => return Outcome { events, result: Err(error) },
        }
    }
    panic!("stream ended without a completion or an error");
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::User(UserMessage::text(text))]
}

fn call(id: &str, name: &str, args: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall::new(id, name, args))
}

async fn through_splits(name: &str, configure: impl Fn(&mut ProviderConfig)) -> AssistantMessage {
    let bytes = fixture(name);
    let mut last: Option<AssistantMessage> = None;
    for size in [1, 7, 64, bytes.len()] {
        let server = MockServer::start().await;
        server.push(MockResponse::chunks(split(&bytes, size)));
        let mut config = config(&server);
        configure(&mut config);
        let client = HttpClient::new(config).unwrap();
        let message = run(&client, &user("go")).await.result.unwrap();
        if let Some(previous) = &last {
            assert_eq!(&message, previous, "split size {size} changed the result");
        }
        last = Some(message);
    }
    last.unwrap()
}

#[tokio::test]
async fn openai_parallel_tool_calls() {
    let message = through_splits("openai_parallel_tools.sse", |_| {}).await;
    assert_eq!(
        message,
        AssistantMessage {
            content: vec![
                call("call_Oslo1", "get_weather", r#"{"city": "Oslo"}"#),
                call("call_Lima2", "get_weather", r#"{"city": "Lima", "unit": "celsius"}"#),
            ],
            finish_reason: FinishReason::ToolUse,
            raw_finish_reason: Some("tool_calls".into()),
            usage: Usage { input_tokens: 182, output_tokens: 51, cached_tokens: 128, ..Usage::default() },
            interrupted: false,
            origin: Some(ModelInfo { provider: "custom".into(), model: "test-model".into() }),
        }
    );
}

#[tokio::test]
async fn deepseek_reasoning_then_tool_call() {
    let message = through_splits("deepseek_reasoning_tool.sse", |_| {}).await;
    assert_eq!(
        message.content,
        vec![
            ContentBlock::Thinking {
                text: "The user wants the README; I should read it.".into(),
                signature: None
            },
            call("call_00_Xy", "read_file", r#"{"path": "README.md"}"#),
        ]
    );
    assert_eq!(
        message.usage,
        Usage {
            input_tokens: 410,
            output_tokens: 38,
            cached_tokens: 384,
            reasoning_tokens: 17,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn llamacpp_tool_call_with_timings() {
    let message = through_splits("llamacpp_tool.sse", |_| {}).await;
    assert_eq!(message.content, vec![call("Hq3vT0bN9pQ2", "shell", r#"{"command":"python3 hello.py"}"#)]);
    assert_eq!(message.usage.input_tokens, 902);
}

#[tokio::test]
async fn ollama_tool_call_with_finish_reason_stop() {
    let message = through_splits("ollama_tool.sse", |_| {}).await;
    assert_eq!(message.content, vec![call("call_9x2k", "read_file", r#"{"path":"README.md"}"#)]);
    // The raw value is kept; the call is there whatever it says.
    assert_eq!(message.raw_finish_reason.as_deref(), Some("stop"));
    assert!(message.has_tool_calls());
}

#[tokio::test]
async fn openrouter_comment_lines_and_crlf() {
    let message = through_splits("openrouter_comments.sse", |_| {}).await;
    assert_eq!(message.content, vec![ContentBlock::Text { text: "The file prints été ✓".into() }]);
    assert_eq!(message.finish_reason, FinishReason::Stop);
    assert_eq!(message.usage.output_tokens, 7);
}

#[tokio::test]
async fn stream_cut_mid_tool_call_fails_after_output_without_retrying() {
    let server = MockServer::start().await;
    // Both events arrive, then the connection closes without the chunked terminator.
    server.push(MockResponse::chunks(vec![fixture("cut_mid_tool_call.sse")]).drop_after(1));
    let client = HttpClient::new(config(&server)).unwrap();
    let outcome = run(&client, &user("go")).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Network);
    assert_eq!(server.request_count(), 1, "no retry once output has streamed");
    assert!(
        outcome.events.iter().any(|e| matches!(e, ModelEvent::TextDelta(t) if t == "Writing the notes now."))
    );
    assert!(!outcome.events.iter().any(|e| matches!(e, ModelEvent::Retrying { .. })));
}

#[tokio::test]
async fn missing_done_and_final_blank_line_are_fine() {
    let server = MockServer::start().await;
    let mut events = ChatStream::new().text("hello", 2).finish("stop").events();
    let last = events.pop().unwrap();
    let mut chunks: Vec<Vec<u8>> =
        events.into_iter().map(|e| format!("data: {e}\n\n").into_bytes()).collect();
    chunks.push(format!("data: {last}").into_bytes());
    server.push(MockResponse::chunks(chunks));
    let client = HttpClient::new(config(&server)).unwrap();
    let message = run(&client, &user("go")).await.result.unwrap();
    assert_eq!(message.text(), "hello");
}

#[tokio::test]
async fn request_body_carries_stream_options_max_tokens_and_auth() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("ok", 1).finish("stop").usage(5, 1).response());
    let client = HttpClient::new(config(&server)).unwrap();
    run(&client, &user("hi")).await.result.unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    let body = request.json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0], serde_json::json!({"role": "system", "content": "You are terse."}));
    assert_eq!(body["tools"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn non_streaming_mode() {
    let server = MockServer::start().await;
    server.push(chat::completion(Some("Reading."), &[("c1", "read_file", r#"{"path":"a"}"#)], "tool_calls"));
    let mut config = config(&server);
    config.stream = false;
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("go")).await;
    let message = outcome.result.unwrap();
    assert_eq!(
        message.content,
        vec![ContentBlock::Text { text: "Reading.".into() }, call("c1", "read_file", r#"{"path":"a"}"#)]
    );
    assert_eq!(message.usage.input_tokens, 20);
    assert_eq!(server.requests()[0].json()["stream"], false);
    assert!(server.requests()[0].json().get("stream_options").is_none());
    assert!(
        outcome.events.iter().any(|e| matches!(e, ModelEvent::TextDelta(_))),
        "deltas still reach the sink"
    );
}

fn retries(events: &[ModelEvent]) -> Vec<(u32, Duration)> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Retrying { attempt, delay, .. } => Some((*attempt, *delay)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn retries_429_honouring_retry_after() {
    let server = MockServer::start().await;
    server.push(
        MockResponse::json(429, &serde_json::json!({"error": {"message": "slow down"}}))
            .header("retry-after", "0.02"),
    );
    server.push(ChatStream::new().text("ok", 1).finish("stop").response());
    let mut config = config(&server);
    config.life.max_retry_delay = Duration::from_secs(5);
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("go")).await;
    assert_eq!(outcome.result.unwrap().text(), "ok");
    assert_eq!(retries(&outcome.events), vec![(1, Duration::from_millis(20))]);
}

#[tokio::test]
async fn retries_500_and_a_dropped_connection_and_a_stall() {
    let server = MockServer::start().await;
    server.push(MockResponse::json(500, &serde_json::json!({"error": {"message": "boom"}})));
    server.push(ChatStream::new().text("never", 1).response().drop_after(0));
    server.push(ChatStream::new().text("never", 1).response().stall_after(0));
    server.push(ChatStream::new().text("finally", 1).finish("stop").response());
    let mut config = config(&server);
    config.life.idle_timeout = Duration::from_millis(200);
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("go")).await;
    assert_eq!(outcome.result.unwrap().text(), "finally");
    assert_eq!(retries(&outcome.events).iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn retries_are_bounded() {
    let server = MockServer::start().await;
    for _ in 0..3 {
        server.push(MockResponse::json(503, &serde_json::json!({"error": {"message": "overloaded"}})));
    }
    let mut config = config(&server);
    config.life.max_retries = 2;
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("go")).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Server);
    assert!(error.message.contains("gave up after 2 retries"), "{}", error.message);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn auth_failure_stops_at_once_naming_the_variable() {
    let server = MockServer::start().await;
    server.push(MockResponse::json(401, &serde_json::json!({"error": {"message": "Authentication Fails"}})));
    let client = HttpClient::new(config(&server)).unwrap();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Auth);
    assert!(error.message.contains("TEST_API_KEY"), "{}", error.message);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn context_overflow_is_typed() {
    let server = MockServer::start().await;
    server.push(MockResponse::json(
        400,
        &serde_json::json!({"error": {"message": "This model's maximum context length is 65536 tokens", "type": "invalid_request_error"}}),
    ));
    let client = HttpClient::new(config(&server)).unwrap();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::ContextOverflow);
}

#[tokio::test]
async fn idle_stream_is_an_error_after_output() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("partial", 1).finish("stop").response().stall_after(2));
    let mut config = config(&server);
    config.life.idle_timeout = Duration::from_millis(150);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Idle);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection_at_once() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("slow", 1).finish("stop").response().stall_after(2));
    let client = HttpClient::new(config(&server)).unwrap();
    let tools = tools();
    let messages = user("go");
    let request = ModelRequest::new("", &messages, &tools);
    let mut stream = client.stream(request, CancellationToken::new());
    // The first delta arrives, then the server goes silent.
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(ModelEvent::TextDelta(ref t))) if t == "slow"), "{first:?}");
    let started = Instant::now();
    drop(stream);
    assert!(started.elapsed() < Duration::from_millis(100));
}

#[tokio::test]
async fn text_tool_calls_are_converted_only_when_enabled() {
    let qwen =
        "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"README.md\"}}\n</tool_call>";
    for enabled in [true, false] {
        let server = MockServer::start().await;
        server.push(ChatStream::new().text(qwen, 5).finish("stop").response());
        let mut config = config(&server);
        config.text_tool_calls = enabled;
        let client = HttpClient::new(config).unwrap();
        let outcome = run(&client, &user("go")).await;
        let streamed: String = outcome
            .events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let message = outcome.result.unwrap();
        if enabled {
            assert_eq!(message.content, vec![call("call_text_0", "read_file", r#"{"path":"README.md"}"#)]);
            assert_eq!(message.finish_reason, FinishReason::ToolUse);
            // The markup is not streamed as text: a terminal, an editor or a server's
            // clients would show it.
            assert_eq!(streamed, "");
        } else {
            assert_eq!(streamed, qwen);
            assert_eq!(message.content, vec![ContentBlock::Text { text: qwen.into() }]);
        }
    }
}

/// A local server returns a small model's note before its call as content; with
/// `thoughts_as_reasoning` it is kept as reasoning and not sent back next request.
#[tokio::test]
async fn a_note_before_a_call_is_kept_as_reasoning_and_not_sent_back() {
    let server = MockServer::start().await;
    let note = "Line 3 prints Hello; I change it.";
    server.push(
        ChatStream::new()
            .text(note, 3)
            .tool_call("c1", "read_file", r#"{"path":"app.py"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    server.push(ChatStream::new().text("done", 1).finish("stop").response());
    let mut config = keel_llm::Preset::find("llamacpp").unwrap().config(None).unwrap();
    config.base_url = server.base_url();
    assert!(config.thoughts_as_reasoning);
    let client = HttpClient::new(config).unwrap();
    let mut history = user("make app.py print Hi");
    let first = run(&client, &history).await.result.unwrap();
    assert_eq!(
        first.content,
        vec![
            ContentBlock::Thinking { text: note.into(), signature: None },
            call("c1", "read_file", r#"{"path":"app.py"}"#)
        ]
    );
    history.push(Message::Assistant(first));
    history.push(Message::ToolResult(keel_llm::ToolResultMessage {
        call_id: "c1".into(),
        name: "read_file".into(),
        content: "print('Hello')".into(),
        is_error: false,
        images: Vec::new(),
    }));
    run(&client, &history).await.result.unwrap();
    let body = server.requests()[1].json();
    let messages = body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["id"], "c1");
    assert!(assistant.get("reasoning_content").is_none(), "{assistant}");
    assert!(assistant["content"].is_null() || assistant["content"] == "", "{assistant}");
}

#[tokio::test]
async fn reasoning_round_trips_to_deepseek_but_not_elsewhere() {
    for (policy, expect) in [(ReasoningReplay::ToolTurns, true), (ReasoningReplay::Never, false)] {
        let server = MockServer::start().await;
        server.push(MockResponse::chunks(vec![fixture("deepseek_reasoning_tool.sse")]));
        server.push(ChatStream::new().text("done", 1).finish("stop").response());
        let mut config = config(&server);
        config.chat.reasoning_replay = policy;
        let client = HttpClient::new(config).unwrap();
        let mut history = user("read the readme");
        let first = run(&client, &history).await.result.unwrap();
        history.push(Message::Assistant(first));
        history.push(Message::ToolResult(keel_llm::ToolResultMessage {
            call_id: "call_00_Xy".into(),
            name: "read_file".into(),
            content: "# readme".into(),
            is_error: false,
            images: Vec::new(),
        }));
        run(&client, &history).await.result.unwrap();
        let body = server.requests()[1].json();
        let assistant = &body["messages"][2];
        assert_eq!(assistant["role"], "assistant");
        if expect {
            assert_eq!(assistant["reasoning_content"], "The user wants the README; I should read it.");
        } else {
            assert!(assistant.get("reasoning_content").is_none());
        }
    }
}

#[tokio::test]
async fn length_cut_keeps_the_unfinished_call_for_the_loop_to_explain() {
    let server = MockServer::start().await;
    server.push(
        ChatStream::new()
            .tool_call("c1", "write_file", r##"{"path":"a.md","content":"# Tit"##, 3)
            .finish("length")
            .response(),
    );
    let client = HttpClient::new(config(&server)).unwrap();
    let message = run(&client, &user("go")).await.result.unwrap();
    assert_eq!(message.finish_reason, FinishReason::Length);
    assert_eq!(message.content, vec![call("c1", "write_file", r##"{"path":"a.md","content":"# Tit"##)]);
}

/// Issue 32: a refused connection to this machine was retried 4× over 8 s with no hint.
/// Nothing listens there: it is said at once, naming the address, and not retried.
#[tokio::test]
async fn a_refused_local_connection_is_said_at_once() {
    // A port nothing listens on: bound, then closed at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = ProviderConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    config.life.max_retries = 4;
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("go")).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Config);
    assert_eq!(
        error.message,
        format!(
            "nothing listens on 127.0.0.1:{port} (connection refused) — is the model server running, and on this port?"
        )
    );
    assert!(retries(&outcome.events).is_empty(), "{:?}", retries(&outcome.events));

    // The ollama preset on a port of its own: the hint follows the preset, not the port.
    let mut config = ProviderConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    config.provider = "ollama".into();
    let outcome = run(&HttpClient::new(config).unwrap(), &user("go")).await;
    assert_eq!(
        outcome.result.unwrap_err().message,
        format!(
            "nothing listens on 127.0.0.1:{port} (connection refused) — is Ollama running (`ollama serve`)?"
        )
    );
}

#[tokio::test]
async fn bad_configuration_is_a_clear_error() {
    let error = HttpClient::new(ProviderConfig::new("localhost:8080", "m")).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Config);
    assert!(error.message.contains("http://"));
    let error = HttpClient::new(ProviderConfig::new("http://x", " ")).unwrap_err();
    assert!(error.message.contains("model"));
}

/// The chunks of `stream` as SSE events, without `[DONE]`.
fn sse_chunks(stream: &ChatStream) -> Vec<Vec<u8>> {
    stream.events().into_iter().map(|e| format!("data: {e}\n\n").into_bytes()).collect()
}

#[tokio::test]
async fn a_finished_answer_on_a_connection_held_open_completes_after_the_grace() {
    // Attack: the whole answer and its finish reason, then neither `[DONE]` nor the
    // body's end; keel used to wait for the idle timeout and throw the answer away.
    let server = MockServer::start().await;
    let stream = ChatStream::new().text("all here", 2).finish("stop");
    let chunks = sse_chunks(&stream);
    let n = chunks.len();
    server.push(MockResponse::chunks(chunks).stall_after(n));
    let client = HttpClient::new(config(&server)).unwrap();
    let started = Instant::now();
    let message = run(&client, &user("go")).await.result.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(message.text(), "all here");
    assert_eq!(message.finish_reason, FinishReason::Stop);
    assert!(elapsed >= Duration::from_millis(1400), "the grace lets a usage chunk arrive: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn usage_after_the_finish_reason_completes_at_once_on_a_held_connection() {
    let server = MockServer::start().await;
    let stream = ChatStream::new().text("done", 1).finish("stop").usage(12, 3);
    let chunks = sse_chunks(&stream);
    let n = chunks.len();
    server.push(MockResponse::chunks(chunks).stall_after(n));
    let client = HttpClient::new(config(&server)).unwrap();
    let started = Instant::now();
    let message = run(&client, &user("go")).await.result.unwrap();
    assert!(started.elapsed() < Duration::from_millis(1000), "{:?}", started.elapsed());
    assert_eq!(message.text(), "done");
    assert_eq!(message.usage.output_tokens, 3);
}

#[tokio::test]
async fn the_grace_is_not_extended_by_more_chunks() {
    // Attack: a finish reason, then empty chunks forever.
    let server = MockServer::start().await;
    let stream = ChatStream::new().text("answer", 1).finish("stop");
    let mut chunks = sse_chunks(&stream);
    let empty = r#"data: {"choices":[{"index":0,"delta":{}}]}"#;
    chunks.extend((0..200).map(|_| format!("{empty}\n\n").into_bytes()));
    server.push(MockResponse::chunks(chunks).delay_each(Duration::from_millis(20)));
    let mut config = config(&server);
    config.life.finish_grace = Duration::from_millis(200);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let message = run(&client, &user("go")).await.result.unwrap();
    assert_eq!(message.text(), "answer");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[tokio::test]
async fn keep_alive_comments_are_not_progress() {
    // Attack: one delta, then `: ping` every 100 ms for 10 s; the idle timer must not
    // be fed by comments.
    let server = MockServer::start().await;
    let mut chunks = sse_chunks(&ChatStream::new().text("thinking", 1));
    chunks.extend((0..100).map(|_| b": ping\n\n".to_vec()));
    server.push(MockResponse::chunks(chunks).delay_each(Duration::from_millis(100)));
    let mut config = config(&server);
    config.life.idle_timeout = Duration::from_millis(400);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Idle);
    assert!(error.message.contains("keep-alive"), "{}", error.message);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!(server.request_count(), 1, "output had streamed: no retry");
}

/// Issue 28, item 9: a chunk with an empty delta every 2 s kept a stream alive for 30
/// minutes. An empty chunk is no output.
#[tokio::test]
async fn empty_deltas_are_not_progress() {
    let server = MockServer::start().await;
    let mut chunks = sse_chunks(&ChatStream::new().text("thinking", 1));
    let empty = r#"data: {"choices":[{"index":0,"delta":{"content":""}}]}"#;
    let role = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#;
    chunks.extend(
        (0..50).flat_map(|_| [format!("{empty}\n\n").into_bytes(), format!("{role}\n\n").into_bytes()]),
    );
    server.push(MockResponse::chunks(chunks).delay_each(Duration::from_millis(100)));
    let mut config = config(&server);
    config.life.idle_timeout = Duration::from_millis(400);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Idle);
    assert!(error.message.contains("empty chunks"), "{}", error.message);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn comments_before_any_event_time_out_too() {
    let server = MockServer::start().await;
    let pings: Vec<Vec<u8>> = (0..100).map(|_| b": OPENROUTER PROCESSING\n\n".to_vec()).collect();
    server.push(MockResponse::chunks(pings).delay_each(Duration::from_millis(100)));
    let mut config = config(&server);
    config.life.idle_timeout = Duration::from_millis(400);
    config.life.max_retries = 0;
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Idle);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_response_past_its_deadline_fails_clearly_and_is_not_retried() {
    // Attack: a delta every 50 ms, forever (here 20 s); each is progress, so only the
    // total deadline stops it.
    let server = MockServer::start().await;
    let endless = ChatStream::new().text(&"word ".repeat(400), 400);
    server.push(MockResponse::chunks(sse_chunks(&endless)).delay_each(Duration::from_millis(50)));
    let mut config = config(&server);
    config.life.response_deadline = Duration::from_millis(600);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let outcome = run(&client, &user("go")).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    assert!(error.message.contains("response_deadline"), "{}", error.message);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(!outcome.events.is_empty(), "the deltas before the deadline reached the sink");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn the_deadline_covers_waiting_for_headers() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("late", 1).finish("stop").response().delay(Duration::from_secs(5)));
    let mut config = config(&server);
    config.life.response_deadline = Duration::from_millis(300);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn endless_content_is_cut_at_what_max_tokens_allows() {
    // Attack: the server ignores max_tokens and streams text without end (here 6 MB
    // as fast as it can); keel must stop near 32 bytes per token + 1 MiB.
    let server = MockServer::start().await;
    let piece = serde_json::json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(1024)}}]});
    let event = format!("data: {piece}\n\n").into_bytes();
    server.push(MockResponse::chunks(std::iter::repeat_n(event, 6000)));
    let mut config = config(&server);
    config.max_tokens = 1000;
    let limit = config.decode_limits().max_output_bytes;
    assert_eq!(limit, 1000 * 32 + (1 << 20));
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("go")).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    assert!(error.message.contains("max_tokens"), "{}", error.message);
    let streamed: usize = outcome
        .events
        .iter()
        .map(|e| match e {
            ModelEvent::TextDelta(t) => t.len(),
            _ => 0,
        })
        .sum();
    assert!(streamed as u64 <= limit && streamed as u64 > limit - 2048, "{streamed}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_line_without_end_is_not_buffered_past_the_event_bound() {
    // Attack: `data: xxxx…` with no line end, 20 MB of it.
    let server = MockServer::start().await;
    let mut chunks = vec![b"data: ".to_vec()];
    chunks.extend(std::iter::repeat_n(vec![b'x'; 256 << 10], 80));
    server.push(MockResponse::chunks(chunks));
    let client = HttpClient::new(config(&server)).unwrap();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    assert!(error.message.contains("16777216 bytes"), "{}", error.message);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_whole_body_is_read_only_up_to_its_bound() {
    let huge = serde_json::json!({"choices": [{"message": {"content": "y".repeat(17 << 20)}}]});
    let bytes = huge.to_string().into_bytes();
    // With a Content-Length that says so (refused before reading), and without one.
    let sized = MockResponse::body(200, "application/json", bytes.clone());
    let chunked = MockResponse::chunks(split(&bytes, 1 << 20)).content_type("application/json");
    for response in [sized, chunked] {
        let server = MockServer::start().await;
        server.push(response);
        let mut config = config(&server);
        config.stream = false;
        let client = HttpClient::new(config).unwrap();
        let error = run(&client, &user("go")).await.result.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::LimitExceeded, "{}", error.message);
        assert!(error.message.contains("16.0 MiB"), "{}", error.message);
    }
}

#[tokio::test]
async fn only_the_start_of_an_error_body_is_read() {
    // Attack: a 500 whose body never ends; keel used to read it whole (until the idle
    // timeout) just to show 600 characters of it.
    let server = MockServer::start().await;
    let chunks = std::iter::repeat_n(b"<p>overloaded</p>".repeat(1024), 8);
    server.push(MockResponse::chunks(chunks).status(500).stall_after(8));
    let mut config = config(&server);
    config.life.max_retries = 0;
    config.life.idle_timeout = Duration::from_secs(20);
    let client = HttpClient::new(config).unwrap();
    let started = Instant::now();
    let error = run(&client, &user("go")).await.result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Server);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_lone_surrogate_costs_one_character_not_the_chunk() {
    // Attack: a chunk whose text holds `\ud800` (half of an emoji); serde_json refuses
    // the chunk and its whole text used to be dropped with a warning.
    let stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hello \"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"w\\ud800orld \\\\ud800 \\ud83d\\ude00\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"write_file\",\"arguments\":{\"content\":\"\\udc00!\"}}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    for size in [1, 7, 64, stream.len()] {
        let server = MockServer::start().await;
        server.push(MockResponse::chunks(split(stream.as_bytes(), size)));
        let client = HttpClient::new(config(&server)).unwrap();
        let message = run(&client, &user("go")).await.result.unwrap();
        assert_eq!(
            message.content,
            vec![
                ContentBlock::Text { text: "Hello w\u{fffd}orld \\ud800 \u{1F600}".into() },
                call("c", "write_file", "{\"content\":\"\u{fffd}!\"}"),
            ]
        );
    }
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_answered_whole() {
    // Attack: `stream: true` ignored, a whole `chat.completion` served as JSON; keel
    // used to say "the server ended the reply without sending anything".
    let whole = chat::completion(Some("Reading."), &[("c1", "read_file", r#"{"path":"a"}"#)], "tool_calls");
    let bytes = {
        let server = MockServer::start().await;
        server.push(whole.clone());
        let mut config = config(&server);
        config.stream = false;
        let client = HttpClient::new(config).unwrap();
        run(&client, &user("go")).await.result.unwrap();
        // The same body, to be served again in pieces.
        serde_json::to_vec(&serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "mock",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Reading.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}))
        .unwrap()
    };
    let mut responses = vec![whole];
    for size in [1, 7, 64] {
        responses.push(MockResponse::chunks(split(&bytes, size)).content_type("application/json"));
    }
    // A wrong content type does not fool the sniffing either.
    responses.push(MockResponse::chunks(split(&bytes, 64)).content_type("text/plain"));
    for response in responses {
        let server = MockServer::start().await;
        server.push(response);
        let client = HttpClient::new(config(&server)).unwrap();
        let outcome = run(&client, &user("go")).await;
        let message = outcome.result.unwrap();
        assert_eq!(
            message.content,
            vec![ContentBlock::Text { text: "Reading.".into() }, call("c1", "read_file", r#"{"path":"a"}"#)]
        );
        assert_eq!(message.finish_reason, FinishReason::ToolUse);
        assert_eq!(message.usage.input_tokens, 20);
        assert!(outcome.events.iter().any(|e| matches!(e, ModelEvent::TextDelta(_))));
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn a_server_that_streams_anyway_is_decoded_in_whole_mode() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("streamed", 2).finish("stop").response());
    let mut config = config(&server);
    config.stream = false;
    let client = HttpClient::new(config).unwrap();
    assert_eq!(run(&client, &user("go")).await.result.unwrap().text(), "streamed");
}

const PAGE: &str =
    "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>hi</body></html>";

#[tokio::test]
async fn an_html_page_is_named_for_what_it_is() {
    // Attack (or a typo): the base URL points at a web site. Whatever its content type,
    // in both modes, the error says so, names the URL and is not retried.
    for (content_type, stream) in
        [("text/html", true), ("text/plain", true), ("", true), ("text/html", false)]
    {
        let server = MockServer::start().await;
        let response = MockResponse::chunks(split(PAGE.as_bytes(), 7));
        let response = if content_type.is_empty() {
            response.content_type("")
        } else {
            response.content_type(content_type)
        };
        server.push(response);
        let mut config = config(&server);
        config.stream = stream;
        let client = HttpClient::new(config).unwrap();
        let error = run(&client, &user("go")).await.result.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
        let expected = format!(
            "the server answered with an HTML page (“Welcome to nginx!”), not an OpenAI-compatible API at {}/chat/completions; the base URL usually ends in /v1",
            server.base_url()
        );
        assert_eq!(error.message, expected, "{content_type} stream={stream}");
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn other_bodies_are_named_too() {
    let cases: [(&str, &[u8], &str); 3] = [
        ("text/plain", b"Hello from the proxy", "neither server-sent events nor JSON (text/plain)"),
        ("application/json", br#"{"status": "ok", "version": "2.1"}"#, "JSON that is not a chat completion"),
        ("text/event-stream", b"", "the server ended the reply without sending anything"),
    ];
    for (content_type, body, expected) in cases {
        let server = MockServer::start().await;
        server.push(MockResponse::body(200, content_type, body.to_vec()));
        let mut config = config(&server);
        config.life.max_retries = 0;
        let client = HttpClient::new(config).unwrap();
        let error = run(&client, &user("go")).await.result.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
        assert!(error.message.contains(expected), "{}", error.message);
        if !body.is_empty() {
            assert!(error.message.contains(&server.base_url()), "{}", error.message);
            let start = String::from_utf8_lossy(&body[..10]).into_owned();
            assert!(error.message.contains(&start), "the body's start is shown: {}", error.message);
        }
    }
}

#[tokio::test]
async fn html_404_and_501_are_not_retried() {
    for status in [404, 405, 501] {
        let server = MockServer::start().await;
        for _ in 0..3 {
            server.push(MockResponse::body(status, "text/html", PAGE.as_bytes().to_vec()));
        }
        let client = HttpClient::new(config(&server)).unwrap();
        let outcome = run(&client, &user("go")).await;
        let error = outcome.result.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidRequest, "{status}");
        assert!(error.message.contains(&format!("an HTML page (HTTP {status}")), "{}", error.message);
        assert!(error.message.contains("/v1"), "{}", error.message);
        assert_eq!(server.request_count(), 1, "{status} is not retried");
        assert!(retries(&outcome.events).is_empty(), "{:?}", retries(&outcome.events));
    }
    // A proxy's 502 page is passing trouble: retried.
    let server = MockServer::start().await;
    server.push(MockResponse::body(502, "text/html", b"<html><h1>502 Bad Gateway</h1></html>".to_vec()));
    server.push(ChatStream::new().text("ok", 1).finish("stop").response());
    let client = HttpClient::new(config(&server)).unwrap();
    assert_eq!(run(&client, &user("go")).await.result.unwrap().text(), "ok");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn calls_sharing_an_id_without_index_stay_apart_in_any_split() {
    // Attack: `read_file` and `glob`, both `id: "call_0"`, no index: they became one
    // call `read_fileglob` with arguments `{…}{…}`.
    let event = |name: &str, arguments: &str| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "call_0",
                "type": "function", "function": {"name": name, "arguments": arguments}}]}}]})
        )
    };
    let stream = [
        event("read_file", r#"{"path":"src/main.rs"}"#),
        event("glob", r#"{"pattern":"**/*.rs"}"#),
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n".into(),
    ]
    .concat();
    for size in [1, 7, 64, stream.len()] {
        let server = MockServer::start().await;
        server.push(MockResponse::chunks(split(stream.as_bytes(), size)));
        let client = HttpClient::new(config(&server)).unwrap();
        let message = run(&client, &user("go")).await.result.unwrap();
        assert_eq!(
            message.content,
            vec![
                call("call_0", "read_file", r#"{"path":"src/main.rs"}"#),
                call("call_0", "glob", r#"{"pattern":"**/*.rs"}"#),
            ]
        );
    }
}

/// A model known to take no images (config `images = false`, or its server said so) gets
/// notes in their place: an MCP tool's screenshot in the history must not make its server
/// refuse every later request.
#[tokio::test]
async fn a_model_without_images_is_sent_notes_in_their_place() {
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("ok", 1).finish("stop").response());
    let mut config = config(&server);
    config.images = Some(false);
    let client = HttpClient::new(config).unwrap();
    let image = keel_llm::Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
    let history = vec![Message::User(UserMessage { content: "look".into(), images: vec![image] })];
    run(&client, &history).await.result.unwrap();
    let body = server.requests()[0].json();
    let user = body["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "user").unwrap().clone();
    assert_eq!(user["content"], "look\n[an image (image/png, PNG 1×1, 1 KB) this model cannot see]");
}

/// With calls read from text, a reply that opens like one but is an answer (a code
/// block) is held while it streams and shown whole before the message completes.
#[tokio::test]
async fn a_code_block_answer_held_as_a_possible_call_is_still_streamed() {
    let answer = "```python\nprint(1)\n```";
    let server = MockServer::start().await;
    server.push(ChatStream::new().text(answer, 4).finish("stop").response());
    let mut config = config(&server);
    config.text_tool_calls = true;
    let client = HttpClient::new(config).unwrap();
    let outcome = run(&client, &user("show me")).await;
    let streamed: String = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, answer);
    assert_eq!(outcome.result.unwrap().text(), answer);
}

/// llama-server closes the connection after every streamed reply, though its headers
/// say keep-alive: a plain-HTTP server gets a new connection for every request, so the
/// next request is answered at once instead of failing on the closed one and being
/// retried (28 retries in a suite run before).
#[tokio::test]
async fn a_server_that_closes_after_each_stream_is_never_sent_a_request_on_a_closed_connection() {
    let server = MockServer::start().await;
    server.close_after_streams();
    server.set_handler(|_| ChatStream::new().text("hi", 2).finish("stop").usage(5, 1).response());
    let client = HttpClient::new(config(&server)).unwrap();
    for turn in 0..3 {
        let outcome = run(&client, &user("hello")).await;
        let retries: Vec<&ModelEvent> =
            outcome.events.iter().filter(|e| matches!(e, ModelEvent::Retrying { .. })).collect();
        assert_eq!(retries, Vec::<&ModelEvent>::new(), "request {turn}");
        assert_eq!(outcome.result.unwrap().text(), "hi", "request {turn}");
    }
    assert_eq!(server.request_count(), 3);
}
