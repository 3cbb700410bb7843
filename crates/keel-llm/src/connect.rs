//! Where a configuration becomes a client: the one module that knows every wire API.
//! The APIs depend on the configuration, never the other way round.

use std::sync::Arc;

use crate::client::ModelClient;
use crate::config::{Api, ProviderConfig};
use crate::error::ModelError;

impl ProviderConfig {
    /// A client for this configuration's API: the provider enum made a
    /// [`ModelClient`]. Fails on a missing model name or a bad URL.
    pub fn client(&self) -> Result<Arc<dyn ModelClient>, ModelError> {
        Ok(match self.api {
            Api::Chat => Arc::new(crate::openai::OpenAiClient::new(self.clone())?),
            Api::Anthropic => Arc::new(crate::anthropic::AnthropicClient::new(self.clone())?),
            Api::Responses => Arc::new(crate::responses::ResponsesClient::new(self.clone())?),
        })
    }
}
