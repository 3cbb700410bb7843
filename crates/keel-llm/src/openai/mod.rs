//! The OpenAI-compatible Chat Completions provider: DeepSeek, OpenAI, OpenRouter,
//! Ollama, llama.cpp's llama-server, vLLM, LM Studio — anything that serves
//! `POST {base_url}/chat/completions`. An encoder (`wire`) and a decoder
//! (`decode`, `stream`) over the shared `transport`.

mod decode;
mod stream;
mod wire;

use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

pub use crate::config::{MaxTokensField, PRESETS, Preset, ReasoningReplay};
pub use crate::transport::DecodeLimits;
pub use stream::StreamDecoder;

use crate::client::{ModelClient, ModelRequest, ModelStream};
use crate::config::ProviderConfig;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Auth, ToolsCache, Transport, failed};

/// The settings of a Chat Completions client: the [`ProviderConfig`] every provider
/// shares (its `api` is not consulted by [`OpenAiClient`]).
pub type OpenAiConfig = ProviderConfig;

/// How a Chat Completions server is named in errors.
const NAMES: ApiNames =
    ApiNames { api: "an OpenAI-compatible API", document: "a chat completion (no choices)" };

/// A Chat Completions client. Cheap to share; keeps a connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    transport: Transport,
    config: OpenAiConfig,
    tools: Arc<ToolsCache>,
}

impl OpenAiClient {
    /// Builds a client for `config`, whatever its `api` says.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let config = OpenAiConfig { api: crate::config::Api::Chat, ..config };
        let transport = Transport::new(&config, Auth::Bearer, &[], NAMES)?;
        Ok(OpenAiClient { transport, config, tools: Arc::default() })
    }

    /// The settings in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

impl ModelClient for OpenAiClient {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        self.config.context_window
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let tools = match self.tools.get(request.tools, wire::encode_tools) {
            Ok(tools) => tools,
            Err(e) => {
                return failed(ModelError::new(
                    ModelErrorKind::Config,
                    format!("cannot encode the tools: {e}"),
                ));
            }
        };
        let me = self.info();
        let body = match wire::encode(&request, &self.config, &me, Some(&tools)) {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                return failed(ModelError::new(
                    ModelErrorKind::Config,
                    format!("cannot encode the request: {e}"),
                ));
            }
        };
        let names = request.tools.iter().map(|t| t.name.as_str()).collect();
        let limits = self.transport.settings().limits;
        self.transport.stream(body, names, Box::new(move || stream::decoder(limits)), cancel)
    }
}
