#![allow(clippy::unwrap_used, clippy::expect_used)]
//! llama-server driven like the embedded engine: keel renders the template it reads from
//! `/props`, sends a required call's grammar to `/completion`, and turns the reply's
//! tagged call into a real one.

use futures::StreamExt;
use keel_llm::{
    ContentBlock, FinishReason, Message, ModelClient, ModelErrorKind, ModelEvent, ModelRequest,
    ProviderConfig, ToolChoice, ToolDefinition, UserMessage,
};
use keel_local::server::TemplatedServer;
use keel_testkit::http::{MockResponse, MockServer};
use pretty_assertions::assert_eq;
use serde_json::json;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "read_file".into(),
        description: "Read a file.".into(),
        parameters: RawValue::from_string(
            r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#.into(),
        )
        .unwrap(),
    }]
}

fn config(server: &MockServer) -> ProviderConfig {
    let mut config = ProviderConfig::new(server.base_url(), "default");
    config.provider = "llamacpp".into();
    config.max_tokens = 256;
    config
}

async fn reply(
    client: &TemplatedServer,
    choice: ToolChoice,
) -> Result<keel_llm::AssistantMessage, keel_llm::ModelError> {
    let messages = [Message::User(UserMessage::text("Read a.txt"))];
    let tools = tools();
    let request = ModelRequest::new("Be brief.", &messages, &tools).tool_choice(choice);
    let mut stream = client.stream(request, CancellationToken::new());
    let mut last = None;
    while let Some(event) = stream.next().await {
        if let ModelEvent::Completed(message) = event? {
            last = Some(message);
        }
    }
    Ok(last.expect("a completed message"))
}

#[tokio::test]
async fn a_required_call_is_sent_with_the_grammar_and_comes_back_as_a_call() {
    let server = MockServer::start().await;
    let template = fixture("qwen2.5-coder.jinja");
    server.set_handler(move |request| match request.path.as_str() {
        "/props" => MockResponse::json(
            200,
            &json!({"chat_template": template, "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}),
        ),
        "/completion" => MockResponse::json(
            200,
            &json!({
                "content": "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>",
                "stop_type": "eos", "tokens_evaluated": 120, "tokens_predicted": 20, "timings": {"cache_n": 100}
            }),
        ),
        _ => MockResponse::json(404, &json!({"error": "no such path"})),
    });
    let client = TemplatedServer::new(config(&server)).unwrap().seed(Some(7));
    let message = reply(&client, ToolChoice::Required).await.unwrap();
    assert_eq!(message.finish_reason, FinishReason::ToolUse);
    let calls: Vec<_> = message.tool_calls().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "read_file");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&calls[0].1).unwrap(), json!({"path": "a.txt"}));
    assert_eq!(
        (message.usage.input_tokens, message.usage.output_tokens, message.usage.cached_tokens),
        (120, 20, 100)
    );

    // The prompt is the mended template's rendering; the grammar names the tool.
    let requests = server.requests();
    let posted: Vec<_> = requests.iter().filter(|r| r.path == "/completion").collect();
    let body = posted[0].json();
    let prompt = body["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("<|im_start|>system\nBe brief."), "{prompt}");
    assert!(prompt.contains("<tool_call>\n{\"name\": <function-name>"), "{prompt}");
    assert!(prompt.ends_with("<|im_start|>user\nRead a.txt<|im_end|>\n<|im_start|>assistant\n"), "{prompt}");
    assert!(body["grammar"].as_str().unwrap().contains("read_file"));
    assert_eq!((body["n_predict"].clone(), body["cache_prompt"].clone()), (json!(256), json!(true)));
    // A required call at the call temperature (none configured), with the seed given.
    assert_eq!(body["temperature"].as_f64().map(|t| (t * 10.0).round()), Some(2.0));
    assert_eq!(body["seed"], json!(7));

    // /props is read once; a free step sends no grammar, and text stays text.
    server.set_handler(|request| match request.path.as_str() {
        "/completion" => {
            MockResponse::json(200, &json!({"content": "Done: a.txt says hi.", "stop_type": "limit"}))
        }
        _ => MockResponse::json(500, &json!({"error": "props asked twice"})),
    });
    let message = reply(&client, ToolChoice::Auto).await.unwrap();
    assert_eq!(message.content, vec![ContentBlock::Text { text: "Done: a.txt says hi.".into() }]);
    assert_eq!(message.finish_reason, FinishReason::Length);
    let last = server.requests().last().unwrap().json();
    assert_eq!((last.get("grammar"), last.get("temperature")), (None, None));
}

#[tokio::test]
async fn a_server_without_a_template_or_with_an_error_says_so() {
    let server = MockServer::start().await;
    server.set_handler(|request| match request.path.as_str() {
        "/props" => MockResponse::json(200, &json!({"chat_template": ""})),
        _ => MockResponse::json(404, &json!({})),
    });
    let client = TemplatedServer::new(config(&server)).unwrap();
    let error = reply(&client, ToolChoice::Required).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Config);
    assert!(
        error.message.contains("names no chat_template; start llama-server with --jinja"),
        "{}",
        error.message
    );

    let server = MockServer::start().await;
    let template = fixture("qwen2.5-coder.jinja");
    server.set_handler(move |request| match request.path.as_str() {
        "/props" => MockResponse::json(200, &json!({"chat_template": template})),
        _ => MockResponse::json(500, &json!({"error": {"message": "slot unavailable"}})),
    });
    // A 500 is retried as on every API; with no retries it is the error at once.
    let client = TemplatedServer::new({
        let mut config = config(&server);
        config.life.max_retries = 0;
        config
    })
    .unwrap();
    let error = reply(&client, ToolChoice::Required).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Server);
    assert!(error.message.contains("500") && error.message.contains("slot unavailable"), "{}", error.message);

    // A reply that is not what /completion answers.
    let server = MockServer::start().await;
    let template = fixture("qwen2.5-coder.jinja");
    server.set_handler(move |request| match request.path.as_str() {
        "/props" => MockResponse::json(200, &json!({"chat_template": template})),
        _ => MockResponse::json(200, &json!({"choices": []})),
    });
    let client = TemplatedServer::new(config(&server)).unwrap();
    let error = reply(&client, ToolChoice::Required).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
    assert!(error.message.contains("not a llama.cpp completion (no content)"), "{}", error.message);
}

/// One event of llama-server's `/completion` stream.
fn event(value: serde_json::Value) -> Vec<u8> {
    format!("data: {value}\n\n").into_bytes()
}

/// A piece of text as the server streams it.
fn piece(text: &str) -> Vec<u8> {
    event(json!({"content": text, "stop": false}))
}

/// The last event: why it stopped and what it cost.
fn last(stop_type: &str) -> Vec<u8> {
    event(json!({"content": "", "stop": true, "stop_type": stop_type, "tokens_evaluated": 120,
                 "tokens_predicted": 20, "timings": {"cache_n": 100}}))
}

/// A server with Qwen's template whose `/completion` answers by `reply` (given the
/// number of the request, from 0).
async fn templated(reply: impl Fn(usize) -> MockResponse + Send + Sync + 'static) -> MockServer {
    let template = fixture("qwen2.5-coder.jinja");
    let count = std::sync::atomic::AtomicUsize::new(0);
    let server = MockServer::start().await;
    server.set_handler(move |request| match request.path.as_str() {
        "/props" => MockResponse::json(
            200,
            &json!({"chat_template": template, "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}),
        ),
        "/completion" => reply(count.fetch_add(1, std::sync::atomic::Ordering::SeqCst)),
        _ => MockResponse::json(404, &json!({"error": "no such path"})),
    });
    server
}

/// Every item of one request's stream, up to its message or error.
async fn events(
    client: &TemplatedServer,
    choice: ToolChoice,
) -> Vec<Result<ModelEvent, keel_llm::ModelError>> {
    let messages = [Message::User(UserMessage::text("Read a.txt"))];
    let tools = tools();
    let request = ModelRequest::new("Be brief.", &messages, &tools).tool_choice(choice);
    client.stream(request, CancellationToken::new()).collect().await
}

fn completions(server: &MockServer) -> Vec<serde_json::Value> {
    server.requests().iter().filter(|r| r.path == "/completion").map(|r| r.json()).collect()
}

#[tokio::test]
async fn text_streams_as_it_is_generated_and_the_call_comes_with_the_message() {
    let server = templated(|_| {
        MockResponse::chunks([
            piece("Reading it. "),
            piece("<tool_call>\n{\"name\": \"read_file\", "),
            piece("\"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>"),
            last("eos"),
        ])
        .delay_each(std::time::Duration::from_millis(300))
    })
    .await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let messages = [Message::User(UserMessage::text("Read a.txt"))];
    let tools = tools();
    let request = ModelRequest::new("Be brief.", &messages, &tools).tool_choice(ToolChoice::Required);
    let mut stream = client.stream(request, CancellationToken::new());
    // The first piece arrives while the server is still generating the rest.
    let first = stream.next().await.unwrap().unwrap();
    let at = std::time::Instant::now();
    assert_eq!(first, ModelEvent::TextDelta("Reading it. ".into()));
    let mut rest = Vec::new();
    while let Some(item) = stream.next().await {
        rest.push(item.unwrap());
    }
    assert!(at.elapsed() >= std::time::Duration::from_millis(400), "the first delta came at the end");
    // The call the model writes as text is not streamed as text (clients would show it).
    assert!(!rest.iter().any(|e| matches!(e, ModelEvent::TextDelta(_))), "{rest:?}");
    let Some(ModelEvent::Completed(message)) = rest.last() else { panic!("{rest:?}") };
    assert_eq!(message.finish_reason, FinishReason::ToolUse);
    let call = message.tool_calls().next().unwrap();
    assert_eq!((call.name.as_str(), call.arguments.as_str()), ("read_file", r#"{"path":"a.txt"}"#));
    assert_eq!(
        (message.usage.input_tokens, message.usage.output_tokens, message.usage.cached_tokens),
        (120, 20, 100)
    );
    assert_eq!(message.origin.as_ref().map(|o| o.provider.as_str()), Some("llamacpp"));
    // A required call: streamed, under the grammar, at the call temperature.
    let body = &completions(&server)[0];
    assert_eq!(body["stream"], json!(true));
    assert!(body["grammar"].as_str().unwrap().contains("read_file"), "{body}");
    assert_eq!(body["temperature"].as_f64().map(|t| (t * 10.0).round()), Some(2.0));
}

#[tokio::test]
async fn a_503_before_any_output_is_retried_after_the_time_the_server_asks() {
    let server = templated(|n| match n {
        0 => MockResponse::json(
            503,
            &json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
        )
        .header("retry-after", "0.05"),
        _ => MockResponse::chunks([piece("Done."), last("eos")]),
    })
    .await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let items = events(&client, ToolChoice::Auto).await;
    let items: Vec<ModelEvent> = items.into_iter().map(Result::unwrap).collect();
    let ModelEvent::Retrying { attempt, delay, reason, .. } = &items[0] else { panic!("{items:?}") };
    assert_eq!((*attempt, *delay), (1, std::time::Duration::from_millis(50)));
    assert!(reason.contains("503") && reason.contains("Loading model"), "{reason}");
    assert_eq!(items[1], ModelEvent::TextDelta("Done.".into()));
    let Some(ModelEvent::Completed(message)) = items.last() else { panic!("{items:?}") };
    assert_eq!(message.text(), "Done.");
    assert_eq!(completions(&server).len(), 2);
}

#[tokio::test]
async fn a_stream_cut_after_output_is_an_error_not_a_retry() {
    let server = templated(|_| {
        MockResponse::chunks([piece("Line one"), piece(", line two"), last("eos")]).drop_after(2)
    })
    .await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let items = events(&client, ToolChoice::Auto).await;
    assert_eq!(items[0].as_ref().unwrap(), &ModelEvent::TextDelta("Line one".into()));
    let error = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Network, "{}", error.message);
    assert!(!items.iter().any(|i| matches!(i, Ok(ModelEvent::Retrying { .. }))), "{items:?}");
    assert_eq!(completions(&server).len(), 1);
}

#[tokio::test]
async fn a_reply_cut_at_the_token_cap_finishes_with_length() {
    let server = templated(|_| MockResponse::chunks([piece("Once upon a time"), last("limit")])).await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let items = events(&client, ToolChoice::Auto).await;
    let Some(Ok(ModelEvent::Completed(message))) = items.last() else { panic!("{items:?}") };
    assert_eq!(message.finish_reason, FinishReason::Length);
    assert_eq!(message.text(), "Once upon a time");
    // A free reply: no grammar, the server's temperature, the configured cap.
    let body = &completions(&server)[0];
    assert_eq!((body.get("grammar"), body.get("temperature")), (None, None));
    assert_eq!(body["n_predict"], json!(256));
}

#[tokio::test]
async fn a_prompt_past_the_context_is_an_overflow_by_the_servers_error_type() {
    let server = templated(|_| {
        MockResponse::json(
            400,
            &json!({"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9412, "n_ctx": 8192,
                              "message": "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it"}}),
        )
    }).await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let error = reply(&client, ToolChoice::Required).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::ContextOverflow, "{}", error.message);
    assert_eq!(completions(&server).len(), 1, "not retried");
}

#[tokio::test]
async fn with_streaming_off_the_whole_reply_is_read() {
    let server = templated(|_| {
        MockResponse::json(
            200,
            &json!({"content": "All done.", "stop": true, "stop_type": "eos", "tokens_predicted": 3}),
        )
    })
    .await;
    let client = TemplatedServer::new(ProviderConfig { stream: false, ..config(&server) }).unwrap();
    let message = reply(&client, ToolChoice::Auto).await.unwrap();
    assert_eq!((message.text().as_str(), message.usage.output_tokens), ("All done.", 3));
    assert_eq!(completions(&server)[0]["stream"], json!(false));
}

#[tokio::test]
async fn cancelling_ends_the_stream_while_the_server_generates() {
    let server = templated(|_| MockResponse::chunks([piece("Thinking"), last("eos")]).stall_after(1)).await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let messages = [Message::User(UserMessage::text("Read a.txt"))];
    let tools = tools();
    let request = ModelRequest::new("Be brief.", &messages, &tools);
    let cancel = CancellationToken::new();
    let mut stream = client.stream(request, cancel.clone());
    assert_eq!(stream.next().await.unwrap().unwrap(), ModelEvent::TextDelta("Thinking".into()));
    cancel.cancel();
    let error =
        tokio::time::timeout(std::time::Duration::from_secs(5), stream.next()).await.unwrap().unwrap();
    assert_eq!(error.unwrap_err().kind, ModelErrorKind::Cancelled);
    assert!(stream.next().await.is_none());
}

/// A call argument that repeats one line 40 times: the model stuck, as a 1.5B model was
/// on `pip install tasker` (suite run of 2026-12-06).
fn stuck_reply() -> MockResponse {
    let mut chunks = vec![piece("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"")];
    chunks.extend((0..40).map(|_| piece("pip install tasker\\n")));
    chunks.extend([piece("\"}}\n</tool_call>"), last("eos")]);
    MockResponse::chunks(chunks)
}

/// A reply stuck on one line is stopped there and asked for once more, hotter and with
/// the next seed (a `Retrying` event first, so the loop drops what it had); a reply stuck
/// again fails as `repeating` instead of running on to `n_predict`.
#[tokio::test]
async fn a_reply_stuck_on_one_line_is_sampled_again_once_then_fails() {
    let server = templated(|n| match n {
        0 => stuck_reply(),
        _ => MockResponse::chunks([
            piece(
                "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>",
            ),
            last("eos"),
        ]),
    })
    .await;
    let client = TemplatedServer::new(config(&server)).unwrap().seed(Some(7));
    let first = events(&client, ToolChoice::Required).await;
    let retries: Vec<&ModelEvent> = first
        .iter()
        .filter_map(|e| e.as_ref().ok())
        .filter(|e| matches!(e, ModelEvent::Retrying { .. }))
        .collect();
    assert_eq!(retries.len(), 1, "{first:?}");
    let ModelEvent::Retrying { reason, .. } = retries[0] else { unreachable!() };
    assert!(reason.contains("kept repeating itself") && reason.ends_with("sampling again"), "{reason}");
    let Some(Ok(ModelEvent::Completed(message))) = first.last() else { panic!("{first:?}") };
    assert_eq!(message.tool_calls().next().unwrap().arguments, r#"{"path":"a.txt"}"#);
    let bodies = completions(&server);
    assert_eq!(bodies.len(), 2);
    assert_eq!((bodies[0]["seed"].clone(), bodies[1]["seed"].clone()), (json!(7), json!(8)));
    assert_eq!(bodies[1]["temperature"].as_f64().map(|t| (t * 10.0).round()), Some(8.0));

    let server = templated(|_| stuck_reply()).await;
    let client = TemplatedServer::new(config(&server)).unwrap();
    let events = events(&client, ToolChoice::Required).await;
    let Some(Err(error)) = events.last() else { panic!("{events:?}") };
    assert_eq!(error.kind, ModelErrorKind::Repeating);
    assert!(
        error.message.ends_with("also when sampled again; try rephrasing the task or a larger model"),
        "{}",
        error.message
    );
    assert_eq!(completions(&server).len(), 2, "asked twice, not more");
}
