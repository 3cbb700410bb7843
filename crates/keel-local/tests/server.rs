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
    let messages = [Message::User(UserMessage { content: "Read a.txt".into() })];
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
    let client = TemplatedServer::new(config(&server)).unwrap();
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
    assert!(error.message.ends_with("/completion answered without content"), "{}", error.message);
}
