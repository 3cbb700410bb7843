//! `GET {base}/models`: the models a server offers (OpenAI, Anthropic, llama.cpp,
//! Ollama and vLLM all answer `{"data": [{"id": …}, …]}`).

use std::time::Duration;

use crate::config::{Api, ProviderConfig};
use crate::error::{ModelError, ModelErrorKind};

use super::{Auth, headers};

/// Largest models list read.
const LIMIT: usize = 4 * 1024 * 1024;
/// Most names returned.
const MAX_MODELS: usize = 500;

/// The model names the server behind `config` offers, sorted; within ten seconds.
pub async fn list_models(config: &ProviderConfig) -> Result<Vec<String>, ModelError> {
    let error = |kind, message: String| ModelError::new(kind, message);
    let (auth, extra) = match config.api {
        Api::Anthropic => (
            Auth::Header("x-api-key"),
            vec![("anthropic-version", crate::config::ANTHROPIC_VERSION.to_owned())],
        ),
        _ => (Auth::Bearer, Vec::new()),
    };
    let config = ProviderConfig { stream: false, ..config.clone() };
    let headers = headers(&config, auth, &extra)?;
    let url = format!("{}/models", config.base_url.trim_end_matches('/'));
    let client = super::http_client(&url, Duration::from_secs(10))
        .build()
        .map_err(|e| error(ModelErrorKind::Config, format!("cannot build the HTTP client: {e}")))?;
    let ask = async {
        let mut response = client
            .get(&url)
            .headers(headers)
            .send()
            .await
            .map_err(|e| error(ModelErrorKind::Network, format!("cannot reach {url}: {e}")))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| error(ModelErrorKind::Network, format!("reading {url}: {e}")))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > LIMIT {
                return Err(error(ModelErrorKind::InvalidResponse, format!("{url} answered more than 4 MB")));
            }
        }
        if !status.is_success() {
            let kind = if status.as_u16() == 401 || status.as_u16() == 403 {
                ModelErrorKind::Auth
            } else {
                ModelErrorKind::InvalidResponse
            };
            return Err(error(kind, format!("{url} answered {status}")));
        }
        parse(&body).ok_or_else(|| {
            error(ModelErrorKind::InvalidResponse, format!("{url} did not answer a list of models"))
        })
    };
    tokio::time::timeout(Duration::from_secs(10), ask)
        .await
        .map_err(|_| error(ModelErrorKind::Idle, format!("{url} did not answer within 10 s")))?
}

/// The `id`s of `{"data": [{"id": …}]}` (or of `{"models": [{"name"|"id": …}]}`).
fn parse(body: &[u8]) -> Option<Vec<String>> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let list = value.get("data").or_else(|| value.get("models"))?.as_array()?;
    let mut names: Vec<String> = list
        .iter()
        .filter_map(|m| m.get("id").or_else(|| m.get("name")).and_then(|v| v.as_str()))
        .filter(|name| !name.is_empty() && name.len() <= 200 && !name.chars().any(char::is_control))
        .map(str::to_owned)
        .take(MAX_MODELS)
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn model_lists_of_each_server_shape_parse() {
        let openai = br#"{"object": "list", "data": [{"id": "gpt-5-mini"}, {"id": "gpt-5"}]}"#;
        assert_eq!(parse(openai), Some(vec!["gpt-5".to_owned(), "gpt-5-mini".to_owned()]));
        let ollama = br#"{"models": [{"name": "qwen2.5-coder:7b"}]}"#;
        assert_eq!(parse(ollama), Some(vec!["qwen2.5-coder:7b".to_owned()]));
        assert_eq!(parse(b"<html>"), None);
        assert_eq!(parse(br#"{"data": [{"id": "bad\u0007name"}]}"#), Some(vec![]));
    }
}
