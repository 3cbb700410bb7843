//! One client for every HTTP wire API. A [`WireApi`] says how one API names itself,
//! where its key goes, how a request is encoded and how a reply is decoded; the
//! [`HttpClient`] does the rest on the shared transport (retries, time bounds, size
//! bounds, text tool calls). Adding an API is a folder with its `WireApi` and one line
//! in `connect.rs`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::client::{ModelClient, ModelRequest, ModelStream, ToolDefinition};
use crate::config::ProviderConfig;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Auth, Decode, DecodeLimits, ToolsCache, Transport, failed};

/// What makes one wire API different from the others. Implemented by a unit type per
/// API; the client holds it as a `&'static dyn WireApi`.
pub(crate) trait WireApi: std::fmt::Debug + Sync {
    /// How the API and its whole-body reply are named in errors.
    fn names(&self) -> ApiNames;

    /// Where the key goes.
    fn auth(&self) -> Auth {
        Auth::Bearer
    }

    /// The API's own headers for `config` (sent after the key, before the config's own).
    fn headers(&self, _config: &ProviderConfig) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// The `tools` array, kept by the client while the tools stay the same.
    fn encode_tools(&self, tools: &[ToolDefinition]) -> serde_json::Result<Box<RawValue>>;

    /// The request body for the model `me`; `tools` is [`WireApi::encode_tools`] of
    /// `request.tools`.
    fn encode(
        &self,
        request: &ModelRequest<'_>,
        config: &ProviderConfig,
        me: &ModelInfo,
        tools: &RawValue,
    ) -> serde_json::Result<Vec<u8>>;

    /// A fresh decoder for one attempt.
    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decode>;
}

/// A client for one server speaking one wire API. Cheap to clone; clones share the
/// connection pool.
#[derive(Debug, Clone)]
pub struct HttpClient {
    transport: Transport,
    config: Arc<ProviderConfig>,
    tools: Arc<ToolsCache>,
    wire: &'static dyn WireApi,
}

impl HttpClient {
    /// A client for `config` speaking `wire` ([`HttpClient::new`] picks it from
    /// `config.api`).
    pub(crate) fn speaking(config: ProviderConfig, wire: &'static dyn WireApi) -> Result<Self, ModelError> {
        let transport = Transport::new(&config, wire.auth(), &wire.headers(&config), wire.names())?;
        Ok(HttpClient { transport, config: Arc::new(config), tools: Arc::default(), wire })
    }

    /// The settings in use.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The body this client sends for `request` (tests, debugging).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Vec<u8>, ModelError> {
        let wire = self.wire;
        let tools = self
            .tools
            .get(request.tools, |tools| wire.encode_tools(tools))
            .map_err(|e| ModelError::new(ModelErrorKind::Config, format!("cannot encode the tools: {e}")))?;
        // A model known to take no images gets notes in their place (a tool's screenshot,
        // history from before a switch): its server would refuse every later request. Any
        // other gets the newest images that fit one request's budget.
        let stripped = if self.config.images == Some(false) {
            crate::without_images(request.messages)
        } else {
            crate::within_image_budget(request.messages, crate::MAX_REQUEST_IMAGE_BYTES)
        };
        let mut request = *request;
        if let Some(messages) = &stripped {
            request.messages = messages;
        }
        wire.encode(&request, &self.config, &self.info(), &tools)
            .map_err(|e| ModelError::new(ModelErrorKind::Config, format!("cannot encode the request: {e}")))
    }
}

impl ModelClient for HttpClient {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        self.config.context_window
    }

    fn accepts_images(&self) -> Option<bool> {
        self.config.images
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let body = match self.request_body(&request) {
            Ok(body) => Bytes::from(body),
            Err(error) => return failed(error),
        };
        let names = request.tools.iter().map(|t| t.name.as_str()).collect();
        let limits = self.transport.settings().limits;
        let wire = self.wire;
        self.transport.stream(body, names, Box::new(move || wire.decoder(limits)), cancel)
    }
}
