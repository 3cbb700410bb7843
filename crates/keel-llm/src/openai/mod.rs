//! The OpenAI-compatible Chat Completions provider: DeepSeek, OpenAI, OpenRouter,
//! Ollama, llama.cpp's llama-server, vLLM, LM Studio — anything that serves
//! `POST {base_url}/chat/completions`.

mod body;
mod config;
mod decode;
mod errors;
mod escapes;
mod run;
mod stream;
mod wire;

use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

pub use config::{MaxTokensField, OpenAiConfig, PRESETS, Preset, ReasoningReplay};

use serde_json::value::RawValue;
use std::sync::{Arc, Mutex};

use crate::client::{ModelClient, ModelInfo, ModelRequest, ModelStream, ToolDefinition};

/// Tool definitions and their wire encoding.
type ToolsJson = (Vec<ToolDefinition>, Arc<RawValue>);
use crate::error::{ModelError, ModelErrorKind};
use run::Run;
pub use stream::{DecodeLimits, StreamDecoder};

/// A Chat Completions client. Cheap to share; keeps a connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    config: OpenAiConfig,
    /// The last tool set and its encoding (compared by content, which is far cheaper
    /// than escaping every description again).
    tools_cache: Arc<Mutex<Option<ToolsJson>>>,
    /// Parsed once: parsing a URL for every request shows up in profiles.
    endpoint: reqwest::Url,
}

impl OpenAiClient {
    /// Builds a client for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        if config.model.trim().is_empty() {
            return Err(ModelError::new(ModelErrorKind::Config, "no model name is set"));
        }
        let endpoint = config.endpoint();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ModelError::new(
                ModelErrorKind::Config,
                format!("the base URL `{}` must start with http:// or https://", config.base_url),
            ));
        }
        // ring, not aws-lc: no cmake, quick to build. Installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.idle_timeout.min(Duration::from_secs(30)))
            .tcp_nodelay(true);
        if endpoint.starts_with("http://") {
            // Plain HTTP (a local server): skip loading the system's CA certificates,
            // which costs milliseconds at every start.
            builder = builder.tls_certs_only(Vec::new());
        }
        let http = builder.build().map_err(|e| {
            ModelError::new(ModelErrorKind::Config, format!("cannot build the HTTP client: {e}"))
        })?;
        let endpoint = reqwest::Url::parse(&endpoint).map_err(|e| {
            ModelError::new(
                ModelErrorKind::Config,
                format!("the base URL `{}` is not a valid URL: {e}", config.base_url),
            )
        })?;
        Ok(OpenAiClient { http, config, endpoint, tools_cache: Arc::default() })
    }

    fn encoded_tools(&self, tools: &[ToolDefinition]) -> serde_json::Result<Arc<RawValue>> {
        let mut cache = match self.tools_cache.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((defs, json)) = cache.as_ref()
            && defs.as_slice() == tools
        {
            return Ok(Arc::clone(json));
        }
        let json: Arc<RawValue> = Arc::from(wire::encode_tools(tools)?);
        *cache = Some((tools.to_vec(), Arc::clone(&json)));
        Ok(json)
    }

    /// The settings in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn request(&self, body: Bytes) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(self.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if self.config.stream {
            request = request.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    }
}

impl ModelClient for OpenAiClient {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let tools = match self.encoded_tools(request.tools) {
            Ok(tools) => tools,
            Err(e) => {
                let error = ModelError::new(ModelErrorKind::Config, format!("cannot encode the tools: {e}"));
                return Box::pin(futures::stream::once(async move { Err(error) }));
            }
        };
        let body = match wire::encode(&request, &self.config, self.config.stream, Some(&tools)) {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                let error =
                    ModelError::new(ModelErrorKind::Config, format!("cannot encode the request: {e}"));
                return Box::pin(futures::stream::once(async move { Err(error) }));
            }
        };
        let tools = request.tools.iter().map(|t| t.name.as_str()).collect();
        let run = Run::new(self, body, tools, cancel);
        Box::pin(futures::stream::unfold(run, Run::next))
    }
}
