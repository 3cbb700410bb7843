#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `list_models` against a mock server: the key goes where each API wants it, the
//! names come back sorted, and a refusal is a clear error.

use keel_llm::{Api, ModelErrorKind, ProviderConfig, list_models};
use keel_testkit::{MockResponse, MockServer};
use serde_json::json;

#[tokio::test]
async fn the_servers_models_are_listed_with_the_key_each_api_wants() {
    let server = MockServer::start().await;
    server.set_handler(|request| {
        assert_eq!((request.method.as_str(), request.path.as_str()), ("GET", "/v1/models"));
        match (request.header("authorization"), request.header("x-api-key")) {
            (Some("Bearer sk-test"), None) | (None, Some("sk-test")) => {
                MockResponse::json(200, &json!({"data": [{"id": "b-model"}, {"id": "a-model"}]}))
            }
            _ => MockResponse::json(401, &json!({"error": "no key"})),
        }
    });
    let mut config = ProviderConfig::new(server.base_url(), "m");
    config.api_key = Some("sk-test".into());
    assert_eq!(list_models(&config).await.unwrap(), ["a-model", "b-model"]);
    let anthropic = ProviderConfig { api: Api::Anthropic, ..config.clone() };
    assert_eq!(list_models(&anthropic).await.unwrap(), ["a-model", "b-model"]);
    let no_key = ProviderConfig { api_key: None, ..config };
    let error = list_models(&no_key).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Auth);
    assert!(error.message.contains("401"), "{}", error.message);
}
