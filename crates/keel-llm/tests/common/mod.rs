#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Running a provider against the mock server: fixtures served in 1-, 7-, 64-byte and
//! whole chunks, requests that collect every event.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_llm::{
    AssistantMessage, CancellationToken, Message, ModelClient, ModelError, ModelEvent, ModelRequest,
    ProviderConfig, ToolDefinition, UserMessage,
};
use keel_testkit::{MockResponse, MockServer};
use serde_json::value::RawValue;

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

pub fn split(bytes: &[u8], size: usize) -> Vec<Vec<u8>> {
    bytes.chunks(size.max(1)).map(<[u8]>::to_vec).collect()
}

pub fn tools() -> Vec<ToolDefinition> {
    ["read_file", "shell", "get_weather", "list_files"]
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: format!("The {name} tool."),
            parameters: RawValue::from_string(r#"{"type":"object","properties":{}}"#.into()).unwrap(),
        })
        .collect()
}

pub fn user(text: &str) -> Vec<Message> {
    vec![Message::User(UserMessage::text(text))]
}

/// A config of `api` for the mock server, with quick retries.
pub fn config(server: &MockServer, api: keel_llm::Api) -> ProviderConfig {
    let mut config = ProviderConfig::for_api(api, server.base_url(), "test-model");
    config.provider = "test".into();
    config.api_key = Some("sk-test".into());
    config.api_key_env = Some("TEST_API_KEY".into());
    config.life.max_retry_delay = Duration::from_millis(50);
    config
}

pub struct Outcome {
    pub events: Vec<ModelEvent>,
    pub result: Result<AssistantMessage, ModelError>,
}

/// Streams one request to its end.
pub async fn run(client: &dyn ModelClient, messages: &[Message]) -> Outcome {
    let tools = tools();
    let request = ModelRequest::new("You are terse.", messages, &tools).cache_key("session-1");
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

/// The fixture's message, the same whatever the chunk size (1, 7, 64 bytes, whole).
pub async fn through_splits(
    name: &str,
    api: keel_llm::Api,
    configure: impl Fn(&mut ProviderConfig),
) -> AssistantMessage {
    let bytes = fixture(name);
    let mut last: Option<AssistantMessage> = None;
    for size in [1, 7, 64, bytes.len()] {
        let server = MockServer::start().await;
        server.push(MockResponse::chunks(split(&bytes, size)));
        let mut config = config(&server, api);
        configure(&mut config);
        let client: Arc<dyn ModelClient> = config.client().unwrap();
        let message = run(&*client, &user("go")).await.result.unwrap();
        if let Some(previous) = &last {
            assert_eq!(&message, previous, "split size {size} changed the result");
        }
        last = Some(message);
    }
    last.unwrap()
}

/// The fixture's error, the same whatever the chunk size (1, 7, 64 bytes, whole); no
/// retries, so an error before any output surfaces too. Returns it with the events
/// streamed before it.
pub async fn error_through_splits(name: &str, api: keel_llm::Api) -> (ModelError, Vec<ModelEvent>) {
    let bytes = fixture(name);
    let mut last: Option<(ModelError, Vec<ModelEvent>)> = None;
    for size in [1, 7, 64, bytes.len()] {
        let server = MockServer::start().await;
        server.push(MockResponse::chunks(split(&bytes, size)));
        let mut config = config(&server, api);
        config.life.max_retries = 0;
        let client: Arc<dyn ModelClient> = config.client().unwrap();
        let outcome = run(&*client, &user("go")).await;
        let got = (outcome.result.unwrap_err(), outcome.events);
        if let Some(previous) = &last {
            assert_eq!(&got, previous, "split size {size} changed the result");
        }
        last = Some(got);
    }
    last.unwrap()
}

/// Retry events: (attempt, delay).
pub fn retries(events: &[ModelEvent]) -> Vec<(u32, Duration)> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Retrying { attempt, delay, .. } => Some((*attempt, *delay)),
            _ => None,
        })
        .collect()
}
