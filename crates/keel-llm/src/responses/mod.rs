//! The OpenAI Responses provider: `POST {base_url}/responses` (OpenAI, and servers
//! that speak it, such as llama.cpp's llama-server). An encoder (`wire`) and a
//! decoder (`decode`) over the shared `transport`.
//!
//! Nothing is stored at the provider (`store: false`): each request carries the whole
//! history, reasoning included as the encrypted items the model returned, so a
//! reasoning model keeps its reasoning from one step to the next.

mod decode;
mod wire;

use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::client::{ModelClient, ModelRequest, ModelStream};
use crate::config::{Api, ProviderConfig};
use crate::error::{ModelError, ModelErrorKind};
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Auth, Decode, DecodeLimits, EventStream, ToolsCache, Transport, failed};

/// How a Responses server is named in errors.
const NAMES: ApiNames = ApiNames { api: "an OpenAI Responses API", document: "a response (no output)" };

/// An OpenAI Responses client. Cheap to share; keeps a connection pool.
#[derive(Debug, Clone)]
pub struct ResponsesClient {
    transport: Transport,
    config: ProviderConfig,
    tools: Arc<ToolsCache>,
}

/// A fresh decoder for one attempt.
fn decoder(limits: DecodeLimits) -> Box<dyn Decode> {
    Box::new(EventStream::new(limits, decode::Decoder::with_output_limit(limits.max_output_bytes)))
}

impl ResponsesClient {
    /// Builds a client for `config`, whatever its `api` says.
    pub fn new(config: ProviderConfig) -> Result<Self, ModelError> {
        let config = ProviderConfig { api: Api::Responses, ..config };
        let transport = Transport::new(&config, Auth::Bearer, &[], NAMES)?;
        Ok(ResponsesClient { transport, config, tools: Arc::default() })
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

impl ModelClient for ResponsesClient {
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
