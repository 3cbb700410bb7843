//! The Anthropic Messages provider: `POST {base_url}/messages` (Anthropic's API, and
//! servers that speak it, such as llama.cpp's llama-server). An encoder (`wire`) and
//! a decoder (`decode`) over the shared `transport`.
//!
//! The key goes in `x-api-key`, with `anthropic-version: 2023-06-01`; a thinking
//! budget adds the interleaved-thinking beta so the model thinks between tool calls
//! (adaptive thinking does that by itself). 429 and 529 (overloaded) are retried with
//! capped backoff honouring `retry-after`, like every 5xx but 501.

mod decode;
mod wire;

use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::client::{ModelClient, ModelRequest, ModelStream};
use crate::config::{Api, ProviderConfig, Thinking};
use crate::error::{ModelError, ModelErrorKind};
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Auth, Decode, DecodeLimits, EventStream, ToolsCache, Transport, failed};

pub use crate::config::ANTHROPIC_VERSION;

/// The beta that lets a model with a thinking budget think between tool calls.
const INTERLEAVED_THINKING: &str = "interleaved-thinking-2025-05-14";

/// How an Anthropic server is named in errors.
const NAMES: ApiNames = ApiNames { api: "an Anthropic Messages API", document: "a message (no content)" };

/// An Anthropic Messages client. Cheap to share; keeps a connection pool.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    transport: Transport,
    config: ProviderConfig,
    tools: Arc<ToolsCache>,
}

/// A fresh decoder for one attempt.
fn decoder(limits: DecodeLimits) -> Box<dyn Decode> {
    Box::new(EventStream::new(limits, decode::Decoder::with_output_limit(limits.max_output_bytes)))
}

impl AnthropicClient {
    /// Builds a client for `config`, whatever its `api` says.
    pub fn new(config: ProviderConfig) -> Result<Self, ModelError> {
        let config = ProviderConfig { api: Api::Anthropic, ..config };
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Thinking::Budget(_) = config.thinking {
            headers.push(("anthropic-beta", INTERLEAVED_THINKING.to_owned()));
        }
        let transport = Transport::new(&config, Auth::Header("x-api-key"), &headers, NAMES)?;
        Ok(AnthropicClient { transport, config, tools: Arc::default() })
    }

    /// The settings in use.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The body this client sends for `request` (tests, debugging).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Vec<u8>, ModelError> {
        self.tools
            .get(request.tools, wire::encode_tools)
            .and_then(|tools| wire::encode(request, &self.config, &self.info(), &tools))
            .map_err(|e| ModelError::new(ModelErrorKind::Config, format!("cannot encode the request: {e}")))
    }
}

impl ModelClient for AnthropicClient {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        self.config.context_window
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let body = match self.request_body(&request) {
            Ok(body) => Bytes::from(body),
            Err(error) => return failed(error),
        };
        let names = request.tools.iter().map(|t| t.name.as_str()).collect();
        let limits = self.transport.settings().limits;
        self.transport.stream(body, names, Box::new(move || decoder(limits)), cancel)
    }
}
